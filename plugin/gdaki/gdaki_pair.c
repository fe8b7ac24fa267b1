/* gdaki_pair.c: the QPs of the GPU-initiated path (see railnet_gdaki.h):
 * QP "send" made by mlx5dv_create_qp (or with DEVX over memory of our
 * choosing: gdaki_devx.c), whose send ring, doorbell record, UAR
 * register and CQ are handed to posters through a struct gdaki_qp_dev, and
 * QP "recv", an ordinary verbs QP.  A pair holds both, connected on one
 * port; a half holds one, connected to the other end's description.  Every
 * verbs and mlx5dv call goes through plugin/ib/ibvwrap. */
#include "gdaki_pair.h"

#include <endian.h>
#include <errno.h>
#include <infiniband/mlx5dv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gdaki_cuda.h"
#include "gdaki_devx.h"
#include "gdaki_queue.h"

#define PAGE 4096u

/* ------------------------------------------------------------ helpers */

static uint32_t log2_exact(uint32_t v)
{
    uint32_t l = 0;
    while ((1u << l) < v)
        l++;
    return (1u << l) == v ? l : UINT32_MAX;
}

static int gid_is_ipv4_mapped(const union ibv_gid *g)
{
    static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
    return memcmp(g->raw, prefix, sizeof(prefix)) == 0;
}

/* Make [p, p+len) reachable from the GPU (whole pages) and return the
 * device address of p. */
static int map_for_gpu(struct gdaki_pair *pr, void *p, size_t len, int io, uint64_t *dptr,
                       char *err, size_t errlen)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(PAGE - 1);
    uintptr_t e = ((uintptr_t)p + len + PAGE - 1) & ~(uintptr_t)(PAGE - 1);
    if (pr->nregs == GDAKI_PAIR_MAX_REGS) {
        snprintf(err, errlen, "too many host ranges to map for the GPU");
        return -1;
    }
    struct gdaki_host_reg *r = &pr->regs[pr->nregs];
    uint64_t base;
    if (gdaki_cuda_host_register((void *)a, e - a, io, &base, &r->owned, err, errlen) < 0)
        return -1;
    r->addr = (void *)a;
    pr->nregs++;
    *dptr = base + ((uintptr_t)p - a);
    return 0;
}

int gdaki_pair_qp_init(struct gdaki_pair *pr, struct ibv_qp *qp, char *err, size_t errlen)
{
    struct ibv_qp_attr a = { 0 };
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = (uint8_t)pr->port;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                        (pr->atomics ? IBV_ACCESS_REMOTE_ATOMIC : 0);
    int rc = pr->v->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                      IBV_QP_ACCESS_FLAGS);
    if (rc) {
        snprintf(err, errlen, "QP %u to INIT: %s", qp->qp_num, strerror(rc));
        return -1;
    }
    return 0;
}

/* RTR then RTS, toward remote_qpn on this same port (loopback). */
/* RTR then RTS toward the QP that remote describes (PSNs: ours is
 * pr->psn, the remote's is remote->psn). */
static int qp_to_rts_info(struct gdaki_pair *pr, struct ibv_qp *qp, const struct gdaki_qp_info *remote,
                          char *err, size_t errlen)
{
    if (!qp && pr->devx)
        return gdaki_devx_connect(pr, remote, err, errlen);
    struct ibv_qp_attr a = { 0 };
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = (enum ibv_mtu)(remote->mtu < pr->port_attr.active_mtu ? remote->mtu
                                                                       : pr->port_attr.active_mtu);
    a.dest_qp_num = remote->qpn;
    a.rq_psn = remote->psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = (uint8_t)pr->port;
    if (pr->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET || remote->is_global) {
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, remote->gid, 16);
        a.ah_attr.grh.sgid_index = (uint8_t)pr->gid_index;
        a.ah_attr.grh.hop_limit = 64;
    } else {
        a.ah_attr.dlid = remote->lid;
    }
    int rc = pr->v->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc) {
        snprintf(err, errlen, "QP %u to RTR: %s", qp->qp_num, strerror(rc));
        return -1;
    }
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = pr->psn;
    a.max_rd_atomic = 1;
    rc = pr->v->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc) {
        snprintf(err, errlen, "QP %u to RTS: %s", qp->qp_num, strerror(rc));
        return -1;
    }
    return 0;
}

uint32_t gdaki_pair_send_qpn(const struct gdaki_pair *pr)
{
    return pr->devx ? gdaki_devx_qpn(pr) : pr->sqp ? pr->sqp->qp_num : 0;
}

/* qp NULL: the DEVX send QP. */
static void describe(struct gdaki_pair *pr, struct ibv_qp *qp, struct gdaki_qp_info *out)
{
    memset(out, 0, sizeof(*out));
    out->magic = GDAKI_QP_INFO_MAGIC;
    out->qpn = qp ? qp->qp_num : gdaki_pair_send_qpn(pr);
    out->psn = pr->psn;
    out->lid = pr->port_attr.lid;
    out->port = (uint8_t)pr->port;
    out->mtu = (uint8_t)pr->port_attr.active_mtu;
    out->is_global = pr->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
    memcpy(out->gid, pr->gid.raw, 16);
}

/* Loopback: each QP of the pair toward the other. */
static int qp_to_rts(struct gdaki_pair *pr, struct ibv_qp *qp, struct ibv_qp *peer, char *err,
                     size_t errlen)
{
    struct gdaki_qp_info remote;
    describe(pr, peer, &remote);
    return qp_to_rts_info(pr, qp, &remote, err, errlen);
}

/* ------------------------------------------------------------ open */

/* devx: the send QP will be made with DEVX, so open the device for it. */
static int open_device(struct gdaki_pair *pr, const struct gdaki_pair_opts *o, int devx, char *err,
                       size_t errlen)
{
    int n = 0;
    struct ibv_device **list = pr->v->get_device_list(&n);
    if (!list || n == 0) {
        snprintf(err, errlen, "no RDMA device (%s)", pr->v->path);
        if (list)
            pr->v->free_device_list(list);
        return -1;
    }
    struct ibv_device *dev = NULL;
    for (int i = 0; i < n && !dev; i++)
        if (!o->dev_name || strcmp(pr->v->get_device_name(list[i]), o->dev_name) == 0)
            dev = list[i];
    if (!dev) {
        snprintf(err, errlen, "no RDMA device named %s", o->dev_name);
        pr->v->free_device_list(list);
        return -1;
    }
    snprintf(pr->dev_name, sizeof(pr->dev_name), "%s", pr->v->get_device_name(dev));
    pr->is_mlx5 = pr->v->mlx5dv_is_supported && pr->v->mlx5dv_is_supported(dev);
    if (devx) {
        pr->ctx = gdaki_devx_open(pr->v, dev, err, errlen);
        pr->v->free_device_list(list);
        if (!pr->ctx)
            return -1;
    } else {
        pr->ctx = pr->v->open_device(dev);
        pr->v->free_device_list(list);
    }
    if (!pr->ctx) {
        snprintf(err, errlen, "cannot open %s: %s", pr->dev_name, strerror(errno));
        return -1;
    }
    struct ibv_device_attr da;
    if (pr->v->query_device(pr->ctx, &da) != 0) {
        snprintf(err, errlen, "ibv_query_device(%s) failed", pr->dev_name);
        return -1;
    }
    pr->atomics = da.atomic_cap != IBV_ATOMIC_NONE;
    if (ibvwrap_query_port(pr->v, pr->ctx, (uint8_t)pr->port, &pr->port_attr) != 0) {
        snprintf(err, errlen, "%s port %d: ibv_query_port failed", pr->dev_name, pr->port);
        return -1;
    }
    if (pr->port_attr.state != IBV_PORT_ACTIVE) {
        snprintf(err, errlen, "%s port %d is not active", pr->dev_name, pr->port);
        return -1;
    }
    pr->gid_index = o->gid_index < 0 ? 0 : o->gid_index;
    if (o->gid_index < 0 && pr->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET) {
        for (int i = 0; i < pr->port_attr.gid_tbl_len; i++) {
            union ibv_gid g;
            if (pr->v->query_gid(pr->ctx, (uint8_t)pr->port, i, &g) == 0 && gid_is_ipv4_mapped(&g)) {
                pr->gid_index = i;
                break;
            }
        }
    }
    if (pr->v->query_gid(pr->ctx, (uint8_t)pr->port, pr->gid_index, &pr->gid) != 0) {
        snprintf(err, errlen, "%s port %d: no GID %d", pr->dev_name, pr->port, pr->gid_index);
        return -1;
    }
    return 0;
}

int gdaki_pair_build_send(struct gdaki_pair *pr, uint32_t depth, char *err, size_t errlen)
{
    depth = depth ? depth : 1024;
    if (pr->queue_mem != GDAKI_QUEUE_MEM_HOST) {
        pr->scratch_mr = pr->v->reg_mr(pr->pd, pr->scratch, PAGE, IBV_ACCESS_LOCAL_WRITE);
        if (!pr->scratch_mr) {
            snprintf(err, errlen, "%s: ibv_reg_mr(scratch) failed: %s", pr->dev_name, strerror(errno));
            return -1;
        }
        return gdaki_devx_create(pr, depth, pr->queue_mem == GDAKI_QUEUE_MEM_GPU, err, errlen);
    }
    /* The send CQ holds a CQE for every slot that may be outstanding. */
    pr->scq = pr->v->create_cq(pr->ctx, (int)depth, NULL, NULL, 0);
    if (!pr->scq) {
        snprintf(err, errlen, "%s: ibv_create_cq failed: %s", pr->dev_name, strerror(errno));
        return -1;
    }
    struct ibv_qp_init_attr_ex ea;
    memset(&ea, 0, sizeof(ea));
    ea.qp_type = IBV_QPT_RC;
    ea.send_cq = pr->scq;
    ea.recv_cq = pr->scq;
    ea.cap.max_send_wr = depth;
    ea.cap.max_recv_wr = 1;
    ea.cap.max_send_sge = 1;
    ea.cap.max_recv_sge = 1;
    /* One BB's worth: the kernel builds its own multi-BB inline WQEs, and
     * asking libmlx5 for more would size the ring for its largest WQE
     * (with its default RC overhead, 7 BBs a WQE at 220 bytes) where the
     * CQ bounds the window at about depth BBs anyway. */
    ea.cap.max_inline_data = GDAKI_INLINE_MAX_1BB;
    ea.comp_mask = IBV_QP_INIT_ATTR_PD;
    ea.pd = pr->pd;
    pr->sqp = pr->v->mlx5dv_create_qp(pr->ctx, &ea, NULL);
    if (!pr->sqp) {
        snprintf(err, errlen, "%s: mlx5dv_create_qp failed: %s%s", pr->dev_name, strerror(errno),
                 errno == EOPNOTSUPP ? " (the device's provider is not mlx5, and it is not softnic)"
                                     : "");
        return -1;
    }
    pr->scratch_mr = pr->v->reg_mr(pr->pd, pr->scratch, PAGE, IBV_ACCESS_LOCAL_WRITE);
    if (!pr->scratch_mr) {
        snprintf(err, errlen, "%s: ibv_reg_mr(scratch) failed: %s", pr->dev_name, strerror(errno));
        return -1;
    }
    return gdaki_pair_qp_init(pr, pr->sqp, err, errlen);
}

int gdaki_pair_build_recv(struct gdaki_pair *pr, char *err, size_t errlen)
{
    pr->rcq = pr->v->create_cq(pr->ctx, GDAKI_PAIR_RECV_DEPTH, NULL, NULL, 0);
    pr->cpu_cq = pr->v->create_cq(pr->ctx, GDAKI_PAIR_RECV_DEPTH, NULL, NULL, 0);
    if (!pr->rcq || !pr->cpu_cq) {
        snprintf(err, errlen, "%s: ibv_create_cq failed: %s", pr->dev_name, strerror(errno));
        return -1;
    }
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof(ia));
    ia.qp_type = IBV_QPT_RC;
    ia.send_cq = pr->cpu_cq;
    ia.recv_cq = pr->rcq;
    ia.cap.max_send_wr = GDAKI_PAIR_RECV_DEPTH;
    ia.cap.max_recv_wr = GDAKI_PAIR_RECV_DEPTH;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    pr->rqp = pr->v->create_qp(pr->pd, &ia);
    if (!pr->rqp) {
        snprintf(err, errlen, "%s: ibv_create_qp failed: %s", pr->dev_name, strerror(errno));
        return -1;
    }
    return gdaki_pair_qp_init(pr, pr->rqp, err, errlen);
}

static int create_qps(struct gdaki_pair *pr, const struct gdaki_pair_opts *o, char *err,
                      size_t errlen)
{
    pr->pd = pr->v->alloc_pd(pr->ctx);
    if (!pr->pd) {
        snprintf(err, errlen, "%s: ibv_alloc_pd failed", pr->dev_name);
        return -1;
    }
    if (gdaki_pair_build_send(pr, o->sq_depth, err, errlen) ||
        gdaki_pair_build_recv(pr, err, errlen) ||
        qp_to_rts(pr, pr->sqp, pr->rqp, err, errlen) ||
        qp_to_rts(pr, pr->rqp, pr->sqp, err, errlen))
        return -1;
    return 0;
}

/* Fill the host descriptor from mlx5dv_init_obj, checking every value the
 * posting protocol relies on. */
static int fill_desc(struct gdaki_pair *pr, char *err, size_t errlen)
{
    if (!pr->devx) {    /* a DEVX QP's rings are known already */
        struct mlx5dv_obj obj;
        memset(&obj, 0, sizeof(obj));
        obj.qp.in = pr->sqp;
        obj.qp.out = &pr->dvqp;
        obj.cq.in = pr->scq;
        obj.cq.out = &pr->dvcq;
        int rc = pr->v->mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ);
        if (rc) {
            snprintf(err, errlen, "mlx5dv_init_obj(QP %u, CQ): %s", pr->sqp->qp_num, strerror(rc));
            return -1;
        }
    }
    uint32_t sq_log = log2_exact(pr->dvqp.sq.wqe_cnt);
    uint32_t cq_log = log2_exact(pr->dvcq.cqe_cnt);
    if (pr->dvqp.sq.stride != MLX5_SEND_WQE_BB || sq_log == UINT32_MAX || sq_log > 15 ||
        !pr->dvqp.sq.buf || !pr->dvqp.dbrec || !pr->dvqp.bf.reg) {
        snprintf(err, errlen, "mlx5dv_init_obj: unusable send queue (stride %u, %u WQEs, buf %p, "
                 "dbrec %p, bf %p)", pr->dvqp.sq.stride, pr->dvqp.sq.wqe_cnt, pr->dvqp.sq.buf,
                 (void *)pr->dvqp.dbrec, pr->dvqp.bf.reg);
        return -1;
    }
    if ((pr->dvcq.cqe_size != 64 && pr->dvcq.cqe_size != 128) || cq_log == UINT32_MAX ||
        !pr->dvcq.buf || !pr->dvcq.dbrec) {
        snprintf(err, errlen, "mlx5dv_init_obj: unusable CQ (cqe size %u, %u CQEs)",
                 pr->dvcq.cqe_size, pr->dvcq.cqe_cnt);
        return -1;
    }
    struct gdaki_qp_dev *q = pr->desc;
    memset(q, 0, sizeof(*q));
    q->sq = pr->dvqp.sq.buf;
    q->dbrec = (uint32_t *)&pr->dvqp.dbrec[MLX5_SND_DBR];
    q->db = (uint64_t *)pr->dvqp.bf.reg;
    q->cq = pr->dvcq.buf;
    q->cq_dbrec = (uint32_t *)pr->dvcq.dbrec;
    q->scratch_addr = (uint64_t)(uintptr_t)pr->scratch;
    q->scratch_lkey = pr->scratch_mr->lkey;
    q->qpn = gdaki_pair_send_qpn(pr);
    q->sq_log = sq_log;
    q->cq_log = cq_log;
    q->cqe_size = pr->dvcq.cqe_size;
    q->max_wqe_ds = gdaki_devx_max_wqe_ds(pr->v, pr->ctx);
    q->flags = (pr->atomics ? 0 : GDAKI_QP_FLAG_NO_ATOMICS) |
               (pr->queue_mem == GDAKI_QUEUE_MEM_GPU ? GDAKI_QP_FLAG_GPU_QUEUE : 0);
    free(pr->span);
    pr->span = calloc(1, (size_t)1 << sq_log);
    if (!pr->span) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    q->span = pr->span;
    return 0;
}

/* The descriptor the kernel reads: the same values, with every pointer
 * replaced by the device address of its (registered) host memory; in
 * pr->dview, and with want_copy also in GPU memory (pr->ddesc). */
static int make_device_desc(struct gdaki_pair *pr, int cuda_dev, int want_copy, char *err, size_t errlen)
{
    if (gdaki_cuda_open(cuda_dev, err, errlen) < 0)
        return -1;
    struct gdaki_qp_dev d = *pr->desc;
    uint64_t p;
    if (!(d.flags & GDAKI_QP_FLAG_GPU_QUEUE)) {
        /* Host memory: map ring, records and CQ into the GPU's space.  A
         * GPU queue already has device addresses. */
        size_t sq_bytes = (size_t)pr->dvqp.sq.wqe_cnt * MLX5_SEND_WQE_BB;
        if (map_for_gpu(pr, pr->desc->sq, sq_bytes, 0, &p, err, errlen) < 0)
            return -1;
        d.sq = (uint8_t *)(uintptr_t)p;
        if (map_for_gpu(pr, pr->desc->dbrec, 4, 0, &p, err, errlen) < 0)
            return -1;
        d.dbrec = (uint32_t *)(uintptr_t)p;
        if (map_for_gpu(pr, pr->desc->cq, (size_t)pr->dvcq.cqe_cnt * pr->dvcq.cqe_size, 0, &p, err,
                        errlen) < 0)
            return -1;
        d.cq = (uint8_t *)(uintptr_t)p;
        if (map_for_gpu(pr, pr->desc->cq_dbrec, 8, 0, &p, err, errlen) < 0)
            return -1;
        d.cq_dbrec = (uint32_t *)(uintptr_t)p;
    }
    /* The UAR page is device MMIO on a real NIC: map it as I/O memory so the
     * GPU's stores reach the NIC uncached.  softnic's "UAR" is a plain page,
     * which the driver may refuse as I/O memory: map it as host memory. */
    char why[256];
    if (map_for_gpu(pr, pr->desc->db, 8, 1, &p, why, sizeof(why)) == 0) {
        pr->uar_io = 1;
    } else if (map_for_gpu(pr, pr->desc->db, 8, 0, &p, err, errlen) < 0) {
        size_t l = strlen(err);
        snprintf(err + l, errlen - l, " (as I/O memory: %s)", why);
        return -1;
    }
    d.db = (uint64_t *)(uintptr_t)p;
    if (!want_copy) {
        d.span = NULL; /* no kernel of railnet's posts here */
        pr->dview = d;
        return 0;
    }
    /* the device descriptor's own span table (zeroed) right behind it: the
     * kernel's posts and polls never share the host descriptor's counters */
    size_t span_bytes = (size_t)1 << d.sq_log;
    if (gdaki_cuda_alloc(sizeof(d) + span_bytes, &pr->ddesc, err, errlen) < 0)
        return -1;
    d.span = (uint8_t *)(uintptr_t)(pr->ddesc + sizeof(d));
    pr->dview = d;
    uint8_t *zero = calloc(1, span_bytes);
    if (!zero) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = gdaki_cuda_htod(pr->ddesc + sizeof(d), zero, span_bytes, err, errlen);
    free(zero);
    if (rc < 0)
        return -1;
    return gdaki_cuda_htod(pr->ddesc, &d, sizeof(d), err, errlen);
}

struct gdaki_pair *gdaki_pair_alloc(char *err, size_t errlen)
{
    struct gdaki_pair *pr = calloc(1, sizeof(*pr));
    if (pr) {
        pr->desc = aligned_alloc(128, sizeof(struct gdaki_qp_dev));
        pr->scratch = aligned_alloc(PAGE, PAGE);
    }
    if (!pr || !pr->desc || !pr->scratch) {
        snprintf(err, errlen, "out of memory");
        if (pr) {
            free(pr->desc);
            free(pr->scratch);
            free(pr);
        }
        return NULL;
    }
    memset(pr->desc, 0, sizeof(*pr->desc));
    memset(pr->scratch, 0, PAGE);
    return pr;
}

int gdaki_pair_finish(struct gdaki_pair *pr, int use_cuda, int cuda_dev, char *err, size_t errlen)
{
    pr->cuda_dev = cuda_dev;
    if (!pr->sqp && !pr->devx)
        return 0;
    if (fill_desc(pr, err, errlen) < 0)
        return -1;
    if (use_cuda != GDAKI_FINISH_HOST &&
        make_device_desc(pr, cuda_dev, use_cuda == GDAKI_FINISH_DEVICE_DESC, err, errlen) < 0)
        return -1;
    return 0;
}

int gdaki_pair_open(const struct gdaki_pair_opts *o, struct gdaki_pair **out, char *err,
                    size_t errlen)
{
    *out = NULL;
    struct gdaki_pair *pr = gdaki_pair_alloc(err, errlen);
    if (!pr)
        return -1;
    pr->port = o->port > 0 ? o->port : 1;
    pr->queue_mem = o->queue_mem;
    pr->cuda_dev = o->cuda_dev;
    if (ibvwrap_global_load(o->ibverbs_lib, err, errlen) < 0 ||
        ibvwrap_global_load_mlx5(err, errlen) < 0)
        goto fail;
    pr->v = ibvwrap_global();
    if (open_device(pr, o, pr->queue_mem != GDAKI_QUEUE_MEM_HOST, err, errlen) < 0 ||
        create_qps(pr, o, err, errlen) < 0 ||
        gdaki_pair_finish(pr, o->use_cuda, o->cuda_dev, err, errlen) < 0)
        goto fail;
    *out = pr;
    return 0;
fail:
    gdaki_pair_close(pr);
    return -1;
}

int gdaki_half_open(const struct gdaki_pair_opts *o, enum gdaki_role role, struct gdaki_pair **out,
                    struct gdaki_qp_info *local, char *err, size_t errlen)
{
    *out = NULL;
    if (role != GDAKI_ROLE_SEND && role != GDAKI_ROLE_RECV) {
        snprintf(err, errlen, "gdaki_half_open: role %d is neither send nor recv", (int)role);
        return -1;
    }
    struct gdaki_pair *pr = gdaki_pair_alloc(err, errlen);
    if (!pr)
        return -1;
    pr->port = o->port > 0 ? o->port : 1;
    /* Distinct per QP and process, so a stale packet of an earlier
     * connection is not taken for this one's (not a security property). */
    pr->psn = (uint32_t)(((uintptr_t)pr >> 4) ^ (uint32_t)getpid() * 2654435761u) & 0xffffff;
    if (ibvwrap_global_load(o->ibverbs_lib, err, errlen) < 0 ||
        (role == GDAKI_ROLE_SEND && ibvwrap_global_load_mlx5(err, errlen) < 0))
        goto fail;
    pr->v = ibvwrap_global();
    /* Only the sender's QP has a queue in chosen memory. */
    pr->queue_mem = role == GDAKI_ROLE_SEND ? o->queue_mem : GDAKI_QUEUE_MEM_HOST;
    pr->cuda_dev = o->cuda_dev;
    if (open_device(pr, o, pr->queue_mem != GDAKI_QUEUE_MEM_HOST, err, errlen) < 0)
        goto fail;
    pr->pd = pr->v->alloc_pd(pr->ctx);
    if (!pr->pd) {
        snprintf(err, errlen, "%s: ibv_alloc_pd failed", pr->dev_name);
        goto fail;
    }
    if (role == GDAKI_ROLE_SEND ? gdaki_pair_build_send(pr, o->sq_depth, err, errlen)
                                : gdaki_pair_build_recv(pr, err, errlen))
        goto fail;
    pr->use_cuda = o->use_cuda;
    pr->cuda_dev = o->cuda_dev;
    describe(pr, role == GDAKI_ROLE_SEND ? pr->sqp : pr->rqp, local);  /* sqp NULL: DEVX */
    *out = pr;
    return 0;
fail:
    gdaki_pair_close(pr);
    return -1;
}

int gdaki_half_connect(struct gdaki_pair *pr, const struct gdaki_qp_info *remote, char *err,
                       size_t errlen)
{
    if (remote->magic != GDAKI_QP_INFO_MAGIC || remote->qpn == 0 || remote->qpn > 0xffffff ||
        remote->mtu < IBV_MTU_256 || remote->mtu > IBV_MTU_4096) {
        snprintf(err, errlen, "gdaki_half_connect: not a QP description from gdaki_half_open "
                 "(magic 0x%08x, qpn %u, mtu %u)", remote->magic, remote->qpn, remote->mtu);
        return -1;
    }
    struct ibv_qp *qp = pr->sqp || pr->devx ? pr->sqp : pr->rqp;
    if (qp_to_rts_info(pr, qp, remote, err, errlen) < 0)
        return -1;
    return gdaki_pair_finish(pr, pr->use_cuda, pr->cuda_dev, err, errlen);
}

/* ------------------------------------------------------------ use */

struct gdaki_qp_dev *gdaki_pair_qp_host(struct gdaki_pair *pr)
{
    return pr->desc;
}

struct gdaki_qp_dev *gdaki_pair_qp_device(struct gdaki_pair *pr)
{
    return (struct gdaki_qp_dev *)(uintptr_t)pr->ddesc;
}

int gdaki_pair_reg(struct gdaki_pair *pr, void *addr, size_t len, struct gdaki_mr *out,
                   char *err, size_t errlen)
{
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                 (pr->atomics ? IBV_ACCESS_REMOTE_ATOMIC : 0);
    struct ibv_mr *mr = ibvwrap_reg_mr(pr->v, pr->pd, addr, len, access, NULL);
    if (!mr) {
        snprintf(err, errlen, "%s: ibv_reg_mr(%p, %zu) failed: %s", pr->dev_name, addr, len,
                 strerror(errno));
        return -1;
    }
    out->addr = (uint64_t)(uintptr_t)addr;
    out->len = len;
    out->lkey = mr->lkey;
    out->rkey = mr->rkey;
    out->ibv_mr = mr;
    return 0;
}

void gdaki_pair_dereg(struct gdaki_pair *pr, struct gdaki_mr *mr)
{
    if (mr && mr->ibv_mr) {
        pr->v->dereg_mr(mr->ibv_mr);
        mr->ibv_mr = NULL;
    }
}

int gdaki_pair_send_qp_state(struct gdaki_pair *pr)
{
    if (pr->devx)
        return gdaki_devx_state(pr);
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;
    if (pr->v->query_qp(pr->sqp, &a, IBV_QP_STATE, &ia) != 0)
        return -1;
    return a.qp_state;
}

int gdaki_pair_send_qp_fail(struct gdaki_pair *pr)
{
    if (pr->devx)
        return gdaki_devx_fail(pr);
    if (!pr->sqp)
        return -1;
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
    return pr->v->modify_qp(pr->sqp, &a, IBV_QP_STATE) == 0 ? 0 : -1;
}

int gdaki_pair_post_recv(struct gdaki_pair *pr, int n)
{
    for (int i = 0; i < n; i++) {
        /* WRITE_WITH_IMM consumes a receive but places no data through it. */
        struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = NULL, .num_sge = 0 };
        struct ibv_recv_wr *bad;
        if (ibv_post_recv(pr->rqp, &wr, &bad) != 0)
            return -1;
    }
    return 0;
}

int gdaki_pair_poll_recv(struct gdaki_pair *pr, uint32_t *imm, int max)
{
    int got = 0;
    struct ibv_wc wc[16];
    int n;
    while ((n = ibv_poll_cq(pr->rcq, 16, wc)) > 0) {
        for (int i = 0; i < n; i++) {
            if (wc[i].status != IBV_WC_SUCCESS)
                return -1;
            if (wc[i].opcode != IBV_WC_RECV_RDMA_WITH_IMM)
                continue;
            if (got < max && imm)
                imm[got] = be32toh(wc[i].imm_data);
            got++;
        }
    }
    return n < 0 ? -1 : got;
}

/* n work requests of `op` between local (this side's sge) and remote,
 * posted on the recv QP, at most window in flight, all signaled */
static int cpu_loop(struct gdaki_pair *pr, enum ibv_wr_opcode op, const struct gdaki_mr *local,
                    const struct gdaki_mr *remote, size_t size, int n, int window, char *err,
                    size_t errlen)
{
    if (window < 1 || window > GDAKI_PAIR_RECV_DEPTH)
        window = GDAKI_PAIR_RECV_DEPTH;
    int posted = 0, done = 0;
    while (done < n) {
        while (posted < n && posted - done < window) {
            struct ibv_sge sge = { .addr = local->addr, .length = (uint32_t)size, .lkey = local->lkey };
            struct ibv_send_wr wr, *bad;
            memset(&wr, 0, sizeof(wr));
            wr.wr_id = (uint64_t)posted;
            wr.opcode = op;
            wr.send_flags = IBV_SEND_SIGNALED;
            wr.sg_list = &sge;
            wr.num_sge = 1;
            wr.wr.rdma.remote_addr = remote->addr;
            wr.wr.rdma.rkey = remote->rkey;
            int rc = ibv_post_send(pr->rqp, &wr, &bad);
            if (rc) {
                snprintf(err, errlen, "ibv_post_send: %s", strerror(rc));
                return -1;
            }
            posted++;
        }
        struct ibv_wc wc[16];
        int k = ibv_poll_cq(pr->cpu_cq, 16, wc);
        if (k < 0) {
            snprintf(err, errlen, "ibv_poll_cq failed");
            return -1;
        }
        for (int i = 0; i < k; i++) {
            if (wc[i].status != IBV_WC_SUCCESS) {
                snprintf(err, errlen, "%s %llu completed with %s", op == IBV_WR_RDMA_READ ? "read" : "write",
                         (unsigned long long)wc[i].wr_id, pr->v->wc_status_str(wc[i].status));
                return -1;
            }
        }
        done += k;
    }
    return 0;
}

int gdaki_pair_cpu_write_loop(struct gdaki_pair *pr, const struct gdaki_mr *src,
                              const struct gdaki_mr *dst, size_t size, int n, int window,
                              char *err, size_t errlen)
{
    return cpu_loop(pr, IBV_WR_RDMA_WRITE, src, dst, size, n, window, err, errlen);
}

int gdaki_pair_cpu_read(struct gdaki_pair *pr, const struct gdaki_mr *src, const struct gdaki_mr *dst,
                        size_t size, char *err, size_t errlen)
{
    return cpu_loop(pr, IBV_WR_RDMA_READ, dst, src, size, 1, 1, err, errlen);
}

void gdaki_pair_get_info(struct gdaki_pair *pr, struct gdaki_pair_info *info)
{
    memset(info, 0, sizeof(*info));
    snprintf(info->dev_name, sizeof(info->dev_name), "%s", pr->dev_name);
    info->port = pr->port;
    info->gid_index = pr->gid_index;
    info->link_layer = pr->port_attr.link_layer;
    info->send_qpn = gdaki_pair_send_qpn(pr);
    info->recv_qpn = pr->rqp ? pr->rqp->qp_num : 0;
    info->sq_slots = pr->dvqp.sq.wqe_cnt;
    info->cq_entries = pr->dvcq.cqe_cnt;
    info->cqe_size = pr->dvcq.cqe_size;
    info->atomics = pr->atomics;
    info->uar_io_registered = pr->uar_io;
    info->ibverbs_path = pr->v ? pr->v->path : NULL;
    info->mlx5_path = pr->v ? pr->v->mlx5_path : NULL;
    info->queue_mem = pr->queue_mem;
}

void gdaki_pair_close(struct gdaki_pair *pr)
{
    if (!pr)
        return;
    gdaki_cuda_free(pr->ddesc);
    for (int i = pr->nregs - 1; i >= 0; i--)
        if (pr->regs[i].owned)
            gdaki_cuda_host_unregister(pr->regs[i].addr);
    if (pr->v) {
        gdaki_devx_destroy(pr);
        if (pr->sqp)
            pr->v->destroy_qp(pr->sqp);
        if (pr->rqp)
            pr->v->destroy_qp(pr->rqp);
        if (pr->scratch_mr)
            pr->v->dereg_mr(pr->scratch_mr);
        if (pr->scq)
            pr->v->destroy_cq(pr->scq);
        if (pr->rcq)
            pr->v->destroy_cq(pr->rcq);
        if (pr->cpu_cq)
            pr->v->destroy_cq(pr->cpu_cq);
        if (pr->pd && !pr->borrowed)
            pr->v->dealloc_pd(pr->pd);
        if (pr->ctx && !pr->borrowed)
            pr->v->close_device(pr->ctx);
    }
    free(pr->desc);
    free(pr->span);
    free(pr->scratch);
    free(pr);
}
