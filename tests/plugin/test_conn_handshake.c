/* tests/plugin/test_conn_handshake.c: the handshake wire format round-trips
 * and its parsers reject every malformed input with the right status. */
#include "../tap.h"
#include "plugin/ib/handshake.h"

#include <stdlib.h>

static struct hs_handle sample_handle(void)
{
    struct hs_handle h = { .version = HS_VERSION, .family = 4, .link_layer = 2, .nports = 2,
                           .tcp_port = 41234, .guid = 0x1122334455667788ull, .nonce = 0xabcdefull };
    h.addr[0] = 127; h.addr[1] = 0; h.addr[2] = 0; h.addr[3] = 1;
    return h;
}

static struct hs_hello sample_hello(int nqps)
{
    struct hs_hello m;
    memset(&m, 0, sizeof(m));
    m.target_guid = 0x1122334455667788ull;
    m.nonce = 0xabcdef;
    m.src_guid = 0x99;
    m.link_layer = 2;
    m.nqps = (uint8_t)nqps;
    m.nports = 2;
    m.cts_slots = HS_CTS_SLOTS;
    m.cts_entry_size = HS_CTS_ENTRY_SIZE;
    m.max_recvs = HS_MAX_RECVS;
    m.cts_addr = 0x7f0000001000ull;
    m.cts_rkey[0] = 0x1234;
    m.cts_rkey[1] = 0x5678;
    for (int i = 0; i < nqps; i++) {
        m.qp[i] = (struct hs_qp_info){ .qpn = 0x100 + (uint32_t)i, .psn = 0xabcde, .lid = 0,
                                       .port_num = (uint8_t)(1 + i % 2), .port_idx = (uint8_t)(i % 2),
                                       .mtu = 3, .gid_index = 1, .is_global = 1 };
        m.qp[i].gid[10] = 0xff; m.qp[i].gid[11] = 0xff; m.qp[i].gid[12] = 127; m.qp[i].gid[15] = (uint8_t)i;
    }
    return m;
}

static struct hs_reply sample_reply(int nqps)
{
    struct hs_hello h = sample_hello(nqps);
    struct hs_reply r;
    memset(&r, 0, sizeof(r));
    r.guid = 0x42;
    r.nqps = (uint8_t)nqps;
    r.nports = 2;
    r.sizes_addr = 0x7f0000002000ull;
    r.sizes_rkey[0] = 7;
    r.sizes_rkey[1] = 8;
    memcpy(r.qp, h.qp, sizeof(r.qp));
    return r;
}

TAP_CASE(test_conn_handle_roundtrip)
{
    struct hs_handle h = sample_handle(), back;
    uint8_t buf[HS_HANDLE_SIZE];
    char err[HS_ERR_LEN] = "";
    hs_handle_encode(&h, buf);
    EXPECT_EQ_INT(HS_OK, hs_handle_parse(buf, sizeof(buf), &back, err));
    EXPECT_EQ_U64(h.guid, back.guid);
    EXPECT_EQ_U64(h.nonce, back.nonce);
    EXPECT_EQ_INT(h.tcp_port, back.tcp_port);
    EXPECT_EQ_INT(2, back.nports);
    EXPECT_MEMEQ(h.addr, back.addr, 16);
}

TAP_CASE(test_conn_handle_every_flipped_byte_rejected)
{
    struct hs_handle h = sample_handle(), back;
    uint8_t buf[HS_HANDLE_SIZE];
    char err[HS_ERR_LEN];
    hs_handle_encode(&h, buf);
    for (int i = 0; i < HS_HANDLE_SIZE; i++) {
        uint8_t c[HS_HANDLE_SIZE];
        memcpy(c, buf, sizeof(c));
        c[i] ^= 0x10;
        enum hs_status s = hs_handle_parse(c, sizeof(c), &back, err);
        if (s == HS_OK)
            tap_fail_at(__FILE__, __LINE__, "byte %d flipped: expected an error, got HS_OK", i);
    }
}

TAP_CASE(test_conn_handle_wrong_version_says_version)
{
    struct hs_handle h = sample_handle(), back;
    uint8_t buf[HS_HANDLE_SIZE];
    char err[HS_ERR_LEN] = "";
    h.version = 7;
    hs_handle_encode(&h, buf);
    EXPECT_EQ_INT(HS_EVERSION, hs_handle_parse(buf, sizeof(buf), &back, err));
    EXPECT_TRUE(strstr(err, "version 7") != NULL);
}

TAP_CASE(test_conn_handle_short_rejected)
{
    struct hs_handle h = sample_handle(), back;
    uint8_t buf[HS_HANDLE_SIZE];
    char err[HS_ERR_LEN];
    hs_handle_encode(&h, buf);
    EXPECT_EQ_INT(HS_ESHORT, hs_handle_parse(buf, 64, &back, err));
    EXPECT_EQ_INT(HS_ESHORT, hs_handle_parse(NULL, 128, &back, err));
}

TAP_CASE(test_conn_hello_roundtrip_every_qp_count)
{
    for (int n = 1; n <= HS_MAX_QPS; n++) {
        struct hs_hello m = sample_hello(n), back;
        uint8_t buf[HS_MSG_MAX];
        char err[HS_ERR_LEN] = "";
        size_t len = hs_hello_encode(&m, HS_VERSION, buf, sizeof(buf));
        EXPECT_EQ_INT(HS_HEADER_SIZE + HS_HELLO_FIXED + n * HS_QP_INFO_SIZE, len);
        uint16_t type;
        uint32_t mlen;
        EXPECT_EQ_INT(HS_OK, hs_header_parse(buf, HS_HEADER_SIZE, &type, &mlen, err));
        EXPECT_EQ_INT(HS_HELLO, type);
        EXPECT_EQ_INT(len, mlen);
        EXPECT_EQ_INT(HS_OK, hs_hello_parse(buf, len, &back, err));
        EXPECT_EQ_INT(n, back.nqps);
        EXPECT_EQ_U64(m.cts_addr, back.cts_addr);
        EXPECT_EQ_INT(m.cts_rkey[1], back.cts_rkey[1]);
        EXPECT_EQ_INT(m.qp[n - 1].qpn, back.qp[n - 1].qpn);
        EXPECT_MEMEQ(m.qp[n - 1].gid, back.qp[n - 1].gid, 16);
    }
}

TAP_CASE(test_conn_hello_every_flipped_byte_rejected)
{
    struct hs_hello m = sample_hello(3), back;
    uint8_t buf[HS_MSG_MAX];
    char err[HS_ERR_LEN];
    size_t len = hs_hello_encode(&m, HS_VERSION, buf, sizeof(buf));
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            uint8_t c[HS_MSG_MAX];
            memcpy(c, buf, len);
            c[i] ^= (uint8_t)(1u << bit);
            if (hs_hello_parse(c, len, &back, err) == HS_OK)
                tap_fail_at(__FILE__, __LINE__, "byte %zu bit %d flipped: expected an error, got HS_OK", i, bit);
        }
    }
}

TAP_CASE(test_conn_hello_wrong_version_rejected)
{
    struct hs_hello m = sample_hello(2), back;
    uint8_t buf[HS_MSG_MAX];
    char err[HS_ERR_LEN] = "";
    size_t len = hs_hello_encode(&m, HS_VERSION + 1, buf, sizeof(buf));
    EXPECT_TRUE(len > 0);
    EXPECT_EQ_INT(HS_EVERSION, hs_hello_parse(buf, len, &back, err));
    char want[32];
    snprintf(want, sizeof(want), "version %d", HS_VERSION + 1);
    EXPECT_TRUE(strstr(err, want) != NULL);
}

TAP_CASE(test_conn_hello_truncated_rejected)
{
    struct hs_hello m = sample_hello(4), back;
    uint8_t buf[HS_MSG_MAX];
    char err[HS_ERR_LEN];
    size_t len = hs_hello_encode(&m, HS_VERSION, buf, sizeof(buf));
    for (size_t l = 0; l < len; l++)
        if (hs_hello_parse(buf, l, &back, err) == HS_OK)
            tap_fail_at(__FILE__, __LINE__, "%zu of %zu bytes: expected an error, got HS_OK", l, len);
}

TAP_CASE(test_conn_hello_encode_refuses_bad_counts)
{
    uint8_t buf[HS_MSG_MAX];
    struct hs_hello m = sample_hello(2);
    m.nqps = 0;
    EXPECT_EQ_INT(0, hs_hello_encode(&m, HS_VERSION, buf, sizeof(buf)));
    m = sample_hello(2);
    m.nqps = HS_MAX_QPS + 1;
    EXPECT_EQ_INT(0, hs_hello_encode(&m, HS_VERSION, buf, sizeof(buf)));
    m = sample_hello(2);
    m.qp[1].port_idx = 2;
    EXPECT_EQ_INT(0, hs_hello_encode(&m, HS_VERSION, buf, sizeof(buf)));
    m = sample_hello(2);
    EXPECT_EQ_INT(0, hs_hello_encode(&m, HS_VERSION, buf, 40));
}

TAP_CASE(test_conn_hello_other_ring_geometry_rejected)
{
    struct hs_hello m = sample_hello(2), back;
    uint8_t buf[HS_MSG_MAX];
    char err[HS_ERR_LEN] = "";
    m.cts_slots = 64;
    size_t len = hs_hello_encode(&m, HS_VERSION, buf, sizeof(buf));
    EXPECT_EQ_INT(HS_EFIELD, hs_hello_parse(buf, len, &back, err));
    EXPECT_TRUE(strstr(err, "CTS ring") != NULL);
}

TAP_CASE(test_conn_reply_roundtrip)
{
    struct hs_reply r = sample_reply(5), back;
    uint8_t buf[HS_MSG_MAX];
    char err[HS_ERR_LEN] = "";
    size_t len = hs_reply_encode(&r, HS_VERSION, buf, sizeof(buf));
    EXPECT_TRUE(len > 0);
    EXPECT_EQ_INT(HS_OK, hs_reply_parse(buf, len, &back, err));
    EXPECT_EQ_INT(0, back.status);
    EXPECT_EQ_INT(5, back.nqps);
    EXPECT_EQ_U64(r.sizes_addr, back.sizes_addr);
    EXPECT_EQ_INT(8, back.sizes_rkey[1]);
    EXPECT_EQ_INT(r.qp[4].qpn, back.qp[4].qpn);
}

TAP_CASE(test_conn_reply_rejection_roundtrip)
{
    struct hs_reply r, back;
    memset(&r, 0, sizeof(r));
    r.status = HS_REJECT_WRONG_DEVICE;
    uint8_t buf[HS_MSG_MAX];
    char err[HS_ERR_LEN] = "";
    size_t len = hs_reply_encode(&r, HS_VERSION, buf, sizeof(buf));
    EXPECT_EQ_INT(HS_HEADER_SIZE + HS_REPLY_FIXED, len);
    EXPECT_EQ_INT(HS_OK, hs_reply_parse(buf, len, &back, err));
    EXPECT_EQ_INT(HS_REJECT_WRONG_DEVICE, back.status);
    EXPECT_TRUE(strstr(hs_reject_str(back.status), "another device") != NULL);
}

TAP_CASE(test_conn_reply_every_flipped_byte_rejected)
{
    struct hs_reply r = sample_reply(2), back;
    uint8_t buf[HS_MSG_MAX];
    char err[HS_ERR_LEN];
    size_t len = hs_reply_encode(&r, HS_VERSION, buf, sizeof(buf));
    for (size_t i = 0; i < len; i++) {
        uint8_t c[HS_MSG_MAX];
        memcpy(c, buf, len);
        c[i] ^= 0x01;
        if (hs_reply_parse(c, len, &back, err) == HS_OK)
            tap_fail_at(__FILE__, __LINE__, "byte %zu flipped: expected an error, got HS_OK", i);
    }
}

TAP_CASE(test_conn_ready_roundtrip_and_type_checked)
{
    uint8_t buf[HS_MSG_MAX];
    char err[HS_ERR_LEN] = "";
    size_t len = hs_ready_encode(HS_VERSION, buf, sizeof(buf));
    EXPECT_EQ_INT(HS_READY_SIZE, len);
    EXPECT_EQ_INT(HS_OK, hs_ready_parse(buf, len, err));
    struct hs_hello back;
    EXPECT_EQ_INT(HS_ETYPE, hs_hello_parse(buf, len, &back, err));
}

TAP_CASE(test_conn_header_rejects_oversized_length)
{
    uint8_t buf[HS_MSG_MAX];
    char err[HS_ERR_LEN] = "";
    hs_ready_encode(HS_VERSION, buf, sizeof(buf));
    buf[8] = 0xff; buf[9] = 0xff; buf[10] = 0xff; buf[11] = 0x7f;
    EXPECT_EQ_INT(HS_ELENGTH, hs_header_parse(buf, HS_HEADER_SIZE, NULL, NULL, err));
}

TAP_CASE(test_conn_cm_handle_carries_the_second_ports_address)
{
    struct hs_handle h = sample_handle(), back;
    uint8_t buf[HS_HANDLE_SIZE];
    char err[HS_ERR_LEN] = "";
    h.cm = 1;
    h.family = 4;
    memset(h.addr, 0, 16);
    uint8_t a[8] = { 10, 0, 0, 1, 10, 0, 1, 1 };
    memcpy(h.addr, a, 8);
    hs_handle_encode(&h, buf);
    EXPECT_EQ_INT(1, buf[11]);
    EXPECT_EQ_INT(HS_OK, hs_handle_parse(buf, sizeof(buf), &back, err));
    EXPECT_EQ_INT(1, back.cm);
    EXPECT_MEMEQ(a, back.addr, 8);
    /* without the CM, bytes 4..7 of an IPv4 address are padding */
    h.cm = 0;
    hs_handle_encode(&h, buf);
    EXPECT_EQ_INT(HS_EFIELD, hs_handle_parse(buf, sizeof(buf), &back, err));
}

static struct hs_cm_hello sample_cm_hello(void)
{
    struct hs_cm_hello m = { .qp_index = 1, .nqps = 4, .nports = 2, .link_layer = 2,
                             .conn_id = 0x1122334455667788ull, .nonce = 0x99, .target_guid = 0xabcdef,
                             .cts_addr = 0x7f0000001000ull, .cts_rkey = { 0x1234, 0x5678 } };
    return m;
}

TAP_CASE(test_conn_cm_hello_roundtrip_fits_the_req_and_every_flipped_byte_rejected)
{
    struct hs_cm_hello m = sample_cm_hello(), back;
    uint8_t buf[56];   /* the REQ's private data for rdma_cm users */
    char err[HS_ERR_LEN] = "";
    EXPECT_EQ_INT(HS_CM_HELLO_SIZE, hs_cm_hello_encode(&m, HS_VERSION, buf, sizeof(buf)));
    EXPECT_EQ_INT(HS_OK, hs_cm_hello_parse(buf, sizeof(buf), &back, err));
    EXPECT_EQ_U64(m.conn_id, back.conn_id);
    EXPECT_EQ_U64(m.cts_addr, back.cts_addr);
    EXPECT_EQ_INT(m.cts_rkey[1], back.cts_rkey[1]);
    EXPECT_EQ_INT(1, back.qp_index);
    for (int i = 0; i < HS_CM_HELLO_SIZE; i++) {
        uint8_t c[56];
        memcpy(c, buf, sizeof(c));
        c[i] ^= 0x04;
        if (hs_cm_hello_parse(c, sizeof(c), &back, err) == HS_OK)
            tap_fail_at(__FILE__, __LINE__, "byte %d flipped: expected an error, got HS_OK", i);
    }
    m.qp_index = 4;   /* not below nqps */
    EXPECT_EQ_INT(0, hs_cm_hello_encode(&m, HS_VERSION, buf, sizeof(buf)));
    EXPECT_EQ_INT(HS_ESHORT, hs_cm_hello_parse(buf, 40, &back, err));
}

TAP_CASE(test_conn_cm_reply_zero_padded_to_the_rep_and_padding_checked)
{
    struct hs_cm_reply m = { .qp_index = 0, .nqps = 2, .nports = 1, .guid = 7, .sizes_addr = 0x1000,
                             .sizes_rkey = { 9, 9 } }, back;
    uint8_t buf[196];   /* the REP's private data, as the CM delivers it */
    char err[HS_ERR_LEN] = "";
    memset(buf, 0, sizeof(buf));
    EXPECT_EQ_INT(HS_CM_REPLY_SIZE, hs_cm_reply_encode(&m, HS_VERSION, buf, sizeof(buf)));
    EXPECT_EQ_INT(HS_OK, hs_cm_reply_parse(buf, sizeof(buf), &back, err));
    EXPECT_EQ_U64(0x1000, back.sizes_addr);
    EXPECT_EQ_INT(0, back.status);
    buf[150] = 1;
    EXPECT_EQ_INT(HS_EFIELD, hs_cm_reply_parse(buf, sizeof(buf), &back, err));
    buf[150] = 0;
    buf[3] ^= 1;
    EXPECT_EQ_INT(HS_EMAGIC, hs_cm_reply_parse(buf, sizeof(buf), &back, err));
    /* a rejection: status, no sizes area */
    struct hs_cm_reply r = { .nqps = 1, .nports = 1, .status = HS_REJECT_PROTOCOL };
    EXPECT_EQ_INT(HS_CM_REPLY_SIZE, hs_cm_reply_encode(&r, HS_VERSION, buf, sizeof(buf)));
    EXPECT_EQ_INT(HS_OK, hs_cm_reply_parse(buf, HS_CM_REPLY_SIZE, &back, err));
    EXPECT_EQ_INT(HS_REJECT_PROTOCOL, back.status);
    /* a HELLO is not a REPLY */
    struct hs_cm_hello h = sample_cm_hello();
    EXPECT_EQ_INT(HS_CM_HELLO_SIZE, hs_cm_hello_encode(&h, HS_VERSION, buf, sizeof(buf)));
    EXPECT_EQ_INT(HS_ETYPE, hs_cm_reply_parse(buf, HS_CM_HELLO_SIZE, &back, err));
}

TAP_CASE(test_conn_crc32_known_value)
{
    /* The standard check value of CRC-32/IEEE. */
    EXPECT_EQ_U64(0xcbf43926u, hs_crc32("123456789", 9));
}

int main(int argc, char **argv) { return tap_run(argc, argv); }
