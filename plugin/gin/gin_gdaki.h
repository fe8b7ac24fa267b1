/* plugin/gin/gin_gdaki.h: the GDAKI type of railnet's GIN: NCCL's own device
 * code (nccl_device/gin/gdaki, DOCA GPUNetIO verbs) posts mlx5 WQEs into
 * railnet's queues. Layouts of what it reads: include/railnet_gin_gdaki.h.
 *
 * Which type NCCL gets (gin_gdaki_type.c): RAILNET_GIN=gdaki asks for it;
 * it is granted when the running NCCL's device code expects a layout
 * railnet writes (NCCL_GIN_GDAKI_VERSION 100: NCCL 2.28.x and 2.29.x; 200:
 * NCCL 2.30.x; or RAILNET_GIN_GDAKI_VERSION says which), the device opens
 * for DEVX, and a
 * CUDA GPU is there -- or, with no CUDA, RAILNET_GDAKI_QUEUE_MEM=host-devx
 * (every structure in host memory, for CPU consumers: the CI tests).
 * RAILNET_GIN=auto keeps the proxy type until the GDAKI type has been
 * validated on a GPU. Anything else: the proxy type, the reason logged once.
 *
 * Resources (gin_gdaki.c). The collComm's, made at its first createContext
 * or regMrSym and freed at closeColl: a DEVX context and PD of its device
 * (first port), on which every QP and registration below lives.
 * Per createContext (a set; NCCL 2.30 calls it once per device
 * communicator on the same collComms, so any number live at once and each
 * destroyContext frees only its own), collectively on every rank (the same
 * calls in the same order; each has exchange rounds of its own):
 * - per context (createContext's nContexts; 1 for GIN v11) and per peer p
 *   (self included): one DEVX RC QP (plugin/gdaki's queues: ring,
 *   doorbell records, CQ with overrun ignore, UAR) connected to peer p's QP
 *   towards this rank (QP numbers swapped in a GW_GDAKI message over the
 *   collComm's sockets), and one companion DEVX QP connected to itself:
 *   2 x nContexts x nranks QPs per set;
 * - the signal table (nSignals x 8 bytes per context) and the counter table
 *   (nCounters x 8 bytes per context), zeroed, and a sink, each registered
 *   zero-based (a context's part starts at its offset);
 * - layout 200 with backend 2: per context, last_issued_get[nranks] and
 *   last_visible_get[nranks], zeroed;
 *   every rank's rkeys of both tables (exchanged as WIN messages);
 * - in GPU memory (host memory in the CPU-consumer mode): the DOCA QP
 *   descriptors (gdqp[nranks], companion_gdqp[nranks] per context), the
 *   rkey arrays and the ncclGinGdakiGPUContext array; devHandle->handle
 *   points at the last (one per set: NCCL finds a device communicator's
 *   contexts by it).
 * Windows (regMrSym on the GDAKI type): the buffer is also registered
 * zero-based on the DEVX PD; the rkeys are exchanged; the ginHandle is a
 * ncclGinGdakiMemHandle {rkeys[nranks], lkey} in GPU (or host) memory.
 * NCCL needs no proxy progress: needsProxyProgress = 0. Errors
 * (queryLastError of a set): one of its DEVX QPs found in the error state
 * (an error CQE moved it there), a peer whose socket closed, or its
 * collComm's failure. A failed set's destroyContext releases its kernels
 * (gin_gdaki_release) and keeps its memory; closeColl frees or releases
 * the sets NCCL left, then the collComm's part. */
#ifndef RAILNET_GIN_GDAKI_H
#define RAILNET_GIN_GDAKI_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_gin_v11.h"
#include "railnet_gin_gdaki.h"

struct gin_coll;
struct gin_mr;

/* ---- type choice (gin_gdaki_type.c) ---- */
struct gin_gdaki_probe {
    int mode;                 /* enum rn_gin_mode */
    int nccl_version;         /* ncclGetVersion of the process's NCCL, 0 none (a test driver) */
    int version_override;     /* RAILNET_GIN_GDAKI_VERSION, 0 none */
    int cuda_ok;              /* a CUDA GPU can be used */
    int host_test;            /* no CUDA, RAILNET_GDAKI_QUEUE_MEM=host-devx: CPU consumers */
    int devx_ok;              /* the device opens for DEVX */
    char cuda_why[160];       /* why not, when not */
    char devx_why[256];
};
/* The NCCL_GIN_GDAKI_VERSION of a NCCL release's device code (version code
 * as ncclGetVersion gives it), 0 when unknown. 2.28.x and 2.29.x share 100:
 * 2.29's additions (a context per contextId, table offsets) fall where
 * 2.28 reads the first context and padding, so one writer serves both. */
int gin_gdaki_version_of_nccl(int nccl_version);
/* NCCL_NET_DEVICE_GIN_GDAKI or _PROXY for p, and why (one sentence);
 * *mismatch set when a layout version mismatch was the reason (a WARN). */
int gin_gdaki_choose(const struct gin_gdaki_probe *p, int *mismatch, char *why, size_t wl);
/* The layout the GDAKI type is written in for this probe: the override,
 * else NCCL's, else (no NCCL: a test driver) 100. */
int gin_gdaki_layout_of(const struct gin_gdaki_probe *p);
/* Fills the probe for device dev from the configuration and this process
 * (CUDA, DEVX, NCCL's version). */
void gin_gdaki_probe_fill(int dev, struct gin_gdaki_probe *p);

/* ---- images of NCCL's structures (pure) ----
 * Layout 100 (NCCL 2.28, 2.29): gin_gdaki_desc.c; layout 200 (NCCL 2.30):
 * gin_gdaki_layout_v200.c; gin_gdaki_layout.c picks by layout. */
/* One DEVX QP's queues as the device code sees them (device-visible
 * addresses; host addresses in the CPU-consumer mode). */
struct gin_gdaki_queue {
    uint8_t *sq;              /* 2^sq_log 64-byte slots */
    uint32_t sq_log;
    uint32_t *sq_dbrec;       /* the send doorbell record word (big-endian PI) */
    uint64_t *db;             /* the UAR doorbell register */
    uint8_t *cq;              /* 2^cq_log 64-byte CQEs */
    uint32_t cq_log;
    uint32_t *cq_dbrec;
    uint32_t cqn, qpn;
    int gpu;                  /* queues in GPU memory */
};
/* One table of a context: keys in host order (stored big-endian). */
struct gin_gdaki_table_desc {
    uint64_t *base;           /* the whole table (every context's part) */
    uint32_t *rkeys;          /* [nranks], big-endian already */
    uint32_t lkey;
    uint32_t offset;          /* entries before this context's */
};
/* One context, whatever the layout. */
struct gin_gdaki_ctx_desc {
    void *gdqp, *companion;   /* this context's QP descriptors, peer p at index p */
    struct gin_gdaki_table_desc counters, signals;
    uint32_t sink_lkey;
    uint64_t *last_issued_get, *last_visible_get;   /* [nranks]; layout 200, backend 2 */
};
/* The fields both layouts' QP descriptors share, by name (their offsets
 * differ: layout 200 is packed): out zeroed, then what DOCA GPUNetIO's
 * exporter writes (gin_gdaki_desc.c says what each is). Needs <endian.h>
 * and <string.h>. */
#define GIN_GDAKI_QP_IMAGE(q, out)                                                                   \
    do {                                                                                             \
        memset((out), 0, sizeof(*(out)));                                                            \
        uint32_t s8 = (q)->qpn << 8;                                                                 \
        (out)->sq_num = (q)->qpn;                                                                    \
        (out)->sq_num_shift8 = s8;                                                                   \
        (out)->sq_num_shift8_be = htobe32(s8);                                                       \
        (out)->sq_num_shift8_be_1ds = htobe32(s8 | 1);                                               \
        (out)->sq_num_shift8_be_2ds = htobe32(s8 | 2);                                               \
        (out)->sq_num_shift8_be_3ds = htobe32(s8 | 3);                                               \
        (out)->sq_num_shift8_be_4ds = htobe32(s8 | 4);                                               \
        (out)->sq_wqe_num = (uint16_t)(1u << (q)->sq_log);                                           \
        (out)->sq_wqe_mask = (uint16_t)((1u << (q)->sq_log) - 1);                                    \
        (out)->sq_wqe_daddr = (q)->sq;                                                               \
        (out)->sq_dbrec = (q)->sq_dbrec;                                                             \
        (out)->sq_db = (q)->db;                                                                      \
        (out)->cq_sq.cqe_daddr = (q)->cq;                                                            \
        (out)->cq_sq.cq_num = (q)->cqn;                                                              \
        (out)->cq_sq.cqe_num = 1u << (q)->cq_log;                                                    \
        (out)->cq_sq.dbrec = (q)->cq_dbrec;                                                          \
        (out)->cq_sq.cqe_mask = (1u << (q)->cq_log) - 1;                                             \
        (out)->cq_sq.cqe_size = 64;                                                                  \
        (out)->cq_sq.mem_type = (q)->gpu ? RN_DOCA_MEM_TYPE_GPU : RN_DOCA_MEM_TYPE_HOST;             \
        (out)->nic_handler = RN_DOCA_NIC_HANDLER_GPU_SM_DB;                                          \
        (out)->mem_type = (q)->gpu ? RN_DOCA_MEM_TYPE_GPU : RN_DOCA_MEM_TYPE_HOST;                   \
    } while (0)
void gin_gdaki_qp_image(const struct gin_gdaki_queue *q, struct rn_doca_qp *out);
void gin_gdaki_qp_image_v200(const struct gin_gdaki_queue *q, struct rn_doca_qp_v200 *out);
void gin_gdaki_ctx_image(const struct gin_gdaki_ctx_desc *d, struct rn_gin_gdaki_gpu_ctx *out);
void gin_gdaki_ctx_image_v200(const struct gin_gdaki_ctx_desc *d, struct rn_gin_gdaki_gpu_ctx_v200 *out);
void gin_gdaki_mh_image(uint32_t *rkeys, uint32_t lkey, struct rn_gin_gdaki_mem_handle *out);
/* rkeys[i] = htobe32(keys[i]) */
void gin_gdaki_keys_be(const uint32_t *keys, int n, uint32_t *out);

/* By layout (RN_GIN_GDAKI_V100, _V200) and, for layout 200, the backend
 * version NCCL 2.30's createContext names (RN_GIN_GDAKI_BACKEND_V1, _V2;
 * other layouts ignore it). A size of 0: a layout or backend railnet does
 * not write. */
size_t gin_gdaki_qp_size(int layout);
size_t gin_gdaki_ctx_size(int layout, int backend);
/* Whether the context carries get tracking (its arrays must be made). */
int gin_gdaki_ctx_gets(int layout, int backend);
void gin_gdaki_qp_write(int layout, const struct gin_gdaki_queue *q, void *out);
void gin_gdaki_ctx_write(int layout, int backend, const struct gin_gdaki_ctx_desc *d, void *out);

/* ---- resources (gin_gdaki.c) ---- */
/* The layout this process offers the GDAKI type with, 0 when it offers
 * the proxy type (decided at the first getProperties; gin_plugin.c). */
void gin_gdaki_set_offered(int layout);
int gin_gdaki_offered(void);
/* A set of ncontexts contexts (NCCL 2.29+ indexes the device handle by
 * context), each with QPs of its own; backend: see gin_gdaki_ctx_size (-1:
 * the newest, for faces that do not say); depth: NCCL's queue depth, the
 * send ring's slots (rounded up to a power of two within
 * GIN_GDAKI_SQ_MIN..GIN_GDAKI_SQ_MAX; 0: GIN_GDAKI_SQ_DEPTH). Any number of
 * sets per collComm. */
ncclResult_t gin_gdaki_create_context(struct gin_coll *c, int nsignals, int ncounters, int ncontexts, int backend,
                                      int depth, void **gin_ctx, ncclNetDeviceHandle_v11_t **dev_handle);
/* Whether gin_ctx is a live GDAKI set of this file (else: the proxy
 * type's context, or none); never reads through gin_ctx. */
int gin_gdaki_is_ctx(void *gin_ctx);
ncclResult_t gin_gdaki_destroy_context(void *gin_ctx);
ncclResult_t gin_gdaki_query_last_error(void *gin_ctx, bool *has_error);
/* regMrSym of the GDAKI type, after the window's proxy registration and
 * exchange: registers m's buffer zero-based on the DEVX PD, exchanges the
 * rkeys, and makes the device handle (*gin_handle). Collective. */
ncclResult_t gin_gdaki_reg_window(struct gin_coll *c, struct gin_mr *m, void *data, size_t size, void **gin_handle);
void gin_gdaki_dereg_window(struct gin_mr *m);
/* closeColl: the sets destroyContext did not free, then the collComm's
 * part. */
void gin_gdaki_coll_free(struct gin_coll *c);

/* ---- a failed context's kernels (gin_gdaki_release.c) ---- */
/* What one failed context's device code waits on: the QP descriptors
 * (gdqp and companion_gdqp, nqps in all), the signal and counter tables;
 * device addresses on GPU cuda_dev, or host addresses when cuda_dev < 0. */
struct gin_gdaki_release_req {
    int cuda_dev;
    uint64_t qps;
    int nqps;
    size_t qp_stride;         /* bytes per descriptor (the layout's QP size) */
    uint64_t sig, cnt;
    size_t nsig, ncnt;
    const char *who;          /* "device D, rank R", for the logs (copied) */
};
/* Ends the waits of kernels still spinning on that context, on a thread of
 * its own, and returns at once: every CQ reports every completion, every
 * signal and counter advances (again when new posts show) until no kernel
 * posted for 2 s. The caller moved the QPs to the error state and keeps
 * the memory until the process exits. */
void gin_gdaki_release(const struct gin_gdaki_release_req *q);

#endif
