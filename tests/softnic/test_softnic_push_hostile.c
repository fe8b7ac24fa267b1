/* tests/softnic/test_softnic_push_hostile.c: a peer that writes softnic's
 * push region (push.c) as it likes.  Any process that maps the region can
 * write a QP's records, so what a record names is trusted only where the
 * QP's own state agrees: a SEND's bytes land in the receive they complete
 * and nowhere else, a WRITE_WITH_IMM's only in a region of the QP's PD
 * that remote writes may reach -- also when the QP is destroyed or a
 * region deregistered with the record still waiting.  The cases map this
 * process's own region (the receiving QP's) and forge records in it. */
#include "sntest.h"
#include "push_forge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define WAIT_MS 10000
#define BUF 4096u

struct fixture {
    struct st_dev d;
    struct st_qp a, b;
    char *src, *rbuf, *lbuf;
    struct ibv_mr *smr, *rmr, *lmr;   /* lmr: local write only, no remote access */
    struct push_region *r;
    size_t rlen;
};

/* The QPs are connected and a receive of rbuf + 100 (100 bytes) is
 * posted on b, which shows it in its slot: skips without a push region. */
static void setup(struct fixture *f)
{
    st_dev_open(&f->d);
    struct st_qp_opts o = { .max_inline = 64, .timeout = 10, .retry_cnt = 1 };
    st_qp_pair(&f->d, &f->a, &f->b, &o);
    f->src = st_buf(BUF, 1);
    f->rbuf = st_buf(BUF, 2);
    f->lbuf = st_buf(BUF, 3);
    memset(f->rbuf, 0, BUF);
    memset(f->lbuf, 0, BUF);
    f->smr = ibv_reg_mr(f->d.pd, f->src, BUF, IBV_ACCESS_LOCAL_WRITE);
    f->rmr = ibv_reg_mr(f->d.pd, f->rbuf, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    f->lmr = ibv_reg_mr(f->d.pd, f->lbuf, BUF, IBV_ACCESS_LOCAL_WRITE);
    EXPECT_TRUE(f->smr && f->rmr && f->lmr);
    /* the first send takes the wire: it connects them, and the push
     * offers come with the connection */
    st_post_recv(f->b.qp, 1, f->rbuf, 64, f->rmr->lkey);
    st_post_send(f->a.qp, 2, f->src, 64, f->smr->lkey, IBV_SEND_SIGNALED);
    struct ibv_wc wc;
    st_wait_wc(f->a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 2);
    st_wait_wc(f->b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 1);
    st_post_recv(f->b.qp, 7, f->rbuf + 100, 100, f->rmr->lkey);
    f->r = push_forge_map(&f->rlen);
    if (!f->r)
        TAP_SKIP("no push region in this process (SOFTNIC_PUSH=0, or no pidfd_open: under valgrind)");
}

static bool env_off(const char *name)
{
    const char *v = getenv(name);
    return v && !strcmp(v, "0");
}

/* setup, for the cases that forge a SEND's record in a shown receive */
static void setup_shown(struct fixture *f)
{
    if (env_off("SOFTNIC_PUSH_SEND") || env_off("SOFTNIC_PUSH_IMM"))
        TAP_SKIP("the receiver shows no receive to pushed SENDs (SOFTNIC_PUSH_SEND=0 or SOFTNIC_PUSH_IMM=0)");
    setup(f);
}

static void teardown(struct fixture *f)
{
    st_qp_destroy(&f->a);
    if (f->b.qp)
        st_qp_destroy(&f->b);
    if (f->smr)
        ibv_dereg_mr(f->smr);
    if (f->rmr)
        ibv_dereg_mr(f->rmr);
    if (f->lmr)
        ibv_dereg_mr(f->lmr);
    st_dev_close(&f->d);
    if (f->r)
        munmap(f->r, f->rlen);
}

/* b's shown receive of rbuf + 100: its slot and index k in the window. */
static bool find_shown(const struct fixture *f, struct push_qp **slot, uint32_t *k)
{
    return push_forge_find_shown(f->r, (uintptr_t)f->rbuf + 100, f->rmr->lkey, slot, k);
}

/* setup_shown, then b's shown receive's record forged (push_forge_record) */
static void setup_forged(struct fixture *f, uint32_t op, bool to_lbuf)
{
    setup_shown(f);
    struct push_qp *s;
    uint32_t k;
    EXPECT_TRUE(find_shown(f, &s, &k));
    if (to_lbuf)
        push_forge_record(s, k, op, f->lmr->lkey, (uintptr_t)f->lbuf + 64);
    else
        push_forge_record(s, k, op, f->rmr->lkey, (uintptr_t)f->rbuf + 100);
}

static bool zero(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* How the forged record is let go: b destroyed, or lmr deregistered. */
enum end { DESTROY, DEREG };

static void let_go(struct fixture *f, enum end how)
{
    if (how == DESTROY) {
        st_qp_destroy(&f->b);
        f->b.qp = NULL;
    } else {
        EXPECT_EQ_INT(0, ibv_dereg_mr(f->lmr));
        f->lmr = NULL;
    }
}

/* The forgery itself works: a SEND record that names the shown receive
 * exactly lands there when the QP is destroyed unpolled, as a NIC had
 * placed its bytes (so the refusals below are the checks', not a record
 * nobody looked at). */
TAP_CASE(test_a_forged_send_record_for_its_own_receive_lands_at_destroy)
{
    struct fixture f;
    setup_forged(&f, REC_OP_SEND, false);
    let_go(&f, DESTROY);
    char want[8];
    memset(want, 0x5a, 8);
    EXPECT_MEMEQ(want, f.rbuf + 100, 8);
    teardown(&f);
}

/* A record of op for the shown receive that names lbuf (lmr: local
 * write alone, the QP's PD): neither the QP's destroy nor lmr's
 * deregistration puts its bytes there, nor in the receive. */
static void expect_forged_record_lands_nowhere(uint32_t op)
{
    for (int how = DESTROY; how <= DEREG; how++) {
        struct fixture f;
        setup_forged(&f, op, true);
        let_go(&f, (enum end)how);
        tap_diag("%s", how == DESTROY ? "ibv_destroy_qp" : "ibv_dereg_mr");
        EXPECT_TRUE(zero(f.lbuf, BUF));
        EXPECT_TRUE(zero(f.rbuf + 100, 100));
        teardown(&f);
    }
}

/* A SEND's bytes land in the receive it completes or nowhere. */
TAP_CASE(test_a_forged_send_record_never_lands_outside_its_receive)
{
    expect_forged_record_lands_nowhere(REC_OP_SEND);
}

/* A WRITE_WITH_IMM's bytes never land in a region without remote write,
 * as a write on the wire to it gets an access error. */
TAP_CASE(test_a_forged_write_record_never_lands_in_a_region_without_remote_write)
{
    expect_forged_record_lands_nowhere(REC_OP_WRITE_IMM);
}

/* Polled, the same SEND record completes its receive with an error and
 * writes neither the receive's buffer nor the region it names. */
TAP_CASE(test_a_forged_send_record_polled_fails_its_receive_and_writes_nothing)
{
    struct fixture f;
    setup_forged(&f, REC_OP_SEND, true);
    struct ibv_wc wc;
    st_wait_wc(f.b.rcq, &wc, WAIT_MS);
    EXPECT_EQ_U64(7, wc.wr_id);
    EXPECT_EQ_INT(IBV_WC_LOC_PROT_ERR, wc.status);
    EXPECT_TRUE(zero(f.lbuf, BUF));
    EXPECT_TRUE(zero(f.rbuf + 100, 100));
    teardown(&f);
}

/* A peer stopped inside a push holds a region's count: its
 * deregistration waits for it PUSH_DRAIN_NS, then gives up on it.  Should
 * that pusher resume, its leaving must not take a later pusher out of the
 * count the next drain waits for. */
TAP_CASE(test_a_pusher_resuming_after_a_drain_gave_up_on_it_hides_no_later_pusher)
{
    struct fixture f;
    setup(&f);
    struct push_mr *e = &f.r->mr[f.rmr->rkey >> 8];
    EXPECT_EQ_U64(f.rmr->rkey, atomic_load(&e->key));
    uint32_t stuck = pushers_enter(&e->pushers);
    EXPECT_EQ_INT(0, ibv_dereg_mr(f.rmr));
    f.rmr = NULL;
    EXPECT_TRUE(!pushers_busy(&e->pushers));   /* given up on */
    pushers_leave(&e->pushers, stuck);
    uint32_t later = pushers_enter(&e->pushers);
    EXPECT_TRUE(pushers_busy(&e->pushers));
    pushers_leave(&e->pushers, later);
    EXPECT_TRUE(!pushers_busy(&e->pushers));
    teardown(&f);
}

/* A receiver run with SOFTNIC_PUSH_SEND=0 shows its peers no receive,
 * so no peer's SEND takes one but on the wire (test_softnic_push_off.sh
 * runs this program so). */
TAP_CASE(test_a_receiver_with_pushed_sends_off_shows_no_receive)
{
    if (!env_off("SOFTNIC_PUSH_SEND"))
        TAP_SKIP("runs with SOFTNIC_PUSH_SEND=0 (test_softnic_push_off.sh)");
    struct fixture f;
    setup(&f);
    struct push_qp *s;
    uint32_t k;
    EXPECT_TRUE(!find_shown(&f, &s, &k));
    teardown(&f);
}

int main(int argc, char **argv) { return sntest_main(argc, argv); }
