# tests/gpu/lib-nccl.sh: start an NCCL job of N ranks on this machine with
# railnet (or NCCL's own IB transport) on softnic. Sourced by tests/gpu/*.sh.
#
#   nccl_job <name> <nranks> <program and args...>
# runs one process per rank with --rank/--nranks/--id-file appended, rank r on
# GPU r % ngpus. With fewer GPUs than ranks each rank gets its own NCCL_HOSTID,
# so NCCL treats the ranks as separate nodes: every byte then crosses the
# network plugin (as it does with P2P and SHM off on one host).
# NCCL_RANK_WRAP_<r>, when set, is a command prefix for rank r (split on
# blanks), e.g. "ip netns exec A env VAR=x": the rank runs behind it.
# Output: $JOBDIR/<name>.rank<r>.log, each rank's exit status in
# $JOBDIR/<name>.rank<r>.status; returns the worst exit status.
: "${top_builddir:?}"
: "${top_srcdir:?}"
JOBDIR=${RAILNET_GPU_LOGDIR:-$top_builddir/gpu-logs}
mkdir -p "$JOBDIR"
RAILNET_PLUGIN=${RAILNET_PLUGIN:-$top_builddir/.libs/libnccl-net-railnet.so}
SOFTNIC_DIR=${SOFTNIC_DIR:-$top_builddir/tests/softnic}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
export NCCL_DEBUG=${NCCL_DEBUG:-INFO} NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,NET,ENV,BOOTSTRAP}
# softnic is the NIC: its libibverbs.so.1 comes first for the plugin and NCCL.
export LD_LIBRARY_PATH=$SOFTNIC_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# The lib/ directory of PyTorch's NCCL (2.28.9 on the GPU machines; the
# system's is 2.28.3): NCCL_TORCH_LIB, else where the nvidia-nccl wheel
# says it is, else the GPU machines' path. Put it after softnic's directory
# in LD_LIBRARY_PATH to run a job with that NCCL.
nccl_torch_lib() {
    if [ -n "${NCCL_TORCH_LIB:-}" ]; then echo "$NCCL_TORCH_LIB"; return; fi
    d=$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
    [ -n "$d" ] && [ -e "$d/libnccl.so.2" ] && { echo "$d"; return; }
    echo /opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib
}

gpu_count() {
    nvidia-smi -L 2>/dev/null | grep -c '^GPU '
}

nccl_job() {
    name=$1; n=$2; shift 2
    ngpu=$(gpu_count)
    idf=$JOBDIR/$name.id
    rm -f "$idf" "$idf.tmp"
    pids=
    r=0
    while [ $r -lt "$n" ]; do
        hostid=
        [ "$ngpu" -lt "$n" ] && hostid="railnet-node-$r"
        eval "wrap=\${NCCL_RANK_WRAP_$r-}"
        ( [ -n "$hostid" ] && export NCCL_HOSTID=$hostid
          exec $wrap "$@" --rank $r --nranks "$n" --gpu $((r % ngpu)) --id-file "$idf" ) \
            >"$JOBDIR/$name.rank$r.log" 2>&1 &
        pids="$pids $!"
        r=$((r + 1))
    done
    worst=0
    r=0
    for p in $pids; do
        wait "$p"; s=$?
        echo "$s" >"$JOBDIR/$name.rank$r.status"
        [ $s -gt $worst ] && worst=$s
        r=$((r + 1))
    done
    return $worst
}

# nccl_report_collectives PREFIX N LOG0 LOG1: rank 0's TAP lines of
# nccl_collectives (LOG0) as cases named PREFIX_<case>, and one failure for
# each of the N collectives that printed no line (with both ranks' tails).
nccl_report_collectives() {
    _got=$(grep -cE '^(not )?ok [0-9]+ - nccl_' "$3")
    grep -E '^(not )?ok [0-9]+ - nccl_' "$3" | while IFS= read -r _line; do
        case "$_line" in
            "not ok"*) echo "not ok - ${1}_${_line#not ok * - }" ;;
            *) echo "ok - ${1}_${_line#ok * - }" ;;
        esac
    done
    TAP_N=$((TAP_N + _got))
    TAP_FAILED=$((TAP_FAILED + $(grep -cE '^not ok [0-9]+ - nccl_' "$3")))
    _missing=$(($2 - _got))
    while [ $_missing -gt 0 ]; do
        tap_not_ok "${1}_collective_missing" "$(tail -n 30 "$3" "$4" | sed 's/^/# /')"
        _missing=$((_missing - 1))
    done
}

# nccl_check_version PREFIX WANT LOG: the NCCL version LOG says ran, which
# must be WANT when WANT is set.
nccl_check_version() {
    _ver=$(sed -n 's/.*NCCL version \([0-9.]*\).*/\1/p' "$3" | head -n 1)
    if [ -n "$_ver" ] && { [ -z "$2" ] || [ "$_ver" = "$2" ]; }; then
        tap_ok "${1}_ran_nccl_$_ver"
    else
        tap_not_ok "${1}_ran_expected_nccl" "NCCL version '$_ver' in the log, wanted '${2:-any}'"
    fi
}

# host_stacks PID...: every thread's backtrace of each live PID on stdout,
# through cuda-gdb (the GPU machines have no gdb; cuda-gdb attaches as root
# and debugs host code too), else each thread's kernel wait channel.  For
# the log of a test whose processes outlived their bound: where they wait.
host_stacks() {
    for _p in "$@"; do
        kill -0 "$_p" 2>/dev/null || continue
        echo "### stacks of pid $_p ($(tr '\0' ' ' <"/proc/$_p/cmdline" 2>/dev/null | cut -c1-120))"
        if command -v cuda-gdb >/dev/null 2>&1; then
            timeout 90 cuda-gdb -nx -batch -p "$_p" -ex 'set pagination off' \
                -ex 'thread apply all bt 30' -ex detach 2>&1 |
                grep -E '^(Thread|#)' | cut -c1-220
            # and where its kernels are (which one spins, in which wait)
            echo "### kernels of pid $_p"
            timeout 90 cuda-gdb -nx -batch -p "$_p" -ex 'set pagination off' -ex 'info cuda kernels' \
                -ex 'cuda kernel 0 block 0 thread 0' -ex 'bt 12' -ex 'info cuda blocks' -ex detach 2>&1 |
                grep -vE '^\[(New|Thread|Inferior)|^(Reading|Attaching|warning:|Detaching)' | head -n 60 | cut -c1-220
        else
            for _t in /proc/"$_p"/task/*; do
                echo "thread ${_t##*/} $(cat "$_t/comm" 2>/dev/null) wchan=$(cat "$_t/wchan" 2>/dev/null)"
            done
        fi
    done
}
