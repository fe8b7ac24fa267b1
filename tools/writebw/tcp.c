/* tools/writebw/tcp.c: the out-of-band TCP channel (see tcp.h). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../common/bw.h"
#include "../common/strfmt.h"
#include "tcp.h"

static int ms_left(double deadline)
{
    if (deadline <= 0)
        return -1;
    double left = deadline - bw_now();
    return left <= 0 ? 0 : (int)(left * 1000) + 1;
}

int tcp_listen(int port, int *bound, char *err, size_t errlen)
{
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int v6 = fd >= 0;
    if (!v6)
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        str_fmt(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int rc;
    if (v6) {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
        struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
                                  .sin6_addr = IN6ADDR_ANY_INIT };
        rc = bind(fd, (struct sockaddr *)&a, sizeof(a));
    } else {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_ANY) };
        rc = bind(fd, (struct sockaddr *)&a, sizeof(a));
    }
    if (rc || listen(fd, 1)) {
        str_fmt(err, errlen, "cannot listen on TCP port %d: %s (another server running? use -p)",
                port, strerror(errno));
        close(fd);
        return -1;
    }
    if (bound) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        *bound = port;
        if (!getsockname(fd, (struct sockaddr *)&ss, &sl))
            *bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                    : ((struct sockaddr_in *)&ss)->sin_port);
    }
    return fd;
}

static void tune(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int tcp_accept_one(int lfd, double timeout, char *peer, size_t peerlen, char *err, size_t errlen)
{
    struct pollfd p = { .fd = lfd, .events = POLLIN };
    double deadline = timeout > 0 ? bw_now() + timeout : 0;
    for (;;) {
        int n = poll(&p, 1, ms_left(deadline));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            str_fmt(err, errlen, "poll: %s", strerror(errno));
            return -1;
        }
        if (n == 0) {
            str_fmt(err, errlen, "no client connected within %.0f s", timeout);
            return -1;
        }
        break;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
    if (fd < 0) {
        str_fmt(err, errlen, "accept: %s", strerror(errno));
        return -1;
    }
    char host[NI_MAXHOST] = "?";
    getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), NULL, 0, NI_NUMERICHOST);
    str_fmt(peer, peerlen, "%s", host);
    tune(fd);
    return fd;
}

/* One non-blocking connect bounded by the deadline: 0, or an errno. */
static int connect_once(const struct addrinfo *ai, double deadline, int *out)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0)
        return errno;
    int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc && errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        return e;
    }
    if (rc) {
        struct pollfd p = { .fd = fd, .events = POLLOUT };
        int n;
        do
            n = poll(&p, 1, ms_left(deadline));
        while (n < 0 && errno == EINTR);
        if (n <= 0) {
            close(fd);
            return n == 0 ? ETIMEDOUT : errno;
        }
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
        if (soerr) {
            close(fd);
            return soerr;
        }
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    *out = fd;
    return 0;
}

int tcp_connect(const char *host, int port, double timeout, char *err, size_t errlen)
{
    char service[16];
    str_fmt(service, sizeof(service), "%d", port);
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
    int g = getaddrinfo(host, service, &hints, &res);
    if (g) {
        str_fmt(err, errlen, "cannot resolve server '%s': %s", host, gai_strerror(g));
        return -1;
    }
    double deadline = bw_now() + timeout;
    int last = ETIMEDOUT, fd = -1;
    while (fd < 0) {
        for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next)
            last = connect_once(ai, deadline, &fd);
        if (fd >= 0 || bw_now() >= deadline)
            break;
        /* refused: the server may not be listening yet */
        usleep(100 * 1000);
    }
    freeaddrinfo(res);
    if (fd < 0) {
        str_fmt(err, errlen, "cannot reach server %s:%d within %.0f s: %s", host, port, timeout,
                strerror(last));
        return -1;
    }
    tune(fd);
    return fd;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int tcp_send(int fd, uint32_t type, const void *buf, uint32_t len, char *err, size_t errlen)
{
    uint8_t hdr[8];
    put32(hdr, type);
    put32(hdr + 4, len);
    struct iovec iov[2] = { { hdr, 8 }, { (void *)buf, len } };
    struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };
    size_t total = 8 + (size_t)len, sent = 0;
    while (sent < total) {
        ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            str_fmt(err, errlen, "peer connection lost while sending: %s", strerror(errno));
            return -1;
        }
        sent += (size_t)n;
        while (n > 0 && m.msg_iovlen) {
            size_t take = (size_t)n < m.msg_iov->iov_len ? (size_t)n : m.msg_iov->iov_len;
            m.msg_iov->iov_base = (char *)m.msg_iov->iov_base + take;
            m.msg_iov->iov_len -= take;
            n -= (ssize_t)take;
            if (!m.msg_iov->iov_len) {
                m.msg_iov++;
                m.msg_iovlen--;
            }
        }
    }
    return 0;
}

static int recv_all(int fd, void *buf, size_t len, double deadline, double timeout, char *err,
                    size_t errlen)
{
    size_t got = 0;
    while (got < len) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int n = poll(&p, 1, ms_left(deadline));
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0) {
            str_fmt(err, errlen, "timeout: no word from the peer for %.0f s", timeout);
            return -1;
        }
        ssize_t r = n < 0 ? -1 : recv(fd, (char *)buf + got, len - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0) {
            str_fmt(err, errlen, "closed: the peer closed the connection (did it exit?)");
            return -1;
        }
        if (r < 0) {
            str_fmt(err, errlen, "closed: peer connection lost: %s", strerror(errno));
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

int tcp_recv(int fd, double timeout, uint32_t *type, void *buf, uint32_t cap, uint32_t *len,
             char *err, size_t errlen)
{
    double deadline = timeout > 0 ? bw_now() + timeout : 0;
    uint8_t hdr[8];
    if (recv_all(fd, hdr, 8, deadline, timeout, err, errlen))
        return -1;
    *type = get32(hdr);
    *len = get32(hdr + 4);
    if (*len > cap || *len > TCP_MAX_MSG) {
        str_fmt(err, errlen, "peer sent a %u-byte message (type %u), more than %u: not a "
                "railnet-write-bw of this version?", *len, *type, cap);
        return -1;
    }
    return recv_all(fd, buf, *len, deadline, timeout, err, errlen);
}
