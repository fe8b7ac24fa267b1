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
sn_tap_cases_with on_the_wire_alone SOFTNIC_FASTPATH=0 test_softnic_fastpath test_softnic_push test_softnic_ops \
    test_softnic_atomics test_softnic_mr
tap_done
