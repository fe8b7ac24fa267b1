/* bench/scale_bench.c: what one rank costs as the job grows. For each rank
 * count N, N processes of this host each load the plugin and connect to
 * every other rank twice: through the net table (ncclNetPlugin_v8, as NCCL's
 * proxy drives it: one listen per peer, connect and accept polled until all
 * are up, one message each way per peer) and through the GIN table
 * (ncclGinPlugin_v11, proxy type: the collective connect, createContext, one
 * symmetric window, a put with signal to every peer; --gin gdaki: the GDAKI
 * type as NCCL holds it, CPU-only (RAILNET_GDAKI_QUEUE_MEM=host-devx, unless set
 * otherwise: host or gpu on a GPU machine, for the GPU memory figure): the
 * collective connect, one createContext, one symmetric window, no put from
 * the host, which has none on that type; with --queue-depth D through
 * ncclGinPlugin_v12 instead, as NCCL 2.29 calls it: connect with one
 * connection and queue depth D, which sizes the GDAKI send rings, and
 * createContext with one context). --rails R connects
 * GIN as NCCL's RAIL connection type does (no cross-NIC support): with R
 * ranks a node, each rank passes connect only its rail's handles (the ranks
 * of its local index, one a node), so its GIN peers are the N/R nodes' and
 * puts address them by rail rank; the p2p mesh is the same. Then each rank reads
 * what it holds: threads, fds, RSS, pinned memory and, on softnic, its live
 * QPs, CQs and MRs; and the CPU its threads use over one idle second.
 * Where a CUDA GPU is present (the driver through plugin/ib/cudawrap.h; "n/a"
 * without one), the GPU memory GIN's setup takes per rank: every rank makes
 * device 0's primary context current at its start, as an NCCL rank has a
 * context before GIN (GIN's GDAKI type binds the current context's device:
 * plugin/gin/gin_gdaki.c), and rank 0 reads the device's free memory
 * (cuMemGetInfo) at two barriers: before any rank starts GIN and once every
 * rank has finished createContext and the window's regMrSym. The ranks share
 * the one GPU, so the device-wide difference is all ranks' allocations:
 * (before - after) / N is the per-rank figure. The
 * parent relays handles and prints one row per N and, at the end, a
 * least-squares fit a + b*N of each metric per rank.
 *
 * The parent runs every N as a sequence of steps; a step ends when every
 * rank reported it. A rank that fails a step, dies or misses the step's
 * time budget stops the bench: it says which step, which rank and why
 * (the first and last WARN the plugin logged in that rank), and fits what
 * it has.
 * bench/scale.sh runs it on softnic. Usage: scale_bench --help. */
#include "nccl_gin_v11.h"
#include "nccl_gin_v12.h"
#include "nccl_net_v8.h"
#include "plugin/ib/cudawrap.h"
#include "plugin/ib/parse.h"
#include "tools/common/fdio.h"
#include "tools/common/gin_v12_as_v11.h"
#include "tools/common/plugin_tables.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 1024
#define MAX_COUNTS 32
#define HANDLE NCCL_NET_HANDLE_MAXSIZE
#define MSG_MAX 1024

static const char help[] =
    "usage: scale_bench [--ranks LIST] [--rails R] [--step-timeout S] [--total-timeout S] [--bytes B]\n"
    "                   [--gin TYPE] [--queue-depth D] [--plugin PATH] [--verbose]\n"
    "For each rank count N, forks N rank processes on this host; every rank connects to every\n"
    "other through railnet's net table (ncclNetPlugin_v8: a listen per peer, connect and accept\n"
    "polled until all are up, one registered message each way per peer, byte-checked) and its\n"
    "GIN table (ncclGinPlugin_v11, proxy type: connect, createContext, regMrSym of one window,\n"
    "a put with signal to every peer, every peer's signal awaited, byte-checked). Then each rank\n"
    "reads what it holds. One row per N: median/max over ranks of connect time (p2p, GIN),\n"
    "CPU use over one idle second with everything up (100 = one core), threads, fds, RSS,\n"
    "pinned memory (VmLck + VmPin) and softnic's live QPs/CQs/MRs\n"
    "(softnic_ctl_objects; n/a without softnic), and GIN's share of fds, RSS, QPs, CQs and MRs\n"
    "(everything up less the p2p mesh alone), and GIN's GPU memory a rank where a CUDA GPU is\n"
    "present (n/a without one): each rank makes GPU 0's primary context current at its start,\n"
    "rank 0 reads the GPU's free memory (cuMemGetInfo) before any rank starts GIN and after\n"
    "every rank has finished createContext and regMrSym; the ranks share that GPU, so the\n"
    "figure is the drop over N (one figure, not median/max). After the last N: a least-squares fit\n"
    "a + b*N of each metric's median, with everything up and with the p2p mesh alone.\n"
    "A step that fails, a rank that dies or a step over its time budget stops the bench; the\n"
    "last line says which step of which N and why.\n"
    "  --ranks LIST         rank counts, comma- or space-separated, 2..1024 (default 2,4,8,16,32,64)\n"
    "  --rails R            GIN connected as NCCL's RAIL connection type with R ranks a node (rank r:\n"
    "                       node r / R, local index r % R): connect gets only the rail's handles (the\n"
    "                       ranks of one local index) in node order, puts go to the rail's ranks by\n"
    "                       rail rank; every N a multiple of R (default 1: FULL, every rank's handle)\n"
    "  --step-timeout S     seconds one step may take (default 120)\n"
    "  --total-timeout S    seconds all counts may take together, 0 = no limit (default 0)\n"
    "  --bytes B            bytes of each message and each put (default 65536)\n"
    "  --gin TYPE           proxy: the GIN table as above (default); gdaki: the GDAKI type with every\n"
    "                       structure in host memory (RAILNET_GDAKI_QUEUE_MEM=host-devx, no GPU, unless\n"
    "                       RAILNET_GDAKI_QUEUE_MEM names another placement: host or gpu on a GPU machine):\n"
    "                       connect, one createContext, regMrSym of the window, and no put (NCCL's\n"
    "                       device code posts on that type; the host has no data path on it)\n"
    "  --queue-depth D      with --gin gdaki: GIN through ncclGinPlugin_v12 (NCCL 2.29's table):\n"
    "                       connect with one connection and queue depth D, 1..65536, which sizes\n"
    "                       each QP's send ring (a power of two within 16..16384), createContext\n"
    "                       with one context (default: ncclGinPlugin_v11, no queue depth: 512 slots)\n"
    "  --plugin PATH        the plugin (default $top_builddir/.libs/libnccl-net-railnet.so)\n"
    "  --verbose            the plugin's WARN lines on stderr, prefixed by rank\n"
    "Sets RAILNET_GIN to TYPE. Run on softnic: LD_LIBRARY_PATH=BUILD/tests/softnic (bench/scale.sh).\n"
    "exit status: 0 every count ran, 1 the bench stopped early, 2 usage or load error.\n";

/* ------------------------------------------------------------ shared bits */

enum step {
    STEP_P2P_LISTEN,  /* load, init, N-1 listens; handles to the parent */
    STEP_P2P_CONNECT, /* connect/accept to every peer */
    STEP_P2P_DATA,    /* regMr, one message each way per peer */
    STEP_GIN_LISTEN,  /* GIN init and listen; handle to the parent */
    STEP_GIN_CONNECT, /* the collective connect */
    STEP_GIN_SETUP,   /* createContext, regMrSym of the window */
    STEP_GIN_PUT,     /* put with signal to every peer, every signal awaited */
    STEP_METRICS,     /* what the rank holds; its CPU use over 1 s idle */
    STEP_TEARDOWN,    /* everything closed, the rank exited */
    NSTEPS
};

static const char *const step_name[NSTEPS] = {
    "p2p listen", "p2p connect", "p2p data", "GIN listen", "GIN connect", "GIN createContext/regMrSym",
    "GIN put+signal", "metrics", "teardown",
};

struct snap {
    int64_t threads, fds, rss_kb, pinned_kb;
    int64_t qps, cqs, mrs; /* -1: n/a (no softnic_ctl_objects) */
};

struct rank_report {
    double p2p_connect_s, gin_connect_s;
    double idle_cpu; /* CPU seconds a second the rank used, all up and idle */
    int64_t gpu_free_before, gpu_free_after; /* bytes free on the GPU (rank 0 only); -1: n/a */
    struct snap p2p, all; /* after the p2p mesh; after the GIN mesh too */
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A polling loop that made no progress in a round waits this long before
 * the next: N ranks polling flat out would take a small host's CPUs from
 * the NIC threads they wait for (softnic's own tests wait 200 us too). */
#define IDLE_US 200

/* A message between a rank and the parent: type ('S' step done, 'F'
 * failed: text; parent: 'R' reply), length, payload. */
static int msg_send(int fd, char type, const void *p, uint32_t len)
{
    return fd_write_all(fd, &type, 1) || fd_write_all(fd, &len, sizeof(len)) || (len && fd_write_all(fd, p, len));
}

/* Reads a message into buf (at most cap bytes); -1 on EOF or oversize. */
static int msg_recv(int fd, char *type, void *buf, uint32_t cap, uint32_t *len)
{
    if (fd_read_all(fd, type, 1) || fd_read_all(fd, len, sizeof(*len)) || *len > cap)
        return -1;
    return *len ? fd_read_all(fd, buf, *len) : 0;
}

/* Byte j of the message (or put) from rank s to rank d. */
static uint8_t pattern(int s, int d, size_t j)
{
    uint64_t x = ((uint64_t)s << 40 | (uint64_t)d << 20) ^ (j * 0x9e3779b97f4a7c15ull);
    x ^= x >> 29;
    return (uint8_t)(x ^ (x >> 17) ^ (j >> 8));
}

/* ------------------------------------------------------------------ rank */

/* softnic_ctl_objects (tests/softnic/softnic_ctl.h), declared here so that
 * the bench needs neither softnic's header nor verbs.h. */
struct softnic_ctl_objects_view {
    int64_t qps, cqs, mrs;
};

struct rank {
    int me, n, fd;
    int rails, gn, gme; /* GIN: ranks a node; the rank's rail: its size, its rank in it */
    int gdaki;          /* --gin gdaki */
    int depth;          /* --queue-depth: GIN v12's connect queueDepth; 0: GIN v11 */
    size_t bytes;
    double budget; /* seconds a step may take */
    struct plugin_tables lib;
    const ncclNet_v8_t *net;
    const ncclGin_v11_t *gin;
    void **lc, **sc, **rc, **smh, **rmh;
    uint8_t **sbuf, **rbuf;
    void *gctx, *glisten, *gcoll, *gcontext, *gmh;
    uint8_t *win;
    size_t win_len;
    int (*objects)(struct softnic_ctl_objects_view *);
    const struct cudawrap *cu; /* NULL: no CUDA GPU here (GPU figure n/a) */
};

static struct {
    int verbose, me, nwarn;
    char first_warn[300], last_warn[300];
} rank_log;

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...)
{
    (void)flags;
    if (level != NCCL_LOG_WARN)
        return;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    char *keep = rank_log.nwarn++ ? rank_log.last_warn : rank_log.first_warn;
    snprintf(keep, sizeof(rank_log.first_warn), "%.240s (%s:%d)", msg, file, line);
    if (rank_log.verbose)
        fprintf(stderr, "rank %d: WARN %s (%s:%d)\n", rank_log.me, msg, file, line);
}

static void snapshot(struct rank *r, struct snap *s);

/* Tells the parent this rank failed, with what it holds by then and the
 * plugin's first and last WARN (each cut to a line). */
static int fail(struct rank *r, const char *fmt, ...)
{
    char msg[MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    struct snap s;
    snapshot(r, &s);
    char qps[32] = "";
    if (s.qps >= 0)
        snprintf(qps, sizeof(qps), ", %lld QPs", (long long)s.qps);
    if (k >= 0 && (size_t)k < sizeof(msg))
        k += snprintf(msg + k, sizeof(msg) - (size_t)k, " (this rank: %lld threads, %lld fds%s)",
                      (long long)s.threads, (long long)s.fds, qps);
    if (k >= 0 && (size_t)k < sizeof(msg) && rank_log.nwarn == 1)
        snprintf(msg + k, sizeof(msg) - (size_t)k, "; the plugin's WARN: %s", rank_log.first_warn);
    else if (k >= 0 && (size_t)k < sizeof(msg) && rank_log.nwarn > 1)
        snprintf(msg + k, sizeof(msg) - (size_t)k, "; the plugin's first of %d WARNs: %s; its last: %s",
                 rank_log.nwarn, rank_log.first_warn, rank_log.last_warn);
    (void)msg_send(r->fd, 'F', msg, (uint32_t)strlen(msg));
    return 1;
}

/* Reports a step done with payload p, waits for the parent's reply (into
 * reply, at most cap bytes). */
static int step_done(struct rank *r, const void *p, uint32_t len, void *reply, uint32_t cap)
{
    char type;
    uint32_t got;
    char sink[1];
    if (msg_send(r->fd, 'S', p, len) || msg_recv(r->fd, &type, reply ? reply : sink, reply ? cap : 0, &got) ||
        type != 'R')
        return -1;
    return 0;
}

static int64_t count_dir(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int64_t k = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        k += e->d_name[0] != '.';
    closedir(d);
    return k;
}

static void snapshot(struct rank *r, struct snap *s)
{
    s->threads = count_dir("/proc/self/task");
    s->fds = count_dir("/proc/self/fd");
    if (s->fds > 0)
        s->fds--; /* the directory's own fd while it is read */
    s->rss_kb = s->pinned_kb = -1;
    FILE *f = fopen("/proc/self/statm", "r");
    long long size, res;
    if (f && fscanf(f, "%lld %lld", &size, &res) == 2)
        s->rss_kb = res * (sysconf(_SC_PAGESIZE) / 1024);
    if (f)
        fclose(f);
    if ((f = fopen("/proc/self/status", "r"))) {
        char line[256];
        long long kb;
        s->pinned_kb = 0;
        while (fgets(line, sizeof(line), f))
            if (sscanf(line, "VmLck: %lld kB", &kb) == 1 || sscanf(line, "VmPin: %lld kB", &kb) == 1)
                s->pinned_kb += kb;
        fclose(f);
    }
    struct softnic_ctl_objects_view o;
    s->qps = s->cqs = s->mrs = -1;
    if (r->objects && r->objects(&o) == 0)
        s->qps = o.qps, s->cqs = o.cqs, s->mrs = o.mrs;
}

/* CPU seconds (user + system, all threads) this process used so far. */
static double cpu_s(void)
{
    FILE *f = fopen("/proc/self/stat", "r");
    char buf[1024];
    size_t len = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f)
        fclose(f);
    buf[len] = 0;
    char *p = strrchr(buf, ')');
    unsigned long long ut, st;
    /* after the name: state ppid pgrp session tty tpgid flags minflt cminflt
     * majflt cmajflt utime stime */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* GIN's GPU memory: GPU 0's primary context made current in this rank, as
 * an NCCL rank has a context before GIN, so that neither the context's own
 * memory nor a rank creating it during GIN lands in GIN's figure. GIN's
 * GDAKI type binds the primary context of the current context's device
 * (plugin/gin/gin_gdaki.c, plugin/gdaki/gdaki_cuda.c): this same one, so
 * the readings are of the device GIN allocates on. Without a CUDA driver or
 * GPU r->cu stays NULL and the figure is n/a; that is no error. */
static void gpu_bind(struct rank *r)
{
    const struct cudawrap *cu = cudawrap_get(NULL, 0);
    cudawrap_device d;
    cudawrap_ctx ctx;
    int n = 0;
    if (cu && cu->device_get_count(&n) == 0 && n > 0 && cu->device_get(&d, 0) == 0 &&
        cu->primary_ctx_retain(&ctx, d) == 0 && cu->ctx_set_current(ctx) == 0)
        r->cu = cu;
}

/* Rank 0's reading of the GPU's free bytes into *out (else it stays -1);
 * always 0, to sit between the steps. */
static int gpu_reading(const struct rank *r, int64_t *out)
{
    size_t free_b, total_b;
    if (r->me == 0 && r->cu && r->cu->mem_get_info(&free_b, &total_b) == 0)
        *out = (int64_t)free_b;
    return 0;
}

/* softnic_ctl_objects, once the plugin loaded libibverbs: the plugin opens
 * it RTLD_LOCAL, so it is looked up by handle when RTLD_DEFAULT misses it. */
static void find_objects(struct rank *r)
{
    void *f = dlsym(RTLD_DEFAULT, "softnic_ctl_objects");
    if (!f) {
        void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
        if (h)
            f = dlsym(h, "softnic_ctl_objects");
    }
    *(void **)&r->objects = f;
}

static int p2p_listen(struct rank *r, uint8_t (*col)[HANDLE])
{
    int n = r->n;
    static uint8_t mine[MAX_RANKS][HANDLE];
    memset(mine, 0, sizeof(mine));
    for (int p = 0; p < n; p++) {
        if (p == r->me)
            continue;
        ncclResult_t e = r->net->listen(0, mine[p], &r->lc[p]);
        if (e != ncclSuccess)
            return fail(r, "listen for peer %d (%d of %d) failed (%d)", p, p + (p < r->me), n - 1, e);
    }
    /* the parent hands each rank the handles every peer made for it */
    if (step_done(r, mine, (uint32_t)n * HANDLE, col, (uint32_t)n * HANDLE))
        return 1;
    return 0;
}

static int p2p_connect(struct rank *r, uint8_t (*col)[HANDLE], double *took)
{
    int n = r->n, up = 0, want = 2 * (n - 1);
    double t0 = now_s();
    while (up < want) {
        int before = up;
        up = 0;
        for (int p = 0; p < n; p++) {
            if (p == r->me)
                continue;
            ncclResult_t e;
            if (!r->sc[p] && (e = r->net->connect(0, col[p], &r->sc[p], NULL)) != ncclSuccess)
                return fail(r, "connect to rank %d failed (%d)", p, e);
            if (!r->rc[p] && (e = r->net->accept(r->lc[p], &r->rc[p], NULL)) != ncclSuccess)
                return fail(r, "accept from rank %d failed (%d)", p, e);
            up += (r->sc[p] != NULL) + (r->rc[p] != NULL);
        }
        if (up < want && now_s() - t0 > r->budget) {
            int s = 0, c = 0;
            for (int p = 0; p < n; p++)
                s += r->sc[p] != NULL, c += r->rc[p] != NULL;
            return fail(r, "%d of %d send comms and %d of %d recv comms up after %.0f s", s, n - 1, c, n - 1,
                        now_s() - t0);
        }
        if (up == before)
            usleep(IDLE_US);
    }
    *took = now_s() - t0;
    return 0;
}

static int p2p_data(struct rank *r)
{
    int n = r->n, done = 0, want = 2 * (n - 1);
    size_t b = r->bytes;
    void **sreq = calloc((size_t)n, sizeof(void *)), **rreq = calloc((size_t)n, sizeof(void *));
    char *sdone = calloc((size_t)n, 1), *rdone = calloc((size_t)n, 1);
    if (!sreq || !rreq || !sdone || !rdone)
        return fail(r, "out of memory");
    for (int p = 0; p < n; p++) {
        if (p == r->me)
            continue;
        if (posix_memalign((void **)&r->sbuf[p], 4096, b) || posix_memalign((void **)&r->rbuf[p], 4096, b))
            return fail(r, "out of memory for %zu-byte buffers", b);
        for (size_t j = 0; j < b; j++)
            r->sbuf[p][j] = pattern(r->me, p, j);
        memset(r->rbuf[p], 0, b);
        ncclResult_t e;
        if ((e = r->net->regMr(r->sc[p], r->sbuf[p], b, NCCL_PTR_HOST, &r->smh[p])) != ncclSuccess)
            return fail(r, "regMr on the send comm to rank %d failed (%d)", p, e);
        if ((e = r->net->regMr(r->rc[p], r->rbuf[p], b, NCCL_PTR_HOST, &r->rmh[p])) != ncclSuccess)
            return fail(r, "regMr on the recv comm from rank %d failed (%d)", p, e);
    }
    double t0 = now_s();
    while (done < want) {
        int before = done;
        for (int p = 0; p < n; p++) {
            if (p == r->me)
                continue;
            ncclResult_t e;
            if (!rdone[p] && !rreq[p]) {
                void *data = r->rbuf[p];
                int size = (int)b, tag = 0;
                if ((e = r->net->irecv(r->rc[p], 1, &data, &size, &tag, &r->rmh[p], &rreq[p])) != ncclSuccess)
                    return fail(r, "irecv from rank %d failed (%d)", p, e);
            }
            if (!sdone[p] && !sreq[p] &&
                (e = r->net->isend(r->sc[p], r->sbuf[p], (int)b, 0, r->smh[p], &sreq[p])) != ncclSuccess)
                return fail(r, "isend to rank %d failed (%d)", p, e);
            int d = 0, sizes[1] = { 0 };
            if (rreq[p]) {
                if ((e = r->net->test(rreq[p], &d, sizes)) != ncclSuccess)
                    return fail(r, "test of the irecv from rank %d failed (%d)", p, e);
                if (d) {
                    rreq[p] = NULL, rdone[p] = 1, done++;
                    if (sizes[0] != (int)b)
                        return fail(r, "the message from rank %d has %d bytes, expected %zu", p, sizes[0], b);
                    for (size_t j = 0; j < b; j++)
                        if (r->rbuf[p][j] != pattern(p, r->me, j))
                            return fail(r, "byte %zu of the message from rank %d is 0x%02x, expected 0x%02x", j, p,
                                        r->rbuf[p][j], pattern(p, r->me, j));
                }
            }
            if (sreq[p]) {
                if ((e = r->net->test(sreq[p], &d, sizes)) != ncclSuccess)
                    return fail(r, "test of the isend to rank %d failed (%d)", p, e);
                if (d)
                    sreq[p] = NULL, sdone[p] = 1, done++;
            }
        }
        if (done < want && now_s() - t0 > r->budget)
            return fail(r, "%d of %d messages done after %.0f s", done, want, now_s() - t0);
        if (done == before)
            usleep(IDLE_US);
    }
    free(sreq), free(rreq), free(sdone), free(rdone);
    return 0;
}

static int gin_listen_step(struct rank *r, uint8_t (*all)[HANDLE])
{
    ncclResult_t e = r->gin->init(&r->gctx, 0x5ca1eull << 16 | (uint64_t)r->n, logger);
    if (e != ncclSuccess)
        return fail(r, "GIN init failed (%d)", e);
    uint8_t h[HANDLE];
    memset(h, 0, sizeof(h));
    ncclNetProperties_v11_t props;
    if (r->gdaki && (r->gin->getProperties(0, &props) != ncclSuccess ||
                     props.netDeviceType != NCCL_NET_DEVICE_GIN_GDAKI))
        return fail(r, "--gin gdaki: the plugin does not offer the GDAKI type (RAILNET_GIN=gdaki with "
                       "RAILNET_GDAKI_QUEUE_MEM=host-devx needs a device that opens for DEVX: softnic's does)");
    if ((e = r->gin->listen(r->gctx, 0, h, &r->glisten)) != ncclSuccess)
        return fail(r, "GIN listen failed (%d)", e);
    return step_done(r, h, HANDLE, all, (uint32_t)r->n * HANDLE) ? 1 : 0;
}

/* The world rank of GIN rank g of this rank's rail. */
static int gin_world(const struct rank *r, int g)
{
    return g * r->rails + r->me % r->rails;
}

static int gin_connect_step(struct rank *r, uint8_t (*all)[HANDLE], double *took)
{
    /* FULL: every handle; RAIL: the rail's, in node order (rails 1: the same) */
    void **hp = calloc((size_t)r->gn, sizeof(void *));
    if (!hp)
        return fail(r, "out of memory");
    for (int i = 0; i < r->gn; i++)
        hp[i] = all[gin_world(r, i)];
    double t0 = now_s();
    ncclResult_t e = r->gin->connect(r->gctx, hp, r->gn, r->gme, r->glisten, &r->gcoll);
    *took = now_s() - t0;
    free(hp);
    if (e != ncclSuccess || !r->gcoll)
        return fail(r, "GIN connect of %d ranks as rank %d failed (%d) after %.1f s", r->gn, r->gme, e, *took);
    return 0;
}

/* The window: [what this rank puts to each GIN peer, b bytes a peer][what
 * each GIN peer put here][one 8-byte signal word a GIN peer], by GIN rank. */
static int gin_setup_step(struct rank *r)
{
    size_t b = r->bytes, n = (size_t)r->gn;
    ncclNetDeviceHandle_v11_t *dh = NULL;
    ncclResult_t e = r->gin->createContext(r->gcoll, (int)n, 0, &r->gcontext, &dh);
    if (e != ncclSuccess || !r->gcontext)
        return fail(r, "GIN createContext failed (%d)", e);
    r->win_len = (2 * n * b + n * 8 + 4095) & ~(size_t)4095;
    if (posix_memalign((void **)&r->win, 4096, r->win_len))
        return fail(r, "out of memory for a %zu-byte window", r->win_len);
    memset(r->win, 0, r->win_len);
    for (size_t p = 0; p < n; p++)
        for (size_t j = 0; j < b; j++)
            r->win[p * b + j] = pattern(r->me, gin_world(r, (int)p), j);
    void *gh = NULL;
    e = r->gin->regMrSym(r->gcoll, r->win, r->win_len, NCCL_PTR_HOST, NCCL_NET_MR_FLAG_FORCE_SO, &r->gmh, &gh);
    if (e != ncclSuccess || !r->gmh)
        return fail(r, "GIN regMrSym of a %zu-byte window failed (%d)", r->win_len, e);
    if (r->gdaki && (!gh || gh == r->gmh))
        return fail(r, "GIN regMrSym of the GDAKI type gave no device handle of the window");
    return 0;
}

static int gin_put_step(struct rank *r)
{
    if (r->gdaki)
        return 0; /* NCCL's device code posts on that type: the host has no put */
    int n = r->gn, me = r->gme; /* GIN ranks: the rail's with --rails */
    size_t b = r->bytes;
    uint64_t dst = (uint64_t)n * b, sig = 2 * (uint64_t)n * b;
    void **req = calloc((size_t)n, sizeof(void *));
    if (!req)
        return fail(r, "out of memory");
    double t0 = now_s();
    ncclResult_t e;
    for (int p = 0; p < n; p++) {
        if (p == me)
            continue;
        while (!req[p]) { /* no request: the plugin has no room yet */
            if ((e = r->gin->iputSignal(r->gcoll, (uint64_t)p * b, r->gmh, b, dst + (uint64_t)me * b, r->gmh,
                                        (uint32_t)p, sig + (uint64_t)me * 8, r->gmh, 1, NCCL_NET_SIGNAL_OP_INC,
                                        &req[p])) != ncclSuccess)
                return fail(r, "GIN iputSignal to GIN rank %d failed (%d)", p, e);
            if (!req[p] && (e = r->gin->ginProgress(r->gcoll)) != ncclSuccess)
                return fail(r, "GIN ginProgress failed (%d)", e);
            if (!req[p])
                usleep(IDLE_US);
            if (now_s() - t0 > r->budget)
                return fail(r, "GIN iputSignal to GIN rank %d got no request for %.0f s", p, now_s() - t0);
        }
    }
    const volatile uint64_t *sw = (const uint64_t *)(r->win + sig);
    for (int last = -1;;) {
        int mine = 0, theirs = 0;
        for (int p = 0; p < n; p++) {
            if (p == me)
                continue;
            if (req[p]) {
                int d = 0;
                if ((e = r->gin->test(r->gcoll, req[p], &d)) != ncclSuccess)
                    return fail(r, "GIN test of the put to GIN rank %d failed (%d)", p, e);
                if (d)
                    req[p] = NULL;
            }
            mine += req[p] == NULL;
            uint64_t v = __atomic_load_n(&sw[p], __ATOMIC_ACQUIRE);
            if (v > 1)
                return fail(r, "signal word of GIN rank %d is %llu, expected 1", p, (unsigned long long)v);
            theirs += v == 1;
        }
        if (mine == n - 1 && theirs == n - 1)
            break;
        if ((e = r->gin->ginProgress(r->gcoll)) != ncclSuccess)
            return fail(r, "GIN ginProgress failed (%d)", e);
        if (mine + theirs == last)
            usleep(IDLE_US);
        last = mine + theirs;
        if (now_s() - t0 > r->budget)
            return fail(r, "%d of %d puts done and %d of %d signals seen after %.0f s", mine, n - 1, theirs, n - 1,
                        now_s() - t0);
    }
    for (int p = 0; p < n; p++) {
        if (p == me)
            continue;
        const uint8_t *got = r->win + dst + (size_t)p * b;
        int pw = gin_world(r, p);
        for (size_t j = 0; j < b; j++)
            if (got[j] != pattern(pw, r->me, j))
                return fail(r, "byte %zu of the put from rank %d is 0x%02x, expected 0x%02x", j, pw, got[j],
                            pattern(pw, r->me, j));
    }
    free(req);
    return 0;
}

/* The GIN table the steps call: v11's, or with a queue depth v12's in
 * v11's shape (as NCCL 2.29 calls it: one connection, the queue depth,
 * one context). */
static const ncclGin_v11_t *gin_table(struct rank *r, char *err, size_t len)
{
    if (!r->depth)
        return plugin_tables_get(&r->lib, &plugin_table_gin_v11, PLUGIN_TABLES_NAME, err, len);
    const ncclGin_v12_t *v12 = plugin_tables_get(&r->lib, &plugin_table_gin_v12, PLUGIN_TABLES_NAME, err, len);
    static const int one = 1;
    return v12 ? gin_v12_as_v11(v12, &r->depth, &one) : NULL;
}

static void teardown(struct rank *r)
{
    if (r->gin) {
        if (r->gmh)
            r->gin->deregMrSym(r->gcoll, r->gmh);
        if (r->gcontext)
            r->gin->destroyContext(r->gcontext);
        if (r->gcoll)
            r->gin->closeColl(r->gcoll);
        if (r->glisten)
            r->gin->closeListen(r->glisten);
        if (r->gctx)
            r->gin->finalize(r->gctx);
    }
    for (int p = 0; p < r->n; p++) {
        if (r->smh[p])
            r->net->deregMr(r->sc[p], r->smh[p]);
        if (r->rmh[p])
            r->net->deregMr(r->rc[p], r->rmh[p]);
        if (r->sc[p])
            r->net->closeSend(r->sc[p]);
        if (r->rc[p])
            r->net->closeRecv(r->rc[p]);
        if (r->lc[p])
            r->net->closeListen(r->lc[p]);
    }
}

static int rank_main(const char *plugin, int me, int n, int rails, int gdaki, int depth, int fd, size_t bytes,
                     double budget, int verbose)
{
    static struct rank r;
    static uint8_t handles[MAX_RANKS][HANDLE];
    memset(&r, 0, sizeof(r));
    r.me = me, r.n = n, r.fd = fd, r.bytes = bytes, r.budget = budget;
    r.rails = rails, r.gn = n / rails, r.gme = me / rails, r.gdaki = gdaki, r.depth = depth;
    rank_log.me = me, rank_log.verbose = verbose;
    gpu_bind(&r);
    void ***arrays[] = { &r.lc, &r.sc, &r.rc, &r.smh, &r.rmh, (void ***)&r.sbuf, (void ***)&r.rbuf };
    for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++)
        if (!(*arrays[i] = calloc((size_t)n, sizeof(void *))))
            return fail(&r, "out of memory");
    char err[PATH_MAX + 256];
    int ndev = 0;
    if (plugin_tables_open(&r.lib, plugin, err, sizeof(err)))
        return fail(&r, "%s", err);
    if (!(r.net = plugin_tables_get(&r.lib, &plugin_table_net_v8, PLUGIN_TABLES_NAME, err, sizeof(err))) ||
        !(r.gin = gin_table(&r, err, sizeof(err))))
        return fail(&r, "%s", err);
    if (r.net->init(logger) != ncclSuccess || r.net->devices(&ndev) != ncclSuccess || ndev < 1)
        return fail(&r, "net init failed or no device (%d devices)", ndev);
    find_objects(&r);
    struct rank_report rep;
    memset(&rep, 0, sizeof(rep));
    rep.gpu_free_before = rep.gpu_free_after = -1;
    /* GIN's GPU memory, read by rank 0 at two barriers: "before" while every
     * rank waits at the end of the p2p steps (all contexts made, no rank has
     * started GIN), "after" once the step after GIN setup is released (every
     * rank has finished createContext and regMrSym; the put step after it
     * allocates nothing on the GPU). The ranks share the GPU, so the
     * device-wide drop is every rank's allocation: the parent reports
     * (before - after) / N as the per-rank figure. */
    int rc = p2p_listen(&r, handles) || p2p_connect(&r, handles, &rep.p2p_connect_s) ||
             step_done(&r, NULL, 0, NULL, 0) || p2p_data(&r) || gpu_reading(&r, &rep.gpu_free_before) ||
             step_done(&r, NULL, 0, NULL, 0);
    if (!rc) {
        snapshot(&r, &rep.p2p);
        rc = gin_listen_step(&r, handles) || gin_connect_step(&r, handles, &rep.gin_connect_s) ||
             step_done(&r, NULL, 0, NULL, 0) || gin_setup_step(&r) || step_done(&r, NULL, 0, NULL, 0) ||
             gpu_reading(&r, &rep.gpu_free_after) || gin_put_step(&r) || step_done(&r, NULL, 0, NULL, 0);
    }
    if (!rc) {
        snapshot(&r, &rep.all);
        /* every rank is past its last put: what the threads cost at rest */
        double c0 = cpu_s(), t0 = now_s();
        usleep(1000000);
        double c1 = cpu_s(), t1 = now_s();
        rep.idle_cpu = c0 < 0 || c1 < 0 ? -1 : (c1 - c0) / (t1 - t0);
        /* the reply comes when every rank is done: no rank closes a comm a
         * peer still uses */
        rc = step_done(&r, &rep, sizeof(rep), NULL, 0);
    }
    if (!rc)
        teardown(&r);
    return rc ? 1 : 0;
}

/* ---------------------------------------------------------------- parent */

struct count_result {
    int n, complete;
    struct rank_report *rep; /* n of them */
    int gpu_ok;              /* rank 0 read the GPU's free memory before and after GIN setup */
    double gpu_mib;          /* GIN's GPU memory a rank: (before - after) / N, in MiB */
};

struct bench {
    const char *plugin;
    size_t bytes;
    double step_budget, total_deadline;
    int verbose, rails, gdaki, depth;
    char stop[2 * MSG_MAX]; /* why the bench stopped, "" when it did not */
};

static void kill_all(pid_t *pids, int n)
{
    for (int i = 0; i < n; i++)
        if (pids[i] > 0)
            kill(pids[i], SIGKILL);
    for (int i = 0; i < n; i++)
        if (pids[i] > 0)
            waitpid(pids[i], NULL, 0), pids[i] = 0;
}

static void describe_exit(int st, char *out, size_t len)
{
    if (WIFSIGNALED(st))
        snprintf(out, len, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(out, len, "exited with status %d", WEXITSTATUS(st));
}

/* Collects one 'S' message from every rank within the step's budget: 0, or
 * -1 with b->stop set. Payloads go to pay[i] (cap bytes each). */
static int collect(struct bench *b, int n, int step, int *fds, pid_t *pids, uint8_t *pay, uint32_t cap)
{
    char *got = calloc((size_t)n, 1);
    struct pollfd *pf = calloc((size_t)n, sizeof(*pf));
    char *buf = malloc(cap > MSG_MAX ? cap : MSG_MAX);
    int have = 0, rc = -1;
    double t0 = now_s(), deadline = t0 + b->step_budget + 10; /* ranks give up at the budget themselves */
    if (b->total_deadline > 0 && b->total_deadline < deadline)
        deadline = b->total_deadline;
    if (!got || !pf || !buf) {
        snprintf(b->stop, sizeof(b->stop), "N=%d, step %s: the parent ran out of memory", n, step_name[step]);
        goto out;
    }
    while (have < n) {
        double left = deadline - now_s();
        if (left <= 0) {
            int first = 0;
            while (first < n && got[first])
                first++;
            snprintf(b->stop, sizeof(b->stop),
                     "N=%d, step %s: %d of %d ranks done after %.0f s (%s budget %.0f s; rank %d not done)", n,
                     step_name[step], have, n, now_s() - t0,
                     b->total_deadline > 0 && deadline == b->total_deadline ? "total" : "step",
                     b->total_deadline > 0 && deadline == b->total_deadline ? b->total_deadline : b->step_budget,
                     first);
            goto out;
        }
        for (int i = 0; i < n; i++)
            pf[i] = (struct pollfd){ .fd = got[i] ? -1 : fds[i], .events = POLLIN };
        int k = poll(pf, (nfds_t)n, (int)(left * 1000 > 1000 ? 1000 : left * 1000 + 1));
        if (k < 0 && errno != EINTR) {
            snprintf(b->stop, sizeof(b->stop), "N=%d, step %s: poll failed: %s", n, step_name[step], strerror(errno));
            goto out;
        }
        for (int i = 0; i < n && k > 0; i++) {
            if (got[i] || !pf[i].revents)
                continue;
            char type;
            uint32_t len;
            if (msg_recv(fds[i], &type, buf, cap > MSG_MAX ? cap : MSG_MAX, &len)) {
                int st = 0;
                char how[64] = "closed its socket";
                if (waitpid(pids[i], &st, 0) == pids[i]) {
                    describe_exit(st, how, sizeof(how));
                    pids[i] = 0;
                }
                snprintf(b->stop, sizeof(b->stop), "N=%d, step %s: rank %d %s", n, step_name[step], i, how);
                goto out;
            }
            if (type == 'F') {
                buf[len < MSG_MAX ? len : MSG_MAX - 1] = 0;
                snprintf(b->stop, sizeof(b->stop), "N=%d, step %s: rank %d: %s", n, step_name[step], i, buf);
                goto out;
            }
            if (type != 'S' || len > cap) {
                snprintf(b->stop, sizeof(b->stop), "N=%d, step %s: rank %d sent a bad message", n, step_name[step], i);
                goto out;
            }
            if (cap)
                memcpy(pay + (size_t)i * cap, buf, len);
            got[i] = 1, have++;
        }
    }
    rc = 0;
out:
    free(got), free(pf), free(buf);
    return rc;
}

static int reply_all(struct bench *b, int n, int step, int *fds, const uint8_t *p, uint32_t len, uint32_t stride)
{
    for (int i = 0; i < n; i++)
        if (msg_send(fds[i], 'R', p ? p + (size_t)i * stride : NULL, len)) {
            snprintf(b->stop, sizeof(b->stop), "N=%d, step %s: rank %d went away", n, step_name[step], i);
            return -1;
        }
    return 0;
}

/* Runs one rank count: 0 when every step completed. */
static int run_count(struct bench *b, struct count_result *res)
{
    int n = res->n;
    int *fds = calloc((size_t)n, sizeof(int));
    pid_t *pids = calloc((size_t)n, sizeof(pid_t));
    uint8_t *all = malloc((size_t)n * n * HANDLE), *col = malloc((size_t)n * n * HANDLE);
    res->rep = calloc((size_t)n, sizeof(struct rank_report));
    if (!fds || !pids || !all || !col || !res->rep) {
        snprintf(b->stop, sizeof(b->stop), "N=%d: the parent ran out of memory", n);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    int rc = -1, nf = 0;
    for (int i = 0; i < n; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
            snprintf(b->stop, sizeof(b->stop), "N=%d, starting rank %d: socketpair failed: %s", n, i,
                     strerror(errno));
            goto out;
        }
        pid_t p = fork();
        if (p < 0) {
            snprintf(b->stop, sizeof(b->stop), "N=%d, starting rank %d: fork failed: %s", n, i, strerror(errno));
            close(sv[0]), close(sv[1]);
            goto out;
        }
        if (p == 0) {
            for (int j = 0; j < i; j++)
                close(fds[j]);
            close(sv[0]);
            _exit(rank_main(b->plugin, i, n, b->rails, b->gdaki, b->depth, sv[1], b->bytes, b->step_budget, b->verbose));
        }
        close(sv[1]);
        fds[i] = sv[0], pids[i] = p, nf++;
    }
    /* p2p listen: rank s's handle for peer d goes to d (a transpose) */
    if (collect(b, n, STEP_P2P_LISTEN, fds, pids, all, (uint32_t)n * HANDLE))
        goto out;
    for (int d = 0; d < n; d++)
        for (int s = 0; s < n; s++)
            memcpy(col + ((size_t)d * n + s) * HANDLE, all + ((size_t)s * n + d) * HANDLE, HANDLE);
    if (reply_all(b, n, STEP_P2P_LISTEN, fds, col, (uint32_t)n * HANDLE, (uint32_t)n * HANDLE))
        goto out;
    for (int step = STEP_P2P_CONNECT; step <= STEP_P2P_DATA; step++)
        if (collect(b, n, step, fds, pids, NULL, 0) || reply_all(b, n, step, fds, NULL, 0, 0))
            goto out;
    /* GIN listen: every handle to every rank (an all-gather) */
    if (collect(b, n, STEP_GIN_LISTEN, fds, pids, all, HANDLE))
        goto out;
    for (int d = 0; d < n; d++)
        memcpy(col + (size_t)d * n * HANDLE, all, (size_t)n * HANDLE);
    if (reply_all(b, n, STEP_GIN_LISTEN, fds, col, (uint32_t)n * HANDLE, (uint32_t)n * HANDLE))
        goto out;
    for (int step = STEP_GIN_CONNECT; step <= STEP_GIN_PUT; step++)
        if (collect(b, n, step, fds, pids, NULL, 0) || reply_all(b, n, step, fds, NULL, 0, 0))
            goto out;
    if (collect(b, n, STEP_METRICS, fds, pids, (uint8_t *)res->rep, sizeof(struct rank_report)))
        goto out;
    res->complete = 1; /* the numbers are in; teardown can still stop the bench */
    /* rank 0's two readings of the shared GPU, taken while every rank waited
     * at a barrier: the drop is all N ranks' GIN setup, so a rank's is 1/N */
    if ((res->gpu_ok = res->rep[0].gpu_free_before >= 0 && res->rep[0].gpu_free_after >= 0))
        res->gpu_mib = (double)(res->rep[0].gpu_free_before - res->rep[0].gpu_free_after) / n / (1024.0 * 1024.0);
    if (reply_all(b, n, STEP_METRICS, fds, NULL, 0, 0))
        goto out;
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        int st;
        pid_t w;
        while ((w = waitpid(pids[i], &st, WNOHANG)) == 0 && now_s() - t0 < b->step_budget)
            usleep(10000);
        if (w == 0) {
            snprintf(b->stop, sizeof(b->stop), "N=%d, step %s: rank %d not gone after %.0f s", n,
                     step_name[STEP_TEARDOWN], i, b->step_budget);
            goto out;
        }
        pids[i] = 0;
        if (!WIFEXITED(st) || WEXITSTATUS(st)) {
            char how[64];
            describe_exit(st, how, sizeof(how));
            snprintf(b->stop, sizeof(b->stop), "N=%d, step %s: rank %d %s", n, step_name[STEP_TEARDOWN], i, how);
            goto out;
        }
    }
    rc = 0;
out:
    kill_all(pids, nf);
    for (int i = 0; i < nf; i++)
        close(fds[i]);
    free(fds), free(pids), free(all), free(col);
    return rc;
}

/* ------------------------------------------------------------- reporting */

enum metric {
    M_P2P_CONN, M_GIN_CONN, M_IDLE_CPU, M_THREADS, M_FDS, M_RSS, M_PINNED, M_QPS, M_CQS, M_MRS,
    M_GIN_FDS, M_GIN_RSS, M_GIN_QPS, M_GIN_CQS, M_GIN_MRS, /* GIN's share: everything up less the p2p mesh */
    M_GIN_GPU, /* GIN's GPU memory a rank: one figure a count (struct count_result), not per rank */
    NMETRICS
};

static const char *const metric_name[NMETRICS] = {
    "p2p connect ms", "GIN connect ms", "idle CPU %", "threads", "fds", "RSS MiB", "pinned MiB", "QPs", "CQs", "MRs",
    "GIN fds", "GIN RSS MiB", "GIN QPs", "GIN CQs", "GIN MRs", "GIN GPU MiB",
};

static double delta(int64_t all, int64_t p2p, double scale)
{
    return all < 0 || p2p < 0 ? -1 : (double)(all - p2p) / scale;
}

/* Metric m of a rank's report (all: everything up; else the p2p mesh
 * alone); < 0: n/a. */
static double metric(const struct rank_report *r, int m, int all)
{
    const struct snap *s = all ? &r->all : &r->p2p;
    switch (m) {
    case M_P2P_CONN: return r->p2p_connect_s * 1e3;
    case M_GIN_CONN: return all ? r->gin_connect_s * 1e3 : -1;
    case M_IDLE_CPU: return all && r->idle_cpu >= 0 ? r->idle_cpu * 100 : -1;
    case M_THREADS: return (double)s->threads;
    case M_FDS: return (double)s->fds;
    case M_RSS: return s->rss_kb < 0 ? -1 : (double)s->rss_kb / 1024;
    case M_PINNED: return s->pinned_kb < 0 ? -1 : (double)s->pinned_kb / 1024;
    case M_QPS: return (double)s->qps;
    case M_CQS: return (double)s->cqs;
    case M_MRS: return (double)s->mrs;
    case M_GIN_FDS: return all ? delta(r->all.fds, r->p2p.fds, 1) : -1;
    case M_GIN_RSS: return all ? delta(r->all.rss_kb, r->p2p.rss_kb, 1024) : -1;
    case M_GIN_QPS: return all ? delta(r->all.qps, r->p2p.qps, 1) : -1;
    case M_GIN_CQS: return all ? delta(r->all.cqs, r->p2p.cqs, 1) : -1;
    case M_GIN_MRS: return all ? delta(r->all.mrs, r->p2p.mrs, 1) : -1;
    }
    return -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median and max of metric m over the ranks of one count; 0 if n/a. */
static int med_max(const struct count_result *c, int m, int all, double *med, double *max)
{
    if (m == M_GIN_GPU) { /* one figure a count: median and max are it */
        *med = *max = c->gpu_mib;
        return all && c->gpu_ok;
    }
    double *v = malloc((size_t)c->n * sizeof(double));
    if (!v)
        return 0;
    for (int i = 0; i < c->n; i++)
        v[i] = metric(&c->rep[i], m, all);
    qsort(v, (size_t)c->n, sizeof(double), cmp_double);
    int ok = v[0] >= 0;
    *med = c->n % 2 ? v[c->n / 2] : (v[c->n / 2 - 1] + v[c->n / 2]) / 2;
    *max = v[c->n - 1];
    free(v);
    return ok;
}

static void print_header(void)
{
    printf("%5s", "N");
    for (int m = 0; m < NMETRICS; m++)
        printf(" %15s", metric_name[m]);
    printf("\n");
}

static void print_row(const struct count_result *c)
{
    printf("%5d", c->n);
    for (int m = 0; m < NMETRICS; m++) {
        double med, max;
        char cell[64];
        int prec = m == M_RSS || m == M_GIN_RSS || m == M_GIN_GPU || m == M_PINNED || m <= M_IDLE_CPU ? 1 : 0;
        if (med_max(c, m, 1, &med, &max) && m == M_GIN_GPU)
            snprintf(cell, sizeof(cell), "%.1f", med);
        else if (med_max(c, m, 1, &med, &max))
            snprintf(cell, sizeof(cell), "%.*f/%.*f", prec, med, prec, max);
        else
            snprintf(cell, sizeof(cell), "n/a");
        printf(" %15s", cell);
    }
    printf("\n");
    fflush(stdout);
}

/* Least squares y = a + b*x over k points; 0 with fewer than 2 counts. */
static int fit(const double *x, const double *y, int k, double *a, double *b)
{
    if (k < 2)
        return 0;
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < k; i++)
        sx += x[i], sy += y[i], sxx += x[i] * x[i], sxy += x[i] * y[i];
    double d = k * sxx - sx * sx;
    if (d == 0)
        return 0;
    *b = (k * sxy - sx * sy) / d;
    *a = (sy - *b * sx) / k;
    return 1;
}

static void print_fits(const struct count_result *c, int k)
{
    if (!k) {
        printf("no count completed: nothing to fit\n");
        return;
    }
    printf("fit per rank, least squares over the medians of N =");
    for (int i = 0; i < k; i++)
        printf(" %d", c[i].n);
    printf(":\n");
    for (int m = 0; m < NMETRICS; m++) {
        printf("  %-15s", metric_name[m]);
        for (int all = 1; all >= 0; all--) {
            double x[MAX_COUNTS], y[MAX_COUNTS], a, bb, med, max;
            int j = 0, na = 0;
            for (int i = 0; i < k; i++) {
                if (!med_max(&c[i], m, all, &med, &max)) {
                    na = 1;
                    break;
                }
                x[j] = c[i].n, y[j++] = med;
            }
            const char *what = all ? "" : "   p2p alone: ";
            if (!all && (m == M_GIN_CONN || m == M_IDLE_CPU || m >= M_GIN_FDS))
                continue;
            if (na)
                printf("%sn/a", what);
            else if (!fit(x, y, j, &a, &bb))
                printf("%s(too few counts)", what);
            else
                printf("%s%10.3f + %8.3f * N", what, a, bb);
        }
        printf("\n");
    }
}

static int parse_ranks(char *s, int *out, int *k)
{
    long long x;
    *k = 0;
    for (char *t = strtok(s, ", "); t; t = strtok(NULL, ", ")) {
        if (*k == MAX_COUNTS || parse_int(t, 2, MAX_RANKS, &x))
            return -1;
        out[(*k)++] = (int)x;
    }
    return *k ? 0 : -1;
}

int main(int argc, char **argv)
{
    static struct bench b;
    static char ranks_default[] = "2,4,8,16,32,64";
    char *ranks = ranks_default, path[4096];
    int counts[MAX_COUNTS], k;
    double total = 0;
    b.bytes = 65536, b.step_budget = 120, b.rails = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long x;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return 0;
        } else if (!strcmp(a, "--verbose")) {
            b.verbose = 1;
            continue;
        } else if (!v) {
            fprintf(stderr, "scale_bench: %s: unknown option or missing value (see --help)\n", a);
            return 2;
        } else if (!strcmp(a, "--ranks")) {
            ranks = argv[++i];
        } else if (!strcmp(a, "--rails")) {
            if (parse_int(v, 1, MAX_RANKS, &x)) {
                fprintf(stderr, "scale_bench: bad value '%s' for --rails: ranks a node, 1 to %d\n", v, MAX_RANKS);
                return 2;
            }
            b.rails = (int)x, i++;
        } else if (!strcmp(a, "--gin")) {
            if (strcmp(v, "proxy") && strcmp(v, "gdaki")) {
                fprintf(stderr, "scale_bench: bad value '%s' for --gin: proxy or gdaki\n", v);
                return 2;
            }
            b.gdaki = !strcmp(v, "gdaki"), i++;
        } else if (!strcmp(a, "--queue-depth")) {
            if (parse_int(v, 1, 65536, &x)) {
                fprintf(stderr, "scale_bench: bad value '%s' for --queue-depth: 1 to 65536\n", v);
                return 2;
            }
            b.depth = (int)x, i++;
        } else if (!strcmp(a, "--plugin")) {
            b.plugin = argv[++i];
        } else if (!strcmp(a, "--step-timeout") || !strcmp(a, "--total-timeout")) {
            int step = a[2] == 's';
            if (parse_real(v, step ? 1 : 0, step ? &b.step_budget : &total) ||
                (step ? b.step_budget : total) > 86400) {
                fprintf(stderr, "scale_bench: bad value '%s' for %s: seconds, %s to 86400\n", v, a, step ? "1" : "0");
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--bytes")) {
            if (parse_size(v, 8, 1 << 24, &x)) {
                fprintf(stderr, "scale_bench: bad value '%s' for --bytes: 8 to 16 MiB\n", v);
                return 2;
            }
            b.bytes = (size_t)x, i++;
        } else {
            fprintf(stderr, "scale_bench: unknown option '%s' (see --help)\n", a);
            return 2;
        }
    }
    if (b.depth && !b.gdaki) {
        fprintf(stderr, "scale_bench: --queue-depth goes with --gin gdaki (it sizes the GDAKI type's send rings)\n");
        return 2;
    }
    if (parse_ranks(ranks, counts, &k)) {
        fprintf(stderr, "scale_bench: bad --ranks list: up to %d integers in [2, %d], comma- or space-separated\n",
                MAX_COUNTS, MAX_RANKS);
        return 2;
    }
    for (int i = 0; i < k; i++)
        if (counts[i] % b.rails) {
            fprintf(stderr, "scale_bench: N=%d is not a whole number of nodes of --rails %d ranks\n", counts[i],
                    b.rails);
            return 2;
        }
    if (!b.plugin) {
        const char *top = getenv("top_builddir") ? getenv("top_builddir") : ".";
        snprintf(path, sizeof(path), "%s/.libs/libnccl-net-railnet.so", top);
        b.plugin = path;
    }
    /* the plugin must load here before any rank is forked: a wrong path is
     * a usage error, not a stop at N=2 */
    {
        struct plugin_tables lib;
        char err[PATH_MAX + 256];
        if (plugin_tables_open(&lib, b.plugin, err, sizeof(err)) ||
            !plugin_tables_get(&lib, &plugin_table_net_v8, PLUGIN_TABLES_NAME, err, sizeof(err)) ||
            !plugin_tables_get(&lib, b.depth ? &plugin_table_gin_v12 : &plugin_table_gin_v11, PLUGIN_TABLES_NAME,
                               err, sizeof(err))) {
            fprintf(stderr, "scale_bench: %s\n", err);
            return 2;
        }
        plugin_tables_close(&lib);
    }
    setenv("RAILNET_GIN", b.gdaki ? "gdaki" : "proxy", 1);
    if (b.gdaki) /* CPU-only unless the caller asks for GPU queues or host queues mapped for a GPU */
        setenv("RAILNET_GDAKI_QUEUE_MEM", "host-devx", 0);
    signal(SIGPIPE, SIG_IGN);
    double start = now_s();
    if (total > 0)
        b.total_deadline = start + total;
    static struct count_result res[MAX_COUNTS];
    int done = 0;
    printf("scale_bench: %s, %zu-byte messages, step budget %.0f s; per rank, median/max over ranks\n", b.plugin,
           b.bytes, b.step_budget);
    char type[160];
    if (b.gdaki)
        snprintf(type, sizeof(type), "GDAKI type, queues in %s memory (connect, createContext, window; no put)",
                 getenv("RAILNET_GDAKI_QUEUE_MEM"));
    else
        snprintf(type, sizeof(type), "proxy type (connect, createContext, window, put with signal)");
    char table[64] = "";
    if (b.depth)
        snprintf(table, sizeof(table), ", GIN v12 with queue depth %d", b.depth);
    if (b.rails == 1)
        printf("GIN: %s%s, FULL (every rank's handle to connect)\n", type, table);
    else
        printf("GIN: %s%s, RAIL, %d ranks a node (connect gets the N/%d handles of the rank's rail)\n", type, table,
               b.rails, b.rails);
    print_header();
    for (int i = 0; i < k; i++) {
        res[done].n = counts[i];
        double t0 = now_s();
        int rc = run_count(&b, &res[done]);
        if (res[done].complete) {
            print_row(&res[done++]);
        } else {
            free(res[done].rep);
            res[done].rep = NULL;
        }
        if (rc) {
            printf("stopped at N=%d after %.1f s: %s\n", counts[i], now_s() - t0, b.stop);
            break;
        }
    }
    print_fits(res, done);
    printf("total %.1f s\n", now_s() - start);
    for (int i = 0; i < done; i++)
        free(res[i].rep);
    return b.stop[0] ? 1 : 0;
}
