# bench/aa-verdict.awk: the verdict of one table by the A/A rule, shared by
# the benches that compare railnet with a transport run twice.
# Input: one line per size, "SIZE RATIO AA": railnet's ratio to the other
# transport, and that transport's second run / its first ("-" where either
# is missing). The A/A band is the range of AA over the table; railnet
# passes when no RATIO falls below the band's low edge and the median of
# the RATIOs is >= 1.0. Output: one line, "pass|fail (...)", or
# "undecided (WHY)" without an A/A figure (-v why=..., default "no A/A run").
$2 != "-" { n++; size[n] = $1; r[n] = $2 + 0 }
$3 != "-" { a = $3 + 0; na++; if (na == 1 || a < lo) lo = a; if (na == 1 || a > hi) hi = a }
END {
    if (!n || !na) { printf "undecided (%s)\n", (why != "" ? why : "no A/A run"); exit }
    below = ""
    for (i = 1; i <= n; i++) {
        v[i] = r[i]
        if (r[i] < lo) below = below " " size[i] "=" sprintf("%.2f", r[i])
    }
    for (i = 2; i <= n; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j+1] = v[j]; v[j+1] = x }
    m = n % 2 ? v[(n+1)/2] : (v[n/2] + v[n/2+1]) / 2
    printf "%s (A/A band %.2f..%.2f; median %.2f over %d sizes; below the band:%s)\n",
        (below == "" && m >= 1.0 ? "pass" : "fail"), lo, hi, m, n, (below == "" ? " none" : below)
}
