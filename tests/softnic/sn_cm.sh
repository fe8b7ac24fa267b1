# tests/softnic/sn_cm.sh: sourced by the RDMA CM tests after sn_env.sh.
# cm_pair NAME TIMEOUT "SERVER ARGS" "CLIENT ARGS": runs the server command
# line, waits until it listens on TCP port $CM_PORT (softnic's CM ids listen
# on real TCP ports of their address) and runs the client; the string PORT
# in either is replaced by the port.  Outputs in $SN_TMP/NAME.{srv,cli},
# exit codes in SN_SRV_RC / SN_CLI_RC.  SN_SERVER_PREFIX, SN_CLIENT_PREFIX
# and SN_SERVER_NS place the two sides (network namespaces).
cm_pair() {
    local name=$1 t=$2 srv=$3 cli=$4 spid try
    for try in 1 2 3; do   # a port someone else took: the next one
        sn_next_port
        if [ -z "${SN_SERVER_NS:-}" ] && ss -ltnH "sport = :$SN_PORT" 2>/dev/null | grep -q .; then
            sn_next_port
        fi
        CM_PORT=$SN_PORT
        # shellcheck disable=SC2086
        ${SN_SERVER_PREFIX:-} timeout "$t" ${srv//PORT/$CM_PORT} >"$SN_TMP/$name.srv" 2>&1 &
        spid=$!
        SN_PIDS="$SN_PIDS $spid"
        sn_wait_listen "$CM_PORT" "${SN_SERVER_NS:-}" "$spid" && break
        echo "server never listened on $CM_PORT" >>"$SN_TMP/$name.srv"
        sn_stop "$spid"
        wait "$spid" 2>/dev/null
    done
    # shellcheck disable=SC2086
    ${SN_CLIENT_PREFIX:-} timeout "$t" ${cli//PORT/$CM_PORT} >"$SN_TMP/$name.cli" 2>&1
    SN_CLI_RC=$?
    wait "$spid"
    SN_SRV_RC=$?
}

# rping before rdma-core 59 can exit 255 after a complete run: its CM
# thread calls rdma_get_cm_event once more after the main thread destroyed
# the event channel (fixed upstream by "rping: terminate CM event thread
# before exiting"); the kernel's ucma leaves the same window. cm_rping_rc_ok
# RC FILE passes 0, and 255 from that race alone: an rping older than 59
# whose output shows its DISCONNECT event and ends with that one error.
cm_rping_rc_ok() {
    [ "$1" -eq 0 ] && return 0
    local v
    v=$(dpkg-query -W -f='${Version}' rdmacm-utils 2>/dev/null)
    v=${v%%.*}
    case "$v" in ''|*[!0-9]*) return 1 ;; esac
    [ "$1" -eq 255 ] && [ "$v" -lt 59 ] && grep -q 'DISCONNECT EVENT' "$2" &&
        [ "$(tail -n 1 "$2")" = "rdma_get_cm_event: Bad file descriptor" ]
}

# rping -V -v output: COUNT verified pings on the client, none bogus.
cm_rping_ok() {
    cm_rping_rc_ok "$SN_SRV_RC" "$SN_TMP/$1.srv" && cm_rping_rc_ok "$SN_CLI_RC" "$SN_TMP/$1.cli" &&
        [ "$(grep -c '^ping data: rdma-ping-' "$SN_TMP/$1.cli")" -eq "$2" ] &&
        ! grep -qi 'bogus\|data mismatch\|error' "$SN_TMP/$1.cli" "$SN_TMP/$1.srv"
}
