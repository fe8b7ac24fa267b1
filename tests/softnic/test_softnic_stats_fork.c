/* tests/softnic/test_softnic_stats_fork.c: SOFTNIC_STATS counts what the
 * process's own softnic threads did (stats.c). A child forked after some
 * traffic starts from zero: when it exits it prints nothing for work it
 * did not do (it used to print its copy of the parent's counts, which
 * doubled the totals of programs whose ranks are forked children, e.g.
 * netdriver), while the parent's counts stay whole. The child's stderr
 * goes through a pipe the parent reads. */
#include "sntest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WAIT_MS 10000
#define WRITES 20

/* Everything the child wrote on stderr before it exited (exit(0): the
 * library destructors, stats_print among them, run). */
static int child_stderr(char *out, size_t cap)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        exit(0);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t k;
    while (n + 1 < cap && (k = read(fds[0], out + n, cap - 1 - n)) > 0)
        n += (size_t)k;
    out[n] = '\0';
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

TAP_CASE(test_a_forked_child_prints_no_counts_of_its_parent)
{
    struct st_dev d;
    struct st_qp a, b;
    st_dev_open(&d);
    struct st_qp_opts o = { .max_send_wr = 16, .max_recv_wr = 16, .max_sge = 1 };
    st_qp_pair(&d, &a, &b, &o);
    size_t len = 4096;
    char *src = st_buf(len, 1), *dst = st_buf(len, 0);
    struct ibv_mr *smr = ibv_reg_mr(d.pd, src, len, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr *dmr = ibv_reg_mr(d.pd, dst, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    EXPECT_TRUE(smr && dmr);
    for (int i = 0; i < WRITES && smr && dmr; i++) {
        st_post_rdma(a.qp, IBV_WR_RDMA_WRITE, (uint64_t)i, src, (uint32_t)len, smr->lkey, (uintptr_t)dst,
                     dmr->rkey, 0, IBV_SEND_SIGNALED);
        struct ibv_wc wc;
        st_wait_wc(a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, (uint64_t)i);
    }
    EXPECT_MEMEQ(src, dst, len);
    static char out[1 << 14];
    EXPECT_EQ_INT(0, child_stderr(out, sizeof(out)));
    if (strstr(out, "softnic stats"))
        tap_diag("the child printed: %s", out);
    EXPECT_TRUE(strstr(out, "softnic stats") == NULL);
    if (smr)
        ibv_dereg_mr(smr);
    if (dmr)
        ibv_dereg_mr(dmr);
    st_qp_destroy(&a);
    st_qp_destroy(&b);
    st_dev_close(&d);
}

int main(int argc, char **argv)
{
    setenv("SOFTNIC_STATS", "1", 1); /* read when softnic first needs its settings */
    return sntest_main(argc, argv);
}
