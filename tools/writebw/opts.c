/* tools/writebw/opts.c: railnet-write-bw's options (see opts.h). */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modes.h"
#include "opts.h"
#include "plugin/ib/parse.h"

void wb_usage(FILE *out)
{
    fprintf(out,
"Usage: railnet-write-bw [options]            start a server\n"
"       railnet-write-bw [options] SERVER     run the client against SERVER\n"
"RDMA WRITE bandwidth between two processes, in the spirit of perftest's\n"
"ib_write_bw, with host or GPU memory, through raw verbs or through railnet's\n"
"own NCCL net plugin. Both sides must be given the same test options.\n"
"\n"
"  -p, --tcp-port N         TCP port of the out-of-band exchange (default %d;\n"
"                           a server given 0 takes a free port and prints it)\n"
"  -d, --ib-dev NAME        RDMA device (default: the first); in plugin mode the\n"
"                           plugin device of that name\n"
"  -i, --ib-port N          port to use (default 1)\n"
"      --ports LIST         stripe over these ports, e.g. 1,2 (overrides -i)\n"
"  -x, --gid-index N        GID index (default: the first RoCE v2 IPv4 GID, else 0)\n"
"  -s, --size BYTES         bytes per write (default 65536; K, M, G suffixes)\n"
"  -a, --all                every power of two from 2 B to 8 MiB\n"
"  -n, --iters N            writes per size (default 1000)\n"
"  -D, --duration SECONDS   run each size for this long instead of -n\n"
"  -q, --qp N               QPs per port (default 1); writes go round-robin\n"
"  -t, --tx-depth N         outstanding writes per QP (default 128)\n"
"      --use_cuda[=GPU]     use GPU memory on CUDA device GPU (default 0)\n"
"      --dmabuf             register GPU memory through dmabuf only\n"
"      --peermem            register GPU memory through nvidia_peermem only\n"
"                           (default: dmabuf, then peer memory)\n"
"      --cuda_vmm           allocate GPU memory with cuMemCreate/cuMemMap (the\n"
"                           VMM API NCCL uses by default) instead of cuMemAlloc\n"
"      --no-relaxed-ordering  register without IBV_ACCESS_RELAXED_ORDERING\n"
"      --mode=verbs|plugin  raw verbs (default), or railnet's plugin API\n"
"  -R, --rdma_cm            verbs mode: connect the QPs through the RDMA CM (as\n"
"                           perftest -R): the server listens on the TCP port's\n"
"                           number, the client connects to the server's address;\n"
"                           the CM picks the port, GID and path (one port)\n"
"      --plugin-lib PATH    plugin library for --mode=plugin (default: as NCCL\n"
"                           finds it from NCCL_NET_PLUGIN, else libnccl-net-railnet.so\n"
"                           next to this tool, then the loader's search path)\n"
"      --ibverbs-lib PATH   libibverbs to load (default libibverbs.so.1)\n"
"      --bidir              both sides write at once; the sum is reported\n"
"      --gpu-initiated      the client's writes are posted by a CUDA kernel\n"
"                           (railnet's GPU-initiated path, plugin/gdaki) on one\n"
"                           QP, from and to GPU memory (CUDA device 0, or GPU\n"
"                           of --use_cuda=GPU); -t is the window of writes in\n"
"                           flight before the kernel waits; adds a column with\n"
"                           the median latency of one put + quiet%s\n"
"  -I, --inline_size BYTES  --gpu-initiated: writes of at most BYTES (0..972,\n"
"                           default 972) carry their payload inside the WQE:\n"
"                           the kernel reads it, the NIC fetches no buffer;\n"
"                           past 220 bytes only while no write is in flight\n"
"      --report_gbits       report Gb/s instead of GB/s\n"
"      --json               machine-readable output on stdout\n"
"      --timeout SECONDS    give up on connecting to or hearing from the peer\n"
"                           after this long (default 10)\n"
"  -h, --help               this help\n"
"  -V, --version            print the version\n"
"\n"
"Exit status: 0 on success, 1 when the test failed (peer, device, completion\n"
"error), 2 on a usage error. See railnet-write-bw(1).\n", WB_DEFAULT_TCP_PORT,
            wb_gpu_initiated_built ? "" : "\n                           (not built in this version: no nvcc)");
}

static int parse_ports(const char *s, struct wb_opts *o)
{
    char buf[64];
    if (strlen(s) >= sizeof(buf))
        return -1;
    strcpy(buf, s);
    o->nports = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long long v;
        if (o->nports == WB_MAX_PORTS || parse_int(tok, 1, 255, &v))
            return -1;
        for (int i = 0; i < o->nports; i++)
            if (o->ports[i] == v)
                return -1;
        o->ports[o->nports++] = (int)v;
    }
    return o->nports ? 0 : -1;
}

int wb_opts_parse(int argc, char **argv, struct wb_opts *o)
{
    enum { OPT_PORTS = 256, OPT_CUDA, OPT_DMABUF, OPT_PEERMEM, OPT_NORO, OPT_MODE, OPT_PLUGIN,
           OPT_VERBS, OPT_BIDIR, OPT_GBITS, OPT_JSON, OPT_GPUINIT, OPT_TIMEOUT,
           OPT_VMM };
    static const struct option longopts[] = {
        { "tcp-port", required_argument, NULL, 'p' },
        { "ib-dev", required_argument, NULL, 'd' },
        { "ib-port", required_argument, NULL, 'i' },
        { "ports", required_argument, NULL, OPT_PORTS },
        { "gid-index", required_argument, NULL, 'x' },
        { "size", required_argument, NULL, 's' },
        { "all", no_argument, NULL, 'a' },
        { "iters", required_argument, NULL, 'n' },
        { "duration", required_argument, NULL, 'D' },
        { "qp", required_argument, NULL, 'q' },
        { "tx-depth", required_argument, NULL, 't' },
        { "use_cuda", optional_argument, NULL, OPT_CUDA },
        { "dmabuf", no_argument, NULL, OPT_DMABUF },
        { "peermem", no_argument, NULL, OPT_PEERMEM },
        { "no-relaxed-ordering", no_argument, NULL, OPT_NORO },
        { "mode", required_argument, NULL, OPT_MODE },
        { "rdma_cm", no_argument, NULL, 'R' },
        { "plugin-lib", required_argument, NULL, OPT_PLUGIN },
        { "ibverbs-lib", required_argument, NULL, OPT_VERBS },
        { "bidir", no_argument, NULL, OPT_BIDIR },
        { "report_gbits", no_argument, NULL, OPT_GBITS },
        { "json", no_argument, NULL, OPT_JSON },
        { "gpu-initiated", no_argument, NULL, OPT_GPUINIT },
        { "inline_size", required_argument, NULL, 'I' },
        { "timeout", required_argument, NULL, OPT_TIMEOUT },
        { "cuda_vmm", no_argument, NULL, OPT_VMM },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    memset(o, 0, sizeof(*o));
    o->tcp_port = WB_DEFAULT_TCP_PORT;
    o->ports[0] = 1;
    o->nports = 1;
    o->gid_index = -1;
    o->inline_size = -1;
    o->sizes[0] = 65536;
    o->nsizes = 1;
    o->iters = 1000;
    o->qps = 1;
    o->tx_depth = 128;
    o->reg = MEM_REG_AUTO;
    o->relaxed = 1;
    o->timeout = 10;
    int ports_given = 0, size_given = 0, iters_given = 0, c, li;
    char optname[40];
    long long v, sz;
    opterr = 0;
    while (li = -1, (c = getopt_long(argc, argv, ":p:d:i:x:s:an:D:q:t:I:RhV", longopts, &li)) != -1) {
        /* The option as the user spelled it, for messages. */
        if (li >= 0)
            snprintf(optname, sizeof(optname), "--%s", longopts[li].name);
        else
            snprintf(optname, sizeof(optname), "-%c", c == ':' || c == '?' ? optopt : c);
        switch (c) {
        case 'p':
            if (parse_int(optarg, 0, 65535, &v)) goto bad;
            o->tcp_port = (int)v;
            break;
        case 'd': o->dev = optarg; break;
        case 'i':
            if (parse_int(optarg, 1, 255, &v)) goto bad;
            if (!ports_given) {
                o->ports[0] = (int)v;
                o->nports = 1;
            }
            break;
        case OPT_PORTS:
            if (parse_ports(optarg, o)) {
                fprintf(stderr, "railnet-write-bw: --ports wants distinct port numbers "
                        "1..255 separated by commas (at most %d), not '%s'\n", WB_MAX_PORTS,
                        optarg);
                return -1;
            }
            ports_given = 1;
            break;
        case 'x':
            if (parse_int(optarg, 0, 255, &v)) goto bad;
            o->gid_index = (int)v;
            break;
        case 's':
            if (parse_size(optarg, 1, 1 << 30, &sz)) {
                fprintf(stderr, "railnet-write-bw: -s wants 1 byte to 1 GiB, not '%s'\n", optarg);
                return -1;
            }
            o->sizes[0] = (size_t)sz;
            size_given = 1;
            break;
        case 'a': o->all_sizes = 1; break;
        case 'n':
            if (parse_int(optarg, 1, 1000000000L, &v)) goto bad;
            o->iters = v;
            iters_given = 1;
            break;
        case 'D': {
            char *end;
            double d = strtod(optarg, &end);
            if (!*optarg || *end || !isfinite(d) || d <= 0 || d > 3600) goto bad;
            o->duration = d;
            break;
        }
        case 'q':
            if (parse_int(optarg, 1, WB_MAX_QPS, &v)) goto bad;
            o->qps = (int)v;
            break;
        case 't':
            if (parse_int(optarg, 1, 8192, &v)) goto bad;
            o->tx_depth = (int)v;
            break;
        case 'I':
            if (parse_int(optarg, 0, WB_GI_INLINE, &v)) goto bad;
            o->inline_size = (int)v;
            break;
        case OPT_CUDA:
            o->use_cuda = 1;
            if (optarg) {
                if (parse_int(optarg, 0, 1023, &v)) goto bad;
                o->gpu = (int)v;
            }
            break;
        case OPT_DMABUF:
        case OPT_PEERMEM: {
            enum mem_reg want = c == OPT_DMABUF ? MEM_REG_DMABUF : MEM_REG_PEERMEM;
            if (o->reg != MEM_REG_AUTO && o->reg != want) {
                fprintf(stderr, "railnet-write-bw: --dmabuf and --peermem exclude each other\n");
                return -1;
            }
            o->reg = want;
            break;
        }
        case OPT_NORO: o->relaxed = 0; break;
        case 'R': o->rdma_cm = 1; break;
        case OPT_VMM: o->cuda_vmm = 1; break;
        case OPT_MODE:
            if (!strcmp(optarg, "verbs"))
                o->mode = WB_MODE_VERBS;
            else if (!strcmp(optarg, "plugin"))
                o->mode = WB_MODE_PLUGIN;
            else
                goto bad;
            break;
        case OPT_PLUGIN: o->plugin_lib = optarg; break;
        case OPT_VERBS: o->ibverbs_lib = optarg; break;
        case OPT_BIDIR: o->bidir = 1; break;
        case OPT_GBITS: o->report_gbits = 1; break;
        case OPT_JSON: o->json = 1; break;
        case OPT_GPUINIT: o->gpu_initiated = 1; break;
        case OPT_TIMEOUT: {
            char *end;
            double d = strtod(optarg, &end);
            if (!*optarg || *end || !isfinite(d) || d <= 0 || d > 86400) goto bad;
            o->timeout = d;
            break;
        }
        case 'h': wb_usage(stdout); return 1;
        case 'V': printf("railnet-write-bw %s\n", PACKAGE_VERSION); return 1;
        case ':':
            /* a long option's optopt is its value, not a letter: name it
             * as the user typed it */
            fprintf(stderr, "railnet-write-bw: option %s needs a value\n",
                    optopt > 0 && optopt < 256 ? optname : argv[optind - 1]);
            fprintf(stderr, "Try 'railnet-write-bw --help'.\n");
            return -1;
        default:
            fprintf(stderr, "railnet-write-bw: unknown option %s\n", argv[optind - 1]);
            fprintf(stderr, "Try 'railnet-write-bw --help'.\n");
            return -1;
        }
        continue;
    bad:
        fprintf(stderr, "railnet-write-bw: invalid value for %s: '%s'\n", optname,
                optarg ? optarg : "");
        return -1;
    }
    if (optind < argc)
        o->server = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "railnet-write-bw: unexpected argument '%s' (one server name at most)\n",
                argv[optind]);
        return -1;
    }
    if (o->server && o->tcp_port == 0) {
        fprintf(stderr, "railnet-write-bw: a client needs the server's TCP port (-p 1..65535)\n");
        return -1;
    }
    if (o->all_sizes && size_given) {
        fprintf(stderr, "railnet-write-bw: -a and -s exclude each other\n");
        return -1;
    }
    if (o->duration > 0 && iters_given) {
        fprintf(stderr, "railnet-write-bw: -D and -n exclude each other\n");
        return -1;
    }
    if (o->all_sizes) {
        o->nsizes = 0;
        for (size_t s = WB_ALL_MIN; s <= WB_ALL_MAX; s <<= 1)
            o->sizes[o->nsizes++] = s;
    }
    if (o->gpu_initiated && !wb_gpu_initiated_built) {
        fprintf(stderr, "railnet-write-bw: --gpu-initiated is not built in this version "
                "(configure found no nvcc for plugin/gdaki's device code); use --mode=verbs "
                "or --mode=plugin\n");
        return -1;
    }
    if (o->gpu_initiated) {
        const char *no = o->mode == WB_MODE_PLUGIN ? "--mode=plugin"
                         : o->bidir ? "--bidir"
                         : o->duration > 0 ? "-D"
                         : o->qps != 1 ? "-q"
                         : o->nports != 1 ? "--ports"
                         : o->reg == MEM_REG_DMABUF ? "--dmabuf" : NULL;
        if (no) {
            fprintf(stderr, "railnet-write-bw: %s does not apply to --gpu-initiated (one QP, "
                    "one way, a fixed count of kernel-posted writes registered with "
                    "ibv_reg_mr)\n", no);
            return -1;
        }
        if (o->tx_depth > 4096) {
            fprintf(stderr, "railnet-write-bw: --gpu-initiated takes -t up to 4096 (the "
                    "kernel's window of writes in flight)\n");
            return -1;
        }
        /* GPU memory on both sides: the header and the peer say cuda:N. */
        o->use_cuda = 1;
        if (o->inline_size < 0)
            o->inline_size = WB_GI_INLINE_DEFAULT;
    } else if (o->inline_size >= 0) {
        fprintf(stderr, "railnet-write-bw: -I applies to --gpu-initiated (the kernel reads the "
                "payload into the WQE; a CPU cannot read GPU memory)\n");
        return -1;
    }
    if (o->cuda_vmm && o->gpu_initiated) {
        fprintf(stderr, "railnet-write-bw: --cuda_vmm does not apply to --gpu-initiated (its "
                "buffers come from plugin/gdaki)\n");
        return -1;
    }
    if (o->cuda_vmm && !o->use_cuda) {
        fprintf(stderr, "railnet-write-bw: --cuda_vmm applies to GPU memory: add --use_cuda\n");
        return -1;
    }
    if (o->reg != MEM_REG_AUTO && !o->use_cuda) {
        fprintf(stderr, "railnet-write-bw: --%s applies to GPU memory: add --use_cuda\n",
                o->reg == MEM_REG_DMABUF ? "dmabuf" : "peermem");
        return -1;
    }
    if (o->mode == WB_MODE_PLUGIN && (ports_given || o->qps != 1 || o->gid_index >= 0)) {
        fprintf(stderr, "railnet-write-bw: --ports, -q and -x do not apply to --mode=plugin: "
                "the plugin picks ports, QPs and GIDs itself (configure it with its RAILNET_* "
                "variables)\n");
        return -1;
    }
    if (o->rdma_cm && (o->mode != WB_MODE_VERBS || o->gpu_initiated || o->nports != 1 || o->gid_index >= 0)) {
        fprintf(stderr, "railnet-write-bw: -R connects the verbs mode's QPs on one port through the RDMA CM, "
                "which picks the GID: %s does not apply (for the plugin, set RAILNET_CM=rdmacm)\n",
                o->mode != WB_MODE_VERBS ? "--mode=plugin" : o->gpu_initiated ? "--gpu-initiated"
                : o->nports != 1 ? "--ports" : "-x");
        return -1;
    }
    if (o->mode == WB_MODE_PLUGIN) {
        for (int i = 0; i < o->nsizes; i++)
            if (o->sizes[i] > (size_t)0x7fffffff) {
                fprintf(stderr, "railnet-write-bw: --mode=plugin sends at most 2 GiB - 1\n");
                return -1;
            }
    }
    return 0;
}
