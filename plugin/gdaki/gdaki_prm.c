/* gdaki_prm.c: PRM mailbox access and the encoders of gdaki_prm.h. */
#include "gdaki_prm.h"

#include <string.h>

static uint32_t load_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void store_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

void prm_set(void *mbox, unsigned off, unsigned width, uint64_t v)
{
    uint8_t *m = mbox;
    if (width == 64) {      /* two whole words, high first */
        store_be32(m + off / 8, (uint32_t)(v >> 32));
        store_be32(m + off / 8 + 4, (uint32_t)v);
        return;
    }
    uint8_t *w = m + (off / 32) * 4;
    unsigned shift = 32 - (off % 32) - width;
    uint32_t mask = (width == 32 ? 0xffffffffu : ((1u << width) - 1)) << shift;
    store_be32(w, (load_be32(w) & ~mask) | (((uint32_t)v << shift) & mask));
}

uint64_t prm_get(const void *mbox, unsigned off, unsigned width)
{
    const uint8_t *m = mbox;
    if (width == 64)
        return (uint64_t)load_be32(m + off / 8) << 32 | load_be32(m + off / 8 + 4);
    uint32_t w = load_be32(m + (off / 32) * 4);
    unsigned shift = 32 - (off % 32) - width;
    return (w >> shift) & (width == 32 ? 0xffffffffu : ((1u << width) - 1));
}

void prm_set_bytes(void *mbox, unsigned bit_off, const void *src, size_t n)
{
    memcpy((uint8_t *)mbox + bit_off / 8, src, n);
}

void prm_get_bytes(const void *mbox, unsigned bit_off, void *dst, size_t n)
{
    memcpy(dst, (const uint8_t *)mbox + bit_off / 8, n);
}

void prm_create_cq_in(void *in, const struct prm_cq_params *p)
{
    memset(in, 0, PRM_CREATE_CQ_IN_BYTES);
    PRM_SET(in, PRM_IN_OPCODE, PRM_OP_CREATE_CQ);
    PRM_SET(in, PRM_CQ_CQE_SZ, 0);
    PRM_SET(in, PRM_CQ_LOG_SIZE, p->log_size);
    PRM_SET(in, PRM_CQ_UAR_PAGE, p->uar_page);
    PRM_SET(in, PRM_CQ_C_EQN, p->eqn);
    /* Overrun ignore: the poller frees entries through the doorbell
     * record; the NIC must not fail the CQ for being briefly full. */
    PRM_SET(in, PRM_CQ_OI, 1);
    PRM_SET(in, PRM_CQ_DBR_UMEM_VALID, 1);
    PRM_SET(in, PRM_CQ_DBR_UMEM_ID, p->dbr_umem_id);
    PRM_SET(in, PRM_CQ_DBR_ADDR, p->dbr_offset);
    PRM_SET(in, PRM_CQ_UMEM_VALID, 1);
    PRM_SET(in, PRM_CQ_UMEM_ID, p->umem_id);
    PRM_SET(in, PRM_CQ_UMEM_OFFSET, p->umem_offset);
}

void prm_create_qp_in(void *in, const struct prm_qp_params *p)
{
    memset(in, 0, PRM_QP_CMD_IN_BYTES);
    PRM_SET(in, PRM_IN_OPCODE, PRM_OP_CREATE_QP);
    PRM_SET(in, PRM_QPC_ST, PRM_QP_ST_RC);
    PRM_SET(in, PRM_QPC_PM_STATE, PRM_QP_PM_MIGRATED);
    PRM_SET(in, PRM_QPC_PD, p->pdn);
    PRM_SET(in, PRM_QPC_UAR_PAGE, p->uar_page);
    PRM_SET(in, PRM_QPC_LOG_SQ_SIZE, p->log_sq_size);
    PRM_SET(in, PRM_QPC_RQ_TYPE, PRM_QP_RQ_ZERO_LEN);
    PRM_SET(in, PRM_QPC_CQN_SND, p->cqn);
    PRM_SET(in, PRM_QPC_CQN_RCV, p->cqn);
    PRM_SET(in, PRM_QPC_DBR_UMEM_VALID, 1);
    PRM_SET(in, PRM_QPC_DBR_UMEM_ID, p->dbr_umem_id);
    PRM_SET(in, PRM_QPC_DBR_ADDR, p->dbr_offset);
    PRM_SET(in, PRM_QP_WQ_UMEM_VALID, 1);
    PRM_SET(in, PRM_QP_WQ_UMEM_ID, p->wq_umem_id);
    PRM_SET(in, PRM_QP_WQ_UMEM_OFFSET, p->wq_umem_offset);
}

static void qp_cmd(void *in, uint16_t opcode, uint32_t qpn)
{
    memset(in, 0, PRM_QP_CMD_IN_BYTES);
    PRM_SET(in, PRM_IN_OPCODE, opcode);
    PRM_SET(in, PRM_QP_CMD_QPN, qpn);
}

void prm_rst2init_in(void *in, uint32_t qpn, uint8_t port, int rre, int rwe, int rae)
{
    qp_cmd(in, PRM_OP_RST2INIT_QP, qpn);
    PRM_SET(in, PRM_QPC_PM_STATE, PRM_QP_PM_MIGRATED);
    PRM_SET(in, PRM_ADS_VHCA_PORT, port);
    PRM_SET(in, PRM_ADS_PKEY_INDEX, 0);
    PRM_SET(in, PRM_QPC_RRE, rre ? 1 : 0);
    PRM_SET(in, PRM_QPC_RWE, rwe ? 1 : 0);
    PRM_SET(in, PRM_QPC_RAE, rae ? 1 : 0);
}

void prm_init2rtr_in(void *in, uint32_t qpn, const struct prm_rtr_params *p)
{
    qp_cmd(in, PRM_OP_INIT2RTR_QP, qpn);
    PRM_SET(in, PRM_QPC_MTU, p->mtu);
    PRM_SET(in, PRM_QPC_LOG_MSG_MAX, 30);
    PRM_SET(in, PRM_QPC_REMOTE_QPN, p->remote_qpn);
    PRM_SET(in, PRM_QPC_NEXT_RCV_PSN, p->rq_psn);
    PRM_SET(in, PRM_QPC_LOG_RRA_MAX, p->log_rra_max);
    PRM_SET(in, PRM_QPC_MIN_RNR_NAK, p->min_rnr_nak);
    PRM_SET(in, PRM_ADS_VHCA_PORT, p->port);
    if (p->global) {
        PRM_SET(in, PRM_ADS_GRH, 1);
        prm_set_bytes(in, PRM_ADS_RGID_BIT, p->rgid, 16);
        PRM_SET(in, PRM_ADS_SRC_ADDR_INDEX, p->sgid_index);
        PRM_SET(in, PRM_ADS_HOP_LIMIT, p->hop_limit);
        PRM_SET(in, PRM_ADS_UDP_SPORT, p->udp_sport);
        PRM_SET(in, PRM_ADS_RMAC_47_32, (uint32_t)p->rmac[0] << 8 | p->rmac[1]);
        PRM_SET(in, PRM_ADS_RMAC_31_0, (uint32_t)p->rmac[2] << 24 | (uint32_t)p->rmac[3] << 16 |
                                       (uint32_t)p->rmac[4] << 8 | p->rmac[5]);
    } else {
        PRM_SET(in, PRM_ADS_RLID, p->rlid);
    }
}

void prm_rtr2rts_in(void *in, uint32_t qpn, uint32_t sq_psn, uint8_t ack_timeout, uint8_t retry,
                    uint8_t rnr_retry, uint8_t log_sra_max)
{
    qp_cmd(in, PRM_OP_RTR2RTS_QP, qpn);
    PRM_SET(in, PRM_QPC_NEXT_SEND_PSN, sq_psn);
    PRM_SET(in, PRM_ADS_ACK_TIMEOUT, ack_timeout);
    PRM_SET(in, PRM_QPC_RETRY_COUNT, retry);
    PRM_SET(in, PRM_QPC_RNR_RETRY, rnr_retry);
    PRM_SET(in, PRM_QPC_LOG_SRA_MAX, log_sra_max);
}

void prm_qp_simple_in(void *in, uint16_t opcode, uint32_t qpn)
{
    memset(in, 0, PRM_QUERY_QP_IN_BYTES);
    PRM_SET(in, PRM_IN_OPCODE, opcode);
    PRM_SET(in, PRM_QP_CMD_QPN, qpn);
}

void prm_query_hca_cap_in(void *in)
{
    memset(in, 0, PRM_QUERY_HCA_CAP_IN_BYTES);
    PRM_SET(in, PRM_IN_OPCODE, PRM_OP_QUERY_HCA_CAP);
    PRM_SET(in, PRM_IN_OP_MOD, PRM_HCA_CAP_GENERAL_CURRENT);
}

uint32_t prm_max_wqe_ds(const void *out)
{
    if (prm_out_status(out) != PRM_STATUS_OK)
        return 0;
    uint64_t ds = PRM_GET(out, PRM_HCA_CAP_MAX_WQE_SZ_SQ) / 16;
    return ds < 2 ? 0 : ds > 63 ? 63 : (uint32_t)ds;
}

const char *prm_status_str(uint8_t status)
{
    switch (status) {
    case PRM_STATUS_OK: return "OK";
    case PRM_STATUS_INTERNAL_ERR: return "INTERNAL_ERR";
    case PRM_STATUS_BAD_OP: return "BAD_OP";
    case PRM_STATUS_BAD_PARAM: return "BAD_PARAM";
    case PRM_STATUS_BAD_SYS_STATE: return "BAD_SYS_STATE";
    case PRM_STATUS_BAD_RES: return "BAD_RESOURCE";
    case PRM_STATUS_RES_BUSY: return "RESOURCE_BUSY";
    case PRM_STATUS_EXCEED_LIM: return "EXCEED_LIMIT";
    case PRM_STATUS_BAD_RES_STATE: return "BAD_RESOURCE_STATE";
    case PRM_STATUS_BAD_QP_STATE: return "BAD_QP_STATE";
    case PRM_STATUS_BAD_INP_LEN: return "BAD_INPUT_LEN";
    case PRM_STATUS_BAD_OUTP_LEN: return "BAD_OUTPUT_LEN";
    default: return "unknown status";
    }
}
