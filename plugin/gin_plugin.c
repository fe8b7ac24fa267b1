/* plugin/gin_plugin.c: the GIN face of railnet, `ncclGinPlugin_v11`
 * (include/nccl_gin_v11.h), exported beside the net tables (v8 ... v12), and
 * the part every GIN and RMA face shares (gin_face.h). It maps the
 * table onto the GIN core (plugin/gin/) and the shared device layer
 * (plugin/ib/) and decides, from RAILNET_GIN, which GIN type NCCL gets
 * (plugin/gin/gin_gdaki.h states the rules; said once in the log, at the
 * first getProperties):
 *   auto  - the GDAKI type where gdaki would get it with a GPU, else the
 *           proxy type (the reason logged, no WARN);
 *   proxy - the proxy type;
 *   gdaki - the GDAKI type when NCCL's device code expects railnet's layout
 *           version, the device opens for DEVX and a GPU is there; else a
 *           WARN saying why, and the proxy type;
 *   off   - init fails, so NCCL has no GIN (nor RMA: the RMA tables share
 *           init) from railnet. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gin/gin.h"
#include "gin/gin_gdaki.h"
#include "ib/config.h"
#include "ib/devices.h"
#include "ib/log.h"
#include "ib/mr.h"
#include "gin_face.h"
#include "nccl_gin_v11.h"

#define GIN_INSTANCE_MAGIC 0x49474e52u

struct gin_instance {
    uint32_t magic;
    uint64_t comm_id;
    unsigned nlisten;   /* listens made on this context (atomic) */
};

static pthread_mutex_t type_mu = PTHREAD_MUTEX_INITIALIZER;
static int gin_type = -1;   /* decided at the first getProperties */

/* The GIN type of this process, decided once (on the first device asked
 * about) and logged once. */
static int gin_decide_type(int dev)
{
    pthread_mutex_lock(&type_mu);
    if (gin_type < 0) {
        struct gin_gdaki_probe p;
        gin_gdaki_probe_fill(dev, &p);
        char why[512];
        int mismatch = 0;
        gin_type = gin_gdaki_choose(&p, &mismatch, why, sizeof(why));
        if (gin_type == NCCL_NET_DEVICE_GIN_GDAKI)
            INFO(NCCL_INIT | NCCL_NET, "NET/railnet/GIN: offering the GDAKI type (%s)", why);
        else if (p.mode == RN_GIN_GDAKI)
            WARN("NET/railnet/GIN: %s", why);
        else
            INFO(NCCL_INIT | NCCL_NET, "NET/railnet/GIN: offering the proxy type (%s)", why);
        gin_gdaki_set_offered(gin_type == NCCL_NET_DEVICE_GIN_GDAKI ? gin_gdaki_layout_of(&p) : 0);
    }
    int t = gin_type;
    pthread_mutex_unlock(&type_mu);
    return t;
}

ncclResult_t gin_init(void **ctx, uint64_t comm_id, ncclDebugLogger_t logger)
{
    if (ctx)
        *ctx = NULL;
    log_set(logger);
    config_load();
    int mode = rn_config()->gin;
    if (mode == RN_GIN_OFF) {
        INFO(NCCL_INIT | NCCL_NET, "NET/railnet/GIN: RAILNET_GIN=off: railnet offers NCCL no GIN (nor RMA)");
        return ncclInvalidUsage;
    }
    CHECK(devices_init(mr_probe_gpu));
    struct gin_instance *g = calloc(1, sizeof(*g));
    if (!g)
        return ncclSystemError;
    g->magic = GIN_INSTANCE_MAGIC;
    g->comm_id = comm_id;
    if (ctx)
        *ctx = g;
    else
        free(g);
    return ncclSuccess;
}

ncclResult_t gin_finalize(void *ctx)
{
    struct gin_instance *g = ctx;
    if (!g)
        return ncclSuccess;
    if (g->magic != GIN_INSTANCE_MAGIC) {
        WARN("NET/railnet/GIN: finalize: %p is not a context of this plugin's init", ctx);
        return ncclInvalidArgument;
    }
    g->magic = 0;
    free(g);
    return ncclSuccess;
}

ncclResult_t gin_devices(int *ndev)
{
    if (!ndev)
        return ncclInvalidArgument;
    *ndev = devices_count_physical(); /* virtual devices are the net tables' (makeVDevice) */
    return ncclSuccess;
}

/* type < 0: the one this process offers (gin_decide_type); ids, when not
 * NULL, receives the device's rail and plane (v11's properties lack them) */
static ncclResult_t props_of(int dev, ncclNetProperties_v11_t *props, int type, int ids[2])
{
    if (!props)
        return ncclInvalidArgument;
    struct devices_props c;
    if (dev >= devices_count_physical()) {
        WARN("NET/railnet/GIN: getProperties: no device %d (%d devices)", dev, devices_count_physical());
        return ncclInvalidArgument;
    }
    CHECK(devices_properties(dev, &c));
    memset(props, 0, sizeof(*props));
    props->name = (char *)c.name;
    props->pciPath = c.pci_path;
    props->guid = c.guid;
    props->ptrSupport = c.ptr_support;
    props->regIsGlobal = c.reg_is_global;
    props->speed = c.speed_mbps;
    props->port = c.port;
    props->latency = c.latency_us;
    props->maxComms = c.max_comms;
    props->maxRecvs = GIN_MAX_RECVS; /* NCCL sizes its proxy queue per rank as 32 * maxRecvs */
    props->netDeviceType = type < 0 ? gin_decide_type(dev) : type;
    props->netDeviceVersion = props->netDeviceType == NCCL_NET_DEVICE_GIN_GDAKI ? gin_gdaki_offered() : 0;
    props->vProps.ndevs = 1;
    props->vProps.devs[0] = dev;
    props->maxP2pBytes = GIN_MAX_PUT - 1;
    props->maxCollBytes = GIN_MAX_PUT - 1;
    props->maxMultiRequestSize = 1;
    if (ids) {
        ids[0] = c.rail_id;
        ids[1] = c.plane_id;
    }
    return ncclSuccess;
}

ncclResult_t gin_get_properties(int dev, ncclNetProperties_v11_t *props)
{
    return props_of(dev, props, -1, NULL);
}

static pthread_once_t proxy_only_once = PTHREAD_ONCE_INIT;
static const char *proxy_only_table;

static void proxy_only_say(void)
{
    INFO(NCCL_INIT | NCCL_NET, "NET/railnet/GIN: %s offers the proxy type only: its createContext does not say "
                               "which GDAKI context the kernels read (GIN v14's backendVersion does)",
         proxy_only_table);
}

/* type < 0: the one this process offers */
static ncclResult_t props_v12_of(int dev, ncclNetProperties_v12_t *props, int type)
{
    if (!props)
        return ncclInvalidArgument;
    ncclNetProperties_v11_t p;
    int ids[2];
    ncclResult_t e = props_of(dev, &p, type, ids);
    if (e != ncclSuccess)
        return e;
    memset(props, 0, sizeof(*props));
    props->name = p.name;
    props->pciPath = p.pciPath;
    props->guid = p.guid;
    props->ptrSupport = p.ptrSupport;
    props->regIsGlobal = p.regIsGlobal;
    props->speed = p.speed;
    props->port = p.port;
    props->latency = p.latency;
    props->maxComms = p.maxComms;
    props->maxRecvs = p.maxRecvs;
    props->netDeviceType = p.netDeviceType;
    props->netDeviceVersion = p.netDeviceVersion;
    props->vProps.ndevs = 1;
    props->vProps.devs[0] = dev;
    props->maxP2pBytes = p.maxP2pBytes;
    props->maxCollBytes = p.maxCollBytes;
    props->maxMultiRequestSize = 1;
    props->railId = (int16_t)ids[0]; /* the net tables' values (RAILNET_HCA) */
    props->planeId = (int16_t)ids[1];
    return ncclSuccess;
}

ncclResult_t gin_get_properties_v12(int dev, ncclNetProperties_v12_t *props)
{
    return props_v12_of(dev, props, -1);
}

ncclResult_t gin_get_properties_proxy_v12(int dev, ncclNetProperties_v12_t *props, const char *table)
{
    if (table) {
        proxy_only_table = table;
        pthread_once(&proxy_only_once, proxy_only_say);
    }
    return props_v12_of(dev, props, NCCL_NET_DEVICE_GIN_PROXY);
}

ncclResult_t gin_listen_face(void *ctx, int dev, void *handle, void **listen_comm)
{
    if (!handle || !listen_comm)
        return ncclInvalidArgument;
    /* NCCL listens with the communicator's init context: its id groups the
     * collComms (one per GIN context) of one communicator. */
    struct gin_instance *g = ctx;
    int mine = g && g->magic == GIN_INSTANCE_MAGIC;
    unsigned ordinal = mine ? __atomic_fetch_add(&g->nlisten, 1, __ATOMIC_RELAXED) : 0;
    return gin_listen(dev, mine ? g->comm_id : 0, ordinal, handle, listen_comm);
}

ncclResult_t gin_connect_face(void *ctx, void *handles[], int nranks, int rank, void *listen_comm,
                                     void **coll_comm)
{
    (void)ctx; /* NCCL passes another init's context here than to listen */
    if (!coll_comm)
        return ncclInvalidArgument;
    /* the type NCCL was offered at getProperties, decided before: a GDAKI
     * collComm gets no proxy QPs */
    return gin_connect(handles, nranks, rank, listen_comm, gin_gdaki_offered(), coll_comm);
}

ncclResult_t gin_connect_proxy_face(void *ctx, void *handles[], int nranks, int rank, void *listen_comm,
                                    void **coll_comm)
{
    (void)ctx;
    if (!coll_comm)
        return ncclInvalidArgument;
    return gin_connect(handles, nranks, rank, listen_comm, 0, coll_comm);
}

ncclResult_t gin_reg_mr_sym_face(void *coll_comm, void *data, size_t size, int type, uint64_t flags,
                                        void **mhandle, void **gin_handle)
{
    return gin_reg_mr_sym(coll_comm, data, size, type, 0, -1, flags, mhandle, gin_handle);
}

ncclResult_t gin_reg_mr_sym_dmabuf_face(void *coll_comm, void *data, size_t size, int type, uint64_t offset,
                                               int fd, uint64_t flags, void **mhandle, void **gin_handle)
{
    return gin_reg_mr_sym(coll_comm, data, size, type, offset, fd, flags, mhandle, gin_handle);
}

/* NCCL 2.28's device code reads one context */
static ncclResult_t create_context_v11(void *coll_comm, int nsignals, int ncounters, void **gin_ctx,
                                       ncclNetDeviceHandle_v11_t **dev_handle)
{
    return gin_create_context(coll_comm, nsignals, ncounters, 1, -1, 0, gin_ctx, dev_handle);
}

RN_EXPORT const ncclGin_v11_t ncclGinPlugin_v11 = {
    .name = "railnet",
    .init = gin_init,
    .devices = gin_devices,
    .getProperties = gin_get_properties,
    .listen = gin_listen_face,
    .connect = gin_connect_face,
    .createContext = create_context_v11,
    .regMrSym = gin_reg_mr_sym_face,
    .regMrSymDmaBuf = gin_reg_mr_sym_dmabuf_face,
    .deregMrSym = gin_dereg_mr_sym,
    .destroyContext = gin_destroy_context,
    .closeColl = gin_close_coll,
    .closeListen = gin_close_listen,
    .iput = gin_iput,
    .iputSignal = gin_iput_signal,
    .test = gin_test,
    .ginProgress = gin_progress,
    .queryLastError = gin_query_last_error,
    .finalize = gin_finalize,
};
