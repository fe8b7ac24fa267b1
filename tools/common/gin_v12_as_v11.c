/* tools/common/gin_v12_as_v11.c: ncclGinPlugin_v12 in v11's shape
 * (gin_v12_as_v11.h). */
#include "gin_v12_as_v11.h"

#include <string.h>

static const ncclGin_v12_t *v12;
static const int *v12_depth, *v12_contexts;
static ncclGin_v11_t adapted;

static ncclResult_t v12_connect(void *ctx, void *handles[], int nranks, int rank, void *listen, void **coll)
{
    return v12->connect(ctx, handles, nranks, rank, 1, *v12_depth, listen, coll);
}

static ncclResult_t v12_create_context(void *coll, int nsig, int ncnt, void **ctx, ncclNetDeviceHandle_v11_t **dh)
{
    return v12->createContext(coll, nsig, ncnt, *v12_contexts, ctx, dh);
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

const ncclGin_v11_t *gin_v12_as_v11(const ncclGin_v12_t *table, const int *queue_depth, const int *contexts)
{
    v12 = table;
    v12_depth = queue_depth;
    v12_contexts = contexts;
    _Static_assert(sizeof(adapted) == sizeof(*table), "v12 keeps v11's entries");
    memcpy(&adapted, table, sizeof(adapted)); /* the entries whose arguments did not change */
    adapted.connect = v12_connect;
    adapted.createContext = v12_create_context;
    adapted.iput = v12_iput;
    adapted.iputSignal = v12_iput_signal;
    return &adapted;
}
