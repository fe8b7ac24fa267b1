/* plugin/ib/oob.h: the out-of-band TCP bootstrap of connect/accept.
 *
 * Everything here is non-blocking: a call does what the socket allows now and
 * returns, so that NCCL's connect/accept can return "not yet" and be called
 * again. Return convention: OOB_DONE (finished), OOB_AGAIN (call again
 * later), OOB_ERROR (failed; err holds one line saying what and why).
 * Messages are framed by the handshake header (handshake.h): a reader first
 * takes HS_HEADER_SIZE bytes, checks them, then exactly the length they
 * announce, never more than HS_MSG_MAX. No logging here: callers WARN. */
#ifndef RAILNET_IB_OOB_H
#define RAILNET_IB_OOB_H

#include <stddef.h>
#include <stdint.h>

#include "handshake.h"

enum oob_result { OOB_DONE = 0, OOB_AGAIN = 1, OOB_ERROR = -1 };

#define OOB_ERR_LEN 192

struct oob_addr {
    uint8_t family;   /* 4 or 6 */
    uint8_t addr[16]; /* IPv4 in the first 4 bytes */
    uint16_t port;    /* host order */
};

/* A listening socket bound to at's address only (never the wildcard: a
 * plugin listens only where configured) on an ephemeral port, returned in
 * at->port. */
int oob_listen(struct oob_addr *at, int *fd, char err[OOB_ERR_LEN]);
/* Accepts one pending connection: OOB_DONE with *conn_fd >= 0, OOB_AGAIN
 * when none is pending. The new socket is non-blocking, close-on-exec. */
int oob_accept(int listen_fd, int *conn_fd, char err[OOB_ERR_LEN]);

/* Starts a non-blocking connect; then oob_connect_poll until OOB_DONE. */
int oob_connect_start(const struct oob_addr *to, int *fd, char err[OOB_ERR_LEN]);
int oob_connect_poll(int fd, char err[OOB_ERR_LEN]);

/* The address written into a handle when the device has no IP address of its
 * own (InfiniBand): the first IPv4 address of an interface that is up and not
 * loopback, else 127.0.0.1. */
void oob_default_addr(struct oob_addr *out);

struct oob_tx {
    uint8_t buf[HS_MSG_MAX];
    size_t len, off;
};
struct oob_rx {
    uint8_t buf[HS_MSG_MAX];
    size_t want, off; /* want: HS_HEADER_SIZE until the header is read */
    uint16_t type;
};

void oob_tx_init(struct oob_tx *tx, const uint8_t *msg, size_t len);
int oob_tx_progress(int fd, struct oob_tx *tx, char err[OOB_ERR_LEN]);
void oob_rx_init(struct oob_rx *rx);
/* Reads one framed message; a bad header (magic, version, length) is an
 * OOB_ERROR with the parser's reason, and an EOF from the peer too. */
int oob_rx_progress(int fd, struct oob_rx *rx, char err[OOB_ERR_LEN]);

/* 1 while the peer keeps the socket open, 0 once it closed it or the
 * connection broke (EOF, reset). Never blocks; unread bytes are left alone. */
int oob_peer_alive(int fd);

#endif
