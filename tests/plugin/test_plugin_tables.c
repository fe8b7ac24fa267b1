/* tests/plugin/test_plugin_tables.c: the one loader of railnet's ABI tables
 * (tools/common/plugin_tables.h), net v8 ... v12, GIN v11 ... v14 and RMA
 * v13/v14, against the built plugin and against libraries that are not it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_gin_v11.h"
#include "nccl_net_v12.h"
#include "nccl_rma_v14.h"
#include "tests/tap.h"
#include "tools/common/plugin_tables.h"

static const char *plugin_path(void)
{
    static char path[4096];
    const char *top = getenv("top_builddir");
    snprintf(path, sizeof(path), "%s/.libs/libnccl-net-railnet.so", top ? top : ".");
    return path;
}

TAP_CASE(test_tables_load_railnet_net_v8_checked)
{
    struct plugin_tables t;
    char err[4352] = "";
    const ncclNet_v8_t *net = plugin_tables_load(&t, plugin_path(), &plugin_table_net_v8, PLUGIN_TABLES_NAME, err,
                                                 sizeof(err));
    if (!net)
        tap_diag("%s", err);
    EXPECT_TRUE(net != NULL);
    EXPECT_STREQ("railnet", net->name);
    EXPECT_TRUE(net->isend && net->closeListen);
    EXPECT_STREQ(plugin_path(), t.path);
    plugin_tables_close(&t);
    EXPECT_TRUE(t.handle == NULL);
}

TAP_CASE(test_tables_refuse_another_name_and_say_both)
{
    struct plugin_tables t;
    char err[4352] = "";
    EXPECT_TRUE(plugin_tables_load(&t, plugin_path(), &plugin_table_net_v8, "other", err, sizeof(err)) == NULL);
    EXPECT_TRUE(strstr(err, "is named \"railnet\", not \"other\"") != NULL);
    EXPECT_TRUE(t.handle == NULL); /* closed again */
}

TAP_CASE(test_tables_library_without_the_symbol_is_refused)
{
    struct plugin_tables t;
    char err[4352] = "";
    EXPECT_TRUE(plugin_tables_load(&t, "libm.so.6", &plugin_table_net_v8, NULL, err, sizeof(err)) == NULL);
    EXPECT_STREQ("libm.so.6: loads but exports no ncclNetPlugin_v8", err);
}

TAP_CASE(test_tables_missing_file_gives_path_and_loader_error)
{
    struct plugin_tables t;
    char err[4352] = "";
    EXPECT_EQ_INT(-1, plugin_tables_open(&t, "/nonexistent/libnccl-net-railnet.so", err, sizeof(err)));
    EXPECT_TRUE(!strncmp(err, "/nonexistent/libnccl-net-railnet.so: ", 37));
}

TAP_CASE(test_tables_kinds_are_found_by_symbol)
{
    EXPECT_TRUE(plugin_table_kind("ncclNetPlugin_v8") == &plugin_table_net_v8);
    EXPECT_TRUE(plugin_table_kind("ncclGinPlugin_v11") == &plugin_table_gin_v11);
    EXPECT_TRUE(plugin_table_kind("ncclNetPlugin_v9") == &plugin_table_net_v9);
    EXPECT_TRUE(plugin_table_kind("ncclNetPlugin_v10") == &plugin_table_net_v10);
    EXPECT_TRUE(plugin_table_kind("ncclNetPlugin_v11") == &plugin_table_net_v11);
    EXPECT_TRUE(plugin_table_kind("ncclNetPlugin_v12") == &plugin_table_net_v12);
    EXPECT_TRUE(plugin_table_kind("ncclNetPlugin_v99") == NULL);
    EXPECT_EQ_INT(8, plugin_table_net_v8.version);
    EXPECT_EQ_INT(12, plugin_table_net_v12.version);
    EXPECT_EQ_INT(11, plugin_table_gin_v11.version);
}

/* Every net table NCCL 2.30 may take (it takes the newest), each checked
 * for the entries NCCL calls unchecked (from v11 on finalize too). */
TAP_CASE(test_tables_load_railnet_net_v9_to_v12_checked)
{
    const struct plugin_table_kind *kinds[] = { &plugin_table_net_v9, &plugin_table_net_v10, &plugin_table_net_v11,
                                                &plugin_table_net_v12 };
    for (int i = 0; i < 4; i++) {
        struct plugin_tables t;
        char err[4352] = "";
        const void *net = plugin_tables_load(&t, plugin_path(), kinds[i], PLUGIN_TABLES_NAME, err, sizeof(err));
        if (!net)
            tap_diag("%s", err);
        EXPECT_TRUE(net != NULL);
        plugin_tables_close(&t);
    }
    struct plugin_tables t;
    char err[4352] = "";
    const ncclNet_v12_t *v12 = plugin_tables_load(&t, plugin_path(), &plugin_table_net_v12, PLUGIN_TABLES_NAME, err,
                                                  sizeof(err));
    EXPECT_TRUE(v12 && v12->makeVDevice && v12->finalize && v12->setNetAttr);
    EXPECT_EQ_INT(17, (int)plugin_table_net_v12.nrequired);
    plugin_tables_close(&t);
}

/* A library exporting only v8 (libm exports none: the message names none)
 * is refused for v12 naming the symbol. */
TAP_CASE(test_tables_library_without_v12_is_refused)
{
    struct plugin_tables t;
    char err[4352] = "";
    EXPECT_TRUE(plugin_tables_load(&t, "libm.so.6", &plugin_table_net_v12, NULL, err, sizeof(err)) == NULL);
    EXPECT_STREQ("libm.so.6: loads but exports no ncclNetPlugin_v12", err);
}

TAP_CASE(test_tables_load_railnet_gin_v11_checked)
{
    struct plugin_tables t;
    char err[4352] = "";
    const ncclGin_v11_t *gin = plugin_tables_load(&t, plugin_path(), &plugin_table_gin_v11, PLUGIN_TABLES_NAME, err,
                                                  sizeof(err));
    if (!gin)
        tap_diag("%s", err);
    EXPECT_TRUE(gin != NULL);
    EXPECT_STREQ("railnet", gin->name);
    EXPECT_TRUE(gin->iputSignal && gin->test && gin->finalize);
    plugin_tables_close(&t);
}

/* A GIN table of a version railnet does not export: refused, naming the
 * versions it does export. */
TAP_CASE(test_tables_other_gin_version_is_refused_and_named)
{
    struct plugin_table_kind v15 = plugin_table_gin_v11;
    v15.symbol = "ncclGinPlugin_v15";
    v15.version = 15;
    struct plugin_tables t;
    char err[4352] = "";
    EXPECT_TRUE(plugin_tables_load(&t, plugin_path(), &v15, PLUGIN_TABLES_NAME, err, sizeof(err)) == NULL);
    EXPECT_TRUE(strstr(err, "exports no ncclGinPlugin_v15; it exports ncclGinPlugin_v11") != NULL);
    if (!strstr(err, "it exports ncclGinPlugin_v11"))
        tap_diag("%s", err);
}

/* NCCL 2.30's tables of the v13 layout and RMA v14: found by symbol, and
 * railnet's each checked for the entries NCCL calls unchecked; iget,
 * iflush and the progress and error entries, which NCCL tests for NULL,
 * are set too. */
TAP_CASE(test_tables_load_railnet_gin_v13_rma_v13_v14_checked)
{
    EXPECT_TRUE(plugin_table_kind("ncclGinPlugin_v13") == &plugin_table_gin_v13);
    EXPECT_TRUE(plugin_table_kind("ncclRmaPlugin_v13") == &plugin_table_rma_v13);
    EXPECT_TRUE(plugin_table_kind("ncclRmaPlugin_v14") == &plugin_table_rma_v14);
    EXPECT_EQ_INT(14, plugin_table_rma_v14.version);
    const struct plugin_table_kind *kinds[] = { &plugin_table_gin_v13, &plugin_table_rma_v13,
                                                &plugin_table_rma_v14 };
    for (int i = 0; i < 3; i++) {
        struct plugin_tables t;
        char err[4352] = "";
        const ncclRma_v14_t *tab = plugin_tables_load(&t, plugin_path(), kinds[i], PLUGIN_TABLES_NAME, err,
                                                      sizeof(err));
        if (!tab)
            tap_diag("%s", err);
        EXPECT_TRUE(tab != NULL);
        if (tab) /* the v13 layout has the same entries at the same offsets */
            EXPECT_TRUE(tab->iget && tab->iflush && tab->rmaProgress && tab->queryLastError);
        plugin_tables_close(&t);
    }
}

TAP_CASE(test_tables_gin_name_is_checked)
{
    struct plugin_tables t;
    char err[4352] = "";
    EXPECT_TRUE(plugin_tables_load(&t, plugin_path(), &plugin_table_gin_v11, "other", err, sizeof(err)) == NULL);
    EXPECT_TRUE(strstr(err, "its ncclGinPlugin_v11 is named \"railnet\", not \"other\"") != NULL);
}

int main(int argc, char **argv)
{
    return tap_run(argc, argv);
}
