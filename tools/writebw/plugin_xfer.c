/* tools/writebw/plugin_xfer.c: --mode=plugin's data loop: a window of
 * isend on the sending comm and irecv on the receiving comm, each request
 * polled with test() in order, heartbeats to the peer, and the end of a size
 * (see plugin.c for how -D ends). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "../common/bw.h"
#include "../common/strfmt.h"
#include "plugin_ctx.h"

/* Post what the window allows and test the oldest request of a comm. */
static int step_send(struct plugin_ctx *c, size_t size, long total, int *sentinels, double deadline,
                     struct bw_sample **smp, size_t *ns, size_t *cap, char *err, size_t errlen)
{
    struct pcomm *pc = &c->send;
    int timed = deadline > 0;
    for (;;) {
        if (pc->posted - pc->done >= c->window)
            break;
        int stop_data = timed ? bw_now() >= deadline : pc->posted >= total;
        if (stop_data && !timed)
            break;
        if (stop_data && c->s->peer_stopped >= 0 && pc->posted >= c->s->peer_stopped)
            break;
        int sz = stop_data ? 0 : (int)size;
        void **slot = &pc->req[pc->posted % c->window];
        NET_CHECK(c->net->isend(pc->comm, c->buf, sz, (int)(pc->posted & 0x3fffffff), pc->mh, slot),
                  "isend");
        if (!*slot)
            break; /* no clear-to-send yet */
        pc->posted++;
        if (stop_data)
            (*sentinels)++;
    }
    while (pc->done < pc->posted) {
        int done = 0, got = 0;
        NET_CHECK(c->net->test(pc->req[pc->done % c->window], &done, &got), "test(isend)");
        if (!done)
            break;
        pc->done++;
        if (got > 0) {
            if (*ns == *cap) {
                size_t nc = *cap ? *cap * 2 : 1024;
                struct bw_sample *p = realloc(*smp, nc * sizeof(**smp));
                if (!p) {
                    str_fmt(err, errlen, "out of memory");
                    return -1;
                }
                *smp = p;
                *cap = nc;
            }
            long prev = *ns ? (*smp)[*ns - 1].done : 0;
            (*smp)[(*ns)++] = (struct bw_sample){ bw_now(), prev + 1 };
        }
    }
    return 0;
}

static int step_recv(struct plugin_ctx *c, size_t size, long total, int timed, int *stopped,
                     char *err, size_t errlen)
{
    uint8_t b[8];
    struct pcomm *pc = &c->recv;
    while (!*stopped && pc->posted - pc->done < c->window && (timed || pc->posted < total)) {
        void *data = c->buf;
        int sz = (int)size, tag = (int)(pc->posted & 0x3fffffff);
        void **slot = &pc->req[pc->posted % c->window];
        NET_CHECK(c->net->irecv(pc->comm, 1, &data, &sz, &tag, &pc->mh, slot), "irecv");
        if (!*slot)
            break;
        pc->posted++;
    }
    while (pc->done < pc->posted) {
        int done = 0, got = 0;
        NET_CHECK(c->net->test(pc->req[pc->done % c->window], &done, &got), "test(irecv)");
        if (!done)
            break;
        pc->done++;
        if (got == 0 && timed) {
            if (!*stopped) {
                *stopped = 1;
                int n = wb_enc_u64((uint64_t)pc->posted, b, sizeof(b));
                if (session_send(c->s, WB_MSG_STOPPED, b, (uint32_t)n, err, errlen))
                    return -1;
            }
        } else if (got != (int)size && !(got == 0 && timed)) {
            str_fmt(err, errlen, "receive %ld completed with %d bytes, expected %zu",
                    pc->done - 1, got, size);
            return -1;
        }
    }
    return 0;
}

int plugin_run_size(void *arg, size_t size, struct wb_result *res, char *err, size_t errlen)
{
    struct plugin_ctx *c = arg;
    struct session *s = c->s;
    const struct wb_opts *o = s->o;
    int timed = o->duration > 0;
    long total = timed ? -1 : o->iters;
    c->send.posted = c->send.done = 0;
    c->recv.posted = c->recv.done = 0;
    int sentinels = 0, stopped = 0, rc = -1;
    struct bw_sample *smp = NULL;
    size_t ns = 0, cap = 0;
    double t0 = bw_now(), deadline = timed ? t0 + o->duration : 0;
    double last_beat = t0, last_progress = t0;
    long last_count = 0;
    for (;;) {
        long want = s->peer_stopped;
        int send_busy = c->want_send &&
                        (timed ? want < 0 || c->send.posted < want || c->send.done < c->send.posted
                               : c->send.done < total);
        int recv_busy = c->want_recv &&
                        (timed ? !stopped || c->recv.done < c->recv.posted
                               : c->recv.done < total);
        if (!send_busy && !recv_busy)
            break;
        if (send_busy &&
            step_send(c, size, total, &sentinels, deadline, &smp, &ns, &cap, err, errlen))
            goto out;
        if (recv_busy && step_recv(c, size, total, timed, &stopped, err, errlen))
            goto out;
        double now = bw_now();
        /* Past the deadline the sender waits for STOPPED: read it soon. */
        if (timed && c->want_send && now >= deadline && want < 0 && session_poll(s, err, errlen))
            goto out;
        long count = c->send.done + c->recv.done + c->send.posted + c->recv.posted;
        if (count != last_count) {
            last_count = count;
            last_progress = now;
        } else if (now - last_progress > o->timeout) {
            str_fmt(err, errlen, "no progress through the plugin for %.0f s (sent %ld/%ld done, "
                    "received %ld/%ld done): peer gone?", o->timeout, c->send.done,
                    c->send.posted, c->recv.done, c->recv.posted);
            goto out;
        }
        if (now - last_beat >= 0.5) {
            last_beat = now;
            if (session_tick(s, c->send.done + c->recv.done)) {
                str_fmt(err, errlen, "%s", s->tick_err);
                goto out;
            }
            if (!o->bidir && session_poll(s, err, errlen))
                goto out;
        }
    }
    rc = 0;
    if (c->want_send) {
        long done = ns ? smp[ns - 1].done : 0;
        double t1 = ns ? smp[ns - 1].t : bw_now();
        res->size = size;
        res->iters = (uint64_t)done;
        res->seconds = t1 - t0;
        if (res->seconds > 0) {
            res->avg_bps = (double)done * (double)size / res->seconds;
            res->msg_rate = (double)done / res->seconds;
        }
        res->peak_bps = bw_peak_bps(smp, ns, t0, size);
        if (res->peak_bps < res->avg_bps)
            res->peak_bps = res->avg_bps;
        rc = 1;
    }
out:
    free(smp);
    return rc;
}

