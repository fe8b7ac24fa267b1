/* config.c: softnic's configuration, the only reader of SOFTNIC_* variables.
 *
 * Sources, later ones override earlier ones:
 *   1. defaults: one device "softnic0", port 1 on 127.0.0.1, port 2 on
 *      127.0.0.2, MTU 4096, no rate limit, no latency, no VF mode;
 *   2. SOFTNIC_CONF=<file> (format below) or SOFTNIC_DEVICES=<list>;
 *   3. SOFTNIC_RATE, SOFTNIC_LATENCY_US, SOFTNIC_MTU, SOFTNIC_VF (all ports);
 *   4. SOFTNIC_PORT_OPTS (per port keys, e.g. faults for unmodified programs);
 *   5. SOFTNIC_RETRY_CAP_MS, SOFTNIC_RETRY_MIN_MS, SOFTNIC_RNR_CAP_MS,
 *      SOFTNIC_VF_BASE_RATE,
 *      SOFTNIC_SYSFS, SOFTNIC_PCI_LAYOUT (the PCI functions the sysfs view
 *      places the devices on, below), SOFTNIC_CTL_FILE, SOFTNIC_DEBUG,
 *      SOFTNIC_FASTPATH (0: every payload on the wire; see cma.c),
 *      SOFTNIC_PUSH (0: small writes to same-host peers on the wire too,
 *      not placed by the requester; see push.c; off with SOFTNIC_FASTPATH=0),
 *      SOFTNIC_PUSH_IMM (0: WRITE_WITH_IMM on the wire, placed writes only),
 *      SOFTNIC_PUSH_PROC_MEM (0: pushes by process_vm_writev, not through
 *      the peer's /proc/<pid>/mem; push.c),
 *      SOFTNIC_PUSH_SHARED (0: pushes into a peer's sealed memfd memory by
 *      system call too, not stored through a mapping; push_map.c),
 *      SOFTNIC_PUSH_INLINE (the most bytes a pushed WRITE_WITH_IMM carries in
 *      its completion record, 0..SN_PUSH_INLINE_MAX; push.c),
 *      SOFTNIC_PUSH_SEND (0: every SEND on the wire; 1: one of at most
 *      SOFTNIC_PUSH_INLINE bytes carried in the receive's record; push.c),
 *      SOFTNIC_PUSH_ACKS (0: every ACK to a same-host requester on the wire,
 *      none left as a note its polls complete from; ack_note.c),
 *      SOFTNIC_WIRE_UNIX (0: connections to listeners of this network
 *      namespace over loopback TCP too, not an abstract UNIX socket; wire.c),
 *      SOFTNIC_SPIN_US (NIC threads poll before they sleep; spin.c),
 *      SOFTNIC_ENGINES (engine threads per process; engine.c),
 *      SOFTNIC_NIC_CPUS (a CPU list, "0" or "2-3,6": the CPUs the NIC
 *      threads run on, below),
 *      SOFTNIC_ACK_POLL_US (a GPU-driven QP's completer and responder poll; spin.c),
 *      SOFTNIC_ACK_COALESCE_US (the longest a responder holds the ACK of
 *      requests that asked for none; responder.c),
 *      SOFTNIC_LINK_RATE (what unlimited ports advertise; see link.c),
 *      SOFTNIC_LINK_CACHE (where the host's calibration is shared; link.c),
 *      SOFTNIC_MAX_WQE_SZ_SQ (a firmware that answers QUERY_HCA_CAP with
 *      this largest send WQE, 16..1024 bytes, and refuses larger WQEs;
 *      unset: it states 1024 and refuses none; mlx5_hca_cap.c),
 *      SOFTNIC_STATS (1: per-thread-role counters on stderr at exit; stats.c).
 *
 * File format (SOFTNIC_CONF), one directive per line, '#' starts a comment:
 *     device <name>                       starts a device (max 4)
 *     port <key>=<value> ...              adds a port to it (max 4)
 *     retry_cap_ms <n> | retry_min_ms <n> | rnr_cap_ms <n> | vf_base_rate <rate>
 *     sysfs <dir> | pci_layout <none|rail|shared> | ctl_file <path> | debug <0|1>
 * Port keys: ip=<IPv4> (required), rate=<bytes/s>, latency_us=<n>,
 *   mtu=<256|512|1024|2048|4096>, vf=<0|1>, down_after_bytes=<n>,
 *   down_after_ms=<n>, ack_delay_us=<n>.  Rates take k/M/G (10^3..) or Ki/Mi/Gi suffixes.
 * SOFTNIC_DEVICES: "name:ip[,ip...][;name:ip...]", e.g.
 *   "softnic0:127.0.0.1,127.0.0.2;softnic1:127.0.1.1".
 * SOFTNIC_PORT_OPTS: "dev:port:key=value[,key=value...][;...]", e.g.
 *   "softnic0:1:rate=1G,down_after_bytes=100000000".
 * pci_layout / SOFTNIC_PCI_LAYOUT (with a sysfs view; sysfs.c): "none"
 *   (default): <dev>/device is a directory of its own, on no PCI bus;
 *   "rail": a rail-optimized node, each device on a PCIe switch of its own
 *   with one GPU (vendor 0x10de, class 0x030200) beside it; "shared": the
 *   same with two GPUs on each switch. */
#include "softnic.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return EINVAL;
    double mult = 1;
    if (*end) {
        char c = (char)toupper((unsigned char)*end);
        bool bin = end[1] == 'i' || end[1] == 'I';
        double base = bin ? 1024.0 : 1000.0;
        if (c == 'K')
            mult = base;
        else if (c == 'M')
            mult = base * base;
        else if (c == 'G')
            mult = base * base * base;
        else
            return EINVAL;
        if (end[bin ? 2 : 1] != '\0')
            return EINVAL;
    }
    *out = (uint64_t)(v * mult);
    return 0;
}

static int mtu_enum(uint64_t bytes)
{
    switch (bytes) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    case 4096: return IBV_MTU_4096;
    default: return 0;
    }
}

static void port_defaults(struct sn_port_conf *p, const char *ip)
{
    memset(p, 0, sizeof(*p));
    snprintf(p->ip, sizeof(p->ip), "%s", ip);
    p->mtu = IBV_MTU_4096;
}

static int port_key(struct sn_port_conf *p, const char *key, const char *val)
{
    uint64_t v;
    if (!strcmp(key, "ip")) {
        struct in_addr a;
        if (inet_aton(val, &a) == 0)
            return EINVAL;
        snprintf(p->ip, sizeof(p->ip), "%s", val);
        return 0;
    }
    if (parse_u64(val, &v))
        return EINVAL;
    if (!strcmp(key, "rate"))
        p->rate = v;
    else if (!strcmp(key, "latency_us")) {
        if (v > SN_MAX_LATENCY_US)
            return ERANGE;
        p->latency_us = (uint32_t)v;
    }
    else if (!strcmp(key, "mtu")) {
        if (!(p->mtu = mtu_enum(v)))
            return EINVAL;
    } else if (!strcmp(key, "vf"))
        p->vf = v != 0;
    else if (!strcmp(key, "down_after_bytes"))
        p->down_after_bytes = v;
    else if (!strcmp(key, "down_after_ms"))
        p->down_after_ms = (uint32_t)v;
    else if (!strcmp(key, "ack_delay_us"))
        p->ack_delay_us = (uint32_t)v;
    else
        return EINVAL;
    return 0;
}

/* Applies "k=v<sep>k=v" to p. */
static int port_keys(struct sn_port_conf *p, char *list, const char *seps)
{
    char *save = NULL;
    for (char *tok = strtok_r(list, seps, &save); tok; tok = strtok_r(NULL, seps, &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return EINVAL;
        *eq = '\0';
        if (port_key(p, tok, eq + 1)) {
            SN_LOG("config: bad port key %s=%s", tok, eq + 1);
            return EINVAL;
        }
    }
    return 0;
}

/* A NIC's pipeline sees a doorbell or a packet within a microsecond; a
 * thread that sleeps on a condition or a socket needs a wake-up, 5-50 us
 * in a VM, paid several times per message (requester, responder,
 * completer).  SOFTNIC_SPIN_US=N makes a thread that ran out of work poll
 * for N us first, as NIC firmware would.  Off by default: on a host of few
 * cores (CI's two) spinning threads take the CPU from the processes they
 * serve (netdriver bw 13 GB/s -> 0.5 GB/s at 50 us on 2 cores), and on the
 * GPU machines it has not yet shown a gain (bench/gpu_nccl_ib_vs_railnet.sh
 * with SOFTNIC_SPIN_US in its environment, for both transports). */
#define SPIN_US_MAX 100000u

/* A QP that a GPU drives (an mlx5 dv or DEVX QP, its WQEs rung by a kernel)
 * has a GPU thread waiting in quiet for each CQE, and its completer, asleep
 * on its socket, pays a wake-up for every ACK: most of what a kernel-posted
 * write waits for beyond the copies.  A ConnectX writes the CQE as the ACK
 * arrives, and takes the next request as it arrives.  So within
 * SOFTNIC_ACK_POLL_US of such a QP's last post or ACK, its completer polls
 * its connection for up to that long before it sleeps, and the responder
 * its requests reach (told by the connection's hello, SN_HELLO_POLL) polls
 * that long for the next request, within spin.c's cap of a quarter of the
 * cores spinning.  Default: ACK_POLL_US where the process may run on at
 * least ACK_POLL_MIN_CORES CPUs (sn_usable_cores: the GPU machines), 0 on
 * fewer (CI's two, where a poll takes the core the responder needs to send
 * the ACK; a 2-CPU container on a large host alike). */
#define ACK_POLL_US 1000u
/* SOFTNIC_ACK_COALESCE_US's default: off.  On the 2-CPU VM 200 us halved
 * the ACKs of the plugin's stream but moved its bandwidth by nothing
 * measurable (64 KiB, depth 8: 1.70 against 1.80 GB/s, 5 alternating
 * rounds) and its 8-byte ping-pong from 50 to 55 us (the held ACK's timer
 * wakes an engine between the round trips) */
#define ACK_COALESCE_US 0u
#define ACK_POLL_MIN_CORES 8

/* SOFTNIC_NIC_CPUS: a NIC works beside the host's CPUs, never on them;
 * softnic's NIC threads (its engines and listener) share
 * them with the application's, and on a host of few cores which thread
 * lands beside which decides what a run measures (docs/performance.md).
 * A list of CPUs (as taskset -c takes it) keeps the NIC threads there;
 * bind the programs to the others to give the NIC CPUs of its own. */
static int cpu_list_parse(const char *s, cpu_set_t *set)
{
    CPU_ZERO(set);
    while (*s) {
        char *end;
        errno = 0;
        unsigned long lo = strtoul(s, &end, 10), hi = lo;
        if (end == s || errno || lo >= CPU_SETSIZE)
            return EINVAL;
        s = end;
        if (*s == '-') {
            hi = strtoul(++s, &end, 10);
            if (end == s || errno || hi >= CPU_SETSIZE || hi < lo)
                return EINVAL;
            s = end;
        }
        for (unsigned long c = lo; c <= hi; c++)
            CPU_SET((int)c, set);
        if (*s == ',' && s[1])
            s++;
        else if (*s)
            return EINVAL;
    }
    return CPU_COUNT(set) ? 0 : EINVAL;
}

/* SOFTNIC_ENGINES: the engine threads a process runs its QPs' work on
 * (engine.c), 1..SN_ENGINES_MAX; unset or 0: half the usable cores, 1 to
 * SN_ENGINE_DEFAULT.  A fixed pool, as a NIC has a fixed set of engines: a
 * 64-rank all-to-all opens thousands of QPs, not thousands of threads. */

/* "none", "rail" or "shared" into *out; 0 or EINVAL. */
static int pci_layout_parse(const char *s, int *out)
{
    if (!strcmp(s, "none"))
        *out = SN_PCI_NONE;
    else if (!strcmp(s, "rail"))
        *out = SN_PCI_RAIL;
    else if (!strcmp(s, "shared"))
        *out = SN_PCI_SHARED;
    else
        return EINVAL;
    return 0;
}

static void config_defaults(struct sn_config *c)
{
    memset(c, 0, sizeof(*c));
    c->ndevs = 1;
    snprintf(c->dev[0].name, sizeof(c->dev[0].name), "softnic0");
    c->dev[0].nports = 2;
    port_defaults(&c->dev[0].port[0], "127.0.0.1");
    port_defaults(&c->dev[0].port[1], "127.0.0.2");
    c->retry_cap_ms = 2000;
    c->retry_min_ms = 500;
    c->rnr_cap_ms = 2000;
    c->vf_base_rate = 2000000000ull;
    c->fastpath = 1;
    c->push = 1;
    c->push_imm = 1;
    c->push_send = 1;
    c->push_proc_mem = 1;
    c->push_shared = 1;
    c->push_inline = SN_PUSH_INLINE_MAX;
    c->push_acks = 1;
    c->wire_unix = 1;
    c->ack_poll_us = sn_usable_cores() >= ACK_POLL_MIN_CORES ? ACK_POLL_US : 0;
    c->ack_coalesce_us = ACK_COALESCE_US;
}

static int config_file(struct sn_config *c, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        SN_LOG("config: cannot open SOFTNIC_CONF=%s: %s", path, strerror(errno));
        return errno;
    }
    char line[1024];
    int lineno = 0, err = 0;
    c->ndevs = 0;
    while (!err && fgets(line, sizeof(line), f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *save = NULL;
        char *word = strtok_r(line, " \t\r\n", &save);
        if (!word)
            continue;
        char *rest = strtok_r(NULL, "\r\n", &save);
        while (rest && isspace((unsigned char)*rest))
            rest++;
        uint64_t v = 0;
        if (!strcmp(word, "device")) {
            if (c->ndevs == SN_MAX_DEVICES || !rest || !*rest) {
                err = EINVAL;
                break;
            }
            struct sn_dev_conf *d = &c->dev[c->ndevs++];
            memset(d, 0, sizeof(*d));
            snprintf(d->name, sizeof(d->name), "%s", strtok_r(rest, " \t", &save));
        } else if (!strcmp(word, "port")) {
            if (c->ndevs == 0 || c->dev[c->ndevs - 1].nports == SN_MAX_PORTS) {
                err = EINVAL;
                break;
            }
            struct sn_dev_conf *d = &c->dev[c->ndevs - 1];
            struct sn_port_conf *p = &d->port[d->nports];
            port_defaults(p, "");
            if (!rest || port_keys(p, rest, " \t") || !p->ip[0]) {
                err = EINVAL;
                break;
            }
            d->nports++;
        } else if (!strcmp(word, "sysfs") && rest) {
            snprintf(c->sysfs_dir, sizeof(c->sysfs_dir), "%s", rest);
        } else if (!strcmp(word, "pci_layout") && rest) {
            const char *layout = strtok_r(rest, " \t", &save);
            err = layout ? pci_layout_parse(layout, &c->pci_layout) : EINVAL;
        } else if (!strcmp(word, "ctl_file") && rest) {
            snprintf(c->ctl_file, sizeof(c->ctl_file), "%s", rest);
        } else if (rest && !parse_u64(rest, &v)) {
            if (!strcmp(word, "retry_cap_ms"))
                c->retry_cap_ms = (uint32_t)v;
            else if (!strcmp(word, "retry_min_ms"))
                c->retry_min_ms = (uint32_t)v;
            else if (!strcmp(word, "rnr_cap_ms"))
                c->rnr_cap_ms = (uint32_t)v;
            else if (!strcmp(word, "vf_base_rate"))
                c->vf_base_rate = v;
            else if (!strcmp(word, "debug"))
                c->debug = (int)v;
            else
                err = EINVAL;
        } else {
            err = EINVAL;
        }
    }
    fclose(f);
    if (err)
        SN_LOG("config: %s:%d: cannot parse directive", path, lineno);
    else if (c->ndevs == 0)
        err = EINVAL;
    for (int i = 0; !err && i < c->ndevs; i++)
        if (c->dev[i].nports == 0)
            err = EINVAL;
    return err;
}

static int config_devices(struct sn_config *c, const char *spec)
{
    char *copy = strdup(spec), *save = NULL;
    int err = 0;
    if (!copy)
        return ENOMEM;
    c->ndevs = 0;
    for (char *dev = strtok_r(copy, ";", &save); dev && !err; dev = strtok_r(NULL, ";", &save)) {
        char *colon = strchr(dev, ':');
        if (!colon || c->ndevs == SN_MAX_DEVICES) {
            err = EINVAL;
            break;
        }
        *colon = '\0';
        struct sn_dev_conf *d = &c->dev[c->ndevs++];
        memset(d, 0, sizeof(*d));
        snprintf(d->name, sizeof(d->name), "%s", dev);
        char *save2 = NULL;
        for (char *ip = strtok_r(colon + 1, ",", &save2); ip; ip = strtok_r(NULL, ",", &save2)) {
            struct in_addr a;
            if (d->nports == SN_MAX_PORTS || inet_aton(ip, &a) == 0) {
                err = EINVAL;
                break;
            }
            port_defaults(&d->port[d->nports++], ip);
        }
        if (d->nports == 0)
            err = EINVAL;
    }
    free(copy);
    if (!err && c->ndevs == 0)
        err = EINVAL;
    return err;
}

static int config_port_opts(struct sn_config *c, const char *spec)
{
    char *copy = strdup(spec), *save = NULL;
    int err = 0;
    if (!copy)
        return ENOMEM;
    for (char *ent = strtok_r(copy, ";", &save); ent && !err; ent = strtok_r(NULL, ";", &save)) {
        char *c1 = strchr(ent, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) {
            err = EINVAL;
            break;
        }
        *c1 = *c2 = '\0';
        int port = atoi(c1 + 1);
        struct sn_dev_conf *d = NULL;
        for (int i = 0; i < c->ndevs; i++)
            if (!strcmp(c->dev[i].name, ent))
                d = &c->dev[i];
        if (!d || port < 1 || port > d->nports) {
            err = EINVAL;
            break;
        }
        err = port_keys(&d->port[port - 1], c2 + 1, ",");
    }
    free(copy);
    return err;
}

/* Applies one key to every port from an environment variable. */
static int env_all_ports(struct sn_config *c, const char *var, const char *key)
{
    const char *v = getenv(var);
    if (!v || !*v)
        return 0;
    for (int i = 0; i < c->ndevs; i++)
        for (int p = 0; p < c->dev[i].nports; p++)
            if (port_key(&c->dev[i].port[p], key, v)) {
                SN_LOG("config: bad %s=%s", var, v);
                return EINVAL;
            }
    return 0;
}

static int env_u32(const char *var, uint32_t *out)
{
    const char *v = getenv(var);
    uint64_t x;
    if (!v || !*v)
        return 0;
    if (parse_u64(v, &x) || x > UINT32_MAX) {   /* no silent wrap past a cap */
        SN_LOG("config: bad %s=%s", var, v);
        return EINVAL;
    }
    *out = (uint32_t)x;
    return 0;
}

/* env_u32 of a poll time in us, at most SPIN_US_MAX: a larger value is
 * logged ("... above N, <off>"), not used (*out = 0), and EINVAL. */
static int env_poll_us(const char *var, uint32_t *out, const char *off)
{
    int err = env_u32(var, out);
    if (!err && *out > SPIN_US_MAX) {
        SN_LOG("config: %s=%u above %u, %s", var, *out, SPIN_US_MAX, off);
        *out = 0;
        err = EINVAL;
    }
    return err;
}

int config_load(struct sn_config *c)
{
    int err = 0;
    const char *v;
    config_defaults(c);
    if ((v = getenv("SOFTNIC_CONF")) && *v)
        err = config_file(c, v);
    else if ((v = getenv("SOFTNIC_DEVICES")) && *v)
        err = config_devices(c, v);
    if (err) {
        SN_LOG("config: invalid configuration, using the defaults");
        config_defaults(c);
        return err;
    }
    err = env_all_ports(c, "SOFTNIC_RATE", "rate");
    err = err ? err : env_all_ports(c, "SOFTNIC_LATENCY_US", "latency_us");
    err = err ? err : env_all_ports(c, "SOFTNIC_MTU", "mtu");
    err = err ? err : env_all_ports(c, "SOFTNIC_VF", "vf");
    if (!err && (v = getenv("SOFTNIC_PORT_OPTS")) && *v && config_port_opts(c, v)) {
        SN_LOG("config: bad SOFTNIC_PORT_OPTS=%s", v);
        err = EINVAL;
    }
    err = err ? err : env_u32("SOFTNIC_RETRY_CAP_MS", &c->retry_cap_ms);
    err = err ? err : env_u32("SOFTNIC_RETRY_MIN_MS", &c->retry_min_ms);
    err = err ? err : env_u32("SOFTNIC_RNR_CAP_MS", &c->rnr_cap_ms);
    uint32_t dbg = (uint32_t)c->debug;
    err = err ? err : env_u32("SOFTNIC_DEBUG", &dbg);
    c->debug = (int)dbg;
    uint32_t fast = (uint32_t)c->fastpath;
    err = err ? err : env_u32("SOFTNIC_FASTPATH", &fast);
    c->fastpath = fast != 0;
    uint32_t push = (uint32_t)c->push;
    err = err ? err : env_u32("SOFTNIC_PUSH", &push);
    c->push = push != 0;
    uint32_t push_imm = (uint32_t)c->push_imm;
    err = err ? err : env_u32("SOFTNIC_PUSH_IMM", &push_imm);
    c->push_imm = push_imm != 0;
    uint32_t push_send = (uint32_t)c->push_send;
    err = err ? err : env_u32("SOFTNIC_PUSH_SEND", &push_send);
    c->push_send = push_send != 0;
    uint32_t proc_mem = (uint32_t)c->push_proc_mem;
    err = err ? err : env_u32("SOFTNIC_PUSH_PROC_MEM", &proc_mem);
    c->push_proc_mem = proc_mem != 0;
    uint32_t shared = (uint32_t)c->push_shared;
    err = err ? err : env_u32("SOFTNIC_PUSH_SHARED", &shared);
    c->push_shared = shared != 0;
    err = err ? err : env_u32("SOFTNIC_PUSH_INLINE", &c->push_inline);
    if (!err && c->push_inline > SN_PUSH_INLINE_MAX) {
        SN_LOG("config: SOFTNIC_PUSH_INLINE=%u above %u, using %u", c->push_inline, SN_PUSH_INLINE_MAX,
               SN_PUSH_INLINE_MAX);
        c->push_inline = SN_PUSH_INLINE_MAX;
    }
    uint32_t push_acks = (uint32_t)c->push_acks;
    err = err ? err : env_u32("SOFTNIC_PUSH_ACKS", &push_acks);
    c->push_acks = push_acks != 0;
    uint32_t wire_unix = (uint32_t)c->wire_unix;
    err = err ? err : env_u32("SOFTNIC_WIRE_UNIX", &wire_unix);
    c->wire_unix = wire_unix != 0;
    uint32_t stats = 0;
    err = err ? err : env_u32("SOFTNIC_STATS", &stats);
    c->stats = stats != 0;
    if (!err && (v = getenv("SOFTNIC_LINK_RATE")) && *v && parse_u64(v, &c->link_rate)) {
        SN_LOG("config: bad SOFTNIC_LINK_RATE=%s", v);
        err = EINVAL;
    }
    if (!err && (v = getenv("SOFTNIC_VF_BASE_RATE")) && *v && parse_u64(v, &c->vf_base_rate))
        err = EINVAL;
    err = err ? err : env_u32("SOFTNIC_MAX_WQE_SZ_SQ", &c->max_wqe_sz_sq);
    if (!err && c->max_wqe_sz_sq && (c->max_wqe_sz_sq < 16 || c->max_wqe_sz_sq > 1024)) {
        SN_LOG("config: SOFTNIC_MAX_WQE_SZ_SQ=%u outside 16..1024 bytes, not stated", c->max_wqe_sz_sq);
        c->max_wqe_sz_sq = 0;
        err = EINVAL;
    }
    err = err ? err : env_u32("SOFTNIC_ACK_COALESCE_US", &c->ack_coalesce_us);
    if (!err && c->ack_coalesce_us > c->retry_min_ms * 500u) {
        SN_LOG("config: SOFTNIC_ACK_COALESCE_US=%u beyond half the retry floor (%u ms), using %u",
               c->ack_coalesce_us, c->retry_min_ms, c->retry_min_ms * 500u);
        c->ack_coalesce_us = c->retry_min_ms * 500u;
    }
    err = err ? err : env_u32("SOFTNIC_ENGINES", &c->engines);
    if (!err && c->engines > SN_ENGINES_MAX) {
        SN_LOG("config: SOFTNIC_ENGINES=%u above %u, using the default", c->engines, SN_ENGINES_MAX);
        c->engines = 0;
        err = EINVAL;
    }
    if (!err && (v = getenv("SOFTNIC_NIC_CPUS")) && *v) {
        if (cpu_list_parse(v, &c->nic_cpus)) {
            SN_LOG("config: bad SOFTNIC_NIC_CPUS=%s (a CPU list: 0,2-3)", v);
            err = EINVAL;
        } else {
            c->nic_cpus_set = true;
        }
    }
    err = err ? err : env_poll_us("SOFTNIC_SPIN_US", &c->spin_us, "not spinning");
    err = err ? err : env_poll_us("SOFTNIC_ACK_POLL_US", &c->ack_poll_us, "not polling");
    if ((v = getenv("SOFTNIC_SYSFS")) && *v)
        snprintf(c->sysfs_dir, sizeof(c->sysfs_dir), "%s", v);
    if (!err && (v = getenv("SOFTNIC_PCI_LAYOUT")) && *v && pci_layout_parse(v, &c->pci_layout)) {
        SN_LOG("config: bad SOFTNIC_PCI_LAYOUT=%s (none, rail or shared)", v);
        err = EINVAL;
    }
    if ((v = getenv("SOFTNIC_CTL_FILE")) && *v)
        snprintf(c->ctl_file, sizeof(c->ctl_file), "%s", v);
    if ((v = getenv("SOFTNIC_LINK_CACHE")) && *v)
        snprintf(c->link_cache, sizeof(c->link_cache), "%s", v);
    return err;
}
