/* tests/softnic/test_softnic_spin_counts.c: whether softnic's NIC threads
 * poll before they sleep (SOFTNIC_SPIN_US, spin.c), read from the spin
 * counters of the control API.  A ping-pong of writes leaves the requester
 * idle between posts and the responder between packets: with spinning on
 * (test_softnic_spin.sh runs this with SOFTNIC_SPIN_US=200) polls must
 * begin and some must find the next post or packet in time; with it off
 * (make check's plain run) none may begin.  Every write is checked. */
#include "sntest.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#define WAIT_MS 10000
#define ROUNDS 200

static bool spin_on(void)
{
    const char *v = getenv("SOFTNIC_SPIN_US");
    return v && *v && strtoul(v, NULL, 10) > 0;
}

static void spin_counts(uint64_t *started, uint64_t *found)
{
    int (*fn)(uint64_t *, uint64_t *);
    *(void **)&fn = dlsym(RTLD_DEFAULT, "softnic_ctl_spin_counts");
    EXPECT_TRUE(fn != NULL);
    *started = *found = 0;
    if (fn)
        EXPECT_EQ_INT(0, fn(started, found));
}

TAP_CASE(test_ping_pong_writes_spin_exactly_when_asked)
{
    struct st_write_pair p;
    st_write_pair_open(&p, 4096);
    size_t len = p.len;
    char *src = p.src, *dst = p.dst;
    uint64_t s0, f0;
    spin_counts(&s0, &f0);
    for (int i = 0; i < ROUNDS && p.smr && p.dmr; i++) {
        st_fill(src, len, (uint8_t)i);
        st_post_recv(p.b.qp, (uint64_t)i, NULL, 0, 0);
        st_post_rdma(p.a.qp, IBV_WR_RDMA_WRITE_WITH_IMM, (uint64_t)i, src, (uint32_t)len, p.smr->lkey,
                     (uintptr_t)dst, p.dmr->rkey, (uint32_t)i, IBV_SEND_SIGNALED);
        struct ibv_wc wc;
        st_wait_wc(p.b.rcq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, (uint64_t)i);
        st_wait_wc(p.a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, (uint64_t)i);
        EXPECT_MEMEQ(src, dst, len);
    }
    uint64_t s1, f1;
    spin_counts(&s1, &f1);
    tap_diag("SOFTNIC_SPIN_US=%s: %llu polls begun, %llu found work, over %d writes",
             getenv("SOFTNIC_SPIN_US") ? getenv("SOFTNIC_SPIN_US") : "(unset)",
             (unsigned long long)(s1 - s0), (unsigned long long)(f1 - f0), ROUNDS);
    if (spin_on()) {
        EXPECT_TRUE(s1 - s0 > 0);
        EXPECT_TRUE(f1 - f0 > 0);
    } else {
        EXPECT_EQ_U64(s0, s1);
        EXPECT_EQ_U64(f0, f1);
    }
    st_write_pair_close(&p);
}

int main(int argc, char **argv) { return sntest_main(argc, argv); }
