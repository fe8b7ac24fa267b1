/* srq.c: shared receive queues.  A ring of receive WQEs under the SRQ's
 * lock; responders of every QP attached take from it.  When the number of
 * WQEs drops below an armed limit, IBV_EVENT_SRQ_LIMIT_REACHED fires once
 * and the limit disarms, as the verbs contract says. */
#include "softnic.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct ibv_srq *srq_create(struct ibv_pd *pd, struct ibv_srq_init_attr *ia)
{
    if (!pd || !ia || ia->attr.max_wr == 0 || ia->attr.max_wr > SN_MAX_QP_WR ||
        ia->attr.max_sge > SN_MAX_SGE || ia->attr.srq_limit > ia->attr.max_wr) {
        errno = EINVAL;
        return NULL;
    }
    struct sn_srq *srq = calloc(1, sizeof(*srq));
    if (!srq || !(srq->ring = calloc(ia->attr.max_wr, sizeof(*srq->ring)))) {
        free(srq);
        errno = ENOMEM;
        return NULL;
    }
    pthread_mutex_init(&srq->lock, NULL);
    pthread_cond_init(&srq->cond, NULL);
    srq->cap = ia->attr.max_wr;
    srq->max_sge = ia->attr.max_sge ? ia->attr.max_sge : 1;
    srq->limit = ia->attr.srq_limit;
    srq->ibsrq.context = pd->context;
    srq->ibsrq.srq_context = ia->srq_context;
    srq->ibsrq.pd = pd;
    pthread_mutex_init(&srq->ibsrq.mutex, NULL);
    pthread_cond_init(&srq->ibsrq.cond, NULL);
    ia->attr.max_sge = srq->max_sge;
    pd_use(pd, 1);
    return &srq->ibsrq;
}

int srq_destroy(struct ibv_srq *ibsrq)
{
    struct sn_srq *srq = (struct sn_srq *)ibsrq;
    if (atomic_load(&srq->users) > 0)
        return EBUSY;
    pd_use(ibsrq->pd, -1);
    pthread_mutex_destroy(&srq->lock);
    pthread_cond_destroy(&srq->cond);
    pthread_mutex_destroy(&ibsrq->mutex);
    pthread_cond_destroy(&ibsrq->cond);
    free(srq->ring);
    free(srq);
    return 0;
}

int srq_modify(struct ibv_srq *ibsrq, struct ibv_srq_attr *a, int mask)
{
    struct sn_srq *srq = (struct sn_srq *)ibsrq;
    if (!a || (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)))
        return EINVAL;
    pthread_mutex_lock(&srq->lock);
    int err = 0;
    if (mask & IBV_SRQ_MAX_WR) {
        if (a->max_wr < srq->count || a->max_wr == 0 || a->max_wr > SN_MAX_QP_WR) {
            err = EINVAL;
        } else {
            struct sn_rwqe *ring = calloc(a->max_wr, sizeof(*ring));
            if (!ring) {
                err = ENOMEM;
            } else {
                for (uint32_t i = 0; i < srq->count; i++)
                    ring[i] = srq->ring[(srq->head + i) % srq->cap];
                free(srq->ring);
                srq->ring = ring;
                srq->head = 0;
                srq->cap = a->max_wr;
            }
        }
    }
    if (!err && (mask & IBV_SRQ_LIMIT)) {
        if (a->srq_limit > srq->cap)
            err = EINVAL;
        else
            srq->limit = a->srq_limit;
    }
    pthread_mutex_unlock(&srq->lock);
    return err;
}

int srq_query(struct ibv_srq *ibsrq, struct ibv_srq_attr *a)
{
    struct sn_srq *srq = (struct sn_srq *)ibsrq;
    pthread_mutex_lock(&srq->lock);
    a->max_wr = srq->cap;
    a->max_sge = srq->max_sge;
    a->srq_limit = srq->limit;
    pthread_mutex_unlock(&srq->lock);
    return 0;
}

int srq_post_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    struct sn_srq *srq = (struct sn_srq *)ibsrq;
    int err = 0;
    pthread_mutex_lock(&srq->lock);
    for (; wr; wr = wr->next) {
        if (wr->num_sge < 0 || (uint32_t)wr->num_sge > srq->max_sge) {
            err = EINVAL;
            break;
        }
        if (srq->count == srq->cap) {
            err = ENOMEM;
            break;
        }
        struct sn_rwqe *r = &srq->ring[(srq->head + srq->count) % srq->cap];
        r->wr_id = wr->wr_id;
        r->num_sge = wr->num_sge;
        if (wr->num_sge)
            memcpy(r->sge, wr->sg_list, sizeof(struct ibv_sge) * (size_t)wr->num_sge);
        srq->count++;
    }
    if (err && bad)
        *bad = wr;
    pthread_cond_broadcast(&srq->cond);
    pthread_mutex_unlock(&srq->lock);
    return err;
}

bool srq_take(struct sn_srq *srq, struct sn_rwqe *out)
{
    bool fire = false;
    pthread_mutex_lock(&srq->lock);
    bool ok = srq->count > 0;
    if (ok) {
        *out = srq->ring[srq->head];
        srq->head = (srq->head + 1) % srq->cap;
        srq->count--;
        if (srq->limit && srq->count < srq->limit) {
            srq->limit = 0;
            fire = true;
        }
    }
    pthread_mutex_unlock(&srq->lock);
    if (fire) {
        struct ibv_async_event ev;
        memset(&ev, 0, sizeof(ev));
        ev.element.srq = &srq->ibsrq;
        ev.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
        async_post(sn_ctx(srq->ibsrq.context), &ev);
    }
    return ok;
}
