/* plugin/ib/log.h: the plugin's one logging and error-checking convention.
 *
 * Every line goes through the logger NCCL passes to init (subsystem flags
 * from nccl_net_v8.h), so it lands in NCCL_DEBUG output with NCCL's prefix.
 * Before init, or when a host program passes no logger, lines are dropped:
 * a library never writes to stdout/stderr on its own.
 *
 * Functions of the plugin return ncclResult_t; a function that fails logs
 * one WARN saying what failed, on which device, with which value, and what
 * to try. CHECK(call) passes a failure up (with an INFO line naming the call
 * and its place, the WARN having been logged where the failure happened). */
#ifndef RAILNET_IB_LOG_H
#define RAILNET_IB_LOG_H

#include <errno.h>
#include <string.h>

#include "nccl_net_v8.h"

extern ncclDebugLogger_t rn_log_fn;

/* Installs NCCL's logger (NULL: drop lines). */
void log_set(ncclDebugLogger_t fn);

#define RN_LOG(level, flags, ...)                                        \
    do {                                                                 \
        ncclDebugLogger_t fn_ = rn_log_fn;                               \
        if (fn_)                                                         \
            fn_((level), (flags), __FILE__, __LINE__, __VA_ARGS__);      \
    } while (0)

#define WARN(...) RN_LOG(NCCL_LOG_WARN, NCCL_ALL, __VA_ARGS__)
#define INFO(flags, ...) RN_LOG(NCCL_LOG_INFO, (flags), __VA_ARGS__)
#define TRACE(flags, ...) RN_LOG(NCCL_LOG_TRACE, (flags), __VA_ARGS__)

#define CHECK(call)                                                      \
    do {                                                                 \
        ncclResult_t res_ = (call);                                      \
        if (res_ != ncclSuccess) {                                       \
            INFO(NCCL_NET, "NET/railnet: %s failed: %d", #call, res_);   \
            return res_;                                                 \
        }                                                                \
    } while (0)

#endif
