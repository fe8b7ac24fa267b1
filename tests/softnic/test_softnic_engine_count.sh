#!/bin/bash
# tests/softnic/test_softnic_engine_count.sh: SOFTNIC_ENGINES=N runs a
# process's QPs on N engine threads (engine.c). By default a host of few
# CPUs gets one engine; with 4, more than such a host has CPUs, a QP's
# requester, completer and responders run on different engines at once, and
# the data-path, fault and fast-path cases (test_softnic_ops,
# test_softnic_faults, test_softnic_fastpath) must hold unchanged. A value
# above 64 is refused with a line naming it and the default is used; so
# is a SOFTNIC_NIC_CPUS that is no CPU list (test_softnic_engines has the
# list's effect).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/softnic/sn_env.sh"

tap_plan 5
sn_tap_cases_with on_4_engines SOFTNIC_ENGINES=4 test_softnic_ops test_softnic_faults test_softnic_fastpath

if ! command -v ibv_devices >/dev/null 2>&1; then
    tap_skip "engines_above_64_refused_by_name" "no ibv_devices (rdma-core's tools; scripts/bootstrap installs ibverbs-utils)"
    tap_skip "nic_cpus_not_a_list_refused_by_name" "no ibv_devices (rdma-core's tools; scripts/bootstrap installs ibverbs-utils)"
    tap_done
    exit
fi
out=$(SOFTNIC_ENGINES=65 ibv_devices 2>&1)
rc=$?
if [ $rc -eq 0 ] && echo "$out" | grep -q 'SOFTNIC_ENGINES=65 above 64' && echo "$out" | grep -q softnic0; then
    tap_ok "engines_above_64_refused_by_name"
else
    tap_not_ok "engines_above_64_refused_by_name" "rc=$rc: $(echo "$out" | head -n 5 | sed 's/^/# /')"
fi
out=$(SOFTNIC_NIC_CPUS=3-1 ibv_devices 2>&1)
rc=$?
if [ $rc -eq 0 ] && echo "$out" | grep -q 'bad SOFTNIC_NIC_CPUS=3-1' && echo "$out" | grep -q softnic0; then
    tap_ok "nic_cpus_not_a_list_refused_by_name"
else
    tap_not_ok "nic_cpus_not_a_list_refused_by_name" "rc=$rc: $(echo "$out" | head -n 5 | sed 's/^/# /')"
fi
tap_done
