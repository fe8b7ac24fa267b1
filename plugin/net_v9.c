/* plugin/net_v9.c: the net v9 face, `ncclNetPlugin_v9`
 * (include/nccl_net_v9.h): size_t sizes straight to the core, v9's
 * properties, makeVDevice; no profiler handles (NULL). */
#include <string.h>

#include "ib/comm_setup.h"
#include "ib/flush.h"
#include "ib/log.h"
#include "ib/mr.h"
#include "ib/p2p.h"
#include "nccl_net_v9.h"
#include "net_face.h"

static ncclResult_t v9_init(ncclDebugLogger_t logger)
{
    return net_face_init(logger, NULL);
}

static ncclResult_t v9_get_properties(int dev, ncclNetProperties_v9_t *props)
{
    struct devices_props c;
    if (!props)
        return ncclInvalidArgument;
    CHECK(devices_properties(dev, &c));
    memset(props, 0, sizeof(*props));
    NET_FACE_PROPS_V9(props, &c);
    NET_FACE_VPROPS(&props->vProps, &c, NCCL_NET_MAX_DEVS_PER_NIC_V9);
    return ncclSuccess;
}

static ncclResult_t v9_listen(int dev, void *handle, void **listen_comm)
{
    return net_face_listen(dev, NULL, handle, listen_comm);
}

static ncclResult_t v9_connect(int dev, void *handle, void **send_comm, ncclNetDeviceHandle_v9_t **dev_comm)
{
    return net_face_connect(dev, NULL, handle, send_comm, (void **)dev_comm);
}

static ncclResult_t v9_accept(void *listen_comm, void **recv_comm, ncclNetDeviceHandle_v9_t **dev_comm)
{
    return net_face_accept(listen_comm, recv_comm, (void **)dev_comm);
}

static ncclResult_t v9_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request)
{
    return p2p_isend(send_comm, data, size, tag, mhandle, NULL, request);
}

static ncclResult_t v9_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                             void **request)
{
    return p2p_irecv(recv_comm, n, data, sizes, tags, mhandles, NULL, request);
}

static ncclResult_t v9_make_vdevice(int *d, ncclNetVDeviceProps_v9_t *props)
{
    return net_face_make_vdevice(d, props ? props->ndevs : 0, props ? props->devs : NULL, NCCL_NET_MAX_DEVS_PER_NIC_V9);
}

RN_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = "railnet",
    .init = v9_init,
    .devices = net_face_devices,
    .getProperties = v9_get_properties,
    .listen = v9_listen,
    .connect = v9_connect,
    .accept = v9_accept,
    .regMr = net_face_reg_mr,
    .regMrDmaBuf = net_face_reg_mr_dmabuf,
    .deregMr = mr_deregister,
    .isend = v9_isend,
    .irecv = v9_irecv,
    .iflush = flush_iflush,
    .test = p2p_test,
    .closeSend = comm_close_send,
    .closeRecv = p2p_close_recv,
    .closeListen = comm_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = v9_make_vdevice,
};
