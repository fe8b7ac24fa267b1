/* tools/common/plugin_tables.h: the one loader of railnet's exported ABI
 * tables, for every program that drives them as NCCL would (tests/netdriver,
 * railnet-write-bw --mode=plugin, the gdaki benchmark, test_conn_faults,
 * test_failover, the failover bench, tests/packaging/dlopen_by_name and the
 * GIN driver tests/gindriver).
 *
 * A table kind names what a caller wants: the exported symbol, whose name
 * carries the ABI version (ncclNetPlugin_v8 ... _v12, ncclGinPlugin_v11 ... _v14,
 * ncclRmaPlugin_v13, _v14), where the
 * table keeps its `const char *name`, and which entries NCCL calls without
 * checking. A new table is one more kind in plugin_tables.c, found by its
 * symbol with plugin_table_kind().
 *
 * Checks, all here: the library loads (dlopen RTLD_NOW | RTLD_LOCAL); it
 * exports the symbol (if not, err lists the versions of that table it does
 * export); the table's name is the expected one; every required entry is
 * set. Functions return 0 / a table, or -1 / NULL with one line in err
 * that starts with the library's path. Nothing here logs or calls init. */
#ifndef RAILNET_TOOLS_PLUGIN_TABLES_H
#define RAILNET_TOOLS_PLUGIN_TABLES_H

#include <limits.h>
#include <stddef.h>

/* The name railnet's tables carry. */
#define PLUGIN_TABLES_NAME "railnet"

struct plugin_table_kind {
    const char *symbol;       /* exported name, version included: "ncclNetPlugin_v8" */
    const char *family;       /* the name without the version number: "ncclNetPlugin_v" */
    int version;
    size_t name_offset;       /* of the table's `const char *name` */
    const size_t *required;   /* offsets of function pointers that must be set */
    const char *const *required_names;
    size_t nrequired;
};

/* ncclNetPlugin_v8 (include/nccl_net_v8.h) ... ncclNetPlugin_v12
 * (include/nccl_net_v12.h): NCCL 2.30 takes the newest one exported. */
extern const struct plugin_table_kind plugin_table_net_v8;
extern const struct plugin_table_kind plugin_table_net_v9;
extern const struct plugin_table_kind plugin_table_net_v10;
extern const struct plugin_table_kind plugin_table_net_v11;
extern const struct plugin_table_kind plugin_table_net_v12;
/* ncclGinPlugin_v11 (include/nccl_gin_v11.h): NCCL 2.28's GIN table, looked
 * up in the net plugin library NCCL loaded. */
extern const struct plugin_table_kind plugin_table_gin_v11;
/* ncclGinPlugin_v12 (include/nccl_gin_v12.h): NCCL 2.29's. */
extern const struct plugin_table_kind plugin_table_gin_v12;
/* ncclGinPlugin_v13 (include/nccl_gin_v13.h): NCCL 2.30.3/2.30.4's, with
 * the data path on context indices. */
extern const struct plugin_table_kind plugin_table_gin_v13;
/* ncclGinPlugin_v14 (include/nccl_gin_v14.h): NCCL 2.30.7's, without puts. */
extern const struct plugin_table_kind plugin_table_gin_v14;
/* ncclRmaPlugin_v13 (include/nccl_rma_v13.h, GIN v13's layout) and
 * ncclRmaPlugin_v14 (include/nccl_rma_v14.h): NCCL 2.30's RMA tables. */
extern const struct plugin_table_kind plugin_table_rma_v13;
extern const struct plugin_table_kind plugin_table_rma_v14;
/* The kind exported as symbol, NULL when this loader does not know it. */
const struct plugin_table_kind *plugin_table_kind(const char *symbol);

struct plugin_tables {
    void *handle;
    char path[PATH_MAX];
};

int plugin_tables_open(struct plugin_tables *t, const char *path, char *err, size_t errlen);
/* The checked table of kind k; want_name NULL skips the name check. */
const void *plugin_tables_get(const struct plugin_tables *t, const struct plugin_table_kind *k,
                              const char *want_name, char *err, size_t errlen);
/* open + get; on failure the library is closed again. */
const void *plugin_tables_load(struct plugin_tables *t, const char *path, const struct plugin_table_kind *k,
                               const char *want_name, char *err, size_t errlen);
void plugin_tables_close(struct plugin_tables *t);

#endif
