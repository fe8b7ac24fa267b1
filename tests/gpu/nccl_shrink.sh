#!/bin/sh
# Fault tolerance at job scale: a 4-rank NCCL job through railnet on softnic
# (NCCL_NET_PLUGIN=railnet, P2P and SHM off, every rank its own NCCL node on
# GPU 0) loses one rank's process to a SIGKILL in the middle of an
# all_reduce in every round, NS_ROUNDS rounds (6), the killed rank rotating
# (round r: rank r % 4), and goes on. tests/gpu/nccl_shrink (its header
# says how) runs as 4 slot processes under tests/minimpi's minimpirun; the
# slot of the killed rank starts a fresh process to be that rank each round
# and kills it, so the job keeps 4 ranks and the slots live through every
# round. In each round the 3 survivors see the error (ncclCommGetAsyncError
# of a nonblocking communicator), ncclCommRevoke the communicator,
# ncclCommShrink it past the killed rank (NCCL_SHRINK_ABORT), run a checked
# all_reduce on the shrunk communicator, abort the old one and destroy the
# new one; then all 4 build the next round's communicator.
# Cases: the job ended by itself with every slot's status 0; NCCL loaded and
# used railnet; a process killed by SIGKILL mid all_reduce every round; the
# 4-rank all_reduce right every round (the replaced rank included); every
# survivor saw an NCCL error within NS_ERROR_BOUND s (10) of the kill, and
# railnet's WARN named the cause; ncclCommRevoke quiesced; ncclCommShrink
# gave the 3-rank communicator every round; its all_reduce right; the old
# communicator's abort and the new one's destroy (railnet's close and
# deregistration paths) returned, and every round ended, in bounded time;
# each slot's open fds and threads after the last round at most the level
# after its warm-up round (its first as a survivor) plus NS_FD_SLACK (2) and
# NS_THREAD_SLACK (2): one-off growth passes, a leak per round (4 rounds after the
# warm-up by default, 18 with NS_ROUNDS=20) does not. VmRSS growth is printed, not asserted (CUDA's
# and NCCL's allocators keep what they freed).
# NCCL 2.28.9's ncclCommShrink refuses a parent whose ncclCommGetAsyncError
# reports an error, and the error of its proxy thread (where a network failure
# lands) stays after ncclCommRevoke; where a survivor is refused, the
# survivors go on with a 3-rank communicator from a new unique id, so that the
# rest of the cases still run, and the shrink case SKIPs with the result NCCL
# gave when every survivor was refused that way.
# A round that goes wrong still ends for every slot: a survivor aborts what
# it made and reports, the killer kills its victim even when that one's
# collectives failed first, and all slots meet at the end of each round
# (NS_ROUND_BOUND s at most) before the next communicator.
# Time: about 7 s a round on one H200 (round 0 of a 6.4 s rebuild round), so
# the default 6 rounds take about 60 s with the start and fit the default
# NS_JOB_TIMEOUT of 120 s; NS_ROUNDS=20 takes about 150 s (give it
# NS_JOB_TIMEOUT=300).
# NCCL 2.28.9 unloads an external net plugin when its last communicator is
# destroyed and forgets its name, so the next communicator of that process
# silently gets NCCL's own IB transport while fresh processes get railnet
# (handles that neither side can parse): NCCL_NET_PLUGIN_REF_COUNT=1 keeps
# railnet loaded, NCCL_NET=railnet makes any other choice an init error.
# Every step of a process is bounded by NS_STEP_BOUND s (20): one past it
# prints "#ns stuck" with its pid, its host stacks go to
# $JOBDIR/shrink.rank<r>.stacks, and it ends 30 s later; minimpirun ends the
# job after NS_JOB_TIMEOUT s (120) and gives the others NS_WAIT_OTHERS s (120)
# after a slot fails. NCCL: PyTorch's (2.28.9, nccl_torch_lib) when present,
# else the system's; one without ncclCommRevoke (before 2.28.7) skips.
# Knobs: NS_ROUNDS, NS_BYTES (4M: the all_reduce's size), NS_ERROR_BOUND,
# NS_STEP_BOUND, NS_ROUND_BOUND (60 s a round), NS_KILL_DELAY_MS (50: from the
# victim's fault all_reduce queued to the kill), NS_FD_SLACK, NS_THREAD_SLACK,
# NS_JOB_TIMEOUT, NS_WAIT_OTHERS, NCCL_TORCH_LIB.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/gpu/lib-nccl.sh"
PROG=$top_builddir/tests/gpu/nccl_shrink
MR=$top_builddir/tests/minimpi/minimpirun
N=4
ROUNDS=${NS_ROUNDS:-6}
BYTES=${NS_BYTES:-4M}
BOUND=${NS_ERROR_BOUND:-10}
STEP=${NS_STEP_BOUND:-20}
ROUND_BOUND=${NS_ROUND_BOUND:-60}
KILL_DELAY=${NS_KILL_DELAY_MS:-50}
FD_SLACK=${NS_FD_SLACK:-2}
THREAD_SLACK=${NS_THREAD_SLACK:-2}
JOB_TIMEOUT=${NS_JOB_TIMEOUT:-120}
WAIT_OTHERS=${NS_WAIT_OTHERS:-30}
if [ "$(gpu_count)" -lt 1 ]; then
    tap_skip_all "no CUDA GPU on this machine (run make check-gpu on a GPU machine)"
fi
[ -x "$PROG" ] || tap_skip_all "tests/gpu/nccl_shrink not built (configure found no NCCL)"
[ -x "$MR" ] || tap_skip_all "tests/minimpi/minimpirun not built"
tl=$(nccl_torch_lib)
[ -e "$tl/libnccl.so.2" ] && export LD_LIBRARY_PATH="$SOFTNIC_DIR:$tl:$LD_LIBRARY_PATH"
probe=$("$PROG" --probe 2>&1)
nccl=$(echo "$probe" | sed -n 's/^#ns probe nccl=\([0-9]*\).*/\1/p')
case $probe in
    *revoke=yes*) ;;
    *) tap_skip_all "NCCL ${nccl:-?} has no ncclCommRevoke (2.28.7 and later; PyTorch's NCCL not in $tl: NCCL_TORCH_LIB): $probe" ;;
esac
tap_plan 13
if [ -e "$tl/libnccl.so.2" ]; then echo "# NCCL $nccl: PyTorch's, $tl"; else echo "# NCCL $nccl: the system's"; fi

# A short retry budget, as a job configured for fast failure detection
# would have (nccl_kill.sh's). NCCL's RAS thread is off: the sockets it keeps
# to every peer it met are NCCL's, not the paths under test, and would blur
# the fd counts.
export NCCL_NET_PLUGIN="$RAILNET_PLUGIN" NCCL_RAS_ENABLE=0 NCCL_NET_PLUGIN_REF_COUNT=1 NCCL_NET=railnet
export RAILNET_IB_TIMEOUT="${RAILNET_IB_TIMEOUT:-14}" RAILNET_IB_RETRY_CNT="${RAILNET_IB_RETRY_CNT:-3}"
export SOFTNIC_RETRY_CAP_MS="${SOFTNIC_RETRY_CAP_MS:-2000}"
name=shrink
rm -f "$JOBDIR/$name".rv.* "$JOBDIR/$name".rank*.log "$JOBDIR/$name".rank*.stacks
joblog=$JOBDIR/$name.job.log
t0=$(date +%s)
"$MR" -n $N --timeout "$JOB_TIMEOUT" --wait-others "$WAIT_OTHERS" --rank-env NCCL_HOSTID=railnet-ns-node-%r -- \
    sh -c 'log=$1; shift; exec "$@" --rank "$MINIMPI_RANK" --nranks "$MINIMPI_SIZE" >"$log.rank$MINIMPI_RANK.log" 2>&1' \
    sh "$JOBDIR/$name" "$PROG" --rounds "$ROUNDS" --bytes "$BYTES" --device 0 --rendezvous "$JOBDIR/$name.rv" \
    --error-bound "$BOUND" --step-bound "$STEP" --round-bound "$ROUND_BOUND" --kill-delay-ms "$KILL_DELAY" >"$joblog" 2>&1 &
job=$!
# Until the job ends: the host stacks of a process whose step is past its
# bound (it waits STACKS_GRACE_S for them); minimpirun's own timeout ends
# the job, this loop only outlasts it by a little.
stacked=
while kill -0 $job 2>/dev/null; do
    for l in "$JOBDIR/$name".rank*.log; do
        pid=$(sed -n 's/^#ns stuck .* pid=\([0-9]*\) .*/\1/p' "$l" 2>/dev/null | head -n 1)
        [ -n "$pid" ] || continue
        case " $stacked " in *" $pid "*) continue ;; esac
        stacked="$stacked $pid"
        { grep '^#ns stuck' "$l"; host_stacks "$pid"; } >"${l%.log}.stacks" 2>&1 &
    done
    if [ $(($(date +%s) - t0)) -gt $((JOB_TIMEOUT + 60)) ]; then
        echo "# minimpirun outlived its --timeout by 60 s: killed" >>"$joblog"
        kill -KILL $job
        break
    fi
    sleep 1
done
wait $job
rc=$?
wait
took=$(($(date +%s) - t0))
logs=$(ls "$JOBDIR/$name".rank*.log 2>/dev/null)

# lines ROLE: the "#ns ... role=ROLE ..." lines of the four slots
lines() { cat $logs /dev/null | grep -h "^#ns round=.* role=$1 "; }
# vals ROLE KEY: the KEY field of each such line
vals() { lines "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
# spread: min/median/max of numbers on stdin
spread() { sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "%s/%s/%s", v[1], v[int((NR + 1) / 2)], v[NR]; else printf "none" }'; }
# over BOUND: how many numbers on stdin exceed BOUND
over() { awk -v b="$1" '$1 > b { n++ } END { print n + 0 }'; }
# tally: "value xCOUNT" of each distinct line on stdin
tally() { sort | uniq -c | awk '{ printf "%s%s x%d", (NR > 1 ? ", " : ""), $2, $1 }'; }
context() {
    { grep -h -E '^#ns (fail|stuck|why)' $logs /dev/null | head -n 8; grep -E 'minimpirun' "$joblog" | head -n 6; } |
        tr '\n' '|' | cut -c1-1500
}
nsurv=$(((N - 1) * ROUNDS))
echo "# job: $took s, minimpirun status $rc; logs $JOBDIR/$name.rank{0..3}.log, $joblog"

ndone=$(cat $logs /dev/null | grep -c '^#ns done ')
if [ $rc -eq 0 ] && [ "$ndone" -eq $N ]; then
    tap_ok "job_of_${N}_ranks_ran_${ROUNDS}_rounds_every_slot_exit_0 ($took s)"
else
    tap_not_ok "job_of_${N}_ranks_ran_${ROUNDS}_rounds_every_slot_exit_0" "minimpirun status $rc (124: timeout), $ndone of $N slots done, $took s: $(context)"
fi

log0=$JOBDIR/$name.rank0.log
ver=$(sed -n 's/.*NCCL version \([0-9.]*\).*/\1/p' "$log0" 2>/dev/null | head -n 1)
if grep -q "Loaded net plugin railnet" "$log0" 2>/dev/null && grep -q "Using network railnet" "$log0"; then
    tap_ok "nccl_${ver:-unknown}_loaded_and_used_railnet"
else
    tap_not_ok "nccl_loaded_and_used_railnet" "$(grep -E 'NET/|network' "$log0" 2>/dev/null | head -n 10 | tr '\n' '|')"
fi

nkill=$(lines killer | grep -c ' ready=yes killed=sigkill ')
nvict=$(lines victim | grep -c ' ar4=ok')
if [ "$nkill" -eq "$ROUNDS" ]; then
    tap_ok "rank_process_sigkilled_mid_all_reduce_every_round ($nkill rounds)"
else
    tap_not_ok "rank_process_sigkilled_mid_all_reduce_every_round" "$nkill of $ROUNDS: $(lines killer | grep -v ' killed=sigkill ' | head -n 4 | tr '\n' '|') $(context)"
fi

n4=$(( $(vals survivor ar4 | grep -c '^ok$') + nvict ))
if [ $n4 -eq $((N * ROUNDS)) ]; then
    tap_ok "all_reduce_of_${N}_ranks_right_every_round_replaced_rank_included"
else
    tap_not_ok "all_reduce_of_${N}_ranks_right_every_round_replaced_rank_included" "$n4 of $((N * ROUNDS)) rank-rounds right: $(grep -h '^#ns why' $logs /dev/null | head -n 4 | tr '\n' '|') $(context)"
fi

nerr=$(vals survivor error | grep -vc '^none$')
late=$(vals survivor error_s | over "$BOUND")
errs=$(vals survivor error_s | spread)
if [ "$nerr" -eq $nsurv ] && [ "$late" -eq 0 ]; then
    tap_ok "every_survivor_saw_an_nccl_error_within_${BOUND}s_of_the_kill (min/median/max $errs s; $(vals survivor error | tally))"
else
    tap_not_ok "every_survivor_saw_an_nccl_error_within_${BOUND}s_of_the_kill" "$nerr of $nsurv survivor-rounds saw one, $late later than $BOUND s (min/median/max $errs s): $(context)"
fi

named=0
for l in $logs; do
    grep -Eq 'NET/railnet: .*(closed its connection|RETRY_EXC|error)' "$l" && named=$((named + 1))
done
if [ $named -eq $N ]; then
    tap_ok "railnet_warned_of_the_dead_peer_in_every_slot"
else
    tap_not_ok "railnet_warned_of_the_dead_peer_in_every_slot" "$named of $N slot logs have a NET/railnet WARN about a peer: $(grep -h 'WARN' $logs /dev/null | head -n 6 | tr '\n' '|' | cut -c1-1200)"
fi

nrev=$(vals survivor after_revoke | grep -vc '^ncclInProgress$')
if [ "$nrev" -eq $nsurv ] && [ "$(vals survivor revoke_s | over "$STEP")" -eq 0 ]; then
    tap_ok "revoke_quiesced_every_survivor (min/median/max $(vals survivor revoke_s | spread) s; state after: $(vals survivor after_revoke | tally))"
else
    tap_not_ok "revoke_quiesced_every_survivor" "$nrev of $nsurv survivor-rounds quiescent within $STEP s; ncclCommRevoke returned $(vals survivor revoke | tally): $(context)"
fi

nshrunk=$(vals survivor recovery | grep -c '^shrink$')
# every survivor refused with the parent's own error, still there after revoke
refused=$(lines survivor | awk '{ s = a = ""; for (i = 2; i <= NF; i++) { if ($i ~ /^shrink=/) s = substr($i, 8); if ($i ~ /^after_revoke=/) a = substr($i, 14) } if (s != "started" && s == a) n++ } END { print n + 0 }')
if [ "$nshrunk" -eq $nsurv ]; then
    tap_ok "shrink_past_the_killed_rank_every_round (min/median/max $(vals survivor recovery_s | spread) s)"
elif [ "$refused" -eq $nsurv ] && [ "$(vals survivor recovery | grep -c '^rebuild$')" -eq $nsurv ]; then
    tap_skip "shrink_past_the_killed_rank_every_round" "NCCL ${ver:-?} refused ncclCommShrink on every survivor with the parent's error ($(vals survivor shrink | tally)), which ncclCommRevoke left in place; the survivors went on with a new 3-rank communicator"
else
    tap_not_ok "shrink_past_the_killed_rank_every_round" "$nshrunk of $nsurv survivor-rounds shrunk; ncclCommShrink: $(vals survivor shrink | tally); after revoke: $(vals survivor after_revoke | tally): $(context)"
fi

n3=$(vals survivor ar3 | grep -c '^ok$')
if [ "$n3" -eq $nsurv ]; then
    tap_ok "all_reduce_of_the_$((N - 1))_survivors_right_after_every_kill ($(vals survivor recovery | tally); kill to result min/median/max $(vals survivor recovered_s | spread) s)"
else
    tap_not_ok "all_reduce_of_the_$((N - 1))_survivors_right_after_every_kill" "$n3 of $nsurv survivor-rounds right: $(grep -h '^#ns why' $logs /dev/null | head -n 4 | tr '\n' '|') $(context)"
fi

nab=$(vals survivor abort_s | wc -l)
slow=$( (vals survivor abort_s; vals survivor destroy_s) | over "$STEP")
if [ "$nab" -eq $nsurv ] && [ "$slow" -eq 0 ]; then
    tap_ok "abort_of_the_old_and_destroy_of_the_new_communicator_returned_within_${STEP}s (abort $(vals survivor abort_s | spread) s, destroy $(vals survivor destroy_s | spread) s)"
else
    tap_not_ok "abort_of_the_old_and_destroy_of_the_new_communicator_returned_within_${STEP}s" "$nab of $nsurv survivor-rounds got there, $slow slower than $STEP s: $(context)"
fi

nrounds=$( (lines survivor; lines killer) | wc -l)
slow=$( (vals survivor round_s; vals killer round_s) | over "$ROUND_BOUND")
if [ "$nrounds" -eq $((N * ROUNDS)) ] && [ "$slow" -eq 0 ]; then
    tap_ok "every_round_ended_within_${ROUND_BOUND}s (min/median/max $(vals survivor round_s | spread) s)"
else
    tap_not_ok "every_round_ended_within_${ROUND_BOUND}s" "$nrounds of $((N * ROUNDS)) slot-rounds ended, $slow slower than $ROUND_BOUND s: $(context)"
fi

# res SLOT AT KEY: the slot's KEY sample at AT (start, warm, end)
res() { sed -n "s/^#ns res slot=$1 at=$2 .* $3=\([0-9-]*\).*/\1/p" "$JOBDIR/$name.rank$1.log" 2>/dev/null | tail -n 1; }
# flat KEY SLACK: every slot's end at most its warm-up level + SLACK
flat() {
    _bad='' _all=''
    for s in $(seq 0 $((N - 1))); do
        w=$(res $s warm "$1") e=$(res $s end "$1")
        _all="$_all slot $s: $(res $s start "$1")/$w/$e;"
        if [ -z "$w" ] || [ -z "$e" ] || [ "$e" -gt $((w + $2)) ]; then _bad="$_bad $s"; fi
    done
    _all="start/warm-up/end:${_all%;}"
}
flat fds "$FD_SLACK"
if [ -z "$_bad" ]; then
    tap_ok "open_fds_back_to_the_warm_up_level_slack_$FD_SLACK ($_all)"
else
    tap_not_ok "open_fds_back_to_the_warm_up_level_slack_$FD_SLACK" "slots$_bad over or without a sample; $_all"
fi
flat threads "$THREAD_SLACK"
if [ -z "$_bad" ]; then
    tap_ok "threads_back_to_the_warm_up_level_slack_$THREAD_SLACK ($_all)"
else
    tap_not_ok "threads_back_to_the_warm_up_level_slack_$THREAD_SLACK" "slots$_bad over or without a sample; $_all"
fi
for s in $(seq 0 $((N - 1))); do
    w=$(res $s warm rss_kib) e=$(res $s end rss_kib)
    [ -n "$w" ] && [ -n "$e" ] &&
        echo "# slot $s VmRSS: $(res $s start rss_kib) KiB at the start, $w after the warm-up, $e at the end ($((e - w)) KiB more over the rounds after the warm-up)"
done
# per round: the slowest survivor's times
lines survivor | awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
        r = f["round"]; v[r] = f["victim"]; rec[r] = f["recovery"]
        if (f["error_s"] > e[r]) e[r] = f["error_s"]; if (f["recovered_s"] > d[r]) d[r] = f["recovered_s"]
        if (f["round_s"] > t[r]) t[r] = f["round_s"] }
    END { for (r = 0; r in v; r++) printf "# round %d, rank %d killed: error after %s s, %s comm'"'"'s all_reduce done %s s after the kill, round %s s\n", r, v[r], e[r], rec[r], d[r], t[r] }'
tap_done
