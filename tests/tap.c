/* tests/tap.c: runs registered cases in forked children and prints TAP. */
#include "tap.h"

#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TAP_MAX_CASES 512
#define TAP_EXIT_SKIP 77

static struct tap_case tap_cases[TAP_MAX_CASES];
static int tap_ncases;
static int tap_result_fd = -1; /* child -> parent: skip reason / failure text */
static volatile unsigned long *tap_beats; /* shared with the child: tap_progress() */

void tap_register(const char *name, tap_fn fn)
{
    if (tap_ncases < TAP_MAX_CASES)
        tap_cases[tap_ncases++] = (struct tap_case){ name, fn };
}

static void tap_report(const char *text)
{
    if (tap_result_fd >= 0) {
        ssize_t n = write(tap_result_fd, text, strlen(text));
        (void)n;
    }
}

void tap_fail_at(const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    int off = snprintf(msg, sizeof(msg), "%s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + off, sizeof(msg) - (size_t)off, fmt, ap);
    va_end(ap);
    tap_report(msg);
    fflush(NULL);
    _exit(1);
}

void tap_skip(const char *why)
{
    tap_report(why);
    fflush(NULL);
    _exit(TAP_EXIT_SKIP);
}

void tap_diag(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "# %s\n", msg);
}

void tap_progress(void)
{
    if (tap_beats)
        __atomic_fetch_add(tap_beats, 1, __ATOMIC_RELAXED);
}

/* Waits for the case: killed after timeout_s seconds without progress (or
 * 10 * timeout_s in all). */
static int tap_wait(pid_t pid, int timeout_s, int *timed_out)
{
    struct timespec start, last, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    last = start;
    unsigned long beats = tap_beats ? *tap_beats : 0;
    *timed_out = 0;
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return status;
        if (r < 0 && errno != EINTR)
            return -1;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (tap_beats && *tap_beats != beats) {
            beats = *tap_beats;
            last = now;
        }
        if ((now.tv_sec - last.tv_sec >= timeout_s || now.tv_sec - start.tv_sec >= 10L * timeout_s) &&
            !*timed_out) {
            *timed_out = 1;
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
        }
        usleep(2000);
    }
}

static int tap_selected(int argc, char **argv, const char *name)
{
    if (argc < 2)
        return 1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return 1;
    return 0;
}

int tap_run(int argc, char **argv)
{
    const char *t = getenv("TAP_TIMEOUT");
    int timeout_s = t ? atoi(t) : 120;
    if (timeout_s <= 0)
        timeout_s = 120;
    int n = 0, failed = 0;
    void *beats = mmap(NULL, sizeof(*tap_beats), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    tap_beats = beats == MAP_FAILED ? NULL : beats;
    for (int i = 0; i < tap_ncases; i++)
        n += tap_selected(argc, argv, tap_cases[i].name);
    printf("1..%d\n", n);
    fflush(stdout);
    int num = 0;
    for (int i = 0; i < tap_ncases; i++) {
        struct tap_case *c = &tap_cases[i];
        if (!tap_selected(argc, argv, c->name))
            continue;
        num++;
        int fds[2];
        if (pipe(fds) != 0) {
            printf("not ok %d - %s # pipe: %s\n", num, c->name, strerror(errno));
            failed++;
            continue;
        }
        pid_t pid = fork();
        if (pid == 0) {
            setpgid(0, 0);
            close(fds[0]);
            tap_result_fd = fds[1];
            c->fn();
            fflush(NULL);
            _exit(0);
        }
        close(fds[1]);
        int timed_out;
        int status = tap_wait(pid, timeout_s, &timed_out);
        kill(-pid, SIGKILL); /* helpers a case forked must not outlive it */
        char msg[1024] = "";
        ssize_t got = read(fds[0], msg, sizeof(msg) - 1);
        msg[got > 0 ? got : 0] = 0;
        close(fds[0]);
        if (timed_out) {
            printf("not ok %d - %s # timed out: no progress for %d s\n", num, c->name, timeout_s);
            failed++;
        } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            printf("ok %d - %s\n", num, c->name);
        } else if (WIFEXITED(status) && WEXITSTATUS(status) == TAP_EXIT_SKIP) {
            printf("ok %d - %s # SKIP %s\n", num, c->name, msg);
        } else {
            if (WIFSIGNALED(status))
                snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg), " killed by signal %d",
                         WTERMSIG(status));
            printf("not ok %d - %s\n# %s\n", num, c->name, msg[0] ? msg : "failed");
            failed++;
        }
        fflush(stdout);
    }
    return failed ? 1 : 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path) ? -1 : 0;
}

int tap_rm_tree(const char *dir)
{
    return nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
