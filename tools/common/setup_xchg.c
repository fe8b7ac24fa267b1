/* tools/common/setup_xchg.c: the SETUP exchange (setup_xchg.h). */
#include "setup_xchg.h"

#include "strfmt.h"

/* buf also receives the peer's SETUP: encode again right before sending */
static int send_mine(const struct setup_link *l, const struct setup_codec *codec, const void *mine, uint8_t *buf,
                     size_t cap, char *err, size_t errlen)
{
    int len = codec->encode(mine, buf, cap);
    return l->send(l->ctx, l->type, buf, (uint32_t)len, err, errlen);
}

int setup_exchange(const struct setup_link *l, const struct setup_codec *codec, const void *mine, void *peer,
                   uint8_t *buf, size_t cap, char *err, size_t errlen)
{
    /* checked before anything is sent, on both sides */
    if (codec->encode(mine, buf, cap) < 0) {
        str_fmt(err, errlen, "internal: SETUP does not fit");
        return -1;
    }
    if (!l->is_server && send_mine(l, codec, mine, buf, cap, err, errlen))
        return -1;
    uint32_t n;
    if (l->expect(l->ctx, l->type, buf, (uint32_t)cap, &n, err, errlen))
        return -1;
    if (codec->decode(buf, n, peer)) {
        str_fmt(err, errlen, "protocol error: malformed SETUP from the peer");
        l->fail(l->ctx, err);
        return -1;
    }
    if (l->is_server && send_mine(l, codec, mine, buf, cap, err, errlen))
        return -1;
    return 0;
}
