#!/bin/sh
# GPU end-to-end: NCCL with NCCL_NET_PLUGIN=railnet on softnic, every
# collective x {fp32, bf16} x 4 B..256 MiB checked on every rank. The system
# NCCL (libnccl.so.2, 2.28.3 on the GPU machines) runs once with GPU Direct
# RDMA on (NCCL_NET_GDR_LEVEL=SYS: softnic's PCI path is not a real device,
# so NCCL would otherwise place the NIC across the CPU and turn GDR off) and
# once with host staging (NCCL_NET_GDR_LEVEL=LOC); PyTorch's NCCL (2.28.9,
# nccl_torch_lib) runs with GDR on, and so does every NCCL scripts/build-nccl
# built and scripts/gpu-stage staged ($top_builddir/nccl-VERSION: 2.29.x,
# 2.30.x). The logs must show the NCCL version that ran, that railnet was
# loaded with the newest net table that NCCL knows (v11 for 2.28 and 2.29,
# v12 for 2.30) and used, and GDR on/off. A variant whose NCCL is not
# installed is skipped with the reason.
# Then 8 ranks share the GPU under a private MPS daemon (each its own NCCL
# node): every collective x {fp32, bf16} x 4 B..NE_8R_MAX_BYTES (16 MiB)
# through railnet with GDR on, every rank checking its data and ending 0.
# NE_VARIANTS (e.g. "gdr_nccl2.29.7") runs only the variants it names (gdr,
# host, gdr_nccl2289, gdr_nccl<VERSION>, 8r); the others skip, saying so.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/gpu/lib-nccl.sh"
prog=$top_builddir/tests/gpu/nccl_collectives
built=
for d in "$top_builddir"/nccl-[0-9]*; do
    [ -e "$d/lib/libnccl.so.2" ] && built="$built ${d##*/nccl-}"
done
nbuilt=0; for v in $built; do nbuilt=$((nbuilt + 1)); done
ncases=$(((3 + nbuilt) * (12 + 4) + 12 + 2))
if [ "$(gpu_count)" -lt 1 ]; then
    tap_skip_all "no CUDA GPU on this machine (run make check-gpu on a GPU machine)"
fi
tap_plan $ncases
for variant in gdr host gdr_nccl2289 $(for v in $built; do echo "gdr_nccl$v"; done); do
    case " ${NE_VARIANTS:-$variant} " in
        *" $variant "*) ;;
        *) i=0; while [ $i -lt 16 ]; do tap_skip "${variant}_case_$i" "not in NE_VARIANTS"; i=$((i + 1)); done
           continue ;;
    esac
    case $variant in host) gdr=LOC ;; *) gdr=SYS ;; esac
    ld=$LD_LIBRARY_PATH want= netv=11
    case $variant in
        gdr_nccl2.*)
            want=${variant#gdr_nccl}
            ld=$SOFTNIC_DIR:$top_builddir/nccl-$want/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
            case $want in 2.2[0-9].*) ;; *) netv=12 ;; esac
            ;;
    esac
    if [ $variant = gdr_nccl2289 ]; then
        tl=$(nccl_torch_lib)
        if [ ! -e "$tl/libnccl.so.2" ]; then
            i=0; while [ $i -lt 16 ]; do tap_skip "${variant}_case_$i" "PyTorch's NCCL not found at $tl"; i=$((i + 1)); done
            continue
        fi
        ld=$SOFTNIC_DIR:$tl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} want=2.28.9
    fi
    LD_LIBRARY_PATH=$ld NCCL_NET_PLUGIN=$RAILNET_PLUGIN NCCL_NET_GDR_LEVEL=$gdr \
        nccl_job "e2e_$variant" 2 "$prog" --mode check --max-bytes $((256 << 20)) --timeout 300
    status=$?
    log0=$JOBDIR/e2e_$variant.rank0.log
    log1=$JOBDIR/e2e_$variant.rank1.log
    nccl_report_collectives "$variant" 12 "$log0" "$log1"
    nccl_check_version "$variant" "$want" "$log0"
    if grep -q "Loaded net plugin railnet (v$netv)" "$log0" && grep -q "Using network railnet" "$log0"; then
        tap_ok "${variant}_nccl_loaded_and_used_railnet_v$netv"
    else
        tap_not_ok "${variant}_nccl_loaded_and_used_railnet_v$netv" "$(grep -E 'NET/|network' "$log0" | head -n 20 | sed 's/^/# /')"
    fi
    ngdr=$(grep -c "/GDRDMA" "$log0")
    if { [ $gdr = SYS ] && [ "$ngdr" -gt 0 ]; } || { [ $gdr = LOC ] && [ "$ngdr" -eq 0 ]; }; then
        tap_ok "${variant}_gdr_$( [ $gdr = SYS ] && echo on || echo off )_in_channel_log"
    else
        tap_not_ok "${variant}_gdr_state_in_channel_log" "$ngdr channel lines with /GDRDMA; $(grep -E 'via NET' "$log0" | head -n 4 | sed 's/^/# /')"
    fi
    [ $status -eq 0 ] && tap_ok "${variant}_all_ranks_exit_0" || tap_not_ok "${variant}_all_ranks_exit_0" "worst exit status $status; rank1: $(grep -E 'failed|WARN' "$log1" | head -n 10)"
done

case " ${NE_VARIANTS:-8r} " in
    *" 8r "*) ;;
    *) i=0; while [ $i -lt 14 ]; do tap_skip "8r_case_$i" "not in NE_VARIANTS"; i=$((i + 1)); done
       tap_done; exit ;;
esac
. "$top_srcdir/tests/gpu/lib-mps.sh"
mpsdir=$(mktemp -d)
trap 'mps_stop; rm -rf "$mpsdir"' EXIT
mps_start "$mpsdir" || echo "# no MPS daemon: the 8 ranks take time slices of the GPU"
NCCL_NET_PLUGIN=$RAILNET_PLUGIN NCCL_NET_GDR_LEVEL=SYS \
    nccl_job e2e_8r 8 "$prog" --mode check --max-bytes "${NE_8R_MAX_BYTES:-16777216}" --timeout 300
status=$?
mps_stop
nccl_report_collectives 8r 12 "$JOBDIR/e2e_8r.rank0.log" "$JOBDIR/e2e_8r.rank7.log"
bad= r=0
while [ $r -lt 8 ]; do
    log=$JOBDIR/e2e_8r.rank$r.log
    grep -q "Using network railnet" "$log" && [ "$(cat "$JOBDIR/e2e_8r.rank$r.status")" = 0 ] || bad="$bad $r"
    r=$((r + 1))
done
if [ $status -eq 0 ] && [ -z "$bad" ]; then
    tap_ok "8r_every_rank_used_railnet_and_exited_0"
else
    tap_not_ok "8r_every_rank_used_railnet_and_exited_0" "ranks not using railnet or not ending 0:$bad; $(grep -hE 'failed|WARN' "$JOBDIR"/e2e_8r.rank*.log | head -n 10)"
fi
if grep -q "nranks 8" "$JOBDIR/e2e_8r.rank0.log"; then
    tap_ok "8r_communicator_of_8_ranks"
else
    tap_not_ok "8r_communicator_of_8_ranks" "$(grep -E 'nranks|Init COMPLETE' "$JOBDIR/e2e_8r.rank0.log" | head -n 3)"
fi
tap_done
