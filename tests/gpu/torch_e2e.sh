#!/bin/sh
# PyTorch's NCCL (torch.distributed, NCCL backend) through railnet on softnic,
# with GDR on and with host staging. Logs must show railnet (v11) loaded.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/gpu/lib-nccl.sh"
ncases=$((2 * (12 + 2)))
if [ "$(gpu_count)" -lt 1 ] || ! python3 -c 'import torch' 2>/dev/null; then
    tap_skip_all "needs a CUDA GPU and PyTorch (run make check-gpu on a GPU machine)"
fi
tap_plan $ncases
for variant in gdr host; do
    if [ $variant = gdr ]; then gdr=SYS; else gdr=LOC; fi
    log=$JOBDIR/torch_$variant.log
    # NCCL_NET_GDR_READ=0: the receive side writes into GPU memory (GDR), the
    # send side stages through host memory. With GDR reads, softnic's NIC
    # threads read GPU memory through the CUDA driver, and the driver blocks
    # them while PyTorch's main thread sits in a synchronizing CUDA call that
    # waits for the NCCL send kernel, which waits for those reads: a deadlock
    # of the software NIC (cuda-gdb showed the NIC threads in the driver's
    # rwlock). A real NIC reads GPU memory by DMA, outside the driver. The
    # system-NCCL test (nccl_e2e.sh) keeps GDR reads on.
    NCCL_NET_PLUGIN=$RAILNET_PLUGIN NCCL_NET_GDR_LEVEL=$gdr NCCL_NET_GDR_READ=0 RAILNET_GPU_LOGDIR=$JOBDIR \
        timeout 900 python3 "$top_srcdir/tests/gpu/torch_collectives.py" >"$log" 2>&1
    status=$?
    got=$(grep -cE '^(not )?ok [0-9]+ - torch_' "$log")
    grep -E '^(not )?ok [0-9]+ - torch_' "$log" | sed "s/ - torch_/ - ${variant}_torch_/; s/^\(not \)\{0,1\}ok [0-9]* /\1ok /"
    TAP_N=$((TAP_N + got)); TAP_FAILED=$((TAP_FAILED + $(grep -cE '^not ok [0-9]+ - torch_' "$log")))
    missing=$((12 - got)); while [ $missing -gt 0 ]; do tap_not_ok "${variant}_torch_collective_missing" "$(tail -n 30 "$log" | sed 's/^/# /')"; missing=$((missing - 1)); done
    if grep -q "Loaded net plugin railnet (v11)" "$log"; then tap_ok "${variant}_torch_nccl_loaded_railnet_v11"
    else tap_not_ok "${variant}_torch_nccl_loaded_railnet_v11" "$(grep -E 'NET/' "$log" | head -n 10 | sed 's/^/# /')"; fi
    [ $status -eq 0 ] && tap_ok "${variant}_torch_job_exit_0" || tap_not_ok "${variant}_torch_job_exit_0" "exit status $status"
done
tap_done
