/* tests/plugin/test_net_versions.c: what the net tables v9 ... v12 add to
 * v8, through the built plugin's exported tables (loaded by path as NCCL
 * loads them) on softnic, with softnic's counters read in the same process:
 *  - size_t sizes: one message of more than 2 GiB arrives whole, in more
 *    chunks than the connection has QPs (v9; 2.7 GiB of host memory
 *    touched, most of the case's time here); sizes beyond
 *    maxP2pBytes are refused with a WARN and leave the comm usable;
 *  - the properties v9+ report (vProps, maxP2pBytes, ...; v12's railId and
 *    planeId from RAILNET_HCA's device:port:rail:plane, as GIN v14 reports
 *    them, for devices, merged ports and virtual devices);
 *  - NCCL's traffic class reaches the QPs' GRH (softnic's per-class byte
 *    counters): v12's init context for both sides of the comms made
 *    through it, v10's connect config for the sender's, RAILNET_IB_TC
 *    over both;
 *  - makeVDevice: over one device, over the two ports of one NIC kept apart
 *    (the merged device, traffic on both ports), refused over two NICs and
 *    for bad arguments (a WARN, ncclInvalidUsage, the device count as it
 *    was; GIN's count never changes);
 *  - the profiler callback (v10+): one event per chunk written and per
 *    receive buffer, in NCCL's IB layout, balanced, at most 8 a request;
 *    none without a callback or phandle;
 *  - v11/v12 contexts: a context not made by init is refused.
 * Waits are bounded (a hang fails a case) but never decide a result. */
#include "../tap.h"
#include "built_plugin.h"
#include "nccl_gin_v11.h"
#include "nccl_gin_v14.h"
#include "nccl_net_v12.h"
#include "tests/build_paths.h"
#include "tools/common/plugin_tables.h"

#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define WAIT_S 60
#define GIB (1ull << 30)
#define MAX_P2P (4 * GIB) /* HS_MAX_CHUNKS chunks of HS_CHUNK_MAX (256 MiB) */

static char logbuf[1 << 15];

/* ---- one table of any version, in the calls these cases make ---- */

struct vnet {
    int v;
    const void *t;
    void *ctx;       /* v11/v12 */
    int tc;          /* v10's connect config */
    void *verbs;     /* softnic's libibverbs (its softnic_ctl_*) */
};

/* The entries every version has at v8's place with v8's signature. */
static const ncclNet_v8_t *v8_slots(const struct vnet *n)
{
    return n->t;
}

/* Loads table v, inits it with the WARN-capturing logger (logbuf, emptied
 * first), NCCL's traffic class tc (v10+: config; -1 undefined) and the
 * profiler callback prof. */
static int vnet_load(struct vnet *n, int v, int tc, ncclProfilerCallback_t prof)
{
    static const struct plugin_table_kind *const kinds[] = { &plugin_table_net_v8, &plugin_table_net_v9,
                                                             &plugin_table_net_v10, &plugin_table_net_v11,
                                                             &plugin_table_net_v12 };
    memset(n, 0, sizeof(*n));
    n->v = v;
    n->tc = tc;
    unsetenv("SOFTNIC_SYSFS");
    logbuf[0] = '\0';
    built_capture_warns(logbuf, sizeof(logbuf));
    if (!(n->t = built_plugin_table(kinds[v - 8])))
        return -1;
    ncclNetCommConfig_v12_t config = { .trafficClass = tc };
    ncclResult_t r;
    switch (v) {
    case 8: r = ((const ncclNet_v8_t *)n->t)->init(built_warn_logger); break;
    case 9: r = ((const ncclNet_v9_t *)n->t)->init(built_warn_logger); break;
    case 10: r = ((const ncclNet_v10_t *)n->t)->init(built_warn_logger, prof); break;
    case 11:
        r = ((const ncclNet_v11_t *)n->t)->init(&n->ctx, 11, (ncclNetCommConfig_v11_t *)&config, built_warn_logger,
                                                prof);
        break;
    default: r = ((const ncclNet_v12_t *)n->t)->init(&n->ctx, 12, &config, built_warn_logger, prof); break;
    }
    int ndev = 0;
    if (r != ncclSuccess || v8_slots(n)->devices(&ndev) != ncclSuccess || ndev < 1)
        return -1;
    if (!(n->verbs = dlopen(test_softnic_verbs(), RTLD_NOW | RTLD_NOLOAD)))
        return -1;
    return 0;
}

static ncclResult_t vn_listen(struct vnet *n, void *ctx, int dev, void *h, void **l)
{
    switch (n->v) {
    case 11: return ((const ncclNet_v11_t *)n->t)->listen(ctx, dev, h, l);
    case 12: return ((const ncclNet_v12_t *)n->t)->listen(ctx, dev, h, l);
    default: return v8_slots(n)->listen(dev, h, l);
    }
}

static ncclResult_t vn_connect(struct vnet *n, void *ctx, int dev, void *h, void **s)
{
    ncclNetCommConfig_v10_t config = { .trafficClass = n->tc };
    switch (n->v) {
    case 10: return ((const ncclNet_v10_t *)n->t)->connect(dev, &config, h, s, NULL);
    case 11: return ((const ncclNet_v11_t *)n->t)->connect(ctx, dev, h, s, NULL);
    case 12: return ((const ncclNet_v12_t *)n->t)->connect(ctx, dev, h, s, NULL);
    default: return v8_slots(n)->connect(dev, h, s, NULL);
    }
}

static ncclResult_t vn_isend(struct vnet *n, void *comm, void *data, size_t size, int tag, void *mh, void *ph,
                             void **req)
{
    switch (n->v) {
    case 9: return ((const ncclNet_v9_t *)n->t)->isend(comm, data, size, tag, mh, req);
    case 10: return ((const ncclNet_v10_t *)n->t)->isend(comm, data, size, tag, mh, ph, req);
    case 11: return ((const ncclNet_v11_t *)n->t)->isend(comm, data, size, tag, mh, ph, req);
    default: return ((const ncclNet_v12_t *)n->t)->isend(comm, data, size, tag, mh, ph, req);
    }
}

static ncclResult_t vn_irecv(struct vnet *n, void *comm, int k, void **data, size_t *sizes, int *tags, void **mhs,
                             void **phs, void **req)
{
    switch (n->v) {
    case 9: return ((const ncclNet_v9_t *)n->t)->irecv(comm, k, data, sizes, tags, mhs, req);
    case 10: return ((const ncclNet_v10_t *)n->t)->irecv(comm, k, data, sizes, tags, mhs, phs, req);
    case 11: return ((const ncclNet_v11_t *)n->t)->irecv(comm, k, data, sizes, tags, mhs, phs, req);
    default: return ((const ncclNet_v12_t *)n->t)->irecv(comm, k, data, sizes, tags, mhs, phs, req);
    }
}

/* A send and a receive comm of this process on device dev (through ctx
 * for v11/v12), each with a page-aligned host buffer of bytes registered. */
struct vpair {
    void *lc, *sc, *rc;
    char *sbuf, *rbuf;
    void *smh, *rmh;
    size_t bytes;
};

/* The comms only (the caller sets the buffers up: vpair_register). */
static int vpair_connect(struct vnet *n, void *ctx, int dev, struct vpair *p)
{
    const ncclNet_v8_t *s = v8_slots(n);
    uint8_t handle[NCCL_NET_HANDLE_MAXSIZE];
    memset(p, 0, sizeof(*p));
    if (vn_listen(n, ctx, dev, handle, &p->lc) != ncclSuccess)
        return -1;
    double end = built_now_s() + 30;
    while ((!p->sc || !p->rc) && built_now_s() < end) {
        if (!p->sc && vn_connect(n, ctx, dev, handle, &p->sc) != ncclSuccess)
            return -1;
        if (!p->rc && s->accept(p->lc, &p->rc, NULL) != ncclSuccess)
            return -1;
    }
    return p->sc && p->rc ? 0 : -1;
}

static int vpair_register(struct vnet *n, struct vpair *p, size_t bytes)
{
    const ncclNet_v8_t *s = v8_slots(n);
    p->bytes = bytes;
    if (s->regMr(p->sc, p->sbuf, bytes, NCCL_PTR_HOST, &p->smh) != ncclSuccess ||
        s->regMr(p->rc, p->rbuf, bytes, NCCL_PTR_HOST, &p->rmh) != ncclSuccess)
        return -1;
    return 0;
}

static int vpair_open(struct vnet *n, void *ctx, int dev, struct vpair *p, size_t bytes)
{
    if (vpair_connect(n, ctx, dev, p))
        return -1;
    if (posix_memalign((void **)&p->sbuf, 4096, bytes) || posix_memalign((void **)&p->rbuf, 4096, bytes))
        return -1;
    return vpair_register(n, p, bytes);
}

/* Deregisters and closes; the buffers are the caller's. */
static void vpair_release(struct vnet *n, struct vpair *p)
{
    const ncclNet_v8_t *s = v8_slots(n);
    if (p->smh)
        s->deregMr(p->sc, p->smh);
    if (p->rmh)
        s->deregMr(p->rc, p->rmh);
    s->closeSend(p->sc);
    s->closeRecv(p->rc);
    s->closeListen(p->lc);
}

static void vpair_close(struct vnet *n, struct vpair *p)
{
    vpair_release(n, p);
    free(p->sbuf);
    free(p->rbuf);
    memset(p, 0, sizeof(*p));
}

/* One message of size bytes from sbuf into a receive of posted bytes at
 * rbuf (nrecv buffers of posted bytes each, the message matching the
 * first), profiler handles sph for the send and rph for the receive (or
 * NULL); both requests tested done. The
 * sizes test reported in *sgot / *rgot. 0, a plugin error, or -2 for no
 * progress within WAIT_S. */
static int vxfer(struct vnet *n, struct vpair *p, size_t posted, size_t size, void *sph, void *rph, int *sgot,
                 int *rgot)
{
    const ncclNet_v8_t *s = v8_slots(n);
    void *rr = NULL, *sr = NULL, *rdata = p->rbuf, *phs[1] = { rph };
    int tag = 5, sdone = 0, rdone = 0;
    double end = built_now_s() + WAIT_S;
    ncclResult_t r;
    while (!rr && built_now_s() < end)
        if ((r = vn_irecv(n, p->rc, 1, &rdata, &posted, &tag, &p->rmh, rph ? phs : NULL, &rr)) != ncclSuccess)
            return r;
    while (!sr && built_now_s() < end) {
        if ((r = vn_isend(n, p->sc, p->sbuf, size, tag, p->smh, sph, &sr)) != ncclSuccess)
            return r;
        if (!sr)
            sched_yield();
    }
    while ((!sdone || !rdone) && built_now_s() < end) {
        if (!sdone && (r = s->test(sr, &sdone, sgot)) != ncclSuccess)
            return r;
        if (!rdone && (r = s->test(rr, &rdone, rgot)) != ncclSuccess)
            return r;
        if (!sdone || !rdone)
            sched_yield();
        else
            tap_progress();
    }
    return sdone && rdone ? 0 : -2;
}

/* ---- softnic's counters ---- */

static uint64_t tc_bytes(struct vnet *n, uint8_t tc)
{
    static void *ctx;
    int (*fn)(void *, uint8_t, uint8_t, uint64_t *) = NULL;
    *(void **)&fn = dlsym(n->verbs, "softnic_ctl_port_tc_bytes");
    if (!ctx)
        ctx = built_open_first_device(n->verbs);
    uint64_t sum = 0, b;
    for (uint8_t port = 1; fn && ctx && port <= 2; port++)
        if (fn(ctx, port, tc, &b) == 0)
            sum += b;
    return sum;
}

struct ctl_counters {
    uint64_t tx_bytes, tx_packets, rx_bytes, rx_packets, errors, retries, rnr_naks;
};

static uint64_t port_tx(struct vnet *n, uint8_t port)
{
    static void *ctx;
    int (*fn)(void *, uint8_t, struct ctl_counters *) = NULL;
    *(void **)&fn = dlsym(n->verbs, "softnic_ctl_port_counters");
    if (!ctx)
        ctx = built_open_first_device(n->verbs);
    struct ctl_counters c;
    memset(&c, 0, sizeof(c));
    if (fn && ctx)
        fn(ctx, port, &c);
    return c.tx_bytes;
}

static void env_one_port(void)
{
    setenv("RAILNET_HCA", "=softnic0:1", 1);
    setenv("RAILNET_MERGE_PORTS", "0", 1);
    setenv("RAILNET_QPS_PER_CONN", "1", 1);
}

/* ---- size_t sizes ---- */

/* A pattern of 64-bit words that differs by position and run. */
static void fill(char *buf, size_t len, uint64_t seed)
{
    uint64_t *w = (uint64_t *)buf;
    for (size_t i = 0; i < len / 8; i++)
        w[i] = (i * 0x9e3779b97f4a7c15ull) ^ seed;
    for (size_t i = len / 8 * 8; i < len; i++)
        buf[i] = (char)(i ^ seed);
}

/* len bytes of memory, NULL on failure: anonymous pages (rep 0), or one
 * memory file of rep bytes (a page multiple) mapped again and again, so
 * that its content repeats every rep bytes and only rep bytes of memory
 * are touched (first touches are what cost most here). */
static char *big_buffer(size_t len, size_t rep)
{
    size_t maps = rep ? (len + rep - 1) / rep : 1, span = rep ? maps * rep : len;
    char *base = mmap(NULL, span, rep ? PROT_NONE : PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return NULL;
    if (!rep)
        return base;
    int fd = memfd_create("railnet-test", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)rep)) {
        munmap(base, span);
        return NULL;
    }
    for (size_t i = 0; i < maps; i++)
        if (mmap(base + i * rep, rep, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
            close(fd);
            munmap(base, span);
            return NULL;
        }
    close(fd);
    return base;
}

static void touch(char *buf, size_t len, int byte)
{
    for (size_t at = 0; at < len; at += 256 << 20) {
        memset(buf + at, byte, len - at < (256u << 20) ? len - at : 256u << 20);
        tap_progress();
    }
}

/* A message of 2.5 GiB and some into a receive a page larger: more than
 * 2^31 bytes in one isend, in 10 chunks of at most 256 MiB over the merged
 * device's 2 QPs (one per port), its size in the chunks' immediates. The
 * sender's bytes repeat every 192 MiB + 4 KiB: no chunk boundary falls on a
 * repeat, so a chunk placed at another chunk's offset shows. */
TAP_CASE(test_v9_a_message_over_2_gib_arrives_whole)
{
    const size_t size = 5 * GIB / 2 + 12345, posted = (size + 4095) / 4096 * 4096 + 4096;
    const size_t rep = (192u << 20) + 4096;
    /* softnic answers a write once it is all placed: on a host loaded by
     * other tests a chunk may take longer than its 2 s retry budget */
    setenv("SOFTNIC_RETRY_CAP_MS", "60000", 1);
    struct vnet n;
    if (vnet_load(&n, 9, -1, NULL))
        TAP_SKIP("the plugin or softnic is not available");
    struct vpair p;
    EXPECT_EQ_INT(0, vpair_connect(&n, NULL, 0, &p));
    p.sbuf = big_buffer(posted, rep);
    p.rbuf = big_buffer(posted, 0);
    if (!p.sbuf || !p.rbuf || vpair_register(&n, &p, posted))
        TAP_SKIP("cannot map and register 2 x 2.5 GiB of host memory here");
    double t0 = built_now_s();
    fill(p.sbuf, rep, 0x5eed);
    /* the receive buffer's pages exist before the NIC writes them, as
     * NCCL's registered buffers do */
    touch(p.rbuf, size, 0);
    memset(p.rbuf + size, 0xee, posted - size);
    double t1 = built_now_s();
    int sgot = -1, rgot = -1;
    int res = vxfer(&n, &p, posted, size, NULL, NULL, &sgot, &rgot);
    if (res)
        tap_diag("%s", logbuf);
    EXPECT_EQ_INT(0, res);
    double t2 = built_now_s();
    tap_diag("buffers written in %.1f s; %zu bytes moved in %.2f s (%.2f GB/s)", t1 - t0, size, t2 - t1,
             (double)size / (t2 - t1) / 1e9);
    /* test's sizes are int in every table: at most INT_MAX */
    EXPECT_EQ_INT(INT_MAX, sgot);
    EXPECT_EQ_INT(INT_MAX, rgot);
    EXPECT_TRUE(memcmp(p.sbuf, p.rbuf, size) == 0);
    size_t tail = posted - size, untouched = 0;
    while (untouched < tail && (unsigned char)p.rbuf[size + untouched] == 0xee)
        untouched++;
    EXPECT_EQ_U64(tail, untouched);
    EXPECT_STREQ("", logbuf);
    vpair_release(&n, &p);
    munmap(p.sbuf, (posted + rep - 1) / rep * rep);
    munmap(p.rbuf, posted);
}

TAP_CASE(test_sizes_beyond_max_p2p_bytes_are_refused_and_the_comm_goes_on)
{
    env_one_port();
    struct vnet n;
    if (vnet_load(&n, 12, -1, NULL))
        TAP_SKIP("the plugin or softnic is not available");
    struct vpair p;
    EXPECT_EQ_INT(0, vpair_open(&n, n.ctx, 0, &p, 1 << 20));
    void *req = (void *)&p, *data = p.rbuf;
    size_t big = MAX_P2P + 1;
    int tag = 1;
    EXPECT_EQ_INT(ncclInvalidArgument, vn_isend(&n, p.sc, p.sbuf, big, tag, p.smh, NULL, &req));
    EXPECT_TRUE(req == NULL);
    req = (void *)&p;
    EXPECT_EQ_INT(ncclInvalidArgument, vn_irecv(&n, p.rc, 1, &data, &big, &tag, &p.rmh, NULL, &req));
    EXPECT_TRUE(req == NULL);
    tap_diag("%s", logbuf);
    EXPECT_EQ_INT(1, built_count(logbuf, "isend of 4294967297 bytes; at most 4294967296 (maxP2pBytes)"));
    EXPECT_EQ_INT(1, built_count(logbuf, "irecv buffer 0 of 4294967297 bytes; at most 4294967296 (maxP2pBytes)"));
    int sgot = -1, rgot = -1;
    fill(p.sbuf, 1 << 20, 3);
    EXPECT_EQ_INT(0, vxfer(&n, &p, 1 << 20, 1 << 20, NULL, NULL, &sgot, &rgot));
    EXPECT_EQ_INT(1 << 20, rgot);
    EXPECT_TRUE(memcmp(p.sbuf, p.rbuf, 1 << 20) == 0);
    vpair_close(&n, &p);
}

/* ---- properties ---- */

TAP_CASE(test_v12_properties_of_a_physical_device)
{
    struct vnet n;
    if (vnet_load(&n, 12, -1, NULL))
        TAP_SKIP("the plugin or softnic is not available");
    ncclNetProperties_v12_t p;
    EXPECT_EQ_INT(ncclSuccess, ((const ncclNet_v12_t *)n.t)->getProperties(0, &p));
    /* softnic0's two ports merged: the name NCCL gives their fused device,
     * never "softnic0", under which NCCL's own IB GIN and RMA list one port
     * at one port's speed (NCCL's topology keys NICs by name) */
    EXPECT_STREQ("softnic0+softnic0", p.name);
    EXPECT_EQ_INT(0, p.forceFlush);
    EXPECT_EQ_INT(1, p.vProps.ndevs);
    EXPECT_EQ_INT(0, p.vProps.devs[0]);
    EXPECT_EQ_U64(MAX_P2P, p.maxP2pBytes);
    EXPECT_EQ_U64(MAX_P2P, p.maxCollBytes);
    EXPECT_EQ_INT(1, p.maxMultiRequestSize);
    EXPECT_EQ_INT(NCCL_NET_ID_UNDEF, p.railId);
    EXPECT_EQ_INT(NCCL_NET_ID_UNDEF, p.planeId);
    EXPECT_EQ_INT(8, p.maxRecvs);
    EXPECT_EQ_INT(NCCL_PTR_HOST, p.ptrSupport & NCCL_PTR_HOST);
    EXPECT_EQ_INT(ncclInvalidArgument, ((const ncclNet_v12_t *)n.t)->getProperties(1, &p));
}

/* ---- traffic class ---- */

/* 1 MiB through a pair made through ctx: the bytes each traffic class got
 * on softnic0's ports meanwhile. */
static void tc_run(struct vnet *n, void *ctx, uint64_t *by_tc, const uint8_t *tcs, int ntc)
{
    uint64_t before[8];
    for (int i = 0; i < ntc; i++)
        before[i] = tc_bytes(n, tcs[i]);
    struct vpair p;
    EXPECT_EQ_INT(0, vpair_open(n, ctx, 0, &p, 1 << 20));
    int sgot, rgot;
    EXPECT_EQ_INT(0, vxfer(n, &p, 1 << 20, 1 << 20, NULL, NULL, &sgot, &rgot));
    vpair_close(n, &p);
    for (int i = 0; i < ntc; i++)
        by_tc[i] = tc_bytes(n, tcs[i]) - before[i];
}

TAP_CASE(test_v12_traffic_class_of_the_init_context_reaches_both_sides_qps)
{
    unsetenv("RAILNET_IB_TC");
    env_one_port();
    struct vnet n;
    if (vnet_load(&n, 12, 96, NULL))
        TAP_SKIP("the plugin or softnic is not available");
    const uint8_t tcs[2] = { 96, 0 };
    uint64_t got[2];
    tc_run(&n, n.ctx, got, tcs, 2);
    /* the data (sender's QP) and the clear-to-send (receiver's QP) */
    EXPECT_EQ_U64((1 << 20) + 64, got[0]);
    EXPECT_EQ_U64(0, got[1]);
    /* a context of another communicator without a class: 0 */
    void *other = NULL;
    ncclNetCommConfig_v12_t undef = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };
    EXPECT_EQ_INT(ncclSuccess, ((const ncclNet_v12_t *)n.t)->init(&other, 13, &undef, built_warn_logger, NULL));
    tc_run(&n, other, got, tcs, 2);
    EXPECT_EQ_U64(0, got[0]);
    EXPECT_EQ_U64((1 << 20) + 64, got[1]);
    EXPECT_EQ_INT(ncclSuccess, ((const ncclNet_v12_t *)n.t)->finalize(other));
    EXPECT_EQ_INT(ncclSuccess, ((const ncclNet_v12_t *)n.t)->finalize(n.ctx));
    EXPECT_STREQ("", logbuf);
}

TAP_CASE(test_railnet_ib_tc_wins_over_nccls_traffic_class)
{
    setenv("RAILNET_IB_TC", "32", 1);
    env_one_port();
    struct vnet n;
    if (vnet_load(&n, 12, 96, NULL))
        TAP_SKIP("the plugin or softnic is not available");
    const uint8_t tcs[2] = { 32, 96 };
    uint64_t got[2];
    tc_run(&n, n.ctx, got, tcs, 2);
    EXPECT_EQ_U64((1 << 20) + 64, got[0]);
    EXPECT_EQ_U64(0, got[1]);
}

TAP_CASE(test_v10_connect_config_sets_the_senders_traffic_class)
{
    unsetenv("RAILNET_IB_TC");
    env_one_port();
    struct vnet n;
    if (vnet_load(&n, 10, 64, NULL))
        TAP_SKIP("the plugin or softnic is not available");
    const uint8_t tcs[2] = { 64, 0 };
    uint64_t got[2];
    tc_run(&n, NULL, got, tcs, 2);
    /* v10's listen has no config: the receiver's clear-to-send keeps 0 */
    EXPECT_EQ_U64(1 << 20, got[0]);
    EXPECT_EQ_U64(64, got[1]);
}

TAP_CASE(test_a_traffic_class_out_of_range_is_a_warn_and_the_default)
{
    unsetenv("RAILNET_IB_TC");
    env_one_port();
    struct vnet n;
    if (vnet_load(&n, 12, 300, NULL))
        TAP_SKIP("the plugin or softnic is not available");
    EXPECT_EQ_INT(1, built_count(logbuf, "NCCL's traffic class 300 is not 0..255; using RAILNET_IB_TC or 0"));
    const uint8_t tcs[1] = { 0 };
    uint64_t got[1];
    tc_run(&n, n.ctx, got, tcs, 1);
    EXPECT_EQ_U64((1 << 20) + 64, got[0]);
}

/* ---- virtual devices ---- */

static int ndevices(struct vnet *n)
{
    int d = -1;
    v8_slots(n)->devices(&d);
    return d;
}

static ncclResult_t make_vdev(struct vnet *n, int *d, int k, const int *devs)
{
    ncclNetVDeviceProps_v12_t p;
    memset(&p, 0, sizeof(p));
    p.ndevs = k;
    for (int i = 0; i < k && i < NCCL_NET_MAX_DEVS_PER_NIC_V12; i++)
        p.devs[i] = devs[i];
    return ((const ncclNet_v12_t *)n->t)->makeVDevice(d, &p);
}

TAP_CASE(test_a_virtual_device_over_one_device_is_that_device_again)
{
    struct vnet n;
    if (vnet_load(&n, 12, -1, NULL))
        TAP_SKIP("the plugin or softnic is not available");
    EXPECT_EQ_INT(1, ndevices(&n));
    int d = -1;
    const int devs[1] = { 0 };
    EXPECT_EQ_INT(ncclSuccess, make_vdev(&n, &d, 1, devs));
    EXPECT_EQ_INT(1, d);
    EXPECT_EQ_INT(2, ndevices(&n));
    ncclNetProperties_v12_t p0, p1;
    EXPECT_EQ_INT(ncclSuccess, ((const ncclNet_v12_t *)n.t)->getProperties(0, &p0));
    EXPECT_EQ_INT(ncclSuccess, ((const ncclNet_v12_t *)n.t)->getProperties(1, &p1));
    EXPECT_STREQ(p0.name, p1.name);
    EXPECT_EQ_INT(p0.speed, p1.speed);
    EXPECT_EQ_INT(1, p1.vProps.ndevs);
    EXPECT_EQ_INT(0, p1.vProps.devs[0]);
    struct vpair p;
    EXPECT_EQ_INT(0, vpair_open(&n, n.ctx, 1, &p, 1 << 20));
    fill(p.sbuf, 1 << 20, 7);
    int sgot, rgot;
    EXPECT_EQ_INT(0, vxfer(&n, &p, 1 << 20, 1 << 20, NULL, NULL, &sgot, &rgot));
    EXPECT_TRUE(memcmp(p.sbuf, p.rbuf, 1 << 20) == 0);
    vpair_close(&n, &p);
    EXPECT_STREQ("", logbuf);
}

/* RAILNET_MERGE_PORTS=0: softnic0's two ports are two devices; NCCL's
 * merge of them (what it asks for ports of one PCI function) gives the
 * device railnet would have made, striping a split message over both. */
TAP_CASE(test_a_virtual_device_over_the_ports_of_one_nic_stripes_over_both)
{
    setenv("RAILNET_MERGE_PORTS", "0", 1);
    setenv("SOFTNIC_LINK_RATE", "25G", 1);
    struct vnet n;
    if (vnet_load(&n, 12, -1, NULL))
        TAP_SKIP("the plugin or softnic is not available");
    EXPECT_EQ_INT(2, ndevices(&n));
    int d = -1;
    const int devs[2] = { 0, 1 };
    EXPECT_EQ_INT(ncclSuccess, make_vdev(&n, &d, 2, devs));
    EXPECT_EQ_INT(2, d);
    EXPECT_EQ_INT(3, ndevices(&n));
    ncclNetProperties_v12_t p;
    EXPECT_EQ_INT(ncclSuccess, ((const ncclNet_v12_t *)n.t)->getProperties(2, &p));
    EXPECT_STREQ("softnic0:1+softnic0:2", p.name);
    EXPECT_EQ_INT(400000, p.speed);
    EXPECT_EQ_INT(2, p.vProps.ndevs);
    EXPECT_EQ_INT(0, p.vProps.devs[0]);
    EXPECT_EQ_INT(1, p.vProps.devs[1]);
    EXPECT_EQ_INT(NCCL_NET_ID_UNDEF, p.railId);
    struct vpair vp;
    EXPECT_EQ_INT(0, vpair_open(&n, n.ctx, 2, &vp, 4 << 20));
    uint64_t b1 = port_tx(&n, 1), b2 = port_tx(&n, 2);
    fill(vp.sbuf, 4 << 20, 9);
    int sgot, rgot;
    EXPECT_EQ_INT(0, vxfer(&n, &vp, 4 << 20, 4 << 20, NULL, NULL, &sgot, &rgot));
    EXPECT_TRUE(memcmp(vp.sbuf, vp.rbuf, 4 << 20) == 0);
    uint64_t d1 = port_tx(&n, 1) - b1, d2 = port_tx(&n, 2) - b2;
    tap_diag("port 1: %llu bytes, port 2: %llu bytes", (unsigned long long)d1, (unsigned long long)d2);
    EXPECT_TRUE(d1 >= (2 << 20) && d2 >= (2 << 20));
    vpair_close(&n, &vp);
    EXPECT_STREQ("", logbuf);
    /* GIN's devices are the physical ones */
    const ncclGin_v11_t *gin = built_plugin_table(&plugin_table_gin_v11);
    int gd = -1;
    EXPECT_TRUE(gin != NULL);
    EXPECT_EQ_INT(ncclSuccess, gin->devices(&gd));
    EXPECT_EQ_INT(2, gd);
}

TAP_CASE(test_a_virtual_device_over_two_nics_is_refused)
{
    setenv("SOFTNIC_DEVICES", "softnic0:127.0.0.1;softnic1:127.0.0.2", 1);
    struct vnet n;
    if (vnet_load(&n, 12, -1, NULL))
        TAP_SKIP("the plugin or softnic is not available");
    EXPECT_EQ_INT(2, ndevices(&n));
    int d = -1;
    const int devs[2] = { 0, 1 };
    EXPECT_EQ_INT(ncclInvalidUsage, make_vdev(&n, &d, 2, devs));
    EXPECT_EQ_INT(-1, d);
    EXPECT_EQ_INT(2, ndevices(&n));
    tap_diag("%s", logbuf);
    EXPECT_EQ_INT(1, built_count(logbuf, "makeVDevice: devices 0 (softnic0) and 1 (softnic1) are different NICs"));
    EXPECT_EQ_INT(1, built_count(logbuf, "\n"));
}

TAP_CASE(test_bad_virtual_device_requests_are_refused_with_a_warn)
{
    setenv("RAILNET_MERGE_PORTS", "0", 1);
    struct vnet n;
    if (vnet_load(&n, 12, -1, NULL))
        TAP_SKIP("the plugin or softnic is not available");
    const ncclNet_v12_t *t = n.t;
    int d = -1;
    const int bad_index[1] = { 7 }, negative[1] = { -1 }, twice[2] = { 1, 1 }, nine[9] = { 0 };
    EXPECT_EQ_INT(ncclInvalidUsage, make_vdev(&n, &d, 0, bad_index));
    EXPECT_EQ_INT(ncclInvalidUsage, make_vdev(&n, &d, 9, nine));
    EXPECT_EQ_INT(ncclInvalidUsage, make_vdev(&n, &d, 1, bad_index));
    EXPECT_EQ_INT(ncclInvalidUsage, make_vdev(&n, &d, 1, negative));
    EXPECT_EQ_INT(ncclInvalidUsage, make_vdev(&n, &d, 2, twice));
    EXPECT_EQ_INT(ncclInvalidArgument, t->makeVDevice(&d, NULL));
    ncclNetVDeviceProps_v12_t p = { .ndevs = 1, .devs = { 0 } };
    EXPECT_EQ_INT(ncclInvalidArgument, t->makeVDevice(NULL, &p));
    /* a virtual device is not a part: NCCL names physical ones */
    const int one[1] = { 0 };
    EXPECT_EQ_INT(ncclSuccess, make_vdev(&n, &d, 1, one));
    EXPECT_EQ_INT(2, d);
    const int virt[1] = { 2 };
    EXPECT_EQ_INT(ncclInvalidUsage, make_vdev(&n, &d, 1, virt));
    tap_diag("%s", logbuf);
    EXPECT_EQ_INT(3, ndevices(&n));
    EXPECT_EQ_INT(1, built_count(logbuf, "0 devices asked for; 1..8 can make a virtual device"));
    EXPECT_EQ_INT(1, built_count(logbuf, "9 devices asked for; 1..8 can make a virtual device"));
    EXPECT_EQ_INT(1, built_count(logbuf, "device 7 is not a physical device (0..1)"));
    EXPECT_EQ_INT(1, built_count(logbuf, "device -1 is not a physical device (0..1)"));
    EXPECT_EQ_INT(1, built_count(logbuf, "device 1 named twice"));
    EXPECT_EQ_INT(1, built_count(logbuf, "device 2 is not a physical device (0..1)"));
    EXPECT_EQ_INT(1, built_count(logbuf, "makeVDevice: no device list"));
    EXPECT_EQ_INT(1, built_count(logbuf, "makeVDevice: no place for the index"));
    EXPECT_EQ_INT(8, built_count(logbuf, "\n"));
    /* v11's virtual devices hold 4 at most */
    struct vnet n11;
    EXPECT_EQ_INT(0, vnet_load(&n11, 11, -1, NULL));
    ncclNetVDeviceProps_v11_t p11 = { .ndevs = 5, .devs = { 0, 1, 0, 1 } };
    EXPECT_EQ_INT(ncclInvalidUsage, ((const ncclNet_v11_t *)n11.t)->makeVDevice(&d, &p11));
    EXPECT_EQ_INT(1, built_count(logbuf, "5 devices asked for; 1..4 can make a virtual device"));
    EXPECT_EQ_INT(3, ndevices(&n11));
}

/* ---- rail and plane (RAILNET_HCA's device:port:rail:plane) ---- */

/* v12's railId and planeId of device d, or 99 each when getProperties fails */
static void v12_ids(struct vnet *n, int d, int *rail, int *plane)
{
    ncclNetProperties_v12_t p;
    *rail = *plane = 99;
    if (((const ncclNet_v12_t *)n->t)->getProperties(d, &p) == ncclSuccess)
        *rail = p.railId, *plane = p.planeId;
}

/* The same through ncclGinPlugin_v14 (init'ed and finalized here), the GIN
 * table NCCL 2.30.7 reads first. */
static void gin14_ids(int d, int *rail, int *plane)
{
    const ncclGin_v14_t *g = built_plugin_table(&plugin_table_gin_v14);
    *rail = *plane = 99;
    void *ctx = NULL;
    if (!g || g->init(&ctx, 14, built_warn_logger) != ncclSuccess)
        return;
    ncclNetProperties_v12_t p;
    if (g->getProperties(d, &p) == ncclSuccess)
        *rail = p.railId, *plane = p.planeId;
    g->finalize(ctx);
}

#define EXPECT_IDS(rail, plane, got_rail, got_plane)                                                             \
    do {                                                                                                         \
        EXPECT_EQ_INT((rail), (got_rail));                                                                       \
        EXPECT_EQ_INT((plane), (got_plane));                                                                     \
    } while (0)
/* Device d's ids as net v12 (vnet *n) and GIN v14 report them. */
#define EXPECT_V12_IDS(n, d, rail, plane)                                                                        \
    do {                                                                                                         \
        int got_rail_, got_plane_;                                                                               \
        v12_ids((n), (d), &got_rail_, &got_plane_);                                                              \
        EXPECT_IDS(rail, plane, got_rail_, got_plane_);                                                          \
    } while (0)
#define EXPECT_GIN14_IDS(d, rail, plane)                                                                         \
    do {                                                                                                         \
        int got_rail_, got_plane_;                                                                               \
        gin14_ids((d), &got_rail_, &got_plane_);                                                                 \
        EXPECT_IDS(rail, plane, got_rail_, got_plane_);                                                          \
    } while (0)

TAP_CASE(test_v12_and_gin_v14_report_each_devices_rail_and_plane)
{
    setenv("SOFTNIC_DEVICES", "softnic0:127.0.0.1;softnic1:127.0.0.2", 1);
    setenv("RAILNET_HCA", "softnic0:1:3:1,softnic1:1:4:2", 1);
    struct vnet n;
    if (vnet_load(&n, 12, -1, NULL))
        TAP_SKIP("the plugin or softnic is not available");
    EXPECT_EQ_INT(2, ndevices(&n));
    EXPECT_V12_IDS(&n, 0, 3, 1);
    EXPECT_V12_IDS(&n, 1, 4, 2);
    EXPECT_GIN14_IDS(0, 3, 1);
    EXPECT_GIN14_IDS(1, 4, 2);
    /* NCCL's fusion of one device keeps its ids; of two NICs it is refused
     * (railnet stripes over one NIC's ports only) whatever their rails */
    int d = -1;
    const int one[1] = { 1 };
    EXPECT_EQ_INT(ncclSuccess, make_vdev(&n, &d, 1, one));
    EXPECT_EQ_INT(2, d);
    EXPECT_V12_IDS(&n, 2, 4, 2);
    EXPECT_STREQ("", logbuf);
}

TAP_CASE(test_ports_without_rail_or_plane_report_undefined)
{
    setenv("SOFTNIC_DEVICES", "softnic0:127.0.0.1;softnic1:127.0.0.2", 1);
    setenv("RAILNET_HCA", "softnic0:1:3,softnic1", 1);
    struct vnet n;
    if (vnet_load(&n, 12, -1, NULL))
        TAP_SKIP("the plugin or softnic is not available");
    EXPECT_V12_IDS(&n, 0, 3, NCCL_NET_ID_UNDEF);
    EXPECT_V12_IDS(&n, 1, NCCL_NET_ID_UNDEF, NCCL_NET_ID_UNDEF);
    EXPECT_GIN14_IDS(0, 3, NCCL_NET_ID_UNDEF);
    EXPECT_STREQ("", logbuf);
}

/* softnic0's two ports, merged by railnet (RAILNET_MERGE_PORTS auto) with
 * RAILNET_HCA=hca: the device keeps a rail or plane only where both ports'
 * entries agree; net v12 and GIN v14 report the same. One case a process:
 * the plugin reads RAILNET_HCA once. */
static void expect_merged_ids(const char *hca, int rail, int plane)
{
    setenv("RAILNET_HCA", hca, 1);
    struct vnet n;
    if (vnet_load(&n, 12, -1, NULL))
        TAP_SKIP("the plugin or softnic is not available");
    ncclNetProperties_v12_t p;
    EXPECT_EQ_INT(1, ndevices(&n));
    EXPECT_EQ_INT(ncclSuccess, ((const ncclNet_v12_t *)n.t)->getProperties(0, &p));
    EXPECT_STREQ("softnic0+softnic0", p.name);
    EXPECT_IDS(rail, plane, p.railId, p.planeId);
    EXPECT_GIN14_IDS(0, rail, plane);
    EXPECT_STREQ("", logbuf);
}

TAP_CASE(test_merged_ports_of_one_rail_and_plane_keep_both)
{
    expect_merged_ids("softnic0:1:5:6,softnic0:2:5:6", 5, 6);
}

TAP_CASE(test_an_entry_with_an_empty_port_gives_both_ports_its_ids)
{
    expect_merged_ids("softnic0::5:6", 5, 6);
}

TAP_CASE(test_merged_ports_of_different_rails_have_no_rail)
{
    expect_merged_ids("softnic0:1:5:6,softnic0:2:7:6", NCCL_NET_ID_UNDEF, 6);
}

TAP_CASE(test_merged_ports_of_different_planes_have_no_plane)
{
    expect_merged_ids("softnic0:1:5:6,softnic0:2:5:8", 5, NCCL_NET_ID_UNDEF);
}

TAP_CASE(test_merged_ports_one_without_ids_have_none)
{
    expect_merged_ids("softnic0:1:5:6,softnic0:2", NCCL_NET_ID_UNDEF, NCCL_NET_ID_UNDEF);
}

/* RAILNET_MERGE_PORTS=0: softnic0's ports are two devices of rails 1 and 2;
 * NCCL's makeVDevice over both gives a device of no rail; over ports of one
 * rail it keeps that rail. */
TAP_CASE(test_a_virtual_device_over_different_rails_has_no_rail)
{
    setenv("RAILNET_MERGE_PORTS", "0", 1);
    setenv("RAILNET_HCA", "softnic0:1:1:0,softnic0:2:2:0", 1);
    struct vnet n;
    if (vnet_load(&n, 12, -1, NULL))
        TAP_SKIP("the plugin or softnic is not available");
    EXPECT_EQ_INT(2, ndevices(&n));
    EXPECT_V12_IDS(&n, 0, 1, 0);
    EXPECT_V12_IDS(&n, 1, 2, 0);
    EXPECT_GIN14_IDS(1, 2, 0);
    int d = -1;
    const int both[2] = { 0, 1 };
    EXPECT_EQ_INT(ncclSuccess, make_vdev(&n, &d, 2, both));
    EXPECT_EQ_INT(2, d);
    EXPECT_V12_IDS(&n, 2, NCCL_NET_ID_UNDEF, 0);
    /* GIN's devices stay the physical ones and keep their ids */
    EXPECT_GIN14_IDS(0, 1, 0);
    EXPECT_STREQ("", logbuf);
}

TAP_CASE(test_a_virtual_device_over_one_rail_keeps_it)
{
    setenv("RAILNET_MERGE_PORTS", "0", 1);
    setenv("RAILNET_HCA", "softnic0:1:1:0,softnic0:2:1:3", 1);
    struct vnet n;
    if (vnet_load(&n, 12, -1, NULL))
        TAP_SKIP("the plugin or softnic is not available");
    int d = -1;
    const int both[2] = { 1, 0 };
    EXPECT_EQ_INT(ncclSuccess, make_vdev(&n, &d, 2, both));
    EXPECT_V12_IDS(&n, d, 1, NCCL_NET_ID_UNDEF);
    EXPECT_STREQ("", logbuf);
}

/* A bad entry is refused with a WARN naming it: its port is not taken, the
 * good entries are. */
TAP_CASE(test_a_bad_railnet_hca_entry_is_a_warn_and_its_port_is_not_taken)
{
    setenv("RAILNET_MERGE_PORTS", "0", 1);
    setenv("RAILNET_HCA", "softnic0:1:1:0,softnic0:2:40000", 1);
    struct vnet n;
    if (vnet_load(&n, 12, -1, NULL))
        TAP_SKIP("the plugin or softnic is not available");
    EXPECT_EQ_INT(1, ndevices(&n));
    ncclNetProperties_v12_t p;
    EXPECT_EQ_INT(ncclSuccess, ((const ncclNet_v12_t *)n.t)->getProperties(0, &p));
    EXPECT_STREQ("softnic0", p.name);
    EXPECT_EQ_INT(1, p.port);
    EXPECT_IDS(1, 0, p.railId, p.planeId);
    tap_diag("%s", logbuf);
    EXPECT_EQ_INT(1, built_count(logbuf, "entry \"softnic0:2:40000\" refused: rail \"40000\" is not a decimal number "
                                         "0..32767; it takes no port"));
    EXPECT_EQ_INT(1, built_count(logbuf, "\n"));
}

/* ---- profiler ---- */

#define EV_MAX 64
static struct ev {
    int type;
    void *phandle;
    int64_t id;
    ncclProfilerNetIbDescr_v1_t d;
    void *handle;
} evs[EV_MAX];
static int nev, nstart, nstop;
static char handles[EV_MAX]; /* what each started event's handle points at */

static ncclResult_t counting_profiler(void **eHandle, int type, void *pHandle, int64_t pluginId, void *extData)
{
    if (nev < EV_MAX) {
        struct ev *e = &evs[nev];
        e->type = type;
        e->phandle = pHandle;
        e->id = pluginId;
        if (type == ncclProfilerNetEventStart && extData)
            e->d = *(const ncclProfilerNetIbDescr_v1_t *)extData;
        if (type == ncclProfilerNetEventStart)
            *eHandle = &handles[nev];
        e->handle = *eHandle;
        nev++;
    }
    nstart += type == ncclProfilerNetEventStart;
    nstop += type == ncclProfilerNetEventStop;
    return ncclSuccess;
}

static int ph_send, ph_recv; /* NCCL's phandles, as far as the plugin can tell: opaque pointers */

TAP_CASE(test_profiler_gets_one_event_per_write_and_per_receive_balanced)
{
    env_one_port();
    struct vnet n;
    if (vnet_load(&n, 12, -1, counting_profiler))
        TAP_SKIP("the plugin or softnic is not available");
    struct vpair p;
    EXPECT_EQ_INT(0, vpair_open(&n, n.ctx, 0, &p, 1 << 20));
    size_t posted = 1 << 20, size = 300000;
    int sgot = -1, rgot = -1;
    EXPECT_EQ_INT(0, vxfer(&n, &p, posted, size, &ph_send, &ph_recv, &sgot, &rgot));
    EXPECT_EQ_INT(2, nstart);
    EXPECT_EQ_INT(2, nstop);
    int seen_send = 0, seen_recv = 0;
    for (int i = 0; i < nev; i++) {
        const struct ev *e = &evs[i];
        if (e->type != ncclProfilerNetEventStart) {
            EXPECT_EQ_INT(ncclProfilerNetEventStop, e->type);
            EXPECT_TRUE(e->handle >= (void *)&handles[0] && e->handle < (void *)&handles[EV_MAX]);
            continue;
        }
        EXPECT_EQ_U64(NCCL_PROFILER_NET_TYPE_IB | NCCL_PROFILER_NET_IB_VER, (uint64_t)e->id);
        EXPECT_EQ_INT(ncclProfileQp, e->d.type);
        EXPECT_EQ_INT(0, e->d.qp.device);
        EXPECT_TRUE(e->d.qp.qpNum != 0);
        if (e->phandle == &ph_send) {
            seen_send++;
            EXPECT_EQ_INT(IBV_WR_RDMA_WRITE_WITH_IMM, e->d.qp.opcode);
            EXPECT_EQ_U64(size, e->d.qp.length);
        } else {
            EXPECT_TRUE(e->phandle == &ph_recv);
            seen_recv++;
            EXPECT_EQ_INT(IBV_WR_RDMA_WRITE, e->d.qp.opcode);
            EXPECT_EQ_U64(posted, e->d.qp.length);
        }
    }
    EXPECT_EQ_INT(1, seen_send);
    EXPECT_EQ_INT(1, seen_recv);
    /* each stop names a started event, each once */
    for (int i = 0; i < nev; i++)
        for (int j = i + 1; j < nev; j++)
            if (evs[i].type == ncclProfilerNetEventStop && evs[j].type == ncclProfilerNetEventStop)
                EXPECT_TRUE(evs[i].handle != evs[j].handle);
    vpair_close(&n, &p);
}

/* On both ports (two QPs) a split message is two writes: two events whose
 * lengths add up to the message; a grouped receive of 3 buffers is 3. */
TAP_CASE(test_profiler_events_of_a_split_message_and_a_grouped_receive)
{
    struct vnet n;
    if (vnet_load(&n, 10, -1, counting_profiler))
        TAP_SKIP("the plugin or softnic is not available");
    struct vpair p;
    EXPECT_EQ_INT(0, vpair_open(&n, NULL, 0, &p, 4 << 20));
    const ncclNet_v8_t *s = v8_slots(&n);
    void *rr = NULL, *sr = NULL;
    void *rdata[3] = { p.rbuf, p.rbuf + (2 << 20), p.rbuf + (3 << 20) };
    void *rph[3] = { &ph_recv, &ph_recv, &ph_recv }, *mhs[3] = { p.rmh, p.rmh, p.rmh };
    size_t posted[3] = { 2 << 20, 1 << 20, 1 << 20 }, size = 2 << 20;
    int tags[3] = { 1, 2, 3 }, sdone = 0, rdone = 0;
    double end = built_now_s() + WAIT_S;
    while (!rr && built_now_s() < end)
        EXPECT_EQ_INT(ncclSuccess, vn_irecv(&n, p.rc, 3, rdata, posted, tags, mhs, rph, &rr));
    void *sreq[3] = { NULL, NULL, NULL };
    for (int k = 0; k < 3; k++)
        while (!sreq[k] && built_now_s() < end)
            EXPECT_EQ_INT(ncclSuccess, vn_isend(&n, p.sc, p.sbuf, k ? 4096 : size, tags[k], p.smh, &ph_send, &sreq[k]));
    sr = sreq[0];
    int done[3] = { 0, 0, 0 };
    while ((!done[0] || !done[1] || !done[2] || !rdone) && built_now_s() < end) {
        for (int k = 0; k < 3; k++)
            if (!done[k])
                EXPECT_EQ_INT(ncclSuccess, s->test(sreq[k], &done[k], NULL));
        if (!rdone)
            EXPECT_EQ_INT(ncclSuccess, s->test(rr, &rdone, NULL));
    }
    (void)sr;
    (void)sdone;
    EXPECT_TRUE(rdone);
    uint64_t split_len = 0;
    int split_events = 0, recv_events = 0;
    for (int i = 0; i < nev; i++) {
        if (evs[i].type != ncclProfilerNetEventStart)
            continue;
        if (evs[i].phandle == &ph_recv)
            recv_events++;
        else if (evs[i].d.qp.length > 4096)
            split_len += evs[i].d.qp.length, split_events++;
    }
    EXPECT_EQ_INT(3, recv_events);
    EXPECT_EQ_INT(2, split_events);
    EXPECT_EQ_U64(size, split_len);
    EXPECT_EQ_INT(nstart, nstop);
    EXPECT_EQ_INT(3 + 2 + 2, nstart);
    vpair_close(&n, &p);
}

/* A message over 16 QPs is 16 writes, but a request starts at most
 * PROF_EVENTS_PER_REQ (8) events, all stopped: NCCL's example profiler
 * keeps 8 a step and writes past its array beyond. The message still
 * lands whole. */
TAP_CASE(test_profiler_events_of_a_request_stop_at_eight)
{
    setenv("RAILNET_QPS_PER_CONN", "16", 1);
    struct vnet n;
    int loaded = vnet_load(&n, 10, -1, counting_profiler);
    unsetenv("RAILNET_QPS_PER_CONN");
    if (loaded)
        TAP_SKIP("the plugin or softnic is not available");
    nev = nstart = nstop = 0;
    struct vpair p;
    EXPECT_EQ_INT(0, vpair_open(&n, NULL, 0, &p, 4 << 20));
    size_t size = 4 << 20;
    int sgot = -1, rgot = -1;
    fill(p.sbuf, size, 77);
    memset(p.rbuf, 0, size);
    EXPECT_EQ_INT(0, vxfer(&n, &p, size, size, &ph_send, &ph_recv, &sgot, &rgot));
    EXPECT_TRUE(memcmp(p.sbuf, p.rbuf, size) == 0);
    int send_events = 0, recv_events = 0;
    uint64_t qps[16];
    int nqps = 0;
    for (int i = 0; i < nev; i++) {
        if (evs[i].type != ncclProfilerNetEventStart)
            continue;
        if (evs[i].phandle == &ph_recv) {
            recv_events++;
            continue;
        }
        send_events++;
        int seen = 0;
        for (int q = 0; q < nqps; q++)
            seen |= qps[q] == (uint64_t)evs[i].d.qp.qpNum;
        if (!seen && nqps < 16)
            qps[nqps++] = (uint64_t)evs[i].d.qp.qpNum;
    }
    EXPECT_EQ_INT(8, send_events);
    EXPECT_EQ_INT(8, nqps); /* the first 8 writes, each on its own QP */
    EXPECT_EQ_INT(1, recv_events);
    EXPECT_EQ_INT(nstart, nstop);
    vpair_close(&n, &p);
}

TAP_CASE(test_no_profiler_or_no_phandle_means_no_event)
{
    env_one_port();
    struct vnet n;
    if (vnet_load(&n, 12, -1, NULL))
        TAP_SKIP("the plugin or softnic is not available");
    struct vpair p;
    EXPECT_EQ_INT(0, vpair_open(&n, n.ctx, 0, &p, 1 << 20));
    int sgot, rgot;
    /* no callback: handles given, nothing to call */
    EXPECT_EQ_INT(0, vxfer(&n, &p, 1 << 20, 1000, &ph_send, &ph_send, &sgot, &rgot));
    EXPECT_EQ_INT(1000, rgot);
    vpair_close(&n, &p);
    /* a callback, no handles (NCCL without a profiler): never called */
    struct vnet m;
    EXPECT_EQ_INT(0, vnet_load(&m, 12, -1, counting_profiler));
    EXPECT_EQ_INT(0, vpair_open(&m, m.ctx, 0, &p, 1 << 20));
    EXPECT_EQ_INT(0, vxfer(&m, &p, 1 << 20, 1000, NULL, NULL, &sgot, &rgot));
    EXPECT_EQ_INT(0, nev);
    vpair_close(&m, &p);
}

/* ---- contexts ---- */

TAP_CASE(test_a_context_not_made_by_init_is_refused)
{
    struct vnet n;
    if (vnet_load(&n, 11, -1, NULL))
        TAP_SKIP("the plugin or softnic is not available");
    const ncclNet_v11_t *t = n.t;
    uint64_t stranger[4] = { 1, 2, 3, 4 };
    uint8_t handle[NCCL_NET_HANDLE_MAXSIZE];
    void *lc = (void *)&n, *sc = (void *)&n;
    EXPECT_EQ_INT(ncclInvalidArgument, t->listen(stranger, 0, handle, &lc));
    EXPECT_TRUE(lc == NULL);
    EXPECT_EQ_INT(ncclInvalidArgument, t->connect(stranger, 0, handle, &sc, NULL));
    EXPECT_TRUE(sc == NULL);
    ncclNetAttr_v11_t attr;
    memset(&attr, 0xff, sizeof(attr));
    EXPECT_EQ_INT(ncclSuccess, t->setNetAttr(n.ctx, &attr));
    EXPECT_EQ_INT(ncclInvalidArgument, t->setNetAttr(stranger, &attr));
    EXPECT_EQ_INT(ncclInvalidArgument, t->finalize(stranger));
    EXPECT_EQ_INT(ncclSuccess, t->finalize(n.ctx));
    tap_diag("%s", logbuf);
    EXPECT_EQ_INT(4, built_count(logbuf, "is not a context of this plugin's init"));
}

int main(int argc, char **argv)
{
    return tap_run(argc, argv);
}
