/* mlx5_dv.c: the face of softnic's libmlx5.so.1 -- the mlx5dv_* entry
 * points programs bind to (symbol versions in mlx5.map).
 *
 * softnic's devices answer mlx5dv_is_supported() as a ConnectX does (true),
 * so probing programs (perftest, NCCL's IB transport and its GDAKI GIN) go
 * down their mlx5 paths and meet, call by call, either a working entry
 * point or the refusal of a ConnectX without that capability.  What
 * softnic does implement is the GPU-initiated path's subset:
 * mlx5dv_create_qp (RC, no mlx5-specific flags) and mlx5dv_init_obj for
 * those QPs, for CQs and for PDs (mlx5_nic.h), and the DEVX subset of
 * mlx5_devx.c (umem, UAR, CREATE_CQ/CREATE_QP, the QP state moves and
 * queries, QUERY_HCA_CAP and QUERY_ROCE_ADDRESS, on every softnic
 * context), address handles' AV,
 * and mlx5dv_reg_dmabuf_mr without data-direct.  Everything else fails
 * cleanly: NULL with errno EOPNOTSUPP, or EOPNOTSUPP returned (the rest
 * of rdma-core 50's symbol set is in mlx5_stubs.c). */
#include "mlx5_nic.h"

#include <errno.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

/* Every device softnic's libibverbs lists is one softnic emulates as an
 * mlx5 NIC; next to another libibverbs, no device is. */
EXPORT bool mlx5dv_is_supported(struct ibv_device *device)
{
    return device != NULL && mlx5_priv_init() == 0;
}

/* rdma-core >= 54 (MLX5_1.25), facts from its mlx5dv.h. */
#define SN_MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT (1 << 0)
EXPORT struct ibv_mr *mlx5dv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
                                           uint64_t iova, int fd, int access, int mlx5_access);
EXPORT int mlx5dv_get_data_direct_sysfs_path(struct ibv_context *ctx, char *buf,
                                             size_t buf_len);

/* A dmabuf registration with mlx5 access flags: without any, the plain
 * verb (so fd -1 gives EBADF, which NCCL's probe reads as "supported");
 * DATA_DIRECT or an unknown flag is refused as by a NIC with no
 * data-direct function. */
struct ibv_mr *mlx5dv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
                                    uint64_t iova, int fd, int access, int mlx5_access)
{
    if (!pd || !mlx5_priv_is_softnic(pd->context) || mlx5_access != 0) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    return ibv_reg_dmabuf_mr(pd, offset, length, iova, fd, access);
}

/* ENODEV is the documented answer of an mlx5 device that is not behind a
 * data-direct DMA function, which no softnic device is. */
int mlx5dv_get_data_direct_sysfs_path(struct ibv_context *ctx, char *buf, size_t buf_len)
{
    (void)buf, (void)buf_len;
    if (!ctx || !mlx5_priv_is_softnic(ctx))
        return EOPNOTSUPP;
    return ENODEV;
}

EXPORT struct ibv_context *mlx5dv_open_device(struct ibv_device *device,
                                              struct mlx5dv_context_attr *attr)
{
    if (attr && ((attr->flags & ~(uint32_t)MLX5DV_CONTEXT_FLAGS_DEVX) || attr->comp_mask)) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    struct ibv_context *ctx = ibv_open_device(device);
    /* Every softnic context has DEVX (mlx5_devx.c); another
     * libibverbs' context cannot be given it. */
    if (ctx && attr && (attr->flags & MLX5DV_CONTEXT_FLAGS_DEVX) && !mlx5_priv_is_softnic(ctx)) {
        ibv_close_device(ctx);
        errno = EOPNOTSUPP;
        return NULL;
    }
    return ctx;
}

EXPORT int mlx5dv_query_device(struct ibv_context *ctx, struct mlx5dv_context *out)
{
    if (!ctx || !out)
        return EINVAL;
    if (!mlx5_priv_is_softnic(ctx))
        return EOPNOTSUPP;
    out->version = 1;
    out->flags = 0;
    out->comp_mask = 0;         /* no optional capability is reported */
    return 0;
}

EXPORT struct ibv_qp *mlx5dv_create_qp(struct ibv_context *ctx,
                                       struct ibv_qp_init_attr_ex *qp_attr,
                                       struct mlx5dv_qp_init_attr *mlx5_attr)
{
    if (!ctx || !mlx5_priv_is_softnic(ctx) || (mlx5_attr && mlx5_attr->comp_mask)) {
        errno = EOPNOTSUPP;     /* DC, create flags, send ops: not here */
        return NULL;
    }
    struct ibv_qp *qp = NULL;
    int rc = mlx5_nic_qp_create(ctx, qp_attr, &qp);
    if (rc) {
        errno = rc;
        return NULL;
    }
    return qp;
}

EXPORT struct ibv_cq_ex *mlx5dv_create_cq(struct ibv_context *ctx,
                                          struct ibv_cq_init_attr_ex *cq_attr,
                                          struct mlx5dv_cq_init_attr *mlx5_attr)
{
    if (!ctx || !mlx5_priv_is_softnic(ctx) || (mlx5_attr && mlx5_attr->comp_mask)) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    return ibv_create_cq_ex(ctx, cq_attr);
}

static int init_obj(struct mlx5dv_obj *obj, uint64_t type)
{
    if (!obj)
        return EINVAL;
    if (type & ~(uint64_t)(MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ | MLX5DV_OBJ_PD | MLX5DV_OBJ_AH))
        return EOPNOTSUPP;
    int rc = 0;
    if ((type & MLX5DV_OBJ_QP) && !rc)
        rc = obj->qp.in && obj->qp.out ? mlx5_nic_qp_info(obj->qp.in, obj->qp.out) : EINVAL;
    if ((type & MLX5DV_OBJ_CQ) && !rc) {
        if (!obj->cq.in || !obj->cq.out)
            rc = EINVAL;
        else if (!mlx5_priv_is_softnic(obj->cq.in->context))
            rc = EOPNOTSUPP;
        else
            rc = mlx5_nic_cq_info(obj->cq.in, obj->cq.out);
    }
    if ((type & MLX5DV_OBJ_PD) && !rc) {
        if (!obj->pd.in || !obj->pd.out) {
            rc = EINVAL;
        } else {
            obj->pd.out->pdn = obj->pd.in->handle;
            obj->pd.out->comp_mask = 0;
            mlx5_devx_note_pd(obj->pd.in);
        }
    }
    if ((type & MLX5DV_OBJ_AH) && !rc) {
        if (!obj->ah.in || !obj->ah.out)
            rc = EINVAL;
        else if (!mlx5_priv_is_softnic(obj->ah.in->context))
            rc = EOPNOTSUPP;
        else {
            /* softnic's wire routes by GID alone: the address vector has
             * no next-hop MAC (zero) and nothing a consumer must write. */
            static const struct mlx5_wqe_av no_l2;
            obj->ah.out->av = (struct mlx5_wqe_av *)&no_l2;
            obj->ah.out->comp_mask = 0;
        }
    }
    return rc;
}

/* Two versions, as rdma-core has: the MLX5_1.0 one predates the PD and
 * other object types, which it never accepted. */
EXPORT int mlx5_sn_init_obj_1_2(struct mlx5dv_obj *obj, uint64_t type);
EXPORT int mlx5_sn_init_obj_1_0(struct mlx5dv_obj *obj, uint64_t type);
int mlx5_sn_init_obj_1_2(struct mlx5dv_obj *obj, uint64_t type)
{
    return init_obj(obj, type);
}
int mlx5_sn_init_obj_1_0(struct mlx5dv_obj *obj, uint64_t type)
{
    if (type & ~(uint64_t)(MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ | MLX5DV_OBJ_SRQ | MLX5DV_OBJ_RWQ))
        return EINVAL;
    return init_obj(obj, type);
}
__asm__(".symver mlx5_sn_init_obj_1_2, mlx5dv_init_obj@@MLX5_1.2");
__asm__(".symver mlx5_sn_init_obj_1_0, mlx5dv_init_obj@MLX5_1.0");

/* ---------------------------------------------------------------- stubs
 * Bound by perftest (and other mlx5 programs); none of them has a meaning
 * without mlx5 firmware. */
EXPORT int mlx5dv_set_context_attr(struct ibv_context *ctx, enum mlx5dv_set_ctx_attr_type type,
                                   void *attr)
{
    (void)ctx; (void)type; (void)attr;
    return EOPNOTSUPP;
}

EXPORT int mlx5dv_get_clock_info(struct ibv_context *ctx, struct mlx5dv_clock_info *info)
{
    (void)ctx; (void)info;
    return EOPNOTSUPP;
}

EXPORT int _mlx5dv_query_port(struct ibv_context *ctx, uint32_t port_num,
                              struct mlx5dv_port *info, size_t info_len)
{
    (void)ctx; (void)port_num; (void)info; (void)info_len;
    return EOPNOTSUPP;
}

EXPORT struct mlx5dv_qp_ex *mlx5dv_qp_ex_from_ibv_qp_ex(struct ibv_qp_ex *qp)
{
    (void)qp;
    errno = EOPNOTSUPP;
    return NULL;
}

EXPORT struct mlx5dv_mkey *mlx5dv_create_mkey(struct mlx5dv_mkey_init_attr *attr)
{
    (void)attr;
    errno = EOPNOTSUPP;
    return NULL;
}

EXPORT int mlx5dv_destroy_mkey(struct mlx5dv_mkey *mkey)
{
    (void)mkey;
    return EOPNOTSUPP;
}

EXPORT int mlx5dv_crypto_login(struct ibv_context *ctx, struct mlx5dv_crypto_login_attr *attr)
{
    (void)ctx; (void)attr;
    return EOPNOTSUPP;
}

EXPORT struct mlx5dv_dek *mlx5dv_dek_create(struct ibv_context *ctx,
                                            struct mlx5dv_dek_init_attr *attr)
{
    (void)ctx; (void)attr;
    errno = EOPNOTSUPP;
    return NULL;
}

EXPORT int mlx5dv_dek_destroy(struct mlx5dv_dek *dek)
{
    (void)dek;
    return EOPNOTSUPP;
}
