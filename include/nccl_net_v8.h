/* include/nccl_net_v8.h: railnet's own statement of NCCL's network plugin
 * ABI, version 8 (NCCL >= 2.19; later NCCL releases still load a v8 table).
 *
 * Written from the facts in shared/ABI.md, not copied from NCCL. The layout
 * is the contract: NCCL reads `ncclNetPlugin_v8` as this struct, so the
 * static assertions at the end pin every size and offset for x86-64. */
#ifndef RAILNET_NCCL_NET_V8_H
#define RAILNET_NCCL_NET_V8_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
    ncclNumResults = 8
} ncclResult_t;

typedef enum {
    NCCL_LOG_NONE = 0,
    NCCL_LOG_VERSION = 1,
    NCCL_LOG_WARN = 2,
    NCCL_LOG_INFO = 3,
    NCCL_LOG_ABORT = 4,
    NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

typedef enum {
    NCCL_INIT = 0x1,
    NCCL_COLL = 0x2,
    NCCL_P2P = 0x4,
    NCCL_SHM = 0x8,
    NCCL_NET = 0x10,
    NCCL_GRAPH = 0x20,
    NCCL_TUNING = 0x40,
    NCCL_ENV = 0x80,
    NCCL_ALLOC = 0x100,
    NCCL_CALL = 0x200,
    NCCL_PROXY = 0x400,
    NCCL_NVLS = 0x800,
    NCCL_BOOTSTRAP = 0x1000,
    NCCL_REG = 0x2000,
    NCCL_ALL = ~0
} ncclDebugLogSubSys;

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                                  const char *fmt, ...);

#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_NET_MAX_REQUESTS 32

typedef enum { NCCL_NET_DEVICE_HOST = 0, NCCL_NET_DEVICE_UNPACK = 1 } ncclNetDeviceType;

typedef struct {
    ncclNetDeviceType netDeviceType;
    int netDeviceVersion;
    void *handle;
    size_t size;
    int needsProxyProgress;
} ncclNetDeviceHandle_v8_t;

typedef struct {
    char *name;
    char *pciPath;
    uint64_t guid;
    int ptrSupport;
    int regIsGlobal;
    int speed;   /* Mb/s */
    int port;
    float latency; /* us */
    int maxComms;
    int maxRecvs;
    ncclNetDeviceType netDeviceType;
    int netDeviceVersion;
} ncclNetProperties_v8_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(ncclDebugLogger_t logFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t *props);
    ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(int dev, void *handle, void **sendComm, ncclNetDeviceHandle_v8_t **sendDevComm);
    ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_v8_t **recvDevComm);
    ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
    ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
                                void **mhandle);
    ncclResult_t (*deregMr)(void *comm, void *mhandle);
    ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle, void **request);
    ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags, void **mhandles,
                          void **request);
    ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles, void **request);
    ncclResult_t (*test)(void *request, int *done, int *sizes);
    ncclResult_t (*closeSend)(void *sendComm);
    ncclResult_t (*closeRecv)(void *recvComm);
    ncclResult_t (*closeListen)(void *listenComm);
    ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
    ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
} ncclNet_v8_t;

#if defined(__x86_64__)
#ifdef __cplusplus
#define RN_ABI_ASSERT(e, m) static_assert(e, m)
#else
#define RN_ABI_ASSERT(e, m) _Static_assert(e, m)
#endif
RN_ABI_ASSERT(sizeof(ncclResult_t) == 4, "ncclResult_t is an int enum");
RN_ABI_ASSERT(sizeof(ncclNetDeviceHandle_v8_t) == 32, "device handle v8 size");
RN_ABI_ASSERT(offsetof(ncclNetDeviceHandle_v8_t, handle) == 8, "device handle: handle");
RN_ABI_ASSERT(offsetof(ncclNetDeviceHandle_v8_t, size) == 16, "device handle: size");
RN_ABI_ASSERT(offsetof(ncclNetDeviceHandle_v8_t, needsProxyProgress) == 24, "device handle: needsProxyProgress");
RN_ABI_ASSERT(sizeof(ncclNetProperties_v8_t) == 64, "properties v8 size");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v8_t, pciPath) == 8, "props: pciPath");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v8_t, guid) == 16, "props: guid");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v8_t, ptrSupport) == 24, "props: ptrSupport");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v8_t, regIsGlobal) == 28, "props: regIsGlobal");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v8_t, speed) == 32, "props: speed");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v8_t, port) == 36, "props: port");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v8_t, latency) == 40, "props: latency");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v8_t, maxComms) == 44, "props: maxComms");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v8_t, maxRecvs) == 48, "props: maxRecvs");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v8_t, netDeviceType) == 52, "props: netDeviceType");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v8_t, netDeviceVersion) == 56, "props: netDeviceVersion");
RN_ABI_ASSERT(sizeof(ncclNet_v8_t) == 19 * 8, "net v8: 1 name + 18 function pointers");
RN_ABI_ASSERT(offsetof(ncclNet_v8_t, init) == 8, "net v8: init");
RN_ABI_ASSERT(offsetof(ncclNet_v8_t, listen) == 32, "net v8: listen");
RN_ABI_ASSERT(offsetof(ncclNet_v8_t, regMr) == 56, "net v8: regMr");
RN_ABI_ASSERT(offsetof(ncclNet_v8_t, isend) == 80, "net v8: isend");
RN_ABI_ASSERT(offsetof(ncclNet_v8_t, test) == 104, "net v8: test");
RN_ABI_ASSERT(offsetof(ncclNet_v8_t, closeListen) == 128, "net v8: closeListen");
RN_ABI_ASSERT(offsetof(ncclNet_v8_t, irecvConsumed) == 144, "net v8: irecvConsumed");
#undef RN_ABI_ASSERT
#endif

#endif
