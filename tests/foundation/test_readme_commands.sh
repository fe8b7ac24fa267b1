#!/bin/sh
# The README's first two commands are the contract with users and CI:
# they must be the first two fenced commands, and .ci/run must run the
# second one exactly.
. "$top_srcdir/tests/lib.sh"
tap_plan 4
readme=$top_srcdir/README.md
cmds=$(awk '/^```sh$/{f=1;next} /^```$/{if(f){f=0;n++}; next} f&&n<2{print}' "$readme")
cmd1=$(printf '%s\n' "$cmds" | sed -n 1p)
cmd2=$(printf '%s\n' "$cmds" | sed -n 2p)
[ -n "$cmd1" ] && [ -n "$cmd2" ] && tap_ok readme_has_two_commands || tap_not_ok readme_has_two_commands "got: $cmds"
case "$cmd1" in *"make -C build"*" run"*) tap_ok readme_command1_runs_main_job ;;
    *) tap_not_ok readme_command1_runs_main_job "command 1: $cmd1" ;; esac
case "$cmd2" in *"make -C build"*" check"*) tap_ok readme_command2_runs_tests ;;
    *) tap_not_ok readme_command2_runs_tests "command 2: $cmd2" ;; esac
if grep -qxF "$cmd2 || status=\$?" "$top_srcdir/.ci/run"; then
    tap_ok ci_runs_readme_command2_exactly
else
    tap_not_ok ci_runs_readme_command2_exactly "README command 2: '$cmd2' not found verbatim in .ci/run"
fi
tap_done
