#!/bin/sh
# tests/plugin/bw_window.sh: with W receives posted, the plugin holds W
# sends in flight at once (netdriver bw counts them), up to 32, NCCL's
# most requests per comm and the depth of the plugin's CTS ring.
# bench/plugin_vs_perftest.sh compares the plugin with ib_write_bw at the
# same depth (-t W) and rests on this. The port is rate-limited so that a
# message takes longer on the wire than posting the window does, and longer
# than a rank waits for its CPU beside busy processes (256 KiB: 2.6 ms at
# 100 MB/s; with 64 KiB messages two CPU hogs brought window 32 down to 21
# on average): the window fills whatever the host's load, and stays full
# but for the last window's drain: both sides' means over time are at least 3/4 of it (and at most
# it; the receiver's line is there with --receives, and only then). Every
# last message's bytes are checked.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
plugin_on_softnic
nd=$top_builddir/tests/netdriver/netdriver
tap_plan 4
out=$(mktemp); trap 'rm -f "$out"' EXIT
case_window() { # name window size iters
    SOFTNIC_RATE=100M RAILNET_QPS_PER_CONN=1 RAILNET_MERGE_PORTS=0 RAILNET_HCA==softnic0:1 \
        "$nd" --plugin "$plugin" bw --size "$3" --iters "$4" --window "$2" --receives --timeout 60 >"$out" 2>&1
    st=$?
    sm=$(sed -n "s/^# $(($3)) bytes: at most $2 sends in flight (window $2), \([0-9.]*\) on average\$/\1/p" "$out")
    rm_=$(sed -n "s/^# $(($3)) bytes: at most $2 receives posted, \([0-9.]*\) on average\$/\1/p" "$out")
    if [ $st -eq 0 ] && [ -n "$sm" ] && [ -n "$rm_" ] &&
        awk -v s="$sm" -v r="$rm_" -v w="$2" 'BEGIN { exit !(s >= 0.75 * w && s <= w && r >= 0.75 * w && r <= w) }'; then
        tap_ok "$1"
    else
        tap_not_ok "$1" "exit $st; $(grep -v ' INFO ' "$out" | tail -n 8 | tr '\n' ' ')"
    fi
}
case_window bw_window_8_keeps_8_sends_in_flight 8 262144 60
case_window bw_window_32_keeps_32_sends_in_flight 32 262144 240
# one in flight: between two messages the sender waits a clear-to-send
# round trip (a millisecond on a loaded 2-CPU host), so the message is
# long beside it (10 ms on the paced port)
case_window bw_window_1_keeps_one_send_in_flight 1 1048576 30
SOFTNIC_RATE=100M RAILNET_QPS_PER_CONN=1 RAILNET_HCA==softnic0:1 "$nd" --plugin "$plugin" bw --size 65536 --iters 20 \
    --window 4 --timeout 60 >"$out" 2>&1
st=$?
if [ $st -eq 0 ] && grep -q "^# 65536 bytes: at most 4 sends in flight" "$out" && ! grep -q "receives posted" "$out"; then
    tap_ok bw_prints_the_receivers_line_only_with_receives
else
    tap_not_ok bw_prints_the_receivers_line_only_with_receives "exit $st; $(grep -v ' INFO ' "$out" | tail -n 6 | tr '\n' ' ')"
fi
