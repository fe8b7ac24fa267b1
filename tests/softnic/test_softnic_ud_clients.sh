#!/bin/bash
# tests/softnic/test_softnic_ud_clients.sh: unchanged Debian binaries over
# softnic's UD QPs, server and client as two processes: rdma-core's
# ibv_ud_pingpong with -c (it checks every received buffer past its 40-byte
# GRH), perftest's ib_send_bw -c UD and ib_send_lat -c UD (RoCE v2 GID
# index 0).  A case checks exit codes, iteration counts and that a
# bandwidth or latency was measured; a binary that is not installed skips
# its case with the reason.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/softnic/sn_env.sh"

tap_plan 5

have() { command -v "$1" >/dev/null; }

# ibv_ud_pingpong: -g 0 because a RoCE port's address handle needs a GRH
# (without it ibv_create_ah fails, as on a ConnectX); the payload size must
# fit the port's MTU (4096 by default).
udpp() {   # name, iterations, extra options
    local name=$1 iters=$2
    shift 2
    if ! have ibv_ud_pingpong; then
        tap_skip "$name" "ibv_ud_pingpong not installed (apt-get install ibverbs-utils)"
        return
    fi
    sn_pair "$name" 120 ibv_ud_pingpong -d softnic0 -g 0 -c -n "$iters" "$@"
    if [ "$SN_SRV_RC" -eq 0 ] && [ "$SN_CLI_RC" -eq 0 ] &&
       grep -q "^$iters iters in" "$SN_TMP/$name.srv" && grep -q "^$iters iters in" "$SN_TMP/$name.cli" &&
       grep -Eq 'bytes in [0-9.]+ seconds = [0-9.]*[1-9][0-9.]* Mbit/sec' "$SN_TMP/$name.cli"; then
        tap_ok "$name"
    else tap_not_ok "$name" "$(sn_why "$name")"; fi
}
udpp ibv_ud_pingpong_checked 500
udpp ibv_ud_pingpong_checked_4096_port2 200 -s 4096 -i 2

# perftest: -F as in test_softnic_clients.sh (its CPU-clock check is noise
# on a loaded host).  UD sends at most the MTU: perftest clamps its size.
perf() {   # name, bw|lat, iterations, binary and options
    local name=$1 kind=$2 iters=$3
    shift 3
    if ! have "$1"; then
        tap_skip "$name" "$1 not installed (apt-get install perftest)"
        return
    fi
    sn_pair "$name" 60 "$@" -c UD -n "$iters" -d softnic0 -x 0 -F
    local ok=1
    [ "$SN_SRV_RC" -eq 0 ] && [ "$SN_CLI_RC" -eq 0 ] || ok=0
    if [ $ok -eq 1 ]; then
        if [ "$kind" = bw ]; then sn_bw_ok "$SN_TMP/$name.cli" 1 "$iters" || ok=0
        else sn_lat_ok "$SN_TMP/$name.cli" "$iters" || ok=0; fi
    fi
    if [ $ok -eq 1 ]; then
        tap_ok "$name"
        sn_last_result "$SN_TMP/$name.cli" "$name"
    else tap_not_ok "$name" "$(sn_why "$name")"; fi
}
# 200 sends: no more than the receives ib_send_bw posts before the first
# one arrives, and well inside the port's socket buffer, so that a loaded
# host's slow receiver drops nothing (UD has no flow control, and perftest
# would wait for a dropped message for ever, as on a NIC)
perf ib_send_bw_ud bw 200 ib_send_bw
perf ib_send_bw_ud_64b bw 200 ib_send_bw -s 64
perf ib_send_lat_ud lat 300 ib_send_lat

tap_done
