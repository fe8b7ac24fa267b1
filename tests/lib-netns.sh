# tests/lib-netns.sh: two "hosts" on one machine for shell tests: two
# network namespaces joined by a veth pair, one IPv4 address on each end.
# Sourced after tests/lib.sh.
#
#   netns_up TAG   creates them, or skips every case of the script
#                  (tap_skip_all) with the exact error when this machine
#                  does not permit it (no root, no CAP_SYS_ADMIN/NET_ADMIN,
#                  no veth, no `ip`)
#   netns_down     removes them; call it from the script's EXIT trap
#
# After netns_up: NETNS_A/NETNS_B (namespace names), NETNS_VA/NETNS_VB (the
# veth end in each), NETNS_IPA/NETNS_IPB (their addresses, one /24) and
# NETNS_IN_A/NETNS_IN_B ("ip netns exec <ns>", command prefixes).
# Names carry TAG and the pid: concurrent runs never meet. Addresses only
# need to differ within a pair (each namespace has its own routing).
#
# `ip` comes from PATH, else from $top_builddir/iproute, where
# scripts/gpu-stage puts a copy (with its libraries) for machines without
# iproute2.
if ! command -v ip >/dev/null 2>&1 && [ -x "$top_builddir/iproute/ip" ]; then
    PATH=$top_builddir/iproute:$PATH
    export PATH
fi

NETNS_A= NETNS_B=

netns_down() {
    [ -n "$NETNS_A" ] && ip netns del "$NETNS_A" 2>/dev/null
    [ -n "$NETNS_B" ] && ip netns del "$NETNS_B" 2>/dev/null
    NETNS_A= NETNS_B=
}

# netns_counter NS DEV rx|tx: the byte counter of DEV as seen in NS.
netns_counter() {
    ip netns exec "$1" cat "/sys/class/net/$2/statistics/$3_bytes" 2>/dev/null || echo 0
}

netns_up() {
    command -v ip >/dev/null 2>&1 ||
        tap_skip_all "no ip command (iproute2) here, and no staged copy in $top_builddir/iproute (scripts/gpu-stage)"
    [ "$(id -u)" -eq 0 ] || tap_skip_all "network namespaces need root (uid $(id -u))"
    _tag=$1$(( $$ % 50000 ))
    _net=$(( 16 + $$ % 200 ))
    NETNS_VA=vA$_tag NETNS_VB=vB$_tag
    NETNS_IPA=10.213.$_net.1 NETNS_IPB=10.213.$_net.2
    if ! _err=$(ip netns add "${_tag}A" 2>&1); then
        tap_skip_all "ip netns add is not permitted here: $_err"
    fi
    NETNS_A=${_tag}A
    if ! _err=$(ip netns add "${_tag}B" 2>&1); then
        tap_skip_all "ip netns add (second namespace) failed: $_err"
    fi
    NETNS_B=${_tag}B
    if ! _err=$( { ip link add "$NETNS_VA" type veth peer name "$NETNS_VB" &&
                   ip link set "$NETNS_VA" netns "$NETNS_A" && ip link set "$NETNS_VB" netns "$NETNS_B" &&
                   ip -n "$NETNS_A" addr add "$NETNS_IPA/24" dev "$NETNS_VA" &&
                   ip -n "$NETNS_B" addr add "$NETNS_IPB/24" dev "$NETNS_VB" &&
                   ip -n "$NETNS_A" link set "$NETNS_VA" up && ip -n "$NETNS_B" link set "$NETNS_VB" up &&
                   ip -n "$NETNS_A" link set lo up && ip -n "$NETNS_B" link set lo up; } 2>&1); then
        ip link del "$NETNS_VA" 2>/dev/null
        tap_skip_all "cannot build the veth between two namespaces: $_err"
    fi
    if ! _err=$(ip netns exec "$NETNS_A" true 2>&1); then
        tap_skip_all "ip netns exec is not permitted here: $_err"
    fi
    NETNS_IN_A="ip netns exec $NETNS_A"
    NETNS_IN_B="ip netns exec $NETNS_B"
}
