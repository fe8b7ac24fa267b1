#!/bin/sh
# GPU failure behaviour of GPU-initiated networking (both GIN types): a
# peer killed mid-kernel is an NCCL error on the survivor, not a hang.
# tests/gpu/gin_device --mode kill as a 2-rank job on softnic with NCCL
# 2.28.9 (PyTorch's) and NCCL_NET_PLUGIN=railnet: both ranks' kernels play
# 8 put+signal ping-pong rounds over railnet's GIN, then rank 1 SIGKILLs
# itself while its kernel runs; rank 0's kernel goes on putting to rank 1
# and waiting for an answer (bounded on the GPU), while its host polls
# ncclCommGetAsyncError. Variants (GIN_KILL_VARIANTS):
#   railnet_proxy        RAILNET_GIN=proxy (NCCL's progress thread hears of
#                        the failure from railnet's iput/iputSignal)
#   railnet_gdaki        RAILNET_GIN=gdaki, rings in GPU memory (NCCL asks
#                        railnet's queryLastError)
#   railnet_gdaki_hostq  the same with the rings in host memory (not run by
#                        default)
# Four cases a variant: rank 0 got ncclRemoteError, ncclSystemError or
# ncclInternalError within GIN_KILL_BOUND seconds (default 30) of the kill,
# its kernel still running; a WARN from railnet's GIN names rank 1 (its
# socket closed, a failed completion or post towards it, or a GDAKI QP
# towards it in the error state); the log shows NCCL took railnet's GIN of that type; the
# job ended by itself (rank 0 aborted its communicator and exited 0, rank 1
# died of its own SIGKILL) within GIN_KILL_JOB_TIMEOUT seconds (default 180;
# every rank runs under `timeout`, so a hang is reported and never left
# running). A short retry budget (RAILNET_IB_TIMEOUT=14, RETRY_CNT=3,
# softnic's cap SOFTNIC_RETRY_CAP_MS=2000) keeps the proxy type's detection
# to seconds, as a job configured for fast failure detection would.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/gpu/lib-nccl.sh"
. "$top_srcdir/tests/gpu/lib-gin.sh"
variants=${GIN_KILL_VARIANTS:-railnet_proxy railnet_gdaki}
BOUND=${GIN_KILL_BOUND:-30}
GIN_JOB_TIMEOUT=${GIN_KILL_JOB_TIMEOUT:-180}
if [ "$(gpu_count)" -lt 1 ]; then
    tap_skip_all "no CUDA GPU on this machine (run make check-gpu on a GPU machine)"
fi
if [ ! -x "$GIN_PROG" ]; then
    tap_skip_all "tests/gpu/gin_device not built (configure found no nvcc or no NCCL headers)"
fi
export RAILNET_IB_TIMEOUT=${RAILNET_IB_TIMEOUT:-14} RAILNET_IB_RETRY_CNT=${RAILNET_IB_RETRY_CNT:-3}
export SOFTNIC_RETRY_CAP_MS=${SOFTNIC_RETRY_CAP_MS:-2000}
set -- $variants
tap_plan $(($# * 4))

# NCCL's and railnet's lines about GIN and the kill, for reasons.
kill_lines() {
    grep -E '^#kill|^# rank|GIN|gdaki|GDAKI|NCCL WARN|gin_env_open|error while loading|undefined symbol|fatal signal' "$1" |
        sed 's/^[^ ]* [^ ]* NCCL /NCCL /' | head -n "${2:-12}" | tr '\n' '|' | cut -c1-1500
}

run_variant() {
    v=$1
    case $v in
        railnet_proxy) net=railnet type=proxy ;;
        railnet_gdaki) net=railnet-gdaki type=gdaki ;;
        railnet_gdaki_hostq) net=railnet-gdaki-hostq type=gdaki ;;
        *)
            for c in peer_killed_gives_error error_names_railnet took_railnet_gin job_ended_in_time; do
                tap_not_ok "${v}_$c" "unknown variant $v (railnet_proxy, railnet_gdaki, railnet_gdaki_hostq)"
            done
            return ;;
    esac
    name=gin_kill_$v
    t0=$(date +%s)
    gin_job "$name" torch "$net" --mode kill --timeout "$BOUND"
    wall=$(($(date +%s) - t0))
    l0=$JOBDIR/$name.rank0.log l1=$JOBDIR/$name.rank1.log
    s0=$(cat "$JOBDIR/$name.rank0.status" 2>/dev/null) s1=$(cat "$JOBDIR/$name.rank1.status" 2>/dev/null)
    line=$(grep -m 1 '^#kill error=' "$l0")
    self=$(grep -m 1 '^#kill self ' "$l1")
    err=$(echo "$line" | sed -n 's/^#kill error=\([A-Za-z0-9]*\).*/\1/p')
    after=$(echo "$line" | sed -n 's/.* after=\([0-9.]*\).*/\1/p')
    kstate=$(echo "$line" | sed -n 's/.* kernel=\([a-z-]*\).*/\1/p')
    puts=$(echo "$line" | sed -n 's/.* puts=\([0-9]*\).*/\1/p')
    at0=$(echo "$line" | sed -n 's/.* at=\([0-9.]*\).*/\1/p')
    at1=$(echo "$self" | sed -n 's/.* at=\([0-9.]*\).*/\1/p')
    # the same interval by the two ranks' clocks (one host): from rank 1's
    # last moment to rank 0's error
    exact=
    [ -n "$at0" ] && [ -n "$at1" ] && exact=$(awk -v a="$at0" -v b="$at1" 'BEGIN { printf "%.3f", a - b }')
    echo "# $v: rank 0 '$line'; rank 1 '$self'; exit statuses $s0 $s1; ${wall} s in all"

    in_time=0
    [ -n "$after" ] && awk -v a="$after" -v b="$BOUND" 'BEGIN { exit !(a <= b) }' && in_time=1
    case $err in
        ncclRemoteError | ncclSystemError | ncclInternalError)
            if [ $in_time = 1 ] && [ "$kstate" = running ]; then
                by=
                [ -n "$exact" ] && by=", $exact s by the two ranks' clocks"
                tap_ok "${v}_peer_killed_gives_error ($err ${after} s after the kill$by; $puts puts)"
            else
                tap_not_ok "${v}_peer_killed_gives_error" "$err after ${after:-?} s (bound $BOUND s), rank 0's kernel $kstate (wanted still running: the error must come from NCCL, not from the kernel's end): $(kill_lines "$l0")"
            fi ;;
        none) tap_not_ok "${v}_peer_killed_gives_error" "no NCCL error on rank 0 within $BOUND s of the kill (a hang): $(kill_lines "$l0")" ;;
        '') tap_not_ok "${v}_peer_killed_gives_error" "no '#kill error=' line from rank 0 (exit status ${s0:-?}): $(kill_lines "$l0") || rank 1: $(kill_lines "$l1" 6)" ;;
        *) tap_not_ok "${v}_peer_killed_gives_error" "rank 0 got $err, not a network error: $(kill_lines "$l0")" ;;
    esac

    warn=$(grep -m 1 -E 'NET/railnet/GIN: .*(rank 1 closed its connection|towards rank 1 .*failed|QP towards rank 1 is in the error state)' "$l0" |
        sed 's/^.*NET\/railnet/NET\/railnet/')
    if [ -n "$warn" ]; then
        tap_ok "${v}_error_names_railnet (${warn})"
    else
        tap_not_ok "${v}_error_names_railnet" "no WARN from railnet's GIN about rank 1 in rank 0's log: $(grep -E 'WARN' "$l0" | head -n 8 | tr '\n' '|')"
    fi

    took=1 why=
    for l in "$l0" "$l1"; do
        grep -qE 'Assigned GIN plugin railnet[^ ]* to comm' "$l" || { took=0; why="$why; no 'Assigned GIN plugin railnet' in $(basename "$l")"; }
        if [ $type = proxy ]; then
            grep -q 'GIN Proxy will not be using GDRCopy' "$l" || { took=0; why="$why; no proxy GIN context in $(basename "$l")"; }
        else
            grep -qE 'NET/railnet/GIN: rank [0-9]+ of 2 on .*: GDAKI type' "$l" || { took=0; why="$why; no railnet 'GDAKI type' context line in $(basename "$l")"; }
            grep -q 'GIN Proxy will not be using GDRCopy' "$l" && { took=0; why="$why; NCCL made a proxy GIN context in $(basename "$l")"; }
        fi
    done
    if [ $took = 1 ]; then
        tap_ok "${v}_took_railnet_gin_$type"
    else
        tap_not_ok "${v}_took_railnet_gin_$type" "${why#; }: $(kill_lines "$l0" 8)"
    fi

    if [ "$s0" = 0 ] && [ "$s1" = 137 ] && [ -n "$self" ] && grep -q '^#kill abort=' "$l0" && [ "$wall" -lt "$GIN_JOB_TIMEOUT" ]; then
        tap_ok "${v}_job_ended_in_time ($wall s; rank 0's abort: $(sed -n 's/^#kill abort=\([0-9.]*\).*/\1/p' "$l0" | head -n 1) s)"
    else
        say="rank 0 exited ${s0:-?}, rank 1 ${s1:-?} (wanted 0 and 137, rank 1's own SIGKILL; 124 is the job timeout of ${GIN_JOB_TIMEOUT} s; rank 0: 3 no error, 4 kernel would not stop, 5 error before the kill), ${wall} s"
        grep -q '^#kill abort=' "$l0" || say="$say; rank 0 never returned from ncclCommAbort or never called it"
        [ -n "$self" ] || say="$say; rank 1 never killed itself"
        tap_not_ok "${v}_job_ended_in_time" "$say: rank 0: $(tail -n 4 "$l0" | tr '\n' '|') rank 1: $(tail -n 4 "$l1" | tr '\n' '|')"
    fi
}

for v in $variants; do
    run_variant "$v"
done
tap_done
