/* tests/netdriver/main.c: the NCCL-like driver of the plugin. It loads the
 * built libnccl-net-railnet.so by path (tools/common/plugin_tables), as
 * NCCL does, and drives it only through one of its exported net tables:
 * ncclNetPlugin_v8, or with --net-version N ncclNetPlugin_vN (9..12,
 * nd_tables.h; --traffic-class T: NCCL's traffic class for v10+).
 *
 *   netdriver [OPTS] probe      symbol, table, init, devices, properties
 *   netdriver [OPTS] traffic .. multi-rank verified traffic (traffic.c)
 *   netdriver [OPTS] bw ..      one-way bandwidth table (perf.c)
 *   netdriver [OPTS] lat ..     ping-pong latency (perf.c)
 * OPTS: --plugin PATH, --net-version N, --traffic-class T, --table-name
 * NAME (the name the table must carry, default railnet; "any" drives
 * another library's table, e.g. NVIDIA's external IB plugin beside
 * railnet), and --rank-wrap PREFIX once per rank from rank 0 on (each rank
 * then runs as "PREFIX netdriver ..."; see nd.h).
 *
 * PATH defaults to libnccl-net-railnet.so found through the loader's path.
 * The plugin's log lines go to stderr with NCCL-like prefixes. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../tools/common/plugin_tables.h"
#include "nd.h"
#include "nd_tables.h"
#include "traffic.h"

static const char *plugin_path = "libnccl-net-railnet.so";
static int nwarn;

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...)
{
    (void)flags;
    if (level == NCCL_LOG_WARN)
        nwarn++;
    if (level == NCCL_LOG_TRACE && !getenv("NETDRIVER_TRACE"))
        return;
    const char *tag = level == NCCL_LOG_WARN ? "WARN" : level == NCCL_LOG_INFO ? "INFO" : "TRACE";
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "[%d] NCCL %s %s (%s:%d)\n", (int)getpid(), tag, msg, file, line);
}

const ncclNet_v8_t *nd_plugin_open(void)
{
    char err[PATH_MAX + 256];
    const ncclNet_v8_t *net = nd_tables_open(plugin_path, logger, err, sizeof(err));
    if (!net)
        fprintf(stderr, "netdriver: cannot use the plugin: %s\n", err);
    return net;
}

static int cmd_probe(void)
{
    const ncclNet_v8_t *net = nd_plugin_open();
    if (!net)
        return 1;
    /* every entry NCCL calls is set: plugin_tables checked */
    printf("plugin: %s (ncclNetPlugin_v%d)\n", net->name, nd_tables_version());
    int n = -1;
    if (net->devices(&n) != ncclSuccess)
        return 1;
    printf("devices: %d\n", n);
    for (int d = 0; d < n; d++) {
        ncclNetProperties_v8_t p;
        if (net->getProperties(d, &p) != ncclSuccess)
            return 1;
        printf("device %d: name=%s pciPath=%s guid=0x%llx ptrSupport=0x%x regIsGlobal=%d speed=%d port=%d "
               "latency=%.1f maxComms=%d maxRecvs=%d netDeviceType=%d\n",
               d, p.name, p.pciPath ? p.pciPath : "(null)", (unsigned long long)p.guid, p.ptrSupport, p.regIsGlobal,
               p.speed, p.port, p.latency, p.maxComms, p.maxRecvs, p.netDeviceType);
        ncclNetProperties_v12_t q;
        if (nd_tables_version() >= 9 && nd_tables_properties(d, &q) == ncclSuccess) {
            char parts[64] = "";
            for (int i = 0; i < q.vProps.ndevs && i < NCCL_NET_MAX_DEVS_PER_NIC_V12; i++)
                snprintf(parts + strlen(parts), sizeof(parts) - strlen(parts), "%s%d", i ? "," : "", q.vProps.devs[i]);
            printf("device %d: forceFlush=%d vProps=%d:[%s] maxP2pBytes=%zu maxCollBytes=%zu maxMultiRequestSize=%d "
                   "railId=%d planeId=%d\n",
                   d, q.forceFlush, q.vProps.ndevs, parts, q.maxP2pBytes, q.maxCollBytes, q.maxMultiRequestSize,
                   q.railId, q.planeId);
        }
    }
    ncclNetProperties_v8_t p;
    if (net->getProperties(n, &p) == ncclSuccess) {
        printf("getProperties accepted device %d of %d\n", n, n);
        return 1;
    }
    printf("warnings: %d\n", nwarn);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: netdriver [--plugin PATH] [--net-version 8..12] [--traffic-class T] [--table-name NAME|any]\n"
               "                 [--rank-wrap PREFIX]...\n"
               "                 probe|traffic|bw|lat [options]\n"
               "       (netdriver CMD --help); rank i runs behind the i-th PREFIX, e.g.\n"
               "       --rank-wrap 'ip netns exec A env VAR=x' (split on blanks)\n");
}

int main(int argc, char **argv)
{
    int i = 1;
    nd_set_argv(argc, argv);
    while (i + 1 < argc) {
        if (!strcmp(argv[i], "--plugin")) {
            plugin_path = argv[i + 1];
        } else if (!strcmp(argv[i], "--net-version")) {
            int v = 0;
            if (nd_opt_int("--net-version", argv[i + 1], 8, 12, &v) || nd_tables_set_version(v))
                return 2;
        } else if (!strcmp(argv[i], "--traffic-class")) {
            int tc = 0;
            if (nd_opt_int("--traffic-class", argv[i + 1], -1, 255, &tc))
                return 2;
            nd_tables_set_traffic_class(tc);
        } else if (!strcmp(argv[i], "--table-name")) {
            nd_tables_set_name(strcmp(argv[i + 1], "any") ? argv[i + 1] : NULL);
        } else if (!strcmp(argv[i], "--rank-wrap")) {
            if (nd_add_rank_wrap(argv[i + 1]) != 0) {
                fprintf(stderr, "netdriver: at most %d --rank-wrap\n", ND_MAX_RANKS);
                return 2;
            }
        } else if (!strcmp(argv[i], "--rank-of")) { /* set by a parent that re-executes this program */
            if (nd_set_rank_of(argv[i + 1]) != 0) {
                fprintf(stderr, "netdriver: --rank-of wants FD:RANK\n");
                return 2;
            }
        } else {
            break;
        }
        i += 2;
    }
    if (i >= argc) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[i];
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(cmd, "probe"))
        return cmd_probe();
    if (!strcmp(cmd, "traffic"))
        return nd_cmd_traffic(argc - i, argv + i);
    if (!strcmp(cmd, "bw"))
        return nd_cmd_bw(argc - i, argv + i);
    if (!strcmp(cmd, "lat"))
        return nd_cmd_lat(argc - i, argv + i);
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return 0;
    }
    usage(stderr);
    return 2;
}
