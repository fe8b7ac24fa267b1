/* tests/netdriver/nd_tables.c: the net table the driver drives, in v8's
 * shape (nd_tables.h). */
#include <dlfcn.h>
#include "nd_tables.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "../../tools/common/plugin_tables.h"

#define ND_MAX_RECVS 8

static int version = 8;
static int traffic_class = NCCL_NET_TRAFFIC_CLASS_UNDEF;
static const void *table;     /* the chosen version's */
static void *ctx;             /* v11/v12: init's context */
static ncclNet_v8_t shape;    /* what the driver calls */

static uint64_t prof_started, prof_stopped, prof_bad;
static char phandle_token;    /* the phandle every isend/irecv passes (v10+) */
static char event_token;      /* what an event handle holds once started */

int nd_tables_set_version(int v)
{
    if (v < 8 || v > 12)
        return -1;
    version = v;
    return 0;
}

int nd_tables_version(void)
{
    return version;
}

void nd_tables_set_traffic_class(int tc)
{
    traffic_class = tc;
}

void nd_tables_prof_counts(uint64_t *started, uint64_t *stopped, uint64_t *bad)
{
    *started = __atomic_load_n(&prof_started, __ATOMIC_RELAXED);
    *stopped = __atomic_load_n(&prof_stopped, __ATOMIC_RELAXED);
    *bad = __atomic_load_n(&prof_bad, __ATOMIC_RELAXED);
}

/* NCCL's profiler callback as far as the driver can judge the plugin's
 * calls: balanced starts and stops, its own phandle, IB layout v1. */
static ncclResult_t prof_callback(void **eHandle, int type, void *pHandle, int64_t pluginId, void *extData)
{
    if (type == ncclProfilerNetEventStart) {
        const ncclProfilerNetIbDescr_v1_t *d = extData;
        if (pHandle != &phandle_token || pluginId != (int64_t)(NCCL_PROFILER_NET_TYPE_IB | NCCL_PROFILER_NET_IB_VER) ||
            !d || d->type != ncclProfileQp || d->qp.qpNum == 0)
            __atomic_fetch_add(&prof_bad, 1, __ATOMIC_RELAXED);
        *eHandle = &event_token;
        __atomic_fetch_add(&prof_started, 1, __ATOMIC_RELAXED);
    } else if (type == ncclProfilerNetEventStop) {
        if (!eHandle || *eHandle != &event_token)
            __atomic_fetch_add(&prof_bad, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&prof_stopped, 1, __ATOMIC_RELAXED);
    } else {
        __atomic_fetch_add(&prof_bad, 1, __ATOMIC_RELAXED);
    }
    return ncclSuccess;
}

/* ---- shims: v8's shape onto the chosen table ---- */

static ncclResult_t shim_init(ncclDebugLogger_t logger)
{
    (void)logger; /* nd_tables_open did */
    return ncclSuccess;
}

#define T9 ((const ncclNet_v9_t *)table)
#define T10 ((const ncclNet_v10_t *)table)
#define T11 ((const ncclNet_v11_t *)table)
#define T12 ((const ncclNet_v12_t *)table)

static ncclResult_t shim_get_properties(int dev, ncclNetProperties_v8_t *p)
{
    ncclNetProperties_v12_t q;
    ncclResult_t r = nd_tables_properties(dev, &q);
    if (r != ncclSuccess)
        return r;
    memset(p, 0, sizeof(*p));
    p->name = q.name;
    p->pciPath = q.pciPath;
    p->guid = q.guid;
    p->ptrSupport = q.ptrSupport;
    p->regIsGlobal = q.regIsGlobal;
    p->speed = q.speed;
    p->port = q.port;
    p->latency = q.latency;
    p->maxComms = q.maxComms;
    p->maxRecvs = q.maxRecvs;
    p->netDeviceType = q.netDeviceType;
    p->netDeviceVersion = q.netDeviceVersion;
    return ncclSuccess;
}

static ncclResult_t shim_listen(int dev, void *handle, void **listen_comm)
{
    switch (version) {
    case 9: return T9->listen(dev, handle, listen_comm);
    case 10: return T10->listen(dev, handle, listen_comm);
    case 11: return T11->listen(ctx, dev, handle, listen_comm);
    default: return T12->listen(ctx, dev, handle, listen_comm);
    }
}

static ncclResult_t shim_connect(int dev, void *handle, void **send_comm, ncclNetDeviceHandle_v8_t **dh)
{
    ncclNetCommConfig_v10_t config = { .trafficClass = traffic_class };
    switch (version) {
    case 9: return T9->connect(dev, handle, send_comm, dh);
    case 10: return T10->connect(dev, &config, handle, send_comm, dh);
    case 11: return T11->connect(ctx, dev, handle, send_comm, dh);
    default: return T12->connect(ctx, dev, handle, send_comm, dh);
    }
}

static ncclResult_t shim_isend(void *comm, void *data, int size, int tag, void *mh, void **req)
{
    if (size < 0)
        return ncclInvalidArgument;
    switch (version) {
    case 9: return T9->isend(comm, data, (size_t)size, tag, mh, req);
    case 10: return T10->isend(comm, data, (size_t)size, tag, mh, &phandle_token, req);
    case 11: return T11->isend(comm, data, (size_t)size, tag, mh, &phandle_token, req);
    default: return T12->isend(comm, data, (size_t)size, tag, mh, &phandle_token, req);
    }
}

static ncclResult_t shim_irecv(void *comm, int n, void **data, int *sizes, int *tags, void **mhs, void **req)
{
    size_t wide[ND_MAX_RECVS];
    void *ph[ND_MAX_RECVS];
    if (n < 1 || n > ND_MAX_RECVS)
        return ncclInvalidArgument;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0)
            return ncclInvalidArgument;
        wide[i] = (size_t)sizes[i];
        ph[i] = &phandle_token;
    }
    switch (version) {
    case 9: return T9->irecv(comm, n, data, wide, tags, mhs, req);
    case 10: return T10->irecv(comm, n, data, wide, tags, mhs, ph, req);
    case 11: return T11->irecv(comm, n, data, wide, tags, mhs, ph, req);
    default: return T12->irecv(comm, n, data, wide, tags, mhs, ph, req);
    }
}

ncclResult_t nd_tables_properties(int dev, ncclNetProperties_v12_t *q)
{
    memset(q, 0, sizeof(*q));
    q->maxMultiRequestSize = 1;
    q->railId = NCCL_NET_ID_UNDEF;
    q->planeId = NCCL_NET_ID_UNDEF;
    ncclResult_t r;
    if (version == 8) {
        ncclNetProperties_v8_t p;
        if ((r = ((const ncclNet_v8_t *)table)->getProperties(dev, &p)) != ncclSuccess)
            return r;
        q->name = p.name, q->pciPath = p.pciPath, q->guid = p.guid, q->ptrSupport = p.ptrSupport;
        q->regIsGlobal = p.regIsGlobal, q->speed = p.speed, q->port = p.port, q->latency = p.latency;
        q->maxComms = p.maxComms, q->maxRecvs = p.maxRecvs, q->netDeviceType = p.netDeviceType;
        q->netDeviceVersion = p.netDeviceVersion;
        q->vProps.ndevs = 1;
        q->vProps.devs[0] = dev;
        return ncclSuccess;
    }
    if (version == 12)
        return T12->getProperties(dev, q);
    /* v9 ... v11 share v9's layout up to maxCollBytes; v11 adds
     * maxMultiRequestSize */
    ncclNetProperties_v11_t p;
    memset(&p, 0, sizeof(p));
    p.maxMultiRequestSize = 1;
    if (version == 9)
        r = T9->getProperties(dev, (ncclNetProperties_v9_t *)&p);
    else if (version == 10)
        r = T10->getProperties(dev, (ncclNetProperties_v10_t *)&p);
    else
        r = T11->getProperties(dev, &p);
    if (r != ncclSuccess)
        return r;
    q->name = p.name, q->pciPath = p.pciPath, q->guid = p.guid, q->ptrSupport = p.ptrSupport;
    q->regIsGlobal = p.regIsGlobal, q->forceFlush = p.forceFlush, q->speed = p.speed, q->port = p.port;
    q->latency = p.latency, q->maxComms = p.maxComms, q->maxRecvs = p.maxRecvs;
    q->netDeviceType = p.netDeviceType, q->netDeviceVersion = p.netDeviceVersion;
    q->vProps.ndevs = p.vProps.ndevs;
    for (int i = 0; i < p.vProps.ndevs && i < NCCL_NET_MAX_DEVS_PER_NIC_V11; i++)
        q->vProps.devs[i] = p.vProps.devs[i];
    q->maxP2pBytes = p.maxP2pBytes;
    q->maxCollBytes = p.maxCollBytes;
    q->maxMultiRequestSize = p.maxMultiRequestSize;
    return ncclSuccess;
}

_Static_assert(offsetof(ncclNetProperties_v9_t, maxCollBytes) == offsetof(ncclNetProperties_v11_t, maxCollBytes) &&
                   offsetof(ncclNetProperties_v10_t, maxCollBytes) ==
                       offsetof(ncclNetProperties_v11_t, maxCollBytes),
               "v9 and v10 properties are v11's first fields");

static const struct plugin_table_kind *kind_of(int v)
{
    switch (v) {
    case 8: return &plugin_table_net_v8;
    case 9: return &plugin_table_net_v9;
    case 10: return &plugin_table_net_v10;
    case 11: return &plugin_table_net_v11;
    default: return &plugin_table_net_v12;
    }
}

static const char *want_name = PLUGIN_TABLES_NAME;

void nd_tables_set_name(const char *name)
{
    want_name = name;
}

const ncclNet_v8_t *nd_tables_open(const char *path, ncclDebugLogger_t logger, char *err, size_t errlen)
{
    static struct plugin_tables lib; /* stays loaded for the life of the process */
    const struct plugin_table_kind *kind = kind_of(version);
    if (want_name) {
        table = plugin_tables_load(&lib, path, kind, want_name, err, errlen);
    } else {
        /* another library's table may be filled in by its init (NVIDIA's
         * external IB plugin exports only its name and init): its entries
         * are checked after init, before any other call, as NCCL needs them */
        if (plugin_tables_open(&lib, path, err, errlen))
            return NULL;
        table = dlsym(lib.handle, kind->symbol);
        if (!table || !((const ncclNet_v8_t *)table)->init) {
            snprintf(err, errlen, "%s: exports no %s with an init", path, kind->symbol);
            plugin_tables_close(&lib);
            return NULL;
        }
    }
    if (!table)
        return NULL;
    ncclResult_t r;
    ncclNetCommConfig_v12_t config = { .trafficClass = traffic_class };
    switch (version) {
    case 8: r = ((const ncclNet_v8_t *)table)->init(logger); break;
    case 9: r = T9->init(logger); break;
    case 10: r = T10->init(logger, prof_callback); break;
    case 11: r = T11->init(&ctx, 0x7261696c6e6574ull, (ncclNetCommConfig_v11_t *)&config, logger, prof_callback); break;
    default: r = T12->init(&ctx, 0x7261696c6e6574ull, &config, logger, prof_callback); break;
    }
    if (r != ncclSuccess) {
        snprintf(err, errlen, "%s: init of ncclNetPlugin_v%d returned %d", path, version, (int)r);
        return NULL;
    }
    if (!want_name && !plugin_tables_get(&lib, kind, NULL, err, errlen)) {
        plugin_tables_close(&lib);
        return NULL;
    }
    if (version == 8)
        return table;
    /* the entries whose arguments do not change are v8's slots as they are */
    memcpy(&shape, table, sizeof(shape));
    shape.init = shim_init;
    shape.getProperties = shim_get_properties;
    shape.listen = shim_listen;
    shape.connect = shim_connect;
    shape.isend = shim_isend;
    shape.irecv = shim_irecv;
    return &shape;
}
