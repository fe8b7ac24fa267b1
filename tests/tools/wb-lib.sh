# tests/tools/wb-lib.sh: helpers for the railnet-write-bw and railnet-diag
# tests (sourced after tests/lib.sh). Runs the tools on softnic.
# These tests never depend on speed: run them (and every tool they start)
# at low priority so that timing-sensitive tests beside them in a parallel
# make check keep the CPU (softnic's retry timers need it).
renice -n 10 $$ >/dev/null 2>&1 || :
SOFTNIC_DIR=$top_builddir/tests/softnic
WB=$top_builddir/tools/railnet-write-bw
DIAG=$top_builddir/tools/railnet-diag
export LD_LIBRARY_PATH=$SOFTNIC_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
TMPD=$(mktemp -d "${TMPDIR:-/tmp}/railnet-tools.XXXXXX")
WB_PIDS=
wb_cleanup() {
    # timeout(1) does not pass SIGKILL on: kill the tool under it first.
    for p in $WB_PIDS; do kill -9 $(pgrep -P "$p" 2>/dev/null) "$p" 2>/dev/null; done
    rm -rf "$TMPD"
}
trap wb_cleanup EXIT INT TERM
# Servers take a free port from the kernel (-p 0) and print it; a port
# guessed from a range can collide with another test or an ephemeral port.
# wb_server OUTFILE ERRFILE ARGS...: starts a server in the background under
# timeout(1); sets WB_SPID and WB_PORT (empty when it did not start).
wb_server() {
    _o=$1; _e=$2; shift 2
    timeout 60 "$WB" -p 0 "$@" >"$_o" 2>"$_e" &
    WB_SPID=$!
    WB_PIDS="$WB_PIDS $WB_SPID"
    WB_PORT=
    _i=0
    while [ $_i -lt 100 ]; do
        [ -e "$_e" ] && WB_PORT=$(sed -n 's/^railnet-write-bw: waiting for a client on TCP port \([0-9]*\)$/\1/p' "$_e")
        [ -n "$WB_PORT" ] && return 0
        kill -0 $WB_SPID 2>/dev/null || return 1
        sleep 0.05
        _i=$((_i + 1))
    done
    return 1
}
# The tool's own pid under the timeout(1) that wb_server started.
wb_server_tool_pid() { pgrep -P "$WB_SPID" | head -n 1; }
# A port nobody listens on: a free one the kernel gives out, closed again.
wb_free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
        echo $((10000 + ($$ % 20000)))
}

# wb_pair NAME ARGS...: server with ARGS, then client with ARGS 127.0.0.1;
# outputs in $TMPD/NAME.{srv,cli}.{out,err}, exit codes in SRV_RC/CLI_RC.
# Every process runs under timeout(1), so a hang is a failure, not a stall.
wb_pair() {
    _n=$1; shift
    if ! wb_server "$TMPD/$_n.srv.out" "$TMPD/$_n.srv.err" "$@"; then
        wait $WB_SPID; SRV_RC=$?; CLI_RC=255
        echo "server did not start" >"$TMPD/$_n.cli.err"; : >"$TMPD/$_n.cli.out"
        return
    fi
    timeout 60 "$WB" -p "$WB_PORT" "$@" 127.0.0.1 >"$TMPD/$_n.cli.out" 2>"$TMPD/$_n.cli.err"
    CLI_RC=$?
    wait $WB_SPID
    SRV_RC=$?
}

# wb_local_failure NAME ARGS...: a setup that fails locally fails on both
# sides before any connection: the server without waiting for a client, the
# client without reaching a server (port 9: nobody listens). Sets SRV_RC and
# CLI_RC; the output in $TMPD/NAME.{srv,cli}.{out,err}.
wb_local_failure() {
    _n=$1; shift
    timeout 20 "$WB" -p 0 "$@" >"$TMPD/$_n.srv.out" 2>"$TMPD/$_n.srv.err"
    SRV_RC=$?
    timeout 20 "$WB" -p 9 "$@" 127.0.0.1 >"$TMPD/$_n.cli.out" 2>"$TMPD/$_n.cli.err"
    CLI_RC=$?
}

# The rows of the perftest table: "bytes iterations peak average msgrate"
# (--gpu-initiated adds a sixth column, the latency of one put + quiet).
wb_rows() { awk '/#bytes/ { t = 1; next } /^---/ { if (t) exit } t && (NF == 5 || NF == 6) { print }' "$1"; }

# wb_check_rows FILE N_ROWS ITERS: every row positive, average <= peak and
# the expected iteration count (ITERS empty: any). Prints what is wrong.
wb_check_rows() {
    wb_rows "$1" | awk -v want="$2" -v iters="$3" '
        { n++
          if (!($1 > 0 && $2 > 0 && $3 > 0 && $4 > 0 && $5 > 0)) { print "row not positive: " $0; bad = 1 }
          if ($4 > $3 + 0.01) { print "average above peak: " $0; bad = 1 }
          if (iters != "" && $2 != iters) { print "iterations " $2 " != " iters ": " $0; bad = 1 } }
        END { if (n != want) { print "rows: " n " != " want; bad = 1 }; exit bad }'
}

have_python() { command -v python3 >/dev/null 2>&1; }

# wb_check_json FILE ROWS ITERS [BIDIR]: the document parses; each result
# has bytes_total == bytes * iterations, average <= peak, all positive, and
# average == msg_rate * bytes (the same measurement, two ways).
wb_check_json() {
    python3 - "$@" <<'PY'
import json, sys
path, rows, iters = sys.argv[1], int(sys.argv[2]), sys.argv[3]
d = json.load(open(path))
res = d["results"]
assert d["tool"] == "railnet-write-bw", d["tool"]
assert len(res) == rows, "rows %d != %d" % (len(res), rows)
gb = d["units"]["bw"] == "GB/sec"
for r in res:
    assert r["bytes"] > 0 and r["iterations"] > 0 and r["seconds"] > 0, r
    assert r["bytes_total"] == r["bytes"] * r["iterations"], r
    assert 0 < r["bw_average"] <= r["bw_peak"] * 1.0001, r
    if iters != "":
        assert r["iterations"] == int(iters), r
    bw = r["msg_rate_mpps"] * 1e6 * r["bytes"] / 1e9 * (1 if gb else 8)
    assert abs(bw - r["bw_average"]) <= 0.01 * r["bw_average"] + 1e-6, (bw, r)
PY
}
