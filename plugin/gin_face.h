/* plugin/gin_face.h: what the GIN and RMA faces share (gin_plugin.c,
 * rma_v13.c):
 * init/finalize of an instance, devices, properties, listen/connect and
 * the registrations as the v11 table has them. A face of another version
 * converts its arguments and calls these or the core (plugin/gin/gin.h). */
#ifndef RAILNET_GIN_FACE_H
#define RAILNET_GIN_FACE_H

#include "nccl_gin_v11.h"
#include "nccl_gin_v13.h"
#include "nccl_net_v12.h"

#define RN_EXPORT __attribute__((visibility("default")))

ncclResult_t gin_init(void **ctx, uint64_t comm_id, ncclDebugLogger_t logger);
ncclResult_t gin_finalize(void *ctx);
ncclResult_t gin_devices(int *ndev);
/* The properties of dev with the GIN type this process offers (decided
 * once, from RAILNET_GIN). */
ncclResult_t gin_get_properties(int dev, ncclNetProperties_v11_t *props);
/* v12 properties with the type this process offers (GIN v14). */
ncclResult_t gin_get_properties_v12(int dev, ncclNetProperties_v12_t *props);
/* v12 properties with the proxy type, whatever RAILNET_GIN says: GIN v13
 * (NCCL 2.30.3/2.30.4), whose createContext does not say which GDAKI
 * context its kernels read, and the RMA tables; why is logged once, naming
 * `table` (a GIN table; NULL for an RMA table, which is of the proxy type
 * by definition: nothing logged). */
ncclResult_t gin_get_properties_proxy_v12(int dev, ncclNetProperties_v12_t *props, const char *table);
ncclResult_t gin_listen_face(void *ctx, int dev, void *handle, void **listen_comm);
/* connect of a GIN table that offers the type this process decided: a
 * collComm of the GDAKI type has no proxy QPs (plugin/gin/gin.h). */
ncclResult_t gin_connect_face(void *ctx, void *handles[], int nranks, int rank, void *listen_comm, void **coll_comm);
/* connect of a table of the proxy type whatever RAILNET_GIN says (the RMA
 * tables, GIN v13): proxy QPs always. */
ncclResult_t gin_connect_proxy_face(void *ctx, void *handles[], int nranks, int rank, void *listen_comm,
                                    void **coll_comm);
ncclResult_t gin_reg_mr_sym_face(void *coll_comm, void *data, size_t size, int type, uint64_t flags, void **mhandle,
                                 void **gin_handle);
ncclResult_t gin_reg_mr_sym_dmabuf_face(void *coll_comm, void *data, size_t size, int type, uint64_t offset, int fd,
                                        uint64_t flags, void **mhandle, void **gin_handle);

/* The v13 layout's entries that differ from the core's (rma_v13.c), shared
 * by ncclRmaPlugin_v13 and ncclGinPlugin_v13 (gin_v13.c): createContext
 * (a GIN v13 config; devHandle may be NULL) and iputSignal (no
 * isStrongSignal: every signal strong). */
ncclResult_t face_v13_create_context(void *coll_comm, ncclGinConfig_v13_t *cfg, void **ctx,
                                     ncclNetDeviceHandle_v11_t **dev_handle);
ncclResult_t face_v13_iput_signal(void *ctx, int context, uint64_t src_off, void *src_mh, size_t size,
                                  uint64_t dst_off, void *dst_mh, uint32_t rank, uint64_t sig_off, void *sig_mh,
                                  uint64_t sig_value, uint32_t sig_op, void **request);

/* The entries of a v13-layout table (ncclGinPlugin_v13 and
 * ncclRmaPlugin_v13 have the same layout under two ABI type names), with
 * its getProperties. */
#define FACE_V13_TABLE(get_properties)                                                                     \
    {                                                                                                      \
        .name = "railnet", .init = gin_init, .devices = gin_devices, .getProperties = (get_properties),    \
        .listen = gin_listen_face, .connect = gin_connect_proxy_face,                                      \
        .createContext = face_v13_create_context,                                                          \
        .regMrSym = gin_reg_mr_sym_face, .regMrSymDmaBuf = gin_reg_mr_sym_dmabuf_face,                     \
        .deregMrSym = gin_dereg_mr_sym, .destroyContext = gin_rma_destroy, .closeColl = gin_close_coll,    \
        .closeListen = gin_close_listen, .iput = gin_rma_iput, .iputSignal = face_v13_iput_signal,         \
        .iget = gin_rma_iget, .iflush = gin_rma_iflush, .test = gin_test, .ginProgress = gin_rma_progress, \
        .queryLastError = gin_rma_query_last_error, .finalize = gin_finalize,                              \
    }

#endif
