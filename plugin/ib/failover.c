/* plugin/ib/failover.c: port failover of a merged device's connection
 * (failover.h says what and why): failing a port, settling the chunks it
 * carried, the dispatch of control messages, attach and detach. */
#include "failover_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "errors.h"
#include "ibvwrap.h"
#include "log.h"
#include "p2p.h"

/* ------------------------------------------------------------------ failover */

uint32_t fo_port_qps(const struct comm *c, int p)
{
    uint32_t m = 0;
    for (int i = 0; i < c->nqps; i++)
        if (c->qps[i].port && c->qps[i].port->port_idx == p)
            m |= 1u << i;
    return m;
}

void fo_qp_to_err(struct qp_conn *q)
{
    if (!q->qp)
        return;
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_ERR;
    (void)RN_IBV(modify_qp)(q->qp, &a, IBV_QP_STATE);
}

/* RAILNET_STATS: bytes written per port so far, logged at each failure and
 * recovery of a send comm (the close-time totals cannot show the order). */
void fo_stats_moment(const struct fo_comm *f, const char *when)
{
    const struct comm *c = f->c;
    if (!c->stats.enabled || c->kind != COMM_SEND)
        return;
    unsigned long long b[HS_MAX_PORTS] = { 0 };
    for (int i = 0; i < c->nqps; i++)
        b[c->qps[i].port->port_idx] += c->stats.qp[i].bytes;
    INFO(NCCL_NET, "NET/railnet stats: send %s comm #%d %s: port %u %llu bytes, port %u %llu bytes", c->dev_name,
         f->id, when, c->ports[0].port_num, b[0], c->ports[1].port_num, b[1]);
}

/* Takes the QPs of mask out of use. tell: let the peer know. qpn: the QP
 * whose completion failed (0: a port event or the peer). */
static void kill_qps(struct fo_comm *f, uint32_t mask, const char *why, int tell, uint32_t qpn)
{
    struct comm *c = f->c;
    mask &= (c->nqps >= 32 ? ~0u : (1u << c->nqps) - 1u);
    if (f->rb_stage != RB_NONE && (f->rb_mask & mask)) {
        /* a rebuild in progress on a port that failed again: its new QPs
         * are still counted dead; they stop here too */
        f->rb_stage = RB_NONE;
        f->probe_left = 0;
        c->qp_dead |= f->rb_mask;
        for (int i = 0; i < c->nqps; i++)
            if (f->rb_mask & (1u << i))
                fo_qp_to_err(&c->qps[i]);
    }
    uint32_t newly = mask & ~f->dead;
    if (!newly)
        return;
    f->dead |= newly;
    c->qp_live &= ~newly;
    c->qp_dead |= newly;
    uint32_t ports = 0;
    for (int i = 0; i < c->nqps; i++) {
        if (newly & (1u << i)) {
            fo_qp_to_err(&c->qps[i]); /* its outstanding work flushes now */
            ports |= 1u << c->qps[i].port->port_idx;
        }
    }
    for (int p = 0; p < c->nports; p++)
        if (ports & (1u << p))
            fo_reg_report_down(f, p, why, qpn);
    fo_stats_moment(f, "at a port failure");
    if (!c->qp_live) {
        if (!c->error)
            WARN("NET/railnet: device %s: %s comm #%d with %s: no port left (%s); failing it with %d request(s) "
                 "pending",
                 c->dev_name, fo_kind_name(c), f->id, f->peer, why, c->inflight);
        comm_fail(c, ncclRemoteError);
        return;
    }
    if (c->kind == COMM_SEND) {
        f->need_sync = 1;
    } else {
        struct recv_comm *rc = (struct recv_comm *)c;
        for (unsigned s = 0; s < COMM_SLOTS; s++)
            if (rc->slot_req[s])
                f->cts_redo |= 1u << s;
    }
    if (tell) {
        uint8_t m[4];
        put32(m, f->dead);
        fo_send(f, FO_DOWN, m, sizeof(m));
    }
}

int failover_wc_error(struct comm *c, int qpi, const struct ibv_wc *w)
{
    struct fo_comm *f = c->fo;
    if (!f || c->error)
        return c->error ? 1 : 0;
    int transport = w->status == IBV_WC_RETRY_EXC_ERR || w->status == IBV_WC_WR_FLUSH_ERR;
    if (!transport)
        return 0;
    if (f->dead & (1u << qpi))
        return 1; /* the flushes of a QP already out of use */
    kill_qps(f, fo_port_qps(c, c->qps[qpi].port->port_idx), errors_wc_status_name(w->status), 1, w->qp_num);
    return 1;
}

void failover_port_event(struct comm *c, int p, int up)
{
    struct fo_comm *f = c->fo;
    if (!f || p < 0 || p >= c->nports)
        return;
    if (!up) {
        f->port_down |= 1u << p;
        kill_qps(f, fo_port_qps(c, p), "IBV_EVENT_PORT_ERR", 1, 0);
        return;
    }
    f->port_down &= ~(1u << p);
    fo_reg_port_back(c, p);
    if (!(f->dead & fo_port_qps(c, p)))
        return;
    if (c->kind == COMM_SEND) {
        f->rb_want = 1;
    } else {
        uint8_t m[4];
        put32(m, f->dead & fo_port_qps(c, p));
        fo_send(f, FO_UP, m, sizeof(m));
    }
}

/* the RDMA READ of the receiver's chunk state for sync sync_wait; 0: posted */
static int sync_post_read(struct fo_comm *f)
{
    struct comm *c = f->c;
    int q = f->pub_rkey ? failover_pick_qp(c->qp_live, c->nqps, (int)(f->rr++ % (unsigned)c->nqps)) : -1;
    if (q < 0)
        return -1;
    struct ibv_sge sge = { .addr = (uint64_t)(uintptr_t)f->pub, .length = FO_PUB_BYTES, .lkey = f->pub_mr->lkey };
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = WR_ID_GEN(WR_SYNC, c->qp_gen[q], q, 0, f->sync_wait & 0xffff);
    wr.opcode = IBV_WR_RDMA_READ;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = f->pub_raddr;
    wr.wr.rdma.rkey = f->pub_rkey;
    return ibv_post_send(c->qps[q].qp, &wr, &bad) == 0 ? 0 : -1;
}

/* send side: find out which chunks landed, once every newly dead QP is in
 * ERR: an RDMA READ of the receiver's published chunk state over a live QP
 * (needs nothing from the receiver's thread), or, before its address came,
 * a question over the socket */
static void sync_start(struct fo_comm *f)
{
    struct comm *c = f->c;
    f->epoch++;
    for (int i = 0; i < c->nqps; i++)
        if ((f->dead & (1u << i)) && !f->cover[i])
            f->cover[i] = f->epoch;
    f->sync_wait = f->epoch;
    f->need_sync = 0;
    f->reread_ns = 0;
    if (sync_post_read(f) == 0)
        return;
    uint8_t m[8];
    put32(m, f->epoch);
    put32(m + 4, f->dead);
    fo_send(f, FO_SYNC_REQ, m, sizeof(m));
}

/* recv side: the answer, after the dead QPs are in ERR and the CQ drained */
static void sync_answer(struct fo_comm *f, uint32_t epoch)
{
    struct recv_comm *rc = (struct recv_comm *)f->c;
    p2p_poll(f->c);
    uint8_t m[8 + COMM_SLOTS * FO_REP_SLOT];
    memset(m, 0, sizeof(m));
    put32(m, epoch);
    for (unsigned s = 0; s < COMM_SLOTS; s++) {
        uint8_t *e = m + 8 + s * FO_REP_SLOT;
        struct request *r = rc->slot_req[s];
        if (!r)
            continue;
        put64(e, r->seq + 1);
        for (int k = 0; k < r->n && k < COMM_MAX_RECVS; k++) {
            e[8 + 2 * k] = (uint8_t)r->seen[k];
            e[9 + 2 * k] = (uint8_t)(r->seen[k] >> 8);
        }
    }
    fo_send(f, FO_SYNC_REP, m, sizeof(m));
}

void failover_replay_landed(struct comm *c, struct request *r, unsigned k)
{
    struct fo_comm *f = c->fo;
    r->replayed &= (uint16_t)~(1u << k);
    if (f && f->replays > 0 && --f->replays == 0)
        c->fo_fence = 0;
}

/* send side: settle every chunk of a QP this sync covers. rep: the socket
 * answer (per slot: u64 seq + 1 of the live receive, u16 chunks per buffer),
 * or NULL: f->pub holds the words read ((seq + 1) << 16 | chunks). */
/* send side, a read sync: whether a chunk it covers is not counted (it
 * would be written again) */
static int sync_read_needs_replay(const struct fo_comm *f, uint32_t epoch)
{
    const struct comm *c = f->c;
    for (size_t ri = 0; ri < sizeof(c->reqs) / sizeof(c->reqs[0]); ri++) {
        const struct request *r = &c->reqs[ri];
        if (r->type != REQ_SEND || r->done || !r->unacked)
            continue;
        uint32_t w = __atomic_load_n(&f->pub[r->slot * COMM_MAX_RECVS + r->sub], __ATOMIC_ACQUIRE);
        uint16_t got = (w >> 16) == ((r->seq + 1) & 0xffff) ? (uint16_t)w : 0xffff;
        for (unsigned k = 0; k < r->nq; k++) {
            unsigned q = r->chunk_qp[k];
            if ((r->unacked & (1u << k)) && (f->dead & (1u << q)) && f->cover[q] && f->cover[q] <= epoch &&
                !(got & (1u << k)))
                return 1;
        }
    }
    return 0;
}

static void sync_apply(struct fo_comm *f, uint32_t epoch, const uint8_t *rep)
{
    struct comm *c = f->c;
    struct send_comm *sc = (struct send_comm *)c;
    int replayed = 0, landed = 0;
    if (!rep && sync_read_needs_replay(f, epoch)) {
        /* A chunk not counted yet may still be on its way on the receiver's
         * end of the dead QP (our QP in ERR stops sending, not what the
         * peer's NIC holds), and would land after the copy written again,
         * in a buffer the receiver may have given to the next message. Only
         * the receiver can stop it: the question over the socket has it
         * move its QPs of the dead port to ERR before it answers. Its
         * receive is incomplete, so it is being progressed and answers. */
        if (f->asked != epoch) {
            uint8_t m[8];
            put32(m, epoch);
            put32(m + 4, f->dead);
            fo_send(f, FO_SYNC_REQ, m, sizeof(m));
            f->asked = epoch;
            INFO(NCCL_NET, "NET/railnet: device %s: send comm #%d with %s: failover sync %u: chunk(s) not counted "
                           "yet; asking the receiver to stop its end of the dead QPs first",
                 c->dev_name, f->id, f->peer, epoch);
        }
        /* sync_wait stays: its answer (FO_SYNC_REP) applies; or a later
         * read that finds every chunk counted */
        f->reread_ns = comm_now_ns() + FO_POLL_NS;
        return;
    }
    for (size_t ri = 0; ri < sizeof(c->reqs) / sizeof(c->reqs[0]) && !c->error; ri++) {
        struct request *r = &c->reqs[ri];
        if (r->type != REQ_SEND || r->done || !r->unacked)
            continue;
        uint16_t got;
        if (rep) {
            const uint8_t *e = rep + 8 + (size_t)r->slot * FO_REP_SLOT;
            got = get64(e) == r->seq + 1 ? (uint16_t)(e[8 + 2 * r->sub] | e[9 + 2 * r->sub] << 8) : 0xffff;
        } else {
            uint32_t w = __atomic_load_n(&f->pub[r->slot * COMM_MAX_RECVS + r->sub], __ATOMIC_ACQUIRE);
            /* another receive in the slot since: this one completed */
            got = (w >> 16) == ((r->seq + 1) & 0xffff) ? (uint16_t)w : 0xffff;
        }
        for (unsigned k = 0; k < r->nq; k++) {
            unsigned q = r->chunk_qp[k];
            if (!(r->unacked & (1u << k)) || !(f->dead & (1u << q)) || !f->cover[q] || f->cover[q] > epoch)
                continue;
            if (got & (1u << k)) {
                r->unacked &= (uint16_t)~(1u << k);
                if (r->replayed & (1u << k))
                    failover_replay_landed(c, r, k);
                landed++;
                continue;
            }
            int to = failover_pick_qp(c->qp_live, c->nqps, (int)(f->rr++ % (unsigned)c->nqps));
            if (to < 0 || p2p_post_chunk(sc, r, k, to) != ncclSuccess)
                return; /* the comm failed (no port left) */
            if (!(r->replayed & (1u << k))) {
                r->replayed |= (uint16_t)(1u << k);
                f->replays++;
            }
            c->fo_fence = 1;
            replayed++;
        }
        if (!r->unacked)
            r->done = 1;
    }
    INFO(NCCL_NET, "NET/railnet: device %s: send comm #%d with %s: failover sync %u (%s): %d chunk(s) written "
                   "again, %d had landed",
         c->dev_name, f->id, f->peer, epoch, rep ? "asked" : "read", replayed, landed);
    f->sync_wait = 0;
    for (int i = 0; i < c->nqps; i++)
        if ((f->dead & (1u << i)) && !f->cover[i])
            f->need_sync = 1;
}

void failover_sync_read_done(struct comm *c, int epoch16, int ok)
{
    struct fo_comm *f = c->fo;
    if (!f || !f->sync_wait || (uint32_t)epoch16 != (f->sync_wait & 0xffff))
        return;
    if (!ok) { /* the QP it went on failed too: ask again over another */
        f->epoch--; /* the covers it set are still unsettled */
        for (int i = 0; i < c->nqps; i++)
            if (f->cover[i] == f->sync_wait)
                f->cover[i] = 0;
        f->sync_wait = 0;
        f->need_sync = 1;
        return;
    }
    sync_apply(f, f->sync_wait, NULL);
}

static void cts_redo(struct fo_comm *f)
{
    struct recv_comm *rc = (struct recv_comm *)f->c;
    struct comm *c = f->c;
    for (unsigned s = 0; s < COMM_SLOTS && f->cts_redo; s++) {
        if (!(f->cts_redo & (1u << s)))
            continue;
        if (!rc->slot_req[s]) { /* done meanwhile */
            f->cts_redo &= ~(1u << s);
            continue;
        }
        int q = failover_pick_qp(c->qp_live, c->nqps, comm_qp_hint(c, s));
        if (q < 0 || rc->cts_unpolled[q] >= c->qpp.max_send_wr)
            return; /* room later */
        if (p2p_post_cts(rc, s, q) != ncclSuccess)
            return;
        f->cts_redo &= ~(1u << s);
    }
}

/* ---------------------------------------------------------------- dispatch */

static int expect_len(int type, size_t len, int kind)
{
    int send = kind == COMM_SEND;
    switch (type) {
    case FO_DOWN: return len == 4;
    case FO_SYNC_REQ: return !send && len == 8;
    case FO_SYNC_REP: return send && len == 8 + COMM_SLOTS * FO_REP_SLOT;
    case FO_UP: return send && len == 4;
    case FO_REBUILD_REQ: return !send && len >= 16 && (len - 16) % FO_QP_INFO == 0;
    case FO_REBUILD_REP: return send && len >= 24 && (len - 24) % FO_QP_INFO == 0;
    case FO_REBUILD_NAK: return send && len == 8;
    case FO_PROBE_OK: return !send && len == 8;
    case FO_PUB: return send && len == 16;
    default: return 0;
    }
}

static void handle(struct fo_comm *f, int type, const uint8_t *m, size_t len)
{
    struct comm *c = f->c;
    TRACE(NCCL_NET, "NET/railnet: %s comm #%d: failover message %d (%zu bytes, %08x %08x), dead 0x%x, rb %d id %u mask 0x%x",
          fo_kind_name(c), f->id, type, len, len >= 4 ? get32(m) : 0, len >= 8 ? get32(m + 4) : 0, f->dead, f->rb_stage,
          f->rb_id, f->rb_mask);
    uint32_t all = c->nqps >= 32 ? ~0u : (1u << c->nqps) - 1u;
    switch (type) {
    case FO_DOWN:
        kill_qps(f, get32(m) & all, "the peer lost the path", 0, 0);
        break;
    case FO_SYNC_REQ:
        kill_qps(f, get32(m + 4) & all, "the peer lost the path", 0, 0);
        if (!c->error)
            sync_answer(f, get32(m));
        break;
    case FO_SYNC_REP:
        if (get32(m) == f->sync_wait && f->sync_wait)
            sync_apply(f, f->sync_wait, m);
        break;
    case FO_PUB:
        if (!f->pub_rkey && get32(m + 8)) {
            f->pub_raddr = get64(m);
            f->pub_rkey = get32(m + 8);
        }
        break;
    case FO_UP:
        if (get32(m) & f->dead)
            f->rb_want = 1;
        break;
    case FO_REBUILD_REQ: {
        uint32_t mask = get32(m + 4) & all;
        if (mask != get32(m + 4) || len != 16 + (size_t)__builtin_popcount(mask) * FO_QP_INFO || !mask) {
            WARN("NET/railnet: device %s: malformed rebuild request (QPs 0x%x, %zu bytes)", c->dev_name,
                 get32(m + 4), len);
            comm_fail(c, ncclRemoteError);
            return;
        }
        fo_rebuild_answer(f, get32(m), mask, m + 16);
        break;
    }
    case FO_REBUILD_REP:
        if (f->rb_stage == RB_WAIT_REP && get32(m) == f->rb_id)
            fo_rebuild_connect(f, m, len);
        break;
    case FO_REBUILD_NAK:
        if (f->rb_stage == RB_WAIT_REP && get32(m) == f->rb_id) {
            f->rb_stage = RB_NONE; /* its port is still down: its FO_UP brings us back */
            for (int i = 0; i < c->nqps; i++)
                if (f->rb_mask & (1u << i))
                    fo_qp_to_err(&c->qps[i]);
        }
        break;
    case FO_PROBE_OK:
        fo_probe_ok(f, get32(m), get32(m + 4));
        break;
    default:
        break;
    }
}

static void fo_read(struct fo_comm *f)
{
    struct comm *c = f->c;
    for (;;) {
        if (f->rx_len < sizeof(f->rx)) {
            ssize_t n = recv(c->fd, f->rx + f->rx_len, sizeof(f->rx) - f->rx_len, MSG_DONTWAIT);
            if (n > 0)
                f->rx_len += (size_t)n;
            else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
                errors_note_peer_gone(c, comm_now_ns());
        }
        if (f->rx_len < FO_HDR)
            return;
        size_t len = (size_t)f->rx[6] | (size_t)f->rx[7] << 8;
        int type = f->rx[4];
        if (get32(f->rx) != FO_MAGIC || f->rx[5] != 0 || FO_HDR + len > sizeof(f->rx) ||
            !expect_len(type, len, c->kind)) {
            WARN("NET/railnet: device %s: %s comm #%d: malformed failover message from %s (type %d, %zu bytes); "
                 "closing this connection",
                 c->dev_name, fo_kind_name(c), f->id, f->peer, type, len);
            comm_fail(c, ncclRemoteError);
            return;
        }
        if (f->rx_len < FO_HDR + len)
            return;
        uint8_t m[FO_RX_MAX];
        memcpy(m, f->rx + FO_HDR, len);
        memmove(f->rx, f->rx + FO_HDR + len, f->rx_len - FO_HDR - len);
        f->rx_len -= FO_HDR + len;
        handle(f, type, m, len);
        if (c->error)
            return;
    }
}

void failover_progress(struct comm *c, uint64_t now)
{
    struct fo_comm *f = c->fo;
    if (!f || c->error || c->fd < 0)
        return;
    for (int p = 0; p < c->nports && (c->fo_ev_down | c->fo_ev_up); p++) {
        if (c->fo_ev_down & (1u << p)) {
            c->fo_ev_down &= ~(1u << p);
            failover_port_event(c, p, 0);
        }
        if (c->fo_ev_up & (1u << p)) {
            c->fo_ev_up &= ~(1u << p);
            failover_port_event(c, p, 1);
        }
    }
    if (c->error)
        return;
    int busy = f->dead || f->tx_len || f->sync_wait || f->need_sync || f->rb_stage || f->cts_redo ||
               (c->kind == COMM_SEND && !f->pub_rkey);
    if (busy || now - f->last_rx_ns >= FO_POLL_NS) {
        f->last_rx_ns = now;
        fo_read(f);
    }
    if (c->error)
        return;
    if (c->kind == COMM_SEND) {
        if (f->need_sync && !f->sync_wait)
            sync_start(f);
        if (f->sync_wait && f->reread_ns && now >= f->reread_ns) {
            f->reread_ns = 0;
            if (sync_post_read(f) != 0)
                f->reread_ns = now + FO_POLL_NS; /* no live QP now: the answer, or later */
        }
        if (f->rb_want && f->rb_stage == RB_NONE && !f->sync_wait && !f->need_sync)
            fo_rebuild_start(f);
    } else if (f->cts_redo) {
        cts_redo(f);
    }
    fo_flush_tx(f);
}

/* ------------------------------------------------------------------- attach */

ncclResult_t failover_attach(struct comm *c)
{
    c->fo_ready = 1;
    c->fo_release = failover_detach;
    c->qp_live = c->nqps >= 32 ? ~0u : (1u << c->nqps) - 1u;
    c->qp_dead = 0;
    c->fo = NULL;
    c->fo_pub = NULL;
    c->fo_fence = 0;
    /* no TCP socket (RAILNET_CM=rdmacm): failover's control messages would
     * have no way to the peer (fo_send drops them) and a failover would
     * wait for them for ever; a port that fails fails the comm
     * (comm_setup_cm.c) */
    if (!rn_config()->failover || c->nports < 2 || c->fd < 0)
        return ncclSuccess;
    struct fo_comm *f = calloc(1, sizeof(*f));
    if (!f)
        return ncclSystemError;
    f->c = c;
    f->probe = calloc(1, 64);
    int access = IBV_ACCESS_LOCAL_WRITE | (c->kind == COMM_RECV ? IBV_ACCESS_REMOTE_WRITE : 0);
    f->probe_mr = f->probe ? RN_IBV(reg_mr)(c->ports[0].pd, f->probe, 64, access) : NULL;
    if (!f->probe_mr) {
        WARN("NET/railnet: device %s: registering the failover probe area failed: %s", c->dev_name,
             strerror(errno));
        free(f->probe);
        free(f);
        return ncclSystemError;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    snprintf(f->peer, sizeof(f->peer), "?");
    if (c->fd >= 0 && getpeername(c->fd, (struct sockaddr *)&ss, &sl) == 0) {
        char host[48] = "?";
        unsigned port = 0;
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
            port = ntohs(a->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
            port = ntohs(a->sin6_port);
        }
        snprintf(f->peer, sizeof(f->peer), "%s:%u", host, port);
    }
    f->pub = calloc(1, FO_PUB_BYTES);
    int pacc = IBV_ACCESS_LOCAL_WRITE | (c->kind == COMM_RECV ? IBV_ACCESS_REMOTE_READ : 0);
    f->pub_mr = f->pub ? RN_IBV(reg_mr)(c->ports[0].pd, f->pub, FO_PUB_BYTES, pacc) : NULL;
    if (!f->pub_mr) {
        WARN("NET/railnet: device %s: registering the failover state area failed: %s", c->dev_name,
             strerror(errno));
        RN_IBV(dereg_mr)(f->probe_mr);
        free(f->probe);
        free(f->pub);
        free(f);
        return ncclSystemError;
    }
    c->fo = f;
    fo_reg_add(f);
    if (c->kind == COMM_RECV) {
        c->fo_pub = f->pub;
        uint8_t m[16];
        put64(m, (uint64_t)(uintptr_t)f->pub);
        put32(m + 8, f->pub_mr->rkey);
        put32(m + 12, 0);
        fo_send(f, FO_PUB, m, sizeof(m));
        fo_flush_tx(f);
    }
    /* a port that went down before or during the handshake */
    for (int p = 0; p < c->nports; p++) {
        struct ibv_port_attr pa;
        if (ibvwrap_query_port(ibvwrap_global(), c->ports[p].ctx, c->ports[p].port_num, &pa) == 0 &&
            pa.state != IBV_PORT_ACTIVE) {
            f->port_down |= 1u << p;
            kill_qps(f, fo_port_qps(c, p), "port not active at connection time", 1, 0);
        }
    }
    return ncclSuccess;
}

void failover_detach(struct comm *c)
{
    struct fo_comm *f = c->fo;
    if (!f)
        return;
    fo_reg_del(f);
    if (f->probe_mr)
        RN_IBV(dereg_mr)(f->probe_mr);
    if (f->pub_mr)
        RN_IBV(dereg_mr)(f->pub_mr);
    free(f->probe);
    free(f->pub);
    free(f);
    c->fo = NULL;
    c->fo_pub = NULL;
    c->fo_fence = 0;
}

