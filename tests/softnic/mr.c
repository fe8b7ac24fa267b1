/* mr.c: memory regions and the key table.
 *
 * lkey == rkey == index << 8 | generation: a stale key of a deregistered
 * MR never matches the region that reuses the slot.  Every access looks the
 * key up again (mr_get) and holds a reference while it touches the memory;
 * deregistration removes the key first, then waits for in-flight accesses,
 * so no NIC write lands in memory after ibv_dereg_mr returns. */
#include "softnic.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MR_TABLE_SIZE 65536

static pthread_rwlock_t mr_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct sn_mr *mr_table[MR_TABLE_SIZE];
static uint8_t mr_gen[MR_TABLE_SIZE];
static uint32_t mr_next = 1;

#define ACCESS_KNOWN (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
                      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | \
                      IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | \
                      IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB)

static int mr_check_access(unsigned int access)
{
    /* optional bits (relaxed ordering, ...) may be ignored by a provider */
    unsigned int mandatory = access & ~(unsigned int)IBV_ACCESS_OPTIONAL_RANGE;
    if (mandatory & ~(unsigned int)ACCESS_KNOWN)
        return EINVAL;
    if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
        !(access & IBV_ACCESS_LOCAL_WRITE))
        return EINVAL;
    if (access & (IBV_ACCESS_ON_DEMAND | IBV_ACCESS_MW_BIND))
        return EOPNOTSUPP;
    return 0;
}

/* A ConnectX's registration pins the range's pages: one not mapped, or
 * with a hole, fails with EFAULT and nothing is registered.  mincore says
 * ENOMEM for such a range without faulting or pinning a page.  0 or
 * EFAULT. */
static int host_range_mapped(const void *addr, size_t len)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t at = (uintptr_t)addr & ~(page - 1);
    uintptr_t end = ((uintptr_t)addr + len - 1) | (page - 1);   /* the last byte's page's last byte */
    unsigned char vec[4096];
    while (at <= end) {
        uintptr_t pages = (end - at) / page + 1;
        if (pages > sizeof(vec))
            pages = sizeof(vec);
        if (mincore((void *)at, pages * page, vec) && errno == ENOMEM)
            return EFAULT;
        at += pages * page;
        if (at == 0)   /* the top of the address space */
            break;
    }
    return 0;
}

static struct ibv_mr *mr_insert(struct sn_mr *mr)
{
    pthread_rwlock_wrlock(&mr_lock);
    uint32_t idx = 0;
    for (uint32_t n = 0; n < MR_TABLE_SIZE - 1; n++) {
        uint32_t i = mr_next;
        mr_next = mr_next + 1 == MR_TABLE_SIZE ? 1 : mr_next + 1;
        if (!mr_table[i]) {
            idx = i;
            break;
        }
    }
    if (!idx) {
        pthread_rwlock_unlock(&mr_lock);
        free(mr);
        errno = ENOMEM;
        return NULL;
    }
    mr_gen[idx]++;
    mr->ibmr.lkey = mr->ibmr.rkey = idx << 8 | mr_gen[idx];
    atomic_store(&mr->refs, 1);
    mr_table[idx] = mr;
    pthread_rwlock_unlock(&mr_lock);
    push_mr_publish(mr);
    pd_use(mr->ibmr.pd, 1);
    atomic_fetch_add(&sn_live_mrs, 1);
    return &mr->ibmr;
}

static struct ibv_mr *mr_create(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
                                unsigned int access, bool gpu)
{
    int err = mr_check_access(access);
    if (!err && (!pd || len == 0 || (!addr && !gpu)))
        err = EINVAL;
    if (!err && (iova + len < iova || (uintptr_t)addr + len < (uintptr_t)addr))
        err = EINVAL;
    if (!err && !gpu)
        err = host_range_mapped(addr, len);
    if (err) {
        errno = err;
        return NULL;
    }
    struct sn_mr *mr = calloc(1, sizeof(*mr));
    if (!mr) {
        errno = ENOMEM;
        return NULL;
    }
    mr->ibmr.context = pd->context;
    mr->ibmr.pd = pd;
    mr->ibmr.addr = addr;
    mr->ibmr.length = len;
    mr->iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : iova;
    mr->base = addr;
    mr->len = len;
    mr->access = (int)access;
    mr->gpu = gpu;
    if (gpu)
        gpu_prepare(addr);
    return mr_insert(mr);
}

struct ibv_mr *mr_reg_iova2(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
                            unsigned int access)
{
    bool gpu = addr && gpu_is_device_ptr(addr);
    return mr_create(pd, addr, len, iova, access, gpu);
}

struct ibv_mr *mr_reg_dmabuf(struct ibv_pd *pd, uint64_t offset, size_t len, uint64_t iova,
                             int fd, int access)
{
    /* The fd is only validated: the caller's iova is its CUDA address. */
    if (fd < 0 || fcntl(fd, F_GETFD) < 0) {
        errno = EBADF;
        return NULL;
    }
    (void)offset;
    void *addr = (void *)(uintptr_t)iova;
    if (!gpu_is_device_ptr(addr)) {
        errno = EINVAL;
        return NULL;
    }
    struct ibv_mr *mr = mr_create(pd, addr, len, iova, (unsigned int)access, true);
    if (mr)
        ((struct sn_mr *)mr)->dmabuf = true;
    return mr;
}

_Atomic int sn_mr_withdrawing;

int mr_dereg(struct ibv_mr *ibmr)
{
    struct sn_mr *mr = (struct sn_mr *)ibmr;
    uint32_t idx = ibmr->lkey >> 8;
    pthread_rwlock_wrlock(&mr_lock);
    if (idx >= MR_TABLE_SIZE || mr_table[idx] != mr) {
        pthread_rwlock_unlock(&mr_lock);
        return EINVAL;
    }
    atomic_fetch_add(&sn_mr_withdrawing, 1);   /* before the key goes */
    mr_table[idx] = NULL;
    pthread_rwlock_unlock(&mr_lock);
    push_mr_withdraw(mr);   /* returns once no same-host push is under way */
    atomic_fetch_sub(&sn_mr_withdrawing, 1);
    if (mr->shared)
        share_drop(&mr->share);
    /* wait for accesses that started before the key went away; WQEs
     * that pin the region and that their responders executed complete
     * from the notes now, as the application's next poll would */
    while (atomic_load(&mr->refs) > 1) {
        ack_note_settle();
        usleep(50);
    }
    pd_use(ibmr->pd, -1);
    free(mr);
    atomic_fetch_sub(&sn_live_mrs, 1);
    return 0;
}

/* The checks of mr_get; mr_lock held (read), idx in range. */
static int mr_check_locked(uint32_t idx, uint32_t key, struct ibv_pd *pd, int need_access,
                           uint64_t addr, uint64_t len)
{
    struct sn_mr *mr = mr_table[idx];
    if (!mr || mr->ibmr.lkey != key)
        return EINVAL;
    if (pd && mr->ibmr.pd != pd)
        return EPERM;
    if (need_access & ~mr->access)
        return EACCES;
    if (addr < mr->iova || len > mr->len || addr - mr->iova > mr->len - len)
        return ERANGE;
    return 0;
}

int mr_get(uint32_t key, bool remote, struct ibv_pd *pd, int need_access, uint64_t addr,
           uint64_t len, struct sn_mr **out)
{
    (void)remote;
    uint32_t idx = key >> 8;
    if (idx == 0 || idx >= MR_TABLE_SIZE)
        return EINVAL;
    pthread_rwlock_rdlock(&mr_lock);
    int err = mr_check_locked(idx, key, pd, need_access, addr, len);
    struct sn_mr *mr = err ? NULL : mr_table[idx];
    if (mr)
        atomic_fetch_add(&mr->refs, 1);
    pthread_rwlock_unlock(&mr_lock);
    *out = mr;
    return err;
}

enum sn_mem mr_mem_try(uint32_t key, struct ibv_pd *pd, uint64_t addr, uint64_t len)
{
    uint32_t idx = key >> 8;
    if (idx == 0 || idx >= MR_TABLE_SIZE || pthread_rwlock_tryrdlock(&mr_lock))
        return SN_MEM_UNKNOWN;
    enum sn_mem m = mr_check_locked(idx, key, pd, 0, addr, len) ? SN_MEM_UNKNOWN
                    : mr_table[idx]->gpu                       ? SN_MEM_CUDA
                                                               : SN_MEM_HOST;
    pthread_rwlock_unlock(&mr_lock);
    return m;
}

void mr_put(struct sn_mr *mr)
{
    if (mr)
        atomic_fetch_sub(&mr->refs, 1);
}

void sn_store_ascending(void *to, const void *from, size_t len)
{
    char *dst = to;
    const char *src = from;
    size_t i = 0;
    while (i < len && ((uintptr_t)(dst + i) & 7) != 0) {
        __atomic_store_n(dst + i, src[i], __ATOMIC_RELEASE);
        i++;
    }
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, src + i, 8);
        __atomic_store_n((uint64_t *)(void *)(dst + i), w, __ATOMIC_RELEASE);
    }
    for (; i < len; i++)
        __atomic_store_n(dst + i, src[i], __ATOMIC_RELEASE);
}

int mr_write(struct sn_mr *mr, uint64_t addr, const void *src, size_t len)
{
    if (mr->gpu)
        return gpu_copy_to_device(mr_host_ptr(mr, addr), src, len);
    if (len < SN_CMA_MIN_BYTES)
        sn_store_ascending(mr_host_ptr(mr, addr), src, len);
    else
        memcpy(mr_host_ptr(mr, addr), src, len);
    return 0;
}

int mr_read(struct sn_mr *mr, uint64_t addr, void *dst, size_t len)
{
    if (mr->gpu)
        return gpu_copy_from_device(dst, mr_host_ptr(mr, addr), len);
    memcpy(dst, mr_host_ptr(mr, addr), len);
    return 0;
}

/* ibv_rereg_mr, in two steps as on rdma-core: what libibverbs refuses
 * before it asks the device (mr_rereg_input), then the device's own checks
 * and the change (mr_rereg).  A ConnectX answers the first kind with
 * IBV_REREG_MR_ERR_INPUT, the second with IBV_REREG_MR_ERR_CMD; either
 * way softnic leaves the MR as it was.
 *
 * mr_rereg_input: only a plain registration (not a dmabuf one), known
 * flags, an address and a length with a new translation, a PD with a new
 * PD, access flags only with IBV_REREG_MR_CHANGE_ACCESS.  0 or EINVAL. */
int mr_rereg_input(struct ibv_mr *ibmr, int flags, struct ibv_pd *pd, void *addr, size_t len,
                   int access)
{
    const int known = IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD |
                      IBV_REREG_MR_CHANGE_ACCESS;
    if (!ibmr || ((struct sn_mr *)ibmr)->dmabuf || (flags & ~known))
        return EINVAL;
    if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!addr || len == 0))
        return EINVAL;
    if ((flags & IBV_REREG_MR_CHANGE_PD) && !pd)
        return EINVAL;
    if (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))
        return EINVAL;
    return 0;
}

/* mr_rereg: changes the translation (addr, len), the PD and/or the access
 * of a live MR in place; its keys stay (mlx5 keeps them where it can, and
 * the verbs contract lets a provider keep them).  The write lock keeps new
 * accesses out while the fields change, and in-flight ones (which hold a
 * reference, not the lock) are waited for first -- with the lock let go
 * between looks, since one of them may need the table to finish -- so
 * none sees a half-changed region: what was under way completes on the
 * old translation, PD and access, what comes after sees the new ones.
 * Input passed mr_rereg_input.  Returns 0 or an errno. */
int mr_rereg(struct ibv_mr *ibmr, int flags, struct ibv_pd *pd, void *addr, size_t len,
             int access)
{
    struct sn_mr *mr = (struct sn_mr *)ibmr;
    if (!flags)
        return EINVAL;
    if ((flags & IBV_REREG_MR_CHANGE_PD) && pd->context != ibmr->context)
        return EINVAL;
    if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) &&
        (uint64_t)(uintptr_t)addr + len < (uint64_t)(uintptr_t)addr)
        return EINVAL;
    if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
        int err = mr_check_access((unsigned int)access);
        if (err)
            return err;
    }
    bool gpu = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? gpu_is_device_ptr(addr) : mr->gpu;
    if (!gpu && (flags & IBV_REREG_MR_CHANGE_TRANSLATION) && host_range_mapped(addr, len))
        return EFAULT;
    if (gpu && (flags & IBV_REREG_MR_CHANGE_TRANSLATION))
        gpu_prepare(addr);
    uint32_t idx = ibmr->lkey >> 8;
    for (;;) {
        pthread_rwlock_wrlock(&mr_lock);
        if (idx >= MR_TABLE_SIZE || mr_table[idx] != mr) {
            pthread_rwlock_unlock(&mr_lock);
            return EINVAL;
        }
        if (atomic_load(&mr->refs) <= 1)
            break;
        /* not waited for with the table held: a holder may need another
         * key first (a batch over several MRs, the responder in this
         * process placing the pulled WQE that pins this MR) */
        pthread_rwlock_unlock(&mr_lock);
        usleep(50);
    }
    struct ibv_pd *old_pd = ibmr->pd;
    push_mr_withdraw(mr);   /* same-host pushers see the new region or none */
    if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
        if (mr->shared) {   /* the new memory is looked at again when published */
            share_drop(&mr->share);
            mr->shared = false;
        }
        ibmr->addr = addr;
        ibmr->length = len;
        mr->base = addr;
        mr->len = len;
        mr->gpu = gpu;
        mr->iova = (uint64_t)(uintptr_t)addr;   /* a new translation: iova = addr */
    }
    if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
        if ((mr->access & IBV_ACCESS_ZERO_BASED) && !(access & IBV_ACCESS_ZERO_BASED))
            mr->iova = (uint64_t)(uintptr_t)ibmr->addr;
        mr->access = access;
    }
    if (mr->access & IBV_ACCESS_ZERO_BASED)
        mr->iova = 0;
    if (flags & IBV_REREG_MR_CHANGE_PD)
        ibmr->pd = pd;
    push_mr_publish(mr);
    pthread_rwlock_unlock(&mr_lock);
    if (ibmr->pd != old_pd) {
        pd_use(pd, 1);
        pd_use(old_pd, -1);
    }
    return 0;
}
