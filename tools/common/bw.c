/* tools/common/bw.c: the RDMA WRITE loop (see bw.h). */
#include "config.h"

#include "strfmt.h"
#include "bw.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double bw_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct qp_state {
    long posted;      /* writes posted on this QP */
    long completed;   /* writes known complete */
    long unsignalled; /* posted since the last signalled one */
};


static int post_one(struct rc_qp *q, struct qp_state *s, void *local, uint32_t lkey,
                    uint64_t raddr, uint32_t rkey, size_t size, int signal)
{
    struct ibv_sge sge = { .addr = (uint64_t)(uintptr_t)local, .length = (uint32_t)size,
                           .lkey = lkey };
    struct ibv_send_wr wr = {
        .wr_id = (uint64_t)(s->unsignalled + 1), /* writes this completion covers */
        .sg_list = &sge,
        .num_sge = 1,
        .opcode = IBV_WR_RDMA_WRITE,
        .send_flags = signal ? IBV_SEND_SIGNALED : 0,
        .wr = { .rdma = { .remote_addr = raddr, .rkey = rkey } },
    }, *bad = NULL;
    int rc = ibv_post_send(q->qp, &wr, &bad);
    if (rc)
        return rc;
    s->posted++;
    s->unsignalled = signal ? 0 : s->unsignalled + 1;
    return 0;
}

int bw_run_writes(struct rc_qp *qps, int nqp, void *local, uint32_t lkey, uint64_t remote_addr,
                  uint32_t rkey, const struct bw_params *p, struct bw_result *res, char *err,
                  size_t errlen)
{
    memset(res, 0, sizeof(*res));
    res->size = p->size;
    if (nqp <= 0 || p->size == 0 || p->size > UINT32_MAX) {
        str_fmt(err, errlen, "invalid write size %zu or QP count %d", p->size, nqp);
        return -1;
    }
    int depth = p->tx_depth > 0 ? p->tx_depth : 128;
    int cq_mod = p->cq_mod > 0 ? p->cq_mod : 16;
    if (cq_mod > depth)
        cq_mod = depth;
    int timed = p->duration > 0;
    long total = timed ? -1 : p->iters;

    struct qp_state *st = calloc((size_t)nqp, sizeof(*st));
    size_t scap = 1024, ns = 0;
    struct bw_sample *samples = malloc(scap * sizeof(*samples));
    if (!st || !samples) {
        free(st);
        free(samples);
        str_fmt(err, errlen, "out of memory");
        return -1;
    }
    long posted = 0, done = 0;
    int rc = 0, stopping = !timed && total <= 0;
    double t0 = bw_now(), last_progress = t0, deadline = t0 + p->duration;
    double tick_every = p->tick_interval > 0 ? p->tick_interval : 0.5, last_tick = t0;
    int next = 0;
    struct ibv_wc wc[16];

    while (!stopping || done < posted) {
        /* Post as far as each QP's window allows, round-robin. */
        for (int k = 0; k < nqp && !stopping; k++) {
            int qi = (next + k) % nqp;
            struct rc_qp *q = &qps[qi];
            struct qp_state *s = &st[qi];
            while (s->posted - s->completed < depth && !stopping) {
                long left = timed ? -1 : total - posted;
                int last_of_run = left == 1;
                /* Signal every cq_mod-th write, the last of the run, and the
                 * last that fits in the window so it never fills silently. */
                int signal = s->unsignalled + 1 >= cq_mod || last_of_run ||
                             s->posted - s->completed + 1 == depth;
                rc = post_one(q, s, local, lkey, remote_addr, rkey, p->size, signal);
                if (rc) {
                    str_fmt(err, errlen, "ibv_post_send on QP 0x%x failed: %s", q->qp->qp_num,
                             strerror(rc));
                    goto out;
                }
                posted++;
                if (!timed && posted >= total)
                    stopping = 1;
            }
        }
        next = (next + 1) % nqp;
        if (timed && !stopping && bw_now() >= deadline) {
            stopping = 1;
            /* Make sure every QP's tail is signalled: post one more
             * signalled write where unsignalled writes remain. */
            for (int qi = 0; qi < nqp; qi++) {
                if (st[qi].unsignalled == 0)
                    continue;
                if (st[qi].posted - st[qi].completed >= depth)
                    continue; /* the window-full rule already signalled it */
                rc = post_one(&qps[qi], &st[qi], local, lkey, remote_addr, rkey, p->size, 1);
                if (rc) {
                    str_fmt(err, errlen, "ibv_post_send failed: %s", strerror(rc));
                    goto out;
                }
                posted++;
            }
        }
        /* Reap completions. */
        int progressed = 0;
        for (int qi = 0; qi < nqp; qi++) {
            int n = ibv_poll_cq(qps[qi].cq, 16, wc);
            if (n < 0) {
                str_fmt(err, errlen, "ibv_poll_cq failed on QP 0x%x", qps[qi].qp->qp_num);
                rc = -1;
                goto out;
            }
            for (int i = 0; i < n; i++) {
                if (wc[i].status != IBV_WC_SUCCESS) {
                    str_fmt(err, errlen, "RDMA WRITE completion error on QP 0x%x: status %d "
                             "(%s, vendor error 0x%x)", qps[qi].qp->qp_num, (int)wc[i].status,
                             p->status_str ? p->status_str(wc[i].status) : "?",
                             wc[i].vendor_err);
                    rc = -1;
                    goto out;
                }
                st[qi].completed += (long)wc[i].wr_id;
                done += (long)wc[i].wr_id;
                progressed = 1;
            }
        }
        double now = bw_now();
        if (p->tick && now - last_tick >= tick_every) {
            last_tick = now;
            if (p->tick(p->tick_arg, done)) {
                str_fmt(err, errlen, "stopped by the caller after %ld of %ld writes", done, posted);
                rc = -1;
                goto out;
            }
        }
        if (progressed) {
            last_progress = now;
            if (ns == scap) {
                struct bw_sample *ns_ = realloc(samples, 2 * scap * sizeof(*samples));
                if (!ns_) {
                    str_fmt(err, errlen, "out of memory");
                    rc = -1;
                    goto out;
                }
                samples = ns_;
                scap *= 2;
            }
            samples[ns++] = (struct bw_sample){ now, done };
        } else if (now - last_progress > (p->stall_timeout > 0 ? p->stall_timeout : 10.0)) {
            str_fmt(err, errlen, "no RDMA WRITE completion for %.0f s (%ld of %ld writes done): "
                     "peer gone or link down?", now - last_progress, done, posted);
            rc = -1;
            goto out;
        }
    }
    double t1 = ns ? samples[ns - 1].t : bw_now();
    res->iters = done;
    res->seconds = t1 - t0;
    if (res->seconds > 0) {
        res->avg_bps = (double)done * (double)p->size / res->seconds;
        res->msg_rate = (double)done / res->seconds;
    }
    res->peak_bps = bw_peak_bps(samples, ns, t0, p->size);
    if (res->peak_bps < res->avg_bps)
        res->peak_bps = res->avg_bps;
out:
    free(st);
    free(samples);
    return rc ? -1 : 0;
}

double bw_peak_bps(const struct bw_sample *samples, size_t ns, double t0, size_t size)
{
    if (!ns)
        return 0;
    /* Best rate over windows that span at least a tenth of the operations
     * and a tenth of the run's time, each measured from the start or an
     * earlier sample. The time bound matters: completions come in bursts
     * (one CQE covers cq_mod writes, one poll reaps many CQEs), and a
     * window inside a burst would report an absurd rate. */
    long done = samples[ns - 1].done;
    long win = done / 10 > 0 ? done / 10 : 1;
    double win_t = (samples[ns - 1].t - t0) / 10;
    size_t j = 0;
    double prev_t = t0, peak = 0;
    long prev_done = 0;
    for (size_t i = 0; i < ns; i++) {
        while (j < i && samples[i].done - samples[j].done >= win &&
               samples[i].t - samples[j].t >= win_t) {
            prev_t = samples[j].t;
            prev_done = samples[j].done;
            j++;
        }
        double dt = samples[i].t - prev_t;
        long dn = samples[i].done - prev_done;
        if (dn >= win && dt >= win_t && dt > 0) {
            double bps = (double)dn * (double)size / dt;
            if (bps > peak)
                peak = bps;
        }
    }
    return peak;
}
