/* tests/packaging/dlopen_by_name.c: loads a net plugin as NCCL does for
 * NCCL_NET_PLUGIN=NAME, by the file name "libnccl-net-NAME.so" alone, so
 * that the dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache, the
 * default directories) decides where it comes from (it goes through
 * tools/common/plugin_tables, which hands a bare file name to the loader
 * as it is).
 *
 *   dlopen_by_name NAME
 * prints "path: FILE" (the file the loader picked) and "name: TABLE-NAME"
 * (the name field of the exported ncclNetPlugin_v8 table); exit 0 when the
 * plugin loaded and exports that table, 1 otherwise, with the reason on
 * stderr. It calls nothing in the plugin. */
#include <dlfcn.h>
#include <stdio.h>

#include "nccl_net_v8.h"
#include "tools/common/plugin_tables.h"

int main(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: dlopen_by_name NAME   (loads libnccl-net-NAME.so by name)\n");
        return argc == 2 && argv[1][1] == 'h' ? 0 : 2;
    }
    char file[256];
    if (snprintf(file, sizeof(file), "libnccl-net-%s.so", argv[1]) >= (int)sizeof(file)) {
        fprintf(stderr, "dlopen_by_name: name too long\n");
        return 2;
    }
    struct plugin_tables lib;
    char err[PATH_MAX + 256];
    const ncclNet_v8_t *net = plugin_tables_load(&lib, file, &plugin_table_net_v8, NULL, err, sizeof(err));
    Dl_info info;
    if (!net || !dladdr(net, &info) || !info.dli_fname) {
        fprintf(stderr, "dlopen_by_name: %s\n", net ? "dladdr found no file for the table" : err);
        return 1;
    }
    printf("path: %s\nname: %s\n", info.dli_fname, net->name ? net->name : "(null)");
    return 0;
}
