/* include/nccl_net_v11.h: railnet's own statement of NCCL's network plugin
 * ABI, version 11 (also the properties NCCL 2.28's GIN table v11 reports:
 * include/nccl_gin_v11.h).
 *
 * Written from NCCL 2.30's src/include/plugin/net/net_v11.h and its loader
 * (src/plugin/net/net_v11.cc), not copied. What changed from v10:
 * - init(&ctx, commId, config, logger, profiler) is called once per NCCL
 *   communicator and returns a context; the config (traffic class) moves
 *   from connect to init, and listen and connect take the context;
 *   finalize(ctx) ends it;
 * - the properties gain maxMultiRequestSize (requests NCCL may group into
 *   one multi-request; 1: none);
 * - setNetAttr(ctx, attr) hints how the communicator will use the network
 *   (per send/recv comm: concurrent peers and flows per peer; the op,
 *   algorithm and protocol), NCCL_NET_ATTR_UNDEF where NCCL does not say;
 *   it may be NULL.
 * The static assertions pin every size and offset for x86-64. */
#ifndef RAILNET_NCCL_NET_V11_H
#define RAILNET_NCCL_NET_V11_H

#include "nccl_net_v10.h"

#define NCCL_NET_MAX_DEVS_PER_NIC_V11 NCCL_NET_MAX_DEVS_PER_NIC_V9
#define NCCL_NET_ATTR_UNDEF (-1)

typedef ncclNetDeviceHandle_v10_t ncclNetDeviceHandle_v11_t;

typedef struct {
    int ndevs;
    int devs[NCCL_NET_MAX_DEVS_PER_NIC_V11];
} ncclNetVDeviceProps_v11_t;

typedef struct {
    int trafficClass; /* NCCL_NET_TRAFFIC_CLASS_UNDEF or a value for the plugin */
} ncclNetCommConfig_v11_t;

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
    ncclNetVDeviceProps_v11_t vProps;
    size_t maxP2pBytes;
    size_t maxCollBytes;
    int maxMultiRequestSize;
} ncclNetProperties_v11_t;

typedef struct {
    int32_t maxConcurrentPeers;
    int32_t minConcurrentPeers;
    int32_t maxFlowsPerPeer;
    int32_t minFlowsPerPeer;
} ncclNetCommAttr_v11_t;

typedef struct {
    ncclNetCommAttr_v11_t sendCommAttr;
    ncclNetCommAttr_v11_t recvCommAttr;
    uint32_t op;
    uint32_t algo;
    uint32_t proto;
} ncclNetAttr_v11_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_v11_t *config,
                         ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t *props);
    ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,
                            ncclNetDeviceHandle_v11_t **sendDevComm);
    ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_v11_t **recvDevComm);
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
    ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v11_t *props);
    ncclResult_t (*finalize)(void *ctx);
    ncclResult_t (*setNetAttr)(void *ctx, ncclNetAttr_v11_t *netAttr);
} ncclNet_v11_t;

#if defined(__x86_64__)
#ifdef __cplusplus
#define RN_ABI_ASSERT(e, m) static_assert(e, m)
#else
#define RN_ABI_ASSERT(e, m) _Static_assert(e, m)
#endif
RN_ABI_ASSERT(sizeof(ncclNetDeviceHandle_v11_t) == 32, "device handle v11 size");
RN_ABI_ASSERT(sizeof(ncclNetCommConfig_v11_t) == 4, "comm config v11 size");
RN_ABI_ASSERT(sizeof(ncclNetVDeviceProps_v11_t) == 20, "vProps v11 size");
RN_ABI_ASSERT(sizeof(ncclNetProperties_v11_t) == 112, "properties v11 size");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, guid) == 16, "props v11: guid");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, regIsGlobal) == 28, "props v11: regIsGlobal");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, forceFlush) == 32, "props v11: forceFlush");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, speed) == 36, "props v11: speed");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, latency) == 44, "props v11: latency");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, maxRecvs) == 52, "props v11: maxRecvs");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, netDeviceType) == 56, "props v11: netDeviceType");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, netDeviceVersion) == 60, "props v11: netDeviceVersion");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, vProps) == 64, "props v11: vProps");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, maxP2pBytes) == 88, "props v11: maxP2pBytes");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, maxCollBytes) == 96, "props v11: maxCollBytes");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, maxMultiRequestSize) == 104, "props v11: maxMultiRequestSize");
RN_ABI_ASSERT(sizeof(ncclNetCommAttr_v11_t) == 16, "comm attr v11 size");
RN_ABI_ASSERT(sizeof(ncclNetAttr_v11_t) == 44, "net attr v11 size");
RN_ABI_ASSERT(offsetof(ncclNetAttr_v11_t, recvCommAttr) == 16, "net attr v11: recvCommAttr");
RN_ABI_ASSERT(offsetof(ncclNetAttr_v11_t, op) == 32, "net attr v11: op");
RN_ABI_ASSERT(offsetof(ncclNetAttr_v11_t, proto) == 40, "net attr v11: proto");
RN_ABI_ASSERT(sizeof(ncclNet_v11_t) == 22 * 8, "net v11: 1 name + 21 function pointers");
RN_ABI_ASSERT(offsetof(ncclNet_v11_t, listen) == 32, "net v11: listen");
RN_ABI_ASSERT(offsetof(ncclNet_v11_t, isend) == 80, "net v11: isend");
RN_ABI_ASSERT(offsetof(ncclNet_v11_t, test) == 104, "net v11: test");
RN_ABI_ASSERT(offsetof(ncclNet_v11_t, makeVDevice) == 152, "net v11: makeVDevice");
RN_ABI_ASSERT(offsetof(ncclNet_v11_t, finalize) == 160, "net v11: finalize");
RN_ABI_ASSERT(offsetof(ncclNet_v11_t, setNetAttr) == 168, "net v11: setNetAttr");
#undef RN_ABI_ASSERT
#endif

#endif
