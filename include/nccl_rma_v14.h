/* include/nccl_rma_v14.h: railnet's own statement of NCCL 2.30's RMA plugin
 * table v14, `ncclRma_v14_t` (NCCL 2.30.7 looks up ncclRmaPlugin_v14, then
 * _v13, which is the GIN v13 table, include/nccl_rma_v13.h).
 *
 * Host-initiated one-sided operations on symmetric windows: NCCL's RMA
 * proxy and its GIN proxy (2.30 runs its own GIN proxy over this table)
 * call iput, iputSignal (isStrongSignal: the signal covers this put and
 * every earlier one to the peer), iget (RDMA READ into the local window),
 * iflush (earlier gets land in memory the GPU sees), test. Against v13:
 * registrations return no ginHandle; createContext takes an RMA config
 * (contexts, traffic class, rank stride) and gives no device handle.
 * Layout written out from NCCL 2.30.7's src/include/plugin/rma/rma_v14.h,
 * not copied. */
#ifndef RAILNET_NCCL_RMA_V14_H
#define RAILNET_NCCL_RMA_V14_H

#include "nccl_gin_v13.h"

typedef struct {
    int nContexts;
    int trafficClass;
    int rankStride;
} ncclRmaConfig_v14_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **ctx, uint64_t commId, ncclDebugLogger_t logFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t *props);
    ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(void *ctx, void *handles[], int nranks, int rank, void *listenComm, void **collComm);
    ncclResult_t (*createContext)(void *collComm, ncclRmaConfig_v14_t *config, void **rmaCtx);
    ncclResult_t (*regMrSym)(void *collComm, void *data, size_t size, int type, uint64_t mrFlags, void **mhandle);
    ncclResult_t (*regMrSymDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset, int fd,
                                   uint64_t mrFlags, void **mhandle);
    ncclResult_t (*deregMrSym)(void *collComm, void *mhandle);
    ncclResult_t (*destroyContext)(void *rmaCtx);
    ncclResult_t (*closeColl)(void *collComm);
    ncclResult_t (*closeListen)(void *listenComm);
    ncclResult_t (*iput)(void *rmaCtx, int context, uint64_t srcOff, void *srcMhandle, size_t size, uint64_t dstOff,
                         void *dstMhandle, uint32_t rank, void **request);
    ncclResult_t (*iputSignal)(void *rmaCtx, int context, uint64_t srcOff, void *srcMhandle, size_t size,
                               uint64_t dstOff, void *dstMhandle, uint32_t rank, uint64_t signalOff,
                               void *signalMhandle, uint64_t signalValue, uint32_t signalOp, bool isStrongSignal,
                               void **request);
    ncclResult_t (*iget)(void *rmaCtx, int context, uint64_t remoteOff, void *remoteMhandle, size_t size,
                         uint64_t localOff, void *localMhandle, uint32_t rank, void **request);
    ncclResult_t (*iflush)(void *rmaCtx, int context, void *mhandle, uint32_t rank, void **request);
    ncclResult_t (*test)(void *collComm, void *request, int *done);
    ncclResult_t (*rmaProgress)(void *rmaCtx);
    ncclResult_t (*queryLastError)(void *rmaCtx, bool *hasError);
    ncclResult_t (*finalize)(void *ctx);
} ncclRma_v14_t;

#if defined(__x86_64__)
_Static_assert(sizeof(ncclRmaConfig_v14_t) == 12, "rma v14 config: 3 ints");
_Static_assert(sizeof(ncclRma_v14_t) == 21 * 8, "rma v14: 1 name + 20 function pointers");
_Static_assert(offsetof(ncclRma_v14_t, createContext) == 48, "rma v14: createContext");
_Static_assert(offsetof(ncclRma_v14_t, regMrSym) == 56, "rma v14: regMrSym");
_Static_assert(offsetof(ncclRma_v14_t, destroyContext) == 80, "rma v14: destroyContext");
_Static_assert(offsetof(ncclRma_v14_t, iput) == 104, "rma v14: iput");
_Static_assert(offsetof(ncclRma_v14_t, iputSignal) == 112, "rma v14: iputSignal");
_Static_assert(offsetof(ncclRma_v14_t, iget) == 120, "rma v14: iget");
_Static_assert(offsetof(ncclRma_v14_t, iflush) == 128, "rma v14: iflush");
_Static_assert(offsetof(ncclRma_v14_t, test) == 136, "rma v14: test");
_Static_assert(offsetof(ncclRma_v14_t, rmaProgress) == 144, "rma v14: rmaProgress");
_Static_assert(offsetof(ncclRma_v14_t, queryLastError) == 152, "rma v14: queryLastError");
_Static_assert(offsetof(ncclRma_v14_t, finalize) == 160, "rma v14: finalize");
#endif

#endif
