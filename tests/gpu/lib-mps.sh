# tests/gpu/lib-mps.sh: a private CUDA MPS daemon for GPU tests and benches
# whose processes share one GPU (sourced; no TAP output).
#
# Why: CUDA gives two processes on one GPU time slices of about 2 ms. On
# softnic the receiving process's NIC thread copies every payload into its
# GPU memory through CUDA, so while the other process's kernel holds the GPU
# (a posting kernel spins in quiet until its completion) each message waits
# for a slice: 2.4 ms per GPU-initiated write between two processes, where
# one process does it in ~80 us. A real NIC writes GPU memory by DMA, with no
# context of its own. Under MPS the processes share one context server and
# run side by side.
#
#   mps_start DIR   starts the daemon with its pipe and log directories
#                   under DIR and exports CUDA_MPS_* for what follows;
#                   MPS=on on success, MPS=off (and status 1) otherwise.
#   mps_stop        stops it again (safe to call when it is not running),
#                   killing a server that does not quit.
MPS=off
mps_start() {
    MPS=off
    command -v nvidia-cuda-mps-control >/dev/null 2>&1 || return 1
    CUDA_MPS_PIPE_DIRECTORY=$1/mps-pipe CUDA_MPS_LOG_DIRECTORY=$1/mps-log
    export CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d; then
        MPS=on
        return 0
    fi
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    return 1
}
mps_stop() {
    if [ "$MPS" = on ]; then
        echo quit | timeout 10 nvidia-cuda-mps-control >/dev/null 2>&1
        # A server one of whose clients was killed with a kernel running
        # may refuse every later client ("CUDA-capable device(s) is/are
        # busy or unavailable") and not quit: it is ended, so that the
        # next mps_start gets a working one.
        _i=0
        while [ $_i -lt 50 ] && pgrep -x nvidia-cuda-mps-server >/dev/null 2>&1; do sleep 0.1; _i=$((_i + 1)); done
        pkill -9 -x nvidia-cuda-mps-server 2>/dev/null
        pkill -9 -x nvidia-cuda-mps-control 2>/dev/null
    fi
    MPS=off
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
