/* plugin/ib/stats.c: printing the counters of a connection at close. */
#include "stats.h"

#include <inttypes.h>
#include <stdio.h>

#include "log.h"

void stats_print(const struct stats *s, int send, const char *dev_name, const struct qp_conn *qps, int nqps,
                 const struct qp_port *ports, int nports)
{
    if (!s->enabled)
        return;
    const char *dir = send ? "send" : "recv";
    uint64_t port_bytes[HS_MAX_PORTS] = { 0 }, port_msgs[HS_MAX_PORTS] = { 0 };
    for (int i = 0; i < nqps; i++) {
        const struct qp_conn *q = &qps[i];
        int p = q->port ? q->port->port_idx : 0;
        port_bytes[p] += s->qp[i].bytes;
        port_msgs[p] += s->qp[i].msgs;
        if (send)
            INFO(NCCL_NET, "NET/railnet stats: %s %s port %u QP 0x%x: %" PRIu64 " bytes in %" PRIu64 " writes",
                 dir, dev_name, q->port ? q->port->port_num : 0, q->qp ? q->qp->qp_num : 0, s->qp[i].bytes,
                 s->qp[i].msgs);
        else
            INFO(NCCL_NET, "NET/railnet stats: %s %s port %u QP 0x%x: %" PRIu64 " immediates", dir, dev_name,
                 q->port ? q->port->port_num : 0, q->qp ? q->qp->qp_num : 0, s->qp[i].msgs);
    }
    for (int p = 0; p < nports; p++) {
        if (send)
            INFO(NCCL_NET, "NET/railnet stats: %s %s port %u total: %" PRIu64 " bytes in %" PRIu64 " writes", dir,
                 dev_name, ports[p].port_num, port_bytes[p], port_msgs[p]);
        else
            INFO(NCCL_NET, "NET/railnet stats: %s %s port %u total: %" PRIu64 " immediates", dir, dev_name,
                 ports[p].port_num, port_msgs[p]);
    }
    if (send)
        INFO(NCCL_NET, "NET/railnet stats: send %s total: %" PRIu64 " messages with a size write of their own",
             dev_name, s->size_writes);
    else
        INFO(NCCL_NET, "NET/railnet stats: recv %s total: %" PRIu64 " bytes in %" PRIu64 " messages", dev_name,
             s->rx_bytes, s->rx_msgs);
}

void stats_print_gin(const char *dev_name, int rank, int nranks, uint64_t wrs, uint64_t signaled, uint64_t markers,
                     uint64_t cqes)
{
    INFO(NCCL_NET,
         "NET/railnet stats: GIN rank %d of %d on %s: %" PRIu64 " work requests posted (%" PRIu64
         " completion markers), %" PRIu64 " signaled, %" PRIu64 " completions polled",
         rank, nranks, dev_name, wrs, markers, signaled, cqes);
}
