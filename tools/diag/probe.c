/* tools/diag/probe.c: --probe. Two RC QPs on one port, connected to each
 * other, write from a host buffer into the memory under test; one row per
 * (memory, registration path, relaxed ordering). The verdict compares GPU
 * rows with the host-memory row measured in the same run. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "../common/strfmt.h"
#include "../common/bw.h"
#include "../common/cuda_dl.h"
#include "../common/mem.h"
#include "../common/rc.h"
#include "ibvwrap.h"
#include "diag.h"

/* A GPU row below this fraction of host-memory bandwidth is "slow"; the
 * ordering case shows as slow without relaxed ordering and not slow with it.
 * Loose on purpose: the probe is short and a software NIC is noisy. */
#define PROBE_SLOW 0.5

struct probe_env {
    struct diag_ctx *ctx;
    struct rc_dev *dev;
    struct rc_qp qp[2];
    struct mem_buf src;
    struct cuda_dl *cuda;
};

static void run_row(struct probe_env *env, struct probe_row *row, enum mem_kind kind,
                    enum mem_reg path, int relaxed)
{
    struct diag_ctx *ctx = env->ctx;
    row->memory = mem_kind_name(kind);
    row->path = mem_reg_name(path);
    row->relaxed = relaxed;
    if (kind == MEM_CUDA && !env->cuda) {
        str_fmt(row->why, sizeof(row->why), "%s", ctx->facts.cuda_why[0] ? ctx->facts.cuda_why
                                                                          : "no CUDA driver");
        return;
    }
    struct mem_buf dst;
    char err[512];
    int gpu = ctx->opts.cuda_dev >= 0 ? ctx->opts.cuda_dev : 0;
    if (mem_alloc_reg(&dst, env->dev, env->cuda, gpu, kind, path, relaxed, ctx->opts.probe_size,
                      err, sizeof(err))) {
        str_fmt(row->why, sizeof(row->why), "%s", err);
        return;
    }
    if (relaxed && dst.ro_dropped) {
        str_fmt(row->why, sizeof(row->why), "rdma-core cannot pass IBV_ACCESS_RELAXED_ORDERING");
        mem_free(&dst, env->dev);
        return;
    }
    struct bw_params p = { .size = ctx->opts.probe_size, .iters = ctx->opts.probe_iters,
                           .tx_depth = 64, .cq_mod = 8, .stall_timeout = 20 };
    struct bw_result warm, res;
    struct bw_params pw = p;
    pw.iters = p.iters / 10 > 0 ? p.iters / 10 : 1;
    if (bw_run_writes(&env->qp[0], 1, env->src.ptr, env->src.mr->lkey,
                      (uint64_t)(uintptr_t)dst.ptr, dst.mr->rkey, &pw, &warm, err, sizeof(err)) ||
        bw_run_writes(&env->qp[0], 1, env->src.ptr, env->src.mr->lkey,
                      (uint64_t)(uintptr_t)dst.ptr, dst.mr->rkey, &p, &res, err, sizeof(err))) {
        str_fmt(row->why, sizeof(row->why), "%s", err);
    } else {
        row->ran = 1;
        row->gbps = res.avg_bps * 8 / 1e9;
        row->seconds = res.seconds;
    }
    mem_free(&dst, env->dev);
}

static void verdict(struct diag_ctx *ctx)
{
    const struct probe_row *host = &ctx->probe[0];
    const char *subj = ctx->probe_device;
    if (!host->ran) {
        report_add(&ctx->rep, DIAG_FAIL, "probe.host", subj, host->why,
                   "fix the port (port.link) and rerun", "loopback RDMA WRITE into host memory failed");
        return;
    }
    report_add(&ctx->rep, DIAG_OK, "probe.host", subj, NULL, NULL,
               "loopback RDMA WRITE into host memory: %.2f Gb/s", host->gbps);
    int gpu_rows = 0;
    for (int path = 0; path < 2; path++) {
        const struct probe_row *ro = &ctx->probe[1 + 2 * path];
        const struct probe_row *strict = &ctx->probe[2 + 2 * path];
        if (!ro->ran && !strict->ran)
            continue;
        gpu_rows++;
        char subject[64];
        str_fmt(subject, sizeof(subject), "%s", subj);
        double f_strict = strict->ran ? strict->gbps / host->gbps : -1;
        double f_ro = ro->ran ? ro->gbps / host->gbps : -1;
        char ev[512];
        str_fmt(ev, sizeof(ev), "host %.2f Gb/s; GPU via %s: relaxed ordering on %s%.2f Gb/s, "
                 "off %s%.2f Gb/s", host->gbps, ro->path, ro->ran ? "" : "(not run) ",
                 ro->ran ? ro->gbps : 0.0, strict->ran ? "" : "(not run) ",
                 strict->ran ? strict->gbps : 0.0);
        if (strict->ran && f_strict < PROBE_SLOW && (ro->ran && f_ro >= PROBE_SLOW)) {
            report_add(&ctx->rep, DIAG_FAIL, "probe.relaxed_ordering", subject, ev,
                       "register GPU memory with IBV_ACCESS_RELAXED_ORDERING "
                       "(RAILNET_RELAXED_ORDERING=1; NCCL_IB_PCI_RELAXED_ORDERING=1 for NCCL's IB "
                       "transport)",
                       "GPU writes without relaxed ordering run at %.0f%% of host-memory "
                       "bandwidth (%.0f%% with it, %s): this is the SR-IOV VF ordering case; "
                       "register with IBV_ACCESS_RELAXED_ORDERING (RAILNET_RELAXED_ORDERING=1)",
                       100 * f_strict, 100 * f_ro, ro->path);
        } else if ((strict->ran && f_strict < PROBE_SLOW) || (ro->ran && f_ro < PROBE_SLOW)) {
            report_add(&ctx->rep, DIAG_FAIL, "probe.gpu_bandwidth", subject, ev,
                       "relaxed ordering does not help here: look at pci.acs, nic.iommu, "
                       "topo.gpu_distance and pci.max_payload above",
                       "GPU writes via %s run at %.0f%% of host-memory bandwidth even with "
                       "relaxed ordering", ro->path, 100 * (ro->ran ? f_ro : f_strict));
        } else {
            report_add(&ctx->rep, DIAG_OK, "probe.relaxed_ordering", subject, ev, NULL,
                       "GPU writes via %s run at %.0f%% (relaxed ordering off) and %.0f%% (on) "
                       "of host-memory bandwidth: no ordering slowdown", ro->path,
                       strict->ran ? 100 * f_strict : 0.0, ro->ran ? 100 * f_ro : 0.0);
        }
    }
    if (!gpu_rows)
        report_add(&ctx->rep, DIAG_SKIP, "probe.relaxed_ordering", subj, ctx->probe[1].why, NULL,
                   "no GPU memory row ran: %s", ctx->probe[1].why);
}

int diag_probe(struct diag_ctx *ctx)
{
    struct ibvwrap v;
    struct rc_dev dev;
    char err[512];
    struct probe_env env = { .ctx = ctx, .dev = &dev };
    str_fmt(ctx->probe_device, sizeof(ctx->probe_device), "%s",
             ctx->opts.dev ? ctx->opts.dev : "probe");
    if (ibvwrap_open(&v, ctx->opts.ibverbs_lib, err, sizeof(err))) {
        report_add(&ctx->rep, DIAG_FAIL, "probe.setup", ctx->probe_device, err,
                   "install libibverbs or pass --ibverbs-lib", "cannot run the probe");
        return -1;
    }
    if (rc_dev_open(&dev, &v, ctx->opts.dev, ctx->opts.probe_gid_index, err, sizeof(err))) {
        report_add(&ctx->rep, DIAG_FAIL, "probe.setup", ctx->probe_device, err,
                   "check the device name (-d) with ibv_devices", "cannot run the probe");
        ibvwrap_close(&v);
        return -1;
    }
    str_fmt(ctx->probe_device, sizeof(ctx->probe_device), "%s", dev.name);
    int port = ctx->opts.probe_port;
    int ok = !rc_qp_create(&dev, port, 128, &env.qp[0], err, sizeof(err)) &&
             !rc_qp_create(&dev, port, 128, &env.qp[1], err, sizeof(err));
    if (ok) {
        struct rc_qp_info a, b;
        rc_qp_info(&dev, &env.qp[0], &a);
        rc_qp_info(&dev, &env.qp[1], &b);
        ok = !rc_qp_connect(&dev, &env.qp[0], &b, err, sizeof(err)) &&
             !rc_qp_connect(&dev, &env.qp[1], &a, err, sizeof(err));
    }
    if (ok)
        ok = !mem_alloc_reg(&env.src, &dev, NULL, 0, MEM_HOST, MEM_REG_PLAIN, 0,
                            ctx->opts.probe_size, err, sizeof(err));
    if (!ok) {
        report_add(&ctx->rep, DIAG_FAIL, "probe.setup", dev.name, err,
                   "check the port (-i) and GID index (-x)", "cannot set up the loopback QPs");
    } else {
        char cerr[256];
        env.cuda = cuda_dl_open(cerr, sizeof(cerr));
        if (!env.cuda && !ctx->facts.cuda_why[0])
            str_fmt(ctx->facts.cuda_why, sizeof(ctx->facts.cuda_why), "%s", cerr);
        mem_fill(&env.src, 0xa5);
        ctx->nprobe = 5;
        fprintf(stderr, "railnet-diag: probing %s port %d ...\n", dev.name, port);
        run_row(&env, &ctx->probe[0], MEM_HOST, MEM_REG_PLAIN, 0);
        run_row(&env, &ctx->probe[1], MEM_CUDA, MEM_REG_DMABUF, 1);
        run_row(&env, &ctx->probe[2], MEM_CUDA, MEM_REG_DMABUF, 0);
        run_row(&env, &ctx->probe[3], MEM_CUDA, MEM_REG_PEERMEM, 1);
        run_row(&env, &ctx->probe[4], MEM_CUDA, MEM_REG_PEERMEM, 0);
        verdict(ctx);
        cuda_dl_close(env.cuda);
        mem_free(&env.src, &dev);
    }
    rc_qp_destroy(&dev, &env.qp[0]);
    rc_qp_destroy(&dev, &env.qp[1]);
    rc_dev_close(&dev);
    /* libibverbs stays mapped until exit (see tools/writebw/verbs.c). */
    return ok ? 0 : -1;
}
