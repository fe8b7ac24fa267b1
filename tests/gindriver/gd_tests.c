/* tests/gindriver/gd_tests.c: what each subcommand's ranks do (gd_tests.h).
 * Every rank prints one line per finding; a rank exits non-zero when one of
 * its checks failed. */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gd.h"
#include "gd_tests.h"
#include "gin.h"

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

/* Every byte of the window after a round of k puts from each of n ranks:
 * each put's content where its plan put it in rank s's area, the guard
 * (0xee) elsewhere. 1 (and a line naming the first bad byte) on a mismatch. */
static int check_area_puts(const struct gd_rank *r, const uint8_t *win, int n, int k, size_t slot, size_t chunk,
                           int round)
{
    uint8_t *expect = malloc(slot);
    int bad = !expect;
    for (int s = 0; s < n && !bad; s++) {
        memset(expect, 0xee, slot);
        for (int i = 0; i < k; i++) {
            uint64_t id = put_id(r->seed, round, s, r->rank, i);
            struct plan p = plan_of(id, chunk);
            for (size_t j = 0; j < p.size; j++)
                expect[(size_t)i * chunk + p.doff + j] = gd_byte(id, j);
        }
        const uint8_t *got = win + (size_t)s * slot;
        for (size_t j = 0; j < slot; j++) {
            if (got[j] != expect[j]) {
                printf("rank %d: round %d: byte %zu of the area written by rank %d is 0x%02x, expected 0x%02x\n",
                       r->rank, round, j, s, got[j], expect[j]);
                bad = 1;
                break;
            }
        }
    }
    free(expect);
    return bad;
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
    if (gd_connect_said(r))
        return 1;
    ncclResult_t e = ncclSuccess;
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
        bad = check_area_puts(r, win, n, k, slot, chunk, round);
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
    if (gd_connect_said(r))
        return 1;
    ncclResult_t e = ncclSuccess;
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
    if (gd_connect_said(r))
        return 1;
    ncclResult_t e = ncclSuccess;
    int victim = r->nranks - 1;
    size_t len = 1 << 20;
    uint8_t *buf = alloc_host(len);
    void *mh;
    if (!buf || reg(r, buf, len, 0, &mh) || gd_barrier(r))
        return 1;
    if (r->rank == victim) {
        gd_await_kill(r);
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

/* ------------------------------------------------------------ cq-overrun */

#define OVERRUN_PUTS 32
#define OVERRUN_ROUNDS 20

/* Rank 0 shrinks its collComm's CQ (plugin/gin/gin.h's struct gin_coll:
 * the plugin's own) to one entry with ibv_resize_cq, the verbs call of the
 * libibverbs the plugin loaded, then posts OVERRUN_PUTS puts to rank 1
 * without polling: their completions (RAILNET_GIN_SIGNAL_EVERY=1: one per
 * put) overrun it, the NIC drops them and raises IBV_EVENT_CQ_ERR, and
 * test must return an error, not wait forever. A round whose completions
 * all found room (they came one by one while test polled) is run again.
 * Rank 1 only waits. */
static int t_cq_overrun(struct gd_rank *r, void *arg)
{
    (void)arg;
    if (gd_connect_said(r))
        return 1;
    ncclResult_t e = ncclSuccess;
    size_t len = 1 << 20;
    uint8_t *buf = alloc_host(len);
    void *mh;
    if (!buf || reg(r, buf, len, 0, &mh) || gd_barrier(r))
        return 1;
    int bad = 0;
    if (r->rank == 0) {
        void *v = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
        int (*resize_cq)(struct ibv_cq *, int) = NULL;
        if (v)
            *(void **)&resize_cq = dlsym(v, "ibv_resize_cq");
        struct gin_coll *c = r->coll;
        if (!resize_cq || resize_cq(c->cq, 1) != 0) {
            printf("rank 0: cannot shrink the collComm's CQ (ibv_resize_cq %s)\n", resize_cq ? "failed" : "not found");
            return 1;
        }
        void *reqs[OVERRUN_PUTS];
        int pending = 0;
        e = ncclSuccess;
        for (int round = 0; round < OVERRUN_ROUNDS && e == ncclSuccess && !pending; round++) {
            for (int q = 0; q < OVERRUN_PUTS && e == ncclSuccess; q++) {
                reqs[q] = NULL;
                e = r->gin->iput(r->coll, (uint64_t)q * 4096, mh, 4096, (uint64_t)q * 4096, mh, 1, &reqs[q]);
            }
            /* nothing polls meanwhile: the completions pile up (a wait,
             * not a verdict: on a slow host a round may drop nothing and
             * is run again) */
            usleep(20000);
            double deadline = gd_now() + 30;
            do {
                pending = 0;
                for (int q = 0; q < OVERRUN_PUTS && e == ncclSuccess; q++) {
                    int done = 0;
                    if (reqs[q] && (e = r->gin->test(r->coll, reqs[q], &done)) == ncclSuccess && !done)
                        pending++;
                    if (done)
                        reqs[q] = NULL;
                }
            } while (e == ncclSuccess && pending && gd_now() < deadline);
            if (e == ncclSuccess && !pending)
                printf("rank 0: round %d: no completion was dropped; again\n", round);
        }
        if (e == ncclSystemError)
            printf("rank 0: the overrun CQ failed the collComm (ncclSystemError)\n");
        else {
            printf("rank 0: %s (%d) with %d put(s) pending\n", e == ncclSuccess ? "no error" : "unexpected error",
                   e, pending);
            bad = 1;
        }
    }
    if (gd_barrier(r))
        return 1;
    return bad;
}

/* ------------------------------------------------------------------ deep */

/* Tests every outstanding request once per pass, then ginProgress, as
 * NCCL's proxy walks its queues, until all are done. */
static ncclResult_t wait_all(struct gd_rank *r, void **reqs, int nreq, double deadline)
{
    for (;;) {
        int left = 0;
        for (int q = 0; q < nreq; q++) {
            if (!reqs[q])
                continue;
            int done = 0;
            ncclResult_t e = r->gin->test(r->coll, reqs[q], &done);
            if (e != ncclSuccess)
                return e;
            if (done)
                reqs[q] = NULL;
            else
                left++;
        }
        if (!left)
            return ncclSuccess;
        ncclResult_t e = r->gin->ginProgress(r->coll);
        if (e != ncclSuccess)
            return e;
        if (gd_now() > deadline)
            return ncclInternalError;
    }
}

#define DEEP_SIGNAL_EVERY 16
static int deep_has_signal(int i)
{
    return i % DEEP_SIGNAL_EVERY == DEEP_SIGNAL_EVERY - 1;
}

static int t_deep(struct gd_rank *r, void *arg)
{
    const struct gd_opts *o = arg;
    if (gd_connect_said(r))
        return 1;
    ncclResult_t e = ncclSuccess;
    int n = r->nranks, me = r->rank, k = o->puts;
    size_t slot = o->slot, chunk = slot / (size_t)k;
    uint8_t *src = alloc_host((size_t)n * slot), *win = alloc_host((size_t)n * slot);
    uint64_t *sig = alloc_host(4096);
    void *msrc, *mwin, *msig, **reqs = calloc((size_t)n * (size_t)k, sizeof(void *));
    if (!src || !win || !sig || !reqs || reg(r, src, (size_t)n * slot, 0, &msrc) ||
        reg(r, win, (size_t)n * slot, 0, &mwin) || reg(r, sig, 4096, NCCL_NET_MR_FLAG_FORCE_SO, &msig))
        return 1;
    int bad = 0, refused = 0;
    for (int round = 0; round < o->rounds && !bad; round++) {
        memset(win, 0xee, (size_t)n * slot);
        for (int d = 0; d < n; d++)
            for (int i = 0; i < k; i++) {
                uint64_t id = put_id(r->seed, round, me, d, i);
                struct plan p = plan_of(id, chunk);
                for (size_t j = 0; j < p.size; j++)
                    src[(size_t)d * slot + (size_t)i * chunk + p.soff + j] = gd_byte(id, j);
            }
        if (gd_barrier(r))
            return 1;
        /* every put of the round posted before the first test: k per peer
         * in flight at once; past NCCL's 256 per peer the plugin says try
         * again, and the oldest put to that peer is completed first */
        int oldest[GD_MAX_RANKS] = { 0 };
        for (int i = 0; i < k && !bad; i++)
            for (int d = 0; d < n && !bad; d++) {
                struct plan p = plan_of(put_id(r->seed, round, me, d, i), chunk);
                void **rq = &reqs[i * n + d];
                uint64_t soff = (uint64_t)d * slot + (uint64_t)i * chunk + p.soff;
                uint64_t doff = (uint64_t)me * slot + (uint64_t)i * chunk + p.doff;
                int s = deep_has_signal(i);
                e = s ? r->gin->iputSignal(r->coll, soff, msrc, p.size, doff, mwin, (uint32_t)d, (uint64_t)me * 8,
                                           msig, add_value(me, i), NCCL_NET_SIGNAL_OP_ADD, rq)
                      : r->gin->iput(r->coll, soff, msrc, p.size, doff, mwin, (uint32_t)d, rq);
                while (e == ncclSuccess && !*rq && oldest[d] < i) {
                    refused++;
                    void **old = &reqs[oldest[d]++ * n + d];
                    if (*old && (e = gd_wait(r, *old, gd_now() + DEADLINE_S)) != ncclSuccess)
                        break;
                    *old = NULL;
                    e = s ? r->gin->iputSignal(r->coll, soff, msrc, p.size, doff, mwin, (uint32_t)d,
                                               (uint64_t)me * 8, msig, add_value(me, i), NCCL_NET_SIGNAL_OP_ADD, rq)
                          : r->gin->iput(r->coll, soff, msrc, p.size, doff, mwin, (uint32_t)d, rq);
                }
                if (e == ncclSuccess && !*rq)
                    e = ncclInternalError; /* refused with nothing outstanding */
                if (e != ncclSuccess) {
                    printf("rank %d: round %d: put %d to rank %d failed (%d)\n", me, round, i, d, e);
                    bad = 1;
                }
            }
        if (!bad && (e = wait_all(r, reqs, n * k, gd_now() + DEADLINE_S)) != ncclSuccess) {
            printf("rank %d: round %d: puts did not complete (%d)\n", me, round, e);
            bad = 1;
        }
        if (bad || gd_barrier(r))
            return 1;
        bad = check_area_puts(r, win, n, k, slot, chunk, round);
        for (int s = 0; s < n && !bad; s++) {
            uint64_t want = 0;
            for (int i = 0; i < k; i++)
                if (deep_has_signal(i))
                    want += add_value(s, i);
            want *= (uint64_t)(round + 1);
            uint64_t have = __atomic_load_n(&sig[s], __ATOMIC_ACQUIRE);
            if (have != want) {
                printf("rank %d: round %d: signal word of rank %d is %llu, expected %llu\n", me, round, s,
                       (unsigned long long)have, (unsigned long long)want);
                bad = 1;
            }
        }
    }
    r->gin->deregMrSym(r->coll, msig);
    r->gin->deregMrSym(r->coll, mwin);
    r->gin->deregMrSym(r->coll, msrc);
    if (bad || gd_barrier(r))
        return 1;
    printf("rank %d: %d rounds x %d puts (1 in %d with an ADD signal) to each of %d ranks posted at once, "
           "byte-checked, signal sums exact (plugin said try again %d times)\n",
           me, o->rounds, k, DEEP_SIGNAL_EVERY, n, refused);
    /* the plugin's counters come with closeColl (RAILNET_STATS=1) */
    e = r->gin->closeColl(r->coll);
    r->coll = NULL;
    if (e != ncclSuccess || !gd_stats.seen) {
        printf("rank %d: no GIN stats line from closeColl (%d); run with RAILNET_STATS=1\n", me, e);
        return 1;
    }
    const struct gd_gin_stats *st = &gd_stats;
    printf("rank %d: %llu work requests posted (%llu completion markers), %llu signaled (%.1f%%), %llu completions "
           "polled\n",
           me, st->wrs, st->markers, st->signaled, st->wrs ? 100.0 * (double)st->signaled / (double)st->wrs : 0.0,
           st->cqes);
    if (st->wrs < (unsigned long long)o->rounds * (unsigned long long)(n * k)) {
        printf("rank %d: fewer work requests than puts\n", me);
        bad = 1;
    }
    if (st->signaled * 4 > st->wrs) {
        printf("rank %d: more than a quarter of the work requests were signaled\n", me);
        bad = 1;
    }
    if (st->cqes != st->signaled) {
        printf("rank %d: %llu completions polled for %llu signaled work requests\n", me, st->cqes, st->signaled);
        bad = 1;
    }
    free(reqs);
    free(src);
    free(win);
    return bad;
}

/* ----------------------------------------------------------------- flush */

#define FLUSH_PUTS 200
#define FLUSH_BAD 101
#define FLUSH_SIZE 2048

struct flush_share {
    int resolved;
    uint8_t done[FLUSH_PUTS];
};

static int t_flush(struct gd_rank *r, void *arg)
{
    const struct gd_opts *o = arg;
    struct flush_share *sh = o->shared;
    if (gd_connect_said(r))
        return 1;
    ncclResult_t e = ncclSuccess;
    size_t len = (size_t)FLUSH_PUTS * FLUSH_SIZE;
    uint8_t *buf = alloc_host(len), *badbuf = alloc_host(4096);
    void *mgood, *mbad;
    if (!buf || !badbuf || reg(r, buf, len, 0, &mgood) || reg(r, badbuf, 4096, 0, &mbad))
        return 1;
    int me = r->rank;
    if (me == 0)
        for (int i = 0; i < FLUSH_PUTS; i++)
            for (int j = 0; j < FLUSH_SIZE; j++)
                buf[(size_t)i * FLUSH_SIZE + (size_t)j] = gd_byte((uint64_t)i + 1, (uint64_t)j);
    else
        memset(buf, 0xee, len);
    if (gd_barrier(r))
        return 1;
    /* rank 1 drops the window rank 0 still names: a put into it is a
     * remote access error at rank 1's NIC */
    if (me == 1 && r->gin->deregMrSym(r->coll, mbad) != ncclSuccess)
        return 1;
    if (gd_barrier(r))
        return 1;
    int bad = 0;
    if (me == 0) {
        void *reqs[FLUSH_PUTS];
        int state[FLUSH_PUTS]; /* 0 open, 1 done, -1 failed */
        for (int i = 0; i < FLUSH_PUTS; i++) {
            state[i] = 0;
            e = i == FLUSH_BAD ? r->gin->iput(r->coll, 0, mgood, FLUSH_SIZE, 0, mbad, 1, &reqs[i])
                               : r->gin->iput(r->coll, (uint64_t)i * FLUSH_SIZE, mgood, FLUSH_SIZE,
                                              (uint64_t)i * FLUSH_SIZE, mgood, 1, &reqs[i]);
            if (e != ncclSuccess || !reqs[i]) {
                printf("rank 0: iput %d refused (%d) before any completion was polled\n", i, e);
                return 1;
            }
        }
        double deadline = gd_now() + DEADLINE_S;
        int open = FLUSH_PUTS, ndone = 0, nfail = 0;
        while (open && gd_now() < deadline) {
            for (int i = 0; i < FLUSH_PUTS; i++) {
                if (state[i])
                    continue;
                int done = 0;
                e = r->gin->test(r->coll, reqs[i], &done);
                if (e != ncclSuccess || done) {
                    state[i] = done ? 1 : -1;
                    open--;
                    if (done)
                        ndone++, sh->done[i] = 1;
                    else
                        nfail++;
                }
            }
            r->gin->ginProgress(r->coll);
        }
        if (open) {
            printf("rank 0: %d of %d puts neither completed nor failed after %.0f s\n", open, FLUSH_PUTS, DEADLINE_S);
            bad = 1;
        }
        if (state[FLUSH_BAD] != -1) {
            printf("rank 0: the put into the deregistered window reported %s\n",
                   state[FLUSH_BAD] ? "done" : "nothing");
            bad = 1;
        }
        if (nfail < 2 || ndone < 1) {
            printf("rank 0: %d puts done, %d failed: expected the bad put and the work requests its error flushed to "
                   "fail, and earlier puts to complete\n",
                   ndone, nfail);
            bad = 1;
        }
        int late = 0;
        for (int i = FLUSH_BAD + 1; i < FLUSH_PUTS; i++)
            late += state[i] == -1;
        printf("rank 0: %d puts, put %d into a deregistered window: %d done, %d failed (%d of them after it)\n",
               FLUSH_PUTS, FLUSH_BAD, ndone, nfail, late);
        sh->resolved = !open;
    }
    if (gd_barrier(r))
        return 1;
    if (me == 1) {
        /* every put rank 0 saw done has landed */
        int checked = 0;
        for (int i = 0; i < FLUSH_PUTS && !bad; i++) {
            if (!sh->done[i])
                continue;
            checked++;
            for (int j = 0; j < FLUSH_SIZE; j++)
                if (buf[(size_t)i * FLUSH_SIZE + (size_t)j] != gd_byte((uint64_t)i + 1, (uint64_t)j)) {
                    printf("rank 1: put %d was reported done but its byte %d did not land\n", i, j);
                    bad = 1;
                    break;
                }
        }
        if (!bad)
            printf("rank 1: all %d puts reported done landed\n", checked);
    }
    if (gd_barrier(r))
        return 1;
    /* the window goes before its memory: puts of rank 0's other QP may
     * still be landing in it (a NIC would DMA into freed memory just so) */
    if (r->gin->deregMrSym(r->coll, mgood) != ncclSuccess ||
        (me == 0 && r->gin->deregMrSym(r->coll, mbad) != ncclSuccess)) {
        printf("rank %d: deregMrSym failed\n", me);
        bad = 1;
    }
    free(buf);
    free(badbuf);
    return bad;
}

/* ------------------------------------------------------------------ rate */

static int t_rate(struct gd_rank *r, void *arg)
{
    const struct gd_opts *o = arg;
    if (gd_connect_said(r))
        return 1;
    ncclResult_t e = ncclSuccess;
    size_t size = o->size ? o->size : 8, len = size * 64;
    uint8_t *buf = alloc_host(len);
    void *mh, **ring = calloc((size_t)o->queue, sizeof(void *));
    if (!buf || !ring || reg(r, buf, len, 0, &mh) || gd_barrier(r))
        return 1;
    uint32_t peer = (uint32_t)((r->rank + 1) % r->nranks);
    long total = o->puts, issued = 0, completed = 0;
    double t0 = gd_now(), deadline = t0 + DEADLINE_S;
    /* a deep queue drained as NCCL's proxy does: post while fewer than
     * `queue` are in flight, retire in order from the oldest, progress */
    while (completed < total) {
        while (issued < total && issued - completed < o->queue) {
            void **slot = &ring[issued % o->queue];
            uint64_t off = (uint64_t)(issued % 64) * size;
            if ((e = r->gin->iput(r->coll, off, mh, size, off, mh, peer, slot)) != ncclSuccess)
                break;
            if (!*slot)
                break;
            issued++;
        }
        while (e == ncclSuccess && completed < issued) {
            int done = 0;
            e = r->gin->test(r->coll, ring[completed % o->queue], &done);
            if (!done)
                break;
            completed++;
        }
        if (e == ncclSuccess)
            e = r->gin->ginProgress(r->coll);
        if (e != ncclSuccess || gd_now() > deadline) {
            printf("rank %d: stream failed (%d) after %ld of %ld puts\n", r->rank, e, completed, total);
            return 1;
        }
    }
    double secs = gd_now() - t0;
    if (gd_barrier(r))
        return 1;
    printf("#rate rank %d size %zu puts %ld secs %.4f rate %.0f\n", r->rank, size, total, secs, (double)total / secs);
    r->gin->deregMrSym(r->coll, mh);
    free(ring);
    free(buf);
    return 0;
}

/* ---------------------------------------------------------------- spread */

#define SPREAD_PUT 4096 /* below RAILNET_SPLIT_MIN: one QP a put */

/* As NCCL's device-API alltoall: each round one put to every peer, all
 * tested done; the payload bytes this rank sent in the round must be on
 * both ports of the merged device (each peer's turns begin at another QP),
 * and every byte must land. */
static int t_spread(struct gd_rank *r, void *arg)
{
    const struct gd_opts *o = arg;
    if (gd_connect_said(r))
        return 1;
    ncclResult_t e = ncclSuccess;
    int n = r->nranks, me = r->rank;
    size_t len = (size_t)n * SPREAD_PUT;
    uint8_t *src = alloc_host(len), *win = alloc_host(len);
    void *msrc, *mwin, *reqs[GD_MAX_RANKS] = { 0 };
    if (!src || !win || reg(r, src, len, 0, &msrc) || reg(r, win, len, 0, &mwin))
        return 1;
    int bad = 0;
    for (int round = 0; round < o->rounds && !bad; round++) {
        memset(win, 0xee, len);
        for (int d = 0; d < n; d++) {
            uint64_t id = put_id(r->seed, round, me, d, 0);
            for (size_t j = 0; j < SPREAD_PUT && d != me; j++)
                src[(size_t)d * SPREAD_PUT + j] = gd_byte(id, j);
        }
        unsigned long long t0[2], t1[2];
        if (gd_barrier(r) || gd_port_tx(t0)) {
            printf("rank %d: no barrier or no softnic port counters\n", me);
            return 1;
        }
        double deadline = gd_now() + DEADLINE_S;
        for (int d = 0; d < n && !bad; d++) {
            if (d == me)
                continue;
            e = r->gin->iput(r->coll, (uint64_t)d * SPREAD_PUT, msrc, SPREAD_PUT, (uint64_t)me * SPREAD_PUT, mwin,
                             (uint32_t)d, &reqs[d]);
            if (e != ncclSuccess || !reqs[d]) {
                printf("rank %d: iput to rank %d: %d, request %p\n", me, d, e, reqs[d]);
                bad = 1;
            }
        }
        for (int d = 0; d < n && !bad; d++) {
            if (d != me && (e = gd_wait(r, reqs[d], deadline)) != ncclSuccess) {
                printf("rank %d: the put to rank %d did not complete (%d)\n", me, d, e);
                bad = 1;
            }
            reqs[d] = NULL;
        }
        if (bad || gd_port_tx(t1))
            return 1;
        unsigned long long p1 = t1[0] - t0[0], p2 = t1[1] - t0[1];
        printf("rank %d: round %d: %d puts of %d bytes, port 1 %llu bytes, port 2 %llu\n", me, round, n - 1,
               SPREAD_PUT, p1, p2);
        if (n > 2 && (p1 < SPREAD_PUT || p2 < SPREAD_PUT)) {
            printf("rank %d: round %d: one port carried no put\n", me, round);
            bad = 1;
        }
        if (gd_barrier(r))
            return 1;
        for (int s = 0; s < n && !bad; s++) {
            const uint8_t *got = win + (size_t)s * SPREAD_PUT;
            uint64_t id = put_id(r->seed, round, s, me, 0);
            for (size_t j = 0; j < SPREAD_PUT && s != me; j++)
                if (got[j] != gd_byte(id, j)) {
                    printf("rank %d: round %d: byte %zu from rank %d is 0x%02x\n", me, round, j, s, got[j]);
                    bad = 1;
                    break;
                }
        }
    }
    r->gin->deregMrSym(r->coll, msrc);
    r->gin->deregMrSym(r->coll, mwin);
    free(src);
    free(win);
    return bad;
}

int gd_test_run(const char *plugin, const char *name, struct gd_opts *o)
{
    if (!strncmp(name, "gdaki", 5))
        return gd_gdaki_run(plugin, name, o);
    if (!strncmp(name, "rma", 3))
        return gd_rma_run(plugin, name, o);
    if (!strcmp(name, "mesh"))
        return gd_run(plugin, o->ranks, DEADLINE_S * 2, -1, o->seed, t_mesh, o);
    if (!strcmp(name, "signal"))
        return gd_run(plugin, o->ranks, DEADLINE_S * 2, -1, o->seed, t_signal, o);
    if (!strcmp(name, "spread"))
        return gd_run(plugin, o->ranks, DEADLINE_S * 2, -1, o->seed, t_spread, o);
    if (!strcmp(name, "rogue")) {
        if (pipe(o->go_pipe))
            return 1;
        return gd_run(plugin, 3, DEADLINE_S * 2, -1, o->seed, t_rogue, o);
    }
    if (!strcmp(name, "kill"))
        return gd_run(plugin, o->ranks, DEADLINE_S * 2, o->ranks - 1, o->seed, t_kill, o);
    if (!strcmp(name, "deep"))
        return gd_run(plugin, o->ranks, DEADLINE_S * 2, -1, o->seed, t_deep, o);
    if (!strcmp(name, "rail"))
        return gd_rail_run(plugin, o);
    if (!strcmp(name, "rate"))
        return gd_run(plugin, o->ranks, DEADLINE_S * 2, -1, o->seed, t_rate, o);
    if (!strcmp(name, "cq-overrun"))
        return gd_run(plugin, 2, DEADLINE_S * 2, -1, o->seed, t_cq_overrun, o);
    if (!strcmp(name, "port-down") || !strcmp(name, "port-flap") || !strcmp(name, "qp-fatal") ||
        !strcmp(name, "device-fatal"))
        return gd_async_run(plugin, name, o);
    if (!strcmp(name, "flush")) {
        o->shared = mmap(NULL, sizeof(struct flush_share), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (o->shared == MAP_FAILED)
            return 1;
        memset(o->shared, 0, sizeof(struct flush_share));
        int bad = gd_run(plugin, 2, DEADLINE_S * 2, -1, o->seed, t_flush, o);
        munmap(o->shared, sizeof(struct flush_share));
        return bad;
    }
    return -1;
}
