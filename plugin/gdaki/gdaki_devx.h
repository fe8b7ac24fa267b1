/* gdaki_devx.h: the send QP of a gdaki pair built with DEVX, so that its
 * send ring, doorbell records and CQ live in memory railnet chooses --
 * GPU memory (RAILNET_GDAKI_QUEUE_MEM=gpu), or host memory
 * (=host-devx, the same path without a GPU) -- as IBGDA does on ConnectX:
 * the memory is registered as DEVX user memory (umem), a UAR page is
 * allocated, and the CQ and the RC QP are created and moved
 * RST->INIT->RTR->RTS with PRM commands (gdaki_prm.h).  The kernel gets the
 * same struct gdaki_qp_dev as on the host path (flag GDAKI_QP_FLAG_GPU_QUEUE
 * when the queue is GPU memory), so the device code does not change.
 *
 * Contract: every call returns 0 or -1 with the reason in err (naming the
 * PRM status and syndrome of a refused command).  gdaki_devx_open needs
 * ibvwrap_open_mlx5 done; it opens the device with
 * MLX5DV_CONTEXT_FLAGS_DEVX (DEVX commands need such a context) and says
 * why not when the library or the device cannot.  gdaki_devx_create leaves
 * the QP in INIT and fills pr->dvqp / pr->dvcq as mlx5dv_init_obj would;
 * gdaki_devx_destroy undoes any prefix of it. */
#ifndef RAILNET_GDAKI_DEVX_H
#define RAILNET_GDAKI_DEVX_H

#include "gdaki_pair.h"

struct ibv_context *gdaki_devx_open(const struct ibvwrap *v, struct ibv_device *dev,
                                    char *err, size_t errlen);
int gdaki_devx_create(struct gdaki_pair *pr, uint32_t depth, int gpu, char *err, size_t errlen);
uint32_t gdaki_devx_qpn(const struct gdaki_pair *pr);
/* INIT -> RTR -> RTS toward remote (our PSN is pr->psn). */
int gdaki_devx_connect(struct gdaki_pair *pr, const struct gdaki_qp_info *remote, char *err,
                       size_t errlen);
/* The most 16-byte units one send WQE may hold on ctx's device
 * (QUERY_HCA_CAP's max_wqe_sz_sq: prm_max_wqe_ds), or 0 when the device
 * will not say (a context the kernel gives no DEVX, or a firmware that
 * refuses the command: softnic); callers then take the 63 that the ds
 * field counts, as the mlx5 kernel driver assumes 16 basic blocks. */
uint32_t gdaki_devx_max_wqe_ds(const struct ibvwrap *v, struct ibv_context *ctx);
/* enum ibv_qp_state of the QP (QUERY_QP), or -1. */
int gdaki_devx_state(struct gdaki_pair *pr);
/* 2ERR_QP: 0 or -1. */
int gdaki_devx_fail(struct gdaki_pair *pr);
void gdaki_devx_destroy(struct gdaki_pair *pr);

#endif
