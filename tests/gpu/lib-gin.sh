# tests/gpu/lib-gin.sh: run tests/gpu/gin_device (the device-API GIN program)
# as a 2-rank NCCL job on softnic. Sourced after tests/gpu/lib-nccl.sh by
# tests/gpu/gin_e2e.sh and bench/gpu_gin_railnet_vs_nccl.sh.
#
#   gin_job <name> <torch|system> <ib-proxy|ib-gdaki|railnet|railnet-gdaki|railnet-gdaki-hostq|
#            railnet-gdaki-mismatch> [program args...]
# NCCL: torch = NCCL 2.28.9 from PyTorch's nvidia-nccl wheel (its lib/ put
# after softnic's in LD_LIBRARY_PATH, see nccl_torch_lib in lib-nccl.sh),
# system = the libnccl.so.2 the program finds by itself (the system's).
# Transport: NCCL's own IB transport (NCCL_NET=IB, no plugin) with its proxy
# GIN (NCCL_GIN_TYPE=2) or GDAKI (NCCL_GIN_TYPE=3), or railnet as the net
# plugin (its ncclGinPlugin_v11, RAILNET_GIN=proxy, or RAILNET_GIN=gdaki for
# its GDAKI type). Each job is bounded by
# GIN_JOB_TIMEOUT seconds (default 300).
#
# Symmetric memory (the device API's windows) needs P2P between the GPUs of
# one node, so P2P stays on here; every rank is its own NCCL node
# (NCCL_HOSTID), so the ranks share no LSA team and every GIN put, signal and
# barrier crosses the network, whatever the GPU count.
: "${top_builddir:?}"
GIN_PROG=$top_builddir/tests/gpu/gin_device
unset NCCL_P2P_DISABLE
export NCCL_NVLS_ENABLE=0
GIN_JOB_TIMEOUT=${GIN_JOB_TIMEOUT:-300}
_r=0
while [ $_r -lt 8 ]; do
    eval "NCCL_RANK_WRAP_$_r='env NCCL_HOSTID=railnet-gin-node-$_r'"
    _r=$((_r + 1))
done

gin_job() {
    _name=$1 _lib=$2 _net=$3
    shift 3
    case $_lib in
        torch) _ld=$SOFTNIC_DIR:$(nccl_torch_lib)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ;;
        *) _ld=$LD_LIBRARY_PATH ;;
    esac
    # NCCL's IB transport picks its GID from sysfs, which softnic cannot
    # provide: name softnic's RoCE v2 IPv4 GID index (as the IB bench does).
    case $_net in
        ib-proxy) _env="NCCL_NET=IB NCCL_NET_PLUGIN=none NCCL_GIN_TYPE=2 NCCL_IB_GID_INDEX=${GIN_IB_GID_INDEX:-0}" ;;
        # NCCL's own GDAKI: softnic as a dual-port ConnectX-4+ shows itself
        # (two one-port devices: NCCL numbers a port by the ibv devices
        # before it on one PCI device, and GDAKI opens that port), each a
        # PCI NIC of softnic-sysfs-ns's view, not fused
        ib-gdaki) _env="NCCL_NET=IB NCCL_NET_PLUGIN=none NCCL_GIN_TYPE=3 NCCL_IB_GID_INDEX=${GIN_IB_GID_INDEX:-0} NCCL_NET_MERGE_LEVEL=LOC" ;;
        railnet) _env="NCCL_NET_PLUGIN=$RAILNET_PLUGIN RAILNET_GIN=proxy" ;;
        # railnet's GDAKI type: NCCL's own device code posts into railnet's
        # DEVX queues (rings in GPU memory, or host memory: -hostq); -mismatch
        # says NCCL's device code expects layout 101, so railnet must refuse
        # with a WARN and offer the proxy type
        railnet-gdaki) _env="NCCL_NET_PLUGIN=$RAILNET_PLUGIN RAILNET_GIN=gdaki NCCL_GIN_TYPE=3 RAILNET_GDAKI_QUEUE_MEM=gpu" ;;
        railnet-gdaki-hostq) _env="NCCL_NET_PLUGIN=$RAILNET_PLUGIN RAILNET_GIN=gdaki NCCL_GIN_TYPE=3 RAILNET_GDAKI_QUEUE_MEM=host-devx" ;;
        railnet-gdaki-mismatch) _env="NCCL_NET_PLUGIN=$RAILNET_PLUGIN RAILNET_GIN=gdaki RAILNET_GIN_GDAKI_VERSION=101" ;;
        # what an unmodified job gets: RAILNET_GIN unset (auto)
        railnet-auto) _env="NCCL_NET_PLUGIN=$RAILNET_PLUGIN" ;;
        *) echo "gin_job: unknown transport $_net" >&2; return 2 ;;
    esac
    if [ "$_net" = ib-gdaki ]; then
        _ns=$top_builddir/tests/softnic/softnic-sysfs-ns
        _w0=$NCCL_RANK_WRAP_0 _w1=$NCCL_RANK_WRAP_1
        _sd=${SOFTNIC_DEVICES-unset}
        export SOFTNIC_DEVICES="softnic0:127.0.0.1;softnic1:127.0.0.2"   # the view's and the ranks'
        if [ -x "$_ns" ] && LD_LIBRARY_PATH=$_ld "$_ns" -- true >/dev/null 2>&1; then
            NCCL_RANK_WRAP_0="env LD_LIBRARY_PATH=$_ld $_ns -- $_w0" NCCL_RANK_WRAP_1="env LD_LIBRARY_PATH=$_ld $_ns -- $_w1"
        else
            echo "# gin_job: no softnic-sysfs-ns view here: NCCL finds no PCI path for softnic" >&2
        fi
        # shellcheck disable=SC2086
        nccl_job "$_name" 2 timeout -k 10 "$GIN_JOB_TIMEOUT" env LD_LIBRARY_PATH="$_ld" $_env "$GIN_PROG" "$@"
        _st=$?
        NCCL_RANK_WRAP_0=$_w0 NCCL_RANK_WRAP_1=$_w1
        if [ "$_sd" = unset ]; then unset SOFTNIC_DEVICES; else export SOFTNIC_DEVICES="$_sd"; fi
        return $_st
    fi
    # shellcheck disable=SC2086
    nccl_job "$_name" 2 timeout -k 10 "$GIN_JOB_TIMEOUT" env LD_LIBRARY_PATH="$_ld" $_env "$GIN_PROG" "$@"
}
