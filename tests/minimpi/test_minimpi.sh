#!/bin/sh
# tests/minimpi/test_minimpi.sh: minimpi's libmpi.so and minimpirun. The
# collectives checked by mpi_check (and mpi_cxx, mpi.h as nccl-tests use
# it) as a singleton and on 1, 2, 3 and 8 ranks; the launcher's options;
# a job ended by a failing rank, a rank killed by a signal, --timeout, the
# library's own wait timeout and a SIGTERM to the launcher: each time the
# exit status, how fast, no rank left and the job's file removed.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
tap_plan 22
dir=$top_builddir/tests/minimpi
mr=$dir/minimpirun
check=$dir/mpi_check
cxx=$dir/mpi_cxx
[ -x "$mr" ] && [ -x "$check" ] || tap_skip_all "minimpirun or mpi_check not built"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset MINIMPI_SHM MINIMPI_RANK MINIMPI_SIZE MINIMPI_ERRORS MINIMPI_WAIT_TIMEOUT MINIMPI_SHM_DIR MPI_CHECK_PIDDIR

ms() { date +%s%3N; }
# job NAME ARGS...: runs minimpirun ARGS in the background with the job's
# file in $tmp/NAME.shm and the ranks' pids in $tmp/NAME.pids; sets rc,
# took (ms), out and err (files), pid (the launcher's).
job() {
    name=$1; shift
    mkdir -p "$tmp/$name.shm" "$tmp/$name.pids"
    out=$tmp/$name.out err=$tmp/$name.err
    t0=$(ms)
    MINIMPI_SHM_DIR=$tmp/$name.shm MPI_CHECK_PIDDIR=$tmp/$name.pids "$mr" "$@" >"$out" 2>"$err" &
    pid=$!
    wait $pid
    rc=$?
    took=$(($(ms) - t0))
}
# The ranks that wrote their pid are all gone, and the job's file too.
leftovers() {
    for f in "$tmp/$1.pids"/rank.*; do
        [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && echo "rank ${f##*.} (pid $(cat "$f")) still running"
    done
    ls "$tmp/$1.shm" | sed 's/^/file left: /'
}
# expect NAME COND WHY: one case, failing with WHY, the output and the leftovers
expect() {
    left=$(leftovers "$1")
    if eval "$2" && [ -z "$left" ]; then tap_ok "$1"
    else tap_not_ok "$1" "$3; rc=$rc took=${took}ms $left
stdout: $(tail -n 5 "$out")
stderr: $(tail -n 10 "$err")"; fi
}

# --help and bad command lines
out=$tmp/help.out
"$mr" --help >"$out" 2>&1; rc=$?
if [ $rc -eq 0 ] && grep -q -- '--rank-env VAR=FORMAT' "$out" && grep -q -- '--timeout' "$out"; then tap_ok help
else tap_not_ok help "rc=$rc $(head -n 5 "$out")"; fi
bad_n() {
    for n in 0 -3 abc 1025 2x ""; do
        msg=$("$mr" -n "$n" "$check" 2>&1); r=$?
        [ $r -eq 2 ] && echo "$msg" | grep -q -- "-n needs a number of ranks from 1 to 1024, not '$n'" ||
            { echo "-n '$n': rc=$r $msg"; return 1; }
    done
    msg=$("$mr" "$check" 2>&1); r=$?
    [ $r -eq 2 ] && echo "$msg" | grep -q -- "-n N (the number of ranks) is required" || { echo "no -n: rc=$r $msg"; return 1; }
    msg=$("$mr" -n 2 2>&1); r=$?
    [ $r -eq 2 ] && echo "$msg" | grep -q "no program to run" || { echo "no program: rc=$r $msg"; return 1; }
    msg=$("$mr" -n 2 --bogus "$check" 2>&1); r=$?
    [ $r -eq 2 ] && echo "$msg" | grep -q "unknown option '--bogus'" || { echo "bogus: rc=$r $msg"; return 1; }
    msg=$("$mr" -n 2 --rank-env 'V=a%q' "$check" 2>&1); r=$?
    [ $r -eq 2 ] && echo "$msg" | grep -q "FORMAT knows %r and %% only" || { echo "%q: rc=$r $msg"; return 1; }
}
tap_check bad_command_lines bad_n

# singletons: no launcher, one rank
tap_check singleton_collectives "$check"
if [ -x "$cxx" ]; then tap_check singleton_cxx "$cxx"; else tap_skip singleton_cxx "mpi_cxx not built"; fi
tap_check singleton_errors env MINIMPI_ERRORS=return "$check" errors

for n in 1 2 3 8; do
    job collectives_$n -n $n --timeout 60 "$check"
    expect collectives_$n '[ $rc -eq 0 ] && [ "$(grep -c "collectives ok" "$out")" -eq $n ]' "every rank checks its collectives"
done
if [ -x "$cxx" ]; then
    job cxx_3 -n 3 --timeout 60 "$cxx"
    expect cxx_3 '[ $rc -eq 0 ] && [ "$(grep -c " ok" "$out")" -eq 3 ]' "mpi.h as nccl-tests use it"
else tap_skip cxx_3 "mpi_cxx not built"; fi
job errors_return -n 2 --timeout 60 -x MINIMPI_ERRORS=return "$check" errors
expect errors_return '[ $rc -eq 0 ] && grep -q "MPI_Allreduce: no reduction is defined on MPI_BYTE" "$err"' \
    "bad arguments return MPI_ERR_* and leave the ranks in step"

# -x and --rank-env, and the job's file in /dev/shm removed at the end
out=$tmp/env.out err=$tmp/env.err
"$mr" -n 3 -x FOO=bar -x HOME --rank-env NCCL_HOSTID=host%r --rank-env PCT=%%%r%% "$check" env FOO NCCL_HOSTID PCT >"$out" 2>"$err"; rc=$?
shm=$(sed -n 's/^0 MINIMPI_SHM=//p' "$out")
if [ $rc -eq 0 ] && grep -qx "0 FOO=bar" "$out" && grep -qx "2 FOO=bar" "$out" &&
    grep -qx "0 NCCL_HOSTID=host0" "$out" && grep -qx "1 NCCL_HOSTID=host1" "$out" &&
    grep -qx "2 NCCL_HOSTID=host2" "$out" && grep -qx "2 PCT=%2%" "$out" &&
    [ "$(sed -n 's/^2 MINIMPI_SHM=//p' "$out")" = "$shm" ] && case $shm in /dev/shm/minimpi-*) true;; *) false;; esac &&
    [ ! -e "$shm" ]; then tap_ok rank_env_and_x
else tap_not_ok rank_env_and_x "rc=$rc shm=$shm $(cat "$out" "$err")"; fi

# a rank exits 3 while the others wait in a barrier: status 3, at once
job rank_exits_3 -n 4 --timeout 60 "$check" exit 2 3
expect rank_exits_3 '[ $rc -eq 3 ] && [ $took -lt 20000 ] && grep -q "rank 2 exited with status 3" "$err"' \
    "exit status 3 within 20 s"
job rank_killed -n 3 --timeout 60 "$check" kill 1
expect rank_killed '[ $rc -eq 137 ] && [ $took -lt 20000 ] && grep -q "rank 1 was killed by signal 9" "$err"' \
    "exit status 128+9 within 20 s"
job exec_fails -n 2 --timeout 60 "$tmp/no-such-program"
expect exec_fails '[ $rc -eq 127 ] && grep -q "cannot run .*no-such-program" "$err"' "exit status 127 and why"

# a rank hangs: --timeout 2 ends the job
job timeout -n 3 --timeout 2 "$check" hang 1
expect timeout '[ $rc -eq 124 ] && [ $took -ge 2000 ] && [ $took -lt 20000 ] &&
    grep -q "timeout of 2 s passed: stopping ranks 0 1 2" "$err"' "exit status 124 within 2 to 6 s"
# ... and without --timeout, the library's wait timeout (the hanging rank
# is stopped by minimpirun once the others gave up)
job wait_timeout -n 2 -x MINIMPI_WAIT_TIMEOUT=1 "$check" hang 1
expect wait_timeout '[ $rc -eq 1 ] && [ $took -lt 20000 ] &&
    grep -q "rank 0: MPI_Barrier: giving up: the other ranks did not arrive within 1 s" "$err"' \
    "exit status 1 within 6 s, with the reason"

# SIGTERM to the launcher goes to the ranks: exit 143
name=sigterm
mkdir -p "$tmp/$name.shm" "$tmp/$name.pids"
out=$tmp/$name.out err=$tmp/$name.err
MINIMPI_SHM_DIR=$tmp/$name.shm MPI_CHECK_PIDDIR=$tmp/$name.pids "$mr" -n 2 --timeout 60 "$check" hang 0 >"$out" 2>"$err" &
pid=$!
i=0
while [ $i -lt 100 ] && [ "$(ls "$tmp/$name.pids" | wc -l)" -lt 2 ]; do sleep 0.1; i=$((i + 1)); done
t0=$(ms)
kill -TERM $pid
wait $pid
rc=$?
took=$(($(ms) - t0))
expect sigterm '[ $rc -eq 143 ] && [ $took -lt 20000 ] && grep -q "got signal 15" "$err"' "exit status 143 within 20 s"

# --kill-rank with --wait-others: the killed rank does not decide the job;
# survivors that end by themselves within the wait do (their status, each
# end reported with its delay), survivors that outlive it are stopped (124)
job kill_survivors_exit -n 3 --kill-rank 1@0.5 --wait-others 5 sh -c \
    'echo $$ >"$MPI_CHECK_PIDDIR/rank.$MINIMPI_RANK"; if [ $MINIMPI_RANK = 1 ]; then sleep 60; else sleep 1.5; exit 3; fi'
expect kill_survivors_exit '[ $rc -eq 3 ] && [ $took -lt 20000 ] &&
    grep -q "SIGKILL to rank 1 after 0.5 s" "$err" && grep -q "rank 0 exited with status 3, [0-9.]* s after the first failure" "$err" &&
    grep -q "rank 2 exited with status 3, " "$err"' "status 3 (the survivors'), both ends reported"
job kill_survivors_hang -n 2 --kill-rank 0@0.3 --wait-others 1 sh -c \
    'echo $$ >"$MPI_CHECK_PIDDIR/rank.$MINIMPI_RANK"; sleep 60'
expect kill_survivors_hang '[ $rc -eq 124 ] && [ $took -lt 20000 ] &&
    grep -q "ranks 1 still running 1 s after the first failure: stopping them" "$err"' "124 once the wait ran out"
out=$tmp/killbad.out
"$mr" -n 2 --kill-rank 2@1 true >"$out" 2>&1; rc=$?
if [ $rc -eq 2 ] && grep -q -- "--kill-rank 2: the job has ranks 0 to 1" "$out"; then tap_ok kill_rank_out_of_range_refused
else tap_not_ok kill_rank_out_of_range_refused "rc=$rc $(cat "$out")"; fi

# a program that links libmpi.so: MINIMPI_SHM without the rank is refused
out=$tmp/norank.out
MINIMPI_SHM=/nonexistent "$check" >"$out" 2>&1; rc=$?
if [ $rc -eq 1 ] && grep -q "MINIMPI_SHM is set but MINIMPI_RANK=(unset)" "$out"; then tap_ok shm_without_rank_refused
else tap_not_ok shm_without_rank_refused "rc=$rc $(cat "$out")"; fi
tap_done
