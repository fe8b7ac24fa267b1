/* device.c: softnic's devices and ports: the global state built from the
 * configuration, device open/close, and the query verbs.
 *
 * Every port is RoCE v2 over IPv4: GID index 0 holds ::ffff:<port ip>,
 * the only GID; PKey table of one entry 0xffff; node_guid is one value per
 * device, derived from the device name and its first port address so that
 * every process on a "host" sees the same GUID for the same device. */
#include "softnic.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct softnic g_softnic;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

void sn_log(const char *file, int line, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    fprintf(stderr, "softnic[%d] %s:%d: %s\n", (int)getpid(), base ? base + 1 : file, line, buf);
}

static uint64_t device_guid(const struct sn_dev_conf *dc)
{
    /* FNV-1a over name and first address: stable across processes. */
    uint64_t h = 1469598103934665603ull;
    for (const char *s = dc->name; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    for (const char *s = dc->port[0].ip; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    /* locally administered EUI-64-looking value */
    uint64_t guid = 0x02c9000000000000ull | (h & 0x0000ffffffffffffull);
    return htobe64(guid);
}

static void global_init(void)
{
    struct softnic *s = &g_softnic;
    s->init_err = config_load(&s->conf);
    s->ndevs = s->conf.ndevs;
    for (int i = 0; i < s->ndevs; i++) {
        struct sn_device *d = &s->dev[i];
        const struct sn_dev_conf *dc = &s->conf.dev[i];
        d->index = i;
        d->nports = dc->nports;
        d->guid = device_guid(dc);
        pthread_mutex_init(&d->lock, NULL);
        d->ibdev.node_type = IBV_NODE_CA;
        d->ibdev.transport_type = IBV_TRANSPORT_IB;
        snprintf(d->ibdev.name, sizeof(d->ibdev.name), "%s", dc->name);
        snprintf(d->ibdev.dev_name, sizeof(d->ibdev.dev_name), "uverbs%d", i);
        const char *root = s->conf.sysfs_dir[0] ? s->conf.sysfs_dir : "/sys";
        snprintf(d->ibdev.dev_path, sizeof(d->ibdev.dev_path),
                 "%.200s/class/infiniband_verbs/uverbs%d", root, i);
        snprintf(d->ibdev.ibdev_path, sizeof(d->ibdev.ibdev_path),
                 "%.180s/class/infiniband/%.40s", root, dc->name);
        for (int p = 0; p < d->nports; p++) {
            struct sn_port *port = &d->port[p];
            port->num = p + 1;
            port->conf = dc->port[p];
            inet_aton(port->conf.ip, &port->addr);
            memset(&port->gid, 0, sizeof(port->gid));
            port->gid.raw[10] = 0xff;
            port->gid.raw[11] = 0xff;
            memcpy(&port->gid.raw[12], &port->addr, 4);
            atomic_store(&port->state, IBV_PORT_ACTIVE);
            rate_init(&port->tx_rate, port->conf.rate);
            uint64_t base = port->conf.rate ? port->conf.rate : s->conf.vf_base_rate;
            rate_init(&port->vf_rate, base * 84 / 400);
            port->up_since_ns = sn_now_ns();
        }
    }
    if (s->conf.sysfs_dir[0])
        sysfs_write_tree(s);
}

struct softnic *softnic_global(void)
{
    pthread_once(&g_once, global_init);
    return &g_softnic;
}

struct sn_device *sn_device_of(struct ibv_context *c)
{
    return sn_ctx(c)->dev;
}

struct sn_port *sn_port_get(struct sn_device *d, int port_num)
{
    if (port_num < 1 || port_num > d->nports)
        return NULL;
    return &d->port[port_num - 1];
}

void device_port_set_state(struct sn_device *d, int port_num, bool up)
{
    struct sn_port *p = sn_port_get(d, port_num);
    if (!p)
        return;
    int want = up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
    int old = atomic_exchange(&p->state, want);
    if (old == want)
        return;
    if (up)
        p->up_since_ns = sn_now_ns();
    push_port_update(d, p);   /* same-host pushers see it at once */
    struct ibv_async_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.element.port_num = port_num;
    ev.event_type = up ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR;
    async_post_dev(d, &ev);
}

void device_set_fatal(struct sn_device *d)
{
    struct ibv_async_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.element.port_num = 0;
    ev.event_type = IBV_EVENT_DEVICE_FATAL;
    async_post_dev(d, &ev);
    for (int p = 1; sn_port_get(d, p); p++) {
        atomic_store(&sn_port_get(d, p)->state, IBV_PORT_DOWN);
        push_port_update(d, sn_port_get(d, p));
    }
}

int device_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
    struct sn_device *d = sn_device_of(c);
    memset(a, 0, sizeof(*a));
    snprintf(a->fw_ver, sizeof(a->fw_ver), "1.0.0");
    a->node_guid = d->guid;
    a->sys_image_guid = d->guid;
    a->max_mr_size = (uint64_t)1 << 48;
    a->page_size_cap = 0xfffff000;
    a->vendor_id = 0x1de5;          /* not a real vendor: no quirks apply */
    a->vendor_part_id = 0x5001;
    a->hw_ver = 1;
    a->max_qp = SN_QP_PER_BLOCK * SN_MAX_BLOCKS;
    a->max_qp_wr = SN_MAX_QP_WR;
    a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE |
                          IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_CURR_QP_STATE_MOD;
    a->max_sge = SN_MAX_SGE;
    a->max_sge_rd = SN_MAX_SGE;
    a->max_cq = 65536;
    a->max_cqe = SN_MAX_CQE;
    a->max_mr = 65536;
    a->max_pd = 65536;
    a->max_qp_rd_atom = SN_MAX_RD_ATOMIC;
    a->max_res_rd_atom = SN_MAX_RD_ATOMIC * a->max_qp;
    a->max_qp_init_rd_atom = SN_MAX_RD_ATOMIC;
    a->atomic_cap = IBV_ATOMIC_HCA;   /* atomic.c: one atomic unit for all QPs */
    a->max_srq = 65536;
    a->max_srq_wr = SN_MAX_QP_WR;
    a->max_srq_sge = SN_MAX_SGE;
    a->max_pkeys = 1;
    a->local_ca_ack_delay = 15;
    a->phys_port_cnt = (uint8_t)d->nports;
    return 0;
}

int device_query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in,
                           struct ibv_device_attr_ex *a, size_t sz)
{
    if (in && in->comp_mask)
        return EINVAL;
    if (sz < sizeof(a->orig_attr))
        return EINVAL;
    memset(a, 0, sz);
    device_query_device(c, &a->orig_attr);
    if (sz >= offsetof(struct ibv_device_attr_ex, phys_port_cnt_ex) + sizeof(uint32_t))
        a->phys_port_cnt_ex = a->orig_attr.phys_port_cnt;
    return 0;
}

int device_query_port(struct ibv_context *c, uint8_t port_num, struct ibv_port_attr *attr,
                      size_t len)
{
    struct sn_device *d = sn_device_of(c);
    struct sn_port *p = sn_port_get(d, port_num);
    struct ibv_port_attr a;
    if (!p)
        return EINVAL;
    fault_poll();
    memset(&a, 0, sizeof(a));
    bool up = atomic_load(&p->state) == IBV_PORT_ACTIVE;
    a.state = up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
    a.max_mtu = IBV_MTU_4096;
    a.active_mtu = p->conf.mtu;
    a.gid_tbl_len = 1;
    a.port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
    a.max_msg_sz = SN_MAX_MSG;
    a.pkey_tbl_len = 1;
    a.max_vl_num = 1;
    link_of_port(&softnic_global()->conf, p, &a.active_width, &a.active_speed);
    a.phys_state = up ? 5 : 3;       /* LinkUp / Disabled */
    a.link_layer = IBV_LINK_LAYER_ETHERNET;
    if (len > sizeof(a)) {
        memset(attr, 0, len);
        len = sizeof(a);
    }
    memcpy(attr, &a, len);
    return 0;
}

/* Exported face of the device verbs lives in verbs.c; the context
 * constructor is here because it knows the layout. */
struct ibv_context *device_open(struct ibv_device *ibdev);
int device_close(struct ibv_context *c);
extern const struct ibv_context_ops sn_context_ops;
void verbs_fill_vctx(struct verbs_context *v);

struct ibv_context *device_open(struct ibv_device *ibdev)
{
    struct softnic *s = softnic_global();
    struct sn_device *d = NULL;
    for (int i = 0; i < s->ndevs; i++)
        if (&s->dev[i].ibdev == ibdev)
            d = &s->dev[i];
    if (!d) {
        errno = ENODEV;
        return NULL;
    }
    int err = wire_start();
    if (err) {
        errno = err;
        return NULL;
    }
    struct sn_context *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) {
        errno = ENOMEM;
        return NULL;
    }
    if (pipe2(ctx->async_pipe, O_CLOEXEC)) {
        err = errno;
        free(ctx);
        errno = err;
        return NULL;
    }
    pthread_mutex_init(&ctx->ev_lock, NULL);
    ctx->dev = d;
    struct ibv_context *c = &ctx->vctx.context;
    ctx->vctx.sz = sizeof(struct verbs_context);
    verbs_fill_vctx(&ctx->vctx);
    c->device = ibdev;
    c->ops = sn_context_ops;
    c->cmd_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    c->async_fd = ctx->async_pipe[0];
    c->num_comp_vectors = 1;
    pthread_mutex_init(&c->mutex, NULL);
    c->abi_compat = __VERBS_ABI_IS_EXTENDED;
    pthread_mutex_lock(&d->lock);
    ctx->next = d->ctxs;
    d->ctxs = ctx;
    pthread_mutex_unlock(&d->lock);
    return c;
}

int device_close(struct ibv_context *c)
{
    struct sn_context *ctx = sn_ctx(c);
    struct sn_device *d = ctx->dev;
    pthread_mutex_lock(&d->lock);
    for (struct sn_context **pp = &d->ctxs; *pp; pp = &(*pp)->next)
        if (*pp == ctx) {
            *pp = ctx->next;
            break;
        }
    pthread_mutex_unlock(&d->lock);
    while (ctx->ev_head) {
        struct sn_async *e = ctx->ev_head;
        ctx->ev_head = e->next;
        free(e);
    }
    close(ctx->async_pipe[0]);
    close(ctx->async_pipe[1]);
    if (c->cmd_fd >= 0)
        close(c->cmd_fd);
    pthread_mutex_destroy(&c->mutex);
    pthread_mutex_destroy(&ctx->ev_lock);
    free(ctx);
    return 0;
}
