#!/bin/sh
# tests/softnic/sysfs_ns.sh: softnic-sysfs-ns runs a command in a mount
# namespace whose /sys shows each softnic device as a PCI function: what
# NCCL's topology reads of a NIC (realpath of /sys/class/infiniband/<dev>/
# device, then class, vendor, ... of each level up to the PCI root) is
# there, the host's devices read as before, and nothing is left once the
# command is done.  Needs root and mount namespaces; otherwise every case
# is skipped with the reason.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/softnic/sn_env.sh"

NS=$SN_DIR/softnic-sysfs-ns
[ -x "$NS" ] || tap_skip_all "$NS not built"
[ "$(id -u)" -eq 0 ] || tap_skip_all "needs root (a mount namespace and tmpfs mounts)"
mkdir "$SN_TMP/probe"
if command -v unshare >/dev/null &&
   ! why=$(unshare -m sh -c "mount -t tmpfs none '$SN_TMP/probe'" 2>&1); then
    tap_skip_all "a mount namespace with a tmpfs is not permitted here: $why"
fi
tap_plan 13

export SOFTNIC_DEVICES="softnic0:127.0.0.1,127.0.0.2;softnic1:127.0.1.1"
BDF='[0-9a-f]\{4\}:[0-9a-f]\{2\}:[0-9a-f]\{2\}\.[0-9a-f]'
# the host's first PCI function, as seen from outside
PCI1=$(ls /sys/bus/pci/devices 2>/dev/null | head -n 1)

# What the command sees, as NAME=VALUE lines; it ends with status 7.
cat >"$SN_TMP/inside.sh" <<'EOF'
for d in softnic0 softnic1; do
    fn=$(realpath /sys/class/infiniband/$d/device)
    echo "fn_$d=$fn"
    echo "class_$d=$(cat $fn/class)"
    echo "vendor_$d=$(cat $fn/vendor)"
    echo "width_$d=$(cat $fn/max_link_width)"
    echo "state_$d=$(cat /sys/class/infiniband/$d/ports/1/state)"
    echo "guid_$d=$(cat /sys/class/infiniband/$d/node_guid)"
    # NCCL finds a function again from its bus id through the bus's bridge,
    # and takes it for a PCI device by its subsystem
    bdf=${fn##*/}
    echo "bybus_$d=$(realpath /sys/class/pci_bus/${bdf%:*}/../../$bdf)"
    echo "subsystem_$d=$(realpath $fn/subsystem)"
    # NCCL's walk: each level's class, up to the root (pciDDDD:BB)
    walk= p=$fn
    while :; do
        case ${p##*/} in pci*) break ;; esac
        c=$(cat "$p/class") || break
        walk="${walk:+$walk }${p##*/}=$c"
        p=${p%/*}
    done
    echo "walk_$d=$walk"
    echo "root_$d=$p"
done
fn=$(realpath /sys/class/infiniband/softnic0/device)
port=${fn%/*}
ls -A "${port%/*}" >"$SN_TMP/inside.ls"
if [ -n "$PCI1" ]; then
    echo "pci1_real=$(realpath /sys/bus/pci/devices/$PCI1)"
    echo "pci1_class=$(cat /sys/bus/pci/devices/$PCI1/class)"
fi
exit 7
EOF
ls -A /sys/class >"$SN_TMP/class.before"
mkdir "$SN_TMP/t"
TMPDIR=$SN_TMP/t SN_TMP=$SN_TMP PCI1=$PCI1 timeout 60 "$NS" -- sh "$SN_TMP/inside.sh" \
    >"$SN_TMP/inside.out" 2>"$SN_TMP/inside.err"
rc=$?
val() { sed -n "s|^$1=||p" "$SN_TMP/inside.out"; }
why() { echo "rc=$rc; $(cat "$SN_TMP/inside.out" "$SN_TMP/inside.err" | head -n 40)"; }

[ $rc -eq 7 ] && tap_ok command_status_comes_back || tap_not_ok command_status_comes_back "$(why)"

# each device a NIC at device 00 of a bus of its own (NCCL merges the
# functions of one bus into one NIC), behind a port of its own
fn0=$(val fn_softnic0) fn1=$(val fn_softnic1)
path_ok() {
    echo "$1" | grep -q "^/sys/devices/pci[0-9a-f]\{4\}:[0-9a-f]\{2\}/\(.*/\)\?$BDF/$BDF\$" &&
        [ "${1%:00.0}" != "$1" ]
}
if path_ok "$fn0" && path_ok "$fn1" && [ "${fn0%:*}" != "${fn1%:*}" ] &&
   [ "${fn0%/*}" != "${fn1%/*}" ]; then
    tap_ok "device_link_resolves_to_a_pci_function ($fn0, $fn1)"
else
    tap_not_ok device_link_resolves_to_a_pci_function "softnic0 at '$fn0', softnic1 at '$fn1'; $(why)"
fi

got="$(val class_softnic0) $(val vendor_softnic0) $(val class_softnic1) $(val vendor_softnic1)"
[ "$got" = "0x020700 0x15b3 0x020700 0x15b3" ] && tap_ok function_reads_as_an_infiniband_nic ||
    tap_not_ok function_reads_as_an_infiniband_nic "class, vendor: '$got', wanted 0x020700 0x15b3 twice"

got="$(val state_softnic0)|$(val state_softnic1)|$(val width_softnic0)"
if [ "$got" = "4: ACTIVE|4: ACTIVE|$(val width_softnic1)" ] && [ -n "$(val width_softnic0)" ] &&
   val guid_softnic0 | grep -q '^[0-9a-f]\{4\}\(:[0-9a-f]\{4\}\)\{3\}$'; then
    tap_ok ports_and_guid_under_class_infiniband
else
    tap_not_ok ports_and_guid_under_class_infiniband "state|state|width: '$got', guid '$(val guid_softnic0)'"
fi

# from the function up: every level has a class, the NIC's then its port's
walk=$(val walk_softnic0) root=$(val root_softnic0)
port=${fn0%/*}
if echo "$walk" | grep -q "^${fn0##*/}=0x020700 ${port##*/}=0x060400" &&
   ! echo "$walk" | grep -q '=\( \|$\)' &&
   echo "$root" | grep -q '^/sys/devices/pci[0-9a-f]\{4\}:[0-9a-f]\{2\}$' &&
   [ "${fn0#"$root"/}" != "$fn0" ]; then
    tap_ok "parents_walk_up_to_the_pci_root ($walk, $root)"
else
    tap_not_ok parents_walk_up_to_the_pci_root "walk '$walk', ended at '$root'"
fi

[ "$(val bybus_softnic0)" = "$fn0" ] && [ "$(val bybus_softnic1)" = "$fn1" ] &&
   [ "$(val subsystem_softnic0)" = /sys/bus/pci ] && [ "$(val subsystem_softnic1)" = /sys/bus/pci ] &&
    tap_ok function_found_through_its_bus_as_a_pci_device ||
    tap_not_ok function_found_through_its_bus_as_a_pci_device "by bus: '$(val bybus_softnic0)' '$(val bybus_softnic1)'; subsystem: '$(val subsystem_softnic0)' '$(val subsystem_softnic1)'"

# every entry the real directory of the ports has is still listed, and
# the only ones added are the ports placed there
dir=${port%/*}
if [ -n "$fn0" ] && ls -A "$dir" 2>&1 | sort >"$SN_TMP/outside.ls"; then
    sort "$SN_TMP/inside.ls" >"$SN_TMP/inside.sorted"
    lost=$(comm -13 "$SN_TMP/inside.sorted" "$SN_TMP/outside.ls" | tr '\n' ' ')
    added=$(comm -23 "$SN_TMP/inside.sorted" "$SN_TMP/outside.ls" | tr '\n' ' ')
    want=$(for f in "$fn0" "$fn1"; do p=${f%/*}; [ "${p%/*}" = "$dir" ] && echo "${p##*/}"; done | sort | tr '\n' ' ')
    [ -z "$lost" ] && [ "$added" = "$want" ] && tap_ok "host_functions_still_listed ($dir gains $added)" ||
        tap_not_ok host_functions_still_listed "missing inside: '$lost'; added: '$added', wanted '$want'"
else
    tap_not_ok host_functions_still_listed "no function directory to compare: '$fn0'"
fi

if [ -z "$PCI1" ]; then
    tap_skip host_function_reads_as_outside "no PCI function on this host"
elif [ "$(val pci1_real)" = "$(realpath "/sys/bus/pci/devices/$PCI1")" ] &&
     [ "$(val pci1_class)" = "$(cat "/sys/bus/pci/devices/$PCI1/class")" ]; then
    tap_ok "host_function_reads_as_outside ($PCI1)"
else
    tap_not_ok host_function_reads_as_outside "$PCI1 inside: '$(val pci1_real)' class '$(val pci1_class)'; outside: $(realpath "/sys/bus/pci/devices/$PCI1") class $(cat "/sys/bus/pci/devices/$PCI1/class")"
fi

left=$(ls -A "$SN_TMP/t"; ls -A /sys/class | diff "$SN_TMP/class.before" - | sed 's/^/class: /';
       ls -A /sys/class/infiniband 2>/dev/null | grep '^softnic'; grep -F "$SN_TMP/t" /proc/self/mountinfo)
[ -z "$left" ] && tap_ok nothing_left_outside_after_exit || tap_not_ok nothing_left_outside_after_exit "$left"

# --dual-port: two one-port devices as functions .0 and .1 of one NIC behind
# one port, on one bus, as a ConnectX shows a dual-port card (NCCL fuses
# the devices whose paths differ in the function only, and numbers the
# second one's port 2)
cat >"$SN_TMP/dual.sh" <<'EOF'
for d in softnic0 softnic1; do
    fn=$(realpath /sys/class/infiniband/$d/device)
    bdf=${fn##*/}
    echo "fn_$d=$fn"
    echo "class_$d=$(cat $fn/class)"
    echo "ports_$d=$(ls /sys/class/infiniband/$d/ports | tr '\n' ' ')"
    echo "bybus_$d=$(realpath /sys/class/pci_bus/${bdf%:*}/../../$bdf)"
    echo "portclass_$d=$(cat ${fn%/*}/class)"
done
EOF
SOFTNIC_DEVICES="softnic0:127.0.0.1;softnic1:127.0.0.2" TMPDIR=$SN_TMP/t timeout 60 \
    "$NS" --dual-port -- sh "$SN_TMP/dual.sh" >"$SN_TMP/dual.out" 2>"$SN_TMP/dual.err"
rc=$?
dval() { sed -n "s|^$1=||p" "$SN_TMP/dual.out"; }
d0=$(dval fn_softnic0) d1=$(dval fn_softnic1)
if [ $rc -eq 0 ] && path_ok "$d0" && [ "${d0%.0}.1" = "$d1" ] && [ "${d0%/*}" = "${d1%/*}" ] &&
   [ "$(dval ports_softnic0)|$(dval ports_softnic1)" = "1 |1 " ]; then
    tap_ok "dual_port_devices_are_functions_0_and_1_of_one_nic ($d0, $d1)"
else
    tap_not_ok dual_port_devices_are_functions_0_and_1_of_one_nic "rc=$rc; softnic0 at '$d0', softnic1 at '$d1'; ports '$(dval ports_softnic0)|$(dval ports_softnic1)'; $(cat "$SN_TMP/dual.err" | head -n 20)"
fi
got="$(dval class_softnic0) $(dval class_softnic1) $(dval portclass_softnic0) $(dval portclass_softnic1)"
if [ "$got" = "0x020700 0x020700 0x060400 0x060400" ] && [ -n "$d0" ] &&
   [ "$(dval bybus_softnic0)" = "$d0" ] && [ "$(dval bybus_softnic1)" = "$d1" ]; then
    tap_ok dual_port_functions_found_through_their_one_bus
else
    tap_not_ok dual_port_functions_found_through_their_one_bus "classes '$got'; by bus: '$(dval bybus_softnic0)' '$(dval bybus_softnic1)'"
fi

# a signal's status as a shell gives it; SIGTERM to the program reaches the command
TMPDIR=$SN_TMP/t timeout 60 "$NS" -- sh -c 'kill -KILL $$' 2>/dev/null
k=$?
TMPDIR=$SN_TMP/t timeout 60 "$NS" -- sh -c 'trap "exit 9" TERM; echo up; sleep 30 & wait' \
    >"$SN_TMP/term.out" 2>&1 &
pid=$!
i=0
while [ $i -lt 200 ] && ! grep -qs up "$SN_TMP/term.out"; do sleep 0.05; i=$((i + 1)); done
kill -TERM $pid
wait $pid
t=$?
[ $k -eq 137 ] && [ $t -eq 9 ] && tap_ok signal_status_and_forwarded_term ||
    tap_not_ok signal_status_and_forwarded_term "killed: rc $k (137 wanted); TERM: rc $t (9 wanted); $(cat "$SN_TMP/term.out")"

# usage: 0 for --help, 2 for what it cannot run; unprivileged: an error,
# never the command without the view unless --keep-going asks for it
help=$("$NS" --help 2>&1); h=$?
"$NS" >/dev/null 2>&1; u1=$?
"$NS" --near-gpu --root -- true >/dev/null 2>&1; u2=$?
"$NS" --no-such-option -- true >/dev/null 2>&1; u3=$?
got="$h $u1 $u2 $u3"
if command -v setpriv >/dev/null; then
    out=$(cd / && setpriv --reuid=65534 --regid=65534 --clear-groups env TMPDIR=/tmp \
          "$NS" -- sh -c "echo ran" 2>&1)
    got="$got $?"
    echo "$out" | grep -q 'ran' && got="$got (ran the command: $out)"
    echo "$out" | grep -q 'needs root (CAP_SYS_ADMIN)' || got="$got (no reason: $out)"
    # --keep-going: the reason, then the command on the unchanged /sys
    out=$(cd / && setpriv --reuid=65534 --regid=65534 --clear-groups env TMPDIR=/tmp \
          "$NS" --keep-going -- sh -c "echo ran" 2>&1)
    [ $? -eq 0 ] && echo "$out" | grep -q '^ran$' && echo "$out" | grep -q 'CAP_SYS_ADMIN' ||
        got="$got (--keep-going: $out)"
else
    got="$got 125"
fi
if [ "$got" = "0 2 2 2 125" ] && echo "$help" | grep -q -- '--near-gpu' &&
   echo "$help" | grep -q -- '--root' && echo "$help" | grep -q -- '--keep-going' &&
   echo "$help" | grep -q -- '--dual-port'; then
    tap_ok help_usage_and_refusal_without_root
else
    tap_not_ok help_usage_and_refusal_without_root "help, no command, both placements, unknown option, unprivileged: $got (0 2 2 2 125 wanted); help: $(echo "$help" | head -n 3)"
fi
tap_done
