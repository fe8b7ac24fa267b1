/* tests/plugin/test_config.c: the pure parts of the core: RAILNET_* value
 * parsers, the RAILNET_HCA filter, port speed from verbs codes. */
#include "../tap.h"
#include "plugin/ib/config.h"
#include "plugin/ib/devices.h"
#include "plugin/ib/hostlink.h"
#include "plugin/ib/parse.h"

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

TAP_CASE(test_hca_filter_prefix_exact_port_and_exclude)
{
    EXPECT_EQ_INT(1, devices_filter_match("", "mlx5_0", 1));
    EXPECT_EQ_INT(1, devices_filter_match("mlx5", "mlx5_0", 1));
    EXPECT_EQ_INT(1, devices_filter_match("mlx5_0:1,mlx5_1", "mlx5_1", 2));
    EXPECT_EQ_INT(0, devices_filter_match("mlx5_0:1,mlx5_1", "mlx5_0", 2));
    EXPECT_EQ_INT(0, devices_filter_match("=mlx5_1", "mlx5_10", 1));
    EXPECT_EQ_INT(1, devices_filter_match("mlx5_1", "mlx5_10", 1));
    EXPECT_EQ_INT(0, devices_filter_match("^mlx5_0", "mlx5_0", 1));
    EXPECT_EQ_INT(1, devices_filter_match("^mlx5_0", "mlx5_1", 1));
    EXPECT_EQ_INT(1, devices_filter_match("^=mlx5_1", "mlx5_10", 1));
    EXPECT_EQ_INT(0, devices_filter_match("^mlx5_0:2", "mlx5_0", 2));
    EXPECT_EQ_INT(1, devices_filter_match("^mlx5_0:2", "mlx5_0", 1));
    EXPECT_EQ_INT(0, devices_filter_match("mlx5_0:x", "mlx5_0", 1));
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

int main(int argc, char **argv) { return tap_run(argc, argv); }
