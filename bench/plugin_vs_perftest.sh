#!/bin/sh
# bench/plugin_vs_perftest.sh: the plugin against perftest on the same
# softnic, measured side by side in one run:
#  1. one-way bandwidth at 1..16 MiB: netdriver bw through the plugin with
#     one QP on one port (RAILNET_QPS_PER_CONN=1, RAILNET_MERGE_PORTS=0)
#     against ib_write_bw -q 1 on the same port; goal ratio >= 0.97.
#     Both keep the same number of messages in flight, RAILNET_BENCH_WINDOW
#     (1..32, default 16): netdriver --window and ib_write_bw's -t (its send
#     queue depth), with a completion for every message on both sides (-Q 1).
#     perftest's default depth is 128: 128 MiB of 1 MiB writes queued, which
#     NCCL's net API (32 requests per comm at most) cannot ask of a plugin;
#     ib_write_bw at that depth runs in the same rounds as a third column
#     (and the plugin's ratio to it), to show what depth alone is worth.
#     Each side times its sender from the first post to the last completion
#     and counts size x iterations.
#  2. 8-byte latency: netdriver lat (isend/irecv ping-pong, medians) against
#     ib_write_lat's typical; goal ratio <= 1.5;
# On a 2-core host the NIC's threads share the CPUs with the polling
# programs (and with whatever else runs there), so single runs swing by
# +-40%: the bandwidths are medians of RAILNET_BENCH_ROUNDS (default 5)
# alternating runs, the latencies medians of RAILNET_BENCH_LAT_ROUNDS
# (default 3) alternating runs each;
# every run is printed, with the load average before and after.
#  3. with SOFTNIC_RATE per port: the merged dual-port device against the
#     plugin on port 1 alone; goal ratio >= 1.9.
# RAILNET_BENCH_SIZES picks the bandwidth rows (bytes; default 1..16 MiB;
# NCCL mostly sends 64 KiB-1 MiB steps: "65536 262144 524288 1048576").
# RAILNET_BENCH_BASELINE=DIR (another build's top_builddir, e.g. main's)
# runs that build's plugin too, with this build's netdriver and softnic, in
# the same alternating rounds: a "before" column and this plugin's ratio to
# it (after/before), so a change is judged under the same host load.
: "${top_builddir:=$(pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
plugin=$top_builddir/.libs/libnccl-net-railnet.so
nd=$top_builddir/tests/netdriver/netdriver
command -v ib_write_bw >/dev/null || { echo "skipped: perftest not installed"; exit 0; }
[ -x "$nd" ] && [ -f "$plugin" ] || { echo "skipped: build the plugin and tests first"; exit 0; }
base=
if [ -n "${RAILNET_BENCH_BASELINE:-}" ]; then
    base=$RAILNET_BENCH_BASELINE/.libs/libnccl-net-railnet.so
    [ -f "$base" ] || { echo "RAILNET_BENCH_BASELINE: no $base"; exit 1; }
fi
export LD_LIBRARY_PATH=$top_builddir/tests/softnic${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
port=${RAILNET_BENCH_PERFTEST_PORT:-17531}

perftest() { # tool args...: runs server and client, prints the client's output
    t=$1; shift
    timeout 120 "$t" -d softnic0 -x 0 -p $port "$@" >"$tmp/srv" 2>&1 &
    sleep 1
    timeout 120 "$t" -d softnic0 -x 0 -p $port "$@" 127.0.0.1 2>&1
    wait
    port=$((port + 1))
}

# median of the arguments (an odd count)
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

window=${RAILNET_BENCH_WINDOW:-16}
case $window in ''|*[!0-9]*) window=0 ;; esac
[ "$window" -ge 1 ] && [ "$window" -le 32 ] || { echo "RAILNET_BENCH_WINDOW: 1..32 (NCCL's most requests per comm)"; exit 1; }
rounds=${RAILNET_BENCH_ROUNDS:-5}
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
echo "== one-way bandwidth, 1 QP on port 1, $window messages in flight on both sides (GB/s, median of $rounds alternating runs; perftest MB/s are 2^20 bytes)"
printf '%10s %14s %14s %8s %16s %10s' bytes ib_write_bw plugin ratio "ib_write_bw -t128" ratio128
[ -n "$base" ] && printf ' %10s %12s %13s' baseline base_ratio after/before
echo
# netdriver bw through plugin .so $1 at size $2, $3 messages: prints GB/s and
# "most in flight" into $tmp/pl
plugin_bw() {
    RAILNET_QPS_PER_CONN=1 RAILNET_MERGE_PORTS=0 RAILNET_HCA==softnic0:1 \
        "$nd" --plugin "$1" bw --size $2 --iters $3 --window $window >"$tmp/pl" 2>/dev/null
    awk '$1 == '$2' { print $4 }' "$tmp/pl"
}
for size in ${RAILNET_BENCH_SIZES:-1048576 2097152 4194304 8388608 16777216}; do
    # at least 1 GiB a run: a 0.1 s run is mostly scheduler noise on 2 cores
    n=$(( (1 << 30) / size )); [ $n -lt 200 ] && n=200
    ibs= pls= depths= dfs= bls=
    for round in $(seq "$rounds"); do
        dfs="$dfs $(perftest ib_write_bw -i 1 -q 1 -t 128 -Q 1 -s $size -n $n | awk '$1 == '$size' { printf "%.3f", $4 * 1048576 / 1e9 }')"
        [ -n "$base" ] && bls="$bls $(plugin_bw "$base" $size $n)"
        perftest ib_write_bw -i 1 -q 1 -t $window -Q 1 -s $size -n $n >"$tmp/ib"
        ibs="$ibs $(awk '$1 == '$size' { printf "%.3f", $4 * 1048576 / 1e9 }' "$tmp/ib")"
        pls="$pls $(plugin_bw "$plugin" $size $n)"
        # the depth each side really ran with: perftest's banner, the
        # plugin's most sends in flight at once (netdriver bw counts them)
        depths="$depths $(sed -n 's/^ *TX depth *: *\([0-9]*\).*/\1/p' "$tmp/ib" | head -n 1)/$(sed -n 's/^# [0-9]* bytes: at most \([0-9]*\) sends in flight.*/\1/p' "$tmp/pl")"
    done
    ib=$(median $ibs); pl=$(median $pls); df=$(median $dfs)
    awk -v s=$size -v a="$ib" -v b="$pl" -v d="$df" 'BEGIN { printf "%10d %14s %14s %8.2f %16s %10.2f", s, a, b, (a > 0 ? b / a : 0), d, (d > 0 ? b / d : 0) }'
    if [ -n "$base" ]; then
        bl=$(median $bls)
        awk -v a="$ib" -v b="$pl" -v c="$bl" 'BEGIN { printf " %10s %12.2f %13.2f", c, (a > 0 ? c / a : 0), (c > 0 ? b / c : 0) }'
    fi
    echo
    echo "#   runs: ib_write_bw$ibs; plugin$pls; -t 128$dfs; in flight (ib_write_bw/plugin):$depths${base:+; baseline$bls}"
done

echo "== 8-byte latency (us, one-way, medians of 2000 round trips -- ib_write_lat's t_typical -- then the median of ${RAILNET_BENCH_LAT_ROUNDS:-3} alternating runs)"
# ib_send_lat completes each message through the receiver's CQ, as the
# plugin must (ib_write_lat polls the last byte in memory): softnic's floor
# for a completion-driven receive
plugin_lat() { "$nd" --plugin "$1" lat --size 8 --iters 2000 2>/dev/null | sed -n 's/.*, \([0-9.]*\) us one-way (median)/\1/p'; }
ibls= isls= plls= blls=
for round in $(seq "${RAILNET_BENCH_LAT_ROUNDS:-3}"); do
    ibls="$ibls $(perftest ib_write_lat -s 8 -n 2000 | awk '$1 == 8 { print $5 }')"
    [ -n "$base" ] && blls="$blls $(plugin_lat "$base")"
    isls="$isls $(perftest ib_send_lat -s 8 -n 2000 | awk '$1 == 8 { print $5 }')"
    plls="$plls $(plugin_lat "$plugin")"
done
echo "# runs: ib_write_lat$ibls; ib_send_lat$isls; plugin$plls${base:+; baseline$blls}"
ibl=$(median $ibls); isl=$(median $isls); pll=$(median $plls)
awk -v a="$ibl" -v c="$isl" -v b="$pll" 'BEGIN { printf "ib_write_lat %s us, ib_send_lat %s us, plugin %s us; plugin/ib_write_lat %.2f, plugin/ib_send_lat %.2f\n", a, c, b, (a > 0 ? b / a : 0), (c > 0 ? b / c : 0) }'
if [ -n "$base" ]; then
    bll=$(median $blls)
    awk -v a="$ibl" -v b="$pll" -v c="$bll" 'BEGIN { printf "baseline %s us; baseline/ib_write_lat %.2f, after/before %.2f\n", c, (a > 0 ? c / a : 0), (c > 0 ? b / c : 0) }'
fi

rate=${RAILNET_BENCH_RATE:-300M}
echo "== striping with SOFTNIC_RATE=$rate bytes/s per port (GB/s at 16 MiB)"
one=$(SOFTNIC_RATE=$rate RAILNET_HCA==softnic0:1 "$nd" --plugin "$plugin" bw --size 16M --iters 60 --window 16 2>/dev/null |
    awk '$1 == 16777216 { print $4 }')
two=$(SOFTNIC_RATE=$rate "$nd" --plugin "$plugin" bw --size 16M --iters 60 --window 16 2>/dev/null | awk '$1 == 16777216 { print $4 }')
awk -v a="$one" -v b="$two" 'BEGIN { printf "port 1 alone %s, merged ports 1+2 %s, merged/one %.2f\n", a, b, (a > 0 ? b / a : 0) }'
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
