/* tests/softnic/test_softnic_mr.c: memory registration: access flags,
 * iova, dmabuf, keys, protection domains, memory that is not mapped, and
 * reregistration (ibv_rereg_mr) of host and CUDA memory. */
#include "sntest.h"

#include "plugin/ib/cudawrap.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define WAIT_MS 5000
#define ALL_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

TAP_CASE(test_reg_mr_fills_the_mr_and_checks_access_flags)
{
    struct st_dev d;
    st_dev_open(&d);
    char *buf = st_buf(8192, 1);
    struct ibv_mr *mr = ibv_reg_mr(d.pd, buf, 8192, ALL_ACCESS);
    EXPECT_TRUE(mr != NULL);
    EXPECT_TRUE(mr->addr == buf);
    EXPECT_EQ_INT(8192, mr->length);
    EXPECT_TRUE(mr->pd == d.pd && mr->context == d.ctx);
    EXPECT_EQ_INT(0, ibv_dereg_mr(mr));
    /* remote write needs local write (verbs contract) */
    errno = 0;
    EXPECT_TRUE(ibv_reg_mr(d.pd, buf, 8192, IBV_ACCESS_REMOTE_WRITE) == NULL);
    EXPECT_EQ_INT(EINVAL, errno);
    /* a mandatory bit nobody knows */
    errno = 0;
    EXPECT_TRUE(ibv_reg_mr(d.pd, buf, 8192, 1 << 19) == NULL);
    EXPECT_EQ_INT(EINVAL, errno);
    /* zero length */
    EXPECT_TRUE(ibv_reg_mr(d.pd, buf, 0, 0) == NULL);
    st_dev_close(&d);
}

TAP_CASE(test_relaxed_ordering_is_accepted_as_an_optional_flag)
{
    struct st_dev d;
    st_dev_open(&d);
    char *buf = st_buf(4096, 1);
    /* verbs.h routes ibv_reg_mr with optional flags to ibv_reg_mr_iova2 */
    struct ibv_mr *mr = ibv_reg_mr(d.pd, buf, 4096, ALL_ACCESS | IBV_ACCESS_RELAXED_ORDERING);
    EXPECT_TRUE(mr != NULL);
    EXPECT_EQ_INT(0, ibv_dereg_mr(mr));
    mr = ibv_reg_mr_iova2(d.pd, buf, 4096, (uintptr_t)buf,
                          ALL_ACCESS | IBV_ACCESS_RELAXED_ORDERING);
    EXPECT_TRUE(mr != NULL);
    EXPECT_EQ_INT(0, ibv_dereg_mr(mr));
    st_dev_close(&d);
}

TAP_CASE(test_iova_is_the_address_remote_peers_use)
{
    struct st_dev d;
    st_dev_open(&d);
    struct st_qp a, b;
    st_qp_pair(&d, &a, &b, NULL);
    char *src = st_buf(4096, 2), *dst = st_buf(8192, 3);
    struct ibv_mr *smr = ibv_reg_mr(d.pd, src, 4096, 0);
    uint64_t iova = 0x100000000ull;
    struct ibv_mr *dmr = ibv_reg_mr_iova(d.pd, dst, 8192, iova, ALL_ACCESS);
    EXPECT_TRUE(dmr != NULL);
    st_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 1, src, 100, smr->lkey, iova + 1000, dmr->rkey, 0,
                 IBV_SEND_SIGNALED);
    struct ibv_wc wc;
    st_wait_wc(a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 1);
    EXPECT_MEMEQ(src, dst + 1000, 100);
    /* the virtual address is not a valid remote address of this MR */
    st_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 2, src, 100, smr->lkey, (uintptr_t)dst, dmr->rkey, 0,
                 IBV_SEND_SIGNALED);
    st_wait_wc(a.scq, &wc, WAIT_MS);
    EXPECT_EQ_INT(IBV_WC_REM_ACCESS_ERR, wc.status);
    EXPECT_EQ_INT(0, ibv_dereg_mr(smr));
    EXPECT_EQ_INT(0, ibv_dereg_mr(dmr));
    st_qp_destroy(&a);
    st_qp_destroy(&b);
    st_dev_close(&d);
}

TAP_CASE(test_mr_of_another_pd_is_refused_locally_and_remotely)
{
    struct st_dev d;
    st_dev_open(&d);
    struct ibv_pd *pd2 = ibv_alloc_pd(d.ctx);
    struct st_qp a, b;
    st_qp_pair(&d, &a, &b, NULL);
    char *buf = st_buf(4096, 4);
    struct ibv_mr *own = ibv_reg_mr(d.pd, buf, 4096, ALL_ACCESS);
    struct ibv_mr *other = ibv_reg_mr(pd2, buf, 4096, ALL_ACCESS);
    st_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 1, buf, 8, own->lkey, (uintptr_t)buf + 100,
                 other->rkey, 0, IBV_SEND_SIGNALED);
    struct ibv_wc wc;
    st_wait_wc(a.scq, &wc, WAIT_MS);
    EXPECT_EQ_INT(IBV_WC_REM_ACCESS_ERR, wc.status);
    struct st_qp c, e;
    st_qp_pair(&d, &c, &e, NULL);
    st_post_rdma(c.qp, IBV_WR_RDMA_WRITE, 2, buf, 8, other->lkey, (uintptr_t)buf + 100,
                 own->rkey, 0, IBV_SEND_SIGNALED);
    st_wait_wc(c.scq, &wc, WAIT_MS);
    EXPECT_EQ_INT(IBV_WC_LOC_PROT_ERR, wc.status);
    EXPECT_EQ_INT(0, ibv_dereg_mr(own));
    EXPECT_EQ_INT(0, ibv_dereg_mr(other));
    st_qp_destroy(&a);
    st_qp_destroy(&b);
    st_qp_destroy(&c);
    st_qp_destroy(&e);
    EXPECT_EQ_INT(0, ibv_dealloc_pd(pd2));
    st_dev_close(&d);
}

/* A ConnectX's registration pins the pages: a range that is not mapped,
 * or runs across a hole, fails with EFAULT; the pages beside the hole
 * register. */
TAP_CASE(test_reg_mr_of_unmapped_memory_fails_with_efault)
{
    struct st_dev d;
    st_dev_open(&d);
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    /* far below where the kernel places new mappings: a thread of the
     * CUDA driver or of softnic that maps memory meanwhile does not land
     * in the hole (on a GPU host one did) */
    char *map = mmap((void *)(uintptr_t)0x100000000000ull, 3 * pg, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (map == MAP_FAILED)
        map = mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_TRUE(map != MAP_FAILED);
    EXPECT_EQ_INT(0, munmap(map + pg, pg));   /* the hole: the middle page */
    errno = 0;
    EXPECT_TRUE(ibv_reg_mr(d.pd, map + pg + 64, 64, ALL_ACCESS) == NULL);
    EXPECT_EQ_INT(EFAULT, errno);
    errno = 0;
    EXPECT_TRUE(ibv_reg_mr(d.pd, map + pg - 64, pg + 128, ALL_ACCESS) == NULL);
    EXPECT_EQ_INT(EFAULT, errno);
    errno = 0;
    EXPECT_TRUE(ibv_reg_mr(d.pd, map + pg - 1, 2, ALL_ACCESS) == NULL);   /* one byte into it */
    EXPECT_EQ_INT(EFAULT, errno);
    struct ibv_mr *a = ibv_reg_mr(d.pd, map, pg, ALL_ACCESS);
    struct ibv_mr *b = ibv_reg_mr(d.pd, map + 2 * pg, pg, ALL_ACCESS);
    EXPECT_TRUE(a != NULL && b != NULL);
    EXPECT_EQ_INT(0, ibv_dereg_mr(a));
    EXPECT_EQ_INT(0, ibv_dereg_mr(b));
    munmap(map, pg);
    munmap(map + 2 * pg, pg);
    st_dev_close(&d);
}

TAP_CASE(test_many_registrations_get_distinct_keys)
{
    enum { N = 2000 };
    struct st_dev d;
    st_dev_open(&d);
    char *buf = st_buf(4096, 5);
    static struct ibv_mr *mr[N];
    for (int i = 0; i < N; i++) {
        mr[i] = ibv_reg_mr(d.pd, buf + (i % 4000), 64, IBV_ACCESS_LOCAL_WRITE);
        EXPECT_TRUE(mr[i] != NULL);
    }
    /* keys are unique: sort-free check through a bitmap of the low bits */
    static unsigned char seen[1 << 20];
    for (int i = 0; i < N; i++) {
        uint32_t k = mr[i]->lkey & ((1u << 23) - 1);
        EXPECT_TRUE(!(seen[k >> 3] & (1u << (k & 7))));
        seen[k >> 3] |= (unsigned char)(1u << (k & 7));
    }
    for (int i = 0; i < N; i++)
        EXPECT_EQ_INT(0, ibv_dereg_mr(mr[i]));
    st_dev_close(&d);
}

TAP_CASE(test_dmabuf_registration_validates_the_fd)
{
    struct st_dev d;
    st_dev_open(&d);
    errno = 0;
    EXPECT_TRUE(ibv_reg_dmabuf_mr(d.pd, 0, 4096, 0x1000, -1, ALL_ACCESS) == NULL);
    EXPECT_EQ_INT(EBADF, errno);
    /* host memory behind a valid fd is not a GPU buffer */
    int fd = memfd_create("not-a-dmabuf", 0);
    EXPECT_TRUE(fd >= 0);
    EXPECT_EQ_INT(0, ftruncate(fd, 4096));
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    errno = 0;
    EXPECT_TRUE(ibv_reg_dmabuf_mr(d.pd, 0, 4096, (uintptr_t)p, fd, ALL_ACCESS) == NULL);
    EXPECT_TRUE(errno != 0);
    close(fd);
    st_dev_close(&d);
}

/* ------------------------------------------------------------ ibv_rereg_mr
 *
 * A peer QP writes into and reads from a reregistered MR (the target) and
 * every byte is checked.  Each case runs at two sizes: 1000 bytes travel on
 * the connection, 64 KiB are pulled by the same-host fast path when it is
 * on (cma.c; test_softnic_fastpath_off.sh runs this program again with it
 * off).  The keys stay what they were, as on mlx5. */

#define SMALL 1000u
#define LARGE (64u << 10)
#define BIG (2 * LARGE)   /* room for the longest translation of a case */

static bool fast_on(void)
{
    const char *v = getenv("SOFTNIC_FASTPATH");
    return !v || !*v || strcmp(v, "0") != 0;
}

/* A device with two PDs, a connected QP pair on each (a posts, b is the
 * target's side; c/e likewise on pd2), and the peer's buffer registered in
 * both PDs: its first half is the source of writes, its second the sink of
 * reads. */
struct rr {
    struct st_dev d;
    struct ibv_pd *pd2;
    struct st_qp a, b, c, e;
    char *peer;
    struct ibv_mr *pmr, *pmr2;
};

static void rr_open(struct rr *f)
{
    memset(f, 0, sizeof(*f));
    st_dev_open(&f->d);
    f->pd2 = ibv_alloc_pd(f->d.ctx);
    EXPECT_TRUE(f->pd2 != NULL);
    struct st_dev d2 = { .ctx = f->d.ctx, .pd = f->pd2 };
    st_qp_pair(&f->d, &f->a, &f->b, NULL);
    st_qp_pair(&d2, &f->c, &f->e, NULL);
    f->peer = st_buf(2 * BIG, 50);
    f->pmr = ibv_reg_mr(f->d.pd, f->peer, 2 * BIG, ALL_ACCESS);
    f->pmr2 = ibv_reg_mr(f->pd2, f->peer, 2 * BIG, ALL_ACCESS);
    EXPECT_TRUE(f->pmr && f->pmr2);
}

static void rr_close(struct rr *f)
{
    EXPECT_EQ_INT(0, ibv_dereg_mr(f->pmr));
    EXPECT_EQ_INT(0, ibv_dereg_mr(f->pmr2));
    st_qp_destroy(&f->a);
    st_qp_destroy(&f->b);
    st_qp_destroy(&f->c);
    st_qp_destroy(&f->e);
    EXPECT_EQ_INT(0, ibv_dealloc_pd(f->pd2));
    st_dev_close(&f->d);
}

/* The poster and target of the pair on pd (false) or pd2 (true), and the
 * peer buffer's key there. */
static struct st_qp *rr_poster(struct rr *f, bool on_pd2) { return on_pd2 ? &f->c : &f->a; }
static struct st_qp *rr_target(struct rr *f, bool on_pd2) { return on_pd2 ? &f->e : &f->b; }
static uint32_t rr_lkey(struct rr *f, bool on_pd2) { return on_pd2 ? f->pmr2->lkey : f->pmr->lkey; }

static uint64_t fast_bytes(struct ibv_qp *qp) { return st_qp_count(st_ctl()->qp_fast_bytes, qp); }

/* What the fast path carried of a write of n bytes, counted from before
 * to after: nothing when it is off or for a payload the wire carries;
 * else all of it -- or nothing where the responder declined to pull from
 * this process (cma.c: under valgrind, or where ptrace rules forbid it;
 * test_softnic_fastpath holds it to pulling). */
#define EXPECT_PATH(before, after, n)                                                   \
    do {                                                                                \
        uint64_t d_ = (after) - (before);                                               \
        if (d_ != 0 && (!fast_on() || (n) < 4096 || d_ != (n)))                         \
            tap_fail_at(__FILE__, __LINE__, "%" PRIu64 " of %u bytes pulled", d_,       \
                        (unsigned)(n));                                                 \
    } while (0)

/* One signaled RDMA op of len bytes between the peer buffer at off and
 * [raddr, raddr + len) of rkey; returns its status (wr_id and, on success,
 * the opcode checked). */
static enum ibv_wc_status rr_op(struct rr *f, bool on_pd2, enum ibv_wr_opcode op, size_t off,
                                uint32_t len, uint64_t raddr, uint32_t rkey)
{
    static uint64_t id = 1000;
    struct st_qp *q = rr_poster(f, on_pd2);
    st_post_rdma(q->qp, op, ++id, f->peer + off, len, rr_lkey(f, on_pd2), raddr, rkey, 0,
                 IBV_SEND_SIGNALED);
    struct ibv_wc wc;
    st_wait_wc(q->scq, &wc, WAIT_MS);
    EXPECT_EQ_U64(id, wc.wr_id);
    if (wc.status == IBV_WC_SUCCESS)
        EXPECT_EQ_INT(op == IBV_WR_RDMA_WRITE ? IBV_WC_RDMA_WRITE : IBV_WC_RDMA_READ, wc.opcode);
    tap_progress();
    return wc.status;
}

/* A peer's RDMA WRITE of len bytes into tgt (an address of mr's current
 * translation) and its READ back: both succeed, every byte lands where it
 * should and the byte after the write's range (when in the MR) stays; the
 * fast path carries the write whole or not at all (EXPECT_PATH). */
static void rr_write_read(struct rr *f, bool on_pd2, struct ibv_mr *mr, char *tgt, uint32_t len,
                          unsigned seed)
{
    char *src = f->peer, *sink = f->peer + BIG;
    char *end = (char *)mr->addr + mr->length;
    bool tail = tgt + len < end;
    char after = tail ? tgt[len] : 0;
    st_fill(src, len, seed);
    uint64_t fb = fast_bytes(rr_target(f, on_pd2)->qp);
    EXPECT_EQ_INT(IBV_WC_SUCCESS,
                  rr_op(f, on_pd2, IBV_WR_RDMA_WRITE, 0, len, (uintptr_t)tgt, mr->rkey));
    EXPECT_MEMEQ(src, tgt, len);
    if (tail)
        EXPECT_EQ_INT(after, tgt[len]);
    EXPECT_PATH(fb, fast_bytes(rr_target(f, on_pd2)->qp), len);
    st_fill(tgt, len, seed + 1);   /* the owner changes its memory: the read must see it */
    memset(sink, 0, len);
    EXPECT_EQ_INT(IBV_WC_SUCCESS,
                  rr_op(f, on_pd2, IBV_WR_RDMA_READ, BIG, len, (uintptr_t)tgt, mr->rkey));
    EXPECT_MEMEQ(tgt, sink, len);
}

static const uint32_t rr_sizes[] = { SMALL, LARGE };

TAP_CASE(test_rereg_translation_same_length_keeps_keys_and_moves_remote_access)
{
    for (size_t k = 0; k < sizeof(rr_sizes) / sizeof(rr_sizes[0]); k++) {
        uint32_t len = rr_sizes[k];
        struct rr f;
        rr_open(&f);
        char *old = st_buf(len, 1), *neu = st_buf(len, 2), *keep = st_buf(len, 0);
        struct ibv_mr *mr = ibv_reg_mr(f.d.pd, old, len, ALL_ACCESS);
        EXPECT_TRUE(mr != NULL);
        uint32_t lkey = mr->lkey, rkey = mr->rkey;
        rr_write_read(&f, false, mr, old, len, 10);
        memcpy(keep, old, len);
        EXPECT_EQ_INT(0, ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, neu, len, 0));
        EXPECT_TRUE(mr->addr == neu && mr->length == len && mr->pd == f.d.pd);
        EXPECT_EQ_U64(lkey, mr->lkey);
        EXPECT_EQ_U64(rkey, mr->rkey);
        /* the same QPs, twice: nothing of the old translation stays */
        rr_write_read(&f, false, mr, neu, len, 20);
        rr_write_read(&f, false, mr, neu + len / 2, len / 2, 30);
        EXPECT_MEMEQ(keep, old, len);   /* the old buffer is not written any more */
        /* the MR's lkey now names the new buffer locally too */
        st_fill(neu, len, 40);
        st_post_rdma(f.a.qp, IBV_WR_RDMA_WRITE, 7, neu, len, mr->lkey, (uintptr_t)f.peer + BIG,
                     f.pmr->rkey, 0, IBV_SEND_SIGNALED);
        struct ibv_wc wc;
        st_wait_wc(f.a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 7);
        EXPECT_MEMEQ(neu, f.peer + BIG, len);
        /* the old addresses are outside the MR: a remote access error */
        EXPECT_EQ_INT(IBV_WC_REM_ACCESS_ERR,
                      rr_op(&f, false, IBV_WR_RDMA_WRITE, 0, len, (uintptr_t)old, rkey));
        EXPECT_MEMEQ(keep, old, len);
        EXPECT_EQ_INT(0, ibv_dereg_mr(mr));
        rr_close(&f);
        munmap(old, len);
        munmap(neu, len);
        munmap(keep, len);
    }
}

TAP_CASE(test_rereg_translation_to_another_length)
{
    for (size_t k = 0; k < sizeof(rr_sizes) / sizeof(rr_sizes[0]); k++) {
        uint32_t len = rr_sizes[k];
        struct rr f;
        rr_open(&f);
        char *old = st_buf(len, 1), *longer = st_buf(2 * len, 2), *shorter = st_buf(len / 2, 3);
        struct ibv_mr *mr = ibv_reg_mr(f.d.pd, old, len, ALL_ACCESS);
        EXPECT_TRUE(mr != NULL);
        uint32_t rkey = mr->rkey;
        rr_write_read(&f, false, mr, old, len, 10);
        /* longer: the whole of it is reachable, to the last byte */
        EXPECT_EQ_INT(0, ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, longer, 2 * len, 0));
        EXPECT_TRUE(mr->addr == longer && mr->length == 2 * len && mr->rkey == rkey);
        rr_write_read(&f, false, mr, longer, 2 * len, 20);
        rr_write_read(&f, false, mr, longer + 2 * len - 64, 64, 30);
        /* shorter: what fits works, one byte past the end is refused */
        EXPECT_EQ_INT(0, ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, shorter, len / 2, 0));
        EXPECT_TRUE(mr->addr == shorter && mr->length == len / 2 && mr->rkey == rkey);
        rr_write_read(&f, false, mr, shorter, len / 2, 40);
        EXPECT_EQ_INT(IBV_WC_REM_ACCESS_ERR,
                      rr_op(&f, false, IBV_WR_RDMA_READ, BIG, len / 2 + 1, (uintptr_t)shorter, rkey));
        EXPECT_EQ_INT(0, ibv_dereg_mr(mr));
        rr_close(&f);
        munmap(old, len);
        munmap(longer, 2 * len);
        munmap(shorter, len / 2);
    }
}

TAP_CASE(test_rereg_pd_moves_the_mr_to_the_qps_of_the_new_pd)
{
    for (size_t k = 0; k < sizeof(rr_sizes) / sizeof(rr_sizes[0]); k++) {
        uint32_t len = rr_sizes[k];
        struct rr f;
        rr_open(&f);
        char *buf = st_buf(len, 1), *keep = st_buf(len, 0);
        struct ibv_mr *mr = ibv_reg_mr(f.d.pd, buf, len, ALL_ACCESS);
        EXPECT_TRUE(mr != NULL);
        uint32_t lkey = mr->lkey, rkey = mr->rkey;
        rr_write_read(&f, false, mr, buf, len, 10);
        EXPECT_EQ_INT(0, ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, f.pd2, NULL, 0, 0));
        EXPECT_TRUE(mr->pd == f.pd2 && mr->addr == buf && mr->length == len);
        EXPECT_EQ_U64(lkey, mr->lkey);
        EXPECT_EQ_U64(rkey, mr->rkey);
        /* the QPs of the new PD reach it, the same pair twice */
        rr_write_read(&f, true, mr, buf, len, 20);
        rr_write_read(&f, true, mr, buf, len, 30);
        /* a QP of the old PD is refused, and its later work flushes */
        memcpy(keep, buf, len);
        st_fill(f.peer, len, 40);
        st_post_rdma(f.a.qp, IBV_WR_RDMA_WRITE, 1, f.peer, len, f.pmr->lkey, (uintptr_t)buf, rkey,
                     0, IBV_SEND_SIGNALED);
        st_post_rdma(f.a.qp, IBV_WR_RDMA_READ, 2, f.peer + BIG, len, f.pmr->lkey, (uintptr_t)buf,
                     rkey, 0, IBV_SEND_SIGNALED);
        struct ibv_wc wc;
        st_wait_wc(f.a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_REM_ACCESS_ERR, -1, 1);
        st_wait_wc(f.a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_WR_FLUSH_ERR, -1, 2);
        EXPECT_MEMEQ(keep, buf, len);
        /* nor may the old PD's QPs use its lkey locally */
        struct st_qp g, h;
        st_qp_pair(&f.d, &g, &h, NULL);
        st_post_rdma(g.qp, IBV_WR_RDMA_WRITE, 3, buf, len, lkey, (uintptr_t)f.peer + BIG,
                     f.pmr->rkey, 0, IBV_SEND_SIGNALED);
        st_wait_wc(g.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_LOC_PROT_ERR, -1, 3);
        st_qp_destroy(&g);
        st_qp_destroy(&h);
        /* the old PD is free of it; the MR moves back and works there again */
        EXPECT_EQ_INT(0, ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, f.d.pd, NULL, 0, 0));
        EXPECT_EQ_INT(EBUSY, ibv_dealloc_pd(f.d.pd));   /* the MR and QPs are on it */
        st_qp_pair(&f.d, &g, &h, NULL);
        struct st_qp sa = f.a, sb = f.b;
        f.a = g;
        f.b = h;
        rr_write_read(&f, false, mr, buf, len, 50);
        f.a = sa;
        f.b = sb;
        st_qp_destroy(&g);
        st_qp_destroy(&h);
        EXPECT_EQ_INT(0, ibv_dereg_mr(mr));
        rr_close(&f);
        munmap(buf, len);
        munmap(keep, len);
    }
}

TAP_CASE(test_rereg_access_is_enforced_on_the_next_remote_op)
{
    for (size_t k = 0; k < sizeof(rr_sizes) / sizeof(rr_sizes[0]); k++) {
        uint32_t len = rr_sizes[k];
        struct rr f;
        rr_open(&f);
        char *buf = st_buf(len, 1), *keep = st_buf(len, 0);
        struct ibv_mr *mr = ibv_reg_mr(f.d.pd, buf, len, ALL_ACCESS);
        EXPECT_TRUE(mr != NULL);
        uint32_t rkey = mr->rkey;
        rr_write_read(&f, false, mr, buf, len, 10);
        /* without REMOTE_WRITE: reads work, a write is refused */
        EXPECT_EQ_INT(0, ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
                                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ));
        EXPECT_EQ_U64(rkey, mr->rkey);
        memset(f.peer + BIG, 0, len);
        EXPECT_EQ_INT(IBV_WC_SUCCESS,
                      rr_op(&f, false, IBV_WR_RDMA_READ, BIG, len, (uintptr_t)buf, rkey));
        EXPECT_MEMEQ(buf, f.peer + BIG, len);
        memcpy(keep, buf, len);
        st_fill(f.peer, len, 20);
        EXPECT_EQ_INT(IBV_WC_REM_ACCESS_ERR,
                      rr_op(&f, false, IBV_WR_RDMA_WRITE, 0, len, (uintptr_t)buf, rkey));
        EXPECT_MEMEQ(keep, buf, len);
        /* REMOTE_WRITE back (the pair on pd2 is fresh; the MR moves there) */
        EXPECT_EQ_INT(0, ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS | IBV_REREG_MR_CHANGE_PD,
                                      f.pd2, NULL, 0, ALL_ACCESS));
        rr_write_read(&f, true, mr, buf, len, 30);
        /* without REMOTE_READ: writes work, a read is refused */
        EXPECT_EQ_INT(0, ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
                                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
        st_fill(f.peer, len, 40);
        EXPECT_EQ_INT(IBV_WC_SUCCESS,
                      rr_op(&f, true, IBV_WR_RDMA_WRITE, 0, len, (uintptr_t)buf, rkey));
        EXPECT_MEMEQ(f.peer, buf, len);
        memset(f.peer + BIG, 0, len);
        EXPECT_EQ_INT(IBV_WC_REM_ACCESS_ERR,
                      rr_op(&f, true, IBV_WR_RDMA_READ, BIG, len, (uintptr_t)buf, rkey));
        for (uint32_t i = 0; i < len; i++)
            if (f.peer[BIG + i])
                tap_fail_at(__FILE__, __LINE__, "a refused read wrote byte %u", i);
        EXPECT_EQ_INT(0, ibv_dereg_mr(mr));
        rr_close(&f);
        munmap(buf, len);
        munmap(keep, len);
    }
}

TAP_CASE(test_rereg_translation_pd_and_access_at_once)
{
    for (size_t k = 0; k < sizeof(rr_sizes) / sizeof(rr_sizes[0]); k++) {
        uint32_t len = rr_sizes[k];
        struct rr f;
        rr_open(&f);
        char *old = st_buf(len, 1), *neu = st_buf(2 * len, 2), *keep = st_buf(len, 0);
        struct ibv_mr *mr = ibv_reg_mr(f.d.pd, old, len, IBV_ACCESS_LOCAL_WRITE);
        EXPECT_TRUE(mr != NULL);
        uint32_t lkey = mr->lkey, rkey = mr->rkey;
        EXPECT_EQ_INT(IBV_WC_REM_ACCESS_ERR,
                      rr_op(&f, false, IBV_WR_RDMA_READ, BIG, len, (uintptr_t)old, rkey));
        EXPECT_EQ_INT(0, ibv_rereg_mr(mr,
                                      IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD |
                                          IBV_REREG_MR_CHANGE_ACCESS,
                                      f.pd2, neu, 2 * len, ALL_ACCESS));
        EXPECT_TRUE(mr->addr == neu && mr->length == 2 * len && mr->pd == f.pd2);
        EXPECT_EQ_U64(lkey, mr->lkey);
        EXPECT_EQ_U64(rkey, mr->rkey);
        memcpy(keep, old, len);
        rr_write_read(&f, true, mr, neu, 2 * len, 10);
        rr_write_read(&f, true, mr, neu + len, len, 20);
        EXPECT_MEMEQ(keep, old, len);
        /* translation and access back, the PD stays */
        EXPECT_EQ_INT(0, ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS,
                                      NULL, old, len,
                                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
        EXPECT_TRUE(mr->addr == old && mr->length == len && mr->pd == f.pd2);
        st_fill(f.peer, len, 30);
        EXPECT_EQ_INT(IBV_WC_SUCCESS,
                      rr_op(&f, true, IBV_WR_RDMA_WRITE, 0, len, (uintptr_t)old, rkey));
        EXPECT_MEMEQ(f.peer, old, len);
        EXPECT_EQ_INT(IBV_WC_REM_ACCESS_ERR,
                      rr_op(&f, true, IBV_WR_RDMA_READ, BIG, len, (uintptr_t)old, rkey));
        EXPECT_EQ_INT(0, ibv_dereg_mr(mr));
        rr_close(&f);
        munmap(old, len);
        munmap(neu, 2 * len);
        munmap(keep, len);
    }
}

/* Refused with code (errno EINVAL), and the MR is the same region, usable
 * as before by the same QPs. */
static void rr_refused(struct rr *f, struct ibv_mr *mr, int code, int flags, struct ibv_pd *pd,
                       void *addr, size_t len, int access, unsigned seed)
{
    struct ibv_mr was = *mr;
    errno = 0;
    EXPECT_EQ_INT(code, ibv_rereg_mr(mr, flags, pd, addr, len, access));
    EXPECT_EQ_INT(EINVAL, errno);
    EXPECT_TRUE(memcmp(&was, mr, sizeof(was)) == 0);
    rr_write_read(f, false, mr, mr->addr, (uint32_t)mr->length, seed);
}

/* What libibverbs refuses before it asks the device is
 * IBV_REREG_MR_ERR_INPUT; what a ConnectX's kernel refuses is
 * IBV_REREG_MR_ERR_CMD (that MR "should not be used", but must still be
 * deregistered: softnic leaves it unchanged). */
TAP_CASE(test_rereg_refused_leaves_the_mr_as_it_was)
{
    const int in = IBV_REREG_MR_ERR_INPUT, cmd = IBV_REREG_MR_ERR_CMD;
    const int trans = IBV_REREG_MR_CHANGE_TRANSLATION, pdf = IBV_REREG_MR_CHANGE_PD,
              acc = IBV_REREG_MR_CHANGE_ACCESS;
    for (size_t k = 0; k < sizeof(rr_sizes) / sizeof(rr_sizes[0]); k++) {
        uint32_t len = rr_sizes[k];
        struct rr f;
        rr_open(&f);
        char *buf = st_buf(len, 1), *neu = st_buf(len, 2);
        struct ibv_mr *mr = ibv_reg_mr(f.d.pd, buf, len, ALL_ACCESS);
        EXPECT_TRUE(mr != NULL);
        rr_write_read(&f, false, mr, buf, len, 10);
        /* a flag nobody knows, alone or beside valid ones */
        rr_refused(&f, mr, in, 1 << 3, NULL, NULL, 0, 0, 20);
        rr_refused(&f, mr, in, trans | pdf | acc | 1 << 3, f.pd2, neu, len, IBV_ACCESS_LOCAL_WRITE, 21);
        rr_refused(&f, mr, in, -1, f.pd2, neu, len, IBV_ACCESS_LOCAL_WRITE, 22);
        /* access flags without IBV_REREG_MR_CHANGE_ACCESS */
        rr_refused(&f, mr, in, trans, NULL, neu, len, ALL_ACCESS, 23);
        rr_refused(&f, mr, in, pdf, f.pd2, NULL, 0, IBV_ACCESS_LOCAL_WRITE, 24);
        /* a translation without an address or a length; a PD change without a PD */
        rr_refused(&f, mr, in, trans, NULL, NULL, len, 0, 25);
        rr_refused(&f, mr, in, trans, NULL, neu, 0, 0, 26);
        rr_refused(&f, mr, in, pdf | trans, NULL, neu, len, 0, 27);
        /* no flag; a translation that wraps; an access set no MR may have */
        rr_refused(&f, mr, cmd, 0, NULL, NULL, 0, 0, 28);
        rr_refused(&f, mr, cmd, trans, NULL, (void *)(uintptr_t)-4096, 8192, 0, 29);
        rr_refused(&f, mr, cmd, acc | trans, NULL, neu, len, IBV_ACCESS_REMOTE_WRITE, 30);
        rr_refused(&f, mr, cmd, acc, NULL, NULL, 0, 1 << 19, 31);
        EXPECT_EQ_INT(0, ibv_dereg_mr(mr));
        rr_close(&f);
        munmap(buf, len);
        munmap(neu, len);
    }
}

/* A reregistration onto memory that is not mapped fails as a ConnectX's
 * kernel fails it (EFAULT) and leaves the MR as it was. */
TAP_CASE(test_rereg_onto_unmapped_memory_fails_with_efault)
{
    struct rr f;
    rr_open(&f);
    const uint32_t len = 8192;
    char *buf = st_buf(len, 1), *gone = st_buf(len, 2);
    EXPECT_EQ_INT(0, munmap(gone, len));
    struct ibv_mr *mr = ibv_reg_mr(f.d.pd, buf, len, ALL_ACCESS);
    EXPECT_TRUE(mr != NULL);
    struct ibv_mr was = *mr;
    errno = 0;
    EXPECT_EQ_INT(IBV_REREG_MR_ERR_CMD, ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, gone, len, 0));
    EXPECT_EQ_INT(EFAULT, errno);
    EXPECT_TRUE(memcmp(&was, mr, sizeof(was)) == 0);
    rr_write_read(&f, false, mr, buf, len, 41);
    EXPECT_EQ_INT(0, ibv_dereg_mr(mr));
    rr_close(&f);
    munmap(buf, len);
}

/* An operation under way when its MR is reregistered completes on the old
 * translation; what is posted after uses the new one.  A SEND of the
 * MR's bytes waits at the responder for a receive (its payload pinned
 * there when the fast path pulls it) while another thread moves the MR to
 * a new buffer; then the receive comes: the old bytes arrive, the rereg
 * returns, and a SEND after it carries the new buffer's bytes. */
struct rr_job {
    struct ibv_mr *mr;
    void *addr;
    size_t len;
    _Atomic int ret, done;
};

static void *rr_job_main(void *arg)
{
    struct rr_job *j = arg;
    atomic_store(&j->ret, ibv_rereg_mr(j->mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, j->addr,
                                       j->len, 0));
    atomic_store(&j->done, 1);
    return NULL;
}

TAP_CASE(test_rereg_under_an_operation_in_flight)
{
    for (size_t k = 0; k < sizeof(rr_sizes) / sizeof(rr_sizes[0]); k++) {
        uint32_t len = rr_sizes[k];
        struct rr f;
        rr_open(&f);
        char *old = st_buf(len, 1), *neu = st_buf(len, 2), *want = st_buf(len, 1);
        char *sink = f.peer + BIG;
        struct ibv_mr *mr = ibv_reg_mr(f.d.pd, old, len, ALL_ACCESS);
        EXPECT_TRUE(mr != NULL);
        memset(sink, 0, len);
        st_post_send(f.a.qp, 1, old, len, mr->lkey, IBV_SEND_SIGNALED);
        struct softnic_ctl_counters c = { 0 };
        uint64_t end = st_now_ms() + WAIT_MS;
        while (c.rnr_naks == 0 && st_now_ms() < end) {
            EXPECT_EQ_INT(0, st_ctl()->qp_counters(f.b.qp, &c));
            usleep(1000);
        }
        EXPECT_TRUE(c.rnr_naks > 0);   /* at the responder, waiting for a receive */
        struct rr_job j = { .mr = mr, .addr = neu, .len = len, .ret = -100 };
        pthread_t t;
        EXPECT_EQ_INT(0, pthread_create(&t, NULL, rr_job_main, &j));
        usleep(20 * 1000);
        st_post_recv(f.b.qp, 2, sink, len, f.pmr->lkey);
        struct ibv_wc wc;
        st_wait_wc(f.a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 1);
        st_wait_wc(f.b.rcq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 2);
        EXPECT_EQ_INT(len, wc.byte_len);
        EXPECT_MEMEQ(want, sink, len);
        end = st_now_ms() + WAIT_MS;
        while (!atomic_load(&j.done) && st_now_ms() < end)
            usleep(1000);
        if (!atomic_load(&j.done))
            tap_fail_at(__FILE__, __LINE__, "ibv_rereg_mr still waiting after the SEND completed");
        pthread_join(t, NULL);
        EXPECT_EQ_INT(0, atomic_load(&j.ret));
        EXPECT_TRUE(mr->addr == neu);
        st_post_recv(f.b.qp, 3, sink, len, f.pmr->lkey);
        st_post_send(f.a.qp, 4, neu, len, mr->lkey, IBV_SEND_SIGNALED);
        st_wait_wc(f.a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 4);
        st_wait_wc(f.b.rcq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 3);
        EXPECT_MEMEQ(neu, sink, len);
        EXPECT_MEMEQ(want, old, len);
        EXPECT_EQ_INT(0, ibv_dereg_mr(mr));
        rr_close(&f);
        munmap(old, len);
        munmap(neu, len);
        munmap(want, len);
    }
}

/* The target reregisters its MR to a new buffer between a peer process's
 * rounds of writes and reads on one connection (a same-host peer: its
 * writes are pulled when the fast path is on). */
struct rr_round {
    uint64_t addr;
    uint32_t rkey, len;
    unsigned seed;
};

static void peer_rounds(int fd)
{
    struct st_dev d;
    st_dev_open(&d);
    struct st_qp q;
    st_qp_create(&d, &q, NULL, 16);
    char *buf = st_buf(2 * BIG, 60);
    struct ibv_mr *mr = ibv_reg_mr(d.pd, buf, 2 * BIG, ALL_ACCESS);
    st_qp_connect_peer(&d, &q, fd, NULL, NULL);
    struct rr_round r;
    for (uint64_t id = 1;; id += 2) {
        st_xfer_recv(fd, &r, sizeof(r));
        if (!r.len)
            break;
        st_fill(buf, r.len, r.seed);
        st_post_rdma(q.qp, IBV_WR_RDMA_WRITE, id, buf, r.len, mr->lkey, r.addr, r.rkey, 0,
                     IBV_SEND_SIGNALED);
        struct ibv_wc wc;
        st_wait_wc(q.scq, &wc, WAIT_MS);
        int st[2] = { wc.status, 0 };
        memset(buf + BIG, 0, r.len);
        st_post_rdma(q.qp, IBV_WR_RDMA_READ, id + 1, buf + BIG, r.len, mr->lkey, r.addr, r.rkey, 0,
                     IBV_SEND_SIGNALED);
        st_wait_wc(q.scq, &wc, WAIT_MS);
        st[1] = wc.status;
        st_xfer_send(fd, st, sizeof(st));
        st_xfer_send(fd, buf + BIG, r.len);
    }
    EXPECT_EQ_INT(0, ibv_dereg_mr(mr));
    st_qp_destroy(&q);
    st_dev_close(&d);
}

TAP_CASE(test_rereg_between_rounds_of_a_peer_process)
{
    int fd;
    int pid = st_fork_peer(peer_rounds, &fd);
    struct st_dev d;
    st_dev_open(&d);
    struct st_qp q;
    st_qp_create(&d, &q, NULL, 16);
    st_qp_connect_peer(&d, &q, fd, NULL, NULL);
    char *bufs[3] = { st_buf(BIG, 1), st_buf(BIG, 2), st_buf(BIG, 3) };
    static char got[BIG], want[BIG];
    struct ibv_mr *mr = ibv_reg_mr(d.pd, bufs[0], BIG, ALL_ACCESS);
    EXPECT_TRUE(mr != NULL);
    uint64_t fb = fast_bytes(q.qp), pulled = 0;
    for (unsigned round = 0; round < 6; round++) {
        char *buf = bufs[round % 3];
        uint32_t len = round & 1 ? SMALL : LARGE;
        if (round)
            EXPECT_EQ_INT(0, ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf,
                                          round & 1 ? SMALL : BIG, 0));
        struct rr_round r;
        memset(&r, 0, sizeof(r));   /* its padding goes to the peer too */
        r.addr = (uintptr_t)buf;
        r.rkey = mr->rkey;
        r.len = len;
        r.seed = 70 + round;
        st_xfer_send(fd, &r, sizeof(r));
        int st[2];
        st_xfer_recv(fd, st, sizeof(st));
        EXPECT_EQ_INT(IBV_WC_SUCCESS, st[0]);
        EXPECT_EQ_INT(IBV_WC_SUCCESS, st[1]);
        st_fill(want, len, r.seed);
        EXPECT_MEMEQ(want, buf, len);
        st_xfer_recv(fd, got, len);
        EXPECT_MEMEQ(buf, got, len);
        if (len >= 4096)
            pulled += len;
        tap_progress();
    }
    EXPECT_PATH(fb, fast_bytes(q.qp), pulled);
    tap_diag("%" PRIu64 " of %" PRIu64 " bytes written were pulled", fast_bytes(q.qp) - fb, pulled);
    struct rr_round end;
    memset(&end, 0, sizeof(end));
    st_xfer_send(fd, &end, sizeof(end));
    int status;
    EXPECT_EQ_INT(pid, waitpid(pid, &status, 0));
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(fd);
    EXPECT_EQ_INT(0, ibv_dereg_mr(mr));
    st_qp_destroy(&q);
    st_dev_close(&d);
}

/* An MR moved between host and CUDA memory: the peer's writes land in the
 * GPU buffer and its reads come from it, byte for byte, then the same on
 * the host again.  A dmabuf registration cannot be reregistered
 * (libibverbs refuses it: IBV_REREG_MR_ERR_INPUT) and stays usable. */
static void rr_gpu_write_read(struct rr *f, struct ibv_mr *mr, cudawrap_devptr g, uint32_t len,
                              unsigned seed)
{
    const struct cudawrap *cu = cudawrap_peek();
    static char got[BIG];
    char *src = f->peer, *sink = f->peer + BIG;
    st_fill(src, len, seed);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, rr_op(f, false, IBV_WR_RDMA_WRITE, 0, len, g, mr->rkey));
    EXPECT_EQ_INT(0, cu->memcpy_dtoh(got, g, len));
    EXPECT_MEMEQ(src, got, len);
    st_fill(got, len, seed + 1);
    EXPECT_EQ_INT(0, cu->memcpy_htod(g, got, len));
    memset(sink, 0, len);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, rr_op(f, false, IBV_WR_RDMA_READ, BIG, len, g, mr->rkey));
    EXPECT_MEMEQ(got, sink, len);
}

TAP_CASE(test_rereg_between_host_and_cuda_memory)
{
    char why[256] = "";
    const struct cudawrap *cu = cudawrap_get(why, sizeof(why));
    int n = 0;
    if (!cu)
        TAP_SKIP(why);
    if (cu->device_get_count(&n) != 0 || n < 1)
        TAP_SKIP("no CUDA GPU");
    cudawrap_device dev;
    cudawrap_ctx ctx;
    EXPECT_EQ_INT(0, cu->device_get(&dev, 0));
    EXPECT_EQ_INT(0, cu->primary_ctx_retain(&ctx, dev));
    EXPECT_EQ_INT(0, cu->ctx_set_current(ctx));
    for (size_t k = 0; k < sizeof(rr_sizes) / sizeof(rr_sizes[0]); k++) {
        uint32_t len = rr_sizes[k];
        struct rr f;
        rr_open(&f);
        cudawrap_devptr g = 0;
        EXPECT_EQ_INT(0, cu->mem_alloc(&g, BIG));
        char *host = st_buf(len, 1);
        struct ibv_mr *mr = ibv_reg_mr(f.d.pd, host, len, ALL_ACCESS);
        EXPECT_TRUE(mr != NULL);
        uint32_t rkey = mr->rkey;
        rr_write_read(&f, false, mr, host, len, 10);
        EXPECT_EQ_INT(0, ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
                                      (void *)(uintptr_t)g, BIG, 0));
        EXPECT_EQ_U64(rkey, mr->rkey);
        rr_gpu_write_read(&f, mr, g, len, 20);
        rr_gpu_write_read(&f, mr, g + BIG - len, len, 30);
        EXPECT_EQ_INT(0, ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, host, len, 0));
        rr_write_read(&f, false, mr, host, len, 40);
        EXPECT_EQ_INT(0, ibv_dereg_mr(mr));
        /* dmabuf: softnic takes the CUDA address as the iova and only
         * checks the descriptor, so any open one does */
        int fd = memfd_create("dmabuf-stand-in", 0);
        EXPECT_TRUE(fd >= 0);
        mr = ibv_reg_dmabuf_mr(f.d.pd, 0, BIG, g, fd, ALL_ACCESS);
        EXPECT_TRUE(mr != NULL);
        struct ibv_mr was = *mr;
        errno = 0;
        EXPECT_EQ_INT(IBV_REREG_MR_ERR_INPUT,
                      ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE));
        EXPECT_EQ_INT(EINVAL, errno);
        EXPECT_TRUE(memcmp(&was, mr, sizeof(was)) == 0);
        rr_gpu_write_read(&f, mr, g, len, 50);
        EXPECT_EQ_INT(0, ibv_dereg_mr(mr));
        close(fd);
        EXPECT_EQ_INT(0, cu->mem_free(g));
        rr_close(&f);
        munmap(host, len);
    }
}

int main(int argc, char **argv) { return sntest_main(argc, argv); }
