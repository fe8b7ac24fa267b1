#!/bin/sh
# bench/cm_vs_tcp_setup.sh: connection setup through the RDMA CM against the
# TCP bootstrap (RAILNET_CM=rdmacm vs tcp), on softnic, measured side by side
# in one run: the time to set up 1..64 connections of the merged dual-port
# device (2 QPs each; bench/conn_setup_bench.c), and CM/TCP as a ratio
# (above 1: the CM is slower). Per count, RAILNET_BENCH_ROUNDS (default 3)
# rounds alternate a tcp and a rdmacm process, each the median of
# RAILNET_BENCH_REPS (default 5) setups; the table shows the median round.
: "${top_builddir:=$(pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
. "$top_srcdir/bench/lib-vars.sh"
bench_vars_check || exit 1
export top_builddir
b=$top_builddir/bench/conn_setup_bench
[ -x "$b" ] || { echo "skipped: build bench/conn_setup_bench first (make -C build bench)"; exit 0; }
[ -e "$top_builddir/tests/softnic/librdmacm.so.1" ] || { echo "skipped: softnic's librdmacm.so.1 not built"; exit 0; }
export LD_LIBRARY_PATH=$top_builddir/tests/softnic${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
reps=${RAILNET_BENCH_REPS:-5}
rounds=${RAILNET_BENCH_ROUNDS:-3}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
printf '%-6s %12s %12s %9s\n' conns "tcp [ms]" "rdmacm [ms]" "cm/tcp"
for n in 1 2 4 8 16 32 64; do
    t= c=
    r=0
    while [ $r -lt "$rounds" ]; do
        x=$(RAILNET_CM=tcp "$b" --reps "$reps" $n) || { echo "FAILED (tcp, $n): $x"; exit 1; }
        y=$(RAILNET_CM=rdmacm "$b" --reps "$reps" $n) || { echo "FAILED (rdmacm, $n): $y"; exit 1; }
        t="$t $(echo "$x" | awk '{ print $4 }')"
        c="$c $(echo "$y" | awk '{ print $4 }')"
        r=$((r + 1))
    done
    tm=$(echo $t | tr ' ' '\n' | median)
    cmm=$(echo $c | tr ' ' '\n' | median)
    awk -v n=$n -v t="$tm" -v c="$cmm" 'BEGIN { printf "%-6d %12.2f %12.2f %8.2fx\n", n, t, c, (t > 0 ? c / t : 0) }'
done
