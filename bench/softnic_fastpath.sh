#!/bin/bash
# bench/softnic_fastpath.sh: softnic's same-host fast path:
# ib_write_bw 1 MiB between two processes with the fast path
# (SOFTNIC_FASTPATH=1: the responder pulls payloads by process_vm_readv)
# and without it (SOFTNIC_FASTPATH=0: the TCP wire), next to one thread's
# memcpy on this machine, measured side by side in one run: five rounds
# alternating the four measurements; medians, and min-max as the spread
# (2 shared cores swing single runs).  memcpy is measured twice: over a
# 256 MiB span (memory-bound; the "~10 GB/s" of a host's memory and of
# bench/softnic_perftest.sh) and over one 1 MiB buffer as ib_write_bw uses
# it (cache-warm, a far higher ceiling).  Goal: fast path >= 0.60 x the
# former.  All figures in MiB/s, as perftest reports.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
. "$top_srcdir/bench/lib-vars.sh"
bench_vars_check || exit 1
top_builddir=${top_builddir:-$(pwd)}
command -v ib_write_bw >/dev/null || { echo "perftest not installed: skipped"; exit 0; }
mb=$top_builddir/bench/memcpy_bw
[ -x "$mb" ] || { echo "skipped: build bench/memcpy_bw first (make bench)"; exit 0; }
. "$top_srcdir/tests/lib.sh" >/dev/null
. "$top_srcdir/tests/softnic/sn_env.sh"
rounds=${RAILNET_BENCH_ROUNDS:-5}

avg_of() { awk '/#bytes/ { on = 1; next } on && /^ *[0-9]+ +[0-9]+ / { v = $4 } END { print v }' "$1"; }
stats() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%s %s %s", v[int((NR + 1) / 2)], v[1], v[NR] }'; }

hot= cold= fast= wire=
for r in $(seq "$rounds"); do
    hot="$hot $("$mb" 1048576 1048576 $((8 << 30)))"
    cold="$cold $("$mb" 1048576 $((256 << 20)) $((4 << 30)))"
    SOFTNIC_FASTPATH=1 sn_pair fp_fast 120 ib_write_bw -d softnic0 -x 0 -s 1048576 -n 5000
    fast="$fast $(avg_of "$SN_TMP/fp_fast.cli")"
    SOFTNIC_FASTPATH=0 sn_pair fp_wire 120 ib_write_bw -d softnic0 -x 0 -s 1048576 -n 3000
    wire="$wire $(avg_of "$SN_TMP/fp_wire.cli")"
done
read -r hm hl hh <<<"$(stats $hot)"
read -r cm cl ch <<<"$(stats $cold)"
read -r fm fl fh <<<"$(stats $fast)"
read -r wm wl wh <<<"$(stats $wire)"
printf '%-52s %8s %17s\n' "measure (MiB/s, median of $rounds alternating rounds)" median "spread (min-max)"
printf '%-52s %8s %17s\n' "memcpy one thread, 1 MiB buffer (ib_write_bw's set)" "$hm" "$hl-$hh"
printf '%-52s %8s %17s\n' "memcpy one thread, 1 MiB pieces over 256 MiB" "$cm" "$cl-$ch"
printf '%-52s %8s %17s\n' "ib_write_bw 1 MiB, SOFTNIC_FASTPATH=1 (pulled)" "$fm" "$fl-$fh"
printf '%-52s %8s %17s\n' "ib_write_bw 1 MiB, SOFTNIC_FASTPATH=0 (TCP wire)" "$wm" "$wl-$wh"
awk -v f="$fm" -v w="$wm" -v h="$hm" -v c="$cm" 'BEGIN {
    if (h <= 0 || c <= 0 || w <= 0) { print "no ratio: a measurement failed"; exit 0 }
    printf "ratio fast path / memcpy (256 MiB span): %.2f   >= 0.60: %s\n", f / c, (f / c >= 0.60 ? "yes" : "NO");
    printf "ratio fast path / memcpy (1 MiB buffer, cache-warm): %.2f\n", f / h;
    printf "ratio fast path / wire: %.2f\n", f / w }'
