#!/bin/sh
# bench/lib-vars.sh: every benchmark, make bench's runner and the NCCL
# verdict script refuse a RAILNET_BENCH_* / RAILNET_VERDICT_* variable that
# no benchmark reads, naming it, before they measure anything; the names
# the benchmarks do read pass.
. "$top_srcdir/tests/lib.sh"
tap_plan 5
. "$top_srcdir/bench/lib-vars.sh"
out=$(env RAILNET_BENCH_ROUNDS=3 RAILNET_BENCH_COLLS=all_reduce RAILNET_VERDICT_RATES=0 sh -c \
    ". '$top_srcdir/bench/lib-vars.sh'; top_srcdir='$top_srcdir'; bench_vars_check" 2>&1)
[ $? -eq 0 ] && [ -z "$out" ] && tap_ok names_the_benchmarks_read_pass || tap_not_ok names_the_benchmarks_read_pass "$out"
bad=
for b in "$top_srcdir"/bench/*.sh "$top_srcdir/bench/run-all"; do
    case $b in */lib-*) continue ;; esac
    out=$(cd "$top_builddir" && env RAILNET_BENCH_GPU=1 RAILNET_BENCH_ROUNDZ=3 timeout 60 sh "$b" 2>&1)
    st=$?
    [ $st -ne 0 ] && printf '%s\n' "$out" | grep -q 'unknown benchmark variable(s): RAILNET_BENCH_ROUNDZ' || bad="$bad $(basename "$b") (exit $st)"
done
[ -z "$bad" ] && tap_ok every_benchmark_refuses_an_unknown_variable || tap_not_ok every_benchmark_refuses_an_unknown_variable "$bad"
out=$(env RAILNET_VERDICT_RATE=0 sh "$top_srcdir/scripts/gpu-nccl-verdict" 1 2>&1)
st=$?
[ $st -eq 2 ] && printf '%s\n' "$out" | grep -q 'unknown benchmark variable(s): RAILNET_VERDICT_RATE;' &&
    tap_ok the_verdict_script_refuses_an_unknown_variable ||
    tap_not_ok the_verdict_script_refuses_an_unknown_variable "exit $st: $out"
# it says which names are known, the misspelled one's right spelling among them
out=$(env RAILNET_BENCH_COLLECTIVES=all_reduce sh -c ". '$top_srcdir/bench/lib-vars.sh'; top_srcdir='$top_srcdir'; bench_vars_check" 2>&1)
printf '%s\n' "$out" | grep -q 'the benchmarks read: .*RAILNET_BENCH_COLLS ' && ! printf '%s\n' "$out" | grep -q 'read: .*RAILNET_BENCH_COLLECTIVES' &&
    tap_ok the_refusal_lists_the_known_names || tap_not_ok the_refusal_lists_the_known_names "$out"
# a value holding a newline and a name is one value, not a second variable
nl='
'
out=$(env RAILNET_BENCH_VARIANTS="RAILNET_SPLIT_MIN=1G${nl}RAILNET_BENCH_ROUNDZ=3" sh -c ". '$top_srcdir/bench/lib-vars.sh'; top_srcdir='$top_srcdir'; bench_vars_check" 2>&1)
[ $? -eq 0 ] && [ -z "$out" ] && tap_ok a_value_with_a_newline_is_one_variable || tap_not_ok a_value_with_a_newline_is_one_variable "$out"
