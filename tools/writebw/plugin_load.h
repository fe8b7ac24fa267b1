/* tools/writebw/plugin_load.h: finding and loading railnet's NCCL net plugin
 * the way NCCL would, for --mode=plugin.
 *
 * Contract: plugin_load() tries, in order: the --plugin-lib path;
 * NCCL_NET_PLUGIN as NCCL reads it (a path as given, a lib*.so name as given,
 * else libnccl-net-<name>.so); libnccl-net-railnet.so next to this program,
 * in ../lib and in the build tree (../.libs, ../plugin/.libs); finally
 * libnccl-net-railnet.so through the loader's search path. The first file
 * that loads and passes plugin_tables' checks (ncclNetPlugin_v8 exported,
 * named "railnet", complete) wins. On failure err lists every
 * attempt with its dlerror(), and the fix. plugin_logger is the
 * ncclDebugLogger_t handed to init(): warnings always reach stderr, INFO
 * and TRACE only with NCCL_DEBUG=INFO or TRACE. */
#ifndef RAILNET_TOOLS_WRITEBW_PLUGIN_LOAD_H
#define RAILNET_TOOLS_WRITEBW_PLUGIN_LOAD_H

#include <limits.h>
#include <stddef.h>

#include "../common/plugin_tables.h"
#include "nccl_net_v8.h"

struct plugin_lib {
    struct plugin_tables lib;   /* the loader and its checks (plugin_tables.h) */
    char path[PATH_MAX];
    const ncclNet_v8_t *net;
};

int plugin_load(struct plugin_lib *p, const char *explicit_path, char *err, size_t errlen);
void plugin_unload(struct plugin_lib *p);
void plugin_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#endif
