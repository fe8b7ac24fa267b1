#!/bin/sh
# tests/plugin/bw_span.sh: netdriver bw --span S walks the messages of a
# size slot by slot through S bytes on each side (message i in slot
# i mod S/size), the measurement that tells a cost of the message size from
# one of the memory a row touches (bench/bw_footprint.sh, docs/performance.md
# "The 64 MiB row of the main job"). The receiver checks the last message's bytes in its slot,
# so a message placed in the wrong slot fails the run.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
plugin_on_softnic
nd=$top_builddir/tests/netdriver/netdriver
tap_plan 6
out=$(mktemp); trap 'rm -f "$out"' EXIT
bw() { RAILNET_STATS=0 "$nd" --plugin "$plugin" bw --timeout 60 "$@" >"$out" 2>&1; }
show() { grep -v ' INFO ' "$out" | tail -n 8 | tr '\n' ' '; }

# 5 messages over 3 slots: the last (message 4) lands in slot 1, which
# message 1 filled too; the split over QPs is forced so that both chunks of
# a message must land in the same slot
RAILNET_SPLIT_MIN=4096 bw --size 64K --span 192K --iters 5 --window 2; st=$?
if [ $st -eq 0 ] && grep -q '^# 65536 bytes: 3 slots, 196608 bytes touched on each side' "$out"; then
    tap_ok bw_span_walks_three_slots_and_checks_the_last_message
else
    tap_not_ok bw_span_walks_three_slots_and_checks_the_last_message "exit $st; $(show)"
fi
# sizes double from min to max; each size gets the slots that fit the span
bw --min 32K --max 128K --span 128K --iters 6; st=$?
if [ $st -eq 0 ] && grep -q '^# 32768 bytes: 4 slots, 131072 bytes' "$out" &&
    grep -q '^# 65536 bytes: 2 slots, 131072 bytes' "$out" && ! grep -q '^# 131072 bytes: .* slots' "$out"; then
    tap_ok bw_span_gives_each_size_the_slots_that_fit
else
    tap_not_ok bw_span_gives_each_size_the_slots_that_fit "exit $st; $(show)"
fi
# without --span (or a span under the size) every message uses the buffer's start
bw --size 64K --iters 4; st=$?
if [ $st -eq 0 ] && grep -q '^ *65536 *4 ' "$out" && ! grep -q 'slots' "$out"; then
    tap_ok bw_without_span_uses_one_slot
else
    tap_not_ok bw_without_span_uses_one_slot "exit $st; $(show)"
fi
bw --size 64K --span 2G; st=$?
[ $st -eq 2 ] && tap_ok bw_refuses_a_span_over_1GiB || tap_not_ok bw_refuses_a_span_over_1GiB "exit $st"
# every number whole and in range (plugin/ib/parse.h), or exit 2 with a
# message naming the option, before any rank starts: atoi read '--iters 5x'
# as 5 and '--window abc' as 0, strtoull '--seed 12x' as 12
bad=""
for args in "bw --iters 5x" "bw --window abc" "bw --dev 1.5" "bw --timeout 10s" "bw --size 64Q" \
    "traffic --ranks 9" "traffic --inflight 0x" "traffic --seed 12x" "traffic --kill-after-ms -5" \
    "traffic --ctl-port softnic0:2x" "traffic --timeout x"; do
    "$nd" --plugin "$plugin" $args >"$out" 2>&1; st=$?
    opt=$(echo "$args" | cut -d' ' -f2)
    [ $st -eq 2 ] && grep -q "^netdriver: bad value '.*' for $opt" "$out" || bad="$bad [$args: exit $st]"
done
[ -z "$bad" ] && tap_ok netdriver_refuses_numbers_not_whole_or_out_of_range ||
    tap_not_ok netdriver_refuses_numbers_not_whole_or_out_of_range "$bad"
# and keeps what it took before: fractional seconds, hex counts, a 64-bit seed
bw --size 4K --iters 0x3 --window 2 --timeout 30.5 --dev 0; st=$?
st2=0
"$nd" --plugin "$plugin" traffic --ranks 2 --iters 2 --max-size 4K --seed 0xffffffffffffffff --timeout 30.5 \
    >"$out.t" 2>&1 || st2=$?
if [ $st -eq 0 ] && grep -q '^ *4096 *3 ' "$out" && [ $st2 -eq 0 ] && grep -q 'seed 18446744073709551615' "$out.t"; then
    tap_ok netdriver_takes_fractional_seconds_hex_counts_and_a_64_bit_seed
else
    tap_not_ok netdriver_takes_fractional_seconds_hex_counts_and_a_64_bit_seed "exit $st/$st2; $(show) $(tail -n 4 "$out.t" | tr '\n' ' ')"
fi
rm -f "$out.t"
tap_done
