/* plugin/net_v11.c: the net v11 face, `ncclNetPlugin_v11`
 * (include/nccl_net_v11.h): a context per NCCL communicator (its traffic
 * class applies to the comms listened and connected through it), v11's
 * properties, finalize, setNetAttr (net_face.h). */
#include <string.h>

#include "ib/comm_setup.h"
#include "ib/flush.h"
#include "ib/log.h"
#include "ib/mr.h"
#include "ib/p2p.h"
#include "nccl_net_v11.h"
#include "net_face.h"

static ncclResult_t v11_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_v11_t *config,
                             ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
    return net_face_init_ctx(ctx, comm_id, config ? &config->trafficClass : NULL, logger, prof);
}

static ncclResult_t v11_get_properties(int dev, ncclNetProperties_v11_t *props)
{
    struct devices_props c;
    if (!props)
        return ncclInvalidArgument;
    CHECK(devices_properties(dev, &c));
    memset(props, 0, sizeof(*props));
    NET_FACE_PROPS_V9(props, &c);
    NET_FACE_VPROPS(&props->vProps, &c, NCCL_NET_MAX_DEVS_PER_NIC_V11);
    props->maxMultiRequestSize = c.max_multi_request;
    return ncclSuccess;
}

static ncclResult_t v11_connect(void *ctx, int dev, void *handle, void **send_comm,
                                ncclNetDeviceHandle_v11_t **dev_comm)
{
    return net_face_connect_ctx(ctx, dev, handle, send_comm, (void **)dev_comm);
}

static ncclResult_t v11_accept(void *listen_comm, void **recv_comm, ncclNetDeviceHandle_v11_t **dev_comm)
{
    return net_face_accept(listen_comm, recv_comm, (void **)dev_comm);
}

static ncclResult_t v11_make_vdevice(int *d, ncclNetVDeviceProps_v11_t *props)
{
    return net_face_make_vdevice(d, props ? props->ndevs : 0, props ? props->devs : NULL, NCCL_NET_MAX_DEVS_PER_NIC_V11);
}

static ncclResult_t v11_set_net_attr(void *ctx, ncclNetAttr_v11_t *attr)
{
    return net_face_set_attr(ctx, attr);
}

RN_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = "railnet",
    .init = v11_init,
    .devices = net_face_devices,
    .getProperties = v11_get_properties,
    .listen = net_face_listen_ctx,
    .connect = v11_connect,
    .accept = v11_accept,
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
    .makeVDevice = v11_make_vdevice,
    .finalize = net_ctx_free,
    .setNetAttr = v11_set_net_attr,
};
