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
 *
 * Rail and plane (net v12's railId/planeId): each port takes those of the
 * RAILNET_HCA entry that took it (devices_hca_match); a port the entry
 * gives no rail takes the one the host's PCI topology gives its NIC
 * (rail_topo.h; not with RAILNET_RAIL_FROM_PCI=0), and the device's INFO
 * line says which GPU gave it or why there is none; a device of several
 * ports or parts keeps each only when all parts have the same value
 * (devices_id_combine), else -1, so that NCCL's search never sees a rail or
 * plane that one of the device's ports is not on.
 *
 * Virtual devices (NCCL's NIC fusion, net v9+ makeVDevice): NCCL names
 * physical devices (the first devices_count_physical() indexes) and gets a
 * new index after them. Over one device it is that device again; over
 * several it is accepted only when they are the ports of one NIC that
 * railnet keeps apart (RAILNET_MERGE_PORTS=0, or RAILNET_HCA naming ports),
 * with at most HS_MAX_PORTS ports in all: the result is the merged device
 * railnet itself makes of those ports (a connection stripes over them, one
 * CQ and protection domain per connection). Devices of different NICs are
 * refused (a WARN, ncclInvalidUsage): NCCL then keeps them apart and spreads
 * its channels over them. railnet's own merge therefore wins: by default it
 * merges a dual-port NIC before NCCL looks, and NCCL's default merge level
 * (ports of one PCI function) finds nothing left to merge.
 * After init the table only grows (makeVDevice appends an entry and then
 * publishes the count), so lookups need no lock.
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

#define DEVICES_MAX 64
/* Physical devices in one virtual device (NCCL_NET_MAX_DEVS_PER_NIC_V12). */
#define DEVICES_MAX_PARTS 8

struct rn_device {
    char name[64];           /* verbs device name; "name:port" when unmerged and multi-port */
    char topo_name[132];     /* the name NCCL's topology sees (devices_properties) */
    char verbs_name[64];
    char *pci_path;          /* realpath of <ibdev_path>/device, NULL when unknown */
    uint64_t guid;           /* node GUID, host order */
    uint8_t link_layer;      /* IBV_LINK_LAYER_* */
    int nports;
    struct qp_port ports[HS_MAX_PORTS];
    int speed_mbps;          /* sum over the ports, at most the PCIe link's (hostlink.h) */
    int host_bound;          /* 1: the PCIe link carries less than the ports together */
    unsigned next_home[2];   /* the next send / receive comm's home QP (devices_next_home) */
    unsigned open_comms[2];  /* send / receive comms open on it (devices_comm_open) */
    int ptr_support;         /* NCCL_PTR_* bits, from a real test registration */
    int max_qp;
    uint64_t max_chunk;      /* bytes of one RDMA WRITE: HS_CHUNK_MAX, or less where a port's max_msg_sz is */
    struct oob_addr oob;     /* where listen binds */
    int nparts;              /* physical devices it is made of (vProps): itself, or a virtual device's */
    int parts[DEVICES_MAX_PARTS];
    int rail_id, plane_id;   /* from RAILNET_HCA, a rail else from PCI; -1 undefined (merged parts:
                              * devices_id_combine) */
};

/* The newest properties NCCL asks for (net v12's fields); each table's face
 * copies what its version has. */
struct devices_props {
    const char *name;
    char *pci_path;
    uint64_t guid;
    int ptr_support;         /* NCCL_PTR_* */
    int reg_is_global;
    int force_flush;         /* 0: railnet's iflush decides, NCCL need not flush every receive */
    int speed_mbps;
    int port;
    float latency_us;
    int max_comms;
    int max_recvs;
    int net_device_type;     /* NCCL_NET_DEVICE_HOST */
    int net_device_version;
    int nparts;              /* vProps */
    int parts[DEVICES_MAX_PARTS];
    uint64_t max_p2p_bytes;  /* one isend/irecv: HS_MAX_CHUNKS * max_chunk */
    uint64_t max_coll_bytes; /* the same bound (railnet has no collective network) */
    int max_multi_request;   /* 1: no multi-requests */
    int rail_id, plane_id;   /* RAILNET_HCA's rail and plane; -1: undefined (NCCL_NET_ID_UNDEF) */
};

/* NCCL_PTR_CUDA | NCCL_PTR_DMABUF as far as GPU memory registers on r
 * (device index dev); NULL probe: host memory only. */
typedef int (*devices_gpu_probe_fn)(int dev, const struct rn_device *r);
ncclResult_t devices_init(devices_gpu_probe_fn probe);
/* Every device index NCCL may use: physical ones, then virtual ones. */
int devices_count(void);
/* The devices discovery found (a virtual device's parts are among them). */
int devices_count_physical(void);
const struct rn_device *devices_get(int dev);
ncclResult_t devices_properties(int dev, struct devices_props *props);
/* NCCL's makeVDevice: a virtual device over the physical devices parts[0..n)
 * (see above); max: the caller table's limit on n. Its index in *out.
 * Thread-safe. Refusals WARN and return ncclInvalidUsage (bad arguments:
 * ncclInvalidArgument). */
ncclResult_t devices_make_virtual(int n, const int *parts, int max, int *out);

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
/* Counts the send (send 1) or receive comms open on device dev: open when
 * one is built, close when it is freed; devices_comms reads the count.
 * Thread-safe. */
void devices_comm_open(int dev, int send);
void devices_comm_close(int dev, int send);
unsigned devices_comms(int dev, int send);
ncclResult_t devices_qp_ports(int dev, struct qp_port *ports, int *nports, char *name, size_t namelen);
ncclResult_t devices_handle_info(int dev, uint64_t *guid, uint8_t *link_layer, uint8_t *nports,
                                 struct oob_addr *addr);

/* RAILNET_HCA, parsed once (exposed for the tests). spec is a comma list of
 * entries name[:port[:rail[:plane]]], NCCL_IB_HCA's form; a leading '^'
 * excludes the listed ports, a leading '=' (after '^' if any) makes names
 * exact instead of prefixes. An empty port field matches every port; rail
 * and plane are decimal 0..DEVICES_ID_MAX, an empty or absent one is
 * undefined (-1). An entry that does not parse (empty name, a field not a
 * number or out of range, more than four fields, a name longer than a
 * verbs name) is refused with a WARN naming it and matches nothing: in an
 * include list its ports are not taken. An exclude entry carrying a rail or
 * plane is a WARN too, but still excludes (the rail and plane are dropped:
 * an excluded port reports nothing). Empty entries (",,") are skipped. */
#define DEVICES_ID_MAX 32767 /* rail and plane are int16_t in net v12 */
#define DEVICES_HCA_MAX 64
struct devices_hca_entry {
    char name[64];
    int port;                /* 0: every port */
    int rail, plane;         /* -1: undefined */
};
struct devices_hca {
    int all;                 /* empty spec: every port, no rail or plane */
    int exclude, exact;
    int n;
    struct devices_hca_entry e[DEVICES_HCA_MAX];
};
/* Fills *h from spec; returns how many entries were refused (each WARNed). */
int devices_hca_parse(const char *spec, struct devices_hca *h);
/* 1 when port `port` of verbs device `dev` is taken; then *rail and *plane
 * (either may be NULL) are those of the first entry naming it (-1 when
 * undefined, or in an exclude list). 0 when it is left out. */
int devices_hca_match(const struct devices_hca *h, const char *dev, int port, int *rail, int *plane);
/* The rail or plane of a device made of parts with ids a and b: the id
 * when both are equal, else undefined (-1). */
int devices_id_combine(int a, int b);
/* Mb/s of a port from ibv_port_attr's active_speed/active_width codes; 0 if unknown. */
int devices_port_speed_mbps(uint32_t active_speed, uint8_t active_width);

#endif
