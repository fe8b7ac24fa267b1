# bench/lib-cpus.sh: sourced by the benches that place programs and
# softnic's NIC threads on CPUs of their own.
#   cpu_halves
# prints the CPUs this process may use split into two halves, "A B" (each a
# taskset -c list), or nothing with fewer than 2 CPUs or without taskset.
cpu_halves() {
    command -v taskset >/dev/null || return 0
    sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status | tr ',' '\n' | awk -F- '
        NF { lo = $1; hi = (NF > 1 ? $2 : $1); for (c = lo; c <= hi; c++) cpu[n++] = c }
        END { if (n < 2) exit
              h = int(n / 2); a = cpu[0]; for (i = 1; i < h; i++) a = a "," cpu[i]
              b = cpu[h]; for (i = h + 1; i < n; i++) b = b "," cpu[i]
              print a, b }'
}
