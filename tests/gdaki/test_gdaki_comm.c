/* tests/gdaki/test_gdaki_comm.c: a GPU-initiated QP attached to a connected
 * railnet comm (gdaki_comm_attach), on softnic, posted by CPU threads as the
 * kernel posts: the plugin core connects a send comm and a recv comm in
 * this process, both ends attach, and WQEs written into the mlx5 ring of
 * the sender's new QP land in buffers registered on the receiver's PD. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "comm_setup.h"
#include "plugin/ib/config.h"
#include "devices.h"
#include "mr.h"
#include "gdaki_queue.h"
#include "railnet_gdaki.h"
#include "tap.h"
#include "build_paths.h"

struct ends {
    void *listen, *send, *recv;
};

static void connect_comms(struct ends *e)
{
    const char *verbs = test_softnic_verbs();
    if (access(verbs, R_OK) != 0)
        TAP_SKIP("softnic's libibverbs.so.1 is not built (run from make check)");
    setenv("RAILNET_IBVERBS_LIB", verbs, 1);
    config_load();
    EXPECT_EQ_INT(ncclSuccess, devices_init(mr_probe_gpu));
    EXPECT_TRUE(devices_count() >= 1);
    uint8_t handle[NCCL_NET_HANDLE_MAXSIZE];
    memset(e, 0, sizeof(*e));
    EXPECT_EQ_INT(ncclSuccess, comm_listen(0, NULL, handle, &e->listen));
    for (int i = 0; i < 2000000 && (!e->send || !e->recv); i++) {
        if (!e->send)
            EXPECT_EQ_INT(ncclSuccess, comm_connect(0, NULL, handle, &e->send));
        if (!e->recv)
            EXPECT_EQ_INT(ncclSuccess, comm_accept(e->listen, &e->recv));
    }
    EXPECT_TRUE(e->send && e->recv);
}

struct attach_arg {
    void *comm;
    struct gdaki_pair *pair;
    int rc;
    char err[512];
};

static void *attach_main(void *p)
{
    struct attach_arg *a = p;
    struct gdaki_pair_opts o;
    a->rc = gdaki_pair_opts_default(&o, a->err, sizeof(a->err));
    o.sq_depth = 32;
    if (!a->rc)
        a->rc = gdaki_comm_attach(a->comm, &o, &a->pair, a->err, sizeof(a->err));
    return NULL;
}

/* Both ends attach at once (each blocks for the other). */
static void attach_both(struct ends *e, struct gdaki_pair **send, struct gdaki_pair **recv)
{
    struct attach_arg s = { .comm = e->send }, r = { .comm = e->recv };
    pthread_t th;
    EXPECT_EQ_INT(0, pthread_create(&th, NULL, attach_main, &s));
    attach_main(&r);
    pthread_join(th, NULL);
    if (s.rc)
        tap_fail_at(__FILE__, __LINE__, "send side: %s", s.err);
    if (r.rc)
        tap_fail_at(__FILE__, __LINE__, "recv side: %s", r.err);
    *send = s.pair;
    *recv = r.pair;
}

static void attached_qp_writes(enum gdaki_queue_mem mem)
{
    struct ends e;
    connect_comms(&e);
    struct gdaki_pair *ps, *pr;
    attach_both(&e, &ps, &pr);
    struct gdaki_pair_info info;
    gdaki_pair_get_info(ps, &info);
    EXPECT_EQ_INT(mem, info.queue_mem);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(ps);
    EXPECT_TRUE(q->sq && q->db && q->cq);
    EXPECT_EQ_INT(5, q->sq_log);    /* depth 32 */
    EXPECT_EQ_INT(IBV_QPS_RTS, gdaki_pair_send_qp_state(ps));

    char err[512];
    const size_t n = 256 * 1024;
    uint8_t *src = malloc(n), *dst = calloc(1, n);
    for (size_t i = 0; i < n; i++)
        src[i] = (uint8_t)(i * 29 + 3);
    struct gdaki_mr ms, md;
    /* The source on the sender's PD, the target on the receiver's. */
    EXPECT_EQ_INT(0, gdaki_pair_reg(ps, src, n, &ms, err, sizeof(err)));
    EXPECT_EQ_INT(0, gdaki_pair_reg(pr, dst, n, &md, err, sizeof(err)));
    EXPECT_EQ_INT(0, gdaki_pair_post_recv(pr, 1));
    /* 256 writes of 1 KiB through a 32-slot ring (8 passes), the last with
     * an immediate. */
    for (int i = 0; i < 256; i++) {
        struct gdaki_op op = { .laddr = ms.addr + (uint64_t)i * 1024, .lkey = ms.lkey, .len = 1024,
                               .raddr = md.addr + (uint64_t)i * 1024, .rkey = md.rkey, .imm = 0xfeed };
        EXPECT_TRUE(gdaki_q_post1(q, i == 255 ? GDAKI_KIND_WRITE_IMM : GDAKI_KIND_WRITE, &op) !=
                    GDAKI_SLOT_ERROR);
    }
    EXPECT_EQ_INT(0, gdaki_q_quiet(q));
    EXPECT_MEMEQ(src, dst, n);
    uint32_t imm = 0;
    int got = 0;
    for (int spin = 0; spin < 100000 && !got; spin++) {
        got = gdaki_pair_poll_recv(pr, &imm, 1);
        EXPECT_TRUE(got >= 0);
        if (!got)
            usleep(50);
    }
    EXPECT_EQ_INT(1, got);
    EXPECT_EQ_U64(0xfeed, imm);

    gdaki_pair_dereg(ps, &ms);
    gdaki_pair_dereg(pr, &md);
    gdaki_pair_close(ps);
    gdaki_pair_close(pr);
    /* The comms still close cleanly after their lent resources were used. */
    EXPECT_EQ_INT(ncclSuccess, comm_close_send(e.send));
    EXPECT_EQ_INT(ncclSuccess, comm_close_recv(e.recv));
    EXPECT_EQ_INT(ncclSuccess, comm_close_listen(e.listen));
    free(src);
    free(dst);
}

TAP_CASE(test_attached_qp_writes_into_the_receivers_buffers)
{
    attached_qp_writes(GDAKI_QUEUE_MEM_HOST);
}

/* The sender's QP made with DEVX (its own DEVX context on the comm's
 * device), the queue in host umem: what =gpu does, without a GPU. */
TAP_CASE(test_attached_devx_qp_writes_into_the_receivers_buffers)
{
    setenv("RAILNET_GDAKI_QUEUE_MEM", "host-devx", 1);
    attached_qp_writes(GDAKI_QUEUE_MEM_HOST_DEVX);
}

TAP_CASE(test_attach_alone_times_out_with_the_reason)
{
    struct ends e;
    connect_comms(&e);
    struct attach_arg s = { .comm = e.send };
    attach_main(&s);    /* the receiver never attaches */
    EXPECT_EQ_INT(-1, s.rc);
    EXPECT_TRUE(s.pair == NULL);
    if (!strstr(s.err, "did not attach"))
        tap_fail_at(__FILE__, __LINE__, "unclear error: %s", s.err);
    comm_close_send(e.send);
    comm_close_recv(e.recv);
    comm_close_listen(e.listen);
}

TAP_CASE(test_attach_refuses_what_is_not_a_comm)
{
    char err[256];
    struct gdaki_pair *p = (struct gdaki_pair *)1;
    EXPECT_EQ_INT(-1, gdaki_comm_attach(NULL, NULL, &p, err, sizeof(err)));
    EXPECT_TRUE(p == NULL);
    EXPECT_TRUE(strstr(err, "not a connected railnet comm") != NULL);
}

int main(int argc, char **argv)
{
    return tap_run(argc, argv);
}
