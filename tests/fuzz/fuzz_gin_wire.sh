#!/bin/sh
# tests/fuzz/fuzz_gin_wire.sh: runs the libFuzzer target of the GIN
# message parsers for a fixed number of inputs (FUZZ_RUNS, default 100000), starting
# from seeds of valid messages, so that CI is bounded and repeatable.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
fuzzer="$top_builddir/tests/fuzz/fuzz_gin_wire"
[ -x "$fuzzer" ] || tap_skip_all "fuzz_gin_wire not built (needs clang with libFuzzer: apt-get install clang)"
tap_plan 1
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/corpus"
out=$(FUZZ_SEED_DIR="$dir/corpus" timeout 300 "$fuzzer" -runs="${FUZZ_RUNS:-100000}" -seed=1 -max_len=200 "$dir/corpus" 2>&1)
rc=$?
if [ $rc -eq 0 ]; then
    tap_ok "fuzz_gin_wire_parsers_${FUZZ_RUNS:-100000}_inputs"
else
    tap_not_ok "fuzz_gin_wire_parsers_${FUZZ_RUNS:-100000}_inputs" "$(printf '%s\n' "$out" | tail -n 25 | sed 's/^/# /')"
fi
tap_done
