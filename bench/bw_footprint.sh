#!/bin/sh
# bench/bw_footprint.sh: why the main job's 64 MiB row runs at about half
# the 16-32 MiB rows (docs/performance.md, "The 64 MiB row of the main
# job"). netdriver bw sends every
# message of a size from the start of one buffer into the start of one
# buffer, so a row touches 2 x size bytes, again and again; on softnic the
# two NIC threads (one per port) copy those bytes with process_vm_readv.
# Measured side by side, alternating, in each of N rounds:
#   A  netdriver bw 16 MiB              (32 MiB touched: the fast rows)
#   B  netdriver bw 16 MiB, --span 64M  (16 MiB messages over the 64 MiB
#      row's 128 MiB: same message size as A, same memory as C)
#   C  netdriver bw 64 MiB              (128 MiB touched: the slow row)
#   D  two memcpy_bw processes at once, each 8 MiB -> 8 MiB  (A's memory)
#   E  two memcpy_bw processes at once, each 32 MiB -> 32 MiB (C's memory)
# If the message size were the cause, B would run with A; if the memory
# touched is, B runs with C and E / D shows the same drop without softnic
# or the plugin. GB/s (1e9 bytes/s); medians and min-max of the rounds.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
. "$top_srcdir/bench/lib-vars.sh"
bench_vars_check || exit 1
top_builddir=${top_builddir:-$(pwd)}
nd=$top_builddir/tests/netdriver/netdriver
plugin=$top_builddir/.libs/libnccl-net-railnet.so
mb=$top_builddir/bench/memcpy_bw
[ -x "$nd" ] && [ -f "$plugin" ] && [ -x "$mb" ] ||
    { echo "skipped: build netdriver, the plugin and bench/memcpy_bw first (make bench)"; exit 0; }
rounds=${RAILNET_BENCH_ROUNDS:-5}
iters=${RAILNET_BENCH_ITERS:-40}
export LD_LIBRARY_PATH=$top_builddir/tests/softnic${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

nd_gbs() { # netdriver bw args...: the row's GB/s, or 0
    RAILNET_STATS=0 "$nd" --plugin "$plugin" bw --iters "$iters" "$@" 2>/dev/null |
        awk '/^ +[0-9]+ +[0-9]+ / { v = $4 } END { print v + 0 }'
}
copy_pair_gbs() { # bytes: two memcpy_bw of bytes -> bytes at once, summed, GB/s
    "$mb" "$1" "$1" $((2 << 30)) >"$tmp/m1" & "$mb" "$1" "$1" $((2 << 30)) >"$tmp/m2"; wait
    awk -v a="$(cat "$tmp/m1")" -v b="$(cat "$tmp/m2")" 'BEGIN { printf "%.3f\n", (a + b) * 1048576 / 1e9 }'
}
stats() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%s %s %s", v[int((NR + 1) / 2)], v[1], v[NR] }'; }

a= b= c= d= e=
for r in $(seq "$rounds"); do
    a="$a $(nd_gbs --size 16M)"
    b="$b $(nd_gbs --size 16M --span 64M)"
    c="$c $(nd_gbs --size 64M)"
    d="$d $(copy_pair_gbs $((8 << 20)))"
    e="$e $(copy_pair_gbs $((32 << 20)))"
done
echo "rounds (GB/s):"
echo "  A 16 MiB:            $a"
echo "  B 16 MiB over 64 MiB:$b"
echo "  C 64 MiB:            $c"
echo "  D memcpy 2 x 8 MiB:  $d"
echo "  E memcpy 2 x 32 MiB: $e"
# POSIX sh (bench/run-all runs every bench with sh): no here-strings
set -- $(stats $a); am=$1 al=$2 ah=$3
set -- $(stats $b); bm=$1 bl=$2 bh=$3
set -- $(stats $c); cm=$1 cl=$2 ch=$3
set -- $(stats $d); dm=$1 dl=$2 dh=$3
set -- $(stats $e); em=$1 el=$2 eh=$3
printf '%-58s %8s %15s\n' "measure (GB/s, median of $rounds alternating rounds)" median "spread (min-max)"
printf '%-58s %8s %15s\n' "A netdriver bw 16 MiB (32 MiB touched)" "$am" "$al-$ah"
printf '%-58s %8s %15s\n' "B netdriver bw 16 MiB over a 64 MiB span (128 MiB touched)" "$bm" "$bl-$bh"
printf '%-58s %8s %15s\n' "C netdriver bw 64 MiB (128 MiB touched)" "$cm" "$cl-$ch"
printf '%-58s %8s %15s\n' "D memcpy, 2 processes x 8 MiB -> 8 MiB (32 MiB touched)" "$dm" "$dl-$dh"
printf '%-58s %8s %15s\n' "E memcpy, 2 processes x 32 MiB -> 32 MiB (128 MiB touched)" "$em" "$el-$eh"
awk -v a="$am" -v b="$bm" -v c="$cm" -v d="$dm" -v e="$em" 'BEGIN {
    if (a <= 0 || b <= 0 || c <= 0 || d <= 0 || e <= 0) { print "no ratio: a measurement failed"; exit 0 }
    printf "C / A (64 MiB row / 16 MiB row):                  %.2f\n", c / a;
    printf "B / A (same message size, 4x the memory):         %.2f\n", b / a;
    printf "C / B (same memory, 4x the message size):         %.2f\n", c / b;
    printf "E / D (plain memcpy, the same two footprints):    %.2f\n", e / d;
    printf "C / E (64 MiB row / memcpy of its footprint):     %.2f\n", c / e }'
