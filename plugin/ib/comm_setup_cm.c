/* plugin/ib/comm_setup_cm.c: listen / connect / accept through the RDMA CM
 * (RAILNET_CM=rdmacm; comm_setup_cm.h).
 *
 * One CM connection per QP. The listener's handle carries its ports' IPv4
 * addresses and the CM port it listens on (the same on each port's
 * address); the connector resolves, for QP i, from its port (i % its ports)
 * to the listener's port (i % the listener's ports), so striping over ports
 * is what it is with TCP. The CM carries the QP numbers, PSNs, GIDs and path
 * MTU; rdma_init_qp_attr gives the RTR and RTS attributes (the GID index and
 * route are the CM's), to which railnet adds its RAILNET_IB_TIMEOUT,
 * RETRY_CNT, TC and SL. The QPs are the comm's own (its PD and CQ), handed to
 * the CM by number:
 *
 *   connect                                 accept (listener's channel)
 *   resolve addr, route (per QP)
 *   REQ: CM HELLO (56 bytes)          ->    CONNECT_REQUEST: validate; the
 *                                           first makes the recv comm; QP i
 *                                           to RTR/RTS; REP: CM REPLY
 *   CONNECT_RESPONSE: validate,       <-
 *   QP i to RTR/RTS, RTU (establish)  ->    ESTABLISHED
 *   all QPs: the send comm is ready         all QPs: the recv comm is ready
 *
 * A request that does not validate (not railnet, another version, a forged
 * or corrupted one, another listener's nonce, another link layer) is
 * rejected with a CM REPLY carrying the reason as the REJ's private data, a
 * WARN names it, and the listener goes on. Timeouts are
 * RAILNET_HANDSHAKE_TIMEOUT, as with TCP. A finished comm keeps its CM ids
 * on a channel of its own (comm->cm): destroying them at close tells the
 * peer. There is no TCP socket: failover's messages need one, so a port
 * that fails fails the comm (as RAILNET_FAILOVER=0 does). */
#include "comm_setup_cm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "config.h"
#include "devices.h"
#include "errors.h"
#include "ibvwrap.h"
#include "log.h"
#include "rdmacmwrap.h"

#if HAVE_RDMACM

#define CM_PENDING 8
#define CM_RESOLVE_MS 5000

/* ------------------------------------------------------------ helpers */

static int cm_load(const char *who, int dev)
{
    char err[512];
    if (rdmacmwrap_global_load(NULL, err, sizeof(err))) {
        WARN("NET/railnet: %s on device %d: RAILNET_CM=rdmacm: %s", who, dev, err);
        return -1;
    }
    return 0;
}

/* The IPv4 address of port k of device dev: its RoCE GID's, else (IB:
 * IPoIB) the address the device listens on. */
static int port_ipv4(int dev, int k, struct in_addr *out)
{
    const struct rn_device *r = devices_get(dev);
    if (!r || k >= r->nports)
        return -1;
    const uint8_t *g = r->ports[k].gid.raw;
    static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
    if (r->link_layer == IBV_LINK_LAYER_ETHERNET && !memcmp(g, mapped, 12)) {
        memcpy(&out->s_addr, g + 12, 4);
        return 0;
    }
    if (r->oob.family != 4)
        return -1;
    memcpy(&out->s_addr, r->oob.addr, 4);
    return 0;
}

static struct rdma_event_channel *channel_new(void)
{
    struct rdma_event_channel *ch = RN_CM(create_event_channel)();
    if (ch)
        fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
    return ch;
}

/* Moves QP i of c to RTR and RTS with the CM's attributes for id plus
 * railnet's timeout, retry count, traffic class and service level. */
static int qp_by_cm(struct comm *c, int i, struct rdma_cm_id *id, char *err, size_t len)
{
    struct qp_conn *q = &c->qps[i];
    struct ibv_qp_attr a;
    int mask = 0;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    if (RN_CM(init_qp_attr)(id, &a, &mask)) {
        snprintf(err, len, "rdma_init_qp_attr(RTR) for QP 0x%x: %s", q->qp->qp_num, strerror(errno));
        return -1;
    }
    a.ah_attr.grh.traffic_class = (uint8_t)c->qpp.tc;
    a.ah_attr.sl = (uint8_t)c->qpp.sl;
    int rc = RN_IBV(modify_qp)(q->qp, &a, mask);
    if (rc) {
        snprintf(err, len, "ibv_modify_qp(QP 0x%x -> RTR, from the CM): %s", q->qp->qp_num, strerror(rc));
        return -1;
    }
    q->mtu = a.path_mtu;
    q->remote_qpn = a.dest_qp_num;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    if (RN_CM(init_qp_attr)(id, &a, &mask)) {
        snprintf(err, len, "rdma_init_qp_attr(RTS) for QP 0x%x: %s", q->qp->qp_num, strerror(errno));
        return -1;
    }
    a.timeout = (uint8_t)c->qpp.timeout;
    a.retry_cnt = (uint8_t)c->qpp.retry_cnt;
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT;
    rc = RN_IBV(modify_qp)(q->qp, &a, mask);
    if (rc) {
        snprintf(err, len, "ibv_modify_qp(QP 0x%x -> RTS, from the CM): %s", q->qp->qp_num, strerror(rc));
        return -1;
    }
    q->psn = a.sq_psn;
    return 0;
}

/* The CM put id on the device and port QP i of c uses (the address names
 * a port; a QP is bound to one). */
static int same_port(const struct comm *c, int i, const struct rdma_cm_id *id, char *err, size_t len)
{
    const struct rn_device *r = devices_get(c->dev);
    const char *cm_dev = id->verbs && id->verbs->device ? id->verbs->device->name : "?";
    if (!r || strcmp(cm_dev, r->verbs_name) || id->port_num != c->qps[i].port->port_num) {
        snprintf(err, len, "the RDMA CM routed QP %d to %s port %u, but the QP is on %s port %u: give each port "
                 "of the device its own IPv4 address", i, cm_dev, id->port_num, r ? r->verbs_name : "?",
                 c->qps[i].port->port_num);
        return -1;
    }
    return 0;
}

/* What a finished comm keeps of the CM. */
struct cm_conn {
    struct rdma_event_channel *ch;
    int nids;
    struct rdma_cm_id *ids[HS_MAX_QPS];
};

static void cm_conn_free(struct cm_conn *k)
{
    if (!k)
        return;
    struct rdma_cm_event *ev;
    if (k->ch)   /* events of the peer's disconnect: acknowledged before destroy */
        while (RN_CM(get_cm_event)(k->ch, &ev) == 0)
            RN_CM(ack_cm_event)(ev);
    for (int i = 0; i < k->nids; i++)
        if (k->ids[i])
            RN_CM(destroy_id)(k->ids[i]);
    if (k->ch)
        RN_CM(destroy_event_channel)(k->ch);
    free(k);
}

static void comm_cm_release(struct comm *c)
{
    cm_conn_free(c->cm);
    c->cm = NULL;
}

/* Hands ids (on some channel) over to c on a channel of its own. */
static int comm_take_ids(struct comm *c, struct rdma_cm_id **ids, int n)
{
    struct cm_conn *k = calloc(1, sizeof(*k));
    if (!k || !(k->ch = channel_new())) {
        free(k);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (ids[i] && RN_CM(migrate_id)(ids[i], k->ch)) {
            /* stays on the old channel: destroyed with the comm all the same */
        }
        k->ids[i] = ids[i];
        ids[i] = NULL;
    }
    k->nids = n;
    c->cm = k;
    c->cm_release = comm_cm_release;
    return 0;
}

/* ----------------------------------------------------------------- accept */

struct cm_pending {
    int used;
    uint64_t conn_id;
    uint64_t started_ns;
    struct recv_comm *rc;
    struct hs_cm_hello first;
    struct rdma_cm_id *ids[HS_MAX_QPS];
    uint32_t got, established;
};

struct cm_listen {
    int cm;                     /* 1: this is a CM listener (comm_setup.c dispatches on it) */
    int dev;
    struct comm_opts opts;      /* what the accepted comms' QPs get */
    uint64_t guid, nonce;
    struct rdma_event_channel *ch;
    int nids;
    struct rdma_cm_id *ids[HS_MAX_PORTS];
    struct cm_pending acc[CM_PENDING];
};

static void pending_drop(struct cm_pending *p)
{
    for (int i = 0; i < HS_MAX_QPS; i++)
        if (p->ids[i])
            RN_CM(destroy_id)(p->ids[i]);
    if (p->rc)
        comm_recv_free(p->rc);
    memset(p, 0, sizeof(*p));
}

static void reject(struct rdma_cm_id *id, uint8_t status)
{
    struct hs_cm_reply r = { .nqps = 1, .nports = 1, .status = status };
    uint8_t buf[HS_CM_REPLY_SIZE];
    size_t len = hs_cm_reply_encode(&r, HS_VERSION, buf, sizeof(buf));
    RN_CM(reject)(id, buf, (uint8_t)len);
}

ncclResult_t cmsetup_listen(int dev, const struct comm_opts *opts, void *handle, void **listen_comm)
{
    *listen_comm = NULL;
    if (cm_load("listen", dev))
        return ncclSystemError;
    struct hs_handle h;
    memset(&h, 0, sizeof(h));
    struct oob_addr a;
    if (devices_handle_info(dev, &h.guid, &h.link_layer, &h.nports, &a) != ncclSuccess) {
        WARN("NET/railnet: listen on device %d: no such device", dev);
        return ncclInvalidArgument;
    }
    struct cm_listen *l = calloc(1, sizeof(*l));
    if (!l)
        return ncclSystemError;
    l->cm = 1;
    l->dev = dev;
    l->opts.tc = opts ? opts->tc : COMM_TC_DEFAULT;
    l->guid = h.guid;
    l->nonce = hs_nonce_new();
    l->ch = channel_new();
    struct in_addr ip[HS_MAX_PORTS];
    uint16_t port = 0;
    const char *why = NULL;
    int e = 0;
    if (!l->ch) {
        why = "rdma_create_event_channel";
        e = errno;
    }
    /* the first port's address takes a port number from the kernel, the
     * others must get the same one: when it is taken there (a connection's
     * local port), start again with another */
    for (int attempt = 0; !why && attempt < 16; attempt++) {
        port = 0;
        for (int k = 0; !why && k < h.nports; k++) {
            if (port_ipv4(dev, k, &ip[k])) {
                why = "no IPv4 address on the port (RAILNET_CM=rdmacm needs one)";
                break;
            }
            if (k > 0 && ip[k].s_addr == ip[0].s_addr)
                continue;   /* one address for both ports (IPoIB): one listener */
            struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = ip[k], .sin_port = htons(port) };
            if (RN_CM(create_id)(l->ch, &l->ids[l->nids], l, RDMA_PS_TCP)) {
                why = "rdma_create_id";
                e = errno;
            } else if (l->nids++, RN_CM(bind_addr)(l->ids[l->nids - 1], (struct sockaddr *)&sa)) {
                why = "rdma_bind_addr";
                e = errno;
            } else if (RN_CM(listen)(l->ids[l->nids - 1], 64)) {
                why = "rdma_listen";
                e = errno;
            } else if (k == 0) {
                port = ntohs(RN_CM(get_src_port)(l->ids[0]));
            }
        }
        if (!why || e != EADDRINUSE || attempt == 15)
            break;
        for (int k = 0; k < l->nids; k++)
            RN_CM(destroy_id)(l->ids[k]);
        l->nids = 0;
        why = NULL;
        e = 0;
    }
    if (why) {
        char s[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &ip[0], s, sizeof(s));
        WARN("NET/railnet: listen on device %d through the RDMA CM (%s port %u): %s%s%s", dev, s, port, why,
             e ? ": " : "", e ? strerror(e) : "");
        cmsetup_close_listen(l);
        return ncclSystemError;
    }
    h.version = HS_VERSION;
    h.cm = 1;
    h.family = 4;
    memcpy(h.addr, &ip[0].s_addr, 4);
    if (h.nports == 2)
        memcpy(h.addr + 4, &ip[1].s_addr, 4);
    h.tcp_port = port;
    h.nonce = l->nonce;
    hs_handle_encode(&h, handle);
    char s[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &ip[0], s, sizeof(s));
    INFO(NCCL_NET | NCCL_INIT, "NET/railnet: listening for device %d on %s port %u through the RDMA CM "
         "(RAILNET_CM=rdmacm)", dev, s, port);
    *listen_comm = l;
    return ncclSuccess;
}

static struct cm_pending *pending_of_id(struct cm_listen *l, const struct rdma_cm_id *id, int *qpi)
{
    for (int s = 0; s < CM_PENDING; s++)
        for (int i = 0; l->acc[s].used && i < HS_MAX_QPS; i++)
            if (l->acc[s].ids[i] == id) {
                *qpi = i;
                return &l->acc[s];
            }
    return NULL;
}

/* A CONNECT_REQUEST: validated, then QP i of the connection's recv comm is
 * moved by the CM's attributes and accepted. Returns 0, or -1 when the
 * request was rejected (the caller destroys the id). */
static int on_request(struct cm_listen *l, struct rdma_cm_id *id, const uint8_t *pdata, size_t len)
{
    char err[HS_ERR_LEN + 160];
    struct hs_cm_hello m;
    if (hs_cm_hello_parse(pdata, len, &m, err) != HS_OK) {
        WARN("NET/railnet: accept on device %d: rejecting an RDMA CM connection request: %s", l->dev, err);
        reject(id, HS_REJECT_PROTOCOL);
        return -1;
    }
    if (m.target_guid != l->guid || m.nonce != l->nonce) {
        WARN("NET/railnet: accept on device %d (guid 0x%llx): the connecting peer used a handle issued for %s; "
             "handles must not be mixed between devices or listen calls", l->dev, (unsigned long long)l->guid,
             m.target_guid != l->guid ? "another device" : "another listener");
        reject(id, HS_REJECT_WRONG_DEVICE);
        return -1;
    }
    const struct rn_device *r = devices_get(l->dev);
    if (m.link_layer != r->link_layer) {
        WARN("NET/railnet: accept on device %d: the peer's link layer is %s, this device's %s", l->dev,
             m.link_layer == 1 ? "InfiniBand" : "Ethernet", r->link_layer == 1 ? "InfiniBand" : "Ethernet");
        reject(id, HS_REJECT_LINK_LAYER);
        return -1;
    }
    struct cm_pending *p = NULL, *fresh = NULL;
    for (int s = 0; s < CM_PENDING; s++) {
        if (l->acc[s].used && l->acc[s].conn_id == m.conn_id)
            p = &l->acc[s];
        else if (!l->acc[s].used && !fresh)
            fresh = &l->acc[s];
    }
    if (!p) {
        if (!fresh) {
            WARN("NET/railnet: accept on device %d: %d connections being set up through the CM; rejecting one more",
                 l->dev, CM_PENDING);
            reject(id, HS_REJECT_RESOURCES);
            return -1;
        }
        p = fresh;
        memset(p, 0, sizeof(*p));
        if (comm_recv_create(l->dev, m.nqps, &l->opts, &p->rc) != ncclSuccess) {
            reject(id, HS_REJECT_RESOURCES);
            return -1;
        }
        p->used = 1;
        p->conn_id = m.conn_id;
        p->first = m;
        p->started_ns = comm_now_ns();
        errors_snapshot(&p->rc->c);
        struct comm *c = &p->rc->c;
        p->rc->remote_ring_addr = m.cts_addr;
        for (int k = 0; k < HS_MAX_PORTS; k++)
            p->rc->remote_ring_rkey[k] = m.cts_rkey[k < m.nports ? k : 0];
        if (c->nqps != m.nqps) {
            WARN("NET/railnet: accept on device %d: made %d QPs, the peer asked for %u", l->dev, c->nqps, m.nqps);
            reject(id, HS_REJECT_RESOURCES);
            pending_drop(p);
            return -1;
        }
        for (int i = 0; i < c->nqps; i++) {
            int e = comm_post_recvs(c, i, COMM_RECV_POSTED);
            if (e) {
                WARN("NET/railnet: device %s QP 0x%x: posting %d receives failed: %s", c->dev_name,
                     c->qps[i].qp->qp_num, COMM_RECV_POSTED, strerror(e));
                reject(id, HS_REJECT_RESOURCES);
                pending_drop(p);
                return -1;
            }
        }
    } else if (m.nqps != p->first.nqps || m.nports != p->first.nports || m.cts_addr != p->first.cts_addr ||
               memcmp(m.cts_rkey, p->first.cts_rkey, sizeof(m.cts_rkey)) || (p->got >> m.qp_index & 1)) {
        WARN("NET/railnet: accept on device %d: the request for QP %u disagrees with the first of its connection "
             "(or repeats one); rejecting it", l->dev, m.qp_index);
        reject(id, HS_REJECT_PROTOCOL);
        return -1;
    }
    struct comm *c = &p->rc->c;
    int i = m.qp_index;
    if (same_port(c, i, id, err, sizeof(err)) || qp_by_cm(c, i, id, err, sizeof(err))) {
        WARN("NET/railnet: accept on device %d: %s", l->dev, err);
        reject(id, HS_REJECT_RESOURCES);
        pending_drop(p);
        return -1;
    }
    struct hs_cm_reply rep = { .qp_index = (uint8_t)i, .nqps = (uint8_t)c->nqps, .nports = (uint8_t)c->nports,
                               .guid = l->guid, .sizes_addr = (uint64_t)(uintptr_t)p->rc->sizes };
    for (int k = 0; k < HS_MAX_PORTS; k++)
        rep.sizes_rkey[k] = p->rc->sizes_mr->rkey;
    uint8_t buf[HS_CM_REPLY_SIZE];
    size_t n = hs_cm_reply_encode(&rep, HS_VERSION, buf, sizeof(buf));
    struct rdma_conn_param cp = {
        .private_data = buf, .private_data_len = (uint8_t)n, .responder_resources = 1, .initiator_depth = 1,
        .rnr_retry_count = 7, .qp_num = c->qps[i].qp->qp_num,
    };
    p->ids[i] = id;
    p->got |= 1u << i;
    if (RN_CM(accept)(id, &cp)) {
        WARN("NET/railnet: accept on device %d: rdma_accept for QP %d: %s", l->dev, i, strerror(errno));
        p->ids[i] = NULL;   /* the caller destroys it */
        pending_drop(p);
        return -1;
    }
    return 0;
}

ncclResult_t cmsetup_accept(void *listen_comm, void **recv_comm)
{
    struct cm_listen *l = listen_comm;
    *recv_comm = NULL;
    uint64_t limit = (uint64_t)rn_config()->handshake_timeout * 1000000000ull;
    for (int s = 0; s < CM_PENDING; s++) {
        if (l->acc[s].used && comm_now_ns() - l->acc[s].started_ns > limit) {
            WARN("NET/railnet: accept on device %d: the connecting peer did not finish the RDMA CM handshake "
                 "within RAILNET_HANDSHAKE_TIMEOUT=%d s; dropping it", l->dev, rn_config()->handshake_timeout);
            pending_drop(&l->acc[s]);
        }
    }
    struct rdma_cm_event *ev;
    while (RN_CM(get_cm_event)(l->ch, &ev) == 0) {
        struct rdma_cm_id *id = ev->id;
        enum rdma_cm_event_type type = ev->event;
        int status = ev->status;
        if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
            uint8_t pdata[256];
            size_t len = ev->param.conn.private_data ? ev->param.conn.private_data_len : 0;
            if (len > sizeof(pdata))
                len = sizeof(pdata);
            if (len)
                memcpy(pdata, ev->param.conn.private_data, len);
            int bad = on_request(l, id, pdata, len);
            RN_CM(ack_cm_event)(ev);
            if (bad)
                RN_CM(destroy_id)(id);
            continue;
        }
        RN_CM(ack_cm_event)(ev);
        int i;
        struct cm_pending *p = pending_of_id(l, id, &i);
        if (!p)
            continue;   /* a connection dropped already */
        if (type == RDMA_CM_EVENT_ESTABLISHED) {
            p->established |= 1u << i;
            if (p->established != (1u << p->rc->c.nqps) - 1)
                continue;
            struct recv_comm *rc = p->rc;
            if (comm_take_ids(&rc->c, p->ids, rc->c.nqps)) {
                WARN("NET/railnet: accept on device %d: cannot make the comm's CM channel", l->dev);
                pending_drop(p);
                return ncclSystemError;
            }
            p->rc = NULL;
            memset(p, 0, sizeof(*p));
            rc->c.ready = 1;
            INFO(NCCL_NET, "NET/railnet: accepted a connection on %s with %d QPs through the RDMA CM",
                 rc->c.dev_name, rc->c.nqps);
            *recv_comm = rc;
            return ncclSuccess;
        }
        WARN("NET/railnet: accept on device %d: QP %d of a connection being set up: %s (status %d); dropping "
             "the connection", l->dev, i, RN_CM(event_str)(type), status);
        pending_drop(p);
    }
    return ncclSuccess;
}

ncclResult_t cmsetup_close_listen(void *listen_comm)
{
    struct cm_listen *l = listen_comm;
    if (!l)
        return ncclSuccess;
    for (int s = 0; s < CM_PENDING; s++)
        if (l->acc[s].used)
            pending_drop(&l->acc[s]);
    struct rdma_cm_event *ev;
    if (l->ch) {
        /* requests nobody took: rejected by destroying their ids */
        while (RN_CM(get_cm_event)(l->ch, &ev) == 0) {
            struct rdma_cm_id *child = ev->event == RDMA_CM_EVENT_CONNECT_REQUEST ? ev->id : NULL;
            RN_CM(ack_cm_event)(ev);
            if (child)
                RN_CM(destroy_id)(child);
        }
    }
    for (int k = 0; k < l->nids; k++)
        RN_CM(destroy_id)(l->ids[k]);
    if (l->ch)
        RN_CM(destroy_event_channel)(l->ch);
    free(l);
    return ncclSuccess;
}

/* ---------------------------------------------------------------- connect */

struct cm_connect {
    const void *key;
    int dev;
    struct comm_opts opts;
    struct hs_handle h;
    uint64_t started_ns, conn_id;
    struct send_comm *sc;
    struct rdma_event_channel *ch;
    struct rdma_cm_id *ids[HS_MAX_QPS];
    uint32_t established;
    struct hs_cm_reply first;
    int have_first;
    struct cm_connect *next;
};

static pthread_mutex_t connect_mu = PTHREAD_MUTEX_INITIALIZER;
static struct cm_connect *connect_pending;

static void connect_free(struct cm_connect *s)
{
    pthread_mutex_lock(&connect_mu);
    for (struct cm_connect **pp = &connect_pending; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    pthread_mutex_unlock(&connect_mu);
    struct rdma_cm_event *ev;
    if (s->ch)
        while (RN_CM(get_cm_event)(s->ch, &ev) == 0)
            RN_CM(ack_cm_event)(ev);
    for (int i = 0; i < HS_MAX_QPS; i++)
        if (s->ids[i])
            RN_CM(destroy_id)(s->ids[i]);
    if (s->ch)
        RN_CM(destroy_event_channel)(s->ch);
    if (s->sc)
        comm_send_free(s->sc);
    free(s);
}

static ncclResult_t connect_start(struct cm_connect *s)
{
    const struct rn_device *r = devices_get(s->dev);
    if (!r) {
        WARN("NET/railnet: connect on device %d: no such device", s->dev);
        return ncclInvalidArgument;
    }
    if (s->h.link_layer != r->link_layer) {
        WARN("NET/railnet: connect on device %d: the peer's link layer is %s, this device's %s", s->dev,
             s->h.link_layer == 1 ? "InfiniBand" : "Ethernet", r->link_layer == 1 ? "InfiniBand" : "Ethernet");
        return ncclInvalidUsage;
    }
    if (s->h.family != 4) {
        WARN("NET/railnet: connect on device %d: an RDMA CM handle with an IPv6 address (IPv4 only)", s->dev);
        return ncclInvalidArgument;
    }
    if (comm_send_create(s->dev, &s->opts, &s->sc) != ncclSuccess)
        return ncclSystemError;
    errors_snapshot(&s->sc->c);
    s->ch = channel_new();
    if (!s->ch) {
        WARN("NET/railnet: connect on device %d: rdma_create_event_channel: %s", s->dev, strerror(errno));
        return ncclSystemError;
    }
    s->conn_id = hs_nonce_new();
    struct comm *c = &s->sc->c;
    for (int i = 0; i < c->nqps; i++) {
        struct sockaddr_in src = { .sin_family = AF_INET }, dst = { .sin_family = AF_INET };
        int rk = i % s->h.nports;
        memcpy(&dst.sin_addr.s_addr, s->h.addr + 4 * rk, 4);
        dst.sin_port = htons(s->h.tcp_port);
        if (port_ipv4(s->dev, c->qps[i].port->port_idx, &src.sin_addr)) {
            WARN("NET/railnet: connect on device %d: port %u has no IPv4 address (RAILNET_CM=rdmacm needs one)",
                 s->dev, c->qps[i].port->port_num);
            return ncclSystemError;
        }
        if (RN_CM(create_id)(s->ch, &s->ids[i], s, RDMA_PS_TCP) ||
            RN_CM(resolve_addr)(s->ids[i], (struct sockaddr *)&src, (struct sockaddr *)&dst, CM_RESOLVE_MS)) {
            char a[INET_ADDRSTRLEN] = "?";
            inet_ntop(AF_INET, &dst.sin_addr, a, sizeof(a));
            WARN("NET/railnet: connect on device %d: RDMA CM address resolution of %s for QP %d: %s", s->dev, a, i,
                 strerror(errno));
            return ncclRemoteError;
        }
    }
    return ncclSuccess;
}

static int qp_of_id(const struct cm_connect *s, const struct rdma_cm_id *id)
{
    for (int i = 0; i < HS_MAX_QPS; i++)
        if (s->ids[i] == id)
            return i;
    return -1;
}

static ncclResult_t on_route(struct cm_connect *s, int i)
{
    struct comm *c = &s->sc->c;
    char err[256];
    if (same_port(c, i, s->ids[i], err, sizeof(err))) {
        WARN("NET/railnet: connect on device %d: %s", s->dev, err);
        return ncclSystemError;
    }
    struct hs_cm_hello m = {
        .qp_index = (uint8_t)i, .nqps = (uint8_t)c->nqps, .nports = (uint8_t)c->nports,
        .link_layer = devices_get(s->dev)->link_layer, .conn_id = s->conn_id, .nonce = s->h.nonce,
        .target_guid = s->h.guid, .cts_addr = (uint64_t)(uintptr_t)s->sc->ring,
    };
    for (int k = 0; k < HS_MAX_PORTS; k++)
        m.cts_rkey[k] = s->sc->ring_mr->rkey;
    uint8_t buf[HS_CM_HELLO_SIZE];
    size_t n = hs_cm_hello_encode(&m, HS_VERSION, buf, sizeof(buf));
    struct rdma_conn_param cp = {
        .private_data = buf, .private_data_len = (uint8_t)n, .responder_resources = 1, .initiator_depth = 1,
        .retry_count = (uint8_t)c->qpp.retry_cnt, .rnr_retry_count = 7, .qp_num = c->qps[i].qp->qp_num,
    };
    if (!n || RN_CM(connect)(s->ids[i], &cp)) {
        WARN("NET/railnet: connect on device %d: rdma_connect for QP %d: %s", s->dev, i, n ? strerror(errno)
                                                                                          : "cannot encode HELLO");
        return ncclSystemError;
    }
    return ncclSuccess;
}

static ncclResult_t on_response(struct cm_connect *s, int i, const uint8_t *pdata, size_t len)
{
    struct comm *c = &s->sc->c;
    char err[HS_ERR_LEN + 160];
    struct hs_cm_reply rep;
    if (hs_cm_reply_parse(pdata, len, &rep, err) != HS_OK) {
        WARN("NET/railnet: connect on device %d: bad RDMA CM reply from the listener: %s", s->dev, err);
        return ncclRemoteError;
    }
    if (rep.status || rep.nqps != c->nqps || rep.qp_index != i || rep.guid != s->h.guid ||
        (s->have_first && (rep.sizes_addr != s->first.sizes_addr ||
                           memcmp(rep.sizes_rkey, s->first.sizes_rkey, sizeof(rep.sizes_rkey))))) {
        WARN("NET/railnet: connect on device %d: the listener's reply for QP %d does not match the connection "
             "(status %u, %u QPs of %d, QP %u, guid 0x%llx)", s->dev, i, rep.status, rep.nqps, c->nqps, rep.qp_index,
             (unsigned long long)rep.guid);
        return ncclRemoteError;
    }
    if (!s->have_first) {
        s->first = rep;
        s->have_first = 1;
    }
    if (qp_by_cm(c, i, s->ids[i], err, sizeof(err))) {
        WARN("NET/railnet: connect on device %d: %s", s->dev, err);
        return ncclSystemError;
    }
    if (RN_CM(establish)(s->ids[i])) {
        WARN("NET/railnet: connect on device %d: rdma_establish for QP %d: %s", s->dev, i, strerror(errno));
        return ncclRemoteError;
    }
    s->established |= 1u << i;
    return ncclSuccess;
}

static ncclResult_t on_failure(struct cm_connect *s, int i, enum rdma_cm_event_type type, int status,
                               const uint8_t *pdata, size_t len)
{
    char a[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, s->h.addr + 4 * (i % s->h.nports), a, sizeof(a));
    struct hs_cm_reply rep;
    char err[HS_ERR_LEN];
    if (type == RDMA_CM_EVENT_REJECTED && hs_cm_reply_parse(pdata, len, &rep, err) == HS_OK && rep.status) {
        WARN("NET/railnet: connect on device %d: the listener at %s port %u rejected the connection: %s", s->dev, a,
             s->h.tcp_port, hs_reject_str(rep.status));
        return rep.status == HS_REJECT_WRONG_DEVICE || rep.status == HS_REJECT_LINK_LAYER ? ncclInvalidUsage
                                                                                        : ncclRemoteError;
    }
    if (type == RDMA_CM_EVENT_REJECTED && status == 8) {
        WARN("NET/railnet: connect on device %d: nobody listens through the RDMA CM at %s port %u (REJ reason 8: "
             "invalid service ID)", s->dev, a, s->h.tcp_port);
        return ncclRemoteError;
    }
    WARN("NET/railnet: connect on device %d: QP %d to %s port %u: %s (status %d)%s", s->dev, i, a, s->h.tcp_port,
         RN_CM(event_str)(type), status,
         type == RDMA_CM_EVENT_REJECTED ? ": the listener went away or refused the connection" : "");
    return ncclRemoteError;
}

/* Moves a connect as far as its events allow; *done when the comm is ready. */
static ncclResult_t connect_step(struct cm_connect *s, struct comm **done)
{
    *done = NULL;
    if (!s->sc) {
        ncclResult_t res = connect_start(s);
        if (res != ncclSuccess)
            return res;
    }
    if (comm_now_ns() - s->started_ns > (uint64_t)rn_config()->handshake_timeout * 1000000000ull) {
        WARN("NET/railnet: connect on device %d: the listener did not finish the RDMA CM handshake within "
             "RAILNET_HANDSHAKE_TIMEOUT=%d s", s->dev, rn_config()->handshake_timeout);
        return ncclRemoteError;
    }
    struct comm *c = &s->sc->c;
    struct rdma_cm_event *ev;
    while (RN_CM(get_cm_event)(s->ch, &ev) == 0) {
        int i = qp_of_id(s, ev->id);
        enum rdma_cm_event_type type = ev->event;
        int status = ev->status;
        uint8_t pdata[256];
        size_t len = ev->param.conn.private_data ? ev->param.conn.private_data_len : 0;
        if (len > sizeof(pdata))
            len = sizeof(pdata);
        if (len)
            memcpy(pdata, ev->param.conn.private_data, len);
        RN_CM(ack_cm_event)(ev);
        if (i < 0)
            continue;
        ncclResult_t res = ncclSuccess;
        if (type == RDMA_CM_EVENT_ADDR_RESOLVED) {
            if (RN_CM(resolve_route)(s->ids[i], CM_RESOLVE_MS)) {
                WARN("NET/railnet: connect on device %d: rdma_resolve_route for QP %d: %s", s->dev, i,
                     strerror(errno));
                res = ncclRemoteError;
            }
        } else if (type == RDMA_CM_EVENT_ROUTE_RESOLVED) {
            res = on_route(s, i);
        } else if (type == RDMA_CM_EVENT_CONNECT_RESPONSE) {
            res = on_response(s, i, pdata, len);
        } else if (type == RDMA_CM_EVENT_ESTABLISHED) {
            s->established |= 1u << i;
        } else {
            res = on_failure(s, i, type, status, pdata, len);
        }
        if (res != ncclSuccess)
            return res;
    }
    if (s->established != (1u << c->nqps) - 1)
        return ncclSuccess;
    struct send_comm *sc = s->sc;
    sc->remote_sizes_addr = s->first.sizes_addr;
    for (int k = 0; k < HS_MAX_PORTS; k++)
        sc->remote_sizes_rkey[k] = s->first.sizes_rkey[k < s->first.nports ? k : 0];
    if (comm_take_ids(c, s->ids, c->nqps)) {
        WARN("NET/railnet: connect on device %d: cannot make the comm's CM channel", s->dev);
        return ncclSystemError;
    }
    s->sc = NULL;
    c->ready = 1;
    *done = c;
    return ncclSuccess;
}

ncclResult_t cmsetup_connect(int dev, const struct comm_opts *opts, void *handle, const struct hs_handle *h,
                             void **send_comm)
{
    *send_comm = NULL;
    if (cm_load("connect", dev))
        return ncclSystemError;
    pthread_mutex_lock(&connect_mu);
    struct cm_connect *s = connect_pending;
    while (s && !(s->key == handle && s->dev == dev))
        s = s->next;
    if (!s && (s = calloc(1, sizeof(*s)))) {
        s->key = handle;
        s->dev = dev;
        s->opts.tc = opts ? opts->tc : COMM_TC_DEFAULT;
        s->h = *h;
        s->started_ns = comm_now_ns();
        s->next = connect_pending;
        connect_pending = s;
    }
    pthread_mutex_unlock(&connect_mu);
    if (!s)
        return ncclSystemError;
    struct comm *c;
    ncclResult_t res = connect_step(s, &c);
    if (res != ncclSuccess || c)
        connect_free(s);
    if (c) {
        INFO(NCCL_NET, "NET/railnet: connected on %s with %d QPs over %d port(s) through the RDMA CM", c->dev_name,
             c->nqps, c->nports);
        *send_comm = c;
    }
    return res;
}

#else /* !HAVE_RDMACM: the table says why at the first use */

ncclResult_t cmsetup_listen(int dev, const struct comm_opts *opts, void *handle, void **listen_comm)
{
    (void)opts;
    (void)handle;
    char err[512];
    *listen_comm = NULL;
    rdmacmwrap_global_load(NULL, err, sizeof(err));
    WARN("NET/railnet: listen on device %d: RAILNET_CM=rdmacm: %s", dev, err);
    return ncclSystemError;
}

ncclResult_t cmsetup_connect(int dev, const struct comm_opts *opts, void *handle, const struct hs_handle *h,
                             void **send_comm)
{
    (void)opts;
    (void)handle;
    (void)h;
    char err[512];
    *send_comm = NULL;
    rdmacmwrap_global_load(NULL, err, sizeof(err));
    WARN("NET/railnet: connect on device %d: the handle asks for the RDMA CM: %s", dev, err);
    return ncclSystemError;
}

ncclResult_t cmsetup_accept(void *listen_comm, void **recv_comm)
{
    (void)listen_comm;
    *recv_comm = NULL;
    return ncclInternalError;
}

ncclResult_t cmsetup_close_listen(void *listen_comm)
{
    free(listen_comm);
    return ncclSuccess;
}

#endif
