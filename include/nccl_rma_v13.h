/* include/nccl_rma_v13.h: railnet's own statement of NCCL 2.30's RMA plugin
 * table v13, `ncclRma_v13_t`: the GIN v13 table's layout under another
 * name (include/nccl_gin_v13.h says how NCCL 2.30.3 ... 2.30.7 use it).
 * Exported as ncclRmaPlugin_v13. Written out from NCCL 2.30.7's
 * src/include/plugin/rma/rma_v13.h (a typedef of ncclGin_v13_t), not
 * copied. */
#ifndef RAILNET_NCCL_RMA_V13_H
#define RAILNET_NCCL_RMA_V13_H

#include "nccl_gin_v13.h"

typedef ncclGin_v13_t ncclRma_v13_t;

#if defined(__x86_64__)
_Static_assert(sizeof(ncclRma_v13_t) == 21 * 8, "rma v13: 1 name + 20 function pointers");
_Static_assert(offsetof(ncclRma_v13_t, createContext) == 48, "rma v13: createContext");
_Static_assert(offsetof(ncclRma_v13_t, regMrSym) == 56, "rma v13: regMrSym");
_Static_assert(offsetof(ncclRma_v13_t, destroyContext) == 80, "rma v13: destroyContext");
_Static_assert(offsetof(ncclRma_v13_t, iput) == 104, "rma v13: iput");
_Static_assert(offsetof(ncclRma_v13_t, iputSignal) == 112, "rma v13: iputSignal");
_Static_assert(offsetof(ncclRma_v13_t, iget) == 120, "rma v13: iget");
_Static_assert(offsetof(ncclRma_v13_t, iflush) == 128, "rma v13: iflush");
_Static_assert(offsetof(ncclRma_v13_t, test) == 136, "rma v13: test");
_Static_assert(offsetof(ncclRma_v13_t, ginProgress) == 144, "rma v13: ginProgress (rmaProgress in NCCL's v14 view)");
_Static_assert(offsetof(ncclRma_v13_t, queryLastError) == 152, "rma v13: queryLastError");
_Static_assert(offsetof(ncclRma_v13_t, finalize) == 160, "rma v13: finalize");
#endif

#endif
