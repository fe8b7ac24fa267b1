/* tools/writebw/gpu_initiated.c: --gpu-initiated (see modes.h). The client
 * opens the sending half of a GPU-initiated connection (plugin/gdaki: an
 * mlx5dv QP whose ring a CUDA kernel posts), the server the receiving half
 * (an ordinary QP) with the destination buffer and an 8-byte signal word in
 * GPU memory; they swap their QP descriptions and buffers in SETUP, connect,
 * and for each size the client runs gdaki_bw_write_size(): one kernel posts
 * o->iters RDMA WRITEs from GPU memory, timed on the GPU, then a one-thread
 * put + quiet loop gives the latency column. The server only takes part.
 * Built when configure found nvcc (gpu_initiated_none.c otherwise). */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/cuda_dl.h"
#include "../common/rc.h"
#include "../common/strfmt.h"
#include "modes.h"
#include "railnet_gdaki.h"
#include "tcp.h"

_Static_assert(WB_GI_INLINE == GDAKI_INLINE_MAX && WB_GI_INLINE_DEFAULT == GDAKI_INLINE_DEFAULT,
               "-I's limit and default are the GPU path's");

const int wb_gpu_initiated_built = 1;

/* One thread posts one by one; the contract of gdaki_bw_write_size lets the
 * whole count go to this one thread, so the row's iterations are exact. */
#define GI_THREADS 1
/* Latency rounds per size: as many as -n, at most this. */
#define GI_LAT_ITERS_MAX 1000
/* A posting kernel still running after this long (or --timeout, if longer)
 * lost a doorbell or a completion: the library says where the queue stands. */
#define GI_KERNEL_TIMEOUT_S 60

struct gi_ctx {
    struct session *s;
    struct cuda_dl *cuda;
    struct gdaki_pair *half;
    struct gdaki_qp_info mine_qp;
    struct wb_gi_setup mine, peer;
    void *buf;                 /* client: source; server: destination (GPU) */
    void *sig;                 /* server: the signal word (GPU) */
    size_t len;
    struct gdaki_mr buf_mr, sig_mr;
    uint8_t msg[TCP_MAX_MSG];
};

/* While the kernel runs this thread tells the peer the client is alive
 * (the main thread is inside gdaki_bw_write_size and sends nothing). */
struct gi_beat {
    struct session *s;
    atomic_int stop;
};

static void *beat_main(void *arg)
{
    struct gi_beat *b = arg;
    const struct timespec tenth = { .tv_sec = 0, .tv_nsec = 100 * 1000 * 1000 };
    for (int n = 0; !atomic_load(&b->stop); n++) {
        if (n % 5 == 4 && session_tick(b->s, 0))
            break;
        nanosleep(&tenth, NULL);
    }
    return NULL;
}

static int run_size(void *arg, size_t size, struct wb_result *res, char *err, size_t errlen)
{
    struct gi_ctx *c = arg;
    const struct wb_opts *o = c->s->o;
    if (c->s->is_server)
        return 0;
    struct gdaki_bw_opts bw = {
        .cuda_dev = o->gpu,
        .iters = (int)o->iters,
        .threads = GI_THREADS,
        .blocks = 1,
        .window = o->tx_depth,
        .lat_iters = o->iters < GI_LAT_ITERS_MAX ? (int)o->iters : GI_LAT_ITERS_MAX,
        .timeout_s = o->timeout > GI_KERNEL_TIMEOUT_S ? (int)ceil(o->timeout) : GI_KERNEL_TIMEOUT_S,
        .quiet = 1,
        .inline_max = o->inline_size > 0 ? o->inline_size : 0,
    };
    struct gdaki_bw_result r;
    struct gi_beat beat = { .s = c->s };
    atomic_init(&beat.stop, 0);
    pthread_t t;
    int have_beat = pthread_create(&t, NULL, beat_main, &beat) == 0;
    c->s->tick_err[0] = '\0';
    int rc = gdaki_bw_write_size(c->half, &c->buf_mr, c->peer.addr, c->peer.rkey, c->peer.sig_addr,
                                 c->peer.sig_rkey, size, &bw, &r, err, errlen);
    if (have_beat) {
        atomic_store(&beat.stop, 1);
        pthread_join(t, NULL);
    }
    if (rc < 0)
        return -1;
    if (c->s->tick_err[0]) {
        str_fmt(err, errlen, "%s", c->s->tick_err);
        return -1;
    }
    res->size = size;
    res->iters = (uint64_t)r.msgs;
    res->seconds = r.usec / 1e6;
    res->avg_bps = res->seconds > 0 ? (double)r.msgs * (double)size / res->seconds : 0;
    /* One GPU timing of the whole run: no window to take a peak over. */
    res->peak_bps = res->avg_bps;
    res->msg_rate = r.msg_rate_mps * 1e6;
    res->lat_us = r.lat_us;
    return 1;
}

static void describe(struct gi_ctx *c, struct wb_side *side)
{
    struct gdaki_pair_info info;
    gdaki_pair_get_info(c->half, &info);
    memset(side, 0, sizeof(*side));
    str_fmt(side->device, sizeof(side->device), "%s", info.dev_name);
    str_fmt(side->memory, sizeof(side->memory), "cuda:%d", c->s->o->gpu);
    /* gdaki_pair_reg registers the device pointer with plain ibv_reg_mr:
     * peer memory (nvidia_peermem) on a real NIC. */
    str_fmt(side->registration, sizeof(side->registration), "peermem");
    side->relaxed = 0;
}

static int check_cuda(struct gi_ctx *c, char *err, size_t errlen)
{
    const struct wb_opts *o = c->s->o;
    char cerr[256];
    c->cuda = cuda_dl_open(cerr, sizeof(cerr));
    if (!c->cuda) {
        str_fmt(err, errlen, "--gpu-initiated needs a CUDA GPU: %s", cerr);
        return -1;
    }
    int n = cuda_dl_device_count(c->cuda);
    if (o->gpu >= n) {
        str_fmt(err, errlen, "--gpu-initiated needs CUDA device %d: this host has %d", o->gpu,
                n < 0 ? 0 : n);
        return -1;
    }
    return 0;
}

/* Everything local: CUDA, the half, the buffers. */
static int setup_local(struct gi_ctx *c, char *err, size_t errlen)
{
    const struct wb_opts *o = c->s->o;
    if (check_cuda(c, err, errlen))
        return -1;
    struct gdaki_pair_opts po;
    if (gdaki_pair_opts_default(&po, err, errlen) < 0)
        return -1;
    po.dev_name = o->dev;
    po.port = o->ports[0];
    po.gid_index = o->gid_index;
    if (o->ibverbs_lib)
        po.ibverbs_lib = o->ibverbs_lib;
    /* The ring holds the window and then some; rounded up to a power of two. */
    po.sq_depth = o->tx_depth > 512 ? 2u * (uint32_t)o->tx_depth : 1024;
    po.use_cuda = 1;
    po.cuda_dev = o->gpu;
    enum gdaki_role role = c->s->is_server ? GDAKI_ROLE_RECV : GDAKI_ROLE_SEND;
    char why[1024];
    if (gdaki_half_open(&po, role, &c->half, &c->mine_qp, why, sizeof(why)) < 0) {
        str_fmt(err, errlen, "--gpu-initiated: %s", why);
        return -1;
    }
    for (int i = 0; i < o->nsizes; i++)
        if (o->sizes[i] > c->len)
            c->len = o->sizes[i];
    if (cuda_dl_alloc(c->cuda, o->gpu, c->len, &c->buf, err, errlen) ||
        cuda_dl_memset(c->cuda, c->buf, c->s->is_server ? 0 : 0x5a, c->len)) {
        if (!err[0])
            str_fmt(err, errlen, "GPU %d: cannot fill the buffer", o->gpu);
        return -1;
    }
    if (gdaki_pair_reg(c->half, c->buf, c->len, &c->buf_mr, err, errlen) < 0)
        return -1;
    if (c->s->is_server) {
        if (cuda_dl_alloc(c->cuda, o->gpu, 8, &c->sig, err, errlen))
            return -1;
        if (cuda_dl_memset(c->cuda, c->sig, 0, 8)) {
            str_fmt(err, errlen, "GPU %d: cannot clear the signal word", o->gpu);
            return -1;
        }
        if (gdaki_pair_reg(c->half, c->sig, 8, &c->sig_mr, err, errlen) < 0)
            return -1;
    }
    return 0;
}

static int exchange(struct gi_ctx *c, char *err, size_t errlen)
{
    struct wb_gi_setup *m = &c->mine;
    const struct gdaki_qp_info *q = &c->mine_qp;
    memset(m, 0, sizeof(*m));
    describe(c, &m->side);
    m->magic = q->magic;
    m->qpn = q->qpn;
    m->psn = q->psn;
    m->lid = q->lid;
    m->port = q->port;
    m->mtu = q->mtu;
    m->is_global = q->is_global;
    memcpy(m->gid, q->gid, sizeof(m->gid));
    if (c->s->is_server) {
        m->addr = c->buf_mr.addr;
        m->rkey = c->buf_mr.rkey;
        m->sig_addr = c->sig_mr.addr;
        m->sig_rkey = c->sig_mr.rkey;
    }
    struct setup_link l = session_setup_link(c->s);
    if (setup_exchange(&l, &wb_gi_setup_codec, m, &c->peer, c->msg, TCP_MAX_MSG, err, errlen))
        return -1;
    if (!c->s->is_server && (!c->peer.rkey || !c->peer.sig_rkey)) {
        str_fmt(err, errlen, "protocol error: the server sent no destination buffer");
        session_fail(c->s, err);
        return -1;
    }
    c->s->rep->remote = c->peer.side;
    c->s->rep->have_remote = 1;
    return 0;
}

static int connect_half(struct gi_ctx *c, char *err, size_t errlen)
{
    struct gdaki_qp_info theirs;
    memset(&theirs, 0, sizeof(theirs));
    theirs.magic = c->peer.magic;
    theirs.qpn = c->peer.qpn;
    theirs.psn = c->peer.psn;
    theirs.lid = c->peer.lid;
    theirs.port = c->peer.port;
    theirs.mtu = c->peer.mtu;
    theirs.is_global = c->peer.is_global;
    memcpy(theirs.gid, c->peer.gid, sizeof(theirs.gid));
    char why[1024];
    if (gdaki_half_connect(c->half, &theirs, why, sizeof(why)) < 0) {
        str_fmt(err, errlen, "--gpu-initiated: connecting to the peer's QP %u: %s", theirs.qpn,
                why);
        return -1;
    }
    int mtu = c->mine_qp.mtu < theirs.mtu ? c->mine_qp.mtu : theirs.mtu;
    c->s->rep->path_mtu = rc_mtu_bytes(mtu);
    return 0;
}

static void fill_header(struct gi_ctx *c)
{
    const struct wb_opts *o = c->s->o;
    struct out_report *r = c->s->rep;
    struct gdaki_pair_info info;
    gdaki_pair_get_info(c->half, &info);
    describe(c, &r->local);
    r->nports = 1;
    struct out_port *op = &r->port[0];
    op->port = info.port;
    str_fmt(op->link_layer, sizeof(op->link_layer), "%s", rc_link_layer_name(info.link_layer));
    op->gid_index = info.gid_index;
    rc_gid_str(c->mine_qp.gid, op->gid, sizeof(op->gid));
    op->mtu = rc_mtu_bytes(c->mine_qp.mtu);
    str_fmt(op->rate, sizeof(op->rate), "(rate not queried)");
    str_fmt(r->relaxed_note, sizeof(r->relaxed_note), "off (gdaki registers without it)");
    if (c->s->is_server)
        str_fmt(r->gpu_posting, sizeof(r->gpu_posting),
                "target of the client's kernel: QP %u, signal word at 0x%llx", info.recv_qpn,
                (unsigned long long)c->sig_mr.addr);
    else
        str_fmt(r->gpu_posting, sizeof(r->gpu_posting),
                "%d block x %d thread, window %d, QP %u (%u slots, %s, %s), %s", 1, GI_THREADS,
                o->tx_depth, info.send_qpn, info.sq_slots,
                info.queue_mem == GDAKI_QUEUE_MEM_GPU ? "queue in GPU memory (DEVX)"
                : info.queue_mem == GDAKI_QUEUE_MEM_HOST_DEVX ? "queue in host memory (DEVX)"
                                                              : "queue in host memory",
                info.uar_io_registered ? "UAR as I/O memory" : "UAR as host memory",
                info.atomics ? "device atomics" : "no device atomics");
}

int mode_gpu_initiated_run(struct session *s, char *err, size_t errlen)
{
    struct gi_ctx *c = calloc(1, sizeof(*c));
    if (!c) {
        str_fmt(err, errlen, "out of memory");
        return -1;
    }
    c->s = s;
    int rc = -1;
    uint8_t b[8];
    uint32_t n;
    err[0] = '\0';
    if (setup_local(c, err, errlen)) {
        session_fail(s, err);
        goto out;
    }
    if (exchange(c, err, errlen))
        goto out;
    if (connect_half(c, err, errlen)) {
        session_fail(s, err);
        goto out;
    }
    /* READY each way: the server's QP is at RTR before the kernel writes. */
    if (session_send(s, WB_MSG_READY, NULL, 0, err, errlen) ||
        session_expect(s, WB_MSG_READY, b, sizeof(b), &n, err, errlen))
        goto out;
    fill_header(c);
    out_header(s->rep);
    if (session_sizes(s, run_size, c, err, errlen) || session_done(s, err, errlen))
        goto out;
    rc = 0;
out:
    if (c->half) {
        gdaki_pair_dereg(c->half, &c->buf_mr);
        gdaki_pair_dereg(c->half, &c->sig_mr);
        gdaki_pair_close(c->half);
    }
    if (c->cuda) {
        cuda_dl_free(c->cuda, c->buf);
        cuda_dl_free(c->cuda, c->sig);
        cuda_dl_close(c->cuda);
    }
    free(c);
    return rc;
}
