/* udwire.c: the datagram wire of UD QPs.
 *
 * RoCE v2 carries UD over UDP; so does softnic.  A listener block's UD QPs
 * (wire.c: QPNs P << 8 | i) share one UDP socket per port IP, bound to UDP
 * port P, so that a sender that knows (GID, QPN) -- all a UD address
 * handle and work request give it -- knows where to send, as an RC
 * requester knows which TCP listener to connect to.  The sockets are opened
 * with the block's first UD QP and stay open with the block's listeners.
 *
 * Each socket is read by one engine task (engine.c): a step takes up to
 * STEP_DATAGRAMS datagrams and stops, so a flood on one port does not hold
 * an engine; there is no thread per QP or per socket.  Anything can send a
 * datagram to a UDP port, so every one is checked here (size, magic,
 * version, opcode, flags, QPNs, length) before ud.c looks at it; those that
 * fail are dropped and counted (softnic_ctl_ud_counts), as a NIC drops a
 * malformed packet. */
#include "softnic.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_IPS (SN_MAX_DEVICES * SN_MAX_PORTS)
#define STEP_DATAGRAMS 64
/* the largest datagram a port sends (MTU 4096) plus one byte, so that a
 * longer one is seen as such and dropped */
#define RX_BYTES (sizeof(struct sn_ud_hdr) + 4096 + 1)
/* asked of the kernel for each socket (it caps it at net.core.rmem_max
 * unless the process may force it): a burst an engine has not read yet
 * waits there rather than being lost */
#define SOCK_BUF (4 << 20)

struct ud_sock {
    uint16_t block;                /* UDP port = the block's TCP port */
    struct in_addr ip;
    int fd;
    struct sn_eng_task *task;
    char *rx;                      /* RX_BYTES, for the task's steps */
};

static struct {
    pthread_mutex_t lock;          /* guards n and the entries' creation */
    int n;
    struct ud_sock s[SN_MAX_BLOCKS * MAX_IPS];
} U = { .lock = PTHREAD_MUTEX_INITIALIZER };

struct sn_ud_counts sn_ud_cnt;

/* Checks a datagram of n bytes; true when ud.c may look at it. */
static bool ud_valid(const struct ud_sock *s, const char *buf, ssize_t n,
                     const struct sockaddr_in *from, socklen_t fromlen)
{
    const struct sn_ud_hdr *h = (const struct sn_ud_hdr *)buf;
    if (fromlen != sizeof(*from) || from->sin_family != AF_INET)
        return false;
    if (n < (ssize_t)sizeof(*h) || h->magic != SN_UD_MAGIC || h->version != SN_UD_VERSION)
        return false;
    if (h->op != SN_OP_SEND && h->op != SN_OP_SEND_IMM)
        return false;
    if ((h->flags & ~SN_REQ_SOLICITED) || h->pad[0] || h->pad[1] || h->pad[2] || h->pad2)
        return false;
    if (h->len != (uint64_t)n - sizeof(*h) || h->len > 4096)
        return false;
    if (h->dst_qpn >= (1u << 24) || h->src_qpn >= (1u << 24) || (h->dst_qpn >> 8) != s->block)
        return false;
    if (h->op == SN_OP_SEND && h->imm)
        return false;
    return true;
}

static unsigned ud_step(struct sn_eng_task *t, void *arg)
{
    struct ud_sock *s = arg;
    (void)t;
    for (int i = 0; i < STEP_DATAGRAMS; i++) {
        struct sockaddr_in from;
        socklen_t fromlen = sizeof(from);
        ssize_t n = recvfrom(s->fd, s->rx, RX_BYTES, MSG_DONTWAIT | MSG_TRUNC,
                             (struct sockaddr *)&from, &fromlen);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            /* EAGAIN: read dry.  Anything else (an ICMP error queued by
             * an earlier send) says nothing about the next datagram. */
            return errno == EAGAIN || errno == EWOULDBLOCK ? SN_ENG_IN : SN_ENG_MORE;
        }
        if (n > (ssize_t)RX_BYTES || !ud_valid(s, s->rx, n, &from, fromlen)) {
            atomic_fetch_add(&sn_ud_cnt.malformed, 1);
            continue;
        }
        const struct sn_ud_hdr *h = (const struct sn_ud_hdr *)s->rx;
        ud_deliver(h, s->rx + sizeof(*h), from.sin_addr, s->ip);
    }
    return SN_ENG_MORE;
}

/* Opens and starts the socket of block on ip (U.lock held). */
static int sock_open(uint16_t block, struct in_addr ip)
{
    struct ud_sock *s = &U.s[U.n];
    memset(s, 0, sizeof(*s));
    s->block = block;
    s->ip = ip;
    s->rx = malloc(RX_BYTES);
    s->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int err = !s->rx ? ENOMEM : s->fd < 0 ? errno : 0;
    if (!err) {
        int sz = SOCK_BUF;
        /* past net.core.rmem_max where the process may (CAP_NET_ADMIN) */
        if (setsockopt(s->fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)))
            setsockopt(s->fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
        setsockopt(s->fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(block), .sin_addr = ip };
        if (bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)))
            err = errno;
    }
    if (!err)
        err = engine_task_new(ud_step, s, SN_ROLE_RESPONDER, &s->task);
    if (err) {
        if (s->fd >= 0)
            close(s->fd);
        free(s->rx);
        return err;
    }
    engine_task_fd(s->task, s->fd);
    U.n++;
    engine_task_kick(s->task);   /* its first step arms the socket */
    return 0;
}

int udwire_open(uint32_t qpn)
{
    struct softnic *g = softnic_global();
    uint16_t block = (uint16_t)(qpn >> 8);
    int err = 0;
    pthread_mutex_lock(&U.lock);
    for (int d = 0; d < g->ndevs && !err; d++)
        for (int p = 0; p < g->dev[d].nports && !err; p++) {
            const struct sn_port *port = &g->dev[d].port[p];
            if (!port->bound)
                continue;          /* an address of another namespace */
            bool have = false;
            for (int i = 0; i < U.n && !have; i++)
                have = U.s[i].block == block && U.s[i].ip.s_addr == port->addr.s_addr;
            if (!have)
                err = U.n == (int)(sizeof(U.s) / sizeof(U.s[0])) ? ENOSPC
                                                                 : sock_open(block, port->addr);
        }
    pthread_mutex_unlock(&U.lock);
    if (err)
        SN_LOG("ud: cannot open the datagram socket of QPN block %u: %s", block, strerror(err));
    return err;
}

int udwire_send(uint32_t src_qpn, struct in_addr ip, struct in_addr dst,
                const struct sn_ud_hdr *h, const void *payload, uint32_t len)
{
    uint16_t block = (uint16_t)(src_qpn >> 8);
    int fd = -1;
    pthread_mutex_lock(&U.lock);
    for (int i = 0; i < U.n && fd < 0; i++)
        if (U.s[i].block == block && U.s[i].ip.s_addr == ip.s_addr)
            fd = U.s[i].fd;
    pthread_mutex_unlock(&U.lock);
    if (fd < 0)
        return ENETDOWN;
    struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(h->dst_qpn >> 8)),
                              .sin_addr = dst };
    struct iovec iov[2] = { { .iov_base = (void *)h, .iov_len = sizeof(*h) },
                            { .iov_base = (void *)payload, .iov_len = len } };
    struct msghdr m = { .msg_name = &to, .msg_namelen = sizeof(to), .msg_iov = iov,
                        .msg_iovlen = len ? 2 : 1 };
    for (;;) {
        if (sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0)
            return 0;
        if (errno != EINTR)
            return errno;
    }
}
