/* mlx5_nic.h: softnic's mlx5 queues -- the objects behind mlx5dv_create_qp
 * and mlx5dv_init_obj, and the NIC thread that consumes them.
 *
 * A "dv QP" is an ordinary softnic RC QP (the ibv_qp handed to the user;
 * ibv_modify_qp, ibv_post_recv, ibv_query_qp and ibv_destroy_qp work on it
 * as usual) plus an mlx5-format send ring in plain page-aligned host memory
 * (so cudaHostRegister can map it), a doorbell record and a UAR page.  The
 * NIC thread (one per process) watches each ring's doorbell record
 * (dbrec[MLX5_SND_DBR], the producer counter in BBs), decodes the WQEs it
 * finds, executes them with ibv_post_send on the softnic QP (the engine
 * checks keys and bounds; the WQEs found at one look go as one post list,
 * at most what softnic's posting thread sends itself), and turns the
 * completions of a hidden CQ into mlx5 CQEs (owner bit, wqe_counter,
 * MLX5_CQE_REQ_ERR + syndrome) in the mlx5 ring of the user's send CQ.
 *
 * Rules a ring user follows, as on real mlx5: write WQEs, then dbrec, then
 * (optionally) the UAR register; update the CQ doorbell record
 * (dbrec[0] = consumer index) so the NIC knows CQEs were consumed -- the
 * NIC never overwrites an unconsumed CQE, it waits.  Receives are not in
 * the mlx5 ring: post them with ibv_post_recv (mlx5dv_qp.rq is empty).
 *
 * DEVX objects (mlx5_devx.c) are the same QPs and CQs over the user's
 * memory (mlx5_nic_cq_create_ext / mlx5_nic_qp_create_ext): ring, doorbell
 * records and CQ live where the user's umem is, host or GPU memory, and are
 * never freed here.  GPU memory is read and written through CUDA copies
 * (softnic_priv_gpu_*): a GPU ring is fetched into a host shadow after a
 * doorbell -- the NIC thread watches the UAR register (host memory) and
 * reads the GPU doorbell record only when it changed, as a ConnectX fetches
 * WQEs on a doorbell, so an idle GPU queue costs no CUDA call; a CQE goes
 * to the GPU as two copies, the body and then its owner byte, so a GPU
 * poller never sees half of one; the CQ's consumer index in GPU memory is
 * read only when the ring looks full. */
#ifndef SOFTNIC_MLX5_NIC_H
#define SOFTNIC_MLX5_NIC_H

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "mlx5_wqe.h"

#define MLX5_SN_CQ_SET_CI 0     /* CQ dbrec word with the consumer index */
#define MLX5_SN_PAGE 4096
#define MLX5_SN_BF_OFFSET 0x800 /* doorbell register inside the UAR page */
#define MLX5_SN_BF_SIZE 256

/* Shadow mlx5 ring of a softnic CQ. */
struct mlx5_sn_cq {
    struct ibv_cq *ibcq;
    struct mlx5_cqe64 *buf;
    uint32_t cqe_cnt;
    __be32 *dbrec;
    void *uar;
    uint32_t cqn;
    uint32_t pi;                /* CQEs written so far (in GPU memory: visible there) */
    /* A ring in GPU memory: CQEs are made in a host copy of the ring and
     * reach the GPU in runs (cq_flush), two copies per run, where each CQE
     * took two: each copy may wait for the GPU to switch to softnic's
     * context while the application's kernels run (1-3 ms on an H200). */
    struct mlx5_cqe64 *shadow;  /* the ring as written so far, NULL until the first CQE */
    uint8_t *old_own;           /* per slot: its op_own before the run being made */
    uint32_t staged;            /* CQEs in shadow; staged - pi wait for cq_flush */
    bool detached;              /* the ibv_cq (or DEVX CQ object) was destroyed */
    bool ext;                   /* DEVX: buf, dbrec, uar are the user's */
    bool buf_gpu, dbr_gpu;      /* DEVX: in GPU memory */
    uint32_t ci_seen;           /* consumer index last read from a GPU dbrec */
    bool overrun_ignore;        /* DEVX cqc.oi: never wait for the consumer index (the
                                 * poller keeps the CQ from overrunning, e.g. one CQE per
                                 * send-queue slot, as DOCA GPUNetIO's device code) */
    int refs;                   /* dv QPs writing into it (+1 while attached) */
    pthread_mutex_t lock;       /* pi and the ring */
    struct mlx5_sn_cq *next;
};

enum mlx5_sn_pend_kind { PEND_ENGINE, PEND_LOCAL_OK, PEND_LOCAL_ERR };

struct mlx5_sn_pend {
    uint8_t kind;
    uint8_t opcode;
    uint8_t syndrome;           /* PEND_LOCAL_ERR */
    bool want_cqe;
    uint16_t wqe_idx;
    uint32_t byte_cnt;
    uint64_t seq;               /* PEND_ENGINE: wr_id of the engine WR */
};

struct mlx5_sn_qp {
    struct ibv_qp *ibqp;
    struct ibv_cq *hidden_cq;   /* the engine's send completions */
    struct mlx5_sn_cq *scq;     /* where CQEs go */
    uint8_t *sq;                /* wqe_cnt BBs */
    uint32_t wqe_cnt;
    __be32 *dbrec;
    uint8_t *uar;
    uint32_t max_sge, max_inline;
    uint16_t ci;                /* next BB to consume */
    uint64_t next_seq;
    struct mlx5_sn_pend *pend;  /* ring of wqe_cnt entries, WQE order */
    uint32_t pend_head, pend_count;
    bool have_wc;               /* a polled completion not fully retired */
    struct ibv_wc wc;
    bool stop_consuming;        /* a local error waits to be retired */
    bool error;                 /* QP in error: everything flushes */
    uint64_t counters[4];       /* wqes, cqes, errors, doorbells seen */
    bool ext;                   /* DEVX: sq, dbrec, uar are the user's */
    bool sq_gpu, dbr_gpu;       /* DEVX: in GPU memory */
    uint8_t *shadow;            /* host copy of a GPU ring */
    uint16_t shadow_pi;         /* BBs copied into shadow so far */
    uint16_t pi_seen;           /* producer counter last read from a GPU dbrec */
    uint64_t db_seen;           /* UAR register value that pi_seen answers */
    uint64_t recheck_until_ns;  /* re-read a GPU dbrec until then (0: no) */
    struct mlx5_sn_qp *next;
};

/* Registry and NIC thread (mlx5_nic.c). */
int mlx5_nic_qp_create(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr,
                       struct ibv_qp **out);
int mlx5_nic_qp_info(struct ibv_qp *qp, struct mlx5dv_qp *out);
int mlx5_nic_cq_info(struct ibv_cq *cq, struct mlx5dv_cq *out);
/* Called when the user destroys a QP/CQ (softnic's destroy hooks). */
void mlx5_nic_qp_gone(struct ibv_qp *qp);
void mlx5_nic_cq_gone(struct ibv_cq *cq);

/* DEVX objects over user memory (addresses already resolved from umems).
 * The CQ is returned with one reference (the DEVX object's); a QP adds
 * one while it lives.  mlx5_nic_cq_release drops the object's reference:
 * EBUSY while a QP still uses the CQ. */
struct mlx5_sn_ext_cq {
    void *buf;
    bool buf_gpu;
    uint32_t cqe_cnt;
    __be32 *dbrec;
    bool dbr_gpu;
    void *uar;
    bool overrun_ignore;        /* cqc.oi */
};
int mlx5_nic_cq_create_ext(const struct mlx5_sn_ext_cq *e, struct mlx5_sn_cq **out);
int mlx5_nic_cq_release(struct mlx5_sn_cq *c);
struct mlx5_sn_ext_qp {
    struct ibv_pd *pd;
    struct mlx5_sn_cq *cq;
    uint8_t *sq;
    bool sq_gpu;
    uint32_t wqe_cnt;
    __be32 *dbrec;              /* [MLX5_RCV_DBR], [MLX5_SND_DBR] */
    bool dbr_gpu;
    uint8_t *uar;               /* UAR page: register at MLX5_SN_BF_OFFSET */
};
int mlx5_nic_qp_create_ext(struct ibv_context *ctx, const struct mlx5_sn_ext_qp *e,
                           struct ibv_qp **out);

/* DEVX bookkeeping (mlx5_devx.c): PDs whose pdn the user learnt through
 * mlx5dv_init_obj (CREATE_QP names its PD by that number). */
void mlx5_devx_note_pd(struct ibv_pd *pd);
/* A refused PRM command: status and syndrome into the output mailbox;
 * returns EREMOTEIO (mlx5_devx.c). */
int mlx5_devx_refuse(void *out, uint8_t status, uint32_t syndrome);
/* floor(log2(v)) capped at most (0 for v <= 1): a PRM log_* field. */
uint32_t mlx5_prm_log2(uint64_t v, uint32_t most);
/* Device-wide commands of mlx5dv_devx_general_cmd (mlx5_hca_cap.c), the
 * output already zeroed: 0, or EREMOTEIO with a PRM status in out. */
int mlx5_hca_cap_query(struct ibv_context *ctx, const void *in, size_t inlen, void *out,
                       size_t outlen);
int mlx5_roce_address_query(struct ibv_context *ctx, const void *in, size_t inlen, void *out,
                            size_t outlen);

/* Private API of softnic's libibverbs, resolved at run time
 * (mlx5_priv.c); each returns EOPNOTSUPP when libibverbs is not softnic. */
int mlx5_priv_init(void);
bool mlx5_priv_is_softnic(struct ibv_context *ctx);
bool mlx5_priv_gpu_is_device_ptr(const void *p);
int mlx5_priv_gpu_read(void *dst, const void *gpu_src, size_t len);
int mlx5_priv_gpu_write(void *gpu_dst, const void *src, size_t len);
/* Marks the calling thread as the NIC's, or not (softnic_priv_thread_is_nic);
 * does nothing next to another libibverbs or one without that entry. */
void mlx5_priv_thread_is_nic(bool on);
/* The largest send WQE this NIC states in bytes (SOFTNIC_MAX_WQE_SZ_SQ,
 * read once), 0 when none (QUERY_HCA_CAP then states 1024). */
uint32_t mlx5_priv_max_wqe_sz_sq(void);
/* Tells softnic that a GPU drives engine QP qp (softnic_priv_qp_poll_acks);
 * nothing with a softnic that predates it. */
void mlx5_priv_qp_poll_acks(struct ibv_qp *qp);
/* A debug line through softnic's log (only with SOFTNIC_DEBUG set). */
void mlx5_priv_debug(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define MLX5_SN_DEBUG(fmt, ...) mlx5_priv_debug(__FILE__, __LINE__, fmt, ##__VA_ARGS__)

/* Page-aligned, page-multiple, zeroed host memory (GPU-mappable). */
void *mlx5_sn_alloc_pages(size_t bytes);

#endif
