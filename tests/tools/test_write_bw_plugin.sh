#!/bin/sh
# railnet-write-bw --mode=plugin on softnic: the data moves through railnet's
# own ncclNet_v8_t table (listen/connect/accept, regMr, isend/irecv/test).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/tools/wb-lib.sh"
[ -x "$WB" ] || tap_skip_all "railnet-write-bw not built"
PLUGIN=$top_builddir/.libs/libnccl-net-railnet.so
tap_plan 9
N=200

# The library is missing: a clear message naming what was tried, exit 1,
# on both sides before any connection.
wb_local_failure missing --mode=plugin -n 10 --plugin-lib "$TMPD/none/libnccl-net-railnet.so"
if [ $CLI_RC -eq 1 ] && [ $SRV_RC -eq 1 ] &&
   grep -q "cannot load the plugin given by --plugin-lib" "$TMPD/missing.cli.err" &&
   grep -q "$TMPD/none/libnccl-net-railnet.so: .*No such file" "$TMPD/missing.cli.err" &&
   grep -q "cannot load the plugin given by --plugin-lib" "$TMPD/missing.srv.err" &&
   ! grep -q "waiting for a client" "$TMPD/missing.srv.err"; then
    tap_ok wb_plugin_missing_library_fails_with_what_was_tried
else tap_not_ok wb_plugin_missing_library_fails_with_what_was_tried "client $CLI_RC server $SRV_RC: $(cat "$TMPD"/missing.*.err)"; fi

timeout 10 "$WB" --mode=plugin -q 2 >/dev/null 2>"$TMPD/q.err"; rc=$?
if [ $rc -eq 2 ] && grep -q "do not apply to --mode=plugin" "$TMPD/q.err"; then
    tap_ok wb_plugin_rejects_verbs_only_options
else tap_not_ok wb_plugin_rejects_verbs_only_options "exit $rc: $(cat "$TMPD/q.err")"; fi

if [ ! -e "$PLUGIN" ]; then
    for c in wb_plugin_host_memory_rows_consistent wb_plugin_found_next_to_the_tool wb_plugin_json_consistent \
             wb_plugin_bidir_both_directions wb_plugin_duration_mode_ends_cleanly wb_plugin_sweep \
             wb_plugin_nccl_net_plugin_path_honoured; do
        tap_skip $c "plugin not built ($PLUGIN)"
    done
    tap_done; exit
fi

wb_pair plain --mode=plugin -n $N
if [ $CLI_RC -eq 0 ] && [ $SRV_RC -eq 0 ] && wb_check_rows "$TMPD/plain.cli.out" 1 $N >"$TMPD/p.err" 2>&1 &&
   [ "$(wb_rows "$TMPD/plain.cli.out")" = "$(wb_rows "$TMPD/plain.srv.out")" ]; then
    tap_ok wb_plugin_host_memory_rows_consistent
else tap_not_ok wb_plugin_host_memory_rows_consistent "client $CLI_RC server $SRV_RC: $(cat "$TMPD/p.err" "$TMPD"/plain.*)"; fi
if grep -q "^ Plugin *: .*/\.libs/libnccl-net-railnet.so (railnet v8), device 0 softnic0" "$TMPD/plain.cli.out" &&
   grep -q '^ Registration *: regMr(host)' "$TMPD/plain.cli.out"; then
    tap_ok wb_plugin_found_next_to_the_tool
else tap_not_ok wb_plugin_found_next_to_the_tool "$(head -n 12 "$TMPD/plain.cli.out")"; fi

if have_python; then
    wb_pair json --mode=plugin -n $N --json
    if [ $CLI_RC -eq 0 ] && wb_check_json "$TMPD/json.cli.out" 1 $N >"$TMPD/j.err" 2>&1; then
        tap_ok wb_plugin_json_consistent
    else tap_not_ok wb_plugin_json_consistent "$(cat "$TMPD/j.err" "$TMPD"/json.*.err)"; fi
    wb_pair bidir --mode=plugin -n $N --bidir --json
    if [ $CLI_RC -eq 0 ] && [ $SRV_RC -eq 0 ] && wb_check_json "$TMPD/bidir.cli.out" 1 $((2 * N)) >"$TMPD/b.err" 2>&1; then
        tap_ok wb_plugin_bidir_both_directions
    else tap_not_ok wb_plugin_bidir_both_directions "$(cat "$TMPD/b.err" "$TMPD"/bidir.*.err)"; fi
    wb_pair dur --mode=plugin -D 0.3 --bidir --json
    if [ $CLI_RC -eq 0 ] && [ $SRV_RC -eq 0 ] && wb_check_json "$TMPD/dur.cli.out" 1 "" >"$TMPD/d.err" 2>&1; then
        tap_ok wb_plugin_duration_mode_ends_cleanly
    else tap_not_ok wb_plugin_duration_mode_ends_cleanly "$(cat "$TMPD/d.err" "$TMPD"/dur.*.err)"; fi
    wb_pair sweep --mode=plugin -a -n 10 --json
    if [ $CLI_RC -eq 0 ] && wb_check_json "$TMPD/sweep.cli.out" 23 10 >"$TMPD/s.err" 2>&1; then
        tap_ok wb_plugin_sweep
    else tap_not_ok wb_plugin_sweep "$(cat "$TMPD/s.err" "$TMPD"/sweep.*.err)"; fi
else
    for c in wb_plugin_json_consistent wb_plugin_bidir_both_directions wb_plugin_duration_mode_ends_cleanly wb_plugin_sweep; do
        tap_skip $c "python3 not found (needed to parse the JSON)"
    done
fi

cp "$PLUGIN" "$TMPD/libnccl-net-copy.so"
NCCL_NET_PLUGIN=$TMPD/libnccl-net-copy.so wb_pair env --mode=plugin -n 20
if [ $CLI_RC -eq 0 ] && grep -q "^ Plugin *: $TMPD/libnccl-net-copy.so" "$TMPD/env.cli.out"; then
    tap_ok wb_plugin_nccl_net_plugin_path_honoured
else tap_not_ok wb_plugin_nccl_net_plugin_path_honoured "$(cat "$TMPD"/env.*)"; fi
tap_done
