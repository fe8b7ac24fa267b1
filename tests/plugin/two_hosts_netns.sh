#!/bin/sh
# tests/plugin/two_hosts_netns.sh: the plugin between two "hosts": two network
# namespaces joined by a veth pair (tests/lib-netns.sh), one netdriver rank
# in each (a process of its own, started through `ip netns exec`, with its
# own SOFTNIC_DEVICES=softnic0:<its veth address>). The plugin's bootstrap
# and softnic's transport can only meet over the veth. Checks: each rank's
# plugin listens on its own namespace's address; verified traffic (random
# sizes, every byte checked) and a bandwidth run across; the veth counters
# carried at least the verified bytes. This is the CPU-side twin of
# tests/gpu/nccl_netns.sh. Skips every case, with the reason, where
# namespaces are not permitted.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/lib-netns.sh"
plugin_on_softnic
nd=$top_builddir/tests/netdriver/netdriver
[ -x "$nd" ] || tap_skip_all "tests/netdriver/netdriver not built"
TMPD=$(mktemp -d /tmp/railnet_netns.XXXXXX)
trap 'netns_down; rm -rf "$TMPD"' EXIT
netns_up pn
tap_plan 6

# rank 0 in namespace A, rank 1 in namespace B
across() {
    timeout 200 "$nd" --plugin "$plugin" \
        --rank-wrap "$NETNS_IN_A env SOFTNIC_DEVICES=softnic0:$NETNS_IPA" \
        --rank-wrap "$NETNS_IN_B env SOFTNIC_DEVICES=softnic0:$NETNS_IPB" "$@"
}
why() { grep -v ' INFO ' "$1" | tail -n 15 | sed 's/^/# /'; }

rxa0=$(netns_counter "$NETNS_A" "$NETNS_VA" rx)
rxb0=$(netns_counter "$NETNS_B" "$NETNS_VB" rx)
across traffic --iters 30 --max-size 1M --timeout 150 >"$TMPD/traffic" 2>&1
st=$?
rxa1=$(netns_counter "$NETNS_A" "$NETNS_VA" rx)
rxb1=$(netns_counter "$NETNS_B" "$NETNS_VB" rx)

# The handles carry these addresses: nothing else could be reached.
if grep -q "NET/railnet: listening for device 0 on $NETNS_IPA port" "$TMPD/traffic" &&
   grep -q "NET/railnet: listening for device 0 on $NETNS_IPB port" "$TMPD/traffic" &&
   ! grep "NET/railnet: listening for device" "$TMPD/traffic" | grep -vq "on $NETNS_IPA port\|on $NETNS_IPB port"; then
    tap_ok each_rank_listens_on_its_own_namespace_address
else
    tap_not_ok each_rank_listens_on_its_own_namespace_address \
        "$(grep -E 'listening|railnet: device|no RDMA|no usable' "$TMPD/traffic" | head -n 8)"
fi

# "rank R: N streams done, B bytes verified, V of them received"
v0=$(sed -n 's/^rank 0: .* bytes verified, \([0-9][0-9]*\) of them received$/\1/p' "$TMPD/traffic")
v1=$(sed -n 's/^rank 1: .* bytes verified, \([0-9][0-9]*\) of them received$/\1/p' "$TMPD/traffic")
if [ $st -eq 0 ] && grep -q '^netdriver traffic: ok' "$TMPD/traffic" && [ "${v0:-0}" -gt 0 ] && [ "${v1:-0}" -gt 0 ]; then
    tap_ok "traffic_across_namespaces_every_byte_verified ($v0 and $v1 bytes received)"
else
    tap_not_ok traffic_across_namespaces_every_byte_verified "exit $st; $(why "$TMPD/traffic")"
fi

# Each rank verifies what it received: that much entered its veth end.
if [ "${v0:-0}" -gt 0 ] && [ $((rxa1 - rxa0)) -ge "$v0" ] && [ $((rxb1 - rxb0)) -ge "${v1:-0}" ]; then
    tap_ok "the_bytes_crossed_the_veth (rx $((rxa1 - rxa0)) and $((rxb1 - rxb0)) bytes)"
else
    tap_not_ok the_bytes_crossed_the_veth "veth rx grew by $((rxa1 - rxa0)) (A) and $((rxb1 - rxb0)) (B); verified ${v0:-?} and ${v1:-?}"
fi

# Bandwidth across (rank 0 in A streams to rank 1 in B); the last message
# of each size is checked byte for byte by netdriver. Speed is reported,
# not judged: timing never decides a test (bench/ does).
across bw --min 1M --max 16M --timeout 150 >"$TMPD/bw" 2>&1
st=$?
rows=$(grep -cE '^ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$' "$TMPD/bw")
if [ $st -eq 0 ] && [ "$rows" -eq 5 ]; then
    tap_ok bw_across_namespaces_1MiB_to_16MiB_data_checked
    grep -E '^ +[0-9]+ +[0-9]+ ' "$TMPD/bw" | awk '{ printf "# across namespaces: %8d bytes %6.3f GB/s\n", $1, $4 }'
else
    tap_not_ok bw_across_namespaces_1MiB_to_16MiB_data_checked "exit $st, $rows rows; $(why "$TMPD/bw")"
fi

# The same through the RDMA CM (RAILNET_CM=rdmacm): softnic's librdmacm in
# each namespace maps the handle's address to the other's port.
if [ -e "$top_builddir/tests/softnic/librdmacm.so.1" ]; then
    RAILNET_CM=rdmacm across traffic --iters 20 --max-size 1M --timeout 150 >"$TMPD/cm" 2>&1
    st=$?
    if [ $st -eq 0 ] && grep -q '^netdriver traffic: ok' "$TMPD/cm" &&
       grep -q "listening for device 0 on $NETNS_IPA port .* through the RDMA CM" "$TMPD/cm" &&
       grep -q "connected on softnic0 with .* through the RDMA CM" "$TMPD/cm"; then
        tap_ok traffic_across_namespaces_through_the_rdma_cm
    else tap_not_ok traffic_across_namespaces_through_the_rdma_cm "exit $st; $(why "$TMPD/cm")"; fi
else
    tap_skip traffic_across_namespaces_through_the_rdma_cm "softnic's librdmacm is not built (no librdmacm-dev at configure)"
fi

# Without the veth the ranks cannot meet: an error, never a hang.
ip -n "$NETNS_A" link set "$NETNS_VA" down
t0=$(date +%s)
across traffic --iters 5 --timeout 30 >"$TMPD/cut" 2>&1
st=$?
t1=$(date +%s)
if [ $st -ne 0 ] && [ $st -ne 124 ] && grep -q '^netdriver traffic: FAILED' "$TMPD/cut"; then
    tap_ok "link_down_is_an_error_not_a_hang (after $((t1 - t0)) s)"
    grep -m1 -E 'WARN|returned' "$TMPD/cut" | sed 's/^/# /'
else
    tap_not_ok link_down_is_an_error_not_a_hang "exit $st after $((t1 - t0)) s; $(why "$TMPD/cut")"
fi
tap_done
