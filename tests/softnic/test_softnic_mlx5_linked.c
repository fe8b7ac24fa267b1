/* tests/softnic/test_softnic_mlx5_linked.c: a program linked at build time
 * against softnic's libmlx5.so.1 (not dlopen'ed) through symbols of nodes
 * that rdma-core 44 lacks -- mlx5dv_reserved_qpn_alloc@MLX5_1.18 and the
 * MLX5_1.25 pair NCCL 2.28.9 binds -- loads and runs on softnic, and each
 * entry point answers as a ConnectX without that capability does.  The
 * loader resolving these bindings before main() is half of the test: a
 * missing symbol or node aborts the program and the TAP driver sees no
 * plan.  RUNPATH (Makefile.include) points at softnic's build directory so
 * the loader picks softnic's library over the system's. */
#include "sntest.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/mlx5dv.h>
#include <string.h>
#include <unistd.h>

/* Prototypes from rdma-core 50 / 54's mlx5dv.h (facts); the installed
 * rdma-core 44 header does not declare them. */
int mlx5dv_reserved_qpn_alloc(struct ibv_context *ctx, uint32_t *qpn);
int mlx5dv_reserved_qpn_dealloc(struct ibv_context *ctx, uint32_t qpn);
struct ibv_mr *mlx5dv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
                                    uint64_t iova, int fd, int access, int mlx5_access);
int mlx5dv_get_data_direct_sysfs_path(struct ibv_context *ctx, char *buf, size_t buf_len);

#define MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT (1 << 0)

TAP_CASE(test_bound_symbols_come_from_softnics_libmlx5)
{
    Dl_info info;
    memset(&info, 0, sizeof(info));
    EXPECT_TRUE(dladdr((void *)mlx5dv_reserved_qpn_alloc, &info) != 0);
    EXPECT_TRUE(info.dli_fname && strstr(info.dli_fname, "tests/softnic/libmlx5.so.1"));
    memset(&info, 0, sizeof(info));
    EXPECT_TRUE(dladdr((void *)mlx5dv_reg_dmabuf_mr, &info) != 0);
    EXPECT_TRUE(info.dli_fname && strstr(info.dli_fname, "tests/softnic/libmlx5.so.1"));
}

TAP_CASE(test_softnic_devices_are_mlx5_devices)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    EXPECT_TRUE(list != NULL && n >= 1);
    for (int i = 0; i < n; i++)
        EXPECT_TRUE(mlx5dv_is_supported(list[i]));
    ibv_free_device_list(list);
}

TAP_CASE(test_reserved_qpn_is_refused_as_without_the_capability)
{
    struct st_dev d;
    st_dev_open(&d);
    uint32_t qpn = 0xdead;
    EXPECT_EQ_INT(EOPNOTSUPP, mlx5dv_reserved_qpn_alloc(d.ctx, &qpn));
    EXPECT_EQ_INT(0xdead, qpn);
    EXPECT_EQ_INT(EOPNOTSUPP, mlx5dv_reserved_qpn_dealloc(d.ctx, 1));
    st_dev_close(&d);
}

TAP_CASE(test_data_direct_is_absent_and_dmabuf_probe_says_ebadf)
{
    struct st_dev d;
    st_dev_open(&d);
    char path[256] = "unchanged";
    /* ENODEV: an mlx5 device that is not behind a data-direct function */
    EXPECT_EQ_INT(ENODEV, mlx5dv_get_data_direct_sysfs_path(d.ctx, path, sizeof(path)));
    EXPECT_TRUE(strcmp(path, "unchanged") == 0);
    /* NCCL's probe: fd -1 must give EBADF (dmabuf supported), not EOPNOTSUPP */
    errno = 0;
    EXPECT_TRUE(mlx5dv_reg_dmabuf_mr(d.pd, 0, 0, 0, -1, 0, 0) == NULL);
    EXPECT_EQ_INT(EBADF, errno);
    errno = 0;
    EXPECT_TRUE(ibv_reg_dmabuf_mr(d.pd, 0, 0, 0, -1, 0) == NULL);
    EXPECT_EQ_INT(EBADF, errno);
    /* data-direct access is a capability softnic does not have */
    int fd = open("/dev/null", O_RDONLY);
    errno = 0;
    EXPECT_TRUE(mlx5dv_reg_dmabuf_mr(d.pd, 0, 4096, 0, fd, IBV_ACCESS_LOCAL_WRITE,
                                     MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT) == NULL);
    EXPECT_EQ_INT(EOPNOTSUPP, errno);
    close(fd);
    st_dev_close(&d);
}

TAP_CASE(test_unmodelled_entry_points_fail_cleanly)
{
    struct st_dev d;
    st_dev_open(&d);
    errno = 0;
    EXPECT_TRUE(mlx5dv_dr_domain_create(d.ctx, MLX5DV_DR_DOMAIN_TYPE_NIC_RX) == NULL);
    EXPECT_EQ_INT(EOPNOTSUPP, errno);
    mlx5dv_dr_domain_set_reclaim_device_memory(NULL, true);   /* a no-op, no crash */
    errno = 0;
    EXPECT_EQ_INT(-1, (int)mlx5dv_devx_get_event(NULL, NULL, 0));
    EXPECT_EQ_INT(EOPNOTSUPP, errno);
    struct mlx5dv_vfio_context_attr vattr;
    memset(&vattr, 0, sizeof(vattr));
    vattr.pci_name = "0000:00:00.0";
    errno = 0;
    EXPECT_TRUE(mlx5dv_get_vfio_device_list(&vattr) == NULL);
    EXPECT_EQ_INT(EOPNOTSUPP, errno);
    st_dev_close(&d);
}

TAP_CASE(test_address_handle_av_has_no_mac)
{
    struct st_dev d;
    st_dev_open(&d);
    struct ibv_ah_attr aa;
    memset(&aa, 0, sizeof(aa));
    aa.is_global = 1;
    aa.port_num = 1;
    aa.grh.hop_limit = 64;
    EXPECT_EQ_INT(0, ibv_query_gid(d.ctx, 1, 0, &aa.grh.dgid));
    struct ibv_ah *ah = ibv_create_ah(d.pd, &aa);
    EXPECT_TRUE(ah != NULL);
    if (ah) {
        struct mlx5dv_ah dvah;
        struct mlx5dv_obj obj;
        memset(&obj, 0, sizeof(obj));
        memset(&dvah, 0xff, sizeof(dvah));
        obj.ah.in = ah;
        obj.ah.out = &dvah;
        EXPECT_EQ_INT(0, mlx5dv_init_obj(&obj, MLX5DV_OBJ_AH));
        static const uint8_t zero[6];
        EXPECT_TRUE(dvah.av != NULL && memcmp(dvah.av->rmac, zero, 6) == 0);
        EXPECT_EQ_INT(0, ibv_destroy_ah(ah));
    }
    st_dev_close(&d);
}

int main(int argc, char **argv) { return sntest_main(argc, argv); }
