/* tests/plugin/test_errors_peer.c: plugin/ib/errors.c's errors_check_peer,
 * the check that fails a comm whose peer closed its socket while requests
 * are pending, after a grace period for the completions that trail the
 * peer's exit. The comm's socket is one end of a real socketpair (oob.c's
 * liveness check on it); errors.c, oob.c (with handshake.c, which it
 * needs) and ibvwrap.c are linked in, and comm_fail is the one comm.c
 * function it calls (recorded here).
 *
 * The clock is the caller's: p2p_progress reads it once, then reads the
 * failover channel, which notes a peer gone with a later read. A grace that
 * began after the caller's now has not run out: computed as now minus that
 * later stamp it wrapped, and a receiver failed the instant its sender
 * closed, before the sender's last messages were counted (the port-failover
 * test, 3 ranks, lost 1-2 runs in 100 under load). */
#include "../tap.h"
#include "plugin/ib/comm.h"
#include "plugin/ib/errors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MS 1000000ull
#define T0 (1000ull * 1000 * MS)   /* a clock far from zero */

static int fails;
void comm_fail(struct comm *c, ncclResult_t err)
{
    fails++;
    if (!c->error)
        c->error = err;
}

struct fixture {
    struct recv_comm rc;
    struct qp_port port;
    struct request req;
    int peer;   /* the other end of the comm's socket */
};

/* A receive comm with one receive pending, its peer's socket open. */
static void setup(struct fixture *f)
{
    int sv[2];
    memset(f, 0, sizeof(*f));
    EXPECT_EQ_INT(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    struct comm *c = &f->rc.c;
    c->kind = COMM_RECV;
    c->fd = sv[0];
    f->peer = sv[1];
    snprintf(c->dev_name, sizeof(c->dev_name), "softnic0");
    f->port.port_num = 1;
    c->qps[0].port = &f->port;
    c->nqps = 1;
    f->req.n = 2;
    f->req.seq = 7;
    f->req.seen[0] = 1;
    f->rc.slot_req[7] = &f->req;
    c->inflight = 1;
    fails = 0;
}

/* The peer process exits: its end of the socket closes. */
static void peer_exits(struct fixture *f)
{
    close(f->peer);
    f->peer = -1;
}

static void teardown(struct fixture *f)
{
    close(f->rc.c.fd);
    if (f->peer >= 0)
        close(f->peer);
}

TAP_CASE(a_peer_noticed_gone_after_the_callers_clock_read_is_within_its_grace)
{
    struct fixture f;
    setup(&f);
    struct comm *c = &f.rc.c;
    peer_exits(&f);
    /* the failover channel saw the socket's end 3 ms after the caller's now */
    c->peer_gone_ns = T0 + 3 * MS;
    EXPECT_EQ_INT(ncclSuccess, errors_check_peer(c, 1, T0));
    EXPECT_EQ_INT(0, fails);
    EXPECT_EQ_INT(ncclSuccess, errors_check_peer(c, 1, T0 + 3 * MS + ERRORS_PEER_GONE_GRACE_NS));
    EXPECT_EQ_INT(0, fails);
    EXPECT_EQ_INT(ncclRemoteError, errors_check_peer(c, 1, T0 + 4 * MS + ERRORS_PEER_GONE_GRACE_NS));
    EXPECT_EQ_INT(1, fails);
    teardown(&f);
}

TAP_CASE(a_closed_socket_fails_pending_requests_once_the_grace_is_over)
{
    struct fixture f;
    setup(&f);
    struct comm *c = &f.rc.c;
    EXPECT_EQ_INT(ncclSuccess, errors_check_peer(c, 1, T0));
    EXPECT_EQ_U64(0, c->peer_gone_ns);   /* open: nothing noticed */
    peer_exits(&f);
    uint64_t seen = T0 + 60 * MS;   /* the next look, a check period later */
    EXPECT_EQ_INT(ncclSuccess, errors_check_peer(c, 1, seen));
    EXPECT_EQ_U64(seen, c->peer_gone_ns);
    EXPECT_EQ_INT(ncclSuccess, errors_check_peer(c, 1, seen + ERRORS_PEER_GONE_GRACE_NS / 2));
    EXPECT_EQ_INT(0, fails);
    EXPECT_EQ_INT(ncclRemoteError, errors_check_peer(c, 1, seen + ERRORS_PEER_GONE_GRACE_NS + MS));
    EXPECT_EQ_INT(1, fails);
    /* failed once: later checks report the error and fail nothing again */
    EXPECT_EQ_INT(ncclRemoteError, errors_check_peer(c, 1, seen + 2 * ERRORS_PEER_GONE_GRACE_NS));
    EXPECT_EQ_INT(1, fails);
    teardown(&f);
}

TAP_CASE(a_gone_peer_fails_nothing_while_no_request_is_pending)
{
    struct fixture f;
    setup(&f);
    struct comm *c = &f.rc.c;
    peer_exits(&f);
    c->peer_gone_ns = T0;
    EXPECT_EQ_INT(ncclSuccess, errors_check_peer(c, 0, T0 + 10 * ERRORS_PEER_GONE_GRACE_NS));
    EXPECT_EQ_INT(0, fails);
    teardown(&f);
}

TAP_CASE(a_live_peer_is_never_failed)
{
    struct fixture f;
    setup(&f);
    struct comm *c = &f.rc.c;
    /* the peer writes (a failover message waiting to be read is no end) */
    EXPECT_EQ_INT(1, (int)write(f.peer, "x", 1));
    for (uint64_t t = T0; t < T0 + 5 * ERRORS_PEER_GONE_GRACE_NS; t += 100 * MS)
        EXPECT_EQ_INT(ncclSuccess, errors_check_peer(c, 1, t));
    EXPECT_EQ_U64(0, c->peer_gone_ns);
    EXPECT_EQ_INT(0, fails);
    teardown(&f);
}

int main(int argc, char **argv) { return tap_run(argc, argv); }
