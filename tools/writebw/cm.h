/* tools/writebw/cm.h: railnet-write-bw -R: the verbs mode's QPs connected
 * through the RDMA CM, as perftest's -R connects its QPs; the test itself
 * (buffers, writes, the TCP session's START/RESULT) is unchanged.
 *
 * The server listens through the CM on the port of its TCP session (any
 * address), before the SETUP exchange, so it is there when the client
 * connects; the client resolves the address and port of its TCP session's
 * server. One CM connection per QP, its private data the QP's index (one
 * byte, checked by the server: a QP it has and has not paired). The QPs are
 * the tool's own (its PD and CQs), moved to RTR and RTS with the CM's
 * attributes (rdma_init_qp_attr). librdmacm.so.1 comes through the plugin's
 * seam (plugin/ib/rdmacmwrap), from --ibverbs-lib's directory first.
 * Functions return 0 or -1 with err filled. */
#ifndef RAILNET_TOOLS_WRITEBW_CM_H
#define RAILNET_TOOLS_WRITEBW_CM_H

#include <stddef.h>

#include "../common/rc.h"
#include "wire.h"

struct rdma_event_channel;
struct rdma_cm_id;

struct wb_cm {
    struct rdma_event_channel *ch;
    struct rdma_cm_id *listen;
    struct rdma_cm_id *ids[WB_MAX_QP_TOTAL];
    int nids;
};

int wb_cm_open(struct wb_cm *cm, const char *ibverbs_path, char *err, size_t errlen);
int wb_cm_listen(struct wb_cm *cm, int tcp_port, char *err, size_t errlen);
/* Connects qps[0..nqp) with the peer's (QP k with the peer's QP k); fd is
 * the TCP session (the client's CM destination). *path_mtu: enum ibv_mtu. */
int wb_cm_connect(struct wb_cm *cm, int fd, int is_server, const struct rc_dev *d, struct rc_qp *qps, int nqp,
                  double timeout, int *path_mtu, char *err, size_t errlen);
void wb_cm_close(struct wb_cm *cm);

#endif
