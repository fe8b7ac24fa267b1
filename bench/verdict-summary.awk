# bench/verdict-summary.awk: one row of scripts/gpu-nccl-verdict's summary
# table per collective of one bench output (bench/gpu_nccl_ib_vs_railnet.sh):
# its "bus bandwidth" line names the NCCL and port rate, each "verdict C
# railnet/IB: ..." and "verdict C railnet/peer: ..." line (bench/aa-verdict.awk's
# format) gives the A/A band, the A/A median, the medians, the results and
# the sizes below the band. An undecided verdict leaves its fields "-".
/^bus bandwidth/ { v = $0; sub(/.*NCCL /, "", v); sub(/ .*/, "", v)
                   r = $0; sub(/.*SOFTNIC_RATE=/, "", r); sub(/ .*/, "", r); if (r == "3125M") r = "25 Gb/s" }
/^verdict / { c = $2; w = $3; sub(/railnet\//, "", w); sub(/:$/, "", w); res = $4
              band = $0; sub(/.*A\/A band /, "", band); sub(/;.*/, "", band)
              med = $0; sub(/.*; median /, "", med); sub(/ .*/, "", med)
              bl = $0; sub(/.*below the band: ?/, "", bl); sub(/;.*/, "", bl); sub(/\)$/, "", bl)
              am = "-"; if ($0 ~ /A\/A median /) { am = $0; sub(/.*A\/A median /, "", am); sub(/\)$/, "", am) }
              if (res == "undecided") { band = "-"; med = "-"; bl = "-" }
              if (w == "IB") { B[c] = band; A[c] = am; M[c] = med; R[c] = res; L[c] = bl; o[++n] = c }
              else { PM[c] = med; PR[c] = res; if (bl != "none" && bl != "-") L[c] = L[c] " (peer: " bl ")" } }
END { for (i = 1; i <= n; i++) { c = o[i]
          printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", v, r, c, B[c], A[c], M[c], R[c], (c in PM ? PM[c] : "-"), (c in PR ? PR[c] : "-"), L[c] } }
