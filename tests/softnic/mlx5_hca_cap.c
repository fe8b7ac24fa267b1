/* mlx5_hca_cap.c: the device-wide PRM commands softnic's firmware answers
 * through mlx5dv_devx_general_cmd -- QUERY_HCA_CAP (general device and
 * RoCE capabilities) and QUERY_ROCE_ADDRESS -- with what a ConnectX-7 on
 * an Ethernet port would say, cut down to what softnic implements: a
 * capability softnic lacks reads as absent (0), a limit is softnic's own
 * (from ibv_query_device / ibv_query_port of the same context).
 *
 * Stated, in the general capabilities (type 0; maximum and current values
 * alike): hca_cap_2, port_type Ethernet, roce, rc, atomic, cqe_version 1, num_ports,
 * log_max_qp / _cq / _pd / _msg / _ra_req_qp / _ra_res_qp, log_max_qp_sz
 * 15 (the longest DEVX send ring), log_max_cq_sz 16, log_pg_sz 12,
 * max_wqe_sz_sq (SOFTNIC_MAX_WQE_SZ_SQ, else 1024: 16 basic blocks).
 * Absent: max_wqe_sz_rq (no receive queue in an mlx5 ring), the IB GID
 * table, rts2rts_qp_dscp, and everything else.  In the RoCE capabilities
 * (type 4): RoCE v2 over IPv4/IPv6, destination UDP port 4791, source
 * ports 0xc000..0xffff, an address table of the port's GID table length.
 * The second general capabilities (type 0x20) are all absent: among them
 * send_dbr_mode_no_dbr_ext, DBR-less send (softnic's NIC takes a send
 * queue's producer index from its doorbell record), which DOCA GPUNetIO
 * (NCCL 2.30) reads before it asks for a QP without one.  Another
 * capability type is refused with BAD_PARAM.
 *
 * QUERY_ROCE_ADDRESS answers an index of the GID table with the GID, RoCE
 * version 2 and L3 type IPv4 (softnic's GIDs are IPv4-mapped), no VLAN and
 * no MAC (softnic's wire routes by GID). */
#include "mlx5_nic.h"

#include <string.h>

#include "gdaki_prm.h"

/* Layout facts (mlx5_ifc.h): field bit offsets inside the capability
 * that QUERY_HCA_CAP's output holds at byte 0x10 (PRM_HCA_CAP). */
#define CAP_HCA_CAP_2 PRM_HCA_CAP(0x20), 1
#define CAP_LOG_MAX_QP_SZ PRM_HCA_CAP(0x88), 8
#define CAP_LOG_MAX_QP PRM_HCA_CAP(0x9b), 5
#define CAP_LOG_MAX_CQ_SZ PRM_HCA_CAP(0xc8), 8
#define CAP_LOG_MAX_CQ PRM_HCA_CAP(0xdb), 5
#define CAP_LOG_MAX_RA_REQ_QP PRM_HCA_CAP(0x14a), 6
#define CAP_LOG_MAX_RA_RES_QP PRM_HCA_CAP(0x15a), 6
#define CAP_PORT_TYPE PRM_HCA_CAP(0x1b6), 2
#define CAP_NUM_PORTS PRM_HCA_CAP(0x1b8), 8
#define CAP_LOG_MAX_MSG PRM_HCA_CAP(0x1c3), 5
#define CAP_CQE_VERSION PRM_HCA_CAP(0x1fc), 4
#define CAP_ROCE PRM_HCA_CAP(0x21d), 1
#define CAP_ATOMIC PRM_HCA_CAP(0x21e), 1
#define CAP_RC PRM_HCA_CAP(0x23f), 1
#define CAP_LOG_PG_SZ PRM_HCA_CAP(0x258), 8
#define CAP_LOG_MAX_PD PRM_HCA_CAP(0x32b), 5
/* RoCE capabilities */
#define ROCE_L3_TYPE PRM_HCA_CAP(0x8c), 4
#define ROCE_VERSION PRM_HCA_CAP(0x98), 8
#define ROCE_DEST_UDP_PORT PRM_HCA_CAP(0xb0), 16
#define ROCE_MAX_SRC_UDP_PORT PRM_HCA_CAP(0xc0), 16
#define ROCE_MIN_SRC_UDP_PORT PRM_HCA_CAP(0xd0), 16
#define ROCE_ADDRESS_TABLE_SIZE PRM_HCA_CAP(0xf0), 16

#define CAP_TYPE_GENERAL 0x0
#define CAP_TYPE_ROCE 0x4
#define CAP_TYPE_GENERAL_2 0x20
#define PORT_TYPE_ETH 0x1
#define ROCE_VERSION_2_CAP 0x4          /* bit per version: 1 << 2 */
#define ROCE_L3_IPV4_CAP 0x2
#define ROCE_L3_IPV6_CAP 0x4
#define ROCE_V2_UDP_PORT 4791

/* QUERY_ROCE_ADDRESS */

#define ROCE_ADDR_IN_BYTES 0x10
#define ROCE_ADDR_OUT_BYTES (0x10 + 0x20)  /* header + one roce_addr_layout */
#define ROCE_ADDR_IN_INDEX 0x40, 16
#define ROCE_ADDR_IN_PORT 0x5c, 4
#define ROCE_ADDR_L3_ADDRESS_BIT 0x80      /* 16 bytes */
#define ROCE_ADDR_L3_TYPE 0x80 + 0xd4, 4
#define ROCE_ADDR_VERSION 0x80 + 0xd8, 8
#define ROCE_ADDR_VERSION_2 0x2
#define ROCE_ADDR_L3_IPV4 0x0

#define SOFTNIC_LARGEST_WQE 1024        /* MLX5_SN_MAX_BBS basic blocks */

enum {
    SYN_CAP_OPCODE = 0x5a0101,
    SYN_CAP_INLEN,
    SYN_CAP_OUTLEN,
    SYN_CAP_TYPE,
    SYN_CAP_DEVICE,
    SYN_ROCE_INDEX,
    SYN_ROCE_PORT,
};

uint32_t mlx5_prm_log2(uint64_t v, uint32_t most)
{
    uint32_t l = 0;
    while (v > 1) {
        v >>= 1;
        l++;
    }
    return l > most ? most : l;
}

static int general_caps(struct ibv_context *ctx, void *out)
{
    struct ibv_device_attr da;
    struct ibv_port_attr pa;
    if (ibv_query_device(ctx, &da) != 0 || ibv_query_port(ctx, 1, &pa) != 0)
        return mlx5_devx_refuse(out, PRM_STATUS_INTERNAL_ERR, SYN_CAP_DEVICE);
    uint32_t max_sq = mlx5_priv_max_wqe_sz_sq();
    PRM_SET(out, CAP_LOG_MAX_QP_SZ, 15);
    PRM_SET(out, CAP_LOG_MAX_QP, mlx5_prm_log2((uint64_t)da.max_qp, 31));
    PRM_SET(out, CAP_LOG_MAX_CQ_SZ, 16);
    PRM_SET(out, CAP_LOG_MAX_CQ, mlx5_prm_log2((uint64_t)da.max_cq, 31));
    PRM_SET(out, CAP_LOG_MAX_RA_REQ_QP, mlx5_prm_log2((uint64_t)da.max_qp_init_rd_atom, 63));
    PRM_SET(out, CAP_LOG_MAX_RA_RES_QP, mlx5_prm_log2((uint64_t)da.max_qp_rd_atom, 63));
    PRM_SET(out, CAP_HCA_CAP_2, 1);
    PRM_SET(out, CAP_PORT_TYPE, PORT_TYPE_ETH);
    PRM_SET(out, CAP_NUM_PORTS, da.phys_port_cnt);
    PRM_SET(out, CAP_LOG_MAX_MSG, mlx5_prm_log2(pa.max_msg_sz, 31));
    PRM_SET(out, CAP_CQE_VERSION, 1);
    PRM_SET(out, CAP_ROCE, 1);
    PRM_SET(out, CAP_ATOMIC, da.atomic_cap != IBV_ATOMIC_NONE);
    PRM_SET(out, CAP_RC, 1);
    PRM_SET(out, CAP_LOG_PG_SZ, 12);
    PRM_SET(out, CAP_LOG_MAX_PD, mlx5_prm_log2((uint64_t)da.max_pd, 31));
    PRM_SET(out, PRM_HCA_CAP_MAX_WQE_SZ_SQ, max_sq ? max_sq : SOFTNIC_LARGEST_WQE);
    return 0;
}

static int roce_caps(struct ibv_context *ctx, void *out)
{
    struct ibv_port_attr pa;
    if (ibv_query_port(ctx, 1, &pa) != 0)
        return mlx5_devx_refuse(out, PRM_STATUS_INTERNAL_ERR, SYN_CAP_DEVICE);
    PRM_SET(out, ROCE_L3_TYPE, ROCE_L3_IPV4_CAP | ROCE_L3_IPV6_CAP);
    PRM_SET(out, ROCE_VERSION, ROCE_VERSION_2_CAP);
    PRM_SET(out, ROCE_DEST_UDP_PORT, ROCE_V2_UDP_PORT);
    PRM_SET(out, ROCE_MAX_SRC_UDP_PORT, 0xffff);
    PRM_SET(out, ROCE_MIN_SRC_UDP_PORT, 0xc000);
    PRM_SET(out, ROCE_ADDRESS_TABLE_SIZE, pa.gid_tbl_len);
    return 0;
}

int mlx5_hca_cap_query(struct ibv_context *ctx, const void *in, size_t inlen, void *out,
                       size_t outlen)
{
    if (inlen < PRM_QUERY_HCA_CAP_IN_BYTES)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_INP_LEN, SYN_CAP_INLEN);
    if (outlen < PRM_QUERY_HCA_CAP_OUT_BYTES)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_OUTP_LEN, SYN_CAP_OUTLEN);
    uint32_t type = (uint32_t)PRM_GET(in, PRM_IN_OP_MOD) >> 1;   /* bit 0: current or maximum */
    if (type == CAP_TYPE_GENERAL)
        return general_caps(ctx, out);
    if (type == CAP_TYPE_ROCE)
        return roce_caps(ctx, out);
    if (type == CAP_TYPE_GENERAL_2)
        return 0;       /* every field absent, send_dbr_mode_no_dbr_ext too */
    return mlx5_devx_refuse(out, PRM_STATUS_BAD_PARAM, SYN_CAP_TYPE);
}

int mlx5_roce_address_query(struct ibv_context *ctx, const void *in, size_t inlen, void *out,
                            size_t outlen)
{
    if (inlen < ROCE_ADDR_IN_BYTES)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_INP_LEN, SYN_CAP_INLEN);
    if (outlen < ROCE_ADDR_OUT_BYTES)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_OUTP_LEN, SYN_CAP_OUTLEN);
    /* vhca_port_num 0 names the function's (first) port */
    uint32_t port = (uint32_t)PRM_GET(in, ROCE_ADDR_IN_PORT);
    struct ibv_device_attr da;
    if (ibv_query_device(ctx, &da) != 0)
        return mlx5_devx_refuse(out, PRM_STATUS_INTERNAL_ERR, SYN_CAP_DEVICE);
    if (port > da.phys_port_cnt)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_PARAM, SYN_ROCE_PORT);
    if (port == 0)
        port = 1;
    struct ibv_port_attr pa;
    union ibv_gid gid;
    uint32_t index = (uint32_t)PRM_GET(in, ROCE_ADDR_IN_INDEX);
    if (ibv_query_port(ctx, (uint8_t)port, &pa) != 0)
        return mlx5_devx_refuse(out, PRM_STATUS_INTERNAL_ERR, SYN_CAP_DEVICE);
    if (index >= (uint32_t)pa.gid_tbl_len || ibv_query_gid(ctx, (uint8_t)port, (int)index, &gid) != 0)
        return mlx5_devx_refuse(out, PRM_STATUS_BAD_PARAM, SYN_ROCE_INDEX);
    prm_set_bytes(out, ROCE_ADDR_L3_ADDRESS_BIT, gid.raw, sizeof(gid.raw));
    PRM_SET(out, ROCE_ADDR_L3_TYPE, ROCE_ADDR_L3_IPV4);
    PRM_SET(out, ROCE_ADDR_VERSION, ROCE_ADDR_VERSION_2);
    return 0;
}
