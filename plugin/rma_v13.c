/* plugin/rma_v13.c: `ncclRmaPlugin_v13` (include/nccl_rma_v13.h: the GIN
 * v13 layout), and the v13 entries ncclGinPlugin_v13 (gin_v13.c) shares.
 * NCCL 2.30.3 and 2.30.4 take it beside ncclGinPlugin_v13 for their RMA
 * proxy; NCCL 2.30.7 takes it when there is no ncclRmaPlugin_v14. Against
 * the core's (v14) arguments: createContext takes a GIN v13 config (no rank
 * stride: 1; signals, counters and queue depth only checked, NCCL's proxy
 * keeps those itself) and may be asked for a device handle (a host-only
 * one of the proxy type); iputSignal has no isStrongSignal (strong);
 * registrations also return the ginHandle (the mhandle, for this type). */
#include "gin/gin.h"
#include "gin_face.h"
#include "ib/log.h"
#include "nccl_rma_v13.h"

static ncclResult_t get_properties_v13(int dev, ncclNetProperties_v12_t *props)
{
    return gin_get_properties_proxy_v12(dev, props, NULL);
}

ncclResult_t face_v13_create_context(void *coll_comm, ncclGinConfig_v13_t *cfg, void **ctx,
                                     ncclNetDeviceHandle_v11_t **dev_handle)
{
    if (ctx)
        *ctx = NULL;
    if (dev_handle)
        *dev_handle = NULL;
    if (!cfg) {
        WARN("NET/railnet/RMA: createContext: no config (NULL)");
        return ncclInvalidArgument;
    }
    if (cfg->nSignals < 0 || cfg->nCounters < 0 || cfg->queueDepth < 0) {
        WARN("NET/railnet/RMA: createContext: config (%d signals, %d counters, queue depth %d) not valid",
             cfg->nSignals, cfg->nCounters, cfg->queueDepth);
        return ncclInvalidArgument;
    }
    return gin_rma_create(coll_comm, cfg->nContexts, cfg->trafficClass, 1, ctx, dev_handle);
}

ncclResult_t face_v13_iput_signal(void *ctx, int context, uint64_t src_off, void *src_mh, size_t size,
                                  uint64_t dst_off, void *dst_mh, uint32_t rank, uint64_t sig_off, void *sig_mh,
                                  uint64_t sig_value, uint32_t sig_op, void **request)
{
    return gin_rma_iput_signal(ctx, context, src_off, src_mh, size, dst_off, dst_mh, rank, sig_off, sig_mh,
                               sig_value, sig_op, true, request);
}

RN_EXPORT const ncclRma_v13_t ncclRmaPlugin_v13 = FACE_V13_TABLE(get_properties_v13);
