/* plugin/plugin.c: the NCCL face of railnet. It maps the net v8 ABI onto the
 * ib core (plugin/ib/) and holds no logic of its own; a later ABI version is
 * another small table here, never a second copy of the core. This table and
 * the GIN table (gin_plugin.c) are the library's only exported symbols
 * (built with -fvisibility=hidden). */
#include "ib/comm.h"
#include "ib/comm_setup.h"
#include "ib/config.h"
#include "ib/devices.h"
#include "ib/flush.h"
#include "ib/log.h"
#include "ib/mr.h"
#include "ib/p2p.h"
#include "nccl_net_v8.h"

#define RN_EXPORT __attribute__((visibility("default")))

static ncclResult_t rn_init(ncclDebugLogger_t logger)
{
    log_set(logger);
    config_load();
    return devices_init(mr_probe_gpu);
}

static ncclResult_t rn_devices(int *ndev)
{
    if (!ndev)
        return ncclInvalidArgument;
    *ndev = devices_count();
    return ncclSuccess;
}

static ncclResult_t rn_listen(int dev, void *handle, void **listen_comm)
{
    if (!handle || !listen_comm)
        return ncclInvalidArgument;
    return comm_listen(dev, handle, listen_comm);
}

static ncclResult_t rn_connect(int dev, void *handle, void **send_comm, ncclNetDeviceHandle_v8_t **dev_comm)
{
    if (dev_comm)
        *dev_comm = NULL; /* no device offload: the proxy drives the data path */
    if (!handle || !send_comm)
        return ncclInvalidArgument;
    return comm_connect(dev, handle, send_comm);
}

static ncclResult_t rn_accept(void *listen_comm, void **recv_comm, ncclNetDeviceHandle_v8_t **dev_comm)
{
    if (dev_comm)
        *dev_comm = NULL;
    if (!listen_comm || !recv_comm)
        return ncclInvalidArgument;
    return comm_accept(listen_comm, recv_comm);
}

static ncclResult_t rn_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
    if (!comm || !mhandle)
        return ncclInvalidArgument;
    return mr_register(comm_device(comm), data, size, type, mhandle);
}

static ncclResult_t rn_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
                                     void **mhandle)
{
    if (!comm || !mhandle)
        return ncclInvalidArgument;
    return mr_register_dmabuf(comm_device(comm), data, size, type, offset, fd, mhandle);
}

RN_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = "railnet",
    .init = rn_init,
    .devices = rn_devices,
    .getProperties = devices_properties,
    .listen = rn_listen,
    .connect = rn_connect,
    .accept = rn_accept,
    .regMr = rn_reg_mr,
    .regMrDmaBuf = rn_reg_mr_dmabuf,
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
};
