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
# NCCL's GDAKI runs twice a round (the A/A run) and every figure is the median
# of RAILNET_BENCH_ROUNDS alternating rounds (default 3). The verdicts:
# railnet's GDAKI against NCCL's by the A/A rule (no size below the band of
# NCCL-again / NCCL, median ratio >= 1.0), and railnet's GDAKI per-op time
# against its proxy type's at 64 KiB-1 MiB (<= RAILNET_BENCH_GDAKI_GOAL, 0.25). Softnic ports are limited to RAILNET_BENCH_RATE
# bytes/s (default 3125M, as bench/gpu_nccl_ib_vs_railnet.sh; 0 = no limit).
# With one GPU the two ranks share it: without MPS their kernels take turns
# in time slices (tests/gpu/lib-mps.sh says why that matters on softnic),
# and every transport then shows the same slice-bound figures
# (docs/performance.md gives them). So a private MPS daemon runs for
# the benchmark by default on one GPU (RAILNET_BENCH_MPS=0: none); the
# output says which. RAILNET_BENCH_GDAKI_QUEUE: where railnet's GDAKI rings
# live (RAILNET_GDAKI_QUEUE_MEM): host-devx (default: host memory mapped for
# the GPU, what the GIN GDAKI type uses unless told otherwise) or gpu (GPU
# memory, as IBGDA places them; on softnic each doorbell then costs CUDA
# copies, docs/gpu-initiated.md). NCCL's own GDAKI places its rings in GPU
# memory.
: "${top_builddir:=$(pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
. "$top_srcdir/bench/lib-vars.sh"
bench_vars_check || exit 1
export top_builddir top_srcdir
. "$top_srcdir/tests/gpu/lib-nccl.sh"
. "$top_srcdir/tests/gpu/lib-gin.sh"
. "$top_srcdir/bench/lib-rounds.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "skipped: no CUDA GPU"; exit 0; fi
if [ ! -x "$GIN_PROG" ]; then echo "skipped: tests/gpu/gin_device not built (no nvcc or NCCL headers)"; exit 0; fi
case ${RAILNET_BENCH_GDAKI_QUEUE:-host-devx} in
    gpu) rn_gdaki_net=railnet-gdaki ringmem=GPU ;;
    host-devx) rn_gdaki_net=railnet-gdaki-hostq ringmem=host ;;
    *) echo "RAILNET_BENCH_GDAKI_QUEUE: gpu or host-devx" >&2; exit 2 ;;
esac
rate=${RAILNET_BENCH_RATE:-3125M}
[ "$rate" = 0 ] || export SOFTNIC_RATE="$rate"
args="--mode bench --min-bytes ${RAILNET_BENCH_MIN_BYTES:-1024} --max-bytes ${RAILNET_BENCH_MAX_BYTES:-$((64 << 20))} --iters ${RAILNET_BENCH_ITERS:-20} --pp-iters ${RAILNET_BENCH_PP_ITERS:-200} --timeout 120"
mps=off
if [ "$(gpu_count)" -lt 2 ] && [ "${RAILNET_BENCH_MPS:-1}" = 1 ]; then
    . "$top_srcdir/tests/gpu/lib-mps.sh"
    if mps_start "$JOBDIR"; then mps=on; trap mps_stop EXIT; fi
fi
rc=0
# Transports, each a column: NCCL's proxy GIN and NCCL's own GDAKI over its
# IB transport, NCCL's GDAKI again (the A/A run: how far a figure moves by
# itself), railnet's proxy type and railnet's GDAKI type. Each of
# RAILNET_BENCH_ROUNDS rounds (default 3) runs them all, in the order
# bench/lib-rounds.sh gives the round (each takes each place as often as the
# others); every figure is the median over the rounds.
ts="ib_proxy ib_gdaki ib_gdaki_aa rn_proxy rn_gdaki"
rounds=${RAILNET_BENCH_ROUNDS:-3}
case $rounds in ''|*[!0-9]*|0) echo "RAILNET_BENCH_ROUNDS: a positive count"; exit 2 ;; esac
net_of() {
    case $1 in
        ib_proxy) echo ib-proxy ;; ib_gdaki*) echo ib-gdaki ;;
        rn_proxy) echo railnet ;; rn_gdaki) echo "$rn_gdaki_net" ;;
    esac
}
k=1
while [ $k -le "$rounds" ]; do
    # shellcheck disable=SC2086
    for t in $(round_order "$k" $ts); do
        # shellcheck disable=SC2086
        gin_job "bench_gin_${t}_r$k" torch "$(net_of $t)" $args ||
            { case $t in ib_gdaki*) ;; *) rc=1 ;; esac
              echo "$t run failed (round $k): $(grep -m1 -E 'NCCL WARN|gin_env_open|rror' "$JOBDIR/bench_gin_${t}_r$k.rank0.log")"; }
    done
    k=$((k + 1))
done
echo "GIN alltoall and put+signal ping-pong, 2 ranks, NCCL 2.28.9, softnic at ${SOFTNIC_RATE:-unlimited} B/s per port, $(gpu_count) GPU(s), MPS $mps, railnet GDAKI rings in $ringmem memory, medians of $rounds rounds"
for t in $ts; do
    grep -hE "Assigned GIN plugin|GIN Proxy will not|NET/railnet/GIN: rank 0 of 2 on .*GDAKI type" "$JOBDIR/bench_gin_${t}_r1.rank0.log" 2>/dev/null |
        sed "s/^[^]]*] NCCL INFO /# $t: /" | sort -u
done
# rank 0's "#bench" lines of every run, as "TRANSPORT alltoall BYTES GBPS" and
# "TRANSPORT pingpong - US"; then the table, the ping-pong and the verdicts:
# - railnet GDAKI against NCCL's GDAKI by the A/A rule: the band is the range
#   over the sizes of NCCL GDAKI again / NCCL GDAKI; railnet passes when no
#   size falls below its low edge and the median ratio is >= 1.0;
# - railnet's GDAKI per-op time against its proxy type's at 64 KiB-1 MiB:
#   <= 0.25 (RAILNET_BENCH_GDAKI_GOAL) at every one of those sizes.
for t in $ts; do
    k=1
    while [ $k -le "$rounds" ]; do
        f=$JOBDIR/bench_gin_${t}_r$k.rank0.log
        [ -e "$f" ] && awk -v t="$t" '$1 == "#bench" && $2 == "alltoall" { print t, "alltoall", $3, $5 }
                                       $1 == "#bench" && $2 == "pingpong" { print t, "pingpong", "-", $4 }' "$f"
        k=$((k + 1))
    done
done | awk -v goal="${RAILNET_BENCH_GDAKI_GOAL:-0.25}" -v vfile="$JOBDIR/gin_verdict_aa" -v pfile="$JOBDIR/gin_verdict_op" '
    function med(key, n,   i, j, x, a) {
        for (i = 1; i <= n; i++) a[i] = V[key, i]
        for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j+1] = a[j]; a[j+1] = x }
        return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
    }
    function m(t, x) { return ((t, x) in N) ? med(t SUBSEP x, N[t, x]) : 0 }
    function cell(v) { return v > 0 ? sprintf("%.4g", v) : "-" }
    function rat(a, b) { return (a > 0 && b > 0) ? sprintf("%.2f", a / b) : "-" }
    { key = $1 SUBSEP $3; N[$1, $3]++; V[key, N[$1, $3]] = $4; if ($2 == "alltoall") S[$3] = 1 }
    END {
        printf "%12s %10s %10s %6s %10s %10s %12s %14s\n", "bytes", "IB_proxy", "IB_gdaki", "A/A", "rn_proxy", "rn_gdaki", "rn_g/IB_g", "op_g/op_proxy"
        n = 0; for (x in S) sz[++n] = x + 0
        for (i = 2; i <= n; i++) { y = sz[i]; for (j = i - 1; j >= 1 && sz[j] > y; j--) sz[j+1] = sz[j]; sz[j+1] = y }
        over = ""; ngoal = 0
        printf "" > vfile
        for (i = 1; i <= n; i++) {
            x = sz[i]; ip = m("ib_proxy", x); ig = m("ib_gdaki", x); ia = m("ib_gdaki_aa", x); rp = m("rn_proxy", x); rg = m("rn_gdaki", x)
            aa = rat(ia, ig); q = rat(rg, ig); op = rat(rp, rg)   # per-op time ratio = proxy bw / gdaki bw
            printf "%12d %10s %10s %6s %10s %10s %12s %14s\n", x, cell(ip), cell(ig), aa, cell(rp), cell(rg), q, op
            print x, q, aa > vfile
            if (x >= 65536 && x <= 1048576) { ngoal++; if (op == "-" || op + 0 > goal) over = over " " x "=" op }
        }
        if ((("rn_proxy", "-") in N) || (("rn_gdaki", "-") in N) || (("ib_gdaki", "-") in N))
            printf "ping-pong round trip (us): IB proxy %s, IB GDAKI %s, A/A %s, railnet proxy %s, railnet GDAKI %s\n",
                cell(m("ib_proxy", "-")), cell(m("ib_gdaki", "-")), cell(m("ib_gdaki_aa", "-")), cell(m("rn_proxy", "-")), cell(m("rn_gdaki", "-"))
        printf "verdict railnet GDAKI per-op / proxy per-op <= %s at 64 KiB-1 MiB: %s%s\n", goal,
            (ngoal && over == "" ? "pass" : (ngoal ? "fail" : "undecided (no such size)")), (over == "" ? "" : " (above:" over ")") > pfile
    }' >"$JOBDIR/gin_table"
echo "verdict railnet GDAKI / NCCL GDAKI: $(awk -v why="NCCL's GDAKI did not run twice" -f "$top_srcdir/bench/aa-verdict.awk" "$JOBDIR/gin_verdict_aa")" >>"$JOBDIR/gin_table"
cat "$JOBDIR/gin_verdict_op" >>"$JOBDIR/gin_table"
cat "$JOBDIR/gin_table"

# RAILNET_BENCH_MD=FILE: the results as markdown for docs/performance.md,
# into FILE's section "gpu_gin_railnet_vs_nccl" (bench/lib-md.sh)
if [ -n "${RAILNET_BENCH_MD:-}" ]; then
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
    . "$top_srcdir/bench/lib-md.sh"
    cmd=$(md_command "RAILNET_BENCH_GPU=1 RAILNET_BENCH_ROUNDS=$rounds${RAILNET_BENCH_MIN_BYTES:+ RAILNET_BENCH_MIN_BYTES=$RAILNET_BENCH_MIN_BYTES}${RAILNET_BENCH_MAX_BYTES:+ RAILNET_BENCH_MAX_BYTES=$RAILNET_BENCH_MAX_BYTES}${RAILNET_BENCH_GDAKI_QUEUE:+ RAILNET_BENCH_GDAKI_QUEUE=$RAILNET_BENCH_GDAKI_QUEUE}" gpu_gin_railnet_vs_nccl.sh)
    {
        echo "$(date -u +%F), ${gpu:-a GPU} shared by 2 ranks (MPS $mps), NCCL 2.28.9 (PyTorch's), softnic at ${SOFTNIC_RATE:-unlimited} B/s a port,"
        echo "railnet's GDAKI rings in $ringmem memory, GB/s of alltoall bus bandwidth per rank size, medians of $rounds alternating"
        echo "rounds. NCCL's own GDAKI runs twice a round: A/A is its second run over its first."
        echo
        echo '```sh'
        echo "$cmd"
        echo '```'
        echo
        echo "| per rank | NCCL IB proxy | NCCL IB GDAKI | A/A | railnet proxy | railnet GDAKI | railnet GDAKI / NCCL GDAKI | GDAKI per-op / proxy per-op |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|"
        awk '$1 ~ /^[0-9]+$/ && NF == 8 {
                 b = $1 + 0; h = b >= 1048576 ? b / 1048576 " MiB" : b / 1024 " KiB"
                 printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", h, $2, $3, $4, $5, $6, $7, $8 }' "$JOBDIR/gin_table"
        echo
        sed -n 's/^ping-pong round trip (us): /Put + signal ping-pong round trip (us): /p; s/^verdict \(.*\)/- verdict \1/p' "$JOBDIR/gin_table"
    } >"$JOBDIR/gin_md"
    md_section "$RAILNET_BENCH_MD" gpu_gin_railnet_vs_nccl "$JOBDIR/gin_md"
fi
exit $rc
