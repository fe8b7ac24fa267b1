#!/bin/sh
# tests/plugin/failover.sh: a merged dual-port device loses port 2 and gets it
# back while the plugin carries NCCL-like traffic (tests/netdriver traffic:
# 2-4 ranks, random sizes from 0 bytes, grouped receives, every byte
# checked). softnic's control file (SOFTNIC_CTL_FILE, read by every rank's
# NIC threads every 50 ms) takes the port down and up at moments drawn from
# the seed. What must hold, whatever the moments:
#  - 100 seeded runs (seed printed in each case's name): every run completes
#    with every byte right (RAILNET_FAILOVER=1, the default);
#  - port 2 down while the connections are being made: the job completes;
#  - port 2 flapping every 50 ms: the job completes, also where the
#    device's PCIe link bounds it and connections keep a home QP;
#  - both ports down: every rank gets an error from the plugin (no hang,
#    no completion) and the WARN says no port is left;
#  - RAILNET_FAILOVER=0: port 2 down fails the connections (today's error).
# Moments are not asserted (a busy CI host may finish a run before a port
# goes down); the number of runs in which a failover happened is printed,
# and at least one of the 100 must have one, else the test would prove
# nothing. Runs are short (sizes <= 256 KiB, 60 groups): the whole script
# takes well under a minute on 2 cores. Longer soaks: bench/failover.sh.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
plugin_on_softnic
nd=$top_builddir/tests/netdriver/netdriver
[ -x "$nd" ] || tap_skip_all "netdriver not built"
# Port 1 never fails here: a QP on it that ends in IBV_WC_RETRY_EXC_ERR only
# means softnic's NIC threads were starved past the retry budget (seen at
# load ~17 on 2 cores: "port 1 failed and no other port is up"). Every
# failure this script makes is a port event, which needs no budget, so the
# budget is raised beyond any starvation, as the sanitizer plan does.
export SOFTNIC_RETRY_MIN_MS=${SOFTNIC_RETRY_MIN_MS:-10000} SOFTNIC_RETRY_CAP_MS=${SOFTNIC_RETRY_CAP_MS:-10000}
RUNS=${FAILOVER_RUNS:-100}
tap_plan $((RUNS + 8))
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
ctl=$dir/ctl

traffic() { # args... ; output in $out, status in $st
    out=$("$nd" --plugin "$plugin" traffic --ctl-file "$ctl" "$@" 2>&1)
    st=$?
}
failovers=0
for seed in $(seq 1 "$RUNS"); do
    ranks=$((2 + seed % 3))
    traffic --ranks $ranks --iters 60 --max-size 256K --max-recvs 8 --seed "$seed" --timeout 60 \
        --down-ms 120 --up-ms 150 --cycles 2 --flap-random
    if [ $st -eq 0 ] && printf '%s\n' "$out" | grep -q '^netdriver traffic: ok'; then
        tap_ok "random_port2_down_up_seed_${seed}_ranks_${ranks}"
    else
        # the exit status too: a run that printed nothing else (CI once
        # showed a case with no diagnostic at all) still says how it ended
        tap_not_ok "random_port2_down_up_seed_${seed}_ranks_${ranks}" \
            "exit status $st, $(printf '%s\n' "$out" | wc -l) lines of output; the last ones but INFO:
$(printf '%s\n' "$out" | grep -v ' INFO ' | tail -n 15 | sed 's/^/# /')"
    fi
    printf '%s\n' "$out" | grep -q 'port 2 failed' && failovers=$((failovers + 1))
done
echo "# $failovers of $RUNS runs had port 2 fail under traffic"
[ $failovers -ge 1 ] && tap_ok "some_runs_really_failed_over ($failovers of $RUNS)" ||
    tap_not_ok some_runs_really_failed_over "no run saw port 2 fail: the fault never reached the plugin"

why=
for seed in 201 202 203; do
    traffic --ranks 2 --iters 100 --max-size 1M --seed $seed --timeout 60 --down-at-start --up-ms 150
    printf '%s\n' "$out" | grep -q '^netdriver traffic: ok' ||
        why="$why seed $seed: $(printf '%s\n' "$out" | grep -v ' INFO ' | tail -n 6)"
done
[ -z "$why" ] && tap_ok port2_down_during_the_handshake_then_up || tap_not_ok port2_down_during_the_handshake_then_up "$why"

traffic --ranks 3 --iters 150 --max-size 1M --seed 301 --timeout 120 --down-ms 50 --up-ms 50 --cycles 20
if printf '%s\n' "$out" | grep -q '^netdriver traffic: ok'; then tap_ok port2_flapping_every_50ms
else tap_not_ok port2_flapping_every_50ms "$(printf '%s\n' "$out" | grep -v ' INFO ' | tail -n 12 | sed 's/^/# /')"; fi

# the same where the NIC's PCIe link bounds the device (softnic's sysfs
# view): connections keep their whole messages on a home QP, half of them
# on port 2, and move to port 1 while it is down
out=$(SOFTNIC_SYSFS=$dir/sysfs SOFTNIC_LINK_RATE=25G "$nd" --plugin "$plugin" traffic --ctl-file "$ctl" --ranks 3 \
    --iters 150 --max-size 1M --seed 302 --timeout 120 --down-ms 50 --up-ms 50 --cycles 20 2>&1)
if printf '%s\n' "$out" | grep -q '^netdriver traffic: ok' && printf '%s\n' "$out" | grep -q 'capped by its PCIe link' &&
    printf '%s\n' "$out" | grep -q 'port 2 failed'; then
    tap_ok port2_flapping_every_50ms_with_home_qps
else tap_not_ok port2_flapping_every_50ms_with_home_qps "$(printf '%s\n' "$out" | grep -v ' INFO ' | tail -n 12 | sed 's/^/# /')"; fi

traffic --ranks 2 --iters 0 --max-size 64K --seed 401 --timeout 30 --expect-error \
    --ctl-port softnic0:1 --ctl-port softnic0:2 --down-ms 50 --up-ms 0
if [ $st -eq 0 ] && printf '%s\n' "$out" | grep -q 'no port left' &&
    ! printf '%s\n' "$out" | grep -q 'hang'; then
    tap_ok both_ports_down_is_a_clear_error_within_the_timeout
else
    tap_not_ok both_ports_down_is_a_clear_error_within_the_timeout \
        "exit $st: $(printf '%s\n' "$out" | grep -v ' INFO ' | tail -n 10)"
fi

out=$(RAILNET_FAILOVER=0 "$nd" --plugin "$plugin" traffic --ctl-file "$ctl" --ranks 2 --iters 0 --max-size 64K \
    --seed 501 --timeout 30 --expect-error --down-ms 50 --up-ms 0 2>&1)
st=$?
if [ $st -eq 0 ] && printf '%s\n' "$out" | grep -q 'IBV_EVENT_PORT_ERR (port went down); failing'; then
    tap_ok failover_off_port2_down_fails_the_connections
else
    tap_not_ok failover_off_port2_down_fails_the_connections "exit $st: $(printf '%s\n' "$out" | grep -v ' INFO ' | tail -n 8)"
fi

# RAILNET_CM=rdmacm: no TCP socket carries failover's messages, so port 2
# down fails the connections as with failover off (comm_setup_cm.c). With
# failover attached all the same, its messages went nowhere: a port that
# failed under load (IBV_WC_RETRY_EXC_ERR) hung traffic_matrix_cm's 64 MiB
# case for --timeout, or ended in IBV_WC_REM_ACCESS_ERR.
if [ -e "$top_builddir/tests/softnic/librdmacm.so.1" ]; then
    out=$(RAILNET_CM=rdmacm "$nd" --plugin "$plugin" traffic --ctl-file "$ctl" --ranks 2 --iters 0 --max-size 64K \
        --seed 502 --timeout 30 --expect-error --down-ms 50 --up-ms 0 2>&1)
    st=$?
    if [ $st -eq 0 ] && printf '%s\n' "$out" | grep -q 'IBV_EVENT_PORT_ERR (port went down); failing' &&
        ! printf '%s\n' "$out" | grep -q 'go on over'; then
        tap_ok rdmacm_port2_down_fails_the_connections
    else
        tap_not_ok rdmacm_port2_down_fails_the_connections "exit $st: $(printf '%s\n' "$out" | grep -v ' INFO ' | tail -n 8)"
    fi
else
    tap_skip rdmacm_port2_down_fails_the_connections "softnic's librdmacm not built"
fi

# without the fault the same traffic goes over both ports and the control
# channel stays silent: no failover WARN at all
out=$("$nd" --plugin "$plugin" traffic --ranks 3 --iters 60 --max-size 256K --seed 601 2>&1)
if printf '%s\n' "$out" | grep -q '^netdriver traffic: ok' && ! printf '%s\n' "$out" | grep -q ' WARN '; then
    tap_ok no_fault_no_failover_warning
else
    tap_not_ok no_fault_no_failover_warning "$(printf '%s\n' "$out" | grep -v ' INFO ' | tail -n 8)"
fi

# recovery (both ports carry traffic again, several cycles) and churn are
# checked deterministically in tests/plugin/test_failover.c
tap_done
