/* efa.c: softnic's libefa.so.1.  perftest links libefa.so.1 and binds
 * efadv_query_device/efadv_create_qp_ex (used only for its SRD connection
 * type), so softnic ships this library next to its libibverbs.so.1.  A
 * softnic device is not an EFA device: every entry point fails cleanly
 * (EOPNOTSUPP returned, or NULL with errno EOPNOTSUPP).  Versions in
 * efa.map. */
#include <errno.h>
#include <infiniband/efadv.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT struct ibv_qp *efadv_create_driver_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr,
                                             uint32_t driver_qp_type)
{
    (void)pd; (void)attr; (void)driver_qp_type;
    errno = EOPNOTSUPP;
    return NULL;
}

EXPORT struct ibv_qp *efadv_create_qp_ex(struct ibv_context *ctx,
                                         struct ibv_qp_init_attr_ex *attr_ex,
                                         struct efadv_qp_init_attr *efa_attr, uint32_t inlen)
{
    (void)ctx; (void)attr_ex; (void)efa_attr; (void)inlen;
    errno = EOPNOTSUPP;
    return NULL;
}

EXPORT int efadv_query_device(struct ibv_context *ctx, struct efadv_device_attr *attr,
                              uint32_t inlen)
{
    (void)ctx; (void)attr; (void)inlen;
    return EOPNOTSUPP;
}

EXPORT int efadv_query_ah(struct ibv_ah *ah, struct efadv_ah_attr *attr, uint32_t inlen)
{
    (void)ah; (void)attr; (void)inlen;
    return EOPNOTSUPP;
}

EXPORT struct ibv_cq_ex *efadv_create_cq(struct ibv_context *ctx,
                                         struct ibv_cq_init_attr_ex *attr_ex,
                                         struct efadv_cq_init_attr *efa_attr, uint32_t inlen)
{
    (void)ctx; (void)attr_ex; (void)efa_attr; (void)inlen;
    errno = EOPNOTSUPP;
    return NULL;
}

EXPORT struct efadv_cq *efadv_cq_from_ibv_cq_ex(struct ibv_cq_ex *cq)
{
    (void)cq;
    errno = EOPNOTSUPP;
    return NULL;
}
