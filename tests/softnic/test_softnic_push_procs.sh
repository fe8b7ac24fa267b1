#!/bin/bash
# tests/softnic/test_softnic_push_procs.sh: between two processes (the
# plugin's two ranks under `netdriver lat`, each a writer and a receiver),
# a WRITE_WITH_IMM of 8 bytes is placed by the poster and its receive
# completion made by the receiver's poll (push.c): each rank's responder
# executes almost none of the ping-pong's messages (SOFTNIC_STATS counts
# them), and every round trip completes.  With SOFTNIC_PUSH_IMM=0 each
# responder executes every message it receives.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/softnic/sn_env.sh"

tap_plan 2
nd=$top_builddir/tests/netdriver/netdriver plugin=$top_builddir/.libs/libnccl-net-railnet.so
if [ ! -x "$nd" ] || [ ! -f "$plugin" ]; then
    tap_skip pingpong_writes_with_immediate_are_pushed "netdriver or the plugin not built (make check builds them)"
    tap_skip pingpong_on_the_wire_without_the_push "netdriver or the plugin not built (make check builds them)"
    tap_done
    exit
fi
N=300
# runs the ping-pong; prints "exit lines requests" (the responders' requests, summed)
pingpong() {
    env SOFTNIC_STATS=1 RAILNET_QPS_PER_CONN=1 RAILNET_HCA==softnic0:1 "$@" "$nd" --plugin "$plugin" lat --size 8 \
        --iters $N --timeout 60 >"$SN_TMP/pp.out" 2>&1
    st=$?
    lines=$(grep -c '^8-byte ping-pong: ' "$SN_TMP/pp.out")
    reqs=$(sed -n 's/.*softnic stats: responder: \([0-9]*\) requests executed.*/\1/p' "$SN_TMP/pp.out" |
           awk '{ n += $1 } END { print n + 0 }')
    echo "$st $lines $reqs"
}
# 2 x (N + 10 warm-up) messages each way; the connection's first writes
# and the clear-to-sends before the push is offered go on the wire
set -- $(pingpong)
if [ "$1" -eq 0 ] && [ "$2" -eq 1 ] && [ "$3" -lt 50 ]; then
    tap_ok "pingpong_writes_with_immediate_are_pushed ($3 requests on the wire for $((2 * (N + 10))) messages)"
else
    tap_not_ok pingpong_writes_with_immediate_are_pushed "exit $1, $2 result lines, $3 requests on the wire: $(grep -v ' INFO ' "$SN_TMP/pp.out" | tail -n 6 | tr '\n' ' ')"
fi
set -- $(pingpong SOFTNIC_PUSH_IMM=0)
if [ "$1" -eq 0 ] && [ "$2" -eq 1 ] && [ "$3" -ge $((2 * (N + 10))) ]; then
    tap_ok "pingpong_on_the_wire_without_the_push ($3 requests on the wire)"
else
    tap_not_ok pingpong_on_the_wire_without_the_push "exit $1, $2 result lines, $3 requests on the wire: $(grep -v ' INFO ' "$SN_TMP/pp.out" | tail -n 6 | tr '\n' ' ')"
fi
tap_done
