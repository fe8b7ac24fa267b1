/* tests/netdriver/traffic.c: `netdriver traffic`, the plugin driven as
 * NCCL's proxy drives it.
 *
 * Every rank holds one send and one receive comm per peer and device, and
 * runs one stream per comm at the same time: random sizes from 0 to
 * --max-size, grouped receives (1..--max-recvs buffers, tags matched) whose
 * sends may be smaller than the posted buffer and are issued in a shuffled
 * tag order, up to --inflight requests per comm, every byte verified. Both
 * ends derive the same schedule from --seed. Buffers of all comms of a
 * device live in one registration made once and reused on every comm
 * (regIsGlobal); every other comm also registers and deregisters it to
 * exercise the registration cache.
 *
 * A rank that completes nothing for --timeout seconds reports a hang. --iters 0
 * runs until an error or --timeout; with --kill-rank R the parent
 * SIGKILLs rank R --kill-after-ms after the connections are up and the other
 * ranks must end with an error from the plugin (exit 0) instead of hanging
 * (exit 4) or completing (exit 5). With --net-version 10 or later a rank
 * whose profiler events (nd_tables.h) are unbalanced or malformed exits 6. */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nd.h"
#include "nd_tables.h"
#include "traffic.h"
#include "plugin/ib/parse.h"

#define TR_MAX_INFLIGHT NCCL_NET_MAX_REQUESTS
#define TR_MAX_RECVS 8
#define TR_ALIGN 64

struct tr_opts {
    int ranks, devs, iters, max_recvs, inflight, expect_error, kill_rank, kill_after_ms;
    long long max_size, arena;
    uint64_t seed;
    double timeout;
};

struct tr_group {
    int n;
    int posted[TR_MAX_RECVS];
    int sent[TR_MAX_RECVS];
    int tag[TR_MAX_RECVS];
    int order[TR_MAX_RECVS];
};

/* FIFO ring allocator over one stream's slice of the arena. */
struct tr_ring {
    size_t cap;
    size_t head_off[TR_MAX_INFLIGHT + 1], head_len[TR_MAX_INFLIGHT + 1];
    int first, count;
};

static long ring_alloc(struct tr_ring *r, size_t len)
{
    len = (len + TR_ALIGN - 1) / TR_ALIGN * TR_ALIGN;
    if (len == 0)
        len = TR_ALIGN;
    if (len > r->cap || r->count == TR_MAX_INFLIGHT + 1)
        return -1;
    size_t start;
    if (r->count == 0) {
        start = 0;
    } else {
        int newest = (r->first + r->count - 1) % (TR_MAX_INFLIGHT + 1);
        size_t oldest_off = r->head_off[r->first];
        size_t end = r->head_off[newest] + r->head_len[newest];
        if (end > oldest_off) { /* not wrapped */
            if (end + len <= r->cap)
                start = end;
            else if (len <= oldest_off)
                start = 0;
            else
                return -1;
        } else {
            if (end + len <= oldest_off)
                start = end;
            else
                return -1;
        }
    }
    int k = (r->first + r->count) % (TR_MAX_INFLIGHT + 1);
    r->head_off[k] = start;
    r->head_len[k] = len;
    r->count++;
    return (long)start;
}

static void ring_free_oldest(struct tr_ring *r)
{
    r->first = (r->first + 1) % (TR_MAX_INFLIGHT + 1);
    r->count--;
}

struct tr_stream {
    int peer, dev, is_send;
    void *comm;
    uint64_t rng;          /* schedule generator, same at both ends */
    int group, sub;        /* next group (recv) or next send (group, position) */
    struct tr_group cur;   /* schedule of `group` */
    char *base;            /* slice of the arena */
    struct tr_ring ring;
    /* in flight, oldest first */
    void *req[TR_MAX_INFLIGHT];
    int req_group[TR_MAX_INFLIGHT], req_sub[TR_MAX_INFLIGHT];
    long req_off[TR_MAX_INFLIGHT];
    struct tr_group req_sched[TR_MAX_INFLIGHT];
    int qfirst, qcount;
    int have_sched;        /* `cur` drawn for `group`, not fully posted yet */
    long pending_off;      /* buffer of the next isend/irecv, -1 none yet */
    void *reg;             /* the registration made on this stream's comm */
    int done;
    uint64_t bytes;
};

static const struct tr_opts *tr_o;
static int tr_rank;

static int size_pick(uint64_t *rng, long long max)
{
    uint64_t r = nd_rand(rng);
    long long s;
    switch (r % 10) {
    case 0: s = 0; break;
    case 1: case 2: s = (long long)(nd_rand(rng) % 65); break;
    case 3: case 4: case 5: s = (long long)(nd_rand(rng) % 65537); break;
    case 6: case 7: s = (long long)(nd_rand(rng) % (1 << 20)); break;
    default: s = (long long)(nd_rand(rng) % (uint64_t)(max + 1)); break;
    }
    return (int)(s > max ? max : s);
}

/* The schedule of group g between src and dst: both ends call this in the
 * same order with generators seeded the same way. */
static void schedule_next(uint64_t *rng, int g, long long max_group, struct tr_group *out)
{
    int n = 1 + (int)(nd_rand(rng) % (uint64_t)tr_o->max_recvs);
    long long total = 0;
    out->n = n;
    for (int k = 0; k < n; k++) {
        out->posted[k] = size_pick(rng, tr_o->max_size);
        if (total + out->posted[k] > max_group)
            out->posted[k] = (int)(max_group - total > 0 ? max_group - total : 0);
        total += out->posted[k];
        uint64_t r = nd_rand(rng);
        out->sent[k] = (r & 1) ? out->posted[k] : (int)((r >> 1) % ((uint64_t)out->posted[k] + 1));
        out->tag[k] = (g % 1000000) * TR_MAX_RECVS + k + 1;
        out->order[k] = k;
    }
    for (int k = n - 1; k > 0; k--) { /* sends leave in a shuffled tag order */
        int j = (int)(nd_rand(rng) % (uint64_t)(k + 1));
        int t = out->order[k];
        out->order[k] = out->order[j];
        out->order[j] = t;
    }
}

static uint64_t msg_id(int src, int dst, int dev, int g, int k)
{
    return tr_o->seed ^ ((uint64_t)src << 56 | (uint64_t)dst << 48 | (uint64_t)dev << 40 | (uint64_t)g << 4 |
                         (uint64_t)k);
}

static size_t group_bytes(const struct tr_group *g)
{
    size_t t = 0;
    for (int k = 0; k < g->n; k++)
        t += ((size_t)g->posted[k] + TR_ALIGN - 1) / TR_ALIGN * TR_ALIGN;
    return t;
}

static int report(struct tr_stream *s, const char *call, ncclResult_t r)
{
    fprintf(stderr, "rank %d: %s on the %s comm with peer %d dev %d returned %d\n", tr_rank, call,
            s->is_send ? "send" : "recv", s->peer, s->dev, (int)r);
    return tr_o->expect_error ? 0 : 2;
}

#define TR_FAIL(s, call, r)                                                                                  \
    do {                                                                                                     \
        *status = report(s, call, r);                                                                        \
        return -1;                                                                                           \
    } while (0)

/* One step of a send stream; returns 1 if it made progress, -1 on error. */
static int send_step(const ncclNet_v8_t *net, struct tr_stream *s, void *mh, int *status)
{
    int progress = 0;
    int total = tr_o->iters;
    if (s->qcount < tr_o->inflight && (total == 0 || s->group < total)) {
        if (!s->have_sched) {
            schedule_next(&s->rng, s->group, (long long)s->ring.cap / 2, &s->cur);
            s->have_sched = 1;
            s->sub = 0;
        }
        int k = s->cur.order[s->sub];
        int len = s->cur.sent[k];
        if (s->pending_off < 0) {
            long off = ring_alloc(&s->ring, (size_t)len);
            if (off >= 0) {
                s->pending_off = off;
                nd_fill(s->base + off, (size_t)len, msg_id(tr_rank, s->peer, s->dev, s->group, k));
            }
        }
        if (s->pending_off >= 0) {
            void *req = NULL;
            ncclResult_t r = net->isend(s->comm, s->base + s->pending_off, len, s->cur.tag[k], mh, &req);
            if (r != ncclSuccess)
                TR_FAIL(s, "isend", r);
            if (req) {
                int q = (s->qfirst + s->qcount++) % TR_MAX_INFLIGHT;
                s->req[q] = req;
                s->req_group[q] = s->group;
                s->req_sub[q] = k;
                s->req_off[q] = s->pending_off;
                s->req_sched[q] = s->cur;
                s->pending_off = -1;
                if (++s->sub == s->cur.n) {
                    s->sub = 0;
                    s->have_sched = 0;
                    s->group++;
                }
                progress = 1;
            }
        }
    }
    if (s->qcount) {
        int q = s->qfirst, done = 0, size = -1;
        ncclResult_t r = net->test(s->req[q], &done, &size);
        if (r != ncclSuccess)
            TR_FAIL(s, "test", r);
        if (done) {
            int want = s->req_sched[q].sent[s->req_sub[q]];
            if (size != want) {
                fprintf(stderr, "rank %d: send to peer %d dev %d group %d: test reports %d bytes, sent %d\n",
                        tr_rank, s->peer, s->dev, s->req_group[q], size, want);
                *status = 3;
                return -1;
            }
            s->bytes += (uint64_t)want;
            ring_free_oldest(&s->ring);
            s->qfirst = (s->qfirst + 1) % TR_MAX_INFLIGHT;
            s->qcount--;
            progress = 1;
        }
    }
    if (total && s->group >= total && s->qcount == 0)
        s->done = 1;
    return progress;
}

static int recv_step(const ncclNet_v8_t *net, struct tr_stream *s, void *mh, int *status)
{
    int progress = 0;
    int total = tr_o->iters;
    if (s->qcount < tr_o->inflight && (total == 0 || s->group < total)) {
        if (!s->have_sched) {
            schedule_next(&s->rng, s->group, (long long)s->ring.cap / 2, &s->cur);
            s->have_sched = 1;
        }
        if (s->pending_off < 0)
            s->pending_off = ring_alloc(&s->ring, group_bytes(&s->cur));
        if (s->pending_off >= 0) {
            void *data[TR_MAX_RECVS], *mhs[TR_MAX_RECVS];
            int sizes[TR_MAX_RECVS], tags[TR_MAX_RECVS];
            size_t off = (size_t)s->pending_off;
            for (int k = 0; k < s->cur.n; k++) {
                data[k] = s->base + off;
                memset(data[k], 0xa5, (size_t)s->cur.posted[k] < 64 ? (size_t)s->cur.posted[k] : 64);
                sizes[k] = s->cur.posted[k];
                tags[k] = s->cur.tag[k];
                mhs[k] = mh;
                off += ((size_t)s->cur.posted[k] + TR_ALIGN - 1) / TR_ALIGN * TR_ALIGN;
            }
            void *req = NULL;
            ncclResult_t r = net->irecv(s->comm, s->cur.n, data, sizes, tags, mhs, &req);
            if (r != ncclSuccess)
                TR_FAIL(s, "irecv", r);
            if (req) {
                int q = (s->qfirst + s->qcount++) % TR_MAX_INFLIGHT;
                s->req[q] = req;
                s->req_group[q] = s->group;
                s->req_off[q] = s->pending_off;
                s->req_sched[q] = s->cur;
                s->pending_off = -1;
                s->have_sched = 0;
                s->group++;
                progress = 1;
            }
        }
    }
    if (s->qcount) {
        int q = s->qfirst, done = 0, sizes[TR_MAX_RECVS];
        for (int k = 0; k < TR_MAX_RECVS; k++)
            sizes[k] = -1;
        ncclResult_t r = net->test(s->req[q], &done, sizes);
        if (r != ncclSuccess)
            TR_FAIL(s, "test", r);
        if (done) {
            const struct tr_group *g = &s->req_sched[q];
            size_t off = (size_t)s->req_off[q];
            for (int k = 0; k < g->n; k++) {
                if (sizes[k] != g->sent[k]) {
                    fprintf(stderr,
                            "rank %d: recv from peer %d dev %d group %d buffer %d/%d: %d bytes received, %d sent\n",
                            tr_rank, s->peer, s->dev, s->req_group[q], k, g->n, sizes[k], g->sent[k]);
                    *status = 3;
                    return -1;
                }
                long bad = nd_check(s->base + off, (size_t)g->sent[k],
                                    msg_id(s->peer, tr_rank, s->dev, s->req_group[q], k));
                if (bad >= 0) {
                    fprintf(stderr, "rank %d: recv from peer %d dev %d group %d buffer %d: byte %ld of %d wrong\n",
                            tr_rank, s->peer, s->dev, s->req_group[q], k, bad, g->sent[k]);
                    *status = 3;
                    return -1;
                }
                s->bytes += (uint64_t)g->sent[k];
                off += ((size_t)g->posted[k] + TR_ALIGN - 1) / TR_ALIGN * TR_ALIGN;
            }
            ring_free_oldest(&s->ring);
            s->qfirst = (s->qfirst + 1) % TR_MAX_INFLIGHT;
            s->qcount--;
            progress = 1;
        }
    }
    if (total && s->group >= total && s->qcount == 0)
        s->done = 1;
    return progress;
}

static int traffic_rank(struct nd_world *w, void *arg)
{
    const struct tr_opts *o = arg;
    tr_o = o;
    tr_rank = w->rank;
    const ncclNet_v8_t *net = w->net;
    if (nd_connect_all(w))
        return o->expect_error ? 4 : 2;
    nd_signal_ready(w);
    int nstreams = 0;
    static struct tr_stream st[2 * ND_MAX_RANKS * ND_MAX_DEVS];
    char *arena[ND_MAX_DEVS] = { 0 };
    void *mh[ND_MAX_DEVS] = { 0 };
    int status = 0;
    size_t per_stream = (size_t)o->arena;
    size_t per_dev = per_stream * 2 * (size_t)(w->nranks - 1);
    for (int d = 0; d < w->ndevs; d++) {
        if (posix_memalign((void **)&arena[d], 4096, per_dev)) {
            fprintf(stderr, "rank %d: cannot allocate %zu bytes\n", w->rank, per_dev);
            return 2;
        }
        int n = 0;
        for (int j = 0; j < w->nranks; j++) {
            if (j == w->rank)
                continue;
            for (int dir = 0; dir < 2; dir++) {
                struct tr_stream *s = &st[nstreams++];
                memset(s, 0, sizeof(*s));
                s->peer = j;
                s->dev = d;
                s->is_send = dir == 0;
                s->comm = dir == 0 ? w->send[j][d] : w->recv[j][d];
                int src = dir == 0 ? w->rank : j, dst = dir == 0 ? j : w->rank;
                s->rng = o->seed * 1315423911ull ^ ((uint64_t)src << 32 | (uint64_t)dst << 16 | (uint64_t)d);
                s->base = arena[d] + (size_t)n * per_stream;
                s->ring.cap = per_stream;
                s->pending_off = -1;
                n++;
                /* one registration per device, made on its first comm, used by all */
                ncclResult_t r = net->regMr(s->comm, arena[d], per_dev, NCCL_PTR_HOST, &s->reg);
                if (r != ncclSuccess) {
                    fprintf(stderr, "rank %d: regMr on dev %d returned %d\n", w->rank, d, (int)r);
                    return 2;
                }
                if (!mh[d])
                    mh[d] = s->reg;
            }
        }
    }
    int active = nstreams;
    int idle = 0;
    int failed = 0; /* a call returned an error (status stays 0 when one was expected) */
    while (active > 0 && !status && !failed) {
        int progress = 0;
        active = 0;
        for (int i = 0; i < nstreams; i++) {
            struct tr_stream *s = &st[i];
            if (s->done)
                continue;
            int r = s->is_send ? send_step(net, s, mh[s->dev], &status) : recv_step(net, s, mh[s->dev], &status);
            if (r < 0) {
                failed = 1;
                break;
            }
            progress |= r;
            active += !s->done;
        }
        if (status || failed)
            break;
        /* with --iters, --timeout bounds the time without a completion, not
         * the run: a host loaded by other builds slows it, a hang still ends
         * it (the parent's bound is 10 times --timeout) */
        if (progress && o->iters > 0)
            w->deadline = nd_now() + o->timeout;
        if (!progress && ++idle > 1000) {
            idle = 0;
            if (nd_now() > w->deadline) {
                fprintf(stderr, "rank %d: no completion %s (%.0f s): hang\n", w->rank,
                        o->iters > 0 ? "for --timeout" : "before the deadline", o->timeout);
                status = o->expect_error ? 4 : 2;
                for (int i = 0; i < nstreams; i++)
                    if (!st[i].done)
                        fprintf(stderr, "rank %d:   %s stream peer %d dev %d: group %d, %d in flight\n", w->rank,
                                st[i].is_send ? "send" : "recv", st[i].peer, st[i].dev, st[i].group, st[i].qcount);
                break;
            }
        }
    }
    if (o->expect_error && status == 0 && !failed) {
        fprintf(stderr, "rank %d: traffic completed although an error was expected\n", w->rank);
        status = 5;
    }
    uint64_t bytes = 0, received = 0;
    for (int i = 0; i < nstreams; i++) {
        bytes += st[i].bytes;
        if (!st[i].is_send)
            received += st[i].bytes;
    }
    /* sent bytes count once the send completes, received ones once checked */
    if (!status && !o->expect_error)
        printf("rank %d: %d streams done, %llu bytes verified, %llu of them received\n", w->rank, nstreams,
               (unsigned long long)bytes, (unsigned long long)received);
    /* v10+: every request was tested done, so every profiler event the
     * plugin started has been stopped */
    if (!status && !o->expect_error && !failed && nd_tables_version() >= 10) {
        uint64_t started, stopped, bad;
        nd_tables_prof_counts(&started, &stopped, &bad);
        printf("rank %d: profiler events: %llu started, %llu stopped, %llu bad\n", w->rank,
               (unsigned long long)started, (unsigned long long)stopped, (unsigned long long)bad);
        if (started == 0 || started != stopped || bad)
            status = 6;
    }
    /* deregister through the comm each registration was made on */
    for (int i = 0; i < nstreams; i++)
        if (st[i].reg)
            net->deregMr(st[i].comm, st[i].reg);
    nd_close_all(w);
    for (int d = 0; d < w->ndevs; d++)
        free(arena[d]);
    return status;
}

/* --seed: any 64-bit value (parse_u64; parse_int's long long
 * would refuse the upper half), but whole: "12x" was seed 12. */
static int parse_seed(const char *s, uint64_t *out)
{
    unsigned long long v;
    if (parse_u64(s, &v)) {
        fprintf(stderr, "netdriver: bad value '%s' for --seed: an integer in [0, 2^64)\n", s);
        return -1;
    }
    *out = v;
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: netdriver traffic [--ranks N(2..8)] [--devs D] [--iters I (0: until error/timeout)]\n"
            "         [--max-size BYTES(K/M suffix)] [--max-recvs 1..8] [--inflight 1..32] [--seed S]\n"
            "         [--arena BYTES per stream] [--timeout SEC] [--kill-rank R --kill-after-ms MS]\n"
            "         [--expect-error]\n"
            "         [--ctl-file PATH [--ctl-port DEV:PORT]... [--down-ms MS] [--up-ms MS] [--cycles N]\n"
            "          [--down-at-start] [--flap-random]]  port faults through softnic's control file:\n"
            "          the ports (default softnic0:2) go down MS after the connections are up, come\n"
            "          back --up-ms later (0: never), N times; --flap-random draws each delay in\n"
            "          [1, MS] from --seed\n");
}

int nd_cmd_traffic(int argc, char **argv)
{
    struct tr_opts o = { .ranks = 2, .devs = 1, .iters = 200, .max_recvs = 8, .inflight = TR_MAX_INFLIGHT,
                         .max_size = 1 << 20, .arena = 0, .seed = 1, .timeout = 120, .kill_rank = -1,
                         .kill_after_ms = 200 };
    static const struct option lo[] = {
        { "ranks", 1, 0, 'r' }, { "devs", 1, 0, 'd' }, { "iters", 1, 0, 'i' }, { "max-size", 1, 0, 's' },
        { "max-recvs", 1, 0, 'n' }, { "inflight", 1, 0, 'f' }, { "seed", 1, 0, 'S' }, { "arena", 1, 0, 'a' },
        { "timeout", 1, 0, 't' }, { "kill-rank", 1, 0, 'k' }, { "kill-after-ms", 1, 0, 'K' },
        { "expect-error", 0, 0, 'e' }, { "help", 0, 0, 'h' }, { "ctl-file", 1, 0, 'C' },
        { "ctl-port", 1, 0, 'P' }, { "down-ms", 1, 0, 'D' }, { "up-ms", 1, 0, 'U' }, { "cycles", 1, 0, 'Y' },
        { "down-at-start", 0, 0, 'A' }, { "flap-random", 0, 0, 'R' }, { 0, 0, 0, 0 }
    };
    struct nd_flap fl = { .down_ms = 50, .up_ms = 100, .cycles = 1 };
    int flap_random = 0;
    optind = 1;
    int c, bad = 0;
    while (!bad && (c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'r': bad = nd_opt_int("--ranks", optarg, 2, ND_MAX_RANKS, &o.ranks); break;
        case 'd': bad = nd_opt_int("--devs", optarg, 1, ND_MAX_DEVS, &o.devs); break;
        case 'i': bad = nd_opt_int("--iters", optarg, 0, INT_MAX, &o.iters); break;
        case 's': bad = nd_opt_size("--max-size", optarg, 0, 64ll << 20, &o.max_size); break;
        case 'n': bad = nd_opt_int("--max-recvs", optarg, 1, TR_MAX_RECVS, &o.max_recvs); break;
        case 'f': bad = nd_opt_int("--inflight", optarg, 1, TR_MAX_INFLIGHT, &o.inflight); break;
        case 'S': bad = parse_seed(optarg, &o.seed); break;
        case 'a': bad = nd_opt_size("--arena", optarg, 0, 1ll << 40, &o.arena); break;
        case 't': bad = nd_opt_seconds("--timeout", optarg, &o.timeout); break;
        case 'k': bad = nd_opt_int("--kill-rank", optarg, -1, ND_MAX_RANKS - 1, &o.kill_rank); break;
        case 'K': bad = nd_opt_int("--kill-after-ms", optarg, 0, INT_MAX, &o.kill_after_ms); break;
        case 'e': o.expect_error = 1; break;
        case 'C': fl.ctl_file = optarg; break;
        case 'P': {
            const char *colon = strchr(optarg, ':');
            int port;
            if (fl.nports == 2 || !colon || colon == optarg || colon - optarg > 63) {
                usage();
                return 2;
            }
            if (!(bad = nd_opt_int("--ctl-port's port", colon + 1, 1, 255, &port)))
                snprintf(fl.port[fl.nports++], sizeof(fl.port[0]), "%.*s %d", (int)(colon - optarg), optarg, port);
            break;
        }
        case 'D': bad = nd_opt_int("--down-ms", optarg, 0, INT_MAX, &fl.down_ms); break;
        case 'U': bad = nd_opt_int("--up-ms", optarg, 0, INT_MAX, &fl.up_ms); break;
        case 'Y': bad = nd_opt_int("--cycles", optarg, 0, INT_MAX, &fl.cycles); break;
        case 'A': fl.at_start = 1; break;
        case 'R': flap_random = 1; break;
        default: usage(); return c == 'h' ? 0 : 2;
        }
    }
    if (bad)
        return 2;
    if (o.max_size < 0 || o.max_size > (64ll << 20) || o.max_recvs < 1 || o.max_recvs > TR_MAX_RECVS ||
        o.inflight < 1 || o.inflight > TR_MAX_INFLIGHT || o.iters < 0 || o.timeout <= 0) {
        usage();
        return 2;
    }
    if (o.arena <= 0) {
        o.arena = 4 * o.max_size;
        if (o.arena < (1 << 20))
            o.arena = 1 << 20;
        if (o.arena > (128ll << 20))
            o.arena = 128ll << 20;
    }
    if (o.arena < 2 * o.max_size + 2 * TR_ALIGN)
        o.arena = 2 * o.max_size + 2 * TR_ALIGN;
    if (o.kill_rank >= 0)
        o.expect_error = 1;
    if (fl.ctl_file) {
        if (fl.nports == 0)
            snprintf(fl.port[fl.nports++], sizeof(fl.port[0]), "softnic0 2");
        fl.random_seed = flap_random ? o.seed * 0x9e3779b97f4a7c15ull + 1 : 0;
        nd_set_flap(&fl);
    }
    if (!nd_rank_process())
        printf("netdriver traffic: %d ranks, %d device(s), %d groups per stream, sizes 0..%lld, up to %d recvs per "
           "group, %d in flight, seed %llu\n",
           o.ranks, o.devs, o.iters, o.max_size, o.max_recvs, o.inflight, (unsigned long long)o.seed);
    fflush(stdout);
    int rc = nd_run_ranks(o.ranks, o.devs, o.timeout, o.kill_rank, o.kill_after_ms, traffic_rank, &o);
    printf("netdriver traffic: %s\n", rc ? "FAILED" : "ok");
    return rc;
}
