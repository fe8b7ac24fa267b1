/* mlx5_priv.c: softnic's private API (SOFTNIC_PRIVATE_1.0 in softnic's
 * libibverbs.so.1), looked up at run time with dlvsym so that this
 * libmlx5 loads -- and fails cleanly with EOPNOTSUPP -- next to any
 * libibverbs, and builds without softnic's library being built first. */
#include "mlx5_nic.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#define PRIV_VERSION "SOFTNIC_PRIVATE_1.0"

static struct {
    pthread_once_t once;
    int err;
    bool (*is_softnic)(struct ibv_context *);
    int (*set_destroy_hook)(void (*)(struct ibv_qp *), void (*)(struct ibv_cq *));
    bool (*gpu_is_device_ptr)(const void *);
    int (*gpu_read)(void *, const void *, size_t);
    int (*gpu_write)(void *, const void *, size_t);
    void (*thread_is_nic)(bool);
    int (*qp_poll_acks)(struct ibv_qp *);
    uint32_t max_wqe_sz_sq;
    void (*debug)(const char *, int, const char *);
} priv = { .once = PTHREAD_ONCE_INIT };

/* The libibverbs this library was linked against (DT_NEEDED), found by
 * soname: a program that dlopens libibverbs and libmlx5 RTLD_LOCAL (the
 * plugin's ibvwrap does) keeps both out of the global scope, where
 * RTLD_DEFAULT would not find them. */
static void *sym(const char *name)
{
    void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *p = dlvsym(h ? h : RTLD_DEFAULT, name, PRIV_VERSION);
    if (h)
        dlclose(h);     /* drops only the reference NOLOAD took */
    return p;
}

static void priv_load(void)
{
    priv.is_softnic = (bool (*)(struct ibv_context *))sym("softnic_priv_is_softnic");
    priv.set_destroy_hook = (int (*)(void (*)(struct ibv_qp *), void (*)(struct ibv_cq *)))
        sym("softnic_priv_set_destroy_hook");
    priv.gpu_is_device_ptr = (bool (*)(const void *))sym("softnic_priv_gpu_is_device_ptr");
    priv.gpu_read = (int (*)(void *, const void *, size_t))sym("softnic_priv_gpu_read");
    priv.gpu_write = (int (*)(void *, const void *, size_t))sym("softnic_priv_gpu_write");
    /* optional: without it the NIC thread leaves CUDA payloads to the
     * requester threads, as before it existed */
    priv.thread_is_nic = (void (*)(bool))sym("softnic_priv_thread_is_nic");
    /* optional: without it completers sleep until an ACK comes */
    priv.qp_poll_acks = (int (*)(struct ibv_qp *))sym("softnic_priv_qp_poll_acks");
    /* optional: without it the NIC states no largest WQE */
    uint32_t (*max_sq)(void) = (uint32_t (*)(void))sym("softnic_priv_max_wqe_sz_sq");
    priv.max_wqe_sz_sq = max_sq ? max_sq() : 0;
    /* optional: without it the NIC's debug lines are dropped */
    priv.debug = (void (*)(const char *, int, const char *))sym("softnic_priv_debug");
    if (!priv.is_softnic || !priv.set_destroy_hook || !priv.gpu_is_device_ptr || !priv.gpu_read ||
        !priv.gpu_write) {
        priv.err = EOPNOTSUPP;
        return;
    }
    priv.err = priv.set_destroy_hook(mlx5_nic_qp_gone, mlx5_nic_cq_gone);
}

int mlx5_priv_init(void)
{
    pthread_once(&priv.once, priv_load);
    return priv.err;
}

bool mlx5_priv_is_softnic(struct ibv_context *ctx)
{
    return mlx5_priv_init() == 0 && ctx && priv.is_softnic(ctx);
}

bool mlx5_priv_gpu_is_device_ptr(const void *p)
{
    return mlx5_priv_init() == 0 && priv.gpu_is_device_ptr(p);
}

int mlx5_priv_gpu_read(void *dst, const void *gpu_src, size_t len)
{
    return mlx5_priv_init() == 0 ? priv.gpu_read(dst, gpu_src, len) : EOPNOTSUPP;
}

int mlx5_priv_gpu_write(void *gpu_dst, const void *src, size_t len)
{
    return mlx5_priv_init() == 0 ? priv.gpu_write(gpu_dst, src, len) : EOPNOTSUPP;
}

uint32_t mlx5_priv_max_wqe_sz_sq(void)
{
    return mlx5_priv_init() == 0 ? priv.max_wqe_sz_sq : 0;
}

void mlx5_priv_thread_is_nic(bool on)
{
    if (mlx5_priv_init() == 0 && priv.thread_is_nic)
        priv.thread_is_nic(on);
}

void mlx5_priv_qp_poll_acks(struct ibv_qp *qp)
{
    if (mlx5_priv_init() == 0 && priv.qp_poll_acks)
        (void)priv.qp_poll_acks(qp);
}

void mlx5_priv_debug(const char *file, int line, const char *fmt, ...)
{
    if (mlx5_priv_init() != 0 || !priv.debug)
        return;
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    priv.debug(file, line, buf);
}
