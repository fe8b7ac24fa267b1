/* qp_ex.c: the extended QP's work-request builder (ibv_wr_start ...
 * ibv_wr_complete), for RC and UD QPs created with
 * IBV_QP_INIT_ATTR_SEND_OPS_FLAGS (UD: the sends, addressed with
 * ibv_wr_set_ud_addr, as mlx5 offers them).
 *
 * In rdma-core the ibv_wr_* calls are inlines of verbs.h that jump through
 * the function pointers of struct ibv_qp_ex; softnic fills them here.  The
 * builder collects the work requests between wr_start and wr_complete as
 * struct ibv_send_wr (each op call opens one, taking the wr_id and
 * wr_flags the caller set on the ibv_qp_ex just before it; the
 * set_sge/set_inline calls fill the open one) and wr_complete posts the
 * whole batch with one qp_post_send -- the same path as ibv_post_send, so
 * both faces execute identically.  wr_abort drops the batch; nothing of it
 * reaches the send queue.  As on mlx5, a misuse (an op the QP was not
 * created for, a second data setter, too many WRs or SGEs) is remembered
 * and wr_complete reports it (EINVAL/ENOMEM) and posts nothing.  Inline
 * data is copied when it is set, so the caller may reuse its buffer before
 * wr_complete.  The builder lock is held from wr_start to complete/abort,
 * as mlx5 holds its send-queue lock: one batch per QP at a time. */
#include "softnic.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct sn_ex_wr {
    struct ibv_send_wr wr;
    struct ibv_sge sge[SN_MAX_SGE];
    char *inl;                     /* owned copy of inline data, or NULL */
    bool data_set;                 /* a set_sge/set_inline call was made */
};

struct sn_qp_ex {
    pthread_mutex_t lock;          /* held from wr_start to complete/abort */
    uint64_t send_ops;             /* IBV_QP_EX_WITH_* it was created with */
    struct sn_ex_wr *wrs;
    uint32_t n, cap;
    int err;                       /* first misuse in this batch */
    bool open;                     /* between wr_start and complete/abort */
};

#define SN_QP_EX_OPS (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
                      IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | \
                      IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | \
                      IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

/* what mlx5 builds on a UD QP */
#define SN_QP_EX_OPS_UD (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)

static struct sn_qp *qp_of_ex(struct ibv_qp_ex *x) { return (struct sn_qp *)x; }

static void batch_clear(struct sn_qp_ex *b)
{
    for (uint32_t i = 0; i < b->n; i++)
        free(b->wrs[i].inl);
    b->n = 0;
    b->err = 0;
}

static void ex_start(struct ibv_qp_ex *x)
{
    struct sn_qp_ex *b = qp_of_ex(x)->ex;
    /* error-checking lock: a second wr_start by the thread that holds it
     * (a misuse) starts the batch over instead of deadlocking */
    int rc = pthread_mutex_lock(&b->lock);
    (void)rc;                      /* 0, or EDEADLK: this thread holds it */
    batch_clear(b);
    b->open = true;
}

/* Opens the next WR of the batch for opcode, or records why it cannot. */
static struct sn_ex_wr *open_wr(struct ibv_qp_ex *x, uint64_t op_flag, enum ibv_wr_opcode op)
{
    struct sn_qp *qp = qp_of_ex(x);
    struct sn_qp_ex *b = qp->ex;
    if (!b->open || b->err)
        return NULL;
    if (!(b->send_ops & op_flag)) {
        b->err = EINVAL;
        return NULL;
    }
    if (b->n == qp->cap.max_send_wr) {
        b->err = ENOMEM;          /* more than the send queue can hold */
        return NULL;
    }
    if (b->n == b->cap) {
        uint32_t cap = b->cap ? b->cap * 2 : 8;
        struct sn_ex_wr *w = realloc(b->wrs, (size_t)cap * sizeof(*w));
        if (!w) {
            b->err = ENOMEM;
            return NULL;
        }
        b->wrs = w;
        b->cap = cap;
    }
    struct sn_ex_wr *w = &b->wrs[b->n++];
    memset(w, 0, sizeof(*w));
    w->wr.wr_id = x->wr_id;
    w->wr.send_flags = x->wr_flags;
    w->wr.opcode = op;
    return w;
}

/* The WR the data setters fill: the last one opened. */
static struct sn_ex_wr *cur_wr(struct ibv_qp_ex *x)
{
    struct sn_qp_ex *b = qp_of_ex(x)->ex;
    if (!b->open || b->err)
        return NULL;
    if (b->n == 0 || b->wrs[b->n - 1].data_set) {
        b->err = EINVAL;          /* no op to attach data to, or twice */
        return NULL;
    }
    b->wrs[b->n - 1].data_set = true;
    return &b->wrs[b->n - 1];
}

static void ex_rdma_write(struct ibv_qp_ex *x, uint32_t rkey, uint64_t raddr)
{
    struct sn_ex_wr *w = open_wr(x, IBV_QP_EX_WITH_RDMA_WRITE, IBV_WR_RDMA_WRITE);
    if (w) {
        w->wr.wr.rdma.rkey = rkey;
        w->wr.wr.rdma.remote_addr = raddr;
    }
}

static void ex_rdma_write_imm(struct ibv_qp_ex *x, uint32_t rkey, uint64_t raddr, __be32 imm)
{
    struct sn_ex_wr *w = open_wr(x, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
                                 IBV_WR_RDMA_WRITE_WITH_IMM);
    if (w) {
        w->wr.wr.rdma.rkey = rkey;
        w->wr.wr.rdma.remote_addr = raddr;
        w->wr.imm_data = imm;
    }
}

static void ex_rdma_read(struct ibv_qp_ex *x, uint32_t rkey, uint64_t raddr)
{
    struct sn_ex_wr *w = open_wr(x, IBV_QP_EX_WITH_RDMA_READ, IBV_WR_RDMA_READ);
    if (w) {
        w->wr.wr.rdma.rkey = rkey;
        w->wr.wr.rdma.remote_addr = raddr;
    }
}

static void ex_send(struct ibv_qp_ex *x)
{
    open_wr(x, IBV_QP_EX_WITH_SEND, IBV_WR_SEND);
}

static void ex_send_imm(struct ibv_qp_ex *x, __be32 imm)
{
    struct sn_ex_wr *w = open_wr(x, IBV_QP_EX_WITH_SEND_WITH_IMM, IBV_WR_SEND_WITH_IMM);
    if (w)
        w->wr.imm_data = imm;
}

static void ex_atomic_cmp_swp(struct ibv_qp_ex *x, uint32_t rkey, uint64_t raddr,
                              uint64_t compare, uint64_t swap)
{
    struct sn_ex_wr *w = open_wr(x, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP,
                                 IBV_WR_ATOMIC_CMP_AND_SWP);
    if (w) {
        w->wr.wr.atomic.rkey = rkey;
        w->wr.wr.atomic.remote_addr = raddr;
        w->wr.wr.atomic.compare_add = compare;
        w->wr.wr.atomic.swap = swap;
    }
}

static void ex_atomic_fetch_add(struct ibv_qp_ex *x, uint32_t rkey, uint64_t raddr,
                                uint64_t add)
{
    struct sn_ex_wr *w = open_wr(x, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
                                 IBV_WR_ATOMIC_FETCH_AND_ADD);
    if (w) {
        w->wr.wr.atomic.rkey = rkey;
        w->wr.wr.atomic.remote_addr = raddr;
        w->wr.wr.atomic.compare_add = add;
    }
}

/* The address of the WR opened last (UD): not a data setter, so it may
 * come before or after the SGEs, as in mlx5. */
static void ex_set_ud_addr(struct ibv_qp_ex *x, struct ibv_ah *ah, uint32_t remote_qpn,
                           uint32_t remote_qkey)
{
    struct sn_qp_ex *b = qp_of_ex(x)->ex;
    if (!b->open || b->err)
        return;
    if (b->n == 0) {
        b->err = EINVAL;
        return;
    }
    struct ibv_send_wr *wr = &b->wrs[b->n - 1].wr;
    wr->wr.ud.ah = ah;
    wr->wr.ud.remote_qpn = remote_qpn;
    wr->wr.ud.remote_qkey = remote_qkey;
}

static void ex_set_sge_list(struct ibv_qp_ex *x, size_t n, const struct ibv_sge *sg)
{
    struct sn_ex_wr *w = cur_wr(x);
    if (!w)
        return;
    if (n > SN_MAX_SGE || (n && !sg)) {
        qp_of_ex(x)->ex->err = EINVAL;
        return;
    }
    memcpy(w->sge, sg, n * sizeof(*sg));
    w->wr.num_sge = (int)n;
}

static void ex_set_sge(struct ibv_qp_ex *x, uint32_t lkey, uint64_t addr, uint32_t len)
{
    struct ibv_sge sge = { .addr = addr, .length = len, .lkey = lkey };
    ex_set_sge_list(x, 1, &sge);
}

static void ex_set_inline_data_list(struct ibv_qp_ex *x, size_t n, const struct ibv_data_buf *bufs)
{
    struct sn_qp *qp = qp_of_ex(x);
    struct sn_ex_wr *w = cur_wr(x);
    if (!w)
        return;
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += bufs[i].length;
    if (total > qp->cap.max_inline_data) {
        qp->ex->err = EINVAL;     /* mlx5 refuses it at complete */
        return;
    }
    /* one owned copy; posted as one inline SGE (the verbs path gathers
     * inline SGEs into one payload the same way) */
    w->inl = malloc(total ? total : 1);
    if (!w->inl) {
        qp->ex->err = ENOMEM;
        return;
    }
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(w->inl + off, bufs[i].addr, bufs[i].length);
        off += bufs[i].length;
    }
    w->wr.send_flags |= IBV_SEND_INLINE;
    w->sge[0].addr = (uint64_t)(uintptr_t)w->inl;
    w->sge[0].length = (uint32_t)total;
    w->wr.num_sge = total ? 1 : 0;
}

static void ex_set_inline_data(struct ibv_qp_ex *x, void *addr, size_t len)
{
    struct ibv_data_buf b = { .addr = addr, .length = len };
    ex_set_inline_data_list(x, 1, &b);
}

static int ex_complete(struct ibv_qp_ex *x)
{
    struct sn_qp *qp = qp_of_ex(x);
    struct sn_qp_ex *b = qp->ex;
    int err = b->open ? b->err : EINVAL;
    if (!err && b->n) {
        for (uint32_t i = 0; i < b->n; i++) {
            b->wrs[i].wr.sg_list = b->wrs[i].sge;
            b->wrs[i].wr.next = i + 1 < b->n ? &b->wrs[i + 1].wr : NULL;
        }
        struct ibv_send_wr *bad = NULL;
        err = qp_post_send(&qp->ibqp, &b->wrs[0].wr, &bad);
    }
    bool was_open = b->open;
    batch_clear(b);
    b->open = false;
    if (was_open)
        pthread_mutex_unlock(&b->lock);
    return err;
}

static void ex_abort(struct ibv_qp_ex *x)
{
    struct sn_qp_ex *b = qp_of_ex(x)->ex;
    if (!b->open)
        return;
    batch_clear(b);
    b->open = false;
    pthread_mutex_unlock(&b->lock);
}

int qp_ex_init(struct sn_qp *qp, uint64_t send_ops)
{
    if (send_ops & ~(uint64_t)SN_QP_EX_OPS)
        return EOPNOTSUPP;         /* bind MW, local inv, TSO, send inv ... */
    if (qp->ibqp.qp_type != IBV_QPT_RC &&
        (qp->ibqp.qp_type != IBV_QPT_UD || (send_ops & ~(uint64_t)SN_QP_EX_OPS_UD)))
        return EOPNOTSUPP;
    struct sn_qp_ex *b = calloc(1, sizeof(*b));
    if (!b)
        return ENOMEM;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(&b->lock, &ma);
    pthread_mutexattr_destroy(&ma);
    b->send_ops = send_ops;
    qp->ex = b;
    struct ibv_qp_ex *x = &qp->ibqp_ex;
    x->comp_mask = 0;
    x->wr_id = 0;
    x->wr_flags = 0;
    x->wr_rdma_write = ex_rdma_write;
    x->wr_rdma_write_imm = ex_rdma_write_imm;
    x->wr_rdma_read = ex_rdma_read;
    x->wr_send = ex_send;
    x->wr_send_imm = ex_send_imm;
    x->wr_atomic_cmp_swp = ex_atomic_cmp_swp;
    x->wr_atomic_fetch_add = ex_atomic_fetch_add;
    x->wr_set_sge = ex_set_sge;
    if (qp->ibqp.qp_type == IBV_QPT_UD)
        x->wr_set_ud_addr = ex_set_ud_addr;
    x->wr_set_sge_list = ex_set_sge_list;
    x->wr_set_inline_data = ex_set_inline_data;
    x->wr_set_inline_data_list = ex_set_inline_data_list;
    x->wr_start = ex_start;
    x->wr_complete = ex_complete;
    x->wr_abort = ex_abort;
    /* ops softnic does not offer stay NULL: their send_ops bit is refused
     * at creation, so a correct program never calls them */
    return 0;
}

void qp_ex_free(struct sn_qp *qp)
{
    struct sn_qp_ex *b = qp->ex;
    if (!b)
        return;
    batch_clear(b);
    free(b->wrs);
    pthread_mutex_destroy(&b->lock);
    free(b);
    qp->ex = NULL;
}
