/* tools/common/rc.h: reliable-connected QPs for the tools' RDMA WRITE tests.
 *
 * Contract: rc_dev_open() opens one RDMA device (by name, or the first) with
 * one protection domain, and reads each port's attributes and the GID the
 * tools use on it (the -x index, or the first RoCE v2 IPv4-mapped GID, or
 * index 0 on InfiniBand). rc_qp_create() makes an RC QP with its own CQ on a
 * port; rc_qp_connect() moves it INIT -> RTR -> RTS towards the peer
 * described by a struct rc_qp_info (which the caller exchanged out of band;
 * it validates the fields it uses). Functions return 0 or -1 with err filled. */
#ifndef RAILNET_TOOLS_RC_H
#define RAILNET_TOOLS_RC_H

#include <stddef.h>
#include <stdint.h>

#include "ibvwrap.h"

#define RC_MAX_PORTS 8

struct rc_port {
    int valid;
    int no_gid;     /* the port was queried, but the GID index asked for (or any) was not there */
    struct ibv_port_attr attr;
    int gid_index;
    union ibv_gid gid;
};

struct rc_dev {
    const struct ibvwrap *v;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    char name[64];
    int nports;
    struct rc_port port[RC_MAX_PORTS + 1]; /* indexed by port number */
};

/* What a peer needs to reach one QP; the wire form is fixed-size
 * little-endian in the tools' OOB messages. */
struct rc_qp_info {
    uint32_t qpn;
    uint32_t psn;
    uint16_t lid;
    uint8_t port;
    uint8_t mtu;      /* enum ibv_mtu of the sender's port */
    uint8_t gid[16];
};

struct rc_qp {
    struct ibv_qp *qp;
    struct ibv_cq *cq;
    int port;
    int depth;
    uint32_t psn;
};

int rc_dev_open(struct rc_dev *d, const struct ibvwrap *v, const char *name, int gid_index,
                char *err, size_t errlen);
void rc_dev_close(struct rc_dev *d);
/* The port must exist and be usable (ACTIVE). */
int rc_dev_check_port(const struct rc_dev *d, int port, char *err, size_t errlen);

int rc_qp_create(struct rc_dev *d, int port, int depth, struct rc_qp *q, char *err, size_t errlen);
void rc_qp_info(const struct rc_dev *d, const struct rc_qp *q, struct rc_qp_info *out);
int rc_qp_connect(struct rc_dev *d, struct rc_qp *q, const struct rc_qp_info *remote, char *err,
                  size_t errlen);
void rc_qp_destroy(struct rc_dev *d, struct rc_qp *q);

/* "::ffff:127.0.0.1" or the hex form. */
void rc_gid_str(const uint8_t gid[16], char *buf, size_t len);
/* 256 .. 4096 for enum ibv_mtu, 0 for anything else. */
int rc_mtu_bytes(int mtu);
const char *rc_link_layer_name(int ll);
/* "200 Gb/s (4X 50 Gb/s)" from a port's active_width and active_speed, or
 * "unknown speed" for codes this tool does not know. */
void rc_port_rate_str(const struct ibv_port_attr *a, char *buf, size_t len);

#endif
