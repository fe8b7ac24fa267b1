/* tools/diag/main.c: railnet-diag's command line, check order and output.
 * Exit status: 0 no check failed, 1 at least one FAIL, 2 usage or tool
 * error. */
#include "config.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/strfmt.h"
#include "../common/json.h"
#include "diag.h"
#include "parse.h"

static void usage(FILE *out)
{
    fprintf(out,
"Usage: railnet-diag [options]\n"
"Finds why GPU memory registration or GPUDirect RDMA bandwidth is bad, especially\n"
"in SR-IOV virtual machines. Each check prints OK, WARN, FAIL (or SKIP) with the\n"
"evidence and the fix to try.\n"
"\n"
"  -d, --device NAME      check only this RDMA device (default: all)\n"
"      --sysfs-root DIR   read sysfs from DIR instead of /sys\n"
"      --proc-root DIR    read procfs from DIR instead of /proc\n"
"      --ibverbs-lib PATH libibverbs to load (default libibverbs.so.1)\n"
"      --probe            also measure: loopback RDMA WRITE bandwidth into host\n"
"                         memory and into GPU memory (dmabuf and peer memory, each\n"
"                         with and without relaxed ordering)\n"
"  -i, --ib-port N        port used by --probe (default 1)\n"
"  -x, --gid-index N      GID index used by --probe (default: the first RoCE v2\n"
"                         IPv4 GID, else 0)\n"
"  -s, --size BYTES       bytes per write in --probe (default 1048576; K, M, G suffixes)\n"
"  -n, --iters N          writes per probe row (default 200)\n"
"      --gpu N            CUDA device for the GPU checks and the probe (default 0)\n"
"      --json             machine-readable output\n"
"  -v, --verbose          print the evidence of OK checks too\n"
"  -h, --help             this help\n"
"  -V, --version          print the version\n"
"\n"
"Exit status: 0 when no check failed, 1 when a check failed, 2 on a usage or\n"
"tool error. See railnet-diag(1).\n");
}

static int parse_args(int argc, char **argv, struct diag_ctx *ctx)
{
    enum { OPT_SYSFS = 256, OPT_PROC, OPT_LIB, OPT_PROBE, OPT_GPU, OPT_JSON };
    static const struct option longopts[] = {
        { "device", required_argument, NULL, 'd' },
        { "sysfs-root", required_argument, NULL, OPT_SYSFS },
        { "proc-root", required_argument, NULL, OPT_PROC },
        { "ibverbs-lib", required_argument, NULL, OPT_LIB },
        { "probe", no_argument, NULL, OPT_PROBE },
        { "ib-port", required_argument, NULL, 'i' },
        { "gid-index", required_argument, NULL, 'x' },
        { "size", required_argument, NULL, 's' },
        { "iters", required_argument, NULL, 'n' },
        { "gpu", required_argument, NULL, OPT_GPU },
        { "json", no_argument, NULL, OPT_JSON },
        { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    struct diag_opts *o = &ctx->opts;
    str_fmt(ctx->roots.sys, sizeof(ctx->roots.sys), "/sys");
    str_fmt(ctx->roots.proc, sizeof(ctx->roots.proc), "/proc");
    o->probe_port = 1;
    o->probe_gid_index = -1;
    o->probe_size = 1 << 20;
    o->probe_iters = 200;
    o->cuda_dev = -1;
    int c;
    long long v;
    while ((c = getopt_long(argc, argv, "d:i:x:s:n:vhV", longopts, NULL)) != -1) {
        switch (c) {
        case 'd': o->dev = optarg; break;
        case OPT_SYSFS:
        case OPT_PROC: {
            char *dst = c == OPT_SYSFS ? ctx->roots.sys : ctx->roots.proc;
            if (strlen(optarg) >= PATH_MAX - 64) {
                fprintf(stderr, "railnet-diag: path too long: %s\n", optarg);
                return -1;
            }
            str_fmt(dst, PATH_MAX, "%s", optarg);
            break;
        }
        case OPT_LIB: o->ibverbs_lib = optarg; break;
        case OPT_PROBE: o->probe = 1; break;
        case 'i':
            if (parse_int(optarg, 1, 255, &v)) goto bad;
            o->probe_port = (int)v;
            break;
        case 'x':
            if (parse_int(optarg, 0, 65535, &v)) goto bad;
            o->probe_gid_index = (int)v;
            break;
        case 's':
            if (parse_size(optarg, 1, 1L << 30, &v)) goto bad;
            o->probe_size = (size_t)v;
            break;
        case 'n':
            if (parse_int(optarg, 1, 1000000, &v)) goto bad;
            o->probe_iters = (int)v;
            break;
        case OPT_GPU:
            if (parse_int(optarg, 0, 1023, &v)) goto bad;
            o->cuda_dev = (int)v;
            break;
        case OPT_JSON: o->json = 1; break;
        case 'v': o->verbose = 1; break;
        case 'h': usage(stdout); exit(0);
        case 'V': printf("railnet-diag %s\n", PACKAGE_VERSION); exit(0);
        default: usage(stderr); return -1;
        }
        continue;
    bad:
        if (c > 0 && c < 256) {
            fprintf(stderr, "railnet-diag: invalid value for -%c: %s\n", c, optarg);
        } else {
            const char *name = "?";
            for (const struct option *lo = longopts; lo->name; lo++)
                if (lo->val == c)
                    name = lo->name;
            fprintf(stderr, "railnet-diag: invalid value for --%s: %s\n", name, optarg);
        }
        return -1;
    }
    if (optind < argc) {
        fprintf(stderr, "railnet-diag: unexpected argument: %s\n", argv[optind]);
        usage(stderr);
        return -1;
    }
    if (!path_exists(ctx->roots.sys)) {
        fprintf(stderr, "railnet-diag: sysfs root %s does not exist\n", ctx->roots.sys);
        return -1;
    }
    if (!path_exists(ctx->roots.proc)) {
        fprintf(stderr, "railnet-diag: proc root %s does not exist\n", ctx->roots.proc);
        return -1;
    }
    return 0;
}

static void print_probe_text(const struct diag_ctx *ctx)
{
    if (!ctx->nprobe)
        return;
    printf("\nprobe: loopback RDMA WRITE on %s port %d, %zu B x %d writes\n", ctx->probe_device,
           ctx->opts.probe_port, ctx->opts.probe_size, ctx->opts.probe_iters);
    printf(" %-6s %-11s %-8s %12s  %s\n", "memory", "path", "relaxed", "BW [Gb/s]", "note");
    for (int i = 0; i < ctx->nprobe; i++) {
        const struct probe_row *r = &ctx->probe[i];
        if (r->ran)
            printf(" %-6s %-11s %-8s %12.2f\n", r->memory, r->path, r->relaxed ? "on" : "off",
                   r->gbps);
        else
            printf(" %-6s %-11s %-8s %12s  skipped: %s\n", r->memory, r->path,
                   r->relaxed ? "on" : "off", "-", r->why);
    }
    printf("\n");
}

static void print_json(const struct diag_ctx *ctx)
{
    printf("{\n  \"tool\": \"railnet-diag\",\n  \"version\": ");
    json_str(stdout, PACKAGE_VERSION);
    printf(",\n  \"sysfs_root\": ");
    json_str(stdout, ctx->roots.sys);
    printf(",\n  \"proc_root\": ");
    json_str(stdout, ctx->roots.proc);
    printf(",\n  \"checks\": [");
    report_print_json_checks(&ctx->rep, stdout);
    printf("\n  ],\n  \"summary\": {\"ok\": %zu, \"warn\": %zu, \"fail\": %zu, \"skip\": %zu}",
           report_count(&ctx->rep, DIAG_OK), report_count(&ctx->rep, DIAG_WARN),
           report_count(&ctx->rep, DIAG_FAIL), report_count(&ctx->rep, DIAG_SKIP));
    if (ctx->nprobe) {
        printf(",\n  \"probe\": {\"device\": ");
        json_str(stdout, ctx->probe_device);
        printf(", \"port\": %d, \"size\": %zu, \"iters\": %d, \"rows\": [", ctx->opts.probe_port,
               ctx->opts.probe_size, ctx->opts.probe_iters);
        for (int i = 0; i < ctx->nprobe; i++) {
            const struct probe_row *r = &ctx->probe[i];
            printf("%s\n    {\"memory\": \"%s\", \"path\": \"%s\", \"relaxed_ordering\": %s, "
                   "\"ran\": %s, \"gbps\": ", i ? "," : "", r->memory, r->path,
                   r->relaxed ? "true" : "false", r->ran ? "true" : "false");
            if (r->ran)
                json_num(stdout, r->gbps);
            else
                fputs("null", stdout);
            printf(", \"skipped_because\": ");
            json_str(stdout, r->ran ? NULL : r->why);
            printf("}");
        }
        printf("\n  ]}");
    }
    printf("\n}\n");
}

int main(int argc, char **argv)
{
    static struct diag_ctx ctx;
    if (parse_args(argc, argv, &ctx))
        return 2;
    ctx.ngpus = pci_find_gpus(&ctx.roots, ctx.gpus, DIAG_MAX_GPUS);
    ctx.facts.ngpus = ctx.ngpus;

    diag_check_host(&ctx);
    diag_check_nics(&ctx);
    for (int i = 0; i < ctx.ngpus; i++)
        diag_check_pcie_function(&ctx, &ctx.gpus[i], ctx.gpus[i].bdf, 0, 0, 0);
    diag_check_gpu_paths(&ctx);
    if (ctx.opts.probe)
        diag_probe(&ctx);

    size_t fails = report_count(&ctx.rep, DIAG_FAIL);
    if (ctx.opts.json) {
        print_json(&ctx);
    } else {
        printf("railnet-diag %s: sysfs %s, proc %s\n", PACKAGE_VERSION, ctx.roots.sys,
               ctx.roots.proc);
        report_print_text(&ctx.rep, stdout, ctx.opts.verbose);
        print_probe_text(&ctx);
        printf("summary: %zu OK, %zu WARN, %zu FAIL, %zu SKIP\n", report_count(&ctx.rep, DIAG_OK),
               report_count(&ctx.rep, DIAG_WARN), fails, report_count(&ctx.rep, DIAG_SKIP));
    }
    report_free(&ctx.rep);
    return fails ? 1 : 0;
}
