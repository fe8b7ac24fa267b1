# tests/packaging/lib-deb.sh: what tests/packaging/deb.sh (CI) and
# tests/gpu/deb_install.sh (GPU machine) share. Sourced after tests/lib.sh.
DEB_PKGS="libnccl-net-railnet railnet-tools railnet-softnic"

# deb_preinstalled: the first of DEB_PKGS already on this machine (installed
# or its configuration left), which the tests must leave alone; none: 1
deb_preinstalled() {
    for _p in $DEB_PKGS; do
        if dpkg-query -W -f='${Status}' "$_p" 2>/dev/null | grep -qE ' installed$|config-files$'; then
            echo "$_p"; return 0
        fi
    done
    return 1
}

# deb_wb_pair OUT ARGS...: the installed railnet-write-bw on softnic (by
# softnic-run), a server with ARGS and a client with ARGS 127.0.0.1, each
# under timeout(1); outputs in OUT.{srv,cli}.{out,err}. 0 when both exit 0,
# else the reason on stdout.
deb_wb_pair() {
    _o=$1; shift
    timeout 120 softnic-run railnet-write-bw -p 0 "$@" >"$_o.srv.out" 2>"$_o.srv.err" &
    _spid=$!
    _port= _i=0
    # the server takes a free port from the kernel and prints it
    while [ -z "$_port" ] && [ $_i -lt 400 ] && kill -0 $_spid 2>/dev/null; do
        _port=$(sed -n 's/^railnet-write-bw: waiting for a client on TCP port \([0-9]*\)$/\1/p' "$_o.srv.err")
        [ -n "$_port" ] || sleep 0.05
        _i=$((_i + 1))
    done
    if [ -z "$_port" ]; then
        kill $_spid 2>/dev/null; wait $_spid
        echo "server did not start: $(tail -n 5 "$_o.srv.err")"; return 1
    fi
    timeout 120 softnic-run railnet-write-bw -p "$_port" "$@" 127.0.0.1 >"$_o.cli.out" 2>"$_o.cli.err"
    _c=$?
    wait $_spid; _s=$?
    [ $_c -eq 0 ] && [ $_s -eq 0 ] && return 0
    echo "client $_c server $_s: $(tail -n 8 "$_o.cli.out" "$_o.cli.err" "$_o.srv.err")"; return 1
}
