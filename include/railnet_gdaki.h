/* railnet_gdaki.h: the GPU-initiated (IBGDA-style) send path, host face.
 *
 * A CUDA kernel posts RDMA writes itself: it writes mlx5 send WQEs into the
 * QP's ring, updates the doorbell record, rings the UAR doorbell and polls
 * the CQ.  The host side creates the QP through mlx5dv, makes its memory
 * reachable from the GPU and hands the kernel one struct gdaki_qp_dev per QP
 * (a device pointer).  The device API (CUDA) is plugin/gdaki/gdaki_device.cuh;
 * gdaki_wqe.h / gdaki_queue.h hold the byte formats and the posting
 * protocol shared by the kernel and CPU posters.
 *
 * Three ways to a connected QP: gdaki_pair_open (a loopback pair on one
 * port), gdaki_half_open + gdaki_half_connect (two processes or hosts that
 * swap a struct gdaki_qp_info), gdaki_comm_attach (next to a connected
 * railnet comm).  Kernel-posted write loops for tools and benchmarks:
 * gdaki_bw_write_size / gdaki_bw_run_pair / gdaki_bw_run.  Host functions
 * return 0 (or a count) or -1 with the reason in err; they are not
 * thread-safe on one pair.  Link plugin/gdaki/libgdaki_host.la, plus
 * $(GDAKI_BW_LIBS) for gdaki_bw_* (see plugin/gdaki/Makefile.include).
 *
 * Contract of struct gdaki_qp_dev (plain C, the same bytes on CPU and GPU):
 * - the first block is written by the host once and only read afterwards;
 * - the counters below it count 64-byte basic blocks since creation and
 *   only grow: done <= ready <= resv.  resv: slots handed to posters;
 *   ready: slots whose WQEs were written and doorbelled, in order;
 *   done: slots whose completion the poller has seen.
 * - err != 0 once any completion came back in error; it is never cleared
 *   (the QP is in the error state).  Its layout: 1 << 31 | CQE opcode << 16 |
 *   vendor syndrome << 8 | syndrome.
 * - a WQE spans one basic block, except a thread's inline put of more than
 *   GDAKI_INLINE_MAX_1BB bytes (up to 16, within max_wqe_ds when set: a
 *   longer one goes by pointer).  A CQE whose wqe_counter is c
 *   completes every slot below c plus the BBs of the WQE at c: the poller
 *   learns that count from span[c mod 2^sq_log] (BBs beyond the first, set
 *   by the poster of a signaled multi-BB WQE and cleared by the poller; 0
 *   otherwise), as libmlx5 keeps a table of where each WQE starts.  With
 *   span NULL every WQE is one basic block. */
#ifndef RAILNET_GDAKI_H
#define RAILNET_GDAKI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GDAKI_ERR_VALID 0x80000000u
/* The QP's err word once a CQE reported an error: the CQE's opcode, vendor
 * syndrome and syndrome (gdaki_q_record_error). */
#define GDAKI_ERR_WORD(opcode, vendor_err, syndrome) \
    (GDAKI_ERR_VALID | ((uint32_t)(opcode) << 16) | ((uint32_t)(vendor_err) << 8) | (uint32_t)(syndrome))
/* An err word without its vendor syndrome, which is the device's own. */
#define GDAKI_ERR_NO_VENDOR(err) ((uint32_t)(err) & 0xffff00ffu)
/* err when a CQE named a WQE past every reserved slot: no CQE opcode is
 * 0xff, so this says the completion accounting broke, not the NIC. */
#define GDAKI_ERR_PROTOCOL (GDAKI_ERR_VALID | 0xff0000u)

struct gdaki_qp_dev {
    /* ---- fixed after setup ---- */
    uint8_t *sq;            /* send queue: 2^sq_log basic blocks of 64 bytes */
    uint32_t *dbrec;        /* send doorbell record word: big-endian producer counter */
    uint64_t *db;           /* UAR doorbell register: takes the first 8 bytes of a ctrl segment */
    uint8_t *cq;            /* completion queue: 2^cq_log entries of cqe_size bytes */
    uint32_t *cq_dbrec;     /* CQ doorbell record: [0] consumer index (low 24 bits) */
    uint64_t scratch_addr;  /* 8 bytes (x 64 slots) that receive atomic results */
    uint32_t scratch_lkey;
    uint32_t qpn;
    uint32_t sq_log;
    uint32_t cq_log;
    uint32_t cqe_size;      /* 64 or 128 */
    uint32_t flags;         /* GDAKI_QP_* */
    uint8_t *span;          /* 2^sq_log bytes, zeroed, or NULL (see above) */
    uint32_t max_wqe_ds;    /* the most 16-byte units one send WQE may hold on
                             * this device (max_wqe_sz_sq / 16, at most 63);
                             * 0: unknown, taken as 63 (16 BBs) */
    uint8_t pad0[128 - 84];      /* the fixed block above is 84 bytes */
    /* ---- posting state, shared by every poster and the poller ---- */
    uint64_t resv;
    uint8_t pad1[128 - 8];
    uint64_t ready;
    uint8_t pad2[128 - 8];
    uint64_t done;
    uint64_t cq_ci;         /* CQ consumer index, only moved under poll_lock */
    uint32_t poll_lock;
    uint32_t err;
    uint8_t pad3[128 - 24];
};

#if defined(__cplusplus)
static_assert(sizeof(struct gdaki_qp_dev) == 512, "gdaki_qp_dev layout");
#else
_Static_assert(sizeof(struct gdaki_qp_dev) == 512, "gdaki_qp_dev layout");
#endif

/* The most payload bytes a message may carry inside its WQE (GDAKI_OP_INLINE,
 * gdaki_bw_opts.inline_max): a WQE of 63 16-byte units (the ctrl segment's
 * 6-bit ds; 1008 bytes, within the 1 KB, 16 basic blocks, a ConnectX takes)
 * less the ctrl, raddr and inline headers.  A thread's put, put_imm or
 * put_signal takes up to this many.
 * One basic block (gdaki_wqe.h's GDAKI_INLINE_MAX_1BB, 28 bytes) is the
 * limit for the warp and block scopes, for a signaled WQE on a queue
 * without a span table, and on a queue whose window is no larger than the
 * WQE; past it the op goes by pointer (its lkey must be valid).  A device
 * that states a smaller largest send WQE (gdaki_qp_dev.max_wqe_ds) gets
 * longer payloads by pointer too. */
#define GDAKI_INLINE_MAX 972
/* The most bytes gdaki_q_inline_flags (gdaki_queue.h) lets go inline while
 * a QP has WQEs outstanding: 220, four basic blocks, the inline size
 * perftest's ib_write_lat uses by default.  Longer inline payloads go
 * inline only on an idle QP. */
#define GDAKI_INLINE_BUSY_MAX 220
/* What the tool and the bench inline by default (with that rule). */
#define GDAKI_INLINE_DEFAULT GDAKI_INLINE_MAX

/* flags */
#define GDAKI_QP_FLAG_GPU_QUEUE 0x1u  /* ring, dbrec and CQ live in GPU memory */
#define GDAKI_QP_FLAG_NO_ATOMICS 0x2u /* the device has no RDMA atomics (atomic_cap NONE):
                                       * put_signal ADD is refused, SET works */

/* How put_signal updates the remote 8-byte signal word after the data. */
enum gdaki_signal_op {
    /* RDMA WRITE of the value (inline), on the same QP after the data write.
     * Works on every RC device; correct because an RC QP executes and places
     * its writes in order (softnic guarantees it; ConnectX places writes of
     * one QP in order, though the IB spec only promises it for the last
     * byte of a message). The word ends as the last value set. */
    GDAKI_SIGNAL_SET = 0,
    /* ATOMIC fetch-and-add of the value: needs device atomics; ordered after
     * the data by the RC rules for atomics. Several senders may add. */
    GDAKI_SIGNAL_ADD = 1,
};

/* Where the ring, doorbell record and CQ live. */
enum gdaki_queue_mem {
    GDAKI_QUEUE_MEM_HOST = 0, /* host memory registered with CUDA (works everywhere) */
    GDAKI_QUEUE_MEM_GPU = 1,  /* GPU memory, as DEVX user memory (ConnectX with DEVX;
                               * softnic): the kernel's queue accesses stay on the GPU */
    GDAKI_QUEUE_MEM_HOST_DEVX = 2, /* the DEVX path over host memory (tests, and
                                    * checking a NIC's DEVX support without a GPU) */
};

/* A registered buffer as the device API wants it. */
struct gdaki_mr {
    uint64_t addr;
    uint64_t len;
    uint32_t lkey;
    uint32_t rkey;
    void *ibv_mr;           /* struct ibv_mr *, owned by the pair */
};

/* ---- a standalone connected pair: QP "send" (mlx5dv, posted by the GPU or a
 * CPU thread) connected to QP "recv" on the same device and port (loopback).
 * For the tool, the tests and the benchmark; a railnet comm builds the same
 * thing from its own QPs. */
struct gdaki_pair_opts {
    const char *dev_name;   /* NULL: the first device */
    int port;               /* 0: port 1 */
    int gid_index;          /* < 0: the first IPv4-mapped GID, else 0 */
    uint32_t sq_depth;      /* WQE slots, rounded up to a power of two; 0: 1024 */
    enum gdaki_queue_mem queue_mem;
    int use_cuda;           /* 1: make the queue reachable from CUDA device cuda_dev */
    int cuda_dev;
    const char *ibverbs_lib; /* NULL: libibverbs.so.1 (libmlx5.so.1 is looked for
                              * next to it first) */
};

struct gdaki_pair;

/* Fill opts with defaults, then apply RAILNET_GDAKI_QUEUE_MEM=host|gpu and
 * RAILNET_IBVERBS_LIB as the plugin's configuration parsed them (a value
 * that does not parse is a WARN there, and the default).  Returns 0. */
int gdaki_pair_opts_default(struct gdaki_pair_opts *opts, char *err, size_t errlen);

/* Open the device, create and connect the pair.  Returns 0, or -1 with the
 * reason in err (no device, no mlx5dv support, CUDA missing ...). */
int gdaki_pair_open(const struct gdaki_pair_opts *opts, struct gdaki_pair **out, char *err,
                    size_t errlen);

/* The send QP's descriptor as a CPU poster uses it (host memory). */
struct gdaki_qp_dev *gdaki_pair_qp_host(struct gdaki_pair *pair);

/* The send QP's descriptor for a kernel: a device pointer to a copy in GPU
 * memory (its counters start at zero; do not post from the CPU as well).
 * NULL unless opened with use_cuda. */
struct gdaki_qp_dev *gdaki_pair_qp_device(struct gdaki_pair *pair);

/* Register addr..addr+len (host or CUDA memory) on the pair's PD with local
 * write, remote write/read/atomic access. Returns 0 or -1 with err. */
int gdaki_pair_reg(struct gdaki_pair *pair, void *addr, size_t len, struct gdaki_mr *out,
                   char *err, size_t errlen);
void gdaki_pair_dereg(struct gdaki_pair *pair, struct gdaki_mr *mr);

/* State of the send QP as the verbs layer reports it (enum ibv_qp_state). */
int gdaki_pair_send_qp_state(struct gdaki_pair *pair);
/* Moves the send QP to the error state: the NIC completes what is posted,
 * and whatever is posted later, with flush errors and moves no data. 0 or -1. */
int gdaki_pair_send_qp_fail(struct gdaki_pair *pair);

/* Post n receive WQEs on the recv QP (needed by WRITE_WITH_IMM) and poll
 * its CQ: returns the number of WRITE_WITH_IMM completions seen (imm values
 * into imm[] up to max), or -1 on a failed completion. */
int gdaki_pair_post_recv(struct gdaki_pair *pair, int n);
int gdaki_pair_poll_recv(struct gdaki_pair *pair, uint32_t *imm, int max);

void gdaki_pair_close(struct gdaki_pair *pair);

/* Facts about the open pair, for logs and tests. */
struct gdaki_pair_info {
    char dev_name[64];
    int port;
    int gid_index;
    int link_layer;         /* IBV_LINK_LAYER_* */
    uint32_t send_qpn, recv_qpn;
    uint32_t sq_slots, cq_entries, cqe_size;
    int atomics;            /* device supports RDMA atomics (GDAKI_SIGNAL_ADD) */
    int uar_io_registered;  /* UAR page mapped for the GPU as I/O memory (1), or as
                             * plain host memory (0: softnic's UAR is RAM) */
    const char *ibverbs_path, *mlx5_path;
    enum gdaki_queue_mem queue_mem; /* where the send QP's ring, records and CQ are */
};
void gdaki_pair_get_info(struct gdaki_pair *pair, struct gdaki_pair_info *info);

/* The CPU-proxy path on the same port, for comparisons: n RDMA WRITEs of
 * size bytes from src (on the recv QP's side) to dst, posted with
 * ibv_post_send by this thread on the pair's ordinary verbs QP (the recv
 * QP, which sends toward the send QP), at most window in flight, every one
 * signaled.  Returns 0 (all completed successfully) or -1 with err. */
int gdaki_pair_cpu_write_loop(struct gdaki_pair *pair, const struct gdaki_mr *src,
                              const struct gdaki_mr *dst, size_t size, int n, int window,
                              char *err, size_t errlen);

/* One RDMA READ of size bytes from src (the send QP's side: host or GPU
 * memory) into dst (the recv QP's side), posted and waited for on the
 * recv QP as above.  Returns 0 or -1 with err. */
int gdaki_pair_cpu_read(struct gdaki_pair *pair, const struct gdaki_mr *src,
                        const struct gdaki_mr *dst, size_t size, char *err, size_t errlen);

/* ---- one end of a connection between two processes (or hosts) ----
 * The sender opens a GDAKI_ROLE_SEND half (the mlx5dv QP the GPU posts on),
 * the receiver a GDAKI_ROLE_RECV half (an ordinary QP, the target of the
 * writes); each sends its struct gdaki_qp_info to the other by any means
 * (the bytes as they are: same byte order on both hosts), then calls
 * gdaki_half_connect with the other's.  A half is a struct gdaki_pair: reg,
 * post_recv/poll_recv (receiver), qp_host/qp_device (sender, device
 * descriptor made at connect when opts->use_cuda), close. */
enum gdaki_role { GDAKI_ROLE_SEND = 1, GDAKI_ROLE_RECV = 2 };

#define GDAKI_QP_INFO_MAGIC 0x47514931u /* "GQI1" */
struct gdaki_qp_info {
    uint32_t magic;         /* GDAKI_QP_INFO_MAGIC */
    uint32_t qpn, psn;
    uint16_t lid;
    uint8_t port, mtu;      /* verbs port number; enum ibv_mtu of the port */
    uint8_t is_global;      /* address by GID (RoCE) */
    uint8_t pad[3];
    uint8_t gid[16];
};

int gdaki_half_open(const struct gdaki_pair_opts *opts, enum gdaki_role role,
                    struct gdaki_pair **out, struct gdaki_qp_info *local, char *err, size_t errlen);
int gdaki_half_connect(struct gdaki_pair *half, const struct gdaki_qp_info *remote, char *err,
                       size_t errlen);

/* ---- from a connected railnet comm ----
 * Both ends of a connection call gdaki_comm_attach, the sender on its send
 * comm (from connect), the receiver on its recv comm (from accept), in any
 * order, while no isend/irecv of that comm is in flight.  Each builds one
 * more RC QP on the comm's device, PD and first port (the sender's through
 * mlx5dv, posted by the GPU; the receiver's an ordinary QP), the two swap
 * their QP descriptions over the comm's TCP socket and connect with the
 * comm's QP parameters.  It blocks up to 10 s for the peer.  The result is
 * a struct gdaki_pair: on the sender gdaki_pair_qp_host/_device give the
 * descriptor (use_cuda and cuda_dev from opts, which may be NULL for host
 * defaults); on the receiver gdaki_pair_post_recv/_poll_recv serve
 * WRITE_WITH_IMM.  Buffers: gdaki_pair_reg (on the comm's PD), their
 * addr/rkey exchanged by the application.  Close the pair before the comm.
 * Returns 0, or -1 with err (not a connected comm, no mlx5dv, peer absent,
 * a malformed peer description). */
int gdaki_comm_attach(void *comm, const struct gdaki_pair_opts *opts, struct gdaki_pair **out,
                      char *err, size_t errlen);

/* ---- tool hook: railnet-write-bw --gpu-initiated ----
 *
 * A kernel-posted RDMA WRITE loop on the pair's mlx5 QP, timed on the GPU.
 * Implemented in plugin/gdaki/gdaki_bw.cu (nvcc); a build without nvcc
 * links plugin/gdaki/gdaki_bw_none.c, whose functions return -1 saying so.
 * Link: $(GDAKI_BW_LIBS) from plugin/gdaki/Makefile.include.
 *
 * Contract: threads x blocks GPU threads post iters messages in total per
 * size (each thread its share), each thread waiting for completion (quiet)
 * after every window messages and at the end; threads >= 32 post warp-wide
 * (one reservation and doorbell per warp, _warp variant), fewer post one
 * by one (_thread variant).  Source and destination are GPU buffers of
 * max_size bytes registered on the pair (every message writes the start of
 * them: this measures the path, not the data).  The latency column is a
 * separate one-thread loop of put + quiet of the same size.  Not
 * thread-safe; one run at a time per pair. */
struct gdaki_bw_opts {
    const char *dev_name;   /* NULL: first device */
    int port;               /* 0: 1 */
    int cuda_dev;
    const char *ibverbs_lib;/* NULL: RAILNET_IBVERBS_LIB, else libibverbs.so.1 */
    size_t min_size, max_size; /* message sizes, doubled from min to max (1..2^31) */
    int iters;              /* messages per size, all threads together (0: 10000) */
    int warmup;             /* messages per size before timing (0: none) */
    int threads;            /* posting threads per block (1..1024; 0: 1) */
    int blocks;             /* thread blocks (0: 1) */
    int window;             /* messages in flight per thread before a quiet (0: 64) */
    int signal;             /* 1: every message is a put_signal (SET; ADD with
                             * device atomics) on a GPU signal word */
    int lat_iters;          /* one-thread put+quiet rounds per size (0: 1000; <0: skip) */
    int timeout_s;          /* a posting kernel still running after this many seconds
                             * fails the run with the queue's state (0: 60) */
    FILE *out;              /* where the table goes (NULL: stdout; set quiet to skip) */
    int quiet;              /* 1: print nothing */
    int host_payload;       /* 1 (gdaki_bw_run_pair): source and target in pinned host
                             * memory instead of GPU memory -- the kernel still posts;
                             * only the NIC's payload reads and writes change */
    int inline_max;         /* messages of at most this many bytes ask to carry their
                             * payload inside the WQE (GDAKI_OP_INLINE: the kernel
                             * reads the source, the NIC does not), past
                             * GDAKI_INLINE_BUSY_MAX only on an idle QP
                             * (gdaki_q_inline_flags); 0: none; at most
                             * GDAKI_INLINE_MAX */
};

struct gdaki_bw_result {
    size_t size;
    long msgs;              /* messages timed */
    double usec;            /* GPU time of the measured messages */
    double msg_rate_mps;    /* million messages per second */
    double gbps;            /* payload Gbit/s */
    double post_us;         /* per message, the time thread 0 spent posting (not waiting) */
    double lat_us;          /* put + quiet round, one thread, median by the kernel's
                             * clock (perftest's t_typical; 0 when skipped) */
    double lat_avg_us;      /* the same rounds' mean, by CUDA events: a few
                             * stalled rounds move it, not lat_us */
    double lat_post_us;     /* mean time of a round's put, as the kernel's clock saw it */
    double lat_wait_us;     /* mean time of a round's quiet, as the kernel's clock saw it */
};

/* Open a pair on opts->dev_name/port with the queue reachable from
 * cuda_dev, run the sweep, print the table, close.  Returns the number of
 * rows stored in results (at most max_results), or -1 with a reason in err
 * (no GPU, no device, no mlx5dv, an error completion with its syndrome,
 * a build without nvcc). */
int gdaki_bw_run(const struct gdaki_bw_opts *opts, struct gdaki_bw_result *results,
                 int max_results, char *err, size_t errlen);

/* One size on connected QPs (the tool's per-size step): the GPU writes
 * size bytes from src (registered on pair, GPU memory) to raddr/rkey on the
 * peer, opts->iters times over threads x blocks (see above), then the
 * one-thread latency loop; with opts->signal every message is a put_signal
 * on the 8-byte word sig_raddr/sig_rkey (SET of 1, or ADD of 1 with device
 * atomics).  pair: a connected GDAKI_ROLE_SEND half, a comm attachment or a
 * loopback pair, opened with use_cuda.  opts' device and size fields are
 * ignored.  0 with *r filled, or -1 with err (an error completion names its
 * syndrome). */
int gdaki_bw_write_size(struct gdaki_pair *pair, const struct gdaki_mr *src, uint64_t raddr,
                        uint32_t rkey, uint64_t sig_raddr, uint32_t sig_rkey, size_t size,
                        const struct gdaki_bw_opts *opts, struct gdaki_bw_result *r, char *err,
                        size_t errlen);

/* The same sweep on a pair the caller opened (use_cuda = 1); opts' device
 * fields are ignored. */
int gdaki_bw_run_pair(struct gdaki_pair *pair, const struct gdaki_bw_opts *opts,
                      struct gdaki_bw_result *results, int max_results, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
