/* tests/softnic/test_softnic_cm.c: softnic's librdmacm seen from a program
 * built against rdma-core's headers: the events of a connection as the
 * kernel CM delivers them (ADDR/ROUTE_RESOLVED, CONNECT_REQUEST with the
 * REQ's private data, ESTABLISHED with the REP's, REJECTED with the peer's
 * reason and private data, DISCONNECTED, TIMEWAIT_EXIT, ADDR_ERROR), the
 * private data limits, ports, options, channels and what is not there.
 * Both ends live in this process, on softnic's loopback ports. */
#include "sntest.h"
#include "sntest_cm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define WAIT_MS 5000

static struct sockaddr_in sin_of(const char *ip, uint16_t port)
{
    struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(port) };
    inet_pton(AF_INET, ip, &s.sin_addr);
    return s;
}

/* A listener on 127.0.0.1 (port chosen by the kernel) and a client id
 * resolved to it, each on its own channel. */
struct pair {
    struct rdma_event_channel *sch, *cch;
    struct rdma_cm_id *listen, *client, *server;
    struct ibv_pd *pd;
    uint16_t port;
};

static void pair_open(struct pair *p)
{
    memset(p, 0, sizeof(*p));
    p->sch = rdma_create_event_channel();
    p->cch = rdma_create_event_channel();
    EXPECT_TRUE(p->sch && p->cch);
    EXPECT_EQ_INT(0, rdma_create_id(p->sch, &p->listen, NULL, RDMA_PS_TCP));
    struct sockaddr_in a = sin_of("127.0.0.1", 0);
    EXPECT_EQ_INT(0, rdma_bind_addr(p->listen, (struct sockaddr *)&a));
    EXPECT_EQ_INT(0, rdma_listen(p->listen, 8));
    p->port = ntohs(rdma_get_src_port(p->listen));
    EXPECT_TRUE(p->port != 0);
    EXPECT_EQ_INT(0, rdma_create_id(p->cch, &p->client, NULL, RDMA_PS_TCP));
    struct sockaddr_in d = sin_of("127.0.0.1", p->port);
    EXPECT_EQ_INT(0, rdma_resolve_addr(p->client, NULL, (struct sockaddr *)&d, 2000));
    st_cm_expect_event(p->cch, RDMA_CM_EVENT_ADDR_RESOLVED, 0, WAIT_MS);
    EXPECT_EQ_INT(0, rdma_resolve_route(p->client, 2000));
    st_cm_expect_event(p->cch, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, WAIT_MS);
    EXPECT_TRUE(p->client->verbs != NULL);
    EXPECT_EQ_INT(1, p->client->port_num);
}

static void pair_qp(struct rdma_cm_id *id)
{
    struct ibv_qp_init_attr a = {
        .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
        .qp_type = IBV_QPT_RC,
    };
    EXPECT_EQ_INT(0, rdma_create_qp(id, NULL, &a));
    EXPECT_TRUE(id->qp && id->send_cq && id->recv_cq && id->pd);
}

/* Sends a REQ with pdata and returns the server side's CONNECT_REQUEST. */
static struct rdma_cm_event *pair_request(struct pair *p, const void *pdata, uint8_t len)
{
    struct rdma_conn_param cp = {
        .private_data = pdata, .private_data_len = len,
        .responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7,
    };
    EXPECT_EQ_INT(0, rdma_connect(p->client, &cp));
    struct rdma_cm_event *e = st_cm_next_event(p->sch, WAIT_MS);
    EXPECT_TRUE(e != NULL);
    if (!e)
        return NULL;
    EXPECT_EQ_INT(RDMA_CM_EVENT_CONNECT_REQUEST, e->event);
    EXPECT_TRUE(e->listen_id == p->listen);
    p->server = e->id;
    return e;
}

static void pair_close(struct pair *p)
{
    if (p->server) {
        rdma_destroy_qp(p->server);
        rdma_destroy_id(p->server);
    }
    rdma_destroy_qp(p->client);
    rdma_destroy_id(p->client);
    rdma_destroy_id(p->listen);
    rdma_destroy_event_channel(p->cch);
    rdma_destroy_event_channel(p->sch);
}

TAP_CASE(test_connect_carries_private_data_both_ways_and_qps_reach_rts)
{
    struct pair p;
    pair_open(&p);
    pair_qp(p.client);
    struct rdma_cm_event *req = pair_request(&p, "hello-req", 10);
    if (!req)
        return;
    /* the REQ's whole private data field, zero-padded: 56 bytes */
    EXPECT_EQ_INT(56, req->param.conn.private_data_len);
    EXPECT_MEMEQ("hello-req", req->param.conn.private_data, 10);
    EXPECT_EQ_INT(0, ((const char *)req->param.conn.private_data)[55]);
    EXPECT_EQ_INT(p.client->qp->qp_num, req->param.conn.qp_num);
    EXPECT_TRUE(p.server->verbs != NULL);
    pair_qp(p.server);
    rdma_ack_cm_event(req);
    struct rdma_conn_param ap = { .private_data = "hello-rep", .private_data_len = 10,
                                  .responder_resources = 1, .initiator_depth = 1,
                                  .rnr_retry_count = 7 };
    EXPECT_EQ_INT(0, rdma_accept(p.server, &ap));
    struct rdma_cm_event *e = st_cm_next_event(p.cch, WAIT_MS);
    EXPECT_TRUE(e != NULL);
    if (e) {
        EXPECT_EQ_INT(RDMA_CM_EVENT_ESTABLISHED, e->event);
        EXPECT_EQ_INT(196, e->param.conn.private_data_len);
        EXPECT_MEMEQ("hello-rep", e->param.conn.private_data, 10);
        rdma_ack_cm_event(e);
    }
    st_cm_expect_event(p.sch, RDMA_CM_EVENT_ESTABLISHED, 0, WAIT_MS);
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qi;
    EXPECT_EQ_INT(0, ibv_query_qp(p.client->qp, &qa, IBV_QP_STATE | IBV_QP_DEST_QPN, &qi));
    EXPECT_EQ_INT(IBV_QPS_RTS, qa.qp_state);
    EXPECT_EQ_INT(p.server->qp->qp_num, qa.dest_qp_num);
    /* the ports seen from both ends agree */
    EXPECT_EQ_INT(ntohs(rdma_get_dst_port(p.client)), ntohs(rdma_get_src_port(p.server)));
    EXPECT_EQ_INT(ntohs(rdma_get_src_port(p.client)), ntohs(rdma_get_dst_port(p.server)));
    /* RoCE v2: the route's GIDs are the IPv4-mapped addresses */
    union ibv_gid g = p.client->route.addr.addr.ibaddr.sgid;
    static const uint8_t want[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1 };
    EXPECT_MEMEQ(want, g.raw, 16);

    /* a message through the connected QPs */
    char sbuf[16] = "through-the-cm", rbuf[16] = { 0 };
    struct ibv_mr *smr = ibv_reg_mr(p.client->pd, sbuf, sizeof(sbuf), IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr *rmr = ibv_reg_mr(p.server->pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
    EXPECT_TRUE(smr && rmr);
    st_post_recv(p.server->qp, 7, rbuf, sizeof(rbuf), rmr->lkey);
    st_post_send(p.client->qp, 8, sbuf, sizeof(sbuf), smr->lkey, IBV_SEND_SIGNALED);
    struct ibv_wc wc;
    st_wait_wc(p.server->recv_cq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 7);
    EXPECT_MEMEQ("through-the-cm", rbuf, 15);
    st_wait_wc(p.client->send_cq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 8);

    /* disconnect: both sides hear it, then leave timewait */
    EXPECT_EQ_INT(0, rdma_disconnect(p.client));
    st_cm_expect_event(p.sch, RDMA_CM_EVENT_DISCONNECTED, 0, WAIT_MS);
    st_cm_expect_event(p.cch, RDMA_CM_EVENT_DISCONNECTED, 0, WAIT_MS);
    EXPECT_EQ_INT(0, ibv_query_qp(p.client->qp, &qa, IBV_QP_STATE, &qi));
    EXPECT_EQ_INT(IBV_QPS_ERR, qa.qp_state);
    EXPECT_EQ_INT(0, rdma_disconnect(p.server));
    st_cm_expect_event(p.cch, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0, WAIT_MS);
    st_cm_expect_event(p.sch, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0, WAIT_MS);
    ibv_dereg_mr(smr);
    ibv_dereg_mr(rmr);
    pair_close(&p);
}

TAP_CASE(test_reject_reaches_the_client_with_reason_28_and_private_data)
{
    struct pair p;
    pair_open(&p);
    pair_qp(p.client);
    struct rdma_cm_event *req = pair_request(&p, "x", 1);
    if (!req)
        return;
    rdma_ack_cm_event(req);
    EXPECT_EQ_INT(0, rdma_reject(p.server, "go-away", 8));
    struct rdma_cm_event *e = st_cm_next_event(p.cch, WAIT_MS);
    EXPECT_TRUE(e != NULL);
    if (e) {
        EXPECT_EQ_INT(RDMA_CM_EVENT_REJECTED, e->event);
        EXPECT_EQ_INT(28, e->status);
        EXPECT_EQ_INT(148, e->param.conn.private_data_len);
        EXPECT_MEMEQ("go-away", e->param.conn.private_data, 8);
        rdma_ack_cm_event(e);
    }
    pair_close(&p);
}

TAP_CASE(test_private_data_beyond_the_cm_limits_is_refused)
{
    struct pair p;
    pair_open(&p);
    pair_qp(p.client);
    char big[200] = { 0 };
    struct rdma_conn_param cp = { .private_data = big, .private_data_len = 57 };
    errno = 0;
    EXPECT_EQ_INT(-1, rdma_connect(p.client, &cp));
    EXPECT_EQ_INT(EINVAL, errno);
    struct rdma_cm_event *req = pair_request(&p, big, 56);
    if (!req)
        return;
    rdma_ack_cm_event(req);
    pair_qp(p.server);
    struct rdma_conn_param ap = { .private_data = big, .private_data_len = 197 };
    errno = 0;
    EXPECT_EQ_INT(-1, rdma_accept(p.server, &ap));
    EXPECT_EQ_INT(EINVAL, errno);
    errno = 0;
    EXPECT_EQ_INT(-1, rdma_reject(p.server, big, 149));
    EXPECT_EQ_INT(EINVAL, errno);
    EXPECT_EQ_INT(0, rdma_reject(p.server, big, 148));
    st_cm_expect_event(p.cch, RDMA_CM_EVENT_REJECTED, 28, WAIT_MS);
    pair_close(&p);
}

/* The listener's port is held by a socket bound and not listening, so
 * that no other process's listener (tests run side by side) takes it
 * within the CM's grace for a listener that is not up yet: connected to
 * some other server, the REQ would get no REP. */
TAP_CASE(test_no_listener_is_rejected_with_reason_8)
{
    struct pair p;
    pair_open(&p);
    pair_qp(p.client);
    rdma_destroy_id(p.listen);   /* the port has nobody now */
    int hold = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = sin_of("127.0.0.1", p.port);
    EXPECT_TRUE(hold >= 0);
    EXPECT_EQ_INT(0, bind(hold, (struct sockaddr *)&a, sizeof(a)));
    EXPECT_EQ_INT(0, rdma_create_id(p.sch, &p.listen, NULL, RDMA_PS_TCP));
    struct rdma_conn_param cp = { .retry_count = 7 };
    EXPECT_EQ_INT(0, rdma_connect(p.client, &cp));
    st_cm_expect_event(p.cch, RDMA_CM_EVENT_REJECTED, 8, WAIT_MS);
    close(hold);
    pair_close(&p);
}

/* While an id's side channel is refused and tried again, its source port
 * stays its own: a socket of another process that binds it then (here one
 * of this process, as a test beside it would) is refused, and the id ends
 * REJECTED 8, not UNREACHABLE for a port it could not bind again. */
TAP_CASE(test_a_refused_id_keeps_its_source_port_between_tries)
{
    struct pair p;
    pair_open(&p);
    pair_qp(p.client);
    rdma_destroy_id(p.listen);
    int hold = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = sin_of("127.0.0.1", p.port);
    EXPECT_TRUE(hold >= 0);
    EXPECT_EQ_INT(0, bind(hold, (struct sockaddr *)&a, sizeof(a)));
    EXPECT_EQ_INT(0, rdma_create_id(p.sch, &p.listen, NULL, RDMA_PS_TCP));
    struct sockaddr_in src = sin_of("127.0.0.1", ntohs(rdma_get_src_port(p.client)));
    EXPECT_TRUE(src.sin_port != 0);
    struct rdma_conn_param cp = { .retry_count = 7 };
    EXPECT_EQ_INT(0, rdma_connect(p.client, &cp));
    /* tries to take the id's port over the CM's 1 s grace */
    int took = 0, tries = 0;
    for (uint64_t end = st_now_ms() + 800; st_now_ms() < end && !took; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        EXPECT_TRUE(fd >= 0);
        took = bind(fd, (struct sockaddr *)&src, sizeof(src)) == 0;
        close(fd);
        usleep(1000);
    }
    tap_diag("%d binds of the id's source port tried", tries);
    EXPECT_EQ_INT(0, took);
    st_cm_expect_event(p.cch, RDMA_CM_EVENT_REJECTED, 8, WAIT_MS);
    close(hold);
    pair_close(&p);
}

/* An active id bound to the very port it connects to, nobody listening
 * there: its side channel meets itself (TCP's simultaneous open), which is
 * no peer: REJECTED with reason 8 as for any port without a listener, not
 * its own REQ read back as an answer.  An unbound id's port can be such a
 * port by chance (one a listener just gave up). */
TAP_CASE(test_a_connect_to_its_own_port_is_rejected_with_reason_8)
{
    struct pair p;
    pair_open(&p);
    uint16_t port = p.port;
    rdma_destroy_id(p.listen);
    EXPECT_EQ_INT(0, rdma_create_id(p.sch, &p.listen, NULL, RDMA_PS_TCP));
    rdma_destroy_id(p.client);
    EXPECT_EQ_INT(0, rdma_create_id(p.cch, &p.client, NULL, RDMA_PS_TCP));
    struct sockaddr_in src = sin_of("127.0.0.1", port), dst = sin_of("127.0.0.1", port);
    EXPECT_EQ_INT(0, rdma_bind_addr(p.client, (struct sockaddr *)&src));
    EXPECT_EQ_INT(0, rdma_resolve_addr(p.client, NULL, (struct sockaddr *)&dst, 2000));
    st_cm_expect_event(p.cch, RDMA_CM_EVENT_ADDR_RESOLVED, 0, WAIT_MS);
    EXPECT_EQ_INT(0, rdma_resolve_route(p.client, 2000));
    st_cm_expect_event(p.cch, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, WAIT_MS);
    pair_qp(p.client);
    struct rdma_conn_param cp = { .retry_count = 7 };
    EXPECT_EQ_INT(0, rdma_connect(p.client, &cp));
    st_cm_expect_event(p.cch, RDMA_CM_EVENT_REJECTED, 8, WAIT_MS);
    pair_close(&p);
}

TAP_CASE(test_server_id_destroyed_before_accept_rejects_the_client)
{
    struct pair p;
    pair_open(&p);
    pair_qp(p.client);
    struct rdma_cm_event *req = pair_request(&p, NULL, 0);
    if (!req)
        return;
    rdma_ack_cm_event(req);
    rdma_destroy_id(p.server);   /* the peer goes away during the connect */
    p.server = NULL;
    st_cm_expect_event(p.cch, RDMA_CM_EVENT_REJECTED, 28, WAIT_MS);
    pair_close(&p);
}

TAP_CASE(test_an_address_no_port_routes_to_is_an_addr_error)
{
    struct rdma_event_channel *ch = rdma_create_event_channel();
    struct rdma_cm_id *id;
    EXPECT_EQ_INT(0, rdma_create_id(ch, &id, NULL, RDMA_PS_TCP));
    /* TEST-NET-1: no softnic port is the source of a route there */
    struct sockaddr_in d = sin_of("192.0.2.1", 7471);
    EXPECT_EQ_INT(0, rdma_resolve_addr(id, NULL, (struct sockaddr *)&d, 2000));
    struct rdma_cm_event *e = st_cm_next_event(ch, WAIT_MS);
    EXPECT_TRUE(e != NULL);
    if (e) {
        EXPECT_EQ_INT(RDMA_CM_EVENT_ADDR_ERROR, e->event);
        EXPECT_TRUE(e->status == -ENODEV || e->status == -ENETUNREACH);
        rdma_ack_cm_event(e);
    }
    /* a local address that is no softnic port, and one that is not here */
    struct rdma_cm_id *id2;
    EXPECT_EQ_INT(0, rdma_create_id(ch, &id2, NULL, RDMA_PS_TCP));
    struct sockaddr_in b = sin_of("127.0.0.9", 0);
    errno = 0;
    EXPECT_EQ_INT(-1, rdma_bind_addr(id2, (struct sockaddr *)&b));
    EXPECT_EQ_INT(ENODEV, errno);
    b = sin_of("192.0.2.1", 0);
    errno = 0;
    EXPECT_EQ_INT(-1, rdma_bind_addr(id2, (struct sockaddr *)&b));
    EXPECT_EQ_INT(EADDRNOTAVAIL, errno);
    rdma_destroy_id(id2);
    rdma_destroy_id(id);
    rdma_destroy_event_channel(ch);
}

TAP_CASE(test_two_listeners_on_one_address_and_port_conflict)
{
    struct pair p;
    pair_open(&p);
    struct rdma_cm_id *l2;
    EXPECT_EQ_INT(0, rdma_create_id(p.sch, &l2, NULL, RDMA_PS_TCP));
    struct sockaddr_in a = sin_of("127.0.0.1", p.port);
    errno = 0;
    int rc = rdma_bind_addr(l2, (struct sockaddr *)&a);
    if (rc == 0)
        rc = rdma_listen(l2, 1);
    EXPECT_EQ_INT(-1, rc);
    EXPECT_EQ_INT(EADDRINUSE, errno);
    rdma_destroy_id(l2);
    pair_close(&p);
}

TAP_CASE(test_channel_fd_is_pollable_and_nonblocking_reads_say_eagain)
{
    struct rdma_event_channel *ch = rdma_create_event_channel();
    EXPECT_TRUE(ch != NULL);
    fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
    struct rdma_cm_event *e;
    errno = 0;
    EXPECT_EQ_INT(-1, rdma_get_cm_event(ch, &e));
    EXPECT_EQ_INT(EAGAIN, errno);
    struct rdma_cm_id *id;
    EXPECT_EQ_INT(0, rdma_create_id(ch, &id, NULL, RDMA_PS_TCP));
    struct sockaddr_in d = sin_of("127.0.0.2", 9);
    EXPECT_EQ_INT(0, rdma_resolve_addr(id, NULL, (struct sockaddr *)&d, 2000));
    struct pollfd pf = { .fd = ch->fd, .events = POLLIN };
    EXPECT_EQ_INT(1, poll(&pf, 1, WAIT_MS));
    EXPECT_EQ_INT(0, rdma_get_cm_event(ch, &e));
    EXPECT_EQ_INT(RDMA_CM_EVENT_ADDR_RESOLVED, e->event);
    EXPECT_TRUE(e->id == id);
    EXPECT_EQ_INT(2, id->port_num);   /* 127.0.0.2 is port 2's address */
    rdma_ack_cm_event(e);
    EXPECT_EQ_INT(0, poll(&pf, 1, 0));
    rdma_destroy_id(id);
    rdma_destroy_event_channel(ch);
}

TAP_CASE(test_migrate_id_moves_its_events_to_the_new_channel)
{
    struct rdma_event_channel *a = rdma_create_event_channel(), *b = rdma_create_event_channel();
    struct rdma_cm_id *id;
    EXPECT_EQ_INT(0, rdma_create_id(a, &id, NULL, RDMA_PS_TCP));
    struct sockaddr_in d = sin_of("127.0.0.1", 9);
    EXPECT_EQ_INT(0, rdma_resolve_addr(id, NULL, (struct sockaddr *)&d, 2000));
    EXPECT_EQ_INT(0, rdma_migrate_id(id, b));
    EXPECT_TRUE(id->channel == b);
    st_cm_expect_event(b, RDMA_CM_EVENT_ADDR_RESOLVED, 0, WAIT_MS);
    struct pollfd pf = { .fd = a->fd, .events = POLLIN };
    EXPECT_EQ_INT(0, poll(&pf, 1, 0));
    rdma_destroy_id(id);
    rdma_destroy_event_channel(a);
    rdma_destroy_event_channel(b);
}

TAP_CASE(test_options_and_what_is_not_there)
{
    struct rdma_cm_id *id;
    struct rdma_event_channel *ch = rdma_create_event_channel();
    EXPECT_EQ_INT(0, rdma_create_id(ch, &id, NULL, RDMA_PS_TCP));
    uint8_t tos = 32;
    int one = 1;
    EXPECT_EQ_INT(0, rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos)));
    EXPECT_EQ_INT(0, rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof(one)));
    errno = 0;
    EXPECT_EQ_INT(-1, rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &one, sizeof(one)));
    EXPECT_EQ_INT(EINVAL, errno);
    char path[64] = { 0 };
    errno = 0;
    EXPECT_EQ_INT(-1, rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, path, sizeof(path)));
    EXPECT_EQ_INT(EINVAL, errno);
    struct sockaddr_in mc = sin_of("239.1.1.1", 0);
    errno = 0;
    EXPECT_EQ_INT(-1, rdma_join_multicast(id, (struct sockaddr *)&mc, NULL));
    EXPECT_EQ_INT(ENOSYS, errno);
    EXPECT_STREQ("RDMA_CM_EVENT_TIMEWAIT_EXIT", rdma_event_str(RDMA_CM_EVENT_TIMEWAIT_EXIT));
    int n = 0;
    struct ibv_context **devs = rdma_get_devices(&n);
    EXPECT_TRUE(devs != NULL && n >= 1 && devs[n] == NULL);
    EXPECT_STREQ("softnic0", ibv_get_device_name(devs[0]->device));
    rdma_free_devices(devs);
    rdma_destroy_id(id);
    /* UD ids exist, as in the kernel, but softnic has no UD service */
    EXPECT_EQ_INT(0, rdma_create_id(ch, &id, NULL, RDMA_PS_UDP));
    EXPECT_EQ_INT(IBV_QPT_UD, id->qp_type);
    errno = 0;
    EXPECT_EQ_INT(-1, rdma_listen(id, 1));
    EXPECT_EQ_INT(ENOSYS, errno);
    rdma_destroy_id(id);
    rdma_destroy_event_channel(ch);
}

int main(int argc, char **argv) { return sntest_main(argc, argv); }
