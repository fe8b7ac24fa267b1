#!/bin/bash
# tests/softnic/test_softnic_stats.sh: SOFTNIC_STATS=1 makes softnic print,
# at exit, what each kind of its threads did (stats.c).  An unchanged
# ib_write_bw pair of N writes: the server's responder line counts exactly
# N requests executed and at least one ACK, at most one per request, sent
# or left as a note (the client polls its CQ: ack_note.c); the
# client's requester batches add up to N WQEs (with its posting threads'
# direct batches, counted as the application's); each side's engines line
# counts the steps its engines ran and the CPU time they took (the server's,
# which executed every request, more than none).  The plugin's ranks under netdriver
# print theirs too (its forked ranks exit through the exit handlers): an
# engines line per rank, and the 64 KiB messages among the requests their
# responders executed.  Unset, no line at all.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/softnic/sn_env.sh"

tap_plan 5
if ! command -v ib_write_bw >/dev/null 2>&1; then
    for c in responder_counts_every_request requester_batches_hold_every_wqe engines_count_their_steps \
        netdriver_ranks_print_theirs no_counters_unless_asked; do
        tap_skip "$c" "no ib_write_bw (perftest; scripts/bootstrap installs it)"
    done
    tap_done
    exit
fi
N=500
export SOFTNIC_STATS=1
sn_pair stats 60 ib_write_bw -d softnic0 -s 4096 -n $N -F
unset SOFTNIC_STATS
line() { grep -o "softnic stats: $2:.*" "$SN_TMP/stats.$1" | head -n 1; }
resp=$(line srv responder)
reqs=$(printf '%s\n' "$resp" |
       sed -n 's/.* \([0-9]*\) requests executed, \([0-9]*\) ACKs sent, \([0-9]*\) left as notes;.*/\1 \2 \3/p' |
       awk '{ print $1, $2 + $3 }')
if [ "$SN_SRV_RC" -eq 0 ] && [ "$SN_CLI_RC" -eq 0 ] && [ -n "$reqs" ] &&
   [ "${reqs% *}" -eq $N ] && [ "${reqs#* }" -ge 1 ] && [ "${reqs#* }" -le $N ]; then
    tap_ok "responder_counts_every_request ($resp)"
else
    tap_not_ok "responder_counts_every_request" "responder line '$resp'; $(sn_why stats)"
fi
# the WQEs of the requester's and the posting threads' batches
wqes=$(grep -o 'softnic stats: [a-z ]*:.* batches sent, [0-9]* WQEs' "$SN_TMP/stats.cli" |
       sed 's/.* \([0-9]*\) batches sent, \([0-9]*\) WQEs/\1 \2/' |
       awk '{ b += $1; w += $2 } END { if (b) print w, b }')
if [ -n "$wqes" ] && [ "${wqes% *}" -eq $N ]; then
    tap_ok "requester_batches_hold_every_wqe ($wqes: WQEs, batches)"
else
    tap_not_ok "requester_batches_hold_every_wqe" "got '$wqes' for $N: $(grep -h 'softnic stats' "$SN_TMP/stats.cli")"
fi

steps() { sed -n 's/.*softnic stats: engines: \([0-9]*\) threads, \([0-9]*\) steps,.*/\1 \2/p' "$1" | head -n 1; }
es=$(steps "$SN_TMP/stats.srv") ec=$(steps "$SN_TMP/stats.cli")
cpu=$(sed -n 's/.*softnic stats: engines: .* timers, \([0-9.]*\) ms CPU$/\1/p' "$SN_TMP/stats.srv" | head -n 1)
if [ -n "$es" ] && [ -n "$ec" ] && [ "${es% *}" -ge 1 ] && [ "${es#* }" -ge 1 ] && [ "${ec% *}" -ge 1 ] &&
   [ "${ec#* }" -ge 1 ] && awk -v c="${cpu:-0}" 'BEGIN { exit !(c > 0) }'; then
    tap_ok "engines_count_their_steps (server: $es, client: $ec: threads, steps; server's engines $cpu ms CPU)"
else
    tap_not_ok "engines_count_their_steps" "server '$es', client '$ec': $(grep -h 'softnic stats: engines' "$SN_TMP/stats.srv" "$SN_TMP/stats.cli")"
fi

nd=$top_builddir/tests/netdriver/netdriver plugin=$top_builddir/.libs/libnccl-net-railnet.so
if [ -x "$nd" ] && [ -f "$plugin" ]; then
    SOFTNIC_STATS=1 RAILNET_QPS_PER_CONN=1 RAILNET_HCA==softnic0:1 "$nd" --plugin "$plugin" bw --size 65536 \
        --iters 50 --timeout 60 >"$SN_TMP/nd.out" 2>&1
    st=$?
    lines=$(grep -c 'softnic stats: engines: ' "$SN_TMP/nd.out")
    done_=$(sed -n 's/.*softnic stats: responder: \([0-9]*\) requests executed.*/\1/p' "$SN_TMP/nd.out" |
            awk '{ n += $1 } END { print n + 0 }')
    if [ $st -eq 0 ] && [ "$lines" -eq 2 ] && [ "$done_" -ge 50 ]; then
        tap_ok "netdriver_ranks_print_theirs ($lines engines lines, $done_ requests executed)"
    else
        tap_not_ok "netdriver_ranks_print_theirs" "exit $st, $lines engines lines, $done_ requests: $(grep -v ' INFO ' "$SN_TMP/nd.out" | tail -n 8 | tr '\n' ' ')"
    fi
else
    tap_skip netdriver_ranks_print_theirs "netdriver or the plugin not built (make check builds them)"
fi

sn_pair quiet 60 ib_write_bw -d softnic0 -s 4096 -n 50 -F
if [ "$SN_SRV_RC" -eq 0 ] && [ "$SN_CLI_RC" -eq 0 ] && ! grep -q 'softnic stats' "$SN_TMP/quiet.srv" "$SN_TMP/quiet.cli"; then
    tap_ok no_counters_unless_asked
else
    tap_not_ok no_counters_unless_asked "$(grep -h 'softnic stats' "$SN_TMP/quiet.srv" "$SN_TMP/quiet.cli"; sn_why quiet)"
fi
tap_done
