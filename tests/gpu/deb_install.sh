#!/bin/sh
# GPU machine: the Debian packages built elsewhere (make deb, staged by
# scripts/gpu-stage into .gpu/deb/) install with dpkg -i, and a two-rank
# NCCL job (the system NCCL, every byte over the network plugin) finds
# railnet by name alone: NCCL_NET_PLUGIN=railnet and no LD_LIBRARY_PATH
# entry holding the plugin, so the loader takes it from the multiarch
# libdir. softnic is the NIC, once through LD_LIBRARY_PATH=its private dir
# (softnic-run --libdir) and once through softnic-run. Then the packages
# are purged. Packages installed before are left alone (the test skips).
# Also the packaged railnet-write-bw with GPU memory (--use_cuda,
# --gpu-initiated): its CUDA runtime is linked in statically.
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
plugin=/usr/lib/$ma/libnccl-net-railnet.so
# the packaged softnic, not the build's: lib-nccl.sh puts it first
SOFTNIC_DIR=/usr/lib/$ma/railnet-softnic
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/gpu/lib-nccl.sh"
. "$top_srcdir/tests/packaging/lib-deb.sh"
PKGS=$DEB_PKGS
prog=$top_builddir/tests/gpu/nccl_collectives
if [ "$(gpu_count)" -lt 1 ]; then
    tap_skip_all "no CUDA GPU on this machine (run make check-gpu on a GPU machine)"
fi
[ "$(id -u)" -eq 0 ] || tap_skip_all "installs packages with dpkg -i: needs root"
command -v dpkg >/dev/null 2>&1 || tap_skip_all "no dpkg on this machine"
debs=
for p in $PKGS; do
    f=$(ls "$top_builddir"/deb/"${p}"_*.deb 2>/dev/null | head -n 1)
    [ -n "$f" ] || tap_skip_all "no $top_builddir/deb/${p}_*.deb (make -C build deb, then scripts/gpu-stage)"
    debs="$debs $f"
done
if p=$(deb_preinstalled); then tap_skip_all "$p is already installed on this machine: the test leaves it alone"; fi
[ -x "$prog" ] || tap_skip_all "$prog not built (configure found no NCCL)"
tap_plan 9

purge() { dpkg --purge $PKGS >/dev/null 2>&1; }
trap purge EXIT INT TERM
# shellcheck disable=SC2086
if out=$(dpkg -i $debs 2>&1); then tap_ok dpkg_i_installs_the_three
else tap_not_ok dpkg_i_installs_the_three "$(printf '%s' "$out" | tail -n 15 | sed 's/^/# /')"; fi
privdir=$(softnic-run --libdir 2>/dev/null)
[ "$privdir" = "$SOFTNIC_DIR" ] || echo "# softnic-run --libdir: '$privdir', expected $SOFTNIC_DIR"

out=$(env -u LD_LIBRARY_PATH "$top_builddir/tests/packaging/dlopen_by_name" railnet 2>&1)
got=$(printf '%s\n' "$out" | sed -n 's/^path: //p')
if [ -n "$got" ] && [ "$(readlink -f "$got")" = "$(readlink -f "$plugin")" ]; then tap_ok dlopen_by_name_finds_the_packaged_plugin
else tap_not_ok dlopen_by_name_finds_the_packaged_plugin "$(printf '%s' "$out" | sed 's/^/# /')"; fi

# run_job NAME: the two-rank job; two TAP cases from its logs
run_job() {
    name=$1
    # The job's LD_LIBRARY_PATH must hold no libnccl-net-railnet.so: then
    # only the loader's cache can have found the plugin.
    other=
    IFS=:; for d in ${LD_LIBRARY_PATH-}; do [ -e "$d/libnccl-net-railnet.so" ] && other="$other $d"; done; unset IFS
    NCCL_NET_PLUGIN=railnet NCCL_NET_GDR_LEVEL=SYS \
        nccl_job "$name" 2 "$prog" --mode check --max-bytes $((16 << 20)) --timeout 300
    status=$?
    log0=$JOBDIR/$name.rank0.log log1=$JOBDIR/$name.rank1.log
    nok=$(grep -cE '^ok [0-9]+ - nccl_' "$log0")
    nbad=$(grep -cE '^not ok [0-9]+ - nccl_' "$log0")
    if [ $status -eq 0 ] && [ "$nok" -gt 0 ] && [ "$nbad" -eq 0 ] && [ -z "$other" ]; then
        tap_ok "${name}_two_ranks_all_collectives_ok"
    else
        tap_not_ok "${name}_two_ranks_all_collectives_ok" "exit $status, $nok ok, $nbad not ok, plugin also in LD_LIBRARY_PATH:${other:- no}; $(tail -n 20 "$log0" "$log1" | sed 's/^/# /')"
    fi
    if grep -q "Loaded net plugin railnet (v11)" "$log0" && grep -q "Using network railnet" "$log0" &&
       grep -q "$privdir/libibverbs.so.1" "$log0"; then
        tap_ok "${name}_nccl_loaded_railnet_by_name_on_packaged_softnic"
    else
        tap_not_ok "${name}_nccl_loaded_railnet_by_name_on_packaged_softnic" "$(grep -E 'NET/|network' "$log0" | head -n 20 | sed 's/^/# /')"
    fi
}

# 1. softnic through LD_LIBRARY_PATH=its private directory (lib-nccl.sh)
run_job deb_ldpath
# 2. softnic through softnic-run, each rank behind it, nothing exported
LD_LIBRARY_PATH=$(printf '%s' "$LD_LIBRARY_PATH" | tr ':' '\n' | grep -vxF "$privdir" | paste -sd: -)
[ -n "$LD_LIBRARY_PATH" ] && export LD_LIBRARY_PATH || unset LD_LIBRARY_PATH
NCCL_RANK_WRAP_0=softnic-run NCCL_RANK_WRAP_1=softnic-run
export NCCL_RANK_WRAP_0 NCCL_RANK_WRAP_1
run_job deb_softnic_run
unset NCCL_RANK_WRAP_0 NCCL_RANK_WRAP_1

# The packaged railnet-write-bw (its CUDA runtime linked in statically:
# nothing of the toolkit needed) with GPU memory, on softnic by softnic-run.
# wb_gpu NAME ARGS...: deb_wb_pair, and the client's memory was GPU memory
wb_gpu() {
    _n=$1; shift
    deb_wb_pair "$JOBDIR/deb_$_n" "$@" || return 1
    grep -q '^ Memory *: cuda:0' "$JOBDIR/deb_$_n.cli.out" && return 0
    echo "client memory: $(grep '^ Memory' "$JOBDIR/deb_$_n.cli.out")"; return 1
}
if out=$(wb_gpu use_cuda --use_cuda -n 100 -s 65536); then tap_ok packaged_write_bw_use_cuda_on_softnic
else tap_not_ok packaged_write_bw_use_cuda_on_softnic "$(printf '%s\n' "$out" | sed 's/^/# /')"; fi
if railnet-write-bw --help 2>&1 | grep -q 'not built in this version'; then
    tap_skip packaged_write_bw_gpu_initiated_on_softnic "the packages were built without nvcc"
elif out=$(wb_gpu gpu_initiated --gpu-initiated -n 100 -s 65536); then tap_ok packaged_write_bw_gpu_initiated_on_softnic
else tap_not_ok packaged_write_bw_gpu_initiated_on_softnic "$(printf '%s\n' "$out" | sed 's/^/# /')"; fi

trap - EXIT INT TERM
why=
# shellcheck disable=SC2086
out=$(dpkg --purge $PKGS 2>&1) || why="dpkg --purge: $(printf '%s' "$out" | tail -n 5);"
for f in "$plugin" "$privdir" /usr/bin/softnic-run /usr/bin/railnet-write-bw; do
    [ -n "$f" ] && [ -e "$f" ] && why="$why $f left;"
done
[ -z "$why" ] && tap_ok purge_leaves_nothing || tap_not_ok purge_leaves_nothing "$why"
tap_done
