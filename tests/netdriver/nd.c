/* tests/netdriver/nd.c: rank orchestration and connection set-up of the
 * NCCL-like driver. */
#include "nd.h"
#include "plugin/ib/parse.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double nd_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t nd_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A pidfd of a rank (readable once it exits), or -1 where the kernel has
 * none: the launcher then looks every 2 ms. */
static int rank_pidfd(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    return -1;
#endif
}

/* Sleeps until a rank not reaped yet exits or nd_now() reaches until (at
 * most a second): the launcher wakes for nothing else while the ranks
 * run, so it takes no time from the CPUs they and the NIC's threads use. */
static void wait_ranks(const int *pidfd, const int *reaped, int nranks, double until)
{
    struct pollfd pf[ND_MAX_RANKS];
    int n = 0;
    for (int i = 0; i < nranks; i++) {
        if (reaped[i])
            continue;
        if (pidfd[i] < 0) {
            usleep(2000);
            return;
        }
        pf[n].fd = pidfd[i];
        pf[n].events = POLLIN;
        n++;
    }
    double left = until - nd_now();
    int ms = left <= 0 ? 0 : left >= 1 ? 1000 : (int)(left * 1000) + 1;
    (void)poll(pf, (nfds_t)n, ms);
}

static inline uint64_t word_of(uint64_t id, uint64_t i)
{
    uint64_t s = id * 0x9e3779b97f4a7c15ull + i;
    return nd_rand(&s);
}

void nd_fill(void *buf, size_t len, uint64_t id)
{
    uint8_t *p = buf;
    size_t words = len / 8;
    for (size_t i = 0; i < words; i++) {
        uint64_t w = word_of(id, i);
        memcpy(p + 8 * i, &w, 8);
    }
    if (len % 8) {
        uint64_t w = word_of(id, words);
        memcpy(p + 8 * words, &w, len % 8);
    }
}

long nd_check(const void *buf, size_t len, uint64_t id)
{
    const uint8_t *p = buf;
    size_t words = len / 8;
    for (size_t i = 0; i < words; i++) {
        uint64_t w = word_of(id, i);
        if (memcmp(p + 8 * i, &w, 8) != 0) {
            for (size_t b = 0; b < 8; b++)
                if (p[8 * i + b] != ((uint8_t *)&w)[b])
                    return (long)(8 * i + b);
        }
    }
    if (len % 8) {
        uint64_t w = word_of(id, words);
        for (size_t b = 0; b < len % 8; b++)
            if (p[8 * words + b] != ((uint8_t *)&w)[b])
                return (long)(8 * words + b);
    }
    return -1;
}

static int nd_opt_refused(const char *opt, const char *s, const char *what, long long lo, long long hi)
{
    fprintf(stderr, "netdriver: bad value '%s' for %s: %s in [%lld, %lld]\n", s, opt, what, lo, hi);
    return -1;
}

int nd_opt_int(const char *opt, const char *s, long long lo, long long hi, int *out)
{
    long long v;
    if (hi > INT_MAX || lo < INT_MIN || parse_int(s, lo, hi, &v))
        return nd_opt_refused(opt, s, "an integer", lo, hi);
    *out = (int)v;
    return 0;
}

int nd_opt_size(const char *opt, const char *s, long long lo, long long hi, long long *out)
{
    if (parse_size(s, lo, hi, out))
        return nd_opt_refused(opt, s, "bytes (K/M/G suffix)", lo, hi);
    return 0;
}

int nd_opt_seconds(const char *opt, const char *s, double *out)
{
    double v;
    if (parse_real(s, 0, &v) || v == 0) {
        fprintf(stderr, "netdriver: bad value '%s' for %s: seconds over 0, fractions allowed\n", s, opt);
        return -1;
    }
    *out = v;
    return 0;
}

static int full_io(int fd, void *buf, size_t len, int wr, double deadline)
{
    uint8_t *p = buf;
    size_t off = 0;
    while (off < len) {
        struct pollfd pf = { .fd = fd, .events = wr ? POLLOUT : POLLIN };
        int left = (int)((deadline - nd_now()) * 1000);
        if (left <= 0)
            return -1;
        int r = poll(&pf, 1, left > 1000 ? 1000 : left);
        if (r < 0 && errno != EINTR)
            return -1;
        if (r <= 0)
            continue;
        ssize_t n = wr ? write(fd, p + off, len - off) : read(fd, p + off, len - off);
        if (n == 0)
            return -1;
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -1;
        }
        off += (size_t)n;
    }
    return 0;
}

/* ---- inside a rank ---- */

static uint8_t nd_peer_handles[ND_MAX_RANKS][ND_MAX_DEVS][ND_HANDLE];

int nd_connect_all(struct nd_world *w)
{
    const ncclNet_v8_t *net = w->net;
    static uint8_t mine[ND_MAX_RANKS][ND_MAX_DEVS][ND_HANDLE];
    void *listen[ND_MAX_RANKS][ND_MAX_DEVS];
    memset(mine, 0, sizeof(mine));
    memset(listen, 0, sizeof(listen));
    int rc = 1;
    for (int j = 0; j < w->nranks; j++) {
        for (int d = 0; d < w->ndevs && j != w->rank; d++) {
            ncclResult_t r = net->listen(d, mine[j][d], &listen[j][d]);
            if (r != ncclSuccess) {
                fprintf(stderr, "rank %d: listen(dev %d) for peer %d returned %d\n", w->rank, d, j, r);
                goto out;
            }
        }
    }
    size_t len = (size_t)w->nranks * ND_MAX_DEVS * ND_HANDLE;
    if (full_io(w->fd, mine, len, 1, w->deadline) || full_io(w->fd, nd_peer_handles, len, 0, w->deadline)) {
        fprintf(stderr, "rank %d: handle exchange with the parent failed\n", w->rank);
        goto out;
    }
    for (;;) {
        int pending = 0;
        for (int j = 0; j < w->nranks; j++) {
            for (int d = 0; d < w->ndevs && j != w->rank; d++) {
                ncclNetDeviceHandle_v8_t *dh = NULL;
                if (!w->send[j][d]) {
                    ncclResult_t r = net->connect(d, nd_peer_handles[j][d], &w->send[j][d], &dh);
                    if (r != ncclSuccess) {
                        fprintf(stderr, "rank %d: connect(dev %d) to peer %d returned %d\n", w->rank, d, j, r);
                        goto out;
                    }
                    pending += !w->send[j][d];
                }
                if (!w->recv[j][d]) {
                    ncclResult_t r = net->accept(listen[j][d], &w->recv[j][d], &dh);
                    if (r != ncclSuccess) {
                        fprintf(stderr, "rank %d: accept(dev %d) from peer %d returned %d\n", w->rank, d, j, r);
                        goto out;
                    }
                    pending += !w->recv[j][d];
                }
            }
        }
        if (!pending)
            break;
        if (nd_now() > w->deadline) {
            fprintf(stderr, "rank %d: connections not established before the deadline\n", w->rank);
            goto out;
        }
        usleep(50);
    }
    rc = 0;
out:
    for (int j = 0; j < w->nranks; j++)
        for (int d = 0; d < w->ndevs; d++)
            if (listen[j][d])
                net->closeListen(listen[j][d]);
    return rc;
}

void nd_close_all(struct nd_world *w)
{
    for (int j = 0; j < w->nranks; j++) {
        for (int d = 0; d < w->ndevs; d++) {
            if (w->send[j][d])
                w->net->closeSend(w->send[j][d]);
            if (w->recv[j][d])
                w->net->closeRecv(w->recv[j][d]);
            w->send[j][d] = w->recv[j][d] = NULL;
        }
    }
}

void nd_signal_ready(struct nd_world *w)
{
    char c = 'R';
    (void)full_io(w->fd, &c, 1, 1, w->deadline);
}

/* ---- the parent ---- */

static int nd_argc;
static char **nd_argv;
static const char *nd_wraps[ND_MAX_RANKS];
static int nd_nwraps;
static int nd_self_fd = -1, nd_self_rank = -1;

void nd_set_argv(int argc, char **argv)
{
    nd_argc = argc;
    nd_argv = argv;
}

int nd_add_rank_wrap(const char *prefix)
{
    if (nd_nwraps >= ND_MAX_RANKS)
        return -1;
    nd_wraps[nd_nwraps++] = prefix;
    return 0;
}

int nd_set_rank_of(const char *spec)
{
    int fd, rank, used = 0;
    if (sscanf(spec, "%d:%d%n", &fd, &rank, &used) != 2 || spec[used] || fd < 0 || rank < 0 ||
        rank >= ND_MAX_RANKS)
        return -1;
    nd_self_fd = fd;
    nd_self_rank = rank;
    return 0;
}

int nd_rank_process(void)
{
    return nd_self_fd >= 0;
}

/* One rank, in the process that runs it: loads the plugin and runs fn. */
static int rank_body(int rank, int nranks, int ndevs, int fd, double deadline, nd_rank_fn fn, void *arg)
{
    static struct nd_world w;
    memset(&w, 0, sizeof(w));
    w.rank = rank;
    w.nranks = nranks;
    w.ndevs = ndevs;
    w.fd = fd;
    w.deadline = deadline;
    w.net = nd_plugin_open();
    int st = 1;
    if (w.net) {
        int n = 0;
        if (w.net->devices(&n) != ncclSuccess || n < ndevs)
            fprintf(stderr, "rank %d: the plugin reports %d device(s), %d needed\n", rank, n, ndevs);
        else
            st = fn(&w, arg);
    }
    fflush(NULL);
    return st;
}

/* In the forked child of rank i: "<wrap i> <this program> --rank-of FD:i
 * <argv[1..]>". The program is named by its resolved path: behind a wrapper
 * /proc/self/exe would be the wrapper's. Does not return. */
static void exec_wrapped(int i, int fd)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    char *words = strdup(nd_wraps[i]);
    char **av = calloc((size_t)nd_argc + 64 + 3, sizeof(*av));
    if (n <= 0 || !words || !av || !nd_argv) {
        fprintf(stderr, "rank %d: cannot build the wrapped command\n", i);
        _exit(1);
    }
    self[n] = 0;
    int k = 0;
    for (char *save = NULL, *t = strtok_r(words, " \t", &save); t && k < 64; t = strtok_r(NULL, " \t", &save))
        av[k++] = t;
    char spec[32];
    snprintf(spec, sizeof(spec), "%d:%d", fd, i);
    av[k++] = self;
    av[k++] = "--rank-of";
    av[k++] = spec;
    for (int a = 1; a < nd_argc; a++)
        av[k++] = nd_argv[a];
    int fl = fcntl(fd, F_GETFD);
    if (fl < 0 || fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC) != 0) {
        perror("fcntl");
        _exit(1);
    }
    execvp(av[0], av);
    fprintf(stderr, "rank %d: cannot run %s: %s\n", i, av[0], strerror(errno));
    _exit(127);
}

static struct nd_flap nd_flap;

void nd_set_flap(const struct nd_flap *f) { nd_flap = *f; }

static void flap_write(int up, double t0, int running)
{
    char tmp[4200], buf[256];
    size_t off = 0;
    for (int i = 0; i < nd_flap.nports; i++)
        off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s %s\n", nd_flap.port[i], up ? "up" : "down");
    snprintf(tmp, sizeof(tmp), "%s.tmp", nd_flap.ctl_file);
    FILE *f = fopen(tmp, "w");
    if (!f || fwrite(buf, 1, off, f) != off || fclose(f) != 0 || rename(tmp, nd_flap.ctl_file) != 0) {
        fprintf(stderr, "netdriver: cannot write %s: %s\n", nd_flap.ctl_file, strerror(errno));
        return;
    }
    fprintf(stderr, "netdriver: ports %s%s%s %s at %.0f ms%s\n", nd_flap.port[0], nd_flap.nports > 1 ? " and " : "",
            nd_flap.nports > 1 ? nd_flap.port[1] : "", up ? "up" : "down", (nd_now() - t0) * 1e3,
            running ? " (ranks running)" : " (ranks not running)");
}

/* The next delay of the schedule, in seconds. */
static double flap_delay(int ms, uint64_t *rng)
{
    if (ms <= 0)
        return 0;
    if (!nd_flap.random_seed)
        return ms / 1e3;
    return (double)(1 + nd_rand(rng) % (uint64_t)ms) / 1e3;
}

int nd_run_ranks(int nranks, int ndevs, double timeout_s, int kill_rank, int kill_after_ms, nd_rank_fn fn,
                 void *arg)
{
    if (nranks < 2 || nranks > ND_MAX_RANKS || ndevs < 1 || ndevs > ND_MAX_DEVS) {
        fprintf(stderr, "netdriver: ranks must be 2..%d and devices 1..%d\n", ND_MAX_RANKS, ND_MAX_DEVS);
        return 1;
    }
    int fds[ND_MAX_RANKS];
    pid_t pids[ND_MAX_RANKS];
    double deadline = nd_now() + timeout_s;
    if (nd_self_fd >= 0) {
        if (nd_self_rank >= nranks) {
            fprintf(stderr, "netdriver: --rank-of names rank %d of %d\n", nd_self_rank, nranks);
            _exit(1);
        }
        exit(rank_body(nd_self_rank, nranks, ndevs, nd_self_fd, deadline, fn, arg));
    }
    double t0 = nd_now();
    uint64_t flap_rng = nd_flap.random_seed;
    if (nd_flap.ctl_file) {
        setenv("SOFTNIC_CTL_FILE", nd_flap.ctl_file, 1);
        flap_write(1, t0, 0);
    }
    fflush(NULL);
    for (int i = 0; i < nranks; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
            perror("socketpair");
            return 1;
        }
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0) {
            close(sv[0]);
            for (int k = 0; k < i; k++)
                close(fds[k]);
            /* a rank that the parent cannot reach any more must not linger
             * (the alarm also survives the exec of a wrapped rank) */
            alarm((unsigned)timeout_s + 10);
            if (i < nd_nwraps)
                exec_wrapped(i, sv[1]);
            /* exit, not _exit: the libraries' exit handlers run in the
             * rank (softnic's SOFTNIC_STATS lines); stdio was flushed
             * before the fork, so nothing of the parent's prints twice */
            exit(rank_body(i, nranks, ndevs, sv[1], deadline, fn, arg));
        }
        close(sv[1]);
        fds[i] = sv[0];
        pids[i] = pid;
    }
    int failed = 0;
    /* handle exchange: rank i receives, for each peer j, what j made for i */
    size_t len = (size_t)nranks * ND_MAX_DEVS * ND_HANDLE;
    uint8_t(*all)[ND_MAX_RANKS][ND_MAX_DEVS][ND_HANDLE] = calloc((size_t)nranks, sizeof(*all));
    uint8_t(*out)[ND_MAX_DEVS][ND_HANDLE] = calloc(ND_MAX_RANKS, sizeof(*out));
    int exchanged = all && out;
    for (int i = 0; i < nranks && exchanged; i++)
        if (full_io(fds[i], all[i], len, 0, deadline))
            exchanged = 0;
    for (int i = 0; i < nranks && exchanged; i++) {
        for (int j = 0; j < nranks; j++)
            memcpy(out[j], all[j][i], sizeof(out[j]));
        if (full_io(fds[i], out, len, 1, deadline))
            exchanged = 0;
    }
    free(all);
    free(out);
    if (!exchanged)
        fprintf(stderr, "netdriver: handle exchange failed (a rank exited early?)\n");
    if (exchanged && kill_rank >= 0 && kill_rank < nranks) {
        for (int i = 0; i < nranks; i++) {
            char c;
            if (full_io(fds[i], &c, 1, 0, deadline))
                break;
        }
        usleep((useconds_t)kill_after_ms * 1000);
        fprintf(stderr, "netdriver: killing rank %d (pid %d) mid-transfer\n", kill_rank, (int)pids[kill_rank]);
        kill(pids[kill_rank], SIGKILL);
    }
    /* fault schedule: next change at flap_at (0: none left) */
    double flap_at = 0;
    int flap_down = nd_flap.at_start, flap_left = nd_flap.cycles;
    if (exchanged && nd_flap.ctl_file && kill_rank < 0) {
        /* every rank has its devices and listeners: down now falls into the
         * connect/accept handshakes */
        if (nd_flap.at_start)
            flap_write(0, t0, 1);
        for (int i = 0; i < nranks; i++) {
            char c;
            if (full_io(fds[i], &c, 1, 0, deadline))
                break;
        }
        if (flap_down)
            flap_at = nd_now() + (nd_flap.up_ms > 0 ? flap_delay(nd_flap.up_ms, &flap_rng) : 0);
        else if (flap_left > 0)
            flap_at = nd_now() + flap_delay(nd_flap.down_ms, &flap_rng);
        if (flap_down && nd_flap.up_ms <= 0)
            flap_at = 0;
    }
    int alive = nranks;
    int status[ND_MAX_RANKS];
    int reaped[ND_MAX_RANKS] = { 0 };
    int pidfd[ND_MAX_RANKS];
    for (int i = 0; i < nranks; i++)
        pidfd[i] = rank_pidfd(pids[i]);
    while (alive > 0) {
        if (flap_at > 0 && nd_now() >= flap_at) {
            flap_down = !flap_down;
            flap_write(!flap_down, t0, 1);
            flap_at = 0;
            if (flap_down && nd_flap.up_ms > 0)
                flap_at = nd_now() + flap_delay(nd_flap.up_ms, &flap_rng);
            else if (!flap_down && --flap_left > 0)
                flap_at = nd_now() + flap_delay(nd_flap.down_ms, &flap_rng);
        }
        for (int i = 0; i < nranks; i++) {
            if (reaped[i])
                continue;
            pid_t r = waitpid(pids[i], &status[i], WNOHANG);
            if (r == pids[i]) {
                reaped[i] = 1;
                alive--;
            }
        }
        /* a rank reports its own hang (traffic: no completion for timeout_s,
         * however long the run); this bound catches one stuck in a call */
        if (alive && nd_now() > deadline + 9 * timeout_s + 5) {
            for (int i = 0; i < nranks; i++) {
                if (!reaped[i]) {
                    fprintf(stderr, "netdriver: rank %d still running after %.0f s: killed (hang)\n", i,
                            10 * timeout_s);
                    kill(pids[i], SIGKILL);
                    waitpid(pids[i], &status[i], 0);
                    reaped[i] = 1;
                    status[i] = -1;
                    failed = 1;
                }
            }
            alive = 0;
        }
        if (alive) {
            double until = deadline + 9 * timeout_s + 5;
            if (flap_at > 0 && flap_at < until)
                until = flap_at;
            wait_ranks(pidfd, reaped, nranks, until);
        }
    }
    for (int i = 0; i < nranks; i++)
        if (pidfd[i] >= 0)
            close(pidfd[i]);
    if (nd_flap.ctl_file && flap_down)
        flap_write(1, t0, 0); /* leave the ports up for the next run */
    for (int i = 0; i < nranks; i++) {
        close(fds[i]);
        if (i == kill_rank)
            continue;
        if (status[i] == -1)
            continue;
        if (WIFSIGNALED(status[i])) {
            fprintf(stderr, "netdriver: rank %d died of signal %d\n", i, WTERMSIG(status[i]));
            failed = 1;
        } else if (WEXITSTATUS(status[i]) != 0) {
            fprintf(stderr, "netdriver: rank %d exited with status %d\n", i, WEXITSTATUS(status[i]));
            failed = 1;
        }
    }
    return failed || !exchanged;
}
