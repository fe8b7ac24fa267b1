#!/bin/bash
# bench/softnic_perftest.sh: how fast softnic is, in one run, next to its
# ceiling on this machine:
#   1. memcpy in one thread (the ceiling: softnic copies each byte at least
#      once) and TCP loopback between two processes (softnic's wire);
#   2. ib_write_bw / ib_read_bw at 1 MiB between two processes on softnic;
#   3. ib_write_bw with a 500 MB/s port rate limit: measured / configured,
#      at 1 MiB, and 1 KiB writes on one QP at 100 MB/s (a window of small
#      WQEs, well within what softnic moves unpaced: the pacing must not
#      hold them back a window at a time).
# The goal: >= 1.5 GB/s in (2) and (3) within 5 %.  perftest's MB/sec
# are MiB/s (2^20 bytes), so every number here is in MiB/s.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
. "$top_srcdir/bench/lib-vars.sh"
bench_vars_check || exit 1
top_builddir=${top_builddir:-$(pwd)}
command -v ib_write_bw >/dev/null || { echo "perftest not installed: skipped"; exit 0; }
command -v python3 >/dev/null || { echo "python3 not installed: skipped"; exit 0; }
. "$top_srcdir/tests/lib.sh" >/dev/null
. "$top_srcdir/tests/softnic/sn_env.sh"

tcp=$(python3 - <<'EOF'
import os, socket, time
N, BUF = 4 << 30, bytearray(4 << 20)
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(1)
port = ls.getsockname()[1]
if os.fork() == 0:
    c = socket.create_connection(("127.0.0.1", port)); sent = 0
    while sent < N:
        sent += c.send(BUF)
    c.close(); os._exit(0)
s, _ = ls.accept(); got = 0; t0 = time.time(); view = memoryview(bytearray(4 << 20))
while got < N:
    n = s.recv_into(view)
    if not n: break
    got += n
dt = time.time() - t0; os.wait()
print("%.0f" % (got / dt / 1048576))
EOF
)

mem=$(python3 -c '
import time
a = bytearray(256 << 20); b = bytearray(256 << 20); t0 = time.time()
for _ in range(8):
    b[:] = a
print("%.0f" % (8 * 256 / (time.time() - t0)))')

avg_of() { awk '/#bytes/ { on = 1; next } on && /^ *[0-9]+ +[0-9]+ / { v = $4 } END { print v }' "$1"; }
sn_pair bench_write 120 ib_write_bw -d softnic0 -x 0 -s 1048576 -n 5000
write=$(avg_of "$SN_TMP/bench_write.cli")
sn_pair bench_read 120 ib_read_bw -d softnic0 -x 0 -s 1048576 -n 3000
read=$(avg_of "$SN_TMP/bench_read.cli")
SOFTNIC_RATE=500Mi sn_pair bench_rate 120 ib_write_bw -d softnic0 -x 0 -s 1048576 -n 1500
rate=$(avg_of "$SN_TMP/bench_rate.cli")
SOFTNIC_RATE=100M sn_pair bench_rate_small 120 ib_write_bw -d softnic0 -x 0 -s 1024 -n 50000
rate_small=$(avg_of "$SN_TMP/bench_rate_small.cli")

printf '%-44s %10s\n' "measure (MiB/s, as perftest reports)" "value"
printf '%-44s %10s\n' "memcpy, one thread (ceiling)" "$mem"
printf '%-44s %10s\n' "TCP loopback, 2 python processes" "$tcp"
printf '%-44s %10s\n' "ib_write_bw 1 MiB on softnic" "$write"
printf '%-44s %10s\n' "ib_read_bw 1 MiB on softnic" "$read"
printf '%-44s %10s\n' "ib_write_bw, port limited to 500 MiB/s" "$rate"
printf '%-44s %10s\n' "ib_write_bw 1 KiB, port limited to 100 MB/s" "$rate_small"
awk -v w="$write" -v t="$mem" -v r="$rate" -v rs="$rate_small" 'BEGIN {
    printf "ratio write/memcpy: %.2f   write >= 1.5 GB/s (1431 MiB/s): %s\n", w / t, (w >= 1431 ? "yes" : "NO");
    printf "rate limit measured/configured: %.3f   within 5%%: %s\n", r / 500, ((r / 500 > 0.95 && r / 500 < 1.05) ? "yes" : "NO");
    printf "rate limit measured/configured, 1 KiB writes: %.3f\n", rs / (100e6 / 1048576) }'
