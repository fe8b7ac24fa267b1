/* ack_note.c: a same-host requester's send completions made by its own
 * polls from its responder's note, with no ACK on the wire.
 *
 * On a ConnectX the ACK that completes a write costs the sender's host
 * nothing: the NIC writes the CQE.  Here an ACK is a message on the
 * connection's socket: the responder's engine sends it, the requester's
 * engine wakes to read it and makes the completion -- a system call on
 * one side and a thread's wake-up on the other for every signaled write,
 * on CPUs the application's own threads need.  A same-host responder
 * already leaves a note of what it executed in the requester's slot of the
 * push region (push.c: push_note_write, the connection's name and the
 * sequence number) before it acknowledges.  A requester whose send CQ is
 * polled by the application (no completion channel to signal, no hook of
 * softnic's mlx5 layer, no GPU driving the QP) says so in its slot, and
 * then:
 *   - the responder sends no ACK for what the note covers (responder.c,
 *     flush_ack);
 *   - a poll of the send CQ completes the WQEs the note covers, writes
 *     and sends up to the first READ or atomic, whose data only its
 *     response brings (completer_note_locked);
 *   - the completer applies the note at each step too: after a READ's
 *     response, to the writes behind it, and at the end of the retry
 *     budget, so that a requester that does not poll for a while is not
 *     taken for one whose peer died.
 * NAKs, READ and atomic responses and RNR waits stay on the wire.  A CQ
 * polls the notes of at most SN_NOTE_WATCH QPs (while nothing changed its
 * look is two loads a QP, no call, no lock); its further QPs keep the
 * wire's ACKs.
 * SOFTNIC_PUSH_ACKS=0: every ACK on the wire (the notes are still left,
 * for a connection that ends before its last ACK leaves). */
#include "softnic.h"

/* The send CQs that watch notes, for ack_note_settle: a WQE whose
 * responder executed it holds its regions until a poll completes it, and
 * an application may deregister a region with a send in flight before it
 * polls again (a connection closed with a send in flight): without a
 * settle there, ibv_dereg_mr waited for the retry budget's end. */
static pthread_mutex_t watching_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sn_cq *watching;

/* cq joins the list as its first QP joins (on) and leaves it as its last
 * leaves (cq->push_lock held): it is listed while note_nqps > 0. */
static void watching_set_locked(struct sn_cq *cq, bool on)
{
    pthread_mutex_lock(&watching_lock);
    if (on) {
        cq->note_next = watching;
        watching = cq;
    } else {
        for (struct sn_cq **pp = &watching; *pp; pp = &(*pp)->note_next)
            if (*pp == cq) {
                *pp = cq->note_next;
                break;
            }
    }
    pthread_mutex_unlock(&watching_lock);
}

void ack_note_settle(void)
{
    /* a CQ leaves the list before it can go (its last QP leaves first) */
    pthread_mutex_lock(&watching_lock);
    for (struct sn_cq *cq = watching; cq; cq = cq->note_next)
        ack_note_poll(cq);
    pthread_mutex_unlock(&watching_lock);
}

static bool polls_complete_locked(const struct sn_qp *qp)
{
    const struct sn_cq *cq = (const struct sn_cq *)qp->ibqp.send_cq;
    const struct sn_port *port = qp->port;
    return softnic_global()->conf.push_acks && cq && !cq->ibcq.channel && !cq->hook && !qp->poll_acks &&
           qp->ibqp.qp_type == IBV_QPT_RC && port && !port->conf.ack_delay_us && !port->conf.latency_us;
}

/* Joins qp's send CQ's watched QPs, at the end of the CQ's packed
 * entries (a poll looks at note_nqps of them): false when the CQ watches
 * as many as it can.  qp->lock held (then the CQ's push_lock, under which
 * alone a QP's note_watch changes). */
static bool watch_locked(struct sn_qp *qp)
{
    struct sn_cq *cq = (struct sn_cq *)qp->ibqp.send_cq;
    pthread_mutex_lock(&cq->push_lock);
    int i = atomic_load_explicit(&cq->note_nqps, memory_order_relaxed);
    bool ok = i < SN_NOTE_WATCH;
    if (ok) {
        cq->note_qp[i] = qp;
        atomic_store_explicit(&cq->note_seen[i], 0, memory_order_relaxed);
        atomic_store_explicit(&cq->note_word[i], push_note_word(qp->push_slot), memory_order_release);
        atomic_store_explicit(&cq->note_nqps, i + 1, memory_order_release);
        qp->note_watch = i;
        if (i == 0)
            watching_set_locked(cq, true);
    }
    pthread_mutex_unlock(&cq->push_lock);
    return ok;
}

void ack_note_hello_locked(struct sn_qp *qp, struct sn_wire_hello *h)
{
    if (!(h->hflags & SN_HELLO_PUSH) || !push_note_offer_locked(qp, h))
        return;
    if (qp->note_watch < 0 && polls_complete_locked(qp) && !watch_locked(qp))
        return;
    if (qp->note_watch >= 0)
        push_note_polled_set(qp->push_slot, true);
}

void ack_note_leave_locked(struct sn_qp *qp)
{
    if (qp->note_watch < 0)
        return;
    push_note_polled_set(qp->push_slot, false);
    struct sn_cq *cq = (struct sn_cq *)qp->ibqp.send_cq;
    pthread_mutex_lock(&cq->push_lock);
    /* the last entry moves into the hole: the entries stay packed */
    int i = qp->note_watch, last = atomic_load_explicit(&cq->note_nqps, memory_order_relaxed) - 1;
    struct sn_qp *moved = cq->note_qp[last];
    cq->note_qp[i] = moved;
    atomic_store_explicit(&cq->note_seen[i], atomic_load_explicit(&cq->note_seen[last], memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&cq->note_word[i], atomic_load_explicit(&cq->note_word[last], memory_order_relaxed),
                          memory_order_release);
    moved->note_watch = i;
    cq->note_qp[last] = NULL;
    atomic_store_explicit(&cq->note_word[last], NULL, memory_order_release);
    atomic_store_explicit(&cq->note_nqps, last, memory_order_release);
    qp->note_watch = -1;
    if (last == 0)
        watching_set_locked(cq, false);
    pthread_mutex_unlock(&cq->push_lock);
}

void ack_note_poll(struct sn_cq *cq)
{
    /* only loads while no note moved: a spinning poll writes no line, and
     * of the lines the responders write it reads the notes alone */
    bool any = false;
    int n = atomic_load_explicit(&cq->note_nqps, memory_order_acquire);
    for (int i = 0; i < n && !any; i++) {
        _Atomic uint64_t *w = atomic_load_explicit(&cq->note_word[i], memory_order_acquire);
        any = w && atomic_load_explicit(w, memory_order_relaxed) !=
                       atomic_load_explicit(&cq->note_seen[i], memory_order_relaxed);
    }
    /* another thread's poll is at it: it completes them */
    if (!any || pthread_mutex_trylock(&cq->push_lock) != 0)
        return;
    for (int i = 0; i < atomic_load_explicit(&cq->note_nqps, memory_order_relaxed); i++) {
        struct sn_qp *qp = cq->note_qp[i];
        uint64_t note = atomic_load_explicit(cq->note_word[i], memory_order_acquire);
        if (note == atomic_load_explicit(&cq->note_seen[i], memory_order_relaxed))
            continue;
        /* the QP's lock comes after the CQ's here and before it where the
         * QP joins or leaves: never wait for it (the next poll looks again) */
        if (pthread_mutex_trylock(&qp->lock) != 0)
            continue;
        completer_note_locked(qp, note);
        atomic_store_explicit(&cq->note_seen[i], note, memory_order_relaxed);
        pthread_mutex_unlock(&qp->lock);
    }
    pthread_mutex_unlock(&cq->push_lock);
}

void ack_note_cq_hooked(struct sn_cq *cq)
{
    pthread_mutex_lock(&cq->push_lock);
    for (int i = 0; i < atomic_load_explicit(&cq->note_nqps, memory_order_relaxed); i++)
        push_note_polled_set(cq->note_qp[i]->push_slot, false);
    pthread_mutex_unlock(&cq->push_lock);
}
