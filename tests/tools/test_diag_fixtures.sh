#!/bin/sh
# railnet-diag against sysfs/procfs trees built from real layouts
# (mkfixtures.sh): each host's expected verdict lines, exit status and JSON.
# libibverbs is softnic's (it has every symbol, so rdma.core is OK).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/tools/wb-lib.sh"
[ -x "$DIAG" ] || tap_skip_all "railnet-diag not built"
[ -e "$SOFTNIC_DIR/libibverbs.so.1" ] || tap_skip_all "softnic not built"
tap_plan 16
FX=$TMPD/fx
sh "$top_srcdir/tests/tools/mkfixtures.sh" "$FX" || { echo "Bail out! mkfixtures.sh failed"; exit 1; }

# diag HOST [ARGS]: text report in $TMPD/HOST.txt, JSON in $TMPD/HOST.json,
# exit statuses in TXT_RC / JSON_RC.
diag() {
    _h=$1; shift
    "$DIAG" --sysfs-root "$FX/$_h/sys" --proc-root "$FX/$_h/proc" \
        --ibverbs-lib "$SOFTNIC_DIR/libibverbs.so.1" "$@" >"$TMPD/$_h.txt" 2>"$TMPD/$_h.err"
    TXT_RC=$?
    "$DIAG" --sysfs-root "$FX/$_h/sys" --proc-root "$FX/$_h/proc" \
        --ibverbs-lib "$SOFTNIC_DIR/libibverbs.so.1" --json "$@" >"$TMPD/$_h.json" 2>>"$TMPD/$_h.err"
    JSON_RC=$?
}

# verdicts CASE FILE EXIT WANT_EXIT 'STATUS id subject text' ...: each
# expected line is in the report (text is a grep -E pattern).
verdicts() {
    _c=$1; _f=$2; _rc=$3; _want=$4; shift 4
    _miss=
    for _v in "$@"; do
        set -- $_v
        _st=$1; _id=$2; _sub=$3; shift 3
        grep -Eq "^$_st +$_id +$_sub +$*" "$_f" || _miss="$_miss
#   missing: $_v"
    done
    if [ -z "$_miss" ] && [ "$_rc" -eq "$_want" ]; then tap_ok "$_c"
    else tap_not_ok "$_c" "exit $_rc (want $_want)$_miss
$(sed 's/^/#   /' "$_f" | head -n 40)"; fi
}

# json_agrees CASE HOST: the JSON parses, lists the same checks with the same
# statuses as the text report, and its summary counts them.
json_agrees() {
    if ! have_python; then tap_skip "$1" "python3 not found"; return; fi
    if python3 - "$TMPD/$2.json" "$TMPD/$2.txt" >"$TMPD/$2.jerr" 2>&1 <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
text = [l.split()[:3] for l in open(sys.argv[2]) if re.match(r"^(OK|WARN|FAIL|SKIP) ", l)]
js = [[c["status"], c["id"], c["subject"]] for c in d["checks"]]
assert js == text, "json %s\ntext %s" % (js, text)
for c in d["checks"]:
    assert c["summary"], c
    if c["status"] in ("WARN", "FAIL") and c["id"] not in ("nic.present",):
        assert c["fix"], "no fix for %s" % c
s = d["summary"]
for k in ("ok", "warn", "fail", "skip"):
    assert s[k] == sum(1 for c in d["checks"] if c["status"] == k.upper()), (k, s)
PY
    then tap_ok "$1"; else tap_not_ok "$1" "$(cat "$TMPD/$2.jerr")"; fi
}

diag baremetal-pf
verdicts diag_baremetal_pf_verdicts "$TMPD/baremetal-pf.txt" $TXT_RC 0 \
    'OK host.hypervisor host bare metal' \
    'OK host.iommu host IOMMU on \(2 unit' \
    'OK rdma.core host rdma-core >= 34' \
    'OK nic.function mlx5_0 physical function 0000:18:00.0 \(16 VFs enabled\)' \
    'OK nic.iommu mlx5_0 IOMMU group 41 in passthrough' \
    'OK pci.relaxed_ordering mlx5_0 NIC 0000:18:00.0: Enable Relaxed Ordering on' \
    'OK pci.max_read_req mlx5_0 NIC 0000:18:00.0: Max_Read_Request_Size 4096 B' \
    'OK port.link mlx5_0:1 Ethernet link, ACTIVE, 400 Gb/sec' \
    'OK pci.link mlx5_0 NIC 0000:18:00.0: PCIe link 32.0 GT/s x16 \(504 Gb/s\), as capable' \
    'OK port.mtu mlx5_0:1 netdev ens1np0 MTU 9000' \
    'OK port.roce_v2_gid mlx5_0:1 RoCE v2 GID at index 3' \
    'OK topo.gpu_distance mlx5_0 PIX: GPU 0000:19:00.0 is behind the same PCIe switch' \
    'OK topo.numa mlx5_0 NIC and GPU 0000:19:00.0 on NUMA node 0' \
    'OK pci.acs mlx5_0 no ACS redirection' \
    'OK pci.relaxed_ordering 0000:19:00.0 GPU 0000:19:00.0: Enable Relaxed Ordering on' \
    'OK gpu.peermem host nvidia_peermem loaded'
if ! grep -Eq '^(WARN|FAIL) +(pci|nic|topo|port)\.' "$TMPD/baremetal-pf.txt"; then tap_ok diag_baremetal_pf_no_nic_or_pci_warnings
else tap_not_ok diag_baremetal_pf_no_nic_or_pci_warnings "$(grep -E '^(WARN|FAIL)' "$TMPD/baremetal-pf.txt")"; fi
json_agrees diag_baremetal_pf_json baremetal-pf

diag vm-vf
verdicts diag_vm_vf_ro_disabled_verdicts "$TMPD/vm-vf.txt" $TXT_RC 1 \
    'OK host.hypervisor host virtual machine \(QEMU\)' \
    'WARN nic.function mlx5_0 SR-IOV virtual function 0000:01:00.0' \
    'FAIL pci.relaxed_ordering mlx5_0 NIC 0000:01:00.0: Enable Relaxed Ordering off \(SR-IOV VF / VM\)' \
    'SKIP pci.max_payload mlx5_0 VF 0000:01:00.0: Max_Payload_Size is reserved in a VF \(reads 128 B here\)' \
    'SKIP pci.link mlx5_0 VF 0000:01:00.0: its PCIe link is its PF.s, which this host does not show' \
    'WARN port.mtu mlx5_0:1 netdev eth1 MTU 1500: RoCE MTU only 1024' \
    'OK port.roce_v2_gid mlx5_0:1 RoCE v2 GID at index 1' \
    'WARN topo.gpu_distance mlx5_0 PHB: nearest GPU 0000:02:00.0' \
    'WARN topo.numa mlx5_0 NIC 0000:01:00.0 NUMA node unknown' \
    'WARN gpu.dmabuf host dmabuf registration not possible: kernel 5.4.0-150-generic < 5.12'
if grep -A3 '^FAIL  pci.relaxed_ordering' "$TMPD/vm-vf.txt" | grep -q 'fix: register GPU memory with IBV_ACCESS_RELAXED_ORDERING (railnet: RAILNET_RELAXED_ORDERING=1'; then
    tap_ok diag_vm_vf_fix_names_relaxed_ordering_registration
else tap_not_ok diag_vm_vf_fix_names_relaxed_ordering_registration "$(grep -A3 'pci.relaxed_ordering' "$TMPD/vm-vf.txt")"; fi
json_agrees diag_vm_vf_json vm-vf
if [ "$JSON_RC" -eq 1 ]; then tap_ok diag_json_exit_status_matches_text
else tap_not_ok diag_json_exit_status_matches_text "json exit $JSON_RC, text exit $TXT_RC"; fi

diag acs-switch
verdicts diag_acs_switch_verdicts "$TMPD/acs-switch.txt" $TXT_RC 0 \
    'WARN pci.acs mlx5_0 ACS redirection on 0000:17:00.0 \(P2P Request Redirect, P2P Completion Redirect, Upstream Forwarding\), 0000:17:01.0' \
    'WARN nic.iommu mlx5_0 IOMMU group 17 translates DMA \(DMA-FQ\)' \
    'OK pci.ats mlx5_0 NIC 0000:18:00.0: ATS capable, enabled' \
    'WARN pci.link mlx5_0 NIC 0000:18:00.0: PCIe link 16.0 GT/s x16 \(252 Gb/s\) carries less than its ports. 400 Gb/s' \
    'OK port.link mlx5_0:1 InfiniBand link' \
    'OK topo.gpu_distance mlx5_0 PIX: GPU 0000:19:00.0' \
    'OK pci.relaxed_ordering 0000:98:00.0 GPU 0000:98:00.0'
json_agrees diag_acs_switch_json acs-switch

diag cross-socket
verdicts diag_cross_socket_gpu_is_sys "$TMPD/cross-socket.txt" $TXT_RC 0 \
    'WARN topo.gpu_distance mlx5_0 SYS: nearest GPU 0000:98:00.0 is attached to another CPU' \
    'WARN topo.numa mlx5_0 NIC on NUMA node 0, nearest GPU 0000:98:00.0 on node 1' \
    'WARN pci.link mlx5_0 NIC 0000:16:00.0: PCIe link trained at 8.0 GT/s x8 \(63 Gb/s\) of 32.0 GT/s x16 \(504 Gb/s\)'

diag host-vf
verdicts diag_host_vf_judged_by_its_pf "$TMPD/host-vf.txt" $TXT_RC 0 \
    'OK nic.function mlx5_0 physical function 0000:18:00.0' \
    'WARN nic.function mlx5_2 SR-IOV virtual function 0000:18:00.2 of PF 0000:18:00.0' \
    'WARN pci.relaxed_ordering mlx5_2 VF 0000:18:00.2: Enable Relaxed Ordering reads 0 \(reserved in a VF\); its PF 0000:18:00.0 has it on' \
    'OK pci.max_payload mlx5_2 VF 0000:18:00.2: Max_Payload_Size is the PF.s: 0000:18:00.0 256 B' \
    'OK pci.link mlx5_2 NIC PF 0000:18:00.0 of VF 0000:18:00.2: PCIe link 32.0 GT/s x16' \
    'OK port.mtu mlx5_2:1 netdev ens1f0v0 MTU 9000'
json_agrees diag_host_vf_json host-vf

# -d names one device: an absent one is a FAIL (exit 1) that says so.
"$DIAG" --sysfs-root "$FX/baremetal-pf/sys" --proc-root "$FX/baremetal-pf/proc" \
    --ibverbs-lib "$SOFTNIC_DIR/libibverbs.so.1" -d mlx5_9 >"$TMPD/d.txt" 2>&1; rc=$?
verdicts diag_absent_device_fails "$TMPD/d.txt" $rc 1 \
    'FAIL nic.present mlx5_9 no RDMA device mlx5_9 under'

# An unknown sysfs root is a usage error.
"$DIAG" --sysfs-root "$FX/none" >/dev/null 2>"$TMPD/u.err"; rc=$?
if [ $rc -eq 2 ] && grep -q "sysfs root $FX/none does not exist" "$TMPD/u.err"; then
    tap_ok diag_missing_sysfs_root_exit_2
else tap_not_ok diag_missing_sysfs_root_exit_2 "exit $rc: $(cat "$TMPD/u.err")"; fi

# So is an unknown proc root (it was taken, and host.hypervisor then said
# "bare metal" from the missing cpuinfo); a long option's bad value is named
# by its name.
"$DIAG" --proc-root "$FX/none" >/dev/null 2>"$TMPD/p.err"; rc=$?
"$DIAG" --gpu -1 >/dev/null 2>>"$TMPD/p.err"; rc2=$?
if [ $rc -eq 2 ] && grep -q "proc root $FX/none does not exist" "$TMPD/p.err" && [ $rc2 -eq 2 ] &&
   grep -q "invalid value for --gpu: -1" "$TMPD/p.err"; then
    tap_ok diag_missing_proc_root_and_bad_long_option_exit_2
else tap_not_ok diag_missing_proc_root_and_bad_long_option_exit_2 "exit $rc/$rc2: $(cat "$TMPD/p.err")"; fi

# -s is a size as railnet-write-bw's (plugin/ib/parse.c): 64K is taken (the
# sysfs root is then what fails), 64Q is a usage error naming the value
"$DIAG" --sysfs-root "$FX/none" -s 64K >/dev/null 2>"$TMPD/s.err"; rc=$?
"$DIAG" -s 64Q >/dev/null 2>>"$TMPD/s.err"; rc2=$?
if [ $rc -eq 2 ] && grep -q "sysfs root" "$TMPD/s.err" && [ $rc2 -eq 2 ] &&
   grep -q "invalid value for -s: 64Q" "$TMPD/s.err"; then
    tap_ok diag_size_takes_suffixes_and_refuses_junk
else tap_not_ok diag_size_takes_suffixes_and_refuses_junk "exit $rc/$rc2: $(cat "$TMPD/s.err")"; fi
tap_done
