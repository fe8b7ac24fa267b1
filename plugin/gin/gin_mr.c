/* plugin/gin/gin_mr.c: symmetric registration (regMrSym, regMrSymDmaBuf,
 * deregMrSym). The local buffer is registered through plugin/ib's mr.c
 * (dmabuf first for CUDA memory, relaxed ordering unless
 * NCCL_NET_MR_FLAG_FORCE_SO); then every rank sends every peer a WIN
 * message {sequence number, status, address, size, rkey} and reads one from
 * each, so that the window is known on every rank. The exchange is
 * collective: a rank whose own registration failed still sends (status 1),
 * so that its peers fail at once instead of waiting; a sequence number that
 * differs means the ranks registered in different orders. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../ib/config.h"
#include "gin.h"
#include "gin_gdaki.h"
#include "gin_wire.h"
#include "gpumem.h"
#include "log.h"
#include "mr.h"

static uint64_t deadline_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec +
           (uint64_t)rn_config()->handshake_timeout * 1000000000ull;
}

struct gin_mr *gin_mr_of(struct gin_coll *c, void *mhandle, const char *what)
{
    pthread_mutex_lock(&c->wins_mu);
    struct gin_mr *m = c->wins;
    if (m && m != mhandle) {
        /* the same windows come back again and again: keep the last one first */
        struct gin_mr **pp = &m->next;
        while (*pp && *pp != mhandle)
            pp = &(*pp)->next;
        m = *pp;
        if (m) {
            *pp = m->next;
            m->next = c->wins;
            c->wins = m;
        }
    }
    pthread_mutex_unlock(&c->wins_mu);
    if (!m || m->magic != GIN_MR_MAGIC || m->coll != c) {
        WARN("NET/railnet/GIN: %s: %p is not a live window of this collComm (deregistered, or of another "
             "collComm?)",
             what, mhandle);
        return NULL;
    }
    return m;
}

static void mr_free(struct gin_mr *m)
{
    if (!m)
        return;
    /* off the list first: the failure release (gin_rma_release.c) writes
     * the memory of listed windows, and NCCL frees it once this returns */
    if (m->coll) {
        pthread_mutex_lock(&m->coll->wins_mu);
        struct gin_mr **pp = &m->coll->wins;
        while (*pp && *pp != m)
            pp = &(*pp)->next;
        if (*pp)
            *pp = m->next;
        pthread_mutex_unlock(&m->coll->wins_mu);
    }
    gin_gdaki_dereg_window(m);
    if (m->mh)
        mr_deregister(NULL, m->mh);
    free(m->addr);
    free(m->len);
    free(m->rkey);
    m->magic = 0;
    free(m);
}

void gin_mr_free_all(struct gin_coll *c)
{
    while (c->wins)
        mr_free(c->wins);
}

/* Sends our WIN to every peer, then reads every peer's. A stream that fails
 * or is garbled fails the collComm (gin_fail_exchange): the exchange ends
 * there, so the peers read after it keep a WIN unread that a later regMrSym
 * would take for its own and blame on the registration order; and the peers,
 * told by their sockets' EOF, fail theirs now rather than at their deadline. */
static ncclResult_t exchange(struct gin_coll *c, struct gin_mr *m, int ok)
{
    struct gw_win w = { .seq = c->win_seq, .status = ok ? 0 : 1 };
    if (ok) {
        w.addr = m->base;
        w.size = m->size;
        w.rkey = m->rkey[c->rank];
    }
    uint8_t buf[GW_WIN_SIZE];
    size_t len = gw_win_encode(&w, buf, sizeof(buf));
    uint64_t deadline = deadline_ns();
    char err[HS_ERR_LEN];
    ncclResult_t res = ok ? ncclSuccess : ncclSystemError;
    for (int p = 0; p < c->nranks; p++) {
        if (p != c->rank && gw_send(c->peers[p].fd, buf, len, deadline, err)) {
            WARN("NET/railnet/GIN: rank %d: regMrSym: sending the window to rank %d: %s; failing the collComm",
                 c->rank, p, err);
            /* part of a WIN may be on its way: rank p's stream is out of step */
            gin_fail_exchange(c, ncclRemoteError);
            return ncclRemoteError; /* the others' reads would meet this rank's own shutdown */
        }
    }
    for (int p = 0; p < c->nranks; p++) {
        if (p == c->rank || c->peers[p].fd < 0)
            continue;
        struct gw_rx rx;
        struct gw_win pw;
        if (gw_recv(c->peers[p].fd, &rx, deadline, err) || gw_win_parse(rx.buf, rx.off, &pw, err)) {
            WARN("NET/railnet/GIN: rank %d: regMrSym: window of rank %d: %s; failing the collComm", c->rank, p,
                 err);
            gin_fail_exchange(c, ncclRemoteError); /* the stream is out of step: nothing after this can be trusted */
            return ncclRemoteError;
        }
        if (pw.seq != w.seq) {
            WARN("NET/railnet/GIN: rank %d: regMrSym: rank %d is at registration %u, this rank at %u: ranks must "
                 "register their windows in the same order",
                 c->rank, p, pw.seq, w.seq);
            res = ncclInvalidUsage;
        } else if (pw.status) {
            WARN("NET/railnet/GIN: rank %d: regMrSym: rank %d could not register its buffer (see its log)", c->rank,
                 p);
            if (res == ncclSuccess)
                res = ncclRemoteError;
        } else if (m) {
            m->addr[p] = pw.addr;
            m->len[p] = pw.size;
            m->rkey[p] = pw.rkey;
        }
    }
    return res;
}

ncclResult_t gin_reg_mr_sym(void *coll_comm, void *data, size_t size, int type, uint64_t offset, int fd,
                            uint64_t flags, void **mhandle, void **gin_handle)
{
    if (mhandle)
        *mhandle = NULL;
    if (gin_handle)
        *gin_handle = NULL;
    struct gin_coll *c = gin_coll_of(coll_comm, "regMrSym");
    if (!c || !mhandle)
        return ncclInvalidArgument;
    ncclResult_t failed = gin_failed(c, "regMrSym");
    if (failed)
        return failed;
    struct gin_mr *m = calloc(1, sizeof(*m));
    ncclResult_t res = ncclSystemError;
    if (m) {
        m->addr = calloc((size_t)c->nranks, sizeof(*m->addr));
        m->len = calloc((size_t)c->nranks, sizeof(*m->len));
        m->rkey = calloc((size_t)c->nranks, sizeof(*m->rkey));
    }
    if (m && m->addr && m->len && m->rkey) {
        int mrf = (flags & NCCL_NET_MR_FLAG_FORCE_SO) ? MR_FLAG_STRICT : 0;
        if (fd >= 0)
            res = mr_register_dmabuf_dev(c->dev, data, size, type, offset, fd, mrf, &m->mh);
        else
            res = mr_register_dev(c->dev, data, size, type, mrf, &m->mh);
    }
    if (res == ncclSuccess) {
        m->magic = GIN_MR_MAGIC;
        m->coll = c;
        m->strict = (flags & NCCL_NET_MR_FLAG_FORCE_SO) != 0;
        if (type == NCCL_PTR_CUDA) {
            int ordinal = gpumem_device_ordinal(data);
            m->cuda_dev = ordinal >= 0 ? ordinal : -2;
        } else {
            m->cuda_dev = -1;
        }
        m->base = (uint64_t)(uintptr_t)data;
        m->size = size;
        m->lkey = mr_lkey(m->mh, 0);
        m->addr[c->rank] = m->base;
        m->len[c->rank] = size;
        m->rkey[c->rank] = mr_rkey(m->mh, 0);
    } else {
        WARN("NET/railnet/GIN: rank %d: regMrSym of %zu bytes at %p failed; telling the peers", c->rank, size, data);
    }
    ncclResult_t xres = exchange(c, res == ncclSuccess ? m : NULL, res == ncclSuccess);
    c->win_seq++;
    if (xres != ncclSuccess) {
        mr_free(m);
        return res != ncclSuccess ? res : xres;
    }
    void *dev_handle = m;
    if (c->gdaki_type) {
        /* The device code's handle: every rank's zero-based rkey and ours. */
        ncclResult_t gres = gin_gdaki_reg_window(c, m, data, size, &dev_handle);
        if (gres != ncclSuccess) {
            mr_free(m);
            return gres;
        }
    }
    TRACE(NCCL_NET | NCCL_REG, "NET/railnet/GIN: rank %d: window %u at %p, %zu bytes, %s", c->rank, c->win_seq - 1,
          data, size, (flags & NCCL_NET_MR_FLAG_FORCE_SO) ? "strict order" : "relaxed order allowed");
    pthread_mutex_lock(&c->wins_mu);
    m->next = c->wins;
    c->wins = m;
    pthread_mutex_unlock(&c->wins_mu);
    *mhandle = m;
    if (gin_handle)
        *gin_handle = dev_handle;
    return ncclSuccess;
}

ncclResult_t gin_dereg_mr_sym(void *coll_comm, void *mhandle)
{
    struct gin_coll *c = gin_coll_of(coll_comm, "deregMrSym");
    if (!c)
        return ncclInvalidArgument;
    if (!mhandle)
        return ncclSuccess;
    struct gin_mr *m = gin_mr_of(c, mhandle, "deregMrSym");
    if (!m)
        return ncclInvalidArgument;
    mr_free(m);
    return ncclSuccess;
}
