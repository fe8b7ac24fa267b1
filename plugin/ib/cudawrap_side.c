/* plugin/ib/cudawrap_side.c: copies from a side context (cudawrap.h states
 * the contract). Like cudawrap.c it needs no CUDA header: the few
 * constants it passes are the driver ABI's (facts of cuda.h). */
#include "cudawrap.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CUDA_SUCCESS 0
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_READY 600
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_MEMHOSTREGISTER_PORTABLE 0x1

#define SIDE_GPUS 64
#define SIDE_BOUNCE (1u << 20)

struct side {
    int tried;
    int late;               /* a copy did not land in time: the bounce buffer may still be written */
    char why[160];          /* why there is no side context */
    cudawrap_ctx ctx;
    cudawrap_stream stream; /* made with bounce, on the first copy */
    void *bounce;           /* SIDE_BOUNCE bytes, pinned */
    pthread_mutex_t mu;     /* one copy at a time per GPU */
};

static struct side sides[SIDE_GPUS];
static pthread_mutex_t sides_mu = PTHREAD_MUTEX_INITIALIZER;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* Makes sides[ordinal]'s context once; the caller holds sides_mu. */
static void side_make_ctx(const struct cudawrap *cu, int ordinal, struct side *s)
{
    s->tried = 1;
    pthread_mutex_init(&s->mu, NULL);
    cudawrap_device dev;
    cudawrap_result r;
    if ((r = cu->device_get(&dev, ordinal)) != CUDA_SUCCESS) {
        snprintf(s->why, sizeof(s->why), "cuDeviceGet(%d): %s", ordinal, cudawrap_error_string(r));
        return;
    }
    if (!cu->ctx_create) {
        snprintf(s->why, sizeof(s->why), "the CUDA driver has no cuCtxCreate_v4");
        return;
    }
    cudawrap_ctx prev = NULL;
    if (cu->ctx_get_current(&prev) != CUDA_SUCCESS)
        prev = NULL;
    /* CUctxCreateParams, all zero: no execution affinity, no CIG */
    struct { void *exec_affinity; int n_exec_affinity; void *cig; } params = { 0 };
    r = cu->ctx_create(&s->ctx, &params, 0, dev);  /* makes it current */
    cu->ctx_set_current(prev);
    if (r != CUDA_SUCCESS) {
        s->ctx = NULL;
        snprintf(s->why, sizeof(s->why), "cuCtxCreate on GPU %d: %s", ordinal, cudawrap_error_string(r));
    }
}

/* The stream and bounce buffer of a side context, once; the caller holds
 * s->mu. A half-made pair stays: destroying a stream is a device sync. */
static int side_make_copier(const struct cudawrap *cu, struct side *s, char *err, size_t errlen)
{
    if (s->bounce)
        return 0;
    if (s->why[0] && !s->ctx) {
        snprintf(err, errlen, "no side context: %s", s->why);
        return -1;
    }
    cudawrap_ctx prev = NULL;
    if (cu->ctx_get_current(&prev) != CUDA_SUCCESS)
        prev = NULL;
    const char *step = "cuCtxSetCurrent";
    cudawrap_result r = cu->ctx_set_current(s->ctx);
    if (r == CUDA_SUCCESS && !s->stream) {
        step = "cuStreamCreate";
        r = cu->stream_create(&s->stream, CU_STREAM_NON_BLOCKING);
    }
    void *b = NULL;
    if (r == CUDA_SUCCESS) {
        step = "cuMemHostRegister";
        b = aligned_alloc(4096, SIDE_BOUNCE);
        r = b ? cu->mem_host_register(b, SIDE_BOUNCE, CU_MEMHOSTREGISTER_PORTABLE) : CUDA_ERROR_OUT_OF_MEMORY;
    }
    cu->ctx_set_current(prev);
    if (r != CUDA_SUCCESS) {
        free(b);
        snprintf(err, errlen, "side context: %s: %s", step, cudawrap_error_string(r));
        return -1;
    }
    s->bounce = b;
    return 0;
}

/* sides[ordinal] with its context made (NULL with err when there is none). */
static struct side *side_get(const struct cudawrap *cu, int ordinal, char *err, size_t errlen)
{
    if (!cu || ordinal < 0 || ordinal >= SIDE_GPUS) {
        snprintf(err, errlen, "no side context for GPU %d", ordinal);
        return NULL;
    }
    struct side *s = &sides[ordinal];
    pthread_mutex_lock(&sides_mu);
    if (!s->tried)
        side_make_ctx(cu, ordinal, s);
    pthread_mutex_unlock(&sides_mu);
    if (!s->ctx) {
        snprintf(err, errlen, "no side context: %s", s->why);
        return NULL;
    }
    return s;
}

cudawrap_ctx cudawrap_side_ctx(const struct cudawrap *cu, int ordinal, char *err, size_t errlen)
{
    struct side *s = side_get(cu, ordinal, err, errlen);
    return s ? s->ctx : NULL;
}

/* Waits for the side stream until deadline: 0, -1 (failed) or LATE. */
static int side_wait(const struct cudawrap *cu, struct side *s, double deadline, char *err, size_t errlen)
{
    for (;;) {
        cudawrap_result r = cu->stream_query(s->stream);
        if (r == CUDA_SUCCESS)
            return 0;
        if (r != CUDA_ERROR_NOT_READY) {
            snprintf(err, errlen, "cuStreamQuery: %s", cudawrap_error_string(r));
            return -1;
        }
        if (now_ms() > deadline) {
            s->late = 1;
            snprintf(err, errlen, "a side copy did not land within its time");
            return CUDAWRAP_SIDE_LATE;
        }
        struct timespec ts = { 0, 50000 };
        nanosleep(&ts, NULL);
    }
}

int cudawrap_side_copy(const struct cudawrap *cu, int ordinal, cudawrap_devptr d, void *h, size_t len, int to_device,
                       int timeout_ms, char *err, size_t errlen)
{
    struct side *s = side_get(cu, ordinal, err, errlen);
    if (!s)
        return -1;
    pthread_mutex_lock(&s->mu);
    int rc = side_make_copier(cu, s, err, errlen);
    if (!rc && s->late) {
        snprintf(err, errlen, "an earlier side copy on GPU %d never landed", ordinal);
        rc = -1;
    }
    cudawrap_ctx prev = NULL;
    if (cu->ctx_get_current(&prev) != CUDA_SUCCESS)
        prev = NULL;
    if (!rc && cu->ctx_set_current(s->ctx) != CUDA_SUCCESS) {
        snprintf(err, errlen, "cuCtxSetCurrent(side context of GPU %d) failed", ordinal);
        rc = -1;
    }
    double deadline = now_ms() + timeout_ms;
    for (size_t off = 0; !rc && off < len; off += SIDE_BOUNCE) {
        size_t n = len - off < SIDE_BOUNCE ? len - off : SIDE_BOUNCE;
        cudawrap_result r;
        if (to_device) {
            memcpy(s->bounce, (uint8_t *)h + off, n);
            r = cu->memcpy_htod_async(d + off, s->bounce, n, s->stream);
        } else {
            r = cu->memcpy_dtoh_async(s->bounce, d + off, n, s->stream);
        }
        if (r != CUDA_SUCCESS) {
            snprintf(err, errlen, "%s of %zu bytes: %s", to_device ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync", n,
                     cudawrap_error_string(r));
            rc = -1;
        } else if ((rc = side_wait(cu, s, deadline, err, errlen)) == 0 && !to_device) {
            memcpy((uint8_t *)h + off, s->bounce, n);
        }
    }
    cu->ctx_set_current(prev);
    pthread_mutex_unlock(&s->mu);
    return rc;
}
