#!/bin/sh
# tests/plugin/faults.sh: faults in the middle of NCCL-like traffic end in a
# clear error from test() on the surviving side, within a bounded time,
# never a hang or a crash (netdriver's timeout kills a hung rank and fails).
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
plugin_on_softnic
nd=$top_builddir/tests/netdriver/netdriver
# short QP timeouts so that retries run out in well under a second
export RAILNET_IB_TIMEOUT=12 RAILNET_IB_RETRY_CNT=3
tap_plan 4
out=$(mktemp); trap 'rm -f "$out"' EXIT

"$nd" --plugin "$plugin" traffic --ranks 2 --iters 0 --max-size 1M --kill-rank 1 --kill-after-ms 300 --timeout 40 >"$out" 2>&1
st=$?
if [ $st -eq 0 ] && grep -q 'rank 0: .* returned [26]' "$out" && grep -q 'WARN NET/railnet: device softnic0' "$out"; then
    tap_ok peer_killed_mid_transfer_gives_error_not_hang
else tap_not_ok peer_killed_mid_transfer_gives_error_not_hang "exit $st; $(grep -v ' INFO ' "$out" | tail -n 12)"; fi
grep -E 'WARN NET/railnet: device softnic0 port [12] QP 0x[0-9a-f]+' "$out" | head -n 1 | grep -q . &&
    tap_ok peer_killed_warn_names_device_port_qp || tap_not_ok peer_killed_warn_names_device_port_qp "$(grep WARN "$out" | head)"

# with RAILNET_FAILOVER=0: the connection fails (with failover on, the
# default, it goes on over port 1: tests/plugin/failover.sh)
RAILNET_FAILOVER=0 SOFTNIC_PORT_OPTS=softnic0:2:down_after_bytes=30000000 \
    "$nd" --plugin "$plugin" traffic --ranks 2 --iters 0 --max-size 1M --expect-error --timeout 40 >"$out" 2>&1
st=$?
if [ $st -eq 0 ] && grep -q 'returned [26]' "$out" && grep -q 'WARN NET/railnet: device softnic0 port 2' "$out"; then
    tap_ok port_down_mid_transfer_gives_error_naming_port
else tap_not_ok port_down_mid_transfer_gives_error_naming_port "exit $st; $(grep -v ' INFO ' "$out" | tail -n 12)"; fi

# the same traffic without the fault completes: the errors above come from the faults
"$nd" --plugin "$plugin" traffic --ranks 2 --iters 40 --max-size 1M --timeout 40 >"$out" 2>&1 &&
    grep -q '^netdriver traffic: ok' "$out" && tap_ok same_traffic_without_fault_completes ||
    tap_not_ok same_traffic_without_fault_completes "$(grep -v ' INFO ' "$out" | tail -n 12)"
tap_done
