/* plugin/ib/oob.c: non-blocking TCP sockets for the connection bootstrap. */
#ifndef _GNU_SOURCE
#endif
#include "oob.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int failf(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int failf(char *err, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, OOB_ERR_LEN, fmt, ap);
        va_end(ap);
    }
    return OOB_ERROR;
}

static void sock_tune(int fd)
{
    int one = 1;
    /* handshake messages are small and latency-bound */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int oob_listen(struct oob_addr *at, int *fd_out, char err[OOB_ERR_LEN])
{
    int af = at->family == 6 ? AF_INET6 : AF_INET;
    int fd = socket(af, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return failf(err, "socket(): %s", strerror(errno));
    struct sockaddr_storage ss;
    socklen_t sl;
    memset(&ss, 0, sizeof(ss));
    if (af == AF_INET) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
        sin->sin_family = AF_INET;
        memcpy(&sin->sin_addr, at->addr, 4);
        sl = sizeof(*sin);
    } else {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
        sin6->sin6_family = AF_INET6;
        memcpy(&sin6->sin6_addr, at->addr, 16);
        sl = sizeof(*sin6);
    }
    /* port 0: the kernel picks a free port, passed along in the handle */
    if (bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, 64) != 0) {
        int e = errno;
        close(fd);
        return failf(err, "bind/listen on an ephemeral TCP port of the configured address: %s", strerror(e));
    }
    sl = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
        int e = errno;
        close(fd);
        return failf(err, "getsockname(): %s", strerror(e));
    }
    at->port = ntohs(af == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port : ((struct sockaddr_in6 *)&ss)->sin6_port);
    *fd_out = fd;
    return OOB_DONE;
}

int oob_accept(int listen_fd, int *conn_fd, char err[OOB_ERR_LEN])
{
    *conn_fd = -1;
    int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
            return OOB_AGAIN;
        return failf(err, "accept(): %s", strerror(errno));
    }
    sock_tune(fd);
    *conn_fd = fd;
    return OOB_DONE;
}

int oob_connect_start(const struct oob_addr *to, int *fd_out, char err[OOB_ERR_LEN])
{
    struct sockaddr_storage ss;
    socklen_t sl;
    memset(&ss, 0, sizeof(ss));
    if (to->family == 4) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
        sin->sin_family = AF_INET;
        memcpy(&sin->sin_addr, to->addr, 4);
        sin->sin_port = htons(to->port);
        sl = sizeof(*sin);
    } else if (to->family == 6) {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
        sin6->sin6_family = AF_INET6;
        memcpy(&sin6->sin6_addr, to->addr, 16);
        sin6->sin6_port = htons(to->port);
        sl = sizeof(*sin6);
    } else {
        return failf(err, "address family %u is neither 4 nor 6", to->family);
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return failf(err, "socket(): %s", strerror(errno));
    sock_tune(fd);
    if (connect(fd, (struct sockaddr *)&ss, sl) != 0 && errno != EINPROGRESS && errno != EINTR) {
        int e = errno;
        close(fd);
        char a[INET6_ADDRSTRLEN] = "?";
        inet_ntop(ss.ss_family, to->addr, a, sizeof(a));
        return failf(err, "connect to %s port %u: %s", a, to->port, strerror(e));
    }
    *fd_out = fd;
    return OOB_DONE;
}

int oob_connect_poll(int fd, char err[OOB_ERR_LEN])
{
    struct pollfd p = { .fd = fd, .events = POLLOUT };
    int r = poll(&p, 1, 0);
    if (r < 0)
        return errno == EINTR ? OOB_AGAIN : failf(err, "poll(): %s", strerror(errno));
    if (r == 0)
        return OOB_AGAIN;
    int soerr = 0;
    socklen_t l = sizeof(soerr);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &l) != 0)
        return failf(err, "getsockopt(SO_ERROR): %s", strerror(errno));
    if (soerr)
        return failf(err, "TCP connect to the listener failed: %s (is the peer alive, the handle current?)",
                     strerror(soerr));
    return OOB_DONE;
}

void oob_default_addr(struct oob_addr *out)
{
    memset(out, 0, sizeof(*out));
    out->family = 4;
    out->addr[0] = 127;
    out->addr[3] = 1;
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0)
        return;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK))
            continue;
        memcpy(out->addr, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
        break;
    }
    freeifaddrs(ifs);
}

void oob_tx_init(struct oob_tx *tx, const uint8_t *msg, size_t len)
{
    if (len > sizeof(tx->buf))
        len = 0; /* callers encode into HS_MSG_MAX; never overflow */
    memcpy(tx->buf, msg, len);
    tx->len = len;
    tx->off = 0;
}

int oob_tx_progress(int fd, struct oob_tx *tx, char err[OOB_ERR_LEN])
{
    while (tx->off < tx->len) {
        ssize_t n = send(fd, tx->buf + tx->off, tx->len - tx->off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return OOB_AGAIN;
            if (errno == EINTR)
                continue;
            return failf(err, "send() to the peer: %s", strerror(errno));
        }
        tx->off += (size_t)n;
    }
    return OOB_DONE;
}

void oob_rx_init(struct oob_rx *rx)
{
    rx->want = HS_HEADER_SIZE;
    rx->off = 0;
    rx->type = 0;
}

int oob_rx_progress(int fd, struct oob_rx *rx, char err[OOB_ERR_LEN])
{
    for (;;) {
        while (rx->off < rx->want) {
            ssize_t n = recv(fd, rx->buf + rx->off, rx->want - rx->off, MSG_DONTWAIT);
            if (n == 0)
                return failf(err, "the peer closed the connection during the handshake (%zu of %zu bytes)",
                             rx->off, rx->want);
            if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    return OOB_AGAIN;
                if (errno == EINTR)
                    continue;
                return failf(err, "recv() from the peer: %s", strerror(errno));
            }
            rx->off += (size_t)n;
        }
        if (rx->want != HS_HEADER_SIZE || rx->type != 0)
            return OOB_DONE;
        char herr[HS_ERR_LEN];
        uint32_t len;
        if (hs_header_parse(rx->buf, rx->off, &rx->type, &len, herr) != HS_OK)
            return failf(err, "handshake: %s", herr);
        rx->want = len; /* bounded by HS_MSG_MAX in hs_header_parse */
        if (rx->want == HS_HEADER_SIZE)
            return OOB_DONE;
    }
}

int oob_peer_alive(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    int r = poll(&p, 1, 0);
    if (r <= 0)
        return 1;
    if (p.revents & (POLLERR | POLLNVAL))
        return 0;
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0)
        return 0;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        return 0;
    return 1;
}
