#!/bin/sh
# tests/plugin/gin_proxy.sh: railnet's ncclGinPlugin_v11 (proxy type) as
# NCCL 2.28's GIN proxy drives it, on softnic, through tests/gindriver:
# properties and RAILNET_GIN; a full mesh of 2..8 processes of iput with
# random sizes and offsets, byte-checked; a deep queue; iputSignal ordering
# and exact INC/ADD sums (needs softnic's RDMA atomics); rogue handles; a
# killed peer.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
plugin=$top_builddir/.libs/libnccl-net-railnet.so
gd=$top_builddir/tests/gindriver/gindriver
[ -f "$plugin" ] || tap_skip_all "plugin not built"
[ -x "$gd" ] || tap_skip_all "gindriver not built"
export LD_LIBRARY_PATH=$top_builddir/tests/softnic${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
tap_plan 14
out=$(mktemp); trap 'rm -f "$out"' EXIT

"$gd" --plugin "$plugin" probe >"$out" 2>&1
if grep -q '^init: 0$' "$out" && grep -q '^device 0: name=softnic0 .*maxRecvs=8 netDeviceType=2 ' "$out" &&
   grep -q 'offering the proxy type (RAILNET_GIN=auto: the GDAKI type is not built yet)' "$out"; then
    tap_ok auto_offers_the_proxy_type_and_says_why
else tap_not_ok auto_offers_the_proxy_type_and_says_why "$(cat "$out")"; fi

RAILNET_GIN=off "$gd" --plugin "$plugin" probe >"$out" 2>&1
grep -q '^init: 5$' "$out" && grep -q 'RAILNET_GIN=off: railnet offers NCCL no GIN' "$out" &&
    tap_ok gin_off_makes_init_fail || tap_not_ok gin_off_makes_init_fail "$(cat "$out")"

RAILNET_GIN=gdaki "$gd" --plugin "$plugin" probe >"$out" 2>&1
grep -q 'WARN NET/railnet/GIN: RAILNET_GIN=gdaki: the GDAKI type is not available' "$out" &&
    grep -q 'netDeviceType=2 ' "$out" && tap_ok gin_gdaki_warns_and_offers_proxy ||
    tap_not_ok gin_gdaki_warns_and_offers_proxy "$(cat "$out")"

RAILNET_GIN=bogus "$gd" --plugin "$plugin" probe >"$out" 2>&1
grep -q 'RAILNET_GIN=bogus is not valid (accepted: auto, proxy, gdaki or off)' "$out" && grep -q '^init: 0$' "$out" &&
    tap_ok bad_gin_value_warns_and_uses_auto || tap_not_ok bad_gin_value_warns_and_uses_auto "$(cat "$out")"

# full mesh of puts: every byte of every window checked, then a put naming
# a deregistered window is refused
for n in 2 5 8; do
    tap_check "iput_full_mesh_${n}_ranks_byte_checked" "$gd" --plugin "$plugin" --ranks $n --seed $((n * 77)) mesh
done
# puts up to 1 MiB: those of RAILNET_SPLIT_MIN (128 KiB) or more are cut
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

"$gd" --plugin "$plugin" rogue >"$out" 2>&1
if grep -q '^rogue: PASS' "$out" && grep -q 'is not this listener.s: wrong rank or rank count' "$out" &&
   grep -q 'handle magic 0x[0-9a-f]*, expected' "$out" && grep -q 'handle protocol version 99' "$out" &&
   grep -q 'refusing a connection: it addresses rank 0 with nonce .*(stale or foreign handle)' "$out" &&
   grep -q 'refusing a connection: it has 3 ranks, this job 2' "$out"; then
    tap_ok rogue_handles_refused_with_warn_and_job_still_connects
else tap_not_ok rogue_handles_refused_with_warn_and_job_still_connects "$(grep -v 'NCCL INFO' "$out")"; fi

"$gd" --plugin "$plugin" --ranks 3 kill >"$out" 2>&1
if grep -q '^kill: PASS' "$out" && [ "$(grep -c 'reported as error 6 (remote error), queryLastError agrees' "$out")" = 2 ]; then
    tap_ok killed_peer_is_a_remote_error_not_a_hang
else tap_not_ok killed_peer_is_a_remote_error_not_a_hang "$(grep -v 'NCCL INFO' "$out")"; fi
tap_done
