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
    struct st_write_pair p;
    st_write_pair_open(&p, 4096);
    for (int i = 0; i < WRITES && p.smr && p.dmr; i++) {
        st_post_rdma(p.a.qp, IBV_WR_RDMA_WRITE, (uint64_t)i, p.src, (uint32_t)p.len, p.smr->lkey,
                     (uintptr_t)p.dst, p.dmr->rkey, 0, IBV_SEND_SIGNALED);
        struct ibv_wc wc;
        st_wait_wc(p.a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, (uint64_t)i);
    }
    EXPECT_MEMEQ(p.src, p.dst, p.len);
    static char out[1 << 14];
    EXPECT_EQ_INT(0, child_stderr(out, sizeof(out)));
    if (strstr(out, "softnic stats"))
        tap_diag("the child printed: %s", out);
    EXPECT_TRUE(strstr(out, "softnic stats") == NULL);
    st_write_pair_close(&p);
}

int main(int argc, char **argv)
{
    setenv("SOFTNIC_STATS", "1", 1); /* read when softnic first needs its settings */
    return sntest_main(argc, argv);
}
