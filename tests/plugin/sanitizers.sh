#!/bin/sh
# tests/plugin/sanitizers.sh: the plugin, softnic and the driver under
# AddressSanitizer + UBSan (a nested build configured with --enable-asan, in
# $top_builddir/asan) and under valgrind memcheck: NCCL-like traffic, faults
# and rogue handshakes must run without a single report.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
tap_plan 57
abs_src=$(cd "$top_srcdir" && pwd)
asan=$top_builddir/asan
mkdir -p "$asan"
log=$asan/build.log
if [ ! -f "$asan/Makefile" ]; then
    (cd "$asan" && "$abs_src/configure" --enable-asan --without-cuda --without-nccl) >"$log" 2>&1
fi
targets="libnccl-net-railnet.la tests/netdriver/netdriver tests/plugin/test_conn_faults tests/plugin/test_failover tests/plugin/test_cq_overrun tests/plugin/test_p2p_forged_imm tests/softnic/libibverbs.so.1 tests/gindriver/gindriver tests/softnic/libmlx5.so.1 tests/softnic/libmlx5.so tests/softnic/libibverbs.so tests/softnic/test_softnic_verbs_ex tests/softnic/test_softnic_cq tests/softnic/test_softnic_nccl_gdaki_probe tests/softnic/test_softnic_ud tests/softnic/test_softnic_fastpath tests/softnic/test_softnic_push tests/softnic/test_softnic_push_hostile tests/softnic/test_softnic_push_flush_order tests/softnic/test_softnic_ack_note tests/softnic/test_softnic_engines tests/gdaki/test_gdaki_queue tests/gdaki/test_gdaki_softnic tests/plugin/test_gin_hostile tests/plugin/test_config"
# the RDMA CM (softnic's librdmacm and RAILNET_CM=rdmacm) where it is built
have_cm=no
[ -e "$top_builddir/tests/softnic/librdmacm.so.1" ] && have_cm=yes &&
    targets="$targets tests/softnic/librdmacm.so.1 tests/plugin/test_conn_cm tests/softnic/test_softnic_cm_hostile"
if make -C "$asan" -j2 $targets >>"$log" 2>&1; then
    tap_ok asan_build_of_plugin_softnic_driver
else
    tap_not_ok asan_build_of_plugin_softnic_driver "$(tail -n 20 "$log" | sed 's/^/# /')"
fi
export ASAN_OPTIONS=abort_on_error=1:detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
nd="$asan/tests/netdriver/netdriver --plugin $asan/.libs/libnccl-net-railnet.so"
san() { # name cmd...: passes when the command succeeds and no sanitizer spoke
    name=$1; shift
    out=$(env LD_LIBRARY_PATH="$asan/tests/softnic" top_builddir="$asan" "$@" 2>&1); st=$?
    if [ $st -eq 0 ] && ! printf '%s' "$out" | grep -qE 'ERROR: AddressSanitizer|runtime error:'; then tap_ok "$name"
    else tap_not_ok "$name" "exit $st; $(printf '%s\n' "$out" | grep -v ' INFO ' | tail -n 25 | sed 's/^/# /')"; fi
}
san asan_traffic_grouped_receives_striped $nd traffic --ranks 3 --iters 40 --max-size 4M --seed 3
# softnic's NIC threads polling before they sleep (SOFTNIC_SPIN_US, spin.c):
# they drop their locks to spin and read shared state as hints
san asan_traffic_spinning_nic_threads env SOFTNIC_SPIN_US=50 $nd traffic --ranks 2 --iters 40 --max-size 1M --seed 13
san asan_peer_killed_mid_transfer env RAILNET_IB_TIMEOUT=12 RAILNET_IB_RETRY_CNT=3 \
    $nd traffic --ranks 2 --iters 0 --max-size 1M --kill-rank 1 --kill-after-ms 300 --timeout 40
san asan_rogue_handshakes_and_forged_handles "$asan/tests/plugin/test_conn_faults"
# RAILNET_HCA's parser on good, bad and overlong entries (device:port:rail:plane)
san asan_railnet_hca_entries_parsed "$asan/tests/plugin/test_config"
san asan_railnet_hca_entries_at_init env RAILNET_HCA="softnic0:1:1:2,:x,softnic0:2:3:4:5:6,softnic0::9:99999999999999999999,,$(printf '%080d' 0)" \
    $nd --net-version 12 probe
if [ $have_cm = yes ]; then
    san asan_rdmacm_traffic env RAILNET_CM=rdmacm $nd traffic --ranks 3 --iters 30 --max-size 1M --seed 9
    san asan_rdmacm_connection_faults "$asan/tests/plugin/test_conn_cm"
    # raw peers on softnic's CM side channel, and children torn down for
    # a listener whose channel or id died (cm_conn_req_unclaimed_locked)
    san asan_softnic_cm_hostile_peers "$asan/tests/softnic/test_softnic_cm_hostile"
else
    tap_skip asan_rdmacm_traffic "softnic's librdmacm is not built (no librdmacm-dev at configure)"
    tap_skip asan_rdmacm_connection_faults "softnic's librdmacm is not built (no librdmacm-dev at configure)"
    tap_skip asan_softnic_cm_hostile_peers "softnic's librdmacm is not built (no librdmacm-dev at configure)"
fi
# port failover and recovery under traffic (softnic's control file), and the
# in-process failover/churn cases
# (instrumented ranks on a loaded 2-core host: softnic's retry floor is
# raised so that a starved NIC thread on the surviving port does not look
# like a dead link; failover.sh checks the timing behaviour uninstrumented)
san asan_port2_flapping_under_traffic env SOFTNIC_RETRY_MIN_MS=2000 $nd traffic --ranks 3 --iters 40 --max-size 1M --seed 5 --timeout 120 \
    --ctl-file "$asan/failover.ctl" --down-ms 60 --up-ms 80 --cycles 4
# the same where the PCIe link bounds the device (softnic's sysfs view):
# connections on home QPs (comm.h keep_home) move off port 2 and back
san asan_port2_flapping_with_home_qps env SOFTNIC_RETRY_MIN_MS=2000 SOFTNIC_SYSFS="$asan/sysfs" SOFTNIC_LINK_RATE=25G \
    $nd traffic --ranks 3 --iters 40 --max-size 1M --seed 6 --timeout 120 \
    --ctl-file "$asan/failover.ctl" --down-ms 60 --up-ms 80 --cycles 4
san asan_failover_recovery_and_churn env RAILNET_CHURN_CYCLES=200 TEST_FAILOVER_NO_RSS=1 "$asan/tests/plugin/test_failover"
# a comm whose CQ overruns (IBV_EVENT_CQ_ERR) fails instead of hanging
san asan_cq_overrun_fails_the_comm "$asan/tests/plugin/test_cq_overrun"
san asan_p2p_forged_immediates "$asan/tests/plugin/test_p2p_forged_imm"
# the GIN table (plugin/gin) as NCCL's GIN proxy drives it
gd="$asan/tests/gindriver/gindriver --plugin $asan/.libs/libnccl-net-railnet.so"
san asan_gin_put_mesh_and_deregistered_window $gd --ranks 3 --rounds 2 mesh
san asan_gin_split_puts $gd --ranks 3 --rounds 2 --slot 1048576 --puts 4 mesh
san asan_gin_alltoall_rounds_on_both_ports $gd --ranks 3 --rounds 2 spread
san asan_gin_put_signal_order_and_sums $gd --ranks 3 --puts 16 --adds 16 --slot 4194304 signal
san asan_gin_deep_queue_selective_signaling env RAILNET_STATS=1 $gd --ranks 3 --puts 256 --slot 1048576 --rounds 1 deep
san asan_gin_failed_put_amid_unsignaled $gd flush
san asan_gin_rogue_handles $gd rogue
san asan_gin_rail_connection_and_foreign_handle env RAILNET_HANDSHAKE_TIMEOUT=10 $gd --ranks 8 --rails 4 rail
san asan_gin_peer_killed $gd --ranks 3 kill
san asan_gin_cq_overrun env RAILNET_GIN_SIGNAL_EVERY=1 $gd cq-overrun
# the RMA tables (NCCL 2.30): puts, signals, gets and flushes on contexts made
# and destroyed while others run; bad input; a killed peer
san asan_rma_v14_puts_signals_gets_flushes env RAILNET_GDR_FLUSH=2 $gd --rma-version 14 --ranks 3 --puts 64 --slot 1048576 rma
san asan_rma_v13_bad_input_refused $gd --rma-version 13 --ranks 2 rma-bad
san asan_gin_v13_peer_killed $gd --gin-version 13 --ranks 3 rma-kill
# the collComm's device async events: a port down with puts in flight, a
# flap before creation (ignored) and after (fails it), a QP fatal event
gd_retry="SOFTNIC_RETRY_MIN_MS=60000 SOFTNIC_RETRY_CAP_MS=60000"
san asan_gin_port_down_fails_the_collcomm env $gd_retry $gd port-down
san asan_gin_port_flap_before_creation_ignored env $gd_retry $gd port-flap
san asan_gin_qp_fatal_event_fails_the_collcomm $gd qp-fatal
# the GIN GDAKI type: the CPU consumer posting as NCCL's device
# code does, into DEVX queues in host memory; a bad rkey; a killed peer
san asan_gin_gdaki_cpu_consumer env RAILNET_GIN=gdaki RAILNET_GDAKI_QUEUE_MEM=host-devx $gd --ranks 3 --rounds 60 gdaki
san asan_gin_gdaki_bad_rkey env RAILNET_GIN=gdaki RAILNET_GDAKI_QUEUE_MEM=host-devx $gd gdaki-error
san asan_gin_gdaki_peer_killed env RAILNET_GIN=gdaki RAILNET_GDAKI_QUEUE_MEM=host-devx $gd --ranks 3 gdaki-kill
# the release thread of a failed context under posting threads that never abort
san asan_gin_gdaki_failed_context_released env RAILNET_GIN=gdaki RAILNET_GDAKI_QUEUE_MEM=host-devx \
    $gd --ranks 3 --rounds 100 --slot 4096 gdaki-release
# GDAKI contexts made and destroyed one by one on a collComm, and two
# failed ones released
san asan_gin_gdaki_contexts_come_and_go env RAILNET_GIN=gdaki RAILNET_GDAKI_QUEUE_MEM=host-devx \
    RAILNET_GIN_GDAKI_VERSION=200 $gd --ranks 3 --rounds 10 --gin-version 14 --contexts 2 gdaki-sets
san asan_gin_gdaki_failed_contexts_of_one_collcomm_released env RAILNET_GIN=gdaki RAILNET_GDAKI_QUEUE_MEM=host-devx \
    $gd --ranks 3 --rounds 100 --slot 4096 --gin-version 12 --sets 2 gdaki-release
# the DEVX QPs' completers and their peers' responders polling before they
# sleep (SOFTNIC_ACK_POLL_US; off by default on CI's two cores)
san asan_gin_gdaki_polling_threads env RAILNET_GIN=gdaki RAILNET_GDAKI_QUEUE_MEM=host-devx SOFTNIC_ACK_POLL_US=200 \
    $gd --ranks 3 --rounds 60 gdaki
# a forged GW_GDAKI message: refused by content, cut short, table keys
# refused after the last exchange (every error path of createContext)
san asan_gin_gdaki_forged_qp_message env RAILNET_GIN=gdaki RAILNET_GDAKI_QUEUE_MEM=host-devx RAILNET_HANDSHAKE_TIMEOUT=20 $gd gdaki-forged-qps
san asan_gin_gdaki_short_qp_message env RAILNET_GIN=gdaki RAILNET_GDAKI_QUEUE_MEM=host-devx RAILNET_HANDSHAKE_TIMEOUT=20 $gd gdaki-forged-short
# a GIN peer that resets mid-handshake, a bad request pointer, a garbled WIN
# (the collComm fails and its peer sockets are shut down)
san asan_gin_hostile_peers "$asan/tests/plugin/test_gin_hostile"
# ranks of both GIN types: the refused handshake's error paths on both sides
san asan_gin_gdaki_and_proxy_ranks_refused env RAILNET_GIN=gdaki RAILNET_GDAKI_QUEUE_MEM=host-devx \
    RAILNET_HANDSHAKE_TIMEOUT=20 $gd gdaki-mismatch
san asan_gin_gdaki_forged_table_keys env RAILNET_GIN=gdaki RAILNET_GDAKI_QUEUE_MEM=host-devx RAILNET_HANDSHAKE_TIMEOUT=20 $gd gdaki-forged-keys
# softnic's extended verbs (ibv_wr_* builder, cq_ex, rereg_mr) and its
# libmlx5 as NCCL 2.28.9 probes it
san asan_softnic_verbs_ex "$asan/tests/softnic/test_softnic_verbs_ex"
# completion queues: a small one two engines fill while it is polled and
# resized
san asan_softnic_cq "$asan/tests/softnic/test_softnic_cq"
san asan_softnic_nccl_gdaki_probe "$asan/tests/softnic/test_softnic_nccl_gdaki_probe"
# UD QPs: datagrams, GRH, drops, malformed datagrams from a raw socket
san asan_softnic_ud "$asan/tests/softnic/test_softnic_ud"
# the same-host fast path (process_vm_readv pulls, pins, killed peers)
san asan_softnic_fastpath "$asan/tests/softnic/test_softnic_fastpath"
# the same-host push (the shared region, refused writes, a peer's dereg
# racing our pushes)
san asan_softnic_push "$asan/tests/softnic/test_softnic_push"
# records forged in the push region, a pusher stopped inside a push, and
# the flush of a QP in ERR behind pushed completions
san asan_softnic_push_hostile "$asan/tests/softnic/test_softnic_push_hostile"
san asan_softnic_push_flush_order "$asan/tests/softnic/test_softnic_push_flush_order"
# send completions made by the requester's polls from the responder's
# notes (ack_note.c), beside READs and past the retry budget
san asan_softnic_ack_note "$asan/tests/softnic/test_softnic_ack_note"
# the engines: 128 QPs on a few threads, one engine shared by a stream and
# small writes, QPs destroyed while their steps are under way
san asan_softnic_engines "$asan/tests/softnic/test_softnic_engines"
# the GPU-initiated path's queue protocol on CPU posters: many posters,
# multi-BB inline WQEs and their span table, against fake_nic and softnic
san asan_gdaki_queue_protocol "$asan/tests/gdaki/test_gdaki_queue"
san asan_gdaki_on_softnic "$asan/tests/gdaki/test_gdaki_softnic"

if grep -q '^RAILNET_SAN_FLAGS = -fsanitize' "$top_builddir/Makefile" 2>/dev/null; then
    tap_skip valgrind_memcheck_traffic_clean "this build is itself instrumented with ASan, which valgrind cannot run (a plain build runs this case)"
elif command -v valgrind >/dev/null 2>&1; then
    out=$(LD_LIBRARY_PATH=$top_builddir/tests/softnic valgrind -q --trace-children=yes --error-exitcode=9 \
        "$top_builddir/tests/netdriver/netdriver" --plugin "$top_builddir/.libs/libnccl-net-railnet.so" \
        traffic --ranks 2 --iters 10 --max-size 256K 2>&1)
    if [ $? -eq 0 ] && printf '%s' "$out" | grep -q '^netdriver traffic: ok'; then tap_ok valgrind_memcheck_traffic_clean
    else tap_not_ok valgrind_memcheck_traffic_clean "$(printf '%s\n' "$out" | grep -v ' INFO ' | tail -n 25 | sed 's/^/# /')"; fi
else
    tap_skip valgrind_memcheck_traffic_clean "valgrind not installed (scripts/bootstrap installs it)"
fi
# softnic's own verbs tests under memcheck, as `make check` starts them: no
# LD_LIBRARY_PATH, so sntest_main() re-executes the program onto softnic
# (traced by --trace-children); each must pass and valgrind must say nothing.
# Not test_softnic_cq nor test_softnic_ack_note: their cases poll without
# yielding, and valgrind runs one thread at a time, so the NIC threads they
# wait for do not run
if grep -q '^RAILNET_SAN_FLAGS = -fsanitize' "$top_builddir/Makefile" 2>/dev/null; then
    tap_skip valgrind_memcheck_softnic_tests_clean "this build is itself instrumented with ASan, which valgrind cannot run (a plain build runs this case)"
elif command -v valgrind >/dev/null 2>&1; then
    st=0; out=
    for t in test_softnic_atomics test_softnic_mr test_softnic_verbs_ex test_softnic_engines test_softnic_ud test_softnic_nccl_gdaki_probe; do
        # valgrind runs softnic's NIC threads ~20x slower, beside make check's
        # other jobs: a retry budget that long cannot pass for a dead link
        o=$(env -u LD_LIBRARY_PATH SOFTNIC_RETRY_MIN_MS=20000 SOFTNIC_RETRY_CAP_MS=30000 \
            valgrind -q --trace-children=yes --error-exitcode=9 \
            "$top_builddir/tests/softnic/$t" 2>&1) || st=1
        printf '%s\n' "$o" | grep -q '^not ok' && st=1
        out="$out$t: $(printf '%s\n' "$o" | grep -v -e '^ok ' -e '^--[0-9]*-- ' | tail -n 12)
"
    done
    if [ $st -eq 0 ]; then tap_ok valgrind_memcheck_softnic_tests_clean
    else tap_not_ok valgrind_memcheck_softnic_tests_clean "$(printf '%s' "$out" | sed 's/^/# /')"; fi
else
    tap_skip valgrind_memcheck_softnic_tests_clean "valgrind not installed (scripts/bootstrap installs it)"
fi
tap_done
