/* async.c: asynchronous events.  Each context has a queue and a pipe whose
 * read end is context->async_fd: one byte per queued event, so the fd polls
 * readable exactly while an event waits (ibv_get_async_event reads it). */
#include "softnic.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void async_post(struct sn_context *ctx, const struct ibv_async_event *ev)
{
    struct sn_async *e = malloc(sizeof(*e));
    if (!e) {
        SN_LOG("async: out of memory, event %d lost", (int)ev->event_type);
        return;
    }
    e->ev = *ev;
    e->next = NULL;
    pthread_mutex_lock(&ctx->ev_lock);
    if (ctx->ev_tail)
        ctx->ev_tail->next = e;
    else
        ctx->ev_head = e;
    ctx->ev_tail = e;
    char b = 1;
    if (write(ctx->async_pipe[1], &b, 1) != 1)
        SN_LOG("async: cannot signal event: %s", strerror(errno));
    pthread_mutex_unlock(&ctx->ev_lock);
}

void async_post_dev(struct sn_device *d, const struct ibv_async_event *ev)
{
    pthread_mutex_lock(&d->lock);
    for (struct sn_context *c = d->ctxs; c; c = c->next)
        async_post(c, ev);
    pthread_mutex_unlock(&d->lock);
}

void async_post_qp(struct ibv_qp *qp, enum ibv_event_type type)
{
    struct ibv_async_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.element.qp = qp;
    ev.event_type = type;
    async_post(sn_ctx(qp->context), &ev);
}

static bool qp_event(enum ibv_event_type t)
{
    switch (t) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
        return true;
    default:
        return false;
    }
}

void async_forget_qp(struct ibv_qp *qp)
{
    struct sn_device *d = sn_ctx(qp->context)->dev;
    pthread_mutex_lock(&d->lock);
    for (struct sn_context *c = d->ctxs; c; c = c->next) {
        pthread_mutex_lock(&c->ev_lock);
        int removed = 0;
        struct sn_async **pp = &c->ev_head;
        c->ev_tail = NULL;
        while (*pp) {
            struct sn_async *e = *pp;
            if (qp_event(e->ev.event_type) && e->ev.element.qp == qp) {
                *pp = e->next;
                free(e);
                removed++;
            } else {
                c->ev_tail = e;
                pp = &e->next;
            }
        }
        /* and their bytes, so that the fd polls readable only while an
         * event waits (never blocks: each event left one) */
        for (; removed > 0; removed--) {
            struct pollfd p = { .fd = c->async_pipe[0], .events = POLLIN };
            char b;
            if (poll(&p, 1, 0) != 1 || read(c->async_pipe[0], &b, 1) != 1)
                break;
        }
        pthread_mutex_unlock(&c->ev_lock);
    }
    pthread_mutex_unlock(&d->lock);
}

/* Pops one event after its byte was read; 0 or ENOENT. */
int async_pop(struct sn_context *ctx, struct ibv_async_event *out)
{
    pthread_mutex_lock(&ctx->ev_lock);
    struct sn_async *e = ctx->ev_head;
    if (e) {
        ctx->ev_head = e->next;
        if (!ctx->ev_head)
            ctx->ev_tail = NULL;
    }
    pthread_mutex_unlock(&ctx->ev_lock);
    if (!e)
        return ENOENT;
    *out = e->ev;
    free(e);
    return 0;
}
