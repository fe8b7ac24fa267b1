/* plugin/rma_v14.c: `ncclRmaPlugin_v14` (include/nccl_rma_v14.h), the RMA
 * table NCCL 2.30.7 looks up first: in NCCL_RMA_PLUGIN's library, else the
 * GIN plugin's, else the net plugin's (this one). NCCL runs its RMA proxy
 * and its own GIN proxy over it: puts, puts with signal, gets and flushes,
 * each naming a context index of a context createContext made. The core
 * speaks this table's arguments (plugin/gin/gin_rma.c: contexts, traffic
 * class, rank stride; gin_put.c: the data path); this face only converts
 * the config and drops the ginHandle the core's registrations return. */
#include "gin/gin.h"
#include "gin_face.h"
#include "ib/log.h"
#include "nccl_rma_v14.h"

static ncclResult_t get_properties_v14(int dev, ncclNetProperties_v12_t *props)
{
    return gin_get_properties_proxy_v12(dev, props, NULL);
}

static ncclResult_t create_context_v14(void *coll_comm, ncclRmaConfig_v14_t *cfg, void **rma_ctx)
{
    if (rma_ctx)
        *rma_ctx = NULL;
    if (!cfg) {
        WARN("NET/railnet/RMA: createContext: no config (NULL)");
        return ncclInvalidArgument;
    }
    return gin_rma_create(coll_comm, cfg->nContexts, cfg->trafficClass, cfg->rankStride, rma_ctx, NULL);
}

static ncclResult_t reg_mr_sym_v14(void *coll_comm, void *data, size_t size, int type, uint64_t flags,
                                   void **mhandle)
{
    return gin_reg_mr_sym(coll_comm, data, size, type, 0, -1, flags, mhandle, NULL);
}

static ncclResult_t reg_mr_sym_dmabuf_v14(void *coll_comm, void *data, size_t size, int type, uint64_t offset,
                                          int fd, uint64_t flags, void **mhandle)
{
    return gin_reg_mr_sym(coll_comm, data, size, type, offset, fd, flags, mhandle, NULL);
}

RN_EXPORT const ncclRma_v14_t ncclRmaPlugin_v14 = {
    .name = "railnet",
    .init = gin_init,
    .devices = gin_devices,
    .getProperties = get_properties_v14,
    .listen = gin_listen_face,
    /* An RMA collComm is of the proxy type whatever the GIN tables offer:
     * NCCL drives it through iputSignal (proxy QPs), and its device code
     * never reads its windows (no GDAKI registration). NCCL 2.30.7 with
     * RAILNET_GIN=gdaki connects both kinds. */
    .connect = gin_connect_proxy_face,
    .createContext = create_context_v14,
    .regMrSym = reg_mr_sym_v14,
    .regMrSymDmaBuf = reg_mr_sym_dmabuf_v14,
    .deregMrSym = gin_dereg_mr_sym,
    .destroyContext = gin_rma_destroy,
    .closeColl = gin_close_coll,
    .closeListen = gin_close_listen,
    .iput = gin_rma_iput,
    .iputSignal = gin_rma_iput_signal,
    .iget = gin_rma_iget,
    .iflush = gin_rma_iflush,
    .test = gin_test,
    .rmaProgress = gin_rma_progress,
    .queryLastError = gin_rma_query_last_error,
    .finalize = gin_finalize,
};
