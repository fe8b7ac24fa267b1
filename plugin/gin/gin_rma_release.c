/* plugin/gin/gin_rma_release.c: ending the application's kernels of a failed
 * collComm under NCCL 2.30's GIN proxy (gin.h states the contract).
 *
 * Why: NCCL 2.30 sets the abort flag of its own device communicators only;
 * a user's (ncclDevCommCreate: nccl-tests, PyTorch) has none, so its kernel
 * waits for a dead peer's signal for good, and ncclCommAbort then waits
 * for that kernel in its own cuMemFreeHost (nccl-tests' survivors of a
 * killed peer, stacks taken on an H200). The RMA table already completes
 * every request of a failed collComm at once (gin_rma.c), so the kernel's
 * puts, flushes and queue credits move; what is left are the signals it
 * waits on, which only a peer would raise. So the plugin raises them, as a
 * NIC would flush a dead QP:
 * - every word of a window NCCL registered with NCCL_NET_MR_FLAG_FORCE_SO
 *   (its GIN proxy's signal buffers), and the words of other windows that
 *   this rank's own iputSignal named (VA signals; at most GIN_RELEASE_OFFS
 *   a window), advance by RELEASE_DELTA;
 * - again whenever the kernels posted since (a kernel reads a signal, puts,
 *   then waits for it to grow by up to the rank count: nccl-tests' alltoall,
 *   NCCL's GIN barrier), and every RELEASE_IDLE_S in any case, for
 *   RELEASE_MAX_S at most: one bump per kernel keeps NCCL's 32-bit rolling
 *   compares on the "reached" side.
 * It runs in rmaProgress, that is on NCCL's GIN progress thread while NCCL
 * still drives the context, and under the collComm's window lock: a window
 * being deregistered (NCCL frees its memory next) is off the list first.
 * GPU memory is read and written from a side context (cudawrap_side_copy),
 * which never waits for the application's kernels. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cudawrap.h"
#include "gin.h"
#include "log.h"

#define RELEASE_DELTA (1ull << 16)
#define RELEASE_MIN_GAP_S 0.001     /* at most one round a millisecond */
#define RELEASE_IDLE_S 0.05         /* a round this often even without posts */
#define RELEASE_MAX_S 60.0
#define RELEASE_COPY_MS 500
#define RELEASE_MAX_WINDOW (16u << 20)   /* a strict window larger than this is user data, not signals */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void gin_rma_release_note_signal(struct gin_mr *m, uint64_t off)
{
    if (m->strict || off + 8 > m->size)
        return;
    int n = __atomic_load_n(&m->nsig_offs, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (m->sig_offs[i] == off)
            return;
    if (n == GIN_RELEASE_OFFS)
        return;
    m->sig_offs[n] = off;
    __atomic_store_n(&m->nsig_offs, n + 1, __ATOMIC_RELEASE);
}

/* Adds RELEASE_DELTA to the n words at addr of window m's memory. */
static int bump_words(const struct gin_mr *m, uint64_t addr, size_t n, char *err, size_t el)
{
    if (m->cuda_dev == -2)
        return 0;           /* CUDA memory the driver placed on no GPU: left alone */
    if (m->cuda_dev < 0) {
        uint64_t *p = (uint64_t *)(uintptr_t)addr;
        for (size_t i = 0; i < n; i++)
            __atomic_fetch_add(&p[i], RELEASE_DELTA, __ATOMIC_ACQ_REL);
        return 0;
    }
    const struct cudawrap *cu = cudawrap_get(err, el);
    if (!cu)
        return -1;
    uint64_t *v = malloc(n * sizeof(*v));
    if (!v) {
        snprintf(err, el, "out of memory");
        return -1;
    }
    int rc = cudawrap_side_copy(cu, m->cuda_dev, (cudawrap_devptr)addr, v, n * sizeof(*v), 0, RELEASE_COPY_MS, err,
                                el);
    for (size_t i = 0; rc == 0 && i < n; i++)
        v[i] += RELEASE_DELTA;
    if (rc == 0)
        rc = cudawrap_side_copy(cu, m->cuda_dev, (cudawrap_devptr)addr, v, n * sizeof(*v), 1, RELEASE_COPY_MS, err,
                                el);
    free(v);
    return rc < 0 ? -1 : 0;
}

/* One round over the collComm's windows; the count of words advanced. */
static long round_of(struct gin_coll *c, char *err, size_t el)
{
    long words = 0;
    pthread_mutex_lock(&c->wins_mu);
    for (struct gin_mr *m = c->wins; m && words >= 0; m = m->next) {
        if (m->strict && m->size <= RELEASE_MAX_WINDOW) {
            if (bump_words(m, m->base, m->size / 8, err, el) < 0)
                words = -1;
            else
                words += (long)(m->size / 8);
            continue;
        }
        int n = __atomic_load_n(&m->nsig_offs, __ATOMIC_ACQUIRE);
        for (int i = 0; i < n && words >= 0; i++) {
            if (bump_words(m, m->base + (m->sig_offs[i] & ~7ull), 1, err, el) < 0)
                words = -1;
            else
                words++;
        }
    }
    pthread_mutex_unlock(&c->wins_mu);
    return words;
}

void gin_rma_release_step(struct gin_coll *c)
{
    if (!__atomic_load_n(&c->errors_by_query, __ATOMIC_ACQUIRE) ||
        __atomic_exchange_n(&c->rel_busy, 1, __ATOMIC_ACQ_REL))
        return;
    double now = now_s();
    uint64_t posts = __atomic_load_n(&c->fail_posts, __ATOMIC_RELAXED);
    int first = c->rel_start == 0;
    if (first)
        c->rel_start = now;
    int due = first || (now - c->rel_last >= RELEASE_MIN_GAP_S &&
                        (posts != c->rel_posts || now - c->rel_last >= RELEASE_IDLE_S));
    if (due && now - c->rel_start <= RELEASE_MAX_S) {
        char err[256] = "";
        long words = round_of(c, err, sizeof(err));
        c->rel_posts = posts;
        c->rel_last = now;
        c->rel_rounds++;
        if (words < 0) {
            WARN("NET/railnet/RMA: device %s, rank %d: advancing the failed collComm's signals stopped: %s",
                 c->dev_name, c->rank, err);
            c->rel_start = now - RELEASE_MAX_S - 1;    /* no further rounds */
        } else if (first) {
            WARN("NET/railnet/RMA: device %s, rank %d: the collComm failed: its signals (%ld words) are advanced "
                 "while NCCL drives it, so that kernels waiting on them end (NCCL gives an application's device "
                 "communicator no abort); data of the operations in flight is not delivered",
                 c->dev_name, c->rank, words);
        }
    }
    __atomic_store_n(&c->rel_busy, 0, __ATOMIC_RELEASE);
}
