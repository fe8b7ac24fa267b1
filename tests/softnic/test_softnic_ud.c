/* tests/softnic/test_softnic_ud.c: UD QPs on softnic, as a ConnectX serves
 * them on a RoCE v2 port: the state machine with its Q_Key, SEND and SEND
 * with immediate to an address handle, the 40-byte GRH (IPv4 header in its
 * last 20 bytes) before the payload, the receive completion's fields;
 * datagrams dropped without a trace -- wrong Q_Key, no receive posted, no
 * such QP, malformed -- while the sender completes; a send over the MTU
 * (IBV_WC_LOC_LEN_ERR) and an RDMA opcode (IBV_WC_LOC_QP_OP_ERR)
 * completing in error; the ibv_wr_* builder; two processes. */
#include "sntest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define WAIT_MS 10000
#define QUIET_MS 300         /* long enough for a datagram on loopback to land */
#define QKEY 0x11111111u
#define GRH 40
#define BUF 8192

struct ud_qp {
    struct ibv_qp *qp;
    struct ibv_cq *scq, *rcq;
    uint8_t port;
};

static void ud_create(struct st_dev *d, struct ud_qp *q, uint8_t port)
{
    q->port = port;
    q->scq = ibv_create_cq(d->ctx, 64, NULL, NULL, 0);
    q->rcq = ibv_create_cq(d->ctx, 64, NULL, NULL, 0);
    EXPECT_TRUE(q->scq && q->rcq);
    struct ibv_qp_init_attr ia = {
        .send_cq = q->scq, .recv_cq = q->rcq, .qp_type = IBV_QPT_UD,
        .cap = { .max_send_wr = 32, .max_recv_wr = 32, .max_send_sge = 2, .max_recv_sge = 2,
                 .max_inline_data = 64 },
    };
    q->qp = ibv_create_qp(d->pd, &ia);
    if (!q->qp)
        tap_fail_at(__FILE__, __LINE__, "ibv_create_qp(UD): %s", strerror(errno));
}

/* RESET -> INIT -> RTR -> RTS with the masks ibv_ud_pingpong uses. */
static void ud_up(struct ud_qp *q, uint32_t qkey)
{
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = q->port,
                             .qkey = qkey };
    EXPECT_EQ_INT(0, ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                                  IBV_QP_QKEY));
    a.qp_state = IBV_QPS_RTR;
    EXPECT_EQ_INT(0, ibv_modify_qp(q->qp, &a, IBV_QP_STATE));
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 7;
    EXPECT_EQ_INT(0, ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN));
}

static void ud_destroy(struct ud_qp *q)
{
    EXPECT_EQ_INT(0, ibv_destroy_qp(q->qp));
    ibv_destroy_cq(q->scq);
    ibv_destroy_cq(q->rcq);
}

static struct ibv_ah *ah_to(struct st_dev *d, uint8_t from_port, uint8_t to_port, uint8_t tclass)
{
    struct ibv_ah_attr aa = { .port_num = from_port, .is_global = 1,
                              .grh = { .sgid_index = 0, .hop_limit = 64,
                                       .traffic_class = tclass } };
    EXPECT_EQ_INT(0, ibv_query_gid(d->ctx, to_port, 0, &aa.grh.dgid));
    struct ibv_ah *ah = ibv_create_ah(d->pd, &aa);
    EXPECT_TRUE(ah != NULL);
    return ah;
}

static int ud_send(struct ud_qp *q, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey,
                   enum ibv_wr_opcode op, uint64_t id, void *buf, uint32_t len, uint32_t lkey,
                   uint32_t imm)
{
    struct ibv_sge sg = { .addr = (uintptr_t)buf, .length = len, .lkey = lkey };
    struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sg, .num_sge = 1, .opcode = op,
                              .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(imm) };
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = qpn;
    wr.wr.ud.remote_qkey = qkey;
    struct ibv_send_wr *bad = NULL;
    return ibv_post_send(q->qp, &wr, &bad);
}

static void ud_counts(struct softnic_ctl_ud *c)
{
    const struct st_ctl *ctl = st_ctl();
    EXPECT_TRUE(ctl->ud_counts != NULL);
    EXPECT_EQ_INT(0, ctl->ud_counts(c));
}

/* Two UD QPs of one process: a on port 1 (127.0.0.1), b on port 2. */
struct ud_pair {
    struct st_dev d;
    struct ud_qp a, b;
    struct ibv_ah *ab;           /* a's AH towards b's port */
    char *sbuf, *rbuf;
    struct ibv_mr *smr, *rmr;
};

static void pair_open(struct ud_pair *p)
{
    memset(p, 0, sizeof(*p));
    st_dev_open(&p->d);
    ud_create(&p->d, &p->a, 1);
    ud_create(&p->d, &p->b, 2);
    ud_up(&p->a, QKEY);
    ud_up(&p->b, QKEY);
    p->ab = ah_to(&p->d, 1, 2, 0);
    p->sbuf = st_buf(BUF, 3);
    p->rbuf = st_buf(BUF, 0);
    p->smr = ibv_reg_mr(p->d.pd, p->sbuf, BUF, IBV_ACCESS_LOCAL_WRITE);
    p->rmr = ibv_reg_mr(p->d.pd, p->rbuf, BUF, IBV_ACCESS_LOCAL_WRITE);
    EXPECT_TRUE(p->smr && p->rmr);
}

static void pair_close(struct ud_pair *p)
{
    ud_destroy(&p->a);
    ud_destroy(&p->b);
    EXPECT_EQ_INT(0, ibv_destroy_ah(p->ab));
    ibv_dereg_mr(p->smr);
    ibv_dereg_mr(p->rmr);
    st_dev_close(&p->d);
}

/* Sends len bytes a -> b (expecting the sender's success) and returns. */
static void pair_send(struct ud_pair *p, uint64_t id, uint32_t len, uint32_t qkey)
{
    EXPECT_EQ_INT(0, ud_send(&p->a, p->ab, p->b.qp->qp_num, qkey, IBV_WR_SEND, id, p->sbuf, len,
                             p->smr->lkey, 0));
    struct ibv_wc wc;
    st_wait_wc(p->a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, id);
}

/* The next receive completion on b is recv_id's, of len bytes after the
 * GRH, which hold what a sent. */
static void pair_expect_recv(struct ud_pair *p, uint64_t recv_id, uint32_t len)
{
    struct ibv_wc wc;
    st_wait_wc(p->b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, recv_id);
    EXPECT_EQ_INT(GRH + len, wc.byte_len);
    EXPECT_MEMEQ(p->sbuf, p->rbuf + GRH, len);
}

static uint16_t csum(const uint8_t *b, size_t n)
{
    uint32_t s = 0;
    for (size_t i = 0; i + 1 < n; i += 2)
        s += (uint32_t)b[i] << 8 | b[i + 1];
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return (uint16_t)~s;
}

/* ----------------------------------------------------------- the QP */
TAP_CASE(test_ud_qp_moves_to_rts_with_qkey_and_queries_as_ud)
{
    struct st_dev d;
    st_dev_open(&d);
    struct ud_qp q;
    ud_create(&d, &q, 1);
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
    /* the Q_Key is required at INIT; access flags are RC's, not UD's */
    EXPECT_EQ_INT(EINVAL, ibv_modify_qp(q.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT));
    EXPECT_EQ_INT(EINVAL, ibv_modify_qp(q.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                                      IBV_QP_QKEY | IBV_QP_ACCESS_FLAGS));
    EXPECT_EQ_INT(0, ibv_modify_qp(q.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                                 IBV_QP_QKEY));
    /* RTR wants no path: an address vector is refused */
    a.qp_state = IBV_QPS_RTR;
    EXPECT_EQ_INT(EINVAL, ibv_modify_qp(q.qp, &a, IBV_QP_STATE | IBV_QP_AV));
    EXPECT_EQ_INT(0, ibv_modify_qp(q.qp, &a, IBV_QP_STATE));
    a.qp_state = IBV_QPS_RTS;
    EXPECT_EQ_INT(EINVAL, ibv_modify_qp(q.qp, &a, IBV_QP_STATE));   /* sq_psn required */
    a.sq_psn = 0x123;
    EXPECT_EQ_INT(0, ibv_modify_qp(q.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN));
    struct ibv_qp_attr got;
    struct ibv_qp_init_attr ia;
    EXPECT_EQ_INT(0, ibv_query_qp(q.qp, &got, IBV_QP_STATE | IBV_QP_QKEY | IBV_QP_CAP, &ia));
    EXPECT_EQ_INT(IBV_QPS_RTS, got.qp_state);
    EXPECT_EQ_U64(QKEY, got.qkey);
    EXPECT_EQ_INT(0x123, got.sq_psn);
    EXPECT_EQ_INT(IBV_QPT_UD, ia.qp_type);
    EXPECT_EQ_INT(64, ia.cap.max_inline_data);
    EXPECT_EQ_INT(IBV_QPT_UD, q.qp->qp_type);
    /* the Q_Key changes in RTS */
    a.qkey = 42;
    EXPECT_EQ_INT(0, ibv_modify_qp(q.qp, &a, IBV_QP_QKEY));
    EXPECT_EQ_INT(0, ibv_query_qp(q.qp, &got, IBV_QP_QKEY, &ia));
    EXPECT_EQ_U64(42, got.qkey);
    /* multicast stays unsupported */
    union ibv_gid mgid;
    memset(&mgid, 0, sizeof(mgid));
    mgid.raw[0] = 0xff;
    EXPECT_TRUE(ibv_attach_mcast(q.qp, &mgid, 0) != 0);
    ud_destroy(&q);
    st_dev_close(&d);
}

/* ------------------------------------------------------------ datagrams */
TAP_CASE(test_ud_send_lands_after_a_grh_with_the_ipv4_header)
{
    struct ud_pair p;
    pair_open(&p);
    struct ibv_ah *ah = ah_to(&p.d, 1, 2, 0x68);     /* a traffic class the GRH shows */
    st_post_recv(p.b.qp, 9, p.rbuf, GRH + 1000, p.rmr->lkey);
    EXPECT_EQ_INT(0, ud_send(&p.a, ah, p.b.qp->qp_num, QKEY, IBV_WR_SEND, 1, p.sbuf, 1000,
                             p.smr->lkey, 0));
    struct ibv_wc wc;
    st_wait_wc(p.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 1);
    st_wait_wc(p.b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 9);
    EXPECT_EQ_INT(GRH + 1000, wc.byte_len);
    EXPECT_EQ_U64(p.a.qp->qp_num, wc.src_qp);
    EXPECT_EQ_U64(p.b.qp->qp_num, wc.qp_num);
    EXPECT_EQ_INT(IBV_WC_GRH, wc.wc_flags);
    EXPECT_EQ_INT(0, wc.slid);
    EXPECT_EQ_INT(0, wc.sl);
    EXPECT_EQ_INT(0, wc.pkey_index);
    EXPECT_MEMEQ(p.sbuf, p.rbuf + GRH, 1000);
    /* GRH: 20 bytes of zeros, then the IPv4 header of the RoCE v2 packet */
    static const uint8_t zeros[20];
    const uint8_t *ip = (const uint8_t *)p.rbuf + 20;
    EXPECT_MEMEQ(zeros, p.rbuf, 20);
    EXPECT_EQ_INT(0x45, ip[0]);
    EXPECT_EQ_INT(0x68, ip[1]);
    EXPECT_EQ_INT(20 + 8 + 12 + 8 + 1000 + 4, ip[2] << 8 | ip[3]);
    EXPECT_EQ_INT(64, ip[8]);
    EXPECT_EQ_INT(17, ip[9]);
    EXPECT_EQ_INT(0, csum(ip, 20));
    struct in_addr src, dst;
    memcpy(&src, ip + 12, 4);
    memcpy(&dst, ip + 16, 4);
    EXPECT_STREQ("127.0.0.1", inet_ntoa(src));
    EXPECT_STREQ("127.0.0.2", inet_ntoa(dst));
    /* the answer's address handle comes from that header */
    struct ibv_ah_attr back;
    EXPECT_EQ_INT(0, ibv_init_ah_from_wc(p.d.ctx, 2, &wc, (struct ibv_grh *)p.rbuf, &back));
    union ibv_gid g1;
    EXPECT_EQ_INT(0, ibv_query_gid(p.d.ctx, 1, 0, &g1));
    EXPECT_TRUE(back.is_global && memcmp(&back.grh.dgid, &g1, sizeof(g1)) == 0);
    struct ibv_ah *reply = ibv_create_ah_from_wc(p.d.pd, &wc, (struct ibv_grh *)p.rbuf, 2);
    EXPECT_TRUE(reply != NULL);
    EXPECT_EQ_INT(0, ibv_destroy_ah(reply));
    EXPECT_EQ_INT(0, ibv_destroy_ah(ah));
    pair_close(&p);
}

TAP_CASE(test_ud_send_with_imm_and_inline_and_two_sges)
{
    struct ud_pair p;
    pair_open(&p);
    /* the receive scatters the GRH over a first SGE of 16 bytes */
    struct ibv_sge rs[2] = { { (uintptr_t)p.rbuf, 16, p.rmr->lkey },
                             { (uintptr_t)p.rbuf + 16, 200, p.rmr->lkey } };
    struct ibv_recv_wr rw = { .wr_id = 5, .sg_list = rs, .num_sge = 2 }, *rbad;
    EXPECT_EQ_INT(0, ibv_post_recv(p.b.qp, &rw, &rbad));
    struct ibv_sge sg = { (uintptr_t)p.sbuf, 48, 0 };
    struct ibv_send_wr wr = { .wr_id = 2, .sg_list = &sg, .num_sge = 1,
                              .opcode = IBV_WR_SEND_WITH_IMM,
                              .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE,
                              .imm_data = htonl(0xabcd1234) }, *bad;
    wr.wr.ud.ah = p.ab;
    wr.wr.ud.remote_qpn = p.b.qp->qp_num;
    wr.wr.ud.remote_qkey = QKEY;
    EXPECT_EQ_INT(0, ibv_post_send(p.a.qp, &wr, &bad));
    struct ibv_wc wc;
    st_wait_wc(p.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 2);
    st_wait_wc(p.b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 5);
    EXPECT_EQ_INT(GRH + 48, wc.byte_len);
    EXPECT_EQ_INT(IBV_WC_GRH | IBV_WC_WITH_IMM, wc.wc_flags);
    EXPECT_EQ_U64(0xabcd1234, ntohl(wc.imm_data));
    EXPECT_EQ_INT(0x45, (uint8_t)p.rbuf[20]);
    EXPECT_MEMEQ(p.sbuf, p.rbuf + GRH, 48);
    /* inline beyond max_inline_data is refused at post, as by the provider */
    sg.length = 65;
    EXPECT_EQ_INT(EINVAL, ibv_post_send(p.a.qp, &wr, &bad));
    pair_close(&p);
}

TAP_CASE(test_ud_wrong_qkey_is_dropped_and_the_receive_stays_posted)
{
    struct ud_pair p;
    pair_open(&p);
    struct softnic_ctl_ud c0, c1;
    ud_counts(&c0);
    st_post_recv(p.b.qp, 7, p.rbuf, GRH + 512, p.rmr->lkey);
    pair_send(&p, 1, 100, QKEY + 1);          /* the sender completes all the same */
    EXPECT_TRUE(st_no_wc(p.b.rcq, QUIET_MS));
    ud_counts(&c1);
    EXPECT_EQ_U64(c0.bad_qkey + 1, c1.bad_qkey);
    /* a Q_Key with the high bit set sends the QP's own (here the right one) */
    st_fill(p.sbuf, 256, 11);
    pair_send(&p, 2, 256, 0x80000000u);
    pair_expect_recv(&p, 7, 256);
    pair_close(&p);
}

TAP_CASE(test_ud_datagram_without_a_receive_posted_is_dropped)
{
    struct ud_pair p;
    pair_open(&p);
    struct softnic_ctl_ud c0, c1;
    ud_counts(&c0);
    pair_send(&p, 1, 64, QKEY);
    usleep(QUIET_MS * 1000);
    ud_counts(&c1);
    EXPECT_EQ_U64(c0.no_recv + 1, c1.no_recv);
    /* nothing was kept for a receive posted later */
    st_post_recv(p.b.qp, 3, p.rbuf, GRH + 512, p.rmr->lkey);
    EXPECT_TRUE(st_no_wc(p.b.rcq, QUIET_MS));
    st_fill(p.sbuf, 128, 12);
    pair_send(&p, 2, 128, QKEY);
    pair_expect_recv(&p, 3, 128);
    pair_close(&p);
}

TAP_CASE(test_ud_datagram_to_no_such_qp_or_another_port_is_dropped)
{
    struct ud_pair p;
    pair_open(&p);
    struct softnic_ctl_ud c0, c1;
    st_post_recv(p.b.qp, 3, p.rbuf, GRH + 512, p.rmr->lkey);
    ud_counts(&c0);
    /* a QPN of b's block that no QP holds, then b's QPN on port 1's
     * address (b is on port 2) */
    uint32_t none = (p.b.qp->qp_num & ~0xffu) | ((p.b.qp->qp_num + 128) & 0xff);
    EXPECT_EQ_INT(0, ud_send(&p.a, p.ab, none, QKEY, IBV_WR_SEND, 1, p.sbuf, 64, p.smr->lkey, 0));
    struct ibv_ah *wrong = ah_to(&p.d, 1, 1, 0);
    EXPECT_EQ_INT(0, ud_send(&p.a, wrong, p.b.qp->qp_num, QKEY, IBV_WR_SEND, 2, p.sbuf, 64,
                             p.smr->lkey, 0));
    struct ibv_wc wc;
    st_wait_wc(p.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 1);
    st_wait_wc(p.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 2);
    EXPECT_TRUE(st_no_wc(p.b.rcq, QUIET_MS));
    ud_counts(&c1);
    EXPECT_EQ_U64(c0.no_qp + 2, c1.no_qp);
    EXPECT_EQ_INT(0, ibv_destroy_ah(wrong));
    pair_close(&p);
}

TAP_CASE(test_ud_malformed_datagrams_are_dropped_and_counted)
{
    struct ud_pair p;
    pair_open(&p);
    st_post_recv(p.b.qp, 3, p.rbuf, GRH + 512, p.rmr->lkey);
    struct softnic_ctl_ud c0, c1;
    ud_counts(&c0);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    EXPECT_TRUE(fd >= 0);
    uint32_t qpn = p.b.qp->qp_num;
    struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(qpn >> 8)) };
    inet_pton(AF_INET, "127.0.0.2", &to.sin_addr);
    /* what softnic's header looks like (softnic.h): magic, version, op,
     * flags, tclass, hop limit, pad[3], dst, src, qkey, imm, len, pad2 */
    struct {
        uint32_t magic;
        uint8_t version, op, flags, tclass, hop, pad[3];
        uint32_t dst, src, qkey, imm, len, pad2;
        char payload[16];
    } good = { 0x534e5544u, 1, 1, 0, 0, 64, { 0 }, qpn, 0x123, QKEY, 0, 16, 0, "0123456789abcde" },
      m;
    const size_t gsz = sizeof(good);
    int sent = 0;
#define SEND_BAD(len)                                                               \
    do {                                                                            \
        EXPECT_EQ_INT((int)(len), (int)sendto(fd, &m, (len), 0, (struct sockaddr *)&to, \
                                              sizeof(to)));                         \
        sent++;                                                                     \
    } while (0)
    m = good; SEND_BAD(10);                          /* shorter than a header */
    m = good; m.magic ^= 1; SEND_BAD(gsz);           /* not softnic's */
    m = good; m.version = 9; SEND_BAD(gsz);          /* another version */
    m = good; m.op = 3; SEND_BAD(gsz);               /* an RDMA WRITE */
    m = good; m.len = 15; SEND_BAD(gsz);             /* length not the datagram's */
    m = good; m.dst = qpn ^ 0x10000; SEND_BAD(gsz);  /* a QPN of another block */
    m = good; m.flags = 0x80; SEND_BAD(gsz);         /* unknown flags */
    usleep(QUIET_MS * 1000);
    ud_counts(&c1);
    EXPECT_EQ_U64(c0.malformed + (uint64_t)sent, c1.malformed);
    EXPECT_TRUE(st_no_wc(p.b.rcq, 10));
    /* the well-formed one lands, from whatever sent it */
    m = good;
    EXPECT_EQ_INT((int)gsz, (int)sendto(fd, &m, gsz, 0, (struct sockaddr *)&to, sizeof(to)));
    struct ibv_wc wc;
    st_wait_wc(p.b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 3);
    EXPECT_EQ_INT(GRH + 16, wc.byte_len);
    EXPECT_EQ_U64(0x123, wc.src_qp);
    EXPECT_MEMEQ(good.payload, p.rbuf + GRH, 16);
    close(fd);
    pair_close(&p);
}

/* ---------------------------------------------------- errors on a NIC */
TAP_CASE(test_ud_send_larger_than_the_mtu_completes_loc_len_err)
{
    struct ud_pair p;
    pair_open(&p);
    struct ibv_port_attr pa;
    EXPECT_EQ_INT(0, ibv_query_port(p.d.ctx, 1, &pa));
    uint32_t mtu = 128u << pa.active_mtu;
    st_post_recv(p.b.qp, 3, p.rbuf, BUF, p.rmr->lkey);
    /* exactly the MTU goes */
    pair_send(&p, 1, mtu, QKEY);
    pair_expect_recv(&p, 3, mtu);
    struct ibv_wc wc;
    st_post_recv(p.b.qp, 4, p.rbuf, BUF, p.rmr->lkey);
    EXPECT_EQ_INT(0, ud_send(&p.a, p.ab, p.b.qp->qp_num, QKEY, IBV_WR_SEND, 2, p.sbuf, mtu + 1,
                             p.smr->lkey, 0));
    st_wait_wc(p.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_LOC_LEN_ERR, -1, 2);
    EXPECT_EQ_INT(IBV_QPS_ERR, p.a.qp->state);
    EXPECT_TRUE(st_no_wc(p.b.rcq, QUIET_MS));
    pair_close(&p);
}

TAP_CASE(test_ud_rdma_write_is_taken_and_completes_loc_qp_op_err)
{
    /* mlx5's ibv_post_send builds any opcode on a UD QP; the ConnectX
     * refuses the WQE with a local QP operation error */
    struct ud_pair p;
    pair_open(&p);
    struct ibv_sge sg = { (uintptr_t)p.sbuf, 64, p.smr->lkey };
    struct ibv_send_wr wr = { .wr_id = 8, .sg_list = &sg, .num_sge = 1,
                              .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED }, *bad;
    wr.wr.ud.ah = p.ab;
    wr.wr.ud.remote_qpn = p.b.qp->qp_num;
    wr.wr.ud.remote_qkey = QKEY;
    EXPECT_EQ_INT(0, ibv_post_send(p.a.qp, &wr, &bad));
    struct ibv_wc wc;
    st_wait_wc(p.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_LOC_QP_OP_ERR, -1, 8);
    EXPECT_EQ_INT(IBV_QPS_ERR, p.a.qp->state);
    /* what follows is flushed */
    EXPECT_EQ_INT(0, ud_send(&p.a, p.ab, p.b.qp->qp_num, QKEY, IBV_WR_SEND, 9, p.sbuf, 8,
                             p.smr->lkey, 0));
    st_wait_wc(p.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_WR_FLUSH_ERR, -1, 9);
    /* no address handle: refused at post */
    struct ud_qp q;
    ud_create(&p.d, &q, 1);
    ud_up(&q, QKEY);
    wr.opcode = IBV_WR_SEND;
    wr.wr.ud.ah = NULL;
    EXPECT_EQ_INT(EINVAL, ibv_post_send(q.qp, &wr, &bad));
    ud_destroy(&q);
    pair_close(&p);
}

TAP_CASE(test_ud_receive_too_small_for_grh_and_payload_completes_loc_len_err)
{
    struct ud_pair p;
    pair_open(&p);
    st_post_recv(p.b.qp, 3, p.rbuf, GRH + 50, p.rmr->lkey);
    st_post_recv(p.b.qp, 4, p.rbuf, GRH + 50, p.rmr->lkey);
    pair_send(&p, 1, 51, QKEY);
    struct ibv_wc wc;
    st_wait_wc(p.b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_LOC_LEN_ERR, -1, 3);
    st_wait_wc(p.b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_WR_FLUSH_ERR, -1, 4);
    EXPECT_EQ_INT(IBV_QPS_ERR, p.b.qp->state);
    pair_close(&p);
}

/* ------------------------------------------------------- the wr_* builder */
TAP_CASE(test_ud_wr_builder_sends_with_set_ud_addr)
{
    struct ud_pair p;
    pair_open(&p);
    struct ibv_qp_init_attr_ex ia = {
        .send_cq = p.a.scq, .recv_cq = p.a.rcq, .qp_type = IBV_QPT_UD,
        .cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
        .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = p.d.pd,
        .send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM,
    };
    struct ud_qp x = { .port = 1, .scq = p.a.scq, .rcq = p.a.rcq };
    x.qp = ibv_create_qp_ex(p.d.ctx, &ia);
    EXPECT_TRUE(x.qp != NULL);
    ud_up(&x, QKEY);
    struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(x.qp);
    EXPECT_TRUE(qx != NULL);
    st_post_recv(p.b.qp, 1, p.rbuf, GRH + 100, p.rmr->lkey);
    st_post_recv(p.b.qp, 2, p.rbuf + 1024, GRH + 100, p.rmr->lkey);
    ibv_wr_start(qx);
    qx->wr_id = 10;
    qx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send(qx);
    ibv_wr_set_ud_addr(qx, p.ab, p.b.qp->qp_num, QKEY);
    ibv_wr_set_sge(qx, p.smr->lkey, (uintptr_t)p.sbuf, 100);
    qx->wr_id = 11;
    ibv_wr_send_imm(qx, htonl(77));
    ibv_wr_set_sge(qx, p.smr->lkey, (uintptr_t)p.sbuf + 100, 30);
    ibv_wr_set_ud_addr(qx, p.ab, p.b.qp->qp_num, QKEY);   /* after the data: as mlx5 takes it */
    EXPECT_EQ_INT(0, ibv_wr_complete(qx));
    struct ibv_wc wc;
    st_wait_wc(p.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 10);
    st_wait_wc(p.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 11);
    st_wait_wc(p.b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 1);
    EXPECT_EQ_INT(GRH + 100, wc.byte_len);
    EXPECT_EQ_U64(x.qp->qp_num, wc.src_qp);
    EXPECT_MEMEQ(p.sbuf, p.rbuf + GRH, 100);
    st_wait_wc(p.b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 2);
    EXPECT_EQ_INT(IBV_WC_GRH | IBV_WC_WITH_IMM, wc.wc_flags);
    EXPECT_EQ_U64(77, ntohl(wc.imm_data));
    EXPECT_MEMEQ(p.sbuf + 100, p.rbuf + 1024 + GRH, 30);
    EXPECT_EQ_INT(0, ibv_destroy_qp(x.qp));
    /* RDMA ops are not built on a UD QP, as mlx5 refuses them */
    ia.send_ops_flags |= IBV_QP_EX_WITH_RDMA_WRITE;
    errno = 0;
    EXPECT_TRUE(ibv_create_qp_ex(p.d.ctx, &ia) == NULL);
    EXPECT_EQ_INT(EOPNOTSUPP, errno);
    pair_close(&p);
}

/* ------------------------------------------------- across two processes */
#define XMSGS 16

static void peer_receiver(int fd)
{
    struct st_dev d;
    st_dev_open(&d);
    struct ud_qp q;
    ud_create(&d, &q, 2);
    ud_up(&q, QKEY);
    char *buf = st_buf(XMSGS * 1024, 0);
    struct ibv_mr *mr = ibv_reg_mr(d.pd, buf, XMSGS * 1024, IBV_ACCESS_LOCAL_WRITE);
    for (int i = 0; i < XMSGS; i++)
        st_post_recv(q.qp, (uint64_t)i, buf + i * 1024, 1024, mr->lkey);
    uint32_t qpn = q.qp->qp_num, src;
    st_xfer_send(fd, &qpn, sizeof(qpn));
    st_xfer_recv(fd, &src, sizeof(src));
    char *want = st_buf(1024, 0);
    for (int i = 0; i < XMSGS; i++) {
        struct ibv_wc wc;
        st_wait_wc(q.rcq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, (uint64_t)i);
        EXPECT_EQ_U64(src, wc.src_qp);
        EXPECT_EQ_INT(GRH + 500 + i, wc.byte_len);
        EXPECT_EQ_INT(i, (int)ntohl(wc.imm_data));
        st_fill(want, 500 + (size_t)i, 100 + (unsigned)i);
        EXPECT_MEMEQ(want, buf + i * 1024 + GRH, 500 + (size_t)i);
    }
    char done = 'd';
    st_xfer_send(fd, &done, 1);
    ud_destroy(&q);
    ibv_dereg_mr(mr);
    st_dev_close(&d);
}

TAP_CASE(test_ud_two_processes_send_with_imm_in_order)
{
    int fd;
    int pid = st_fork_peer(peer_receiver, &fd);
    struct st_dev d;
    st_dev_open(&d);
    struct ud_qp q;
    ud_create(&d, &q, 1);
    ud_up(&q, QKEY);
    struct ibv_ah *ah = ah_to(&d, 1, 2, 0);
    char *buf = st_buf(1024, 0);
    struct ibv_mr *mr = ibv_reg_mr(d.pd, buf, 1024, IBV_ACCESS_LOCAL_WRITE);
    uint32_t peer, mine = q.qp->qp_num;
    st_xfer_recv(fd, &peer, sizeof(peer));
    st_xfer_send(fd, &mine, sizeof(mine));
    for (int i = 0; i < XMSGS; i++) {
        st_fill(buf, 500 + (size_t)i, 100 + (unsigned)i);
        EXPECT_EQ_INT(0, ud_send(&q, ah, peer, QKEY, IBV_WR_SEND_WITH_IMM, (uint64_t)i, buf,
                                 500 + (uint32_t)i, mr->lkey, (uint32_t)i));
        struct ibv_wc wc;
        st_wait_wc(q.scq, &wc, WAIT_MS);   /* the buffer is the next one's */
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, (uint64_t)i);
    }
    char done;
    st_xfer_recv(fd, &done, 1);
    int status;
    EXPECT_EQ_INT(pid, waitpid(pid, &status, 0));
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT_EQ_INT(0, ibv_destroy_ah(ah));
    ud_destroy(&q);
    ibv_dereg_mr(mr);
    st_dev_close(&d);
}

int main(int argc, char **argv) { return sntest_main(argc, argv); }
