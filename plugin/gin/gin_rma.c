/* plugin/gin/gin_rma.c: RMA contexts, what NCCL 2.30's RMA tables (v13, v14)
 * put, signal, get and flush through (gin.h).
 *
 * An RMA context holds nContexts lanes of the collComm (gin_put.c), one per
 * context index: NCCL's GIN proxy keeps its queue depth (32 * maxRecvs) in
 * flight per context and peer and never retries a call that returned no
 * request, so each context needs its own pool; ordering is per lane, as
 * NCCL's contract is per context. The lanes share the collComm's QPs, made
 * at connect (an RMA table's connect always makes them; a GIN collComm of
 * the GDAKI type has none, and createContext refuses it).
 *
 * The config, checked at createContext:
 *  - nContexts: 1 .. GIN_RMA_MAX_CONTEXTS;
 *  - trafficClass: negative is unset (NCCL passes its own "undefined"
 *    value), 0..255 a class, anything larger refused. The QPs were made at
 *    connect with RAILNET_IB_TC (or 0): a different class is said once;
 *  - rankStride: at least 1 and a divisor of the rank count (NCCL's own
 *    RMA backend connects only ranks a multiple of the stride away; NCCL
 *    asks for its LSA team size for contexts of railed GIN connections).
 *    An operation towards a rank outside this rank's stride class is
 *    refused, as NCCL's backend refuses a peer it did not connect.
 * Every operation names a context index, checked against nContexts, and a
 * rank, checked against the rank count and the stride. Signals are strong
 * whatever isStrongSignal says (a weak one only needs less: the fence of
 * gin_put.c covers every earlier work request to the peer). A flush reads
 * the local window back (gin_lane_flush); its rank is checked like any
 * other (NCCL names its own rank).
 *
 * A failure (a peer gone, a port down, an error completion) is reported
 * by queryLastError, which NCCL's GIN proxy polls; from then on every
 * request of the collComm completes at once and moves nothing, and test()
 * says done. Why not fail test() as the GIN tables do: NCCL 2.30.7's GIN
 * proxy stops consuming its GPU queue at the first test() that fails, and
 * its device code waits for queue credits with no abort check, so the
 * application's kernel never ends and ncclCommAbort waits for it (in
 * NCCL's own cudaFreeHost; nccl-tests' survivors of a killed peer, stacks
 * taken on an H200). With the queue moving, the kernel reaches a wait that
 * NCCL's abort ends.
 *
 * A context outlives nothing: destroyContext before closeColl, as NCCL
 * does. If closeColl comes first, the lanes are orphaned (gin_lanes_release)
 * and every call but destroyContext refuses the context. */
#include <stdatomic.h>
#include <stdlib.h>

#include "gin.h"
#include "log.h"

#define GIN_RMA_MAGIC 0x414d5247u

struct gin_rma {
    uint32_t magic;
    int ncontexts;
    int stride;
    ncclNetDeviceHandle_v11_t dev; /* the host-only handle GIN v13's createContext returns */
    struct gin_lane *lanes[];      /* [ncontexts] */
};

static _Atomic int said_tc;

/* The context's collComm, or NULL (with a WARN naming `what`) when rma_ctx
 * is not a live context or its collComm was closed. */
static struct gin_coll *rma_coll(struct gin_rma *x, const char *what)
{
    if (!x || x->magic != GIN_RMA_MAGIC) {
        WARN("NET/railnet/RMA: %s: %p is not a live RMA context", what, (void *)x);
        return NULL;
    }
    struct gin_coll *c = x->lanes[0]->coll;
    if (!c)
        WARN("NET/railnet/RMA: %s: the context's collComm was closed before it", what);
    return c;
}

/* The lane of `context`, after the checks every operation shares. */
static struct gin_lane *rma_lane(struct gin_rma *x, int context, uint32_t rank, void **request, const char *what,
                                 struct gin_coll **coll)
{
    if (request)
        *request = NULL;
    struct gin_coll *c = rma_coll(x, what);
    if (!c)
        return NULL;
    if (!request) {
        WARN("NET/railnet/RMA: %s: no place for the request (NULL)", what);
        return NULL;
    }
    if (context < 0 || context >= x->ncontexts) {
        WARN("NET/railnet/RMA: %s: context %d out of range (this RMA context has %d)", what, context,
             x->ncontexts);
        return NULL;
    }
    if (rank >= (uint32_t)c->nranks) {
        WARN("NET/railnet/RMA: %s: rank %u out of range (%d ranks)", what, rank, c->nranks);
        return NULL;
    }
    if (rank % (uint32_t)x->stride != (uint32_t)c->rank % (uint32_t)x->stride) {
        WARN("NET/railnet/RMA: %s: rank %u is not reachable from rank %d in this context (rank stride %d: ranks "
             "%d, %d, ... apart)",
             what, rank, c->rank, x->stride, x->stride, 2 * x->stride);
        return NULL;
    }
    *coll = c;
    return x->lanes[context];
}

ncclResult_t gin_rma_create(void *coll_comm, int ncontexts, int traffic_class, int rank_stride, void **rma_ctx,
                            ncclNetDeviceHandle_v11_t **dev_handle)
{
    if (rma_ctx)
        *rma_ctx = NULL;
    if (dev_handle)
        *dev_handle = NULL;
    struct gin_coll *c = gin_coll_of(coll_comm, "createContext");
    if (!c)
        return ncclInvalidArgument;
    CHECK(gin_proxy_only(c, "RMA createContext"));
    if (!rma_ctx) {
        WARN("NET/railnet/RMA: createContext: no place for the context (NULL)");
        return ncclInvalidArgument;
    }
    if (ncontexts < 1 || ncontexts > GIN_RMA_MAX_CONTEXTS) {
        WARN("NET/railnet/RMA: createContext: %d contexts: not valid (1..%d)", ncontexts, GIN_RMA_MAX_CONTEXTS);
        return ncclInvalidArgument;
    }
    if (traffic_class > 255) {
        WARN("NET/railnet/RMA: createContext: traffic class %d is not 0..255 (negative: unset)", traffic_class);
        return ncclInvalidArgument;
    }
    if (rank_stride < 1 || c->nranks % rank_stride) {
        WARN("NET/railnet/RMA: createContext: rank stride %d: not valid (at least 1 and a divisor of the %d ranks)",
             rank_stride, c->nranks);
        return ncclInvalidArgument;
    }
    ncclResult_t failed = gin_failed(c, "createContext");
    if (failed)
        return failed;
    if (traffic_class >= 0 && traffic_class != c->qpp.tc && !atomic_exchange(&said_tc, 1))
        INFO(NCCL_INIT | NCCL_NET, "NET/railnet/RMA: createContext: traffic class %d asked for; the collComm's QPs "
                                   "were made at connect with class %d (RAILNET_IB_TC or 0)", traffic_class,
             c->qpp.tc);
    struct gin_rma *x = calloc(1, sizeof(*x) + (size_t)ncontexts * sizeof(x->lanes[0]));
    if (!x)
        return ncclSystemError;
    x->ncontexts = ncontexts;
    x->stride = rank_stride;
    x->dev.netDeviceType = NCCL_NET_DEVICE_GIN_PROXY;
    x->dev.needsProxyProgress = 1;
    for (int i = 0; i < ncontexts; i++) {
        if (gin_lane_add(c, &x->lanes[i]) != ncclSuccess) {
            while (i-- > 0)
                gin_lane_remove(x->lanes[i]);
            free(x);
            return ncclSystemError;
        }
    }
    x->magic = GIN_RMA_MAGIC;
    __atomic_store_n(&c->errors_by_query, 1, __ATOMIC_RELEASE);
    INFO(NCCL_NET, "NET/railnet/RMA: rank %d: context of %d context(s), rank stride %d, on %s", c->rank, ncontexts,
         rank_stride, c->dev_name);
    *rma_ctx = x;
    if (dev_handle)
        *dev_handle = &x->dev;
    return ncclSuccess;
}

ncclResult_t gin_rma_destroy(void *rma_ctx)
{
    struct gin_rma *x = rma_ctx;
    if (!x)
        return ncclSuccess;
    if (x->magic != GIN_RMA_MAGIC) {
        WARN("NET/railnet/RMA: destroyContext: %p is not a live RMA context", rma_ctx);
        return ncclInvalidArgument;
    }
    x->magic = 0;
    for (int i = 0; i < x->ncontexts; i++)
        gin_lane_remove(x->lanes[i]);
    free(x);
    return ncclSuccess;
}

ncclResult_t gin_rma_iput(void *rma_ctx, int context, uint64_t src_off, void *src_mh, size_t size, uint64_t dst_off,
                          void *dst_mh, uint32_t rank, void **request)
{
    struct gin_coll *c;
    struct gin_lane *l = rma_lane(rma_ctx, context, rank, request, "iput", &c);
    if (!l)
        return ncclInvalidArgument;
    if (c->error)
        return gin_lane_failed_request(c, l, rank, request);
    return gin_lane_put(c, l, "iput", src_off, src_mh, size, dst_off, dst_mh, rank, 0, NULL, 0, 0, request);
}

ncclResult_t gin_rma_iput_signal(void *rma_ctx, int context, uint64_t src_off, void *src_mh, size_t size,
                                 uint64_t dst_off, void *dst_mh, uint32_t rank, uint64_t sig_off, void *sig_mh,
                                 uint64_t sig_value, uint32_t sig_op, bool strong, void **request)
{
    (void)strong; /* every signal is strong (see the top of this file) */
    struct gin_coll *c;
    struct gin_lane *l = rma_lane(rma_ctx, context, rank, request, "iputSignal", &c);
    if (!l)
        return ncclInvalidArgument;
    if (!sig_mh) {
        WARN("NET/railnet/RMA: iputSignal: no signal window (NULL)");
        return ncclInvalidArgument;
    }
    if (c->error) {
        /* gin_lane_put notes the signal words of live requests */
        struct gin_mr *sm = gin_mr_of(c, sig_mh, "iputSignal");
        if (!sm)
            return ncclInvalidArgument;
        gin_rma_release_note_signal(sm, sig_off);
        return gin_lane_failed_request(c, l, rank, request);
    }
    return gin_lane_put(c, l, "iputSignal", src_off, src_mh, size, dst_off, dst_mh, rank, sig_off, sig_mh,
                        sig_value, sig_op, request);
}

ncclResult_t gin_rma_iget(void *rma_ctx, int context, uint64_t remote_off, void *remote_mh, size_t size,
                          uint64_t local_off, void *local_mh, uint32_t rank, void **request)
{
    struct gin_coll *c;
    struct gin_lane *l = rma_lane(rma_ctx, context, rank, request, "iget", &c);
    if (!l)
        return ncclInvalidArgument;
    if (c->error)
        return gin_lane_failed_request(c, l, rank, request);
    return gin_lane_get(c, l, "iget", remote_off, remote_mh, size, local_off, local_mh, rank, request);
}

ncclResult_t gin_rma_iflush(void *rma_ctx, int context, void *mh, uint32_t rank, void **request)
{
    struct gin_coll *c;
    struct gin_lane *l = rma_lane(rma_ctx, context, rank, request, "iflush", &c);
    if (!l)
        return ncclInvalidArgument;
    if (c->error)
        return gin_lane_failed_request(c, l, rank, request);
    return gin_lane_flush(c, l, "iflush", mh, request);
}

ncclResult_t gin_rma_progress(void *rma_ctx)
{
    struct gin_coll *c = rma_coll(rma_ctx, "progress");
    if (!c)
        return ncclInvalidArgument;
    (void)gin_progress(c);
    if (__atomic_load_n(&c->error, __ATOMIC_ACQUIRE) != ncclSuccess)
        gin_rma_release_step(c);
    return ncclSuccess;     /* a failure is queryLastError's to say (above) */
}

ncclResult_t gin_rma_query_last_error(void *rma_ctx, bool *has_error)
{
    struct gin_coll *c = rma_coll(rma_ctx, "queryLastError");
    if (!c || !has_error) {
        if (c)
            WARN("NET/railnet/RMA: queryLastError: no place for the answer (NULL)");
        return ncclInvalidArgument;
    }
    *has_error = __atomic_load_n(&c->error, __ATOMIC_ACQUIRE) != ncclSuccess;
    return ncclSuccess;
}
