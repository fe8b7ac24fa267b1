/* tools/diag/checks_pci.c: PCIe checks of one function (Device Control,
 * ATS) and of the path between a NIC and its nearest GPU (distance, NUMA,
 * ACS on the bridges in between). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/strfmt.h"
#include "diag.h"
#include "pcicfg.h"
#include "railnet_pcie.h"

int diag_is_known_vf_id(unsigned vendor, unsigned device)
{
    /* Mellanox/NVIDIA ConnectX virtual function device IDs (pci.ids). A
     * guest sees no physfn link, so the ID is what tells it is a VF. */
    static const unsigned mlx_vf[] = { 0x1002, 0x1004, 0x1012, 0x1014, 0x1016, 0x1018,
                                       0x101a, 0x101c, 0x101e };
    if (vendor != 0x15b3)
        return 0;
    for (size_t i = 0; i < sizeof(mlx_vf) / sizeof(mlx_vf[0]); i++)
        if (device == mlx_vf[i])
            return 1;
    return 0;
}

static int load_cfg(const char *dir, struct pcicfg *cfg)
{
    char p[PATH_MAX];
    return pcicfg_load(path_join(p, sizeof(p), dir, "config"), cfg);
}

/* A VF's PF as the host sees it (physfn link): its BDF and PCI Express
 * Device Control. 0 when read; -1 when there is no physfn (a guest) or its
 * config space cannot be read. */
static int load_pf_pcie(const struct pci_fn *vf, char *pf_bdf, size_t len, struct pcie_info *pi)
{
    static struct pcicfg pfcfg; /* 4 KiB, single-threaded tool */
    char p[PATH_MAX], pf[PATH_MAX];
    if (!realpath(path_join(p, sizeof(p), vf->dir, "physfn"), pf))
        return -1;
    str_fmt(pf_bdf, len, "%s", strrchr(pf, '/') ? strrchr(pf, '/') + 1 : pf);
    if (load_cfg(pf, &pfcfg) || pfcfg.len < 256)
        return -1;
    pcicfg_pcie(&pfcfg, pi);
    return pi->offset < 0 ? -1 : 0;
}

static void link_text(char *buf, size_t len, int speed, int width)
{
    unsigned g = pcicfg_link_gts_x10(speed);
    str_fmt(buf, len, "%u.%u GT/s x%d (%llu Gb/s)", g / 10, g % 10, width,
            (unsigned long long)(railnet_pcie_mbps(g, (unsigned)width) / 1000));
}

/* pci.link of a NIC from its PCI Express capability `li`: its own, or its
 * PF's (pf_bdf set) for a VF, whose link registers describe no link of
 * its own; li NULL: a VF whose PF this host does not show. */
static void check_link(struct diag_ctx *ctx, const struct pci_fn *fn, const char *subject,
                       const struct pcie_info *li, const char *pf_bdf, uint64_t ports_mbps)
{
    char ev[512], cur[64], max[64], fix[512], who[160];
    if (!li) {
        report_add(&ctx->rep, DIAG_SKIP, "pci.link", subject, NULL, NULL,
                   "VF %s: its PCIe link is its PF's, which this host does not show", fn->bdf);
        return;
    }
    if (pf_bdf)
        str_fmt(who, sizeof(who), "PF %s of VF %s", pf_bdf, fn->bdf);
    else
        str_fmt(who, sizeof(who), "%s", fn->bdf);
    uint64_t cur_mbps = railnet_pcie_mbps(pcicfg_link_gts_x10(li->link_speed), (unsigned)li->link_width);
    uint64_t max_mbps = railnet_pcie_mbps(pcicfg_link_gts_x10(li->link_speed_max), (unsigned)li->link_width_max);
    if (!cur_mbps || !max_mbps) {
        report_add(&ctx->rep, DIAG_SKIP, "pci.link", subject, NULL, NULL,
                   "%s: Link Status speed %d width %d, Link Capabilities speed %d width %d: not a link "
                   "to judge", who, li->link_speed, li->link_width, li->link_speed_max, li->link_width_max);
        return;
    }
    link_text(cur, sizeof(cur), li->link_speed, li->link_width);
    link_text(max, sizeof(max), li->link_speed_max, li->link_width_max);
    str_fmt(ev, sizeof(ev), "%s config space: Link Status %s, Link Capabilities %s; ports %llu Gb/s", who, cur,
            max, (unsigned long long)(ports_mbps / 1000));
    if (li->link_speed < li->link_speed_max || li->link_width < li->link_width_max) {
        str_fmt(fix, sizeof(fix), "put the NIC in a slot of its width and generation, check the BIOS "
                "slot settings (link speed, bifurcation) and reseat it; a NIC trains to its full link "
                "when nothing limits it (lspci -vv -s %s: LnkSta)", who);
        report_add(&ctx->rep, DIAG_WARN, "pci.link", subject, ev, fix,
                   "NIC %s: PCIe link trained at %s of %s", who, cur, max);
    } else if (ports_mbps && cur_mbps < ports_mbps) {
        report_add(&ctx->rep, DIAG_WARN, "pci.link", subject, ev,
                   "a slot of the NIC's own generation gives its ports their rate; until then expect "
                   "at most the link's (railnet advertises the link's rate to NCCL)",
                   "NIC %s: PCIe link %s carries less than its ports' %llu Gb/s", who, cur,
                   (unsigned long long)(ports_mbps / 1000));
    } else {
        report_add(&ctx->rep, DIAG_OK, "pci.link", subject, ev, NULL, "NIC %s: PCIe link %s, as capable",
                   who, cur);
    }
}

void diag_check_pcie_function(struct diag_ctx *ctx, const struct pci_fn *fn, const char *subject,
                              int is_nic, int is_vf, uint64_t ports_mbps)
{
    static struct pcicfg cfg; /* 4 KiB: keep it off the stack; the tool is single-threaded */
    char ev[1024], fix[1024];
    int err = load_cfg(fn->dir, &cfg);
    if (err) {
        report_add(&ctx->rep, DIAG_WARN, "pci.config", subject, fn->dir,
                   "run as root; check that the device is present",
                   "cannot read %s/config: %s", fn->bdf, strerror(err));
        return;
    }
    if (cfg.len < 256) {
        report_add(&ctx->rep, DIAG_WARN, "pci.config", subject, fn->dir,
                   "run railnet-diag as root (sysfs gives unprivileged readers only the header)",
                   "only %zu bytes of %s config space readable: capabilities not visible",
                   cfg.len, fn->bdf);
        return;
    }
    struct pcie_info pi;
    pcicfg_pcie(&cfg, &pi);
    if (pi.offset < 0) {
        report_add(&ctx->rep, DIAG_SKIP, "pci.relaxed_ordering", subject, NULL, NULL,
                   "%s has no PCI Express capability", fn->bdf);
        return;
    }
    const char *who = is_nic ? "NIC" : "GPU";
    str_fmt(ev, sizeof(ev), "%s config space: PCI Express capability at 0x%02x, Device Control "
             "0x%04x (Enable Relaxed Ordering bit 4 = %d, Max_Payload_Size %d B, "
             "Max_Read_Request_Size %d B), Device Capabilities Max_Payload_Size supported %d B",
             fn->bdf, pi.offset, pi.devctl, pi.relaxed_ordering, pi.mps, pi.mrrs, pi.mps_supported);

    /* In a VF, Enable Relaxed Ordering and Max_Payload_Size are reserved
     * (RsvdP in the SR-IOV spec): the PF's settings apply. Where the PF is
     * visible (a host using its VFs), judge by the PF. */
    char pf_bdf[64] = "";
    struct pcie_info pf;
    int have_pf = is_nic && is_vf && !load_pf_pcie(fn, pf_bdf, sizeof(pf_bdf), &pf);
    char pf_ev[512] = "";
    if (have_pf)
        str_fmt(pf_ev, sizeof(pf_ev), "%s; PF %s Device Control 0x%04x (Enable Relaxed Ordering "
                 "%d, Max_Payload_Size %d B of %d B supported)", ev, pf_bdf, pf.devctl,
                 pf.relaxed_ordering, pf.mps, pf.mps_supported);

    if (pi.relaxed_ordering) {
        report_add(&ctx->rep, DIAG_OK, "pci.relaxed_ordering", subject, ev, NULL,
                   "%s %s: Enable Relaxed Ordering on", who, fn->bdf);
    } else if (have_pf && pf.relaxed_ordering) {
        report_add(&ctx->rep, DIAG_WARN, "pci.relaxed_ordering", subject, pf_ev,
                   "register GPU memory with IBV_ACCESS_RELAXED_ORDERING (railnet: "
                   "RAILNET_RELAXED_ORDERING=1; NCCL's IB transport: NCCL_IB_PCI_RELAXED_ORDERING=1), "
                   "since tools that read the VF's bit conclude it is off; confirm with "
                   "railnet-diag --probe",
                   "VF %s: Enable Relaxed Ordering reads 0 (reserved in a VF); its PF %s has it on",
                   fn->bdf, pf_bdf);
    } else if (is_nic) {
        ctx->facts.nic_ro_off = 1;
        int vm_case = is_vf || ctx->facts.vm;
        str_fmt(fix, sizeof(fix),
                 "register GPU memory with IBV_ACCESS_RELAXED_ORDERING (railnet: "
                 "RAILNET_RELAXED_ORDERING=1; NCCL's IB transport: NCCL_IB_PCI_RELAXED_ORDERING=1) "
                 "and confirm with railnet-diag --probe; %s",
                 vm_case ? "a VF's bit reads 0 by definition and a guest cannot set it: enable "
                           "relaxed ordering on the PF in the hypervisor host "
                           "(setpci -s <PF> CAP_EXP+8.w=0010:0010, or the BIOS setting)"
                         : "on bare metal enable it: setpci -s BDF CAP_EXP+8.w=0010:0010 (and "
                           "check the BIOS PCIe relaxed ordering setting)");
        if (!vm_case) {
            char *pos = strstr(fix, "BDF");
            if (pos) {
                char tail[1024];
                str_fmt(tail, sizeof(tail), "%s", pos + 3);
                str_fmt(pos, sizeof(fix) - (size_t)(pos - fix), "%s%s", fn->bdf, tail);
            }
        }
        report_add(&ctx->rep, vm_case ? DIAG_FAIL : DIAG_WARN, "pci.relaxed_ordering", subject, ev,
                   fix, "NIC %s: Enable Relaxed Ordering off%s", fn->bdf,
                   vm_case ? " (SR-IOV VF / VM): RDMA writes into GPU memory are strictly "
                             "ordered unless registered with relaxed ordering"
                           : ": RDMA writes into GPU memory may be slow");
    } else {
        str_fmt(fix, sizeof(fix), "setpci -s %s CAP_EXP+8.w=0010:0010, or the BIOS setting",
                 fn->bdf);
        report_add(&ctx->rep, DIAG_WARN, "pci.relaxed_ordering", subject, ev, fix,
                   "GPU %s: Enable Relaxed Ordering off", fn->bdf);
    }

    if (is_nic && is_vf && have_pf) {
        int low = pf.mps == 128 && pf.mps_supported > 128;
        report_add(&ctx->rep, low ? DIAG_WARN : DIAG_OK, "pci.max_payload", subject, pf_ev,
                   low ? "set the PCIe Max Payload Size in the BIOS, or boot with "
                         "pci=pcie_bus_perf; every device on the path must agree" : NULL,
                   "VF %s: Max_Payload_Size is the PF's: %s %d B (supports %d B)", fn->bdf,
                   pf_bdf, pf.mps, pf.mps_supported);
    } else if (is_nic && is_vf) {
        report_add(&ctx->rep, DIAG_SKIP, "pci.max_payload", subject, ev, NULL,
                   "VF %s: Max_Payload_Size is reserved in a VF (reads %d B here); the PF's "
                   "setting on the host applies and is not visible from this guest", fn->bdf,
                   pi.mps);
    } else if (pi.mps == 128 && pi.mps_supported > 128) {
        str_fmt(fix, sizeof(fix), "set the PCIe Max Payload Size in the BIOS, or boot with "
                 "pci=pcie_bus_perf; every device on the path must agree");
        report_add(&ctx->rep, DIAG_WARN, "pci.max_payload", subject, ev, fix,
                   "%s %s: Max_Payload_Size %d B although it supports %d B", who, fn->bdf,
                   pi.mps, pi.mps_supported);
    } else {
        report_add(&ctx->rep, DIAG_OK, "pci.max_payload", subject, ev, NULL,
                   "%s %s: Max_Payload_Size %d B (supports %d B)", who, fn->bdf, pi.mps,
                   pi.mps_supported);
    }

    if (pi.mrrs < 512) {
        str_fmt(fix, sizeof(fix), "raise it: setpci -s %s CAP_EXP+8.w=5000:7000 (4096 B), as the "
                 "mlx5 driver does at load", fn->bdf);
        report_add(&ctx->rep, DIAG_WARN, "pci.max_read_req", subject, ev, fix,
                   "%s %s: Max_Read_Request_Size %d B: DMA reads (sends from GPU memory) use "
                   "small requests", who, fn->bdf, pi.mrrs);
    } else {
        report_add(&ctx->rep, DIAG_OK, "pci.max_read_req", subject, ev, NULL,
                   "%s %s: Max_Read_Request_Size %d B", who, fn->bdf, pi.mrrs);
    }

    struct ats_info ats;
    pcicfg_ats(&cfg, &ats);
    if (ats.offset < 0)
        report_add(&ctx->rep, DIAG_OK, "pci.ats", subject, NULL, NULL,
                   "%s %s: no ATS capability", who, fn->bdf);
    else {
        str_fmt(ev, sizeof(ev), "%s: ATS extended capability at 0x%03x, ATS Control Enable %d",
                 fn->bdf, ats.offset, ats.enabled);
        report_add(&ctx->rep, DIAG_OK, "pci.ats", subject, ev, NULL,
                   "%s %s: ATS capable, %s", who, fn->bdf, ats.enabled ? "enabled" : "not enabled");
    }

    if (is_nic)
        check_link(ctx, fn, subject, !is_vf ? &pi : have_pf ? &pf : NULL, have_pf ? pf_bdf : NULL, ports_mbps);
}

enum topo_dist { TOPO_PIX, TOPO_PXB, TOPO_PHB, TOPO_NODE, TOPO_SYS };

/* NCCL's vocabulary: PIX one PCIe switch, PXB several bridges below one host
 * bridge, PHB through a host bridge, NODE across host bridges of one NUMA
 * node, SYS across CPUs. *common gets the number of PCI functions both paths
 * share below the host bridge. */
static enum topo_dist topo_distance(const struct pci_fn *a, const struct pci_fn *b, int *common)
{
    *common = 0;
    if (a->host_bridge[0] && !strcmp(a->host_bridge, b->host_bridge)) {
        int k = 0;
        while (k < a->nchain - 1 && k < b->nchain - 1 && !strcmp(a->chain[k], b->chain[k]))
            k++;
        *common = k;
        if (k == 0)
            return TOPO_PHB;
        return (a->nchain - k <= 2 && b->nchain - k <= 2) ? TOPO_PIX : TOPO_PXB;
    }
    if (a->numa_node >= 0 && b->numa_node >= 0 && a->numa_node != b->numa_node)
        return TOPO_SYS;
    return TOPO_NODE;
}

static void check_acs(struct diag_ctx *ctx, const struct pci_fn *nic, const struct pci_fn *gpu,
                      int common, const char *subject)
{
    static struct pcicfg cfg;
    char list[512] = "", names[160], ev[1024] = "", fix[1024] = "";
    size_t off = 0, eoff = 0;
    int nbridges = 0, redirected = 0;
    const char *first_bdf = NULL;
    const struct pci_fn *sides[2] = { nic, gpu };
    for (int s = 0; s < 2; s++) {
        const struct pci_fn *fn = sides[s];
        for (int i = common; i < fn->nchain - 1; i++) {
            if (s == 1 && i < nic->nchain - 1 && !strcmp(fn->chain[i], nic->chain[i]))
                continue;
            nbridges++;
            if (load_cfg(fn->chain_dir[i], &cfg) || cfg.len < 256)
                continue;
            struct acs_info acs;
            pcicfg_acs(&cfg, &acs);
            if (eoff < sizeof(ev))
                eoff += (size_t)str_fmt(ev + eoff, sizeof(ev) - eoff, "%s%s: %s", eoff ? "; " : "",
                                         fn->chain[i],
                                         acs.offset < 0 ? "no ACS capability" : "ACS Control ");
            if (acs.offset >= 0 && eoff < sizeof(ev))
                eoff += (size_t)str_fmt(ev + eoff, sizeof(ev) - eoff, "0x%04x", acs.ctl);
            pcicfg_acs_redirect_names(acs.ctl, names, sizeof(names));
            if (acs.offset >= 0 && names[0]) {
                redirected++;
                if (!first_bdf)
                    first_bdf = fn->chain[i];
                if (off < sizeof(list))
                    off += (size_t)str_fmt(list + off, sizeof(list) - off, "%s%s (%s)",
                                            off ? ", " : "", fn->chain[i], names);
            }
        }
    }
    if (nbridges == 0) {
        report_add(&ctx->rep, DIAG_OK, "pci.acs", subject, NULL, NULL,
                   "no PCI bridge between the NIC and GPU %s", gpu->bdf);
    } else if (!redirected) {
        report_add(&ctx->rep, DIAG_OK, "pci.acs", subject, ev, NULL,
                   "no ACS redirection on the %d bridge(s) between the NIC and GPU %s",
                   nbridges, gpu->bdf);
    } else if (common == 0) {
        report_add(&ctx->rep, DIAG_OK, "pci.acs", subject, ev, NULL,
                   "ACS redirection on %s; the path crosses the host bridge anyway", list);
    } else {
        str_fmt(fix, sizeof(fix), "disable ACS redirection on those switch ports "
                 "(setpci -s %s ECAP_ACS+6.w=0000, for each; or the BIOS/switch setting). In a VM "
                 "host keep ACS for isolation and expect host-bridge bandwidth instead",
                 first_bdf);
        report_add(&ctx->rep, DIAG_WARN, "pci.acs", subject, ev, fix,
                   "ACS redirection on %s: NIC-GPU peer traffic goes up to the root complex "
                   "instead of across the switch", list);
    }
}

void diag_check_topology(struct diag_ctx *ctx, const struct pci_fn *nic, const char *subject)
{
    if (ctx->ngpus == 0) {
        report_add(&ctx->rep, DIAG_SKIP, "topo.gpu_distance", subject, NULL, NULL,
                   "no NVIDIA GPU under %s/bus/pci", ctx->roots.sys);
        return;
    }
    int best = -1, best_common = 0;
    enum topo_dist best_d = TOPO_SYS;
    for (int i = 0; i < ctx->ngpus; i++) {
        int common;
        enum topo_dist d = topo_distance(nic, &ctx->gpus[i], &common);
        if (best < 0 || d < best_d) {
            best = i;
            best_d = d;
            best_common = common;
        }
    }
    const struct pci_fn *gpu = &ctx->gpus[best];
    char ev[1024];
    str_fmt(ev, sizeof(ev), "NIC %s path: %s/.../%s (%d PCI function(s) deep); GPU %s path: "
             "%s/.../%s; %d shared below the host bridge; NUMA nodes %d and %d",
             nic->bdf, strrchr(nic->host_bridge, '/') ? strrchr(nic->host_bridge, '/') + 1 : "?",
             nic->bdf, nic->nchain, gpu->bdf,
             strrchr(gpu->host_bridge, '/') ? strrchr(gpu->host_bridge, '/') + 1 : "?", gpu->bdf,
             best_common, nic->numa_node, gpu->numa_node);
    switch (best_d) {
    case TOPO_PIX:
        report_add(&ctx->rep, DIAG_OK, "topo.gpu_distance", subject, ev, NULL,
                   "PIX: GPU %s is behind the same PCIe switch (via %s)", gpu->bdf,
                   nic->chain[best_common - 1]);
        break;
    case TOPO_PXB:
        report_add(&ctx->rep, DIAG_OK, "topo.gpu_distance", subject, ev, NULL,
                   "PXB: GPU %s is below the same root port %s through several bridges",
                   gpu->bdf, nic->chain[0]);
        break;
    case TOPO_PHB:
        report_add(&ctx->rep, DIAG_WARN, "topo.gpu_distance", subject, ev,
                   "GPU-NIC traffic crosses the host bridge; NCCL uses GPUDirect RDMA up to PXB "
                   "by default (NCCL_NET_GDR_LEVEL=PHB to allow it); in a VM ask for a topology "
                   "that places the GPU and the VF behind one switch",
                   "PHB: nearest GPU %s meets the NIC only at the host bridge", gpu->bdf);
        break;
    case TOPO_NODE:
        report_add(&ctx->rep, DIAG_WARN, "topo.gpu_distance", subject, ev,
                   "use the NIC closest to each GPU (NCCL picks by topology; check RAILNET_HCA)",
                   "NODE: nearest GPU %s is on another host bridge of the same CPU", gpu->bdf);
        break;
    case TOPO_SYS:
        report_add(&ctx->rep, DIAG_WARN, "topo.gpu_distance", subject, ev,
                   "GPUDirect RDMA across CPU sockets is slow and NCCL disables it; use a NIC on "
                   "the GPU's socket",
                   "SYS: nearest GPU %s is attached to another CPU", gpu->bdf);
        break;
    }

    if (nic->numa_node < 0)
        report_add(&ctx->rep, DIAG_WARN, "topo.numa", subject, ev,
                   "the firmware or hypervisor does not report NUMA affinity: bind processes and "
                   "memory by hand (numactl) next to the NIC and GPU",
                   "NIC %s NUMA node unknown (-1)", nic->bdf);
    else if (gpu->numa_node >= 0 && gpu->numa_node != nic->numa_node)
        report_add(&ctx->rep, DIAG_WARN, "topo.numa", subject, ev,
                   "pair each GPU with a NIC of its own NUMA node",
                   "NIC on NUMA node %d, nearest GPU %s on node %d", nic->numa_node, gpu->bdf,
                   gpu->numa_node);
    else
        report_add(&ctx->rep, DIAG_OK, "topo.numa", subject, ev, NULL,
                   "NIC and GPU %s on NUMA node %d", gpu->bdf, nic->numa_node);

    check_acs(ctx, nic, gpu, best_common, subject);
}
