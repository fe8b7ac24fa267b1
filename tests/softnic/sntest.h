/* tests/softnic/sntest.h: helpers for the verbs tests of softnic.
 *
 * The tests are compiled against the stock rdma-core headers and linked
 * with the system's -libverbs; they must RUN on softnic.  sntest_main()
 * makes sure of it: when the libibverbs.so.1 in the process is not
 * softnic's, it prepends softnic's build directory to LD_LIBRARY_PATH and
 * re-executes the program once (so `make check` and a test run by hand
 * behave the same).  Then it runs the TAP cases (tests/tap.h).
 *
 * Every helper fails the current case (tap_fail_at) on an unexpected
 * result, so a case reads as a list of steps. */
#ifndef SNTESN_H
#define SNTESN_H

#include "../tap.h"

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#include "softnic_ctl.h"

int sntest_main(int argc, char **argv);

/* One opened device with a PD and a CQ pair; port 1 unless said. */
struct st_dev {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
};
void st_dev_open(struct st_dev *d);           /* first device (softnic0) */
void st_dev_close(struct st_dev *d);

/* What a peer needs to know to connect a QP: (GID, QPN). */
struct st_qp_info {
    uint32_t qpn;
    uint8_t port;
    union ibv_gid gid;
    uint64_t addr;          /* a buffer of the peer, for RDMA tests */
    uint32_t rkey;
    uint32_t len;
};

struct st_qp_opts {
    int max_send_wr, max_recv_wr, max_sge, max_inline;
    int sq_sig_all;
    struct ibv_srq *srq;
    unsigned int access;    /* QP access flags; 0 = remote read+write */
    uint8_t port;           /* 0 = 1 */
    uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;   /* 0 = defaults */
    bool rnr_retry_set;     /* use rnr_retry as given (0 included) */
    uint8_t traffic_class;  /* the address vector's GRH traffic class */
    struct ibv_comp_channel *send_channel;   /* the send CQ's (the caller's), NULL: none */
};

struct st_qp {
    struct ibv_qp *qp;
    struct ibv_cq *scq, *rcq;
    struct st_qp_opts o;
};

/* Creates an RC QP with its own send and receive CQs (depth cqe). */
void st_qp_create(struct st_dev *d, struct st_qp *q, const struct st_qp_opts *o, int cqe);
void st_qp_destroy(struct st_qp *q);
void st_qp_info(struct st_dev *d, struct st_qp *q, struct st_qp_info *out);
/* RESET -> INIT -> RTR -> RTS towards the peer. */
void st_qp_connect(struct st_qp *q, const struct st_qp_info *peer);
/* Two QPs of one process connected to each other. */
void st_qp_pair(struct st_dev *d, struct st_qp *a, struct st_qp *b, const struct st_qp_opts *o);

/* Two senders s[i] with queues of their own, each connected to a
 * receiver r[i] whose receives come from srq; CQs of cqe entries.
 * st_srq_pairs_destroy destroys the four QPs (not the SRQ). */
void st_srq_pairs(struct st_dev *d, struct ibv_srq *srq, struct st_qp s[2], struct st_qp r[2], int cqe);
void st_srq_pairs_destroy(struct st_qp s[2], struct st_qp r[2]);

/* Two QPs of one process connected to each other (st_qp_pair, 16 WRs a
 * queue) on the first device, with len bytes a side: src (seed 1,
 * registered for local reads) and dst (zeroes, registered for remote
 * writes). st_write_pair_close undoes it all. */
struct st_write_pair {
    struct st_dev d;
    struct st_qp a, b;
    size_t len;
    char *src, *dst;
    struct ibv_mr *smr, *dmr;
};
void st_write_pair_open(struct st_write_pair *p, size_t len);
void st_write_pair_close(struct st_write_pair *p);

/* Waits up to ms for one completion on cq; fails the case on timeout.
 * st_spin_wc polls without a pause, as a busy application polls. */
void st_wait_wc(struct ibv_cq *cq, struct ibv_wc *wc, int ms);
void st_spin_wc(struct ibv_cq *cq, struct ibv_wc *wc, int ms);
/* True when no completion arrives within ms. */
bool st_no_wc(struct ibv_cq *cq, int ms);
/* Waits for an async event of type (others are skipped); false on timeout. */
bool st_wait_async(struct ibv_context *ctx, enum ibv_event_type type, int ms,
                   struct ibv_async_event *out);

/* Posting shortcuts (fail the case when the post is refused). */
void st_post_recv(struct ibv_qp *qp, uint64_t wr_id, void *buf, uint32_t len, uint32_t lkey);
void st_post_rdma(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, void *buf,
                  uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm,
                  unsigned int flags);
void st_post_send(struct ibv_qp *qp, uint64_t wr_id, void *buf, uint32_t len, uint32_t lkey,
                  unsigned int flags);

/* Checks one completion: status, opcode (when >= 0), wr_id. */
#define EXPECT_WC(wc, st, op, id)                                           \
    do {                                                                    \
        EXPECT_EQ_INT((st), (wc).status);                                   \
        if ((int)(op) >= 0 && (st) == IBV_WC_SUCCESS)                       \
            EXPECT_EQ_INT((op), (wc).opcode);                               \
        EXPECT_EQ_U64((id), (wc).wr_id);                                    \
    } while (0)

/* softnic's control API (softnic_ctl.h), found with dlsym: the tests link
 * the stock -libverbs, softnic only replaces it at run time. */
struct st_ctl {
    int (*port_set_state)(struct ibv_context *, uint8_t, int);
    int (*port_set_rate)(struct ibv_context *, uint8_t, uint64_t);
    int (*port_set_latency)(struct ibv_context *, uint8_t, uint32_t);
    int (*port_counters)(struct ibv_context *, uint8_t, struct softnic_ctl_counters *);
    int (*qp_counters)(struct ibv_qp *, struct softnic_ctl_counters *);
    int (*objects)(struct softnic_ctl_objects *);
    int (*link_rate)(uint64_t *);
    int (*qp_fast_bytes)(struct ibv_qp *, uint64_t *);
    int (*qp_direct_wqes)(struct ibv_qp *, uint64_t *);
    int (*qp_acks)(struct ibv_qp *, uint64_t *);
    int (*qp_acks_noted)(struct ibv_qp *, uint64_t *);
    int (*qp_pushed_wqes)(struct ibv_qp *, uint64_t *);
    int (*qp_stored_wqes)(struct ibv_qp *, uint64_t *);
    int (*port_tc_bytes)(struct ibv_context *, uint8_t, uint8_t, uint64_t *);
    int (*qp_steps)(struct ibv_qp *, struct softnic_ctl_qp_steps *);
    int (*engines)(struct softnic_ctl_engines *);
    int (*ud_counts)(struct softnic_ctl_ud *);
};
const struct st_ctl *st_ctl(void);
/* A QP's count from one of st_ctl's getters (qp_acks, qp_pushed_wqes...). */
uint64_t st_qp_count(int (*get)(struct ibv_qp *, uint64_t *), struct ibv_qp *qp);
/* Whether small writes to same-host peers are placed by their poster
 * (SOFTNIC_PUSH and SOFTNIC_FASTPATH not 0 in the environment). */
bool st_push_on(void);

/* Two processes: forks a peer that runs fn(fd) (fd: a socket to the parent)
 * and exits; must be called before the parent touches verbs (softnic's
 * threads do not survive fork).  Returns the peer's pid; *fd is the
 * parent's end. */
int st_fork_peer(void (*fn)(int fd), int *fd);
void st_xfer_send(int fd, const void *buf, size_t len);
void st_xfer_recv(int fd, void *buf, size_t len);
/* Connects q (of d) to the QP of the peer process on fd: sends our
 * description, with buf and mr's remote key when mr is given (where the
 * peer may write or read), then takes the peer's, which it returns.  Both
 * ends send first: the descriptions are small enough for the socket. */
struct st_qp_info st_qp_connect_peer(struct st_dev *d, struct st_qp *q, int fd, const void *buf,
                                     const struct ibv_mr *mr);

/* A page-aligned buffer filled with a pattern derived from seed. */
void *st_buf(size_t len, unsigned seed);
void st_fill(void *buf, size_t len, unsigned seed);
uint64_t st_now_ms(void);

#endif
