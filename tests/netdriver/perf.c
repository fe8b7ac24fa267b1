/* tests/netdriver/perf.c: the driver's measuring subcommands. `bw` streams
 * messages of each size from rank 0 to rank 1 through isend/irecv with a
 * window of requests in flight, like NCCL's proxy does, and prints a
 * bandwidth table, and after each row how many sends the plugin held in
 * flight at once (what a comparison at equal depth rests on); `lat`
 * ping-pongs small messages. Both verify the content of the last message
 * of each size, so a fast but wrong plugin fails.
 *
 * By default every message of a size uses the start of one buffer on each
 * side, so a row touches 2 x size bytes of memory over and over; with
 * --span S the messages walk slot by slot through S bytes on each side
 * (message i at offset (i mod S/size) x size), so a small message can be
 * run over the footprint of a large one: what tells a cost of the message
 * size from one of the memory it touches (docs/performance.md, "The 64 MiB
 * row of the main job"). */
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nd.h"
#include "traffic.h"

#define PERF_MAX_WINDOW 32

struct perf_opts {
    long long min, max;
    int iters;   /* 0: from a byte budget per size */
    int window;
    int dev;
    double timeout;
    long long span;   /* bytes each side cycles through; 0: one message's */
    int receives;     /* bw: the receiver prints its receives posted too */
};

struct perf_ctx {
    const ncclNet_v8_t *net;
    void *comm, *mh;
    char *buf;
    int sender;
    double deadline;
};

static int post(struct perf_ctx *p, void *buf, int size, int tag, void **req)
{
    *req = NULL;
    ncclResult_t r;
    if (p->sender) {
        r = p->net->isend(p->comm, buf, size, tag, p->mh, req);
    } else {
        void *data[1] = { buf };
        int sizes[1] = { size }, tags[1] = { tag };
        void *mhs[1] = { p->mh };
        r = p->net->irecv(p->comm, 1, data, sizes, tags, mhs, req);
    }
    if (r != ncclSuccess)
        fprintf(stderr, "netdriver: %s returned %d\n", p->sender ? "isend" : "irecv", r);
    return r == ncclSuccess ? 0 : -1;
}

static int test(struct perf_ctx *p, void *req, int *done, int *got)
{
    ncclResult_t r = p->net->test(req, done, got);
    if (r != ncclSuccess)
        fprintf(stderr, "netdriver: test returned %d\n", r);
    return r == ncclSuccess ? 0 : -1;
}

/* The latency loop's waits read the clock for their deadline once in this
 * many idle passes, as perftest's loops read none: the harness's clock is
 * no part of what it times. */
#define DEADLINE_EVERY 256

/* iters messages of size bytes, up to `window` in flight, message i in slot
 * i mod nslots of the buffer; *most gets the largest number that were in
 * flight at once, *mean their number over time (below the window: the
 * sender waited for clear-to-sends, not for its own completions). 0 or -1. */
static int stream(struct perf_ctx *p, int size, int nslots, int iters, int window, int *most, double *mean)
{
    void *reqs[PERF_MAX_WINDOW] = { 0 };
    int posted = 0, completed = 0;
    double start = nd_now(), last = start, area = 0;
    *most = 0;
    *mean = 0;
    while (completed < iters) {
        /* the mean in flight weighs each pass's time by the count it ended
         * with: a clock read a pass (unlike the latency loop's waits, which
         * read it once in DEADLINE_EVERY idle passes) */
        double now = nd_now();
        area += (now - last) * (posted - completed);
        last = now;
        if (now > p->deadline) {
            fprintf(stderr, "netdriver: deadline passed at %d of %d messages of %d bytes\n", completed, iters, size);
            return -1;
        }
        int progress = 0;
        for (int k = 0; k < window; k++) {
            if (!reqs[k] && posted < iters) {
                if (post(p, p->buf + (size_t)(posted % nslots) * (size_t)size, size, 7, &reqs[k]))
                    return -1;
                if (reqs[k]) {
                    posted++, progress = 1;
                    if (posted - completed > *most)
                        *most = posted - completed;
                }
            }
            if (reqs[k]) {
                int done = 0, got = -1;
                if (test(p, reqs[k], &done, &got))
                    return -1;
                if (done) {
                    if (got != size) {
                        fprintf(stderr, "netdriver: request of %d bytes completed with %d\n", size, got);
                        return -1;
                    }
                    reqs[k] = NULL;
                    completed++;
                    progress = 1;
                }
            }
        }
        /* an idle pass gives the CPU to the NIC: on a host with few cores a
         * software NIC's threads share them with this polling loop */
        if (!progress)
            sched_yield();
    }
    if (last > start)
        *mean = area / (last - start);
    return 0;
}

/* The slots of size bytes that fit the span (at least one). */
static int perf_slots(const struct perf_opts *o, long long size)
{
    long long n = size > 0 ? o->span / size : 1;
    return n < 1 ? 1 : (int)n;
}

/* The pattern of slot s of a size's messages. */
static uint64_t slot_id(long long size, int s)
{
    return (uint64_t)size ^ ((uint64_t)s << 40);
}

static int sizes_loop(struct nd_world *w, const struct perf_opts *o, struct perf_ctx *p)
{
    if (w->rank == 0)
        printf("%12s %8s %12s %10s %10s\n", "bytes", "iters", "time[us]", "GB/s", "Gb/s");
    for (long long size = o->min; size <= o->max; size = size ? size * 2 : 1) {
        int iters = o->iters;
        if (iters <= 0) {
            long long budget = (256ll << 20) / (size ? size : 1);
            iters = (int)(budget < 20 ? 20 : budget > 2000 ? 2000 : budget);
        }
        int nslots = perf_slots(o, size);
        /* every slot carries its own pattern, and the receiver checks the
         * last message's slot against the one it was sent from */
        for (int s = 0; s < nslots; s++) {
            char *at = p->buf + (size_t)s * (size_t)size;
            if (p->sender)
                nd_fill(at, (size_t)size, slot_id(size, s));
            else
                memset(at, 0, (size_t)size);
        }
        double t0 = nd_now();
        int most = 0;
        double mean = 0;
        if (stream(p, (int)size, nslots, iters, o->window, &most, &mean))
            return 1;
        double us = (nd_now() - t0) * 1e6;
        if (!p->sender) {
            if (o->receives) {
                /* the receiver's own line (printed by its rank, so it may
                 * come before the size's row): far fewer sends than
                 * receives in flight means the clear-to-sends came late */
                printf("# %lld bytes: at most %d receives posted, %.1f on average\n", size, most, mean);
                fflush(stdout);
            }
            int last = (iters - 1) % nslots;
            long bad = nd_check(p->buf + (size_t)last * (size_t)size, (size_t)size, slot_id(size, last));
            if (bad >= 0) {
                fprintf(stderr, "netdriver: %lld-byte message wrong at byte %ld\n", size, bad);
                return 1;
            }
        }
        if (w->rank == 0) {
            double gbs = (double)size * iters / us / 1e3;
            printf("%12lld %8d %12.1f %10.3f %10.2f\n", size, iters, us, gbs, gbs * 8);
            printf("# %lld bytes: at most %d sends in flight (window %d), %.1f on average\n", size, most, o->window,
                   mean);
            if (nslots > 1)
                printf("# %lld bytes: %d slots, %lld bytes touched on each side\n", size, nslots,
                       (long long)nslots * size);
        }
        if (size == 0 && o->max == 0)
            break;
    }
    return 0;
}

static int setup(struct nd_world *w, const struct perf_opts *o, struct perf_ctx *p)
{
    memset(p, 0, sizeof(*p));
    if (nd_connect_all(w))
        return -1;
    p->net = w->net;
    p->sender = w->rank == 0;
    p->comm = p->sender ? w->send[1][o->dev] : w->recv[0][o->dev];
    p->deadline = w->deadline;
    size_t len = (size_t)(o->max > 4096 ? o->max : 4096);
    if ((size_t)o->span > len)
        len = (size_t)o->span;
    if (posix_memalign((void **)&p->buf, 4096, len))
        return -1;
    memset(p->buf, 0, len);
    if (p->net->regMr(p->comm, p->buf, len, NCCL_PTR_HOST, &p->mh) != ncclSuccess) {
        fprintf(stderr, "netdriver: regMr failed\n");
        return -1;
    }
    return 0;
}

static void teardown(struct nd_world *w, struct perf_ctx *p)
{
    if (p->mh)
        p->net->deregMr(p->comm, p->mh);
    free(p->buf);
    nd_close_all(w);
}

static int bw_rank(struct nd_world *w, void *arg)
{
    const struct perf_opts *o = arg;
    struct perf_ctx p;
    int st = setup(w, o, &p) ? 1 : sizes_loop(w, o, &p);
    teardown(w, &p);
    return st;
}

/* Posts until the plugin takes the request (a send waits for its
 * clear-to-send): 0, or -1 on an error or the deadline. */
static int post_until(struct perf_ctx *p, void *buf, int size, void **req)
{
    for (unsigned tries = 1; !*req; tries++) {
        if (post(p, buf, size, 9, req) || (tries % DEADLINE_EVERY == 0 && nd_now() > p->deadline))
            return -1;
    }
    return 0;
}

/* Tests the request *req until it is done with size bytes: 0, or -1 on an
 * error, a wrong size or the deadline.  It polls as perftest's latency
 * tests poll, without giving the CPU away on each idle pass (NCCL's proxy
 * yields, but a yield's system call then sits in every wait and is timed
 * as the plugin's): every LAT_YIELD_EVERY idle passes it yields once, so
 * a software NIC's threads on a host of few cores still get to run. */
#define LAT_YIELD_EVERY 1024
static int wait_one(struct perf_ctx *p, int size, void **req)
{
    for (unsigned idle = 1;; idle++) {
        int done = 0, got = -1;
        if (test(p, *req, &done, &got))
            return -1;
        if (done) {
            *req = NULL;
            return got == size ? 0 : -1;
        }
        if (idle % DEADLINE_EVERY == 0 && nd_now() > p->deadline) {
            fprintf(stderr, "netdriver: deadline passed in the ping-pong\n");
            return -1;
        }
        if (idle % LAT_YIELD_EVERY == 0)
            sched_yield();
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int lat_rank(struct nd_world *w, void *arg)
{
    const struct perf_opts *o = arg;
    struct perf_ctx p;
    if (setup(w, o, &p)) {
        teardown(w, &p);
        return 1;
    }
    /* ping-pong needs both directions on one device */
    void *back = w->rank == 0 ? w->recv[1][o->dev] : w->send[0][o->dev];
    struct perf_ctx q = p;
    q.comm = back;
    q.sender = !p.sender;
    if (p.net->regMr(q.comm, q.buf, 8192, NCCL_PTR_HOST, &q.mh) != ncclSuccess) {
        teardown(w, &p);
        return 1;
    }
    int iters = o->iters > 0 ? o->iters : 1000, st = 0;
    int size = (int)o->min;
    double t0 = 0;
    /* As NCCL's proxy does, receives are posted ahead (LAT_AHEAD of them):
     * the clear-to-send of a message is at the sender a round trip before
     * the sender needs it, so only the message itself is timed. */
#define LAT_AHEAD 2
    struct perf_ctx *in = w->rank == 0 ? &q : &p, *out = w->rank == 0 ? &p : &q;
    char *rbuf = q.buf + 4096, *sbuf = q.buf;
    void *rreq[LAT_AHEAD] = { 0 }, *sreq = NULL;
    int total = iters + 10;
    for (int k = 0; k < LAT_AHEAD && k < total && !st; k++)
        st = post(in, rbuf, size, 9, &rreq[k]) || !rreq[k];
    /* round trips after the first 10 (warm-up), for the median: on a busy
     * host a few slow ones weigh on the mean (perftest prints both too) */
    double *rtt = calloc((size_t)iters, sizeof(double));
    st = st || !rtt;
    double last = 0;
    for (int i = 0; i < total && !st; i++) {
        double now = nd_now();
        if (i == 10)
            t0 = now;
        if (i > 10)
            rtt[i - 11] = now - last;
        last = now;
        void **r = &rreq[i % LAT_AHEAD];
        /* The receive of a later round takes a slot once the message is on
         * its way: its clear-to-send then never queues in front of the
         * message (NCCL's proxy posts its receives steps ahead, not between
         * a step's data and its send). Rank 0 refills the slot its last
         * round freed, rank 1 the one this round frees. */
        if (w->rank == 0) {
            st = post_until(out, sbuf, size, &sreq);
            if (!st && i > 0 && i - 1 + LAT_AHEAD < total) {
                void **prev = &rreq[(i - 1) % LAT_AHEAD];
                st = post(in, rbuf, size, 9, prev) || !*prev;
            }
            st = st || wait_one(out, size, &sreq) || wait_one(in, size, r);
        } else {
            st = wait_one(in, size, r) || post_until(out, sbuf, size, &sreq);
            if (!st && i + LAT_AHEAD < total)
                st = post(in, rbuf, size, 9, r) || !*r;
            st = st || wait_one(out, size, &sreq);
        }
    }
    if (!st && w->rank == 0) {
        double end = nd_now();
        rtt[iters - 1] = end - last;
        qsort(rtt, (size_t)iters, sizeof(double), cmp_double);
        printf("%d-byte ping-pong: %d iterations, %.2f us one-way (mean), %.2f us one-way (median)\n", size, iters,
               (end - t0) * 1e6 / iters / 2, rtt[iters / 2] * 1e6 / 2);
    }
    free(rtt);
    p.net->deregMr(q.comm, q.mh);
    teardown(w, &p);
    return st;
}

static int parse(int argc, char **argv, struct perf_opts *o, const char *help)
{
    static const struct option lo[] = { { "min", 1, 0, 'm' },    { "max", 1, 0, 'M' }, { "size", 1, 0, 's' },
                                        { "iters", 1, 0, 'n' },  { "window", 1, 0, 'w' }, { "dev", 1, 0, 'd' },
                                        { "timeout", 1, 0, 't' }, { "span", 1, 0, 'S' },  { "help", 0, 0, 'h' },
                                        { "receives", 0, 0, 'r' },
                                        { 0, 0, 0, 0 } };
    optind = 1;
    int c, bad = 0;
    while (!bad && (c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'm': bad = nd_opt_size("--min", optarg, 0, 1ll << 30, &o->min); break;
        case 'M': bad = nd_opt_size("--max", optarg, 0, 1ll << 30, &o->max); break;
        case 's':
            if (!(bad = nd_opt_size("--size", optarg, 0, 1ll << 30, &o->max)))
                o->min = o->max;
            break;
        case 'n': bad = nd_opt_int("--iters", optarg, 0, INT_MAX, &o->iters); break;
        case 'w': bad = nd_opt_int("--window", optarg, 1, PERF_MAX_WINDOW, &o->window); break;
        case 'd': bad = nd_opt_int("--dev", optarg, 0, ND_MAX_DEVS - 1, &o->dev); break;
        case 't': bad = nd_opt_seconds("--timeout", optarg, &o->timeout); break;
        case 'S': bad = nd_opt_size("--span", optarg, 0, 1ll << 30, &o->span); break;
        case 'r': o->receives = 1; break;
        case 'h': printf("%s", help); return 0;
        default: fprintf(stderr, "%s", help); return 2;
        }
    }
    if (bad)
        return 2;
    if (o->min < 0 || o->max < o->min || o->max > (1ll << 30) || o->window < 1 || o->window > PERF_MAX_WINDOW ||
        o->dev < 0 || o->dev >= ND_MAX_DEVS || o->timeout <= 0 || o->iters < 0 || o->span < 0 ||
        o->span > (1ll << 30)) {
        fprintf(stderr, "%s", help);
        return 2;
    }
    return -1;
}

int nd_cmd_bw(int argc, char **argv)
{
    static const char help[] = "usage: netdriver bw [--min BYTES] [--max BYTES] [--size BYTES] [--iters N]\n"
                               "         [--window 1..32] [--dev D] [--timeout SEC] [--span BYTES] [--receives]\n"
                               "  rank 0 streams to rank 1 over device D; sizes double from min to max.\n"
                               "  --span: messages walk slot by slot through BYTES on each side (default:\n"
                               "  every message at the buffer's start).\n"
                               "  --receives: the receiver prints its receives posted (most, mean) too.\n";
    struct perf_opts o = { .min = 4096, .max = 16 << 20, .window = 8, .timeout = 120 };
    int r = parse(argc, argv, &o, help);
    if (r >= 0)
        return r;
    if (!nd_rank_process())
        printf("netdriver bw: 2 ranks, device %d, %d requests in flight\n", o.dev, o.window);
    return nd_run_ranks(2, o.dev + 1, o.timeout, -1, 0, bw_rank, &o);
}

int nd_cmd_lat(int argc, char **argv)
{
    static const char help[] = "usage: netdriver lat [--size BYTES(<=4096)] [--iters N] [--dev D] [--timeout SEC]\n";
    struct perf_opts o = { .min = 8, .max = 8, .window = 1, .timeout = 60 };
    int r = parse(argc, argv, &o, help);
    if (r >= 0)
        return r;
    if (o.min > 4096) {
        fprintf(stderr, "%s", help);
        return 2;
    }
    o.max = 8192; /* the buffer: a send half and a receive half */
    return nd_run_ranks(2, o.dev + 1, o.timeout, -1, 0, lat_rank, &o);
}
