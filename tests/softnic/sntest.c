/* tests/softnic/sntest.c: helpers shared by softnic's verbs tests (see
 * sntest.h for the contract). */
#include "sntest.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <poll.h>

#ifndef SOFTNIC_BUILD_DIR
#error "SOFTNIC_BUILD_DIR must name the directory of softnic's libibverbs.so.1"
#endif

uint64_t st_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static bool softnic_loaded(void)
{
    return dlsym(RTLD_DEFAULT, "softnic_ctl_port_counters") != NULL;
}

int sntest_main(int argc, char **argv)
{
    if (!softnic_loaded()) {
        /* the build tree the tests run from: a staged copy (scripts/gpu-stage)
         * names itself in top_builddir, as the test scripts do */
        const char *tb = getenv("top_builddir");
        char dir[4096];
        if (tb && *tb)
            snprintf(dir, sizeof(dir), "%s/tests/softnic", tb);
        else
            snprintf(dir, sizeof(dir), "%s", SOFTNIC_BUILD_DIR);
        if (getenv("SNTEST_REEXEC")) {
            printf("Bail out! softnic's libibverbs.so.1 not loaded from %s\n", dir);
            return 1;   /* not a skip: the build is broken */
        }
        const char *old = getenv("LD_LIBRARY_PATH");
        char *path;
        if (asprintf(&path, "%s%s%s", dir, old && *old ? ":" : "", old ? old : "") < 0)
            return 1;
        setenv("LD_LIBRARY_PATH", path, 1);
        setenv("SNTEST_REEXEC", "1", 1);
        free(path);
        /* exec the program by its own file name, not by /proc/self/exe: under
         * valgrind that link names valgrind's tool, which cannot be run as a
         * program (its fixed load address collides: "mmap failed in UME"),
         * while readlink() of it is answered with the program's name */
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n > 0)
            self[n] = 0;
        else
            snprintf(self, sizeof(self), "/proc/self/exe");
        execv(self, argv);
        perror(self);
        return 1;
    }
    /* keep softnic's failure logs short and the retry budgets test-sized */
    setenv("SOFTNIC_RETRY_CAP_MS", "1500", 0);
    setenv("SOFTNIC_RNR_CAP_MS", "1500", 0);
    return tap_run(argc, argv);
}

/* ------------------------------------------------------------ devices */
void st_dev_open(struct st_dev *d)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    EXPECT_TRUE(list != NULL);
    EXPECT_TRUE(n >= 1);
    d->ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    EXPECT_TRUE(d->ctx != NULL);
    d->pd = ibv_alloc_pd(d->ctx);
    EXPECT_TRUE(d->pd != NULL);
}

void st_dev_close(struct st_dev *d)
{
    EXPECT_EQ_INT(0, ibv_dealloc_pd(d->pd));
    EXPECT_EQ_INT(0, ibv_close_device(d->ctx));
}

/* ------------------------------------------------------------ QPs */
void st_qp_create(struct st_dev *d, struct st_qp *q, const struct st_qp_opts *o, int cqe)
{
    static const struct st_qp_opts none;
    q->o = o ? *o : none;
    q->scq = ibv_create_cq(d->ctx, cqe, NULL, q->o.send_channel, 0);
    q->rcq = ibv_create_cq(d->ctx, cqe, NULL, NULL, 0);
    EXPECT_TRUE(q->scq && q->rcq);
    struct ibv_qp_init_attr ia = {
        .send_cq = q->scq,
        .recv_cq = q->rcq,
        .srq = q->o.srq,
        .qp_type = IBV_QPT_RC,
        .sq_sig_all = q->o.sq_sig_all,
        .cap = {
            .max_send_wr = q->o.max_send_wr ? (uint32_t)q->o.max_send_wr : 64,
            .max_recv_wr = q->o.max_recv_wr ? (uint32_t)q->o.max_recv_wr : 64,
            .max_send_sge = q->o.max_sge ? (uint32_t)q->o.max_sge : 4,
            .max_recv_sge = q->o.max_sge ? (uint32_t)q->o.max_sge : 4,
            .max_inline_data = (uint32_t)q->o.max_inline,
        },
    };
    q->qp = ibv_create_qp(d->pd, &ia);
    if (!q->qp)
        tap_fail_at(__FILE__, __LINE__, "ibv_create_qp: %s", strerror(errno));
}

void st_qp_destroy(struct st_qp *q)
{
    EXPECT_EQ_INT(0, ibv_destroy_qp(q->qp));
    EXPECT_EQ_INT(0, ibv_destroy_cq(q->scq));
    EXPECT_EQ_INT(0, ibv_destroy_cq(q->rcq));
}

void st_qp_info(struct st_dev *d, struct st_qp *q, struct st_qp_info *out)
{
    memset(out, 0, sizeof(*out));
    out->qpn = q->qp->qp_num;
    out->port = q->o.port ? q->o.port : 1;
    EXPECT_EQ_INT(0, ibv_query_gid(d->ctx, out->port, 0, &out->gid));
}

void st_qp_connect(struct st_qp *q, const struct st_qp_info *peer)
{
    uint8_t port = q->o.port ? q->o.port : 1;
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT,
        .pkey_index = 0,
        .port_num = port,
        .qp_access_flags = q->o.access ? q->o.access
                                       : IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
    };
    int rc = ibv_modify_qp(q->qp, &a,
                           IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc)
        tap_fail_at(__FILE__, __LINE__, "to INIT: %s", strerror(rc));
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = peer->qpn;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = q->o.min_rnr_timer ? q->o.min_rnr_timer : 1;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = peer->gid;
    a.ah_attr.grh.sgid_index = 0;
    a.ah_attr.grh.hop_limit = 1;
    a.ah_attr.grh.traffic_class = q->o.traffic_class;
    a.ah_attr.port_num = port;
    rc = ibv_modify_qp(q->qp, &a,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                           IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc)
        tap_fail_at(__FILE__, __LINE__, "to RTR: %s", strerror(rc));
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = q->o.timeout ? q->o.timeout : 14;
    a.retry_cnt = q->o.retry_cnt ? q->o.retry_cnt : 7;
    a.rnr_retry = q->o.rnr_retry_set ? q->o.rnr_retry : 7;
    a.sq_psn = 0;
    a.max_rd_atomic = 4;
    rc = ibv_modify_qp(q->qp, &a,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                           IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc)
        tap_fail_at(__FILE__, __LINE__, "to RTS: %s", strerror(rc));
}

void st_qp_pair(struct st_dev *d, struct st_qp *a, struct st_qp *b, const struct st_qp_opts *o)
{
    struct st_qp_info ia, ib;
    st_qp_create(d, a, o, 256);
    st_qp_create(d, b, o, 256);
    st_qp_info(d, a, &ia);
    st_qp_info(d, b, &ib);
    st_qp_connect(a, &ib);
    st_qp_connect(b, &ia);
}

void st_srq_pairs(struct st_dev *d, struct ibv_srq *srq, struct st_qp s[2], struct st_qp r[2], int cqe)
{
    struct st_qp_opts o = { .srq = srq };
    for (int i = 0; i < 2; i++) {
        struct st_qp_info is, ir;
        st_qp_create(d, &s[i], NULL, cqe);
        st_qp_create(d, &r[i], &o, cqe);
        st_qp_info(d, &s[i], &is);
        st_qp_info(d, &r[i], &ir);
        st_qp_connect(&s[i], &ir);
        st_qp_connect(&r[i], &is);
    }
}

void st_srq_pairs_destroy(struct st_qp s[2], struct st_qp r[2])
{
    for (int i = 0; i < 2; i++) {
        st_qp_destroy(&s[i]);
        st_qp_destroy(&r[i]);
    }
}

void st_write_pair_open(struct st_write_pair *p, size_t len)
{
    memset(p, 0, sizeof(*p));
    st_dev_open(&p->d);
    struct st_qp_opts o = { .max_send_wr = 16, .max_recv_wr = 16, .max_sge = 1 };
    st_qp_pair(&p->d, &p->a, &p->b, &o);
    p->len = len;
    p->src = st_buf(len, 1);
    p->dst = st_buf(len, 0);
    p->smr = ibv_reg_mr(p->d.pd, p->src, len, IBV_ACCESS_LOCAL_WRITE);
    p->dmr = ibv_reg_mr(p->d.pd, p->dst, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    EXPECT_TRUE(p->smr && p->dmr);
}

void st_write_pair_close(struct st_write_pair *p)
{
    if (p->smr)
        ibv_dereg_mr(p->smr);
    if (p->dmr)
        ibv_dereg_mr(p->dmr);
    st_qp_destroy(&p->a);
    st_qp_destroy(&p->b);
    st_dev_close(&p->d);
    if (p->src)
        munmap(p->src, p->len ? p->len : 1);
    if (p->dst)
        munmap(p->dst, p->len ? p->len : 1);
    memset(p, 0, sizeof(*p));
}

/* ------------------------------------------------------------ completions */
static void wait_wc(struct ibv_cq *cq, struct ibv_wc *wc, int ms, unsigned pause_us)
{
    uint64_t end = st_now_ms() + (uint64_t)ms;
    for (;;) {
        int n = ibv_poll_cq(cq, 1, wc);
        EXPECT_TRUE(n >= 0);
        if (n == 1)
            return;
        if (st_now_ms() > end)
            tap_fail_at(__FILE__, __LINE__, "no completion within %d ms", ms);
        if (pause_us)
            usleep(pause_us);
    }
}

void st_wait_wc(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
    wait_wc(cq, wc, ms, 200);
}

void st_spin_wc(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
    wait_wc(cq, wc, ms, 0);
}

uint64_t st_qp_count(int (*get)(struct ibv_qp *, uint64_t *), struct ibv_qp *qp)
{
    uint64_t n = 0;
    EXPECT_EQ_INT(0, get(qp, &n));
    return n;
}

bool st_no_wc(struct ibv_cq *cq, int ms)
{
    uint64_t end = st_now_ms() + (uint64_t)ms;
    struct ibv_wc wc;
    while (st_now_ms() <= end) {
        if (ibv_poll_cq(cq, 1, &wc) != 0)
            return false;
        usleep(1000);
    }
    return true;
}

bool st_wait_async(struct ibv_context *ctx, enum ibv_event_type type, int ms,
                   struct ibv_async_event *out)
{
    uint64_t end = st_now_ms() + (uint64_t)ms;
    for (;;) {
        long left = (long)(end - st_now_ms());
        if ((int64_t)(end - st_now_ms()) <= 0)
            return false;
        struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        struct ibv_async_event ev;
        if (ibv_get_async_event(ctx, &ev))
            continue;
        ibv_ack_async_event(&ev);
        if (ev.event_type == type) {
            if (out)
                *out = ev;
            return true;
        }
    }
}

/* ------------------------------------------------------------ posting */
void st_post_recv(struct ibv_qp *qp, uint64_t wr_id, void *buf, uint32_t len, uint32_t lkey)
{
    struct ibv_sge sge = { (uint64_t)(uintptr_t)buf, len, lkey };
    struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;
    int rc = ibv_post_recv(qp, &wr, &bad);
    if (rc)
        tap_fail_at(__FILE__, __LINE__, "ibv_post_recv: %s", strerror(rc));
}

void st_post_rdma(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, void *buf,
                  uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm,
                  unsigned int flags)
{
    struct ibv_sge sge = { (uint64_t)(uintptr_t)buf, len, lkey };
    struct ibv_send_wr wr = {
        .wr_id = wr_id, .sg_list = &sge, .num_sge = len ? 1 : 0, .opcode = op,
        .send_flags = flags, .imm_data = htobe32(imm),
        .wr.rdma = { .remote_addr = raddr, .rkey = rkey },
    }, *bad = NULL;
    int rc = ibv_post_send(qp, &wr, &bad);
    if (rc)
        tap_fail_at(__FILE__, __LINE__, "ibv_post_send: %s", strerror(rc));
}

void st_post_send(struct ibv_qp *qp, uint64_t wr_id, void *buf, uint32_t len, uint32_t lkey,
                  unsigned int flags)
{
    st_post_rdma(qp, IBV_WR_SEND, wr_id, buf, len, lkey, 0, 0, 0, flags);
}

/* ------------------------------------------------------------ control API */
const struct st_ctl *st_ctl(void)
{
    static struct st_ctl c;
    *(void **)&c.port_set_state = dlsym(RTLD_DEFAULT, "softnic_ctl_port_set_state");
    *(void **)&c.port_set_rate = dlsym(RTLD_DEFAULT, "softnic_ctl_port_set_rate");
    *(void **)&c.port_set_latency = dlsym(RTLD_DEFAULT, "softnic_ctl_port_set_latency");
    *(void **)&c.port_counters = dlsym(RTLD_DEFAULT, "softnic_ctl_port_counters");
    *(void **)&c.qp_counters = dlsym(RTLD_DEFAULT, "softnic_ctl_qp_counters");
    *(void **)&c.objects = dlsym(RTLD_DEFAULT, "softnic_ctl_objects");
    *(void **)&c.link_rate = dlsym(RTLD_DEFAULT, "softnic_ctl_link_rate");
    *(void **)&c.qp_fast_bytes = dlsym(RTLD_DEFAULT, "softnic_ctl_qp_fast_bytes");
    *(void **)&c.qp_direct_wqes = dlsym(RTLD_DEFAULT, "softnic_ctl_qp_direct_wqes");
    *(void **)&c.qp_acks = dlsym(RTLD_DEFAULT, "softnic_ctl_qp_acks");
    *(void **)&c.qp_acks_noted = dlsym(RTLD_DEFAULT, "softnic_ctl_qp_acks_noted");
    *(void **)&c.qp_pushed_wqes = dlsym(RTLD_DEFAULT, "softnic_ctl_qp_pushed_wqes");
    *(void **)&c.qp_stored_wqes = dlsym(RTLD_DEFAULT, "softnic_ctl_qp_stored_wqes");
    *(void **)&c.port_tc_bytes = dlsym(RTLD_DEFAULT, "softnic_ctl_port_tc_bytes");
    *(void **)&c.qp_steps = dlsym(RTLD_DEFAULT, "softnic_ctl_qp_steps");
    *(void **)&c.engines = dlsym(RTLD_DEFAULT, "softnic_ctl_engines");
    *(void **)&c.ud_counts = dlsym(RTLD_DEFAULT, "softnic_ctl_ud_counts");
    if (!c.port_set_state || !c.port_set_rate || !c.port_set_latency || !c.port_counters ||
        !c.qp_counters || !c.objects || !c.link_rate || !c.qp_fast_bytes ||
        !c.qp_direct_wqes || !c.qp_acks || !c.qp_acks_noted || !c.qp_pushed_wqes || !c.qp_stored_wqes || !c.port_tc_bytes || !c.qp_steps || !c.engines)
        tap_fail_at(__FILE__, __LINE__, "softnic_ctl_* not found: not running on softnic");
    return &c;
}

/* ------------------------------------------------------------ processes */
int st_fork_peer(void (*fn)(int fd), int *fd)
{
    int sv[2];
    EXPECT_EQ_INT(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
    fflush(NULL);
    pid_t pid = fork();
    EXPECT_TRUE(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        /* the peer dies with the case: it is in the case's process group */
        fn(sv[1]);
        _exit(0);
    }
    close(sv[1]);
    *fd = sv[0];
    return pid;
}

void st_xfer_send(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n <= 0)
            tap_fail_at(__FILE__, __LINE__, "peer socket write: %s", strerror(errno));
        p += n;
        len -= (size_t)n;
    }
}

struct st_qp_info st_qp_connect_peer(struct st_dev *d, struct st_qp *q, int fd, const void *buf,
                                     const struct ibv_mr *mr)
{
    struct st_qp_info mine, theirs;
    st_qp_info(d, q, &mine);
    if (mr) {
        mine.addr = (uintptr_t)buf;
        mine.rkey = mr->rkey;
    }
    st_xfer_send(fd, &mine, sizeof(mine));
    st_xfer_recv(fd, &theirs, sizeof(theirs));
    st_qp_connect(q, &theirs);
    return theirs;
}

void st_xfer_recv(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len) {
        ssize_t n = read(fd, p, len);
        if (n <= 0)
            tap_fail_at(__FILE__, __LINE__, "peer socket read: %s", n ? strerror(errno) : "EOF");
        p += n;
        len -= (size_t)n;
    }
}

/* ------------------------------------------------------------ buffers */
void st_fill(void *buf, size_t len, unsigned seed)
{
    unsigned char *p = buf;
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < len; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (unsigned char)(x >> 16);
    }
}

void *st_buf(size_t len, unsigned seed)
{
    void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_TRUE(p != MAP_FAILED);
    st_fill(p, len, seed);
    return p;
}

bool st_push_on(void)
{
    const char *v = getenv("SOFTNIC_PUSH"), *f = getenv("SOFTNIC_FASTPATH");
    return (!v || strcmp(v, "0") != 0) && (!f || strcmp(f, "0") != 0);
}
