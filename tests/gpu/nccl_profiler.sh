#!/bin/sh
# GPU: railnet's network events reach a real NCCL profiler. A 2-rank NCCL
# job (PyTorch's NCCL, 2.28.9 on the GPU machines, else the system's; P2P
# and SHM off so that every byte crosses railnet on softnic) sends 4 MiB from
# rank 0 to rank 1 (send_recv, fp32, checked) with NCCL's own example
# profiler plugin loaded (NCCL_PROFILER_PLUGIN=$top_builddir/nccl-profiler/
# libnccl-profiler-example.so, built by scripts/build-nccl-profiler and
# staged by scripts/gpu-stage; NCCL_PROFILER_EXAMPLE=PATH takes another
# build of it) and NCCL_PROFILE_EVENT_MASK=128
# (ncclProfileNetPlugin; NCCL then also makes the proxy step, proxy op, p2p
# and API events that a network event hangs from). The example profiler
# keeps a network event only when its plugin id is NCCL_PROFILER_NET_TYPE_IB
# | 1 and its type ncclProfileQp, and writes it at ncclCommFinalize/Destroy
# into NCCL_PROFILE_DUMP_FILE_<commHash>_<rank>.json as one line
#   {"name": "Qp", "cat": "NET_IB", "ph": "b", ..., "args": {"device": D,
#    "qp_num": Q, "opcode": O, "wr_id": W, "size": S}},
# RAILNET_STATS=1 makes railnet log, at close, the bytes and writes of every
# QP of a send comm and the QPs of a receive comm, with their numbers: the
# events' QPs and sizes must be those. Rank 0's events are its chunks
# (IBV_WR_RDMA_WRITE_WITH_IMM, wr_id kind WR_SEND in plugin/ib/comm.h,
# sizes summing to the 4 MiB sent); rank 1's its clear-to-send writes
# (IBV_WR_RDMA_WRITE, kind WR_CTS, the posted sizes). The same job without
# the profiler must run the same and leave no trace. Needs NCCL 2.26 or
# later (net v10, whose init passes the profiler callback).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/gpu/lib-nccl.sh"
prog=$top_builddir/tests/gpu/nccl_collectives
prof=${NCCL_PROFILER_EXAMPLE:-$top_builddir/nccl-profiler/libnccl-profiler-example.so}
bytes=$((4 << 20))
ncases=14
if [ "$(gpu_count)" -lt 1 ]; then
    tap_skip_all "no CUDA GPU on this machine (run make check-gpu on a GPU machine)"
fi
[ -x "$prog" ] || tap_skip_all "tests/gpu/nccl_collectives not built (configure found no NCCL)"
[ -f "$prof" ] || tap_skip_all "NCCL's example profiler not built: $prof (scripts/build-nccl-profiler SRC, SRC a checkout or git archive of NVIDIA/nccl, then scripts/gpu-stage)"
unset NCCL_PROFILER_PLUGIN NCCL_PROFILE_EVENT_MASK NCCL_PROFILE_DUMP_FILE
tl=$(nccl_torch_lib)
ld=$LD_LIBRARY_PATH which="the system's NCCL"
if [ -e "$tl/libnccl.so.2" ]; then ld=$SOFTNIC_DIR:$tl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} which="PyTorch's NCCL ($tl)"; fi
echo "# NCCL: $which; profiler: $prof (NCCL $(cat "$(dirname "$prof")/nccl-version" 2>/dev/null || echo '?')'s example)"
dump=$JOBDIR/prof.dump
rm -f "$dump"_* "$JOBDIR"/noprof.dump_*
tap_plan $ncases

# job NAME [VAR=VALUE...]: the 4 MiB send_recv, every rank's log in
# $JOBDIR/NAME.rank<r>.log; the status of the worst rank
job() {
    _n=$1; shift
    # shellcheck disable=SC2163 # each argument is a NAME=VALUE to export
    ( export "$@" LD_LIBRARY_PATH="$ld" NCCL_NET_PLUGIN="$RAILNET_PLUGIN" NCCL_NET_GDR_LEVEL=SYS RAILNET_STATS=1
      nccl_job "$_n" 2 "$prog" --mode check --colls send_recv --types fp32 --min-bytes $bytes --max-bytes $bytes \
          --timeout 120 )
}
# checked NAME STATUS: rank 0's TAP line of the send_recv and every rank's exit
checked() {
    grep -qE "^ok [0-9]+ - nccl_send_recv_fp32_${bytes}B" "$JOBDIR/$1.rank0.log" && [ "$2" -eq 0 ]
}
# qp_events LOG: "qp opcode wr_id size" per NET_IB Qp event of a dump
qp_events() {
    sed -n 's/.*"name": "Qp", "cat": "NET_IB", "ph": "b".*"qp_num": \(-*[0-9]*\), "opcode": \(-*[0-9]*\), "wr_id": \([0-9]*\), "size": \([0-9]*\)}.*/\1 \2 \3 \4/p' "$@"
}
# send_stats LOG: "qp bytes writes" per send QP railnet's stats named (qp in decimal)
send_stats() {
    sed -n 's/.*NET\/railnet stats: send [^ ]* port [0-9]* QP 0x\([0-9a-fA-F]*\): \([0-9]*\) bytes in \([0-9]*\) writes.*/\1 \2 \3/p' "$1" |
        while read -r q b w; do echo "$(printf '%d' "0x$q") $b $w"; done
}
# recv_qps LOG: the numbers (decimal) of the receive comms' QPs
recv_qps() {
    sed -n 's/.*NET\/railnet stats: recv [^ ]* port [0-9]* QP 0x\([0-9a-fA-F]*\): .*/\1/p' "$1" |
        while read -r q; do printf '%d\n' "0x$q"; done
}

job prof NCCL_PROFILER_PLUGIN="$prof" NCCL_PROFILE_EVENT_MASK=128 NCCL_PROFILE_DUMP_FILE="$dump"
status=$?
log0=$JOBDIR/prof.rank0.log
log1=$JOBDIR/prof.rank1.log
if checked prof $status; then tap_ok prof_send_recv_4MiB_checked_all_ranks_exit_0
else tap_not_ok prof_send_recv_4MiB_checked_all_ranks_exit_0 "worst exit status $status; $(grep -E 'nccl_send_recv|failed|WARN' "$log0" "$log1" | head -n 10)"; fi

ver=$(sed -n 's/.*NCCL version \([0-9]*\.[0-9]*\.[0-9]*\).*/\1/p' "$log0" | head -n 1)
if [ -z "$ver" ]; then
    tap_not_ok prof_nccl_version_in_log "no 'NCCL version' line in $log0: $(tail -n 5 "$log0")"
    i=2; while [ $i -lt $ncases ]; do tap_skip "prof_case_$i" "no NCCL version known"; i=$((i + 1)); done
    tap_done; exit
fi
maj=${ver%%.*} min=${ver#*.}; min=${min%%.*}
if [ "$maj" -lt 2 ] || { [ "$maj" -eq 2 ] && [ "$min" -lt 26 ]; }; then
    i=1; while [ $i -lt $ncases ]; do tap_skip "prof_case_$i" "NCCL $ver ran ($which): net v10's profiler callback needs NCCL 2.26 or later"; i=$((i + 1)); done
    tap_done; exit
fi
tap_ok "prof_ran_nccl_${ver}_net_v10_or_later"

netv=$(sed -n 's/.*Loaded net plugin railnet (v\([0-9]*\)).*/\1/p' "$log0" | head -n 1)
if [ "${netv:-0}" -ge 10 ] && grep -q "Using network railnet" "$log0"; then tap_ok "prof_nccl_loaded_and_used_railnet_v$netv"
else tap_not_ok prof_nccl_loaded_and_used_railnet_v10_or_later "table v${netv:-none}; $(grep -E 'NET/|network' "$log0" | head -n 20 | sed 's/^/# /')"; fi

if grep -q "Successfully loaded external profiler plugin .*$(basename "$prof")" "$log0" &&
   grep -q "Successfully loaded external profiler plugin" "$log1" && grep -q "PROFILER/Plugin: init" "$log0"; then
    tap_ok prof_nccl_loaded_the_example_profiler_on_every_rank
else tap_not_ok prof_nccl_loaded_the_example_profiler_on_every_rank "$(grep -iE 'PROFILER' "$log0" "$log1" | head -n 10)"; fi

d0='' d1=''
for f in "$dump"_*_0.json; do [ -f "$f" ] && d0=$f; done
for f in "$dump"_*_1.json; do [ -f "$f" ] && d1=$f; done
if [ -n "$d0" ] && [ -n "$d1" ] && tail -n 1 "$d0" | grep -q '^{}]$' && tail -n 1 "$d1" | grep -q '^{}]$'; then
    tap_ok prof_a_whole_dump_per_rank
else tap_not_ok prof_a_whole_dump_per_rank "dumps: $(for f in "$dump"_*; do echo "$f: $(tail -c 40 "$f" 2>&1)"; done)"; fi

# rank 0: its chunks
ev0=$JOBDIR/prof.events0 ev1=$JOBDIR/prof.events1
qp_events "${d0:-/dev/null}" >"$ev0"
qp_events "${d1:-/dev/null}" >"$ev1"
n0=$(wc -l <"$ev0")
if [ "$n0" -gt 0 ]; then tap_ok "prof_rank0_ib_v1_qp_events_in_the_dump ($n0)"
else tap_not_ok prof_rank0_ib_v1_qp_events_in_the_dump "$(grep -c '"cat": "NET' "${d0:-/dev/null}") NET events in ${d0:-no dump}; $(grep '"cat": "NET' "${d0:-/dev/null}" | head -n 5)"; fi

# wr_id: kind in the top byte (plugin/ib/comm.h: WR_SEND 1, WR_CTS 2)
bad0=$(awk '$2 != 1 || int($3 / 72057594037927936) != 1 || $4 <= 0' "$ev0" | head -n 5)
if [ "$n0" -gt 0 ] && [ -z "$bad0" ]; then tap_ok prof_rank0_events_are_rdma_writes_with_imm_of_send_work_requests
else tap_not_ok prof_rank0_events_are_rdma_writes_with_imm_of_send_work_requests "want opcode 1 (IBV_WR_RDMA_WRITE_WITH_IMM), wr_id kind 1, size > 0; qp/opcode/wr_id/size: $bad0"; fi

sum0=$(awk '{ s += $4 } END { print s + 0 }' "$ev0")
if [ "$sum0" -eq $bytes ]; then tap_ok "prof_rank0_event_sizes_sum_to_the_${bytes}_bytes_sent"
else tap_not_ok "prof_rank0_event_sizes_sum_to_the_${bytes}_bytes_sent" "sum of sizes $sum0 in $n0 events"; fi

# per QP: the events' count and bytes against what railnet counted
send_stats "$log0" | awk '$2 > 0 { print $1, $2, $3 }' | sort >"$JOBDIR/prof.stats0"
awk '{ b[$1] += $4; n[$1]++ } END { for (q in b) print q, b[q], n[q] }' "$ev0" | sort >"$JOBDIR/prof.byqp0"
if [ -s "$JOBDIR/prof.stats0" ] && cmp -s "$JOBDIR/prof.stats0" "$JOBDIR/prof.byqp0"; then
    tap_ok "prof_rank0_events_per_qp_match_railnet_stats ($(awk '{ printf "%s%s", s, $1; s = "," }' "$JOBDIR/prof.stats0"))"
else tap_not_ok prof_rank0_events_per_qp_match_railnet_stats "qp bytes writes: railnet's stats: $(tr '\n' ';' <"$JOBDIR/prof.stats0") the profiler's events: $(tr '\n' ';' <"$JOBDIR/prof.byqp0")"; fi

# rank 1: its clear-to-send writes, one per receive buffer, the posted size
n1=$(wc -l <"$ev1")
sum1=$(awk '{ s += $4 } END { print s + 0 }' "$ev1")
bad1=$(awk '$2 != 0 || int($3 / 72057594037927936) != 2 || $4 <= 0' "$ev1" | head -n 5)
if [ "$n1" -gt 0 ] && [ -z "$bad1" ] && [ "$sum1" -ge $bytes ]; then tap_ok "prof_rank1_events_are_clear_to_send_writes_for_the_posted_buffers ($n1)"
else tap_not_ok prof_rank1_events_are_clear_to_send_writes_for_the_posted_buffers "want opcode 0 (IBV_WR_RDMA_WRITE), wr_id kind 2, sizes > 0 summing to >= $bytes; $n1 events, sum $sum1; $bad1"; fi

recv_qps "$log1" | sort -u >"$JOBDIR/prof.rqps1"
stray=$(awk '{ print $1 }' "$ev1" | sort -u | grep -vxF -f "$JOBDIR/prof.rqps1")
if [ "$n1" -gt 0 ] && [ -s "$JOBDIR/prof.rqps1" ] && [ -z "$stray" ]; then tap_ok prof_rank1_event_qps_are_railnet_receive_qps
else tap_not_ok prof_rank1_event_qps_are_railnet_receive_qps "receive QPs in railnet's stats: $(tr '\n' ' ' <"$JOBDIR/prof.rqps1"); QPs of events not among them: $stray"; fi

# the same job without the profiler
job noprof NCCL_PROFILE_EVENT_MASK=128 NCCL_PROFILE_DUMP_FILE="$JOBDIR/noprof.dump"
status=$?
if checked noprof $status; then tap_ok noprof_send_recv_4MiB_checked_all_ranks_exit_0
else tap_not_ok noprof_send_recv_4MiB_checked_all_ranks_exit_0 "worst exit status $status; $(grep -E 'nccl_send_recv|failed|WARN' "$JOBDIR"/noprof.rank*.log | head -n 10)"; fi
left=
for f in "$JOBDIR"/noprof.dump_*; do [ -e "$f" ] && left="$left $f"; done
if ! grep -qE "Successfully loaded external profiler plugin|PROFILER/Plugin: init" "$JOBDIR"/noprof.rank*.log &&
   [ -z "$left" ]; then tap_ok noprof_no_profiler_loaded_no_dump
else tap_not_ok noprof_no_profiler_loaded_no_dump "$(grep -iE 'PROFILER' "$JOBDIR"/noprof.rank*.log | head -n 5) dumps:$left"; fi
nsum=$(send_stats "$JOBDIR/noprof.rank0.log" | awk '{ s += $2 } END { print s + 0 }')
if [ "$nsum" -eq $bytes ]; then tap_ok "noprof_railnet_sent_the_same_${bytes}_bytes"
else tap_not_ok "noprof_railnet_sent_the_same_${bytes}_bytes" "railnet's stats on rank 0: $nsum bytes sent"; fi
tap_done
