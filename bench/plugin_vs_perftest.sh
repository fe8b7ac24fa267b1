#!/bin/sh
# bench/plugin_vs_perftest.sh: the plugin at NCCL's depth against perftest
# on the same softnic, measured side by side in one run.
#  1. One-way bandwidth: netdriver bw (the plugin's v8 table driven as
#     NCCL's proxy drives it) with one QP on one port (RAILNET_QPS_PER_CONN=1,
#     RAILNET_MERGE_PORTS=0) against ib_write_bw -q 1 on the same port, both
#     with the same number of messages in flight: netdriver --window D and
#     ib_write_bw -t D (its send queue depth), a completion for every
#     message on both sides (-Q 1), for each depth of RAILNET_BENCH_DEPTHS
#     (default "8 16": NCCL keeps 8 steps of a connection in flight) and
#     each size of RAILNET_BENCH_SIZES (default 64 KiB .. 16 MiB, NCCL's
#     step sizes and above).  Each side times its sender from the first post
#     to the last completion and counts size x iterations, at least
#     RAILNET_BENCH_BYTES (default 1 GiB) and 200 messages a run.
#     Goal: plugin / ib_write_bw >= RAILNET_BENCH_GOAL_BW (0.95) at every
#     size and depth.  Each round runs ib_write_bw a second time
#     (RAILNET_BENCH_AA=0: not): the A/A column is that second run's
#     median over the first's, and each depth's A/A band (their range over
#     the sizes) is how far ib_write_bw alone moves between two runs of
#     the same rounds; a miss of the goal inside that band is marked so,
#     as within the machine's noise (the goal's verdict stays a miss).
#  2. 8-byte latency: netdriver lat (isend/irecv ping-pong, median of 2000
#     round trips) against ib_write_lat's typical, with ib_send_lat beside
#     it (it completes each message through the receiver's CQ, as the
#     plugin must); goal plugin / ib_write_lat <= RAILNET_BENCH_GOAL_LAT (1.1).
#     The plugin runs again with SOFTNIC_PUSH_SHARED=0, in a column of its
#     own: its clear-to-sends then cost a system call as ib_write_lat's
#     writes do (its ring is memory softnic can map, ib_write_lat's buffer
#     is not), the like-for-like figure.
#  3. With SOFTNIC_RATE per port: the merged dual-port device against the
#     plugin on port 1 alone (RAILNET_BENCH_STRIPING=0 skips it).
# On a 2-core host the NIC's threads share the CPUs with the polling
# programs (and with whatever else runs there), so single runs swing: every
# number is the median of RAILNET_BENCH_ROUNDS (default 5) alternating runs
# (perftest, then the plugin, round after round, so that load hits both
# alike; the runs of a round take turns at its places, lib-rounds.sh),
# printed with the min-max spread of the single runs; a verdict
# from fewer than 5 rounds says so.  The load average is printed before and
# after.
# RAILNET_BENCH_BOUND=1 (the default) runs the plugin a second time in each
# round with its two ranks bound to halves of the CPUs this script may use
# (taskset, as an MPI launcher binds the ranks of a job: on 2 CPUs one
# each), in a column of its own with its own ratio and verdict: unbound,
# the scheduler sometimes puts both polling proxies on one CPU and both
# NIC threads on the other, and the plugin's rounds split in two groups.
# ib_write_bw runs unbound, as it is run by hand (bound the same way its
# busy-polling client takes its CPU from its own NIC thread).
# RAILNET_BENCH_NIC_APART=1 (the default) runs both programs once more in
# each round with softnic's NIC threads on one half of the CPUs
# (SOFTNIC_NIC_CPUS) and the programs on the other (taskset: on 2 CPUs
# both ranks, or ib_write_bw's server and client, on one CPU, the NIC on
# the other), in columns of their own with their own ratio and verdict: a
# ConnectX takes none of the host's CPUs, softnic's threads take the
# programs' unless kept apart, and which program thread lands beside the
# responder's engine then decides a run (docs/performance.md).
# RAILNET_BENCH_BASELINE=DIR (another build's top_builddir, e.g. main's)
# runs that build's plugin too, with this build's netdriver and softnic, in
# the same alternating rounds: a "before" column and after/before.
# RAILNET_BENCH_VARIANTS="VAR=V[ VAR=V];..." repeats the bandwidth and
# latency runs under each softnic setting listed, taking turns in each
# round (printed, no verdict); LD_LIBRARY_PATH=<another build>/tests/softnic
# in one makes it an A/B of two softnic builds.
# RAILNET_BENCH_DEEP=1 adds ib_write_bw at its default depth (-t 128) to
# each round: what depth alone is worth (NCCL's API allows 32 at most).
# RAILNET_BENCH_MD=FILE writes the results as markdown (date, machine,
# command, tables) for docs/performance.md: into FILE between the lines
# "<!-- plugin_vs_perftest:begin -->" and "<!-- plugin_vs_perftest:end -->"
# when FILE has them (the section is replaced), else as FILE's whole text;
# RAILNET_BENCH_MD_SECTION names another section (another machine's table).
: "${top_builddir:=$(pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
. "$top_srcdir/bench/lib-vars.sh"
bench_vars_check || exit 1
plugin=$top_builddir/.libs/libnccl-net-railnet.so
nd=$top_builddir/tests/netdriver/netdriver
# perftest as scripts/gpu-stage stages it for a machine without it
[ -x "$top_builddir/perftest/ib_write_bw" ] && ! command -v ib_write_bw >/dev/null &&
    PATH=$top_builddir/perftest:$PATH
command -v ib_write_bw >/dev/null || { echo "skipped: perftest not installed"; exit 0; }
[ -x "$nd" ] && [ -f "$plugin" ] || { echo "skipped: build the plugin and tests first"; exit 0; }
base=
if [ -n "${RAILNET_BENCH_BASELINE:-}" ]; then
    base=$RAILNET_BENCH_BASELINE/.libs/libnccl-net-railnet.so
    [ -f "$base" ] || { echo "RAILNET_BENCH_BASELINE: no $base"; exit 1; }
fi
export LD_LIBRARY_PATH=$top_builddir/tests/softnic${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
port0=${RAILNET_BENCH_PERFTEST_PORT:-17531}
depths=${RAILNET_BENCH_DEPTHS:-8 16}
sizes=${RAILNET_BENCH_SIZES:-65536 262144 1048576 4194304 16777216}
rounds=${RAILNET_BENCH_ROUNDS:-5}
lrounds=${RAILNET_BENCH_LAT_ROUNDS:-$rounds}
budget=${RAILNET_BENCH_BYTES:-1073741824}
goal_bw=${RAILNET_BENCH_GOAL_BW:-0.95}
goal_lat=${RAILNET_BENCH_GOAL_LAT:-1.1}
aa_on=${RAILNET_BENCH_AA:-1}
bound_on=${RAILNET_BENCH_BOUND:-1}
apart_on=${RAILNET_BENCH_NIC_APART:-1}
for d in $depths; do
    case $d in ''|*[!0-9]*) d=0 ;; esac
    [ "$d" -ge 1 ] && [ "$d" -le 32 ] || { echo "RAILNET_BENCH_DEPTHS: 1..32 each (NCCL's most requests per comm)"; exit 1; }
done
case $rounds in ''|*[!0-9]*|0) echo "RAILNET_BENCH_ROUNDS: a positive count"; exit 1 ;; esac
case $lrounds in ''|*[!0-9]*|0) echo "RAILNET_BENCH_LAT_ROUNDS: a positive count"; exit 1 ;; esac
few() { [ "$1" -lt 5 ] && echo " (from $1 rounds: fewer than 5, not a verdict)"; }

# listening PORT: something listens on TCP port PORT (IPv4 or IPv6), read
# from /proc (the GPU machines have no ss)
listening() {
    awk -v p=":$(printf '%04X' "$1")" '$2 ~ p "$" && $4 == "0A" { f = 1 } END { exit !f }' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

perftest() { # tool args...: runs server and client, prints the client's output
    t=$1; shift
    # a fresh port each run; its callers run in $(...), so the next port
    # lives in a file, not in a variable they would lose
    port=$(cat "$tmp/port" 2>/dev/null || echo "$port0")
    echo $((port + 1)) >"$tmp/port"
    # $apart: "NIC CPUs:program CPUs" (RAILNET_BENCH_NIC_APART's runs)
    if [ -n "${apart:-}" ]; then
        # (SOFTNIC_STATS: the server's engines' CPU for nic_cpu)
        set -- env SOFTNIC_NIC_CPUS="${apart%%:*}" SOFTNIC_STATS=1 taskset -c "${apart#*:}" "$t" "$@"
    else
        set -- "$t" "$@"
    fi
    timeout 120 "$@" -d softnic0 -x 0 -p $port >"$tmp/srv" 2>&1 &
    # the client once the server listens (a second's sleep was most of a
    # 64 KiB run's time), within 10 s, or once the server is gone
    spid=$! i=0
    while [ $i -lt 500 ] && ! listening $port && kill -0 $spid 2>/dev/null; do
        sleep 0.02
        i=$((i + 1))
    done
    timeout 120 "$@" -d softnic0 -x 0 -p $port 127.0.0.1 2>&1
    wait
}

# "median min max" of the arguments (the median of an even count: the mean
# of the middle two); "- - -" without any
stats() {
    printf '%s\n' "$@" | awk 'NF && $1 != "-" { print $1 }' | sort -g | awk '
        { v[NR] = $1 }
        END { if (!NR) { print "- - -"; exit }
              m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
              printf "%.3f %.3f %.3f\n", m, v[1], v[NR] }'
}
human() { awk -v b="$1" 'BEGIN { if (b >= 1048576 && b % 1048576 == 0) print b / 1048576 " MiB"; else if (b >= 1024 && b % 1024 == 0) print b / 1024 " KiB"; else print b " B" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b != "-") printf "%.2f", b / a; else print "-" }'; }

# netdriver bw through plugin .so $1 at size $2, $3 messages, depth $4,
# its output left in $tmp/$5, netdriver's options ($6...: --rank-wrap)
# before bw: prints GB/s ("-" when it failed)
netdriver_bw() {
    so=$1 size=$2 iters=$3 depth=$4 out=$tmp/$5
    shift 5
    RAILNET_QPS_PER_CONN=1 RAILNET_MERGE_PORTS=0 RAILNET_HCA==softnic0:1 \
        "$nd" --plugin "$so" "$@" bw --size $size --iters $iters --window $depth --receives >"$out" 2>"$out.err"
    v=$(awk '$1 == '$size' { print $4 }' "$out"); echo "${v:--}"
}
# unbound, its output in $tmp/pl
plugin_bw() { netdriver_bw "$1" $2 $3 $4 pl; }
. "$top_srcdir/bench/lib-cpus.sh"
. "$top_srcdir/bench/lib-rounds.sh"
halves=
[ "$bound_on" != 0 ] && halves=$(cpu_halves)
[ -n "$halves" ] || bound_on=0
[ "$apart_on" != 0 ] && [ -z "$halves" ] && halves=$(cpu_halves)
[ -n "$halves" ] || apart_on=0
# the ranks bound to the two halves
plugin_bw_bound() {
    netdriver_bw "$1" $2 $3 $4 plb --rank-wrap "taskset -c ${halves% *}" --rank-wrap "taskset -c ${halves#* }"
}
# netdriver bw and ib_write_bw with the NIC threads on the second half of
# the CPUs and the programs on the first (called in $(...): the export
# ends with it)
# (the receiving rank, the second, counts its softnic work: nic_cpu)
plugin_bw_apart() {
    export SOFTNIC_NIC_CPUS="${halves#* }"
    netdriver_bw "$1" $2 $3 $4 pla --rank-wrap "taskset -c ${halves% *}" \
        --rank-wrap "env SOFTNIC_STATS=1 taskset -c ${halves% *}"
}
ib_bw_apart() { apart="${halves#* }:${halves% *}" ib_bw "$@"; }
# the CPU time the receiving process's softnic engines took per request
# they executed, in us, from its SOFTNIC_STATS lines in file $1 (the
# receiver's engines pull each write's payload and complete its receive):
# what the NIC costs per message where a ConnectX costs the host nothing
nic_cpu() {
    awk '/softnic stats: responder: / { for (i = 1; i <= NF; i++) if ($(i+1) == "requests" && $(i+2) == "executed,") n = $i }
         /softnic stats: engines: / { c = $(NF-2) }
         END { if (n > 0 && c != "") printf "%.2f", c * 1000 / n; else print "-" }' "$1" 2>/dev/null
}
# a netdriver run's mean sends and receives in flight, "sends:receives"
# (its output $tmp/$1: pl unbound, pla NIC apart)
plugin_means() {
    printf '%s:%s' "$(sed -n 's/^# [0-9]* bytes: at most [0-9]* sends in flight.*, \([0-9.]*\) on average/\1/p' "$tmp/$1")" \
        "$(sed -n 's/^# [0-9]* bytes: at most [0-9]* receives posted, \([0-9.]*\) on average/\1/p' "$tmp/$1")"
}
ib_bw() { # size iters depth
    v=$(perftest ib_write_bw -i 1 -q 1 -t $3 -Q 1 -s $1 -n $2 | tee "$tmp/ib" |
        awk '$1 == '$1' { printf "%.3f", $4 * 1048576 / 1e9 }'); echo "${v:--}"
}

echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
: >"$tmp/md"
all_ok=1
for depth in $depths; do
    echo "== one-way bandwidth, 1 QP on port 1, $depth messages in flight on both sides: GB/s, median [min-max] of $rounds alternating runs (perftest MB/s are 2^20 bytes)"
    printf '%10s %24s %24s %7s %s' bytes ib_write_bw plugin ratio verdict
    [ "$bound_on" != 0 ] && printf ' %24s %7s %s' "plugin, ranks bound" ratio verdict
    [ "$apart_on" != 0 ] && printf ' %24s %24s %7s %s' "ib_write_bw, NIC apart" "plugin, NIC apart" ratio verdict
    [ "$aa_on" != 0 ] && printf ' %24s %6s' "ib_write_bw again" A/A
    [ -n "${RAILNET_BENCH_DEEP:-}" ] && printf ' %24s %8s' "ib_write_bw -t128" ratio128
    [ -n "$base" ] && printf ' %24s %13s' baseline after/before
    echo
    below= belowb= belowa= aas=
    {
        printf '| depth %s | `ib_write_bw` GB/s | plugin GB/s | plugin / `ib_write_bw` |' "$depth"
        [ "$bound_on" != 0 ] && printf ' plugin, ranks bound, GB/s | bound / `ib_write_bw` |'
        [ "$apart_on" != 0 ] && printf ' `ib_write_bw`, NIC apart, GB/s | plugin, NIC apart, GB/s | apart: plugin / `ib_write_bw` | apart: NIC CPU per message, us (`ib_write_bw` / plugin) |'
        [ "$aa_on" != 0 ] && printf ' A/A |'
        printf '\n|---|---:|---:|---:|'
        [ "$bound_on" != 0 ] && printf -- '---:|---:|'
        [ "$apart_on" != 0 ] && printf -- '---:|---:|---:|---:|'
        [ "$aa_on" != 0 ] && printf -- '---:|'
        echo
    } >>"$tmp/md"
    for size in $sizes; do
        n=$((budget / size)); [ $n -lt 200 ] && n=200
        ibs= pls= pbs= deeps= bls= inflight= inapart= ib2s= ias= pas= cpui= cpup=
        jobs=
        [ -n "${RAILNET_BENCH_DEEP:-}" ] && jobs="$jobs deep"
        [ -n "$base" ] && jobs="$jobs base"
        jobs="$jobs ib pl"
        [ "$bound_on" != 0 ] && jobs="$jobs pb"
        [ "$apart_on" != 0 ] && jobs="$jobs ia pa"
        [ "$aa_on" != 0 ] && jobs="$jobs ib2"
        for round in $(seq "$rounds"); do
            # shellcheck disable=SC2086
            for job in $(round_order "$round" $jobs); do
                case $job in
                    deep) deeps="$deeps $(ib_bw $size $n 128)" ;;
                    base) bls="$bls $(plugin_bw "$base" $size $n $depth)" ;;
                    ib) ibs="$ibs $(ib_bw $size $n $depth)" ;;
                    pl) pls="$pls $(plugin_bw "$plugin" $size $n $depth)" ;;
                    pb) pbs="$pbs $(plugin_bw_bound "$plugin" $size $n $depth)" ;;
                    ia) ias="$ias $(ib_bw_apart $size $n $depth)" cpui="$cpui $(nic_cpu "$tmp/srv")" ;;
                    pa) pas="$pas $(plugin_bw_apart "$plugin" $size $n $depth)" cpup="$cpup $(nic_cpu "$tmp/pla.err")" ;;
                    ib2) ib2s="$ib2s $(ib_bw $size $n $depth)" ;;
                esac
            done
            # the depth each side really ran with: perftest's banner, the
            # plugin's most sends in flight at once (netdriver bw counts
            # them), then the plugin's mean sends and receives in flight: a
            # mean of sends far below the receives' is time the sender
            # waited for clear-to-sends
            inflight="$inflight $(sed -n 's/^ *TX depth *: *\([0-9]*\).*/\1/p' "$tmp/ib" | head -n 1)/$(sed -n 's/^# [0-9]* bytes: at most \([0-9]*\) sends in flight.*/\1/p' "$tmp/pl")($(plugin_means pl))"
            # NIC apart the two ranks share CPUs: receives posted far above
            # the sends in flight are messages that landed and wait for the
            # receiving rank's turn to be completed and posted again
            if [ "$apart_on" != 0 ]; then inapart="$inapart $(plugin_means pla)"; fi
        done
        set -- $(stats $ibs); ib=$1 ibr="$2-$3"
        set -- $(stats $pls); pl=$1 plr="$2-$3"
        r=$(ratio "$ib" "$pl")
        v=$(awk -v r="$r" -v g="$goal_bw" 'BEGIN { print (r != "-" && r + 0 >= g ? "ok" : "below") }')
        [ "$v" = ok ] || { below="$below $size:$r"; all_ok=0; }
        printf '%10d %24s %24s %7s %s' $size "$ib [$ibr]" "$pl [$plr]" "$r" "$v"
        rb=
        if [ "$bound_on" != 0 ]; then
            set -- $(stats $pbs)
            rb=$(ratio "$ib" "$1")
            vb=$(awk -v r="$rb" -v g="$goal_bw" 'BEGIN { print (r != "-" && r + 0 >= g ? "ok" : "below") }')
            [ "$vb" = ok ] || { belowb="$belowb $size:$rb"; all_ok=0; }
            printf ' %24s %7s %s' "$1 [$2-$3]" "$rb" "$vb"
            pb="$1 ($2-$3)"
        fi
        ra=
        if [ "$apart_on" != 0 ]; then
            set -- $(stats $ias); ia="$1 ($2-$3)" ia1=$1 iar="$1 [$2-$3]"
            set -- $(stats $pas); pa="$1 ($2-$3)"
            ra=$(ratio "$ia1" "$1")
            va=$(awk -v r="$ra" -v g="$goal_bw" 'BEGIN { print (r != "-" && r + 0 >= g ? "ok" : "below") }')
            [ "$va" = ok ] || { belowa="$belowa $size:$ra"; all_ok=0; }
            printf ' %24s %24s %7s %s' "$iar" "$1 [$2-$3]" "$ra" "$va"
        fi
        aa=
        if [ "$aa_on" != 0 ]; then
            set -- $(stats $ib2s)
            aa=$(ratio "$ib" "$1")
            aas="$aas $aa"
            printf ' %24s %6s' "$1 [$2-$3]" "$aa"
        fi
        if [ -n "${RAILNET_BENCH_DEEP:-}" ]; then
            set -- $(stats $deeps)
            printf ' %24s %8s' "$1 [$2-$3]" "$(ratio "$1" "$pl")"
        fi
        if [ -n "$base" ]; then
            set -- $(stats $bls)
            printf ' %24s %13s' "$1 [$2-$3]" "$(ratio "$1" "$pl")"
        fi
        echo
        echo "#   runs: ib_write_bw$ibs;${ib2s:+ again$ib2s;} plugin$pls${pbs:+; bound$pbs}${ias:+; NIC apart: ib_write_bw$ias, plugin$pas}${deeps:+; -t 128$deeps}${base:+; baseline$bls}; in flight (ib_write_bw/plugin(plugin's mean sends:receives)):$inflight${inapart:+; NIC apart, plugin's mean sends:receives:$inapart}"
        nc=
        if [ "$apart_on" != 0 ]; then
            set -- $(stats $cpui); nci=$1
            set -- $(stats $cpup); ncp=$1
            nc="$nci / $ncp"
            echo "#   NIC apart, the receiving process's softnic engines' CPU per message, us: ib_write_bw$cpui (median $nci), plugin$cpup (median $ncp)"
        fi
        echo "| $(human $size) | $ib ($ibr) | $pl ($plr) | $r |${rb:+ $pb | $rb |}${ra:+ $ia | $pa | $ra | $nc |}${aa:+ $aa |}" >>"$tmp/md"
    done
    band=
    if [ -n "$aas" ]; then
        set -- $(stats $aas)
        band="$2..$3"
        echo "A/A band, depth $depth (ib_write_bw's second run / its first, over the sizes): $band"
    fi
    if [ -z "$below" ]; then
        echo "verdict, depth $depth: plugin / ib_write_bw >= $goal_bw at every size$(few "$rounds")"
    else
        # a miss at or above the band's low edge: ib_write_bw alone moved as far
        noise=$(printf '%s\n' $below | awk -F: -v lo="${band%%..*}" 'lo != "" && lo != "-" && $2 + 0 >= lo + 0 { printf " %s", $1 }')
        echo "verdict, depth $depth: plugin / ib_write_bw below $goal_bw at (bytes:ratio)$below$(few "$rounds")${noise:+; within the A/A band at$noise}"
    fi
    if [ "$apart_on" != 0 ]; then
        if [ -z "$belowa" ]; then
            echo "verdict, depth $depth, NIC apart: plugin / ib_write_bw >= $goal_bw at every size$(few "$rounds")"
        else
            echo "verdict, depth $depth, NIC apart: plugin / ib_write_bw below $goal_bw at (bytes:ratio)$belowa$(few "$rounds")"
        fi
    fi
    if [ "$bound_on" != 0 ]; then
        if [ -z "$belowb" ]; then
            echo "verdict, depth $depth, ranks bound: plugin / ib_write_bw >= $goal_bw at every size$(few "$rounds")"
        else
            echo "verdict, depth $depth, ranks bound: plugin / ib_write_bw below $goal_bw at (bytes:ratio)$belowb$(few "$rounds")"
        fi
    fi
    {
        echo
        [ "$bound_on" != 0 ] && echo "Ranks bound: \`taskset -c ${halves% *}\` and \`taskset -c ${halves#* }\`." && echo
        [ "$apart_on" != 0 ] && echo "NIC apart: \`SOFTNIC_NIC_CPUS=${halves#* }\`, both programs' processes \`taskset -c ${halves% *}\`." && echo
        [ -n "$band" ] && echo "A/A band (\`ib_write_bw\` run again in the same rounds / its first run, over the sizes): $band." && echo
    } >>"$tmp/md"
done

# netdriver's 8-byte ping-pong through plugin .so $1: the median one-way us ("-" when it failed)
plugin_lat() {
    v=$("$nd" --plugin "$1" lat --size 8 --iters 2000 2>/dev/null | sed -n 's/.*, \([0-9.]*\) us one-way (median)/\1/p')
    echo "${v:--}"
}

# the median of field $2 of the lines of file $1
median_of() {
    # shellcheck disable=SC2046
    stats $(cut -d' ' -f"$2" "$1") | cut -d' ' -f1
}

# Runs "$@" (after $1 and $2) under each variant of RAILNET_BENCH_VARIANTS,
# its VAR=V words exported in a subshell, for $2 rounds, the variants
# taking turns in each: a round's output of variant i is appended to
# $tmp/$1.i.
variant_rounds() {
    pre=$1 nr=$2
    shift 2
    for round in $(seq "$nr"); do
        i=0 old_ifs=$IFS
        IFS=';'
        for variant in $RAILNET_BENCH_VARIANTS; do
            IFS=$old_ifs
            # shellcheck disable=SC2086,SC2163
            (export $variant; "$@") >>"$tmp/$pre.$i"
            i=$((i + 1))
        done
        IFS=$old_ifs
    done
}
# a variant's bandwidth row of a round: ib_write_bw, the plugin, its means in flight
variant_bw() {
    ib=$(ib_bw "$1" "$2" "$3")
    pl=$(plugin_bw "$plugin" "$1" "$2" "$3")
    echo "$ib $pl $(plugin_means pl)"
}
# a variant's latency row of a round: ib_write_lat, the plugin
variant_lat() {
    v=$(perftest ib_write_lat -s 8 -n 2000 | awk '$1 == 8 { print $5 }')
    echo "${v:--} $(plugin_lat "$plugin")"
}

# RAILNET_BENCH_VARIANTS: the same bandwidth and latency runs again under
# each softnic setting of a ';'-separated list (e.g. "SOFTNIC_ENGINES=1;SOFTNIC_SPIN_US=50"),
# both programs alike, the variants taking turns within each round: which
# of softnic's choices a gap follows. A variant that sets LD_LIBRARY_PATH
# to another build's tests/softnic (and one to this build's) is an A/B of
# two softnic builds. Printed only, no verdict and no markdown.
if [ -n "${RAILNET_BENCH_VARIANTS:-}" ]; then
    echo "== variants (RAILNET_BENCH_VARIANTS): medians of $rounds rounds, the variants alternating in each; the plugin's mean sends:receives in flight"
    printf '%-32s %5s %10s %11s %11s %7s %s\n' variant depth bytes ib_write_bw plugin ratio "in flight"
    old_ifs=$IFS; IFS=';'; set -f; set -- $RAILNET_BENCH_VARIANTS; IFS=$old_ifs
    for depth in $depths; do
        for size in $sizes; do
            n=$((budget / size)); [ $n -lt 200 ] && n=200
            f=var.$depth.$size
            variant_rounds "$f" "$rounds" variant_bw "$size" "$n" "$depth"
            i=0
            for variant in "$@"; do
                ib=$(median_of "$tmp/$f.$i" 1)
                pl=$(median_of "$tmp/$f.$i" 2)
                printf '%-32s %5s %10s %11s %11s %7s %s\n' "$variant" $depth $size "$ib" "$pl" "$(ratio "$ib" "$pl")" "$(cut -d' ' -f3 "$tmp/$f.$i" | tr '\n' ' ')"
                i=$((i + 1))
            done
        done
    done
    # and the 8-byte latency (below) under each, taking turns the same way
    echo "== variants, 8-byte latency (us, one-way): medians of $lrounds rounds, the variants alternating in each"
    printf '%-32s %12s %8s %7s %s\n' variant ib_write_lat plugin ratio "plugin's runs"
    variant_rounds vlat "$lrounds" variant_lat
    i=0
    for variant in "$@"; do
        il=$(median_of "$tmp/vlat.$i" 1)
        pl=$(median_of "$tmp/vlat.$i" 2)
        printf '%-32s %12s %8s %7s %s\n' "$variant" "$il" "$pl" "$(ratio "$il" "$pl")" "$(cut -d' ' -f2 "$tmp/vlat.$i" | tr '\n' ' ')"
        i=$((i + 1))
    done
    set +f
fi

echo "== 8-byte latency (us, one-way: medians of 2000 round trips -- ib_write_lat's t_typical -- then the median [min-max] of $lrounds alternating runs)"
ibls= isls= plls= blls= pscs=
ljobs="psc iwl${base:+ base} isl pl"
for round in $(seq "$lrounds"); do
    # shellcheck disable=SC2086
    for job in $(round_order "$round" $ljobs); do
        case $job in
            psc) pscs="$pscs $(SOFTNIC_PUSH_SHARED=0 plugin_lat "$plugin")" ;;
            iwl) v=$(perftest ib_write_lat -s 8 -n 2000 | awk '$1 == 8 { print $5 }'); ibls="$ibls ${v:--}" ;;
            base) blls="$blls $(plugin_lat "$base")" ;;
            isl) v=$(perftest ib_send_lat -s 8 -n 2000 | awk '$1 == 8 { print $5 }'); isls="$isls ${v:--}" ;;
            pl) plls="$plls $(plugin_lat "$plugin")" ;;
        esac
    done
done
echo "# runs: ib_write_lat$ibls; ib_send_lat$isls; plugin$plls; plugin, SOFTNIC_PUSH_SHARED=0$pscs${base:+; baseline$blls}"
set -- $(stats $ibls); ibl=$1 iblr="$2-$3"
set -- $(stats $isls); isl=$1 islr="$2-$3"
set -- $(stats $plls); pll=$1 pllr="$2-$3"
set -- $(stats $pscs); psc=$1 pscr="$2-$3"
rl=$(ratio "$ibl" "$pll"); rs=$(ratio "$isl" "$pll"); rsc=$(ratio "$ibl" "$psc")
echo "ib_write_lat $ibl [$iblr] us, ib_send_lat $isl [$islr] us, plugin $pll [$pllr] us; plugin/ib_write_lat $rl, plugin/ib_send_lat $rs"
echo "plugin with SOFTNIC_PUSH_SHARED=0 (its clear-to-sends by system call, as ib_write_lat's writes): $psc [$pscr] us; /ib_write_lat $rsc"
lv=$(awk -v r="$rl" -v g="$goal_lat" 'BEGIN { print (r != "-" && r + 0 <= g ? "ok" : "above") }')
[ "$lv" = ok ] || all_ok=0
echo "verdict, latency: plugin / ib_write_lat $rl, goal <= $goal_lat: $lv$(few "$lrounds")"
if [ -n "$base" ]; then
    set -- $(stats $blls)
    echo "baseline $1 [$2-$3] us; after/before $(ratio "$1" "$pll")"
fi
{
    echo "| 8 B one-way latency | \`ib_write_lat\` us | \`ib_send_lat\` us | plugin us | plugin / \`ib_write_lat\` | plugin, \`SOFTNIC_PUSH_SHARED=0\`, us | that / \`ib_write_lat\` |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    echo "| median (min-max) | $ibl ($iblr) | $isl ($islr) | $pll ($pllr) | $rl | $psc ($pscr) | $rsc |"
    echo
} >>"$tmp/md"

if [ "${RAILNET_BENCH_STRIPING:-1}" != 0 ]; then
    rate=${RAILNET_BENCH_RATE:-300M}
    echo "== striping with SOFTNIC_RATE=$rate bytes/s per port (GB/s at 16 MiB)"
    one=$(SOFTNIC_RATE=$rate RAILNET_HCA==softnic0:1 "$nd" --plugin "$plugin" bw --size 16M --iters 60 --window 16 2>/dev/null |
        awk '$1 == 16777216 { print $4 }')
    two=$(SOFTNIC_RATE=$rate "$nd" --plugin "$plugin" bw --size 16M --iters 60 --window 16 2>/dev/null | awk '$1 == 16777216 { print $4 }')
    awk -v a="$one" -v b="$two" 'BEGIN { printf "port 1 alone %s, merged ports 1+2 %s, merged/one %.2f\n", a, b, (a > 0 ? b / a : 0) }'
fi
load_after=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)
echo "# load average after: $load_after"
echo "verdict, all: $([ $all_ok = 1 ] && echo "every goal met" || echo "some goals not met (above)")$(few "$rounds")"

if [ -n "${RAILNET_BENCH_MD:-}" ]; then
    cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null)
    model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
    sect=${RAILNET_BENCH_MD_SECTION:-plugin_vs_perftest}
    . "$top_srcdir/bench/lib-md.sh"
    cmd=$(md_command "RAILNET_BENCH_DEPTHS=\"$depths\" RAILNET_BENCH_SIZES=\"$sizes\" RAILNET_BENCH_ROUNDS=$rounds${RAILNET_BENCH_BYTES:+ RAILNET_BENCH_BYTES=$budget}${RAILNET_BENCH_BOUND:+ RAILNET_BENCH_BOUND=$RAILNET_BENCH_BOUND}" plugin_vs_perftest.sh)
    {
        echo "$(date +%F), $(uname -m), $cpus CPUs${model:+ ($model)}, kernel $(uname -r), load average after $load_after."
        echo "Medians of $rounds alternating rounds (min-max of the single rounds in parentheses); ratios"
        echo "are of the medians. Goals: bandwidth ratio >= $goal_bw at every size and depth, latency ratio <= $goal_lat."
        echo
        echo '```sh'
        echo "$cmd"
        echo '```'
        echo
        cat "$tmp/md"
    } >"$tmp/block"
    md_section "$RAILNET_BENCH_MD" "$sect" "$tmp/block"
fi
