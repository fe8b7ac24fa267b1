#!/bin/sh
# GPU machine (Ubuntu 24.04, no network): the setup a new user meets.
#  1. scripts/bootstrap, in a copy of the source tree as a clone has it,
#     gets through: optional packages it cannot install (no network, names
#     of another distribution) are notes; configure finds the
#     distribution's NCCL (libnccl-dev) or CUDA's; the tree builds.
#  2. The release tarball (make dist, staged by scripts/gpu-stage into
#     .gpu/dist/) builds with ./configure && make, and `make run` runs.
# Skipped on machines without a GPU (CI runs the same steps on Debian 12
# through make check and tests/packaging/deb.sh).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/gpu/lib-nccl.sh"
if [ "$(gpu_count)" -lt 1 ]; then
    tap_skip_all "no CUDA GPU on this machine: this checks the GPU hosts' OS (run make check-gpu there)"
fi
tap_plan 7
tmp=$(mktemp -d "${TMPDIR:-/tmp}/railnet-setup.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
jobs=$(nproc 2>/dev/null || echo 4)
unset RAILNET_CONFIGURE_FLAGS
# nccl_found LOG: configure's summary in LOG says NCCL was found, when
# the machine has one (prints the reason to skip otherwise)
nccl_expected() { [ -f /usr/include/nccl.h ] || [ -f /usr/local/cuda/include/nccl.h ]; }
nccl_case() {
    if ! nccl_expected; then tap_skip "$1" "no nccl.h in /usr/include or /usr/local/cuda/include"
    elif grep -qE 'NCCL \(GPU tests only\) *: yes' "$2"; then tap_ok "$1"; echo "# $(grep -E 'NCCL \(GPU' "$2")"
    else tap_not_ok "$1" "$(grep -E 'NCCL|CUDA  ' "$2" | sed 's/^/# /')"; fi
}

# 1. a copy of the source tree, without what builds and staging left
mkdir -p "$tmp/tree"
(cd "$top_srcdir" && tar -cf - --exclude=./.gpu --exclude=./build --exclude=./.git \
    --exclude=./autom4te.cache --exclude=./configure --exclude='./railnet-*' .) | (cd "$tmp/tree" && tar -xf -)
(cd "$tmp/tree" && timeout 900 scripts/bootstrap) >"$tmp/bootstrap.log" 2>&1
rc=$?
grep '^bootstrap:' "$tmp/bootstrap.log" | sed 's/^/# /'
# A clone has no configure script: autoreconf needs autoconf, automake and
# libtool. A host without them and without a network cannot build a clone,
# and then bootstrap must stop naming exactly those (never an optional
# package); the tarball below is how such a host builds.
autotools_missing=
command -v autoreconf >/dev/null 2>&1 || autotools_missing="$autotools_missing autoconf"
command -v automake >/dev/null 2>&1 || autotools_missing="$autotools_missing automake"
command -v libtoolize >/dev/null 2>&1 || autotools_missing="$autotools_missing libtool"
if [ -n "$autotools_missing" ]; then
    stop=$(sed -n 's/^bootstrap: cannot build without: \([^(]*\) (.*/\1/p' "$tmp/bootstrap.log" | tr ' ' '\n' | sort | tr '\n' ' ')
    want=$(echo $autotools_missing | tr ' ' '\n' | sort | tr '\n' ' ')
    if [ $rc -ne 0 ] && [ "$stop" = "$want" ]; then
        tap_ok "bootstrap_stops_naming_the_missing_autotools ($(echo $want))"
    else
        tap_not_ok bootstrap_stops_naming_the_missing_autotools "exit $rc; named '$stop', missing '$want'"
    fi
    tap_skip bootstrap_configure_finds_nccl "no$autotools_missing here and no network: a clone cannot be configured (the tarball cases can)"
    tap_skip bootstrap_tree_builds "no$autotools_missing here and no network: a clone cannot be built (the tarball cases can)"
else
    if [ $rc -eq 0 ] && [ -f "$tmp/tree/build/Makefile" ]; then tap_ok bootstrap_gets_through_offline
    else tap_not_ok bootstrap_gets_through_offline "exit $rc; $(tail -n 25 "$tmp/bootstrap.log" | sed 's/^/# /')"; fi
    nccl_case bootstrap_configure_finds_nccl "$tmp/bootstrap.log"
    if [ -f "$tmp/tree/build/Makefile" ] && timeout 900 make -C "$tmp/tree/build" -j"$jobs" >"$tmp/make.log" 2>&1; then
        tap_ok bootstrap_tree_builds
    else
        tap_not_ok bootstrap_tree_builds "$(tail -n 25 "$tmp/make.log" 2>/dev/null | sed 's/^/# /')"
    fi
fi
rm -rf "$tmp/tree"

# 2. the release tarball
tarball=$(ls "$top_builddir"/dist/railnet-*.tar.gz 2>/dev/null | head -n 1)
if [ -z "$tarball" ]; then
    for c in tarball_configure tarball_configure_finds_nccl tarball_make tarball_make_run; do
        tap_skip "$c" "no $top_builddir/dist/railnet-*.tar.gz (make -C build dist, then scripts/gpu-stage)"
    done
    tap_done; exit $?
fi
tar -C "$tmp" -xzf "$tarball"
src=$tmp/$(basename "$tarball" .tar.gz)
if (cd "$src" && ./configure) >"$tmp/configure.log" 2>&1; then tap_ok tarball_configure
else tap_not_ok tarball_configure "$(tail -n 20 "$tmp/configure.log" | sed 's/^/# /')"; fi
nccl_case tarball_configure_finds_nccl "$tmp/configure.log"
start=$(date +%s)
if timeout 900 make -C "$src" -j"$jobs" >"$tmp/make.log" 2>&1; then
    tap_ok tarball_make; echo "# make -j$jobs: $(($(date +%s) - start)) s"
else tap_not_ok tarball_make "$(tail -n 25 "$tmp/make.log" | sed 's/^/# /')"; fi
if timeout 300 make -C "$src" run >"$tmp/run.log" 2>&1; then
    tap_ok tarball_make_run; grep -E '^ *67108864|GB/s' "$tmp/run.log" | tail -n 2 | sed 's/^/# /'
else tap_not_ok tarball_make_run "$(tail -n 25 "$tmp/run.log" | sed 's/^/# /')"; fi
tap_done
