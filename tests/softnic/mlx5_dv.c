/* mlx5_dv.c: the face of softnic's libmlx5.so.1 -- the mlx5dv_* entry
 * points programs bind to (symbol versions in mlx5.map).
 *
 * softnic devices are not mlx5 devices: mlx5dv_is_supported() says false,
 * so probing programs (perftest, NCCL) take their plain verbs path.  What
 * softnic does implement is the GPU-initiated path's subset:
 * mlx5dv_create_qp (RC, no mlx5-specific flags) and mlx5dv_init_obj for
 * those QPs, for CQs and for PDs (mlx5_nic.h), and the DEVX subset of
 * mlx5_devx.c (umem, UAR, CREATE_CQ/CREATE_QP and the QP state moves, on
 * contexts opened with MLX5DV_CONTEXT_FLAGS_DEVX).  Everything else fails
 * cleanly: NULL with errno EOPNOTSUPP, or EOPNOTSUPP returned. */
#include "mlx5_nic.h"

#include <errno.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT bool mlx5dv_is_supported(struct ibv_device *device)
{
    (void)device;
    return false;
}

EXPORT struct ibv_context *mlx5dv_open_device(struct ibv_device *device,
                                              struct mlx5dv_context_attr *attr)
{
    if (attr && ((attr->flags & ~(uint32_t)MLX5DV_CONTEXT_FLAGS_DEVX) || attr->comp_mask)) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    struct ibv_context *ctx = ibv_open_device(device);
    if (ctx && attr && (attr->flags & MLX5DV_CONTEXT_FLAGS_DEVX)) {
        if (!mlx5_priv_is_softnic(ctx)) {
            ibv_close_device(ctx);
            errno = EOPNOTSUPP;
            return NULL;
        }
        mlx5_devx_note_context(ctx);    /* DEVX calls need such a context */
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
    if (type & ~(uint64_t)(MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ | MLX5DV_OBJ_PD))
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
