#!/bin/sh
# Each tool's --help and its man page (tools/*.1) name the same options:
# every option --help lists has an entry under the man page's OPTIONS, and
# every entry there is an option --help lists.
. "$top_srcdir/tests/lib.sh"
tap_plan 4

# --help: an option line starts within 6 columns with a dash; its options are
# what comes before the description (two blanks): "  -I, --inline_size BYTES  ..."
help_opts() {
    sed -n 's/^ \{2,6\}\(-.*\)/\1/p' | sed 's/  .*//' |
        grep -oE '(^|[ ,])-{1,2}[A-Za-z0-9][A-Za-z0-9_-]*' | sed 's/^[ ,]//' | sort -u
}
# man page: the line after each .TP of the OPTIONS section, e.g.
# .BR \-p ", " \-\-tcp\-port " \fIN\fR"  or  .BR \-\-use_cuda [=\fIGPU\fR]
man_opts() {
    awk '/^\.SH / { in_opts = ($2 == "OPTIONS") } in_opts && tp { print } { tp = in_opts && /^\.TP/ }' "$1" |
        sed 's/\\-/-/g; s/\\f[BIRP]//g; s/^\.[A-Z]* //' |
        grep -oE '(^|[ "])-{1,2}[A-Za-z0-9][A-Za-z0-9_-]*' | sed 's/^[ "]//' | sort -u
}
only() { echo "$1" | grep -vxF -e "$2" | tr '\n' ' '; }

check_tool() {
    tool=$1
    bin=$top_builddir/tools/$tool
    man=$top_srcdir/tools/$tool.1
    name=$(echo "$tool" | tr '-' '_')
    if [ ! -x "$bin" ]; then
        tap_skip "${name}_help_options_in_man_page" "$bin not built"
        tap_skip "${name}_man_page_options_in_help" "$bin not built"
        return
    fi
    out=$("$bin" --help 2>&1); rc=$?
    h=$(printf '%s\n' "$out" | help_opts)
    m=$(man_opts "$man")
    if [ $rc -ne 0 ] || [ -z "$h" ]; then
        tap_not_ok "${name}_help_options_in_man_page" "$tool --help exited $rc with no options: $(printf '%s' "$out" | head -n 5)"
    elif [ -z "$(only "$h" "$m")" ]; then
        tap_ok "${name}_help_options_in_man_page"
    else
        tap_not_ok "${name}_help_options_in_man_page" "in --help, not under OPTIONS of tools/$tool.1: $(only "$h" "$m")"
    fi
    if [ -z "$m" ]; then
        tap_not_ok "${name}_man_page_options_in_help" "no options found under OPTIONS of tools/$tool.1"
    elif [ -z "$(only "$m" "$h")" ]; then
        tap_ok "${name}_man_page_options_in_help"
    else
        tap_not_ok "${name}_man_page_options_in_help" "under OPTIONS of tools/$tool.1, not in --help: $(only "$m" "$h")"
    fi
}
check_tool railnet-write-bw
check_tool railnet-diag
tap_done
