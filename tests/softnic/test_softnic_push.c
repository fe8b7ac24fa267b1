/* tests/softnic/test_softnic_push.c: the same-host push (push.c): a small
 * RDMA WRITE to a same-host peer is placed by the posting thread, with no
 * NIC thread of the responder and no ACK, and only when every check a
 * responder makes passes; anything else takes the wire and gets the
 * wire's answer.  The requester QP's pushed-WQE counter says which path
 * carried a write.  With SOFTNIC_PUSH=0 (test_softnic_push_off.sh) every
 * case must hold the same with the counter at 0. */
#include "sntest.h"
#include "plugin/ib/memfd.h"
#include "tests/proc_self.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define WAIT_MS 10000

static uint64_t pushed(struct ibv_qp *qp) { return st_qp_count(st_ctl()->qp_pushed_wqes, qp); }

static uint64_t responder_steps(struct ibv_qp *qp)
{
    struct softnic_ctl_qp_steps s;
    EXPECT_EQ_INT(0, st_ctl()->qp_steps(qp, &s));
    return s.responder;
}

struct fixture {
    struct st_dev d;
    struct st_qp a, b;
    char *src, *dst;
    struct ibv_mr *smr, *dmr;
};

#define BUF (1u << 20)

/* The source and target buffers of a fixture whose QPs are up. */
static void fixture_bufs(struct fixture *f)
{
    f->src = st_buf(BUF, 1);
    f->dst = st_buf(BUF, 2);
    f->smr = ibv_reg_mr(f->d.pd, f->src, BUF, IBV_ACCESS_LOCAL_WRITE);
    f->dmr = ibv_reg_mr(f->d.pd, f->dst, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    EXPECT_TRUE(f->smr && f->dmr);
}

static void setup_with(struct fixture *f, const struct st_qp_opts *o)
{
    st_dev_open(&f->d);
    st_qp_pair(&f->d, &f->a, &f->b, o);
    fixture_bufs(f);
}

static void setup(struct fixture *f)
{
    struct st_qp_opts o = { .max_inline = 64, .timeout = 10, .retry_cnt = 1 };
    setup_with(f, &o);
}

static void teardown(struct fixture *f)
{
    st_qp_destroy(&f->a);
    if (f->b.qp)   /* NULL: a case destroyed it */
        st_qp_destroy(&f->b);
    if (f->smr)
        ibv_dereg_mr(f->smr);
    if (f->dmr)
        ibv_dereg_mr(f->dmr);
    st_dev_close(&f->d);
}

/* Writes len bytes from src + off to dst + off (rkey, flags), waits for
 * its completion and returns its status. */
static enum ibv_wc_status write_one(struct fixture *f, uint64_t id, uint32_t off, uint32_t len, uint32_t rkey,
                                    unsigned flags)
{
    st_post_rdma(f->a.qp, IBV_WR_RDMA_WRITE, id, f->src + off, len, f->smr->lkey, (uintptr_t)f->dst + off, rkey,
                 0, IBV_SEND_SIGNALED | flags);
    struct ibv_wc wc;
    st_wait_wc(f->a.scq, &wc, WAIT_MS);
    EXPECT_EQ_U64(id, wc.wr_id);
    return wc.status;
}

/* The first write opens the connection and gets the offer; from the next
 * on, small writes are placed: the data is there when the completion is,
 * the responder's NIC thread ran no step and the receiving QP counts the
 * bytes as received. */
TAP_CASE(test_small_writes_are_placed_without_the_responder)
{
    struct fixture f;
    setup(&f);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
    uint64_t p0 = pushed(f.a.qp), s0 = responder_steps(f.b.qp);
    struct softnic_ctl_counters c0, c1;
    EXPECT_EQ_INT(0, st_ctl()->qp_counters(f.b.qp, &c0));
    uint32_t sizes[] = { 1, 8, 64, 100, 1000, 4095 };
    for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        st_fill(f.src, sizes[i], 20u + i);
        bool inl = sizes[i] <= 64;
        EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 10 + i, 0, sizes[i], f.dmr->rkey, inl ? IBV_SEND_INLINE : 0));
        EXPECT_MEMEQ(f.src, f.dst, sizes[i]);
    }
    uint64_t n = sizeof(sizes) / sizeof(sizes[0]);
    EXPECT_EQ_U64(st_push_on() ? n : 0, pushed(f.a.qp) - p0);
    if (st_push_on())
        EXPECT_EQ_U64(s0, responder_steps(f.b.qp));
    EXPECT_EQ_INT(0, st_ctl()->qp_counters(f.b.qp, &c1));
    EXPECT_EQ_U64(1 + 8 + 64 + 100 + 1000 + 4095, c1.rx_bytes - c0.rx_bytes);
    /* above SN_PUSH_MAX_BYTES the responder pulls: not pushed */
    st_fill(f.src, 4096, 40);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 30, 0, 4096, f.dmr->rkey, 0));
    EXPECT_MEMEQ(f.src, f.dst, 4096);
    EXPECT_EQ_U64(st_push_on() ? n : 0, pushed(f.a.qp) - p0);
    teardown(&f);
}

static uint64_t stored(struct ibv_qp *qp) { return st_qp_count(st_ctl()->qp_stored_wqes, qp); }

static bool push_shared_on(void)
{
    const char *v = getenv("SOFTNIC_PUSH_SHARED");
    return st_push_on() && !(v && strcmp(v, "0") == 0);
}

/* len bytes of a memfd mapped MAP_SHARED (*fd stays open), sealed against
 * shrinking when seal is set. */
static char *memfd_buf(size_t len, bool seal, int *fd)
{
    *fd = rn_memfd_create("push-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    EXPECT_TRUE(*fd >= 0);
    EXPECT_EQ_INT(0, ftruncate(*fd, (off_t)len));
    if (seal)
        EXPECT_EQ_INT(0, fcntl(*fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW));
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
    EXPECT_TRUE(p != MAP_FAILED);
    return p;
}

/* A target region in a sealed memfd mapping: small writes are stored
 * through the pusher's mapping of the same pages (counted apart from the
 * system call's), land whole, and a region with an offset into the file
 * is reached at that offset.  An unsealed memfd and private memory are
 * pushed by the system call. */
TAP_CASE(test_small_writes_into_sealed_shared_memory_are_stored)
{
    struct fixture f;
    setup(&f);
    int fds[2];
    char *sealed = memfd_buf(BUF, true, &fds[0]), *open_ended = memfd_buf(BUF, false, &fds[1]);
    /* the region starts 2 pages and 64 bytes into its file */
    struct ibv_mr *smr = ibv_reg_mr(f.d.pd, sealed + 8256, BUF - 8256, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    struct ibv_mr *omr = ibv_reg_mr(f.d.pd, open_ended, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    EXPECT_TRUE(smr && omr);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));   /* the connection and its offer */
    uint32_t sizes[] = { 1, 8, 64, 100, 1000, 4095 };
    uint64_t n = sizeof(sizes) / sizeof(sizes[0]);
    struct { char *mem; uint32_t rkey; uint64_t want_stored; } t[] = {
        { sealed + 8256, smr->rkey, push_shared_on() ? n : 0 },
        { open_ended, omr->rkey, 0 },
        { f.dst, f.dmr->rkey, 0 },
    };
    for (unsigned k = 0; k < 3; k++) {
        uint64_t p0 = pushed(f.a.qp), s0 = stored(f.a.qp);
        for (unsigned i = 0; i < n; i++) {
            uint32_t off = 4096 * i + 8 * k;
            st_fill(f.src + off, sizes[i], 60u + i + 10 * k);
            st_post_rdma(f.a.qp, IBV_WR_RDMA_WRITE, 100 + i, f.src + off, sizes[i], f.smr->lkey,
                         (uintptr_t)t[k].mem + off, t[k].rkey, 0, IBV_SEND_SIGNALED);
            struct ibv_wc wc;
            st_wait_wc(f.a.scq, &wc, WAIT_MS);
            EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 100 + i);
            EXPECT_MEMEQ(f.src + off, t[k].mem + off, sizes[i]);
        }
        EXPECT_EQ_U64(st_push_on() ? n : 0, pushed(f.a.qp) - p0);
        EXPECT_EQ_U64(t[k].want_stored, stored(f.a.qp) - s0);
    }
    /* through the file itself: the bytes are in its pages, at its offset */
    char back[1000];
    EXPECT_EQ_INT(1000, (int)pread(fds[0], back, 1000, 8256 + 4096 * 4));
    EXPECT_MEMEQ(sealed + 8256 + 4096 * 4, back, 1000);
    EXPECT_TRUE(back[0] || back[1] || back[999]);
    ibv_dereg_mr(smr);
    ibv_dereg_mr(omr);
    munmap(sealed, BUF);
    munmap(open_ended, BUF);
    close(fds[0]);
    close(fds[1]);
    teardown(&f);
}

/* Regions come and go (a connection's areas live as long as it): each
 * new one is stored into, well past the pusher's table of mappings, whose
 * entries for released regions make room; and the mappings of released
 * regions do not pile up in the pusher. */
static int memfd_mappings(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int n = 0;
    while (f && fgets(line, sizeof(line), f))
        n += strstr(line, name) != NULL;
    if (f)
        fclose(f);
    return n;
}

TAP_CASE(test_stores_go_on_past_many_regions_registered_and_released)
{
    struct fixture f;
    setup(&f);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
    const unsigned rounds = 200;
    uint64_t p0 = pushed(f.a.qp), s0 = stored(f.a.qp);
    for (unsigned i = 0; i < rounds; i++) {
        int fd;
        char *mem = memfd_buf(4096, true, &fd);
        struct ibv_mr *mr = ibv_reg_mr(f.d.pd, mem, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        EXPECT_TRUE(mr != NULL);
        st_fill(f.src, 64, 7u + i);
        st_post_rdma(f.a.qp, IBV_WR_RDMA_WRITE, 10 + i, f.src, 64, f.smr->lkey, (uintptr_t)mem + 128, mr->rkey, 0,
                     IBV_SEND_SIGNALED);
        struct ibv_wc wc;
        st_wait_wc(f.a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10 + i);
        EXPECT_MEMEQ(f.src, mem + 128, 64);
        ibv_dereg_mr(mr);
        munmap(mem, 4096);
        close(fd);
    }
    EXPECT_EQ_U64(st_push_on() ? rounds : 0, pushed(f.a.qp) - p0);
    EXPECT_EQ_U64(push_shared_on() ? rounds : 0, stored(f.a.qp) - s0);
    /* at most a table's worth (64) of released regions stay mapped */
    EXPECT_TRUE(memfd_mappings("/memfd:push-test") <= 64);
    teardown(&f);
}

/* A sealed memfd on hugetlbfs is left to the system call: a pusher that
 * faults on a huge page its owner never touched can find the pool empty
 * and take a SIGBUS.  The write still lands. */
TAP_CASE(test_a_sealed_hugetlb_memfd_is_not_stored_into)
{
    const size_t len = 2u << 20;
    int fd = rn_memfd_create("push-huge", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB);
    char *mem = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, (off_t)len) == 0)
        mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mem == MAP_FAILED) {
        if (fd >= 0)
            close(fd);
        TAP_SKIP("no huge page to map (vm.nr_hugepages is 0 or hugetlbfs is missing)");
    }
    EXPECT_EQ_INT(0, fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW));
    struct fixture f;
    setup(&f);
    struct ibv_mr *mr = ibv_reg_mr(f.d.pd, mem, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    EXPECT_TRUE(mr != NULL);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
    uint64_t p0 = pushed(f.a.qp), s0 = stored(f.a.qp);
    st_fill(f.src, 64, 91);
    st_post_rdma(f.a.qp, IBV_WR_RDMA_WRITE, 2, f.src, 64, f.smr->lkey, (uintptr_t)mem + 4096, mr->rkey, 0,
                 IBV_SEND_SIGNALED);
    struct ibv_wc wc;
    st_wait_wc(f.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 2);
    EXPECT_MEMEQ(f.src, mem + 4096, 64);
    EXPECT_EQ_U64(st_push_on() ? 1 : 0, pushed(f.a.qp) - p0);
    EXPECT_EQ_U64(0, stored(f.a.qp) - s0);
    ibv_dereg_mr(mr);
    teardown(&f);
    munmap(mem, len);
    close(fd);
}

/* A stored write lands in address order, as a ConnectX places one: a
 * receiver that polls any 8-byte word (each entry of a clear-to-send row
 * ends in its own sequence number) sees every word below it from the same
 * write.  The watcher reads the row from the top down: a word read later
 * but lower must be at least as new as every word read above it.  Rows of
 * 64, 248 and 512 bytes (one entry, a partial row, a row of 8). */
#define ROW_WORDS 64
struct ordered_row {
    volatile uint64_t *row;
    uint64_t rounds;
    _Atomic int bad;
};

static void *watch_row(void *arg)
{
    struct ordered_row *w = arg;
    uint64_t end = st_now_ms() + WAIT_MS;
    while (__atomic_load_n(&w->row[0], __ATOMIC_ACQUIRE) < w->rounds && st_now_ms() < end) {
        uint64_t newest = 0;
        for (int i = ROW_WORDS - 1; i >= 0; i--) {
            uint64_t v = __atomic_load_n(&w->row[i], __ATOMIC_ACQUIRE);
            if (v < newest)
                atomic_store(&w->bad, 1);
            newest = v > newest ? v : newest;
        }
    }
    return NULL;
}

TAP_CASE(test_a_stored_write_lands_in_address_order)
{
    struct fixture f;
    setup(&f);
    int fd;
    char *mem = memfd_buf(4096, true, &fd);
    struct ibv_mr *mr = ibv_reg_mr(f.d.pd, mem, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    EXPECT_TRUE(mr != NULL);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
    uint64_t s0 = stored(f.a.qp);
    struct ordered_row w = { .row = (volatile uint64_t *)(void *)mem, .rounds = 3000 };
    pthread_t th;
    EXPECT_EQ_INT(0, pthread_create(&th, NULL, watch_row, &w));
    static const uint32_t len[] = { 64, 248, 512 };
    uint64_t *src = (uint64_t *)(void *)f.src;
    for (uint64_t r = 1; r <= w.rounds; r++) {
        for (int i = 0; i < ROW_WORDS; i++)
            src[i] = r;
        /* the last round covers the whole row */
        uint32_t n = r == w.rounds ? 512 : len[r % 3];
        st_post_rdma(f.a.qp, IBV_WR_RDMA_WRITE, r, f.src, n, f.smr->lkey, (uintptr_t)mem, mr->rkey, 0,
                     IBV_SEND_SIGNALED);
        struct ibv_wc wc;
        st_wait_wc(f.a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, r);
    }
    pthread_join(th, NULL);
    EXPECT_EQ_INT(0, atomic_load(&w.bad));
    for (int i = 0; i < ROW_WORDS; i++)
        EXPECT_EQ_U64(w.rounds, w.row[i]);
    if (push_shared_on())
        EXPECT_EQ_U64(w.rounds, stored(f.a.qp) - s0);
    ibv_dereg_mr(mr);
    munmap(mem, 4096);
    close(fd);
    teardown(&f);
}

/* Whether this process holds an fd on its own /proc/<pid>/mem: a push to
 * a QP of the same process opens the peer's, here its own. */
static bool holds_own_proc_mem(void)
{
    char want[64];
    snprintf(want, sizeof(want), "/proc/%d/mem", (int)getpid());
    return proc_self_fd_to(want) >= 0;
}

/* The posting thread writes through the peer's /proc/<pid>/mem, opened
 * once for the peer (SOFTNIC_PUSH_PROC_MEM=0: process_vm_writev, and no
 * such file held), and lets go of it with the last QP that pushes there. */
TAP_CASE(test_pushes_write_through_the_peers_proc_mem_unless_turned_off)
{
    int probe = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
    if (probe < 0)
        TAP_SKIP("this process may not open its own /proc/self/mem for writing (ptrace restrictions)");
    close(probe);
    const char *v = getenv("SOFTNIC_PUSH_PROC_MEM");
    bool want = st_push_on() && !(v && strcmp(v, "0") == 0);
    EXPECT_TRUE(!holds_own_proc_mem());
    struct fixture f;
    setup(&f);
    for (int i = 0; i < 3; i++) {
        st_fill(f.src, 64, 50 + i);
        EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1 + (uint64_t)i, 0, 64, f.dmr->rkey, 0));
        EXPECT_MEMEQ(f.src, f.dst, 64);
    }
    EXPECT_EQ_INT(want, holds_own_proc_mem());
    teardown(&f);
    EXPECT_TRUE(!holds_own_proc_mem());
}

/* RC's order: a small write posted behind a large one that is still in
 * flight is not placed ahead of it -- the same bytes end as the later
 * write left them.  Unsignaled small writes on an idle queue complete
 * silently and a later signaled one reports. */
TAP_CASE(test_a_small_write_never_overtakes_an_earlier_one)
{
    struct fixture f;
    setup(&f);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
    for (int round = 0; round < 20; round++) {
        st_fill(f.src, BUF, 50u + (unsigned)round);
        /* the large write carries src[0..64) too; the small one then
         * writes other bytes over dst[0..64) */
        struct ibv_sge s1 = { (uintptr_t)f.src, BUF, f.smr->lkey };
        char *small = f.src + BUF - 64;   /* bytes the large write put at BUF-64 */
        struct ibv_sge s2 = { (uintptr_t)small, 64, f.smr->lkey };
        struct ibv_send_wr w2 = { .wr_id = 3, .sg_list = &s2, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
                                  .send_flags = IBV_SEND_SIGNALED };
        w2.wr.rdma.remote_addr = (uintptr_t)f.dst;
        w2.wr.rdma.rkey = f.dmr->rkey;
        struct ibv_send_wr w1 = { .wr_id = 2, .sg_list = &s1, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE };
        w1.wr.rdma.remote_addr = (uintptr_t)f.dst;
        w1.wr.rdma.rkey = f.dmr->rkey;
        struct ibv_send_wr *bad;
        EXPECT_EQ_INT(0, ibv_post_send(f.a.qp, &w1, &bad));
        EXPECT_EQ_INT(0, ibv_post_send(f.a.qp, &w2, &bad));
        struct ibv_wc wc;
        st_wait_wc(f.a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 3);
        EXPECT_MEMEQ(small, f.dst, 64);
        EXPECT_MEMEQ(f.src + 64, f.dst + 64, BUF - 64);
    }
    teardown(&f);
}

/* What a responder refuses, the push refuses too: the write goes on the
 * wire and completes with the remote access error there, never placed. */
TAP_CASE(test_a_write_the_responder_would_refuse_is_not_placed)
{
    struct fixture f;
    setup(&f);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
    uint64_t p0 = pushed(f.a.qp);
    char before[128];
    memcpy(before, f.dst + BUF - 64, 64);
    /* out of the region's bounds */
    st_post_rdma(f.a.qp, IBV_WR_RDMA_WRITE, 2, f.src, 128, f.smr->lkey, (uintptr_t)f.dst + BUF - 64,
                 f.dmr->rkey, 0, IBV_SEND_SIGNALED);
    struct ibv_wc wc;
    st_wait_wc(f.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_REM_ACCESS_ERR, -1, 2);
    EXPECT_MEMEQ(before, f.dst + BUF - 64, 64);
    EXPECT_EQ_U64(p0, pushed(f.a.qp));
    teardown(&f);

    /* a key without remote write, a key of another PD, a stale key */
    int cases = 3;
    for (int k = 0; k < cases; k++) {
        setup(&f);
        EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
        p0 = pushed(f.a.qp);
        uint32_t rkey = 0;
        struct ibv_pd *pd2 = NULL;
        struct ibv_mr *mr2 = NULL;
        char *other = st_buf(4096, 7);
        if (k == 0) {
            mr2 = ibv_reg_mr(f.d.pd, other, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
            rkey = mr2->rkey;
        } else if (k == 1) {
            pd2 = ibv_alloc_pd(f.d.ctx);
            mr2 = ibv_reg_mr(pd2, other, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
            rkey = mr2->rkey;
        } else {
            mr2 = ibv_reg_mr(f.d.pd, other, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
            rkey = mr2->rkey;
            EXPECT_EQ_INT(0, ibv_dereg_mr(mr2));
            mr2 = NULL;
        }
        char *copy = malloc(4096);
        memcpy(copy, other, 4096);
        st_post_rdma(f.a.qp, IBV_WR_RDMA_WRITE, 2, f.src, 64, f.smr->lkey, (uintptr_t)other, rkey, 0,
                     IBV_SEND_SIGNALED);
        st_wait_wc(f.a.scq, &wc, WAIT_MS);
        tap_diag("refused key case %d: status %d", k, (int)wc.status);
        EXPECT_WC(wc, IBV_WC_REM_ACCESS_ERR, -1, 2);
        if (k != 2)
            EXPECT_MEMEQ(copy, other, 4096);
        EXPECT_EQ_U64(p0, pushed(f.a.qp));
        free(copy);
        if (mr2)
            ibv_dereg_mr(mr2);
        teardown(&f);
        if (pd2)
            ibv_dealloc_pd(pd2);
    }
}

/* The receiving QP's own state and its port count: a QP moved to ERR, or
 * whose remote write access was taken away, or whose port is down, gets
 * nothing placed; the writer sees the wire's error. */
TAP_CASE(test_a_receiving_qp_that_cannot_take_writes_gets_none_placed)
{
    for (int k = 0; k < 3; k++) {
        struct fixture f;
        struct st_qp_opts o = { .max_inline = 64, .timeout = 10, .retry_cnt = 1 };
        if (k < 2) {
            setup_with(&f, &o);
        } else {
            /* the writer on port 1, the receiver on port 2: only the
             * receiver's port goes down */
            st_dev_open(&f.d);
            struct st_qp_opts o2 = o;
            o2.port = 2;
            st_qp_create(&f.d, &f.a, &o, 256);
            st_qp_create(&f.d, &f.b, &o2, 256);
            struct st_qp_info ia, ib;
            st_qp_info(&f.d, &f.a, &ia);
            st_qp_info(&f.d, &f.b, &ib);
            st_qp_connect(&f.a, &ib);
            st_qp_connect(&f.b, &ia);
            fixture_bufs(&f);
        }
        EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
        EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 2, 0, 64, f.dmr->rkey, 0));
        uint64_t p0 = pushed(f.a.qp);
        EXPECT_TRUE(!st_push_on() || p0 >= 1);   /* placed while all was well */
        if (k == 0) {
            struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
            EXPECT_EQ_INT(0, ibv_modify_qp(f.b.qp, &a, IBV_QP_STATE));
        } else if (k == 1) {
            struct ibv_qp_attr a = { .qp_access_flags = IBV_ACCESS_REMOTE_READ };
            EXPECT_EQ_INT(0, ibv_modify_qp(f.b.qp, &a, IBV_QP_ACCESS_FLAGS));
        } else {
            EXPECT_EQ_INT(0, st_ctl()->port_set_state(f.d.ctx, 2, 0));
        }
        char keep[64];
        memcpy(keep, f.dst + 128, 64);
        st_fill(f.src + 128, 64, 60);
        enum ibv_wc_status st = write_one(&f, 3, 128, 64, f.dmr->rkey, 0);
        tap_diag("case %d: status %d", k, (int)st);
        EXPECT_TRUE(st != IBV_WC_SUCCESS);
        EXPECT_MEMEQ(keep, f.dst + 128, 64);
        EXPECT_EQ_U64(p0, pushed(f.a.qp));
        if (k == 2)
            EXPECT_EQ_INT(0, st_ctl()->port_set_state(f.d.ctx, 2, 1));
        teardown(&f);
    }
}

static bool push_imm_on(void)
{
    const char *v = getenv("SOFTNIC_PUSH_IMM");
    return st_push_on() && (!v || strcmp(v, "0") != 0);
}

/* Posts a WRITE_WITH_IMM of len bytes from src + off to dst + off. */
static void write_imm(struct fixture *f, uint64_t id, uint32_t off, uint32_t len, uint32_t imm)
{
    st_post_rdma(f->a.qp, IBV_WR_RDMA_WRITE_WITH_IMM, id, f->src + off, len, f->smr->lkey,
                 (uintptr_t)f->dst + off, f->dmr->rkey, imm, IBV_SEND_SIGNALED);
}

/* A WRITE_WITH_IMM is placed as a write is, and takes the receiver's next
 * receive: its completion (immediate, length, source QP) is made by the
 * receiver's poll, with no responder step and no ACK; a SEND above
 * SOFTNIC_PUSH_INLINE takes the wire, and the receive completions come in
 * posting order. */
TAP_CASE(test_writes_with_immediate_are_placed_and_large_sends_take_the_wire)
{
    struct fixture f;
    setup(&f);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
    uint64_t p0 = pushed(f.a.qp), s0 = responder_steps(f.b.qp);
    st_post_recv(f.b.qp, 7, f.dst + 4096, 4096, f.dmr->lkey);
    st_post_recv(f.b.qp, 8, f.dst + 8192, 4096, f.dmr->lkey);
    st_post_recv(f.b.qp, 9, f.dst + 4096, 4096, f.dmr->lkey);
    st_fill(f.src, 256, 70);
    write_imm(&f, 2, 0, 64, 0x1234);
    struct ibv_wc wc;
    st_wait_wc(f.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 2);
    st_wait_wc(f.b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, 7);
    EXPECT_EQ_U64(htonl(0x1234), wc.imm_data);   /* st_post_rdma sends it in network order */
    EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
    EXPECT_EQ_INT(64, (int)wc.byte_len);
    EXPECT_EQ_INT((int)f.b.qp->qp_num, (int)wc.qp_num);
    EXPECT_EQ_INT((int)f.a.qp->qp_num, (int)wc.src_qp);
    EXPECT_MEMEQ(f.src, f.dst, 64);
    EXPECT_EQ_U64(push_imm_on() ? p0 + 1 : p0, pushed(f.a.qp));
    if (push_imm_on())
        EXPECT_EQ_U64(s0, responder_steps(f.b.qp));
    p0 = pushed(f.a.qp);
    st_post_send(f.a.qp, 3, f.src + 64, 200, f.smr->lkey, IBV_SEND_SIGNALED);
    write_imm(&f, 4, 512, 0, 0x55);   /* zero bytes: no key is checked */
    st_wait_wc(f.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 3);
    st_wait_wc(f.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 4);
    EXPECT_EQ_U64(p0, pushed(f.a.qp));   /* the write waited behind the SEND on the wire */
    st_wait_wc(f.b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 8);
    EXPECT_EQ_INT(200, (int)wc.byte_len);
    EXPECT_MEMEQ(f.src + 64, f.dst + 8192, 200);
    st_wait_wc(f.b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, 9);
    EXPECT_EQ_INT(0, (int)wc.byte_len);
    EXPECT_EQ_U64(htonl(0x55), wc.imm_data);
    teardown(&f);
}

/* Writes with immediate pushed and on the wire (above SN_PUSH_MAX_BYTES the
 * responder pulls), more than the receiver holds records for, posted
 * before the receiver polls: every one completes, and the receive
 * completions come in the order of the writes, each with its length. */
TAP_CASE(test_pushed_and_wire_writes_with_immediate_complete_in_order)
{
    struct fixture f;
    setup(&f);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
    enum { N = 48 };
    for (int i = 0; i < N; i++)
        st_post_recv(f.b.qp, 100 + (uint64_t)i, NULL, 0, 0);
    st_fill(f.src, BUF, 80);
    uint32_t len[N];
    for (int i = 0; i < N; i++) {
        len[i] = i % 7 == 3 ? 16384 : (uint32_t)(8 + 8 * i);
        write_imm(&f, 200 + (uint64_t)i, (uint32_t)i * 16384, len[i], (uint32_t)i);
        struct ibv_wc wc;   /* one at a time: each finds the queue empty, and may be pushed */
        st_wait_wc(f.a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 200 + (uint64_t)i);
    }
    for (int i = 0; i < N; i++) {
        struct ibv_wc wc;
        st_wait_wc(f.b.rcq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, 100 + (uint64_t)i);
        EXPECT_EQ_INT((int)len[i], (int)wc.byte_len);
        EXPECT_EQ_U64(htonl((uint32_t)i), wc.imm_data);
        EXPECT_MEMEQ(f.src + (size_t)i * 16384, f.dst + (size_t)i * 16384, len[i]);
    }
    EXPECT_TRUE(st_no_wc(f.b.rcq, 50));
    teardown(&f);
}

enum { SHARED_MAXQ = 16, SHARED_SLOT = 256 };

struct shared_cq {
    struct st_dev d;
    struct ibv_cq *rcq;
    struct st_qp tx[SHARED_MAXQ], rx[SHARED_MAXQ];
    char *src, *dst;
    struct ibv_mr *smr, *dmr;
};

/* Round `round` of shared_recv_cq: senders [0, n) write with immediate
 * round*MAXQ + i, from the last, each into its own slot; the receives that
 * come are the posted ones (wr_id base + i), each once, on its own QP. */
static void shared_round(struct shared_cq *c, int n, int round, uint64_t base)
{
    for (int i = n - 1; i >= 0; i--) {
        size_t off = ((size_t)round * SHARED_MAXQ + (size_t)i) * SHARED_SLOT;
        st_fill(c->src + off, 64, 7 + round * SHARED_MAXQ + i);
        st_post_rdma(c->tx[i].qp, IBV_WR_RDMA_WRITE_WITH_IMM, 10 + (uint64_t)round, c->src + off, 64,
                     c->smr->lkey, (uintptr_t)c->dst + off, c->dmr->rkey, (uint32_t)(round * SHARED_MAXQ + i),
                     IBV_SEND_SIGNALED);
        struct ibv_wc wc;
        st_wait_wc(c->tx[i].scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10 + (uint64_t)round);
    }
    int seen[SHARED_MAXQ] = { 0 };
    for (int k = 0; k < n; k++) {
        struct ibv_wc wc;
        st_wait_wc(c->rcq, &wc, WAIT_MS);
        EXPECT_EQ_INT(IBV_WC_SUCCESS, wc.status);
        EXPECT_EQ_INT(IBV_WC_RECV_RDMA_WITH_IMM, wc.opcode);
        int i = (int)(ntohl(wc.imm_data) % SHARED_MAXQ), r = (int)(ntohl(wc.imm_data) / SHARED_MAXQ);
        EXPECT_TRUE(i < n && r == round && !seen[i]);
        seen[i] = 1;
        EXPECT_EQ_INT((int)c->rx[i].qp->qp_num, (int)wc.qp_num);
        EXPECT_EQ_U64(base + (uint64_t)i, wc.wr_id);
        EXPECT_EQ_INT(64, (int)wc.byte_len);
        size_t off = ((size_t)round * SHARED_MAXQ + (size_t)i) * SHARED_SLOT;
        EXPECT_MEMEQ(c->src + off, c->dst + off, 64);
    }
    EXPECT_TRUE(st_no_wc(c->rcq, 50));
}

static void shared_close(struct shared_cq *c, int from, int to)
{
    for (int i = from; i < to; i++) {
        st_qp_destroy(&c->tx[i]);
        EXPECT_EQ_INT(0, ibv_destroy_qp(c->rx[i].qp));
        EXPECT_EQ_INT(0, ibv_destroy_cq(c->rx[i].scq));
    }
}

/* Receivers that share one recv CQ, n of them: a few (the CQ's poll looks
 * at each QP's next record) or many (it waits for the region's bell
 * first). Each sender writes with immediate twice, the receivers' QPs in
 * turn from the last; every receive completes once, on its own QP, with
 * its sender's immediate and data, and the writes were pushed.  Then all
 * but `keep` pairs go, and the kept ones write once more (from many QPs
 * back to a few: the poll looks at the records of those left). */
static void shared_recv_cq(int n, int keep)
{
    struct shared_cq c;
    st_dev_open(&c.d);
    struct st_qp_opts o = { .max_inline = 64, .timeout = 10, .retry_cnt = 1 };
    c.rcq = ibv_create_cq(c.d.ctx, 4 * SHARED_MAXQ, NULL, NULL, 0);
    EXPECT_TRUE(c.rcq != NULL);
    c.src = st_buf(BUF, 1);
    c.dst = st_buf(BUF, 0);
    c.smr = ibv_reg_mr(c.d.pd, c.src, BUF, IBV_ACCESS_LOCAL_WRITE);
    c.dmr = ibv_reg_mr(c.d.pd, c.dst, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    EXPECT_TRUE(c.smr && c.dmr);
    for (int i = 0; i < n; i++) {
        st_qp_create(&c.d, &c.tx[i], &o, 64);
        c.rx[i].o = o;
        c.rx[i].scq = ibv_create_cq(c.d.ctx, 64, NULL, NULL, 0);
        c.rx[i].rcq = c.rcq;
        struct ibv_qp_init_attr ia = { .send_cq = c.rx[i].scq, .recv_cq = c.rcq, .qp_type = IBV_QPT_RC,
                                       .cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
                                                .max_recv_sge = 1, .max_inline_data = 64 } };
        c.rx[i].qp = ibv_create_qp(c.d.pd, &ia);
        EXPECT_TRUE(c.rx[i].scq && c.rx[i].qp);
        struct st_qp_info ti, ri;
        st_qp_info(&c.d, &c.tx[i], &ti);
        st_qp_info(&c.d, &c.rx[i], &ri);
        st_qp_connect(&c.tx[i], &ri);
        st_qp_connect(&c.rx[i], &ti);
        /* the first write opens the connection and gets the offer */
        struct ibv_wc wc;
        st_post_rdma(c.tx[i].qp, IBV_WR_RDMA_WRITE, 1, c.src, 8, c.smr->lkey, (uintptr_t)c.dst, c.dmr->rkey, 0,
                     IBV_SEND_SIGNALED);
        st_wait_wc(c.tx[i].scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 1);
    }
    uint64_t p0[SHARED_MAXQ];
    for (int i = 0; i < n; i++) {
        p0[i] = pushed(c.tx[i].qp);
        st_post_recv(c.rx[i].qp, 100 + (uint64_t)i, NULL, 0, 0);
        st_post_recv(c.rx[i].qp, 200 + (uint64_t)i, NULL, 0, 0);
    }
    shared_round(&c, n, 0, 100);
    shared_round(&c, n, 1, 200);
    for (int i = 0; i < n; i++)
        EXPECT_EQ_U64(push_imm_on() ? p0[i] + 2 : p0[i], pushed(c.tx[i].qp));
    shared_close(&c, keep, n);
    for (int i = 0; i < keep; i++)
        st_post_recv(c.rx[i].qp, 300 + (uint64_t)i, NULL, 0, 0);
    shared_round(&c, keep, 2, 300);
    for (int i = 0; i < keep; i++)
        EXPECT_EQ_U64(push_imm_on() ? p0[i] + 3 : p0[i], pushed(c.tx[i].qp));
    shared_close(&c, 0, keep);
    EXPECT_EQ_INT(0, ibv_destroy_cq(c.rcq));
    ibv_dereg_mr(c.smr);
    ibv_dereg_mr(c.dmr);
    st_dev_close(&c.d);
}

TAP_CASE(test_a_few_receivers_on_one_cq_get_their_pushed_completions)
{
    shared_recv_cq(3, 3);
}

TAP_CASE(test_many_receivers_on_one_cq_then_a_few_get_their_pushed_completions)
{
    shared_recv_cq(12, 4);
}

/* Whether a pushed WRITE_WITH_IMM of len bytes carries them in its
 * completion record (SOFTNIC_PUSH_INLINE, 88 unless set). */
static bool carried(uint32_t len)
{
    const char *v = getenv("SOFTNIC_PUSH_INLINE");
    unsigned long most = v ? strtoul(v, NULL, 0) : 88;
    return push_imm_on() && len && len <= most;
}

/* A pushed WRITE_WITH_IMM of a few bytes carries them in its completion
 * record: they are in place when the receiver's poll returns the
 * completion (what RDMA promises), not before; a deregistration of the
 * target region, its re-registration elsewhere and the receiving QP's
 * destruction put those still waiting in place first (at the old
 * translation), as a NIC had placed them on arrival.  Placed ones (the
 * push or its carrying off) are there before the completion. */
TAP_CASE(test_a_few_bytes_with_immediate_land_by_the_poll_or_before_their_region_goes)
{
    static const char *how[] = { "the poll", "ibv_dereg_mr", "ibv_rereg_mr elsewhere", "ibv_destroy_qp" };
    for (int k = 0; k < 4; k++) {
        struct fixture f;
        setup(&f);
        EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
        st_post_recv(f.b.qp, 7, NULL, 0, 0);
        st_fill(f.src, 1024, 90u + (unsigned)k);
        uint64_t p0 = pushed(f.a.qp);
        write_imm(&f, 2, 512, 24, 0x77);
        struct ibv_wc wc;
        st_wait_wc(f.a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 2);
        EXPECT_EQ_U64(push_imm_on() ? p0 + 1 : p0, pushed(f.a.qp));
        bool there = memcmp(f.src + 512, f.dst + 512, 24) == 0;
        tap_diag("%s: the bytes %s before it", how[k], there ? "were there" : "waited");
        EXPECT_TRUE(there != carried(24));
        char *other = NULL;
        if (k == 0) {
            st_wait_wc(f.b.rcq, &wc, WAIT_MS);
            EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, 7);
            EXPECT_EQ_INT(24, (int)wc.byte_len);
        } else if (k == 1) {
            EXPECT_EQ_INT(0, ibv_dereg_mr(f.dmr));
            f.dmr = NULL;
        } else if (k == 2) {
            other = st_buf(BUF, 5);
            EXPECT_EQ_INT(0, ibv_rereg_mr(f.dmr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, other, BUF, 0));
        } else if (k == 3) {
            st_qp_destroy(&f.b);
            f.b.qp = NULL;
        }
        EXPECT_MEMEQ(f.src + 512, f.dst + 512, 24);
        if (other) {
            char *fresh = st_buf(BUF, 5);
            EXPECT_MEMEQ(fresh + 512, other + 512, 24);   /* the new translation got nothing */
            munmap(fresh, BUF);
        }
        if (k == 1 || k == 2) {   /* the completion follows, whole */
            st_wait_wc(f.b.rcq, &wc, WAIT_MS);
            EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, 7);
            EXPECT_EQ_INT(24, (int)wc.byte_len);
            EXPECT_EQ_U64(htonl(0x77), wc.imm_data);
        }
        teardown(&f);
        if (other)
            munmap(other, BUF);
    }
}

/* Without a receive posted a WRITE_WITH_IMM is not completed by a push: it
 * waits on the wire (RNR) and completes once a receive comes. */
TAP_CASE(test_a_write_with_immediate_without_a_receive_waits_for_one)
{
    struct fixture f;
    struct st_qp_opts o = { .max_inline = 64, .timeout = 10, .retry_cnt = 1, .rnr_retry = 7, .min_rnr_timer = 1 };
    setup_with(&f, &o);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
    uint64_t p0 = pushed(f.a.qp);
    st_fill(f.src, 64, 90);
    write_imm(&f, 2, 0, 64, 7);
    struct ibv_wc wc;
    EXPECT_TRUE(st_no_wc(f.b.rcq, 100));
    st_post_recv(f.b.qp, 5, NULL, 0, 0);
    st_wait_wc(f.b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, 5);
    st_wait_wc(f.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 2);
    EXPECT_MEMEQ(f.src, f.dst, 64);
    EXPECT_EQ_U64(p0, pushed(f.a.qp));
    teardown(&f);
}

static bool sends_pushed(uint32_t len)
{
    const char *v = getenv("SOFTNIC_PUSH_SEND");
    const char *i = getenv("SOFTNIC_PUSH_INLINE");
    unsigned long most = i ? strtoul(i, NULL, 0) : 88;
    return push_imm_on() && (!v || strcmp(v, "0") != 0) && len <= most;
}

/* A SEND of a few bytes takes the receiver's next receive as a
 * WRITE_WITH_IMM does, its bytes in the record: the receiver's poll puts
 * them in that receive's buffer and makes the completion (RECV, the
 * immediate of a SEND_WITH_IMM, the length), with no responder step; an
 * empty SEND too; the order of receives holds across pushed and wire
 * requests. */
TAP_CASE(test_small_sends_land_in_their_receive_by_the_poll)
{
    struct fixture f;
    setup(&f);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
    uint64_t p0 = pushed(f.a.qp), s0 = responder_steps(f.b.qp);
    memset(f.dst + 4096, 0, 4 * 256);
    for (int i = 0; i < 4; i++)
        st_post_recv(f.b.qp, 10u + (unsigned)i, f.dst + 4096 + i * 256, 256, f.dmr->lkey);
    st_fill(f.src, 1024, 31);
    /* each after the one before completed: one behind a SEND on the wire
     * would take the wire too */
    struct ibv_wc wc;
    st_post_send(f.a.qp, 2, f.src, 8, f.smr->lkey, IBV_SEND_SIGNALED);
    st_wait_wc(f.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 2);
    st_post_rdma(f.a.qp, IBV_WR_SEND_WITH_IMM, 3, f.src + 64, 88, f.smr->lkey, 0, 0, 0xabcd, IBV_SEND_SIGNALED);
    st_wait_wc(f.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 3);
    st_post_send(f.a.qp, 4, NULL, 0, 0, IBV_SEND_SIGNALED);
    st_wait_wc(f.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 4);
    uint32_t n = (sends_pushed(8) ? 1 : 0) + (sends_pushed(88) ? 1 : 0) + (sends_pushed(0) ? 1 : 0);
    EXPECT_EQ_U64(p0 + n, pushed(f.a.qp));
    if (n == 3)
        EXPECT_EQ_U64(s0, responder_steps(f.b.qp));
    st_wait_wc(f.b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 10);
    EXPECT_EQ_INT(8, (int)wc.byte_len);
    EXPECT_TRUE(!(wc.wc_flags & IBV_WC_WITH_IMM));
    EXPECT_EQ_INT((int)f.a.qp->qp_num, (int)wc.src_qp);
    EXPECT_MEMEQ(f.src, f.dst + 4096, 8);
    st_wait_wc(f.b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 11);
    EXPECT_EQ_INT(88, (int)wc.byte_len);
    EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
    EXPECT_EQ_U64(htonl(0xabcd), wc.imm_data);
    EXPECT_MEMEQ(f.src + 64, f.dst + 4096 + 256, 88);
    st_wait_wc(f.b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 12);
    EXPECT_EQ_INT(0, (int)wc.byte_len);
    /* then one on the wire (above the record's bytes), in its turn */
    st_post_send(f.a.qp, 5, f.src + 256, 200, f.smr->lkey, IBV_SEND_SIGNALED);
    st_wait_wc(f.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 5);
    st_wait_wc(f.b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 13);
    EXPECT_EQ_INT(200, (int)wc.byte_len);
    EXPECT_MEMEQ(f.src + 256, f.dst + 4096 + 3 * 256, 200);
    EXPECT_EQ_U64(p0 + n, pushed(f.a.qp));
    teardown(&f);
}

/* Sends posted back to back while the receiver does not poll: the push
 * takes receives up to its records' window (WINDOW, push.c's PUSH_RECS),
 * the next SEND takes the wire, and those behind it too (RC's order); the
 * receiver's polls then return every receive in posting order, each with
 * its own bytes. */
TAP_CASE(test_sends_past_the_records_window_take_the_wire_in_order)
{
    struct fixture f;
    struct st_qp_opts o = { .max_inline = 64, .timeout = 10, .retry_cnt = 1, .max_send_wr = 128, .max_recv_wr = 128 };
    setup_with(&f, &o);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
    enum { N = 100, WINDOW = 64 };
    memset(f.dst + 4096, 0, N * 64);
    for (int i = 0; i < N; i++)
        st_post_recv(f.b.qp, 100u + (unsigned)i, f.dst + 4096 + i * 64, 64, f.dmr->lkey);
    st_fill(f.src, N * 64, 77);
    uint64_t p0 = pushed(f.a.qp);
    for (int i = 0; i < N; i++)
        st_post_send(f.a.qp, 200u + (unsigned)i, f.src + i * 64, 16u + (unsigned)(i % 48), f.smr->lkey, IBV_SEND_SIGNALED);
    struct ibv_wc wc;
    for (int i = 0; i < N; i++) {
        st_wait_wc(f.b.rcq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 100u + (unsigned)i);
        EXPECT_EQ_INT(16 + i % 48, (int)wc.byte_len);
        EXPECT_MEMEQ(f.src + i * 64, f.dst + 4096 + i * 64, (size_t)(16 + i % 48));
    }
    for (int i = 0; i < N; i++) {
        st_wait_wc(f.a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 200u + (unsigned)i);
    }
    EXPECT_EQ_U64(sends_pushed(63) ? p0 + WINDOW : p0, pushed(f.a.qp));
    teardown(&f);
}

/* A SEND the push cannot hand its receive goes on the wire and gets the
 * wire's answer: longer than the receive (a length error on both sides,
 * the receiving QP in ERR), a receive of two scatter entries (filled in
 * order), a receive whose key is no region (a protection error). */
TAP_CASE(test_a_send_its_receive_cannot_take_as_pushed_gets_the_wires_answer)
{
    for (int k = 0; k < 3; k++) {
        struct fixture f;
        setup(&f);
        EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
        uint64_t p0 = pushed(f.a.qp);
        st_fill(f.src, 256, 40u + (unsigned)k);
        memset(f.dst + 4096, 0, 256);
        if (k == 0) {
            st_post_recv(f.b.qp, 7, f.dst + 4096, 16, f.dmr->lkey);
        } else if (k == 1) {
            struct ibv_sge sg[2] = { { (uintptr_t)f.dst + 4096, 20, f.dmr->lkey },
                                     { (uintptr_t)f.dst + 4096 + 128, 60, f.dmr->lkey } };
            struct ibv_recv_wr wr = { .wr_id = 7, .sg_list = sg, .num_sge = 2 }, *bad;
            EXPECT_EQ_INT(0, ibv_post_recv(f.b.qp, &wr, &bad));
        } else {
            st_post_recv(f.b.qp, 7, f.dst + 4096, 256, f.dmr->lkey + 0x10000);
        }
        st_post_send(f.a.qp, 2, f.src, 48, f.smr->lkey, IBV_SEND_SIGNALED);
        struct ibv_wc rwc, swc;
        st_wait_wc(f.b.rcq, &rwc, WAIT_MS);
        st_wait_wc(f.a.scq, &swc, WAIT_MS);
        tap_diag("case %d: receive %d, send %d", k, (int)rwc.status, (int)swc.status);
        EXPECT_EQ_U64(p0, pushed(f.a.qp));
        EXPECT_EQ_U64(7, rwc.wr_id);
        EXPECT_EQ_U64(2, swc.wr_id);
        if (k == 1) {
            EXPECT_WC(rwc, IBV_WC_SUCCESS, IBV_WC_RECV, 7);
            EXPECT_EQ_INT(48, (int)rwc.byte_len);
            EXPECT_MEMEQ(f.src, f.dst + 4096, 20);
            EXPECT_MEMEQ(f.src + 20, f.dst + 4096 + 128, 28);
            EXPECT_WC(swc, IBV_WC_SUCCESS, IBV_WC_SEND, 2);
        } else {
            EXPECT_EQ_INT(k == 0 ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR, rwc.status);
            EXPECT_TRUE(swc.status != IBV_WC_SUCCESS);
        }
        teardown(&f);
    }
}

/* A pushed SEND's bytes wait in its record: ibv_dereg_mr of the receive's
 * region and ibv_destroy_qp of the receiving QP put them in place first,
 * as a NIC had placed them at arrival. */
TAP_CASE(test_a_pushed_sends_bytes_land_before_their_region_or_qp_goes)
{
    for (int k = 0; k < 2; k++) {
        struct fixture f;
        setup(&f);
        EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
        char *rbuf = st_buf(4096, 6);
        memset(rbuf, 0, 4096);
        struct ibv_mr *rmr = ibv_reg_mr(f.d.pd, rbuf, 4096, IBV_ACCESS_LOCAL_WRITE);
        EXPECT_TRUE(rmr != NULL);
        st_post_recv(f.b.qp, 7, rbuf + 100, 100, rmr->lkey);
        st_fill(f.src, 64, 50u + (unsigned)k);
        uint64_t p0 = pushed(f.a.qp);
        st_post_send(f.a.qp, 2, f.src, 40, f.smr->lkey, IBV_SEND_SIGNALED);
        struct ibv_wc wc;
        st_wait_wc(f.a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 2);
        EXPECT_EQ_U64(sends_pushed(40) ? p0 + 1 : p0, pushed(f.a.qp));
        if (k == 0) {
            if (sends_pushed(40))   /* nothing polled: the bytes wait */
                EXPECT_TRUE(memcmp(f.src, rbuf + 100, 40) != 0);
            EXPECT_EQ_INT(0, ibv_dereg_mr(rmr));
            rmr = NULL;
        } else {
            if (!sends_pushed(40))
                st_wait_wc(f.b.rcq, &wc, WAIT_MS);   /* the wire's placement, before the QP goes */
            st_qp_destroy(&f.b);
            f.b.qp = NULL;
        }
        EXPECT_MEMEQ(f.src, rbuf + 100, 40);
        if (k == 0) {   /* the completion follows, whole */
            st_wait_wc(f.b.rcq, &wc, WAIT_MS);
            EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 7);
            EXPECT_EQ_INT(40, (int)wc.byte_len);
        }
        if (rmr)
            EXPECT_EQ_INT(0, ibv_dereg_mr(rmr));
        teardown(&f);
        munmap(rbuf, 4096);
    }
}

/* A receiver on an SRQ, or whose recv CQ has a completion channel, gets
 * its writes with immediate on the wire (a push could not take an SRQ's
 * receive, nor signal the channel): the completion and the event come. */
TAP_CASE(test_srq_and_channel_receivers_get_writes_with_immediate_on_the_wire)
{
    struct st_dev d;
    st_dev_open(&d);
    struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
    struct ibv_srq *srq = ibv_create_srq(d.pd, &sa);
    EXPECT_TRUE(srq != NULL);
    struct st_qp a, b;
    struct st_qp_opts o = { .max_inline = 64, .srq = srq };
    st_qp_pair(&d, &a, &b, &o);
    char *src = st_buf(4096, 3), *dst = st_buf(4096, 4);
    struct ibv_mr *smr = ibv_reg_mr(d.pd, src, 4096, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr *dmr = ibv_reg_mr(d.pd, dst, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    struct ibv_recv_wr rw = { .wr_id = 11 }, *bad;
    for (int round = 0; round < 3; round++) {
        rw.wr_id = 11 + (uint64_t)round;
        EXPECT_EQ_INT(0, ibv_post_srq_recv(srq, &rw, &bad));
        st_fill(src, 32, 5u + (unsigned)round);
        uint64_t p0 = pushed(a.qp);
        st_post_rdma(a.qp, IBV_WR_RDMA_WRITE_WITH_IMM, 20 + (uint64_t)round, src, 32, smr->lkey, (uintptr_t)dst,
                     dmr->rkey, 1, IBV_SEND_SIGNALED);
        struct ibv_wc wc;
        st_wait_wc(a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 20 + (uint64_t)round);
        st_wait_wc(b.rcq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, 11 + (uint64_t)round);
        EXPECT_MEMEQ(src, dst, 32);
        EXPECT_EQ_U64(p0, pushed(a.qp));
    }
    st_qp_destroy(&a);
    st_qp_destroy(&b);
    ibv_destroy_srq(srq);

    /* a recv CQ with a channel, armed: the event comes for the write */
    struct ibv_comp_channel *ch = ibv_create_comp_channel(d.ctx);
    EXPECT_TRUE(ch != NULL);
    struct st_qp c, e;
    struct st_qp_opts o2 = { .max_inline = 64 };
    st_qp_create(&d, &c, &o2, 16);
    st_qp_create(&d, &e, &o2, 16);
    ibv_destroy_qp(e.qp);
    ibv_destroy_cq(e.rcq);
    e.rcq = ibv_create_cq(d.ctx, 16, NULL, ch, 0);
    struct ibv_qp_init_attr ia = { .send_cq = e.scq, .recv_cq = e.rcq, .qp_type = IBV_QPT_RC,
                                   .cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
                                            .max_recv_sge = 1, .max_inline_data = 64 } };
    e.qp = ibv_create_qp(d.pd, &ia);
    EXPECT_TRUE(e.qp != NULL);
    struct st_qp_info ci, ei;
    st_qp_info(&d, &c, &ci);
    st_qp_info(&d, &e, &ei);
    st_qp_connect(&c, &ei);
    st_qp_connect(&e, &ci);
    for (int round = 0; round < 3; round++) {
        st_post_recv(e.qp, 31 + (uint64_t)round, NULL, 0, 0);
        EXPECT_EQ_INT(0, ibv_req_notify_cq(e.rcq, 0));
        uint64_t p0 = pushed(c.qp);
        st_post_rdma(c.qp, IBV_WR_RDMA_WRITE_WITH_IMM, 40 + (uint64_t)round, src, 32, smr->lkey, (uintptr_t)dst,
                     dmr->rkey, 2, IBV_SEND_SIGNALED);
        struct ibv_cq *evcq;
        void *evctx;
        EXPECT_EQ_INT(0, ibv_get_cq_event(ch, &evcq, &evctx));
        EXPECT_TRUE(evcq == e.rcq);
        ibv_ack_cq_events(e.rcq, 1);
        struct ibv_wc wc;
        st_wait_wc(e.rcq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, 31 + (uint64_t)round);
        st_wait_wc(c.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 40 + (uint64_t)round);
        EXPECT_EQ_U64(p0, pushed(c.qp));
    }
    st_qp_destroy(&c);
    st_qp_destroy(&e);
    ibv_destroy_comp_channel(ch);
    ibv_dereg_mr(smr);
    ibv_dereg_mr(dmr);
    munmap(src, 4096);
    munmap(dst, 4096);
    st_dev_close(&d);
}

/* A pushed write whose completion the receiver has not polled yet, when
 * the receiver's QP moves to ERR: its completion comes as a success (its
 * data landed), then the other receives flush. */
TAP_CASE(test_a_pushed_completion_precedes_the_flush)
{
    struct fixture f;
    setup(&f);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
    st_post_recv(f.b.qp, 50, NULL, 0, 0);
    st_post_recv(f.b.qp, 51, NULL, 0, 0);
    st_fill(f.src, 64, 95);
    write_imm(&f, 2, 0, 64, 9);
    struct ibv_wc wc;
    st_wait_wc(f.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 2);
    struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };
    EXPECT_EQ_INT(0, ibv_modify_qp(f.b.qp, &qa, IBV_QP_STATE));
    st_wait_wc(f.b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, 50);
    EXPECT_MEMEQ(f.src, f.dst, 64);
    st_wait_wc(f.b.rcq, &wc, WAIT_MS);
    EXPECT_EQ_U64(51, wc.wr_id);
    EXPECT_EQ_INT(IBV_WC_WR_FLUSH_ERR, wc.status);
    teardown(&f);
}

/* The peer process deregisters its region while we keep writing into it:
 * once its ibv_dereg_mr returned, none of our writes lands there (it
 * watches the bytes), and ours fail instead of reporting success. */
static bool peer_region_shared;   /* the peer's region is a sealed memfd (set before the fork) */

static void peer_deregs(int fd)
{
    struct st_dev d;
    st_dev_open(&d);
    struct st_qp q;
    struct st_qp_opts o = { .timeout = 10, .retry_cnt = 1 };
    st_qp_create(&d, &q, &o, 16);
    int mfd = -1;
    char *buf = peer_region_shared ? memfd_buf(4096, true, &mfd) : st_buf(4096, 0);
    memset(buf, 0, 4096);
    struct ibv_mr *mr = ibv_reg_mr(d.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    st_qp_connect_peer(&d, &q, fd, buf, mr);
    char go;
    st_xfer_recv(fd, &go, 1);   /* the writer's pushes are under way */
    usleep(20000);
    if (ibv_dereg_mr(mr))
        _exit(3);
    memset(buf, 0x5a, 4096);
    for (int i = 0; i < 200; i++) {   /* 200 ms of watching */
        for (int j = 0; j < 4096; j++)
            if (buf[j] != 0x5a)
                _exit(2);
        usleep(1000);
    }
    char done = 'd';
    st_xfer_send(fd, &done, 1);
    st_xfer_recv(fd, &go, 1);
    _exit(0);
}

static void no_push_after_dereg(bool shared)
{
    peer_region_shared = shared;
    int fd;
    int pid = st_fork_peer(peer_deregs, &fd);
    struct st_dev d;
    st_dev_open(&d);
    struct st_qp q;
    struct st_qp_opts o = { .timeout = 10, .retry_cnt = 1 };
    st_qp_create(&d, &q, &o, 64);
    char *src = st_buf(4096, 3);
    memset(src, 0x11, 4096);
    struct ibv_mr *mr = ibv_reg_mr(d.pd, src, 4096, IBV_ACCESS_LOCAL_WRITE);
    struct st_qp_info theirs = st_qp_connect_peer(&d, &q, fd, NULL, NULL);
    char go = 'g';
    int ok = 0, failed = 0;
    uint64_t end = st_now_ms() + WAIT_MS;
    for (uint64_t i = 0; !failed && st_now_ms() < end; i++) {
        st_post_rdma(q.qp, IBV_WR_RDMA_WRITE, i, src, 256, mr->lkey, theirs.addr + (i % 16) * 256, theirs.rkey, 0,
                     IBV_SEND_SIGNALED);
        struct ibv_wc wc;
        st_wait_wc(q.scq, &wc, WAIT_MS);
        EXPECT_EQ_U64(i, wc.wr_id);
        if (wc.status == IBV_WC_SUCCESS)
            ok++;
        else
            failed = 1;
        if (ok == 50)
            st_xfer_send(fd, &go, 1);
    }
    tap_diag("%d writes landed (%llu placed by the push), then one failed", ok,
             (unsigned long long)pushed(q.qp));
    EXPECT_TRUE(ok >= 50 && failed);
    if (st_push_on())
        EXPECT_TRUE(pushed(q.qp) >= 40);
    if (shared && push_shared_on())
        EXPECT_TRUE(stored(q.qp) >= 40);
    else
        EXPECT_EQ_U64(0, stored(q.qp));
    char done;
    st_xfer_recv(fd, &done, 1);   /* the peer watched its bytes stay */
    st_xfer_send(fd, &go, 1);
    int status;
    EXPECT_EQ_INT(pid, waitpid(pid, &status, 0));
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_EQ_INT(0, WEXITSTATUS(status));
    close(fd);
    st_qp_destroy(&q);
    ibv_dereg_mr(mr);
    st_dev_close(&d);
}

TAP_CASE(test_no_push_lands_after_the_peer_deregistered)
{
    no_push_after_dereg(false);
}

/* The same with the peer's region in a sealed memfd: the stores through
 * the mapping stop as the system calls do, at its ibv_dereg_mr. */
TAP_CASE(test_no_stored_push_lands_after_the_peer_deregistered)
{
    no_push_after_dereg(true);
}

/* A QP a GPU drives (softnic's mlx5 layer posts what the GPU rang and
 * makes the GPU's CQEs from its completions after the post) is never
 * pushed: its writes take the wire and complete there. */
TAP_CASE(test_a_gpu_driven_qp_places_nothing)
{
    int (*poll_acks)(struct ibv_qp *) = (int (*)(struct ibv_qp *))dlsym(RTLD_DEFAULT, "softnic_priv_qp_poll_acks");
    EXPECT_TRUE(poll_acks != NULL);
    struct fixture f;
    setup(&f);
    EXPECT_EQ_INT(0, poll_acks(f.a.qp));
    uint64_t p0 = pushed(f.a.qp);
    for (int i = 0; i < 10; i++) {
        st_fill(f.src, 256, 80u + (unsigned)i);
        EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 10 + (uint64_t)i, 0, 256, f.dmr->rkey, 0));
        EXPECT_MEMEQ(f.src, f.dst, 256);
    }
    EXPECT_EQ_U64(p0, pushed(f.a.qp));
    /* its peer, an ordinary QP, pushes back */
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 30, 0, 64, f.dmr->rkey, 0));
    uint64_t q0 = pushed(f.b.qp);
    struct ibv_mr *bmr = ibv_reg_mr(f.d.pd, f.src, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    struct ibv_wc wc;
    for (uint64_t id = 40; id < 42; id++) {   /* the first opens the connection */
        st_post_rdma(f.b.qp, IBV_WR_RDMA_WRITE, id, f.dst, 64, f.dmr->lkey, (uintptr_t)f.src + 4096, bmr->rkey, 0,
                     IBV_SEND_SIGNALED);
        st_wait_wc(f.b.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, id);
    }
    EXPECT_MEMEQ(f.dst, f.src + 4096, 64);
    EXPECT_TRUE(!st_push_on() || pushed(f.b.qp) > q0);
    ibv_dereg_mr(bmr);
    teardown(&f);
}

/* A paced port keeps its pacing: nothing is placed around the limit. */
TAP_CASE(test_a_paced_port_places_nothing)
{
    struct fixture f;
    setup(&f);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
    EXPECT_EQ_INT(0, st_ctl()->port_set_rate(f.d.ctx, 1, 1000000000ull));
    uint64_t p0 = pushed(f.a.qp);
    for (int i = 0; i < 10; i++)
        EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 10 + (uint64_t)i, 0, 256, f.dmr->rkey, 0));
    EXPECT_MEMEQ(f.src, f.dst, 256);
    EXPECT_EQ_U64(p0, pushed(f.a.qp));
    teardown(&f);
}

int main(int argc, char **argv) { return sntest_main(argc, argv); }
