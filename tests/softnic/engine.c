/* engine.c: softnic's engines, a fixed pool of NIC threads that every QP's
 * work is scheduled onto, as a NIC runs all its QPs on a fixed set of
 * processing engines instead of a processor per QP.  A 64-rank all-to-all
 * opens thousands of QPs; the process still has SOFTNIC_ENGINES threads
 * for them (config.c; default half the usable CPUs, 1 to SN_ENGINE_DEFAULT).
 *
 * A task is one role of one QP or connection (requester.c, completer.c,
 * responder.c).  Its step does a bounded amount of work without ever
 * waiting, and says what it waits for next:
 *   SN_ENG_IN / SN_ENG_OUT  its connection (engine_task_fd) has something
 *                           to read / room to write (epoll, one-shot: the
 *                           armed socket fires once and is re-armed after
 *                           the step with what that step asks for);
 *   engine_task_at(t, ns)   a time (rate limit, added latency, a retry
 *                           budget, an RNR wait): a heap of tasks by due
 *                           time behind one timerfd, so a wait ends when
 *                           it is due, not on a tick;
 *   SN_ENG_MORE             it stopped with work left: queued again, behind
 *                           the other tasks (one busy QP cannot starve the
 *                           others);
 * and anything else kicks it (engine_task_kick: a post, a state change).
 * Timers are cancelled when a task runs: each step states all it waits for.
 * A connection being set up (a responder checking a hello: cma.c reads
 * /proc, a few ms with thousands of sockets) is in a setup queue the
 * engines serve one task in SETUP_SHARE, so a storm of new connections
 * delays the established ones' steps by a share, not by all of it.
 * A task's state (idle, queued, running) keeps it on one engine at a time;
 * work that comes while it runs makes it run again afterwards.  An idle task
 * costs nothing: a QP that only receives one-sided writes runs its
 * responder and nothing else.
 *
 * One pool per process, not per device: softnic's devices share the host's
 * CPUs, and a port's bandwidth is its rate limit (rate.c), not its threads.
 *
 * Tasks are named to epoll by an index into the pool's table with a
 * generation, not by pointer: an event an engine took out of epoll before
 * its task went away finds no task (or a newer one's generation) and is
 * dropped, so engine_task_del waits only for a step under way.
 *
 * An engine with nothing queued polls the pool for SOFTNIC_SPIN_US before
 * it sleeps (spin.c), and for SOFTNIC_ACK_POLL_US after a step asked for it
 * (SN_ENG_POLL_*: a GPU-driven QP awaits an ACK or a request), then sleeps
 * in epoll_wait. */
#include "softnic.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <unistd.h>

#define SN_ENGINE_MAX 64
/* the setup queue gets one task in this many */
#define SETUP_SHARE 8
#define KEY_WAKE UINT64_MAX
#define KEY_TIMER (UINT64_MAX - 1)

enum task_state { TASK_IDLE, TASK_QUEUED, TASK_RUNNING };

struct sn_eng_task {
    sn_eng_step step;
    void *arg;
    enum sn_role role;
    uint32_t idx, gen;
    int fd;                       /* what SN_ENG_IN/OUT watch, -1: none */
    bool registered;              /* fd is in the epoll set */
    enum task_state state;
    bool again;                   /* work came while it was queued or running */
    bool dead;                    /* engine_task_del under way */
    bool setup;                   /* in the setup queue (engine_task_setup) */
    uint64_t due;                 /* its timer, 0: none */
    int hpos;                     /* its place in the timer heap, -1: none */
    struct sn_eng_task *next;     /* in the run queue */
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;          /* a step ended (engine_task_del waits for it) */
    bool started;
    int nengines;
    int epfd, evfd, tfd;
    bool wake_pending;            /* evfd written, not yet read */
    int sleeping;                 /* engines in epoll_wait (or polling before it) */
    /* the run queue, and the setup queue it serves one task of in
     * SETUP_SHARE (or when it is empty) */
    struct sn_run_queue { struct sn_eng_task *head, *tail; } run, setup;
    int queued;
    int since_setup;
    struct sn_eng_task **table;   /* live tasks by index */
    uint32_t cap, ntasks, gen;
    struct sn_eng_task **heap;    /* timers, earliest first */
    int nheap, heap_cap;
    uint64_t timer_set;           /* what tfd is armed for, 0: disarmed */
    uint64_t steps, wakeups, timers;
    clockid_t cpu[SN_ENGINES_MAX]; /* the engines' CPU clocks */
    int ncpu;
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER, .epfd = -1,
           .evfd = -1, .tfd = -1 };

static __thread bool on_engine;

static uint64_t task_key(const struct sn_eng_task *t)
{
    return (uint64_t)t->gen << 32 | t->idx;
}

static struct sn_eng_task *task_of_key(uint64_t key)
{
    uint32_t idx = (uint32_t)key, gen = (uint32_t)(key >> 32);
    if (idx >= pool.cap || !pool.table[idx] || pool.table[idx]->gen != gen)
        return NULL;
    return pool.table[idx];
}

/* ------------------------------------------------------------ timers */
static void heap_swap(int a, int b)
{
    struct sn_eng_task *t = pool.heap[a];
    pool.heap[a] = pool.heap[b];
    pool.heap[b] = t;
    pool.heap[a]->hpos = a;
    pool.heap[b]->hpos = b;
}

static void heap_up(int i)
{
    while (i > 0 && pool.heap[(i - 1) / 2]->due > pool.heap[i]->due) {
        heap_swap(i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void heap_down(int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < pool.nheap && pool.heap[l]->due < pool.heap[m]->due)
            m = l;
        if (r < pool.nheap && pool.heap[r]->due < pool.heap[m]->due)
            m = r;
        if (m == i)
            return;
        heap_swap(i, m);
        i = m;
    }
}

static void heap_remove(struct sn_eng_task *t)
{
    int i = t->hpos;
    if (i < 0)
        return;
    t->hpos = -1;
    t->due = 0;
    if (--pool.nheap == i)
        return;
    pool.heap[i] = pool.heap[pool.nheap];
    pool.heap[i]->hpos = i;
    heap_up(i);
    heap_down(pool.heap[i]->hpos);
}

/* Arms the timerfd for the earliest timer, when that is earlier than what
 * it is armed for (a later one is found when the earlier fires). */
static void timer_rearm_locked(void)
{
    if (!pool.nheap)
        return;
    uint64_t due = pool.heap[0]->due;
    if (pool.timer_set && pool.timer_set <= due)
        return;
    struct itimerspec its = { .it_value = { .tv_sec = (time_t)(due / 1000000000ull),
                                            .tv_nsec = (long)(due % 1000000000ull) } };
    if (timerfd_settime(pool.tfd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
        pool.timer_set = due;
}

static void wake_locked(void)
{
    if (pool.sleeping > 0 && !pool.wake_pending) {
        uint64_t one = 1;
        pool.wake_pending = true;
        if (write(pool.evfd, &one, sizeof(one)) != sizeof(one))
            pool.wake_pending = false;
    }
}

/* Wakes an engine asleep when more tasks wait than the engines awake will
 * take when their steps end: a task stays with the engines already at
 * work (its connection's data in their caches) unless they have more than
 * they can take, rather than moving to a cold engine at every kick. */
static void wake_for_queue_locked(void)
{
    int awake = pool.nengines - pool.sleeping;
    if (pool.queued > awake)
        wake_locked();
}

/* Queues t unless it is queued or running already (running: the engine
 * running it runs it again). */
static void schedule_locked(struct sn_eng_task *t)
{
    if (t->dead)
        return;
    t->again = true;
    if (t->state != TASK_IDLE)
        return;
    t->state = TASK_QUEUED;
    t->again = false;
    t->next = NULL;
    struct sn_run_queue *q = t->setup ? &pool.setup : &pool.run;
    if (q->tail)
        q->tail->next = t;
    else
        q->head = t;
    q->tail = t;
    pool.queued++;
    wake_for_queue_locked();
}

static void timers_fire_locked(uint64_t now)
{
    while (pool.nheap && pool.heap[0]->due <= now) {
        struct sn_eng_task *t = pool.heap[0];
        heap_remove(t);
        pool.timers++;
        schedule_locked(t);
    }
}

void engine_task_at(struct sn_eng_task *t, uint64_t ns)
{
    pthread_mutex_lock(&pool.lock);
    if (!t->dead && (!t->due || ns < t->due)) {
        if (t->hpos < 0) {
            if (pool.nheap == pool.heap_cap) {
                int cap = pool.heap_cap ? pool.heap_cap * 2 : 64;
                struct sn_eng_task **h = realloc(pool.heap, (size_t)cap * sizeof(*h));
                if (!h) {
                    /* no room for the timer: run it now, it asks again */
                    schedule_locked(t);
                    pthread_mutex_unlock(&pool.lock);
                    return;
                }
                pool.heap = h;
                pool.heap_cap = cap;
            }
            t->hpos = pool.nheap++;
            pool.heap[t->hpos] = t;
        }
        t->due = ns;
        heap_up(t->hpos);
        timer_rearm_locked();
    }
    pthread_mutex_unlock(&pool.lock);
}

/* ------------------------------------------------------------ epoll */
static void watch_locked(struct sn_eng_task *t, unsigned io)
{
    if (t->fd < 0)
        return;
    if (!io) {
        if (t->registered)
            (void)epoll_ctl(pool.epfd, EPOLL_CTL_DEL, t->fd, NULL);
        t->registered = false;
        return;
    }
    struct epoll_event ev = { .events = EPOLLONESHOT | EPOLLRDHUP, .data.u64 = task_key(t) };
    if (io & SN_ENG_IN)
        ev.events |= EPOLLIN;
    if (io & SN_ENG_OUT)
        ev.events |= EPOLLOUT;
    if (epoll_ctl(pool.epfd, t->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, t->fd, &ev) == 0) {
        t->registered = true;
        return;
    }
    /* not watchable (closed under it): run it, it finds out why */
    t->registered = false;
    schedule_locked(t);
}

void engine_task_fd(struct sn_eng_task *t, int fd)
{
    pthread_mutex_lock(&pool.lock);
    if (t->fd != fd) {
        watch_locked(t, 0);
        t->fd = fd;
    }
    pthread_mutex_unlock(&pool.lock);
}

/* ------------------------------------------------------------ engines */
/* The next task to run: the run queue's first, but the setup queue's
 * first once in SETUP_SHARE or when the run queue is empty. */
static struct sn_eng_task *next_locked(void)
{
    struct sn_run_queue *q = &pool.run;
    if (pool.setup.head && (!pool.run.head || pool.since_setup >= SETUP_SHARE - 1))
        q = &pool.setup;
    struct sn_eng_task *t = q->head;
    if (!t)
        return NULL;
    q->head = t->next;
    if (!q->head)
        q->tail = NULL;
    pool.since_setup = q == &pool.setup ? 0 : pool.since_setup + 1;
    return t;
}

static void run_locked(struct sn_eng_task *t, unsigned *poll_next)
{
    pool.queued--;
    wake_for_queue_locked();
    t->state = TASK_RUNNING;
    t->again = false;
    heap_remove(t);   /* the step states what it waits for */
    pool.steps++;
    pthread_mutex_unlock(&pool.lock);
    sn_stats_role(t->role);
    unsigned r = t->step(t, t->arg);
    pthread_mutex_lock(&pool.lock);
    if (r & SN_ENG_POLL_COMP)
        *poll_next = 1 + SN_POLL_COMPLETER;
    else if (r & SN_ENG_POLL_RESP)
        *poll_next = 1 + SN_POLL_RESPONDER;
    t->state = TASK_IDLE;
    if (t->dead) {
        pthread_cond_broadcast(&pool.cond);
        return;
    }
    if (r & SN_ENG_DONE) {
        watch_locked(t, 0);
        heap_remove(t);
        pool.table[t->idx] = NULL;
        pool.ntasks--;
        free(t);
        return;
    }
    watch_locked(t, r & (SN_ENG_IN | SN_ENG_OUT));
    if ((r & SN_ENG_MORE) || t->again)
        schedule_locked(t);
}

/* Queues the tasks whose connections have what epoll says they wait for. */
static void events_locked(const struct epoll_event *ev, int n)
{
    for (int i = 0; i < n; i++) {
        if (ev[i].data.u64 == KEY_WAKE) {
            uint64_t v;
            if (read(pool.evfd, &v, sizeof(v)) < 0) { /* another engine read it */ }
            pool.wake_pending = false;
        } else if (ev[i].data.u64 == KEY_TIMER) {
            uint64_t v;
            if (read(pool.tfd, &v, sizeof(v)) < 0) { /* another engine read it */ }
            pool.timer_set = 0;
        } else {
            struct sn_eng_task *et = task_of_key(ev[i].data.u64);
            if (et)
                schedule_locked(et);
        }
    }
}

/* A rate-limit or added-latency wait is microseconds to a few hundred:
 * under the kernel's default 50 us timer slack every one of them ran late
 * (ib_write_lat 64 KiB on a 25 Gb/s port: 86-138 us typical for a 21 us
 * line time; NCCL's 64 KiB all_reduce at 25 Gb/s 2.3x slower than
 * unlimited, for both transports).  A NIC's serializer is not late.
 * SOFTNIC_NIC_CPUS: the CPUs listed (config.c says why). */
void sn_nic_thread_init(void)
{
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    const struct sn_config *c = &softnic_global()->conf;
    if (c->nic_cpus_set) {
        int err = pthread_setaffinity_np(pthread_self(), sizeof(c->nic_cpus), &c->nic_cpus);
        static _Atomic bool told;
        if (err && !atomic_exchange(&told, true))
            SN_LOG("config: SOFTNIC_NIC_CPUS: the NIC threads cannot run there (%s): left where the process runs",
                   strerror(err));
    }
}

static void *engine_main(void *arg)
{
    (void)arg;
    sn_nic_thread_init();
    (void)sn_stats_on();   /* so that the exit's stats line knows, steps or not */
    on_engine = true;
    bool spin = sn_spin_on();
    unsigned poll_next = 0;   /* the last step asked for an ACK poll: 1 + its sn_poll_kind */
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        timers_fire_locked(sn_now_ns());
        struct sn_eng_task *t = next_locked();
        if (t) {
            run_locked(t, &poll_next);
            /* tasks queued behind each other (a busy QP's steps come back
             * at the tail) keep the engines from epoll_wait: what the
             * connections have for the other tasks is collected now */
            if (pool.queued > 0) {
                struct epoll_event ev[64];
                pthread_mutex_unlock(&pool.lock);
                int n = epoll_wait(pool.epfd, ev, 64, 0);
                pthread_mutex_lock(&pool.lock);
                events_locked(ev, n);
            }
            continue;
        }
        timer_rearm_locked();
        pool.sleeping++;
        pthread_mutex_unlock(&pool.lock);
        if (poll_next)
            (void)sn_ack_poll_readable(pool.epfd, (enum sn_poll_kind)(poll_next - 1));
        else if (spin)
            (void)sn_spin_readable(pool.epfd);
        poll_next = 0;
        struct epoll_event ev[64];
        int n = epoll_wait(pool.epfd, ev, 64, -1);
        pthread_mutex_lock(&pool.lock);
        pool.sleeping--;
        pool.wakeups++;
        events_locked(ev, n);
    }
    return NULL;
}

int engine_threads_wanted(void)
{
    int n = (int)softnic_global()->conf.engines;
    if (n <= 0) {
        /* half the CPUs: the other half is the application's (NCCL's
         * proxy thread, a benchmark's polling loop), and an engine that
         * has to share a CPU with them hands its tasks to the others,
         * cold (ib_write_bw 64 KiB between two processes on 2 CPUs: 2.7
         * GB/s with 2 engines each, 3.6-4.2 with 1) */
        n = sn_usable_cores() / 2;
        n = n < 1 ? 1 : n > SN_ENGINE_DEFAULT ? SN_ENGINE_DEFAULT : n;
    }
    return n > SN_ENGINE_MAX ? SN_ENGINE_MAX : n < 1 ? 1 : n;
}

/* Starts the engines once per process (pool.lock held). */
static int start_locked(void)
{
    if (pool.started)
        return 0;
    int err = 0;
    pool.epfd = epoll_create1(EPOLL_CLOEXEC);
    pool.evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    pool.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    struct epoll_event wake = { .events = EPOLLIN, .data.u64 = KEY_WAKE };
    struct epoll_event timer = { .events = EPOLLIN, .data.u64 = KEY_TIMER };
    if (pool.epfd < 0 || pool.evfd < 0 || pool.tfd < 0 ||
        epoll_ctl(pool.epfd, EPOLL_CTL_ADD, pool.evfd, &wake) != 0 ||
        epoll_ctl(pool.epfd, EPOLL_CTL_ADD, pool.tfd, &timer) != 0) {
        err = errno ? errno : EMFILE;
        goto fail;
    }
    int n = engine_threads_wanted(), started = 0;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    for (int i = 0; i < n; i++) {
        pthread_t th;
        if (pthread_create(&th, &at, engine_main, NULL) != 0)
            continue;
        /* named here, before anyone can list the process's threads */
        char name[16];
        snprintf(name, sizeof(name), "sn-engine%d", i % 100);
        pthread_setname_np(th, name);
        /* engines never exit while the process lives: their clocks stay valid */
        if (pool.ncpu < (int)SN_ENGINES_MAX && pthread_getcpuclockid(th, &pool.cpu[pool.ncpu]) == 0)
            pool.ncpu++;
        started++;
    }
    pthread_attr_destroy(&at);
    if (!started) {
        err = EAGAIN;
        goto fail;
    }
    pool.nengines = started;
    pool.started = true;
    SN_DEBUG("engine: %d engine thread(s)", started);
    return 0;
fail:
    if (pool.epfd >= 0)
        close(pool.epfd);
    if (pool.evfd >= 0)
        close(pool.evfd);
    if (pool.tfd >= 0)
        close(pool.tfd);
    pool.epfd = pool.evfd = pool.tfd = -1;
    return err;
}

int engine_task_new(sn_eng_step step, void *arg, enum sn_role role, struct sn_eng_task **out)
{
    struct sn_eng_task *t = calloc(1, sizeof(*t));
    if (!t)
        return ENOMEM;
    t->step = step;
    t->arg = arg;
    t->role = role;
    t->fd = -1;
    t->hpos = -1;
    pthread_mutex_lock(&pool.lock);
    int err = start_locked();
    uint32_t idx = 0;
    if (!err) {
        while (idx < pool.cap && pool.table[idx])
            idx++;
        if (idx == pool.cap) {
            uint32_t cap = pool.cap ? pool.cap * 2 : 64;
            struct sn_eng_task **nt = realloc(pool.table, cap * sizeof(*nt));
            if (!nt) {
                err = ENOMEM;
            } else {
                memset(nt + pool.cap, 0, (cap - pool.cap) * sizeof(*nt));
                pool.table = nt;
                pool.cap = cap;
            }
        }
    }
    if (err) {
        pthread_mutex_unlock(&pool.lock);
        free(t);
        return err;
    }
    t->idx = idx;
    t->gen = ++pool.gen;
    pool.table[idx] = t;
    pool.ntasks++;
    pthread_mutex_unlock(&pool.lock);
    *out = t;
    return 0;
}

void engine_task_setup(struct sn_eng_task *t, bool setup)
{
    pthread_mutex_lock(&pool.lock);
    /* from its own step, or before it first runs: never while queued */
    if (t->state != TASK_QUEUED)
        t->setup = setup;
    pthread_mutex_unlock(&pool.lock);
}

void engine_task_kick(struct sn_eng_task *t)
{
    pthread_mutex_lock(&pool.lock);
    schedule_locked(t);
    pthread_mutex_unlock(&pool.lock);
}

void engine_task_del(struct sn_eng_task *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&pool.lock);
    t->dead = true;
    watch_locked(t, 0);
    t->fd = -1;
    heap_remove(t);
    if (t->state == TASK_QUEUED) {
        struct sn_run_queue *q = t->setup ? &pool.setup : &pool.run;
        struct sn_eng_task **pp = &q->head, *prev = NULL;
        while (*pp && *pp != t) {
            prev = *pp;
            pp = &(*pp)->next;
        }
        if (*pp) {
            *pp = t->next;
            if (q->tail == t)
                q->tail = prev;
            pool.queued--;
        }
        t->state = TASK_IDLE;
    }
    while (t->state == TASK_RUNNING)
        pthread_cond_wait(&pool.cond, &pool.lock);
    pool.table[t->idx] = NULL;
    pool.ntasks--;
    pthread_mutex_unlock(&pool.lock);
    free(t);
}

void engine_counts(struct sn_engine_counts *out)
{
    pthread_mutex_lock(&pool.lock);
    out->engines = pool.nengines;
    out->tasks = pool.ntasks;
    out->steps = pool.steps;
    out->wakeups = pool.wakeups;
    out->timers = pool.timers;
    out->cpu_ns = 0;
    for (int i = 0; i < pool.ncpu; i++) {
        struct timespec ts;
        if (clock_gettime(pool.cpu[i], &ts) == 0)
            out->cpu_ns += (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    }
    pthread_mutex_unlock(&pool.lock);
}

/* A forked child has none of the parent's engines (fork copies only the
 * calling thread), nor may it share the parent's epoll set: it starts its
 * own pool on its first QP.  The tasks of the parent's QPs are lost with
 * their threads, as those QPs are. */
static void engine_child_reset(void)
{
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.cond, NULL);
    if (pool.epfd >= 0)
        close(pool.epfd);
    if (pool.evfd >= 0)
        close(pool.evfd);
    if (pool.tfd >= 0)
        close(pool.tfd);
    pool.epfd = pool.evfd = pool.tfd = -1;
    pool.started = false;
    pool.nengines = pool.sleeping = pool.queued = 0;
    pool.wake_pending = false;
    pool.run.head = pool.run.tail = pool.setup.head = pool.setup.tail = NULL;
    pool.since_setup = 0;
    pool.table = NULL;
    pool.cap = pool.ntasks = 0;
    pool.heap = NULL;
    pool.nheap = pool.heap_cap = 0;
    pool.timer_set = 0;
    pool.steps = pool.wakeups = pool.timers = 0;
    pool.ncpu = 0;
}

static void engine_prepare(void)
{
    pthread_mutex_lock(&pool.lock);
}

static void engine_parent(void)
{
    pthread_mutex_unlock(&pool.lock);
}

__attribute__((constructor)) static void engine_atfork(void)
{
    pthread_atfork(engine_prepare, engine_parent, engine_child_reset);
}
