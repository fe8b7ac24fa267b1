/* tools/common/verbs_dl.h: libibverbs loaded with dlopen for the tools.
 *
 * Contract: verbs_dl_open() loads libibverbs.so.1 (or the path given, e.g.
 * softnic's library) and resolves every symbol at the rdma-core version node
 * a program compiled against stock headers binds to. Required symbols missing
 * make it fail with a message; optional ones (reg_mr_iova2 from IBVERBS_1.8,
 * reg_dmabuf_mr from IBVERBS_1.12) are NULL when the library lacks them, which
 * is also how the rdma-core version is inferred when the file name does not
 * carry it. The inline verbs of verbs.h (ibv_post_send, ibv_poll_cq ...) go
 * through the context's ops and need nothing from here. Not thread-safe to
 * open/close; the loaded table may be used from any thread. */
#ifndef RAILNET_TOOLS_VERBS_DL_H
#define RAILNET_TOOLS_VERBS_DL_H

#include <infiniband/verbs.h>
#include <limits.h>

struct verbs_dl {
    void *handle;
    char path[PATH_MAX];   /* resolved file that was loaded */
    int rdma_core_version; /* from the file name, 0 when it does not say */

    struct ibv_device **(*get_device_list)(int *num);
    void (*free_device_list)(struct ibv_device **list);
    const char *(*get_device_name)(struct ibv_device *dev);
    struct ibv_context *(*open_device)(struct ibv_device *dev);
    int (*close_device)(struct ibv_context *ctx);
    int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
    int (*query_port_compat)(struct ibv_context *ctx, uint8_t port, void *attr);
    int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
    struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
    int (*dealloc_pd)(struct ibv_pd *pd);
    struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
    struct ibv_mr *(*reg_mr_iova2)(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
                                   unsigned int access);
    struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset, size_t len,
                                    uint64_t iova, int fd, int access);
    int (*dereg_mr)(struct ibv_mr *mr);
    struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_context,
                                struct ibv_comp_channel *ch, int comp_vector);
    int (*destroy_cq)(struct ibv_cq *cq);
    struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
    int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
    int (*destroy_qp)(struct ibv_qp *qp);
};

/* 0 on success; otherwise fills err with why. path NULL: "libibverbs.so.1". */
int verbs_dl_open(struct verbs_dl *v, const char *path, char *err, size_t errlen);
void verbs_dl_close(struct verbs_dl *v);

/* ibv_query_port with the full attribute struct (extended op when the
 * provider has it, the compat entry point otherwise). 0 or an errno. */
int verbs_dl_query_port(const struct verbs_dl *v, struct ibv_context *ctx, uint8_t port,
                        struct ibv_port_attr *attr);

/* Registration honouring optional access flags (IBV_ACCESS_RELAXED_ORDERING):
 * through reg_mr_iova2 when present; without it an optional flag is dropped
 * and *ro_dropped set, as rdma-core < 28 would. */
struct ibv_mr *verbs_dl_reg_mr(const struct verbs_dl *v, struct ibv_pd *pd, void *addr,
                               size_t len, int access, int *ro_dropped);

#endif
