/* tests/softnic/test_softnic_cm_hostile.c: softnic's librdmacm against a CM
 * peer that is a raw TCP socket speaking its side channel (cm.h's struct
 * cm_msg), as a broken or hostile host could:
 *  - a REQ, then a reset: the listener's process keeps no socket for it
 *    (each one used to stay open: a remote host could exhaust its fds);
 *  - a connection accepted, then rdma_disconnect, and the peer never
 *    answers the DREQ: DISCONNECTED still comes, after the response timeout
 *    (as the kernel's CM gives up its DREQ retries), where it never came;
 *  - a REQ whose CONNECT_REQUEST nobody can read (the listener's channel
 *    destroyed before the REQ came, or with the event unread; a synchronous
 *    listener destroyed with it unread): the peer is rejected at once, and
 *    the child's socket closed, where the child stayed in REQ_RCVD for good
 *    and the peer heard nothing until its own response timeout. */
#include "sntest.h"
#include "sntest_cm.h"
#include "../proc_self.h"
#include "cm.h"

#include <arpa/inet.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A message of type from "QP 0x1234 at 127.0.0.1" (what peer_ok accepts). */
static struct cm_msg msg(uint8_t type)
{
    struct cm_msg m;
    memset(&m, 0, sizeof(m));
    m.magic = CM_MAGIC, m.version = CM_VERSION, m.type = type;
    m.qpn = 0x1234, m.psn = 5;
    m.gid[10] = m.gid[11] = 0xff;
    uint32_t ip = htonl(INADDR_LOOPBACK);
    memcpy(&m.gid[12], &ip, 4);
    m.mtu = IBV_MTU_1024, m.responder_resources = 1, m.initiator_depth = 1, m.retry_count = 7,
    m.rnr_retry_count = 7;
    return m;
}

/* One message of type, whole, on the raw socket s. */
static void send_msg(int s, uint8_t type)
{
    struct cm_msg m = msg(type);
    EXPECT_EQ_INT((int)sizeof(m), (int)send(s, &m, sizeof(m), 0));
}

/* The next whole message on s (zeroed when it does not come whole). */
static struct cm_msg recv_msg(int s)
{
    struct cm_msg m;
    memset(&m, 0, sizeof(m));
    EXPECT_EQ_INT((int)sizeof(m), (int)recv(s, &m, sizeof(m), MSG_WAITALL));
    return m;
}

static int raw_connect(uint16_t port)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in d = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    EXPECT_EQ_INT(0, connect(s, (struct sockaddr *)&d, sizeof(d)));
    return s;
}

static struct rdma_cm_id *listener(struct rdma_event_channel *ch, uint16_t *port)
{
    struct rdma_cm_id *l = NULL;
    EXPECT_EQ_INT(0, rdma_create_id(ch, &l, NULL, RDMA_PS_TCP));
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    EXPECT_EQ_INT(0, rdma_bind_addr(l, (struct sockaddr *)&a));
    EXPECT_EQ_INT(0, rdma_listen(l, 8));
    *port = ntohs(rdma_get_src_port(l));
    return l;
}

/* A listener on a channel of its own (*ch) */
static struct rdma_cm_id *listener_on_new_channel(struct rdma_event_channel **ch, uint16_t *port)
{
    *ch = rdma_create_event_channel();
    EXPECT_TRUE(*ch != NULL);
    return listener(*ch, port);
}

TAP_CASE(test_requests_reset_after_sending_leave_no_socket_open)
{
    struct rdma_event_channel *ch;
    uint16_t port;
    struct rdma_cm_id *l = listener_on_new_channel(&ch, &port);
    int before = proc_self_fds();
    for (int i = 0; i < 50; i++) {
        int s = raw_connect(port);
        send_msg(s, MSG_REQ);
        struct linger lg = { 1, 0 }; /* close = reset */
        setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        close(s);
        usleep(2000);
    }
    /* the REQs that were read before their reset arrive as events: reject
     * them (the application's answer); the others must leave nothing */
    struct rdma_cm_event *e;
    int reqs = 0;
    while ((e = st_cm_next_event(ch, 500))) {
        struct rdma_cm_id *id = e->event == RDMA_CM_EVENT_CONNECT_REQUEST ? e->id : NULL;
        rdma_ack_cm_event(e);
        if (id) {
            reqs++;
            rdma_reject(id, NULL, 0);
            rdma_destroy_id(id);
        }
    }
    int after = proc_self_fds();
    tap_diag("50 REQs then a reset: %d came as events; open fds %d -> %d", reqs, before, after);
    EXPECT_TRUE(after <= before + 2);
    rdma_destroy_id(l);
    rdma_destroy_event_channel(ch);
}

TAP_CASE(test_a_dreq_never_answered_still_ends_in_disconnected)
{
    struct rdma_event_channel *ch;
    uint16_t port;
    struct rdma_cm_id *l = listener_on_new_channel(&ch, &port);
    int s = raw_connect(port);
    send_msg(s, MSG_REQ);
    struct rdma_cm_event *e = st_cm_next_event(ch, 5000);
    EXPECT_TRUE(e && e->event == RDMA_CM_EVENT_CONNECT_REQUEST);
    if (!e)
        return;
    struct rdma_cm_id *c = e->id;
    rdma_ack_cm_event(e);
    struct ibv_qp_init_attr qa = { .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
                                   .qp_type = IBV_QPT_RC };
    EXPECT_EQ_INT(0, rdma_create_qp(c, NULL, &qa));
    struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1, .retry_count = 7,
                                  .rnr_retry_count = 7 };
    EXPECT_EQ_INT(0, rdma_accept(c, &cp));
    EXPECT_EQ_INT(MSG_REP, recv_msg(s).type);
    send_msg(s, MSG_RTU);
    e = st_cm_next_event(ch, 5000);
    EXPECT_TRUE(e && e->event == RDMA_CM_EVENT_ESTABLISHED);
    if (e)
        rdma_ack_cm_event(e);
    uint64_t t0 = st_now_ms();
    EXPECT_EQ_INT(0, rdma_disconnect(c));
    EXPECT_EQ_INT(MSG_DREQ, recv_msg(s).type); /* and no DREP from here */
    e = st_cm_next_event(ch, CM_RESPONSE_TIMEOUT_MS + 5000);
    uint64_t waited = st_now_ms() - t0;
    tap_diag("DISCONNECTED %llu ms after rdma_disconnect (response timeout %d ms)", (unsigned long long)waited,
             CM_RESPONSE_TIMEOUT_MS);
    EXPECT_TRUE(e && e->event == RDMA_CM_EVENT_DISCONNECTED);
    if (e)
        rdma_ack_cm_event(e);
    close(s);
    rdma_destroy_qp(c);
    rdma_destroy_id(c);
    rdma_destroy_id(l);
    rdma_destroy_event_channel(ch);
}

/* Well under CM_RESPONSE_TIMEOUT_MS: an answer within it is the REJ, not
 * the peer giving up. */
#define PROMPT_MS 3000

static bool readable(int fd, int ms)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    return poll(&p, 1, ms) == 1;
}

/* Waits up to 5 s for this process to hold n fds (the engine thread's
 * accept of a side channel is seen no other way from here). */
static bool fds_reach(int n)
{
    for (int i = 0; i < 5000 && proc_self_fds() < n; i++)
        usleep(1000);
    return proc_self_fds() >= n;
}

/* An active id on its own channel, resolved to 127.0.0.1:port, connecting
 * without a QP (conn_param only). */
static struct rdma_cm_id *client_connect(struct rdma_event_channel **cch, uint16_t port)
{
    *cch = rdma_create_event_channel();
    EXPECT_TRUE(*cch != NULL);
    struct rdma_cm_id *c = NULL;
    EXPECT_EQ_INT(0, rdma_create_id(*cch, &c, NULL, RDMA_PS_TCP));
    struct sockaddr_in d = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    EXPECT_EQ_INT(0, rdma_resolve_addr(c, NULL, (struct sockaddr *)&d, 2000));
    if (!st_cm_expect_event(*cch, RDMA_CM_EVENT_ADDR_RESOLVED, 0, 5000))
        return c;
    EXPECT_EQ_INT(0, rdma_resolve_route(c, 2000));
    if (!st_cm_expect_event(*cch, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, 5000))
        return c;
    struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1, .retry_count = 7,
                                  .rnr_retry_count = 7, .qp_num = 0x99 };
    EXPECT_EQ_INT(0, rdma_connect(c, &cp));
    return c;
}

/* The active side is told REJECTED (consumer defined, as by the kernel's CM
 * for a REQ whose id went away) within PROMPT_MS. */
static void expect_prompt_reject(struct rdma_event_channel *cch)
{
    uint64_t t0 = st_now_ms();
    bool came = st_cm_expect_event(cch, RDMA_CM_EVENT_REJECTED, CM_REJ_CONSUMER_DEFINED, PROMPT_MS);
    tap_diag("active side's answer %s after %llu ms", came ? "came" : "had not come",
             (unsigned long long)(st_now_ms() - t0));
}

TAP_CASE(test_a_req_after_the_listeners_channel_died_is_rejected_and_its_socket_closed)
{
    struct rdma_event_channel *ch;
    uint16_t port;
    struct rdma_cm_id *l = listener_on_new_channel(&ch, &port);
    int base = proc_self_fds();
    int s = raw_connect(port);
    /* the child exists (accepted) before its channel goes, so the REQ finds
     * a child and no channel to tell the application on */
    EXPECT_TRUE(fds_reach(base + 2));
    rdma_destroy_event_channel(ch);
    int held = proc_self_fds();   /* the child's socket among them */
    send_msg(s, MSG_REQ);
    bool answered = readable(s, PROMPT_MS);
    EXPECT_TRUE(answered);
    if (answered) {
        struct cm_msg m = recv_msg(s);
        EXPECT_EQ_INT(MSG_REJ, m.type);
        EXPECT_EQ_INT(CM_REJ_CONSUMER_DEFINED, m.reason);
        EXPECT_TRUE(readable(s, PROMPT_MS));
        EXPECT_EQ_INT(0, (int)recv(s, &m, sizeof(m), 0));   /* and the child's socket closed */
        EXPECT_EQ_INT(held - 1, proc_self_fds());
    }
    close(s);
    rdma_destroy_id(l);
}

TAP_CASE(test_a_connect_request_unread_when_its_channel_dies_is_rejected)
{
    struct rdma_event_channel *sch;
    uint16_t port;
    struct rdma_cm_id *l = listener_on_new_channel(&sch, &port);
    struct rdma_event_channel *cch;
    struct rdma_cm_id *c = client_connect(&cch, port);
    EXPECT_TRUE(readable(sch->fd, 5000));   /* CONNECT_REQUEST queued, never read */
    rdma_destroy_event_channel(sch);
    expect_prompt_reject(cch);
    rdma_destroy_id(c);
    rdma_destroy_id(l);
    rdma_destroy_event_channel(cch);
}

TAP_CASE(test_a_request_unclaimed_when_its_synchronous_listener_dies_is_rejected)
{
    uint16_t port;
    struct rdma_cm_id *l = listener(NULL, &port);
    struct rdma_event_channel *cch;
    struct rdma_cm_id *c = client_connect(&cch, port);
    /* a synchronous id's private channel: rdma_get_request would take it */
    EXPECT_TRUE(l->channel && readable(l->channel->fd, 5000));
    rdma_destroy_id(l);
    expect_prompt_reject(cch);
    rdma_destroy_id(c);
    rdma_destroy_event_channel(cch);
}

int main(int argc, char **argv) { return sntest_main(argc, argv); }
