/* plugin/ib/qp.h: reliable-connected QPs of one connection, from creation to
 * RTS, with RoCE v2 (GID) or InfiniBand (LID) addressing.
 *
 * A connection owns nqps QPs; QP i uses local port i % nports, so a merged
 * dual-port device always gets at least one QP per port. Both ends describe
 * their QPs with struct hs_qp_info (handshake.h); qp_connect() moves a local
 * QP to RTR then RTS towards the remote one with path MTU = min of both ends
 * and the RAILNET_IB_TIMEOUT/RETRY_CNT/TC/SL values in struct qp_params. */
#ifndef RAILNET_IB_QP_H
#define RAILNET_IB_QP_H

#include <infiniband/verbs.h>
#include <stdint.h>

#include "handshake.h"

/* What a QP needs to know about the local port it is bound to. */
struct qp_port {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    uint8_t port_num;     /* verbs port number */
    uint8_t port_idx;     /* index in the (merged) device */
    uint8_t link_layer;   /* IBV_LINK_LAYER_* */
    uint8_t gid_index;
    union ibv_gid gid;
    uint16_t lid;
    enum ibv_mtu active_mtu;
};

struct qp_params {
    int timeout;    /* RAILNET_IB_TIMEOUT: 4.096 us * 2^timeout, 1..31 */
    int retry_cnt;  /* RAILNET_IB_RETRY_CNT: 0..7 */
    int tc;         /* RAILNET_IB_TC: traffic class 0..255 */
    int sl;         /* RAILNET_IB_SL: service level 0..15 */
    int max_send_wr, max_recv_wr;
};

struct qp_conn {
    struct ibv_qp *qp;
    const struct qp_port *port;
    uint32_t psn;
    enum ibv_mtu mtu;      /* path MTU after qp_connect */
    uint32_t remote_qpn;
    uint32_t max_inline;   /* bytes a work request may carry inline (what the provider granted) */
};

/* Inline data asked for at creation: a CTS entry (64 B) or a small NCCL
 * message goes in the work request itself, with no DMA read of the source. */
#define QP_INLINE_WANT 64

/* Creates an RC QP on port->pd with send and receive completions on cq and
 * moves it to INIT. Returns 0 or an errno value; err says which step failed. */
int qp_create(struct qp_conn *q, const struct qp_port *port, struct ibv_cq *cq,
              const struct qp_params *p, char *err, size_t errlen);
/* The local half of the handshake entry for this QP. */
void qp_describe(const struct qp_conn *q, struct hs_qp_info *out);
/* INIT -> RTR -> RTS towards remote. Returns 0 or an errno value. */
int qp_connect(struct qp_conn *q, const struct hs_qp_info *remote, const struct qp_params *p,
               char *err, size_t errlen);
/* Moves the QP to ERR (flushing outstanding work) then destroys it; safe on
 * a zeroed struct. */
void qp_destroy(struct qp_conn *q);

/* 256 << (mtu - 1) bytes */
int qp_mtu_bytes(enum ibv_mtu mtu);
/* A fresh 24-bit PSN. */
uint32_t qp_random_psn(void);

#endif
