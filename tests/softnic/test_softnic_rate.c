/* test_softnic_rate.c: the port rate limit's accounting (rate.c), on a
 * clock the test sets: no sleeping, no timing.  At 1 GB/s a byte is a
 * nanosecond, so waits read as byte counts; the bucket's cap is then 5 ms
 * (5,000,000 bytes). */
#include <stdlib.h>

#include "../tap.h"
#include "softnic.h"

#define MS 1000000ull
#define RATE 1000000000ull /* bytes/s: 1 byte per ns */
#define CAP 5000000ull     /* rate / 200 */

static struct sn_rate r;

/* A port last used at time t0 whose bucket is empty. */
static void port_at(uint64_t t0)
{
    rate_init(&r, RATE);
    r.last_ns = t0;
    r.tokens = 0;
}

static uint64_t charge(uint64_t now, uint64_t len, uint64_t since)
{
    return rate_charge_locked(&r, now, len, since);
}

/* within a nanosecond or two of rounding */
#define EXPECT_NEAR(expected, actual)                                                   \
    do {                                                                                \
        long long e_ = (long long)(expected), a_ = (long long)(actual);                 \
        if (a_ < e_ - 2 || a_ > e_ + 2)                                                 \
            tap_fail_at(__FILE__, __LINE__, "%s: expected %lld (+-2), got %lld", #actual, \
                        e_, a_);                                                        \
    } while (0)

TAP_CASE(test_idle_port_buys_no_burst)
{
    /* idle for 100 ms, then a 1 MiB message posted now: it takes its line
     * time (with credit for idle time it left at once, 1 MiB of 5 MB) */
    port_at(0);
    EXPECT_NEAR(1048576, charge(100 * MS, 1048576, 100 * MS));
}

TAP_CASE(test_bytes_waiting_on_a_late_thread_catch_up)
{
    /* posted at 1 ms, the NIC thread ran only at 3 ms: 2 ms of line time
     * was lost while the bytes waited, and the first 2 MB go at once */
    port_at(0);
    EXPECT_EQ_U64(0, charge(3 * MS, 2000000, 1 * MS));
    EXPECT_NEAR(1000000, charge(3 * MS, 1000000, 1 * MS));
}

TAP_CASE(test_catching_up_is_capped_at_five_ms)
{
    port_at(0);
    EXPECT_NEAR(8000000 - CAP, charge(100 * MS, 8000000, 0));
}

TAP_CASE(test_debt_is_paid_by_time_once)
{
    port_at(0);
    uint64_t w = charge(10 * MS, 1000000, 10 * MS);
    EXPECT_NEAR(1000000, w);
    /* the next piece of the same message, charged when the wait ended: its
     * own line time, nothing of the first one again */
    EXPECT_NEAR(1000000, charge(10 * MS + w, 1000000, 10 * MS));
    /* a piece charged before the debt was paid waits for the rest of it */
    port_at(0);
    charge(10 * MS, 1000000, 10 * MS);
    EXPECT_NEAR(1500000, charge(10 * MS + 500000, 1000000, 10 * MS));
}

TAP_CASE(test_credit_starts_when_the_debt_is_paid_and_bytes_wait)
{
    /* debt of 1 MB at 10 ms (paid at 11 ms), next bytes posted at 12 ms and
     * charged at 13 ms: the port idled 11-12 ms (no credit) and the bytes
     * waited 12-13 ms (1 MB of credit) */
    port_at(0);
    charge(10 * MS, 1000000, 10 * MS);
    EXPECT_EQ_U64(0, charge(13 * MS, 1000000, 12 * MS));
    EXPECT_NEAR(1000000, charge(13 * MS, 1000000, 12 * MS));
}

TAP_CASE(test_a_stream_with_pauses_never_beats_the_line_rate)
{
    /* pieces of 256 KiB, each charged when the previous wait ended, with a
     * pause of 0-3 ms before one in four: the bytes cannot have left faster
     * than the line rate allows since the stream began */
    port_at(0);
    srand(7);
    uint64_t t = 1 * MS, start = t, idle = 0, bytes = 0;
    for (int i = 0; i < 2000; i++) {
        if (i % 4 == 0) {
            uint64_t pause = (uint64_t)(rand() % 3000) * 1000;
            t += pause;
            idle += pause;
        }
        uint64_t posted = t;
        t += charge(t, 262144, posted);
        bytes += 262144;
        EXPECT_TRUE(bytes <= t - start - idle + 2);
    }
    EXPECT_TRUE(bytes >= t - start - idle - 2);
}

TAP_CASE(test_credit_left_over_does_not_outlive_idle_time)
{
    /* 100 bytes that waited 1 ms leave 999,900 bytes of credit; the port
     * then idles until 1 s, and a 1 MB message posted then takes its line
     * time (the leftover made it wait 100 ns) */
    port_at(0);
    EXPECT_EQ_U64(0, charge(1 * MS, 100, 0));
    EXPECT_NEAR(1000000, charge(1000 * MS, 1000000, 1000 * MS));
    /* bytes that were waiting at the last charge keep it: 2 MB posted at
     * 0.5 ms, charged 100 ns later, wait for 1 MB (1 MB and 100 bytes of
     * credit, less the 100 bytes) */
    port_at(0);
    EXPECT_EQ_U64(0, charge(1 * MS, 100, 0));
    EXPECT_NEAR(1000000, charge(1 * MS + 100, 2000000, MS / 2));
}

TAP_CASE(test_a_clock_read_before_the_last_charge_waits_for_it)
{
    /* 1 MB charged at 10 ms leaves at 11 ms; 1 MB more charged with a
     * clock read at 9 ms leaves at 12 ms: a 3 ms wait from 9 ms */
    port_at(0);
    EXPECT_NEAR(1000000, charge(10 * MS, 1000000, 10 * MS));
    EXPECT_NEAR(3000000, charge(9 * MS, 1000000, 9 * MS));
}

TAP_CASE(test_work_between_pieces_of_one_message_is_caught_up)
{
    /* a message of 16 pieces of 1 MB, each piece charged 100 us after the
     * previous wait ended (the receive and copy a VF placement does
     * between them), all with the message's start as since: the message
     * takes its line time, 16 ms (with each piece's own charge time as
     * since, 17.6 ms: the VF ran at 91% of its share) */
    port_at(0);
    uint64_t start = 10 * MS, t = start;
    for (int i = 0; i < 16; i++) {
        t += 100000;
        t += charge(t, 1000000, start);
    }
    EXPECT_NEAR(16 * MS, t - start);
}

TAP_CASE(test_a_free_line_takes_a_post_at_once_and_the_next_pays)
{
    /* a posting thread, which must not sleep, sends 4 KiB on a free line;
     * the line is busy for its 4096 ns, which the next charge waits out */
    port_at(0);
    EXPECT_TRUE(rate_charge_if_idle_locked(&r, 10 * MS, 4096, 10 * MS));
    EXPECT_NEAR(4096 + 1000, charge(10 * MS, 1000, 10 * MS));
}

TAP_CASE(test_a_busy_line_refuses_a_post_and_charges_nothing)
{
    /* 1 MB charged at 10 ms keeps the line until 11 ms: a post at 10.5 ms
     * is refused, and a charge at 11 ms finds the line exactly free */
    port_at(0);
    charge(10 * MS, 1000000, 10 * MS);
    EXPECT_TRUE(!rate_charge_if_idle_locked(&r, 10 * MS + 500000, 100, 10 * MS + 500000));
    EXPECT_NEAR(1000, charge(11 * MS, 1000, 11 * MS));
    EXPECT_TRUE(rate_charge_if_idle_locked(&r, 11 * MS + 1000, 100, 11 * MS + 1000));
}

TAP_CASE(test_unlimited_port_never_waits)
{
    rate_init(&r, 0);
    EXPECT_EQ_U64(0, charge(1, 1ull << 40, 1));
}

int main(int argc, char **argv)
{
    return tap_run(argc, argv);
}
