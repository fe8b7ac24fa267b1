/* plugin/gin/gin_gdaki_release.c: ending the application's kernels on a
 * failed GDAKI context (gin_gdaki.h states the contract).
 *
 * Why: NCCL 2.28's device code has no abort. A kernel of a failed
 * communicator spins for good in one of three waits: a CQE of its own QP
 * (a flush, or a free slot of the ring), a signal, or a counter. While it
 * spins, NCCL's own ncclCommAbort cannot end either: commFree's
 * cudaFreeHost waits for the device (nccl-tests' survivors of a killed
 * peer, stacks taken on an H200). So the plugin ends those waits itself,
 * as a NIC would flush a dead QP:
 * - every CQ's consumer index (cq_sq.cqe_ci, which the device code only
 *   raises with an atomic max) goes to RELEASE_CI, so every "is CQE n
 *   there" answers yes from then on;
 * - every signal and counter advances by GIN_RELEASE_DELTA, again whenever the
 *   QPs show new posts: a kernel that reads a signal and then waits for it
 *   to grow by up to 2^16 (nccl-tests' alltoall, NCCL's GIN barrier) gets
 *   through, and one bump per kernel keeps NCCL's 32-bit rolling compares
 *   (barrier epochs) on the "reached" side for 2^15 kernels.
 * The QPs themselves were moved to the error state first (gin_gdaki.c), so
 * nothing a released kernel posts leaves the NIC. A release stops after
 * RELEASE_QUIET_S without new posts, or RELEASE_MAX_S in all.
 *
 * GPU memory is read and written from a side context (cudawrap_side_copy):
 * a copy issued in the application's context could wait for the very
 * kernel it is meant to end. All the work runs on one thread of this file,
 * so a destroy path never waits for the device. That thread outlives the
 * destroy, and NCCL unloads the plugin once a process's last communicator
 * is gone: the first release pins this library in memory for the life of
 * the process (the failed contexts' queues stay mapped until then too). */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cudawrap.h"
#include "gin.h"
#include "gin_gdaki.h"
#include "log.h"

#define RELEASE_CI (1ull << 62)
#define RELEASE_QUIET_S 2.0
#define RELEASE_MAX_S 60.0
#define RELEASE_TICK_NS 1000000L
#define RELEASE_COPY_MS 500
#define RELEASE_SLOTS 64

struct target {
    struct gin_gdaki_release_req q;
    char who[96];
    int cq_done;
    uint64_t posts;
    double start, last;
    unsigned bumps;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct target pending[RELEASE_SLOTS];
static int npending, thread_on;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Reads or writes (to_device) len bytes of GPU cuda_dev's memory at addr;
 * host memory (cuda_dev < 0) is used in place by the callers. */
static int side_io(int cuda_dev, uint64_t addr, void *h, size_t len, int to_device, char *err, size_t el)
{
    const struct cudawrap *cu = cudawrap_get(err, el);
    if (!cu)
        return -1;
    return cudawrap_side_copy(cu, cuda_dev, (cudawrap_devptr)addr, h, len, to_device, RELEASE_COPY_MS, err, el);
}

/* The sum of every QP's reserved slots: it moves when a kernel posts. The
 * fields read and written here lie at layout 100's offsets in both layouts
 * (include/railnet_gin_gdaki.h asserts it); only the stride differs. */
static int read_posts(const struct target *t, uint64_t *out, char *err, size_t el)
{
    uint64_t sum = 0;
    if (t->q.cuda_dev < 0) {
        for (int i = 0; i < t->q.nqps; i++) {
            const struct rn_doca_qp *qp = (const struct rn_doca_qp *)(uintptr_t)(t->q.qps + i * t->q.qp_stride);
            sum += __atomic_load_n(&qp->sq_rsvd_index, __ATOMIC_ACQUIRE);
        }
        *out = sum;
        return 0;
    }
    size_t len = (size_t)t->q.nqps * t->q.qp_stride;
    uint8_t *img = malloc(len);
    if (!img) {
        snprintf(err, el, "out of memory");
        return -1;
    }
    int rc = side_io(t->q.cuda_dev, t->q.qps, img, len, 0, err, el);
    for (int i = 0; rc == 0 && i < t->q.nqps; i++)
        sum += ((const struct rn_doca_qp *)(img + i * t->q.qp_stride))->sq_rsvd_index;
    free(img);
    *out = sum;
    return rc < 0 ? -1 : 0;
}

static int release_cqs(const struct target *t, char *err, size_t el)
{
    for (int i = 0; i < t->q.nqps; i++) {
        uint64_t at = t->q.qps + (uint64_t)i * t->q.qp_stride + offsetof(struct rn_doca_qp, cq_sq) +
                      offsetof(struct rn_doca_cq, cqe_ci);
        if (t->q.cuda_dev < 0) {
            uint64_t *p = (uint64_t *)(uintptr_t)at, old = __atomic_load_n(p, __ATOMIC_ACQUIRE);
            while (old < RELEASE_CI &&
                   !__atomic_compare_exchange_n(p, &old, RELEASE_CI, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                ;
        } else {
            uint64_t v = RELEASE_CI;
            if (side_io(t->q.cuda_dev, at, &v, sizeof(v), 1, err, el) < 0)
                return -1;
        }
    }
    return 0;
}

int gin_release_advance(int cuda_dev, uint64_t addr, size_t n, char *err, size_t el)
{
    if (!addr || !n)
        return 0;
    if (cuda_dev < 0) {
        uint64_t *p = (uint64_t *)(uintptr_t)addr;
        for (size_t i = 0; i < n; i++)
            __atomic_fetch_add(&p[i], GIN_RELEASE_DELTA, __ATOMIC_ACQ_REL);
        return 0;
    }
    uint64_t *v = malloc(n * sizeof(*v));
    if (!v) {
        snprintf(err, el, "out of memory");
        return -1;
    }
    int rc = side_io(cuda_dev, addr, v, n * sizeof(*v), 0, err, el);
    for (size_t i = 0; rc == 0 && i < n; i++)
        v[i] += GIN_RELEASE_DELTA;
    if (rc == 0)
        rc = side_io(cuda_dev, addr, v, n * sizeof(*v), 1, err, el);
    free(v);
    return rc < 0 ? -1 : 0;
}

/* One look at a target: 1 while it runs on, 0 once done. */
static int step(struct target *t)
{
    char err[256] = "";
    double now = now_s();
    uint64_t posts = 0;
    int rc = read_posts(t, &posts, err, sizeof(err));
    if (rc == 0 && !t->cq_done) {
        rc = release_cqs(t, err, sizeof(err));
        t->cq_done = 1;
        t->posts = posts + 1;       /* bump at once */
    }
    if (rc == 0 && posts != t->posts) {
        if ((rc = gin_release_advance(t->q.cuda_dev, t->q.sig, t->q.nsig, err, sizeof(err))) == 0)
            rc = gin_release_advance(t->q.cuda_dev, t->q.cnt, t->q.ncnt, err, sizeof(err));
        t->posts = posts;
        t->last = now;
        t->bumps++;
    }
    if (rc < 0) {
        WARN("NET/railnet/GIN: %s: releasing the failed GDAKI context's kernels stopped: %s", t->who, err);
        return 0;
    }
    if (now - t->last > RELEASE_QUIET_S || now - t->start > RELEASE_MAX_S) {
        INFO(NCCL_NET, "NET/railnet/GIN: %s: failed GDAKI context released (signals and counters advanced %u "
             "time(s)); no new posts for %.0f s",
             t->who, t->bumps, now - t->last);
        return 0;
    }
    return 1;
}

static void *release_main(void *arg)
{
    (void)arg;
    struct target run[RELEASE_SLOTS];
    int n = 0;
    for (;;) {
        pthread_mutex_lock(&mu);
        while (npending > 0 && n < RELEASE_SLOTS)
            run[n++] = pending[--npending];
        if (n == 0) {
            thread_on = 0;
            pthread_mutex_unlock(&mu);
            return NULL;
        }
        pthread_mutex_unlock(&mu);
        for (int i = 0; i < n;)
            if (step(&run[i]))
                i++;
            else
                run[i] = run[--n];
        struct timespec ts = { 0, RELEASE_TICK_NS };
        nanosleep(&ts, NULL);
    }
}

/* One more reference to the library holding this code, never dropped:
 * dlclose by NCCL then leaves it mapped. */
static void pin_self(void)
{
    Dl_info info;
    const char *why = "dladdr found no library";
    if (dladdr((void *)&pin_self, &info) && info.dli_fname) {
        if (dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE))
            return;
        why = dlerror();
    }
    WARN("NET/railnet/GIN: cannot pin the plugin in memory for the release thread (%s): unloading the plugin "
         "within 2 s of a failed GDAKI context's destroy would crash",
         why ? why : "dlopen failed");
}

void gin_gdaki_release(const struct gin_gdaki_release_req *q)
{
    static int said;
    struct target t;
    memset(&t, 0, sizeof(t));
    t.q = *q;
    snprintf(t.who, sizeof(t.who), "%s", q->who ? q->who : "");
    t.start = t.last = now_s();
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_ACQ_REL))
        WARN("NET/railnet/GIN: %s: a failed GDAKI context is torn down: its QPs are in the error state, and its "
             "completions, signals and counters are advanced so that the application's kernels end (NCCL 2.28's "
             "device code has no abort); data of the operations in flight is not delivered",
             t.who);
    pthread_mutex_lock(&mu);
    if (npending == RELEASE_SLOTS) {
        pthread_mutex_unlock(&mu);
        WARN("NET/railnet/GIN: %s: %d failed GDAKI contexts wait for release already: this one's kernels are "
             "left as they are",
             t.who, RELEASE_SLOTS);
        return;
    }
    pending[npending++] = t;
    if (!thread_on) {
        static pthread_once_t pinned = PTHREAD_ONCE_INIT;
        pthread_once(&pinned, pin_self);
        pthread_t th;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &a, release_main, NULL) == 0)
            thread_on = 1;
        else
            WARN("NET/railnet/GIN: %s: no thread to release a failed GDAKI context's kernels", t.who);
        pthread_attr_destroy(&a);
    }
    pthread_mutex_unlock(&mu);
}
