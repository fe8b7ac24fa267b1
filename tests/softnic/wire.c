/* wire.c: softnic's transport: listener blocks, QPN allocation, the QPN
 * table for incoming connections, connection set-up and socket helpers.
 *
 * A listener block is one TCP listening socket per configured port IP, all
 * bound to the same TCP port number P (chosen by the kernel for the first
 * IP); the block's QPNs are P << 8 | i, i in 0..255.  A peer that knows
 * (GID, QPN) connects to <IPv4 of the GID>:(QPN >> 8) -- no daemon, no
 * shared file.  A port whose IP cannot be bound here (an address of another
 * network namespace) reads DOWN.
 *
 * Beside each TCP listener the block listens on an abstract UNIX socket
 * named after its IP and port (SOFTNIC_WIRE_UNIX, on by default), which
 * only processes of the same network namespace reach, as they reach the
 * TCP one; a peer there connects to it instead.  A request then costs the
 * poster a UNIX send, not a loopback TCP send whose receiving half also
 * runs on the poster's CPU (about 4 us of a 64 KiB message's host CPU on
 * the 2-CPU VM, where a ConnectX's doorbell costs a store).  Any process
 * of the namespace could bind such a name first, so a connection to it is
 * used only when the process listening there owns the TCP listener of the
 * same IP and port (cma_listener_owner); otherwise TCP.
 *
 * Connections are non-blocking: the engines that read and write them
 * never wait (engine.c).
 *
 * Frames (host byte order, little-endian, both ends are this library):
 * requester -> responder: struct sn_wire_hello once, then per request
 * struct sn_wire_req followed by `len` payload bytes for SEND/WRITE, by a
 * struct sn_wire_atomic for an atomic (len 8);
 * responder -> requester: struct sn_wire_resp, READ responses followed by
 * `len` bytes, ATOMIC responses by the 8-byte original value.  Every field
 * is validated by the receiver. */
#include "softnic.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_IPS (SN_MAX_DEVICES * SN_MAX_PORTS)

struct wire_block {
    uint16_t tcp_port;
    int nfds;
    int fds[2 * MAX_IPS];
    struct sn_qp *qp[SN_QP_PER_BLOCK];
    bool used[SN_QP_PER_BLOCK];
};

static struct {
    pthread_mutex_t lock;
    bool started;
    int nips;
    struct in_addr ips[MAX_IPS];
    int nblocks;
    struct wire_block blocks[SN_MAX_BLOCKS];
    int wake[2];
    pthread_t acceptor;
} W = { .lock = PTHREAD_MUTEX_INITIALIZER };

void wire_tune(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int listen_on(struct in_addr ip, uint16_t port, int *fd_out, uint16_t *port_out)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr = ip };
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 256)) {
        int err = errno;
        close(fd);
        return err;
    }
    socklen_t sl = sizeof(sa);
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    *fd_out = fd;
    *port_out = ntohs(sa.sin_port);
    return 0;
}

/* The abstract UNIX name of the listener of ip:port (its network
 * namespace's: a process of another namespace cannot reach it). */
static socklen_t unix_name(struct sockaddr_un *sa, struct in_addr ip, uint16_t port)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    int n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "softnic-wire-%08x-%u", ntohl(ip.s_addr), port);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static int listen_unix(struct in_addr ip, uint16_t port, int *fd_out)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    struct sockaddr_un sa;
    socklen_t len = unix_name(&sa, ip, port);
    if (bind(fd, (struct sockaddr *)&sa, len) || listen(fd, 256)) {
        int err = errno;
        close(fd);
        return err;
    }
    *fd_out = fd;
    return 0;
}

/* The listeners found to own their TCP listener (a look walks the
 * owner's descriptors): each peer block is looked at once, not once per
 * QP connecting to it. */
#define OWNERS_KNOWN 64
static struct {
    pthread_mutex_t lock;
    struct { struct in_addr ip; uint16_t port; uint32_t pid; } e[OWNERS_KNOWN];
    unsigned next;
} owners = { .lock = PTHREAD_MUTEX_INITIALIZER };

static bool listener_owner(uint32_t pid, struct in_addr ip, uint16_t port)
{
    bool known = false;
    pthread_mutex_lock(&owners.lock);
    for (int i = 0; i < OWNERS_KNOWN && !known; i++)
        known = owners.e[i].pid == pid && owners.e[i].port == port && owners.e[i].ip.s_addr == ip.s_addr;
    pthread_mutex_unlock(&owners.lock);
    if (known || !cma_listener_owner(pid, ip, port))
        return known;
    pthread_mutex_lock(&owners.lock);
    unsigned k = owners.next++ % OWNERS_KNOWN;
    owners.e[k].ip = ip;
    owners.e[k].port = port;
    owners.e[k].pid = pid;
    pthread_mutex_unlock(&owners.lock);
    return true;
}

/* A connection to ip:port over its UNIX listener, when that is the
 * listener of the TCP one (above): the socket, or -1.  AF_UNIX connects
 * at once, so the engine that calls it does not wait. */
static int unix_connect(struct in_addr ip, uint16_t port)
{
    struct sockaddr_un sa;
    socklen_t len = unix_name(&sa, ip, port);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    struct ucred cr;
    socklen_t cl = sizeof(cr);
    if (connect(fd, (struct sockaddr *)&sa, len) || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) ||
        !listener_owner((uint32_t)cr.pid, ip, port)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Opens a new block (W.lock held). */
static int block_open(void)
{
    if (W.nblocks == SN_MAX_BLOCKS)
        return ENOSPC;
    struct wire_block *b = &W.blocks[W.nblocks];
    for (int attempt = 0; attempt < 32; attempt++) {
        memset(b, 0, sizeof(*b));
        uint16_t port = 0;
        int err = 0;
        for (int i = 0; i < W.nips; i++) {
            uint16_t got;
            err = listen_on(W.ips[i], port, &b->fds[b->nfds], &got);
            if (err)
                break;
            b->nfds++;
            port = got;
        }
        int ntcp = b->nfds;
        /* a name another process holds: that IP's peers come by TCP */
        for (int i = 0; !err && softnic_global()->conf.wire_unix && i < ntcp; i++)
            if (listen_unix(W.ips[i], port, &b->fds[b->nfds]) == 0)
                b->nfds++;
        if (!err) {
            b->tcp_port = port;
            W.nblocks++;
            return 0;
        }
        for (int i = 0; i < b->nfds; i++)
            close(b->fds[i]);
        if (err != EADDRINUSE)
            return err;
    }
    return EADDRINUSE;
}

static void *acceptor_main(void *arg)
{
    (void)arg;
    struct pollfd pfd[1 + SN_MAX_BLOCKS * 2 * MAX_IPS];
    bool tcp[1 + SN_MAX_BLOCKS * 2 * MAX_IPS]; /* a block's first nips listeners; then its UNIX ones */
    sn_nic_thread_init();
    for (;;) {
        int n = 0;
        tcp[n] = false;
        pfd[n++] = (struct pollfd){ .fd = W.wake[0], .events = POLLIN };
        pthread_mutex_lock(&W.lock);
        for (int b = 0; b < W.nblocks; b++)
            for (int i = 0; i < W.blocks[b].nfds; i++) {
                tcp[n] = i < W.nips;
                pfd[n++] = (struct pollfd){ .fd = W.blocks[b].fds[i], .events = POLLIN };
            }
        pthread_mutex_unlock(&W.lock);
        /* wakes at least every 50 ms: fault_poll() reads SOFTNIC_CTL_FILE here
         * when no QP is busy (fault.c promises a 50 ms period) */
        if (poll(pfd, (nfds_t)n, 50) < 0 && errno != EINTR)
            break;
        if (pfd[0].revents) {
            char c;
            if (read(W.wake[0], &c, 1) == 1 && c == 'q')
                break;
        }
        fault_poll();
        for (int i = 1; i < n; i++) {
            if (!(pfd[i].revents & POLLIN))
                continue;
            int fd = accept4(pfd[i].fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd >= 0) {
                if (tcp[i])
                    wire_tune(fd);
                responder_spawn(fd);
            }
        }
    }
    return NULL;
}

/* fork: the child inherits the listening sockets and the QPN blocks but
 * no acceptor thread; connections to those ports reach the parent.  The
 * child drops them and, if it uses softnic, starts listeners of its own,
 * as a process that opens an RDMA device after its parent did gets its own
 * QPs on a NIC. */
static void wire_prepare(void)
{
    pthread_mutex_lock(&W.lock);
}

static void wire_parent(void)
{
    pthread_mutex_unlock(&W.lock);
}

static void wire_child(void)
{
    pthread_mutex_init(&W.lock, NULL);
    if (!W.started)
        return;
    for (int b = 0; b < W.nblocks; b++)
        for (int i = 0; i < W.blocks[b].nfds; i++)
            close(W.blocks[b].fds[i]);
    close(W.wake[0]);
    close(W.wake[1]);
    memset(W.blocks, 0, sizeof(W.blocks));
    W.nblocks = 0;
    W.nips = 0;
    W.started = false;
}

static pthread_once_t wire_fork_once = PTHREAD_ONCE_INIT;

static void wire_fork_init(void)
{
    pthread_atfork(wire_prepare, wire_parent, wire_child);
}

int wire_start(void)
{
    struct softnic *s = softnic_global();
    pthread_once(&wire_fork_once, wire_fork_init);
    pthread_mutex_lock(&W.lock);
    if (W.started) {
        pthread_mutex_unlock(&W.lock);
        return 0;
    }
    /* the distinct port IPs this process can bind */
    W.nips = 0;
    for (int d = 0; d < s->ndevs; d++)
        for (int p = 0; p < s->dev[d].nports; p++) {
            struct sn_port *port = &s->dev[d].port[p];
            bool dup = false;
            for (int i = 0; i < W.nips; i++)
                if (W.ips[i].s_addr == port->addr.s_addr)
                    dup = true;
            int fd;
            uint16_t got;
            if (!dup && listen_on(port->addr, 0, &fd, &got) == 0) {
                close(fd);
                W.ips[W.nips++] = port->addr;
                dup = true;
            }
            port->bound = dup;
            if (!dup) {
                SN_LOG("wire: cannot bind %s (port %d of %s): port DOWN", port->conf.ip,
                       port->num, s->dev[d].ibdev.name);
                atomic_store(&port->state, IBV_PORT_DOWN);
            }
        }
    int err = W.nips ? 0 : EADDRNOTAVAIL;
    if (!err && pipe2(W.wake, O_CLOEXEC))
        err = errno;
    if (!err && (err = block_open())) {
        close(W.wake[0]);
        close(W.wake[1]);
    }
    if (!err && (err = pthread_create(&W.acceptor, NULL, acceptor_main, NULL))) {
        close(W.wake[0]);
        close(W.wake[1]);
    }
    if (!err)
        W.started = true;
    pthread_mutex_unlock(&W.lock);
    if (err)
        SN_LOG("wire: cannot start listeners: %s", strerror(err));
    return err;
}

uint32_t wire_alloc_qpn(void)
{
    pthread_mutex_lock(&W.lock);
    uint32_t qpn = 0;
    for (int b = 0; b <= W.nblocks && !qpn && W.started; b++) {
        if (b == W.nblocks) {
            if (block_open())
                break;
            char c = 'n';
            if (write(W.wake[1], &c, 1) != 1)
                SN_LOG("wire: cannot wake acceptor");
        }
        struct wire_block *blk = &W.blocks[b];
        /* numbers go round the block, as a NIC's QPNs go round their space:
         * a number freed now comes back last, so a connection a destroyed
         * QP left in flight cannot reach the QP made right after it under
         * the same number (with the same peer numbers too, it would pass the
         * peer check and its stale writes hit the new QP) */
        static uint32_t cursor[SN_MAX_BLOCKS];
        for (uint32_t k = 0; k < SN_QP_PER_BLOCK; k++) {
            uint32_t i = (cursor[b] + k) % SN_QP_PER_BLOCK;
            if (!blk->used[i]) {
                blk->used[i] = true;
                cursor[b] = (i + 1) % SN_QP_PER_BLOCK;
                qpn = (uint32_t)blk->tcp_port << 8 | i;
                break;
            }
        }
    }
    pthread_mutex_unlock(&W.lock);
    return qpn;
}

static struct wire_block *block_of(uint32_t qpn)
{
    for (int b = 0; b < W.nblocks; b++)
        if (W.blocks[b].tcp_port == (qpn >> 8))
            return &W.blocks[b];
    return NULL;
}

void wire_free_qpn(uint32_t qpn)
{
    pthread_mutex_lock(&W.lock);
    struct wire_block *b = block_of(qpn);
    if (b) {
        b->used[qpn & 0xff] = false;
        b->qp[qpn & 0xff] = NULL;
    }
    pthread_mutex_unlock(&W.lock);
}

void wire_qp_register(struct sn_qp *qp)
{
    pthread_mutex_lock(&W.lock);
    struct wire_block *b = block_of(qp->ibqp.qp_num);
    if (b)
        b->qp[qp->ibqp.qp_num & 0xff] = qp;
    pthread_mutex_unlock(&W.lock);
}

void wire_qp_unregister(struct sn_qp *qp)
{
    pthread_mutex_lock(&W.lock);
    struct wire_block *b = block_of(qp->ibqp.qp_num);
    if (b && b->qp[qp->ibqp.qp_num & 0xff] == qp)
        b->qp[qp->ibqp.qp_num & 0xff] = NULL;
    pthread_mutex_unlock(&W.lock);
}

struct sn_qp *wire_qp_attach(uint32_t qpn)
{
    pthread_mutex_lock(&W.lock);
    struct wire_block *b = block_of(qpn);
    struct sn_qp *qp = b ? b->qp[qpn & 0xff] : NULL;
    if (qp) {
        pthread_mutex_lock(&qp->lock);
        if (qp->stopping)
            qp = (pthread_mutex_unlock(&qp->lock), NULL);
        else {
            qp->nresp++;
            pthread_mutex_unlock(&qp->lock);
        }
    }
    pthread_mutex_unlock(&W.lock);
    return qp;
}

int wire_connect_start(const struct sn_port *local, const union ibv_gid *gid, uint32_t qpn,
                       int *fd_out)
{
    static const uint8_t v4_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
    if (memcmp(gid->raw, v4_prefix, sizeof(v4_prefix)) != 0)
        return EHOSTUNREACH;
    if (softnic_global()->conf.wire_unix) {
        struct in_addr ip;
        memcpy(&ip, &gid->raw[12], 4);
        int ufd = unix_connect(ip, (uint16_t)(qpn >> 8));
        if (ufd >= 0) {
            *fd_out = ufd;
            return 0;
        }
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return errno;
    struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr = local->addr };
    struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(qpn >> 8)) };
    memcpy(&dst.sin_addr, &gid->raw[12], 4);
    if (bind(fd, (struct sockaddr *)&src, sizeof(src)) ||
        (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) && errno != EINPROGRESS)) {
        int err = errno;
        close(fd);
        return err;
    }
    wire_tune(fd);
    *fd_out = fd;
    return 0;
}

int wire_connect_result(int fd)
{
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len))
        return errno;
    if (err)
        return err;
    struct pollfd p = { .fd = fd, .events = POLLOUT };
    if (poll(&p, 1, 0) == 0)
        return EINPROGRESS;
    if (p.revents & (POLLERR | POLLHUP))
        return ECONNREFUSED;
    return 0;
}
