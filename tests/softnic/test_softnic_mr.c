/* tests/softnic/test_softnic_mr.c: memory registration: access flags,
 * iova, dmabuf, keys, protection domains. */
#include "sntest.h"

#include <errno.h>
#include <sys/mman.h>
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

int main(int argc, char **argv) { return sntest_main(argc, argv); }
