/* cq.c: completion queues and completion channels.
 *
 * A CQ is a ring of completions, one line each, numbered as a ConnectX
 * numbers its CQEs: the NIC threads add at the tail under the CQ's lock and
 * stamp each entry with its number last; a poll takes the entries whose
 * stamps follow its head under a lock of its own, and tells the adders how
 * far it got through one word they read only when the ring looks full.
 * When it is full the completion is lost and the CQ reports
 * IBV_EVENT_CQ_ERR once (overrun), as hardware does.  A completion channel
 * is a pipe: an armed CQ writes its own pointer into it on the next
 * (solicited) completion, ibv_get_cq_event reads it. */
#include "softnic.h"
#include "softnic_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct sn_channel {
    struct ibv_comp_channel ch;
    int wfd;
};

struct ibv_comp_channel *cq_channel_create(struct ibv_context *c)
{
    struct sn_channel *chan = calloc(1, sizeof(*chan));
    int fds[2];
    if (!chan) {
        errno = ENOMEM;
        return NULL;
    }
    if (pipe2(fds, O_CLOEXEC)) {
        int err = errno;
        free(chan);
        errno = err;
        return NULL;
    }
    fcntl(fds[1], F_SETFL, O_NONBLOCK);
    chan->ch.context = c;
    chan->ch.fd = fds[0];
    chan->wfd = fds[1];
    chan->ch.refcnt = 0;
    return &chan->ch;
}

int cq_channel_destroy(struct ibv_comp_channel *ch)
{
    struct sn_channel *chan = (struct sn_channel *)ch;
    pthread_mutex_lock(&ch->context->mutex);
    int busy = ch->refcnt;
    pthread_mutex_unlock(&ch->context->mutex);
    if (busy)
        return EBUSY;
    close(ch->fd);
    close(chan->wfd);
    free(chan);
    return 0;
}

int cq_get_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context)
{
    struct ibv_cq *p = NULL;
    ssize_t n;
    do
        n = read(ch->fd, &p, sizeof(p));
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof(p))
        return -1;
    *cq = p;
    *cq_context = p->cq_context;
    return 0;
}

void cq_ack_events(struct ibv_cq *cq, unsigned int n)
{
    pthread_mutex_lock(&cq->mutex);
    cq->comp_events_completed += n;
    pthread_cond_broadcast(&cq->cond);
    pthread_mutex_unlock(&cq->mutex);
}

static struct sn_cqe *ring_alloc(int cqe)
{
    void *p = NULL;
    size_t bytes = (size_t)cqe * sizeof(struct sn_cqe);
    if (posix_memalign(&p, 64, bytes))
        return NULL;
    memset(p, 0, bytes);
    return p;
}

struct ibv_cq *cq_create(struct ibv_context *c, int cqe, void *cq_context,
                         struct ibv_comp_channel *channel, int comp_vector)
{
    if (cqe < 1 || cqe > SN_MAX_CQE || comp_vector < 0 || comp_vector >= c->num_comp_vectors) {
        errno = EINVAL;
        return NULL;
    }
    struct sn_cq *cq = calloc(1, sizeof(*cq));
    if (!cq || !(cq->ring = ring_alloc(cqe))) {
        free(cq);
        errno = ENOMEM;
        return NULL;
    }
    pthread_mutex_init(&cq->lock, NULL);
    pthread_mutex_init(&cq->poll_lock, NULL);
    pthread_mutex_init(&cq->push_lock, NULL);
    cq->cap = cqe;
    cq->ibcq.context = c;
    cq->ibcq.channel = channel;
    cq->ibcq.cq_context = cq_context;
    cq->ibcq.cqe = cqe;
    pthread_mutex_init(&cq->ibcq.mutex, NULL);
    pthread_cond_init(&cq->ibcq.cond, NULL);
    if (channel) {
        pthread_mutex_lock(&c->mutex);
        channel->refcnt++;
        pthread_mutex_unlock(&c->mutex);
    }
    atomic_fetch_add(&sn_live_cqs, 1);
    return &cq->ibcq;
}

/* Number of QPs/SRQs using a CQ: destroy refuses while it is not 0. */
static pthread_mutex_t users_lock = PTHREAD_MUTEX_INITIALIZER;

int cq_destroy(struct ibv_cq *ibcq)
{
    struct sn_cq *cq = (struct sn_cq *)ibcq;
    pthread_mutex_lock(&users_lock);
    int busy = cq->users;
    pthread_mutex_unlock(&users_lock);
    if (busy)
        return EBUSY;
    priv_cq_destroying(ibcq);   /* libmlx5 drops its shadow ring */
    if (ibcq->channel) {
        pthread_mutex_lock(&ibcq->context->mutex);
        ibcq->channel->refcnt--;
        pthread_mutex_unlock(&ibcq->context->mutex);
    }
    pthread_mutex_destroy(&cq->lock);
    pthread_mutex_destroy(&cq->poll_lock);
    pthread_mutex_destroy(&cq->push_lock);
    pthread_mutex_destroy(&ibcq->mutex);
    pthread_cond_destroy(&ibcq->cond);
    free(cq->ring);
    free(cq);
    atomic_fetch_sub(&sn_live_cqs, 1);
    return 0;
}

void cq_attach(struct ibv_cq *cq, int delta)
{
    pthread_mutex_lock(&users_lock);
    ((struct sn_cq *)cq)->users += delta;
    pthread_mutex_unlock(&users_lock);
}

int cq_resize(struct ibv_cq *ibcq, int cqe)
{
    struct sn_cq *cq = (struct sn_cq *)ibcq;
    if (cqe < 1 || cqe > SN_MAX_CQE)
        return EINVAL;
    pthread_mutex_lock(&cq->poll_lock);
    pthread_mutex_lock(&cq->lock);
    int rc = 0;
    uint64_t pending = cq->tail - cq->head;
    struct sn_cqe *ring = (uint64_t)cqe < pending ? NULL : ring_alloc(cqe);
    if (!ring) {
        rc = (uint64_t)cqe < pending ? EINVAL : ENOMEM;
    } else {
        /* the pending completions keep their numbers, at their new places */
        for (uint64_t n = cq->head; n != cq->tail; n++) {
            struct sn_cqe *to = &ring[n % (uint64_t)cqe];
            to->wc = cq->ring[n % (uint64_t)cq->cap].wc;
            atomic_store_explicit(&to->seq, n + 1, memory_order_relaxed);
        }
        free(cq->ring);
        cq->ring = ring;
        cq->cap = cqe;
        ibcq->cqe = cqe;
    }
    pthread_mutex_unlock(&cq->lock);
    pthread_mutex_unlock(&cq->poll_lock);
    return rc;
}

_Static_assert(offsetof(struct sn_cq, poll_lock) >= offsetof(struct sn_cq, overrun) + 64 &&
                   offsetof(struct sn_cq, users) >= offsetof(struct sn_cq, cons) + sizeof(uint64_t) + 64,
               "a poll's fields share no line with the ones the NIC threads write");

int cq_poll(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
    struct sn_cq *cq = (struct sn_cq *)ibcq;
    if (n < 0)
        return -1;
    /* completions of writes same-host peers pushed (push.c) */
    if (atomic_load_explicit(&cq->push_qps, memory_order_relaxed))
        push_cq_collect(cq);
    /* completions of sends whose responder left a note, no ACK (ack_note.c) */
    if (atomic_load_explicit(&cq->note_nqps, memory_order_relaxed))
        ack_note_poll(cq);
    pthread_mutex_lock(&cq->poll_lock);
    uint64_t head = cq->head, cap = (uint64_t)cq->cap;
    int got = 0;
    while (got < n) {
        struct sn_cqe *e = &cq->ring[head % cap];
        if (atomic_load_explicit(&e->seq, memory_order_acquire) != head + 1)
            break;
        wc[got++] = e->wc;
        head++;
    }
    if (got) {
        cq->head = head;
        /* after the copies: an adder that reads it may write those entries */
        atomic_store_explicit(&cq->cons, head, memory_order_release);
    }
    pthread_mutex_unlock(&cq->poll_lock);
    return got;
}

int cq_req_notify(struct ibv_cq *ibcq, int solicited_only)
{
    struct sn_cq *cq = (struct sn_cq *)ibcq;
    /* as on mlx5, a CQ without a channel may be armed: nobody is told */
    pthread_mutex_lock(&cq->lock);
    cq->armed = solicited_only ? 2 : 1;
    pthread_mutex_unlock(&cq->lock);
    return 0;
}

int cq_hook_set(struct ibv_cq *ibcq, sn_cq_hook hook, void *arg)
{
    struct sn_cq *cq = (struct sn_cq *)ibcq;
    pthread_mutex_lock(&cq->lock);
    cq->hook = hook;
    cq->hook_arg = arg;
    pthread_mutex_unlock(&cq->lock);
    if (hook)
        ack_note_cq_hooked(cq);   /* its completions go elsewhere: no poll here makes them */
    return 0;
}

void cq_push(struct sn_cq *cq, const struct ibv_wc *wc, bool solicited)
{
    pthread_mutex_lock(&cq->lock);
    if (cq->hook) {
        sn_cq_hook hook = cq->hook;
        void *arg = cq->hook_arg;
        pthread_mutex_unlock(&cq->lock);
        hook(arg, wc);
        return;
    }
    uint64_t cap = (uint64_t)cq->cap;
    if (cq->tail - cq->cons_seen >= cap)
        cq->cons_seen = atomic_load_explicit(&cq->cons, memory_order_acquire);
    if (cq->tail - cq->cons_seen >= cap) {
        bool first = !cq->overrun;
        cq->overrun = true;
        pthread_mutex_unlock(&cq->lock);
        if (first) {
            struct ibv_async_event ev;
            memset(&ev, 0, sizeof(ev));
            ev.element.cq = &cq->ibcq;
            ev.event_type = IBV_EVENT_CQ_ERR;
            async_post(sn_ctx(cq->ibcq.context), &ev);
        }
        return;
    }
    struct sn_cqe *e = &cq->ring[cq->tail % cap];
    e->wc = *wc;
    cq->tail++;
    atomic_store_explicit(&e->seq, cq->tail, memory_order_release);
    bool fire = cq->ibcq.channel &&
                (cq->armed == 1 ||
                 (cq->armed == 2 && (solicited || wc->status != IBV_WC_SUCCESS)));
    if (fire) {
        cq->armed = 0;
        struct sn_channel *chan = (struct sn_channel *)cq->ibcq.channel;
        struct ibv_cq *p = &cq->ibcq;
        if (write(chan->wfd, &p, sizeof(p)) != (ssize_t)sizeof(p))
            SN_LOG("cq: completion channel full, event lost");
    }
    pthread_mutex_unlock(&cq->lock);
}
