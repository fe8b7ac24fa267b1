/* plugin/ib/rdmacmwrap.c: the dlopen'ed librdmacm table (rdmacmwrap.h). */
#include "rdmacmwrap.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ibvwrap.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rdmacmwrap g_cm;
static int g_tried, g_rc;
static char g_why[512];

#if HAVE_RDMACM
/* The versioned name a program built against rdma-core binds to, else the
 * plain one (a library without version nodes). */
static void *sym(void *h, const char *name, const char *version)
{
    void *p = dlvsym(h, name, version);
    return p ? p : dlsym(h, name);
}

/* librdmacm.so.1 beside the libibverbs the plugin loaded (softnic ships
 * both), else wherever the loader finds it. */
static void *open_lib(const char *near, char *path, size_t len)
{
    const struct ibvwrap *v = ibvwrap_global();
    if (!near && v && v->path[0])
        near = v->path;
    if (near) {
        const char *slash = strrchr(near, '/');
        if (slash) {
            snprintf(path, len, "%.*slibrdmacm.so.1", (int)(slash - near + 1), near);
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (h)
                return h;
        }
    }
    snprintf(path, len, "librdmacm.so.1");
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static int load(struct rdmacmwrap *w, const char *near, char *err, size_t errlen)
{
    memset(w, 0, sizeof(*w));
    w->handle = open_lib(near, w->path, sizeof(w->path));
    if (!w->handle) {
        snprintf(err, errlen, "cannot load librdmacm.so.1: %s (install librdmacm1, or use RAILNET_CM=tcp)",
                 dlerror());
        return -1;
    }
#define REQ(field, name, ver)                                                              \
    do {                                                                                   \
        *(void **)&w->field = sym(w->handle, name, ver);                                   \
        if (!w->field) {                                                                   \
            snprintf(err, errlen, "%.300s: missing symbol %s@%s (use RAILNET_CM=tcp)", w->path, name, ver); \
            dlclose(w->handle);                                                            \
            memset(w, 0, sizeof(*w));                                                      \
            return -1;                                                                     \
        }                                                                                  \
    } while (0)
    REQ(create_event_channel, "rdma_create_event_channel", "RDMACM_1.0");
    REQ(destroy_event_channel, "rdma_destroy_event_channel", "RDMACM_1.0");
    REQ(create_id, "rdma_create_id", "RDMACM_1.0");
    REQ(destroy_id, "rdma_destroy_id", "RDMACM_1.0");
    REQ(bind_addr, "rdma_bind_addr", "RDMACM_1.0");
    REQ(resolve_addr, "rdma_resolve_addr", "RDMACM_1.0");
    REQ(resolve_route, "rdma_resolve_route", "RDMACM_1.0");
    REQ(listen, "rdma_listen", "RDMACM_1.0");
    REQ(connect, "rdma_connect", "RDMACM_1.0");
    REQ(accept, "rdma_accept", "RDMACM_1.0");
    REQ(reject, "rdma_reject", "RDMACM_1.0");
    REQ(disconnect, "rdma_disconnect", "RDMACM_1.0");
    REQ(get_cm_event, "rdma_get_cm_event", "RDMACM_1.0");
    REQ(ack_cm_event, "rdma_ack_cm_event", "RDMACM_1.0");
    REQ(migrate_id, "rdma_migrate_id", "RDMACM_1.0");
    REQ(event_str, "rdma_event_str", "RDMACM_1.0");
    REQ(get_src_port, "rdma_get_src_port", "RDMACM_1.0");
    /* QPs made by the plugin are moved by the CM's attributes (rdma-core 27+) */
    REQ(establish, "rdma_establish", "RDMACM_1.2");
    REQ(init_qp_attr, "rdma_init_qp_attr", "RDMACM_1.2");
#undef REQ
    return 0;
}
#else
static int load(struct rdmacmwrap *w, const char *near, char *err, size_t errlen)
{
    (void)near;
    memset(w, 0, sizeof(*w));
    snprintf(err, errlen, "railnet was built without librdmacm's headers (librdmacm-dev): use RAILNET_CM=tcp");
    return -1;
}
#endif

int rdmacmwrap_global_load(const char *near, char *err, size_t errlen)
{
    pthread_mutex_lock(&g_lock);
    if (!g_tried) {
        g_rc = load(&g_cm, near, g_why, sizeof(g_why));
        g_tried = 1;
    }
    if (g_rc)
        snprintf(err, errlen, "%s", g_why);
    pthread_mutex_unlock(&g_lock);
    return g_rc;
}

const struct rdmacmwrap *rdmacmwrap_global(void)
{
    return g_tried && !g_rc ? &g_cm : NULL;
}
