/* include/nccl_gin_v12.h: railnet's own statement of NCCL 2.29's GIN plugin
 * table, `ncclGin_v12_t` (NCCL 2.29 looks up ncclGinPlugin_v12, then _v11).
 *
 * Against v11 (include/nccl_gin_v11.h): connect takes nConnections and
 * queueDepth, createContext takes nContexts, iput/iputSignal name a
 * connectionId. Layout written out from NCCL 2.29.7's
 * src/include/plugin/gin/gin_v12.h, not copied; the static asserts pin it
 * on x86-64. */
#ifndef RAILNET_NCCL_GIN_V12_H
#define RAILNET_NCCL_GIN_V12_H

#include "nccl_gin_v11.h"

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **ctx, uint64_t commId, ncclDebugLogger_t logFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t *props);
    ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(void *ctx, void *handles[], int nranks, int rank, int nConnections, int queueDepth,
                            void *listenComm, void **collComm);
    ncclResult_t (*createContext)(void *collComm, int nSignals, int nCounters, int nContexts, void **ginCtx,
                                  ncclNetDeviceHandle_v11_t **devHandle);
    ncclResult_t (*regMrSym)(void *collComm, void *data, size_t size, int type, uint64_t mrFlags, void **mhandle,
                             void **ginHandle);
    ncclResult_t (*regMrSymDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset, int fd,
                                   uint64_t mrFlags, void **mhandle, void **ginHandle);
    ncclResult_t (*deregMrSym)(void *collComm, void *mhandle);
    ncclResult_t (*destroyContext)(void *ginCtx);
    ncclResult_t (*closeColl)(void *collComm);
    ncclResult_t (*closeListen)(void *listenComm);
    ncclResult_t (*iput)(void *collComm, uint64_t srcOff, void *srcMhandle, size_t size, uint64_t dstOff,
                         void *dstMhandle, uint32_t rank, int connectionId, void **request);
    ncclResult_t (*iputSignal)(void *collComm, uint64_t srcOff, void *srcMhandle, size_t size, uint64_t dstOff,
                               void *dstMhandle, uint32_t rank, uint64_t signalOff, void *signalMhandle,
                               uint64_t signalValue, uint32_t signalOp, int connectionId, void **request);
    ncclResult_t (*test)(void *collComm, void *request, int *done);
    ncclResult_t (*ginProgress)(void *collComm);
    ncclResult_t (*queryLastError)(void *ginCtx, bool *hasError);
    ncclResult_t (*finalize)(void *ctx);
} ncclGin_v12_t;

#if defined(__x86_64__)
_Static_assert(sizeof(ncclGin_v12_t) == 19 * 8, "gin v12: 1 name + 18 function pointers");
_Static_assert(offsetof(ncclGin_v12_t, connect) == 40, "gin v12: connect");
_Static_assert(offsetof(ncclGin_v12_t, createContext) == 48, "gin v12: createContext");
_Static_assert(offsetof(ncclGin_v12_t, iput) == 104, "gin v12: iput");
_Static_assert(offsetof(ncclGin_v12_t, iputSignal) == 112, "gin v12: iputSignal");
_Static_assert(offsetof(ncclGin_v12_t, test) == 120, "gin v12: test");
_Static_assert(offsetof(ncclGin_v12_t, finalize) == 144, "gin v12: finalize");
#endif

#endif
