#!/bin/sh
# bench/gdaki_vs_cpu.sh (GPU machine, RAILNET_BENCH_GPU=1): GPU-initiated
# (kernel-posted) RDMA writes of 8 B..4 KiB against the CPU on the same
# softnic port and GPU buffers, with ratios, in two tables:
#  1. the GPU-initiated path's measure: against the CPU-proxy path, isend/irecv through the
#     dlopen'ed plugin (tests/gdaki/bench_gdaki_vs_proxy);
#  2. against a CPU thread's raw ibv_post_send on the same pair
#     (tests/gdaki/bench_gdaki): the part of (1)'s gap that is the plugin's.
#  then what the CUDA driver calls behind softnic's copies of GPU payloads
#     cost (tests/gdaki/bench_cuda_copy), the floor under every such message;
#  3. the tool's per-write latency (railnet-write-bw --gpu-initiated, client
#     and server as two processes on this GPU) against (1)'s one-process
#     GPU latency, without and with an MPS daemon (tests/gpu/lib-mps.sh says
#     why two processes on one GPU wait for time slices without it), and,
#     where the machine has two GPUs, with the server on the second
#     (--use_cuda=1): two processes on two GPUs share no time slices, as
#     two hosts' ranks do not.
# A program that exits 77 (no GPU) prints why and counts as skipped.
: "${top_builddir:=$(pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
. "$top_srcdir/bench/lib-vars.sh"
bench_vars_check || exit 1
export top_builddir top_srcdir
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
out=$(mktemp -d "${TMPDIR:-/tmp}/gdaki-bench.XXXXXX")
run bench_gdaki_vs_proxy --mem=cuda | tee "$out/proxy"
echo
run bench_gdaki
echo
run bench_cuda_copy
echo

# 3. The tool's "Lat[usec]" (one thread, put + quiet, as (1)'s gpu_lat_us).
WB=$top_builddir/tools/railnet-write-bw
tool_lat() { # SIZE [SERVER_GPU]: the client's latency column, or "-"
    timeout 120 "$WB" -p 0 --gpu-initiated ${2:+--use_cuda=$2} -n 1000 -s "$1" >"$out/srv" 2>"$out/srv.err" &
    sp=$!
    port=
    for _ in $(seq 100); do
        port=$(sed -n 's/^railnet-write-bw: waiting for a client on TCP port \([0-9]*\)$/\1/p' "$out/srv.err")
        [ -n "$port" ] && break
        sleep 0.1
    done
    timeout 120 "$WB" -p "${port:-1}" --gpu-initiated -n 1000 -s "$1" 127.0.0.1 >"$out/cli" 2>&1
    wait $sp
    awk -v s="$1" '$1 == s && NF == 6 { print $6; found = 1 } END { if (!found) print "-" }' "$out/cli"
}
if [ -x "$WB" ] && ! "$WB" --help 2>/dev/null | grep -q 'not built in this version' &&
   grep -q 'gpu_lat_us' "$out/proxy"; then
    export LD_LIBRARY_PATH=$top_builddir/tests/softnic${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    . "$top_srcdir/tests/gpu/lib-mps.sh"
    trap 'mps_stop; rm -rf "$out"' EXIT
    for s in 8 64 512 4096; do echo "$s $(tool_lat $s)"; done >"$out/nomps"
    if mps_start "$out"; then
        for s in 8 64 512 4096; do echo "$s $(tool_lat $s)"; done >"$out/mps"
        mps_stop
    else
        echo "# no MPS daemon here: the MPS column is empty"
        : >"$out/mps"
    fi
    if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" -ge 2 ]; then
        for s in 8 64 512 4096; do echo "$s $(tool_lat $s 1)"; done >"$out/two"
    else
        echo "# one GPU here: the two-GPU column is empty"
        : >"$out/two"
    fi
    echo "# railnet-write-bw --gpu-initiated (2 processes) vs bench_gdaki_vs_proxy (1 process), per-write latency, us"
    echo "# ratio tool/bench (1.0: the tool measures what the bench measures); 2gpu: server on GPU 1, no MPS"
    printf '%6s %10s %12s %10s %12s %10s %12s %10s\n' bytes bench_us tool_us ratio tool_mps_us ratio_mps \
        tool_2gpu_us ratio_2gpu
    for s in 8 64 512 4096; do
        b=$(awk -v s="$s" '$1 == s && $2 == 8 { print $6 }' "$out/proxy")
        t=$(awk -v s="$s" '$1 == s { print $2 }' "$out/nomps")
        m=$(awk -v s="$s" '$1 == s { print $2 }' "$out/mps")
        w=$(awk -v s="$s" '$1 == s { print $2 }' "$out/two")
        awk -v s="$s" -v b="${b:--}" -v t="${t:--}" -v m="${m:--}" -v w="${w:--}" 'BEGIN {
            r = (b + 0 > 0 && t + 0 > 0) ? sprintf("%.2f", t / b) : "-"
            q = (b + 0 > 0 && m + 0 > 0) ? sprintf("%.2f", m / b) : "-"
            u = (b + 0 > 0 && w + 0 > 0) ? sprintf("%.2f", w / b) : "-"
            printf "%6s %10s %12s %10s %12s %10s %12s %10s\n", s, b, t, r, m, q, w, u }'
    done
fi
exit $rc
