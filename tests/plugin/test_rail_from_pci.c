/* tests/plugin/test_rail_from_pci.c: a device's railId from the host's PCI
 * topology (plugin/ib/rail_topo.h), through the built plugin's net v12
 * table on four softnic devices whose sysfs view (SOFTNIC_SYSFS) places
 * them on PCIe switches (SOFTNIC_PCI_LAYOUT, tests/softnic/sysfs.c):
 *  - "rail": each device shares a switch with one GPU and takes that GPU's
 *    number in bus order, which softnic makes the reverse of the devices'
 *    order (device i: rail 3 - i), in net v12 and GIN v14 alike;
 *  - a rail RAILNET_HCA gives wins; RAILNET_RAIL_FROM_PCI=0 asks nothing;
 *  - "shared" (two GPUs on each switch) and the view without a layout
 *    (no switch) give no rail, and each device's INFO line says why. */
#include "../tap.h"
#include "built_plugin.h"
#include "nccl_gin_v14.h"
#include "nccl_net_v12.h"
#include "tools/common/plugin_tables.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#define NDEVS 4
#define FOUR_DEVICES "softnic0:127.0.0.1;softnic1:127.0.0.2;softnic2:127.0.0.3;softnic3:127.0.0.4"

static char top[] = "/tmp/railnet_rail_XXXXXX"; /* made by main, one view per case under it */
static char top_real[PATH_MAX];                  /* the same resolved, as the plugin sees it */
static char logbuf[1 << 16], warns[1 << 12];

/* Keeps the plugin's INFO and WARN lines in logbuf, the WARNs in warns. */
static void info_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt,
                        ...)
{
    (void)flags, (void)file, (void)line;
    if (level != NCCL_LOG_INFO && level != NCCL_LOG_WARN)
        return;
    va_list ap;
    va_start(ap, fmt);
    built_log_append(logbuf, sizeof(logbuf), fmt, ap);
    va_end(ap);
    if (level == NCCL_LOG_WARN) {
        va_start(ap, fmt);
        built_log_append(warns, sizeof(warns), fmt, ap);
        va_end(ap);
    }
}

/* The v12 table init'ed on the four devices, their sysfs view at
 * <top>/<view> with PCI layout `layout` (NULL: none); skips the case when
 * the plugin or softnic is not there. */
static const ncclNet_v12_t *load(const char *view, const char *layout)
{
    char dir[256];
    snprintf(dir, sizeof(dir), "%s/%s", top, view);
    setenv("SOFTNIC_DEVICES", FOUR_DEVICES, 1);
    setenv("SOFTNIC_SYSFS", dir, 1);
    if (layout)
        setenv("SOFTNIC_PCI_LAYOUT", layout, 1);
    else
        unsetenv("SOFTNIC_PCI_LAYOUT");
    logbuf[0] = warns[0] = '\0';
    const ncclNet_v12_t *t = built_plugin_table(&plugin_table_net_v12);
    void *ctx = NULL;
    ncclNetCommConfig_v12_t config = { .trafficClass = -1 };
    int n = 0;
    if (!t || t->init(&ctx, 12, &config, info_logger, NULL) != ncclSuccess || t->devices(&n) != ncclSuccess ||
        n < 1)
        TAP_SKIP("the plugin or softnic is not available");
    EXPECT_EQ_INT(NDEVS, n);
    return t;
}

/* Device d's railId through net v12; 99 when getProperties fails. */
static int v12_rail(const ncclNet_v12_t *t, int d)
{
    ncclNetProperties_v12_t p;
    if (t->getProperties(d, &p) != ncclSuccess)
        return 99;
    EXPECT_EQ_INT(NCCL_NET_ID_UNDEF, p.planeId);
    return p.railId;
}

/* The same through ncclGinPlugin_v14 (init'ed and finalized here). */
static int gin14_rail(int d)
{
    const ncclGin_v14_t *g = built_plugin_table(&plugin_table_gin_v14);
    void *ctx = NULL;
    ncclNetProperties_v12_t p;
    int rail = 99;
    if (g && g->init(&ctx, 14, built_warn_logger) == ncclSuccess) {
        if (g->getProperties(d, &p) == ncclSuccess)
            rail = p.railId;
        g->finalize(ctx);
    }
    return rail;
}

/* 1 when the INFO line of device d names its rail as `text` (", rail ..."
 * up to ", pci"). */
static int info_says(int d, const char *text)
{
    char needle[512];
    snprintf(needle, sizeof(needle), "device %d: softnic%d port 1 (", d, d);
    const char *line = strstr(logbuf, needle);
    if (!line)
        return 0;
    const char *end = strchr(line, '\n');
    const char *pci = strstr(line, ", pci ");
    const char *at = strchr(line, ')');
    if (!end || !pci || !at || pci > end || at > pci)
        return 0;
    at++; /* after "(RoCE, N Mb/s)" */
    int ok = (size_t)(pci - at) == strlen(text) && !strncmp(at, text, strlen(text));
    if (!ok)
        tap_diag("device %d's INFO line: %.*s", d, (int)(end - line), line);
    return ok;
}

TAP_CASE(test_each_device_takes_the_number_of_the_gpu_on_its_switch)
{
    const ncclNet_v12_t *t = load("rail", "rail");
    for (int d = 0; d < NDEVS; d++) {
        int gpu = NDEVS - 1 - d, bus = 0x10 * (NDEVS - d);
        EXPECT_EQ_INT(gpu, v12_rail(t, d));
        EXPECT_EQ_INT(gpu, gin14_rail(d));
        char want[256];
        snprintf(want, sizeof(want),
                 ", rail %d (from PCI: GPU %d of %d, 0000:%02x:00.0, shares its PCIe switch 0000:%02x:00.0)", gpu,
                 gpu, NDEVS, bus + 3, bus);
        EXPECT_TRUE(info_says(d, want));
    }
    EXPECT_STREQ("", warns);
}

TAP_CASE(test_a_rail_railnet_hca_gives_wins_over_the_pci_topology)
{
    setenv("RAILNET_HCA", "softnic0:1:7,softnic1,softnic2:1::5,softnic3", 1);
    const ncclNet_v12_t *t = load("hca", "rail");
    EXPECT_EQ_INT(7, v12_rail(t, 0));
    EXPECT_EQ_INT(2, v12_rail(t, 1));
    ncclNetProperties_v12_t p;
    EXPECT_EQ_INT(ncclSuccess, t->getProperties(2, &p));
    EXPECT_EQ_INT(1, p.railId); /* an entry of a plane and no rail: the rail from PCI */
    EXPECT_EQ_INT(5, p.planeId);
    EXPECT_EQ_INT(0, v12_rail(t, 3));
    EXPECT_TRUE(info_says(0, ", rail 7"));
    EXPECT_STREQ("", warns);
}

TAP_CASE(test_rail_from_pci_0_leaves_the_rail_undefined)
{
    setenv("RAILNET_RAIL_FROM_PCI", "0", 1);
    const ncclNet_v12_t *t = load("off", "rail");
    for (int d = 0; d < NDEVS; d++) {
        EXPECT_EQ_INT(NCCL_NET_ID_UNDEF, v12_rail(t, d));
        EXPECT_TRUE(info_says(d, ""));
    }
    EXPECT_EQ_INT(1, built_count(logbuf, "RAILNET_RAIL_FROM_PCI set by environment to 0"));
}

TAP_CASE(test_two_gpus_on_a_devices_switch_leave_its_rail_undefined)
{
    const ncclNet_v12_t *t = load("shared", "shared");
    for (int d = 0; d < NDEVS; d++) {
        int bus = 0x10 * (NDEVS - d);
        EXPECT_EQ_INT(NCCL_NET_ID_UNDEF, v12_rail(t, d));
        char want[256];
        snprintf(want, sizeof(want),
                 ", rail undefined (2 GPUs share its PCIe switch 0000:%02x:00.0: 0000:%02x:00.0, 0000:%02x:00.0)",
                 bus, bus + 3, bus + 4);
        EXPECT_TRUE(info_says(d, want));
    }
}

TAP_CASE(test_a_device_on_no_pci_bus_has_no_rail)
{
    const ncclNet_v12_t *t = load("none", NULL);
    for (int d = 0; d < NDEVS; d++) {
        EXPECT_EQ_INT(NCCL_NET_ID_UNDEF, v12_rail(t, d));
        char want[PATH_MAX + 128];
        snprintf(want, sizeof(want),
                 ", rail undefined (its device %s/none/class/infiniband/softnic%d/device is not a PCI function)",
                 top_real, d);
        EXPECT_TRUE(info_says(d, want));
    }
}

int main(int argc, char **argv)
{
    if (!mkdtemp(top) || !realpath(top, top_real)) {
        perror(top);
        return 1;
    }
    int rc = tap_run(argc, argv);
    if (tap_rm_tree(top))
        fprintf(stderr, "cannot remove %s: %s\n", top, strerror(errno));
    return rc;
}
