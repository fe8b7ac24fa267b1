/* tools/writebw/plugin_ctx.h: the state --mode=plugin shares between its
 * setup (plugin.c: load, device, buffer, connect, register, teardown) and
 * its data loop (plugin_xfer.c: isend/irecv windows, end of a size). */
#ifndef RAILNET_TOOLS_WRITEBW_PLUGIN_CTX_H
#define RAILNET_TOOLS_WRITEBW_PLUGIN_CTX_H

#include <stddef.h>

#include "../common/cuda_dl.h"
#include "plugin_load.h"
#include "session.h"

/* Requests in flight per comm: well under NCCL_NET_MAX_REQUESTS (32), as
 * NCCL's proxy keeps a handful per channel. */
#define WINDOW_MAX 16

/* One comm (send or receive) and its ring of outstanding requests: request
 * k lives in req[k % window]; requests complete in order. */
struct pcomm {
    void *comm;
    void *mh;                 /* the buffer's registration on this comm */
    void *req[WINDOW_MAX];
    long posted, done;        /* requests posted / completed this size */
};

struct plugin_ctx {
    struct session *s;
    struct plugin_lib lib;
    const ncclNet_v8_t *net;
    int dev;
    ncclNetProperties_v8_t props;
    void *listen;
    struct pcomm send, recv;
    int want_send, want_recv; /* client sends, server receives; --bidir: both */
    void *buf;                /* one buffer of the largest size, both ways */
    size_t len;
    int cuda_mem;
    struct cuda_dl *cuda;
    char reg_path[32];        /* "regMr(host)", "regMrDmaBuf(cuda)" ... */
    int window;               /* min(-t, WINDOW_MAX) */
};

/* Calls a plugin function; a result other than ncclSuccess fills err and
 * returns -1 from the calling function. */
#define NET_CHECK(call, what)                                                              \
    do {                                                                                   \
        ncclResult_t r_ = (call);                                                          \
        if (r_ != ncclSuccess) {                                                           \
            str_fmt(err, errlen, "plugin %s failed: ncclResult %d", what, (int)r_);        \
            return -1;                                                                     \
        }                                                                                  \
    } while (0)

/* One size through the plugin (a session_run_fn, see session.h). */
int plugin_run_size(void *ctx, size_t size, struct wb_result *res, char *err, size_t errlen);

#endif
