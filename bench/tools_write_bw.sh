#!/bin/sh
# bench/tools_write_bw.sh: railnet-write-bw on softnic with a rate limit per
# port (SOFTNIC_RATE, default 500M bytes/s), measured side by side in one run:
# 1 QP on port 1, 2 QPs on port 1, 1 QP on each of ports 1 and 2, and the
# same transfer through railnet's plugin. Ratios against the single-QP run:
# two QPs on one port should stay ~1 (the port is the limit), two ports ~2
# (striping works), the plugin ~1 or more (its own striping, if it merges
# the ports) and far below 1 would mean its protocol costs bandwidth.
: "${top_builddir:=$(pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
. "$top_srcdir/bench/lib-vars.sh"
bench_vars_check || exit 1
WB=$top_builddir/tools/railnet-write-bw
[ -x "$WB" ] || { echo "skipped: $WB not built"; exit 0; }
export LD_LIBRARY_PATH=$top_builddir/tests/softnic${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export SOFTNIC_RATE=${SOFTNIC_RATE:-500M}
secs=${RAILNET_BENCH_SECONDS:-2}
size=${RAILNET_BENCH_SIZE:-1M}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# run NAME ARGS...: average GB/s of a server/client pair, or "-" on failure.
run() {
    _n=$1; shift
    # the server takes a free port and names it on stderr
    timeout 120 "$WB" -p 0 -s "$size" -D "$secs" "$@" >"$tmp/$_n.srv" 2>"$tmp/$_n.srv.err" &
    port=
    for _i in $(seq 100); do
        port=$(sed -n 's/.*waiting for a client on TCP port \([0-9]*\)$/\1/p' "$tmp/$_n.srv.err" 2>/dev/null)
        [ -n "$port" ] && break
        sleep 0.05
    done
    timeout 120 "$WB" -p "${port:-1}" -s "$size" -D "$secs" "$@" 127.0.0.1 >"$tmp/$_n.cli" 2>&1
    _rc=$?
    wait
    if [ $_rc -ne 0 ]; then echo "# $_n failed: $(tail -n 1 "$tmp/$_n.cli")" >&2; echo -; return; fi
    awk '/#bytes/ { t = 1; next } t && NF == 5 { print $4; exit }' "$tmp/$_n.cli"
}
one=$(run one_qp --ib-port 1)
two=$(run two_qps -q 2 --ib-port 1)
ports=$(run two_ports --ports 1,2)
plugin=-
[ -e "$top_builddir/.libs/libnccl-net-railnet.so" ] && plugin=$(run plugin --mode=plugin)
echo "railnet-write-bw on softnic, SOFTNIC_RATE=$SOFTNIC_RATE bytes/s per port, $size writes, ${secs} s each"
printf '%-28s %12s %8s\n' run 'GB/s avg' ratio
for r in "1 QP, port 1:$one" "2 QPs, port 1:$two" "1 QP on each of ports 1,2:$ports" "plugin (its defaults):$plugin"; do
    name=${r%%:*}; v=${r#*:}
    awk -v n="$name" -v v="$v" -v b="$one" 'BEGIN {
        if (v == "-" || b == "-" || b + 0 == 0) printf "%-28s %12s %8s\n", n, v, "-";
        else printf "%-28s %12.3f %8.2f\n", n, v, v / b }'
done
