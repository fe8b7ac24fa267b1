#!/bin/sh
# bench/gpu_gin_railnet_vs_nccl.sh (GPU machine, RAILNET_BENCH_GPU=1 make bench):
# GPU-initiated networking side by side in one run on the same softnic ports:
# railnet's GIN (proxy type, and GDAKI type: RAILNET_GIN=gdaki, NCCL's device
# code posting into railnet's DEVX queues; NCCL_NET_PLUGIN=railnet) against
# NCCL's own GIN over its IB transport (NCCL_NET=IB, proxy NCCL_GIN_TYPE=2 and
# GDAKI NCCL_GIN_TYPE=3 where softnic runs it), all with
# NCCL 2.28.9 (PyTorch's), two ranks, through tests/gpu/gin_device --mode bench:
# - alltoall from a GIN kernel over symmetric windows, 1 KiB..64 MiB per rank
#   (RAILNET_BENCH_MIN_BYTES, RAILNET_BENCH_MAX_BYTES; bus bandwidth as
#   nccl-tests counts it: bytes x (n-1)/n per second), the received bytes
#   checked after the timed launches. At one size the bandwidth ratio is the
#   message-rate ratio: the rows up to 64 KiB are the small-message rates;
# - ping-pong: an 8-byte put with SignalInc, answered when the signal moves,
#   microseconds per round trip measured on the GPU clock.
# Ratios: railnet / NCCL for bandwidth, NCCL / railnet for latency (> 1 means
# railnet is better in both). Softnic ports are limited to RAILNET_BENCH_RATE
# bytes/s (default 3125M, as bench/gpu_nccl_ib_vs_railnet.sh; 0 = no limit).
# With one GPU the two ranks share it: without MPS their kernels take turns
# in ~2 ms time slices (tests/gpu/lib-mps.sh says why that matters on
# softnic). RAILNET_BENCH_MPS=1 runs a private MPS daemon for the benchmark
# (off by default: on one H100, 2026-11-24, every rank's cudaSetDevice failed
# under it); the output says which.
: "${top_builddir:=$(pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
export top_builddir top_srcdir
. "$top_srcdir/tests/gpu/lib-nccl.sh"
. "$top_srcdir/tests/gpu/lib-gin.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "skipped: no CUDA GPU"; exit 0; fi
if [ ! -x "$GIN_PROG" ]; then echo "skipped: tests/gpu/gin_device not built (no nvcc or NCCL headers)"; exit 0; fi
rate=${RAILNET_BENCH_RATE:-3125M}
[ "$rate" = 0 ] || export SOFTNIC_RATE="$rate"
args="--mode bench --min-bytes ${RAILNET_BENCH_MIN_BYTES:-1024} --max-bytes ${RAILNET_BENCH_MAX_BYTES:-$((64 << 20))} --iters ${RAILNET_BENCH_ITERS:-20} --pp-iters ${RAILNET_BENCH_PP_ITERS:-200} --timeout 120"
mps=off
if [ "$(gpu_count)" -lt 2 ] && [ "${RAILNET_BENCH_MPS:-0}" = 1 ]; then
    . "$top_srcdir/tests/gpu/lib-mps.sh"
    if mps_start "$JOBDIR"; then mps=on; trap mps_stop EXIT; fi
fi
rc=0
# shellcheck disable=SC2086
gin_job bench_gin_ib torch ib-proxy $args || { rc=1; echo "NCCL IB proxy GIN run failed:"; tail -n 15 "$JOBDIR/bench_gin_ib.rank0.log"; }
# NCCL's own GDAKI over its IB transport: a column when softnic runs it (on
# 2026-11-24 NCCL refused it cleanly on softnic: then "-")
# shellcheck disable=SC2086
gin_job bench_gin_ibg torch ib-gdaki $args || echo "NCCL IB GDAKI GIN did not run (column '-'): $(grep -m1 -E 'NCCL WARN|gin_env_open' "$JOBDIR/bench_gin_ibg.rank0.log")"
# shellcheck disable=SC2086
gin_job bench_gin_railnet torch railnet $args || { rc=1; echo "railnet GIN run failed:"; tail -n 15 "$JOBDIR/bench_gin_railnet.rank0.log"; }
# railnet's GDAKI type: NCCL's device code posts into railnet's DEVX queues
# shellcheck disable=SC2086
gin_job bench_gin_railnet_gdaki torch railnet-gdaki $args || { rc=1; echo "railnet GDAKI GIN run failed:"; tail -n 15 "$JOBDIR/bench_gin_railnet_gdaki.rank0.log"; }
ib=$JOBDIR/bench_gin_ib.rank0.log
ibg=$JOBDIR/bench_gin_ibg.rank0.log
rn=$JOBDIR/bench_gin_railnet.rank0.log
rg=$JOBDIR/bench_gin_railnet_gdaki.rank0.log
echo "GIN alltoall and put+signal ping-pong, 2 ranks, NCCL 2.28.9, softnic at ${SOFTNIC_RATE:-unlimited} B/s per port, $(gpu_count) GPU(s), MPS $mps"
grep -hE "Assigned GIN plugin|GIN Proxy will not|NET/railnet/GIN: rank 0 of 2 on .*GDAKI type" "$ib" "$ibg" "$rn" "$rg" 2>/dev/null |
    sed 's/^[^]]*] NCCL INFO /# /' | sort | uniq -c | sed 's/^ */# x/'
# Columns: NCCL IB proxy, NCCL IB GDAKI, railnet proxy, railnet GDAKI (GB/s);
# ratios: railnet GDAKI over NCCL's best, and over railnet proxy.
printf '%12s %11s %11s %11s %11s %9s %9s\n' bytes IB_proxy IB_gdaki rn_proxy rn_gdaki gdaki/best gdaki/rnp
touch "$ib" "$ibg" "$rn" "$rg"   # a run that did not start leaves its column "-"
awk 'FNR==1 { for (i = 1; i < ARGC; i++) if (ARGV[i] == FILENAME) f = i } $1=="#bench" && $2=="alltoall" { v[f, $3]=$5; b[$3]=1 }
     function cell(i, x) { return ((i, x) in v) ? sprintf("%.4g", v[i, x]) : "-" }
     END { for (x in b) { best = 0; if ((1, x) in v) best = v[1, x]; if ((2, x) in v && v[2, x] > best) best = v[2, x]
             printf "%12d %11s %11s %11s %11s %9s %9s\n", x, cell(1, x), cell(2, x), cell(3, x), cell(4, x),
               ((4, x) in v && best > 0) ? sprintf("%.2f", v[4, x] / best) : "-",
               ((4, x) in v && (3, x) in v && v[3, x] > 0) ? sprintf("%.2f", v[4, x] / v[3, x]) : "-" } }' \
    "$ib" "$ibg" "$rn" "$rg" | sort -n
awk 'FNR==1 { for (i = 1; i < ARGC; i++) if (ARGV[i] == FILENAME) f = i } $1=="#bench" && $2=="pingpong" { pp[f]=$4 }
     function c(i) { return (i in pp) ? pp[i] : "-" }
     END { printf "ping-pong round trip (us): IB proxy %s, IB GDAKI %s, railnet proxy %s, railnet GDAKI %s\n", c(1), c(2), c(3), c(4) }' \
    "$ib" "$ibg" "$rn" "$rg"
exit $rc
