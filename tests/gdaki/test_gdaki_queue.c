/* tests/gdaki/test_gdaki_queue.c: the multi-poster protocol of
 * gdaki_queue.h (slot reservation, in-order doorbell, ring wrap, CQ polling
 * by owner bit, quiet, signals, error completions), compiled for the CPU
 * and driven by CPU threads against tests/gdaki/fake_nic.c. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_nic.h"
#include "tap.h"

_Static_assert(offsetof(struct gdaki_qp_dev, resv) == 128, "resv on its own line");
_Static_assert(offsetof(struct gdaki_qp_dev, ready) == 256, "ready on its own line");
_Static_assert(offsetof(struct gdaki_qp_dev, done) == 384, "done on its own line");

TAP_CASE(test_counter_extension_across_16bit_wrap)
{
    EXPECT_EQ_U64(0x10005, gdaki_q_extend_counter(0xfff0, 0x0005));
    EXPECT_EQ_U64(0x100000003ull, gdaki_q_extend_counter(0x100000003ull, 0x0003));
    EXPECT_EQ_U64(0x1fffe, gdaki_q_extend_counter(0x1ff00, 0xfffe));
    EXPECT_EQ_U64(0x20001, gdaki_q_extend_counter(0x1ff00, 0x0001));
}

TAP_CASE(test_slot_pointer_wraps_modulo_ring)
{
    static uint8_t ring[16 * 64];
    struct gdaki_qp_dev q = { .sq = ring, .sq_log = 4 };
    EXPECT_TRUE(gdaki_q_slot_ptr(&q, 0) == ring);
    EXPECT_TRUE(gdaki_q_slot_ptr(&q, 15) == ring + 15 * 64);
    EXPECT_TRUE(gdaki_q_slot_ptr(&q, 16) == ring);
    EXPECT_TRUE(gdaki_q_slot_ptr(&q, 0x10011) == ring + 64);
}

TAP_CASE(test_doorbell_value_is_first_ctrl_qword_in_memory_order)
{
    _Alignas(64) uint8_t w[64];
    struct gdaki_op op = { 0 };
    gdaki_wqe_rdma(w, MLX5_OPCODE_RDMA_WRITE, 0x0102, 0x030405, 0, &op);
    uint64_t v = gdaki_q_db_value(w);
    uint8_t bytes[8];
    memcpy(bytes, &v, 8);
    static const uint8_t expect[8] = { 0x00, 0x01, 0x02, 0x08, 0x03, 0x04, 0x05, 0x03 };
    EXPECT_MEMEQ(expect, bytes, 8);
}

TAP_CASE(test_group_larger_than_the_window_is_refused_without_reserving)
{
    /* 32 slots but 8 CQEs: at most 8 may be outstanding. */
    struct gdaki_qp_dev q = { .sq_log = 5, .cq_log = 3 };
    EXPECT_EQ_U64(8, gdaki_q_window(&q));
    EXPECT_EQ_U64(GDAKI_SLOT_ERROR, gdaki_q_reserve(&q, 9));
    EXPECT_EQ_U64(GDAKI_SLOT_ERROR, gdaki_q_reserve(&q, 0));
    EXPECT_EQ_U64(0, q.resv);
    EXPECT_EQ_U64(0, gdaki_q_reserve(&q, 8));   /* an empty ring has room for 8 */
    EXPECT_EQ_U64(8, q.resv);
}

/* How many BBs an op's WQE takes: several only for an inline WRITE or
 * WRITE_IMM past 28 bytes; a signaled one only with a span table, where
 * the poller can learn its size; never more than the window. */
TAP_CASE(test_op_takes_several_bbs_only_inline_and_where_its_cqe_can_be_read)
{
    uint8_t span[32] = { 0 };
    struct gdaki_qp_dev q = { .sq_log = 5, .cq_log = 5, .span = span };
    struct gdaki_op op = { .len = 100, .flags = GDAKI_OP_INLINE };
    EXPECT_EQ_INT(3, gdaki_q_op_bbs(&q, GDAKI_KIND_WRITE, &op, 1));
    EXPECT_EQ_INT(3, gdaki_q_op_bbs(&q, GDAKI_KIND_WRITE_IMM, &op, 0));
    EXPECT_EQ_INT(1, gdaki_q_op_bbs(&q, GDAKI_KIND_ATOMIC_FA, &op, 1));
    op.len = GDAKI_INLINE_MAX + 1;
    EXPECT_EQ_INT(1, gdaki_q_op_bbs(&q, GDAKI_KIND_WRITE, &op, 1));   /* by pointer */
    op.len = 28;
    EXPECT_EQ_INT(1, gdaki_q_op_bbs(&q, GDAKI_KIND_WRITE, &op, 1));
    op.len = 100;
    op.flags = 0;
    EXPECT_EQ_INT(1, gdaki_q_op_bbs(&q, GDAKI_KIND_WRITE, &op, 1));
    op.flags = GDAKI_OP_INLINE;
    q.span = NULL;
    EXPECT_EQ_INT(1, gdaki_q_op_bbs(&q, GDAKI_KIND_WRITE, &op, 1));
    EXPECT_EQ_INT(3, gdaki_q_op_bbs(&q, GDAKI_KIND_WRITE, &op, 0));  /* unsignaled: no CQE to read */
    q.span = span;
    op.len = 220;                                                      /* 4 BBs */
    q.cq_log = 3;                                                      /* a window of 8 */
    EXPECT_EQ_INT(4, gdaki_q_op_bbs(&q, GDAKI_KIND_WRITE, &op, 1));
    q.cq_log = 2;                                  /* 4: no room for its signal behind it */
    EXPECT_EQ_INT(1, gdaki_q_op_bbs(&q, GDAKI_KIND_WRITE, &op, 1));
    op.len = GDAKI_INLINE_MAX;                                         /* 16 BBs */
    q.cq_log = 5;
    EXPECT_EQ_INT(16, gdaki_q_op_bbs(&q, GDAKI_KIND_WRITE, &op, 1));
    q.cq_log = 4;                                  /* 16: no room for its signal behind it */
    EXPECT_EQ_INT(1, gdaki_q_op_bbs(&q, GDAKI_KIND_WRITE, &op, 1));
    q.cq_log = 1;                                                      /* a window of 2 */
    op.len = 100;
    EXPECT_EQ_INT(1, gdaki_q_op_bbs(&q, GDAKI_KIND_WRITE, &op, 1));
    /* a device whose largest send WQE is 512 bytes (max_wqe_sz_sq): 32 units */
    q.cq_log = 5;
    q.max_wqe_ds = 32;                                                 /* 512 bytes */
    op.len = 476;                                                      /* 8 BBs: fits */
    EXPECT_EQ_INT(8, gdaki_q_op_bbs(&q, GDAKI_KIND_WRITE, &op, 1));
    op.len = 477;                                                      /* 9: by pointer */
    EXPECT_EQ_INT(1, gdaki_q_op_bbs(&q, GDAKI_KIND_WRITE, &op, 1));
    op.len = GDAKI_INLINE_MAX;
    EXPECT_EQ_INT(1, gdaki_q_op_bbs(&q, GDAKI_KIND_WRITE, &op, 0));
}

/* The inline rule for callers that set GDAKI_OP_INLINE by size: up to
 * GDAKI_INLINE_BUSY_MAX bytes always, longer only while every reserved slot
 * is seen complete; other flags pass through. */
TAP_CASE(test_long_inline_payloads_go_by_pointer_while_writes_are_in_flight)
{
    struct gdaki_qp_dev q = { .sq_log = 6, .cq_log = 6 };
    struct gdaki_op op = { .len = GDAKI_INLINE_BUSY_MAX + 1, .flags = GDAKI_OP_INLINE | 0x8u };
    EXPECT_EQ_INT(GDAKI_OP_INLINE | 0x8u, gdaki_q_inline_flags(&q, &op));    /* idle: inline */
    q.resv = 5;
    q.ready = 5;
    q.done = 4;                                                                 /* one in flight */
    EXPECT_EQ_INT(0x8u, gdaki_q_inline_flags(&q, &op));
    op.len = GDAKI_INLINE_MAX;
    EXPECT_EQ_INT(0x8u, gdaki_q_inline_flags(&q, &op));
    op.len = GDAKI_INLINE_BUSY_MAX;                                             /* 4 BBs: always */
    EXPECT_EQ_INT(GDAKI_OP_INLINE | 0x8u, gdaki_q_inline_flags(&q, &op));
    op.len = GDAKI_INLINE_MAX;
    op.flags = 0x8u;                                                            /* never asked */
    EXPECT_EQ_INT(0x8u, gdaki_q_inline_flags(&q, &op));
    op.flags = GDAKI_OP_INLINE;
    q.done = 5;                                                                 /* idle again */
    EXPECT_EQ_INT(GDAKI_OP_INLINE, gdaki_q_inline_flags(&q, &op));
    EXPECT_EQ_INT(16, gdaki_q_op_bbs(&q, GDAKI_KIND_WRITE, &op, 0));
}

/* ---- posting threads ---- */

struct poster {
    struct fake_nic *nic;
    int id;
    int count;
    size_t max_len;
    uint8_t *src, *dst;  /* count * max_len each */
    int quiet_every;
    int inl;             /* inline ops, every other one a put_signal */
    uint64_t sig;        /* its signal word */
    uint64_t bbs, wqes;  /* what this poster's messages took */
    int rc;
};

static size_t msg_len(int id, int i, size_t max_len)
{
    size_t l = 1 + ((size_t)(id * 7919 + i * 104729) % max_len);
    return l;
}

static void *poster_main(void *arg)
{
    struct poster *p = arg;
    for (int i = 0; i < p->count; i++) {
        size_t off = (size_t)i * p->max_len, len = msg_len(p->id, i, p->max_len);
        struct gdaki_op op = { .laddr = (uintptr_t)(p->src + off), .lkey = FAKE_NIC_KEY,
                               .len = (uint32_t)len, .raddr = (uintptr_t)(p->dst + off),
                               .rkey = FAKE_NIC_KEY, .flags = p->inl ? GDAKI_OP_INLINE : 0 };
        uint64_t t;
        const int with_signal = p->inl && (i & 1);
        /* the data WQE's BBs (one where the window has no room for more) */
        p->bbs += gdaki_q_op_bbs(&p->nic->q, GDAKI_KIND_WRITE, &op, !with_signal);
        if (with_signal) {
            t = gdaki_q_post_signal_set(&p->nic->q, &op, (uintptr_t)&p->sig, FAKE_NIC_KEY, (uint64_t)i);
            p->wqes += 2;
            p->bbs += 1;
        } else {
            t = gdaki_q_post1(&p->nic->q, GDAKI_KIND_WRITE, &op);
            p->wqes += 1;
        }
        if (t == GDAKI_SLOT_ERROR) {
            p->rc = -1;
            return NULL;
        }
        if (p->quiet_every && i % p->quiet_every == p->quiet_every - 1 && gdaki_q_quiet(&p->nic->q) < 0) {
            p->rc = -2;
            return NULL;
        }
        /* every 1000 posts the ring has moved on: a long case (72000
         * WQEs) on a loaded host is slow, not stuck (it once went 120 s
         * without a beat at load ~40 on 2 cores) */
        if (i % 1000 == 999)
            tap_progress();
    }
    p->rc = gdaki_q_quiet(&p->nic->q);
    return NULL;
}

static void run_posters_how(uint32_t sq_log, uint32_t cq_log, int nthreads, int count, size_t max_len,
                            int quiet_every, int inl)
{
    struct fake_nic nic;
    EXPECT_EQ_INT(0, fake_nic_start(&nic, sq_log, cq_log, 0x1234));
    struct poster *ps = calloc((size_t)nthreads, sizeof(*ps));
    pthread_t *th = calloc((size_t)nthreads, sizeof(*th));
    for (int t = 0; t < nthreads; t++) {
        struct poster *p = &ps[t];
        *p = (struct poster){ .nic = &nic, .id = t, .count = count, .max_len = max_len,
                              .quiet_every = quiet_every, .inl = inl };
        p->src = malloc((size_t)count * max_len);
        p->dst = calloc((size_t)count, max_len);
        for (size_t b = 0; b < (size_t)count * max_len; b++)
            p->src[b] = (uint8_t)(b * 31 + (size_t)t * 131 + 7);
        EXPECT_EQ_INT(0, pthread_create(&th[t], NULL, poster_main, p));
    }
    for (int t = 0; t < nthreads; t++)
        pthread_join(th[t], NULL);
    for (uint32_t i = 0; i < (1u << sq_log); i++) /* every span entry consumed */
        EXPECT_EQ_INT(0, nic.span[i]);
    fake_nic_stop(&nic);
    if (nic.violations)
        tap_fail_at(__FILE__, __LINE__, "NIC saw %d protocol violations, first: %s", nic.violations, nic.why);
    for (int t = 0; t < nthreads; t++) {
        EXPECT_EQ_INT(0, ps[t].rc);
        for (int i = 0; i < count; i++) {
            size_t off = (size_t)i * max_len, len = msg_len(t, i, max_len);
            EXPECT_MEMEQ(ps[t].src + off, ps[t].dst + off, len);
            /* Bytes past the message stay untouched. */
            if (len < max_len)
                EXPECT_EQ_INT(0, ps[t].dst[off + len]);
        }
    }
    uint64_t bbs = 0, wqes = 0;
    for (int t = 0; t < nthreads; t++) {
        bbs += ps[t].bbs;
        wqes += ps[t].wqes;
    }
    EXPECT_EQ_U64(bbs, nic.q.resv);
    EXPECT_EQ_U64(bbs, nic.q.ready);
    EXPECT_EQ_U64(bbs, nic.q.done);
    EXPECT_EQ_U64(bbs, nic.executed_bbs);   /* what the NIC found, by each WQE's ds */
    EXPECT_EQ_U64(wqes, nic.executed);
    EXPECT_EQ_INT(0, nic.q.err);
    for (int t = 0; t < nthreads; t++) {
        free(ps[t].src);
        free(ps[t].dst);
    }
    free(ps);
    free(th);
}

static void run_posters(uint32_t sq_log, uint32_t cq_log, int nthreads, int count, size_t max_len,
                        int quiet_every)
{
    run_posters_how(sq_log, cq_log, nthreads, count, max_len, quiet_every, 0);
}

/* Inline puts of 1..972 bytes (1-16 BBs, signaled) and put_signals of them
 * from several threads: the NIC finds every WQE at the slot the counters
 * say, whole, below the doorbell record, with its own idx (a slot
 * overwritten before the NIC read it would show a foreign idx), and the
 * completions free exactly the BBs taken. */
TAP_CASE(test_concurrent_posters_of_inline_wqes_of_several_bbs)
{
    run_posters_how(5, 5, 4, 3000, GDAKI_INLINE_MAX, 0, 1);
}

TAP_CASE(test_inline_posters_with_interleaved_quiets_on_a_small_ring)
{
    /* a window of 8 BBs: puts of up to 7 BBs (412 bytes) go inline, longer
     * ones by pointer */
    run_posters_how(3, 3, 3, 600, GDAKI_INLINE_MAX, 5, 1);
}

TAP_CASE(test_single_poster_writes_arrive_across_ring_wraps)
{
    run_posters(3, 3, 1, 200, 64, 0); /* 8 slots, 25 passes over the ring */
}

TAP_CASE(test_concurrent_posters_wrap_ring_byte_exact)
{
    run_posters(4, 4, 4, 400, 96, 0);
}

TAP_CASE(test_concurrent_posters_with_interleaved_quiets)
{
    run_posters(4, 4, 3, 300, 32, 7);
}

TAP_CASE(test_many_posters_beyond_16bit_wqe_index)
{
    run_posters(5, 5, 8, 9000, 8, 0); /* 72000 WQEs: the 16-bit idx wraps */
}

TAP_CASE(test_cq_smaller_than_ring_never_overruns)
{
    run_posters(5, 3, 4, 500, 16, 0); /* 32 slots, 8 CQEs: posters must poll */
}

/* ---- quiet and ring-full waits ---- */

struct waiter {
    struct fake_nic *nic;
    int rc;
    int finished;
};

static void *quiet_main(void *arg)
{
    struct waiter *w = arg;
    w->rc = gdaki_q_quiet(&w->nic->q);
    __atomic_store_n(&w->finished, 1, __ATOMIC_RELEASE);
    return NULL;
}

static uint64_t words[64];

static struct gdaki_op word_op(int i)
{
    struct gdaki_op op = { .laddr = (uintptr_t)&words[i], .lkey = FAKE_NIC_KEY, .len = 8,
                           .raddr = (uintptr_t)&words[32 + i], .rkey = FAKE_NIC_KEY };
    return op;
}

TAP_CASE(test_quiet_returns_only_after_completion)
{
    struct fake_nic nic;
    EXPECT_EQ_INT(0, fake_nic_start(&nic, 4, 4, 7));
    fake_nic_pause(&nic, 1);
    for (int i = 0; i < 4; i++) {
        words[i] = 100 + (uint64_t)i;
        struct gdaki_op op = word_op(i);
        EXPECT_TRUE(gdaki_q_post1(&nic.q, GDAKI_KIND_WRITE, &op) != GDAKI_SLOT_ERROR);
    }
    struct waiter w = { .nic = &nic };
    pthread_t th;
    EXPECT_EQ_INT(0, pthread_create(&th, NULL, quiet_main, &w));
    usleep(200 * 1000);
    EXPECT_EQ_INT(0, __atomic_load_n(&w.finished, __ATOMIC_ACQUIRE));
    EXPECT_EQ_U64(0, nic.q.done);
    fake_nic_pause(&nic, 0);
    pthread_join(th, NULL);
    EXPECT_EQ_INT(0, w.rc);
    EXPECT_EQ_U64(4, nic.q.done);
    for (int i = 0; i < 4; i++)
        EXPECT_EQ_U64(100 + (uint64_t)i, words[32 + i]);
    fake_nic_stop(&nic);
}

struct one_post {
    struct fake_nic *nic;
    uint64_t ticket;
    int finished;
};

static void *post_main(void *arg)
{
    struct one_post *p = arg;
    struct gdaki_op op = word_op(4);
    p->ticket = gdaki_q_post1(&p->nic->q, GDAKI_KIND_WRITE, &op);
    __atomic_store_n(&p->finished, 1, __ATOMIC_RELEASE);
    return NULL;
}

TAP_CASE(test_full_ring_poster_waits_for_a_completion)
{
    struct fake_nic nic;
    EXPECT_EQ_INT(0, fake_nic_start(&nic, 2, 2, 7)); /* 4 slots */
    fake_nic_pause(&nic, 1);
    for (int i = 0; i < 4; i++) {
        struct gdaki_op op = word_op(i);
        EXPECT_TRUE(gdaki_q_post1(&nic.q, GDAKI_KIND_WRITE, &op) != GDAKI_SLOT_ERROR);
    }
    struct one_post p = { .nic = &nic };
    pthread_t th;
    EXPECT_EQ_INT(0, pthread_create(&th, NULL, post_main, &p));
    usleep(200 * 1000);
    EXPECT_EQ_INT(0, __atomic_load_n(&p.finished, __ATOMIC_ACQUIRE));
    EXPECT_EQ_U64(5, __atomic_load_n(&nic.q.resv, __ATOMIC_ACQUIRE));
    EXPECT_EQ_U64(4, __atomic_load_n(&nic.q.ready, __ATOMIC_ACQUIRE));
    fake_nic_pause(&nic, 0);
    pthread_join(th, NULL);
    EXPECT_EQ_U64(5, p.ticket);
    EXPECT_EQ_INT(0, gdaki_q_quiet(&nic.q));
    fake_nic_stop(&nic);
    EXPECT_EQ_INT(0, nic.violations);
}

/* ---- signals ---- */

#define SIG_MSGS 500
#define SIG_LEN 256

struct sig_ctx {
    struct fake_nic *nic;
    uint8_t *src, *dst;
    uint64_t signal;
    int bad_msg;
};

static void *sig_sender(void *arg)
{
    struct sig_ctx *c = arg;
    for (int i = 0; i < SIG_MSGS; i++) {
        struct gdaki_op op = { .laddr = (uintptr_t)(c->src + (size_t)i * SIG_LEN), .lkey = FAKE_NIC_KEY,
                               .len = SIG_LEN, .raddr = (uintptr_t)(c->dst + (size_t)i * SIG_LEN),
                               .rkey = FAKE_NIC_KEY };
        if (gdaki_q_post_signal(&c->nic->q, &op, (uintptr_t)&c->signal, FAKE_NIC_KEY, 1) == GDAKI_SLOT_ERROR)
            return NULL;
    }
    gdaki_q_quiet(&c->nic->q);
    return NULL;
}

TAP_CASE(test_signal_arrives_after_its_data)
{
    struct fake_nic nic;
    EXPECT_EQ_INT(0, fake_nic_start(&nic, 4, 4, 9));
    struct sig_ctx c = { .nic = &nic, .bad_msg = -1 };
    c.src = malloc((size_t)SIG_MSGS * SIG_LEN);
    c.dst = calloc(SIG_MSGS, SIG_LEN);
    for (size_t b = 0; b < (size_t)SIG_MSGS * SIG_LEN; b++)
        c.src[b] = (uint8_t)(b % 251 + 1);
    pthread_t th;
    EXPECT_EQ_INT(0, pthread_create(&th, NULL, sig_sender, &c));
    /* Receiver: whenever the signal says k messages, messages 0..k-1 are whole. */
    for (uint64_t k = 1; k <= SIG_MSGS; k++) {
        uint64_t seen = gdaki_wait_signal_ge(&c.signal, k);
        for (uint64_t m = k - 1; m < seen; m++)
            if (memcmp(c.src + m * SIG_LEN, c.dst + m * SIG_LEN, SIG_LEN) != 0 && c.bad_msg < 0)
                c.bad_msg = (int)m;
    }
    pthread_join(th, NULL);
    fake_nic_stop(&nic);
    EXPECT_EQ_INT(-1, c.bad_msg);
    EXPECT_EQ_U64(SIG_MSGS, c.signal);
    EXPECT_EQ_U64(2 * SIG_MSGS, nic.executed);
    EXPECT_EQ_INT(0, nic.violations);
    free(c.src);
    free(c.dst);
}

/* ---- errors ---- */

TAP_CASE(test_malformed_wqe_gives_error_completion)
{
    struct fake_nic nic;
    EXPECT_EQ_INT(0, fake_nic_start(&nic, 3, 3, 11));
    struct gdaki_op op = word_op(0);
    EXPECT_TRUE(gdaki_q_post1(&nic.q, GDAKI_KIND_WRITE, &op) != GDAKI_SLOT_ERROR);
    /* A WQE with ds 0, as a buggy kernel might write it. */
    uint64_t slot = gdaki_q_reserve(&nic.q, 1);
    uint8_t *w = gdaki_q_slot_ptr(&nic.q, slot);
    gdaki_wqe_rdma(w, MLX5_OPCODE_RDMA_WRITE, (uint16_t)slot, nic.q.qpn, MLX5_WQE_CTRL_CQ_UPDATE, &op);
    w[7] = 0;
    EXPECT_EQ_INT(0, gdaki_q_ring(&nic.q, slot, 1, gdaki_q_db_value(w)));
    EXPECT_EQ_INT(-1, gdaki_q_quiet(&nic.q));
    uint32_t err = nic.q.err;
    EXPECT_EQ_U64(GDAKI_ERR_WORD(MLX5_CQE_REQ_ERR, 0, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR), err);
    /* The good WQE before it completed. */
    EXPECT_EQ_U64(1, nic.q.done);
    /* Later posts fail instead of hanging. */
    EXPECT_TRUE(gdaki_q_post1(&nic.q, GDAKI_KIND_WRITE, &op) != GDAKI_SLOT_ERROR ||
                nic.q.err != 0);
    EXPECT_EQ_INT(-1, gdaki_q_quiet(&nic.q));
    fake_nic_stop(&nic);
}

TAP_CASE(test_bad_rkey_gives_remote_access_error)
{
    struct fake_nic nic;
    EXPECT_EQ_INT(0, fake_nic_start(&nic, 3, 3, 11));
    struct gdaki_op op = word_op(0);
    op.rkey = 0xbad;
    EXPECT_TRUE(gdaki_q_post1(&nic.q, GDAKI_KIND_WRITE, &op) != GDAKI_SLOT_ERROR);
    EXPECT_EQ_INT(-1, gdaki_q_quiet(&nic.q));
    EXPECT_EQ_U64(GDAKI_ERR_WORD(MLX5_CQE_REQ_ERR, 0, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR), nic.q.err);
    fake_nic_stop(&nic);
}

int main(int argc, char **argv)
{
    return tap_run(argc, argv);
}
