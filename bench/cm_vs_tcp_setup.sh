#!/bin/sh
# bench/cm_vs_tcp_setup.sh: connection setup through the RDMA CM against the
# TCP bootstrap (RAILNET_CM=rdmacm vs tcp), on softnic, measured side by side
# in one run: the median time to set up 1..64 connections of the merged
# dual-port device (2 QPs each; bench/conn_setup_bench.c), and CM/TCP as a
# ratio (above 1: the CM is slower). RAILNET_BENCH_REPS repetitions (default 5).
: "${top_builddir:=$(pwd)}"
export top_builddir
b=$top_builddir/bench/conn_setup_bench
[ -x "$b" ] || { echo "skipped: build bench/conn_setup_bench first (make -C build bench)"; exit 0; }
[ -e "$top_builddir/tests/softnic/librdmacm.so.1" ] || { echo "skipped: softnic's librdmacm.so.1 not built"; exit 0; }
export LD_LIBRARY_PATH=$top_builddir/tests/softnic${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
reps=${RAILNET_BENCH_REPS:-5}
counts="1 2 4 8 16 32 64"
tcp=$(RAILNET_CM=tcp "$b" --reps "$reps" $counts) || { echo "FAILED (tcp): $tcp"; exit 1; }
cm=$(RAILNET_CM=rdmacm "$b" --reps "$reps" $counts) || { echo "FAILED (rdmacm): $cm"; exit 1; }
printf '%-6s %12s %12s %9s\n' conns "tcp [ms]" "rdmacm [ms]" "cm/tcp"
for n in $counts; do
    t=$(echo "$tcp" | awk -v n=$n '$2 == n { print $4 }')
    c=$(echo "$cm" | awk -v n=$n '$2 == n { print $4 }')
    awk -v n=$n -v t="$t" -v c="$c" 'BEGIN { printf "%-6d %12.2f %12.2f %8.2fx\n", n, t, c, (t > 0 ? c / t : 0) }'
done
