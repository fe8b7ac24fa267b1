# bench/aa-verdict.awk: the verdict of one table by the A/A rule, shared by
# the benches that compare railnet with a transport run twice.
# Input: one line per size, "SIZE RATIO AA": railnet's ratio to the other
# transport, and that transport's second run / its first ("-" where either
# is missing). The A/A band is the range of AA over the table; railnet
# passes when no RATIO falls below the band's low edge and the median of
# the RATIOs is >= 1.0. The line also gives the median of AA, the rule's
# second half applied to the transport against itself: where that is below
# 1.0 too, a median of 1.0 is parity within the noise (two transports
# bound by the same ports), not an order. Output: one line, "pass|fail (...)", or
# "undecided (WHY)" without an A/A figure (-v why=..., default "no A/A run").
$2 != "-" { n++; size[n] = $1; r[n] = $2 + 0 }
$3 != "-" { a = $3 + 0; na++; w[na] = a; if (na == 1 || a < lo) lo = a; if (na == 1 || a > hi) hi = a }
function median(x, k,    i, j, t) {
    for (i = 2; i <= k; i++) { t = x[i]; for (j = i - 1; j >= 1 && x[j] > t; j--) x[j+1] = x[j]; x[j+1] = t }
    return k % 2 ? x[(k+1)/2] : (x[k/2] + x[k/2+1]) / 2
}
END {
    if (!n || !na) { printf "undecided (%s)\n", (why != "" ? why : "no A/A run"); exit }
    below = ""
    for (i = 1; i <= n; i++) {
        v[i] = r[i]
        if (r[i] < lo) below = below " " size[i] "=" sprintf("%.2f", r[i])
    }
    m = median(v, n)
    printf "%s (A/A band %.2f..%.2f; median %.2f over %d sizes; below the band:%s; A/A median %.2f)\n",
        (below == "" && m >= 1.0 ? "pass" : "fail"), lo, hi, m, n, (below == "" ? " none" : below), median(w, na)
}
