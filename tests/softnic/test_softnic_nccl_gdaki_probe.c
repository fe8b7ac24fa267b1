/* tests/softnic/test_softnic_nccl_gdaki_probe.c: the mlx5dv/DEVX calls
 * NCCL 2.28.9 makes on softnic, in the order it makes them, each answered
 * as a ConnectX answers: with sane results or with the errno of a NIC (or
 * a process) without that capability -- never a missing symbol, never a
 * crash.  The order, from NCCL 2.28.9's sources:
 *   1. IB transport init (misc/mlx5dvsymbols.cc): dlopen("libmlx5.so"),
 *      dlvsym of mlx5dv_is_supported@MLX5_1.8 and of the MLX5_1.25 pair
 *      (mlx5dv_get_data_direct_sysfs_path, mlx5dv_reg_dmabuf_mr).
 *   2. Per device (transport/net_ib.cc): mlx5dv_is_supported -> the mlx5
 *      provider; the DMA-BUF probe (ibv_reg_dmabuf_mr and
 *      mlx5dv_reg_dmabuf_mr with fd -1 must fail with EBADF, not
 *      EOPNOTSUPP); mlx5dv_get_data_direct_sysfs_path (ENODEV: no
 *      data-direct function, one NCCL device per port).  With a device on
 *      the mlx5 provider, GDAKI's init and devices() report it, so NCCL
 *      keeps a real GIN table (2.28.9 faulted when that count was 0).
 *   3. GDAKI's createContext (transport/gdaki, DOCA GPUNetIO verbs): after
 *      doca_gpu_create (GPU only), a plain ibv_open_device context, PD, port
 *      and GID; then DOCA's dlopen("libmlx5.so") + dlsym of 13 entry points;
 *      then the DEVX calls: user memory (umem_reg_ex, then umem_reg), UAR,
 *      EQN, CREATE_CQ, QUERY_HCA_CAP.  On a context opened without
 *      MLX5DV_CONTEXT_FLAGS_DEVX softnic refuses all of them with
 *      EOPNOTSUPP, as rdma-core does where the kernel would not give the
 *      process a DEVX context; on a DEVX context, QUERY_HCA_CAP is a
 *      command softnic's firmware does not model: refused with PRM status
 *      BAD_OP and errno EREMOTEIO. */
#include "sntest.h"

#include <dlfcn.h>
#include <errno.h>
#include <infiniband/mlx5dv.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define QUERY_HCA_CAP 0x100
#define CREATE_CQ 0x400
#define PRM_BAD_OP 0x02

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

TAP_CASE(test_gdaki_context_devx_calls_are_refused_on_a_plain_context)
{
    struct st_dev d;
    st_dev_open(&d);     /* ibv_open_device + PD, as gdaki's createContext */
    struct ibv_port_attr pa;
    EXPECT_EQ_INT(0, ibv_query_port(d.ctx, 1, &pa));
    union ibv_gid gid;
    EXPECT_EQ_INT(0, ibv_query_gid(d.ctx, 1, 0, &gid));
    struct ibv_device_attr da;
    EXPECT_EQ_INT(0, ibv_query_device(d.ctx, &da));
    void *mem = st_buf(65536, 0);
    /* create_cq: user memory for the ring, then the doorbell record */
    struct mlx5dv_devx_umem_in ui = { .addr = mem, .size = 65536,
                                      .access = IBV_ACCESS_LOCAL_WRITE, .pgsz_bitmap = 4096,
                                      .comp_mask = 0 };
    errno = 0;
    EXPECT_TRUE(mlx5dv_devx_umem_reg_ex(d.ctx, &ui) == NULL);
    EXPECT_EQ_INT(EOPNOTSUPP, errno);
    errno = 0;
    EXPECT_TRUE(mlx5dv_devx_umem_reg(d.ctx, mem, 65536, IBV_ACCESS_LOCAL_WRITE) == NULL);
    EXPECT_EQ_INT(EOPNOTSUPP, errno);
    errno = 0;
    EXPECT_TRUE(mlx5dv_devx_alloc_uar(d.ctx, MLX5DV_UAR_ALLOC_TYPE_NC) == NULL);
    EXPECT_EQ_INT(EOPNOTSUPP, errno);
    uint32_t eqn = 0;
    EXPECT_EQ_INT(EOPNOTSUPP, mlx5dv_devx_query_eqn(d.ctx, 0, &eqn));
    uint32_t in[64], out[64];
    memset(in, 0, sizeof(in));
    in[0] = htobe32((uint32_t)CREATE_CQ << 16);
    errno = 0;
    EXPECT_TRUE(mlx5dv_devx_obj_create(d.ctx, in, sizeof(in), out, sizeof(out)) == NULL);
    EXPECT_EQ_INT(EOPNOTSUPP, errno);
    in[0] = htobe32((uint32_t)QUERY_HCA_CAP << 16);
    EXPECT_EQ_INT(EOPNOTSUPP, mlx5dv_devx_general_cmd(d.ctx, in, 16, out, sizeof(out)));
    munmap(mem, 65536);
    st_dev_close(&d);
}

/* The first device opened with MLX5DV_CONTEXT_FLAGS_DEVX. */
static struct ibv_context *devx_context(void)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    EXPECT_TRUE(list && n >= 1);   /* softnic lists its devices whatever the knob says */
    struct mlx5dv_context_attr ca = { .flags = MLX5DV_CONTEXT_FLAGS_DEVX };
    struct ibv_context *ctx = mlx5dv_open_device(list[0], &ca);
    ibv_free_device_list(list);
    EXPECT_TRUE(ctx != NULL);
    return ctx;
}

/* QUERY_HCA_CAP with op_mod into out (outlen bytes, first set to 0xee);
 * mlx5dv_devx_general_cmd's return. */
static int hca_cap_query(struct ibv_context *ctx, uint32_t op_mod, uint8_t *out, size_t outlen)
{
    uint32_t in[4];
    memset(in, 0, sizeof(in));
    in[0] = htobe32((uint32_t)QUERY_HCA_CAP << 16);
    in[1] = htobe32(op_mod);
    memset(out, 0xee, outlen);
    return mlx5dv_devx_general_cmd(ctx, in, sizeof(in), out, outlen);
}

#define HCA_CAP_OUT_BYTES (0x10 + 0x1000)
#define GENERAL_CURRENT 1   /* op_mod: general capabilities (type 0), current values */

TAP_CASE(test_devx_context_refuses_hca_cap_query_with_a_prm_status)
{
    struct ibv_context *ctx = devx_context();
    uint8_t out[256];
    EXPECT_EQ_INT(EREMOTEIO, hca_cap_query(ctx, 0, out, sizeof(out)));
    EXPECT_EQ_INT(PRM_BAD_OP, out[0]);
    /* the EQN a DEVX CQ names is there */
    uint32_t eqn = 99;
    EXPECT_EQ_INT(0, mlx5dv_devx_query_eqn(ctx, 0, &eqn));
    EXPECT_EQ_INT(0, eqn);
    EXPECT_EQ_INT(0, ibv_close_device(ctx));
}

/* With SOFTNIC_MAX_WQE_SZ_SQ set, softnic's firmware states that largest
 * send WQE in QUERY_HCA_CAP's general capabilities (current values), every
 * other field 0; a short output is refused as a ConnectX refuses it, and
 * other capability types stay not modelled. */
TAP_CASE(test_devx_context_answers_hca_cap_query_with_a_stated_largest_wqe)
{
    setenv("SOFTNIC_MAX_WQE_SZ_SQ", "512", 1);   /* this case's process only */
    struct ibv_context *ctx = devx_context();
    static uint8_t out[HCA_CAP_OUT_BYTES];
    EXPECT_EQ_INT(0, hca_cap_query(ctx, GENERAL_CURRENT, out, sizeof(out)));
    EXPECT_EQ_INT(0, out[0]);                 /* status OK */
    EXPECT_EQ_INT(0x02, out[0x62]);           /* max_wqe_sz_sq, big-endian: 512 */
    EXPECT_EQ_INT(0x00, out[0x63]);
    EXPECT_EQ_INT(0, out[0x10] | out[0x61] | out[0x64] | out[0x100f]);
    EXPECT_EQ_INT(EREMOTEIO, hca_cap_query(ctx, GENERAL_CURRENT, out, 0x100));
    EXPECT_EQ_INT(0x51, out[0]);              /* BAD_OUTP_LEN */
    EXPECT_EQ_INT(EREMOTEIO, hca_cap_query(ctx, 2 << 1 | 1, out, sizeof(out)));   /* another type */
    EXPECT_EQ_INT(PRM_BAD_OP, out[0]);
    EXPECT_EQ_INT(0, ibv_close_device(ctx));
}

/* A largest WQE outside 16..1024 bytes is logged and not stated: the
 * command stays refused. */
TAP_CASE(test_a_largest_wqe_out_of_range_is_not_stated)
{
    setenv("SOFTNIC_MAX_WQE_SZ_SQ", "2000", 1);
    struct ibv_context *ctx = devx_context();
    static uint8_t out[HCA_CAP_OUT_BYTES];
    EXPECT_EQ_INT(EREMOTEIO, hca_cap_query(ctx, GENERAL_CURRENT, out, sizeof(out)));
    EXPECT_EQ_INT(PRM_BAD_OP, out[0]);
    EXPECT_EQ_INT(0, ibv_close_device(ctx));
}

int main(int argc, char **argv) { return sntest_main(argc, argv); }
