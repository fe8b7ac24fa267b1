#!/bin/sh
# bench/gpu_nccl_ib_vs_railnet.sh (GPU machine): bus bandwidth of railnet
# against NCCL's built-in IB transport (NCCL_NET=IB, no plugin), against
# NCCL's IB transport run again (the A/A run: how far a point moves by
# itself), and against NVIDIA's external IB plugin (nccl-rdma-sharp-plugins,
# "peer"), all on the same softnic, measured side by side in the same
# rounds: all_reduce, all_to_all and send_recv (RAILNET_BENCH_COLLS),
# 64 KiB..256 MiB (RAILNET_BENCH_MIN_BYTES, RAILNET_BENCH_MAX_BYTES), two
# ranks. Each table (NCCL x port rate) prints per collective and size the
# medians, railnet / IB and the A/A and peer columns, then a verdict per
# collective (the rule below).
#
# The verdict. For one collective of one table, the A/A band is the range,
# over its sizes, of IB-again / IB (ratios of medians, the statistic
# railnet / IB is). railnet passes against IB when no size's railnet / IB
# falls below the band's low edge and the median of railnet / IB over the
# sizes is >= 1.0; against the peer by the same rule with railnet / peer.
# Without the A/A run (RAILNET_BENCH_AA=0) the verdict is "undecided".
#
# What is held equal:
# - The PCI view: every job runs under softnic-sysfs-ns (RAILNET_BENCH_PCI_VIEW,
#   auto = where it can make the view, on = or fail, off), where each
#   softnic device is a PCI NIC near the GPU. NCCL 2.29 and 2.30's IB
#   transport and the peer plugin find no device without it; with it,
#   NCCL's IB transport fuses softnic0's two ports into one NIC as railnet
#   merges them (without it, NCCL uses one of the two).
# - The port rate: each softnic port is limited to RAILNET_BENCH_RATE
#   bytes/s (a list; default "3125M 0": 3125M = 25 Gb/s, which softnic then
#   advertises as 1x EDR; "0" = no limit, advertised within softnic's copy
#   calibration, docs/softnic.md). NCCL picks channels and protocol from
#   the advertised speed.
# - The GDR level (RAILNET_BENCH_GDR_LEVEL, default LOC = host staging,
#   which does not depend on how each transport detects GPU Direct support
#   on a software NIC).
# - The GPU: with fewer GPUs than ranks (both ranks on one GPU) the ranks'
#   kernels share the GPU by time slices unless an MPS daemon runs (a
#   ~4.7 ms floor per all_reduce up to 8 MiB): the script starts a private
#   MPS daemon when nvidia-cuda-mps-control exists and GDR is off, and says
#   so when it does not.
# RAILNET_BENCH_NCCL lists the NCCLs every run loads, one table each
# (default "system torch"): "system" (the libnccl.so.2 the loader finds;
# 2.28.3 on the GPU machines), "torch" (PyTorch's, 2.28.9, nccl_torch_lib
# of tests/gpu/lib-nccl.sh) or a directory holding a libnccl.so.2 (a build
# of scripts/build-nccl: DIR/lib). The version that ran is printed per table.
#
# One run of 50 calls per size scattered 0.6-1.9 between runs below 1 MiB,
# so each (NCCL, rate) runs RAILNET_BENCH_ROUNDS rounds (default 3), the
# transports taking turns (IB, railnet, A/A, peer, then the variants, in
# the order bench/lib-rounds.sh gives each round: every transport takes
# every place in the round as often as the others), and each size runs
# RAILNET_BENCH_TARGET_BYTES / size calls (default 1G: 1000 calls up to
# 1 MiB, 1 GiB moved per size above, at least RAILNET_BENCH_ITERS = 20).
# The table prints the median bus bandwidth of IB and railnet, their ratio,
# the lowest and highest ratio of one round's pair, and median / IB's
# median for the A/A run, the peer and each variant. RAILNET_BENCH_PEER is
# the peer plugin (default the staged nccl-rdma-sharp-plugins/libnccl-net.so;
# "none" leaves it out). RAILNET_BENCH_VARIANTS adds railnet runs with other
# settings to the same rounds, one column each: a blank-separated list, each
# a '+'-separated list of VAR=value (values may hold commas), e.g.
# "RAILNET_MERGE_PORTS=0 RAILNET_QPS_PER_CONN=1+RAILNET_SPLIT_MIN=1G"; a
# variant that starts with "ib:" runs NCCL's IB transport instead, and "ib:"
# alone runs it a third time as it ran in the IB column. Each variant gets
# a "variant C vN/IB: ..." line by the verdict's rule (its median / IB's):
# for "ib:" alone, the rule applied to NCCL's IB transport against itself.
# RAILNET_BENCH_LAYOUT=two runs every table on softnic as two one-port
# devices (NCCL's IB transport and the peer then with
# NCCL_NET_MERGE_LEVEL=LOC); the default, one, is softnic's one device with
# two ports.
# The proto column is NCCL's all_reduce protocol and channel count (TUNING
# log, round 1): IB's/railnet's, S = Simple, e.g. LL2/LL2. railnet also
# reads the device's PCIe link, which caps railnet's merged device, from the
# PCI view (without it, from softnic's SOFTNIC_SYSFS view, default a
# directory of the run).
# The "# channels" lines above each table give NCCL's channel plan per
# transport (its INIT line, round 1): coll and p2p channels, and p2p
# channels per peer, which all_to_all and send_recv run on.
: "${top_builddir:=$(pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
. "$top_srcdir/bench/lib-vars.sh"
bench_vars_check || exit 1
export top_builddir top_srcdir
# TUNING: the log names the algorithm and protocol NCCL picked per size
# GRAPH: the channels, NICs and speeds NCCL's topology search settled on
export NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,NET,ENV,TUNING,GRAPH}
. "$top_srcdir/tests/gpu/lib-nccl.sh"
. "$top_srcdir/bench/lib-rounds.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "skipped: no CUDA GPU"; exit 0; fi
# the PCI view: the whole run (MPS daemon, ranks) in one softnic-sysfs-ns
view=${RAILNET_BENCH_PCI_VIEW:-auto}
ns=$top_builddir/tests/softnic/softnic-sysfs-ns
case $view in auto|on|off) ;; *) echo "RAILNET_BENCH_PCI_VIEW=$view: auto, on or off" >&2; exit 2 ;; esac
if [ "$view" != off ] && [ -z "${RAILNET_BENCH_IN_VIEW:-}" ]; then
    if [ -x "$ns" ] && why=$("$ns" -- true 2>&1); then
        RAILNET_BENCH_IN_VIEW="softnic-sysfs-ns" exec "$ns" -- sh "$0" "$@"
    fi
    [ "$view" = on ] && { echo "RAILNET_BENCH_PCI_VIEW=on: softnic-sysfs-ns cannot make its view: ${why:-$ns not built}" >&2; exit 2; }
    echo "# no PCI view (${why:-$ns not built}): NCCL 2.29/2.30's IB transport and the peer find no softnic device"
fi
peer=${RAILNET_BENCH_PEER:-$top_builddir/nccl-rdma-sharp-plugins/libnccl-net.so}
[ "$peer" = none ] || [ -f "$peer" ] || { echo "# no peer plugin ($peer): scripts/build-nccl-rdma-sharp-plugins, then scripts/gpu-stage"; peer=none; }
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
colls=${RAILNET_BENCH_COLLS:-all_reduce,all_to_all,send_recv}
rounds=${RAILNET_BENCH_ROUNDS:-3}
args="--mode bench --min-bytes ${RAILNET_BENCH_MIN_BYTES:-$((64 << 10))} --max-bytes ${RAILNET_BENCH_MAX_BYTES:-$((256 << 20))} --colls $colls --iters ${RAILNET_BENCH_ITERS:-20} --target-bytes ${RAILNET_BENCH_TARGET_BYTES:-$((1 << 30))} --timeout 600"
ld0=$LD_LIBRARY_PATH
case ${RAILNET_BENCH_LAYOUT:-one} in
    one) layout="one device, 2 ports" ;;
    two) export SOFTNIC_DEVICES="softnic0:127.0.0.1;softnic1:127.0.0.2"
         layout="two one-port devices" ;;
    *) echo "RAILNET_BENCH_LAYOUT=$RAILNET_BENCH_LAYOUT: one or two" >&2; exit 2 ;;
esac

# softnic's sysfs view, as a NIC has one (both transports): node, ports,
# GIDs and the device's PCIe link, which caps railnet's merged device at
# what the host moves through the NIC (plugin/ib/hostlink.h); NCCL places
# a NIC whose path is no PCI device under the CPU, as without the view. A
# variant "SOFTNIC_SYSFS=" runs without it (railnet: its ports' sum).
# In the PCI view, /sys is that view for every transport: railnet then
# finds its device where NCCL's IB transport does (with SOFTNIC_SYSFS, its
# device sat at no PCI function, NCCL placed it elsewhere and planned
# 2 channels for all_reduce where it planned 4 for IB).
if [ -n "${RAILNET_BENCH_IN_VIEW:-}" ]; then
    unset SOFTNIC_SYSFS
else
    export SOFTNIC_SYSFS="${SOFTNIC_SYSFS-$JOBDIR/sysfs}"
fi

# run_one TRANSPORT TAG ROUND: one job; TRANSPORT is ib, railnet, aa (ib
# again), peer or vN (the Nth of RAILNET_BENCH_VARIANTS: railnet, or with
# "ib:" NCCL's IB transport, with those settings)
run_one() {
    t=$1 tag=$2 k=$3 log=bench_$1_$2_r$3
    case $t in
        ib|aa) v=ib: ;;
        peer) v=peer: ;;
        railnet) v= ;;
        v*) v=$(echo $RAILNET_BENCH_VARIANTS | tr ' ' '\n' | sed -n "${t#v}p") ;;
    esac
    ( case $v in
          # NCCL's IB transport picks its GID from sysfs, which softnic cannot
          # provide in /sys: name softnic's RoCE v2 IPv4 GID index explicitly.
          ib:*) export NCCL_NET=IB NCCL_NET_PLUGIN=none NCCL_NET_GDR_LEVEL=$gdr \
                      NCCL_IB_GID_INDEX=${RAILNET_BENCH_GID_INDEX:-0}; v=${v#ib:}
                # fusing NICs without a PCI path breaks NCCL's topology
                [ "${RAILNET_BENCH_LAYOUT:-one}" = two ] && export NCCL_NET_MERGE_LEVEL=LOC ;;
          peer:*) unset NCCL_NET
                  export NCCL_NET_PLUGIN="$peer" NCCL_NET_GDR_LEVEL=$gdr NCCL_IB_GID_INDEX=${RAILNET_BENCH_GID_INDEX:-0}
                  [ "${RAILNET_BENCH_LAYOUT:-one}" = two ] && export NCCL_NET_MERGE_LEVEL=LOC
                  v=${v#peer:} ;;
          *) export NCCL_NET_PLUGIN="$RAILNET_PLUGIN" NCCL_NET_GDR_LEVEL=$gdr ;;
      esac
      # a variant's settings last: it may name another NCCL_NET_PLUGIN
      # (e.g. an earlier build's, for a before/after comparison)
      for a in $(echo "$v" | tr '+' ' '); do
          export "${a?}"
      done
      nccl_job "$log" 2 $prog $args ) ||
        { echo "$t run failed (round $k):"; tail -n 20 "$JOBDIR/$log.rank0.log"; }
}

# bench_one NCCL RATE: every transport with that NCCL at that port rate, and their table
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
    nv=$(echo $RAILNET_BENCH_VARIANTS | wc -w)
    ts="ib railnet"; i=1
    [ "${RAILNET_BENCH_AA:-1}" = 0 ] || ts="$ts aa"
    [ "$peer" = none ] || ts="$ts peer"
    while [ $i -le "$nv" ]; do ts="$ts v$i"; i=$((i + 1)); done
    k=1
    while [ $k -le "$rounds" ]; do
        # shellcheck disable=SC2086
        for t in $(round_order "$k" $ts); do run_one "$t" "$tag" "$k"; done
        k=$((k + 1))
    done
    ib=$JOBDIR/bench_ib_${tag}_r1.rank0.log
    rn=$JOBDIR/bench_railnet_${tag}_r1.rank0.log
    ver=$(sed -n 's/.*NCCL version \([0-9.]*\).*/\1/p' "$ib" | head -n 1)
    echo
    echo "bus bandwidth ($colls), 2 ranks, softnic, NCCL ${ver:-?} ($sel), NCCL_NET_GDR_LEVEL=$gdr, SOFTNIC_RATE=${SOFTNIC_RATE:-unlimited} per port, softnic as $layout, $(gpu_count) GPU(s), MPS $mps, $rounds rounds, medians"
    grep -hE "Using network|NET/IB : Using|NET/railnet: device 0:" "$ib" "$rn" | sed 's/^[^]]*] NCCL INFO /# /'
    echo "# softnic's sysfs view: ${SOFTNIC_SYSFS:-none}"
    # NCCL's channel plan per transport (round 1, rank 0): p2p channels
    # (all_to_all, send_recv) follow the device speeds NCCL was given
    for t in ib railnet peer; do
        f=$JOBDIR/bench_${t}_${tag}_r1.rank0.log
        [ -e "$f" ] || continue
        plan=$(sed -n 's/.* \([0-9]* coll channels, .* p2p channels per peer\).*/\1/p' "$f" | head -n 1)
        echo "# channels, $t: ${plan:-not in the log}"
    done
    i=1
    for v in $RAILNET_BENCH_VARIANTS; do
        case $v in
            ib:) w="NCCL's IB transport again (its third run: the A/A rule judging it against itself)" ;;
            ib:*) w="NCCL's IB transport with ${v#ib:}" ;;
            *) w="railnet with $v" ;;
        esac
        echo "# v$i: $w" | tr '+' ' '
        i=$((i + 1))
    done
    echo "# PCI view: ${RAILNET_BENCH_IN_VIEW:-none}; peer: $([ "$peer" = none ] && echo none || echo "$peer")"
    printf "%-11s %10s %9s %9s %7s %11s %6s %6s %6s %6s" collective bytes IB_GBps rn_GBps ratio min..max proto call aa peer
    i=1
    while [ $i -le "$nv" ]; do printf " %7s" v$i; i=$((i + 1)); done
    echo
    # rank 0's lines: bytes iters time_us busbw collective median_us max_us;
    # one file per (transport, round), named bench_<t>_<tag>_r<k>.rank0.log.
    # "call" is the same ratio from each run's median call instead of its
    # mean: on a busy host single calls stall for milliseconds (max_us), and
    # the mean of a few hundred calls carries them (docs/performance.md)
    for t in $ts; do
        k=1
        while [ $k -le "$rounds" ]; do
            f=$JOBDIR/bench_${t}_${tag}_r$k.rank0.log
            [ -e "$f" ] && awk -v t="$t" -v k="$k" '/^  +[0-9]+ +[0-9]+ /{ print t, k, ($5 == "" ? "all_reduce" : $5), $1, $4, ($6 > 0 ? $4 * $3 / $6 : $4) }
                /AllReduce: [0-9]+ Bytes -> / && k == 1 { for (i = 1; i <= NF; i++) if ($i == "AllReduce:") b = $(i+1); else if ($i == "proto") p = $(i+1); else if ($i ~ /^channel[{]Lo..Hi[}]=[{][0-9]+..[0-9]+[}]$/) { c = $i; sub(/.*=[{]/, "", c); sub(/[}]/, "", c); split(c, lh, /[.][.]/); n = lh[2] - lh[1] + 1 }; print t, "proto", "all_reduce", b, (p == "SIMPLE" ? "S" : p) (n ? n : "") }' "$f"
            k=$((k + 1))
        done
    done | bench_table "$nv" | sort -k1,1 -k2,2n | bench_verdict
}

# bench_table NV: the (transport round collective bytes busbw callbw) lines
# to one row per (collective, size); a column whose transport did not run
# reads "-"
bench_table() {
    awk -v nv="$1" '
        function median(key, n) { return median_of(V, key, n) }
        function median_of(A, key, n,   i, j, x, a) {
            for (i = 1; i <= n; i++) a[i] = A[key, i]
            for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j+1] = a[j]; a[j+1] = x }
            return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
        }
        function col(t, key, mi) { return (N[t, key] && mi > 0) ? sprintf(" %6.2f", median(t SUBSEP key, N[t, key]) / mi) : sprintf(" %6s", "-") }
        $2 == "proto" { P[$1, $3 " " $4] = $5; next }
        { key = $3 " " $4; K[key] = 1; N[$1, key]++; V[$1, key, N[$1, key]] = $5; W[$1, key, N[$1, key]] = $6; R[$1, key, $2] = $5 }
        END {
            for (key in K) {
                if (!N["ib", key] || !N["railnet", key]) continue
                mi = median("ib" SUBSEP key, N["ib", key]); mr = median("railnet" SUBSEP key, N["railnet", key])
                lo = 1e9; hi = 0
                for (k = 1; k <= N["railnet", key]; k++) if (R["ib", key, k] > 0 && (("railnet", key, k) in R)) {
                    q = R["railnet", key, k] / R["ib", key, k]; if (q < lo) lo = q; if (q > hi) hi = q }
                split(key, p, " ")
                pr = (("ib", key) in P) ? P["ib", key] "/" P["railnet", key] : "-"
                ci = median_of(W, "ib" SUBSEP key, N["ib", key]); cr = median_of(W, "railnet" SUBSEP key, N["railnet", key])
                printf "%-11s %10d %9.3f %9.3f %7.2f %5.2f..%-5.2f %6s %6.2f", p[1], p[2], mi, mr, (mi > 0 ? mr / mi : 0), lo, hi, pr, (ci > 0 ? cr / ci : 0)
                printf "%s%s", col("aa", key, mi), col("peer", key, mi)
                for (v = 1; v <= nv; v++) printf "%s", col("v" v, key, mi)
                printf "\n"
            }
        }'
}

# bench_verdict: the sorted rows, then per collective the A/A band and the
# verdicts of railnet against IB and against the peer (header comment)
bench_verdict() {
    rows=$(cat)
    printf '%s\n' "$rows"
    for c in $(printf '%s\n' "$rows" | awk '$1 !~ /^#/ && NF >= 10 && !seen[$1]++ { print $1 }'); do
        # against IB: railnet / IB, the A/A column
        echo "verdict $c railnet/IB: $(printf '%s\n' "$rows" | awk -v c="$c" '$1 == c && NF >= 10 { print $2, $5, $9 }' |
            awk -f "$top_srcdir/bench/aa-verdict.awk")"
        # against the peer, at the sizes it ran: railnet / peer, the same band
        printf '%s\n' "$rows" | awk -v c="$c" '$1 == c && NF >= 10 { print $2, ($10 != "-" && $10 > 0 ? $5 / $10 : "-"), $9 }' >"$JOBDIR/verdict_peer"
        awk '$2 != "-" { n++ } END { exit !n }' "$JOBDIR/verdict_peer" &&
            echo "verdict $c railnet/peer: $(awk -f "$top_srcdir/bench/aa-verdict.awk" "$JOBDIR/verdict_peer")"
        # each variant against IB by the same rule, on lines of their own
        # (not railnet's verdict): with "ib:" alone, NCCL's IB transport
        # judged against itself, how often the rule fails two equal runs
        i=1
        while [ $i -le "$nv" ]; do
            echo "variant $c v$i/IB: $(printf '%s\n' "$rows" | awk -v c="$c" -v col=$((10 + i)) '$1 == c && NF >= col { print $2, $col, $9 }' |
                awk -f "$top_srcdir/bench/aa-verdict.awk")"
            i=$((i + 1))
        done
    done
}

for sel in ${RAILNET_BENCH_NCCL:-system torch}; do
    for rate in ${RAILNET_BENCH_RATE:-3125M 0}; do
        bench_one "$sel" "$rate"
    done
done
