/* plugin/ib/rdmacmwrap.h: the dlopen'ed librdmacm table, the plugin's one
 * seam to librdmacm (RAILNET_CM=rdmacm), as ibvwrap.h is to libibverbs.
 *
 * Layer: low (nothing of comms). The plugin never links librdmacm: it loads
 * librdmacm.so.1 the first time a listener or connection needs the CM, from
 * the directory of the libibverbs it loaded first (so that softnic's pair is
 * found together), then through the loader's search path. Without it the
 * plugin still loads and RAILNET_CM=tcp works; asking for the CM then fails
 * with one WARN naming the library and the missing symbol or dlerror().
 * Types come from rdma-core's <rdma/rdma_cma.h> (librdmacm-dev at build
 * time); a build without it has the table with every entry NULL and
 * rdmacmwrap_global_load says so. */
#ifndef RAILNET_IB_RDMACMWRAP_H
#define RAILNET_IB_RDMACMWRAP_H

#include <stddef.h>

#include <config.h>
#if HAVE_RDMACM
#include <rdma/rdma_cma.h>
#endif

struct rdmacmwrap {
    void *handle;
    char path[320];
#if HAVE_RDMACM
    struct rdma_event_channel *(*create_event_channel)(void);
    void (*destroy_event_channel)(struct rdma_event_channel *ch);
    int (*create_id)(struct rdma_event_channel *ch, struct rdma_cm_id **id, void *ctx, enum rdma_port_space ps);
    int (*destroy_id)(struct rdma_cm_id *id);
    int (*bind_addr)(struct rdma_cm_id *id, struct sockaddr *addr);
    int (*resolve_addr)(struct rdma_cm_id *id, struct sockaddr *src, struct sockaddr *dst, int timeout_ms);
    int (*resolve_route)(struct rdma_cm_id *id, int timeout_ms);
    int (*listen)(struct rdma_cm_id *id, int backlog);
    int (*connect)(struct rdma_cm_id *id, struct rdma_conn_param *p);
    int (*accept)(struct rdma_cm_id *id, struct rdma_conn_param *p);
    int (*reject)(struct rdma_cm_id *id, const void *pdata, uint8_t len);
    int (*establish)(struct rdma_cm_id *id);
    int (*disconnect)(struct rdma_cm_id *id);
    int (*init_qp_attr)(struct rdma_cm_id *id, struct ibv_qp_attr *attr, int *mask);
    int (*get_cm_event)(struct rdma_event_channel *ch, struct rdma_cm_event **ev);
    int (*ack_cm_event)(struct rdma_cm_event *ev);
    int (*migrate_id)(struct rdma_cm_id *id, struct rdma_event_channel *ch);
    const char *(*event_str)(enum rdma_cm_event_type ev);
    __be16 (*get_src_port)(struct rdma_cm_id *id);
#endif
};

/* Loads the process-wide table once (later calls return the first result);
 * 0, or -1 with why in err. near: a libibverbs path whose directory is
 * tried first (NULL: the one the plugin's ibvwrap table loaded). */
int rdmacmwrap_global_load(const char *near, char *err, size_t errlen);
/* NULL until a load succeeded. */
const struct rdmacmwrap *rdmacmwrap_global(void);
#define RN_CM(fn) (rdmacmwrap_global()->fn)

#endif
