#!/bin/bash
# tests/softnic/test_softnic_push_off.sh: SOFTNIC_PUSH=0 puts small writes
# to same-host peers back on the wire (push.c), SOFTNIC_PUSH_IMM=0 only the
# writes with immediate: the push cases (which then expect no WQE pushed,
# or none with an immediate) and the data-path cases (test_softnic_ops,
# test_softnic_mr) must hold unchanged without it.  SOFTNIC_PUSH_PROC_MEM=0
# pushes by process_vm_writev instead of the peer's /proc/<pid>/mem: the
# push and fault cases hold the same (the push cases check the file is not
# held).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/softnic/sn_env.sh"

tap_plan 6
# the C tests' own retry budgets (sntest.c), as under make check
for t in test_softnic_push test_softnic_ops test_softnic_mr; do
    if sn_tap_run 300 $t -u SOFTNIC_RETRY_MIN_MS -u SOFTNIC_RETRY_CAP_MS SOFTNIC_PUSH=0; then
        tap_ok "${t}_without_the_push"
    else
        tap_not_ok "${t}_without_the_push" "$SN_TAP_WHY"
    fi
done
if sn_tap_run 300 test_softnic_push -u SOFTNIC_RETRY_MIN_MS -u SOFTNIC_RETRY_CAP_MS SOFTNIC_PUSH_IMM=0; then
    tap_ok test_softnic_push_without_writes_with_immediate
else
    tap_not_ok test_softnic_push_without_writes_with_immediate "$SN_TAP_WHY"
fi
for t in test_softnic_push test_softnic_faults; do
    if sn_tap_run 300 $t -u SOFTNIC_RETRY_MIN_MS -u SOFTNIC_RETRY_CAP_MS SOFTNIC_PUSH_PROC_MEM=0; then
        tap_ok "${t}_pushing_by_process_vm_writev"
    else
        tap_not_ok "${t}_pushing_by_process_vm_writev" "$SN_TAP_WHY"
    fi
done
tap_done
