/* include/nccl_net_v9.h: railnet's own statement of NCCL's network plugin
 * ABI, version 9 (NCCL 2.30 loads the newest of v12 ... v6 a plugin exports).
 *
 * Written from NCCL 2.30's src/include/plugin/net/net_v9.h and its loader
 * (src/plugin/net/net_v9.cc), not copied. What changed from v8:
 * - isend's size and irecv's sizes are size_t (test still reports int);
 * - the properties gain forceFlush (NCCL flushes every receive), vProps
 *   (the physical devices a device is made of), maxP2pBytes (the largest
 *   isend/irecv size NCCL may use; at most NCCL_MAX_NET_SIZE_BYTES) and
 *   maxCollBytes;
 * - makeVDevice(&d, props) builds a virtual device over props->devs[] (at
 *   most 4 for v9..v11, NCCL never asks for fewer than 2) and returns its
 *   index; devices() counts it from then on. A refusal makes NCCL give up
 *   that merge and keep the devices apart.
 * The static assertions pin every size and offset for x86-64. */
#ifndef RAILNET_NCCL_NET_V9_H
#define RAILNET_NCCL_NET_V9_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_net_v8.h"

/* The largest maxP2pBytes / maxCollBytes NCCL accepts (1 TiB). */
#define NCCL_MAX_NET_SIZE_BYTES (1ull << 40)
/* Physical devices in one virtual device, tables v9 to v11. */
#define NCCL_NET_MAX_DEVS_PER_NIC_V9 4

typedef ncclNetDeviceHandle_v8_t ncclNetDeviceHandle_v9_t;

typedef struct {
    int ndevs;
    int devs[NCCL_NET_MAX_DEVS_PER_NIC_V9];
} ncclNetVDeviceProps_v9_t;

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
    ncclNetVDeviceProps_v9_t vProps;
    size_t maxP2pBytes;
    size_t maxCollBytes;
} ncclNetProperties_v9_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(ncclDebugLogger_t logFunction);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t *props);
    ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
    ncclResult_t (*connect)(int dev, void *handle, void **sendComm, ncclNetDeviceHandle_v9_t **sendDevComm);
    ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_v9_t **recvDevComm);
    ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
    ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
                                void **mhandle);
    ncclResult_t (*deregMr)(void *comm, void *mhandle);
    ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle, void **request);
    ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                          void **request);
    ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles, void **request);
    ncclResult_t (*test)(void *request, int *done, int *sizes);
    ncclResult_t (*closeSend)(void *sendComm);
    ncclResult_t (*closeRecv)(void *recvComm);
    ncclResult_t (*closeListen)(void *listenComm);
    ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
    ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
    ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v9_t *props);
} ncclNet_v9_t;

#if defined(__x86_64__)
#ifdef __cplusplus
#define RN_ABI_ASSERT(e, m) static_assert(e, m)
#else
#define RN_ABI_ASSERT(e, m) _Static_assert(e, m)
#endif
RN_ABI_ASSERT(sizeof(ncclNetVDeviceProps_v9_t) == 20, "vProps v9 size");
RN_ABI_ASSERT(sizeof(ncclNetProperties_v9_t) == 104, "properties v9 size");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, pciPath) == 8, "props v9: pciPath");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, guid) == 16, "props v9: guid");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, ptrSupport) == 24, "props v9: ptrSupport");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, regIsGlobal) == 28, "props v9: regIsGlobal");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, forceFlush) == 32, "props v9: forceFlush");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, speed) == 36, "props v9: speed");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, port) == 40, "props v9: port");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, latency) == 44, "props v9: latency");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, maxComms) == 48, "props v9: maxComms");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, maxRecvs) == 52, "props v9: maxRecvs");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, netDeviceType) == 56, "props v9: netDeviceType");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, netDeviceVersion) == 60, "props v9: netDeviceVersion");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, vProps) == 64, "props v9: vProps");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, maxP2pBytes) == 88, "props v9: maxP2pBytes");
RN_ABI_ASSERT(offsetof(ncclNetProperties_v9_t, maxCollBytes) == 96, "props v9: maxCollBytes");
RN_ABI_ASSERT(sizeof(ncclNet_v9_t) == 20 * 8, "net v9: 1 name + 19 function pointers");
RN_ABI_ASSERT(offsetof(ncclNet_v9_t, listen) == 32, "net v9: listen");
RN_ABI_ASSERT(offsetof(ncclNet_v9_t, isend) == 80, "net v9: isend");
RN_ABI_ASSERT(offsetof(ncclNet_v9_t, irecv) == 88, "net v9: irecv");
RN_ABI_ASSERT(offsetof(ncclNet_v9_t, test) == 104, "net v9: test");
RN_ABI_ASSERT(offsetof(ncclNet_v9_t, irecvConsumed) == 144, "net v9: irecvConsumed");
RN_ABI_ASSERT(offsetof(ncclNet_v9_t, makeVDevice) == 152, "net v9: makeVDevice");
#undef RN_ABI_ASSERT
#endif

#endif
