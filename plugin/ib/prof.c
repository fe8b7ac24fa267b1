/* plugin/ib/prof.c: network events for NCCL's profiler (prof.h). */
#include "prof.h"

#include <string.h>

static ncclProfilerCallback_t prof_fn;

void prof_set(ncclProfilerCallback_t fn)
{
    __atomic_store_n(&prof_fn, fn, __ATOMIC_RELEASE);
}

void prof_start_qp(void **ev, uint8_t *started, void *phandle, int dev, uint64_t wr_id, int opcode, uint32_t qp_num,
                   size_t length)
{
    *ev = NULL;
    ncclProfilerCallback_t fn = __atomic_load_n(&prof_fn, __ATOMIC_ACQUIRE);
    if (!fn || !phandle || *started >= PROF_EVENTS_PER_REQ)
        return;
    ++*started;
    ncclProfilerNetIbDescr_v1_t d;
    memset(&d, 0, sizeof(d));
    d.type = ncclProfileQp;
    d.qp.device = dev;
    d.qp.wr_id = wr_id;
    d.qp.opcode = opcode;
    d.qp.qpNum = (int)qp_num;
    d.qp.length = length;
    /* NCCL copies the descriptor while starting the event; a failing
     * profiler must not fail the data path: its answer is not looked at */
    (void)fn(ev, ncclProfilerNetEventStart, phandle, (int64_t)(NCCL_PROFILER_NET_TYPE_IB | NCCL_PROFILER_NET_IB_VER),
             &d);
}

void prof_stop(void **ev)
{
    if (!*ev)
        return;
    ncclProfilerCallback_t fn = __atomic_load_n(&prof_fn, __ATOMIC_ACQUIRE);
    if (fn)
        (void)fn(ev, ncclProfilerNetEventStop, NULL, 0, NULL);
    *ev = NULL;
}
