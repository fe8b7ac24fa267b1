/* mlx5_devx.c: the DEVX face of softnic's libmlx5 -- user memory (umem),
 * UAR pages, and the PRM commands sent through mlx5dv_devx_obj_create/
 * modify/query/destroy and mlx5dv_devx_general_cmd: CREATE_CQ and
 * CREATE_QP over umem, the QP state moves and QUERY_QP, and the
 * device-wide queries of mlx5_hca_cap.c (QUERY_HCA_CAP, QUERY_ROCE_ADDRESS).
 * What they make are the ordinary dv QPs and CQs of mlx5_nic.c over the
 * user's memory, so the same NIC thread executes their WQEs.
 *
 * Every softnic context can send DEVX commands, whether opened with
 * ibv_open_device or with mlx5dv_open_device(MLX5DV_CONTEXT_FLAGS_DEVX):
 * rdma-core's mlx5 provider asks the kernel for a DEVX user context on
 * every open and falls back only when the kernel refuses, which a kernel
 * and firmware that have DEVX do not.  A context of another libibverbs
 * gets EOPNOTSUPP.
 *
 * Everything in an input mailbox is untrusted: a command is checked field
 * by field before anything is built, and a bad one fails the way firmware
 * fails it -- the output mailbox gets a PRM status (BAD_OP for a command
 * softnic's firmware does not have, BAD_PARAM, BAD_RESOURCE, BAD_INP_LEN,
 * BAD_OUTP_LEN ...) and a syndrome naming the check, and the call fails
 * with errno EREMOTEIO, as rdma-core reports a command the device refused.
 * Arguments that make no mailbox (NULL, short output) give EINVAL.  What
 * softnic leaves out: a CQ or QP whose memory is a page list instead of
 * umem, 128-byte CQEs, receive queues in the mlx5 ring (rq_type must be
 * zero-length), DBR-less send (send_dbr_mode other than 0), 2RST,
 * dmabuf umem (the fd cannot be mapped back to an address here:
 * EOPNOTSUPP, after which DOCA GPUNetIO registers the memory by
 * address). */
#include "mlx5_nic.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gdaki_prm.h"

#define EXPORT __attribute__((visibility("default")))

/* Syndromes softnic puts in a refused command's output: which check. */
enum {
    SYN_OPCODE = 0x5a0001,
    SYN_INLEN,
    SYN_OUTLEN,
    SYN_UMEM_NOT_VALID,
    SYN_UMEM_ID,
    SYN_UMEM_RANGE,
    SYN_DBR_NOT_UMEM,
    SYN_DBR_UMEM_ID,
    SYN_DBR_RANGE,
    SYN_UAR_PAGE,
    SYN_CQ_LOG_SIZE,
    SYN_CQE_SIZE,
    SYN_PAGE_OFFSET,
    SYN_QP_ST,
    SYN_QP_PD,
    SYN_QP_CQN,
    SYN_QP_RQ_TYPE,
    SYN_QP_NO_SQ,
    SYN_QP_LOG_SQ,
    SYN_QPN_MISMATCH,
    SYN_PORT,
    SYN_MTU,
    SYN_STATE_MOVE,
    SYN_ENGINE,
    SYN_BUSY,
    SYN_CQ_FORMAT,
    SYN_QP_DBR_MODE,
};

/* cqc bits softnic refuses: a collapsed CQ (every CQE in entry 0) and
 * compressed CQEs are formats its CQ writer does not produce. */
#define CQC_CC PRM_CQC(0x0b), 1
#define CQC_CQE_COMP_EN PRM_CQC(0x11), 1
/* qpc.send_dbr_mode: 0 the doorbell record is valid; 1 (NO_DBR_EXT) and
 * the rest ask for DBR-less send, which softnic's NIC does not have (it
 * takes the producer index from the record): hca_cap_2 says so. */
#define QPC_SEND_DBR_MODE PRM_QPC(0x80), 2

enum obj_type { OBJ_CQ = 1, OBJ_QP = 2 };

struct dx_umem {
    struct mlx5dv_devx_umem pub;    /* first: the pointer the user holds */
    struct ibv_context *ctx;
    uint8_t *addr;
    size_t size;
    bool gpu;
    int refs;
    struct dx_umem *next;
};

struct dx_uar {
    struct mlx5dv_devx_uar pub;     /* first */
    struct ibv_context *ctx;
    void *page;
    int refs;
    bool freed;                     /* the user freed it; objects still use it */
    struct dx_uar *next;
};

struct mlx5dv_devx_obj {
    enum obj_type type;
    struct ibv_context *ctx;
    uint32_t id;                    /* cqn, qpn */
    struct mlx5_sn_cq *cq;          /* OBJ_CQ */
    struct ibv_qp *qp;              /* OBJ_QP */
    struct mlx5dv_devx_obj *cq_obj; /* OBJ_QP: its CQ object */
    struct dx_umem *umem[2];
    struct dx_uar *uar;
    uint8_t port;
    uint8_t log_sq_size;            /* OBJ_QP */
    int users;                      /* OBJ_CQ: QP objects on it */
    struct mlx5dv_devx_obj *next;
};

struct dx_pd {
    struct ibv_pd *pd;
    struct dx_pd *next;
};

static struct {
    pthread_mutex_t lock;
    struct dx_umem *umems;
    struct dx_uar *uars;
    struct mlx5dv_devx_obj *objs;
    struct dx_pd *pds;
    uint32_t next_umem, next_uar;
} dx = { .lock = PTHREAD_MUTEX_INITIALIZER, .next_umem = 1, .next_uar = 1 };

/* ------------------------------------------------------------ registries */

/* The pdn a user learns from mlx5dv_init_obj(MLX5DV_OBJ_PD) names that PD
 * in later CREATE_QP commands. */
void mlx5_devx_note_pd(struct ibv_pd *pd)
{
    pthread_mutex_lock(&dx.lock);
    for (struct dx_pd *p = dx.pds; p; p = p->next)
        if (p->pd == pd) {
            pthread_mutex_unlock(&dx.lock);
            return;
        }
    struct dx_pd *p = calloc(1, sizeof(*p));
    if (p) {
        p->pd = pd;
        p->next = dx.pds;
        dx.pds = p;
    }
    pthread_mutex_unlock(&dx.lock);
}

/* 0, or the errno of a context DEVX calls cannot use. */
static int check_ctx(struct ibv_context *ctx)
{
    if (!ctx)
        return EINVAL;
    return mlx5_priv_is_softnic(ctx) ? 0 : EOPNOTSUPP;
}

static struct dx_umem *umem_find_locked(struct ibv_context *ctx, uint32_t id)
{
    for (struct dx_umem *u = dx.umems; u; u = u->next)
        if (u->pub.umem_id == id && u->ctx == ctx)
            return u;
    return NULL;
}

static struct dx_uar *uar_find_locked(struct ibv_context *ctx, uint32_t page_id)
{
    for (struct dx_uar *u = dx.uars; u; u = u->next)
        if (u->pub.page_id == page_id && u->ctx == ctx && !u->freed)
            return u;
    return NULL;
}

static struct mlx5dv_devx_obj *obj_find_locked(struct ibv_context *ctx, enum obj_type t, uint32_t id)
{
    for (struct mlx5dv_devx_obj *o = dx.objs; o; o = o->next)
        if (o->type == t && o->id == id && o->ctx == ctx)
            return o;
    return NULL;
}

static struct ibv_pd *pd_find_locked(struct ibv_context *ctx, uint32_t pdn)
{
    for (struct dx_pd *p = dx.pds; p; p = p->next)
        if (p->pd->handle == pdn && p->pd->context == ctx)
            return p->pd;
    return NULL;
}

static void uar_unref_locked(struct dx_uar *u)
{
    if (--u->refs > 0 || !u->freed)
        return;
    for (struct dx_uar **pp = &dx.uars; *pp; pp = &(*pp)->next)
        if (*pp == u) {
            *pp = u->next;
            break;
        }
    free(u->page);
    free(u);
}

/* ------------------------------------------------------------ umem, UAR */

#define UMEM_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
                     IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_RELAXED_ORDERING)

EXPORT struct mlx5dv_devx_umem *mlx5dv_devx_umem_reg(struct ibv_context *ctx, void *addr,
                                                     size_t size, uint32_t access)
{
    int rc = check_ctx(ctx);
    if (!rc && (!addr || size == 0 || (access & ~(uint32_t)UMEM_ACCESS)))
        rc = EINVAL;
    if (rc) {
        errno = rc;
        return NULL;
    }
    struct dx_umem *u = calloc(1, sizeof(*u));
    if (!u) {
        errno = ENOMEM;
        return NULL;
    }
    u->ctx = ctx;
    u->addr = addr;
    u->size = size;
    u->gpu = mlx5_priv_gpu_is_device_ptr(addr);
    pthread_mutex_lock(&dx.lock);
    u->pub.umem_id = dx.next_umem++;
    u->next = dx.umems;
    dx.umems = u;
    pthread_mutex_unlock(&dx.lock);
    return &u->pub;
}

EXPORT struct mlx5dv_devx_umem *mlx5dv_devx_umem_reg_ex(struct ibv_context *ctx,
                                                        struct mlx5dv_devx_umem_in *in)
{
    if (!in || (in->comp_mask & ~(uint64_t)MLX5DV_UMEM_MASK_DMABUF)) {
        errno = EINVAL;
        return NULL;
    }
    if (in->comp_mask & MLX5DV_UMEM_MASK_DMABUF) {
        /* The dmabuf path names memory by fd and offset; softnic reaches
         * GPU memory by address only. */
        errno = EOPNOTSUPP;
        return NULL;
    }
    return mlx5dv_devx_umem_reg(ctx, in->addr, in->size, in->access);
}

EXPORT int mlx5dv_devx_umem_dereg(struct mlx5dv_devx_umem *umem)
{
    if (!umem)
        return EINVAL;
    pthread_mutex_lock(&dx.lock);
    for (struct dx_umem **pp = &dx.umems; *pp; pp = &(*pp)->next) {
        struct dx_umem *u = *pp;
        if (&u->pub != umem)
            continue;
        if (u->refs) {
            pthread_mutex_unlock(&dx.lock);
            return EBUSY;       /* a CQ or QP still lives in it */
        }
        *pp = u->next;
        pthread_mutex_unlock(&dx.lock);
        free(u);
        return 0;
    }
    pthread_mutex_unlock(&dx.lock);
    return EINVAL;
}

EXPORT struct mlx5dv_devx_uar *mlx5dv_devx_alloc_uar(struct ibv_context *ctx, uint32_t flags)
{
    int rc = check_ctx(ctx);
    /* Types (mlx5dv.h): 0 BlueFlame, 1 non-cached, 2 non-cached and
     * dedicated (rdma-core 53); bit 31 asks for the page without its
     * mmap.  Every UAR here is a dedicated page of its own. */
    uint32_t type = flags & ~(1u << 31);
    if (!rc && type > 2)
        rc = EINVAL;
    if (rc) {
        errno = rc;
        return NULL;
    }
    struct dx_uar *u = calloc(1, sizeof(*u));
    void *page = mlx5_sn_alloc_pages(MLX5_SN_PAGE);
    if (!u || !page) {
        free(u);
        free(page);
        errno = ENOMEM;
        return NULL;
    }
    u->ctx = ctx;
    u->page = page;
    u->pub.base_addr = page;
    u->pub.reg_addr = (uint8_t *)page + MLX5_SN_BF_OFFSET;
    u->pub.mmap_off = 0;
    u->pub.comp_mask = 0;
    pthread_mutex_lock(&dx.lock);
    u->pub.page_id = dx.next_uar++;
    u->next = dx.uars;
    dx.uars = u;
    pthread_mutex_unlock(&dx.lock);
    return &u->pub;
}

EXPORT void mlx5dv_devx_free_uar(struct mlx5dv_devx_uar *uar)
{
    if (!uar)
        return;
    pthread_mutex_lock(&dx.lock);
    for (struct dx_uar *u = dx.uars; u; u = u->next)
        if (&u->pub == uar && !u->freed) {
            u->freed = true;
            u->refs++;
            uar_unref_locked(u);    /* frees it unless an object holds it */
            break;
        }
    pthread_mutex_unlock(&dx.lock);
}

EXPORT int mlx5dv_devx_query_eqn(struct ibv_context *ctx, uint32_t vector, uint32_t *eqn)
{
    int rc = check_ctx(ctx);
    if (rc)
        return rc;
    if (!eqn || vector >= (uint32_t)ctx->num_comp_vectors + 1)
        return EINVAL;
    *eqn = 0;       /* one event queue; completions are polled */
    return 0;
}

/* ------------------------------------------------------------ commands */

/* A refused command: status and syndrome in out, errno EREMOTEIO. */
int mlx5_devx_refuse(void *out, uint8_t status, uint32_t syndrome)
{
    PRM_SET(out, PRM_OUT_STATUS, status);
    PRM_SET(out, PRM_OUT_SYNDROME, syndrome);
    return EREMOTEIO;
}

/* Resolves (umem id, offset, len, alignment) to an address, or a refusal. */
static int umem_range_locked(struct ibv_context *ctx, uint32_t id, uint64_t off, uint64_t len,
                             uint64_t align, struct dx_umem **u, uint32_t syn_id, uint32_t syn_range,
                             void *out)
{
    *u = umem_find_locked(ctx, id);
    if (!*u)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_RES, syn_id);
    if ((off & (align - 1)) || off > (*u)->size || len > (*u)->size - off)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_PARAM, syn_range);
    return 0;
}

static int create_cq_locked(struct ibv_context *ctx, const void *in, size_t inlen, void *out,
                            struct mlx5dv_devx_obj *o)
{
    if (inlen < PRM_CREATE_CQ_IN_BYTES)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_INP_LEN, SYN_INLEN);
    if (PRM_GET(in, PRM_CQ_UMEM_VALID) != 1)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_PARAM, SYN_UMEM_NOT_VALID);
    if (PRM_GET(in, PRM_CQ_CQE_SZ) != 0)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_PARAM, SYN_CQE_SIZE);
    if (PRM_GET(in, CQC_CC) || PRM_GET(in, CQC_CQE_COMP_EN))
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_PARAM, SYN_CQ_FORMAT);
    uint32_t log = (uint32_t)PRM_GET(in, PRM_CQ_LOG_SIZE);
    if (log < 1 || log > 16)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_PARAM, SYN_CQ_LOG_SIZE);
    if (PRM_GET(in, PRM_CQ_PAGE_OFFSET) != 0)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_PARAM, SYN_PAGE_OFFSET);
    struct dx_umem *ring, *dbr;
    int rc = umem_range_locked(ctx, (uint32_t)PRM_GET(in, PRM_CQ_UMEM_ID), PRM_GET(in, PRM_CQ_UMEM_OFFSET),
                               (uint64_t)64 << log, 64, &ring, SYN_UMEM_ID, SYN_UMEM_RANGE, out);
    if (rc)
        return rc;
    if (PRM_GET(in, PRM_CQ_DBR_UMEM_VALID) != 1)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_PARAM, SYN_DBR_NOT_UMEM);
    rc = umem_range_locked(ctx, (uint32_t)PRM_GET(in, PRM_CQ_DBR_UMEM_ID), PRM_GET(in, PRM_CQ_DBR_ADDR),
                           8, 8, &dbr, SYN_DBR_UMEM_ID, SYN_DBR_RANGE, out);
    if (rc)
        return rc;
    struct dx_uar *uar = uar_find_locked(ctx, (uint32_t)PRM_GET(in, PRM_CQ_UAR_PAGE));
    if (!uar)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_RES, SYN_UAR_PAGE);
    struct mlx5_sn_ext_cq e = {
        .buf = ring->addr + PRM_GET(in, PRM_CQ_UMEM_OFFSET), .buf_gpu = ring->gpu,
        .cqe_cnt = 1u << log,
        .dbrec = (__be32 *)(dbr->addr + PRM_GET(in, PRM_CQ_DBR_ADDR)), .dbr_gpu = dbr->gpu,
        .uar = uar->page,
        .overrun_ignore = PRM_GET(in, PRM_CQ_OI) != 0,
    };
    if (mlx5_nic_cq_create_ext(&e, &o->cq) != 0)
        return mlx5_devx_refuse(out, PRM_STATUS_EXCEED_LIM, SYN_ENGINE);
    o->type = OBJ_CQ;
    o->id = o->cq->cqn;
    o->umem[0] = ring;
    o->umem[1] = dbr;
    o->uar = uar;
    PRM_SET(out, PRM_OUT_OBJ_ID, o->id);
    return 0;
}

static int create_qp_locked(struct ibv_context *ctx, const void *in, size_t inlen, void *out,
                            struct mlx5dv_devx_obj *o)
{
    if (inlen < PRM_QP_CMD_IN_BYTES)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_INP_LEN, SYN_INLEN);
    if (PRM_GET(in, PRM_QPC_ST) != PRM_QP_ST_RC)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_PARAM, SYN_QP_ST);
    struct ibv_pd *pd = pd_find_locked(ctx, (uint32_t)PRM_GET(in, PRM_QPC_PD));
    if (!pd)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_RES, SYN_QP_PD);
    struct mlx5dv_devx_obj *cq = obj_find_locked(ctx, OBJ_CQ, (uint32_t)PRM_GET(in, PRM_QPC_CQN_SND));
    uint32_t cqn_rcv = (uint32_t)PRM_GET(in, PRM_QPC_CQN_RCV);
    if (!cq || (cqn_rcv && !obj_find_locked(ctx, OBJ_CQ, cqn_rcv)))
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_RES, SYN_QP_CQN);
    if (PRM_GET(in, PRM_QPC_RQ_TYPE) != PRM_QP_RQ_ZERO_LEN)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_PARAM, SYN_QP_RQ_TYPE);
    if (PRM_GET(in, PRM_QPC_NO_SQ))
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_PARAM, SYN_QP_NO_SQ);
    if (PRM_GET(in, QPC_SEND_DBR_MODE) != 0)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_PARAM, SYN_QP_DBR_MODE);
    uint32_t log = (uint32_t)PRM_GET(in, PRM_QPC_LOG_SQ_SIZE);
    if (log < 1 || log > 15)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_PARAM, SYN_QP_LOG_SQ);
    if (PRM_GET(in, PRM_QPC_PAGE_OFFSET) != 0)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_PARAM, SYN_PAGE_OFFSET);
    struct dx_uar *uar = uar_find_locked(ctx, (uint32_t)PRM_GET(in, PRM_QPC_UAR_PAGE));
    if (!uar)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_RES, SYN_UAR_PAGE);
    if (PRM_GET(in, PRM_QP_WQ_UMEM_VALID) != 1)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_PARAM, SYN_UMEM_NOT_VALID);
    struct dx_umem *wq, *dbr;
    uint64_t wq_off = PRM_GET(in, PRM_QP_WQ_UMEM_OFFSET);
    int rc = umem_range_locked(ctx, (uint32_t)PRM_GET(in, PRM_QP_WQ_UMEM_ID), wq_off,
                               (uint64_t)MLX5_SEND_WQE_BB << log, MLX5_SEND_WQE_BB, &wq, SYN_UMEM_ID,
                               SYN_UMEM_RANGE, out);
    if (rc)
        return rc;
    if (PRM_GET(in, PRM_QPC_DBR_UMEM_VALID) != 1)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_PARAM, SYN_DBR_NOT_UMEM);
    uint64_t dbr_off = PRM_GET(in, PRM_QPC_DBR_ADDR);
    rc = umem_range_locked(ctx, (uint32_t)PRM_GET(in, PRM_QPC_DBR_UMEM_ID), dbr_off, 8, 8, &dbr,
                           SYN_DBR_UMEM_ID, SYN_DBR_RANGE, out);
    if (rc)
        return rc;
    struct mlx5_sn_ext_qp e = {
        .pd = pd, .cq = cq->cq,
        .sq = wq->addr + wq_off, .sq_gpu = wq->gpu, .wqe_cnt = 1u << log,
        .dbrec = (__be32 *)(dbr->addr + dbr_off), .dbr_gpu = dbr->gpu,
        .uar = uar->page,
    };
    /* Lock order: dx.lock, then the NIC's. */
    struct ibv_qp *qp = NULL;
    rc = mlx5_nic_qp_create_ext(ctx, &e, &qp);
    if (rc)
        return mlx5_devx_refuse(out, PRM_STATUS_EXCEED_LIM, SYN_ENGINE);
    o->type = OBJ_QP;
    o->qp = qp;
    o->log_sq_size = (uint8_t)log;
    o->id = qp->qp_num;
    o->cq_obj = cq;
    o->umem[0] = wq;
    o->umem[1] = dbr;
    o->uar = uar;
    PRM_SET(out, PRM_OUT_OBJ_ID, o->id);
    return 0;
}

static bool mailbox_args(const void *in, size_t inlen, void *out, size_t outlen)
{
    return in && out && inlen >= 8 && outlen >= PRM_OUT_BYTES;
}

EXPORT struct mlx5dv_devx_obj *mlx5dv_devx_obj_create(struct ibv_context *ctx, const void *in,
                                                      size_t inlen, void *out, size_t outlen)
{
    int rc = check_ctx(ctx);
    if (!rc && !mailbox_args(in, inlen, out, outlen))
        rc = EINVAL;
    if (rc) {
        errno = rc;
        return NULL;
    }
    memset(out, 0, outlen);
    struct mlx5dv_devx_obj *o = calloc(1, sizeof(*o));
    if (!o) {
        errno = ENOMEM;
        return NULL;
    }
    o->ctx = ctx;
    pthread_mutex_lock(&dx.lock);
    uint32_t op = (uint32_t)PRM_GET(in, PRM_IN_OPCODE);
    if (op == PRM_OP_CREATE_CQ)
        rc = create_cq_locked(ctx, in, inlen, out, o);
    else if (op == PRM_OP_CREATE_QP)
        rc = create_qp_locked(ctx, in, inlen, out, o);
    else
        rc = mlx5_devx_refuse(out, PRM_STATUS_BAD_OP, SYN_OPCODE);
    if (!rc) {
        for (int i = 0; i < 2; i++)
            o->umem[i]->refs++;
        o->uar->refs++;
        if (o->cq_obj)
            o->cq_obj->users++;
        o->next = dx.objs;
        dx.objs = o;
    }
    pthread_mutex_unlock(&dx.lock);
    if (rc) {
        free(o);
        errno = rc;
        return NULL;
    }
    return o;
}

static enum ibv_qp_state state_of_move(uint32_t op)
{
    switch (op) {
    case PRM_OP_RST2INIT_QP: return IBV_QPS_INIT;
    case PRM_OP_INIT2RTR_QP: return IBV_QPS_RTR;
    case PRM_OP_RTR2RTS_QP:
    case PRM_OP_RTS2RTS_QP: return IBV_QPS_RTS;
    case PRM_OP_2ERR_QP: return IBV_QPS_ERR;
    default: return IBV_QPS_UNKNOWN;
    }
}

/* One state move of a DEVX QP, translated to the engine's ibv_modify_qp. */
static int modify_qp(struct mlx5dv_devx_obj *o, const void *in, size_t inlen, void *out)
{
    uint32_t op = (uint32_t)PRM_GET(in, PRM_IN_OPCODE);
    enum ibv_qp_state to = state_of_move(op);
    if (to == IBV_QPS_UNKNOWN)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_OP, SYN_OPCODE);
    size_t need = op == PRM_OP_2ERR_QP ? PRM_QUERY_QP_IN_BYTES : PRM_QP_CMD_IN_BYTES;
    if (inlen < need)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_INP_LEN, SYN_INLEN);
    if (PRM_GET(in, PRM_QP_CMD_QPN) != o->id)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_PARAM, SYN_QPN_MISMATCH);
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = to;
    int mask = IBV_QP_STATE;
    if (op == PRM_OP_RST2INIT_QP) {
        uint32_t port = (uint32_t)PRM_GET(in, PRM_ADS_VHCA_PORT);
        if (port == 0)
            return mlx5_devx_refuse(out, PRM_STATUS_BAD_PARAM, SYN_PORT);
        a.port_num = (uint8_t)port;
        a.pkey_index = (uint16_t)PRM_GET(in, PRM_ADS_PKEY_INDEX);
        a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
                            (PRM_GET(in, PRM_QPC_RRE) ? IBV_ACCESS_REMOTE_READ : 0) |
                            (PRM_GET(in, PRM_QPC_RWE) ? IBV_ACCESS_REMOTE_WRITE : 0) |
                            (PRM_GET(in, PRM_QPC_RAE) ? IBV_ACCESS_REMOTE_ATOMIC : 0);
        mask |= IBV_QP_PORT | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS;
    } else if (op == PRM_OP_INIT2RTR_QP) {
        uint32_t mtu = (uint32_t)PRM_GET(in, PRM_QPC_MTU);
        if (mtu < IBV_MTU_256 || mtu > IBV_MTU_4096)
            return mlx5_devx_refuse(out, PRM_STATUS_BAD_PARAM, SYN_MTU);
        a.path_mtu = (enum ibv_mtu)mtu;
        a.dest_qp_num = (uint32_t)PRM_GET(in, PRM_QPC_REMOTE_QPN);
        a.rq_psn = (uint32_t)PRM_GET(in, PRM_QPC_NEXT_RCV_PSN);
        a.max_dest_rd_atomic = (uint8_t)(1u << PRM_GET(in, PRM_QPC_LOG_RRA_MAX));
        a.min_rnr_timer = (uint8_t)PRM_GET(in, PRM_QPC_MIN_RNR_NAK);
        a.ah_attr.port_num = o->port;
        /* On an Ethernet port the path is RoCE, routed by GID whatever
         * grh says: DOCA GPUNetIO leaves grh 0 for RoCE and names the
         * peer by rgid_rip (udp_sport, dscp and rmac mean nothing to
         * softnic's wire, which routes by GID). */
        struct ibv_port_attr pa;
        bool roce = ibv_query_port(o->qp->context, o->port, &pa) == 0 &&
                    pa.link_layer == IBV_LINK_LAYER_ETHERNET;
        if (roce || PRM_GET(in, PRM_ADS_GRH)) {
            a.ah_attr.is_global = 1;
            prm_get_bytes(in, PRM_ADS_RGID_BIT, a.ah_attr.grh.dgid.raw, 16);
            a.ah_attr.grh.sgid_index = (uint8_t)PRM_GET(in, PRM_ADS_SRC_ADDR_INDEX);
            a.ah_attr.grh.hop_limit = (uint8_t)PRM_GET(in, PRM_ADS_HOP_LIMIT);
            a.ah_attr.grh.traffic_class = (uint8_t)PRM_GET(in, PRM_ADS_TCLASS);
        } else {
            a.ah_attr.dlid = (uint16_t)PRM_GET(in, PRM_ADS_RLID);
        }
        a.ah_attr.sl = (uint8_t)PRM_GET(in, PRM_ADS_SL);
        mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    } else if (op == PRM_OP_RTR2RTS_QP) {
        a.sq_psn = (uint32_t)PRM_GET(in, PRM_QPC_NEXT_SEND_PSN);
        a.timeout = (uint8_t)PRM_GET(in, PRM_ADS_ACK_TIMEOUT);
        a.retry_cnt = (uint8_t)PRM_GET(in, PRM_QPC_RETRY_COUNT);
        a.rnr_retry = (uint8_t)PRM_GET(in, PRM_QPC_RNR_RETRY);
        a.max_rd_atomic = (uint8_t)(1u << PRM_GET(in, PRM_QPC_LOG_SRA_MAX));
        mask |= IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                IBV_QP_MAX_QP_RD_ATOMIC;
    } else if (op == PRM_OP_RTS2RTS_QP) {
        return 0;   /* nothing softnic lets change in RTS */
    }
    int rc = ibv_modify_qp(o->qp, &a, mask);
    if (rc)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_QP_STATE, SYN_STATE_MOVE);
    if (op == PRM_OP_RST2INIT_QP)
        o->port = a.port_num;
    return 0;
}

EXPORT int mlx5dv_devx_obj_modify(struct mlx5dv_devx_obj *obj, const void *in, size_t inlen,
                                  void *out, size_t outlen)
{
    if (!obj || !mailbox_args(in, inlen, out, outlen))
        return EINVAL;
    memset(out, 0, outlen);
    if (obj->type != OBJ_QP)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_OP, SYN_OPCODE);
    return modify_qp(obj, in, inlen, out);
}

static uint8_t prm_state(enum ibv_qp_state s)
{
    switch (s) {
    case IBV_QPS_RESET: return PRM_QP_STATE_RST;
    case IBV_QPS_INIT: return PRM_QP_STATE_INIT;
    case IBV_QPS_RTR: return PRM_QP_STATE_RTR;
    case IBV_QPS_RTS: return PRM_QP_STATE_RTS;
    case IBV_QPS_SQE: return PRM_QP_STATE_SQER;
    default: return PRM_QP_STATE_ERR;
    }
}

EXPORT int mlx5dv_devx_obj_query(struct mlx5dv_devx_obj *obj, const void *in, size_t inlen,
                                 void *out, size_t outlen)
{
    if (!obj || !mailbox_args(in, inlen, out, outlen))
        return EINVAL;
    memset(out, 0, outlen);
    if (obj->type != OBJ_QP || PRM_GET(in, PRM_IN_OPCODE) != PRM_OP_QUERY_QP)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_OP, SYN_OPCODE);
    if (inlen < PRM_QUERY_QP_IN_BYTES)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_INP_LEN, SYN_INLEN);
    if (outlen < PRM_QUERY_QP_OUT_BYTES)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_OUTP_LEN, SYN_OUTLEN);
    if (PRM_GET(in, PRM_QP_CMD_QPN) != obj->id)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_PARAM, SYN_QPN_MISMATCH);
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;
    int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS | IBV_QP_AV |
               IBV_QP_PATH_MTU | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_RQ_PSN |
               IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_SQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
               IBV_QP_DEST_QPN;
    memset(&a, 0, sizeof(a));
    if (ibv_query_qp(obj->qp, &a, mask, &ia) != 0)
        return mlx5_devx_refuse(out, PRM_STATUS_INTERNAL_ERR, SYN_ENGINE);
    /* The context as CREATE_QP and the state moves set it (what a
     * ConnectX keeps of them; values the QP never got read 0). */
    PRM_SET(out, PRM_QPC_STATE, prm_state(a.qp_state));
    PRM_SET(out, PRM_QPC_ST, PRM_QP_ST_RC);
    PRM_SET(out, PRM_QPC_PM_STATE, PRM_QP_PM_MIGRATED);
    PRM_SET(out, PRM_QPC_PD, obj->qp->pd->handle);
    PRM_SET(out, PRM_QPC_UAR_PAGE, obj->uar->pub.page_id);
    PRM_SET(out, PRM_QPC_LOG_SQ_SIZE, obj->log_sq_size);
    PRM_SET(out, PRM_QPC_RQ_TYPE, PRM_QP_RQ_ZERO_LEN);
    PRM_SET(out, PRM_QPC_CQN_SND, obj->cq_obj->id);
    /* Before INIT2RTR gives the path its MTU, the port's active MTU: DOCA
     * GPUNetIO (NCCL 2.30) queries every QP it creates, still in RST, and
     * refuses one whose mtu is not a PRM MTU (1..5, 7). */
    if (a.qp_state == IBV_QPS_RESET || a.qp_state == IBV_QPS_INIT) {
        struct ibv_port_attr pa;
        if (ibv_query_port(obj->qp->context, obj->port ? obj->port : 1, &pa) != 0)
            return mlx5_devx_refuse(out, PRM_STATUS_INTERNAL_ERR, SYN_ENGINE);
        PRM_SET(out, PRM_QPC_MTU, pa.active_mtu);
    }
    if (a.qp_state == IBV_QPS_RESET)
        return 0;
    PRM_SET(out, PRM_ADS_VHCA_PORT, obj->port);
    PRM_SET(out, PRM_ADS_PKEY_INDEX, a.pkey_index);
    PRM_SET(out, PRM_QPC_RRE, (a.qp_access_flags & IBV_ACCESS_REMOTE_READ) != 0);
    PRM_SET(out, PRM_QPC_RWE, (a.qp_access_flags & IBV_ACCESS_REMOTE_WRITE) != 0);
    PRM_SET(out, PRM_QPC_RAE, (a.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC) != 0);
    if (a.qp_state == IBV_QPS_INIT)
        return 0;
    PRM_SET(out, PRM_QPC_MTU, a.path_mtu);
    PRM_SET(out, PRM_QPC_REMOTE_QPN, a.dest_qp_num);
    PRM_SET(out, PRM_QPC_NEXT_RCV_PSN, a.rq_psn);
    PRM_SET(out, PRM_QPC_MIN_RNR_NAK, a.min_rnr_timer);
    PRM_SET(out, PRM_QPC_LOG_RRA_MAX, mlx5_prm_log2(a.max_dest_rd_atomic, 7));
    PRM_SET(out, PRM_ADS_SL, a.ah_attr.sl);
    if (a.ah_attr.is_global) {
        prm_set_bytes(out, PRM_ADS_RGID_BIT, a.ah_attr.grh.dgid.raw, 16);
        PRM_SET(out, PRM_ADS_SRC_ADDR_INDEX, a.ah_attr.grh.sgid_index);
        PRM_SET(out, PRM_ADS_HOP_LIMIT, a.ah_attr.grh.hop_limit);
        PRM_SET(out, PRM_ADS_TCLASS, a.ah_attr.grh.traffic_class);
    } else {
        PRM_SET(out, PRM_ADS_RLID, a.ah_attr.dlid);
    }
    if (a.qp_state == IBV_QPS_RTR)
        return 0;
    PRM_SET(out, PRM_QPC_NEXT_SEND_PSN, a.sq_psn);
    PRM_SET(out, PRM_ADS_ACK_TIMEOUT, a.timeout);
    PRM_SET(out, PRM_QPC_RETRY_COUNT, a.retry_cnt);
    PRM_SET(out, PRM_QPC_RNR_RETRY, a.rnr_retry);
    PRM_SET(out, PRM_QPC_LOG_SRA_MAX, mlx5_prm_log2(a.max_rd_atomic, 7));
    return 0;
}

EXPORT int mlx5dv_devx_obj_destroy(struct mlx5dv_devx_obj *obj)
{
    if (!obj)
        return EINVAL;
    pthread_mutex_lock(&dx.lock);
    struct mlx5dv_devx_obj **pp = &dx.objs;
    while (*pp && *pp != obj)
        pp = &(*pp)->next;
    if (!*pp) {
        pthread_mutex_unlock(&dx.lock);
        return EINVAL;
    }
    if (obj->type == OBJ_CQ && (obj->users || mlx5_nic_cq_release(obj->cq) != 0)) {
        pthread_mutex_unlock(&dx.lock);
        return EBUSY;       /* a QP still completes into it */
    }
    *pp = obj->next;
    pthread_mutex_unlock(&dx.lock);
    if (obj->type == OBJ_QP) {
        int rc = ibv_destroy_qp(obj->qp);   /* the destroy hook retires the NIC side */
        if (rc) {
            pthread_mutex_lock(&dx.lock);
            obj->next = dx.objs;
            dx.objs = obj;
            pthread_mutex_unlock(&dx.lock);
            return rc;
        }
    }
    pthread_mutex_lock(&dx.lock);
    if (obj->cq_obj)
        obj->cq_obj->users--;
    for (int i = 0; i < 2; i++)
        obj->umem[i]->refs--;
    uar_unref_locked(obj->uar);
    pthread_mutex_unlock(&dx.lock);
    free(obj);
    return 0;
}

EXPORT int mlx5dv_devx_general_cmd(struct ibv_context *ctx, const void *in, size_t inlen,
                                   void *out, size_t outlen)
{
    int rc = check_ctx(ctx);
    if (rc)
        return rc;
    if (!mailbox_args(in, inlen, out, outlen))
        return EINVAL;
    memset(out, 0, outlen);
    switch (PRM_GET(in, PRM_IN_OPCODE)) {
    case PRM_OP_QUERY_HCA_CAP:
        return mlx5_hca_cap_query(ctx, in, inlen, out, outlen);
    case PRM_OP_QUERY_ROCE_ADDRESS:
        return mlx5_roce_address_query(ctx, in, inlen, out, outlen);
    default:
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_OP, SYN_OPCODE);
    }
}
