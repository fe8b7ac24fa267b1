/* plugin/ib/devices.c: verbs device discovery and NCCL properties
 * (devices.h). */
#include "devices.h"

#include <arpa/inet.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "hostlink.h"
#include "ibvwrap.h"
#include "log.h"
#include "rail_topo.h"
#include "sysfs_attr.h"

static struct rn_device devs[DEVICES_MAX];
static int ndevs;      /* entries in devs[]: physical ones, then virtual ones (read with acquire) */
static int nphys;      /* physical ones, fixed after devices_init */
static int inited;
static pthread_mutex_t devs_mu = PTHREAD_MUTEX_INITIALIZER;

/* ------------------------------------------------------------ pure helpers */

/* A decimal field of a RAILNET_HCA entry: digits only (as NCCL_IB_HCA's,
 * which NCCL reads with atoi: no hex, no sign), in lo..hi. */
static int hca_number(const char *s, size_t len, int lo, int hi, int *out)
{
    if (len == 0)
        return -1;
    long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
        if (v > hi)
            return -1;
    }
    if (v < lo)
        return -1;
    *out = (int)v;
    return 0;
}

/* One entry item[0..len) into *e; 0, or -1 with why[] saying what is wrong. */
static int hca_entry_parse(const char *item, size_t len, struct devices_hca_entry *e, char *why, size_t whylen)
{
    const char *field[5];
    size_t flen[5];
    int nf = 0;
    const char *at = item, *end = item + len;
    while (nf < 5) {
        const char *colon = memchr(at, ':', (size_t)(end - at));
        field[nf] = at;
        flen[nf] = colon ? (size_t)(colon - at) : (size_t)(end - at);
        nf++;
        if (!colon)
            break;
        at = colon + 1;
    }
    if (nf == 5) {
        snprintf(why, whylen, "more than 4 fields (device:port:rail:plane)");
        return -1;
    }
    if (flen[0] == 0) {
        snprintf(why, whylen, "no device name");
        return -1;
    }
    if (flen[0] >= sizeof(e->name)) {
        snprintf(why, whylen, "a device name of %zu characters (at most %zu)", flen[0], sizeof(e->name) - 1);
        return -1;
    }
    memcpy(e->name, field[0], flen[0]);
    e->name[flen[0]] = '\0';
    e->port = 0;
    e->rail = e->plane = -1;
    static const char *const what[4] = { NULL, "port", "rail", "plane" };
    for (int i = 1; i < nf; i++) {
        if (flen[i] == 0)
            continue; /* empty: every port, or an undefined rail or plane */
        int lo = i == 1 ? 1 : 0, hi = i == 1 ? 255 : DEVICES_ID_MAX;
        int *dst = i == 1 ? &e->port : i == 2 ? &e->rail : &e->plane;
        if (hca_number(field[i], flen[i], lo, hi, dst)) {
            snprintf(why, whylen, "%s \"%.*s\" is not a decimal number %d..%d", what[i], (int)flen[i], field[i], lo,
                     hi);
            return -1;
        }
    }
    return 0;
}

int devices_hca_parse(const char *spec, struct devices_hca *h)
{
    memset(h, 0, sizeof(*h));
    if (!spec || !*spec) {
        h->all = 1;
        return 0;
    }
    const char *list = spec;
    if (*spec == '^')
        h->exclude = 1, spec++;
    if (*spec == '=')
        h->exact = 1, spec++;
    int warned = 0;
    while (*spec) {
        const char *comma = strchr(spec, ',');
        size_t len = comma ? (size_t)(comma - spec) : strlen(spec);
        const char *item = spec;
        spec += len + (comma ? 1 : 0);
        if (len == 0)
            continue;
        char why[128];
        struct devices_hca_entry e;
        if (h->n >= DEVICES_HCA_MAX) {
            snprintf(why, sizeof(why), "more than %d entries in the list", DEVICES_HCA_MAX);
        } else if (!hca_entry_parse(item, len, &e, why, sizeof(why))) {
            if (h->exclude && (e.rail >= 0 || e.plane >= 0)) {
                WARN("NET/railnet: RAILNET_HCA=%s: entry \"%.*s\" names a rail or plane in an exclude list (^), "
                     "where they mean nothing; they are ignored and the entry still excludes",
                     list, (int)len, item);
                e.rail = e.plane = -1;
                warned++;
            }
            h->e[h->n++] = e;
            continue;
        }
        WARN("NET/railnet: RAILNET_HCA=%s: entry \"%.*s\" refused: %s; it %s (form: device[:port[:rail[:plane]]])",
             list, (int)len, item, why, h->exclude ? "excludes nothing" : "takes no port");
        warned++;
    }
    return warned;
}

int devices_hca_match(const struct devices_hca *h, const char *dev, int port, int *rail, int *plane)
{
    int hit = -1;
    for (int i = 0; !h->all && i < h->n && hit < 0; i++) {
        const struct devices_hca_entry *e = &h->e[i];
        int name_ok = h->exact ? !strcmp(e->name, dev) : !strncmp(e->name, dev, strlen(e->name));
        if (name_ok && (!e->port || e->port == port))
            hit = i;
    }
    int taken = h->all || (h->exclude ? hit < 0 : hit >= 0);
    int with_ids = taken && !h->exclude && hit >= 0;
    if (rail)
        *rail = with_ids ? h->e[hit].rail : -1;
    if (plane)
        *plane = with_ids ? h->e[hit].plane : -1;
    return taken;
}

int devices_id_combine(int a, int b)
{
    return a == b ? a : -1;
}

int devices_port_speed_mbps(uint32_t active_speed, uint8_t active_width)
{
    int lane;
    switch (active_speed) {
    case 1: lane = 2500; break;    /* SDR */
    case 2: lane = 5000; break;    /* DDR */
    case 4: lane = 10000; break;   /* QDR */
    case 8: lane = 10000; break;   /* FDR10 */
    case 16: lane = 14000; break;  /* FDR */
    case 32: lane = 25000; break;  /* EDR */
    case 64: lane = 50000; break;  /* HDR */
    case 128: lane = 100000; break; /* NDR */
    case 256: lane = 200000; break; /* XDR */
    default: return 0;
    }
    int lanes;
    switch (active_width) {
    case 1: lanes = 1; break;
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
    default: return 0;
    }
    return lane * lanes;
}

/* ----------------------------------------------------------------- GID */

static int gid_is_ipv4_mapped(const union ibv_gid *g)
{
    static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
    return !memcmp(g->raw, prefix, sizeof(prefix));
}

static int gid_is_zero(const union ibv_gid *g)
{
    static const union ibv_gid zero;
    return !memcmp(g, &zero, sizeof(zero));
}

/* 1 when GID index i of the port is RoCE v2: the extended query when the
 * library has it, else the sysfs attribute file, as rdma-core exposes it. */
static int gid_is_roce_v2(struct ibv_device *d, struct ibv_context *ctx, int port, int i)
{
    const struct ibvwrap *v = ibvwrap_global();
    if (v->query_gid_ex) {
        struct ibv_gid_entry e;
        if (v->query_gid_ex(ctx, (uint32_t)port, (uint32_t)i, &e, 0, sizeof(e)) == 0)
            return e.gid_type == IBV_GID_TYPE_ROCE_V2;
    }
    char name[64], buf[32];
    snprintf(name, sizeof(name), "ports/%d/gid_attrs/types/%d", port, i);
    return sysfs_attr_read(d->ibdev_path, name, buf, sizeof(buf)) == 0 && !strncmp(buf, "RoCE v2", 7);
}

static int pick_gid(struct ibv_device *d, struct ibv_context *ctx, int port, int tbl_len, struct qp_port *qp)
{
    const struct ibvwrap *v = ibvwrap_global();
    int want = rn_config()->gid_index;
    if (want != RN_AUTO) {
        if (want >= tbl_len || v->query_gid(ctx, (uint8_t)port, want, &qp->gid) || gid_is_zero(&qp->gid)) {
            WARN("NET/railnet: %s port %d: RAILNET_GID_INDEX=%d is not a valid GID (table has %d entries)",
                 v->get_device_name(d), port, want, tbl_len);
            return -1;
        }
        qp->gid_index = (uint8_t)want;
        return 0;
    }
    int best = -1, best_score = -1;
    for (int i = 0; i < tbl_len && i < 256; i++) {
        union ibv_gid g;
        if (v->query_gid(ctx, (uint8_t)port, i, &g) || gid_is_zero(&g))
            continue;
        int score = (gid_is_roce_v2(d, ctx, port, i) ? 2 : 0) + (gid_is_ipv4_mapped(&g) ? 1 : 0);
        if (score > best_score) {
            best = i, best_score = score;
            qp->gid = g;
        }
        if (score == 3)
            break;
    }
    if (best < 0) {
        WARN("NET/railnet: %s port %d: no usable GID; the port is left out", v->get_device_name(d), port);
        return -1;
    }
    qp->gid_index = (uint8_t)best;
    char txt[INET6_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET6, qp->gid.raw, txt, sizeof(txt));
    INFO(NCCL_NET | NCCL_INIT, "NET/railnet: %s port %d: GID index %d (%s, %s) picked automatically",
         v->get_device_name(d), port, best, txt, best_score >= 2 ? "RoCE v2" : "not RoCE v2");
    return 0;
}

/* ------------------------------------------------------------- discovery */

struct found_port {
    struct qp_port qp;
    int speed;
    uint32_t max_msg;   /* the port's max_msg_sz */
    int rail, plane;    /* of the RAILNET_HCA entry that took it (a rail else the PCI
                         * topology's: take_pci_rail); -1 undefined */
    int rail_from_pci;  /* 1: the entry gave no rail, rail is the PCI topology's */
};

/* The bytes of one RDMA WRITE on a device whose ports take max_msg each:
 * HS_CHUNK_MAX or less, a multiple of 4 KiB. */
static uint64_t chunk_limit(uint64_t max_chunk, uint32_t max_msg)
{
    uint64_t m = max_msg ? max_msg : HS_CHUNK_MAX;
    if (m < max_chunk)
        max_chunk = m & ~(uint64_t)4095;
    return max_chunk >= 4096 ? max_chunk : 4096;
}

static void oob_address(struct rn_device *r)
{
    const char *want = rn_config()->oob_addr;
    memset(&r->oob, 0, sizeof(r->oob));
    if (*want) {
        if (inet_pton(AF_INET, want, r->oob.addr) == 1) {
            r->oob.family = 4;
            return;
        }
        if (inet_pton(AF_INET6, want, r->oob.addr) == 1) {
            r->oob.family = 6;
            return;
        }
        WARN("NET/railnet: RAILNET_OOB_ADDR=%s is not an IPv4 or IPv6 address; using the device's", want);
    }
    /* RoCE: the port's own IPv4 address is where its peers can reach us */
    if (r->link_layer == IBV_LINK_LAYER_ETHERNET && gid_is_ipv4_mapped(&r->ports[0].gid)) {
        r->oob.family = 4;
        memcpy(r->oob.addr, r->ports[0].gid.raw + 12, 4);
        return;
    }
    oob_default_addr(&r->oob);
}

static char *pci_path_of(struct ibv_device *d)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/device", d->ibdev_path);
    return realpath(path, NULL);
}

static devices_gpu_probe_fn probe_gpu; /* set once by devices_init */

/* ", rail R, plane P" for a device's INFO line: what is defined of them. */
static const char *ids_text(const struct rn_device *r, char *buf, size_t len)
{
    buf[0] = '\0';
    if (r->rail_id >= 0)
        snprintf(buf, len, ", rail %d", r->rail_id);
    if (r->plane_id >= 0) {
        size_t at = strlen(buf);
        snprintf(buf + at, len - at, ", plane %d", r->plane_id);
    }
    return buf;
}

/* The same for a physical device made of ports p[0..np), saying where a
 * rail asked of the PCI topology came from, or why there is none (pci_why:
 * rail_topo_rail's words). */
static const char *port_ids_text(const struct rn_device *r, const struct found_port *p, int np, const char *pci_why,
                                 char *buf, size_t len)
{
    int asked = 0, pci_rail = -1;
    for (int i = 0; i < np; i++)
        if (p[i].rail_from_pci)
            asked = 1, pci_rail = p[i].rail;
    buf[0] = '\0';
    if (r->rail_id >= 0)
        snprintf(buf, len, ", rail %d%s%s%s", r->rail_id, asked ? " (from PCI: " : "", asked ? pci_why : "",
                 asked ? ")" : "");
    else if (asked)
        snprintf(buf, len, ", rail undefined (%s)", pci_rail < 0 ? pci_why : "its ports' rails differ");
    if (r->plane_id >= 0) {
        size_t at = strlen(buf);
        snprintf(buf + at, len - at, ", plane %d", r->plane_id);
    }
    return buf;
}

static void add_device(struct ibv_device *d, struct ibv_context *ctx, struct ibv_pd *pd,
                       const struct ibv_device_attr *da, struct found_port *p, int np, int merged, int split,
                       const char *pci_why)
{
    const struct ibvwrap *v = ibvwrap_global();
    if (ndevs >= DEVICES_MAX)
        return;
    struct rn_device *r = &devs[ndevs];
    memset(r, 0, sizeof(*r));
    const char *vname = v->get_device_name(d);
    snprintf(r->verbs_name, sizeof(r->verbs_name), "%s", vname);
    /* ports of one NIC exposed separately are told apart by name */
    if (split)
        snprintf(r->name, sizeof(r->name), "%s:%u", vname, p[0].qp.port_num);
    else
        snprintf(r->name, sizeof(r->name), "%s", vname);
    /* NCCL keys the NICs of its topology by name, and the first table to
     * name one fixes its speed. NCCL 2.30's own IB GIN and RMA name each
     * port by its verbs name, at one port's speed: a merged device takes
     * the name NCCL gives the fused device of the same ports
     * ("mlx5_0+mlx5_0"), or NCCL plans it at the speed of one port. */
    if (split)
        snprintf(r->topo_name, sizeof(r->topo_name), "%s:%u", vname, p[0].qp.port_num);
    else
        snprintf(r->topo_name, sizeof(r->topo_name), "%s", vname);
    for (int i = 1; i < np && !split; i++) {
        size_t at = strlen(r->topo_name);
        snprintf(r->topo_name + at, sizeof(r->topo_name) - at, "+%s", vname);
    }
    r->pci_path = pci_path_of(d);
    r->guid = be64toh(da->node_guid);
    r->link_layer = p[0].qp.link_layer;
    r->nports = np;
    r->max_qp = da->max_qp;
    r->max_chunk = HS_CHUNK_MAX;
    r->nparts = 1;
    r->parts[0] = ndevs;
    r->rail_id = p[0].rail;
    r->plane_id = p[0].plane;
    for (int i = 0; i < np; i++) {
        r->rail_id = devices_id_combine(r->rail_id, p[i].rail);
        r->plane_id = devices_id_combine(r->plane_id, p[i].plane);
        r->ports[i] = p[i].qp;
        r->ports[i].ctx = ctx;
        r->ports[i].pd = pd;
        r->ports[i].port_idx = (uint8_t)i;
        r->speed_mbps += p[i].speed;
        r->max_chunk = chunk_limit(r->max_chunk, p[i].max_msg);
    }
    /* ports share their NIC's PCIe link: never promise NCCL more than it
     * carries (hostlink.h) */
    char link[48] = "";
    int ports_mbps = r->speed_mbps;
    uint64_t host = hostlink_mbps(r->pci_path, link, sizeof(link));
    if (host && host < (uint64_t)r->speed_mbps) {
        r->speed_mbps = (int)host;
        r->host_bound = np > 1;
    }
    oob_address(r);
    r->ptr_support = NCCL_PTR_HOST | (probe_gpu ? probe_gpu(ndevs, r) : 0);
    ndevs++;
    char ports[32] = "";
    for (int i = 0; i < np; i++) {
        size_t at = strlen(ports);
        snprintf(ports + at, sizeof(ports) - at, "%s%u", i ? "+" : "", p[i].qp.port_num);
    }
    char capped[96] = "", ids[RAIL_TOPO_WHY_LEN + 64];
    if (r->speed_mbps < ports_mbps)
        snprintf(capped, sizeof(capped), ": ports %d Mb/s, capped by its PCIe link %s", ports_mbps, link);
    INFO(NCCL_NET | NCCL_INIT, "NET/railnet: device %d: %s port %s (%s, %d Mb/s%s%s)%s, pci %s", ndevs - 1, r->name,
         ports, r->link_layer == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand" : "RoCE", r->speed_mbps, capped,
         merged ? ", ports merged" : "", port_ids_text(r, p, np, pci_why, ids, sizeof(ids)),
         r->pci_path ? r->pci_path : "unknown");
}

/* The ports of p[0..np) RAILNET_HCA gave no rail take the one the PCI
 * topology gives the NIC (rail_topo.h), or stay undefined; why[] receives
 * its words. Nothing is asked with RAILNET_RAIL_FROM_PCI=0. */
static void take_pci_rail(struct ibv_device *d, struct found_port *p, int np, char *why, size_t whylen)
{
    int need = 0;
    why[0] = '\0';
    for (int i = 0; i < np; i++)
        need |= p[i].rail < 0;
    if (!need || !rn_config()->rail_from_pci)
        return;
    char *pci = pci_path_of(d);
    int rail = rail_topo_rail(d->ibdev_path, pci, DEVICES_ID_MAX, why, whylen);
    free(pci);
    for (int i = 0; i < np; i++)
        if (p[i].rail < 0) {
            p[i].rail = rail;
            p[i].rail_from_pci = 1;
        }
}

static int merge_decision(const char *name, struct found_port *p, int np)
{
    int mode = rn_config()->merge_ports;
    if (np != 2)
        return 0;
    int same = p[0].qp.link_layer == p[1].qp.link_layer;
    if (mode == 0) {
        INFO(NCCL_NET | NCCL_INIT, "NET/railnet: %s: 2 active ports, RAILNET_MERGE_PORTS=0: one device per port",
             name);
        return 0;
    }
    if (!same) {
        INFO(NCCL_NET | NCCL_INIT, "NET/railnet: %s: ports have different link layers, not merged", name);
        return 0;
    }
    INFO(NCCL_NET | NCCL_INIT, "NET/railnet: %s: 2 active %s ports merged into one device (%s)", name,
         p[0].qp.link_layer == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand" : "Ethernet",
         mode == 1 ? "RAILNET_MERGE_PORTS=1" : "default; RAILNET_MERGE_PORTS=0 splits them");
    return 1;
}

static void scan_device(struct ibv_device *d, const struct devices_hca *hca)
{
    const struct ibvwrap *v = ibvwrap_global();
    const char *name = v->get_device_name(d);
    const char *spec = rn_config()->hca;
    struct ibv_context *ctx = v->open_device(d);
    if (!ctx) {
        WARN("NET/railnet: cannot open %s: %s", name, strerror(errno));
        return;
    }
    struct ibv_device_attr da;
    if (v->query_device(ctx, &da)) {
        WARN("NET/railnet: ibv_query_device(%s) failed: %s", name, strerror(errno));
        v->close_device(ctx);
        return;
    }
    struct found_port found[HS_MAX_PORTS];
    int nf = 0;
    for (int port = 1; port <= da.phys_port_cnt && nf < HS_MAX_PORTS; port++) {
        struct ibv_port_attr pa;
        if (ibvwrap_query_port(v, ctx, (uint8_t)port, &pa))
            continue;
        int rail = -1, plane = -1;
        if (!devices_hca_match(hca, name, port, &rail, &plane)) {
            INFO(NCCL_NET | NCCL_INIT, "NET/railnet: %s port %d left out by RAILNET_HCA=%s", name, port, spec);
            continue;
        }
        if (pa.state != IBV_PORT_ACTIVE) {
            INFO(NCCL_NET | NCCL_INIT, "NET/railnet: %s port %d is not active (state %d), left out", name, port,
                 pa.state);
            continue;
        }
        if (pa.link_layer != IBV_LINK_LAYER_INFINIBAND && pa.link_layer != IBV_LINK_LAYER_ETHERNET)
            continue;
        struct found_port *f = &found[nf];
        memset(f, 0, sizeof(*f));
        f->qp.port_num = (uint8_t)port;
        f->qp.link_layer = pa.link_layer;
        f->qp.lid = pa.lid;
        f->qp.active_mtu = pa.active_mtu;
        f->speed = devices_port_speed_mbps(pa.active_speed, pa.active_width);
        f->max_msg = pa.max_msg_sz;
        f->rail = rail;
        f->plane = plane;
        if (pick_gid(d, ctx, port, pa.gid_tbl_len, &f->qp) && pa.link_layer == IBV_LINK_LAYER_ETHERNET)
            continue;
        nf++;
    }
    if (nf == 0) {
        v->close_device(ctx);
        return;
    }
    struct ibv_pd *pd = v->alloc_pd(ctx);
    if (!pd) {
        WARN("NET/railnet: ibv_alloc_pd(%s) failed: %s", name, strerror(errno));
        v->close_device(ctx);
        return;
    }
    char pci_why[RAIL_TOPO_WHY_LEN];
    take_pci_rail(d, found, nf, pci_why, sizeof(pci_why));
    if (merge_decision(name, found, nf)) {
        add_device(d, ctx, pd, &da, found, nf, 1, 0, pci_why);
        return;
    }
    for (int i = 0; i < nf; i++)
        add_device(d, ctx, pd, &da, &found[i], 1, 0, nf > 1, pci_why);
}

ncclResult_t devices_init(devices_gpu_probe_fn probe)
{
    pthread_mutex_lock(&devs_mu);
    if (inited) {
        pthread_mutex_unlock(&devs_mu);
        return ncclSuccess;
    }
    inited = 1;
    probe_gpu = probe;
    const char *lib = rn_config()->ibverbs_lib;
    char err[512];
    if (ibvwrap_global_load(*lib ? lib : NULL, err, sizeof(err))) {
        INFO(NCCL_NET | NCCL_INIT, "NET/railnet: no RDMA devices: %s", err);
        pthread_mutex_unlock(&devs_mu);
        return ncclSuccess;
    }
    const struct ibvwrap *v = ibvwrap_global();
    INFO(NCCL_NET | NCCL_INIT, "NET/railnet: using %s", v->path);
    struct devices_hca hca;
    devices_hca_parse(rn_config()->hca, &hca);
    int n = 0;
    struct ibv_device **list = v->get_device_list(&n);
    if (!list || n == 0)
        INFO(NCCL_NET | NCCL_INIT, "NET/railnet: no RDMA devices: ibv_get_device_list found none (%s)",
             list ? "no device" : strerror(errno));
    for (int i = 0; list && i < n; i++)
        scan_device(list[i], &hca);
    if (list)
        v->free_device_list(list);
    nphys = ndevs;
    if (n > 0 && ndevs == 0)
        INFO(NCCL_NET | NCCL_INIT, "NET/railnet: no usable port among %d RDMA device(s)%s%s", n,
             *rn_config()->hca ? " with RAILNET_HCA=" : "", rn_config()->hca);
    pthread_mutex_unlock(&devs_mu);
    return ncclSuccess;
}

int devices_count(void)
{
    return __atomic_load_n(&ndevs, __ATOMIC_ACQUIRE);
}

int devices_count_physical(void)
{
    return nphys;
}

/* The one bounds check on a device index; writable for the counters
 * (devices_next_home), const to everyone else (devices_get). */
static struct rn_device *device_at(int dev)
{
    return dev >= 0 && dev < devices_count() ? &devs[dev] : NULL;
}

const struct rn_device *devices_get(int dev)
{
    return device_at(dev);
}

ncclResult_t devices_properties(int dev, struct devices_props *props)
{
    const struct rn_device *r = devices_get(dev);
    if (!r || !props) {
        WARN("NET/railnet: getProperties: no device %d (%d devices)", dev, devices_count());
        return ncclInvalidArgument;
    }
    memset(props, 0, sizeof(*props));
    props->name = r->topo_name;
    props->pci_path = r->pci_path;
    props->guid = r->guid;
    props->ptr_support = r->ptr_support;
    props->reg_is_global = 1;
    props->force_flush = 0;
    props->speed_mbps = r->speed_mbps;
    props->port = r->ports[0].port_num;
    props->latency_us = 0;
    props->max_comms = r->max_qp > 0 ? r->max_qp / 4 : 65536;
    props->max_recvs = HS_MAX_RECVS;
    props->net_device_type = NCCL_NET_DEVICE_HOST;
    props->net_device_version = 0;
    props->nparts = r->nparts;
    memcpy(props->parts, r->parts, sizeof(props->parts));
    props->max_p2p_bytes = HS_MAX_CHUNKS * r->max_chunk;
    props->max_coll_bytes = props->max_p2p_bytes;
    props->max_multi_request = 1;
    props->rail_id = r->rail_id;
    props->plane_id = r->plane_id;
    return ncclSuccess;
}

/* ----------------------------------------------------- virtual devices */

static ncclResult_t vdev_refuse(ncclResult_t res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ncclResult_t vdev_refuse(ncclResult_t res, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    WARN("NET/railnet: makeVDevice: %s", msg);
    return res;
}

/* The merged device of parts[0..n) (ports of one NIC, checked by the
 * caller) into r. */
static void vdev_merge(struct rn_device *r, int n, const int *parts)
{
    const struct rn_device *first = &devs[parts[0]];
    *r = *first;
    r->next_home[0] = r->next_home[1] = 0;
    r->open_comms[0] = r->open_comms[1] = 0;
    if (n == 1)
        return; /* that device again, under a new index */
    r->nports = 0;
    r->speed_mbps = 0;
    r->host_bound = 0;
    r->nparts = n;
    char name[sizeof(r->name)] = "";
    for (int i = 0; i < n; i++) {
        const struct rn_device *p = &devs[parts[i]];
        r->parts[i] = parts[i];
        for (int k = 0; k < p->nports; k++) {
            r->ports[r->nports] = p->ports[k];
            r->ports[r->nports].port_idx = (uint8_t)r->nports;
            r->nports++;
        }
        r->speed_mbps += p->speed_mbps;
        r->ptr_support &= p->ptr_support;
        r->rail_id = devices_id_combine(r->rail_id, p->rail_id);
        r->plane_id = devices_id_combine(r->plane_id, p->plane_id);
        if (p->max_chunk < r->max_chunk)
            r->max_chunk = p->max_chunk;
        size_t at = strlen(name);
        snprintf(name + at, sizeof(name) - at, "%s%s", i ? "+" : "", p->name);
    }
    memcpy(r->name, name, sizeof(name));
    /* as NCCL names a fused device: its parts' topology names joined */
    char topo[sizeof(r->topo_name)] = "";
    for (int i = 0; i < n; i++) {
        size_t at = strlen(topo);
        snprintf(topo + at, sizeof(topo) - at, "%s%s", i ? "+" : "", devs[parts[i]].topo_name);
    }
    memcpy(r->topo_name, topo, sizeof(topo));
    /* the ports share their NIC's PCIe link, as in add_device */
    uint64_t host = hostlink_mbps(r->pci_path, NULL, 0);
    if (host && host < (uint64_t)r->speed_mbps) {
        r->speed_mbps = (int)host;
        r->host_bound = r->nports > 1;
    }
}

ncclResult_t devices_make_virtual(int n, const int *parts, int max, int *out)
{
    if (!out || !parts)
        return vdev_refuse(ncclInvalidArgument, "no %s", parts ? "place for the index" : "device list");
    if (n < 1 || n > max || n > DEVICES_MAX_PARTS)
        return vdev_refuse(ncclInvalidUsage, "%d devices asked for; 1..%d can make a virtual device", n,
                           max < DEVICES_MAX_PARTS ? max : DEVICES_MAX_PARTS);
    int np = devices_count_physical(), nports = 0;
    for (int i = 0; i < n; i++) {
        if (parts[i] < 0 || parts[i] >= np)
            return vdev_refuse(ncclInvalidUsage, "device %d is not a physical device (0..%d)", parts[i], np - 1);
        for (int j = 0; j < i; j++)
            if (parts[j] == parts[i])
                return vdev_refuse(ncclInvalidUsage, "device %d named twice", parts[i]);
        const struct rn_device *p = &devs[parts[i]], *p0 = &devs[parts[0]];
        if (p->ports[0].ctx != p0->ports[0].ctx || p->link_layer != p0->link_layer)
            return vdev_refuse(ncclInvalidUsage,
                               "devices %d (%s) and %d (%s) are different NICs%s: a railnet connection stripes "
                               "over the ports of one NIC only; they stay separate devices (NCCL spreads its "
                               "channels over them; NCCL_NET_MERGE_LEVEL=LOC stops NCCL asking)",
                               parts[0], p0->name, parts[i], p->name,
                               p->link_layer != p0->link_layer ? " with different link layers" : "");
        nports += p->nports;
    }
    if (nports > HS_MAX_PORTS)
        return vdev_refuse(ncclInvalidUsage, "%d ports in all; a device stripes over %d at most", nports,
                           HS_MAX_PORTS);
    pthread_mutex_lock(&devs_mu);
    int at = ndevs;
    if (at >= DEVICES_MAX) {
        pthread_mutex_unlock(&devs_mu);
        return vdev_refuse(ncclInvalidUsage, "no room for another device (%d in all)", DEVICES_MAX);
    }
    vdev_merge(&devs[at], n, parts);
    __atomic_store_n(&ndevs, at + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&devs_mu);
    *out = at;
    const struct rn_device *r = &devs[at];
    char ids[48];
    INFO(NCCL_NET | NCCL_INIT, "NET/railnet: device %d: virtual device %s over %d device(s), %d port(s), %d Mb/s%s%s",
         at, r->name, n, r->nports, r->speed_mbps, r->host_bound ? " (capped by its PCIe link)" : "",
         ids_text(r, ids, sizeof(ids)));
    return ncclSuccess;
}

int devices_host_bound(int dev)
{
    const struct rn_device *r = devices_get(dev);
    return r ? r->host_bound : 0;
}

unsigned devices_next_home(int dev, int send)
{
    struct rn_device *r = device_at(dev);
    return r ? __atomic_fetch_add(&r->next_home[send ? 0 : 1], 1u, __ATOMIC_RELAXED) : 0;
}

void devices_comm_open(int dev, int send)
{
    struct rn_device *r = device_at(dev);
    if (r)
        __atomic_fetch_add(&r->open_comms[send ? 0 : 1], 1u, __ATOMIC_RELAXED);
}

void devices_comm_close(int dev, int send)
{
    struct rn_device *r = device_at(dev);
    if (r)
        __atomic_fetch_sub(&r->open_comms[send ? 0 : 1], 1u, __ATOMIC_RELAXED);
}

unsigned devices_comms(int dev, int send)
{
    const struct rn_device *r = devices_get(dev);
    return r ? __atomic_load_n(&r->open_comms[send ? 0 : 1], __ATOMIC_RELAXED) : 0;
}

int devices_nports(int dev)
{
    const struct rn_device *r = devices_get(dev);
    return r ? r->nports : 0;
}

ncclResult_t devices_qp_ports(int dev, struct qp_port *ports, int *nports, char *name, size_t namelen)
{
    const struct rn_device *r = devices_get(dev);
    if (!r)
        return ncclInvalidArgument;
    for (int i = 0; i < r->nports; i++)
        ports[i] = r->ports[i];
    *nports = r->nports;
    snprintf(name, namelen, "%s", r->name);
    return ncclSuccess;
}

ncclResult_t devices_handle_info(int dev, uint64_t *guid, uint8_t *link_layer, uint8_t *nports,
                                 struct oob_addr *addr)
{
    const struct rn_device *r = devices_get(dev);
    if (!r)
        return ncclInvalidArgument;
    *guid = r->guid;
    *link_layer = r->link_layer;
    *nports = (uint8_t)r->nports;
    *addr = r->oob;
    return ncclSuccess;
}
