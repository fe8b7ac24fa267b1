/* plugin/net_v12.c: the net v12 face, `ncclNetPlugin_v12`
 * (include/nccl_net_v12.h), the table NCCL 2.30 prefers: as v11's face,
 * with v12's properties (virtual devices of up to 8, railId and planeId:
 * RAILNET_HCA's, NCCL_NET_ID_UNDEF where it names none; devices.h). */
#include <string.h>

#include "ib/comm_setup.h"
#include "ib/flush.h"
#include "ib/log.h"
#include "ib/mr.h"
#include "ib/p2p.h"
#include "nccl_net_v12.h"
#include "net_face.h"

static ncclResult_t v12_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_v12_t *config,
                             ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
    return net_face_init_ctx(ctx, comm_id, config ? &config->trafficClass : NULL, logger, prof);
}

static ncclResult_t v12_get_properties(int dev, ncclNetProperties_v12_t *props)
{
    struct devices_props c;
    if (!props)
        return ncclInvalidArgument;
    CHECK(devices_properties(dev, &c));
    memset(props, 0, sizeof(*props));
    NET_FACE_PROPS_V9(props, &c);
    NET_FACE_VPROPS(&props->vProps, &c, NCCL_NET_MAX_DEVS_PER_NIC_V12);
    props->maxMultiRequestSize = c.max_multi_request;
    props->railId = (int16_t)c.rail_id;
    props->planeId = (int16_t)c.plane_id;
    return ncclSuccess;
}

static ncclResult_t v12_connect(void *ctx, int dev, void *handle, void **send_comm,
                                ncclNetDeviceHandle_v12_t **dev_comm)
{
    return net_face_connect_ctx(ctx, dev, handle, send_comm, (void **)dev_comm);
}

static ncclResult_t v12_accept(void *listen_comm, void **recv_comm, ncclNetDeviceHandle_v12_t **dev_comm)
{
    return net_face_accept(listen_comm, recv_comm, (void **)dev_comm);
}

static ncclResult_t v12_make_vdevice(int *d, ncclNetVDeviceProps_v12_t *props)
{
    return net_face_make_vdevice(d, props ? props->ndevs : 0, props ? props->devs : NULL, NCCL_NET_MAX_DEVS_PER_NIC_V12);
}

static ncclResult_t v12_set_net_attr(void *ctx, ncclNetAttr_v12_t *attr)
{
    return net_face_set_attr(ctx, attr);
}

RN_EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
    .name = "railnet",
    .init = v12_init,
    .devices = net_face_devices,
    .getProperties = v12_get_properties,
    .listen = net_face_listen_ctx,
    .connect = v12_connect,
    .accept = v12_accept,
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
    .makeVDevice = v12_make_vdevice,
    .finalize = net_ctx_free,
    .setNetAttr = v12_set_net_attr,
};
