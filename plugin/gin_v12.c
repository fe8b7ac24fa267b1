/* plugin/gin_v12.c: `ncclGinPlugin_v12` (include/nccl_gin_v12.h), the GIN
 * table NCCL 2.29 looks up first. Both types, as v11 (gin_plugin.c decides
 * which). What v12 adds:
 *  - connect's nConnections and queueDepth: a collComm has one set of QPs
 *    per peer and takes NCCL's queue depth per peer (GIN_PEER_REQS); more
 *    connections are accepted and all carried by that set (logged once); a
 *    queue depth above GIN_PEER_REQS is accepted, the plugin then returning
 *    no request (try again) past its own bound, as v11 does;
 *  - createContext's nContexts: passed to the core (the proxy type's
 *    context is host-only whatever the count; the GDAKI type makes as
 *    many contexts, each with QPs and table parts of its own, as NCCL
 *    2.29's device code indexes by contextId);
 *  - iput/iputSignal's connectionId: checked against nConnections of the
 *    collComm's connect, then ignored (one set of QPs). */
#include <stdatomic.h>

#include "gin/gin.h"
#include "gin_face.h"
#include "ib/log.h"
#include "nccl_gin_v12.h"

static _Atomic int said_connections;

static ncclResult_t connect_v12(void *ctx, void *handles[], int nranks, int rank, int nconn, int depth,
                                void *listen_comm, void **coll_comm)
{
    if (nconn < 1 || depth < 0) {
        WARN("NET/railnet/GIN: connect: %d connections, queue depth %d: not valid", nconn, depth);
        return ncclInvalidArgument;
    }
    if (nconn > 1 && !atomic_exchange(&said_connections, 1))
        INFO(NCCL_INIT | NCCL_NET, "NET/railnet/GIN: connect: %d connections asked for; railnet carries them all on "
                                   "one set of QPs per peer (one per port)", nconn);
    if (depth > GIN_PEER_REQS)
        INFO(NCCL_NET, "NET/railnet/GIN: connect: queue depth %d; railnet takes %d requests per peer and asks for "
                       "the rest again", depth, GIN_PEER_REQS);
    ncclResult_t e = gin_connect_face(ctx, handles, nranks, rank, listen_comm, coll_comm);
    if (e == ncclSuccess) {
        ((struct gin_coll *)*coll_comm)->nconnections = nconn;
        ((struct gin_coll *)*coll_comm)->queue_depth = depth;
    }
    return e;
}

static ncclResult_t create_context_v12(void *coll_comm, int nsignals, int ncounters, int ncontexts, void **gin_ctx,
                                       ncclNetDeviceHandle_v11_t **dev_handle)
{
    if (ncontexts < 1) {
        WARN("NET/railnet/GIN: createContext: %d contexts: not valid", ncontexts);
        return ncclInvalidArgument;
    }
    return gin_create_context(coll_comm, nsignals, ncounters, ncontexts, -1,
                              ((struct gin_coll *)coll_comm)->queue_depth, gin_ctx, dev_handle);
}

static int connection_ok(void *coll_comm, int id, const char *what)
{
    struct gin_coll *c = gin_coll_of(coll_comm, what);
    if (!c)
        return 0;
    if (id >= 0 && id < (c->nconnections > 0 ? c->nconnections : 1))
        return 1;
    WARN("NET/railnet/GIN: %s: connection %d out of range", what, id);
    return 0;
}

static ncclResult_t iput_v12(void *coll_comm, uint64_t src_off, void *src_mh, size_t size, uint64_t dst_off,
                             void *dst_mh, uint32_t rank, int conn, void **request)
{
    if (!connection_ok(coll_comm, conn, "iput"))
        return ncclInvalidArgument;
    return gin_iput(coll_comm, src_off, src_mh, size, dst_off, dst_mh, rank, request);
}

static ncclResult_t iput_signal_v12(void *coll_comm, uint64_t src_off, void *src_mh, size_t size, uint64_t dst_off,
                                    void *dst_mh, uint32_t rank, uint64_t sig_off, void *sig_mh, uint64_t sig_value,
                                    uint32_t sig_op, int conn, void **request)
{
    if (!connection_ok(coll_comm, conn, "iputSignal"))
        return ncclInvalidArgument;
    return gin_iput_signal(coll_comm, src_off, src_mh, size, dst_off, dst_mh, rank, sig_off, sig_mh, sig_value,
                           sig_op, request);
}

RN_EXPORT const ncclGin_v12_t ncclGinPlugin_v12 = {
    .name = "railnet",
    .init = gin_init,
    .devices = gin_devices,
    .getProperties = gin_get_properties,
    .listen = gin_listen_face,
    .connect = connect_v12,
    .createContext = create_context_v12,
    .regMrSym = gin_reg_mr_sym_face,
    .regMrSymDmaBuf = gin_reg_mr_sym_dmabuf_face,
    .deregMrSym = gin_dereg_mr_sym,
    .destroyContext = gin_destroy_context,
    .closeColl = gin_close_coll,
    .closeListen = gin_close_listen,
    .iput = iput_v12,
    .iputSignal = iput_signal_v12,
    .test = gin_test,
    .ginProgress = gin_progress,
    .queryLastError = gin_query_last_error,
    .finalize = gin_finalize,
};
