/* rbuf.h: buffered, zero-copy-where-it-counts reading of a connection that
 * an engine reads without waiting (see rbuf.c).  Not thread-safe: one
 * reader at a time. */
#ifndef SOFTNIC_RBUF_H
#define SOFTNIC_RBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sn_mr;
struct sn_port;

struct sn_rbuf {
    int fd;
    char *buf;
    size_t cap, pos, len;
    char *bounce;
    bool ask_once;  /* rbuf_step's mode: the reader's work between its recvs is short */
    bool drained;   /* with ask_once: a recv this step returned less than it asked for */
};

int rbuf_init(struct sn_rbuf *rb, int fd);
void rbuf_free(struct sn_rbuf *rb);
/* A step of the connection's reader begins.  With rb->ask_once, once a
 * recv of the step has returned less than it asked for (the socket held
 * no more), rbuf_need answers EAGAIN between messages (nothing buffered)
 * without asking the socket again: the step ends and re-arms its
 * level-triggered watch (engine.c), which fires at once for bytes that
 * came meanwhile.  That spares a reader whose work between recvs is short
 * (the completer's ACKs) the recv that only finds the socket empty; a
 * payload being placed (rbuf_place, rbuf_discard) always asks, and a
 * responder, whose pulls take long enough for the next requests to come,
 * asks again. */
static inline void rbuf_step(struct sn_rbuf *rb)
{
    rb->drained = false;
}
/* Bytes buffered and not yet taken. */
static inline size_t rbuf_avail(const struct sn_rbuf *rb)
{
    return rb->len - rb->pos;
}
/* Makes n contiguous bytes available at rb->buf + rb->pos (n <= cap):
 * 0, EAGAIN while fewer have come (what came stays buffered), or the
 * connection's errno (ECONNRESET at its end). */
int rbuf_need(struct sn_rbuf *rb, size_t n);
/* Consumes n bytes made available by rbuf_need. */
void *rbuf_take(struct sn_rbuf *rb, size_t n);
/* Moves up to len bytes of the stream into mr at addr, as many as have
 * come; *done gets how many.  0 once all len are placed, EAGAIN while some
 * are still to come, or an errno.  port and since: a VF port's accounting
 * for CUDA memory (rbuf.c), since = when the placement began. */
int rbuf_place(struct sn_rbuf *rb, struct sn_mr *mr, uint64_t addr, size_t len,
               struct sn_port *port, uint64_t since, size_t *done);
/* Drops up to len bytes of the stream, as rbuf_place places them. */
int rbuf_discard(struct sn_rbuf *rb, size_t len, size_t *done);

#endif
