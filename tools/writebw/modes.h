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

#endif
