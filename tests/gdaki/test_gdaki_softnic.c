/* tests/gdaki/test_gdaki_softnic.c: the GPU-initiated path's host side and
 * softnic's mlx5 queue consumer, end to end, with no GPU: CPU threads post
 * WQEs into the ring of a QP made by mlx5dv_create_qp exactly as the
 * kernel does (the same gdaki_queue.h / gdaki_wqe.h, compiled for the
 * host), and softnic's real libibverbs.so.1 + libmlx5.so.1 (from
 * $top_builddir/tests/softnic) execute them through its verbs engine,
 * RDMA atomics (GDAKI_SIGNAL_ADD, ATOMIC_FA/CS WQEs) included. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gdaki_pair.h"
#include "gdaki_queue.h"
#include "railnet_gdaki.h"
#include "cpu_posters.h"
#include "softnic_sym.h"
#include "tap.h"
#include "build_paths.h"

#include <infiniband/verbs.h>

static char err[512];

/* softnic's libibverbs, found from make check's top_builddir (or the
 * build directory the test runs in). */
static const char *softnic_lib(void)
{
    return test_softnic_verbs();
}

static struct gdaki_pair *open_pair_mem(uint32_t depth, enum gdaki_queue_mem mem)
{
    struct gdaki_pair_opts o;
    EXPECT_EQ_INT(0, gdaki_pair_opts_default(&o, err, sizeof(err)));
    o.ibverbs_lib = softnic_lib();
    o.sq_depth = depth;
    o.queue_mem = mem;
    if (access(o.ibverbs_lib, R_OK) != 0)
        TAP_SKIP("softnic's libibverbs.so.1 is not built (run from make check)");
    struct gdaki_pair *p = NULL;
    if (gdaki_pair_open(&o, &p, err, sizeof(err)) != 0)
        tap_fail_at(__FILE__, __LINE__, "gdaki_pair_open: %s", err);
    return p;
}

static struct gdaki_pair *open_pair(uint32_t depth)
{
    return open_pair_mem(depth, GDAKI_QUEUE_MEM_HOST);
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

/* n bytes of source (filled from seed) and zeroed destination in host
 * memory, both registered on p; the caller frees them after closing p. */
static void host_bufs(struct gdaki_pair *p, size_t n, unsigned seed, uint8_t **src, uint8_t **dst,
                      struct gdaki_mr *ms, struct gdaki_mr *md)
{
    *src = malloc(n);
    *dst = calloc(1, n);
    if (!*src || !*dst)
        tap_fail_at(__FILE__, __LINE__, "out of memory for %zu bytes", n);
    fill(*src, n, seed);
    reg(p, *src, n, ms);
    reg(p, *dst, n, md);
}

TAP_CASE(test_mlx5dv_qp_exposes_rings_the_protocol_needs)
{
    struct gdaki_pair *p = open_pair(16);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    struct gdaki_pair_info in;
    gdaki_pair_get_info(p, &in);
    EXPECT_EQ_INT(16, in.sq_slots);
    EXPECT_EQ_INT(4, q->sq_log);
    EXPECT_TRUE(q->span != NULL);
    EXPECT_EQ_INT(64, q->cqe_size);
    EXPECT_TRUE(in.cq_entries >= 16);
    EXPECT_EQ_INT(in.send_qpn, q->qpn);
    EXPECT_TRUE(q->sq && q->dbrec && q->db && q->cq && q->cq_dbrec);
    /* softnic has RDMA atomics (IBV_ATOMIC_HCA): GDAKI_SIGNAL_ADD is allowed. */
    EXPECT_TRUE(!(q->flags & GDAKI_QP_FLAG_NO_ATOMICS));
    EXPECT_EQ_INT(IBV_QPS_RTS, gdaki_pair_send_qp_state(p));
    EXPECT_TRUE(gdaki_pair_qp_device(p) == NULL);
    gdaki_pair_close(p);
}

/* softnic has DEVX now (tests/gdaki/test_gdaki_devx.c); without a GPU the
 * queue cannot be allocated in GPU memory, and the refusal says so. */
TAP_CASE(test_queue_mem_gpu_without_a_gpu_is_refused_with_the_reason)
{
    struct gdaki_pair_opts o;
    EXPECT_EQ_INT(0, gdaki_pair_opts_default(&o, err, sizeof(err)));
    o.ibverbs_lib = softnic_lib();
    o.queue_mem = GDAKI_QUEUE_MEM_GPU;
    struct gdaki_pair *p = NULL;
    if (gdaki_pair_open(&o, &p, err, sizeof(err)) == 0) {
        gdaki_pair_close(p);
        TAP_SKIP("this machine has a CUDA GPU: the GPU queue opened");
    }
    EXPECT_TRUE(p == NULL);
    if (!strstr(err, "RAILNET_GDAKI_QUEUE_MEM=gpu needs CUDA device"))
        tap_fail_at(__FILE__, __LINE__, "unclear refusal: %s", err);
}

TAP_CASE(test_queue_mem_variable_selects_host_devx)
{
    struct gdaki_pair_opts o;
    setenv("RAILNET_GDAKI_QUEUE_MEM", "host-devx", 1);
    EXPECT_EQ_INT(0, gdaki_pair_opts_default(&o, err, sizeof(err)));
    EXPECT_EQ_INT(GDAKI_QUEUE_MEM_HOST_DEVX, o.queue_mem);
}

/* The plugin's configuration reads the environment once per process (each
 * case runs in its own child). */
TAP_CASE(test_queue_mem_variable_selects_gpu)
{
    struct gdaki_pair_opts o;
    setenv("RAILNET_GDAKI_QUEUE_MEM", "gpu", 1);
    EXPECT_EQ_INT(0, gdaki_pair_opts_default(&o, err, sizeof(err)));
    EXPECT_EQ_INT(GDAKI_QUEUE_MEM_GPU, o.queue_mem);
}

TAP_CASE(test_queue_mem_variable_unknown_value_keeps_host)
{
    struct gdaki_pair_opts o;
    setenv("RAILNET_GDAKI_QUEUE_MEM", "vram", 1);
    EXPECT_EQ_INT(0, gdaki_pair_opts_default(&o, err, sizeof(err)));
    EXPECT_EQ_INT(GDAKI_QUEUE_MEM_HOST, o.queue_mem);
}

/* ---- CPU posters, as the kernel posts ---- */

static void run_posters(int nthreads, int count)
{
    struct gdaki_pair *p = open_pair(16);
    cpu_posters_run(p, nthreads, count);
    gdaki_pair_close(p);
}

TAP_CASE(test_one_poster_writes_byte_exact_across_ring_wraps)
{
    run_posters(1, 200);    /* 16 slots: 12 passes over the ring */
}

TAP_CASE(test_four_posters_share_one_ring_byte_exact)
{
    run_posters(4, 150);
}

/* GDAKI_SIGNAL_ADD: each message followed by an ATOMIC_FA on one signal
 * word shared by all posters (softnic has RDMA atomics). */
TAP_CASE(test_one_poster_signal_add_across_ring_wraps)
{
    struct gdaki_pair *p = open_pair(16);
    cpu_posters_signal_add_run(p, 1, 100);   /* 200 slots: 12 passes */
    gdaki_pair_close(p);
}

TAP_CASE(test_four_posters_signal_add_on_one_word_sum_exactly)
{
    struct gdaki_pair *p = open_pair(32);
    cpu_posters_signal_add_run(p, 4, 100);
    gdaki_pair_close(p);
}

TAP_CASE(test_posts_beyond_16bit_wqe_counter)
{
    struct gdaki_pair *p = open_pair(64);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    static uint64_t src[1], dst[1];
    struct gdaki_mr ms, md;
    reg(p, src, sizeof(src), &ms);
    reg(p, dst, sizeof(dst), &md);
    /* 70000 inline 8-byte writes: the ctrl idx and the doorbell record
     * (16 bits) wrap once; the last value must land. */
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

TAP_CASE(test_quiet_returns_only_after_the_data_is_there)
{
    struct gdaki_pair *p = open_pair(16);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    size_t n = 4u << 20;
    uint8_t *src, *dst;
    struct gdaki_mr ms, md;
    host_bufs(p, n, 9, &src, &dst, &ms, &md);
    for (int round = 0; round < 3; round++) {
        memset(dst, 0, n);
        src[n - 1] = (uint8_t)(0x40 + round);
        struct gdaki_op op = { .laddr = ms.addr, .lkey = ms.lkey, .len = (uint32_t)n,
                               .raddr = md.addr, .rkey = md.rkey };
        uint64_t ticket = gdaki_q_post1(q, GDAKI_KIND_WRITE, &op);
        EXPECT_TRUE(ticket != GDAKI_SLOT_ERROR);
        EXPECT_EQ_INT(0, gdaki_q_quiet(q));
        /* No waiting after quiet: every byte, the last one included, is in. */
        EXPECT_TRUE(q->done >= ticket);
        EXPECT_MEMEQ(src, dst, n);
    }
    gdaki_pair_close(p);
    free(src);
    free(dst);
}

/* Every span entry is back to 0: each signaled multi-BB WQE's CQE was
 * consumed and cleared its entry. */
static void expect_span_clear(const struct gdaki_qp_dev *q)
{
    for (uint32_t i = 0; i < gdaki_q_slots(q); i++)
        EXPECT_EQ_INT(0, q->span[i]);
}

/* GDAKI_OP_INLINE: the payload travels in the WQE.  The source is
 * overwritten as soon as each post returns, before quiet, and the receiver
 * still gets what the source held at the post; the op names no MR (lkey 0),
 * which a pointer segment would fail with a local protection error.  Every
 * size from 1 to 28 bytes. */
TAP_CASE(test_inline_put_carries_the_bytes_of_post_time)
{
    struct gdaki_pair *p = open_pair(16);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    uint8_t *dst = calloc(1, 4096);
    struct gdaki_mr md;
    reg(p, dst, 4096, &md);
    uint8_t src[GDAKI_INLINE_MAX_1BB], want[GDAKI_INLINE_MAX_1BB * 64];
    uint64_t last = 0;
    int n = 0;
    for (uint32_t len = 1; len <= GDAKI_INLINE_MAX_1BB; len++, n++) {
        fill(src, len, len);
        memcpy(want + (size_t)n * GDAKI_INLINE_MAX_1BB, src, len);
        struct gdaki_op op = { .laddr = (uintptr_t)src, .lkey = 0, .len = len,
                               .raddr = md.addr + (uint64_t)n * 64, .rkey = md.rkey,
                               .flags = GDAKI_OP_INLINE };
        last = gdaki_q_post1(q, GDAKI_KIND_WRITE, &op);
        EXPECT_TRUE(last != GDAKI_SLOT_ERROR);
        memset(src, 0xee, sizeof(src)); /* reused at once */
    }
    EXPECT_EQ_INT(0, gdaki_q_quiet(q));
    EXPECT_TRUE(q->done >= last);
    EXPECT_EQ_INT(0, (int)q->err);
    for (int i = 0; i < n; i++) {
        uint32_t len = (uint32_t)i + 1;
        EXPECT_MEMEQ(want + (size_t)i * GDAKI_INLINE_MAX_1BB, dst + (size_t)i * 64, len);
        EXPECT_EQ_INT(0, dst[(size_t)i * 64 + len]); /* nothing past the payload */
    }
    gdaki_pair_close(p);
    free(dst);
}

/* Inline puts of every size from 1 to GDAKI_INLINE_MAX bytes, twice, on a
 * ring of 64 BBs: WQEs of 1 to 16 BBs, signaled, wrapping the ring's end
 * many times (softnic reads a WQE across the wrap as a ConnectX does).
 * Each completion must free exactly its BBs: quiet ends with done equal to
 * resv (a CQE taken for one BB would leave quiet waiting; one taken for
 * too many would let a poster overwrite a WQE the NIC has not read) and
 * every span entry cleared.  Sources are overwritten after each post. */
static void inline_puts_of_several_bbs(enum gdaki_queue_mem mem)
{
    struct gdaki_pair *p = open_pair_mem(64, mem);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    EXPECT_EQ_INT(63, (int)q->max_wqe_ds);  /* softnic states 1024 bytes: the ds field's most */
    enum { MSGS = 2 * GDAKI_INLINE_MAX, STRIDE = 1024 };
    uint8_t *dst = calloc(MSGS, STRIDE), *want = calloc(MSGS, STRIDE);
    struct gdaki_mr md;
    reg(p, dst, (size_t)MSGS * STRIDE, &md);
    uint8_t src[GDAKI_INLINE_MAX];
    uint64_t bbs = 0;
    for (int n = 0; n < MSGS; n++) {
        uint32_t len = (uint32_t)(n % GDAKI_INLINE_MAX) + 1;
        fill(src, len, (unsigned)n);
        memcpy(want + (size_t)n * STRIDE, src, len);
        struct gdaki_op op = { .laddr = (uintptr_t)src, .lkey = 0, .len = len,
                               .raddr = md.addr + (uint64_t)n * STRIDE, .rkey = md.rkey,
                               .flags = GDAKI_OP_INLINE };
        uint64_t before = q->resv;
        uint64_t t = gdaki_q_post1(q, GDAKI_KIND_WRITE, &op);
        EXPECT_TRUE(t != GDAKI_SLOT_ERROR);
        EXPECT_EQ_U64(gdaki_inline_bbs(len), t - before);
        bbs += t - before;
        memset(src, 0xee, sizeof(src));
    }
    EXPECT_EQ_INT(0, gdaki_q_quiet(q));
    EXPECT_EQ_INT(0, (int)q->err);
    EXPECT_EQ_U64(bbs, q->resv);
    EXPECT_EQ_U64(q->resv, q->done);
    EXPECT_TRUE(bbs > 8 * (uint64_t)gdaki_q_slots(q)); /* the ring wrapped many times */
    expect_span_clear(q);
    EXPECT_MEMEQ(want, dst, (size_t)MSGS * STRIDE);
    gdaki_pair_close(p);
    free(dst);
    free(want);
}

TAP_CASE(test_inline_puts_of_several_bbs_wrap_the_ring_and_complete)
{
    inline_puts_of_several_bbs(GDAKI_QUEUE_MEM_HOST);
}

/* The same on a QP made with DEVX (ring and CQ in host memory, as the GPU
 * path's host-devx queue), which softnic runs through the same engine. */
TAP_CASE(test_inline_puts_of_several_bbs_on_a_devx_qp)
{
    inline_puts_of_several_bbs(GDAKI_QUEUE_MEM_HOST_DEVX);
}

/* On a queue whose largest WQE is 512 bytes (max_wqe_ds 32): a 476-byte
 * inline put takes 8 BBs and a 972-byte one goes by pointer in one; both
 * land in dst (1 KiB apart).  src and dst are 4 KiB, registered as ms, md. */
static void puts_within_a_512_byte_wqe(struct gdaki_qp_dev *q, uint8_t *src, uint8_t *dst,
                                       const struct gdaki_mr *ms, const struct gdaki_mr *md)
{
    static const uint32_t lens[] = { 476, GDAKI_INLINE_MAX };
    static const uint64_t bbs[] = { 8, 1 };
    for (int i = 0; i < 2; i++) {
        fill(src, lens[i], 70u + (unsigned)i);
        struct gdaki_op op = { .laddr = ms->addr, .lkey = ms->lkey, .len = lens[i],
                               .raddr = md->addr + (uint64_t)i * 1024, .rkey = md->rkey,
                               .flags = GDAKI_OP_INLINE };
        uint64_t before = q->resv;
        uint64_t t = gdaki_q_post1(q, GDAKI_KIND_WRITE, &op);
        EXPECT_TRUE(t != GDAKI_SLOT_ERROR);
        EXPECT_EQ_U64(bbs[i], t - before);
        EXPECT_EQ_INT(0, gdaki_q_wait_done(q, t));
        EXPECT_MEMEQ(src, dst + (size_t)i * 1024, lens[i]);
    }
}

/* A device whose largest send WQE is smaller than 16 BBs, set by hand on a
 * verbs queue (softnic's firmware states 1024 bytes unless told
 * otherwise: the descriptor says 63 units, the ds field's most). */
TAP_CASE(test_inline_put_longer_than_the_devices_largest_wqe_goes_by_pointer)
{
    struct gdaki_pair *p = open_pair(64);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    EXPECT_EQ_INT(63, (int)q->max_wqe_ds);
    q->max_wqe_ds = 32;   /* 512 bytes */
    uint8_t *src = calloc(1, 4096), *dst = calloc(1, 4096);
    struct gdaki_mr ms, md;
    reg(p, src, 4096, &ms);
    reg(p, dst, 4096, &md);
    puts_within_a_512_byte_wqe(q, src, dst, &ms, &md);
    EXPECT_EQ_INT(0, (int)q->err);
    gdaki_pair_close(p);
    free(src);
    free(dst);
}

/* A NIC that states its largest send WQE (SOFTNIC_MAX_WQE_SZ_SQ=512: softnic
 * then answers QUERY_HCA_CAP, as a ConnectX does, and fails a longer WQE):
 * a DEVX queue learns 32 units at setup, a 476-byte inline put takes 8
 * BBs and a 972-byte one goes by pointer, both land; a queue that did not
 * know the limit (max_wqe_ds 0) has its 16-BB WQE fail with a local length
 * error, not executed. */
TAP_CASE(test_the_nics_largest_wqe_is_learned_and_bounds_inline_puts)
{
    setenv("SOFTNIC_MAX_WQE_SZ_SQ", "512", 1);   /* this case's process only */
    struct gdaki_pair *p = open_pair_mem(64, GDAKI_QUEUE_MEM_HOST_DEVX);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    EXPECT_EQ_INT(32, (int)q->max_wqe_ds);
    uint8_t *src = calloc(1, 4096), *dst = calloc(1, 4096);
    struct gdaki_mr ms, md;
    reg(p, src, 4096, &ms);
    reg(p, dst, 4096, &md);
    puts_within_a_512_byte_wqe(q, src, dst, &ms, &md);
    /* the limit unknown to the poster: the NIC refuses the 63-unit WQE */
    q->max_wqe_ds = 0;
    memset(dst + 2048, 0, 1024);
    fill(src, GDAKI_INLINE_MAX, 92u);
    struct gdaki_op op = { .laddr = ms.addr, .lkey = ms.lkey, .len = GDAKI_INLINE_MAX,
                           .raddr = md.addr + 2048, .rkey = md.rkey, .flags = GDAKI_OP_INLINE };
    uint64_t t = gdaki_q_post1(q, GDAKI_KIND_WRITE, &op);
    EXPECT_TRUE(t != GDAKI_SLOT_ERROR);
    EXPECT_EQ_INT(-1, gdaki_q_wait_done(q, t));
    EXPECT_EQ_U64(GDAKI_ERR_WORD(MLX5_CQE_REQ_ERR, 0, MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR),
                  GDAKI_ERR_NO_VENDOR(q->err));
    uint8_t zero[1024] = { 0 };
    EXPECT_MEMEQ(zero, dst + 2048, 1024);
    gdaki_pair_close(p);
    free(src);
    free(dst);
}

/* put_signal with an inline payload of several BBs: the data WQE asks for
 * no CQE (no span entry), the signal's CQE completes both; the receiver
 * sees the signal and the data. */
TAP_CASE(test_inline_put_signal_of_several_bbs_lands_data_then_signal)
{
    struct gdaki_pair *p = open_pair(64);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    uint8_t *dst = calloc(1, 4096);
    struct gdaki_mr md;
    reg(p, dst, 4096, &md);
    uint8_t src[GDAKI_INLINE_MAX];
    static const uint32_t lens[] = { 29, 93, 157, 220, 512, GDAKI_INLINE_MAX };
    for (int round = 0; round < 40; round++) {
        uint32_t len = lens[round % 6];
        fill(src, len, (unsigned)round);
        uint8_t want[GDAKI_INLINE_MAX];
        memcpy(want, src, len);
        struct gdaki_op op = { .laddr = (uintptr_t)src, .lkey = 0, .len = len,
                               .raddr = md.addr + 64, .rkey = md.rkey, .flags = GDAKI_OP_INLINE };
        uint64_t before = q->resv;
        uint64_t t = gdaki_q_post_signal_set(q, &op, md.addr, md.rkey, (uint64_t)round + 1);
        EXPECT_TRUE(t != GDAKI_SLOT_ERROR);
        EXPECT_EQ_U64(gdaki_inline_bbs(len) + 1, t - before);
        memset(src, 0xee, sizeof(src));
        EXPECT_EQ_INT(0, gdaki_q_wait_done(q, t));
        uint64_t sig;
        memcpy(&sig, dst, 8);
        EXPECT_EQ_U64((uint64_t)round + 1, sig);
        EXPECT_MEMEQ(want, dst + 64, len);
    }
    EXPECT_EQ_U64(q->resv, q->done);
    gdaki_pair_close(p);
    free(dst);
}

/* Four threads post on one queue at once, each its own messages: inline
 * puts (signaled, 1-16 BBs, span entries) and put_signals (unsignaled data
 * of 1-16 BBs, one-BB signal) of 1..972 bytes, on a 64-BB ring, past
 * the 16-bit WQE counter.  Span entries are written by posters and cleared
 * by whichever thread polls, for slots other threads reuse next: every
 * byte lands, done ends at resv, every entry is clear. */
#define MT_THREADS 4
#define MT_MSGS 6000
#define MT_STRIDE 1024

struct mt_poster {
    struct gdaki_qp_dev *q;
    uint8_t *dst;
    uint64_t dst_addr, sig_addr;
    uint32_t rkey;
    int id, rc;
};

static uint32_t mt_len(int id, int i)
{
    return (uint32_t)((i * 37 + id * 11) % GDAKI_INLINE_MAX) + 1;
}

static uint8_t mt_byte(int id, int i, uint32_t k)
{
    return (uint8_t)(k * 29 + (uint32_t)i * 13 + (uint32_t)id * 101 + 1);
}

static void *mt_main(void *arg)
{
    struct mt_poster *m = arg;
    uint8_t src[GDAKI_INLINE_MAX];
    uint64_t t = 0;
    for (int i = 0; i < MT_MSGS && !m->rc; i++) {
        uint32_t len = mt_len(m->id, i);
        for (uint32_t k = 0; k < len; k++)
            src[k] = mt_byte(m->id, i, k);
        /* each thread's messages take turns over a few destination slots:
         * the earlier one there has completed (quiet below) */
        uint64_t at = m->dst_addr + ((uint64_t)m->id * 8 + (uint64_t)(i % 8)) * MT_STRIDE;
        struct gdaki_op op = { .laddr = (uintptr_t)src, .len = len, .raddr = at, .rkey = m->rkey,
                               .flags = GDAKI_OP_INLINE };
        t = (i & 1) ? gdaki_q_post_signal_set(m->q, &op, m->sig_addr + 8 * (uint64_t)m->id, m->rkey,
                                              (uint64_t)i)
                    : gdaki_q_post1(m->q, GDAKI_KIND_WRITE, &op);
        memset(src, 0xee, sizeof(src));
        if (t == GDAKI_SLOT_ERROR || (i % 8 == 7 && gdaki_q_wait_done(m->q, t) < 0))
            m->rc = -1;
    }
    if (!m->rc && gdaki_q_wait_done(m->q, t) < 0)
        m->rc = -1;
    return NULL;
}

TAP_CASE(test_concurrent_posters_of_inline_wqes_of_several_bbs)
{
    struct gdaki_pair *p = open_pair(64);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    size_t bytes = (size_t)MT_THREADS * 8 * MT_STRIDE + 64;
    uint8_t *dst = calloc(1, bytes);
    struct gdaki_mr md;
    reg(p, dst, bytes, &md);
    struct mt_poster m[MT_THREADS];
    pthread_t th[MT_THREADS];
    for (int i = 0; i < MT_THREADS; i++) {
        m[i] = (struct mt_poster){ .q = q, .dst = dst, .dst_addr = md.addr, .rkey = md.rkey,
                                   .sig_addr = md.addr + bytes - 64, .id = i };
        EXPECT_EQ_INT(0, pthread_create(&th[i], NULL, mt_main, &m[i]));
    }
    for (int i = 0; i < MT_THREADS; i++) {
        pthread_join(th[i], NULL);
        EXPECT_EQ_INT(0, m[i].rc);
    }
    EXPECT_EQ_INT(0, (int)q->err);
    EXPECT_EQ_U64(q->resv, q->done);
    EXPECT_TRUE(q->resv > 65536);
    expect_span_clear(q);
    /* the last message of each destination slot is what it holds */
    for (int id = 0; id < MT_THREADS; id++)
        for (int i = MT_MSGS - 8; i < MT_MSGS; i++) {
            const uint8_t *d = dst + ((size_t)id * 8 + (size_t)(i % 8)) * MT_STRIDE;
            uint32_t len = mt_len(id, i);
            for (uint32_t k = 0; k < len; k++)
                if (d[k] != mt_byte(id, i, k))
                    tap_fail_at(__FILE__, __LINE__, "thread %d message %d byte %u: %#x", id, i, k, d[k]);
        }
    gdaki_pair_close(p);
    free(dst);
}

/* A completion that names more slots than were ever reserved (here: a
 * span entry spoiled before the CQE of the queue's last WQE comes) stops
 * the QP with GDAKI_ERR_PROTOCOL: quiet fails instead of returning with
 * done past resv, where posters would overwrite WQEs the NIC has not read. */
TAP_CASE(test_completion_past_the_reserved_slots_is_a_protocol_error)
{
    struct gdaki_pair *p = open_pair(16);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    uint8_t *dst = calloc(1, 4096);
    struct gdaki_mr md;
    reg(p, dst, 4096, &md);
    uint64_t v = 5;
    struct gdaki_op op = { .laddr = (uintptr_t)&v, .len = 8, .raddr = md.addr, .rkey = md.rkey,
                           .flags = GDAKI_OP_INLINE };
    uint64_t t = gdaki_q_post1(q, GDAKI_KIND_WRITE, &op);
    EXPECT_EQ_INT(0, gdaki_q_wait_done(q, t));
    q->span[t & (gdaki_q_slots(q) - 1)] = 3; /* the next WQE's slot */
    t = gdaki_q_post1(q, GDAKI_KIND_WRITE, &op);
    EXPECT_EQ_INT(-1, gdaki_q_quiet(q));
    EXPECT_EQ_U64(GDAKI_ERR_PROTOCOL, q->err);
    EXPECT_TRUE(q->done < t + 3);
    gdaki_pair_close(p);
    free(dst);
}

/* ---- signals ---- */

#define SIG_MSGS 300
#define SIG_LEN 1024

struct sig_ctx {
    struct gdaki_qp_dev *q;
    struct gdaki_mr src, dst, sig;
    bool add;        /* GDAKI_SIGNAL_ADD (ATOMIC_FA of 1), else SET (m + 1) */
    int rc;
};

static void *sig_sender(void *arg)
{
    struct sig_ctx *c = arg;
    for (uint64_t m = 0; m < SIG_MSGS; m++) {
        struct gdaki_op op = { .laddr = c->src.addr + m * SIG_LEN, .lkey = c->src.lkey,
                               .len = SIG_LEN, .raddr = c->dst.addr + m * SIG_LEN,
                               .rkey = c->dst.rkey };
        uint64_t t = c->add ? gdaki_q_post_signal(c->q, &op, c->sig.addr, c->sig.rkey, 1)
                            : gdaki_q_post_signal_set(c->q, &op, c->sig.addr, c->sig.rkey, m + 1);
        if (t == GDAKI_SLOT_ERROR) {
            c->rc = -1;
            return NULL;
        }
    }
    c->rc = gdaki_q_quiet(c->q);
    return NULL;
}

static void signal_arrives_after_its_data(bool add)
{
    struct gdaki_pair *p = open_pair(32);
    struct sig_ctx c = { .q = gdaki_pair_qp_host(p), .add = add };
    uint8_t *src = malloc((size_t)SIG_MSGS * SIG_LEN), *dst = calloc(SIG_MSGS, SIG_LEN);
    static uint64_t signal;
    signal = 0;
    fill(src, (size_t)SIG_MSGS * SIG_LEN, 5);
    reg(p, src, (size_t)SIG_MSGS * SIG_LEN, &c.src);
    reg(p, dst, (size_t)SIG_MSGS * SIG_LEN, &c.dst);
    reg(p, &signal, sizeof(signal), &c.sig);
    pthread_t th;
    EXPECT_EQ_INT(0, pthread_create(&th, NULL, sig_sender, &c));
    int bad = -1;
    for (uint64_t k = 1; k <= SIG_MSGS; k++) {
        uint64_t seen = gdaki_wait_signal_ge(&signal, k);
        /* Whatever the signal says, that many messages are whole. */
        for (uint64_t m = k - 1; m < seen && bad < 0; m++)
            if (memcmp(src + m * SIG_LEN, dst + m * SIG_LEN, SIG_LEN) != 0)
                bad = (int)m;
        k = seen;
    }
    pthread_join(th, NULL);
    EXPECT_EQ_INT(0, c.rc);
    EXPECT_EQ_INT(-1, bad);
    EXPECT_EQ_U64(SIG_MSGS, signal);
    gdaki_pair_close(p);
    free(src);
    free(dst);
}

TAP_CASE(test_signal_set_arrives_after_its_data)
{
    signal_arrives_after_its_data(false);
}

TAP_CASE(test_signal_add_arrives_after_its_data)
{
    signal_arrives_after_its_data(true);
}

/* ATOMIC_FA (gdaki_wqe_atomic_fa) and a hand-built ATOMIC_CS through the
 * mlx5 ring: the old value lands in the local buffer, the word changes as
 * the opcode says, and each asks for a CQE of its own. */
TAP_CASE(test_atomic_fa_and_cs_wqes_return_the_old_value)
{
    struct gdaki_pair *p = open_pair(16);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    static uint64_t word[4], res[4];
    word[1] = 40;
    memset(res, 0xee, sizeof(res));
    struct gdaki_mr mw, mr;
    reg(p, word, sizeof(word), &mw);
    reg(p, res, sizeof(res), &mr);
    struct gdaki_op fa = { .laddr = mr.addr, .lkey = mr.lkey, .len = 8, .raddr = mw.addr + 8,
                           .rkey = mw.rkey, .add = 2 };
    EXPECT_TRUE(gdaki_q_post1(q, GDAKI_KIND_ATOMIC_FA, &fa) != GDAKI_SLOT_ERROR);
    EXPECT_EQ_INT(0, gdaki_q_quiet(q));
    EXPECT_EQ_U64(40, res[0]);
    EXPECT_EQ_U64(42, word[1]);
    /* CS: swap 42 -> 7 (matches), then 42 -> 9 (does not) */
    static const uint64_t cmp[2] = { 42, 42 }, swp[2] = { 7, 9 };
    for (int i = 0; i < 2; i++) {
        uint64_t slot = gdaki_q_reserve(q, 1);
        EXPECT_TRUE(slot != GDAKI_SLOT_ERROR);
        uint8_t *w = gdaki_q_slot_ptr(q, slot);
        gdaki_set_ctrl((struct mlx5_wqe_ctrl_seg *)w, (uint16_t)slot, MLX5_OPCODE_ATOMIC_CS, 0,
                       q->qpn, 4, MLX5_WQE_CTRL_CQ_UPDATE, 0);
        gdaki_set_raddr((struct mlx5_wqe_raddr_seg *)(w + 16), mw.addr + 8, mw.rkey);
        gdaki_set_atomic((struct mlx5_wqe_atomic_seg *)(w + 32), swp[i], cmp[i]);
        gdaki_set_data((struct mlx5_wqe_data_seg *)(w + 48), 8, mr.lkey, mr.addr + 8 + 8 * (uint64_t)i);
        EXPECT_EQ_INT(0, gdaki_q_ring(q, slot, 1, gdaki_q_db_value(w)));
        EXPECT_EQ_INT(0, gdaki_q_quiet(q));
    }
    EXPECT_EQ_U64(42, res[1]);
    EXPECT_EQ_U64(7, res[2]);
    EXPECT_EQ_U64(7, word[1]);
    EXPECT_EQ_U64(0, word[0]);
    EXPECT_EQ_U64(0, word[2]);
    EXPECT_EQ_U64(0xeeeeeeeeeeeeeeeeull, res[3]);
    EXPECT_EQ_U64(3, q->done);
    EXPECT_EQ_INT(0, q->err);
    gdaki_pair_close(p);
}

TAP_CASE(test_write_imm_delivers_its_immediate_after_the_data)
{
    struct gdaki_pair *p = open_pair(16);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    static uint8_t src[512], dst[512];
    fill(src, sizeof(src), 11);
    struct gdaki_mr ms, md;
    reg(p, src, sizeof(src), &ms);
    reg(p, dst, sizeof(dst), &md);
    EXPECT_EQ_INT(0, gdaki_pair_post_recv(p, 4));
    for (uint32_t i = 0; i < 4; i++) {
        struct gdaki_op op = { .laddr = ms.addr + i * 128, .lkey = ms.lkey, .len = 128,
                               .raddr = md.addr + i * 128, .rkey = md.rkey, .imm = 0xabc00 + i };
        EXPECT_TRUE(gdaki_q_post1(q, GDAKI_KIND_WRITE_IMM, &op) != GDAKI_SLOT_ERROR);
    }
    EXPECT_EQ_INT(0, gdaki_q_quiet(q));
    uint32_t imm[4];
    int got = 0;
    for (int spin = 0; spin < 200000 && got < 4; spin++) {
        int n = gdaki_pair_poll_recv(p, imm + got, 4 - got);
        EXPECT_TRUE(n >= 0);
        got += n;
        if (!n)
            usleep(50);
    }
    EXPECT_EQ_INT(4, got);
    for (uint32_t i = 0; i < 4; i++)
        EXPECT_EQ_U64(0xabc00 + i, imm[i]);
    EXPECT_MEMEQ(src, dst, sizeof(src));
    gdaki_pair_close(p);
}

/* ---- errors: a malformed WQE gives an error CQE, never a crash ---- */

/* Post one good write, then the WQE that mangle() spoils; quiet must fail
 * with the expected syndrome, the good write must have completed, the QP
 * must be in ERR and later posts must fail rather than hang. */
static void expect_error_cqe(void (*mangle)(uint8_t *w, struct gdaki_op *op), uint8_t syndrome)
{
    struct gdaki_pair *p = open_pair(16);
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
    uint64_t slot = gdaki_q_reserve(q, 1);
    uint8_t *w = gdaki_q_slot_ptr(q, slot);
    mangle(NULL, &bad);
    gdaki_q_build(q, slot, GDAKI_KIND_WRITE, &bad, 1);
    mangle(w, &bad);
    EXPECT_EQ_INT(0, gdaki_q_ring(q, slot, 1, gdaki_q_db_value(w)));
    EXPECT_EQ_INT(-1, gdaki_q_quiet(q));
    EXPECT_EQ_U64(GDAKI_ERR_WORD(MLX5_CQE_REQ_ERR, 0, syndrome), GDAKI_ERR_NO_VENDOR(q->err));
    EXPECT_EQ_U64(1, q->done);
    EXPECT_EQ_INT(IBV_QPS_ERR, gdaki_pair_send_qp_state(p));
    /* After the error, posting and quiet fail instead of hanging. */
    uint64_t t = gdaki_q_post1(q, GDAKI_KIND_WRITE, &op);
    EXPECT_TRUE(t == GDAKI_SLOT_ERROR || gdaki_q_quiet(q) == -1);
    gdaki_pair_close(p);
}

static void mangle_opcode(uint8_t *w, struct gdaki_op *op)
{
    (void)op;
    if (w)
        w[3] = 0x55;    /* no such mlx5 opcode */
}

static void mangle_ds_zero(uint8_t *w, struct gdaki_op *op)
{
    (void)op;
    if (w)
        w[7] = 0;       /* qpn_ds low byte: ds = 0 */
}

static void mangle_wrong_qpn(uint8_t *w, struct gdaki_op *op)
{
    (void)op;
    if (w)
        w[4] ^= 0x7f;   /* another QP's number */
}

static void mangle_rkey(uint8_t *w, struct gdaki_op *op)
{
    if (!w)
        op->rkey ^= 0x5a5a00;
}

static void mangle_lkey(uint8_t *w, struct gdaki_op *op)
{
    if (!w)
        op->lkey ^= 0x5a5a00;
}

static void mangle_length_past_mr(uint8_t *w, struct gdaki_op *op)
{
    if (!w)
        op->len = 1u << 20;   /* the source MR is 64 bytes */
}

static void mangle_atomic(uint8_t *w, struct gdaki_op *op)
{
    (void)op;
    if (w) {
        /* An ATOMIC_FA of 3 ds (ctrl, raddr, atomic segment): no data
         * segment for the old value. */
        w[3] = MLX5_OPCODE_ATOMIC_FA;
        w[7] = 3;
    }
}

/* Turns the WRITE into an ATOMIC_FA of 1 on its target word (ctrl, raddr,
 * atomic segment, the WRITE's data segment moved to 48 with 8 bytes). */
static void to_atomic(uint8_t *w)
{
    w[3] = MLX5_OPCODE_ATOMIC_FA;
    w[7] = 4;
    memcpy(w + 48, w + 32, 16);
    gdaki_set_atomic((struct mlx5_wqe_atomic_seg *)(w + 32), 1, 0);
}

static void mangle_atomic_misaligned(uint8_t *w, struct gdaki_op *op)
{
    if (!w)
        op->raddr += 4;
    else
        to_atomic(w);
}

static void mangle_atomic_past_mr(uint8_t *w, struct gdaki_op *op)
{
    if (!w)
        op->raddr += 64;   /* the target MR is 64 bytes */
    else
        to_atomic(w);
}

TAP_CASE(test_misaligned_atomic_gives_remote_invalid_request_cqe)
{
    expect_error_cqe(mangle_atomic_misaligned, MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR);
}

TAP_CASE(test_atomic_past_the_mr_gives_remote_access_error_cqe)
{
    expect_error_cqe(mangle_atomic_past_mr, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
}

TAP_CASE(test_unknown_opcode_gives_local_qp_op_error_cqe)
{
    expect_error_cqe(mangle_opcode, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
}

TAP_CASE(test_zero_ds_gives_local_length_error_cqe)
{
    expect_error_cqe(mangle_ds_zero, MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR);
}

TAP_CASE(test_wrong_qpn_in_ctrl_gives_local_qp_op_error_cqe)
{
    expect_error_cqe(mangle_wrong_qpn, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
}

TAP_CASE(test_bad_rkey_gives_remote_access_error_cqe)
{
    expect_error_cqe(mangle_rkey, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
}

TAP_CASE(test_bad_lkey_gives_local_protection_error_cqe)
{
    expect_error_cqe(mangle_lkey, MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
}

TAP_CASE(test_length_past_the_mr_gives_local_protection_error_cqe)
{
    expect_error_cqe(mangle_length_past_mr, MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
}

TAP_CASE(test_atomic_without_result_segment_gives_local_length_error_cqe)
{
    expect_error_cqe(mangle_atomic, MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR);
}

/* ---- WQEs found at one doorbell: one engine post list ---- */

/* softnic_ctl_qp_post_calls of the send QP (the dv QP is the softnic QP
 * its WQEs run on): the ibv_post_send calls softnic's mlx5 NIC thread made. */
static uint64_t engine_posts(struct gdaki_pair *p)
{
    int (*fn)(struct ibv_qp *, uint64_t *) = NULL;
    *(void **)&fn = softnic_sym(p, "softnic_ctl_qp_post_calls");
    if (!fn)
        tap_fail_at(__FILE__, __LINE__, "softnic_ctl_qp_post_calls not found in the pair's libibverbs");
    uint64_t n = 0;
    EXPECT_EQ_INT(0, fn(p->sqp, &n));
    return n;
}

/* Builds n WQEs at one reservation: kind[i] (NULL: every one a WRITE) of
 * len bytes from src + i * len to dst + i * len, signaled[i] (NULL: every
 * one), the rkey of WQE bad_rkey spoiled (-1: none; it passes every local
 * check: the responder refuses it).  Returns the first slot and in *db the
 * doorbell value of the last WQE; ring_all rings once for all of them. */
static uint64_t build_at_one_doorbell(struct gdaki_qp_dev *q, const struct gdaki_mr *ms,
                                      const struct gdaki_mr *md, int n, uint32_t len, const int *kind,
                                      const int *signaled, int bad_rkey, uint64_t *db)
{
    uint64_t slot = gdaki_q_reserve(q, (uint32_t)n);
    EXPECT_TRUE(slot != GDAKI_SLOT_ERROR);
    for (int i = 0; i < n; i++) {
        struct gdaki_op op = { .laddr = ms->addr + (uint64_t)i * len, .lkey = ms->lkey, .len = len,
                               .raddr = md->addr + (uint64_t)i * len,
                               .rkey = i == bad_rkey ? md->rkey ^ 0x5a5a00u : md->rkey };
        *db = gdaki_q_build(q, slot + (uint64_t)i, kind ? kind[i] : GDAKI_KIND_WRITE, &op,
                            signaled ? signaled[i] : 1);
    }
    return slot;
}

static void ring_all(struct gdaki_qp_dev *q, uint64_t slot, int n, uint64_t db)
{
    EXPECT_EQ_INT(0, gdaki_q_ring(q, slot, (uint32_t)n, db));
}

/* Writes n WQEs (kind[i]), every one signaled, and rings the doorbell once
 * for all. */
static void post_at_one_doorbell(struct gdaki_qp_dev *q, const struct gdaki_mr *ms,
                                 const struct gdaki_mr *md, const int *kind, int n, uint32_t len)
{
    uint64_t db = 0, slot = build_at_one_doorbell(q, ms, md, n, len, kind, NULL, -1, &db);
    ring_all(q, slot, n, db);
}

/* Eight small writes behind one doorbell reach softnic's engine as one
 * ibv_post_send list, not eight posts: one lock round trip, and one
 * transmission by the NIC thread (bench/mlx5_engine.sh: 0.13 -> 0.39 M
 * writes/s with 8 in flight).  Each still gets its CQE, and lands. */
TAP_CASE(test_wqes_of_one_doorbell_reach_the_engine_as_one_post_list)
{
    struct gdaki_pair *p = open_pair(16);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    static uint8_t src[8 * 64], dst[8 * 64];
    fill(src, sizeof(src), 21);
    struct gdaki_mr ms, md;
    reg(p, src, sizeof(src), &ms);
    reg(p, dst, sizeof(dst), &md);
    int kind[8];
    for (int i = 0; i < 8; i++)
        kind[i] = GDAKI_KIND_WRITE;
    uint64_t before = engine_posts(p);
    post_at_one_doorbell(q, &ms, &md, kind, 8, 64);
    EXPECT_EQ_INT(0, gdaki_q_quiet(q));
    EXPECT_EQ_U64(1, engine_posts(p) - before);
    EXPECT_EQ_U64(8, q->done);
    EXPECT_EQ_U64(8, q->cq_ci);         /* a CQE each */
    EXPECT_MEMEQ(src, dst, sizeof(src));
    gdaki_pair_close(p);
}

/* A NOP runs on the NIC thread, not the engine: it ends a list, and its
 * CQE comes between those of the writes around it (q->cq_ci counts CQEs
 * consumed in order; done would stop at a gap). */
TAP_CASE(test_nop_between_writes_splits_the_post_list_and_keeps_cqe_order)
{
    struct gdaki_pair *p = open_pair(16);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    static uint8_t src[7 * 64], dst[7 * 64];
    fill(src, sizeof(src), 22);
    struct gdaki_mr ms, md;
    reg(p, src, sizeof(src), &ms);
    reg(p, dst, sizeof(dst), &md);
    int kind[7] = { GDAKI_KIND_WRITE, GDAKI_KIND_WRITE, GDAKI_KIND_WRITE, GDAKI_KIND_NOP,
                    GDAKI_KIND_WRITE, GDAKI_KIND_WRITE, GDAKI_KIND_WRITE };
    uint64_t before = engine_posts(p);
    post_at_one_doorbell(q, &ms, &md, kind, 7, 64);
    EXPECT_EQ_INT(0, gdaki_q_quiet(q));
    EXPECT_EQ_U64(2, engine_posts(p) - before);
    EXPECT_EQ_U64(7, q->done);
    EXPECT_EQ_U64(7, q->cq_ci);
    EXPECT_MEMEQ(src, dst, 3 * 64);
    EXPECT_MEMEQ(src + 4 * 64, dst + 4 * 64, 3 * 64);
    gdaki_pair_close(p);
}

/* A list stops where softnic's posting thread would stop sending it
 * itself (4 KiB of payload): four 4 KiB writes are four posts, each sent
 * at once, rather than one list left to the requester thread's wake-up. */
TAP_CASE(test_post_list_holds_at_most_4KiB_of_payload)
{
    struct gdaki_pair *p = open_pair(16);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    static uint8_t src[4 * 4096], dst[4 * 4096];
    fill(src, sizeof(src), 23);
    struct gdaki_mr ms, md;
    reg(p, src, sizeof(src), &ms);
    reg(p, dst, sizeof(dst), &md);
    int kind[4] = { GDAKI_KIND_WRITE, GDAKI_KIND_WRITE, GDAKI_KIND_WRITE, GDAKI_KIND_WRITE };
    uint64_t before = engine_posts(p);
    post_at_one_doorbell(q, &ms, &md, kind, 4, 4096);
    EXPECT_EQ_INT(0, gdaki_q_quiet(q));
    EXPECT_EQ_U64(4, engine_posts(p) - before);
    EXPECT_EQ_U64(4, q->done);
    EXPECT_MEMEQ(src, dst, sizeof(src));
    gdaki_pair_close(p);
}

/* The 4 KiB counts payload by pointer: a put_signal of 4 KiB (the payload
 * WRITE, then the 8-byte signal as an inline WRITE, at one doorbell) is one
 * list, so the responder takes both in one batch (one sync, one ACK, the
 * signal behind its payload) rather than as two transmissions. */
TAP_CASE(test_post_list_of_4KiB_payload_takes_its_inline_signal_too)
{
    struct gdaki_pair *p = open_pair(16);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    static uint8_t src[4096], dst[4096];
    static uint64_t sig[1];
    fill(src, sizeof(src), 29);
    struct gdaki_mr ms, md, mg;
    reg(p, src, sizeof(src), &ms);
    reg(p, dst, sizeof(dst), &md);
    reg(p, sig, sizeof(sig), &mg);
    const uint64_t want = 0x5151000000000001ull;
    uint64_t before = engine_posts(p);
    uint64_t s = gdaki_q_reserve(q, 2);
    EXPECT_TRUE(s != GDAKI_SLOT_ERROR);
    struct gdaki_op w = { .laddr = ms.addr, .lkey = ms.lkey, .len = 4096, .raddr = md.addr, .rkey = md.rkey };
    gdaki_q_build(q, s, GDAKI_KIND_WRITE, &w, 0);
    uint8_t *last = gdaki_q_slot_ptr(q, s + 1);
    gdaki_wqe_write_inline(last, (uint16_t)(s + 1), q->qpn, (uint8_t)MLX5_WQE_CTRL_CQ_UPDATE, mg.addr, mg.rkey,
                           &want, 8);
    EXPECT_EQ_INT(0, gdaki_q_ring(q, s, 2, gdaki_q_db_value(last)));
    EXPECT_EQ_INT(0, gdaki_q_quiet(q));
    EXPECT_EQ_U64(1, engine_posts(p) - before);
    EXPECT_EQ_U64(s + 2, q->done);
    EXPECT_MEMEQ(src, dst, sizeof(src));
    EXPECT_EQ_U64(want, sig[0]);
    gdaki_pair_close(p);
}

/* A bad WQE in the middle of a doorbell's WQEs: the ones before it are
 * posted and complete, it gets the error CQE, nothing after it runs. */
TAP_CASE(test_bad_wqe_inside_one_doorbell_stops_after_the_good_ones)
{
    struct gdaki_pair *p = open_pair(16);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    static uint8_t src[8 * 64], dst[8 * 64];
    fill(src, sizeof(src), 24);
    memset(dst, 0, sizeof(dst));
    struct gdaki_mr ms, md;
    reg(p, src, sizeof(src), &ms);
    reg(p, dst, sizeof(dst), &md);
    /* build the eight, spoil the fifth's opcode, then ring once */
    uint64_t db = 0, slot = build_at_one_doorbell(q, &ms, &md, 8, 64, NULL, NULL, -1, &db);
    ((uint8_t *)gdaki_q_slot_ptr(q, slot + 4))[3] = 0x55;    /* no such mlx5 opcode */
    ring_all(q, slot, 8, db);
    EXPECT_EQ_INT(-1, gdaki_q_quiet(q));
    EXPECT_EQ_U64(GDAKI_ERR_WORD(MLX5_CQE_REQ_ERR, 0, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR),
                  GDAKI_ERR_NO_VENDOR(q->err));
    EXPECT_EQ_U64(4, q->done);
    EXPECT_MEMEQ(src, dst, 4 * 64);
    static const uint8_t zero[4 * 64];
    EXPECT_MEMEQ(zero, dst + 4 * 64, sizeof(zero));
    EXPECT_EQ_INT(IBV_QPS_ERR, gdaki_pair_send_qp_state(p));
    gdaki_pair_close(p);
}

/* The CQEs ci .. ci+n-1 of q's CQ, read from the ring as the NIC wrote
 * them (not consumed: gdaki_q_quiet stops at the first error CQE, these
 * cases look at every one).  Waits for each up to a bound that only a
 * hang reaches. */
static void read_cqes(struct gdaki_qp_dev *q, uint64_t ci, int n, struct gdaki_cqe_view *out)
{
    for (int i = 0; i < n; i++) {
        const struct mlx5_cqe64 *cqe = gdaki_q_cqe(q, ci + (uint64_t)i);
        for (long spins = 0; !gdaki_cqe_is_sw_owned(cqe, ci + (uint64_t)i, q->cq_log); spins++) {
            if (spins > 400000)    /* 20 s at least */
                tap_fail_at(__FILE__, __LINE__, "CQE %d of %d never came", i + 1, n);
            usleep(50);
        }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        gdaki_cqe_parse(cqe, &out[i]);
    }
}

/* One post list of every shape the NIC thread gathers: an inline WRITE,
 * a WRITE of three SGEs that spans two BBs, an ATOMIC_FA, and WRITEs
 * signaled and not.  All reach the engine as one ibv_post_send (304
 * bytes, 5 WQEs); only the signaled ones give a CQE, in WQE order, each
 * naming its WQE; every payload and the atomic's old value land. */
TAP_CASE(test_post_list_of_inline_sge_list_and_atomic_keeps_cqe_order)
{
    struct gdaki_pair *p = open_pair(16);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    static uint8_t src[512];
    static uint64_t dst[64], old[1];
    fill(src, sizeof(src), 25);
    dst[60] = 100;
    struct gdaki_mr ms, md, mo;
    reg(p, src, sizeof(src), &ms);
    reg(p, dst, sizeof(dst), &md);
    reg(p, old, sizeof(old), &mo);
    uint8_t *d = (uint8_t *)dst;
    const uint64_t inl = 0x0102030405060708ull;
    uint64_t before = engine_posts(p), c0 = q->cq_ci;
    uint64_t s = gdaki_q_reserve(q, 6);
    EXPECT_TRUE(s != GDAKI_SLOT_ERROR);
    /* s: inline WRITE of 8 bytes to dst[0], unsignaled */
    gdaki_wqe_write_inline(gdaki_q_slot_ptr(q, s), (uint16_t)s, q->qpn, 0, md.addr, md.rkey, &inl, 8);
    /* s+1, s+2: src 64..127, 192..255, 320..383 to dst bytes 64..255, signaled */
    uint8_t *w = gdaki_q_slot_ptr(q, s + 1), *w2 = gdaki_q_slot_ptr(q, s + 2);
    memset(w2, 0, 64);
    gdaki_set_ctrl((struct mlx5_wqe_ctrl_seg *)w, (uint16_t)(s + 1), MLX5_OPCODE_RDMA_WRITE, 0, q->qpn,
                   5, (uint8_t)MLX5_WQE_CTRL_CQ_UPDATE, 0);
    gdaki_set_raddr((struct mlx5_wqe_raddr_seg *)(w + 16), md.addr + 64, md.rkey);
    gdaki_set_data((struct mlx5_wqe_data_seg *)(w + 32), 64, ms.lkey, ms.addr + 64);
    gdaki_set_data((struct mlx5_wqe_data_seg *)(w + 48), 64, ms.lkey, ms.addr + 192);
    gdaki_set_data((struct mlx5_wqe_data_seg *)w2, 64, ms.lkey, ms.addr + 320);
    /* s+3: ATOMIC_FA of 5 on dst[60], its old value to old[0], signaled */
    struct gdaki_op a = { .laddr = mo.addr, .lkey = mo.lkey, .len = 8, .raddr = md.addr + 480,
                          .rkey = md.rkey, .add = 5 };
    gdaki_q_build(q, s + 3, GDAKI_KIND_ATOMIC_FA, &a, 1);
    /* s+4: src 0..63 to dst bytes 256..319, unsignaled */
    struct gdaki_op w4 = { .laddr = ms.addr, .lkey = ms.lkey, .len = 64, .raddr = md.addr + 256,
                           .rkey = md.rkey };
    gdaki_q_build(q, s + 4, GDAKI_KIND_WRITE, &w4, 0);
    /* s+5: src 448..479 to dst bytes 448..479, signaled */
    struct gdaki_op w5 = { .laddr = ms.addr + 448, .lkey = ms.lkey, .len = 32, .raddr = md.addr + 448,
                           .rkey = md.rkey };
    uint64_t db = gdaki_q_build(q, s + 5, GDAKI_KIND_WRITE, &w5, 1);
    EXPECT_EQ_INT(0, gdaki_q_ring(q, s, 6, db));
    EXPECT_EQ_INT(0, gdaki_q_quiet(q));
    EXPECT_EQ_U64(1, engine_posts(p) - before);
    EXPECT_EQ_U64(s + 6, q->done);
    EXPECT_EQ_U64(3, q->cq_ci - c0);
    struct gdaki_cqe_view v[3];
    read_cqes(q, c0, 3, v);
    const uint16_t want[3] = { (uint16_t)(s + 1), (uint16_t)(s + 3), (uint16_t)(s + 5) };
    for (int i = 0; i < 3; i++) {
        EXPECT_EQ_INT(MLX5_CQE_REQ, v[i].opcode);
        EXPECT_EQ_INT(want[i], v[i].wqe_counter);
    }
    EXPECT_MEMEQ(&inl, d, 8);
    EXPECT_MEMEQ(src + 64, d + 64, 64);
    EXPECT_MEMEQ(src + 192, d + 128, 64);
    EXPECT_MEMEQ(src + 320, d + 192, 64);
    EXPECT_MEMEQ(src, d + 256, 64);
    EXPECT_MEMEQ(src + 448, d + 448, 32);
    EXPECT_EQ_U64(105, dst[60]);
    EXPECT_EQ_U64(100, old[0]);
    gdaki_pair_close(p);
}

/* n WRITEs of 64 bytes at one doorbell; signaled[i] says which ask for a
 * CQE; bad_rkey >= 0 spoils that one's rkey (build_at_one_doorbell). */
static void post_writes_at_one_doorbell(struct gdaki_qp_dev *q, const struct gdaki_mr *ms,
                                        const struct gdaki_mr *md, int n, const int *signaled,
                                        int bad_rkey)
{
    uint64_t db = 0, slot = build_at_one_doorbell(q, ms, md, n, 64, NULL, signaled, bad_rkey, &db);
    ring_all(q, slot, n, db);
}

/* The QP goes to ERR (the application's ibv_modify_qp) before the WQEs'
 * doorbell: the NIC thread has not seen the error, gathers them as one
 * list, and the engine takes it and flushes it.  Every WQE, signaled or
 * not, gets its flush CQE, in WQE order, and nothing lands. */
TAP_CASE(test_post_list_into_a_qp_in_error_flushes_every_wqe_in_order)
{
    struct gdaki_pair *p = open_pair(16);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    static uint8_t src[5 * 64], dst[5 * 64];
    static const uint8_t zero[5 * 64];
    fill(src, sizeof(src), 26);
    struct gdaki_mr ms, md;
    reg(p, src, sizeof(src), &ms);
    reg(p, dst, sizeof(dst), &md);
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
    EXPECT_EQ_INT(0, p->v->modify_qp(p->sqp, &a, IBV_QP_STATE));
    uint64_t before = engine_posts(p);
    const int signaled[5] = { 1, 0, 1, 0, 1 };
    post_writes_at_one_doorbell(q, &ms, &md, 5, signaled, -1);
    struct gdaki_cqe_view v[5];
    read_cqes(q, 0, 5, v);
    for (int i = 0; i < 5; i++) {
        EXPECT_EQ_INT(MLX5_CQE_REQ_ERR, v[i].opcode);
        EXPECT_EQ_INT(MLX5_CQE_SYNDROME_WR_FLUSH_ERR, v[i].syndrome);
        EXPECT_EQ_INT(i, v[i].wqe_counter);
    }
    EXPECT_EQ_U64(1, engine_posts(p) - before);
    EXPECT_MEMEQ(zero, dst, sizeof(dst));
    gdaki_pair_close(p);
}

/* A WQE the responder refuses (a bad rkey) third in a list of six: the
 * two before it complete, it gets its remote access error CQE, the three
 * after it (unsignaled ones included) flush, each CQE in WQE order, and
 * nothing after it lands. */
TAP_CASE(test_remote_error_inside_a_post_list_flushes_the_wqes_after_it)
{
    struct gdaki_pair *p = open_pair(16);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    static uint8_t src[6 * 64], dst[6 * 64];
    static const uint8_t zero[4 * 64];
    fill(src, sizeof(src), 27);
    struct gdaki_mr ms, md;
    reg(p, src, sizeof(src), &ms);
    reg(p, dst, sizeof(dst), &md);
    uint64_t before = engine_posts(p);
    const int signaled[6] = { 1, 1, 1, 0, 1, 0 };
    post_writes_at_one_doorbell(q, &ms, &md, 6, signaled, 2);
    struct gdaki_cqe_view v[6];
    read_cqes(q, 0, 6, v);
    for (int i = 0; i < 6; i++) {
        EXPECT_EQ_INT(i, v[i].wqe_counter);
        EXPECT_EQ_INT(i < 2 ? MLX5_CQE_REQ : MLX5_CQE_REQ_ERR, v[i].opcode);
    }
    EXPECT_EQ_INT(MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, v[2].syndrome);
    for (int i = 3; i < 6; i++)
        EXPECT_EQ_INT(MLX5_CQE_SYNDROME_WR_FLUSH_ERR, v[i].syndrome);
    EXPECT_EQ_U64(1, engine_posts(p) - before);
    EXPECT_MEMEQ(src, dst, 2 * 64);
    EXPECT_MEMEQ(zero, dst + 2 * 64, sizeof(zero));
    EXPECT_EQ_INT(IBV_QPS_ERR, gdaki_pair_send_qp_state(p));
    gdaki_pair_close(p);
}

/* ---- the polls of a GPU-driven QP's completer and its peer's responder ---- */

/* softnic_ctl_ack_polls of the pair's softnic (its layout, as
 * softnic_ctl.h states it). */
struct ack_polls {
    uint32_t us;
    uint64_t completer_asked, completer_polls, completer_found;
    uint64_t responder_asked, responder_polls, responder_found;
    uint64_t responder_conns;
};

static void ack_polls(struct gdaki_pair *p, struct ack_polls *out)
{
    int (*fn)(struct ack_polls *) = NULL;
    *(void **)&fn = softnic_sym(p, "softnic_ctl_ack_polls");
    if (!fn)
        tap_fail_at(__FILE__, __LINE__, "softnic_ctl_ack_polls not found in the pair's libibverbs");
    EXPECT_EQ_INT(0, fn(out));
}

/* 200 writes one at a time on the dv QP (as a kernel's put + quiet loop
 * posts them), SOFTNIC_ACK_POLL_US set to poll_us by this case's child
 * before softnic reads its configuration.  With a poll time the completer
 * asks to poll for its ACKs, and the connection's hello has the responder
 * ask to poll for requests.  Which of them polls, and whether a poll sees
 * its ACK or request in time, depends on the host (on two cores spin.c's
 * cap lets one thread poll at a time) and is only reported.  With 0
 * nothing asks.  Every write byte-exact either way. */
static void ack_polls_when_asked(const char *poll_us)
{
    setenv("SOFTNIC_ACK_POLL_US", poll_us, 1);
    struct gdaki_pair *p = open_pair(16);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    size_t n = 200 * 64;
    uint8_t *src, *dst;
    struct gdaki_mr ms, md;
    host_bufs(p, n, 23, &src, &dst, &ms, &md);
    struct ack_polls a0, a1;
    ack_polls(p, &a0);
    for (int i = 0; i < 200; i++) {
        struct gdaki_op op = { .laddr = ms.addr + (uint64_t)i * 64, .lkey = ms.lkey, .len = 64,
                               .raddr = md.addr + (uint64_t)i * 64, .rkey = md.rkey };
        EXPECT_TRUE(gdaki_q_post1(q, GDAKI_KIND_WRITE, &op) != GDAKI_SLOT_ERROR);
        EXPECT_EQ_INT(0, gdaki_q_quiet(q));
    }
    ack_polls(p, &a1);
    tap_diag("SOFTNIC_ACK_POLL_US=%s: %u us in force; over 200 writes the completer asked for %llu polls, "
             "began %llu, %llu saw the ACK; the responder asked for %llu, began %llu, %llu saw the request; "
             "%llu polling connections",
             poll_us, a1.us, (unsigned long long)(a1.completer_asked - a0.completer_asked),
             (unsigned long long)(a1.completer_polls - a0.completer_polls),
             (unsigned long long)(a1.completer_found - a0.completer_found),
             (unsigned long long)(a1.responder_asked - a0.responder_asked),
             (unsigned long long)(a1.responder_polls - a0.responder_polls),
             (unsigned long long)(a1.responder_found - a0.responder_found),
             (unsigned long long)a1.responder_conns);
    EXPECT_EQ_INT(atoi(poll_us), (int)a1.us);
    if (a1.us) {
        EXPECT_TRUE(a1.completer_asked > a0.completer_asked);
        EXPECT_TRUE(a1.responder_asked > a0.responder_asked);
        EXPECT_TRUE(a1.completer_polls + a1.responder_polls > a0.completer_polls + a0.responder_polls);
        EXPECT_EQ_U64(1, a1.responder_conns);   /* the pair's one connection */
    } else {
        EXPECT_EQ_U64(a0.completer_asked, a1.completer_asked);
        EXPECT_EQ_U64(a0.responder_asked, a1.responder_asked);
        EXPECT_EQ_U64(0, a1.responder_conns);
    }
    EXPECT_MEMEQ(src, dst, n);
    gdaki_pair_close(p);
    free(src);
    free(dst);
}

TAP_CASE(test_dv_qp_completer_and_responder_poll_when_asked)
{
    ack_polls_when_asked("2000");
}

TAP_CASE(test_dv_qp_threads_never_poll_when_told_not_to)
{
    ack_polls_when_asked("0");
}

/* ---- the CPU-proxy path the benchmark compares against ---- */

TAP_CASE(test_cpu_verbs_loop_on_the_same_port_writes_byte_exact)
{
    struct gdaki_pair *p = open_pair(16);
    size_t n = 64 * 1024;
    uint8_t *src, *dst;
    struct gdaki_mr ms, md;
    host_bufs(p, n, 17, &src, &dst, &ms, &md);
    if (gdaki_pair_cpu_write_loop(p, &ms, &md, n, 50, 8, err, sizeof(err)) != 0)
        tap_fail_at(__FILE__, __LINE__, "cpu loop: %s", err);
    EXPECT_MEMEQ(src, dst, n);
    gdaki_pair_close(p);
    free(src);
    free(dst);
}

int main(int argc, char **argv)
{
    return tap_run(argc, argv);
}
