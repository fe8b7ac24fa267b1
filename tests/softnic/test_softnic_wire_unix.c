/* tests/softnic/test_softnic_wire_unix.c: connections to a listener of the
 * same network namespace run over its abstract UNIX socket
 * (SOFTNIC_WIRE_UNIX, wire.c), and only when the process listening there
 * owns the TCP listener of the same IP and port: a name another process
 * bound first is passed over for TCP. */
#include "sntest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define WAIT_MS 5000
#define NAME_PREFIX "softnic-wire-"

/* Connected sockets of this process whose peer is a softnic-wire name. */
static int unix_wire_sockets(void)
{
    int n = 0;
    for (int fd = 0; fd < 4096; fd++) {
        struct sockaddr_un sa;
        socklen_t len = sizeof(sa);
        if (getpeername(fd, (struct sockaddr *)&sa, &len) || sa.sun_family != AF_UNIX ||
            len <= offsetof(struct sockaddr_un, sun_path) + 1)
            continue;
        if (sa.sun_path[0] == 0 && strncmp(sa.sun_path + 1, NAME_PREFIX, strlen(NAME_PREFIX)) == 0)
            n++;
    }
    return n;
}

static bool wire_unix_on(void)
{
    const char *v = getenv("SOFTNIC_WIRE_UNIX");
    return !v || strcmp(v, "0") != 0;
}

TAP_CASE(test_a_same_host_connection_runs_over_a_unix_socket)
{
    struct st_write_pair p;
    st_write_pair_open(&p, 4096);
    st_post_rdma(p.a.qp, IBV_WR_RDMA_WRITE, 1, p.src, 4096, p.smr->lkey, (uintptr_t)p.dst, p.dmr->rkey, 0,
                 IBV_SEND_SIGNALED);
    struct ibv_wc wc;
    st_wait_wc(p.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 1);
    EXPECT_TRUE(memcmp(p.src, p.dst, 4096) == 0);
    int n = unix_wire_sockets();
    if (wire_unix_on())
        EXPECT_TRUE(n >= 1);
    else
        EXPECT_EQ_INT(0, n);
    st_write_pair_close(&p);
}

/* A TCP listener on ip, port chosen by the kernel: its socket. */
static int tcp_listener(struct in_addr ip, uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = ip };
    socklen_t len = sizeof(sa);
    EXPECT_TRUE(fd >= 0);
    EXPECT_EQ_INT(0, bind(fd, (struct sockaddr *)&sa, sizeof(sa)));
    EXPECT_EQ_INT(0, listen(fd, 8));
    EXPECT_EQ_INT(0, getsockname(fd, (struct sockaddr *)&sa, &len));
    *port = ntohs(sa.sin_port);
    return fd;
}

/* A UNIX listener under softnic's name for ip:port. */
static int unix_listener(struct in_addr ip, uint16_t port)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, NAME_PREFIX "%08x-%u", ntohl(ip.s_addr), port);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    EXPECT_TRUE(fd >= 0);
    EXPECT_EQ_INT(0, bind(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)));
    EXPECT_EQ_INT(0, listen(fd, 8));
    return fd;
}

/* The first connection waiting on listener fd within ms, taken: its
 * socket, or -1. */
static int take_one(int fd, int ms)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    if (poll(&p, 1, ms) != 1)
        return -1;
    return accept4(fd, NULL, NULL, SOCK_CLOEXEC);
}

/* Whether a connection waits on listener fd within ms (taken and closed). */
static bool accepted(int fd, int ms)
{
    int c = take_one(fd, ms);
    if (c < 0)
        return false;
    close(c);
    return true;
}

/* A QP of ours connected to QPN port << 8 at our port 1's GID, made to
 * connect by a post; destroyed by the caller. */
static void qp_towards(struct st_dev *d, struct st_qp *q, uint16_t port)
{
    const struct st_qp_opts o = { .max_inline = 64 };
    st_qp_create(d, q, &o, 16);
    struct st_qp_info peer;
    st_qp_info(d, q, &peer);
    peer.qpn = (uint32_t)port << 8;
    st_qp_connect(q, &peer);
    static char byte;
    st_post_send(q->qp, 1, &byte, 1, 0, IBV_SEND_INLINE | IBV_SEND_SIGNALED);
}

/* 1 when the first connection waiting on listener fd sent a byte, else 0
 * (none waiting, or one that sent nothing). */
static char bytes_from_any(int fd)
{
    int c = take_one(fd, 0);
    if (c < 0)
        return 0;
    char buf[256];
    ssize_t n = recv(c, buf, sizeof(buf), MSG_DONTWAIT);
    close(c);
    return n > 0 ? 1 : 0;
}

/* The squatter: binds the UNIX name of the parent's TCP listener (port
 * from the parent), says so, then tells whether a connection sent it
 * anything (the requester may connect to see who listens, and then must
 * go: a hello, or a request, would give it the connection). */
static void squatter(int fd)
{
    struct in_addr ip;
    uint16_t port;
    st_xfer_recv(fd, &ip, sizeof(ip));
    st_xfer_recv(fd, &port, sizeof(port));
    int l = unix_listener(ip, port);
    char ready = 1;
    st_xfer_send(fd, &ready, 1);
    st_xfer_recv(fd, &ready, 1);   /* the parent's QP has connected by then */
    char got = bytes_from_any(l);
    st_xfer_send(fd, &got, 1);
    close(l);
}

/* Opens the device for a case about UNIX connections (skipped without
 * them): port 1's IPv4 address. */
static struct in_addr open_for_unix(struct st_dev *d)
{
    if (!wire_unix_on())
        TAP_SKIP("SOFTNIC_WIRE_UNIX=0: no connection tries a UNIX socket");
    st_dev_open(d);
    union ibv_gid gid;
    EXPECT_EQ_INT(0, ibv_query_gid(d->ctx, 1, 0, &gid));
    struct in_addr ip;
    memcpy(&ip, &gid.raw[12], 4);
    return ip;
}

TAP_CASE(test_a_unix_name_bound_by_another_process_is_passed_over_for_tcp)
{
    struct st_dev d;
    struct in_addr ip = open_for_unix(&d);
    /* the squatter first: a child holding our TCP listener's descriptor
     * would own it too */
    int fd;
    pid_t child = st_fork_peer(squatter, &fd);
    uint16_t port;
    int tl = tcp_listener(ip, &port);
    st_xfer_send(fd, &ip, sizeof(ip));
    st_xfer_send(fd, &port, sizeof(port));
    char c;
    st_xfer_recv(fd, &c, 1);
    struct st_qp q;
    qp_towards(&d, &q, port);
    /* the connection comes to our TCP listener, not to the squatter */
    EXPECT_TRUE(accepted(tl, WAIT_MS));
    st_xfer_send(fd, &c, 1);
    char told = 1;
    st_xfer_recv(fd, &told, 1);
    EXPECT_EQ_INT(0, told);
    int status = 0;
    EXPECT_EQ_INT(child, waitpid(child, &status, 0));
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(fd);
    close(tl);
    st_qp_destroy(&q);
    st_dev_close(&d);
}

TAP_CASE(test_the_unix_name_of_the_tcp_listeners_owner_is_taken)
{
    struct st_dev d;
    struct in_addr ip = open_for_unix(&d);
    uint16_t port;
    int tl = tcp_listener(ip, &port);
    int ul = unix_listener(ip, port);
    struct st_qp q;
    qp_towards(&d, &q, port);
    EXPECT_TRUE(accepted(ul, WAIT_MS));
    EXPECT_TRUE(!accepted(tl, 0));
    close(ul);
    close(tl);
    st_qp_destroy(&q);
    st_dev_close(&d);
}

int main(int argc, char **argv) { return sntest_main(argc, argv); }
