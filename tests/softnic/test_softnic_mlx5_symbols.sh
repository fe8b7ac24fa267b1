#!/bin/bash
# tests/softnic/test_softnic_mlx5_symbols.sh: softnic's libmlx5.so.1 exports
# exactly the versioned symbols of mlx5_symbols_rdma_core_50.txt (rdma-core
# 50's libmlx5 and MLX5_1.25), each in its node, and defines every node;
# where the system has a real libmlx5, every name@node it exports is
# exported by softnic's too.
. "$top_srcdir/tests/lib.sh"

lib="$top_builddir/tests/softnic/libmlx5.so.1"
list="$top_srcdir/tests/softnic/mlx5_symbols_rdma_core_50.txt"
command -v readelf >/dev/null || tap_skip_all "readelf not installed (binutils)"
[ -f "$lib" ] || tap_skip_all "$lib not built"
tap_plan 4

# name@node of every defined, versioned symbol (readelf writes name@@node
# for the default version and name@node for the others; either counts).
exported() {
    readelf --dyn-syms --wide "$1" |
        awk '$7 != "UND" && $8 ~ /@/ && ($4 == "FUNC" || $4 == "OBJECT") { print $8 }' |
        sed 's/@@/@/' | sort -u
}
want=$(grep -v '^#' "$list" | awk 'NF == 2 { print $1 "@" $2 }' | sort -u)
have=$(exported "$lib")

missing=$(comm -23 <(echo "$want") <(echo "$have"))
if [ -z "$missing" ]; then tap_ok every_listed_symbol_is_exported_in_its_node
else tap_not_ok every_listed_symbol_is_exported_in_its_node "missing: $(echo $missing | head -c 1500)"; fi

extra=$(comm -13 <(echo "$want") <(echo "$have"))
if [ -z "$extra" ]; then tap_ok nothing_else_is_exported
else tap_not_ok nothing_else_is_exported "not in the list: $(echo $extra | head -c 1500)"; fi

# every node from MLX5_1.0 to the list's last is defined (a program that
# needs a node but none of its symbols must load)
nodes=$(readelf -V --wide "$lib" | sed -n '/Version definition/,/Version needs/p' |
        grep -o 'Name: MLX5_1\.[0-9]*' | sed 's/Name: //' | sort -uV)
last=$(grep -v '^#' "$list" | awk 'NF == 2 { print $2 }' | sort -uV | tail -n 1)
expect=$(for i in $(seq 0 "${last#MLX5_1.}"); do echo "MLX5_1.$i"; done)
if [ "$nodes" = "$expect" ]; then tap_ok every_node_is_defined
else tap_not_ok every_node_is_defined "defined: $(echo $nodes); want MLX5_1.0..$last"; fi

real=$(ls /usr/lib/*/libmlx5.so.1 2>/dev/null | head -n 1)
if [ -z "$real" ]; then
    tap_skip system_libmlx5_is_a_subset "no system libmlx5.so.1 to compare with"
else
    lack=$(comm -23 <(exported "$real") <(echo "$have"))
    if [ -z "$lack" ]; then tap_ok system_libmlx5_is_a_subset
    else tap_not_ok system_libmlx5_is_a_subset "$real exports, softnic lacks: $(echo $lack | head -c 1500)"; fi
fi
tap_done
