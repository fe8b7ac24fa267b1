#!/bin/bash
# tests/softnic/test_softnic_spin.sh: SOFTNIC_SPIN_US=N makes softnic's NIC
# threads poll N us for work before they sleep (spin.c). The data-path and
# fault cases (test_softnic_ops, test_softnic_atomics) and the plugin's
# striped traffic (netdriver: 2 ranks, 2 QPs over both ports, random sizes,
# every byte checked) must hold unchanged while they spin (the threads drop
# their locks to spin and read the state again after). What spinning buys
# is a benchmark's business, not this test's. A value above the cap is
# refused with a line naming it and softnic runs without spinning, and so is
# one past 32 bits (not wrapped under the cap). That the threads spin at all,
# and that spins find work, is counted (test_softnic_spin_counts).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/softnic/sn_env.sh"

tap_plan 6
sn_tap_cases_with with_spinning_threads SOFTNIC_SPIN_US=50 test_softnic_ops test_softnic_atomics

# the threads do spin, and some spins find the next post or packet
# (softnic_ctl_spin_counts; the same program run plainly by make check
# asserts that none begins with spinning off)
if sn_tap_run 120 test_softnic_spin_counts SOFTNIC_SPIN_US=1000; then
    tap_ok "threads_spin_and_find_work $(printf '%s\n' "$SN_TAP_OUT" | sed -n 's/^# SOFTNIC_SPIN_US=1000: //p')"
else
    tap_not_ok "threads_spin_and_find_work" "$SN_TAP_WHY"
fi

nd=$top_builddir/tests/netdriver/netdriver
plugin=$top_builddir/.libs/libnccl-net-railnet.so
out=$(SOFTNIC_SPIN_US=50 timeout 300 "$nd" --plugin "$plugin" traffic --ranks 2 --iters 200 --max-size 1M \
      --seed 11 --timeout 120 2>&1)
rc=$?
if [ $rc -eq 0 ]; then
    tap_ok "plugin_traffic_with_spinning_threads"
else
    tap_not_ok "plugin_traffic_with_spinning_threads" "rc=$rc: $(echo "$out" | tail -n 8 | sed 's/^/# /')"
fi

if ! command -v ibv_devices >/dev/null 2>&1; then
    tap_skip "spin_above_the_cap_refused_by_name" "no ibv_devices (rdma-core's tools; scripts/bootstrap installs ibverbs-utils)"
    tap_skip "spin_past_32_bits_refused_not_wrapped" "no ibv_devices"
    tap_done
    exit
fi
# refused CASE VALUE TEXT: with SOFTNIC_SPIN_US=VALUE softnic still lists
# softnic0 and says TEXT
refused() {
    out=$(SOFTNIC_SPIN_US=$2 ibv_devices 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && echo "$out" | grep -q "$3" && echo "$out" | grep -q softnic0; then
        tap_ok "$1"
    else
        tap_not_ok "$1" "rc=$rc: $(echo "$out" | head -n 5 | sed 's/^/# /')"
    fi
}
refused spin_above_the_cap_refused_by_name 200000 'SOFTNIC_SPIN_US=200000 above'
# 2^32 + 50 must not wrap to 50 (under the cap) on its way into 32 bits
refused spin_past_32_bits_refused_not_wrapped 4294967346 'bad SOFTNIC_SPIN_US=4294967346'
tap_done
