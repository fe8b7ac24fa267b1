/* rconn.h: an incoming connection, the responder's side of a peer QP's
 * requester: its life (rconn.c: hello, the peer's acceptance, the end) and
 * the requests it executes (responder.c), one task on the engines. */
#ifndef SOFTNIC_RCONN_H
#define SOFTNIC_RCONN_H

#include "rbuf.h"
#include "softnic.h"
#include "txbuf.h"

/* A receive completion held back until the ACK (or NAK) covering its
 * request is on the wire: once a receiver sees a completion, the sender's
 * acknowledgement must not depend on the receiver staying alive. */
struct pend_wc {
    struct ibv_wc wc;
    bool solicited;
    uint64_t idx;                /* its receive's index (sn_rwqe.idx) */
};
#define PEND_WC 64

/* Placements whose CUDA writes may be in flight at once (land_writes). */
#define LAND_MAX 32

/* Where the request being executed is (responder.c): reading its header,
 * waiting for the link or its delivery time, for a receive WQE, placing its
 * payload, sending a READ's response. */
enum rc_phase { PH_HEADER, PH_WAIT, PH_RECV, PH_PLACE, PH_READ };

struct sn_rconn {
    int fd;
    struct sn_eng_task *task;
    struct sn_qp *qp;            /* once the hello named it (attached: qp->nresp) */
    struct sn_port *port;
    struct sn_rconn *next;       /* in qp->rconns */
    enum { RC_HELLO, RC_ACCEPT, RC_RUN, RC_DRAIN } state;
    uint64_t deadline;           /* of the hello, or of the drain */
    bool shut;                   /* the drain's NAK went out and our side is shut */
    struct sn_wire_hello hello;
    size_t hello_got;
    bool no_kick;                /* this task is failing the QP itself */
    bool poll_next;              /* a GPU-driven requester: poll for its next request */
    uint8_t rnr_retry;
    uint32_t peer_qpn;
    uint32_t expect_seq;
    bool ack_pending;
    uint32_t ack_seq;
    bool ack_lazy;               /* no request the pending ACK covers asked for one */
    uint64_t ack_due;            /* and then when it goes all the same */
    int err;                     /* first send error */
    int deferred;                /* placements whose CUDA writes are in flight (land_writes) */
    int nheld;
    struct sn_mr *held[LAND_MAX * SN_MAX_SGE]; /* and their MRs, a reference each until then */
    int npend;
    struct pend_wc pend[PEND_WC];
    struct sn_rbuf rb;
    bool have_rb;
    struct sn_txbuf tx;          /* responses the socket has not taken yet */
    uint32_t cma_pid;            /* the requester's pid when it may be pulled from */
    int cma_pidfd;               /* and a pidfd of it; -1 otherwise */
    bool cma_alive;              /* the pidfd said it runs, in this step */
    /* the requester's slot for our notes of what we executed (its hello's
     * SN_HELLO_NOTE, mapped: push.c), NULL: none */
    struct sn_push_peer *note_peer;
    uint32_t note_slot;
    char *bounce;                /* pulled bytes bound for CUDA memory */

    /* the request being executed */
    enum rc_phase ph;
    struct sn_wire_req h;
    struct sn_wire_atomic atom;
    uint64_t deliver_until;      /* not placed before (added latency), bounded */
    /* its payload when it is pulled (SN_REQ_CMA), else src is NULL */
    const struct sn_cma_seg *src;
    struct sn_cma_seg src_seg[SN_MAX_SGE];
    int src_nseg;
    uint64_t src_off;
    /* an RNR wait: when it began, the last RNR_WAIT sent, counted in
     * qp->recv_waiters */
    uint64_t rnr_start, rnr_note;
    bool rnr_waiting;
    struct sn_rwqe r;            /* the receive WQE a SEND or WRITE_IMM took */
    bool have_r;
    /* a placement: segments, the one being filled and how far */
    int nseg, seg;
    struct sn_mr *mr[SN_MAX_SGE];
    uint64_t seg_addr[SN_MAX_SGE];
    uint64_t seg_len[SN_MAX_SGE];
    uint64_t seg_done;
    bool placing;                /* counted in qp->placing */
    uint64_t place_since;
    /* a READ's response: its region, how much went, its pacing */
    struct sn_mr *rd_mr;
    uint64_t rd_off;
    bool rd_hdr_sent;
    char *rd_bounce;
    uint64_t rd_asked, rd_due;
    bool rd_charged;
};

/* responder.c: runs requests as far as they go now: SN_ENG_* to wait for,
 * or RC_END with rc->err set to why the connection ends (ECONNABORTED: a
 * NAK was sent, the peer reads it before the close). */
#define RC_END 0x100u
unsigned responder_run(struct sn_rconn *rc);
/* Drops the request under way (the connection ends): its placement, MRs,
 * receive WQE; then the coalesced ACK and completions, as far as they go. */
void responder_end(struct sn_rconn *rc);
/* Sends a response (ACK, NAK, HELLO) after the CUDA writes land: 0 or the
 * connection's errno. */
int responder_send_resp(struct sn_rconn *rc, uint8_t type, uint8_t syndrome, uint32_t seq,
                        uint32_t len);
bool responder_qp_receiving(struct sn_qp *qp);

#endif
