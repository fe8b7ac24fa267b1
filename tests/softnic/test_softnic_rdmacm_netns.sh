#!/bin/bash
# tests/softnic/test_softnic_rdmacm_netns.sh: softnic's librdmacm between
# two "hosts": two network namespaces joined by a veth pair, each with its
# own softnic (one port on its own address).  The CM maps the addresses to
# those ports, and unchanged rping -V, ucmatose, rdma_server/rdma_client and
# perftest -R connect across.  Needs root and `ip netns`
# (tests/lib-netns.sh); otherwise every case is skipped with the reason.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/softnic/sn_env.sh"
. "$top_srcdir/tests/softnic/sn_cm.sh"
. "$top_srcdir/tests/lib-netns.sh"

for b in rping ucmatose rdma_server rdma_client ib_write_bw ib_send_lat; do
    command -v "$b" >/dev/null || tap_skip_all "$b not installed (apt-get install rdmacm-utils perftest)"
done
trap 'sn_cleanup; netns_down' EXIT
netns_up cm
NSA=$NETNS_A IPA=$NETNS_IPA IPB=$NETNS_IPB
tap_plan 6

SN_SERVER_PREFIX="ip netns exec $NSA env SOFTNIC_DEVICES=softnic0:$IPA"
SN_CLIENT_PREFIX="ip netns exec $NETNS_B env SOFTNIC_DEVICES=softnic0:$IPB"
SN_SERVER_NS=$NSA

# rping's buffers are small and fixed: the -S size and -C count are what
# load the hosts, so a 2-core machine under `make -j2 check` stays within
# what the QP and CQ depths rping asks for can absorb.
cm_pair ns_rping 60 "rping -s -v -V -C 50 -a $IPA -p PORT" "rping -c -v -V -C 50 -a $IPA -p PORT"
if cm_rping_ok ns_rping 50; then tap_ok rping_v_across_namespaces
else tap_not_ok rping_v_across_namespaces "$(sn_why ns_rping)"; fi

cm_pair ns_ucmatose 60 "ucmatose -c 2 -C 20 -b $IPA -p PORT" "ucmatose -s $IPA -c 2 -C 20 -p PORT"
if [ "$SN_SRV_RC" -eq 0 ] && [ "$SN_CLI_RC" -eq 0 ] &&
   grep -q 'return status 0' "$SN_TMP/ns_ucmatose.cli" && grep -q 'return status 0' "$SN_TMP/ns_ucmatose.srv"; then
    tap_ok ucmatose_across_namespaces
else tap_not_ok ucmatose_across_namespaces "$(sn_why ns_ucmatose)"; fi

cm_pair ns_sync 60 "rdma_server -s $IPA -p PORT" "rdma_client -s $IPA -p PORT"
if [ "$SN_SRV_RC" -eq 0 ] && [ "$SN_CLI_RC" -eq 0 ] && grep -q 'rdma_client: end 0' "$SN_TMP/ns_sync.cli"; then
    tap_ok rdma_server_rdma_client_across_namespaces
else tap_not_ok rdma_server_rdma_client_across_namespaces "$(sn_why ns_sync)"; fi

cm_pair ns_write 60 "ib_write_bw -R -d softnic0 -x 0 -F -n 500 -s 1048576 -p PORT" \
    "ib_write_bw -R -d softnic0 -x 0 -F -n 500 -s 1048576 -p PORT $IPA"
if [ "$SN_SRV_RC" -eq 0 ] && [ "$SN_CLI_RC" -eq 0 ] && sn_bw_ok "$SN_TMP/ns_write.cli" 1 500; then
    tap_ok ib_write_bw_R_across_namespaces
    sn_last_result "$SN_TMP/ns_write.cli" ib_write_bw_R_across_namespaces
else tap_not_ok ib_write_bw_R_across_namespaces "$(sn_why ns_write)"; fi

cm_pair ns_lat 60 "ib_send_lat -R -d softnic0 -x 0 -F -n 300 -p PORT" "ib_send_lat -R -d softnic0 -x 0 -F -n 300 -p PORT $IPA"
if [ "$SN_SRV_RC" -eq 0 ] && [ "$SN_CLI_RC" -eq 0 ] && sn_lat_ok "$SN_TMP/ns_lat.cli" 300; then
    tap_ok ib_send_lat_R_across_namespaces
else tap_not_ok ib_send_lat_R_across_namespaces "$(sn_why ns_lat)"; fi

# The other namespace's address is no port of this host's softnic (it reads
# DOWN here): binding to it fails as the kernel's rdma_bind_addr does for an
# address this host does not have.
out=$(ip netns exec "$NSA" env SOFTNIC_DEVICES="softnic0:$IPA" timeout 20 rping -s -a "$IPB" -p 7999 -C 1 2>&1)
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && echo "$out" | grep -q 'rdma_bind_addr.*Cannot assign requested address'; then
    tap_ok bind_to_the_other_hosts_address_fails
else tap_not_ok bind_to_the_other_hosts_address_fails "rc=$rc: $out"; fi

tap_done
