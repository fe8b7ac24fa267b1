/* txbuf.h: the sending side of a connection an engine writes to without
 * waiting (see txbuf.c).  Not thread-safe: one writer at a time. */
#ifndef SOFTNIC_TXBUF_H
#define SOFTNIC_TXBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/uio.h>

struct sn_txbuf {
    char *buf;
    size_t cap, pos, len;   /* bytes [pos, len) are still to be sent */
};

/* Sends what the buffer holds, then iov[0..n); what the socket does not
 * take now is copied into the buffer, so the caller may reuse or release
 * the memory iov names at once.  0, or the connection's errno. */
int txbuf_writev(struct sn_txbuf *tb, int fd, const struct iovec *iov, int n);
/* Sends what the buffer holds: 0 once it is empty, EAGAIN while bytes
 * remain (wait for the socket to have room), or the connection's errno. */
int txbuf_flush(struct sn_txbuf *tb, int fd);
static inline size_t txbuf_held(const struct sn_txbuf *tb)
{
    return tb->len - tb->pos;
}
static inline bool txbuf_empty(const struct sn_txbuf *tb)
{
    return tb->len == tb->pos;
}
void txbuf_free(struct sn_txbuf *tb);

#endif
