/* gdaki_comm.c: a GPU-initiated QP next to a connected railnet comm (see
 * gdaki_comm_attach in railnet_gdaki.h).  The comm lends its device context,
 * PD, port and QP parameters; the extra QP pair is described with the
 * plugin's own hs_qp_info and connected with its qp_connect, after one
 * exchange over the comm's TCP socket.  With RAILNET_GDAKI_QUEUE_MEM=gpu the
 * sender's QP is a DEVX QP (gdaki_devx.c), which needs a context opened for
 * DEVX: the sender then opens its own context and PD on the comm's device
 * instead of borrowing the comm's (buffers for it go through
 * gdaki_pair_reg, on that PD, as always). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "comm.h"
#include "gdaki_devx.h"
#include "gdaki_pair.h"
#include "qp.h"

#define GDAKI_WIRE_MAGIC 0x47444b31u /* "GDK1" */
#define GDAKI_WIRE_TIMEOUT_MS 10000

/* What each end sends: magic, its role, its QP. */
struct gdaki_wire {
    uint32_t magic;
    uint32_t kind;          /* COMM_SEND or COMM_RECV of the sender of this */
    struct hs_qp_info qp;
};

static long ms_left(const struct timespec *deadline)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (deadline->tv_sec - now.tv_sec) * 1000 + (deadline->tv_nsec - now.tv_nsec) / 1000000;
}

/* Moves len bytes over the (non-blocking) comm socket, waiting with poll. */
static int xfer(int fd, void *buf, size_t len, int sending, const struct timespec *deadline,
                char *err, size_t errlen)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = sending ? send(fd, (char *)buf + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT)
                            : recv(fd, (char *)buf + done, len - done, MSG_DONTWAIT);
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (n == 0) {
            snprintf(err, errlen, "gdaki attach: the peer closed the comm's socket");
            return -1;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            snprintf(err, errlen, "gdaki attach: %s on the comm's socket: %s", sending ? "send" : "recv",
                     strerror(errno));
            return -1;
        }
        long left = ms_left(deadline);
        if (left <= 0) {
            snprintf(err, errlen, "gdaki attach: the peer did not attach within %d ms (both ends must "
                     "call gdaki_comm_attach)", GDAKI_WIRE_TIMEOUT_MS);
            return -1;
        }
        struct pollfd p = { .fd = fd, .events = sending ? POLLOUT : POLLIN };
        poll(&p, 1, (int)(left < 100 ? left : 100));
    }
    return 0;
}

/* The sender's own DEVX context and PD on the comm's device. */
static int open_devx_context(struct gdaki_pair *pr, const struct gdaki_pair_opts *o, char *err,
                             size_t errlen)
{
    if (ibvwrap_global_load_mlx5(err, errlen) < 0)
        return -1;
    int n = 0;
    struct ibv_device **list = pr->v->get_device_list(&n);
    struct ibv_device *dev = NULL;
    for (int i = 0; list && i < n && !dev; i++)
        if (strcmp(pr->v->get_device_name(list[i]), pr->dev_name) == 0)
            dev = list[i];
    if (!dev) {
        snprintf(err, errlen, "gdaki attach: device %s not found for its DEVX context", pr->dev_name);
        if (list)
            pr->v->free_device_list(list);
        return -1;
    }
    pr->is_mlx5 = pr->v->mlx5dv_is_supported && pr->v->mlx5dv_is_supported(dev);
    struct ibv_context *ctx = gdaki_devx_open(pr->v, dev, err, errlen);
    pr->v->free_device_list(list);
    if (!ctx)
        return -1;
    pr->borrowed = 0;
    pr->ctx = ctx;
    pr->pd = pr->v->alloc_pd(ctx);
    if (!pr->pd) {
        snprintf(err, errlen, "gdaki attach: ibv_alloc_pd on the DEVX context of %s failed",
                 pr->dev_name);
        return -1;
    }
    pr->queue_mem = o->queue_mem;
    pr->cuda_dev = o->cuda_dev;
    return 0;
}

int gdaki_comm_attach(void *comm, const struct gdaki_pair_opts *o, struct gdaki_pair **out,
                      char *err, size_t errlen)
{
    *out = NULL;
    struct comm *c = comm;
    if (!c || !c->ready || c->error || (c->kind != COMM_SEND && c->kind != COMM_RECV)) {
        snprintf(err, errlen, "gdaki attach: not a connected railnet comm");
        return -1;
    }
    const struct qp_port *port = &c->ports[0];
    struct gdaki_pair *pr = gdaki_pair_alloc(err, errlen);
    if (!pr)
        return -1;
    pr->borrowed = 1;
    pr->v = ibvwrap_global();
    if (!pr->v) {
        snprintf(err, errlen, "gdaki attach: the plugin's verbs table is not loaded");
        goto fail;
    }
    snprintf(pr->dev_name, sizeof(pr->dev_name), "%s", c->dev_name);
    pr->ctx = port->ctx;
    pr->pd = port->pd;
    pr->port = port->port_num;
    pr->gid = port->gid;
    pr->gid_index = port->gid_index;
    struct ibv_device_attr da;
    if (pr->v->query_device(pr->ctx, &da) != 0 ||
        ibvwrap_query_port(pr->v, pr->ctx, port->port_num, &pr->port_attr) != 0) {
        snprintf(err, errlen, "gdaki attach: cannot query %s port %u", pr->dev_name, port->port_num);
        goto fail;
    }
    pr->atomics = da.atomic_cap != IBV_ATOMIC_NONE;
    int sending = c->kind == COMM_SEND;
    if (sending && o && o->queue_mem != GDAKI_QUEUE_MEM_HOST &&
        open_devx_context(pr, o, err, errlen) < 0)
        goto fail;
    if (sending) {
        if (ibvwrap_global_load_mlx5(err, errlen) < 0 ||
            gdaki_pair_build_send(pr, o ? o->sq_depth : 0, err, errlen) < 0)
            goto fail;
    } else if (gdaki_pair_build_recv(pr, err, errlen) < 0) {
        goto fail;
    }
    struct qp_conn qc;
    memset(&qc, 0, sizeof(qc));
    struct ibv_qp devx_qp;      /* stands for a DEVX QP in qp_describe */
    memset(&devx_qp, 0, sizeof(devx_qp));
    devx_qp.qp_num = gdaki_devx_qpn(pr);
    qc.qp = pr->devx ? &devx_qp : sending ? pr->sqp : pr->rqp;
    qc.port = port;
    qc.psn = qp_random_psn();
    pr->psn = qc.psn;
    struct gdaki_wire mine, theirs;
    memset(&mine, 0, sizeof(mine));
    mine.magic = GDAKI_WIRE_MAGIC;
    mine.kind = (uint32_t)c->kind;
    qp_describe(&qc, &mine.qp);
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += GDAKI_WIRE_TIMEOUT_MS / 1000;
    if (xfer(c->fd, &mine, sizeof(mine), 1, &deadline, err, errlen) < 0 ||
        xfer(c->fd, &theirs, sizeof(theirs), 0, &deadline, err, errlen) < 0)
        goto fail;
    if (theirs.magic != GDAKI_WIRE_MAGIC || theirs.kind == mine.kind ||
        (theirs.kind != COMM_SEND && theirs.kind != COMM_RECV) || theirs.qp.mtu < IBV_MTU_256 ||
        theirs.qp.mtu > IBV_MTU_4096 || theirs.qp.qpn == 0 || theirs.qp.qpn > 0xffffff) {
        snprintf(err, errlen, "gdaki attach: the peer sent a malformed or mismatched description "
                 "(magic 0x%08x, kind %u, mtu %u): both ends must attach, one send and one recv comm",
                 theirs.magic, theirs.kind, theirs.qp.mtu);
        goto fail;
    }
    if (pr->devx) {
        struct gdaki_qp_info ri;
        memset(&ri, 0, sizeof(ri));
        ri.magic = GDAKI_QP_INFO_MAGIC;
        ri.qpn = theirs.qp.qpn;
        ri.psn = theirs.qp.psn;
        ri.lid = theirs.qp.lid;
        ri.port = theirs.qp.port_num;
        ri.mtu = theirs.qp.mtu;
        ri.is_global = theirs.qp.is_global;
        memcpy(ri.gid, theirs.qp.gid, 16);
        if (gdaki_devx_connect(pr, &ri, err, errlen) != 0)
            goto fail;
    } else if (qp_connect(&qc, &theirs.qp, &c->qpp, err, errlen) != 0) {
        goto fail;
    }
    if (gdaki_pair_finish(pr, o ? o->use_cuda : 0, o ? o->cuda_dev : 0, err, errlen) < 0)
        goto fail;
    *out = pr;
    return 0;
fail:
    gdaki_pair_close(pr);
    return -1;
}
