/* plugin/ib/ibvwrap.h: the project's one door to libibverbs, loaded with
 * dlopen so that the plugin and the tools load (and report no device) on a
 * host without rdma-core. The plugin, railnet-write-bw and railnet-diag all
 * call verbs through this table; nothing else in the project links or
 * dlopens libibverbs.
 *
 * Contract: ibvwrap_open() loads libibverbs.so.1 (or the path given, e.g.
 * softnic's library) and resolves every symbol at the rdma-core version node
 * a program compiled against stock headers binds to. Required symbols missing
 * make it fail with a message; optional ones (reg_mr_iova2 from IBVERBS_1.8,
 * reg_dmabuf_mr from IBVERBS_1.12) are NULL when the library lacks them, which
 * is also how the rdma-core version is inferred when the file name does not
 * carry it. The inline verbs of verbs.h (ibv_post_send, ibv_poll_cq ...) go
 * through the context's ops and need nothing from here. Not thread-safe to
 * open/close; the loaded table may be used from any thread. */
#ifndef RAILNET_IB_IBVWRAP_H
#define RAILNET_IB_IBVWRAP_H

#include <infiniband/verbs.h>
#include <limits.h>
#include <stdbool.h>

/* mlx5dv types appear only behind pointers: no need for mlx5dv.h here. */
struct mlx5dv_qp_init_attr;
struct mlx5dv_obj;
struct mlx5dv_devx_umem;
struct mlx5dv_devx_umem_in;
struct mlx5dv_devx_uar;
struct mlx5dv_devx_obj;
struct mlx5dv_context_attr;

struct ibvwrap {
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
    int (*query_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask, struct ibv_qp_init_attr *init);
    int (*get_async_event)(struct ibv_context *ctx, struct ibv_async_event *ev);
    void (*ack_async_event)(struct ibv_async_event *ev);
    const char *(*event_type_str)(enum ibv_event_type ev);
    const char *(*wc_status_str)(enum ibv_wc_status st);
    /* optional (NULL when absent) */
    int (*query_gid_ex)(struct ibv_context *ctx, uint32_t port, uint32_t index, struct ibv_gid_entry *entry,
                        uint32_t flags, size_t entry_size); /* IBVERBS_1.11, rdma-core >= 32 */

    /* libmlx5.so.1, the direct-verbs half (GPU-initiated path). Loaded only
     * by ibvwrap_open_mlx5(); all NULL before, and mlx5_handle stays NULL
     * when the library is absent. Required once loaded: create_qp, init_obj.
     * Optional: is_supported (MLX5_1.8); the DEVX set (MLX5_1.7): open_device,
     * umem_reg/dereg, alloc/free_uar, query_eqn, obj_create/modify/query/
     * destroy; devx_umem_reg_ex (MLX5_1.19, dmabuf user memory).  ibvwrap_devx_missing()
     * names the first DEVX entry point the loaded library lacks. */
    void *mlx5_handle;
    char mlx5_path[PATH_MAX];
    struct ibv_qp *(*mlx5dv_create_qp)(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr,
                                       struct mlx5dv_qp_init_attr *mlx5_attr); /* MLX5_1.3 */
    int (*mlx5dv_init_obj)(struct mlx5dv_obj *obj, uint64_t obj_type);      /* MLX5_1.2 */
    bool (*mlx5dv_is_supported)(struct ibv_device *dev);
    struct mlx5dv_devx_umem *(*mlx5dv_devx_umem_reg)(struct ibv_context *ctx, void *addr,
                                                     size_t size, uint32_t access);
    int (*mlx5dv_devx_umem_dereg)(struct mlx5dv_devx_umem *umem);
    struct mlx5dv_devx_umem *(*mlx5dv_devx_umem_reg_ex)(struct ibv_context *ctx,
                                                        struct mlx5dv_devx_umem_in *in);
    struct ibv_context *(*mlx5dv_open_device)(struct ibv_device *dev,
                                              struct mlx5dv_context_attr *attr);
    struct mlx5dv_devx_uar *(*mlx5dv_devx_alloc_uar)(struct ibv_context *ctx, uint32_t flags);
    void (*mlx5dv_devx_free_uar)(struct mlx5dv_devx_uar *uar);
    int (*mlx5dv_devx_query_eqn)(struct ibv_context *ctx, uint32_t vector, uint32_t *eqn);
    struct mlx5dv_devx_obj *(*mlx5dv_devx_obj_create)(struct ibv_context *ctx, const void *in,
                                                      size_t inlen, void *out, size_t outlen);
    int (*mlx5dv_devx_obj_modify)(struct mlx5dv_devx_obj *obj, const void *in, size_t inlen,
                                  void *out, size_t outlen);
    int (*mlx5dv_devx_obj_query)(struct mlx5dv_devx_obj *obj, const void *in, size_t inlen,
                                 void *out, size_t outlen);
    int (*mlx5dv_devx_obj_destroy)(struct mlx5dv_devx_obj *obj);
    /* optional: a device-wide command (QUERY_HCA_CAP) */
    int (*mlx5dv_devx_general_cmd)(struct ibv_context *ctx, const void *in, size_t inlen, void *out,
                                   size_t outlen);
    /* libibverbs, for the RoCE next-hop MAC of a DEVX QP (optional use) */
    struct ibv_ah *(*create_ah)(struct ibv_pd *pd, struct ibv_ah_attr *attr);
    int (*destroy_ah)(struct ibv_ah *ah);
};

/* NULL when v's libmlx5 has every DEVX entry point the GPU-queue path
 * needs; else the name of the first one missing. */
const char *ibvwrap_devx_missing(const struct ibvwrap *v);

/* 0 on success; otherwise fills err with why. path NULL: "libibverbs.so.1". */
int ibvwrap_open(struct ibvwrap *v, const char *path, char *err, size_t errlen);
void ibvwrap_close(struct ibvwrap *v);

/* Load libmlx5.so.1 into v (after ibvwrap_open): from the directory of the
 * libibverbs that v loaded first (so softnic's pair is found together),
 * then through the loader's search path. Idempotent. 0, or -1 with why in
 * err (library absent, or missing mlx5dv_create_qp/mlx5dv_init_obj); v's
 * verbs table stays usable either way. ibvwrap_close unloads it too. */
int ibvwrap_open_mlx5(struct ibvwrap *v, char *err, size_t errlen);

/* The plugin's process-wide table: loaded once by the plugin's init
 * (RAILNET_IBVERBS_LIB or libibverbs.so.1) and read-only afterwards.
 * ibvwrap_global() is NULL until a load succeeded. */
int ibvwrap_global_load(const char *path, char *err, size_t errlen);
const struct ibvwrap *ibvwrap_global(void);
/* ibvwrap_open_mlx5 on the process-wide table (after ibvwrap_global_load),
 * under its lock; later callers get the first result again. */
int ibvwrap_global_load_mlx5(char *err, size_t errlen);
#define RN_IBV(fn) (ibvwrap_global()->fn)

/* ibv_query_port with the full attribute struct (extended op when the
 * provider has it, the compat entry point otherwise). 0 or an errno. */
int ibvwrap_query_port(const struct ibvwrap *v, struct ibv_context *ctx, uint8_t port,
                        struct ibv_port_attr *attr);

/* Registration honouring optional access flags (IBV_ACCESS_RELAXED_ORDERING):
 * through reg_mr_iova2 when present; without it an optional flag is dropped
 * and *ro_dropped set, as rdma-core < 28 would. */
struct ibv_mr *ibvwrap_reg_mr(const struct ibvwrap *v, struct ibv_pd *pd, void *addr,
                               size_t len, int access, int *ro_dropped);

#endif
