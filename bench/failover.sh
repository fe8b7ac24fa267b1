#!/bin/sh
# bench/failover.sh: what a port failure and its recovery cost a connection
# of the merged dual-port softnic device (RAILNET_FAILOVER=1), with each port
# limited to RAILNET_BENCH_RATE (default 1G bytes/s, so both ports together
# are well within what 2 cores move): time from port 2 down to traffic on
# port 1 alone, from port 2 up to data on both ports again, and the outage
# bandwidth as a fraction of one port's rate next to both ports' bandwidth
# (bench/failover_bench.c). Then the churn soak: 2000 connect / transfer /
# close cycles of tests/plugin/test_failover (the same count make check runs;
# RAILNET_CHURN_CYCLES=20000 for a longer soak).
: "${top_builddir:=$(pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
. "$top_srcdir/bench/lib-vars.sh"
bench_vars_check || exit 1
export top_builddir
b=$top_builddir/bench/failover_bench
[ -x "$b" ] || { echo "skipped: build bench/failover_bench first (make -C build bench)"; exit 0; }
rate=${RAILNET_BENCH_RATE:-1G}
bytes=$(echo "$rate" | awk '{ v = $1 + 0; u = substr($1, length($1)); if (u == "k") v *= 1e3; if (u == "M") v *= 1e6; if (u == "G") v *= 1e9; print v }')
echo "== port 2 down and up under 1 MiB messages (SOFTNIC_RATE=$rate per port)"
LD_LIBRARY_PATH=$top_builddir/tests/softnic${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} SOFTNIC_RATE=$rate \
    "$b" --size 1048576 --cycles ${RAILNET_BENCH_CYCLES:-5} --rate "$bytes"
t=$top_builddir/tests/plugin/test_failover
if [ -x "$t" ]; then
    echo "== churn: ${RAILNET_CHURN_CYCLES:-2000} connect/transfer/close cycles"
    LD_LIBRARY_PATH=$top_builddir/tests/softnic${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$t" 2>&1 | grep -E 'cycles in|churn'
fi
