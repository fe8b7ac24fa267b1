/* tests/softnic/test_softnic_engines.c: softnic runs every QP's work --
 * requesters, responders, completers -- on a fixed pool of engine threads
 * (engine.c, SOFTNIC_ENGINES), not on threads of its own: 64 QP pairs move
 * RDMA WRITE, READ, SEND and fetch-and-add, every byte checked, on the
 * process's threads of before plus the engines and a constant; one QP
 * streaming a gigabyte does not hold the others back; QPs destroyed with
 * work in flight (on the wire, paced, placing, waiting for a receive) leave
 * no task behind and the engines working. */
#include "sntest.h"
#include "../proc_self.h"

#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAIRS 64
#define SLOT 4096
#define SMALL 64
/* threads the QPs may add besides the engines: room for a helper of the
 * library (the wire's acceptor runs from the device's opening) */
#define CONSTANT_THREADS 2

#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
                IBV_ACCESS_REMOTE_ATOMIC)

struct side {
    char *mem;           /* [src | dst | recv] slots of each pair, then atomic words */
    struct ibv_mr *mr;
};

static size_t side_len(void)
{
    return (size_t)PAIRS * 3 * SLOT + (size_t)PAIRS * 16;
}
static char *src_of(struct side *s, int i) { return s->mem + (size_t)i * 3 * SLOT; }
static char *dst_of(struct side *s, int i) { return src_of(s, i) + SLOT; }
static char *rcv_of(struct side *s, int i) { return src_of(s, i) + 2 * SLOT; }
static uint64_t *word_of(struct side *s, int i)
{
    return (uint64_t *)(s->mem + (size_t)PAIRS * 3 * SLOT + (size_t)i * 16);
}
static uint64_t *res_of(struct side *s, int i) { return word_of(s, i) + 1; }

static void side_open(struct st_dev *d, struct side *s, unsigned seed)
{
    s->mem = st_buf(side_len(), seed);
    s->mr = ibv_reg_mr(d->pd, s->mem, side_len(), ACCESS);
    EXPECT_TRUE(s->mr != NULL);
}

static void post_atomic_fa(struct ibv_qp *qp, uint64_t wr_id, uint64_t *res, uint32_t lkey,
                           uint64_t *raddr, uint32_t rkey, uint64_t add)
{
    struct ibv_sge sge = { .addr = (uintptr_t)res, .length = 8, .lkey = lkey };
    struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
                              .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
                              .send_flags = IBV_SEND_SIGNALED }, *bad;
    wr.wr.atomic.remote_addr = (uintptr_t)raddr;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = add;
    EXPECT_EQ_INT(0, ibv_post_send(qp, &wr, &bad));
}

/* The thread ids of this process's softnic engines (engine.c names them),
 * at most max of them into tids; how many there are. */
static int engine_tids(pid_t *tids, int max)
{
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    for (struct dirent *e; d && (e = readdir(d));) {
        char path[300], comm[32] = "";
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(comm, sizeof(comm), f) && strncmp(comm, "sn-engine", 9) == 0) {
            if (n < max)
                tids[n] = (pid_t)atoi(e->d_name);
            n++;
        }
        fclose(f);
    }
    if (d)
        closedir(d);
    return n;
}

static int engine_threads(void)
{
    return engine_tids(NULL, 0);
}

/* The CPUs the engine threads of this process may run on, each thread's
 * the same (else the case fails); how many threads in *n. */
static cpu_set_t engine_cpus(int *n)
{
    pid_t tids[64];
    *n = engine_tids(tids, 64);
    cpu_set_t first;
    CPU_ZERO(&first);
    for (int i = 0; i < *n && i < 64; i++) {
        cpu_set_t set;
        EXPECT_EQ_INT(0, sched_getaffinity(tids[i], sizeof(set), &set));
        if (i == 0)
            first = set;
        EXPECT_TRUE(CPU_EQUAL(&first, &set));
    }
    return first;
}

/* One write of len bytes through a pair: the engines have started and
 * worked. */
static void one_write(size_t len)
{
    struct st_write_pair p;
    st_write_pair_open(&p, len);
    st_post_rdma(p.a.qp, IBV_WR_RDMA_WRITE, 1, p.src, (uint32_t)p.len, p.smr->lkey, (uintptr_t)p.dst,
                 p.dmr->rkey, 0, IBV_SEND_SIGNALED);
    struct ibv_wc wc;
    st_wait_wc(p.a.scq, &wc, 20000);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 1);
    EXPECT_MEMEQ(p.src, p.dst, p.len);
    st_write_pair_close(&p);
}

/* The engines' CPUs after a write with SOFTNIC_NIC_CPUS set to cpu (at
 * least one engine there). */
static cpu_set_t engines_with_nic_cpu(int cpu)
{
    char v[16];
    snprintf(v, sizeof(v), "%d", cpu);
    setenv("SOFTNIC_NIC_CPUS", v, 1);
    one_write(1 << 16);
    int n = 0;
    cpu_set_t got = engine_cpus(&n);
    EXPECT_TRUE(n >= 1);
    return got;
}

/* SOFTNIC_NIC_CPUS keeps the engine threads on the CPUs listed (the last
 * this process may use), and only them: the application's threads keep
 * theirs. */
TAP_CASE(test_nic_cpus_keep_the_engines_there_and_only_them)
{
    cpu_set_t mine;
    EXPECT_EQ_INT(0, sched_getaffinity(0, sizeof(mine), &mine));
    int last = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &mine))
            last = c;
    cpu_set_t got = engines_with_nic_cpu(last);
    EXPECT_EQ_INT(1, CPU_COUNT(&got));
    EXPECT_TRUE(CPU_ISSET(last, &got));
    cpu_set_t now;
    EXPECT_EQ_INT(0, sched_getaffinity(0, sizeof(now), &now));
    EXPECT_TRUE(CPU_EQUAL(&mine, &now));
}

/* A list of CPUs this process may not use: the engines stay where the
 * process runs, and work. */
TAP_CASE(test_nic_cpus_outside_the_process_leave_the_engines_where_it_runs)
{
    cpu_set_t mine;
    EXPECT_EQ_INT(0, sched_getaffinity(0, sizeof(mine), &mine));
    int outside = CPU_SETSIZE - 1;
    while (outside > 0 && CPU_ISSET(outside, &mine))
        outside--;
    cpu_set_t got = engines_with_nic_cpu(outside);
    EXPECT_TRUE(CPU_EQUAL(&mine, &got));
}

/* Waits up to ms for the engines' tasks to be down to want. */
static uint32_t tasks_settle(uint32_t want, int ms)
{
    struct softnic_ctl_engines e = { 0 };
    for (int t = 0; t <= ms; t += 10) {
        EXPECT_EQ_INT(0, st_ctl()->engines(&e));
        if (e.tasks <= want)
            break;
        usleep(10000);
    }
    return e.tasks;
}

TAP_CASE(test_64_qp_pairs_move_data_on_a_fixed_number_of_threads)
{
    /* more engines than a small host has CPUs: every role of a QP can run
     * beside the others */
    setenv("SOFTNIC_ENGINES", "4", 1);
    /* many NIC tasks on a host of few cores, loaded by a parallel check:
     * a budget that tells a slow host from a dead peer */
    setenv("SOFTNIC_RETRY_MIN_MS", "20000", 1);
    setenv("SOFTNIC_RETRY_CAP_MS", "30000", 1);
    struct st_dev d;
    st_dev_open(&d);
    int base = proc_self_threads();
    EXPECT_TRUE(base > 0);
    static struct st_qp a[PAIRS], b[PAIRS];
    struct st_qp_opts o = { .max_send_wr = 16, .max_recv_wr = 4, .max_sge = 1, .access = ACCESS };
    for (int i = 0; i < PAIRS; i++)
        st_qp_pair(&d, &a[i], &b[i], &o);
    struct side sa, sb;
    side_open(&d, &sa, 11);
    side_open(&d, &sb, 22);
    for (int i = 0; i < PAIRS; i++) {
        *word_of(&sb, i) = 1000u * (uint64_t)i;
        *res_of(&sa, i) = 0;
        memset(dst_of(&sa, i), 0, SLOT);
        memset(dst_of(&sb, i), 0, SLOT);
        memset(rcv_of(&sb, i), 0, SLOT);
        st_fill(src_of(&sa, i), SLOT, 100 + (unsigned)i);
        st_fill(src_of(&sb, i), SLOT, 300 + (unsigned)i);
    }
    tap_progress();
    /* all at once: every QP has work on the engines together, both ways */
    for (int i = 0; i < PAIRS; i++) {
        st_post_recv(b[i].qp, 1, rcv_of(&sb, i), SLOT, sb.mr->lkey);
        st_post_rdma(a[i].qp, IBV_WR_RDMA_WRITE, 10, src_of(&sa, i), SLOT, sa.mr->lkey,
                     (uintptr_t)dst_of(&sb, i), sb.mr->rkey, 0, IBV_SEND_SIGNALED);
        st_post_rdma(a[i].qp, IBV_WR_RDMA_READ, 11, dst_of(&sa, i), SLOT / 2, sa.mr->lkey,
                     (uintptr_t)src_of(&sb, i), sb.mr->rkey, 0, IBV_SEND_SIGNALED);
        st_post_send(a[i].qp, 12, src_of(&sa, i) + SLOT / 2, SMALL, sa.mr->lkey, IBV_SEND_SIGNALED);
        post_atomic_fa(a[i].qp, 13, res_of(&sa, i), sa.mr->lkey, word_of(&sb, i), sb.mr->rkey,
                       (uint64_t)i + 1);
        st_post_rdma(b[i].qp, IBV_WR_RDMA_WRITE, 20, src_of(&sb, i) + SLOT / 2, SLOT / 2, sb.mr->lkey,
                     (uintptr_t)(dst_of(&sa, i) + SLOT / 2), sa.mr->rkey, 0, IBV_SEND_SIGNALED);
    }
    for (int i = 0; i < PAIRS; i++) {
        struct ibv_wc wc;
        for (uint64_t id = 10; id <= 13; id++) {
            st_wait_wc(a[i].scq, &wc, 20000);
            EXPECT_WC(wc, IBV_WC_SUCCESS, -1, id);
        }
        st_wait_wc(b[i].rcq, &wc, 20000);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 1);
        EXPECT_EQ_INT(SMALL, (int)wc.byte_len);
        st_wait_wc(b[i].scq, &wc, 20000);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 20);
        tap_progress();
    }
    int threads = proc_self_threads();
    struct softnic_ctl_engines e;
    EXPECT_EQ_INT(0, st_ctl()->engines(&e));
    int bound = base + e.engines + CONSTANT_THREADS;
    tap_diag("%d QPs (%d connections): %d threads, %d before them, %d of them engines (%d tasks); at most %d "
             "allowed", 2 * PAIRS, 2 * PAIRS, threads, base, e.engines, (int)e.tasks, bound);
    EXPECT_EQ_INT(4, e.engines);
    EXPECT_EQ_INT(e.engines, engine_threads());
    EXPECT_TRUE(threads <= bound);
    /* a task per requester, completer and connection */
    EXPECT_EQ_INT(2 * PAIRS * 3, (int)e.tasks);
    for (int i = 0; i < PAIRS; i++) {
        EXPECT_MEMEQ(src_of(&sa, i), dst_of(&sb, i), SLOT);
        EXPECT_MEMEQ(src_of(&sb, i), dst_of(&sa, i), SLOT / 2);
        EXPECT_MEMEQ(src_of(&sb, i) + SLOT / 2, dst_of(&sa, i) + SLOT / 2, SLOT / 2);
        EXPECT_MEMEQ(src_of(&sa, i) + SLOT / 2, rcv_of(&sb, i), SMALL);
        EXPECT_EQ_U64(1000u * (uint64_t)i, *res_of(&sa, i));
        EXPECT_EQ_U64(1000u * (uint64_t)i + (uint64_t)i + 1, *word_of(&sb, i));
    }
    for (int i = 0; i < PAIRS; i++) {
        st_qp_destroy(&a[i]);
        st_qp_destroy(&b[i]);
    }
    /* the QPs' tasks went with them; so did their connections' */
    EXPECT_EQ_INT(0, (int)tasks_settle(0, 5000));
    EXPECT_EQ_INT(e.engines, engine_threads());
    ibv_dereg_mr(sa.mr);
    ibv_dereg_mr(sb.mr);
    munmap(sa.mem, side_len());
    munmap(sb.mem, side_len());
    st_dev_close(&d);
}

/* SOFTNIC_ENGINES sets the pool: one engine runs a QP pair's every role. */
TAP_CASE(test_softnic_engines_sets_the_engine_count)
{
    setenv("SOFTNIC_ENGINES", "1", 1);
    one_write(1 << 20);
    struct softnic_ctl_engines e;
    EXPECT_EQ_INT(0, st_ctl()->engines(&e));
    EXPECT_EQ_INT(1, e.engines);
    EXPECT_EQ_INT(1, engine_threads());
}

/* One QP streams 1 GiB of writes (pulled from the same-host writer's
 * memory: each one a long copy) while 8 other pairs ping-pong small writes
 * one at a time, all on a single engine: a step does a share of a QP's work
 * (a MiB of a pull, a few batches, 64 requests) and lets the next QP have
 * the engine, so every small write completes while the stream is still
 * under way -- a QP that kept the engine until it ran dry would make them
 * wait for the whole gigabyte. */
static void busy_qp_does_not_starve(uint64_t total_mib, uint32_t msg_mib)
{
    setenv("SOFTNIC_ENGINES", "1", 1);
    setenv("SOFTNIC_RETRY_MIN_MS", "20000", 1);
    setenv("SOFTNIC_RETRY_CAP_MS", "30000", 1);
    enum { SMALL_PAIRS = 8, ROUNDS = 6 };
    struct st_dev d;
    st_dev_open(&d);
    size_t len = (size_t)msg_mib << 20;
    int nmsg = (int)(total_mib / msg_mib);
    char *src = st_buf(len, 7), *dst = st_buf(len, 0);
    struct ibv_mr *smr = ibv_reg_mr(d.pd, src, len, ACCESS), *dmr = ibv_reg_mr(d.pd, dst, len, ACCESS);
    EXPECT_TRUE(smr && dmr);
    struct st_qp_opts bo = { .max_send_wr = 128, .max_recv_wr = 4, .max_sge = 1, .access = ACCESS };
    struct st_qp busy_a, busy_b;
    st_qp_pair(&d, &busy_a, &busy_b, &bo);
    struct st_qp_opts so = { .max_send_wr = 4, .max_recv_wr = 4, .max_sge = 1, .access = ACCESS };
    static struct st_qp sa[SMALL_PAIRS], sb[SMALL_PAIRS];
    char *small = st_buf((size_t)SMALL_PAIRS * 2 * SMALL, 9);
    struct ibv_mr *mmr = ibv_reg_mr(d.pd, small, (size_t)SMALL_PAIRS * 2 * SMALL, ACCESS);
    EXPECT_TRUE(mmr != NULL);
    for (int i = 0; i < SMALL_PAIRS; i++)
        st_qp_pair(&d, &sa[i], &sb[i], &so);
    uint64_t t0 = st_now_ms();
    for (int k = 0; k < nmsg; k++)
        st_post_rdma(busy_a.qp, IBV_WR_RDMA_WRITE, (uint64_t)k, src, (uint32_t)len, smr->lkey, (uintptr_t)dst,
                     dmr->rkey, 0, IBV_SEND_SIGNALED);
    int busy_done = 0;
    struct ibv_wc wc;
    uint64_t worst = 0;
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < SMALL_PAIRS; i++) {
            char *from = small + (size_t)i * 2 * SMALL, *to = from + SMALL;
            from[0] = (char)(r + 1);
            uint64_t s0 = st_now_ms();
            st_post_rdma(sa[i].qp, IBV_WR_RDMA_WRITE, (uint64_t)r, from, SMALL, mmr->lkey, (uintptr_t)to,
                         mmr->rkey, 0, IBV_SEND_SIGNALED);
            for (;;) {
                int n = ibv_poll_cq(sa[i].scq, 1, &wc);
                EXPECT_TRUE(n >= 0);
                if (n == 1)
                    break;
                struct ibv_wc bw;
                if (ibv_poll_cq(busy_a.scq, 1, &bw) == 1) {
                    EXPECT_WC(bw, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, (uint64_t)busy_done);
                    busy_done++;
                }
                if (st_now_ms() - s0 > 30000)
                    tap_fail_at(__FILE__, __LINE__, "a small write waited 30 s");
                usleep(50);
            }
            EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, (uint64_t)r);
            EXPECT_EQ_INT(r + 1, to[0]);
            uint64_t took = st_now_ms() - s0;
            worst = took > worst ? took : worst;
        }
        tap_progress();
    }
    uint64_t small_ms = st_now_ms() - t0;
    int busy_at_small_end = busy_done;
    while (busy_done < nmsg) {
        st_wait_wc(busy_a.scq, &wc, 60000);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, (uint64_t)busy_done);
        busy_done++;
        tap_progress();
    }
    uint64_t busy_ms = st_now_ms() - t0;
    tap_diag("one engine: %d small writes on %d QPs done in %llu ms (slowest %llu ms) while the busy QP had "
             "%d of %d %u MiB writes done; all of them took %llu ms",
             ROUNDS * SMALL_PAIRS, SMALL_PAIRS, (unsigned long long)small_ms, (unsigned long long)worst,
             busy_at_small_end, nmsg, msg_mib, (unsigned long long)busy_ms);
    EXPECT_TRUE(busy_at_small_end < nmsg);
    EXPECT_MEMEQ(src, dst, len);
    for (int i = 0; i < SMALL_PAIRS; i++) {
        st_qp_destroy(&sa[i]);
        st_qp_destroy(&sb[i]);
    }
    st_qp_destroy(&busy_a);
    st_qp_destroy(&busy_b);
    ibv_dereg_mr(smr);
    ibv_dereg_mr(dmr);
    ibv_dereg_mr(mmr);
    munmap(src, len);
    munmap(dst, len);
    st_dev_close(&d);
}

TAP_CASE(test_a_qp_streaming_pulled_writes_does_not_starve_the_others)
{
    busy_qp_does_not_starve(1024, 32);
}

/* The same on the wire (no same-host pulls): the stream's bytes go through
 * its socket, a share at a time. */
TAP_CASE(test_a_qp_streaming_on_the_wire_does_not_starve_the_others)
{
    setenv("SOFTNIC_FASTPATH", "0", 1);
    busy_qp_does_not_starve(512, 8);
}

/* QPs destroyed while their work is under way on the engines -- requests
 * on the wire, a paced port's pieces waiting for their time, a WRITE being
 * placed, a READ's response being sent, a SEND waiting for a receive --
 * are taken off them safely, in either order (sender or receiver first),
 * leave no task behind, and QPs made after them run as before. */
TAP_CASE(test_qps_destroyed_with_work_in_flight_leave_the_engines_working)
{
    setenv("SOFTNIC_ENGINES", "1", 1);
    setenv("SOFTNIC_RNR_CAP_MS", "30000", 1);
    struct st_dev d;
    st_dev_open(&d);
    /* port 2 paced: its pieces wait on timers */
    EXPECT_EQ_INT(0, st_ctl()->port_set_rate(d.ctx, 2, 200u * 1000 * 1000));
    size_t len = 1 << 20;
    char *src = st_buf(len, 5), *dst = st_buf(len, 0);
    struct ibv_mr *smr = ibv_reg_mr(d.pd, src, len, ACCESS), *dmr = ibv_reg_mr(d.pd, dst, len, ACCESS);
    EXPECT_TRUE(smr && dmr);
    struct softnic_ctl_objects before;
    EXPECT_EQ_INT(0, st_ctl()->objects(&before));
    for (int round = 0; round < 24; round++) {
        struct st_qp a[4], b[4];
        for (int i = 0; i < 4; i++) {
            struct st_qp_opts o = { .max_send_wr = 64, .max_recv_wr = 4, .max_sge = 1, .access = ACCESS,
                                    .port = (uint8_t)(i % 2 ? 2 : 1) };
            st_qp_pair(&d, &a[i], &b[i], &o);
            for (int k = 0; k < 12; k++) {
                if (k % 4 == 3) {   /* no receive posted: an RNR wait */
                    st_post_send(a[i].qp, (uint64_t)k, src, 4096, smr->lkey, IBV_SEND_SIGNALED);
                    continue;
                }
                bool rd = k % 4 == 1;
                st_post_rdma(a[i].qp, rd ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE, (uint64_t)k, rd ? dst : src,
                             (uint32_t)len / 2, rd ? dmr->lkey : smr->lkey, (uintptr_t)(rd ? src : dst),
                             rd ? smr->rkey : dmr->rkey, 0, IBV_SEND_SIGNALED);
            }
        }
        /* somewhere in the middle of it */
        usleep((useconds_t)(round % 6) * 700);
        for (int i = 0; i < 4; i++) {
            if ((round + i) % 2) {
                st_qp_destroy(&b[i]);
                st_qp_destroy(&a[i]);
            } else {
                st_qp_destroy(&a[i]);
                st_qp_destroy(&b[i]);
            }
        }
        tap_progress();
    }
    /* nothing of them is left on the engines (a connection that sent a
     * NAK lets its peer read it for up to 2 s first) */
    EXPECT_EQ_INT(0, (int)tasks_settle(0, 5000));
    struct softnic_ctl_objects after;
    EXPECT_EQ_INT(0, st_ctl()->objects(&after));
    EXPECT_EQ_INT((int)before.qps, (int)after.qps);
    EXPECT_EQ_INT((int)before.cqs, (int)after.cqs);
    struct st_qp a, b;
    struct st_qp_opts o = { .max_send_wr = 64, .max_recv_wr = 4, .max_sge = 1, .access = ACCESS };
    st_qp_pair(&d, &a, &b, &o);
    memset(dst, 0, len);
    st_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 7, src, (uint32_t)len, smr->lkey, (uintptr_t)dst, dmr->rkey, 0,
                 IBV_SEND_SIGNALED);
    struct ibv_wc wc;
    st_wait_wc(a.scq, &wc, 20000);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 7);
    EXPECT_MEMEQ(src, dst, len);
    st_qp_destroy(&a);
    st_qp_destroy(&b);
    ibv_dereg_mr(smr);
    ibv_dereg_mr(dmr);
    munmap(src, len);
    munmap(dst, len);
    st_dev_close(&d);
}

int main(int argc, char **argv) { return sntest_main(argc, argv); }
