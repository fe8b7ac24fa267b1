#!/bin/bash
# tests/softnic/test_softnic_netns.sh: two "hosts" on one machine: two
# network namespaces joined by a veth pair, each with its own softnic
# configuration (one port on its own address).  Unchanged rdma-core and
# perftest programs talk across them, found from (GID, QPN) alone.  Needs
# root and `ip netns` (tests/lib-netns.sh); otherwise every case is skipped
# with the reason.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/softnic/sn_env.sh"

. "$top_srcdir/tests/lib-netns.sh"

for b in ibv_devinfo ibv_rc_pingpong ib_write_bw ib_read_bw; do
    command -v "$b" >/dev/null || tap_skip_all "$b not installed"
done
trap 'sn_cleanup; netns_down' EXIT
netns_up sn
NSA=$NETNS_A NSB=$NETNS_B IPA=$NETNS_IPA IPB=$NETNS_IPB
tap_plan 7

IN_A="ip netns exec $NSA env SOFTNIC_DEVICES=softnic0:$IPA"
IN_B="ip netns exec $NSB env SOFTNIC_DEVICES=softnic0:$IPB"

out=$($IN_A timeout 20 ibv_devinfo -v 2>&1)
outb=$($IN_B timeout 20 ibv_devinfo -v 2>&1)
if echo "$out" | grep -q "GID\[  0\]:[[:space:]]*::ffff:$IPA, RoCE v2" &&
   echo "$outb" | grep -q "GID\[  0\]:[[:space:]]*::ffff:$IPB, RoCE v2" &&
   echo "$out" | grep -q 'state:[[:space:]]*PORT_ACTIVE'; then
    tap_ok each_namespace_has_its_own_gid
else tap_not_ok each_namespace_has_its_own_gid "$out"; fi

# An address that belongs to the other namespace cannot be bound: DOWN.
out=$(ip netns exec "$NSA" env SOFTNIC_DEVICES="softnic0:$IPA,$IPB" timeout 20 ibv_devinfo 2>&1)
if [ "$(echo "$out" | grep -c 'state:[[:space:]]*PORT_ACTIVE')" -eq 1 ] &&
   [ "$(echo "$out" | grep -c 'state:[[:space:]]*PORT_DOWN')" -eq 1 ]; then
    tap_ok address_of_another_host_is_a_down_port
else tap_not_ok address_of_another_host_is_a_down_port "$out"; fi

SN_SERVER_PREFIX=$IN_A SN_SERVER_NS=$NSA SN_CLIENT_PREFIX=$IN_B SN_SERVER_ADDR=$IPA
sn_pair netns_pingpong 30 ibv_rc_pingpong -d softnic0 -g 0 -n 500 -c
if [ "$SN_SRV_RC" -eq 0 ] && [ "$SN_CLI_RC" -eq 0 ] && grep -q '^500 iters in' "$SN_TMP/netns_pingpong.cli"; then
    tap_ok ibv_rc_pingpong_across_namespaces
else tap_not_ok ibv_rc_pingpong_across_namespaces "$(sn_why netns_pingpong)"; fi

# with its debug lines, the server's softnic says which path each incoming
# connection's payloads take: the same-host fast path (cma.c) must refuse
# a peer of another namespace, which keeps the TCP wire
SN_SERVER_PREFIX="$IN_A SOFTNIC_DEBUG=1"
sn_pair netns_write 60 ib_write_bw -d softnic0 -x 0 -s 1048576 -n 500
SN_SERVER_PREFIX=$IN_A
if [ "$SN_SRV_RC" -eq 0 ] && [ "$SN_CLI_RC" -eq 0 ] && sn_bw_ok "$SN_TMP/netns_write.cli" 1 500; then
    tap_ok ib_write_bw_across_namespaces
    sn_last_result "$SN_TMP/netns_write.cli" ib_write_bw_across_namespaces
else tap_not_ok ib_write_bw_across_namespaces "$(sn_why netns_write)"; fi
if grep -q 'payloads on the wire' "$SN_TMP/netns_write.srv" &&
   ! grep -q 'cross-memory attach' "$SN_TMP/netns_write.srv"; then
    tap_ok peer_of_another_namespace_keeps_the_wire
else tap_not_ok peer_of_another_namespace_keeps_the_wire "$(grep -i 'responder\|cma' "$SN_TMP/netns_write.srv" | head -5)"; fi

sn_pair netns_read 60 ib_read_bw -d softnic0 -x 0 -q 2 -n 200
if [ "$SN_SRV_RC" -eq 0 ] && [ "$SN_CLI_RC" -eq 0 ] && sn_bw_ok "$SN_TMP/netns_read.cli" 1 400; then
    tap_ok ib_read_bw_2_qps_across_namespaces
else tap_not_ok ib_read_bw_2_qps_across_namespaces "$(sn_why netns_read)"; fi

# The server's host goes away mid-run: the client must fail, not hang
# (within softnic's own retry budget: $SN_FAULT_BUDGET).
sn_next_port
$IN_A $SN_FAULT_BUDGET timeout 30 $SN_LINEBUF ib_write_bw -d softnic0 -x 0 -s 1048576 -D 20 -p "$SN_PORT" >"$SN_TMP/cut.srv" 2>&1 &
spid=$!
disown "$spid"       # killed below: no job notice in the log
SN_PIDS="$SN_PIDS $spid"
sn_wait_listen "$SN_PORT" "$NSA"
$IN_B $SN_FAULT_BUDGET timeout 30 $SN_LINEBUF ib_write_bw -d softnic0 -x 0 -s 1048576 -D 20 -p "$SN_PORT" "$IPA" >"$SN_TMP/cut.cli" 2>&1 &
cpid=$!
SN_PIDS="$SN_PIDS $cpid"
# The cut comes once the client is in its timed run (its result header is
# out): perftest's own TCP exchange before it reads with no time limit, and
# a cut there (a loaded host taking over 2 s to get through it; gdb: the
# client in read() of its 16-byte exchange, 1 in 11 runs at load ~40) left
# it blocked until its timeout killed it.  Then 1 s of traffic.
i=0
while [ $i -lt 300 ] && kill -0 "$cpid" 2>/dev/null && ! grep -q '#bytes' "$SN_TMP/cut.cli"; do
    sleep 0.1
    i=$((i + 1))
done
sleep 1
ip -n "$NSA" link set "$NETNS_VA" down
t0=$(date +%s)
wait "$cpid"
crc=$?
t1=$(date +%s)
if [ "$crc" -ne 0 ] && [ "$crc" -ne 124 ] && [ $((t1 - t0)) -lt 15 ]; then
    tap_ok client_fails_promptly_when_the_link_is_cut
    grep -m1 -i 'completion with error\|status' "$SN_TMP/cut.cli" | sed 's/^/# /'
else tap_not_ok client_fails_promptly_when_the_link_is_cut "client rc=$crc after $((t1 - t0)) s: $(tail -n 5 "$SN_TMP/cut.cli")"; fi
sn_stop "$spid"

tap_done
