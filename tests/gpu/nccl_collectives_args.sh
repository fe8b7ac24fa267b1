#!/bin/sh
# tests/gpu/nccl_collectives_args.sh: the GPU benchmark driver reads its
# numbers whole or refuses them, before it looks for a GPU (so this runs on
# every machine). RAILNET_BENCH_TARGET_BYTES=512M once ran as 512 bytes
# (strtoull stopped at the M): 20 calls a size instead of 512 MiB's worth,
# without a word.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
prog=${top_builddir:-.}/tests/gpu/nccl_collectives
[ -x "$prog" ] || tap_skip_all "tests/gpu/nccl_collectives not built (configure found no NCCL)"
tap_plan 3
out=$(mktemp); trap 'rm -f "$out"' EXIT
base="--rank 0 --nranks 2 --id-file /nonexistent/railnet-id --mode bench"
for bad in "--target-bytes 512Q" "--max-bytes 4MB2"; do
    "$prog" $base $bad >"$out" 2>&1
    st=$?
    if [ $st -eq 2 ] && grep -q "bad value '${bad#* }' for ${bad%% *}" "$out"; then
        tap_ok "refuses_${bad%% *}_${bad#* }"
    else
        tap_not_ok "refuses_${bad%% *}_${bad#* }" "exit $st: $(cat "$out")"
    fi
done
# a suffixed size is taken: past parsing the driver skips without a GPU or
# fails on the missing id file with one, never a usage error
"$prog" $base --target-bytes 512M --min-bytes 64K --max-bytes 1MiB >"$out" 2>&1
st=$?
if [ $st -ne 2 ] && ! grep -q "bad value" "$out"; then
    tap_ok "takes_suffixed_sizes"
else
    tap_not_ok "takes_suffixed_sizes" "exit $st: $(cat "$out")"
fi
tap_done
