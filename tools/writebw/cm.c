/* tools/writebw/cm.c: -R, the verbs mode's QPs connected through the RDMA
 * CM, as perftest's -R connects its QPs (cm.h). */
#include "config.h"

#include "cm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "../common/bw.h"
#include "../common/strfmt.h"
#include "rdmacmwrap.h"

#if HAVE_RDMACM

#define CM_MS 5000

/* The next event within the time left, or -1 (err says why). */
static int next_event(struct wb_cm *cm, double deadline, struct rdma_cm_event **ev, char *err, size_t errlen)
{
    for (;;) {
        if (RN_CM(get_cm_event)(cm->ch, ev) == 0)
            return 0;
        if (errno != EAGAIN) {
            str_fmt(err, errlen, "-R: rdma_get_cm_event: %s", strerror(errno));
            return -1;
        }
        double left = deadline - bw_now();
        if (left <= 0) {
            str_fmt(err, errlen, "-R: the RDMA CM exchange with the peer did not finish within --timeout");
            return -1;
        }
        struct pollfd p = { .fd = cm->ch->fd, .events = POLLIN };
        poll(&p, 1, left > 0.2 ? 200 : (int)(left * 1000) + 1);
    }
}

int wb_cm_open(struct wb_cm *cm, const char *ibverbs_path, char *err, size_t errlen)
{
    memset(cm, 0, sizeof(*cm));
    char why[512];
    if (rdmacmwrap_global_load(ibverbs_path, why, sizeof(why))) {
        str_fmt(err, errlen, "-R: %s", why);
        return -1;
    }
    cm->ch = RN_CM(create_event_channel)();
    if (!cm->ch) {
        str_fmt(err, errlen, "-R: rdma_create_event_channel: %s", strerror(errno));
        return -1;
    }
    fcntl(cm->ch->fd, F_SETFL, fcntl(cm->ch->fd, F_GETFL) | O_NONBLOCK);
    return 0;
}

int wb_cm_listen(struct wb_cm *cm, int tcp_port, char *err, size_t errlen)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)tcp_port) };
    if (RN_CM(create_id)(cm->ch, &cm->listen, NULL, RDMA_PS_TCP) ||
        RN_CM(bind_addr)(cm->listen, (struct sockaddr *)&sa) || RN_CM(listen)(cm->listen, WB_MAX_QP_TOTAL)) {
        str_fmt(err, errlen, "-R: listening through the RDMA CM on port %d: %s", tcp_port, strerror(errno));
        return -1;
    }
    return 0;
}

/* QP k to RTR and RTS with the CM's attributes for id. */
static int move_qp(struct rc_qp *q, struct rdma_cm_id *id, const struct rc_dev *d, int *mtu, char *err,
                   size_t errlen)
{
    struct ibv_qp_attr a;
    int mask;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    int rc = RN_CM(init_qp_attr)(id, &a, &mask) ? errno : d->v->modify_qp(q->qp, &a, mask);
    if (!rc) {
        *mtu = (int)a.path_mtu;
        memset(&a, 0, sizeof(a));
        a.qp_state = IBV_QPS_RTS;
        rc = RN_CM(init_qp_attr)(id, &a, &mask) ? errno : d->v->modify_qp(q->qp, &a, mask);
    }
    if (rc)
        str_fmt(err, errlen, "-R: QP 0x%x to RTR/RTS with the CM's attributes: %s", q->qp->qp_num, strerror(rc));
    return rc ? -1 : 0;
}

static int same_port(const struct rc_qp *q, const struct rdma_cm_id *id, const struct rc_dev *d, char *err,
                     size_t errlen)
{
    const char *name = id->verbs && id->verbs->device ? id->verbs->device->name : "?";
    if (strcmp(name, d->name) || id->port_num != q->port) {
        str_fmt(err, errlen, "-R: the RDMA CM put the connection on %s port %u, but -d/-i say %s port %d", name,
                id->port_num, d->name, q->port);
        return -1;
    }
    return 0;
}

int wb_cm_connect(struct wb_cm *cm, int fd, int is_server, const struct rc_dev *d, struct rc_qp *qps, int nqp,
                  double timeout, int *path_mtu, char *err, size_t errlen)
{
    double deadline = bw_now() + timeout;
    int mtu = 0, done = 0;
    err[0] = '\0';
    struct rdma_cm_event *ev;
    if (!is_server) {
        /* the server's address and port of the TCP session: perftest -R's rule */
        struct sockaddr_in peer;
        socklen_t pl = sizeof(peer);
        if (getpeername(fd, (struct sockaddr *)&peer, &pl) || peer.sin_family != AF_INET) {
            str_fmt(err, errlen, "-R: the server's address is not IPv4");
            return -1;
        }
        for (int k = 0; k < nqp; k++)
            if (RN_CM(create_id)(cm->ch, &cm->ids[k], NULL, RDMA_PS_TCP) ||
                RN_CM(resolve_addr)(cm->ids[k], NULL, (struct sockaddr *)&peer, CM_MS)) {
                str_fmt(err, errlen, "-R: rdma_resolve_addr: %s", strerror(errno));
                return -1;
            }
        cm->nids = nqp;
    }
    while (done < nqp) {
        if (next_event(cm, deadline, &ev, err, errlen))
            return -1;
        struct rdma_cm_id *id = ev->id;
        enum rdma_cm_event_type type = ev->event;
        int status = ev->status;
        uint8_t k = 0xff;
        if (ev->param.conn.private_data && ev->param.conn.private_data_len >= 1 &&
            (type == RDMA_CM_EVENT_CONNECT_REQUEST))
            k = *(const uint8_t *)ev->param.conn.private_data;
        RN_CM(ack_cm_event)(ev);
        int i = -1;
        for (int j = 0; j < cm->nids; j++)
            if (cm->ids[j] == id)
                i = j;
        switch (type) {
        case RDMA_CM_EVENT_ADDR_RESOLVED:
            if (i >= 0 && RN_CM(resolve_route)(id, CM_MS)) {
                str_fmt(err, errlen, "-R: rdma_resolve_route: %s", strerror(errno));
                return -1;
            }
            break;
        case RDMA_CM_EVENT_ROUTE_RESOLVED: {
            if (i < 0)
                break;
            if (same_port(&qps[i], id, d, err, errlen))
                return -1;
            uint8_t pd = (uint8_t)i;   /* which of the server's QPs this one pairs with */
            struct rdma_conn_param cp = { .private_data = &pd, .private_data_len = 1, .responder_resources = 1,
                                          .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7,
                                          .qp_num = qps[i].qp->qp_num };
            if (RN_CM(connect)(id, &cp)) {
                str_fmt(err, errlen, "-R: rdma_connect: %s", strerror(errno));
                return -1;
            }
            break;
        }
        case RDMA_CM_EVENT_CONNECT_RESPONSE:
            if (i < 0)
                break;
            if (move_qp(&qps[i], id, d, &mtu, err, errlen))
                return -1;
            if (RN_CM(establish)(id)) {
                str_fmt(err, errlen, "-R: rdma_establish: %s", strerror(errno));
                return -1;
            }
            done++;
            break;
        case RDMA_CM_EVENT_CONNECT_REQUEST:
            /* untrusted: a QP index this server has and has not paired yet */
            if (!is_server || k >= nqp || cm->ids[k] || same_port(&qps[k], id, d, err, errlen) ||
                move_qp(&qps[k], id, d, &mtu, err, errlen)) {
                RN_CM(reject)(id, NULL, 0);
                RN_CM(destroy_id)(id);
                if (err[0])
                    return -1;
                break;
            }
            cm->ids[k] = id;
            cm->nids = nqp;
            {
                struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
                                              .rnr_retry_count = 7, .qp_num = qps[k].qp->qp_num };
                if (RN_CM(accept)(id, &cp)) {
                    str_fmt(err, errlen, "-R: rdma_accept: %s", strerror(errno));
                    return -1;
                }
            }
            break;
        case RDMA_CM_EVENT_ESTABLISHED:
            if (is_server && i >= 0)
                done++;
            break;
        default:
            str_fmt(err, errlen, "-R: %s (status %d)%s", RN_CM(event_str)(type), status,
                    type == RDMA_CM_EVENT_REJECTED && status == 8 ? ": nobody listens through the RDMA CM there"
                                                                  : "");
            return -1;
        }
    }
    *path_mtu = mtu;
    return 0;
}

void wb_cm_close(struct wb_cm *cm)
{
    if (!cm->ch)
        return;
    struct rdma_cm_event *ev;
    while (RN_CM(get_cm_event)(cm->ch, &ev) == 0)
        RN_CM(ack_cm_event)(ev);
    for (int k = 0; k < WB_MAX_QP_TOTAL; k++)
        if (cm->ids[k])
            RN_CM(destroy_id)(cm->ids[k]);
    if (cm->listen)
        RN_CM(destroy_id)(cm->listen);
    RN_CM(destroy_event_channel)(cm->ch);
    memset(cm, 0, sizeof(*cm));
}

#else

int wb_cm_open(struct wb_cm *cm, const char *ibverbs_path, char *err, size_t errlen)
{
    (void)ibverbs_path;
    memset(cm, 0, sizeof(*cm));
    str_fmt(err, errlen, "-R: this railnet-write-bw was built without librdmacm's headers (librdmacm-dev)");
    return -1;
}
int wb_cm_listen(struct wb_cm *cm, int tcp_port, char *err, size_t errlen)
{
    (void)cm, (void)tcp_port, (void)err, (void)errlen;
    return -1;
}
int wb_cm_connect(struct wb_cm *cm, int fd, int is_server, const struct rc_dev *d, struct rc_qp *qps, int nqp,
                  double timeout, int *path_mtu, char *err, size_t errlen)
{
    (void)cm, (void)fd, (void)is_server, (void)d, (void)qps, (void)nqp, (void)timeout, (void)path_mtu, (void)err,
        (void)errlen;
    return -1;
}
void wb_cm_close(struct wb_cm *cm) { (void)cm; }

#endif
