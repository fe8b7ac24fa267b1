/* plugin/gin_v14.c: `ncclGinPlugin_v14` (include/nccl_gin_v14.h), the GIN
 * table NCCL 2.30.7 looks up first. It has no data path: NCCL 2.30.7 skips
 * an external GIN table of the proxy type and runs its own GIN proxy over an
 * RMA table instead (railnet's: rma_v14.c); with the GDAKI type, NCCL's
 * device code posts itself. So this table offers the type this process
 * decided (gin_gdaki_type.c: RAILNET_GIN=gdaki gets layout 200 under NCCL
 * 2.30), its properties, and a context:
 *  - getGinProperties: strong signals yes (a signal implies this put's and
 *    every earlier put's data to the peer, gin.h; the GDAKI type's signal
 *    is posted on the put's QP, after it), VA signals with the GDAKI type
 *    (NCCL's device code posts them, see below), not with the proxy type;
 *  - createContext: the config is checked; nContexts and backendVersion
 *    reach the GDAKI type (which context layout its kernels read); the
 *    rank stride is not used by the GDAKI type (every peer gets QPs, as
 *    NCCL's own GDAKI does); the traffic class cannot reach QPs made at
 *    connect (the collComm's class is RAILNET_IB_TC or 0): said once when
 *    it differs. */
#include <stdatomic.h>

#include "gin/gin.h"
#include "gin/gin_gdaki.h"
#include "gin_face.h"
#include "ib/log.h"
#include "nccl_gin_v14.h"

static ncclResult_t get_gin_properties_v14(ncclGinProperties_v14_t *p)
{
    if (!p)
        return ncclInvalidArgument;
    /* the type is decided at the first getProperties, which NCCL may ask
     * after this */
    int ndev = 0;
    ncclNetProperties_v12_t dp;
    if (gin_devices(&ndev) == ncclSuccess && ndev > 0)
        (void)gin_get_properties_v12(0, &dp);
    p->supportsStrongSignals = true;
    /* A VA signal of the GDAKI type is NCCL's device code's own atomic on
     * the signal window's rkey at an offset, as a put to any window (every
     * window allows remote atomics); NCCL's defaults require them. The
     * proxy type never meets one: NCCL 2.30 runs its own proxy over the
     * RMA table there. */
    p->supportsVASignals = gin_gdaki_offered() != 0;
    return ncclSuccess;
}

static ncclResult_t get_properties_v14(int dev, ncclNetProperties_v12_t *props)
{
    return gin_get_properties_v12(dev, props);
}

static _Atomic int said_tc;

static ncclResult_t create_context_v14(void *coll_comm, ncclGinConfig_v14_t *cfg, void **gin_ctx,
                                       ncclNetDeviceHandle_v11_t **dev_handle)
{
    if (gin_ctx)
        *gin_ctx = NULL;
    struct gin_coll *c = gin_coll_of(coll_comm, "createContext");
    if (!c || !cfg)
        return ncclInvalidArgument;
    if (cfg->nContexts < 1 || cfg->nSignals < 0 || cfg->nCounters < 0 || cfg->queueDepth < 0 ||
        cfg->rankStride < 0) {
        WARN("NET/railnet/GIN: createContext: config (%d contexts, %d signals, %d counters, queue depth %d, rank "
             "stride %d) not valid",
             cfg->nContexts, cfg->nSignals, cfg->nCounters, cfg->queueDepth, cfg->rankStride);
        return ncclInvalidArgument;
    }
    if (cfg->trafficClass >= 0 && cfg->trafficClass != c->qpp.tc && !atomic_exchange(&said_tc, 1))
        INFO(NCCL_INIT | NCCL_NET, "NET/railnet/GIN: createContext: traffic class %d asked for; the collComm's QPs "
                                   "were made at connect with class %d (RAILNET_IB_TC or 0)", cfg->trafficClass,
             c->qpp.tc);
    return gin_create_context(coll_comm, cfg->nSignals, cfg->nCounters, cfg->nContexts, cfg->backendVersion,
                              cfg->queueDepth, gin_ctx,
                              dev_handle);
}

RN_EXPORT const ncclGin_v14_t ncclGinPlugin_v14 = {
    .name = "railnet",
    .init = gin_init,
    .devices = gin_devices,
    .getGinProperties = get_gin_properties_v14,
    .getProperties = get_properties_v14,
    .listen = gin_listen_face,
    .connect = gin_connect_face,
    .createContext = create_context_v14,
    .regMrSym = gin_reg_mr_sym_face,
    .regMrSymDmaBuf = gin_reg_mr_sym_dmabuf_face,
    .deregMrSym = gin_dereg_mr_sym,
    .destroyContext = gin_destroy_context,
    .closeColl = gin_close_coll,
    .closeListen = gin_close_listen,
    .ginProgress = gin_ctx_progress,
    .queryLastError = gin_query_last_error,
    .finalize = gin_finalize,
};
