/* tests/plugin/test_conn_cm.c: connection set-up through the RDMA CM
 * (RAILNET_CM=rdmacm), through the plugin's exported table on softnic (its
 * libibverbs and librdmacm). The happy path (a handle that says CM, data
 * through the connected QPs, the log naming the CM), and the faults: a
 * listener that rejects (another listener's handle), an address nothing
 * routes to, a peer that goes away during the connect, and a stranger
 * sending forged private data, whom the listener rejects with the reason
 * while it goes on serving. The test plays the stranger and the vanishing
 * peer with librdmacm itself (softnic's, as the plugin's). */
#include "../tap.h"
#include "nccl_net_v8.h"
#include "plugin/ib/handshake.h"
#include "built_plugin.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const ncclNet_v8_t *net;
static char warns[16384], infos[16384];

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...)
{
    (void)flags, (void)file, (void)line;
    char *buf = level == NCCL_LOG_WARN ? warns : level == NCCL_LOG_INFO ? infos : NULL;
    if (!buf)
        return;
    va_list ap;
    va_start(ap, fmt);
    built_log_append(buf, sizeof(warns), fmt, ap); /* infos is as large */
    va_end(ap);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int load(void)
{
    setenv("RAILNET_CM", "rdmacm", 1);
    setenv("RAILNET_HANDSHAKE_TIMEOUT", "20", 1);
    if (!(net = built_plugin_load(logger, NULL)))
        return -1;
    warns[0] = infos[0] = '\0';
    return 0;
}

/* Connect until a comm or an error, within seconds; accept alongside when
 * lc is given. Returns connect's last result (ncclInProgress: time ran out). */
static ncclResult_t drive(void *handle, void **sc, void *lc, void **rc, double seconds)
{
    double t0 = now_s();
    *sc = NULL;
    if (rc)
        *rc = NULL;
    ncclResult_t r = ncclSuccess;
    while (now_s() - t0 < seconds) {
        if (!*sc && (r = net->connect(0, handle, sc, NULL)) != ncclSuccess)
            return r;
        if (lc && !*rc && net->accept(lc, rc, NULL) != ncclSuccess)
            return ncclInternalError;
        if (*sc && (!lc || *rc))
            return ncclSuccess;
        usleep(50);
    }
    return ncclInProgress;
}

/* One message each way the comms allow (send -> recv), checked. */
static int one_message(void *sc, void *rc)
{
    static char sbuf[100000], rbuf[100000];
    for (size_t i = 0; i < sizeof(sbuf); i++)
        sbuf[i] = (char)(i * 7 + 3);
    memset(rbuf, 0, sizeof(rbuf));
    void *smh, *rmh, *sr = NULL, *rr = NULL;
    if (net->regMr(sc, sbuf, sizeof(sbuf), NCCL_PTR_HOST, &smh) || net->regMr(rc, rbuf, sizeof(rbuf), NCCL_PTR_HOST, &rmh))
        return 0;
    void *data = rbuf;
    int size = (int)sizeof(rbuf);
    int tag = 5, sdone = 0, rdone = 0, got = 0;
    double t0 = now_s();
    while ((!sdone || !rdone) && now_s() - t0 < 20) {
        if (!rr && net->irecv(rc, 1, &data, &size, &tag, &rmh, &rr))
            break;
        if (!sr && net->isend(sc, sbuf, sizeof(sbuf), tag, smh, &sr))
            break;
        int n;
        if (sr && !sdone && net->test(sr, &sdone, &n))
            break;
        if (rr && !rdone && net->test(rr, &rdone, &got))
            break;
    }
    net->deregMr(sc, smh);
    net->deregMr(rc, rmh);
    return sdone && rdone && got == (int)sizeof(sbuf) && !memcmp(sbuf, rbuf, sizeof(sbuf));
}

TAP_CASE(test_cm_handle_connect_accept_and_data)
{
    if (load()) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    uint8_t handle[HS_HANDLE_SIZE];
    void *lc = NULL, *sc, *rc;
    EXPECT_EQ_INT(ncclSuccess, net->listen(0, handle, &lc));
    struct hs_handle h;
    char err[HS_ERR_LEN];
    EXPECT_EQ_INT(HS_OK, hs_handle_parse(handle, sizeof(handle), &h, err));
    EXPECT_EQ_INT(1, h.cm);
    EXPECT_EQ_INT(ncclSuccess, drive(handle, &sc, lc, &rc, 20));
    EXPECT_TRUE(sc && rc);
    if (sc && rc)
        EXPECT_TRUE(one_message(sc, rc));
    EXPECT_TRUE(strstr(infos, "through the RDMA CM (RAILNET_CM=rdmacm)") != NULL);
    EXPECT_TRUE(strstr(infos, "connected on softnic0 with") != NULL);
    EXPECT_TRUE(strstr(infos, "accepted a connection on softnic0") != NULL);
    if (warns[0])
        printf("# warnings: %s\n", warns);
    EXPECT_TRUE(warns[0] == '\0');
    net->closeSend(sc);
    net->closeRecv(rc);
    net->closeListen(lc);
}

TAP_CASE(test_cm_listener_rejects_another_listeners_handle)
{
    if (load()) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    uint8_t handle[HS_HANDLE_SIZE], forged[HS_HANDLE_SIZE];
    void *lc = NULL, *sc, *rc;
    EXPECT_EQ_INT(ncclSuccess, net->listen(0, handle, &lc));
    struct hs_handle h;
    char err[HS_ERR_LEN];
    EXPECT_EQ_INT(HS_OK, hs_handle_parse(handle, sizeof(handle), &h, err));
    h.nonce ^= 0x5a5a;
    hs_handle_encode(&h, forged);
    EXPECT_EQ_INT(ncclInvalidUsage, drive(forged, &sc, lc, &rc, 20));
    EXPECT_TRUE(strstr(warns, "another listener") != NULL);
    EXPECT_TRUE(strstr(warns, "rejected the connection: the handle was issued by another device") != NULL);
    /* the listener goes on */
    EXPECT_EQ_INT(ncclSuccess, drive(handle, &sc, lc, &rc, 20));
    EXPECT_TRUE(sc && rc);
    net->closeSend(sc);
    net->closeRecv(rc);
    net->closeListen(lc);
}

TAP_CASE(test_cm_unreachable_address_fails_the_connect)
{
    if (load()) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    uint8_t handle[HS_HANDLE_SIZE], bad[HS_HANDLE_SIZE];
    void *lc = NULL, *sc;
    EXPECT_EQ_INT(ncclSuccess, net->listen(0, handle, &lc));
    struct hs_handle h;
    char err[HS_ERR_LEN];
    EXPECT_EQ_INT(HS_OK, hs_handle_parse(handle, sizeof(handle), &h, err));
    /* TEST-NET-1: no softnic port routes there */
    uint8_t a[4] = { 192, 0, 2, 1 };
    memcpy(h.addr, a, 4);
    memcpy(h.addr + 4, a, 4);
    hs_handle_encode(&h, bad);
    double t0 = now_s();
    ncclResult_t r = drive(bad, &sc, NULL, NULL, 20);
    if (!strstr(warns, "ADDR_ERROR"))
        printf("# warnings: %s\n", warns);
    EXPECT_TRUE(r != ncclSuccess && r != ncclInProgress);
    EXPECT_TRUE(now_s() - t0 < 15);
    EXPECT_TRUE(strstr(warns, "RDMA_CM_EVENT_ADDR_ERROR") != NULL || strstr(warns, "address resolution") != NULL);
    net->closeListen(lc);
}

/* The test's own CM listener on 127.0.0.1 (a peer the test controls). */
struct raw {
    struct rdma_event_channel *ch;
    struct rdma_cm_id *id;
    uint16_t port;
};

static int raw_listen(struct raw *r)
{
    r->ch = rdma_create_event_channel();
    struct sockaddr_in sa = { .sin_family = AF_INET };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (!r->ch || rdma_create_id(r->ch, &r->id, NULL, RDMA_PS_TCP) || rdma_bind_addr(r->id, (struct sockaddr *)&sa) ||
        rdma_listen(r->id, 8))
        return -1;
    r->port = ntohs(rdma_get_src_port(r->id));
    fcntl(r->ch->fd, F_SETFL, fcntl(r->ch->fd, F_GETFL) | O_NONBLOCK);
    return 0;
}

TAP_CASE(test_cm_peer_gone_during_connect_fails_it)
{
    if (load()) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    uint8_t handle[HS_HANDLE_SIZE], peer[HS_HANDLE_SIZE];
    void *lc = NULL, *sc = NULL;
    EXPECT_EQ_INT(ncclSuccess, net->listen(0, handle, &lc));
    struct raw r;
    EXPECT_EQ_INT(0, raw_listen(&r));
    struct hs_handle h;
    char err[HS_ERR_LEN];
    EXPECT_EQ_INT(HS_OK, hs_handle_parse(handle, sizeof(handle), &h, err));
    h.nports = 1;   /* every QP to the test's listener on 127.0.0.1 */
    memset(h.addr + 4, 0, 4);
    h.tcp_port = r.port;
    hs_handle_encode(&h, peer);
    /* the peer takes the requests, then vanishes before answering */
    int requests = 0;
    ncclResult_t res = ncclSuccess;
    double t0 = now_s();
    while (now_s() - t0 < 20 && res == ncclSuccess && !sc) {
        res = net->connect(0, peer, &sc, NULL);
        struct rdma_cm_event *ev;
        while (rdma_get_cm_event(r.ch, &ev) == 0) {
            struct rdma_cm_id *child = ev->event == RDMA_CM_EVENT_CONNECT_REQUEST ? ev->id : NULL;
            rdma_ack_cm_event(ev);
            if (child) {
                requests++;
                rdma_destroy_id(child);
            }
        }
        usleep(50);
    }
    EXPECT_TRUE(requests >= 1);
    EXPECT_TRUE(sc == NULL);
    EXPECT_EQ_INT(ncclRemoteError, res);
    EXPECT_TRUE(strstr(warns, "RDMA_CM_EVENT_REJECTED") != NULL);
    if (!strstr(warns, "REJECTED"))
        printf("# warnings: %s\n", warns);
    rdma_destroy_id(r.id);
    rdma_destroy_event_channel(r.ch);
    net->closeListen(lc);
}

TAP_CASE(test_cm_forged_private_data_is_rejected_and_the_listener_goes_on)
{
    if (load()) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    uint8_t handle[HS_HANDLE_SIZE];
    void *lc = NULL, *sc, *rc = NULL;
    EXPECT_EQ_INT(ncclSuccess, net->listen(0, handle, &lc));
    struct hs_handle h;
    char err[HS_ERR_LEN];
    EXPECT_EQ_INT(HS_OK, hs_handle_parse(handle, sizeof(handle), &h, err));
    /* a stranger: a CM connection to the listener with a forged HELLO (a
     * real one with its conn id and checksum bytes scrambled) */
    struct rdma_event_channel *ch = rdma_create_event_channel();
    struct rdma_cm_id *id;
    EXPECT_EQ_INT(0, rdma_create_id(ch, &id, NULL, RDMA_PS_TCP));
    struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(h.tcp_port) };
    memcpy(&dst.sin_addr, h.addr, 4);
    EXPECT_EQ_INT(0, rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000));
    struct rdma_cm_event *ev;
    EXPECT_EQ_INT(0, rdma_get_cm_event(ch, &ev));
    EXPECT_EQ_INT(RDMA_CM_EVENT_ADDR_RESOLVED, ev->event);
    rdma_ack_cm_event(ev);
    EXPECT_EQ_INT(0, rdma_resolve_route(id, 2000));
    EXPECT_EQ_INT(0, rdma_get_cm_event(ch, &ev));
    EXPECT_EQ_INT(RDMA_CM_EVENT_ROUTE_RESOLVED, ev->event);
    rdma_ack_cm_event(ev);
    struct hs_cm_hello m = { .qp_index = 0, .nqps = 1, .nports = 1, .link_layer = 2, .conn_id = 42,
                             .nonce = h.nonce, .target_guid = h.guid, .cts_addr = 0x1000 };
    uint8_t pd[HS_CM_HELLO_SIZE];
    EXPECT_EQ_INT(HS_CM_HELLO_SIZE, hs_cm_hello_encode(&m, HS_VERSION, pd, sizeof(pd)));
    pd[14] ^= 0xff;
    pd[53] ^= 0x0f;
    struct rdma_conn_param cp = { .private_data = pd, .private_data_len = sizeof(pd), .qp_num = 0x42,
                                  .retry_count = 7, .rnr_retry_count = 7 };
    EXPECT_EQ_INT(0, rdma_connect(id, &cp));
    /* the listener answers with a reject carrying its reason, and no comm */
    struct pollfd p = { .fd = ch->fd, .events = POLLIN };
    double t0 = now_s();
    while (poll(&p, 1, 0) == 0 && now_s() - t0 < 20) {
        EXPECT_EQ_INT(ncclSuccess, net->accept(lc, &rc, NULL));
        EXPECT_TRUE(rc == NULL);
        usleep(100);
    }
    EXPECT_EQ_INT(0, rdma_get_cm_event(ch, &ev));
    EXPECT_EQ_INT(RDMA_CM_EVENT_REJECTED, ev->event);
    EXPECT_EQ_INT(28, ev->status);
    struct hs_cm_reply rep;
    EXPECT_EQ_INT(HS_OK, hs_cm_reply_parse(ev->param.conn.private_data, ev->param.conn.private_data_len, &rep, err));
    EXPECT_EQ_INT(HS_REJECT_PROTOCOL, rep.status);
    rdma_ack_cm_event(ev);
    EXPECT_TRUE(strstr(warns, "rejecting an RDMA CM connection request") != NULL);
    EXPECT_TRUE(strstr(warns, "checksum") != NULL);
    rdma_destroy_id(id);
    rdma_destroy_event_channel(ch);
    /* and then serves a real peer */
    EXPECT_EQ_INT(ncclSuccess, drive(handle, &sc, lc, &rc, 20));
    EXPECT_TRUE(sc && rc);
    net->closeSend(sc);
    net->closeRecv(rc);
    net->closeListen(lc);
}

/* Runs on softnic's librdmacm (the test's own calls and the plugin's): the
 * first run puts softnic's directory first on LD_LIBRARY_PATH and
 * re-executes itself. */
int main(int argc, char **argv)
{
    const char *top = getenv("top_builddir");
    if (!getenv("RN_TEST_CM_REEXEC")) {
        char dir[4096], path[8192];
        snprintf(dir, sizeof(dir), "%s/tests/softnic", top ? top : ".");
        const char *old = getenv("LD_LIBRARY_PATH");
        snprintf(path, sizeof(path), "%s%s%s", dir, old ? ":" : "", old ? old : "");
        setenv("LD_LIBRARY_PATH", path, 1);
        setenv("RN_TEST_CM_REEXEC", "1", 1);
        execv("/proc/self/exe", argv);
        perror("execv /proc/self/exe");
        return 1;
    }
    return tap_run(argc, argv);
}
