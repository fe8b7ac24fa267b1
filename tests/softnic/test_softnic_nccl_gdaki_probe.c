/* tests/softnic/test_softnic_nccl_gdaki_probe.c: the mlx5dv/DEVX calls
 * NCCL makes on softnic, in the order it makes them, each answered as a
 * ConnectX-7 on an Ethernet port answers: with sane results, or with the
 * errno/PRM status of a NIC without that capability -- never a missing
 * symbol, never a crash.  The order, from NCCL 2.28.9's sources (2.30.7
 * where it differs):
 *   1. IB transport init (misc/mlx5dvsymbols.cc): dlopen("libmlx5.so"),
 *      dlvsym of mlx5dv_is_supported@MLX5_1.8 and of the MLX5_1.25 pair
 *      (mlx5dv_get_data_direct_sysfs_path, mlx5dv_reg_dmabuf_mr).
 *   2. Per device (transport/net_ib.cc): mlx5dv_is_supported -> the mlx5
 *      provider; the DMA-BUF probe (ibv_reg_dmabuf_mr and
 *      mlx5dv_reg_dmabuf_mr with fd -1 must fail with EBADF, not
 *      EOPNOTSUPP); mlx5dv_get_data_direct_sysfs_path (ENODEV: no
 *      data-direct function, one NCCL device per port).
 *   3. GDAKI's createContext (NCCL_GIN_TYPE=3; transport/gdaki in 2.28,
 *      transport/net_ib/gdaki in 2.30: DOCA GPUNetIO's host verbs).
 *      Context: plain ibv_open_device + ibv_alloc_pd (2.30: the IB
 *      collective comm's own context and PD); ibv_query_port, the GID
 *      index, ibv_query_gid; link layer Ethernet -> address type IPv4
 *      (RoCE), IB -> IB_NO_GRH.  DOCA dlopens "libmlx5.so" and dlsyms 13
 *      entry points (list below).  rdma-core's mlx5_alloc_context asks the
 *      kernel for a DEVX user context on every open (flag or not) and
 *      drops DEVX only when refused: DEVX calls work on this context.
 *      Per QP ("qp_hl"; a "group" is a main QP plus a companion QP with
 *      cd_master=1 that shares the main's UAR; groups for the peers,
 *      plain QPs for self-loop), sq_nwqe = NCCL_GIN_GDAKI_QP_DEPTH (128):
 *      a. doca_verbs_query_device (on every CQ and QP create):
 *         ibv_query_device (max_cqe, max_qp_wr, max_pkeys, phys_port_cnt)
 *         then QUERY_HCA_CAP (0x100) op_mod 0x1 (general, current):
 *         port_type, gid_table_size (IB only), rc, rts2rts_qp_dscp,
 *         max_wqe_sz_sq, max_wqe_sz_rq, log_max_qp_sz (2.30 also
 *         hca_cap_2 and, when set, op_mod 0x41 for send_dbr_mode_no_dbr_ext:
 *         0 -> a QP asking NO_DBR_EXT fails in DOCA, NOT_SUPPORTED);
 *         QUERY_HCA_CAP op_mod 0x9 (RoCE, current):
 *         roce_address_table_size (ETH), r_roce_min/max_src_udp_port.
 *         A failed command fails the create.  It gives up when: rc is 0;
 *         cq size > max_cqe; 48-byte WQE (ctrl+raddr+1 data seg) >
 *         max_wqe_sz_sq (max_wqe_sz_sq 0 is a division by zero);
 *         sq WQEBBs > 1 << log_max_qp_sz; at modify, sgid_index >= the
 *         GID table size, port outside 1..phys_port_cnt.
 *      b. CQ: ring in GPU memory (cudaMalloc'd, CQEs preset to opcode
 *         INVALID, owner 1), 64 B x sq_nwqe; DBR: one GPU page.  Each
 *         umem: a dmabuf fd of the GPU memory, mlx5dv_devx_umem_reg_ex
 *         (access LOCAL_WRITE, pgsz_bitmap the page size, comp_mask
 *         DMABUF, addr = offset 0); if refused, again by address (comp_mask
 *         0; 2.30: mlx5dv_devx_umem_reg).  UAR: mlx5dv_devx_alloc_uar NC
 *         (1), else BF (0) (the group's main CQ uses the group's UAR).
 *         mlx5dv_devx_query_eqn(0).  CREATE_CQ (0x400): cqe_sz 0 (64 B),
 *         cc 0, oi 1, log_cq_size, uar_page, c_eqn, cq_umem_id/valid,
 *         offset 0, dbr_umem_id/valid, dbr_addr 0, log_page_size 0.
 *      c. UAR for the QP: NC_DEDICATED (2), else NC (1).  Then
 *         cudaHostRegister(reg_addr, IoMemory|Mapped|Portable) decides
 *         the NIC handler (NCCL_GIN_GDAKI_NIC_HANDLER=0, auto): success
 *         -> GPU threads store the doorbell into the UAR themselves;
 *         failure -> CPU proxy: the DBR is host memory and NCCL's
 *         progress thread copies a GPU-written counter into the DBR and
 *         the UAR (needsProxyProgress).  softnic's UAR is ordinary host
 *         memory, which cuMemHostRegister refuses with IoMemory
 *         (CUDA_ERROR_INVALID_VALUE, H200): DOCA takes the CPU proxy.
 *      d. QP: SQ ring in GPU memory (64 B x sq_nwqe, 1 WQEBB a WQE),
 *         DBR a GPU page (host page for the CPU proxy), umems as in b.
 *         mlx5dv_init_obj(PD) for the pdn.  CREATE_QP (0x500): st RC, pd,
 *         user_index 0, uar_page, cqn_snd, log_sq_size, rq_type 3 (no RQ),
 *         no cqn_rcv, dbr_umem_valid/id, dbr_addr 0, cd_master (companion),
 *         wq_umem_id/valid, offset 0, log_page_size 0 (2.30: send_dbr_mode
 *         0, 1 only for NO_DBR_HW).  2.30's create_qp_group_hl makes the
 *         group's UAR first and gives it to both CQs and both QPs;
 *         create_qp_hl makes the CQ (its own NC UAR) before the QP's UAR.
 *         2.30's doca_gpu_verbs_export_qp then queries the new QP (RST):
 *         QUERY_QP's state and mtu must be PRM values (mtu 1..5 or 7),
 *         else doca_verbs_qp_query fails with DOCA_ERROR_UNEXPECTED (22),
 *         the create fails, and NCCL WARNs "DOCA Error 22".
 *      e. Connect (doca_verbs_qp_modify): RST2INIT (0x502): vhca_port_num,
 *         pm_state migrated, pkey_index, rwe, rre, rae + atomic_mode 1.
 *         INIT2RTR (0x503): next_rcv_psn 0, remote_qpn, log_msg_max 30,
 *         mtu 4K, min_rnr_nak 12, rgid_rip, hop_limit 255, src_addr_index,
 *         sl, stat_rate; for RoCE grh stays 0 and rmac comes from
 *         ibv_create_ah + mlx5dv_init_obj(AH); port_type ETH ->
 *         QUERY_ROCE_ADDRESS (0x760) of the sgid index, and roce_version
 *         2 -> a random udp_sport in the RoCE caps' range, dscp = tc >> 2
 *         (2.30 also log_rra_max / log_sra_max: log2 of max_qp_rd_atom).  RTR2RTS (0x504):
 *         next_send_psn 0, ack_timeout, retry_count, rnr_retry 7,
 *         min_rnr_nak, log_ack_req_freq 0.  QUERY_QP (0x50b) reads the
 *         context back (state, mtu must be a valid PRM MTU, psns, ...).
 *      f. Device side (GPU threads, ring in GPU memory): RDMA_WRITE
 *         (ctrl+raddr+data, ds 3; inline: ds 3 or 4), RDMA_READ,
 *         ATOMIC_FA (ds 4), WAIT (companion QP: ds 2, before the counter's
 *         FA), NOP; fm_ce_se CQ_UPDATE (8) where a CQE is wanted.  Submit:
 *         64-bit store of the ctrl segment's first 8 bytes (pi << 8, qpn
 *         << 8) into the UAR register, DBR[1] = be32(pi & 0xffff), the
 *         store again; poll CQEs by owner bit (overrun ignored, so the CQ
 *         DBR need not move).
 * The replay below does a..f with host memory for every umem, on CPU. */
#include "sntest.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <endian.h>
#include <errno.h>
#include <infiniband/mlx5dv.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gdaki_prm.h"

typedef bool (*is_supported_fn)(struct ibv_device *);
typedef int (*dd_path_fn)(struct ibv_context *, char *, size_t);
typedef struct ibv_mr *(*reg_dmabuf_fn)(struct ibv_pd *, uint64_t, size_t, uint64_t, int, int, int);

struct probe {
    void *h;
    is_supported_fn is_supported;
    dd_path_fn dd_path;
    reg_dmabuf_fn reg_dmabuf;
};

/* Step 1, as NCCL does it: libmlx5.so first, libmlx5.so.1 after. */
static void probe_open(struct probe *p)
{
    memset(p, 0, sizeof(*p));
    p->h = dlopen("libmlx5.so", RTLD_NOW);
    if (!p->h)
        p->h = dlopen("libmlx5.so.1", RTLD_NOW);
    if (!p->h)
        tap_fail_at(__FILE__, __LINE__, "dlopen libmlx5: %s", dlerror());
    *(void **)&p->is_supported = dlvsym(p->h, "mlx5dv_is_supported", "MLX5_1.8");
    *(void **)&p->dd_path = dlvsym(p->h, "mlx5dv_get_data_direct_sysfs_path", "MLX5_1.25");
    *(void **)&p->reg_dmabuf = dlvsym(p->h, "mlx5dv_reg_dmabuf_mr", "MLX5_1.25");
}

TAP_CASE(test_nccl_binds_every_mlx5dv_symbol_it_asks_for)
{
    struct probe p;
    probe_open(&p);
    /* it is softnic's library the loader found */
    struct link_map *lm = NULL;
    EXPECT_EQ_INT(0, dlinfo(p.h, RTLD_DI_LINKMAP, &lm));
    EXPECT_TRUE(lm && strstr(lm->l_name, "tests/softnic/libmlx5.so"));
    EXPECT_TRUE(p.is_supported != NULL);
    EXPECT_TRUE(p.dd_path != NULL);      /* 2.28.9 logged "dlvsym failed" here */
    EXPECT_TRUE(p.reg_dmabuf != NULL);
    /* DOCA GPUNetIO's wrapper: plain dlsym of these, all required */
    static const char *const doca[] = {
        "mlx5dv_init_obj", "mlx5dv_devx_obj_create", "mlx5dv_devx_obj_destroy",
        "mlx5dv_devx_obj_query", "mlx5dv_devx_obj_modify", "mlx5dv_devx_general_cmd",
        "mlx5dv_devx_query_eqn", "mlx5dv_devx_umem_reg", "mlx5dv_devx_umem_reg_ex",
        "mlx5dv_devx_umem_dereg", "mlx5dv_devx_alloc_uar", "mlx5dv_devx_free_uar",
        "mlx5dv_query_device",
    };
    for (size_t i = 0; i < sizeof(doca) / sizeof(doca[0]); i++)
        if (!dlsym(p.h, doca[i]))
            tap_fail_at(__FILE__, __LINE__, "dlsym %s: %s", doca[i], dlerror());
    dlclose(p.h);
}

TAP_CASE(test_nccl_ib_device_probe_finds_mlx5_without_data_direct)
{
    struct probe p;
    probe_open(&p);
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    EXPECT_TRUE(list && n >= 1);
    for (int i = 0; i < n; i++) {
        EXPECT_TRUE(p.is_supported(list[i]));      /* IB_PROVIDER_MLX5 */
        struct ibv_context *ctx = ibv_open_device(list[i]);
        EXPECT_TRUE(ctx != NULL);
        struct ibv_device_attr da;
        EXPECT_EQ_INT(0, ibv_query_device(ctx, &da));
        struct ibv_port_attr pa;
        EXPECT_EQ_INT(0, ibv_query_port(ctx, 1, &pa));
        EXPECT_EQ_INT(IBV_PORT_ACTIVE, pa.state);
        /* ncclMlx5dvDmaBufCapable */
        struct ibv_pd *pd = ibv_alloc_pd(ctx);
        EXPECT_TRUE(pd != NULL);
        errno = 0;
        EXPECT_TRUE(ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0) == NULL);
        EXPECT_EQ_INT(EBADF, errno);
        errno = 0;
        EXPECT_TRUE(p.reg_dmabuf(pd, 0, 0, 0, -1, 0, 0) == NULL);
        EXPECT_EQ_INT(EBADF, errno);
        EXPECT_EQ_INT(0, ibv_dealloc_pd(pd));
        /* ENODEV: "not data-direct", which NCCL takes as no second device */
        char path[4096] = "/sys";
        EXPECT_EQ_INT(ENODEV, p.dd_path(ctx, path + 4, sizeof(path) - 4));
        EXPECT_EQ_INT(0, ibv_close_device(ctx));
    }
    ibv_free_device_list(list);
    dlclose(p.h);
}

/* ------------------------------------------------------------ PRM facts */
/* From the PRM (mlx5_ifc.h), fields gdaki_prm.h has no use for. */
#define CAP_LOG_MAX_QP_SZ PRM_HCA_CAP(0x88), 8
#define CAP_RTS2RTS_QP_DSCP PRM_HCA_CAP(0x16a), 1
#define CAP_GID_TABLE_SIZE PRM_HCA_CAP(0x170), 16
#define CAP_PORT_TYPE PRM_HCA_CAP(0x1b6), 2
#define CAP_RC PRM_HCA_CAP(0x23f), 1
#define CAP_MAX_WQE_SZ_RQ PRM_HCA_CAP(0x2b0), 16
#define CAP_HCA_CAP_2 PRM_HCA_CAP(0x20), 1
#define CAP2_SEND_DBR_MODE_NO_DBR_EXT PRM_HCA_CAP(0x2e1), 1
#define ROCE_MAX_SRC_UDP_PORT PRM_HCA_CAP(0xc0), 16
#define ROCE_MIN_SRC_UDP_PORT PRM_HCA_CAP(0xd0), 16
#define ROCE_ADDRESS_TABLE_SIZE PRM_HCA_CAP(0xf0), 16
#define OPMOD_GENERAL_CUR 0x1
#define OPMOD_GENERAL_MAX 0x0
#define OPMOD_ROCE_CUR (0x4 << 1 | 1)
#define OPMOD_ODP_CUR (0x2 << 1 | 1)
#define OPMOD_GENERAL_2_CUR (0x20 << 1 | 1)
#define PORT_TYPE_ETH 1
#define ROCE_ADDR_IN_INDEX 0x40, 16
#define ROCE_ADDR_IN_PORT 0x5c, 4
#define ROCE_ADDR_OUT_BYTES (0x10 + 0x20)
#define ROCE_ADDR_L3_BIT 0x80
#define ROCE_ADDR_VERSION 0x80 + 0xd8, 8
#define CQC_CC PRM_CQC(0x0b), 1
#define QPC_USER_INDEX PRM_QPC(0x88), 24
#define QPC_CD_MASTER PRM_QPC(0x49f), 1
#define QPC_SEND_DBR_MODE PRM_QPC(0x80), 2
#define QPC_ATOMIC_MODE PRM_QPC(0x48c), 4
#define QPC_LOG_ACK_REQ_FREQ PRM_QPC(0x380), 4
#define ADS_STAT_RATE PRM_ADS(0x54), 4
#define ADS_DSCP PRM_ADS(0x10a), 6
#define PRM_OP_CREATE_MKEY 0x200
#define PRM_OP_ACCESS_REGISTER 0x805
/* rdma-core 53's third UAR type: non-cached, a page of its own */
#define UAR_NC_DEDICATED 2

/* ------------------------------------------------------------ contexts */
/* ibv_open_device of device i, as NCCL's GDAKI opens it: no DEVX flag. */
static struct ibv_context *plain_context(int i)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    EXPECT_TRUE(list && n > i);
    struct ibv_context *ctx = ibv_open_device(list[i]);
    ibv_free_device_list(list);
    EXPECT_TRUE(ctx != NULL);
    return ctx;
}

/* mlx5dv_devx_general_cmd of opcode/op_mod with a 16-byte input into out
 * (first set to 0xee); returns its result. */
static int general_cmd(struct ibv_context *ctx, uint16_t opcode, uint16_t op_mod,
                       uint8_t *out, size_t outlen)
{
    uint8_t in[PRM_QUERY_HCA_CAP_IN_BYTES];
    memset(in, 0, sizeof(in));
    PRM_SET(in, PRM_IN_OPCODE, opcode);
    PRM_SET(in, PRM_IN_OP_MOD, op_mod);
    memset(out, 0xee, outlen);
    return mlx5dv_devx_general_cmd(ctx, in, sizeof(in), out, outlen);
}

static int hca_cap_query(struct ibv_context *ctx, uint16_t op_mod, uint8_t *out, size_t outlen)
{
    return general_cmd(ctx, PRM_OP_QUERY_HCA_CAP, op_mod, out, outlen);
}

/* QUERY_ROCE_ADDRESS of GID index on port (0: the function's). */
static int roce_address_query(struct ibv_context *ctx, uint16_t index, uint8_t port,
                              uint8_t *out, size_t outlen)
{
    uint8_t in[0x10];
    memset(in, 0, sizeof(in));
    PRM_SET(in, PRM_IN_OPCODE, PRM_OP_QUERY_ROCE_ADDRESS);
    PRM_SET(in, ROCE_ADDR_IN_INDEX, index);
    PRM_SET(in, ROCE_ADDR_IN_PORT, port);
    memset(out, 0xee, outlen);
    return mlx5dv_devx_general_cmd(ctx, in, sizeof(in), out, outlen);
}

/* What DOCA's doca_verbs_query_device learns, and its checks. */
struct doca_caps {
    struct ibv_device_attr da;
    uint32_t port_type, rc, max_sq_desc, max_rq_desc, max_send_wqebb;
    uint32_t gid_table_size, min_udp_sport, max_udp_sport;
    uint32_t hca_cap_2, send_dbr_mode_no_dbr_ext;       /* 2.30 */
};

/* Which NCCL's DOCA the replay follows: 2.28.9's, or 2.30.7's (hca_cap_2,
 * QP group UAR first, QUERY_QP at export, log_rra_max/log_sra_max). */
static bool doca230;

static void doca_query_device(struct ibv_context *ctx, struct doca_caps *c)
{
    static uint8_t out[PRM_QUERY_HCA_CAP_OUT_BYTES];
    memset(c, 0, sizeof(*c));
    EXPECT_EQ_INT(0, ibv_query_device(ctx, &c->da));
    EXPECT_EQ_INT(0, hca_cap_query(ctx, OPMOD_GENERAL_CUR, out, sizeof(out)));
    EXPECT_EQ_INT(PRM_STATUS_OK, (int)PRM_GET(out, PRM_OUT_STATUS));
    c->port_type = (uint32_t)PRM_GET(out, CAP_PORT_TYPE);
    c->rc = (uint32_t)PRM_GET(out, CAP_RC);
    c->max_sq_desc = (uint32_t)PRM_GET(out, PRM_HCA_CAP_MAX_WQE_SZ_SQ);
    c->max_rq_desc = (uint32_t)PRM_GET(out, CAP_MAX_WQE_SZ_RQ);
    c->max_send_wqebb = 1u << PRM_GET(out, CAP_LOG_MAX_QP_SZ);
    EXPECT_EQ_INT(0, hca_cap_query(ctx, OPMOD_ROCE_CUR, out, sizeof(out)));
    c->gid_table_size = (uint32_t)PRM_GET(out, ROCE_ADDRESS_TABLE_SIZE);
    c->min_udp_sport = (uint32_t)PRM_GET(out, ROCE_MIN_SRC_UDP_PORT);
    c->max_udp_sport = (uint32_t)PRM_GET(out, ROCE_MAX_SRC_UDP_PORT);
    if (!doca230)
        return;
    /* 2.30: the general capabilities again for hca_cap_2 (read from the
     * first answer in DOCA; the same bits), then type 0x20 when set */
    EXPECT_EQ_INT(0, hca_cap_query(ctx, OPMOD_GENERAL_CUR, out, sizeof(out)));
    c->hca_cap_2 = (uint32_t)PRM_GET(out, CAP_HCA_CAP_2);
    if (!c->hca_cap_2)
        return;
    EXPECT_EQ_INT(0, hca_cap_query(ctx, OPMOD_GENERAL_2_CUR, out, sizeof(out)));
    EXPECT_EQ_INT(PRM_STATUS_OK, (int)PRM_GET(out, PRM_OUT_STATUS));
    c->send_dbr_mode_no_dbr_ext = (uint32_t)PRM_GET(out, CAP2_SEND_DBR_MODE_NO_DBR_EXT);
}

/* ------------------------------------------------------------ cases */
/* rdma-core's mlx5 provider gives every context DEVX when the kernel
 * does: the umem, UAR and EQN calls DOCA makes on NCCL's plain context
 * work.  dmabuf umem is refused (softnic reaches memory by address), and
 * DOCA then registers the same memory by address. */
TAP_CASE(test_plain_context_gets_devx_as_rdma_core_gives_it)
{
    struct ibv_context *ctx = plain_context(0);
    void *mem = st_buf(65536, 0);
    int fd = open("/dev/null", O_RDONLY);
    EXPECT_TRUE(fd >= 0);
    struct mlx5dv_devx_umem_in ui = { .addr = NULL, .size = 65536, .access = IBV_ACCESS_LOCAL_WRITE,
                                      .pgsz_bitmap = 4096, .comp_mask = MLX5DV_UMEM_MASK_DMABUF,
                                      .dmabuf_fd = fd };
    errno = 0;
    EXPECT_TRUE(mlx5dv_devx_umem_reg_ex(ctx, &ui) == NULL);
    EXPECT_EQ_INT(EOPNOTSUPP, errno);
    close(fd);
    ui.addr = mem;
    ui.comp_mask = 0;
    struct mlx5dv_devx_umem *u1 = mlx5dv_devx_umem_reg_ex(ctx, &ui);
    EXPECT_TRUE(u1 != NULL);
    struct mlx5dv_devx_umem *u2 = mlx5dv_devx_umem_reg(ctx, mem, 4096, IBV_ACCESS_LOCAL_WRITE);
    EXPECT_TRUE(u2 != NULL);
    EXPECT_TRUE(u1->umem_id != u2->umem_id);
    /* the three UAR types DOCA asks for, each a page with its register */
    static const uint32_t types[] = { UAR_NC_DEDICATED, MLX5DV_UAR_ALLOC_TYPE_NC, MLX5DV_UAR_ALLOC_TYPE_BF };
    struct mlx5dv_devx_uar *uar[3];
    for (int i = 0; i < 3; i++) {
        uar[i] = mlx5dv_devx_alloc_uar(ctx, types[i]);
        EXPECT_TRUE(uar[i] != NULL && uar[i]->reg_addr != NULL && uar[i]->base_addr != NULL);
    }
    EXPECT_TRUE(uar[0]->page_id != uar[1]->page_id && uar[1]->page_id != uar[2]->page_id);
    errno = 0;
    EXPECT_TRUE(mlx5dv_devx_alloc_uar(ctx, 3) == NULL);
    EXPECT_EQ_INT(EINVAL, errno);
    uint32_t eqn = 99;
    EXPECT_EQ_INT(0, mlx5dv_devx_query_eqn(ctx, 0, &eqn));
    EXPECT_EQ_INT(0, eqn);
    for (int i = 0; i < 3; i++)
        mlx5dv_devx_free_uar(uar[i]);
    EXPECT_EQ_INT(0, mlx5dv_devx_umem_dereg(u2));
    EXPECT_EQ_INT(0, mlx5dv_devx_umem_dereg(u1));
    munmap(mem, 65536);
    EXPECT_EQ_INT(0, ibv_close_device(ctx));
}

/* QUERY_HCA_CAP answers the general and RoCE capabilities DOCA reads with
 * values that pass every check it makes, and consistent with what softnic
 * does: an Ethernet (RoCE) port, RC, a 1024-byte largest send WQE, no
 * receive WQEs in a ring, no DSCP change in RTS, a RoCE address table of
 * the port's GID table length, maximum and current values alike. */
TAP_CASE(test_hca_caps_answer_what_doca_reads)
{
    struct ibv_context *ctx = plain_context(0);
    struct doca_caps c;
    doca_query_device(ctx, &c);
    EXPECT_EQ_INT(PORT_TYPE_ETH, c.port_type);
    EXPECT_EQ_INT(1, c.rc);
    EXPECT_EQ_INT(1024, c.max_sq_desc);
    EXPECT_EQ_INT(0, c.max_rq_desc);
    EXPECT_TRUE(c.max_send_wqebb >= 128 && c.max_send_wqebb <= 32768);
    struct ibv_port_attr pa;
    EXPECT_EQ_INT(0, ibv_query_port(ctx, 1, &pa));
    EXPECT_EQ_INT(pa.gid_tbl_len, (int)c.gid_table_size);
    EXPECT_TRUE(c.min_udp_sport >= 0xc000 && c.min_udp_sport <= c.max_udp_sport);
    /* DOCA's give-up conditions for NCCL's 128-deep queues */
    EXPECT_TRUE(128 <= c.da.max_cqe);
    EXPECT_TRUE(16 + 16 + 16 <= c.max_sq_desc);
    EXPECT_TRUE(c.da.phys_port_cnt >= 1);
    static uint8_t cur[PRM_QUERY_HCA_CAP_OUT_BYTES], max[PRM_QUERY_HCA_CAP_OUT_BYTES];
    EXPECT_EQ_INT(0, hca_cap_query(ctx, OPMOD_GENERAL_CUR, cur, sizeof(cur)));
    EXPECT_EQ_INT(0, hca_cap_query(ctx, OPMOD_GENERAL_MAX, max, sizeof(max)));
    EXPECT_MEMEQ(cur, max, sizeof(cur));
    EXPECT_EQ_INT(0, (int)PRM_GET(cur, CAP_RTS2RTS_QP_DSCP));
    EXPECT_EQ_INT(0, (int)PRM_GET(cur, CAP_GID_TABLE_SIZE));   /* an IB port's table: none */
    EXPECT_EQ_INT(0, cur[0x10 + 0xfff]);                        /* the rest reads absent */
    EXPECT_EQ_INT(0, ibv_close_device(ctx));
}

/* QUERY_ROCE_ADDRESS (INIT2RTR on a RoCE port) names GID index 0 as the
 * port's GID, RoCE v2; an index past the table, or a port the device
 * does not have, is refused with BAD_PARAM. */
TAP_CASE(test_roce_address_is_the_gid_as_roce_v2)
{
    struct ibv_context *ctx = plain_context(0);
    uint8_t out[ROCE_ADDR_OUT_BYTES];
    union ibv_gid gid, got;
    EXPECT_EQ_INT(0, ibv_query_gid(ctx, 1, 0, &gid));
    EXPECT_EQ_INT(0, roce_address_query(ctx, 0, 0, out, sizeof(out)));
    EXPECT_EQ_INT(2, (int)PRM_GET(out, ROCE_ADDR_VERSION));
    prm_get_bytes(out, ROCE_ADDR_L3_BIT, got.raw, 16);
    EXPECT_MEMEQ(gid.raw, got.raw, 16);
    EXPECT_EQ_INT(0, roce_address_query(ctx, 0, 1, out, sizeof(out)));
    EXPECT_EQ_INT(EREMOTEIO, roce_address_query(ctx, 1, 0, out, sizeof(out)));
    EXPECT_EQ_INT(PRM_STATUS_BAD_PARAM, out[0]);
    EXPECT_EQ_INT(EREMOTEIO, roce_address_query(ctx, 0, 9, out, sizeof(out)));
    EXPECT_EQ_INT(PRM_STATUS_BAD_PARAM, out[0]);
    EXPECT_EQ_INT(EREMOTEIO, roce_address_query(ctx, 0, 0, out, 0x10));
    EXPECT_EQ_INT(PRM_STATUS_BAD_OUTP_LEN, out[0]);
    EXPECT_EQ_INT(0, ibv_close_device(ctx));
}

/* What softnic's firmware does not have is refused as a ConnectX refuses
 * it: a command it does not know with BAD_OP, a capability type it does
 * not have with BAD_PARAM, short mailboxes with BAD_INP_LEN/BAD_OUTP_LEN;
 * each with errno EREMOTEIO and a syndrome, nothing created. */
TAP_CASE(test_unsupported_commands_are_refused_with_a_prm_status)
{
    struct ibv_context *ctx = plain_context(0);
    static uint8_t out[PRM_QUERY_HCA_CAP_OUT_BYTES];
    EXPECT_EQ_INT(EREMOTEIO, general_cmd(ctx, PRM_OP_ACCESS_REGISTER, 0, out, 0x100));
    EXPECT_EQ_INT(PRM_STATUS_BAD_OP, out[0]);
    EXPECT_TRUE(PRM_GET(out, PRM_OUT_SYNDROME) != 0);
    EXPECT_EQ_INT(EREMOTEIO, hca_cap_query(ctx, OPMOD_ODP_CUR, out, sizeof(out)));
    EXPECT_EQ_INT(PRM_STATUS_BAD_PARAM, out[0]);
    EXPECT_EQ_INT(EREMOTEIO, hca_cap_query(ctx, OPMOD_GENERAL_CUR, out, 0x100));
    EXPECT_EQ_INT(PRM_STATUS_BAD_OUTP_LEN, out[0]);
    uint8_t in[8];
    memset(in, 0, sizeof(in));
    PRM_SET(in, PRM_IN_OPCODE, PRM_OP_QUERY_HCA_CAP);
    EXPECT_EQ_INT(EREMOTEIO, mlx5dv_devx_general_cmd(ctx, in, sizeof(in), out, sizeof(out)));
    EXPECT_EQ_INT(PRM_STATUS_BAD_INP_LEN, out[0]);
    /* an object softnic has no model of: an mkey */
    uint8_t big[0x110];
    memset(big, 0, sizeof(big));
    PRM_SET(big, PRM_IN_OPCODE, PRM_OP_CREATE_MKEY);
    errno = 0;
    EXPECT_TRUE(mlx5dv_devx_obj_create(ctx, big, sizeof(big), out, 0x10) == NULL);
    EXPECT_EQ_INT(EREMOTEIO, errno);
    EXPECT_EQ_INT(PRM_STATUS_BAD_OP, out[0]);
    /* a collapsed CQ is a CQE format softnic does not write */
    PRM_SET(big, PRM_IN_OPCODE, PRM_OP_CREATE_CQ);
    PRM_SET(big, CQC_CC, 1);
    errno = 0;
    EXPECT_TRUE(mlx5dv_devx_obj_create(ctx, big, sizeof(big), out, 0x10) == NULL);
    EXPECT_EQ_INT(EREMOTEIO, errno);
    EXPECT_EQ_INT(PRM_STATUS_BAD_PARAM, out[0]);
    EXPECT_EQ_INT(0, ibv_close_device(ctx));
}

/* With SOFTNIC_MAX_WQE_SZ_SQ set, softnic's firmware states that largest
 * send WQE instead of 1024; one outside 16..1024 bytes is logged and not
 * stated. */
TAP_CASE(test_a_stated_largest_wqe_is_answered)
{
    setenv("SOFTNIC_MAX_WQE_SZ_SQ", "512", 1);   /* this case's process only */
    struct ibv_context *ctx = plain_context(0);
    static uint8_t out[PRM_QUERY_HCA_CAP_OUT_BYTES];
    EXPECT_EQ_INT(0, hca_cap_query(ctx, OPMOD_GENERAL_CUR, out, sizeof(out)));
    EXPECT_EQ_INT(0x02, out[0x62]);           /* max_wqe_sz_sq, big-endian: 512 */
    EXPECT_EQ_INT(0x00, out[0x63]);
    EXPECT_EQ_INT(0, ibv_close_device(ctx));
}

TAP_CASE(test_a_largest_wqe_out_of_range_is_not_stated)
{
    setenv("SOFTNIC_MAX_WQE_SZ_SQ", "2000", 1);
    struct ibv_context *ctx = plain_context(0);
    static uint8_t out[PRM_QUERY_HCA_CAP_OUT_BYTES];
    EXPECT_EQ_INT(0, hca_cap_query(ctx, OPMOD_GENERAL_CUR, out, sizeof(out)));
    EXPECT_EQ_INT(1024, (int)PRM_GET(out, PRM_HCA_CAP_MAX_WQE_SZ_SQ));
    EXPECT_EQ_INT(0, ibv_close_device(ctx));
}

/* ------------------------------------------------- DOCA's QP, replayed */
#define DEPTH 128                /* NCCL_GIN_GDAKI_QP_DEPTH */
#define PAGE 4096
#define CQE_INVALID_OWNED 0xf1   /* opcode INVALID << 4 | owner 1 */
#define CTRL_CQ_UPDATE 0x08
#define OP_WRITE 0x08
#define OP_READ 0x10
#define OP_ATOMIC_FA 0x12
#define OP_WAIT 0x0f
#define INLINE_SEG 0x80000000u

/* One doca_gpu_verbs_qp_hl: its CQ and QP over host umems. */
struct dq {
    struct ibv_context *ctx;
    uint8_t *cq_buf, *cq_dbr, *sq_buf, *sq_dbr;
    struct mlx5dv_devx_umem *umem[4];
    struct mlx5dv_devx_uar *cq_uar, *qp_uar;   /* cq_uar NULL: the CQ uses qp_uar */
    bool own_qp_uar;                            /* not a group's shared UAR */
    struct mlx5dv_devx_obj *cq, *qp;
    uint32_t cqn, qpn;
    uint16_t pi;
    uint32_t ci;
};

static void *page_mem(size_t len)
{
    void *p = NULL;
    EXPECT_EQ_INT(0, posix_memalign(&p, PAGE, len));
    memset(p, 0, len);
    return p;
}

/* create_gpu_umem with a dmabuf the device refuses, then by address. */
static struct mlx5dv_devx_umem *doca_umem(struct ibv_context *ctx, void *addr, size_t len)
{
    struct mlx5dv_devx_umem_in ui = { .addr = addr, .size = len, .access = IBV_ACCESS_LOCAL_WRITE,
                                      .pgsz_bitmap = PAGE, .comp_mask = 0 };
    struct mlx5dv_devx_umem *u = mlx5dv_devx_umem_reg_ex(ctx, &ui);
    EXPECT_TRUE(u != NULL);
    return u;
}

/* create_uar: NC_DEDICATED, else NC. */
static struct mlx5dv_devx_uar *doca_qp_uar(struct ibv_context *ctx)
{
    struct mlx5dv_devx_uar *u = mlx5dv_devx_alloc_uar(ctx, UAR_NC_DEDICATED);
    if (!u)
        u = mlx5dv_devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_NC);
    EXPECT_TRUE(u != NULL);
    return u;
}

/* A PRM MTU DOCA's convert_prm_mtu_size_to_doca_verbs_mtu_size takes. */
static bool doca_mtu_ok(uint32_t mtu) { return (mtu >= 1 && mtu <= 5) || mtu == 7; }

/* doca_verbs_qp_query's checks (2.30's doca_gpu_verbs_export_qp makes it
 * on the new QP, in RST): the state and the MTU must be PRM values, or it
 * returns DOCA_ERROR_UNEXPECTED. */
static void dq_export_query(struct mlx5dv_devx_obj *qp, uint32_t qpn, uint32_t want_state)
{
    uint8_t in[0x10], out[PRM_QUERY_QP_OUT_BYTES];
    memset(in, 0, sizeof(in));
    PRM_SET(in, PRM_IN_OPCODE, PRM_OP_QUERY_QP);
    PRM_SET(in, PRM_QP_CMD_QPN, qpn);
    EXPECT_EQ_INT(0, mlx5dv_devx_obj_query(qp, in, sizeof(in), out, sizeof(out)));
    EXPECT_EQ_INT(want_state, (uint32_t)PRM_GET(out, PRM_QPC_STATE));
    uint32_t mtu = (uint32_t)PRM_GET(out, PRM_QPC_MTU);
    if (!doca_mtu_ok(mtu))
        tap_fail_at(__FILE__, __LINE__, "QUERY_QP of QP 0x%x in state %u: mtu %u, not a PRM MTU "
                    "(DOCA 2.30: DOCA_ERROR_UNEXPECTED)", qpn, want_state, mtu);
}

/* One DOCA QP: create_qp_hl (group_uar NULL: the CQ with a UAR of its own
 * first, then the QP's UAR) or one QP of create_qp_group_hl (2.30: the
 * group's UAR, made first, serves the CQ and the QP; 2.28: as qp_hl). */
static void dq_create(struct dq *q, struct ibv_context *ctx, struct ibv_pd *pd, bool cd_master,
                      struct mlx5dv_devx_uar *group_uar)
{
    memset(q, 0, sizeof(*q));
    q->ctx = ctx;
    if (doca230 && group_uar)
        q->qp_uar = group_uar;
    struct doca_caps caps;
    doca_query_device(ctx, &caps);
    EXPECT_TRUE(caps.rc && DEPTH <= caps.da.max_cqe && 48 <= caps.max_sq_desc && DEPTH <= caps.max_send_wqebb);
    /* CQ */
    q->cq_buf = page_mem(DEPTH * 64);
    for (int i = 0; i < DEPTH; i++)
        q->cq_buf[i * 64 + 63] = CQE_INVALID_OWNED;
    q->cq_dbr = page_mem(PAGE);
    q->umem[0] = doca_umem(ctx, q->cq_buf, DEPTH * 64);
    q->umem[1] = doca_umem(ctx, q->cq_dbr, PAGE);
    if (!q->qp_uar) {
        q->cq_uar = mlx5dv_devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_NC);
        EXPECT_TRUE(q->cq_uar != NULL);
    }
    uint32_t eqn = 0;
    EXPECT_EQ_INT(0, mlx5dv_devx_query_eqn(ctx, 0, &eqn));
    uint8_t in[0x110], out[0x10];
    memset(in, 0, sizeof(in));
    PRM_SET(in, PRM_IN_OPCODE, PRM_OP_CREATE_CQ);
    PRM_SET(in, PRM_CQ_CQE_SZ, 0);
    PRM_SET(in, CQC_CC, 0);
    PRM_SET(in, PRM_CQ_OI, 1);
    PRM_SET(in, PRM_CQ_LOG_SIZE, 7);
    PRM_SET(in, PRM_CQ_UAR_PAGE, (q->cq_uar ? q->cq_uar : q->qp_uar)->page_id);
    PRM_SET(in, PRM_CQ_UMEM_ID, q->umem[0]->umem_id);
    PRM_SET(in, PRM_CQ_UMEM_VALID, 1);
    PRM_SET(in, PRM_CQ_UMEM_OFFSET, 0);
    PRM_SET(in, PRM_CQ_DBR_UMEM_ID, q->umem[1]->umem_id);
    PRM_SET(in, PRM_CQ_DBR_UMEM_VALID, 1);
    PRM_SET(in, PRM_CQ_DBR_ADDR, 0);
    PRM_SET(in, PRM_CQ_C_EQN, eqn);
    PRM_SET(in, PRM_CQ_LOG_PAGE_SIZE, 0);
    q->cq = mlx5dv_devx_obj_create(ctx, in, sizeof(in), out, sizeof(out));
    if (!q->cq)
        tap_fail_at(__FILE__, __LINE__, "CREATE_CQ: errno %d status 0x%x syndrome 0x%x", errno, out[0],
                    (unsigned)PRM_GET(out, PRM_OUT_SYNDROME));
    q->cqn = (uint32_t)PRM_GET(out, PRM_OUT_OBJ_ID);
    /* QP */
    if (!q->qp_uar) {
        q->qp_uar = doca_qp_uar(ctx);
        q->own_qp_uar = true;
    }
    if (doca230)
        doca_query_device(ctx, &caps);      /* the QP's constructor queries again */
    q->sq_buf = page_mem(DEPTH * 64);
    q->sq_dbr = page_mem(PAGE);
    q->umem[2] = doca_umem(ctx, q->sq_buf, DEPTH * 64);
    q->umem[3] = doca_umem(ctx, q->sq_dbr, PAGE);
    struct mlx5dv_pd dvpd;
    struct mlx5dv_obj obj = { .pd = { .in = pd, .out = &dvpd } };
    EXPECT_EQ_INT(0, mlx5dv_init_obj(&obj, MLX5DV_OBJ_PD));
    memset(in, 0, sizeof(in));
    PRM_SET(in, PRM_IN_OPCODE, PRM_OP_CREATE_QP);
    PRM_SET(in, PRM_QPC_ST, PRM_QP_ST_RC);
    PRM_SET(in, PRM_QPC_PD, dvpd.pdn);
    PRM_SET(in, QPC_USER_INDEX, 0);
    PRM_SET(in, PRM_QPC_UAR_PAGE, q->qp_uar->page_id);
    PRM_SET(in, PRM_QPC_CQN_SND, q->cqn);
    PRM_SET(in, PRM_QPC_LOG_SQ_SIZE, 7);
    PRM_SET(in, PRM_QPC_RQ_TYPE, PRM_QP_RQ_ZERO_LEN);
    PRM_SET(in, PRM_QPC_DBR_UMEM_VALID, 1);
    PRM_SET(in, PRM_QPC_DBR_UMEM_ID, q->umem[3]->umem_id);
    PRM_SET(in, PRM_QPC_DBR_ADDR, 0);
    PRM_SET(in, QPC_CD_MASTER, cd_master);
    if (doca230)
        PRM_SET(in, QPC_SEND_DBR_MODE, 0);  /* VALID_DBR (NO_DBR_EXT: no such capability) */
    PRM_SET(in, PRM_QP_WQ_UMEM_ID, q->umem[2]->umem_id);
    PRM_SET(in, PRM_QP_WQ_UMEM_VALID, 1);
    PRM_SET(in, PRM_QPC_LOG_PAGE_SIZE, 0);
    q->qp = mlx5dv_devx_obj_create(ctx, in, sizeof(in), out, sizeof(out));
    if (!q->qp)
        tap_fail_at(__FILE__, __LINE__, "CREATE_QP: errno %d status 0x%x syndrome 0x%x", errno, out[0],
                    (unsigned)PRM_GET(out, PRM_OUT_SYNDROME));
    q->qpn = (uint32_t)PRM_GET(out, PRM_OUT_OBJ_ID);
    if (doca230)
        dq_export_query(q->qp, q->qpn, PRM_QP_STATE_RST);
}

static void dq_modify(struct dq *q, const uint8_t *in, const char *what)
{
    uint8_t out[0x10];
    if (mlx5dv_devx_obj_modify(q->qp, in, 0x110, out, sizeof(out)) != 0)
        tap_fail_at(__FILE__, __LINE__, "%s: status 0x%x syndrome 0x%x", what, out[0],
                    (unsigned)PRM_GET(out, PRM_OUT_SYNDROME));
}

static uint32_t log2_u32(uint32_t v)
{
    uint32_t l = 0;
    while (v > 1) {
        v >>= 1;
        l++;
    }
    return l;
}

/* gdakiConnectQp: RST2INIT, INIT2RTR, RTR2RTS as doca_verbs_qp_modify
 * encodes them for a RoCE address (addr type IPv4). */
static void dq_connect(struct dq *q, struct ibv_pd *pd, uint32_t remote_qpn, const union ibv_gid *rgid)
{
    struct doca_caps caps;
    doca_query_device(q->ctx, &caps);
    uint8_t in[0x110];
    memset(in, 0, sizeof(in));
    PRM_SET(in, PRM_IN_OPCODE, PRM_OP_RST2INIT_QP);
    PRM_SET(in, PRM_QP_CMD_QPN, q->qpn);
    PRM_SET(in, PRM_ADS_VHCA_PORT, 1);
    PRM_SET(in, PRM_QPC_PM_STATE, PRM_QP_PM_MIGRATED);
    PRM_SET(in, PRM_ADS_PKEY_INDEX, 0);
    PRM_SET(in, PRM_QPC_RWE, 1);
    PRM_SET(in, PRM_QPC_RRE, 1);
    PRM_SET(in, PRM_QPC_RAE, 1);
    PRM_SET(in, QPC_ATOMIC_MODE, 1);
    dq_modify(q, in, "RST2INIT");

    /* resolve_remote_mac: an AH on the PD, its mlx5 AV's rmac */
    struct ibv_ah_attr aa = { .port_num = 1, .is_global = 1,
                              .grh = { .dgid = *rgid, .sgid_index = 0, .hop_limit = 255 } };
    struct ibv_ah *ah = ibv_create_ah(pd, &aa);
    EXPECT_TRUE(ah != NULL);
    struct mlx5dv_ah dvah;
    struct mlx5dv_obj obj = { .ah = { .in = ah, .out = &dvah } };
    EXPECT_EQ_INT(0, mlx5dv_init_obj(&obj, MLX5DV_OBJ_AH));
    EXPECT_TRUE(dvah.av != NULL);
    uint8_t rmac[6];
    memcpy(rmac, dvah.av->rmac, 6);
    EXPECT_EQ_INT(0, ibv_destroy_ah(ah));
    uint8_t ra[ROCE_ADDR_OUT_BYTES];
    EXPECT_EQ_INT(0, roce_address_query(q->ctx, 0, 0, ra, sizeof(ra)));
    EXPECT_TRUE(PRM_GET(ra, ROCE_ADDR_VERSION) >= 2);
    memset(in, 0, sizeof(in));
    PRM_SET(in, PRM_IN_OPCODE, PRM_OP_INIT2RTR_QP);
    PRM_SET(in, PRM_QP_CMD_QPN, q->qpn);
    PRM_SET(in, PRM_QPC_NEXT_RCV_PSN, 0);
    PRM_SET(in, PRM_QPC_REMOTE_QPN, remote_qpn);
    PRM_SET(in, PRM_QPC_LOG_MSG_MAX, 30);
    PRM_SET(in, PRM_QPC_MTU, 5);
    PRM_SET(in, PRM_QPC_MIN_RNR_NAK, 12);
    PRM_SET(in, ADS_STAT_RATE, 0);
    prm_set_bytes(in, PRM_ADS_RGID_BIT, rgid->raw, 16);
    PRM_SET(in, PRM_ADS_HOP_LIMIT, 255);
    PRM_SET(in, PRM_ADS_SRC_ADDR_INDEX, 0);
    PRM_SET(in, PRM_ADS_RLID, 0);
    PRM_SET(in, PRM_ADS_SL, 0);
    PRM_SET(in, PRM_ADS_RMAC_47_32, (uint32_t)rmac[0] << 8 | rmac[1]);
    PRM_SET(in, PRM_ADS_RMAC_31_0, (uint32_t)rmac[2] << 24 | (uint32_t)rmac[3] << 16 | (uint32_t)rmac[4] << 8 | rmac[5]);
    PRM_SET(in, PRM_ADS_UDP_SPORT, caps.min_udp_sport + (uint32_t)rand() % (caps.max_udp_sport - caps.min_udp_sport + 1));
    PRM_SET(in, ADS_DSCP, 0);
    PRM_SET(in, PRM_ADS_PKEY_INDEX, 0);
    PRM_SET(in, PRM_QPC_RWE, 1);
    PRM_SET(in, PRM_QPC_RRE, 1);
    PRM_SET(in, PRM_QPC_RAE, 1);
    PRM_SET(in, QPC_ATOMIC_MODE, 1);
    if (doca230)    /* MAX_DEST_RD_ATOMIC: the device's max_qp_rd_atom */
        PRM_SET(in, PRM_QPC_LOG_RRA_MAX, log2_u32((uint32_t)caps.da.max_qp_rd_atom));
    PRM_SET(in, PRM_QP_OPT_PARAM_MASK, (1u << 1) | (1u << 3) | (1u << 4) | (1u << 6) | (1u << 17) | (1u << 23));
    dq_modify(q, in, "INIT2RTR");

    memset(in, 0, sizeof(in));
    PRM_SET(in, PRM_IN_OPCODE, PRM_OP_RTR2RTS_QP);
    PRM_SET(in, PRM_QP_CMD_QPN, q->qpn);
    PRM_SET(in, PRM_QPC_NEXT_SEND_PSN, 0);
    PRM_SET(in, PRM_ADS_ACK_TIMEOUT, 20);
    PRM_SET(in, PRM_QPC_RETRY_COUNT, 7);
    PRM_SET(in, PRM_QPC_RNR_RETRY, 7);
    PRM_SET(in, PRM_QPC_MIN_RNR_NAK, 12);
    PRM_SET(in, PRM_QPC_RWE, 1);
    PRM_SET(in, PRM_QPC_RAE, 1);
    PRM_SET(in, QPC_ATOMIC_MODE, 1);
    PRM_SET(in, QPC_LOG_ACK_REQ_FREQ, 0);
    if (doca230)
        PRM_SET(in, PRM_QPC_LOG_SRA_MAX, log2_u32((uint32_t)caps.da.max_qp_rd_atom));
    PRM_SET(in, PRM_QP_OPT_PARAM_MASK, 1u << 6);
    dq_modify(q, in, "RTR2RTS");
}

static void dq_query(struct dq *q, uint8_t *out)
{
    uint8_t in[0x10];
    memset(in, 0, sizeof(in));
    PRM_SET(in, PRM_IN_OPCODE, PRM_OP_QUERY_QP);
    PRM_SET(in, PRM_QP_CMD_QPN, q->qpn);
    EXPECT_EQ_INT(0, mlx5dv_devx_obj_query(q->qp, in, sizeof(in), out, PRM_QUERY_QP_OUT_BYTES));
}

/* The next WQE slot, its ctrl segment written as DOCA's device code does. */
static uint8_t *dq_wqe(struct dq *q, uint8_t opcode, uint8_t ds, uint8_t fm_ce_se)
{
    uint8_t *w = q->sq_buf + (size_t)(q->pi & (DEPTH - 1)) * 64;
    memset(w, 0, 64);
    uint32_t v = htobe32((uint32_t)q->pi << 8 | opcode);
    memcpy(w, &v, 4);
    v = htobe32(q->qpn << 8 | ds);
    memcpy(w + 4, &v, 4);
    w[11] = fm_ce_se;
    q->pi++;
    return w;
}

static void put_be64(uint8_t *p, uint64_t v) { v = htobe64(v); memcpy(p, &v, 8); }
static void put_be32(uint8_t *p, uint32_t v) { v = htobe32(v); memcpy(p, &v, 4); }

/* raddr segment at +16, then a data segment at +32 */
static void dq_rdma(struct dq *q, uint8_t op, uint64_t raddr, uint32_t rkey, void *laddr, uint32_t lkey,
                    uint32_t len)
{
    uint8_t *w = dq_wqe(q, op, 3, CTRL_CQ_UPDATE);
    put_be64(w + 16, raddr);
    put_be32(w + 24, rkey);
    put_be32(w + 32, len);
    put_be32(w + 36, lkey);
    put_be64(w + 40, (uint64_t)(uintptr_t)laddr);
}

static void dq_write_inline8(struct dq *q, uint64_t raddr, uint32_t rkey, uint64_t value)
{
    uint8_t *w = dq_wqe(q, OP_WRITE, 3, CTRL_CQ_UPDATE);
    put_be64(w + 16, raddr);
    put_be32(w + 24, rkey);
    put_be32(w + 32, 8 | INLINE_SEG);
    memcpy(w + 36, &value, 8);
}

static void dq_fetch_add(struct dq *q, uint64_t raddr, uint32_t rkey, void *laddr, uint32_t lkey,
                         uint64_t add, uint8_t fm_ce_se)
{
    uint8_t *w = dq_wqe(q, OP_ATOMIC_FA, 4, fm_ce_se);
    put_be64(w + 16, raddr);
    put_be32(w + 24, rkey);
    put_be64(w + 32, add);      /* swap_add */
    put_be64(w + 40, add);      /* compare: DOCA fills both */
    put_be32(w + 48, 8);
    put_be32(w + 52, lkey);
    put_be64(w + 56, (uint64_t)(uintptr_t)laddr);
}

static void dq_wait(struct dq *q, uint32_t max_index, uint32_t cqn)
{
    uint8_t *w = dq_wqe(q, OP_WAIT, 2, 0);
    put_be32(w + 24, max_index);
    put_be32(w + 28, cqn);
}

/* doca_gpu_dev_verbs_submit_db: doorbell, DBR, doorbell again. */
static void dq_submit(struct dq *q)
{
    uint32_t ctrl[2] = { htobe32((uint32_t)q->pi << 8), htobe32(q->qpn << 8) };
    uint64_t db;
    memcpy(&db, ctrl, 8);
    volatile uint64_t *reg = q->qp_uar->reg_addr;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    *reg = db;
    __atomic_store_n((uint32_t *)(q->sq_dbr + 4), htobe32(q->pi & 0xffff), __ATOMIC_RELEASE);
    *reg = db;
}

/* The next CQE (owner bit of this pass), or NULL after ms. */
static const struct mlx5_cqe64 *dq_poll(struct dq *q, int ms)
{
    const struct mlx5_cqe64 *c = (const struct mlx5_cqe64 *)(q->cq_buf + (size_t)(q->ci & (DEPTH - 1)) * 64);
    uint8_t owner = (q->ci / DEPTH) & 1;
    uint64_t until = st_now_ms() + (uint64_t)ms;
    for (;;) {
        uint8_t op_own = __atomic_load_n(&c->op_own, __ATOMIC_ACQUIRE);
        if ((op_own >> 4) != MLX5_CQE_INVALID && (op_own & 1) == owner) {
            q->ci++;
            return c;
        }
        if (st_now_ms() > until)
            return NULL;
        usleep(100);
    }
}

static void dq_expect_cqe(struct dq *q, uint16_t wqe_counter)
{
    const struct mlx5_cqe64 *c = dq_poll(q, 10000);
    if (!c)
        tap_fail_at(__FILE__, __LINE__, "QP 0x%x: no CQE for WQE %u", q->qpn, wqe_counter);
    EXPECT_EQ_INT(MLX5_CQE_REQ, c->op_own >> 4);
    EXPECT_EQ_INT(wqe_counter, be16toh(c->wqe_counter));
    EXPECT_EQ_INT(q->qpn, be32toh(c->sop_drop_qpn) & 0xffffff);
    tap_progress();
}

static void dq_destroy(struct dq *q)
{
    EXPECT_EQ_INT(0, mlx5dv_devx_obj_destroy(q->qp));
    EXPECT_EQ_INT(0, mlx5dv_devx_obj_destroy(q->cq));
    for (int i = 0; i < 4; i++)
        EXPECT_EQ_INT(0, mlx5dv_devx_umem_dereg(q->umem[i]));
    if (q->own_qp_uar)
        mlx5dv_devx_free_uar(q->qp_uar);
    if (q->cq_uar)
        mlx5dv_devx_free_uar(q->cq_uar);
    free(q->cq_buf);
    free(q->cq_dbr);
    free(q->sq_buf);
    free(q->sq_dbr);
}

/* NCCL's GDAKI setup between two softnic devices, DOCA's host sequence
 * call for call (host memory for every umem): a QP group on each side
 * (main QP, and a companion with cd_master), connected main to main and
 * companion to companion over RoCE; then the device code's WQEs from the
 * CPU: a 4 KiB RDMA WRITE, an 8-byte inline WRITE, a fetch-and-add and
 * an RDMA READ on the main QP, and on the companion the counter pattern
 * (WAIT for the main CQ's fourth CQE, then a fetch-and-add), which must
 * not run before that CQE.  Data and counters land, every CQE comes in
 * order with its WQE counter, QUERY_QP reads the connected context. */
static void doca_replay(void)
{
    setenv("SOFTNIC_DEVICES", "softnic0:127.0.0.1;softnic1:127.0.1.1", 1);
    struct ibv_context *ca = plain_context(0), *cb = plain_context(1);
    struct ibv_pd *pa = ibv_alloc_pd(ca), *pb = ibv_alloc_pd(cb);
    EXPECT_TRUE(pa && pb);
    union ibv_gid ga, gb;
    EXPECT_EQ_INT(0, ibv_query_gid(ca, 1, 0, &ga));
    EXPECT_EQ_INT(0, ibv_query_gid(cb, 1, 0, &gb));
    EXPECT_TRUE(memcmp(ga.raw, gb.raw, 16) != 0);

    /* a QP group per side (2.30: the group's UAR first, shared by main and
     * companion), then a self-loop peer QP (create_qp_hl) */
    struct mlx5dv_devx_uar *ua = doca_qp_uar(ca), *ub = doca_qp_uar(cb);
    struct dq am, ac, bm, bc, self;
    dq_create(&am, ca, pa, false, ua);
    dq_create(&ac, ca, pa, true, ua);
    dq_create(&bm, cb, pb, false, ub);
    dq_create(&bc, cb, pb, true, ub);
    dq_create(&self, ca, pa, false, NULL);
    dq_connect(&am, pa, bm.qpn, &gb);
    dq_connect(&bm, pb, am.qpn, &ga);
    dq_connect(&ac, pa, bc.qpn, &gb);
    dq_connect(&bc, pb, ac.qpn, &ga);
    tap_progress();

    uint8_t qo[PRM_QUERY_QP_OUT_BYTES];
    dq_query(&am, qo);
    EXPECT_EQ_INT(PRM_QP_STATE_RTS, (int)PRM_GET(qo, PRM_QPC_STATE));
    EXPECT_EQ_INT(5, (int)PRM_GET(qo, PRM_QPC_MTU));
    EXPECT_EQ_INT(bm.qpn, (int)PRM_GET(qo, PRM_QPC_REMOTE_QPN));
    EXPECT_EQ_INT(am.cqn, (int)PRM_GET(qo, PRM_QPC_CQN_SND));
    EXPECT_EQ_INT(1, (int)PRM_GET(qo, PRM_ADS_VHCA_PORT));
    EXPECT_EQ_INT(1, (int)PRM_GET(qo, PRM_QPC_RWE));
    uint8_t qgid[16];
    prm_get_bytes(qo, PRM_ADS_RGID_BIT, qgid, 16);
    EXPECT_MEMEQ(gb.raw, qgid, 16);

    const size_t len = 4096;
    uint8_t *src = st_buf(len, 7), *land = st_buf(2 * len, 0), *back = st_buf(len, 0);
    uint64_t *fetched = (uint64_t *)st_buf(16, 0);
    memset(land, 0, 2 * len);
    memset(back, 0, len);
    uint64_t *counter = (uint64_t *)(land + len + 64), *counter2 = counter + 1;
    *counter = 1000;
    *counter2 = 0;
    struct ibv_mr *ms = ibv_reg_mr(pa, src, len, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr *mb = ibv_reg_mr(pa, back, len, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr *mf = ibv_reg_mr(pa, fetched, 16, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr *ml = ibv_reg_mr(pb, land, 2 * len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
    EXPECT_TRUE(ms && mb && mf && ml);
    uint64_t rbase = (uint64_t)(uintptr_t)land;

    /* companion first: its WAIT holds the counter until the main CQ's
     * CQE number 3 is written */
    dq_wait(&ac, 3, am.cqn);
    dq_fetch_add(&ac, (uint64_t)(uintptr_t)counter2, ml->rkey, fetched + 1, mf->lkey, 1, CTRL_CQ_UPDATE);
    dq_submit(&ac);
    EXPECT_TRUE(dq_poll(&ac, 100) == NULL);
    EXPECT_EQ_U64(0, __atomic_load_n(counter2, __ATOMIC_ACQUIRE));

    dq_rdma(&am, OP_WRITE, rbase, ml->rkey, src, ms->lkey, (uint32_t)len);
    dq_write_inline8(&am, rbase + len, ml->rkey, 0x1122334455667788ull);
    dq_fetch_add(&am, (uint64_t)(uintptr_t)counter, ml->rkey, fetched, mf->lkey, 5, CTRL_CQ_UPDATE);
    dq_rdma(&am, OP_READ, rbase, ml->rkey, back, mb->lkey, (uint32_t)len);
    dq_submit(&am);
    for (uint16_t i = 0; i < 4; i++)
        dq_expect_cqe(&am, i);
    EXPECT_MEMEQ(src, land, len);
    uint64_t inl;
    memcpy(&inl, land + len, 8);
    EXPECT_EQ_U64(0x1122334455667788ull, inl);
    EXPECT_EQ_U64(1000, fetched[0]);
    EXPECT_EQ_U64(1005, *counter);
    EXPECT_MEMEQ(src, back, len);
    dq_expect_cqe(&ac, 1);      /* the WAIT asked for no CQE */
    EXPECT_EQ_U64(1, __atomic_load_n(counter2, __ATOMIC_ACQUIRE));

    /* a second round through the same rings */
    memset(land, 0, len);
    dq_rdma(&am, OP_WRITE, rbase, ml->rkey, src, ms->lkey, (uint32_t)len);
    dq_submit(&am);
    dq_expect_cqe(&am, 4);
    EXPECT_MEMEQ(src, land, len);

    /* 2ERR, as DOCA's teardown on error moves it */
    uint8_t in[0x10], out[0x10];
    memset(in, 0, sizeof(in));
    PRM_SET(in, PRM_IN_OPCODE, PRM_OP_2ERR_QP);
    PRM_SET(in, PRM_QP_CMD_QPN, am.qpn);
    EXPECT_EQ_INT(0, mlx5dv_devx_obj_modify(am.qp, in, sizeof(in), out, sizeof(out)));
    dq_query(&am, qo);
    EXPECT_EQ_INT(PRM_QP_STATE_ERR, (int)PRM_GET(qo, PRM_QPC_STATE));

    EXPECT_EQ_INT(0, ibv_dereg_mr(ms));
    EXPECT_EQ_INT(0, ibv_dereg_mr(mb));
    EXPECT_EQ_INT(0, ibv_dereg_mr(mf));
    EXPECT_EQ_INT(0, ibv_dereg_mr(ml));
    dq_destroy(&self);
    dq_destroy(&ac);
    dq_destroy(&am);
    dq_destroy(&bc);
    dq_destroy(&bm);
    mlx5dv_devx_free_uar(ua);
    mlx5dv_devx_free_uar(ub);
    EXPECT_EQ_INT(0, ibv_dealloc_pd(pa));
    EXPECT_EQ_INT(0, ibv_dealloc_pd(pb));
    EXPECT_EQ_INT(0, ibv_close_device(ca));
    EXPECT_EQ_INT(0, ibv_close_device(cb));
}

TAP_CASE(test_doca_228_sequence_connects_rc_qps_and_moves_data)
{
    doca230 = false;
    doca_replay();
}

/* NCCL 2.30.7's DOCA (NCCL_GDAKI_USE_RELIABLE_DB 0: VALID_DBR; the
 * NO_DBR_SW_EMULATED fallback makes the same commands, its DBR in host
 * memory): doca_gpu_verbs_export_qp queries every new QP and needs a PRM
 * MTU from it while the QP is still in RST. */
TAP_CASE(test_doca_230_sequence_connects_rc_qps_and_moves_data)
{
    doca230 = true;
    doca_replay();
}

/* NO_DBR_HW (NCCL_GDAKI_USE_RELIABLE_DB 1 or 2): DOCA asks hca_cap_2's
 * send_dbr_mode_no_dbr_ext and, where it reads 0, refuses the mode itself
 * (DOCA_ERROR_NOT_SUPPORTED) and NCCL falls back.  softnic's NIC takes a
 * send queue's producer index from its doorbell record, so it has no
 * DBR-less send: the capability type is there (as on a ConnectX-7) with
 * that bit 0, and a CREATE_QP asking send_dbr_mode NO_DBR_EXT anyway is
 * refused with BAD_PARAM, nothing created. */
TAP_CASE(test_dbr_less_send_reads_absent_and_is_refused)
{
    doca230 = true;
    struct ibv_context *ctx = plain_context(0);
    struct doca_caps c;
    doca_query_device(ctx, &c);
    EXPECT_EQ_INT(1, c.hca_cap_2);
    EXPECT_EQ_INT(0, c.send_dbr_mode_no_dbr_ext);
    static uint8_t out[PRM_QUERY_HCA_CAP_OUT_BYTES];
    EXPECT_EQ_INT(0, hca_cap_query(ctx, OPMOD_GENERAL_2_CUR, out, sizeof(out)));
    for (size_t i = 0x10; i < sizeof(out); i++)     /* every type-0x20 capability absent */
        if (out[i])
            tap_fail_at(__FILE__, __LINE__, "hca_cap_2 byte 0x%zx is 0x%x", i - 0x10, out[i]);
    EXPECT_EQ_INT(EREMOTEIO, hca_cap_query(ctx, OPMOD_GENERAL_2_CUR, out, 0x100));
    EXPECT_EQ_INT(PRM_STATUS_BAD_OUTP_LEN, out[0]);

    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    EXPECT_TRUE(pd != NULL);
    struct dq q;
    dq_create(&q, ctx, pd, false, NULL);
    /* the same CREATE_QP with send_dbr_mode 1 */
    uint8_t *sq = page_mem(DEPTH * 64), *dbr = page_mem(PAGE);
    struct mlx5dv_devx_umem *us = doca_umem(ctx, sq, DEPTH * 64), *ud = doca_umem(ctx, dbr, PAGE);
    struct mlx5dv_pd dvpd;
    struct mlx5dv_obj obj = { .pd = { .in = pd, .out = &dvpd } };
    EXPECT_EQ_INT(0, mlx5dv_init_obj(&obj, MLX5DV_OBJ_PD));
    uint8_t in[0x110], o[0x10];
    memset(in, 0, sizeof(in));
    PRM_SET(in, PRM_IN_OPCODE, PRM_OP_CREATE_QP);
    PRM_SET(in, PRM_QPC_ST, PRM_QP_ST_RC);
    PRM_SET(in, PRM_QPC_PD, dvpd.pdn);
    PRM_SET(in, PRM_QPC_UAR_PAGE, q.qp_uar->page_id);
    PRM_SET(in, PRM_QPC_CQN_SND, q.cqn);
    PRM_SET(in, PRM_QPC_LOG_SQ_SIZE, 7);
    PRM_SET(in, PRM_QPC_RQ_TYPE, PRM_QP_RQ_ZERO_LEN);
    PRM_SET(in, PRM_QPC_DBR_UMEM_VALID, 1);
    PRM_SET(in, PRM_QPC_DBR_UMEM_ID, ud->umem_id);
    PRM_SET(in, PRM_QP_WQ_UMEM_ID, us->umem_id);
    PRM_SET(in, PRM_QP_WQ_UMEM_VALID, 1);
    for (uint32_t mode = 1; mode <= 3; mode++) {
        PRM_SET(in, QPC_SEND_DBR_MODE, mode);
        errno = 0;
        EXPECT_TRUE(mlx5dv_devx_obj_create(ctx, in, sizeof(in), o, sizeof(o)) == NULL);
        EXPECT_EQ_INT(EREMOTEIO, errno);
        EXPECT_EQ_INT(PRM_STATUS_BAD_PARAM, o[0]);
    }
    EXPECT_EQ_INT(0, mlx5dv_devx_umem_dereg(us));
    EXPECT_EQ_INT(0, mlx5dv_devx_umem_dereg(ud));
    free(sq);
    free(dbr);
    dq_destroy(&q);
    EXPECT_EQ_INT(0, ibv_dealloc_pd(pd));
    EXPECT_EQ_INT(0, ibv_close_device(ctx));
}

/* QUERY_QP before INIT2RTR (which sets the path MTU) answers the port's
 * active MTU, a PRM MTU; from RTR on, the MTU the QP was given. */
TAP_CASE(test_query_qp_before_rtr_answers_a_valid_mtu)
{
    doca230 = true;
    struct ibv_context *ctx = plain_context(0);
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    EXPECT_TRUE(pd != NULL);
    struct ibv_port_attr pa;
    EXPECT_EQ_INT(0, ibv_query_port(ctx, 1, &pa));
    struct dq q;
    dq_create(&q, ctx, pd, false, NULL);    /* its export query: RST */
    uint8_t qo[PRM_QUERY_QP_OUT_BYTES];
    dq_query(&q, qo);
    EXPECT_EQ_INT(pa.active_mtu, (int)PRM_GET(qo, PRM_QPC_MTU));
    uint8_t in[0x110], out[0x10];
    memset(in, 0, sizeof(in));
    PRM_SET(in, PRM_IN_OPCODE, PRM_OP_RST2INIT_QP);
    PRM_SET(in, PRM_QP_CMD_QPN, q.qpn);
    PRM_SET(in, PRM_ADS_VHCA_PORT, 1);
    EXPECT_EQ_INT(0, mlx5dv_devx_obj_modify(q.qp, in, sizeof(in), out, sizeof(out)));
    dq_export_query(q.qp, q.qpn, PRM_QP_STATE_INIT);
    dq_query(&q, qo);
    EXPECT_EQ_INT(pa.active_mtu, (int)PRM_GET(qo, PRM_QPC_MTU));
    dq_destroy(&q);
    EXPECT_EQ_INT(0, ibv_dealloc_pd(pd));
    EXPECT_EQ_INT(0, ibv_close_device(ctx));
}

int main(int argc, char **argv) { return sntest_main(argc, argv); }
