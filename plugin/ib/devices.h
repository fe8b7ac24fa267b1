/* plugin/ib/devices.h: discovery of the NCCL devices the plugin exposes.
 *
 * devices_init() (once, at the plugin's init) opens every verbs device,
 * keeps its ACTIVE InfiniBand and Ethernet (RoCE) ports that pass
 * RAILNET_HCA, picks each RoCE port's GID (RAILNET_GID_INDEX, or the first
 * RoCE v2 GID holding an IPv4 address), and makes one NCCL device per port,
 * or, with RAILNET_MERGE_PORTS (auto: on when a NIC has two active ports of
 * the same link layer), one per NIC whose ports a connection stripes over.
 * Everything it logs goes through NCCL's logger; no verbs library or no
 * device is not an error: the count is 0 and one INFO line says why.
 * After init the table is read-only, so lookups need no lock.
 *
 * Layer: low (knows nothing of comms or registration; the GPU probe of
 * each device is passed in by the caller: mr_probe_gpu). */
#ifndef RAILNET_IB_DEVICES_H
#define RAILNET_IB_DEVICES_H

#include <stdint.h>

#include "handshake.h"
#include "nccl_net_v8.h"
#include "oob.h"
#include "qp.h"

#define DEVICES_MAX 32

struct rn_device {
    char name[64];           /* verbs device name; "name:port" when unmerged and multi-port */
    char verbs_name[64];
    char *pci_path;          /* realpath of <ibdev_path>/device, NULL when unknown */
    uint64_t guid;           /* node GUID, host order */
    uint8_t link_layer;      /* IBV_LINK_LAYER_* */
    int nports;
    struct qp_port ports[HS_MAX_PORTS];
    int speed_mbps;          /* sum over the ports, at most the PCIe link's (hostlink.h) */
    int host_bound;          /* 1: the PCIe link carries less than the ports together */
    unsigned next_home[2];   /* the next send / receive comm's home QP (devices_next_home) */
    int ptr_support;         /* NCCL_PTR_* bits, from a real test registration */
    int max_qp;
    struct oob_addr oob;     /* where listen binds */
};

/* NCCL_PTR_CUDA | NCCL_PTR_DMABUF as far as GPU memory registers on r
 * (device index dev); NULL probe: host memory only. */
typedef int (*devices_gpu_probe_fn)(int dev, const struct rn_device *r);
ncclResult_t devices_init(devices_gpu_probe_fn probe);
int devices_count(void);
const struct rn_device *devices_get(int dev);
ncclResult_t devices_properties(int dev, ncclNetProperties_v8_t *props);

/* What comms need. */
int devices_nports(int dev);
/* 1 when device dev's PCIe link, not its ports, bounds what it moves (a
 * link read from sysfs slower than the ports' sum): a connection then
 * keeps its whole messages on one QP (comm.h, home) instead of spreading
 * them over ports that cannot add bandwidth together. */
int devices_host_bound(int dev);
/* The home QP index (modulo the comm's QPs) of device dev's next send
 * (send 1) or receive comm: each kind takes the QPs in turn. Thread-safe. */
unsigned devices_next_home(int dev, int send);
ncclResult_t devices_qp_ports(int dev, struct qp_port *ports, int *nports, char *name, size_t namelen);
ncclResult_t devices_handle_info(int dev, uint64_t *guid, uint8_t *link_layer, uint8_t *nports,
                                 struct oob_addr *addr);

/* RAILNET_HCA matching, exposed for the tests: spec is a comma list of
 * name[:port]; a leading '^' excludes the listed ones, a leading '=' (after
 * '^' if any) makes names exact instead of prefixes. An empty spec keeps all. */
int devices_filter_match(const char *spec, const char *dev, int port);
/* Mb/s of a port from ibv_port_attr's active_speed/active_width codes; 0 if unknown. */
int devices_port_speed_mbps(uint32_t active_speed, uint8_t active_width);

#endif
