/* tests/gdaki/test_gdaki_prm.c: the PRM mailboxes of the DEVX path
 * (plugin/gdaki/gdaki_prm.c) against byte images computed by hand from
 * the field positions of the mlx5 PRM (mlx5_ifc.h names): each expected
 * byte below says which field it holds and how its offset was found
 * (bit offset / 8; a field's bits counted from the byte's MSB).  softnic
 * decodes with the same table, so these images are what ties both ends to
 * the PRM. */
#include <string.h>

#include "gdaki_prm.h"
#include "tap.h"

struct byte { unsigned off; uint8_t v; };

/* Every byte of mbox[0..len) is 0 except those listed. */
static void expect_image(const uint8_t *mbox, size_t len, const struct byte *want, size_t n)
{
    uint8_t img[0x200];
    memset(img, 0, sizeof(img));
    for (size_t i = 0; i < n; i++)
        img[want[i].off] = want[i].v;
    for (size_t i = 0; i < len; i++)
        if (mbox[i] != img[i])
            tap_fail_at(__FILE__, __LINE__, "byte 0x%zx: expected 0x%02x, got 0x%02x", i, img[i],
                        mbox[i]);
}

TAP_CASE(test_field_access_is_big_endian_msb_first)
{
    uint8_t m[16];
    memset(m, 0, sizeof(m));
    prm_set(m, 0x0c, 4, 0xa);          /* bits 12..15: low nibble of byte 1 */
    prm_set(m, 0x28, 24, 0x123456);    /* bytes 5..7 */
    prm_set(m, 0x40, 64, 0x0102030405060708ull);
    const uint8_t want[16] = { 0, 0x0a, 0, 0, 0, 0x12, 0x34, 0x56, 1, 2, 3, 4, 5, 6, 7, 8 };
    EXPECT_MEMEQ(want, m, 16);
    EXPECT_EQ_U64(0xa, prm_get(m, 0x0c, 4));
    EXPECT_EQ_U64(0x123456, prm_get(m, 0x28, 24));
    EXPECT_EQ_U64(0x0102030405060708ull, prm_get(m, 0x40, 64));
    /* Setting a field leaves its neighbours alone, and clips the value. */
    prm_set(m, 0x0c, 4, 0x1f);
    EXPECT_EQ_INT(0x0f, m[1]);
    EXPECT_EQ_INT(0, m[0]);
}

TAP_CASE(test_create_cq_image)
{
    uint8_t in[PRM_CREATE_CQ_IN_BYTES];
    memset(in, 0xee, sizeof(in));      /* the encoder clears the mailbox */
    struct prm_cq_params p = { .log_size = 5, .uar_page = 0x123, .eqn = 7, .umem_id = 0x11,
                               .umem_offset = 0x2000, .dbr_umem_id = 0x22, .dbr_offset = 0x3040 };
    prm_create_cq_in(in, &p);
    const struct byte want[] = {
        { 0x00, 0x04 }, { 0x01, 0x00 },    /* opcode 0x400 */
        /* cqc at byte 0x10 */
        { 0x10, 0x02 },                    /* dbr_umem_valid: cqc bit 6 */
        { 0x11, 0x02 },                    /* oi: cqc bit 0xe (0xf is cq_period_mode) */
        { 0x17, 0x22 },                    /* dbr_umem_id: cqc 0x20 -> bytes 0x14..0x17 */
        { 0x1c, 0x05 },                    /* log_cq_size: cqc 0x63, 5 bits */
        { 0x1e, 0x01 }, { 0x1f, 0x23 },    /* uar_page: cqc 0x68, 24 bits */
        { 0x27, 0x07 },                    /* c_eqn: cqc 0xa0 -> bytes 0x24..0x27 */
        { 0x4e, 0x30 }, { 0x4f, 0x40 },    /* dbr_addr: cqc 0x1c0 -> bytes 0x48..0x4f */
        { 0x56, 0x20 },                    /* cq_umem_offset: 0x280 -> bytes 0x50..0x57 */
        { 0x5b, 0x11 },                    /* cq_umem_id: 0x2c0 -> bytes 0x58..0x5b */
        { 0x5c, 0x80 },                    /* cq_umem_valid: bit 0x2e0 */
    };
    expect_image(in, sizeof(in), want, sizeof(want) / sizeof(want[0]));
}

TAP_CASE(test_create_qp_image)
{
    uint8_t in[PRM_QP_CMD_IN_BYTES];
    memset(in, 0xee, sizeof(in));
    struct prm_qp_params p = { .pdn = 0x1234, .cqn = 0x456, .uar_page = 9, .log_sq_size = 6,
                               .wq_umem_id = 0x33, .wq_umem_offset = 0,
                               .dbr_umem_id = 0x33, .dbr_offset = 0x5000 };
    prm_create_qp_in(in, &p);
    const struct byte want[] = {
        { 0x00, 0x05 }, { 0x01, 0x00 },    /* opcode 0x500 */
        /* qpc at byte 0x18; st (RC) = 0 */
        { 0x1a, 0x18 },                    /* pm_state 3: qpc 0x13, 2 bits */
        { 0x1e, 0x12 }, { 0x1f, 0x34 },    /* pd: qpc 0x28 -> bytes 0x1d..0x1f */
        { 0x22, 0x30 },                    /* log_sq_size 6: qpc 0x51, 4 bits */
        { 0x27, 0x09 },                    /* uar_page: qpc 0x68 -> bytes 0x25..0x27 */
        { 0x96, 0x04 }, { 0x97, 0x56 },    /* cqn_snd: qpc 0x3e8 -> bytes 0x95..0x97 */
        { 0xb6, 0x04 }, { 0xb7, 0x56 },    /* cqn_rcv: qpc 0x4e8 -> bytes 0xb5..0xb7 */
        { 0xbe, 0x50 },                    /* dbr_addr 0x5000: qpc 0x500 -> bytes 0xb8..0xbf */
        { 0xc4, 0x03 },                    /* rq_type zero-length: qpc 0x565, 3 bits */
        { 0xe8, 0x10 },                    /* dbr_umem_valid: qpc 0x683 */
        { 0xff, 0x33 },                    /* dbr_umem_id: qpc 0x720 -> bytes 0xfc..0xff */
        { 0x10b, 0x33 },                   /* wq_umem_id: 0x840 -> bytes 0x108..0x10b */
        { 0x10c, 0x80 },                   /* wq_umem_valid: bit 0x860 */
    };
    expect_image(in, sizeof(in), want, sizeof(want) / sizeof(want[0]));
}

TAP_CASE(test_rst2init_image)
{
    uint8_t in[PRM_QP_CMD_IN_BYTES];
    prm_rst2init_in(in, 0xabcdef, 1, 1, 1, 0);
    const struct byte want[] = {
        { 0x00, 0x05 }, { 0x01, 0x02 },    /* opcode 0x502 */
        { 0x09, 0xab }, { 0x0a, 0xcd }, { 0x0b, 0xef },  /* qpn: 0x48, 24 bits */
        { 0x1a, 0x18 },                    /* pm_state migrated */
        { 0x55, 0x01 },                    /* vhca_port_num: ads (byte 0x30) + 0x128 bits */
        { 0xaa, 0xc0 },                    /* rre, rwe: qpc 0x490, 0x491 */
    };
    expect_image(in, sizeof(in), want, sizeof(want) / sizeof(want[0]));
}

TAP_CASE(test_init2rtr_roce_image)
{
    uint8_t in[PRM_QP_CMD_IN_BYTES];
    struct prm_rtr_params p = {
        .remote_qpn = 0x20304, .rq_psn = 0x112233, .mtu = 3, .port = 1, .global = 1,
        .rgid = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1 },
        .sgid_index = 3, .hop_limit = 64, .udp_sport = 0xc123,
        .rmac = { 0x02, 0x00, 0x00, 0xaa, 0xbb, 0xcc }, .min_rnr_nak = 12, .log_rra_max = 0,
    };
    prm_init2rtr_in(in, 0x10, &p);
    const struct byte want[] = {
        { 0x00, 0x05 }, { 0x01, 0x03 },    /* opcode 0x503 */
        { 0x0b, 0x10 },                    /* qpn */
        { 0x20, 0x7e },                    /* mtu 3 (qpc 0x40, 3 bits) | log_msg_max 30 */
        { 0x2d, 0x02 }, { 0x2e, 0x03 }, { 0x2f, 0x04 },  /* remote_qpn: qpc 0xa8 */
        /* ads at byte 0x30 */
        { 0x35, 0x80 },                    /* grh: ads 0x28 */
        { 0x39, 0x03 },                    /* src_addr_index: ads 0x48 */
        { 0x3b, 0x40 },                    /* hop_limit: ads 0x58 */
        { 0x4a, 0xff }, { 0x4b, 0xff }, { 0x4c, 10 }, { 0x4f, 1 },  /* rgid: ads 0x80 */
        { 0x52, 0xc1 }, { 0x53, 0x23 },    /* udp_sport: ads 0x110 */
        { 0x55, 0x01 },                    /* vhca_port_num */
        { 0x56, 0x02 },                    /* rmac_47_32: ads 0x130 */
        { 0x59, 0xaa }, { 0x5a, 0xbb }, { 0x5b, 0xcc },  /* rmac_31_0: ads 0x140 */
        { 0xac, 0x0c },                    /* min_rnr_nak: qpc 0x4a3, 5 bits */
        { 0xad, 0x11 }, { 0xae, 0x22 }, { 0xaf, 0x33 },  /* next_rcv_psn: qpc 0x4a8 */
    };
    expect_image(in, sizeof(in), want, sizeof(want) / sizeof(want[0]));
}

TAP_CASE(test_init2rtr_ib_uses_the_lid)
{
    uint8_t in[PRM_QP_CMD_IN_BYTES];
    struct prm_rtr_params p = { .remote_qpn = 1, .mtu = 5, .port = 2, .rlid = 0xbeef };
    prm_init2rtr_in(in, 0x10, &p);
    EXPECT_EQ_INT(0, in[0x35]);        /* no GRH */
    EXPECT_EQ_INT(0xbe, in[0x36]);     /* rlid: ads 0x30 -> bytes 0x36..0x37 */
    EXPECT_EQ_INT(0xef, in[0x37]);
    EXPECT_EQ_INT(0xbe, in[0x20]);     /* mtu 5 | log_msg_max 30 */
}

TAP_CASE(test_rtr2rts_image)
{
    uint8_t in[PRM_QP_CMD_IN_BYTES];
    prm_rtr2rts_in(in, 0x10, 0x445566, 14, 7, 7, 0);
    const struct byte want[] = {
        { 0x00, 0x05 }, { 0x01, 0x04 },    /* opcode 0x504 */
        { 0x0b, 0x10 },
        { 0x38, 0x70 },                    /* ack_timeout 14: ads 0x40, 5 bits */
        { 0x89, 0x07 },                    /* retry_count: qpc 0x38d, 3 bits */
        { 0x8a, 0xe0 },                    /* rnr_retry: qpc 0x390, 3 bits */
        { 0x91, 0x44 }, { 0x92, 0x55 }, { 0x93, 0x66 },  /* next_send_psn: qpc 0x3c8 */
    };
    expect_image(in, sizeof(in), want, sizeof(want) / sizeof(want[0]));
}

TAP_CASE(test_query_qp_image_and_output_decoding)
{
    uint8_t in[PRM_QUERY_QP_IN_BYTES];
    prm_qp_simple_in(in, PRM_OP_QUERY_QP, 0x123456);
    const struct byte want[] = { { 0x00, 0x05 }, { 0x01, 0x0b }, { 0x09, 0x12 }, { 0x0a, 0x34 },
                                 { 0x0b, 0x56 } };
    expect_image(in, sizeof(in), want, sizeof(want) / sizeof(want[0]));
    /* An output: status 0x05, syndrome 0x5a0005, object 0x000abc; qpc.state ERR. */
    uint8_t out[PRM_QUERY_QP_OUT_BYTES];
    memset(out, 0, sizeof(out));
    out[0] = 0x05;
    out[4] = 0x00; out[5] = 0x5a; out[6] = 0x00; out[7] = 0x05;
    out[10] = 0x0a; out[11] = 0xbc;
    out[0x18] = 0x60;                  /* qpc.state 6 in the top nibble of qpc byte 0 */
    EXPECT_EQ_INT(PRM_STATUS_BAD_RES, prm_out_status(out));
    EXPECT_EQ_U64(0x5a0005, PRM_GET(out, PRM_OUT_SYNDROME));
    EXPECT_EQ_U64(0xabc, PRM_GET(out, PRM_OUT_OBJ_ID));
    EXPECT_EQ_U64(PRM_QP_STATE_ERR, PRM_GET(out, PRM_QPC_STATE));
    EXPECT_STREQ("BAD_RESOURCE", prm_status_str(PRM_STATUS_BAD_RES));
}

/* QUERY_HCA_CAP of the general capabilities' current values, and the
 * largest send WQE in its output (cmd_hca_cap bits 0x290-0x29f, after the
 * 16-byte output header: bytes 0x62-0x63). */
TAP_CASE(test_query_hca_cap_image_and_max_wqe_sz_sq)
{
    uint8_t in[PRM_QUERY_HCA_CAP_IN_BYTES];
    memset(in, 0xee, sizeof(in));
    prm_query_hca_cap_in(in);
    const struct byte want[] = { { 0x00, 0x01 }, { 0x01, 0x00 }, { 0x07, 0x01 } };
    expect_image(in, sizeof(in), want, sizeof(want) / sizeof(want[0]));
    static uint8_t out[PRM_QUERY_HCA_CAP_OUT_BYTES];
    memset(out, 0, sizeof(out));
    out[0x62] = 0x03;
    out[0x63] = 0xf0;                  /* 1008 bytes: 63 units of 16, the largest ds */
    out[0x61] = 0xff;                  /* num_of_diagnostic_counters' low byte stays out */
    out[0x64] = 0xff;
    EXPECT_EQ_U64(1008, PRM_GET(out, PRM_HCA_CAP_MAX_WQE_SZ_SQ));
    EXPECT_EQ_INT(63, (int)prm_max_wqe_ds(out));     /* a 63-unit WQE fits 1008 bytes */
    out[0x62] = 0x04;
    out[0x63] = 0x00;                                /* 1024 */
    EXPECT_EQ_INT(63, (int)prm_max_wqe_ds(out));     /* no more than ds counts */
    out[0x62] = 0x02;                                /* 512: 32 units, 8 BBs */
    EXPECT_EQ_INT(32, (int)prm_max_wqe_ds(out));
    out[0x62] = 0x00;
    out[0x63] = 0x1f;                                /* 31 bytes: nothing usable */
    EXPECT_EQ_INT(0, (int)prm_max_wqe_ds(out));
    out[0x62] = 0x02;
    out[0x63] = 0x00;
    out[0] = PRM_STATUS_BAD_OP;                      /* refused (softnic): unknown */
    EXPECT_EQ_INT(0, (int)prm_max_wqe_ds(out));
}

int main(int argc, char **argv)
{
    return tap_run(argc, argv);
}
