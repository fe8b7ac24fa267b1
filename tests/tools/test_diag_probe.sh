#!/bin/sh
# railnet-diag --probe on softnic with host memory: the loopback RDMA WRITE
# runs and is reported (text, JSON); GPU rows are skipped with the reason
# when there is no CUDA driver. The GPU verdicts (VF ordering case found on
# a VF port, not on a normal one) are in gpu_tools.sh, run on the GPU machine.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/tools/wb-lib.sh"
[ -x "$DIAG" ] || tap_skip_all "railnet-diag not built"
[ -e "$SOFTNIC_DIR/libibverbs.so.1" ] || tap_skip_all "softnic not built"
tap_plan 7

# softnic writes a sysfs view of its devices when it starts (SOFTNIC_SYSFS);
# the diagnostic reads sysfs before it loads libibverbs, so a first short
# probe run makes the view and the second one reads it.
probe() { # NAME [ENV...] -- ARGS...
    _n=$1; shift
    _sys=$TMPD/$_n.sys
    mkdir -p "$_sys"
    env SOFTNIC_SYSFS="$_sys" "$@" "$DIAG" --sysfs-root "$_sys" --probe -n 1 -s 4096 >/dev/null 2>&1 || :
    env SOFTNIC_SYSFS="$_sys" "$@" "$DIAG" --sysfs-root "$_sys" --probe -n 100 -s 65536 \
        >"$TMPD/$_n.txt" 2>"$TMPD/$_n.err"
    PROBE_RC=$?
    env SOFTNIC_SYSFS="$_sys" "$@" "$DIAG" --sysfs-root "$_sys" --probe -n 100 -s 65536 --json \
        >"$TMPD/$_n.json" 2>>"$TMPD/$_n.err"
    PROBE_JSON_RC=$?
}
probe normal SOFTNIC_VF=0
if [ $PROBE_RC -eq 0 ] && grep -Eq '^OK +probe.host +softnic0 +loopback RDMA WRITE into host memory: [0-9.]+ Gb/s' "$TMPD/normal.txt" &&
   grep -Eq '^ host +ibv_reg_mr +off +[0-9]+\.[0-9]+$' "$TMPD/normal.txt" &&
   ! grep -Eq '^ host .* 0\.00$' "$TMPD/normal.txt"; then
    tap_ok diag_probe_host_memory_row_runs_on_softnic
else tap_not_ok diag_probe_host_memory_row_runs_on_softnic "exit $PROBE_RC: $(cat "$TMPD/normal.txt" "$TMPD/normal.err")"; fi
if grep -q 'probing softnic0 port 1' "$TMPD/normal.err" && ! grep -q 'probing' "$TMPD/normal.txt"; then
    tap_ok diag_probe_progress_on_stderr
else tap_not_ok diag_probe_progress_on_stderr "$(cat "$TMPD/normal.err")"; fi

if ! have_python; then
    tap_skip diag_probe_json_rows "python3 not found"
elif python3 - "$TMPD/normal.json" >"$TMPD/j.err" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
p = d["probe"]
assert p["device"] == "softnic0" and p["port"] == 1 and p["iters"] == 100, p
rows = p["rows"]
assert [(r["memory"], r["path"], r["relaxed_ordering"]) for r in rows] == [
    ("host", "ibv_reg_mr", False), ("cuda", "dmabuf", True), ("cuda", "dmabuf", False),
    ("cuda", "peermem", True), ("cuda", "peermem", False)], rows
assert rows[0]["ran"] and rows[0]["gbps"] > 0, rows[0]
for r in rows[1:]:
    assert r["ran"] or r["skipped_because"], r
host = [c for c in d["checks"] if c["id"] == "probe.host"]
assert host and host[0]["status"] == "OK", host
PY
then tap_ok diag_probe_json_rows
else tap_not_ok diag_probe_json_rows "$(cat "$TMPD/j.err")"; fi

if [ -n "$(command -v nvidia-smi)" ] && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    tap_skip diag_probe_gpu_rows_skipped_without_cuda "this machine has a GPU (gpu_tools.sh covers it)"
elif grep -Eq '^ cuda +dmabuf +on +- +skipped: .+' "$TMPD/normal.txt" &&
     grep -Eq '^SKIP +probe.relaxed_ordering +softnic0 +no GPU memory row ran' "$TMPD/normal.txt"; then
    tap_ok diag_probe_gpu_rows_skipped_without_cuda
else tap_not_ok diag_probe_gpu_rows_skipped_without_cuda "$(cat "$TMPD/normal.txt")"; fi

# softnic's VF mode slows only GPU memory registered without relaxed
# ordering: host memory on a VF port is not the ordering case.
probe vf SOFTNIC_VF=1
if [ $PROBE_RC -eq 0 ] && grep -Eq '^OK +probe.host' "$TMPD/vf.txt" &&
   ! grep -Eq '^FAIL +probe' "$TMPD/vf.txt"; then
    tap_ok diag_probe_vf_port_host_memory_is_not_flagged
else tap_not_ok diag_probe_vf_port_host_memory_is_not_flagged "exit $PROBE_RC: $(cat "$TMPD/vf.txt")"; fi

# The probe cannot run: a FAIL with the reason, exit 1.
SOFTNIC_SYSFS=$TMPD/normal.sys "$DIAG" --sysfs-root "$TMPD/normal.sys" --probe -i 7 >"$TMPD/p7.txt" 2>&1; rc=$?
if [ $rc -eq 1 ] && grep -Eq '^FAIL +probe.setup +softnic0 +cannot set up the loopback QPs' "$TMPD/p7.txt" &&
   grep -q 'port 7 does not exist' "$TMPD/p7.txt"; then
    tap_ok diag_probe_bad_port_fails_with_reason
else tap_not_ok diag_probe_bad_port_fails_with_reason "exit $rc: $(cat "$TMPD/p7.txt")"; fi
"$DIAG" --sysfs-root "$TMPD/normal.sys" --probe --ibverbs-lib "$TMPD/nope.so" >"$TMPD/nolib.txt" 2>&1; rc=$?
if [ $rc -eq 1 ] && grep -Eq '^FAIL +probe.setup .*cannot run the probe' "$TMPD/nolib.txt" &&
   grep -Eq '^FAIL +rdma.core +host +libibverbs not loadable' "$TMPD/nolib.txt"; then
    tap_ok diag_probe_without_libibverbs_fails_with_reason
else tap_not_ok diag_probe_without_libibverbs_fails_with_reason "exit $rc: $(cat "$TMPD/nolib.txt")"; fi
tap_done
