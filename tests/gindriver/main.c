/* tests/gindriver/main.c: gindriver, the GIN driver of CI (gd.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/common/plugin_tables.h"
#include "gd.h"
#include "gd_gdaki.h"
#include "gd_tests.h"
#include "parse.h"

static const char help[] =
    "usage: gindriver --plugin PATH [options] mesh|signal|spread|deep|flush|rogue|kill|rail|cq-overrun|port-down|device-fatal|port-flap|qp-fatal|rate|probe|gdaki|gdaki-a2a|gdaki-release|gdaki-release-query|gdaki-sets|gdaki-port-down|gdaki-group-fail|gdaki-ports|gdaki-error|gdaki-kill|gdaki-mismatch|gdaki-forged-{qps,link,ranks,crc,type,short,keys}\n"
    "       gindriver --plugin PATH --rma-version 13|14 [options] rma|rma-bad|rma-kill|probe\n"
    "Drives ncclGinPlugin_v11 of a railnet build as NCCL 2.28's GIN proxy does (or another GIN or\n"
    "RMA table, see the options), with ranks as processes of this host (softnic:\n"
    "LD_LIBRARY_PATH=.../tests/softnic).\n"
    "  mesh    iput full mesh, random sizes/offsets, byte-checked; deregistration\n"
    "  signal  iputSignal ordering (no signal before its data) and exact INC/ADD sums\n"
    "  spread  one 4 KiB put to every peer a round (an alltoall): each round's puts of a rank take\n"
    "          both ports of the merged device (softnic's port counters), byte-checked\n"
    "  rogue   bad handles refused with a WARN; the job still connects\n"
    "  deep    --puts puts per peer posted at once (NCCL's 256 in flight and more), 1 in 16 with an\n"
    "          ADD signal, byte-checked, sums exact; with RAILNET_STATS=1 the plugin's counters:\n"
    "          at most a quarter of the work requests signaled, one completion per signaled one\n"
    "  flush   2 ranks: a put into a window the target deregistered, amid 200 mostly unsignaled\n"
    "          puts: it and what its error flushed fail, every put reported done landed\n"
    "  kill    a rank SIGKILLed: the others get ncclRemoteError, no hang\n"
    "  cq-overrun  2 ranks: rank 0's collComm CQ shrunk to one entry overruns under its puts\n"
    "          (run with RAILNET_GIN_SIGNAL_EVERY=1): test returns ncclSystemError, no hang\n"
    "  port-down  2 ranks: rank 0's port 2 goes down with puts in flight: calls return\n"
    "          ncclSystemError within 20 s (run with SOFTNIC_RETRY_MIN_MS=SOFTNIC_RETRY_CAP_MS=60000)\n"
    "  device-fatal  port-down with the whole device failing (IBV_EVENT_DEVICE_FATAL)\n"
    "  port-flap  2 ranks: a port flap before connect does not fail the collComm, one after does\n"
    "  qp-fatal   2 ranks: a put into a deregistered window: the target's QP gets\n"
    "          IBV_EVENT_QP_ACCESS_ERR and its idle collComm fails\n"
    "  rail    --ranks N as --rails R ranks a node (rank r: node r / R, local index r % R): the job\n"
    "          connected FULL (every handle), then as NCCL's RAIL type (NCCL_CROSS_NIC=0): each rank\n"
    "          with only its rail's handles (its local index, one a node) in node order; softnic's\n"
    "          live QPs: only towards the rail; puts with ADD signals to every rail rank, byte-checked,\n"
    "          sums exact; then rail 0's first rank passes another rail's handle: refused, rail 0 fails\n"
    "          within RAILNET_HANDSHAKE_TIMEOUT (run with a short one), the other rails connect\n"
    "  rate    (bench) --puts puts of --size bytes to the next rank, --queue in flight; prints\n"
    "          '#rate rank R size S puts N secs T rate PUTS_PER_S'\n"
    "  probe   init, devices and properties as NCCL reads them\n"
    "  rma     (--rma-version) 2 contexts: --puts puts per peer and context, --queue in flight per\n"
    "          peer and context and never a retry; one in four with a signal: no signal before its\n"
    "          context's data; signal-only INC/ADD summed; gets byte-checked; a flush of the landing window\n"
    "  rma-bad (--rma-version) bad configs, context indices, ranks, windows and pointers refused with\n"
    "          ncclInvalidArgument; the context still works; a context outliving its collComm\n"
    "  rma-kill (--rma-version) a rank SIGKILLed: the others get ncclRemoteError, no hang\n"
    "  gdaki   the GDAKI type (RAILNET_GIN=gdaki RAILNET_GDAKI_QUEUE_MEM=host-devx, no CUDA): every rank\n"
    "          posts into the described queues as NCCL's device code does: puts, puts with signal,\n"
    "          counter (companion QP) or both, values, signals; --rounds per peer; byte-checked, sums exact\n"
    "  gdaki-error  a put with a bad rkey: an error CQE, and queryLastError says so (a new context: no error)\n"
    "  gdaki-a2a    nccl-tests' GIN alltoall kernel: 16 posting threads a rank (CTAs), --rounds kernels\n"
    "          back to back with world barriers, --slot bytes to every rank; byte-checked, sums exact\n"
    "  gdaki-release  gdaki-a2a with the last rank killed after 3 kernels and CTAs that never abort:\n"
    "          the others see the error, destroy the context, and their CTAs end within 10 s; then the\n"
    "          plugin is unloaded and the rank lives on for 3 s\n"
    "  gdaki-release-query  the same, but the CTAs must end once queryLastError reports the error,\n"
    "          before any destroyContext (NCCL 2.29 waits for the stream first)\n"
    "  gdaki-sets   three GDAKI contexts on one collComm (different --contexts and signal counts): puts\n"
    "          with signals through two at once, interleaved, byte-checked, sums exact per context; the\n"
    "          first destroyed, the second still used, a third made, then destroyed last made first\n"
    "  gdaki-port-down  rank 0's port 2 goes down: its queryLastError reports it within 5 s\n"
    "  gdaki-group-fail two contexts of one communicator: rank 0 sees the error on the first; both are kept\n"
    "  gdaki-ports  two collComms of one communicator: the port each one's put to the peer went on\n"
    "  gdaki-kill   a rank SIGKILLed after createContext: queryLastError of the others says so\n"
    "  gdaki-mismatch  2 ranks, rank 1 with RAILNET_GIN=proxy: both connects refused at once (ncclInvalidUsage)\n"
    "  gdaki-forged-KIND  rank 2 forges rank 0's GW_GDAKI message: createContext refuses it, ranks 0, 1 fail\n"
    "options: --ranks N (2..8, default 4)  --rounds N (3)  --puts N per peer (32)\n"
    "         --adds N signal-only adds per peer (64)  --slot BYTES (65536)  --seed N\n"
    "         --gin-version N  the GIN table driven: 11 (NCCL 2.28), 12 (NCCL 2.29), 13 (NCCL 2.30.3/2.30.4:\n"
    "                  driven as an RMA v13 table, as their GIN proxy does), 14 (NCCL 2.30.7: setup, and the GDAKI\n"
    "                  subcommands)\n"
    "         --contexts N  createContext's nContexts (GIN v12, v14; 1..64, default 1); the GDAKI\n"
    "                  subcommands check every context and post through the last\n"
    "         --backend N  GIN v14 createContext's backendVersion (0..2, default 2)\n"
    "         --queue-depth N  GIN v12 connect's and v14 createContext's queueDepth (0..65536, default 256;\n"
    "                          0: none asked)\n"
    "         --sets N  gdaki-a2a, gdaki-release: N GDAKI contexts (createContext calls) on the collComm,\n"
    "                  kernels on all at once (1..4, default 1)\n"
    "         --rma-version N  the RMA table driven: 13 (ncclRmaPlugin_v13) or 14 (ncclRmaPlugin_v14)\n"
    "         --rails R  rail: ranks a node (2..4, dividing --ranks into rails of 2 or more ranks)\n"
    "         --queue N mesh/rate puts in flight per peer (256, NCCL's depth; more: the plugin says try again)\n"
    "         --size BYTES rate: bytes per put (8)\n"
    "exit status: 0 pass, 1 a check failed, 2 usage or load error.\n";

static int probe(const char *plugin)
{
    struct gd_rank r;
    memset(&r, 0, sizeof(r));
    struct plugin_tables lib;
    char err[PATH_MAX + 256];
    const ncclGin_v11_t *gin = gd_load_gin(&lib, plugin, err, sizeof(err));
    if (!gin) {
        fprintf(stderr, "gindriver: %s\n", err);
        return 2;
    }
    void *ctx = NULL;
    ncclResult_t e = gin->init(&ctx, 1, gd_logger);
    printf("name: %s\ninit: %d\n", gin->name, e);
    if (e != ncclSuccess)
        return 0;
    int n = 0;
    gin->devices(&n);
    printf("devices: %d\n", n);
    for (int d = 0; d < n; d++) {
        ncclNetProperties_v11_t p;
        if (gin->getProperties(d, &p) != ncclSuccess)
            return 1;
        printf("device %d: name=%s ptrSupport=0x%x maxRecvs=%d netDeviceType=%d netDeviceVersion=%d "
               "vProps.ndevs=%d\n",
               d, p.name, p.ptrSupport, p.maxRecvs, p.netDeviceType, p.netDeviceVersion, p.vProps.ndevs);
    }
    if (gd_rma)
        printf("rma: createContext: %s, iput: %s, iputSignal: %s, iget: %s, iflush: %s, test: %s, progress: %s, "
               "queryLastError: %s\n",
               gd_rma->createContext ? "set" : "NULL", gd_rma->iput ? "set" : "NULL",
               gd_rma->iputSignal ? "set" : "NULL", gd_rma->iget ? "set" : "NULL", gd_rma->iflush ? "set" : "NULL",
               gd_rma->test ? "set" : "NULL", gd_rma->rmaProgress ? "set" : "NULL",
               gd_rma->queryLastError ? "set" : "NULL");
    else
        printf("createContext: %s, ginProgress: %s, queryLastError: %s\n", gin->createContext ? "set" : "NULL",
               gin->ginProgress ? "set" : "NULL", gin->queryLastError ? "set" : "NULL");
    gd_print_gin_properties();
    gin->finalize(ctx);
    return 0;
}

int main(int argc, char **argv)
{
    const char *plugin = NULL, *cmd = NULL;
    struct gd_opts o = { .ranks = 4, .rounds = 3, .puts = 32, .adds = 64, .queue = 256, .slot = 65536, .seed = 12345,
                       .sets = 1, .rails = 1 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long x = 0;
        int bad = 0;   /* numbers whole or refused (parse.h): "--slot 1M" was 1 byte */
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return 0;
        } else if (!strcmp(a, "--gin-version") && v) {
            gd_gin_version = atoi(v), i++;
            if (gd_gin_version < 11 || gd_gin_version > 14 || strspn(v, "0123456789") != strlen(v)) {
                fprintf(stderr, "gindriver: bad value '%s' for --gin-version (11, 12, 13 or 14)\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--contexts") && v) {
            bad = parse_int(v, 1, 64, &x), gd_contexts = (int)x, i++;
        } else if (!strcmp(a, "--sets") && v) {
            bad = parse_int(v, 1, 4, &x), o.sets = (int)x, i++;
        } else if (!strcmp(a, "--backend") && v) {
            bad = parse_int(v, 0, 2, &x), gd_backend = (int)x, i++;
        } else if (!strcmp(a, "--queue-depth") && v) {
            bad = parse_int(v, 0, 65536, &x), gd_queue_depth = (int)x, i++;
        } else if (!strcmp(a, "--rma-version") && v) {
            gd_rma_version = atoi(v), i++;
            if ((gd_rma_version != 13 && gd_rma_version != 14) || strspn(v, "0123456789") != strlen(v)) {
                fprintf(stderr, "gindriver: bad value '%s' for --rma-version (13 or 14)\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--plugin") && v)
            plugin = v, i++;
        else if (!strcmp(a, "--ranks") && v)
            bad = parse_int(v, 1, 1 << 20, &x), o.ranks = (int)x, i++;
        else if (!strcmp(a, "--rails") && v)
            bad = parse_int(v, 1, GD_MAX_RANKS, &x), o.rails = (int)x, i++;
        else if (!strcmp(a, "--rounds") && v)
            bad = parse_int(v, 1, 1 << 20, &x), o.rounds = (int)x, i++;
        else if (!strcmp(a, "--puts") && v)
            bad = parse_int(v, 1, 1 << 20, &x), o.puts = (int)x, i++;
        else if (!strcmp(a, "--queue") && v)
            bad = parse_int(v, 1, 1 << 20, &x), o.queue = (int)x, i++;
        else if (!strcmp(a, "--adds") && v)
            bad = parse_int(v, 1, 1 << 20, &x), o.adds = (int)x, i++;
        else if (!strcmp(a, "--slot") && v)
            bad = parse_size(v, 1, 64 << 20, &x), o.slot = (size_t)x, i++;
        else if (!strcmp(a, "--size") && v)
            bad = parse_size(v, 1, 1 << 30, &x), o.size = (size_t)x, i++;
        else if (!strcmp(a, "--seed") && v) {
            /* any 64-bit value, whole: "12x" was seed 12 */
            unsigned long long seed = 0;
            bad = parse_u64(v, &seed);
            o.seed = seed, i++;
        }
        else if (a[0] != '-' && !cmd)
            cmd = a;
        else {
            fprintf(stderr, "gindriver: unknown argument %s\n%s", a, help);
            return 2;
        }
        if (bad) {
            fprintf(stderr,
                    "gindriver: bad value '%s' for %s (counts: whole integers; sizes: bytes with an optional "
                    "K/M/G suffix; --seed: 0 to 2^64-1)\n", v, a);
            return 2;
        }
    }
    if (!plugin || !cmd || o.ranks < 2 || o.ranks > GD_MAX_RANKS || o.puts < 1 || o.rounds < 1 || o.adds < 1 ||
        o.queue < 1 || o.size > (1u << 30) ||
        (strcmp(cmd, "rate") && o.slot < (size_t)o.puts * 64) || o.slot > (64u << 20)) {
        fprintf(stderr, "%s", help);
        return 2;
    }
    if (!strcmp(cmd, "rail") && (o.rails < 2 || o.ranks % o.rails || o.ranks / o.rails < 2)) {
        fprintf(stderr, "gindriver: rail needs --rails R of 2 or more dividing --ranks %d into rails of 2 or more "
                        "ranks (got %d)\n", o.ranks, o.rails);
        return 2;
    }
    if (gd_gin_version == 13 && !gd_rma_version)
        gd_rma_version = 13; /* GIN v13's data path is the RMA v13 layout's */
    if (gd_rma_version && gd_gin_version != 11 && gd_gin_version != gd_rma_version) {
        fprintf(stderr, "gindriver: --rma-version %d goes with --gin-version 13 (GIN v13 as an RMA table) or none\n",
                gd_rma_version);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(cmd, "probe"))
        return probe(plugin);
    int bad = gd_test_run(plugin, cmd, &o);
    if (bad < 0) {
        fprintf(stderr, "gindriver: unknown subcommand %s\n%s", cmd, help);
        return 2;
    }
    printf("%s: %s\n", cmd, bad ? "FAIL" : "PASS");
    return bad ? 1 : 0;
}
