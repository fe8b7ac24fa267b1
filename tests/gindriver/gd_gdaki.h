/* tests/gindriver/gd_gdaki.h: what the GDAKI subcommands share (gd_gdaki.c):
 * a rank's GDAKI context and two symmetric windows of len bytes each. */
#ifndef RAILNET_GINDRIVER_GD_GDAKI_H
#define RAILNET_GINDRIVER_GD_GDAKI_H

#include <stddef.h>
#include <stdint.h>

#include "gd.h"
#include "railnet_gin_gdaki.h"

#define GK_NSIG 64
#define GK_NCNT 64

/* --contexts and --backend (gd_tables.c): createContext's nContexts (GIN
 * v12, v14) and backendVersion (v14) */
extern int gd_contexts, gd_backend, gd_queue_depth;

struct gk {
    struct gd_rank *r;
    void *ctx;
    ncclNetDeviceHandle_v11_t *dh;
    int layout;                       /* getProperties' netDeviceVersion */
    int nctx, nsig, ncnt;             /* what createContext was asked for */
    int borrowed;                     /* gk_ctx_open's: the windows are another gk's */
    struct rn_gin_gdaki_gpu_ctx *gc;  /* &view */
    struct rn_gin_gdaki_gpu_ctx view; /* the last context, as layout 100 (gd_contexts, gd_backend) */
    struct rn_doca_qp *shadow;        /* layout 200: its descriptors as layout 100, main then companions */
    uint8_t *src, *dst;
    void *src_mh, *dst_mh;
    struct rn_gin_gdaki_mem_handle *src_gh, *dst_gh;
    size_t len;
};

/* connect, createContext (GK_NSIG signals, GK_NCNT counters), and the two
 * windows (zeroed host pages); 0 or 1 (said why on stdout). */
int gk_open(struct gd_rank *r, struct gk *k, size_t len);
/* Another GDAKI context on k's collComm, as NCCL 2.30 makes one per device
 * communicator: createContext with nctx contexts (GIN v12, v14), nsig
 * signals and ncnt counters, its handle checked as gk_open's; x shares k's
 * windows (gk_close of x leaves them). 0 or 1 (said why on stdout). */
int gk_ctx_open(struct gk *k, struct gk *x, int nctx, int nsig, int ncnt);
void gk_close(struct gk *k);

struct gd_opts;
/* gdaki-a2a (gd_gdaki_a2a.c) */
/* gdaki-a2a, and gdaki-release (release 1): the last rank killed */
int gd_gdaki_a2a_run(const char *plugin, struct gd_opts *o, int release);

#endif
