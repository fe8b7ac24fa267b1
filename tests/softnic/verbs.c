/* verbs.c: the exported face of softnic's libibverbs.so.1.  Thin: each verb
 * checks its arguments' presence and forwards to the module that owns the
 * object.  Symbol versions come from libibverbs.map (rdma-core's nodes).
 * Verbs that softnic does not implement (UD QPs, multicast,
 * memory windows, import/export, ECE) fail cleanly with EOPNOTSUPP. */
#include "softnic.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The inline wrappers of verbs.h are macros over these names. */
#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define EXPORT __attribute__((visibility("default")))

/* modules' entry points (declared here: only this file calls them) */
struct ibv_context *device_open(struct ibv_device *ibdev);
int device_close(struct ibv_context *c);
int async_pop(struct sn_context *ctx, struct ibv_async_event *out);
struct ibv_pd *pd_alloc(struct ibv_context *c);
int pd_dealloc(struct ibv_pd *pd);
struct ibv_mr *mr_reg_iova2(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
                            unsigned int access);
struct ibv_mr *mr_reg_dmabuf(struct ibv_pd *pd, uint64_t offset, size_t len, uint64_t iova,
                             int fd, int access);
int mr_dereg(struct ibv_mr *mr);
int mr_rereg_input(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t len,
                   int access);
int mr_rereg(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t len,
             int access);
struct ibv_comp_channel *cq_channel_create(struct ibv_context *c);
int cq_channel_destroy(struct ibv_comp_channel *ch);
int cq_get_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context);
void cq_ack_events(struct ibv_cq *cq, unsigned int n);
struct ibv_cq *cq_create(struct ibv_context *c, int cqe, void *cq_context,
                         struct ibv_comp_channel *channel, int comp_vector);
int cq_destroy(struct ibv_cq *cq);
int cq_resize(struct ibv_cq *cq, int cqe);
int cq_poll(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int cq_req_notify(struct ibv_cq *cq, int solicited_only);
struct ibv_srq *srq_create(struct ibv_pd *pd, struct ibv_srq_init_attr *ia);
int srq_destroy(struct ibv_srq *srq);
int srq_modify(struct ibv_srq *srq, struct ibv_srq_attr *a, int mask);
int srq_query(struct ibv_srq *srq, struct ibv_srq_attr *a);
int srq_post_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
struct ibv_qp *qp_create(struct ibv_pd *pd, struct ibv_qp_init_attr *ia);
struct ibv_qp *qp_create_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *ia);
int qp_destroy(struct ibv_qp *qp);
int qp_modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask);
int qp_query(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask, struct ibv_qp_init_attr *ia);
int qp_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);

/* ---------------------------------------------------------- ops tables */
static int ops_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    return qp_post_send(qp, wr, bad);
}

const struct ibv_context_ops sn_context_ops = {
    .poll_cq = cq_poll,
    .req_notify_cq = cq_req_notify,
    .post_srq_recv = srq_post_recv,
    .post_send = ops_post_send,
    .post_recv = qp_post_recv,
};

static int vctx_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a,
                           size_t len)
{
    return device_query_port(c, port, a, len);
}

void verbs_fill_vctx(struct verbs_context *v)
{
    v->query_port = vctx_query_port;
    v->query_device_ex = device_query_device_ex;
    v->create_qp_ex = qp_create_ex;
    v->create_cq_ex = cq_create_ex;
}

/* -------------------------------------------------------------- devices */
EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
    struct softnic *s = softnic_global();
    struct ibv_device **list = calloc((size_t)s->ndevs + 1, sizeof(*list));
    if (!list) {
        errno = ENOMEM;
        return NULL;
    }
    for (int i = 0; i < s->ndevs; i++)
        list[i] = &s->dev[i].ibdev;
    if (num)
        *num = s->ndevs;
    return list;
}

EXPORT void ibv_free_device_list(struct ibv_device **list) { free(list); }

EXPORT const char *ibv_get_device_name(struct ibv_device *d) { return d ? d->name : NULL; }

EXPORT __be64 ibv_get_device_guid(struct ibv_device *d)
{
    return ((struct sn_device *)d)->guid;
}

EXPORT int ibv_get_device_index(struct ibv_device *d)
{
    return ((struct sn_device *)d)->index;
}

EXPORT struct ibv_context *ibv_open_device(struct ibv_device *d) { return device_open(d); }
EXPORT int ibv_close_device(struct ibv_context *c) { return device_close(c); }

EXPORT int ibv_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
    return device_query_device(c, a);
}

EXPORT int ibv_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *a)
{
    /* old binaries pass a struct that ends before flags */
    return device_query_port(c, port, (struct ibv_port_attr *)a,
                             offsetof(struct ibv_port_attr, flags));
}

EXPORT int ibv_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid)
{
    struct sn_port *p = sn_port_get(sn_device_of(c), port);
    if (!p || index != 0) {
        errno = EINVAL;
        return -1;
    }
    *gid = p->gid;
    return 0;
}

EXPORT int _ibv_query_gid_ex(struct ibv_context *c, uint32_t port, uint32_t index,
                             struct ibv_gid_entry *e, uint32_t flags, size_t entry_size)
{
    struct sn_port *p = port <= 255 ? sn_port_get(sn_device_of(c), (int)port) : NULL;
    if (!p || flags || entry_size < sizeof(*e))
        return EINVAL;
    if (index != 0)
        return ENODATA;
    memset(e, 0, entry_size);
    e->gid = p->gid;
    e->gid_index = 0;
    e->port_num = port;
    e->gid_type = IBV_GID_TYPE_ROCE_V2;
    e->ndev_ifindex = 1;   /* lo */
    return 0;
}

EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *c, struct ibv_gid_entry *e,
                                    size_t max, uint32_t flags, size_t entry_size)
{
    struct sn_device *d = sn_device_of(c);
    if (flags || entry_size < sizeof(*e))
        return -EINVAL;
    if (max < (size_t)d->nports)
        return -EINVAL;
    for (int p = 0; p < d->nports; p++)
        _ibv_query_gid_ex(c, (uint32_t)p + 1, 0,
                          (struct ibv_gid_entry *)((char *)e + entry_size * (size_t)p), 0,
                          entry_size);
    return d->nports;
}

/* rdma-core's private enum ibv_gid_type_sysfs: 0 IB/RoCE v1, 1 RoCE v2 */
EXPORT int ibv_query_gid_type(struct ibv_context *c, uint8_t port, unsigned int index,
                              int *type)
{
    if (!sn_port_get(sn_device_of(c), port) || index != 0) {
        errno = EINVAL;
        return -1;
    }
    *type = 1;
    return 0;
}

EXPORT int ibv_query_pkey(struct ibv_context *c, uint8_t port, int index, __be16 *pkey)
{
    if (!sn_port_get(sn_device_of(c), port) || index != 0) {
        errno = EINVAL;
        return -1;
    }
    *pkey = htobe16(0xffff);
    return 0;
}

EXPORT int ibv_get_pkey_index(struct ibv_context *c, uint8_t port, __be16 pkey)
{
    if (!sn_port_get(sn_device_of(c), port) || be16toh(pkey) != 0xffff)
        return -1;
    return 0;
}

/* ------------------------------------------------------------ async */
EXPORT int ibv_get_async_event(struct ibv_context *c, struct ibv_async_event *ev)
{
    struct sn_context *ctx = sn_ctx(c);
    char b;
    ssize_t n;
    do
        n = read(c->async_fd, &b, 1);
    while (n < 0 && errno == EINTR);
    if (n != 1)
        return -1;
    if (async_pop(ctx, ev)) {
        errno = EAGAIN;
        return -1;
    }
    return 0;
}

EXPORT void ibv_ack_async_event(struct ibv_async_event *ev) { (void)ev; }

/* ------------------------------------------------------------ PD / MR */
EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *c) { return pd_alloc(c); }
EXPORT int ibv_dealloc_pd(struct ibv_pd *pd) { return pd_dealloc(pd); }

EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
    return mr_reg_iova2(pd, addr, len, (uint64_t)(uintptr_t)addr, (unsigned int)access);
}

EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
                                      int access)
{
    return mr_reg_iova2(pd, addr, len, iova, (unsigned int)access);
}

EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
                                       unsigned int access)
{
    return mr_reg_iova2(pd, addr, len, iova, access);
}

EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t len,
                                        uint64_t iova, int fd, int access)
{
    return mr_reg_dmabuf(pd, offset, len, iova, fd, access);
}

EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
                        size_t len, int access)
{
    int err = mr_rereg_input(mr, flags, pd, addr, len, access);
    if (err) {
        errno = err;
        return IBV_REREG_MR_ERR_INPUT;
    }
    err = mr_rereg(mr, flags, pd, addr, len, access);
    if (!err)
        return 0;
    /* refused where a ConnectX's kernel refuses; the MR is unchanged */
    errno = err;
    return IBV_REREG_MR_ERR_CMD;
}

EXPORT int ibv_dereg_mr(struct ibv_mr *mr) { return mr_dereg(mr); }

/* ------------------------------------------------------------ CQ */
EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *c)
{
    return cq_channel_create(c);
}

EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *ch)
{
    return cq_channel_destroy(ch);
}

EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *cq_context,
                                    struct ibv_comp_channel *ch, int comp_vector)
{
    return cq_create(c, cqe, cq_context, ch, comp_vector);
}

EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe) { return cq_resize(cq, cqe); }
EXPORT int ibv_destroy_cq(struct ibv_cq *cq) { return cq_destroy(cq); }

EXPORT int ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **ctx)
{
    return cq_get_event(ch, cq, ctx);
}

EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int n) { cq_ack_events(cq, n); }

/* ------------------------------------------------------------ SRQ */
EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a)
{
    return srq_create(pd, a);
}

EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *a, int mask)
{
    return srq_modify(srq, a, mask);
}

EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *a) { return srq_query(srq, a); }
EXPORT int ibv_destroy_srq(struct ibv_srq *srq) { return srq_destroy(srq); }

/* ------------------------------------------------------------ QP */
EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
    return qp_create(pd, a);
}

EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
    return qp_modify(qp, a, mask);
}

EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask,
                        struct ibv_qp_init_attr *ia)
{
    return qp_query(qp, a, mask, ia);
}

EXPORT int ibv_destroy_qp(struct ibv_qp *qp) { return qp_destroy(qp); }

/* The extended face of a QP created with send ops flags (qp_ex.c); NULL
 * for any other QP, as in rdma-core. */
EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
    struct sn_qp *q = qp ? sn_qp_of(qp) : NULL;
    if (!q || !q->ex) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    return &q->ibqp_ex;
}

EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
    (void)qp, (void)op, (void)flags;
    return 0;   /* no promise beyond what the verbs contract gives */
}

EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
    (void)qp, (void)ece;
    return EOPNOTSUPP;
}

EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
    (void)qp, (void)ece;
    return EOPNOTSUPP;
}

/* -------------------------------------------------------- address handles */
/* Address handles, for UD sends (ud.c) and for mlx5 programs that create
 * one to learn a route (mlx5dv_init_obj AH, the remote MAC of a DEVX QP).
 * On RoCE ports, as on a ConnectX, the GRH is required. */
EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *a)
{
    if (!pd || !a) {
        errno = EINVAL;
        return NULL;
    }
    struct sn_port *p = sn_port_get(sn_device_of(pd->context), a->port_num);
    if (!p || !a->is_global || a->grh.sgid_index != 0) {
        errno = EINVAL;
        return NULL;
    }
    struct sn_ah *ah = calloc(1, sizeof(*ah));
    if (!ah) {
        errno = ENOMEM;
        return NULL;
    }
    ah->attr = *a;
    ah->ibah.context = pd->context;
    ah->ibah.pd = pd;
    pd_use(pd, 1);
    return &ah->ibah;
}

EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
    if (!ah)
        return EINVAL;
    pd_use(ah->pd, -1);
    free((struct sn_ah *)ah);
    return 0;
}

EXPORT int ibv_init_ah_from_wc(struct ibv_context *c, uint8_t port, struct ibv_wc *wc,
                               struct ibv_grh *grh, struct ibv_ah_attr *a)
{
    int err = (!c || !wc || !grh || !a || !sn_port_get(sn_device_of(c), port))
                  ? EINVAL : ud_ah_attr_from_grh(port, wc, grh, a);
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
                                            struct ibv_grh *grh, uint8_t port)
{
    struct ibv_ah_attr a;
    if (!pd || ibv_init_ah_from_wc(pd->context, port, wc, grh, &a))
        return (errno = pd ? errno : EINVAL), NULL;
    return ibv_create_ah(pd, &a);
}

/* ------------------------------------------------------------ unsupported */
/* Multicast: UD QPs are unicast only. */
EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
    (void)qp, (void)gid, (void)lid;
    return EOPNOTSUPP;
}

EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
    (void)qp, (void)gid, (void)lid;
    return EOPNOTSUPP;
}

EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *c, struct ibv_ah_attr *a,
                                       uint8_t eth_mac[6], uint16_t *vid)
{
    (void)c, (void)a, (void)eth_mac, (void)vid;
    return EOPNOTSUPP;
}

EXPORT struct ibv_context *ibv_import_device(int fd)
{
    (void)fd;
    errno = EOPNOTSUPP;
    return NULL;
}

EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *c, uint32_t h)
{
    (void)c, (void)h;
    errno = EOPNOTSUPP;
    return NULL;
}

EXPORT void ibv_unimport_pd(struct ibv_pd *pd) { (void)pd; }

EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t h)
{
    (void)pd, (void)h;
    errno = EOPNOTSUPP;
    return NULL;
}

EXPORT void ibv_unimport_mr(struct ibv_mr *mr) { (void)mr; }

EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *c, uint32_t h)
{
    (void)c, (void)h;
    errno = EOPNOTSUPP;
    return NULL;
}

EXPORT void ibv_unimport_dm(struct ibv_dm *dm) { (void)dm; }

/* ------------------------------------------------------------ fork */
EXPORT int ibv_fork_init(void) { return 0; }
EXPORT enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }

EXPORT int ibv_dontfork_range(void *base, size_t size)
{
    (void)base, (void)size;
    return 0;
}

EXPORT int ibv_dofork_range(void *base, size_t size)
{
    (void)base, (void)size;
    return 0;
}

/* ------------------------------------------------------------ sysfs */
EXPORT const char *ibv_get_sysfs_path(void)
{
    struct softnic *s = softnic_global();
    return s->conf.sysfs_dir[0] ? s->conf.sysfs_dir : "/sys";
}

static int read_file(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, size);
    close(fd);
    if (n < 0)
        return -1;
    if ((size_t)n == size)
        n--;
    buf[n] = '\0';
    if (n > 0 && buf[n - 1] == '\n')
        buf[--n] = '\0';
    return (int)n;
}

EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
    char path[1024];
    if (!size)
        return -1;
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    return read_file(path, buf, size);
}

EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size, void *dev,
                                     const char *fmt, ...)
{
    /* dev is rdma-core's private type: only softnic's own devices exist */
    (void)dev;
    char rel[512], path[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof(rel), fmt, ap);
    va_end(ap);
    struct softnic *s = softnic_global();
    if (!size || s->ndevs == 0)
        return -1;
    snprintf(path, sizeof(path), "%s/%s", s->dev[0].ibdev.ibdev_path, rel);
    return read_file(path, buf, size);
}

/* kernel-struct converters: there is no kernel ABI under softnic */
EXPORT void ibv_copy_qp_attr_from_kern(void *dst, void *src) { (void)dst, (void)src; }
EXPORT void ibv_copy_ah_attr_from_kern(void *dst, void *src) { (void)dst, (void)src; }
EXPORT void ibv_copy_path_rec_from_kern(void *dst, void *src) { (void)dst, (void)src; }
EXPORT void ibv_copy_path_rec_to_kern(void *dst, void *src) { (void)dst, (void)src; }
