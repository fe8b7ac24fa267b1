# bench/lib-rounds.sh: sourced by the benches that alternate programs round
# after round.
#   round_order ROUND WORD...
# prints the words in their order in odd rounds and reversed in even ones.
# A run right after another can be slower by itself (the same program
# twice in a row at 16 MiB on the CI VM: the second 3% behind, 9 pairs), so
# a fixed order would hand that to whichever program comes later; in
# A B, B A order each program takes each place equally often.
round_order() {
    _r=$1
    shift
    if [ $((_r % 2)) -eq 1 ]; then
        echo "$@"
    else
        printf '%s\n' "$@" | awk '{ w[NR] = $0 } END { for (i = NR; i >= 1; i--) printf "%s%s", w[i], (i > 1 ? " " : "\n") }'
    fi
}
