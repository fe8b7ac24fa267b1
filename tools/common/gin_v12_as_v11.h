/* tools/common/gin_v12_as_v11.h: a loaded ncclGinPlugin_v12 seen through
 * ncclGinPlugin_v11's shape, every call converted as NCCL 2.29 makes it:
 * connect with one connection and a queue depth, createContext with a
 * number of contexts, connection 0 on every put. For the programs that
 * drive GIN through v11-shaped code (tests/gindriver, bench/scale_bench).
 * The queue depth and the number of contexts are read at each connect and
 * createContext from where the caller keeps them (a driver's case may set
 * them after loading). One adapted table a process: a second call replaces
 * the first. */
#ifndef RAILNET_TOOLS_GIN_V12_AS_V11_H
#define RAILNET_TOOLS_GIN_V12_AS_V11_H

#include "nccl_gin_v11.h"
#include "nccl_gin_v12.h"

const ncclGin_v11_t *gin_v12_as_v11(const ncclGin_v12_t *v12, const int *queue_depth, const int *contexts);

#endif
