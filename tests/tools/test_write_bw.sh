#!/bin/sh
# railnet-write-bw on softnic with host memory: a server and a client
# process; the values are checked for sign and consistency, never for speed.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/tools/wb-lib.sh"
[ -x "$WB" ] || tap_skip_all "railnet-write-bw not built"
[ -e "$SOFTNIC_DIR/libibverbs.so.1" ] || tap_skip_all "softnic not built"
tap_plan 13
N=300

wb_pair plain -n $N
if [ $SRV_RC -eq 0 ] && [ $CLI_RC -eq 0 ]; then tap_ok wb_server_and_client_exit_0
else tap_not_ok wb_server_and_client_exit_0 "server $SRV_RC, client $CLI_RC: $(cat "$TMPD"/plain.*.err)"; fi
tap_check wb_client_row_positive_avg_le_peak_iters_n wb_check_rows "$TMPD/plain.cli.out" 1 $N
if [ "$(wb_rows "$TMPD/plain.cli.out")" = "$(wb_rows "$TMPD/plain.srv.out")" ]; then
    tap_ok wb_server_reports_the_clients_row
else
    tap_not_ok wb_server_reports_the_clients_row "client: $(wb_rows "$TMPD/plain.cli.out") server: $(wb_rows "$TMPD/plain.srv.out")"
fi
missing=
for re in '^ Device *: softnic0' '^ Port 1 *: Ethernet [0-9.]+ Gb/s \([0-9]+X [0-9.]+ Gb/s\), GID index 0, GID ::ffff:127.0.0.1, MTU 4096' \
          '^ Memory *: host' '^ Registration *: ibv_reg_mr' '^ Relaxed ordering : on' \
          '^ QPs *: 1 per port, 1 total' '#bytes *#iterations *BW peak\[GB/sec\] *BW average\[GB/sec\] *MsgRate\[Mpps\]'; do
    grep -Eq "$re" "$TMPD/plain.cli.out" || missing="$missing [$re]"
done
if [ -z "$missing" ]; then tap_ok wb_header_names_device_port_gid_mtu_memory_registration_ro
else tap_not_ok wb_header_names_device_port_gid_mtu_memory_registration_ro "missing:$missing"; fi

if have_python; then
    wb_pair json -n $N -q 2 --json
    if [ $CLI_RC -eq 0 ] && wb_check_json "$TMPD/json.cli.out" 1 $N >"$TMPD/j.err" 2>&1 &&
       python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["qps"]==2 and d["role"]=="client" and d["local"]["memory"]=="host", d' "$TMPD/json.cli.out" 2>>"$TMPD/j.err"; then
        tap_ok wb_json_two_qps_parses_bytes_total_is_bytes_x_iters
    else tap_not_ok wb_json_two_qps_parses_bytes_total_is_bytes_x_iters "$(cat "$TMPD/j.err" "$TMPD"/json.*.err)"; fi

    wb_pair ports -n $N -q 2 --ports 1,2 --json
    if [ $CLI_RC -eq 0 ] && wb_check_json "$TMPD/ports.cli.out" 1 $N >"$TMPD/p.err" 2>&1 &&
       python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert [p["port"] for p in d["ports"]]==[1,2], d["ports"]
assert d["ports"][0]["gid"]!=d["ports"][1]["gid"], d["ports"]
assert d["qps"]==4, d["qps"]' "$TMPD/ports.cli.out" 2>>"$TMPD/p.err"; then
        tap_ok wb_ports_1_2_stripes_four_qps_over_both_ports
    else tap_not_ok wb_ports_1_2_stripes_four_qps_over_both_ports "$(cat "$TMPD/p.err" "$TMPD"/ports.*.err)"; fi

    wb_pair bidir -n $N --bidir --json
    if [ $CLI_RC -eq 0 ] && [ $SRV_RC -eq 0 ] && wb_check_json "$TMPD/bidir.cli.out" 1 $((2 * N)) >"$TMPD/b.err" 2>&1 &&
       wb_check_json "$TMPD/bidir.srv.out" 1 $((2 * N)) >>"$TMPD/b.err" 2>&1; then
        tap_ok wb_bidir_both_sides_report_both_directions
    else tap_not_ok wb_bidir_both_sides_report_both_directions "$(cat "$TMPD/b.err" "$TMPD"/bidir.*.err)"; fi

    wb_pair sweep -a -n 20 --json
    if [ $CLI_RC -eq 0 ] && wb_check_json "$TMPD/sweep.cli.out" 23 20 >"$TMPD/s.err" 2>&1 &&
       python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert [r["bytes"] for r in d["results"]]==[2<<i for i in range(23)], d["results"]' "$TMPD/sweep.cli.out" 2>>"$TMPD/s.err"; then
        tap_ok wb_all_sizes_2B_to_8MiB
    else tap_not_ok wb_all_sizes_2B_to_8MiB "$(cat "$TMPD/s.err" "$TMPD"/sweep.*.err)"; fi
    if grep -q '^railnet-write-bw: \[23/23\] 8388608 bytes' "$TMPD/sweep.cli.err" &&
       ! grep -q 'railnet-write-bw: \[' "$TMPD/sweep.cli.out"; then
        tap_ok wb_sweep_progress_goes_to_stderr
    else tap_not_ok wb_sweep_progress_goes_to_stderr "$(head -n 5 "$TMPD/sweep.cli.err")"; fi

    wb_pair dur -D 0.3 -s 4096 --json
    if [ $CLI_RC -eq 0 ] && wb_check_json "$TMPD/dur.cli.out" 1 "" >"$TMPD/d.err" 2>&1; then
        tap_ok wb_duration_mode_counts_what_completed
    else tap_not_ok wb_duration_mode_counts_what_completed "$(cat "$TMPD/d.err" "$TMPD"/dur.*.err)"; fi
else
    for c in wb_json_two_qps_parses_bytes_total_is_bytes_x_iters wb_ports_1_2_stripes_four_qps_over_both_ports \
             wb_bidir_both_sides_report_both_directions wb_all_sizes_2B_to_8MiB \
             wb_sweep_progress_goes_to_stderr wb_duration_mode_counts_what_completed; do
        tap_skip $c "python3 not found (needed to parse the JSON)"
    done
fi

wb_pair noro -n 50 -s 4096 --no-relaxed-ordering --report_gbits
if [ $CLI_RC -eq 0 ] && grep -q '^ Relaxed ordering : off' "$TMPD/noro.cli.out" &&
   grep -q 'relaxed ordering off' "$TMPD/noro.srv.out"; then
    tap_ok wb_no_relaxed_ordering_shows_off_on_both_sides
else tap_not_ok wb_no_relaxed_ordering_shows_off_on_both_sides "$(cat "$TMPD"/noro.*)"; fi
if grep -q 'BW peak\[Gb/sec\]' "$TMPD/noro.cli.out" && wb_check_rows "$TMPD/noro.cli.out" 1 50 >/dev/null; then
    tap_ok wb_report_gbits_switches_units
else tap_not_ok wb_report_gbits_switches_units "$(cat "$TMPD/noro.cli.out")"; fi

wb_server "$TMPD/mm.srv" "$TMPD/mm.srv.err" -n 10
timeout 30 "$WB" -p "$WB_PORT" -n 20 127.0.0.1 >"$TMPD/mm.cli" 2>&1; mrc=$?
wait $WB_SPID; msrc=$?
if [ $mrc -eq 1 ] && [ $msrc -eq 1 ] && grep -q 'options differ.*-n 10.*-n 20' "$TMPD/mm.cli"; then
    tap_ok wb_option_mismatch_fails_both_sides_with_reason
else tap_not_ok wb_option_mismatch_fails_both_sides_with_reason "client $mrc server $msrc: $(cat "$TMPD"/mm.*)"; fi
tap_done
