# bench/verdict-aaa.awk: from bench/gpu_nccl_ib_vs_railnet.sh outputs, the
# tables where NCCL's IB transport ran a third time (the variant "ib:"
# alone, "# vN: NCCL's IB transport again ..."), judged by the verdict's
# rule against its first run: how often the rule fails two runs of one
# transport. Prints nothing without such a variant.
/^bus bandwidth/ { again = ""
                   tbl = $0; sub(/.*NCCL /, "", tbl); sub(/ .*/, "", tbl)
                   r = $0; sub(/.*SOFTNIC_RATE=/, "", r); sub(/ .*/, "", r)
                   tbl = tbl " " (r == "3125M" ? "25 Gb/s" : r) }
/^# v[0-9]+: NCCL's IB transport again/ { again = $2; sub(/:$/, "", again) }
/^variant / && again != "" && $3 == again "/IB:" {
    n++
    if ($4 == "pass") p++
    else if ($4 == "fail") f = f sprintf("%s%s %s", (f == "" ? "" : "; "), tbl, $2)
}
END {
    if (!n) exit
    printf "\nNCCL's IB transport run a third time in the same rounds, judged by the same rule against its first run: %d of %d tables pass%s.\n",
        p, n, (f == "" ? "" : " (fail: " f ")")
}
