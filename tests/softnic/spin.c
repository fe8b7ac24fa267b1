/* spin.c: the bounded poll of an engine that ran out of work, before it
 * sleeps (SOFTNIC_SPIN_US; config.c says why and the default), and the
 * polls after a step of a GPU-driven QP's completer (for ACKs) or of its
 * peer's responder (for requests) (SOFTNIC_ACK_POLL_US; engine.c). */
#include "softnic.h"

#include <poll.h>
#include <sched.h>
#include <unistd.h>

/* At most a quarter of the CPUs this process may use spin in it at a time:
 * spinning beyond the cores would take them from the threads with work
 * (NCCL's proxy, the other rank, the other engines). */
static int g_spinning;
static uint64_t g_started, g_found;   /* softnic_ctl_spin_counts */
/* softnic_ctl_ack_polls: per kind of poller (sn_poll_kind), and the
 * responder connections told to poll */
static uint64_t g_ack_asked[SN_POLL_KINDS], g_ack_started[SN_POLL_KINDS], g_ack_found[SN_POLL_KINDS],
    g_poll_conns;

int sn_usable_cores(void)
{
    cpu_set_t set;
    /* the CPUs this process may run on (a container's or taskset's share),
     * not the host's */
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static uint64_t spin_ns(void)
{
    return (uint64_t)softnic_global()->conf.spin_us * 1000u;
}

static bool spin_enter(uint64_t *started)
{
    static int max;   /* set once; racing first callers store the same value */
    if (!__atomic_load_n(&max, __ATOMIC_RELAXED)) {
        long n = sn_usable_cores() / 4;
        __atomic_store_n(&max, n > 1 ? (int)n : 1, __ATOMIC_RELAXED);
    }
    if (__atomic_add_fetch(&g_spinning, 1, __ATOMIC_RELAXED) <= __atomic_load_n(&max, __ATOMIC_RELAXED)) {
        __atomic_add_fetch(started, 1, __ATOMIC_RELAXED);
        return true;
    }
    __atomic_sub_fetch(&g_spinning, 1, __ATOMIC_RELAXED);
    return false;
}

static void spin_leave(bool found, uint64_t *found_count)
{
    if (found)
        __atomic_add_fetch(found_count, 1, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&g_spinning, 1, __ATOMIC_RELAXED);
}

void spin_counts(uint64_t *started, uint64_t *found)
{
    *started = __atomic_load_n(&g_started, __ATOMIC_RELAXED);
    *found = __atomic_load_n(&g_found, __ATOMIC_RELAXED);
}

bool sn_spin_on(void)
{
    return spin_ns() != 0;
}

/* Polls fd for up to ns; started/found count the poll. */
static bool poll_readable(int fd, uint64_t ns, uint64_t *started, uint64_t *found)
{
    if (!ns || fd < 0 || !spin_enter(started))
        return false;
    uint64_t until = sn_now_ns() + ns;
    struct pollfd p = { .fd = fd, .events = POLLIN };
    bool ready = false;
    do
        /* readable, closed or failed (revents set): the caller's read
         * finds out which; a failed poll (EINTR) is not readiness, or the
         * completer would sleep in recv where it expects data */
        ready = poll(&p, 1, 0) > 0;
    while (!ready && sn_now_ns() < until);
    spin_leave(ready, found);
    return ready;
}

bool sn_spin_readable(int fd)
{
    return poll_readable(fd, spin_ns(), &g_started, &g_found);
}

uint64_t sn_ack_poll_ns(void)
{
    return (uint64_t)softnic_global()->conf.ack_poll_us * 1000u;
}

bool sn_ack_poll_readable(int fd, enum sn_poll_kind kind)
{
    uint64_t ns = sn_ack_poll_ns();
    if (ns && fd >= 0)
        __atomic_add_fetch(&g_ack_asked[kind], 1, __ATOMIC_RELAXED);   /* the cap may refuse it */
    return poll_readable(fd, ns, &g_ack_started[kind], &g_ack_found[kind]);
}

void sn_ack_poll_conn(void)
{
    __atomic_add_fetch(&g_poll_conns, 1, __ATOMIC_RELAXED);
}

void ack_poll_counts(uint64_t asked[SN_POLL_KINDS], uint64_t started[SN_POLL_KINDS],
                     uint64_t found[SN_POLL_KINDS], uint64_t *conns)
{
    for (int k = 0; k < SN_POLL_KINDS; k++) {
        asked[k] = __atomic_load_n(&g_ack_asked[k], __ATOMIC_RELAXED);
        started[k] = __atomic_load_n(&g_ack_started[k], __ATOMIC_RELAXED);
        found[k] = __atomic_load_n(&g_ack_found[k], __ATOMIC_RELAXED);
    }
    *conns = __atomic_load_n(&g_poll_conns, __ATOMIC_RELAXED);
}
