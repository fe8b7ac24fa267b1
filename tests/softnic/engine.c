/* engine.c: softnic's engines, a fixed pool of NIC threads that QPs are
 * scheduled onto, as a NIC runs every QP on a fixed set of processing
 * engines instead of a processor per QP.
 *
 * A task (one QP's role: today the completer, completer.c) names a step
 * function and, optionally, a connection to watch.  It is queued to the
 * pool when its connection becomes readable (epoll, one-shot: the armed
 * socket fires once, then is re-armed after the step), when another thread
 * kicks it, or on the pool's tick (every SN_ENGINE_TICK_MS, for timers
 * such as the retry budget).  An engine takes the task at the head of the
 * run queue, runs its step -- which does a bounded amount of work and says
 * whether it has more -- and puts it at the tail again if so (fairness
 * between QPs).  The task's state (idle, queued, running) is the
 * "scheduled" flag: a task runs on one engine at a time, and work that
 * arrives while it runs makes it run again afterwards.
 *
 * One pool per process, not per device: softnic's devices all share the
 * host's CPUs (a device's engines would only multiply the threads by
 * SOFTNIC_DEVICES), and what models a port's bandwidth is its rate limit
 * (rate.c), not its threads.  SOFTNIC_ENGINES sizes it (config.c).
 *
 * Tasks are named to epoll by an index into the pool's table with a
 * generation, not by pointer: an event that an engine took out of epoll
 * before the task went away finds no task (or a newer one's generation)
 * and is dropped, so engine_task_del never waits for epoll, only for a
 * step under way.
 *
 * An engine with nothing queued polls the pool for SOFTNIC_SPIN_US before
 * it sleeps (spin.c), and for SOFTNIC_ACK_POLL_US after a step asked for
 * it (a GPU-driven QP awaiting an ACK), then sleeps in epoll_wait. */
#include "softnic.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define SN_ENGINE_TICK_MS 20
#define SN_ENGINE_MAX 64

enum task_state { TASK_IDLE, TASK_QUEUED, TASK_RUNNING };

struct sn_eng_task {
    sn_eng_step step;
    void *arg;
    uint32_t idx, gen;
    int fd;                       /* watched for reading, -1: none */
    enum task_state state;
    unsigned why;                 /* SN_ENG_* reasons gathered while queued or running */
    bool dead;                    /* engine_task_del under way */
    struct sn_eng_task *next;     /* in the run queue */
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;          /* a step ended (engine_task_del waits for it) */
    bool started;
    int nengines;
    int epfd, evfd;
    bool wake_pending;            /* evfd written, not yet read */
    int sleeping;                 /* engines in epoll_wait */
    struct sn_eng_task *head, *tail;
    int queued;
    struct sn_eng_task **table;   /* live tasks by index */
    uint32_t cap, ntasks, gen;
    uint64_t next_tick_ns;
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER, .epfd = -1,
           .evfd = -1 };

static __thread bool on_engine;

bool engine_thread(void)
{
    return on_engine;
}

static uint64_t task_key(const struct sn_eng_task *t)
{
    return (uint64_t)t->gen << 32 | t->idx;
}

/* Wakes a sleeping engine (pool.lock held). */
static void wake_locked(void)
{
    if (pool.sleeping > 0 && !pool.wake_pending) {
        uint64_t one = 1;
        pool.wake_pending = true;
        if (write(pool.evfd, &one, sizeof(one)) != sizeof(one))
            pool.wake_pending = false;
    }
}

/* Adds why to t and queues it unless it is queued or running already
 * (running: the engine running it runs it again). */
static void schedule_locked(struct sn_eng_task *t, unsigned why)
{
    if (t->dead)
        return;
    t->why |= why;
    if (t->state != TASK_IDLE)
        return;
    t->state = TASK_QUEUED;
    t->next = NULL;
    if (pool.tail)
        pool.tail->next = t;
    else
        pool.head = t;
    pool.tail = t;
    pool.queued++;
    /* another thread's kick, or more queued than this engine is about to
     * take: an engine asleep takes a share */
    if (!on_engine || pool.queued > 1)
        wake_locked();
}

static void arm_locked(struct sn_eng_task *t, int op)
{
    struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, .data.u64 = task_key(t) };
    if (epoll_ctl(pool.epfd, op, t->fd, &ev) != 0 && op == EPOLL_CTL_MOD)
        (void)epoll_ctl(pool.epfd, EPOLL_CTL_ADD, t->fd, &ev);
}

static struct sn_eng_task *task_of_key(uint64_t key)
{
    uint32_t idx = (uint32_t)key, gen = (uint32_t)(key >> 32);
    if (idx >= pool.cap || !pool.table[idx] || pool.table[idx]->gen != gen)
        return NULL;
    return pool.table[idx];
}

/* Every task asleep gets a tick (the pool's timers). */
static void tick_locked(void)
{
    for (uint32_t i = 0; i < pool.cap; i++)
        if (pool.table[i] && pool.table[i]->state == TASK_IDLE)
            schedule_locked(pool.table[i], SN_ENG_TICK);
}

static void *engine_main(void *arg)
{
    int id = (int)(intptr_t)arg;
    char name[16];
    snprintf(name, sizeof(name), "sn-engine%d", id);
    pthread_setname_np(pthread_self(), name);
    sn_nic_thread_init();
    /* what an engine runs today is the completers' work (stats.c) */
    sn_stats_role(SN_ROLE_COMPLETER);
    on_engine = true;
    bool spin = sn_spin_on();
    unsigned poll_next = 0;   /* the last step asked for an ACK poll */
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        uint64_t now = sn_now_ns();
        if (now >= pool.next_tick_ns) {
            pool.next_tick_ns = now + SN_ENGINE_TICK_MS * 1000000ull;
            tick_locked();
        }
        struct sn_eng_task *t = pool.head;
        if (t) {
            pool.head = t->next;
            if (!pool.head)
                pool.tail = NULL;
            pool.queued--;
            t->state = TASK_RUNNING;
            unsigned why = t->why;
            t->why = 0;
            pthread_mutex_unlock(&pool.lock);
            unsigned r = t->step(t->arg, why);
            pthread_mutex_lock(&pool.lock);
            if (r & SN_ENG_POLL)
                poll_next = 1;
            t->state = TASK_IDLE;
            if (t->dead) {
                pthread_cond_broadcast(&pool.cond);
                continue;
            }
            if (t->fd >= 0)
                arm_locked(t, EPOLL_CTL_MOD);
            if ((r & SN_ENG_MORE) || t->why)
                schedule_locked(t, r & SN_ENG_MORE ? SN_ENG_KICK : 0);
            continue;
        }
        /* nothing queued: poll a while (spin.c), then sleep; engine 0
         * keeps the tick, the others sleep until there is work */
        int timeout = -1;
        if (id == 0) {
            uint64_t due = pool.next_tick_ns;
            now = sn_now_ns();
            timeout = due > now ? (int)((due - now) / 1000000ull) + 1 : 0;
        }
        pool.sleeping++;
        pthread_mutex_unlock(&pool.lock);
        if (poll_next)
            (void)sn_ack_poll_readable(pool.epfd, SN_POLL_COMPLETER);
        else if (spin)
            (void)sn_spin_readable(pool.epfd);
        poll_next = 0;
        struct epoll_event ev[32];
        int n = epoll_wait(pool.epfd, ev, 32, timeout);
        pthread_mutex_lock(&pool.lock);
        pool.sleeping--;
        for (int i = 0; i < n; i++) {
            if (ev[i].data.u64 == UINT64_MAX) {
                uint64_t v;
                if (read(pool.evfd, &v, sizeof(v)) < 0) { /* another engine read it */ }
                pool.wake_pending = false;
                continue;
            }
            struct sn_eng_task *et = task_of_key(ev[i].data.u64);
            if (et)
                schedule_locked(et, SN_ENG_READABLE);
        }
    }
    return NULL;
}

/* Starts the engines once per process (pool.lock held). */
static int start_locked(void)
{
    if (pool.started)
        return 0;
    pool.epfd = epoll_create1(EPOLL_CLOEXEC);
    pool.evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (pool.epfd < 0 || pool.evfd < 0)
        goto fail;
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = UINT64_MAX };
    if (epoll_ctl(pool.epfd, EPOLL_CTL_ADD, pool.evfd, &ev) != 0)
        goto fail;
    int n = (int)softnic_global()->conf.engines;
    if (n <= 0) {
        n = sn_usable_cores();
        n = n < SN_ENGINE_DEFAULT ? n : SN_ENGINE_DEFAULT;
    }
    n = n > SN_ENGINE_MAX ? SN_ENGINE_MAX : n < 1 ? 1 : n;
    pool.next_tick_ns = sn_now_ns() + SN_ENGINE_TICK_MS * 1000000ull;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int started = 0;
    for (int i = 0; i < n; i++) {
        pthread_t th;
        if (pthread_create(&th, &at, engine_main, (void *)(intptr_t)i) == 0)
            started++;
    }
    pthread_attr_destroy(&at);
    if (!started)
        goto fail;
    pool.nengines = started;
    pool.started = true;
    SN_DEBUG("engine: %d engine thread(s)", started);
    return 0;
fail:;
    int err = errno ? errno : EAGAIN;
    if (pool.epfd >= 0)
        close(pool.epfd);
    if (pool.evfd >= 0)
        close(pool.evfd);
    pool.epfd = pool.evfd = -1;
    return err;
}

int engine_count(void)
{
    pthread_mutex_lock(&pool.lock);
    int n = pool.nengines;
    pthread_mutex_unlock(&pool.lock);
    return n;
}

int engine_task_new(sn_eng_step step, void *arg, struct sn_eng_task **out)
{
    struct sn_eng_task *t = calloc(1, sizeof(*t));
    if (!t)
        return ENOMEM;
    t->step = step;
    t->arg = arg;
    t->fd = -1;
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

void engine_task_watch(struct sn_eng_task *t, int fd)
{
    pthread_mutex_lock(&pool.lock);
    if (t->fd >= 0)
        (void)epoll_ctl(pool.epfd, EPOLL_CTL_DEL, t->fd, NULL);
    t->fd = fd;
    /* armed now unless a step is under way: that engine arms it after */
    if (fd >= 0 && t->state != TASK_RUNNING)
        arm_locked(t, EPOLL_CTL_ADD);
    pthread_mutex_unlock(&pool.lock);
}

void engine_task_kick(struct sn_eng_task *t)
{
    pthread_mutex_lock(&pool.lock);
    schedule_locked(t, SN_ENG_KICK);
    pthread_mutex_unlock(&pool.lock);
}

void engine_task_del(struct sn_eng_task *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&pool.lock);
    t->dead = true;
    if (t->fd >= 0)
        (void)epoll_ctl(pool.epfd, EPOLL_CTL_DEL, t->fd, NULL);
    t->fd = -1;
    if (t->state == TASK_QUEUED) {
        struct sn_eng_task **pp = &pool.head, *prev = NULL;
        while (*pp && *pp != t) {
            prev = *pp;
            pp = &(*pp)->next;
        }
        if (*pp) {
            *pp = t->next;
            if (pool.tail == t)
                pool.tail = prev;
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
    pool.epfd = pool.evfd = -1;
    pool.started = false;
    pool.nengines = pool.sleeping = pool.queued = 0;
    pool.wake_pending = false;
    pool.head = pool.tail = NULL;
    pool.table = NULL;
    pool.cap = pool.ntasks = 0;
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
