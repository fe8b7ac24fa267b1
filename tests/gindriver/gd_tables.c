/* tests/gindriver/gd_tables.c: the table the driver speaks through. The
 * cases call a v11-shaped table (gd.h); --gin-version 12 loads
 * ncclGinPlugin_v12 and this file adapts it: each call converted as NCCL
 * 2.29 makes it (connect with one connection and NCCL's queue depth,
 * createContext with one context, connection 0 on every put);
 * --gin-version 14 loads ncclGinPlugin_v14 for setup and properties (it has
 * no puts). */
#include <stdio.h>
#include <string.h>

#include "gd.h"
#include "nccl_gin_v12.h"
#include "nccl_gin_v14.h"
#include "../../tools/common/plugin_tables.h"

int gd_gin_version = 11;

static const ncclGin_v12_t *v12;

static ncclResult_t v12_connect(void *ctx, void *handles[], int nranks, int rank, void *listen, void **coll)
{
    return v12->connect(ctx, handles, nranks, rank, 1, 256, listen, coll);
}

static ncclResult_t v12_create_context(void *coll, int nsig, int ncnt, void **ctx, ncclNetDeviceHandle_v11_t **dh)
{
    return v12->createContext(coll, nsig, ncnt, 1, ctx, dh);
}

static ncclResult_t v12_iput(void *coll, uint64_t so, void *smh, size_t size, uint64_t d, void *dmh, uint32_t rank,
                             void **req)
{
    return v12->iput(coll, so, smh, size, d, dmh, rank, 0, req);
}

static ncclResult_t v12_iput_signal(void *coll, uint64_t so, void *smh, size_t size, uint64_t d, void *dmh,
                                    uint32_t rank, uint64_t sigoff, void *sigmh, uint64_t val, uint32_t op, void **req)
{
    return v12->iputSignal(coll, so, smh, size, d, dmh, rank, sigoff, sigmh, val, op, 0, req);
}

static const ncclGin_v14_t *v14;

static ncclResult_t v14_get_properties(int dev, ncclNetProperties_v11_t *p)
{
    ncclNetProperties_v12_t q;
    ncclResult_t e = v14->getProperties(dev, &q);
    if (e != ncclSuccess)
        return e;
    memset(p, 0, sizeof(*p));
    p->name = q.name, p->pciPath = q.pciPath, p->guid = q.guid, p->ptrSupport = q.ptrSupport;
    p->maxRecvs = q.maxRecvs, p->netDeviceType = q.netDeviceType, p->netDeviceVersion = q.netDeviceVersion;
    p->vProps.ndevs = q.vProps.ndevs;
    return ncclSuccess;
}

static ncclResult_t v14_create_context(void *coll, int nsig, int ncnt, void **ctx, ncclNetDeviceHandle_v11_t **dh)
{
    ncclGinConfig_v14_t cfg = { nsig, ncnt, 1, 256, -1, 0, 1 };
    return v14->createContext(coll, &cfg, ctx, dh);
}

void gd_print_gin_properties(void)
{
    ncclGinProperties_v14_t g;
    if (v14 && v14->getGinProperties(&g) == ncclSuccess)
        printf("ginProperties: strongSignals=%d vaSignals=%d\n", g.supportsStrongSignals, g.supportsVASignals);
}

static ncclGin_v11_t adapted;

const ncclGin_v11_t *gd_load_gin(struct plugin_tables *lib, const char *plugin, char *err, size_t errlen)
{
    if (gd_gin_version == 11)
        return plugin_tables_load(lib, plugin, &plugin_table_gin_v11, PLUGIN_TABLES_NAME, err, errlen);
    if (gd_gin_version == 12) {
        v12 = plugin_tables_load(lib, plugin, &plugin_table_gin_v12, PLUGIN_TABLES_NAME, err, errlen);
        if (!v12)
            return NULL;
        _Static_assert(sizeof(adapted) == sizeof(*v12), "v12 keeps v11's entries");
        memcpy(&adapted, v12, sizeof(adapted)); /* the entries whose arguments did not change */
        adapted.connect = v12_connect;
        adapted.createContext = v12_create_context;
        adapted.iput = v12_iput;
        adapted.iputSignal = v12_iput_signal;
        return &adapted;
    }
    if (gd_gin_version == 14) {
        /* setup and properties only: v14 has no data path (NCCL 2.30 puts through an RMA table) */
        v14 = plugin_tables_load(lib, plugin, &plugin_table_gin_v14, PLUGIN_TABLES_NAME, err, errlen);
        if (!v14)
            return NULL;
        memset(&adapted, 0, sizeof(adapted));
        adapted.name = v14->name;
        adapted.init = v14->init;
        adapted.devices = v14->devices;
        adapted.getProperties = v14_get_properties;
        adapted.listen = v14->listen;
        adapted.connect = v14->connect;
        adapted.createContext = v14_create_context;
        adapted.regMrSym = v14->regMrSym;
        adapted.regMrSymDmaBuf = v14->regMrSymDmaBuf;
        adapted.deregMrSym = v14->deregMrSym;
        adapted.destroyContext = v14->destroyContext;
        adapted.closeColl = v14->closeColl;
        adapted.closeListen = v14->closeListen;
        adapted.queryLastError = v14->queryLastError;
        adapted.finalize = v14->finalize;
        return &adapted;
    }
    snprintf(err, errlen, "GIN table version %d is not driven by gindriver", gd_gin_version);
    return NULL;
}
