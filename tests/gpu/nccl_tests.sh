#!/bin/sh
# NVIDIA's nccl-tests through railnet on softnic: the first real client.
# Built by scripts/build-nccl-tests (MPI=1 against tests/minimpi) into
# $top_builddir/nccl-tests (NCCL_TESTS_DIR), run by tests/minimpi/minimpirun
# with every rank its own NCCL node (NCCL_HOSTID) on one GPU, under a
# private MPS daemon when the machine has one (tests/gpu/lib-mps.sh), with
# NCCL 2.28.9 (PyTorch's: the headers the binaries were built with).
# Cases, each a job with data checks (-c 1), two or more operations queued
# back to back (-n 2 -w 1), every row's #wrong 0 and the exit status 0:
#   p2p_*        all_reduce and sendrecv through railnet's net table (P2P
#                and SHM off: every byte crosses the plugin), 2 ranks;
#   gin_D<impl>_<type>_<n>r  alltoall's device implementations -D 3 (GIN)
#                and -D 4 (LSA + GIN; each rank its own node, so GIN) on
#                symmetric windows (-R 2), 16 B to 64 MiB, 2, 4 and 8 ranks,
#                GIN types auto (RAILNET_GIN unset: an unmodified job),
#                proxy and gdaki; the log must show the type railnet gave;
# and the GIN failure cases (without MPS): a peer SIGKILLed mid-run, or
# both ports of rank 0 taken down (softnic's control file), must end every
# survivor with an NCCL error (nccl-tests' "Test NCCL failure", not a CUDA
# one) within NT_ERROR_BOUND seconds (10) and a non-zero status, never a
# hang (minimpirun --wait-others gives them 60 s; outliving it fails);
# a survivor still running BOUND + 5 s on has its host stacks logged. The
# proxy type's cases skip on NCCL 2.28 and 2.29, whose proxy GIN cannot
# report them (it ignores what the plugin's test() returns).
# Another NCCL (NCCL_TORCH_LIB, with NCCL_TESTS_DIR built against it:
# tests/gpu/nccl_tests_builds.sh sets both): the GDAKI cases skip where its
# device code reads another layout than railnet writes; from 2.30 the proxy
# cases ask NCCL_GIN_TYPE=2 (NCCL's GIN proxy over railnet's RMA table) and
# the auto cases skip (NCCL then assigns its own GDAKI, which softnic cannot
# serve).
# Knobs: NCCL_TESTS_DIR, NT_RANKS ("2 4 8"), NT_TYPES ("auto proxy gdaki"),
# NT_IMPLS ("3 4"), NT_JOB_TIMEOUT (s per job, 240), NT_FAULT_TYPES ("gdaki
# proxy"; "ncclib" runs them on NCCL's own IB transport, the reference),
# NT_WAIT_OTHERS (s the survivors get, 60), NT_FAULT_ITERS (operations
# queued per cycle in the failure cases, 20), NCCL_TORCH_LIB.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/gpu/lib-nccl.sh"
. "$top_srcdir/tests/gpu/lib-mps.sh"
NT=${NCCL_TESTS_DIR:-$top_builddir/nccl-tests}
MR=$top_builddir/tests/minimpi/minimpirun
MPILIB=$top_builddir/tests/minimpi/home/lib
RANKS=${NT_RANKS:-2 4 8}
TYPES=${NT_TYPES:-auto proxy gdaki}
IMPLS=${NT_IMPLS:-3 4}
TIMEOUT=${NT_JOB_TIMEOUT:-240}
BOUND=${NT_ERROR_BOUND:-10}
WAIT_OTHERS=${NT_WAIT_OTHERS:-60}
FAULT_TYPES=${NT_FAULT_TYPES-gdaki proxy}
if [ "$(gpu_count)" -lt 1 ]; then
    tap_skip_all "no CUDA GPU on this machine (run make check-gpu on a GPU machine)"
fi
for p in alltoall_perf all_reduce_perf sendrecv_perf; do
    [ -x "$NT/$p" ] || tap_skip_all "nccl-tests not built in $NT (scripts/build-nccl-tests SRC, SRC a checkout of NVIDIA/nccl-tests)"
done
[ -x "$MR" ] && [ -e "$MPILIB/libmpi.so" ] || tap_skip_all "tests/minimpi not built"
nr=0; for r in $RANKS; do nr=$((nr + 1)); done
nt=0; for t in $TYPES; do nt=$((nt + 1)); done
ni=0; for i in $IMPLS; do ni=$((ni + 1)); done
nf=0; for t in $FAULT_TYPES; do [ "$t" = ncclib ] || nf=$((nf + 2)); done
tap_plan $((2 + nr * nt * ni + nf))

work=$(mktemp -d)
mps_start "$work" || echo "# no MPS daemon: the ranks take time slices of the GPU"
trap 'mps_stop; rm -rf "$work"' EXIT
unset NCCL_P2P_DISABLE NCCL_SHM_DISABLE NCCL_DEBUG_SUBSYS
export NCCL_TESTS_DEVICE=0 NCCL_NVLS_ENABLE=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET
export LD_LIBRARY_PATH=$SOFTNIC_DIR:$(nccl_torch_lib):$MPILIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NET_PLUGIN=$RAILNET_PLUGIN

# nt_job NAME NRANKS [VAR=VALUE...] -- PROG ARGS: one job through
# minimpirun; its output in $JOBDIR/nccl_tests.NAME.log, rc and took (s).
nt_job() {
    _name=$1 _n=$2; shift 2
    _x=
    while [ "$1" != "--" ]; do _x="$_x -x $1"; shift; done
    shift
    log=$JOBDIR/nccl_tests.$_name.log
    _t0=$(date +%s)
    # shellcheck disable=SC2086
    "$MR" -n "$_n" --timeout "$TIMEOUT" --rank-env NCCL_HOSTID=railnet-nt-node-%r $_x "$@" >"$log" 2>&1
    rc=$?
    took=$(($(date +%s) - _t0))
}

# Every data row's #wrong columns (9 and 13 with -c 1) are 0 (13 is N/A
# where the collective has no in-place variant: alltoall, sendrecv), there
# is at least one row, and nccl-tests' closing check passed.
rows_clean() {
    awk '/^ *[0-9]+ +[0-9]+ / { n++; if ($9 != "0" || ($13 != "0" && $13 != "N/A")) bad++ }
         END { exit !(n > 0 && bad == 0) }' "$1" &&
        grep -q 'Out of bounds values : 0 OK' "$1"
}
why() {
    printf 'rc=%s took=%ss rows: %s | %s' "$rc" "$took" \
        "$(awk '/^ *[0-9]+ +[0-9]+ / { printf "%s:%s/%s ", $1, $9, $13 }' "$1" | cut -c1-300)" \
        "$(grep -E 'WARN|rror|minimpirun:' "$1" | head -n 6 | tr '\n' '|' | cut -c1-900)"
}

# p2p: the net table, every byte through the plugin
for coll in all_reduce sendrecv; do
    nt_job "p2p_$coll" 2 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 -- \
        "$NT/${coll}_perf" -b 8 -e 64M -f 8 -c 1 -n 2 -w 1
    if [ $rc -eq 0 ] && rows_clean "$log" && grep -q 'NET/Plugin: Loaded net plugin railnet' "$log"; then
        tap_ok "p2p_${coll}_2r_through_railnet_data_checked"
    else tap_not_ok "p2p_${coll}_2r_through_railnet_data_checked" "$(why "$log")"; fi
done

# The NCCL the jobs ran (nccl-tests prints it in its header).
nccl_lib=$(sed -n 's/.*nccl-library=\([0-9]*\).*/\1/p' "$JOBDIR/nccl_tests.p2p_all_reduce.log" | head -n 1)
# NCCL's version code (22809) as people write it (2.28.9)
nccl_ver=$(echo "${nccl_lib:-0}" | awk '{ printf "%d.%d.%d", $1 / 10000, ($1 % 10000) / 100, $1 % 100 }')
# railnet's GDAKI type writes NCCL 2.28's and 2.29's layout (100) and NCCL
# 2.30's (200); other releases get the proxy type. RAILNET_GIN=auto gives
# the GDAKI type only under NCCL 2.28 (the layouts of 2.29 and 2.30 are
# asked for with RAILNET_GIN=gdaki until they have run here).
gdaki_ok=no
[ "${nccl_lib:-0}" -ge 22800 ] && [ "${nccl_lib:-0}" -lt 23100 ] && gdaki_ok=yes
auto_gdaki=no
[ "${nccl_lib:-0}" -ge 22800 ] && [ "${nccl_lib:-0}" -lt 22900 ] && auto_gdaki=yes
# NCCL 2.30 takes railnet's GIN v14 for setup and runs its own GIN proxy
# over railnet's RMA table, but assigns its own GDAKI type (3) when it may:
# NCCL_GIN_TYPE=2 asks for the proxy
proxy_env=
[ "${nccl_lib:-0}" -ge 23000 ] && proxy_env=" NCCL_GIN_TYPE=2"

# GIN: the device implementations of alltoall
for impl in $IMPLS; do
    for type in $TYPES; do
        case $type in
            auto) env= want="GDAKI type"; [ $auto_gdaki = yes ] || want="proxy type" ;;
            proxy) env="RAILNET_GIN=proxy$proxy_env" want="proxy type" ;;
            gdaki) env="RAILNET_GIN=gdaki NCCL_GIN_TYPE=3" want="GDAKI type" ;;
        esac
        for n in $RANKS; do
            name=gin_D${impl}_${type}_${n}r
            if [ $type = auto ] && [ "${nccl_lib:-0}" -ge 23000 ]; then
                tap_skip "${name}_data_checked_16B_to_64MiB" "NCCL ${nccl_ver}, left to choose, assigns its own GDAKI GIN (type 3), which needs the DEVX objects softnic does not offer (DOCA Error 21); the proxy case runs NCCL's GIN proxy over railnet's RMA table"
                continue
            fi
            if [ $type = gdaki ] && [ $gdaki_ok = no ]; then
                tap_skip "${name}_data_checked_16B_to_64MiB" "NCCL ${nccl_ver}'s device code reads a GDAKI layout railnet does not write (it writes NCCL 2.28's, 2.29's and 2.30's): railnet offers the proxy type"
                continue
            fi
            # shellcheck disable=SC2086
            nt_job "$name" "$n" $env -- "$NT/alltoall_perf" -b 16 -e 64M -f 4 -c 1 -R 2 -D "$impl" -n 2 -w 1
            # nccl-tests compiles its device implementations only against an
            # NCCL whose headers have the GIN device API (not 2.28.3's)
            if grep -q "Device implementation $impl is not supported by this test" "$log"; then
                no_impl="nccl-tests built against NCCL ${nccl_ver} has no device implementation $impl (that NCCL's headers lack the device API nccl-tests needs)"
                tap_skip "${name}_data_checked_16B_to_64MiB" "$no_impl"
                continue
            fi
            if [ $rc -eq 0 ] && rows_clean "$log" && grep -q "NET/railnet/GIN: rank 0 of $n .*$want" "$log"; then
                tap_ok "${name}_data_checked_16B_to_64MiB"
            else tap_not_ok "${name}_data_checked_16B_to_64MiB" "$(why "$log")"; fi
        done
    done
done

# Failures: the survivors end with an NCCL error within BOUND seconds.
# A short retry budget, as a job configured for fast failure detection.
export RAILNET_IB_TIMEOUT=14 RAILNET_IB_RETRY_CNT=3 SOFTNIC_RETRY_CAP_MS=2000
# running LOG JOB: waits until the job printed its table header (the first
# size's operations start right after) and 5 s more, so that its kernels
# run; false when the job ended first or the header never came.
running() {
    _i=0
    while [ $_i -lt 900 ] && ! grep -q '^# *size *count' "$1" && kill -0 "$2" 2>/dev/null; do
        sleep 0.2; _i=$((_i + 1))
    done
    grep -q '^# *size *count' "$1" && sleep 5 && kill -0 "$2" 2>/dev/null
}
# the delays minimpirun reported for the survivors' ends, worst first
delays() { sed -n 's/.*exited with status [1-9][0-9]*, \([0-9.]*\) s after the first failure/\1/p' "$1" | sort -rn; }
within() { [ -n "$1" ] && awk -v d="$1" -v b="$BOUND" 'BEGIN { exit !(d <= b) }'; }
# No MPS here: under MPS a client killed with its kernel running faulted
# the server's other clients ("an illegal memory access was encountered"),
# which ended the survivors through CUDA, not through NCCL's error path,
# and left a server that refused later clients.
mps_stop
# -N 0 -n 20: cycles of 20 operations without end, the host synchronizing
# (and polling ncclCommGetAsyncError) after each; one long cycle would
# leave the host blocked in a kernel launch once the launch queue filled.
FAULT_ARGS="-b 1M -e 1M -c 0 -R 2 -D 3 -N 0 -n ${NT_FAULT_ITERS:-20} -w 0"
# stacks_if_late LOG JOB EXCEPT: when ranks of JOB still run BOUND + 5 s
# from now, their host stacks go to LOG.stacks (where a survivor waits).
stacks_if_late() {
    _i=0
    while [ $_i -lt $((BOUND + 5)) ] && kill -0 "$2" 2>/dev/null; do sleep 1; _i=$((_i + 1)); done
    kill -0 "$2" 2>/dev/null || return 0
    host_stacks $(sed -n 's/^# *Rank *[0-9]* .* Pid *\([0-9]*\) .*/\1/p' "$1" | grep -vx "${3:-none}") >"$1.stacks" 2>&1
}
# an NCCL error, as nccl-tests reports it, and no CUDA one
nccl_error() { grep -q 'Test NCCL failure' "$1" && ! grep -q 'Test CUDA failure' "$1"; }
# fault_result TYPE NAME OK DETAIL: a TAP result for railnet's types; for
# the reference a comment line (NCCL's own transport is not under test)
fault_result() {
    if [ "$1" = ncclib ]; then
        echo "# reference, NCCL's own IB transport: $2: $([ "$3" = 1 ] && echo ended || echo 'did not end'): $4"
    elif [ "$3" = 1 ]; then tap_ok "$2"
    else tap_not_ok "$2" "$4"; fi
}
FAULT_TIMEOUT=$((40 + BOUND + WAIT_OTHERS))
for type in $FAULT_TYPES; do
    if [ -n "${no_impl:-}" ] && [ "$type" != ncclib ]; then
        tap_skip "gin_${type}_peer_killed_survivors_end_with_an_error_within_${BOUND}s" "$no_impl"
        tap_skip "gin_${type}_ports_down_every_rank_ends_with_an_error_within_${BOUND}s" "$no_impl"
        continue
    fi
    if [ "$type" = gdaki ] && [ $gdaki_ok = no ]; then
        why_not="NCCL ${nccl_ver}'s device code reads a GDAKI layout railnet does not write (it writes NCCL 2.28's, 2.29's and 2.30's)"
        tap_skip "gin_gdaki_peer_killed_survivors_end_with_an_error_within_${BOUND}s" "$why_not"
        tap_skip "gin_gdaki_ports_down_every_rank_ends_with_an_error_within_${BOUND}s" "$why_not"
        continue
    fi
    if [ "$type" = proxy ] && [ "${nccl_lib:-0}" -lt 23000 ]; then
        why_not="NCCL ${nccl_ver}'s proxy GIN ignores what the plugin's test() and ginProgress return and reports only an iput that fails; an error after a kernel's last put never reaches ncclCommGetAsyncError (NCCL's own IB transport hangs the same way: NT_FAULT_TYPES=ncclib)"
        tap_skip "gin_proxy_peer_killed_survivors_end_with_an_error_within_${BOUND}s" "$why_not"
        tap_skip "gin_proxy_ports_down_every_rank_ends_with_an_error_within_${BOUND}s" "$why_not"
        continue
    fi
    case $type in
        proxy) env="RAILNET_GIN=proxy$proxy_env" ;;
        gdaki) env="RAILNET_GIN=gdaki NCCL_GIN_TYPE=3" ;;
        # the reference, not railnet: NCCL's own IB transport and proxy GIN
        ncclib) env="NCCL_NET=IB NCCL_NET_PLUGIN=none NCCL_GIN_TYPE=2 NCCL_IB_GID_INDEX=0" ;;
    esac
    # a peer killed while the kernels run: rank 1 of 3
    log=$JOBDIR/nccl_tests.kill_$type.log
    # shellcheck disable=SC2086
    "$MR" -n 3 --timeout "$FAULT_TIMEOUT" --wait-others "$WAIT_OTHERS" --rank-env NCCL_HOSTID=railnet-nt-node-%r \
        $(for e in $env; do printf ' -x %s' "$e"; done) \
        "$NT/alltoall_perf" $FAULT_ARGS >"$log" 2>&1 &
    job=$!
    victim=
    if running "$log" $job; then
        victim=$(sed -n 's/^# *Rank *1 .* Pid *\([0-9]*\) .*/\1/p' "$log" | head -n 1)
        [ -n "$victim" ] && kill -9 "$victim"
    fi
    stacks_if_late "$log" $job "$victim"
    wait $job; rc=$?
    d=$(delays "$log" | head -n 1) n_ended=$(delays "$log" | wc -l)
    ok=0
    [ -n "$victim" ] && [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$n_ended" -eq 2 ] && within "$d" &&
        nccl_error "$log" && ok=1
    fault_result $type "gin_${type}_peer_killed_survivors_end_with_an_error_within_${BOUND}s" $ok \
        "victim=$victim rc=$rc survivors ended: $n_ended, worst ${d:-none} s | $(grep -E 'WARN|minimpirun:|failure' "$log" | head -n 8 | tr '\n' '|' | cut -c1-1200)"
    echo "# $type, peer killed: $n_ended survivor(s) ended, the last ${d:-never} s after the first failure"

    # both ports of rank 0 down while the kernels run
    log=$JOBDIR/nccl_tests.portdown_$type.log
    rm -f "$work"/ctl*
    # shellcheck disable=SC2086
    "$MR" -n 2 --timeout "$FAULT_TIMEOUT" --wait-others "$WAIT_OTHERS" --rank-env NCCL_HOSTID=railnet-nt-node-%r \
        --rank-env "SOFTNIC_CTL_FILE=$work/ctl%r" $(for e in $env; do printf ' -x %s' "$e"; done) \
        "$NT/alltoall_perf" $FAULT_ARGS >"$log" 2>&1 &
    job=$!
    injected=no
    running "$log" $job && printf 'softnic0 1 down\nsoftnic0 2 down\n' >"$work/ctl0" && injected=yes
    t0=$(date +%s)
    stacks_if_late "$log" $job ""
    wait $job; rc=$?
    took=$(($(date +%s) - t0))
    ok=0
    [ $injected = yes ] && [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -le $((BOUND + 1)) ] &&
        ! grep -q 'still running' "$log" && nccl_error "$log" && ok=1
    fault_result $type "gin_${type}_ports_down_every_rank_ends_with_an_error_within_${BOUND}s" $ok \
        "injected=$injected rc=$rc took=${took}s | $(grep -E 'WARN|minimpirun:|failure' "$log" | head -n 8 | tr '\n' '|' | cut -c1-1200)"
    echo "# $type, ports down: every rank ended ${took} s after the injection (rc $rc)"
done
tap_done
