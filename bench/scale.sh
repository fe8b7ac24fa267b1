#!/bin/sh
# bench/scale.sh: what one rank costs as the job grows, on softnic. N ranks
# of this host (bench/scale_bench.c) connect every rank to every other
# through the plugin's net table and its GIN table (proxy type, or GDAKI with
# RAILNET_BENCH_GIN=gdaki; per rail with RAILNET_BENCH_RAILS); one row per N
# of per-rank connect times, threads, fds, RSS, pinned memory and softnic's
# live QPs/CQs/MRs (and GIN's share of them), then a fit a + b*N of each. A
# count that fails or runs past its step budget stops the bench, which says
# where and why: on a small host that is what it found, not a failure of the
# script (which fails only when not even the first count completed).
# RAILNET_BENCH_RANKS       rank counts (default "2 4 8 16 32 64")
# RAILNET_BENCH_RAILS       GIN as NCCL's RAIL connection type with this many ranks a node
#                           (connect gets only the rank's rail: N/R handles); default 1: FULL
# RAILNET_BENCH_GIN         GIN type: proxy (default) or gdaki (host memory, no GPU: connect,
#                           one createContext, one window, as NCCL holds a GDAKI collComm)
# RAILNET_BENCH_QUEUE_DEPTH with RAILNET_BENCH_GIN=gdaki: GIN through ncclGinPlugin_v12 with
#                           this queue depth (1..65536), which sizes each QP's send ring;
#                           default none: ncclGinPlugin_v11, rings of 512 slots
# RAILNET_GDAKI_QUEUE_MEM   with RAILNET_BENCH_GIN=gdaki: host-devx (default here, CPU-only);
#                           host or gpu on a GPU machine, where "GIN GPU MiB" is then measured
# RAILNET_BENCH_STEP_TIMEOUT seconds one step may take (default 120)
# RAILNET_BENCH_TOTAL_TIMEOUT seconds for all counts (default 600, 0: none)
# SOFTNIC_RETRY_MIN_MS, SOFTNIC_RETRY_CAP_MS  softnic's retry budget (default 60000 here)
: "${top_builddir:=$(pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
. "$top_srcdir/bench/lib-vars.sh"
bench_vars_check || exit 1
export top_builddir
b=$top_builddir/bench/scale_bench
[ -x "$b" ] || { echo "skipped: build bench/scale_bench first (make -C build bench)"; exit 0; }
[ -e "$top_builddir/tests/softnic/libibverbs.so.1" ] || { echo "skipped: softnic's libibverbs.so.1 not built"; exit 0; }
export LD_LIBRARY_PATH=$top_builddir/tests/softnic${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# softnic's NIC threads (2.5 a QP here) starve as N grows on a small host; a
# starved thread is not a dead peer: retry budgets of 60 s (at N=16 on
# 2 cores, softnic's default of 0.5-2 s ran out)
: "${SOFTNIC_RETRY_MIN_MS:=60000}" "${SOFTNIC_RETRY_CAP_MS:=60000}"
export SOFTNIC_RETRY_MIN_MS SOFTNIC_RETRY_CAP_MS
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
# the rows stream as each count ends; the status comes back through a file
tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp" "$tmp.rc"' EXIT
{
    "$b" --ranks "${RAILNET_BENCH_RANKS:-2 4 8 16 32 64}" --rails "${RAILNET_BENCH_RAILS:-1}" --gin "${RAILNET_BENCH_GIN:-proxy}" \
        ${RAILNET_BENCH_QUEUE_DEPTH:+--queue-depth "$RAILNET_BENCH_QUEUE_DEPTH"} --step-timeout "${RAILNET_BENCH_STEP_TIMEOUT:-120}" \
        --total-timeout "${RAILNET_BENCH_TOTAL_TIMEOUT:-600}"
    echo $? >"$tmp.rc"
} | tee "$tmp"
rc=$(cat "$tmp.rc")
# rc 1: stopped early; fine once at least one count has its row
if [ "$rc" -eq 1 ] && grep -Eq '^ +[0-9]+ +[0-9]' "$tmp"; then
    exit 0
fi
exit "$rc"
