/* tests/plugin/built_plugin.c: see built_plugin.h. */
#include "built_plugin.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "tools/common/plugin_tables.h"

const ncclNet_v8_t *built_plugin_load(ncclDebugLogger_t logger, char *verbs, size_t verbs_len)
{
    const char *top = getenv("top_builddir");
    char path[4096], lib[4096];
    snprintf(path, sizeof(path), "%s/.libs/libnccl-net-railnet.so", top ? top : ".");
    snprintf(lib, sizeof(lib), "%s/tests/softnic/libibverbs.so.1", top ? top : ".");
    setenv("RAILNET_IBVERBS_LIB", lib, 1);
    if (verbs)
        snprintf(verbs, verbs_len, "%s", lib);
    static struct plugin_tables tables;
    char err[PATH_MAX + 256];
    const ncclNet_v8_t *net = plugin_tables_load(&tables, path, &plugin_table_net_v8, PLUGIN_TABLES_NAME, err,
                                                 sizeof(err));
    if (!net) {
        printf("# %s\n", err);
        return NULL;
    }
    int n = 0;
    if (net->init(logger) != ncclSuccess || net->devices(&n) != ncclSuccess || n < 1)
        return NULL;
    return net;
}
