/* tools/writebw/modes.h: the two ways railnet-write-bw moves data.
 *
 * Contract: each runs the whole test over an established session (HELLO
 * already agreed): sets up its side, exchanges what the peer needs, fills
 * the report's header fields, prints the header, runs session_sizes() and
 * session_done(), and tears down. 0 on success, -1 with err filled (the
 * peer has been told). */
#ifndef RAILNET_TOOLS_WRITEBW_MODES_H
#define RAILNET_TOOLS_WRITEBW_MODES_H

#include <stddef.h>

#include "session.h"

/* Raw verbs: RC QPs (o->qps per port over o->ports), RDMA WRITE into the
 * peer's buffer, completions polled by bw_run_writes(). */
int mode_verbs_run(struct session *s, char *err, size_t errlen);
/* Before any connection (a server would otherwise wait for a client only
 * to fail then): the verbs library loads, the device and its ports exist
 * with the GID index asked for, and with --use_cuda the CUDA driver has
 * the GPU asked for (and VMM for --cuda_vmm), by the same calls the run
 * makes; the device is closed again, the libraries stay loaded. 0, or -1
 * with err. */
int mode_verbs_check(const struct wb_opts *o, char *err, size_t errlen);
/* The same for --mode=plugin: the plugin loads (plugin_load's search). */
int mode_plugin_check(const struct wb_opts *o, char *err, size_t errlen);

/* railnet's plugin through its ncclNet_v8_t table: the client isends, the
 * server irecvs (both ways with --bidir), registrations through regMr /
 * regMrDmaBuf. */
int mode_plugin_run(struct session *s, char *err, size_t errlen);

/* --gpu-initiated: writes posted by a CUDA kernel (plugin/gdaki). The slot is
 * filled by whichever file the build links: gpu_initiated.c when configure
 * found nvcc (wb_gpu_initiated_built 1: plugin/gdaki's halves, the client's
 * writes through gdaki_bw_write_size(), the test run like the other modes:
 * header, session_sizes(), session_done()), else gpu_initiated_none.c,
 * which says "not built" (wb_gpu_initiated_built 0, and opts.c refuses the
 * option before any connection). */
extern const int wb_gpu_initiated_built;
int mode_gpu_initiated_run(struct session *s, char *err, size_t errlen);

#endif
