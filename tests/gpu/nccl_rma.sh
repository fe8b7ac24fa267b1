#!/bin/sh
# GPU: NCCL's host-initiated one-sided API (ncclPutSignal, ncclSignal,
# ncclWaitSignal; NCCL 2.30 and later) through railnet's RMA table on
# softnic. tests/gpu/nccl_rma (see its header) runs 2 and 4 ranks on one
# GPU under a private MPS daemon, every rank its own NCCL node, P2P on (NCCL
# makes symmetric windows only where it may), NCCL's GIN proxy type
# (NCCL_GIN_TYPE=2: NCCL's own GDAKI needs DEVX objects softnic lacks).
# Per job: each size's puts land, every byte checked, the signal rounds
# count right, every rank exits 0, and the log says NCCL took railnet's RMA
# table (RMA/Plugin: Loaded rma plugin railnet) and its GIN table. NCCL
# builds without the API (2.28, 2.29) skip, saying so. The NCCL is the one
# NCCL_TORCH_LIB names (tests/gpu/nccl_tests_builds.sh runs this under each
# staged build). Knobs: RMA_RANKS ("2 4"), RMA_MAX_BYTES (32M).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/gpu/lib-nccl.sh"
. "$top_srcdir/tests/gpu/lib-mps.sh"
prog=$top_builddir/tests/gpu/nccl_rma
RANKS=${RMA_RANKS:-2 4}
if [ "$(gpu_count)" -lt 1 ]; then
    tap_skip_all "no CUDA GPU on this machine (run make check-gpu on a GPU machine)"
fi
[ -x "$prog" ] || tap_skip_all "tests/gpu/nccl_rma not built (configure found no NCCL)"
tl=$(nccl_torch_lib)
[ -e "$tl/libnccl.so.2" ] || tap_skip_all "no NCCL at $tl (NCCL_TORCH_LIB)"
# the NCCL must have the API; the program says so itself, asked alone
max=${RMA_MAX_BYTES:-32M}
probe=$(LD_LIBRARY_PATH=$tl:$LD_LIBRARY_PATH "$prog" --probe --max-bytes "$max" 2>&1)
case $probe in "1..0 # SKIP"*) tap_skip_all "${probe#1..0 # SKIP }" ;; esac
# the program's cases a job (the sizes and the signal rounds)
cases=$(printf '%s\n' "$probe" | sed -n 's/^\([0-9]*\) cases a job$/\1/p')
if [ -z "$cases" ]; then tap_plan 1; tap_not_ok nccl_rma_probe "$probe"; exit 1; fi

work=$(mktemp -d)
mps_start "$work" || echo "# no MPS daemon: the ranks take time slices of the GPU"
trap 'mps_stop; rm -rf "$work"' EXIT
unset NCCL_P2P_DISABLE NCCL_SHM_DISABLE
export LD_LIBRARY_PATH=$SOFTNIC_DIR:$tl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NET_PLUGIN=$RAILNET_PLUGIN NCCL_GIN_TYPE=2 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET
nr=0; for n in $RANKS; do nr=$((nr + 1)); done
# per job: the program's cases, RMA table, GIN table, exits
per=$((cases + 3))
tap_plan $((nr * per))
for n in $RANKS; do
    nccl_job "rma_${n}r" "$n" "$prog" --max-bytes "$max" --timeout 120
    status=$?
    log0=$JOBDIR/rma_${n}r.rank0.log
    got=0
    grep -E '^(not )?ok [0-9]+ - rma_' "$log0" >"$work/cases"
    while IFS= read -r line; do
        got=$((got + 1))
        case $line in
            "not ok"*) tap_not_ok "${n}r_${line#not ok * - }" "$(grep -hE 'rank [0-9]+:' "$JOBDIR"/rma_"${n}"r.rank*.log | head -n 6)" ;;
            *) tap_ok "${n}r_${line#ok * - }" ;;
        esac
    done <"$work/cases"
    while [ "$got" -lt "$cases" ]; do
        tap_not_ok "${n}r_rma_case_missing" "$(grep -hE 'rank [0-9]+:|WARN' "$JOBDIR"/rma_"${n}"r.rank*.log | head -n 8)"
        got=$((got + 1))
    done
    if grep -q 'RMA/Plugin: Loaded rma plugin railnet' "$log0"; then tap_ok "${n}r_nccl_took_railnet_rma_table"
    else tap_not_ok "${n}r_nccl_took_railnet_rma_table" "$(grep -E 'RMA/Plugin' "$log0" | head -n 4)"; fi
    if grep -q 'NET/railnet/GIN: rank 0 of' "$log0"; then tap_ok "${n}r_nccl_took_railnet_gin_table"
    else tap_not_ok "${n}r_nccl_took_railnet_gin_table" "$(grep -E 'GIN' "$log0" | head -n 4)"; fi
    if [ "$status" -eq 0 ]; then tap_ok "${n}r_all_ranks_exit_0"
    else tap_not_ok "${n}r_all_ranks_exit_0" "worst exit status $status"; fi
done
tap_done
