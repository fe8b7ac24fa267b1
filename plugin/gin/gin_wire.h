/* plugin/gin/gin_wire.h: what GIN ranks say to each other over the TCP
 * sockets of a collComm, and blocking framed I/O with a deadline.
 *
 * The listen handle is plugin/ib's (hs_handle: magic, version, address,
 * device guid, nonce naming the listener). Then, per pair of ranks, the
 * higher rank connects to the lower one's listener:
 *   HELLO  connector -> listener: job shape (nranks, both ranks), both
 *          listeners' nonces, device guid, link layer, whether its
 *          collComm has proxy QPs (enum gw_qps) and, if so, its QPs
 *          towards the listener;
 *   REPLY  listener -> connector: the same from the other side, or a
 *          rejection status (then no QPs, and the listener's own gw_qps);
 *   READY  every rank -> every peer, once its QPs towards that peer are in
 *          RTS (no RDMA before all are);
 *   WIN    every rank -> every peer, once per regMrSym (collective): the
 *          registration's sequence number, status, address, size, rkey;
 *   GDAKI  every rank -> every peer, once, at createContext of the GDAKI
 *          type: the peer message with the one DEVX QP (posted by NCCL's
 *          device code) this rank has towards the receiver.
 * Every message: a 16-byte header {magic "RLGN", version, type, length,
 * crc32 of the message with the crc field zero}, then little-endian fields at
 * fixed offsets. Parsers treat input as untrusted: exact length, CRC, every
 * count and range checked, err says why. No logging here.
 *
 * Versions: the header's version must be GW_VERSION exactly. The gw_qps
 * byte of HELLO and REPLY (offset 43 of the body) came later within version
 * 1: it was reserved and had to be zero, and zero (GW_QPS_PROXY) still means
 * what every collComm had then, one QP per port. So ranks of either kind
 * connect as before wherever both sides have proxy QPs; a collComm without
 * them (GW_QPS_NONE) is refused by an older peer (reserved bytes not zero),
 * and GW_REJECT_TYPE reads there as an unknown status: a refusal either way,
 * never a collComm that half works. */
#ifndef RAILNET_GIN_WIRE_H
#define RAILNET_GIN_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "handshake.h"

#define GW_MAGIC 0x4e474c52u /* "RLGN" in memory order */
#define GW_VERSION 1
#define GW_HEADER 16
#define GW_PEER_FIXED 48
#define GW_WIN_SIZE (GW_HEADER + 32)
#define GW_MSG_MAX (GW_HEADER + GW_PEER_FIXED + HS_MAX_PORTS * HS_QP_INFO_SIZE)

enum gw_type { GW_HELLO = 1, GW_REPLY = 2, GW_READY = 3, GW_WIN = 4, GW_GDAKI = 5 };

enum gw_reject {
    GW_OK = 0,
    GW_REJECT_JOB = 1,    /* nonce, rank or rank count do not match this listener's job */
    GW_REJECT_DEVICE = 2, /* link layer or port count cannot be connected */
    GW_REJECT_RESOURCES = 3,
    GW_REJECT_TYPE = 4,   /* one side has proxy QPs, the other none: they offer NCCL different GIN types */
};

/* What the sender's collComm holds towards the receiver (HELLO, REPLY;
 * a GW_GDAKI message carries GW_QPS_PROXY, its one QP being the context's). */
enum gw_qps {
    GW_QPS_PROXY = 0,     /* one RC QP per port (the proxy type, RMA tables): nqps 1..HS_MAX_PORTS */
    GW_QPS_NONE = 1,      /* none (the GDAKI type: its contexts make their own): nqps 0 */
};

struct gw_peer {
    uint32_t status;      /* enum gw_reject (REPLY only) */
    uint32_t nranks, src_rank, dst_rank;
    uint64_t dst_nonce;   /* nonce of the receiver's listen handle */
    uint64_t src_nonce;   /* nonce of the sender's own listen handle */
    uint64_t guid;
    uint8_t link_layer, nports, nqps;
    uint8_t qps;          /* enum gw_qps; in a rejection, the refusing side's own */
    struct hs_qp_info qp[HS_MAX_PORTS];
};

struct gw_win {
    uint32_t seq;         /* registrations before this one on the collComm */
    uint32_t status;      /* 0, or the sender's registration failed */
    uint64_t addr, size;
    uint32_t rkey;
};

const char *gw_reject_str(uint32_t s);
/* What a collComm with `qps` (enum gw_qps) holds, in words, for WARNs. */
const char *gw_qps_str(uint8_t qps);

size_t gw_peer_encode(uint16_t type, const struct gw_peer *m, uint8_t *out, size_t cap);
int gw_peer_parse(const uint8_t *buf, size_t len, uint16_t want, struct gw_peer *out, char err[HS_ERR_LEN]);
size_t gw_ready_encode(uint8_t *out, size_t cap);
int gw_ready_parse(const uint8_t *buf, size_t len, char err[HS_ERR_LEN]);
size_t gw_win_encode(const struct gw_win *m, uint8_t *out, size_t cap);
int gw_win_parse(const uint8_t *buf, size_t len, struct gw_win *out, char err[HS_ERR_LEN]);

/* Incremental reader of one framed message from a non-blocking socket:
 * 1 when a whole message is in buf, 0 when more is needed, -1 on EOF, a
 * socket error or a bad header (err says which). */
struct gw_rx {
    uint8_t buf[GW_MSG_MAX];
    size_t off, want;
};
void gw_rx_init(struct gw_rx *rx);
int gw_rx_step(int fd, struct gw_rx *rx, char err[HS_ERR_LEN]);

/* Blocking (poll) until the whole buffer is sent / one message is read or
 * deadline_ns (comm_now_ns clock) passes. 0 or -1 with err set. */
int gw_send(int fd, const uint8_t *buf, size_t len, uint64_t deadline_ns, char err[HS_ERR_LEN]);
int gw_recv(int fd, struct gw_rx *rx, uint64_t deadline_ns, char err[HS_ERR_LEN]);

#endif
