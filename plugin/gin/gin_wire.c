/* plugin/gin/gin_wire.c: encoders, strict parsers and framed socket I/O of
 * the GIN messages (gin_wire.h). */
#include "gin_wire.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Under libFuzzer the CRC is not enforced, so that mutations reach the field
 * checks behind it (as in plugin/ib/handshake.c). */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define GW_FUZZING 1
#else
#define GW_FUZZING 0
#endif

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

static int fail(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(char *err, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, HS_ERR_LEN, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *gw_reject_str(uint32_t s)
{
    switch (s) {
    case GW_OK: return "accepted";
    case GW_REJECT_JOB: return "the handle, rank or rank count is not of the listener's job (stale or foreign handle)";
    case GW_REJECT_DEVICE: return "the devices cannot be connected (link layer or port count differ)";
    case GW_REJECT_RESOURCES: return "the listener could not create its QPs";
    case GW_REJECT_TYPE: return "the GIN types differ (proxy QPs on one side, none on the other)";
    }
    return "unknown reason";
}

const char *gw_qps_str(uint8_t qps)
{
    switch (qps) {
    case GW_QPS_PROXY: return "proxy QPs (the proxy type, or an RMA table)";
    case GW_QPS_NONE: return "no proxy QPs (the GDAKI type)";
    }
    return "an unknown QP kind";
}

/* ---- header: 0 magic, 4 version, 6 type, 8 length, 12 crc32 */
static void header_put(uint8_t *out, uint16_t type, uint32_t len)
{
    put32(out, GW_MAGIC);
    put16(out + 4, GW_VERSION);
    put16(out + 6, type);
    put32(out + 8, len);
    put32(out + 12, 0);
}

static void seal(uint8_t *out, uint32_t len) { put32(out + 12, hs_crc32(out, len)); }

static int header_check(const uint8_t *buf, size_t len, uint16_t *type, uint32_t *msg_len, char *err)
{
    if (len < GW_HEADER)
        return fail(err, "GIN message header has %zu bytes, expected %d", len, GW_HEADER);
    if (get32(buf) != GW_MAGIC)
        return fail(err, "GIN message magic 0x%08x, expected 0x%08x (peer is not railnet GIN)", get32(buf),
                    GW_MAGIC);
    if (get16(buf + 4) != GW_VERSION)
        return fail(err, "peer speaks GIN protocol version %u, this railnet speaks %u", get16(buf + 4),
                    GW_VERSION);
    uint16_t t = get16(buf + 6);
    if (t < GW_HELLO || t > GW_GDAKI)
        return fail(err, "GIN message type %u unknown", t);
    uint32_t l = get32(buf + 8);
    if (l < GW_HEADER || l > GW_MSG_MAX)
        return fail(err, "GIN message length %u outside [%d, %d]", l, GW_HEADER, GW_MSG_MAX);
    *type = t;
    *msg_len = l;
    return 0;
}

static int msg_check(const uint8_t *buf, size_t len, uint16_t want, char *err)
{
    uint16_t type;
    uint32_t l;
    if (header_check(buf, len, &type, &l, err))
        return -1;
    if (type != want)
        return fail(err, "GIN message type %u, expected %u", type, want);
    if (l != len)
        return fail(err, "GIN message length field %u, but %zu bytes received", l, len);
    uint8_t tmp[GW_MSG_MAX];
    memcpy(tmp, buf, len);
    put32(tmp + 12, 0);
    uint32_t crc = hs_crc32(tmp, len);
    if (crc != get32(buf + 12) && !GW_FUZZING)
        return fail(err, "GIN message checksum 0x%08x, computed 0x%08x (corrupted bytes)", get32(buf + 12), crc);
    return 0;
}

/* ---- QP info (32 bytes): 0 qpn, 4 psn, 8 lid, 10 port_num, 11 port_idx,
 * 12 mtu, 13 gid_index, 14 is_global, 15 zero, 16 gid */
static void qp_put(uint8_t *p, const struct hs_qp_info *q)
{
    memset(p, 0, HS_QP_INFO_SIZE);
    put32(p, q->qpn);
    put32(p + 4, q->psn);
    put16(p + 8, q->lid);
    p[10] = q->port_num;
    p[11] = q->port_idx;
    p[12] = q->mtu;
    p[13] = q->gid_index;
    p[14] = q->is_global;
    memcpy(p + 16, q->gid, 16);
}

static int qp_get(const uint8_t *p, uint8_t nports, struct hs_qp_info *q, char *err)
{
    q->qpn = get32(p);
    q->psn = get32(p + 4);
    q->lid = get16(p + 8);
    q->port_num = p[10];
    q->port_idx = p[11];
    q->mtu = p[12];
    q->gid_index = p[13];
    q->is_global = p[14];
    memcpy(q->gid, p + 16, 16);
    if (q->qpn == 0 || q->qpn > 0xffffffu || q->psn > 0xffffffu)
        return fail(err, "QP number 0x%x or PSN 0x%x out of 24-bit range", q->qpn, q->psn);
    if (q->port_num == 0 || q->port_idx >= nports)
        return fail(err, "QP port %u (index %u of %u ports) out of range", q->port_num, q->port_idx, nports);
    if (q->mtu < 1 || q->mtu > 5)
        return fail(err, "QP MTU code %u, expected 1..5", q->mtu);
    if (q->is_global > 1 || p[15])
        return fail(err, "QP reserved or flag bytes out of range");
    return 0;
}

/* ---- HELLO/REPLY body: 0 status, 4 nranks, 8 src_rank, 12 dst_rank,
 * 16 dst_nonce, 24 src_nonce, 32 guid, 40 link layer, 41 nports, 42 nqps,
 * 43 qps (enum gw_qps; 0 in GW_GDAKI), 44..47 zero, 48 QP infos */
size_t gw_peer_encode(uint16_t type, const struct gw_peer *m, uint8_t *out, size_t cap)
{
    if ((type != GW_HELLO && type != GW_REPLY && type != GW_GDAKI) || m->nqps > HS_MAX_PORTS)
        return 0;
    size_t len = GW_HEADER + GW_PEER_FIXED + (size_t)m->nqps * HS_QP_INFO_SIZE;
    if (cap < len)
        return 0;
    memset(out, 0, len);
    header_put(out, type, (uint32_t)len);
    uint8_t *b = out + GW_HEADER;
    put32(b, m->status);
    put32(b + 4, m->nranks);
    put32(b + 8, m->src_rank);
    put32(b + 12, m->dst_rank);
    put64(b + 16, m->dst_nonce);
    put64(b + 24, m->src_nonce);
    put64(b + 32, m->guid);
    b[40] = m->link_layer;
    b[41] = m->nports;
    b[42] = m->nqps;
    b[43] = m->qps;
    for (int i = 0; i < m->nqps; i++)
        qp_put(b + GW_PEER_FIXED + i * HS_QP_INFO_SIZE, &m->qp[i]);
    seal(out, (uint32_t)len);
    return len;
}

int gw_peer_parse(const uint8_t *buf, size_t len, uint16_t want, struct gw_peer *out, char err[HS_ERR_LEN])
{
    if (!buf || msg_check(buf, len, want, err))
        return -1;
    if (len < GW_HEADER + GW_PEER_FIXED)
        return fail(err, "GIN %s has %zu bytes, at least %d expected",
                    want == GW_HELLO ? "HELLO" : want == GW_GDAKI ? "GDAKI" : "REPLY", len,
                    GW_HEADER + GW_PEER_FIXED);
    const uint8_t *b = buf + GW_HEADER;
    struct gw_peer m;
    memset(&m, 0, sizeof(m));
    m.status = get32(b);
    m.nranks = get32(b + 4);
    m.src_rank = get32(b + 8);
    m.dst_rank = get32(b + 12);
    m.dst_nonce = get64(b + 16);
    m.src_nonce = get64(b + 24);
    m.guid = get64(b + 32);
    m.link_layer = b[40];
    m.nports = b[41];
    m.nqps = b[42];
    m.qps = b[43];
    for (int i = 44; i < GW_PEER_FIXED; i++)
        if (b[i])
            return fail(err, "GIN peer message reserved bytes are not zero");
    if (m.status > GW_REJECT_TYPE)
        return fail(err, "GIN peer message status %u unknown", m.status);
    if (m.qps > GW_QPS_NONE)
        return fail(err, "GIN peer message QP kind %u unknown", m.qps);
    if (want == GW_GDAKI && m.qps != GW_QPS_PROXY)
        return fail(err, "GIN GDAKI message carries QP kind %u, expected %d", m.qps, GW_QPS_PROXY);
    if (want != GW_REPLY && m.status)
        return fail(err, "GIN HELLO or GDAKI carries a rejection status %u", m.status);
    if (m.nranks < 1 || m.nranks > 1u << 20 || m.src_rank >= m.nranks || m.dst_rank >= m.nranks ||
        m.src_rank == m.dst_rank)
        return fail(err, "GIN ranks out of range (nranks %u, from %u, to %u)", m.nranks, m.src_rank, m.dst_rank);
    if (m.link_layer != 1 && m.link_layer != 2)
        return fail(err, "GIN link layer %u, expected 1 or 2", m.link_layer);
    if (m.nports < 1 || m.nports > HS_MAX_PORTS)
        return fail(err, "GIN port count %u, expected 1..%d", m.nports, HS_MAX_PORTS);
    if (m.status || m.qps == GW_QPS_NONE ? m.nqps != 0 : (m.nqps < 1 || m.nqps > HS_MAX_PORTS))
        return fail(err, "GIN QP count %u out of range for status %u and %s", m.nqps, m.status, gw_qps_str(m.qps));
    if (want == GW_GDAKI && m.nqps != 1)
        return fail(err, "GIN GDAKI message carries %u QPs, expected exactly 1", m.nqps);
    if (len != GW_HEADER + GW_PEER_FIXED + (size_t)m.nqps * HS_QP_INFO_SIZE)
        return fail(err, "GIN peer message of %zu bytes does not hold %u QPs", len, m.nqps);
    for (int i = 0; i < m.nqps; i++)
        if (qp_get(b + GW_PEER_FIXED + i * HS_QP_INFO_SIZE, m.nports, &m.qp[i], err))
            return -1;
    *out = m;
    return 0;
}

size_t gw_ready_encode(uint8_t *out, size_t cap)
{
    if (cap < GW_HEADER)
        return 0;
    header_put(out, GW_READY, GW_HEADER);
    seal(out, GW_HEADER);
    return GW_HEADER;
}

int gw_ready_parse(const uint8_t *buf, size_t len, char err[HS_ERR_LEN])
{
    return buf ? msg_check(buf, len, GW_READY, err) : fail(err, "no message");
}

/* ---- WIN body: 0 seq, 4 status, 8 addr, 16 size, 24 rkey, 28 zero */
size_t gw_win_encode(const struct gw_win *m, uint8_t *out, size_t cap)
{
    if (cap < GW_WIN_SIZE)
        return 0;
    memset(out, 0, GW_WIN_SIZE);
    header_put(out, GW_WIN, GW_WIN_SIZE);
    uint8_t *b = out + GW_HEADER;
    put32(b, m->seq);
    put32(b + 4, m->status);
    put64(b + 8, m->addr);
    put64(b + 16, m->size);
    put32(b + 24, m->rkey);
    seal(out, GW_WIN_SIZE);
    return GW_WIN_SIZE;
}

int gw_win_parse(const uint8_t *buf, size_t len, struct gw_win *out, char err[HS_ERR_LEN])
{
    if (!buf || msg_check(buf, len, GW_WIN, err))
        return -1;
    if (len != GW_WIN_SIZE)
        return fail(err, "GIN WIN has %zu bytes, expected %d", len, GW_WIN_SIZE);
    const uint8_t *b = buf + GW_HEADER;
    if (get32(b + 28))
        return fail(err, "GIN WIN reserved bytes are not zero");
    out->seq = get32(b);
    out->status = get32(b + 4);
    out->addr = get64(b + 8);
    out->size = get64(b + 16);
    out->rkey = get32(b + 24);
    if (out->status > 1)
        return fail(err, "GIN WIN status %u unknown", out->status);
    if (!out->status && out->addr + out->size < out->addr)
        return fail(err, "GIN WIN window [0x%llx, +%llu) wraps around", (unsigned long long)out->addr,
                    (unsigned long long)out->size);
    return 0;
}

/* ---- framed I/O */
void gw_rx_init(struct gw_rx *rx)
{
    rx->off = 0;
    rx->want = GW_HEADER;
}

int gw_rx_step(int fd, struct gw_rx *rx, char err[HS_ERR_LEN])
{
    while (rx->off < rx->want) {
        ssize_t n = recv(fd, rx->buf + rx->off, rx->want - rx->off, MSG_DONTWAIT);
        if (n == 0)
            return fail(err, "the peer closed the connection");
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            if (errno == EINTR)
                continue;
            return fail(err, "recv: %s", strerror(errno));
        }
        rx->off += (size_t)n;
        if (rx->off == GW_HEADER && rx->want == GW_HEADER) {
            uint16_t type;
            uint32_t l;
            if (header_check(rx->buf, GW_HEADER, &type, &l, err))
                return -1;
            rx->want = l;
        }
    }
    return 1;
}

static int wait_fd(int fd, short ev, uint64_t deadline_ns, char *err)
{
    for (;;) {
        uint64_t now = now_ns();
        if (now >= deadline_ns)
            return fail(err, "timed out (RAILNET_HANDSHAKE_TIMEOUT)");
        struct pollfd p = { .fd = fd, .events = ev };
        uint64_t ms = (deadline_ns - now) / 1000000 + 1;
        int r = poll(&p, 1, ms > 1000 ? 1000 : (int)ms);
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return fail(err, "poll: %s", strerror(errno));
    }
}

int gw_send(int fd, const uint8_t *buf, size_t len, uint64_t deadline_ns, char err[HS_ERR_LEN])
{
    size_t off = 0;
    while (off < len) {
        ssize_t n = send(fd, buf + off, len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return fail(err, "send: %s", strerror(errno));
        if (wait_fd(fd, POLLOUT, deadline_ns, err))
            return -1;
    }
    return 0;
}

int gw_recv(int fd, struct gw_rx *rx, uint64_t deadline_ns, char err[HS_ERR_LEN])
{
    gw_rx_init(rx);
    for (;;) {
        int r = gw_rx_step(fd, rx, err);
        if (r)
            return r > 0 ? 0 : -1;
        if (wait_fd(fd, POLLIN, deadline_ns, err))
            return -1;
    }
}
