/* tools/common/cuda_dl_none.c: cuda_dl.h when configure found no CUDA
 * headers: every GPU request fails with the reason. */
#include "config.h"

#include "strfmt.h"
#include "cuda_dl.h"

#include <stdio.h>

struct cuda_dl *cuda_dl_open(char *err, size_t errlen)
{
    str_fmt(err, errlen, "built without CUDA (configure found no cuda.h; see --with-cuda)");
    return NULL;
}

void cuda_dl_close(struct cuda_dl *c) { (void)c; }
int cuda_dl_device_count(struct cuda_dl *c) { (void)c; return 0; }
int cuda_dl_pci_bus_id(struct cuda_dl *c, int dev, char *buf, size_t len)
{
    (void)c; (void)dev; (void)buf; (void)len;
    return -1;
}
int cuda_dl_dmabuf_supported(struct cuda_dl *c, int dev) { (void)c; (void)dev; return -1; }
int cuda_dl_driver_version(struct cuda_dl *c) { (void)c; return 0; }
int cuda_dl_alloc(struct cuda_dl *c, int dev, size_t len, void **ptr, char *err, size_t errlen)
{
    (void)c; (void)dev; (void)len; (void)ptr;
    str_fmt(err, errlen, "built without CUDA");
    return -1;
}
void cuda_dl_free(struct cuda_dl *c, void *ptr) { (void)c; (void)ptr; }
int cuda_dl_use_vmm(struct cuda_dl *c, char *err, size_t errlen)
{
    (void)c;
    str_fmt(err, errlen, "built without CUDA");
    return -1;
}
int cuda_dl_memset(struct cuda_dl *c, void *ptr, unsigned char val, size_t len)
{
    (void)c; (void)ptr; (void)val; (void)len;
    return -1;
}
int cuda_dl_copy_to_host(struct cuda_dl *c, void *dst, const void *src, size_t len)
{
    (void)c; (void)dst; (void)src; (void)len;
    return -1;
}
int cuda_dl_dmabuf_fd(struct cuda_dl *c, void *ptr, size_t len, int *fd, char *err, size_t errlen)
{
    (void)c; (void)ptr; (void)len; (void)fd;
    str_fmt(err, errlen, "built without CUDA");
    return -1;
}
