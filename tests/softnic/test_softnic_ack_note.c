/* tests/softnic/test_softnic_ack_note.c: a same-host requester whose
 * application polls its send CQ completes its writes from the responder's
 * note (ack_note.c), with no ACK on the wire; one with a completion
 * channel, or with SOFTNIC_PUSH_ACKS=0, gets the wire's ACKs.  Either way
 * every signaled write completes once, in order, with its data in place,
 * and a requester that does not poll, or whose writes wait behind a READ,
 * does not wait for the retry budget. */
#include "sntest.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WAIT_MS 5000
#define MSG (64 * 1024)   /* pulled by the responder (cma.c), not pushed */
#define NMSG 8
/* a send CQ's polls read the notes of this many of its QPs (softnic.h,
 * SN_NOTE_WATCH; docs/softnic.md) */
#define NOTE_WATCH 8

static uint64_t acks(struct ibv_qp *qp) { return st_qp_count(st_ctl()->qp_acks, qp); }
static uint64_t noted(struct ibv_qp *qp) { return st_qp_count(st_ctl()->qp_acks_noted, qp); }

/* The notes need the same-host fast path: a kernel (or valgrind) without
 * pidfd_open gives none, and the case has nothing to show there. */
static void need_fast_path(struct ibv_qp *responder)
{
    if (!st_qp_count(st_ctl()->qp_fast_bytes, responder))
        TAP_SKIP("no same-host fast path here (pidfd_open refused, as under valgrind): no notes to read");
}

/* NMSG signaled writes of MSG bytes from a to b, each slot its own
 * pattern: their completions come once each, in order, the data in place. */
static void write_stream(struct st_write_pair *p, struct ibv_cq *scq)
{
    for (int i = 0; i < NMSG; i++) {
        st_fill(p->src + (size_t)i * MSG, MSG, (unsigned)(40 + i));
        st_post_rdma(p->a.qp, IBV_WR_RDMA_WRITE, (uint64_t)(100 + i), p->src + (size_t)i * MSG, MSG, p->smr->lkey,
                     (uintptr_t)(p->dst + (size_t)i * MSG), p->dmr->rkey, 0, IBV_SEND_SIGNALED);
    }
    for (int i = 0; i < NMSG; i++) {
        struct ibv_wc wc;
        st_spin_wc(scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, (uint64_t)(100 + i));
    }
    EXPECT_TRUE(st_no_wc(scq, 20));
    EXPECT_MEMEQ(p->src, p->dst, (size_t)NMSG * MSG);
}

TAP_CASE(test_a_polling_requester_completes_from_the_note_without_an_ack)
{
    struct st_write_pair p;
    st_write_pair_open(&p, (size_t)NMSG * MSG);
    uint64_t a0 = acks(p.b.qp), n0 = noted(p.b.qp);
    write_stream(&p, p.a.scq);
    need_fast_path(p.b.qp);
    tap_diag("%d writes: %llu ACKs sent, %llu left as notes", NMSG, (unsigned long long)(acks(p.b.qp) - a0),
             (unsigned long long)(noted(p.b.qp) - n0));
    EXPECT_EQ_U64(a0, acks(p.b.qp));
    EXPECT_TRUE(noted(p.b.qp) - n0 >= 1 && noted(p.b.qp) - n0 <= NMSG);
    st_write_pair_close(&p);
}

TAP_CASE(test_the_wire_acks_with_push_acks_off)
{
    setenv("SOFTNIC_PUSH_ACKS", "0", 1);
    struct st_write_pair p;
    st_write_pair_open(&p, (size_t)NMSG * MSG);
    uint64_t a0 = acks(p.b.qp), n0 = noted(p.b.qp);
    write_stream(&p, p.a.scq);
    EXPECT_TRUE(acks(p.b.qp) - a0 >= 1);
    EXPECT_EQ_U64(n0, noted(p.b.qp));
    st_write_pair_close(&p);
}

/* A send CQ with a completion channel: its owner may sleep in
 * ibv_get_cq_event, which only a completion the NIC makes wakes. */
TAP_CASE(test_a_requester_with_a_completion_channel_gets_the_wires_acks)
{
    struct st_dev d;
    st_dev_open(&d);
    struct ibv_comp_channel *ch = ibv_create_comp_channel(d.ctx);
    EXPECT_TRUE(ch != NULL);
    struct st_qp_opts o = { .send_channel = ch };
    struct st_qp a, b;
    st_qp_pair(&d, &a, &b, &o);
    char *src = st_buf(MSG, 3), *dst = st_buf(MSG, 0);
    struct ibv_mr *smr = ibv_reg_mr(d.pd, src, MSG, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr *dmr = ibv_reg_mr(d.pd, dst, MSG, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    EXPECT_TRUE(smr && dmr);
    EXPECT_EQ_INT(0, ibv_req_notify_cq(a.scq, 0));
    uint64_t a0 = acks(b.qp), n0 = noted(b.qp);
    st_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 7, src, MSG, smr->lkey, (uintptr_t)dst, dmr->rkey, 0, IBV_SEND_SIGNALED);
    /* the event comes without a poll */
    struct ibv_cq *ev_cq = NULL;
    void *ev_ctx = NULL;
    EXPECT_EQ_INT(0, ibv_get_cq_event(ch, &ev_cq, &ev_ctx));
    EXPECT_TRUE(ev_cq == a.scq);
    ibv_ack_cq_events(a.scq, 1);
    struct ibv_wc wc;
    st_wait_wc(a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 7);
    EXPECT_MEMEQ(src, dst, MSG);
    EXPECT_TRUE(acks(b.qp) - a0 >= 1);
    EXPECT_EQ_U64(n0, noted(b.qp));
    ibv_dereg_mr(smr);
    ibv_dereg_mr(dmr);
    st_qp_destroy(&a);
    st_qp_destroy(&b);
    EXPECT_EQ_INT(0, ibv_destroy_comp_channel(ch));
    st_dev_close(&d);
}

/* No poll for longer than the retry budget: the completer, at the
 * budget's end, reads the note before it judges, so the writes succeed
 * (a requester that only counted the wire's ACKs would flush them with
 * IBV_WC_RETRY_EXC_ERR). */
TAP_CASE(test_a_requester_that_does_not_poll_past_the_retry_budget_succeeds)
{
    setenv("SOFTNIC_RETRY_MIN_MS", "50", 1);
    setenv("SOFTNIC_RETRY_CAP_MS", "50", 1);
    struct st_write_pair p;
    st_write_pair_open(&p, (size_t)NMSG * MSG);
    for (int i = 0; i < NMSG; i++)
        st_post_rdma(p.a.qp, IBV_WR_RDMA_WRITE, (uint64_t)i, p.src + (size_t)i * MSG, MSG, p.smr->lkey,
                     (uintptr_t)(p.dst + (size_t)i * MSG), p.dmr->rkey, 0, IBV_SEND_SIGNALED);
    usleep(400 * 1000);   /* eight budgets */
    for (int i = 0; i < NMSG; i++) {
        struct ibv_wc wc;
        st_wait_wc(p.a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, (uint64_t)i);
    }
    EXPECT_MEMEQ(p.src, p.dst, (size_t)NMSG * MSG);
    /* and the QP goes on */
    write_stream(&p, p.a.scq);
    st_write_pair_close(&p);
}

/* A signaled write the responder executed holds its source region until
 * a poll completes it from the note; an application that deregisters the
 * region first (a connection closed with a send in flight) gets it back
 * at once, the completion made then, not at the end of a retry budget set
 * here far beyond the case's own time limit. */
TAP_CASE(test_a_region_a_noted_write_holds_is_deregistered_without_a_poll)
{
    setenv("SOFTNIC_RETRY_MIN_MS", "600000", 1);
    setenv("SOFTNIC_RETRY_CAP_MS", "600000", 1);
    struct st_write_pair p;
    st_write_pair_open(&p, (size_t)NMSG * MSG);
    write_stream(&p, p.a.scq);
    need_fast_path(p.b.qp);
    uint64_t n0 = noted(p.b.qp);
    st_fill(p.src, MSG, 77);
    st_post_rdma(p.a.qp, IBV_WR_RDMA_WRITE, 9, p.src, MSG, p.smr->lkey, (uintptr_t)p.dst, p.dmr->rkey, 0,
                 IBV_SEND_SIGNALED);
    /* executed: its note is in the requester's slot, nothing polled */
    uint64_t until = st_now_ms() + WAIT_MS;
    while (noted(p.b.qp) == n0 && st_now_ms() < until)
        usleep(100);
    EXPECT_TRUE(noted(p.b.qp) > n0);
    EXPECT_EQ_INT(0, ibv_dereg_mr(p.smr));
    p.smr = NULL;
    struct ibv_wc wc;
    st_wait_wc(p.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 9);
    EXPECT_MEMEQ(p.src, p.dst, MSG);
    st_write_pair_close(&p);
}

/* A write behind a READ: the note completes the write before the READ
 * (not the READ: its data comes with its response), the READ's response
 * the READ, and then the note the write behind it -- with a retry budget
 * far beyond the wait, none of them waits for the budget's end.  Small
 * requests: the responder has sent the READ's response and left the
 * note of the write behind it before the requester's engine has read the
 * response, so that a poll reads that note first in many rounds. */
TAP_CASE(test_writes_behind_a_read_complete_after_it_without_the_budget)
{
    enum { ROUNDS = 200, LEN = 64 };
    setenv("SOFTNIC_RETRY_MIN_MS", "60000", 1);
    setenv("SOFTNIC_RETRY_CAP_MS", "60000", 1);
    struct st_write_pair p;
    st_write_pair_open(&p, 4096);
    char *back = st_buf(4096, 0);
    struct ibv_mr *bmr = ibv_reg_mr(p.d.pd, back, 4096, IBV_ACCESS_LOCAL_WRITE);
    /* the target readable too */
    struct ibv_mr *rmr = ibv_reg_mr(p.d.pd, p.dst, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    EXPECT_TRUE(bmr && rmr);
    uint64_t slowest = 0;
    for (int round = 0; round < ROUNDS; round++) {
        char *s = p.src + (size_t)(round % 4) * 2 * LEN;
        st_fill(s, 2 * LEN, (unsigned)(70 + round));
        st_post_rdma(p.a.qp, IBV_WR_RDMA_WRITE, 1, s, LEN, p.smr->lkey, (uintptr_t)p.dst, p.dmr->rkey, 0,
                     IBV_SEND_SIGNALED);
        st_post_rdma(p.a.qp, IBV_WR_RDMA_READ, 2, back, LEN, bmr->lkey, (uintptr_t)p.dst, rmr->rkey, 0,
                     IBV_SEND_SIGNALED);
        st_post_rdma(p.a.qp, IBV_WR_RDMA_WRITE, 3, s + LEN, LEN, p.smr->lkey, (uintptr_t)p.dst + LEN, p.dmr->rkey, 0,
                     IBV_SEND_SIGNALED);
        uint64_t t0 = st_now_ms();
        for (uint64_t id = 1; id <= 3; id++) {
            struct ibv_wc wc;
            st_spin_wc(p.a.scq, &wc, WAIT_MS);
            EXPECT_WC(wc, IBV_WC_SUCCESS, id == 2 ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE, id);
        }
        uint64_t ms = st_now_ms() - t0;
        if (ms > slowest)
            slowest = ms;
        /* the READ saw the first write, the second landed after it */
        EXPECT_MEMEQ(s, back, LEN);
        EXPECT_MEMEQ(s, p.dst, 2 * LEN);
    }
    tap_diag("%d rounds of write, READ, write: the slowest completed in %llu ms", ROUNDS,
             (unsigned long long)slowest);
    ibv_dereg_mr(bmr);
    ibv_dereg_mr(rmr);
    st_write_pair_close(&p);
}

/* Many QPs on one send CQ: the first SN_NOTE_WATCH complete from notes,
 * the others from the wire's ACKs; all complete. */
TAP_CASE(test_qps_past_a_cqs_watch_keep_the_wires_acks)
{
    enum { NQP = 10 };
    struct st_dev d;
    st_dev_open(&d);
    struct ibv_cq *scq = ibv_create_cq(d.ctx, 256, NULL, NULL, 0);
    EXPECT_TRUE(scq != NULL);
    struct st_qp a[NQP], b[NQP];
    char *src = st_buf(MSG, 5), *dst = st_buf((size_t)NQP * MSG, 0);
    struct ibv_mr *smr = ibv_reg_mr(d.pd, src, MSG, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr *dmr = ibv_reg_mr(d.pd, dst, (size_t)NQP * MSG, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    EXPECT_TRUE(smr && dmr);
    for (int i = 0; i < NQP; i++) {
        st_qp_pair(&d, &a[i], &b[i], NULL);
        /* a's sends complete on the shared CQ: a QP of its own replaces it */
        struct ibv_qp_init_attr ia = {
            .send_cq = scq, .recv_cq = a[i].rcq, .qp_type = IBV_QPT_RC,
            .cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 4, .max_recv_sge = 4 },
        };
        EXPECT_EQ_INT(0, ibv_destroy_qp(a[i].qp));
        EXPECT_EQ_INT(0, ibv_destroy_qp(b[i].qp));
        a[i].qp = ibv_create_qp(d.pd, &ia);
        struct ibv_qp_init_attr ib = ia;
        ib.send_cq = b[i].scq;
        ib.recv_cq = b[i].rcq;
        b[i].qp = ibv_create_qp(d.pd, &ib);
        EXPECT_TRUE(a[i].qp && b[i].qp);
        struct st_qp_info ai, bi;
        st_qp_info(&d, &a[i], &ai);
        st_qp_info(&d, &b[i], &bi);
        st_qp_connect(&a[i], &bi);
        st_qp_connect(&b[i], &ai);
    }
    uint64_t a0[NQP], n0[NQP];
    for (int i = 0; i < NQP; i++) {
        a0[i] = acks(b[i].qp);
        n0[i] = noted(b[i].qp);
        st_post_rdma(a[i].qp, IBV_WR_RDMA_WRITE, (uint64_t)i, src, MSG, smr->lkey, (uintptr_t)(dst + (size_t)i * MSG),
                     dmr->rkey, 0, IBV_SEND_SIGNALED);
    }
    bool seen[NQP] = { false };
    for (int k = 0; k < NQP; k++) {
        struct ibv_wc wc;
        st_wait_wc(scq, &wc, WAIT_MS);
        EXPECT_EQ_INT(IBV_WC_SUCCESS, wc.status);
        EXPECT_TRUE(wc.wr_id < NQP && !seen[wc.wr_id]);
        seen[wc.wr_id] = true;
    }
    need_fast_path(b[0].qp);
    int by_note = 0, by_wire = 0;
    for (int i = 0; i < NQP; i++) {
        EXPECT_MEMEQ(src, dst + (size_t)i * MSG, MSG);
        by_note += noted(b[i].qp) > n0[i];
        by_wire += acks(b[i].qp) > a0[i];
    }
    tap_diag("%d QPs on one send CQ: %d completed from notes, %d from the wire's ACKs", NQP, by_note, by_wire);
    EXPECT_EQ_INT(NOTE_WATCH, by_note);
    EXPECT_EQ_INT(NQP - NOTE_WATCH, by_wire);
    for (int i = 0; i < NQP; i++) {
        EXPECT_EQ_INT(0, ibv_destroy_qp(a[i].qp));
        EXPECT_EQ_INT(0, ibv_destroy_qp(b[i].qp));
        EXPECT_EQ_INT(0, ibv_destroy_cq(a[i].scq));
        EXPECT_EQ_INT(0, ibv_destroy_cq(a[i].rcq));
        EXPECT_EQ_INT(0, ibv_destroy_cq(b[i].scq));
        EXPECT_EQ_INT(0, ibv_destroy_cq(b[i].rcq));
    }
    ibv_dereg_mr(smr);
    ibv_dereg_mr(dmr);
    EXPECT_EQ_INT(0, ibv_destroy_cq(scq));
    st_dev_close(&d);
}

int main(int argc, char **argv) { return sntest_main(argc, argv); }
