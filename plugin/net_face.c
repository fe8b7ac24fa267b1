/* plugin/net_face.c: what the net tables' faces share (net_face.h). */
#include "net_face.h"

#include <stdlib.h>

#include "ib/comm_setup.h"
#include "ib/config.h"
#include "ib/log.h"
#include "ib/mr.h"
#include "ib/prof.h"

#define NET_CTX_MAGIC 0x5854434eu

ncclResult_t net_face_init(ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
    log_set(logger);
    prof_set(prof);
    config_load();
    return devices_init(mr_probe_gpu);
}

struct comm_opts net_face_opts(int traffic_class)
{
    struct comm_opts o = { .tc = COMM_TC_DEFAULT };
    if (traffic_class >= 0 && traffic_class <= 255)
        o.tc = traffic_class;
    else if (traffic_class != -1) /* NCCL_NET_TRAFFIC_CLASS_UNDEF */
        WARN("NET/railnet: NCCL's traffic class %d is not 0..255; using RAILNET_IB_TC or 0", traffic_class);
    return o;
}

ncclResult_t net_ctx_new(void **ctx, uint64_t comm_id, int traffic_class)
{
    if (!ctx)
        return ncclInvalidArgument;
    *ctx = NULL;
    struct net_ctx *x = calloc(1, sizeof(*x));
    if (!x)
        return ncclSystemError;
    x->magic = NET_CTX_MAGIC;
    x->comm_id = comm_id;
    x->opts = net_face_opts(traffic_class);
    INFO(NCCL_INIT | NCCL_NET, "NET/railnet: context for communicator 0x%llx: traffic class %d%s",
         (unsigned long long)comm_id, comm_traffic_class(&x->opts),
         rn_config()->ib_tc >= 0 ? " (RAILNET_IB_TC)" : x->opts.tc >= 0 ? " (NCCL's config)" : "");
    *ctx = x;
    return ncclSuccess;
}

const struct comm_opts *net_ctx_opts(void *ctx, const char *what, int *bad)
{
    struct net_ctx *x = ctx;
    *bad = 0;
    if (!x)
        return NULL;
    if (x->magic != NET_CTX_MAGIC) {
        WARN("NET/railnet: %s: %p is not a context of this plugin's init", what, ctx);
        *bad = 1;
        return NULL;
    }
    return &x->opts;
}

ncclResult_t net_ctx_free(void *ctx)
{
    int bad;
    net_ctx_opts(ctx, "finalize", &bad);
    if (bad)
        return ncclInvalidArgument;
    if (ctx) {
        ((struct net_ctx *)ctx)->magic = 0;
        free(ctx);
    }
    return ncclSuccess;
}

ncclResult_t net_face_devices(int *ndev)
{
    if (!ndev)
        return ncclInvalidArgument;
    *ndev = devices_count();
    return ncclSuccess;
}

ncclResult_t net_face_listen(int dev, const struct comm_opts *opts, void *handle, void **listen_comm)
{
    if (!handle || !listen_comm)
        return ncclInvalidArgument;
    return comm_listen(dev, opts, handle, listen_comm);
}

ncclResult_t net_face_connect(int dev, const struct comm_opts *opts, void *handle, void **send_comm,
                              void **dev_comm)
{
    if (dev_comm)
        *dev_comm = NULL; /* no device offload: the proxy drives the data path */
    if (!handle || !send_comm)
        return ncclInvalidArgument;
    return comm_connect(dev, opts, handle, send_comm);
}

ncclResult_t net_face_accept(void *listen_comm, void **recv_comm, void **dev_comm)
{
    if (dev_comm)
        *dev_comm = NULL;
    if (!listen_comm || !recv_comm)
        return ncclInvalidArgument;
    return comm_accept(listen_comm, recv_comm);
}

ncclResult_t net_face_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
    if (!comm || !mhandle)
        return ncclInvalidArgument;
    return mr_register(comm_device(comm), data, size, type, mhandle);
}

ncclResult_t net_face_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
                                    void **mhandle)
{
    if (!comm || !mhandle)
        return ncclInvalidArgument;
    return mr_register_dmabuf(comm_device(comm), data, size, type, offset, fd, mhandle);
}

ncclResult_t net_face_make_vdevice(int *d, int n, const int *devs, int max)
{
    return devices_make_virtual(n, devs, max, d);
}

ncclResult_t net_face_init_ctx(void **ctx, uint64_t comm_id, const int *traffic_class, ncclDebugLogger_t logger,
                               ncclProfilerCallback_t prof)
{
    if (ctx)
        *ctx = NULL;
    CHECK(net_face_init(logger, prof));
    if (!ctx)
        return ncclInvalidArgument;
    return net_ctx_new(ctx, comm_id, traffic_class ? *traffic_class : -1);
}

ncclResult_t net_face_listen_ctx(void *ctx, int dev, void *handle, void **listen_comm)
{
    int bad;
    const struct comm_opts *o = net_ctx_opts(ctx, "listen", &bad);
    if (bad) {
        if (listen_comm)
            *listen_comm = NULL;
        return ncclInvalidArgument;
    }
    return net_face_listen(dev, o, handle, listen_comm);
}

ncclResult_t net_face_connect_ctx(void *ctx, int dev, void *handle, void **send_comm, void **dev_comm)
{
    int bad;
    const struct comm_opts *o = net_ctx_opts(ctx, "connect", &bad);
    if (bad) {
        if (send_comm)
            *send_comm = NULL;
        return ncclInvalidArgument;
    }
    return net_face_connect(dev, o, handle, send_comm, dev_comm);
}

ncclResult_t net_face_set_attr(void *ctx, const void *attr)
{
    int bad;
    net_ctx_opts(ctx, "setNetAttr", &bad);
    return bad || !attr ? ncclInvalidArgument : ncclSuccess;
}
