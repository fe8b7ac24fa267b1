#!/bin/sh
# bench/gdaki_vs_cpu.sh (GPU machine, RAILNET_BENCH_GPU=1): GPU-initiated
# (kernel-posted) RDMA writes of 8 B..4 KiB against the CPU on the same
# softnic port and GPU buffers, with ratios, in two tables:
#  1. issue 7's measure: against the CPU-proxy path, isend/irecv through the
#     dlopen'ed plugin (tests/gdaki/bench_gdaki_vs_proxy);
#  2. against a CPU thread's raw ibv_post_send on the same pair
#     (tests/gdaki/bench_gdaki): the part of (1)'s gap that is the plugin's.
# A program that exits 77 (no GPU) prints why and counts as skipped.
: "${top_builddir:=$(pwd)}"
export top_builddir
rc=0
run() {
    b=$top_builddir/tests/gdaki/$1
    shift
    [ -x "$b" ] || { echo "skipped: $b not built (make bench builds it where configure found nvcc)"; return 0; }
    "$b" "$@"
    r=$?
    [ $r -eq 77 ] && { echo "skipped: no CUDA GPU"; return 0; }
    [ $r -eq 0 ] || rc=1
}
run bench_gdaki_vs_proxy --mem=cuda
echo
run bench_gdaki
exit $rc
