/* plugin/ib/comm.h: the comm objects of a connection (docs/design.md, "A
 * connection").
 *
 * Layer: comms. Built on the low layer (devices, qp, stats, handshake's
 * constants); comm_setup.c builds comms during the handshake, the data path
 * (p2p, flush) and errors.c drive them. Nothing here calls upward.
 *
 * Contract:
 *  - comm_send_create / comm_recv_create make a comm whose QPs are in INIT:
 *    a send comm owns the CTS ring the receiver writes into, a recv comm the
 *    sizes area the sender writes into (for messages whose size does not fit
 *    in the immediate). Both own nqps QPs (QP i on port i % nports) and one
 *    CQ. On failure they WARN why, free what they built and set *out NULL.
 *  - Once connected a comm keeps the TCP socket of its handshake (fd): its
 *    EOF tells that the peer process is gone.
 *  - comm_close_* free everything, also after errors; NULL is accepted. A
 *    recv comm's flush state (flush.c) is freed by the data path first
 *    (p2p_close_recv).
 * A comm is used by one thread at a time (NCCL's rule); different comms may
 * be used concurrently. */
#ifndef RAILNET_IB_COMM_H
#define RAILNET_IB_COMM_H

#include <infiniband/verbs.h>
#include <stdint.h>

#include "errors.h"
#include "handshake.h"
#include "nccl_net_v8.h"
#include "qp.h"
#include "stats.h"

#define COMM_SLOTS HS_CTS_SLOTS        /* == NCCL_NET_MAX_REQUESTS */
#define COMM_MAX_RECVS HS_MAX_RECVS
#define COMM_MAX_QPS HS_MAX_QPS
#define COMM_RECV_DEPTH (COMM_SLOTS * COMM_MAX_RECVS) /* immediates one QP can owe */
/* Receives a recv comm's QP gets again at once, one post for the batch (the
 * NIC's receive queue lock taken once): the queue holds COMM_RECV_BATCH
 * more than can be owed, so fewer than a batch consumed never starve it. */
#define COMM_RECV_BATCH 16
#define COMM_RECV_POSTED (COMM_RECV_DEPTH + COMM_RECV_BATCH)
/* A recv comm's CTS writes ask for a completion one in this many per QP
 * (and each covers the unsignaled ones before it on its QP). */
#define COMM_CTS_SIGNAL_EVERY 8

/* One entry of a CTS slot: what the receiver tells the sender about one
 * buffer of a posted receive. Written by RDMA WRITE into the sender's ring;
 * `seq` (the receive's sequence number + 1) is last so that a sender that
 * sees it set sees a whole entry. */
struct cts_entry {
    uint64_t addr;
    uint32_t rkey[HS_MAX_PORTS];
    uint64_t size;
    int32_t tag;
    uint16_t nreqs;
    uint16_t sub;
    uint32_t slot;
    uint32_t pad[5];
    uint64_t seq;
};
_Static_assert(sizeof(struct cts_entry) == HS_CTS_ENTRY_SIZE, "CTS entry is 64 bytes on the wire");

/* Immediate data of the write carrying one chunk of a message: bits 0-4
 * slot, 5-7 sub (index in the grouped receive), 8 the parity of the
 * receive's sequence / COMM_SLOTS (which use of the slot), 9 the message's
 * size is in the immediate(s), 10 the message is split over QPs.
 * - Whole (bit 10 clear: one chunk): bits 11-31 the size, up to
 *   IMM_WHOLE_MAX bytes, or IMM_WHOLE_POSTED for a message as large as the
 *   receive it fills (the sender read that size in the CTS entry).
 * - Split: bits 11-14 number of chunks - 1, 15-18 this chunk's index,
 *   19-31 its piece of the size: chunk k < IMM_PIECES carries size bits
 *   13k..13k+12 and the receiver ORs the pieces as chunks land, so a
 *   message of n chunks carries sizes below 2^(13 min(n, IMM_PIECES)) - 1
 *   (64 MiB - 1 over two QPs); all ones (imm_pieces_posted) is the
 *   posted size.
 * Without bit 9 the size was written into the receiver's sizes area
 * beforehand, on the QP of chunk 0: a second write per message, which
 * NCCL's partial steps (LL's, the last of a Simple transfer) would pay on
 * every message if the size field were narrow. Chunk index and parity let
 * the receiver count each chunk once, whichever QP carried it: a chunk
 * written again after a port failed (failover.h) is neither counted twice
 * nor counted for the slot's next receive. */
#define IMM_SLOT(i) ((i) & 0x1fu)
#define IMM_SUB(i) (((i) >> 5) & 0x7u)
#define IMM_PARITY(i) (((i) >> 8) & 1u)
#define IMM_HAS_SIZE(i) (((i) >> 9) & 1u)
#define IMM_SPLIT(i) (((i) >> 10) & 1u)
#define IMM_NQ(i) (IMM_SPLIT(i) ? (((i) >> 11) & 0xfu) + 1u : 1u)
#define IMM_CHUNK(i) (IMM_SPLIT(i) ? ((i) >> 15) & 0xfu : 0u)
#define IMM_WHOLE_SIZE(i) ((i) >> 11)
#define IMM_WHOLE_MAX ((1u << 21) - 2u)
#define IMM_WHOLE_POSTED ((1u << 21) - 1u)
#define IMM_PIECE(i) ((i) >> 19)
#define IMM_PIECE_BITS 13u
#define IMM_PIECES 4u
#define IMM_SEQ_PARITY(seq) ((unsigned)((seq) / COMM_SLOTS) & 1u)

/* The immediate of chunk k of nq; size: the whole message's size field
 * (its size or IMM_WHOLE_POSTED) when nq == 1, else the message's size. */
static inline uint32_t imm_make(unsigned slot, unsigned sub, unsigned nq, unsigned k, unsigned parity, int has_size,
                                uint64_t size)
{
    uint32_t v = slot | sub << 5 | parity << 8 | (uint32_t)(has_size != 0) << 9;
    if (nq <= 1)
        return v | (has_size ? (uint32_t)size << 11 : 0u);
    uint32_t piece = has_size && k < IMM_PIECES ? (uint32_t)(size >> (IMM_PIECE_BITS * k)) & 0x1fffu : 0u;
    return v | 1u << 10 | (nq - 1) << 11 | k << 15 | piece << 19;
}

/* A split message of nq (>= 2) chunks: the pieces' value that names the
 * posted size; sizes below it ride in the pieces as they are. */
static inline uint64_t imm_pieces_posted(unsigned nq)
{
    return (1ull << (IMM_PIECE_BITS * (nq < IMM_PIECES ? nq : IMM_PIECES))) - 1u;
}

enum req_type { REQ_FREE = 0, REQ_SEND, REQ_RECV, REQ_FLUSH };

struct comm;

struct request {
    struct comm *comm;
    int type;
    int index;          /* in comm->reqs */
    int done;
    int pending;        /* signaled work requests still owed a completion */
    int n;              /* receives in the group (1 for a send) */
    uint64_t size[COMM_MAX_RECVS];   /* send: bytes; recv: bytes received */
    uint64_t posted[COMM_MAX_RECVS]; /* recv: posted sizes */
    uint16_t seen[COMM_MAX_RECVS]; /* recv: chunks received per sub (bit k: chunk k) */
    uint64_t pieces[COMM_MAX_RECVS]; /* recv: a split message's size pieces ORed so far, per sub */
    int subs_done;
    int slot;
    uint64_t seq;
    /* send: what writing a chunk again needs (failover) */
    char *data;
    void *mh;
    uint64_t raddr;
    uint32_t rkey[HS_MAX_PORTS];
    uint64_t chunk;     /* bytes per chunk */
    uint64_t imm_size;  /* imm_make's size: a whole message's field (IMM_WHOLE_POSTED: the posted size), or a split one's size */
    uint8_t imm_has_size; /* 0: chunk 0 writes the size into the receiver's sizes area first */
    uint16_t unacked;   /* bit k: chunk k not known to have landed */
    uint16_t replayed;  /* bit k: chunk k was written again and is in flight */
    uint8_t nq;         /* chunks */
    uint8_t sub;        /* index in the receiver's grouped receive */
    uint8_t chunk_qp[HS_MAX_CHUNKS]; /* QP that carries chunk k now */
    int sq_need;        /* send: work requests per QP it holds of the comm's budget (send_comm.sq_used) */
    void *phandle[COMM_MAX_RECVS]; /* NCCL's profiler handles (send: [0]) */
    void *prof_ev[HS_MAX_CHUNKS];  /* profiler events started (prof.h): send: per chunk; recv: per buffer */
    uint8_t prof_started;          /* events this request started (at most PROF_EVENTS_PER_REQ) */
};
_Static_assert(HS_MAX_CHUNKS <= 16, "chunk bit masks (seen, unacked, replayed) are 16 bits");
_Static_assert(COMM_MAX_RECVS <= HS_MAX_CHUNKS, "a receive's profiler events fit prof_ev");

enum comm_kind { COMM_SEND = 1, COMM_RECV = 2 };

struct comm {
    int kind;
    int dev;
    char dev_name[64];
    int fd;                     /* TCP socket to the peer: EOF means peer gone (-1 with the RDMA CM) */
    /* RAILNET_CM=rdmacm: the connection's CM ids (comm_setup_cm.c), freed
     * by cm_release, passed in by comm_setup_cm.c */
    void *cm;
    void (*cm_release)(struct comm *c);
    int nports;
    struct qp_port ports[HS_MAX_PORTS];
    struct ibv_cq *cq;
    int nqps;
    uint64_t max_chunk;         /* the device's largest RDMA WRITE (devices.h): HS_MAX_CHUNKS of them per message */
    /* On a device whose PCIe link bounds it (devices_host_bound), while
     * the device has at least as many comms of this kind open as ports
     * (comm_homed), the QP (if live) of this comm's unsplit messages and
     * CTS writes: the device's comms of one kind take the QPs in turn as
     * they are built, so connections share out the ports while each keeps
     * one QP busy; the link, not a port, is then the bound. Otherwise
     * whole messages take the live QPs in turn: a lone connection, as
     * NCCL 2.30's single p2p connection per peer, may need more than one
     * port's bandwidth (RAILNET_STATS showed every write of such a
     * connection on port 1). On 25 Gb/s ports round robin was ahead for
     * small send_recv. */
    int keep_home;
    int counted;                /* in its device's open comms (devices_comm_open) */
    unsigned home;
    unsigned rr;                /* the next live QP in turn for a whole message (while not comm_homed); starts at home */
    struct qp_conn qps[COMM_MAX_QPS];
    struct qp_params qpp;
    int ready;
    ncclResult_t error;         /* sticky: once set every call returns it */
    uint64_t last_peer_check_ns;
    uint64_t peer_gone_ns;      /* 0 while the peer socket is open */
    uint64_t last_async_ns;
    uint64_t progress_ns;       /* comm_now_ns at the latest p2p_progress: its callers' peer check */
    struct errors_watch async;  /* errors.c: the device's async events this comm has seen */
    int inflight;
    /* failover.c (data path, attached at the first isend/irecv): fo is NULL
     * when RAILNET_FAILOVER=0 or the device has one port; errors.c records
     * port events for it in fo_ev_down/up (bit p); comm_release calls
     * fo_release, passed in by failover.c */
    struct fo_comm *fo;
    int fo_ready;
    uint32_t fo_ev_down, fo_ev_up;
    void (*fo_release)(struct comm *c);
    uint32_t qp_live;           /* bit i: QP i takes new work */
    uint32_t qp_dead;           /* bit i: QP i is in ERR or being replaced: no receives reposted */
    int fo_fence;               /* send: chunks written again are in flight: no new message yet */
    uint32_t *fo_pub;           /* recv: [COMM_SLOTS][COMM_MAX_RECVS] (seq+1)<<16 | chunks counted, read by the sender */
    uint8_t qp_gen[COMM_MAX_QPS]; /* bumped when QP i is rebuilt: older completions are stale */
    struct request *free_list[2 * COMM_SLOTS];
    int nfree;
    struct request reqs[2 * COMM_SLOTS];
    struct stats stats;
};

/* 1 while c keeps its whole messages and CTS writes on its home QP
 * (keep_home). */
int comm_homed(const struct comm *c);

/* c's home QP (whether or not it is live or c homed). */
static inline int comm_home_qp(const struct comm *c)
{
    return (int)(c->home % (unsigned)c->nqps);
}

/* The QP to try first (failover_pick_qp) for the CTS write of receive
 * slot `turn`: the home QP, or the QPs in turn from the home QP (so that
 * connections NCCL drives in step write their CTS on different ports). */
static inline int comm_qp_hint(const struct comm *c, unsigned turn)
{
    return comm_homed(c) ? comm_home_qp(c) : (int)((turn + c->home) % (unsigned)c->nqps);
}

struct send_comm {
    struct comm c;
    struct cts_entry *ring;     /* [COMM_SLOTS][COMM_MAX_RECVS], written by the receiver */
    struct ibv_mr *ring_mr;
    uint32_t *size_stage;       /* [COMM_SLOTS][COMM_MAX_RECVS], source of size writes */
    struct ibv_mr *stage_mr;
    uint64_t remote_sizes_addr;
    uint32_t remote_sizes_rkey[HS_MAX_PORTS];
    uint64_t head;              /* sequence number of the receive being matched */
    uint8_t used;               /* bit r: entry r of the head slot already matched */
    uint64_t split_min;
    /* Work requests per QP that the send requests in flight may hold at
     * most, summed (request.sq_need): at most COMM_SEND_WR_BUDGET, so that
     * the send queues (COMM_SEND_WR_BUDGET + COMM_SEND_WR_RESERVE deep)
     * never overflow however NCCL's 32 requests split; ordinary messages
     * (one chunk per QP and a size write) never reach it. */
    int sq_used;
};
#define COMM_SEND_WR_BUDGET (2 * COMM_SLOTS)
#define COMM_SEND_WR_RESERVE 8 /* failover probes and sync reads */

struct flush_ctx;

struct recv_comm {
    struct comm c;
    struct cts_entry *stage;    /* [COMM_SLOTS][COMM_MAX_RECVS], source of CTS writes */
    struct ibv_mr *stage_mr;
    uint32_t *sizes;            /* [COMM_SLOTS][COMM_MAX_RECVS], written by the sender */
    struct ibv_mr *sizes_mr;
    uint64_t remote_ring_addr;
    uint32_t remote_ring_rkey[HS_MAX_PORTS];
    uint64_t next_seq;
    struct request *slot_req[COMM_SLOTS];
    /* CTS writes posted on each QP whose completion has not been polled yet.
     * A receive is done when its data lands, which can be before the CTS
     * write's ACK comes back (a NIC may coalesce ACKs), so live slots do not
     * bound these: each holds a send-queue entry until polled, and irecv
     * waits (returns no request) rather than overflow the send queue. */
    int cts_unpolled[COMM_MAX_QPS];
    int cts_unsignaled[COMM_MAX_QPS];  /* CTS writes posted without a completion since the last one with */
    uint64_t cts_wr_id;                /* of the last CTS write posted (a receive's profiler events name it) */
    int recv_consumed[COMM_MAX_QPS];   /* receives consumed and not posted again yet (< COMM_RECV_BATCH) */
    struct flush_ctx *flush;
};

/* wr_id of every work request: kind in the top byte, the QP's generation
 * (qp_gen), QP index, chunk index and request index. */
enum wr_kind { WR_SEND = 1, WR_CTS = 2, WR_RECV = 3, WR_FLUSH = 4, WR_SIZE = 5, WR_PROBE = 6, WR_SYNC = 7,
               WR_FLUSH_PART = 8 /* a flush READ before the request's last, unsignaled */ };
#define WR_ID(kind, qpi, req) ((uint64_t)(kind) << 56 | (uint64_t)(qpi) << 32 | (uint64_t)(uint32_t)(req))
#define WR_ID_GEN(kind, gen, qpi, k, req) \
    ((uint64_t)(kind) << 56 | (uint64_t)(gen) << 40 | (uint64_t)(qpi) << 32 | (uint64_t)(k) << 16 | (uint64_t)(req))
#define WR_KIND(id) ((int)((id) >> 56))
#define WR_GEN(id) ((int)(((id) >> 40) & 0xffu))
#define WR_QPI(id) ((int)(((id) >> 32) & 0xffu))
#define WR_CHUNK(id) ((int)(((id) >> 16) & 0xffu))
#define WR_REQ(id) ((int)((id)&0xffffu))

/* What the maker of a comm asks of its QPs beyond RAILNET_*: NCCL's
 * per-communicator config (net v10+), passed down by the face through
 * listen and connect. */
struct comm_opts {
    int tc; /* GRH traffic class 0..255; COMM_TC_DEFAULT: RAILNET_IB_TC or 0 */
};
#define COMM_TC_DEFAULT (-1)
/* The traffic class a comm's QPs get: RAILNET_IB_TC when it is set (the
 * operator's word wins, as NCCL_IB_TC does over NCCL's config in NCCL's
 * own transport), else opts' (NULL: none), else 0. */
int comm_traffic_class(const struct comm_opts *opts);

/* Building a comm (comm_setup.c); opts may be NULL (defaults). */
ncclResult_t comm_send_create(int dev, const struct comm_opts *opts, struct send_comm **out);
ncclResult_t comm_recv_create(int dev, int nqps, const struct comm_opts *opts, struct recv_comm **out);
void comm_send_free(struct send_comm *sc);
void comm_recv_free(struct recv_comm *rc);
/* The local half of the handshake's QP entries: out[0..c->nqps). */
void comm_describe_qps(const struct comm *c, struct hs_qp_info *out);
/* Moves QP i to RTS towards remote[i]; one WARN naming the port on failure. */
ncclResult_t comm_connect_qps(struct comm *c, const struct hs_qp_info *remote, int nqps);
/* Posts count receive WQEs on QP qpi (each write with immediate consumes
 * one), chained, COMM_RECV_BATCH per ibv_post_recv. Returns 0 or the errno
 * value of ibv_post_recv. A recv comm's QP gets COMM_RECV_POSTED. */
int comm_post_recvs(struct comm *c, int qpi, int count);

ncclResult_t comm_close_send(void *send_comm);
ncclResult_t comm_close_recv(void *recv_comm);
/* The device index a send/recv comm was made on (for registrations). */
int comm_device(const void *comm);

/* Requests: at most 2 * COMM_SLOTS per comm, never allocated on the hot path. */
struct request *comm_req_get(struct comm *c, int type);
void comm_req_put(struct request *r);

/* Marks the comm failed (first error wins, one WARN by the caller). */
void comm_fail(struct comm *c, ncclResult_t err);

uint64_t comm_now_ns(void);

#endif
