#!/bin/bash
# tests/softnic/test_softnic_wire_tcp.sh: SOFTNIC_WIRE_UNIX=0 keeps every
# connection on loopback TCP, as before the UNIX listeners (wire.c): the
# data-path cases (test_softnic_ops, test_softnic_atomics), the same-host
# fast path and push, whose peers are then checked by their TCP socket
# (cma.c), and test_softnic_wire_unix, which then finds no connection over
# a UNIX socket, must hold unchanged.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/softnic/sn_env.sh"

tap_plan 6
sn_tap_cases_with over_tcp SOFTNIC_WIRE_UNIX=0 test_softnic_ops test_softnic_atomics test_softnic_fastpath \
    test_softnic_push test_softnic_ack_note test_softnic_wire_unix
tap_done
