/* rbuf.c: the receiving side of a connection.  Small frames are read in
 * bulk into a buffer (one recv() for many headers); a payload is copied out
 * of what the buffer already holds and the rest is received straight into
 * the target memory, so a large WRITE costs one kernel copy and no extra
 * one.  CUDA memory goes through a bounce buffer and the driver API; on a
 * VF port, writes into CUDA memory registered without relaxed ordering are
 * additionally charged to the port's VF bucket (84/400 of its rate).
 * Before every blocking recv the owner's before_block hook runs (the
 * responder flushes its coalesced ACK there). */
#include "softnic.h"
#include "rbuf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define RBUF_SIZE (256 * 1024)
#define BOUNCE_SIZE (1024 * 1024)

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

static int rbuf_recv(struct sn_rbuf *rb, void *dst, size_t len, bool all, size_t *got)
{
    if (rb->before_block)
        rb->before_block(rb->arg);
    if (!all && (sn_spin_on() || rb->poll_next)) {
        /* take what the socket holds; if nothing, poll a while before
         * sleeping in recv (spin.c) */
        ssize_t n = recv(rb->fd, dst, len, MSG_DONTWAIT);
        if (n > 0) {
            if (got)
                *got = (size_t)n;
            return 0;
        }
        if (n == 0)
            return ECONNRESET;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return errno;
        /* past an ACK poll that found nothing, SOFTNIC_SPIN_US's own
         * poll comes on top (both bounded) */
        if (!(rb->poll_next && sn_ack_poll_readable(rb->fd, SN_POLL_RESPONDER)))
            sn_spin_readable(rb->fd);
    }
    size_t done = 0;
    while (done < len) {
        ssize_t n = recv(rb->fd, (char *)dst + done, len - done, all ? MSG_WAITALL : 0);
        if (n == 0)
            return ECONNRESET;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        done += (size_t)n;
        if (!all)
            break;
    }
    if (got)
        *got = done;
    return 0;
}

int rbuf_need(struct sn_rbuf *rb, size_t n)
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
        int err = rbuf_recv(rb, rb->buf + rb->len, rb->cap - rb->len, false, &got);
        if (err)
            return err;
        rb->len += got;
    }
    return 0;
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

/* Copies len bytes of the stream into mr at addr. */
int rbuf_place(struct sn_rbuf *rb, struct sn_mr *mr, uint64_t addr, size_t len,
               struct sn_port *port)
{
    bool vf_slow = mr->gpu && port && port->conf.vf && !(mr->access & IBV_ACCESS_RELAXED_ORDERING);
    /* the payload waits for the VF's writes from here on: the time spent
     * receiving and copying between its pieces is the VF catching up
     * (rate.c), not time lost from its share */
    uint64_t since = vf_slow ? sn_now_ns() : 0;
    while (len) {
        size_t avail = rb->len - rb->pos;
        if (avail) {
            size_t n = avail < len ? avail : len;
            if (vf_slow)
                rate_take(&port->vf_rate, n, since);
            int err = mr_write(mr, addr, rb->buf + rb->pos, n);
            if (err)
                return err;
            rb->pos += n;
            addr += n;
            len -= n;
            continue;
        }
        if (!mr->gpu && len >= 16384) {
            /* zero copy: straight into the registered memory */
            return rbuf_recv(rb, mr_host_ptr(mr, addr), len, true, NULL);
        }
        if (mr->gpu && len >= 16384) {
            int err = bounce_get(rb);
            if (err)
                return err;
            size_t n = len < BOUNCE_SIZE ? len : BOUNCE_SIZE;
            if ((err = rbuf_recv(rb, rb->bounce, n, true, NULL)))
                return err;
            if (vf_slow)
                rate_take(&port->vf_rate, n, since);
            if ((err = mr_write(mr, addr, rb->bounce, n)))
                return err;
            addr += n;
            len -= n;
            continue;
        }
        rb->pos = rb->len = 0;
        int err = rbuf_need(rb, 1);
        if (err)
            return err;
    }
    return 0;
}

/* Drops len bytes of the stream. */
int rbuf_discard(struct sn_rbuf *rb, size_t len)
{
    while (len) {
        size_t avail = rb->len - rb->pos;
        if (!avail) {
            rb->pos = rb->len = 0;
            int err = rbuf_need(rb, 1);
            if (err)
                return err;
            continue;
        }
        size_t n = avail < len ? avail : len;
        rb->pos += n;
        len -= n;
    }
    return 0;
}
