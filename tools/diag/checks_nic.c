/* tools/diag/checks_nic.c: per RDMA device: PF or VF, IOMMU mode, the PCIe
 * checks of its function, its ports (state, speed, MTU, RoCE v2 GID), its
 * PCIe link against its ports, and its distance to the nearest GPU. */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/strfmt.h"
#include "diag.h"
#include "parse.h"
#include "pcicfg.h"

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted entry names of a directory (at most max); returns the count. */
static int list_dir(const char *dir, char **names, int max)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < max)
        if (de->d_name[0] != '.' && (names[n] = strdup(de->d_name)))
            n++;
    closedir(d);
    qsort(names, (size_t)n, sizeof(names[0]), cmp_str);
    return n;
}

static void free_names(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
}

static void check_function(struct diag_ctx *ctx, const char *name, const struct pci_fn *fn,
                           int *is_vf)
{
    char p[PATH_MAX], pf[PATH_MAX], ev[1024];
    *is_vf = 0;
    if (realpath(path_join(p, sizeof(p), fn->dir, "physfn"), pf)) {
        *is_vf = 1;
        const char *pf_bdf = strrchr(pf, '/') ? strrchr(pf, '/') + 1 : pf;
        str_fmt(ev, sizeof(ev), "%s/physfn -> %s; PCI ID %04x:%04x", fn->bdf, pf_bdf,
                 fn->vendor, fn->device);
        report_add(&ctx->rep, DIAG_WARN, "nic.function", name, ev,
                   "writes into GPU memory through a VF need relaxed ordering: see "
                   "pci.relaxed_ordering and run railnet-diag --probe",
                   "SR-IOV virtual function %s of PF %s", fn->bdf, pf_bdf);
    } else if (diag_is_known_vf_id(fn->vendor, fn->device)) {
        *is_vf = 1;
        str_fmt(ev, sizeof(ev), "PCI ID %04x:%04x is a ConnectX virtual function ID; no physfn "
                 "link (seen from a guest)", fn->vendor, fn->device);
        report_add(&ctx->rep, DIAG_WARN, "nic.function", name, ev,
                   "writes into GPU memory through a VF need relaxed ordering: see "
                   "pci.relaxed_ordering and run railnet-diag --probe",
                   "SR-IOV virtual function %s passed through to this VM", fn->bdf);
    } else {
        char numvfs[32] = "";
        path_read(path_join(p, sizeof(p), fn->dir, "sriov_numvfs"), numvfs, sizeof(numvfs));
        str_fmt(ev, sizeof(ev), "no %s/physfn link; PCI ID %04x:%04x; sriov_numvfs: %s", fn->bdf,
                 fn->vendor, fn->device, numvfs[0] ? numvfs : "absent");
        report_add(&ctx->rep, DIAG_OK, "nic.function", name, ev, NULL,
                   "physical function %s%s%s%s", fn->bdf, numvfs[0] ? " (" : "",
                   numvfs[0] ? numvfs : "", numvfs[0] ? " VFs enabled)" : "");
    }
    if (*is_vf)
        ctx->facts.nic_vf = 1;
}

static void check_iommu_group(struct diag_ctx *ctx, const char *name, const struct pci_fn *fn)
{
    char p[PATH_MAX], grp[PATH_MAX], type[64] = "", ev[1024];
    if (!realpath(path_join(p, sizeof(p), fn->dir, "iommu_group"), grp)) {
        report_add(&ctx->rep, DIAG_OK, "nic.iommu", name, NULL, NULL,
                   "%s is in no IOMMU group: DMA is not translated", fn->bdf);
        return;
    }
    const char *g = strrchr(grp, '/') ? strrchr(grp, '/') + 1 : grp;
    path_read(path_join(p, sizeof(p), grp, "type"), type, sizeof(type));
    str_fmt(ev, sizeof(ev), "%s/iommu_group -> group %s, type: %s", fn->bdf, g,
             type[0] ? type : "unknown (no type file)");
    if (!strcmp(type, "identity"))
        report_add(&ctx->rep, DIAG_OK, "nic.iommu", name, ev, NULL,
                   "IOMMU group %s in passthrough (identity) mode", g);
    else if (!strncmp(type, "DMA", 3))
        report_add(&ctx->rep, DIAG_WARN, "nic.iommu", name, ev,
                   ctx->facts.vm ? "a guest IOMMU (vIOMMU) translating NIC DMA costs bandwidth: "
                                   "boot the guest with iommu=pt, or drop the vIOMMU"
                                 : "boot with iommu=pt (intel_iommu=on iommu=pt, or amd_iommu=on "
                                   "iommu=pt) so NIC DMA skips translation",
                   "IOMMU group %s translates DMA (%s): IOTLB misses cost bandwidth", g, type);
    else
        report_add(&ctx->rep, DIAG_OK, "nic.iommu", name, ev, NULL,
                   "IOMMU group %s (mode %s)", g, type[0] ? type : "unknown");
}

/* "4: ACTIVE" -> 4 */
static int leading_int(const char *s)
{
    return atoi(s);
}

static int gid_is_zero(const char *gid)
{
    for (const char *c = gid; *c; c++)
        if (*c != '0' && *c != ':')
            return 0;
    return 1;
}

static void check_port(struct diag_ctx *ctx, const char *dev_dir, const char *dev,
                       const char *port)
{
    char pdir[PATH_MAX], p[PATH_MAX], subject[48];
    str_fmt(subject, sizeof(subject), "%s:%s", dev, port);
    str_fmt(pdir, sizeof(pdir), "%s/ports/%s", dev_dir, port);
    char state[64] = "", phys[64] = "", rate[64] = "", ll[64] = "";
    path_read(path_join(p, sizeof(p), pdir, "state"), state, sizeof(state));
    path_read(path_join(p, sizeof(p), pdir, "phys_state"), phys, sizeof(phys));
    path_read(path_join(p, sizeof(p), pdir, "rate"), rate, sizeof(rate));
    path_read(path_join(p, sizeof(p), pdir, "link_layer"), ll, sizeof(ll));
    char ev[1024];
    str_fmt(ev, sizeof(ev), "ports/%s: state \"%s\", phys_state \"%s\", rate \"%s\", "
             "link_layer \"%s\"", port, state, phys, rate, ll);
    if (leading_int(state) == 4)
        report_add(&ctx->rep, DIAG_OK, "port.link", subject, ev, NULL, "%s link, ACTIVE, %s",
                   ll[0] ? ll : "unknown", rate[0] ? rate : "rate unknown");
    else
        report_add(&ctx->rep, DIAG_WARN, "port.link", subject, ev,
                   "check the cable, the switch port and the subnet manager (InfiniBand)",
                   "port not ACTIVE (%s, %s)", state[0] ? state : "state unknown",
                   phys[0] ? phys : "phys_state unknown");

    int ethernet = !strcmp(ll, "Ethernet");
    /* RoCE MTU follows the netdev MTU: 4096-byte RoCE frames need about
     * 4200 bytes of Ethernet MTU (RoCE v2 headers). */
    if (ethernet) {
        char netdir[PATH_MAX], *names[8];
        int n = list_dir(path_join(netdir, sizeof(netdir), dev_dir, "device/net"), names, 8);
        if (n == 0) {
            report_add(&ctx->rep, DIAG_SKIP, "port.mtu", subject, NULL, NULL,
                       "no netdev under %s/device/net to read the MTU from", dev);
        } else {
            char mtu[32] = "";
            str_fmt(p, sizeof(p), "%s/%s/mtu", netdir, names[0]);
            path_read(p, mtu, sizeof(mtu));
            int m = atoi(mtu);
            int roce = m >= 4200 ? 4096 : m >= 2200 ? 2048 : m >= 1200 ? 1024 : 512;
            str_fmt(ev, sizeof(ev), "%s/mtu = %s", names[0], mtu);
            if (m >= 4200)
                report_add(&ctx->rep, DIAG_OK, "port.mtu", subject, ev, NULL,
                           "netdev %s MTU %d: RoCE MTU %d", names[0], m, roce);
            else
                report_add(&ctx->rep, DIAG_WARN, "port.mtu", subject, ev,
                           "raise the netdev MTU to 9000 (and on the switch) for 4096-byte RoCE "
                           "frames",
                           "netdev %s MTU %d: RoCE MTU only %d", names[0], m, roce);
        }
        free_names(names, n);

        char gdir[PATH_MAX], *types[256];
        int nt = list_dir(path_join(gdir, sizeof(gdir), pdir, "gid_attrs/types"), types, 256);
        int found = -1, found_v4 = -1;
        for (int i = 0; i < nt; i++) {
            char type[32] = "", gid[64] = "";
            str_fmt(p, sizeof(p), "%s/%s", gdir, types[i]);
            if (path_read(p, type, sizeof(type)) || strcmp(type, "RoCE v2"))
                continue;
            str_fmt(p, sizeof(p), "%s/gids/%s", pdir, types[i]);
            if (path_read(p, gid, sizeof(gid)) || gid_is_zero(gid))
                continue;
            int idx = atoi(types[i]);
            if (found < 0 || idx < found)
                found = idx;
            if (!strncmp(gid, "0000:0000:0000:0000:0000:ffff:", 30) && (found_v4 < 0 || idx < found_v4))
                found_v4 = idx;
        }
        free_names(types, nt);
        if (found < 0)
            report_add(&ctx->rep, DIAG_FAIL, "port.roce_v2_gid", subject,
                       "no gid_attrs/types/<i> reads \"RoCE v2\" with a non-zero gids/<i>",
                       "assign an IP address to the port's netdev (RoCE v2 GIDs follow its "
                       "addresses) and check rdma-core's RoCE mode (cma_roce_mode)",
                       "no RoCE v2 GID on this port");
        else
            report_add(&ctx->rep, DIAG_OK, "port.roce_v2_gid", subject, NULL, NULL,
                       "RoCE v2 GID at index %d%s", found_v4 >= 0 ? found_v4 : found,
                       found_v4 >= 0 ? " (IPv4-mapped; use it as -x / NCCL_IB_GID_INDEX)" : "");
    }
}

/* Mb/s of sysfs's ports/<n>/rate text: "400 Gb/sec (4X NDR)", "2.5 Gb/sec
 * (1X SDR)"; 0 when it names none. */
static uint64_t rate_mbps(const char *rate)
{
    unsigned long long tenths;
    const char *end;
    if (parse_tenths_prefix(rate, 100000000, &tenths, &end))
        return 0;
    return strstr(end, "Gb/sec") ? tenths * 100 : 0;
}

/* The ports' advertised rates together (ports/<n>/rate), Mb/s. */
static uint64_t ports_mbps(const char *dev_dir, char **ports, int np)
{
    uint64_t sum = 0;
    for (int j = 0; j < np; j++) {
        char p[PATH_MAX], rate[64] = "";
        str_fmt(p, sizeof(p), "%s/ports/%s/rate", dev_dir, ports[j]);
        if (!path_read(p, rate, sizeof(rate)))
            sum += rate_mbps(rate);
    }
    return sum;
}

void diag_check_nics(struct diag_ctx *ctx)
{
    char cls[PATH_MAX], *names[DIAG_MAX_NICS];
    int n = list_dir(path_join(cls, sizeof(cls), ctx->roots.sys, "class/infiniband"), names,
                     DIAG_MAX_NICS);
    int checked = 0;
    for (int i = 0; i < n; i++) {
        if (ctx->opts.dev && strcmp(ctx->opts.dev, names[i]))
            continue;
        checked++;
        char dev_dir[PATH_MAX], p[PATH_MAX];
        str_fmt(dev_dir, sizeof(dev_dir), "%s/%s", cls, names[i]);
        struct pci_fn fn;
        int have_pci = !pci_fn_load(path_join(p, sizeof(p), dev_dir, "device"), &fn);
        int is_vf = 0;
        char *ports[8];
        int np = list_dir(path_join(p, sizeof(p), dev_dir, "ports"), ports, 8);
        if (have_pci) {
            check_function(ctx, names[i], &fn, &is_vf);
            check_iommu_group(ctx, names[i], &fn);
            diag_check_pcie_function(ctx, &fn, names[i], 1, is_vf, ports_mbps(dev_dir, ports, np));
        } else {
            report_add(&ctx->rep, DIAG_SKIP, "nic.function", names[i], NULL, NULL,
                       "no PCI function behind %s/device (software device?)", names[i]);
        }
        for (int j = 0; j < np; j++)
            check_port(ctx, dev_dir, names[i], ports[j]);
        free_names(ports, np);
        if (have_pci)
            diag_check_topology(ctx, &fn, names[i]);
    }
    if (checked == 0) {
        if (ctx->opts.dev)
            report_add(&ctx->rep, DIAG_FAIL, "nic.present", ctx->opts.dev, NULL,
                       "check the name with ibv_devices", "no RDMA device %s under %s",
                       ctx->opts.dev, cls);
        else
            report_add(&ctx->rep, DIAG_FAIL, "nic.present", "host", NULL,
                       "load the NIC's RDMA driver (mlx5_ib), or point --sysfs-root at "
                       "softnic's sysfs view (SOFTNIC_SYSFS)",
                       "no RDMA device under %s", cls);
    }
    free_names(names, n);
}
