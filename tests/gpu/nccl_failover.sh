#!/bin/sh
# Port failover under a real NCCL job: 2 ranks run an all_reduce loop of
# 16 MiB for 16 s (every result checked on every rank; P2P/SHM off, so all
# traffic crosses railnet over the merged dual-port softnic device). Port 2
# goes down 2 s after the first round through SOFTNIC_CTL_FILE and comes back 4 s
# later. The job must finish with correct results on every rank, railnet
# must WARN that port 2 failed and INFO that both ports carry traffic again,
# and RAILNET_STATS must show the order: port 2's bytes do not grow between
# the failure and the recovery while port 1's do, and grow again after it.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/gpu/lib-nccl.sh"
if [ "$(gpu_count)" -lt 1 ]; then
    tap_skip_all "no CUDA GPU on this machine (run make check-gpu on a GPU machine)"
fi
tap_plan 5
ctl=$JOBDIR/failover.ctl
echo "softnic0 2 up" >"$ctl"
export SOFTNIC_CTL_FILE=$ctl RAILNET_STATS=1 RAILNET_FAILOVER=1
NCCL_NET_PLUGIN=$RAILNET_PLUGIN \
    nccl_job failover 2 "$top_builddir/tests/gpu/nccl_collectives" --mode loop --iters 16 \
    --max-bytes $((16 << 20)) --timeout 120 &
job=$!
# NCCL connects in the first all_reduce: count from the loop's first round
i=0
while [ $i -lt 1200 ] && ! grep -q "^# loop: first round done" "$JOBDIR/failover.rank0.log" 2>/dev/null; do
    sleep 0.1; i=$((i + 1))
done
# the job must still run when the port goes down and when it comes back,
# or the case proves nothing: say so instead of passing quietly
timing=
sleep 2
kill -0 $job 2>/dev/null || timing="the job had ended before port 2 went down;"
echo "softnic0 2 down" >"$ctl"
sleep 4
kill -0 $job 2>/dev/null || timing="$timing the job had ended before port 2 came back;"
echo "softnic0 2 up" >"$ctl"
wait $job
status=$?
log0=$JOBDIR/failover.rank0.log
log1=$JOBDIR/failover.rank1.log
for r in 0 1; do
    l=$JOBDIR/failover.rank$r.log
    if grep -q '^ok 1 - nccl_all_reduce_loop' "$l"; then
        tap_ok "rank${r}_all_reduce_loop_correct ($(sed -n 's/^ok 1 - nccl_all_reduce_loop # //p' "$l"))"
    else
        tap_not_ok "rank${r}_all_reduce_loop_correct" "$(tail -n 20 "$l" | sed 's/^/# /')"
    fi
done
if [ -z "$timing" ] && grep -q "port 2 failed" "$log0" "$log1" && grep -q "traffic over all 2 ports again" "$log0" "$log1"; then
    tap_ok railnet_warned_port2_failed_and_info_both_ports_again
else
    tap_not_ok railnet_warned_port2_failed_and_info_both_ports_again \
        "$timing $(grep -hE 'NET/railnet.*(WARN|failed|again)' "$log0" "$log1" | head -n 10 | sed 's/^/# /')"
fi
# stats order, per send comm (comm #N): at its first failure and its last
# recovery port 2's bytes are equal and port 1's grew; after the recovery
# the close-time port 2 totals of the process exceed what port 2 had then
stats_check() { # log -> "ok" or why
    awk '
    /stats: send .* comm #[0-9]+ at a port (failure|recovery)/ {
        for (i = 1; i <= NF; i++) if ($i ~ /^#[0-9]+$/) id = $i
        for (i = 1; i <= NF; i++) { if ($i == "port" && $(i+1) == "1") p1 = $(i+2); if ($i == "port" && $(i+1) == "2") p2 = $(i+2) }
        if ($0 ~ /failure/ && !(id in f1)) { f1[id] = p1; f2[id] = p2 }
        if ($0 ~ /recovery/) { r1[id] = p1; r2[id] = p2 }
    }
    /stats: send .* port 2 total:/ { for (i = 1; i <= NF; i++) if ($i == "total:") t2 += $(i+1) }
    END {
        n = 0; why = ""; rsum = 0
        for (id in f1) {
            if (!(id in r1)) continue
            n++; rsum += r2[id]
            if (r2[id] != f2[id] || r1[id] <= f1[id]) why = why " comm " id ": p1 " f1[id] "->" r1[id] ", p2 " f2[id] "->" r2[id] ";"
        }
        if (n == 0) why = "no comm logged both a failure and a recovery"
        else if (t2 <= rsum) why = why " port 2 total " t2 " not above " rsum " after the recovery"
        print (why == "" ? "ok" : why)
    }' "$1"
}
why=
for l in "$log0" "$log1"; do
    v=$(stats_check "$l")
    [ "$v" = ok ] || why="$why $(basename "$l"): $v"
done
[ -z "$why" ] && tap_ok stats_show_port1_alone_during_the_outage_then_both ||
    tap_not_ok stats_show_port1_alone_during_the_outage_then_both "$why"
[ $status -eq 0 ] && tap_ok all_ranks_exit_0 || tap_not_ok all_ranks_exit_0 "worst exit status $status"
tap_done
