#!/bin/sh
# bench/gin_signaling.sh: what selective signaling buys railnet's GIN proxy
# type (plugin/gin/gin_put.c), CPU only, on softnic. Two ranks of
# tests/gindriver stream puts at each other with NCCL's 256 in flight, the
# oldest retired first as NCCL's proxy does ("gindriver rate"), once with
# the default signaling (RAILNET_GIN_SIGNAL_EVERY=32: a completion per 32
# work requests or fewer) and once with every work request signaled
# (RAILNET_GIN_SIGNAL_EVERY=1), alternating, RUNS times each (default 5),
# 40000 puts per rank (10000 of 64 KiB).
# Per size it prints the median put rate of each (puts/s, both ranks
# summed), their ratio, and the share of work requests each signaled
# (RAILNET_STATS=1 counters of rank 0).
: "${top_builddir:=$(pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
. "$top_srcdir/bench/lib-vars.sh"
bench_vars_check || exit 1
gd=$top_builddir/tests/gindriver/gindriver
plugin=$top_builddir/.libs/libnccl-net-railnet.so
[ -x "$gd" ] && [ -f "$plugin" ] || { echo "skipped: build the plugin and tests/gindriver first (make -C build bench)"; exit 0; }
export LD_LIBRARY_PATH=$top_builddir/tests/softnic${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
runs=${RUNS:-5}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# one run: prints "RATE SIGNALED_PERCENT" (rate summed over the ranks)
one() { # every size puts
    RAILNET_STATS=1 RAILNET_GIN_SIGNAL_EVERY=$1 "$gd" --plugin "$plugin" --ranks 2 --puts "$3" --size "$2" rate \
        >"$tmp/out" 2>&1 || { cp "$tmp/out" "$tmp/failed"; echo "FAILED"; return; }
    awk '/^#rate / { r += $11 }
         /stats: GIN rank 0 / { for (i = 1; i <= NF; i++) { if ($i == "work") w = $(i - 1); if ($i == "signaled,") s = $(i - 1) } }
         END { printf "%.0f %.1f\n", r, w ? 100 * s / w : 0 }' "$tmp/out"
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "== GIN proxy put rate, 2 ranks on softnic, 256 in flight per peer, median of $runs alternating runs"
printf '%8s %16s %9s %16s %9s %8s\n' bytes "selective put/s" "signaled" "every-WR put/s" "signaled" ratio
for spec in 8:40000 4096:40000 65536:10000; do
    size=${spec%:*}; puts=${spec#*:}
    : >"$tmp/sel"; : >"$tmp/all"
    for i in $(seq "$runs"); do
        one 32 "$size" "$puts" >>"$tmp/sel"
        one 1 "$size" "$puts" >>"$tmp/all"
    done
    if grep -q FAILED "$tmp/sel" "$tmp/all"; then echo "$size: a run failed:"; grep -v 'NCCL INFO' "$tmp/failed" | tail -n 20; exit 1; fi
    s=$(cut -d' ' -f1 "$tmp/sel" | median); a=$(cut -d' ' -f1 "$tmp/all" | median)
    ss=$(cut -d' ' -f2 "$tmp/sel" | median); as=$(cut -d' ' -f2 "$tmp/all" | median)
    printf '%8s %16.0f %8s%% %16.0f %8s%% %8.2f\n' "$size" "$s" "$ss" "$a" "$as" "$(echo "$s $a" | awk '{ print $2 ? $1 / $2 : 0 }')"
done
