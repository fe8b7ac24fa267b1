#!/bin/sh
# GPU cases of the tools, for the GPU machine (make check-gpu, or directly:
#   top_srcdir=$PWD top_builddir=$PWD/build sh tests/tools/gpu_tools.sh
# from the source tree). On softnic: railnet-write-bw with GPU memory
# (verbs: auto/peer-memory/dmabuf registration; plugin mode; --gpu-initiated,
# writes posted by a CUDA kernel through plugin/gdaki), and
# railnet-diag --probe, which must find the relaxed-ordering case on a VF
# port (SOFTNIC_VF=1) and must not on a normal port. Without a GPU every case
# is skipped with the reason (this is also how it runs under make check).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/tools/wb-lib.sh"
[ -x "$WB" ] && [ -x "$DIAG" ] || tap_skip_all "tools not built"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    tap_skip_all "no CUDA GPU on this machine (run on the GPU machine: make check-gpu)"
fi
tap_plan 14
N=200
# A port rate makes the VF slowdown (21% of the rate on GPU memory
# registered without relaxed ordering) stand clear of CPU noise.
export SOFTNIC_RATE=${SOFTNIC_RATE:-1G}

gpu_pair() { # CASE NAME ARGS...: both sides with GPU memory, rows checked
    _c=$1; _n=$2; shift 2
    # --bidir rows count the writes of both directions, as in the host test
    _it=$N; case " $* " in *" --bidir "*) _it=$((2 * N)) ;; esac
    # --cuda_vmm: the header must say the buffer is VMM-mapped
    _mem='cuda:0'; case " $* " in *" --cuda_vmm "*) _mem='cuda:0 vmm' ;; esac
    wb_pair "$_n" "$@" -n $N
    if [ $CLI_RC -eq 0 ] && [ $SRV_RC -eq 0 ] && wb_check_rows "$TMPD/$_n.cli.out" 1 $_it >"$TMPD/$_n.chk" 2>&1 &&
       grep -q "^ Memory *: $_mem\$" "$TMPD/$_n.cli.out"; then
        tap_ok "$_c ($(grep '^ Registration' "$TMPD/$_n.cli.out" | sed 's/.*: //'))"
    else
        tap_not_ok "$_c" "client $CLI_RC server $SRV_RC: $(cat "$TMPD/$_n.chk" "$TMPD/$_n".cli.* "$TMPD/$_n.srv.err")"
    fi
}
gpu_pair wb_cuda_auto_registration auto --use_cuda
gpu_pair wb_cuda_peermem peer --use_cuda --peermem
wb_pair dmabuf --use_cuda --dmabuf -n $N
if [ $CLI_RC -eq 0 ] && wb_check_rows "$TMPD/dmabuf.cli.out" 1 $N >/dev/null && grep -q '^ Registration *: dmabuf' "$TMPD/dmabuf.cli.out"; then
    tap_ok wb_cuda_dmabuf
elif grep -Eq 'cuMemGetHandleForAddressRange|ibv_reg_dmabuf_mr' "$TMPD/dmabuf.cli.err"; then
    tap_skip wb_cuda_dmabuf "dmabuf not available here: $(head -n 1 "$TMPD/dmabuf.cli.err")"
else tap_not_ok wb_cuda_dmabuf "client $CLI_RC: $(cat "$TMPD"/dmabuf.cli.*)"; fi
gpu_pair wb_cuda_bidir_two_qps bidir --use_cuda --bidir -q 2
# cuMemCreate/cuMemMap memory (NCCL's default allocator): dmabuf through
# verbs; through the plugin both by NCCL's route (regMrDmaBuf with the
# caller's fd) and by regMr on the CUDA pointer, where the plugin finds the
# mapping and exports the dmabuf itself.
gpu_pair wb_cuda_vmm_dmabuf vmm --use_cuda --cuda_vmm --dmabuf
if [ -e "$top_builddir/.libs/libnccl-net-railnet.so" ]; then
    gpu_pair wb_plugin_cuda plugin --use_cuda --mode=plugin
    gpu_pair wb_plugin_cuda_vmm_regmrdmabuf pvmm --use_cuda --cuda_vmm --mode=plugin --dmabuf
    gpu_pair wb_plugin_cuda_vmm_regmr pvmmr --use_cuda --cuda_vmm --mode=plugin --peermem
else
    tap_skip wb_plugin_cuda "plugin not built"
    tap_skip wb_plugin_cuda_vmm_regmrdmabuf "plugin not built"
    tap_skip wb_plugin_cuda_vmm_regmr "plugin not built"
fi

# --gpu-initiated: a kernel posts the client's writes (plugin/gdaki on
# softnic's mlx5 queues); rows like the others plus the latency column.
GI_N=100
if "$WB" --help 2>/dev/null | grep -q 'not built in this version'; then
    tap_skip wb_gpu_initiated "--gpu-initiated not built (configure found no nvcc)"
    tap_skip wb_gpu_initiated_gpu_queue "--gpu-initiated not built (configure found no nvcc)"
    tap_skip wb_gpu_initiated_json "--gpu-initiated not built (configure found no nvcc)"
else
    # Client and server share this GPU: without MPS their contexts take
    # turns in ~2 ms time slices and every write waits for one (see
    # tests/gpu/lib-mps.sh); a daemon of our own lets them run side by side.
    . "$top_srcdir/tests/gpu/lib-mps.sh"
    trap 'mps_stop; wb_cleanup' EXIT INT TERM
    mps_start "$TMPD" || echo "# no MPS daemon: the GPU-initiated cases run time-sliced (~2.4 ms a write)"
    wb_pair gi --gpu-initiated -n $GI_N -s 65536
    if [ $CLI_RC -eq 0 ] && [ $SRV_RC -eq 0 ] && wb_check_rows "$TMPD/gi.cli.out" 1 $GI_N >"$TMPD/gi.chk" 2>&1 &&
       wb_check_rows "$TMPD/gi.srv.out" 1 $GI_N >>"$TMPD/gi.chk" 2>&1 &&
       grep -q '^ Mode *: gpu-initiated' "$TMPD/gi.cli.out" && grep -q '^ Memory *: cuda:0' "$TMPD/gi.cli.out" &&
       grep -q '^ Memory *: cuda:0' "$TMPD/gi.srv.out" &&
       wb_rows "$TMPD/gi.cli.out" | awk 'NF != 6 || !($6 > 0) { exit 1 }'; then
        tap_ok "wb_gpu_initiated ($(wb_rows "$TMPD/gi.cli.out" | awk '{ print $5 " Mpps, " $6 " us" }'))"
    else
        tap_not_ok wb_gpu_initiated "client $CLI_RC server $SRV_RC: $(cat "$TMPD/gi.chk" "$TMPD"/gi.cli.* "$TMPD/gi.srv.err")"
    fi
    # The same with the send ring, doorbell records and CQ in GPU memory.
    RAILNET_GDAKI_QUEUE_MEM=gpu wb_pair giq --gpu-initiated -n $GI_N -s 65536
    if [ $CLI_RC -eq 0 ] && [ $SRV_RC -eq 0 ] && wb_check_rows "$TMPD/giq.cli.out" 1 $GI_N >"$TMPD/giq.chk" 2>&1 &&
       grep -q 'queue in GPU memory (DEVX)' "$TMPD/giq.cli.out"; then
        tap_ok "wb_gpu_initiated_gpu_queue ($(wb_rows "$TMPD/giq.cli.out" | awk '{ print $5 " Mpps, " $6 " us" }'))"
    else
        tap_not_ok wb_gpu_initiated_gpu_queue "client $CLI_RC server $SRV_RC: $(cat "$TMPD/giq.chk" "$TMPD"/giq.cli.* "$TMPD/giq.srv.err")"
    fi
    wb_pair gij --gpu-initiated -n $GI_N -s 8 --json
    if [ $CLI_RC -eq 0 ] && [ $SRV_RC -eq 0 ] && wb_check_json "$TMPD/gij.cli.out" 1 $GI_N >"$TMPD/gij.chk" 2>&1 &&
       python3 - "$TMPD/gij.cli.out" >>"$TMPD/gij.chk" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["mode"] == "gpu-initiated", d["mode"]
assert d["local"]["memory"] == "cuda:0" and d["remote"]["memory"] == "cuda:0", d
assert all(r["latency_us"] > 0 for r in d["results"]), d["results"]
PY
    then tap_ok wb_gpu_initiated_json
    else tap_not_ok wb_gpu_initiated_json "client $CLI_RC server $SRV_RC: $(cat "$TMPD/gij.chk" "$TMPD"/gij.cli.* "$TMPD/gij.srv.err")"; fi
    mps_stop
fi

# diag --probe: the ordering case is found on a VF port and only there.
probe() { # NAME ENV...
    _n=$1; shift
    _sys=$TMPD/$_n.sys
    mkdir -p "$_sys"
    env SOFTNIC_SYSFS="$_sys" "$@" "$DIAG" --sysfs-root "$_sys" --probe -n 1 -s 4096 >/dev/null 2>&1 || :
    env SOFTNIC_SYSFS="$_sys" "$@" "$DIAG" --sysfs-root "$_sys" --probe -n 200 -s 1048576 \
        >"$TMPD/$_n.txt" 2>"$TMPD/$_n.err"
    PROBE_RC=$?
}
probe vf SOFTNIC_VF=1
if [ $PROBE_RC -eq 1 ] &&
   grep -Eq '^FAIL +probe.relaxed_ordering +softnic0 +GPU writes without relaxed ordering run at [0-9]+% of host-memory bandwidth.*this is the SR-IOV VF ordering case; register with IBV_ACCESS_RELAXED_ORDERING \(RAILNET_RELAXED_ORDERING=1\)' "$TMPD/vf.txt"; then
    tap_ok "diag_probe_finds_vf_ordering_case ($(grep '^FAIL  probe.relaxed' "$TMPD/vf.txt" | head -n 1 | cut -c 40-120))"
else tap_not_ok diag_probe_finds_vf_ordering_case "exit $PROBE_RC: $(cat "$TMPD/vf.txt")"; fi
probe normal SOFTNIC_VF=0
if [ $PROBE_RC -eq 0 ] && grep -Eq '^OK +probe.relaxed_ordering +softnic0 +GPU writes via' "$TMPD/normal.txt" &&
   ! grep -Eq '^FAIL +probe' "$TMPD/normal.txt"; then
    tap_ok diag_probe_normal_port_is_not_flagged
else tap_not_ok diag_probe_normal_port_is_not_flagged "exit $PROBE_RC: $(cat "$TMPD/normal.txt")"; fi
# The table has a measured row for each GPU registration the host allows.
if grep -Eq '^ cuda +(dmabuf|peermem) +on +[0-9]+\.[0-9]+$' "$TMPD/normal.txt" &&
   grep -Eq '^ cuda +(dmabuf|peermem) +off +[0-9]+\.[0-9]+$' "$TMPD/normal.txt"; then
    tap_ok diag_probe_gpu_rows_measured
else tap_not_ok diag_probe_gpu_rows_measured "$(cat "$TMPD/normal.txt")"; fi
tap_done
