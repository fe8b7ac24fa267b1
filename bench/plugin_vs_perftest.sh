#!/bin/sh
# bench/plugin_vs_perftest.sh: the plugin against perftest on the same
# softnic, measured side by side in one run (issue 4's performance goals):
#  1. one-way bandwidth at 1..16 MiB: netdriver bw through the plugin with
#     one QP on one port (RAILNET_QPS_PER_CONN=1, RAILNET_MERGE_PORTS=0)
#     against ib_write_bw -q 1 on the same port; goal ratio >= 0.95;
#  2. 8-byte latency: netdriver lat (isend/irecv ping-pong, medians) against
#     ib_write_lat's typical; goal ratio <= 1.5;
# On a 2-core host the NIC's threads share the CPUs with the polling
# programs, so single runs swing by +-40%: the bandwidths are medians of
# five runs, alternating the two programs, and the latencies medians of
# three alternating runs each.
#  3. with SOFTNIC_RATE per port: the merged dual-port device against the
#     plugin on port 1 alone; goal ratio >= 1.9.
: "${top_builddir:=$(pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
plugin=$top_builddir/.libs/libnccl-net-railnet.so
nd=$top_builddir/tests/netdriver/netdriver
command -v ib_write_bw >/dev/null || { echo "skipped: perftest not installed"; exit 0; }
[ -x "$nd" ] && [ -f "$plugin" ] || { echo "skipped: build the plugin and tests first"; exit 0; }
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

echo "== one-way bandwidth, 1 QP on port 1 (GB/s, median of 5 alternating runs; perftest MB/s are 2^20 bytes)"
printf '%10s %14s %14s %8s\n' bytes ib_write_bw plugin ratio
for size in 1048576 4194304 16777216; do
    # at least 1 GiB a run: a 0.1 s run is mostly scheduler noise on 2 cores
    n=$(( (1 << 30) / size )); [ $n -lt 200 ] && n=200
    ibs= pls=
    for round in 1 2 3 4 5; do
        ibs="$ibs $(perftest ib_write_bw -i 1 -q 1 -s $size -n $n | awk '$1 == '$size' { printf "%.3f", $4 * 1048576 / 1e9 }')"
        pls="$pls $(RAILNET_QPS_PER_CONN=1 RAILNET_MERGE_PORTS=0 RAILNET_HCA==softnic0:1 \
            "$nd" --plugin "$plugin" bw --size $size --iters $n --window 16 2>/dev/null | awk '$1 == '$size' { print $4 }')"
    done
    ib=$(median $ibs); pl=$(median $pls)
    awk -v s=$size -v a="$ib" -v b="$pl" 'BEGIN { printf "%10d %14s %14s %8.2f\n", s, a, b, (a > 0 ? b / a : 0) }'
done

echo "== 8-byte latency (us, one-way, medians of 2000 round trips -- ib_write_lat's t_typical -- then the median of 3 alternating runs)"
# ib_send_lat completes each message through the receiver's CQ, as the
# plugin must (ib_write_lat polls the last byte in memory): softnic's floor
# for a completion-driven receive
ibls= isls= plls=
for round in 1 2 3; do
    ibls="$ibls $(perftest ib_write_lat -s 8 -n 2000 | awk '$1 == 8 { print $5 }')"
    isls="$isls $(perftest ib_send_lat -s 8 -n 2000 | awk '$1 == 8 { print $5 }')"
    plls="$plls $("$nd" --plugin "$plugin" lat --size 8 --iters 2000 2>/dev/null | sed -n 's/.*, \([0-9.]*\) us one-way (median)/\1/p')"
done
echo "# runs: ib_write_lat$ibls; ib_send_lat$isls; plugin$plls"
ibl=$(median $ibls); isl=$(median $isls); pll=$(median $plls)
awk -v a="$ibl" -v c="$isl" -v b="$pll" 'BEGIN { printf "ib_write_lat %s us, ib_send_lat %s us, plugin %s us; plugin/ib_write_lat %.2f, plugin/ib_send_lat %.2f\n", a, c, b, (a > 0 ? b / a : 0), (c > 0 ? b / c : 0) }'

rate=${RAILNET_BENCH_RATE:-300M}
echo "== striping with SOFTNIC_RATE=$rate bytes/s per port (GB/s at 16 MiB)"
one=$(SOFTNIC_RATE=$rate RAILNET_HCA==softnic0:1 "$nd" --plugin "$plugin" bw --size 16M --iters 60 --window 16 2>/dev/null |
    awk '$1 == 16777216 { print $4 }')
two=$(SOFTNIC_RATE=$rate "$nd" --plugin "$plugin" bw --size 16M --iters 60 --window 16 2>/dev/null | awk '$1 == 16777216 { print $4 }')
awk -v a="$one" -v b="$two" 'BEGIN { printf "port 1 alone %s, merged ports 1+2 %s, merged/one %.2f\n", a, b, (a > 0 ? b / a : 0) }'
