/* plugin/ib/failover_channel.c: the registry of failover comms (one WARN
 * per port failure names them all) and the control messages on each
 * connection's TCP socket (failover_int.h). */
#include "failover_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "errors.h"
#include "log.h"

/* ---------------------------------------------------------------- registry */

/* Comms of the process with failover, so that one WARN per port failure can
 * name all of them. reported[dev]: bit p set while port p's failure has
 * been reported (cleared when the port comes back). */
#define FO_MAX_DEVS 64
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fo_comm *reg_head;
static uint32_t reg_reported[FO_MAX_DEVS];
static int reg_next_id;

void fo_reg_add(struct fo_comm *f)
{
    pthread_mutex_lock(&reg_mu);
    f->id = ++reg_next_id;
    f->next = reg_head;
    reg_head = f;
    pthread_mutex_unlock(&reg_mu);
}

void fo_reg_del(struct fo_comm *f)
{
    pthread_mutex_lock(&reg_mu);
    for (struct fo_comm **p = &reg_head; *p; p = &(*p)->next) {
        if (*p == f) {
            *p = f->next;
            break;
        }
    }
    pthread_mutex_unlock(&reg_mu);
}

const char *fo_kind_name(const struct comm *c) { return c->kind == COMM_SEND ? "send" : "recv"; }

/* One WARN per device port and failure: the port, why, and every comm of
 * the device in this process (all stripe over both ports). */
void fo_reg_report_down(struct fo_comm *f, int p, const char *why, uint32_t qpn)
{
    struct comm *c = f->c;
    int dev = c->dev;
    pthread_mutex_lock(&reg_mu);
    if (dev >= 0 && dev < FO_MAX_DEVS && (reg_reported[dev] & (1u << p))) {
        pthread_mutex_unlock(&reg_mu);
        return;
    }
    if (dev >= 0 && dev < FO_MAX_DEVS)
        reg_reported[dev] |= 1u << p;
    char list[640];
    size_t off = 0;
    int n = 0;
    for (struct fo_comm *g = reg_head; g; g = g->next) {
        if (g->c->dev != dev)
            continue;
        n++;
        if (off < sizeof(list) - 64)
            off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s comm #%d with %s", n > 1 ? ", " : "",
                                    fo_kind_name(g->c), g->id, g->peer);
        else if (off < sizeof(list) - 8)
            off += (size_t)snprintf(list + off, sizeof(list) - off, ", ...");
    }
    pthread_mutex_unlock(&reg_mu);
    int other = -1;
    for (int q = 0; q < c->nports; q++)
        if (q != p && !(f->port_down & (1u << q)))
            other = q;
    /* a failed completion names its QP the way every QP error does */
    char at[48] = "";
    if (qpn)
        snprintf(at, sizeof(at), " QP 0x%x", qpn);
    if (other >= 0)
        WARN("NET/railnet: device %s port %u%s: %s: port %u failed; %d connection(s) go on over port %u: %s",
             c->dev_name, c->ports[p].port_num, at, why, c->ports[p].port_num, n, c->ports[other].port_num, list);
    else
        WARN("NET/railnet: device %s port %u%s: %s: port %u failed and no other port is up; %d connection(s) "
             "affected: %s",
             c->dev_name, c->ports[p].port_num, at, why, c->ports[p].port_num, n, list);
}

void fo_reg_port_back(struct comm *c, int p)
{
    pthread_mutex_lock(&reg_mu);
    if (c->dev >= 0 && c->dev < FO_MAX_DEVS)
        reg_reported[c->dev] &= ~(1u << p);
    pthread_mutex_unlock(&reg_mu);
}

/* ----------------------------------------------------------- control channel */

void fo_send(struct fo_comm *f, int type, const uint8_t *payload, size_t len)
{
    struct comm *c = f->c;
    if (c->error || c->fd < 0)
        return;
    if (f->tx_len + FO_HDR + len > sizeof(f->tx)) {
        WARN("NET/railnet: device %s: %s comm #%d: failover messages are not leaving (peer %s not reading)",
             c->dev_name, fo_kind_name(c), f->id, f->peer);
        comm_fail(c, ncclRemoteError);
        return;
    }
    uint8_t *h = f->tx + f->tx_len;
    put32(h, FO_MAGIC);
    h[4] = (uint8_t)type;
    h[5] = 0;
    h[6] = (uint8_t)len;
    h[7] = (uint8_t)(len >> 8);
    memcpy(h + FO_HDR, payload, len);
    f->tx_len += FO_HDR + len;
}

void fo_flush_tx(struct fo_comm *f)
{
    struct comm *c = f->c;
    while (f->tx_len && c->fd >= 0) {
        ssize_t n = send(c->fd, f->tx, f->tx_len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return;
            errors_note_peer_gone(c, comm_now_ns()); /* errors_check_peer fails the comm */
            f->tx_len = 0;
            return;
        }
        memmove(f->tx, f->tx + n, f->tx_len - (size_t)n);
        f->tx_len -= (size_t)n;
    }
}

void fo_put_qp_info(uint8_t *p, const struct qp_conn *q)
{
    struct hs_qp_info i;
    qp_describe(q, &i);
    memset(p, 0, FO_QP_INFO);
    put32(p, i.qpn);
    put32(p + 4, i.psn);
    p[8] = (uint8_t)i.lid;
    p[9] = (uint8_t)(i.lid >> 8);
    p[10] = i.port_num;
    p[11] = i.port_idx;
    p[12] = i.mtu;
    p[13] = i.gid_index;
    p[14] = i.is_global;
    memcpy(p + 16, i.gid, 16);
}

int fo_get_qp_info(const uint8_t *p, struct hs_qp_info *i)
{
    memset(i, 0, sizeof(*i));
    i->qpn = get32(p);
    i->psn = get32(p + 4);
    i->lid = (uint16_t)(p[8] | p[9] << 8);
    i->port_num = p[10];
    i->port_idx = p[11];
    i->mtu = p[12];
    i->gid_index = p[13];
    i->is_global = p[14];
    memcpy(i->gid, p + 16, 16);
    return i->qpn <= 0xffffff && i->psn <= 0xffffff && i->port_num >= 1 && i->port_idx < HS_MAX_PORTS &&
           i->mtu >= 1 && i->mtu <= 5 && i->is_global <= 1 && p[15] == 0;
}

