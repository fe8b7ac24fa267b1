/* pd.c: protection domains.  A PD only scopes keys: mr.c checks that the
 * MR behind a key belongs to the PD of the QP using it. */
#include "softnic.h"

#include <errno.h>
#include <stdlib.h>

struct ibv_pd *pd_alloc(struct ibv_context *c)
{
    struct sn_pd *pd = calloc(1, sizeof(*pd));
    if (!pd) {
        errno = ENOMEM;
        return NULL;
    }
    pd->ibpd.context = c;
    static _Atomic uint32_t next_handle = 1;
    pd->ibpd.handle = atomic_fetch_add(&next_handle, 1);
    return &pd->ibpd;
}

void pd_use(struct ibv_pd *pd, int delta)
{
    atomic_fetch_add(&((struct sn_pd *)pd)->users, delta);
}

/* As the kernel does: a PD that still has MRs, QPs or SRQs stays. */
int pd_dealloc(struct ibv_pd *ibpd)
{
    struct sn_pd *pd = (struct sn_pd *)ibpd;
    if (atomic_load(&pd->users) > 0)
        return EBUSY;
    free(pd);
    return 0;
}
