/* tests/plugin/test_gin_wire.c: the GIN messages (plugin/gin/gin_wire.h)
 * round-trip, and their parsers refuse every malformed or hostile input
 * (they read what other processes send). */
#include "../tap.h"
#include "plugin/gin/gin_wire.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static struct gw_peer sample_peer(int nqps)
{
    struct gw_peer m;
    memset(&m, 0, sizeof(m));
    m.nranks = 8;
    m.src_rank = 5;
    m.dst_rank = 2;
    m.dst_nonce = 0x1111222233334444ull;
    m.src_nonce = 0x5555666677778888ull;
    m.guid = 0xabcdef;
    m.link_layer = 2;
    m.nports = 2;
    m.nqps = (uint8_t)nqps;
    for (int i = 0; i < nqps; i++) {
        m.qp[i] = (struct hs_qp_info){ .qpn = 0x100 + (uint32_t)i, .psn = 0xabcde, .port_num = (uint8_t)(1 + i),
                                       .port_idx = (uint8_t)i, .mtu = 5, .gid_index = 0, .is_global = 1 };
        m.qp[i].gid[15] = (uint8_t)i;
    }
    return m;
}

/* Rewrites the CRC after a test edits bytes, so that the field checks (not
 * the CRC) must catch the edit. */
static void reseal(uint8_t *buf, size_t len)
{
    memset(buf + 12, 0, 4);
    uint32_t crc = hs_crc32(buf, len);
    for (int i = 0; i < 4; i++)
        buf[12 + i] = (uint8_t)(crc >> (8 * i));
}

TAP_CASE(test_hello_round_trips_every_field)
{
    struct gw_peer m = sample_peer(2), out;
    uint8_t buf[GW_MSG_MAX];
    size_t len = gw_peer_encode(GW_HELLO, &m, buf, sizeof(buf));
    EXPECT_EQ_INT(GW_HEADER + GW_PEER_FIXED + 2 * HS_QP_INFO_SIZE, len);
    char err[HS_ERR_LEN];
    EXPECT_EQ_INT(0, gw_peer_parse(buf, len, GW_HELLO, &out, err));
    EXPECT_EQ_INT(8, out.nranks);
    EXPECT_EQ_INT(5, out.src_rank);
    EXPECT_EQ_INT(2, out.dst_rank);
    EXPECT_EQ_U64(m.dst_nonce, out.dst_nonce);
    EXPECT_EQ_U64(m.src_nonce, out.src_nonce);
    EXPECT_EQ_U64(m.guid, out.guid);
    EXPECT_EQ_INT(2, out.nqps);
    EXPECT_EQ_INT(GW_QPS_PROXY, out.qps);
    EXPECT_EQ_INT(0, buf[GW_HEADER + 43]); /* proxy QPs: the byte is what it was before it had a meaning */
    EXPECT_EQ_INT(0x101, out.qp[1].qpn);
    EXPECT_EQ_INT(2, out.qp[1].port_num);
    EXPECT_EQ_INT(1, out.qp[1].gid[15]);
}

TAP_CASE(test_hello_without_proxy_qps_round_trips_and_carries_none)
{
    /* a GDAKI-type collComm: no QP towards the peer */
    struct gw_peer m = sample_peer(0), out;
    m.qps = GW_QPS_NONE;
    uint8_t buf[GW_MSG_MAX];
    size_t len = gw_peer_encode(GW_HELLO, &m, buf, sizeof(buf));
    EXPECT_EQ_INT(GW_HEADER + GW_PEER_FIXED, len);
    char err[HS_ERR_LEN] = "";
    EXPECT_EQ_INT(0, gw_peer_parse(buf, len, GW_HELLO, &out, err));
    EXPECT_EQ_INT(GW_QPS_NONE, out.qps);
    EXPECT_EQ_INT(0, out.nqps);
    EXPECT_EQ_INT(-1, gw_peer_parse(buf, len, GW_REPLY, &out, err)); /* a HELLO is no REPLY */
    /* proxy QPs announced with none, and QPs carried while announcing none */
    m.qps = GW_QPS_PROXY;
    len = gw_peer_encode(GW_HELLO, &m, buf, sizeof(buf));
    EXPECT_EQ_INT(-1, gw_peer_parse(buf, len, GW_HELLO, &out, err));
    EXPECT_TRUE(strstr(err, "QP count 0 out of range") != NULL);
    m = sample_peer(2);
    m.qps = GW_QPS_NONE;
    len = gw_peer_encode(GW_HELLO, &m, buf, sizeof(buf));
    EXPECT_EQ_INT(-1, gw_peer_parse(buf, len, GW_HELLO, &out, err));
    EXPECT_TRUE(strstr(err, "QP count 2 out of range") != NULL && strstr(err, "no proxy QPs") != NULL);
}

TAP_CASE(test_reply_refusing_another_gin_type_carries_the_listeners_kind)
{
    /* the connector names both sides' kinds in its WARN */
    struct gw_peer m = sample_peer(0), out;
    m.status = GW_REJECT_TYPE;
    m.qps = GW_QPS_NONE;
    uint8_t buf[GW_MSG_MAX];
    size_t len = gw_peer_encode(GW_REPLY, &m, buf, sizeof(buf));
    char err[HS_ERR_LEN] = "";
    EXPECT_EQ_INT(0, gw_peer_parse(buf, len, GW_REPLY, &out, err));
    EXPECT_EQ_INT(GW_REJECT_TYPE, out.status);
    EXPECT_EQ_INT(GW_QPS_NONE, out.qps);
    EXPECT_TRUE(strstr(gw_reject_str(GW_REJECT_TYPE), "GIN types differ") != NULL);
    EXPECT_TRUE(strstr(gw_qps_str(GW_QPS_NONE), "no proxy QPs") != NULL);
    EXPECT_TRUE(strstr(gw_qps_str(GW_QPS_PROXY), "proxy QPs") != NULL);
    /* a status past the last one known, and a QP kind past GW_QPS_NONE */
    uint8_t bad[GW_MSG_MAX];
    memcpy(bad, buf, len);
    bad[GW_HEADER] = GW_REJECT_TYPE + 1;
    reseal(bad, len);
    EXPECT_EQ_INT(-1, gw_peer_parse(bad, len, GW_REPLY, &out, err));
    EXPECT_TRUE(strstr(err, "status 5 unknown") != NULL);
    memcpy(bad, buf, len);
    bad[GW_HEADER + 43] = GW_QPS_NONE + 1;
    reseal(bad, len);
    EXPECT_EQ_INT(-1, gw_peer_parse(bad, len, GW_REPLY, &out, err));
    EXPECT_TRUE(strstr(err, "QP kind 2 unknown") != NULL);
}

TAP_CASE(test_gdaki_qp_message_carries_no_qp_kind)
{
    /* GW_GDAKI reuses the peer message: its one QP is the context's, the
     * kind byte stays zero */
    struct gw_peer m = sample_peer(1), out;
    m.qps = GW_QPS_NONE;
    uint8_t buf[GW_MSG_MAX];
    size_t len = gw_peer_encode(GW_GDAKI, &m, buf, sizeof(buf));
    char err[HS_ERR_LEN] = "";
    EXPECT_EQ_INT(-1, gw_peer_parse(buf, len, GW_GDAKI, &out, err));
    EXPECT_TRUE(strstr(err, "QP kind 1, expected 0") != NULL);
}

TAP_CASE(test_gdaki_qp_message_round_trips_and_is_not_a_hello)
{
    /* GW_GDAKI: the one DEVX QP a rank has towards the receiver (GDAKI type) */
    struct gw_peer m = sample_peer(1), out;
    uint8_t buf[GW_MSG_MAX];
    size_t len = gw_peer_encode(GW_GDAKI, &m, buf, sizeof(buf));
    EXPECT_EQ_INT(GW_HEADER + GW_PEER_FIXED + HS_QP_INFO_SIZE, len);
    char err[HS_ERR_LEN];
    EXPECT_EQ_INT(0, gw_peer_parse(buf, len, GW_GDAKI, &out, err));
    EXPECT_EQ_INT(1, out.nqps);
    EXPECT_EQ_INT(m.qp[0].qpn, out.qp[0].qpn);
    EXPECT_EQ_INT(m.qp[0].psn, out.qp[0].psn);
    EXPECT_EQ_INT(-1, gw_peer_parse(buf, len, GW_HELLO, &out, err));
    m.status = GW_REJECT_JOB;
    m.nqps = 0;
    len = gw_peer_encode(GW_GDAKI, &m, buf, sizeof(buf));
    EXPECT_EQ_INT(-1, gw_peer_parse(buf, len, GW_GDAKI, &out, err));   /* only a REPLY may refuse */
}

TAP_CASE(test_gdaki_qp_message_with_more_than_one_qp_is_refused)
{
    /* The GDAKI type has one DEVX QP per peer: a message carrying more is
     * garbled, not one whose first QP may be taken and the rest ignored. */
    struct gw_peer m = sample_peer(2), out;
    uint8_t buf[GW_MSG_MAX];
    size_t len = gw_peer_encode(GW_GDAKI, &m, buf, sizeof(buf));
    EXPECT_EQ_INT(GW_HEADER + GW_PEER_FIXED + 2 * HS_QP_INFO_SIZE, len);
    char err[HS_ERR_LEN] = "";
    EXPECT_EQ_INT(-1, gw_peer_parse(buf, len, GW_GDAKI, &out, err));
    EXPECT_TRUE(strstr(err, "expected exactly 1") != NULL);
    EXPECT_EQ_INT(-1, gw_peer_parse(buf, len, GW_HELLO, &out, err));     /* nor is it a HELLO */
}

TAP_CASE(test_reply_with_rejection_carries_no_qps)
{
    struct gw_peer m = sample_peer(0), out;
    m.status = GW_REJECT_JOB;
    uint8_t buf[GW_MSG_MAX];
    size_t len = gw_peer_encode(GW_REPLY, &m, buf, sizeof(buf));
    char err[HS_ERR_LEN];
    EXPECT_EQ_INT(0, gw_peer_parse(buf, len, GW_REPLY, &out, err));
    EXPECT_EQ_INT(GW_REJECT_JOB, out.status);
    /* a HELLO may not carry a rejection */
    len = gw_peer_encode(GW_HELLO, &m, buf, sizeof(buf));
    EXPECT_EQ_INT(-1, gw_peer_parse(buf, len, GW_HELLO, &out, err));
    EXPECT_TRUE(strstr(err, "rejection") != NULL);
}

TAP_CASE(test_corrupted_byte_fails_the_crc)
{
    struct gw_peer m = sample_peer(2), out;
    uint8_t buf[GW_MSG_MAX];
    size_t len = gw_peer_encode(GW_HELLO, &m, buf, sizeof(buf));
    buf[GW_HEADER + 20] ^= 1;
    char err[HS_ERR_LEN];
    EXPECT_EQ_INT(-1, gw_peer_parse(buf, len, GW_HELLO, &out, err));
    EXPECT_TRUE(strstr(err, "checksum") != NULL);
}

TAP_CASE(test_other_version_magic_type_and_length_refused)
{
    struct gw_peer m = sample_peer(1), out;
    uint8_t buf[GW_MSG_MAX], bad[GW_MSG_MAX];
    size_t len = gw_peer_encode(GW_HELLO, &m, buf, sizeof(buf));
    char err[HS_ERR_LEN];
    memcpy(bad, buf, len);
    bad[4] = 2; /* version */
    reseal(bad, len);
    EXPECT_EQ_INT(-1, gw_peer_parse(bad, len, GW_HELLO, &out, err));
    EXPECT_TRUE(strstr(err, "version 2") != NULL);
    memcpy(bad, buf, len);
    bad[0] ^= 0xff;
    EXPECT_EQ_INT(-1, gw_peer_parse(bad, len, GW_HELLO, &out, err));
    EXPECT_TRUE(strstr(err, "magic") != NULL);
    /* a REPLY where a HELLO is expected */
    EXPECT_EQ_INT(-1, gw_peer_parse(buf, len, GW_REPLY, &out, err));
    /* truncated: the length field disagrees */
    EXPECT_EQ_INT(-1, gw_peer_parse(buf, len - 1, GW_HELLO, &out, err));
    EXPECT_EQ_INT(-1, gw_peer_parse(buf, 10, GW_HELLO, &out, err));
    EXPECT_EQ_INT(-1, gw_peer_parse(NULL, 0, GW_HELLO, &out, err));
}

TAP_CASE(test_hostile_fields_refused_even_with_a_valid_crc)
{
    struct gw_peer m = sample_peer(2), out;
    uint8_t buf[GW_MSG_MAX], bad[GW_MSG_MAX];
    size_t len = gw_peer_encode(GW_HELLO, &m, buf, sizeof(buf));
    char err[HS_ERR_LEN];
    struct { size_t off; uint8_t val; const char *why; } edits[] = {
        { GW_HEADER + 8, 9, "source rank beyond the rank count" },
        { GW_HEADER + 8, 2, "source rank equals the destination" },
        { GW_HEADER + 40, 7, "link layer" },
        { GW_HEADER + 41, 3, "port count" },
        { GW_HEADER + 42, 1, "QP count disagreeing with the length" },
        { GW_HEADER + 43, 1, "QP kind (none) beside its QPs" },
        { GW_HEADER + 43, 2, "QP kind" },
        { GW_HEADER + 44, 1, "reserved byte" },
        { GW_HEADER + GW_PEER_FIXED + 3, 0x01, "QP number beyond 24 bits" },
        { GW_HEADER + GW_PEER_FIXED + 11, 2, "QP port index beyond the ports" },
        { GW_HEADER + GW_PEER_FIXED + 12, 6, "MTU code" },
        { GW_HEADER + GW_PEER_FIXED + 14, 2, "global flag" },
    };
    for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
        memcpy(bad, buf, len);
        bad[edits[i].off] = edits[i].val;
        reseal(bad, len);
        if (gw_peer_parse(bad, len, GW_HELLO, &out, err) != -1)
            tap_fail_at(__FILE__, __LINE__, "accepted a HELLO with a bad %s", edits[i].why);
    }
    /* a rank count beyond any job */
    memcpy(bad, buf, len);
    bad[GW_HEADER + 7] = 0x40;
    reseal(bad, len);
    EXPECT_EQ_INT(-1, gw_peer_parse(bad, len, GW_HELLO, &out, err));
}

TAP_CASE(test_win_round_trips_and_rejects_wrapping_windows)
{
    struct gw_win w = { .seq = 7, .addr = 0x7f0012340000ull, .size = 1 << 20, .rkey = 0xdeadbeef }, out;
    uint8_t buf[GW_WIN_SIZE];
    EXPECT_EQ_INT(GW_WIN_SIZE, gw_win_encode(&w, buf, sizeof(buf)));
    char err[HS_ERR_LEN];
    EXPECT_EQ_INT(0, gw_win_parse(buf, sizeof(buf), &out, err));
    EXPECT_EQ_INT(7, out.seq);
    EXPECT_EQ_U64(w.addr, out.addr);
    EXPECT_EQ_U64(w.size, out.size);
    EXPECT_EQ_U64(0xdeadbeef, out.rkey);
    w.addr = ~0ull - 10;
    gw_win_encode(&w, buf, sizeof(buf));
    EXPECT_EQ_INT(-1, gw_win_parse(buf, sizeof(buf), &out, err));
    EXPECT_TRUE(strstr(err, "wraps") != NULL);
    w.addr = 0x1000;
    w.status = 1; /* the sender's registration failed: no window, but well formed */
    gw_win_encode(&w, buf, sizeof(buf));
    EXPECT_EQ_INT(0, gw_win_parse(buf, sizeof(buf), &out, err));
    EXPECT_EQ_INT(1, out.status);
    buf[GW_HEADER + 4] = 2;
    reseal(buf, sizeof(buf));
    EXPECT_EQ_INT(-1, gw_win_parse(buf, sizeof(buf), &out, err));
}

TAP_CASE(test_framed_reader_takes_one_message_in_pieces_and_refuses_garbage)
{
    int sv[2];
    EXPECT_EQ_INT(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv));
    struct gw_peer m = sample_peer(2);
    uint8_t buf[GW_MSG_MAX];
    size_t len = gw_peer_encode(GW_REPLY, &m, buf, sizeof(buf));
    struct gw_rx rx;
    gw_rx_init(&rx);
    char err[HS_ERR_LEN];
    EXPECT_EQ_INT(0, gw_rx_step(sv[1], &rx, err)); /* nothing yet */
    EXPECT_EQ_INT(7, write(sv[0], buf, 7));
    EXPECT_EQ_INT(0, gw_rx_step(sv[1], &rx, err));
    EXPECT_EQ_INT((long long)(len - 7), write(sv[0], buf + 7, len - 7));
    EXPECT_EQ_INT(1, gw_rx_step(sv[1], &rx, err));
    EXPECT_EQ_INT((long long)len, rx.off);
    /* a header announcing more than any message has */
    uint8_t junk[GW_HEADER];
    memcpy(junk, buf, GW_HEADER);
    junk[10] = 0x10; /* length 1 MiB */
    gw_rx_init(&rx);
    EXPECT_EQ_INT(GW_HEADER, write(sv[0], junk, GW_HEADER));
    EXPECT_EQ_INT(-1, gw_rx_step(sv[1], &rx, err));
    EXPECT_TRUE(strstr(err, "length") != NULL);
    /* the peer closing mid-message */
    gw_rx_init(&rx);
    EXPECT_EQ_INT(5, write(sv[0], buf, 5));
    close(sv[0]);
    EXPECT_EQ_INT(-1, gw_rx_step(sv[1], &rx, err));
    EXPECT_TRUE(strstr(err, "closed") != NULL);
    close(sv[1]);
}

int main(int argc, char **argv) { return tap_run(argc, argv); }
