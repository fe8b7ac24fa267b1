/* tests/gindriver/gd_rail.c: the rail subcommand (gd_tests.h). NCCL 2.30
 * without cross-NIC support (NCCL_CROSS_NIC=0 on every rank) connects GIN
 * per rail: every rank listens and the handles are all-gathered as always,
 * but connect gets only the handles of the rank's rail (the ranks of its
 * local index, one a node), in node order (gd_connect_rail). The same job
 * is connected three times here:
 *   FULL   - every handle: the collComm's size, rank, peers and live QPs;
 *   RAIL   - per rail: the collComm is the rail (size, rank, each peer the
 *            rank whose handle filled its slot), its QPs are those of the
 *            rail peers alone (softnic's live counts, compared with FULL's),
 *            and puts with ADD signals to every rail rank (addressed by rail
 *            rank) land byte-exact where they belong, sums exact;
 *   mistake - rail 0's first rank passes, in its last slot, the handle of
 *            that node's next local rank (another rail's): the rank whose
 *            slot it took is refused at once (its HELLO names a nonce that
 *            is not the handle given for it), rail 0 fails within the
 *            handshake timeout without a hang, and every other rail
 *            connects and moves data (the foreign rank is never contacted). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "gd.h"
#include "gd_tests.h"
#include "gin.h"
#include "handshake.h"

#define RAIL_DEADLINE_S 120.0

/* What the ranks of the mistake phase report to each other. */
struct rail_share {
    int rc[GD_MAX_RANKS];      /* connect's result */
    double took[GD_MAX_RANKS]; /* seconds connect took */
};

struct rail_rank {
    struct gd_rank *r;
    const struct gd_opts *o;
    int rails, nodes, local, rr; /* rr: rank in the rail (its node) */
    objects_fn objects;
};

objects_fn gd_find_objects(void)
{
    void *v = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
    objects_fn f = NULL;
    if (v)
        *(void **)&f = dlsym(v, "softnic_ctl_objects");
    return f;
}

static int count(const struct rail_rank *x, struct gd_objs *o)
{
    if (x->objects(o)) {
        printf("rank %d: softnic_ctl_objects failed\n", x->r->rank);
        return 1;
    }
    return 0;
}

static uint64_t handle_nonce(const uint8_t *h)
{
    struct hs_handle p;
    char err[HS_ERR_LEN];
    return hs_handle_parse(h, HS_HANDLE_SIZE, &p, err) == HS_OK ? p.nonce : 0;
}

/* The collComm as connected with `rails` ranks a node: its size and rank are
 * the rail's, and its peer p is the rank whose handle was given in slot p
 * (the nonce its handshake carried). *qps: the QPs it holds. */
static int check_coll(const struct rail_rank *x, int rails, int *qps)
{
    const struct gd_rank *r = x->r;
    const struct gin_coll *c = r->coll;
    int nodes = r->nranks / rails, local = r->rank % rails, me = r->rank / rails;
    if (c->nranks != nodes || c->rank != me) {
        printf("rank %d: collComm of %d ranks as rank %d, expected %d ranks as rank %d\n", r->rank, c->nranks,
               c->rank, nodes, me);
        return 1;
    }
    *qps = 0;
    for (int p = 0; p < nodes; p++) {
        uint64_t want = handle_nonce(r->handles[p * rails + local]);
        if (!want || c->peers[p].nonce != want) {
            printf("rank %d: collComm peer %d has nonce 0x%llx, the handle of rank %d 0x%llx\n", r->rank, p,
                   (unsigned long long)c->peers[p].nonce, p * rails + local, (unsigned long long)want);
            return 1;
        }
        *qps += c->peers[p].nqps;
    }
    return 0;
}

/* One connect (rails 1: FULL) on a fresh listen, closed after it as NCCL
 * does; *d: the verbs objects it added, *took: its seconds. */
static ncclResult_t connect_counted(struct rail_rank *x, int rails, struct gd_objs *d, double *took)
{
    struct gd_rank *r = x->r;
    struct gd_objs a, b;
    if (count(x, &a))
        return ncclInternalError;
    double t0 = gd_now();
    ncclResult_t e = gd_connect_rail(r, rails);
    *took = gd_now() - t0;
    r->gin->closeListen(r->listen);
    r->listen = NULL;
    if (count(x, &b))
        return ncclInternalError;
    d->qps = b.qps - a.qps, d->cqs = b.cqs - a.cqs, d->mrs = b.mrs - a.mrs;
    return e;
}

static void *alloc_host(size_t len)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, len))
        return NULL;
    memset(p, 0, len);
    return p;
}

static uint64_t rail_put_id(uint64_t seed, int round, int s, int d, int i)
{
    return seed ^ ((uint64_t)round << 48 | (uint64_t)s << 40 | (uint64_t)d << 32 | (uint64_t)i);
}

static uint64_t rail_add(int s, int i)
{
    return ((uint64_t)(s + 1) << 33) + (uint64_t)i * 7 + 1;
}

/* Puts to every rank of the rail, this one included, addressed by rail
 * rank: `puts` a peer, each with an ADD signal into the word of this rank's
 * rail rank; put i from s to d carries content of (world ranks) s, d, i.
 * Then every byte of the window (the guard 0xee around each put) and every
 * signal word's sum. join_only: this rank has no collComm and only joins the
 * barriers. */
static int rail_traffic(struct rail_rank *x, int round, int join_only)
{
    struct gd_rank *r = x->r;
    if (join_only)
        return gd_barrier(r) || gd_barrier(r);
    int m = x->nodes, rr = x->rr, k = x->o->puts, me = r->rank;
    size_t slot = x->o->slot, chunk = slot / (size_t)k;
    uint8_t *src = alloc_host((size_t)m * slot), *win = alloc_host((size_t)m * slot);
    uint64_t *sig = alloc_host(4096);
    void *msrc = NULL, *mwin = NULL, *msig = NULL, *gh, **reqs = calloc((size_t)m * (size_t)k, sizeof(void *));
    if (!src || !win || !sig || !reqs ||
        r->gin->regMrSym(r->coll, src, (size_t)m * slot, NCCL_PTR_HOST, 0, &msrc, &gh) != ncclSuccess ||
        r->gin->regMrSym(r->coll, win, (size_t)m * slot, NCCL_PTR_HOST, 0, &mwin, &gh) != ncclSuccess ||
        r->gin->regMrSym(r->coll, sig, 4096, NCCL_PTR_HOST, NCCL_NET_MR_FLAG_FORCE_SO, &msig, &gh) != ncclSuccess) {
        printf("rank %d: buffers or regMrSym on the rail's collComm failed\n", me);
        return 1;
    }
    memset(win, 0xee, (size_t)m * slot);
    for (int d = 0; d < m; d++)
        for (int i = 0; i < k; i++) {
            uint64_t id = rail_put_id(r->seed, round, me, d * x->rails + x->local, i);
            for (size_t j = 0; j < 1 + id % chunk; j++)
                src[(size_t)d * slot + (size_t)i * chunk + j] = gd_byte(id, j);
        }
    if (gd_barrier(r))
        return 1;
    int bad = 0;
    double deadline = gd_now() + RAIL_DEADLINE_S;
    for (int i = 0; i < k && !bad; i++)
        for (int d = 0; d < m && !bad; d++) {
            uint64_t id = rail_put_id(r->seed, round, me, d * x->rails + x->local, i);
            void **rq = &reqs[i * m + d];
            ncclResult_t e;
            /* no request: the plugin has no room yet; progress and again */
            while ((e = r->gin->iputSignal(r->coll, (uint64_t)d * slot + (uint64_t)i * chunk, msrc, 1 + id % chunk,
                                           (uint64_t)rr * slot + (uint64_t)i * chunk, mwin, (uint32_t)d,
                                           (uint64_t)rr * 8, msig, rail_add(me, i), NCCL_NET_SIGNAL_OP_ADD,
                                           rq)) == ncclSuccess &&
                   !*rq && gd_now() < deadline)
                if ((e = r->gin->ginProgress(r->coll)) != ncclSuccess)
                    break;
            if (e != ncclSuccess || !*rq) {
                printf("rank %d: iputSignal %d to rail rank %d failed (%d)\n", me, i, d, e);
                bad = 1;
            }
        }
    for (int q = 0; q < m * k && !bad; q++) {
        ncclResult_t e = gd_wait(r, reqs[q], deadline);
        if (e != ncclSuccess) {
            printf("rank %d: put %d to rail rank %d did not complete (%d)\n", me, q / m, q % m, e);
            bad = 1;
        }
    }
    if (gd_barrier(r))
        return 1;
    for (int s = 0; s < m && !bad; s++) {
        int sw = s * x->rails + x->local; /* the sender's world rank */
        uint64_t want = 0;
        for (int i = 0; i < k && !bad; i++) {
            uint64_t id = rail_put_id(r->seed, round, sw, me, i);
            const uint8_t *got = win + (size_t)s * slot + (size_t)i * chunk;
            want += rail_add(sw, i);
            for (size_t j = 0; j < chunk; j++) {
                uint8_t e = j < 1 + id % chunk ? gd_byte(id, j) : 0xee;
                if (got[j] != e) {
                    printf("rank %d: byte %zu of put %d from rail rank %d (rank %d) is 0x%02x, expected 0x%02x\n",
                           me, j, i, s, sw, got[j], e);
                    bad = 1;
                    break;
                }
            }
        }
        uint64_t have = __atomic_load_n(&sig[s], __ATOMIC_ACQUIRE);
        if (!bad && have != want) {
            printf("rank %d: signal word of rail rank %d (rank %d) is %llu, expected %llu\n", me, s, sw,
                   (unsigned long long)have, (unsigned long long)want);
            bad = 1;
        }
    }
    if (!bad)
        printf("rank %d: %d puts with ADD signals to each of the %d ranks of its rail (by rail rank) byte-checked, "
               "sums exact\n",
               me, k, m);
    r->gin->deregMrSym(r->coll, msig);
    r->gin->deregMrSym(r->coll, mwin);
    r->gin->deregMrSym(r->coll, msrc);
    free(reqs);
    free(src);
    free(win);
    free(sig);
    return bad;
}

static int t_rail(struct gd_rank *r, void *arg)
{
    const struct gd_opts *o = arg;
    struct rail_share *sh = o->shared;
    struct rail_rank x = { .r = r, .o = o, .rails = o->rails, .nodes = r->nranks / o->rails,
                           .local = r->rank % o->rails, .rr = r->rank / o->rails, .objects = gd_find_objects() };
    int me = r->rank;
    if (!x.objects) {
        printf("rank %d: softnic_ctl_objects not found: run on softnic (LD_LIBRARY_PATH=.../tests/softnic)\n", me);
        return 1;
    }
    /* FULL: every rank's handle (the first listen's) */
    struct gd_objs full, rail, after;
    double took;
    int qfull = 0, qrail = 0;
    ncclResult_t e = connect_counted(&x, 1, &full, &took);
    if (e != ncclSuccess || check_coll(&x, 1, &qfull)) {
        printf("rank %d: FULL connect failed (%d)\n", me, e);
        return 1;
    }
    int bad = 0;
    if (full.qps != qfull) {
        printf("rank %d: FULL: connect added %lld live QPs, its collComm holds %d\n", me, (long long)full.qps, qfull);
        bad = 1;
    }
    if (gd_barrier(r) || r->gin->closeColl(r->coll) != ncclSuccess)
        return 1;
    r->coll = NULL;
    struct gd_objs base;
    if (count(&x, &base))
        return 1;
    /* RAIL: the rail's handles of a new listen (NCCL listens per connect) */
    if (gd_barrier(r) || gd_listen_again(r, &r->listen))
        return 1;
    if ((e = connect_counted(&x, o->rails, &rail, &took)) != ncclSuccess || check_coll(&x, o->rails, &qrail)) {
        printf("rank %d: RAIL connect failed (%d)\n", me, e);
        return 1;
    }
    printf("rank %d: node %d, local %d: FULL %d ranks: %lld QPs, %lld CQs, %lld MRs; RAIL %d ranks (rail %d, rank %d "
           "in it): %lld QPs, %lld CQs, %lld MRs, connected in %.3f s\n",
           me, x.rr, x.local, r->nranks, (long long)full.qps, (long long)full.cqs, (long long)full.mrs, x.nodes,
           x.local, x.rr, (long long)rail.qps, (long long)rail.cqs, (long long)rail.mrs, took);
    /* the same QPs a peer; peers only the rail's (check_coll: each one the
     * rank whose handle filled its slot) */
    if (rail.qps != qrail || rail.qps * r->nranks != full.qps * x.nodes || rail.cqs != full.cqs ||
        rail.mrs != full.mrs) {
        printf("rank %d: RAIL holds %lld QPs (its collComm: %d), %lld CQs, %lld MRs; expected %lld QPs (FULL's %lld "
               "for %d ranks, for %d) and FULL's %lld CQs, %lld MRs\n",
               me, (long long)rail.qps, qrail, (long long)rail.cqs, (long long)rail.mrs,
               (long long)(full.qps * x.nodes / r->nranks), (long long)full.qps, r->nranks, x.nodes,
               (long long)full.cqs, (long long)full.mrs);
        bad = 1;
    } else {
        printf("rank %d: QPs only towards the %d ranks of its rail: %lld, FULL %lld\n", me, x.nodes,
               (long long)rail.qps, (long long)full.qps);
    }
    bad |= rail_traffic(&x, 0, 0);
    if (gd_barrier(r) || r->gin->closeColl(r->coll) != ncclSuccess)
        return 1;
    r->coll = NULL;
    if (count(&x, &after))
        return 1;
    if (after.qps != base.qps || after.cqs != base.cqs || after.mrs != base.mrs) {
        printf("rank %d: after closeColl %lld QPs, %lld CQs, %lld MRs live, before connect %lld, %lld, %lld\n", me,
               (long long)after.qps, (long long)after.cqs, (long long)after.mrs, (long long)base.qps,
               (long long)base.cqs, (long long)base.mrs);
        bad = 1;
    }
    if (bad || gd_barrier(r) || gd_listen_again(r, &r->listen))
        return 1;

    /* the mistake: rail 0's first rank has, in its last slot, the handle of
     * the next local rank of that node (rail 1's) */
    int victim = (x.nodes - 1) * o->rails, foreign = victim + 1;
    void *hp[GD_MAX_RANKS];
    for (int p = 0; p < x.nodes; p++)
        hp[p] = r->handles[p * o->rails + x.local];
    if (me == 0)
        hp[x.nodes - 1] = r->handles[foreign];
    double t0 = gd_now();
    e = r->gin->connect(r->ctx, hp, x.nodes, x.rr, r->listen, &r->coll);
    sh->took[me] = gd_now() - t0;
    sh->rc[me] = e;
    r->gin->closeListen(r->listen);
    r->listen = NULL;
    if (e != ncclSuccess)
        r->coll = NULL;
    if (me == 0)
        printf("rank 0: connect with rank %d's handle (rail 1) in the slot of rank %d: %d after %.1f s\n", foreign,
               victim, e, sh->took[me]);
    else if (me == victim)
        printf("rank %d: connect: %d after %.3f s\n", me, e, sh->took[me]);
    if (gd_barrier(r))
        return 1;
    if (x.local != 0 && e != ncclSuccess) {
        printf("rank %d: rail %d failed to connect (%d) beside rail 0's mistake\n", me, x.local, e);
        bad = 1;
    }
    if (rail_traffic(&x, 1, x.local == 0))
        bad = 1;
    if (me == 0) {
        int ok = 1;
        double last = 0;
        for (int g = 0; g < r->nranks; g += o->rails) {
            if (sh->took[g] > last)
                last = sh->took[g];
            if (sh->rc[g] == ncclSuccess) {
                printf("rank 0: rank %d of rail 0 connected despite the foreign handle\n", g);
                ok = 0;
            }
        }
        if (sh->rc[0] != ncclRemoteError || sh->rc[victim] != ncclRemoteError) {
            printf("rank 0: rank 0 got %d, rank %d %d; expected ncclRemoteError (%d) for both\n", sh->rc[0], victim,
                   sh->rc[victim], ncclRemoteError);
            ok = 0;
        }
        if (sh->took[victim] >= sh->took[0]) {
            printf("rank 0: rank %d was refused after %.1f s, not before rank 0 gave up (%.1f s)\n", victim,
                   sh->took[victim], sh->took[0]);
            ok = 0;
        }
        if (ok)
            printf("rank 0: rail 0 failed on all %d ranks (rank %d refused first, after %.3f s; the last after %.1f "
                   "s), the other rails connected and moved data\n",
                   x.nodes, victim, sh->took[victim], last);
        bad |= !ok;
    }
    return bad;
}

int gd_rail_run(const char *plugin, struct gd_opts *o)
{
    o->shared = mmap(NULL, sizeof(struct rail_share), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (o->shared == MAP_FAILED)
        return 1;
    memset(o->shared, 0, sizeof(struct rail_share));
    int bad = gd_run(plugin, o->ranks, RAIL_DEADLINE_S * 2, -1, o->seed, t_rail, o);
    munmap(o->shared, sizeof(struct rail_share));
    return bad;
}
