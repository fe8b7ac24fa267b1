#!/bin/sh
# bench/mlx5_engine.sh: softnic's mlx5 engine path (WQEs a CPU thread
# writes into an mlx5 ring, executed by softnic's mlx5 NIC thread: what a
# GPU kernel's posts cost on softnic, minus the GPU) against ibv_post_send
# on the same loopback pair, 8 B..4 KiB, rate with 8 in flight and one at a
# time, side by side in one run (bench/mlx5_engine_bench.c).  Compare two
# softnic builds with RAILNET_IBVERBS_LIB=<other build>/tests/softnic/libibverbs.so.1.
top_builddir=${top_builddir:-$(pwd)}
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
. "$top_srcdir/bench/lib-vars.sh"
bench_vars_check || exit 1
b=$top_builddir/bench/mlx5_engine_bench
[ -x "$b" ] || { echo "skipped: build bench/mlx5_engine_bench first (make bench)"; exit 0; }
export top_builddir
exec "$b" -r "${RAILNET_BENCH_ROUNDS:-5}"
