/* include/nccl_profiler_net.h: railnet's own statement of what a network
 * plugin hands NCCL's profiler (net tables v10 and later).
 *
 * Written from NCCL 2.30's sources (nccl_common.h's callback type,
 * nccl_profiler.h's plugin-id bits, plugin/profiler/net_ib_v1.h's event
 * layout), not copied. NCCL passes the callback to the plugin's init; the
 * plugin calls it to start and stop events, handing NCCL the phandle NCCL
 * gave isend/irecv, a plugin id (transport type | layout version) and a
 * pointer to a descriptor of that layout. NCCL forwards the descriptor to
 * the profiler plugin, which decodes it by the id. railnet speaks the layout
 * of NCCL's own IB transport (version 1), so profilers that know IB events
 * understand railnet's. */
#ifndef RAILNET_NCCL_PROFILER_NET_H
#define RAILNET_NCCL_PROFILER_NET_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_net_v8.h"

/* The callback's `type` argument. */
enum {
    ncclProfilerNetEventStart = 0,
    ncclProfilerNetEventStop = 1,
    ncclProfilerNetEventUpdate = 2,
    ncclProfilerNetEventUpdateAndStop = 3,
};

/* eHandle: where NCCL keeps (start) or finds (stop, update) the event;
 * pHandle: the phandle of the isend/irecv the event belongs to (start
 * only); pluginId: NCCL_PROFILER_NET_TYPE_* | layout version; extData: the
 * descriptor (start, update). */
typedef ncclResult_t (*ncclProfilerCallback_t)(void **eHandle, int type, void *pHandle, int64_t pluginId,
                                               void *extData);

/* The plugin id: transport type in the bits above 16, the descriptor's
 * layout version below. */
#define NCCL_PROFILER_NET_VER_BITS 16
#define NCCL_PROFILER_NET_TYPE_IB (1u << NCCL_PROFILER_NET_VER_BITS)
#define NCCL_PROFILER_NET_TYPE_SOCK (2u << NCCL_PROFILER_NET_VER_BITS)
#define NCCL_PROFILER_NET_IB_VER 1

/* Event types of the IB layout, version 1. */
#define ncclProfileQp (1 << 0)

/* One work request on one QP (IB layout, version 1). */
typedef struct {
    uint8_t type; /* ncclProfileQp */
    union {
        struct {
            int device;     /* the plugin's device index */
            uint64_t wr_id;
            int opcode;     /* enum ibv_wr_opcode of the work request */
            int qpNum;
            size_t length;  /* bytes the work request moves */
        } qp;
    };
} ncclProfilerNetIbDescr_v1_t;

#if defined(__x86_64__)
#ifdef __cplusplus
#define RN_ABI_ASSERT(e, m) static_assert(e, m)
#else
#define RN_ABI_ASSERT(e, m) _Static_assert(e, m)
#endif
RN_ABI_ASSERT(sizeof(ncclProfilerNetIbDescr_v1_t) == 40, "IB event v1 size");
RN_ABI_ASSERT(offsetof(ncclProfilerNetIbDescr_v1_t, qp) == 8, "IB event v1: qp");
RN_ABI_ASSERT(offsetof(ncclProfilerNetIbDescr_v1_t, qp.device) == 8, "IB event v1: qp.device");
RN_ABI_ASSERT(offsetof(ncclProfilerNetIbDescr_v1_t, qp.wr_id) == 16, "IB event v1: qp.wr_id");
RN_ABI_ASSERT(offsetof(ncclProfilerNetIbDescr_v1_t, qp.opcode) == 24, "IB event v1: qp.opcode");
RN_ABI_ASSERT(offsetof(ncclProfilerNetIbDescr_v1_t, qp.qpNum) == 28, "IB event v1: qp.qpNum");
RN_ABI_ASSERT(offsetof(ncclProfilerNetIbDescr_v1_t, qp.length) == 32, "IB event v1: qp.length");
#undef RN_ABI_ASSERT
#endif

#endif
