/* cm.h: internal contract of softnic's librdmacm.so.1.
 *
 * softnic's RDMA CM stands in for rdma-core's librdmacm: the same symbols and
 * version nodes (librdmacm.map), built on the public verbs of whatever
 * libibverbs.so.1 is loaded (softnic's).  The kernel's CM exchanges REQ, REP,
 * RTU, REJ, DREQ and DREP MADs; here the two processes exchange the same
 * messages over one TCP connection per rdma_cm_id (the "side channel"),
 * opened from the active id's source address and port to the passive id's
 * listening address and port.  So an RDMA CM port is a TCP port of the
 * address it is bound to: `ss -ltn` shows a listening id, two ids cannot
 * listen on one address and port, and network namespaces separate hosts.
 *
 * Addresses map to devices as the kernel maps netdevs to RDMA ports: the
 * port whose GID[0] is the IPv4-mapped address, and which is ACTIVE (a
 * softnic port whose address belongs to another namespace reads DOWN).
 *
 * Files, one job each:
 *   cm_id.c    event channels (an eventfd: pollable, one count per event), ids,
 *              events, options, rdma_event_str, rdma_get_devices;
 *   cm_addr.c  address to (device, port), bind/resolve addr and route,
 *              rdma_getaddrinfo;
 *   cm_conn.c  the side channel: the engine thread, listen, connect, accept,
 *              reject, disconnect, establish, rdma_init_qp_attr;
 *   cm_ep.c    rdma_create_ep / get_request / create_qp and the synchronous
 *              mode of an id created without a channel;
 *   cm_unsupported.c  what softnic has no CM for (UD, multicast, rsockets):
 *              the errno the kernel CM gives where it has none either.
 *
 * Errors inside are errno-style ints; the exported functions return what
 * librdmacm returns (-1 with errno, or NULL with errno). */
#ifndef SOFTNIC_CM_H
#define SOFTNIC_CM_H

#include <config.h>

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdbool.h>
#include <stdint.h>

/* Private data sizes of the IB CM messages as rdma_cm users see them (the
 * REQ's 92 bytes less the CM's 36-byte header); an event carries the whole
 * field, zero-padded, as the kernel's does. */
#define CM_REQ_PDATA 56
#define CM_REP_PDATA 196
#define CM_REJ_PDATA 148
#define CM_RTU_PDATA 224
#define CM_DREQ_PDATA 220
#define CM_MAX_PDATA 224

/* The side channel's messages (cm_conn.c): fixed-size, host byte order
 * (both ends are this library), each checked before use. */
#define CM_MAGIC 0x4d434e53u   /* "SNCM" */
#define CM_VERSION 1

enum cm_msg_type { MSG_REQ = 1, MSG_REP, MSG_RTU, MSG_REJ, MSG_DREQ, MSG_DREP };

struct cm_msg {
    uint32_t magic;
    uint16_t version;
    uint8_t type;
    uint8_t pdata_len;
    uint32_t qpn;
    uint32_t psn;
    uint8_t gid[16];
    uint8_t mtu;
    uint8_t responder_resources;
    uint8_t initiator_depth;
    uint8_t retry_count;
    uint8_t rnr_retry_count;
    uint8_t srq;
    uint8_t reason;
    uint8_t pad;
    uint8_t pdata[CM_MAX_PDATA];
};

/* IB CM reject reasons carried in REJECTED events' status. */
#define CM_REJ_INVALID_SERVICE_ID 8   /* nobody listens there */
#define CM_REJ_CONSUMER_DEFINED 28    /* rdma_reject, or the peer id went away */

/* How long an active id waits for the passive side's answer before it
 * reports UNREACHABLE (the kernel's REQ retries take about as long). */
#define CM_RESPONSE_TIMEOUT_MS 10000
/* A refused side channel (nobody listens yet) is tried again every
 * CM_REFUSED_RETRY_MS for CM_REFUSED_GRACE_MS before it is a REJ: the
 * kernel's REQ leaves after address and route resolution, which take a
 * neighbour lookup and a work queue's round; here they take nothing, and
 * programs that create their listener while the peer resolves (perftest -R)
 * would lose that race every time. */
#define CM_REFUSED_GRACE_MS 1000
#define CM_REFUSED_RETRY_MS 20
/* Delay between DISCONNECTED and TIMEWAIT_EXIT. */
#define CM_TIMEWAIT_MS 200

enum cm_state {
    CM_IDLE,
    CM_BOUND,           /* rdma_bind_addr done */
    CM_ADDR_RESOLVED,
    CM_ROUTE_RESOLVED,
    CM_LISTEN,
    CM_CONNECTING,      /* active: side channel opening or REQ sent */
    CM_REQ_RCVD,        /* passive: CONNECT_REQUEST delivered */
    CM_REP_SENT,        /* passive: accepted, RTU awaited */
    CM_REP_RCVD,        /* active without a QP: CONNECT_RESPONSE delivered */
    CM_CONNECTED,
    CM_DISCONNECTING,   /* DREQ sent, DREP awaited */
    CM_DISCONNECTED,
    CM_REQ_WAIT,        /* passive child: side channel accepted, no REQ yet
                         * (the application does not know it) */
    CM_ERROR,
};

struct cm_event;

struct cm_channel {
    struct rdma_event_channel ch;   /* ch.fd: eventfd counting queued events */
    struct cm_event *head, *tail;   /* under cm.lock */
    bool sync;                      /* private channel of a synchronous id */
};

/* What the active and passive sides learn of each other. */
struct cm_peer {
    uint32_t qpn;
    uint32_t psn;
    union ibv_gid gid;
    uint8_t mtu;                    /* enum ibv_mtu */
    uint8_t responder_resources;
    uint8_t initiator_depth;
    uint8_t retry_count;
    uint8_t rnr_retry_count;
    uint8_t srq;
};

struct cm_id {
    struct rdma_cm_id id;           /* first: the public face */
    struct cm_channel *chan;
    enum cm_state state;
    int refs;                       /* 1 + unacknowledged events; cm.lock */
    bool destroyed;
    bool reuseaddr;
    bool ack_timeout_set;
    uint8_t tos, ack_timeout;
    int sock;                       /* bound/listening socket or side channel */
    int port_hold;                  /* an active id's source port, bound while it connects (-1: none) */
    bool sock_connecting;           /* non-blocking connect() under way */
    uint64_t deadline_ns;           /* response timeout, 0 = none */
    uint64_t timewait_ns;           /* when TIMEWAIT_EXIT is due, 0 = none */
    uint64_t retry_ns;              /* refused side channel: when to try again */
    uint64_t refused_until_ns;      /* end of the grace for a listener to come */
    uint32_t psn;                   /* this side's starting PSN */
    uint32_t qpn;                   /* this side's QP (id->qp or conn_param) */
    struct cm_peer local, remote;   /* connection parameters, both ends */
    uint8_t pdata[CM_MAX_PDATA];    /* REQ private data to send */
    uint8_t pdata_len;
    struct ibv_sa_path_rec path;    /* id.route.path_rec points here */
    struct ibv_qp_init_attr *ep_attr;   /* rdma_create_ep's, for get_request */
    bool own_cqs;                   /* send/recv CQs made by rdma_create_qp */
    struct cm_id *listener;         /* CM_REQ_WAIT: the listening id (a ref) */
    uint8_t rx[320];                /* partial incoming message */
    size_t rx_len;
    struct cm_id *next;             /* in cm.ids */
};

static inline struct cm_id *cm_of(struct rdma_cm_id *id)
{
    return (struct cm_id *)id;
}

struct cm_event {
    struct rdma_cm_event ev;        /* first: what rdma_get_cm_event hands out */
    struct cm_id *owner;            /* holds a reference until acked */
    struct cm_id *listen;           /* CONNECT_REQUEST: holds one too */
    uint8_t pdata[CM_MAX_PDATA];
    struct cm_event *next;
};

/* Process-wide state, one lock. */
struct cm_global {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct cm_id *ids;
    bool engine_started;
    pthread_t engine;
    int wake[2];                    /* pokes the engine to re-read ids */
    int ndevs;
    struct ibv_context **devs;      /* opened once, NULL-terminated */
    struct ibv_pd **pds;            /* per device, created on first use */
};
extern struct cm_global cm;

/* ---- cm_id.c */
/* Queues an event for c (cm.lock held); pdata is copied, padded to len.
 * False when it cannot be (c destroyed, no channel, no memory): for most
 * events a lost MAD, which the peer's timeout covers; a CONNECT_REQUEST's
 * caller must not leave the child waiting for an answer (cm_conn.c). */
bool cm_post_locked(struct cm_id *c, enum rdma_cm_event_type type, int status,
                    const struct cm_peer *conn, const void *pdata, size_t pdata_len,
                    size_t pad_to, struct cm_id *listen);
struct cm_id *cm_id_new_locked(struct cm_channel *chan, void *context,
                               enum rdma_port_space ps, enum ibv_qp_type qpt);
void cm_id_put_locked(struct cm_id *c);
/* rdma_destroy_id with cm.lock held. */
void cm_id_destroy_locked(struct cm_id *c);
struct cm_channel *cm_channel_new(bool sync);
void cm_channel_free(struct cm_channel *ch);
/* Takes the next event of ch (blocking unless ch->ch.fd is non-blocking):
 * 0, or an errno. */
int cm_channel_take(struct cm_channel *ch, struct cm_event **out);
uint64_t cm_now_ns(void);
/* Opens every device once; 0 or an errno. */
int cm_devices_open_locked(void);
struct ibv_pd *cm_default_pd_locked(struct ibv_context *verbs);

/* ---- cm_addr.c */
/* The ACTIVE (device, port) whose GID is ip; ENODEV when none (cm.lock
 * held: opens the devices on first use). */
int cm_addr_to_port_locked(struct in_addr ip, struct ibv_context **verbs, uint8_t *port);
void cm_gid_of_ip(struct in_addr ip, union ibv_gid *gid);
/* Sets id.route.addr's src side, id.verbs and id.port_num, and reserves the
 * TCP port (c->sock bound).  0 or an errno. */
int cm_bind_locked(struct cm_id *c, const struct sockaddr_in *sin);
/* Fills id.route (GIDs, path record) from the bound source and the
 * destination; c->local from the port. */
int cm_route_fill(struct cm_id *c);

/* ---- cm_conn.c */
void cm_engine_wake(void);
int cm_engine_start_locked(void);
/* The attributes that move c's QP to attr->qp_state (INIT, RTR, RTS) with
 * what the CM exchanged; 0 or an errno. */
int cm_qp_attr(struct cm_id *c, struct ibv_qp_attr *attr, int *mask);
/* Closes the side channel and forgets deadlines (cm.lock held). */
void cm_conn_close_locked(struct cm_id *c);
/* c is a listener's child whose CONNECT_REQUEST will never reach the
 * application (it could not be queued, or died unread): rejects the peer's
 * REQ and destroys c in the application's stead (cm.lock held). */
void cm_conn_req_unclaimed_locked(struct cm_id *c);

/* ---- cm_ep.c */
/* Synchronous ids: waits for the event that ends an operation; 0 when it
 * is `want` with status 0, else the errno librdmacm gives. */
int cm_sync_wait(struct cm_id *c, enum rdma_cm_event_type want);

#endif
