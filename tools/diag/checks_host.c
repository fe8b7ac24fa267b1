/* tools/diag/checks_host.c: checks about the host as a whole: hypervisor,
 * IOMMU, kernel, peer memory, rdma-core, the CUDA driver, and the verdict on
 * the GPU memory registration paths. */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "../common/strfmt.h"
#include "../common/cuda_dl.h"
#include "ibvwrap.h"
#include "diag.h"

/* True when /proc/cpuinfo's first "flags" line lists "hypervisor" (the CPUID
 * bit every x86 hypervisor sets for its guests). */
static int cpuinfo_has_hypervisor(const struct diag_roots *roots, int *readable)
{
    char p[PATH_MAX];
    FILE *f = fopen(path_join(p, sizeof(p), roots->proc, "cpuinfo"), "re");
    *readable = f != NULL;
    if (!f)
        return 0;
    char *line = NULL;
    size_t cap = 0;
    int found = 0;
    while (getline(&line, &cap, f) > 0) {
        if (strncmp(line, "flags", 5))
            continue;
        for (char *tok = strtok(strchr(line, ':') ? strchr(line, ':') + 1 : line, " \t\n"); tok;
             tok = strtok(NULL, " \t\n"))
            if (!strcmp(tok, "hypervisor"))
                found = 1;
        break;
    }
    free(line);
    fclose(f);
    return found;
}

static const char *dmi_virtual_vendor(const char *vendor, const char *product)
{
    static const char *names[] = { "QEMU", "KVM", "VMware", "Xen", "Amazon EC2", "Google",
                                   "OpenStack", "innotek", "Parallels", "Bochs", "Firecracker" };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strstr(vendor, names[i]) || strstr(product, names[i]))
            return names[i];
    if (strstr(vendor, "Microsoft") && strstr(product, "Virtual"))
        return "Hyper-V";
    return NULL;
}

static void check_hypervisor(struct diag_ctx *ctx)
{
    int readable = 0;
    int flag = cpuinfo_has_hypervisor(&ctx->roots, &readable);
    char xen[64] = "", vendor[128] = "", product[128] = "";
    sys_read(&ctx->roots, "hypervisor/type", xen, sizeof(xen));
    sys_read(&ctx->roots, "class/dmi/id/sys_vendor", vendor, sizeof(vendor));
    sys_read(&ctx->roots, "class/dmi/id/product_name", product, sizeof(product));
    const char *dmi = dmi_virtual_vendor(vendor, product);
    char ev[1024];
    str_fmt(ev, sizeof(ev), "cpuinfo flags: %s; /sys/hypervisor/type: %s; DMI: %s / %s",
             !readable ? "unreadable" : flag ? "hypervisor" : "no hypervisor flag",
             xen[0] ? xen : "absent", vendor[0] ? vendor : "?", product[0] ? product : "?");
    ctx->facts.vm = flag || xen[0] || dmi;
    if (ctx->facts.vm)
        report_add(&ctx->rep, DIAG_OK, "host.hypervisor", "host", ev, NULL,
                   "virtual machine (%s): NICs are usually SR-IOV VFs and config space is emulated",
                   dmi ? dmi : xen[0] ? xen : "hypervisor CPU flag");
    else
        report_add(&ctx->rep, DIAG_OK, "host.hypervisor", "host", ev, NULL, "bare metal");
}

static int count_entries(const char *dir, char *first, size_t len)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    if (len)
        first[0] = '\0';
    while ((de = readdir(d)))
        if (de->d_name[0] != '.') {
            if (n++ == 0 && len)
                str_fmt(first, len, "%s", de->d_name);
        }
    closedir(d);
    return n;
}

static void check_iommu(struct diag_ctx *ctx)
{
    char p[PATH_MAX], first[64], cmdline[4096] = "";
    int units = count_entries(path_join(p, sizeof(p), ctx->roots.sys, "class/iommu"), first,
                              sizeof(first));
    int groups = count_entries(path_join(p, sizeof(p), ctx->roots.sys, "kernel/iommu_groups"),
                               NULL, 0);
    proc_read(&ctx->roots, "cmdline", cmdline, sizeof(cmdline));
    char opts[512] = "";
    size_t off = 0;
    char tmp[4096];
    str_fmt(tmp, sizeof(tmp), "%s", cmdline);
    for (char *tok = strtok(tmp, " "); tok; tok = strtok(NULL, " "))
        if (strstr(tok, "iommu") && off < sizeof(opts)) {
            int n = str_fmt(opts + off, sizeof(opts) - off, "%s%s", off ? " " : "", tok);
            if (n > 0)
                off += (size_t)n;
        }
    char ev[1024];
    str_fmt(ev, sizeof(ev), "/sys/class/iommu: %d unit(s)%s%s; /sys/kernel/iommu_groups: %d; "
             "kernel command line iommu options: %s",
             units < 0 ? 0 : units, units > 0 ? " e.g. " : "", units > 0 ? first : "",
             groups < 0 ? 0 : groups, opts[0] ? opts : "none");
    if (units <= 0 && groups <= 0)
        report_add(&ctx->rep, DIAG_OK, "host.iommu", "host", ev, NULL,
                   "no IOMMU in use: DMA addresses are physical");
    else
        report_add(&ctx->rep, DIAG_OK, "host.iommu", "host", ev, NULL,
                   "IOMMU on (%d unit(s), %d group(s)%s%s); per-device mode below",
                   units < 0 ? 0 : units, groups < 0 ? 0 : groups, opts[0] ? ", " : "", opts);
}

static void check_kernel_and_peermem(struct diag_ctx *ctx)
{
    struct diag_facts *f = &ctx->facts;
    if (proc_read(&ctx->roots, "sys/kernel/osrelease", f->kernel, sizeof(f->kernel)) &&
        !strcmp(ctx->roots.proc, "/proc")) {
        struct utsname u;
        if (uname(&u) == 0)
            str_fmt(f->kernel, sizeof(f->kernel), "%s", u.release);
    }
    if (sscanf(f->kernel, "%d.%d", &f->kernel_major, &f->kernel_minor) != 2)
        f->kernel_major = f->kernel_minor = 0;

    char p[PATH_MAX], ver[64] = "";
    int module = path_exists(path_join(p, sizeof(p), ctx->roots.sys, "module/nvidia_peermem"));
    int peers = !sys_read(&ctx->roots, "kernel/mm/memory_peers/nv_mem/version", ver, sizeof(ver));
    f->peermem = module || peers;
    (void)ver;
}

static void check_rdma_core(struct diag_ctx *ctx)
{
    struct diag_facts *f = &ctx->facts;
    struct ibvwrap v;
    char err[512];
    if (ibvwrap_open(&v, ctx->opts.ibverbs_lib, err, sizeof(err))) {
        report_add(&ctx->rep, DIAG_FAIL, "rdma.core", "host", err,
                   "install rdma-core's libibverbs (Debian/Ubuntu: apt-get install libibverbs1 "
                   "ibverbs-providers), or pass --ibverbs-lib PATH",
                   "libibverbs not loadable");
        return;
    }
    f->verbs_loaded = 1;
    str_fmt(f->verbs_path, sizeof(f->verbs_path), "%s", v.path);
    f->rdma_core_version = v.rdma_core_version;
    f->has_reg_mr_iova2 = v.reg_mr_iova2 != NULL;
    f->has_reg_dmabuf_mr = v.reg_dmabuf_mr != NULL;
    ibvwrap_close(&v);

    char ver[64];
    if (f->rdma_core_version)
        str_fmt(ver, sizeof(ver), "rdma-core %d", f->rdma_core_version);
    else
        str_fmt(ver, sizeof(ver), "rdma-core %s (from its symbols)",
                 f->has_reg_dmabuf_mr ? ">= 34" : f->has_reg_mr_iova2 ? "28..33" : "< 28");
    char ev[1024];
    str_fmt(ev, sizeof(ev), "%s; ibv_reg_mr_iova2@IBVERBS_1.8: %s; "
             "ibv_reg_dmabuf_mr@IBVERBS_1.12: %s", f->verbs_path,
             f->has_reg_mr_iova2 ? "yes" : "no", f->has_reg_dmabuf_mr ? "yes" : "no");
    if (!f->has_reg_mr_iova2)
        report_add(&ctx->rep, DIAG_WARN, "rdma.core", "host", ev,
                   "upgrade rdma-core to 28 or newer (34 or newer for dmabuf)",
                   "%s: cannot register memory with IBV_ACCESS_RELAXED_ORDERING", ver);
    else if (!f->has_reg_dmabuf_mr)
        report_add(&ctx->rep, DIAG_WARN, "rdma.core", "host", ev,
                   "upgrade rdma-core to 34 or newer for dmabuf registration",
                   "%s: relaxed ordering yes, dmabuf no", ver);
    else
        report_add(&ctx->rep, DIAG_OK, "rdma.core", "host", ev, NULL,
                   "%s: relaxed ordering and dmabuf registration available", ver);
}

static void check_cuda(struct diag_ctx *ctx)
{
    struct diag_facts *f = &ctx->facts;
    f->cuda_dmabuf = -1;
    char err[256];
    struct cuda_dl *c = cuda_dl_open(err, sizeof(err));
    if (!c) {
        str_fmt(f->cuda_why, sizeof(f->cuda_why), "%s", err);
        report_add(&ctx->rep, DIAG_SKIP, "gpu.cuda_driver", "host", err, NULL,
                   "CUDA driver not usable here: GPU attributes not queried");
        return;
    }
    f->cuda_loaded = 1;
    f->cuda_devices = cuda_dl_device_count(c);
    int dev = ctx->opts.cuda_dev >= 0 ? ctx->opts.cuda_dev : 0;
    if (f->cuda_devices > dev)
        f->cuda_dmabuf = cuda_dl_dmabuf_supported(c, dev);
    int dv = cuda_dl_driver_version(c);
    char ev[256];
    str_fmt(ev, sizeof(ev), "libcuda.so.1: driver API %d.%d, %d device(s), "
             "CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED(GPU %d) = %d",
             dv / 1000, dv % 1000 / 10, f->cuda_devices, dev, f->cuda_dmabuf);
    cuda_dl_close(c);
    if (f->cuda_devices == 0)
        report_add(&ctx->rep, DIAG_WARN, "gpu.cuda_driver", "host", ev,
                   "check nvidia-smi and the driver installation", "CUDA driver sees no GPU");
    else
        report_add(&ctx->rep, DIAG_OK, "gpu.cuda_driver", "host", ev, NULL,
                   "CUDA driver %d.%d, %d GPU(s)", dv / 1000, dv % 1000 / 10, f->cuda_devices);
}

void diag_check_host(struct diag_ctx *ctx)
{
    check_hypervisor(ctx);
    check_iommu(ctx);
    check_kernel_and_peermem(ctx);
    check_rdma_core(ctx);
    check_cuda(ctx);
}

void diag_check_gpu_paths(struct diag_ctx *ctx)
{
    struct diag_facts *f = &ctx->facts;
    if (ctx->ngpus == 0 && f->cuda_devices == 0) {
        report_add(&ctx->rep, DIAG_SKIP, "gpu.memory_path", "host", NULL, NULL,
                   "no NVIDIA GPU under %s/bus/pci and none from the CUDA driver",
                   ctx->roots.sys);
        return;
    }
    char ev[1024];
    str_fmt(ev, sizeof(ev), "/sys/module/nvidia_peermem or "
             "/sys/kernel/mm/memory_peers/nv_mem/version: %s", f->peermem ? "present" : "absent");
    if (f->peermem)
        report_add(&ctx->rep, DIAG_OK, "gpu.peermem", "host", ev, NULL,
                   "nvidia_peermem loaded: ibv_reg_mr on CUDA memory works");
    else
        report_add(&ctx->rep, DIAG_WARN, "gpu.peermem", "host", ev,
                   "modprobe nvidia_peermem (or rely on dmabuf, below)",
                   "nvidia_peermem not loaded: plain ibv_reg_mr on CUDA memory will fail");

    int kernel_ok = f->kernel_major > 5 || (f->kernel_major == 5 && f->kernel_minor >= 12);
    int verbs_ok = f->has_reg_dmabuf_mr;
    int gpu_ok = f->cuda_dmabuf != 0;
    str_fmt(ev, sizeof(ev), "kernel %s (needs >= 5.12); rdma-core ibv_reg_dmabuf_mr: %s; "
             "GPU dmabuf attribute: %s", f->kernel[0] ? f->kernel : "unknown",
             !f->verbs_loaded ? "libibverbs not loaded" : verbs_ok ? "yes" : "no",
             f->cuda_dmabuf == 1 ? "1" : f->cuda_dmabuf == 0 ? "0" : f->cuda_why[0] ? f->cuda_why : "unknown");
    int dmabuf = kernel_ok && verbs_ok && gpu_ok;
    if (dmabuf)
        report_add(&ctx->rep, DIAG_OK, "gpu.dmabuf", "host", ev, NULL,
                   "dmabuf registration possible%s",
                   f->cuda_dmabuf == 1 ? "" : " (GPU attribute not verified)");
    else {
        char why[256] = "";
        size_t off = 0;
        if (!kernel_ok)
            off += (size_t)str_fmt(why + off, sizeof(why) - off, "kernel %s < 5.12",
                                    f->kernel[0] ? f->kernel : "unknown");
        if (!verbs_ok && off < sizeof(why))
            off += (size_t)str_fmt(why + off, sizeof(why) - off, "%s%s", off ? ", " : "",
                                    f->verbs_loaded ? "rdma-core < 34" : "libibverbs not loadable");
        if (!gpu_ok && off < sizeof(why))
            str_fmt(why + off, sizeof(why) - off, "%sGPU/driver says no", off ? ", " : "");
        report_add(&ctx->rep, DIAG_WARN, "gpu.dmabuf", "host", ev,
                   "dmabuf needs kernel >= 5.12, rdma-core >= 34, CUDA >= 11.7 and an open or "
                   "recent GPU driver",
                   "dmabuf registration not possible: %s", why);
    }

    if (!dmabuf && !f->peermem)
        report_add(&ctx->rep, DIAG_FAIL, "gpu.memory_path", "host", NULL,
                   "load nvidia_peermem, or upgrade kernel/rdma-core/driver for dmabuf",
                   "no way to register GPU memory with the NIC: GPUDirect RDMA is off");
    else
        report_add(&ctx->rep, DIAG_OK, "gpu.memory_path", "host", NULL, NULL,
                   "GPU memory registers through %s", dmabuf && f->peermem ? "dmabuf (peer memory also available)"
                   : dmabuf ? "dmabuf" : "peer memory (nvidia_peermem)");

    /* The case this tool exists for: a VF or an RO-disabled NIC is fast
     * only when registrations ask for relaxed ordering, which needs
     * ibv_reg_mr_iova2. */
    if ((f->nic_vf || f->nic_ro_off) && f->verbs_loaded && !f->has_reg_mr_iova2)
        report_add(&ctx->rep, DIAG_FAIL, "gpu.relaxed_ordering", "host", f->verbs_path,
                   "upgrade rdma-core to 28 or newer",
                   "the NIC needs IBV_ACCESS_RELAXED_ORDERING registrations but this rdma-core "
                   "cannot pass the flag");
}
