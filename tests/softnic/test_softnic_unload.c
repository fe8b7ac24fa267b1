/* tests/softnic/test_softnic_unload.c: softnic's libraries stay mapped
 * after their last dlclose. softnic runs engine threads inside
 * libibverbs.so.1 (and a NIC thread in libmlx5.so.1); rdma-core's
 * libraries have none. A client that links libibverbs and is itself
 * dlopen'ed -- NVIDIA's nccl-rdma-sharp-plugins, which NCCL unloads when a
 * communicator ends -- drops the last reference, and an unmapped library
 * whose threads still run crashes the process (seen: every rank of an
 * nccl-tests job on SIGSEGV at exit). So softnic's libraries are linked
 * -z nodelete. This program links neither; it opens them as such a client
 * does, runs a QP pair so the engines start, closes everything, and
 * dlcloses. */
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <string.h>
#include <time.h>

#include "build_paths.h"
#include "tap.h"

struct verbs {
    void *h;
    struct ibv_device **(*get_device_list)(int *);
    void (*free_device_list)(struct ibv_device **);
    struct ibv_context *(*open_device)(struct ibv_device *);
    int (*close_device)(struct ibv_context *);
    struct ibv_pd *(*alloc_pd)(struct ibv_context *);
    int (*dealloc_pd)(struct ibv_pd *);
    struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *, int);
    int (*destroy_cq)(struct ibv_cq *);
    struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
    int (*destroy_qp)(struct ibv_qp *);
    int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
    int (*query_gid)(struct ibv_context *, uint8_t, int, union ibv_gid *);
    struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
    int (*dereg_mr)(struct ibv_mr *);
};

static void *sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    if (!p)
        tap_fail_at(__FILE__, __LINE__, "dlsym %s: %s", name, dlerror());
    return p;
}

static void open_verbs(struct verbs *v, const char *path)
{
    memset(v, 0, sizeof(*v));
    v->h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!v->h)
        tap_fail_at(__FILE__, __LINE__, "dlopen %s: %s", path, dlerror());
    *(void **)&v->get_device_list = sym(v->h, "ibv_get_device_list");
    *(void **)&v->free_device_list = sym(v->h, "ibv_free_device_list");
    *(void **)&v->open_device = sym(v->h, "ibv_open_device");
    *(void **)&v->close_device = sym(v->h, "ibv_close_device");
    *(void **)&v->alloc_pd = sym(v->h, "ibv_alloc_pd");
    *(void **)&v->dealloc_pd = sym(v->h, "ibv_dealloc_pd");
    *(void **)&v->create_cq = sym(v->h, "ibv_create_cq");
    *(void **)&v->destroy_cq = sym(v->h, "ibv_destroy_cq");
    *(void **)&v->create_qp = sym(v->h, "ibv_create_qp");
    *(void **)&v->destroy_qp = sym(v->h, "ibv_destroy_qp");
    *(void **)&v->modify_qp = sym(v->h, "ibv_modify_qp");
    *(void **)&v->query_gid = sym(v->h, "ibv_query_gid");
    *(void **)&v->reg_mr = sym(v->h, "ibv_reg_mr");
    *(void **)&v->dereg_mr = sym(v->h, "ibv_dereg_mr");
}

static void to_rts(struct verbs *v, struct ibv_qp *qp, uint32_t dqpn, const union ibv_gid *gid)
{
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
    EXPECT_EQ_INT(0, v->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = dqpn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = *gid;
    a.ah_attr.grh.hop_limit = 1;
    a.ah_attr.port_num = 1;
    EXPECT_EQ_INT(0, v->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                             IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER));
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    EXPECT_EQ_INT(0, v->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                             IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC));
}

TAP_CASE(test_libibverbs_stays_mapped_after_its_last_dlclose)
{
    const char *path = test_softnic_verbs();
    /* nothing of softnic's in this process yet */
    EXPECT_TRUE(dlopen(path, RTLD_NOW | RTLD_NOLOAD) == NULL);
    struct verbs v;
    open_verbs(&v, path);
    int n = 0;
    struct ibv_device **list = v.get_device_list(&n);
    if (!list || n < 1)
        TAP_SKIP("softnic has no device here (SOFTNIC_DEVICES)");
    struct ibv_context *ctx = v.open_device(list[0]);
    EXPECT_TRUE(ctx != NULL);
    v.free_device_list(list);
    struct ibv_pd *pd = v.alloc_pd(ctx);
    struct ibv_cq *cq = v.create_cq(ctx, 16, NULL, NULL, 0);
    EXPECT_TRUE(pd && cq);
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof(ia));
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    struct ibv_qp *a = v.create_qp(pd, &ia), *b = v.create_qp(pd, &ia);
    EXPECT_TRUE(a && b);
    union ibv_gid gid;
    EXPECT_EQ_INT(0, v.query_gid(ctx, 1, 0, &gid));
    /* connected to each other: the engines serve them */
    to_rts(&v, a, b->qp_num, &gid);
    to_rts(&v, b, a->qp_num, &gid);
    EXPECT_EQ_INT(0, v.destroy_qp(a));
    EXPECT_EQ_INT(0, v.destroy_qp(b));
    EXPECT_EQ_INT(0, v.destroy_cq(cq));
    EXPECT_EQ_INT(0, v.dealloc_pd(pd));
    EXPECT_EQ_INT(0, v.close_device(ctx));
    EXPECT_EQ_INT(0, dlclose(v.h));
    /* still mapped: its threads may still run */
    void *again = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    EXPECT_TRUE(again != NULL);
    /* and the process lives on while they do */
    struct timespec ts = { 0, 200 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    if (again)
        dlclose(again);
}

int main(int argc, char **argv)
{
    return tap_run(argc, argv);
}
