/* tools/writebw/session.c: the shared conversation (see session.h). */
#include "config.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "../common/bw.h"
#include "../common/strfmt.h"
#include "session.h"
#include "tcp.h"

int session_send(struct session *s, uint32_t type, const void *buf, uint32_t len, char *err,
                 size_t errlen)
{
    return tcp_send(s->fd, type, buf, len, err, errlen);
}

void session_fail(struct session *s, const char *why)
{
    char ignore[64];
    if (s->fd >= 0)
        tcp_send(s->fd, WB_MSG_ERROR, why, (uint32_t)strlen(why), ignore, sizeof(ignore));
}

/* One received message: heartbeats refresh last_heard, ERROR fails. */
static int recv_one(struct session *s, double timeout, uint32_t *type, uint8_t *buf, uint32_t cap,
                    uint32_t *len, char *err, size_t errlen)
{
    if (tcp_recv(s->fd, timeout, type, buf, cap, len, err, errlen)) {
        char why[256];
        str_fmt(why, sizeof(why), "%s", err);
        str_fmt(err, errlen, "lost the peer: %s", why);
        return -1;
    }
    s->last_heard = bw_now();
    if (*type == WB_MSG_ERROR) {
        char text[1024];
        uint32_t n = *len < sizeof(text) - 1 ? *len : (uint32_t)sizeof(text) - 1;
        memcpy(text, buf, n);
        text[n] = '\0';
        str_fmt(err, errlen, "peer: %s", text);
        return -1;
    }
    return 0;
}

/* Messages that are state, not conversation: consumed wherever read. */
static int side_message(struct session *s, uint32_t t, const uint8_t *in, uint32_t n)
{
    uint64_t v;
    if (t == WB_MSG_HEARTBEAT)
        return 1;
    if (t == WB_MSG_STOPPED && !wb_dec_u64(in, n, &v)) {
        s->peer_stopped = (long)v;
        return 1;
    }
    return 0;
}

int session_expect(struct session *s, uint32_t type, void *buf, uint32_t cap, uint32_t *len,
                   char *err, size_t errlen)
{
    uint8_t *in = s->rx;
    for (;;) {
        uint32_t t, n;
        if (s->stash_type) {
            t = s->stash_type;
            n = s->stash_len;
            memcpy(in, s->stash, n);
            s->stash_type = 0;
        } else if (recv_one(s, s->o->timeout, &t, in, sizeof(s->rx), &n, err, errlen)) {
            return -1;
        }
        if (side_message(s, t, in, n))
            continue;
        if (t != type) {
            str_fmt(err, errlen, "protocol error: expected message %u, got %u", type, t);
            session_fail(s, err);
            return -1;
        }
        if (n > cap) {
            str_fmt(err, errlen, "protocol error: message %u too long (%u bytes)", t, n);
            session_fail(s, err);
            return -1;
        }
        memcpy(buf, in, n);
        if (len)
            *len = n;
        return 0;
    }
}

int session_poll(struct session *s, char *err, size_t errlen)
{
    uint8_t *in = s->rx;
    /* With a message stashed, later ones (a DONE right behind a RESULT)
     * stay in the socket until the stash is taken: the peer spoke, so it
     * was alive, and the transfer's own stall timeout still bounds the wait. */
    if (s->stash_type)
        return 0;
    for (;;) {
        if (s->stash_type)
            break;
        struct pollfd p = { .fd = s->fd, .events = POLLIN };
        if (poll(&p, 1, 0) <= 0)
            break;
        uint32_t t, n;
        if (recv_one(s, s->o->timeout, &t, in, sizeof(s->rx), &n, err, errlen))
            return -1;
        if (side_message(s, t, in, n))
            continue;
        if (n > sizeof(s->stash)) {
            str_fmt(err, errlen, "protocol error: unexpected message %u of %u bytes", t, n);
            session_fail(s, err);
            return -1;
        }
        s->stash_type = t;
        s->stash_len = n;
        memcpy(s->stash, in, n);
    }
    if (bw_now() - s->last_heard > s->o->timeout) {
        str_fmt(err, errlen, "lost the peer: no word from it for %.0f s", s->o->timeout);
        session_fail(s, err);
        return -1;
    }
    return 0;
}

int session_tick(void *arg, long done)
{
    struct session *s = arg;
    uint8_t b[8];
    char err[256];
    int n = wb_enc_u64((uint64_t)done, b, sizeof(b));
    if (tcp_send(s->fd, WB_MSG_HEARTBEAT, b, (uint32_t)n, err, sizeof(err))) {
        str_fmt(s->tick_err, sizeof(s->tick_err), "lost the peer during the run (%s)", err);
        return -1;
    }
    /* In --bidir the peer writes too; a passive peer only listens. */
    if (s->o->bidir && session_poll(s, s->tick_err, sizeof(s->tick_err)))
        return -1;
    return 0;
}

int session_hello(struct session *s, char *err, size_t errlen)
{
    struct wb_hello mine, peer;
    wb_hello_from_opts(s->o, &mine);
    uint8_t buf[1024];
    uint32_t n;
    s->last_heard = bw_now();
    if (!s->is_server) {
        int len = wb_enc_hello(&mine, buf, sizeof(buf));
        if (len < 0 || session_send(s, WB_MSG_HELLO, buf, (uint32_t)len, err, errlen))
            return -1;
        return session_expect(s, WB_MSG_OK, buf, sizeof(buf), &n, err, errlen);
    }
    if (session_expect(s, WB_MSG_HELLO, buf, sizeof(buf), &n, err, errlen))
        return -1;
    if (wb_dec_hello(buf, n, &peer)) {
        str_fmt(err, errlen, "the client's HELLO is malformed or of another version");
        session_fail(s, "server cannot parse HELLO (different railnet-write-bw version?)");
        return -1;
    }
    char why[512];
    if (wb_hello_compare(&mine, &peer, why, sizeof(why))) {
        str_fmt(err, errlen, "options differ between server and client: %s", why);
        session_fail(s, err);
        return -1;
    }
    return session_send(s, WB_MSG_OK, NULL, 0, err, errlen);
}

static void combine(struct wb_result *sum, const struct wb_result *a)
{
    sum->iters += a->iters;
    if (a->seconds > sum->seconds)
        sum->seconds = a->seconds;
    sum->avg_bps += a->avg_bps;
    sum->peak_bps += a->peak_bps;
    sum->msg_rate += a->msg_rate;
    if (a->lat_us > sum->lat_us)
        sum->lat_us = a->lat_us;
}

int session_sizes(struct session *s, session_run_fn run, void *ctx, char *err, size_t errlen)
{
    const struct wb_opts *o = s->o;
    int peer_writes = s->is_server ? 1 : o->bidir;
    for (int i = 0; i < o->nsizes; i++) {
        uint8_t b[64];
        uint32_t n;
        uint64_t idx;
        int len = wb_enc_u64((uint64_t)i, b, sizeof(b));
        /* START each way: both sides are ready for this size. */
        if (!s->is_server && session_send(s, WB_MSG_START, b, (uint32_t)len, err, errlen))
            return -1;
        if (session_expect(s, WB_MSG_START, b, sizeof(b), &n, err, errlen))
            return -1;
        if (wb_dec_u64(b, n, &idx) || idx != (uint64_t)i) {
            str_fmt(err, errlen, "protocol error: peer started size #%llu, expected #%d",
                    (unsigned long long)idx, i);
            session_fail(s, err);
            return -1;
        }
        if (s->is_server && session_send(s, WB_MSG_START, b, (uint32_t)len, err, errlen))
            return -1;
        s->peer_stopped = -1;
        s->last_heard = bw_now();

        struct wb_result mine = { .size = o->sizes[i] }, row = { .size = o->sizes[i] };
        int measured = run(ctx, o->sizes[i], &mine, err, errlen);
        if (measured < 0) {
            session_fail(s, err);
            return -1;
        }
        if (measured) {
            len = wb_enc_result(&mine, b, sizeof(b));
            if (session_send(s, WB_MSG_RESULT, b, (uint32_t)len, err, errlen))
                return -1;
            combine(&row, &mine);
        }
        if (peer_writes) {
            struct wb_result theirs;
            if (session_expect(s, WB_MSG_RESULT, b, sizeof(b), &n, err, errlen))
                return -1;
            if (wb_dec_result(b, n, &theirs) || theirs.size != o->sizes[i]) {
                str_fmt(err, errlen, "protocol error: bad RESULT for size %zu", o->sizes[i]);
                session_fail(s, err);
                return -1;
            }
            combine(&row, &theirs);
        }
        out_row(s->rep, &row);
        if (o->nsizes > 1)
            fprintf(stderr, "railnet-write-bw: [%d/%d] %zu bytes: %.2f %s average\n", i + 1,
                    o->nsizes, o->sizes[i], out_bw_unit(s->rep, row.avg_bps),
                    o->report_gbits ? "Gb/s" : "GB/s");
    }
    return 0;
}

int session_done(struct session *s, char *err, size_t errlen)
{
    uint32_t n;
    uint8_t b[8];
    if (!s->is_server)
        return session_send(s, WB_MSG_DONE, NULL, 0, err, errlen);
    return session_expect(s, WB_MSG_DONE, b, sizeof(b), &n, err, errlen);
}

static int link_send(void *ctx, uint32_t type, const void *buf, uint32_t len, char *err, size_t errlen)
{
    return session_send(ctx, type, buf, len, err, errlen);
}

static int link_expect(void *ctx, uint32_t type, void *buf, uint32_t cap, uint32_t *len, char *err, size_t errlen)
{
    return session_expect(ctx, type, buf, cap, len, err, errlen);
}

static void link_fail(void *ctx, const char *why)
{
    session_fail(ctx, why);
}

struct setup_link session_setup_link(struct session *s)
{
    struct setup_link l = { s, s->is_server, WB_MSG_SETUP, link_send, link_expect, link_fail };
    return l;
}
