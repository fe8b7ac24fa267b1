/* tools/writebw/verbs.c: --mode=verbs. One RDMA device, o->qps RC QPs on
 * each port of o->ports, one buffer of the largest size registered once;
 * every write of a size goes to the start of the peer's buffer, as perftest
 * does, so the numbers measure the NIC and the memory path, not the cache
 * footprint of a large buffer. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/bw.h"
#include "../common/cuda_dl.h"
#include "../common/mem.h"
#include "../common/rc.h"
#include "../common/strfmt.h"
#include "ibvwrap.h"
#include "cm.h"
#include "modes.h"
#include "tcp.h"

#include <netinet/in.h>
#include <sys/socket.h>

struct verbs_ctx {
    struct session *s;
    struct ibvwrap v;
    struct rc_dev dev;
    struct rc_qp qp[WB_MAX_QP_TOTAL];
    int nqp;
    struct cuda_dl *cuda;
    struct mem_buf buf;
    struct wb_setup peer, mine;
    struct wb_cm cm;            /* -R */
    uint8_t msg[TCP_MAX_MSG];
};

static int is_writer(const struct session *s)
{
    return !s->is_server || s->o->bidir;
}

static int run_size(void *arg, size_t size, struct wb_result *res, char *err, size_t errlen)
{
    struct verbs_ctx *c = arg;
    const struct wb_opts *o = c->s->o;
    if (!is_writer(c->s))
        return 0;
    struct bw_params p = {
        .size = size,
        .iters = o->iters,
        .duration = o->duration,
        .tx_depth = o->tx_depth,
        .cq_mod = o->tx_depth >= 16 ? 16 : o->tx_depth,
        .stall_timeout = o->timeout,
        .tick = session_tick,
        .tick_arg = c->s,
        .status_str = c->v.wc_status_str,
    };
    struct bw_result r;
    if (bw_run_writes(c->qp, c->nqp, c->buf.ptr, c->buf.mr->lkey, c->peer.addr, c->peer.rkey, &p,
                      &r, err, errlen)) {
        if (c->s->tick_err[0])
            str_fmt(err, errlen, "%s", c->s->tick_err);
        return -1;
    }
    res->size = size;
    res->iters = (uint64_t)r.iters;
    res->seconds = r.seconds;
    res->avg_bps = r.avg_bps;
    res->peak_bps = r.peak_bps;
    res->msg_rate = r.msg_rate;
    return 1;
}

static void describe(struct verbs_ctx *c, struct wb_side *side)
{
    const struct wb_opts *o = c->s->o;
    memset(side, 0, sizeof(*side));
    str_fmt(side->device, sizeof(side->device), "%s", c->dev.name);
    if (o->use_cuda)
        str_fmt(side->memory, sizeof(side->memory), "cuda:%d%s", o->gpu, o->cuda_vmm ? " vmm" : "");
    else
        str_fmt(side->memory, sizeof(side->memory), "host");
    str_fmt(side->registration, sizeof(side->registration), "%s", mem_reg_name(c->buf.path));
    side->relaxed = (uint32_t)c->buf.relaxed;
}

static void fill_header(struct verbs_ctx *c)
{
    const struct wb_opts *o = c->s->o;
    struct out_report *r = c->s->rep;
    describe(c, &r->local);
    r->nports = o->nports;
    for (int i = 0; i < o->nports; i++) {
        const struct rc_port *p = &c->dev.port[o->ports[i]];
        struct out_port *op = &r->port[i];
        op->port = o->ports[i];
        str_fmt(op->link_layer, sizeof(op->link_layer), "%s",
                rc_link_layer_name(p->attr.link_layer));
        op->gid_index = p->gid_index;
        rc_gid_str(p->gid.raw, op->gid, sizeof(op->gid));
        op->mtu = rc_mtu_bytes(p->attr.active_mtu);
        rc_port_rate_str(&p->attr, op->rate, sizeof(op->rate));
    }
    if (c->buf.ro_dropped)
        str_fmt(r->relaxed_note, sizeof(r->relaxed_note),
                "off (requested; %s lacks ibv_reg_mr_iova2: rdma-core < 28)", c->v.path);
    else
        str_fmt(r->relaxed_note, sizeof(r->relaxed_note), "%s", c->buf.relaxed ? "on" : "off");
}

/* The verbs library, the device (-d, or the first) and every port of
 * --ports with its GID, into *v and *d; what opened stays for the caller
 * to close. */
static int open_device(const struct wb_opts *o, struct ibvwrap *v, struct rc_dev *d, char *err, size_t errlen)
{
    if (ibvwrap_open(v, o->ibverbs_lib, err, errlen) || rc_dev_open(d, v, o->dev, o->gid_index, err, errlen))
        return -1;
    for (int i = 0; i < o->nports; i++)
        if (rc_dev_check_port(d, o->ports[i], err, errlen))
            return -1;
    return 0;
}

/* --use_cuda's driver (with VMM for --cuda_vmm) holding the GPU asked for;
 * NULL with err. */
static struct cuda_dl *open_cuda(const struct wb_opts *o, char *err, size_t errlen)
{
    char cerr[256];
    struct cuda_dl *cuda = cuda_dl_open(cerr, sizeof(cerr));
    if (!cuda) {
        str_fmt(err, errlen, "--use_cuda: %s", cerr);
        return NULL;
    }
    if (o->cuda_vmm && cuda_dl_use_vmm(cuda, cerr, sizeof(cerr))) {
        str_fmt(err, errlen, "--cuda_vmm: %s", cerr);
        cuda_dl_close(cuda);
        return NULL;
    }
    int n = cuda_dl_device_count(cuda);
    if (o->gpu >= n) {
        str_fmt(err, errlen, "--use_cuda=%d: only %d CUDA device(s)", o->gpu, n);
        cuda_dl_close(cuda);
        return NULL;
    }
    return cuda;
}

/* Everything local: device, QPs, buffer. */
static int setup_local(struct verbs_ctx *c, char *err, size_t errlen)
{
    const struct wb_opts *o = c->s->o;
    if (open_device(o, &c->v, &c->dev, err, errlen))
        return -1;
    /* QP k goes to port k % nports, so -q 2 --ports 1,2 alternates ports
     * and round-robin writes stripe over both. */
    c->nqp = o->qps * o->nports;
    for (int k = 0; k < c->nqp; k++)
        if (rc_qp_create(&c->dev, o->ports[k % o->nports], o->tx_depth, &c->qp[k], err, errlen))
            return -1;
    size_t max = 0;
    for (int i = 0; i < o->nsizes; i++)
        if (o->sizes[i] > max)
            max = o->sizes[i];
    if (o->use_cuda && !(c->cuda = open_cuda(o, err, errlen)))
        return -1;
    if (mem_alloc_reg(&c->buf, &c->dev, c->cuda, o->gpu, o->use_cuda ? MEM_CUDA : MEM_HOST,
                      o->use_cuda ? o->reg : MEM_REG_PLAIN, o->relaxed, max, err, errlen))
        return -1;
    return mem_fill(&c->buf, 0x5a);
}

int mode_verbs_check(const struct wb_opts *o, char *err, size_t errlen)
{
    struct ibvwrap v;
    struct rc_dev dev;
    memset(&v, 0, sizeof(v));
    memset(&dev, 0, sizeof(dev));
    int rc = open_device(o, &v, &dev, err, errlen);
    if (dev.ctx)
        rc_dev_close(&dev);
    /* the library stays loaded (the run opens it again): a provider may
     * have started threads when the device opened */
    if (rc || !o->use_cuda)
        return rc;
    struct cuda_dl *cuda = open_cuda(o, err, errlen);
    cuda_dl_close(cuda);
    return cuda ? 0 : -1;
}

static int exchange(struct verbs_ctx *c, char *err, size_t errlen)
{
    struct wb_setup *mine = &c->mine;
    uint8_t *buf = c->msg;
    memset(mine, 0, sizeof(*mine));
    describe(c, &mine->side);
    mine->nqp = (uint32_t)c->nqp;
    for (int k = 0; k < c->nqp; k++)
        rc_qp_info(&c->dev, &c->qp[k], &mine->qp[k]);
    mine->addr = (uint64_t)(uintptr_t)c->buf.ptr;
    mine->rkey = c->buf.mr->rkey;
    struct setup_link l = session_setup_link(c->s);
    if (setup_exchange(&l, &wb_setup_codec, mine, &c->peer, buf, TCP_MAX_MSG, err, errlen))
        return -1;
    if ((int)c->peer.nqp != c->nqp) {
        str_fmt(err, errlen, "peer has %u QPs, this side %d", c->peer.nqp, c->nqp);
        session_fail(c->s, err);
        return -1;
    }
    c->s->rep->remote = c->peer.side;
    c->s->rep->have_remote = 1;
    return 0;
}

int mode_verbs_run(struct session *s, char *err, size_t errlen)
{
    struct verbs_ctx *c = calloc(1, sizeof(*c));
    if (!c) {
        str_fmt(err, errlen, "out of memory");
        return -1;
    }
    c->s = s;
    int rc = -1;
    uint8_t b[8];
    uint32_t n;
    if (setup_local(c, err, errlen)) {
        session_fail(s, err);
        goto out;
    }
    if (s->o->rdma_cm) {
        /* the server listens before SETUP goes out: the client connects after it */
        struct sockaddr_in me;
        socklen_t ml = sizeof(me);
        if (wb_cm_open(&c->cm, c->v.path, err, errlen) ||
            (s->is_server && (getsockname(s->fd, (struct sockaddr *)&me, &ml) ||
                              wb_cm_listen(&c->cm, ntohs(me.sin_port), err, errlen)))) {
            session_fail(s, err);
            goto out;
        }
    }
    if (exchange(c, err, errlen))
        goto out;
    int mtu = 0;
    if (s->o->rdma_cm) {
        int m = 0;
        if (wb_cm_connect(&c->cm, s->fd, s->is_server, &c->dev, c->qp, c->nqp, s->o->timeout, &m, err, errlen)) {
            session_fail(s, err);
            goto out;
        }
        mtu = rc_mtu_bytes(m);
    }
    for (int k = 0; !s->o->rdma_cm && k < c->nqp; k++) {
        if (rc_qp_connect(&c->dev, &c->qp[k], &c->peer.qp[k], err, errlen)) {
            session_fail(s, err);
            goto out;
        }
        int local = c->dev.port[c->qp[k].port].attr.active_mtu;
        int m = local < c->peer.qp[k].mtu ? local : c->peer.qp[k].mtu;
        if (!mtu || rc_mtu_bytes(m) < mtu)
            mtu = rc_mtu_bytes(m);
    }
    s->rep->path_mtu = mtu;
    /* READY each way: the peer's QPs are at RTR before anyone writes. */
    if (session_send(s, WB_MSG_READY, NULL, 0, err, errlen) ||
        session_expect(s, WB_MSG_READY, b, sizeof(b), &n, err, errlen))
        goto out;
    fill_header(c);
    out_header(s->rep);
    if (session_sizes(s, run_size, c, err, errlen) || session_done(s, err, errlen))
        goto out;
    rc = 0;
out:
    wb_cm_close(&c->cm);
    if (c->buf.ptr || c->buf.mr)
        mem_free(&c->buf, &c->dev);
    for (int k = 0; k < WB_MAX_QP_TOTAL; k++)
        if (c->qp[k].qp || c->qp[k].cq)
            rc_qp_destroy(&c->dev, &c->qp[k]);
    if (c->dev.ctx)
        rc_dev_close(&c->dev);
    cuda_dl_close(c->cuda);
    /* libibverbs stays mapped until exit: a provider's threads may outlive
     * ibv_close_device (softnic's connection threads do after a peer died),
     * and unmapping their code under them crashes the process. */
    free(c);
    return rc;
}
