/* plugin/ib/handshake.c: encoders and strict parsers of the handshake bytes.
 * Layouts are written out field by field at fixed offsets; see handshake.h. */
#include "handshake.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* Under libFuzzer the CRC is not enforced, so that mutations reach the field
 * checks behind it (the usual convention of fuzzing builds). */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define HS_FUZZING 1
#else
#define HS_FUZZING 0
#endif

/* ---- little-endian byte helpers (the wire never depends on host layout) */
static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

static enum hs_status fail(char *err, enum hs_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum hs_status fail(char *err, enum hs_status s, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, HS_ERR_LEN, fmt, ap);
        va_end(ap);
    }
    return s;
}

const char *hs_status_str(enum hs_status s)
{
    switch (s) {
    case HS_OK: return "ok";
    case HS_ESHORT: return "truncated";
    case HS_EMAGIC: return "bad magic";
    case HS_EVERSION: return "protocol version mismatch";
    case HS_ETYPE: return "unexpected message type";
    case HS_ELENGTH: return "bad length";
    case HS_ECRC: return "checksum mismatch (corrupted bytes)";
    case HS_EFIELD: return "field out of range";
    }
    return "unknown";
}

const char *hs_reject_str(uint32_t reason)
{
    switch (reason) {
    case HS_REJECT_NONE: return "accepted";
    case HS_REJECT_PROTOCOL: return "the listener could not parse our HELLO (corrupted or another protocol version)";
    case HS_REJECT_WRONG_DEVICE: return "the handle was issued by another device than the one listening";
    case HS_REJECT_LINK_LAYER: return "link layers differ (InfiniBand vs Ethernet)";
    case HS_REJECT_RESOURCES: return "the listener could not create its QPs or memory regions";
    }
    return "unknown reason";
}

uint32_t hs_crc32(const void *buf, size_t len)
{
    const uint8_t *p = buf;
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        for (int b = 0; b < 8; b++)
            crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static int all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

/* ---- handle: 0 magic, 4 version, 6 used-size, 8 family, 9 link layer,
 * 10 nports, 11 reserved, 12 tcp port, 14 reserved, 16 addr[16], 32 guid,
 * 40 nonce, 48 crc32 of bytes [0,48), 52.. zero. */
void hs_handle_encode(const struct hs_handle *h, uint8_t out[HS_HANDLE_SIZE])
{
    memset(out, 0, HS_HANDLE_SIZE);
    put32(out + 0, HS_MAGIC);
    put16(out + 4, h->version ? h->version : HS_VERSION);
    put16(out + 6, HS_HANDLE_USED);
    out[8] = h->family;
    out[11] = h->cm;
    out[9] = h->link_layer;
    out[10] = h->nports;
    put16(out + 12, h->tcp_port);
    memcpy(out + 16, h->addr, 16);
    put64(out + 32, h->guid);
    put64(out + 40, h->nonce);
    put32(out + 48, hs_crc32(out, 48));
}

enum hs_status hs_handle_parse(const uint8_t *buf, size_t len, struct hs_handle *out,
                               char err[HS_ERR_LEN])
{
    if (!buf || len < HS_HANDLE_SIZE)
        return fail(err, HS_ESHORT, "handle has %zu bytes, expected %d", buf ? len : 0, HS_HANDLE_SIZE);
    if (get32(buf) != HS_MAGIC)
        return fail(err, HS_EMAGIC, "handle magic 0x%08x, expected 0x%08x (not a railnet handle)",
                    get32(buf), HS_MAGIC);
    if (get16(buf + 4) != HS_VERSION)
        return fail(err, HS_EVERSION, "handle protocol version %u, this railnet speaks %u",
                    get16(buf + 4), HS_VERSION);
    if (get16(buf + 6) != HS_HANDLE_USED)
        return fail(err, HS_ELENGTH, "handle size field %u, expected %u", get16(buf + 6), HS_HANDLE_USED);
    uint32_t crc = hs_crc32(buf, 48);
    if (get32(buf + 48) != crc && !HS_FUZZING)
        return fail(err, HS_ECRC, "handle checksum 0x%08x, computed 0x%08x (corrupted handle)",
                    get32(buf + 48), crc);
    if (!all_zero(buf + HS_HANDLE_USED, HS_HANDLE_SIZE - HS_HANDLE_USED) || buf[11] > 1 || get16(buf + 14))
        return fail(err, HS_EFIELD, "handle reserved bytes are not zero");
    struct hs_handle h = { .version = HS_VERSION };
    h.family = buf[8];
    h.cm = buf[11];
    h.link_layer = buf[9];
    h.nports = buf[10];
    h.tcp_port = get16(buf + 12);
    memcpy(h.addr, buf + 16, 16);
    h.guid = get64(buf + 32);
    h.nonce = get64(buf + 40);
    if (h.family != 4 && h.family != 6)
        return fail(err, HS_EFIELD, "handle address family %u, expected 4 or 6", h.family);
    if (h.link_layer != 1 && h.link_layer != 2)
        return fail(err, HS_EFIELD, "handle link layer %u, expected 1 (IB) or 2 (Ethernet)", h.link_layer);
    if (h.nports < 1 || h.nports > HS_MAX_PORTS)
        return fail(err, HS_EFIELD, "handle port count %u, expected 1..%d", h.nports, HS_MAX_PORTS);
    if (h.tcp_port == 0)
        return fail(err, HS_EFIELD, "handle TCP port is 0");
    /* a CM handle of a two-port device names the second port's IPv4 too */
    if (h.family == 4 && !all_zero(h.addr + (h.cm && h.nports == 2 ? 8 : 4), h.cm && h.nports == 2 ? 8 : 12))
        return fail(err, HS_EFIELD, "handle IPv4 address has non-zero padding");
    *out = h;
    return HS_OK;
}

/* ---- message header: 0 magic, 4 version, 6 type, 8 length, 12 crc32 of the
 * whole message computed with the crc field zero. */
static void header_put(uint8_t *out, uint16_t version, uint16_t type, uint32_t len)
{
    put32(out + 0, HS_MAGIC);
    put16(out + 4, version);
    put16(out + 6, type);
    put32(out + 8, len);
    put32(out + 12, 0);
}

static void header_seal(uint8_t *out, uint32_t len) { put32(out + 12, hs_crc32(out, len)); }

enum hs_status hs_header_parse(const uint8_t *buf, size_t len, uint16_t *type,
                               uint32_t *msg_len, char err[HS_ERR_LEN])
{
    if (!buf || len < HS_HEADER_SIZE)
        return fail(err, HS_ESHORT, "message header has %zu bytes, expected %d", buf ? len : 0, HS_HEADER_SIZE);
    if (get32(buf) != HS_MAGIC)
        return fail(err, HS_EMAGIC, "message magic 0x%08x, expected 0x%08x (peer is not railnet)",
                    get32(buf), HS_MAGIC);
    if (get16(buf + 4) != HS_VERSION)
        return fail(err, HS_EVERSION, "peer speaks protocol version %u, this railnet speaks %u",
                    get16(buf + 4), HS_VERSION);
    uint16_t t = get16(buf + 6);
    if (t != HS_HELLO && t != HS_REPLY && t != HS_READY)
        return fail(err, HS_ETYPE, "message type %u unknown", t);
    uint32_t l = get32(buf + 8);
    if (l < HS_HEADER_SIZE || l > HS_MSG_MAX)
        return fail(err, HS_ELENGTH, "message length %u outside [%d, %d]", l, HS_HEADER_SIZE, HS_MSG_MAX);
    if (type)
        *type = t;
    if (msg_len)
        *msg_len = l;
    return HS_OK;
}

/* Full-message checks shared by every parser: header, exact type, the
 * length field equals the bytes given, CRC. */
static enum hs_status msg_check(const uint8_t *buf, size_t len, uint16_t want, char *err)
{
    uint16_t type;
    uint32_t l;
    enum hs_status s = hs_header_parse(buf, len, &type, &l, err);
    if (s)
        return s;
    if (type != want)
        return fail(err, HS_ETYPE, "message type %u, expected %u", type, want);
    if (l != len)
        return fail(err, HS_ELENGTH, "message length field %u, but %zu bytes received", l, len);
    uint8_t tmp[HS_MSG_MAX];
    memcpy(tmp, buf, len);
    put32(tmp + 12, 0);
    uint32_t crc = hs_crc32(tmp, len);
    if (get32(buf + 12) != crc && !HS_FUZZING)
        return fail(err, HS_ECRC, "message checksum 0x%08x, computed 0x%08x (corrupted bytes)",
                    get32(buf + 12), crc);
    return HS_OK;
}

/* ---- QP info: 0 qpn, 4 psn, 8 lid, 10 port_num, 11 port_idx, 12 mtu,
 * 13 gid_index, 14 is_global, 15 reserved, 16 gid[16]. */
static void qp_put(uint8_t *p, const struct hs_qp_info *q)
{
    put32(p + 0, q->qpn);
    put32(p + 4, q->psn);
    put16(p + 8, q->lid);
    p[10] = q->port_num;
    p[11] = q->port_idx;
    p[12] = q->mtu;
    p[13] = q->gid_index;
    p[14] = q->is_global;
    p[15] = 0;
    memcpy(p + 16, q->gid, 16);
}

static enum hs_status qp_get(const uint8_t *p, int i, uint8_t nports, struct hs_qp_info *q, char *err)
{
    q->qpn = get32(p + 0);
    q->psn = get32(p + 4);
    q->lid = get16(p + 8);
    q->port_num = p[10];
    q->port_idx = p[11];
    q->mtu = p[12];
    q->gid_index = p[13];
    q->is_global = p[14];
    memcpy(q->gid, p + 16, 16);
    if (q->qpn == 0 || q->qpn > 0xffffff)
        return fail(err, HS_EFIELD, "QP %d: QPN 0x%x outside 24 bits", i, q->qpn);
    if (q->psn > 0xffffff)
        return fail(err, HS_EFIELD, "QP %d: PSN 0x%x outside 24 bits", i, q->psn);
    if (q->port_num == 0)
        return fail(err, HS_EFIELD, "QP %d: port number 0", i);
    if (q->port_idx >= nports)
        return fail(err, HS_EFIELD, "QP %d: port index %u, peer has %u ports", i, q->port_idx, nports);
    if (q->mtu < 1 || q->mtu > 5)
        return fail(err, HS_EFIELD, "QP %d: MTU code %u outside 1..5", i, q->mtu);
    if (q->is_global > 1 || p[15])
        return fail(err, HS_EFIELD, "QP %d: reserved bits set", i);
    return HS_OK;
}

static int qp_encodable(const struct hs_qp_info *q, uint8_t nports)
{
    return q->qpn && q->qpn <= 0xffffff && q->psn <= 0xffffff && q->port_num && q->port_idx < nports &&
           q->mtu >= 1 && q->mtu <= 5 && q->is_global <= 1;
}

/* ---- HELLO and REPLY share a shape: header, a fixed body of `fixed`
 * bytes, then nqps QP entries. These helpers are that shape, written once;
 * each message below only places and checks its own fixed fields. */
static size_t qmsg_len(size_t fixed, unsigned nqps)
{
    return HS_HEADER_SIZE + fixed + (size_t)nqps * HS_QP_INFO_SIZE;
}

/* Starts an encoding: checks the room and every QP entry, zeroes the bytes,
 * writes the header. Returns the fixed body to fill, NULL when the message
 * cannot be encoded. */
static uint8_t *msg_open(uint8_t *out, size_t cap, uint16_t version, uint16_t type, size_t fixed,
                         const struct hs_qp_info *qp, uint8_t nqps, uint8_t nports, size_t *len)
{
    *len = qmsg_len(fixed, nqps);
    if (cap < *len)
        return NULL;
    for (int i = 0; i < nqps; i++)
        if (!qp_encodable(&qp[i], nports))
            return NULL;
    memset(out, 0, *len);
    header_put(out, version, type, (uint32_t)*len);
    return out + HS_HEADER_SIZE;
}

/* Ends an encoding: the QP entries after the fixed body, then the CRC. */
static size_t msg_seal(uint8_t *out, size_t len, size_t fixed, const struct hs_qp_info *qp, uint8_t nqps)
{
    for (int i = 0; i < nqps; i++)
        qp_put(out + HS_HEADER_SIZE + fixed + i * HS_QP_INFO_SIZE, &qp[i]);
    header_seal(out, (uint32_t)len);
    return len;
}

/* The body of a whole message of `type` with at least `fixed` body bytes;
 * NULL with *s set when the bytes are not that. */
static const uint8_t *msg_body(const uint8_t *buf, size_t len, uint16_t type, size_t fixed, const char *name,
                               enum hs_status *s, char *err)
{
    if ((*s = msg_check(buf, len, type, err)))
        return NULL;
    if (len < HS_HEADER_SIZE + fixed) {
        *s = fail(err, HS_ELENGTH, "%s has %zu bytes, at least %zu needed", name, len, HS_HEADER_SIZE + fixed);
        return NULL;
    }
    return buf + HS_HEADER_SIZE;
}

/* The counts of a message with QP entries are in range and its length
 * holds exactly that many entries. */
static enum hs_status msg_counts(const char *name, size_t len, size_t fixed, uint8_t nqps, uint8_t nports,
                                 char *err)
{
    if (nqps < 1 || nqps > HS_MAX_QPS)
        return fail(err, HS_EFIELD, "%s QP count %u outside 1..%d", name, nqps, HS_MAX_QPS);
    if (nports < 1 || nports > HS_MAX_PORTS)
        return fail(err, HS_EFIELD, "%s port count %u outside 1..%d", name, nports, HS_MAX_PORTS);
    if (len != qmsg_len(fixed, nqps))
        return fail(err, HS_ELENGTH, "%s of %zu bytes does not hold %u QPs", name, len, nqps);
    return HS_OK;
}

static enum hs_status msg_qps(const uint8_t *body, size_t fixed, uint8_t nqps, uint8_t nports,
                              struct hs_qp_info *qp, char *err)
{
    enum hs_status s = HS_OK;
    for (int i = 0; i < nqps && !s; i++)
        s = qp_get(body + fixed + i * HS_QP_INFO_SIZE, i, nports, &qp[i], err);
    return s;
}

/* ---- HELLO body (after the header): 0 target_guid, 8 nonce, 16 src_guid,
 * 24 link layer, 25 nqps, 26 nports, 27 reserved, 28 cts_slots,
 * 30 cts_entry_size, 32 max_recvs, 34 reserved16, 36 cts_addr, 44 rkey[0],
 * 48 rkey[1], 52 qp[nqps]. */
size_t hs_hello_encode(const struct hs_hello *m, uint16_t version, uint8_t *out, size_t cap)
{
    if (m->nqps < 1 || m->nqps > HS_MAX_QPS || m->nports < 1 || m->nports > HS_MAX_PORTS)
        return 0;
    size_t len;
    uint8_t *b = msg_open(out, cap, version, HS_HELLO, HS_HELLO_FIXED, m->qp, m->nqps, m->nports, &len);
    if (!b)
        return 0;
    put64(b + 0, m->target_guid);
    put64(b + 8, m->nonce);
    put64(b + 16, m->src_guid);
    b[24] = m->link_layer;
    b[25] = m->nqps;
    b[26] = m->nports;
    put16(b + 28, m->cts_slots);
    put16(b + 30, m->cts_entry_size);
    put16(b + 32, m->max_recvs);
    put64(b + 36, m->cts_addr);
    put32(b + 44, m->cts_rkey[0]);
    put32(b + 48, m->cts_rkey[1]);
    return msg_seal(out, len, HS_HELLO_FIXED, m->qp, m->nqps);
}

enum hs_status hs_hello_parse(const uint8_t *buf, size_t len, struct hs_hello *out,
                              char err[HS_ERR_LEN])
{
    enum hs_status s;
    const uint8_t *b = msg_body(buf, len, HS_HELLO, HS_HELLO_FIXED, "HELLO", &s, err);
    if (!b)
        return s;
    struct hs_hello m;
    memset(&m, 0, sizeof(m));
    m.target_guid = get64(b + 0);
    m.nonce = get64(b + 8);
    m.src_guid = get64(b + 16);
    m.link_layer = b[24];
    m.nqps = b[25];
    m.nports = b[26];
    m.cts_slots = get16(b + 28);
    m.cts_entry_size = get16(b + 30);
    m.max_recvs = get16(b + 32);
    m.cts_addr = get64(b + 36);
    m.cts_rkey[0] = get32(b + 44);
    m.cts_rkey[1] = get32(b + 48);
    if ((s = msg_counts("HELLO", len, HS_HELLO_FIXED, m.nqps, m.nports, err)))
        return s;
    if (m.link_layer != 1 && m.link_layer != 2)
        return fail(err, HS_EFIELD, "HELLO link layer %u, expected 1 or 2", m.link_layer);
    if (m.cts_slots != HS_CTS_SLOTS || m.cts_entry_size != HS_CTS_ENTRY_SIZE || m.max_recvs != HS_MAX_RECVS)
        return fail(err, HS_EFIELD, "HELLO CTS ring %u slots x %u B x %u recvs, expected %d x %d x %d",
                    m.cts_slots, m.cts_entry_size, m.max_recvs, HS_CTS_SLOTS, HS_CTS_ENTRY_SIZE, HS_MAX_RECVS);
    if (m.cts_addr == 0)
        return fail(err, HS_EFIELD, "HELLO CTS ring address is 0");
    if (b[27] || get16(b + 34))
        return fail(err, HS_EFIELD, "HELLO reserved bytes are not zero");
    if ((s = msg_qps(b, HS_HELLO_FIXED, m.nqps, m.nports, m.qp, err)))
        return s;
    *out = m;
    return HS_OK;
}

/* ---- REPLY body: 0 status, 4 nqps, 5 nports, 6 reserved16, 8 guid,
 * 16 sizes_addr, 24 rkey[0], 28 rkey[1], 32 qp[nqps]. */
size_t hs_reply_encode(const struct hs_reply *m, uint16_t version, uint8_t *out, size_t cap)
{
    if (m->status > HS_REJECT_MAX || m->nports > HS_MAX_PORTS)
        return 0;
    if (m->status == 0 && (m->nqps < 1 || m->nqps > HS_MAX_QPS || m->nports < 1))
        return 0;
    if (m->status != 0 && m->nqps != 0)
        return 0;
    size_t len;
    uint8_t *b = msg_open(out, cap, version, HS_REPLY, HS_REPLY_FIXED, m->qp, m->nqps, m->nports, &len);
    if (!b)
        return 0;
    put32(b + 0, m->status);
    b[4] = m->nqps;
    b[5] = m->nports;
    put64(b + 8, m->guid);
    put64(b + 16, m->sizes_addr);
    put32(b + 24, m->sizes_rkey[0]);
    put32(b + 28, m->sizes_rkey[1]);
    return msg_seal(out, len, HS_REPLY_FIXED, m->qp, m->nqps);
}

enum hs_status hs_reply_parse(const uint8_t *buf, size_t len, struct hs_reply *out,
                              char err[HS_ERR_LEN])
{
    enum hs_status s;
    const uint8_t *b = msg_body(buf, len, HS_REPLY, HS_REPLY_FIXED, "REPLY", &s, err);
    if (!b)
        return s;
    struct hs_reply m;
    memset(&m, 0, sizeof(m));
    m.status = get32(b + 0);
    m.nqps = b[4];
    m.nports = b[5];
    m.guid = get64(b + 8);
    m.sizes_addr = get64(b + 16);
    m.sizes_rkey[0] = get32(b + 24);
    m.sizes_rkey[1] = get32(b + 28);
    if (get16(b + 6))
        return fail(err, HS_EFIELD, "REPLY reserved bytes are not zero");
    if (m.status > HS_REJECT_MAX)
        return fail(err, HS_EFIELD, "REPLY status %u unknown", m.status);
    if (m.nports > HS_MAX_PORTS)
        return fail(err, HS_EFIELD, "REPLY port count %u above %d", m.nports, HS_MAX_PORTS);
    if (m.status != 0) {
        if (m.nqps != 0 || len != qmsg_len(HS_REPLY_FIXED, 0))
            return fail(err, HS_ELENGTH, "REPLY rejection carries %u QPs", m.nqps);
        *out = m;
        return HS_OK;
    }
    if ((s = msg_counts("REPLY", len, HS_REPLY_FIXED, m.nqps, m.nports, err)))
        return s;
    if (m.sizes_addr == 0)
        return fail(err, HS_EFIELD, "REPLY sizes area address is 0");
    if ((s = msg_qps(b, HS_REPLY_FIXED, m.nqps, m.nports, m.qp, err)))
        return s;
    *out = m;
    return HS_OK;
}

/* ---- READY body: 0 status (must be 0). */
size_t hs_ready_encode(uint16_t version, uint8_t *out, size_t cap)
{
    size_t len;
    if (!msg_open(out, cap, version, HS_READY, HS_READY_SIZE - HS_HEADER_SIZE, NULL, 0, 0, &len))
        return 0;
    return msg_seal(out, len, HS_READY_SIZE - HS_HEADER_SIZE, NULL, 0);
}

enum hs_status hs_ready_parse(const uint8_t *buf, size_t len, char err[HS_ERR_LEN])
{
    enum hs_status s = msg_check(buf, len, HS_READY, err);
    if (s)
        return s;
    if (len != HS_READY_SIZE)
        return fail(err, HS_ELENGTH, "READY has %zu bytes, expected %d", len, HS_READY_SIZE);
    if (get32(buf + HS_HEADER_SIZE))
        return fail(err, HS_EFIELD, "READY status %u, expected 0", get32(buf + HS_HEADER_SIZE));
    return HS_OK;
}

/* ---- RDMA CM private data (handshake.h) */
static void cm_head_put(uint8_t *out, uint16_t version, uint8_t type, uint8_t qpi, uint8_t nqps,
                        uint8_t nports, uint8_t b10)
{
    put32(out + 0, HS_MAGIC);
    put16(out + 4, version);
    out[6] = type;
    out[7] = qpi;
    out[8] = nqps;
    out[9] = nports;
    out[10] = b10;
    out[11] = 0;
}

static enum hs_status cm_head_check(const uint8_t *buf, size_t len, uint8_t type, size_t size,
                                    const char *name, char *err)
{
    if (!buf || len < size)
        return fail(err, HS_ESHORT, "%s private data has %zu bytes, expected at least %zu", name,
                    buf ? len : 0, size);
    if (get32(buf) != HS_MAGIC)
        return fail(err, HS_EMAGIC, "%s magic 0x%08x, expected 0x%08x (not railnet)", name, get32(buf), HS_MAGIC);
    if (get16(buf + 4) != HS_VERSION)
        return fail(err, HS_EVERSION, "%s protocol version %u, this railnet speaks %u", name, get16(buf + 4),
                    HS_VERSION);
    if (buf[6] != type)
        return fail(err, HS_ETYPE, "private data of type %u where %s (%u) was expected", buf[6], name, type);
    uint32_t crc = hs_crc32(buf, size - 4);
    if (get32(buf + size - 4) != crc && !HS_FUZZING)
        return fail(err, HS_ECRC, "%s checksum 0x%08x, computed 0x%08x (corrupted)", name, get32(buf + size - 4), crc);
    if (buf[11] || !all_zero(buf + size, len - size))
        return fail(err, HS_EFIELD, "%s reserved or padding bytes are not zero", name);
    if (buf[8] < 1 || buf[8] > HS_MAX_QPS || buf[7] >= buf[8])
        return fail(err, HS_EFIELD, "%s QP %u of %u, expected 1..%d QPs", name, buf[7], buf[8], HS_MAX_QPS);
    if (buf[9] < 1 || buf[9] > HS_MAX_PORTS)
        return fail(err, HS_EFIELD, "%s port count %u, expected 1..%d", name, buf[9], HS_MAX_PORTS);
    return HS_OK;
}

size_t hs_cm_hello_encode(const struct hs_cm_hello *m, uint16_t version, uint8_t *out, size_t cap)
{
    if (cap < HS_CM_HELLO_SIZE || m->nqps < 1 || m->nqps > HS_MAX_QPS || m->qp_index >= m->nqps ||
        m->nports < 1 || m->nports > HS_MAX_PORTS)
        return 0;
    memset(out, 0, HS_CM_HELLO_SIZE);
    cm_head_put(out, version, HS_CM_HELLO, m->qp_index, m->nqps, m->nports, m->link_layer);
    put64(out + 12, m->conn_id);
    put64(out + 20, m->nonce);
    put64(out + 28, m->target_guid);
    put64(out + 36, m->cts_addr);
    put32(out + 44, m->cts_rkey[0]);
    put32(out + 48, m->cts_rkey[1]);
    put32(out + 52, hs_crc32(out, 52));
    return HS_CM_HELLO_SIZE;
}

enum hs_status hs_cm_hello_parse(const uint8_t *buf, size_t len, struct hs_cm_hello *out, char err[HS_ERR_LEN])
{
    enum hs_status st = cm_head_check(buf, len, HS_CM_HELLO, HS_CM_HELLO_SIZE, "CM HELLO", err);
    if (st != HS_OK)
        return st;
    struct hs_cm_hello m;
    memset(&m, 0, sizeof(m));
    m.qp_index = buf[7];
    m.nqps = buf[8];
    m.nports = buf[9];
    m.link_layer = buf[10];
    if (m.link_layer != 1 && m.link_layer != 2)
        return fail(err, HS_EFIELD, "CM HELLO link layer %u, expected 1 (IB) or 2 (Ethernet)", m.link_layer);
    m.conn_id = get64(buf + 12);
    m.nonce = get64(buf + 20);
    m.target_guid = get64(buf + 28);
    m.cts_addr = get64(buf + 36);
    m.cts_rkey[0] = get32(buf + 44);
    m.cts_rkey[1] = get32(buf + 48);
    if (!m.cts_addr)
        return fail(err, HS_EFIELD, "CM HELLO CTS ring address is 0");
    *out = m;
    return HS_OK;
}

size_t hs_cm_reply_encode(const struct hs_cm_reply *m, uint16_t version, uint8_t *out, size_t cap)
{
    if (cap < HS_CM_REPLY_SIZE || m->nqps < 1 || m->nqps > HS_MAX_QPS || m->qp_index >= m->nqps ||
        m->nports < 1 || m->nports > HS_MAX_PORTS || m->status > HS_REJECT_MAX)
        return 0;
    memset(out, 0, HS_CM_REPLY_SIZE);
    cm_head_put(out, version, HS_CM_REPLY, m->qp_index, m->nqps, m->nports, m->status);
    put64(out + 12, m->guid);
    put64(out + 20, m->sizes_addr);
    put32(out + 28, m->sizes_rkey[0]);
    put32(out + 32, m->sizes_rkey[1]);
    put32(out + 36, hs_crc32(out, 36));
    return HS_CM_REPLY_SIZE;
}

enum hs_status hs_cm_reply_parse(const uint8_t *buf, size_t len, struct hs_cm_reply *out, char err[HS_ERR_LEN])
{
    enum hs_status st = cm_head_check(buf, len, HS_CM_REPLY, HS_CM_REPLY_SIZE, "CM REPLY", err);
    if (st != HS_OK)
        return st;
    struct hs_cm_reply m;
    memset(&m, 0, sizeof(m));
    m.qp_index = buf[7];
    m.nqps = buf[8];
    m.nports = buf[9];
    m.status = buf[10];
    if (m.status > HS_REJECT_MAX)
        return fail(err, HS_EFIELD, "CM REPLY status %u, expected 0..%d", m.status, HS_REJECT_MAX);
    m.guid = get64(buf + 12);
    m.sizes_addr = get64(buf + 20);
    m.sizes_rkey[0] = get32(buf + 28);
    m.sizes_rkey[1] = get32(buf + 32);
    if (!m.status && !m.sizes_addr)
        return fail(err, HS_EFIELD, "CM REPLY sizes address is 0");
    *out = m;
    return HS_OK;
}

uint64_t hs_nonce_new(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        v = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 32);
    }
    return v ? v : 1;
}
