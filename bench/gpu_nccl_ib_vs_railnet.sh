#!/bin/sh
# bench/gpu_nccl_ib_vs_railnet.sh (GPU machine): all_reduce bus bandwidth of
# NCCL's built-in IB transport (NCCL_NET=IB, no plugin) against railnet, both
# on the same softnic, 1 MiB..256 MiB, two ranks, measured side by side in one
# run and printed as a ratio per size. Both runs use the same GDR level
# (RAILNET_BENCH_GDR_LEVEL, default LOC = host staging, which does not depend
# on how each transport detects GPU Direct support on a software NIC).
: "${top_builddir:=$(pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
export top_builddir top_srcdir
. "$top_srcdir/tests/gpu/lib-nccl.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "skipped: no CUDA GPU"; exit 0; fi
gdr=${RAILNET_BENCH_GDR_LEVEL:-LOC}
prog=$top_builddir/tests/gpu/nccl_collectives
args="--mode bench --min-bytes $((1 << 20)) --max-bytes $((256 << 20)) --iters ${RAILNET_BENCH_ITERS:-10} --timeout 600"
# NCCL's IB transport picks its GID from sysfs, which softnic cannot provide
# in /sys: name softnic's RoCE v2 IPv4 GID index explicitly.
NCCL_NET=IB NCCL_NET_PLUGIN=none NCCL_NET_GDR_LEVEL=$gdr NCCL_IB_GID_INDEX=${RAILNET_BENCH_GID_INDEX:-0} \
    nccl_job bench_ib 2 $prog $args || { echo "NCCL IB run failed:"; tail -n 20 "$JOBDIR/bench_ib.rank0.log"; }
NCCL_NET_PLUGIN=$RAILNET_PLUGIN NCCL_NET_GDR_LEVEL=$gdr \
    nccl_job bench_railnet 2 $prog $args || { echo "railnet run failed:"; tail -n 20 "$JOBDIR/bench_railnet.rank0.log"; }
ib=$JOBDIR/bench_ib.rank0.log
rn=$JOBDIR/bench_railnet.rank0.log
echo "all_reduce bus bandwidth, 2 ranks, softnic, NCCL_NET_GDR_LEVEL=$gdr"
grep -E "Using network" "$ib" "$rn" | sed 's/^/# /'
printf '%12s %14s %14s %8s\n' bytes IB_GBps railnet_GBps ratio
awk 'FNR==1{f++} /^  +[0-9]+ +[0-9]+ /{ if (f==1) ib[$1]=$4; else rn[$1]=$4 }
     END { for (b in rn) if (b in ib) printf "%12d %14.3f %14.3f %8.2f\n", b, ib[b], rn[b], (ib[b] > 0 ? rn[b]/ib[b] : 0) }' "$ib" "$rn" | sort -n
