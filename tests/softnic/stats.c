/* stats.c: what softnic did, by role (the requesters, responders and
 * completers the engines run, the mlx5 NIC thread, the application's
 * posting threads), summed over the process and printed on stderr at exit
 * when SOFTNIC_STATS=1.  It answers where a message's time goes on a host
 * with no profiler (the GPU machines have no perf or strace): how many CUDA
 * copies and syncs each role made per message, how long the syncs waited,
 * and how many WQEs a requester batch and a responder ACK covered.  Off, a
 * call is one load and a branch; on, relaxed atomic adds (the threads doing
 * one role share a counter). */
#include "softnic.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

static const char *const role_name[SN_ROLE_N] = {
    [SN_ROLE_APP] = "application", [SN_ROLE_REQUESTER] = "requester",
    [SN_ROLE_RESPONDER] = "responder", [SN_ROLE_COMPLETER] = "completer",
    [SN_ROLE_MLX5] = "mlx5 NIC",
};

static _Atomic uint64_t counts[SN_ROLE_N][SN_ST_N];
static __thread enum sn_role my_role;
static _Atomic int enabled = -1;   /* -1: not read yet */

bool sn_stats_on(void)
{
    int on = atomic_load_explicit(&enabled, memory_order_relaxed);
    if (on < 0) {
        on = softnic_global()->conf.stats != 0;
        atomic_store(&enabled, on);
    }
    return on;
}

void sn_stats_role(enum sn_role r)
{
    my_role = r;
}

void sn_stat_add(enum sn_stat s, uint64_t v)
{
    if (sn_stats_on())
        atomic_fetch_add_explicit(&counts[my_role][s], v, memory_order_relaxed);
}

/* A forked child has none of the parent's threads: it starts from zero, so
 * what it prints at its exit is its own work, not a second copy of the
 * parent's (netdriver's ranks are forked children). */
static void stats_child_reset(void)
{
    for (int r = 0; r < SN_ROLE_N; r++)
        for (int s = 0; s < SN_ST_N; s++)
            atomic_store_explicit(&counts[r][s], 0, memory_order_relaxed);
}

__attribute__((constructor)) static void stats_atfork(void)
{
    pthread_atfork(NULL, NULL, stats_child_reset);
}

static double per(uint64_t a, uint64_t b)
{
    return b ? (double)a / (double)b : 0.0;
}

/* One line per role that did anything, naming only what it did. */
__attribute__((destructor)) static void stats_print(void)
{
    /* not sn_stats_on(): a process that never used softnic must not set
     * it up at exit; every engine asks when it starts */
    if (atomic_load(&enabled) != 1)
        return;
    for (int r = 0; r < SN_ROLE_N; r++) {
        uint64_t c[SN_ST_N];
        uint64_t any = 0;
        for (int s = 0; s < SN_ST_N; s++)
            any |= c[s] = atomic_load(&counts[r][s]);
        if (!any)
            continue;
        char line[512];
        int n = snprintf(line, sizeof(line), "softnic stats: %s:", role_name[r]);
#define ADD(...) \
        do { \
            if (n > 0 && (size_t)n < sizeof(line)) \
                n += snprintf(line + n, sizeof(line) - (size_t)n, __VA_ARGS__); \
        } while (0)
        if (c[SN_ST_DTOH] || c[SN_ST_HTOD])
            ADD(" %llu copies out of GPU memory (%.1f KB), %llu into it (%.1f KB) in %llu driver calls, %.2f us each;",
                (unsigned long long)c[SN_ST_DTOH], c[SN_ST_DTOH_BYTES] / 1e3, (unsigned long long)c[SN_ST_HTOD],
                c[SN_ST_HTOD_BYTES] / 1e3, (unsigned long long)c[SN_ST_COPY_CALLS],
                per(c[SN_ST_COPY_NS], c[SN_ST_COPY_CALLS]) / 1e3);
        if (c[SN_ST_SYNC])
            ADD(" %llu stream syncs, %.2f us each (%.3f s);", (unsigned long long)c[SN_ST_SYNC],
                per(c[SN_ST_SYNC_NS], c[SN_ST_SYNC]) / 1e3, c[SN_ST_SYNC_NS] / 1e9);
        if (c[SN_ST_TX_BATCHES])
            ADD(" %llu batches sent, %llu WQEs (%.2f each);", (unsigned long long)c[SN_ST_TX_BATCHES],
                (unsigned long long)c[SN_ST_TX_WQES], per(c[SN_ST_TX_WQES], c[SN_ST_TX_BATCHES]));
        if (c[SN_ST_REQUESTS])
            ADD(" %llu requests executed, %llu ACKs sent, %llu left as notes;",
                (unsigned long long)c[SN_ST_REQUESTS], (unsigned long long)c[SN_ST_ACKS],
                (unsigned long long)c[SN_ST_ACKS_NOTED]);
#undef ADD
        fprintf(stderr, "%s\n", line);
    }
    struct sn_engine_counts e;
    engine_counts(&e);
    if (e.steps)
        fprintf(stderr, "softnic stats: engines: %d threads, %llu steps, %llu wake-ups, %llu timers, %.3f ms CPU\n",
                e.engines, (unsigned long long)e.steps, (unsigned long long)e.wakeups, (unsigned long long)e.timers,
                (double)e.cpu_ns / 1e6);
}
