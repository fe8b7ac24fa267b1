/* gdaki_devx.c: the DEVX-built send QP of a gdaki pair (see gdaki_devx.h).
 *
 * Memory: one region holds the send ring (2^sq_log basic blocks), the CQ
 * (2^cq_log 64-byte CQEs) and a doorbell page (the QP's record pair at 0,
 * the CQ's at 64), each part page-aligned.  It is registered once as umem
 * and every PRM command names it by umem id and offset.  In GPU memory the
 * region is allocated 64 KiB-aligned (the GPU page a peer-memory
 * registration pins; gdaki_cuda_ring_alloc carves it from blocks shared by
 * the QPs), and its initial image -- zeros, every CQE invalid
 * with owner 1 -- is copied in from the host: a NIC never initialises a
 * ring it was handed. */
#include "gdaki_devx.h"

#include <errno.h>
#include <infiniband/mlx5dv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gdaki_cuda.h"
#include "gdaki_prm.h"
#include "gdaki_wqe.h"

#define PAGE 4096u

struct gdaki_devx {
    int gpu;
    uint8_t *mem;               /* region start (host pointer, or device address) */
    size_t len;
    size_t sq_off, cq_off, dbr_off;
    uint32_t sq_log, cq_log;
    struct mlx5dv_devx_umem *umem;
    struct mlx5dv_devx_uar *uar;
    struct mlx5dv_devx_obj *cq, *qp;
    uint32_t cqn, qpn;
};

static size_t page_up(size_t n)
{
    return (n + PAGE - 1) & ~(size_t)(PAGE - 1);
}

static uint32_t log2_up(uint32_t v)
{
    uint32_t l = 0;
    while ((1u << l) < v)
        l++;
    return l;
}

/* Appends the outcome of a refused command to err. */
static int cmd_failed(const char *what, int rc, const void *out, char *err, size_t errlen)
{
    uint8_t st = prm_out_status(out);
    if (st)
        snprintf(err, errlen, "DEVX %s refused: status 0x%02x (%s), syndrome 0x%08x (%s)", what, st,
                 prm_status_str(st), (unsigned)PRM_GET(out, PRM_OUT_SYNDROME), strerror(rc));
    else
        snprintf(err, errlen, "DEVX %s failed: %s", what, strerror(rc));
    return -1;
}

struct ibv_context *gdaki_devx_open(const struct ibvwrap *v, struct ibv_device *dev, char *err,
                                    size_t errlen)
{
    const char *name = v->get_device_name(dev);
    const char *missing = ibvwrap_devx_missing(v);
    if (missing) {
        snprintf(err, errlen, "RAILNET_GDAKI_QUEUE_MEM=gpu: %s has no %s (rdma-core without DEVX, "
                 "< 24); use RAILNET_GDAKI_QUEUE_MEM=host", v->mlx5_path[0] ? v->mlx5_path : "libmlx5",
                 missing);
        return NULL;
    }
    struct mlx5dv_context_attr a = { .flags = MLX5DV_CONTEXT_FLAGS_DEVX, .comp_mask = 0 };
    errno = 0;
    struct ibv_context *ctx = v->mlx5dv_open_device(dev, &a);
    if (!ctx) {
        int e = errno;
        snprintf(err, errlen, "RAILNET_GDAKI_QUEUE_MEM=gpu: %s cannot be opened for DEVX: %s%s; use "
                 "RAILNET_GDAKI_QUEUE_MEM=host", name, strerror(e),
                 e == EOPNOTSUPP ? " (not an mlx5 device, or its driver has no DEVX)"
                 : e == EPERM || e == EACCES ? " (DEVX needs CAP_NET_RAW or a DEVX-enabled uverbs "
                                               "device)" : "");
        return NULL;
    }
    return ctx;
}

/* The region's initial image: zeros, every CQE invalid and owned by the
 * NIC's first pass (owner 1). */
static uint8_t *initial_image(const struct gdaki_devx *d)
{
    uint8_t *img = calloc(1, d->len);
    if (!img)
        return NULL;
    for (uint32_t i = 0; i < (1u << d->cq_log); i++)
        img[d->cq_off + (size_t)i * 64 + 63] = (MLX5_CQE_INVALID << 4) | 1;
    return img;
}

static int alloc_region(struct gdaki_pair *pr, struct gdaki_devx *d, char *err, size_t errlen)
{
    uint8_t *img = initial_image(d);
    if (!img) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = 0;
    if (!d->gpu) {
        void *p = aligned_alloc(PAGE, d->len);
        if (!p) {
            free(img);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        memcpy(p, img, d->len);
        free(img);
        d->mem = p;
        return 0;
    }
    uint64_t dptr = 0;
    if (gdaki_cuda_open(pr->cuda_dev, err, errlen) < 0 ||
        gdaki_cuda_ring_alloc(pr->cuda_dev, d->len, &dptr, err, errlen) < 0) {
        size_t l = strlen(err);
        snprintf(err + l, errlen - l, " (RAILNET_GDAKI_QUEUE_MEM=gpu needs CUDA device %d)",
                 pr->cuda_dev);
        rc = -1;
    } else {
        d->mem = (uint8_t *)(uintptr_t)dptr;
        rc = gdaki_cuda_htod((uint64_t)(uintptr_t)d->mem, img, d->len, err, errlen);
    }
    free(img);
    return rc;
}

uint32_t gdaki_devx_max_wqe_ds(const struct ibvwrap *v, struct ibv_context *ctx)
{
    uint8_t in[PRM_QUERY_HCA_CAP_IN_BYTES];
    if (!v->mlx5dv_devx_general_cmd || !ctx)
        return 0;
    uint8_t *out = calloc(1, PRM_QUERY_HCA_CAP_OUT_BYTES);   /* 4 KiB: not on the stack */
    if (!out)
        return 0;
    prm_query_hca_cap_in(in);
    uint32_t ds = 0;
    if (v->mlx5dv_devx_general_cmd(ctx, in, sizeof(in), out, PRM_QUERY_HCA_CAP_OUT_BYTES) == 0)
        ds = prm_max_wqe_ds(out);
    free(out);
    return ds;
}

int gdaki_devx_create(struct gdaki_pair *pr, uint32_t depth, int gpu, char *err, size_t errlen)
{
    const struct ibvwrap *v = pr->v;
    struct gdaki_devx *d = calloc(1, sizeof(*d));
    if (!d) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    pr->devx = d;
    d->gpu = gpu;
    d->sq_log = log2_up(depth ? depth : 1024);
    if (d->sq_log < 1 || d->sq_log > 15) {
        snprintf(err, errlen, "send queue depth %u: must be 2..32768", depth);
        return -1;
    }
    /* A CQE for every slot that may be outstanding, with room to spare. */
    d->cq_log = d->sq_log + 1;
    d->sq_off = 0;
    d->cq_off = page_up((size_t)MLX5_SEND_WQE_BB << d->sq_log);
    d->dbr_off = d->cq_off + page_up((size_t)64 << d->cq_log);
    d->len = d->dbr_off + PAGE;
    if (alloc_region(pr, d, err, errlen) < 0)
        return -1;

    d->umem = v->mlx5dv_devx_umem_reg(pr->ctx, d->mem, d->len, IBV_ACCESS_LOCAL_WRITE);
    if (!d->umem) {
        snprintf(err, errlen, "%s: mlx5dv_devx_umem_reg(%s memory, %zu bytes) failed: %s%s", pr->dev_name,
                 gpu ? "GPU" : "host", d->len, strerror(errno),
                 gpu ? " (GPU memory as umem needs nvidia-peermem, or a NIC driver with dmabuf)" : "");
        return -1;
    }
    d->uar = v->mlx5dv_devx_alloc_uar(pr->ctx, 0);
    if (!d->uar || !d->uar->reg_addr) {
        snprintf(err, errlen, "%s: mlx5dv_devx_alloc_uar failed: %s", pr->dev_name, strerror(errno));
        return -1;
    }
    uint32_t eqn = 0;
    int rc = v->mlx5dv_devx_query_eqn(pr->ctx, 0, &eqn);
    if (rc) {
        snprintf(err, errlen, "%s: mlx5dv_devx_query_eqn: %s", pr->dev_name, strerror(rc));
        return -1;
    }
    struct mlx5dv_pd dvpd;
    struct mlx5dv_obj obj;
    memset(&obj, 0, sizeof(obj));
    obj.pd.in = pr->pd;
    obj.pd.out = &dvpd;
    if ((rc = v->mlx5dv_init_obj(&obj, MLX5DV_OBJ_PD)) != 0) {
        snprintf(err, errlen, "%s: mlx5dv_init_obj(PD): %s", pr->dev_name, strerror(rc));
        return -1;
    }

    uint8_t in[PRM_QP_CMD_IN_BYTES], out[PRM_OUT_BYTES];
    struct prm_cq_params cqp = {
        .log_size = d->cq_log, .uar_page = d->uar->page_id, .eqn = eqn,
        .umem_id = d->umem->umem_id, .umem_offset = d->cq_off,
        .dbr_umem_id = d->umem->umem_id, .dbr_offset = d->dbr_off + 64,
    };
    prm_create_cq_in(in, &cqp);
    memset(out, 0, sizeof(out));
    d->cq = v->mlx5dv_devx_obj_create(pr->ctx, in, PRM_CREATE_CQ_IN_BYTES, out, sizeof(out));
    if (!d->cq)
        return cmd_failed("CREATE_CQ", errno, out, err, errlen);
    d->cqn = (uint32_t)PRM_GET(out, PRM_OUT_OBJ_ID);

    struct prm_qp_params qpp = {
        .pdn = dvpd.pdn, .cqn = d->cqn, .uar_page = d->uar->page_id, .log_sq_size = d->sq_log,
        .wq_umem_id = d->umem->umem_id, .wq_umem_offset = d->sq_off,
        .dbr_umem_id = d->umem->umem_id, .dbr_offset = d->dbr_off,
    };
    prm_create_qp_in(in, &qpp);
    memset(out, 0, sizeof(out));
    d->qp = v->mlx5dv_devx_obj_create(pr->ctx, in, PRM_QP_CMD_IN_BYTES, out, sizeof(out));
    if (!d->qp)
        return cmd_failed("CREATE_QP", errno, out, err, errlen);
    d->qpn = (uint32_t)PRM_GET(out, PRM_OUT_OBJ_ID);

    prm_rst2init_in(in, d->qpn, (uint8_t)pr->port, 1, 1, pr->atomics);
    memset(out, 0, sizeof(out));
    if ((rc = v->mlx5dv_devx_obj_modify(d->qp, in, PRM_QP_CMD_IN_BYTES, out, sizeof(out))) != 0)
        return cmd_failed("RST2INIT_QP", rc, out, err, errlen);

    /* What mlx5dv_init_obj would have said of a verbs-made QP and CQ. */
    memset(&pr->dvqp, 0, sizeof(pr->dvqp));
    pr->dvqp.sq.buf = d->mem + d->sq_off;
    pr->dvqp.sq.wqe_cnt = 1u << d->sq_log;
    pr->dvqp.sq.stride = MLX5_SEND_WQE_BB;
    pr->dvqp.dbrec = (__be32 *)(d->mem + d->dbr_off);
    pr->dvqp.bf.reg = d->uar->reg_addr;
    pr->dvqp.bf.size = 256;
    memset(&pr->dvcq, 0, sizeof(pr->dvcq));
    pr->dvcq.buf = d->mem + d->cq_off;
    pr->dvcq.dbrec = (__be32 *)(d->mem + d->dbr_off + 64);
    pr->dvcq.cqe_cnt = 1u << d->cq_log;
    pr->dvcq.cqe_size = 64;
    pr->dvcq.cqn = d->cqn;
    return 0;
}

uint32_t gdaki_devx_qpn(const struct gdaki_pair *pr)
{
    return pr->devx ? pr->devx->qpn : 0;
}

/* RoCE: the next-hop MAC of the remote GID, which a DEVX QP must be told
 * (the kernel resolves it for verbs QPs): from an address handle's mlx5
 * address vector.  softnic routes by GID and has no MAC: zero there. */
static int remote_mac(struct gdaki_pair *pr, const struct gdaki_qp_info *remote, uint8_t mac[6],
                      char *err, size_t errlen)
{
    memset(mac, 0, 6);
    struct ibv_ah_attr aa;
    memset(&aa, 0, sizeof(aa));
    aa.is_global = 1;
    memcpy(aa.grh.dgid.raw, remote->gid, 16);
    aa.grh.sgid_index = (uint8_t)pr->gid_index;
    aa.grh.hop_limit = 64;
    aa.port_num = (uint8_t)pr->port;
    struct ibv_ah *ah = pr->v->create_ah(pr->pd, &aa);
    if (!ah) {
        if (!pr->is_mlx5)
            return 0;
        snprintf(err, errlen, "%s: ibv_create_ah toward the remote GID failed: %s", pr->dev_name,
                 strerror(errno));
        return -1;
    }
    struct mlx5dv_ah dvah;
    struct mlx5dv_obj obj;
    memset(&obj, 0, sizeof(obj));
    obj.ah.in = ah;
    obj.ah.out = &dvah;
    int rc = pr->v->mlx5dv_init_obj(&obj, MLX5DV_OBJ_AH);
    if (rc == 0 && dvah.av)
        memcpy(mac, dvah.av->rmac, 6);
    pr->v->destroy_ah(ah);
    if (rc && pr->is_mlx5) {
        snprintf(err, errlen, "%s: mlx5dv_init_obj(AH) for the remote MAC: %s", pr->dev_name,
                 strerror(rc));
        return -1;
    }
    return 0;
}

int gdaki_devx_connect(struct gdaki_pair *pr, const struct gdaki_qp_info *remote, char *err,
                       size_t errlen)
{
    struct gdaki_devx *d = pr->devx;
    const struct ibvwrap *v = pr->v;
    struct prm_rtr_params p;
    memset(&p, 0, sizeof(p));
    p.remote_qpn = remote->qpn;
    p.rq_psn = remote->psn;
    p.mtu = remote->mtu < pr->port_attr.active_mtu ? remote->mtu : (uint8_t)pr->port_attr.active_mtu;
    p.port = (uint8_t)pr->port;
    p.global = pr->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET || remote->is_global;
    if (p.global) {
        memcpy(p.rgid, remote->gid, 16);
        p.sgid_index = (uint8_t)pr->gid_index;
        p.hop_limit = 64;
        /* RoCE v2 source port: spread QPs over the fabric's ECMP paths. */
        p.udp_sport = (uint16_t)(0xc000 | ((d->qpn ^ remote->qpn) & 0x3fff));
        if (pr->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET &&
            remote_mac(pr, remote, p.rmac, err, errlen) < 0)
            return -1;
    } else {
        p.rlid = remote->lid;
    }
    p.min_rnr_nak = 12;
    p.log_rra_max = 0;
    uint8_t in[PRM_QP_CMD_IN_BYTES], out[PRM_OUT_BYTES];
    prm_init2rtr_in(in, d->qpn, &p);
    memset(out, 0, sizeof(out));
    int rc = v->mlx5dv_devx_obj_modify(d->qp, in, sizeof(in), out, sizeof(out));
    if (rc)
        return cmd_failed("INIT2RTR_QP", rc, out, err, errlen);
    prm_rtr2rts_in(in, d->qpn, pr->psn, 14, 7, 7, 0);
    memset(out, 0, sizeof(out));
    rc = v->mlx5dv_devx_obj_modify(d->qp, in, sizeof(in), out, sizeof(out));
    if (rc)
        return cmd_failed("RTR2RTS_QP", rc, out, err, errlen);
    return 0;
}

int gdaki_devx_state(struct gdaki_pair *pr)
{
    if (!pr->devx || !pr->devx->qp)
        return -1;
    uint8_t in[PRM_QUERY_QP_IN_BYTES], out[PRM_QUERY_QP_OUT_BYTES];
    prm_qp_simple_in(in, PRM_OP_QUERY_QP, pr->devx->qpn);
    memset(out, 0, sizeof(out));
    if (pr->v->mlx5dv_devx_obj_query(pr->devx->qp, in, sizeof(in), out, sizeof(out)) != 0)
        return -1;
    switch (PRM_GET(out, PRM_QPC_STATE)) {
    case PRM_QP_STATE_RST: return IBV_QPS_RESET;
    case PRM_QP_STATE_INIT: return IBV_QPS_INIT;
    case PRM_QP_STATE_RTR: return IBV_QPS_RTR;
    case PRM_QP_STATE_RTS: return IBV_QPS_RTS;
    case PRM_QP_STATE_SQER: return IBV_QPS_SQE;
    default: return IBV_QPS_ERR;
    }
}

int gdaki_devx_fail(struct gdaki_pair *pr)
{
    if (!pr->devx || !pr->devx->qp)
        return -1;
    uint8_t in[PRM_QUERY_QP_IN_BYTES], out[PRM_OUT_BYTES];
    prm_qp_simple_in(in, PRM_OP_2ERR_QP, pr->devx->qpn);
    memset(out, 0, sizeof(out));
    return pr->v->mlx5dv_devx_obj_modify(pr->devx->qp, in, sizeof(in), out, sizeof(out)) == 0 ? 0 : -1;
}

void gdaki_devx_destroy(struct gdaki_pair *pr)
{
    struct gdaki_devx *d = pr->devx;
    if (!d)
        return;
    const struct ibvwrap *v = pr->v;
    /* Objects before the memory they live in: the NIC stops using the
     * ring once the QP and CQ are gone. */
    if (d->qp)
        v->mlx5dv_devx_obj_destroy(d->qp);
    if (d->cq)
        v->mlx5dv_devx_obj_destroy(d->cq);
    if (d->uar)
        v->mlx5dv_devx_free_uar(d->uar);
    if (d->umem)
        v->mlx5dv_devx_umem_dereg(d->umem);
    if (d->gpu)
        gdaki_cuda_ring_free((uint64_t)(uintptr_t)d->mem);
    else
        free(d->mem);
    free(d);
    pr->devx = NULL;
}
