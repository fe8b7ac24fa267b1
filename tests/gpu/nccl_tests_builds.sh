#!/bin/sh
# tests/gpu/nccl_tests_builds.sh: tests/gpu/nccl_tests.sh, nccl_rma.sh and
# nccl_ib_pci.sh again under every NCCL that scripts/build-nccl built
# and scripts/gpu-stage staged ($top_builddir/nccl-VERSION, e.g. 2.29.7 and
# 2.30.7) with nccl-tests built against it ($top_builddir/nccl-tests-VERSION:
# scripts/build-nccl-tests --nccl build/nccl-VERSION --out
# build/nccl-tests-VERSION), as nccl-tests' device-API code is compiled
# against one NCCL's headers. Each case keeps its name behind
# nccl<VERSION>_; logs go to nccl-VERSION/ of
# the log directory. NCCL_TESTS_BUILDS="2.30.7 ..." picks versions,
# NCCL_BUILDS_TESTS ("nccl_tests.sh nccl_rma.sh nccl_ib_pci.sh") the scripts.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/gpu/lib-nccl.sh"
found=
for d in "$top_builddir"/nccl-[0-9]*; do
    v=${d##*/nccl-}
    case " ${NCCL_TESTS_BUILDS:-$v} " in *" $v "*) ;; *) continue ;; esac
    [ -e "$d/lib/libnccl.so.2" ] && [ -x "$top_builddir/nccl-tests-$v/alltoall_perf" ] && found="$found $v"
done
[ -n "$found" ] || tap_skip_all "no NCCL build staged with nccl-tests built against it (scripts/build-nccl SRC, then scripts/build-nccl-tests SRC --nccl build/nccl-VERSION --out build/nccl-tests-VERSION, then scripts/gpu-stage)"
if [ "$(gpu_count)" -lt 1 ]; then
    tap_skip_all "no CUDA GPU on this machine (run make check-gpu on a GPU machine)"
fi
for v in $found; do
    out=$JOBDIR/nccl-$v
    mkdir -p "$out"
    for t in ${NCCL_BUILDS_TESTS:-nccl_tests.sh nccl_rma.sh nccl_ib_pci.sh}; do
        pre=nccl${v}_
        RAILNET_GPU_LOGDIR=$out NCCL_TESTS_DIR=$top_builddir/nccl-tests-$v NCCL_TORCH_LIB=$top_builddir/nccl-$v/lib \
            sh "$top_srcdir/tests/gpu/$t" >"$out/${t%.sh}.tap" 2>&1
        rc=$?
        # the child's results, renumbered and named for the NCCL they ran
        while IFS= read -r line; do
            case $line in
                "1..0 # SKIP"*) tap_skip "$pre${t%.sh}" "${line#1..0 # SKIP }" ;;
                "ok "*" - "*) rest=${line#ok * - }; TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - $pre$rest" ;;
                "not ok "*" - "*)
                    rest=${line#not ok * - }; TAP_N=$((TAP_N + 1)); TAP_FAILED=$((TAP_FAILED + 1))
                    echo "not ok $TAP_N - $pre$rest" ;;
                "#"*) echo "$line" ;;
            esac
        done <"$out/${t%.sh}.tap"
        if [ $rc -ne 0 ] && ! grep -q '^not ok' "$out/${t%.sh}.tap"; then
            tap_not_ok "$pre${t%.sh}_exit_status" "exit $rc; $(tail -n 5 "$out/${t%.sh}.tap")"
        fi
    done
done
tap_plan "$TAP_N"
tap_done
