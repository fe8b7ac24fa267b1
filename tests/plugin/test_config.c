/* tests/plugin/test_config.c: the pure parts of the core: RAILNET_* value
 * parsers, the RAILNET_HCA filter (ports, rails and planes, the WARNs of bad
 * entries), port speed from verbs codes, a NIC's rail from hand-made sysfs
 * trees (rail_topo: what softnic's views do not show). */
#include "../tap.h"
#include "plugin/ib/config.h"
#include "plugin/ib/devices.h"
#include "plugin/ib/hostlink.h"
#include "plugin/ib/log.h"
#include "plugin/ib/parse.h"
#include "plugin/ib/rail_topo.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

TAP_CASE(test_parse_int_in_range_and_rejects_junk)
{
    long long v = 0;
    EXPECT_EQ_INT(0, parse_int("7", 0, 7, &v));
    EXPECT_EQ_INT(7, (int)v);
    EXPECT_EQ_INT(-1, parse_int("8", 0, 7, &v));
    EXPECT_EQ_INT(-1, parse_int("-1", 0, 7, &v));
    EXPECT_EQ_INT(-1, parse_int("3x", 0, 7, &v));
    EXPECT_EQ_INT(-1, parse_int("", 0, 7, &v));
    EXPECT_EQ_INT(-1, parse_int("99999999999999999999", 0, 7, &v));
    EXPECT_EQ_INT(7, (int)v); /* untouched by failures */
    EXPECT_EQ_INT(0, parse_int("010", 0, 100, &v));
    EXPECT_EQ_INT(10, (int)v); /* not octal */
    EXPECT_EQ_INT(0, parse_int("0x10", 0, 100, &v));
    EXPECT_EQ_INT(16, (int)v);
    EXPECT_EQ_INT(-1, parse_int("08", 0, 7, &v)); /* decimal 8: out of range, not bad octal */
    EXPECT_EQ_INT(0, parse_int("08", 0, 100, &v));
    EXPECT_EQ_INT(8, (int)v);
    unsigned long long u = 0;
    EXPECT_EQ_INT(0, parse_u64("0755", &u));
    EXPECT_EQ_U64(755, u);
    EXPECT_EQ_INT(0, parse_u64("0xff", &u));
    EXPECT_EQ_U64(255, u);
}

TAP_CASE(test_parse_auto_accepts_auto_and_numbers)
{
    long long v = 5;
    EXPECT_EQ_INT(0, config_parse_auto("auto", 0, 1, &v));
    EXPECT_EQ_INT(RN_AUTO, (int)v);
    EXPECT_EQ_INT(0, config_parse_auto("AUTO", 0, 1, &v));
    EXPECT_EQ_INT(0, config_parse_auto("1", 0, 1, &v));
    EXPECT_EQ_INT(1, (int)v);
    EXPECT_EQ_INT(-1, config_parse_auto("2", 0, 1, &v));
    EXPECT_EQ_INT(-1, config_parse_auto("yes", 0, 1, &v));
}

TAP_CASE(test_parse_size_binary_suffixes_and_bounds)
{
    long long v = 0;
    EXPECT_EQ_INT(0, parse_size("128K", 4096, 1ll << 30, &v));
    EXPECT_EQ_U64(131072, (uint64_t)v);
    EXPECT_EQ_INT(0, parse_size("1MiB", 4096, 1ll << 30, &v));
    EXPECT_EQ_U64(1048576, (uint64_t)v);
    EXPECT_EQ_INT(0, parse_size("1G", 4096, 1ll << 30, &v));
    EXPECT_EQ_INT(-1, parse_size("2G", 4096, 1ll << 30, &v));
    EXPECT_EQ_INT(-1, parse_size("1K", 4096, 1ll << 30, &v));
    EXPECT_EQ_INT(-1, parse_size("12Q", 0, 1ll << 30, &v));
    EXPECT_EQ_INT(-1, parse_size("-4K", 0, 1ll << 30, &v));
    EXPECT_EQ_INT(-1, parse_size("9999999999G", 0, 1ll << 62, &v));
}

TAP_CASE(test_parse_u64_whole_range_and_no_minus)
{
    unsigned long long v = 7;
    EXPECT_EQ_INT(0, parse_u64("0xffffffffffffffff", &v));
    EXPECT_EQ_U64(~0ull, (uint64_t)v);
    EXPECT_EQ_INT(0, parse_u64("42", &v));
    EXPECT_EQ_U64(42, (uint64_t)v);
    EXPECT_EQ_INT(-1, parse_u64("12x", &v));
    EXPECT_EQ_INT(-1, parse_u64(" -1", &v));
    EXPECT_EQ_INT(-1, parse_u64("18446744073709551616", &v));
    EXPECT_EQ_INT(-1, parse_u64("", &v));
    EXPECT_EQ_U64(42, (uint64_t)v);
}

TAP_CASE(test_parse_real_whole_and_at_least_lo)
{
    double v = 7;
    EXPECT_EQ_INT(0, parse_real("0.5", 0, &v));
    EXPECT_TRUE(v == 0.5);
    EXPECT_EQ_INT(0, parse_real("1e9", 0, &v));
    EXPECT_TRUE(v == 1e9);
    EXPECT_EQ_INT(-1, parse_real("-0.5", 0, &v));
    EXPECT_EQ_INT(-1, parse_real("1.5s", 0, &v));
    EXPECT_EQ_INT(-1, parse_real("nan", 0, &v));
    EXPECT_EQ_INT(-1, parse_real("1e999", 0, &v));
    EXPECT_EQ_INT(-1, parse_real("", 0, &v));
    EXPECT_TRUE(v == 1e9);
}

/* ---- RAILNET_HCA ---- */

static char warns[4096];

static void warn_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt,
                        ...)
{
    (void)flags, (void)file, (void)line;
    if (level != NCCL_LOG_WARN)
        return;
    size_t at = strlen(warns);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(warns + at, sizeof(warns) - at, fmt, ap);
    va_end(ap);
    at = strlen(warns);
    if (at + 1 < sizeof(warns))
        warns[at] = '\n', warns[at + 1] = '\0';
}

/* RAILNET_HCA=spec parsed (its WARNs in warns[], their count returned in
 * *nwarn when not NULL), then asked about port `port` of device `dev`:
 * taken or not, with the rail and plane reported. */
static int hca(const char *spec, const char *dev, int port, int *rail, int *plane, int *nwarn)
{
    struct devices_hca h;
    warns[0] = '\0';
    log_set(warn_logger);
    int n = devices_hca_parse(spec, &h);
    log_set(NULL);
    if (nwarn)
        *nwarn = n;
    return devices_hca_match(&h, dev, port, rail, plane);
}

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

TAP_CASE(test_hca_filter_prefix_exact_port_and_exclude)
{
    EXPECT_EQ_INT(1, hca("", "mlx5_0", 1, NULL, NULL, NULL));
    EXPECT_EQ_INT(1, hca("mlx5", "mlx5_0", 1, NULL, NULL, NULL));
    EXPECT_EQ_INT(1, hca("mlx5_0:1,mlx5_1", "mlx5_1", 2, NULL, NULL, NULL));
    EXPECT_EQ_INT(0, hca("mlx5_0:1,mlx5_1", "mlx5_0", 2, NULL, NULL, NULL));
    EXPECT_EQ_INT(0, hca("=mlx5_1", "mlx5_10", 1, NULL, NULL, NULL));
    EXPECT_EQ_INT(1, hca("mlx5_1", "mlx5_10", 1, NULL, NULL, NULL));
    EXPECT_EQ_INT(0, hca("^mlx5_0", "mlx5_0", 1, NULL, NULL, NULL));
    EXPECT_EQ_INT(1, hca("^mlx5_0", "mlx5_1", 1, NULL, NULL, NULL));
    EXPECT_EQ_INT(1, hca("^=mlx5_1", "mlx5_10", 1, NULL, NULL, NULL));
    EXPECT_EQ_INT(0, hca("^mlx5_0:2", "mlx5_0", 2, NULL, NULL, NULL));
    EXPECT_EQ_INT(1, hca("^mlx5_0:2", "mlx5_0", 1, NULL, NULL, NULL));
    EXPECT_EQ_INT(1, hca("mlx5_0,,mlx5_1,", "mlx5_1", 1, NULL, NULL, NULL)); /* empty entries skipped */
    EXPECT_STREQ("", warns);
}

TAP_CASE(test_hca_entry_gives_its_rail_and_plane_to_the_ports_it_takes)
{
    int rail = 9, plane = 9, nw = 9;
    EXPECT_EQ_INT(1, hca("mlx5_0:1:3:7,mlx5_1:1:4", "mlx5_0", 1, &rail, &plane, &nw));
    EXPECT_EQ_INT(3, rail);
    EXPECT_EQ_INT(7, plane);
    EXPECT_EQ_INT(0, nw);
    EXPECT_EQ_INT(1, hca("mlx5_0:1:3:7,mlx5_1:1:4", "mlx5_1", 1, &rail, &plane, NULL));
    EXPECT_EQ_INT(4, rail);
    EXPECT_EQ_INT(-1, plane);
    /* no rail or plane field: undefined */
    EXPECT_EQ_INT(1, hca("mlx5_0", "mlx5_0", 2, &rail, &plane, NULL));
    EXPECT_EQ_INT(-1, rail);
    EXPECT_EQ_INT(-1, plane);
    EXPECT_EQ_INT(1, hca("", "mlx5_0", 2, &rail, &plane, NULL));
    EXPECT_EQ_INT(-1, rail);
    EXPECT_EQ_INT(-1, plane);
    /* an empty port field matches every port, as NCCL_IB_HCA's */
    EXPECT_EQ_INT(1, hca("mlx5_0::2:1", "mlx5_0", 1, &rail, &plane, NULL));
    EXPECT_EQ_INT(2, rail);
    EXPECT_EQ_INT(1, plane);
    EXPECT_EQ_INT(1, hca("mlx5_0::2:1", "mlx5_0", 2, &rail, &plane, NULL));
    EXPECT_EQ_INT(2, rail);
    /* an empty rail with a plane: rail undefined */
    EXPECT_EQ_INT(1, hca("mlx5_0:1::5", "mlx5_0", 1, &rail, &plane, NULL));
    EXPECT_EQ_INT(-1, rail);
    EXPECT_EQ_INT(5, plane);
    /* the first entry naming a port decides, as in NCCL */
    EXPECT_EQ_INT(1, hca("mlx5_0:2:1,mlx5:2:6", "mlx5_0", 2, &rail, &plane, NULL));
    EXPECT_EQ_INT(1, rail);
    EXPECT_EQ_INT(1, hca("mlx5_0:2:1,mlx5:2:6", "mlx5_1", 2, &rail, &plane, NULL));
    EXPECT_EQ_INT(6, rail);
    /* the bounds of int16_t's non-negative range */
    EXPECT_EQ_INT(1, hca("=mlx5_0:1:0:32767", "mlx5_0", 1, &rail, &plane, &nw));
    EXPECT_EQ_INT(0, rail);
    EXPECT_EQ_INT(32767, plane);
    EXPECT_EQ_INT(0, nw);
    /* a port left out reports nothing */
    EXPECT_EQ_INT(0, hca("mlx5_0:1:3:7", "mlx5_0", 2, &rail, &plane, NULL));
    EXPECT_EQ_INT(-1, rail);
    EXPECT_EQ_INT(-1, plane);
    EXPECT_STREQ("", warns);
}

TAP_CASE(test_hca_bad_entry_is_a_warn_naming_it_and_takes_no_port)
{
    static const struct {
        const char *spec, *why;
    } bad[] = {
        { "mlx5_0:1:x", "RAILNET_HCA=mlx5_0:1:x: entry \"mlx5_0:1:x\" refused: rail \"x\" is not a decimal number "
                        "0..32767; it takes no port (form: device[:port[:rail[:plane]]])" },
        { "mlx5_0:1:-1", "entry \"mlx5_0:1:-1\" refused: rail \"-1\" is not a decimal number 0..32767" },
        { "mlx5_0:1:32768", "entry \"mlx5_0:1:32768\" refused: rail \"32768\" is not a decimal number 0..32767" },
        { "mlx5_0:1:0x1", "entry \"mlx5_0:1:0x1\" refused: rail \"0x1\" is not a decimal number 0..32767" },
        { "mlx5_0:1:2:99999999999", "refused: plane \"99999999999\" is not a decimal number 0..32767" },
        { "mlx5_0:1:2: 3", "refused: plane \" 3\" is not a decimal number 0..32767" },
        { "mlx5_0:1:2:3:4", "entry \"mlx5_0:1:2:3:4\" refused: more than 4 fields (device:port:rail:plane)" },
        { "mlx5_0:x", "entry \"mlx5_0:x\" refused: port \"x\" is not a decimal number 1..255" },
        { "mlx5_0:0", "entry \"mlx5_0:0\" refused: port \"0\" is not a decimal number 1..255" },
        { "mlx5_0:256:1", "refused: port \"256\" is not a decimal number 1..255" },
        { ":1:2", "entry \":1:2\" refused: no device name" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rail = 9, plane = 9, nw = 0;
        EXPECT_EQ_INT(0, hca(bad[i].spec, "mlx5_0", 1, &rail, &plane, &nw));
        EXPECT_EQ_INT(1, nw);
        EXPECT_EQ_INT(1, lines(warns));
        EXPECT_TRUE(strstr(warns, bad[i].why) != NULL);
        if (!strstr(warns, bad[i].why))
            tap_diag("RAILNET_HCA=%s: expected \"%s\" in: %s", bad[i].spec, bad[i].why, warns);
        EXPECT_EQ_INT(-1, rail);
        EXPECT_EQ_INT(-1, plane);
    }
    /* the good entries beside a bad one still work */
    int rail = 9, plane = 9, nw = 0;
    EXPECT_EQ_INT(1, hca("mlx5_0:1:x,mlx5_1:1:2:3,mlx5_2:7:1:2:3", "mlx5_1", 1, &rail, &plane, &nw));
    EXPECT_EQ_INT(2, rail);
    EXPECT_EQ_INT(3, plane);
    EXPECT_EQ_INT(2, nw);
    EXPECT_EQ_INT(2, lines(warns));
    EXPECT_EQ_INT(0, hca("mlx5_0:1:x,mlx5_1:1:2:3", "mlx5_0", 1, NULL, NULL, NULL));
    /* a name longer than a verbs device name */
    char longname[100];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    EXPECT_EQ_INT(0, hca(longname, "aaaa", 1, NULL, NULL, &nw));
    EXPECT_EQ_INT(1, nw);
    EXPECT_TRUE(strstr(warns, "refused: a device name of 99 characters (at most 63)") != NULL);
    /* a refused entry of an exclude list excludes nothing */
    EXPECT_EQ_INT(1, hca("^mlx5_0:x", "mlx5_0", 1, NULL, NULL, &nw));
    EXPECT_EQ_INT(1, nw);
    EXPECT_TRUE(strstr(warns, "entry \"mlx5_0:x\" refused: port \"x\" is not a decimal number 1..255; it excludes "
                              "nothing") != NULL);
}

TAP_CASE(test_hca_exclude_entry_with_rail_or_plane_warns_and_still_excludes)
{
    int rail = 9, plane = 9, nw = 0;
    EXPECT_EQ_INT(0, hca("^mlx5_0:1:2:3", "mlx5_0", 1, &rail, &plane, &nw));
    EXPECT_EQ_INT(1, nw);
    EXPECT_EQ_INT(1, lines(warns));
    EXPECT_TRUE(strstr(warns, "RAILNET_HCA=^mlx5_0:1:2:3: entry \"mlx5_0:1:2:3\" names a rail or plane in an exclude "
                              "list (^), where they mean nothing; they are ignored and the entry still excludes") !=
                NULL);
    EXPECT_EQ_INT(-1, rail);
    EXPECT_EQ_INT(-1, plane);
    /* a port it does not exclude is taken with no rail or plane */
    EXPECT_EQ_INT(1, hca("^mlx5_0:1::3", "mlx5_0", 2, &rail, &plane, &nw));
    EXPECT_EQ_INT(1, nw);
    EXPECT_EQ_INT(-1, rail);
    EXPECT_EQ_INT(-1, plane);
    /* an empty port field in an exclude list excludes every port */
    EXPECT_EQ_INT(0, hca("^mlx5_0:", "mlx5_0", 2, NULL, NULL, &nw));
    EXPECT_EQ_INT(0, nw);
}

TAP_CASE(test_ids_of_merged_parts_are_kept_only_when_equal)
{
    EXPECT_EQ_INT(3, devices_id_combine(3, 3));
    EXPECT_EQ_INT(-1, devices_id_combine(3, 4));
    EXPECT_EQ_INT(-1, devices_id_combine(3, -1));
    EXPECT_EQ_INT(-1, devices_id_combine(-1, 3));
    EXPECT_EQ_INT(-1, devices_id_combine(-1, -1));
}

TAP_CASE(test_port_speed_from_verbs_codes)
{
    EXPECT_EQ_INT(400000, devices_port_speed_mbps(128, 2)); /* NDR 4x */
    EXPECT_EQ_INT(200000, devices_port_speed_mbps(64, 2));  /* HDR 4x */
    EXPECT_EQ_INT(100000, devices_port_speed_mbps(32, 2));  /* EDR 4x */
    EXPECT_EQ_INT(50000, devices_port_speed_mbps(32, 16));  /* EDR 2x */
    EXPECT_EQ_INT(0, devices_port_speed_mbps(3, 2));
    EXPECT_EQ_INT(0, devices_port_speed_mbps(64, 3));
}

/* sysfs's leading decimals, in tenths */
TAP_CASE(test_tenths_prefix_of_sysfs_texts)
{
    unsigned long long v = 7;
    const char *end = NULL;
    EXPECT_EQ_INT(0, parse_tenths_prefix("16.0 GT/s PCIe", 10000, &v, &end));
    EXPECT_EQ_U64(160, v);
    EXPECT_STREQ(" GT/s PCIe", end);
    EXPECT_EQ_INT(0, parse_tenths_prefix("2.5 Gb/sec (1X SDR)", 100, &v, NULL));
    EXPECT_EQ_U64(25, v);
    EXPECT_EQ_INT(0, parse_tenths_prefix("400", 100000, &v, &end));
    EXPECT_EQ_U64(4000, v);
    EXPECT_STREQ("", end);
    EXPECT_EQ_INT(0, parse_tenths_prefix("2.57x", 100, &v, &end)); /* digits past the first dropped */
    EXPECT_EQ_U64(25, v);
    EXPECT_STREQ("x", end);
    EXPECT_EQ_INT(0, parse_tenths_prefix("8.GT/s", 100, &v, &end)); /* a dot without a digit stays */
    EXPECT_EQ_U64(80, v);
    EXPECT_STREQ(".GT/s", end);
    v = 7;
    EXPECT_EQ_INT(-1, parse_tenths_prefix("1000.1", 10000, &v, NULL)); /* 10001 tenths */
    EXPECT_EQ_INT(-1, parse_tenths_prefix("99999999999999999999999", 10000, &v, NULL));
    EXPECT_EQ_INT(-1, parse_tenths_prefix(" 8", 100, &v, NULL));
    EXPECT_EQ_INT(-1, parse_tenths_prefix("-8", 100, &v, NULL));
    EXPECT_EQ_INT(-1, parse_tenths_prefix(".5", 100, &v, NULL));
    EXPECT_EQ_U64(7, v); /* left alone on error */
}

/* sysfs's texts of a PCIe link, as kernels of several ages write them */
TAP_CASE(test_pcie_link_from_sysfs_texts)
{
    EXPECT_EQ_U64(252061, hostlink_parse_mbps("16.0 GT/s PCIe", "16")); /* 4.0 x16 */
    EXPECT_EQ_U64(63015, hostlink_parse_mbps("8 GT/s", "8\n"));         /* 3.0 x8 */
    EXPECT_EQ_U64(504123, hostlink_parse_mbps("32.0 GT/s PCIe", "16"));
    EXPECT_EQ_U64(968000, hostlink_parse_mbps("64.0 GT/s PCIe", "16")); /* FLIT: 242/256 */
    EXPECT_EQ_U64(16000, hostlink_parse_mbps("5.0 GT/s", "4"));         /* 8b/10b */
    EXPECT_EQ_U64(2000, hostlink_parse_mbps("2.5 GT/s PCIe", "1"));
    EXPECT_EQ_U64(0, hostlink_parse_mbps("Unknown", "16"));   /* a VF's */
    EXPECT_EQ_U64(0, hostlink_parse_mbps("16.0 GT/s PCIe", "0"));
    EXPECT_EQ_U64(0, hostlink_parse_mbps("16.0 GT/s PCIe", "x16"));
    EXPECT_EQ_U64(0, hostlink_parse_mbps("16.0 GT/s PCIe", "64"));
    EXPECT_EQ_U64(0, hostlink_parse_mbps("12.0 GT/s", "8"));  /* no such rate */
    EXPECT_EQ_U64(0, hostlink_parse_mbps("16.0 Gb/s", "8"));
    EXPECT_EQ_U64(0, hostlink_parse_mbps("", "8"));
    EXPECT_EQ_U64(0, hostlink_parse_mbps("nan GT/s", "8"));
    EXPECT_EQ_U64(0, hostlink_parse_mbps("-8.0 GT/s", "8"));
    EXPECT_EQ_U64(0, hostlink_parse_mbps("99999999999999999999 GT/s", "8"));
    EXPECT_EQ_U64(63015, hostlink_parse_mbps("8.0GT/s", "8"));
    EXPECT_EQ_U64(0, hostlink_parse_mbps(NULL, "8"));
    EXPECT_EQ_U64(0, hostlink_mbps(NULL, NULL, 0));
    EXPECT_EQ_U64(0, hostlink_mbps("/nonexistent", NULL, 0));
}

/* ---- rail_topo on hand-made sysfs trees ---- */

static char tmp_top[] = "/tmp/railnet_topo_XXXXXX"; /* made by main, one tree per case under it */
static char tree[PATH_MAX];                          /* this case's, resolved */

static void mkdir_p(const char *path)
{
    char at[PATH_MAX + 256];
    snprintf(at, sizeof(at), "%s", path);
    for (char *p = at + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(at, 0755);
            *p = '/';
        }
    mkdir(at, 0755);
}

static void write_text(const char *dir, const char *name, const char *text)
{
    char path[PATH_MAX + 320];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    EXPECT_TRUE(f != NULL);
    fprintf(f, "%s\n", text);
    fclose(f);
}

/* A PCI function at <tree>/devices/<path> of that vendor and class, linked
 * from bus/pci/devices as sysfs links it. */
static void topo_fn(const char *path, const char *vendor, const char *class)
{
    char dir[PATH_MAX + 256], links[PATH_MAX + 32], link[PATH_MAX + 320], target[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/devices/%.200s", tree, path);
    mkdir_p(dir);
    write_text(dir, "vendor", vendor);
    write_text(dir, "class", class);
    snprintf(links, sizeof(links), "%s/bus/pci/devices", tree);
    mkdir_p(links);
    snprintf(link, sizeof(link), "%s/%.200s", links, strrchr(path, '/') + 1);
    snprintf(target, sizeof(target), "../../../devices/%s", path);
    EXPECT_EQ_INT(0, symlink(target, link));
}

static void topo_tree(const char *name)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/%s", tmp_top, name);
    mkdir_p(dir);
    EXPECT_TRUE(realpath(dir, tree) != NULL);
}

/* rail_topo_rail of <tree>/class/infiniband/nic0 whose PCI function is
 * <tree>/devices/<nic> (resolved, as devices.c passes it). */
static int topo_rail(const char *nic, int max, char *why, size_t whylen)
{
    char ib[PATH_MAX + 32], fn[PATH_MAX + 32];
    snprintf(ib, sizeof(ib), "%s/class/infiniband/nic0", tree);
    snprintf(fn, sizeof(fn), "%s/devices/%s", tree, nic);
    char *real = realpath(fn, NULL);
    EXPECT_TRUE(real != NULL);
    int rail = rail_topo_rail(ib, real, max, why, whylen);
    free(real);
    return rail;
}

#define BRIDGE "0x8086", "0x060400"
#define SW "pci0000:00/0000:00:01.0/0000:10:00.0"

/* Only NVIDIA 3D and VGA functions are GPUs (not an NVSwitch's bridge
 * function, not another vendor's GPU), numbered by domain, bus, device,
 * function whatever the order of bus/pci/devices. */
TAP_CASE(test_rail_topo_numbers_nvidia_gpus_in_bus_order)
{
    char why[RAIL_TOPO_WHY_LEN];
    topo_tree("order");
    topo_fn("pci0000:00/0000:00:01.0", BRIDGE);
    topo_fn(SW, BRIDGE);
    topo_fn(SW "/0000:11:00.0", BRIDGE);
    topo_fn(SW "/0000:11:00.0/0000:12:00.0", "0x15b3", "0x020700");
    topo_fn(SW "/0000:11:01.0", BRIDGE);
    topo_fn(SW "/0000:11:01.0/0000:13:00.0", "0x10de", "0x068000");
    topo_fn(SW "/0000:11:02.0", BRIDGE);
    topo_fn(SW "/0000:11:02.0/0000:14:00.0", "0x1002", "0x030000");
    topo_fn(SW "/0000:11:03.0", BRIDGE);
    topo_fn(SW "/0000:11:03.0/0000:15:00.0", "0x10de", "0x030000");
    topo_fn("pci0001:00/0001:00:01.0", BRIDGE);
    topo_fn("pci0001:00/0001:00:01.0/0001:01:00.0", "0x10de", "0x030200");
    topo_fn("pci0000:00/0000:00:02.0", BRIDGE);
    topo_fn("pci0000:00/0000:00:02.0/0000:05:00.0", "0x10DE", "0x030200");
    EXPECT_EQ_INT(1, topo_rail(SW "/0000:11:00.0/0000:12:00.0", 100, why, sizeof(why)));
    EXPECT_STREQ("GPU 1 of 3, 0000:15:00.0, shares its PCIe switch 0000:10:00.0", why);
    EXPECT_EQ_INT(-1, topo_rail(SW "/0000:11:00.0/0000:12:00.0", 0, why, sizeof(why)));
    EXPECT_STREQ("the GPU on its PCIe switch, 0000:15:00.0, is number 1, above 0", why);
}

/* A NIC on a root port is on no switch: a GPU on another root port of the
 * same root complex is not taken for its neighbour. */
TAP_CASE(test_rail_topo_never_guesses_across_a_root_complex)
{
    char why[RAIL_TOPO_WHY_LEN];
    topo_tree("root");
    topo_fn("pci0000:00/0000:00:01.0", BRIDGE);
    topo_fn("pci0000:00/0000:00:01.0/0000:01:00.0", "0x15b3", "0x020700");
    topo_fn("pci0000:00/0000:00:02.0", BRIDGE);
    topo_fn("pci0000:00/0000:00:02.0/0000:02:00.0", "0x10de", "0x030200");
    EXPECT_EQ_INT(-1, topo_rail("pci0000:00/0000:00:01.0/0000:01:00.0", 100, why, sizeof(why)));
    EXPECT_STREQ("its PCI function 0000:01:00.0 is behind no PCIe switch (its bridge is on the root complex)", why);
}

TAP_CASE(test_rail_topo_a_switch_without_a_gpu_gives_no_rail)
{
    char why[RAIL_TOPO_WHY_LEN];
    topo_tree("nogpu");
    topo_fn("pci0000:00/0000:00:01.0", BRIDGE);
    topo_fn(SW, BRIDGE);
    topo_fn(SW "/0000:11:00.0", BRIDGE);
    topo_fn(SW "/0000:11:00.0/0000:12:00.0", "0x15b3", "0x020700");
    topo_fn("pci0000:00/0000:00:02.0", BRIDGE);
    topo_fn("pci0000:00/0000:00:02.0/0000:20:00.0", BRIDGE);
    topo_fn("pci0000:00/0000:00:02.0/0000:20:00.0/0000:21:00.0", BRIDGE);
    topo_fn("pci0000:00/0000:00:02.0/0000:20:00.0/0000:21:00.0/0000:22:00.0", "0x10de", "0x030200");
    EXPECT_EQ_INT(-1, topo_rail(SW "/0000:11:00.0/0000:12:00.0", 100, why, sizeof(why)));
    EXPECT_STREQ("no GPU shares its PCIe switch 0000:10:00.0 (1 GPU(s) on the host)", why);
}

TAP_CASE(test_rail_topo_needs_a_class_infiniband_path_and_a_pci_function)
{
    char why[RAIL_TOPO_WHY_LEN];
    EXPECT_EQ_INT(-1, rail_topo_rail("/sys/devices/virtual/nic0", "/sys/devices/pci0000:00/0000:00:01.0", 100, why,
                                     sizeof(why)));
    EXPECT_STREQ("its sysfs path /sys/devices/virtual/nic0 is not <root>/class/infiniband/<name>", why);
    EXPECT_EQ_INT(-1, rail_topo_rail("/sys/class/infiniband/", "/x/0000:01:00.0", 100, why, sizeof(why)));
    EXPECT_EQ_INT(-1, rail_topo_rail("/sys/class/infiniband/nic0", NULL, 100, why, sizeof(why)));
    EXPECT_STREQ("/sys/class/infiniband/nic0/device names no PCI function", why);
}

int main(int argc, char **argv)
{
    if (!mkdtemp(tmp_top)) {
        perror(tmp_top);
        return 1;
    }
    int rc = tap_run(argc, argv);
    if (tap_rm_tree(tmp_top))
        fprintf(stderr, "cannot remove %s: %s\n", tmp_top, strerror(errno));
    return rc;
}
