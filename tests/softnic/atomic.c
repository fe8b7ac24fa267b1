/* atomic.c: the responder's execution of RDMA atomics (FETCH_AND_ADD,
 * CMP_AND_SWP on one aligned 8-byte word).
 *
 * The target memory belongs to this process, so every atomic on it, from
 * any QP and any peer process, is executed here -- as on a ConnectX, whose
 * atomic unit serialises all atomics to its host memory.  A host word is
 * changed with a CPU atomic instruction: atomic against the other NIC
 * threads and also against CPU atomics of the owner (or of another process
 * sharing the page).  A GPU word is read, changed and written back through
 * CUDA under one process-wide lock: atomic against every other NIC atomic
 * of this process, not against the GPU's own atomics on that word (PCIe
 * atomics from a real NIC to GPU memory are not guaranteed either). */
#include "softnic.h"

#include <errno.h>

static pthread_mutex_t gpu_atomic_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t apply(bool cas, uint64_t cur, uint64_t swap_add, uint64_t compare)
{
    if (cas)
        return cur == compare ? swap_add : cur;
    return cur + swap_add;
}

int atomic_execute(struct sn_mr *mr, uint64_t addr, bool cas, uint64_t swap_add,
                   uint64_t compare, uint64_t *old)
{
    if (!mr->gpu) {
        uint64_t *p = (uint64_t *)(void *)mr_host_ptr(mr, addr);
        if (cas) {
            uint64_t expect = compare;
            __atomic_compare_exchange_n(p, &expect, swap_add, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST);
            *old = expect;   /* the value seen: compare on success */
        } else {
            *old = __atomic_fetch_add(p, swap_add, __ATOMIC_SEQ_CST);
        }
        return 0;
    }
    pthread_mutex_lock(&gpu_atomic_lock);
    uint64_t cur;
    int err = mr_read(mr, addr, &cur, sizeof(cur));
    if (!err) {
        uint64_t next = apply(cas, cur, swap_add, compare);
        if (next != cur)
            err = mr_write(mr, addr, &next, sizeof(next));
        /* landed before the lock goes: the next atomic reads it from
         * another thread's stream (the responder defers its writes) */
        int landed = gpu_flush();
        if (!err)
            err = landed;
    }
    pthread_mutex_unlock(&gpu_atomic_lock);
    if (err)
        return err > 0 ? err : EIO;
    *old = cur;
    return 0;
}
