#!/bin/sh
# tests/plugin/plugin_load.sh: the plugin as NCCL loads it. Its exported
# symbols are the ABI tables only (ncclNetPlugin_v8 ... _v12,
# ncclGinPlugin_v11 ... _v14, ncclRmaPlugin_v13 and _v14); init succeeds and reports 0 devices without an RDMA library or
# device; on softnic the properties are what docs/design.md promises (a merged
# device's speed at most its PCIe link's); RAILNET_*
# values steer discovery and bad ones are named in a WARN.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
plugin=$top_builddir/.libs/libnccl-net-railnet.so
nd=$top_builddir/tests/netdriver/netdriver
sn=$top_builddir/tests/softnic
[ -f "$plugin" ] || tap_skip_all "plugin not built"
tap_plan 13
out=$(mktemp); trap 'rm -f "$out"' EXIT

syms=$(nm -D --defined-only "$plugin" | awk '{print $3}' | grep -v '^_' | LC_ALL=C sort | tr '\n' ' ')
want="ncclGinPlugin_v11 ncclGinPlugin_v12 ncclGinPlugin_v13 ncclGinPlugin_v14 ncclNetPlugin_v10 ncclNetPlugin_v11 ncclNetPlugin_v12 ncclNetPlugin_v8 ncclNetPlugin_v9 ncclRmaPlugin_v13 ncclRmaPlugin_v14 "
[ "$syms" = "$want" ] && tap_ok exports_only_the_net_gin_and_rma_tables || tap_not_ok exports_only_the_net_gin_and_rma_tables "exported: $syms"

RAILNET_IBVERBS_LIB=/nonexistent/libibverbs.so.1 "$nd" --plugin "$plugin" probe >"$out" 2>&1
if [ $? -eq 0 ] && grep -q '^devices: 0' "$out" && grep -q 'INFO NET/railnet: no RDMA devices: cannot load /nonexistent' "$out"; then
    tap_ok no_verbs_library_init_ok_zero_devices_one_info_line
else tap_not_ok no_verbs_library_init_ok_zero_devices_one_info_line "$(cat "$out")"; fi

# rdma-core's own library on a host without RDMA hardware: no device either
"$nd" --plugin "$plugin" probe >"$out" 2>&1
if [ $? -eq 0 ] && grep -q '^devices: 0' "$out"; then tap_ok system_libibverbs_without_nic_reports_zero_devices
else tap_not_ok system_libibverbs_without_nic_reports_zero_devices "$(cat "$out")"; fi

export LD_LIBRARY_PATH=$sn${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# a fixed link per port (200 Gb/s), not this host's calibration: the cases
# below check how the plugin sums and reports it
export SOFTNIC_LINK_RATE=25G
"$nd" --plugin "$plugin" probe >"$out" 2>&1
if grep -q '^devices: 1$' "$out" &&
   grep -q '^device 0: name=softnic0+softnic0 .* ptrSupport=0x1 regIsGlobal=1 speed=400000 port=1 .*maxRecvs=8 netDeviceType=0' "$out"; then
    tap_ok softnic_dual_port_nic_is_one_merged_device_with_summed_speed
else tap_not_ok softnic_dual_port_nic_is_one_merged_device_with_summed_speed "$(cat "$out")"; fi
grep -q 'softnic0: 2 active Ethernet ports merged into one device' "$out" && tap_ok merge_decision_logged ||
    tap_not_ok merge_decision_logged "$(grep railnet "$out")"
grep -q 'GID index 0 (::ffff:127.0.0.1, RoCE v2) picked automatically' "$out" && tap_ok roce_v2_ipv4_gid_auto_picked ||
    tap_not_ok roce_v2_ipv4_gid_auto_picked "$(grep GID "$out")"

# with the NIC's sysfs, its PCIe link caps the merged speed: softnic's two
# 200 Gb/s ports stand for a PCIe 4.0 x16 link (252 Gb/s of data), as two
# HDR ports on a ConnectX-6 do
sys=$(mktemp -d); trap 'rm -f "$out"; rm -rf "$sys"' EXIT
SOFTNIC_SYSFS=$sys NCCL_DEBUG=INFO "$nd" --plugin "$plugin" probe >"$out" 2>&1
if grep -q "^device 0: name=softnic0+softnic0 pciPath=$sys/class/infiniband/softnic0/device .*speed=252061 port=1" "$out" &&
   grep -q 'device 0: softnic0 port 1+2 (RoCE, 252061 Mb/s: ports 400000 Mb/s, capped by its PCIe link 16.0 GT/s x16, ports merged)' "$out"; then
    tap_ok merged_speed_capped_by_the_pcie_link_in_sysfs
else tap_not_ok merged_speed_capped_by_the_pcie_link_in_sysfs "$(grep -E '^device|railnet: device' "$out")"; fi

RAILNET_MERGE_PORTS=0 "$nd" --plugin "$plugin" probe >"$out" 2>&1
if grep -q '^devices: 2$' "$out" && grep -q '^device 0: name=softnic0:1 .*speed=200000 port=1' "$out" &&
   grep -q '^device 1: name=softnic0:2 .*speed=200000 port=2' "$out"; then
    tap_ok merge_ports_0_gives_one_device_per_port
else tap_not_ok merge_ports_0_gives_one_device_per_port "$(cat "$out")"; fi
g0=$(sed -n 's/^device 0: .*guid=\([^ ]*\).*/\1/p' "$out"); g1=$(sed -n 's/^device 1: .*guid=\([^ ]*\).*/\1/p' "$out")
[ -n "$g0" ] && [ "$g0" = "$g1" ] && tap_ok ports_of_one_nic_share_the_guid || tap_not_ok ports_of_one_nic_share_the_guid "$g0 / $g1"

RAILNET_HCA==softnic0:2 "$nd" --plugin "$plugin" probe >"$out" 2>&1
grep -q '^devices: 1$' "$out" && grep -q '^device 0: name=softnic0 .*port=2' "$out" && tap_ok hca_exact_port_filter ||
    tap_not_ok hca_exact_port_filter "$(cat "$out")"
RAILNET_HCA=^softnic "$nd" --plugin "$plugin" probe >"$out" 2>&1
grep -q '^devices: 0$' "$out" && grep -q 'left out by RAILNET_HCA=^softnic' "$out" && tap_ok hca_exclude_filter ||
    tap_not_ok hca_exclude_filter "$(cat "$out")"

RAILNET_QPS_PER_CONN=99 RAILNET_IB_TIMEOUT=abc "$nd" --plugin "$plugin" probe >"$out" 2>&1
if [ $? -eq 0 ] && grep -q 'WARN NET/railnet: RAILNET_QPS_PER_CONN=99 is not valid (accepted: 1..16); using the default' "$out" &&
   grep -q 'WARN NET/railnet: RAILNET_IB_TIMEOUT=abc is not valid (accepted: 1..31)' "$out"; then
    tap_ok bad_values_warn_with_name_value_range_and_init_goes_on
else tap_not_ok bad_values_warn_with_name_value_range_and_init_goes_on "$(grep -i railnet_ "$out")"; fi

RAILNET_GID_INDEX=5 "$nd" --plugin "$plugin" probe >"$out" 2>&1
grep -q '^devices: 0$' "$out" && grep -q 'RAILNET_GID_INDEX=5 is not a valid GID' "$out" && tap_ok invalid_gid_index_leaves_roce_port_out ||
    tap_not_ok invalid_gid_index_leaves_roce_port_out "$(cat "$out")"
tap_done
