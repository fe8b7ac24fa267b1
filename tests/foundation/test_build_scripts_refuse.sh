#!/bin/sh
# scripts/build-nccl, scripts/build-nccl-tests and scripts/build-nccl-profiler
# run where a build takes minutes (the GPU machine): what they are given is
# checked before anything is compiled, each refusal exits 2 and says what is
# wrong.
. "$top_srcdir/tests/lib.sh"
tap_plan 13
bn=$top_srcdir/scripts/build-nccl
bt=$top_srcdir/scripts/build-nccl-tests
bp=$top_srcdir/scripts/build-nccl-profiler
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# refuses NAME WANT-REGEX CMD...: exit 2 and WANT on stderr
refuses() {
    _n=$1 _w=$2; shift 2
    "$@" >"$work/out" 2>"$work/err"
    _rc=$?
    [ $_rc -eq 2 ] && grep -Eq -- "$_w" "$work/err" && tap_ok "$_n" ||
        tap_not_ok "$_n" "rc=$_rc $(cat "$work/err" | head -n 5)"
}
sh "$bn" --help >"$work/out" 2>&1 && grep -q -- '--gencode' "$work/out" &&
    tap_ok build_nccl_help_names_its_options || tap_not_ok build_nccl_help_names_its_options "$(cat "$work/out")"
refuses build_nccl_no_such_source 'no such directory: /nonexistent' sh "$bn" /nonexistent
mkdir -p "$work/notnccl/src"
refuses build_nccl_a_tree_that_is_not_nccl 'is not an NCCL source tree' sh "$bn" "$work/notnccl"
(cd "$work" && tar -czf notnccl.tar.gz notnccl)
refuses build_nccl_a_tarball_that_is_not_nccl 'is not an NCCL source tree' sh "$bn" "$work/notnccl.tar.gz"
refuses build_nccl_bad_jobs "--jobs takes a positive number, not 'two'" sh "$bn" "$work/notnccl" --jobs two
refuses build_nccl_unknown_option 'unknown option --fast' sh "$bn" "$work/notnccl" --fast
refuses build_nccl_tests_a_tree_that_is_not_nccl_tests 'is not an nccl-tests source tree' sh "$bt" "$work/notnccl" --mpi "$work"
sh "$bp" --help >"$work/out" 2>&1 && grep -q -- '--out' "$work/out" &&
    tap_ok build_nccl_profiler_help_names_its_options || tap_not_ok build_nccl_profiler_help_names_its_options "$(cat "$work/out")"
refuses build_nccl_profiler_a_tree_that_is_not_nccl 'is not an NCCL source tree' sh "$bp" "$work/notnccl"
# an NCCL tree (its version file) without the example, then with an example
# that does not decode IB network events, then with one that does but no CUDA
mkdir -p "$work/nccl/makefiles"
printf 'NCCL_MAJOR   := 2\nNCCL_MINOR   := 25\nNCCL_PATCH   := 1\n' >"$work/nccl/makefiles/version.mk"
refuses build_nccl_profiler_a_tree_without_the_example 'NCCL 2.25.1 has no ext-profiler/example/Makefile' sh "$bp" "$work/nccl"
mkdir -p "$work/nccl/ext-profiler/example"
: >"$work/nccl/ext-profiler/example/Makefile"
echo '/* no network events */' >"$work/nccl/ext-profiler/example/plugin.c"
refuses build_nccl_profiler_an_example_without_ib_events 'does not decode IB network events' sh "$bp" "$work/nccl"
echo 'NCCL_PROFILER_NET_TYPE_IB' >"$work/nccl/ext-profiler/example/plugin.cc"
refuses build_nccl_profiler_without_cuda_headers "no $work/nocuda/include/cuda_runtime.h" env CUDA_HOME="$work/nocuda" sh "$bp" "$work/nccl"
refuses build_nccl_profiler_unknown_option 'unknown option --jobs' sh "$bp" "$work/nccl" --jobs 2
tap_done
