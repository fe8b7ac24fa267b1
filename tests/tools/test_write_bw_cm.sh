#!/bin/sh
# railnet-write-bw -R on softnic: the verbs mode's QPs connected through
# softnic's RDMA CM (as perftest -R), the test itself unchanged; a port the
# CM did not route to, a side without -R and -R with the plugin mode are
# refused with the reason.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/tools/wb-lib.sh"
[ -x "$WB" ] || tap_skip_all "railnet-write-bw not built"
[ -e "$SOFTNIC_DIR/librdmacm.so.1" ] || tap_skip_all "softnic's librdmacm not built (librdmacm-dev missing at configure)"
tap_plan 5
N=300

wb_pair cm -R -q 2 -n $N
if [ $SRV_RC -eq 0 ] && [ $CLI_RC -eq 0 ] && wb_check_rows "$TMPD/cm.cli.out" 1 $N >"$TMPD/cm.chk" 2>&1; then
    tap_ok wb_R_two_qps_through_the_cm
else tap_not_ok wb_R_two_qps_through_the_cm "server $SRV_RC, client $CLI_RC: $(cat "$TMPD/cm.chk" "$TMPD"/cm.*.err)"; fi
if grep -q '^ Mode *: verbs, QPs connected through the RDMA CM (-R)' "$TMPD/cm.cli.out" &&
   grep -q '^ Path MTU *: 4096' "$TMPD/cm.cli.out" &&
   [ "$(wb_rows "$TMPD/cm.cli.out")" = "$(wb_rows "$TMPD/cm.srv.out")" ]; then
    tap_ok wb_R_header_says_rdma_cm_and_both_sides_agree
else tap_not_ok wb_R_header_says_rdma_cm_and_both_sides_agree "$(head -n 12 "$TMPD/cm.cli.out")"; fi

# The CM routes 127.0.0.1 to port 1: QPs made on port 2 do not fit it.
wb_pair port2 -R -i 2 -n 10
if [ $CLI_RC -ne 0 ] && [ $CLI_RC -ne 124 ] && [ $SRV_RC -ne 124 ] &&
   grep -q 'the RDMA CM put the connection on softnic0 port 1, but -d/-i say softnic0 port 2' "$TMPD"/port2.*.err; then
    tap_ok wb_R_refuses_a_port_the_cm_did_not_route_to
else tap_not_ok wb_R_refuses_a_port_the_cm_did_not_route_to "server $SRV_RC, client $CLI_RC: $(cat "$TMPD"/port2.*.err)"; fi

# One side with -R, the other without: the HELLO check says so on both.
if wb_server "$TMPD/mix.srv.out" "$TMPD/mix.srv.err" -n 10; then
    timeout 60 "$WB" -p "$WB_PORT" -R -n 10 127.0.0.1 >"$TMPD/mix.cli.out" 2>"$TMPD/mix.cli.err"
    CLI_RC=$?
    wait $WB_SPID
    SRV_RC=$?
else CLI_RC=0 SRV_RC=0; fi
if [ $CLI_RC -eq 1 ] && [ $SRV_RC -eq 1 ] && grep -q 'server runs --mode=verbs, client --mode=verbs -R' "$TMPD/mix.cli.err"; then
    tap_ok wb_R_on_one_side_only_is_refused_by_the_hello
else tap_not_ok wb_R_on_one_side_only_is_refused_by_the_hello "server $SRV_RC, client $CLI_RC: $(cat "$TMPD"/mix.*.err)"; fi

out=$("$WB" -R --mode=plugin 2>&1); rc=$?
if [ $rc -eq 2 ] && echo "$out" | grep -q 'RAILNET_CM=rdmacm'; then tap_ok wb_R_with_plugin_mode_points_to_railnet_cm
else tap_not_ok wb_R_with_plugin_mode_points_to_railnet_cm "exit $rc: $out"; fi
tap_done
