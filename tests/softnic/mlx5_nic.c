/* mlx5_nic.c: the dv QP/CQ registry and the NIC thread that executes mlx5
 * WQEs on softnic (contract in mlx5_nic.h).
 *
 * Every engine WR is posted signaled with wr_id = a per-QP sequence number,
 * so each WQE has exactly one engine completion and WQEs retire strictly in
 * order through the pend ring (that is what lets a NOP or a local error sit
 * between engine WQEs and still get its CQE in the right place). */
#include "mlx5_nic.h"

#include <endian.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

static struct {
    pthread_mutex_t lock;       /* lists, and every QP's progress */
    struct mlx5_sn_qp *qps;
    struct mlx5_sn_cq *cqs;
    struct ibv_cq *grave[64];   /* hidden CQs whose QP is being destroyed */
    int ngrave;
    pthread_t thread;
    bool started, stop;
    uint32_t next_cqn;
} nic = { .lock = PTHREAD_MUTEX_INITIALIZER, .next_cqn = 0x100 };

void *mlx5_sn_alloc_pages(size_t bytes)
{
    void *p = NULL;
    bytes = (bytes + MLX5_SN_PAGE - 1) & ~(size_t)(MLX5_SN_PAGE - 1);
    if (bytes == 0 || posix_memalign(&p, MLX5_SN_PAGE, bytes) != 0)
        return NULL;
    memset(p, 0, bytes);
    return p;
}

static uint32_t roundup_pow2(uint32_t v)
{
    uint32_t r = 1;
    while (r < v)
        r <<= 1;
    return r;
}

/* ------------------------------------------------------------ CQ shadows */
static struct mlx5_sn_cq *cq_find_locked(struct ibv_cq *cq)
{
    for (struct mlx5_sn_cq *c = nic.cqs; c; c = c->next)
        if (c->ibcq == cq && !c->detached)
            return c;
    return NULL;
}

static void cq_free(struct mlx5_sn_cq *c)
{
    pthread_mutex_destroy(&c->lock);
    free(c->shadow);
    free(c->old_own);
    if (!c->ext) {
        free(c->buf);
        free(c->dbrec);
        free(c->uar);
    }
    free(c);
}

static void cq_unref_locked(struct mlx5_sn_cq *c)
{
    if (--c->refs > 0)
        return;
    for (struct mlx5_sn_cq **pp = &nic.cqs; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    cq_free(c);
}

static struct mlx5_sn_cq *cq_get_locked(struct ibv_cq *cq, int *err)
{
    struct mlx5_sn_cq *c = cq_find_locked(cq);
    if (c)
        return c;
    c = calloc(1, sizeof(*c));
    if (!c) {
        *err = ENOMEM;
        return NULL;
    }
    c->ibcq = cq;
    c->cqe_cnt = roundup_pow2((uint32_t)(cq->cqe > 0 ? cq->cqe : 1) + 1);
    if (c->cqe_cnt < 8)
        c->cqe_cnt = 8;
    c->buf = mlx5_sn_alloc_pages((size_t)c->cqe_cnt * sizeof(struct mlx5_cqe64));
    c->dbrec = mlx5_sn_alloc_pages(MLX5_SN_PAGE);
    c->uar = mlx5_sn_alloc_pages(MLX5_SN_PAGE);
    if (!c->buf || !c->dbrec || !c->uar) {
        free(c->buf);
        free(c->dbrec);
        free(c->uar);
        free(c);
        *err = ENOMEM;
        return NULL;
    }
    mlx5_cq_ring_init(c->buf, c->cqe_cnt);
    pthread_mutex_init(&c->lock, NULL);
    c->cqn = nic.next_cqn++;
    c->refs = 1;                /* the attachment to the live ibv_cq */
    c->next = nic.cqs;
    nic.cqs = c;
    return c;
}

/* CQEs made so far: for a ring in GPU memory, those not yet copied there
 * as well. */
static uint32_t cq_made(const struct mlx5_sn_cq *c)
{
    return c->buf_gpu ? c->staged : c->pi;
}

/* Whether the CQ has a free entry (the consumer's doorbell record is
 * behind the producer by less than the ring).  A doorbell record in GPU
 * memory is read only when the last value read says full. */
static bool cq_has_room(struct mlx5_sn_cq *c)
{
    uint32_t ci, made = cq_made(c);
    if (c->overrun_ignore)
        return true;
    if (!c->dbr_gpu) {
        ci = be32toh(__atomic_load_n(&c->dbrec[MLX5_SN_CQ_SET_CI], __ATOMIC_ACQUIRE)) & 0xffffff;
    } else {
        ci = c->ci_seen;
        if (((made - ci) & 0xffffff) >= c->cqe_cnt) {
            __be32 v;
            if (mlx5_priv_gpu_read(&v, &c->dbrec[MLX5_SN_CQ_SET_CI], sizeof(v)) != 0)
                return false;
            ci = c->ci_seen = be32toh(v) & 0xffffff;
        }
    }
    return ((made - ci) & 0xffffff) < c->cqe_cnt;
}

/* The host copy of a GPU ring, read from the GPU once: the entries'
 * owner bytes before softnic's first lap are the user's.  c->lock held. */
static bool cq_shadow_ready(struct mlx5_sn_cq *c)
{
    if (c->shadow)
        return true;
    size_t bytes = (size_t)c->cqe_cnt * sizeof(struct mlx5_cqe64);
    struct mlx5_cqe64 *sh = malloc(bytes);
    uint8_t *own = malloc(c->cqe_cnt);
    if (!sh || !own || mlx5_priv_gpu_read(sh, c->buf, bytes) != 0) {
        free(sh);
        free(own);
        return false;
    }
    c->shadow = sh;
    c->old_own = own;
    return true;
}

/* Copies slots [from, from + n) of the host copy (not wrapping) to the
 * GPU, with each entry's op_own as it was before this run when `before`.
 * c->lock held. */
static int cq_copy_run(struct mlx5_sn_cq *c, uint32_t from, uint32_t n, bool before)
{
    for (uint32_t i = from; before && i < from + n; i++) {
        uint8_t t = c->shadow[i].op_own;
        c->shadow[i].op_own = c->old_own[i];
        c->old_own[i] = t;
    }
    int rc = mlx5_priv_gpu_write(&c->buf[from], &c->shadow[from], (size_t)n * sizeof(struct mlx5_cqe64));
    for (uint32_t i = from; before && i < from + n; i++) {
        uint8_t t = c->shadow[i].op_own;
        c->shadow[i].op_own = c->old_own[i];
        c->old_own[i] = t;
    }
    return rc;
}

/* Makes the CQEs staged in the host copy visible in GPU memory: first the
 * run with every owner byte as it was (the bodies land, no entry changes
 * hands), then the run again with the new owner bytes.  The second copy
 * starts after the first completed, so a GPU poller that sees an entry's
 * new owner reads a whole CQE.  c->lock held. */
static void cq_flush_locked(struct mlx5_sn_cq *c)
{
    uint32_t n = c->staged - c->pi;
    if (!c->buf_gpu || !n || c->detached)
        return;
    uint32_t from = c->pi & (c->cqe_cnt - 1);
    uint32_t first = c->cqe_cnt - from < n ? c->cqe_cnt - from : n;
    if (cq_copy_run(c, from, first, true) == 0 && (n == first || cq_copy_run(c, 0, n - first, true) == 0) &&
        cq_copy_run(c, from, first, false) == 0 && (n == first || cq_copy_run(c, 0, n - first, false) == 0))
        c->pi = c->staged;
    /* else retried on the next pass */
}

static void cq_flush(struct mlx5_sn_cq *c)
{
    pthread_mutex_lock(&c->lock);
    cq_flush_locked(c);
    pthread_mutex_unlock(&c->lock);
}

/* Writes one CQE for pend entry e (in GPU memory: into the host copy, for
 * cq_flush); false when the CQ ring is full (the consumer has not advanced
 * its doorbell record yet). */
static bool cq_emit(struct mlx5_sn_qp *qp, const struct mlx5_sn_pend *e,
                    uint8_t syndrome, uint8_t vendor)
{
    struct mlx5_sn_cq *c = qp->scq;
    pthread_mutex_lock(&c->lock);
    if (c->detached) {
        pthread_mutex_unlock(&c->lock);
        return true;            /* nobody can read it any more */
    }
    if (!cq_has_room(c) || (c->buf_gpu && !cq_shadow_ready(c))) {
        pthread_mutex_unlock(&c->lock);
        return false;
    }
    uint32_t made = cq_made(c), slot = made & (c->cqe_cnt - 1);
    struct mlx5_cqe64 *cqe = c->buf_gpu ? &c->shadow[slot] : &c->buf[slot];
    unsigned owner = (made & c->cqe_cnt) ? 1 : 0;
    uint32_t qpn = qp->ibqp->qp_num;
    if (c->buf_gpu)
        c->old_own[slot] = cqe->op_own;   /* what the slot shows until cq_flush */
    if (syndrome)
        mlx5_cqe_write_err(cqe, e->opcode, qpn, e->wqe_idx, syndrome, vendor, owner);
    else
        mlx5_cqe_write_req(cqe, e->opcode, qpn, e->wqe_idx, e->byte_cnt, owner);
    if (c->buf_gpu)
        c->staged++;
    else
        c->pi++;
    pthread_mutex_unlock(&c->lock);
    qp->counters[1]++;
    return true;
}

/* ------------------------------------------------------------ progress */
static void pend_push(struct mlx5_sn_qp *qp, const struct mlx5_sn_pend *e)
{
    qp->pend[(qp->pend_head + qp->pend_count) % qp->wqe_cnt] = *e;
    qp->pend_count++;
}

static void pend_pop(struct mlx5_sn_qp *qp)
{
    qp->pend_head = (qp->pend_head + 1) % qp->wqe_cnt;
    qp->pend_count--;
}

static void qp_to_error(struct mlx5_sn_qp *qp)
{
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
    ibv_modify_qp(qp->ibqp, &a, IBV_QP_STATE);
    qp->error = true;
    qp->stop_consuming = false;
}

/* Retires pend entries in order; returns how many. */
static int qp_retire(struct mlx5_sn_qp *qp)
{
    int done = 0;
    while (qp->pend_count) {
        struct mlx5_sn_pend *e = &qp->pend[qp->pend_head];
        if (e->kind == PEND_LOCAL_OK) {
            if (e->want_cqe && !cq_emit(qp, e, 0, 0))
                break;
        } else if (e->kind == PEND_LOCAL_ERR) {
            /* As on hardware, the QP is in ERR by the time its error CQE
             * can be seen: a poller that queries the state after the CQE
             * must not find it still in RTS. */
            if (!qp->error)
                qp_to_error(qp);
            if (!cq_emit(qp, e, e->syndrome, 0))
                break;
            MLX5_SN_DEBUG("mlx5: QP 0x%x: WQE %u (opcode 0x%x) completes in error: syndrome 0x%x (refused before the "
                     "engine)", qp->ibqp->qp_num, e->wqe_idx, e->opcode, e->syndrome);
            qp->counters[2]++;
        } else {
            if (!qp->have_wc) {
                if (ibv_poll_cq(qp->hidden_cq, 1, &qp->wc) <= 0)
                    break;
                qp->have_wc = true;
            }
            if (qp->wc.wr_id < e->seq) {        /* not ours: drop it */
                qp->have_wc = false;
                continue;
            }
            if (qp->wc.wr_id == e->seq && qp->wc.status != IBV_WC_SUCCESS) {
                uint8_t syn = mlx5_syndrome_of_wc(qp->wc.status);
                if (!cq_emit(qp, e, syn, (uint8_t)qp->wc.vendor_err))
                    break;
                MLX5_SN_DEBUG("mlx5: QP 0x%x: WQE %u (opcode 0x%x) completes in error: %s (vendor 0x%x)",
                         qp->ibqp->qp_num, e->wqe_idx, e->opcode, ibv_wc_status_str(qp->wc.status),
                         qp->wc.vendor_err);
                qp->counters[2]++;
                qp->error = true;   /* the engine moved the QP to ERR */
            } else {
                /* Success, or a later WR's completion (RC: every earlier
                 * WR is then complete as well). */
                if (e->want_cqe && !cq_emit(qp, e, 0, 0))
                    break;
            }
            if (qp->wc.wr_id == e->seq)
                qp->have_wc = false;
        }
        pend_pop(qp);
        done++;
    }
    if (!qp->pend_count) {          /* stray completions: drain */
        struct ibv_wc wc;
        while (ibv_poll_cq(qp->hidden_cq, 1, &wc) > 0)
            qp->have_wc = false;
    }
    return done;
}

static enum ibv_wr_opcode wr_opcode(uint8_t op)
{
    switch (op) {
    case MLX5_OPCODE_RDMA_WRITE: return IBV_WR_RDMA_WRITE;
    case MLX5_OPCODE_RDMA_WRITE_IMM: return IBV_WR_RDMA_WRITE_WITH_IMM;
    case MLX5_OPCODE_SEND_IMM: return IBV_WR_SEND_WITH_IMM;
    case MLX5_OPCODE_RDMA_READ: return IBV_WR_RDMA_READ;
    case MLX5_OPCODE_ATOMIC_FA: return IBV_WR_ATOMIC_FETCH_AND_ADD;
    case MLX5_OPCODE_ATOMIC_CS: return IBV_WR_ATOMIC_CMP_AND_SWP;
    default: return IBV_WR_SEND;
    }
}

/* Builds the engine WR of op into wr and sg (wr_id left to the poster):
 * 0, or an mlx5 syndrome (as a negative) for a WQE the engine cannot take. */
static int wr_build(struct mlx5_sn_qp *qp, const struct mlx5_sn_op *op, struct ibv_send_wr *wr,
                    struct ibv_sge *sg)
{
    memset(wr, 0, sizeof(*wr));
    wr->opcode = wr_opcode(op->opcode);
    wr->send_flags = IBV_SEND_SIGNALED;
    if (op->fm_ce_se & MLX5_WQE_CTRL_SOLICITED)
        wr->send_flags |= IBV_SEND_SOLICITED;
    /* Any fence mode (fm, bits 5..7: initiator small fence, fence, strong
     * ordering, fence and small fence) becomes the verbs fence: the engine
     * executes a QP's WQEs in order, so the stronger modes hold as well. */
    if (op->fm_ce_se & 0xe0)
        wr->send_flags |= IBV_SEND_FENCE;
    wr->imm_data = op->imm;
    if (op->opcode == MLX5_OPCODE_ATOMIC_FA || op->opcode == MLX5_OPCODE_ATOMIC_CS) {
        wr->wr.atomic.remote_addr = op->raddr;
        wr->wr.atomic.rkey = op->rkey;
        /* verbs names the CS operands the other way round */
        wr->wr.atomic.compare_add = op->opcode == MLX5_OPCODE_ATOMIC_CS ? op->compare : op->swap_add;
        wr->wr.atomic.swap = op->opcode == MLX5_OPCODE_ATOMIC_CS ? op->swap_add : 0;
    } else {
        wr->wr.rdma.remote_addr = op->raddr;
        wr->wr.rdma.rkey = op->rkey;
    }
    wr->sg_list = sg;
    if (op->inl_len) {
        if (op->inl_len > qp->max_inline)
            return -MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
        sg[0].addr = (uintptr_t)op->inl;
        sg[0].length = op->inl_len;
        sg[0].lkey = 0;
        wr->num_sge = 1;
        wr->send_flags |= IBV_SEND_INLINE;
    } else {
        if ((uint32_t)op->num_sge > qp->max_sge)
            return -MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
        for (int i = 0; i < op->num_sge; i++) {
            sg[i].addr = op->sge[i].addr;
            sg[i].length = op->sge[i].len;
            sg[i].lkey = op->sge[i].lkey;
        }
        wr->num_sge = op->num_sge;
    }
    return 0;
}

/* Posts wr[0..n) to the engine as one list, wr_ids from qp->next_seq on;
 * returns how many it took.  *res: 0 when all, else for the first one not
 * taken EAGAIN (not now: SQ full or QP not yet in RTS; it stays in the
 * ring) or an mlx5 syndrome (as a negative). */
static int engine_post(struct mlx5_sn_qp *qp, struct ibv_send_wr *wr, int n, int *res)
{
    for (int i = 0; i < n; i++) {
        wr[i].wr_id = qp->next_seq + (uint64_t)i;
        wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
    }
    struct ibv_send_wr *bad = NULL;
    int rc = ibv_post_send(qp->ibqp, wr, &bad);
    *res = 0;
    if (rc == 0)
        return n;
    int taken = bad >= wr && bad < wr + n ? (int)(bad - wr) : 0;
    if (rc == ENOMEM) {
        *res = EAGAIN;
        return taken;
    }
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;
    *res = -MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
    if (ibv_query_qp(qp->ibqp, &a, IBV_QP_STATE, &ia) == 0) {
        if (a.qp_state == IBV_QPS_RESET || a.qp_state == IBV_QPS_INIT ||
            a.qp_state == IBV_QPS_RTR)
            *res = EAGAIN;      /* runs once the QP reaches RTS */
        if (a.qp_state == IBV_QPS_ERR) {
            qp->error = true;
            *res = -MLX5_CQE_SYNDROME_WR_FLUSH_ERR;
        }
    }
    return taken;
}


static uint64_t nic_now_ns(void);
/* How long a doorbell record in GPU memory is re-read after a ring that
 * found it unchanged (qp_producer). */
#define NIC_RECHECK_NS (2ull * 1000 * 1000)

/* Copies BBs [from, to) of a GPU ring into its host shadow (at most the
 * whole ring: a doorbell claiming more is refused by the consumer). */
static bool shadow_fill(struct mlx5_sn_qp *qp, uint16_t from, uint16_t to)
{
    uint32_t n = (uint16_t)(to - from);
    if (n > qp->wqe_cnt)
        n = qp->wqe_cnt;
    uint32_t idx = from & (qp->wqe_cnt - 1);
    uint32_t first = qp->wqe_cnt - idx < n ? qp->wqe_cnt - idx : n;
    size_t bb = MLX5_SEND_WQE_BB;
    if (first && mlx5_priv_gpu_read(qp->shadow + idx * bb, qp->sq + idx * bb, first * bb) != 0)
        return false;
    if (n > first && mlx5_priv_gpu_read(qp->shadow, qp->sq, (n - first) * bb) != 0)
        return false;
    return true;
}

/* The producer counter (BBs) the doorbell record holds.  In host memory it
 * is read on every pass.  In GPU memory it is read when the UAR register
 * changed since the last read (posters ring it after every record update,
 * as ConnectX requires), and the new WQEs are copied into the shadow. */
static bool qp_producer(struct mlx5_sn_qp *qp, uint16_t *pi)
{
    if (!qp->dbr_gpu && !qp->sq_gpu) {
        *pi = (uint16_t)(be32toh(__atomic_load_n(&qp->dbrec[MLX5_SND_DBR], __ATOMIC_ACQUIRE)) & 0xffff);
        return true;
    }
    uint64_t db = __atomic_load_n((uint64_t *)(qp->uar + MLX5_SN_BF_OFFSET), __ATOMIC_ACQUIRE);
    bool rang = db != qp->db_seen;
    if (rang || qp->recheck_until_ns) {
        __be32 v;
        if (qp->dbr_gpu) {
            if (mlx5_priv_gpu_read(&v, &qp->dbrec[MLX5_SND_DBR], sizeof(v)) != 0)
                return false;
        } else {
            v = __atomic_load_n(&qp->dbrec[MLX5_SND_DBR], __ATOMIC_ACQUIRE);
        }
        uint16_t pi = (uint16_t)(be32toh(v) & 0xffff);
        if (rang) {
            /* DOCA GPUNetIO (NCCL's GDAKI device code) rings the register
             * before and after it writes the record, with the same value:
             * a record still unchanged at the first ring is read again
             * until it moves (or for NIC_RECHECK_NS), or the second ring
             * would go unseen. */
            qp->db_seen = db;
            qp->counters[3]++;
            qp->recheck_until_ns = pi == qp->pi_seen ? nic_now_ns() + NIC_RECHECK_NS : 0;
        } else if (pi != qp->pi_seen || nic_now_ns() > qp->recheck_until_ns) {
            qp->recheck_until_ns = 0;
        }
        qp->pi_seen = pi;
    }
    if (qp->sq_gpu && qp->shadow_pi != qp->pi_seen) {
        if (!shadow_fill(qp, qp->shadow_pi, qp->pi_seen))
            return false;
        qp->shadow_pi = qp->pi_seen;
    }
    *pi = qp->pi_seen;
    return true;
}

/* WAIT: 1 once the CQ it names has written CQE number wait_index (its
 * producer count passed it, modulo 2^32), 0 not yet, -1 no such CQ.
 * Called with nic.lock held (the CQ list, and every CQ's producer). */
static int wait_satisfied(const struct mlx5_sn_op *op)
{
    for (struct mlx5_sn_cq *c = nic.cqs; c; c = c->next) {
        if (c->cqn != op->wait_cqn || c->detached)
            continue;
        uint32_t pi = __atomic_load_n(&c->pi, __ATOMIC_ACQUIRE);
        return (int32_t)(pi - (op->wait_index + 1u)) >= 0 ? 1 : 0;
    }
    return -1;
}

/* WQEs found at one doorbell go to the engine as one post list: one
 * ibv_post_send (one lock round trip, and one transmission of up to a
 * batch by this thread, requester.c's fast path) instead of one each.  A
 * list stops where that fast path would stop taking it (its
 * DIRECT_MAX_WQES and DIRECT_MAX_BYTES): a list it refused would wait for
 * the requester thread, where the WQEs one by one would each have gone
 * at once.  The bytes are those of payloads by pointer; inline data rides
 * in its WQEs (a put_signal's 8-byte signal stays in its 4 KiB payload's
 * list, so the responder lands both in one batch). */
#define NIC_POST_LIST 8
#define NIC_POST_LIST_BYTES 4096

/* mlx5_wqe_decode of the WQE at idx, on this device: a well-formed WQE
 * larger than the largest the device states (SOFTNIC_MAX_WQE_SZ_SQ,
 * QUERY_HCA_CAP's max_wqe_sz_sq) fails as a ConnectX fails it, with a
 * local length error. */
static int nic_decode(const struct mlx5_sn_qp *qp, const uint8_t *ring, uint16_t idx, uint16_t avail,
                      struct mlx5_sn_op *op)
{
    int syn = mlx5_wqe_decode(ring, qp->wqe_cnt, idx, qp->ibqp->qp_num, avail, op);
    uint32_t max = mlx5_priv_max_wqe_sz_sq();
    if (!syn && max && op->ds * 16 > max)
        syn = MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
    return syn;
}

/* Whether op is executed by the engine (not the NIC thread itself). */
static bool op_is_engine(const struct mlx5_sn_op *op)
{
    return op->opcode != MLX5_OPCODE_NOP && op->opcode != MLX5_SN_OPCODE_WAIT && op->opcode != MLX5_SN_OPCODE_DUMP;
}

/* Posts the well-formed engine WQEs from qp->ci on (up to NIC_POST_LIST,
 * and below pi) as one list and records them in the pend ring.  Returns
 * how many WQEs it consumed (0: the WQE at qp->ci is for the one-by-one
 * path of qp_consume: a NOP, a WAIT, a bad WQE, or a QP in error), or -1
 * when the engine takes none now (EAGAIN: they stay in the ring). */
static int qp_consume_batch(struct mlx5_sn_qp *qp, const uint8_t *ring, uint16_t pi)
{
    static __thread struct mlx5_sn_op ops[NIC_POST_LIST];
    static __thread struct ibv_send_wr wrs[NIC_POST_LIST];
    static __thread struct ibv_sge sgs[NIC_POST_LIST][MLX5_SN_MAX_SGE];
    if (qp->error)
        return 0;
    int n = 0;
    uint64_t bytes = 0;
    uint16_t at = qp->ci;
    while (n < NIC_POST_LIST && at != pi && qp->pend_count + (uint32_t)n < qp->wqe_cnt) {
        struct mlx5_sn_op *op = &ops[n];
        if (nic_decode(qp, ring, at, (uint16_t)(pi - at), op) != 0 || !op_is_engine(op))
            break;
        uint64_t by_ptr = op->inl_len ? 0 : op->len;
        if ((n > 0 && bytes + by_ptr > NIC_POST_LIST_BYTES) || wr_build(qp, op, &wrs[n], sgs[n]) != 0)
            break;
        bytes += by_ptr;
        at = (uint16_t)(at + op->nbb);
        n++;
    }
    if (n == 0)
        return 0;
    int res;
    int taken = engine_post(qp, wrs, n, &res);
    for (int i = 0; i < taken || (i == taken && res < 0); i++) {
        struct mlx5_sn_pend e = { .wqe_idx = qp->ci, .opcode = ops[i].opcode,
                                  .want_cqe = ops[i].signaled, .byte_cnt = (uint32_t)ops[i].len };
        if (i < taken) {
            e.kind = PEND_ENGINE;
            e.seq = qp->next_seq++;
        } else {
            e.kind = PEND_LOCAL_ERR;        /* the engine refused this one */
            e.syndrome = (uint8_t)-res;
            if (!qp->error)
                qp->stop_consuming = true;  /* nothing runs after a bad WQE */
        }
        pend_push(qp, &e);
        qp->ci = (uint16_t)(qp->ci + ops[i].nbb);
        qp->counters[0]++;
    }
    int done = taken + (res < 0 && taken < n ? 1 : 0);
    return done ? done : -1;
}

/* Consumes posted WQEs up to the doorbell record; returns how many. */
static int qp_consume(struct mlx5_sn_qp *qp)
{
    int done = 0;
    if (qp->stop_consuming)
        return 0;
    uint16_t pi;
    if (!qp_producer(qp, &pi))
        return 0;
    const uint8_t *ring = qp->sq_gpu ? qp->shadow : qp->sq;
    static __thread struct mlx5_sn_op op;
    while (qp->ci != pi && qp->pend_count < qp->wqe_cnt) {
        uint16_t avail = (uint16_t)(pi - qp->ci);
        struct mlx5_sn_pend e = { .wqe_idx = qp->ci };
        if (avail > qp->wqe_cnt) {
            /* The doorbell claims more WQEs than the ring holds. */
            e.kind = PEND_LOCAL_ERR;
            e.syndrome = MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
            pend_push(qp, &e);
            qp->stop_consuming = true;
            qp->ci = pi;
            return done + 1;
        }
        /* Acquire: WQE bytes are read after the doorbell record. */
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        int n = qp_consume_batch(qp, ring, pi);
        if (n < 0)
            break;
        if (n > 0) {
            done += n;
            if (qp->stop_consuming)
                break;
            continue;
        }
        int syn = nic_decode(qp, ring, qp->ci, avail, &op);
        e.opcode = op.opcode;
        e.want_cqe = op.signaled;
        e.byte_cnt = (uint32_t)op.len;
        if (qp->error) {
            e.kind = PEND_LOCAL_ERR;
            e.syndrome = MLX5_CQE_SYNDROME_WR_FLUSH_ERR;
        } else if (syn) {
            e.kind = PEND_LOCAL_ERR;
            e.syndrome = (uint8_t)syn;
        } else if (op.opcode == MLX5_OPCODE_NOP || op.opcode == MLX5_SN_OPCODE_DUMP) {
            e.kind = PEND_LOCAL_OK;
        } else if (op.opcode == MLX5_SN_OPCODE_WAIT) {
            int w = wait_satisfied(&op);
            if (w == 0)
                break;          /* stays in the ring: nothing after it runs yet */
            if (w < 0) {
                e.kind = PEND_LOCAL_ERR;
                e.syndrome = MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
            } else {
                e.kind = PEND_LOCAL_OK;
            }
        } else {
            /* an engine WQE qp_consume_batch left: one the engine cannot
             * be given (wr_build's syndrome); every other one went there */
            struct ibv_sge sg[MLX5_SN_MAX_SGE];
            struct ibv_send_wr wr;
            int rc = wr_build(qp, &op, &wr, sg);
            e.kind = PEND_LOCAL_ERR;
            e.syndrome = (uint8_t)(rc < 0 ? -rc : MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
        }
        pend_push(qp, &e);
        qp->ci = (uint16_t)(qp->ci + op.nbb);
        qp->counters[0]++;
        done++;
        if (e.kind == PEND_LOCAL_ERR && !qp->error) {
            qp->stop_consuming = true;  /* nothing runs after a bad WQE */
            break;
        }
    }
    return done;
}

/* Destroys hidden CQs whose QP is gone.  Called with nic.lock held; drops
 * it around ibv_destroy_cq, whose destroy hook takes the lock itself. */
static void grave_sweep_locked(void)
{
    struct ibv_cq *todo[sizeof(nic.grave) / sizeof(nic.grave[0])];
    int n = nic.ngrave;
    memcpy(todo, nic.grave, sizeof(todo[0]) * (size_t)n);
    nic.ngrave = 0;
    pthread_mutex_unlock(&nic.lock);
    int keep = 0;
    for (int i = 0; i < n; i++)
        if (ibv_destroy_cq(todo[i]) != 0)     /* EBUSY: QP not gone yet */
            todo[keep++] = todo[i];
    pthread_mutex_lock(&nic.lock);
    for (int i = 0; i < keep && nic.ngrave < n; i++)
        nic.grave[nic.ngrave++] = todo[i];
}

/* How long the NIC thread polls without sleeping.  While a QP has WQEs on
 * the engine, a completion is coming and a poster (often a GPU thread in
 * quiet) waits for its CQE: poll for up to NIC_SPIN_BUSY_NS since the last
 * progress.  Once every queue is drained, poll NIC_SPIN_IDLE_NS more for
 * the next doorbell (a put + quiet loop rings again right after its CQE),
 * then back off.  A ConnectX sees a doorbell within a microsecond; a thread
 * that has gone to sleep sees it a timer period later. */
#define NIC_SPIN_BUSY_NS (20ull * 1000 * 1000)
#define NIC_SPIN_IDLE_NS (200ull * 1000)

static uint64_t nic_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* With SOFTNIC_DEBUG, after NIC_DUMP_NS without progress and every
 * NIC_DUMP_NS after that: one line per queue that holds work (WQEs on the
 * engine, or a doorbell past what was consumed), so a job that stalls says
 * where: the ring, the engine or the CQ. */
#define NIC_DUMP_NS (2ull * 1000 * 1000 * 1000)
static void dump_stuck_locked(uint64_t quiet_ns)
{
    for (struct mlx5_sn_qp *qp = nic.qps; qp; qp = qp->next) {
        if (!qp->pend_count && qp->ci == qp->pi_seen && !qp->stop_consuming)
            continue;
        const struct mlx5_sn_pend *h = qp->pend_count ? &qp->pend[qp->pend_head] : NULL;
        MLX5_SN_DEBUG("mlx5: QP 0x%x after %llu ms without progress: consumed %u, doorbell %u, %u on the engine "
                      "(oldest WQE %d kind %d)%s%s; WQEs %llu, CQEs %llu, errors %llu, doorbells %llu; CQ 0x%x wrote "
                      "%u of %u",
                      qp->ibqp->qp_num, (unsigned long long)(quiet_ns / 1000000), qp->ci, qp->pi_seen,
                      qp->pend_count, h ? (int)h->wqe_idx : -1, h ? (int)h->kind : -1,
                      qp->stop_consuming ? ", stopped at a bad WQE" : "", qp->error ? ", in error" : "",
                      (unsigned long long)qp->counters[0], (unsigned long long)qp->counters[1],
                      (unsigned long long)qp->counters[2], (unsigned long long)qp->counters[3],
                      qp->scq ? qp->scq->cqn : 0, qp->scq ? qp->scq->pi : 0, qp->scq ? qp->scq->cqe_cnt : 0);
    }
}

static void *nic_main(void *arg)
{
    (void)arg;
    /* The back-off sleeps below are a few microseconds: without this the
     * kernel's default 50 us timer slack stretches each of them. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    mlx5_priv_thread_is_nic(false);   /* names this thread's role (SOFTNIC_STATS) from its first copy */
    uint64_t last_work = nic_now_ns(), last_dump = last_work;
    for (;;) {
        int work = 0;
        bool busy = false;
        pthread_mutex_lock(&nic.lock);
        if (nic.stop) {
            pthread_mutex_unlock(&nic.lock);
            break;
        }
        int waiting = 0;   /* QPs with WQEs on the engine */
        for (struct mlx5_sn_qp *qp = nic.qps; qp; qp = qp->next)
            waiting += qp->pend_count != 0;
        for (struct mlx5_sn_qp *qp = nic.qps; qp; qp = qp->next) {
            work += qp_retire(qp);
            /* This thread is the NIC reading WQEs at the doorbell: a small
             * GPU-memory payload of an idle QP leaves from here, sparing
             * the requester thread's wake-up (most of a message's latency
             * on a busy host).  Only while no other QP waits on this
             * thread: a CUDA copy can wait for the application's kernels,
             * and with nic.lock held here no other QP's CQE would be
             * written meanwhile. */
            mlx5_priv_thread_is_nic(waiting - (qp->pend_count != 0) == 0);
            work += qp_consume(qp);
            mlx5_priv_thread_is_nic(false);
            work += qp_retire(qp);
            busy |= qp->pend_count != 0;
        }
        /* the pass's CQEs for rings in GPU memory, in one run per CQ */
        for (struct mlx5_sn_cq *c = nic.cqs; c; c = c->next)
            if (c->buf_gpu)
                cq_flush(c);
        if (nic.ngrave)
            grave_sweep_locked();
        uint64_t now = nic_now_ns();
        if (now - last_dump > NIC_DUMP_NS && now - last_work > NIC_DUMP_NS) {
            last_dump = now;
            dump_stuck_locked(now - last_work);
        }
        pthread_mutex_unlock(&nic.lock);
        if (work)
            last_work = now;
        uint64_t quiet = now - last_work;
        if (work || quiet < (busy ? NIC_SPIN_BUSY_NS : NIC_SPIN_IDLE_NS)) {
            sched_yield();
        } else {
            /* Idle: back off to at most 100 us between doorbell checks. */
            unsigned us = quiet < 2000000 ? 5 : quiet < 20000000 ? 20 : 100;
            struct timespec ts = { 0, (long)us * 1000 };
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

__attribute__((destructor)) static void nic_fini(void)
{
    pthread_mutex_lock(&nic.lock);
    bool started = nic.started;
    nic.stop = true;
    pthread_mutex_unlock(&nic.lock);
    if (started)
        pthread_join(nic.thread, NULL);
}

/* ------------------------------------------------------------ create */
/* The softnic QP behind a dv or DEVX QP, with its hidden engine CQ, sized
 * for wqe_cnt BBs; fills qp->ibqp, hidden_cq, max_sge, max_inline. */
static int qp_engine_create(struct ibv_context *ctx, struct mlx5_sn_qp *qp,
                            const struct ibv_qp_init_attr_ex *attr)
{
    struct ibv_device_attr da;
    if (ibv_query_device(ctx, &da) != 0)
        return EIO;
    /* Engine WRs: one per WQE at most, each signaled, all on a hidden CQ
     * large enough that it never overruns. */
    qp->hidden_cq = ibv_create_cq(ctx, (int)qp->wqe_cnt + 1, NULL, NULL, 0);
    if (!qp->hidden_cq)
        return errno ? errno : ENOMEM;
    struct ibv_qp_init_attr_ex ea = *attr;
    ea.send_cq = qp->hidden_cq;
    if (!ea.recv_cq)
        ea.recv_cq = qp->hidden_cq;
    ea.cap.max_send_wr = qp->wqe_cnt;
    qp->max_sge = (uint32_t)(da.max_sge < MLX5_SN_MAX_SGE ? da.max_sge : MLX5_SN_MAX_SGE);
    ea.cap.max_send_sge = qp->max_sge;
    qp->max_inline = MLX5_SN_MAX_INLINE;
    ea.cap.max_inline_data = qp->max_inline;
    qp->ibqp = ibv_create_qp_ex(ctx, &ea);
    if (!qp->ibqp) {
        /* The engine may cap inline data lower: ask for what it allows. */
        qp->max_inline = attr->cap.max_inline_data;
        ea.cap = attr->cap;
        ea.cap.max_send_wr = qp->wqe_cnt;
        ea.cap.max_send_sge = qp->max_sge;
        qp->ibqp = ibv_create_qp_ex(ctx, &ea);
    }
    if (!qp->ibqp)
        return errno ? errno : EINVAL;
    mlx5_priv_qp_poll_acks(qp->ibqp);
    if (ea.cap.max_inline_data < qp->max_inline)
        qp->max_inline = ea.cap.max_inline_data;
    return 0;
}

/* fork: a child inherits the registry but not the NIC thread; the parent's
 * queues are not its own, so it starts empty and, on its first QP, starts
 * a NIC thread of its own. */
static void nic_fork_prepare(void)
{
    pthread_mutex_lock(&nic.lock);
}

static void nic_fork_parent(void)
{
    pthread_mutex_unlock(&nic.lock);
}

static void nic_fork_child(void)
{
    pthread_mutex_init(&nic.lock, NULL);
    nic.qps = NULL;
    nic.cqs = NULL;
    nic.ngrave = 0;
    nic.started = false;
    nic.stop = false;
}

/* at load, not under nic.lock: registering takes glibc's fork lock */
__attribute__((constructor)) static void nic_fork_init(void)
{
    pthread_atfork(nic_fork_prepare, nic_fork_parent, nic_fork_child);
}

static void qp_publish_locked(struct mlx5_sn_qp *qp)
{
    qp->scq->refs++;
    qp->next = nic.qps;
    nic.qps = qp;
    if (!nic.started) {
        if (pthread_create(&nic.thread, NULL, nic_main, NULL) == 0)
            nic.started = true;
    }
}

static void qp_free(struct mlx5_sn_qp *qp)
{
    if (!qp->ext) {
        free(qp->sq);
        free(qp->dbrec);
        free(qp->uar);
    }
    free(qp->shadow);
    free(qp->pend);
    free(qp);
}

int mlx5_nic_qp_create(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr,
                       struct ibv_qp **out)
{
    if (!attr || attr->qp_type != IBV_QPT_RC || !attr->send_cq || !attr->recv_cq ||
        !(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd)
        return EINVAL;
    if (attr->cap.max_send_wr == 0 || attr->cap.max_send_wr > 32768 ||
        attr->cap.max_send_sge > MLX5_SN_MAX_SGE || attr->cap.max_inline_data > 512)
        return EINVAL;

    /* WQE size: ctrl + raddr + the larger of the SGE list and inline. */
    uint32_t sge = attr->cap.max_send_sge ? attr->cap.max_send_sge : 1;
    uint32_t data = sge * 16;
    uint32_t inl = (4 + attr->cap.max_inline_data + 15) & ~15u;
    uint32_t wqe_bytes = 32 + (data > inl ? data : inl);
    uint32_t bbs = (wqe_bytes + MLX5_SEND_WQE_BB - 1) / MLX5_SEND_WQE_BB;
    uint32_t wqe_cnt = roundup_pow2(attr->cap.max_send_wr * bbs);

    struct mlx5_sn_qp *qp = calloc(1, sizeof(*qp));
    if (!qp)
        return ENOMEM;
    qp->wqe_cnt = wqe_cnt;
    qp->sq = mlx5_sn_alloc_pages((size_t)wqe_cnt * MLX5_SEND_WQE_BB);
    qp->dbrec = mlx5_sn_alloc_pages(MLX5_SN_PAGE);
    qp->uar = mlx5_sn_alloc_pages(MLX5_SN_PAGE);
    qp->pend = calloc(wqe_cnt, sizeof(*qp->pend));
    int err = ENOMEM;
    if (!qp->sq || !qp->dbrec || !qp->uar || !qp->pend)
        goto fail;
    err = qp_engine_create(ctx, qp, attr);
    if (err)
        goto fail;

    pthread_mutex_lock(&nic.lock);
    qp->scq = cq_get_locked(attr->send_cq, &err);
    if (!qp->scq) {
        pthread_mutex_unlock(&nic.lock);
        ibv_destroy_qp(qp->ibqp);
        goto fail;
    }
    qp_publish_locked(qp);
    pthread_mutex_unlock(&nic.lock);

    /* What the user may post: WRs of the largest WQE it asked for. */
    attr->cap.max_send_wr = wqe_cnt / bbs;
    attr->cap.max_inline_data = qp->max_inline < attr->cap.max_inline_data
                                ? qp->max_inline : attr->cap.max_inline_data;
    *out = qp->ibqp;
    return 0;

fail:
    if (qp->hidden_cq)
        ibv_destroy_cq(qp->hidden_cq);
    qp_free(qp);
    return err;
}

int mlx5_nic_qp_create_ext(struct ibv_context *ctx, const struct mlx5_sn_ext_qp *e,
                           struct ibv_qp **out)
{
    struct mlx5_sn_qp *qp = calloc(1, sizeof(*qp));
    if (!qp)
        return ENOMEM;
    qp->ext = true;
    qp->wqe_cnt = e->wqe_cnt;
    qp->sq = e->sq;
    qp->sq_gpu = e->sq_gpu;
    qp->dbrec = e->dbrec;
    qp->dbr_gpu = e->dbr_gpu;
    qp->uar = e->uar;
    /* The register's current value is not a doorbell of this QP. */
    qp->db_seen = __atomic_load_n((uint64_t *)(qp->uar + MLX5_SN_BF_OFFSET), __ATOMIC_ACQUIRE);
    qp->pend = calloc(e->wqe_cnt, sizeof(*qp->pend));
    if (qp->sq_gpu)
        qp->shadow = mlx5_sn_alloc_pages((size_t)e->wqe_cnt * MLX5_SEND_WQE_BB);
    if (!qp->pend || (qp->sq_gpu && !qp->shadow)) {
        qp_free(qp);
        return ENOMEM;
    }
    struct ibv_qp_init_attr_ex attr;
    memset(&attr, 0, sizeof(attr));
    attr.qp_type = IBV_QPT_RC;
    attr.comp_mask = IBV_QP_INIT_ATTR_PD;
    attr.pd = e->pd;
    attr.cap.max_send_wr = e->wqe_cnt;
    attr.cap.max_recv_wr = 1;
    attr.cap.max_send_sge = 1;
    attr.cap.max_recv_sge = 1;
    attr.cap.max_inline_data = MLX5_SN_MAX_INLINE;
    int err = qp_engine_create(ctx, qp, &attr);
    if (err) {
        if (qp->hidden_cq)
            ibv_destroy_cq(qp->hidden_cq);
        qp_free(qp);
        return err;
    }
    pthread_mutex_lock(&nic.lock);
    qp->scq = e->cq;
    qp_publish_locked(qp);
    pthread_mutex_unlock(&nic.lock);
    *out = qp->ibqp;
    return 0;
}

int mlx5_nic_cq_create_ext(const struct mlx5_sn_ext_cq *e, struct mlx5_sn_cq **out)
{
    struct mlx5_sn_cq *c = calloc(1, sizeof(*c));
    if (!c)
        return ENOMEM;
    c->ext = true;
    c->buf = e->buf;
    c->buf_gpu = e->buf_gpu;
    c->cqe_cnt = e->cqe_cnt;
    c->dbrec = e->dbrec;
    c->dbr_gpu = e->dbr_gpu;
    c->uar = e->uar;
    c->overrun_ignore = e->overrun_ignore;
    /* The ring's initial contents are the user's business, as on a NIC. */
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_lock(&nic.lock);
    c->cqn = nic.next_cqn++;
    c->refs = 1;
    c->next = nic.cqs;
    nic.cqs = c;
    pthread_mutex_unlock(&nic.lock);
    *out = c;
    return 0;
}

int mlx5_nic_cq_release(struct mlx5_sn_cq *c)
{
    pthread_mutex_lock(&nic.lock);
    if (c->refs > 1) {
        pthread_mutex_unlock(&nic.lock);
        return EBUSY;
    }
    pthread_mutex_lock(&c->lock);
    c->detached = true;
    pthread_mutex_unlock(&c->lock);
    cq_unref_locked(c);
    pthread_mutex_unlock(&nic.lock);
    return 0;
}

int mlx5_nic_qp_info(struct ibv_qp *ibqp, struct mlx5dv_qp *out)
{
    int rc = EOPNOTSUPP;    /* not made by mlx5dv_create_qp: no mlx5 ring */
    pthread_mutex_lock(&nic.lock);
    for (struct mlx5_sn_qp *qp = nic.qps; qp; qp = qp->next) {
        if (qp->ibqp != ibqp)
            continue;
        out->dbrec = qp->dbrec;
        out->sq.buf = qp->sq;
        out->sq.wqe_cnt = qp->wqe_cnt;
        out->sq.stride = MLX5_SEND_WQE_BB;
        out->rq.buf = NULL;
        out->rq.wqe_cnt = 0;
        out->rq.stride = 0;
        out->bf.reg = qp->uar + MLX5_SN_BF_OFFSET;
        out->bf.size = MLX5_SN_BF_SIZE;
        out->comp_mask = 0;     /* none of the optional fields */
        rc = 0;
        break;
    }
    pthread_mutex_unlock(&nic.lock);
    return rc;
}

int mlx5_nic_cq_info(struct ibv_cq *cq, struct mlx5dv_cq *out)
{
    int err = 0;
    pthread_mutex_lock(&nic.lock);
    struct mlx5_sn_cq *c = cq_get_locked(cq, &err);
    if (c) {
        out->buf = c->buf;
        out->dbrec = c->dbrec;
        out->cqe_cnt = c->cqe_cnt;
        out->cqe_size = sizeof(struct mlx5_cqe64);
        out->cq_uar = c->uar;
        out->cqn = c->cqn;
        out->comp_mask = 0;
    }
    pthread_mutex_unlock(&nic.lock);
    return c ? 0 : err;
}

void mlx5_nic_qp_gone(struct ibv_qp *ibqp)
{
    pthread_mutex_lock(&nic.lock);
    for (struct mlx5_sn_qp **pp = &nic.qps; *pp; pp = &(*pp)->next) {
        struct mlx5_sn_qp *qp = *pp;
        if (qp->ibqp != ibqp)
            continue;
        *pp = qp->next;
        /* The hidden CQ is still attached to the QP being destroyed. */
        if (nic.ngrave < (int)(sizeof(nic.grave) / sizeof(nic.grave[0])))
            nic.grave[nic.ngrave++] = qp->hidden_cq;
        cq_unref_locked(qp->scq);
        qp_free(qp);
        break;
    }
    pthread_mutex_unlock(&nic.lock);
}

void mlx5_nic_cq_gone(struct ibv_cq *cq)
{
    pthread_mutex_lock(&nic.lock);
    for (int i = 0; i < nic.ngrave; i++)
        if (nic.grave[i] == cq)
            nic.grave[i] = nic.grave[--nic.ngrave];
    struct mlx5_sn_cq *c = cq_find_locked(cq);
    if (c) {
        pthread_mutex_lock(&c->lock);
        c->detached = true;
        pthread_mutex_unlock(&c->lock);
        cq_unref_locked(c);
    }
    pthread_mutex_unlock(&nic.lock);
}
