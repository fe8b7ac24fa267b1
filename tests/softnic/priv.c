/* priv.c: the companion API of softnic_priv.h (SOFTNIC_PRIVATE_1.0). */
#include "softnic.h"
#include "softnic_priv.h"

#include <stdatomic.h>

#define EXPORT __attribute__((visibility("default")))

static _Atomic(softnic_priv_qp_hook) qp_hook;
static _Atomic(softnic_priv_cq_hook) cq_hook;

EXPORT bool softnic_priv_is_softnic(struct ibv_context *ctx)
{
    /* This library opens softnic devices only (see verbs.c). */
    return ctx != NULL;
}

EXPORT int softnic_priv_set_destroy_hook(softnic_priv_qp_hook qp_gone, softnic_priv_cq_hook cq_gone)
{
    atomic_store(&qp_hook, qp_gone);
    atomic_store(&cq_hook, cq_gone);
    return 0;
}

void priv_qp_destroying(struct ibv_qp *qp)
{
    softnic_priv_qp_hook h = atomic_load(&qp_hook);
    if (h)
        h(qp);
}

void priv_cq_destroying(struct ibv_cq *cq)
{
    softnic_priv_cq_hook h = atomic_load(&cq_hook);
    if (h)
        h(cq);
}
