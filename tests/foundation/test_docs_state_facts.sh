#!/bin/sh
# The README, docs/ and the sources describe the code as it is, not how it
# came to be: no tracker numbers ("issue 16"), no diary of work steps ("the
# ninth stop"), no words about who measured or reviewed what, or where their
# logs were kept. Why the code is as it is belongs in its comments; when a
# change was made belongs in git and NEWS. The README stays a doorway: at
# most 260 lines, the rest in docs/.
. "$top_srcdir/tests/lib.sh"
tap_plan 5
cd "$top_srcdir" || exit 1

ordinals='first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|[0-9]+(st|nd|rd|th)'
words="\\b(issues?|tracker) #?[0-9]+|\\b($ordinals) stop\\b|\\bstop's\\b|\\b(this|next|previous|last) stop\\b"
words="$words|\\bhelpers? (probed|reviewed)|\\bhelper'?s (probe|review|load|tests?)\\b|\\banother helper\\b"
words="$words|\\bworking[ -]days?\\b|\\bof the session\\b|\\.device/s[0-9]|\\bdevice time (ran out|was spent)"

# text files of the tree, without build products of an in-tree build
files_in() {
    find "$@" -type f ! -name '*.log' ! -name '*.trs' ! -name '*.o' ! -name '*.lo' ! -name '*.la' \
        ! -name '*.so*' ! -path '*/.deps/*' ! -path '*/.libs/*' ! -path '*/.dirstamp' 2>/dev/null |
        grep -v '^tests/foundation/test_docs_state_facts\.sh$'
}
scan() { # what...: file:line: text of each hit
    files_in "$@" | while read -r f; do
        grep -InHiE "$words" "$f" 2>/dev/null
    done
}

hits=$(scan README.md NEWS HACKING.md docs)
[ -z "$hits" ] && tap_ok readme_and_docs_state_facts_not_history ||
    tap_not_ok readme_and_docs_state_facts_not_history "$(printf '%s\n' "$hits" | head -n 20)"

hits=$(scan plugin tools include bench scripts debian .ci Makefile.am configure.ac)
[ -z "$hits" ] && tap_ok sources_state_why_not_tracker_history ||
    tap_not_ok sources_state_why_not_tracker_history "$(printf '%s\n' "$hits" | head -n 20)"

hits=$(scan tests; files_in tests | grep -iE "$words")
[ -z "$hits" ] && tap_ok tests_state_behaviour_not_tracker_history ||
    tap_not_ok tests_state_behaviour_not_tracker_history "$(printf '%s\n' "$hits" | head -n 20)"

# every relative link of README.md and docs/*.md names a file that is there,
# and a #fragment names one of its headings (GitHub's slugs)
slugs() { sed -n 's/^#\{1,6\} *//p' "$1" | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9 _-]//g; s/ /-/g'; }
bad=
for f in README.md docs/*.md; do
    d=$(dirname "$f")
    for l in $(grep -oE '\]\([^)[:space:]]+\)' "$f" | sed 's/^](//; s/)$//' | grep -v '^[a-z]*://'); do
        t=${l%%#*}
        [ -n "$t" ] && t=$d/$t || t=$f
        if [ ! -e "$t" ]; then bad="$bad $f: $l;"; continue; fi
        case $l in *"#"*) slugs "$t" | grep -qxF -e "${l#*#}" || bad="$bad $f: $l (no such heading);" ;; esac
    done
done
[ -z "$bad" ] && tap_ok readme_and_docs_links_resolve || tap_not_ok readme_and_docs_links_resolve "$bad"

n=$(wc -l <README.md)
[ "$n" -le 260 ] && tap_ok readme_at_most_260_lines ||
    tap_not_ok readme_at_most_260_lines "README.md has $n lines: move the detail into docs/"
tap_done
