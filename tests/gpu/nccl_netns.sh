#!/bin/sh
# Two "nodes" on one GPU machine: the two-rank NCCL job with each
# rank in its own network namespace, the namespaces joined by a veth pair
# (tests/lib-netns.sh). In each namespace softnic is one port on that
# namespace's veth address (SOFTNIC_DEVICES=softnic0:<addr>), NCCL's
# bootstrap uses the veth (NCCL_SOCKET_IFNAME) and railnet's handshake
# listens on the port's IPv4 (its default), and each rank has its own
# NCCL_HOSTID: nothing but the veth joins the ranks. all_reduce, all_gather
# and send/recv in fp32, 4 B..64 MiB, checked on every rank; the logs must
# show railnet loaded and used by both ranks, each listening on its own
# address, the bootstrap on the veth, and the veth counters the traffic.
# Where this machine does not permit namespaces, every case is skipped with
# the exact error (that is the answer to "does the GPU machine allow it").
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/gpu/lib-nccl.sh"
. "$top_srcdir/tests/lib-netns.sh"
prog=$top_builddir/tests/gpu/nccl_collectives
[ -x "$prog" ] || tap_skip_all "tests/gpu/nccl_collectives not built (configure found no NCCL)"
if [ "$(gpu_count)" -lt 1 ]; then
    tap_skip_all "no CUDA GPU on this machine (run make check-gpu on a GPU machine)"
fi
trap netns_down EXIT
netns_up gn
colls=all_reduce,all_gather,send_recv
ncolls=3
tap_plan $((ncolls + 5))

NCCL_RANK_WRAP_0="$NETNS_IN_A env SOFTNIC_DEVICES=softnic0:$NETNS_IPA NCCL_SOCKET_IFNAME=$NETNS_VA NCCL_HOSTID=railnet-netns-a"
NCCL_RANK_WRAP_1="$NETNS_IN_B env SOFTNIC_DEVICES=softnic0:$NETNS_IPB NCCL_SOCKET_IFNAME=$NETNS_VB NCCL_HOSTID=railnet-netns-b"
rxa0=$(netns_counter "$NETNS_A" "$NETNS_VA" rx)
rxb0=$(netns_counter "$NETNS_B" "$NETNS_VB" rx)
NCCL_NET_PLUGIN=$RAILNET_PLUGIN NCCL_NET_GDR_LEVEL=SYS \
    nccl_job netns 2 "$prog" --mode check --colls $colls --types fp32 --max-bytes $((64 << 20)) --timeout 300
status=$?
rxa=$(( $(netns_counter "$NETNS_A" "$NETNS_VA" rx) - rxa0 ))
rxb=$(( $(netns_counter "$NETNS_B" "$NETNS_VB" rx) - rxb0 ))
log0=$JOBDIR/netns.rank0.log
log1=$JOBDIR/netns.rank1.log

# rank 0's TAP lines, renamed; a missing line is a failure
got=$(grep -cE '^(not )?ok [0-9]+ - nccl_' "$log0")
grep -E '^(not )?ok [0-9]+ - nccl_' "$log0" | while IFS= read -r line; do
    case "$line" in
        "not ok"*) echo "not ok - netns_${line#not ok * - }" ;;
        *) echo "ok - netns_${line#ok * - }" ;;
    esac
done
TAP_N=$((TAP_N + got))
TAP_FAILED=$((TAP_FAILED + $(grep -cE '^not ok [0-9]+ - nccl_' "$log0")))
missing=$((ncolls - got)); while [ $missing -gt 0 ]; do
    tap_not_ok netns_collective_missing "$(tail -n 30 "$log0" "$log1" | sed 's/^/# /')"; missing=$((missing - 1)); done

ok=1
for r in 0 1; do
    if [ $r = 0 ]; then ip=$NETNS_IPA log=$log0; else ip=$NETNS_IPB log=$log1; fi
    grep -q "Loaded net plugin railnet (v11)" "$log" && grep -q "Using network railnet" "$log" &&
        grep -q "NET/railnet: listening for device 0 on $ip port" "$log" || ok=0
done
if [ $ok = 1 ]; then
    tap_ok netns_both_ranks_used_railnet_listening_on_their_own_address
else
    tap_not_ok netns_both_ranks_used_railnet_listening_on_their_own_address \
        "$(grep -hE 'NET/Plugin|Using network|NET/railnet: (listening|device|no )' "$log0" "$log1" | head -n 20 | sed 's/^/# /')"
fi

# NCCL names its bootstrap interface as <ifname>:<address>
if grep -qF "$NETNS_VA:$NETNS_IPA" "$log0" && grep -qF "$NETNS_VB:$NETNS_IPB" "$log1"; then
    tap_ok netns_nccl_bootstrap_over_the_veth
else
    tap_not_ok netns_nccl_bootstrap_over_the_veth \
        "$(grep -hE 'Bootstrap|SOCKET_IFNAME|Using \[' "$log0" "$log1" | head -n 10 | sed 's/^/# /')"
fi

# The 64 MiB all_reduce alone moves 64 MiB into each rank.
if [ $rxa -ge $((64 << 20)) ] && [ $rxb -ge $((64 << 20)) ]; then
    tap_ok "netns_the_bytes_crossed_the_veth (rx $rxa and $rxb bytes)"
else
    tap_not_ok netns_the_bytes_crossed_the_veth "veth rx grew by $rxa (A) and $rxb (B) bytes, 64 MiB each expected"
fi

ngdr=$(grep -c "/GDRDMA" "$log0")
if [ "$ngdr" -gt 0 ]; then
    tap_ok netns_gdr_on_in_channel_log
else
    tap_not_ok netns_gdr_on_in_channel_log "no channel line with /GDRDMA; $(grep -E 'via NET' "$log0" | head -n 4 | sed 's/^/# /')"
fi

[ $status -eq 0 ] && tap_ok netns_all_ranks_exit_0 ||
    tap_not_ok netns_all_ranks_exit_0 "worst exit status $status; rank1: $(grep -E 'failed|WARN' "$log1" | head -n 10)"
tap_done
