/* cm_id.c: event channels, rdma_cm_ids and their events, options,
 * rdma_event_str and rdma_get_devices (cm.h has the model).
 *
 * A channel is a semaphore eventfd counting queued events: applications poll
 * it, and a read that finds none on a non-blocking fd says EAGAIN as
 * librdmacm's does.  An event holds a
 * reference on its id until acknowledged, so destroying an id with events in
 * flight never leaves an event pointing at freed memory. */
#include "cm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

struct cm_global cm = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .cond = PTHREAD_COND_INITIALIZER,
    .wake = { -1, -1 },
};

uint64_t cm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ devices */
int cm_devices_open_locked(void)
{
    if (cm.devs)
        return 0;
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list)
        return errno ? errno : ENODEV;
    cm.devs = calloc((size_t)n + 1, sizeof(*cm.devs));
    cm.pds = calloc((size_t)n + 1, sizeof(*cm.pds));
    if (!cm.devs || !cm.pds) {
        free(cm.devs);
        free(cm.pds);
        cm.devs = NULL;
        cm.pds = NULL;
        ibv_free_device_list(list);
        return ENOMEM;
    }
    cm.ndevs = 0;
    for (int i = 0; i < n; i++) {
        struct ibv_context *ctx = ibv_open_device(list[i]);
        if (ctx)
            cm.devs[cm.ndevs++] = ctx;
    }
    ibv_free_device_list(list);
    return 0;
}

struct ibv_pd *cm_default_pd_locked(struct ibv_context *verbs)
{
    for (int i = 0; i < cm.ndevs; i++)
        if (cm.devs[i] == verbs) {
            if (!cm.pds[i])
                cm.pds[i] = ibv_alloc_pd(verbs);
            return cm.pds[i];
        }
    errno = ENODEV;
    return NULL;
}

struct ibv_context **rdma_get_devices(int *num_devices)
{
    pthread_mutex_lock(&cm.lock);
    int err = cm_devices_open_locked();
    struct ibv_context **out = NULL;
    if (!err) {
        out = calloc((size_t)cm.ndevs + 1, sizeof(*out));
        if (out)
            memcpy(out, cm.devs, (size_t)cm.ndevs * sizeof(*out));
        else
            err = ENOMEM;
    }
    if (num_devices)
        *num_devices = out ? cm.ndevs : 0;
    pthread_mutex_unlock(&cm.lock);
    if (err)
        errno = err;
    return out;
}

void rdma_free_devices(struct ibv_context **list)
{
    free(list);   /* the contexts stay open for the process, as librdmacm's */
}

/* ----------------------------------------------------------- channels */
struct cm_channel *cm_channel_new(bool sync)
{
    struct cm_channel *ch = calloc(1, sizeof(*ch));
    if (!ch)
        return NULL;
    /* a semaphore eventfd: each read takes one event, poll says readable
     * while any is queued; and closing it does not wake a thread blocked
     * in a read of it, as closing the kernel's rdma_cm fd does not (rping
     * destroys its channel while its CM thread still reads it; an EOF
     * there would end the process with an error) */
    ch->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
    if (ch->ch.fd < 0) {
        free(ch);
        return NULL;
    }
    ch->sync = sync;
    return ch;
}

void cm_channel_free(struct cm_channel *ch)
{
    if (!ch)
        return;
    close(ch->ch.fd);
    free(ch);
}

/* Takes back the counts of n queued events that died with their id, so
 * that poll on the channel says readable only while an event is there (a
 * program that polls and then reads would otherwise block in a read with
 * nothing to read, as it never does on the kernel's channel). Without
 * blocking: a count another thread's read took already is left to it (its
 * cm_channel_take finds no event and reads again). */
static void channel_unsignal(struct cm_channel *ch, int n)
{
    int flags = fcntl(ch->ch.fd, F_GETFL);
    if (n <= 0 || flags < 0 || fcntl(ch->ch.fd, F_SETFL, flags | O_NONBLOCK) < 0)
        return;
    uint64_t one;
    for (int i = 0; i < n && read(ch->ch.fd, &one, sizeof(one)) == sizeof(one); i++)
        ;
    fcntl(ch->ch.fd, F_SETFL, flags);
}

static void channel_signal(struct cm_channel *ch)
{
    uint64_t one = 1;
    if (write(ch->ch.fd, &one, sizeof(one)) != sizeof(one)) {
        /* the counter is at its maximum: readers find the event with a
         * later one */
    }
}

/* Frees one event and drops the references it held (cm.lock held). */
static void event_free_locked(struct cm_event *e)
{
    if (e->listen)
        cm_id_put_locked(e->listen);
    cm_id_put_locked(e->owner);
    free(e);
}

/* Frees a list of events that never reached the application (cm.lock held).
 * A CONNECT_REQUEST among them is a child nobody can ever answer: it goes
 * too, with a REJ to its peer, or its socket stays open for good and the
 * peer waits out its response timeout for an answer that never comes. */
static void events_drop_locked(struct cm_event *e)
{
    while (e) {
        struct cm_event *n = e->next;
        if (e->listen)
            cm_conn_req_unclaimed_locked(e->owner);
        event_free_locked(e);
        e = n;
    }
}

struct rdma_event_channel *rdma_create_event_channel(void)
{
    struct cm_channel *ch = cm_channel_new(false);
    if (!ch) {
        errno = errno ? errno : ENOMEM;
        return NULL;
    }
    return &ch->ch;
}

void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
    if (!channel)
        return;
    struct cm_channel *ch = (struct cm_channel *)channel;
    pthread_mutex_lock(&cm.lock);
    /* ids still on it (an application's bug, or a listener's child nobody
     * took yet) report nowhere from now on */
    for (struct cm_id *c = cm.ids; c; c = c->next)
        if (c->chan == ch)
            c->chan = NULL;
    /* events never fetched die with the channel; their ids' references go */
    struct cm_event *e = ch->head;
    ch->head = ch->tail = NULL;
    events_drop_locked(e);
    pthread_mutex_unlock(&cm.lock);
    cm_channel_free(ch);
    /* the engine holds a reference on every id while it polls: a child
     * dropped above is freed when it lets go */
    cm_engine_wake();
}

bool cm_post_locked(struct cm_id *c, enum rdma_cm_event_type type, int status,
                    const struct cm_peer *conn, const void *pdata, size_t pdata_len,
                    size_t pad_to, struct cm_id *listen)
{
    struct cm_channel *ch = listen ? listen->chan : c->chan;
    if (c->destroyed || !ch)
        return false;
    struct cm_event *e = calloc(1, sizeof(*e));
    if (!e)
        return false;
    e->ev.id = &c->id;
    e->ev.event = type;
    e->ev.status = status;
    if (listen) {
        e->ev.listen_id = &listen->id;
        e->listen = listen;
        listen->refs++;
    }
    if (pdata_len > CM_MAX_PDATA)
        pdata_len = CM_MAX_PDATA;
    if (pad_to > CM_MAX_PDATA)
        pad_to = CM_MAX_PDATA;
    if (pdata_len)
        memcpy(e->pdata, pdata, pdata_len);
    if (conn) {
        struct rdma_conn_param *p = &e->ev.param.conn;
        /* the peer's resources seen from this side, as the kernel reports */
        p->responder_resources = conn->initiator_depth;
        p->initiator_depth = conn->responder_resources;
        p->retry_count = conn->retry_count;
        p->rnr_retry_count = conn->rnr_retry_count;
        p->srq = conn->srq;
        p->qp_num = conn->qpn;
    }
    if (pad_to) {
        e->ev.param.conn.private_data = e->pdata;
        e->ev.param.conn.private_data_len = (uint8_t)pad_to;
    }
    e->owner = c;
    c->refs++;
    /* a CONNECT_REQUEST is the listener's to read, on its channel */
    if (ch->tail)
        ch->tail->next = e;
    else
        ch->head = e;
    ch->tail = e;
    channel_signal(ch);
    pthread_cond_broadcast(&cm.cond);
    return true;
}

int cm_channel_take(struct cm_channel *ch, struct cm_event **out)
{
    for (;;) {
        uint64_t one;
        ssize_t n = read(ch->ch.fd, &one, sizeof(one));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (n != sizeof(one))
            return EIO;
        pthread_mutex_lock(&cm.lock);
        struct cm_event *e = ch->head;
        if (e) {
            ch->head = e->next;
            if (!ch->head)
                ch->tail = NULL;
            e->next = NULL;
        }
        pthread_mutex_unlock(&cm.lock);
        if (e) {
            *out = e;
            return 0;
        }
        /* the count of an event dropped with its destroyed id: next */
    }
}

int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
    if (!channel || !event) {
        errno = EINVAL;
        return -1;
    }
    struct cm_event *e;
    int err = cm_channel_take((struct cm_channel *)channel, &e);
    if (err) {
        errno = err;
        return -1;
    }
    *event = &e->ev;
    return 0;
}

int rdma_ack_cm_event(struct rdma_cm_event *event)
{
    if (!event) {
        errno = EINVAL;
        return -1;
    }
    struct cm_event *e = (struct cm_event *)event;
    pthread_mutex_lock(&cm.lock);
    if (e->owner->id.event == event)
        e->owner->id.event = NULL;
    event_free_locked(e);
    pthread_mutex_unlock(&cm.lock);
    return 0;
}

/* ---------------------------------------------------------------- ids */
struct cm_id *cm_id_new_locked(struct cm_channel *chan, void *context,
                               enum rdma_port_space ps, enum ibv_qp_type qpt)
{
    struct cm_id *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->chan = chan;
    c->id.channel = &chan->ch;
    c->id.context = context;
    c->id.ps = ps;
    c->id.qp_type = qpt;
    c->refs = 1;
    c->sock = -1;
    c->port_hold = -1;
    c->state = CM_IDLE;
    c->psn = (uint32_t)(random() & 0xffffff);
    c->next = cm.ids;
    cm.ids = c;
    return c;
}

static void cm_id_unlink_locked(struct cm_id *c)
{
    for (struct cm_id **pp = &cm.ids; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            return;
        }
}

void cm_id_put_locked(struct cm_id *c)
{
    if (--c->refs > 0)
        return;
    cm_id_unlink_locked(c);
    if (c->chan && c->chan->sync)
        cm_channel_free(c->chan);
    free(c->ep_attr);
    free(c);
}

int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
                   void *context, enum rdma_port_space ps)
{
    enum ibv_qp_type qpt;
    switch (ps) {
    case RDMA_PS_TCP: case RDMA_PS_IB: qpt = IBV_QPT_RC; break;
    case RDMA_PS_UDP: case RDMA_PS_IPOIB: qpt = IBV_QPT_UD; break;
    default: errno = EINVAL; return -1;
    }
    if (!id) {
        errno = EINVAL;
        return -1;
    }
    struct cm_channel *ch = channel ? (struct cm_channel *)channel : cm_channel_new(true);
    if (!ch) {
        errno = ENOMEM;
        return -1;
    }
    pthread_mutex_lock(&cm.lock);
    int err = cm_engine_start_locked();
    struct cm_id *c = err ? NULL : cm_id_new_locked(ch, context, ps, qpt);
    pthread_mutex_unlock(&cm.lock);
    if (!c) {
        if (!channel)
            cm_channel_free(ch);
        errno = err ? err : ENOMEM;
        return -1;
    }
    *id = &c->id;
    return 0;
}

int rdma_destroy_id(struct rdma_cm_id *id)
{
    if (!id) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock(&cm.lock);
    cm_id_destroy_locked(cm_of(id));
    pthread_mutex_unlock(&cm.lock);
    cm_engine_wake();
    return 0;
}

void cm_id_destroy_locked(struct cm_id *c)
{
    struct rdma_cm_id *id = &c->id;
    c->destroyed = true;
    /* a connected peer hears of it as of a DREQ (EOF), a connecting one as
     * of a consumer REJ (cm_conn.c reads both from the closed socket) */
    cm_conn_close_locked(c);
    /* its queued events die now; a private channel's all of them, since
     * nobody will read it any more */
    struct cm_channel *ch = c->chan;
    struct cm_event *dead = NULL;
    struct cm_event **pp = ch ? &ch->head : &dead;
    if (ch)
        ch->tail = NULL;
    int queued_dead = 0;
    while (ch && *pp) {
        struct cm_event *e = *pp;
        if (ch->sync || e->owner == c) {
            *pp = e->next;
            e->next = dead;
            dead = e;
            queued_dead++;
        } else {
            ch->tail = e;
            pp = &e->next;
        }
    }
    if (ch && !ch->sync)
        channel_unsignal(ch, queued_dead);
    events_drop_locked(dead);
    if (id->event) {   /* a synchronous id's last event (rdma_get_request) */
        /* delivered: its child is the application's to answer */
        struct cm_event *held = (struct cm_event *)id->event;
        id->event = NULL;
        event_free_locked(held);
    }
    cm_id_put_locked(c);
}

int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
    if (!id) {
        errno = EINVAL;
        return -1;
    }
    struct cm_id *c = cm_of(id);
    struct cm_channel *nch = channel ? (struct cm_channel *)channel : cm_channel_new(true);
    if (!nch) {
        errno = ENOMEM;
        return -1;
    }
    pthread_mutex_lock(&cm.lock);
    struct cm_channel *old = c->chan;
    /* queued events move with the id, as the kernel's ucma_migrate_id does */
    struct cm_event *moved = NULL, **mt = &moved;
    struct cm_event **pp = old ? &old->head : &moved;
    if (old)
        old->tail = NULL;
    while (old && *pp) {
        struct cm_event *e = *pp;
        if (e->owner == c) {
            *pp = e->next;
            e->next = NULL;
            *mt = e;
            mt = &e->next;
        } else {
            old->tail = e;
            pp = &e->next;
        }
    }
    c->chan = nch;
    id->channel = &nch->ch;
    for (struct cm_event *e = moved; old && e; e = e->next) {
        /* the old channel's count of the events that left it */
        struct pollfd p = { .fd = old->ch.fd, .events = POLLIN };
        uint64_t one;
        if (poll(&p, 1, 0) == 1 && read(old->ch.fd, &one, sizeof(one)) != sizeof(one)) {
            /* a reader took it first: it will find its queue empty */
        }
    }
    while (moved) {
        struct cm_event *e = moved;
        moved = e->next;
        e->next = NULL;
        if (nch->tail)
            nch->tail->next = e;
        else
            nch->head = e;
        nch->tail = e;
        channel_signal(nch);
    }
    bool free_old = old && old->sync && old != nch;
    pthread_mutex_unlock(&cm.lock);
    if (free_old)
        cm_channel_free(old);
    return 0;
}

int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval, size_t optlen)
{
    if (!id || !optval) {
        errno = EINVAL;
        return -1;
    }
    struct cm_id *c = cm_of(id);
    int err = 0;
    pthread_mutex_lock(&cm.lock);
    if (level == RDMA_OPTION_ID) {
        switch (optname) {
        case RDMA_OPTION_ID_TOS:
            if (optlen != sizeof(uint8_t)) err = EINVAL;
            else c->tos = *(uint8_t *)optval;
            break;
        case RDMA_OPTION_ID_REUSEADDR:
            if (optlen != sizeof(int)) err = EINVAL;
            else if (c->state != CM_IDLE) err = EINVAL;   /* kernel: before bind only */
            else c->reuseaddr = *(int *)optval != 0;
            break;
        case RDMA_OPTION_ID_AFONLY:
            if (optlen != sizeof(int)) err = EINVAL;   /* IPv4 only here: nothing to do */
            break;
        case RDMA_OPTION_ID_ACK_TIMEOUT:
            if (optlen != sizeof(uint8_t)) err = EINVAL;
            else {
                c->ack_timeout = *(uint8_t *)optval > 31 ? 31 : *(uint8_t *)optval;
                c->ack_timeout_set = true;
            }
            break;
        default:
            err = ENOSYS;
        }
    } else if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH) {
        /* RoCE has no subnet administrator to take path records from */
        err = EINVAL;
    } else {
        err = ENOSYS;
    }
    pthread_mutex_unlock(&cm.lock);
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

__be16 rdma_get_src_port(struct rdma_cm_id *id)
{
    return id->route.addr.src_addr.sa_family == AF_INET ? id->route.addr.src_sin.sin_port : 0;
}

__be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
    return id->route.addr.dst_addr.sa_family == AF_INET ? id->route.addr.dst_sin.sin_port : 0;
}

const char *rdma_event_str(enum rdma_cm_event_type event)
{
    switch (event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED: return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR: return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED: return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR: return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST: return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_CONNECT_RESPONSE: return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case RDMA_CM_EVENT_CONNECT_ERROR: return "RDMA_CM_EVENT_CONNECT_ERROR";
    case RDMA_CM_EVENT_UNREACHABLE: return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED: return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED: return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED: return "RDMA_CM_EVENT_DISCONNECTED";
    case RDMA_CM_EVENT_DEVICE_REMOVAL: return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case RDMA_CM_EVENT_MULTICAST_JOIN: return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR: return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case RDMA_CM_EVENT_ADDR_CHANGE: return "RDMA_CM_EVENT_ADDR_CHANGE";
    case RDMA_CM_EVENT_TIMEWAIT_EXIT: return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
    default: return "UNKNOWN EVENT";
    }
}
