/* tests/plugin/built_plugin.h: the plugin of this build tree, as the plugin
 * tests drive it: $top_builddir/.libs/libnccl-net-railnet.so (make check
 * exports top_builddir; "." otherwise), loaded through the one loader
 * (tools/common/plugin_tables), with softnic's libibverbs as its verbs
 * library (RAILNET_IBVERBS_LIB), init'ed with the test's logger. */
#ifndef RAILNET_TESTS_BUILT_PLUGIN_H
#define RAILNET_TESTS_BUILT_PLUGIN_H

#include <stddef.h>

#include "nccl_net_v8.h"

/* The table, or NULL when the library does not load, init fails or it sees
 * no device (the loader's reason is printed as a TAP comment). verbs, when
 * not NULL, receives the softnic libibverbs path the plugin was given. */
const ncclNet_v8_t *built_plugin_load(ncclDebugLogger_t logger, char *verbs, size_t verbs_len);

#endif
