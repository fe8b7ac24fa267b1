/* push_region.h: the layout of softnic's push region (push.c), a memfd
 * that one process makes and its same-host peers map and write.  Peers
 * are not trusted: everything a peer can write here is checked by the
 * region's owner before it is used (push.c).  The layout is private to
 * softnic; tests include it to write the region as a hostile peer would. */
#ifndef SOFTNIC_PUSH_REGION_H
#define SOFTNIC_PUSH_REGION_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "softnic.h"

#define PUSH_MAGIC 0x534e5055u   /* "SNPU" */
#define PUSH_VERSION 11u
#define PUSH_MR_SLOTS 65536u     /* the key table's size: an entry per key index */
#define PUSH_QP_SLOTS 16384u
/* Records (pushed WRITE_WITH_IMMs and SENDs) a QP holds before its
 * receiver collects them: a pusher finding them all unread goes on the
 * wire, and so does every request posted behind it until the send queue
 * drains.  At 16, ib_send_bw's 128 in flight found them full often enough
 * that 8-byte sends ran 10-31% below 64's, and runs of 2000 sends of 4-16
 * bytes at 0.6-19 MB/s against 20-85 */
#define PUSH_RECS 64u
/* how long a deregistration waits for pushes under way: a pusher holds its
 * count for one system call; a peer that died holding it cannot write */
#define PUSH_DRAIN_NS 1000000000ull

/* Pushes under way on a QP slot or key entry: a count in the low bits
 * and an epoch above it.  A deregistration or a QP's stop waits for the
 * count to reach 0 (drain); one that gives up on a pusher stopped in its
 * push (PUSH_DRAIN_NS) starts a new epoch at 0, and that pusher, should it
 * resume, leaves without counting itself out of the new epoch, which would
 * hide a later pusher from the next drain. */
#define PUSHERS_COUNT 0xffffu

/* counts a pusher in: the epoch, for pushers_leave */
static inline uint32_t pushers_enter(_Atomic uint32_t *c)
{
    return atomic_fetch_add(c, 1) & ~PUSHERS_COUNT;
}

static inline void pushers_leave(_Atomic uint32_t *c, uint32_t epoch)
{
    uint32_t v = atomic_load(c);
    while ((v & ~PUSHERS_COUNT) == epoch && (v & PUSHERS_COUNT) && !atomic_compare_exchange_weak(c, &v, v - 1))
        ;
}

static inline bool pushers_busy(const _Atomic uint32_t *c)
{
    return (atomic_load(c) & PUSHERS_COUNT) != 0;
}

/* gives up on the pushers counted: a new epoch at 0 */
static inline void pushers_reset(_Atomic uint32_t *c)
{
    uint32_t v = atomic_load(c);
    while (!atomic_compare_exchange_weak(c, &v, (v & ~PUSHERS_COUNT) + PUSHERS_COUNT + 1))
        ;
}

#define NO_SHARE UINT32_MAX
struct push_mr {
    _Atomic uint32_t key;        /* 0: none */
    uint32_t access;
    uint64_t iova, base, len, pd;
    _Atomic uint32_t pushers;    /* pushers_*() */
    /* a region a pusher may map (share.c): the owner's fd of its memfd
     * (NO_SHARE: none), the file's identity and its offset at base */
    uint32_t share_fd;
    uint64_t share_dev, share_ino, share_off;
};

/* rq_taken and a record's seq carry the slot's generation above
 * TAG_SHIFT: a pusher that stalled past a drain's timeout cannot claim a
 * receive, or leave a record, in the slot's next QP. */
#define TAG_SHIFT 40
#define TAG_COUNT ((1ull << TAG_SHIFT) - 1)

static inline uint64_t tag(uint32_t gen, uint64_t count)
{
    return (uint64_t)(gen & 0xffffffu) << TAG_SHIFT | (count & TAG_COUNT);
}

/* A pushed WRITE_WITH_IMM's completion, for its receiver to make: seq is
 * tag(gen, its receive's index + 1), stored last.  A write of at most
 * SN_PUSH_INLINE_MAX bytes carries them here instead of placing them: the
 * receiver copies them to (rkey, raddr) before it makes the completion,
 * which is when RDMA promises a WRITE_WITH_IMM's bytes visible, and a
 * deregistration or the QP's release copies those still waiting
 * (land_*).  That spares the pusher its system call: the one-way time of
 * a small message becomes a cache line's move.  landed says where the
 * bytes are: REC_WAITING here, REC_COPYING while one thread copies them,
 * REC_LANDED in place (a placed write's record starts there). */
enum { REC_LANDED, REC_WAITING, REC_COPYING };   /* 0: a fresh slot's records have nothing waiting */
/* A record's request: a SEND's key and address are its receive's scatter
 * entry (local write), a WRITE_WITH_IMM's its rkey and raddr */
enum { REC_OP_WRITE_IMM, REC_OP_SEND, REC_OP_SEND_IMM };
struct push_rec {
    _Atomic uint64_t seq;
    uint32_t imm;                /* network order, as in the WR */
    uint32_t len;
    uint32_t solicited;
    uint32_t rkey;               /* carried bytes: where they go */
    uint64_t raddr;
    _Atomic uint32_t landed;
    uint32_t op;                 /* REC_OP_*: what the completion says */
    unsigned char data[SN_PUSH_INLINE_MAX];   /* a few bytes share the header's line */
};
_Static_assert(sizeof(struct push_rec) == 128, "a record is two cache lines");

/* A posted receive as a pushed SEND sees it: seq is tag(gen, its index +
 * 1), stored last; len 0 and lkey 0 for a receive of several scatter
 * entries (only an empty SEND fits it).  Rewritten for index n +
 * PUSH_RECS only once n is done, so a pusher that read seq as n's and then
 * takes index n with its compare-and-swap read n's fields. */
struct push_rwqe {
    _Atomic uint64_t seq;
    _Atomic uint64_t addr;
    _Atomic uint32_t len, lkey;
    uint64_t pad;
};
_Static_assert(sizeof(struct push_rwqe) == 32, "two receives a cache line");

/* A QP's slot, in cache lines of different writers, so that a pushed
 * write and its receiver's poll move as few lines between their CPUs as
 * they can (each such move costs ~0.1-0.3 us across cores): the first the
 * pushers write (their counts, rq_taken), the second the peer's responder
 * (its note of what it executed), the third the receiver (its receives
 * posted and done), the records the pusher writes and the receiver
 * reads. */
struct push_qp {
    _Atomic uint32_t live;       /* gen << 1 | ready to receive */
    uint32_t access;             /* qp_access_flags */
    uint64_t pd;
    uint16_t dev, port;          /* its port, for port_up */
    _Atomic uint32_t pushers;    /* pushers_*() */
    _Atomic uint64_t rx_bytes, rx_packets;
    /* WRITE_WITH_IMM: its receives, indexed from 0 in posting order;
     * taken by the receiver's engine or a pusher (compare-and-swap), done:
     * the receiver made the completions below it */
    _Atomic uint32_t imm_ok;     /* its own RQ (no SRQ), a recv CQ a poll drains */
    uint32_t pad;
    _Atomic uint64_t rq_taken;
    /* the peer's responder: every request up to this sequence number of
     * the connection named in the upper half (the hello's conn_id; 0:
     * none) was executed and its ACK is on its way; written before the
     * receive completions it covers appear (push_note_write).  A
     * line of its own: the peer's engine writes it for every request
     * while the peer's application thread pushes its clear-to-sends
     * through the line above */
    _Alignas(64) _Atomic uint64_t wire_acked;
    /* the requester: its polls complete its sends from wire_acked, so the
     * responder leaves the wire's ACK out (ack_note.c); the requester
     * writes it at its connection and when that stops, the responder reads
     * it per note */
    _Atomic uint32_t note_polled;
    /* the receiver's counts, each on a line of its own: a pusher reads
     * rq_posted about once per receive posted, rq_done once in PUSH_RECS
     * records, and the receiver writes rq_done with every completion it
     * makes: sharing a line, each pusher's read of rq_posted made the
     * receiver's next completion wait for the line */
    _Alignas(64) _Atomic uint64_t rq_posted;
    _Alignas(64) _Atomic uint64_t rq_done;
    /* the receiver's: the receive of index n, at n % PUSH_RECS while n is
     * within PUSH_RECS of rq_done (rwqe_show_locked) */
    _Alignas(64) struct push_rwqe rwqe[PUSH_RECS];
    _Alignas(64) struct push_rec rec[PUSH_RECS];
};

_Static_assert(offsetof(struct push_qp, wire_acked) % 64 == 0 &&
                   offsetof(struct push_qp, rq_posted) - offsetof(struct push_qp, wire_acked) == 64 &&
                   offsetof(struct push_qp, rq_done) - offsetof(struct push_qp, rq_posted) == 64 &&
                   offsetof(struct push_qp, rwqe) - offsetof(struct push_qp, rq_done) == 64 &&
                   offsetof(struct push_qp, rec) % 64 == 0,
               "the responder's note and the receiver's two counts have a cache line each");

struct push_region {
    uint32_t magic, version, pid, pad;
    _Atomic uint64_t bell;       /* records written: a poll that saw it unmoved has none to collect */
    _Atomic int32_t port_up[SN_MAX_DEVICES][SN_MAX_PORTS];
    _Atomic uint64_t port_rx_bytes[SN_MAX_DEVICES][SN_MAX_PORTS];
    _Atomic uint64_t port_rx_packets[SN_MAX_DEVICES][SN_MAX_PORTS];
    struct push_qp qp[PUSH_QP_SLOTS];
    struct push_mr mr[PUSH_MR_SLOTS];
};

#endif
