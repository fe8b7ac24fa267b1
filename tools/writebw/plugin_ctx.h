/* tools/writebw/plugin_ctx.h: the state --mode=plugin shares between its
 * setup (plugin.c: load, device, buffer, connect, register, teardown) and
 * its data loop (plugin_xfer.c: isend/irecv windows, end of a size). */
#ifndef RAILNET_TOOLS_WRITEBW_PLUGIN_CTX_H
#define RAILNET_TOOLS_WRITEBW_PLUGIN_CTX_H

#include <stddef.h>

#include "../common/cuda_dl.h"
#include "plugin_load.h"
#include "session.h"

#define WINDOW_MAX 16

struct pcomm {
    void *comm;
    void *mh;
    void *req[WINDOW_MAX];
    long posted, done;
};

struct plugin_ctx {
    struct session *s;
    struct plugin_lib lib;
    ncclNet_v8_t *net;
    int dev;
    ncclNetProperties_v8_t props;
    void *listen;
    struct pcomm send, recv;
    int want_send, want_recv;
    void *buf;
    size_t len;
    int cuda_mem;
    struct cuda_dl *cuda;
    char reg_path[32];
    int window;
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
