/* include/nccl_net_v10.h: railnet's own statement of NCCL's network plugin
 * ABI, version 10.
 *
 * Written from NCCL 2.30's src/include/plugin/net/net_v10.h and its loader
 * (src/plugin/net/net_v10.cc), not copied. What changed from v9:
 * - init also takes NCCL's profiler callback (nccl_profiler_net.h; NULL
 *   when NCCL has no profiler);
 * - connect takes a per-connection config: the traffic class NCCL wants
 *   for it (NCCL_NET_TRAFFIC_CLASS_UNDEF: the plugin's own choice);
 * - isend and irecv take NCCL's profiler handles (phandle per buffer),
 *   which the plugin passes back through the callback.
 * The static assertions pin every size and offset for x86-64. */
#ifndef RAILNET_NCCL_NET_V10_H
#define RAILNET_NCCL_NET_V10_H

#include "nccl_net_v9.h"
#include "nccl_profiler_net.h"

#define NCCL_NET_TRAFFIC_CLASS_UNDEF (-1)

typedef ncclNetDeviceHandle_v9_t ncclNetDeviceHandle_v10_t;

typedef struct {
    int ndevs;
    int devs[NCCL_NET_MAX_DEVS_PER_NIC_V9];
} ncclNetVDeviceProps_v10_t;

typedef struct {
    int trafficClass; /* NCCL_NET_TRAFFIC_CLASS_UNDEF or a value for the plugin */
} ncclNetCommConfig_v10_t;

typedef struct {
    char *name;
    char *pciPath;
    uint64_t guid;
    int ptrSupport;
    int regIsGlobal;
    int forceFlush;
    int speed;     /* Mb/s */
    int port;
    float latency; /* us */
    int maxComms;
    int maxRecvs;
    ncclNetDeviceType netDeviceType;
    int netDeviceVersion;
    ncclNetVDeviceProps_v10_t vProps;
    size_t maxP2pBytes;
    size_t maxCollBytes;
} ncclNetProperties_v10_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t *props);
    ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(int dev, ncclNetCommConfig_v10_t *config, void *handle, void **sendComm,
                            ncclNetDeviceHandle_v10_t **sendDevComm);
    ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_v10_t **recvDevComm);
    ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
    ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
                                void **mhandle);
    ncclResult_t (*deregMr)(void *comm, void *mhandle);
    ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle, void *phandle,
                          void **request);
    ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                          void **phandles, void **request);
    ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles, void **request);
    ncclResult_t (*test)(void *request, int *done, int *sizes);
    ncclResult_t (*closeSend)(void *sendComm);
    ncclResult_t (*closeRecv)(void *recvComm);
    ncclResult_t (*closeListen)(void *listenComm);
    ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
    ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
    ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v10_t *props);
} ncclNet_v10_t;

#if defined(__x86_64__)
#ifdef __cplusplus
#define RN_ABI_ASSERT(e, m) static_assert(e, m)
#else
#define RN_ABI_ASSERT(e, m) _Static_assert(e, m)
#endif
RN_ABI_ASSERT(sizeof(ncclNetCommConfig_v10_t) == 4, "comm config v10 size");
RN_ABI_ASSERT(sizeof(ncclNetVDeviceProps_v10_t) == 20, "vProps v10 size");
RN_ABI_ASSERT(sizeof(ncclNetProperties_v10_t) == 104, "properties v10 size");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v10_t, forceFlush) == 32, "props v10: forceFlush");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v10_t, netDeviceVersion) == 60, "props v10: netDeviceVersion");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v10_t, vProps) == 64, "props v10: vProps");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v10_t, maxP2pBytes) == 88, "props v10: maxP2pBytes");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v10_t, maxCollBytes) == 96, "props v10: maxCollBytes");
RN_ABI_ASSERT(sizeof(ncclNet_v10_t) == 20 * 8, "net v10: 1 name + 19 function pointers");
RN_ABI_ASSERT(offsetof(ncclNet_v10_t, init) == 8, "net v10: init");
RN_ABI_ASSERT(offsetof(ncclNet_v10_t, connect) == 40, "net v10: connect");
RN_ABI_ASSERT(offsetof(ncclNet_v10_t, isend) == 80, "net v10: isend");
RN_ABI_ASSERT(offsetof(ncclNet_v10_t, irecv) == 88, "net v10: irecv");
RN_ABI_ASSERT(offsetof(ncclNet_v10_t, test) == 104, "net v10: test");
RN_ABI_ASSERT(offsetof(ncclNet_v10_t, makeVDevice) == 152, "net v10: makeVDevice");
#undef RN_ABI_ASSERT
#endif

#endif
