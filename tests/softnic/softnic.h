/* softnic.h: internal contract between softnic's modules.
 *
 * softnic is a userspace RDMA NIC that stands in for rdma-core's
 * libibverbs.so.1.  The verbs face (verbs.c, device.c, pd.c, mr.c, cq.c,
 * srq.c, qp.c) keeps the objects; the engine moves the bytes, split by role
 * as in Soft-RoCE:
 *   requester.c  walks a QP's send queue and writes requests on the wire
 *                (txbatch.c builds and paces them, connect.c sets up the
 *                connection),
 *   responder.c  validates and executes incoming requests (one task per
 *                incoming connection, rconn.c), sends ACK/NAK/READ responses,
 *   completer.c  reads responses, matches them to send WQEs and writes
 *                completions; it also owns the retry/timeout budget.
 * Each role of each QP is a task that engine.c's fixed pool of engine
 * threads runs in bounded steps: the threads do not grow with the QPs.
 * wire.c holds listeners, connection set-up and the frame formats.
 *
 * Addressing: a process owns, per listener "block", one TCP listening socket
 * per configured port IP, all with the same TCP port number P; its QPNs are
 * P << 8 | index, so (GID, QPN) alone names the listener to connect to.
 *
 * Errors inside softnic are errno-style ints (0 or a positive errno); the
 * exported verbs translate to what libibverbs returns. */
#ifndef SOFTNIC_H
#define SOFTNIC_H

#include <config.h>   /* _GNU_SOURCE first: pipe2, accept4 */

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define SN_MAX_DEVICES 4
#define SN_MAX_PORTS 4
/* a recv CQ of at most this many QPs same-host peers push into polls their records directly (push.c) */
#define SN_PUSH_WATCH 8
/* send-side: QPs of a send CQ whose completions its polls make from notes
 * (ack_note.c); a CQ's further QPs keep the wire's ACKs */
#define SN_NOTE_WATCH 8
/* the most bytes a pushed WRITE_WITH_IMM carries in its completion record (push.c) */
#define SN_PUSH_INLINE_MAX 88u
#define SN_MAX_SGE 16
#define SN_MAX_INLINE 1024
#define SN_MAX_QP_WR 32768
#define SN_MAX_CQE (1 << 22)
#define SN_MAX_MSG ((uint32_t)1 << 31)
#define SN_QP_PER_BLOCK 256
#define SN_MAX_BLOCKS 64

#define SN_LOG(fmt, ...) sn_log(__FILE__, __LINE__, fmt, ##__VA_ARGS__)
void sn_log(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A line only with SOFTNIC_DEBUG set. */
#define SN_DEBUG(fmt, ...) \
    do { \
        if (softnic_global()->conf.debug) \
            sn_log(__FILE__, __LINE__, fmt, ##__VA_ARGS__); \
    } while (0)

/* ---------------------------------------------------------------- config */
struct sn_port_conf {
    char ip[64];              /* IPv4 dotted quad the port binds to */
    uint64_t rate;            /* bytes/s egress limit, 0 = unlimited */
    uint32_t latency_us;      /* added one-way latency per message, at most SN_MAX_LATENCY_US */
    int mtu;                  /* enum ibv_mtu */
    int vf;                   /* VF mode: GPU writes w/o RO at 84/400 */
    uint64_t down_after_bytes; /* fault: port goes down after N tx bytes */
    uint32_t down_after_ms;   /* fault: port goes down N ms after open */
    uint32_t ack_delay_us;    /* fault: each ACK is acted on N us late */
};

struct sn_dev_conf {
    char name[64];
    int nports;
    struct sn_port_conf port[SN_MAX_PORTS];
};

/* SOFTNIC_PCI_LAYOUT: the PCI functions the sysfs view places the devices
 * on (sysfs.c). */
enum sn_pci_layout {
    SN_PCI_NONE = 0,   /* class/infiniband/<dev>/device is a directory of its own */
    SN_PCI_RAIL,       /* each device shares a PCIe switch with one GPU */
    SN_PCI_SHARED,     /* each device shares a PCIe switch with two GPUs */
};

struct sn_config {
    int ndevs;
    struct sn_dev_conf dev[SN_MAX_DEVICES];
    uint32_t retry_cap_ms;     /* cap on a QP's timeout*retry budget */
    uint32_t retry_min_ms;     /* floor of it (slow hosts, valgrind) */
    uint32_t rnr_cap_ms;       /* cap on a QP's RNR budget */
    uint64_t vf_base_rate;     /* VF slowdown base when port rate is 0 */
    char sysfs_dir[256];       /* SOFTNIC_SYSFS, "" = none */
    int pci_layout;            /* SOFTNIC_PCI_LAYOUT: enum sn_pci_layout */
    char ctl_file[256];        /* SOFTNIC_CTL_FILE, "" = none */
    char link_cache[256];      /* SOFTNIC_LINK_CACHE, "" = /dev/shm/softnic-link-<uid> */
    int debug;
    int fastpath;              /* SOFTNIC_FASTPATH: same-host peers by CMA (cma.c) */
    int push;                  /* SOFTNIC_PUSH: small writes placed by the requester (push.c) */
    int push_imm;              /* SOFTNIC_PUSH_IMM: WRITE_WITH_IMM too, its receive completion made
                                * by the receiver's poll */
    int push_proc_mem;         /* SOFTNIC_PUSH_PROC_MEM: placed through the peer's /proc/<pid>/mem */
    int push_shared;           /* SOFTNIC_PUSH_SHARED: into a peer's sealed memfd memory by a store */
    int push_send;             /* SOFTNIC_PUSH_SEND: a SEND of at most push_inline bytes too, its bytes
                                * in the receive's record (push.c) */
    uint32_t push_inline;      /* SOFTNIC_PUSH_INLINE: a pushed WRITE_WITH_IMM of at most this many
                                * bytes carries them in its record (push.c); 0: placed */
    int push_acks;             /* SOFTNIC_PUSH_ACKS: a same-host requester that polls its send CQ
                                * completes from its responder's note, no ACK sent (ack_note.c) */
    int wire_unix;             /* SOFTNIC_WIRE_UNIX: a connection to a listener of this network
                                * namespace over an abstract UNIX socket, not loopback TCP (wire.c) */
    uint64_t link_rate;        /* SOFTNIC_LINK_RATE: bytes/s unlimited ports carry, 0 = calibrate */
    uint32_t spin_us;          /* SOFTNIC_SPIN_US: how long a NIC thread that ran out of
                                * work polls before it sleeps, 0 = not (config.c) */
    int stats;                 /* SOFTNIC_STATS: per-role counters on stderr at exit (stats.c) */
    uint32_t ack_coalesce_us;  /* SOFTNIC_ACK_COALESCE_US: the longest a responder holds the
                                * ACK of requests that asked for none (responder.c) */
    uint32_t ack_poll_us;      /* SOFTNIC_ACK_POLL_US: how long the completer of a QP that a
                                * GPU drives polls for an ACK it awaits (config.c) */
    cpu_set_t nic_cpus;        /* SOFTNIC_NIC_CPUS: where the NIC threads run (engine.c) */
    bool nic_cpus_set;         /* else wherever the process may */
    uint32_t engines;          /* SOFTNIC_ENGINES: engine threads per process, 0 = the
                                * default (engine.c) */
    uint32_t max_wqe_sz_sq;    /* SOFTNIC_MAX_WQE_SZ_SQ: the largest send WQE in bytes,
                                * stated by QUERY_HCA_CAP and enforced on mlx5 rings;
                                * 0 = the command is refused, 16 BBs taken (mlx5_devx.c) */
};

/* Parses SOFTNIC_CONF / SOFTNIC_DEVICES / SOFTNIC_* (the only reader of the
 * environment).  Returns 0 or an errno; on error *conf holds the defaults. */
int config_load(struct sn_config *conf);

/* ------------------------------------------------------------- rate.c */
struct sn_rate {
    pthread_mutex_t lock;
    uint64_t rate;          /* bytes/s, 0 = unlimited */
    double tokens;          /* may go negative: debt paid by sleeping */
    uint64_t last_ns;
};
void rate_init(struct sn_rate *r, uint64_t rate);
void rate_set(struct sn_rate *r, uint64_t rate);
/* Charges len bytes that have been ready to go since since_ns (when their
 * WQE was posted, a READ was asked for, or a VF placement began): the port
 * earns credit only from then, never for idle time, and credit left from
 * earlier bytes does not outlive a time the port had nothing to send.
 * Sleeps as long as the bucket is in debt. */
void rate_take(struct sn_rate *r, uint64_t len, uint64_t since_ns);
/* rate_take's accounting at time now, for callers holding r->lock (and
 * tests): returns how many ns the caller must wait before its bytes leave. */
uint64_t rate_charge_locked(struct sn_rate *r, uint64_t now, uint64_t len, uint64_t since_ns);
/* For a caller that must not sleep (a posting thread): charges len and
 * returns true when the line is free now (no debt left: the bytes go at
 * once, as a NIC starts a WQE on an idle line, and the debt they leave is
 * paid by the next charge); false, charging nothing, while it is busy. */
bool rate_take_if_idle(struct sn_rate *r, uint64_t len, uint64_t since_ns);
bool rate_charge_if_idle_locked(struct sn_rate *r, uint64_t now, uint64_t len, uint64_t since_ns);
uint64_t sn_now_ns(void);
/* Sleeps until t (CLOCK_MONOTONIC ns), as late as the thread's timer slack
 * lets the kernel make it: NIC threads call sn_nic_thread_init first. */
void sn_sleep_until_ns(uint64_t t);
/* What every NIC thread (the engines, the wire's acceptor) does first: a
 * timer slack of 1 us, so that its waits end when they are due, and the
 * CPUs of SOFTNIC_NIC_CPUS when it is set. */
void sn_nic_thread_init(void);

/* ------------------------------------------------------------- spin.c */
/* Before an engine sleeps for lack of work it polls its epoll set for up
 * to conf.spin_us (0: not at all; sn_spin_on says which).
 * sn_spin_readable: true once fd has something to read (or is closed or
 * failed). */
bool sn_spin_on(void);
bool sn_spin_readable(int fd);
/* Spins begun and spins that found work, for softnic_ctl_spin_counts. */
void spin_counts(uint64_t *started, uint64_t *found);
/* After a step of the completer of a QP that a GPU drives (sn_qp.poll_acks),
 * within conf.ack_poll_us of the QP's last post or ACK, or of the responder
 * of its requests (SN_HELLO_POLL) that ran out of requests, its engine
 * polls its epoll set fd for up to conf.ack_poll_us before it sleeps: true
 * once fd has something to read.  Polls begun and those that found something, for
 * softnic_ctl_ack_polls. */
enum sn_poll_kind { SN_POLL_COMPLETER, SN_POLL_RESPONDER, SN_POLL_KINDS };
uint64_t sn_ack_poll_ns(void);   /* conf.ack_poll_us in ns, 0: off */
bool sn_ack_poll_readable(int fd, enum sn_poll_kind kind);
/* A responder connection told by its hello to poll, with polling on. */
void sn_ack_poll_conn(void);
void ack_poll_counts(uint64_t asked[SN_POLL_KINDS], uint64_t started[SN_POLL_KINDS],
                     uint64_t found[SN_POLL_KINDS], uint64_t *conns);
/* The CPUs this process may run on (sched_getaffinity), at least 1: the
 * spin cap's and SOFTNIC_ACK_POLL_US's default's measure of the host. */
int sn_usable_cores(void);

/* ---------------------------------------------------------- counters.c */
/* The receiving side's counts (the responder, on an engine) and the
 * sending side's (posting threads, the requester) lie a cache line apart,
 * and apart from their neighbours: where an application thread posts
 * while an engine receives on the same QP and port (a receiver's
 * clear-to-sends against its incoming writes), counts sharing a line
 * moved it between their CPUs on every message. */
struct sn_counters {
    char apart_before[64];
    _Atomic uint64_t rx_bytes, rx_packets;
    _Atomic uint64_t fast_bytes;    /* rx payload pulled by cma.c, not read off the wire */
    _Atomic uint64_t acks;          /* ACKs the responder sent to its peer (responder.c) */
    _Atomic uint64_t acks_noted;    /* ACKs it left as a note instead (ack_note.c) */
    _Atomic uint64_t rnr_naks, errors, retries;
    char apart[64];
    _Atomic uint64_t tx_bytes, tx_packets;
    _Atomic uint64_t direct_wqes;   /* tx WQEs a posting thread transmitted (requester.c) */
    _Atomic uint64_t pushed_wqes;   /* tx WQEs a posting thread placed in the peer (push.c) */
    _Atomic uint64_t stored_wqes;   /* of those, stored through a mapping (push_map.c) */
    _Atomic uint64_t post_calls;    /* ibv_post_send calls that queued send WQEs (qp.c) */
    char apart_after[64];
};
_Static_assert(offsetof(struct sn_counters, tx_bytes) >= offsetof(struct sn_counters, retries) + 8 + 64,
               "the two sides' counts share no cache line");

/* --------------------------------------------------------------- device */
struct sn_port {
    int num;                        /* 1-based */
    struct sn_port_conf conf;
    struct in_addr addr;
    union ibv_gid gid;
    _Atomic int state;              /* IBV_PORT_ACTIVE / IBV_PORT_DOWN */
    bool bound;                     /* listener could bind its IP */
    struct sn_rate tx_rate;
    struct sn_rate vf_rate;
    struct sn_counters cnt;
    /* request payload bytes the port's QPs sent, by the QP's GRH traffic
     * class (a NIC's per-priority counters; softnic_ctl_port_tc_bytes) */
    _Atomic uint64_t tc_tx_bytes[256];
    uint64_t up_since_ns;
};

struct sn_context;

struct sn_device {
    struct ibv_device ibdev;        /* what ibv_get_device_list hands out */
    int index;
    uint64_t guid;                  /* network order, as node_guid */
    int nports;
    struct sn_port port[SN_MAX_PORTS];
    pthread_mutex_t lock;           /* guards ctxs */
    struct sn_context *ctxs;        /* open contexts, for async events */
};

struct sn_async {
    struct ibv_async_event ev;
    struct sn_async *next;
};

struct sn_context {
    struct verbs_context vctx;      /* ibv_context is its last member */
    struct sn_device *dev;
    int async_pipe[2];
    pthread_mutex_t ev_lock;
    struct sn_async *ev_head, *ev_tail;
    struct sn_context *next;        /* in dev->ctxs */
};

static inline struct sn_context *sn_ctx(struct ibv_context *c)
{
    return (struct sn_context *)((char *)c - offsetof(struct sn_context, vctx.context));
}

/* Global state, created on first use (softnic_global()). */
struct softnic {
    struct sn_config conf;
    int ndevs;
    struct sn_device dev[SN_MAX_DEVICES];
    int init_err;
};
struct softnic *softnic_global(void);
struct sn_device *sn_device_of(struct ibv_context *c);
struct sn_port *sn_port_get(struct sn_device *d, int port_num);
/* Port up/down: changes state and raises PORT_ACTIVE/PORT_ERR. */
void device_port_set_state(struct sn_device *d, int port_num, bool up);
/* The device fails as a ConnectX does on a catastrophic error: every
 * context gets IBV_EVENT_DEVICE_FATAL and every port stops (no per-port
 * events: the device announces its own end). */
void device_set_fatal(struct sn_device *d);
/* Queues an async event on every open context of d (or one context). */
void async_post(struct sn_context *ctx, const struct ibv_async_event *ev);
void async_post_dev(struct sn_device *d, const struct ibv_async_event *ev);
void async_post_qp(struct ibv_qp *qp, enum ibv_event_type type);
/* Drops the queued events of a QP being destroyed (their element would
 * dangle), as the kernel does for events not yet read. */
void async_forget_qp(struct ibv_qp *qp);

int device_query_port(struct ibv_context *c, uint8_t port,
                      struct ibv_port_attr *attr, size_t len);
int device_query_device(struct ibv_context *c, struct ibv_device_attr *a);
int device_query_device_ex(struct ibv_context *c,
                           const struct ibv_query_device_ex_input *in,
                           struct ibv_device_attr_ex *a, size_t sz);
void sysfs_write_tree(struct softnic *s);
void fault_tx_bytes(struct sn_device *d, struct sn_port *p, uint64_t bytes);
void fault_poll(void);
/* Live QPs, CQs and MRs of the process (softnic_ctl_objects). */
extern _Atomic int64_t sn_live_qps, sn_live_cqs, sn_live_mrs;

/* ------------------------------------------------------------------- pd */
struct sn_pd {
    struct ibv_pd ibpd;
    _Atomic int users;    /* MRs, QPs and SRQs on it: dealloc says EBUSY */
};
/* Counts one more (+1) or one fewer (-1) object on pd. */
void pd_use(struct ibv_pd *pd, int delta);

/* ------------------------------------------------------------------- mr */
/* Host memory a same-host peer can map (share.c): a writable MAP_SHARED
 * mapping of a memfd sealed against shrinking; fd is this process's own
 * dup of it, off the file's offset at the region's start. */
struct sn_share {
    int fd;
    uint64_t dev, ino, off;
};
/* Whether [addr, addr+len) lies in such a mapping: true with *out filled
 * (share_drop closes its fd). */
bool share_find(const void *addr, uint64_t len, struct sn_share *out);
void share_drop(struct sn_share *s);
/* Whether the memfd open as fd can be mapped by a pusher for a region
 * ending need bytes into it: sealed against shrinking and at least that
 * long (a truncation cannot fault the pusher), and not on hugetlbfs (a
 * pusher's fault on a page its owner never touched can find the pool
 * empty: SIGBUS). */
struct stat;
bool share_file_ok(int fd, uint64_t need, struct stat *st);

struct sn_mr {
    struct ibv_mr ibmr;
    uint64_t iova;        /* address the keys are checked against */
    char *base;           /* host pointer (or CUDA address) of iova */
    uint64_t len;
    int access;
    bool gpu;             /* CUDA memory: copy with the driver API */
    bool dmabuf;          /* ibv_reg_dmabuf_mr: ibv_rereg_mr refuses it */
    bool shared;          /* share: a peer can map it (while published, push.c) */
    struct sn_share share;
    _Atomic int refs;     /* in-flight accesses + 1 for the table */
};

/* Looks up key, checks PD, access bits and [addr, addr+len) bounds; on
 * success takes a reference (mr_put) and returns 0, else an errno:
 * EINVAL unknown key, EACCES access, ERANGE bounds, EPERM PD. */
int mr_get(uint32_t key, bool remote, struct ibv_pd *pd, int need_access,
           uint64_t addr, uint64_t len, struct sn_mr **out);
void mr_put(struct sn_mr *mr);
/* Deregistrations between taking their key out of the table and the end
 * of push_mr_withdraw's walk: a record whose key is unknown may still be
 * landed by one of them while this is not 0 (push.c). */
extern _Atomic int sn_mr_withdrawing;
/* What key names for [addr, addr+len) in pd: host or CUDA memory, or
 * SN_MEM_UNKNOWN for a key not valid there and when the key table is being
 * changed, without waiting for it: for a caller holding a QP lock
 * (requester.c's posting thread), since ibv_rereg_mr holds the table while
 * it waits for references that may go only under that lock (a pulled WQE's,
 * released as its ACK is processed). */
enum sn_mem { SN_MEM_UNKNOWN, SN_MEM_HOST, SN_MEM_CUDA };
enum sn_mem mr_mem_try(uint32_t key, struct ibv_pd *pd, uint64_t addr, uint64_t len);
/* Stores len bytes at to in ascending 8-byte words (bytes where not
 * aligned), each a release store: a reader that sees one word of them sees
 * every word below it, as a ConnectX places a write in address order and a
 * receiver may poll any entry's last word.  memcpy promises no order
 * (glibc copies a large block's tail before its middle). */
void sn_store_ascending(void *to, const void *from, size_t len);
/* Copies between a registered region and host memory; a write of host
 * memory below SN_CMA_MIN_BYTES (a message's payload in hand) lands in
 * address order (sn_store_ascending); larger ones, and payloads pulled
 * from SN_CMA_MIN_BYTES on, keep the copy's own order. */
int mr_write(struct sn_mr *mr, uint64_t addr, const void *src, size_t len);
int mr_read(struct sn_mr *mr, uint64_t addr, void *dst, size_t len);
static inline char *mr_host_ptr(struct sn_mr *mr, uint64_t addr)
{
    return mr->base + (addr - mr->iova);
}

/* ------------------------------------------------------------- stats.c */
/* Counters of softnic's work by its role, printed on stderr at exit with
 * SOFTNIC_STATS=1 (stats.c says what for).  A thread names the role of what
 * it does (sn_stats_role: an engine before each step, the mlx5 NIC thread
 * once; unnamed threads count as the application's); sn_stat_add is a
 * no-op while stats are off. */
enum sn_role { SN_ROLE_APP, SN_ROLE_REQUESTER, SN_ROLE_RESPONDER, SN_ROLE_COMPLETER, SN_ROLE_MLX5,
               SN_ROLE_N };
enum sn_stat {
    SN_ST_DTOH, SN_ST_DTOH_BYTES,   /* copies out of GPU memory, and their bytes */
    SN_ST_HTOD, SN_ST_HTOD_BYTES,   /* copies into it */
    SN_ST_COPY_CALLS, SN_ST_COPY_NS, /* the driver's copy calls (one may batch several), their time */
    SN_ST_SYNC, SN_ST_SYNC_NS,      /* stream syncs, and the time they waited */
    SN_ST_TX_BATCHES, SN_ST_TX_WQES, /* requester batches, and the WQEs in them */
    SN_ST_ACKS, SN_ST_REQUESTS,     /* responder ACKs sent, requests executed */
    SN_ST_ACKS_NOTED,               /* responder ACKs left as a note (ack_note.c) */
    SN_ST_N
};
bool sn_stats_on(void);
void sn_stats_role(enum sn_role r);
void sn_stat_add(enum sn_stat s, uint64_t v);

/* --------------------------------------------------------------- gpu.c */
/* True when ptr is CUDA device memory (libcuda loaded on demand). */
bool gpu_is_device_ptr(const void *ptr);
/* At registration of GPU memory: makes the context its copies will run in
 * (creating softnic's own takes 0.1-0.5 s, more than a requester's retry
 * budget may allow once data moves); the caller's current context stays. */
void gpu_prepare(const void *ptr);
int gpu_copy_to_device(void *dst, const void *src, size_t len);
int gpu_copy_from_device(void *dst, const void *src, size_t len);
/* gpu_defer_writes(true): this thread's copies into GPU memory of up to a
 * staging buffer may return before they land (the responder's: one CUDA
 * sync per batch, not per write).  gpu_flush lands them (0, or EIO when
 * one failed); any other copy of the thread lands them too.  The caller
 * flushes before it tells anyone the data is there. */
void gpu_defer_writes(bool on);
bool gpu_writes_pending(void);
/* Deferred 8-byte writes that went to the GPU as cuStreamWriteValue64 (a
 * put_signal's signal behind its payload), for
 * softnic_ctl_gpu_value_writes: 0, or ENOTSUP when the driver has no such
 * call or refused one (*n is set either way). */
int gpu_value_writes(uint64_t *n);
int gpu_flush(void);
/* Reads of GPU memory that land later (the requester's: one CUDA sync per
 * batch of payloads, as a NIC keeps several DMA reads in flight).
 * gpu_read_deferred starts a copy of len bytes from src into this thread's
 * staging buffer (the reads of one flush go to the driver together, in one
 * batch where it has cuMemcpyBatchAsync); *out is where they will be once
 * gpu_flush returns 0, and
 * stays valid until the thread's next copy after that flush.  ENOSPC when
 * the stage has no room left for len (or the thread has no pinned stage):
 * the caller lands what it has first, or copies with gpu_copy_from_device,
 * which lands the deferred copies and then reuses the stage (only with
 * nothing deferred still to be read). */
int gpu_read_deferred(const void *src, size_t len, const void **out);

/* ------------------------------------------------------------- atomic.c */
/* Executes an 8-byte RDMA atomic on [addr, addr+8) of mr (checked by the
 * caller: aligned, in bounds, REMOTE_ATOMIC): fetch-and-add of swap_add, or
 * (cas) compare-and-swap of swap_add where the word equals compare.  *old
 * gets the word's value before.  Atomic against every other atomic this
 * process executes: a host word with a CPU atomic (so also against CPU
 * atomics of other processes mapping it), a GPU word under one process-wide
 * lock around the CUDA read-modify-write.  0, or an errno (CUDA copy). */
int atomic_execute(struct sn_mr *mr, uint64_t addr, bool cas, uint64_t swap_add,
                   uint64_t compare, uint64_t *old);
static inline bool sn_wr_is_atomic(enum ibv_wr_opcode op)
{
    return op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP;
}
/* RDMA READ and atomics: answered with data, bounded by max_rd_atomic. */
static inline bool sn_wr_is_read_like(enum ibv_wr_opcode op)
{
    return op == IBV_WR_RDMA_READ || sn_wr_is_atomic(op);
}
/* What a provider checks of any send WR at post time, whatever the QP
 * type: an opcode softnic knows and at most max_send_sge SGEs. 0 or EINVAL;
 * the SGEs' byte total in *total. */
static inline int sn_send_wr_check(const struct ibv_qp_cap *cap, const struct ibv_send_wr *wr, uint64_t *total)
{
    switch (wr->opcode) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
    case IBV_WR_ATOMIC_CMP_AND_SWP:
        break;
    default:
        return EINVAL;
    }
    if (wr->num_sge < 0 || (uint32_t)wr->num_sge > cap->max_send_sge)
        return EINVAL;
    *total = 0;
    for (int i = 0; i < wr->num_sge; i++)
        *total += wr->sg_list[i].length;
    return 0;
}
#define SN_ATOMIC_SIZE 8
#define SN_MAX_RD_ATOMIC 16

/* ------------------------------------------------------------------- cq */
/* Completion sink for the mlx5 companion (softnic_priv.h). */
typedef void (*sn_cq_hook)(void *arg, const struct ibv_wc *wc);

/* A completion in a CQ's ring, on a line of its own: seq is the
 * completion's number + 1 (0: never written), stored last. */
struct sn_cqe {
    struct ibv_wc wc;
    _Atomic uint64_t seq;
    char pad[64 - sizeof(struct ibv_wc) - sizeof(uint64_t)];
};
_Static_assert(sizeof(struct sn_cqe) == 64, "a completion on one line");

struct sn_cq {
    /* ibv_cq_ex begins with ibv_cq's fields: an extended CQ (cq_ex.c) is
     * the same object, with its poll functions filled in. */
    union {
        struct ibv_cq ibcq;
        struct ibv_cq_ex ibcq_ex;
    };
    struct ibv_wc ex_cur;          /* the completion start/next_poll took */
    /* The ring (cq.c): the NIC threads add under `lock`, a poll takes
     * under `poll_lock`, and neither takes the other's lock or writes the
     * other's lines, so a completion costs the polling CPU one line (its
     * entry), not the lock, the count and the head a NIC thread on another
     * CPU wrote as well. */
    pthread_mutex_t lock;          /* adders: tail, cons_seen, armed, overrun, hook */
    struct sn_cqe *ring;           /* cap entries, one line each; resize takes both locks */
    int cap;
    uint64_t tail;                 /* completions ever added */
    uint64_t cons_seen;            /* `cons` as an adder last read it */
    int armed;                     /* 0, 1 = next, 2 = solicited */
    bool overrun;
    char poll_apart[64];           /* padding, not _Alignas: calloc'd */
    pthread_mutex_t poll_lock;     /* polls: head */
    uint64_t head;                 /* completions ever taken */
    _Atomic uint64_t cons;         /* head as the last poll left it, for the adders' room check */
    char poll_apart_after[64];
    int users;                     /* QPs attached: destroy says EBUSY */
    sn_cq_hook hook;
    void *hook_arg;
    struct sn_counters cnt;
    /* QPs of this recv CQ that same-host peers push WRITE_WITH_IMM into:
     * a poll collects their completions (push.c) */
    pthread_mutex_t push_lock;
    struct sn_qp *_Atomic push_qps;
    _Atomic int push_nqps;            /* on that list */
    _Atomic int push_watch[SN_PUSH_WATCH]; /* their slots + 1 while at most that many (push.c; 0: none) */
    _Atomic uint64_t push_bell_seen;  /* the region's bell at the last look */
    _Atomic bool push_rescan;         /* a QP's lock was busy at the last look */
    /* QPs of this send CQ whose polls complete their sends from their
     * responders' notes (ack_note.c); changed under push_lock */
    struct sn_qp *note_qp[SN_NOTE_WATCH];
    _Atomic uint64_t *_Atomic note_word[SN_NOTE_WATCH]; /* their notes (push_note_word), packed */
    _Atomic uint64_t note_seen[SN_NOTE_WATCH]; /* the note each one's completions were made from */
    _Atomic int note_nqps;
    struct sn_cq *note_next;          /* the CQs with watched QPs (ack_note_settle) */
};
void cq_push(struct sn_cq *cq, const struct ibv_wc *wc, bool solicited);
void cq_attach(struct ibv_cq *cq, int delta);

/* ------------------------------------------------------------------ srq */
struct sn_rwqe {
    uint64_t wr_id;
    int num_sge;
    struct ibv_sge sge[SN_MAX_SGE];
    uint64_t idx;                  /* taken: its index among the receives pushers
                                    * see (push.c), SN_RWQE_NO_IDX without */
};
#define SN_RWQE_NO_IDX UINT64_MAX

struct sn_srq {
    struct ibv_srq ibsrq;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct sn_rwqe *ring;
    uint32_t cap, head, count;
    uint32_t max_sge;
    uint32_t limit;                /* armed SRQ limit, 0 = disarmed */
    _Atomic int users;             /* QPs attached: destroy says EBUSY */
};
/* Takes one receive WQE; false when empty. */
bool srq_take(struct sn_srq *srq, struct sn_rwqe *out);

/* ------------------------------------------------------------------- qp */
struct sn_swqe {
    uint64_t wr_id;
    enum ibv_wr_opcode opcode;
    unsigned int send_flags;
    uint32_t imm;                  /* network order, as in the WR */
    uint64_t raddr;
    uint32_t rkey;
    uint64_t compare_add, swap;    /* atomics: the WR's operands */
    uint32_t len;                  /* total payload (atomics: 8) */
    uint32_t seq;                  /* wire sequence, set when sent */
    bool ack_req;                  /* its request asks for an ACK (SN_REQ_ACKREQ), set when sent */
    uint64_t posted_ns;            /* when ibv_post_send took it: the port's rate limit
                                      earns credit from then on (rate.c) */
    int num_sge;
    struct ibv_sge sge[SN_MAX_SGE];
    char *inl;                     /* inline copy (malloc'd), or NULL */
    /* a pulled WQE's source MRs (cma.c): the responder reads them after the
     * requester let go of the WQE, so they stay referenced -- a dereg waits
     * for them, as for a NIC's DMA -- until the WQE completes, flushes or the
     * QP is reset or destroyed (qp.c) */
    struct sn_mr *pin[SN_MAX_SGE];
    int npin;
};

/* A pusher's last look at its peer slot's receives posted and done (push.c):
 * only the posting thread that holds tx_busy reads or writes it. */
struct sn_push_seen {
    uint64_t posted, done;
};

struct sn_rconn;
struct sn_req;
struct sn_comp;

struct sn_qp_ex;

enum sn_qp_role { SN_QP_REQUESTER, SN_QP_COMPLETER, SN_QP_RESPONDER, SN_QP_ROLES };

struct sn_qp {
    /* ibv_qp_ex begins with the ibv_qp: a QP created with send ops flags
     * (qp_ex.c) is the same object, its ibv_wr_* functions filled in. */
    union {
        struct ibv_qp ibqp;
        struct ibv_qp_ex ibqp_ex;
    };
    struct sn_qp_ex *ex;           /* the work-request builder, or NULL */
    char lock_apart_before[64];
    pthread_mutex_t lock;
    pthread_cond_t cond;           /* state, placements, completions: for the
                                    * application's threads (engines never wait) */
    struct sn_req *req;            /* the requester's state and task (requester.c) */
    struct sn_comp *comp;          /* the completer's (completer.c) */
    struct ibv_qp_attr attr;       /* what modify/query see */
    _Atomic uint8_t tc;            /* attr.ah_attr.grh.traffic_class, for the sending thread */
    struct ibv_qp_cap cap;
    bool sq_sig_all;
    struct sn_port *port;
    struct sn_device *dev;

    /* The *_apart pads keep the lock, the send queue, the receive queue,
     * the engine's and the responder's fields on lines of their own: a
     * rank posts sends (clear-to-sends) on the QP whose receives an engine
     * completes on another CPU, and fields sharing a line with the ones
     * the other side writes cost a miss inside the lock. */
    char sq_apart[64];
    /* whoever holds tx_busy (the requester's step, or a posting thread on
     * the direct path) owns the requester's batch and the send side of
     * out_fd; tx_held: bytes of a batch are not yet on the wire (the
     * requester's task sends them), so the direct path waits */
    bool tx_busy, tx_held;
    uint64_t last_progress_ns;     /* last response, or work arriving */
    /* send queue: [head, sent) on the wire, [sent, tail) to send */
    struct sn_swqe *sq;
    char *sq_inline;               /* max_inline_data bytes per slot */
    uint32_t sq_size;
    uint64_t sq_head, sq_sent, sq_tail;
    uint32_t next_seq;
    uint32_t unreq;                /* WQEs sent since the last that asked for an ACK */

    char rq_apart[64];
    /* receive queue (unused with an SRQ) */
    struct sn_rwqe *rq;
    uint32_t rq_size, rq_head, rq_count;

    /* engine */
    char engine_apart[64];
    int out_fd;                    /* requester -> peer responder */
    bool conn_dead;                /* out_fd failed: retry budget running */
    bool cma_ok;                   /* out_fd's responder pulls payloads (cma.c) */
    /* push.c: the peer process this QP places small writes in (NULL: the
     * wire), and its QP's slot there; as a responder, our own slot (-1) */
    struct sn_push_peer *push_peer;
    uint32_t push_to_slot, push_to_gen;
    struct sn_push_seen push_seen;  /* the peer slot's counts as its pusher last read them */
    int push_slot;
    uint32_t out_conn_id;          /* the hello's conn_id of out_fd's connection */
    /* as a responder with a slot: receives are indexed in the order they
     * are taken (by the engine, or by a pushed WRITE_WITH_IMM); rx_popped
     * taken from rq, rx_next the first index without its completion
     * (completions appear in index order); push_cq_next: the recv CQ's list
     * of QPs whose pushed completions its polls collect */
    char rx_apart[64];
    uint64_t rx_next, rx_popped;
    uint64_t rx_pub;               /* the first index whose receive the slot does not show yet (push.c) */
    uint64_t rx_done_bits[64];     /* engine completions that appeared ahead of rx_next */
    bool rx_flush_deferred;        /* a flush waits for them (push_rx_flush_waits_locked) */
    struct sn_qp *push_cq_next;
    bool push_cq_listed;
    _Atomic int note_watch;        /* its index in its send CQ's note_qp (ack_note.c), -1: none */
    bool stopping;
    bool poll_acks;                /* a GPU drives it (softnic_priv_qp_poll_acks): the
                                    * completer polls for ACKs it awaits (spin.c) */
    int nresp;                     /* attached responder threads */
    /* Placements count themselves without the QP's lock, which the
     * receiving application takes for every post: a placement adds itself
     * to placing, then reads rx_live; ibv_modify_qp(ERR) clears rx_live,
     * then waits for placing to reach 0 (both sequentially consistent, so
     * one of the two sees the other).  Apart from the fields before
     * them: the application's polls write the send side's. */
    char place_apart[64];
    _Atomic int placing;           /* responders writing into memory now:
                                    * ibv_modify_qp(ERR) returns when none is */
    _Atomic int placing_waiters;   /* ibv_modify_qp(ERR) calls waiting for that:
                                    * the last placement wakes qp->cond only then */
    _Atomic bool rx_live;          /* responder_qp_receiving, kept by responder_rx_live_locked */
    int recv_waiters;              /* responders waiting for a receive WQE (RNR):
                                    * ibv_post_recv kicks them only then */
    struct sn_rconn *rconns;
    struct sn_counters cnt;
    /* engine steps each role of this QP ran (softnic_ctl_qp_steps): an
     * idle role runs none */
    _Atomic uint64_t steps[SN_QP_ROLES];
};

static inline struct sn_qp *sn_qp_of(struct ibv_qp *q) { return (struct sn_qp *)q; }

/* Budget for retries after a stall, in ns, from timeout/retry_cnt. */
uint64_t qp_retry_budget_ns(struct sn_qp *qp);
uint64_t qp_rnr_budget_ns(uint8_t rnr_retry, uint8_t min_rnr_timer);
/* Moves qp to ERR: the send WQE with index culprit (UINT64_MAX: none)
 * completes with st, every other outstanding one and every receive WQE
 * with IBV_WC_WR_FLUSH_ERR.  Caller holds qp->lock. */
void qp_error_locked(struct sn_qp *qp, uint64_t culprit, enum ibv_wc_status st,
                     uint32_t vendor_err);
/* Drops a send WQE's pinned MRs (qp->lock held). */
void qp_unpin_locked(struct sn_swqe *w);
/* Completes the send WQE at sq_head (caller holds qp->lock). */
void qp_complete_send_locked(struct sn_qp *qp, enum ibv_wc_status st);
/* Takes a receive WQE from the QP's RQ or SRQ; false when none. */
bool qp_take_recv(struct sn_qp *qp, struct sn_rwqe *out);
void qp_flush_recv_locked(struct sn_qp *qp);
/* The receive WQE at the head of qp's RQ, taken off it (one is there). */
struct sn_rwqe qp_rq_pop_locked(struct sn_qp *qp);

/* ---------------------------------------------------------------- wire */
/* The longest added latency a port takes (latency_us): a responder waits
 * no longer than this for a request's deliver_ns, whatever the peer sent
 * (its clock is not ours when it is another host's). */
#define SN_MAX_LATENCY_US 2000000u

#define SN_WIRE_MAGIC 0x534e4943u  /* "SNIC" */
#define SN_WIRE_VERSION 5

enum sn_wire_op {
    SN_OP_SEND = 1,
    SN_OP_SEND_IMM,
    SN_OP_WRITE,
    SN_OP_WRITE_IMM,
    SN_OP_READ,
    SN_OP_ATOMIC_FA,       /* followed by struct sn_wire_atomic; len 8 */
    SN_OP_ATOMIC_CS,
};

enum sn_resp_type {
    SN_RESP_ACK = 1,       /* every request with seq <= resp.seq done */
    SN_RESP_READ,          /* followed by len bytes of data */
    SN_RESP_NAK,           /* syndrome: an ibv_wc_status for the WQE */
    SN_RESP_RNR_WAIT,      /* receiver waits for a receive WQE */
    SN_RESP_ATOMIC,        /* followed by the 8-byte original value */
    SN_RESP_HELLO,         /* first, to a hello offering CMA: syndrome 1 = accepted */
};

/* Operands of an atomic request (after its struct sn_wire_req). */
struct sn_wire_atomic {
    uint64_t swap_add;      /* FA: the addend; CS: the new value */
    uint64_t compare;       /* CS only */
};

/* Hello sent once by the requester on a new connection. */
struct sn_wire_hello {
    uint32_t magic;
    uint16_t version;
    uint8_t rnr_retry;
    uint8_t pad;
    uint32_t dst_qpn;
    uint32_t src_qpn;
    uint8_t src_gid[16];
    uint32_t hflags;        /* SN_HELLO_CMA */
    uint32_t pid;           /* the requester's process (CMA) */
    uint64_t token_addr;    /* where its token lives, for the responder's probe */
    uint64_t token;
    uint32_t fd;            /* its descriptor of this connection: where the responder
                             * looks first for the socket it must own (cma.c) */
    uint32_t conn_id;       /* a random nonzero name of this connection (0: none): the
                             * responder's notes of what it executed carry it (push.c) */
    uint32_t note_region_fd; /* SN_HELLO_NOTE: the requester's push region (its fd) */
    uint32_t note_slot;     /* and its QP's slot there, where the notes go */
};
#define SN_HELLO_CMA 1
/* the requesting QP is one a GPU drives (sn_qp.poll_acks): the responder
 * polls for its next request before it sleeps (SOFTNIC_ACK_POLL_US) */
#define SN_HELLO_POLL 2
/* the requester places small writes itself when the responder offers it
 * (push.c): the answer's syndrome has SN_ANSWER_PUSH and a struct
 * sn_wire_push_offer follows the answer */
#define SN_HELLO_PUSH 4
/* the responder leaves a note of what it executed in the requester's slot
 * (note_region_fd, note_slot; push.c) before it acknowledges; the slot
 * also says whether the requester's polls complete from the note, and
 * then no ACK goes on the wire (ack_note.c) */
#define SN_HELLO_NOTE 8
#define SN_ANSWER_CMA 1
#define SN_ANSWER_PUSH 2
struct sn_wire_push_offer {
    uint32_t magic;         /* SN_WIRE_MAGIC */
    uint32_t pid;           /* the responder's process */
    uint32_t conn_fd;       /* its descriptor of this connection (cma_check_peer's hint) */
    uint32_t region_fd;     /* its shared region's descriptor, opened through /proc */
    uint64_t token_addr;    /* its token, for the requester's probe read */
    uint64_t token;
    uint32_t slot, gen;     /* its QP's slot in the region */
};

/* Request header; WRITE/SEND payload of len bytes follows. */
struct sn_wire_req {
    uint8_t op;
    uint8_t flags;          /* SN_REQ_SOLICITED */
    uint16_t pad;
    uint32_t seq;
    uint32_t len;
    uint32_t rkey;
    uint64_t raddr;
    uint32_t imm;
    uint32_t pad2;
    uint64_t deliver_ns;    /* not to be placed before (latency) */
};
#define SN_REQ_SOLICITED 1
/* the payload is not on the wire: a struct sn_wire_cma and its nseg
 * struct sn_cma_seg follow the header instead (WRITE/SEND only), naming
 * the requester's memory for the responder to pull (cma.c) */
#define SN_REQ_CMA 2
/* the requester asks for an ACK of this request (AckReq): its WQE is
 * signaled, or it is the SN_ACKREQ_EVERY-th since the last that asked.  The
 * responder acknowledges other requests when a later one asks, or within
 * its ACK coalescing delay (responder.c), as an RC NIC coalesces the ACKs
 * of unsignaled writes */
#define SN_REQ_ACKREQ 4
#define SN_ACKREQ_EVERY 4

struct sn_wire_cma {
    uint32_t nseg;          /* 1..SN_MAX_SGE */
    uint32_t pad;
};
struct sn_cma_seg {
    uint64_t addr;
    uint64_t len;
};

struct sn_wire_resp {
    uint8_t type;
    uint8_t syndrome;
    uint16_t pad;
    uint32_t seq;
    uint32_t len;
    uint32_t pad2;
};

/* Starts the listeners (idempotent); returns 0 or an errno. */
int wire_start(void);
/* Allocates a QPN bound to the listener block; 0 = exhausted. */
uint32_t wire_alloc_qpn(void);
void wire_free_qpn(uint32_t qpn);
/* Starts connecting to the listener that owns qpn at gid, from local port
 * ip: a non-blocking socket in *fd_out, connected or on its way (0), or an
 * errno. */
int wire_connect_start(const struct sn_port *local, const union ibv_gid *gid,
                       uint32_t qpn, int *fd_out);
/* How a connection wire_connect_start began is doing: 0 connected,
 * EINPROGRESS not yet (wait until it is writable), or why it failed. */
int wire_connect_result(int fd);

/* ------------------------------------------------------------ link.c */
/* Bytes/s an unlimited port carries (SOFTNIC_LINK_RATE, or measured once). */
uint64_t link_calibrated_rate(const struct sn_config *c);
/* The fastest standard width x speed not above rate (bytes/s). */
void link_for_rate(uint64_t rate, uint8_t *width, uint8_t *speed);
/* What port p advertises: its rate limit's link, or the calibration's. */
void link_of_port(const struct sn_config *c, const struct sn_port *p, uint8_t *width,
                  uint8_t *speed);
/* Mb/s of a width x speed (0 for codes that name no link). */
uint32_t link_mbps(uint8_t width, uint8_t speed);
/* sysfs's ports/<n>/rate text for a width x speed. */
void link_rate_string(uint8_t width, uint8_t speed, char *buf, size_t len);

/* ---------------------------------------------------------- hostlink.c */
/* The PCIe link device d stands for: tenths of GT/s per lane, lanes, and
 * the Mb/s of data they carry (railnet_pcie.h). */
struct sn_host_link {
    unsigned gts_x10;
    unsigned width;
    uint64_t mbps;
};
void hostlink_of_device(const struct sn_config *c, const struct sn_device *d, struct sn_host_link *out);
/* sysfs's current_link_speed text: "8.0 GT/s PCIe". */
void hostlink_speed_string(const struct sn_host_link *l, char *buf, size_t len);

/* ------------------------------------------------------------- cma.c */
/* Payloads below this go on the wire: a syscall costs more than the copy. */
#define SN_CMA_MIN_BYTES 4096
/* Offers the fast path in a hello (when SOFTNIC_FASTPATH allows). */
void cma_hello_fill(struct sn_wire_hello *h);
/* When the peer on fd is the process the hello names, in our network
 * namespace, and its memory can be read: a pidfd of it (the caller closes
 * it); else -1: the wire. */
int cma_accept_peer(int fd, const struct sn_wire_hello *h);
/* The same proof for any peer: process pid owns the other end of fd
 * (fd_hint: its descriptor of it, where it looks first) in our namespace
 * (over a UNIX socket: the kernel names pid as the process at the other
 * end), and reading its token at token_addr gives token.  A pidfd, or -1. */
int cma_check_peer(int fd, uint32_t pid, uint32_t fd_hint, uint64_t token_addr, uint64_t token);
/* Whether process pid owns the TCP socket listening on ip:port in our
 * network namespace (our own process does). */
bool cma_listener_owner(uint32_t pid, struct in_addr ip, uint16_t port);
/* Whether the process of pidfd (from cma_check_peer) still runs: its pid
 * then names no other process. */
bool cma_peer_alive(int pidfd);
/* This process's token and where it lives, for an answer's offer. */
void cma_token(uint64_t *addr, uint64_t *token);
/* Reads len bytes at offset off of the segments of process pid into dst;
 * 0, ECONNRESET when the process is gone or the memory is no longer there,
 * EPROTO on a short descriptor.  The caller has made sure, with
 * cma_peer_alive on the pidfd of cma_accept_peer, that pid is still that
 * process: once per engine step, not per pull (a system call each). */
int cma_pull(uint32_t pid, const struct sn_cma_seg *seg, int nseg, uint64_t off, void *dst, size_t len);
void wire_tune(int fd);

/* ------------------------------------------------------------ push.c */
/* The largest write the requester places itself: what would otherwise
 * travel on the wire; from SN_CMA_MIN_BYTES the responder pulls the
 * payload instead (one copy either way, and the poster does not copy
 * what a NIC moves in the background). */
#define SN_PUSH_MAX_BYTES (SN_CMA_MIN_BYTES - 1)
struct sn_push_peer;
struct sn_mr;
/* Responder side: publish / withdraw a region's key (withdraw returns when
 * no push into it is under way, and the bytes pushed into it that waited
 * in completion records are in place), a port's state, a QP's state and access
 * (qp->lock held); the offer for a connection whose requester asked (false:
 * none); the slot's release at destroy. */
void push_mr_publish(struct sn_mr *mr);
void push_mr_withdraw(struct sn_mr *mr);
void push_port_update(const struct sn_device *d, const struct sn_port *port);
void push_qp_update_locked(struct sn_qp *qp);
bool push_offer_locked(struct sn_qp *qp, int conn_fd, struct sn_wire_push_offer *o);
void push_qp_release_locked(struct sn_qp *qp);
/* The receive side of a WRITE_WITH_IMM push, for a QP with a slot (the
 * others: no-ops, and push_rq_take_locked returns -1).  qp->lock held:
 * n receives posted; the next receive for the engine (1 with *out and its
 * index, 0 none now, -1 not a pushed-into QP); the engine's completion of
 * receive idx appeared (or its receive is gone without one); completions
 * of pushed writes made now (every QP's, through its recv CQ: push_cq_collect,
 * without locks). */
void push_rq_posted_locked(struct sn_qp *qp, uint32_t n);
int push_rq_take_locked(struct sn_qp *qp, struct sn_rwqe *out);
void push_rx_done_locked(struct sn_qp *qp, uint64_t idx);
/* Before a flush of the RQ (qp->lock held): true when pushed receives
 * wait behind the engine's; the flush then runs after them. */
bool push_rx_flush_waits_locked(struct sn_qp *qp);
int push_rx_collect_locked(struct sn_qp *qp);
void push_cq_collect(struct sn_cq *cq);
/* A responder's acknowledgement that needs no wire and outlives its
 * process: a note in the same-host requester's slot that every request up
 * to seq of the connection conn_id (its hello's) was executed.
 * The requester: push_note_offer_locked takes qp's slot (if it has none)
 * and names it in the hello (SN_HELLO_NOTE; false: no slot, the wire's ACK
 * is the only word), the slot's note starting at "nothing executed" of
 * h->conn_id; qp->lock held.  push_note_polled_set says in the slot
 * whether its polls complete from the note (ack_note.c);
 * push_note_word is where the slot's note is (mapped for the process's
 * life: a poll reads it without a lock); push_acked_locked the note of
 * qp's slot (false: none), conn_id << 32 | seq, for the caller to match
 * with its connection.
 * The responder: push_note_peer maps the slot a hello named (the pid
 * proven as for the fast path; pidfd is the callee's), push_note_write
 * leaves a note there, only over one of the same connection (false: the
 * slot is another's now), push_note_polled reads the requester's word. */
bool push_note_offer_locked(struct sn_qp *qp, struct sn_wire_hello *h);
void push_note_polled_set(int slot, bool on);
_Atomic uint64_t *push_note_word(int slot);
bool push_acked_locked(const struct sn_qp *qp, uint64_t *note);
struct sn_push_peer *push_note_peer(uint32_t pid, uint32_t region_fd, int pidfd, uint32_t slot);
void push_note_peer_put(struct sn_push_peer *p);
bool push_note_write(struct sn_push_peer *p, uint32_t slot, uint32_t conn_id, uint32_t seq);
bool push_note_polled(const struct sn_push_peer *p, uint32_t slot);
/* Bytes and packets peers pushed into qp (qp != NULL) or into port
 * port_num of d. */
void push_rx_counts(const struct sn_qp *qp, const struct sn_device *d, int port_num, uint64_t *bytes,
                    uint64_t *packets);
/* Requester side: takes the offer that came on fd (checks the peer first;
 * without the QP's lock), lets it go (qp->lock held), and places the
 * send queue's next WQEs while they qualify (qp->lock held): true when it
 * placed any. */
/* The pusher's mappings of one peer's shared regions (push_map.c): ref
 * describes a region as its owner published it (key, its fd there, iova,
 * length, the file's identity and offset); push_maps_at gives its first
 * byte in this process, mapped on first use once the file is checked, or
 * NULL (not mappable: the system call places it).  push_store places len
 * bytes of lv[0..nl) there in ascending 8-byte words, each visible only
 * after those below it. */
struct sn_share_ref {
    uint32_t key, fd;
    uint64_t iova, len, dev, ino, off;
};
struct sn_push_maps;
/* push_maps_free(m, unmap): unmap false in a forked child, where the
 * mappings (MADV_DONTFORK) are not, and their addresses may be another's. */
struct sn_push_maps *push_maps_new(void);
void push_maps_free(struct sn_push_maps *m, bool unmap);
/* gone(arg, key): the peer's region of that key can be forgotten (no
 * longer published, no push into it under way): its entry may make room
 * for another once the table is full. */
char *push_maps_at(struct sn_push_maps *m, uint32_t pid, const struct sn_share_ref *ref,
                   bool (*gone)(const void *arg, uint32_t key), const void *arg);
void push_store(char *dst, const struct iovec *lv, unsigned long nl, uint32_t len);
/* Copies the pieces lv[0..nl) one after the other to to, at most cap
 * bytes: how many it copied. */
size_t push_gather(char *to, size_t cap, const struct iovec *lv, unsigned long nl);
void push_attach(struct sn_qp *qp, int fd, const struct sn_wire_push_offer *o);
void push_detach_locked(struct sn_qp *qp);
bool push_try_locked(struct sn_qp *qp);
/* Registers/unregisters a QP in the qpn table used by incoming hellos. */
void wire_qp_register(struct sn_qp *qp);
void wire_qp_unregister(struct sn_qp *qp);
/* Finds qpn and counts one more responder on it (qp->nresp), or NULL. */
struct sn_qp *wire_qp_attach(uint32_t qpn);

/* ----------------------------------------------------------- engine.c */
/* The pool of engine threads that every QP's work runs on (engine.c says
 * how).  A step does a bounded amount of work without waiting and returns
 * what it waits for: SN_ENG_IN / SN_ENG_OUT on its fd (engine_task_fd),
 * SN_ENG_MORE when it stopped with work left (queued again, behind the
 * others), SN_ENG_POLL_* when its engine should poll for SOFTNIC_ACK_POLL_US
 * before it sleeps (a GPU-driven QP's next ACK or request is due soon),
 * SN_ENG_DONE when the task is over (it is freed after the step; the step
 * has let go of its fd with engine_task_fd(t, -1) first).  A time it waits
 * for it sets with engine_task_at; a task's timer is cancelled when it
 * runs, so each step states all it waits for. */
#define SN_ENGINE_DEFAULT 4     /* engines when SOFTNIC_ENGINES is unset: at most this, half the cores */
#define SN_ENGINES_MAX 64u      /* the most SOFTNIC_ENGINES may ask for */
enum {
    SN_ENG_IN = 1, SN_ENG_OUT = 2, SN_ENG_MORE = 4, SN_ENG_POLL_COMP = 8, SN_ENG_POLL_RESP = 16,
    SN_ENG_DONE = 32,
};
struct sn_eng_task;
typedef unsigned (*sn_eng_step)(struct sn_eng_task *t, void *arg);
/* A task for step(arg), starting the engines on first use; 0 or an errno.
 * role: what its work counts as (SOFTNIC_STATS). */
int engine_task_new(sn_eng_step step, void *arg, enum sn_role role, struct sn_eng_task **out);
/* The fd SN_ENG_IN/OUT refer to (-1: none); from the task's own step, or
 * before it first runs.  Set -1 before the fd is closed. */
void engine_task_fd(struct sn_eng_task *t, int fd);
/* Runs the task no later than ns (CLOCK_MONOTONIC, sn_now_ns). */
void engine_task_at(struct sn_eng_task *t, uint64_t ns);
/* Runs the task soon (again, if it is running). */
void engine_task_kick(struct sn_eng_task *t);
/* The task sets a connection up (its steps are costly and not on any
 * data's path): it waits in the setup queue, which gets a share of the
 * engines.  From its own step, or before it first runs. */
void engine_task_setup(struct sn_eng_task *t, bool setup);
/* Unschedules the task, waits for a step under way to end, frees it.
 * Never from an engine. */
void engine_task_del(struct sn_eng_task *t);
/* The engines the pool starts (SOFTNIC_ENGINES or the default). */
int engine_threads_wanted(void);
struct sn_engine_counts {
    int engines;        /* running (0 before the first QP) */
    uint32_t tasks;     /* alive */
    uint64_t steps;     /* steps run */
    uint64_t wakeups;   /* times an engine slept and woke */
    uint64_t timers;    /* timers that fired */
    uint64_t cpu_ns;    /* CPU time the engine threads took, all together */
};
void engine_counts(struct sn_engine_counts *out);

/* ---------------------------------------------------- QP roles on the engines */
/* The requester and completer tasks of qp, made at its first move to RTS
 * (requester_start) and ended by requester_stop / completer_stop
 * (qp_engine_stop, which closes out_fd after them). */
int requester_start(struct sn_qp *qp);
void requester_stop(struct sn_qp *qp);
/* The requester has something to act on (a post, a state change, a READ
 * answered): qp->lock held. */
void requester_kick_locked(struct sn_qp *qp);
/* Called by qp_post_send with qp->lock held: transmits the new WQEs from
 * the posting thread when that is safe and cheap (requester.c says when);
 * false when the requester's task must do it. */
bool requester_try_direct_locked(struct sn_qp *qp);
/* Lets the calling thread's direct transmits copy small CUDA payloads out
 * of GPU memory themselves (a copy takes ~10 us), on a QP with nothing
 * else in flight: for the mlx5 NIC thread,
 * whose posts are a NIC taking WQEs at the doorbell.  An application's
 * ibv_post_send leaves that copy to the requester thread, as a NIC's post
 * returns at once. */
void requester_direct_copies_cuda(bool on);
int completer_start(struct sn_qp *qp);
void completer_stop(struct sn_qp *qp);
/* out_fd is connected: the completer reads it from now on (qp->lock held). */
void completer_kick_locked(struct sn_qp *qp);
/* Work came whose answer the completer times (a post on an idle QP): it
 * runs at the end of the retry budget unless an answer comes first
 * (qp->lock held). */
void completer_arm_locked(struct sn_qp *qp);
/* A note of its responder's (push.c): the WQEs on the wire it covers
 * succeed, up to the first READ or atomic (qp->lock held). */
void completer_note_locked(struct sn_qp *qp, uint64_t note);
/* ack_note.c: the requester's completions from its responder's notes.
 * At a connection's start (qp->lock held), its note slot goes into the
 * hello, and the QP joins its send CQ's polls when they can complete
 * from it; ack_note_leave_locked takes it off them (qp->lock held);
 * ack_note_poll is a poll's look; ack_note_cq_hooked: the CQ's polls no
 * longer make its completions (a hook does), the QPs say so to their
 * responders. */
void ack_note_hello_locked(struct sn_qp *qp, struct sn_wire_hello *h);
void ack_note_leave_locked(struct sn_qp *qp);
void ack_note_poll(struct sn_cq *cq);
void ack_note_cq_hooked(struct sn_cq *cq);
/* What every watching CQ's poll would complete from the notes, completed
 * now: a deregistration waiting for WQEs that pin its region (mr.c). */
void ack_note_settle(void);
/* Runs one incoming connection (fd accepted by wire.c). */
void responder_spawn(int fd);
/* Shuts every responder connection of qp down and waits for them. */
void responder_stop_qp(struct sn_qp *qp);
/* Shuts the QP's incoming connections down (caller holds qp->lock). */
void responder_kick_locked(struct sn_qp *qp);
/* The QP changed state or got receive WQEs: its responders waiting for
 * either look again (caller holds qp->lock). */
void responder_wake_locked(struct sn_qp *qp, bool recv_posted);
/* qp->rx_live again from the QP's state and stopping (caller holds
 * qp->lock, after changing either). */
void responder_rx_live_locked(struct sn_qp *qp);

/* ------------------------------------------------------ ud.c, udwire.c */
/* Address handles (verbs.c): what ibv_create_ah was given, for a UD send. */
struct sn_ah {
    struct ibv_ah ibah;
    struct ibv_ah_attr attr;
};

/* A UD datagram on the wire: one UDP datagram from the sending port's IP
 * to the receiving port's IP, UDP port (dst_qpn >> 8) -- the listener
 * block's number, so (GID, QPN) names the socket as it names the TCP
 * listener of an RC QP -- this header, then len payload bytes (at most
 * the port MTU).  Host byte order, both ends are this library; every field
 * is checked on receipt (udwire.c) and a datagram that fails is dropped
 * and counted. */
#define SN_UD_MAGIC 0x534e5544u   /* "SNUD" */
#define SN_UD_VERSION 1
struct sn_ud_hdr {
    uint32_t magic;
    uint8_t version;
    uint8_t op;             /* SN_OP_SEND or SN_OP_SEND_IMM */
    uint8_t flags;          /* SN_REQ_SOLICITED */
    uint8_t tclass;         /* the AH's traffic class and hop limit: the */
    uint8_t hop_limit;      /* receiver's GRH (IPv4 TOS and TTL) shows them */
    uint8_t pad[3];
    uint32_t dst_qpn;
    uint32_t src_qpn;
    uint32_t qkey;
    uint32_t imm;           /* network order, as in the WR */
    uint32_t len;           /* payload bytes after the header */
    uint32_t pad2;
};
/* The GRH a UD receive gets in front of the payload (IB spec 11.4.1.3). */
#define SN_GRH_BYTES 40

/* Opens the datagram sockets of qpn's listener block (one per port IP,
 * bound to UDP port qpn >> 8, read by an engine task each), once per
 * block: 0 or an errno (EADDRINUSE: another program holds that UDP port). */
int udwire_open(uint32_t qpn);
/* Sends one datagram from the socket of qpn's block on local port ip to
 * dst (IPv4, network order); 0 or an errno. */
int udwire_send(uint32_t src_qpn, struct in_addr ip, struct in_addr dst,
                const struct sn_ud_hdr *h, const void *payload, uint32_t len);
/* A datagram udwire.c validated (from: its source IP, on: the IP it
 * arrived on): ud.c finds its QP and places it, or drops it. */
void ud_deliver(const struct sn_ud_hdr *h, const void *payload, struct in_addr from,
                struct in_addr on);
/* ibv_post_send on a UD QP (qp.c's qp_post_send hands it over). */
int ud_post_send(struct sn_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
/* The address handle attributes that answer a datagram received on
 * port_num (ibv_init_ah_from_wc): 0, or EINVAL without a valid GRH. */
int ud_ah_attr_from_grh(uint8_t port_num, const struct ibv_wc *wc, const struct ibv_grh *grh,
                        struct ibv_ah_attr *a);
/* Process-wide UD counters (softnic_ctl_ud_counts). */
struct sn_ud_counts {
    _Atomic uint64_t sent, delivered, malformed, no_qp, bad_qkey, no_recv;
};
extern struct sn_ud_counts sn_ud_cnt;
/* The port MTU in bytes. */
static inline uint32_t sn_mtu_bytes(int mtu) { return 128u << mtu; }
/* The packets a payload of len bytes takes at that MTU (at least one: a
 * request without payload is a packet too), as the port counters count. */
static inline uint64_t sn_mtu_packets(uint64_t len, int mtu)
{
    uint64_t n = (len + sn_mtu_bytes(mtu) - 1) / sn_mtu_bytes(mtu);
    return n ? n : 1;
}

/* ---------------------------------------------------- qp_ex.c, cq_ex.c */
/* Makes qp an extended QP for the IBV_QP_EX_WITH_* ops in send_ops (RC
 * ones only): fills ibqp_ex's builder functions.  0 or an errno
 * (EOPNOTSUPP for an op softnic does not offer). */
int qp_ex_init(struct sn_qp *qp, uint64_t send_ops);
void qp_ex_free(struct sn_qp *qp);
struct ibv_cq_ex *cq_create_ex(struct ibv_context *c, struct ibv_cq_init_attr_ex *attr);

/* ------------------------------------------------------------ helpers */
int cq_hook_set(struct ibv_cq *cq, sn_cq_hook hook, void *arg);
int qp_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);

#endif
