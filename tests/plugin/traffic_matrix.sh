#!/bin/sh
# tests/plugin/traffic_matrix.sh: the plugin driven as NCCL's proxy drives it
# (tests/netdriver traffic: random sizes from 0 bytes, grouped receives with
# smaller sends, out-of-order tags, 32 requests in flight, every byte
# verified), over QPs per connection x merged/unmerged ports x grouped
# receives, then more ranks and the largest sizes.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
plugin_on_softnic
nd=$top_builddir/tests/netdriver/netdriver
tap_plan 19
run() { # name env... -- netdriver traffic args
    name=$1; shift
    envs=
    while [ "$1" != -- ]; do envs="$envs $1"; shift; done; shift
    if out=$(env $envs "$nd" --plugin "$plugin" traffic "$@" 2>&1) && printf '%s' "$out" | grep -q '^netdriver traffic: ok'; then
        tap_ok "$name"
    else
        tap_not_ok "$name" "$(printf '%s\n' "$out" | grep -v ' INFO ' | tail -n 15 | sed 's/^/# /')"
    fi
}
for qps in 1 2 4; do
    for merge in 1 0; do
        for recvs in 1 8; do
            devs=1; [ $merge = 0 ] && devs=2
            run "traffic_qps${qps}_merge${merge}_recvs${recvs}" RAILNET_QPS_PER_CONN=$qps RAILNET_MERGE_PORTS=$merge -- \
                --ranks 2 --devs $devs --iters 60 --max-size 2M --max-recvs $recvs --seed $((qps * 10 + merge * 2 + recvs))
        done
    done
done
run traffic_8_ranks_all_pairs -- --ranks 8 --iters 25 --max-size 256K --seed 7
run traffic_sizes_to_64MiB_split_over_qps RAILNET_SPLIT_MIN=16K -- --ranks 2 --iters 12 --max-size 64M --seed 11
run traffic_small_messages_only_round_robin -- --ranks 3 --iters 200 --max-size 4K --inflight 32 --seed 13
run traffic_one_request_in_flight -- --ranks 2 --iters 100 --max-size 1M --inflight 1 --seed 17
# A receiver whose NIC acts on ACKs late (softnic ack_delay_us on rank 1
# only): its receives finish when the data lands, long before their CTS
# writes complete, so irecv must wait for send-queue room instead of
# posting into a full queue (failed with ENOMEM before).
out=$("$nd" --plugin "$plugin" --rank-wrap env \
    --rank-wrap "env SOFTNIC_PORT_OPTS=softnic0:1:ack_delay_us=2000;softnic0:2:ack_delay_us=2000" \
    traffic --ranks 2 --iters 400 --max-size 4K --inflight 32 --seed 5 2>&1)
if printf '%s' "$out" | grep -q '^netdriver traffic: ok'; then tap_ok traffic_late_acks_do_not_overflow_the_send_queue
else tap_not_ok traffic_late_acks_do_not_overflow_the_send_queue "$(printf '%s\n' "$out" | grep -v ' INFO ' | tail -n 8 | sed 's/^/# /')"; fi
# the measuring subcommands check what they receive too (content, sizes)
why=
for cmd in "lat --size 8 --iters 50" "lat --size 4096 --iters 50" "bw --min 0 --max 1M --iters 20"; do
    out=$("$nd" --plugin "$plugin" $cmd 2>&1) || why="$why $cmd: $(printf '%s' "$out" | grep -v ' INFO ' | tail -n 3);"
done
[ -z "$why" ] && tap_ok netdriver_lat_and_bw_complete_with_checked_data ||
    tap_not_ok netdriver_lat_and_bw_complete_with_checked_data "$why"
out=$("$nd" --plugin "$plugin" lat --size 8193 2>&1); st=$?
[ $st -eq 2 ] && tap_ok netdriver_lat_refuses_sizes_over_4KiB || tap_not_ok netdriver_lat_refuses_sizes_over_4KiB "exit $st"
tap_done
