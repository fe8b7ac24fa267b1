/* requester.c: the send side of a QP.  One thread per QP walks the send
 * queue in order, connects to the peer on first need (hello: our QPN, its
 * QPN, our GID, our rnr_retry), and writes requests in batches of up to
 * 64 WQEs / 256 KiB, headers and payloads gathered by sendmsg() straight
 * from the registered memory (CUDA memory through a bounce buffer), in
 * pieces of 256 KiB each charged to the port's token bucket first (so a
 * large message is paced, not delayed then burst) and each counting as
 * progress for the retry timer.  The local keys are checked here, at
 * execution time, as a NIC does: a bad lkey completes the WQE with
 * IBV_WC_LOC_PROT_ERR.  With added latency a request carries the time
 * before which the responder may not place it (one way: ACKs are not
 * delayed).  RDMA READs and atomics (whose operands follow the header) are
 * held back while max_rd_atomic of them await their response. */
#include "softnic.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define BATCH_WQES 64
#define BATCH_BYTES (256 * 1024)
#define BATCH_IOV 1000

/* A posting thread transmits at most this much itself (see below): WQEs,
 * and bytes of payload by pointer (inline data, at most max_inline_data a
 * WQE, comes on top: a put_signal's signal travels with its payload). */
#define DIRECT_MAX_WQES 8
#define DIRECT_MAX_BYTES 4096
/* ... and only while the peer has acknowledged all but this much */
#define DIRECT_MAX_UNACKED_WQES 8
#define DIRECT_MAX_UNACKED_BYTES (16 * 1024)

/* Waits for the responder's answer to a hello that offered the fast path
 * (cma.c): it comes once the peer QP is ready to receive, before anything
 * else on the connection, so the first request already knows how to carry
 * its payload.  Gives up when the QP is being destroyed. */
static int await_hello_answer(struct sn_qp *qp, int fd, bool *cma)
{
    for (;;) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int n = poll(&p, 1, 50);
        if (n < 0 && errno != EINTR)
            return errno;
        if (n > 0)
            break;
        pthread_mutex_lock(&qp->lock);
        bool stop = qp->stopping;
        pthread_mutex_unlock(&qp->lock);
        if (stop)
            return ECANCELED;
    }
    struct sn_wire_resp r;
    int err = wire_recv_all(fd, &r, sizeof(r));
    if (err)
        return err;
    if (r.type != SN_RESP_HELLO || r.syndrome > 1)
        return EPROTO;
    *cma = r.syndrome == 1;
    return 0;
}

static int requester_connect(struct sn_qp *qp, struct sn_port *port, union ibv_gid dgid,
                             uint32_t dqpn, uint8_t rnr_retry, bool gpu_driven, int *fd_out, bool *cma)
{
    int fd;
    *cma = false;
    int err = wire_connect(port, &dgid, dqpn, &fd);
    if (err)
        return err;
    struct sn_wire_hello h;
    memset(&h, 0, sizeof(h));
    h.magic = SN_WIRE_MAGIC;
    h.version = SN_WIRE_VERSION;
    h.rnr_retry = rnr_retry;
    h.dst_qpn = dqpn;
    h.src_qpn = qp->ibqp.qp_num;
    memcpy(h.src_gid, port->gid.raw, 16);
    cma_hello_fill(&h);
    if (gpu_driven)
        h.hflags |= SN_HELLO_POLL;
    if ((err = wire_send_all(fd, &h, sizeof(h))) ||
        ((h.hflags & SN_HELLO_CMA) && (err = await_hello_answer(qp, fd, cma)))) {
        close(fd);
        return err;
    }
    *fd_out = fd;
    return 0;
}

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

struct sn_tx_batch {
    int n;
    uint64_t since_ns;   /* when its first WQE was posted (rate.c's credit) */
    bool prepaid;        /* its bytes were charged to the rate limit already (a direct batch) */
    struct sn_swqe w[BATCH_WQES];
    struct sn_wire_req hdr[BATCH_WQES];
    struct sn_wire_atomic atom[BATCH_WQES];
    struct {
        struct sn_wire_cma d;
        struct sn_cma_seg seg[SN_MAX_SGE];
    } cma[BATCH_WQES];
    struct sn_mr *pin[SN_MAX_SGE];   /* the pulled WQE being added's MRs */
    int npin;
    struct iovec iov[BATCH_IOV + SN_MAX_SGE + 1];
    int niov;
    struct sn_mr *refs[BATCH_IOV];
    int nrefs;
    void *bounces[BATCH_WQES * SN_MAX_SGE];
    int nbounces;
    /* CUDA payloads read behind each other (gpu_read_deferred): the first
     * WQE with one not yet landed (-1: none), and where each WQE's iovecs
     * begin, to cut the batch there when the reads fail */
    int gpu_first;
    int iov_at[BATCH_WQES];
};

/* batch_add: WQE i's CUDA payload does not fit behind the batch's deferred
 * reads; send what the batch holds and add WQE i again. */
#define BATCH_STAGE_FULL (-2)

static void batch_release(struct sn_tx_batch *b)
{
    for (int i = 0; i < b->nrefs; i++)
        mr_put(b->refs[i]);
    for (int i = 0; i < b->nbounces; i++)
        free(b->bounces[i]);
    b->nrefs = b->nbounces = b->niov = 0;
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
    return p >= (const char *)b->cma && p < (const char *)(b->cma + BATCH_WQES);
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

/* Charges a pulled payload to the rate limit in pieces of a pace, each one
 * progress for the retry timer, as the wire's pieces are. */
static void charge_pulled(struct sn_qp *qp, struct sn_port *port, uint64_t bytes, uint64_t since_ns)
{
    if (!port->tx_rate.rate)
        return;
    uint64_t pace = pace_bytes(port);
    while (bytes) {
        uint64_t n = bytes < pace ? bytes : pace;
        rate_take(&port->tx_rate, n, since_ns);
        bytes -= n;
        pthread_mutex_lock(&qp->lock);
        qp->last_progress_ns = sn_now_ns();
        pthread_mutex_unlock(&qp->lock);
    }
}

static int batch_flush(struct sn_qp *qp, int fd, struct sn_port *port, struct sn_tx_batch *b)
{
    int err = 0;
    struct iovec *iov = b->iov;
    int left = b->niov;
    size_t pace = pace_bytes(port);
    while (left > 0) {
        /* the next piece: whole iovecs up to a pace, the last payload one
         * cut to fill it (headers are never cut) */
        size_t bytes = 0, payload = 0;
        int n = 0;
        uint64_t pulled = 0;
        for (; n < left && bytes + iov[n].iov_len <= pace; n++) {
            bytes += iov[n].iov_len;
            payload += is_header(b, &iov[n]) ? 0 : iov[n].iov_len;
            pulled += is_cma(b, &iov[n]) ? cma_payload(&iov[n]) : 0;
        }
        struct iovec rest = { NULL, 0 };
        if (n < left && bytes < pace && !is_header(b, &iov[n])) {
            size_t cut = pace - bytes;
            rest.iov_base = (char *)iov[n].iov_base + cut;
            rest.iov_len = iov[n].iov_len - cut;
            iov[n].iov_len = cut;
            payload += cut;
            n++;
        }
        if (!b->prepaid) {
            rate_take(&port->tx_rate, payload, b->since_ns);
            if (pulled)
                charge_pulled(qp, port, pulled, b->since_ns);
        }
        payload += pulled;
        /* counted before the bytes leave: once they are out, the peer may
         * answer and the WQE complete while this thread waits for the CPU,
         * and a completion must find its bytes counted */
        uint8_t tc = atomic_load_explicit(&qp->tc, memory_order_relaxed);
        atomic_fetch_add(&port->cnt.tx_bytes, payload);
        atomic_fetch_add(&port->tc_tx_bytes[tc], payload);
        atomic_fetch_add(&qp->cnt.tx_bytes, payload);
        err = wire_writev_all(fd, iov, n);
        if (err) {
            atomic_fetch_sub(&port->cnt.tx_bytes, payload);
            atomic_fetch_sub(&port->tc_tx_bytes[tc], payload);
            atomic_fetch_sub(&qp->cnt.tx_bytes, payload);
            break;
        }
        iov += n;
        left -= n;
        if (rest.iov_base) {
            iov--;
            left++;
            *iov = rest;
        }
        fault_tx_bytes(qp->dev, port, payload);
        pthread_mutex_lock(&qp->lock);
        qp->last_progress_ns = sn_now_ns();
        pthread_mutex_unlock(&qp->lock);
    }
    batch_release(b);
    return err;
}

/* Adds WQE i's frame to the iovec; on a local key error returns
 * IBV_WC_LOC_PROT_ERR (nothing of WQE i added). */
static int batch_add(struct sn_qp *qp, struct sn_tx_batch *b, int i, uint32_t latency_us, int mtu,
                     bool cma, bool may_defer)
{
    int ret = IBV_WC_LOC_PROT_ERR;
    struct sn_swqe *w = &b->w[i];
    struct sn_wire_req *h = &b->hdr[i];
    memset(h, 0, sizeof(*h));
    h->op = wire_op_of(w->opcode);
    h->flags = (w->send_flags & IBV_SEND_SOLICITED) ? SN_REQ_SOLICITED : 0;
    h->seq = w->seq;
    h->len = w->len;
    h->rkey = w->rkey;
    h->raddr = w->raddr;
    h->imm = w->imm;
    h->deliver_ns = latency_us ? sn_now_ns() + (uint64_t)latency_us * 1000ull : 0;
    int first_ref = b->nrefs, first_bounce = b->nbounces, first_iov = b->niov;
    b->iov[b->niov++] = (struct iovec){ h, sizeof(*h) };
    if (sn_wr_is_atomic(w->opcode)) {
        /* the operands travel with the header; the SGE receives the old value */
        b->atom[i].swap_add = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? w->swap : w->compare_add;
        b->atom[i].compare = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? w->compare_add : 0;
        b->iov[b->niov++] = (struct iovec){ &b->atom[i], sizeof(b->atom[i]) };
    }
    bool read = sn_wr_is_read_like(w->opcode);
    /* same-host peer: a host-memory payload is named, not sent (cma.c) */
    cma = cma && !read && !w->inl && w->len >= SN_CMA_MIN_BYTES;
    struct iovec *desc = NULL;
    b->npin = 0;
    if (cma) {
        b->cma[i].d = (struct sn_wire_cma){ .nseg = 0 };
        desc = &b->iov[b->niov++];
        *desc = (struct iovec){ &b->cma[i], sizeof(b->cma[i].d) };
    }
    if (w->inl) {
        if (w->len)
            b->iov[b->niov++] = (struct iovec){ w->inl, w->len };
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
                b->cma[i].seg[b->cma[i].d.nseg++] =
                    (struct sn_cma_seg){ (uint64_t)(uintptr_t)src, sg->length };
                continue;
            }
            b->refs[b->nrefs++] = mr;
            if (read)
                continue;
            if (cma) {
                /* CUDA memory cannot be pulled by another process: this
                 * WQE goes on the wire after all, its segments so far too */
                for (uint32_t k = 0; k < b->cma[i].d.nseg; k++)
                    b->iov[b->niov++] = (struct iovec){ (void *)(uintptr_t)b->cma[i].seg[k].addr,
                                                        b->cma[i].seg[k].len };
                for (int k = 0; k < b->npin; k++)
                    b->refs[b->nrefs++] = b->pin[k];
                b->npin = 0;
                *desc = (struct iovec){ NULL, 0 };
                cma = false;
            }
            if (mr->gpu && may_defer) {
                /* read behind the batch's other CUDA payloads: one sync for
                 * all of them (batch_send), as a NIC keeps reads in flight */
                const void *staged;
                int r = gpu_read_deferred(src, sg->length, &staged);
                if (r == ENOSPC && b->gpu_first >= 0) {
                    ret = BATCH_STAGE_FULL;
                    goto bad;
                }
                if (r == 0) {
                    if (b->gpu_first < 0)
                        b->gpu_first = i;
                    src = (void *)(uintptr_t)staged;
                } else if (r != ENOSPC) {
                    goto bad;
                }
            }
            if (mr->gpu && src == mr_host_ptr(mr, sg->addr)) {
                /* bigger than the staging buffer, or no deferring: a copy
                 * of its own.  It reuses the stage from its start once it
                 * lands, so nothing of this batch may be deferred here:
                 * may_defer is false only right after batch_send, and
                 * ENOSPC with reads deferred returned BATCH_STAGE_FULL. */
                void *bounce = malloc(sg->length);
                if (!bounce || mr_read(mr, sg->addr, bounce, sg->length)) {
                    free(bounce);
                    goto bad;
                }
                b->bounces[b->nbounces++] = bounce;
                src = bounce;
            }
            b->iov[b->niov++] = (struct iovec){ src, sg->length };
        }
    }
    if (cma) {
        h->flags |= SN_REQ_CMA;
        desc->iov_len = sizeof(b->cma[i].d) + b->cma[i].d.nseg * sizeof(struct sn_cma_seg);
    }
    uint64_t mtu_bytes = 128u << mtu;
    uint64_t pkts = read ? 1 : (w->len + mtu_bytes - 1) / mtu_bytes;
    pkts = pkts ? pkts : 1;
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

int requester_start(struct sn_qp *qp)
{
    int err = 0;
    pthread_mutex_lock(&qp->lock);
    if (!qp->tx_batch && !(qp->tx_batch = calloc(1, sizeof(struct sn_tx_batch))))
        err = ENOMEM;
    if (!err && !qp->req_started) {
        err = pthread_create(&qp->req_thread, NULL, requester_main, qp);
        if (!err)
            qp->req_started = true;
    }
    if (!err && !qp->comp_started) {
        err = pthread_create(&qp->comp_thread, NULL, completer_main, qp);
        if (!err)
            qp->comp_started = true;
    }
    pthread_mutex_unlock(&qp->lock);
    return err;
}

/* True when the WQE at sq_sent is an RDMA READ or atomic and the QP
 * already has max_rd_atomic of them unanswered on the wire: it waits for a
 * response, as a NIC's initiator depth makes it wait.  0 counts as 1, as
 * on a ConnectX (mlx5 programs log2 of the depth: 0 and 1 both give 1).
 * qp->lock held. */
static bool rd_gated_locked(struct sn_qp *qp)
{
    if (qp->sq_sent == qp->sq_tail || !sn_wr_is_read_like(qp->sq[qp->sq_sent % qp->sq_size].opcode))
        return false;
    uint32_t limit = qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1, n = 0;
    for (uint64_t i = qp->sq_head; i < qp->sq_sent && n < limit; i++)
        n += sn_wr_is_read_like(qp->sq[i % qp->sq_size].opcode);
    return n >= limit;
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

/* Lands the batch's deferred CUDA reads, then sends what it holds.  When
 * the reads failed, the batch is cut before the first WQE that had one and
 * *bad names that WQE (it and the rest complete in error).  Returns
 * batch_flush's error. */
static int batch_send(struct sn_qp *qp, int fd, struct sn_port *port, struct sn_tx_batch *b, int *bad)
{
    if (b->gpu_first >= 0) {
        int first = b->gpu_first;
        b->gpu_first = -1;
        if (gpu_flush() != 0) {
            b->niov = b->iov_at[first];
            *bad = first;
        }
    }
    return batch_flush(qp, fd, port, b);
}

/* Takes up to a batch of WQEs from sq_sent and puts them on the wire.
 * Called with qp->lock held and qp->tx_busy set by the caller (the
 * requester thread or a posting thread); returns with the lock held. */
static void transmit_locked(struct sn_qp *qp, struct sn_tx_batch *b)
{
    struct sn_port *port = qp->port;
    uint64_t first = qp->sq_sent;
    uint64_t bytes = 0;
    b->n = 0;
    while (qp->sq_sent < qp->sq_tail && b->n < BATCH_WQES && bytes < BATCH_BYTES &&
           !rd_gated_locked(qp)) {
        struct sn_swqe *w = &qp->sq[qp->sq_sent % qp->sq_size];
        w->seq = qp->next_seq++;
        if (b->n == 0)
            b->since_ns = w->posted_ns;
        b->w[b->n++] = *w;
        qp->sq_sent++;
        if (!sn_wr_is_read_like(w->opcode))
            bytes += w->len;
    }
    sn_stat_add(SN_ST_TX_BATCHES, 1);
    sn_stat_add(SN_ST_TX_WQES, (uint64_t)b->n);
    int fd = qp->out_fd;
    bool cma = qp->cma_ok;
    uint32_t latency = port->conf.latency_us;
    int mtu = qp->attr.path_mtu;
    pthread_mutex_unlock(&qp->lock);

    int err = 0, bad = -1;
    b->gpu_first = -1;
    for (int i = 0; i < b->n && !err && bad < 0; i++) {
        if (b->niov + SN_MAX_SGE + 1 > BATCH_IOV && (err = batch_send(qp, fd, port, b, &bad)))
            break;
        if (bad >= 0)
            break;
        b->iov_at[i] = b->niov;
        int r = batch_add(qp, b, i, latency, mtu, cma, true);
        if (r == BATCH_STAGE_FULL) {
            if ((err = batch_send(qp, fd, port, b, &bad)) || bad >= 0)
                break;
            b->iov_at[i] = b->niov;
            r = batch_add(qp, b, i, latency, mtu, cma, false);
        }
        if (r) {
            bad = i;
            break;
        }
        if (b->npin)
            pin_pulled(qp, first + (uint64_t)i, &b->w[i], b);
    }
    if (!err) {
        int cut = -1;
        err = batch_send(qp, fd, port, b, &cut);
        if (cut >= 0 && (bad < 0 || cut < bad))
            bad = cut;
    }
    batch_release(b);
    pthread_mutex_lock(&qp->lock);
    if (bad >= 0)
        qp_error_locked(qp, first + (uint64_t)bad, IBV_WC_LOC_PROT_ERR, 0);
    else if (err) {
        qp->conn_dead = true;
        pthread_cond_broadcast(&qp->cond);
    }
}

/* Where WQE w's payload is: SN_MEM_HOST when all in host memory,
 * SN_MEM_CUDA when some is CUDA memory (copied through a bounce buffer),
 * SN_MEM_UNKNOWN for a bad key, or a key table being changed (mr_mem_try:
 * never waited for with qp->lock held): the requester thread then takes
 * the WQE.  The MR may go before the transmit looks it up again; batch_add
 * then completes the WQE in error, as it would on the requester thread. */
static enum sn_mem payload_memory(struct sn_qp *qp, const struct sn_swqe *w)
{
    enum sn_mem all = SN_MEM_HOST;
    for (int s = 0; s < w->num_sge; s++) {
        const struct ibv_sge *sg = &w->sge[s];
        if (!sg->length)
            continue;
        enum sn_mem m = mr_mem_try(sg->lkey, qp->ibqp.pd, sg->addr, sg->length);
        if (m == SN_MEM_UNKNOWN)
            return SN_MEM_UNKNOWN;
        if (m == SN_MEM_CUDA)
            all = SN_MEM_CUDA;
    }
    return all;
}

/* requester_direct_copies_cuda: whether this thread's posts may copy CUDA
 * payloads themselves. */
static __thread bool direct_copies_cuda;

void requester_direct_copies_cuda(bool on)
{
    direct_copies_cuda = on;
}

/* Whether a direct batch (a few KiB) can be written to out_fd without
 * waiting: a connection whose peer reads nothing (a responder held in an
 * RNR wait, a stopped or slow process) fills, and sendmsg would wait for
 * room where a NIC's post returns at once.  What the peer has not yet
 * acknowledged -- requests it may not have read -- bounds what the
 * connection holds; with at most a few of them, 16 KiB on the wire, the
 * socket buffers (16 KiB to send, 128 KiB to receive by default) have room
 * for a direct batch (at most 4 KiB by pointer and DIRECT_MAX_WQES inline
 * payloads of SN_MAX_INLINE: 12 KiB and headers).  No system call: poll()
 * for POLLOUT would cost one per post, and says only that half the send
 * buffer is free.  qp->lock held. */
static bool wire_has_room_locked(struct sn_qp *qp)
{
    if (qp->sq_sent - qp->sq_head > DIRECT_MAX_UNACKED_WQES)
        return false;
    uint64_t bytes = 0;
    for (uint64_t i = qp->sq_head; i < qp->sq_sent; i++) {
        const struct sn_swqe *w = &qp->sq[i % qp->sq_size];
        bytes += sizeof(struct sn_wire_req);
        if (!sn_wr_is_read_like(w->opcode) && !w->npin)   /* pinned: pulled, not sent */
            bytes += w->len;
    }
    return bytes <= DIRECT_MAX_UNACKED_BYTES;
}

/* The posting thread may transmit itself when the requester has nothing
 * in hand and what the new WQEs put on the wire is small: inline data, a
 * small payload in host memory, or only the descriptor of one the
 * same-host peer pulls (cma.c); a small CUDA payload too when the poster is
 * a NIC thread (requester_direct_copies_cuda).  This spares one thread wake-up per
 * message, which on a VM is most of a message's latency (a NIC reads the
 * WQE as the doorbell rings, too).  On a paced port only a few KiB, and
 * only while the line is free (rate_take_if_idle: no sleeping here).
 * Everything else -- connecting, a busy paced line, added latency, faults,
 * reads and atomics, CUDA memory posted by an application thread, large
 * payloads on the wire, a connection without room -- stays with the
 * requester thread.  qp->lock held. */
bool requester_try_direct_locked(struct sn_qp *qp)
{
    struct sn_port *port = qp->port;
    if (qp->tx_busy || !qp->tx_batch || qp->stopping || qp->attr.qp_state != IBV_QPS_RTS ||
        qp->out_fd < 0 || qp->conn_dead || !port || port->conf.latency_us ||
        port->conf.down_after_bytes || atomic_load(&port->state) != IBV_PORT_ACTIVE ||
        qp->sq_tail - qp->sq_sent > DIRECT_MAX_WQES)
        return false;
    if (qp->sq_sent == qp->sq_tail)
        return true;
    if (!wire_has_room_locked(qp))   /* before any key lookup: the cheaper refusal */
        return false;
    uint32_t bytes = 0;
    uint64_t charged = 0;   /* what the rate limit counts: payloads, pulled or sent */
    for (uint64_t i = qp->sq_sent; i < qp->sq_tail; i++) {
        const struct sn_swqe *w = &qp->sq[i % qp->sq_size];
        if (sn_wr_is_read_like(w->opcode))
            return false;
        charged += w->len;
        if (w->len && !w->inl) {
            enum sn_mem m = payload_memory(qp, w);
            /* A NIC thread copies a CUDA payload only on an idle QP (one
             * message at a time: the wake-up it saves is that message's
             * latency); with WQEs in flight the requester thread's copies
             * overlap the NIC thread's doorbell work instead. */
            if (m == SN_MEM_UNKNOWN ||
                (m == SN_MEM_CUDA && (!direct_copies_cuda || qp->sq_sent != qp->sq_head)))
                return false;
            /* a pulled payload leaves as its descriptor; a CUDA one goes on
             * the wire (another process cannot pull GPU memory) */
            if (m == SN_MEM_HOST && qp->cma_ok && w->len >= SN_CMA_MIN_BYTES) {
                bytes += (uint32_t)(sizeof(struct sn_wire_cma) +
                                    (size_t)w->num_sge * sizeof(struct sn_cma_seg));
                continue;
            }
        }
        if (!w->inl)
            bytes += w->len;
        if (bytes > DIRECT_MAX_BYTES)
            return false;
    }
    if (bytes > DIRECT_MAX_BYTES)
        return false;
    /* a paced port: a few KiB on a free line go now, without sleeping
     * (a pulled payload moves at copy speed, so only small ones); a busy
     * line, or more, waits for the requester thread's pacing */
    if (port->tx_rate.rate && (charged > DIRECT_MAX_BYTES ||
                               !rate_take_if_idle(&port->tx_rate, charged,
                                                  qp->sq[qp->sq_sent % qp->sq_size].posted_ns)))
        return false;
    atomic_fetch_add(&qp->cnt.direct_wqes, qp->sq_tail - qp->sq_sent);
    qp->tx_busy = true;
    /* charged above, or nothing to charge: batch_flush must never sleep
     * here, also when a rate is set between the check and the flush */
    qp->tx_batch->prepaid = true;
    transmit_locked(qp, qp->tx_batch);
    qp->tx_batch->prepaid = false;
    qp->tx_busy = false;
    if (qp->stopping)
        pthread_cond_broadcast(&qp->cond);   /* qp_engine_stop waits to close the fd */
    if (qp->sq_sent != qp->sq_tail)
        pthread_cond_signal(&qp->req_cond);
    return true;
}

void *requester_main(void *arg)
{
    struct sn_qp *qp = arg;
    bool spin = sn_spin_on(), spun = false;
    sn_nic_thread_init();
    sn_stats_role(SN_ROLE_REQUESTER);
    pthread_mutex_lock(&qp->lock);
    while (!qp->stopping) {
        enum ibv_qp_state st = qp->attr.qp_state;
        struct sn_port *port = qp->port;
        if (st != IBV_QPS_RTS || qp->sq_sent == qp->sq_tail || qp->conn_dead || !port || qp->tx_busy ||
            !qp->tx_batch || rd_gated_locked(qp)) {
            if (spin && !spun && st == IBV_QPS_RTS && qp->sq_sent == qp->sq_tail && !qp->conn_dead && port &&
                !qp->tx_busy) {
                /* out of work: poll for the next post a while (spin.c).  A
                 * signal sent while the lock was dropped is lost, so the
                 * state is read again before any wait; the next idle pass
                 * sleeps. */
                uint64_t seen = qp->sq_tail;
                pthread_mutex_unlock(&qp->lock);
                (void)sn_spin_changed(&qp->sq_tail, seen, &qp->stopping);
                pthread_mutex_lock(&qp->lock);
                spun = true;
                continue;
            }
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 100000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&qp->req_cond, &qp->lock, &ts);
            continue;
        }
        spun = false;
        if (atomic_load(&port->state) != IBV_PORT_ACTIVE) {
            /* link down: nothing leaves; the completer's budget runs */
            pthread_mutex_unlock(&qp->lock);
            usleep(2000);
            fault_poll();
            pthread_mutex_lock(&qp->lock);
            continue;
        }
        if (qp->out_fd < 0) {
            union ibv_gid dgid = qp->attr.ah_attr.grh.dgid;
            uint32_t dqpn = qp->attr.dest_qp_num;
            uint8_t rnr = qp->attr.rnr_retry;
            bool gpu_driven = qp->poll_acks;
            pthread_mutex_unlock(&qp->lock);
            int fd = -1;
            bool cma = false;
            int err = requester_connect(qp, port, dgid, dqpn, rnr, gpu_driven, &fd, &cma);
            pthread_mutex_lock(&qp->lock);
            if (qp->stopping) {
                if (fd >= 0)
                    close(fd);
                break;
            }
            if (err) {
                qp->conn_dead = true;
            } else {
                qp->out_fd = fd;
                qp->cma_ok = cma;
                qp->last_progress_ns = sn_now_ns();   /* the timer starts now */
            }
            pthread_cond_broadcast(&qp->cond);
            continue;
        }
        qp->tx_busy = true;
        transmit_locked(qp, qp->tx_batch);
        qp->tx_busy = false;
    }
    pthread_mutex_unlock(&qp->lock);
    return NULL;
}
