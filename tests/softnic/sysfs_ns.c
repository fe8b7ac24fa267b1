/* tests/softnic/sysfs_ns.c: softnic-sysfs-ns's command line, softnic's
 * view, and its processes (sysfs_ns.h).
 *
 * The parent stays outside any namespace: it has softnic write its sysfs
 * view into a private temporary directory (in a child of its own, so that
 * neither softnic's threads nor SOFTNIC_SYSFS reach the command), places
 * the devices, forks the child that enters the namespace, builds /sys and
 * execs the command, then waits for it and removes the directory. The
 * bind mounts exist only in the child's namespace, so that removal never
 * touches a real sysfs file. */
#include "sysfs_ns.h"

#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ibvwrap.h"

/* Exit statuses of this program's own failures, as env(1) and timeout(1)
 * give them: a command's own status stays distinguishable. */
#define NS_EXIT_USAGE 2
#define NS_EXIT_FAILED 125
#define NS_EXIT_CANNOT_RUN 126
#define NS_EXIT_NOT_FOUND 127

static void usage(FILE *out)
{
    fprintf(out,
"Usage: " NS_PROG " [--near-gpu|--root] [--dual-port] [--keep-going] -- CMD [ARGS...]\n"
"Runs CMD in a private mount namespace whose /sys shows each softnic device as\n"
"a PCI function (vendor 0x15b3, class 0x020700) that\n"
"/sys/class/infiniband/<dev>/device resolves to, so that programs that place\n"
"NICs in the PCI tree (NCCL's IB transport, its topology) find softnic's.\n"
"What other processes see of /sys does not change. Needs root (CAP_SYS_ADMIN),\n"
"and softnic's libibverbs.so.1 first on LD_LIBRARY_PATH (its devices are those\n"
"CMD will see).\n"
"\n"
"Each device is a NIC at DDDD:NB:00.0 on a bus of its own, behind a PCI port\n"
"of its own, placed by:\n"
"      --near-gpu    device i's port beside the port above GPU (i mod number of\n"
"                    GPUs), or beside the GPU on its root complex; the NIC gets\n"
"                    the GPU's NUMA node (default when the host has an NVIDIA GPU)\n"
"      --root        the ports on the first PCI root, /sys/devices/pci*\n"
"                    (default without a GPU)\n"
"      --dual-port   devices 2k and 2k+1 (softnic's order) as functions .0 and\n"
"                    .1 of one NIC behind one port, as a ConnectX shows the\n"
"                    two ports of a card: NCCL fuses them into one NIC\n"
"      --keep-going  when the view cannot be made, say why and run CMD on the\n"
"                    unchanged /sys instead of failing\n"
"  -h, --help        this help\n"
"\n"
"Exit status: CMD's (128+N when signal N ended it); 2 on bad usage; 125 when\n"
"the view cannot be made; 126 or 127 when CMD cannot be run. SIGINT and\n"
"SIGTERM sent to this program are passed on to CMD.\n");
}

/* 0, 1 for --help, or -1 after a message. */
static int parse_args(int argc, char **argv, struct ns_ctx *c)
{
    enum { OPT_NEAR = 256, OPT_ROOT, OPT_KEEP, OPT_DUAL };
    static const struct option longopts[] = {
        { "near-gpu", no_argument, NULL, OPT_NEAR },
        { "root", no_argument, NULL, OPT_ROOT },
        { "keep-going", no_argument, NULL, OPT_KEEP },
        { "dual-port", no_argument, NULL, OPT_DUAL },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int opt;
    /* "+": the options end at CMD, whose own options are its own */
    while ((opt = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
        switch (opt) {
        case OPT_NEAR:
        case OPT_ROOT: {
            enum ns_placement p = opt == OPT_NEAR ? NS_PLACE_NEAR_GPU : NS_PLACE_ROOT;
            if (c->placement != NS_PLACE_AUTO && c->placement != p) {
                fprintf(stderr, NS_PROG ": --near-gpu and --root exclude each other\n");
                return -1;
            }
            c->placement = p;
            break;
        }
        case OPT_KEEP: c->keep_going = 1; break;
        case OPT_DUAL: c->dual_port = 1; break;
        case 'h': return 1;
        default: return -1; /* getopt said which */
        }
    }
    if (optind >= argc) {
        fprintf(stderr, NS_PROG ": no command to run\n");
        return -1;
    }
    c->cmd = argv + optind;
    return 0;
}

/* In a child of its own: softnic writes its view when its device list is
 * first read. */
static int view_child(const struct ns_ctx *c, char *err, size_t errlen)
{
    struct ibvwrap v;
    char dir[PATH_MAX];
    setenv("SOFTNIC_SYSFS", c->view, 1);
    /* the functions are this program's to place: a layout of softnic's own
     * (set for the command) would put device/ on switches of the view */
    setenv("SOFTNIC_PCI_LAYOUT", "none", 1);
    if (ibvwrap_open(&v, NULL, err, errlen))
        return -1;
    int n = 0;
    struct ibv_device **list = v.get_device_list(&n);
    if (!list) {
        ns_err(err, errlen, "%s lists no device (%s): softnic's libibverbs.so.1 must come first "
               "on LD_LIBRARY_PATH", v.path, strerror(errno));
        return -1;
    }
    v.free_device_list(list);
    if (ns_path(dir, sizeof(dir), err, errlen, "%s/class", c->view))
        return -1;
    if (!ns_exists(dir)) {
        ns_err(err, errlen, "%s wrote no sysfs view: it is not softnic's (softnic's "
               "libibverbs.so.1 must come first on LD_LIBRARY_PATH)", v.path);
        return -1;
    }
    return 0;
}

static int write_view(const struct ns_ctx *c, char *err, size_t errlen)
{
    int fds[2];
    if (pipe(fds)) {
        ns_err(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        ns_err(err, errlen, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        int rc = view_child(c, err, errlen);
        if (rc && write(fds[1], err, strlen(err)) < 0)
            rc = -1;
        /* softnic's threads and exit handlers end with this process */
        _exit(rc ? 1 : 0);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t r;
    while (n < errlen - 1 && ((r = read(fds[0], err + n, errlen - 1 - n)) > 0 ||
                              (r < 0 && errno == EINTR)))
        n += r > 0 ? (size_t)r : 0;
    err[n] = '\0';
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (n == 0)
        ns_err(err, errlen, "softnic's view was not written (its process ended with status "
               "0x%x)", (unsigned)status);
    return -1;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    if (remove(path))
        fprintf(stderr, NS_PROG ": cannot remove %s: %s\n", path, strerror(errno));
    return 0;
}

/* FTW_MOUNT: were anything mounted there in this namespace, it is not
 * descended into */
static void remove_tmp(const struct ns_ctx *c)
{
    if (c->tmp[0])
        nftw(c->tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static int make_tmp(struct ns_ctx *c, char *err, size_t errlen)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    if (ns_path(c->tmp, sizeof(c->tmp), err, errlen, "%s/" NS_PROG ".XXXXXX", base))
        return -1;
    if (!mkdtemp(c->tmp)) {
        ns_err(err, errlen, "cannot make a directory %s: %s", c->tmp, strerror(errno));
        c->tmp[0] = '\0';
        return -1;
    }
    if (ns_path(c->view, sizeof(c->view), err, errlen, "%s/view", c->tmp) ||
        ns_path(c->stage, sizeof(c->stage), err, errlen, "%s/stage", c->tmp))
        return -1;
    if (mkdir(c->stage, 0700)) {
        ns_err(err, errlen, "cannot make %s: %s", c->stage, strerror(errno));
        return -1;
    }
    return 0;
}

static void run_cmd(char **cmd)
{
    execvp(cmd[0], cmd);
    int e = errno;
    fprintf(stderr, NS_PROG ": cannot run %s: %s\n", cmd[0], strerror(e));
    _exit(e == ENOENT ? NS_EXIT_NOT_FOUND : NS_EXIT_CANNOT_RUN);
}

/* Without the view: fail, or with --keep-going say so and run CMD as is. */
static int no_view(const struct ns_ctx *c, const char *why)
{
    fprintf(stderr, NS_PROG ": %s\n", why);
    if (!c->keep_going)
        return NS_EXIT_FAILED;
    fprintf(stderr, NS_PROG ": --keep-going: running %s on the unchanged /sys\n", c->cmd[0]);
    run_cmd(c->cmd);
    return NS_EXIT_FAILED;
}

static void ns_child(struct ns_ctx *c)
{
    char err[1024];
    if (ns_enter(err, sizeof(err)) == 0 && ns_build(c, err, sizeof(err)) == 0)
        run_cmd(c->cmd);
    ns_undo(c);
    _exit(no_view(c, err));
}

/* The child signals are passed on to; a signal handler's only state. */
static volatile sig_atomic_t g_child;

static void forward(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    /* a terminal's ^C reaches CMD's process group from the kernel by itself;
     * what a process sent to this one alone is passed on */
    if (g_child > 0 && si->si_code <= 0)
        kill(g_child, sig);
}

static int wait_child(pid_t pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, NS_PROG ": waitpid: %s\n", strerror(errno));
            return NS_EXIT_FAILED;
        }
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

int main(int argc, char **argv)
{
    static struct ns_ctx c;
    char err[1024];
    int rc = parse_args(argc, argv, &c);
    if (rc > 0) {
        usage(stdout);
        return 0;
    }
    if (rc < 0) {
        fprintf(stderr, "Usage: " NS_PROG " [--near-gpu|--root] [--dual-port] [--keep-going] -- CMD [ARGS...]\n"
                        "Try '" NS_PROG " --help'.\n");
        return NS_EXIT_USAGE;
    }
    if (make_tmp(&c, err, sizeof(err)) || write_view(&c, err, sizeof(err)) ||
        ns_place_read_view(&c, err, sizeof(err)) || ns_place_devices(&c, err, sizeof(err))) {
        remove_tmp(&c);
        return no_view(&c, err);
    }
    /* SIGINT/SIGTERM wait until the child exists and is known to the handler */
    sigset_t fwd, old;
    sigemptyset(&fwd);
    sigaddset(&fwd, SIGINT);
    sigaddset(&fwd, SIGTERM);
    sigprocmask(SIG_BLOCK, &fwd, &old);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        ns_err(err, sizeof(err), "fork: %s", strerror(errno));
        sigprocmask(SIG_SETMASK, &old, NULL);
        remove_tmp(&c);
        return no_view(&c, err);
    }
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        ns_child(&c);
    }
    g_child = pid;
    struct sigaction sa = { .sa_sigaction = forward, .sa_flags = SA_SIGINFO | SA_RESTART };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigprocmask(SIG_SETMASK, &old, NULL);
    rc = wait_child(pid);
    remove_tmp(&c);
    return rc;
}
