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

/* railnet's plugin through its ncclNet_v8_t table: the client isends, the
 * server irecvs (both ways with --bidir), registrations through regMr /
 * regMrDmaBuf. */
int mode_plugin_run(struct session *s, char *err, size_t errlen);

/* --gpu-initiated: writes posted by a CUDA kernel (issue 7). The slot is
 * filled by whichever file the build links: gpu_initiated_none.c says "not
 * built" (wb_gpu_initiated_built 0, and opts.c refuses the option before
 * any connection); a real implementation sets it to 1 and runs the test
 * like the other modes (header, session_sizes(), session_done()). */
extern const int wb_gpu_initiated_built;
int mode_gpu_initiated_run(struct session *s, char *err, size_t errlen);

#endif
