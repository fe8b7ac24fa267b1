#!/bin/sh
# railnet-write-bw's failures: bad options (exit 2 with the reason), an
# unreachable, stopped or killed peer (exit 1 with the reason, within the
# --timeout bound: every process runs under timeout(1) so a hang fails the
# case with exit 124 instead of stalling make check).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/tools/wb-lib.sh"
[ -x "$WB" ] || tap_skip_all "railnet-write-bw not built"
tap_plan 27

# usage CASE EXPECTED_TEXT ARGS...: exit 2 and the text on stderr.
usage() {
    _c=$1; _t=$2; shift 2
    timeout 10 "$WB" "$@" >"$TMPD/u.out" 2>"$TMPD/u.err"; _rc=$?
    if [ $_rc -eq 2 ] && grep -q -- "$_t" "$TMPD/u.err"; then tap_ok "$_c"
    else tap_not_ok "$_c" "exit $_rc, stderr: $(cat "$TMPD/u.err")"; fi
}
usage wb_unknown_option_exit_2 "unknown option --bogus" --bogus
usage wb_missing_value_exit_2 "option -s needs a value" -s
usage wb_missing_value_of_long_option_names_it "option --ports needs a value" --ports
usage wb_zero_size_exit_2 "-s wants 1 byte to 1 GiB" -s 0
usage wb_bad_size_suffix_exit_2 "-s wants" -s 12Q
usage wb_bad_qp_count_exit_2 "invalid value for -q" -q 0
usage wb_duplicate_ports_exit_2 "distinct port numbers" --ports 1,1
usage wb_dmabuf_without_cuda_exit_2 "add --use_cuda" --dmabuf
usage wb_cuda_vmm_without_cuda_exit_2 "--cuda_vmm applies to GPU memory: add --use_cuda" --cuda_vmm
usage wb_a_and_s_exclude_exit_2 "-a and -s exclude" -a -s 4096
usage wb_bad_mode_exit_2 "invalid value for --mode" --mode=rdma
usage wb_two_servers_exit_2 "unexpected argument" host1 host2

timeout 10 "$WB" --help >"$TMPD/h.out" 2>&1; rc=$?
if [ $rc -eq 0 ] && grep -q -- '--use_cuda\[=GPU\]' "$TMPD/h.out" && grep -q -- '--mode=verbs|plugin' "$TMPD/h.out"; then
    tap_ok wb_help_exit_0_lists_options
else tap_not_ok wb_help_exit_0_lists_options "exit $rc"; fi

# -I is the kernel's inline size: a CPU-posted write of GPU memory cannot
# inline it.
usage wb_inline_size_needs_gpu_initiated_exit_2 "-I applies to --gpu-initiated" -I 8 --use_cuda

# --gpu-initiated: refused where it cannot apply (or, in a build without
# nvcc, refused as not built); on a host without a GPU both sides say why
# and exit 1 within the timeout, they do not crash or hang.
if "$WB" --help 2>/dev/null | grep -q 'not built in this version'; then
    usage wb_gpu_initiated_says_not_built "not built" --gpu-initiated
    tap_skip wb_gpu_initiated_rejects_dmabuf_exit_2 "--gpu-initiated not built (no nvcc)"
    tap_skip wb_gpu_initiated_rejects_cuda_vmm_exit_2 "--gpu-initiated not built (no nvcc)"
    tap_skip wb_gpu_initiated_mode_mismatch_fails_both_sides "--gpu-initiated not built (no nvcc)"
    tap_skip wb_gpu_initiated_without_gpu_fails_with_reason "--gpu-initiated not built (no nvcc)"
    tap_skip wb_inline_size_out_of_range_exit_2 "--gpu-initiated not built (no nvcc)"
else
    usage wb_inline_size_out_of_range_exit_2 "invalid value for -I: '973'" --gpu-initiated -I 973
    usage wb_gpu_initiated_rejects_bidir_exit_2 "--bidir does not apply to --gpu-initiated" --gpu-initiated --bidir
    usage wb_gpu_initiated_rejects_dmabuf_exit_2 "--dmabuf does not apply to --gpu-initiated" --gpu-initiated --dmabuf
    usage wb_gpu_initiated_rejects_cuda_vmm_exit_2 "--cuda_vmm does not apply to --gpu-initiated" --gpu-initiated --cuda_vmm
    # Only the client asks for it: the HELLO check stops both before any GPU work.
    wb_server "$TMPD/mm.srv.out" "$TMPD/mm.srv.err" -n 10
    timeout 30 "$WB" -p "$WB_PORT" --gpu-initiated -n 10 127.0.0.1 >"$TMPD/mm.cli.out" 2>"$TMPD/mm.cli.err"; rc=$?
    wait $WB_SPID; src=$?
    if [ $rc -eq 1 ] && [ $src -eq 1 ] && grep -q "server runs --mode=verbs, client --gpu-initiated" "$TMPD/mm.srv.err" &&
       grep -q "peer: options differ" "$TMPD/mm.cli.err"; then
        tap_ok wb_gpu_initiated_mode_mismatch_fails_both_sides
    else tap_not_ok wb_gpu_initiated_mode_mismatch_fails_both_sides "client $rc server $src: $(cat "$TMPD"/mm.*.err)"; fi
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
        tap_skip wb_gpu_initiated_without_gpu_fails_with_reason "this machine has a GPU (gpu_tools.sh covers it)"
    else
        wb_pair gi --gpu-initiated -n 10 --json
        if [ $CLI_RC -eq 1 ] && [ $SRV_RC -eq 1 ] &&
           grep -q -- "(client): --gpu-initiated needs a CUDA GPU: " "$TMPD/gi.cli.err" &&
           grep -q -- "(server): --gpu-initiated needs a CUDA GPU: " "$TMPD/gi.srv.err" &&
           grep -q '"error": "--gpu-initiated needs a CUDA GPU' "$TMPD/gi.cli.out"; then
            tap_ok wb_gpu_initiated_without_gpu_fails_with_reason
        else tap_not_ok wb_gpu_initiated_without_gpu_fails_with_reason "client $CLI_RC server $SRV_RC: $(cat "$TMPD"/gi.*)"; fi
    fi
fi

# GPU memory without a CUDA driver: both sides say why, exit 1, before
# any connection (the server does not wait for a client to fail then).
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    tap_skip wb_use_cuda_without_driver_fails_with_reason "this machine has a GPU (gpu_tools.sh covers it)"
else
    wb_local_failure cuda --use_cuda -n 10
    if [ $CLI_RC -eq 1 ] && [ $SRV_RC -eq 1 ] && grep -q -- "--use_cuda: " "$TMPD/cuda.cli.err" &&
       grep -q -- "--use_cuda: " "$TMPD/cuda.srv.err" && ! grep -q "waiting for a client" "$TMPD/cuda.srv.err"; then
        tap_ok wb_use_cuda_without_driver_fails_with_reason
    else tap_not_ok wb_use_cuda_without_driver_fails_with_reason "client $CLI_RC server $SRV_RC: $(cat "$TMPD"/cuda.*.err)"; fi
fi

# Nobody listens on this port: refused until --timeout, then exit 1. The
# port stays bound (not listening) while the client tries, so that no other
# process on the host (a test running beside this one) takes it meanwhile.
python3 -c 'import socket, time; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1], flush=True); time.sleep(30)' >"$TMPD/held.port" &
held=$!
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -s "$TMPD/held.port" ] && break; sleep 0.2; done
WB_PORT=$(cat "$TMPD/held.port")
[ -n "$WB_PORT" ] || WB_PORT=$(wb_free_port) # no python3: a free port, not held
timeout 20 "$WB" -p "$WB_PORT" --timeout 1 --json 127.0.0.1 >"$TMPD/r.out" 2>"$TMPD/r.err"; rc=$?
kill $held 2>/dev/null; wait $held 2>/dev/null
if [ $rc -eq 1 ] && grep -q "cannot reach server 127.0.0.1:$WB_PORT within 1 s" "$TMPD/r.err" &&
   grep -q '"error": "cannot reach server' "$TMPD/r.out"; then
    tap_ok wb_unreachable_server_fails_after_timeout_json_says_why
else tap_not_ok wb_unreachable_server_fails_after_timeout_json_says_why "exit $rc: $(cat "$TMPD/r.err")"; fi

# A server that accepted (the kernel did) but never answers: stopped.
wb_server "$TMPD/st.srv" "$TMPD/st.srv.err"
st=$(wb_server_tool_pid)
kill -STOP $st
timeout 20 "$WB" -p "$WB_PORT" --timeout 1 127.0.0.1 >"$TMPD/st.out" 2>"$TMPD/st.err"; rc=$?
kill -9 $st 2>/dev/null; kill -CONT $st 2>/dev/null
if [ $rc -eq 1 ] && grep -q "no word from the peer for 1 s" "$TMPD/st.err"; then
    tap_ok wb_silent_server_fails_after_timeout
else tap_not_ok wb_silent_server_fails_after_timeout "exit $rc: $(cat "$TMPD/st.err")"; fi

# The server dies in the middle of a run: the client fails, it does not hang.
# It dies once the client is in its run (its result header out, which the
# tool flushes), not after a fixed 1 s: the tools run reniced,
# and at load ~40 on 2 cores the client had not yet connected ("cannot
# reach server ...: Connection refused").
wb_server "$TMPD/k.srv" "$TMPD/k.srv.err" -D 20 --timeout 3
timeout 40 "$WB" -p "$WB_PORT" -D 20 --timeout 3 127.0.0.1 >"$TMPD/k.out" 2>"$TMPD/k.err" &
kc=$!; WB_PIDS="$WB_PIDS $kc"
i=0
while [ $i -lt 300 ] && kill -0 $kc 2>/dev/null && ! grep -q '#bytes' "$TMPD/k.out"; do
    sleep 0.1
    i=$((i + 1))
done
sleep 0.5
kill -9 $(wb_server_tool_pid)
wait $kc; rc=$?
if [ $rc -eq 1 ] && grep -Eq "lost the peer|completion error|no RDMA WRITE completion" "$TMPD/k.err"; then
    tap_ok wb_killed_server_fails_the_client
else tap_not_ok wb_killed_server_fails_the_client "exit $rc: $(cat "$TMPD/k.err")"; fi

# The client dies in the middle of a run: the server fails too.
wb_server "$TMPD/c.out" "$TMPD/c.err" -D 20 --timeout 3
cs=$WB_SPID
"$WB" -p "$WB_PORT" -D 20 --timeout 3 127.0.0.1 >"$TMPD/c.cli" 2>&1 &
cc=$!; WB_PIDS="$WB_PIDS $cc"
i=0   # in its run, as above
while [ $i -lt 300 ] && kill -0 $cc 2>/dev/null && ! grep -q '#bytes' "$TMPD/c.cli"; do
    sleep 0.1
    i=$((i + 1))
done
sleep 0.5
kill -9 $cc
wait $cs; rc=$?
if [ $rc -eq 1 ] && grep -q "lost the peer" "$TMPD/c.err"; then
    tap_ok wb_killed_client_fails_the_server
else tap_not_ok wb_killed_client_fails_the_server "exit $rc: $(cat "$TMPD/c.err")"; fi

# A device that does not exist: both sides say so at once, exit 1 (the
# server used to wait for a client first).
wb_local_failure nodev -d nosuch -n 10
if [ $SRV_RC -eq 1 ] && [ $CLI_RC -eq 1 ] && grep -q "RDMA device nosuch not found" "$TMPD/nodev.srv.err" &&
   grep -q "RDMA device nosuch not found" "$TMPD/nodev.cli.err" && ! grep -q "waiting for a client" "$TMPD/nodev.srv.err"; then
    tap_ok wb_unknown_device_fails_before_any_connection
else tap_not_ok wb_unknown_device_fails_before_any_connection "server $SRV_RC client $CLI_RC: $(cat "$TMPD"/nodev.*.err)"; fi

# A GID index the port does not have is named as such, not as a bad port.
wb_local_failure nogid -x 200 -n 10
if [ $SRV_RC -eq 1 ] && [ $CLI_RC -eq 1 ] && grep -q "port 1 has no GID at index 200" "$TMPD/nogid.srv.err" &&
   grep -q "port 1 has no GID at index 200" "$TMPD/nogid.cli.err"; then
    tap_ok wb_missing_gid_index_is_named
else tap_not_ok wb_missing_gid_index_is_named "server $SRV_RC client $CLI_RC: $(cat "$TMPD"/nogid.*.err)"; fi
tap_done
