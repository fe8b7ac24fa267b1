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
 *   a window), advance by GIN_RELEASE_DELTA;
 * - again whenever the kernels posted since (a kernel reads a signal, puts,
 *   then waits for it to grow by up to the rank count: nccl-tests' alltoall,
 *   NCCL's GIN barrier), and every RELEASE_IDLE_NS in any case, for
 *   RELEASE_MAX_NS at most: one bump per kernel keeps NCCL's 32-bit rolling
 *   compares on the "reached" side.
 * It runs in rmaProgress, that is on NCCL's GIN progress thread while NCCL
 * still drives the context, and under the collComm's window lock: a window
 * being deregistered (NCCL frees its memory next) is off the list first.
 * GPU memory is read and written from a side context (cudawrap_side_copy),
 * which never waits for the application's kernels. */
#include <stdint.h>

#include "comm.h"
#include "gin.h"
#include "log.h"

#define RELEASE_MIN_GAP_NS 1000000ull     /* at most one round a millisecond */
#define RELEASE_IDLE_NS 50000000ull       /* a round this often even without posts */
#define RELEASE_MAX_NS 60000000000ull
#define RELEASE_MAX_WINDOW (16u << 20)    /* a strict window larger than this is user data, not signals */

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

/* Advances n words at addr of window m's memory; CUDA memory the driver
 * placed on no GPU is left alone. */
static int bump_words(const struct gin_mr *m, uint64_t addr, size_t n, char *err, size_t el)
{
    return m->cuda_dev == -2 ? 0 : gin_release_advance(m->cuda_dev, addr, n, err, el);
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
    uint64_t now = comm_now_ns();
    uint64_t posts = __atomic_load_n(&c->fail_posts, __ATOMIC_RELAXED);
    int first = c->rel_start_ns == 0;
    if (first)
        c->rel_start_ns = now;
    int due = first || (now - c->rel_last_ns >= RELEASE_MIN_GAP_NS &&
                        (posts != c->rel_posts || now - c->rel_last_ns >= RELEASE_IDLE_NS));
    if (due && !c->rel_stopped && now - c->rel_start_ns <= RELEASE_MAX_NS) {
        char err[256] = "";
        long words = round_of(c, err, sizeof(err));
        c->rel_posts = posts;
        c->rel_last_ns = now;
        c->rel_rounds++;
        if (words < 0) {
            WARN("NET/railnet/RMA: device %s, rank %d: advancing the failed collComm's signals stopped: %s",
                 c->dev_name, c->rank, err);
            c->rel_stopped = 1;    /* no further rounds */
        } else if (first) {
            WARN("NET/railnet/RMA: device %s, rank %d: the collComm failed: its signals (%ld words) are advanced "
                 "while NCCL drives it, so that kernels waiting on them end (NCCL gives an application's device "
                 "communicator no abort); data of the operations in flight is not delivered",
                 c->dev_name, c->rank, words);
        }
    }
    __atomic_store_n(&c->rel_busy, 0, __ATOMIC_RELEASE);
}
