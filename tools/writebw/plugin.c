/* tools/writebw/plugin.c: --mode=plugin. The data moves through railnet's
 * ncclNet_v8_t table exactly as NCCL's proxy would drive it: listen/connect/
 * accept (non-blocking, called again until done), regMr/regMrDmaBuf, then a
 * window of isend on the sending side and irecv on the receiving side, each
 * request polled with test(). The client sends, the server receives; with
 * --bidir each side has one comm of each kind.
 *
 * End of a size: in -n mode both sides know the count. In -D mode the sender
 * stops sending data at the deadline and sends empty messages instead; the
 * receiver stops posting receives at the first empty one and tells the
 * sender over TCP how many it posted in all (STOPPED), and the sender sends
 * empty messages until every one of those receives is matched. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/bw.h"
#include "../common/cuda_dl.h"
#include "../common/strfmt.h"
#include "modes.h"
#include "plugin_ctx.h"
#include "tcp.h"

static int pick_device(struct plugin_ctx *c, char *err, size_t errlen)
{
    const struct wb_opts *o = c->s->o;
    int n = 0;
    NET_CHECK(c->net->init(plugin_logger), "init");
    NET_CHECK(c->net->devices(&n), "devices");
    if (n <= 0) {
        str_fmt(err, errlen, "plugin %s reports no device (no RDMA NIC, or libibverbs not found: "
                "see its warnings above)", c->lib.path);
        return -1;
    }
    for (int d = 0; d < n; d++) {
        NET_CHECK(c->net->getProperties(d, &c->props), "getProperties");
        if (!o->dev) {
            c->dev = d;
            return 0;
        }
        const char *name = c->props.name ? c->props.name : "";
        size_t l = strlen(o->dev);
        if (!strcmp(name, o->dev) || (!strncmp(name, o->dev, l) && name[l] == ':')) {
            c->dev = d;
            return 0;
        }
    }
    str_fmt(err, errlen, "plugin has no device named %s (%d device(s))", o->dev, n);
    return -1;
}

static int alloc_buffer(struct plugin_ctx *c, char *err, size_t errlen)
{
    const struct wb_opts *o = c->s->o;
    for (int i = 0; i < o->nsizes; i++)
        if (o->sizes[i] > c->len)
            c->len = o->sizes[i];
    if (!o->use_cuda) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        c->len = (c->len + page - 1) / page * page;
        if (posix_memalign(&c->buf, page, c->len)) {
            c->buf = NULL;
            str_fmt(err, errlen, "cannot allocate %zu bytes", c->len);
            return -1;
        }
        memset(c->buf, 0x5a, c->len);
        return 0;
    }
    if (!(c->props.ptrSupport & NCCL_PTR_CUDA)) {
        str_fmt(err, errlen, "plugin device %s does not support CUDA memory (ptrSupport 0x%x)",
                c->props.name, c->props.ptrSupport);
        return -1;
    }
    char cerr[256];
    c->cuda = cuda_dl_open(cerr, sizeof(cerr));
    if (!c->cuda) {
        str_fmt(err, errlen, "--use_cuda: %s", cerr);
        return -1;
    }
    if (o->cuda_vmm && cuda_dl_use_vmm(c->cuda, cerr, sizeof(cerr))) {
        str_fmt(err, errlen, "--cuda_vmm: %s", cerr);
        return -1;
    }
    c->len = (c->len + (2u << 20) - 1) / (2u << 20) * (2u << 20);
    if (cuda_dl_alloc(c->cuda, o->gpu, c->len, &c->buf, err, errlen))
        return -1;
    c->cuda_mem = 1;
    return cuda_dl_memset(c->cuda, c->buf, 0x5a, c->len);
}

/* Register on one comm: host memory with regMr; GPU memory with regMrDmaBuf
 * when allowed and offered (--peermem forces regMr on the CUDA pointer). */
static int reg(struct plugin_ctx *c, struct pcomm *pc, char *err, size_t errlen)
{
    const struct wb_opts *o = c->s->o;
    if (!c->cuda_mem) {
        str_fmt(c->reg_path, sizeof(c->reg_path), "regMr(host)");
        NET_CHECK(c->net->regMr(pc->comm, c->buf, c->len, NCCL_PTR_HOST, &pc->mh), "regMr(host)");
        return 0;
    }
    int dmabuf_ok = (c->props.ptrSupport & NCCL_PTR_DMABUF) && c->net->regMrDmaBuf;
    if (o->reg == MEM_REG_DMABUF && !dmabuf_ok) {
        str_fmt(err, errlen, "--dmabuf: plugin device %s does not offer dmabuf registration "
                "(ptrSupport 0x%x)", c->props.name, c->props.ptrSupport);
        return -1;
    }
    if (o->reg != MEM_REG_PEERMEM && dmabuf_ok) {
        int fd = -1;
        char why[256];
        if (!cuda_dl_dmabuf_fd(c->cuda, c->buf, c->len, &fd, why, sizeof(why))) {
            ncclResult_t r = c->net->regMrDmaBuf(pc->comm, c->buf, c->len, NCCL_PTR_CUDA, 0, fd,
                                                 &pc->mh);
            close(fd);
            if (r == ncclSuccess) {
                str_fmt(c->reg_path, sizeof(c->reg_path), "regMrDmaBuf(cuda)");
                return 0;
            }
            str_fmt(why, sizeof(why), "regMrDmaBuf failed: ncclResult %d", (int)r);
        }
        if (o->reg == MEM_REG_DMABUF) {
            str_fmt(err, errlen, "--dmabuf: %s", why);
            return -1;
        }
    }
    str_fmt(c->reg_path, sizeof(c->reg_path), "regMr(cuda)");
    NET_CHECK(c->net->regMr(pc->comm, c->buf, c->len, NCCL_PTR_CUDA, &pc->mh), "regMr(cuda)");
    return 0;
}

/* Handles each way, then drive connect and accept together until both are
 * done (they may each need the other side to progress). */
static int connect_all(struct plugin_ctx *c, char *err, size_t errlen)
{
    struct session *s = c->s;
    char handle[NCCL_NET_HANDLE_MAXSIZE], peer_handle[NCCL_NET_HANDLE_MAXSIZE];
    uint32_t n;
    memset(handle, 0, sizeof(handle));
    if (c->want_recv)
        NET_CHECK(c->net->listen(c->dev, handle, &c->listen), "listen");
    /* Server's handle first, then (bidir) the client's. */
    for (int turn = 0; turn < 2; turn++) {
        int server_turn = turn == 0;
        if (server_turn == s->is_server && c->want_recv) {
            if (session_send(s, WB_MSG_HANDLE, handle, sizeof(handle), err, errlen))
                return -1;
        } else if (server_turn != s->is_server && c->want_send) {
            if (session_expect(s, WB_MSG_HANDLE, peer_handle, sizeof(peer_handle), &n, err, errlen))
                return -1;
            if (n != sizeof(peer_handle)) {
                str_fmt(err, errlen, "protocol error: handle of %u bytes", n);
                return -1;
            }
        }
    }
    double start = bw_now();
    while ((c->want_send && !c->send.comm) || (c->want_recv && !c->recv.comm)) {
        ncclNetDeviceHandle_v8_t *dh = NULL;
        if (c->want_send && !c->send.comm)
            NET_CHECK(c->net->connect(c->dev, peer_handle, &c->send.comm, &dh), "connect");
        if (c->want_recv && !c->recv.comm)
            NET_CHECK(c->net->accept(c->listen, &c->recv.comm, &dh), "accept");
        if (session_poll(s, err, errlen))
            return -1;
        if (bw_now() - start > s->o->timeout) {
            str_fmt(err, errlen, "plugin connect/accept did not complete within %.0f s",
                    s->o->timeout);
            return -1;
        }
        usleep(100);
    }
    return 0;
}

static void fill_header(struct plugin_ctx *c)
{
    const struct wb_opts *o = c->s->o;
    struct out_report *r = c->s->rep;
    str_fmt(r->plugin, sizeof(r->plugin), "%s (%s v8), device %d %s, pci %s, %d Mb/s, maxRecvs %d",
            c->lib.path, c->net->name ? c->net->name : "?", c->dev,
            c->props.name ? c->props.name : "?", c->props.pciPath ? c->props.pciPath : "?",
            c->props.speed, c->props.maxRecvs);
    str_fmt(r->local.device, sizeof(r->local.device), "%s", c->props.name ? c->props.name : "?");
    if (o->use_cuda)
        str_fmt(r->local.memory, sizeof(r->local.memory), "cuda:%d%s", o->gpu, o->cuda_vmm ? " vmm" : "");
    else
        str_fmt(r->local.memory, sizeof(r->local.memory), "host");
    str_fmt(r->local.registration, sizeof(r->local.registration), "%s", c->reg_path);
    /* RAILNET_* variables are the plugin's to read (its config.c); the tool
     * only says what it asked for. */
    r->local.relaxed = (uint32_t)o->relaxed;
    str_fmt(r->relaxed_note, sizeof(r->relaxed_note), "%s",
            o->relaxed ? "the plugin's choice (RAILNET_RELAXED_ORDERING, default auto)"
                       : "off (RAILNET_RELAXED_ORDERING=0 handed to the plugin, unless set)");
    r->nports = 1;
    r->port[0].port = c->props.port;
    str_fmt(r->port[0].link_layer, sizeof(r->port[0].link_layer), "plugin");
    r->port[0].gid_index = -1;
    str_fmt(r->port[0].gid, sizeof(r->port[0].gid), "GID, QPs and striping chosen by the plugin");
}

static int exchange_sides(struct plugin_ctx *c, char *err, size_t errlen)
{
    uint8_t b[256];
    uint32_t n;
    int len = wb_enc_side(&c->s->rep->local, b, sizeof(b));
    if (session_send(c->s, WB_MSG_READY, b, (uint32_t)len, err, errlen) ||
        session_expect(c->s, WB_MSG_READY, b, sizeof(b), &n, err, errlen))
        return -1;
    if (wb_dec_side(b, n, &c->s->rep->remote) == 0)
        c->s->rep->have_remote = 1;
    return 0;
}

int mode_plugin_check(const struct wb_opts *o, char *err, size_t errlen)
{
    /* loaded and checked (plugin_tables), not initialised; it stays loaded
     * for the run */
    static struct plugin_lib lib;
    return plugin_load(&lib, o->plugin_lib, err, errlen);
}

int mode_plugin_run(struct session *s, char *err, size_t errlen)
{
    struct plugin_ctx *c = calloc(1, sizeof(*c));
    if (!c) {
        str_fmt(err, errlen, "out of memory");
        return -1;
    }
    const struct wb_opts *o = s->o;
    c->s = s;
    c->want_send = !s->is_server || o->bidir;
    c->want_recv = s->is_server || o->bidir;
    c->window = o->tx_depth < WINDOW_MAX ? o->tx_depth : WINDOW_MAX;
    int rc = -1;
    /* --no-relaxed-ordering reaches the plugin the way a user would say it;
     * a value the user set explicitly wins. */
    if (!o->relaxed)
        setenv("RAILNET_RELAXED_ORDERING", "0", 0);
    if (plugin_load(&c->lib, o->plugin_lib, err, errlen)) {
        session_fail(s, err);
        goto out;
    }
    c->net = c->lib.net;
    if (pick_device(c, err, errlen) || alloc_buffer(c, err, errlen)) {
        session_fail(s, err);
        goto out;
    }
    if (connect_all(c, err, errlen)) {
        session_fail(s, err);
        goto out;
    }
    if ((c->want_send && reg(c, &c->send, err, errlen)) ||
        (c->want_recv && reg(c, &c->recv, err, errlen))) {
        session_fail(s, err);
        goto out;
    }
    fill_header(c);
    if (exchange_sides(c, err, errlen))
        goto out;
    out_header(s->rep);
    if (session_sizes(s, plugin_run_size, c, err, errlen) || session_done(s, err, errlen))
        goto out;
    rc = 0;
out:
    if (c->net) {
        if (c->send.mh)
            c->net->deregMr(c->send.comm, c->send.mh);
        if (c->recv.mh)
            c->net->deregMr(c->recv.comm, c->recv.mh);
        if (c->send.comm)
            c->net->closeSend(c->send.comm);
        if (c->recv.comm)
            c->net->closeRecv(c->recv.comm);
        if (c->listen)
            c->net->closeListen(c->listen);
    }
    if (c->buf) {
        if (c->cuda_mem)
            cuda_dl_free(c->cuda, c->buf);
        else
            free(c->buf);
    }
    cuda_dl_close(c->cuda);
    /* The plugin may keep threads running: leave it mapped until exit. */
    free(c);
    return rc;
}
