/* plugin/gin/gin_gdaki_type.c: which GIN type railnet offers NCCL
 * (gin_gdaki.h states the rules). gin_gdaki_choose is pure (tests feed it
 * probes); gin_gdaki_probe_fill looks at this process: the configuration,
 * NCCL's version (ncclGetVersion, if a NCCL is loaded), CUDA, and whether
 * the device opens for DEVX.
 *
 * Layout versions: NCCL's device code is compiled into the user's kernel
 * from the headers of the NCCL it was built with; NCCL's host library says
 * nothing of it to a plugin (2.28.9 to 2.30.7 never check netDeviceVersion
 * for GIN). The NCCL release in the process is the best witness: 2.28.x
 * and 2.29.x read NCCL_GIN_GDAKI_VERSION 100 (2.29's contexts and table
 * offsets lie where 2.28 reads the first context and padding: one writer),
 * 2.30.x reads 200 (NCCL 2.30.7 also names, at createContext, which
 * context its kernels read: gin_gdaki_layout.c). Any other release is
 * refused, with a WARN naming the versions, and offered the proxy type,
 * whose structures NCCL builds itself. RAILNET_GIN_GDAKI_VERSION states
 * the version outright (an NCCL known to keep a layout; tests). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "../ib/config.h"
#include "cudawrap.h"
#include "devices.h"
#include "gdaki_devx.h"
#include "gin_gdaki.h"
#include "ibvwrap.h"
#include "qp.h"

int gin_gdaki_version_of_nccl(int v)
{
    /* ncclGetVersion: major * 10000 + minor * 100 + patch since 2.9 */
    if (v >= 22800 && v < 23000)
        return RN_GIN_GDAKI_V100;
    if (v >= 23000 && v < 23100)
        return RN_GIN_GDAKI_V200;
    return 0;
}

static int layout_written(int v)
{
    return v == RN_GIN_GDAKI_V100 || v == RN_GIN_GDAKI_V200;
}

int gin_gdaki_layout_of(const struct gin_gdaki_probe *p)
{
    if (p->version_override)
        return p->version_override;
    if (p->nccl_version)
        return gin_gdaki_version_of_nccl(p->nccl_version);
    return RN_GIN_GDAKI_V100;   /* no NCCL in the process: a test driver, which says otherwise by the override */
}

static void nccl_str(int v, char *buf, size_t len)
{
    snprintf(buf, len, "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
}

int gin_gdaki_choose(const struct gin_gdaki_probe *p, int *mismatch, char *why, size_t wl)
{
    *mismatch = 0;
    if (p->mode == RN_GIN_PROXY) {
        snprintf(why, wl, "RAILNET_GIN=proxy");
        return NCCL_NET_DEVICE_GIN_PROXY;
    }
    /* auto: the GDAKI type wherever RAILNET_GIN=gdaki would get it from a
     * GPU (validated on H100/H200 with NCCL 2.28.9, tests/gpu/gin_e2e.sh),
     * else the proxy type; the reason is the same either way */
    const char *who = p->mode == RN_GIN_GDAKI ? "RAILNET_GIN=gdaki" : "RAILNET_GIN=auto";
    char nv[32];
    nccl_str(p->nccl_version, nv, sizeof(nv));
    int expect = gin_gdaki_layout_of(p);
    if (!expect) {
        *mismatch = 1;
        snprintf(why, wl, "%s: NCCL %s's device code expects a GDAKI layout (NCCL_GIN_GDAKI_VERSION) "
                          "railnet does not know; railnet writes %d (NCCL 2.28, 2.29) and %d (NCCL 2.30); offering "
                          "the proxy type (RAILNET_GIN_GDAKI_VERSION states a compatible NCCL's)",
                 who, nv, RN_GIN_GDAKI_V100, RN_GIN_GDAKI_V200);
        return NCCL_NET_DEVICE_GIN_PROXY;
    }
    if (!layout_written(expect)) {
        *mismatch = 1;
        snprintf(why, wl, "%s: NCCL_GIN_GDAKI_VERSION mismatch: %s expects %d, railnet writes %d and %d; "
                          "offering the proxy type",
                 who, p->version_override ? "RAILNET_GIN_GDAKI_VERSION says the device code" : nv, expect,
                 RN_GIN_GDAKI_V100, RN_GIN_GDAKI_V200);
        return NCCL_NET_DEVICE_GIN_PROXY;
    }
    /* auto offers only what ran on a GPU: NCCL 2.28's device code. 2.29's
     * and 2.30's layouts are written from their headers; RAILNET_GIN=gdaki
     * asks for them. */
    if (p->mode == RN_GIN_AUTO && p->nccl_version >= 22900 && !p->version_override) {
        snprintf(why, wl, "RAILNET_GIN=auto: NCCL %s's GDAKI layout %d is written but not yet validated on a GPU; "
                          "offering the proxy type (RAILNET_GIN=gdaki asks for the GDAKI type)",
                 nv, expect);
        return NCCL_NET_DEVICE_GIN_PROXY;
    }
    if (!p->devx_ok) {
        snprintf(why, wl, "%s: the device cannot host GPU-side queues (%s); offering the proxy type", who,
                 p->devx_why);
        return NCCL_NET_DEVICE_GIN_PROXY;
    }
    /* host-devx without a GPU (CPU consumers, tests) only when asked for */
    if (!p->cuda_ok && !(p->host_test && p->mode == RN_GIN_GDAKI)) {
        snprintf(why, wl, "%s: no CUDA GPU (%s); offering the proxy type", who, p->cuda_why);
        return NCCL_NET_DEVICE_GIN_PROXY;
    }
    if (p->cuda_ok)
        snprintf(why, wl, "%s: GDAKI type, layout version %d%s%s", who, expect,
                 p->nccl_version ? " for NCCL " : "", p->nccl_version ? nv : "");
    else
        snprintf(why, wl, "RAILNET_GIN=gdaki: GDAKI type, layout version %d, with every structure in host memory "
                          "(no CUDA, RAILNET_GDAKI_QUEUE_MEM=host-devx: CPU consumers only)", expect);
    return NCCL_NET_DEVICE_GIN_GDAKI;
}

void gin_gdaki_probe_fill(int dev, struct gin_gdaki_probe *p)
{
    memset(p, 0, sizeof(*p));
    const struct rn_config *cfg = rn_config();
    p->mode = cfg->gin;
    p->version_override = cfg->gin_gdaki_version;
    int (*get_version)(int *) = (int (*)(int *))dlsym(RTLD_DEFAULT, "ncclGetVersion");
    int v = 0;
    if (get_version && get_version(&v) == 0)
        p->nccl_version = v;
    if (p->mode != RN_GIN_GDAKI && p->mode != RN_GIN_AUTO)
        return;     /* nothing else decides */
    const struct cudawrap *cu = cudawrap_get(p->cuda_why, sizeof(p->cuda_why));
    int ngpu = 0;
    if (cu && cu->device_get_count(&ngpu) == 0 && ngpu > 0)
        p->cuda_ok = 1;
    else if (cu)
        snprintf(p->cuda_why, sizeof(p->cuda_why), "the CUDA driver reports no device");
    p->host_test = !p->cuda_ok && cfg->gdaki_queue_mem == 2;
    struct qp_port ports[HS_MAX_PORTS];
    int np = 0;
    char name[64];
    if (devices_qp_ports(dev, ports, &np, name, sizeof(name)) != ncclSuccess || np < 1) {
        snprintf(p->devx_why, sizeof(p->devx_why), "device %d does not exist", dev);
        return;
    }
    if (ibvwrap_global_load_mlx5(p->devx_why, sizeof(p->devx_why)) < 0)
        return;
    const struct ibvwrap *w = ibvwrap_global();
    const char *missing = ibvwrap_devx_missing(w);
    if (missing) {
        snprintf(p->devx_why, sizeof(p->devx_why), "%.160s has no %s", w->mlx5_path[0] ? w->mlx5_path : "libmlx5",
                 missing);
        return;
    }
    struct ibv_context *ctx = gdaki_devx_open(w, ports[0].ctx->device, p->devx_why, sizeof(p->devx_why));
    if (!ctx)
        return;
    w->close_device(ctx);
    p->devx_ok = 1;
}
