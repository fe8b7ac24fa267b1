/* plugin/plugin.c: the net v8 face of railnet, `ncclNetPlugin_v8`
 * (include/nccl_net_v8.h; NCCL 2.19 and later load it). It maps the v8 ABI
 * onto the core (plugin/ib/) through the faces' shared part (net_face.h)
 * and holds no logic of its own: its int sizes become the core's size_t
 * ones (a negative size is refused), and its properties are the core's
 * v8 fields. The newer tables are their own small faces (net_v9.c ...
 * net_v12.c); they and the GIN table (gin_plugin.c) are the library's only
 * other exported symbols (built with -fvisibility=hidden). */
#include <string.h>

#include "ib/comm.h"
#include "ib/comm_setup.h"
#include "ib/flush.h"
#include "ib/log.h"
#include "ib/mr.h"
#include "ib/p2p.h"
#include "nccl_net_v8.h"
#include "net_face.h"

static ncclResult_t v8_init(ncclDebugLogger_t logger)
{
    return net_face_init(logger, NULL);
}

static ncclResult_t v8_get_properties(int dev, ncclNetProperties_v8_t *props)
{
    struct devices_props c;
    if (!props)
        return ncclInvalidArgument;
    CHECK(devices_properties(dev, &c));
    memset(props, 0, sizeof(*props));
    props->name = (char *)c.name;
    props->pciPath = c.pci_path;
    props->guid = c.guid;
    props->ptrSupport = c.ptr_support;
    props->regIsGlobal = c.reg_is_global;
    props->speed = c.speed_mbps;
    props->port = c.port;
    props->latency = c.latency_us;
    props->maxComms = c.max_comms;
    props->maxRecvs = c.max_recvs;
    props->netDeviceType = c.net_device_type;
    props->netDeviceVersion = c.net_device_version;
    return ncclSuccess;
}

static ncclResult_t v8_listen(int dev, void *handle, void **listen_comm)
{
    return net_face_listen(dev, NULL, handle, listen_comm);
}

static ncclResult_t v8_connect(int dev, void *handle, void **send_comm, ncclNetDeviceHandle_v8_t **dev_comm)
{
    return net_face_connect(dev, NULL, handle, send_comm, (void **)dev_comm);
}

static ncclResult_t v8_accept(void *listen_comm, void **recv_comm, ncclNetDeviceHandle_v8_t **dev_comm)
{
    return net_face_accept(listen_comm, recv_comm, (void **)dev_comm);
}

static ncclResult_t v8_isend(void *send_comm, void *data, int size, int tag, void *mhandle, void **request)
{
    if (size < 0) {
        *request = NULL;
        WARN("NET/railnet: isend of %d bytes", size);
        return ncclInvalidArgument;
    }
    return p2p_isend(send_comm, data, (size_t)size, tag, mhandle, NULL, request);
}

static ncclResult_t v8_irecv(void *recv_comm, int n, void **data, int *sizes, int *tags, void **mhandles,
                             void **request)
{
    size_t wide[COMM_MAX_RECVS];
    *request = NULL;
    for (int i = 0; i < n && i < COMM_MAX_RECVS; i++) {
        if (sizes[i] < 0) {
            WARN("NET/railnet: irecv buffer %d of %d bytes", i, sizes[i]);
            return ncclInvalidArgument;
        }
        wide[i] = (size_t)sizes[i];
    }
    return p2p_irecv(recv_comm, n, data, wide, tags, mhandles, NULL, request);
}

RN_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = "railnet",
    .init = v8_init,
    .devices = net_face_devices,
    .getProperties = v8_get_properties,
    .listen = v8_listen,
    .connect = v8_connect,
    .accept = v8_accept,
    .regMr = net_face_reg_mr,
    .regMrDmaBuf = net_face_reg_mr_dmabuf,
    .deregMr = mr_deregister,
    .isend = v8_isend,
    .irecv = v8_irecv,
    .iflush = flush_iflush,
    .test = p2p_test,
    .closeSend = comm_close_send,
    .closeRecv = p2p_close_recv,
    .closeListen = comm_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
};
