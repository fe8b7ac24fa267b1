/* tools/writebw/tcp.h: railnet-write-bw's out-of-band channel: one TCP
 * connection carrying typed, length-prefixed messages.
 *
 * Contract: every call is bounded in time. tcp_connect() retries a refused
 * connection (the server may start a moment later) until `timeout` seconds
 * have passed; tcp_accept_one() waits at most `timeout` seconds (<= 0:
 * forever, the server's default). tcp_recv() waits for a whole message at
 * most `timeout` seconds of silence and fails on EOF, so a dead peer is an
 * error, never a hang. Messages: {u32 type, u32 length} little-endian, then
 * the payload (at most TCP_MAX_MSG bytes). Functions return 0 or -1 with err
 * filled; tcp_recv() says "timeout" or "closed" in err for those cases. */
#ifndef RAILNET_TOOLS_WRITEBW_TCP_H
#define RAILNET_TOOLS_WRITEBW_TCP_H

#include <stddef.h>
#include <stdint.h>

#define TCP_MAX_MSG 65536

/* port 0: the kernel picks a free one; *bound (may be NULL) gets the port. */
int tcp_listen(int port, int *bound, char *err, size_t errlen);
int tcp_accept_one(int lfd, double timeout, char *peer, size_t peerlen, char *err, size_t errlen);
int tcp_connect(const char *host, int port, double timeout, char *err, size_t errlen);

int tcp_send(int fd, uint32_t type, const void *buf, uint32_t len, char *err, size_t errlen);
/* On success *type and *len describe the message copied into buf (cap bytes). */
int tcp_recv(int fd, double timeout, uint32_t *type, void *buf, uint32_t cap, uint32_t *len,
             char *err, size_t errlen);

#endif
