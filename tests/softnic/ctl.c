/* ctl.c: the test control API (softnic_ctl.h) and the counters behind it. */
#include "softnic.h"
#include "softnic_ctl.h"

#include <errno.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static void counters_read(const struct sn_counters *c, struct softnic_ctl_counters *o)
{
    memset(o, 0, sizeof(*o));
    o->tx_bytes = atomic_load(&c->tx_bytes);
    o->tx_packets = atomic_load(&c->tx_packets);
    o->rx_bytes = atomic_load(&c->rx_bytes);
    o->rx_packets = atomic_load(&c->rx_packets);
    o->errors = atomic_load(&c->errors);
    o->retries = atomic_load(&c->retries);
    o->rnr_naks = atomic_load(&c->rnr_naks);
}

_Atomic int64_t sn_live_qps, sn_live_cqs, sn_live_mrs;

EXPORT int softnic_ctl_link_rate(uint64_t *bytes_per_s)
{
    if (!bytes_per_s)
        return EINVAL;
    *bytes_per_s = link_calibrated_rate(&softnic_global()->conf);
    return 0;
}

EXPORT int softnic_ctl_objects(struct softnic_ctl_objects *out)
{
    if (!out)
        return EINVAL;
    out->qps = atomic_load(&sn_live_qps);
    out->cqs = atomic_load(&sn_live_cqs);
    out->mrs = atomic_load(&sn_live_mrs);
    return 0;
}

EXPORT int softnic_ctl_ud_counts(struct softnic_ctl_ud *out)
{
    if (!out)
        return EINVAL;
    out->sent = atomic_load(&sn_ud_cnt.sent);
    out->delivered = atomic_load(&sn_ud_cnt.delivered);
    out->malformed = atomic_load(&sn_ud_cnt.malformed);
    out->no_qp = atomic_load(&sn_ud_cnt.no_qp);
    out->bad_qkey = atomic_load(&sn_ud_cnt.bad_qkey);
    out->no_recv = atomic_load(&sn_ud_cnt.no_recv);
    return 0;
}

static struct sn_port *ctl_port(struct ibv_context *ctx, uint8_t port)
{
    if (!ctx || ctx->abi_compat != __VERBS_ABI_IS_EXTENDED)
        return NULL;
    return sn_port_get(sn_device_of(ctx), port);
}

EXPORT int softnic_ctl_port_set_state(struct ibv_context *ctx, uint8_t port, int up)
{
    if (!ctl_port(ctx, port))
        return EINVAL;
    device_port_set_state(sn_device_of(ctx), port, up != 0);
    return 0;
}

EXPORT int softnic_ctl_device_fatal(struct ibv_context *ctx)
{
    if (!ctx)
        return EINVAL;
    device_set_fatal(sn_device_of(ctx));
    return 0;
}

EXPORT int softnic_ctl_port_set_rate(struct ibv_context *ctx, uint8_t port, uint64_t rate)
{
    struct sn_port *p = ctl_port(ctx, port);
    if (!p)
        return EINVAL;
    p->conf.rate = rate;
    rate_set(&p->tx_rate, rate);
    uint64_t base = rate ? rate : softnic_global()->conf.vf_base_rate;
    rate_set(&p->vf_rate, base * 84 / 400);
    return 0;
}

EXPORT int softnic_ctl_port_set_latency(struct ibv_context *ctx, uint8_t port, uint32_t usec)
{
    struct sn_port *p = ctl_port(ctx, port);
    if (!p || usec > SN_MAX_LATENCY_US)
        return EINVAL;
    p->conf.latency_us = usec;
    return 0;
}

EXPORT int softnic_ctl_port_counters(struct ibv_context *ctx, uint8_t port,
                                     struct softnic_ctl_counters *out)
{
    struct sn_port *p = ctl_port(ctx, port);
    if (!p || !out)
        return EINVAL;
    counters_read(&p->cnt, out);
    uint64_t b, n;
    push_rx_counts(NULL, sn_device_of(ctx), port, &b, &n);   /* what same-host peers placed */
    out->rx_bytes += b;
    out->rx_packets += n;
    return 0;
}

EXPORT int softnic_ctl_qp_fast_bytes(struct ibv_qp *qp, uint64_t *out)
{
    if (!qp || !out)
        return EINVAL;
    *out = atomic_load(&sn_qp_of(qp)->cnt.fast_bytes);
    return 0;
}

EXPORT int softnic_ctl_qp_acks(struct ibv_qp *qp, uint64_t *out)
{
    if (!qp || !out)
        return EINVAL;
    *out = atomic_load(&sn_qp_of(qp)->cnt.acks);
    return 0;
}

EXPORT int softnic_ctl_qp_acks_noted(struct ibv_qp *qp, uint64_t *out)
{
    if (!qp || !out)
        return EINVAL;
    *out = atomic_load(&sn_qp_of(qp)->cnt.acks_noted);
    return 0;
}

EXPORT int softnic_ctl_qp_direct_wqes(struct ibv_qp *qp, uint64_t *out)
{
    if (!qp || !out)
        return EINVAL;
    *out = atomic_load(&sn_qp_of(qp)->cnt.direct_wqes);
    return 0;
}

EXPORT int softnic_ctl_qp_pushed_wqes(struct ibv_qp *qp, uint64_t *out)
{
    if (!qp || !out)
        return EINVAL;
    *out = atomic_load(&sn_qp_of(qp)->cnt.pushed_wqes);
    return 0;
}

EXPORT int softnic_ctl_qp_stored_wqes(struct ibv_qp *qp, uint64_t *out)
{
    if (!qp || !out)
        return EINVAL;
    *out = atomic_load(&sn_qp_of(qp)->cnt.stored_wqes);
    return 0;
}

EXPORT int softnic_ctl_qp_post_calls(struct ibv_qp *qp, uint64_t *out)
{
    if (!qp || !out)
        return EINVAL;
    *out = atomic_load(&sn_qp_of(qp)->cnt.post_calls);
    return 0;
}

EXPORT int softnic_ctl_qp_steps(struct ibv_qp *qp, struct softnic_ctl_qp_steps *out)
{
    if (!qp || !out)
        return EINVAL;
    struct sn_qp *q = sn_qp_of(qp);
    out->requester = atomic_load(&q->steps[SN_QP_REQUESTER]);
    out->completer = atomic_load(&q->steps[SN_QP_COMPLETER]);
    out->responder = atomic_load(&q->steps[SN_QP_RESPONDER]);
    return 0;
}

EXPORT int softnic_ctl_engines(struct softnic_ctl_engines *out)
{
    if (!out)
        return EINVAL;
    struct sn_engine_counts c;
    engine_counts(&c);
    out->engines = c.engines;
    out->tasks = c.tasks;
    out->steps = c.steps;
    out->wakeups = c.wakeups;
    out->timers = c.timers;
    return 0;
}

EXPORT int softnic_ctl_spin_counts(uint64_t *started, uint64_t *found_work)
{
    if (!started || !found_work)
        return EINVAL;
    spin_counts(started, found_work);
    return 0;
}

EXPORT int softnic_ctl_ack_polls(struct softnic_ctl_ack_polls *out)
{
    if (!out)
        return EINVAL;
    uint64_t asked[SN_POLL_KINDS], started[SN_POLL_KINDS], found[SN_POLL_KINDS];
    memset(out, 0, sizeof(*out));
    out->us = softnic_global()->conf.ack_poll_us;
    ack_poll_counts(asked, started, found, &out->responder_conns);
    out->completer_asked = asked[SN_POLL_COMPLETER];
    out->responder_asked = asked[SN_POLL_RESPONDER];
    out->completer_polls = started[SN_POLL_COMPLETER];
    out->completer_found = found[SN_POLL_COMPLETER];
    out->responder_polls = started[SN_POLL_RESPONDER];
    out->responder_found = found[SN_POLL_RESPONDER];
    return 0;
}

EXPORT int softnic_ctl_gpu_value_writes(uint64_t *out)
{
    if (!out)
        return EINVAL;
    return gpu_value_writes(out);
}

EXPORT int softnic_ctl_port_fast_bytes(struct ibv_context *ctx, uint8_t port, uint64_t *out)
{
    struct sn_port *p = ctl_port(ctx, port);
    if (!p)
        return EINVAL;
    if (!out)
        return EINVAL;
    *out = atomic_load(&p->cnt.fast_bytes);
    return 0;
}

EXPORT int softnic_ctl_port_tc_bytes(struct ibv_context *ctx, uint8_t port, uint8_t tc, uint64_t *out)
{
    struct sn_port *p = ctl_port(ctx, port);
    if (!p || !out)
        return EINVAL;
    *out = atomic_load(&p->tc_tx_bytes[tc]);
    return 0;
}

EXPORT int softnic_ctl_qp_counters(struct ibv_qp *qp, struct softnic_ctl_counters *out)
{
    if (!qp || !out)
        return EINVAL;
    counters_read(&sn_qp_of(qp)->cnt, out);
    uint64_t b, p;
    push_rx_counts(sn_qp_of(qp), NULL, 0, &b, &p);   /* what same-host peers placed */
    out->rx_bytes += b;
    out->rx_packets += p;
    return 0;
}
