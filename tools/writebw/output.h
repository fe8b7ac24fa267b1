/* tools/writebw/output.h: railnet-write-bw's report: perftest's table with a
 * header describing both sides, or one JSON document (--json).
 *
 * Contract: out_header() prints the header (text mode) right away;
 * out_row() prints a table row as soon as a size is measured (text mode) and
 * keeps it for the JSON document; out_finish() prints the table's closing
 * line, or the whole JSON document. Bandwidth is GB/s (10^9 bytes per
 * second) or Gb/s with --report_gbits; the message rate is in Mpps. */
#ifndef RAILNET_TOOLS_WRITEBW_OUTPUT_H
#define RAILNET_TOOLS_WRITEBW_OUTPUT_H

#include <stdio.h>

#include "opts.h"
#include "wire.h"

struct out_port {
    int port;
    char link_layer[16];
    int gid_index;
    char gid[64];
    int mtu;         /* active MTU in bytes */
    char rate[48];   /* active speed and width */
};

struct out_report {
    const struct wb_opts *o;
    const char *role;             /* "server", "client" */
    char peer[128];               /* host name or address of the other side */
    struct wb_side local, remote;
    int have_remote;
    struct out_port port[WB_MAX_PORTS];
    int nports;
    int path_mtu;                 /* negotiated with the peer, bytes; 0 unknown */
    char relaxed_note[96];        /* "on", "off", "requested, dropped by rdma-core < 28" */
    char plugin[512];             /* plugin mode: library and device description */
    struct wb_result rows[WB_MAX_SIZES];
    int nrows;
};

void out_header(struct out_report *r);
void out_row(struct out_report *r, const struct wb_result *res);
void out_finish(struct out_report *r);
/* In the table's unit (GB/s or Gb/s). */
double out_bw_unit(const struct out_report *r, double bytes_per_s);

#endif
