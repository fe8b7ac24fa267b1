/* tests/plugin/test_gin_hostile.c: the GIN table against a peer that breaks
 * off, and against a caller's bad pointer, in one process on softnic:
 *  - a "rank 1" that sends rank 0's listener a valid HELLO and resets the
 *    connection before the REPLY: rank 0's connect fails with a WARN, and
 *    the socket is closed once (this program's close() counts a second
 *    close of a number already closed: with threads, a number closed twice
 *    may by then be another thread's file);
 *  - test() with a pointer into the middle of a live request: refused
 *    (ncclInvalidArgument), no field of it read as a request;
 *  - ranks 1 and 2 of three speaking the GIN wire from this thread through
 *    READY, then rank 1 sending a WIN of the wrong length in rank 0's
 *    regMrSym: that regMrSym fails, and so does the next one at once on the
 *    failed collComm, instead of reading rank 2's first WIN as its second;
 *    and ranks 1 and 2 are told at once: after rank 0's WIN their streams
 *    end (EOF), where a rank waiting for more would wait out
 *    RAILNET_HANDSHAKE_TIMEOUT. Closing that collComm closes each socket
 *    once, with no WARN.
 * Linked with --export-dynamic so that the plugin's close() is this
 * program's. */
#include "../tap.h"
#include "built_plugin.h"
#include "nccl_gin_v11.h"
#include "plugin/gin/gin_wire.h"
#include "plugin/ib/handshake.h"
#include "tools/common/plugin_tables.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static int closes_of_closed; /* close() of a number that was not open */

int close(int fd)
{
    long r = syscall(SYS_close, fd);
    if (r < 0 && errno == EBADF && fd >= 0)
        __atomic_fetch_add(&closes_of_closed, 1, __ATOMIC_RELAXED);
    return (int)r;
}

static char warns[1 << 14]; /* the plugin's WARN lines (built_capture_warns) */

static const ncclGin_v11_t *gin;
static void *ctx;

static int load(void)
{
    setenv("RAILNET_HANDSHAKE_TIMEOUT", "20", 1);
    if (!(gin = built_plugin_table(&plugin_table_gin_v11)))
        return -1;
    built_capture_warns(warns, sizeof(warns));
    return gin->init(&ctx, 1, built_warn_logger) == ncclSuccess ? 0 : -1;
}

static uint8_t h0[HS_HANDLE_SIZE], h1[HS_HANDLE_SIZE];
static void *l0, *l1;
static ncclResult_t connect_res = ncclSuccess;

static void *rank0_connect(void *arg)
{
    (void)arg;
    void *handles[2] = { h0, h1 }, *coll = NULL;
    connect_res = gin->connect(ctx, handles, 2, 0, l0, &coll);
    return NULL;
}

TAP_CASE(test_a_peer_that_resets_after_its_hello_fails_connect_and_its_socket_closes_once)
{
    if (load())
        TAP_SKIP("the plugin or softnic is not available");
    EXPECT_EQ_INT(ncclSuccess, gin->listen(ctx, 0, h0, &l0));
    EXPECT_EQ_INT(ncclSuccess, gin->listen(ctx, 0, h1, &l1));
    struct hs_handle a, b;
    char err[HS_ERR_LEN];
    EXPECT_EQ_INT(HS_OK, hs_handle_parse(h0, sizeof(h0), &a, err));
    EXPECT_EQ_INT(HS_OK, hs_handle_parse(h1, sizeof(h1), &b, err));
    EXPECT_EQ_INT(4, a.family);
    pthread_t th;
    EXPECT_EQ_INT(0, pthread_create(&th, NULL, rank0_connect, NULL));
    /* rank 1's HELLO to rank 0, as a rank's connect would write it */
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(a.tcp_port) };
    memcpy(&sa.sin_addr, a.addr, 4);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ_INT(0, connect(fd, (struct sockaddr *)&sa, sizeof(sa)));
    struct gw_peer m;
    memset(&m, 0, sizeof(m));
    m.nranks = 2, m.src_rank = 1, m.dst_rank = 0;
    m.dst_nonce = a.nonce, m.src_nonce = b.nonce;
    m.link_layer = a.link_layer, m.nports = a.nports, m.nqps = a.nports;
    for (int i = 0; i < m.nqps; i++)
        m.qp[i] = (struct hs_qp_info){ .qpn = 0x123u + (uint32_t)i, .port_num = 1, .port_idx = (uint8_t)i,
                                       .mtu = 3, .is_global = 1 };
    uint8_t buf[GW_MSG_MAX];
    size_t len = gw_peer_encode(GW_HELLO, &m, buf, sizeof(buf));
    struct linger lg = { 1, 0 }; /* close = reset: the REPLY cannot be sent */
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    EXPECT_EQ_INT((long)len, (long)send(fd, buf, len, 0));
    syscall(SYS_close, fd); /* at once: rank 0 reads the HELLO, its REPLY meets the reset */
    pthread_join(th, NULL);
    printf("# connect: %d; %s", (int)connect_res, warns);
    EXPECT_TRUE(connect_res != ncclSuccess);
    EXPECT_TRUE(strstr(warns, "rank 1") != NULL);
    EXPECT_EQ_INT(0, __atomic_load_n(&closes_of_closed, __ATOMIC_RELAXED));
}

TAP_CASE(test_a_pointer_into_a_live_request_is_refused)
{
    if (load())
        TAP_SKIP("the plugin or softnic is not available");
    EXPECT_EQ_INT(ncclSuccess, gin->listen(ctx, 0, h0, &l0));
    void *handles[1] = { h0 }, *coll = NULL;
    EXPECT_EQ_INT(ncclSuccess, gin->connect(ctx, handles, 1, 0, l0, &coll));
    size_t size = 1 << 16;
    uint8_t *buf = aligned_alloc(4096, size);
    EXPECT_TRUE(buf != NULL);
    memset(buf, 0, size);
    void *mh = NULL, *gh = NULL;
    EXPECT_EQ_INT(ncclSuccess, gin->regMrSym(coll, buf, size, NCCL_PTR_HOST, 0, &mh, &gh));
    void *req = NULL;
    EXPECT_EQ_INT(ncclSuccess, gin->iput(coll, 0, mh, 64, 32768, mh, 0, &req));
    EXPECT_TRUE(req != NULL);
    int done = 0;
    for (int i = 0; i < 1000000 && !done; i++)
        EXPECT_EQ_INT(ncclSuccess, gin->test(coll, req, &done));
    EXPECT_EQ_INT(1, done);
    /* a second put keeps a live request; then its middle */
    req = NULL;
    EXPECT_EQ_INT(ncclSuccess, gin->iput(coll, 0, mh, 64, 32768, mh, 0, &req));
    EXPECT_TRUE(req != NULL);
    for (size_t off = 1; off < 64; off += 7) {
        done = 0;
        EXPECT_EQ_INT(ncclInvalidArgument, gin->test(coll, (char *)req + off, &done));
        EXPECT_EQ_INT(0, done);
    }
    done = 0;
    for (int i = 0; i < 1000000 && !done; i++)
        EXPECT_EQ_INT(ncclSuccess, gin->test(coll, req, &done));
    EXPECT_EQ_INT(1, done);
    EXPECT_TRUE(strstr(warns, "is not a live request of this collComm") != NULL);
    gin->deregMrSym(coll, mh);
    gin->closeColl(coll);
    gin->closeListen(l0);
    free(buf);
}

/* The raw ranks' I/O deadline: well inside TAP_TIMEOUT, so that rank 0
 * saying nothing fails the case with the step it stopped at. */
static uint64_t raw_deadline(void) { return (uint64_t)((built_now_s() + 30.0) * 1e9); }

/* A raw rank of an nranks job: connects to rank 0's listener `to` with the
 * HELLO a rank's connect would write (made-up QPs: rank 0 only brings its
 * own to RTS and never posts to them here), and checks rank 0's REPLY.
 * Returns the socket, which from then on is this rank's GIN stream. */
static int raw_rank_join(const struct hs_handle *to, const struct hs_handle *self, int rank, int nranks)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(to->tcp_port) };
    memcpy(&sa.sin_addr, to->addr, 4);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ_INT(0, connect(fd, (struct sockaddr *)&sa, sizeof(sa)));
    struct gw_peer m;
    memset(&m, 0, sizeof(m));
    m.nranks = (uint32_t)nranks, m.src_rank = (uint32_t)rank, m.dst_rank = 0;
    m.dst_nonce = to->nonce, m.src_nonce = self->nonce;
    m.link_layer = to->link_layer, m.nports = to->nports, m.nqps = to->nports;
    for (int i = 0; i < m.nqps; i++) {
        m.qp[i] = (struct hs_qp_info){ .qpn = 0x100u * (uint32_t)rank + (uint32_t)i, .port_num = 1,
                                       .port_idx = (uint8_t)i, .mtu = 3, .is_global = 1 };
        m.qp[i].gid[10] = m.qp[i].gid[11] = 0xff, m.qp[i].gid[12] = 127, m.qp[i].gid[15] = 1;
    }
    uint8_t buf[GW_MSG_MAX];
    size_t len = gw_peer_encode(GW_HELLO, &m, buf, sizeof(buf));
    char err[HS_ERR_LEN] = "";
    EXPECT_EQ_INT(0, gw_send(fd, buf, len, raw_deadline(), err));
    struct gw_rx rx;
    struct gw_peer rep;
    if (gw_recv(fd, &rx, raw_deadline(), err) || gw_peer_parse(rx.buf, rx.off, GW_REPLY, &rep, err))
        tap_fail_at(__FILE__, __LINE__, "rank %d: rank 0's REPLY: %s", rank, err);
    EXPECT_EQ_INT(GW_OK, rep.status);
    return fd;
}

static void raw_send_win(int fd, uint32_t seq, size_t len)
{
    struct gw_win w = { .seq = seq, .addr = 0x10000, .size = 4096, .rkey = 0x77 };
    uint8_t buf[GW_WIN_SIZE + 16] = { 0 };
    EXPECT_EQ_INT(GW_WIN_SIZE, (long)gw_win_encode(&w, buf, sizeof(buf)));
    if (len != GW_WIN_SIZE) {
        /* a frame that is whole and sealed, so that only the WIN parser can refuse it */
        buf[8] = (uint8_t)len;
        memset(buf + 12, 0, 4);
        uint32_t crc = hs_crc32(buf, len);
        for (int i = 0; i < 4; i++)
            buf[12 + i] = (uint8_t)(crc >> (8 * i));
    }
    char err[HS_ERR_LEN] = "";
    EXPECT_EQ_INT(0, gw_send(fd, buf, len, raw_deadline(), err));
}

/* A raw rank reads rank 0's WIN of registration seq, then, before
 * `by` (built_now_s), the end of the stream: recv returns 0. */
static void raw_expect_win_then_eof(int fd, int rank, uint32_t seq, double by)
{
    char err[HS_ERR_LEN] = "";
    struct gw_rx rx;
    struct gw_win w = { 0 };
    if (gw_recv(fd, &rx, (uint64_t)(by * 1e9), err) || gw_win_parse(rx.buf, rx.off, &w, err))
        tap_fail_at(__FILE__, __LINE__, "rank %d: rank 0's WIN: %s", rank, err);
    EXPECT_EQ_INT(seq, w.seq);
    double left = by - built_now_s();
    struct pollfd pf = { .fd = fd, .events = POLLIN };
    int r = poll(&pf, 1, left > 0 ? (int)(left * 1000) + 1 : 0);
    if (r != 1)
        tap_fail_at(__FILE__, __LINE__, "rank %d: rank 0's socket still open (poll: %d): rank 0 did not tell it", rank,
                    r);
    char c;
    EXPECT_EQ_INT(0, (long)recv(fd, &c, 1, MSG_DONTWAIT));
}

static uint8_t h2[HS_HANDLE_SIZE];

static void *rank0_of_three(void *arg)
{
    void *handles[3] = { h0, h1, h2 };
    connect_res = gin->connect(ctx, handles, 3, 0, l0, arg);
    return NULL;
}

TAP_CASE(test_a_garbled_win_fails_the_collcomm_and_the_next_regmrsym_at_once)
{
    if (load())
        TAP_SKIP("the plugin or softnic is not available");
    void *l2 = NULL;
    EXPECT_EQ_INT(ncclSuccess, gin->listen(ctx, 0, h0, &l0));
    EXPECT_EQ_INT(ncclSuccess, gin->listen(ctx, 0, h1, &l1));
    EXPECT_EQ_INT(ncclSuccess, gin->listen(ctx, 0, h2, &l2));
    struct hs_handle a[3];
    char err[HS_ERR_LEN];
    EXPECT_EQ_INT(HS_OK, hs_handle_parse(h0, sizeof(h0), &a[0], err));
    EXPECT_EQ_INT(HS_OK, hs_handle_parse(h1, sizeof(h1), &a[1], err));
    EXPECT_EQ_INT(HS_OK, hs_handle_parse(h2, sizeof(h2), &a[2], err));
    EXPECT_EQ_INT(4, a[0].family);
    void *coll = NULL;
    pthread_t th;
    EXPECT_EQ_INT(0, pthread_create(&th, NULL, rank0_of_three, &coll));
    int fd[3] = { -1, -1, -1 };
    for (int r = 1; r < 3; r++)
        fd[r] = raw_rank_join(&a[0], &a[r], r, 3);
    uint8_t ready[GW_HEADER];
    size_t rlen = gw_ready_encode(ready, sizeof(ready));
    for (int r = 1; r < 3; r++) {
        struct gw_rx rx;
        EXPECT_EQ_INT(0, gw_send(fd[r], ready, rlen, raw_deadline(), err));
        EXPECT_EQ_INT(0, gw_recv(fd[r], &rx, raw_deadline(), err));
        EXPECT_EQ_INT(0, gw_ready_parse(rx.buf, rx.off, err));
    }
    pthread_join(th, NULL);
    printf("# connect: %d; %s", (int)connect_res, warns);
    EXPECT_EQ_INT(ncclSuccess, connect_res);
    EXPECT_TRUE(coll != NULL);

    /* What ranks 1 and 2 say in rank 0's first two registrations, written
     * ahead (the sockets hold it): rank 1's first WIN is 16 bytes too long,
     * its second is sound; rank 2's first is sound and is never read. */
    raw_send_win(fd[1], 0, GW_WIN_SIZE + 16);
    raw_send_win(fd[1], 1, GW_WIN_SIZE);
    raw_send_win(fd[2], 0, GW_WIN_SIZE);
    size_t size = 1 << 16;
    uint8_t *buf = aligned_alloc(4096, size);
    EXPECT_TRUE(buf != NULL);
    void *mh = NULL, *gh = NULL;
    double t0 = built_now_s();
    EXPECT_EQ_INT(ncclRemoteError, gin->regMrSym(coll, buf, size, NCCL_PTR_HOST, 0, &mh, &gh));
    double t1 = built_now_s();
    EXPECT_TRUE(mh == NULL);
    for (int r = 1; r < 3; r++)
        raw_expect_win_then_eof(fd[r], r, 0, t1 + 1.0);
    double t2 = built_now_s();
    ncclResult_t second = gin->regMrSym(coll, buf, size, NCCL_PTR_HOST, 0, &mh, &gh);
    double t3 = built_now_s();
    printf("# regMrSym: %.3f s, then %d in %.3f s; %s", t1 - t0, (int)second, t3 - t2, warns);
    EXPECT_EQ_INT(ncclRemoteError, second);
    EXPECT_TRUE(mh == NULL);
    EXPECT_TRUE(t1 - t0 < 5.0 && t3 - t2 < 1.0);
    EXPECT_TRUE(strstr(warns, "window of rank 1") != NULL);
    EXPECT_TRUE(strstr(warns, "regMrSym on a failed collComm") != NULL);
    EXPECT_TRUE(strstr(warns, "same order") == NULL);
    size_t nwarns = strlen(warns);
    EXPECT_EQ_INT(ncclSuccess, gin->closeColl(coll));
    EXPECT_EQ_INT(nwarns, strlen(warns));
    EXPECT_EQ_INT(0, __atomic_load_n(&closes_of_closed, __ATOMIC_RELAXED));
    for (int r = 1; r < 3; r++)
        syscall(SYS_close, fd[r]);
    gin->closeListen(l0);
    gin->closeListen(l1);
    gin->closeListen(l2);
    free(buf);
}

int main(int argc, char **argv) { return tap_run(argc, argv); }
