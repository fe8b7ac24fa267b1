/* txbatch.c: turning a batch of send WQEs into requests on the wire.  The
 * frames -- headers, atomic operands, payloads -- are gathered by sendmsg()
 * straight from the registered memory (CUDA memory through the thread's
 * staging buffer or a bounce buffer), and go out in pieces of at most 256
 * KiB, each charged to the port's token bucket first (so a large message is
 * paced, not delayed then burst) and each counting as progress for the
 * retry timer.  The local keys are checked here, at execution time, as a
 * NIC does: a bad lkey completes the WQE with IBV_WC_LOC_PROT_ERR.  With
 * added latency a request carries the time before which the responder may
 * not place it (one way: ACKs are not delayed).
 *
 * Nothing here waits: a piece the rate limit holds back makes the push
 * return with the time it may go (the requester's task sets a timer for
 * it), and what the connection has no room for waits in the requester's
 * tx buffer (txbuf.c). */
#include "txbatch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint8_t wire_op_of(enum ibv_wr_opcode op)
{
    switch (op) {
    case IBV_WR_SEND: return SN_OP_SEND;
    case IBV_WR_SEND_WITH_IMM: return SN_OP_SEND_IMM;
    case IBV_WR_RDMA_WRITE: return SN_OP_WRITE;
    case IBV_WR_RDMA_WRITE_WITH_IMM: return SN_OP_WRITE_IMM;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return SN_OP_ATOMIC_FA;
    case IBV_WR_ATOMIC_CMP_AND_SWP: return SN_OP_ATOMIC_CS;
    default: return SN_OP_READ;
    }
}

/* batch_add: WQE i's CUDA payload does not fit behind the batch's deferred
 * reads; send what the batch holds and add WQE i again. */
#define BATCH_STAGE_FULL (-2)

void txbatch_release(struct sn_tx_batch *b)
{
    for (int i = 0; i < b->nrefs; i++)
        mr_put(b->refs[i]);
    for (int i = 0; i < b->nbounces; i++)
        free(b->bounces[i]);
    b->nrefs = b->nbounces = b->niov = b->at = 0;
    b->piece = false;
}

/* Bytes paced as one piece: a large message is spread over time by the
 * rate limit instead of waiting for its whole debt and then bursting, and
 * each piece on the wire counts as progress for the retry timer.  On a
 * paced port a piece is at most PACE_US of line time: a piece's bytes
 * leave after its line time has passed, so a piece of 256 KiB at
 * 100 MB/s held a whole window of small writes back for 2.6 ms, their
 * completions and the next posts came only after it, and a 1 KiB stream
 * on one QP ran at 0.87-0.90 of the rate (a NIC's line never waits for a
 * whole window to be serialized before the first WQE completes). */
#define PACE_BYTES (256 * 1024)
#define PACE_MIN_BYTES 4096
#define PACE_US 50
/* What one push sends before it lets the other tasks have the engine. */
#define PUSH_STEP_BYTES (1024 * 1024)

static size_t pace_bytes(const struct sn_port *port)
{
    uint64_t rate = port->tx_rate.rate;
    if (!rate)
        return PACE_BYTES;
    uint64_t n = rate / (1000000 / PACE_US);
    return n < PACE_MIN_BYTES ? PACE_MIN_BYTES : n > PACE_BYTES ? PACE_BYTES : (size_t)n;
}

static bool is_cma(const struct sn_tx_batch *b, const struct iovec *v)
{
    const char *p = v->iov_base;
    return p >= (const char *)b->cma_desc && p < (const char *)(b->cma_desc + BATCH_WQES);
}

static bool is_header(const struct sn_tx_batch *b, const struct iovec *v)
{
    const char *p = v->iov_base;
    return (p >= (const char *)b->hdr && p < (const char *)(b->hdr + BATCH_WQES)) ||
           (p >= (const char *)b->atom && p < (const char *)(b->atom + BATCH_WQES)) || is_cma(b, v);
}

/* The payload a CMA descriptor stands for: the responder pulls it, but it
 * is this port's traffic all the same (rate, counters, faults). */
static uint64_t cma_payload(const struct iovec *v)
{
    const struct sn_wire_cma *d = v->iov_base;
    const struct sn_cma_seg *seg = (const struct sn_cma_seg *)(d + 1);
    uint64_t n = 0;
    for (uint32_t s = 0; s < d->nseg; s++)
        n += seg[s].len;
    return n;
}

static void progress(struct sn_qp *qp)
{
    pthread_mutex_lock(&qp->lock);
    qp->last_progress_ns = sn_now_ns();
    pthread_mutex_unlock(&qp->lock);
}

/* Picks the next piece: whole iovecs up to a pace, the last payload one
 * cut to fill it (headers are never cut). */
static void piece_pick(struct sn_tx_batch *b, size_t pace)
{
    struct iovec *iov = b->iov + b->at;
    int left = b->niov - b->at, n = 0;
    size_t bytes = 0;
    b->piece_payload = b->piece_pulled = 0;
    for (; n < left && bytes + iov[n].iov_len <= pace; n++) {
        bytes += iov[n].iov_len;
        b->piece_payload += is_header(b, &iov[n]) ? 0 : iov[n].iov_len;
        b->piece_pulled += is_cma(b, &iov[n]) ? cma_payload(&iov[n]) : 0;
    }
    b->rest = (struct iovec){ NULL, 0 };
    if (n == 0 || (n < left && bytes < pace && !is_header(b, &iov[n]))) {
        /* a payload iovec larger than what the pace has left */
        size_t cut = pace - bytes;
        b->rest.iov_base = (char *)iov[n].iov_base + cut;
        b->rest.iov_len = iov[n].iov_len - cut;
        iov[n].iov_len = cut;
        b->piece_payload += cut;
        n++;
    }
    b->piece_n = n;
    b->pulled_left = b->piece_pulled;
    b->wire_charged = false;
    b->due = 0;
    b->piece = true;
}

/* Charges the piece to the port's rate limit: false with *due set while
 * the line is busy with bytes charged before (the piece leaves then).  A
 * pulled payload is charged in pieces of a pace, each one progress for the
 * retry timer, as the wire's pieces are. */
static bool piece_charge(struct sn_qp *qp, struct sn_tx_batch *b, struct sn_port *port, size_t pace,
                         uint64_t *due)
{
    struct sn_rate *r = &port->tx_rate;
    for (;;) {
        uint64_t now = sn_now_ns();
        if (b->due > now) {
            *due = b->due;
            return false;
        }
        uint64_t n;
        if (!b->wire_charged) {
            n = b->piece_payload;
            b->wire_charged = true;
        } else if (b->pulled_left) {
            n = b->pulled_left < pace ? b->pulled_left : pace;
            b->pulled_left -= n;
            progress(qp);
        } else {
            return true;
        }
        if (!r->rate || !n)
            continue;
        pthread_mutex_lock(&r->lock);
        uint64_t wait = rate_charge_locked(r, now, n, b->since_ns);
        pthread_mutex_unlock(&r->lock);
        b->due = wait ? now + wait : 0;
    }
}

enum sn_push txbatch_push(struct sn_qp *qp, struct sn_tx_batch *b, struct sn_txbuf *tx, int fd,
                          bool force, uint64_t *due, int *err)
{
    struct sn_port *port = qp->port;
    size_t pace = pace_bytes(port), pushed = 0;
    while (b->at < b->niov) {
        if (!force && !txbuf_empty(tx)) {
            if ((*err = txbuf_flush(tx, fd)) == EAGAIN)
                return PUSH_FULL;
            if (*err)
                return PUSH_ERR;
        }
        if (!force && pushed >= PUSH_STEP_BYTES)
            return PUSH_MORE;
        if (!b->piece)
            piece_pick(b, pace);
        if (!b->prepaid && port->tx_rate.rate && !piece_charge(qp, b, port, pace, due))
            return PUSH_PACED;
        uint64_t payload = b->piece_payload + b->piece_pulled;
        /* counted before the bytes leave: once they are out, the peer may
         * answer and the WQE complete while this thread waits for the CPU,
         * and a completion must find its bytes counted */
        uint8_t tc = atomic_load_explicit(&qp->tc, memory_order_relaxed);
        atomic_fetch_add(&port->cnt.tx_bytes, payload);
        atomic_fetch_add(&port->tc_tx_bytes[tc], payload);
        atomic_fetch_add(&qp->cnt.tx_bytes, payload);
        *err = txbuf_writev(tx, fd, b->iov + b->at, b->piece_n);
        if (*err) {
            atomic_fetch_sub(&port->cnt.tx_bytes, payload);
            atomic_fetch_sub(&port->tc_tx_bytes[tc], payload);
            atomic_fetch_sub(&qp->cnt.tx_bytes, payload);
            return PUSH_ERR;
        }
        b->at += b->piece_n;
        if (b->rest.iov_base) {
            b->at--;
            b->iov[b->at] = b->rest;
        }
        b->piece = false;
        pushed += payload;
        fault_tx_bytes(qp->dev, port, payload);
        progress(qp);
    }
    return PUSH_DONE;
}

int txbatch_detach(struct sn_tx_batch *b)
{
    for (int i = b->at; i < b->niov; i++) {
        if (!b->staged[i])
            continue;
        /* a piece cut at this iovec: its rest is the same stretch's tail */
        bool cut = b->piece && b->rest.iov_base && i == b->at + b->piece_n - 1;
        size_t len = b->iov[i].iov_len + (cut ? b->rest.iov_len : 0);
        void *copy = malloc(len ? len : 1);
        if (!copy)
            return ENOMEM;
        memcpy(copy, b->iov[i].iov_base, len);
        b->bounces[b->nbounces++] = copy;
        if (cut)
            b->rest.iov_base = (char *)copy + b->iov[i].iov_len;
        b->iov[i].iov_base = copy;
        b->staged[i] = false;
    }
    return 0;
}

/* Adds WQE i's frame to the iovec; on a local key error returns
 * IBV_WC_LOC_PROT_ERR (nothing of WQE i added). */
static int batch_add(struct sn_qp *qp, struct sn_tx_batch *b, int i, bool may_defer)
{
    int ret = IBV_WC_LOC_PROT_ERR;
    struct sn_swqe *w = &b->w[i];
    struct sn_wire_req *h = &b->hdr[i];
    memset(h, 0, sizeof(*h));
    h->op = wire_op_of(w->opcode);
    h->flags = (w->send_flags & IBV_SEND_SOLICITED) ? SN_REQ_SOLICITED : 0;
    if (w->ack_req)
        h->flags |= SN_REQ_ACKREQ;
    h->seq = w->seq;
    h->len = w->len;
    h->rkey = w->rkey;
    h->raddr = w->raddr;
    h->imm = w->imm;
    h->deliver_ns = b->latency_us ? sn_now_ns() + (uint64_t)b->latency_us * 1000ull : 0;
    int first_ref = b->nrefs, first_bounce = b->nbounces, first_iov = b->niov;
    b->staged[b->niov] = false;
    b->iov[b->niov++] = (struct iovec){ h, sizeof(*h) };
    if (sn_wr_is_atomic(w->opcode)) {
        /* the operands travel with the header; the SGE receives the old value */
        b->atom[i].swap_add = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? w->swap : w->compare_add;
        b->atom[i].compare = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? w->compare_add : 0;
        b->staged[b->niov] = false;
        b->iov[b->niov++] = (struct iovec){ &b->atom[i], sizeof(b->atom[i]) };
    }
    bool read = sn_wr_is_read_like(w->opcode);
    /* same-host peer: a host-memory payload is named, not sent (cma.c) */
    bool cma = b->cma && !read && !w->inl && w->len >= SN_CMA_MIN_BYTES;
    struct iovec *desc = NULL;
    b->npin = 0;
    if (cma) {
        b->cma_desc[i].d = (struct sn_wire_cma){ .nseg = 0 };
        b->staged[b->niov] = false;
        desc = &b->iov[b->niov++];
        *desc = (struct iovec){ &b->cma_desc[i], sizeof(b->cma_desc[i].d) };
    }
    if (w->inl) {
        if (w->len) {
            b->staged[b->niov] = false;
            b->iov[b->niov++] = (struct iovec){ w->inl, w->len };
        }
    } else {
        for (int s = 0; s < w->num_sge; s++) {
            const struct ibv_sge *sg = &w->sge[s];
            if (!sg->length)
                continue;
            struct sn_mr *mr;
            if (mr_get(sg->lkey, false, qp->ibqp.pd, read ? IBV_ACCESS_LOCAL_WRITE : 0, sg->addr,
                       sg->length, &mr))
                goto bad;
            void *src = mr_host_ptr(mr, sg->addr);
            if (cma && !read && !mr->gpu) {
                b->pin[b->npin++] = mr;
                b->cma_desc[i].seg[b->cma_desc[i].d.nseg++] =
                    (struct sn_cma_seg){ (uint64_t)(uintptr_t)src, sg->length };
                continue;
            }
            b->refs[b->nrefs++] = mr;
            if (read)
                continue;
            if (cma) {
                /* CUDA memory cannot be pulled by another process: this
                 * WQE goes on the wire after all, its segments so far too */
                for (uint32_t k = 0; k < b->cma_desc[i].d.nseg; k++) {
                    b->staged[b->niov] = false;
                    b->iov[b->niov++] = (struct iovec){ (void *)(uintptr_t)b->cma_desc[i].seg[k].addr,
                                                        b->cma_desc[i].seg[k].len };
                }
                for (int k = 0; k < b->npin; k++)
                    b->refs[b->nrefs++] = b->pin[k];
                b->npin = 0;
                *desc = (struct iovec){ NULL, 0 };
                cma = false;
            }
            bool staged = false;
            if (mr->gpu && may_defer) {
                /* read behind the batch's other CUDA payloads: one sync for
                 * all of them (when the build ends), as a NIC keeps reads
                 * in flight */
                const void *st;
                int r = gpu_read_deferred(src, sg->length, &st);
                if (r == ENOSPC && b->gpu_first >= 0) {
                    ret = BATCH_STAGE_FULL;
                    goto bad;
                }
                if (r == 0) {
                    if (b->gpu_first < 0)
                        b->gpu_first = i;
                    src = (void *)(uintptr_t)st;
                    staged = true;
                } else if (r != ENOSPC) {
                    goto bad;
                }
            }
            if (mr->gpu && src == mr_host_ptr(mr, sg->addr)) {
                /* bigger than the staging buffer, or no deferring: a copy
                 * of its own.  It reuses the stage from its start once it
                 * lands, so nothing of this batch may be deferred here:
                 * may_defer is false only with nothing deferred, and
                 * ENOSPC with reads deferred returned BATCH_STAGE_FULL. */
                void *bounce = malloc(sg->length);
                if (!bounce || mr_read(mr, sg->addr, bounce, sg->length)) {
                    free(bounce);
                    goto bad;
                }
                b->bounces[b->nbounces++] = bounce;
                src = bounce;
            }
            b->staged[b->niov] = staged;
            b->iov[b->niov++] = (struct iovec){ src, sg->length };
        }
    }
    if (cma) {
        h->flags |= SN_REQ_CMA;
        desc->iov_len = sizeof(b->cma_desc[i].d) + b->cma_desc[i].d.nseg * sizeof(struct sn_cma_seg);
    }
    uint64_t pkts = read ? 1 : sn_mtu_packets(w->len, b->mtu);
    atomic_fetch_add(&qp->port->cnt.tx_packets, pkts);
    atomic_fetch_add(&qp->cnt.tx_packets, pkts);
    return 0;
bad:
    for (int r = 0; r < b->npin; r++)
        mr_put(b->pin[r]);
    b->npin = 0;
    for (int r = first_ref; r < b->nrefs; r++)
        mr_put(b->refs[r]);
    for (int r = first_bounce; r < b->nbounces; r++)
        free(b->bounces[r]);
    b->nrefs = first_ref;
    b->nbounces = first_bounce;
    b->niov = first_iov;
    return ret;
}

/* Hands a pulled WQE's MR references to its send-queue slot, before its
 * descriptor leaves: they go when the WQE completes (qp.c).  A WQE flushed
 * meanwhile (QP error or reset) has completed already: its references go
 * now. */
static void pin_pulled(struct sn_qp *qp, uint64_t idx, const struct sn_swqe *w,
                       struct sn_tx_batch *b)
{
    pthread_mutex_lock(&qp->lock);
    struct sn_swqe *slot = &qp->sq[idx % qp->sq_size];
    bool live = idx >= qp->sq_head && idx < qp->sq_sent && slot->seq == w->seq &&
                slot->wr_id == w->wr_id && !slot->npin;
    for (int k = 0; k < b->npin; k++) {
        if (live)
            slot->pin[slot->npin++] = b->pin[k];
        else
            mr_put(b->pin[k]);
    }
    b->npin = 0;
    pthread_mutex_unlock(&qp->lock);
}

void txbatch_build(struct sn_qp *qp, struct sn_tx_batch *b)
{
    b->gpu_first = -1;
    b->niov = b->at = 0;
    b->piece = false;
    /* the stage is empty at the start of a build (the last one landed):
     * a payload too big for it gets a bounce of its own */
    for (int i = b->built; i < b->n && b->bad < 0; i++) {
        if (b->niov + SN_MAX_SGE + 1 > BATCH_IOV)
            break;
        b->iov_at[i] = b->niov;
        int r = batch_add(qp, b, i, true);
        if (r == BATCH_STAGE_FULL)
            break;
        if (r) {
            b->bad = i;
            break;
        }
        b->built = i + 1;
        if (b->npin)
            pin_pulled(qp, b->first + (uint64_t)i, &b->w[i], b);
    }
    /* land the CUDA reads: when they failed, the batch is cut before the
     * first WQE that had one, and that WQE fails (it and the rest) */
    if (b->gpu_first >= 0) {
        int first = b->gpu_first;
        b->gpu_first = -1;
        if (gpu_flush() != 0) {
            b->niov = b->iov_at[first];
            if (b->bad < 0 || first < b->bad)
                b->bad = first;
            b->built = first;
        }
    }
}
