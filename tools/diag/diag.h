/* tools/diag/diag.h: railnet-diag's shared context and its check modules.
 *
 * Contract: main.c fills struct diag_ctx from the command line, then calls
 * the check modules in order; each appends results to ctx->rep and may record
 * facts in ctx->facts for later checks (the GPU memory path verdict needs the
 * kernel, peer-memory and rdma-core findings). Checks read the host only
 * through ctx->roots (sysfs.h) and the loaded libraries; none of them exits. */
#ifndef RAILNET_TOOLS_DIAG_H
#define RAILNET_TOOLS_DIAG_H

#include <stddef.h>
#include <stdint.h>

#include "report.h"
#include "sysfs.h"

#define DIAG_MAX_NICS 16
#define DIAG_MAX_GPUS 16

struct diag_opts {
    const char *dev;          /* -d: only this RDMA device */
    const char *ibverbs_lib;  /* --ibverbs-lib */
    int probe;                /* --probe */
    int probe_port;           /* --probe-port, default 1 */
    int probe_gid_index;      /* -x, -1: auto */
    size_t probe_size;        /* bytes per write */
    int probe_iters;          /* writes per row */
    int cuda_dev;             /* --gpu, -1: first */
    int json, verbose;
};

struct diag_facts {
    int vm;                     /* hypervisor seen */
    int kernel_major, kernel_minor; /* 0 when unknown */
    char kernel[128];
    int peermem;                /* nvidia_peermem loaded */
    int verbs_loaded;
    char verbs_path[4096];
    int rdma_core_version;      /* 0: unknown from the name */
    int has_reg_mr_iova2, has_reg_dmabuf_mr;
    int cuda_loaded;
    int cuda_devices;
    int cuda_dmabuf;            /* 1 yes, 0 no, -1 unknown */
    char cuda_why[256];         /* why CUDA was not usable */
    int ngpus;                  /* NVIDIA GPUs in sysfs */
    int nic_vf;                 /* some NIC is a VF */
    int nic_ro_off;             /* some NIC has Enable Relaxed Ordering off */
};

struct probe_row {
    const char *memory;   /* "host", "cuda" */
    const char *path;     /* "ibv_reg_mr", "dmabuf", "peermem" */
    int relaxed;          /* registered with IBV_ACCESS_RELAXED_ORDERING */
    int ran;              /* 0: skipped, see why */
    double gbps;          /* average bandwidth of the loopback writes */
    double seconds;
    char why[256];
};

#define DIAG_PROBE_ROWS 6

struct diag_ctx {
    struct diag_opts opts;
    struct probe_row probe[DIAG_PROBE_ROWS];
    int nprobe;
    char probe_device[64];
    struct diag_roots roots;
    struct report rep;
    struct diag_facts facts;
    struct pci_fn gpus[DIAG_MAX_GPUS];
    int ngpus;
};

/* checks_host.c: hypervisor, IOMMU, kernel, peer memory, rdma-core, CUDA. */
void diag_check_host(struct diag_ctx *ctx);
/* checks_nic.c: one RDMA device: function kind, PCIe Device Control, ATS,
 * its ports; then its distance to the GPUs and ACS between them. */
void diag_check_nics(struct diag_ctx *ctx);
/* checks_host.c: GPU memory path verdict (after the NIC checks). */
void diag_check_gpu_paths(struct diag_ctx *ctx);
/* probe.c: --probe, the loopback write measurements: fills ctx->probe and
 * appends the verdict (probe.*) to the report. Returns 0 when the probe ran
 * (whatever it found), -1 when it could not run at all (reported as FAIL). */
int diag_probe(struct diag_ctx *ctx);
/* checks_pci.c helpers shared by the NIC and GPU checks. For a NIC,
 * diag_check_pcie_function also judges its PCIe link (pci.link: as trained
 * against what it can train to, and its data rate against its ports'
 * ports_mbps, 0 when unknown; a VF's is its PF's where the host shows it). */
void diag_check_pcie_function(struct diag_ctx *ctx, const struct pci_fn *fn,
                              const char *subject, int is_nic, int is_vf, uint64_t ports_mbps);
void diag_check_topology(struct diag_ctx *ctx, const struct pci_fn *nic, const char *subject);

/* True when vendor:device is a Mellanox/NVIDIA ConnectX virtual function. */
int diag_is_known_vf_id(unsigned vendor, unsigned device);

#endif
