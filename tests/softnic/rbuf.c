/* rbuf.c: the receiving side of a connection.  Small frames are read in
 * bulk into a buffer (one recv() for many headers); a payload is copied out
 * of what the buffer already holds and the rest is received straight into
 * the target memory, so a large WRITE costs one kernel copy and no extra
 * one.  CUDA memory goes through a bounce buffer and the driver API; on a
 * VF port, writes into CUDA memory registered without relaxed ordering are
 * additionally charged to the port's VF bucket (84/400 of its rate).
 * Nothing here waits for bytes that have not come: an engine reads what
 * the connection holds and comes back when it holds more (engine.c), so
 * every call says how far it got. */
#include "softnic.h"
#include "rbuf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define RBUF_SIZE (256 * 1024)
#define BOUNCE_SIZE (1024 * 1024)
/* a payload of at least this much is received straight into host memory */
#define DIRECT_BYTES 16384

int rbuf_init(struct sn_rbuf *rb, int fd)
{
    memset(rb, 0, sizeof(*rb));
    rb->fd = fd;
    rb->cap = RBUF_SIZE;
    rb->buf = malloc(rb->cap);
    return rb->buf ? 0 : ENOMEM;
}

void rbuf_free(struct sn_rbuf *rb)
{
    free(rb->buf);
    free(rb->bounce);
    rb->buf = rb->bounce = NULL;
}

/* One recv of what the connection holds, up to len: *got bytes; EAGAIN
 * when it holds nothing, ECONNRESET at its end. */
static int recv_some(struct sn_rbuf *rb, void *dst, size_t len, size_t *got)
{
    for (;;) {
        ssize_t n = recv(rb->fd, dst, len, MSG_DONTWAIT);
        if (n > 0) {
            *got = (size_t)n;
            rb->drained = rb->ask_once && (size_t)n < len;
            return 0;
        }
        if (n == 0)
            return ECONNRESET;
        if (errno == EINTR)
            continue;
        return errno == EWOULDBLOCK ? EAGAIN : errno;
    }
}

/* Buffers at least n bytes (n <= cap) from the socket: 0, EAGAIN, or the
 * connection's errno. */
static int fill(struct sn_rbuf *rb, size_t n)
{
    if (rb->len - rb->pos >= n)
        return 0;
    if (rb->pos) {
        memmove(rb->buf, rb->buf + rb->pos, rb->len - rb->pos);
        rb->len -= rb->pos;
        rb->pos = 0;
    }
    while (rb->len < n) {
        size_t got = 0;
        int err = recv_some(rb, rb->buf + rb->len, rb->cap - rb->len, &got);
        if (err)
            return err;
        rb->len += got;
    }
    return 0;
}

int rbuf_need(struct sn_rbuf *rb, size_t n)
{
    /* between messages, and the socket held no more this step (rbuf_step) */
    if (rb->drained && rb->len == rb->pos)
        return EAGAIN;
    return fill(rb, n);
}

void *rbuf_take(struct sn_rbuf *rb, size_t n)
{
    void *p = rb->buf + rb->pos;
    rb->pos += n;
    return p;
}

static int bounce_get(struct sn_rbuf *rb)
{
    if (!rb->bounce && !(rb->bounce = malloc(BOUNCE_SIZE)))
        return ENOMEM;
    return 0;
}

int rbuf_place(struct sn_rbuf *rb, struct sn_mr *mr, uint64_t addr, size_t len,
               struct sn_port *port, uint64_t since, size_t *done)
{
    bool vf_slow = mr->gpu && port && port->conf.vf && !(mr->access & IBV_ACCESS_RELAXED_ORDERING);
    *done = 0;
    while (len) {
        size_t avail = rb->len - rb->pos, n = 0;
        int err = 0;
        if (avail) {
            n = avail < len ? avail : len;
            /* the payload waits for the VF's writes from since on: the
             * time spent receiving and copying between its pieces is the
             * VF catching up (rate.c), not time lost from its share */
            if (vf_slow)
                rate_take(&port->vf_rate, n, since);
            if ((err = mr_write(mr, addr, rb->buf + rb->pos, n)))
                return err;
            rb->pos += n;
        } else if (!mr->gpu && len >= DIRECT_BYTES) {
            /* zero copy: straight into the registered memory */
            if ((err = recv_some(rb, mr_host_ptr(mr, addr), len, &n)))
                return err;
        } else if (mr->gpu && len >= DIRECT_BYTES) {
            if ((err = bounce_get(rb)) ||
                (err = recv_some(rb, rb->bounce, len < BOUNCE_SIZE ? len : BOUNCE_SIZE, &n)))
                return err;
            if (vf_slow)
                rate_take(&port->vf_rate, n, since);
            if ((err = mr_write(mr, addr, rb->bounce, n)))
                return err;
        } else {
            rb->pos = rb->len = 0;
            /* within a payload the socket is always asked: more is on its way */
            if ((err = fill(rb, 1)))
                return err;
            continue;
        }
        addr += n;
        len -= n;
        *done += n;
    }
    return 0;
}

int rbuf_discard(struct sn_rbuf *rb, size_t len, size_t *done)
{
    *done = 0;
    while (len) {
        size_t avail = rb->len - rb->pos;
        if (!avail) {
            rb->pos = rb->len = 0;
            int err = fill(rb, 1);
            if (err)
                return err;
            continue;
        }
        size_t n = avail < len ? avail : len;
        rb->pos += n;
        len -= n;
        *done += n;
    }
    return 0;
}
