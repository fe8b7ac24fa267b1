#!/bin/sh
# tests/plugin/gin_proxy.sh: railnet's ncclGinPlugin_v11 (proxy type) as
# NCCL 2.28's GIN proxy drives it, on softnic, through tests/gindriver:
# properties and RAILNET_GIN; a full mesh of 2..8 processes of iput with
# random sizes and offsets, byte-checked; an alltoall's rounds of small puts
# on both ports; a deep queue; iputSignal ordering
# and exact INC/ADD sums (needs softnic's RDMA atomics); deep queues with
# selective signaling counted (RAILNET_STATS=1); a failed put amid unsignaled
# ones; rogue handles; NCCL's RAIL connection type (connect per rail); a
# killed peer; an overrun CQ; a port down, a port
# flap before creation, a QP's fatal event (the device's async events).
# NCCL 2.29's table (ncclGinPlugin_v12, --gin-version 12): the same mesh,
# signal and kill cases through it.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
plugin_on_softnic
gd=$top_builddir/tests/gindriver/gindriver
[ -x "$gd" ] || tap_skip_all "gindriver not built"
tap_plan 33
out=$(mktemp); trap 'rm -f "$out"' EXIT

"$gd" --plugin "$plugin" probe >"$out" 2>&1
if grep -q '^init: 0$' "$out" && grep -q '^device 0: name=softnic0+softnic0 .*maxRecvs=8 netDeviceType=2 ' "$out" &&
   grep -q 'offering the proxy type (RAILNET_GIN=auto: no CUDA GPU (' "$out"; then
    tap_ok auto_offers_the_proxy_type_and_says_why
else tap_not_ok auto_offers_the_proxy_type_and_says_why "$(cat "$out")"; fi

RAILNET_GIN=off "$gd" --plugin "$plugin" probe >"$out" 2>&1
grep -q '^init: 5$' "$out" && grep -q 'RAILNET_GIN=off: railnet offers NCCL no GIN' "$out" &&
    tap_ok gin_off_makes_init_fail || tap_not_ok gin_off_makes_init_fail "$(cat "$out")"

# the GDAKI type without a GPU (and without the CPU-consumer mode) is refused
# with the reason (tests/plugin/gin_gdaki.sh tests the GDAKI type itself)
RAILNET_GIN=gdaki RAILNET_GDAKI_QUEUE_MEM=host "$gd" --plugin "$plugin" probe >"$out" 2>&1
grep -q 'WARN NET/railnet/GIN: RAILNET_GIN=gdaki: no CUDA GPU' "$out" &&
    grep -q 'netDeviceType=2 ' "$out" && tap_ok gin_gdaki_without_a_gpu_warns_and_offers_proxy ||
    tap_not_ok gin_gdaki_without_a_gpu_warns_and_offers_proxy "$(cat "$out")"

RAILNET_GIN=bogus "$gd" --plugin "$plugin" probe >"$out" 2>&1
grep -q 'RAILNET_GIN=bogus is not valid (accepted: auto, proxy, gdaki or off)' "$out" && grep -q '^init: 0$' "$out" &&
    tap_ok bad_gin_value_warns_and_uses_auto || tap_not_ok bad_gin_value_warns_and_uses_auto "$(cat "$out")"

# full mesh of puts: every byte of every window checked, then a put naming
# a deregistered window is refused
for n in 2 5 8; do
    tap_check "iput_full_mesh_${n}_ranks_byte_checked" "$gd" --plugin "$plugin" --ranks $n --seed $((n * 77)) mesh
done
# an alltoall's rounds (one put below RAILNET_SPLIT_MIN to every peer): each
# rank's puts of a round on both ports of the merged device
for n in 3 4; do
    tap_check "iput_alltoall_round_takes_both_ports_${n}_ranks" "$gd" --plugin "$plugin" --ranks $n --rounds 4 spread
done
# --seed takes any 64-bit value but only whole: strtoull read "12x" as 12
# (a refusal exits 2 before the plugin is loaded)
st1=0; st2=0
"$gd" --plugin "$plugin" --seed 12x probe >"$out" 2>&1 || st1=$?
grep -q "^gindriver: bad value '12x' for --seed" "$out" || st1=x$st1
"$gd" --plugin "$plugin" --seed 0xffffffffffffffff probe >"$out" 2>&1 || st2=$?
[ "$st1" = 2 ] && [ $st2 -eq 0 ] && grep -q '^init: 0$' "$out" &&
    tap_ok gindriver_seed_whole_up_to_2_64_or_refused ||
    tap_not_ok gindriver_seed_whole_up_to_2_64_or_refused "exit $st1/$st2; $(tail -n 3 "$out" | tr '\n' ' ')"
# puts up to 1 MiB: those of RAILNET_SPLIT_MIN (64 KiB) or more are cut
# over both ports' QPs
tap_check iput_split_over_both_ports_4_ranks_byte_checked "$gd" --plugin "$plugin" --ranks 4 --slot 4194304 --puts 8 mesh
# 700 puts per peer per round with NCCL's queue depth (256 per rank) in
# flight: never refused; with 700 in flight the plugin says "try again" (a
# NULL request) past 256 and the puts still all land
"$gd" --plugin "$plugin" --ranks 3 --puts 700 --slot 262144 --rounds 2 mesh >"$out" 2>&1
grep -q '^mesh: PASS' "$out" && [ "$(grep -c 'up to 256 in flight per peer; plugin said try again 0 times' "$out")" = 3 ] &&
    tap_ok iput_nccls_queue_depth_never_refused || tap_not_ok iput_nccls_queue_depth_never_refused "$(grep -v 'NCCL INFO' "$out")"
"$gd" --plugin "$plugin" --ranks 3 --puts 700 --queue 700 --slot 262144 --rounds 2 mesh >"$out" 2>&1
grep -q '^mesh: PASS' "$out" && grep -q 'up to 700 in flight per peer; plugin said try again [1-9]' "$out" &&
    tap_ok iput_beyond_the_queue_returns_no_request_then_lands ||
    tap_not_ok iput_beyond_the_queue_returns_no_request_then_lands "$(grep -v 'NCCL INFO' "$out")"

# iputSignal: needs RDMA fetch-and-add in softnic; without it the driver
# says so and the case fails (it is not skipped: GIN needs atomics)
tap_check iput_signal_order_and_exact_sums_4_ranks "$gd" --plugin "$plugin" --ranks 4 --puts 200 --slot 1048576 signal
tap_check iput_signal_after_split_puts_3_ranks "$gd" --plugin "$plugin" --ranks 3 --puts 20 --slot 4194304 signal

# deep queues: every put of a round posted before the first test (256 per
# peer, then 300 with the plugin saying try again past NCCL's 256), 1 in 16
# with an ADD signal; bytes and sums exact; the plugin's counters show far
# fewer signaled work requests than posted, one completion per signaled one
for spec in "4 256" "3 300"; do
    set -- $spec
    RAILNET_STATS=1 "$gd" --plugin "$plugin" --ranks $1 --puts $2 --slot 1048576 --rounds 3 deep >"$out" 2>&1
    if grep -q '^deep: PASS' "$out" && [ "$(grep -c 'signal sums exact' "$out")" = $1 ] &&
       [ "$(grep -c 'completions polled$' "$out")" = $1 ]; then
        tap_ok "deep_queue_${2}_per_peer_${1}_ranks_selective_signaling"
        grep 'completions polled$' "$out" | head -n 1 | sed 's/^/# /' 
    else tap_not_ok "deep_queue_${2}_per_peer_${1}_ranks_selective_signaling" "$(grep -v 'NCCL INFO' "$out")"; fi
done
# every work request signaled (RAILNET_GIN_SIGNAL_EVERY=1, the bench's
# baseline): the data still checks, the counters say 100% (2 rounds x 3
# peers x 256 puts, 1 in 16 with an atomic: 1632 work requests) and the
# driver's signaled-share check trips, as it must
RAILNET_STATS=1 RAILNET_GIN_SIGNAL_EVERY=1 "$gd" --plugin "$plugin" --ranks 3 --puts 256 --slot 1048576 --rounds 2 deep >"$out" 2>&1
if [ "$(grep -c 'signal sums exact' "$out")" = 3 ] &&
   grep -q 'rank 0: 1632 work requests posted (0 completion markers), 1632 signaled (100.0%), 1632 completions polled' "$out" &&
   grep -q 'more than a quarter of the work requests were signaled' "$out" && grep -q '^deep: FAIL' "$out"; then
    tap_ok deep_queue_every_work_request_signaled_is_counted
else tap_not_ok deep_queue_every_work_request_signaled_is_counted "$(grep -v 'NCCL INFO' "$out")"; fi
# a put into a window the target deregistered, amid 200 mostly unsignaled
# puts: it and the work requests its error flushed fail; every put reported
# done landed; nothing hangs
"$gd" --plugin "$plugin" flush >"$out" 2>&1
if grep -q '^flush: PASS' "$out" && grep -q 'IBV_WC_REM_ACCESS_ERR' "$out" && grep -q 'puts reported done landed' "$out"; then
    tap_ok failed_unsignaled_puts_fail_their_requests_done_ones_landed
    grep '^rank 0: 200 puts' "$out" | sed 's/^/# /' 
else tap_not_ok failed_unsignaled_puts_fail_their_requests_done_ones_landed "$(grep -v 'NCCL INFO' "$out")"; fi

"$gd" --plugin "$plugin" rogue >"$out" 2>&1
if grep -q '^rogue: PASS' "$out" && grep -q 'is not this listener.s: wrong rank or rank count' "$out" &&
   grep -q 'handle magic 0x[0-9a-f]*, expected' "$out" && grep -q 'handle protocol version 99' "$out" &&
   grep -q 'refusing a connection: it addresses rank 0 with nonce .*(stale or foreign handle)' "$out" &&
   grep -q 'refusing a connection: it has 3 ranks, this job 2' "$out"; then
    tap_ok rogue_handles_refused_with_warn_and_job_still_connects
else tap_not_ok rogue_handles_refused_with_warn_and_job_still_connects "$(grep -v 'NCCL INFO' "$out")"; fi

# NCCL's RAIL connection type (NCCL_CROSS_NIC=0): 8 ranks as nodes of 4 and
# of 2 local ranks connect with only their rail's handles: their QPs are the
# rail's (a quarter, a half of FULL's 16), puts with signals by rail rank
# land; rail 0's first rank given the next local rank's handle (another
# rail's) refuses the rank whose slot it took (ncclRemoteError at once), the
# rest of rail 0 gives up at RAILNET_HANDSHAKE_TIMEOUT (one WARN each), and
# nobody else warns: the foreign rank is never contacted
for rails in 4 2; do
    m=$((8 / rails))
    RAILNET_HANDSHAKE_TIMEOUT=10 "$gd" --plugin "$plugin" --ranks 8 --rails $rails rail >"$out" 2>&1
    if grep -q '^rail: PASS' "$out" &&
       [ "$(grep -c "QPs only towards the $m ranks of its rail: $((16 * m / 8)), FULL 16$" "$out")" = 8 ] &&
       [ "$(grep -c "puts with ADD signals to each of the $m ranks of its rail (by rail rank) byte-checked, sums exact" "$out")" = $((16 - m)) ] &&
       grep -q "WARN NET/railnet/GIN: rank 0: refusing a connection: it claims rank $((m - 1)) with nonce 0x[0-9a-f]*, which is not the handle given for that rank" "$out" &&
       grep -q "WARN NET/railnet/GIN: rank $((m - 1)): rank 0 refused the connection: the handle, rank or rank count is not of the listener's job" "$out" &&
       [ "$(grep -c 'higher rank(s) did not connect within RAILNET_HANDSHAKE_TIMEOUT=10 s' "$out")" = $((m - 1)) ] &&
       [ "$(grep -c 'WARN' "$out")" = $((m + 1)) ] &&
       grep -q "^rank 0: rail 0 failed on all $m ranks (rank $((8 - rails)) refused first" "$out"; then
        tap_ok "gin_rail_connection_${rails}_ranks_a_node_qps_only_towards_the_rail_foreign_handle_refused"
        grep '^rank 0: ' "$out" | sed 's/^/# /'
    else tap_not_ok "gin_rail_connection_${rails}_ranks_a_node_qps_only_towards_the_rail_foreign_handle_refused" \
        "$(grep -v 'NCCL INFO' "$out")"; fi
done

"$gd" --plugin "$plugin" --ranks 3 kill >"$out" 2>&1
if grep -q '^kill: PASS' "$out" && [ "$(grep -c 'reported as error 6 (remote error), queryLastError agrees' "$out")" = 2 ]; then
    tap_ok killed_peer_is_a_remote_error_not_a_hang
else tap_not_ok killed_peer_is_a_remote_error_not_a_hang "$(grep -v 'NCCL INFO' "$out")"; fi

# rank 0's collComm CQ shrunk to one entry (ibv_resize_cq) overruns under
# its puts: IBV_EVENT_CQ_ERR fails the collComm with one WARN, no hang
RAILNET_GIN_SIGNAL_EVERY=1 "$gd" --plugin "$plugin" cq-overrun >"$out" 2>&1
if grep -q '^cq-overrun: PASS' "$out" && [ "$(grep -c 'WARN' "$out")" = 1 ] &&
   grep -q "WARN NET/railnet/GIN: device softnic0, rank 0: IBV_EVENT_CQ_ERR on the collComm's CQ of 1 entries: the CQ overran and completions were lost" "$out"; then
    tap_ok cq_overrun_fails_the_collcomm_with_one_warn
else tap_not_ok cq_overrun_fails_the_collcomm_with_one_warn "$(grep -v 'NCCL INFO' "$out")"; fi

# the collComm's device async events (plugin/ib errors.c's watch), with a
# QP retry budget of 60 s: failed completions alone would come far later
# than the 20 s the driver allows
retry60="SOFTNIC_RETRY_MIN_MS=60000 SOFTNIC_RETRY_CAP_MS=60000"
# fails_under_puts CMD CASE WARN: gindriver CMD fails rank 0's collComm
# under puts with exactly one WARN, which holds WARN, and every later call
# returns the error
fails_under_puts() {
    env $retry60 "$gd" --plugin "$plugin" "$1" >"$out" 2>&1
    if grep -q "^$1: PASS" "$out" && [ "$(grep -c 'WARN' "$out")" = 1 ] && grep -qF "$3" "$out" &&
       grep -q 'rank 0: later iput, iputSignal, ginProgress and test ([0-9]* pending) return 2' "$out"; then
        tap_ok "$2"
    else tap_not_ok "$2" "$(grep -v 'NCCL INFO' "$out")"; fi
}
fails_under_puts port-down port_down_under_puts_fails_the_collcomm_with_one_warn_before_the_retry_budget \
    'WARN NET/railnet/GIN: device softnic0 port 2, rank 0: IBV_EVENT_PORT_ERR (port went down); failing the GIN comm'
# the whole device failing: the WARN names IBV_EVENT_DEVICE_FATAL, not a port
fails_under_puts device-fatal device_fatal_under_puts_fails_the_collcomm_with_one_warn_naming_it \
    'WARN NET/railnet/GIN: device softnic0, rank 0: IBV_EVENT_DEVICE_FATAL (the device failed'
# down and up before connect: the collComm works; the same flap after
# creation (nothing in flight) fails it, with the one WARN
env $retry60 "$gd" --plugin "$plugin" port-flap >"$out" 2>&1
if grep -q '^port-flap: PASS' "$out" && grep -q 'a collComm created after the flap moved puts over both ports' "$out" &&
   [ "$(grep -c 'WARN' "$out")" = 1 ] &&
   grep -q 'WARN NET/railnet/GIN: device softnic0 port 2, rank 0: IBV_EVENT_PORT_ERR (port went down)' "$out"; then
    tap_ok port_flap_before_creation_does_not_fail_the_collcomm_one_after_does
else tap_not_ok port_flap_before_creation_does_not_fail_the_collcomm_one_after_does "$(grep -v 'NCCL INFO' "$out")"; fi
# a put into a deregistered window: the target's QP (the responder) gets
# IBV_EVENT_QP_ACCESS_ERR; the target's idle collComm fails naming it
"$gd" --plugin "$plugin" qp-fatal >"$out" 2>&1
if grep -q '^qp-fatal: PASS' "$out" && [ "$(grep -c 'WARN' "$out")" = 2 ] &&
   grep -q 'WARN NET/railnet/GIN: device softnic0 port [12], rank 1: QP 0x[0-9a-f]* towards rank 0: IBV_EVENT_QP_ACCESS_ERR; failing the GIN comm' "$out"; then
    tap_ok qp_fatal_event_fails_the_idle_collcomm_naming_the_qp
else tap_not_ok qp_fatal_event_fails_the_idle_collcomm_naming_the_qp "$(grep -v 'NCCL INFO' "$out")"; fi
tap_done

# ncclGinPlugin_v12 (NCCL 2.29): properties, a mesh, signals, a killed peer
"$gd" --gin-version 12 --plugin "$plugin" probe >"$out" 2>&1
grep -q '^init: 0$' "$out" && grep -q '^device 0: name=softnic0+softnic0 .*maxRecvs=8 netDeviceType=2 ' "$out" &&
    tap_ok gin_v12_offers_the_proxy_type || tap_not_ok gin_v12_offers_the_proxy_type "$(cat "$out")"
tap_check gin_v12_iput_full_mesh_4_ranks_byte_checked "$gd" --gin-version 12 --plugin "$plugin" --ranks 4 mesh
tap_check gin_v12_iput_signal_order_and_exact_sums_3_ranks "$gd" --gin-version 12 --plugin "$plugin" --ranks 3 \
    --puts 100 --slot 1048576 signal
"$gd" --gin-version 12 --plugin "$plugin" --ranks 3 kill >"$out" 2>&1
if grep -q '^kill: PASS' "$out" && [ "$(grep -c 'reported as error 6 (remote error), queryLastError agrees' "$out")" = 2 ]; then
    tap_ok gin_v12_killed_peer_is_a_remote_error
else tap_not_ok gin_v12_killed_peer_is_a_remote_error "$(grep -v 'NCCL INFO' "$out")"; fi

# ncclGinPlugin_v14 (NCCL 2.30): the type this process decided (here, with
# no GPU, RAILNET_GIN=auto: the proxy type; the GDAKI type of layout 200 is
# tests/plugin/gin_gdaki.sh's), strong signals, no VA signals
RAILNET_GIN=auto RAILNET_GDAKI_QUEUE_MEM=host-devx "$gd" --gin-version 14 --plugin "$plugin" probe >"$out" 2>&1
grep -q '^init: 0$' "$out" && grep -q '^device 0: name=softnic0+softnic0 .*netDeviceType=2 netDeviceVersion=0 ' "$out" &&
    grep -q '^ginProperties: strongSignals=1 vaSignals=0$' "$out" &&
    tap_ok gin_v14_proxy_type_strong_signals_no_va || tap_not_ok gin_v14_proxy_type_strong_signals_no_va "$(cat "$out")"
