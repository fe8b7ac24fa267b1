/* strings.c: the name and rate helpers of libibverbs (text facts from the
 * verbs man pages), exported with their rdma-core versions. */
#include <infiniband/verbs.h>

#define EXPORT __attribute__((visibility("default")))
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

EXPORT const char *ibv_node_type_str(enum ibv_node_type t)
{
    static const char *const s[] = { "unknown", "InfiniBand channel adapter", "InfiniBand switch",
                                     "InfiniBand router", "iWARP NIC", "usNIC", "usNIC UDP",
                                     "unspecified" };
    int i = (int)t + 1;   /* IBV_NODE_UNKNOWN is -1 */
    return i >= 0 && (size_t)i < COUNT(s) ? s[i] : "unknown";
}

EXPORT const char *ibv_port_state_str(enum ibv_port_state st)
{
    static const char *const s[] = { "PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED",
                                     "PORT_ACTIVE", "PORT_ACTIVE_DEFER" };
    return (unsigned)st < COUNT(s) ? s[st] : "unknown";
}

EXPORT const char *ibv_event_type_str(enum ibv_event_type e)
{
    static const char *const s[] = {
        "CQ error", "local work queue catastrophic error", "invalid request local work queue error",
        "local access violation work queue error", "communication established",
        "send queue drained", "path migrated", "path migration request error",
        "local catastrophic error", "port active", "port error", "LID change", "P_Key change",
        "SM change", "SRQ catastrophic error", "SRQ limit reached", "last WQE reached",
        "client reregistration", "GID table change", "WQ fatal",
    };
    return (unsigned)e < COUNT(s) ? s[e] : "unknown";
}

EXPORT const char *ibv_wc_status_str(enum ibv_wc_status st)
{
    static const char *const s[] = {
        "success", "local length error", "local QP operation error",
        "local EE context operation error", "local protection error", "Work Request Flushed Error",
        "memory management operation error", "bad response error", "local access error",
        "remote invalid request error", "remote access error", "remote operation error",
        "transport retry counter exceeded", "RNR retry counter exceeded",
        "local RDD violation error", "remote invalid RD request", "aborted error",
        "invalid EE context number", "invalid EE context state", "fatal error",
        "response timeout error", "general error", "TM error", "TM Rendezvous Pending",
    };
    return (unsigned)st < COUNT(s) ? s[st] : "unknown";
}

/* (enum ibv_rate, Mb/s) */
static const struct { enum ibv_rate rate; int mbps; } rates[] = {
    { IBV_RATE_2_5_GBPS, 2500 },   { IBV_RATE_5_GBPS, 5000 },     { IBV_RATE_10_GBPS, 10000 },
    { IBV_RATE_14_GBPS, 14062 },   { IBV_RATE_20_GBPS, 20000 },   { IBV_RATE_25_GBPS, 25781 },
    { IBV_RATE_28_GBPS, 28125 },   { IBV_RATE_30_GBPS, 30000 },   { IBV_RATE_40_GBPS, 40000 },
    { IBV_RATE_50_GBPS, 53125 },   { IBV_RATE_56_GBPS, 56250 },   { IBV_RATE_60_GBPS, 60000 },
    { IBV_RATE_80_GBPS, 80000 },   { IBV_RATE_100_GBPS, 103125 }, { IBV_RATE_112_GBPS, 112500 },
    { IBV_RATE_120_GBPS, 120000 }, { IBV_RATE_168_GBPS, 168750 }, { IBV_RATE_200_GBPS, 206250 },
    { IBV_RATE_300_GBPS, 309375 }, { IBV_RATE_400_GBPS, 412500 }, { IBV_RATE_600_GBPS, 618750 },
    { IBV_RATE_800_GBPS, 825000 }, { IBV_RATE_1200_GBPS, 1237500 },
};

EXPORT int ibv_rate_to_mbps(enum ibv_rate rate)
{
    for (size_t i = 0; i < COUNT(rates); i++)
        if (rates[i].rate == rate)
            return rates[i].mbps;
    return -1;
}

EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps)
{
    for (size_t i = 0; i < COUNT(rates); i++)
        if (rates[i].mbps == mbps)
            return rates[i].rate;
    return IBV_RATE_MAX;
}

/* multiples of 2.5 Gb/s, for the rates that are one */
static const struct { enum ibv_rate rate; int mult; } mults[] = {
    { IBV_RATE_2_5_GBPS, 1 },  { IBV_RATE_5_GBPS, 2 },    { IBV_RATE_10_GBPS, 4 },
    { IBV_RATE_20_GBPS, 8 },   { IBV_RATE_30_GBPS, 12 },  { IBV_RATE_40_GBPS, 16 },
    { IBV_RATE_60_GBPS, 24 },  { IBV_RATE_80_GBPS, 32 },  { IBV_RATE_120_GBPS, 48 },
    { IBV_RATE_25_GBPS, 10 },  { IBV_RATE_50_GBPS, 20 },  { IBV_RATE_100_GBPS, 40 },
    { IBV_RATE_200_GBPS, 80 }, { IBV_RATE_300_GBPS, 120 }, { IBV_RATE_400_GBPS, 160 },
    { IBV_RATE_600_GBPS, 240 }, { IBV_RATE_800_GBPS, 320 }, { IBV_RATE_1200_GBPS, 480 },
};

EXPORT int ibv_rate_to_mult(enum ibv_rate rate)
{
    for (size_t i = 0; i < COUNT(mults); i++)
        if (mults[i].rate == rate)
            return mults[i].mult;
    return -1;
}

EXPORT enum ibv_rate mult_to_ibv_rate(int mult)
{
    for (size_t i = 0; i < COUNT(mults); i++)
        if (mults[i].mult == mult)
            return mults[i].rate;
    return IBV_RATE_MAX;
}
