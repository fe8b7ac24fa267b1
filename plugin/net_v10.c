/* plugin/net_v10.c: the net v10 face, `ncclNetPlugin_v10`
 * (include/nccl_net_v10.h): NCCL's profiler callback at init, its
 * per-connection traffic class at connect (the accepting side keeps the
 * default: v10's listen has no config), profiler handles straight to the
 * core. */
#include <string.h>

#include "ib/comm_setup.h"
#include "ib/flush.h"
#include "ib/log.h"
#include "ib/mr.h"
#include "ib/p2p.h"
#include "nccl_net_v10.h"
#include "net_face.h"

static ncclResult_t v10_init(ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
    return net_face_init(logger, prof);
}

static ncclResult_t v10_get_properties(int dev, ncclNetProperties_v10_t *props)
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

static ncclResult_t v10_listen(int dev, void *handle, void **listen_comm)
{
    return net_face_listen(dev, NULL, handle, listen_comm);
}

static ncclResult_t v10_connect(int dev, ncclNetCommConfig_v10_t *config, void *handle, void **send_comm,
                                ncclNetDeviceHandle_v10_t **dev_comm)
{
    struct comm_opts o = net_face_opts(config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF);
    return net_face_connect(dev, &o, handle, send_comm, (void **)dev_comm);
}

static ncclResult_t v10_accept(void *listen_comm, void **recv_comm, ncclNetDeviceHandle_v10_t **dev_comm)
{
    return net_face_accept(listen_comm, recv_comm, (void **)dev_comm);
}

static ncclResult_t v10_make_vdevice(int *d, ncclNetVDeviceProps_v10_t *props)
{
    return net_face_make_vdevice(d, props ? props->ndevs : 0, props ? props->devs : NULL, NCCL_NET_MAX_DEVS_PER_NIC_V9);
}

RN_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = "railnet",
    .init = v10_init,
    .devices = net_face_devices,
    .getProperties = v10_get_properties,
    .listen = v10_listen,
    .connect = v10_connect,
    .accept = v10_accept,
    .regMr = net_face_reg_mr,
    .regMrDmaBuf = net_face_reg_mr_dmabuf,
    .deregMr = mr_deregister,
    .isend = p2p_isend,
    .irecv = p2p_irecv,
    .iflush = flush_iflush,
    .test = p2p_test,
    .closeSend = comm_close_send,
    .closeRecv = p2p_close_recv,
    .closeListen = comm_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = v10_make_vdevice,
};
