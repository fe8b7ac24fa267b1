#!/bin/sh
# The Debian packages as an administrator meets them: `make deb` builds
# libnccl-net-railnet, railnet-tools and railnet-softnic; lintian finds no
# error; they install on this machine with dpkg -i; the plugin is in the
# multiarch libdir where dlopen("libnccl-net-railnet.so") finds it with no
# LD_LIBRARY_PATH, softnic's libraries are reachable through softnic-run
# only, the tools and man pages are there; then they are purged and
# nothing of them is left. The machine is left as it was: the install part
# is skipped when any of the packages was installed before (someone's
# real installation), and runs of this test on one machine take turns.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/packaging/lib-deb.sh"
PKGS=$DEB_PKGS
[ "$(id -u)" -eq 0 ] || tap_skip_all "installs packages with dpkg -i: needs root"
command -v dpkg-buildpackage >/dev/null 2>&1 || tap_skip_all "no dpkg-buildpackage (apt-get install dpkg-dev; scripts/bootstrap installs it)"
command -v dh >/dev/null 2>&1 || tap_skip_all "no debhelper (apt-get install debhelper; scripts/bootstrap installs it)"
tap_plan 12

# 1. make deb, as the README says, with the defaults a CI box of 2 cores
# wants; the test's make is not part of make check's job server.
out=$(cd "$top_builddir" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL DEB_BUILD_OPTIONS="nocheck parallel=2" \
      nice make deb 2>&1)
rc=$?
debdir=$top_builddir/deb
version=$(sed -n '1s/^railnet (\([^)]*\)).*/\1/p' "$top_srcdir/debian/changelog")
arch=$(dpkg --print-architecture)
debs=
for p in $PKGS; do debs="$debs $debdir/${p}_${version}_$arch.deb"; done
built=0
for d in $debs; do [ -f "$d" ] && built=$((built + 1)); done
if [ $rc -eq 0 ] && [ $built -eq 3 ]; then
    tap_ok make_deb_builds_three_packages
    # sizes, for the log
    for d in $debs; do echo "# $(basename "$d"): $(wc -c <"$d") bytes"; done
else
    tap_not_ok make_deb_builds_three_packages "make deb exited $rc, $built of 3 packages; $(printf '%s' "$out" | tail -n 25 | sed 's/^/# /')"
fi
# the changelog's version is configure's (a release bumps both)
pv=$(sed -n "s/^PACKAGE_VERSION = //p" "$top_builddir/Makefile")
if [ "$version" = "$pv" ]; then tap_ok debian_changelog_version_is_configure_version
else tap_not_ok debian_changelog_version_is_configure_version "debian/changelog: $version, configure.ac: $pv"; fi

# 2. lintian: no error (warnings are listed)
if [ $built -ne 3 ]; then
    tap_skip lintian_no_errors "no packages built"
elif command -v lintian >/dev/null 2>&1; then
    lout=$(lintian --pedantic "$debdir"/railnet_"${version}"_"$arch".changes 2>&1 | grep -v 'running with root privileges')
    nerr=$(printf '%s\n' "$lout" | grep -c '^E:')
    if [ "$nerr" -eq 0 ]; then
        tap_ok lintian_no_errors
        echo "# lintian --pedantic: $(printf '%s\n' "$lout" | grep -c '^[EWIPX]:') tags"
        printf '%s\n' "$lout" | grep '^[WIPX]:' | sed 's/^/# /'
    else
        tap_not_ok lintian_no_errors "$(printf '%s\n' "$lout" | grep '^E:' | sed 's/^/# /')"
    fi
else
    tap_skip lintian_no_errors "lintian not installed (scripts/bootstrap installs it)"
fi

# 2b. the documentation travels: every docs/*.md in the release tarball,
# and README.md, NEWS and docs/ in the plugin's package
tarball=$top_builddir/railnet-$pv.tar.gz
if [ $built -ne 3 ] || [ ! -f "$tarball" ]; then
    tap_skip tarball_and_package_carry_the_docs "no packages or tarball built"
else
    why=
    tlist=$(tar -tzf "$tarball" 2>&1)
    plist=$(dpkg-deb -c "$debdir/libnccl-net-railnet_${version}_$arch.deb" 2>&1)
    pdoc=./usr/share/doc/libnccl-net-railnet
    for f in "$top_srcdir"/docs/*.md; do
        b=$(basename "$f")
        printf '%s\n' "$tlist" | grep -q "/docs/$b\$" || why="$why tarball lacks docs/$b;"
        printf '%s\n' "$plist" | grep -qE " $pdoc/docs/$b(\.gz)?\$" || why="$why package lacks $pdoc/docs/$b;"
    done
    for b in README.md NEWS; do
        printf '%s\n' "$tlist" | grep -q "^[^/]*/$b\$" || why="$why tarball lacks $b;"
        printf '%s\n' "$plist" | grep -qE " $pdoc/$b(\.gz)?\$" || why="$why package lacks $pdoc/$b;"
    done
    [ -z "$why" ] && tap_ok tarball_and_package_carry_the_docs || tap_not_ok tarball_and_package_carry_the_docs "$why"
fi

# 3. install on this machine, check, purge
skip_install=
if p=$(deb_preinstalled); then skip_install="$p is already installed on this machine: the test leaves it alone"; fi
[ $built -eq 3 ] || skip_install="no packages built"
if [ -n "$skip_install" ]; then
    for c in dpkg_i_installs_the_three plugin_in_multiarch_libdir dlopen_by_name_finds_ncclNetPlugin_v8 \
             softnic_run_ibv_devices_lists_softnic0 softnic_libs_private_and_not_leaked \
             railnet_write_bw_help_and_man_page write_bw_plugin_mode_on_softnic purge_leaves_nothing; do
        tap_skip "$c" "$skip_install"
    done
    tap_done; exit $?
fi

# one dpkg at a time: other runs of this test on the machine wait here
exec 9>/run/lock/railnet-deb-test.lock 2>/dev/null || exec 9>/tmp/railnet-deb-test.lock
flock -w 900 9 2>/dev/null || true
purge() { dpkg --purge $PKGS >/dev/null 2>&1; }
trap purge EXIT INT TERM
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
libdir=/usr/lib/$ma
privdir=$libdir/railnet-softnic
# shellcheck disable=SC2086
if out=$(dpkg -i $debs 2>&1); then tap_ok dpkg_i_installs_the_three
else tap_not_ok dpkg_i_installs_the_three "$(printf '%s' "$out" | tail -n 15 | sed 's/^/# /')"; fi

if [ -f "$libdir/libnccl-net-railnet.so" ] && [ ! -e /usr/lib/libnccl-net-railnet.so ]; then
    tap_ok plugin_in_multiarch_libdir
else
    tap_not_ok plugin_in_multiarch_libdir "$(dpkg -L libnccl-net-railnet 2>&1 | grep '\.so' | sed 's/^/# /')"
fi

# NCCL_NET_PLUGIN=railnet: dlopen("libnccl-net-railnet.so"), no LD_LIBRARY_PATH
out=$(env -u LD_LIBRARY_PATH -u LD_PRELOAD "$top_builddir/tests/packaging/dlopen_by_name" railnet 2>&1)
# (the loader may name it through /lib, a link to /usr/lib on merged-/usr)
got=$(printf '%s\n' "$out" | sed -n 's/^path: //p')
if [ -n "$got" ] && [ "$(readlink -f "$got")" = "$(readlink -f "$libdir/libnccl-net-railnet.so")" ] &&
   printf '%s\n' "$out" | grep -qx "name: railnet"; then
    tap_ok dlopen_by_name_finds_ncclNetPlugin_v8
else
    tap_not_ok dlopen_by_name_finds_ncclNetPlugin_v8 "$(printf '%s' "$out" | sed 's/^/# /')"
fi

if ! command -v ibv_devices >/dev/null 2>&1; then
    tap_skip softnic_run_ibv_devices_lists_softnic0 "no ibv_devices (apt-get install ibverbs-utils)"
else
    out=$(env -u LD_LIBRARY_PATH softnic-run ibv_devices 2>&1)
    if printf '%s\n' "$out" | grep -q '^ *softnic0 '; then tap_ok softnic_run_ibv_devices_lists_softnic0
    else tap_not_ok softnic_run_ibv_devices_lists_softnic0 "$(printf '%s' "$out" | sed 's/^/# /')"; fi
fi

# softnic-run puts the private dir first, keeps the caller's path after it,
# and the caller's own environment, the loader's cache and other commands
# never see softnic's libraries.
why=
got=$(LD_LIBRARY_PATH=/opt/x softnic-run sh -c 'echo "$LD_LIBRARY_PATH"')
[ "$got" = "$privdir:/opt/x" ] || why="$why softnic-run gave LD_LIBRARY_PATH=$got;"
got=$(env -u LD_LIBRARY_PATH sh -c 'softnic-run true; echo "${LD_LIBRARY_PATH-unset}"')
[ "$got" = unset ] || why="$why after softnic-run the caller has LD_LIBRARY_PATH=$got;"
ldconfig -p | grep -q "$privdir" && why="$why ld.so.cache lists $privdir;"
[ "$(softnic-run --libdir)" = "$privdir" ] || why="$why softnic-run --libdir: $(softnic-run --libdir);"
for f in libibverbs.so.1 libmlx5.so.1 libefa.so.1 librdmacm.so.1; do
    [ -f "$privdir/$f" ] || why="$why no $privdir/$f;"
    [ -e "$libdir/$f" ] && [ "$(readlink -f "$libdir/$f")" = "$privdir/$f" ] && why="$why $libdir/$f is softnic's;"
done
if command -v ibv_devices >/dev/null 2>&1 && env -u LD_LIBRARY_PATH ibv_devices 2>&1 | grep -q '^ *softnic0 '; then
    why="$why plain ibv_devices lists softnic0;"
fi
softnic-run >/dev/null 2>&1; [ $? -eq 2 ] || why="$why softnic-run without a command does not exit 2;"
[ -z "$why" ] && tap_ok softnic_libs_private_and_not_leaked || tap_not_ok softnic_libs_private_and_not_leaked "$why"

why=
railnet-write-bw --help 2>&1 | grep -q 'railnet-write-bw' || why="$why railnet-write-bw --help: $(railnet-write-bw --help 2>&1 | head -n 3);"
railnet-diag --help >/dev/null 2>&1 || why="$why railnet-diag --help failed;"
softnic-run --help | grep -q '^Usage: softnic-run' || why="$why softnic-run --help;"
if command -v man >/dev/null 2>&1; then
    for m in railnet-write-bw railnet-diag softnic-run; do
        man -w "$m" >/dev/null 2>&1 || why="$why man -w $m: $(man -w "$m" 2>&1);"
    done
else
    for m in railnet-write-bw railnet-diag softnic-run; do
        [ -f "/usr/share/man/man1/$m.1.gz" ] || why="$why no /usr/share/man/man1/$m.1.gz;"
    done
fi
[ -z "$why" ] && tap_ok railnet_write_bw_help_and_man_page || tap_not_ok railnet_write_bw_help_and_man_page "$why"

# the three together: the installed tool drives the installed plugin (found
# by name) on the installed softnic
tmpo=$(mktemp -d "${TMPDIR:-/tmp}/railnet-deb.XXXXXX")
if out=$(deb_wb_pair "$tmpo/plugin" --mode=plugin -n 20 -s 65536) &&
   grep -q "^ Plugin *: \(.*/$ma/\)\{0,1\}libnccl-net-railnet.so (railnet v8), device 0 softnic0" "$tmpo/plugin.cli.out"; then
    tap_ok write_bw_plugin_mode_on_softnic
else
    tap_not_ok write_bw_plugin_mode_on_softnic "$(printf '%s\n' "$out" "$(head -n 12 "$tmpo/plugin.cli.out" 2>/dev/null)" | sed 's/^/# /')"
fi
rm -rf "$tmpo"

trap - EXIT INT TERM
why=
# shellcheck disable=SC2086
out=$(dpkg --purge $PKGS 2>&1) || why="dpkg --purge: $(printf '%s' "$out" | tail -n 5);"
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -qE ' installed$|config-files$' && why="$why $p still installed;"
done
for f in "$libdir/libnccl-net-railnet.so" "$privdir" /usr/bin/railnet-write-bw /usr/bin/softnic-run \
         /usr/share/man/man1/softnic-run.1.gz; do
    [ -e "$f" ] && why="$why $f left;"
done
ldconfig -p | grep -q 'libnccl-net-railnet' && why="$why ld.so.cache still lists the plugin;"
[ -z "$why" ] && tap_ok purge_leaves_nothing || tap_not_ok purge_leaves_nothing "$why"
tap_done
