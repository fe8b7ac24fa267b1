/* include/nccl_gin_v11.h: railnet's own statement of NCCL 2.28's GIN plugin
 * table (GPU-initiated networking), `ncclGin_v11_t`, exported by the net
 * plugin library as `ncclGinPlugin_v11` beside ncclNetPlugin_v8.
 *
 * Layouts as NCCL 2.28.9 defines them (src/include/plugin/net/net_v11.h,
 * nccl_device/net_device.h), written out here, not copied; the static
 * asserts pin sizes and offsets on x86-64 so that a drift is a build error.
 *
 * Contract as NCCL 2.28.9 uses it (src/gin/gin_host.cc, gin_host_proxy.cc):
 * - init(&ctx) may be called several times (once per NCCL context user);
 *   connect is given the ctx of another init call than listen.
 * - connect is collective and blocking: every rank calls it with every
 *   rank's listen handle (all-gathered by NCCL) and gets one collComm
 *   reaching all ranks; NCCL does not call it again.
 * - Proxy type (netDeviceType NCCL_NET_DEVICE_GIN_PROXY): NCCL makes its own
 *   device context and never calls createContext/destroyContext/
 *   queryLastError; its progress thread calls iput/iputSignal once per GPU
 *   descriptor (a NULL request is never retried: it is tested as is), then
 *   test() until done, and ginProgress() if not NULL. It passes back either
 *   the mhandle or the ginHandle of a registration as src/dst handle, so
 *   both must name the same thing. At most NCCL_NET_MAX_REQUESTS * maxRecvs
 *   descriptors are outstanding per target rank.
 * - regMrSym is collective: every rank registers its own buffer, in the same
 *   order, and the ginHandle names the window on every rank.
 * - iputSignal: the signal (64-bit add at signalOff of the signal window on
 *   the target) is visible only after this put's data and the data of every
 *   earlier put to the same peer. size 0 means signal only (dst may be NULL). */
#ifndef RAILNET_NCCL_GIN_V11_H
#define RAILNET_NCCL_GIN_V11_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl_net_v11.h" /* the device handle and properties v11 */

/* ncclNetDeviceType values beyond the v8 enum (HOST 0, UNPACK 1). */
#define NCCL_NET_DEVICE_GIN_PROXY 2
#define NCCL_NET_DEVICE_GIN_GDAKI 3

/* Registration flag: memory that receives signals, strict PCIe ordering. */
#define NCCL_NET_MR_FLAG_FORCE_SO (1 << 0)
/* iputSignal ops: INC adds 1 (signalValue ignored), ADD adds signalValue. */
#define NCCL_NET_SIGNAL_OP_INC 0x1
#define NCCL_NET_SIGNAL_OP_ADD 0x2

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **ctx, uint64_t commId, ncclDebugLogger_t logFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t *props);
    ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(void *ctx, void *handles[], int nranks, int rank, void *listenComm, void **collComm);
    ncclResult_t (*createContext)(void *collComm, int nSignals, int nCounters, void **ginCtx,
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
                         void *dstMhandle, uint32_t rank, void **request);
    ncclResult_t (*iputSignal)(void *collComm, uint64_t srcOff, void *srcMhandle, size_t size, uint64_t dstOff,
                               void *dstMhandle, uint32_t rank, uint64_t signalOff, void *signalMhandle,
                               uint64_t signalValue, uint32_t signalOp, void **request);
    ncclResult_t (*test)(void *collComm, void *request, int *done);
    ncclResult_t (*ginProgress)(void *collComm);
    ncclResult_t (*queryLastError)(void *ginCtx, bool *hasError);
    ncclResult_t (*finalize)(void *ctx);
} ncclGin_v11_t;

#if defined(__x86_64__)
#ifdef __cplusplus
#define RN_ABI_ASSERT(e, m) static_assert(e, m)
#else
#define RN_ABI_ASSERT(e, m) _Static_assert(e, m)
#endif
RN_ABI_ASSERT(sizeof(ncclGin_v11_t) == 19 * 8, "gin v11: 1 name + 18 function pointers");
RN_ABI_ASSERT(offsetof(ncclGin_v11_t, init) == 8, "gin v11: init");
RN_ABI_ASSERT(offsetof(ncclGin_v11_t, connect) == 40, "gin v11: connect");
RN_ABI_ASSERT(offsetof(ncclGin_v11_t, createContext) == 48, "gin v11: createContext");
RN_ABI_ASSERT(offsetof(ncclGin_v11_t, regMrSym) == 56, "gin v11: regMrSym");
RN_ABI_ASSERT(offsetof(ncclGin_v11_t, deregMrSym) == 72, "gin v11: deregMrSym");
RN_ABI_ASSERT(offsetof(ncclGin_v11_t, closeListen) == 96, "gin v11: closeListen");
RN_ABI_ASSERT(offsetof(ncclGin_v11_t, iput) == 104, "gin v11: iput");
RN_ABI_ASSERT(offsetof(ncclGin_v11_t, iputSignal) == 112, "gin v11: iputSignal");
RN_ABI_ASSERT(offsetof(ncclGin_v11_t, test) == 120, "gin v11: test");
RN_ABI_ASSERT(offsetof(ncclGin_v11_t, ginProgress) == 128, "gin v11: ginProgress");
RN_ABI_ASSERT(offsetof(ncclGin_v11_t, queryLastError) == 136, "gin v11: queryLastError");
RN_ABI_ASSERT(offsetof(ncclGin_v11_t, finalize) == 144, "gin v11: finalize");
#undef RN_ABI_ASSERT
#endif

#endif
