/* plugin/gin/gin.h: the core behind ncclGinPlugin_v11, proxy type
 * (include/nccl_gin_v11.h states NCCL's side of the contract).
 *
 * One collComm (struct gin_coll) reaches every rank of the job: per peer, the
 * TCP socket the handshake ran on, kept open (its EOF says the peer process
 * is gone; registrations exchange their keys over it) and, on a collComm of
 * the proxy type or of an RMA table, one RC QP per port of the (merged)
 * device ("proxy QPs"), all on one CQ. A collComm of the GDAKI type (a GIN
 * table's connect while railnet offers NCCL that type: gin_connect's
 * gdaki_type) has no proxy QPs, no CQ and no data path: NCCL never calls
 * iput, iputSignal or test on it, only createContext (each GDAKI context
 * brings its own QPs, gin_gdaki.c), the registrations, ginProgress,
 * queryLastError, destroyContext and closeColl. The data path's calls and
 * an RMA context are refused there (gin_proxy_only: ncclInvalidUsage). Both
 * ends of every pair say in the handshake whether they have proxy QPs, and
 * a pair that differs is refused (gin_wire.h). Built on plugin/ib: devices,
 * QPs (qp.h), registrations (mr.h), the listen handle and CRC
 * (handshake.h), sockets (oob.h), completion statuses (errors.h), config.
 *
 * Data path (gin_put.c): a put is an RDMA WRITE; a put with signal is the
 * WRITE then a 64-bit RDMA FETCH_AND_ADD on the same QP (the old value lands
 * in a scratch word), posted only once every work request posted earlier to
 * that peer on its other QPs has completed, so that a signal implies all
 * earlier data to the peer (NCCL's rule). A get is an RDMA READ of the
 * peer's window into the local one; a flush, a one-byte RDMA READ of the
 * local window through the QP connected to this rank itself (the NIC's read
 * of GPU memory completes only after its earlier writes there). Puts and
 * gets alternate over the peer's QPs (both ports); one of RAILNET_SPLIT_MIN
 * bytes or more is split over all of them.
 *
 * Requests come in lanes (struct gin_lane): a pool of GIN_PEER_REQS
 * requests per peer and, per peer, a FIFO of them in the order the caller
 * gave. What cannot be posted now (send queue full, signal fence) waits in
 * its FIFO and is posted by test/progress; a request below GIN_PEER_REQS
 * outstanding per peer and lane is never refused; beyond, the call returns
 * a NULL request (try again). The collComm's own lane (lane0) serves the
 * GIN tables' iput/iputSignal; each context of an RMA context (gin_rma.c)
 * is a lane of its own: NCCL 2.30 keeps its queue depth in flight per
 * context and peer, and orders only within a context. All lanes share the
 * peer's QPs and the collComm's CQ; a signal's fence covers whatever any
 * lane posted before it.
 *
 * Completions are selective (gin_put.c says when a work request is
 * signaled): an RC QP completes in order, so a successful completion
 * retires every work request posted before it on that QP. A request is
 * done once each QP it used has retired its last work request there.
 *
 * Threading: puts, gets, flushes, test and progress of a collComm come
 * from one thread at a time (NCCL's GIN or RMA progress thread);
 * registrations and contexts may come and go from another (NCCL's user
 * thread), so the window list and the lane list each have a lock; different
 * collComms are independent. */
#ifndef RAILNET_GIN_H
#define RAILNET_GIN_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>

#include "errors.h"
#include "handshake.h"
#include "nccl_gin_v11.h"
#include "qp.h"

#define GIN_MAX_RANKS 4096
/* NCCL 2.28.9 keeps at most 32 * maxRecvs (= 256) descriptors outstanding
 * per target rank (its queue size, a power of two, capped there); that many
 * requests per peer, allocated once per collComm. */
#define GIN_MAX_RECVS 8
/* Signal offsets of a window remembered for the failure release (gin_rma_release.c). */
#define GIN_RELEASE_OFFS 16
#define GIN_NCCL_QUEUE (NCCL_NET_MAX_REQUESTS * GIN_MAX_RECVS)
#define GIN_PEER_REQS GIN_NCCL_QUEUE
/* Send queue of one QP: every request of its peer, at most two work
 * requests each on one QP (write and atomic, or a split part and the
 * completion marker its signal's fence may need), plus one marker a test
 * may ask for (gin_put.c). */
#define GIN_SQ_DEPTH (2 * GIN_NCCL_QUEUE + 8)
/* The top of RAILNET_GIN_SIGNAL_EVERY's range (plugin/ib/config.c): a run
 * of unsignaled work requests must stay well inside the send queue. */
#define GIN_SIGNAL_EVERY_MAX 128
_Static_assert(GIN_SIGNAL_EVERY_MAX < GIN_SQ_DEPTH / 2, "a signaled work request in every half send queue");
#define GIN_MAX_PUT ((size_t)1 << 31)   /* bytes one work request can carry */

#define GIN_LISTEN_MAGIC 0x4c4e4947u    /* live-object tags: a stale or foreign pointer is refused */
#define GIN_COLL_MAGIC 0x434e4947u
#define GIN_MR_MAGIC 0x4d4e4947u

struct gin_gdaki_res;
struct gin_gdaki_win;

enum gin_req_state { GR_FREE = 0, GR_QUEUED, GR_WRITTEN, GR_POSTED, GR_DONE };

/* wr_id of every work request: the sequence number it has on its QP (for
 * retiring the QP up to it), whether it is a completion marker (a
 * zero-byte write that only carries a completion), the QP index within the
 * peer, and the request (a marker: the peer's first request slot, naming
 * the peer). */
#define GIN_WR_ID(seq, marker, qi, idx) \
    ((uint64_t)(seq) << 22 | (uint64_t)(marker) << 21 | (uint64_t)(qi) << 20 | (uint64_t)(idx))
#define GIN_WR_SEQ(id) ((id) >> 22)
#define GIN_WR_MARKER(id) ((int)(((id) >> 21) & 1u))
#define GIN_WR_QP(id) ((int)(((id) >> 20) & 1u))
#define GIN_WR_IDX(id) ((uint32_t)((id) & 0xfffffu))
#define GIN_WR_PEER(id) (GIN_WR_IDX(id) / GIN_PEER_REQS)
_Static_assert((uint64_t)GIN_MAX_RANKS * GIN_PEER_REQS <= (1u << 20) && HS_MAX_PORTS <= 2,
               "request index and QP index fit their wr_id fields");

struct gin_req {
    uint8_t state;
    uint8_t has_data, has_signal;
    uint8_t is_get;              /* the data part is an RDMA READ (a get or a flush), else a WRITE */
    uint8_t src_host;            /* source window in host memory: small writes may go inline */
    uint8_t qp;                  /* QP of the (last) data transfer and of the atomic */
    uint32_t peer;
    uint32_t index;              /* in its lane's reqs */
    uint64_t last[HS_MAX_PORTS]; /* seq of its last work request on each QP; 0: none there */
    uint64_t need[HS_MAX_PORTS]; /* signal fence: seq each other QP must retire first */
    uint64_t laddr, raddr;       /* local and remote ends of the data part */
    uint32_t len, lkey, rkey;
    uint64_t sig_raddr, sig_add;
    uint32_t sig_rkey;
};

struct gin_qp {
    struct qp_conn conn;
    uint64_t posted;   /* work requests posted (seq of the last one) */
    uint64_t retired;  /* seq up to which a successful completion proved them done */
    uint64_t sig_seq;  /* seq of the last signaled one: what retired can reach without more posts */
    uint64_t probe_posted; /* a test found a request's tail uncovered at this posted count ... */
    uint32_t probe_req;    /* ... that request's index + 1 (0: none); gin_put.c */
    uint32_t probe_tests;  /* tests since, finding the same */
};

/* What the data path did, for RAILNET_STATS=1 (logged at closeColl). */
struct gin_stats {
    uint64_t wrs;       /* work requests posted, markers included */
    uint64_t signaled;  /* of them signaled */
    uint64_t markers;   /* zero-byte writes posted only for a completion */
    uint64_t cqes;      /* successful completions polled */
};

struct gin_peer {
    int fd;                       /* TCP socket of the handshake; -1 for self */
    uint64_t nonce;               /* nonce of its listen handle */
    int nqps;
    struct gin_qp qps[HS_MAX_PORTS];
    unsigned next_qp;             /* round robin of puts and gets; starts at the peer's distance (peer - own rank, mod nranks) */
    unsigned last_qp;             /* QP of the latest transfer: a lone signal goes behind it */
    uint64_t gone_ns;             /* when its socket was seen closed; 0 while open */
};

/* One peer's part of a lane. Slots 0 .. fresh-1 have been used; freed ones
 * wait in free_list. */
struct gin_lane_peer {
    uint32_t fifo[GIN_PEER_REQS]; /* requests not fully posted, in order */
    uint32_t head, tail;
    uint32_t fresh;
    uint32_t nfree;
    uint32_t free_list[GIN_PEER_REQS];
};

/* A stream of requests (see the top of this file). Its arrays are zeroed
 * allocations touched only for the peers it is used with. */
struct gin_lane {
    struct gin_coll *coll;        /* NULL once closeColl orphaned it (gin_lanes_release) */
    struct gin_req *reqs;         /* [nranks * GIN_PEER_REQS]: peer p's are p * GIN_PEER_REQS + slot */
    struct gin_lane_peer *lp;     /* [nranks] */
    int pending;                  /* requests not completed yet */
    int queued;                   /* requests in its FIFOs (not fully posted) */
};

struct gin_coll {
    uint32_t magic;
    int dev;
    char dev_name[64];
    int rank, nranks;
    uint64_t comm_id;             /* the communicator's id from init (0: none) */
    unsigned ordinal;             /* rank 0's listen ordinal on its init context (gin_listen): which of
                                   * the communicator's collComms this is, the same on every rank */
    int nports;
    struct qp_port ports[HS_MAX_PORTS];
    struct qp_params qpp;
    int proxy_qps;                /* per peer one QP per port on cq, lane0 and scratch (the proxy type, RMA);
                                   * 0: none of them (the GDAKI type, see the top of this file) */
    struct ibv_cq *cq;
    struct gin_peer *peers;       /* [nranks] */
    struct gin_lane *lane0;       /* the GIN tables' iput/iputSignal */
    struct gin_lane **lanes;      /* [nlanes]: lane0, then the RMA contexts' */
    int nlanes, lanes_cap;
    unsigned lane_turn;           /* progress starts at another lane each time */
    pthread_mutex_t lanes_mu;     /* contexts come and go from NCCL's user thread while its progress
                                   * thread walks the lanes */
    uint64_t *scratch;            /* old values fetched by signal atomics; flush READs land here */
    void *scratch_mh;
    uint32_t scratch_lkey;
    int pending;                  /* requests not completed yet, all lanes (atomic: a context's
                                   * destruction takes its own off from another thread) */
    uint32_t win_seq;             /* registrations so far: peers must agree */
    struct gin_mr *wins;          /* live windows: a handle is checked against them, never dereferenced first */
    pthread_mutex_t wins_mu;      /* NCCL registers windows from its own thread while the GIN progress
                                   * thread puts: the list is shared */
    ncclResult_t error;           /* sticky; first failure wins */
    int errors_by_query;          /* an RMA context was made (gin_rma.c): once failed, requests complete
                                   * and only queryLastError reports the error */
    uint64_t fail_posts;          /* requests made after the failure (atomic): gin_rma_release.c's pace */
    int rel_busy;                 /* gin_rma_release_step under way (atomic) */
    uint64_t rel_start_ns, rel_last_ns; /* the release's first and latest advance (comm_now_ns) */
    uint64_t rel_posts;           /* fail_posts at the latest advance */
    unsigned rel_rounds;
    int rel_stopped;              /* a round failed: no further ones */
    uint64_t split_min;           /* RAILNET_SPLIT_MIN: a put this large is split over the peer's QPs */
    uint64_t signal_every;        /* RAILNET_GIN_SIGNAL_EVERY: at most this many work requests per signaled one */
    struct gin_stats stats;
    uint64_t last_check_ns;       /* gin_check_peers */
    uint64_t last_async_ns;       /* gin_check_async */
    struct errors_watch async;    /* plugin/ib errors.c: the device's async events this collComm has seen */
    int gdaki_type;               /* NCCL was offered the GDAKI type: its layout (gin_gdaki.h), else 0 */
    struct gin_gdaki_res *gdaki;  /* its DEVX context and PD, which every GDAKI context (one set of QPs
                                   * and tables per createContext) and window uses; NULL until needed */
    int nconnections;             /* GIN v12's connect: connection ids below this are valid (0: one) */
    int queue_depth;              /* GIN v12's connect: NCCL's queue depth (0: none asked) */
};

struct gin_listen {
    uint32_t magic;
    int dev;
    uint64_t comm_id;
    int fd;
    uint64_t nonce;               /* its low byte: the listen's ordinal (gin_listen) */
    uint8_t handle[HS_HANDLE_SIZE];
};

/* A symmetric window: mhandle and ginHandle are the same pointer. */
struct gin_mr {
    uint32_t magic;
    struct gin_coll *coll;
    void *mh;                     /* plugin/ib registration */
    uint32_t lkey;
    uint64_t base, size;
    uint64_t *addr;               /* [nranks] */
    uint64_t *len;                /* [nranks] */
    uint32_t *rkey;               /* [nranks] */
    struct gin_gdaki_win *gdaki;  /* GDAKI type: the zero-based registration and device handle */
    int strict;                   /* NCCL_NET_MR_FLAG_FORCE_SO: NCCL's GIN proxy registers its signals so */
    int cuda_dev;                 /* the GPU whose memory it is; -1 host memory, -2 CUDA memory of no known GPU */
    int nsig_offs;                /* offsets the rank's own iputSignal named in it (gin_rma_release.c) */
    uint64_t sig_offs[GIN_RELEASE_OFFS];
    struct gin_mr *next;          /* the collComm's live windows */
};

/* gin_coll.c */
/* comm_id: the communicator's id from init (0: none); its collComms share
 * a failure (gin_group_fail). */
/* ordinal: how many listens the communicator's init context made before
 * this one; carried in the low byte of the handle's nonce, so that every
 * rank reads rank 0's from the handles connect gets (gin_coll.ordinal). */
ncclResult_t gin_listen(int dev, uint64_t comm_id, unsigned ordinal, void *handle, void **listen_comm);
ncclResult_t gin_close_listen(void *listen_comm);
/* gdaki_type: the GDAKI layout NCCL was offered for this collComm (a GIN
 * table's connect: gin_gdaki_offered()), which then has no proxy QPs; 0:
 * the proxy type or an RMA table, with them. Every rank must pass the same
 * kind (the handshake refuses a pair that differs). */
ncclResult_t gin_connect(void *handles[], int nranks, int rank, void *listen_comm, int gdaki_type,
                         void **coll_comm);
ncclResult_t gin_close_coll(void *coll_comm);
struct gin_coll *gin_coll_of(void *coll_comm, const char *what);

/* gin_mr.c */
ncclResult_t gin_reg_mr_sym(void *coll_comm, void *data, size_t size, int type, uint64_t offset, int fd,
                            uint64_t flags, void **mhandle, void **gin_handle);
ncclResult_t gin_dereg_mr_sym(void *coll_comm, void *mhandle);

/* gin_rma_release.c: ending the application's kernels of a failed collComm
 * under NCCL 2.30's GIN proxy (which runs over the RMA table). NCCL gives a
 * user's device communicator no abort flag, so a kernel waiting for a dead
 * peer's signal spins for good and ncclCommAbort waits for it in its own
 * cuMemFreeHost. Once the collComm failed and an RMA context exists,
 * gin_rma_release_step (called from rmaProgress, i.e. from NCCL's GIN
 * progress thread while NCCL still drives the context) advances the
 * signals the rank's kernels wait on: every word of a window NCCL
 * registered with NCCL_NET_MR_FLAG_FORCE_SO (its signal buffers), and the
 * words of other windows that this rank's iputSignal named (VA signals). */
void gin_rma_release_note_signal(struct gin_mr *m, uint64_t off);
/* What a failure release adds to a signal or counter: a kernel waiting for
 * growth of up to 2^16 gets through, and one bump per kernel keeps NCCL's
 * 32-bit rolling compares on the "reached" side for 2^15 kernels. */
#define GIN_RELEASE_DELTA (1ull << 16)
/* Adds GIN_RELEASE_DELTA to the n 64-bit words at addr: host memory in
 * place (cuda_dev < 0), GPU cuda_dev's through a side context that never
 * waits for the application's kernels (gin_gdaki_release.c). 0 or -1. */
int gin_release_advance(int cuda_dev, uint64_t addr, size_t n, char *err, size_t el);
void gin_rma_release_step(struct gin_coll *c);
struct gin_mr *gin_mr_of(struct gin_coll *c, void *mhandle, const char *what);
/* closeColl: windows NCCL did not deregister go with the collComm. */
void gin_mr_free_all(struct gin_coll *c);

/* gin_put.c: lanes. gin_lane_add makes one and links it to c (lanes_mu);
 * gin_lane_remove unlinks and frees it, dropping its requests (their work
 * requests in flight still retire on the QPs); a lane closeColl orphaned is
 * only freed. gin_lanes_init makes lane0 at connect; gin_lanes_release, at
 * closeColl, frees lane0 and orphans the rest (their contexts free them). */
ncclResult_t gin_lanes_init(struct gin_coll *c);
void gin_lanes_release(struct gin_coll *c);
ncclResult_t gin_lane_add(struct gin_coll *c, struct gin_lane **out);
void gin_lane_remove(struct gin_lane *l);
/* The data path of one lane; `what` names the call in WARNs. A put with
 * sig_mh NULL has no signal (sig_off, sig_value and sig_op are then not
 * read). A get reads rank's part of remote_mh into the local window. A
 * flush makes the gets that completed before it visible to the GPU (a READ
 * of mh's own part through the QP to this rank); where mh needs none (host
 * memory, unless RAILNET_GDR_FLUSH=2) it gives a NULL request. */
ncclResult_t gin_lane_put(struct gin_coll *c, struct gin_lane *l, const char *what, uint64_t src_off, void *src_mh,
                          size_t size, uint64_t dst_off, void *dst_mh, uint32_t rank, uint64_t sig_off, void *sig_mh,
                          uint64_t sig_value, uint32_t sig_op, void **request);
ncclResult_t gin_lane_get(struct gin_coll *c, struct gin_lane *l, const char *what, uint64_t remote_off,
                          void *remote_mh, size_t size, uint64_t local_off, void *local_mh, uint32_t rank,
                          void **request);
ncclResult_t gin_lane_flush(struct gin_coll *c, struct gin_lane *l, const char *what, void *mh, void **request);
/* On a failed collComm: a request to rank that is complete already (nothing
 * is posted), or the collComm's error when the lane has none left. */
ncclResult_t gin_lane_failed_request(struct gin_coll *c, struct gin_lane *l, uint32_t rank, void **request);
/* The GIN tables' puts: lane0. */
ncclResult_t gin_iput(void *coll_comm, uint64_t src_off, void *src_mh, size_t size, uint64_t dst_off, void *dst_mh,
                      uint32_t rank, void **request);
ncclResult_t gin_iput_signal(void *coll_comm, uint64_t src_off, void *src_mh, size_t size, uint64_t dst_off,
                             void *dst_mh, uint32_t rank, uint64_t sig_off, void *sig_mh, uint64_t sig_value,
                             uint32_t sig_op, void **request);
/* A request of any lane of the collComm. */
ncclResult_t gin_test(void *coll_comm, void *request, int *done);
/* Polls the CQ and posts what every lane's FIFOs allow. */
ncclResult_t gin_progress(void *coll_comm);
/* Requests still owed a completion, all lanes (close logs them). */
int gin_outstanding(const struct gin_coll *c);
/* Whether requests to peer p wait for the network: queued, or posted and
 * not all retired, in any lane (gin_errors.c fails the comm when such a
 * peer is gone). Called from progress, lanes_mu held. */
int gin_peer_busy(const struct gin_coll *c, int p);

/* gin_errors.c */
void gin_fail(struct gin_coll *c, ncclResult_t err);
/* ncclSuccess on a collComm with proxy QPs; else one WARN naming `call`
 * and ncclInvalidUsage: the data path's entry points (iput, iputSignal,
 * test, an RMA context, through which iget and iflush come) ask it first,
 * so that nothing below them meets a peer without QPs. */
ncclResult_t gin_proxy_only(struct gin_coll *c, const char *call);
/* A setup exchange stream (regMrSym's or GDAKI's WINs and QPs) failed, was
 * garbled or was skipped: gin_fail, and every peer socket shut down (not
 * closed) so that the peers' exchanges see EOF at once instead of waiting
 * out RAILNET_HANDSHAKE_TIMEOUT. */
void gin_fail_exchange(struct gin_coll *c, ncclResult_t err);
/* The collComm's error (set by any thread), with one WARN naming `call`
 * when there is one: a call that would use its setup streams refuses a
 * failed collComm, whose streams may be out of step. */
ncclResult_t gin_failed(struct gin_coll *c, const char *call);
/* A failed completion: one WARN naming device, peer rank, QP and status. */
void gin_report_wc(struct gin_coll *c, const struct ibv_wc *wc);
/* Every 50 ms while requests are pending: peers whose socket closed fail the
 * comm after a grace period for completions in flight. */
void gin_check_peers(struct gin_coll *c);
/* Every 20 ms of progress, pending requests or not: the device's async
 * events (drained by plugin/ib's errors.c) since the collComm was created
 * fail it at once, with one WARN naming the event: the device failed
 * (IBV_EVENT_DEVICE_FATAL), a port its QPs use went down
 * (IBV_EVENT_PORT_ERR), one of its QPs got a fatal
 * event (IBV_EVENT_QP_FATAL, _REQ_ERR, _ACCESS_ERR), its CQ overran
 * (IBV_EVENT_CQ_ERR). A collComm has no failover: its puts would otherwise
 * wait out the QP retry budget. */
void gin_check_async(struct gin_coll *c);
/* A communicator's collComms (one per GIN context) fail together: NCCL
 * asks queryLastError until one context says so, and then tears down all of
 * them. gin_group_fail marks the communicator `comm_id` failed for the life
 * of the process (a few ids; 0 marks nothing); gin_group_failed asks. */
void gin_group_fail(uint64_t comm_id);
int gin_group_failed(uint64_t comm_id);
/* createContext/destroyContext/queryLastError: see gin_errors.c.
 * ncontexts and backend reach the GDAKI type (gin_gdaki.h): the number of
 * contexts NCCL's device code indexes, and NCCL 2.30.7's backendVersion
 * (-1 where the face has none); depth: NCCL's queue depth (GIN v12's
 * connect, v14's config; 0: none asked), the GDAKI type's send ring size. */
ncclResult_t gin_create_context(void *coll_comm, int nsignals, int ncounters, int ncontexts, int backend, int depth,
                                void **gin_ctx, ncclNetDeviceHandle_v11_t **dev_handle);
ncclResult_t gin_destroy_context(void *gin_ctx);
/* ginProgress of tables that name the context (GIN v13/v14): the proxy
 * type's context progresses its collComm. */
ncclResult_t gin_ctx_progress(void *gin_ctx);
ncclResult_t gin_query_last_error(void *gin_ctx, bool *has_error);

/* gin_rma.c: RMA contexts (NCCL 2.30's RMA tables), with the arguments of
 * ncclRma_v14_t; test is gin_test. gin_rma_create's dev_handle (may be
 * NULL) gets a host-only handle of the proxy type, for GIN v13's
 * createContext. */
#define GIN_RMA_MAX_CONTEXTS 256
ncclResult_t gin_rma_create(void *coll_comm, int ncontexts, int traffic_class, int rank_stride, void **rma_ctx,
                            ncclNetDeviceHandle_v11_t **dev_handle);
ncclResult_t gin_rma_destroy(void *rma_ctx);
ncclResult_t gin_rma_iput(void *rma_ctx, int context, uint64_t src_off, void *src_mh, size_t size, uint64_t dst_off,
                          void *dst_mh, uint32_t rank, void **request);
ncclResult_t gin_rma_iput_signal(void *rma_ctx, int context, uint64_t src_off, void *src_mh, size_t size,
                                 uint64_t dst_off, void *dst_mh, uint32_t rank, uint64_t sig_off, void *sig_mh,
                                 uint64_t sig_value, uint32_t sig_op, bool strong, void **request);
ncclResult_t gin_rma_iget(void *rma_ctx, int context, uint64_t remote_off, void *remote_mh, size_t size,
                          uint64_t local_off, void *local_mh, uint32_t rank, void **request);
ncclResult_t gin_rma_iflush(void *rma_ctx, int context, void *mh, uint32_t rank, void **request);
ncclResult_t gin_rma_progress(void *rma_ctx);
ncclResult_t gin_rma_query_last_error(void *rma_ctx, bool *has_error);

#endif
