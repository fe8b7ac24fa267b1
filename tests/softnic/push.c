/* push.c: the same-host push.  A small RDMA WRITE (at most
 * SN_PUSH_MAX_BYTES, with or without an immediate) to a same-host peer is
 * placed by the posting thread itself (through the peer's /proc/<pid>/mem,
 * or process_vm_writev: peer_write), as a NIC
 * places a write without the responder's CPU; the responder's NIC thread
 * never wakes for it and no ACK travels.  A WRITE_WITH_IMM's receive
 * completion is made by the receiver's own poll (below).  Without it every small write costs both processes' NIC
 * threads a wake-up and a socket round trip, several times what the write
 * moves: NCCL's clear-to-send rows, 64-256 bytes per message, cost as much
 * NIC-thread time as the message itself, which a ConnectX does not.
 *
 * The responder's side: a shared region (a memfd, one per process) that
 * publishes what a write needs checked -- its host memory regions by key
 * (address, length, access, PD) and, per QP it offered the push to, the
 * QP's state, access flags, PD and port state.  It offers the push in its
 * answer to a hello that asked for it (connect.c, rconn.c), only after
 * it accepted the requester for the fast path (cma.c).
 *
 * The requester's side: it checks that the offered pid owns the other end
 * of its very socket (cma_check_peer, the same proof the responder asks),
 * maps the region through /proc/<pid>/fd (only a memfd of that name: not
 * some other file the peer holds open), and then pushes a
 * write only when every check passes: its send queue holds nothing before
 * it (RC's order: all earlier WQEs are acknowledged, so placed), the QP
 * and its port are plain (no rate, latency or faults), the key names a
 * host region of the QP's PD with remote write, in bounds, the QP is
 * ready to receive and its port up.  Anything else goes on the wire, which
 * gives the answer a NIC would (an access error, a retry).
 *
 * A SEND of at most SOFTNIC_PUSH_INLINE bytes (SOFTNIC_PUSH_SEND) goes the
 * way of a small WRITE_WITH_IMM: its bytes ride in the record of the
 * receive it takes, and the receiver's poll copies them into that
 * receive's buffer before it makes the completion.  The receiver shows,
 * per receive index in its records' window, the receive's one scatter
 * entry (a receive of several entries shows none: only an empty SEND takes
 * it), and the pusher takes a receive only when the SEND fits it and its
 * key names a region of the QP's PD with local write (else the wire
 * answers: a length error, a protection error).
 *
 * Races: a pusher counts itself on the QP slot and on the region entry
 * before it reads them, and a deregistration clears the key before it
 * waits for that count to fall (both sequentially consistent), so no push
 * lands after ibv_dereg_mr returns; a QP leaving RTR/RTS/SQD likewise
 * stops new pushes and waits for those under way, as ibv_modify_qp(ERR)
 * waits for placements.  The poster lets go of its QP's lock while it
 * copies, holding tx_busy as a direct transmission does. */
#include "softnic.h"
#include "../../plugin/ib/memfd.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "push_region.h"

/* A record's header as read once: every check and the copy use this,
 * never the record again (its writer is a peer, who may change it under
 * the reader). */
struct rec_view {
    uint64_t seq, raddr;
    uint32_t op, len, rkey, imm, solicited;
};

static void rec_read(const struct push_rec *rec, struct rec_view *v)
{
    v->seq = atomic_load_explicit(&rec->seq, memory_order_acquire);
    v->op = __atomic_load_n(&rec->op, __ATOMIC_RELAXED);
    v->len = __atomic_load_n(&rec->len, __ATOMIC_RELAXED);
    v->rkey = __atomic_load_n(&rec->rkey, __ATOMIC_RELAXED);
    v->raddr = __atomic_load_n(&rec->raddr, __ATOMIC_RELAXED);
    v->imm = __atomic_load_n(&rec->imm, __ATOMIC_RELAXED);
    v->solicited = __atomic_load_n(&rec->solicited, __ATOMIC_RELAXED);
}

static bool rec_is_send(const struct rec_view *v)
{
    return v->op == REC_OP_SEND || v->op == REC_OP_SEND_IMM;
}


/* ------------------------------------------------------- the responder */
/* What a slot's QP showed and is, in this process's own memory: peers
 * write the region, so a record is checked against this, never against
 * the region's copy.  shown[k] is written with the region's rwqe[k]
 * (seq last, as there); pd is the QP's. */
struct slot_own {
    _Atomic uintptr_t pd;
    struct push_rwqe shown[PUSH_RECS];
};

static struct {
    pthread_mutex_t lock;        /* the region's creation, slot allocation */
    struct push_region *r;       /* NULL: none (yet, off, or memfd failed) */
    uint32_t pid;                /* the process that made it: a forked child makes its own */
    bool tried;
    int fd;
    _Atomic uint32_t hi;         /* slots below it were ever used: a deregistration's walk */
    uint32_t gen[PUSH_QP_SLOTS];
    bool used[PUSH_QP_SLOTS];
    struct slot_own *own[PUSH_QP_SLOTS];   /* made with the slot's first use, kept for its next QPs */
} me = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

#define REGION_NAME "softnic-push"

/* This process's pid, without a system call on every push and poll (a
 * forked child finds 0 and asks once). */
static _Atomic uint32_t self_pid_cache;
static pthread_once_t self_pid_once = PTHREAD_ONCE_INIT;

static void self_pid_child(void)
{
    atomic_store(&self_pid_cache, 0);
}

static void self_pid_init(void)
{
    pthread_atfork(NULL, NULL, self_pid_child);
}

static uint32_t self_pid(void)
{
    uint32_t pid = atomic_load_explicit(&self_pid_cache, memory_order_relaxed);
    if (!pid) {
        pthread_once(&self_pid_once, self_pid_init);
        pid = (uint32_t)getpid();
        atomic_store(&self_pid_cache, pid);
    }
    return pid;
}

/* me.lock held */
static void region_create_locked(void)
{
    uint32_t pid = self_pid();
    if (me.tried && me.pid == pid)
        return;
    if (me.r) {   /* the parent's, inherited across fork: its keys are not ours */
        munmap(me.r, sizeof(*me.r));
        close(me.fd);
        me.fd = -1;
        memset(me.used, 0, sizeof(me.used));
        __atomic_store_n(&me.r, NULL, __ATOMIC_RELEASE);
    }
    me.tried = true;
    me.pid = pid;
    if (!softnic_global()->conf.push || !softnic_global()->conf.fastpath)
        return;
    int fd = rn_memfd_create(REGION_NAME, MFD_CLOEXEC);
    if (fd < 0) {
        SN_DEBUG("push: no memfd for the shared region (%s): small writes on the wire", strerror(errno));
        return;
    }
    void *p = MAP_FAILED;
    if (ftruncate(fd, sizeof(struct push_region)) == 0)
        p = mmap(NULL, sizeof(struct push_region), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        SN_DEBUG("push: no shared region (%s): small writes on the wire", strerror(errno));
        close(fd);
        return;
    }
    struct push_region *r = p;
    r->magic = PUSH_MAGIC;
    r->version = PUSH_VERSION;
    r->pid = (uint32_t)getpid();
    me.fd = fd;
    __atomic_store_n(&me.r, r, __ATOMIC_RELEASE);
}

/* The region if this process made one already (none made here). */
static struct push_region *made(void)
{
    struct push_region *r = __atomic_load_n(&me.r, __ATOMIC_ACQUIRE);
    return r && me.pid == self_pid() ? r : NULL;
}

static struct push_region *region(void)
{
    struct push_region *r = __atomic_load_n(&me.r, __ATOMIC_ACQUIRE);
    if (r && me.pid == self_pid())
        return r;
    pthread_mutex_lock(&me.lock);
    region_create_locked();
    r = me.r;
    pthread_mutex_unlock(&me.lock);
    return r;
}

/* Waits for the pushes under way on a slot or entry to end. */
static void drain(_Atomic uint32_t *pushers)
{
    uint64_t until = sn_now_ns() + PUSH_DRAIN_NS;
    while (pushers_busy(pushers)) {
        if (sn_now_ns() > until) {
            SN_LOG("push: a peer's push did not end within 1 s (the peer stopped in it?): going on");
            pushers_reset(pushers);
            return;
        }
        usleep(20);
    }
}

void push_mr_publish(struct sn_mr *mr)
{
    struct push_region *r = region();
    uint32_t key = mr->ibmr.rkey, idx = key >> 8;
    /* remote write for pushed writes, local write for the receives of
     * pushed SENDs (claim_send) */
    if (!r || idx >= PUSH_MR_SLOTS || mr->gpu || !(mr->access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE)))
        return;
    if (!mr->shared && softnic_global()->conf.push_shared)
        mr->shared = share_find(mr->base, mr->len, &mr->share);
    struct push_mr *e = &r->mr[idx];
    e->share_fd = mr->shared ? (uint32_t)mr->share.fd : NO_SHARE;
    e->share_dev = mr->shared ? mr->share.dev : 0;
    e->share_ino = mr->shared ? mr->share.ino : 0;
    e->share_off = mr->shared ? mr->share.off : 0;
    e->access = (uint32_t)mr->access;
    e->iova = mr->iova;
    e->base = (uint64_t)(uintptr_t)mr->base;
    e->len = mr->len;
    e->pd = (uint64_t)(uintptr_t)mr->ibmr.pd;
    atomic_store(&e->key, key);   /* the fields first: a pusher reads the key, then them */
}

static void land_slot(uint32_t slot, const struct sn_mr *mr);

void push_mr_withdraw(struct sn_mr *mr)
{
    struct push_region *r = region();
    uint32_t key = mr->ibmr.rkey, idx = key >> 8;
    struct push_mr *e = r && idx < PUSH_MR_SLOTS ? &r->mr[idx] : NULL;
    uint32_t k = key;
    if (!e || !atomic_compare_exchange_strong(&e->key, &k, 0))
        return;   /* never published (GPU memory, no remote write) */
    drain(&e->pushers);
    /* what waits in records lands now, as a NIC had placed it at arrival */
    uint32_t hi = atomic_load(&me.hi);
    for (uint32_t i = 0; i < hi; i++)
        if (__atomic_load_n(&me.used[i], __ATOMIC_RELAXED))
            land_slot(i, mr);
}

void push_port_update(const struct sn_device *d, const struct sn_port *port)
{
    struct push_region *r = made();   /* none yet: set at the offer */
    if (!r || d->index < 0 || d->index >= SN_MAX_DEVICES || port->num < 1 || port->num > SN_MAX_PORTS)
        return;
    atomic_store(&r->port_up[d->index][port->num - 1], atomic_load(&port->state) == IBV_PORT_ACTIVE);
}

/* ---------------------------------------- WRITE_WITH_IMM, the receiver */
/* A pusher places the data, takes the QP's next receive index with a
 * compare-and-swap on rq_taken (below rq_posted, and within PUSH_RECS of
 * rq_done) and writes the record of that index.  The receiver turns
 * records into completions, in index order, with the receive WQEs from
 * the head of its RQ: in its recv CQ's polls (push_cq_collect), before its
 * engine takes a receive, after the engine's own completion of an earlier
 * index, and before a flush.
 * Order: a pusher pushes only with its send queue empty (every earlier
 * request acknowledged), and sends nothing while it pushes, so when the
 * engine takes index k for a request on the wire every pushed index below
 * k already has its record; the engine's completion of k appears after
 * its ACK, when a later push may have recorded k + 1: a record waits for
 * rx_next to reach it. */

static struct push_qp *my_slot(const struct sn_qp *qp)
{
    struct push_region *r = made();
    return r && qp->push_slot >= 0 ? &r->qp[qp->push_slot] : NULL;
}

/* Writes receive w into e as a pushed SEND sees it (struct push_rwqe),
 * seq last. */
static void rwqe_put(struct push_rwqe *e, const struct sn_rwqe *w, uint64_t seq)
{
    bool one = w->num_sge == 1;
    atomic_store_explicit(&e->seq, 0, memory_order_relaxed);
    atomic_store_explicit(&e->addr, one ? w->sge[0].addr : 0, memory_order_relaxed);
    atomic_store_explicit(&e->len, one ? w->sge[0].length : 0, memory_order_relaxed);
    atomic_store_explicit(&e->lkey, one ? w->sge[0].lkey : 0, memory_order_relaxed);
    atomic_store_explicit(&e->seq, seq, memory_order_release);
}

/* Shows pushers the receives a pushed SEND may take: those posted, not
 * taken yet, within PUSH_RECS of the oldest without its completion (the
 * records' window); qp->lock held, with the receive queue and rx_next
 * moved and before rq_posted or rq_done does, so that a pusher finding a
 * receive posted and in the window finds it shown. */
static void rwqe_show_locked(struct sn_qp *qp)
{
    struct push_qp *s = my_slot(qp);
    /* a receive not shown is never taken by a pushed SEND: the receiver's
     * SOFTNIC_PUSH_SEND=0 keeps its peers' SENDs on the wire */
    if (!s || !atomic_load_explicit(&s->imm_ok, memory_order_relaxed) || !softnic_global()->conf.push_send)
        return;
    uint64_t end = qp->rx_popped + qp->rq_count, lim = qp->rx_next + PUSH_RECS;
    uint64_t n = qp->rx_pub > qp->rx_popped ? qp->rx_pub : qp->rx_popped;
    if (end > lim)
        end = lim;
    uint32_t gen = me.gen[qp->push_slot];
    struct slot_own *own = me.own[qp->push_slot];
    for (; n < end; n++) {
        const struct sn_rwqe *w = &qp->rq[(qp->rq_head + (n - qp->rx_popped)) % qp->rq_size];
        rwqe_put(&own->shown[n % PUSH_RECS], w, tag(gen, n + 1));
        rwqe_put(&s->rwqe[n % PUSH_RECS], w, tag(gen, n + 1));
    }
    if (n > qp->rx_pub)
        qp->rx_pub = n;
}

/* Whether a pushed completion can be made for qp: its own RQ, an RC QP,
 * and a recv CQ the application polls (no channel to signal, no mlx5
 * layer writing it elsewhere). */
static bool imm_ok_locked(const struct sn_qp *qp)
{
    const struct sn_cq *cq = (const struct sn_cq *)qp->ibqp.recv_cq;
    return !qp->ibqp.srq && qp->rq && qp->ibqp.qp_type == IBV_QPT_RC && cq && !cq->ibcq.channel && !cq->hook;
}

/* The slots a poll of a CQ of a few pushed-into QPs looks at before it
 * takes the list's lock (push_cq_collect); cq->push_lock held.  Slots stay
 * mapped for the process's life, so a poll that reads a stale entry reads
 * a record of no interest, never freed memory. */
static void cq_watch_locked(struct sn_cq *cq)
{
    int i = 0;
    for (struct sn_qp *q = atomic_load(&cq->push_qps); q && i < SN_PUSH_WATCH; q = q->push_cq_next)
        if (q->push_slot >= 0)
            atomic_store_explicit(&cq->push_watch[i++], q->push_slot + 1, memory_order_relaxed);
    while (i < SN_PUSH_WATCH)
        atomic_store_explicit(&cq->push_watch[i++], 0, memory_order_relaxed);
}

static void cq_list(struct sn_qp *qp)
{
    struct sn_cq *cq = (struct sn_cq *)qp->ibqp.recv_cq;
    pthread_mutex_lock(&cq->push_lock);
    if (!qp->push_cq_listed) {
        qp->push_cq_next = atomic_load(&cq->push_qps);
        atomic_store(&cq->push_qps, qp);
        qp->push_cq_listed = true;
        atomic_fetch_add(&cq->push_nqps, 1);
        cq_watch_locked(cq);
    }
    pthread_mutex_unlock(&cq->push_lock);
}

static void cq_unlist(struct sn_qp *qp)
{
    if (!qp->push_cq_listed)
        return;
    struct sn_cq *cq = (struct sn_cq *)qp->ibqp.recv_cq;
    pthread_mutex_lock(&cq->push_lock);
    struct sn_qp *head = atomic_load(&cq->push_qps);
    if (head == qp) {
        atomic_store(&cq->push_qps, qp->push_cq_next);
    } else {
        for (struct sn_qp *q = head; q; q = q->push_cq_next)
            if (q->push_cq_next == qp) {
                q->push_cq_next = qp->push_cq_next;
                break;
            }
    }
    qp->push_cq_listed = false;
    atomic_fetch_sub(&cq->push_nqps, 1);
    cq_watch_locked(cq);
    pthread_mutex_unlock(&cq->push_lock);
}

/* A fresh slot: the receives in the RQ now are indices 0 on. */
static void rx_slot_start_locked(struct sn_qp *qp, struct push_qp *s)
{
    for (uint32_t i = 0; i < PUSH_RECS; i++) {
        atomic_store(&s->rec[i].seq, 0);
        atomic_store(&s->rec[i].landed, REC_LANDED);
    }
    atomic_store(&s->rq_taken, tag(me.gen[qp->push_slot], 0));
    atomic_store(&s->rq_done, 0);
    atomic_store(&s->wire_acked, 0);
    atomic_store(&s->note_polled, 0);
    atomic_store(&s->rq_posted, qp->rq_count);
    struct slot_own *own = me.own[qp->push_slot];
    atomic_store(&own->pd, (uintptr_t)qp->ibqp.pd);
    for (uint32_t i = 0; i < PUSH_RECS; i++) {
        atomic_store(&s->rwqe[i].seq, 0);
        atomic_store(&own->shown[i].seq, 0);
    }
    qp->rx_next = qp->rx_popped = qp->rx_pub = 0;
    memset(qp->rx_done_bits, 0, sizeof(qp->rx_done_bits));
    qp->rx_flush_deferred = false;
    bool ok = imm_ok_locked(qp) && softnic_global()->conf.push_imm;
    if (ok)
        cq_list(qp);
    atomic_store(&s->imm_ok, ok ? 1u : 0u);
    rwqe_show_locked(qp);
}

void push_rq_posted_locked(struct sn_qp *qp, uint32_t n)
{
    struct push_qp *s = my_slot(qp);
    if (!s || !n)
        return;
    /* the receive shown before it counts as posted: a pusher that finds
     * it posted finds it shown */
    rwqe_show_locked(qp);
    /* its only writer (the QP's lock): no locked add */
    atomic_store_explicit(&s->rq_posted, atomic_load_explicit(&s->rq_posted, memory_order_relaxed) + n,
                          memory_order_release);
}

/* Copies a record's waiting bytes into mr, the region of the key they
 * name (its table entry maybe gone already), at the place v says: false
 * when they do not fit it.  The caller moved landed to REC_COPYING. */
static bool land_copy(const struct push_rec *rec, const struct rec_view *v, const struct sn_mr *mr)
{
    uint32_t len = v->len;
    uint64_t raddr = v->raddr;
    if (len > SN_PUSH_INLINE_MAX || raddr < mr->iova || len > mr->len || raddr - mr->iova > mr->len - len)
        return false;
    return mr_write((struct sn_mr *)mr, raddr, rec->data, len) == 0;
}

/* A SEND record's bytes go only into the receive it completes, as its QP
 * showed it: record k of the slot holds receive v's index, whose entry
 * this process keeps itself (the region's copy is the peers' to write). */
static bool send_fits_shown(uint32_t slot, uint32_t k, const struct rec_view *v)
{
    const struct slot_own *own = me.own[slot];
    if (!own || !v->seq || v->len > SN_PUSH_INLINE_MAX)
        return false;
    const struct push_rwqe *e = &own->shown[k];
    uint64_t seq = atomic_load_explicit(&e->seq, memory_order_acquire);
    uint64_t addr = atomic_load_explicit(&e->addr, memory_order_relaxed);
    uint32_t len = atomic_load_explicit(&e->len, memory_order_relaxed);
    uint32_t lkey = atomic_load_explicit(&e->lkey, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    return seq == v->seq && atomic_load_explicit(&e->seq, memory_order_relaxed) == seq &&
           (v->len == 0 || (lkey && v->rkey == lkey && v->raddr == addr && v->len <= len));
}

/* Record k of slot, still waiting: its header in v, and whether its
 * bytes may land where it says without a completion that checks them: a
 * SEND's into the receive it completes, a write's where remote writes
 * may reach (remote_ok: the region in hand allows them, or mr_get's
 * checks follow). */
static bool rec_landable(uint32_t slot, uint32_t k, struct push_rec *rec, bool remote_ok, struct rec_view *v)
{
    if (atomic_load_explicit(&rec->landed, memory_order_acquire) != REC_WAITING)
        return false;
    rec_read(rec, v);
    return v->seq && v->seq >> TAG_SHIFT == (me.gen[slot] & 0xffffffu) &&
           (rec_is_send(v) ? send_fits_shown(slot, k, v) : v->op == REC_OP_WRITE_IMM && remote_ok);
}

/* A deregistration's walk: lands the bytes that wait in a slot's records
 * for mr's key, where the slot's QP could have had them: a write's into
 * a region of its PD that remote writes may reach, a SEND's into the
 * receive it completes.  A poll of the slot's QP may complete them
 * meanwhile: each is claimed by a compare-and-swap, and one whose
 * position was completed and taken again since its seq was read is left
 * to its own. */
static void land_slot(uint32_t slot, const struct sn_mr *mr)
{
    struct push_qp *s = &me.r->qp[slot];
    const struct slot_own *own = me.own[slot];
    if (!own || atomic_load(&own->pd) != (uintptr_t)mr->ibmr.pd)
        return;
    for (uint32_t k = 0; k < PUSH_RECS; k++) {
        struct push_rec *rec = &s->rec[k];
        struct rec_view v;
        uint32_t st = REC_WAITING;
        if (!rec_landable(slot, k, rec, mr->access & IBV_ACCESS_REMOTE_WRITE, &v) || v.rkey != mr->ibmr.rkey ||
            !atomic_compare_exchange_strong(&rec->landed, &st, REC_COPYING))
            continue;
        bool same = atomic_load(&rec->seq) == v.seq;
        if (same && !land_copy(rec, &v, mr))
            SN_LOG("push: slot %u: %u bytes pushed to key 0x%x at 0x%llx do not fit it: dropped", slot, v.len,
                   v.rkey, (unsigned long long)v.raddr);
        atomic_store_explicit(&rec->landed, same ? REC_LANDED : REC_WAITING, memory_order_release);
    }
}

/* Puts a record's waiting bytes where v (its header, checked by the
 * caller) says, before its completion is made, or its QP is released
 * (qp->lock held): false when they cannot be (the completion fails).
 * The region's reference is taken before the record is claimed, so a
 * deregistration waits for the copy and a re-registration's walk never
 * finds the record claimed. */
static bool land_locked(struct sn_qp *qp, struct push_rec *rec, const struct rec_view *v)
{
    if (atomic_load_explicit(&rec->landed, memory_order_acquire) == REC_LANDED)
        return true;
    struct sn_mr *mr;
    bool write = v->op == REC_OP_WRITE_IMM;
    int err = mr_get(v->rkey, write, qp->ibqp.pd, write ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_LOCAL_WRITE,
                     v->raddr, v->len, &mr);
    if (err) {
        /* its region left the key table (a deregistration's walk, which
         * follows, lands them: after a push under way, at most its
         * drain's timeout) or changed (a re-registration's walk landed
         * them); any other refusal of a record still waiting fails it,
         * and so does an unknown key no deregistration is taking away */
        uint64_t until = sn_now_ns() + 2 * PUSH_DRAIN_NS;
        for (;;) {
            uint32_t st = atomic_load_explicit(&rec->landed, memory_order_acquire);
            if (st == REC_LANDED)
                return true;
            if (st == REC_WAITING &&
                (err != EINVAL || !atomic_load_explicit(&sn_mr_withdrawing, memory_order_acquire)))
                /* a walk that ended between the two loads landed it first */
                return atomic_load_explicit(&rec->landed, memory_order_acquire) == REC_LANDED;
            if (sn_now_ns() > until)
                return false;
            sched_yield();
        }
    }
    bool ok = true;
    for (;;) {
        uint32_t st = REC_WAITING;
        if (atomic_compare_exchange_strong(&rec->landed, &st, REC_COPYING)) {
            ok = land_copy(rec, v, mr);
            atomic_store_explicit(&rec->landed, REC_LANDED, memory_order_release);
            break;
        }
        if (st == REC_LANDED)
            break;
        sched_yield();   /* a walk copies it: the region's reference held here keeps it */
    }
    mr_put(mr);
    return ok;
}

/* A record whose bytes will never land (a failed completion, a released
 * QP): what it carries is dropped, never landed by a later walk. */
static void rec_drop(struct push_rec *rec)
{
    uint32_t st = REC_WAITING;
    atomic_compare_exchange_strong(&rec->landed, &st, REC_LANDED);
}

int push_rx_collect_locked(struct sn_qp *qp)
{
    struct push_qp *s = my_slot(qp);
    int n = 0;
    while (s && qp->rx_next == qp->rx_popped && qp->rq_count) {
        struct push_rec *rec = &s->rec[qp->rx_next % PUSH_RECS];
        if (atomic_load_explicit(&rec->seq, memory_order_acquire) != tag(me.gen[qp->push_slot], qp->rx_next + 1))
            break;
        struct ibv_wc wc;
        memset(&wc, 0, sizeof(wc));
        struct sn_rwqe r = qp_rq_pop_locked(qp);
        wc.wr_id = r.wr_id;
        /* the peer wrote the record: a length or request no push can have
         * is a failed receive, never a size the application would trust;
         * a SEND's bytes go into this receive's entry, nowhere else */
        struct rec_view v;
        rec_read(rec, &v);
        uint32_t len = v.len, op = v.op;
        bool send = rec_is_send(&v);
        bool ok = (op == REC_OP_WRITE_IMM && len <= SN_PUSH_MAX_BYTES) ||
                  (send && len <= SN_PUSH_INLINE_MAX &&
                   (!len || (r.num_sge == 1 && v.rkey == r.sge[0].lkey && v.raddr == r.sge[0].addr &&
                             len <= r.sge[0].length)));
        ok = ok && land_locked(qp, rec, &v);
        if (!ok)
            rec_drop(rec);
        wc.opcode = send ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM;
        wc.status = ok ? IBV_WC_SUCCESS : send ? IBV_WC_LOC_PROT_ERR : IBV_WC_GENERAL_ERR;
        wc.byte_len = ok ? len : 0;
        wc.qp_num = qp->ibqp.qp_num;
        wc.src_qp = qp->attr.dest_qp_num;
        if (op != REC_OP_SEND) {
            wc.wc_flags = IBV_WC_WITH_IMM;
            wc.imm_data = v.imm;
        }
        bool solicited = v.solicited != 0;
        qp->rx_popped++;
        __atomic_store_n(&qp->rx_next, qp->rx_next + 1, __ATOMIC_RELAXED);
        /* the receive the window gains shown before the window opens (a
         * pusher that found it open and the receive not shown took the
         * wire, and so did every request behind it until its send queue
         * drained); then, after the record's last read, rq_done: a pusher
         * may reuse the record */
        rwqe_show_locked(qp);
        atomic_store_explicit(&s->rq_done, qp->rx_next, memory_order_release);
        cq_push((struct sn_cq *)qp->ibqp.recv_cq, &wc, solicited);
        n++;
    }
    return n;
}

int push_rq_take_locked(struct sn_qp *qp, struct sn_rwqe *out)
{
    struct push_qp *s = my_slot(qp);
    if (!s || qp->ibqp.srq)
        return -1;
    for (;;) {
        push_rx_collect_locked(qp);
        uint64_t t = atomic_load(&s->rq_taken);
        /* a pushed index without its record yet (see above: not while
         * the pusher's request waits for this receive) */
        if (t != tag(me.gen[qp->push_slot], qp->rx_popped) || !qp->rq_count || qp->attr.qp_state == IBV_QPS_ERR)
            return 0;
        if (atomic_compare_exchange_strong(&s->rq_taken, &t, t + 1))
            break;
    }
    *out = qp_rq_pop_locked(qp);
    out->idx = qp->rx_popped++;
    return 1;
}

/* The engine's completions may appear out of index order when two
 * connections serve the QP (a requester that reconnected while its old
 * connection still places a request): each done index is marked, and
 * rx_next moves past every consecutive one. */
#define RX_DONE_SPAN (sizeof(((struct sn_qp *)0)->rx_done_bits) * 8)

static bool rx_done_bit(struct sn_qp *qp, uint64_t idx, int op)
{
    uint64_t *w = &qp->rx_done_bits[(idx % RX_DONE_SPAN) / 64], m = 1ull << (idx % 64);
    bool was = (*w & m) != 0;
    if (op > 0)
        *w |= m;
    else if (op < 0)
        *w &= ~m;
    return was;
}

void push_rx_done_locked(struct sn_qp *qp, uint64_t idx)
{
    struct push_qp *s = my_slot(qp);
    if (!s || idx < qp->rx_next || idx >= qp->rx_popped)
        return;
    if (idx - qp->rx_next >= RX_DONE_SPAN) {
        SN_LOG("push: QP 0x%x: receive %llu done %llu ahead of the oldest: pushed completions wait",
               qp->ibqp.qp_num, (unsigned long long)idx, (unsigned long long)(idx - qp->rx_next));
        return;
    }
    rx_done_bit(qp, idx, 1);
    uint64_t next = qp->rx_next;
    while (next < qp->rx_popped && rx_done_bit(qp, next, -1))
        next++;
    __atomic_store_n(&qp->rx_next, next, __ATOMIC_RELAXED);
    rwqe_show_locked(qp);   /* the receives the window gains, before it opens */
    atomic_store_explicit(&s->rq_done, next, memory_order_release);
    push_rx_collect_locked(qp);
    if (qp->rx_flush_deferred && qp->rx_next == qp->rx_popped) {
        qp->rx_flush_deferred = false;
        if (qp->attr.qp_state == IBV_QPS_ERR)
            qp_flush_recv_locked(qp);
    }
}

bool push_rx_flush_waits_locked(struct sn_qp *qp)
{
    struct push_qp *s = my_slot(qp);
    if (!s)
        return false;
    push_rx_collect_locked(qp);
    /* a pushed receive whose data landed, behind one the engine still
     * completes: flushing it would report a failure the sender never saw */
    if (qp->rx_next != qp->rx_popped && qp->rq_count &&
        atomic_load_explicit(&s->rec[qp->rx_popped % PUSH_RECS].seq, memory_order_acquire) ==
            tag(me.gen[qp->push_slot], qp->rx_popped + 1)) {
        qp->rx_flush_deferred = true;
        return true;
    }
    return false;
}

void push_cq_collect(struct sn_cq *cq)
{
    struct push_region *r = made();
    if (!r)
        return;
    /* A CQ of a few QPs looks at their next records directly; one of many
     * first at the region's bell, which every pushed record rings.  The
     * bell saves the walk, but it is one more line a pusher takes from the
     * polling CPU and that CPU takes back on each write: on a 16-CPU host
     * a ping-pong's every message paid for it. */
    if (atomic_load_explicit(&cq->push_nqps, memory_order_relaxed) <= SN_PUSH_WATCH) {
        /* only reads while nothing is new: a spinning poll writes no line
         * the NIC threads or the pushers use (the slot's rq_done is its
         * receiver's next index, as rx_next) */
        bool any = false;
        for (int i = 0; i < SN_PUSH_WATCH && !any; i++) {
            int k = atomic_load_explicit(&cq->push_watch[i], memory_order_relaxed) - 1;
            if (k < 0)
                break;   /* packed (cq_watch_locked): the rest are empty */
            const struct push_qp *s = &r->qp[k];
            uint64_t next = atomic_load_explicit(&s->rq_done, memory_order_relaxed);
            any = atomic_load_explicit(&s->rec[next % PUSH_RECS].seq, memory_order_relaxed) == tag(me.gen[k], next + 1);
        }
        /* a poll of another thread walks the list now: it collects */
        if (!any || pthread_mutex_trylock(&cq->push_lock) != 0)
            return;
    } else {
        /* no record written since this CQ's last look, and none left behind */
        uint64_t bell = atomic_load(&r->bell);
        if (bell == atomic_load_explicit(&cq->push_bell_seen, memory_order_relaxed) &&
            !atomic_load_explicit(&cq->push_rescan, memory_order_relaxed))
            return;
        pthread_mutex_lock(&cq->push_lock);
        atomic_store_explicit(&cq->push_bell_seen, bell, memory_order_relaxed);
        atomic_store_explicit(&cq->push_rescan, false, memory_order_relaxed);
    }
    for (struct sn_qp *qp = atomic_load(&cq->push_qps); qp; qp = qp->push_cq_next) {
        int slot = qp->push_slot;
        if (slot < 0)
            continue;
        uint64_t next = __atomic_load_n(&qp->rx_next, __ATOMIC_RELAXED);
        if (atomic_load_explicit(&r->qp[slot].rec[next % PUSH_RECS].seq, memory_order_relaxed) !=
            tag(me.gen[slot], next + 1))
            continue;
        /* the QP's lock comes after the CQ's list here and before it where
         * the QP joins the list: never wait for it */
        if (pthread_mutex_trylock(&qp->lock) != 0) {
            atomic_store_explicit(&cq->push_rescan, true, memory_order_relaxed);   /* the next poll */
            continue;
        }
        push_rx_collect_locked(qp);
        pthread_mutex_unlock(&qp->lock);
    }
    pthread_mutex_unlock(&cq->push_lock);
}

static bool qp_ready(const struct sn_qp *qp)
{
    enum ibv_qp_state s = qp->attr.qp_state;
    return s == IBV_QPS_RTR || s == IBV_QPS_RTS || s == IBV_QPS_SQD;
}

void push_qp_update_locked(struct sn_qp *qp)
{
    struct push_region *r = made();
    if (qp->push_slot < 0 || !r)
        return;
    struct push_qp *s = &r->qp[qp->push_slot];
    s->access = qp->attr.qp_access_flags;
    bool ready = qp_ready(qp);
    atomic_store(&s->live, me.gen[qp->push_slot] << 1 | (ready ? 1u : 0u));
    if (!ready)   /* ibv_modify_qp(ERR) returns with nothing landing any more */
        drain(&s->pushers);
}

/* qp's slot in our region, taken when it has none (the offer of its
 * responder, or the note slot of its requester, whichever comes first):
 * false without one.  qp->lock held. */
static bool slot_get_locked(struct sn_qp *qp, struct push_region *r, const struct sn_port *port)
{
    if (qp->push_slot >= 0)
        return true;
    pthread_mutex_lock(&me.lock);
    /* the lowest free slot: the region's pages a process touches stay
     * those of the most QPs it had at once (a slot is 10.3 KiB; a new
     * one per connection made a program that connects and closes in
     * a loop grow by that each time), and a slot's generation keeps a
     * stale pusher out of its next QP */
    for (uint32_t i = 0; i < PUSH_QP_SLOTS; i++) {
        if (!me.used[i]) {
            if (!me.own[i] && !(me.own[i] = calloc(1, sizeof(*me.own[i]))))
                break;
            me.used[i] = true;
            me.gen[i]++;
            if (i + 1 > atomic_load(&me.hi))
                atomic_store(&me.hi, i + 1);
            qp->push_slot = (int)i;
            break;
        }
    }
    pthread_mutex_unlock(&me.lock);
    if (qp->push_slot < 0)
        return false;
    struct push_qp *s = &r->qp[qp->push_slot];
    s->pd = (uint64_t)(uintptr_t)qp->ibqp.pd;
    const struct sn_device *d = sn_device_of(qp->ibqp.context);
    s->dev = (uint16_t)d->index;
    s->port = (uint16_t)(port->num - 1);
    push_port_update(d, port);
    rx_slot_start_locked(qp, s);
    return true;
}

bool push_offer_locked(struct sn_qp *qp, int conn_fd, struct sn_wire_push_offer *o)
{
    struct push_region *r = region();
    const struct sn_port *port = qp->port;
    if (!r || !port || port->conf.ack_delay_us || port->conf.latency_us || !slot_get_locked(qp, r, port))
        return false;
    push_qp_update_locked(qp);
    memset(o, 0, sizeof(*o));
    o->magic = SN_WIRE_MAGIC;
    o->pid = (uint32_t)getpid();
    o->conn_fd = (uint32_t)conn_fd;
    o->region_fd = (uint32_t)me.fd;
    o->slot = (uint32_t)qp->push_slot;
    o->gen = me.gen[qp->push_slot];
    cma_token(&o->token_addr, &o->token);
    return true;
}

void push_qp_release_locked(struct sn_qp *qp)
{
    struct push_region *r = made();
    if (qp->push_slot < 0 || !r)
        return;
    ack_note_leave_locked(qp);   /* its send CQ's polls stop reading the slot */
    struct push_qp *s = &r->qp[qp->push_slot];
    atomic_store(&s->live, 0);
    atomic_store(&s->imm_ok, 0);
    drain(&s->pushers);
    /* what waits in its records lands, as a NIC had placed it at arrival
     * (their completions are never made now) */
    for (uint32_t k = 0; k < PUSH_RECS; k++) {
        struct push_rec *rec = &s->rec[k];
        struct rec_view v;
        if (!rec_landable((uint32_t)qp->push_slot, k, rec, true, &v) || !land_locked(qp, rec, &v))
            rec_drop(rec);
    }
    cq_unlist(qp);
    /* what peers pushed stays counted on the QP */
    atomic_fetch_add(&qp->cnt.rx_bytes, atomic_exchange(&s->rx_bytes, 0));
    atomic_fetch_add(&qp->cnt.rx_packets, atomic_exchange(&s->rx_packets, 0));
    pthread_mutex_lock(&me.lock);
    me.used[qp->push_slot] = false;
    pthread_mutex_unlock(&me.lock);
    qp->push_slot = -1;
}

void push_rx_counts(const struct sn_qp *qp, const struct sn_device *d, int port_num, uint64_t *bytes,
                    uint64_t *packets)
{
    *bytes = *packets = 0;
    struct push_region *r = made();
    if (!r)
        return;
    if (qp) {
        if (qp->push_slot >= 0) {
            *bytes = atomic_load(&r->qp[qp->push_slot].rx_bytes);
            *packets = atomic_load(&r->qp[qp->push_slot].rx_packets);
        }
    } else if (d && d->index >= 0 && d->index < SN_MAX_DEVICES && port_num >= 1 && port_num <= SN_MAX_PORTS) {
        *bytes = atomic_load(&r->port_rx_bytes[d->index][port_num - 1]);
        *packets = atomic_load(&r->port_rx_packets[d->index][port_num - 1]);
    }
}

/* ------------------------------------------------------- the requester */
/* One mapping per peer process, shared by the QPs that push to it. */
struct sn_push_peer {
    uint32_t pid;
    uint32_t owner;              /* the process that attached it: a forked child does not use it */
    int pidfd;
    /* /proc/<pid>/mem, opened while the pidfd said the peer was alive and
     * its region was still the one mapped (no exec since): it holds the
     * peer's address space, not its pid, so a write through it needs no
     * liveness check (once the peer exits or execs it writes nothing);
     * -1 where it cannot be opened.  Closed with the entry: one the kernel
     * refuses to write through is only switched off (mem_refused), as other
     * posting threads may be writing through it */
    int mem_fd;
    _Atomic bool mem_refused;
    dev_t region_dev;            /* the region's memfd, to know it again */
    ino_t region_ino;
    struct push_region *r;
    struct sn_push_maps *maps;   /* its shared regions mapped here (push_map.c); NULL: none */
    int refs;
    struct sn_push_peer *next;
};
static pthread_mutex_t peers_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sn_push_peer *peers;

/* Whether the peer's fd region_fd is the memfd known by (dev, ino): its
 * region is close-on-exec, so the same file there means the same program. */
static bool region_is(uint32_t pid, uint32_t region_fd, dev_t dev, ino_t ino)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof(path), "/proc/%u/fd/%u", pid, region_fd);
    return stat(path, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

static struct sn_push_peer *peer_get(uint32_t pid, uint32_t region_fd, int pidfd)
{
    pthread_mutex_lock(&peers_lock);
    for (struct sn_push_peer *p = peers; p; p = p->next) {
        /* the same pid with a live pidfd and the same region: the same
         * process, in the same program (not one it exec'd since) */
        if (p->pid == pid && p->owner == self_pid() && cma_peer_alive(p->pidfd) &&
            region_is(pid, region_fd, p->region_dev, p->region_ino)) {
            p->refs++;
            pthread_mutex_unlock(&peers_lock);
            close(pidfd);
            return p;
        }
    }
    pthread_mutex_unlock(&peers_lock);
    char path[64], link[64];
    snprintf(path, sizeof(path), "/proc/%u/fd/%u", pid, region_fd);
    /* a memfd of softnic's, not some file the peer holds open */
    ssize_t ln = readlink(path, link, sizeof(link) - 1);
    link[ln > 0 ? ln : 0] = 0;
    int fd = strncmp(link, "/memfd:" REGION_NAME " ", strlen("/memfd:" REGION_NAME " ")) == 0
                 ? open(path, O_RDWR | O_CLOEXEC)
                 : -1;
    struct stat st;
    void *m = MAP_FAILED;
    if (fd >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_size == sizeof(struct push_region))
        m = mmap(NULL, sizeof(struct push_region), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd >= 0)
        close(fd);
    struct push_region *r = m == MAP_FAILED ? NULL : m;
    dev_t rdev = m == MAP_FAILED ? 0 : st.st_dev;
    ino_t rino = m == MAP_FAILED ? 0 : st.st_ino;
    if (!r || r->magic != PUSH_MAGIC || r->version != PUSH_VERSION || r->pid != pid) {
        SN_DEBUG("push: peer pid %u: its region %s: small writes on the wire", pid,
                 r ? "is not softnic's" : "cannot be mapped");
        if (r)
            munmap(r, sizeof(*r));
        close(pidfd);
        return NULL;
    }
    struct sn_push_peer *p = calloc(1, sizeof(*p));
    if (!p) {
        munmap(r, sizeof(*r));
        close(pidfd);
        return NULL;
    }
    p->pid = pid;
    p->owner = self_pid();
    p->pidfd = pidfd;
    p->r = r;
    p->refs = 1;
    p->region_dev = rdev;
    p->region_ino = rino;
    p->maps = softnic_global()->conf.push_shared ? push_maps_new() : NULL;
    snprintf(path, sizeof(path), "/proc/%u/mem", pid);
    int mfd = softnic_global()->conf.push_proc_mem ? open(path, O_RDWR | O_CLOEXEC) : -1;
    /* alive after the open, its region still there: the pid was the
     * peer's, in the program whose region is mapped, when it opened */
    if (mfd >= 0 && (!cma_peer_alive(pidfd) || !region_is(pid, region_fd, rdev, rino))) {
        close(mfd);
        mfd = -1;
    }
    p->mem_fd = mfd;
    pthread_mutex_lock(&peers_lock);
    p->next = peers;
    peers = p;
    pthread_mutex_unlock(&peers_lock);
    return p;
}

static void peer_put(struct sn_push_peer *p)
{
    pthread_mutex_lock(&peers_lock);
    if (--p->refs > 0) {
        pthread_mutex_unlock(&peers_lock);
        return;
    }
    for (struct sn_push_peer **pp = &peers; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    pthread_mutex_unlock(&peers_lock);
    munmap(p->r, sizeof(*p->r));
    push_maps_free(p->maps, p->owner == self_pid());
    if (p->mem_fd >= 0)
        close(p->mem_fd);
    close(p->pidfd);
    free(p);
}

void push_attach(struct sn_qp *qp, int fd, const struct sn_wire_push_offer *o)
{
    if (o->magic != SN_WIRE_MAGIC || o->slot >= PUSH_QP_SLOTS || !o->pid)
        return;
    int pidfd = cma_check_peer(fd, o->pid, o->conn_fd, o->token_addr, o->token);
    if (pidfd < 0)
        return;
    struct sn_push_peer *p = peer_get(o->pid, o->region_fd, pidfd);
    if (!p)
        return;
    pthread_mutex_lock(&qp->lock);
    if (qp->push_peer)
        peer_put(qp->push_peer);
    qp->push_peer = p;
    qp->push_to_slot = o->slot;
    qp->push_to_gen = o->gen;
    qp->push_seen = (struct sn_push_seen){ 0, 0 };
    pthread_mutex_unlock(&qp->lock);
    SN_DEBUG("push: QP 0x%x: small writes placed in peer pid %u directly", qp->ibqp.qp_num, o->pid);
}

void push_detach_locked(struct sn_qp *qp)
{
    if (!qp->push_peer)
        return;
    peer_put(qp->push_peer);
    qp->push_peer = NULL;
}

/* The local pieces of w, in host memory of the QP's PD: false otherwise. */
static bool local_iov(struct sn_qp *qp, const struct sn_swqe *w, struct iovec *v, unsigned long *n)
{
    if (w->inl) {
        v[0].iov_base = w->inl;
        v[0].iov_len = w->len;
        *n = 1;
        return true;
    }
    *n = 0;
    for (int i = 0; i < w->num_sge; i++) {
        const struct ibv_sge *s = &w->sge[i];
        if (!s->length)
            continue;
        if (mr_mem_try(s->lkey, qp->ibqp.pd, s->addr, s->length) != SN_MEM_HOST)
            return false;
        v[*n].iov_base = (void *)(uintptr_t)s->addr;
        v[*n].iov_len = s->length;
        (*n)++;
    }
    return true;
}

/* A write of more than 64 bytes, in address order as a ConnectX places it
 * (a receiver may poll any entry's last word): the kernel's copy through
 * /proc/<pid>/mem is one string copy of the whole, whose stores x86
 * promises in no order (on a 2-CPU EPYC, 128 bytes and more were seen out
 * of order, 64 and less never: observed, not promised, and a reader of a
 * 64-byte entry that compares its sequence word for equality is safe
 * from a torn word either way), while process_vm_writev copies each local
 * piece on its own, one after the other: each word of the target is its
 * own piece.  It costs a pidfd poll and the lookup (about 1 us more on 2
 * CPUs), so one entry of 64 bytes keeps the file. */
static bool peer_write_ordered(struct sn_push_peer *p, const struct iovec *lv, unsigned long nl, uint64_t addr,
                               uint32_t len)
{
    char flat[SN_PUSH_MAX_BYTES];
    struct iovec words[SN_PUSH_MAX_BYTES / 8 + 2];
    if (len > sizeof(flat) || push_gather(flat, len, lv, nl) != len)
        return false;
    unsigned long n = 0;
    for (uint32_t at = 0; at < len;) {
        uint32_t k = 8 - (uint32_t)((addr + at) & 7);   /* to the target's next word boundary */
        if (k > len - at)
            k = len - at;
        words[n++] = (struct iovec){ flat + at, k };
        at += k;
    }
    struct iovec rv = { (void *)(uintptr_t)addr, len };
    return cma_peer_alive(p->pidfd) && process_vm_writev((pid_t)p->pid, words, n, &rv, 1, 0) == (ssize_t)len;
}

/* Writes len bytes from lv[0..nl) at addr in the peer: true when all
 * landed.  Through its /proc/<pid>/mem where that was opened: one system
 * call, where process_vm_writev needs a poll of the pidfd before it (a pid
 * names a process only while it lives) and looks the pid up, and checks
 * its access, on every call: on a 16-CPU host those were a third of a
 * small write's cost.  A kernel that refuses writes through the file
 * (proc_mem.force_override, a security module), or SOFTNIC_PUSH_PROC_MEM=0,
 * leaves process_vm_writev. */
static bool peer_write(struct sn_push_peer *p, const struct iovec *lv, unsigned long nl, uint64_t addr,
                       uint32_t len)
{
    /* a forked child's QP that came with its parent's: the parent's peer,
     * with the parent's rights (the wire decides for the child) */
    if (p->owner != self_pid())
        return false;
    if (len > 64)
        return peer_write_ordered(p, lv, nl, addr, len);
    if (p->mem_fd >= 0 && !atomic_load_explicit(&p->mem_refused, memory_order_relaxed)) {
        ssize_t got = pwritev(p->mem_fd, lv, (int)nl, (off_t)addr);
        if (got == (ssize_t)len)
            return true;
        if (got < 0 && (errno == EPERM || errno == EACCES || errno == EINVAL)) {
            if (!atomic_exchange(&p->mem_refused, true))
                SN_DEBUG("push: peer pid %u: /proc/<pid>/mem refused a write (%s): process_vm_writev from now on",
                         p->pid, strerror(errno));
        } else {
            return false;   /* exited, or the memory is gone: the wire answers */
        }
    }
    struct iovec rv = { (void *)(uintptr_t)addr, len };
    /* the pid is still the peer's (not a process that reused it) */
    return cma_peer_alive(p->pidfd) && process_vm_writev((pid_t)p->pid, lv, nl, &rv, 1, 0) == (ssize_t)len;
}

/* Whether the peer region r no longer publishes key and no pusher is
 * counted on its entry: a pusher counts itself there before it reads the
 * key (place), so one that read it as published is seen here, or reads
 * it as gone (both sequentially consistent).  The count is of every
 * process pushing into r: a busy entry is merely kept. */
static bool key_gone(const void *arg, uint32_t key)
{
    const struct push_region *r = arg;
    uint32_t idx = key >> 8;
    if (idx >= PUSH_MR_SLOTS)
        return true;
    const struct push_mr *e = &r->mr[idx];
    return atomic_load(&e->key) != key && !pushers_busy(&e->pushers);
}

/* Stores len bytes from lv[0..nl) at raddr of the peer's region e (its key
 * held, counted on it) when its owner published it as shareable and the
 * file checks out: true when they are there, false for the system call.
 * e's fields are read once: the peer may write them, and the mapping made
 * for the snapshot bounds the store. */
static bool peer_store(struct sn_push_peer *p, const struct push_mr *e, uint32_t rkey, uint64_t raddr,
                       const struct iovec *lv, unsigned long nl, uint32_t len)
{
    if (!p->maps || p->owner != self_pid())
        return false;
    const volatile struct push_mr *v = e;
    struct sn_share_ref ref = { .key = rkey, .fd = v->share_fd, .iova = v->iova, .len = v->len,
                                .dev = v->share_dev, .ino = v->share_ino, .off = v->share_off };
    if (ref.fd == NO_SHARE || len > SN_PUSH_MAX_BYTES || raddr < ref.iova || len > ref.len || raddr - ref.iova > ref.len - len)
        return false;
    char *at = push_maps_at(p->maps, p->pid, &ref, key_gone, p->r);
    if (!at)
        return false;
    push_store(at + (raddr - ref.iova), lv, nl, len);
    return true;
}

/* Whether receive index n (of rq_taken t, generation gen) is posted and
 * its record free; the receiver's counts only grow within a generation,
 * so what this pusher saw last still holds, and only a refusal reads them
 * again (their line is the receiver's: each read moves it). */
static bool recv_free(struct push_qp *s, uint32_t gen, uint64_t t, struct sn_push_seen *seen)
{
    uint64_t n = t & TAG_COUNT;
    if (t != tag(gen, n))
        return false;
    if (n >= seen->posted)
        seen->posted = atomic_load_explicit(&s->rq_posted, memory_order_acquire);
    if (n - seen->done >= PUSH_RECS)
        seen->done = atomic_load_explicit(&s->rq_done, memory_order_acquire);
    return n < seen->posted && n - seen->done < PUSH_RECS;
}

/* Writes the record of receive index n (taken): the request's immediate,
 * length and op, and where its carried bytes lv[0..nl) go (nl > 0; else
 * its data is in place already). */
static void rec_fill(struct push_region *r, struct push_qp *s, uint32_t gen, uint64_t n, const struct sn_swqe *w,
                     uint32_t op, uint32_t key, uint64_t addr, const struct iovec *lv, unsigned long nl)
{
    struct push_rec *rec = &s->rec[n % PUSH_RECS];
    /* Its earlier record became a completion, so its bytes landed.  The
     * old seq goes before this record's bytes come: a deregistration's
     * walk that claims the record then sees a seq not the one it chose. */
    atomic_store_explicit(&rec->seq, 0, memory_order_relaxed);
    rec->imm = w->imm;
    rec->len = w->len;
    rec->op = op;
    rec->solicited = (w->send_flags & IBV_SEND_SOLICITED) != 0;
    if (nl) {
        rec->rkey = key;
        rec->raddr = addr;
        push_gather((char *)rec->data, sizeof(rec->data), lv, nl);
    }
    atomic_store_explicit(&rec->landed, nl ? REC_WAITING : REC_LANDED, memory_order_release);
    atomic_store_explicit(&rec->seq, tag(gen, n + 1), memory_order_release);
    atomic_fetch_add(&r->bell, 1);   /* after the record: a poll that sees it finds the record */
}

/* Takes the receiver's next receive index for a WRITE_WITH_IMM and records
 * its completion there, with the bytes lv[0..nl) when the write carries
 * them (nl > 0; else its data is in place already): false when the
 * receiver has no receive free (an RNR on the wire), its records are all
 * unread, or it makes no pushed completions. */
static bool claim_recv(struct push_region *r, struct push_qp *s, uint32_t gen, const struct sn_swqe *w,
                       const struct iovec *lv, unsigned long nl, struct sn_push_seen *seen)
{
    if (!atomic_load(&s->imm_ok))
        return false;
    uint64_t t = atomic_load(&s->rq_taken);
    do {
        if (!recv_free(s, gen, t, seen))
            return false;
    } while (!atomic_compare_exchange_weak(&s->rq_taken, &t, t + 1));
    rec_fill(r, s, gen, t & TAG_COUNT, w, REC_OP_WRITE_IMM, w->rkey, w->raddr, lv, nl);
    return true;
}

/* Takes the receiver's next receive for a SEND carrying lv[0..nl) (w->len
 * bytes, at most SN_PUSH_INLINE_MAX) and records it there: false unless
 * the receive is shown (rwqe_show_locked), the SEND fits it, and its key
 * names a region of the QP's PD with local write that holds it (the wire
 * gives the errors).  The region's entry counts this pusher until the
 * record is written, so a deregistration that waited for it lands it. */
static bool claim_send(struct push_region *r, struct push_qp *s, uint32_t gen, const struct sn_swqe *w,
                       const struct iovec *lv, unsigned long nl, struct sn_push_seen *seen)
{
    if (!atomic_load(&s->imm_ok))
        return false;
    uint64_t t = atomic_load(&s->rq_taken);
    for (;;) {
        if (!recv_free(s, gen, t, seen))
            return false;
        uint64_t n = t & TAG_COUNT;
        const struct push_rwqe *q = &s->rwqe[n % PUSH_RECS];
        if (atomic_load_explicit(&q->seq, memory_order_acquire) != tag(gen, n + 1))
            return false;
        uint64_t addr = atomic_load_explicit(&q->addr, memory_order_relaxed);
        uint32_t room = atomic_load_explicit(&q->len, memory_order_relaxed);
        uint32_t lkey = atomic_load_explicit(&q->lkey, memory_order_relaxed);
        if (w->len > room)
            return false;
        struct push_mr *e = NULL;
        uint32_t epoch = 0;
        if (w->len) {
            uint32_t idx = lkey >> 8;
            if (idx >= PUSH_MR_SLOTS)
                return false;
            e = &r->mr[idx];
            epoch = pushers_enter(&e->pushers);
            if (atomic_load(&e->key) != lkey || e->pd != s->pd || !(e->access & IBV_ACCESS_LOCAL_WRITE) ||
                addr < e->iova || w->len > e->len || addr - e->iova > e->len - w->len) {
                pushers_leave(&e->pushers, epoch);
                return false;
            }
        }
        bool mine = atomic_compare_exchange_weak(&s->rq_taken, &t, t + 1);
        if (mine)
            rec_fill(r, s, gen, n, w, w->opcode == IBV_WR_SEND_WITH_IMM ? REC_OP_SEND_IMM : REC_OP_SEND, lkey,
                     addr, lv, w->len ? nl : 0);
        if (e)
            pushers_leave(&e->pushers, epoch);
        if (mine)
            return true;
    }
}

/* Places w's pieces lv[0..nl) in the peer's QP slot (gen) when every check
 * passes, and for a WRITE_WITH_IMM takes its receive: true once the bytes
 * (and the record) are there.  A WRITE_WITH_IMM of at most
 * conf.push_inline bytes carries them in its record (claimed while the
 * key's count is held: a deregistration that waited for it finds the
 * record).  One of more bytes that finds no receive goes on the wire after
 * its bytes were placed: the wire places the same bytes again, as a
 * retried request does.  Without the QP's lock. */
static bool place(struct sn_push_peer *p, uint32_t slot, uint32_t gen, const struct sn_swqe *w,
                  const struct iovec *lv, unsigned long nl, uint64_t pkts, struct sn_push_seen *seen, bool *stored)
{
    *stored = false;
    struct push_region *r = p->r;
    struct push_qp *s = &r->qp[slot];
    bool ok = false, imm = w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    bool send = w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_IMM;
    bool carry = imm && w->len && w->len <= softnic_global()->conf.push_inline;
    uint32_t epoch = pushers_enter(&s->pushers);
    uint16_t dev = s->dev, port = s->port;
    bool up = atomic_load(&s->live) == (gen << 1 | 1u) && dev < SN_MAX_DEVICES && port < SN_MAX_PORTS &&
              atomic_load(&r->port_up[dev][port]);
    if (up && send) {
        ok = claim_send(r, s, gen, w, lv, nl, seen);   /* a SEND asks for no access flag */
    } else if (up && (s->access & IBV_ACCESS_REMOTE_WRITE)) {
        uint32_t idx = w->rkey >> 8;
        struct push_mr *e = idx < PUSH_MR_SLOTS ? &r->mr[idx] : NULL;
        if (!w->len) {
            ok = true;   /* a zero-length RDMA access checks no key */
        } else if (e) {
            uint32_t key_epoch = pushers_enter(&e->pushers);
            if (atomic_load(&e->key) == w->rkey && e->pd == s->pd && (e->access & IBV_ACCESS_REMOTE_WRITE) &&
                w->raddr >= e->iova && w->len <= e->len && w->raddr - e->iova <= e->len - w->len) {
                if (carry)
                    ok = claim_recv(r, s, gen, w, lv, nl, seen);
                else
                    ok = (*stored = peer_store(p, e, w->rkey, w->raddr, lv, nl, w->len)) ||
                         peer_write(p, lv, nl, e->base + (w->raddr - e->iova), w->len);
            }
            pushers_leave(&e->pushers, key_epoch);
        }
        if (ok && imm && !carry)
            ok = claim_recv(r, s, gen, w, NULL, 0, seen);
    }
    if (ok) {   /* counted as the peer's port and QP received it */
        atomic_fetch_add(&s->rx_bytes, w->len);
        atomic_fetch_add(&s->rx_packets, pkts);
        atomic_fetch_add(&r->port_rx_bytes[dev][port], w->len);
        atomic_fetch_add(&r->port_rx_packets[dev][port], pkts);
    }
    pushers_leave(&s->pushers, epoch);
    return ok;
}

/* Places the WQE at sq_sent in the peer and completes it: true, or false
 * for the wire.  qp->lock held; let go during a copy (a system call, or
 * a store of many bytes), with tx_busy held as a posting thread's
 * transmission holds it (the requester sends nothing meanwhile, and the
 * QP's stop waits for it), so the NIC threads that place and complete this
 * QP's other traffic do not wait for it. */
static bool push_next_locked(struct sn_qp *qp)
{
    uint64_t at = qp->sq_sent;
    struct sn_swqe w = qp->sq[at % qp->sq_size];
    char inl[SN_MAX_INLINE];
    struct iovec lv[SN_MAX_SGE];
    unsigned long nl;
    bool imm = w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    bool send = w.opcode == IBV_WR_SEND || w.opcode == IBV_WR_SEND_WITH_IMM;
    const struct sn_config *conf = &softnic_global()->conf;
    if (send ? !conf->push_send || w.len > conf->push_inline
             : (w.opcode != IBV_WR_RDMA_WRITE && !imm) || (!w.len && !imm) || w.len > SN_PUSH_MAX_BYTES)
        return false;
    if (w.inl && w.len > sizeof(inl))
        return false;
    if (w.inl) {   /* its slot's buffer serves a later WQE once this one is flushed */
        memcpy(inl, w.inl, w.len);
        w.inl = inl;
    }
    if (!local_iov(qp, &w, lv, &nl))
        return false;
    uint64_t pkts = sn_mtu_packets(w.len, qp->attr.path_mtu);
    struct sn_push_peer *peer = qp->push_peer;
    uint32_t slot = qp->push_to_slot, gen = qp->push_to_gen;
    /* A write whose bytes ride in the receiver's record makes no system
     * call (place: claim_recv stores them): it keeps the lock, which costs
     * less than letting go and taking it again on a small message's path. */
    bool keep = send || (imm && w.len && w.len <= conf->push_inline);
    if (!keep) {
        qp->tx_busy = true;
        pthread_mutex_unlock(&qp->lock);
    }
    bool stored;
    bool ok = place(peer, slot, gen, &w, lv, nl, pkts, &qp->push_seen, &stored);
    if (!keep) {
        pthread_mutex_lock(&qp->lock);
        qp->tx_busy = false;
    }
    if (!ok || qp->sq_sent != at || qp->sq_head != at) {
        /* refused (the wire answers it), or flushed meanwhile by an error */
        if (qp->stopping)
            pthread_cond_broadcast(&qp->cond);
        return false;
    }
    struct sn_port *lp = qp->port;
    atomic_fetch_add(&lp->cnt.tx_bytes, w.len);
    atomic_fetch_add(&lp->cnt.tx_packets, pkts);
    atomic_fetch_add(&qp->cnt.tx_bytes, w.len);
    atomic_fetch_add(&qp->cnt.tx_packets, pkts);
    atomic_fetch_add(&qp->cnt.pushed_wqes, 1);
    if (stored)
        atomic_fetch_add(&qp->cnt.stored_wqes, 1);
    qp->sq_sent++;
    qp_complete_send_locked(qp, IBV_WC_SUCCESS);   /* wakes qp->cond, where qp_engine_stop may wait */
    return true;
}

bool push_try_locked(struct sn_qp *qp)
{
    const struct sn_port *port = qp->port;
    /* A GPU-driven QP (softnic's mlx5 layer: the GPU rings, the layer
     * posts) keeps the wire: that layer turns completions into the GPU's
     * CQEs after its post returns, and a completion made inside the post
     * broke it (railnet's GDAKI type with its rings in GPU memory failed
     * NCCL's GIN barrier test with error completions; it passes with the
     * push off). */
    if (!qp->push_peer || qp->poll_acks || qp->attr.qp_state != IBV_QPS_RTS || qp->conn_dead || qp->stopping || qp->tx_busy ||
        qp->tx_held || !port || port->conf.latency_us || port->conf.down_after_bytes || port->conf.down_after_ms ||
        port->conf.ack_delay_us || port->conf.vf || port->tx_rate.rate ||
        atomic_load(&port->state) != IBV_PORT_ACTIVE)
        return false;
    bool any = false;
    /* only with nothing before it in flight: RC places writes in order */
    while (qp->sq_head == qp->sq_sent && qp->sq_sent < qp->sq_tail && qp->push_peer && !qp->stopping &&
           qp->attr.qp_state == IBV_QPS_RTS && push_next_locked(qp))
        any = true;
    return any;
}

/* ------------------------------------------------- acknowledgements */
bool push_note_offer_locked(struct sn_qp *qp, struct sn_wire_hello *h)
{
    struct push_region *r = region();
    const struct sn_port *port = qp->port;
    /* a delayed ACK or added latency is the wire's to time */
    if (!r || !port || !h->conn_id || port->conf.ack_delay_us || port->conf.latency_us ||
        !slot_get_locked(qp, r, port))
        return false;
    struct push_qp *s = &r->qp[qp->push_slot];
    /* the connection's name, with nothing executed yet: a responder of
     * an earlier connection of this slot writes no note over it
     * (push_note_write), and a note of it completes nothing here */
    atomic_store_explicit(&s->wire_acked, (uint64_t)h->conn_id << 32 | (uint32_t)(qp->next_seq - 1u),
                          memory_order_release);
    atomic_store(&s->note_polled, 0);
    h->note_region_fd = (uint32_t)me.fd;
    h->note_slot = (uint32_t)qp->push_slot;
    h->hflags |= SN_HELLO_NOTE;
    return true;
}

void push_note_polled_set(int slot, bool on)
{
    struct push_region *r = made();
    if (r && slot >= 0)
        atomic_store(&r->qp[slot].note_polled, on ? 1u : 0u);
}

_Atomic uint64_t *push_note_word(int slot)
{
    struct push_region *r = made();
    return r && slot >= 0 ? &r->qp[slot].wire_acked : NULL;
}

struct sn_push_peer *push_note_peer(uint32_t pid, uint32_t region_fd, int pidfd, uint32_t slot)
{
    if (slot >= PUSH_QP_SLOTS || !softnic_global()->conf.push) {
        close(pidfd);
        return NULL;
    }
    return peer_get(pid, region_fd, pidfd);
}

void push_note_peer_put(struct sn_push_peer *p)
{
    if (p)
        peer_put(p);
}

bool push_note_write(struct sn_push_peer *p, uint32_t slot, uint32_t conn_id, uint32_t seq)
{
    _Atomic uint64_t *w = &p->r->qp[slot].wire_acked;
    uint64_t old = atomic_load_explicit(w, memory_order_relaxed);
    /* over a note of the same connection only: the slot may be another
     * connection's (its QP reset and connected again) or another QP's */
    do {
        if ((uint32_t)(old >> 32) != conn_id)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(w, &old, (uint64_t)conn_id << 32 | seq, memory_order_release,
                                                    memory_order_relaxed));
    return true;
}

bool push_note_polled(const struct sn_push_peer *p, uint32_t slot)
{
    return atomic_load_explicit(&p->r->qp[slot].note_polled, memory_order_relaxed) != 0;
}

bool push_acked_locked(const struct sn_qp *qp, uint64_t *note)
{
    struct push_qp *s = my_slot(qp);
    if (!s)
        return false;
    *note = atomic_load_explicit(&s->wire_acked, memory_order_acquire);
    return *note != 0;
}
