#!/bin/sh
# bench/gpu_gin_railnet_vs_nccl.sh (GPU machine, RAILNET_BENCH_GPU=1 make bench):
# GPU-initiated networking side by side in one run on the same softnic ports:
# railnet's GIN (proxy type, NCCL_NET_PLUGIN=railnet) against NCCL's own
# proxy GIN over its IB transport (NCCL_NET=IB NCCL_GIN_TYPE=2), both with
# NCCL 2.28.9 (PyTorch's), two ranks, through tests/gpu/gin_device --mode bench:
# - alltoall from a GIN kernel over symmetric windows, 64 KiB..64 MiB per rank
#   (bus bandwidth as nccl-tests counts it: bytes x (n-1)/n per second), the
#   received bytes checked after the timed launches;
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
args="--mode bench --min-bytes $((64 << 10)) --max-bytes $((64 << 20)) --iters ${RAILNET_BENCH_ITERS:-20} --pp-iters ${RAILNET_BENCH_PP_ITERS:-200} --timeout 120"
mps=off
if [ "$(gpu_count)" -lt 2 ] && [ "${RAILNET_BENCH_MPS:-0}" = 1 ]; then
    . "$top_srcdir/tests/gpu/lib-mps.sh"
    if mps_start "$JOBDIR"; then mps=on; trap mps_stop EXIT; fi
fi
rc=0
# shellcheck disable=SC2086
gin_job bench_gin_ib torch ib-proxy $args || { rc=1; echo "NCCL IB proxy GIN run failed:"; tail -n 15 "$JOBDIR/bench_gin_ib.rank0.log"; }
# shellcheck disable=SC2086
gin_job bench_gin_railnet torch railnet $args || { rc=1; echo "railnet GIN run failed:"; tail -n 15 "$JOBDIR/bench_gin_railnet.rank0.log"; }
ib=$JOBDIR/bench_gin_ib.rank0.log
rn=$JOBDIR/bench_gin_railnet.rank0.log
echo "GIN alltoall and put+signal ping-pong, 2 ranks, NCCL 2.28.9, softnic at ${SOFTNIC_RATE:-unlimited} B/s per port, $(gpu_count) GPU(s), MPS $mps"
grep -hE "Assigned GIN plugin|GIN Proxy will not" "$ib" "$rn" | sed 's/^[^]]*] NCCL INFO /# /' | sort | uniq -c | sed 's/^ */# x/'
printf '%12s %14s %14s %8s\n' bytes IB_GIN_GBps railnet_GBps ratio
awk 'FNR==1{f++} $1=="#bench" && $2=="alltoall" { if (f==1) ib[$3]=$5; else rn[$3]=$5 }
     END { for (b in ib) printf "%12d %14.3f %14s %8s\n", b, ib[b], (b in rn) ? sprintf("%.3f", rn[b]) : "-", (b in rn && ib[b] > 0) ? sprintf("%.2f", rn[b]/ib[b]) : "-" }' "$ib" "$rn" | sort -n
awk 'FNR==1{f++} $1=="#bench" && $2=="pingpong" { if (f==1) ib=$4; else rn=$4 }
     END { printf "ping-pong round trip (us): IB GIN %s, railnet %s, IB/railnet %s\n", ib==""?"-":ib, rn==""?"-":rn, (ib!="" && rn!="" && rn>0) ? sprintf("%.2f", ib/rn) : "-" }' "$ib" "$rn"
exit $rc
