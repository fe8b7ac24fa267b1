/* plugin/ib/ibvwrap.c: the dlopen'ed libibverbs table (see ibvwrap.h). */
#include "ibvwrap.h"

#include <dlfcn.h>
#include <pthread.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* dlvsym binds the versioned name a program built against rdma-core's
 * headers would bind to; a library without version nodes still answers to
 * plain dlsym. */
static void *sym(void *h, const char *name, const char *version)
{
    void *p = dlvsym(h, name, version);
    return p ? p : dlsym(h, name);
}

/* rdma-core names its library libibverbs.so.1.<abi>.<rdma-core>.0. */
static int version_from_name(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    unsigned a, b, c;
    if (sscanf(base, "libibverbs.so.%u.%u.%u", &a, &b, &c) == 3)
        return (int)c;
    return 0;
}

int ibvwrap_open(struct ibvwrap *v, const char *path, char *err, size_t errlen)
{
    memset(v, 0, sizeof(*v));
    const char *name = path ? path : "libibverbs.so.1";
    v->handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!v->handle) {
        snprintf(err, errlen, "cannot load %s: %s", name, dlerror());
        return -1;
    }
    struct link_map *lm = NULL;
    if (dlinfo(v->handle, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name) {
        char *real = realpath(lm->l_name, NULL);
        snprintf(v->path, sizeof(v->path), "%s", real ? real : lm->l_name);
        free(real);
    } else {
        snprintf(v->path, sizeof(v->path), "%s", name);
    }
    v->rdma_core_version = version_from_name(v->path);

    void *h = v->handle;
#define REQ(field, symname, ver)                                                   \
    do {                                                                           \
        *(void **)&v->field = sym(h, symname, ver);                                \
        if (!v->field) {                                                           \
            snprintf(err, errlen, "%s: missing symbol %s@%s", v->path, symname, ver); \
            ibvwrap_close(v);                                                     \
            return -1;                                                             \
        }                                                                          \
    } while (0)
    REQ(get_device_list, "ibv_get_device_list", "IBVERBS_1.1");
    REQ(free_device_list, "ibv_free_device_list", "IBVERBS_1.1");
    REQ(get_device_name, "ibv_get_device_name", "IBVERBS_1.1");
    REQ(open_device, "ibv_open_device", "IBVERBS_1.1");
    REQ(close_device, "ibv_close_device", "IBVERBS_1.1");
    REQ(query_device, "ibv_query_device", "IBVERBS_1.1");
    REQ(query_port_compat, "ibv_query_port", "IBVERBS_1.1");
    REQ(query_gid, "ibv_query_gid", "IBVERBS_1.1");
    REQ(alloc_pd, "ibv_alloc_pd", "IBVERBS_1.1");
    REQ(dealloc_pd, "ibv_dealloc_pd", "IBVERBS_1.1");
    REQ(reg_mr, "ibv_reg_mr", "IBVERBS_1.1");
    REQ(dereg_mr, "ibv_dereg_mr", "IBVERBS_1.1");
    REQ(create_cq, "ibv_create_cq", "IBVERBS_1.1");
    REQ(destroy_cq, "ibv_destroy_cq", "IBVERBS_1.1");
    REQ(create_qp, "ibv_create_qp", "IBVERBS_1.1");
    REQ(modify_qp, "ibv_modify_qp", "IBVERBS_1.1");
    REQ(destroy_qp, "ibv_destroy_qp", "IBVERBS_1.1");
    REQ(query_qp, "ibv_query_qp", "IBVERBS_1.1");
    REQ(get_async_event, "ibv_get_async_event", "IBVERBS_1.1");
    REQ(ack_async_event, "ibv_ack_async_event", "IBVERBS_1.1");
    REQ(event_type_str, "ibv_event_type_str", "IBVERBS_1.1");
    REQ(wc_status_str, "ibv_wc_status_str", "IBVERBS_1.1");
    REQ(create_ah, "ibv_create_ah", "IBVERBS_1.1");
    REQ(destroy_ah, "ibv_destroy_ah", "IBVERBS_1.1");
#undef REQ
    *(void **)&v->reg_mr_iova2 = dlvsym(h, "ibv_reg_mr_iova2", "IBVERBS_1.8");
    *(void **)&v->reg_dmabuf_mr = dlvsym(h, "ibv_reg_dmabuf_mr", "IBVERBS_1.12");
    *(void **)&v->query_gid_ex = dlvsym(h, "_ibv_query_gid_ex", "IBVERBS_1.11");
    return 0;
}

int ibvwrap_open_mlx5(struct ibvwrap *v, char *err, size_t errlen)
{
    if (v->mlx5_handle)
        return 0;
    if (!v->handle) {
        snprintf(err, errlen, "libibverbs is not loaded");
        return -1;
    }
    /* softnic ships libmlx5.so.1 next to its libibverbs.so.1: prefer the
     * one beside the verbs library actually loaded. */
    char cand[PATH_MAX];
    const char *slash = strrchr(v->path, '/');
    void *h = NULL;
    if (slash && (size_t)(slash - v->path) + sizeof("/libmlx5.so.1") <= sizeof(cand)) {
        snprintf(cand, sizeof(cand), "%.*s/libmlx5.so.1", (int)(slash - v->path), v->path);
        h = dlopen(cand, RTLD_NOW | RTLD_LOCAL);
    }
    if (!h)
        h = dlopen("libmlx5.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(err, errlen, "cannot load libmlx5.so.1 (mlx5 direct verbs): %s", dlerror());
        return -1;
    }
    *(void **)&v->mlx5dv_create_qp = sym(h, "mlx5dv_create_qp", "MLX5_1.3");
    *(void **)&v->mlx5dv_init_obj = sym(h, "mlx5dv_init_obj", "MLX5_1.2");
    if (!v->mlx5dv_create_qp || !v->mlx5dv_init_obj) {
        snprintf(err, errlen, "libmlx5.so.1 lacks mlx5dv_create_qp@MLX5_1.3 or mlx5dv_init_obj@MLX5_1.2 "
                 "(rdma-core too old for the GPU-initiated path)");
        v->mlx5dv_create_qp = NULL;
        v->mlx5dv_init_obj = NULL;
        dlclose(h);
        return -1;
    }
    *(void **)&v->mlx5dv_is_supported = dlvsym(h, "mlx5dv_is_supported", "MLX5_1.8");
    *(void **)&v->mlx5dv_devx_umem_reg = dlvsym(h, "mlx5dv_devx_umem_reg", "MLX5_1.7");
    *(void **)&v->mlx5dv_devx_umem_dereg = dlvsym(h, "mlx5dv_devx_umem_dereg", "MLX5_1.7");
    *(void **)&v->mlx5dv_devx_umem_reg_ex = dlvsym(h, "mlx5dv_devx_umem_reg_ex", "MLX5_1.19");
    *(void **)&v->mlx5dv_open_device = dlvsym(h, "mlx5dv_open_device", "MLX5_1.7");
    *(void **)&v->mlx5dv_devx_alloc_uar = dlvsym(h, "mlx5dv_devx_alloc_uar", "MLX5_1.7");
    *(void **)&v->mlx5dv_devx_free_uar = dlvsym(h, "mlx5dv_devx_free_uar", "MLX5_1.7");
    *(void **)&v->mlx5dv_devx_query_eqn = dlvsym(h, "mlx5dv_devx_query_eqn", "MLX5_1.7");
    *(void **)&v->mlx5dv_devx_obj_create = dlvsym(h, "mlx5dv_devx_obj_create", "MLX5_1.7");
    *(void **)&v->mlx5dv_devx_obj_modify = dlvsym(h, "mlx5dv_devx_obj_modify", "MLX5_1.7");
    *(void **)&v->mlx5dv_devx_obj_query = dlvsym(h, "mlx5dv_devx_obj_query", "MLX5_1.7");
    *(void **)&v->mlx5dv_devx_obj_destroy = dlvsym(h, "mlx5dv_devx_obj_destroy", "MLX5_1.7");
    *(void **)&v->mlx5dv_devx_general_cmd = dlvsym(h, "mlx5dv_devx_general_cmd", "MLX5_1.7");
    struct link_map *lm = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name)
        snprintf(v->mlx5_path, sizeof(v->mlx5_path), "%s", lm->l_name);
    v->mlx5_handle = h;
    return 0;
}

const char *ibvwrap_devx_missing(const struct ibvwrap *v)
{
    if (!v->mlx5_handle)
        return "libmlx5.so.1";
    if (!v->mlx5dv_open_device)
        return "mlx5dv_open_device@MLX5_1.7";
    if (!v->mlx5dv_devx_umem_reg || !v->mlx5dv_devx_umem_dereg)
        return "mlx5dv_devx_umem_reg@MLX5_1.7";
    if (!v->mlx5dv_devx_alloc_uar || !v->mlx5dv_devx_free_uar)
        return "mlx5dv_devx_alloc_uar@MLX5_1.7";
    if (!v->mlx5dv_devx_query_eqn)
        return "mlx5dv_devx_query_eqn@MLX5_1.7";
    if (!v->mlx5dv_devx_obj_create || !v->mlx5dv_devx_obj_destroy)
        return "mlx5dv_devx_obj_create@MLX5_1.7";
    if (!v->mlx5dv_devx_obj_modify || !v->mlx5dv_devx_obj_query)
        return "mlx5dv_devx_obj_modify@MLX5_1.7";
    return NULL;
}

void ibvwrap_close(struct ibvwrap *v)
{
    if (v->mlx5_handle)
        dlclose(v->mlx5_handle);
    if (v->handle)
        dlclose(v->handle);
    memset(v, 0, sizeof(*v));
}

int ibvwrap_query_port(const struct ibvwrap *v, struct ibv_context *ctx, uint8_t port,
                        struct ibv_port_attr *attr)
{
    memset(attr, 0, sizeof(*attr));
    struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_port);
    if (vctx)
        return vctx->query_port(ctx, port, attr, sizeof(*attr));
    return v->query_port_compat(ctx, port, attr);
}

struct ibv_mr *ibvwrap_reg_mr(const struct ibvwrap *v, struct ibv_pd *pd, void *addr,
                               size_t len, int access, int *ro_dropped)
{
    if (ro_dropped)
        *ro_dropped = 0;
    if (v->reg_mr_iova2)
        return v->reg_mr_iova2(pd, addr, len, (uint64_t)(uintptr_t)addr, (unsigned)access);
    if ((access & IBV_ACCESS_RELAXED_ORDERING) && ro_dropped)
        *ro_dropped = 1;
    return v->reg_mr(pd, addr, len, access & ~IBV_ACCESS_RELAXED_ORDERING);
}

static struct ibvwrap g_ibv;
static int g_ibv_loaded;
static pthread_mutex_t g_ibv_lock = PTHREAD_MUTEX_INITIALIZER;

int ibvwrap_global_load(const char *path, char *err, size_t errlen)
{
    int rc = 0;
    pthread_mutex_lock(&g_ibv_lock);
    if (!g_ibv_loaded) {
        rc = ibvwrap_open(&g_ibv, path, err, errlen);
        g_ibv_loaded = rc == 0;
    }
    pthread_mutex_unlock(&g_ibv_lock);
    return rc;
}

const struct ibvwrap *ibvwrap_global(void)
{
    return g_ibv_loaded ? &g_ibv : NULL;
}

int ibvwrap_global_load_mlx5(char *err, size_t errlen)
{
    static int tried, rc;
    static char why[256];
    pthread_mutex_lock(&g_ibv_lock);
    if (!g_ibv_loaded) {
        snprintf(why, sizeof(why), "libibverbs is not loaded");
        rc = -1;
    } else if (!tried) {
        rc = ibvwrap_open_mlx5(&g_ibv, why, sizeof(why));
        tried = 1;
    }
    if (rc)
        snprintf(err, errlen, "%s", why);
    pthread_mutex_unlock(&g_ibv_lock);
    return rc;
}
