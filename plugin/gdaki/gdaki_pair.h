/* gdaki_pair.h: the insides of struct gdaki_pair (public API in
 * railnet_gdaki.h), shared by gdaki_pair.c and the benchmark support of
 * plugin/gdaki; not for other components. */
#ifndef RAILNET_GDAKI_PAIR_H
#define RAILNET_GDAKI_PAIR_H

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include "ibvwrap.h"
#include "railnet_gdaki.h"

#define GDAKI_PAIR_MAX_REGS 8
/* Receives / CPU-path sends outstanding on the ordinary QP. */
#define GDAKI_PAIR_RECV_DEPTH 256

struct gdaki_host_reg {
    void *addr;             /* page-aligned start handed to cuMemHostRegister */
    int owned;              /* 0: was already registered, not ours to undo */
};

struct gdaki_pair {
    const struct ibvwrap *v;
    char dev_name[64];
    int port, gid_index, atomics, cuda_dev, uar_io;
    struct ibv_port_attr port_attr;
    union ibv_gid gid;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *scq;     /* send CQ of the mlx5dv QP (read as an mlx5 ring only) */
    struct ibv_cq *rcq;     /* receive CQ of the ordinary QP */
    struct ibv_cq *cpu_cq;  /* send CQ of the ordinary QP (CPU path) */
    struct ibv_qp *sqp;     /* mlx5dv QP: its ring is posted by the GPU / CPU posters */
    struct ibv_qp *rqp;     /* ordinary verbs QP, the other end */
    struct mlx5dv_qp dvqp;
    struct mlx5dv_cq dvcq;
    void *scratch;          /* atomic results land here */
    struct ibv_mr *scratch_mr;
    struct gdaki_qp_dev *desc;  /* host descriptor, 128-byte aligned */
    uint8_t *span;              /* the host descriptor's span table (railnet_gdaki.h) */
    struct gdaki_qp_dev dview;  /* the device copy's values (device addresses), once made */
    uint64_t ddesc;             /* device copy (CUdeviceptr), 0 without CUDA */
    struct gdaki_host_reg regs[GDAKI_PAIR_MAX_REGS];
    int nregs;
    int borrowed;           /* ctx and pd belong to a railnet comm: not closed here */
    int use_cuda;           /* halves: make the device descriptor at connect */
    uint32_t psn;           /* our initial PSN (halves) */
    enum gdaki_queue_mem queue_mem;
    struct gdaki_devx *devx;    /* send QP made with DEVX (queue_mem gpu / host-devx):
                                 * sqp and scq are NULL then (gdaki_devx.h) */
    int is_mlx5;                /* mlx5dv_is_supported said so */
};

/* The send QP's number (verbs or DEVX), 0 without one. */
uint32_t gdaki_pair_send_qpn(const struct gdaki_pair *pr);

/* Building blocks (gdaki_pair.c), also used by gdaki_comm.c.  Each returns
 * 0 or -1 with err.  A pair is built as: alloc; v, ctx, pd, port, port_attr,
 * gid, gid_index, atomics, dev_name set by the caller; build_send and/or
 * build_recv (QPs left in INIT); connect them; finish (descriptor, and the
 * device copy when use_cuda).  gdaki_pair_close undoes any prefix of it. */
struct gdaki_pair *gdaki_pair_alloc(char *err, size_t errlen);
/* build_send makes the DEVX QP when pr->queue_mem is not HOST (pr->ctx a
 * DEVX context then, from gdaki_devx_open). */
int gdaki_pair_build_send(struct gdaki_pair *pr, uint32_t depth, char *err, size_t errlen);
int gdaki_pair_build_recv(struct gdaki_pair *pr, char *err, size_t errlen);
/* What finish gives the GPU (use_cuda): */
#define GDAKI_FINISH_HOST 0        /* nothing: host memory only */
#define GDAKI_FINISH_DEVICE_DESC 1 /* the queues mapped for the GPU (pr->dview) and a device copy of the
                                    * descriptor with its own span table (gdaki_pair_qp_device), which
                                    * railnet's own kernels read: one CUDA allocation a pair, which the
                                    * VMM path rounds up to its granularity (2 MiB on current GPUs) */
#define GDAKI_FINISH_GPU_VIEW 2    /* the queues mapped for the GPU (pr->dview) only: for device code
                                    * that reads images built from it (NCCL's, through GIN) */
int gdaki_pair_finish(struct gdaki_pair *pr, int use_cuda, int cuda_dev, char *err, size_t errlen);
int gdaki_pair_qp_init(struct gdaki_pair *pr, struct ibv_qp *qp, char *err, size_t errlen);

#endif
