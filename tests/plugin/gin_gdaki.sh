#!/bin/sh
# tests/plugin/gin_gdaki.sh: the GDAKI type of railnet's ncclGinPlugin_v11
# without a GPU: RAILNET_GIN=gdaki with RAILNET_GDAKI_QUEUE_MEM=host-devx puts
# every structure NCCL's device code reads in host memory, and
# tests/gindriver's gdaki subcommands post into the described queues from
# the CPU exactly as NCCL 2.28.9's device code does, on softnic (DEVX QPs,
# WAIT on a CQ, CQs ignoring overrun): byte-checked puts, exact signal and
# counter sums, rings wrapped; a bad rkey and a killed peer as errors, and
# kernels still spinning on a failed context ended by its destroyContext.
# Plus the type choice: the layout version check and its fallback, and a
# peer's GW_GDAKI message as untrusted input (gindriver gdaki-forged-KIND);
# a GDAKI collComm without proxy QPs, and ranks of both types refused; the
# QPs spread over both ports of the merged device, and a communicator's
# collComms take the ports in turn.
# The layouts of NCCL 2.29 (GIN v12: a context per contextId, table
# offsets) and 2.30 (GIN v14, RAILNET_GIN_GDAKI_VERSION=200: packed QP
# descriptors, get tracking by backend version): gindriver reads the device
# handle back as that NCCL's device code does, then posts through the last
# context.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
plugin_on_softnic
gd=$top_builddir/tests/gindriver/gindriver
[ -x "$gd" ] || tap_skip_all "gindriver not built"
tap_plan 39
out=$(mktemp); trap 'rm -f "$out"' EXIT
export RAILNET_GIN=gdaki RAILNET_GDAKI_QUEUE_MEM=host-devx

"$gd" --plugin "$plugin" probe >"$out" 2>&1
grep -q '^device 0: name=softnic0+softnic0 .*netDeviceType=3 netDeviceVersion=100 ' "$out" &&
    grep -q 'offering the GDAKI type (RAILNET_GIN=gdaki: GDAKI type, layout version 100, with every structure in host memory' "$out" &&
    tap_ok gdaki_offered_with_layout_version_100 || tap_not_ok gdaki_offered_with_layout_version_100 "$(cat "$out")"

# NCCL's device code of another layout version: refused, NCCL gets the proxy type
RAILNET_GIN_GDAKI_VERSION=101 "$gd" --plugin "$plugin" probe >"$out" 2>&1
grep -q 'WARN NET/railnet/GIN: RAILNET_GIN=gdaki: NCCL_GIN_GDAKI_VERSION mismatch: RAILNET_GIN_GDAKI_VERSION says the device code expects 101, railnet writes 100 and 200; offering the proxy type' "$out" &&
    grep -q 'netDeviceType=2 netDeviceVersion=0 ' "$out" &&
    tap_ok version_mismatch_warns_naming_both_and_falls_back_to_proxy ||
    tap_not_ok version_mismatch_warns_naming_both_and_falls_back_to_proxy "$(cat "$out")"

# auto: the GDAKI type needs a GPU (tests/gpu/gin_e2e.sh's railnet_auto
# checks that it gets it there); here, even with host-devx queues, the proxy
# type, said as INFO with the reason, no WARN
RAILNET_GIN=auto RAILNET_GDAKI_QUEUE_MEM=host-devx "$gd" --plugin "$plugin" probe >"$out" 2>&1
grep -q 'netDeviceType=2 ' "$out" && grep -q 'offering the proxy type (RAILNET_GIN=auto: no CUDA GPU (' "$out" &&
    ! grep -q 'WARN NET/railnet/GIN' "$out" &&
    tap_ok auto_without_a_gpu_offers_the_proxy_type_without_a_warn ||
    tap_not_ok auto_without_a_gpu_offers_the_proxy_type_without_a_warn "$(cat "$out")"

# GIN v14 offers what the process decided: layout 200 for NCCL 2.30
RAILNET_GIN_GDAKI_VERSION=200 "$gd" --plugin "$plugin" --gin-version 14 probe >"$out" 2>&1
grep -q '^device 0: name=softnic0+softnic0 .*netDeviceType=3 netDeviceVersion=200 ' "$out" &&
    grep -q '^ginProperties: strongSignals=1 vaSignals=1$' "$out" &&
    tap_ok gin_v14_offers_gdaki_with_layout_version_200_and_va_signals ||
    tap_not_ok gin_v14_offers_gdaki_with_layout_version_200_and_va_signals "$(cat "$out")"

tap_check gdaki_layout_100_nccl_2_29_three_contexts_byte_checked "$gd" --plugin "$plugin" --ranks 3 --rounds 20 \
    --gin-version 12 --contexts 3 gdaki
tap_check gdaki_layout_200_backend_2_two_contexts_byte_checked env RAILNET_GIN_GDAKI_VERSION=200 "$gd" --plugin "$plugin" \
    --ranks 3 --rounds 20 --gin-version 14 --contexts 2 gdaki
tap_check gdaki_layout_200_backend_1_byte_checked env RAILNET_GIN_GDAKI_VERSION=200 "$gd" --plugin "$plugin" --ranks 2 \
    --rounds 10 --gin-version 14 --backend 1 gdaki
tap_check gdaki_layout_200_alltoall_kernel_shape_4_ranks_rings_wrap env RAILNET_GIN_GDAKI_VERSION=200 "$gd" \
    --plugin "$plugin" --ranks 4 --rounds 40 --slot 4096 --gin-version 14 --contexts 2 gdaki-a2a
# NCCL's queue depth (GIN v14's config, GIN v12's connect) sizes the send
# rings: a small one wraps all the time under the alltoall kernel; an odd one
# is rounded up; none asked keeps 512 (the driver checks the rings' size in
# the device handle)
tap_check gdaki_queue_depth_16_rings_of_16_alltoall_byte_checked env RAILNET_GIN_GDAKI_VERSION=200 "$gd" \
    --plugin "$plugin" --ranks 3 --rounds 40 --slot 4096 --gin-version 14 --queue-depth 16 gdaki-a2a
tap_check gdaki_queue_depth_1000_rings_of_1024 env RAILNET_GIN_GDAKI_VERSION=200 "$gd" --plugin "$plugin" --ranks 2 \
    --rounds 10 --gin-version 14 --queue-depth 1000 gdaki
tap_check gdaki_no_queue_depth_rings_of_512 env RAILNET_GIN_GDAKI_VERSION=200 "$gd" --plugin "$plugin" --ranks 2 \
    --rounds 10 --gin-version 14 --queue-depth 0 gdaki
tap_check gdaki_v12_connect_queue_depth_128_layout_100_rings_of_128 "$gd" --plugin "$plugin" --ranks 2 --rounds 10 \
    --gin-version 12 --queue-depth 128 gdaki
# kernels built with an NCCL before 2.30.3 (backend 0): refused, as NCCL's own GDAKI refuses them
RAILNET_GIN_GDAKI_VERSION=200 "$gd" --plugin "$plugin" --ranks 2 --rounds 1 --gin-version 14 --backend 0 gdaki >"$out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q 'WARN NET/railnet/GIN: rank 0: createContext: GDAKI layout 200 with backend version 0: railnet writes' "$out" &&
    tap_ok gdaki_layout_200_backend_0_refused_with_a_warn ||
    tap_not_ok gdaki_layout_200_backend_0_refused_with_a_warn "rc=$rc $(cat "$out")"

# a GDAKI-type collComm holds no proxy QPs: every gdaki case checks that its
# connect made no QP, CQ or MR (softnic's live counts) and that the collComm
# has none; its connect says so, and the host's data path on it is refused
env NCCL_DEBUG=INFO "$gd" --plugin "$plugin" --ranks 2 --rounds 2 gdaki >"$out" 2>&1
rc=$?
[ $rc -eq 0 ] &&
    [ "$(grep -c 'rank [01] of 2 connected on softnic0: 0 QPs per peer, GDAKI type' "$out")" = 2 ] &&
    [ "$(grep -c '^rank [01]: iput, iputSignal, test and RMA createContext on the GDAKI collComm refused (ncclInvalidUsage)$' "$out")" = 2 ] &&
    grep -q 'WARN NET/railnet/GIN: rank 0: iput on a collComm of the GDAKI type, which has no proxy QPs' "$out" &&
    grep -q 'WARN NET/railnet/GIN: rank 1: RMA createContext on a collComm of the GDAKI type, which has no proxy QPs' "$out" &&
    tap_ok gdaki_collcomm_has_no_proxy_qps_and_refuses_the_host_data_path ||
    tap_not_ok gdaki_collcomm_has_no_proxy_qps_and_refuses_the_host_data_path "rc=$rc $(grep -v 'INFO' "$out" | tail -n 20)"
# ranks of different types (here rank 1 with RAILNET_GIN=proxy): the
# handshake refuses the pair, each side's WARN naming both, and both
# connects fail at once, not at RAILNET_HANDSHAKE_TIMEOUT
RAILNET_HANDSHAKE_TIMEOUT=60 "$gd" --plugin "$plugin" gdaki-mismatch >"$out" 2>&1
rc=$?
[ $rc -eq 0 ] &&
    grep -q 'WARN NET/railnet/GIN: rank 0: refusing a connection: rank 1 connects with proxy QPs (the proxy type, or an RMA table), this rank with no proxy QPs (the GDAKI type): every rank must offer NCCL the same GIN type' "$out" &&
    grep -q 'WARN NET/railnet/GIN: rank 1: rank 0 refused the connection: it connects with no proxy QPs (the GDAKI type), this rank with proxy QPs (the proxy type, or an RMA table)' "$out" &&
    [ "$(grep -c '^rank [01]: connect beside a rank of the other type refused (ncclInvalidUsage)' "$out")" = 2 ] &&
    tap_ok gdaki_and_proxy_ranks_refused_at_connect_each_warn_naming_both ||
    tap_not_ok gdaki_and_proxy_ranks_refused_at_connect_each_warn_naming_both "rc=$rc $(cat "$out")"
# the merged device's two ports both carry the QPs' traffic: a rank's own
# loop and its peer sit on different ports (port 1 alone halves a rate-
# limited device); with one port (RAILNET_MERGE_PORTS=0) port 2 stays idle
"$gd" --plugin "$plugin" --ranks 2 --rounds 20 gdaki >"$out" 2>&1
rc=$?
[ $rc -eq 0 ] && tap_ok gdaki_cpu_consumer_2_ranks_byte_checked ||
    tap_not_ok gdaki_cpu_consumer_2_ranks_byte_checked "rc=$rc $(tail -n 20 "$out")"
both=$(grep -c '^rank [01]: payload bytes sent: port 1 [1-9][0-9]*, port 2 [1-9][0-9]*$' "$out")
RAILNET_MERGE_PORTS=0 "$gd" --plugin "$plugin" --ranks 2 --rounds 20 gdaki >"$out.1" 2>&1
one=$(grep -c '^rank [01]: payload bytes sent: port 1 [1-9][0-9]*, port 2 0$' "$out.1")
[ "$both" = 2 ] && [ "$one" = 2 ] && tap_ok gdaki_qps_spread_over_both_ports_of_the_merged_device ||
    tap_not_ok gdaki_qps_spread_over_both_ports_of_the_merged_device "$(cat "$out" "$out.1")"
rm -f "$out.1"
# the collComms of one communicator (NCCL 2.28: one per GIN context) take
# the ports in turn: both ranks put a collComm's traffic on the same port,
# the second collComm on the other one
"$gd" --plugin "$plugin" gdaki-ports >"$out" 2>&1
p1=$(sed -n 's/^rank [01]: collComm 1: the put to rank [01] went on port \([12]\) .*/\1/p' "$out" | sort -u)
p2=$(sed -n 's/^rank [01]: collComm 2: the put to rank [01] went on port \([12]\) .*/\1/p' "$out" | sort -u)
[ "$(grep -c 'went on port [12] ' "$out")" = 4 ] && [ "$(echo $p1 | wc -w)" = 1 ] && [ "$(echo $p2 | wc -w)" = 1 ] &&
    [ "$p1" != "$p2" ] && tap_ok gdaki_collcomms_of_one_communicator_take_the_ports_in_turn ||
    tap_not_ok gdaki_collcomms_of_one_communicator_take_the_ports_in_turn "$(cat "$out")"
tap_check gdaki_cpu_consumer_3_ranks_byte_checked "$gd" --plugin "$plugin" --ranks 3 --rounds 50 gdaki
# 9 slots per peer per round: 200 rounds wrap the 512-slot rings 3 times
tap_check gdaki_cpu_consumer_4_ranks_rings_wrap "$gd" --plugin "$plugin" --ranks 4 --rounds 200 gdaki
# nccl-tests' GIN alltoall kernel: 16 threads a rank posting at once
# (barrier signals), kernels back to back, puts to self included
tap_check gdaki_alltoall_kernel_shape_2_ranks_30_kernels "$gd" --plugin "$plugin" --ranks 2 --rounds 30 --slot 65536 gdaki-a2a
tap_check gdaki_alltoall_kernel_shape_4_ranks_rings_wrap "$gd" --plugin "$plugin" --ranks 4 --rounds 40 --slot 4096 gdaki-a2a
# a port down is an error at once, not after the QP retry budget (60 s here);
# the failed context's teardown leaves its queues in place (a kernel may
# still spin on them) and says so, where the healthy rank's frees them
env NCCL_DEBUG=INFO SOFTNIC_RETRY_MIN_MS=60000 SOFTNIC_RETRY_CAP_MS=60000 "$gd" --plugin "$plugin" gdaki-port-down >"$out" 2>&1
rc=$?
kept='leaves its queues, signals and counters in place until the process exits'
[ $rc -eq 0 ] && grep -q '^rank 0: port 2 down: queryLastError reports it after' "$out" &&
    grep -q "rank 0: [a-zA-Z]* of a failed GDAKI context $kept" "$out" &&
    ! grep -q "rank 1: [a-zA-Z]* of a failed GDAKI context" "$out" &&
    tap_ok gdaki_port_down_reported_at_once_and_the_failed_context_kept ||
    tap_not_ok gdaki_port_down_reported_at_once_and_the_failed_context_kept "rc=$rc $(grep -v 'INFO' "$out" | tail -n 20)"
# NCCL asks queryLastError until one context of a communicator says so and
# then tears all of them down: the failure is the communicator's, so rank 0
# keeps both of its contexts (a kernel may spin on either), rank 1 neither
env NCCL_DEBUG=INFO "$gd" --plugin "$plugin" gdaki-group-fail >"$out" 2>&1
rc=$?
n0=$(grep -c "rank 0: [a-zA-Z]* of a failed GDAKI context $kept" "$out")
n1=$(grep -c "rank 1: [a-zA-Z]* of a failed GDAKI context" "$out")
[ $rc -eq 0 ] && [ "$n0" -eq 2 ] && [ "$n1" -eq 0 ] &&
    tap_ok gdaki_failure_of_one_context_keeps_every_context_of_the_communicator ||
    tap_not_ok gdaki_failure_of_one_context_keeps_every_context_of_the_communicator "rc=$rc kept on rank 0: $n0, rank 1: $n1 $(grep -v 'INFO' "$out" | tail -n 20)"
tap_check gdaki_bad_rkey_is_an_error_cqe_and_query_last_error "$gd" --plugin "$plugin" gdaki-error
tap_check gdaki_killed_peer_is_an_error_not_a_hang "$gd" --plugin "$plugin" --ranks 3 gdaki-kill
# NCCL 2.28's device code has no abort: after a peer dies, destroyContext
# must end the kernels still spinning on the failed context (16 CTAs a rank,
# 200 queued kernels) within 10 s, or ncclCommAbort never returns; then the
# plugin is unloaded as NCCL does, and the rank must live on 3 s (the
# release thread must not run in unmapped code)
tap_check gdaki_failed_context_destroy_ends_the_spinning_kernels "$gd" --plugin "$plugin" --ranks 3 --rounds 200 \
    --slot 4096 gdaki-release
# NCCL 2.29 waits for the application's stream in ncclDevCommDestroy before
# any destroyContext: the error reported by queryLastError must end them
tap_check gdaki_error_reported_ends_the_spinning_kernels_before_any_destroy "$gd" --plugin "$plugin" --ranks 3 \
    --rounds 200 --slot 4096 gdaki-release-query

# NCCL 2.30 calls createContext once per device communicator on the same
# collComms: three GDAKI contexts of different shapes on one collComm, two
# in use at once (interleaved), destroyed in another order than made; the
# bytes and every signal word of each context exact; a fourth left to
# closeColl, which frees it and says so
RAILNET_GIN_GDAKI_VERSION=200 "$gd" --plugin "$plugin" --ranks 3 --rounds 20 --gin-version 14 --contexts 2 \
    gdaki-sets >"$out" 2>&1
rc=$?
n=$(grep -c 'WARN NET/railnet/GIN: device softnic0, rank [0-2]: closeColl with 1 GDAKI context(s) not destroyed' "$out")
[ $rc -eq 0 ] && [ "$n" -eq 3 ] &&
    tap_ok gdaki_layout_200_three_contexts_on_one_collcomm_come_and_go_a_fourth_freed_by_close_coll ||
    tap_not_ok gdaki_layout_200_three_contexts_on_one_collcomm_come_and_go_a_fourth_freed_by_close_coll \
        "rc=$rc, closeColl WARNs: $n $(tail -n 20 "$out")"
tap_check gdaki_layout_100_three_contexts_on_one_collcomm_come_and_go "$gd" --plugin "$plugin" --ranks 3 --rounds 20 \
    --gin-version 12 gdaki-sets
tap_check gdaki_layout_200_alltoall_kernels_on_three_contexts_of_one_collcomm_at_once env RAILNET_GIN_GDAKI_VERSION=200 \
    "$gd" --plugin "$plugin" --ranks 3 --rounds 20 --slot 4096 --gin-version 14 --sets 3 gdaki-a2a
# a peer killed under kernels spinning on two contexts of one collComm:
# each context reports it, and each one's destroyContext ends its kernels
# (layout 100: the CPU kernels post on the plugin's own descriptors, which
# the release advances; layout 200's are read through copies)
tap_check gdaki_failed_contexts_of_one_collcomm_each_destroy_ends_its_kernels "$gd" --plugin "$plugin" --ranks 3 \
    --rounds 200 --slot 4096 --gin-version 12 --sets 2 gdaki-release

# A forged GW_GDAKI message from rank 2 to rank 0: rank 0 refuses it with a
# WARN saying why, and rank 1 learns that rank 0 failed from the exchange
# that follows, not from its deadline (a short RAILNET_HANDSHAKE_TIMEOUT:
# a timeout is a failure here, and quick).
forged() {
    kind=$1 want=$2
    RAILNET_HANDSHAKE_TIMEOUT=10 "$gd" --plugin "$plugin" "gdaki-forged-$kind" >"$out" 2>&1
    rc=$?
    [ $rc -eq 0 ] && grep -q "WARN NET/railnet/GIN: rank 0: .*rank 2.*$want" "$out" &&
        grep -q 'WARN NET/railnet/GIN: rank 1: GDAKI exchange 1: rank 0 failed its part' "$out" &&
        ! grep -q 'timed out' "$out" &&
        tap_ok "gdaki_forged_qp_message_${kind}_refused_and_every_rank_fails" ||
        tap_not_ok "gdaki_forged_qp_message_${kind}_refused_and_every_rank_fails" "rc=$rc $(cat "$out")"
}
forged qps 'carries 2 QPs, expected exactly 1'
forged link 'is on link layer'
forged ranks 'claims 2 -> 1 of 3 ranks'
forged crc 'checksum'
forged type 'message type 4, expected 5'
forged short 'the peer closed the connection'
# the table keys come in the last exchange: rank 0 refuses them, rank 1,
# with nothing left to hear from rank 0, has its context
RAILNET_HANDSHAKE_TIMEOUT=10 "$gd" --plugin "$plugin" gdaki-forged-keys >"$out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q 'WARN NET/railnet/GIN: rank 0: the GDAKI table keys of rank 2 (0x10000000000, 0x10000000000, 0x0) are not 32-bit rkeys' "$out" &&
    grep -q '^rank 0: createContext refused' "$out" &&
    tap_ok gdaki_forged_table_keys_wider_than_32_bits_refused ||
    tap_not_ok gdaki_forged_table_keys_wider_than_32_bits_refused "rc=$rc $(cat "$out")"
