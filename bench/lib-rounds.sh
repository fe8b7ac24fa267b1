# bench/lib-rounds.sh: sourced by the benches that alternate programs round
# after round.
#   round_order ROUND WORD...
# prints the words in the order they run in round ROUND (1, 2, ...): in
# rounds 2k-1 the list turned k-1 places to the left, in rounds 2k that
# order reversed, so that over 2n rounds each of n words takes each place
# twice (with two words: A B, B A, B A, A B).
# A run right after another can be slower by itself (the same program
# twice in a row at 16 MiB on the CI VM: the second 3% behind, 9 pairs),
# and the first run of a round can be the odd one out (a GPU job after a
# pause); with a fixed order, or the order and its reverse alone, the
# words in the middle of a list of three or more never take an end, and a
# place's luck goes to whichever word holds it.
round_order() {
    _r=$1
    shift
    printf '%s\n' "$@" | awk -v r="$_r" '
        { w[NR - 1] = $0 }
        END {
            n = NR
            if (!n) exit
            k = int((r - 1) / 2) % n
            out = ""
            for (i = 0; i < n; i++) {
                j = (r % 2) ? (i + k) % n : (n - 1 - i + k) % n
                out = out (i ? " " : "") w[j]
            }
            print out
        }'
}
