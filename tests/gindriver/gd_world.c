/* tests/gindriver/gd_world.c: ranks as processes, each loading the plugin's
 * GIN table through tools/common/plugin_tables (as NCCL does: by path, name
 * and every entry it calls checked), the handle all-gather and barriers
 * through the parent (gd.h). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../tools/common/fdio.h"
#include "../../tools/common/plugin_tables.h"
#include "gd.h"

struct gd_gin_stats gd_stats;
struct gd_env gd_rank_env[GD_MAX_RANKS];

double gd_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t gd_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void gd_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...)
{
    (void)flags;
    if (level == NCCL_LOG_TRACE && !getenv("GINDRIVER_TRACE"))
        return;
    const char *tag = level == NCCL_LOG_WARN ? "WARN" : level == NCCL_LOG_INFO ? "INFO" : "TRACE";
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    struct gd_gin_stats s;
    int rank, nranks;
    char dev[64];
    if (sscanf(msg,
               "NET/railnet stats: GIN rank %d of %d on %63[^:]: %llu work requests posted (%llu completion "
               "markers), %llu signaled, %llu completions polled",
               &rank, &nranks, dev, &s.wrs, &s.markers, &s.signaled, &s.cqes) == 7) {
        s.seen = 1;
        gd_stats = s;
    }
    fprintf(stderr, "[%d] NCCL %s %s (%s:%d)\n", (int)getpid(), tag, msg, file, line);
}

/* Messages rank -> parent: 'H' + handle, 'B' (barrier), 'R' (ready). Parent
 * -> rank: all handles, then 'B' per barrier. */
int gd_barrier(struct gd_rank *r)
{
    char c = 'B';
    if (fd_write_all(r->fd, &c, 1) || fd_read_all(r->fd, &c, 1) || c != 'B')
        return -1;
    return 0;
}

void gd_ready(struct gd_rank *r)
{
    char c = 'R';
    (void)fd_write_all(r->fd, &c, 1);
}

_Noreturn void gd_await_kill(struct gd_rank *r)
{
    gd_ready(r);
    for (;;)
        pause();
}

void gd_unload(struct gd_rank *r, double linger_s)
{
    if (r->coll)
        r->gin->closeColl(r->coll);
    if (r->listen)
        r->gin->closeListen(r->listen);
    r->gin->finalize(r->ctx);
    r->coll = r->listen = r->ctx = NULL;
    plugin_tables_close(r->lib);
    r->gin = NULL;
    r->unloaded = 1;
    struct timespec ts = { (time_t)linger_s, (long)((linger_s - (double)(time_t)linger_s) * 1e9) };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* A listen on device 0 and the exchange of every rank's handle through the
 * parent (also each rank's first). */
int gd_listen_again(struct gd_rank *r, void **listen_comm)
{
    uint8_t handle[GD_HANDLE];
    memset(handle, 0, sizeof(handle));
    *listen_comm = NULL;
    if (r->gin->listen(r->ctx, 0, handle, listen_comm) != ncclSuccess)
        return 1;
    char c = 'H';
    return fd_write_all(r->fd, &c, 1) || fd_write_all(r->fd, handle, GD_HANDLE) ||
           fd_read_all(r->fd, r->handles, (size_t)r->nranks * GD_HANDLE);
}

ncclResult_t gd_connect_rail(struct gd_rank *r, int rails)
{
    void *hp[GD_MAX_RANKS];
    if (rails < 1 || r->nranks % rails)
        return ncclInvalidArgument;
    int nodes = r->nranks / rails, local = r->rank % rails;
    for (int node = 0; node < nodes; node++)
        hp[node] = r->handles[node * rails + local];
    return r->gin->connect(r->ctx, hp, nodes, r->rank / rails, r->listen, &r->coll);
}

ncclResult_t gd_connect(struct gd_rank *r)
{
    return gd_connect_rail(r, 1);
}

int gd_connect_said(struct gd_rank *r)
{
    ncclResult_t e = gd_connect(r);
    if (e != ncclSuccess)
        printf("rank %d: connect failed (%d)\n", r->rank, e);
    return e != ncclSuccess;
}

ncclResult_t gd_wait(struct gd_rank *r, void *req, double deadline)
{
    for (;;) {
        int done = 0;
        ncclResult_t e = r->gin->test(r->coll, req, &done);
        if (e != ncclSuccess)
            return e;
        if (done)
            return ncclSuccess;
        if (r->gin->ginProgress && (e = r->gin->ginProgress(r->coll)) != ncclSuccess)
            return e;
        if (gd_now() > deadline)
            return ncclInternalError;
    }
}

static int rank_main(const char *plugin, int rank, int nranks, int fd, uint64_t seed, gd_rank_fn fn, void *arg)
{
    struct gd_rank r;
    memset(&r, 0, sizeof(r));
    r.rank = rank, r.nranks = nranks, r.fd = fd, r.seed = seed;
    if (gd_rank_env[rank].name)
        setenv(gd_rank_env[rank].name, gd_rank_env[rank].value, 1);
    struct plugin_tables lib;
    char err[PATH_MAX + 256];
    r.gin = gd_load_gin(&lib, plugin, err, sizeof(err));
    if (!r.gin) {
        fprintf(stderr, "gindriver: rank %d: %s\n", rank, err);
        return 2;
    }
    ncclResult_t e = r.gin->init(&r.ctx, 0x1234, gd_logger);
    int ndev = 0;
    if (e == ncclSuccess)
        e = r.gin->devices(&ndev);
    if (e != ncclSuccess || ndev < 1) {
        fprintf(stderr, "gindriver: rank %d: init/devices failed (%d, %d devices)\n", rank, e, ndev);
        return 2;
    }
    if (gd_listen_again(&r, &r.listen)) {
        fprintf(stderr, "gindriver: rank %d: listen or the handle exchange failed\n", rank);
        return 2;
    }
    r.lib = &lib;
    int rc = fn(&r, arg);
    if (r.unloaded)
        return rc;
    if (r.coll && r.gin->closeColl(r.coll) != ncclSuccess && rc == 0)
        rc = 3;
    if (r.listen)
        r.gin->closeListen(r.listen);
    r.gin->finalize(r.ctx);
    return rc;
}

int gd_run(const char *plugin, int nranks, double timeout_s, int kill_rank, uint64_t seed, gd_rank_fn fn, void *arg)
{
    int fds[GD_MAX_RANKS];
    pid_t pids[GD_MAX_RANKS];
    fflush(stdout);
    fflush(stderr);
    for (int i = 0; i < nranks; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
            return nranks;
        pids[i] = fork();
        if (pids[i] == 0) {
            for (int j = 0; j < i; j++)
                close(fds[j]);
            close(sv[0]);
            _exit(rank_main(plugin, i, nranks, sv[1], seed, fn, arg));
        }
        close(sv[1]);
        fds[i] = sv[0];
    }
    uint8_t handles[GD_MAX_RANKS][GD_HANDLE];
    int bad = 0, alive[GD_MAX_RANKS], waiting = 0, got = 0, status[GD_MAX_RANKS];
    int in_barrier[GD_MAX_RANKS] = { 0 };
    for (int i = 0; i < nranks; i++)
        alive[i] = 1, status[i] = -1;
    double deadline = gd_now() + timeout_s;
    int nalive = nranks;
    while (nalive > 0 && gd_now() < deadline) {
        struct pollfd pf[GD_MAX_RANKS];
        for (int i = 0; i < nranks; i++)
            pf[i] = (struct pollfd){ .fd = alive[i] ? fds[i] : -1, .events = POLLIN };
        poll(pf, (nfds_t)nranks, 100);
        for (int i = 0; i < nranks; i++) {
            if (!alive[i] || !pf[i].revents)
                continue;
            char c;
            if (fd_read_all(fds[i], &c, 1)) {
                alive[i] = 0;
                nalive--;
                continue;
            }
            if (c == 'H') {
                if (fd_read_all(fds[i], handles[i], GD_HANDLE))
                    alive[i] = 0, nalive--;
                else if (++got % nranks == 0) /* each round of listens: gd_listen_again */
                    for (int j = 0; j < nranks; j++)
                        if (alive[j])
                            (void)fd_write_all(fds[j], handles, (size_t)nranks * GD_HANDLE);
            } else if (c == 'B') {
                in_barrier[i] = 1;
                waiting++;
            } else if (c == 'R' && i == kill_rank) {
                kill(pids[i], SIGKILL);
            }
        }
        /* a barrier completes when every live rank is in it */
        if (waiting && waiting == nalive) {
            for (int j = 0; j < nranks; j++)
                if (in_barrier[j]) {
                    char b = 'B';
                    (void)fd_write_all(fds[j], &b, 1);
                    in_barrier[j] = 0;
                }
            waiting = 0;
        }
    }
    for (int i = 0; i < nranks; i++) {
        int st;
        pid_t w = waitpid(pids[i], &st, WNOHANG);
        if (w == 0) {
            double until = deadline + 2;
            while ((w = waitpid(pids[i], &st, WNOHANG)) == 0 && gd_now() < until)
                usleep(10000);
        }
        if (w == 0) {
            fprintf(stderr, "gindriver: rank %d did not finish within %.0f s: killed\n", i, timeout_s);
            kill(pids[i], SIGKILL);
            waitpid(pids[i], &st, 0);
            bad++;
            continue;
        }
        status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (i != kill_rank && status[i] != 0) {
            fprintf(stderr, "gindriver: rank %d exited with status %d\n", i, status[i]);
            bad++;
        }
        close(fds[i]);
    }
    return bad;
}
