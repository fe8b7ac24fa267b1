/* plugin/ib/stats.h: per-connection traffic counters (RAILNET_STATS=1).
 * Counting is a few additions on the owning thread, skipped when disabled;
 * stats_print() logs per-QP and per-port totals once, at close. A sender
 * counts bytes and RDMA writes per QP; a receiver counts immediates per QP
 * (one per QP that carried part of a message) and bytes per message. A GIN
 * collComm counts its own (plugin/gin/gin.h) and prints them here. */
#ifndef RAILNET_IB_STATS_H
#define RAILNET_IB_STATS_H

#include <stdint.h>

#include "handshake.h"
#include "qp.h"

struct stats_qp {
    uint64_t bytes;
    uint64_t msgs;
};

struct stats {
    int enabled;
    struct stats_qp qp[HS_MAX_QPS];
    uint64_t size_writes; /* sender: messages whose size went in a write of its own (comm.h, IMM_HAS_SIZE) */
    uint64_t rx_bytes;  /* receiver: bytes of completed messages */
    uint64_t rx_msgs;
};

static inline void stats_tx(struct stats *s, int qpi, uint64_t bytes)
{
    if (s->enabled) {
        s->qp[qpi].bytes += bytes;
        s->qp[qpi].msgs++;
    }
}
static inline void stats_size_write(struct stats *s)
{
    if (s->enabled)
        s->size_writes++;
}
static inline void stats_rx(struct stats *s, int qpi)
{
    if (s->enabled)
        s->qp[qpi].msgs++;
}
static inline void stats_rx_bytes(struct stats *s, int qpi, uint64_t bytes)
{
    (void)qpi;
    if (s->enabled) {
        s->rx_bytes += bytes;
        s->rx_msgs++;
    }
}

/* Logs the counters of one connection (INFO, NCCL_NET) when enabled: per
 * QP (with the port and QP number of qps[i]) and per port. */
void stats_print(const struct stats *s, int send, const char *dev_name, const struct qp_conn *qps, int nqps,
                 const struct qp_port *ports, int nports);

/* A GIN collComm's send side (plugin/gin, RAILNET_STATS=1), at closeColl:
 * work requests posted (completion markers included), how many were
 * signaled, and how many successful completions were polled. */
void stats_print_gin(const char *dev_name, int rank, int nranks, uint64_t wrs, uint64_t signaled, uint64_t markers,
                     uint64_t cqes);

#endif
