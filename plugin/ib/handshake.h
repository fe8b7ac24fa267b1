/* plugin/ib/handshake.h: the versioned wire format of a railnet connection.
 *
 * Four things cross the wire before any RDMA traffic (docs/design.md,
 * "A connection"):
 *   1. the 128-byte listen handle (NCCL copies it between ranks),
 *   2. HELLO   connector -> listener : its QPs and the address/rkey of its CTS ring,
 *   3. REPLY   listener  -> connector: its QPs and its sizes area (or a rejection),
 *   4. READY   connector -> listener : the connector's QPs are in RTS.
 *
 * Every byte is little-endian and placed by explicit encoders (no struct is
 * sent as is). Every message starts with a 16-byte header {magic, version,
 * type, length, crc32}. The parsers treat their input as untrusted: they
 * check magic, version, type, exact length, CRC, every count and every field
 * range before filling the output, and never read outside [buf, buf+len).
 * On failure they return a non-zero hs_status and write a one-line reason
 * into err (for the caller's WARN). This module does no I/O and no logging.
 */
#ifndef RAILNET_IB_HANDSHAKE_H
#define RAILNET_IB_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

#define HS_MAGIC 0x544e4c52u /* "RLNT" in memory order */
#define HS_VERSION 5 /* 2: chunk index in the immediate, failover messages on the socket;
                      3: a size field of all ones in the immediate means the posted size;
                      4: 21-bit sizes of whole messages, split ones' size in pieces (comm.h);
                      5: up to HS_MAX_CHUNKS chunks of at most HS_CHUNK_MAX bytes, more
                         chunks than QPs (messages over 2 GiB) */
#define HS_HANDLE_SIZE 128   /* NCCL_NET_HANDLE_MAXSIZE */
#define HS_HANDLE_USED 52    /* bytes of the handle that carry fields; the rest is zero */
#define HS_HEADER_SIZE 16
#define HS_MAX_QPS 16        /* QPs per connection (RAILNET_QPS_PER_CONN upper bound) */
#define HS_MAX_PORTS 2       /* ports of one (merged) device */
#define HS_QP_INFO_SIZE 32
#define HS_HELLO_FIXED 52
#define HS_REPLY_FIXED 32
#define HS_READY_SIZE (HS_HEADER_SIZE + 4)
#define HS_MSG_MAX (HS_HEADER_SIZE + HS_HELLO_FIXED + HS_MAX_QPS * HS_QP_INFO_SIZE)
#define HS_ERR_LEN 160

/* Data-path constants both ends must agree on; carried in HELLO and checked. */
#define HS_CTS_SLOTS 32      /* NCCL_NET_MAX_REQUESTS */
#define HS_CTS_ENTRY_SIZE 64
#define HS_MAX_RECVS 8
/* A message is written in at most HS_MAX_CHUNKS chunks (the immediate's
 * 4-bit chunk index) of at most HS_CHUNK_MAX bytes each, so one isend
 * carries at most HS_MAX_CHUNKS * HS_CHUNK_MAX bytes (4 GiB). One chunk is
 * one RDMA WRITE: well within every NIC's max_msg_sz (ConnectX: 1 GiB),
 * and short enough that a NIC acknowledging whole messages (softnic, which
 * gives up on a QP that sees no answer for 2 s) answers each in time on a
 * slow host. The sizes area's 32-bit entries suffice: only messages of one
 * or two chunks use it (three or more carry their size in their chunks'
 * immediates, comm.h). */
#define HS_MAX_CHUNKS 16
#define HS_CHUNK_MAX (256ull << 20)
#define HS_MSG_BYTES_MAX ((uint64_t)HS_MAX_CHUNKS * HS_CHUNK_MAX)

enum hs_type { HS_HELLO = 1, HS_REPLY = 2, HS_READY = 3 };

enum hs_status {
    HS_OK = 0,
    HS_ESHORT,    /* fewer bytes than the structure needs */
    HS_EMAGIC,    /* not a railnet message */
    HS_EVERSION,  /* railnet, but another protocol version */
    HS_ETYPE,     /* unexpected message type */
    HS_ELENGTH,   /* length field disagrees with the counts or the bytes */
    HS_ECRC,      /* bytes corrupted */
    HS_EFIELD,    /* a count or field out of range, reserved bits set */
};

/* Reasons a listener rejects a HELLO (REPLY.status). */
enum hs_reject {
    HS_REJECT_NONE = 0,
    HS_REJECT_PROTOCOL = 1,   /* the HELLO did not parse */
    HS_REJECT_WRONG_DEVICE = 2, /* the handle was issued by another device */
    HS_REJECT_LINK_LAYER = 3, /* IB vs Ethernet mismatch */
    HS_REJECT_RESOURCES = 4,  /* QP/MR creation failed on the listener */
    HS_REJECT_MAX = 4,
};

struct hs_handle {
    uint16_t version;    /* filled by encode with HS_VERSION; parse checks it */
    uint8_t cm;          /* 0: TCP bootstrap at addr:tcp_port; 1: RDMA CM listening there */
    uint8_t family;      /* 4 or 6 */
    uint8_t link_layer;  /* IBV_LINK_LAYER_INFINIBAND 1, _ETHERNET 2 */
    uint8_t nports;      /* 1..HS_MAX_PORTS */
    uint16_t tcp_port;   /* host order */
    uint8_t addr[16];    /* IPv4 in the first 4 bytes when family == 4; with cm
                          * and two ports, bytes 4..7 the second port's IPv4
                          * (the CM listens on both at tcp_port) */
    uint64_t guid;       /* device guid of the listener */
    uint64_t nonce;      /* names the listen comm; echoed in HELLO */
};

struct hs_qp_info {
    uint32_t qpn;        /* 24 bits */
    uint32_t psn;        /* 24 bits */
    uint16_t lid;
    uint8_t port_num;    /* verbs port number, >= 1 */
    uint8_t port_idx;    /* index into the device's ports, < nports */
    uint8_t mtu;         /* enum ibv_mtu: 1 (256) .. 5 (4096) */
    uint8_t gid_index;
    uint8_t is_global;   /* 1: address by GID (RoCE, or IB across subnets) */
    uint8_t gid[16];
};

struct hs_hello {
    uint64_t target_guid; /* copied from the handle: the device the connector wants */
    uint64_t nonce;       /* copied from the handle */
    uint64_t src_guid;
    uint8_t link_layer;
    uint8_t nqps;
    uint8_t nports;
    uint16_t cts_slots, cts_entry_size, max_recvs;
    uint64_t cts_addr;             /* the connector's (sender's) CTS ring */
    uint32_t cts_rkey[HS_MAX_PORTS];
    struct hs_qp_info qp[HS_MAX_QPS];
};

struct hs_reply {
    uint32_t status;      /* enum hs_reject; non-zero: nqps == 0 */
    uint64_t guid;
    uint8_t nqps;
    uint8_t nports;
    uint64_t sizes_addr;  /* the listener's (receiver's) sizes area */
    uint32_t sizes_rkey[HS_MAX_PORTS];
    struct hs_qp_info qp[HS_MAX_QPS];
};

/* ---- RDMA CM (RAILNET_CM=rdmacm): the QPs' numbers, PSNs, GIDs and MTUs
 * travel in the CM's own messages; what is left rides as private data, one
 * CM connection per QP. The REQ carries at most 56 bytes, the REP 196, the
 * REJ 148: these encodings fit. Both repeat the connection's fields in every
 * QP's message, so each is checked on its own and against the first.
 * Layout (little-endian): 0 magic, 4 version, 6 type, 7 qp index, 8 nqps,
 * 9 nports, 10 link layer (HELLO) / status (REPLY), 11 zero, then
 *   HELLO: 12 conn id, 20 nonce, 28 target guid, 36 cts addr, 44 cts rkeys
 *          [2], 52 crc32 of bytes 0..51            (56 bytes)
 *   REPLY: 12 guid, 20 sizes addr, 28 sizes rkeys[2], 36 crc32 (40 bytes)
 * The data-path constants (CTS slots, entry size, receives per request) are
 * those of the version. */
#define HS_CM_HELLO 4
#define HS_CM_REPLY 5
#define HS_CM_HELLO_SIZE 56
#define HS_CM_REPLY_SIZE 40

struct hs_cm_hello {
    uint8_t qp_index, nqps, nports, link_layer;
    uint64_t conn_id;     /* random per connect: groups the QPs of one connection */
    uint64_t nonce;       /* copied from the handle */
    uint64_t target_guid; /* copied from the handle */
    uint64_t cts_addr;
    uint32_t cts_rkey[HS_MAX_PORTS];
};

struct hs_cm_reply {
    uint8_t qp_index, nqps, nports;
    uint8_t status;       /* enum hs_reject */
    uint64_t guid;
    uint64_t sizes_addr;
    uint32_t sizes_rkey[HS_MAX_PORTS];
};

/* Encoders write exactly HS_CM_*_SIZE bytes (0 when out of range). The
 * parsers take the private data as the CM delivers it (padded with zeros to
 * the message's size): they check magic, version, type, CRC, counts and that
 * the padding is zero. */
size_t hs_cm_hello_encode(const struct hs_cm_hello *m, uint16_t version, uint8_t *out, size_t cap);
size_t hs_cm_reply_encode(const struct hs_cm_reply *m, uint16_t version, uint8_t *out, size_t cap);
enum hs_status hs_cm_hello_parse(const uint8_t *buf, size_t len, struct hs_cm_hello *out,
                                 char err[HS_ERR_LEN]);
enum hs_status hs_cm_reply_parse(const uint8_t *buf, size_t len, struct hs_cm_reply *out,
                                 char err[HS_ERR_LEN]);

const char *hs_status_str(enum hs_status s);
const char *hs_reject_str(uint32_t reason);

/* A fresh listen nonce: random (getrandom), never 0; from the clock and the
 * pid when the kernel's pool cannot answer at once. Names a listener in its
 * handle so that a stale or foreign handle is refused. */
uint64_t hs_nonce_new(void);

/* CRC-32 (IEEE, reflected) of len bytes. */
uint32_t hs_crc32(const void *buf, size_t len);

/* Handle: encode writes exactly HS_HANDLE_SIZE bytes (tail zeroed). */
void hs_handle_encode(const struct hs_handle *h, uint8_t out[HS_HANDLE_SIZE]);
enum hs_status hs_handle_parse(const uint8_t *buf, size_t len, struct hs_handle *out,
                               char err[HS_ERR_LEN]);

/* Messages: encoders return the number of bytes written (<= cap) or 0 when
 * the input is out of range or cap is too small. `version` is normally
 * HS_VERSION; tests pass another one to play a peer of another release. */
size_t hs_hello_encode(const struct hs_hello *m, uint16_t version, uint8_t *out, size_t cap);
size_t hs_reply_encode(const struct hs_reply *m, uint16_t version, uint8_t *out, size_t cap);
size_t hs_ready_encode(uint16_t version, uint8_t *out, size_t cap);

/* Header: checks magic, version, type in {HELLO, REPLY, READY} and that the
 * length is in [HS_HEADER_SIZE, HS_MSG_MAX]; tells how many bytes the whole
 * message has so that a reader knows how much more to read. */
enum hs_status hs_header_parse(const uint8_t *buf, size_t len, uint16_t *type,
                               uint32_t *msg_len, char err[HS_ERR_LEN]);

enum hs_status hs_hello_parse(const uint8_t *buf, size_t len, struct hs_hello *out,
                              char err[HS_ERR_LEN]);
enum hs_status hs_reply_parse(const uint8_t *buf, size_t len, struct hs_reply *out,
                              char err[HS_ERR_LEN]);
enum hs_status hs_ready_parse(const uint8_t *buf, size_t len, char err[HS_ERR_LEN]);

#endif
