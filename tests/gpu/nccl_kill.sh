#!/bin/sh
# Failure behaviour: one rank exits abruptly in the middle of an all_reduce
# loop; the other must get an NCCL error through railnet (a dead peer is an
# error completion in the plugin, then an async error in NCCL), not a hang.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/gpu/lib-nccl.sh"
if [ "$(gpu_count)" -lt 1 ]; then
    tap_skip_all "no CUDA GPU on this machine (run make check-gpu on a GPU machine)"
fi
tap_plan 2
# A short QP timeout so that the retry budget ends in seconds, as a job
# would configure for fast failure detection.
NCCL_NET_PLUGIN=$RAILNET_PLUGIN RAILNET_IB_TIMEOUT=14 RAILNET_IB_RETRY_CNT=3 \
    nccl_job kill 2 "$top_builddir/tests/gpu/nccl_collectives" --mode kill --max-bytes $((64 << 20)) --timeout 120
log0=$JOBDIR/kill.rank0.log
if grep -q '^ok 1 - nccl_peer_killed_gives_error' "$log0"; then
    tap_ok "nccl_peer_killed_gives_error ($(sed -n 's/^ok 1 - nccl_peer_killed_gives_error # //p' "$log0"))"
else
    tap_not_ok nccl_peer_killed_gives_error "$(tail -n 20 "$log0" | sed 's/^/# /')"
fi
if grep -q "NET/railnet" "$log0" && grep -Eq "NET/railnet: .*(RETRY_EXC|peer closed its connection|error)" "$log0"; then
    tap_ok nccl_peer_killed_error_names_railnet
else
    tap_not_ok nccl_peer_killed_error_names_railnet "$(grep -E 'WARN' "$log0" | head -n 10 | sed 's/^/# /')"
fi
tap_done
