#!/bin/sh
# tests/plugin/gin_rma.sh: railnet's RMA tables (ncclRmaPlugin_v14, _v13)
# and ncclGinPlugin_v13, driven on softnic by tests/gindriver as NCCL 2.30's
# proxies drive them (--rma-version; --gin-version 13 drives the GIN v13
# table as NCCL 2.30.4's GIN proxy does): properties; puts, puts with
# signal (strong: no signal before its context's data), signal-only adds,
# gets and flushes on two contexts, NCCL's queue depth in flight per
# context and peer and never refused, contexts made and destroyed on
# another thread meanwhile, also beside the GIN table's GDAKI type; bad configs and operations refused with one
# WARN each; a killed peer.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
plugin_on_softnic
gd=$top_builddir/tests/gindriver/gindriver
[ -x "$gd" ] || tap_skip_all "gindriver not built"
tap_plan 13
out=$(mktemp); trap 'rm -f "$out"' EXIT
quiet() { grep -v 'NCCL INFO' "$out"; }

# every table: the proxy type, every entry NCCL calls set; only the GIN
# table says why it offers no GDAKI type (an RMA table is of the proxy type)
for t in "--rma-version 14:rma_v14" "--rma-version 13:rma_v13" "--gin-version 13:gin_v13"; do
    args=${t%%:*}; name=${t#*:}
    RAILNET_GIN=gdaki RAILNET_GDAKI_QUEUE_MEM=host-devx "$gd" $args --plugin "$plugin" probe >"$out" 2>&1
    said=0; grep -q 'offers the proxy type only' "$out" && said=1
    want=0; [ "$name" = gin_v13 ] && want=1
    if grep -q '^init: 0$' "$out" && grep -q '^device 0: name=softnic0+softnic0 .*maxRecvs=8 netDeviceType=2 netDeviceVersion=0 ' "$out" &&
       grep -q '^rma: createContext: set, iput: set, iputSignal: set, iget: set, iflush: set, test: set, progress: set, queryLastError: set$' "$out" &&
       [ $said = $want ]; then
        tap_ok "${name}_offers_the_proxy_type_with_every_entry"
    else tap_not_ok "${name}_offers_the_proxy_type_with_every_entry" "$(cat "$out")"; fi
done

# the data path: 3 ranks, 300 puts per peer and context with NCCL's 256 in
# flight (512 per peer over both contexts), gets of 1 MiB split over both
# ports; host memory needs no flush (no request)
# rma_case NAME FLUSH ENV ARGS...: gindriver rma (in environment ENV)
# passes on 3 ranks, every rank saying so for puts, gets and flushes
# (FLUSH: what each flush said)
rma_case() {
    name=$1; flush=$2; envs=$3; shift 3
    env $envs "$gd" --plugin "$plugin" --ranks 3 --puts 300 --slot 1M "$@" rma >"$out" 2>&1
    if grep -q '^rma: PASS' "$out" &&
       [ "$(grep -c 'up to 256 in flight per peer and context, never refused; no signal before the data' "$out")" = 3 ] &&
       [ "$(grep -c 'signal-only INC/ADD on 2 contexts from 3 ranks: sum exact' "$out")" = 3 ] &&
       [ "$(grep -c '300 gets per peer on each of 2 contexts and one of 1048576 bytes per peer: every byte checked' "$out")" = 3 ] &&
       [ "$(grep -c "iflush naming rank [0-9] on context [01]: $flush" "$out")" = 6 ] && ! grep -q WARN "$out"; then
        tap_ok "$name"
    else tap_not_ok "$name" "$(quiet)"; fi
}
rma_case rma_v14_puts_signals_gets_3_ranks_2_contexts_nccls_depth 'no request (nothing to flush)' '' --rma-version 14
rma_case gin_v13_as_nccl_2_30_4_drives_it_3_ranks 'no request (nothing to flush)' '' --gin-version 13
# NCCL 2.30.7 with RAILNET_GIN=gdaki: the GIN table offers the GDAKI type
# (whose collComms have no proxy QPs), the RMA table's collComm keeps its
# QPs and its data path
rma_case rma_v14_beside_the_gdaki_type_3_ranks 'no request (nothing to flush)' \
    'RAILNET_GIN=gdaki RAILNET_GDAKI_QUEUE_MEM=host-devx' --rma-version 14
[ "$(grep -c "beside the GIN table's GDAKI type, the RMA collComm has 2 proxy QPs per peer" "$out")" = 3 ] &&
    tap_ok rma_v14_collcomm_beside_the_gdaki_type_has_its_proxy_qps ||
    tap_not_ok rma_v14_collcomm_beside_the_gdaki_type_has_its_proxy_qps "$(quiet)"
# RAILNET_GDR_FLUSH=2 flushes host memory too: the flush is a READ that completes
rma_case rma_v13_flush_is_a_read_that_completes 'a request, completed' RAILNET_GDR_FLUSH=2 --rma-version 13

# bad input: each refusal ncclInvalidArgument with exactly one WARN, the
# context still working after them, a context outliving its collComm
for v in 14 13; do
    "$gd" --plugin "$plugin" --rma-version $v --ranks 2 rma-bad >"$out" 2>&1
    nref=$(grep -c 'refused:' "$out"); nwarn=$(grep -c 'NCCL WARN' "$out")
    if grep -q '^rma-bad: PASS' "$out" && [ "$nref" = "$nwarn" ] && [ "$nref" -ge 50 ] &&
       grep -q 'WARN NET/railnet/RMA: iput: context 2 out of range (this RMA context has 2)' "$out" &&
       grep -q 'WARN NET/railnet/RMA: createContext: 257 contexts: not valid (1..256)' "$out" &&
       grep -q 'WARN NET/railnet/RMA: createContext: traffic class 256 is not 0..255' "$out" &&
       grep -q 'WARN NET/railnet/RMA: iput: 0x[0-9a-f]* is not a live RMA context' "$out" &&
       grep -q "WARN NET/railnet/RMA: iput: the context's collComm was closed before it" "$out" &&
       [ "$(grep -c 'after the refusals the context still puts and signals' "$out")" = 2 ] &&
       { [ $v = 13 ] || { grep -q 'WARN NET/railnet/RMA: createContext: rank stride 0: not valid' "$out" &&
                          grep -q 'WARN NET/railnet/RMA: iput: rank 1 is not reachable from rank 0 in this context (rank stride 2' "$out"; }; }; then
        tap_ok "rma_v${v}_bad_input_refused_with_one_warn_each"
    else tap_not_ok "rma_v${v}_bad_input_refused_with_one_warn_each" "refused $nref, WARNs $nwarn; $(quiet)"; fi
done

# a killed peer: queryLastError says so, every request completes from then
# on (NCCL 2.30's GIN proxy must go on draining its GPU queue), and the
# signals a kernel could wait on advance while NCCL calls rmaProgress (a
# user's device communicator has no abort: plugin/gin/gin_rma_release.c);
# data words stay as they were; no hang
for t in "--rma-version 14:rma_v14" "--gin-version 13:gin_v13"; do
    args=${t%%:*}; name=${t#*:}
    "$gd" --plugin "$plugin" $args --ranks 3 rma-kill >"$out" 2>&1
    if grep -q '^rma-kill: PASS' "$out" &&
       [ "$(grep -c 'reported by queryLastError after .* completed at once; its signals advanced, its data left alone' "$out")" = 2 ]; then
        tap_ok "${name}_killed_peer_reported_requests_complete_signals_released"
    else tap_not_ok "${name}_killed_peer_reported_requests_complete_signals_released" "$(quiet)"; fi
done

# the driver's own checks of its arguments
st1=0; st2=0
"$gd" --plugin "$plugin" --rma-version 15 probe >"$out" 2>&1 || st1=$?
grep -q "bad value '15' for --rma-version (13 or 14)" "$out" || st1=x$st1
"$gd" --plugin "$plugin" --rma-version 14 --gin-version 12 probe >"$out" 2>&1 || st2=$?
[ "$st1" = 2 ] && [ "$st2" = 2 ] && tap_ok gindriver_rma_version_checked ||
    tap_not_ok gindriver_rma_version_checked "exit $st1/$st2; $(cat "$out")"
tap_done
