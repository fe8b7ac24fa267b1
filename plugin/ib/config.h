/* plugin/ib/config.h: every RAILNET_* environment variable, read once.
 *
 * config_load() parses the environment at the plugin's init (later calls do
 * nothing); nothing else in the plugin calls getenv. A value that does not
 * parse or is out of range is a WARN naming the variable, the value and the
 * accepted range, and the default is used. rn_config() returns the parsed
 * values (defaults before config_load). docs/configuration.md lists them
 * all (tests/foundation/test_readme_variables.sh holds the two together). */
#ifndef RAILNET_IB_CONFIG_H
#define RAILNET_IB_CONFIG_H

#include <stddef.h>

#define RN_AUTO (-1)

struct rn_config {
    char ibverbs_lib[256];  /* RAILNET_IBVERBS_LIB: "" = libibverbs.so.1 */
    char hca[1024];         /* RAILNET_HCA: device:port:rail:plane list, "" = all (devices.h) */
    int rail_from_pci;      /* RAILNET_RAIL_FROM_PCI: 1 (default) a port RAILNET_HCA gives no rail takes
                             * the PCI topology's (rail_topo.h), 0 it stays undefined */
    char oob_addr[64];      /* RAILNET_OOB_ADDR: IP the TCP bootstrap listens on, "" = the port's */
    int gid_index;          /* RAILNET_GID_INDEX: -1 auto (RoCE v2 + IPv4), 0..255 */
    int merge_ports;        /* RAILNET_MERGE_PORTS: -1 auto, 0, 1 */
    int qps_per_conn;       /* RAILNET_QPS_PER_CONN: 1..16, default 2 */
    long long split_min;    /* RAILNET_SPLIT_MIN: bytes, default 64 KiB */
    int ib_timeout;         /* RAILNET_IB_TIMEOUT: 1..31, default 20 */
    int ib_retry_cnt;       /* RAILNET_IB_RETRY_CNT: 0..7, default 7 */
    int ib_tc;              /* RAILNET_IB_TC: 0..255; RN_AUTO (unset): NCCL's traffic class, else 0 */
    int ib_sl;              /* RAILNET_IB_SL: 0..15, default 0 */
    int relaxed_ordering;   /* RAILNET_RELAXED_ORDERING: -1 auto, 0, 1 */
    int dmabuf;             /* RAILNET_DMABUF: -1 auto, 0 (peer memory only), 1 (dmabuf only) */
    int gdr_flush;          /* RAILNET_GDR_FLUSH: -1 auto, 0, 1, 2 (also host; tests) */
    int stats;              /* RAILNET_STATS: 0, 1 */
    int gdaki_queue_mem;    /* RAILNET_GDAKI_QUEUE_MEM: 0 host, 1 gpu, 2 host-devx */
    int handshake_timeout;  /* RAILNET_HANDSHAKE_TIMEOUT: seconds a connect/accept handshake may take, 1..3600 */
    int failover;           /* RAILNET_FAILOVER: 1 (default) a merged device's comm survives a port going down, 0 fails */
    int gin;                /* RAILNET_GIN: enum rn_gin_mode, default auto */
    int gin_signal_every;   /* RAILNET_GIN_SIGNAL_EVERY: 1..128 work requests per signaled one, default 32 */
    int gin_gdaki_version;  /* RAILNET_GIN_GDAKI_VERSION: the NCCL_GIN_GDAKI_VERSION of the running NCCL's
                             * device code, 0 (default): derived from ncclGetVersion */
    int cm;                 /* RAILNET_CM: enum rn_cm_mode, default tcp */
};

/* RAILNET_CM: how a listener's connections are set up (the handle says which,
 * so the connecting side follows the listener). */
enum rn_cm_mode { RN_CM_TCP = 0, RN_CM_RDMACM = 1 };

/* RAILNET_GIN: which GIN type ncclGinPlugin_v11 offers NCCL. */
enum rn_gin_mode { RN_GIN_AUTO = 0, RN_GIN_PROXY = 1, RN_GIN_GDAKI = 2, RN_GIN_OFF = 3 };

void config_load(void);
const struct rn_config *rn_config(void);

/* "auto" -> RN_AUTO, else an integer in [lo, hi] (parse.h's parse_int);
 * 0 or -1 (value untouched). */
int config_parse_auto(const char *s, long long lo, long long hi, long long *out);

#endif
