#!/bin/sh
# NCCL's own IB transport (NCCL_NET=IB NCCL_NET_PLUGIN=none) on softnic
# seen as a PCI NIC: nccl-tests run under softnic-sysfs-ns, whose private
# /sys places each softnic device as a PCI function beside the GPU, as
# NCCL's topology code needs (2.29 and 2.30 end in "Could not find any
# local path from gpu 0 to net" without a PCI path for the NIC; 2.28 warns
# "Could not find real path"). Every job: 2 ranks sharing GPU 0 (each its
# own NCCL node) under MPS where there is one, data checked (-c 1), rc 0,
# every row's #wrong 0, NCCL's IB network on softnic's devices, and no
# WARN about a path:
#   ib_pci_<coll>_2r   all_reduce, alltoall and sendrecv, P2P and SHM off
#                      (every byte crosses NCCL's net_ib), 8 B-64 MiB;
#   ib_pci_gin_D3_2r   alltoall's GIN device implementation (-R 2 -D 3) on
#                      NCCL's own GIN proxy (NCCL_GIN_TYPE=2) over net_ib,
#                      each port its own NIC (NCCL_NET_MERGE_LEVEL=LOC);
#   ib_pci_gdaki_D<n>_2r the same, -D 3 and -D 4, on NCCL's own GDAKI GIN
#                      (NCCL_GIN_TYPE=3): DOCA GPUNetIO's CQs and QPs made
#                      through softnic's DEVX, rings in GPU memory; softnic
#                      as two one-port devices, as a dual-port ConnectX-4+
#                      is (NCCL numbers a port by the ibv devices before it
#                      on one PCI device, and GDAKI opens that port: port 3
#                      of a two-port ibv device), functions .0 and .1 of one
#                      NIC (softnic-sysfs-ns --dual-port) from NCCL 2.29 on,
#                      whose GDAKI opens port 1; each on a bus of its own
#                      for 2.28, whose GDAKI opens that numbered port (2 on
#                      a ConnectX's second function);
#   ib_pci_sharp_<coll>_2r  the three collectives again through NVIDIA's
#                      external IB plugin (scripts/build-nccl-rdma-sharp-plugins,
#                      staged as nccl-rdma-sharp-plugins/libnccl-net.so),
#                      which NCCL must load and use as its network (named
#                      IBext_v11 up to 2.29, "NCCL RDMA Plugin v11" by 2.30);
# and, as a reference printed as a comment, all_reduce without the view.
# Runs with the NCCL nccl-tests were built against (NCCL_TESTS_DIR,
# NCCL_TORCH_LIB: tests/gpu/nccl_tests_builds.sh sets both per build).
# Needs root (a mount namespace); skips with the reason otherwise.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/gpu/lib-nccl.sh"
. "$top_srcdir/tests/gpu/lib-mps.sh"
NT=${NCCL_TESTS_DIR:-$top_builddir/nccl-tests}
MR=$top_builddir/tests/minimpi/minimpirun
MPILIB=$top_builddir/tests/minimpi/home/lib
NS=$top_builddir/tests/softnic/softnic-sysfs-ns
TIMEOUT=${NT_JOB_TIMEOUT:-240}
if [ "$(gpu_count)" -lt 1 ]; then
    tap_skip_all "no CUDA GPU on this machine (run make check-gpu on a GPU machine)"
fi
for p in alltoall_perf all_reduce_perf sendrecv_perf; do
    [ -x "$NT/$p" ] || tap_skip_all "nccl-tests not built in $NT (scripts/build-nccl-tests SRC)"
done
[ -x "$MR" ] && [ -e "$MPILIB/libmpi.so" ] || tap_skip_all "tests/minimpi not built"
[ -x "$NS" ] || tap_skip_all "$NS not built"
out=$("$NS" -- true 2>&1) || tap_skip_all "softnic-sysfs-ns cannot make its view here: $(echo "$out" | head -n 1)"
SHARP=$top_builddir/nccl-rdma-sharp-plugins/libnccl-net.so
tap_plan 9

work=$(mktemp -d)
mps_start "$work" || echo "# no MPS daemon: the ranks take time slices of the GPU"
trap 'mps_stop; rm -rf "$work"' EXIT
unset NCCL_DEBUG_SUBSYS
export NCCL_TESTS_DEVICE=0 NCCL_NVLS_ENABLE=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH
export NCCL_NET=IB NCCL_NET_PLUGIN=none NCCL_IB_GID_INDEX=${NCCL_IB_GID_INDEX:-0}
export LD_LIBRARY_PATH=$SOFTNIC_DIR:$(nccl_torch_lib):$MPILIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# ib_job NAME WRAP [VAR=VALUE...] -- PROG ARGS: one job of 2 ranks, behind
# WRAP ("ns": softnic-sysfs-ns; "ns_dual": with --dual-port; "none"); $log, $rc
ib_job() {
    _name=$1 _wrap=$2; shift 2
    _x=
    while [ "$1" != "--" ]; do _x="$_x -x $1"; shift; done
    shift
    log=$JOBDIR/nccl_ib_pci.$_name.log
    _pre=
    [ "$_wrap" = ns ] && _pre=$NS
    [ "$_wrap" = ns_dual ] && _pre="$NS --dual-port"
    # shellcheck disable=SC2086
    $_pre "$MR" -n 2 --timeout "$TIMEOUT" --rank-env NCCL_HOSTID=railnet-ib-node-%r $_x "$@" >"$log" 2>&1
    rc=$?
}
rows_clean() {
    awk '/^ *[0-9]+ +[0-9]+ / { n++; if ($9 != "0" || ($13 != "0" && $13 != "N/A")) bad++ }
         END { exit !(n > 0 && bad == 0) }' "$1" &&
        grep -q 'Out of bounds values : 0 OK' "$1"
}
# NCCL used its IB network on softnic, with no WARN about a path
ib_on_pci() {
    grep -q 'NET/IB.*softnic' "$1" && ! grep -Eq 'WARN.*(Could not find|real path|local path)' "$1"
}
why() {
    printf 'rc=%s rows: %s | %s' "$rc" \
        "$(awk '/^ *[0-9]+ +[0-9]+ / { printf "%s:%s/%s ", $1, $9, $13 }' "$1" | cut -c1-300)" \
        "$(grep -E 'WARN|rror|minimpirun:|softnic-sysfs-ns' "$1" | head -n 6 | tr '\n' '|' | cut -c1-900)"
}

for coll in all_reduce alltoall sendrecv; do
    ib_job "$coll" ns NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 -- "$NT/${coll}_perf" -b 8 -e 64M -f 8 -c 1 -n 2 -w 1
    if [ $rc -eq 0 ] && rows_clean "$log" && ib_on_pci "$log"; then
        tap_ok "ib_pci_${coll}_2r_data_checked"
    else tap_not_ok "ib_pci_${coll}_2r_data_checked" "$(why "$log")"; fi
done
# NCCL_NET_MERGE_LEVEL=LOC: softnic0's two ports share one PCI function, as
# a dual-port ConnectX's do, and NCCL fuses them into one virtual NIC by
# default; NCCL 2.29 turns GIN off when any NIC is fused
ib_job gin_D3 ns NCCL_GIN_TYPE=2 NCCL_NET_MERGE_LEVEL=LOC -- "$NT/alltoall_perf" -b 16 -e 64M -f 4 -c 1 -R 2 -D 3 -n 2 -w 1
if grep -q "Device implementation 3 is not supported by this test" "$log"; then
    tap_skip "ib_pci_gin_D3_2r_data_checked" "nccl-tests built against this NCCL has no device implementation 3"
elif [ $rc -eq 0 ] && rows_clean "$log" && ib_on_pci "$log"; then
    tap_ok "ib_pci_gin_D3_2r_data_checked"
else tap_not_ok "ib_pci_gin_D3_2r_data_checked" "$(why "$log")"; fi
sd0=${SOFTNIC_DEVICES-unset}
export SOFTNIC_DEVICES="softnic0:127.0.0.1;softnic1:127.0.0.2"   # for the view and the ranks
wrap=ns_dual
case $(sed -n 's/.*NCCL version \([0-9.]*\).*/\1/p' "$log" | head -n 1) in 2.28.*) wrap=ns ;; esac
for d in 3 4; do
    name=ib_pci_gdaki_D${d}_2r_data_checked
    ib_job gdaki_D$d $wrap NCCL_GIN_TYPE=3 NCCL_NET_MERGE_LEVEL=LOC -- \
        "$NT/alltoall_perf" -b 16 -e 1M -f 4 -c 1 -R 2 -D $d -n 2 -w 1
    if grep -q "Device implementation $d is not supported by this test" "$log"; then
        tap_skip "$name" "nccl-tests built against this NCCL has no device implementation $d"
    elif [ $rc -eq 0 ] && rows_clean "$log" && ib_on_pci "$log" && grep -Eq 'Assigned (GIN plugin|plugin) GIN_IB_GDAKI' "$log" &&
        grep -Eq 'Created a QP( group)?: ' "$log"; then    # 2.30 words both lines its own way
        tap_ok "$name"
    else tap_not_ok "$name" "$(why "$log")"; fi
done
if [ "$sd0" = unset ]; then unset SOFTNIC_DEVICES; else export SOFTNIC_DEVICES="$sd0"; fi

# NVIDIA's external IB plugin: NCCL prefers a plugin's network to its own
for coll in all_reduce alltoall sendrecv; do
    name=ib_pci_sharp_${coll}_2r_data_checked
    if [ ! -f "$SHARP" ]; then
        tap_skip "$name" "nccl-rdma-sharp-plugins not built (scripts/build-nccl-rdma-sharp-plugins SRC, then scripts/gpu-stage)"
        continue
    fi
    unset NCCL_NET
    export NCCL_NET_PLUGIN=$SHARP
    ib_job "sharp_$coll" ns NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 -- "$NT/${coll}_perf" -b 8 -e 64M -f 8 -c 1 -n 2 -w 1
    export NCCL_NET=IB NCCL_NET_PLUGIN=none
    if [ $rc -eq 0 ] && rows_clean "$log" && ib_on_pci "$log" && grep -Eq 'Using network (IBext|NCCL RDMA Plugin)' "$log"; then
        tap_ok "$name"
    else tap_not_ok "$name" "$(why "$log")"; fi
done

# the reference: the same all_reduce with the host's own /sys
ib_job all_reduce_no_view none NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 -- "$NT/all_reduce_perf" -b 8 -e 1M -f 8 -c 1 -n 2 -w 1
echo "# without the view: rc=$rc, $(grep -c 'WARN' "$log") WARN lines, first: $(grep -m1 'WARN' "$log" | cut -c1-200)"
tap_done
