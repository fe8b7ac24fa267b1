/* include/nccl_gin_v14.h: railnet's own statement of NCCL 2.30's GIN plugin
 * table v14, `ncclGin_v14_t` (NCCL 2.30 looks up ncclGinPlugin_v14, then
 * _v13).
 *
 * Against v13 (include/nccl_gin_v13.h): getGinProperties (whether strong
 * and VA signals are supported) before getProperties; createContext's
 * config adds backendVersion and rankStride; the host-initiated ops are
 * gone from this table (they are the RMA table's, include/nccl_rma_v14.h).
 * Layout written out from NCCL 2.30.7's src/include/plugin/gin/gin_v14.h,
 * not copied. */
#ifndef RAILNET_NCCL_GIN_V14_H
#define RAILNET_NCCL_GIN_V14_H

#include "nccl_gin_v13.h"

typedef struct {
    bool supportsStrongSignals;
    bool supportsVASignals;
} ncclGinProperties_v14_t;

typedef struct {
    int nSignals;
    int nCounters;
    int nContexts;
    int queueDepth;
    int trafficClass;
    int backendVersion;
    int rankStride;
} ncclGinConfig_v14_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **ctx, uint64_t commId, ncclDebugLogger_t logFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getGinProperties)(ncclGinProperties_v14_t *ginProps);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t *props);
    ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(void *ctx, void *handles[], int nranks, int rank, void *listenComm, void **collComm);
    ncclResult_t (*createContext)(void *collComm, ncclGinConfig_v14_t *config, void **ginCtx,
                                  ncclNetDeviceHandle_v11_t **devHandle);
    ncclResult_t (*regMrSym)(void *collComm, void *data, size_t size, int type, uint64_t mrFlags, void **mhandle,
                             void **ginHandle);
    ncclResult_t (*regMrSymDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset, int fd,
                                   uint64_t mrFlags, void **mhandle, void **ginHandle);
    ncclResult_t (*deregMrSym)(void *collComm, void *mhandle);
    ncclResult_t (*destroyContext)(void *ginCtx);
    ncclResult_t (*closeColl)(void *collComm);
    ncclResult_t (*closeListen)(void *listenComm);
    ncclResult_t (*ginProgress)(void *ginCtx);
    ncclResult_t (*queryLastError)(void *ginCtx, bool *hasError);
    ncclResult_t (*finalize)(void *ctx);
} ncclGin_v14_t;

#if defined(__x86_64__)
_Static_assert(sizeof(ncclGinProperties_v14_t) == 2, "gin v14 properties: 2 bools");
_Static_assert(sizeof(ncclGinConfig_v14_t) == 28, "gin v14 config: 7 ints");
_Static_assert(offsetof(ncclGinConfig_v14_t, rankStride) == 24, "gin v14 config: rankStride");
_Static_assert(sizeof(ncclGin_v14_t) == 17 * 8, "gin v14: 1 name + 16 function pointers");
_Static_assert(offsetof(ncclGin_v14_t, getGinProperties) == 24, "gin v14: getGinProperties");
_Static_assert(offsetof(ncclGin_v14_t, createContext) == 56, "gin v14: createContext");
_Static_assert(offsetof(ncclGin_v14_t, ginProgress) == 112, "gin v14: ginProgress");
_Static_assert(offsetof(ncclGin_v14_t, finalize) == 128, "gin v14: finalize");
#endif

#endif
