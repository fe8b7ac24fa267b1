/* tests/gindriver/gd_tables.c: the table the driver speaks through. The
 * cases call a v11-shaped table (gd.h); --gin-version 12 loads
 * ncclGinPlugin_v12 and tools/common/gin_v12_as_v11.c adapts it: each call
 * converted as NCCL 2.29 makes it (connect with one connection and NCCL's
 * queue depth, --queue-depth, createContext with --contexts contexts,
 * connection 0 on every put);
 * --gin-version 14 loads ncclGinPlugin_v14 for setup and properties (it has
 * no puts). --rma-version 14 loads ncclRmaPlugin_v14 and --rma-version 13
 * ncclRmaPlugin_v13 (or, with --gin-version 13, ncclGinPlugin_v13): the RMA
 * cases (gd_rma.c) call it as NCCL 2.30.7 sees an RMA table (gd_rma, v14's
 * shape; a v13 one converted as NCCL's rma_v13.cc converts it), the setup
 * goes through the v11 shape as for the other tables. */
#include <stdio.h>
#include <string.h>

#include "gd.h"
#include "nccl_gin_v12.h"
#include "nccl_gin_v14.h"
#include "nccl_rma_v13.h"
#include "nccl_rma_v14.h"
#include "../../tools/common/gin_v12_as_v11.h"
#include "../../tools/common/plugin_tables.h"

int gd_gin_version = 11;
int gd_contexts = 1;
int gd_backend = 2;
int gd_queue_depth = 256;
int gd_rma_version;
const ncclRma_v14_t *gd_rma;

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
    ncclGinConfig_v14_t cfg = { nsig, ncnt, gd_contexts, gd_queue_depth, -1, gd_backend, 1 };
    return v14->createContext(coll, &cfg, ctx, dh);
}

void gd_print_gin_properties(void)
{
    ncclGinProperties_v14_t g;
    if (v14 && v14->getGinProperties(&g) == ncclSuccess)
        printf("ginProperties: strongSignals=%d vaSignals=%d\n", g.supportsStrongSignals, g.supportsVASignals);
}

static ncclGin_v11_t adapted;

/* ------------------------------------------------------------ RMA tables */

static const ncclRma_v13_t *v13;
static ncclRma_v14_t rma_from_v13;

static ncclResult_t v13_create_context(void *coll, ncclRmaConfig_v14_t *cfg, void **ctx)
{
    /* NCCL 2.30.7's RMA v13 adapter: no signals, counters or queue depth,
     * no rank stride, a device handle asked for and ignored; 2.30.4's GIN
     * proxy asks for none (NULL) */
    ncclNetDeviceHandle_v11_t *dh = NULL;
    if (!cfg) /* rma-bad: a missing config reaches the plugin as such */
        return v13->createContext(coll, NULL, ctx, &dh);
    ncclGinConfig_v13_t c = { 0, 0, cfg->nContexts, 0, cfg->trafficClass };
    return v13->createContext(coll, &c, ctx, gd_gin_version == 13 ? NULL : &dh);
}

static ncclResult_t v13_reg_mr_sym(void *coll, void *data, size_t size, int type, uint64_t flags, void **mh)
{
    void *unused;
    return v13->regMrSym(coll, data, size, type, flags, mh, &unused);
}

static ncclResult_t v13_reg_mr_sym_dmabuf(void *coll, void *data, size_t size, int type, uint64_t off, int fd,
                                          uint64_t flags, void **mh)
{
    void *unused;
    return v13->regMrSymDmaBuf(coll, data, size, type, off, fd, flags, mh, &unused);
}

static ncclResult_t v13_iput_signal(void *ctx, int context, uint64_t so, void *smh, size_t size, uint64_t d,
                                    void *dmh, uint32_t rank, uint64_t sigoff, void *sigmh, uint64_t val, uint32_t op,
                                    bool strong, void **req)
{
    (void)strong; /* v13's signals are all strong */
    return v13->iputSignal(ctx, context, so, smh, size, d, dmh, rank, sigoff, sigmh, val, op, req);
}

static ncclResult_t rma_get_properties(int dev, ncclNetProperties_v11_t *p)
{
    ncclNetProperties_v12_t q;
    ncclResult_t e = gd_rma->getProperties(dev, &q);
    if (e != ncclSuccess)
        return e;
    memset(p, 0, sizeof(*p));
    p->name = q.name, p->pciPath = q.pciPath, p->guid = q.guid, p->ptrSupport = q.ptrSupport;
    p->maxRecvs = q.maxRecvs, p->netDeviceType = q.netDeviceType, p->netDeviceVersion = q.netDeviceVersion;
    p->vProps.ndevs = q.vProps.ndevs;
    return ncclSuccess;
}

static ncclResult_t rma_reg_mr_sym(void *coll, void *data, size_t size, int type, uint64_t flags, void **mh,
                                   void **gh)
{
    ncclResult_t e = gd_rma->regMrSym(coll, data, size, type, flags, mh);
    *gh = *mh;
    return e;
}

static const ncclGin_v11_t *load_rma(struct plugin_tables *lib, const char *plugin, char *err, size_t errlen)
{
    if (gd_rma_version == 14) {
        gd_rma = plugin_tables_load(lib, plugin, &plugin_table_rma_v14, PLUGIN_TABLES_NAME, err, errlen);
    } else {
        v13 = plugin_tables_load(lib, plugin, gd_gin_version == 13 ? &plugin_table_gin_v13 : &plugin_table_rma_v13,
                                 PLUGIN_TABLES_NAME, err, errlen);
        if (v13) {
            rma_from_v13 = (ncclRma_v14_t){
                .name = v13->name, .init = v13->init, .devices = v13->devices,
                .getProperties = v13->getProperties, .listen = v13->listen, .connect = v13->connect,
                .createContext = v13_create_context, .regMrSym = v13_reg_mr_sym,
                .regMrSymDmaBuf = v13_reg_mr_sym_dmabuf, .deregMrSym = v13->deregMrSym,
                .destroyContext = v13->destroyContext, .closeColl = v13->closeColl,
                .closeListen = v13->closeListen, .iput = v13->iput, .iputSignal = v13_iput_signal,
                .iget = v13->iget, .iflush = v13->iflush, .test = v13->test, .rmaProgress = v13->ginProgress,
                .queryLastError = v13->queryLastError, .finalize = v13->finalize,
            };
            gd_rma = &rma_from_v13;
        }
    }
    if (!gd_rma)
        return NULL;
    /* the setup the rank processes share with the GIN cases */
    memset(&adapted, 0, sizeof(adapted));
    adapted.name = gd_rma->name;
    adapted.init = gd_rma->init;
    adapted.devices = gd_rma->devices;
    adapted.getProperties = rma_get_properties;
    adapted.listen = gd_rma->listen;
    adapted.connect = gd_rma->connect;
    adapted.regMrSym = rma_reg_mr_sym;
    adapted.deregMrSym = gd_rma->deregMrSym;
    adapted.closeColl = gd_rma->closeColl;
    adapted.closeListen = gd_rma->closeListen;
    adapted.test = gd_rma->test;
    adapted.finalize = gd_rma->finalize;
    return &adapted;
}

const ncclGin_v11_t *gd_load_gin(struct plugin_tables *lib, const char *plugin, char *err, size_t errlen)
{
    if (gd_rma_version)
        return load_rma(lib, plugin, err, errlen);
    if (gd_gin_version == 11)
        return plugin_tables_load(lib, plugin, &plugin_table_gin_v11, PLUGIN_TABLES_NAME, err, errlen);
    if (gd_gin_version == 12) {
        const ncclGin_v12_t *v12 = plugin_tables_load(lib, plugin, &plugin_table_gin_v12, PLUGIN_TABLES_NAME, err,
                                                      errlen);
        return v12 ? gin_v12_as_v11(v12, &gd_queue_depth, &gd_contexts) : NULL;
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
