/* tools/common/mem.h: test buffers in host or GPU memory, registered with
 * the NIC the way the plugin registers them.
 *
 * Contract: mem_alloc_reg() allocates `len` bytes (host: page-aligned and
 * zeroed; CUDA: cuMemAlloc on the given GPU, rounded up to 2 MiB so a dmabuf
 * covers whole pages) and registers them with local write, remote write and
 * remote read access, plus IBV_ACCESS_RELAXED_ORDERING when `relaxed`.
 * Registration paths: host memory uses ibv_reg_mr(_iova2); CUDA memory uses
 * dmabuf (cuMemGetHandleForAddressRange + ibv_reg_dmabuf_mr) or peer memory
 * (ibv_reg_mr on the device pointer, needs nvidia_peermem); MEM_REG_AUTO
 * tries dmabuf, then peer memory. `path` tells which one was used. */
#ifndef RAILNET_TOOLS_MEM_H
#define RAILNET_TOOLS_MEM_H

#include <stddef.h>

#include "cuda_dl.h"
#include "rc.h"

enum mem_kind { MEM_HOST, MEM_CUDA };
enum mem_reg { MEM_REG_AUTO, MEM_REG_PLAIN, MEM_REG_DMABUF, MEM_REG_PEERMEM };

struct mem_buf {
    enum mem_kind kind;
    enum mem_reg path;
    int relaxed;      /* requested and passed to the library */
    int ro_dropped;   /* requested but this rdma-core cannot pass it */
    void *ptr;
    size_t len;       /* usable bytes */
    size_t alloc_len;
    struct ibv_mr *mr;
    struct cuda_dl *cuda;
};

int mem_alloc_reg(struct mem_buf *b, struct rc_dev *d, struct cuda_dl *cuda, int gpu,
                  enum mem_kind kind, enum mem_reg path, int relaxed, size_t len, char *err,
                  size_t errlen);
void mem_free(struct mem_buf *b, struct rc_dev *d);
/* Fills the buffer with a byte value (host memset or cuMemsetD8). */
int mem_fill(struct mem_buf *b, unsigned char val);
const char *mem_reg_name(enum mem_reg path);
const char *mem_kind_name(enum mem_kind kind);

#endif
