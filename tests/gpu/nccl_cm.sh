#!/bin/sh
# GPU: one NCCL job (2 ranks, all_reduce, all_gather and send_recv, fp32,
# 4 B..64 MiB, checked on every rank) with NCCL_NET_PLUGIN=railnet and
# RAILNET_CM=rdmacm: every connection of the job is set up through softnic's
# RDMA CM (librdmacm.so.1 beside its libibverbs). The logs must show railnet
# used, its listeners and connections made through the RDMA CM, and none
# through the TCP bootstrap.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/gpu/lib-nccl.sh"
prog=$top_builddir/tests/gpu/nccl_collectives
if [ "$(gpu_count)" -lt 1 ]; then
    tap_skip_all "no CUDA GPU on this machine (run make check-gpu on a GPU machine)"
fi
[ -x "$prog" ] || tap_skip_all "tests/gpu/nccl_collectives not built (configure found no NCCL)"
[ -e "$SOFTNIC_DIR/librdmacm.so.1" ] || tap_skip_all "softnic's librdmacm.so.1 not built (librdmacm-dev missing at configure)"
tap_plan 6
NCCL_NET_PLUGIN=$RAILNET_PLUGIN RAILNET_CM=rdmacm NCCL_NET_GDR_LEVEL=SYS \
    nccl_job cm 2 "$prog" --mode check --colls all_reduce,all_gather,send_recv --types fp32 \
    --max-bytes $((64 << 20)) --timeout 300
status=$?
log0=$JOBDIR/cm.rank0.log
log1=$JOBDIR/cm.rank1.log
for c in all_reduce all_gather send_recv; do
    if grep -qE "^ok [0-9]+ - nccl_${c}_fp32" "$log0"; then tap_ok "cm_${c}_fp32_checked"
    else tap_not_ok "cm_${c}_fp32_checked" "$(grep -E "nccl_${c}|WARN" "$log0" | head -n 10 | sed 's/^/# /')"; fi
done
if grep -q "Loaded net plugin railnet (v11)" "$log0" && grep -q "Using network railnet" "$log0"; then
    tap_ok cm_nccl_loaded_and_used_railnet_v11
else tap_not_ok cm_nccl_loaded_and_used_railnet_v11 "$(grep -E 'NET/|network' "$log0" | head -n 20 | sed 's/^/# /')"; fi
ncm=$(cat "$log0" "$log1" | grep -c "through the RDMA CM")
ntcp=$(cat "$log0" "$log1" | grep -c "(TCP bootstrap")
if [ "$ncm" -gt 0 ] && [ "$ntcp" -eq 0 ]; then tap_ok cm_connections_through_the_rdma_cm_only
else tap_not_ok cm_connections_through_the_rdma_cm_only "$ncm lines say RDMA CM, $ntcp TCP bootstrap"; fi
[ $status -eq 0 ] && tap_ok cm_all_ranks_exit_0 || tap_not_ok cm_all_ranks_exit_0 "worst exit status $status; rank1: $(grep -E 'failed|WARN' "$log1" | head -n 10)"
tap_done
