/* ud.c: UD QPs' sends and receives, as a ConnectX serves them on a RoCE v2
 * port.
 *
 * Send: a SEND (with immediate) to the QP the work request's address
 * handle and remote QPN name, one datagram of at most the port's MTU.  It
 * is unreliable: nothing comes back, so the posting thread puts the
 * datagram on the wire itself (udwire.c) and completes the WQE at once, as
 * a NIC completes a UD send when the packet has left.  What the provider
 * takes but the NIC cannot execute completes in error and moves the QP to
 * ERR, as on a ConnectX: a payload over the MTU (IBV_WC_LOC_LEN_ERR), an
 * lkey that does not cover the gather list (IBV_WC_LOC_PROT_ERR), an RDMA
 * or atomic opcode (IBV_WC_LOC_QP_OP_ERR: mlx5 builds the WQE, the
 * hardware refuses it).
 *
 * Receive: a datagram to a QP that does not exist here, is not UD, is not
 * on the port it arrived on, is not yet in RTR, carries another Q_Key, or
 * finds no receive WQE posted, is dropped without a trace on either side
 * (counted: softnic_ctl_ud_counts).  Otherwise its receive WQE gets the
 * 40-byte GRH -- for RoCE v2 over IPv4, as the kernel and a ConnectX write
 * it, 20 bytes of zeros and the packet's IPv4 header -- then the payload;
 * the completion has byte_len = 40 + payload, IBV_WC_GRH, src_qp, and
 * slid 0, sl 0, pkey_index 0, as a RoCE port reports them.  A receive
 * buffer too small for both completes with IBV_WC_LOC_LEN_ERR (the QP to
 * ERR). */
#include "softnic.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ send */
/* A send completion (error ones always, others when signaled). */
static void ud_send_wc(struct sn_qp *qp, const struct ibv_send_wr *wr, enum ibv_wc_status st)
{
    bool signaled = qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
    if (st == IBV_WC_SUCCESS && !signaled)
        return;
    struct ibv_wc wc;
    memset(&wc, 0, sizeof(wc));
    wc.wr_id = wr->wr_id;
    wc.status = st;
    wc.opcode = IBV_WC_SEND;
    wc.qp_num = qp->ibqp.qp_num;
    if (st != IBV_WC_SUCCESS)
        atomic_fetch_add(&qp->cnt.errors, 1);
    cq_push((struct sn_cq *)qp->ibqp.send_cq, &wc, false);
}

/* Gathers wr's payload into buf (at most cap bytes, the caller checked the
 * total); 0 or IBV_WC_LOC_PROT_ERR's cause. */
static int ud_gather(struct sn_qp *qp, const struct ibv_send_wr *wr, char *buf)
{
    uint32_t off = 0;
    for (int i = 0; i < wr->num_sge; i++) {
        const struct ibv_sge *sg = &wr->sg_list[i];
        if (!sg->length)
            continue;
        if (wr->send_flags & IBV_SEND_INLINE) {
            memcpy(buf + off, (const void *)(uintptr_t)sg->addr, sg->length);
        } else {
            struct sn_mr *mr;
            int err = mr_get(sg->lkey, false, qp->ibqp.pd, 0, sg->addr, sg->length, &mr);
            if (!err) {
                err = mr_read(mr, sg->addr, buf + off, sg->length);
                mr_put(mr);
            }
            if (err)
                return err;
        }
        off += sg->length;
    }
    return 0;
}

/* Executes one WR on a QP in RTS/SQD (qp->lock held): the status of its
 * completion. */
static enum ibv_wc_status ud_execute(struct sn_qp *qp, const struct ibv_send_wr *wr, uint32_t len)
{
    if (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM)
        return IBV_WC_LOC_QP_OP_ERR;
    struct sn_port *port = qp->port;
    if (len > sn_mtu_bytes(port->conf.mtu))
        return IBV_WC_LOC_LEN_ERR;
    char buf[4096];
    if (ud_gather(qp, wr, buf))
        return IBV_WC_LOC_PROT_ERR;
    const struct sn_ah *ah = (const struct sn_ah *)wr->wr.ud.ah;
    static const uint8_t v4_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
    /* a datagram nobody can receive (a GID no IPv4 address maps to, a port
     * that is down) is lost on the way, as on a network: the send still
     * completes */
    if (memcmp(ah->attr.grh.dgid.raw, v4_prefix, sizeof(v4_prefix)) != 0 ||
        atomic_load(&port->state) != IBV_PORT_ACTIVE)
        return IBV_WC_SUCCESS;
    struct sn_ud_hdr h;
    memset(&h, 0, sizeof(h));
    h.magic = SN_UD_MAGIC;
    h.version = SN_UD_VERSION;
    h.op = wr->opcode == IBV_WR_SEND_WITH_IMM ? SN_OP_SEND_IMM : SN_OP_SEND;
    h.flags = (wr->send_flags & IBV_SEND_SOLICITED) ? SN_REQ_SOLICITED : 0;
    h.tclass = ah->attr.grh.traffic_class;
    h.hop_limit = ah->attr.grh.hop_limit;
    h.dst_qpn = wr->wr.ud.remote_qpn & 0xffffff;
    h.src_qpn = qp->ibqp.qp_num;
    /* a Q_Key with its high bit set takes the QP's own (IB spec 10.2.5) */
    h.qkey = (wr->wr.ud.remote_qkey & 0x80000000u) ? qp->attr.qkey : wr->wr.ud.remote_qkey;
    h.imm = wr->opcode == IBV_WR_SEND_WITH_IMM ? wr->imm_data : 0;
    h.len = len;
    struct in_addr dst;
    memcpy(&dst, &ah->attr.grh.dgid.raw[12], 4);
    if (udwire_send(qp->ibqp.qp_num, port->addr, dst, &h, buf, len) == 0) {
        atomic_fetch_add(&sn_ud_cnt.sent, 1);
        atomic_fetch_add(&port->cnt.tx_packets, 1);
        atomic_fetch_add(&port->cnt.tx_bytes, len);
        atomic_fetch_add(&qp->cnt.tx_packets, 1);
        atomic_fetch_add(&qp->cnt.tx_bytes, len);
    }
    /* a datagram the socket could not take (its buffer full) is lost as
     * a NIC's is on a congested link: unreliable service */
    return IBV_WC_SUCCESS;
}

/* Checks what the provider checks at post time; 0 or EINVAL. */
static int ud_check_wr(struct sn_qp *qp, const struct ibv_send_wr *wr, uint32_t *len)
{
    uint64_t total;
    if (sn_send_wr_check(&qp->cap, wr, &total))
        return EINVAL;
    const struct sn_ah *ah = (const struct sn_ah *)wr->wr.ud.ah;
    if (!ah || ah->ibah.context != qp->ibqp.context)
        return EINVAL;
    if ((wr->send_flags & IBV_SEND_INLINE) && total > qp->cap.max_inline_data)
        return EINVAL;
    *len = total > SN_MAX_MSG ? SN_MAX_MSG : (uint32_t)total;
    return 0;
}

int ud_post_send(struct sn_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    int err = 0;
    pthread_mutex_lock(&qp->lock);
    enum ibv_qp_state st = qp->attr.qp_state;
    if (st != IBV_QPS_RTS && st != IBV_QPS_SQD && st != IBV_QPS_ERR)
        err = EINVAL;
    bool posted = false;
    for (; wr && !err; wr = wr->next) {
        uint32_t len = 0;
        if ((err = ud_check_wr(qp, wr, &len)))
            break;
        posted = true;
        if (qp->attr.qp_state == IBV_QPS_ERR) {
            ud_send_wc(qp, wr, IBV_WC_WR_FLUSH_ERR);
            continue;
        }
        enum ibv_wc_status wst = ud_execute(qp, wr, len);
        if (wst == IBV_WC_SUCCESS) {
            ud_send_wc(qp, wr, wst);
        } else {
            /* qp_error_locked completes the culprit with wst: it is the
             * one WQE outstanding (the others completed as they went) */
            struct sn_swqe *w = &qp->sq[qp->sq_tail % qp->sq_size];
            memset(w, 0, sizeof(*w));
            w->wr_id = wr->wr_id;
            w->opcode = wr->opcode;
            w->send_flags = wr->send_flags | IBV_SEND_SIGNALED;
            w->len = len;
            qp->sq_head = qp->sq_sent = qp->sq_tail;
            qp->sq_tail++;
            qp_error_locked(qp, qp->sq_head, wst, 0);
        }
    }
    if (err && bad)
        *bad = wr;
    if (posted)
        atomic_fetch_add(&qp->cnt.post_calls, 1);
    pthread_mutex_unlock(&qp->lock);
    return err;
}

/* --------------------------------------------------------------- receive */
static uint16_t ip_checksum(const uint8_t *p, size_t n)
{
    uint32_t sum = 0;
    for (size_t i = 0; i + 1 < n; i += 2)
        sum += (uint32_t)p[i] << 8 | p[i + 1];
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}

/* The GRH of a RoCE v2 packet over IPv4: the IPv4 header in its last 20
 * bytes (rdma-core's ibv_init_ah_from_wc tells IPv4 from IPv6 by that
 * header's checksum). */
static void ud_grh(uint8_t grh[SN_GRH_BYTES], const struct sn_ud_hdr *h, struct in_addr from,
                   struct in_addr on)
{
    memset(grh, 0, SN_GRH_BYTES);
    uint8_t *ip = grh + 20;
    /* IPv4 + UDP + BTH + DETH [+ immediate] + payload + ICRC */
    uint32_t total = 20 + 8 + 12 + 8 + (h->op == SN_OP_SEND_IMM ? 4 : 0) + h->len + 4;
    ip[0] = 0x45;
    ip[1] = h->tclass;
    ip[2] = (uint8_t)(total >> 8);
    ip[3] = (uint8_t)total;
    ip[6] = 0x40;                  /* don't fragment, as RoCE v2 sends */
    ip[8] = h->hop_limit ? h->hop_limit : 64;
    ip[9] = 17;                    /* UDP */
    memcpy(ip + 12, &from, 4);
    memcpy(ip + 16, &on, 4);
    uint16_t c = ip_checksum(ip, 20);
    ip[10] = (uint8_t)(c >> 8);
    ip[11] = (uint8_t)c;
}

/* Scatters n bytes of src at offset off of the receive WQE's gather list;
 * 0, ERANGE when the list is too short, or mr_get's errno. */
static int ud_scatter(struct sn_qp *qp, const struct sn_rwqe *r, uint64_t off, const void *src,
                      uint32_t n)
{
    const char *p = src;
    for (int i = 0; i < r->num_sge && n; i++) {
        const struct ibv_sge *sg = &r->sge[i];
        if (off >= sg->length) {
            off -= sg->length;
            continue;
        }
        uint32_t k = sg->length - (uint32_t)off < n ? sg->length - (uint32_t)off : n;
        struct sn_mr *mr;
        int err = mr_get(sg->lkey, false, qp->ibqp.pd, IBV_ACCESS_LOCAL_WRITE, sg->addr + off, k, &mr);
        if (!err) {
            err = mr_write(mr, sg->addr + off, p, k);
            mr_put(mr);
        }
        if (err)
            return err;
        p += k;
        n -= k;
        off = 0;
    }
    return n ? ERANGE : 0;
}

/* Takes a receive WQE (qp->lock held; an SRQ's lock nests inside). */
static bool ud_take_recv_locked(struct sn_qp *qp, struct sn_rwqe *out)
{
    if (qp->ibqp.srq)
        return srq_take((struct sn_srq *)qp->ibqp.srq, out);
    if (!qp->rq_count)
        return false;
    *out = qp_rq_pop_locked(qp);
    return true;
}

/* Places a datagram whose QP took it (qp->lock held). */
static void ud_place_locked(struct sn_qp *qp, const struct sn_ud_hdr *h, const void *payload,
                            struct in_addr from, struct in_addr on)
{
    enum ibv_qp_state st = qp->attr.qp_state;
    if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD) {
        atomic_fetch_add(&sn_ud_cnt.no_qp, 1);
        return;
    }
    if (h->qkey != qp->attr.qkey) {
        atomic_fetch_add(&sn_ud_cnt.bad_qkey, 1);
        return;
    }
    struct sn_rwqe r;
    if (!ud_take_recv_locked(qp, &r)) {
        atomic_fetch_add(&sn_ud_cnt.no_recv, 1);
        return;
    }
    uint8_t grh[SN_GRH_BYTES];
    ud_grh(grh, h, from, on);
    int err = ud_scatter(qp, &r, 0, grh, sizeof(grh));
    if (!err)
        err = ud_scatter(qp, &r, sizeof(grh), payload, h->len);
    struct ibv_wc wc;
    memset(&wc, 0, sizeof(wc));
    wc.wr_id = r.wr_id;
    wc.status = !err ? IBV_WC_SUCCESS : err == ERANGE ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR;
    wc.opcode = IBV_WC_RECV;
    wc.qp_num = qp->ibqp.qp_num;
    if (!err) {
        wc.byte_len = SN_GRH_BYTES + h->len;
        wc.src_qp = h->src_qpn;
        wc.wc_flags = IBV_WC_GRH;
        if (h->op == SN_OP_SEND_IMM) {
            wc.wc_flags |= IBV_WC_WITH_IMM;
            wc.imm_data = h->imm;
        }
        atomic_fetch_add(&sn_ud_cnt.delivered, 1);
        atomic_fetch_add(&qp->port->cnt.rx_packets, 1);
        atomic_fetch_add(&qp->port->cnt.rx_bytes, h->len);
        atomic_fetch_add(&qp->cnt.rx_packets, 1);
        atomic_fetch_add(&qp->cnt.rx_bytes, h->len);
        cq_push((struct sn_cq *)qp->ibqp.recv_cq, &wc, (h->flags & SN_REQ_SOLICITED) != 0);
        return;
    }
    atomic_fetch_add(&qp->cnt.errors, 1);
    cq_push((struct sn_cq *)qp->ibqp.recv_cq, &wc, false);
    qp_error_locked(qp, UINT64_MAX, IBV_WC_WR_FLUSH_ERR, 0);
}

void ud_deliver(const struct sn_ud_hdr *h, const void *payload, struct in_addr from,
                struct in_addr on)
{
    struct sn_qp *qp = wire_qp_attach(h->dst_qpn);   /* counts in qp->nresp */
    if (!qp) {
        atomic_fetch_add(&sn_ud_cnt.no_qp, 1);
        return;
    }
    pthread_mutex_lock(&qp->lock);
    /* the QP must be UD and on the port (IP) the AH's GID named */
    if (qp->ibqp.qp_type != IBV_QPT_UD || !qp->port || qp->port->addr.s_addr != on.s_addr)
        atomic_fetch_add(&sn_ud_cnt.no_qp, 1);
    else if (h->len > sn_mtu_bytes(qp->port->conf.mtu))
        atomic_fetch_add(&sn_ud_cnt.malformed, 1);   /* no port of ours sends it */
    else
        ud_place_locked(qp, h, payload, from, on);
    qp->nresp--;
    pthread_cond_broadcast(&qp->cond);
    pthread_mutex_unlock(&qp->lock);
}

/* ------------------------------------------------- address handles from a WC */
/* The AH that answers a received datagram: its source from the GRH's IPv4
 * header (what rdma-core does for a RoCE v2 port). */
int ud_ah_attr_from_grh(uint8_t port_num, const struct ibv_wc *wc, const struct ibv_grh *grh,
                        struct ibv_ah_attr *a)
{
    const uint8_t *ip = (const uint8_t *)grh + 20;
    if (!(wc->wc_flags & IBV_WC_GRH) || ip[0] != 0x45 || ip_checksum(ip, 20) != 0)
        return EINVAL;
    memset(a, 0, sizeof(*a));
    a->is_global = 1;
    a->port_num = port_num;
    a->sl = wc->sl;
    a->grh.sgid_index = 0;
    a->grh.hop_limit = 0xff;
    a->grh.traffic_class = ip[1];
    a->grh.dgid.raw[10] = 0xff;
    a->grh.dgid.raw[11] = 0xff;
    memcpy(&a->grh.dgid.raw[12], ip + 12, 4);
    return 0;
}
