#!/bin/sh
# GPU end-to-end of NCCL's own IB transport on softnic: no
# plugin (NCCL_NET=IB NCCL_NET_PLUGIN=none), P2P/SHM and NVLS off, so every
# byte crosses softnic through NCCL's net_ib. all_reduce and sendrecv x
# {fp32, bf16} checked on every rank, with the system NCCL (2.28.3 on the
# GPU machines) and PyTorch's (2.28.9, nccl_torch_lib). NCCL 2.28.9 probes
# its GIN back ends in ncclNetPluginInit and faulted there on softnic when
# the GDAKI probe found no mlx5 device; softnic's libmlx5 now answers as a
# ConnectX (mlx5dv_is_supported, the MLX5_1.25 entry points), so each
# variant must also show: the NCCL version that ran, that NCCL used its IB
# network on softnic's devices, no "dlvsym failed" for an mlx5dv symbol,
# and every rank exiting 0. A variant whose NCCL is not installed is
# skipped with the reason.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/gpu/lib-nccl.sh"
prog=$top_builddir/tests/gpu/nccl_collectives
ncoll=4
per_variant=$((ncoll + 4))
if [ "$(gpu_count)" -lt 1 ]; then
    tap_skip_all "no CUDA GPU on this machine (run make check-gpu on a GPU machine)"
fi
[ -x "$prog" ] || tap_skip_all "$prog not built (configure found no NCCL)"
tap_plan $((2 * per_variant))
for variant in system nccl2289; do
    ld=$LD_LIBRARY_PATH want=
    if [ $variant = nccl2289 ]; then
        tl=$(nccl_torch_lib)
        if [ ! -e "$tl/libnccl.so.2" ]; then
            i=0; while [ $i -lt $per_variant ]; do tap_skip "ib_${variant}_case_$i" "PyTorch's NCCL not found at $tl"; i=$((i + 1)); done
            continue
        fi
        ld=$SOFTNIC_DIR:$tl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} want=2.28.9
    fi
    name=ib_$variant
    LD_LIBRARY_PATH=$ld NCCL_NET=IB NCCL_NET_PLUGIN=none NCCL_NVLS_ENABLE=0 \
        NCCL_IB_GID_INDEX=${NCCL_IB_GID_INDEX:-0} \
        nccl_job "$name" 2 timeout -k 10 600 "$prog" --mode check --colls all_reduce,send_recv \
            --types fp32,bf16 --max-bytes $((64 << 20)) --timeout 300
    status=$?
    log0=$JOBDIR/$name.rank0.log
    log1=$JOBDIR/$name.rank1.log
    nccl_report_collectives "$name" $ncoll "$log0" "$log1"
    nccl_check_version "$name" "$want" "$log0"
    if grep -q "Using network IB" "$log0" && grep -q "NET/IB.*softnic" "$log0"; then
        tap_ok "${name}_nccl_used_its_ib_transport_on_softnic"
    else
        tap_not_ok "${name}_nccl_used_its_ib_transport_on_softnic" "$(grep -E 'NET/|network' "$log0" | head -n 20 | sed 's/^/# /')"
    fi
    failed=$(grep -h "dlvsym failed.*mlx5\|mlx5dv.*dlvsym failed\|Failed to open mlx5dv" "$log0" "$log1" | head -n 5)
    if [ -z "$failed" ]; then tap_ok "${name}_every_mlx5dv_symbol_bound"
    else tap_not_ok "${name}_every_mlx5dv_symbol_bound" "$(echo "$failed" | sed 's/^/# /')"; fi
    if [ $status -eq 0 ]; then tap_ok "${name}_all_ranks_exit_0"
    else tap_not_ok "${name}_all_ranks_exit_0" "worst exit status $status (a signal is 128+N); rank0: $(grep -E 'WARN|failed|Segmentation|signal' "$log0" | head -n 10)"; fi
done
tap_done
