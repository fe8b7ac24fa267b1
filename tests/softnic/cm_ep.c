/* cm_ep.c: QPs and SRQs made through an id (rdma_create_qp ...), the
 * endpoint calls (rdma_create_ep, rdma_get_request, rdma_destroy_ep) and the
 * synchronous mode of an id created without an event channel.
 *
 * rdma_create_qp gives the id's QP the CQs (with completion channels) and
 * the PD it was not handed, as librdmacm does: the rdma_verbs.h helpers
 * (rdma_post_send, rdma_get_send_comp, rdma_reg_msgs ...) use id->pd,
 * id->send_cq, id->send_cq_channel, id->recv_cq and id->recv_cq_channel.
 * The QP is moved to INIT at once, so receives can be posted before the
 * connection exists. */
#include "cm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int cm_sync_wait(struct cm_id *c, enum rdma_cm_event_type want)
{
    if (c->id.event) {
        rdma_ack_cm_event(c->id.event);
        c->id.event = NULL;
    }
    struct cm_event *e;
    int err = c->chan ? cm_channel_take(c->chan, &e) : EBADF;
    if (err) {
        errno = err;
        return err;
    }
    c->id.event = &e->ev;
    int st = e->ev.status;
    if (e->ev.event == want && !st)
        return 0;
    /* librdmacm's mapping of a failed operation's event to errno */
    if (e->ev.event == RDMA_CM_EVENT_REJECTED)
        err = ECONNREFUSED;
    else if (st < 0)
        err = -st;
    else if (st > 0)
        err = st;
    else
        err = EINVAL;   /* an event this operation does not end with */
    errno = err;
    return err;
}

static int make_cqs(struct cm_id *c, struct ibv_qp_init_attr *a)
{
    struct rdma_cm_id *id = &c->id;
    if (!a->send_cq) {
        id->send_cq_channel = ibv_create_comp_channel(id->verbs);
        id->send_cq = id->send_cq_channel
            ? ibv_create_cq(id->verbs, a->cap.max_send_wr ? (int)a->cap.max_send_wr : 1, id,
                            id->send_cq_channel, 0)
            : NULL;
        if (!id->send_cq)
            return errno ? errno : ENOMEM;
        a->send_cq = id->send_cq;
        c->own_cqs = true;
    }
    if (!a->recv_cq) {
        id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
        id->recv_cq = id->recv_cq_channel
            ? ibv_create_cq(id->verbs, a->cap.max_recv_wr ? (int)a->cap.max_recv_wr : 1, id,
                            id->recv_cq_channel, 0)
            : NULL;
        if (!id->recv_cq)
            return errno ? errno : ENOMEM;
        a->recv_cq = id->recv_cq;
        c->own_cqs = true;
    }
    return 0;
}

static void free_cqs(struct cm_id *c)
{
    struct rdma_cm_id *id = &c->id;
    if (!c->own_cqs)
        return;
    if (id->send_cq)
        ibv_destroy_cq(id->send_cq);
    if (id->send_cq_channel)
        ibv_destroy_comp_channel(id->send_cq_channel);
    if (id->recv_cq)
        ibv_destroy_cq(id->recv_cq);
    if (id->recv_cq_channel)
        ibv_destroy_comp_channel(id->recv_cq_channel);
    id->send_cq = id->recv_cq = NULL;
    id->send_cq_channel = id->recv_cq_channel = NULL;
    c->own_cqs = false;
}

static int qp_init(struct cm_id *c, struct ibv_qp *qp)
{
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT };
    int mask;
    pthread_mutex_lock(&cm.lock);
    int err = cm_qp_attr(c, &a, &mask);
    pthread_mutex_unlock(&cm.lock);
    return err ? err : ibv_modify_qp(qp, &a, mask);
}

int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
    if (!id || !attr || !id->verbs) {
        errno = EINVAL;
        return -1;
    }
    struct cm_id *c = cm_of(id);
    if (attr->qp_type != IBV_QPT_RC || id->qp_type != IBV_QPT_RC) {
        errno = ENOSYS;   /* connected RC only: no UD service here */
        return -1;
    }
    if (id->qp) {
        errno = EINVAL;
        return -1;
    }
    if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
        pthread_mutex_lock(&cm.lock);
        attr->pd = id->pd ? id->pd : cm_default_pd_locked(id->verbs);
        pthread_mutex_unlock(&cm.lock);
        if (!attr->pd)
            return -1;
        attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
    }
    if (attr->pd->context != id->verbs) {
        errno = EINVAL;
        return -1;
    }
    struct ibv_qp_init_attr base = {
        .send_cq = attr->send_cq, .recv_cq = attr->recv_cq, .cap = attr->cap,
    };
    int err = make_cqs(c, &base);
    if (err) {
        free_cqs(c);
        errno = err;
        return -1;
    }
    attr->send_cq = base.send_cq;
    attr->recv_cq = base.recv_cq;
    if (!attr->srq && id->srq)
        attr->srq = id->srq;
    struct ibv_qp *qp = ibv_create_qp_ex(id->verbs, attr);
    if (!qp) {
        err = errno ? errno : ENOMEM;
        free_cqs(c);
        errno = err;
        return -1;
    }
    err = qp_init(c, qp);
    if (err) {
        ibv_destroy_qp(qp);
        free_cqs(c);
        errno = err;
        return -1;
    }
    id->qp = qp;
    if (!id->pd)
        id->pd = attr->pd;
    return 0;
}

int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
    if (!qp_init_attr) {
        errno = EINVAL;
        return -1;
    }
    struct ibv_qp_init_attr_ex ex;
    memset(&ex, 0, sizeof(ex));
    ex.qp_context = qp_init_attr->qp_context;
    ex.send_cq = qp_init_attr->send_cq;
    ex.recv_cq = qp_init_attr->recv_cq;
    ex.srq = qp_init_attr->srq;
    ex.cap = qp_init_attr->cap;
    ex.qp_type = qp_init_attr->qp_type;
    ex.sq_sig_all = qp_init_attr->sq_sig_all;
    if (pd) {
        ex.pd = pd;
        ex.comp_mask = IBV_QP_INIT_ATTR_PD;
    }
    if (rdma_create_qp_ex(id, &ex))
        return -1;
    /* what the caller's struct says after, as ibv_create_qp's does */
    qp_init_attr->cap = ex.cap;
    qp_init_attr->send_cq = ex.send_cq;
    qp_init_attr->recv_cq = ex.recv_cq;
    return 0;
}

void rdma_destroy_qp(struct rdma_cm_id *id)
{
    if (!id || !id->qp)
        return;
    ibv_destroy_qp(id->qp);
    id->qp = NULL;
    free_cqs(cm_of(id));
}

int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
    if (!id || !attr || !id->verbs) {
        errno = EINVAL;
        return -1;
    }
    if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type != IBV_SRQT_BASIC) {
        errno = ENOSYS;   /* XRC is not modelled */
        return -1;
    }
    struct ibv_pd *pd = (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) ? attr->pd : NULL;
    if (!pd) {
        pthread_mutex_lock(&cm.lock);
        pd = id->pd ? id->pd : cm_default_pd_locked(id->verbs);
        pthread_mutex_unlock(&cm.lock);
        if (!pd)
            return -1;
    }
    struct ibv_srq_init_attr a = { .srq_context = attr->srq_context, .attr = attr->attr };
    struct ibv_srq *srq = ibv_create_srq(pd, &a);
    if (!srq)
        return -1;
    attr->attr = a.attr;
    id->srq = srq;
    if (!id->pd)
        id->pd = pd;
    return 0;
}

int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
    if (!attr) {
        errno = EINVAL;
        return -1;
    }
    struct ibv_srq_init_attr_ex ex;
    memset(&ex, 0, sizeof(ex));
    ex.srq_context = attr->srq_context;
    ex.attr = attr->attr;
    if (pd) {
        ex.pd = pd;
        ex.comp_mask |= IBV_SRQ_INIT_ATTR_PD;
    }
    if (rdma_create_srq_ex(id, &ex))
        return -1;
    attr->attr = ex.attr;
    return 0;
}

void rdma_destroy_srq(struct rdma_cm_id *id)
{
    if (!id || !id->srq)
        return;
    ibv_destroy_srq(id->srq);
    id->srq = NULL;
}

int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
                   struct ibv_qp_init_attr *qp_init_attr)
{
    if (!id || !res) {
        errno = EINVAL;
        return -1;
    }
    enum rdma_port_space ps = res->ai_port_space ? (enum rdma_port_space)res->ai_port_space
                                                 : RDMA_PS_TCP;
    struct rdma_cm_id *cid;
    if (rdma_create_id(NULL, &cid, NULL, ps))
        return -1;
    struct cm_id *c = cm_of(cid);
    int saved;
    if (qp_init_attr)   /* as librdmacm: the QP type comes with the address */
        qp_init_attr->qp_type = res->ai_qp_type ? (enum ibv_qp_type)res->ai_qp_type : IBV_QPT_RC;
    if (res->ai_flags & RAI_PASSIVE) {
        if (!res->ai_src_addr || rdma_bind_addr(cid, res->ai_src_addr))
            goto fail;
        if (qp_init_attr) {   /* each request gets a QP like this one */
            c->ep_attr = malloc(sizeof(*c->ep_attr));
            if (!c->ep_attr) {
                errno = ENOMEM;
                goto fail;
            }
            *c->ep_attr = *qp_init_attr;
        }
        cid->pd = pd;
        *id = cid;
        return 0;
    }
    if (rdma_resolve_addr(cid, res->ai_src_addr, res->ai_dst_addr, 2000) ||
        rdma_resolve_route(cid, 2000))
        goto fail;
    cid->pd = pd;
    if (qp_init_attr && rdma_create_qp(cid, pd, qp_init_attr))
        goto fail;
    *id = cid;
    return 0;
fail:
    saved = errno;
    rdma_destroy_id(cid);
    errno = saved;
    return -1;
}

void rdma_destroy_ep(struct rdma_cm_id *id)
{
    if (!id)
        return;
    rdma_destroy_qp(id);
    rdma_destroy_srq(id);
    rdma_destroy_id(id);
}

int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
    if (!listen || !id) {
        errno = EINVAL;
        return -1;
    }
    struct cm_id *l = cm_of(listen);
    if (!l->chan || !l->chan->sync) {
        errno = EINVAL;   /* only a synchronous listener has requests to take */
        return -1;
    }
    for (;;) {
        struct cm_event *e;
        int err = cm_channel_take(l->chan, &e);
        if (err) {
            errno = err;
            return -1;
        }
        if (e->ev.event != RDMA_CM_EVENT_CONNECT_REQUEST) {
            rdma_ack_cm_event(&e->ev);
            continue;
        }
        struct rdma_cm_id *cid = e->ev.id;
        cid->event = &e->ev;   /* acknowledged by rdma_accept or rdma_destroy_id */
        if (!cid->pd)
            cid->pd = listen->pd;
        if (l->ep_attr) {
            struct ibv_qp_init_attr a = *l->ep_attr;
            if (!a.srq && listen->srq)
                a.srq = listen->srq;
            if (rdma_create_qp(cid, listen->pd, &a)) {
                int saved = errno;
                rdma_reject(cid, NULL, 0);
                rdma_destroy_id(cid);
                errno = saved;
                return -1;
            }
        }
        *id = cid;
        return 0;
    }
}
