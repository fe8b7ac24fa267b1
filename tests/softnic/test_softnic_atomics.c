/* tests/softnic/test_softnic_atomics.c: RDMA atomics on softnic's RC QPs
 * (IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_ATOMIC_CMP_AND_SWP): the device
 * attributes, the old value in the local SGE, exact sums and exact CAS
 * outcomes from many QPs and several processes on one word, WRITE-then-
 * atomic ordering on a QP, the statuses of remote and local errors, and
 * the initiator depth (max_rd_atomic) on the wire. */
#include "sntest.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define WAIT_MS 10000
#define ATOMIC_ACCESS (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define MR_ALL (IBV_ACCESS_LOCAL_WRITE | ATOMIC_ACCESS)

static const struct st_qp_opts atomic_opts = { .access = ATOMIC_ACCESS, .max_send_wr = 256 };

static int post_atomic(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, void *res,
                       uint32_t res_len, uint32_t lkey, uint64_t raddr, uint32_t rkey,
                       uint64_t compare_add, uint64_t swap, unsigned int flags)
{
    struct ibv_sge sge = { (uint64_t)(uintptr_t)res, res_len, lkey };
    struct ibv_send_wr wr = {
        .wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op, .send_flags = flags,
        .wr.atomic = { .remote_addr = raddr, .compare_add = compare_add, .swap = swap,
                       .rkey = rkey },
    }, *bad = NULL;
    return ibv_post_send(qp, &wr, &bad);
}

static void fetch_add(struct ibv_qp *qp, uint64_t wr_id, uint64_t *res, uint32_t lkey,
                      uint64_t raddr, uint32_t rkey, uint64_t add)
{
    int rc = post_atomic(qp, IBV_WR_ATOMIC_FETCH_AND_ADD, wr_id, res, 8, lkey, raddr, rkey, add,
                         0, IBV_SEND_SIGNALED);
    if (rc)
        tap_fail_at(__FILE__, __LINE__, "post FETCH_AND_ADD: %s", strerror(rc));
}

static void cmp_swap(struct ibv_qp *qp, uint64_t wr_id, uint64_t *res, uint32_t lkey,
                     uint64_t raddr, uint32_t rkey, uint64_t compare, uint64_t swap)
{
    int rc = post_atomic(qp, IBV_WR_ATOMIC_CMP_AND_SWP, wr_id, res, 8, lkey, raddr, rkey,
                         compare, swap, IBV_SEND_SIGNALED);
    if (rc)
        tap_fail_at(__FILE__, __LINE__, "post CMP_AND_SWP: %s", strerror(rc));
}

static void *zbuf(size_t len)
{
    void *p = st_buf(len, 0);
    memset(p, 0, len);
    return p;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Fetch-and-add of 1s from a start of 0: the old values seen are exactly
 * 0..n-1, each once -- no two atomics saw the same word. */
static void expect_permutation(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_u64);
    for (size_t i = 0; i < n; i++)
        if (v[i] != i)
            tap_fail_at(__FILE__, __LINE__, "old values: [%zu] = %llu, expected %zu", i,
                        (unsigned long long)v[i], i);
}

TAP_CASE(test_device_reports_hca_atomics_and_depths)
{
    struct st_dev d;
    st_dev_open(&d);
    struct ibv_device_attr a;
    EXPECT_EQ_INT(0, ibv_query_device(d.ctx, &a));
    EXPECT_EQ_INT(IBV_ATOMIC_HCA, a.atomic_cap);
    EXPECT_EQ_INT(16, a.max_qp_rd_atom);
    EXPECT_EQ_INT(16, a.max_qp_init_rd_atom);
    EXPECT_TRUE(a.max_res_rd_atom >= a.max_qp_rd_atom);
    struct ibv_device_attr_ex ax;
    EXPECT_EQ_INT(0, ibv_query_device_ex(d.ctx, NULL, &ax));
    EXPECT_EQ_INT(IBV_ATOMIC_HCA, ax.orig_attr.atomic_cap);
    EXPECT_EQ_INT(16, ax.orig_attr.max_qp_init_rd_atom);
    st_dev_close(&d);
}

TAP_CASE(test_fetch_add_and_cmp_swap_return_the_old_value_in_the_sge)
{
    struct st_dev d;
    struct st_qp a, b;
    st_dev_open(&d);
    st_qp_pair(&d, &a, &b, &atomic_opts);
    uint64_t *target = zbuf(4096), *res = zbuf(4096);
    struct ibv_mr *tmr = ibv_reg_mr(d.pd, target, 4096, MR_ALL);
    struct ibv_mr *rmr = ibv_reg_mr(d.pd, res, 4096, IBV_ACCESS_LOCAL_WRITE);
    EXPECT_TRUE(tmr && rmr);
    target[3] = 0x1000000000000005ull;
    uint64_t raddr = (uintptr_t)&target[3];
    struct ibv_wc wc;

    fetch_add(a.qp, 1, &res[0], rmr->lkey, raddr, tmr->rkey, 0x10);
    st_wait_wc(a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, 1);
    EXPECT_EQ_INT(8, wc.byte_len);
    EXPECT_EQ_U64(0x1000000000000005ull, res[0]);
    EXPECT_EQ_U64(0x1000000000000015ull, target[3]);

    /* the add wraps at 64 bits */
    fetch_add(a.qp, 2, &res[1], rmr->lkey, raddr, tmr->rkey, 0xf000000000000000ull);
    st_wait_wc(a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, 2);
    EXPECT_EQ_U64(0x1000000000000015ull, res[1]);
    EXPECT_EQ_U64(0x0000000000000015ull, target[3]);

    /* CAS that matches: swaps, returns the compared value */
    cmp_swap(a.qp, 3, &res[2], rmr->lkey, raddr, tmr->rkey, 0x15, 0xabcdef);
    st_wait_wc(a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, 3);
    EXPECT_EQ_INT(8, wc.byte_len);
    EXPECT_EQ_U64(0x15, res[2]);
    EXPECT_EQ_U64(0xabcdef, target[3]);

    /* CAS that does not match: leaves the word, returns what is there */
    cmp_swap(a.qp, 4, &res[3], rmr->lkey, raddr, tmr->rkey, 0x15, 0x77);
    st_wait_wc(a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, 4);
    EXPECT_EQ_U64(0xabcdef, res[3]);
    EXPECT_EQ_U64(0xabcdef, target[3]);
    /* the neighbours are untouched */
    EXPECT_EQ_U64(0, target[2]);
    EXPECT_EQ_U64(0, target[4]);

    /* an SGE longer than 8 bytes gets 8 (mlx5 writes its data segment
     * with a byte count of 8): the bytes after stay as they were */
    memset(&res[8], 0x5a, 32);
    EXPECT_EQ_INT(0, post_atomic(a.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 5, &res[8], 32, rmr->lkey,
                                 raddr, tmr->rkey, 1, 0, IBV_SEND_SIGNALED));
    st_wait_wc(a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, 5);
    EXPECT_EQ_U64(0xabcdef, res[8]);
    EXPECT_EQ_U64(0x5a5a5a5a5a5a5a5aull, res[9]);
    EXPECT_EQ_U64(0xabcdf0, target[3]);

    /* unsignaled atomics complete silently; a signaled one after them
     * sees all of them */
    for (int i = 0; i < 10; i++)
        EXPECT_EQ_INT(0, post_atomic(a.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 100 + (uint64_t)i,
                                     &res[16 + i], 8, rmr->lkey, raddr, tmr->rkey, 2, 0, 0));
    fetch_add(a.qp, 6, &res[30], rmr->lkey, raddr, tmr->rkey, 0);
    st_wait_wc(a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, 6);
    EXPECT_EQ_U64(0xabcdf0 + 20, res[30]);
    for (int i = 0; i < 10; i++)
        EXPECT_EQ_U64(0xabcdf0 + 2 * (uint64_t)i, res[16 + i]);
    EXPECT_TRUE(st_no_wc(a.scq, 50));

    ibv_dereg_mr(tmr);
    ibv_dereg_mr(rmr);
    st_qp_destroy(&a);
    st_qp_destroy(&b);
    st_dev_close(&d);
}

#define MANY_QPS 8
#define PER_QP 200

TAP_CASE(test_fetch_add_from_many_qps_sums_exactly)
{
    struct st_dev d;
    st_dev_open(&d);
    struct st_qp a[MANY_QPS], b[MANY_QPS];
    for (int q = 0; q < MANY_QPS; q++)
        st_qp_pair(&d, &a[q], &b[q], &atomic_opts);
    uint64_t *target = zbuf(4096);
    uint64_t *res = zbuf(MANY_QPS * PER_QP * 8);
    struct ibv_mr *tmr = ibv_reg_mr(d.pd, target, 4096, MR_ALL);
    struct ibv_mr *rmr = ibv_reg_mr(d.pd, res, MANY_QPS * PER_QP * 8, IBV_ACCESS_LOCAL_WRITE);
    EXPECT_TRUE(tmr && rmr);
    uint64_t raddr = (uintptr_t)&target[7];
    /* all QPs at once, interleaved, each with more than its initiator
     * depth (4) outstanding */
    for (int i = 0; i < PER_QP; i++)
        for (int q = 0; q < MANY_QPS; q++)
            fetch_add(a[q].qp, (uint64_t)i, &res[q * PER_QP + i], rmr->lkey, raddr, tmr->rkey, 1);
    for (int q = 0; q < MANY_QPS; q++)
        for (int i = 0; i < PER_QP; i++) {
            struct ibv_wc wc;
            st_wait_wc(a[q].scq, &wc, WAIT_MS);
            EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, (uint64_t)i);
        }
    EXPECT_EQ_U64(MANY_QPS * PER_QP, target[7]);
    /* per QP the old values rise (one QP's atomics run in order) */
    for (int q = 0; q < MANY_QPS; q++)
        for (int i = 1; i < PER_QP; i++)
            EXPECT_TRUE(res[q * PER_QP + i] > res[q * PER_QP + i - 1]);
    expect_permutation(res, MANY_QPS * PER_QP);
    ibv_dereg_mr(tmr);
    ibv_dereg_mr(rmr);
    for (int q = 0; q < MANY_QPS; q++) {
        st_qp_destroy(&a[q]);
        st_qp_destroy(&b[q]);
    }
    st_dev_close(&d);
}

TAP_CASE(test_cmp_swap_contenders_have_exactly_one_winner)
{
    struct st_dev d;
    st_dev_open(&d);
    struct st_qp a[MANY_QPS], b[MANY_QPS];
    for (int q = 0; q < MANY_QPS; q++)
        st_qp_pair(&d, &a[q], &b[q], &atomic_opts);
    uint64_t *target = zbuf(4096), *res = zbuf(4096);
    struct ibv_mr *tmr = ibv_reg_mr(d.pd, target, 4096, MR_ALL);
    struct ibv_mr *rmr = ibv_reg_mr(d.pd, res, 4096, IBV_ACCESS_LOCAL_WRITE);
    EXPECT_TRUE(tmr && rmr);
    uint64_t raddr = (uintptr_t)&target[1];
    for (int round = 0; round < 20; round++) {
        target[1] = 0;
        for (int q = 0; q < MANY_QPS; q++)
            cmp_swap(a[q].qp, (uint64_t)round, &res[q], rmr->lkey, raddr, tmr->rkey, 0,
                     (uint64_t)round << 32 | (uint64_t)(q + 1));
        for (int q = 0; q < MANY_QPS; q++) {
            struct ibv_wc wc;
            st_wait_wc(a[q].scq, &wc, WAIT_MS);
            EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, (uint64_t)round);
        }
        int winners = 0, winner = -1;
        for (int q = 0; q < MANY_QPS; q++)
            if (res[q] == 0) {
                winners++;
                winner = q;
            }
        EXPECT_EQ_INT(1, winners);
        uint64_t won = (uint64_t)round << 32 | (uint64_t)(winner + 1);
        EXPECT_EQ_U64(won, target[1]);
        for (int q = 0; q < MANY_QPS; q++)
            if (q != winner)
                EXPECT_EQ_U64(won, res[q]);
    }
    ibv_dereg_mr(tmr);
    ibv_dereg_mr(rmr);
    for (int q = 0; q < MANY_QPS; q++) {
        st_qp_destroy(&a[q]);
        st_qp_destroy(&b[q]);
    }
    st_dev_close(&d);
}

/* ------------------------------------------------------- several processes */
#define PROCS 3
#define PROC_QPS 3
#define PROC_FA 150

/* What the target process tells a peer, and what the peer answers. */
struct proc_hello {
    struct st_qp_info qp[PROC_QPS];
    uint64_t fa_addr, cas_addr;
    uint32_t rkey;
    uint32_t id;
};

struct proc_result {
    uint64_t fa[PROC_QPS * PROC_FA];
    uint64_t cas[PROC_QPS];
};

static void peer_atomics(int fd)
{
    struct st_dev d;
    st_dev_open(&d);
    struct st_qp q[PROC_QPS];
    struct proc_hello h;
    st_xfer_recv(fd, &h, sizeof(h));
    struct st_qp_info mine[PROC_QPS];
    for (int i = 0; i < PROC_QPS; i++) {
        st_qp_create(&d, &q[i], &atomic_opts, 256);
        st_qp_info(&d, &q[i], &mine[i]);
        st_qp_connect(&q[i], &h.qp[i]);
    }
    st_xfer_send(fd, mine, sizeof(mine));
    static struct proc_result r;
    struct ibv_mr *rmr = ibv_reg_mr(d.pd, &r, sizeof(r), IBV_ACCESS_LOCAL_WRITE);
    EXPECT_TRUE(rmr != NULL);
    char go;
    st_xfer_recv(fd, &go, 1);
    /* every process's QPs race on the one word */
    for (int i = 0; i < PROC_FA; i++)
        for (int k = 0; k < PROC_QPS; k++)
            fetch_add(q[k].qp, (uint64_t)i, &r.fa[k * PROC_FA + i], rmr->lkey, h.fa_addr, h.rkey, 1);
    for (int k = 0; k < PROC_QPS; k++)
        cmp_swap(q[k].qp, 999, &r.cas[k], rmr->lkey, h.cas_addr, h.rkey, 0,
                 (uint64_t)h.id << 8 | (uint64_t)(k + 1));
    for (int k = 0; k < PROC_QPS; k++)
        for (int i = 0; i <= PROC_FA; i++) {
            struct ibv_wc wc;
            st_wait_wc(q[k].scq, &wc, WAIT_MS);
            EXPECT_WC(wc, IBV_WC_SUCCESS, i < PROC_FA ? IBV_WC_FETCH_ADD : IBV_WC_COMP_SWAP,
                      i < PROC_FA ? (uint64_t)i : 999);
        }
    st_xfer_send(fd, &r, sizeof(r));
    st_xfer_recv(fd, &go, 1);
    for (int i = 0; i < PROC_QPS; i++)
        st_qp_destroy(&q[i]);
    ibv_dereg_mr(rmr);
    st_dev_close(&d);
}

TAP_CASE(test_atomics_from_several_processes_sum_and_swap_exactly)
{
    int fd[PROCS], pid[PROCS];
    for (int p = 0; p < PROCS; p++)
        pid[p] = st_fork_peer(peer_atomics, &fd[p]);
    struct st_dev d;
    st_dev_open(&d);
    uint64_t *target = zbuf(4096);
    struct ibv_mr *tmr = ibv_reg_mr(d.pd, target, 4096, MR_ALL);
    EXPECT_TRUE(tmr != NULL);
    struct st_qp q[PROCS][PROC_QPS];
    for (int p = 0; p < PROCS; p++) {
        struct proc_hello h = { .fa_addr = (uintptr_t)&target[0], .cas_addr = (uintptr_t)&target[8],
                                .rkey = tmr->rkey, .id = (uint32_t)p + 1 };
        for (int k = 0; k < PROC_QPS; k++) {
            st_qp_create(&d, &q[p][k], &atomic_opts, 16);
            st_qp_info(&d, &q[p][k], &h.qp[k]);
        }
        st_xfer_send(fd[p], &h, sizeof(h));
        struct st_qp_info theirs[PROC_QPS];
        st_xfer_recv(fd[p], theirs, sizeof(theirs));
        for (int k = 0; k < PROC_QPS; k++)
            st_qp_connect(&q[p][k], &theirs[k]);
    }
    char go = 'g';
    for (int p = 0; p < PROCS; p++)
        st_xfer_send(fd[p], &go, 1);
    static struct proc_result r[PROCS];
    static uint64_t all[PROCS * PROC_QPS * PROC_FA];
    for (int p = 0; p < PROCS; p++) {
        st_xfer_recv(fd[p], &r[p], sizeof(r[p]));
        memcpy(&all[p * PROC_QPS * PROC_FA], r[p].fa, sizeof(r[p].fa));
    }
    EXPECT_EQ_U64(PROCS * PROC_QPS * PROC_FA, target[0]);
    expect_permutation(all, PROCS * PROC_QPS * PROC_FA);
    int winners = 0;
    for (int p = 0; p < PROCS; p++)
        for (int k = 0; k < PROC_QPS; k++)
            winners += r[p].cas[k] == 0;
    EXPECT_EQ_INT(1, winners);
    uint64_t won = target[8];
    EXPECT_TRUE(won != 0);
    for (int p = 0; p < PROCS; p++)
        for (int k = 0; k < PROC_QPS; k++) {
            uint64_t mine = (uint64_t)(p + 1) << 8 | (uint64_t)(k + 1);
            EXPECT_EQ_U64(won == mine ? 0 : won, r[p].cas[k]);
        }
    for (int p = 0; p < PROCS; p++) {
        st_xfer_send(fd[p], &go, 1);
        int status;
        EXPECT_EQ_INT(pid[p], waitpid(pid[p], &status, 0));
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        close(fd[p]);
    }
    for (int p = 0; p < PROCS; p++)
        for (int k = 0; k < PROC_QPS; k++)
            st_qp_destroy(&q[p][k]);
    ibv_dereg_mr(tmr);
    st_dev_close(&d);
}

/* ---------------------------------------------------------------- ordering */
TAP_CASE(test_atomic_after_a_large_write_sees_the_written_word)
{
    struct st_dev d;
    struct st_qp a, b;
    st_dev_open(&d);
    st_qp_pair(&d, &a, &b, &atomic_opts);
    size_t len = 4 << 20;
    uint64_t *src = st_buf(len, 0), *dst = st_buf(len, 0), *res = zbuf(4096);
    struct ibv_mr *smr = ibv_reg_mr(d.pd, src, len, 0);
    struct ibv_mr *dmr = ibv_reg_mr(d.pd, dst, len, MR_ALL);
    struct ibv_mr *rmr = ibv_reg_mr(d.pd, res, 4096, IBV_ACCESS_LOCAL_WRITE);
    EXPECT_TRUE(smr && dmr && rmr);
    size_t word = len / 8 - 3;   /* near the end: the last bytes of the WRITE */
    for (int round = 0; round < 8; round++) {
        for (size_t i = 0; i < len / 8; i++)
            src[i] = (uint64_t)round << 40 | i;
        /* unsignaled WRITE of the whole region, then atomics right behind it */
        st_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 1, src, (uint32_t)len, smr->lkey, (uintptr_t)dst,
                     dmr->rkey, 0, 0);
        fetch_add(a.qp, 2, &res[0], rmr->lkey, (uintptr_t)&dst[word], dmr->rkey, 1);
        cmp_swap(a.qp, 3, &res[1], rmr->lkey, (uintptr_t)&dst[1], dmr->rkey,
                 (uint64_t)round << 40 | 1, 42);
        struct ibv_wc wc;
        st_wait_wc(a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, 2);
        st_wait_wc(a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, 3);
        EXPECT_EQ_U64((uint64_t)round << 40 | word, res[0]);
        EXPECT_EQ_U64(((uint64_t)round << 40 | word) + 1, dst[word]);
        EXPECT_EQ_U64((uint64_t)round << 40 | 1, res[1]);
        EXPECT_EQ_U64(42, dst[1]);
        EXPECT_EQ_U64((uint64_t)round << 40 | 2, dst[2]);
    }
    ibv_dereg_mr(smr);
    ibv_dereg_mr(dmr);
    ibv_dereg_mr(rmr);
    st_qp_destroy(&a);
    st_qp_destroy(&b);
    st_dev_close(&d);
}

/* ------------------------------------------------------------------ errors */
/* BAD_MAPPED_ALIGN: an aligned raddr into a zero-based MR that starts 4
 * bytes into a word, so the memory it names is misaligned */
enum bad_target { BAD_MR_ACCESS, BAD_QP_ACCESS, BAD_ALIGN, BAD_BOUNDS, BAD_RKEY, BAD_MAPPED_ALIGN };

/* One atomic against a bad target: the status at the requester, the
 * requester's QP in ERR (later WQEs flush), the word unchanged. */
static void expect_remote_error(enum bad_target bad, enum ibv_wr_opcode op,
                                enum ibv_wc_status want)
{
    struct st_dev d;
    struct st_qp a, b;
    st_dev_open(&d);
    struct st_qp_opts o = atomic_opts;
    if (bad == BAD_QP_ACCESS)
        o.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    st_qp_create(&d, &a, &atomic_opts, 64);
    st_qp_create(&d, &b, &o, 64);
    struct st_qp_info ia, ib;
    st_qp_info(&d, &a, &ia);
    st_qp_info(&d, &b, &ib);
    st_qp_connect(&a, &ib);
    st_qp_connect(&b, &ia);
    uint64_t *target = zbuf(4096), *res = zbuf(4096);
    int access = bad == BAD_MR_ACCESS ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                            IBV_ACCESS_REMOTE_READ
                                      : MR_ALL;
    /* the target MR is 64 bytes in the middle of the page */
    struct ibv_mr *tmr = bad == BAD_MAPPED_ALIGN
                             ? ibv_reg_mr(d.pd, (char *)&target[64] + 4, 64, access | IBV_ACCESS_ZERO_BASED)
                             : ibv_reg_mr(d.pd, &target[64], 64, access);
    struct ibv_mr *rmr = ibv_reg_mr(d.pd, res, 4096, IBV_ACCESS_LOCAL_WRITE);
    EXPECT_TRUE(tmr && rmr);
    for (int i = 0; i < 512; i++)
        target[i] = 7;
    uint64_t raddr = (uintptr_t)&target[66];
    uint32_t rkey = tmr->rkey;
    if (bad == BAD_ALIGN)
        raddr += 4;
    else if (bad == BAD_BOUNDS)
        raddr = (uintptr_t)&target[72];   /* the word right after the MR */
    else if (bad == BAD_RKEY)
        rkey ^= 0x5a5a00;
    else if (bad == BAD_MAPPED_ALIGN)
        raddr = 16;   /* aligned; the word at &target[66] + 4 */
    res[0] = 0x1111;
    EXPECT_EQ_INT(0, post_atomic(a.qp, op, 1, &res[0], 8, rmr->lkey, raddr, rkey, 7, 9,
                                 IBV_SEND_SIGNALED));
    EXPECT_EQ_INT(0, post_atomic(a.qp, op, 2, &res[1], 8, rmr->lkey, (uintptr_t)&target[66],
                                 tmr->rkey, 7, 9, IBV_SEND_SIGNALED));
    struct ibv_wc wc;
    st_wait_wc(a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, want, -1, 1);
    st_wait_wc(a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_WR_FLUSH_ERR, -1, 2);
    EXPECT_EQ_U64(0x1111, res[0]);
    for (int i = 0; i < 512; i++)
        if (target[i] != 7)
            tap_fail_at(__FILE__, __LINE__, "target[%d] changed to %llu", i,
                        (unsigned long long)target[i]);
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qia;
    EXPECT_EQ_INT(0, ibv_query_qp(a.qp, &qa, IBV_QP_STATE, &qia));
    EXPECT_EQ_INT(IBV_QPS_ERR, qa.qp_state);
    ibv_dereg_mr(tmr);
    ibv_dereg_mr(rmr);
    st_qp_destroy(&a);
    st_qp_destroy(&b);
    st_dev_close(&d);
}

TAP_CASE(test_target_mr_without_remote_atomic_gives_remote_access_error)
{
    expect_remote_error(BAD_MR_ACCESS, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WC_REM_ACCESS_ERR);
}

TAP_CASE(test_target_qp_without_remote_atomic_gives_remote_access_error)
{
    expect_remote_error(BAD_QP_ACCESS, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WC_REM_ACCESS_ERR);
}

TAP_CASE(test_misaligned_target_gives_remote_invalid_request)
{
    expect_remote_error(BAD_ALIGN, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WC_REM_INV_REQ_ERR);
}

TAP_CASE(test_aligned_address_mapping_to_a_misaligned_word_gives_remote_invalid_request)
{
    expect_remote_error(BAD_MAPPED_ALIGN, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WC_REM_INV_REQ_ERR);
}

TAP_CASE(test_target_past_the_mr_gives_remote_access_error)
{
    expect_remote_error(BAD_BOUNDS, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WC_REM_ACCESS_ERR);
}

TAP_CASE(test_bad_rkey_gives_remote_access_error)
{
    expect_remote_error(BAD_RKEY, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WC_REM_ACCESS_ERR);
}

TAP_CASE(test_bad_local_sge_is_refused_or_fails_locally)
{
    struct st_dev d;
    struct st_qp a, b;
    st_dev_open(&d);
    st_qp_pair(&d, &a, &b, &atomic_opts);
    uint64_t *target = zbuf(4096), *res = zbuf(4096);
    struct ibv_mr *tmr = ibv_reg_mr(d.pd, target, 4096, MR_ALL);
    struct ibv_mr *rmr = ibv_reg_mr(d.pd, res, 4096, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr *romr = ibv_reg_mr(d.pd, &res[256], 64, 0);   /* not writable */
    EXPECT_TRUE(tmr && rmr && romr);
    uint64_t raddr = (uintptr_t)target;
    /* refused by ibv_post_send: an SGE shorter than 8 bytes, none, two,
     * inline */
    EXPECT_EQ_INT(EINVAL, post_atomic(a.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 1, res, 4, rmr->lkey,
                                      raddr, tmr->rkey, 1, 0, IBV_SEND_SIGNALED));
    struct ibv_sge sg[2] = { { (uintptr_t)res, 8, rmr->lkey }, { (uintptr_t)&res[1], 8, rmr->lkey } };
    struct ibv_send_wr wr = {
        .wr_id = 2, .sg_list = sg, .num_sge = 0, .opcode = IBV_WR_ATOMIC_CMP_AND_SWP,
        .send_flags = IBV_SEND_SIGNALED,
        .wr.atomic = { .remote_addr = raddr, .compare_add = 0, .swap = 1, .rkey = tmr->rkey },
    }, *bad = NULL;
    EXPECT_EQ_INT(EINVAL, ibv_post_send(a.qp, &wr, &bad));
    EXPECT_TRUE(bad == &wr);
    wr.num_sge = 2;
    EXPECT_EQ_INT(EINVAL, ibv_post_send(a.qp, &wr, &bad));
    wr.num_sge = 1;
    wr.send_flags |= IBV_SEND_INLINE;
    EXPECT_EQ_INT(EINVAL, ibv_post_send(a.qp, &wr, &bad));
    EXPECT_TRUE(st_no_wc(a.scq, 20));
    EXPECT_EQ_U64(0, target[0]);
    /* an lkey of a region the NIC may not write: local protection error,
     * and the atomic is not executed */
    EXPECT_EQ_INT(0, post_atomic(a.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 3, &res[256], 8, romr->lkey,
                                 raddr, tmr->rkey, 1, 0, IBV_SEND_SIGNALED));
    struct ibv_wc wc;
    st_wait_wc(a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_LOC_PROT_ERR, -1, 3);
    EXPECT_EQ_U64(0, target[0]);
    ibv_dereg_mr(tmr);
    ibv_dereg_mr(rmr);
    ibv_dereg_mr(romr);
    st_qp_destroy(&a);
    st_qp_destroy(&b);
    st_dev_close(&d);
}

TAP_CASE(test_initiator_depth_one_still_runs_a_long_atomic_queue)
{
    struct st_dev d;
    struct st_qp a, b;
    st_dev_open(&d);
    st_qp_create(&d, &a, &atomic_opts, 256);
    st_qp_create(&d, &b, &atomic_opts, 256);
    struct st_qp_info ia, ib;
    st_qp_info(&d, &a, &ia);
    st_qp_info(&d, &b, &ib);
    st_qp_connect(&b, &ia);
    /* a: to RTR as usual, then RTS with an initiator depth of 1 (and a
     * refused 17, above max_qp_init_rd_atom) */
    struct ibv_qp_attr qa = { .qp_state = IBV_QPS_INIT, .port_num = 1,
                              .qp_access_flags = ATOMIC_ACCESS };
    EXPECT_EQ_INT(0, ibv_modify_qp(a.qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                                  IBV_QP_ACCESS_FLAGS));
    memset(&qa, 0, sizeof(qa));
    qa.qp_state = IBV_QPS_RTR;
    qa.path_mtu = IBV_MTU_4096;
    qa.dest_qp_num = ib.qpn;
    qa.max_dest_rd_atomic = 1;
    qa.min_rnr_timer = 1;
    qa.ah_attr.is_global = 1;
    qa.ah_attr.grh.dgid = ib.gid;
    qa.ah_attr.grh.hop_limit = 1;
    qa.ah_attr.port_num = 1;
    EXPECT_EQ_INT(0, ibv_modify_qp(a.qp, &qa, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                                  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER));
    memset(&qa, 0, sizeof(qa));
    qa.qp_state = IBV_QPS_RTS;
    qa.timeout = 14;
    qa.retry_cnt = 7;
    qa.rnr_retry = 7;
    qa.max_rd_atomic = 17;
    int rts_mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                   IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
    EXPECT_EQ_INT(EINVAL, ibv_modify_qp(a.qp, &qa, rts_mask));
    qa.max_rd_atomic = 1;
    EXPECT_EQ_INT(0, ibv_modify_qp(a.qp, &qa, rts_mask));
    struct ibv_qp_init_attr qia;
    EXPECT_EQ_INT(0, ibv_query_qp(a.qp, &qa, IBV_QP_MAX_QP_RD_ATOMIC, &qia));
    EXPECT_EQ_INT(1, qa.max_rd_atomic);
    uint64_t *target = zbuf(4096), *res = zbuf(4096);
    struct ibv_mr *tmr = ibv_reg_mr(d.pd, target, 4096, MR_ALL);
    struct ibv_mr *rmr = ibv_reg_mr(d.pd, res, 4096, IBV_ACCESS_LOCAL_WRITE);
    EXPECT_TRUE(tmr && rmr);
    /* atomics, READs and WRITEs mixed: in order, one READ/atomic at a time */
    for (int i = 0; i < 100; i++) {
        if (i % 3 == 2)
            st_post_rdma(a.qp, IBV_WR_RDMA_READ, (uint64_t)i, &res[i], 8, rmr->lkey,
                         (uintptr_t)&target[0], tmr->rkey, 0, IBV_SEND_SIGNALED);
        else
            fetch_add(a.qp, (uint64_t)i, &res[i], rmr->lkey, (uintptr_t)&target[0], tmr->rkey, 1);
    }
    for (int i = 0; i < 100; i++) {
        struct ibv_wc wc;
        st_wait_wc(a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, i % 3 == 2 ? IBV_WC_RDMA_READ : IBV_WC_FETCH_ADD, (uint64_t)i);
    }
    uint64_t adds = 0;
    for (int i = 0; i < 100; i++) {
        EXPECT_EQ_U64(adds, res[i]);   /* a READ sees the adds before it */
        adds += i % 3 != 2;
    }
    EXPECT_EQ_U64(adds, target[0]);
    ibv_dereg_mr(tmr);
    ibv_dereg_mr(rmr);
    st_qp_destroy(&a);
    st_qp_destroy(&b);
    st_dev_close(&d);
}

/* The initiator depth holds: with one second of added latency on the
 * port, a QP of max_rd_atomic 4 has exactly 4 of its 6 atomics on the wire
 * until the first response is back (a response cannot come before the
 * latency has passed, however slow the host; a host so slow that the check
 * itself comes late skips rather than guesses). */
TAP_CASE(test_no_more_atomics_on_the_wire_than_max_rd_atomic)
{
    const struct st_ctl *ctl = st_ctl();
    if (!ctl->port_set_latency || !ctl->qp_counters)
        TAP_SKIP("softnic_ctl.h API not found");
    struct st_dev d;
    struct st_qp a, b;
    st_dev_open(&d);
    /* max_rd_atomic 4 (sntest.c); a transport timeout (18: 1 s a try, up
     * to SOFTNIC_RETRY_CAP_MS in all) longer than the latency */
    struct st_qp_opts o = atomic_opts;
    o.timeout = 18;
    st_qp_pair(&d, &a, &b, &o);
    uint64_t *target = zbuf(4096), *res = zbuf(4096);
    struct ibv_mr *tmr = ibv_reg_mr(d.pd, target, 4096, MR_ALL);
    struct ibv_mr *rmr = ibv_reg_mr(d.pd, res, 4096, IBV_ACCESS_LOCAL_WRITE);
    EXPECT_TRUE(tmr && rmr);
    EXPECT_EQ_INT(0, ctl->port_set_latency(d.ctx, 1, 1000000));
    uint64_t t0 = st_now_ms();
    for (int i = 0; i < 6; i++)
        fetch_add(a.qp, (uint64_t)i, &res[i], rmr->lkey, (uintptr_t)target, tmr->rkey, 1);
    struct softnic_ctl_counters c;
    do {
        EXPECT_EQ_INT(0, ctl->qp_counters(a.qp, &c));
        usleep(1000);
    } while (c.tx_packets < 4 && st_now_ms() - t0 < 400);
    usleep(100000);   /* room for a wrong fifth to leave */
    EXPECT_EQ_INT(0, ctl->qp_counters(a.qp, &c));
    uint64_t seen = c.tx_packets, late = st_now_ms() - t0;
    if (late >= 800) {
        ctl->port_set_latency(d.ctx, 1, 0);
        TAP_SKIP("host too slow to look inside the latency window");
    }
    EXPECT_EQ_U64(4, seen);
    for (int i = 0; i < 6; i++) {
        struct ibv_wc wc;
        st_wait_wc(a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, (uint64_t)i);
        EXPECT_EQ_U64((uint64_t)i, res[i]);
    }
    EXPECT_EQ_U64(6, target[0]);
    EXPECT_EQ_INT(0, ctl->qp_counters(a.qp, &c));
    EXPECT_EQ_U64(6, c.tx_packets);
    EXPECT_EQ_INT(0, ctl->port_set_latency(d.ctx, 1, 0));
    ibv_dereg_mr(tmr);
    ibv_dereg_mr(rmr);
    st_qp_destroy(&a);
    st_qp_destroy(&b);
    st_dev_close(&d);
}

int main(int argc, char **argv) { return sntest_main(argc, argv); }
