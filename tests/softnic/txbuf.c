/* txbuf.c: writing a connection without waiting.  An engine must never
 * sleep in sendmsg: the peer that would make room may be a responder or a
 * completer waiting for this very engine (both ends of a connection of one
 * process run on the same pool).  So every write goes out with
 * MSG_DONTWAIT, and the bytes the socket does not take are copied into the
 * connection's buffer, sent first by the next write or flush.  The caller
 * keeps the buffer small: it writes more only once the buffer is empty or
 * nearly so (one pace of a requester's batch, a few responses), and waits
 * for room (SN_ENG_OUT) otherwise.  Copying what did not fit lets the
 * caller release its MR references and CUDA staging at once: nothing on
 * the wire refers to memory that may change owner between steps. */
#include "softnic.h"
#include "txbuf.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define TX_IOV_MAX 1024

/* Appends len bytes at p to the buffer. */
static int hold(struct sn_txbuf *tb, const void *p, size_t len)
{
    if (!len)
        return 0;
    if (tb->pos && tb->pos == tb->len)
        tb->pos = tb->len = 0;
    if (tb->len + len > tb->cap) {
        if (tb->pos) {
            memmove(tb->buf, tb->buf + tb->pos, tb->len - tb->pos);
            tb->len -= tb->pos;
            tb->pos = 0;
        }
        if (tb->len + len > tb->cap) {
            size_t cap = tb->cap ? tb->cap : 4096;
            while (cap < tb->len + len)
                cap *= 2;
            char *nb = realloc(tb->buf, cap);
            if (!nb)
                return ENOMEM;
            tb->buf = nb;
            tb->cap = cap;
        }
    }
    memcpy(tb->buf + tb->len, p, len);
    tb->len += len;
    return 0;
}

/* One sendmsg of up to TX_IOV_MAX iovecs; the bytes it took, or -errno. */
static ssize_t send_some(int fd, const struct iovec *iov, int n)
{
    struct msghdr msg = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n };
    for (;;) {
        ssize_t r = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r >= 0)
            return r;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        return -errno;
    }
}

int txbuf_flush(struct sn_txbuf *tb, int fd)
{
    while (!txbuf_empty(tb)) {
        struct iovec v = { tb->buf + tb->pos, txbuf_held(tb) };
        ssize_t r = send_some(fd, &v, 1);
        if (r < 0)
            return (int)-r;
        if (r == 0)
            return EAGAIN;
        tb->pos += (size_t)r;
    }
    tb->pos = tb->len = 0;
    return 0;
}

int txbuf_writev(struct sn_txbuf *tb, int fd, const struct iovec *iov, int n)
{
    int err = txbuf_flush(tb, fd);
    if (err && err != EAGAIN)
        return err;
    bool full = err == EAGAIN;
    int i = 0;
    size_t off = 0;   /* into iov[i], already sent */
    while (!full && i < n) {
        if (iov[i].iov_len == off) {
            i++;
            off = 0;
            continue;
        }
        struct iovec v[TX_IOV_MAX];
        int k = 0;
        for (int j = i; j < n && k < TX_IOV_MAX; j++) {
            v[k] = iov[j];
            if (j == i) {
                v[k].iov_base = (char *)v[k].iov_base + off;
                v[k].iov_len -= off;
            }
            k++;
        }
        ssize_t r = send_some(fd, v, k);
        if (r < 0)
            return (int)-r;
        size_t sent = (size_t)r, want = 0;
        for (int j = 0; j < k; j++)
            want += v[j].iov_len;
        while (sent && i < n) {
            size_t rest = iov[i].iov_len - off;
            if (sent < rest) {
                off += sent;
                sent = 0;
            } else {
                sent -= rest;
                i++;
                off = 0;
            }
        }
        if ((size_t)r < want)
            full = true;
    }
    for (; i < n; i++, off = 0)
        if ((err = hold(tb, (const char *)iov[i].iov_base + off, iov[i].iov_len - off)))
            return err;
    return 0;
}

void txbuf_free(struct sn_txbuf *tb)
{
    free(tb->buf);
    tb->buf = NULL;
    tb->cap = tb->pos = tb->len = 0;
}
