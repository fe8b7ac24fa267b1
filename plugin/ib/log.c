/* plugin/ib/log.c: the logger NCCL handed to init (see log.h). */
#include "log.h"

ncclDebugLogger_t rn_log_fn;

void log_set(ncclDebugLogger_t fn)
{
    __atomic_store_n(&rn_log_fn, fn, __ATOMIC_RELEASE);
}
