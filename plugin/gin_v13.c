/* plugin/gin_v13.c: `ncclGinPlugin_v13` (include/nccl_gin_v13.h).
 *  - NCCL 2.30.3 and 2.30.4 look it up first: a table of the proxy type
 *    gets NCCL's GIN proxy layered over it, which drives its host-initiated
 *    ops (puts, signals, gets, flushes on a context index) as the RMA
 *    tables' are driven: the same entries as ncclRmaPlugin_v13 (rma_v13.c);
 *  - NCCL 2.30.7 reads it only without ncclGinPlugin_v14 (which railnet
 *    exports), takes its setup and properties and skips it as an external
 *    GIN proxy; it also takes it as an RMA v13 table where a library has no
 *    ncclRmaPlugin_v13, which the same entries serve.
 * The proxy type whatever RAILNET_GIN says: NCCL 2.30's GDAKI layout is
 * not railnet's (gin_gdaki_type.c); said once, naming this table. */
#include "gin/gin.h"
#include "gin_face.h"
#include "nccl_gin_v13.h"

static ncclResult_t get_properties_v13(int dev, ncclNetProperties_v12_t *props)
{
    return gin_get_properties_proxy_v12(dev, props, "ncclGinPlugin_v13");
}

RN_EXPORT const ncclGin_v13_t ncclGinPlugin_v13 = FACE_V13_TABLE(get_properties_v13);
