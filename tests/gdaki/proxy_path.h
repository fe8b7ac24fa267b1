/* tests/gdaki/proxy_path.h: the CPU-proxy half of bench_gdaki_vs_proxy --
 * RDMA writes of small messages through the plugin's isend/irecv, driven
 * the way NCCL's proxy drives a net plugin.
 *
 * Contract:
 * - proxy_path_open loads the plugin by path with dlopen (RTLD_LOCAL, as
 *   NCCL does), calls ncclNetPlugin_v8's init with a logger, checks that
 *   device dev exists (and supports CUDA pointers when ptr_type is
 *   NCCL_PTR_CUDA), then connects a send comm to a recv comm of this
 *   process on that device (listen, then connect and accept polled until
 *   both exist) and registers src on the send comm and dst on the recv
 *   comm with regMr(ptr_type), slots * PATH_SLOT bytes each.  The device and port are the plugin's
 *   choice: pin them with RAILNET_HCA before the call.
 * - A phase runs two threads, like two ranks' proxy threads: the receiver
 *   (a thread of its own, thread_init called first on it) keeps up to
 *   the phase's window of irecvs posted ahead, tests them in order, checks each completed
 *   size and, for CUDA buffers, issues iflush and tests it before the
 *   receive counts as done (NCCL does the same for GPU-direct receives);
 *   the sender (the calling thread) posts isends and tests them.  Message
 *   i goes from slot i % window of src to slot i % window of dst
 *   (path_result.h); window is the rate phase's (1..slots), or slots in
 *   a latency phase.  Every message has the same tag.
 * - proxy_path_rate: n messages, at most window isends in flight; the
 *   time runs from the sender's start (once the receiver has posted its
 *   first receives) to the later of the last isend and the last irecv
 *   completing.  proxy_path_lat: n messages one at a time; lat_us[i] is
 *   the time from the first isend call of message i to the test that
 *   reports it done (the plugin completes a send once its RDMA WRITE WITH
 *   IMM -- payload and the receiver's notification in one -- has been
 *   acknowledged, i.e. is in the receiver's memory).
 * - Functions return 0, or -1 with the reason in err (a plugin call that
 *   failed, a wrong completion size, the deadline of timeout_s seconds
 *   per phase).  After an error the connection is not reusable: close. */
#ifndef RAILNET_TESTS_GDAKI_PROXY_PATH_H
#define RAILNET_TESTS_GDAKI_PROXY_PATH_H

#include <stddef.h>

struct proxy_path_opts {
    const char *plugin;        /* path to libnccl-net-railnet.so */
    int dev;                   /* the plugin's device index */
    int ptr_type;              /* NCCL_PTR_HOST or NCCL_PTR_CUDA */
    void *src, *dst;           /* slots * PATH_SLOT bytes each */
    int slots;                 /* 1..PATH_MAX_WINDOW */
    double timeout_s;          /* per phase (<= 0: 60) */
    int verbose;               /* the plugin's INFO lines to stderr (WARN always) */
    void (*thread_init)(void *arg);  /* NULL, or run first on the receiver thread */
    void *thread_arg;
};

struct proxy_path;

int proxy_path_open(const struct proxy_path_opts *o, struct proxy_path **out, char *err, size_t errlen);

/* "name, port N, SPEED Mb/s" of the plugin device in use. */
const char *proxy_path_describe(const struct proxy_path *p);

int proxy_path_rate(struct proxy_path *p, size_t size, long n, int window, double *rate_mps, char *err,
                    size_t errlen);
int proxy_path_lat(struct proxy_path *p, size_t size, long n, double *lat_us, char *err, size_t errlen);

void proxy_path_close(struct proxy_path *p);

#endif
