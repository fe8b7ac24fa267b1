/* tests/gindriver/gd_forge.c: a peer's GW_GDAKI message is untrusted input
 * (gd_tests.h: gdaki-forged-KIND). Three ranks connect through the plugin;
 * ranks 0 and 1 call createContext of the GDAKI type, rank 2 does not: it
 * writes on its own collComm sockets what a rank's createContext would
 * (plugin/gin/gin_wire.h), except that rank 0 gets a forged GW_GDAKI:
 *   qps    two QPs instead of one          link   the other link layer
 *   ranks  a message meant for rank 1      crc    a corrupted byte
 *   type   a second WIN instead            short  half a message, then EOF
 *   keys   a good QP message, then table keys wider than 32 bits
 * Rank 1 gets well-formed messages (its own QP, mirrored). Rank 0's
 * createContext must refuse the forgery (the script checks the WARN) and
 * fail, and so must rank 1's: it learns from rank 0 in the exchange after
 * the QPs ("rank 0 failed its part"), not from a timeout -- except for
 * keys, the last exchange, after which rank 1 has its context. Ranks keep
 * their collComms open until the end, as a process whose init failed may. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gd.h"
#include "gd_tests.h"
#include "gin_wire.h"

#define GF_XSEQ 0x80000000u   /* the WIN sequence numbers of gin_gdaki.c's exchanges */
#define GF_DEADLINE_S 30

enum gf_kind { GF_QPS, GF_LINK, GF_RANKS, GF_CRC, GF_TYPE, GF_SHORT, GF_KEYS };
static const char *const gf_names[] = { "qps", "link", "ranks", "crc", "type", "short", "keys" };

static uint64_t gf_deadline(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ((uint64_t)ts.tv_sec + GF_DEADLINE_S) * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The TCP socket of this process connected to rank p's GIN listener (the
 * port in its handle: 16 bits at byte 12, little-endian). */
static int gf_socket_to(const struct gd_rank *r, int p)
{
    uint16_t port = (uint16_t)(r->handles[p][12] | r->handles[p][13] << 8);
    for (int fd = 3; fd < 1024; fd++) {
        int type = 0, listening = 1;
        socklen_t l = sizeof(type);
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) || type != SOCK_STREAM)
            continue;
        l = sizeof(listening);
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &l) || listening)
            continue;
        struct sockaddr_storage a;
        l = sizeof(a);
        if (getpeername(fd, (struct sockaddr *)&a, &l))
            continue;
        uint16_t pp = a.ss_family == AF_INET    ? ntohs(((struct sockaddr_in *)&a)->sin_port)
                      : a.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&a)->sin6_port)
                                                : 0;
        if (pp == port)
            return fd;
    }
    return -1;
}

static int gf_send_win(int fd, uint32_t step, uint64_t key)
{
    struct gw_win w = { .seq = GF_XSEQ | step, .addr = key, .size = key };
    uint8_t buf[GW_WIN_SIZE];
    char err[HS_ERR_LEN];
    size_t len = gw_win_encode(&w, buf, sizeof(buf));
    return gw_send(fd, buf, len, gf_deadline(), err) ? -1 : 0;
}

/* What rank p sends in the QP exchange: its WIN of step 0, then its
 * GW_GDAKI message, parsed into *m. */
static int gf_read_peer(int fd, int p, struct gw_peer *m)
{
    struct gw_rx rx;
    struct gw_win w;
    char err[HS_ERR_LEN];
    if (gw_recv(fd, &rx, gf_deadline(), err) || gw_win_parse(rx.buf, rx.off, &w, err) || w.seq != GF_XSEQ ||
        gw_recv(fd, &rx, gf_deadline(), err) || gw_peer_parse(rx.buf, rx.off, GW_GDAKI, m, err)) {
        printf("forger: reading rank %d's step 0 and GDAKI QP: %s\n", p, err);
        return -1;
    }
    return 0;
}

/* p's own QP, as if this rank's QP towards p were p's QP towards it. */
static size_t gf_mirror(const struct gw_peer *from, int p, uint8_t *buf, size_t cap)
{
    struct gw_peer m = *from;
    m.src_rank = 2;
    m.dst_rank = (uint32_t)p;
    return gw_peer_encode(GW_GDAKI, &m, buf, cap);
}

static int gf_forger(struct gd_rank *r, enum gf_kind kind)
{
    int fd[2] = { gf_socket_to(r, 0), gf_socket_to(r, 1) };
    if (fd[0] < 0 || fd[1] < 0) {
        printf("forger: no socket to rank 0 (%d) or rank 1 (%d)\n", fd[0], fd[1]);
        return 1;
    }
    struct gw_peer in[2];
    if (gf_send_win(fd[0], 0, 0) || gf_send_win(fd[1], 0, 0) || gf_read_peer(fd[0], 0, &in[0]) ||
        gf_read_peer(fd[1], 1, &in[1]))
        return 1;
    uint8_t good[GW_MSG_MAX], bad[GW_MSG_MAX];
    size_t glen = gf_mirror(&in[1], 1, good, sizeof(good));
    struct gw_peer f = in[0];
    f.src_rank = 2;
    f.dst_rank = 0;
    size_t blen;
    switch (kind) {
    case GF_QPS:
        f.nqps = 2;
        f.qp[1] = f.qp[0];
        blen = gw_peer_encode(GW_GDAKI, &f, bad, sizeof(bad));
        break;
    case GF_LINK:
        f.link_layer = f.link_layer == 1 ? 2 : 1;
        blen = gw_peer_encode(GW_GDAKI, &f, bad, sizeof(bad));
        break;
    case GF_RANKS:
        f.dst_rank = 1;
        blen = gw_peer_encode(GW_GDAKI, &f, bad, sizeof(bad));
        break;
    case GF_CRC:
        blen = gw_peer_encode(GW_GDAKI, &f, bad, sizeof(bad));
        bad[GW_HEADER + GW_PEER_FIXED] ^= 0x01; /* the QP number's low byte */
        break;
    case GF_TYPE: {
        struct gw_win w = { .seq = GF_XSEQ };
        blen = gw_win_encode(&w, bad, sizeof(bad));
        break;
    }
    case GF_SHORT:
        blen = gw_peer_encode(GW_GDAKI, &f, bad, sizeof(bad)) / 2;
        break;
    default:
        blen = gf_mirror(&in[0], 0, bad, sizeof(bad));
        break;
    }
    char err[HS_ERR_LEN];
    if (!glen || !blen || gw_send(fd[1], good, glen, gf_deadline(), err) ||
        gw_send(fd[0], bad, blen, gf_deadline(), err)) {
        printf("forger: sending the QP messages failed\n");
        return 1;
    }
    if (kind == GF_SHORT) {
        shutdown(fd[0], SHUT_WR);
    } else if (gf_send_win(fd[0], 1, kind == GF_KEYS ? 1ull << 40 : 1)) {
        printf("forger: sending step 1 to rank 0 failed\n");
        return 1;
    }
    if (gf_send_win(fd[1], 1, 1)) {
        printf("forger: sending step 1 to rank 1 failed\n");
        return 1;
    }
    printf("forger: rank 0 got a forged GDAKI QP message (%s)\n", gf_names[kind]);
    return 0;
}

static int t_forged(struct gd_rank *r, void *arg)
{
    enum gf_kind kind = (enum gf_kind)((struct gd_opts *)arg)->forge;
    ncclNetProperties_v11_t p;   /* the type is decided at the first getProperties, as NCCL calls it */
    if (r->gin->getProperties(0, &p) != ncclSuccess || p.netDeviceType != NCCL_NET_DEVICE_GIN_GDAKI) {
        printf("rank %d: the plugin does not offer the GDAKI type\n", r->rank);
        return 1;
    }
    if (gd_connect(r) != ncclSuccess) {
        printf("rank %d: connect failed\n", r->rank);
        return 1;
    }
    int bad = 0;
    if (r->rank == 2) {
        bad = gf_forger(r, kind);
    } else {
        void *ctx = NULL;
        ncclNetDeviceHandle_v11_t *dh = NULL;
        ncclResult_t e = r->gin->createContext(r->coll, 8, 8, &ctx, &dh);
        if (e == ncclSuccess && kind == GF_KEYS && r->rank == 1) {
            printf("rank 1: createContext succeeded (the forgery came after its last exchange)\n");
            r->gin->destroyContext(ctx);
        } else if (e == ncclSuccess) {
            printf("rank %d: createContext succeeded with a forged GDAKI QP message (%s) in the job\n", r->rank,
                   gf_names[kind]);
            r->gin->destroyContext(ctx);
            bad = 1;
        } else {
            printf("rank %d: createContext refused (%d)\n", r->rank, e);
        }
    }
    if (gd_barrier(r))   /* gd_run closes the collComm */
        bad = 1;
    return bad;
}

int gd_forge_run(const char *plugin, const char *kind, struct gd_opts *o)
{
    for (int k = 0; k < (int)(sizeof(gf_names) / sizeof(gf_names[0])); k++)
        if (!strcmp(kind, gf_names[k])) {
            o->forge = k;
            return gd_run(plugin, 3, 2 * GF_DEADLINE_S, -1, o->seed, t_forged, o);
        }
    return -1;
}
