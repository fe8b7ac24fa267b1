#!/bin/sh
# The README's table of RAILNET_* variables and the parser's table in
# plugin/ib/config.c name the same variables, and no plugin source other
# than config.c reads the environment.
. "$top_srcdir/tests/lib.sh"
tap_plan 2
code=$(sed -n 's/^ *\(STRV\|INTV\)("\(RAILNET_[A-Z0-9_]*\)".*/\2/p' "$top_srcdir/plugin/ib/config.c" | sort -u)
doc=$(sed -n 's/^| `\(RAILNET_[A-Z0-9_]*\)` |.*/\1/p' "$top_srcdir/README.md" | sort -u)
if [ -n "$code" ] && [ "$code" = "$doc" ]; then tap_ok readme_variable_table_matches_config_c
else tap_not_ok readme_variable_table_matches_config_c "only in code: $(echo "$code" | grep -vxF "$doc" | tr '\n' ' ') only in README: $(echo "$doc" | grep -vxF "$code" | tr '\n' ' ')"; fi
readers=$(grep -ln 'getenv' "$top_srcdir"/plugin/*.c "$top_srcdir"/plugin/ib/*.c "$top_srcdir"/plugin/gdaki/*.c 2>/dev/null | grep -v 'plugin/ib/config.c$')
[ -z "$readers" ] && tap_ok only_config_c_reads_the_environment || tap_not_ok only_config_c_reads_the_environment "$readers"
tap_done
