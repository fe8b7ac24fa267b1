/* txbatch.h: a batch of send WQEs on its way to the wire (txbatch.c): the
 * requester's (requester.c) and a posting thread's on the direct path. */
#ifndef SOFTNIC_TXBATCH_H
#define SOFTNIC_TXBATCH_H

#include "softnic.h"
#include "txbuf.h"

#include <sys/uio.h>

#define BATCH_WQES 64
#define BATCH_BYTES (256 * 1024)
#define BATCH_IOV 1000

struct sn_tx_batch {
    int n;               /* WQEs taken from the send queue, b->w[0..n) */
    int built;           /* of which the frames of [0, built) were built */
    uint64_t first;      /* w[0]'s index in the send queue */
    int bad;             /* a WQE that failed locally (IBV_WC_LOC_PROT_ERR), -1: none */
    uint64_t since_ns;   /* when its first WQE was posted (rate.c's credit) */
    bool prepaid;        /* its bytes were charged to the rate limit already (a direct batch) */
    bool cma;            /* the peer pulls host payloads (cma.c) */
    uint32_t latency_us; /* the port's added latency, stamped on each request */
    int mtu;
    struct sn_swqe w[BATCH_WQES];
    struct sn_wire_req hdr[BATCH_WQES];
    struct sn_wire_atomic atom[BATCH_WQES];
    struct {
        struct sn_wire_cma d;
        struct sn_cma_seg seg[SN_MAX_SGE];
    } cma_desc[BATCH_WQES];
    struct sn_mr *pin[SN_MAX_SGE];   /* the pulled WQE being added's MRs */
    int npin;
    /* the frames built and not yet sent: iov[at, niov) */
    struct iovec iov[BATCH_IOV + SN_MAX_SGE + 1];
    bool staged[BATCH_IOV + SN_MAX_SGE + 1];   /* in this thread's CUDA stage (gpu.c) */
    int niov, at;
    struct sn_mr *refs[BATCH_IOV];
    int nrefs;
    void *bounces[BATCH_IOV + BATCH_WQES * SN_MAX_SGE];
    int nbounces;
    /* CUDA payloads read behind each other (gpu_read_deferred): the first
     * WQE with one not yet landed (-1: none), and where each WQE's iovecs
     * begin, to cut the batch there when the reads fail */
    int gpu_first;
    int iov_at[BATCH_WQES];
    /* the piece at iov[at] being paced: its iovecs, the bytes charged to
     * the rate limit so far and what is still to charge, and when the
     * charged bytes may leave */
    bool piece;
    int piece_n;
    struct iovec rest;          /* the part of a payload iovec cut off the piece */
    uint64_t piece_payload, piece_pulled, pulled_left;
    bool wire_charged;
    uint64_t due;
};

/* Builds the frames of WQEs [built, n): headers, atomic operands, payloads
 * gathered from registered memory (CUDA memory read behind each other and
 * landed at the end), descriptors of payloads the peer pulls.  Stops early
 * when the iovec or the CUDA stage is full (push what it built, then build
 * again) or at a WQE whose local keys are bad (b->bad). */
void txbatch_build(struct sn_qp *qp, struct sn_tx_batch *b);

enum sn_push {
    PUSH_DONE,     /* all built frames are on the wire or in tx */
    PUSH_PACED,    /* the rate limit holds the next piece until *due */
    PUSH_FULL,     /* the connection has no room (tx holds bytes): wait for SN_ENG_OUT */
    PUSH_MORE,     /* a step's share went out: let the other tasks run */
    PUSH_ERR,      /* the connection failed (*err) */
};
/* Sends the built frames in paced pieces through tx (txbuf.h).  force: the
 * posting thread's prepaid batch: every piece goes now, what the socket
 * does not take waits in tx. */
enum sn_push txbatch_push(struct sn_qp *qp, struct sn_tx_batch *b, struct sn_txbuf *tx, int fd,
                          bool force, uint64_t *due, int *err);
/* Before the batch waits between steps: copies of what it holds in this
 * thread's CUDA stage, which the thread's next copies reuse.  0 or ENOMEM. */
int txbatch_detach(struct sn_tx_batch *b);
/* Lets go of the MRs and bounce buffers of the frames built so far. */
void txbatch_release(struct sn_tx_batch *b);

#endif
