/* plugin/ib/errors.c: completion errors and async events -> comm errors. */
#include "errors.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "ibvwrap.h"
#include "log.h"
#include "oob.h"

#define ERR_MAX_CTX 32
#define ERR_MAX_PORTS 8
#define ERR_FATAL_RING 64
#define ERR_CQ_RING 64
#define ERR_ASYNC_PERIOD_NS 20000000ull
#define PEER_CHECK_PERIOD_NS 50000000ull

struct async_state {
    struct ibv_context *ctx;
    pthread_mutex_t mu;
    uint64_t port_err[ERR_MAX_PORTS + 1]; /* PORT_ERR events seen per port number */
    uint64_t port_up[ERR_MAX_PORTS + 1];  /* PORT_ACTIVE events seen per port number */
    uint32_t fatal_qpn[ERR_FATAL_RING];   /* QPs that got a fatal event, newest last */
    int fatal_event[ERR_FATAL_RING];
    uint64_t nfatal;
    uint64_t ndev_fatal;                  /* IBV_EVENT_DEVICE_FATAL events */
    /* CQs that got IBV_EVENT_CQ_ERR (overrun: completions were lost),
     * newest last: compared by address only, never dereferenced (a CQ may
     * be gone by the time a comm looks) */
    const struct ibv_cq *cq_err[ERR_CQ_RING];
    uint64_t ncq_err;
};

static pthread_mutex_t errors_mu = PTHREAD_MUTEX_INITIALIZER;
static struct async_state errors_ctx[ERR_MAX_CTX];
static int errors_nctx;

const char *errors_wc_status_name(enum ibv_wc_status s)
{
    static const char *const names[] = {
        [IBV_WC_SUCCESS] = "IBV_WC_SUCCESS",
        [IBV_WC_LOC_LEN_ERR] = "IBV_WC_LOC_LEN_ERR",
        [IBV_WC_LOC_QP_OP_ERR] = "IBV_WC_LOC_QP_OP_ERR",
        [IBV_WC_LOC_EEC_OP_ERR] = "IBV_WC_LOC_EEC_OP_ERR",
        [IBV_WC_LOC_PROT_ERR] = "IBV_WC_LOC_PROT_ERR",
        [IBV_WC_WR_FLUSH_ERR] = "IBV_WC_WR_FLUSH_ERR",
        [IBV_WC_MW_BIND_ERR] = "IBV_WC_MW_BIND_ERR",
        [IBV_WC_BAD_RESP_ERR] = "IBV_WC_BAD_RESP_ERR",
        [IBV_WC_LOC_ACCESS_ERR] = "IBV_WC_LOC_ACCESS_ERR",
        [IBV_WC_REM_INV_REQ_ERR] = "IBV_WC_REM_INV_REQ_ERR",
        [IBV_WC_REM_ACCESS_ERR] = "IBV_WC_REM_ACCESS_ERR",
        [IBV_WC_REM_OP_ERR] = "IBV_WC_REM_OP_ERR",
        [IBV_WC_RETRY_EXC_ERR] = "IBV_WC_RETRY_EXC_ERR",
        [IBV_WC_RNR_RETRY_EXC_ERR] = "IBV_WC_RNR_RETRY_EXC_ERR",
        [IBV_WC_LOC_RDD_VIOL_ERR] = "IBV_WC_LOC_RDD_VIOL_ERR",
        [IBV_WC_REM_INV_RD_REQ_ERR] = "IBV_WC_REM_INV_RD_REQ_ERR",
        [IBV_WC_REM_ABORT_ERR] = "IBV_WC_REM_ABORT_ERR",
        [IBV_WC_INV_EECN_ERR] = "IBV_WC_INV_EECN_ERR",
        [IBV_WC_INV_EEC_STATE_ERR] = "IBV_WC_INV_EEC_STATE_ERR",
        [IBV_WC_FATAL_ERR] = "IBV_WC_FATAL_ERR",
        [IBV_WC_RESP_TIMEOUT_ERR] = "IBV_WC_RESP_TIMEOUT_ERR",
        [IBV_WC_GENERAL_ERR] = "IBV_WC_GENERAL_ERR",
    };
    if ((unsigned)s < sizeof(names) / sizeof(names[0]) && names[s])
        return names[s];
    return "unknown completion status";
}

int errors_wc_result(enum ibv_wc_status s)
{
    switch (s) {
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_INV_RD_REQ_ERR:
    case IBV_WC_REM_ABORT_ERR:
    case IBV_WC_BAD_RESP_ERR:
    case IBV_WC_RESP_TIMEOUT_ERR:
        return ncclRemoteError;
    default:
        return ncclSystemError;
    }
}

static const char *wc_hint(enum ibv_wc_status s)
{
    switch (s) {
    case IBV_WC_RETRY_EXC_ERR: return "the peer or the link stopped answering (peer process gone, port down?)";
    case IBV_WC_REM_ACCESS_ERR: return "the peer refused the remote key or address";
    case IBV_WC_WR_FLUSH_ERR: return "the QP was already in error";
    case IBV_WC_LOC_PROT_ERR: return "a local buffer is outside its registration";
    default: return "see the status";
    }
}

void errors_report_wc(struct comm *c, int qpi, const struct ibv_wc *wc)
{
    if (c->error)
        return; /* the first failure was reported; the rest are its flushes */
    const struct qp_conn *q = &c->qps[qpi];
    WARN("NET/railnet: device %s port %u QP 0x%x: %s work request failed: %s (%d, vendor error 0x%x): %s",
         c->dev_name, q->port ? q->port->port_num : 0, wc->qp_num,
         c->kind == COMM_SEND ? "send-side" : "receive-side", errors_wc_status_name(wc->status),
         (int)wc->status, wc->vendor_err, wc_hint(wc->status));
    comm_fail(c, (ncclResult_t)errors_wc_result(wc->status));
}

/* The state of an attached context, with or without the list's lock
 * (entries are only appended, the count last). */
static struct async_state *lookup(struct ibv_context *ctx)
{
    int n = __atomic_load_n(&errors_nctx, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (errors_ctx[i].ctx == ctx)
            return &errors_ctx[i];
    return NULL;
}

void errors_attach(struct ibv_context *ctx)
{
    pthread_mutex_lock(&errors_mu);
    if (!lookup(ctx) && errors_nctx < ERR_MAX_CTX) {
        struct async_state *s = &errors_ctx[errors_nctx];
        memset(s, 0, sizeof(*s));
        pthread_mutex_init(&s->mu, NULL);
        s->ctx = ctx;
        /* events are drained by whoever progresses a comm: never block there */
        int fl = fcntl(ctx->async_fd, F_GETFL);
        if (fl >= 0)
            (void)fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
        __atomic_store_n(&errors_nctx, errors_nctx + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&errors_mu);
}

static void drain(struct async_state *s)
{
    struct ibv_async_event ev;
    while (RN_IBV(get_async_event)(s->ctx, &ev) == 0) {
        switch (ev.event_type) {
        case IBV_EVENT_PORT_ERR:
            if (ev.element.port_num <= ERR_MAX_PORTS)
                s->port_err[ev.element.port_num]++;
            break;
        case IBV_EVENT_PORT_ACTIVE:
            if (ev.element.port_num <= ERR_MAX_PORTS)
                s->port_up[ev.element.port_num]++;
            break;
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR: {
            uint64_t k = s->nfatal++ % ERR_FATAL_RING;
            s->fatal_qpn[k] = ev.element.qp ? ev.element.qp->qp_num : 0;
            s->fatal_event[k] = ev.event_type;
            break;
        }
        case IBV_EVENT_DEVICE_FATAL:
            /* named as such, and every port is down with it */
            s->ndev_fatal++;
            for (int p = 0; p <= ERR_MAX_PORTS; p++)
                s->port_err[p]++;
            break;
        case IBV_EVENT_CQ_ERR:
            s->cq_err[s->ncq_err++ % ERR_CQ_RING] = ev.element.cq;
            break;
        default:
            break;
        }
        RN_IBV(ack_async_event)(&ev);
    }
}

const char *errors_event_name(int e)
{
    switch (e) {
    case IBV_EVENT_QP_FATAL: return "IBV_EVENT_QP_FATAL";
    case IBV_EVENT_QP_REQ_ERR: return "IBV_EVENT_QP_REQ_ERR";
    case IBV_EVENT_QP_ACCESS_ERR: return "IBV_EVENT_QP_ACCESS_ERR";
    default: return "async event";
    }
}


/* Whether cq got IBV_EVENT_CQ_ERR among the events recorded since *seen;
 * *seen moves to the newest. Under s->mu. */
static int cq_overran(struct async_state *s, const struct ibv_cq *cq, uint64_t *seen)
{
    int hit = 0;
    for (uint64_t k = *seen; k < s->ncq_err && !hit; k++)
        hit = s->ncq_err - k <= ERR_CQ_RING && cq && s->cq_err[k % ERR_CQ_RING] == cq;
    *seen = s->ncq_err;
    return hit;
}

void errors_watch_start(struct errors_watch *w, const struct qp_port *ports, int nports)
{
    memset(w, 0, sizeof(*w));
    if (nports < 1 || !ports[0].ctx)
        return;
    w->ctx = ports[0].ctx;
    w->nports = nports < HS_MAX_PORTS ? nports : HS_MAX_PORTS;
    for (int p = 0; p < w->nports; p++)
        w->port_num[p] = ports[p].port_num;
    errors_attach(w->ctx);
    struct async_state *s = lookup(w->ctx);
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    drain(s); /* what happened before the comm existed is not its business */
    for (int p = 0; p < w->nports; p++) {
        unsigned pn = w->port_num[p];
        w->port_err_seen[p] = pn <= ERR_MAX_PORTS ? s->port_err[pn] : 0;
        w->port_up_seen[p] = pn <= ERR_MAX_PORTS ? s->port_up[pn] : 0;
    }
    w->fatal_seen = s->nfatal;
    w->cq_err_seen = s->ncq_err;
    w->dev_fatal_seen = s->ndev_fatal;
    pthread_mutex_unlock(&s->mu);
}

void errors_watch_poll(struct errors_watch *w, const struct ibv_cq *cq,
                       int (*owns_qp)(const void *owner, uint32_t qpn), const void *owner, struct errors_news *n)
{
    memset(n, 0, sizeof(*n));
    struct async_state *s = w->ctx ? lookup(w->ctx) : NULL;
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    drain(s);
    n->cq_overrun = cq_overran(s, cq, &w->cq_err_seen);
    n->device_fatal = s->ndev_fatal != w->dev_fatal_seen;
    w->dev_fatal_seen = s->ndev_fatal;
    for (int p = 0; p < w->nports; p++) {
        unsigned pn = w->port_num[p];
        if (pn > ERR_MAX_PORTS)
            continue;
        if (s->port_err[pn] != w->port_err_seen[p])
            n->down |= 1u << p;
        if (s->port_up[pn] != w->port_up_seen[p])
            n->up |= 1u << p;
        w->port_err_seen[p] = s->port_err[pn];
        w->port_up_seen[p] = s->port_up[pn];
    }
    for (uint64_t k = w->fatal_seen; k < s->nfatal && !n->fatal_event; k++) {
        if (s->nfatal - k > ERR_FATAL_RING)
            continue; /* overwritten: more fatal events than the ring holds came meanwhile */
        uint32_t qpn = s->fatal_qpn[k % ERR_FATAL_RING];
        if (owns_qp && owns_qp(owner, qpn)) {
            n->fatal_event = s->fatal_event[k % ERR_FATAL_RING];
            n->fatal_qpn = qpn;
        }
    }
    w->fatal_seen = s->nfatal;
    pthread_mutex_unlock(&s->mu);
}

/* Index of c's QP numbered qpn, or -1. */
static int comm_qp_of(const struct comm *c, uint32_t qpn)
{
    for (int i = 0; i < c->nqps; i++)
        if (c->qps[i].qp && c->qps[i].qp->qp_num == qpn)
            return i;
    return -1;
}

static int comm_owns_qp(const void *owner, uint32_t qpn)
{
    return comm_qp_of(owner, qpn) >= 0;
}

void errors_check_async(struct comm *c, uint64_t now)
{
    if (c->error || !c->ports[0].ctx)
        return;
    if (now - c->last_async_ns < ERR_ASYNC_PERIOD_NS)
        return;
    c->last_async_ns = now;
    struct errors_news n;
    errors_watch_poll(&c->async, c->cq, comm_owns_qp, c, &n);
    const char *kind = c->kind == COMM_SEND ? "send" : "receive";
    if (n.cq_overrun) {
        WARN("NET/railnet: device %s: IBV_EVENT_CQ_ERR on the %s comm's CQ of %d entries: the CQ overran and "
             "completions were lost; failing the %s connection (%d QPs), whose requests could never complete "
             "(the CQ is sized for all the work a comm can have in flight: please report this as a railnet bug)",
             c->dev_name, kind, c->cq->cqe, kind, c->nqps);
        comm_fail(c, ncclSystemError);
        return;
    }
    if (n.device_fatal) {
        /* no port of the device is left to fail over to */
        WARN("NET/railnet: device %s: IBV_EVENT_DEVICE_FATAL (the device failed: its ports and QPs are gone); "
             "failing the %s connection (%d QPs)",
             c->dev_name, kind, c->nqps);
        comm_fail(c, ncclSystemError);
        return;
    }
    /* failover.c acts on port events when the comm has it (down first when
     * both came); an up alone is kept for it in case it attaches later */
    c->fo_ev_up |= n.up;
    if (c->fo) {
        c->fo_ev_down |= n.down;
    } else if (n.down) {
        WARN("NET/railnet: device %s port %u: IBV_EVENT_PORT_ERR (port went down); failing the %s "
             "connection (%d QPs)",
             c->dev_name, c->async.port_num[__builtin_ctz(n.down)], kind, c->nqps);
        comm_fail(c, ncclSystemError);
        return;
    }
    if (n.fatal_event) {
        int i = comm_qp_of(c, n.fatal_qpn);
        WARN("NET/railnet: device %s port %u QP 0x%x: %s", c->dev_name, i >= 0 && c->qps[i].port ? c->qps[i].port->port_num : 0,
             n.fatal_qpn, errors_event_name(n.fatal_event));
        comm_fail(c, ncclSystemError);
    }
}

/* Snapshot of the event counters when a comm starts, so that only later
 * events fail it. */
void errors_snapshot(struct comm *c)
{
    errors_watch_start(&c->async, c->ports, c->nports);
}

/* What each receive still pending had of its message when its peer went
 * away: a message its sender never wrote (nothing counted) from one cut
 * short (some chunks counted). */
static void log_pending_recvs(const struct comm *c)
{
    if (c->kind != COMM_RECV)
        return;
    const struct recv_comm *rc = (const struct recv_comm *)c;
    for (unsigned s = 0; s < COMM_SLOTS; s++) {
        const struct request *r = rc->slot_req[s];
        if (!r)
            continue;
        char seen[COMM_MAX_RECVS * 8 + 1] = "";   /* ",0xffff" each */
        size_t at = 0;
        for (int k = 0; k < r->n && k < COMM_MAX_RECVS && at < sizeof(seen); k++)
            at += (size_t)snprintf(seen + at, sizeof(seen) - at, "%s0x%x", k ? "," : "", (unsigned)r->seen[k]);
        INFO(NCCL_NET, "NET/railnet: device %s: receive %llu (slot %u, %d buffer(s)) left pending; chunks counted "
                       "per buffer: %s",
             c->dev_name, (unsigned long long)r->seq, s, r->n, seen);
    }
}

void errors_note_peer_gone(struct comm *c, uint64_t now)
{
    if (!c->peer_gone_ns)
        c->peer_gone_ns = now;
}

ncclResult_t errors_check_peer(struct comm *c, int have_pending, uint64_t now)
{
    if (c->error || !have_pending || c->fd < 0)
        return c->error;
    if (now - c->last_peer_check_ns >= PEER_CHECK_PERIOD_NS) {
        c->last_peer_check_ns = now;
        if (!c->peer_gone_ns && !oob_peer_alive(c->fd))
            errors_note_peer_gone(c, now);
        errors_check_async(c, now);
    }
    /* completions may trail the peer's exit by a little: wait before
     * failing.  The failover channel notes the exit with a clock read later
     * than now (p2p_progress reads the clock before that socket): such a
     * grace has not begun, so it has not run out (now - peer_gone_ns would
     * wrap: pending receives then failed as the sender closed, before their
     * last completions could come) */
    if (!c->error && c->peer_gone_ns && now > c->peer_gone_ns &&
        now - c->peer_gone_ns > ERRORS_PEER_GONE_GRACE_NS) {
        WARN("NET/railnet: device %s port %u QP 0x%x: the peer closed its connection (process exited or "
             "aborted) with %d request(s) pending on this %s comm",
             c->dev_name, c->qps[0].port->port_num, c->qps[0].qp ? c->qps[0].qp->qp_num : 0, c->inflight,
             c->kind == COMM_SEND ? "send" : "receive");
        log_pending_recvs(c);
        comm_fail(c, ncclRemoteError);
    }
    return c->error;
}
