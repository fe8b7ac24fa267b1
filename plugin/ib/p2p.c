/* plugin/ib/p2p.c: isend / irecv / test over the CTS ring. */
#include "p2p.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "errors.h"
#include "failover.h"
#include "flush.h"
#include "ibvwrap.h"
#include "log.h"
#include "mr.h"
#include "prof.h"

#define P2P_CHUNK_ALIGN 4096u
#define P2P_POLL_BATCH 32

static void recv_fail_protocol(struct recv_comm *rc, int qpi, uint32_t imm, const char *why)
{
    struct comm *c = &rc->c;
    if (!c->error)
        WARN("NET/railnet: device %s port %u QP 0x%x: peer protocol error: %s (immediate 0x%08x); "
             "closing this connection",
             c->dev_name, c->qps[qpi].port->port_num, c->qps[qpi].qp->qp_num, why, imm);
    comm_fail(c, ncclRemoteError);
}

static void recv_on_imm(struct recv_comm *rc, int qpi, uint32_t imm)
{
    struct comm *c = &rc->c;
    unsigned slot = IMM_SLOT(imm), sub = IMM_SUB(imm), nq = IMM_NQ(imm), k = IMM_CHUNK(imm);
    struct request *r = rc->slot_req[slot];
    /* after a failover the sender writes again the chunks it could not
     * prove landed; one that had landed after all arrives once more, for a
     * receive that is complete: its slot is empty or holds the next use
     * (other parity). It was counted; nothing else to do. */
    if (c->fo && (!r || IMM_PARITY(imm) != IMM_SEQ_PARITY(r->seq)))
        return;
    if (!r || sub >= (unsigned)r->n)
        return recv_fail_protocol(rc, qpi, imm, "no posted receive for this slot/sub");
    /* a split message's chunks but the last are 4 KiB multiples: nq chunks
     * need more than (nq - 1) * 4 KiB of receive */
    if (nq > 1 && r->posted[sub] < (uint64_t)(nq - 1) * P2P_CHUNK_ALIGN)
        return recv_fail_protocol(rc, qpi, imm, "more chunks than its receive can hold");
    if (k >= nq)
        return recv_fail_protocol(rc, qpi, imm, "a chunk index beyond the message's chunks");
    uint16_t all = (uint16_t)((1u << nq) - 1u);
    if (IMM_PARITY(imm) != IMM_SEQ_PARITY(r->seq))
        return recv_fail_protocol(rc, qpi, imm, "a chunk for another use of the slot");
    if (r->seen[sub] & ~all)
        return recv_fail_protocol(rc, qpi, imm, "chunk count changed within a message");
    stats_rx(&c->stats, qpi);
    if (r->seen[sub] & (1u << k))
        return; /* written again after a failover: counted once */
    r->seen[sub] |= (uint16_t)(1u << k);
    if (IMM_SPLIT(imm) && k < IMM_PIECES)
        r->pieces[sub] |= (uint64_t)IMM_PIECE(imm) << (IMM_PIECE_BITS * k);
    if (c->fo_pub) /* what the sender reads after a failure */
        __atomic_store_n(&c->fo_pub[slot * COMM_MAX_RECVS + sub],
                         (uint32_t)((r->seq + 1) & 0xffff) << 16 | r->seen[sub], __ATOMIC_RELEASE);
    if (r->seen[sub] != all)
        return;
    uint64_t size;
    if (IMM_HAS_SIZE(imm) && IMM_SPLIT(imm))
        size = r->pieces[sub] == imm_pieces_posted(nq) ? r->posted[sub] : r->pieces[sub];
    else if (IMM_HAS_SIZE(imm))
        size = IMM_WHOLE_SIZE(imm) == IMM_WHOLE_POSTED ? r->posted[sub] : IMM_WHOLE_SIZE(imm);
    else /* written before chunk 0, on its QP: already placed */
        size = __atomic_load_n(&rc->sizes[slot * COMM_MAX_RECVS + sub], __ATOMIC_ACQUIRE);
    if (size > r->posted[sub]) {
        if (!c->error)
            WARN("NET/railnet: device %s: peer sent %llu bytes into a receive of %llu bytes (tag mismatch?)",
                 c->dev_name, (unsigned long long)size, (unsigned long long)r->posted[sub]);
        comm_fail(c, ncclRemoteError);
        return;
    }
    r->size[sub] = size;
    stats_rx_bytes(&c->stats, qpi, size);
    prof_stop(&r->prof_ev[sub]);
    if (++r->subs_done == r->n) {
        r->done = 1;
        rc->slot_req[slot] = NULL;
    }
}

static void send_on_chunk(struct comm *c, int qpi, int ri, unsigned k)
{
    if (ri >= (int)(sizeof(c->reqs) / sizeof(c->reqs[0])))
        return;
    struct request *r = &c->reqs[ri];
    if (r->type != REQ_SEND || k >= HS_MAX_CHUNKS || !(r->unacked & (1u << k)) || r->chunk_qp[k] != qpi)
        return; /* a chunk written again elsewhere, or settled by a failover sync */
    r->unacked &= (uint16_t)~(1u << k);
    prof_stop(&r->prof_ev[k]);
    if (r->replayed & (1u << k))
        failover_replay_landed(c, r, k);
    if (!r->unacked)
        r->done = 1;
}

void p2p_poll(struct comm *c)
{
    struct ibv_wc wc[P2P_POLL_BATCH];
    for (;;) {
        int n = ibv_poll_cq(c->cq, P2P_POLL_BATCH, wc);
        if (n < 0) {
            if (!c->error)
                WARN("NET/railnet: device %s: ibv_poll_cq failed (%d)", c->dev_name, n);
            comm_fail(c, ncclSystemError);
            return;
        }
        for (int i = 0; i < n; i++) {
            const struct ibv_wc *w = &wc[i];
            int kind = WR_KIND(w->wr_id), qpi = WR_QPI(w->wr_id), ri = WR_REQ(w->wr_id);
            if (qpi >= c->nqps)
                qpi = 0;
            /* a completion of a QP that has been rebuilt since: only a landed
             * immediate still matters (the new QP has its own receives) */
            int flush = kind == WR_FLUSH || kind == WR_FLUSH_PART;
            int stale = !flush && WR_GEN(w->wr_id) != c->qp_gen[qpi];
            if (kind == WR_CTS && !stale && c->kind == COMM_RECV) {
                /* its send-queue entry is free, and those of the unsignaled
                 * CTS writes before it on the QP (WR_CHUNK: how many in all) */
                int *unpolled = &((struct recv_comm *)c)->cts_unpolled[qpi], covered = WR_CHUNK(w->wr_id);
                *unpolled -= covered < *unpolled ? covered : *unpolled;
            }
            if (w->status != IBV_WC_SUCCESS) {
                if (kind == WR_PROBE && !stale) {
                    failover_probe_done(c, qpi, (int)w->status);
                    continue;
                }
                if (kind == WR_SYNC && !stale)
                    failover_sync_read_done(c, ri, 0);
                /* a GDR flush READ's loopback QP moves by itself (flush.c) */
                if (flush ? c->kind == COMM_RECV && flush_failed((struct recv_comm *)c, w)
                          : stale || failover_wc_error(c, qpi, w))
                    continue;
                errors_report_wc(c, qpi, w);
                continue;
            }
            switch (kind) {
            case WR_SEND:
                if (!stale)
                    send_on_chunk(c, qpi, ri, (unsigned)WR_CHUNK(w->wr_id));
                break;
            case WR_FLUSH:
                if (c->kind == COMM_RECV && !flush_counts((struct recv_comm *)c, w))
                    break; /* a retired loopback QP's: its request was posted again */
                if (ri < (int)(sizeof(c->reqs) / sizeof(c->reqs[0])) && c->reqs[ri].pending > 0 &&
                    --c->reqs[ri].pending == 0)
                    c->reqs[ri].done = 1;
                break;
            case WR_PROBE:
                if (!stale)
                    failover_probe_done(c, qpi, IBV_WC_SUCCESS);
                break;
            case WR_SYNC:
                if (!stale)
                    failover_sync_read_done(c, ri, 1);
                break;
            case WR_CTS:
            case WR_SIZE:
                break;
            case WR_RECV:
                if (c->kind == COMM_RECV && w->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
                    struct recv_comm *rc = (struct recv_comm *)c;
                    recv_on_imm(rc, qpi, ntohl(w->imm_data));
                    if (stale || (c->qp_dead & (1u << qpi)))
                        break; /* a QP out of use gets no more receives */
                    if (++rc->recv_consumed[qpi] < COMM_RECV_BATCH)
                        break; /* COMM_RECV_DEPTH and more still posted */
                    rc->recv_consumed[qpi] = 0;
                    if (comm_post_recvs(c, qpi, COMM_RECV_BATCH)) {
                        if (!c->error)
                            WARN("NET/railnet: device %s QP 0x%x: cannot repost a receive", c->dev_name,
                                 c->qps[qpi].qp->qp_num);
                        comm_fail(c, ncclSystemError);
                    }
                } else {
                    if (!c->error)
                        WARN("NET/railnet: device %s QP 0x%x: unexpected receive completion (opcode %d)",
                             c->dev_name, w->qp_num, (int)w->opcode);
                    comm_fail(c, ncclRemoteError);
                }
                break;
            default:
                break;
            }
        }
        if (n < P2P_POLL_BATCH)
            break;
    }
}

ncclResult_t p2p_progress(struct comm *c)
{
    p2p_poll(c);
    /* one clock read for this call's timers and for the peer check that
     * follows it where a request cannot progress (a spinning proxy makes
     * this call between every two messages) */
    uint64_t now = c->progress_ns = comm_now_ns();
    errors_check_async(c, now);
    if (c->fo && !c->error)
        failover_progress(c, now);
    return c->error;
}

/* ---- send side ---- */

ncclResult_t p2p_post_chunk(struct send_comm *sc, struct request *r, unsigned k, int qpi)
{
    struct comm *c = &sc->c;
    struct qp_conn *q = &c->qps[qpi];
    int p = q->port->port_idx;
    uint64_t size = (uint64_t)r->size[0];
    uint64_t off = k * r->chunk, len = size - off < r->chunk ? size - off : r->chunk;
    unsigned slot = (unsigned)r->slot, sub = r->sub;
    int has_size = r->imm_has_size;
    struct ibv_sge sge_data, sge_size;
    struct ibv_send_wr wr_size, wr_data, *bad;
    memset(&wr_data, 0, sizeof(wr_data));
    wr_data.wr_id = WR_ID_GEN(WR_SEND, c->qp_gen[qpi], qpi, k, r->index);
    wr_data.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr_data.send_flags = IBV_SEND_SIGNALED;
    wr_data.imm_data = htonl(imm_make(slot, sub, r->nq, k, IMM_SEQ_PARITY(r->seq), has_size, r->imm_size));
    wr_data.wr.rdma.remote_addr = r->raddr + off;
    wr_data.wr.rdma.rkey = r->rkey[p];
    if (len) {
        sge_data.addr = (uint64_t)(uintptr_t)(r->data + off);
        sge_data.length = (uint32_t)len;
        sge_data.lkey = mr_lkey(r->mh, p);
        wr_data.sg_list = &sge_data;
        wr_data.num_sge = 1;
        /* inline only from host memory: the CPU copies it at post time */
        if (len <= q->max_inline && !mr_is_cuda(r->mh))
            wr_data.send_flags |= IBV_SEND_INLINE;
    }
    struct ibv_send_wr *head = &wr_data;
    if (k == 0 && !has_size) {
        /* one or two chunks: below 4 GiB (handshake.h, HS_CHUNK_MAX) */
        uint32_t *st = &sc->size_stage[slot * COMM_MAX_RECVS + sub];
        *st = (uint32_t)size;
        memset(&wr_size, 0, sizeof(wr_size));
        sge_size.addr = (uint64_t)(uintptr_t)st;
        sge_size.length = sizeof(*st);
        sge_size.lkey = sc->stage_mr->lkey;
        wr_size.wr_id = WR_ID_GEN(WR_SIZE, c->qp_gen[qpi], qpi, 0, 0);
        wr_size.opcode = IBV_WR_RDMA_WRITE;
        wr_size.sg_list = &sge_size;
        wr_size.num_sge = 1;
        wr_size.wr.rdma.remote_addr = sc->remote_sizes_addr + (slot * COMM_MAX_RECVS + sub) * sizeof(uint32_t);
        wr_size.wr.rdma.rkey = sc->remote_sizes_rkey[p];
        wr_size.next = &wr_data;
        head = &wr_size;
    }
    r->chunk_qp[k] = (uint8_t)qpi;
    int rc = ibv_post_send(q->qp, head, &bad);
    if (rc) {
        WARN("NET/railnet: device %s port %u QP 0x%x: ibv_post_send failed: %s", c->dev_name,
             q->port->port_num, q->qp->qp_num, strerror(rc));
        /* completions of the QPs already posted still arrive; the comm is dead anyway */
        comm_fail(c, ncclSystemError);
        return ncclSystemError;
    }
    stats_tx(&c->stats, qpi, len);
    prof_stop(&r->prof_ev[k]); /* written again after a failover: the first write's event ends */
    prof_start_qp(&r->prof_ev[k], &r->prof_started, r->phandle[0], c->dev, wr_data.wr_id, IBV_WR_RDMA_WRITE_WITH_IMM,
                  q->qp->qp_num, (size_t)len);
    return ncclSuccess;
}

/* A message whose size goes in the sizes area (32-bit entries) has one or
 * two chunks, or a size at or above its pieces' mark, which for three or
 * more chunks is beyond what HS_MAX_CHUNKS chunks carry. */
_Static_assert(2 * HS_CHUNK_MAX <= (1ull << 32), "one or two chunks: a 32-bit size");
_Static_assert(3 * HS_CHUNK_MAX < (1ull << (3 * IMM_PIECE_BITS)) - 1, "three chunks carry their size in pieces");
_Static_assert(HS_MSG_BYTES_MAX < (1ull << (IMM_PIECES * IMM_PIECE_BITS)) - 1, "four or more: in pieces");

/* How a message goes: its chunks and the live QPs they take in turn. */
struct send_plan {
    int live[COMM_MAX_QPS], nlive;
    unsigned nq, first;
    uint64_t chunk;
    int need; /* work requests per QP at most: its chunks on one QP, and a size write */
};

/* Messages up to split_min (and at most one chunk's size) go whole on the
 * comm's home QP (the next live one when it is down) or on the live QPs in
 * turn (comm.h, keep_home, comm_homed); larger ones in one chunk per live QP, and in
 * more chunks than QPs where a chunk would exceed the device's largest
 * write (c->max_chunk). -1 without a live QP. */
static int send_plan(struct send_comm *sc, uint64_t size, struct send_plan *p)
{
    struct comm *c = &sc->c;
    p->nlive = 0;
    for (int i = 0; i < c->nqps; i++)
        if (c->qp_live & (1u << i))
            p->live[p->nlive++] = i;
    if (p->nlive == 0)
        return -1;
    uint64_t nlive = (uint64_t)p->nlive;
    if ((size <= sc->split_min || p->nlive == 1) && size <= c->max_chunk) {
        p->nq = 1;
        if (comm_homed(c)) {
            /* live[] ascends: the home QP, or the next live one after it */
            int q = failover_pick_qp(c->qp_live, c->nqps, comm_home_qp(c));
            p->first = 0;
            while (p->live[p->first] != q)
                p->first++;
        } else {
            p->first = c->rr % (unsigned)p->nlive;
        }
        p->chunk = size;
    } else {
        uint64_t chunk = (size + nlive - 1) / nlive;
        chunk = (chunk + P2P_CHUNK_ALIGN - 1) & ~(uint64_t)(P2P_CHUNK_ALIGN - 1);
        if (chunk > c->max_chunk)
            chunk = c->max_chunk; /* a multiple of 4 KiB (devices.c) */
        p->nq = (unsigned)((size + chunk - 1) / chunk);
        p->first = 0;
        p->chunk = chunk;
    }
    p->need = (int)((p->nq + nlive - 1) / nlive) + 1;
    return 0;
}

static ncclResult_t send_post(struct send_comm *sc, struct request *r, const struct send_plan *p,
                              const struct cts_entry *e, unsigned slot, unsigned sub, char *data, uint64_t size,
                              void *mh)
{
    struct comm *c = &sc->c;
    unsigned nq = p->nq;
    if (nq == 1)
        c->rr++;
    r->data = data;
    r->mh = mh;
    r->raddr = e->addr;
    for (int i = 0; i < HS_MAX_PORTS; i++)
        r->rkey[i] = e->rkey[i];
    r->chunk = p->chunk ? p->chunk : 1;
    r->nq = (uint8_t)nq;
    r->sub = (uint8_t)sub;
    r->slot = (int)slot;
    r->unacked = (uint16_t)((1u << nq) - 1u);
    r->replayed = 0;
    /* the size rides in the immediate(s) when it can (comm.h): no
     * separate write of the size then */
    if (nq == 1) {
        r->imm_has_size = size <= IMM_WHOLE_MAX || size == e->size;
        r->imm_size = size <= IMM_WHOLE_MAX ? size : IMM_WHOLE_POSTED;
    } else {
        uint64_t mark = imm_pieces_posted(nq);
        r->imm_has_size = size < mark || size == e->size;
        r->imm_size = size < mark ? size : mark;
    }
    if (!r->imm_has_size) /* counted here, once: a failover may post chunk 0 again */
        stats_size_write(&c->stats);
    for (unsigned k = 0; k < nq; k++) {
        ncclResult_t res = p2p_post_chunk(sc, r, k, p->live[(p->first + k) % (unsigned)p->nlive]);
        if (res != ncclSuccess) {
            r->unacked = 0;
            return res;
        }
    }
    return ncclSuccess;
}

/* Ends the profiler events a request still holds (prof.h). */
static void req_prof_stop(struct request *r)
{
    for (int k = 0; k < HS_MAX_CHUNKS; k++)
        prof_stop(&r->prof_ev[k]);
}

ncclResult_t p2p_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void *phandle,
                       void **request)
{
    struct send_comm *sc = send_comm;
    struct comm *c = &sc->c;
    *request = NULL;
    if (c->error)
        return c->error;
    if (size > 0 && !mhandle) {
        WARN("NET/railnet: isend of %zu bytes with no memory handle", size);
        return ncclInvalidArgument;
    }
    if (size > HS_MAX_CHUNKS * c->max_chunk) {
        WARN("NET/railnet: device %s: isend of %zu bytes; at most %llu (maxP2pBytes)", c->dev_name, size,
             (unsigned long long)(HS_MAX_CHUNKS * c->max_chunk));
        return ncclInvalidArgument;
    }
    if (!c->fo_ready && failover_attach(c) != ncclSuccess) {
        comm_fail(c, ncclSystemError);
        return c->error;
    }
    if (c->fo_fence) {
        /* chunks written again after a failover are in flight: a new
         * message could land before them in a buffer they target */
        if (p2p_progress(c) != ncclSuccess || c->fo_fence)
            return c->error;
    }
    unsigned slot = (unsigned)(sc->head % COMM_SLOTS);
    struct cts_entry *row = &sc->ring[slot * COMM_MAX_RECVS];
    uint64_t want = sc->head + 1;
    if (__atomic_load_n(&row[0].seq, __ATOMIC_ACQUIRE) != want) {
        /* the receiver has not posted yet: make sure it is still there */
        (void)p2p_progress(c);
        return errors_check_peer(c, 1, c->progress_ns);
    }
    unsigned nreqs = row[0].nreqs;
    if (nreqs < 1 || nreqs > COMM_MAX_RECVS) {
        WARN("NET/railnet: device %s: CTS slot %u announces %u receives (max %d): corrupted CTS",
             c->dev_name, slot, nreqs, COMM_MAX_RECVS);
        comm_fail(c, ncclRemoteError);
        return c->error;
    }
    int match = -1;
    for (unsigned r = 0; r < nreqs; r++) {
        if (__atomic_load_n(&row[r].seq, __ATOMIC_ACQUIRE) != want)
            return ncclSuccess; /* rest of the slot still in flight */
        if (!(sc->used & (1u << r)) && row[r].tag == tag) {
            match = (int)r;
            break;
        }
    }
    if (match < 0)
        return ncclSuccess; /* tag belongs to a later receive */
    struct cts_entry e = row[match];
    if (e.nreqs != nreqs || e.sub != (unsigned)match || e.slot != slot) {
        WARN("NET/railnet: device %s: CTS slot %u entry %d inconsistent (n %u/%u, sub %u, slot %u)",
             c->dev_name, slot, match, e.nreqs, nreqs, e.sub, e.slot);
        comm_fail(c, ncclRemoteError);
        return c->error;
    }
    if ((uint64_t)size > e.size) {
        WARN("NET/railnet: device %s: send of %zu bytes (tag %d) larger than the posted receive of %llu bytes",
             c->dev_name, size, tag, (unsigned long long)e.size);
        return ncclInvalidUsage;
    }
    struct send_plan plan;
    if (send_plan(sc, size, &plan))
        return c->error ? c->error : ncclSystemError;
    if (sc->sq_used + plan.need > COMM_SEND_WR_BUDGET) {
        /* the send queues hold the chunks of earlier messages: not now */
        (void)p2p_progress(c);
        return c->error;
    }
    struct request *r = comm_req_get(c, REQ_SEND);
    if (!r)
        return ncclSuccess;
    r->n = 1;
    r->size[0] = size;
    r->slot = (int)slot;
    r->seq = sc->head;
    r->phandle[0] = phandle;
    r->sq_need = plan.need;
    ncclResult_t res = send_post(sc, r, &plan, &e, slot, (unsigned)match, data, size, mhandle);
    if (res != ncclSuccess) {
        req_prof_stop(r);
        comm_req_put(r);
        return res;
    }
    sc->sq_used += plan.need;
    sc->used |= (uint8_t)(1u << match);
    if (sc->used == (uint8_t)((1u << nreqs) - 1)) {
        sc->used = 0;
        sc->head++;
    }
    *request = r;
    return ncclSuccess;
}

/* ---- receive side ---- */

ncclResult_t p2p_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                       void **phandles, void **request)
{
    struct recv_comm *rc = recv_comm;
    struct comm *c = &rc->c;
    *request = NULL;
    if (c->error)
        return c->error;
    if (n < 1 || n > COMM_MAX_RECVS) {
        WARN("NET/railnet: irecv of %d buffers, 1..%d supported", n, COMM_MAX_RECVS);
        return ncclInvalidArgument;
    }
    if (!c->fo_ready && failover_attach(c) != ncclSuccess) {
        comm_fail(c, ncclSystemError);
        return c->error;
    }
    unsigned slot = (unsigned)(rc->next_seq % COMM_SLOTS);
    int home = comm_qp_hint(c, slot);
    int qpi = failover_pick_qp(c->qp_live, c->nqps, home);
    if (qpi < 0 || rc->slot_req[slot] || rc->cts_unpolled[qpi] >= c->qpp.max_send_wr) {
        if (p2p_progress(c) != ncclSuccess)
            return c->error;
        qpi = failover_pick_qp(c->qp_live, c->nqps, home);
        if (qpi < 0 || rc->slot_req[slot] || rc->cts_unpolled[qpi] >= c->qpp.max_send_wr)
            return errors_check_peer(c, 1, c->progress_ns);
    }
    for (int i = 0; i < n; i++) {
        if (sizes[i] > 0 && !mhandles[i]) {
            WARN("NET/railnet: irecv buffer %d of %zu bytes with no memory handle", i, sizes[i]);
            return ncclInvalidArgument;
        }
        if (sizes[i] > HS_MAX_CHUNKS * c->max_chunk) {
            WARN("NET/railnet: device %s: irecv buffer %d of %zu bytes; at most %llu (maxP2pBytes)", c->dev_name, i,
                 sizes[i], (unsigned long long)(HS_MAX_CHUNKS * c->max_chunk));
            return ncclInvalidArgument;
        }
    }
    struct request *r = comm_req_get(c, REQ_RECV);
    if (!r)
        return ncclSuccess;
    struct cts_entry *row = &rc->stage[slot * COMM_MAX_RECVS];
    for (int i = 0; i < n; i++) {
        struct cts_entry *e = &row[i];
        memset(e, 0, sizeof(*e));
        e->addr = (uint64_t)(uintptr_t)data[i];
        for (int p = 0; p < c->nports; p++)
            e->rkey[p] = mhandles[i] ? mr_rkey(mhandles[i], p) : 0;
        e->size = (uint64_t)sizes[i];
        e->tag = tags[i];
        e->nreqs = (uint16_t)n;
        e->sub = (uint16_t)i;
        e->slot = slot;
        e->seq = rc->next_seq + 1;
        r->posted[i] = sizes[i];
        r->size[i] = 0;
        r->seen[i] = 0;
        r->pieces[i] = 0;
        r->phandle[i] = phandles ? phandles[i] : NULL;
    }
    r->n = n;
    r->slot = (int)slot;
    r->seq = rc->next_seq;
    rc->slot_req[slot] = r;
    if (c->fo_pub)
        for (int i = 0; i < COMM_MAX_RECVS; i++)
            __atomic_store_n(&c->fo_pub[slot * COMM_MAX_RECVS + i], (uint32_t)((r->seq + 1) & 0xffff) << 16,
                             __ATOMIC_RELEASE);
    if (p2p_post_cts(rc, slot, qpi) != ncclSuccess) {
        rc->slot_req[slot] = NULL;
        comm_req_put(r);
        return ncclSystemError;
    }
    for (int i = 0; i < n; i++)
        prof_start_qp(&r->prof_ev[i], &r->prof_started, r->phandle[i], c->dev, rc->cts_wr_id, IBV_WR_RDMA_WRITE,
                      c->qps[qpi].qp->qp_num, (size_t)sizes[i]);
    rc->next_seq++;
    *request = r;
    return ncclSuccess;
}

ncclResult_t p2p_post_cts(struct recv_comm *rc, unsigned slot, int qpi)
{
    struct comm *c = &rc->c;
    struct request *r = rc->slot_req[slot];
    struct cts_entry *row = &rc->stage[slot * COMM_MAX_RECVS];
    struct qp_conn *q = &c->qps[qpi];
    struct ibv_sge sge = { .addr = (uint64_t)(uintptr_t)row,
                           .length = (uint32_t)(r->n * (int)sizeof(struct cts_entry)),
                           .lkey = rc->stage_mr->lkey };
    struct ibv_send_wr wr, *bad;
    /* one completion per COMM_CTS_SIGNAL_EVERY writes on the QP frees the
     * send-queue entries of them all (the NIC's CQ and our poll see one) */
    int covered = rc->cts_unsignaled[qpi] + 1, signal = covered >= COMM_CTS_SIGNAL_EVERY;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = WR_ID_GEN(WR_CTS, c->qp_gen[qpi], qpi, signal ? covered : 0, r->index);
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = (signal ? IBV_SEND_SIGNALED : 0) | (sge.length <= q->max_inline ? IBV_SEND_INLINE : 0);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = rc->remote_ring_addr + (uint64_t)slot * COMM_MAX_RECVS * sizeof(struct cts_entry);
    wr.wr.rdma.rkey = rc->remote_ring_rkey[q->port->port_idx];
    rc->cts_wr_id = wr.wr_id;
    int err = ibv_post_send(q->qp, &wr, &bad);
    if (err) {
        WARN("NET/railnet: device %s port %u QP 0x%x: posting the CTS write failed: %s", c->dev_name,
             q->port->port_num, q->qp->qp_num, strerror(err));
        comm_fail(c, ncclSystemError);
        return ncclSystemError;
    }
    rc->cts_unpolled[qpi]++;
    rc->cts_unsignaled[qpi] = signal ? 0 : covered;
    return ncclSuccess;
}

ncclResult_t p2p_test(void *request, int *done, int *sizes)
{
    struct request *r = request;
    struct comm *c = r->comm;
    *done = 0;
    if (!r->done) {
        ncclResult_t res = p2p_progress(c);
        if (res != ncclSuccess)
            return res;
        if (!r->done)
            return errors_check_peer(c, 1, c->progress_ns);
    }
    /* every table's test reports int sizes: a message of 2 GiB or more is
     * reported as INT_MAX bytes (its bytes all landed) */
    if (sizes) {
        if (r->type == REQ_RECV)
            for (int i = 0; i < r->n; i++)
                sizes[i] = r->size[i] > INT_MAX ? INT_MAX : (int)r->size[i];
        else if (r->type == REQ_SEND)
            sizes[0] = r->size[0] > INT_MAX ? INT_MAX : (int)r->size[0];
    }
    if (r->type == REQ_SEND) {
        struct send_comm *sc = (struct send_comm *)c;
        sc->sq_used -= r->sq_need;
        r->sq_need = 0;
    }
    req_prof_stop(r);
    *done = 1;
    comm_req_put(r);
    return ncclSuccess;
}

ncclResult_t p2p_close_recv(void *recv_comm)
{
    if (recv_comm)
        flush_destroy(recv_comm);
    return comm_close_recv(recv_comm);
}
