/* plugin/ib/config.c: the one reader of RAILNET_* variables (config.h). */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "parse.h"

static struct rn_config cfg = {
    .gid_index = RN_AUTO,
    .merge_ports = RN_AUTO,
    .qps_per_conn = 2,
    /* NCCL's p2p chunk (128 KiB) goes in two halves, one per port, as NCCL's
     * own IB transport writes it: a lone p2p connection then keeps both ports
     * busy with each message, where whole messages in turn trail from 2 MiB.
     * Below 64 KiB a message is latency-bound: a split costs one more work
     * request and immediate per QP for no bandwidth. */
    .split_min = 64 << 10,
    .ib_timeout = 20,
    .ib_retry_cnt = 7,
    .ib_tc = RN_AUTO, /* unset: NCCL's per-communicator traffic class, else 0 */
    .relaxed_ordering = RN_AUTO,
    .dmabuf = RN_AUTO,
    .gdr_flush = RN_AUTO,
    .handshake_timeout = 60,
    .failover = 1,
    .rail_from_pci = 1,
    /* A GIN send queue holds 520 work requests; one completion per 32 of
     * them keeps the CQ and this thread's polling ~30x below one per put
     * while a stream still retires every few microseconds on a NIC. */
    .gin_signal_every = 32,
};
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;

int config_parse_auto(const char *s, long long lo, long long hi, long long *out)
{
    if (!strcasecmp(s, "auto")) {
        *out = RN_AUTO;
        return 0;
    }
    return parse_int(s, lo, hi, out);
}

enum kind { K_INT, K_AUTO, K_SIZE, K_STR, K_QMEM, K_GIN, K_CM };

struct var {
    const char *name;
    enum kind kind;
    long long lo, hi;
    void *dst;
    size_t len; /* K_STR: buffer size; else sizeof the int field */
    const char *range;
};

#define INTV(n, k, l, h, f, r) { n, k, l, h, &cfg.f, sizeof(cfg.f), r }
#define STRV(n, f, r) { n, K_STR, 0, 0, cfg.f, sizeof(cfg.f), r }

static const struct var vars[] = {
    STRV("RAILNET_IBVERBS_LIB", ibverbs_lib, "a path to libibverbs.so.1"),
    STRV("RAILNET_HCA", hca, "device[:port[:rail[:plane]]] list, ^ to exclude, = for exact names"),
    INTV("RAILNET_RAIL_FROM_PCI", K_INT, 0, 1, rail_from_pci, "0 or 1"),
    STRV("RAILNET_OOB_ADDR", oob_addr, "an IPv4 or IPv6 address of this host"),
    INTV("RAILNET_GID_INDEX", K_AUTO, 0, 255, gid_index, "auto or 0..255"),
    INTV("RAILNET_MERGE_PORTS", K_AUTO, 0, 1, merge_ports, "auto, 0 or 1"),
    INTV("RAILNET_QPS_PER_CONN", K_INT, 1, 16, qps_per_conn, "1..16"),
    INTV("RAILNET_SPLIT_MIN", K_SIZE, 4096, 1ll << 30, split_min, "4K..1G bytes"),
    INTV("RAILNET_IB_TIMEOUT", K_INT, 1, 31, ib_timeout, "1..31"),
    INTV("RAILNET_IB_RETRY_CNT", K_INT, 0, 7, ib_retry_cnt, "0..7"),
    INTV("RAILNET_IB_TC", K_INT, 0, 255, ib_tc, "0..255"),
    INTV("RAILNET_IB_SL", K_INT, 0, 15, ib_sl, "0..15"),
    INTV("RAILNET_RELAXED_ORDERING", K_AUTO, 0, 1, relaxed_ordering, "auto, 0 or 1"),
    INTV("RAILNET_DMABUF", K_AUTO, 0, 1, dmabuf, "auto, 0 or 1"),
    INTV("RAILNET_GDR_FLUSH", K_AUTO, 0, 2, gdr_flush, "auto, 0, 1 or 2"),
    INTV("RAILNET_STATS", K_INT, 0, 1, stats, "0 or 1"),
    INTV("RAILNET_GDAKI_QUEUE_MEM", K_QMEM, 0, 2, gdaki_queue_mem, "host, gpu or host-devx"),
    INTV("RAILNET_HANDSHAKE_TIMEOUT", K_INT, 1, 3600, handshake_timeout, "1..3600 seconds"),
    INTV("RAILNET_FAILOVER", K_INT, 0, 1, failover, "0 or 1"),
    INTV("RAILNET_GIN", K_GIN, 0, 3, gin, "auto, proxy, gdaki or off"),
    INTV("RAILNET_GIN_SIGNAL_EVERY", K_INT, 1, 128, gin_signal_every, "1..128"),
    INTV("RAILNET_GIN_GDAKI_VERSION", K_INT, 0, 1000000, gin_gdaki_version, "0 (from NCCL's version) or 1..1000000"),
    INTV("RAILNET_CM", K_CM, 0, 1, cm, "tcp or rdmacm"),
};

static void store(const struct var *v, long long x)
{
    if (v->len == sizeof(long long))
        *(long long *)v->dst = x;
    else
        *(int *)v->dst = (int)x;
}

static void load(void)
{
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const struct var *v = &vars[i];
        const char *s = getenv(v->name);
        if (!s || !*s)
            continue;
        long long x = 0;
        int bad = 0;
        switch (v->kind) {
        case K_STR:
            if (strlen(s) >= v->len)
                bad = 1;
            else
                memcpy(v->dst, s, strlen(s) + 1);
            break;
        case K_INT: bad = parse_int(s, v->lo, v->hi, &x); break;
        case K_AUTO: bad = config_parse_auto(s, v->lo, v->hi, &x); break;
        case K_SIZE: bad = parse_size(s, v->lo, v->hi, &x); break;
        case K_QMEM:
            if (!strcasecmp(s, "host"))
                x = 0;
            else if (!strcasecmp(s, "gpu"))
                x = 1;
            else if (!strcasecmp(s, "host-devx"))
                x = 2;
            else
                bad = 1;
            break;
        case K_GIN:
            if (!strcasecmp(s, "auto"))
                x = RN_GIN_AUTO;
            else if (!strcasecmp(s, "proxy"))
                x = RN_GIN_PROXY;
            else if (!strcasecmp(s, "gdaki"))
                x = RN_GIN_GDAKI;
            else if (!strcasecmp(s, "off"))
                x = RN_GIN_OFF;
            else
                bad = 1;
            break;
        case K_CM:
            if (!strcasecmp(s, "tcp"))
                x = RN_CM_TCP;
            else if (!strcasecmp(s, "rdmacm"))
                x = RN_CM_RDMACM;
            else
                bad = 1;
            break;
        }
        if (bad) {
            WARN("NET/railnet: %s=%s is not valid (accepted: %s); using the default", v->name, s, v->range);
            continue;
        }
        if (v->kind != K_STR)
            store(v, x);
        INFO(NCCL_ENV | NCCL_NET, "NET/railnet: %s set by environment to %s", v->name, s);
    }
}

void config_load(void)
{
    pthread_once(&cfg_once, load);
}

const struct rn_config *rn_config(void)
{
    return &cfg;
}
