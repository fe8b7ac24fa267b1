/* priv.c: the companion API of softnic_priv.h (SOFTNIC_PRIVATE_1.0). */
#include "softnic.h"
#include "softnic_priv.h"

#include <stdatomic.h>

#define EXPORT __attribute__((visibility("default")))

static _Atomic(softnic_priv_qp_hook) qp_hook;
static _Atomic(softnic_priv_cq_hook) cq_hook;

EXPORT bool softnic_priv_is_softnic(struct ibv_context *ctx)
{
    /* This library opens softnic devices only (see verbs.c). */
    return ctx != NULL;
}

EXPORT int softnic_priv_set_destroy_hook(softnic_priv_qp_hook qp_gone, softnic_priv_cq_hook cq_gone)
{
    atomic_store(&qp_hook, qp_gone);
    atomic_store(&cq_hook, cq_gone);
    return 0;
}

EXPORT bool softnic_priv_gpu_is_device_ptr(const void *p)
{
    return gpu_is_device_ptr(p);
}

EXPORT int softnic_priv_gpu_read(void *dst, const void *gpu_src, size_t len)
{
    return gpu_copy_from_device(dst, gpu_src, len);
}

EXPORT int softnic_priv_gpu_write(void *gpu_dst, const void *src, size_t len)
{
    return gpu_copy_to_device(gpu_dst, src, len);
}

/* Only softnic's mlx5 NIC thread calls this (on or off): it is that
 * thread's role for SOFTNIC_STATS either way. */
EXPORT void softnic_priv_thread_is_nic(bool on)
{
    sn_stats_role(SN_ROLE_MLX5);
    requester_direct_copies_cuda(on);
}

/* The mlx5 layer's engine QPs: a GPU rings their doorbells and waits for
 * their CQEs (config.c, SOFTNIC_ACK_POLL_US). */
EXPORT int softnic_priv_qp_poll_acks(struct ibv_qp *ibqp)
{
    if (!ibqp)
        return EINVAL;
    struct sn_qp *qp = sn_qp_of(ibqp);
    pthread_mutex_lock(&qp->lock);
    qp->poll_acks = true;
    pthread_mutex_unlock(&qp->lock);
    return 0;
}

EXPORT uint32_t softnic_priv_max_wqe_sz_sq(void)
{
    return softnic_global()->conf.max_wqe_sz_sq;
}

/* A line on stderr, as softnic's own SN_DEBUG lines, when SOFTNIC_DEBUG is
 * set; libmlx5's NIC thread has no configuration of its own. */
EXPORT void softnic_priv_debug(const char *file, int line, const char *msg)
{
    if (softnic_global()->conf.debug)
        sn_log(file, line, "%s", msg);
}

void priv_qp_destroying(struct ibv_qp *qp)
{
    softnic_priv_qp_hook h = atomic_load(&qp_hook);
    if (h)
        h(qp);
}

void priv_cq_destroying(struct ibv_cq *cq)
{
    softnic_priv_cq_hook h = atomic_load(&cq_hook);
    if (h)
        h(cq);
}
