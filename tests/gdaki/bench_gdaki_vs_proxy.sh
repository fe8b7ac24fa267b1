#!/bin/sh
# tests/gdaki/bench_gdaki_vs_proxy.sh: the GPU-initiated benchmark program runs and
# checks what it moves.  With host memory (any machine with softnic) its
# CPU-proxy half -- the plugin dlopen'ed, isend/irecv/test -- completes
# every size, reports positive rates and latencies and verifies the
# received bytes after each phase; with GPU memory both halves do the same
# on a GPU machine, and without a GPU the program says why and exits 77.
# No timing is asserted: the numbers belong to make bench.
. "$top_srcdir/tests/lib.sh"
B=$top_builddir/tests/gdaki/bench_gdaki_vs_proxy
[ -x "$B" ] || tap_skip_all "bench_gdaki_vs_proxy not built"
tap_plan 9
TMPD=$(mktemp -d)
trap 'rm -rf "$TMPD"' EXIT
# Small runs: 4 sizes x windows 4 and 16, two rounds; each round of a size
# runs 2 rate phases and 1 latency phase per path, each with its warm-up,
# each checked.
ARGS="--iters 300 --lat-iters 40 --windows 4,16 --rounds 2 --timeout 60"

timeout 240 "$B" --mem=host $ARGS >"$TMPD/host.out" 2>"$TMPD/host.err"; rc=$?
if [ $rc -eq 0 ]; then tap_ok bench_host_memory_cpu_half_completes
else tap_not_ok bench_host_memory_cpu_half_completes "exit $rc: $(tail -n 5 "$TMPD/host.err")"; fi

# Rows: bytes W gpu_rate cpu_rate ratio gpu_lat cpu_lat ratio and the two
# ranges of the rounds' ratios; the GPU columns are "-" here; the latency is
# on the first row of each size.
rows=$(awk '!/^#/ && NF == 10 && $1 ~ /^[0-9]+$/ && $4 + 0 > 0 && ($2 != 4 || $7 + 0 > 0) { print $1 "/" $2 }' \
    "$TMPD/host.out" | tr '\n' ' ')
want="8/4 8/16 64/4 64/16 512/4 512/16 4096/4 4096/16 "
if [ "$rows" = "$want" ]; then tap_ok bench_host_memory_reports_positive_rate_and_latency_for_every_size
else tap_not_ok bench_host_memory_reports_positive_rate_and_latency_for_every_size \
    "rows with positive numbers: '$rows', expected '$want': $(cat "$TMPD/host.out")"; fi

if grep -q "^# received bytes verified after each of 48 phases" "$TMPD/host.out" &&
   grep -q "^# GPU-initiated half: skipped: " "$TMPD/host.out"; then
    tap_ok bench_host_memory_verifies_received_bytes_and_names_the_skipped_gpu_half
else tap_not_ok bench_host_memory_verifies_received_bytes_and_names_the_skipped_gpu_half "$(cat "$TMPD/host.out")"; fi

# Fewer latency messages than the warm-up's 10: the warm-up wrote past a
# buffer sized for the timed run (a crash, or ASan's report, under make check).
timeout 60 "$B" --mem=host --sizes 8 --windows 4 --iters 40 --lat-iters 1 --rounds 1 >"$TMPD/short.out" 2>"$TMPD/short.err"; rc=$?
if [ $rc -eq 0 ] && grep -q "^# received bytes verified after each of 4 phases" "$TMPD/short.out"; then
    tap_ok bench_one_latency_message_runs_its_warm_up_within_bounds
else tap_not_ok bench_one_latency_message_runs_its_warm_up_within_bounds "exit $rc: $(cat "$TMPD/short.out"; tail -n 5 "$TMPD/short.err")"; fi

# --gpu-only: the GPU half alone; with host memory there is none (usage error)
"$B" --mem=host --gpu-only >"$TMPD/go.out" 2>&1; rc=$?
if [ $rc -eq 2 ] && grep -q "^usage: " "$TMPD/go.out"; then tap_ok bench_gpu_only_with_host_memory_is_a_usage_error
else tap_not_ok bench_gpu_only_with_host_memory_is_a_usage_error "exit $rc: $(cat "$TMPD/go.out")"; fi
"$B" --gpu-only --cpu-only >"$TMPD/gc.out" 2>&1; rc=$?
if [ $rc -eq 2 ] && grep -q "^usage: " "$TMPD/gc.out"; then tap_ok bench_gpu_only_and_cpu_only_together_is_a_usage_error
else tap_not_ok bench_gpu_only_and_cpu_only_together_is_a_usage_error "exit $rc: $(cat "$TMPD/gc.out")"; fi
timeout 120 "$B" --cpu-only --sizes 8,4096 --windows 4 --iters 200 --lat-iters 20 --rounds 1 >"$TMPD/conly.out" 2>"$TMPD/conly.err"; rc=$?
if [ $rc -eq 77 ] && grep -q "skipped: " "$TMPD/conly.out"; then
    tap_skip bench_cpu_only_on_gpu_buffers_runs_no_gpu_phase "$(sed -n 's/.*skipped: //p' "$TMPD/conly.out" | head -n 1)"
elif [ $rc -eq 0 ] && grep -q "^# received bytes verified after each of 8 phases" "$TMPD/conly.out" &&
     grep -q "^# GPU-initiated half: skipped: --cpu-only" "$TMPD/conly.out" &&
     [ "$(awk '!/^#/ && NF == 10 && $1 ~ /^[0-9]+$/ && $3 == "-" && $4 + 0 > 0 && $7 + 0 > 0 { n++ } END { print n + 0 }' "$TMPD/conly.out")" = 2 ]; then
    tap_ok bench_cpu_only_on_gpu_buffers_runs_no_gpu_phase
else tap_not_ok bench_cpu_only_on_gpu_buffers_runs_no_gpu_phase "exit $rc: $(cat "$TMPD/conly.out"; tail -n 5 "$TMPD/conly.err")"; fi
timeout 120 "$B" --gpu-only --sizes 8,4096 --windows 4 --iters 200 --lat-iters 20 --rounds 1 >"$TMPD/gonly.out" 2>"$TMPD/gonly.err"; rc=$?
if [ $rc -eq 77 ] && grep -q "skipped: " "$TMPD/gonly.out"; then
    tap_skip bench_gpu_only_runs_no_cpu_phase "$(sed -n 's/.*skipped: //p' "$TMPD/gonly.out" | head -n 1)"
elif [ $rc -eq 0 ] && grep -q "^# received bytes verified after each of 8 phases" "$TMPD/gonly.out" &&
     [ "$(awk '!/^#/ && NF == 10 && $1 ~ /^[0-9]+$/ && $3 + 0 > 0 && $4 == "-" && $5 == "-" && $7 == "-" { n++ } END { print n + 0 }' "$TMPD/gonly.out")" = 2 ]; then
    tap_ok bench_gpu_only_runs_no_cpu_phase
else tap_not_ok bench_gpu_only_runs_no_cpu_phase "exit $rc: $(cat "$TMPD/gonly.out"; tail -n 5 "$TMPD/gonly.err")"; fi

timeout 240 "$B" --mem=cuda $ARGS >"$TMPD/cuda.out" 2>"$TMPD/cuda.err"; rc=$?
if [ $rc -eq 77 ] && grep -q "skipped: " "$TMPD/cuda.out"; then
    tap_skip bench_gpu_memory_both_halves_verify_received_bytes "$(sed -n 's/.*skipped: //p' "$TMPD/cuda.out" | head -n 1)"
elif [ $rc -eq 0 ] && grep -q "^# received bytes verified after each of 96 phases" "$TMPD/cuda.out" &&
     [ "$(awk '!/^#/ && NF == 10 && $9 ~ /^[0-9.e+-]+-[0-9.e+-]+$/ { n++ } END { print n + 0 }' "$TMPD/cuda.out")" = 8 ]; then
    tap_ok bench_gpu_memory_both_halves_verify_received_bytes
else tap_not_ok bench_gpu_memory_both_halves_verify_received_bytes \
    "exit $rc: $(cat "$TMPD/cuda.out"; tail -n 5 "$TMPD/cuda.err")"; fi
tap_done
