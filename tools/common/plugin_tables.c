/* tools/common/plugin_tables.c: loading and checking railnet's ABI tables
 * (plugin_tables.h). */
#include "plugin_tables.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "nccl_gin_v11.h"
#include "nccl_gin_v12.h"
#include "nccl_gin_v14.h"
#include "nccl_net_v12.h"
#include "nccl_rma_v13.h"
#include "nccl_rma_v14.h"

/* Every pointer NCCL calls without checking. */
#define NET8(f) offsetof(ncclNet_v8_t, f)
static const size_t net_v8_required[] = {
    NET8(init), NET8(devices), NET8(getProperties), NET8(listen), NET8(connect), NET8(accept), NET8(regMr),
    NET8(regMrDmaBuf), NET8(deregMr), NET8(isend), NET8(irecv), NET8(iflush), NET8(test), NET8(closeSend),
    NET8(closeRecv), NET8(closeListen),
};
static const char *const net_v8_required_names[] = {
    "init", "devices", "getProperties", "listen", "connect", "accept", "regMr", "regMrDmaBuf", "deregMr",
    "isend", "irecv", "iflush", "test", "closeSend", "closeRecv", "closeListen",
};
_Static_assert(sizeof(net_v8_required) / sizeof(net_v8_required[0]) ==
                   sizeof(net_v8_required_names) / sizeof(net_v8_required_names[0]),
               "one name per required entry");

const struct plugin_table_kind plugin_table_net_v8 = {
    .symbol = "ncclNetPlugin_v8",
    .family = "ncclNetPlugin_v",
    .version = 8,
    .name_offset = offsetof(ncclNet_v8_t, name),
    .required = net_v8_required,
    .required_names = net_v8_required_names,
    .nrequired = sizeof(net_v8_required) / sizeof(net_v8_required[0]),
};

/* Net v9 ... v12: v8's required entries at the same offsets (each table
 * keeps v8's order), and from v11 on finalize, which NCCL calls unchecked;
 * makeVDevice and setNetAttr may be NULL (NCCL tests them). */
_Static_assert(offsetof(ncclNet_v12_t, closeListen) == offsetof(ncclNet_v8_t, closeListen) &&
                   offsetof(ncclNet_v9_t, closeListen) == offsetof(ncclNet_v8_t, closeListen) &&
                   offsetof(ncclNet_v10_t, closeListen) == offsetof(ncclNet_v8_t, closeListen) &&
                   offsetof(ncclNet_v11_t, closeListen) == offsetof(ncclNet_v8_t, closeListen),
               "net v9..v12 keep v8's entries in v8's order");
static const size_t net_v11_required[] = {
    NET8(init), NET8(devices), NET8(getProperties), NET8(listen), NET8(connect), NET8(accept), NET8(regMr),
    NET8(regMrDmaBuf), NET8(deregMr), NET8(isend), NET8(irecv), NET8(iflush), NET8(test), NET8(closeSend),
    NET8(closeRecv), NET8(closeListen), offsetof(ncclNet_v11_t, finalize),
};
static const char *const net_v11_required_names[] = {
    "init", "devices", "getProperties", "listen", "connect", "accept", "regMr", "regMrDmaBuf", "deregMr",
    "isend", "irecv", "iflush", "test", "closeSend", "closeRecv", "closeListen", "finalize",
};
_Static_assert(offsetof(ncclNet_v11_t, finalize) == offsetof(ncclNet_v12_t, finalize), "v12 keeps v11's finalize");

#define NET_KIND(v, req, names)                                                                      \
    const struct plugin_table_kind plugin_table_net_v##v = {                                         \
        .symbol = "ncclNetPlugin_v" #v,                                                               \
        .family = "ncclNetPlugin_v",                                                                  \
        .version = v,                                                                                 \
        .name_offset = offsetof(ncclNet_v##v##_t, name),                                              \
        .required = req,                                                                              \
        .required_names = names,                                                                      \
        .nrequired = sizeof(req) / sizeof(req[0]),                                                    \
    }
NET_KIND(9, net_v8_required, net_v8_required_names);
NET_KIND(10, net_v8_required, net_v8_required_names);
NET_KIND(11, net_v11_required, net_v11_required_names);
NET_KIND(12, net_v11_required, net_v11_required_names);
#undef NET_KIND
#undef NET8

/* NCCL 2.28.9 calls every GIN entry unchecked but ginProgress (its proxy
 * type tests it for NULL); createContext, destroyContext and queryLastError
 * are its GDAKI type's, and a table offers both types by one symbol. */
#define GIN(f) offsetof(ncclGin_v11_t, f)
static const size_t gin_v11_required[] = {
    GIN(init), GIN(devices), GIN(getProperties), GIN(listen), GIN(connect), GIN(createContext), GIN(regMrSym),
    GIN(regMrSymDmaBuf), GIN(deregMrSym), GIN(destroyContext), GIN(closeColl), GIN(closeListen), GIN(iput),
    GIN(iputSignal), GIN(test), GIN(queryLastError), GIN(finalize),
};
#undef GIN
static const char *const gin_v11_required_names[] = {
    "init", "devices", "getProperties", "listen", "connect", "createContext", "regMrSym", "regMrSymDmaBuf",
    "deregMrSym", "destroyContext", "closeColl", "closeListen", "iput", "iputSignal", "test", "queryLastError",
    "finalize",
};
_Static_assert(sizeof(gin_v11_required) / sizeof(gin_v11_required[0]) ==
                   sizeof(gin_v11_required_names) / sizeof(gin_v11_required_names[0]),
               "one name per required entry");

const struct plugin_table_kind plugin_table_gin_v11 = {
    .symbol = "ncclGinPlugin_v11",
    .family = "ncclGinPlugin_v",
    .version = 11,
    .name_offset = offsetof(ncclGin_v11_t, name),
    .required = gin_v11_required,
    .required_names = gin_v11_required_names,
    .nrequired = sizeof(gin_v11_required) / sizeof(gin_v11_required[0]),
};

/* NCCL 2.29's table: v11's entries at the same offsets, other arguments. */
_Static_assert(sizeof(ncclGin_v12_t) == sizeof(ncclGin_v11_t), "gin v12: v11's entries");
const struct plugin_table_kind plugin_table_gin_v12 = {
    .symbol = "ncclGinPlugin_v12",
    .family = "ncclGinPlugin_v",
    .version = 12,
    .name_offset = offsetof(ncclGin_v12_t, name),
    .required = gin_v11_required,
    .required_names = gin_v11_required_names,
    .nrequired = sizeof(gin_v11_required) / sizeof(gin_v11_required[0]),
};

/* NCCL 2.30's table: no data path; NCCL calls getGinProperties unchecked. */
#define GIN14(f) offsetof(ncclGin_v14_t, f)
static const size_t gin_v14_required[] = {
    GIN14(init), GIN14(devices), GIN14(getGinProperties), GIN14(getProperties), GIN14(listen), GIN14(connect),
    GIN14(createContext), GIN14(regMrSym), GIN14(regMrSymDmaBuf), GIN14(deregMrSym), GIN14(destroyContext),
    GIN14(closeColl), GIN14(closeListen), GIN14(queryLastError), GIN14(finalize),
};
#undef GIN14
static const char *const gin_v14_required_names[] = {
    "init", "devices", "getGinProperties", "getProperties", "listen", "connect", "createContext", "regMrSym",
    "regMrSymDmaBuf", "deregMrSym", "destroyContext", "closeColl", "closeListen", "queryLastError", "finalize",
};
_Static_assert(sizeof(gin_v14_required) / sizeof(gin_v14_required[0]) ==
                   sizeof(gin_v14_required_names) / sizeof(gin_v14_required_names[0]),
               "one name per required entry");
const struct plugin_table_kind plugin_table_gin_v14 = {
    .symbol = "ncclGinPlugin_v14",
    .family = "ncclGinPlugin_v",
    .version = 14,
    .name_offset = offsetof(ncclGin_v14_t, name),
    .required = gin_v14_required,
    .required_names = gin_v14_required_names,
    .nrequired = sizeof(gin_v14_required) / sizeof(gin_v14_required[0]),
};

/* The v13 layout (GIN v13 and RMA v13) and RMA v14: the same entries at the
 * same offsets. NCCL 2.30 calls all but iget, iflush, the progress entry
 * and queryLastError unchecked. */
#define RMA14(f) offsetof(ncclRma_v14_t, f)
static const size_t rma_required[] = {
    RMA14(init), RMA14(devices), RMA14(getProperties), RMA14(listen), RMA14(connect), RMA14(createContext),
    RMA14(regMrSym), RMA14(regMrSymDmaBuf), RMA14(deregMrSym), RMA14(destroyContext), RMA14(closeColl),
    RMA14(closeListen), RMA14(iput), RMA14(iputSignal), RMA14(test), RMA14(finalize),
};
#undef RMA14
static const char *const rma_required_names[] = {
    "init", "devices", "getProperties", "listen", "connect", "createContext", "regMrSym", "regMrSymDmaBuf",
    "deregMrSym", "destroyContext", "closeColl", "closeListen", "iput", "iputSignal", "test", "finalize",
};
_Static_assert(sizeof(rma_required) / sizeof(rma_required[0]) ==
                   sizeof(rma_required_names) / sizeof(rma_required_names[0]),
               "one name per required entry");
_Static_assert(sizeof(ncclRma_v13_t) == sizeof(ncclRma_v14_t) &&
                   offsetof(ncclRma_v13_t, iputSignal) == offsetof(ncclRma_v14_t, iputSignal) &&
                   offsetof(ncclRma_v13_t, finalize) == offsetof(ncclRma_v14_t, finalize),
               "v13 and RMA v14: the same entries at the same offsets");
#define RMA_KIND(var, sym, fam, v, type)                                                             \
    const struct plugin_table_kind var = {                                                           \
        .symbol = sym,                                                                               \
        .family = fam,                                                                               \
        .version = v,                                                                                \
        .name_offset = offsetof(type, name),                                                         \
        .required = rma_required,                                                                    \
        .required_names = rma_required_names,                                                        \
        .nrequired = sizeof(rma_required) / sizeof(rma_required[0]),                                 \
    }
RMA_KIND(plugin_table_gin_v13, "ncclGinPlugin_v13", "ncclGinPlugin_v", 13, ncclGin_v13_t);
RMA_KIND(plugin_table_rma_v13, "ncclRmaPlugin_v13", "ncclRmaPlugin_v", 13, ncclRma_v13_t);
RMA_KIND(plugin_table_rma_v14, "ncclRmaPlugin_v14", "ncclRmaPlugin_v", 14, ncclRma_v14_t);
#undef RMA_KIND

static const struct plugin_table_kind *const kinds[] = {
    &plugin_table_net_v8,  &plugin_table_net_v9,  &plugin_table_net_v10, &plugin_table_net_v11,
    &plugin_table_net_v12, &plugin_table_gin_v11, &plugin_table_gin_v12, &plugin_table_gin_v13,
    &plugin_table_gin_v14, &plugin_table_rma_v13, &plugin_table_rma_v14,
};

const struct plugin_table_kind *plugin_table_kind(const char *symbol)
{
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (symbol && !strcmp(kinds[i]->symbol, symbol))
            return kinds[i];
    return NULL;
}

int plugin_tables_open(struct plugin_tables *t, const char *path, char *err, size_t errlen)
{
    memset(t, 0, sizeof(*t));
    dlerror();
    t->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!t->handle) {
        const char *e = dlerror();
        snprintf(err, errlen, "%s: %s", path, e ? e : "cannot load");
        return -1;
    }
    snprintf(t->path, sizeof(t->path), "%s", path);
    return 0;
}

/* The other versions of k's table the library exports, for the error. */
static void other_versions(const struct plugin_tables *t, const struct plugin_table_kind *k, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int v = 1; v <= 32 && off + 1 < len; v++) {
        char sym[64];
        snprintf(sym, sizeof(sym), "%s%d", k->family, v);
        if (v != k->version && dlsym(t->handle, sym)) {
            int n = snprintf(buf + off, len - off, "%s%s", off ? ", " : "; it exports ", sym);
            off += n > 0 ? (size_t)n : 0;
        }
    }
}

const void *plugin_tables_get(const struct plugin_tables *t, const struct plugin_table_kind *k,
                              const char *want_name, char *err, size_t errlen)
{
    const char *table = dlsym(t->handle, k->symbol);
    if (!table) {
        char others[256];
        other_versions(t, k, others, sizeof(others));
        snprintf(err, errlen, "%s: loads but exports no %s%s", t->path, k->symbol, others);
        return NULL;
    }
    const char *name = *(const char *const *)(table + k->name_offset);
    if (want_name && (!name || strcmp(name, want_name))) {
        snprintf(err, errlen, "%s: its %s is named \"%s\", not \"%s\"", t->path, k->symbol, name ? name : "(null)",
                 want_name);
        return NULL;
    }
    for (size_t i = 0; i < k->nrequired; i++) {
        void *const *fn = (void *const *)(table + k->required[i]);
        if (!*fn) {
            snprintf(err, errlen, "%s: its %s lacks %s (NCCL calls it unchecked)", t->path, k->symbol,
                     k->required_names[i]);
            return NULL;
        }
    }
    return table;
}

const void *plugin_tables_load(struct plugin_tables *t, const char *path, const struct plugin_table_kind *k,
                               const char *want_name, char *err, size_t errlen)
{
    if (plugin_tables_open(t, path, err, errlen))
        return NULL;
    const void *table = plugin_tables_get(t, k, want_name, err, errlen);
    if (!table)
        plugin_tables_close(t);
    return table;
}

void plugin_tables_close(struct plugin_tables *t)
{
    if (t->handle)
        dlclose(t->handle);
    memset(t, 0, sizeof(*t));
}
