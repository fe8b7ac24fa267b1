/* rbuf.h: buffered, zero-copy-where-it-counts reading of a connection
 * (see rbuf.c).  Not thread-safe: one reader thread per connection. */
#ifndef SOFTNIC_RBUF_H
#define SOFTNIC_RBUF_H

#include <stddef.h>
#include <stdint.h>

struct sn_mr;
struct sn_port;

struct sn_rbuf {
    int fd;
    char *buf;
    size_t cap, pos, len;
    char *bounce;
    void (*before_block)(void *arg);   /* runs before each blocking recv */
    void *arg;
    bool poll_next;    /* the peer is GPU-driven: poll before sleeping (sn_ack_poll_readable) */
};

int rbuf_init(struct sn_rbuf *rb, int fd);
void rbuf_free(struct sn_rbuf *rb);
/* Makes n contiguous bytes available at rb->buf + rb->pos (n <= cap). */
int rbuf_need(struct sn_rbuf *rb, size_t n);
/* Consumes n bytes made available by rbuf_need. */
void *rbuf_take(struct sn_rbuf *rb, size_t n);
/* Moves len bytes of the stream into mr at addr (port: VF accounting). */
int rbuf_place(struct sn_rbuf *rb, struct sn_mr *mr, uint64_t addr, size_t len,
               struct sn_port *port);
int rbuf_discard(struct sn_rbuf *rb, size_t len);

#endif
