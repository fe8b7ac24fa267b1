# tests/softnic/sn_env.sh: sourced by softnic's shell tests (after
# tests/lib.sh).  Puts softnic first on LD_LIBRARY_PATH so that unchanged
# rdma-core and perftest binaries run on it, and gives helpers to run a
# server/client pair with timeouts and to read perftest's result lines.
SN_DIR=$top_builddir/tests/softnic
export LD_LIBRARY_PATH="$SN_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The unchanged programs these scripts run make no transport fault, so
# softnic's retry budget (perftest's QPs: 4.096 us * 2^14 * 8 = 536 ms,
# floor 500 ms, cap 2 s) could only ever measure a NIC thread starved by a
# loaded host: it is set beyond any starvation, as in failover.sh.  Seen at
# load 40-50 on 2 cores with the old budget: IBV_WC_RETRY_EXC_ERR (status
# 12) in ib_write_bw -a (4 of 7 runs: no ACK within the budget for 100
# writes of 512 KiB-8 MiB in flight, and, with SOFTNIC_DEBUG, "retry budget
# (536 ms) ran out: 0 WQE(s) unanswered, 100 not sent ..., no connection":
# a first post waiting for the hello its peer's starved thread answers), in
# ib_write_lat (once in 4 runs of test_softnic_clients.sh) and in
# ib_send_bw -n 20 -s 2 (1 of 31).  A case that makes a fault on purpose
# runs with $SN_FAULT_BUDGET, softnic's own defaults.
export SOFTNIC_RETRY_MIN_MS=${SOFTNIC_RETRY_MIN_MS:-10000} SOFTNIC_RETRY_CAP_MS=${SOFTNIC_RETRY_CAP_MS:-10000}
SN_FAULT_BUDGET="SOFTNIC_RETRY_MIN_MS=500 SOFTNIC_RETRY_CAP_MS=2000"
# A sanitizer build of softnic inside uninstrumented programs needs the
# runtime loaded first; their own leaks are not softnic's business.
if nm -D "$SN_DIR/libibverbs.so.1" 2>/dev/null | grep -q __asan_init; then
    SN_ASAN_RT=$(${CC:-cc} -print-file-name=libasan.so)
    export LD_PRELOAD="$SN_ASAN_RT${LD_PRELOAD:+:$LD_PRELOAD}"
    export ASAN_OPTIONS="detect_leaks=0:${ASAN_OPTIONS:-}"
fi
SN_TMP=$(mktemp -d /tmp/softnic_sh.XXXXXX)
SN_PIDS=""
# Ends what this script started.  The pids are `timeout` wrappers (maybe
# behind `ip netns exec`, which execs): TERM makes timeout pass the signal
# on to its program (a KILL would orphan it); KILL is the fallback.
sn_stop() {
    kill -TERM "$@" 2>/dev/null
    sleep 0.3
    kill -KILL "$@" 2>/dev/null
}
sn_cleanup() {
    local live="" p
    for p in $SN_PIDS; do kill -0 "$p" 2>/dev/null && live="$live $p"; done
    [ -n "$live" ] && sn_stop $live
    rm -rf "$SN_TMP"
}
trap sn_cleanup EXIT

# A TCP port for perftest's out-of-band exchange, different per call and
# below the kernel's ephemeral range (32768-60999), where softnic's own
# listeners and every client socket take theirs.
SN_PORT=$((11000 + ($$ * 7) % 7000))
sn_next_port() { SN_PORT=$((SN_PORT + 1)); }

# Waits (up to 10 s) until something listens on TCP port $1 [in netns $2];
# gives up at once when process $3 (the server) is gone.
sn_wait_listen() {
    local i=0
    while [ $i -lt 200 ]; do
        [ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null && return 1
        if [ -n "${2:-}" ]; then
            ip netns exec "$2" ss -ltnH "sport = :$1" 2>/dev/null | grep -q . && return 0
        else
            ss -ltnH "sport = :$1" 2>/dev/null | grep -q . && return 0
        fi
        sleep 0.05
        i=$((i + 1))
    done
    return 1
}

# perftest writes its results with stdio, fully buffered into a file, and
# its errors unbuffered to stderr: in the file an error came out above the
# results (a failed pair's last lines showed only headers), and a pair
# killed by its timeout left nothing at all.  Line-buffered, the file keeps
# the order in which things happened, up to the moment of a kill.
SN_LINEBUF=
command -v stdbuf >/dev/null && SN_LINEBUF="stdbuf -oL"

# sn_pair NAME TIMEOUT CMD ARGS...: runs "CMD ARGS -p PORT" as server and
# "CMD ARGS -p PORT 127.0.0.1" as client; outputs in $SN_TMP/NAME.{srv,cli},
# exit codes in SN_SRV_RC / SN_CLI_RC.  SN_SERVER_PREFIX / SN_CLIENT_PREFIX
# (e.g. "ip netns exec a") and SN_SERVER_ADDR change where each side runs.
sn_pair() {
    local name=$1 t=$2
    shift 2
    local port spid try
    for try in 1 2 3; do   # a port taken by someone else: take the next
        sn_next_port
        port=$SN_PORT
        # someone else listens there already: take the next one
        if [ -z "${SN_SERVER_NS:-}" ] && ss -ltnH "sport = :$port" 2>/dev/null | grep -q .; then
            sn_next_port
            port=$SN_PORT
        fi
        $SN_SERVER_PREFIX timeout "$t" $SN_LINEBUF "$@" -p "$port" >"$SN_TMP/$name.srv" 2>&1 &
        spid=$!
        SN_PIDS="$SN_PIDS $spid"
        sn_wait_listen "$port" "${SN_SERVER_NS:-}" "$spid" && break
        echo "server never listened on $port" >>"$SN_TMP/$name.srv"
        sn_stop "$spid"
        wait "$spid" 2>/dev/null
    done
    $SN_CLIENT_PREFIX timeout "$t" $SN_LINEBUF "$@" -p "$port" "${SN_SERVER_ADDR:-127.0.0.1}" \
        >"$SN_TMP/$name.cli" 2>&1
    SN_CLI_RC=$?
    wait "$spid"
    SN_SRV_RC=$?
}

# Why a pair failed, for the TAP diagnostic.
sn_why() {
    echo "server rc=$SN_SRV_RC client rc=$SN_CLI_RC"
    tail -n 8 "$SN_TMP/$1.srv" | sed 's/^/srv: /'
    tail -n 8 "$SN_TMP/$1.cli" | sed 's/^/cli: /'
    # the result lines sn_bw_ok / sn_lat_ok refused (maybe above the tail)
    [ -s "$SN_TMP/$1.cli.bad" ] && sed 's/^/cli refused: /' "$SN_TMP/$1.cli.bad"
    # perftest's own clock sampling failing (its rates then print as 0)
    grep -h -m 2 'Correlation coefficient' "$SN_TMP/$1.cli" | sed 's/^/cli: /'
    return 0
}

# perftest bandwidth result lines: "bytes iters peak avg msgrate".
# Succeeds when there are $2 (at least 1) lines, each with $3 iterations
# and a message rate > 0, and an average bandwidth > 0 from 64 KiB on (a
# few bytes on a loaded host print as 0.00 MB/sec).  A line right after
# perftest's "Correlation coefficient r^2: ... < 0.9" has no rates to
# judge: perftest samples the CPU clock before printing each line, and when
# the sample is noise (a loaded host) it gives up and every rate of that
# line prints as 0 (seen: ib_write_bw -a at 4 MiB, 100 of 100 iterations,
# r^2 0.099 at load ~19 on 2 cores); its iterations still count.
sn_bw_ok() {
    awk -v want_lines="${2:-1}" -v iters="$3" '
        /Correlation coefficient r\^2/ { noclock = 1; next }
        /#bytes/ { on = 1; next }
        on && /^ *[0-9]+ +[0-9]+ / {
            n++
            if ($2 != iters || (!noclock && ($5 + 0 <= 0 || ($1 >= 65536 && $4 + 0 <= 0)))) {
                bad++
                print > (FILENAME ".bad")
            }
            noclock = 0
        }
        END {
            if (n < want_lines) print n " result lines, " want_lines " wanted" > (FILENAME ".bad")
            exit !(n >= want_lines && bad == 0)
        }' "$1"
}

# perftest latency result lines: "bytes iters t_min t_max t_typical t_avg ..."
# (times of 0 after a failed clock sample: see sn_bw_ok)
sn_lat_ok() {
    awk -v iters="$2" '
        /Correlation coefficient r\^2/ { noclock = 1; next }
        /#bytes/ { on = 1; next }
        on && /^ *[0-9]+ +[0-9]+ / {
            n++
            if ($2 != iters || (!noclock && $6 + 0 <= 0)) { bad++; print > (FILENAME ".bad") }
            noclock = 0
        }
        END {
            if (n < 1) print "no result line" > (FILENAME ".bad")
            exit !(n >= 1 && bad == 0)
        }' "$1"
}

# The last (largest) result line of a perftest run, as a TAP diagnostic.
sn_last_result() {
    awk -v name="$2" '/#bytes/ { on = 1; next }
        on && /^ *[0-9]+ +[0-9]+ / { last = $0 }
        END { if (last != "") { gsub(/[ \t]+/, " ", last); print "# " name ":" last } }' "$1"
}

# sn_tap_run TIMEOUT PROGRAM [env arguments...]: runs softnic's TAP program
# $SN_DIR/PROGRAM under `env` with those arguments (-u VAR, VAR=value), its
# output in SN_TAP_OUT and, for a failure, its failed cases (or its last
# lines) in SN_TAP_WHY; true when it exited 0 with an ok line and no "not ok".
sn_tap_run() {
    _to=$1 _prog=$2
    shift 2
    SN_TAP_OUT=$(env "$@" timeout "$_to" "$SN_DIR/$_prog" 2>&1)
    _rc=$?
    _fails=$(printf '%s\n' "$SN_TAP_OUT" | grep -A3 '^not ok' | head -c 1500)
    [ -n "$_fails" ] || _fails=$(printf '%s\n' "$SN_TAP_OUT" | tail -n 6)
    SN_TAP_WHY="rc=$_rc: $(printf '%s\n' "$_fails" | sed 's/^/# /')"
    [ $_rc -eq 0 ] && printf '%s\n' "$SN_TAP_OUT" | grep -q '^ok ' && ! printf '%s\n' "$SN_TAP_OUT" | grep -q '^not ok'
}

# sn_tap_cases_with SUFFIX SETTING PROGRAM...: each of softnic's TAP
# programs with the environment setting SETTING (VAR=value) and its own
# retry budgets (sntest.c's, as under make check: its fault cases end
# quickly, not after this file's budget for unchanged programs), one TAP
# line each, named PROGRAM_SUFFIX.
sn_tap_cases_with() {
    _suffix=$1 _setting=$2
    shift 2
    for _t in "$@"; do
        if sn_tap_run 300 "$_t" -u SOFTNIC_RETRY_MIN_MS -u SOFTNIC_RETRY_CAP_MS "$_setting"; then
            tap_ok "${_t}_$_suffix"
        else
            tap_not_ok "${_t}_$_suffix" "$SN_TAP_WHY"
        fi
    done
}
