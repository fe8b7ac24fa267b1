/* tests/gindriver/gd_tests.c: what each subcommand's ranks do (gd_tests.h).
 * Every rank prints one line per finding; a rank exits non-zero when one of
 * its checks failed. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gd.h"
#include "gd_tests.h"

#define DEADLINE_S 120.0

static void *alloc_host(size_t len)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, len ? len : 4096))
        return NULL;
    memset(p, 0, len);
    return p;
}

static int reg(struct gd_rank *r, void *buf, size_t len, uint64_t flags, void **mh)
{
    void *gh = NULL;
    ncclResult_t e = r->gin->regMrSym(r->coll, buf, len, NCCL_PTR_HOST, flags, mh, &gh);
    if (e != ncclSuccess || !*mh || gh != *mh) {
        printf("rank %d: regMrSym of %zu bytes failed (%d) or ginHandle differs from mhandle\n", r->rank, len, e);
        return -1;
    }
    return 0;
}

/* Issues one put (retrying while the plugin has no room), as NCCL's proxy
 * issues a descriptor. sig_mh NULL: plain iput. */
static ncclResult_t put(struct gd_rank *r, uint64_t soff, void *smh, size_t size, uint64_t doff, void *dmh, int peer,
                        uint64_t sigoff, void *sig_mh, uint64_t val, uint32_t op, void **req)
{
    double deadline = gd_now() + DEADLINE_S;
    for (;;) {
        ncclResult_t e = sig_mh ? r->gin->iputSignal(r->coll, soff, smh, size, doff, dmh, (uint32_t)peer, sigoff,
                                                     sig_mh, val, op, req)
                                : r->gin->iput(r->coll, soff, smh, size, doff, dmh, (uint32_t)peer, req);
        if (e != ncclSuccess || *req)
            return e;
        if ((e = r->gin->ginProgress(r->coll)) != ncclSuccess)
            return e;
        if (gd_now() > deadline)
            return ncclInternalError;
    }
}

/* ------------------------------------------------------------------ mesh */

struct plan {
    size_t size, soff, doff;
};

static uint64_t put_id(uint64_t seed, int round, int s, int d, int i)
{
    return seed ^ ((uint64_t)round << 48 | (uint64_t)s << 40 | (uint64_t)d << 32 | (uint64_t)i);
}

/* Size and offsets of put i from s to d in a chunk of `chunk` bytes: one
 * put in four is small (inline-sized), the rest anywhere up to the chunk. */
static struct plan plan_of(uint64_t id, size_t chunk)
{
    uint64_t st = id * 31 + 7;
    struct plan p;
    size_t max = (gd_rand(&st) % 4 == 0 && chunk > 64) ? 64 : chunk;
    p.size = 1 + gd_rand(&st) % max;
    p.soff = gd_rand(&st) % (chunk - p.size + 1);
    p.doff = gd_rand(&st) % (chunk - p.size + 1);
    return p;
}

/* NCCL registers windows from the user's thread while its GIN progress
 * thread puts: round 0 of the mesh does the same, registering and
 * deregistering windows (collective, same order on every rank) on a second
 * thread while the puts run. */
struct reg_job {
    struct gd_rank *r;
    int n, failed;
};

static void *reg_thread(void *arg)
{
    struct reg_job *j = arg;
    size_t len = 1 << 16;
    uint8_t *buf = alloc_host(len);
    for (int i = 0; i < j->n && buf; i++) {
        void *mh = NULL;
        if (reg(j->r, buf, len - (size_t)i * 64, i % 2 ? NCCL_NET_MR_FLAG_FORCE_SO : 0, &mh) ||
            j->r->gin->deregMrSym(j->r->coll, mh) != ncclSuccess) {
            j->failed = 1;
            break;
        }
    }
    free(buf);
    return NULL;
}

static int t_mesh(struct gd_rank *r, void *arg)
{
    const struct gd_opts *o = arg;
    ncclResult_t e = gd_connect(r);
    if (e != ncclSuccess) {
        printf("rank %d: connect failed (%d)\n", r->rank, e);
        return 1;
    }
    int n = r->nranks, me = r->rank, k = o->puts;
    size_t slot = o->slot, chunk = slot / (size_t)k;
    uint8_t *src = alloc_host((size_t)n * slot), *win = alloc_host((size_t)n * slot);
    void *msrc, *mwin, **reqs = calloc((size_t)n * (size_t)k, sizeof(void *));
    if (!src || !win || !reqs || reg(r, src, (size_t)n * slot, 0, &msrc) || reg(r, win, (size_t)n * slot, 0, &mwin))
        return 1;
    int bad = 0, retries = 0;
    for (int round = 0; round < o->rounds && !bad; round++) {
        memset(win, 0xee, (size_t)n * slot);
        for (int d = 0; d < n; d++)
            for (int i = 0; i < k; i++) {
                uint64_t id = put_id(r->seed, round, me, d, i);
                struct plan p = plan_of(id, chunk);
                uint8_t *s = src + (size_t)d * slot + (size_t)i * chunk + p.soff;
                for (size_t j = 0; j < p.size; j++)
                    s[j] = gd_byte(id, j);
            }
        if (gd_barrier(r))
            return 1;
        struct reg_job job = { .r = r, .n = 16 };
        pthread_t th;
        int threaded = round == 0 && pthread_create(&th, NULL, reg_thread, &job) == 0;
        /* peers interleaved, as NCCL's proxy walks its per-rank queues, at
         * most o->queue outstanding per peer (NCCL: 32 * maxRecvs); when the
         * plugin returns no request, the oldest one is completed first */
        double deadline = gd_now() + DEADLINE_S;
        int oldest[GD_MAX_RANKS] = { 0 };
        for (int i = 0; i < k && !bad; i++)
            for (int d = 0; d < n && !bad; d++) {
                struct plan p = plan_of(put_id(r->seed, round, me, d, i), chunk);
                void **slotp = &reqs[d * k + i];
                for (int tries = 0; !bad; tries++) {
                    if (tries || i - oldest[d] >= o->queue) {
                        void **old = &reqs[d * k + oldest[d]];
                        if (oldest[d] >= i || (e = gd_wait(r, *old, deadline)) != ncclSuccess) {
                            printf("rank %d: %s (%d)\n", me,
                                   oldest[d] >= i ? "iput gave no request with nothing outstanding"
                                                  : "an earlier put did not complete",
                                   e);
                            bad = 1;
                            break;
                        }
                        *old = NULL;
                        oldest[d]++;
                    }
                    e = r->gin->iput(r->coll, (uint64_t)d * slot + (uint64_t)i * chunk + p.soff, msrc, p.size,
                                     (uint64_t)me * slot + (uint64_t)i * chunk + p.doff, mwin, (uint32_t)d, slotp);
                    if (e != ncclSuccess) {
                        printf("rank %d: iput to rank %d failed (%d)\n", me, d, e);
                        bad = 1;
                    }
                    if (*slotp)
                        break;
                    retries++;
                }
            }
        for (int q = 0; q < n * k && !bad; q++) {
            if (reqs[q] && (e = gd_wait(r, reqs[q], deadline)) != ncclSuccess) {
                printf("rank %d: put %d did not complete (%d)\n", me, q, e);
                bad = 1;
            }
        }
        if (threaded) {
            pthread_join(th, NULL);
            if (job.failed) {
                printf("rank %d: window registration on a second thread during the puts failed\n", me);
                bad = 1;
            }
        }
        if (bad || gd_barrier(r))
            return 1;
        /* every byte of the window: the puts' content where they landed, the
         * guard elsewhere */
        uint8_t *expect = malloc(slot);
        for (int s = 0; s < n && !bad; s++) {
            memset(expect, 0xee, slot);
            for (int i = 0; i < k; i++) {
                uint64_t id = put_id(r->seed, round, s, me, i);
                struct plan p = plan_of(id, chunk);
                for (size_t j = 0; j < p.size; j++)
                    expect[(size_t)i * chunk + p.doff + j] = gd_byte(id, j);
            }
            const uint8_t *got = win + (size_t)s * slot;
            for (size_t j = 0; j < slot; j++) {
                if (got[j] != expect[j]) {
                    printf("rank %d: round %d: byte %zu of the area written by rank %d is 0x%02x, expected 0x%02x\n",
                           me, round, j, s, got[j], expect[j]);
                    bad = 1;
                    break;
                }
            }
        }
        free(expect);
    }
    if (!bad)
        printf("rank %d: %d rounds x %d puts to each of %d ranks byte-checked (up to %d in flight per peer; "
               "plugin said try again %d times)\n",
               me, o->rounds, k, n, o->queue, retries);
    /* a deregistered window is refused by name */
    if (r->gin->deregMrSym(r->coll, mwin) != ncclSuccess) {
        printf("rank %d: deregMrSym failed\n", me);
        bad = 1;
    }
    void *req = NULL;
    e = r->gin->iput(r->coll, 0, msrc, 8, 0, mwin, (uint32_t)me, &req);
    if (e == ncclSuccess) {
        printf("rank %d: iput into a deregistered window was accepted\n", me);
        bad = 1;
    } else {
        printf("rank %d: iput naming a deregistered window refused (%d)\n", me, e);
    }
    r->gin->deregMrSym(r->coll, msrc);
    gd_barrier(r);
    free(reqs);
    free(src);
    free(win);
    return bad;
}

/* ---------------------------------------------------------------- signal */

static uint64_t add_value(int s, int i)
{
    return ((uint64_t)(s + 1) << 33) + (uint64_t)i * 7 + 1;
}

static int t_signal(struct gd_rank *r, void *arg)
{
    const struct gd_opts *o = arg;
    ncclResult_t e = gd_connect(r);
    if (e != ncclSuccess) {
        printf("rank %d: connect failed (%d)\n", r->rank, e);
        return 1;
    }
    int n = r->nranks, me = r->rank, k = o->puts;
    size_t slot = o->slot, chunk = slot / (size_t)k;
    uint8_t *src = alloc_host((size_t)n * slot), *win = alloc_host((size_t)n * slot);
    uint64_t *sig = alloc_host(4096);
    void *msrc, *mwin, *msig, **reqs = calloc((size_t)n * (size_t)(k + o->adds), sizeof(void *));
    if (!src || !win || !sig || !reqs || reg(r, src, (size_t)n * slot, 0, &msrc) ||
        reg(r, win, (size_t)n * slot, 0, &mwin) || reg(r, sig, 4096, NCCL_NET_MR_FLAG_FORCE_SO, &msig))
        return 1;
    for (int d = 0; d < n; d++)
        for (int i = 0; i < k; i++) {
            uint64_t id = put_id(r->seed, 0, me, d, i);
            struct plan p = plan_of(id, chunk);
            for (size_t j = 0; j < p.size; j++)
                src[(size_t)d * slot + (size_t)i * chunk + p.soff + j] = gd_byte(id, j);
        }
    if (gd_barrier(r))
        return 1;
    /* phase A: puts, some with INC/ADD on word[sender] counting the puts
     * sent so far (plain puts before a signal included); the receiver checks
     * the data of every put the word counts, while the puts stream in */
    int bad = 0, issued = 0, nreq = n * k;
    int checked[GD_MAX_RANKS] = { 0 };
    double deadline = gd_now() + DEADLINE_S;
    for (;;) {
        if (issued < nreq) {
            int i = issued / n, d = issued % n;
            struct plan p = plan_of(put_id(r->seed, 0, me, d, i), chunk);
            /* in cycles of 5: put+INC, three plain puts, put+ADD(4) covering
             * them and itself; the last put signals whatever it covers */
            int plain = i % 5 >= 1 && i % 5 <= 3 && i != k - 1;
            uint64_t covers = i % 5 == 0 ? 1 : (uint64_t)(i % 5);
            uint32_t op = covers == 1 ? NCCL_NET_SIGNAL_OP_INC : NCCL_NET_SIGNAL_OP_ADD;
            e = put(r, (uint64_t)d * slot + (uint64_t)i * chunk + p.soff, msrc, p.size,
                    (uint64_t)me * slot + (uint64_t)i * chunk + p.doff, mwin, d, (uint64_t)me * 8,
                    plain ? NULL : msig, covers, op, &reqs[issued]);
            if (e != ncclSuccess) {
                printf("rank %d: iputSignal to rank %d failed (%d); see the WARN above (a NIC without RDMA "
                       "atomics fails here)\n",
                       me, d, e);
                return 1;
            }
            issued++;
        }
        int mine_done = 1;
        for (int q = 0; q < issued; q++) {
            if (!reqs[q])
                continue;
            int done = 0;
            if ((e = r->gin->test(r->coll, reqs[q], &done)) != ncclSuccess) {
                printf("rank %d: iputSignal %d failed (%d); see the WARN above (a NIC without RDMA atomics "
                       "fails here)\n",
                       me, q, e);
                return 1;
            }
            if (done)
                reqs[q] = NULL;
            else
                mine_done = 0;
        }
        int all_seen = 1;
        for (int s = 0; s < n; s++) {
            uint64_t v = __atomic_load_n(&sig[s], __ATOMIC_ACQUIRE);
            if (v > (uint64_t)k) {
                printf("rank %d: signal word of rank %d is %llu, more than the %d puts it sent\n", me, s,
                       (unsigned long long)v, k);
                return 1;
            }
            for (; (uint64_t)checked[s] < v; checked[s]++) {
                uint64_t id = put_id(r->seed, 0, s, me, checked[s]);
                struct plan p = plan_of(id, chunk);
                const uint8_t *got = win + (size_t)s * slot + (size_t)checked[s] * chunk + p.doff;
                for (size_t j = 0; j < p.size; j++)
                    if (got[j] != gd_byte(id, j)) {
                        printf("rank %d: signal from rank %d counted put %d, but its byte %zu is not there yet\n", me,
                               s, checked[s], j);
                        return 1;
                    }
            }
            if (checked[s] < k)
                all_seen = 0;
        }
        if (issued == nreq && mine_done && all_seen)
            break;
        if (gd_now() > deadline) {
            printf("rank %d: signals stopped:", me);
            for (int s = 0; s < n; s++)
                printf(" from %d: %d/%d", s, checked[s], k);
            printf("\n");
            return 1;
        }
    }
    printf("rank %d: %d puts (with INC/ADD signals) from each of %d ranks: no signal before its data or an "
           "earlier put's\n",
           me, k, n);
    if (gd_barrier(r))
        return 1;
    /* phase B: signal-only adds (and INCs) from every rank into one word of
     * every rank, all at once */
    for (int i = 0; i < o->adds && !bad; i++)
        for (int d = 0; d < n && !bad; d++) {
            uint32_t op = i % 5 == 0 ? NCCL_NET_SIGNAL_OP_INC : NCCL_NET_SIGNAL_OP_ADD;
            e = put(r, 0, NULL, 0, 0, NULL, d, (uint64_t)n * 8, msig, add_value(me, i), op, &reqs[i * n + d]);
            if (e != ncclSuccess) {
                printf("rank %d: signal-only iputSignal failed (%d)\n", me, e);
                bad = 1;
            }
        }
    deadline = gd_now() + DEADLINE_S;
    for (int q = 0; q < o->adds * n && !bad; q++)
        if ((e = gd_wait(r, reqs[q], deadline)) != ncclSuccess) {
            printf("rank %d: signal-only request %d did not complete (%d)\n", me, q, e);
            bad = 1;
        }
    if (bad || gd_barrier(r))
        return 1;
    uint64_t want = 0;
    for (int s = 0; s < n; s++)
        for (int i = 0; i < o->adds; i++)
            want += i % 5 == 0 ? 1 : add_value(s, i);
    uint64_t got = __atomic_load_n(&sig[n], __ATOMIC_ACQUIRE);
    if (got != want) {
        printf("rank %d: shared signal word is %llu, expected %llu (sum of %d adds from %d ranks)\n", me,
               (unsigned long long)got, (unsigned long long)want, o->adds, n);
        bad = 1;
    } else {
        printf("rank %d: shared signal word exact after %d concurrent INC/ADD from each of %d ranks\n", me, o->adds,
               n);
    }
    r->gin->deregMrSym(r->coll, msig);
    r->gin->deregMrSym(r->coll, mwin);
    r->gin->deregMrSym(r->coll, msrc);
    gd_barrier(r);
    return bad;
}

/* ----------------------------------------------------------------- rogue */

static uint32_t crc32_ieee(const uint8_t *p, size_t len)
{
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        for (int b = 0; b < 8; b++)
            crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static int expect_refused(struct gd_rank *r, const char *what, void **hp, int nranks, int rank)
{
    void *coll = NULL;
    ncclResult_t e = r->gin->connect(r->ctx, hp, nranks, rank, r->listen, &coll);
    if (e == ncclSuccess) {
        printf("rank %d: %s: connect was accepted\n", r->rank, what);
        r->gin->closeColl(coll);
        return 1;
    }
    printf("rank %d: %s: refused (%d)\n", r->rank, what, e);
    return 0;
}

/* Process 0 and 2 are the job (ranks 0 and 1); process 1 is a rogue that
 * tries bad handles first; process 2 starts once the rogue is done. */
static int t_rogue(struct gd_rank *r, void *arg)
{
    const struct gd_opts *o = arg;
    void *hp[3] = { r->handles[0], r->handles[2], NULL };
    if (r->rank == 1) {
        int bad = 0;
        uint8_t h[3][GD_HANDLE];
        memcpy(h[0], r->handles[0], GD_HANDLE);
        memcpy(h[1], r->handles[1], GD_HANDLE);
        void *mine[2] = { h[0], h[0] }; /* rank 1's slot holds rank 0's handle */
        bad |= expect_refused(r, "handle at my rank is not my listener's", mine, 2, 1);
        memcpy(h[2], r->handles[0], GD_HANDLE);
        h[2][0] ^= 0xff;
        void *magic[2] = { h[2], h[1] };
        bad |= expect_refused(r, "peer handle with a wrong magic", magic, 2, 1);
        memcpy(h[2], r->handles[0], GD_HANDLE);
        h[2][4] = 99; /* protocol version */
        void *ver[2] = { h[2], h[1] };
        bad |= expect_refused(r, "peer handle of another protocol version", ver, 2, 1);
        /* rank 0's address and port, another nonce, a valid checksum: a stale
         * handle of an earlier job on the same port */
        memcpy(h[2], r->handles[0], GD_HANDLE);
        h[2][40] ^= 0x5a;
        uint32_t crc = crc32_ieee(h[2], 48);
        for (int i = 0; i < 4; i++)
            h[2][48 + i] = (uint8_t)(crc >> (8 * i));
        void *stale[2] = { h[2], h[1] };
        bad |= expect_refused(r, "stale handle (right port, another nonce)", stale, 2, 1);
        void *count[3] = { h[0], h[1], h[1] };
        bad |= expect_refused(r, "wrong rank count (3 instead of 2)", count, 3, 1);
        char c = 'g';
        if (write(o->go_pipe[1], &c, 1) != 1)
            bad = 1;
        return bad;
    }
    if (r->rank == 2) {
        char c;
        if (read(o->go_pipe[0], &c, 1) != 1)
            return 1;
    }
    int jrank = r->rank == 0 ? 0 : 1;
    ncclResult_t e = r->gin->connect(r->ctx, hp, 2, jrank, r->listen, &r->coll);
    if (e != ncclSuccess) {
        printf("rank %d: the job's connect failed after the rogue (%d)\n", r->rank, e);
        return 1;
    }
    /* the job works: one put each way */
    uint8_t *buf = alloc_host(8192);
    void *mh;
    if (reg(r, buf, 8192, 0, &mh))
        return 1;
    for (int j = 0; j < 4096; j++)
        buf[j] = gd_byte((uint64_t)jrank, (uint64_t)j);
    void *req = NULL;
    if (put(r, 0, mh, 4096, 4096, mh, 1 - jrank, 0, NULL, 0, 0, &req) ||
        gd_wait(r, req, gd_now() + DEADLINE_S) != ncclSuccess) {
        printf("rank %d: put after the rogue failed\n", r->rank);
        return 1;
    }
    gd_barrier(r);
    for (int j = 0; j < 4096; j++)
        if (buf[4096 + j] != gd_byte((uint64_t)(1 - jrank), (uint64_t)j)) {
            printf("rank %d: byte %d of the put after the rogue is wrong\n", r->rank, j);
            return 1;
        }
    printf("rank %d: job connected and moved data despite the rogue\n", r->rank);
    r->gin->deregMrSym(r->coll, mh);
    free(buf);
    return 0;
}

/* ------------------------------------------------------------------ kill */

static int t_kill(struct gd_rank *r, void *arg)
{
    (void)arg;
    ncclResult_t e = gd_connect(r);
    if (e != ncclSuccess) {
        printf("rank %d: connect failed (%d)\n", r->rank, e);
        return 1;
    }
    int victim = r->nranks - 1;
    size_t len = 1 << 20;
    uint8_t *buf = alloc_host(len);
    void *mh;
    if (!buf || reg(r, buf, len, 0, &mh) || gd_barrier(r))
        return 1;
    if (r->rank == victim) {
        gd_ready(r);
        for (;;)
            pause(); /* the parent kills this rank now */
    }
    void *ctx = NULL;
    ncclNetDeviceHandle_v11_t *dh = NULL;
    if (r->gin->createContext(r->coll, 0, 0, &ctx, &dh) != ncclSuccess || !ctx) {
        printf("rank %d: createContext failed\n", r->rank);
        return 1;
    }
    bool has = true;
    if (r->gin->queryLastError(ctx, &has) != ncclSuccess || has) {
        printf("rank %d: queryLastError reports an error before any fault\n", r->rank);
        return 1;
    }
    double t0 = gd_now(), deadline = t0 + DEADLINE_S;
    void *reqs[64] = { 0 };
    e = ncclSuccess;
    /* keep 64 puts in flight towards the victim until the plugin says it failed */
    while (e == ncclSuccess && gd_now() < deadline) {
        for (int q = 0; q < 64 && e == ncclSuccess; q++) {
            if (!reqs[q]) {
                e = r->gin->iput(r->coll, 0, mh, 65536, 0, mh, (uint32_t)victim, &reqs[q]);
                continue;
            }
            int done = 0;
            e = r->gin->test(r->coll, reqs[q], &done);
            if (done)
                reqs[q] = NULL;
        }
    }
    double took = gd_now() - t0;
    if (e == ncclSuccess) {
        printf("rank %d: no error reported %.0f s after rank %d was killed\n", r->rank, took, victim);
        return 1;
    }
    if (r->gin->queryLastError(ctx, &has) != ncclSuccess || !has) {
        printf("rank %d: test failed (%d) but queryLastError reports no error\n", r->rank, e);
        return 1;
    }
    printf("rank %d: killed rank %d reported as error %d (%s), queryLastError agrees\n", r->rank, victim, e,
           e == ncclRemoteError ? "remote error" : "other");
    r->gin->destroyContext(ctx);
    return e == ncclRemoteError ? 0 : 1;
}

int gd_test_run(const char *plugin, const char *name, struct gd_opts *o)
{
    if (!strcmp(name, "mesh"))
        return gd_run(plugin, o->ranks, DEADLINE_S * 2, -1, o->seed, t_mesh, o);
    if (!strcmp(name, "signal"))
        return gd_run(plugin, o->ranks, DEADLINE_S * 2, -1, o->seed, t_signal, o);
    if (!strcmp(name, "rogue")) {
        if (pipe(o->go_pipe))
            return 1;
        return gd_run(plugin, 3, DEADLINE_S * 2, -1, o->seed, t_rogue, o);
    }
    if (!strcmp(name, "kill"))
        return gd_run(plugin, o->ranks, DEADLINE_S * 2, o->ranks - 1, o->seed, t_kill, o);
    return -1;
}
