#!/bin/bash
# tests/softnic/test_softnic_push_off.sh: SOFTNIC_PUSH=0 puts small writes
# to same-host peers back on the wire (push.c), SOFTNIC_PUSH_IMM=0 only the
# writes with immediate: the push cases (which then expect no WQE pushed,
# or none with an immediate) and the data-path cases (test_softnic_ops,
# test_softnic_mr) must hold unchanged without it.  SOFTNIC_PUSH_PROC_MEM=0
# pushes by process_vm_writev instead of the peer's /proc/<pid>/mem: the
# push and fault cases hold the same (the push cases check the file is not
# held).  SOFTNIC_PUSH_INLINE=0 places the bytes of a pushed write with
# immediate instead of carrying them in its record: the push cases hold.
# SOFTNIC_PUSH_SHARED=0 pushes into a peer's sealed memfd memory by the
# system call too: the push cases (which then expect nothing stored) hold.
# SOFTNIC_PUSH_SEND=0 puts every SEND back on the wire: the push cases
# (which then expect no SEND pushed) and the data-path cases hold, and
# the receiver shows its peers no receive (test_softnic_push_hostile).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/softnic/sn_env.sh"

tap_plan 11
sn_tap_cases_with without_the_push SOFTNIC_PUSH=0 test_softnic_push test_softnic_ops test_softnic_mr
sn_tap_cases_with without_writes_with_immediate SOFTNIC_PUSH_IMM=0 test_softnic_push
sn_tap_cases_with placing_writes_with_immediate SOFTNIC_PUSH_INLINE=0 test_softnic_push
sn_tap_cases_with pushing_by_process_vm_writev SOFTNIC_PUSH_PROC_MEM=0 test_softnic_push test_softnic_faults
sn_tap_cases_with without_stores_into_shared_memory SOFTNIC_PUSH_SHARED=0 test_softnic_push
sn_tap_cases_with sends_on_the_wire SOFTNIC_PUSH_SEND=0 test_softnic_push test_softnic_ops test_softnic_push_hostile
tap_done
