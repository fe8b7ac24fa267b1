# bench/lib-md.sh: sourced by the benches that write their own results into
# the performance docs (RAILNET_BENCH_MD=FILE).
#   md_section FILE NAME BLOCK
# replaces what FILE holds between the lines "<!-- NAME:begin -->" and
# "<!-- NAME:end -->" (both kept) with the text of the file BLOCK; a FILE
# without both lines becomes the markers around BLOCK. Says which it did.
#   md_command SETTINGS SCRIPT
# prints the command a reader runs again: SETTINGS (VAR=value ...) and
# bench/SCRIPT from a build tree (cd build), or from the repository root
# over scripts/gpu-stage's tree (top_builddir without a Makefile).
md_command() {
    if [ -f "$top_builddir/Makefile" ]; then
        printf 'cd build && %s sh ../bench/%s\n' "$1" "$2"
    else
        printf 'scripts/gpu-stage  # on the build host; then on the GPU machine, from the repository root:\n'
        printf 'top_builddir=$PWD/.gpu %s sh bench/%s\n' "$1" "$2"
    fi
}

md_section() {
    _f=$1 _n=$2 _blk=$3
    if [ -f "$_f" ] && grep -q "^<!-- $_n:begin -->\$" "$_f" && grep -q "^<!-- $_n:end -->\$" "$_f"; then
        awk -v blk="$_blk" -v b="<!-- $_n:begin -->" -v e="<!-- $_n:end -->" '
            $0 == b { print; while ((getline l < blk) > 0) print l; skip = 1; next }
            $0 == e { skip = 0 }
            !skip' "$_f" >"$_f.md-new" && cat "$_f.md-new" >"$_f" && rm -f "$_f.md-new"
        echo "# markdown: section $_n replaced in $_f"
    else
        { echo "<!-- $_n:begin -->"; cat "$_blk"; echo "<!-- $_n:end -->"; } >"$_f"
        echo "# markdown: written to $_f"
    fi
}
