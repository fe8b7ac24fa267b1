/* tests/minimpi/minimpirun.c: starts the ranks of a job of minimpi (the MPI
 * of tests/minimpi/mpi.h) on this host, watches them, and ends the job as a
 * whole when one fails or time runs out. Usage in `usage` below. */
#include "minimpi_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char usage[] =
    "Usage: minimpirun -n N [OPTION...] [--] PROGRAM [ARG...]\n"
    "Starts N processes of PROGRAM on this host: the ranks 0..N-1 of one job of\n"
    "minimpi (the MPI of the railnet tests, tests/minimpi/mpi.h).\n"
    "\n"
    "  -n, -np N              the number of ranks (1 to 1024)\n"
    "  --timeout SECONDS      end the job after SECONDS (exit status 124)\n"
    "  --grace SECONDS        from SIGTERM to SIGKILL when the job ends early\n"
    "                         (default 5)\n"
    "  -x VAR=VALUE           set VAR in the environment of every rank (the\n"
    "                         environment is passed on: -x VAR alone keeps it)\n"
    "  --rank-env VAR=FORMAT  set VAR in each rank's environment to FORMAT with\n"
    "                         %r replaced by the rank and %% by %, e.g.\n"
    "                         --rank-env NCCL_HOSTID=host%r\n"
    "  --kill-rank R@SECONDS  fault injection: SIGKILL rank R's process group\n"
    "                         SECONDS after the start; that rank's death does\n"
    "                         not fail the job, the others' ends decide it\n"
    "  --wait-others SECONDS  when a rank fails (or is killed by --kill-rank),\n"
    "                         give the others SECONDS to end by themselves\n"
    "                         before the job is aborted; each end after the\n"
    "                         first failure is reported with its delay\n"
    "  -h, --help             this text\n"
    "\n"
    "Each rank gets MINIMPI_RANK, MINIMPI_SIZE and MINIMPI_SHM (the job's file,\n"
    "made in $MINIMPI_SHM_DIR or /dev/shm and removed at the end) and runs in a\n"
    "process group of its own; rank 0 reads minimpirun's standard input, the\n"
    "others /dev/null. Their output goes out as it is, unprefixed.\n"
    "When a rank exits non-zero or is killed by a signal, the job is aborted:\n"
    "the ranks still running get SIGTERM (their process groups), SIGKILL after\n"
    "the grace period, and minimpirun exits with the status of that rank\n"
    "(128+N for signal N). SIGINT, SIGTERM and SIGHUP to minimpirun go to the\n"
    "ranks the same way (exit 128+N; a second one sends SIGKILL).\n"
    "Exit status: 0 when every rank exited 0; 2: a bad command line; 1: the\n"
    "job could not start; 124: --timeout, or ranks that outlived --wait-others.\n";

struct var {
    char *name;
    const char *value;
};

static struct {
    int n;
    double timeout, grace;
    int kill_rank;              /* --kill-rank, -1: none */
    double kill_after, wait_others;
    struct var *set, *per_rank;
    int nset, nper_rank;
    char **argv;
} opt = { .grace = 5, .kill_rank = -1 };

static char shm_path[256];
static struct minimpi_shm *shm;
static pid_t *pids;
static bool *running;
static int nrunning;

__attribute__((format(printf, 1, 2), noreturn))
static void die_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "minimpirun: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see minimpirun --help)\n");
    va_end(ap);
    exit(2);
}

/* A number of seconds >= 0 (> 0 unless zero_ok) for option `name`. */
static double parse_seconds(const char *name, const char *s, bool zero_ok)
{
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end || !isfinite(v) || v < 0 || (v == 0 && !zero_ok))
        die_usage("%s needs a number of seconds%s, not '%s'", name, zero_ok ? "" : " above 0", s);
    return v;
}

/* VAR=VALUE into v (VAR=... required unless bare_ok). */
static bool parse_var(char *arg, struct var *v, bool bare_ok)
{
    char *eq = strchr(arg, '=');
    if (eq == arg || (!eq && !bare_ok) || !*arg)
        return false;
    v->name = arg;
    v->value = NULL;
    if (eq) {
        *eq = '\0';
        v->value = eq + 1;
    }
    return true;
}

/* FORMAT with %r replaced by rank and %% by % (NULL: an unknown %). */
static char *expand(const char *fmt, int rank)
{
    size_t cap = strlen(fmt) * 8 + 16, o = 0;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    for (const char *p = fmt; *p; p++) {
        if (*p != '%') {
            out[o++] = *p;
            continue;
        }
        if (p[1] == 'r')
            o += (size_t)snprintf(out + o, cap - o, "%d", rank);
        else if (p[1] == '%')
            out[o++] = '%';
        else {
            free(out);
            return NULL;
        }
        p++;
    }
    out[o] = '\0';
    return out;
}

static void parse_args(int argc, char **argv)
{
    opt.set = calloc((size_t)argc, sizeof *opt.set);
    opt.per_rank = calloc((size_t)argc, sizeof *opt.per_rank);
    if (!opt.set || !opt.per_rank)
        exit(1);
    bool have_n = false;
    int i = 1;
    for (; i < argc; i++) {
        char *a = argv[i], *val = NULL;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-')
            break;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage, stdout);
            exit(0);
        }
        /* --name=value for the long options */
        char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        if (eq) {
            *eq = '\0';
            val = eq + 1;
        }
        bool takes = strcmp(a, "-n") == 0 || strcmp(a, "-np") == 0 || strcmp(a, "--np") == 0 ||
                     strcmp(a, "--timeout") == 0 || strcmp(a, "--grace") == 0 ||
                     strcmp(a, "--kill-rank") == 0 || strcmp(a, "--wait-others") == 0 ||
                     strcmp(a, "-x") == 0 || strcmp(a, "--rank-env") == 0;
        if (!takes)
            die_usage("unknown option '%s'", a);
        if (!val) {
            if (i + 1 >= argc)
                die_usage("%s needs a value", a);
            val = argv[++i];
        }
        if (strcmp(a, "-n") == 0 || strcmp(a, "-np") == 0 || strcmp(a, "--np") == 0) {
            char *end;
            long n = strtol(val, &end, 10);
            if (!*val || *end || n < 1 || n > MINIMPI_MAX_RANKS)
                die_usage("-n needs a number of ranks from 1 to 1024, not '%s'", val);
            opt.n = (int)n;
            have_n = true;
        } else if (strcmp(a, "--timeout") == 0) {
            opt.timeout = parse_seconds(a, val, false);
        } else if (strcmp(a, "--grace") == 0) {
            opt.grace = parse_seconds(a, val, true);
        } else if (strcmp(a, "--wait-others") == 0) {
            opt.wait_others = parse_seconds(a, val, false);
        } else if (strcmp(a, "--kill-rank") == 0) {
            char *at = strchr(val, '@'), *end;
            long r = at ? strtol(val, &end, 10) : -1;
            if (!at || end != at || r < 0 || r >= MINIMPI_MAX_RANKS)
                die_usage("--kill-rank needs RANK@SECONDS, not '%s'", val);
            opt.kill_rank = (int)r;
            opt.kill_after = parse_seconds(a, at + 1, true);
        } else if (strcmp(a, "-x") == 0) {
            if (!parse_var(val, &opt.set[opt.nset], true))
                die_usage("-x needs VAR=VALUE, not '%s'", val);
            if (opt.set[opt.nset].value)
                opt.nset++;
        } else {
            struct var *v = &opt.per_rank[opt.nper_rank];
            if (!parse_var(val, v, false))
                die_usage("--rank-env needs VAR=FORMAT, not '%s'", val);
            char *probe = expand(v->value, 0);
            if (!probe)
                die_usage("--rank-env: FORMAT knows %%r and %%%% only: '%s'", v->value);
            free(probe);
            opt.nper_rank++;
        }
    }
    if (!have_n)
        die_usage("-n N (the number of ranks) is required");
    if (opt.kill_rank >= opt.n)
        die_usage("--kill-rank %d: the job has ranks 0 to %d", opt.kill_rank, opt.n - 1);
    if (i >= argc)
        die_usage("no program to run");
    opt.argv = argv + i;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The job's file: zeroed, with the header minimpi_shm.h describes. */
static int make_shm(void)
{
    const char *dir = getenv("MINIMPI_SHM_DIR");
    if (!dir || !*dir)
        dir = "/dev/shm";
    int fd = -1;
    for (unsigned k = 0; fd < 0 && k < 100; k++) {
        snprintf(shm_path, sizeof shm_path, "%s/minimpi-%d-%u", dir, (int)getpid(),
                 (unsigned)(now_s() * 1e6) + k);
        fd = open(shm_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        fprintf(stderr, "minimpirun: cannot create the job's file %s: %s\n", shm_path, strerror(errno));
        shm_path[0] = '\0';
        return -1;
    }
    size_t head = minimpi_data_offset();
    void *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)minimpi_file_bytes((uint32_t)opt.n)) == 0)
        p = mmap(NULL, head, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int err = errno;
    close(fd);
    if (p == MAP_FAILED) {
        fprintf(stderr, "minimpirun: cannot size or map %s: %s\n", shm_path, strerror(err));
        return -1;
    }
    shm = p;
    shm->size = (uint32_t)opt.n;
    shm->launcher_pid = (int32_t)getpid();
    shm->next_chan = 1;
    __atomic_store_n(&shm->magic, MINIMPI_MAGIC, __ATOMIC_RELEASE);
    return 0;
}

static void set_env(const char *name, const char *value)
{
    if (setenv(name, value, 1) != 0) {
        fprintf(stderr, "minimpirun: setenv %s: %s\n", name, strerror(errno));
        _exit(127);
    }
}

/* In the child: becomes rank r. */
static void exec_rank(int r, const sigset_t *mask)
{
    char num[16];
    signal(SIGCHLD, SIG_DFL);
    sigprocmask(SIG_SETMASK, mask, NULL);
    setpgid(0, 0);
    if (r != 0) {
        int fd = open("/dev/null", O_RDONLY);
        if (fd >= 0 && fd != STDIN_FILENO) {
            dup2(fd, STDIN_FILENO);
            close(fd);
        }
    }
    for (int i = 0; i < opt.nset; i++)
        set_env(opt.set[i].name, opt.set[i].value);
    for (int i = 0; i < opt.nper_rank; i++) {
        char *v = expand(opt.per_rank[i].value, r);
        if (!v)
            _exit(127);
        set_env(opt.per_rank[i].name, v);
        free(v);
    }
    snprintf(num, sizeof num, "%d", r);
    set_env("MINIMPI_RANK", num);
    snprintf(num, sizeof num, "%d", opt.n);
    set_env("MINIMPI_SIZE", num);
    set_env("MINIMPI_SHM", shm_path);
    execvp(opt.argv[0], opt.argv);
    fprintf(stderr, "minimpirun: cannot run %s: %s\n", opt.argv[0], strerror(errno));
    _exit(127);
}

static void signal_running(int sig)
{
    for (int r = 0; r < opt.n; r++)
        if (running[r] && kill(-pids[r], sig) != 0)
            kill(pids[r], sig);
}

static const char *running_list(void)
{
    static char buf[4096];
    size_t o = 0;
    buf[0] = '\0';
    for (int r = 0; r < opt.n && o < sizeof buf - 16; r++)
        if (running[r])
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%d", o ? " " : "", r);
    return buf;
}

static bool aborting;
static int job_status;
static double kill_at;

/* Ends the job: marks it aborted in the file (the first reason stays),
 * signals the ranks still running and gives them the grace period. */
static void abort_job(uint64_t word, int status, int sig)
{
    uint64_t none = 0;
    __atomic_compare_exchange_n(&shm->abort, &none, word, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    if (!aborting) {
        aborting = true;
        job_status = status;
        kill_at = now_s() + opt.grace;
    }
    signal_running(sig);
}

static void on_sigchld(int sig)
{
    (void)sig;
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    pids = calloc((size_t)opt.n, sizeof *pids);
    running = calloc((size_t)opt.n, sizeof *running);
    if (!pids || !running || make_shm() != 0) {
        if (shm_path[0])
            unlink(shm_path);
        return 1;
    }

    /* signals arrive through sigtimedwait only */
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, &old);
    struct sigaction sa = { .sa_handler = on_sigchld };
    sigaction(SIGCHLD, &sa, NULL);

    fflush(NULL);
    for (int r = 0; r < opt.n; r++) {
        pid_t pid = fork();
        if (pid == 0)
            exec_rank(r, &old);
        if (pid < 0) {
            fprintf(stderr, "minimpirun: fork for rank %d: %s\n", r, strerror(errno));
            abort_job(minimpi_abort_word(MINIMPI_ABORT_EXIT, r, 1), 1, SIGTERM);
            break;
        }
        setpgid(pid, pid);
        pids[r] = pid;
        running[r] = true;
        nrunning++;
    }

    double start = now_s(), deadline = opt.timeout > 0 ? start + opt.timeout : 0;
    bool killed = false, injected = false;
    /* --wait-others: after the first failure, until others_until */
    double first_fail = 0, others_until = 0;
    int fail_status = 0;
    while (nrunning > 0) {
        double t = now_s(), until = t + 0.25;
        if (!aborting && deadline > 0 && deadline < until)
            until = deadline;
        if (aborting && !killed && kill_at < until)
            until = kill_at;
        double wait = until > t ? until - t : 0.001;
        struct timespec ts = { .tv_sec = (time_t)wait, .tv_nsec = (long)((wait - floor(wait)) * 1e9) };
        int sig = sigtimedwait(&set, NULL, &ts);
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
            if (!aborting) {
                fprintf(stderr, "minimpirun: got signal %d (%s): stopping ranks %s\n", sig, strsignal(sig),
                        running_list());
                abort_job(minimpi_abort_word(MINIMPI_ABORT_INTERRUPTED, 0, sig), 128 + sig, sig);
            } else if (!killed) {
                signal_running(SIGKILL);
                killed = true;
            }
        }

        if (opt.kill_rank >= 0 && !injected && !aborting && now_s() >= start + opt.kill_after) {
            injected = true;
            if (running[opt.kill_rank]) {
                fprintf(stderr, "minimpirun: --kill-rank: SIGKILL to rank %d after %g s\n", opt.kill_rank,
                        opt.kill_after);
                if (kill(-pids[opt.kill_rank], SIGKILL) != 0)
                    kill(pids[opt.kill_rank], SIGKILL);
                if (!first_fail) {
                    first_fail = now_s();
                    others_until = first_fail + opt.wait_others;
                }
            }
        }

        int st;
        pid_t pid;
        while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
            int r = 0;
            while (r < opt.n && pids[r] != pid)
                r++;
            if (r == opt.n || !running[r])
                continue;
            running[r] = false;
            nrunning--;
            bool failed = !WIFEXITED(st) || WEXITSTATUS(st) != 0;
            if (first_fail && !aborting) {
                if (WIFSIGNALED(st))
                    fprintf(stderr, "minimpirun: rank %d was killed by signal %d (%s), %.2f s after the first failure\n",
                            r, WTERMSIG(st), strsignal(WTERMSIG(st)), now_s() - first_fail);
                else
                    fprintf(stderr, "minimpirun: rank %d exited with status %d, %.2f s after the first failure\n", r,
                            WEXITSTATUS(st), now_s() - first_fail);
            }
            if (r == opt.kill_rank && injected && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
                continue;       /* the injected fault: the others' ends decide */
            if (!failed || aborting)
                continue;
            if (opt.wait_others > 0) {
                /* the first failure starts the wait; the job's status is its */
                int code = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
                if (!fail_status)
                    fail_status = code;
                if (!first_fail) {
                    first_fail = now_s();
                    others_until = first_fail + opt.wait_others;
                    fprintf(stderr, "minimpirun: rank %d failed (status %d): the others have %g s to end\n", r,
                            code, opt.wait_others);
                }
                continue;
            }
            if (WIFSIGNALED(st)) {
                int s = WTERMSIG(st);
                fprintf(stderr, "minimpirun: rank %d was killed by signal %d (%s)%s%s\n", r, s, strsignal(s),
                        nrunning ? ": stopping ranks " : "", running_list());
                abort_job(minimpi_abort_word(MINIMPI_ABORT_SIGNALED, r, s), 128 + s, SIGTERM);
            } else {
                int code = WEXITSTATUS(st);
                fprintf(stderr, "minimpirun: rank %d exited with status %d%s%s\n", r, code,
                        nrunning ? ": stopping ranks " : "", running_list());
                abort_job(minimpi_abort_word(MINIMPI_ABORT_EXIT, r, code), code, SIGTERM);
            }
        }

        t = now_s();
        if (!aborting && first_fail && opt.wait_others > 0 && t >= others_until && nrunning > 0) {
            fprintf(stderr, "minimpirun: ranks %s still running %g s after the first failure: stopping them\n",
                    running_list(), opt.wait_others);
            abort_job(minimpi_abort_word(MINIMPI_ABORT_TIMEOUT, 0, 0), 124, SIGTERM);
        }
        if (!aborting && deadline > 0 && t >= deadline && nrunning > 0) {
            fprintf(stderr, "minimpirun: timeout of %g s passed: stopping ranks %s (still running)\n",
                    opt.timeout, running_list());
            abort_job(minimpi_abort_word(MINIMPI_ABORT_TIMEOUT, 0, 0), 124, SIGTERM);
        }
        if (aborting && !killed && t >= kill_at && nrunning > 0) {
            fprintf(stderr, "minimpirun: ranks %s still running %g s after SIGTERM: SIGKILL\n", running_list(),
                    opt.grace);
            signal_running(SIGKILL);
            killed = true;
        }
    }
    unlink(shm_path);
    if (!aborting && fail_status)
        return fail_status;
    return job_status;
}
