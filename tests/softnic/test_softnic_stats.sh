#!/bin/bash
# tests/softnic/test_softnic_stats.sh: SOFTNIC_STATS=1 makes softnic print,
# at exit, what each kind of its threads did (stats.c).  An unchanged
# ib_write_bw pair of N writes: the server's responder line counts exactly
# N requests executed and at least one ACK, at most one per request; the
# client's requester batches add up to N WQEs (with its posting threads'
# direct batches, counted as the application's).  Unset, no line at all.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/softnic/sn_env.sh"

tap_plan 3
if ! command -v ib_write_bw >/dev/null 2>&1; then
    for c in responder_counts_every_request requester_batches_hold_every_wqe no_counters_unless_asked; do
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
reqs=$(printf '%s\n' "$resp" | sed -n 's/.* \([0-9]*\) requests executed, \([0-9]*\) ACKs sent;.*/\1 \2/p')
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

sn_pair quiet 60 ib_write_bw -d softnic0 -s 4096 -n 50 -F
if [ "$SN_SRV_RC" -eq 0 ] && [ "$SN_CLI_RC" -eq 0 ] && ! grep -q 'softnic stats' "$SN_TMP/quiet.srv" "$SN_TMP/quiet.cli"; then
    tap_ok no_counters_unless_asked
else
    tap_not_ok no_counters_unless_asked "$(grep -h 'softnic stats' "$SN_TMP/quiet.srv" "$SN_TMP/quiet.cli"; sn_why quiet)"
fi
tap_done
