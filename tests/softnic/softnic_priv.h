/* softnic_priv.h: softnic's companion API (version node SOFTNIC_PRIVATE_1.0),
 * for softnic's own libmlx5.so.1 only; it finds these with dlvsym at run
 * time (tests/softnic/mlx5_priv.c).  Functions return 0 or a positive errno.
 *
 * - softnic_priv_is_softnic(ctx): true for a context this library opened.
 * - softnic_priv_set_destroy_hook(qp_gone, cq_gone): qp_gone(qp) runs at the
 *   start of ibv_destroy_qp(qp), before softnic frees anything; cq_gone(cq)
 *   runs in ibv_destroy_cq(cq) once the CQ is known to be destroyable (no
 *   QP uses it), before it is freed.  Neither runs with a softnic lock held,
 *   so a hook may take its own locks and call verbs.  One pair per process;
 *   NULL clears.
 * - softnic_priv_gpu_is_device_ptr(p), softnic_priv_gpu_read(dst, gpu_src,
 *   len), softnic_priv_gpu_write(gpu_dst, src, len): the NIC's own access
 *   to CUDA memory (gpu.c), for queues that live in GPU memory (DEVX user
 *   memory).  The copies are synchronous on a non-blocking stream of the
 *   calling thread; 0, ENODEV without CUDA, EFAULT/EIO on failure.
 * - softnic_priv_thread_is_nic(on): while on, the calling thread is a NIC's
 *   (libmlx5's doorbell thread): its posts may copy small CUDA payloads out
 *   of GPU memory and transmit them themselves on an idle QP
 *   (requester_direct_copies_cuda).
 * - softnic_priv_max_wqe_sz_sq(): the largest send WQE in bytes that this
 *   NIC states (SOFTNIC_MAX_WQE_SZ_SQ), 0 when it states none.
 * - softnic_priv_qp_poll_acks(qp): qp is an engine QP that a GPU drives:
 *   its completer polls for the ACKs it awaits (SOFTNIC_ACK_POLL_US).
 * - softnic_priv_debug(file, line, msg): msg as a softnic log line, only
 *   with SOFTNIC_DEBUG set (libmlx5's NIC thread has no configuration). */
#ifndef SOFTNIC_PRIV_H
#define SOFTNIC_PRIV_H

#include <infiniband/verbs.h>
#include <stdbool.h>

typedef void (*softnic_priv_qp_hook)(struct ibv_qp *qp);
typedef void (*softnic_priv_cq_hook)(struct ibv_cq *cq);

bool softnic_priv_is_softnic(struct ibv_context *ctx);
int softnic_priv_set_destroy_hook(softnic_priv_qp_hook qp_gone, softnic_priv_cq_hook cq_gone);
bool softnic_priv_gpu_is_device_ptr(const void *p);
int softnic_priv_gpu_read(void *dst, const void *gpu_src, size_t len);
int softnic_priv_gpu_write(void *gpu_dst, const void *src, size_t len);
void softnic_priv_thread_is_nic(bool on);
uint32_t softnic_priv_max_wqe_sz_sq(void);
int softnic_priv_qp_poll_acks(struct ibv_qp *qp);
void softnic_priv_debug(const char *file, int line, const char *msg);

/* Called by qp.c / cq.c. */
void priv_qp_destroying(struct ibv_qp *qp);
void priv_cq_destroying(struct ibv_cq *cq);

#endif
