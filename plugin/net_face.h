/* plugin/net_face.h: what the net tables' faces share (plugin/plugin.c is
 * v8's, plugin/net_v9.c ... net_v12.c the newer ones). Each face converts
 * its version's arguments and calls these or the core (plugin/ib/); none
 * holds data-path logic.
 *
 * Contexts (net v11+ init, and NCCL's per-connection config of v10): a
 * context records the communicator's id and what its comms' QPs get
 * (struct comm_opts: the traffic class NCCL's config asks for); listen and
 * connect made through it apply that. A context not made by init (wrong
 * magic) is refused with a WARN; NULL means the defaults. */
#ifndef RAILNET_PLUGIN_NET_FACE_H
#define RAILNET_PLUGIN_NET_FACE_H

#include <stddef.h>
#include <stdint.h>

#include "ib/comm.h"
#include "ib/devices.h"
#include "nccl_net_v8.h"
#include "nccl_profiler_net.h"

#define RN_EXPORT __attribute__((visibility("default")))

struct net_ctx {
    uint32_t magic;
    uint64_t comm_id;
    struct comm_opts opts;
};

/* The plugin's init, every version: the logger, RAILNET_*, the devices;
 * prof: NCCL's profiler callback (v10+; NULL: none). */
ncclResult_t net_face_init(ncclDebugLogger_t logger, ncclProfilerCallback_t prof);
/* A context for init (v11+): NCCL's traffic class (NCCL_NET_TRAFFIC_CLASS_UNDEF
 * or 0..255; another value is a WARN and the default). */
ncclResult_t net_ctx_new(void **ctx, uint64_t comm_id, int traffic_class);
/* The options of ctx (NULL ctx: NULL, the defaults); *bad set when ctx is
 * not one of net_ctx_new's (a WARN naming `what`). */
const struct comm_opts *net_ctx_opts(void *ctx, const char *what, int *bad);
ncclResult_t net_ctx_free(void *ctx);
/* A traffic class from NCCL's config as comm_opts (v10's connect). */
struct comm_opts net_face_opts(int traffic_class);

ncclResult_t net_face_devices(int *ndev);
ncclResult_t net_face_listen(int dev, const struct comm_opts *opts, void *handle, void **listen_comm);
/* dev_comm: NCCL's device-offload handle, always answered NULL (the proxy
 * drives the data path). */
ncclResult_t net_face_connect(int dev, const struct comm_opts *opts, void *handle, void **send_comm,
                              void **dev_comm);
ncclResult_t net_face_accept(void *listen_comm, void **recv_comm, void **dev_comm);
ncclResult_t net_face_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t net_face_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
                                    void **mhandle);
/* v11+: init with a context, listen and connect through one, finalize;
 * setNetAttr's hints (concurrent peers and flows, op/algo/proto) are
 * accepted and not acted on: railnet's QPs per connection come from
 * RAILNET_QPS_PER_CONN, not from the communicator's pattern. */
ncclResult_t net_face_init_ctx(void **ctx, uint64_t comm_id, const int *traffic_class, ncclDebugLogger_t logger,
                               ncclProfilerCallback_t prof);
ncclResult_t net_face_listen_ctx(void *ctx, int dev, void *handle, void **listen_comm);
ncclResult_t net_face_connect_ctx(void *ctx, int dev, void *handle, void **send_comm, void **dev_comm);
ncclResult_t net_face_set_attr(void *ctx, const void *attr);

/* makeVDevice: props' devices (n of them; max: the table's limit). */
ncclResult_t net_face_make_vdevice(int *d, int n, const int *devs, int max);

/* The fields every properties version from v9 on has, from the core's. */
#define NET_FACE_PROPS_V9(p, c)                          \
    do {                                                 \
        (p)->name = (char *)(c)->name;                   \
        (p)->pciPath = (c)->pci_path;                    \
        (p)->guid = (c)->guid;                           \
        (p)->ptrSupport = (c)->ptr_support;              \
        (p)->regIsGlobal = (c)->reg_is_global;           \
        (p)->forceFlush = (c)->force_flush;              \
        (p)->speed = (c)->speed_mbps;                    \
        (p)->port = (c)->port;                           \
        (p)->latency = (c)->latency_us;                  \
        (p)->maxComms = (c)->max_comms;                  \
        (p)->maxRecvs = (c)->max_recvs;                  \
        (p)->netDeviceType = (c)->net_device_type;       \
        (p)->netDeviceVersion = (c)->net_device_version; \
        (p)->maxP2pBytes = (c)->max_p2p_bytes;           \
        (p)->maxCollBytes = (c)->max_coll_bytes;         \
    } while (0)

/* vProps: the parts, at most max of them (a device has at most
 * HS_MAX_PORTS parts, below every table's limit). */
#define NET_FACE_VPROPS(v, c, max)                                          \
    do {                                                                    \
        (v)->ndevs = (c)->nparts < (max) ? (c)->nparts : (max);             \
        for (int i_ = 0; i_ < (v)->ndevs; i_++)                             \
            (v)->devs[i_] = (c)->parts[i_];                                 \
    } while (0)

#endif
