#!/bin/bash
# tests/softnic/test_softnic_fastpath_off.sh: SOFTNIC_FASTPATH=0 forces
# every payload onto the TCP wire: the fast-path cases
# (test_softnic_fastpath, which then expect its fast_bytes counter at 0,
# and test_softnic_push, whose writes are then none of them pushed)
# and the data-path cases (test_softnic_ops, test_softnic_atomics, and
# test_softnic_mr's reregistrations) must hold unchanged on the wire alone.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/softnic/sn_env.sh"

tap_plan 5
# the C tests' own retry budgets (sntest.c), as under make check: their
# fault cases must end quickly, not after sn_env.sh's budget for unchanged
# programs
for t in test_softnic_fastpath test_softnic_push test_softnic_ops test_softnic_atomics test_softnic_mr; do
    if sn_tap_run 300 $t -u SOFTNIC_RETRY_MIN_MS -u SOFTNIC_RETRY_CAP_MS SOFTNIC_FASTPATH=0; then
        tap_ok "${t}_on_the_wire_alone"
    else
        tap_not_ok "${t}_on_the_wire_alone" "$SN_TAP_WHY"
    fi
done
tap_done
