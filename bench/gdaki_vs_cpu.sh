#!/bin/sh
# bench/gdaki_vs_cpu.sh (GPU machine, RAILNET_BENCH_GPU=1): message rate and
# latency of GPU-initiated (kernel-posted) RDMA writes against CPU-posted
# ones on the same softnic port and GPU buffers, 8 B..4 KiB, with ratios
# (tests/gdaki/bench_gdaki; exit 77 = no GPU).
: "${top_builddir:=$(pwd)}"
b=$top_builddir/tests/gdaki/bench_gdaki
[ -x "$b" ] || { echo "skipped: $b not built (configure found no nvcc)"; exit 0; }
top_builddir=$top_builddir "$b"
rc=$?
[ $rc -eq 77 ] && { echo "skipped: no CUDA GPU"; exit 0; }
exit $rc
