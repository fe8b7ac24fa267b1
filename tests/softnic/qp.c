/* qp.c: RC and UD queue pairs: creation, the state machine of
 * ibv_modify_qp with the attribute masks the IB spec requires per
 * transition and transport (EINVAL for a missing required or a disallowed
 * attribute), query, posting, flushing.  A UD QP's sends and receives are
 * ud.c's; it has no requester or completer task (nothing is connected).
 *
 * Engines: the requester's and the completer's tasks start at the first
 * move to RTS and stop at RESET or destroy; a responder's task attaches to
 * the QP when a peer connects (responder.c).  qp->lock guards everything
 * below; lock order is qp->lock, then a CQ's or SRQ's lock, then the
 * engines' own (engine.c). */
#include "softnic.h"

#include <sys/ioctl.h>
#include <time.h>
#include "softnic_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct ibv_qp *qp_create(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
    struct ibv_context *c = pd ? pd->context : NULL;
    int err = 0;
    if (!pd || !ia || !ia->send_cq || !ia->recv_cq)
        err = EINVAL;
    else if (ia->qp_type != IBV_QPT_RC && ia->qp_type != IBV_QPT_UD)
        err = EOPNOTSUPP;
    else if (ia->cap.max_send_wr > SN_MAX_QP_WR || ia->cap.max_send_sge > SN_MAX_SGE ||
             ia->cap.max_inline_data > SN_MAX_INLINE ||
             (!ia->srq && (ia->cap.max_recv_wr > SN_MAX_QP_WR || ia->cap.max_recv_sge > SN_MAX_SGE)))
        err = EINVAL;
    else if (ia->send_cq->context != c || ia->recv_cq->context != c ||
             (ia->srq && ia->srq->context != c))
        err = EINVAL;
    if (err) {
        errno = err;
        return NULL;
    }
    struct sn_qp *qp = calloc(1, sizeof(*qp));
    if (!qp) {
        errno = ENOMEM;
        return NULL;
    }
    qp->cap = ia->cap;
    if (qp->cap.max_send_sge == 0)
        qp->cap.max_send_sge = 1;
    qp->sq_size = qp->cap.max_send_wr ? qp->cap.max_send_wr : 1;
    qp->rq_size = ia->srq ? 0 : (qp->cap.max_recv_wr ? qp->cap.max_recv_wr : 1);
    if (ia->srq)
        qp->cap.max_recv_wr = qp->cap.max_recv_sge = 0;
    qp->sq = calloc(qp->sq_size, sizeof(*qp->sq));
    qp->sq_inline = calloc(qp->sq_size, qp->cap.max_inline_data ? qp->cap.max_inline_data : 1);
    qp->rq = qp->rq_size ? calloc(qp->rq_size, sizeof(*qp->rq)) : NULL;
    uint32_t qpn = wire_alloc_qpn();
    err = !qpn ? ENOSPC : (!qp->sq || !qp->sq_inline || (qp->rq_size && !qp->rq)) ? ENOMEM : 0;
    /* a UD QP's datagrams arrive on its block's sockets (udwire.c) */
    if (!err && ia->qp_type == IBV_QPT_UD)
        err = udwire_open(qpn);
    if (err) {
        if (qpn)
            wire_free_qpn(qpn);
        free(qp->sq);
        free(qp->sq_inline);
        free(qp->rq);
        free(qp);
        errno = err;
        return NULL;
    }
    /* spinning a little before sleeping: the lock is held for short
     * stretches by a rank posting on one CPU and the engine completing its
     * receives on another, and a futex sleep and wake-up costs either side
     * more than the wait */
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&qp->lock, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_cond_init(&qp->cond, NULL);
    qp->dev = sn_device_of(c);
    qp->sq_sig_all = ia->sq_sig_all != 0;
    qp->out_fd = -1;
    qp->push_slot = -1;
    qp->note_watch = -1;
    qp->attr.qp_state = IBV_QPS_RESET;
    qp->attr.cap = qp->cap;
    qp->attr.path_mtu = IBV_MTU_1024;
    qp->attr.port_num = 1;
    qp->ibqp.context = c;
    qp->ibqp.qp_context = ia->qp_context;
    qp->ibqp.pd = pd;
    qp->ibqp.send_cq = ia->send_cq;
    qp->ibqp.recv_cq = ia->recv_cq;
    qp->ibqp.srq = ia->srq;
    qp->ibqp.handle = qpn;
    qp->ibqp.qp_num = qpn;
    qp->ibqp.state = IBV_QPS_RESET;
    qp->ibqp.qp_type = ia->qp_type;
    pthread_mutex_init(&qp->ibqp.mutex, NULL);
    pthread_cond_init(&qp->ibqp.cond, NULL);
    cq_attach(ia->send_cq, 1);
    cq_attach(ia->recv_cq, 1);
    ia->cap = qp->cap;
    pd_use(pd, 1);
    if (ia->srq)
        atomic_fetch_add(&((struct sn_srq *)ia->srq)->users, 1);
    wire_qp_register(qp);
    atomic_fetch_add(&sn_live_qps, 1);
    return &qp->ibqp;
}

int qp_destroy(struct ibv_qp *ibqp);

struct ibv_qp *qp_create_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *ia)
{
    const uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    if ((ia->comp_mask & ~known) || !(ia->comp_mask & IBV_QP_INIT_ATTR_PD) ||
        !ia->pd || ia->pd->context != c) {
        errno = (ia->comp_mask & ~known) ? EOPNOTSUPP : EINVAL;
        return NULL;
    }
    struct ibv_qp_init_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_context = ia->qp_context;
    a.send_cq = ia->send_cq;
    a.recv_cq = ia->recv_cq;
    a.srq = ia->srq;
    a.cap = ia->cap;
    a.qp_type = ia->qp_type;
    a.sq_sig_all = ia->sq_sig_all;
    if ((ia->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && ia->qp_type != IBV_QPT_RC &&
        ia->qp_type != IBV_QPT_UD) {
        errno = EOPNOTSUPP;       /* the builder is offered for RC and UD */
        return NULL;
    }
    struct ibv_qp *qp = qp_create(ia->pd, &a);
    if (!qp)
        return NULL;
    ia->cap = a.cap;
    if (ia->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
        int err = qp_ex_init(sn_qp_of(qp), ia->send_ops_flags);
        if (err) {
            qp_destroy(qp);
            errno = err;
            return NULL;
        }
    }
    return qp;
}

/* Takes the QP's roles off the engines; caller holds no lock. */
static void qp_engine_stop(struct sn_qp *qp)
{
    pthread_mutex_lock(&qp->lock);
    qp->stopping = true;
    responder_rx_live_locked(qp);
    if (qp->out_fd >= 0)
        shutdown(qp->out_fd, SHUT_RDWR);
    pthread_cond_broadcast(&qp->cond);
    pthread_mutex_unlock(&qp->lock);
    /* each unscheduled, a step under way ended, before the connection
     * they use is closed below */
    requester_stop(qp);
    completer_stop(qp);
    responder_stop_qp(qp);
    pthread_mutex_lock(&qp->lock);
    if (qp->out_fd >= 0)
        close(qp->out_fd);
    qp->out_fd = -1;
    qp->conn_dead = false;
    qp->stopping = false;
    responder_rx_live_locked(qp);
    pthread_mutex_unlock(&qp->lock);
}

int qp_destroy(struct ibv_qp *ibqp)
{
    struct sn_qp *qp = sn_qp_of(ibqp);
    priv_qp_destroying(ibqp);   /* libmlx5's NIC thread lets go of the QP first */
    wire_qp_unregister(qp);
    pthread_mutex_lock(&qp->lock);
    qp->stopping = true;
    responder_rx_live_locked(qp);
    pthread_mutex_unlock(&qp->lock);
    qp_engine_stop(qp);
    pthread_mutex_lock(&qp->lock);
    push_qp_release_locked(qp);
    push_detach_locked(qp);
    pthread_mutex_unlock(&qp->lock);
    wire_free_qpn(ibqp->qp_num);
    cq_attach(ibqp->send_cq, -1);
    cq_attach(ibqp->recv_cq, -1);
    pd_use(ibqp->pd, -1);
    if (ibqp->srq)
        atomic_fetch_sub(&((struct sn_srq *)ibqp->srq)->users, 1);
    async_forget_qp(ibqp);      /* after the engine stopped: no new event for it */
    pthread_mutex_destroy(&qp->lock);
    pthread_cond_destroy(&qp->cond);
    for (uint32_t i = 0; i < qp->sq_size; i++)
        qp_unpin_locked(&qp->sq[i]);   /* the engine has stopped: no lock needed */
    pthread_mutex_destroy(&ibqp->mutex);
    pthread_cond_destroy(&ibqp->cond);
    free(qp->sq);
    free(qp->sq_inline);
    free(qp->rq);
    qp_ex_free(qp);
    free(qp);
    atomic_fetch_sub(&sn_live_qps, 1);
    return 0;
}

/* ------------------------------------------------------- state machine */
struct qp_transition {
    enum ibv_qp_state from, to;
    int req, opt;
};

#define OPT_PATH (IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | \
                  IBV_QP_PATH_MIG_STATE | IBV_QP_MIN_RNR_TIMER)

static const struct qp_transition rc_table[] = {
    { IBV_QPS_RESET, IBV_QPS_RESET, 0, 0 },
    { IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0 },
    { IBV_QPS_INIT, IBV_QPS_INIT, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS },
    { IBV_QPS_INIT, IBV_QPS_RTR,
      IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
      IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX },
    { IBV_QPS_RTR, IBV_QPS_RTS,
      IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
          IBV_QP_MAX_QP_RD_ATOMIC,
      OPT_PATH },
    { IBV_QPS_RTS, IBV_QPS_RTS, 0, OPT_PATH },
    { IBV_QPS_RTS, IBV_QPS_SQD, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY },
    { IBV_QPS_SQD, IBV_QPS_RTS, 0, OPT_PATH },
    { IBV_QPS_SQD, IBV_QPS_SQD, 0,
      OPT_PATH | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT |
          IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC |
          IBV_QP_MAX_DEST_RD_ATOMIC },
};

/* UD (IB spec 11.2.4.2's table for UD): no path, no PSN to receive, no
 * RDMA; the Q_Key from INIT on. */
static const struct qp_transition ud_table[] = {
    { IBV_QPS_RESET, IBV_QPS_RESET, 0, 0 },
    { IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, 0 },
    { IBV_QPS_INIT, IBV_QPS_INIT, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY },
    { IBV_QPS_INIT, IBV_QPS_RTR, 0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY },
    { IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_SQ_PSN, IBV_QP_CUR_STATE | IBV_QP_QKEY },
    { IBV_QPS_RTS, IBV_QPS_RTS, 0, IBV_QP_CUR_STATE | IBV_QP_QKEY },
    { IBV_QPS_RTS, IBV_QPS_SQD, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY },
    { IBV_QPS_SQD, IBV_QPS_RTS, 0, IBV_QP_CUR_STATE | IBV_QP_QKEY },
    { IBV_QPS_SQD, IBV_QPS_SQD, 0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY },
};

/* Checks mask against the transition table of the QP's type; 0 or EINVAL. */
static int qp_check_mask(enum ibv_qp_type type, enum ibv_qp_state cur, enum ibv_qp_state next,
                         int mask)
{
    mask &= ~IBV_QP_STATE;
    /* to RESET or ERR: from anywhere but RESET -> ERR, with no attribute */
    if (next == IBV_QPS_RESET || next == IBV_QPS_ERR)
        return (mask || (cur == IBV_QPS_RESET && next == IBV_QPS_ERR)) ? EINVAL : 0;
    const struct qp_transition *table = type == IBV_QPT_UD ? ud_table : rc_table;
    size_t n = type == IBV_QPT_UD ? sizeof(ud_table) / sizeof(ud_table[0])
                                  : sizeof(rc_table) / sizeof(rc_table[0]);
    for (size_t i = 0; i < n; i++) {
        const struct qp_transition *t = &table[i];
        if (t->from != cur || t->to != next)
            continue;
        if ((mask & t->req) != t->req)
            return EINVAL;
        if (mask & ~(t->req | t->opt))
            return EINVAL;
        return 0;
    }
    return EINVAL;
}

static int qp_check_values(struct sn_qp *qp, const struct ibv_qp_attr *a, int mask)
{
    if ((mask & IBV_QP_PORT) && !sn_port_get(qp->dev, a->port_num))
        return EINVAL;
    if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0)
        return EINVAL;
    if ((mask & IBV_QP_ACCESS_FLAGS) &&
        (a->qp_access_flags & ~(unsigned)(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                          IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)))
        return EINVAL;
    if (mask & IBV_QP_AV) {
        /* RoCE needs a GRH; the only GID is index 0 */
        if (!a->ah_attr.is_global || a->ah_attr.grh.sgid_index != 0)
            return EINVAL;
        if (a->ah_attr.port_num && !sn_port_get(qp->dev, a->ah_attr.port_num))
            return EINVAL;
    }
    if ((mask & IBV_QP_PATH_MTU) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096))
        return EINVAL;
    if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num >= (1u << 24))
        return EINVAL;
    if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > SN_MAX_RD_ATOMIC)
        return EINVAL;
    if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > SN_MAX_RD_ATOMIC)
        return EINVAL;
    if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
        return EINVAL;
    if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31)
        return EINVAL;
    if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7)
        return EINVAL;
    if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7)
        return EINVAL;
    if ((mask & (IBV_QP_RQ_PSN)) && a->rq_psn >= (1u << 24))
        return EINVAL;
    if ((mask & (IBV_QP_SQ_PSN)) && a->sq_psn >= (1u << 24))
        return EINVAL;
    return 0;
}

static void qp_store(struct sn_qp *qp, const struct ibv_qp_attr *a, int mask)
{
    struct ibv_qp_attr *s = &qp->attr;
    if (mask & IBV_QP_PORT) {
        s->port_num = a->port_num;
        qp->port = sn_port_get(qp->dev, a->port_num);
    }
    if (mask & IBV_QP_PKEY_INDEX) s->pkey_index = a->pkey_index;
    if (mask & IBV_QP_QKEY) s->qkey = a->qkey;
    if (mask & IBV_QP_ACCESS_FLAGS) s->qp_access_flags = a->qp_access_flags;
    if (mask & IBV_QP_AV) {
        s->ah_attr = a->ah_attr;
        atomic_store(&qp->tc, a->ah_attr.grh.traffic_class);
    }
    if (mask & IBV_QP_PATH_MTU) s->path_mtu = a->path_mtu;
    if (mask & IBV_QP_DEST_QPN) s->dest_qp_num = a->dest_qp_num;
    if (mask & IBV_QP_RQ_PSN) s->rq_psn = a->rq_psn;
    if (mask & IBV_QP_SQ_PSN) s->sq_psn = a->sq_psn;
    if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) s->max_dest_rd_atomic = a->max_dest_rd_atomic;
    if (mask & IBV_QP_MAX_QP_RD_ATOMIC) s->max_rd_atomic = a->max_rd_atomic;
    if (mask & IBV_QP_MIN_RNR_TIMER) s->min_rnr_timer = a->min_rnr_timer;
    if (mask & IBV_QP_TIMEOUT) s->timeout = a->timeout;
    if (mask & IBV_QP_RETRY_CNT) s->retry_cnt = a->retry_cnt;
    if (mask & IBV_QP_RNR_RETRY) s->rnr_retry = a->rnr_retry;
    if (mask & IBV_QP_ALT_PATH) {
        s->alt_ah_attr = a->alt_ah_attr;
        s->alt_pkey_index = a->alt_pkey_index;
        s->alt_port_num = a->alt_port_num;
        s->alt_timeout = a->alt_timeout;
    }
    if (mask & IBV_QP_PATH_MIG_STATE) s->path_mig_state = a->path_mig_state;
    if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) s->en_sqd_async_notify = a->en_sqd_async_notify;
}

/* Empties both queues without completions (move to RESET). */
static void qp_reset_locked(struct sn_qp *qp)
{
    /* a reset QP meets its next peer afresh: the old one's pushes end here */
    push_qp_release_locked(qp);
    push_detach_locked(qp);
    for (uint32_t i = 0; i < qp->sq_size; i++)
        qp_unpin_locked(&qp->sq[i]);
    qp->sq_head = qp->sq_sent = qp->sq_tail = 0;
    qp->rq_head = qp->rq_count = 0;
    qp->next_seq = 0;
    qp->unreq = 0;
    qp->last_progress_ns = 0;
}

int qp_modify(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask)
{
    struct sn_qp *qp = sn_qp_of(ibqp);
    if (!a)
        return EINVAL;
    pthread_mutex_lock(&qp->lock);
    enum ibv_qp_state cur = qp->attr.qp_state;
    enum ibv_qp_state next = (mask & IBV_QP_STATE) ? a->qp_state : cur;
    int err = 0;
    if ((mask & IBV_QP_CUR_STATE) && a->cur_qp_state != cur)
        err = EINVAL;
    else if (next > IBV_QPS_ERR || next == IBV_QPS_SQE)
        err = EINVAL;
    else if (cur == IBV_QPS_ERR && next != IBV_QPS_RESET && next != IBV_QPS_ERR)
        err = EINVAL;
    else
        err = qp_check_mask(ibqp->qp_type, cur, next, mask);
    if (!err)
        err = qp_check_values(qp, a, mask);
    if (!err && next == IBV_QPS_RTR && qp->port && !(mask & IBV_QP_PORT)) {
        /* nothing: port chosen at INIT */
    }
    if (err) {
        pthread_mutex_unlock(&qp->lock);
        return err;
    }
    qp_store(qp, a, mask);
    bool stop = false, start = false;
    if (next == IBV_QPS_RESET && cur != IBV_QPS_RESET)
        stop = true;
    if (next == IBV_QPS_ERR) {
        if (cur != IBV_QPS_ERR)
            qp_error_locked(qp, UINT64_MAX, IBV_WC_WR_FLUSH_ERR, 0);
        /* a write being placed finishes first (its responder's stream is
         * shut down: it reads what was buffered, no more); after this
         * returns nothing lands in this QP's memory (responder.c) */
        atomic_fetch_add(&qp->placing_waiters, 1);
        while (atomic_load(&qp->placing) > 0)
            pthread_cond_wait(&qp->cond, &qp->lock);
        atomic_fetch_sub(&qp->placing_waiters, 1);
    }
    if (next == IBV_QPS_RTS && !qp->req && ibqp->qp_type == IBV_QPT_RC)
        start = true;
    if (next != IBV_QPS_ERR) {
        qp->attr.qp_state = next;
        ibqp->state = next;
        responder_rx_live_locked(qp);
    }
    push_qp_update_locked(qp);   /* its state and access flags, for same-host pushers */
    if (next == IBV_QPS_SQD && cur == IBV_QPS_RTS && qp->attr.en_sqd_async_notify &&
        qp->sq_head == qp->sq_sent)
        async_post_qp(ibqp, IBV_EVENT_SQ_DRAINED);
    pthread_cond_broadcast(&qp->cond);
    requester_kick_locked(qp);
    responder_wake_locked(qp, false);
    pthread_mutex_unlock(&qp->lock);
    if (stop) {
        qp_engine_stop(qp);
        pthread_mutex_lock(&qp->lock);
        qp_reset_locked(qp);
        pthread_mutex_unlock(&qp->lock);
    }
    if (start) {
        err = requester_start(qp);
        if (err)
            return err;
    }
    return 0;
}

int qp_query(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask, struct ibv_qp_init_attr *ia)
{
    struct sn_qp *qp = sn_qp_of(ibqp);
    (void)mask;   /* every attribute is always returned */
    if (!a || !ia)
        return EINVAL;
    pthread_mutex_lock(&qp->lock);
    *a = qp->attr;
    a->cur_qp_state = qp->attr.qp_state;
    a->cap = qp->cap;
    a->sq_draining = 0;
    memset(ia, 0, sizeof(*ia));
    ia->qp_context = ibqp->qp_context;
    ia->send_cq = ibqp->send_cq;
    ia->recv_cq = ibqp->recv_cq;
    ia->srq = ibqp->srq;
    ia->cap = qp->cap;
    ia->qp_type = ibqp->qp_type;
    ia->sq_sig_all = qp->sq_sig_all;
    pthread_mutex_unlock(&qp->lock);
    return 0;
}

/* ---------------------------------------------------------- completions */
static enum ibv_wc_opcode wc_opcode_of(enum ibv_wr_opcode op)
{
    switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
    default: return IBV_WC_SEND;
    }
}

void qp_unpin_locked(struct sn_swqe *w)
{
    for (int i = 0; i < w->npin; i++)
        mr_put(w->pin[i]);
    w->npin = 0;
}

/* Every send WQE ends here once (success, error or flush). */
static void qp_send_wc(struct sn_qp *qp, struct sn_swqe *w, enum ibv_wc_status st,
                       uint32_t vendor_err)
{
    qp_unpin_locked(w);
    bool signaled = qp->sq_sig_all || (w->send_flags & IBV_SEND_SIGNALED);
    if (st == IBV_WC_SUCCESS && !signaled)
        return;
    struct ibv_wc wc;
    memset(&wc, 0, sizeof(wc));
    wc.wr_id = w->wr_id;
    wc.status = st;
    wc.opcode = wc_opcode_of(w->opcode);
    wc.byte_len = sn_wr_is_read_like(w->opcode) ? w->len : 0;
    wc.qp_num = qp->ibqp.qp_num;
    wc.vendor_err = vendor_err;
    if (st != IBV_WC_SUCCESS)
        atomic_fetch_add(&qp->cnt.errors, 1);
    cq_push((struct sn_cq *)qp->ibqp.send_cq, &wc, false);
}

void qp_complete_send_locked(struct sn_qp *qp, enum ibv_wc_status st)
{
    struct sn_swqe *w = &qp->sq[qp->sq_head % qp->sq_size];
    qp_send_wc(qp, w, st, 0);
    qp->sq_head++;
    pthread_cond_broadcast(&qp->cond);
    /* a READ/atomic waiting for the initiator depth may go now */
    if (qp->sq_sent != qp->sq_tail && sn_wr_is_read_like(w->opcode))
        requester_kick_locked(qp);
}

static void qp_recv_flush_wc(struct sn_qp *qp, uint64_t wr_id)
{
    struct ibv_wc wc;
    memset(&wc, 0, sizeof(wc));
    wc.wr_id = wr_id;
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.opcode = IBV_WC_RECV;
    wc.qp_num = qp->ibqp.qp_num;
    cq_push((struct sn_cq *)qp->ibqp.recv_cq, &wc, false);
}

struct sn_rwqe qp_rq_pop_locked(struct sn_qp *qp)
{
    struct sn_rwqe r = qp->rq[qp->rq_head];
    qp->rq_head = (qp->rq_head + 1) % qp->rq_size;
    qp->rq_count--;
    return r;
}

void qp_flush_recv_locked(struct sn_qp *qp)
{
    /* pushed writes that landed complete first, in their order */
    if (push_rx_flush_waits_locked(qp))
        return;
    while (qp->rq_count)
        qp_recv_flush_wc(qp, qp_rq_pop_locked(qp).wr_id);
}

void qp_error_locked(struct sn_qp *qp, uint64_t culprit, enum ibv_wc_status st,
                     uint32_t vendor_err)
{
    if (qp->attr.qp_state == IBV_QPS_ERR)
        return;
    qp->attr.qp_state = IBV_QPS_ERR;
    qp->ibqp.state = IBV_QPS_ERR;
    responder_rx_live_locked(qp);
    push_qp_update_locked(qp);
    while (qp->sq_head != qp->sq_tail) {
        struct sn_swqe *w = &qp->sq[qp->sq_head % qp->sq_size];
        bool guilty = qp->sq_head == culprit;
        qp_send_wc(qp, w, guilty ? st : IBV_WC_WR_FLUSH_ERR, guilty ? vendor_err : 0);
        qp->sq_head++;
    }
    qp->sq_sent = qp->sq_tail;
    qp_flush_recv_locked(qp);
    if (qp->out_fd >= 0)
        shutdown(qp->out_fd, SHUT_RDWR);
    responder_kick_locked(qp);
    pthread_cond_broadcast(&qp->cond);
    requester_kick_locked(qp);
}

/* --------------------------------------------------------------- posting */
static int qp_check_send_wr(struct sn_qp *qp, const struct ibv_send_wr *wr, uint32_t *len)
{
    uint64_t total;
    if (sn_send_wr_check(&qp->cap, wr, &total))
        return EINVAL;
    if ((wr->send_flags & IBV_SEND_INLINE) && sn_wr_is_read_like(wr->opcode))
        return EINVAL;
    if (sn_wr_is_atomic(wr->opcode)) {
        /* The old value goes to one SGE.  mlx5 writes its data segment
         * with a byte count of 8 whatever the SGE says, so a longer SGE
         * gets 8 bytes; a shorter one (or none, or several) is refused
         * here, where a ConnectX would write 8 bytes past it. */
        if (wr->num_sge != 1 || wr->sg_list[0].length < SN_ATOMIC_SIZE)
            return EINVAL;
        *len = SN_ATOMIC_SIZE;
        return 0;
    }
    if (total > SN_MAX_MSG)
        return EINVAL;
    if ((wr->send_flags & IBV_SEND_INLINE) && total > qp->cap.max_inline_data)
        return EINVAL;
    *len = (uint32_t)total;
    return 0;
}

/* A full send queue whose peer has acknowledged WQEs already, in bytes that
 * wait unread on the requester's socket: on a NIC those ACKs arrived, on
 * the same path, before the peer's request that the application has seen
 * (a receive completion, an RDMA WRITE it polls), and were processed first.
 * Here ACKs and requests travel on two sockets read by two threads, and a
 * starved completer can leave them unread while the application runs ahead
 * (rping's client posted into a "full" queue of 16 under make -j2 check).
 * So the post waits for the completer, while those bytes are there, up to
 * SQ_ACK_WAIT_MS; a queue full of WQEs not yet acknowledged is ENOMEM at
 * once, as on a NIC.  Caller holds qp->lock. */
#define SQ_ACK_WAIT_MS 2000
static bool sq_wait_for_acks_locked(struct sn_qp *qp)
{
    uint64_t deadline = sn_now_ns() + SQ_ACK_WAIT_MS * 1000000ull;
    while (qp->sq_tail - qp->sq_head >= qp->sq_size) {
        int unread = 0;
        if (qp->out_fd < 0 || ioctl(qp->out_fd, FIONREAD, &unread) || unread <= 0 || sn_now_ns() >= deadline)
            return false;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 1000000;   /* re-check the socket every ms */
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&qp->cond, &qp->lock, &ts);
        if (qp->attr.qp_state != IBV_QPS_RTS)
            return false;
    }
    return true;
}

/* The clock, read once a post and only for WQEs that stay queued: their
 * posted_ns (a paced port's credit, rate.c) and, when the post found the
 * queue idle, the retry timer's start (last_progress_ns).  A write the
 * posting thread pushes (push.c) completes inside the post and needs
 * neither: on a 16-CPU host each read is 26 ns of a small message's one-way
 * time.  Stamped before the lock is let go with the WQEs still queued. */
struct post_stamp {
    uint64_t from;   /* sq index of the first WQE not stamped yet */
    bool idle;       /* a WQE of this post found the queue empty */
};

static void post_stamp_locked(struct sn_qp *qp, struct post_stamp *ps)
{
    if (ps->from == qp->sq_tail)
        return;
    /* a wait let go of the lock: the queue may have moved on, or been
     * reset (its indices from 0 again); those done need no stamp */
    uint64_t lo = ps->from < qp->sq_head || ps->from > qp->sq_tail ? qp->sq_head : ps->from;
    uint64_t now = sn_now_ns();
    for (uint64_t i = lo; i < qp->sq_tail; i++)
        qp->sq[i % qp->sq_size].posted_ns = now;
    ps->from = qp->sq_tail;
    if (ps->idle)
        qp->last_progress_ns = now;
    ps->idle = false;
}

int qp_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    struct sn_qp *qp = sn_qp_of(ibqp);
    if (ibqp->qp_type == IBV_QPT_UD)
        return ud_post_send(qp, wr, bad);
    int err = 0;
    pthread_mutex_lock(&qp->lock);
    enum ibv_qp_state st = qp->attr.qp_state;
    if (st != IBV_QPS_RTS && st != IBV_QPS_SQD && st != IBV_QPS_ERR)
        err = EINVAL;
    uint64_t tail0 = qp->sq_tail, head0 = qp->sq_head;
    struct post_stamp ps = { .from = tail0 };
    for (; wr && !err; wr = wr->next) {
        uint32_t len = 0;
        if ((err = qp_check_send_wr(qp, wr, &len)))
            break;
        if (qp->sq_tail - qp->sq_head >= qp->sq_size) {
            post_stamp_locked(qp, &ps);   /* the wait lets the NIC threads send them */
            if (!sq_wait_for_acks_locked(qp)) {
                err = ENOMEM;
                break;
            }
        }
        struct sn_swqe *w = &qp->sq[qp->sq_tail % qp->sq_size];
        w->wr_id = wr->wr_id;
        w->opcode = wr->opcode;
        w->send_flags = wr->send_flags;
        w->imm = wr->imm_data;
        if (sn_wr_is_atomic(wr->opcode)) {
            /* wr.atomic keeps its rkey after the operands, unlike wr.rdma */
            w->raddr = wr->wr.atomic.remote_addr;
            w->rkey = wr->wr.atomic.rkey;
            w->compare_add = wr->wr.atomic.compare_add;
            w->swap = wr->wr.atomic.swap;
        } else {
            w->raddr = wr->wr.rdma.remote_addr;
            w->rkey = wr->wr.rdma.rkey;
        }
        w->len = len;
        w->posted_ns = 0;   /* post_stamp_locked */
        w->inl = NULL;
        w->npin = 0;
        if (wr->send_flags & IBV_SEND_INLINE) {
            /* the slot's own buffer: valid until the WQE completes */
            w->inl = qp->sq_inline + (qp->sq_tail % qp->sq_size) * qp->cap.max_inline_data;
            uint32_t off = 0;
            for (int i = 0; i < wr->num_sge; i++) {
                memcpy(w->inl + off, (void *)(uintptr_t)wr->sg_list[i].addr,
                       wr->sg_list[i].length);
                off += wr->sg_list[i].length;
            }
            w->num_sge = 0;
        } else {
            w->num_sge = wr->num_sge;
            if (wr->num_sge)
                memcpy(w->sge, wr->sg_list, sizeof(struct ibv_sge) * (size_t)wr->num_sge);
        }
        if (qp->sq_head == qp->sq_tail)
            ps.idle = true;
        qp->sq_tail++;
        if (st == IBV_QPS_ERR) {
            /* a QP in error flushes whatever is posted to it */
            qp_send_wc(qp, w, IBV_WC_WR_FLUSH_ERR, 0);
            qp->sq_head = qp->sq_sent = qp->sq_tail;
        }
    }
    if (err && bad)
        *bad = wr;
    if (qp->sq_tail != tail0)
        atomic_fetch_add(&qp->cnt.post_calls, 1);
    /* what the posting thread places itself (push.c) needs no requester,
     * no timestamp and no timer (tx_busy keeps the requester off the
     * queue while a push lets go of the lock) */
    push_try_locked(qp);
    if (qp->sq_head != qp->sq_tail) {   /* some still queued or unacknowledged */
        post_stamp_locked(qp, &ps);
        /* work on an idle QP: the completer times its answer */
        if (qp->sq_tail != tail0 && head0 == tail0 && st == IBV_QPS_RTS)
            completer_arm_locked(qp);
    }
    if (!requester_try_direct_locked(qp))
        requester_kick_locked(qp);
    pthread_mutex_unlock(&qp->lock);
    return err;
}

static int qp_check_recv_wr(uint32_t max_sge, const struct ibv_recv_wr *wr)
{
    if (wr->num_sge < 0 || (uint32_t)wr->num_sge > max_sge)
        return EINVAL;
    return 0;
}

int qp_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    struct sn_qp *qp = sn_qp_of(ibqp);
    int err = 0;
    pthread_mutex_lock(&qp->lock);
    if (ibqp->srq || qp->attr.qp_state == IBV_QPS_RESET)
        err = EINVAL;
    for (; wr && !err; wr = wr->next) {
        if ((err = qp_check_recv_wr(qp->cap.max_recv_sge, wr)))
            break;
        /* a QP in error flushes what is posted to it, after what came
         * before: while pushed completions wait behind the engine's
         * (push_rx_flush_waits_locked), the receive queues up for the
         * flush that follows them */
        bool err_state = qp->attr.qp_state == IBV_QPS_ERR;
        if (err_state && !qp->rx_flush_deferred) {
            qp_recv_flush_wc(qp, wr->wr_id);
            continue;
        }
        if (qp->rq_count == qp->rq_size) {
            err = ENOMEM;
            break;
        }
        struct sn_rwqe *r = &qp->rq[(qp->rq_head + qp->rq_count) % qp->rq_size];
        r->wr_id = wr->wr_id;
        r->num_sge = wr->num_sge;
        if (wr->num_sge)
            memcpy(r->sge, wr->sg_list, sizeof(struct ibv_sge) * (size_t)wr->num_sge);
        qp->rq_count++;
        if (!err_state)   /* a receive in the flush's queue is no pusher's */
            push_rq_posted_locked(qp, 1);
    }
    if (err && bad)
        *bad = wr;
    /* only a responder waiting for a receive (an RNR wait) needs this: a
     * kick per post would run the responders of a QP that only receives
     * once per post */
    if (qp->recv_waiters > 0)
        responder_wake_locked(qp, true);
    pthread_mutex_unlock(&qp->lock);
    return err;
}

bool qp_take_recv(struct sn_qp *qp, struct sn_rwqe *out)
{
    if (qp->ibqp.srq) {
        bool ok = srq_take((struct sn_srq *)qp->ibqp.srq, out);
        out->idx = SN_RWQE_NO_IDX;
        return ok;
    }
    pthread_mutex_lock(&qp->lock);
    /* a QP pushed into shares its receives with its pushers */
    int pushed = push_rq_take_locked(qp, out);
    bool ok = pushed > 0;
    if (pushed < 0) {
        ok = qp->rq_count > 0 && qp->attr.qp_state != IBV_QPS_ERR;
        if (ok) {
            *out = qp_rq_pop_locked(qp);
            out->idx = SN_RWQE_NO_IDX;
        }
    }
    pthread_mutex_unlock(&qp->lock);
    return ok;
}

/* IB timeout: 4.096 us * 2^timeout per try, retry_cnt retries; timeout 0
 * means infinite.  Capped (retry_cap_ms) so that tests finish quickly, and
 * floored (retry_min_ms, default 500) because a NIC thread starved by a
 * busy 2-core host (or slowed by valgrind) must not make its peer look
 * dead; the cap wins over the floor. */
uint64_t qp_retry_budget_ns(struct sn_qp *qp)
{
    const struct sn_config *c = &softnic_global()->conf;
    uint64_t cap = (uint64_t)c->retry_cap_ms * 1000000ull;
    uint64_t floor = (uint64_t)c->retry_min_ms * 1000000ull;
    if (qp->attr.timeout == 0)
        return cap;
    uint64_t one = 4096ull << qp->attr.timeout;
    uint64_t total = one * (qp->attr.retry_cnt + 1u);
    if (total < floor)
        total = floor;
    return total < cap ? total : cap;
}

/* RNR timer encodings of the IB spec, in microseconds. */
static const uint32_t rnr_us[32] = {
    655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
    2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880,
    163840, 245760, 327680, 491520,
};

uint64_t qp_rnr_budget_ns(uint8_t rnr_retry, uint8_t min_rnr_timer)
{
    if (rnr_retry == 7)
        return UINT64_MAX;   /* infinite */
    uint64_t cap = (uint64_t)softnic_global()->conf.rnr_cap_ms * 1000000ull;
    uint64_t t = (uint64_t)rnr_us[min_rnr_timer & 31] * 1000ull * (rnr_retry + 1u);
    return t < cap ? t : cap;
}
