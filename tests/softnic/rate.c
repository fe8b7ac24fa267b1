/* rate.c: per-port token buckets.  Debt is paid by sleeping, in pieces, so
 * that a large message is spread over time instead of delayed then burst.
 *
 * A port earns credit (tokens above zero) only while it has bytes waiting:
 * from when the bytes being charged were posted (or arrived), never for a
 * time the port sat idle.  A NIC serializes at its line rate and an idle
 * port buys no burst; with credit for idle time (the bucket held 5 ms, 15.6
 * MB at 25 Gb/s) a 25 Gb/s port moved 1 MiB messages at 6.2 GB/s in the
 * GPU bench after each pause between sizes.  Credit while bytes wait is the
 * NIC thread catching up with a schedule it fell behind (a thread the
 * scheduler left out for a few ms on 2 cores): up to 5 ms of it, or 64 KiB. */
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

/* The debt (bytes) still unpaid at now; 0 when the line is free. */
static double debt_at(const struct sn_rate *r, uint64_t now)
{
    if (r->tokens >= 0)
        return 0;
    double paid = now > r->last_ns ? (double)(now - r->last_ns) * ((double)r->rate / 1e9) : 0;
    return paid < -r->tokens ? -r->tokens - paid : 0;
}

uint64_t rate_charge_locked(struct sn_rate *r, uint64_t now, uint64_t len, uint64_t since_ns)
{
    if (!r->rate)
        return 0;
    double per_ns = (double)r->rate / 1e9;
    uint64_t from = r->last_ns;
    /* Credit left over at the last charge was earned by bytes that waited
     * then; bytes ready only since a later time find a port that had
     * nothing to send in between, and an idle port keeps no credit. */
    if (since_ns > r->last_ns && r->tokens > 0)
        r->tokens = 0;
    if (now > r->last_ns) {
        if (r->tokens < 0) {
            /* time pays debt whether or not bytes wait */
            double debt = debt_at(r, now);
            from = debt > 0 ? now : r->last_ns + (uint64_t)(-r->tokens / per_ns);
            r->tokens = -debt;
        }
        if (since_ns > from)
            from = since_ns;
        if (now > from)
            r->tokens += (double)(now - from) * per_ns;
        double burst = rate_burst(r);
        if (r->tokens > burst)
            r->tokens = burst;
        r->last_ns = now;
    }
    r->tokens -= (double)len;
    if (r->tokens >= 0)
        return 0;
    /* the debt is as of last_ns, later than now for a caller whose clock
     * was read before the last charge */
    return (r->last_ns - now) + (uint64_t)(-r->tokens / per_ns);
}

bool rate_charge_if_idle_locked(struct sn_rate *r, uint64_t now, uint64_t len, uint64_t since_ns)
{
    if (!r->rate)
        return true;
    if (debt_at(r, now) > 0)   /* the line is still busy with bytes charged before */
        return false;
    (void)rate_charge_locked(r, now, len, since_ns);
    return true;
}

bool rate_take_if_idle(struct sn_rate *r, uint64_t len, uint64_t since_ns)
{
    if (!r->rate)
        return true;
    pthread_mutex_lock(&r->lock);
    bool ok = rate_charge_if_idle_locked(r, sn_now_ns(), len, since_ns);
    pthread_mutex_unlock(&r->lock);
    return ok;
}

void rate_take(struct sn_rate *r, uint64_t len, uint64_t since_ns)
{
    if (!r->rate)
        return;
    pthread_mutex_lock(&r->lock);
    uint64_t now = sn_now_ns();
    uint64_t wait = rate_charge_locked(r, now, len, since_ns);
    pthread_mutex_unlock(&r->lock);
    if (wait)
        sn_sleep_until_ns(now + wait);
}
