/* plugin/ib/qp.c: QP creation and the INIT -> RTR -> RTS transitions. */
#include "qp.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "ibvwrap.h"

int qp_mtu_bytes(enum ibv_mtu mtu) { return 256 << ((int)mtu - 1); }

uint32_t qp_random_psn(void)
{
    uint32_t v;
    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        v = (uint32_t)ts.tv_nsec ^ (uint32_t)getpid() * 2654435761u;
    }
    return v & 0xffffff;
}

int qp_create(struct qp_conn *q, const struct qp_port *port, struct ibv_cq *cq,
              const struct qp_params *p, char *err, size_t errlen)
{
    memset(q, 0, sizeof(*q));
    q->port = port;
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof(ia));
    ia.send_cq = cq;
    ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = (uint32_t)p->max_send_wr;
    ia.cap.max_recv_wr = (uint32_t)p->max_recv_wr;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = QP_INLINE_WANT;
    q->qp = RN_IBV(create_qp)(port->pd, &ia);
    if (!q->qp) { /* a provider without inline support: plain work requests */
        ia.cap.max_inline_data = 0;
        q->qp = RN_IBV(create_qp)(port->pd, &ia);
    }
    q->max_inline = q->qp ? ia.cap.max_inline_data : 0;
    if (!q->qp) {
        int e = errno ? errno : ENOMEM;
        snprintf(err, errlen, "ibv_create_qp(send_wr %d, recv_wr %d) on port %u: %s", p->max_send_wr,
                 p->max_recv_wr, port->port_num, strerror(e));
        return e;
    }
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = port->port_num;
    /* REMOTE_READ: the flush QP reads back through its own QP */
    /* remote atomics: GIN signals are fetch-and-adds on these QPs */
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                        IBV_ACCESS_LOCAL_WRITE;
    int rc = RN_IBV(modify_qp)(q->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc) {
        snprintf(err, errlen, "ibv_modify_qp(QP 0x%x -> INIT, port %u): %s", q->qp->qp_num, port->port_num,
                 strerror(rc));
        qp_destroy(q);
        return rc;
    }
    q->psn = qp_random_psn();
    return 0;
}

void qp_describe(const struct qp_conn *q, struct hs_qp_info *out)
{
    memset(out, 0, sizeof(*out));
    out->qpn = q->qp->qp_num;
    out->psn = q->psn;
    out->lid = q->port->lid;
    out->port_num = q->port->port_num;
    out->port_idx = q->port->port_idx;
    out->mtu = (uint8_t)q->port->active_mtu;
    out->gid_index = q->port->gid_index;
    out->is_global = q->port->link_layer == IBV_LINK_LAYER_ETHERNET ? 1 : 0;
    memcpy(out->gid, q->port->gid.raw, 16);
}

int qp_connect(struct qp_conn *q, const struct hs_qp_info *remote, const struct qp_params *p,
               char *err, size_t errlen)
{
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    q->mtu = (enum ibv_mtu)(remote->mtu < (uint8_t)q->port->active_mtu ? remote->mtu : (uint8_t)q->port->active_mtu);
    a.path_mtu = q->mtu;
    a.dest_qp_num = remote->qpn;
    a.rq_psn = remote->psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = q->port->port_num;
    a.ah_attr.sl = (uint8_t)p->sl;
    /* RoCE always routes by GID; IB by LID unless the peer has no LID */
    int global = q->port->link_layer == IBV_LINK_LAYER_ETHERNET || remote->is_global || remote->lid == 0;
    if (global) {
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, remote->gid, 16);
        a.ah_attr.grh.sgid_index = q->port->gid_index;
        a.ah_attr.grh.hop_limit = 255;
        a.ah_attr.grh.traffic_class = (uint8_t)p->tc;
    } else {
        a.ah_attr.dlid = remote->lid;
    }
    int rc = RN_IBV(modify_qp)(q->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc) {
        snprintf(err, errlen, "ibv_modify_qp(QP 0x%x -> RTR, remote QP 0x%x, MTU %d): %s", q->qp->qp_num,
                 remote->qpn, qp_mtu_bytes(q->mtu), strerror(rc));
        return rc;
    }
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = q->psn;
    a.timeout = (uint8_t)p->timeout;
    a.retry_cnt = (uint8_t)p->retry_cnt;
    a.rnr_retry = 7; /* 7 = retry for ever on receiver-not-ready: receives are reposted promptly */
    a.max_rd_atomic = 1;
    rc = RN_IBV(modify_qp)(q->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                          IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc) {
        snprintf(err, errlen, "ibv_modify_qp(QP 0x%x -> RTS): %s", q->qp->qp_num, strerror(rc));
        return rc;
    }
    q->remote_qpn = remote->qpn;
    return 0;
}

void qp_destroy(struct qp_conn *q)
{
    if (!q->qp)
        return;
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_ERR;
    (void)RN_IBV(modify_qp)(q->qp, &a, IBV_QP_STATE);
    (void)RN_IBV(destroy_qp)(q->qp);
    q->qp = NULL;
}
