/* tests/plugin/test_p2p_forged_imm.c: a peer's immediates are untrusted
 * input. A pair of the plugin's comms on softnic (loaded as NCCL loads it);
 * the test posts, on the send comm's own QP, RDMA writes with immediates the
 * plugin would never make (plugin/ib/comm.h's layout) into a receive the
 * receiver posted: a size beyond the receive, in the whole-message field,
 * in a split message's pieces and in the sizes area the immediate points
 * to, more chunks than the receive can hold,
 * a chunk index beyond its count, a slot with no receive, the wrong use of
 * a slot. Each must fail the receive comm with one WARN naming the problem
 * (ncclRemoteError from test), never complete the receive, crash or hang.
 * On one port (no failover) every case applies; on the merged device a
 * stray immediate for an empty slot may be a replay after a failover and
 * is ignored, so only the split cases run there. */
#include "../tap.h"
#include "nccl_net_v8.h"
#include "plugin/ib/comm.h"
#include "built_plugin.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define POSTED 4096
#define WAIT_S 10

static const ncclNet_v8_t *net;
static char logbuf[1 << 14];

static int load(const char *hca, const char *merge)
{
    setenv("RAILNET_HCA", hca, 1);
    setenv("RAILNET_MERGE_PORTS", merge, 1);
    setenv("RAILNET_QPS_PER_CONN", "1", 1);
    unsetenv("SOFTNIC_SYSFS");
    built_capture_warns(logbuf, sizeof(logbuf));
    if (!(net = built_plugin_load(built_warn_logger, NULL)))
        return -1;
    logbuf[0] = '\0';
    return 0;
}

/* An immediate as comm.h lays it out, fields given raw (no checks). */
static uint32_t imm_whole(unsigned slot, unsigned parity, uint32_t size)
{
    return slot | parity << 8 | 1u << 9 | size << 11;
}
static uint32_t imm_split(unsigned slot, unsigned nq_field, unsigned k, uint32_t piece)
{
    return slot | 1u << 9 | 1u << 10 | nq_field << 11 | k << 15 | piece << 19;
}

/* Posts one receive of POSTED bytes (slot 0) and waits for its CTS entry
 * in the sender's ring: the address and rkey a forged write targets. */
static void *post_receive(struct built_pair *p, struct cts_entry *e)
{
    void *rr = NULL, *data = p->rbuf;
    int size = POSTED, tag = 7;
    double end = built_now_s() + WAIT_S;
    while (!rr && built_now_s() < end)
        EXPECT_EQ_INT(ncclSuccess, net->irecv(p->rc, 1, &data, &size, &tag, &p->rmh, &rr));
    struct send_comm *sc = p->sc;
    /* the receiver's NIC writes it: leave it the CPU (valgrind runs one
     * thread at a time) */
    while (__atomic_load_n(&sc->ring[0].seq, __ATOMIC_ACQUIRE) != 1 && built_now_s() < end)
        usleep(50);
    *e = sc->ring[0];
    EXPECT_EQ_U64(1, e->seq);
    return rr;
}

/* Posts, on the send comm's QP qpi, an inline write of len bytes of buf
 * to raddr with the rkey of that QP's port (rkeys[port_idx]), unsignaled
 * (the plugin's CQ sees nothing of it); with_imm: WRITE_WITH_IMM carrying
 * imm. */
static void raw_write(struct built_pair *p, int qpi, int with_imm, uint32_t imm, void *buf, uint32_t len,
                      uint64_t raddr, const uint32_t *rkeys)
{
    struct qp_conn *q = &((struct comm *)p->sc)->qps[qpi];
    struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = 0 };
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_INLINE;
    wr.imm_data = htonl(imm);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkeys[q->port->port_idx];
    EXPECT_EQ_INT(0, ibv_post_send(q->qp, &wr, &bad));
}

/* 16 bytes into the posted receive e with the immediate imm. */
static void forge(struct built_pair *p, int qpi, const struct cts_entry *e, uint32_t imm)
{
    char payload[16] = "forged payload!";
    raw_write(p, qpi, 1, imm, payload, sizeof(payload), e->addr, e->rkey);
}

/* A 4-byte size into the receiver's sizes area (slot 0, sub 0), before the
 * immediate that points to it. */
static void forge_size(struct built_pair *p, int qpi, uint32_t size)
{
    struct send_comm *sc = p->sc;
    raw_write(p, qpi, 0, 0, &size, sizeof(size), sc->remote_sizes_addr, sc->remote_sizes_rkey);
}

/* Tests rr until it returns an error (WAIT_S at most): that error, or
 * ncclSuccess when the receive completed or nothing came. */
static ncclResult_t outcome(void *rr, int *completed)
{
    int done = 0, size = -1;
    *completed = 0;
    double end = built_now_s() + WAIT_S;
    while (built_now_s() < end) {
        ncclResult_t r = net->test(rr, &done, &size);
        if (r != ncclSuccess)
            return r;
        if (done) {
            *completed = 1;
            printf("# the receive completed with %d bytes\n", size);
            return ncclSuccess;
        }
        usleep(50);
    }
    return ncclSuccess;
}

/* One forged case: a fresh pair, a receive, the writes (imm[i] on QP
 * qp[i]), then the receive comm must fail with one WARN holding `why`. */
static void forged_case(const char *hca, const char *merge, int n, const int *qp, const uint32_t *imm,
                        const char *why)
{
    if (load(hca, merge))
        TAP_SKIP("the plugin or softnic is not available");
    struct built_pair p;
    EXPECT_EQ_INT(0, built_pair_open(net, &p, POSTED));
    struct cts_entry e;
    void *rr = post_receive(&p, &e);
    for (int i = 0; i < n; i++)
        forge(&p, qp[i], &e, imm[i]);
    int completed;
    EXPECT_EQ_INT(ncclRemoteError, outcome(rr, &completed));
    EXPECT_EQ_INT(0, completed);
    printf("# %s", logbuf);
    EXPECT_EQ_INT(1, built_count(logbuf, why));
    EXPECT_EQ_INT(1, built_count(logbuf, "\n"));
    built_pair_close(net, &p);
}

static const int QP0[2] = { 0, 0 }, QP01[2] = { 0, 1 };

TAP_CASE(test_a_written_size_larger_than_the_receive_fails_the_comm)
{
    if (load("=softnic0:1", "0"))
        TAP_SKIP("the plugin or softnic is not available");
    struct built_pair p;
    EXPECT_EQ_INT(0, built_pair_open(net, &p, POSTED));
    struct cts_entry e;
    void *rr = post_receive(&p, &e);
    forge_size(&p, 0, 1u << 20);
    forge(&p, 0, &e, 0u); /* slot 0, whole, no size in the immediate: read the sizes area */
    int completed;
    EXPECT_EQ_INT(ncclRemoteError, outcome(rr, &completed));
    EXPECT_EQ_INT(0, completed);
    printf("# %s", logbuf);
    EXPECT_EQ_INT(1, built_count(logbuf, "peer sent 1048576 bytes into a receive of 4096 bytes"));
    built_pair_close(net, &p);
}

TAP_CASE(test_a_whole_message_larger_than_its_receive_fails_the_comm)
{
    const uint32_t imm[] = { imm_whole(0, 0, POSTED + 1) };
    forged_case("=softnic0:1", "0", 1, QP0, imm, "peer sent 4097 bytes into a receive of 4096 bytes");
}

TAP_CASE(test_an_immediate_for_a_slot_without_a_receive_fails_the_comm)
{
    const uint32_t imm[] = { imm_whole(5, 0, 8) };
    forged_case("=softnic0:1", "0", 1, QP0, imm, "no posted receive for this slot/sub");
}

TAP_CASE(test_an_immediate_for_another_use_of_the_slot_fails_the_comm)
{
    const uint32_t imm[] = { imm_whole(0, 1, 8) };
    forged_case("=softnic0:1", "0", 1, QP0, imm, "a chunk for another use of the slot");
}

/* A split message's chunks but its last are 4 KiB multiples: 3 chunks
 * cannot fit a 4 KiB receive (a message may have more chunks than the
 * connection has QPs: a chunk is at most 1 GiB). */
TAP_CASE(test_more_chunks_than_the_receive_can_hold_fails_the_comm)
{
    const uint32_t imm[] = { imm_split(0, 2, 0, 8) };
    forged_case("=softnic0:1", "0", 1, QP0, imm, "more chunks than its receive can hold");
}

TAP_CASE(test_a_chunk_index_beyond_its_count_fails_the_comm)
{
    const uint32_t imm[] = { imm_split(0, 1, 3, 8) }; /* chunk 3 of 2, on a 2-QP connection */
    forged_case("softnic0", "1", 1, QP0, imm, "a chunk index beyond the message's chunks");
}

TAP_CASE(test_split_size_pieces_beyond_the_receive_fail_the_comm)
{
    const uint32_t imm[] = { imm_split(0, 1, 0, (POSTED + 1) & 0x1fffu), imm_split(0, 1, 1, 0) };
    forged_case("softnic0", "1", 2, QP01, imm, "peer sent 4097 bytes into a receive of 4096 bytes");
}

int main(int argc, char **argv) { return tap_run(argc, argv); }
