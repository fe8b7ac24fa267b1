#!/bin/sh
# tests/plugin/net_versions.sh: every net table the plugin exports (v8 ...
# v12), each driven by netdriver as NCCL's proxy drives it (--net-version:
# size_t sizes, v10's connect config, v11/v12's context, profiler handles
# and a callback that checks the events are balanced), on softnic: what
# probe reports and verified multi-rank traffic through each.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
plugin_on_softnic
nd=$top_builddir/tests/netdriver/netdriver
[ -x "$nd" ] || tap_skip_all "netdriver not built"
tap_plan 12
out=$(mktemp); trap 'rm -f "$out"' EXIT
run() { "$nd" --plugin "$plugin" "$@" >"$out" 2>&1; }
show() { grep -v ' INFO ' "$out" | tail -n 8 | tr '\n' ' '; }

# probe: the table's version and, from v9 on, the properties v8 lacks
for v in 8 9 10 11 12; do
    run --net-version $v probe; st=$?
    ok=0
    if [ $st -eq 0 ] && grep -q "^plugin: railnet (ncclNetPlugin_v$v)" "$out" && grep -q '^device 0: name=softnic0+softnic0 ' "$out"; then
        ok=1
        [ $v -ge 9 ] && ! grep -q '^device 0: forceFlush=0 vProps=1:\[0\] maxP2pBytes=4294967296 maxCollBytes=4294967296 maxMultiRequestSize=1 railId=-1 planeId=-1$' "$out" && ok=0
    fi
    [ $ok -eq 1 ] && tap_ok "probe_v${v}_reports_its_table_and_properties" ||
        tap_not_ok "probe_v${v}_reports_its_table_and_properties" "exit $st; $(show)"
done

# traffic: 2 ranks, grouped receives, sizes 0..4 MiB, every byte checked;
# from v10 on every profiler event started is stopped
for v in 8 9 10 11 12; do
    run --net-version $v --traffic-class 32 traffic --ranks 2 --devs 1 --iters 40 --max-size 4M --seed $v --timeout 120; st=$?
    ok=0
    if [ $st -eq 0 ] && grep -q '^netdriver traffic: ok' "$out"; then
        ok=1
        [ $v -ge 10 ] && [ "$(grep -c 'profiler events: [1-9][0-9]* started, [0-9]* stopped, 0 bad' "$out")" != 2 ] && ok=0
    fi
    [ $ok -eq 1 ] && tap_ok "traffic_through_v${v}_is_byte_exact" ||
        tap_not_ok "traffic_through_v${v}_is_byte_exact" "exit $st; $(show)"
done

# the ports of softnic0 as two devices, both driven through v12 by 3 ranks
RAILNET_MERGE_PORTS=0 run --net-version 12 traffic --ranks 3 --devs 2 --iters 20 --max-size 1M --seed 12 --timeout 120; st=$?
if [ $st -eq 0 ] && grep -q '^netdriver traffic: ok' "$out"; then tap_ok traffic_through_v12_on_two_devices_three_ranks
else tap_not_ok traffic_through_v12_on_two_devices_three_ranks "exit $st; $(show)"; fi

# a version the plugin has no table of is refused by the driver
run --net-version 13 probe; st=$?
[ $st -eq 2 ] && grep -q 'bad value .13. for --net-version' "$out" && tap_ok unknown_version_refused ||
    tap_not_ok unknown_version_refused "exit $st; $(show)"
tap_done
