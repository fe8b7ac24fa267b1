#!/bin/sh
# tests/plugin/two_devices.sh: softnic as two one-port devices (the layout of
# a ConnectX-4 or later, one device per port; bench/gpu_nccl_ib_vs_railnet.sh
# compares both transports on it). railnet must expose each as its own NCCL
# device (nothing to merge: one port each), carry traffic on both, put a
# connection's bytes on the device it was opened on, and honour RAILNET_HCA
# (its device:port:rail:plane entries: net v12's railId/planeId and the
# devices' INFO lines).
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
plugin_on_softnic
nd=$top_builddir/tests/netdriver/netdriver
[ -x "$nd" ] || tap_skip_all "netdriver not built"
export SOFTNIC_DEVICES="softnic0:127.0.0.1;softnic1:127.0.0.2"
tap_plan 5
out=$(mktemp); trap 'rm -f "$out"' EXIT
run() { "$nd" --plugin "$plugin" "$@" >"$out" 2>&1; }
show() { grep -v ' INFO ' "$out" | tail -n 8 | tr '\n' ' '; }

run probe; st=$?
if grep -q '^devices: 2$' "$out" && grep -q '^device 0: name=softnic0 .* port=1 ' "$out" &&
    grep -q '^device 1: name=softnic1 .* port=1 ' "$out"; then
    tap_ok two_one_port_devices_are_two_nccl_devices
else
    tap_not_ok two_one_port_devices_are_two_nccl_devices "exit $st; $(show)"
fi
run traffic --ranks 2 --devs 2 --iters 20 --max-size 1M --seed 5 --timeout 120; st=$?
if [ $st -eq 0 ] && grep -q '^netdriver traffic: ok' "$out"; then
    tap_ok traffic_on_both_devices_is_byte_exact
else
    tap_not_ok traffic_on_both_devices_is_byte_exact "exit $st; $(show)"
fi
# 20 MiB through device 1: the sender's counters put them all on softnic1
RAILNET_STATS=1 run bw --dev 1 --size 1M --iters 20 --timeout 60; st=$?
if [ $st -eq 0 ] && grep -q 'stats: send softnic1 port 1 total: 20971520 bytes' "$out" &&
    ! grep -Eq 'stats: send softnic0 port 1 total: [1-9]' "$out"; then
    tap_ok a_connection_on_device_1_moves_its_bytes_there
else
    tap_not_ok a_connection_on_device_1_moves_its_bytes_there "exit $st; $(grep 'stats: send' "$out" | tr '\n' ' ') $(show)"
fi
RAILNET_HCA==softnic1 run probe; st=$?
if grep -q '^devices: 1$' "$out" && grep -q '^device 0: name=softnic1 ' "$out"; then
    tap_ok railnet_hca_keeps_the_named_device
else
    tap_not_ok railnet_hca_keeps_the_named_device "exit $st; $(show)"
fi
RAILNET_HCA='softnic0:1:1:2,softnic1:1::4' run --net-version 12 probe; st=$?
if [ $st -eq 0 ] && grep -q '^device 0: forceFlush=.* railId=1 planeId=2$' "$out" &&
    grep -q '^device 1: forceFlush=.* railId=-1 planeId=4$' "$out" &&
    grep -q 'NET/railnet: device 0: softnic0 port 1 (RoCE, [0-9]* Mb/s), rail 1, plane 2, pci ' "$out" &&
    grep -q 'NET/railnet: device 1: softnic1 port 1 (RoCE, [0-9]* Mb/s), rail undefined (.* names no PCI function), plane 4, pci ' "$out"; then
    tap_ok railnet_hca_rails_and_planes_reach_v12_and_the_device_lines
else
    tap_not_ok railnet_hca_rails_and_planes_reach_v12_and_the_device_lines "exit $st; $(grep -E 'railId|device [01]: softnic' "$out" | tr '\n' ' ')"
fi
tap_done
