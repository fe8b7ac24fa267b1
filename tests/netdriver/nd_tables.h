/* tests/netdriver/nd_tables.h: which of the plugin's net tables the driver
 * drives (--net-version 8..12), seen by the driver's code as one shape.
 *
 * The driver's subcommands call v8's shape (int sizes, no context). For a
 * newer version every entry goes to that version's own table, as NCCL's
 * compatibility layer would: sizes widened to size_t, v10's per-connection
 * config, v11/v12's context from init (its traffic class: --traffic-class),
 * properties converted, and a profiler handle on every isend/irecv with a
 * callback that counts the events the plugin starts and stops (v10+). */
#ifndef RAILNET_NETDRIVER_ND_TABLES_H
#define RAILNET_NETDRIVER_ND_TABLES_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_net_v12.h"

/* 0, or -1 for a version the plugin has no table of. */
int nd_tables_set_version(int version);
int nd_tables_version(void);
/* The name the table must carry (default "railnet"; NULL: any). */
void nd_tables_set_name(const char *name);
/* NCCL's traffic class for v10+ (-1: NCCL_NET_TRAFFIC_CLASS_UNDEF). */
void nd_tables_set_traffic_class(int tc);

/* Loads the library at path, checks the chosen table (plugin_tables),
 * calls its init with logger and returns it in v8's shape; NULL with why
 * in err. */
const ncclNet_v8_t *nd_tables_open(const char *path, ncclDebugLogger_t logger, char *err, size_t errlen);
/* The chosen table's properties in v12's fields (older versions leave the
 * fields they lack as NCCL's compatibility layer does: railId and planeId
 * NCCL_NET_ID_UNDEF, maxMultiRequestSize 1; v8: vProps {1, {dev}}, and
 * maxP2pBytes / maxCollBytes 0). */
ncclResult_t nd_tables_properties(int dev, ncclNetProperties_v12_t *props);
/* Profiler events (v10+) the plugin started and stopped in this process,
 * and the calls that broke the callback's contract (a stop of an event
 * never started, a start without the isend/irecv's phandle, a descriptor
 * of another layout). */
void nd_tables_prof_counts(uint64_t *started, uint64_t *stopped, uint64_t *bad);

#endif
