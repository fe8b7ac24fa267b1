#!/bin/sh
# bench/lib-rounds.sh's round_order, the order in which the comparing
# benches run their programs in each round: round 1 is the list as given,
# even rounds reverse the odd round before them, and over 2n rounds each of
# n words takes each place exactly twice, the middle ones of a longer list
# included (with the order and its reverse alone they never took an end).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/bench/lib-rounds.sh"
tap_plan 6
[ "$(round_order 1 ib railnet aa peer)" = "ib railnet aa peer" ] &&
    tap_ok round_1_is_the_list_as_given || tap_not_ok round_1_is_the_list_as_given "$(round_order 1 ib railnet aa peer)"
got=$(for r in 1 2 3 4; do round_order $r A B; done | tr '\n' '/')
[ "$got" = "A B/B A/B A/A B/" ] && tap_ok two_words_take_turns || tap_not_ok two_words_take_turns "$got"
ok=1
for r in 1 3 5 7; do
    fwd=$(round_order $r a b c d e)
    rev=$(round_order $((r + 1)) a b c d e | tr ' ' '\n' | awk '{ w[NR] = $0 } END { for (i = NR; i >= 1; i--) printf "%s%s", w[i], (i > 1 ? " " : "") }')
    [ "$fwd" = "$rev" ] || { ok=0; why="round $r: $fwd, round $((r + 1)) reversed: $rev"; }
done
[ $ok = 1 ] && tap_ok even_rounds_reverse_the_round_before || tap_not_ok even_rounds_reverse_the_round_before "$why"
# places[word@place] counted over 2n rounds
balanced() { # N WORD...: each word at each place exactly twice in 2N rounds
    _n=$1; shift
    _r=1
    while [ $_r -le $((2 * _n)) ]; do round_order $_r "$@"; _r=$((_r + 1)); done |
        awk -v n="$_n" '{ for (i = 1; i <= NF; i++) c[$i "@" i]++ }
            END { bad = ""; for (k in c) if (c[k] != 2) bad = bad " " k "=" c[k]
                  m = 0; for (k in c) m++
                  if (m != n * n) bad = bad " cells=" m
                  print bad }'
}
for n in 3 4 5; do
    set --
    i=1; while [ $i -le $n ]; do set -- "$@" w$i; i=$((i + 1)); done
    bad=$(balanced $n "$@")
    [ -z "$bad" ] && tap_ok "each_of_${n}_words_takes_each_place_twice_in_$((2 * n))_rounds" ||
        tap_not_ok "each_of_${n}_words_takes_each_place_twice_in_$((2 * n))_rounds" "$bad"
done
tap_done
