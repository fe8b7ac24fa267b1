/* link.c: the link a port advertises (ibv_query_port's active_width and
 * active_speed, sysfs's ports/<n>/rate): the fastest standard IB width x
 * lane speed that does not exceed what the port carries.  NCCL sizes its
 * channels and picks algorithm and protocol from this speed, so a port
 * that claims 200 Gb/s while moving a tenth of it steers NCCL to choices
 * that only pay on the claimed link (LL and more channels where Simple on
 * fewer runs faster).
 *
 * What a port carries: its rate limit when one is set; otherwise this
 * host's calibration, measured once per process: what one thread moves
 * with process_vm_readv, the same-host fast path's copy (cma.c), over a
 * 4 MiB span, the size of NCCL's buffer of a channel, from which the fast
 * path pulls its pieces; a memcpy of the same span where the kernel
 * refuses the call.  A quarter of it when no peer can pull -- SOFTNIC_FASTPATH=0,
 * a kernel (seccomp) that refuses process_vm_readv, or Yama's ptrace_scope
 * 1-3 without CAP_SYS_PTRACE, which the fast path meets and a read of this
 * process does not -- (the TCP wire copies twice and runs the stack:
 * bench/softnic_fastpath.sh measures 0.2-0.3 of memcpy).  The earlier figure, a memcpy over 32 MiB, measured
 * the VM's memory bandwidth: 5-12.5 GB/s on machines of one kind (4x QDR,
 * FDR or EDR: NCCL's plan on softnic changed with the draw), and a third
 * to a half of what one port carried there; process_vm_readv over 4 MiB
 * gave 8-11.4 GB/s on the GPU and CI machines alike (ib_write_bw 1 MiB on
 * CI: 9.5 GB/s).
 * A calibrated port takes 4x links only (a rate limit or SOFTNIC_LINK_RATE
 * any width): their steps of about 2x keep the measurement's jitter from
 * giving processes of one host different links.
 * The measurement is shared by this user's processes on this host for an
 * hour (SOFTNIC_LINK_CACHE, default CAL_CACHE_FMT; the first figure written
 * wins): the ranks of one job
 * must advertise one link, or NCCL plans each side of a connection for
 * a different speed; measured alone on a loaded host, two ranks saw 80
 * and 112 Gb/s.
 * SOFTNIC_LINK_RATE overrides the calibration: the same figure in every
 * process of a job, or the old 200 Gb/s with SOFTNIC_LINK_RATE=25G. */
#include "softnic.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define CAL_SPAN (4u << 20)
#define CAL_PASSES 16
#define CAL_CACHE_FMT "/dev/shm/softnic-link-%u"
#define CAL_CACHE_S 3600

static uint64_t calibrated;
static pthread_once_t cal_once = PTHREAD_ONCE_INIT;
static const struct sn_config *cal_conf;   /* for calibrate(), under cal_once */

/* This thread's CPU time: what it took to copy, not how long it waited
 * for a CPU.  Timed by the wall clock, a pass on a loaded host measured the
 * load (at load 15-30 on 2 cores 5 of 25 calibrations gave 0.87-1.20 GB/s
 * for a memcpy of 4.1 GB/s, and test_softnic_device's stale-cache case,
 * which wants a real measurement of at least 10 Gb/s, failed). */
static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Bytes/s one thread copies over CAL_SPAN: process_vm_readv from this
 * process (the fast path's call), else memcpy; the best of a few passes
 * (what the others lose is to caches and memory shared with the host's
 * other work).  A pass where the kernel refuses the call or reads short
 * (seccomp) turns the measurement into a memcpy's, from its first pass:
 * no pass of the one is mixed into the other.  About 10 ms of CPU. */
static uint64_t copy_rate(void)
{
    char *a = malloc(CAL_SPAN), *b = malloc(CAL_SPAN);
    double best = 0;
    bool cma = true;
    if (a && b) {
        memset(a, 1, CAL_SPAN);
        memset(b, 2, CAL_SPAN);
        for (int i = 0; i < CAL_PASSES; i++) {
            char *dst = i & 1 ? a : b, *src = i & 1 ? b : a;
            double t0 = thread_cpu_s();
            if (cma) {
                struct iovec l = { dst, CAL_SPAN }, r = { src, CAL_SPAN };
                if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != (ssize_t)CAL_SPAN) {
                    cma = false;
                    best = 0;
                    i = -1;   /* all the passes again, by memcpy */
                    continue;
                }
            } else {
                memcpy(dst, src, CAL_SPAN);
            }
            __asm__ volatile("" ::: "memory");
            double r = CAL_SPAN / (thread_cpu_s() - t0);
            best = r > best ? r : best;
        }
    }
    free(a);
    free(b);
    return best > 0 ? (uint64_t)best : 0;
}

/* The cached figure at path when it is this user's own regular file,
 * fresh and well formed; 0 otherwise (a stale or malformed one of ours is
 * removed). */
static uint64_t cache_read(const char *path)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    char buf[32] = { 0 };
    uint64_t v = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid()) {
        if (time(NULL) - st.st_mtime <= CAL_CACHE_S && read(fd, buf, sizeof(buf) - 1) > 0) {
            char *end;
            unsigned long long x = strtoull(buf, &end, 10);
            if (end != buf && (*end == '\n' || *end == '\0'))
                v = x;
        }
        if (!v)
            unlink(path);   /* stale or malformed: the next figure replaces it */
    }
    close(fd);
    return v;
}

/* One thread's copy rate as this host's processes agree on it: the
 * cached figure, else a measurement offered to the cache; when another
 * process got there first, its figure. */
static uint64_t host_copy_rate(const struct sn_config *c)
{
    char path[256], tmp[300];
    if (c->link_cache[0])
        snprintf(path, sizeof(path), "%s", c->link_cache);
    else
        snprintf(path, sizeof(path), CAL_CACHE_FMT, (unsigned)getuid());
    uint64_t v = cache_read(path);
    if (v)
        return v;
    v = copy_rate();
    if (!v)
        return 0;
    snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return v;   /* no /dev/shm: this process's own figure */
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)v);
    bool ok = write(fd, buf, (size_t)n) == n;
    close(fd);
    if (ok && link(tmp, path) != 0 && errno == EEXIST) {
        uint64_t first = cache_read(path);
        if (first)
            v = first;
    }
    unlink(tmp);
    return v;
}

/* Whether another process of this host may pull from this one with
 * process_vm_readv, as the fast path's responder does (cma.c probes each
 * peer and keeps the wire when the kernel says EPERM).  A read of this
 * process by itself passes seccomp's test but not Yama's: the kernel
 * exempts a process reading itself from ptrace_scope, and at scope 1 (the
 * default of several distributions) and above a rank may read another
 * that is not its descendant only with CAP_SYS_PTRACE. */
static bool peers_may_pull(void)
{
    char src[8] = "softnic", dst[8];
    struct iovec l = { dst, sizeof(dst) }, r = { src, sizeof(src) };
    if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != (ssize_t)sizeof(dst))
        return false;   /* seccomp, or no such call */
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
    int scope = 0;
    if (f) {
        if (fscanf(f, "%d", &scope) != 1)
            scope = 0;
        fclose(f);
    }
    if (scope <= 0)
        return true;
    if (scope >= 3)
        return false;
    bool ptrace_cap = false;
    char line[256];
    unsigned long long eff;
    if ((f = fopen("/proc/self/status", "re"))) {
        while (fgets(line, sizeof(line), f))
            if (sscanf(line, "CapEff: %llx", &eff) == 1)
                ptrace_cap = eff >> 19 & 1;   /* CAP_SYS_PTRACE */
        fclose(f);
    }
    return ptrace_cap;
}

/* Runs from softnic's own initialisation too (sysfs): it must not call
 * softnic_global(). */
static void calibrate(void)
{
    const struct sn_config *c = cal_conf;
    if (c->link_rate) {
        calibrated = c->link_rate;
        return;
    }
    uint64_t m = host_copy_rate(c);
    /* without the fast path between processes, the wire carries the bytes */
    bool pull = c->fastpath && peers_may_pull();
    calibrated = pull ? m : m / 4;
    if (c->debug)
        SN_LOG("link: one thread copies %.2f GB/s: unlimited ports carry %.2f GB/s%s", m / 1e9,
               calibrated / 1e9, c->fastpath && !pull ? " (peers may not pull: the wire)" : "");
}

uint64_t link_calibrated_rate(const struct sn_config *c)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    cal_conf = c;
    pthread_once(&cal_once, calibrate);
    pthread_mutex_unlock(&lock);
    return calibrated;
}

static const struct { uint8_t code; uint32_t mbps; const char *name; } lane[] = {
    { 1, 2500, "SDR" },    { 2, 5000, "DDR" },    { 4, 10000, "QDR" },    { 16, 14000, "FDR" },
    { 32, 25000, "EDR" },  { 64, 50000, "HDR" },  { 128, 100000, "NDR" },
};
static const struct { uint8_t code; uint32_t lanes; } wid[] = {
    { 1, 1 }, { 16, 2 }, { 2, 4 }, { 4, 8 }, { 8, 12 },
};

/* only_4x: 4x links alone (steps of about 2x), so that a measurement's
 * jitter seldom moves the answer between processes of one host. */
static void link_search(uint64_t rate, bool only_4x, uint8_t *width, uint8_t *speed)
{
    uint64_t limit_mbps = rate * 8 / 1000000;
    uint64_t best = 0;
    *width = 1;   /* below 1x SDR: 1x SDR */
    *speed = 1;
    for (size_t l = 0; l < sizeof(lane) / sizeof(lane[0]); l++)
        for (size_t w = 0; w < sizeof(wid) / sizeof(wid[0]); w++) {
            if (only_4x && wid[w].lanes != 4)
                continue;
            uint64_t mbps = (uint64_t)lane[l].mbps * wid[w].lanes;
            /* equal speeds: the later entry, of faster lanes, wins */
            if (mbps <= limit_mbps && mbps >= best) {
                best = mbps;
                *width = wid[w].code;
                *speed = lane[l].code;
            }
        }
}

void link_for_rate(uint64_t rate, uint8_t *width, uint8_t *speed)
{
    link_search(rate, false, width, speed);
}

void link_of_port(const struct sn_config *c, const struct sn_port *p, uint8_t *width, uint8_t *speed)
{
    if (p->conf.rate || c->link_rate) {
        link_search(p->conf.rate ? p->conf.rate : c->link_rate, false, width, speed);
        return;
    }
    uint64_t cal = link_calibrated_rate(c);
    /* a calibration below 4x SDR (10 Gb/s) takes the narrower links too */
    link_search(cal, cal * 8 / 1000000 >= 10000, width, speed);
}

static uint32_t lanes_of(uint8_t width)
{
    for (size_t w = 0; w < sizeof(wid) / sizeof(wid[0]); w++)
        if (wid[w].code == width)
            return wid[w].lanes;
    return 0;
}

uint32_t link_mbps(uint8_t width, uint8_t speed)
{
    for (size_t l = 0; l < sizeof(lane) / sizeof(lane[0]); l++)
        if (lane[l].code == speed)
            return lane[l].mbps * lanes_of(width);
    return 0;
}

void link_rate_string(uint8_t width, uint8_t speed, char *buf, size_t len)
{
    uint32_t lanes = lanes_of(width);
    const char *name = "?";
    for (size_t l = 0; l < sizeof(lane) / sizeof(lane[0]); l++)
        if (lane[l].code == speed)
            name = lane[l].name;
    uint32_t total = link_mbps(width, speed);
    /* as the kernel writes it: "200 Gb/sec (4X HDR)", "2.5 Gb/sec (1X SDR)" */
    if (total % 1000)
        snprintf(buf, len, "%u.%u Gb/sec (%uX %s)", total / 1000, total % 1000 / 100, lanes, name);
    else
        snprintf(buf, len, "%u Gb/sec (%uX %s)", total / 1000, lanes, name);
}
