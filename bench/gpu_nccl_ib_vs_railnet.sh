#!/bin/sh
# bench/gpu_nccl_ib_vs_railnet.sh (GPU machine): all_reduce and send_recv bus
# bandwidth of NCCL's built-in IB transport (NCCL_NET=IB, no plugin) against
# railnet, both on the same softnic, 64 KiB..256 MiB (RAILNET_BENCH_MIN_BYTES,
# RAILNET_BENCH_MAX_BYTES; RAILNET_BENCH_COLLS picks among all_reduce and
# send_recv), two ranks, measured side by side in one run and printed as a
# ratio per collective and size. Both runs use the same GDR level
# (RAILNET_BENCH_GDR_LEVEL, default LOC = host staging, which does not depend
# on how each transport detects GPU Direct support on a software NIC).
#
# Two conditions make the comparison one of transports rather than of a
# software NIC's quirks:
# - Each softnic port is limited to RAILNET_BENCH_RATE bytes/s (a list;
#   default "3125M 0": 3125M = 25 Gb/s, which softnic then advertises as
#   1x EDR; "0" = no limit,
#   advertised: the 4x link within softnic's memcpy calibration, README).
#   NCCL picks channels and protocol from the advertised speed; unlimited
#   softnic claimed 200 Gb/s per port before that calibration but carries
#   a few GB/s, and NCCL then picks LL and 4 channels for 1 MiB on
#   railnet's merged 400 Gb/s device, which on softnic ran 0.9-1.2 GB/s
#   against 2.6-3.3 GB/s with Simple on 2 channels.
# - With fewer GPUs than ranks (both ranks on one GPU), the ranks' kernels
#   share the GPU by time slices unless an MPS daemon runs: every step then
#   waits for a context switch (a ~4.7 ms floor per all_reduce up to 8 MiB).
#   The script starts a private MPS daemon for the run when
#   nvidia-cuda-mps-control exists and GDR is off (softnic's GPU copies hang
#   under MPS: its NIC threads use the CUDA driver from a third context),
#   and says so when it does not.
# RAILNET_BENCH_NCCL lists the NCCLs both runs load, one table each
# (default "system torch"): "system" (the libnccl.so.2 the loader finds;
# 2.28.3 on the GPU machines), "torch" (PyTorch's, 2.28.9, nccl_torch_lib
# of tests/gpu/lib-nccl.sh) or a directory holding a libnccl.so.2. Every
# NCCL runs at every rate; the version that ran is printed per table.
: "${top_builddir:=$(pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
export top_builddir top_srcdir
# TUNING: the log names the algorithm and protocol NCCL picked per size
export NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,NET,ENV,TUNING}
. "$top_srcdir/tests/gpu/lib-nccl.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "skipped: no CUDA GPU"; exit 0; fi
gdr=${RAILNET_BENCH_GDR_LEVEL:-LOC}
mps=off
if [ "$(gpu_count)" -lt 2 ]; then
    . "$top_srcdir/tests/gpu/lib-mps.sh"
    if [ "$gdr" = LOC ] && mps_start "$JOBDIR"; then
        mps=on
        trap mps_stop EXIT
    fi
    [ $mps = on ] || echo "# note: two ranks share one GPU without MPS: time slicing puts a floor under every all_reduce"
fi
prog=$top_builddir/tests/gpu/nccl_collectives
colls=${RAILNET_BENCH_COLLS:-all_reduce,send_recv}
args="--mode bench --min-bytes ${RAILNET_BENCH_MIN_BYTES:-$((64 << 10))} --max-bytes ${RAILNET_BENCH_MAX_BYTES:-$((256 << 20))} --colls $colls --iters ${RAILNET_BENCH_ITERS:-50} --timeout 600"
ld0=$LD_LIBRARY_PATH

# bench_one NCCL RATE: both transports with that NCCL at that port rate, and their table
bench_one() {
    sel=$1 rate=$2 ncclDir=
    case $sel in
        system) ;;
        torch) ncclDir=$(nccl_torch_lib) ;;
        *) ncclDir=$sel ;;
    esac
    export LD_LIBRARY_PATH=$ld0
    if [ -n "$ncclDir" ]; then
        [ -e "$ncclDir/libnccl.so.2" ] || { echo "skipped NCCL $sel: no libnccl.so.2 in $ncclDir"; return 0; }
        # after softnic's directory, before the rest: this NCCL, softnic's verbs
        export LD_LIBRARY_PATH=$SOFTNIC_DIR:$ncclDir${ld0#"$SOFTNIC_DIR"}
    fi
    if [ "$rate" = 0 ]; then unset SOFTNIC_RATE; else export SOFTNIC_RATE="$rate"; fi
    tag=${sel##*/}_$rate
    # NCCL's IB transport picks its GID from sysfs, which softnic cannot provide
    # in /sys: name softnic's RoCE v2 IPv4 GID index explicitly.
    NCCL_NET=IB NCCL_NET_PLUGIN=none NCCL_NET_GDR_LEVEL=$gdr NCCL_IB_GID_INDEX=${RAILNET_BENCH_GID_INDEX:-0} \
        nccl_job "bench_ib_$tag" 2 $prog $args || { echo "NCCL IB run failed:"; tail -n 20 "$JOBDIR/bench_ib_$tag.rank0.log"; }
    NCCL_NET_PLUGIN=$RAILNET_PLUGIN NCCL_NET_GDR_LEVEL=$gdr \
        nccl_job "bench_railnet_$tag" 2 $prog $args || { echo "railnet run failed:"; tail -n 20 "$JOBDIR/bench_railnet_$tag.rank0.log"; }
    ib=$JOBDIR/bench_ib_$tag.rank0.log
    rn=$JOBDIR/bench_railnet_$tag.rank0.log
    ver=$(sed -n 's/.*NCCL version \([0-9.]*\).*/\1/p' "$ib" | head -n 1)
    echo
    echo "bus bandwidth ($colls), 2 ranks, softnic, NCCL ${ver:-?} ($sel), NCCL_NET_GDR_LEVEL=$gdr, SOFTNIC_RATE=${SOFTNIC_RATE:-unlimited} per port, $(gpu_count) GPU(s), MPS $mps"
    grep -hE "Using network|NET/IB : Using|NET/railnet: device 0:" "$ib" "$rn" | sed 's/^[^]]*] NCCL INFO /# /'
    grep -hE "AllReduce: 1048576 Bytes" "$ib" | head -n 1 | sed 's/^[^]]*] NCCL INFO /# IB at 1 MiB: /'
    grep -hE "AllReduce: 1048576 Bytes" "$rn" | head -n 1 | sed 's/^[^]]*] NCCL INFO /# railnet at 1 MiB: /'
    printf '%-11s %12s %14s %14s %8s\n' collective bytes IB_GBps railnet_GBps ratio
    # rank 0's lines: bytes iters time_us busbw collective
    awk 'FNR==1{f++} /^  +[0-9]+ +[0-9]+ /{ k=($5 == "" ? "all_reduce" : $5) " " $1; if (f==1) ib[k]=$4; else rn[k]=$4 }
         END { for (k in rn) if (k in ib) { split(k, p, " "); printf "%-11s %12d %14.3f %14.3f %8.2f\n", p[1], p[2], ib[k], rn[k], (ib[k] > 0 ? rn[k]/ib[k] : 0) } }' \
        "$ib" "$rn" | sort -k1,1 -k2,2n
}
for sel in ${RAILNET_BENCH_NCCL:-system torch}; do
    for rate in ${RAILNET_BENCH_RATE:-3125M 0}; do
        bench_one "$sel" "$rate"
    done
done
