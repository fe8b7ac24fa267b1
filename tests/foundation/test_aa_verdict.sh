#!/bin/sh
# bench/aa-verdict.awk, the rule every comparing bench prints its verdict
# by: the A/A band is the range of the transport's second run / its first;
# railnet passes when no size falls below the band's low edge and its median
# ratio is >= 1.0; the A/A run's own median is printed beside it. And
# bench/verdict-summary.awk, which makes scripts/gpu-nccl-verdict's summary
# rows of those lines, and bench/verdict-aaa.awk, which counts the tables
# where NCCL's IB transport, run a third time, passes the same rule.
. "$top_srcdir/tests/lib.sh"
tap_plan 11
v() { awk -f "$top_srcdir/bench/aa-verdict.awk"; }
check() { # NAME TABLE WANT-REGEX
    _n=$1 _w=$3
    _got=$(printf "$2" | v)
    printf '%s\n' "$_got" | grep -Eq -- "$_w" && tap_ok "$_n" || tap_not_ok "$_n" "got: $_got; want: $_w"
}
check passes_within_the_band_with_a_median_of_1 '1 1.02 0.97\n2 1.10 1.04\n3 0.98 1.00\n' \
    '^pass \(A/A band 0\.97\.\.1\.04; median 1\.02 over 3 sizes; below the band: none; A/A median 1\.00\)$'
check fails_a_size_below_the_band '1 1.20 0.97\n2 1.10 1.04\n3 0.95 1.00\n' \
    '^fail \(.*below the band: 3=0\.95; A/A median 1\.00\)$'
check fails_a_median_below_1_and_gives_the_aa_median '1 0.99 0.93\n2 0.98 1.04\n3 1.01 0.98\n4 0.99 0.97\n' \
    '^fail \(A/A band 0\.93\.\.1\.04; median 0\.99 over 4 sizes; below the band: none; A/A median 0\.97\)$'
check is_undecided_without_an_aa_run '1 1.05 -\n2 1.10 -\n' \
    '^undecided \(no A/A run\)$'
check skips_a_size_without_a_ratio '1 - 1.00\n2 1.05 0.99\n' \
    'median 1\.05 over 1 sizes'
printf '' | awk -v why="nothing ran" -f "$top_srcdir/bench/aa-verdict.awk" | grep -qx 'undecided (nothing ran)' &&
    tap_ok says_why_it_is_undecided || tap_not_ok says_why_it_is_undecided
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{ echo "bus bandwidth (all_reduce,send_recv), 2 ranks, softnic, NCCL 2.30.7 (/x/lib), NCCL_NET_GDR_LEVEL=LOC, SOFTNIC_RATE=3125M per port, 5 rounds"
  echo "verdict all_reduce railnet/IB: $(printf '1 1.02 0.97\n2 1.10 1.04\n3 0.98 1.00\n' | v)"
  echo "verdict all_reduce railnet/peer: $(printf '1 1.20 0.97\n2 1.10 1.04\n3 0.95 1.00\n' | v)"
  echo "verdict send_recv railnet/IB: $(printf '1 1.05 -\n' | v)"
  echo "verdict send_recv railnet/peer: $(printf '1 1.05 -\n' | v)"
  echo "variant all_reduce v1/IB: $(printf '1 0.90 0.97\n2 1.10 1.04\n3 0.95 1.00\n' | v)"; } >"$work/verdict_x.txt"
awk -f "$top_srcdir/bench/verdict-summary.awk" "$work/verdict_x.txt" >"$work/rows"
grep -qxF '| 2.30.7 | 25 Gb/s | all_reduce | 0.97..1.04 | 1.00 | 1.02 | pass | 1.10 | fail | none (peer: 3=0.95) |' "$work/rows" &&
    tap_ok summary_row_of_a_decided_table || tap_not_ok summary_row_of_a_decided_table "$(cat "$work/rows")"
grep -qxF '| 2.30.7 | 25 Gb/s | send_recv | - | - | - | undecided | - | undecided | - |' "$work/rows" &&
    tap_ok summary_row_of_an_undecided_table || tap_not_ok summary_row_of_an_undecided_table "$(cat "$work/rows")"
[ "$(wc -l <"$work/rows")" -eq 2 ] && tap_ok summary_leaves_variant_lines_out ||
    tap_not_ok summary_leaves_variant_lines_out "$(cat "$work/rows")"
# two tables with a third IB run ("ib:" alone is v2 in the first, v1 in the
# second) and one without: the first passes, the second fails
{ echo "bus bandwidth (all_to_all), 2 ranks, softnic, NCCL 2.28.9 (torch), NCCL_NET_GDR_LEVEL=LOC, SOFTNIC_RATE=unlimited per port, 5 rounds"
  echo "# v1: railnet with RAILNET_QPS_PER_CONN=4"
  echo "# v2: NCCL's IB transport again (its third run: the A/A rule judging it against itself)"
  echo "variant all_to_all v1/IB: $(printf '1 0.90 0.97\n' | v)"
  echo "variant all_to_all v2/IB: $(printf '1 1.02 0.97\n2 1.00 1.04\n' | v)"
  echo "bus bandwidth (send_recv), 2 ranks, softnic, NCCL 2.30.7 (/x/lib), NCCL_NET_GDR_LEVEL=LOC, SOFTNIC_RATE=3125M per port, 5 rounds"
  echo "# v1: NCCL's IB transport again (its third run: the A/A rule judging it against itself)"
  echo "variant send_recv v1/IB: $(printf '1 0.96 0.97\n2 1.00 1.04\n' | v)"
  echo "bus bandwidth (send_recv), 2 ranks, softnic, NCCL 2.30.7 (/x/lib), NCCL_NET_GDR_LEVEL=LOC, SOFTNIC_RATE=unlimited per port, 5 rounds"
  echo "# v1: railnet with RAILNET_SPLIT_MIN=1G"
  echo "variant send_recv v1/IB: $(printf '1 0.96 0.97\n' | v)"; } >"$work/verdict_aaa.txt"
got=$(awk -f "$top_srcdir/bench/verdict-aaa.awk" "$work/verdict_aaa.txt")
printf '%s\n' "$got" | grep -qF "judged by the same rule against its first run: 1 of 2 tables pass (fail: 2.30.7 25 Gb/s send_recv)." &&
    tap_ok aaa_counts_the_third_ib_runs_verdicts || tap_not_ok aaa_counts_the_third_ib_runs_verdicts "got: $got"
# the last table alone: a variant's verdict line, but railnet's, not a third IB run
[ -z "$(tail -n 3 "$work/verdict_aaa.txt" | awk -f "$top_srcdir/bench/verdict-aaa.awk")" ] &&
    tap_ok aaa_is_silent_without_a_third_ib_run || tap_not_ok aaa_is_silent_without_a_third_ib_run
tap_done
