/* plugin/ib/failover_int.h: what the files of the failover share (the
 * contract of the whole is failover.h): the per-comm state, the control
 * messages on the connection's socket, and the steps one file calls in
 * another. failover_channel.c: the registry (one WARN per port failure) and
 * the socket; failover.c: failing over and settling chunks, dispatch,
 * attach; failover_rebuild.c: taking a port back. */
#ifndef RAILNET_IB_FAILOVER_INT_H
#define RAILNET_IB_FAILOVER_INT_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "failover.h"


#define FO_MAGIC 0x4f464e52u /* "RNFO" */
#define FO_HDR 8
#define FO_QP_INFO 32
#define FO_REP_SLOT (8 + 2 * COMM_MAX_RECVS)
#define FO_TX_MAX 8192
#define FO_RX_MAX 2048
#define FO_POLL_NS 1000000ull

enum fo_type {
    FO_DOWN = 1,        /* u32 QP mask: these QPs are dead here, kill yours */
    FO_SYNC_REQ = 2,    /* send -> recv: u32 epoch, u32 dead QP mask */
    FO_SYNC_REP = 3,    /* recv -> send: u32 epoch, u32 0, COMM_SLOTS x {u64 seq+1 or 0, u16 chunks[8]} */
    FO_UP = 4,          /* recv -> send: u32 QP mask whose port is back here */
    FO_REBUILD_REQ = 5, /* send -> recv: u32 id, u32 QP mask, u64 0, infos of the new QPs */
    FO_REBUILD_REP = 6, /* recv -> send: u32 id, u32 QP mask, u64 probe addr, u32 rkey, u32 0, infos */
    FO_REBUILD_NAK = 7, /* recv -> send: u32 id, u32 0: not now (its port is still down) */
    FO_PROBE_OK = 8,    /* send -> recv: u32 id, u32 QP mask: the new QPs carried a probe */
    FO_PUB = 9,         /* recv -> send: u64 addr, u32 rkey, u32 0: its published chunk state */
};

#define FO_PUB_BYTES (COMM_SLOTS * COMM_MAX_RECVS * 4)

enum rb_stage { RB_NONE = 0, RB_WAIT_REP, RB_PROBING, RB_WAIT_OK };

struct fo_comm {
    struct comm *c;
    struct fo_comm *next;
    int id;
    char peer[64];
    uint32_t dead;          /* QPs out of use */
    uint32_t port_down;     /* local ports whose last event said down */
    /* send side: sync of what landed */
    uint32_t epoch, sync_wait;
    int need_sync;
    uint32_t cover[COMM_MAX_QPS]; /* epoch of the sync that settles dead QP i's chunks */
    /* a read sync that found chunks not counted asked the receiver (epoch
     * asked); meanwhile it reads again from reread_ns on (0: read posted),
     * so a receive that completed after all settles without its thread */
    uint32_t asked;
    uint64_t reread_ns;
    unsigned rr;
    /* recv side */
    uint32_t cts_redo;      /* slots whose CTS must be written again */
    /* recovery */
    int rb_stage;
    int rb_want;            /* send: try to rebuild when nothing else is pending */
    uint32_t rb_id, rb_mask, probe_left;
    uint64_t *probe;        /* send: probe source; recv: probe target */
    struct ibv_mr *probe_mr;
    uint64_t probe_raddr;
    uint32_t probe_rkey;
    /* chunk state: recv publishes it (c->fo_pub), send reads it */
    uint32_t *pub;          /* recv: published words; send: the copy read */
    struct ibv_mr *pub_mr;
    uint64_t pub_raddr;
    uint32_t pub_rkey;
    int replays;            /* send: chunks written again, in flight */
    /* control channel */
    uint8_t tx[FO_TX_MAX];
    size_t tx_len;
    uint8_t rx[FO_RX_MAX];
    size_t rx_len;
    uint64_t last_rx_ns;
};

static inline void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}
static inline uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t get64(const uint8_t *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }


/* failover_channel.c */
void fo_reg_add(struct fo_comm *f);
void fo_reg_del(struct fo_comm *f);
const char *fo_kind_name(const struct comm *c);
/* One WARN per device port and failure naming every comm of the device. */
void fo_reg_report_down(struct fo_comm *f, int p, const char *why, uint32_t qpn);
void fo_reg_port_back(struct comm *c, int p);
/* Queues a control message (flushed by fo_flush_tx, without blocking). */
void fo_send(struct fo_comm *f, int type, const uint8_t *payload, size_t len);
void fo_flush_tx(struct fo_comm *f);
void fo_put_qp_info(uint8_t *p, const struct qp_conn *q);
/* 1 when the fields are in range. */
int fo_get_qp_info(const uint8_t *p, struct hs_qp_info *i);

/* failover.c */
uint32_t fo_port_qps(const struct comm *c, int p);
void fo_qp_to_err(struct qp_conn *q);
void fo_stats_moment(const struct fo_comm *f, const char *when);

/* failover_rebuild.c */
void fo_rebuild_start(struct fo_comm *f);
void fo_rebuild_answer(struct fo_comm *f, uint32_t id, uint32_t mask, const uint8_t *infos);
void fo_rebuild_connect(struct fo_comm *f, const uint8_t *m, size_t len);
void fo_probe_ok(struct fo_comm *f, uint32_t id, uint32_t mask);

#endif
