/* push_forge.c: see push_forge.h. */
#include "push_forge.h"
#include "tests/proc_self.h"

#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

/* slots go lowest first: a test process's QPs hold the first few */
#define SCAN_SLOTS 64u

struct push_region *push_forge_map(size_t *len)
{
    int fd = proc_self_fd_to("/memfd:softnic-push");
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(struct push_region))
        return NULL;
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return NULL;
    struct push_region *r = m;
    *len = (size_t)st.st_size;
    if (r->magic == PUSH_MAGIC && r->version == PUSH_VERSION)
        return r;
    munmap(m, *len);
    return NULL;
}

bool push_forge_find_shown(struct push_region *r, uint64_t addr, uint32_t lkey, struct push_qp **slot, uint32_t *k)
{
    for (uint32_t i = 0; i < SCAN_SLOTS; i++)
        for (uint32_t j = 0; j < PUSH_RECS; j++) {
            struct push_rwqe *e = &r->qp[i].rwqe[j];
            if (atomic_load(&e->seq) && atomic_load(&e->addr) == addr && atomic_load(&e->lkey) == lkey) {
                *slot = &r->qp[i];
                *k = j;
                return true;
            }
        }
    return false;
}

uint64_t push_forge_index(const struct push_qp *s, uint32_t k)
{
    return (atomic_load(&s->rwqe[k].seq) & TAG_COUNT) - 1;
}

void push_forge_record(struct push_qp *s, uint32_t k, uint32_t op, uint32_t key, uint64_t addr)
{
    struct push_rec *rec = &s->rec[k];
    uint64_t seq = atomic_load(&s->rwqe[k].seq);
    rec->op = op;
    rec->len = 8;
    rec->rkey = key;
    rec->raddr = addr;
    rec->imm = 0;
    rec->solicited = 0;
    memset(rec->data, 0x5a, 8);
    atomic_store(&rec->landed, REC_WAITING);
    atomic_store(&rec->seq, seq);
}
