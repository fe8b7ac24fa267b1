/* include/nccl_gin_v13.h: railnet's own statement of NCCL 2.30's GIN plugin
 * table v13, `ncclGin_v13_t`, which is also the RMA table v13
 * (include/nccl_rma_v13.h, exported as ncclRmaPlugin_v13).
 *
 * Against v12 (include/nccl_gin_v12.h): properties v12; connect without
 * nConnections/queueDepth; createContext takes a config (signals,
 * counters, contexts, queue depth, traffic class); the host-initiated ops
 * (iput, iputSignal, iget, iflush) name the context returned by
 * createContext and a context index inside it; test still names the
 * collComm; ginProgress names the context.
 *
 * Contract as NCCL uses it:
 *  - 2.30.3 and 2.30.4 (src/plugin/gin.cc, src/gin/gin_host*.cc,
 *    src/rma/rma_proxy*.cc) look up ncclGinPlugin_v13 first, and
 *    ncclRmaPlugin_v13 (this layout too) in the same library. A GIN table
 *    of the proxy type gets NCCL's GIN proxy layered over it, which calls
 *    createContext with a NULL devHandle, then the host-initiated ops with
 *    its context index, test, ginProgress and queryLastError; the RMA proxy
 *    does the same with its own contexts (one context, index 0);
 *  - 2.30.7 (src/plugin/gin.cc, rma.cc, gin/gin_v13.cc, rma/rma_v13.cc)
 *    takes ncclGinPlugin_v13 only without _v14 and then skips an external
 *    one of the proxy type; it takes ncclRmaPlugin_v13 (or, without it,
 *    ncclGinPlugin_v13) as an RMA table only without ncclRmaPlugin_v14,
 *    requires the proxy type, creates contexts with zero signals, counters
 *    and queue depth, ignores their device handle and calls every
 *    iputSignal as a strong signal.
 * iflush may return a NULL request (nothing to wait for). Layout written
 * out from NCCL 2.30.7's src/include/plugin/gin/gin_v13.h (2.30.4's is the
 * same), not copied. */
#ifndef RAILNET_NCCL_GIN_V13_H
#define RAILNET_NCCL_GIN_V13_H

#include "nccl_gin_v11.h"
#include "nccl_net_v12.h"

typedef struct {
    int nSignals;
    int nCounters;
    int nContexts;
    int queueDepth;
    int trafficClass;
} ncclGinConfig_v13_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **ctx, uint64_t commId, ncclDebugLogger_t logFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t *props);
    ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(void *ctx, void *handles[], int nranks, int rank, void *listenComm, void **collComm);
    ncclResult_t (*createContext)(void *collComm, ncclGinConfig_v13_t *config, void **ginCtx,
                                  ncclNetDeviceHandle_v11_t **devHandle);
    ncclResult_t (*regMrSym)(void *collComm, void *data, size_t size, int type, uint64_t mrFlags, void **mhandle,
                             void **ginHandle);
    ncclResult_t (*regMrSymDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset, int fd,
                                   uint64_t mrFlags, void **mhandle, void **ginHandle);
    ncclResult_t (*deregMrSym)(void *collComm, void *mhandle);
    ncclResult_t (*destroyContext)(void *ginCtx);
    ncclResult_t (*closeColl)(void *collComm);
    ncclResult_t (*closeListen)(void *listenComm);
    ncclResult_t (*iput)(void *ginCtx, int context, uint64_t srcOff, void *srcMhandle, size_t size, uint64_t dstOff,
                         void *dstMhandle, uint32_t rank, void **request);
    ncclResult_t (*iputSignal)(void *ginCtx, int context, uint64_t srcOff, void *srcMhandle, size_t size,
                               uint64_t dstOff, void *dstMhandle, uint32_t rank, uint64_t signalOff,
                               void *signalMhandle, uint64_t signalValue, uint32_t signalOp, void **request);
    ncclResult_t (*iget)(void *ginCtx, int context, uint64_t remoteOff, void *remoteMhandle, size_t size,
                         uint64_t localOff, void *localMhandle, uint32_t rank, void **request);
    ncclResult_t (*iflush)(void *ginCtx, int context, void *mhandle, uint32_t rank, void **request);
    ncclResult_t (*test)(void *collComm, void *request, int *done);
    ncclResult_t (*ginProgress)(void *ginCtx);
    ncclResult_t (*queryLastError)(void *ginCtx, bool *hasError);
    ncclResult_t (*finalize)(void *ctx);
} ncclGin_v13_t;


#if defined(__x86_64__)
_Static_assert(sizeof(ncclGinConfig_v13_t) == 20, "gin v13 config: 5 ints");
_Static_assert(offsetof(ncclGinConfig_v13_t, trafficClass) == 16, "gin v13 config: trafficClass");
_Static_assert(sizeof(ncclGin_v13_t) == 21 * 8, "gin v13: 1 name + 20 function pointers");
_Static_assert(offsetof(ncclGin_v13_t, createContext) == 48, "gin v13: createContext");
_Static_assert(offsetof(ncclGin_v13_t, iput) == 104, "gin v13: iput");
_Static_assert(offsetof(ncclGin_v13_t, iget) == 120, "gin v13: iget");
_Static_assert(offsetof(ncclGin_v13_t, iflush) == 128, "gin v13: iflush");
_Static_assert(offsetof(ncclGin_v13_t, test) == 136, "gin v13: test");
_Static_assert(offsetof(ncclGin_v13_t, ginProgress) == 144, "gin v13: ginProgress");
_Static_assert(offsetof(ncclGin_v13_t, finalize) == 160, "gin v13: finalize");
#endif

#endif
