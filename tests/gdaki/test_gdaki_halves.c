/* tests/gdaki/test_gdaki_halves.c: the two ends of a GPU-initiated
 * connection opened separately (gdaki_half_open / gdaki_half_connect), as
 * railnet-write-bw --gpu-initiated does between its client and server: in
 * one process, and in two processes that swap their struct gdaki_qp_info
 * over a socket.  The sender's ring is posted by a CPU thread exactly as
 * the kernel posts; softnic executes it. */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gdaki_queue.h"
#include "railnet_gdaki.h"
#include "tap.h"
#include "build_paths.h"
#include "../../tools/common/fdio.h"

static char err[512];

static void opts(struct gdaki_pair_opts *o)
{
    const char *lib = test_softnic_verbs();
    if (access(lib, R_OK) != 0)
        TAP_SKIP("softnic's libibverbs.so.1 is not built (run from make check)");
    gdaki_pair_opts_default(o, err, sizeof(err));
    o->ibverbs_lib = lib;
    o->sq_depth = 64;
}

static struct gdaki_pair *half(enum gdaki_role role, struct gdaki_qp_info *info)
{
    struct gdaki_pair_opts o;
    opts(&o);
    struct gdaki_pair *p = NULL;
    if (gdaki_half_open(&o, role, &p, info, err, sizeof(err)) != 0)
        tap_fail_at(__FILE__, __LINE__, "gdaki_half_open: %s", err);
    return p;
}

/* n writes of len bytes from src to the peer's raddr/rkey, then quiet. */
static int post_writes(struct gdaki_pair *snd, const struct gdaki_mr *src, uint64_t raddr,
                       uint32_t rkey, int n, uint32_t len)
{
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(snd);
    for (int i = 0; i < n; i++) {
        struct gdaki_op op = { .laddr = src->addr + (uint64_t)i * len, .lkey = src->lkey, .len = len,
                               .raddr = raddr + (uint64_t)i * len, .rkey = rkey };
        if (gdaki_q_post1(q, GDAKI_KIND_WRITE, &op) == GDAKI_SLOT_ERROR)
            return -1;
    }
    return gdaki_q_quiet(q);
}

TAP_CASE(test_halves_in_one_process_connect_and_write)
{
    struct gdaki_qp_info si, ri;
    struct gdaki_pair *snd = half(GDAKI_ROLE_SEND, &si);
    struct gdaki_pair *rcv = half(GDAKI_ROLE_RECV, &ri);
    EXPECT_EQ_U64(GDAKI_QP_INFO_MAGIC, si.magic);
    EXPECT_TRUE(si.qpn != ri.qpn);
    if (gdaki_half_connect(snd, &ri, err, sizeof(err)) || gdaki_half_connect(rcv, &si, err, sizeof(err)))
        tap_fail_at(__FILE__, __LINE__, "gdaki_half_connect: %s", err);
    EXPECT_EQ_INT(IBV_QPS_RTS, gdaki_pair_send_qp_state(snd));
    const int n = 300;
    const uint32_t len = 700;
    uint8_t *src = malloc((size_t)n * len), *dst = calloc(n, len);
    for (size_t i = 0; i < (size_t)n * len; i++)
        src[i] = (uint8_t)(i * 13 + 1);
    struct gdaki_mr ms, md;
    EXPECT_EQ_INT(0, gdaki_pair_reg(snd, src, (size_t)n * len, &ms, err, sizeof(err)));
    EXPECT_EQ_INT(0, gdaki_pair_reg(rcv, dst, (size_t)n * len, &md, err, sizeof(err)));
    EXPECT_EQ_INT(0, post_writes(snd, &ms, md.addr, md.rkey, n, len));
    EXPECT_MEMEQ(src, dst, (size_t)n * len);
    gdaki_pair_close(snd);
    gdaki_pair_close(rcv);
    free(src);
    free(dst);
}

/* What the receiver tells the sender. */
struct offer {
    struct gdaki_qp_info qp;
    uint64_t addr;
    uint32_t rkey;
};

#define XN 200
#define XLEN 1024u

static uint8_t byte_at(size_t i)
{
    return (uint8_t)(i * 31 + 7);
}

/* The receiving process: exit 0 when every byte arrived. */
static int receiver(int fd)
{
    struct offer off;
    struct gdaki_pair *rcv = NULL;
    struct gdaki_pair_opts o;
    opts(&o);
    if (gdaki_half_open(&o, GDAKI_ROLE_RECV, &rcv, &off.qp, err, sizeof(err)) != 0)
        return 10;
    uint8_t *dst = calloc(XN, XLEN);
    struct gdaki_mr md;
    if (gdaki_pair_reg(rcv, dst, (size_t)XN * XLEN, &md, err, sizeof(err)) != 0)
        return 11;
    off.addr = md.addr;
    off.rkey = md.rkey;
    struct gdaki_qp_info theirs;
    if (write(fd, &off, sizeof(off)) != (ssize_t)sizeof(off) || fd_read_all(fd, &theirs, sizeof(theirs)))
        return 12;
    if (gdaki_half_connect(rcv, &theirs, err, sizeof(err)) != 0)
        return 13;
    char c = 'R';
    if (write(fd, &c, 1) != 1 || fd_read_all(fd, &c, 1) || c != 'D')
        return 14;
    for (size_t i = 0; i < (size_t)XN * XLEN; i++)
        if (dst[i] != byte_at(i))
            return 15;
    gdaki_pair_close(rcv);
    return 0;
}

TAP_CASE(test_halves_in_two_processes_connect_and_write)
{
    int sv[2];
    EXPECT_EQ_INT(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    pid_t pid = fork();
    EXPECT_TRUE(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        _exit(receiver(sv[1]));
    }
    close(sv[1]);
    int fd = sv[0];
    struct gdaki_qp_info mine;
    struct gdaki_pair *snd = half(GDAKI_ROLE_SEND, &mine);
    struct offer off;
    EXPECT_EQ_INT(0, fd_read_all(fd, &off, sizeof(off)));
    EXPECT_EQ_INT((int)sizeof(mine), (int)write(fd, &mine, sizeof(mine)));
    if (gdaki_half_connect(snd, &off.qp, err, sizeof(err)) != 0)
        tap_fail_at(__FILE__, __LINE__, "gdaki_half_connect: %s", err);
    char c = 0;
    EXPECT_EQ_INT(0, fd_read_all(fd, &c, 1));    /* the receiver is in RTR/RTS */
    EXPECT_EQ_INT('R', c);
    uint8_t *src = malloc((size_t)XN * XLEN);
    for (size_t i = 0; i < (size_t)XN * XLEN; i++)
        src[i] = byte_at(i);
    struct gdaki_mr ms;
    EXPECT_EQ_INT(0, gdaki_pair_reg(snd, src, (size_t)XN * XLEN, &ms, err, sizeof(err)));
    EXPECT_EQ_INT(0, post_writes(snd, &ms, off.addr, off.rkey, XN, XLEN));
    c = 'D';
    EXPECT_EQ_INT(1, (int)write(fd, &c, 1));
    int status = 0;
    EXPECT_EQ_INT(pid, waitpid(pid, &status, 0));
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_EQ_INT(0, WEXITSTATUS(status));   /* 15: a byte differed in the receiver */
    gdaki_pair_close(snd);
    free(src);
}

TAP_CASE(test_half_connect_rejects_a_foreign_description)
{
    struct gdaki_qp_info si;
    struct gdaki_pair *snd = half(GDAKI_ROLE_SEND, &si);
    struct gdaki_qp_info bad = si;
    bad.magic ^= 1;
    EXPECT_EQ_INT(-1, gdaki_half_connect(snd, &bad, err, sizeof(err)));
    EXPECT_TRUE(strstr(err, "not a QP description") != NULL);
    bad = si;
    bad.mtu = 9;
    EXPECT_EQ_INT(-1, gdaki_half_connect(snd, &bad, err, sizeof(err)));
    EXPECT_EQ_INT(IBV_QPS_INIT, gdaki_pair_send_qp_state(snd));
    gdaki_pair_close(snd);
}

int main(int argc, char **argv)
{
    return tap_run(argc, argv);
}
