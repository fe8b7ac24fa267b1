/* tools/writebw/session.h: the conversation between the two processes that
 * both test modes share: the HELLO check, error hand-over, heartbeats and the
 * per-size START/RESULT loop (message order in wire.h).
 *
 * Contract: every wait is bounded by o->timeout seconds of silence from the
 * peer (writers send a HEARTBEAT every half second), so a dead or stuck peer
 * ends the run with an error on both sides. A local failure is sent to the
 * peer as ERROR before returning. Functions return 0 or -1 with err filled;
 * an error that came from the peer starts with "peer: ". */
#ifndef RAILNET_TOOLS_WRITEBW_SESSION_H
#define RAILNET_TOOLS_WRITEBW_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "opts.h"
#include "output.h"
#include "tcp.h"
#include "wire.h"

struct session {
    const struct wb_opts *o;
    int fd;
    int is_server;
    struct out_report *rep;
    double last_heard;         /* bw_now() of the last message from the peer */
    /* One message read early by session_poll(), handed out by the next
     * session_expect() (e.g. the peer's READY while this side still
     * connects, or its RESULT while this side still writes). */
    uint32_t stash_type;       /* 0: empty */
    uint32_t stash_len;
    uint8_t stash[512];
    long peer_stopped;         /* plugin -D: receives the peer posted, -1 unknown */
    char tick_err[512];        /* why session_tick() stopped a run */
    uint8_t rx[TCP_MAX_MSG];   /* the message being read */
};

/* Client: send HELLO and wait for OK; server: wait for HELLO, compare with
 * its own options, answer OK or ERROR. */
int session_hello(struct session *s, char *err, size_t errlen);

/* Tell the peer why this side gives up (best effort). */
void session_fail(struct session *s, const char *why);

/* Wait for a message of `type`, skipping heartbeats; ERROR from the peer
 * becomes err "peer: ...". */
int session_expect(struct session *s, uint32_t type, void *buf, uint32_t cap, uint32_t *len,
                   char *err, size_t errlen);
int session_send(struct session *s, uint32_t type, const void *buf, uint32_t len, char *err,
                 size_t errlen);

/* For loops that cannot block: read what the peer sent so far without
 * waiting (heartbeats, STOPPED, one message to stash, ERROR or EOF as
 * failure) and fail when the peer has been silent for o->timeout. */
int session_poll(struct session *s, char *err, size_t errlen);

/* A bw tick (bw.h) that sends a HEARTBEAT and, in --bidir, polls the peer;
 * when it stops a run, s->tick_err says why. */
int session_tick(void *session, long done);

/* One size: `run` does this side's part; it returns 1 when it measured
 * writes into *res (a writer), 0 when it only took part (a receiver or a
 * passive server), -1 on failure. */
typedef int (*session_run_fn)(void *ctx, size_t size, struct wb_result *res, char *err,
                              size_t errlen);

/* The START/RESULT loop over every size in o->sizes; each combined row
 * (summed over directions in --bidir) goes to out_row(). */
int session_sizes(struct session *s, session_run_fn run, void *ctx, char *err, size_t errlen);

/* This session as the channel of the SETUP exchange (setup_xchg.h). */
struct setup_link session_setup_link(struct session *s);

/* Client sends DONE; server waits for it. */
int session_done(struct session *s, char *err, size_t errlen);

#endif
