/* tools/writebw/opts.h: railnet-write-bw's command line.
 *
 * Contract: wb_opts_parse() fills struct wb_opts from argv with every
 * default applied and every combination checked (sizes in range, --dmabuf
 * only with --use_cuda, ports distinct, --gpu-initiated without --bidir, -D,
 * -q, --ports, --dmabuf or plugin mode, ...). It returns 0 to run, 1 when it
 * printed --help or --version (exit 0), and -1 after printing the reason to
 * stderr (exit 2). It never exits itself. */
#ifndef RAILNET_TOOLS_WRITEBW_OPTS_H
#define RAILNET_TOOLS_WRITEBW_OPTS_H

#include <stddef.h>
#include <stdio.h>

#include "../common/mem.h"

#define WB_MAX_PORTS 4
#define WB_MAX_QPS 64         /* QPs per port */
#define WB_MAX_SIZES 32
#define WB_DEFAULT_TCP_PORT 18515
#define WB_ALL_MIN 2u
#define WB_ALL_MAX (8u << 20)
#define WB_GI_INLINE 972       /* -I limit: railnet_gdaki.h's GDAKI_INLINE_MAX (a 16-BB WQE) */
#define WB_GI_INLINE_DEFAULT 972 /* -I default: GDAKI_INLINE_DEFAULT (past 220 bytes on an idle QP only) */

enum wb_mode { WB_MODE_VERBS, WB_MODE_PLUGIN };

struct wb_opts {
    const char *server;        /* NULL: this process is the server */
    int tcp_port;
    const char *dev;           /* -d: RDMA device (verbs) or plugin device name */
    int ports[WB_MAX_PORTS];   /* -i / --ports */
    int nports;
    int gid_index;             /* -x, -1: auto */
    size_t sizes[WB_MAX_SIZES];
    int nsizes;
    int all_sizes;             /* -a */
    long iters;                /* -n */
    double duration;           /* -D seconds, 0: iteration mode */
    int qps;                   /* -q: QPs per port */
    int tx_depth;              /* -t */
    int use_cuda;              /* --use_cuda */
    int gpu;                   /* --use_cuda=N */
    enum mem_reg reg;          /* --dmabuf / --peermem, else auto */
    int cuda_vmm;              /* --cuda_vmm: cuMemCreate/cuMemMap memory */
    int relaxed;               /* 1 unless --no-relaxed-ordering */
    enum wb_mode mode;
    const char *plugin_lib;    /* --plugin-lib */
    const char *ibverbs_lib;   /* --ibverbs-lib */
    int bidir;
    int report_gbits;
    int json;
    int gpu_initiated;         /* --gpu-initiated (sets use_cuda; one QP, one way) */
    int inline_size;           /* -I: --gpu-initiated writes of at most this many bytes
                                * carry their payload in the WQE (default WB_GI_INLINE) */
    double timeout;            /* --timeout: TCP connect and peer silence */
    int rdma_cm;               /* -R: QPs connected through the RDMA CM (verbs mode) */
};

int wb_opts_parse(int argc, char **argv, struct wb_opts *o);
void wb_usage(FILE *out);

#endif
