#!/bin/bash
# tests/softnic/test_softnic_rdmacm.sh: softnic's librdmacm.so.1
# runs Debian's unchanged RDMA CM programs: rping (client and server, -V
# verifies every payload; -q creates the QP outside the CM and connects it
# with rdma_init_qp_attr/rdma_establish), ucmatose (several connections on
# one event channel), rdma_server/rdma_client (synchronous ids, endpoints,
# rdma_verbs.h helpers), perftest's -R (ib_write_bw, ib_read_bw,
# ib_send_lat), and the errors a client sees without a listener.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/softnic/sn_env.sh"
. "$top_srcdir/tests/softnic/sn_cm.sh"

for b in rping ucmatose rdma_server rdma_client ib_write_bw ib_read_bw ib_send_lat; do
    command -v "$b" >/dev/null || tap_skip_all "$b not installed (apt-get install rdmacm-utils perftest)"
done
tap_plan 10

# --- the library itself -------------------------------------------------
real=$(ls /usr/lib/*/librdmacm.so.1 2>/dev/null | head -n 1)
if [ -z "$real" ] || ! command -v objdump >/dev/null; then
    tap_skip exports_match_rdma_core "no system librdmacm.so.1 or objdump to compare with"
else
    syms() { objdump -T "$1" | awk 'NF >= 7 && $(NF-1) ~ /^RDMACM_/ { print $NF "@" $(NF-1) }' | sort -u; }
    missing=$(comm -23 <(syms "$real") <(syms "$SN_DIR/librdmacm.so.1"))
    nodes=$(objdump -T "$SN_DIR/librdmacm.so.1" | awk 'NF >= 7 && $(NF-1) ~ /^RDMACM_/ { print $(NF-1) }' | sort -u | tr '\n' ' ')
    if [ -z "$missing" ] && [ "$nodes" = "RDMACM_1.0 RDMACM_1.1 RDMACM_1.2 RDMACM_1.3 " ]; then
        tap_ok exports_match_rdma_core
    else tap_not_ok exports_match_rdma_core "missing: $(echo $missing | head -c 600); nodes: $nodes"; fi
fi

# --- rdmacm-utils -------------------------------------------------------
cm_pair rping_verified 30 "rping -s -v -V -C 100 -a 127.0.0.1 -p PORT" "rping -c -v -V -C 100 -a 127.0.0.1 -p PORT"
if cm_rping_ok rping_verified 100; then tap_ok rping_v_100_verified_pings
else tap_not_ok rping_v_100_verified_pings "$(sn_why rping_verified)"; fi

cm_pair rping_port2 30 "rping -s -v -V -C 20 -S 65536 -a 127.0.0.2 -p PORT" "rping -c -v -V -C 20 -S 65536 -a 127.0.0.2 -p PORT"
if cm_rping_ok rping_port2 20; then tap_ok rping_v_64k_on_port_2
else tap_not_ok rping_v_64k_on_port_2 "$(sn_why rping_port2)"; fi

cm_pair rping_selfqp 30 "rping -s -q -v -V -C 20 -a 127.0.0.1 -p PORT" "rping -c -q -v -V -C 20 -a 127.0.0.1 -p PORT"
if cm_rping_ok rping_selfqp 20; then tap_ok rping_q_qp_outside_the_cm
else tap_not_ok rping_q_qp_outside_the_cm "$(sn_why rping_selfqp)"; fi

cm_pair ucmatose 30 "ucmatose -c 4 -C 50 -p PORT" "ucmatose -s 127.0.0.1 -c 4 -C 50 -p PORT"
if [ "$SN_SRV_RC" -eq 0 ] && [ "$SN_CLI_RC" -eq 0 ] &&
   grep -q 'return status 0' "$SN_TMP/ucmatose.cli" && grep -q 'return status 0' "$SN_TMP/ucmatose.srv"; then
    tap_ok ucmatose_4_connections
else tap_not_ok ucmatose_4_connections "$(sn_why ucmatose)"; fi

cm_pair rdma_sync 30 "rdma_server -p PORT" "rdma_client -s 127.0.0.1 -p PORT"
if [ "$SN_SRV_RC" -eq 0 ] && [ "$SN_CLI_RC" -eq 0 ] &&
   grep -q 'rdma_client: end 0' "$SN_TMP/rdma_sync.cli" && grep -q 'rdma_server: end 0' "$SN_TMP/rdma_sync.srv"; then
    tap_ok rdma_server_rdma_client
else tap_not_ok rdma_server_rdma_client "$(sn_why rdma_sync)"; fi

# Nobody listens: the kernel CM's answer is a REJ with reason 8 (invalid
# service ID), which rping prints as a REJECTED event with status 8.
sn_next_port
out=$(timeout 20 rping -c -a 127.0.0.1 -p "$SN_PORT" -C 1 2>&1)
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && echo "$out" | grep -q 'RDMA_CM_EVENT_REJECTED, error 8'; then
    tap_ok rping_without_listener_is_rejected_with_reason_8
else tap_not_ok rping_without_listener_is_rejected_with_reason_8 "rc=$rc: $out"; fi

# --- perftest -R --------------------------------------------------------
cm_perf() {   # name, kind (bw|lat), iterations, the perftest command
    local name=$1 kind=$2 iters=$3
    shift 3
    cm_pair "$name" 60 "$* -R -d softnic0 -x 0 -F -p PORT" "$* -R -d softnic0 -x 0 -F -p PORT 127.0.0.1"
    local ok=1
    [ "$SN_SRV_RC" -eq 0 ] && [ "$SN_CLI_RC" -eq 0 ] || ok=0
    if [ $kind = bw ]; then sn_bw_ok "$SN_TMP/$name.cli" 1 "$iters" || ok=0
    else sn_lat_ok "$SN_TMP/$name.cli" "$iters" || ok=0; fi
    if [ $ok = 1 ]; then
        tap_ok "$name"
        sn_last_result "$SN_TMP/$name.cli" "$name"
    else tap_not_ok "$name" "$(sn_why "$name")"; fi
}
cm_perf ib_write_bw_R bw 2000 ib_write_bw -n 2000
cm_perf ib_read_bw_R_2_qps bw 400 ib_read_bw -n 200 -q 2
cm_perf ib_send_lat_R lat 500 ib_send_lat -n 500

tap_done
