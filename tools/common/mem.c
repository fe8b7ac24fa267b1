/* tools/common/mem.c: host and GPU test buffers and their registration
 * (see mem.h). */
#include "config.h"

#include "strfmt.h"
#include "mem.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GPU_ALIGN (2u << 20)

const char *mem_reg_name(enum mem_reg path)
{
    switch (path) {
    case MEM_REG_AUTO: return "auto";
    case MEM_REG_PLAIN: return "ibv_reg_mr";
    case MEM_REG_DMABUF: return "dmabuf";
    case MEM_REG_PEERMEM: return "peermem";
    }
    return "?";
}

const char *mem_kind_name(enum mem_kind kind)
{
    return kind == MEM_CUDA ? "cuda" : "host";
}

static int access_flags(int relaxed)
{
    return IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
           (relaxed ? IBV_ACCESS_RELAXED_ORDERING : 0);
}

static int reg_dmabuf(struct mem_buf *b, struct rc_dev *d, char *err, size_t errlen)
{
    if (!d->v->reg_dmabuf_mr) {
        str_fmt(err, errlen, "%s lacks ibv_reg_dmabuf_mr@IBVERBS_1.12 (rdma-core < 34)",
                 d->v->path);
        return -1;
    }
    int fd = -1;
    if (cuda_dl_dmabuf_fd(b->cuda, b->ptr, b->alloc_len, &fd, err, errlen))
        return -1;
    b->mr = d->v->reg_dmabuf_mr(d->pd, 0, b->alloc_len, (uint64_t)(uintptr_t)b->ptr, fd,
                                access_flags(b->relaxed));
    int e = errno;
    close(fd); /* the MR holds its own reference to the dmabuf */
    if (!b->mr) {
        str_fmt(err, errlen, "ibv_reg_dmabuf_mr(%zu bytes%s) failed: %s", b->alloc_len,
                 b->relaxed ? ", relaxed ordering" : "", strerror(e));
        return -1;
    }
    b->path = MEM_REG_DMABUF;
    return 0;
}

static int reg_plain(struct mem_buf *b, struct rc_dev *d, enum mem_reg path, char *err,
                     size_t errlen)
{
    b->mr = ibvwrap_reg_mr(d->v, d->pd, b->ptr, b->alloc_len, access_flags(b->relaxed),
                            &b->ro_dropped);
    if (!b->mr) {
        int e = errno;
        str_fmt(err, errlen, "ibv_reg_mr(%s memory, %zu bytes%s) failed: %s%s",
                 mem_kind_name(b->kind), b->alloc_len, b->relaxed ? ", relaxed ordering" : "",
                 strerror(e), b->kind == MEM_CUDA ? " (is nvidia_peermem loaded?)" : "");
        return -1;
    }
    if (b->ro_dropped)
        b->relaxed = 0;
    b->path = path;
    return 0;
}

int mem_alloc_reg(struct mem_buf *b, struct rc_dev *d, struct cuda_dl *cuda, int gpu,
                  enum mem_kind kind, enum mem_reg path, int relaxed, size_t len, char *err,
                  size_t errlen)
{
    memset(b, 0, sizeof(*b));
    b->kind = kind;
    b->relaxed = relaxed;
    b->len = len;
    b->cuda = cuda;
    if (kind == MEM_HOST) {
        long page = sysconf(_SC_PAGESIZE);
        b->alloc_len = (len + (size_t)page - 1) / (size_t)page * (size_t)page;
        if (posix_memalign(&b->ptr, (size_t)page, b->alloc_len)) {
            b->ptr = NULL;
            str_fmt(err, errlen, "cannot allocate %zu bytes of host memory", b->alloc_len);
            return -1;
        }
        memset(b->ptr, 0, b->alloc_len);
        if (path != MEM_REG_AUTO && path != MEM_REG_PLAIN) {
            str_fmt(err, errlen, "%s registration applies to GPU memory only", mem_reg_name(path));
            mem_free(b, d);
            return -1;
        }
        if (reg_plain(b, d, MEM_REG_PLAIN, err, errlen)) {
            mem_free(b, d);
            return -1;
        }
        return 0;
    }
    if (!cuda) {
        str_fmt(err, errlen, "GPU memory requested but the CUDA driver is not loaded");
        return -1;
    }
    b->alloc_len = (len + GPU_ALIGN - 1) / GPU_ALIGN * GPU_ALIGN;
    if (cuda_dl_alloc(cuda, gpu, b->alloc_len, &b->ptr, err, errlen))
        return -1;
    cuda_dl_memset(cuda, b->ptr, 0, b->alloc_len);
    int rc;
    if (path == MEM_REG_DMABUF) {
        rc = reg_dmabuf(b, d, err, errlen);
    } else if (path == MEM_REG_PEERMEM || path == MEM_REG_PLAIN) {
        rc = reg_plain(b, d, MEM_REG_PEERMEM, err, errlen);
    } else {
        char first[512];
        rc = reg_dmabuf(b, d, first, sizeof(first));
        if (rc) {
            rc = reg_plain(b, d, MEM_REG_PEERMEM, err, errlen);
            if (rc) {
                char both[1024];
                str_fmt(both, sizeof(both), "dmabuf: %s; peer memory: %s", first, err);
                str_fmt(err, errlen, "%s", both);
            }
        }
    }
    if (rc) {
        mem_free(b, d);
        return -1;
    }
    return 0;
}

int mem_fill(struct mem_buf *b, unsigned char val)
{
    if (b->kind == MEM_HOST) {
        memset(b->ptr, val, b->alloc_len);
        return 0;
    }
    return cuda_dl_memset(b->cuda, b->ptr, val, b->alloc_len);
}

void mem_free(struct mem_buf *b, struct rc_dev *d)
{
    if (b->mr)
        d->v->dereg_mr(b->mr);
    if (b->ptr) {
        if (b->kind == MEM_HOST)
            free(b->ptr);
        else
            cuda_dl_free(b->cuda, b->ptr);
    }
    b->mr = NULL;
    b->ptr = NULL;
}
