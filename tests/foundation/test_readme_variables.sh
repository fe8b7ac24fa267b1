#!/bin/sh
# The variable tables of docs/configuration.md and the code name the same
# variables: RAILNET_* against the parser's table in plugin/ib/config.c (and
# no plugin source other than config.c reads the environment), SOFTNIC_*
# against softnic's only reader, tests/softnic/config.c. Every row gives a
# default.
. "$top_srcdir/tests/lib.sh"
tap_plan 4
doc_file=$top_srcdir/docs/configuration.md
only() { echo "$1" | grep -vxF -e "$2" | tr '\n' ' '; }

code=$(sed -n 's/^ *\(STRV\|INTV\)("\(RAILNET_[A-Z0-9_]*\)".*/\2/p' "$top_srcdir/plugin/ib/config.c" | sort -u)
doc=$(sed -n 's/^| `\(RAILNET_[A-Z0-9_]*\)` |.*/\1/p' "$doc_file" | sort -u)
if [ -n "$code" ] && [ "$code" = "$doc" ]; then tap_ok docs_railnet_variable_table_matches_config_c
else tap_not_ok docs_railnet_variable_table_matches_config_c "only in plugin/ib/config.c: $(only "$code" "$doc") only in docs/configuration.md: $(only "$doc" "$code")"; fi

readers=$(grep -ln 'getenv' "$top_srcdir"/plugin/*.c "$top_srcdir"/plugin/ib/*.c "$top_srcdir"/plugin/gdaki/*.c 2>/dev/null | grep -v 'plugin/ib/config.c$')
[ -z "$readers" ] && tap_ok only_config_c_reads_the_environment || tap_not_ok only_config_c_reads_the_environment "$readers"

code=$(grep -o '"SOFTNIC_[A-Z0-9_]*[A-Z0-9]"' "$top_srcdir/tests/softnic/config.c" | tr -d '"' | sort -u)
doc=$(sed -n 's/^| `\(SOFTNIC_[A-Z0-9_]*\)` |.*/\1/p' "$doc_file" | sort -u)
if [ -n "$code" ] && [ "$code" = "$doc" ]; then tap_ok docs_softnic_variable_table_matches_softnic_config_c
else tap_not_ok docs_softnic_variable_table_matches_softnic_config_c "only in tests/softnic/config.c: $(only "$code" "$doc") only in docs/configuration.md: $(only "$doc" "$code")"; fi

# | `VAR` | default | meaning |: a row without a default (or a meaning) is a gap
bad=$(grep -E '^\| `(RAILNET|SOFTNIC)_' "$doc_file" | awk -F'|' 'NF < 5 || $3 ~ /^ *$/ || $4 ~ /^ *$/ { print $2 }' | tr -d ' `' | tr '\n' ' ')
[ -z "$bad" ] && tap_ok docs_variable_rows_give_default_and_meaning || tap_not_ok docs_variable_rows_give_default_and_meaning "rows without a default or a meaning: $bad"
tap_done
