#!/bin/sh
# tests/tools/mkfixtures.sh OUTDIR: builds the sysfs/procfs trees railnet-diag's
# tests read (OUTDIR/<host>/sys and OUTDIR/<host>/proc). Each host follows a
# real layout: PCI functions nested under their bridges as the kernel names
# them, relative symlinks as in sysfs, and binary config files with a real
# capability chain (standard list from 0x34, extended list from 0x100):
#   baremetal-pf  ConnectX-7 PF and H100 behind one PCIe switch, RO on, ACS off,
#                 IOMMU in passthrough, nvidia_peermem, kernel 6.8, RoCE ready
#   vm-vf         QEMU/KVM guest: ConnectX-7 VF (RO reads 0) and H100 on their
#                 own root ports, hypervisor flag, NUMA -1, MTU 1500, kernel 5.4
#   acs-switch    like baremetal-pf but with ACS P2P redirection on the switch
#                 downstream ports, IOMMU translating (DMA-FQ), InfiniBand link,
#                 a PCIe 4.0 x16 link (252 Gb/s) under the 400 Gb/s port,
#                 and a second GPU on the other socket
#   cross-socket  NIC on CPU 0, its only GPU on CPU 1 (SYS distance); the NIC's
#                 PCIe link trained at 8 GT/s x8 of its 32 GT/s x16
#   host-vf       bare metal using a VF of the PF (physfn link) as mlx5_2
set -eu
out=${1:?usage: mkfixtures.sh OUTDIR}

# put FILE OFFSET BYTES VALUE: little-endian write of BYTES bytes.
put() {
    _f=$1; _off=$(($2)); _n=$3; _v=$(($4)); _i=0; _pb=
    while [ "$_i" -lt "$_n" ]; do
        _pb="$_pb\\$(printf %03o $(( (_v >> (8 * _i)) & 255 )))"
        _i=$((_i + 1))
    done
    printf "$_pb" | dd of="$_f" bs=1 seek="$_off" conv=notrunc 2>/dev/null
}

# cfg_header FILE VENDOR DEVICE CLASS HDRTYPE: a 4 KiB config space with the
# capability-list status bit set and the list starting at 0x40.. (cap_ptr).
cfg_header() {
    dd if=/dev/zero of="$1" bs=4096 count=1 2>/dev/null
    put "$1" 0x00 2 "$2"; put "$1" 0x02 2 "$3"
    put "$1" 0x04 2 0x0406            # memory space, bus master, INTx off
    put "$1" 0x06 2 0x0010            # status: capability list
    put "$1" 0x09 3 "$4"              # class code
    put "$1" 0x0e 1 "$5"              # header type
}
cap_ptr() { put "$1" 0x34 1 "$2"; }
# cap FILE OFF ID NEXT
cap() { put "$1" "$2" 1 "$3"; put "$1" $(($2 + 1)) 1 "$4"; }
# pcie FILE OFF NEXT PORTTYPE DEVCAP DEVCTL LNKCAP LNKSTA
pcie() {
    cap "$1" "$2" 0x10 "$3"
    put "$1" $(($2 + 2)) 2 $((0x0002 | ($4 << 4)))
    put "$1" $(($2 + 4)) 4 "$5"; put "$1" $(($2 + 8)) 2 "$6"
    put "$1" $(($2 + 12)) 4 "$7"; put "$1" $(($2 + 18)) 2 "$8"
}
# ecap FILE OFF ID NEXT [VERSION]
ecap() { put "$1" "$2" 4 $(( $3 | (${5:-1} << 16) | ($4 << 20) )); }
# acs FILE OFF NEXT CAP CTL
acs() { ecap "$1" "$2" 0x000d "$3"; put "$1" $(($2 + 4)) 2 "$4"; put "$1" $(($2 + 6)) 2 "$5"; }
# ats FILE OFF NEXT ENABLED
ats() { ecap "$1" "$2" 0x000f "$3"; put "$1" $(($2 + 4)) 2 0x0020; put "$1" $(($2 + 6)) 2 $(( $4 ? 0x8000 : 0 )); }

# fn DIR VENDOR DEVICE CLASS NUMA: the sysfs attribute files of a function.
fn() {
    mkdir -p "$1"
    printf '0x%04x\n' $(($2)) > "$1/vendor"; printf '0x%04x\n' $(($3)) > "$1/device"
    printf '0x%06x\n' $(($4)) > "$1/class"; printf '%s\n' "$5" > "$1/numa_node"
}
# link_bus SYS PATH_UNDER_DEVICES: /sys/bus/pci/devices/<bdf> symlink.
link_bus() {
    mkdir -p "$1/bus/pci/devices"
    ln -sfn "../../../devices/$2" "$1/bus/pci/devices/$(basename "$2")"
}
# rdma_dev SYS PCIPATH NAME: class/infiniband/NAME -> the device's infiniband dir.
rdma_dev() {
    mkdir -p "$1/devices/$2/infiniband/$3" "$1/class/infiniband"
    ln -sfn ../../../"$(basename "$2")" "$1/devices/$2/infiniband/$3/device"
    ln -sfn "../../devices/$2/infiniband/$3" "$1/class/infiniband/$3"
}
# port SYS PCIPATH NAME N LINK_LAYER RATE
port() {
    _p=$1/devices/$2/infiniband/$3/ports/$4
    mkdir -p "$_p/gids" "$_p/gid_attrs/types"
    echo "4: ACTIVE" > "$_p/state"; echo "5: LinkUp" > "$_p/phys_state"
    echo "$6" > "$_p/rate"; echo "$5" > "$_p/link_layer"
}
# gid SYS PCIPATH NAME PORT INDEX GID TYPE
gid() {
    _p=$1/devices/$2/infiniband/$3/ports/$4
    echo "$6" > "$_p/gids/$5"; echo "$7" > "$_p/gid_attrs/types/$5"
}
netdev() { mkdir -p "$1/devices/$2/net/$3"; echo "$4" > "$1/devices/$2/net/$3/mtu"; }
iommu_group() {
    mkdir -p "$1/kernel/iommu_groups/$3"; echo "$4" > "$1/kernel/iommu_groups/$3/type"
    _depth=$(printf '%s' "$2" | tr -cd / | wc -c)
    _up=../../; _i=0
    while [ "$_i" -lt "$_depth" ]; do _up="$_up../"; _i=$((_i + 1)); done
    ln -sfn "${_up}kernel/iommu_groups/$3" "$1/devices/$2/iommu_group"
}
proc() { # PROC KERNEL HYPERVISOR_FLAG CMDLINE
    mkdir -p "$1/sys/kernel"; echo "$2" > "$1/sys/kernel/osrelease"
    _flags="fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology cpuid pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand"
    [ "$3" = yes ] && _flags="$_flags hypervisor"
    _flags="$_flags lahf_lm abm 3dnowprefetch avx512f avx512dq"
    printf 'processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t\t: %s\n\n' "$_flags" > "$1/cpuinfo"
    echo "$4" > "$1/cmdline"
}
dmi() { mkdir -p "$1/class/dmi/id"; echo "$2" > "$1/class/dmi/id/sys_vendor"; echo "$3" > "$1/class/dmi/id/product_name"; }

# Config spaces of the parts used below. DevCap low bits 2 = 512 B payload.
# Device Control 0x5937: RlxdOrd+ ExtTag+ NoSnoop+ MaxPayload 256 MaxReadReq 4096.
# LNKSTA, LNKCAP (default 0x1105, 0x00415105: 32 GT/s x16, its full link).
cx7_pf_config() { # FILE DEVCTL ATS_ENABLED [LNKSTA] [LNKCAP]
    cfg_header "$1" 0x15b3 0x1021 0x020000 0x80
    cap_ptr "$1" 0x60
    pcie "$1" 0x60 0x48 0 0x10008fe2 "$2" "${5:-0x00415105}" "${4:-0x1105}"
    cap "$1" 0x48 0x03 0x9c; cap "$1" 0x9c 0x11 0xc0; cap "$1" 0xc0 0x09 0x40; cap "$1" 0x40 0x01 0x00
    ecap "$1" 0x100 0x0001 0x150 2      # AER
    ecap "$1" 0x150 0x0003 0x180        # device serial number
    ecap "$1" 0x180 0x0010 0x1c0        # SR-IOV
    ecap "$1" 0x1c0 0x000e 0x1d0        # ARI
    ats "$1" 0x1d0 0x200 "$3"
    ecap "$1" 0x200 0x0019 0x000        # secondary PCIe
}
# A VF as a guest sees it: Device Control RO bit reserved (0), QEMU's 128 B payload.
cx7_vf_config() { # FILE
    cfg_header "$1" 0x15b3 0x101e 0x020000 0x00
    cap_ptr "$1" 0x60
    pcie "$1" 0x60 0x9c 0 0x10008fe2 0x5107 0x00415105 0x1105
    cap "$1" 0x9c 0x11 0x00
    ecap "$1" 0x100 0x0001 0x150 2
    ecap "$1" 0x150 0x000e 0x160
    ats "$1" 0x160 0x000 0
}
# H100: Device Control 0x2930: RlxdOrd+ ExtTag+ NoSnoop+ MaxPayload 256 MaxReadReq 512.
h100_config() { # FILE DEVCTL
    cfg_header "$1" 0x10de 0x2330 0x030200 0x00
    cap_ptr "$1" 0x60
    cap "$1" 0x60 0x01 0x68; cap "$1" 0x68 0x05 0x78
    pcie "$1" 0x78 0xc8 0 0x10008fe2 "$2" 0x00415105 0x1105
    cap "$1" 0xc8 0x11 0x00
    ecap "$1" 0x100 0x0002 0x250        # virtual channel
    ecap "$1" 0x250 0x0004 0x128        # power budgeting
    ecap "$1" 0x128 0x000b 0x420        # vendor specific
    ecap "$1" 0x420 0x0001 0x000 2      # AER
}
bridge_config() { # FILE VENDOR DEVICE PORTTYPE ACS_CTL (empty: no ACS cap)
    cfg_header "$1" "$2" "$3" 0x060400 0x01
    cap_ptr "$1" 0x40
    cap "$1" 0x40 0x01 0x68
    pcie "$1" 0x68 0x00 "$4" 0x00008fe2 0x2937 0x00415105 0x1105
    if [ -n "$5" ]; then
        ecap "$1" 0x100 0x0001 0x148 2
        acs "$1" 0x148 0x000 0x005f "$5"
    else
        ecap "$1" 0x100 0x0001 0x000 2
    fi
}

# switch_host SYS ACS_CTL: root port -> PEX switch -> NIC / GPU.
switch_host() {
    _sw=$1
    rp=pci0000:15/0000:15:01.0; up=$rp/0000:16:00.0
    dn0=$up/0000:17:00.0; dn1=$up/0000:17:01.0
    nic=$dn0/0000:18:00.0; gpu=$dn1/0000:19:00.0
    fn "$_sw/devices/$rp" 0x8086 0x352a 0x060400 0
    bridge_config "$_sw/devices/$rp/config" 0x8086 0x352a 4 0x0000
    fn "$_sw/devices/$up" 0x1000 0xc030 0x060400 0
    bridge_config "$_sw/devices/$up/config" 0x1000 0xc030 5 ""
    for d in $dn0 $dn1; do
        fn "$_sw/devices/$d" 0x1000 0xc030 0x060400 0
        bridge_config "$_sw/devices/$d/config" 0x1000 0xc030 6 "$2"
    done
    fn "$_sw/devices/$nic" 0x15b3 0x1021 0x020000 0
    fn "$_sw/devices/$gpu" 0x10de 0x2330 0x030200 0
    for d in $rp $up $dn0 $dn1 $nic $gpu; do link_bus "$_sw" "$d"; done
    h100_config "$_sw/devices/$gpu/config" 0x2930
    rdma_dev "$_sw" "$nic" mlx5_0
    echo 16 > "$_sw/devices/$nic/sriov_numvfs"
}

# --- baremetal-pf -----------------------------------------------------------
s=$out/baremetal-pf/sys; p=$out/baremetal-pf/proc
rm -rf "$out/baremetal-pf"; mkdir -p "$s" "$p"
switch_host "$s" 0x0000
cx7_pf_config "$s/devices/$nic/config" 0x5937 0
port "$s" "$nic" mlx5_0 1 Ethernet "400 Gb/sec (4X NDR)"
gid "$s" "$nic" mlx5_0 1 0 fe80:0000:0000:0000:a288:c2ff:fe0a:1b2c "IB/RoCE v1"
gid "$s" "$nic" mlx5_0 1 1 fe80:0000:0000:0000:a288:c2ff:fe0a:1b2c "RoCE v2"
gid "$s" "$nic" mlx5_0 1 2 0000:0000:0000:0000:0000:ffff:0a00:0001 "IB/RoCE v1"
gid "$s" "$nic" mlx5_0 1 3 0000:0000:0000:0000:0000:ffff:0a00:0001 "RoCE v2"
netdev "$s" "$nic" ens1np0 9000
mkdir -p "$s/class/iommu/dmar0" "$s/class/iommu/dmar1"
iommu_group "$s" "$nic" 41 identity
iommu_group "$s" "$gpu" 42 identity
mkdir -p "$s/module/nvidia_peermem"
dmi "$s" "Supermicro" "SYS-821GE-TNHR"
proc "$p" 6.8.0-45-generic no "BOOT_IMAGE=/vmlinuz-6.8.0-45-generic root=/dev/nvme0n1p2 ro intel_iommu=on iommu=pt"

# --- acs-switch -------------------------------------------------------------
s=$out/acs-switch/sys; p=$out/acs-switch/proc
rm -rf "$out/acs-switch"; mkdir -p "$s" "$p"
switch_host "$s" 0x001d             # SrcValid ReqRedir CmpltRedir UpstreamFwd
cx7_pf_config "$s/devices/$nic/config" 0x5937 1 0x1104 0x00415104   # a 16 GT/s x16 host: 252 Gb/s
port "$s" "$nic" mlx5_0 1 InfiniBand "400 Gb/sec (4X NDR)"
gid "$s" "$nic" mlx5_0 1 0 fe80:0000:0000:0000:a088:c203:0012:3456 "IB/RoCE v1"
# a second GPU on the other socket, which the NIC must not be paired with
far=pci0000:97/0000:97:01.0/0000:98:00.0
fn "$s/devices/pci0000:97/0000:97:01.0" 0x8086 0x352a 0x060400 1
bridge_config "$s/devices/pci0000:97/0000:97:01.0/config" 0x8086 0x352a 4 0x0000
fn "$s/devices/$far" 0x10de 0x2330 0x030200 1
h100_config "$s/devices/$far/config" 0x2930
link_bus "$s" pci0000:97/0000:97:01.0; link_bus "$s" "$far"
mkdir -p "$s/class/iommu/dmar0"
iommu_group "$s" "$nic" 17 DMA-FQ
mkdir -p "$s/kernel/mm/memory_peers/nv_mem"; echo 1.3 > "$s/kernel/mm/memory_peers/nv_mem/version"
dmi "$s" "Dell Inc." "PowerEdge XE9680"
proc "$p" 6.5.0-35-generic no "BOOT_IMAGE=/vmlinuz root=/dev/sda2 ro intel_iommu=on"

# --- vm-vf ------------------------------------------------------------------
s=$out/vm-vf/sys; p=$out/vm-vf/proc
rm -rf "$out/vm-vf"; mkdir -p "$s" "$p"
rp0=pci0000:00/0000:00:02.0; rp1=pci0000:00/0000:00:03.0
nic=$rp0/0000:01:00.0; gpu=$rp1/0000:02:00.0
for r in $rp0 $rp1; do
    fn "$s/devices/$r" 0x1b36 0x000c 0x060400 -1
    bridge_config "$s/devices/$r/config" 0x1b36 0x000c 4 ""
done
fn "$s/devices/$nic" 0x15b3 0x101e 0x020000 -1
cx7_vf_config "$s/devices/$nic/config"
fn "$s/devices/$gpu" 0x10de 0x2330 0x030200 -1
h100_config "$s/devices/$gpu/config" 0x2930
for d in $rp0 $rp1 $nic $gpu; do link_bus "$s" "$d"; done
rdma_dev "$s" "$nic" mlx5_0
port "$s" "$nic" mlx5_0 1 Ethernet "200 Gb/sec (4X HDR)"
gid "$s" "$nic" mlx5_0 1 0 0000:0000:0000:0000:0000:ffff:c0a8:0a05 "IB/RoCE v1"
gid "$s" "$nic" mlx5_0 1 1 0000:0000:0000:0000:0000:ffff:c0a8:0a05 "RoCE v2"
netdev "$s" "$nic" eth1 1500
mkdir -p "$s/kernel/mm/memory_peers/nv_mem"; echo 1.3 > "$s/kernel/mm/memory_peers/nv_mem/version"
dmi "$s" "QEMU" "Standard PC (Q35 + ICH9, 2009)"
proc "$p" 5.4.0-150-generic yes "BOOT_IMAGE=/boot/vmlinuz-5.4.0-150-generic root=/dev/vda1 ro console=ttyS0"

# --- cross-socket -----------------------------------------------------------
# A bare-metal host whose only GPU hangs off the other CPU's root port: the
# NIC is on NUMA node 0, the GPU on node 1 (NCCL's SYS distance).
s=$out/cross-socket/sys; p=$out/cross-socket/proc
rm -rf "$out/cross-socket"; mkdir -p "$s" "$p"
rp0=pci0000:15/0000:15:01.0; nic=$rp0/0000:16:00.0
rp1=pci0000:97/0000:97:01.0; gpu=$rp1/0000:98:00.0
fn "$s/devices/$rp0" 0x8086 0x352a 0x060400 0
bridge_config "$s/devices/$rp0/config" 0x8086 0x352a 4 0x0000
fn "$s/devices/$rp1" 0x8086 0x352a 0x060400 1
bridge_config "$s/devices/$rp1/config" 0x8086 0x352a 4 0x0000
fn "$s/devices/$nic" 0x15b3 0x1021 0x020000 0
cx7_pf_config "$s/devices/$nic/config" 0x5937 0 0x1083   # trained at 8 GT/s x8
fn "$s/devices/$gpu" 0x10de 0x2330 0x030200 1
h100_config "$s/devices/$gpu/config" 0x2930
for d in $rp0 $rp1 $nic $gpu; do link_bus "$s" "$d"; done
rdma_dev "$s" "$nic" mlx5_0
port "$s" "$nic" mlx5_0 1 Ethernet "400 Gb/sec (4X NDR)"
gid "$s" "$nic" mlx5_0 1 0 0000:0000:0000:0000:0000:ffff:0a00:0002 "RoCE v2"
netdev "$s" "$nic" ens1np0 9000
mkdir -p "$s/module/nvidia_peermem"
dmi "$s" "Supermicro" "SYS-821GE-TNHR"
proc "$p" 6.8.0-45-generic no "BOOT_IMAGE=/vmlinuz root=/dev/nvme0n1p2 ro intel_iommu=on iommu=pt"

# --- host-vf ----------------------------------------------------------------
# Bare metal, the PF of baremetal-pf plus one of its VFs bound to mlx5_ib as
# mlx5_2 (a container or DPDK host uses VFs directly): the VF has a physfn
# link to its PF and, being a VF, reads 0 in Enable Relaxed Ordering.
s=$out/host-vf/sys; p=$out/host-vf/proc
rm -rf "$out/host-vf"; mkdir -p "$s" "$p"
switch_host "$s" 0x0000
cx7_pf_config "$s/devices/$nic/config" 0x5937 0
port "$s" "$nic" mlx5_0 1 Ethernet "400 Gb/sec (4X NDR)"
gid "$s" "$nic" mlx5_0 1 0 0000:0000:0000:0000:0000:ffff:0a00:0001 "RoCE v2"
netdev "$s" "$nic" ens1np0 9000
vf=$dn0/0000:18:00.2
fn "$s/devices/$vf" 0x15b3 0x101e 0x020000 0
cx7_vf_config "$s/devices/$vf/config"
ln -sfn ../0000:18:00.0 "$s/devices/$vf/physfn"
ln -sfn ../0000:18:00.2 "$s/devices/$nic/virtfn0"
link_bus "$s" "$vf"
rdma_dev "$s" "$vf" mlx5_2
port "$s" "$vf" mlx5_2 1 Ethernet "400 Gb/sec (4X NDR)"
gid "$s" "$vf" mlx5_2 1 0 0000:0000:0000:0000:0000:ffff:0a00:0102 "RoCE v2"
netdev "$s" "$vf" ens1f0v0 9000
mkdir -p "$s/module/nvidia_peermem"
dmi "$s" "Supermicro" "SYS-821GE-TNHR"
proc "$p" 6.8.0-45-generic no "BOOT_IMAGE=/vmlinuz root=/dev/nvme0n1p2 ro intel_iommu=on iommu=pt"
