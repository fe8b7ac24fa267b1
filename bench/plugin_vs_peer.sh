#!/bin/sh
# bench/plugin_vs_peer.sh: railnet against its nearest peer, NVIDIA's
# external IB plugin (nccl-rdma-sharp-plugins, built by
# scripts/build-nccl-rdma-sharp-plugins into $top_builddir), both driven
# through their ncclNetPlugin_v8 by the same driver (netdriver, as NCCL's
# proxy drives a net table) on the same softnic port, side by side in one
# run. The peer finds NICs by their PCI function, so the whole run is in
# softnic-sysfs-ns's view (root; it skips without).
#  1. One-way bandwidth: netdriver bw, one QP on port 1 for both
#     (RAILNET_QPS_PER_CONN=1 RAILNET_MERGE_PORTS=0 RAILNET_HCA==softnic0:1;
#     NCCL_IB_QPS_PER_CONNECTION=1 NCCL_IB_HCA==softnic0:1), each depth of
#     RAILNET_BENCH_DEPTHS (default "8 16") and size of RAILNET_BENCH_SIZES
#     (default 64 KiB .. 16 MiB), at least RAILNET_BENCH_BYTES (1 GiB) and
#     200 messages a run.
#  2. 8-byte latency: netdriver lat (isend/irecv ping-pong, median of 2000
#     round trips).
# Each round runs the peer, railnet, then the peer again (the A/A run: how
# far a figure moves by itself), taking turns at the round's places
# (lib-rounds.sh), RAILNET_BENCH_ROUNDS rounds (default 5),
# medians with the min-max of single runs. The verdict per depth: the A/A
# band is the range over the sizes of peer-again / peer; railnet passes
# when no size's railnet / peer falls below the band's low edge and their
# median is >= 1.0 (latency: peer / railnet, by the same rule).
# railnet runs a second time in each round with SOFTNIC_PUSH_SHARED=0, its
# own column and verdict: railnet's clear-to-send ring is shared memory that
# softnic writes with a store, the peer's FIFO heap memory it writes with a
# system call; without the store both pay the call (the like-for-like
# figure; a ConnectX places both without a CPU).
# RAILNET_BENCH_AAA=1 (the default) runs the peer a third time in each
# bandwidth round and judges it against its first run by the same rule
# ("A/A/A"): how often the rule fails two runs of one program, the figure
# that says whether a railnet verdict at parity is decided by the machine or
# by chance (0: not).
# RAILNET_BENCH_NIC_APART=1 (the default, with 2 CPUs or more and taskset)
# runs the bandwidth rows with softnic's NIC threads on one half of the
# CPUs (SOFTNIC_NIC_CPUS) and both ranks on the other: unbound, which of the
# four busy threads the scheduler puts beside the receiving engine decides
# a run on 2 CPUs, and both plugins' single rounds spread by up to 1.4x; 0 runs
# them unbound. The latency runs stay unbound (two ranks of a ping-pong on
# one CPU wait for each other's turns).
# RAILNET_BENCH_MD=FILE writes the tables as markdown into FILE between
# "<!-- plugin_vs_peer:begin -->" and "<!-- plugin_vs_peer:end -->".
: "${top_builddir:=$(pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
. "$top_srcdir/bench/lib-vars.sh"
bench_vars_check || exit 1
plugin=$top_builddir/.libs/libnccl-net-railnet.so
peer=${RAILNET_BENCH_PEER:-$top_builddir/nccl-rdma-sharp-plugins/libnccl-net.so}
nd=$top_builddir/tests/netdriver/netdriver
ns=$top_builddir/tests/softnic/softnic-sysfs-ns
[ -x "$nd" ] && [ -f "$plugin" ] && [ -x "$ns" ] || { echo "skipped: build the plugin and tests first"; exit 0; }
[ -f "$peer" ] || { echo "skipped: no peer plugin at $peer (scripts/build-nccl-rdma-sharp-plugins SRC)"; exit 0; }
export LD_LIBRARY_PATH=$top_builddir/tests/softnic${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ -z "${RAILNET_BENCH_IN_VIEW:-}" ]; then
    why=$("$ns" -- true 2>&1) || { echo "skipped: softnic-sysfs-ns cannot make its view here: $why"; exit 0; }
    RAILNET_BENCH_IN_VIEW=1 exec "$ns" -- sh "$0" "$@"
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
depths=${RAILNET_BENCH_DEPTHS:-8 16}
sizes=${RAILNET_BENCH_SIZES:-65536 262144 1048576 4194304 16777216}
rounds=${RAILNET_BENCH_ROUNDS:-5}
budget=${RAILNET_BENCH_BYTES:-1073741824}
for d in $depths; do
    case $d in ''|*[!0-9]*) d=0 ;; esac
    [ "$d" -ge 1 ] && [ "$d" -le 32 ] || { echo "RAILNET_BENCH_DEPTHS: 1..32 each"; exit 1; }
done
case $rounds in ''|*[!0-9]*|0) echo "RAILNET_BENCH_ROUNDS: a positive count"; exit 1 ;; esac
. "$top_srcdir/bench/lib-cpus.sh"
. "$top_srcdir/bench/lib-rounds.sh"
halves=
[ "${RAILNET_BENCH_NIC_APART:-1}" != 0 ] && halves=$(cpu_halves)

stats() { # "median min max" of the numbers given ("- - -" without any)
    printf '%s\n' "$@" | awk 'NF && $1 != "-" { print $1 }' | sort -g | awk '
        { v[NR] = $1 }
        END { if (!NR) { print "- - -"; exit }
              m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
              printf "%.3f %.3f %.3f\n", m, v[1], v[NR] }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b != "-") printf "%.2f", b / a; else print "-" }'; }
# run WHO CMD ARGS...: netdriver through railnet or the peer on port 1
run() {
    who=$1; shift
    case $who in
        railnet) RAILNET_QPS_PER_CONN=1 RAILNET_MERGE_PORTS=0 RAILNET_HCA==softnic0:1 \
                     timeout 300 "$nd" --plugin "$plugin" "$@" ;;
        *) NCCL_IB_QPS_PER_CONNECTION=1 NCCL_IB_HCA==softnic0:1 NCCL_IB_GID_INDEX=0 \
               timeout 300 "$nd" --plugin "$peer" --table-name any "$@" ;;
    esac 2>/dev/null
}
# bandwidth: NIC threads on the second half, both ranks on the first
# (RAILNET_BENCH_NIC_APART), or unbound
bw() {
    if [ -n "$halves" ]; then
        v=$(SOFTNIC_NIC_CPUS="${halves#* }" run "$1" --rank-wrap "taskset -c ${halves% *}" \
                --rank-wrap "taskset -c ${halves% *}" bw --size "$2" --iters "$3" --window "$4" | awk '$1 == '"$2"' { print $4 }')
    else
        v=$(run "$1" bw --size "$2" --iters "$3" --window "$4" | awk '$1 == '"$2"' { print $4 }')
    fi
    echo "${v:--}"
}
lat() { v=$(run "$1" lat --size 8 --iters 2000 | sed -n 's/.*, \([0-9.]*\) us one-way (median).*/\1/p'); echo "${v:--}"; }
# one_round ROUND FN ARGS...: one round of FN (bw or lat) for the peer,
# railnet, the peer again and railnet with SOFTNIC_PUSH_SHARED=0, each
# appended to ps, rs, as and ns, in round_order
aaa=${RAILNET_BENCH_AAA:-1}
one_round() {
    _round=$1 _fn=$2
    shift 2
    _jobs="p r a n"
    [ "$aaa" != 0 ] && [ "$_fn" = bw ] && _jobs="$_jobs t"
    # shellcheck disable=SC2086
    for job in $(round_order "$_round" $_jobs); do
        case $job in
            p) ps="$ps $($_fn peer "$@")" ;;
            r) rs="$rs $($_fn railnet "$@")" ;;
            a) as="$as $($_fn peer "$@")" ;;
            n) ns="$ns $(SOFTNIC_PUSH_SHARED=0 $_fn railnet "$@")" ;;
            t) ts="$ts $($_fn peer "$@")" ;;
        esac
    done
}
# verdict: lines "SIZE RATIO AA" -> "pass|fail (band, median, below)";
# a run that failed ("-") counts as a point below the band
verdict() {
    awk '{ if ($2 == "-") $2 = 0; print }' | awk -f "$top_srcdir/bench/aa-verdict.awk"
}

echo "# peer: $peer; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -n "$halves" ] && echo "# bandwidth with the NIC apart: SOFTNIC_NIC_CPUS=${halves#* }, both ranks on CPUs ${halves% *}"
: >"$tmp/md"
for depth in $depths; do
    echo "== one-way bandwidth, 1 QP on port 1, $depth in flight: GB/s, median [min-max] of $rounds rounds"
    printf '%10s %22s %22s %22s %8s %5s %22s %8s' bytes peer railnet peer_again rn/peer A/A railnet_noshare ns/peer
    [ "$aaa" != 0 ] && printf ' %22s %8s' peer_third 3rd/peer
    echo
    : >"$tmp/v"; : >"$tmp/vs"; : >"$tmp/vt"
    { printf '| depth %s | peer GB/s | railnet GB/s | railnet / peer | A/A | railnet, `SOFTNIC_PUSH_SHARED=0`, GB/s | that / peer |' "$depth"
      [ "$aaa" != 0 ] && printf ' peer, third run / first |'
      printf '\n|---|---:|---:|---:|---:|---:|---:|'
      [ "$aaa" != 0 ] && printf -- '---:|'
      echo; } >>"$tmp/md"
    for size in $sizes; do
        n=$((budget / size)); [ $n -lt 200 ] && n=200
        ps= rs= as= ns= ts=
        for round in $(seq "$rounds"); do
            one_round "$round" bw "$size" $n "$depth"
        done
        set -- $(stats $ps); p=$1 pr="$2-$3"
        set -- $(stats $rs); r=$1 rr="$2-$3"
        set -- $(stats $as); a=$1 ar="$2-$3"
        set -- $(stats $ns); o=$1 or="$2-$3"
        q=$(ratio "$p" "$r") aa=$(ratio "$p" "$a") qo=$(ratio "$p" "$o")
        printf '%10d %22s %22s %22s %8s %5s %22s %8s' "$size" "$p [$pr]" "$r [$rr]" "$a [$ar]" "$q" "$aa" "$o [$or]" "$qo"
        qt=
        if [ "$aaa" != 0 ]; then
            set -- $(stats $ts)
            qt=$(ratio "$p" "$1")
            printf ' %22s %8s' "$1 [$2-$3]" "$qt"
            echo "$size $qt $aa" >>"$tmp/vt"
        fi
        echo
        echo "$size $q $aa" >>"$tmp/v"
        echo "$size $qo $aa" >>"$tmp/vs"
        echo "| $((size / 1024)) KiB | $p ($pr) | $r ($rr) | $q | $aa | $o ($or) | $qo |${qt:+ $qt |}" >>"$tmp/md"
    done
    v=$(verdict <"$tmp/v") vs=$(verdict <"$tmp/vs")
    echo "verdict depth $depth railnet/peer: $v"
    echo "verdict depth $depth railnet/peer, SOFTNIC_PUSH_SHARED=0: $vs"
    printf '\nDepth %s: %s\n\nDepth %s, `SOFTNIC_PUSH_SHARED=0`: %s\n\n' "$depth" "$v" "$depth" "$vs" >>"$tmp/md"
    if [ "$aaa" != 0 ]; then
        vt=$(verdict <"$tmp/vt")
        echo "A/A/A depth $depth, the peer's third run judged against its first by the same rule: $vt"
        printf 'Depth %s, the peer'"'"'s third run against its first by the same rule (A/A/A): %s\n\n' "$depth" "$vt" >>"$tmp/md"
    fi
done
ps= rs= as= ns=
for round in $(seq "$rounds"); do
    one_round "$round" lat
done
set -- $(stats $ps); p=$1 pr="$2-$3"
set -- $(stats $rs); r=$1 rr="$2-$3"
set -- $(stats $as); a=$1 ar="$2-$3"
set -- $(stats $ns); o=$1 or="$2-$3"
q=$(ratio "$r" "$p") aa=$(ratio "$a" "$p") qo=$(ratio "$o" "$p")
echo "== 8 B one-way latency, us: peer $p [$pr], railnet $r [$rr], peer again $a [$ar]; peer/railnet $q, A/A $aa; railnet with SOFTNIC_PUSH_SHARED=0 $o [$or], peer/that $qo"
lv=$(echo "8 $q $aa" | verdict) lvo=$(echo "8 $qo $aa" | verdict)
echo "verdict latency peer/railnet: $lv"
echo "verdict latency peer/railnet, SOFTNIC_PUSH_SHARED=0: $lvo"
{ echo "| 8 B one-way latency | peer us | railnet us | peer / railnet | A/A | railnet, \`SOFTNIC_PUSH_SHARED=0\`, us | peer / that |"; echo "|---|---:|---:|---:|---:|---:|---:|"
  echo "| median (min-max) | $p ($pr) | $r ($rr) | $q | $aa | $o ($or) | $qo |"; printf '\nLatency: %s\n\nLatency, `SOFTNIC_PUSH_SHARED=0`: %s\n' "$lv" "$lvo"; } >>"$tmp/md"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "${RAILNET_BENCH_MD:-}" ]; then
    {
        echo "$(date -u +%Y-%m-%d), $(uname -m), $(nproc) CPUs, load average after $(cut -d' ' -f1-3 /proc/loadavg)."
        echo "Medians of $rounds rounds (peer, railnet, peer again$([ "$aaa" != 0 ] && echo ", the peer a third time in the bandwidth rounds"), taking turns at each round's places), min-max of single runs in parentheses."
        [ -n "$halves" ] && echo "Bandwidth with the NIC apart: \`SOFTNIC_NIC_CPUS=${halves#* }\`, both ranks \`taskset -c ${halves% *}\`; latency unbound."
        echo
        echo '```sh'
        echo "cd build && RAILNET_BENCH_ROUNDS=$rounds sh ../bench/plugin_vs_peer.sh"
        echo '```'
        echo
        cat "$tmp/md"
    } >"$tmp/section"
    . "$top_srcdir/bench/lib-md.sh"
    md_section "$RAILNET_BENCH_MD" plugin_vs_peer "$tmp/section"
fi
