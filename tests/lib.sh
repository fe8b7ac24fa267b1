# tests/lib.sh: TAP helpers for integration tests written in shell.
# Source it, call `tap_plan N`, then `tap_ok name`/`tap_not_ok name why`/
# `tap_skip name why` once per case, or `tap_check name cmd...` to run a
# command as a case. `tap_done` returns non-zero when a case failed.
# top_builddir/top_srcdir come from make check's environment.
: "${top_builddir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_srcdir:=$top_builddir}"
TAP_N=0
TAP_FAILED=0
tap_plan() { echo "1..$1"; }
tap_ok() { TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - $1"; }
tap_not_ok() { TAP_N=$((TAP_N + 1)); TAP_FAILED=$((TAP_FAILED + 1)); echo "not ok $TAP_N - $1"; [ -n "${2:-}" ] && echo "# $2" | tail -c 3000 | sed "1s/^/# /"; echo; }
tap_skip() { TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - $1 # SKIP $2"; }
tap_check() {
    local name=$1; shift
    local out
    if out=$("$@" 2>&1); then tap_ok "$name"; else tap_not_ok "$name" "$(printf '%s' "$out" | tail -n 20 | sed 's/^/# /')"; fi
}
tap_done() { [ "$TAP_FAILED" -eq 0 ]; }
# The whole script cannot run here: one SKIP with the reason.
tap_skip_all() { echo "1..0 # SKIP $1"; exit 0; }
# The scripts that drive the built plugin on softnic: sets $plugin, skips
# the whole script when it is not built, and puts softnic's libraries first
# on LD_LIBRARY_PATH (for this script and what it starts).
plugin_on_softnic() {
    plugin=$top_builddir/.libs/libnccl-net-railnet.so
    [ -f "$plugin" ] || tap_skip_all "plugin not built"
    export LD_LIBRARY_PATH=$top_builddir/tests/softnic${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
}
