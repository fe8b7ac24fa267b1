/* gdaki_prm.h: the few mlx5 PRM command mailboxes the DEVX path of the
 * GPU-initiated queue uses (CREATE_CQ, CREATE_QP, the QP state moves,
 * QUERY_QP), as field positions and pure encoders/decoders.
 *
 * Layout facts (the mlx5 PRM, as rdma-core's mlx5_ifc.h spells them):
 * a mailbox is a sequence of big-endian 32-bit words; a field is named by
 * its bit offset from the start (bit 0 is the most significant bit of word
 * 0) and its width.  A field never crosses a word, except the 64-bit ones
 * (two whole words, high word first) and the 128-bit GID.  The QP context
 * (qpc, 0x740 bits) sits at bit 0xc0 in CREATE_QP and in every modify and
 * query mailbox; the CQ context (cqc, 0x200 bits) at bit 0x80 of CREATE_CQ.
 *
 * Users: plugin/gdaki/gdaki_devx.c encodes, softnic's libmlx5
 * (tests/softnic/mlx5_devx.c) decodes, and tests/gdaki/test_gdaki_prm.c
 * holds both to byte images computed by hand from the PRM.  Each field is
 * a macro expanding to "offset, width" so it reads PRM_SET(buf, F, v). */
#ifndef RAILNET_GDAKI_PRM_H
#define RAILNET_GDAKI_PRM_H

#include <stddef.h>
#include <stdint.h>

/* ---- command opcodes and statuses ---- */
#define PRM_OP_QUERY_HCA_CAP 0x100
#define PRM_OP_CREATE_CQ 0x400
#define PRM_OP_DESTROY_CQ 0x401
#define PRM_OP_QUERY_CQ 0x402
#define PRM_OP_CREATE_QP 0x500
#define PRM_OP_DESTROY_QP 0x501
#define PRM_OP_RST2INIT_QP 0x502
#define PRM_OP_INIT2RTR_QP 0x503
#define PRM_OP_RTR2RTS_QP 0x504
#define PRM_OP_RTS2RTS_QP 0x505
#define PRM_OP_2ERR_QP 0x507
#define PRM_OP_2RST_QP 0x50a
#define PRM_OP_QUERY_QP 0x50b
#define PRM_OP_QUERY_ROCE_ADDRESS 0x760

#define PRM_STATUS_OK 0x00
#define PRM_STATUS_INTERNAL_ERR 0x01
#define PRM_STATUS_BAD_OP 0x02
#define PRM_STATUS_BAD_PARAM 0x03
#define PRM_STATUS_BAD_SYS_STATE 0x04
#define PRM_STATUS_BAD_RES 0x05
#define PRM_STATUS_RES_BUSY 0x06
#define PRM_STATUS_EXCEED_LIM 0x08
#define PRM_STATUS_BAD_RES_STATE 0x09
#define PRM_STATUS_BAD_QP_STATE 0x10
#define PRM_STATUS_BAD_INP_LEN 0x50
#define PRM_STATUS_BAD_OUTP_LEN 0x51

/* qpc.state */
#define PRM_QP_STATE_RST 0x0
#define PRM_QP_STATE_INIT 0x1
#define PRM_QP_STATE_RTR 0x2
#define PRM_QP_STATE_RTS 0x3
#define PRM_QP_STATE_SQER 0x4
#define PRM_QP_STATE_ERR 0x6

#define PRM_QP_ST_RC 0x0
#define PRM_QP_PM_MIGRATED 0x3
#define PRM_QP_RQ_ZERO_LEN 0x3  /* rq_type: no receive queue */

/* Mailbox sizes in bytes. */
#define PRM_CREATE_CQ_IN_BYTES 0x110
#define PRM_QP_CMD_IN_BYTES 0x110   /* CREATE_QP and every state move */
#define PRM_QUERY_QP_IN_BYTES 0x10
#define PRM_QUERY_QP_OUT_BYTES 0x110
#define PRM_OUT_BYTES 0x10          /* create / modify outputs */
#define PRM_QUERY_HCA_CAP_IN_BYTES 0x10
#define PRM_QUERY_HCA_CAP_OUT_BYTES (0x10 + 0x1000)

/* ---- fields: bit offset, width ---- */
/* every input / output */
#define PRM_IN_OPCODE 0x00, 16
#define PRM_IN_UID 0x10, 16
#define PRM_IN_OP_MOD 0x30, 16
#define PRM_OUT_STATUS 0x00, 8
#define PRM_OUT_SYNDROME 0x20, 32
#define PRM_OUT_OBJ_ID 0x48, 24     /* cqn of CREATE_CQ, qpn of CREATE_QP */

/* QUERY_HCA_CAP: op_mod is the capability type << 1 | current (1) or
 * maximum (0) values; the output's capability starts at 0x80. */
#define PRM_HCA_CAP_GENERAL_CURRENT 0x1
#define PRM_HCA_CAP(o) (0x80 + (o))
#define PRM_HCA_CAP_MAX_WQE_SZ_SQ PRM_HCA_CAP(0x290), 16   /* bytes */

/* CREATE_CQ: cqc at 0x80 */
#define PRM_CQC(o) (0x80 + (o))
#define PRM_CQ_DBR_UMEM_VALID PRM_CQC(0x06), 1
#define PRM_CQ_CQE_SZ PRM_CQC(0x08), 3         /* 0: 64-byte CQEs */
#define PRM_CQ_OI PRM_CQC(0x0e), 1
#define PRM_CQ_DBR_UMEM_ID PRM_CQC(0x20), 32
#define PRM_CQ_PAGE_OFFSET PRM_CQC(0x54), 6
#define PRM_CQ_LOG_SIZE PRM_CQC(0x63), 5
#define PRM_CQ_UAR_PAGE PRM_CQC(0x68), 24
#define PRM_CQ_C_EQN PRM_CQC(0xa0), 32
#define PRM_CQ_LOG_PAGE_SIZE PRM_CQC(0xc3), 5
#define PRM_CQ_DBR_ADDR PRM_CQC(0x1c0), 64
#define PRM_CQ_UMEM_OFFSET 0x280, 64
#define PRM_CQ_UMEM_ID 0x2c0, 32
#define PRM_CQ_UMEM_VALID 0x2e0, 1

/* QP commands: the qpn of a state move or query, then qpc at 0xc0 */
#define PRM_QP_CMD_QPN 0x48, 24
#define PRM_QP_OPT_PARAM_MASK 0x80, 32
#define PRM_QPC(o) (0xc0 + (o))
#define PRM_QPC_STATE PRM_QPC(0x00), 4
#define PRM_QPC_ST PRM_QPC(0x08), 8
#define PRM_QPC_PM_STATE PRM_QPC(0x13), 2
#define PRM_QPC_PD PRM_QPC(0x28), 24
#define PRM_QPC_MTU PRM_QPC(0x40), 3
#define PRM_QPC_LOG_MSG_MAX PRM_QPC(0x43), 5
#define PRM_QPC_LOG_RQ_SIZE PRM_QPC(0x49), 4
#define PRM_QPC_NO_SQ PRM_QPC(0x50), 1
#define PRM_QPC_LOG_SQ_SIZE PRM_QPC(0x51), 4
#define PRM_QPC_UAR_PAGE PRM_QPC(0x68), 24
#define PRM_QPC_LOG_PAGE_SIZE PRM_QPC(0xa3), 5
#define PRM_QPC_REMOTE_QPN PRM_QPC(0xa8), 24
/* primary address path (ads) at qpc 0xc0 */
#define PRM_ADS(o) PRM_QPC(0xc0 + (o))
#define PRM_ADS_PKEY_INDEX PRM_ADS(0x10), 16
#define PRM_ADS_GRH PRM_ADS(0x28), 1
#define PRM_ADS_RLID PRM_ADS(0x30), 16
#define PRM_ADS_ACK_TIMEOUT PRM_ADS(0x40), 5
#define PRM_ADS_SRC_ADDR_INDEX PRM_ADS(0x48), 8
#define PRM_ADS_HOP_LIMIT PRM_ADS(0x58), 8
#define PRM_ADS_TCLASS PRM_ADS(0x64), 8
#define PRM_ADS_RGID_BIT PRM_ADS(0x80)            /* 16 bytes */
#define PRM_ADS_UDP_SPORT PRM_ADS(0x110), 16
#define PRM_ADS_SL PRM_ADS(0x124), 4
#define PRM_ADS_VHCA_PORT PRM_ADS(0x128), 8
#define PRM_ADS_RMAC_47_32 PRM_ADS(0x130), 16
#define PRM_ADS_RMAC_31_0 PRM_ADS(0x140), 32
#define PRM_QPC_LOG_SRA_MAX PRM_QPC(0x388), 3
#define PRM_QPC_RETRY_COUNT PRM_QPC(0x38d), 3
#define PRM_QPC_RNR_RETRY PRM_QPC(0x390), 3
#define PRM_QPC_NEXT_SEND_PSN PRM_QPC(0x3c8), 24
#define PRM_QPC_CQN_SND PRM_QPC(0x3e8), 24
#define PRM_QPC_LOG_RRA_MAX PRM_QPC(0x488), 3
#define PRM_QPC_RRE PRM_QPC(0x490), 1
#define PRM_QPC_RWE PRM_QPC(0x491), 1
#define PRM_QPC_RAE PRM_QPC(0x492), 1
#define PRM_QPC_PAGE_OFFSET PRM_QPC(0x494), 6
#define PRM_QPC_MIN_RNR_NAK PRM_QPC(0x4a3), 5
#define PRM_QPC_NEXT_RCV_PSN PRM_QPC(0x4a8), 24
#define PRM_QPC_CQN_RCV PRM_QPC(0x4e8), 24
#define PRM_QPC_DBR_ADDR PRM_QPC(0x500), 64
#define PRM_QPC_RQ_TYPE PRM_QPC(0x565), 3
#define PRM_QPC_DBR_UMEM_VALID PRM_QPC(0x683), 1
#define PRM_QPC_DBR_UMEM_ID PRM_QPC(0x720), 32
/* CREATE_QP after the qpc */
#define PRM_QP_WQ_UMEM_OFFSET 0x800, 64
#define PRM_QP_WQ_UMEM_ID 0x840, 32
#define PRM_QP_WQ_UMEM_VALID 0x860, 1

/* ---- access ---- */
void prm_set(void *mbox, unsigned off, unsigned width, uint64_t v);
uint64_t prm_get(const void *mbox, unsigned off, unsigned width);
#define PRM_SET(m, f, v) prm_set((m), f, (uint64_t)(v))
#define PRM_GET(m, f) prm_get((m), f)
void prm_set_bytes(void *mbox, unsigned bit_off, const void *src, size_t n);
void prm_get_bytes(const void *mbox, unsigned bit_off, void *dst, size_t n);

/* ---- encoders (the input mailbox is zeroed first) ---- */
struct prm_cq_params {
    uint32_t log_size;          /* 2^log_size 64-byte CQEs */
    uint32_t uar_page, eqn;
    uint32_t umem_id;           /* the ring */
    uint64_t umem_offset;
    uint32_t dbr_umem_id;       /* the doorbell record (8 bytes) */
    uint64_t dbr_offset;
};
void prm_create_cq_in(void *in, const struct prm_cq_params *p);

struct prm_qp_params {
    uint32_t pdn, cqn, uar_page;
    uint32_t log_sq_size;       /* 2^n 64-byte basic blocks; no receive queue */
    uint32_t wq_umem_id;
    uint64_t wq_umem_offset;
    uint32_t dbr_umem_id;
    uint64_t dbr_offset;        /* record pair: [0] receive, [1] send */
};
void prm_create_qp_in(void *in, const struct prm_qp_params *p);

/* RST2INIT: port, access (remote read/write/atomic as rre/rwe/rae). */
void prm_rst2init_in(void *in, uint32_t qpn, uint8_t port, int rre, int rwe, int rae);

struct prm_rtr_params {
    uint32_t remote_qpn, rq_psn;
    uint8_t mtu;                /* enum ibv_mtu: the PRM uses the same 1..5 */
    uint8_t port;
    int global;                 /* route by GID (RoCE, or IB with GRH) */
    uint8_t rgid[16];
    uint8_t sgid_index, hop_limit;
    uint16_t rlid;              /* without GRH */
    uint16_t udp_sport;
    uint8_t rmac[6];            /* RoCE: next-hop MAC (0 on softnic) */
    uint8_t min_rnr_nak;
    uint8_t log_rra_max;        /* max_dest_rd_atomic = 2^n */
};
void prm_init2rtr_in(void *in, uint32_t qpn, const struct prm_rtr_params *p);
void prm_rtr2rts_in(void *in, uint32_t qpn, uint32_t sq_psn, uint8_t ack_timeout, uint8_t retry,
                    uint8_t rnr_retry, uint8_t log_sra_max);
void prm_qp_simple_in(void *in, uint16_t opcode, uint32_t qpn);  /* 2ERR, 2RST, QUERY_QP */
void prm_query_hca_cap_in(void *in);   /* general device capabilities, current values */
/* From a QUERY_HCA_CAP output: the most 16-byte units one send WQE may
 * hold (max_wqe_sz_sq / 16, at most 63, the ds field's most); 0 when the
 * command failed, or the device says less than the smallest WQE (2 units:
 * nothing usable). */
uint32_t prm_max_wqe_ds(const void *out);

/* A command's outcome: status and syndrome from out. */
static inline uint8_t prm_out_status(const void *out)
{
    return (uint8_t)prm_get(out, PRM_OUT_STATUS);
}
const char *prm_status_str(uint8_t status);

#endif
