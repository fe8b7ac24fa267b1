/* tests/gdaki/test_gdaki_devx.c: the DEVX path of the GPU-initiated queue
 * (plugin/gdaki/gdaki_devx.c over softnic's libmlx5, tests/softnic/
 * mlx5_devx.c), with no GPU: the send QP and its CQ are made with PRM
 * commands over host user memory (RAILNET_GDAKI_QUEUE_MEM=host-devx), CPU
 * threads post WQEs exactly as the kernel does (gdaki_queue.h), and
 * softnic's NIC thread executes them from that memory.  The second half
 * sends the DEVX entry points bad input, which must be refused with the
 * PRM status a device gives (and errno), never a crash. */
#include <errno.h>
#include <infiniband/mlx5dv.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gdaki_devx.h"
#include "gdaki_prm.h"
#include "gdaki_queue.h"
#include "ibvwrap.h"
#include "railnet_gdaki.h"
#include "cpu_posters.h"
#include "tap.h"
#include "build_paths.h"

static char err[512];

static const char *softnic_lib(void)
{
    const char *path = test_softnic_verbs();
    if (access(path, R_OK) != 0)
        TAP_SKIP("softnic's libibverbs.so.1 is not built (run from make check)");
    return path;
}

static struct gdaki_pair *open_devx_pair(uint32_t depth)
{
    struct gdaki_pair_opts o;
    EXPECT_EQ_INT(0, gdaki_pair_opts_default(&o, err, sizeof(err)));
    o.ibverbs_lib = softnic_lib();
    o.sq_depth = depth;
    o.queue_mem = GDAKI_QUEUE_MEM_HOST_DEVX;
    struct gdaki_pair *p = NULL;
    if (gdaki_pair_open(&o, &p, err, sizeof(err)) != 0)
        tap_fail_at(__FILE__, __LINE__, "gdaki_pair_open(host-devx): %s", err);
    return p;
}

static void reg(struct gdaki_pair *p, void *buf, size_t len, struct gdaki_mr *mr)
{
    if (gdaki_pair_reg(p, buf, len, mr, err, sizeof(err)) != 0)
        tap_fail_at(__FILE__, __LINE__, "gdaki_pair_reg: %s", err);
}

static void fill(uint8_t *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(i * 131 + seed * 7 + 1);
}

/* ------------------------------------------------------- the DEVX queue */

TAP_CASE(test_devx_qp_descriptor_and_state)
{
    struct gdaki_pair *p = open_devx_pair(16);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    struct gdaki_pair_info in;
    gdaki_pair_get_info(p, &in);
    EXPECT_EQ_INT(GDAKI_QUEUE_MEM_HOST_DEVX, in.queue_mem);
    EXPECT_EQ_INT(16, in.sq_slots);
    EXPECT_EQ_INT(32, in.cq_entries);
    EXPECT_EQ_INT(4, q->sq_log);
    EXPECT_EQ_INT(5, q->cq_log);
    EXPECT_EQ_INT(64, q->cqe_size);
    EXPECT_EQ_INT(in.send_qpn, q->qpn);
    EXPECT_TRUE(q->qpn != 0 && q->qpn != in.recv_qpn);
    EXPECT_TRUE(!(q->flags & GDAKI_QP_FLAG_GPU_QUEUE));
    EXPECT_EQ_INT(IBV_QPS_RTS, gdaki_pair_send_qp_state(p));
    /* The CQ starts all invalid, owner 1: the initial image is ours. */
    for (int i = 0; i < 32; i++)
        EXPECT_EQ_INT((MLX5_CQE_INVALID << 4) | 1, q->cq[i * 64 + 63]);
    /* Ring, CQ and doorbell page lie in one page-aligned region. */
    EXPECT_EQ_INT(0, (uintptr_t)q->sq & 4095);
    EXPECT_EQ_U64((uintptr_t)q->sq + 16 * 64 + (4096 - 16 * 64), (uintptr_t)q->cq);
    gdaki_pair_close(p);
}

static void run_posters(int nthreads, int count)
{
    struct gdaki_pair *p = open_devx_pair(16);
    cpu_posters_run(p, nthreads, count);
    gdaki_pair_close(p);
}

TAP_CASE(test_devx_one_poster_byte_exact_across_ring_wraps)
{
    run_posters(1, 200);    /* 16 slots: 12 passes over the ring in umem */
}

TAP_CASE(test_devx_four_posters_share_one_ring_byte_exact)
{
    run_posters(4, 150);
}

/* The DEVX QP is created with RAE (remote atomic enable) when the device
 * has atomics: GDAKI_SIGNAL_ADD works through it. */
TAP_CASE(test_devx_four_posters_signal_add_sum_exactly)
{
    struct gdaki_pair *p = open_devx_pair(32);
    EXPECT_TRUE(!(gdaki_pair_qp_host(p)->flags & GDAKI_QP_FLAG_NO_ATOMICS));
    cpu_posters_signal_add_run(p, 4, 60);
    gdaki_pair_close(p);
}

TAP_CASE(test_devx_posts_beyond_16bit_wqe_counter)
{
    struct gdaki_pair *p = open_devx_pair(64);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    static uint64_t src[1], dst[1];
    struct gdaki_mr ms, md;
    reg(p, src, sizeof(src), &ms);
    reg(p, dst, sizeof(dst), &md);
    for (uint64_t i = 1; i <= 70000; i++) {
        uint64_t slot = gdaki_q_reserve(q, 1);
        EXPECT_TRUE(slot != GDAKI_SLOT_ERROR);
        void *w = gdaki_q_slot_ptr(q, slot);
        gdaki_wqe_write_inline(w, (uint16_t)slot, q->qpn, MLX5_WQE_CTRL_CQ_UPDATE, md.addr,
                               md.rkey, &i, 8);
        EXPECT_EQ_INT(0, gdaki_q_ring(q, slot, 1, gdaki_q_db_value(w)));
    }
    EXPECT_EQ_INT(0, gdaki_q_quiet(q));
    EXPECT_EQ_U64(70000, dst[0]);
    EXPECT_EQ_U64(70000, q->done);
    gdaki_pair_close(p);
}

TAP_CASE(test_devx_quiet_returns_after_4MiB_landed)
{
    struct gdaki_pair *p = open_devx_pair(16);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    size_t n = 4u << 20;
    uint8_t *src = malloc(n), *dst = calloc(1, n);
    fill(src, n, 9);
    struct gdaki_mr ms, md;
    reg(p, src, n, &ms);
    reg(p, dst, n, &md);
    struct gdaki_op op = { .laddr = ms.addr, .lkey = ms.lkey, .len = (uint32_t)n,
                           .raddr = md.addr, .rkey = md.rkey };
    uint64_t ticket = gdaki_q_post1(q, GDAKI_KIND_WRITE, &op);
    EXPECT_TRUE(ticket != GDAKI_SLOT_ERROR);
    EXPECT_EQ_INT(0, gdaki_q_quiet(q));
    EXPECT_MEMEQ(src, dst, n);
    gdaki_pair_close(p);
    free(src);
    free(dst);
}

TAP_CASE(test_devx_signal_set_arrives_after_its_data)
{
    struct gdaki_pair *p = open_devx_pair(32);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    enum { MSGS = 100, LEN = 1024 };
    uint8_t *src = malloc(MSGS * LEN), *dst = calloc(MSGS, LEN);
    static uint64_t signal;
    fill(src, MSGS * LEN, 5);
    struct gdaki_mr ms, md, mg;
    reg(p, src, MSGS * LEN, &ms);
    reg(p, dst, MSGS * LEN, &md);
    reg(p, &signal, sizeof(signal), &mg);
    for (uint64_t m = 0; m < MSGS; m++) {
        struct gdaki_op op = { .laddr = ms.addr + m * LEN, .lkey = ms.lkey, .len = LEN,
                               .raddr = md.addr + m * LEN, .rkey = md.rkey };
        EXPECT_TRUE(gdaki_q_post_signal_set(q, &op, mg.addr, mg.rkey, m + 1) != GDAKI_SLOT_ERROR);
        uint64_t seen = __atomic_load_n(&signal, __ATOMIC_ACQUIRE);
        for (uint64_t k = 0; k < seen; k++)     /* whatever the signal says is whole */
            if (memcmp(src + k * LEN, dst + k * LEN, LEN) != 0)
                tap_fail_at(__FILE__, __LINE__, "signal %llu but message %llu incomplete",
                            (unsigned long long)seen, (unsigned long long)k);
    }
    EXPECT_EQ_INT(0, gdaki_q_quiet(q));
    EXPECT_EQ_U64(MSGS, gdaki_wait_signal_ge(&signal, MSGS));
    EXPECT_MEMEQ(src, dst, MSGS * LEN);
    gdaki_pair_close(p);
    free(src);
    free(dst);
}

TAP_CASE(test_devx_write_imm_reaches_the_receiver)
{
    struct gdaki_pair *p = open_devx_pair(16);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    static uint8_t src[256], dst[256];
    fill(src, sizeof(src), 11);
    struct gdaki_mr ms, md;
    reg(p, src, sizeof(src), &ms);
    reg(p, dst, sizeof(dst), &md);
    EXPECT_EQ_INT(0, gdaki_pair_post_recv(p, 2));
    for (uint32_t i = 0; i < 2; i++) {
        struct gdaki_op op = { .laddr = ms.addr + i * 128, .lkey = ms.lkey, .len = 128,
                               .raddr = md.addr + i * 128, .rkey = md.rkey, .imm = 0x7700 + i };
        EXPECT_TRUE(gdaki_q_post1(q, GDAKI_KIND_WRITE_IMM, &op) != GDAKI_SLOT_ERROR);
    }
    EXPECT_EQ_INT(0, gdaki_q_quiet(q));
    uint32_t imm[2];
    int got = 0;
    for (int spin = 0; spin < 200000 && got < 2; spin++) {
        int n = gdaki_pair_poll_recv(p, imm + got, 2 - got);
        EXPECT_TRUE(n >= 0);
        got += n;
        if (!n)
            usleep(50);
    }
    EXPECT_EQ_INT(2, got);
    EXPECT_EQ_U64(0x7700, imm[0]);
    EXPECT_EQ_U64(0x7701, imm[1]);
    EXPECT_MEMEQ(src, dst, sizeof(src));
    gdaki_pair_close(p);
}

/* A good write, then a spoiled one: an error CQE with the syndrome, the QP
 * in ERR (QUERY_QP says so), later posts fail instead of hanging. */
static void expect_error_cqe(int bad_opcode, uint8_t syndrome)
{
    struct gdaki_pair *p = open_devx_pair(16);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    static uint64_t src[8], dst[8];
    src[0] = 0x1122334455667788ull;
    struct gdaki_mr ms, md;
    reg(p, src, sizeof(src), &ms);
    reg(p, dst, sizeof(dst), &md);
    struct gdaki_op op = { .laddr = ms.addr, .lkey = ms.lkey, .len = 8, .raddr = md.addr,
                           .rkey = md.rkey };
    EXPECT_TRUE(gdaki_q_post1(q, GDAKI_KIND_WRITE, &op) != GDAKI_SLOT_ERROR);
    EXPECT_EQ_INT(0, gdaki_q_quiet(q));
    EXPECT_EQ_U64(src[0], dst[0]);
    struct gdaki_op bad = op;
    if (!bad_opcode)
        bad.rkey ^= 0x5a5a00;
    uint64_t slot = gdaki_q_reserve(q, 1);
    uint8_t *w = gdaki_q_slot_ptr(q, slot);
    gdaki_q_build(q, slot, GDAKI_KIND_WRITE, &bad, 1);
    if (bad_opcode)
        w[3] = 0x55;
    EXPECT_EQ_INT(0, gdaki_q_ring(q, slot, 1, gdaki_q_db_value(w)));
    EXPECT_EQ_INT(-1, gdaki_q_quiet(q));
    EXPECT_EQ_U64(GDAKI_ERR_WORD(MLX5_CQE_REQ_ERR, 0, syndrome), GDAKI_ERR_NO_VENDOR(q->err));
    EXPECT_EQ_U64(1, q->done);
    EXPECT_EQ_INT(IBV_QPS_ERR, gdaki_pair_send_qp_state(p));
    uint64_t t = gdaki_q_post1(q, GDAKI_KIND_WRITE, &op);
    EXPECT_TRUE(t == GDAKI_SLOT_ERROR || gdaki_q_quiet(q) == -1);
    gdaki_pair_close(p);
}

TAP_CASE(test_devx_malformed_wqe_gives_error_cqe)
{
    expect_error_cqe(1, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
}

TAP_CASE(test_devx_bad_rkey_gives_remote_access_error_cqe)
{
    expect_error_cqe(0, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
}

TAP_CASE(test_devx_halves_in_one_process)
{
    struct gdaki_pair_opts o;
    EXPECT_EQ_INT(0, gdaki_pair_opts_default(&o, err, sizeof(err)));
    o.ibverbs_lib = softnic_lib();
    o.sq_depth = 32;
    o.queue_mem = GDAKI_QUEUE_MEM_HOST_DEVX;
    struct gdaki_pair *s = NULL, *r = NULL;
    struct gdaki_qp_info si, ri;
    if (gdaki_half_open(&o, GDAKI_ROLE_SEND, &s, &si, err, sizeof(err)) != 0 ||
        gdaki_half_open(&o, GDAKI_ROLE_RECV, &r, &ri, err, sizeof(err)) != 0 ||
        gdaki_half_connect(s, &ri, err, sizeof(err)) != 0 ||
        gdaki_half_connect(r, &si, err, sizeof(err)) != 0)
        tap_fail_at(__FILE__, __LINE__, "halves: %s", err);
    static uint8_t src[8192], dst[8192];
    fill(src, sizeof(src), 21);
    struct gdaki_mr ms, md;
    reg(s, src, sizeof(src), &ms);
    reg(r, dst, sizeof(dst), &md);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(s);
    struct gdaki_op op = { .laddr = ms.addr, .lkey = ms.lkey, .len = sizeof(src),
                           .raddr = md.addr, .rkey = md.rkey };
    EXPECT_TRUE(gdaki_q_post1(q, GDAKI_KIND_WRITE, &op) != GDAKI_SLOT_ERROR);
    EXPECT_EQ_INT(0, gdaki_q_quiet(q));
    EXPECT_MEMEQ(src, dst, sizeof(src));
    gdaki_pair_close(s);
    gdaki_pair_close(r);
}

/* On this CI machine there is no CUDA: =gpu reaches the allocation of the
 * queue in GPU memory and says that is what failed. */
TAP_CASE(test_gpu_queue_without_cuda_says_why)
{
    struct gdaki_pair_opts o;
    EXPECT_EQ_INT(0, gdaki_pair_opts_default(&o, err, sizeof(err)));
    o.ibverbs_lib = softnic_lib();
    o.queue_mem = GDAKI_QUEUE_MEM_GPU;
    struct gdaki_pair *p = NULL;
    int rc = gdaki_pair_open(&o, &p, err, sizeof(err));
    if (rc == 0) {
        gdaki_pair_close(p);
        TAP_SKIP("this machine has a CUDA GPU: the GPU queue opened");
    }
    tap_diag("refusal: %s", err);
    if (!strstr(err, "RAILNET_GDAKI_QUEUE_MEM=gpu needs CUDA device"))
        tap_fail_at(__FILE__, __LINE__, "unclear refusal: %s", err);
}

/* ------------------------------------------------ raw DEVX, bad input */

struct raw {
    const struct ibvwrap *v;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    uint32_t pdn, eqn;
    struct mlx5dv_devx_uar *uar;
    struct mlx5dv_devx_umem *umem;
    uint8_t *mem;       /* 64 KiB */
};

static struct ibv_device *first_device(const struct ibvwrap *v, struct ibv_device ***list)
{
    int n = 0;
    *list = v->get_device_list(&n);
    if (!*list || n == 0)
        tap_fail_at(__FILE__, __LINE__, "softnic has no device");
    return (*list)[0];
}

static void raw_open(struct raw *r)
{
    memset(r, 0, sizeof(*r));
    if (ibvwrap_global_load(softnic_lib(), err, sizeof(err)) != 0 ||
        ibvwrap_global_load_mlx5(err, sizeof(err)) != 0)
        tap_fail_at(__FILE__, __LINE__, "load: %s", err);
    r->v = ibvwrap_global();
    EXPECT_TRUE(ibvwrap_devx_missing(r->v) == NULL);
    struct ibv_device **list;
    struct ibv_device *dev = first_device(r->v, &list);
    struct mlx5dv_context_attr a = { .flags = MLX5DV_CONTEXT_FLAGS_DEVX };
    r->ctx = r->v->mlx5dv_open_device(dev, &a);
    r->v->free_device_list(list);
    EXPECT_TRUE(r->ctx != NULL);
    r->pd = r->v->alloc_pd(r->ctx);
    EXPECT_TRUE(r->pd != NULL);
    struct mlx5dv_pd dvpd;
    struct mlx5dv_obj obj = { .pd = { .in = r->pd, .out = &dvpd } };
    EXPECT_EQ_INT(0, r->v->mlx5dv_init_obj(&obj, MLX5DV_OBJ_PD));
    r->pdn = dvpd.pdn;
    EXPECT_EQ_INT(0, r->v->mlx5dv_devx_query_eqn(r->ctx, 0, &r->eqn));
    r->uar = r->v->mlx5dv_devx_alloc_uar(r->ctx, 0);
    EXPECT_TRUE(r->uar && r->uar->reg_addr);
    r->mem = aligned_alloc(4096, 65536);
    memset(r->mem, 0, 65536);
    r->umem = r->v->mlx5dv_devx_umem_reg(r->ctx, r->mem, 65536, IBV_ACCESS_LOCAL_WRITE);
    EXPECT_TRUE(r->umem != NULL);
}

static void good_cq_in(const struct raw *r, uint8_t *in)
{
    struct prm_cq_params p = { .log_size = 4, .uar_page = r->uar->page_id, .eqn = r->eqn,
                               .umem_id = r->umem->umem_id, .umem_offset = 0,
                               .dbr_umem_id = r->umem->umem_id, .dbr_offset = 0xf000 };
    prm_create_cq_in(in, &p);
}

static void good_qp_in(const struct raw *r, uint32_t cqn, uint8_t *in)
{
    struct prm_qp_params p = { .pdn = r->pdn, .cqn = cqn, .uar_page = r->uar->page_id,
                               .log_sq_size = 4, .wq_umem_id = r->umem->umem_id,
                               .wq_umem_offset = 0x1000, .dbr_umem_id = r->umem->umem_id,
                               .dbr_offset = 0xf040 };
    prm_create_qp_in(in, &p);
}

/* Creating from in must fail with status and errno EREMOTEIO. */
static void expect_refused_at(int line, const struct raw *r, const uint8_t *in, size_t inlen,
                              uint8_t status)
{
    uint8_t out[PRM_OUT_BYTES];
    memset(out, 0xee, sizeof(out));
    errno = 0;
    struct mlx5dv_devx_obj *o = r->v->mlx5dv_devx_obj_create(r->ctx, in, inlen, out, sizeof(out));
    if (o) {
        r->v->mlx5dv_devx_obj_destroy(o);
        tap_fail_at(__FILE__, line, "command accepted; expected status 0x%02x", status);
    }
    if (errno != EREMOTEIO || prm_out_status(out) != status)
        tap_fail_at(__FILE__, line, "expected errno EREMOTEIO and status 0x%02x, got %s and 0x%02x",
                    status, strerror(errno), prm_out_status(out));
    EXPECT_TRUE(PRM_GET(out, PRM_OUT_SYNDROME) != 0);
}
#define expect_refused(...) expect_refused_at(__LINE__, __VA_ARGS__)

TAP_CASE(test_devx_commands_refuse_bad_cq_fields)
{
    struct raw r;
    raw_open(&r);
    uint8_t in[PRM_QP_CMD_IN_BYTES];
    good_cq_in(&r, in);
    PRM_SET(in, PRM_IN_OPCODE, 0x7ff);             /* no such command */
    expect_refused(&r, in, sizeof(in), PRM_STATUS_BAD_OP);
    good_cq_in(&r, in);
    expect_refused(&r, in, 0x40, PRM_STATUS_BAD_INP_LEN);
    PRM_SET(in, PRM_CQ_UMEM_ID, 0xdead);
    expect_refused(&r, in, sizeof(in), PRM_STATUS_BAD_RES);
    good_cq_in(&r, in);
    PRM_SET(in, PRM_CQ_UMEM_VALID, 0);              /* a page list: not modelled */
    expect_refused(&r, in, sizeof(in), PRM_STATUS_BAD_PARAM);
    good_cq_in(&r, in);
    PRM_SET(in, PRM_CQ_LOG_SIZE, 0);
    expect_refused(&r, in, sizeof(in), PRM_STATUS_BAD_PARAM);
    PRM_SET(in, PRM_CQ_LOG_SIZE, 17);
    expect_refused(&r, in, sizeof(in), PRM_STATUS_BAD_PARAM);
    good_cq_in(&r, in);
    PRM_SET(in, PRM_CQ_UMEM_OFFSET, 65536 - 512);   /* 16 CQEs do not fit */
    expect_refused(&r, in, sizeof(in), PRM_STATUS_BAD_PARAM);
    good_cq_in(&r, in);
    PRM_SET(in, PRM_CQ_DBR_ADDR, 65536 - 4);
    expect_refused(&r, in, sizeof(in), PRM_STATUS_BAD_PARAM);
    good_cq_in(&r, in);
    PRM_SET(in, PRM_CQ_UAR_PAGE, 0xfffff);
    expect_refused(&r, in, sizeof(in), PRM_STATUS_BAD_RES);
    good_cq_in(&r, in);
    PRM_SET(in, PRM_CQ_CQE_SZ, 1);                  /* 128-byte CQEs */
    expect_refused(&r, in, sizeof(in), PRM_STATUS_BAD_PARAM);
    /* No mailbox at all: EINVAL, not a command status. */
    good_cq_in(&r, in);
    errno = 0;
    EXPECT_TRUE(r.v->mlx5dv_devx_obj_create(r.ctx, in, sizeof(in), NULL, 0) == NULL);
    EXPECT_EQ_INT(EINVAL, errno);
}

TAP_CASE(test_devx_commands_refuse_bad_qp_fields_and_moves)
{
    struct raw r;
    raw_open(&r);
    uint8_t in[PRM_QP_CMD_IN_BYTES], out[PRM_QUERY_QP_OUT_BYTES];
    good_cq_in(&r, in);
    struct mlx5dv_devx_obj *cq = r.v->mlx5dv_devx_obj_create(r.ctx, in, sizeof(in), out, PRM_OUT_BYTES);
    EXPECT_TRUE(cq != NULL);
    uint32_t cqn = (uint32_t)PRM_GET(out, PRM_OUT_OBJ_ID);
    good_qp_in(&r, cqn, in);
    PRM_SET(in, PRM_QPC_PD, r.pdn + 1000);
    expect_refused(&r, in, sizeof(in), PRM_STATUS_BAD_RES);
    good_qp_in(&r, cqn + 77, in);
    expect_refused(&r, in, sizeof(in), PRM_STATUS_BAD_RES);
    good_qp_in(&r, cqn, in);
    PRM_SET(in, PRM_QPC_RQ_TYPE, 0);                /* a receive queue in the ring */
    expect_refused(&r, in, sizeof(in), PRM_STATUS_BAD_PARAM);
    good_qp_in(&r, cqn, in);
    PRM_SET(in, PRM_QPC_LOG_SQ_SIZE, 0);
    expect_refused(&r, in, sizeof(in), PRM_STATUS_BAD_PARAM);
    good_qp_in(&r, cqn, in);
    PRM_SET(in, PRM_QP_WQ_UMEM_OFFSET, 0xfe00);     /* 1 KiB ring, 512 B left */
    expect_refused(&r, in, sizeof(in), PRM_STATUS_BAD_PARAM);
    good_qp_in(&r, cqn, in);
    PRM_SET(in, PRM_QPC_ST, 1);                     /* not RC */
    expect_refused(&r, in, sizeof(in), PRM_STATUS_BAD_PARAM);

    good_qp_in(&r, cqn, in);
    struct mlx5dv_devx_obj *qp = r.v->mlx5dv_devx_obj_create(r.ctx, in, sizeof(in), out, PRM_OUT_BYTES);
    EXPECT_TRUE(qp != NULL);
    uint32_t qpn = (uint32_t)PRM_GET(out, PRM_OUT_OBJ_ID);
    /* A move naming another QP, one that skips a state, a bad MTU. */
    prm_rst2init_in(in, qpn + 1, 1, 1, 1, 0);
    EXPECT_EQ_INT(EREMOTEIO, r.v->mlx5dv_devx_obj_modify(qp, in, sizeof(in), out, PRM_OUT_BYTES));
    EXPECT_EQ_INT(PRM_STATUS_BAD_PARAM, prm_out_status(out));
    prm_rtr2rts_in(in, qpn, 0, 14, 7, 7, 0);
    EXPECT_EQ_INT(EREMOTEIO, r.v->mlx5dv_devx_obj_modify(qp, in, sizeof(in), out, PRM_OUT_BYTES));
    EXPECT_EQ_INT(PRM_STATUS_BAD_QP_STATE, prm_out_status(out));
    prm_rst2init_in(in, qpn, 0, 1, 1, 0);           /* port 0 */
    EXPECT_EQ_INT(EREMOTEIO, r.v->mlx5dv_devx_obj_modify(qp, in, sizeof(in), out, PRM_OUT_BYTES));
    EXPECT_EQ_INT(PRM_STATUS_BAD_PARAM, prm_out_status(out));
    prm_rst2init_in(in, qpn, 1, 1, 1, 0);
    EXPECT_EQ_INT(0, r.v->mlx5dv_devx_obj_modify(qp, in, sizeof(in), out, PRM_OUT_BYTES));
    struct prm_rtr_params rp = { .remote_qpn = qpn, .mtu = 7, .port = 1, .global = 1 };
    prm_init2rtr_in(in, qpn, &rp);
    EXPECT_EQ_INT(EREMOTEIO, r.v->mlx5dv_devx_obj_modify(qp, in, sizeof(in), out, PRM_OUT_BYTES));
    EXPECT_EQ_INT(PRM_STATUS_BAD_PARAM, prm_out_status(out));
    /* QUERY_QP says INIT; a short output is refused. */
    uint8_t qin[PRM_QUERY_QP_IN_BYTES];
    prm_qp_simple_in(qin, PRM_OP_QUERY_QP, qpn);
    EXPECT_EQ_INT(0, r.v->mlx5dv_devx_obj_query(qp, qin, sizeof(qin), out, sizeof(out)));
    EXPECT_EQ_U64(PRM_QP_STATE_INIT, PRM_GET(out, PRM_QPC_STATE));
    EXPECT_EQ_INT(EREMOTEIO, r.v->mlx5dv_devx_obj_query(qp, qin, sizeof(qin), out, PRM_OUT_BYTES));
    EXPECT_EQ_INT(PRM_STATUS_BAD_OUTP_LEN, prm_out_status(out));

    /* Teardown order is enforced: memory and CQ outlive the QP. */
    EXPECT_EQ_INT(EBUSY, r.v->mlx5dv_devx_umem_dereg(r.umem));
    EXPECT_EQ_INT(EBUSY, r.v->mlx5dv_devx_obj_destroy(cq));
    EXPECT_EQ_INT(0, r.v->mlx5dv_devx_obj_destroy(qp));
    EXPECT_EQ_INT(EBUSY, r.v->mlx5dv_devx_umem_dereg(r.umem));
    EXPECT_EQ_INT(0, r.v->mlx5dv_devx_obj_destroy(cq));
    EXPECT_EQ_INT(0, r.v->mlx5dv_devx_umem_dereg(r.umem));
    r.v->mlx5dv_devx_free_uar(r.uar);
}

TAP_CASE(test_devx_entry_points_refuse_bad_arguments)
{
    struct raw r;
    raw_open(&r);
    /* A context opened without MLX5DV_CONTEXT_FLAGS_DEVX has DEVX too (as
     * rdma-core's mlx5 provider gives it), but not the other context's
     * objects: its umem ids name nothing there. */
    struct ibv_device **list;
    struct ibv_context *plain = r.v->open_device(first_device(r.v, &list));
    r.v->free_device_list(list);
    EXPECT_TRUE(plain != NULL);
    uint8_t in[PRM_QP_CMD_IN_BYTES], out[PRM_OUT_BYTES];
    good_cq_in(&r, in);
    errno = 0;
    EXPECT_TRUE(r.v->mlx5dv_devx_obj_create(plain, in, sizeof(in), out, sizeof(out)) == NULL);
    EXPECT_EQ_INT(EREMOTEIO, errno);
    EXPECT_EQ_INT(PRM_STATUS_BAD_RES, out[0]);
    struct mlx5dv_devx_umem *pu = r.v->mlx5dv_devx_umem_reg(plain, r.mem, 4096, 0);
    EXPECT_TRUE(pu != NULL);
    EXPECT_EQ_INT(0, r.v->mlx5dv_devx_umem_dereg(pu));
    r.v->close_device(plain);
    /* umem: no memory, no size, unknown access bits; dmabuf is not modelled. */
    EXPECT_TRUE(r.v->mlx5dv_devx_umem_reg(r.ctx, NULL, 4096, 0) == NULL);
    EXPECT_EQ_INT(EINVAL, errno);
    EXPECT_TRUE(r.v->mlx5dv_devx_umem_reg(r.ctx, r.mem, 0, 0) == NULL);
    EXPECT_EQ_INT(EINVAL, errno);
    EXPECT_TRUE(r.v->mlx5dv_devx_umem_reg(r.ctx, r.mem, 4096, 1u << 30) == NULL);
    EXPECT_EQ_INT(EINVAL, errno);
    struct mlx5dv_devx_umem_in ui = { .addr = r.mem, .size = 4096, .comp_mask = MLX5DV_UMEM_MASK_DMABUF,
                                      .dmabuf_fd = 0 };
    EXPECT_TRUE(r.v->mlx5dv_devx_umem_reg_ex(r.ctx, &ui) == NULL);
    EXPECT_EQ_INT(EOPNOTSUPP, errno);
    EXPECT_EQ_INT(EINVAL, r.v->mlx5dv_devx_umem_dereg(NULL));
    EXPECT_TRUE(r.v->mlx5dv_devx_alloc_uar(r.ctx, 0x40) == NULL);
    EXPECT_EQ_INT(EINVAL, errno);
    EXPECT_EQ_INT(0, r.v->mlx5dv_devx_umem_dereg(r.umem));
}

/* rdma-core without one of the DEVX entry points: the table still loads,
 * and the GPU queue is refused naming the missing symbol. */
TAP_CASE(test_missing_devx_symbol_is_named)
{
    if (ibvwrap_global_load(softnic_lib(), err, sizeof(err)) != 0 ||
        ibvwrap_global_load_mlx5(err, sizeof(err)) != 0)
        tap_fail_at(__FILE__, __LINE__, "load: %s", err);
    struct ibvwrap v = *ibvwrap_global();
    v.mlx5dv_devx_obj_modify = NULL;
    EXPECT_STREQ("mlx5dv_devx_obj_modify@MLX5_1.7", ibvwrap_devx_missing(&v));
    struct ibv_device **list;
    struct ibv_device *dev = first_device(&v, &list);
    EXPECT_TRUE(gdaki_devx_open(&v, dev, err, sizeof(err)) == NULL);
    v.free_device_list(list);
    tap_diag("refusal: %s", err);
    if (!strstr(err, "mlx5dv_devx_obj_modify") || !strstr(err, "RAILNET_GDAKI_QUEUE_MEM=host"))
        tap_fail_at(__FILE__, __LINE__, "unclear refusal: %s", err);
}

int main(int argc, char **argv)
{
    return tap_run(argc, argv);
}
