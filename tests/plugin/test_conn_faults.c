/* tests/plugin/test_conn_faults.c: connection set-up against untrusted and
 * broken peers, through the plugin's exported table (loaded through
 * tools/common/plugin_tables on softnic, as NCCL loads it). Each case ends in a clear error (a WARN that
 * says why), never a crash or a hang. A listener drops a peer that breaks
 * the protocol and goes on serving: accept keeps returning no comm and no
 * error, since a stranger on the port must not fail the job. */
#include "../tap.h"
#include "nccl_net_v8.h"
#include "plugin/ib/handshake.h"
#include "plugin/ib/oob.h"
#include "built_plugin.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define POLLS 200000

static const ncclNet_v8_t *net;
static char warns[8192];

static int load(void)
{
    built_capture_warns(warns, sizeof(warns));
    if (!(net = built_plugin_load(built_warn_logger, NULL)))
        return -1;
    warns[0] = '\0';
    return 0;
}

/* A plain TCP client to the listener named by a handle: a peer that speaks
 * whatever bytes the test wants. */
static int raw_connect(const uint8_t *handle)
{
    struct hs_handle h;
    char err[HS_ERR_LEN];
    if (hs_handle_parse(handle, HS_HANDLE_SIZE, &h, err) != HS_OK)
        return -1;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(h.tcp_port) };
    memcpy(&sa.sin_addr, h.addr, 4);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Drives accept until a WARN containing want appears, or it returns a comm
 * or an error, or `seconds` pass. Returns accept's last result. */
static ncclResult_t accept_until_warn(void *lc, void **rc, const char *want, double seconds)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    *rc = NULL;
    for (;;) {
        ncclResult_t r = net->accept(lc, rc, NULL);
        if (r != ncclSuccess || *rc || strstr(warns, want))
            return r;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 > seconds)
            return ncclInProgress;
        usleep(20);
    }
}

/* A real connect/accept pair on dev: the listener still works. */
static int pair_works(int dev, void *lc, const uint8_t *handle)
{
    void *sc = NULL, *rc = NULL;
    for (long i = 0; i < POLLS && (!sc || !rc); i++) {
        if (!sc && net->connect(dev, (void *)handle, &sc, NULL) != ncclSuccess)
            return 0;
        if (!rc && net->accept(lc, &rc, NULL) != ncclSuccess)
            return 0;
        usleep(20);
    }
    int ok = sc && rc;
    net->closeSend(sc);
    net->closeRecv(rc);
    return ok;
}

static void rogue_bytes_case(const uint8_t *bytes, size_t len, int then_close, const char *want_warn)
{
    if (load()) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    uint8_t handle[HS_HANDLE_SIZE];
    void *lc = NULL, *rc = NULL;
    EXPECT_EQ_INT(ncclSuccess, net->listen(0, handle, &lc));
    int fd = raw_connect(handle);
    EXPECT_TRUE(fd >= 0);
    EXPECT_EQ_INT((long)len, (long)write(fd, bytes, len));
    if (then_close)
        close(fd);
    ncclResult_t r = accept_until_warn(lc, &rc, want_warn, 30);
    EXPECT_EQ_INT(ncclSuccess, r); /* the stranger is dropped, not reported to NCCL */
    EXPECT_TRUE(rc == NULL);
    if (!strstr(warns, want_warn))
        printf("# warnings were:\n# %s\n", warns);
    EXPECT_TRUE(strstr(warns, want_warn) != NULL);
    if (!then_close)
        close(fd);
    EXPECT_TRUE(pair_works(0, lc, handle));
    net->closeListen(lc);
}

/* Loads the plugin with RAILNET_HANDSHAKE_TIMEOUT=timeout_s and listens on
 * device 0: 0, or -1 when the plugin or softnic is not there (skip). */
static int load_and_listen(const char *timeout_s, uint8_t handle[HS_HANDLE_SIZE], void **lc)
{
    setenv("RAILNET_HANDSHAKE_TIMEOUT", timeout_s, 1);
    if (load())
        return -1;
    EXPECT_EQ_INT(ncclSuccess, net->listen(0, handle, lc));
    return 0;
}

/* A well-formed HELLO of one QP (the values need not match a real QP). */
static size_t make_hello(uint16_t version, uint8_t *out, size_t cap)
{
    struct hs_hello m;
    memset(&m, 0, sizeof(m));
    m.nqps = 1;
    m.nports = 1;
    m.link_layer = 2;
    m.cts_slots = HS_CTS_SLOTS;
    m.cts_entry_size = HS_CTS_ENTRY_SIZE;
    m.max_recvs = HS_MAX_RECVS;
    m.qp[0].qpn = 0x123;
    m.qp[0].psn = 0x456;
    m.qp[0].port_num = 1;
    m.qp[0].mtu = 5; /* IBV_MTU_4096 */
    m.qp[0].is_global = 1;
    return hs_hello_encode(&m, version, out, cap);
}

TAP_CASE(test_accept_rejects_garbage_bytes_and_keeps_listening)
{
    uint8_t junk[64];
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (uint8_t)(i * 37 + 11);
    rogue_bytes_case(junk, sizeof(junk), 0, "magic");
}

TAP_CASE(test_accept_rejects_another_protocol_version)
{
    uint8_t msg[HS_MSG_MAX];
    size_t len = make_hello(HS_VERSION + 1, msg, sizeof(msg));
    EXPECT_TRUE(len > HS_HEADER_SIZE);
    rogue_bytes_case(msg, len, 0, "version");
}

TAP_CASE(test_accept_rejects_corrupted_hello)
{
    uint8_t msg[HS_MSG_MAX];
    size_t len = make_hello(HS_VERSION, msg, sizeof(msg));
    EXPECT_TRUE(len > HS_HEADER_SIZE);
    msg[len - 3] ^= 0x40; /* one flipped bit in the body */
    rogue_bytes_case(msg, len, 0, "accept on device 0");
}

TAP_CASE(test_accept_survives_peer_closing_mid_handshake)
{
    uint8_t full[HS_MSG_MAX];
    EXPECT_TRUE(make_hello(HS_VERSION, full, sizeof(full)) > HS_HEADER_SIZE + 4);
    rogue_bytes_case(full, HS_HEADER_SIZE + 4, 1, "accept on device 0"); /* a header and 4 bytes, then EOF */
}

TAP_CASE(test_connect_rejects_handle_of_another_version_or_corrupted)
{
    if (load()) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    uint8_t handle[HS_HANDLE_SIZE], bad[HS_HANDLE_SIZE];
    void *lc = NULL, *sc = NULL;
    EXPECT_EQ_INT(ncclSuccess, net->listen(0, handle, &lc));
    memcpy(bad, handle, sizeof(bad));
    bad[4] = HS_VERSION + 1;
    EXPECT_EQ_INT(ncclInvalidArgument, net->connect(0, bad, &sc, NULL));
    EXPECT_TRUE(strstr(warns, "protocol version") != NULL);
    memcpy(bad, handle, sizeof(bad));
    bad[20] ^= 1; /* the address: caught by the checksum */
    EXPECT_EQ_INT(ncclInvalidArgument, net->connect(0, bad, &sc, NULL));
    EXPECT_TRUE(strstr(warns, "corrupted") != NULL);
    /* random bytes never crash connect */
    uint64_t s = 42;
    for (int k = 0; k < 200; k++) {
        for (int i = 0; i < HS_HANDLE_SIZE; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            bad[i] = (uint8_t)(s >> 56);
        }
        EXPECT_TRUE(net->connect(0, bad, &sc, NULL) != ncclSuccess);
        EXPECT_TRUE(sc == NULL);
    }
    EXPECT_TRUE(pair_works(0, lc, handle));
    net->closeListen(lc);
}

/* A peer that connects and then says nothing: the peer behind it is served
 * at once (each connection has its own handshake), and the silent one is
 * dropped with a WARN after RAILNET_HANDSHAKE_TIMEOUT. */
TAP_CASE(test_silent_peer_is_dropped_after_the_handshake_timeout)
{
    uint8_t handle[HS_HANDLE_SIZE];
    void *lc = NULL, *rc = NULL;
    if (load_and_listen("3", handle, &lc)) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int fd = raw_connect(handle);
    EXPECT_TRUE(fd >= 0);
    EXPECT_EQ_INT(ncclSuccess, net->accept(lc, &rc, NULL)); /* takes the silent connection */
    EXPECT_TRUE(rc == NULL);
    EXPECT_TRUE(pair_works(0, lc, handle));
    /* served while the silent peer still holds its handshake */
    EXPECT_TRUE(strstr(warns, "did not finish the handshake") == NULL);
    const char *want = "did not finish the handshake within RAILNET_HANDSHAKE_TIMEOUT=3 s";
    ncclResult_t r = accept_until_warn(lc, &rc, want, 30);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    EXPECT_EQ_INT(ncclSuccess, r);
    EXPECT_TRUE(rc == NULL);
    EXPECT_TRUE(secs >= 2.9 && secs < 30);
    EXPECT_TRUE(strstr(warns, want) != NULL);
    EXPECT_TRUE(pair_works(0, lc, handle));
    close(fd);
    net->closeListen(lc);
}

/* More strangers than a listener carries handshakes (8): silent ones fill
 * every state, then more connect. A new connection takes the place of the
 * oldest silent one, so the expected peer gets through at once (its own
 * connect would time out if it had to wait for the strangers' timeouts);
 * every stranger is dropped with a WARN and accept never reports an error
 * to NCCL. */
TAP_CASE(test_more_strangers_than_handshake_slots_do_not_fail_the_listener)
{
    uint8_t handle[HS_HANDLE_SIZE];
    void *lc = NULL, *rc = NULL;
    if (load_and_listen("1", handle, &lc)) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    int fds[11];
    char junk[64];
    memset(junk, 'G', sizeof(junk));
    for (int i = 0; i < 11; i++) {
        fds[i] = raw_connect(handle);
        EXPECT_TRUE(fds[i] >= 0);
        if (i >= 8) /* beyond the 8 silent ones: bytes that are no HELLO */
            EXPECT_EQ_INT((long)sizeof(junk), (long)write(fds[i], junk, sizeof(junk)));
    }
    /* the three talking strangers each take the place of a silent one */
    EXPECT_EQ_INT(ncclSuccess, net->accept(lc, &rc, NULL));
    EXPECT_TRUE(rc == NULL);
    EXPECT_TRUE(pair_works(0, lc, handle));
    ncclResult_t r = ncclSuccess;
    int dropped = 0;
    for (long i = 0; i < POLLS && r == ncclSuccess && dropped < 11; i++) {
        r = net->accept(lc, &rc, NULL);
        EXPECT_TRUE(rc == NULL);
        dropped = 0;
        for (const char *w = warns; (w = strstr(w, "accept on device 0")) != NULL; w++)
            dropped++;
        usleep(20);
    }
    EXPECT_EQ_INT(ncclSuccess, r);
    EXPECT_EQ_INT(11, dropped);
    EXPECT_TRUE(strstr(warns, "did not finish the handshake within RAILNET_HANDSHAKE_TIMEOUT=1 s") != NULL);
    EXPECT_TRUE(strstr(warns, "magic") != NULL);
    for (int i = 0; i < 11; i++)
        close(fds[i]);
    EXPECT_TRUE(pair_works(0, lc, handle));
    net->closeListen(lc);
}

/* Eight strangers that each send one byte (a HELLO begun, never
 * finished) fill every handshake state; the expected peer that connects
 * next takes the place of the oldest of them and gets through at once,
 * where it used to be refused until a stranger timed out
 * (RAILNET_HANDSHAKE_TIMEOUT, 60 s by default; 30 here). */
TAP_CASE(test_strangers_that_began_a_hello_do_not_keep_the_peers_out)
{
    uint8_t handle[HS_HANDLE_SIZE];
    void *lc = NULL, *rc = NULL;
    if (load_and_listen("30", handle, &lc)) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    int fds[8];
    for (int i = 0; i < 8; i++) {
        fds[i] = raw_connect(handle);
        EXPECT_TRUE(fds[i] >= 0);
        EXPECT_EQ_INT(1, (long)write(fds[i], "R", 1));
    }
    usleep(100000);
    EXPECT_EQ_INT(ncclSuccess, net->accept(lc, &rc, NULL)); /* takes all eight */
    EXPECT_TRUE(rc == NULL);
    EXPECT_TRUE(pair_works(0, lc, handle));
    EXPECT_TRUE(strstr(warns, "without a whole HELLO (1 bytes of it") != NULL);
    EXPECT_TRUE(strstr(warns, "refusing") == NULL);
    for (int i = 0; i < 8; i++)
        close(fds[i]);
    net->closeListen(lc);
}

/* A listener that accepts TCP and never answers: connect gives up. */
TAP_CASE(test_connect_to_a_silent_listener_times_out)
{
    uint8_t handle[HS_HANDLE_SIZE];
    void *lc = NULL, *sc = NULL;
    if (load_and_listen("1", handle, &lc)) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    /* the plugin's listener exists but nobody calls accept: the kernel
     * completes the TCP connection and the HELLO goes unanswered */
    ncclResult_t r = ncclSuccess;
    for (long i = 0; i < POLLS && r == ncclSuccess && !sc; i++) {
        r = net->connect(0, handle, &sc, NULL);
        usleep(20);
    }
    EXPECT_EQ_INT(ncclRemoteError, r);
    EXPECT_TRUE(sc == NULL);
    EXPECT_TRUE(strstr(warns, "the listener did not finish the handshake within RAILNET_HANDSHAKE_TIMEOUT=1 s") != NULL);
    net->closeListen(lc);
}

/* Two NICs: a handle re-pointed at the other device's listener carries the
 * wrong GUID and nonce; the listener refuses it and tells the connector. */
TAP_CASE(test_handle_of_another_device_is_refused_by_both_ends)
{
    setenv("SOFTNIC_DEVICES", "softnic0:127.0.0.1;softnic1:127.0.1.1", 1);
    setenv("RAILNET_MERGE_PORTS", "0", 1);
    if (load()) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    int n = 0;
    net->devices(&n);
    EXPECT_EQ_INT(2, n);
    uint8_t h0[HS_HANDLE_SIZE], h1[HS_HANDLE_SIZE];
    void *l0 = NULL, *l1 = NULL, *sc = NULL, *rc = NULL;
    EXPECT_EQ_INT(ncclSuccess, net->listen(0, h0, &l0));
    EXPECT_EQ_INT(ncclSuccess, net->listen(1, h1, &l1));
    struct hs_handle a, b;
    char err[HS_ERR_LEN];
    EXPECT_EQ_INT(HS_OK, hs_handle_parse(h0, HS_HANDLE_SIZE, &a, err));
    EXPECT_EQ_INT(HS_OK, hs_handle_parse(h1, HS_HANDLE_SIZE, &b, err));
    EXPECT_TRUE(a.guid != b.guid);
    b.tcp_port = a.tcp_port; /* device 1's identity, device 0's listener */
    memcpy(b.addr, a.addr, sizeof(a.addr));
    uint8_t forged[HS_HANDLE_SIZE];
    hs_handle_encode(&b, forged);
    ncclResult_t rs = ncclSuccess, ra = ncclSuccess;
    for (long i = 0; i < POLLS && rs == ncclSuccess && !sc; i++) {
        rs = net->connect(0, forged, &sc, NULL);
        if (ra == ncclSuccess && !rc)
            ra = net->accept(l0, &rc, NULL);
        usleep(20);
    }
    EXPECT_EQ_INT(ncclSuccess, ra); /* the listener drops the peer and goes on */
    EXPECT_EQ_INT(ncclInvalidUsage, rs);
    EXPECT_TRUE(sc == NULL && rc == NULL);
    EXPECT_TRUE(strstr(warns, "issued for another device") != NULL);
    EXPECT_TRUE(strstr(warns, "rejected the connection") != NULL);
    EXPECT_TRUE(pair_works(0, l0, h0));
    EXPECT_TRUE(pair_works(1, l1, h1));
    net->closeListen(l0);
    net->closeListen(l1);
}

int main(int argc, char **argv) { return tap_run(argc, argv); }
