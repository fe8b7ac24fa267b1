/* include/nccl_net_v12.h: railnet's own statement of NCCL's network plugin
 * ABI, version 12, the newest NCCL 2.30 loads.
 *
 * Written from NCCL 2.30's src/include/plugin/net/net_v12.h and its uses
 * (src/plugin/net.cc, src/graph/topo.cc, the IB transport's init.cc), not
 * copied. What changed from v11:
 * - a virtual device may hold up to 8 physical devices (vProps.devs[8]);
 * - the properties gain railId and planeId (int16_t): the rail and the
 *   plane the device belongs to, NCCL_NET_ID_UNDEF (-1) when unknown. Where
 *   both are defined NCCL's graph search keeps a channel on NICs of one
 *   rail and plane, and NCCL_NET_MERGE_POLICY=RAIL merges only NICs of one
 *   rail; undefined values constrain nothing.
 * The table itself has v11's entries with v12's types. The static
 * assertions pin every size and offset for x86-64. */
#ifndef RAILNET_NCCL_NET_V12_H
#define RAILNET_NCCL_NET_V12_H

#include "nccl_net_v11.h"

#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8
#define NCCL_NET_ID_UNDEF (-1)

typedef ncclNetDeviceHandle_v11_t ncclNetDeviceHandle_v12_t;

typedef struct {
    int ndevs;
    int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
} ncclNetVDeviceProps_v12_t;

typedef struct {
    int trafficClass; /* NCCL_NET_TRAFFIC_CLASS_UNDEF or a value for the plugin */
} ncclNetCommConfig_v12_t;

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
    ncclNetVDeviceProps_v12_t vProps;
    size_t maxP2pBytes;
    size_t maxCollBytes;
    int maxMultiRequestSize;
    int16_t railId;
    int16_t planeId;
} ncclNetProperties_v12_t;

typedef ncclNetCommAttr_v11_t ncclNetCommAttr_v12_t;
typedef ncclNetAttr_v11_t ncclNetAttr_v12_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_v12_t *config,
                         ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t *props);
    ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,
                            ncclNetDeviceHandle_v12_t **sendDevComm);
    ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_v12_t **recvDevComm);
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
    ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v12_t *props);
    ncclResult_t (*finalize)(void *ctx);
    ncclResult_t (*setNetAttr)(void *ctx, ncclNetAttr_v12_t *netAttr);
} ncclNet_v12_t;

#if defined(__x86_64__)
#ifdef __cplusplus
#define RN_ABI_ASSERT(e, m) static_assert(e, m)
#else
#define RN_ABI_ASSERT(e, m) _Static_assert(e, m)
#endif
RN_ABI_ASSERT(sizeof(ncclNetCommConfig_v12_t) == 4, "comm config v12 size");
RN_ABI_ASSERT(sizeof(ncclNetVDeviceProps_v12_t) == 36, "vProps v12 size");
RN_ABI_ASSERT(sizeof(ncclNetProperties_v12_t) == 128, "properties v12 size");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, forceFlush) == 32, "props v12: forceFlush");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, netDeviceVersion) == 60, "props v12: netDeviceVersion");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, vProps) == 64, "props v12: vProps");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, maxP2pBytes) == 104, "props v12: maxP2pBytes");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, maxCollBytes) == 112, "props v12: maxCollBytes");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, maxMultiRequestSize) == 120, "props v12: maxMultiRequestSize");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, railId) == 124, "props v12: railId");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, planeId) == 126, "props v12: planeId");
RN_ABI_ASSERT(sizeof(ncclNet_v12_t) == 22 * 8, "net v12: 1 name + 21 function pointers");
RN_ABI_ASSERT(offsetof(ncclNet_v12_t, init) == 8, "net v12: init");
RN_ABI_ASSERT(offsetof(ncclNet_v12_t, listen) == 32, "net v12: listen");
RN_ABI_ASSERT(offsetof(ncclNet_v12_t, connect) == 40, "net v12: connect");
RN_ABI_ASSERT(offsetof(ncclNet_v12_t, isend) == 80, "net v12: isend");
RN_ABI_ASSERT(offsetof(ncclNet_v12_t, irecv) == 88, "net v12: irecv");
RN_ABI_ASSERT(offsetof(ncclNet_v12_t, test) == 104, "net v12: test");
RN_ABI_ASSERT(offsetof(ncclNet_v12_t, makeVDevice) == 152, "net v12: makeVDevice");
RN_ABI_ASSERT(offsetof(ncclNet_v12_t, finalize) == 160, "net v12: finalize");
RN_ABI_ASSERT(offsetof(ncclNet_v12_t, setNetAttr) == 168, "net v12: setNetAttr");
#undef RN_ABI_ASSERT
#endif

#endif
