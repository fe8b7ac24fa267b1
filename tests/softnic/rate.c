/* rate.c: per-port token buckets.  The bucket holds at most 5 ms worth
 * of bytes (or 64 KiB) so that a long idle time does not buy a burst, while
 * a NIC thread that the scheduler left out for a few ms (2 cores, busy
 * pollers) can still catch up instead of falling below the rate; a
 * caller that overdraws sleeps until the debt is paid, which spreads a
 * large message over time instead of delaying the next one. */
#include "softnic.h"

#include <errno.h>
#include <time.h>

uint64_t sn_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void sn_sleep_until_ns(uint64_t t)
{
    struct timespec ts = { .tv_sec = (time_t)(t / 1000000000ull),
                           .tv_nsec = (long)(t % 1000000000ull) };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static double rate_burst(const struct sn_rate *r)
{
    double b = (double)r->rate / 200.0;
    return b < 65536.0 ? 65536.0 : b;
}

void rate_init(struct sn_rate *r, uint64_t rate)
{
    pthread_mutex_init(&r->lock, NULL);
    r->rate = rate;
    r->tokens = 0;
    r->last_ns = sn_now_ns();
}

void rate_set(struct sn_rate *r, uint64_t rate)
{
    pthread_mutex_lock(&r->lock);
    r->rate = rate;
    r->tokens = 0;
    r->last_ns = sn_now_ns();
    pthread_mutex_unlock(&r->lock);
}

void rate_take(struct sn_rate *r, uint64_t len)
{
    if (!r->rate)
        return;
    pthread_mutex_lock(&r->lock);
    if (!r->rate) {
        pthread_mutex_unlock(&r->lock);
        return;
    }
    uint64_t now = sn_now_ns();
    r->tokens += (double)(now - r->last_ns) * (double)r->rate / 1e9;
    double burst = rate_burst(r);
    if (r->tokens > burst)
        r->tokens = burst;
    r->last_ns = now;
    r->tokens -= (double)len;
    double debt = -r->tokens;
    uint64_t rate = r->rate;
    pthread_mutex_unlock(&r->lock);
    if (debt > 0)
        sn_sleep_until_ns(now + (uint64_t)(debt * 1e9 / (double)rate));
}
