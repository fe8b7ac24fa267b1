/* tools/common/setup_xchg.h: the SETUP exchange of a two-process tool, once:
 * each side describes its QPs and buffers, the client speaks first, the
 * server answers with its own (so a server never sends before it knows the
 * client is a peer that got through HELLO).
 *
 * The tool brings its framed message channel (struct setup_link: send,
 * expect a type, tell the peer why this side stops) and the message's codec
 * (struct setup_codec). Contract: setup_exchange() returns 0 with *peer
 * decoded, or -1 with err filled: the message does not fit (internal), the
 * channel failed (its own error), or the peer's SETUP is malformed (the peer
 * is told). buf is scratch of cap bytes for one encoded message. */
#ifndef RAILNET_TOOLS_SETUP_XCHG_H
#define RAILNET_TOOLS_SETUP_XCHG_H

#include <stddef.h>
#include <stdint.h>

struct setup_link {
    void *ctx;
    int is_server;
    uint32_t type;   /* the SETUP message type on this channel */
    int (*send)(void *ctx, uint32_t type, const void *buf, uint32_t len, char *err, size_t errlen);
    int (*expect)(void *ctx, uint32_t type, void *buf, uint32_t cap, uint32_t *len, char *err, size_t errlen);
    void (*fail)(void *ctx, const char *why);
};

struct setup_codec {
    /* bytes written, or < 0 when m does not fit in cap */
    int (*encode)(const void *m, uint8_t *buf, size_t cap);
    /* 0, or -1 when the bytes are not a well-formed message */
    int (*decode)(const uint8_t *buf, size_t len, void *m);
};

int setup_exchange(const struct setup_link *l, const struct setup_codec *codec, const void *mine, void *peer,
                   uint8_t *buf, size_t cap, char *err, size_t errlen);

#endif
