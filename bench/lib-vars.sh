# bench/lib-vars.sh: sourced by the benchmarks and scripts/gpu-nccl-verdict,
# not run.  bench_vars_check refuses a RAILNET_BENCH_* or RAILNET_VERDICT_*
# variable of the environment that no benchmark reads: a misspelled one
# (..._COLLECTIVES for RAILNET_BENCH_COLLS) would otherwise be ignored,
# and the run would measure something other than what was asked while its
# recorded command line named it.  The names known are those the
# benchmarks' own text holds (bench/*.sh but this file, bench/run-all, the
# verdict script), so a variable a benchmark gains is known with it.
# Returns 0, or prints the unknown names and returns 1.
bench_vars_check() {
    _known=$(for _f in "$top_srcdir"/bench/*.sh "$top_srcdir/bench/run-all" "$top_srcdir/scripts/gpu-nccl-verdict"; do
        case $_f in */lib-vars.sh) ;; *) cat "$_f" 2>/dev/null ;; esac
    done |
        grep -oE 'RAILNET_(BENCH|VERDICT)_[A-Z0-9_]*[A-Z0-9]' | LC_ALL=C sort -u)
    _bad=
    # one variable a line: a value's own newlines must not start a name
    for _v in $(env -0 | tr '\n\000' '\001\n' | grep -oE '^RAILNET_(BENCH|VERDICT)_[A-Za-z0-9_]*=' | tr -d =); do
        printf '%s\n' "$_known" | grep -qxF "$_v" || _bad="$_bad $_v"
    done
    [ -z "$_bad" ] && return 0
    echo "unknown benchmark variable(s):$_bad; the benchmarks read: $(echo $_known)" >&2
    return 1
}
