/* tools/common/rc.c: RC QP setup for the tools (see rc.h). */
#include "config.h"

#include "strfmt.h"
#include "rc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int gid_is_ipv4_mapped(const union ibv_gid *g)
{
    static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
    return !memcmp(g->raw, prefix, sizeof(prefix));
}

static int gid_is_zero(const union ibv_gid *g)
{
    for (int i = 0; i < 16; i++)
        if (g->raw[i])
            return 0;
    return 1;
}

/* RoCE: prefer the first IPv4-mapped GID (the RoCE v2 entry for an IPv4
 * address on rdma-core's default table layout, where v1 and v2 alternate
 * and the v2 one comes second: so the last IPv4-mapped of the first pair). */
static int pick_gid(const struct rc_dev *d, int port, struct rc_port *p)
{
    if (p->attr.link_layer != IBV_LINK_LAYER_ETHERNET) {
        p->gid_index = 0;
        return d->v->query_gid(d->ctx, (uint8_t)port, 0, &p->gid);
    }
    int first = -1;
    union ibv_gid g, first_gid;
    int len = p->attr.gid_tbl_len > 0 ? p->attr.gid_tbl_len : 1;
    for (int i = 0; i < len && i < 256; i++) {
        if (d->v->query_gid(d->ctx, (uint8_t)port, i, &g) || gid_is_zero(&g))
            continue;
        if (gid_is_ipv4_mapped(&g)) {
            if (first >= 0 && !memcmp(first_gid.raw, g.raw, 16)) {
                /* same address twice: v1 then v2 */
                p->gid_index = i;
                p->gid = g;
                return 0;
            }
            if (first < 0) {
                first = i;
                first_gid = g;
            }
        }
    }
    if (first < 0)
        first = 0;
    p->gid_index = first;
    return d->v->query_gid(d->ctx, (uint8_t)port, first, &p->gid);
}

int rc_dev_open(struct rc_dev *d, const struct ibvwrap *v, const char *name, int gid_index,
                char *err, size_t errlen)
{
    memset(d, 0, sizeof(*d));
    d->v = v;
    int n = 0;
    struct ibv_device **list = v->get_device_list(&n);
    if (!list || n == 0) {
        str_fmt(err, errlen, "no RDMA device found by %s%s", v->path,
                 list ? "" : " (ibv_get_device_list failed)");
        if (list)
            v->free_device_list(list);
        return -1;
    }
    struct ibv_device *dev = NULL;
    for (int i = 0; i < n && !dev; i++)
        if (!name || !strcmp(v->get_device_name(list[i]), name))
            dev = list[i];
    if (!dev) {
        str_fmt(err, errlen, "RDMA device %s not found (%d device(s), first %s)", name, n,
                 v->get_device_name(list[0]));
        v->free_device_list(list);
        return -1;
    }
    str_fmt(d->name, sizeof(d->name), "%s", v->get_device_name(dev));
    d->ctx = v->open_device(dev);
    v->free_device_list(list);
    if (!d->ctx) {
        str_fmt(err, errlen, "%s: ibv_open_device failed: %s", d->name, strerror(errno));
        return -1;
    }
    struct ibv_device_attr da;
    if (v->query_device(d->ctx, &da)) {
        str_fmt(err, errlen, "%s: ibv_query_device failed", d->name);
        rc_dev_close(d);
        return -1;
    }
    d->nports = da.phys_port_cnt < RC_MAX_PORTS ? da.phys_port_cnt : RC_MAX_PORTS;
    for (int p = 1; p <= d->nports; p++) {
        struct rc_port *rp = &d->port[p];
        if (ibvwrap_query_port(v, d->ctx, (uint8_t)p, &rp->attr))
            continue;
        if (gid_index >= 0) {
            rp->gid_index = gid_index;
            if (v->query_gid(d->ctx, (uint8_t)p, gid_index, &rp->gid)) {
                rp->no_gid = 1;
                continue;
            }
        } else if (pick_gid(d, p, rp)) {
            rp->gid_index = -1;
            rp->no_gid = 1;
            continue;
        }
        rp->valid = 1;
    }
    d->pd = v->alloc_pd(d->ctx);
    if (!d->pd) {
        str_fmt(err, errlen, "%s: ibv_alloc_pd failed: %s", d->name, strerror(errno));
        rc_dev_close(d);
        return -1;
    }
    return 0;
}

void rc_dev_close(struct rc_dev *d)
{
    if (d->pd)
        d->v->dealloc_pd(d->pd);
    if (d->ctx)
        d->v->close_device(d->ctx);
    d->pd = NULL;
    d->ctx = NULL;
}

int rc_dev_check_port(const struct rc_dev *d, int port, char *err, size_t errlen)
{
    if (port >= 1 && port <= d->nports && d->port[port].no_gid) {
        const struct rc_port *rp = &d->port[port];
        if (rp->gid_index >= 0)
            str_fmt(err, errlen, "%s: port %d has no GID at index %d (its GID table holds %d entries; -x picks one)",
                     d->name, port, rp->gid_index, rp->attr.gid_tbl_len);
        else
            str_fmt(err, errlen, "%s: port %d has no usable GID (-x picks an index)", d->name, port);
        return -1;
    }
    if (port < 1 || port > d->nports || !d->port[port].valid) {
        str_fmt(err, errlen, "%s: port %d does not exist or cannot be queried (%d port(s))",
                 d->name, port, d->nports);
        return -1;
    }
    if (d->port[port].attr.state != IBV_PORT_ACTIVE) {
        str_fmt(err, errlen, "%s: port %d is not ACTIVE (state %d)", d->name, port,
                 (int)d->port[port].attr.state);
        return -1;
    }
    return 0;
}

static uint32_t random_psn(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint32_t)(ts.tv_nsec ^ (uint64_t)ts.tv_sec * 2654435761u ^ (uint64_t)rand()) & 0xffffff;
}

int rc_qp_create(struct rc_dev *d, int port, int depth, struct rc_qp *q, char *err, size_t errlen)
{
    memset(q, 0, sizeof(*q));
    if (rc_dev_check_port(d, port, err, errlen))
        return -1;
    q->port = port;
    q->depth = depth;
    q->cq = d->v->create_cq(d->ctx, depth, NULL, NULL, 0);
    if (!q->cq) {
        str_fmt(err, errlen, "%s: ibv_create_cq(%d) failed: %s", d->name, depth, strerror(errno));
        return -1;
    }
    struct ibv_qp_init_attr ia = {
        .send_cq = q->cq,
        .recv_cq = q->cq,
        .cap = { .max_send_wr = (uint32_t)depth, .max_recv_wr = (uint32_t)depth,
                 .max_send_sge = 1, .max_recv_sge = 1 },
        .qp_type = IBV_QPT_RC,
        .sq_sig_all = 0,
    };
    q->qp = d->v->create_qp(d->pd, &ia);
    if (!q->qp) {
        str_fmt(err, errlen, "%s: ibv_create_qp(RC, depth %d) failed: %s", d->name, depth,
                 strerror(errno));
        rc_qp_destroy(d, q);
        return -1;
    }
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT,
        .pkey_index = 0,
        .port_num = (uint8_t)port,
        .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_LOCAL_WRITE,
    };
    if (d->v->modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                        IBV_QP_ACCESS_FLAGS)) {
        str_fmt(err, errlen, "%s: QP to INIT failed: %s", d->name, strerror(errno));
        rc_qp_destroy(d, q);
        return -1;
    }
    q->psn = random_psn();
    return 0;
}

void rc_qp_info(const struct rc_dev *d, const struct rc_qp *q, struct rc_qp_info *out)
{
    const struct rc_port *p = &d->port[q->port];
    memset(out, 0, sizeof(*out));
    out->qpn = q->qp->qp_num;
    out->psn = q->psn;
    out->lid = p->attr.lid;
    out->port = (uint8_t)q->port;
    out->mtu = (uint8_t)p->attr.active_mtu;
    memcpy(out->gid, p->gid.raw, 16);
}

int rc_qp_connect(struct rc_dev *d, struct rc_qp *q, const struct rc_qp_info *remote, char *err,
                  size_t errlen)
{
    const struct rc_port *p = &d->port[q->port];
    if (remote->qpn == 0 || remote->qpn > 0xffffff || remote->psn > 0xffffff ||
        rc_mtu_bytes(remote->mtu) == 0) {
        str_fmt(err, errlen, "peer QP description invalid (qpn 0x%x, psn 0x%x, mtu %u)",
                 remote->qpn, remote->psn, remote->mtu);
        return -1;
    }
    enum ibv_mtu mtu = p->attr.active_mtu < remote->mtu ? p->attr.active_mtu
                                                         : (enum ibv_mtu)remote->mtu;
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_RTR,
        .path_mtu = mtu,
        .dest_qp_num = remote->qpn,
        .rq_psn = remote->psn,
        .max_dest_rd_atomic = 1,
        .min_rnr_timer = 12,
        .ah_attr = { .port_num = (uint8_t)q->port, .dlid = remote->lid },
    };
    int roce = p->attr.link_layer == IBV_LINK_LAYER_ETHERNET;
    if (roce || remote->lid == 0) {
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, remote->gid, 16);
        a.ah_attr.grh.sgid_index = (uint8_t)p->gid_index;
        a.ah_attr.grh.hop_limit = 64;
    }
    if (d->v->modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                        IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                        IBV_QP_MIN_RNR_TIMER)) {
        str_fmt(err, errlen, "%s: QP 0x%x to RTR (peer QP 0x%x) failed: %s", d->name,
                 q->qp->qp_num, remote->qpn, strerror(errno));
        return -1;
    }
    /* Local ACK timeout 18 (4.096 us * 2^18 = 1.07 s per try, 7 retries):
     * closer to NCCL's default (20) than perftest's 14, whose half-second
     * budget makes a busy shared host (or a software NIC on it) look dead. */
    struct ibv_qp_attr s = {
        .qp_state = IBV_QPS_RTS,
        .timeout = 18,
        .retry_cnt = 7,
        .rnr_retry = 7,
        .sq_psn = q->psn,
        .max_rd_atomic = 1,
    };
    if (d->v->modify_qp(q->qp, &s, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                        IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) {
        str_fmt(err, errlen, "%s: QP 0x%x to RTS failed: %s", d->name, q->qp->qp_num,
                 strerror(errno));
        return -1;
    }
    return 0;
}

void rc_qp_destroy(struct rc_dev *d, struct rc_qp *q)
{
    if (q->qp)
        d->v->destroy_qp(q->qp);
    if (q->cq)
        d->v->destroy_cq(q->cq);
    q->qp = NULL;
    q->cq = NULL;
}

void rc_gid_str(const uint8_t gid[16], char *buf, size_t len)
{
    char tmp[INET6_ADDRSTRLEN];
    if (inet_ntop(AF_INET6, gid, tmp, sizeof(tmp)))
        str_fmt(buf, len, "%s", tmp);
    else
        str_fmt(buf, len, "?");
}

int rc_mtu_bytes(int mtu)
{
    return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128 << mtu : 0;
}

const char *rc_link_layer_name(int ll)
{
    return ll == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : ll == IBV_LINK_LAYER_INFINIBAND ?
           "InfiniBand" : "unspecified";
}

void rc_port_rate_str(const struct ibv_port_attr *a, char *buf, size_t len)
{
    /* IB spec encodings: width 1/2/4/8/16 = 1X/4X/8X/12X/2X lanes; speed
     * 1 SDR 2.5, 2 DDR 5, 4 QDR 10, 8 FDR10 10, 16 FDR 14, 32 EDR 25,
     * 64 HDR 50, 128 NDR 100 Gb/s per lane (XDR is in active_speed_ex). */
    int lanes = a->active_width == 1 ? 1 : a->active_width == 2 ? 4 : a->active_width == 4 ? 8 :
                a->active_width == 8 ? 12 : a->active_width == 16 ? 2 : 0;
    double lane;
    switch ((unsigned)a->active_speed) {
    case 1: lane = 2.5; break;
    case 2: lane = 5; break;
    case 4: case 8: lane = 10; break;
    case 16: lane = 14; break;
    case 32: lane = 25; break;
    case 64: lane = 50; break;
    case 128: lane = 100; break;
    default: lane = 0;
    }
    if (!lanes || lane == 0)
        str_fmt(buf, len, "unknown speed (width %u, speed %u)", a->active_width, a->active_speed);
    else
        str_fmt(buf, len, "%g Gb/s (%dX %g Gb/s)", lanes * lane, lanes, lane);
}
