/* plugin/gin/gin_errors.c: how a GIN collComm fails, and how that is seen.
 *
 * The first failure is sticky (gin_fail) and logged once: a failed
 * completion (its status mapped by plugin/ib's errors.c: retry exceeded and
 * remote errors are ncclRemoteError), an async event of its device since
 * it was created (drained by errors.c, as for p2p comms: a port its QPs use
 * went down, one of its QPs became fatal, its CQ overran), a peer whose
 * socket closed while requests to it are pending (after a grace period for
 * completions still in flight, well inside RAILNET_IB_TIMEOUT's retry
 * budget), a post that failed, a setup exchange stream out of step
 * (gin_fail_exchange, which also shuts the peer sockets down so that the
 * other ranks fail too). From then on iput/iputSignal/test/ginProgress
 * return it.
 *
 * The GDAKI type's context is gin_gdaki.c's (createContext, destroyContext
 * and queryLastError go there for a collComm of that type).
 * NCCL 2.28.9's proxy type makes its own device context and never calls
 * createContext or queryLastError; it sees errors through iput's and
 * iputSignal's results. createContext here gives a host-only context for
 * the proxy type (no device structure: devHandle->handle is NULL) whose
 * one use is queryLastError, for callers that drive the table themselves. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "errors.h"
#include "gin.h"
#include "gin_gdaki.h"
#include "log.h"
#include "oob.h"

#define PEER_CHECK_PERIOD_NS 50000000ull
#define ASYNC_CHECK_PERIOD_NS 20000000ull
#define PEER_GONE_GRACE_NS 2000000000ull
#define GIN_CTX_MAGIC 0x58434947u

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Failed communicators: a fixed table, since a process that loses more
 * than a few is ending anyway; past that, the oldest entry is reused. */
#define GIN_GROUPS 64
static uint64_t failed_groups[GIN_GROUPS];
static unsigned failed_next;
static pthread_mutex_t groups_mu = PTHREAD_MUTEX_INITIALIZER;

void gin_group_fail(uint64_t comm_id)
{
    if (!comm_id || gin_group_failed(comm_id))
        return;
    pthread_mutex_lock(&groups_mu);
    failed_groups[failed_next++ % GIN_GROUPS] = comm_id;
    pthread_mutex_unlock(&groups_mu);
}

int gin_group_failed(uint64_t comm_id)
{
    int found = 0;
    pthread_mutex_lock(&groups_mu);
    for (int i = 0; comm_id && i < GIN_GROUPS && !found; i++)
        found = failed_groups[i] == comm_id;
    pthread_mutex_unlock(&groups_mu);
    return found;
}

void gin_fail(struct gin_coll *c, ncclResult_t err)
{
    if (!c->error)
        __atomic_store_n(&c->error, err, __ATOMIC_RELEASE);
}

void gin_fail_exchange(struct gin_coll *c, ncclResult_t err)
{
    gin_fail(c, err);
    /* A peer in this exchange, or entering the next one, would otherwise
     * wait for this rank's message until its RAILNET_HANDSHAKE_TIMEOUT. With
     * the sockets shut down, its read on them ends at EOF after what was
     * already sent, and it fails that exchange (and tells its own peers the
     * same way). shutdown, not close: coll_free owns and closes the fds, and
     * the progress thread may be polling them. */
    int told = 0;
    for (int p = 0; p < c->nranks; p++)
        if (p != c->rank && c->peers[p].fd >= 0 && shutdown(c->peers[p].fd, SHUT_RDWR) == 0)
            told++;
    if (told)
        INFO(NCCL_NET, "NET/railnet/GIN: rank %d: setup streams out of step: shut down the sockets to %d peer(s), "
                       "whose exchanges now fail at once",
             c->rank, told);
}

ncclResult_t gin_proxy_only(struct gin_coll *c, const char *call)
{
    if (c->proxy_qps)
        return ncclSuccess;
    WARN("NET/railnet/GIN: rank %d: %s on a collComm of the GDAKI type, which has no proxy QPs (NCCL's device code "
         "posts on the QPs of its contexts): the host's puts, gets, flushes, tests and RMA contexts need a collComm "
         "of the proxy type (RAILNET_GIN=proxy) or of an RMA table",
         c->rank, call);
    return ncclInvalidUsage;
}

ncclResult_t gin_failed(struct gin_coll *c, const char *call)
{
    ncclResult_t failed = __atomic_load_n(&c->error, __ATOMIC_ACQUIRE);
    if (failed)
        WARN("NET/railnet/GIN: rank %d: %s on a failed collComm (error %d)", c->rank, call, failed);
    return failed;
}

void gin_report_wc(struct gin_coll *c, const struct ibv_wc *wc)
{
    if (c->error)
        return; /* the first failure was reported; the rest are its flushes */
    const char *what = GIN_WR_MARKER(wc->wr_id)        ? "completion marker (zero-byte RDMA write)"
                       : wc->opcode == IBV_WC_FETCH_ADD ? "signal (fetch-and-add)"
                       : wc->opcode == IBV_WC_RDMA_READ ? "get or flush (RDMA read)"
                                                        : "put (RDMA write)";
    WARN("NET/railnet/GIN: device %s, rank %d: %s towards rank %u failed on QP 0x%x: %s (%d, vendor error 0x%x)",
         c->dev_name, c->rank, what, (unsigned)GIN_WR_PEER(wc->wr_id), wc->qp_num, errors_wc_status_name(wc->status),
         (int)wc->status, wc->vendor_err);
    gin_fail(c, (ncclResult_t)errors_wc_result(wc->status));
}

void gin_check_peers(struct gin_coll *c)
{
    uint64_t now = now_ns();
    if (c->error || now - c->last_check_ns < PEER_CHECK_PERIOD_NS)
        return;
    c->last_check_ns = now;
    for (int p = 0; p < c->nranks; p++) {
        struct gin_peer *pe = &c->peers[p];
        if (pe->fd < 0)
            continue;
        if (!pe->gone_ns && !oob_peer_alive(pe->fd))
            pe->gone_ns = now;
        if (pe->gone_ns && now - pe->gone_ns > PEER_GONE_GRACE_NS && gin_peer_busy(c, p)) {
            WARN("NET/railnet/GIN: device %s, rank %d: rank %d closed its connection (process exited or aborted, "
                 "or its collComm failed: see its log) with puts to it pending",
                 c->dev_name, c->rank, p);
            gin_fail(c, ncclRemoteError);
            return;
        }
    }
}

/* The QP numbered qpn among c's (rank and index within the peer), or NULL. */
static const struct gin_qp *gin_qp_of(const struct gin_coll *c, uint32_t qpn, int *rank)
{
    for (int p = 0; p < c->nranks; p++)
        for (int i = 0; i < c->peers[p].nqps; i++) {
            const struct ibv_qp *q = c->peers[p].qps[i].conn.qp;
            if (q && q->qp_num == qpn) {
                *rank = p;
                return &c->peers[p].qps[i];
            }
        }
    return NULL;
}

static int gin_owns_qp(const void *owner, uint32_t qpn)
{
    int rank;
    return gin_qp_of(owner, qpn, &rank) != NULL;
}

void gin_check_async(struct gin_coll *c)
{
    uint64_t now = now_ns();
    if (c->error || now - c->last_async_ns < ASYNC_CHECK_PERIOD_NS)
        return;
    c->last_async_ns = now;
    struct errors_news n;
    errors_watch_poll(&c->async, c->cq, gin_owns_qp, c, &n);
    if (n.cq_overrun) {
        WARN("NET/railnet/GIN: device %s, rank %d: IBV_EVENT_CQ_ERR on the collComm's CQ of %d entries: the CQ "
             "overran and completions were lost; failing the GIN comm, whose %d pending request(s) could never "
             "complete (please report this as a railnet bug)",
             c->dev_name, c->rank, c->cq->cqe, gin_outstanding(c));
        gin_fail(c, ncclSystemError);
        return;
    }
    if (n.device_fatal) {
        WARN("NET/railnet/GIN: device %s, rank %d: IBV_EVENT_DEVICE_FATAL (the device failed: its ports and QPs "
             "are gone); failing the GIN comm (%d request(s) pending)",
             c->dev_name, c->rank, gin_outstanding(c));
        gin_fail(c, ncclSystemError);
        return;
    }
    if (n.down) {
        /* with proxy QPs, every peer has one on each port of the device */
        char on[64] = "its GDAKI contexts' QPs";
        if (c->proxy_qps)
            snprintf(on, sizeof(on), "%d QPs on that port, one per rank", c->nranks);
        WARN("NET/railnet/GIN: device %s port %u, rank %d: IBV_EVENT_PORT_ERR (port went down); failing the GIN "
             "comm (%s; %d request(s) pending) rather than waiting out the QP retry budget",
             c->dev_name, c->async.port_num[__builtin_ctz(n.down)], c->rank, on, gin_outstanding(c));
        gin_fail(c, ncclSystemError);
        return;
    }
    if (n.fatal_event) {
        int peer = -1;
        const struct gin_qp *q = gin_qp_of(c, n.fatal_qpn, &peer);
        WARN("NET/railnet/GIN: device %s port %u, rank %d: QP 0x%x towards rank %d: %s; failing the GIN comm "
             "(%d request(s) pending)",
             c->dev_name, q && q->conn.port ? q->conn.port->port_num : 0, c->rank, n.fatal_qpn, peer,
             errors_event_name(n.fatal_event), gin_outstanding(c));
        gin_fail(c, ncclSystemError);
    }
}

struct gin_ctx {
    uint32_t magic;
    struct gin_coll *coll;
    ncclNetDeviceHandle_v11_t dev;
};

ncclResult_t gin_create_context(void *coll_comm, int nsignals, int ncounters, int ncontexts, int backend, int depth,
                                void **gin_ctx, ncclNetDeviceHandle_v11_t **dev_handle)
{
    if (gin_ctx)
        *gin_ctx = NULL;
    struct gin_coll *c = gin_coll_of(coll_comm, "createContext");
    if (!c || !gin_ctx || !dev_handle)
        return ncclInvalidArgument;
    if (c->gdaki_type)
        return gin_gdaki_create_context(c, nsignals, ncounters, ncontexts, backend, depth, gin_ctx, dev_handle);
    struct gin_ctx *x = calloc(1, sizeof(*x));
    if (!x)
        return ncclSystemError;
    x->magic = GIN_CTX_MAGIC;
    x->coll = c;
    x->dev.netDeviceType = NCCL_NET_DEVICE_GIN_PROXY;
    x->dev.needsProxyProgress = 1;
    INFO(NCCL_NET, "NET/railnet/GIN: createContext on the proxy type: host-only context (NCCL's proxy builds the "
                   "device side itself)");
    *gin_ctx = x;
    *dev_handle = &x->dev;
    return ncclSuccess;
}

ncclResult_t gin_ctx_progress(void *gin_ctx)
{
    struct gin_ctx *x = gin_ctx;
    if (!x || gin_gdaki_is_ctx(gin_ctx) || x->magic != GIN_CTX_MAGIC) {
        WARN("NET/railnet/GIN: ginProgress: %p is not a live proxy-type context", gin_ctx);
        return ncclInvalidArgument;
    }
    return gin_progress(x->coll);
}

ncclResult_t gin_destroy_context(void *gin_ctx)
{
    struct gin_ctx *x = gin_ctx;
    if (!x)
        return ncclSuccess;
    if (gin_gdaki_is_ctx(gin_ctx))
        return gin_gdaki_destroy_context(gin_ctx);
    if (x->magic != GIN_CTX_MAGIC) {
        WARN("NET/railnet/GIN: destroyContext: %p is not a live GIN context", gin_ctx);
        return ncclInvalidArgument;
    }
    x->magic = 0;
    free(x);
    return ncclSuccess;
}

ncclResult_t gin_query_last_error(void *gin_ctx, bool *has_error)
{
    struct gin_ctx *x = gin_ctx;
    if (gin_gdaki_is_ctx(gin_ctx))
        return gin_gdaki_query_last_error(gin_ctx, has_error);
    if (!x || x->magic != GIN_CTX_MAGIC || !has_error) {
        WARN("NET/railnet/GIN: queryLastError: %p is not a live GIN context", gin_ctx);
        return ncclInvalidArgument;
    }
    *has_error = __atomic_load_n(&x->coll->error, __ATOMIC_ACQUIRE) != ncclSuccess;
    return ncclSuccess;
}
