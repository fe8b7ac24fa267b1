/* tests/softnic/sysfs_ns_place.c: which devices softnic's view holds, and
 * where in the host's PCI tree each one's function goes (sysfs_ns.h).
 * Only reads: /sys and the view, outside any namespace. */
#include "sysfs_ns.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCI_DEVICES "/sys/bus/pci/devices"
#define NVIDIA_VENDOR "0x10de"
/* a function's device number has 5 bits; the fake ones are taken from the
 * top, where real devices on a root complex are rarest */
#define NS_SLOT_MAX 0x1f

static int dev_order(const void *a, const void *b)
{
    const struct ns_dev *x = a, *y = b;
    /* softnic's own order (its uverbs index) first: device i of the view
     * is device i of ibv_get_device_list */
    if (x->uverbs != y->uverbs) {
        if (x->uverbs < 0 || y->uverbs < 0)
            return x->uverbs < 0 ? 1 : -1;
        return x->uverbs < y->uverbs ? -1 : 1;
    }
    return strverscmp(x->name, y->name);
}

static struct ns_dev *dev_named(struct ns_ctx *c, const char *name)
{
    for (int i = 0; i < c->ndevs; i++)
        if (!strcmp(c->dev[i].name, name))
            return &c->dev[i];
    return NULL;
}

int ns_place_read_view(struct ns_ctx *c, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    if (ns_path(dir, sizeof(dir), err, errlen, "%s/class/infiniband", c->view))
        return -1;
    DIR *d = opendir(dir);
    if (!d) {
        ns_err(err, errlen, "softnic wrote no device into %s (%s)", dir, strerror(errno));
        return -1;
    }
    c->ndevs = 0;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (!ns_name_ok(e->d_name)) {
            ns_err(err, errlen, "softnic's view holds a device named \"%.80s\", which cannot be "
                   "a file name in /sys", e->d_name);
            rc = -1;
        } else if (c->ndevs == NS_MAX_DEVS) {
            ns_err(err, errlen, "softnic's view holds more than %d devices", NS_MAX_DEVS);
            rc = -1;
        } else {
            struct ns_dev *v = &c->dev[c->ndevs++];
            snprintf(v->name, sizeof(v->name), "%.*s", NS_NAME_MAX - 1, e->d_name);
            v->uverbs = -1;
        }
    }
    closedir(d);
    if (rc)
        return -1;
    if (c->ndevs == 0) {
        ns_err(err, errlen, "softnic's view %s holds no device", dir);
        return -1;
    }
    /* uverbs<i>/ibdev names device i; a missing index ends the list */
    for (int i = 0; i < NS_MAX_DEVS; i++) {
        char path[PATH_MAX], name[NS_NAME_MAX], why[256];
        if (ns_path(path, sizeof(path), err, errlen, "%s/class/infiniband_verbs/uverbs%d/ibdev",
                    c->view, i))
            return -1;
        if (ns_read_line(path, name, sizeof(name), why, sizeof(why)))
            break;
        struct ns_dev *v = dev_named(c, name);
        if (v)
            v->uverbs = i;
    }
    qsort(c->dev, (size_t)c->ndevs, sizeof(c->dev[0]), dev_order);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* The host's GPUs (NVIDIA display or 3D controllers) in bus order. */
static int find_gpus(char (*gpus)[16], int max)
{
    DIR *d = opendir(PCI_DEVICES);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        /* a function that cannot be read is no GPU this program can place beside */
        char path[PATH_MAX], vendor[32], class[32], why[256];
        if (!ns_bdf_ok(e->d_name))
            continue;
        snprintf(path, sizeof(path), PCI_DEVICES "/%s/vendor", e->d_name);
        if (ns_read_line(path, vendor, sizeof(vendor), why, sizeof(why)) ||
            strcmp(vendor, NVIDIA_VENDOR))
            continue;
        snprintf(path, sizeof(path), PCI_DEVICES "/%s/class", e->d_name);
        if (ns_read_line(path, class, sizeof(class), why, sizeof(why)) ||
            (strtoul(class, NULL, 16) >> 16) != 0x03)
            continue;
        snprintf(gpus[n++], 16, "%.15s", e->d_name);
    }
    closedir(d);
    qsort(gpus, (size_t)n, sizeof(gpus[0]), by_name);
    return n;
}

/* The first PCI root, /sys/devices/pciDDDD:BB, and its "DDDD:BB". */
static int first_root(char *root, size_t len, char *bus, char *err, size_t errlen)
{
    DIR *d = opendir("/sys/devices");
    if (!d) {
        ns_err(err, errlen, "cannot list /sys/devices: %s", strerror(errno));
        return -1;
    }
    char best[NS_NAME_MAX] = "";
    struct dirent *e;
    while ((e = readdir(d))) {
        char probe[16];
        /* "pciDDDD:BB" is a BDF's first 7 characters after "pci" */
        if (strncmp(e->d_name, "pci", 3) || strlen(e->d_name) != 10)
            continue;
        snprintf(probe, sizeof(probe), "%s:00.0", e->d_name + 3);
        if (ns_bdf_ok(probe) && (!best[0] || strcmp(e->d_name, best) < 0))
            snprintf(best, sizeof(best), "%.10s", e->d_name);
    }
    closedir(d);
    if (!best[0]) {
        ns_err(err, errlen, "no PCI root (pciDDDD:BB) in /sys/devices");
        return -1;
    }
    snprintf(bus, 8, "%.7s", best + 3);
    return ns_path(root, len, err, errlen, "/sys/devices/%s", best);
}

/* A device number for v's port not used on bus "DDDD:BB" in v's parent,
 * nor by the ports placed before it there. */
static int free_slot(struct ns_ctx *c, struct ns_dev *v, const char *bus, char *err, size_t errlen)
{
    int used[NS_SLOT_MAX + 1] = { 0 };
    DIR *d = opendir(v->parent);
    if (!d) {
        ns_err(err, errlen, "cannot list %s: %s", v->parent, strerror(errno));
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d)))
        if (ns_bdf_ok(e->d_name) && !strncmp(e->d_name, bus, 7))
            used[strtoul(e->d_name + 8, NULL, 16) & NS_SLOT_MAX] = 1;
    closedir(d);
    for (struct ns_dev *w = c->dev; w < v; w++)
        if (!strcmp(w->parent, v->parent))
            used[strtoul(w->port + 8, NULL, 16) & NS_SLOT_MAX] = 1;
    for (int s = NS_SLOT_MAX; s >= 0; s--)
        if (!used[s]) {
            snprintf(v->port, sizeof(v->port), "%.7s:%02x.0", bus, s);
            return 0;
        }
    ns_err(err, errlen, "no free device number on bus %s in %s", bus, v->parent);
    return -1;
}

/* A bus number of v's domain that the host has not (/sys/class/pci_bus)
 * and no device placed before v took, from the top down. */
static int free_bus(struct ns_ctx *c, struct ns_dev *v, char *err, size_t errlen)
{
    int used[256] = { 0 };
    used[0] = 1;
    DIR *d = opendir("/sys/class/pci_bus");
    if (!d) {
        ns_err(err, errlen, "cannot list /sys/class/pci_bus: %s", strerror(errno));
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d)))
        if (strlen(e->d_name) == 7 && !strncmp(e->d_name, v->port, 5))
            used[strtoul(e->d_name + 5, NULL, 16) & 0xff] = 1;
    closedir(d);
    for (struct ns_dev *w = c->dev; w < v; w++)
        if (!strncmp(w->bdf, v->port, 5))
            used[strtoul(w->bdf + 5, NULL, 16) & 0xff] = 1;
    for (int b = 0xff; b > 0; b--)
        if (!used[b]) {
            snprintf(v->bdf, sizeof(v->bdf), "%.4s:%02x:00.0", v->port, b);
            return 0;
        }
    ns_err(err, errlen, "no free bus number in PCI domain %.4s", v->port);
    return -1;
}

/* Beside the GPU at sysfs path gpu: in the directory that holds the port
 * above it (or the GPU itself, on a root), on that entry's bus. */
static int beside_gpu(struct ns_dev *v, const char *gpu, char *bus, char *err, size_t errlen)
{
    char link[PATH_MAX], *real;
    if (ns_path(link, sizeof(link), err, errlen, PCI_DEVICES "/%s", gpu))
        return -1;
    if (!(real = realpath(link, NULL))) {
        ns_err(err, errlen, "cannot resolve %s: %s", link, strerror(errno));
        return -1;
    }
    int bad = ns_path(v->near, sizeof(v->near), err, errlen, "%s", real);
    free(real);
    if (bad)
        return -1;
    snprintf(v->parent, sizeof(v->parent), "%s", v->near);
    char *up = strrchr(v->parent, '/');
    *up = '\0';
    up = strrchr(v->parent, '/');
    if (up && ns_bdf_ok(up + 1)) {
        snprintf(bus, 8, "%.7s", up + 1);
        *up = '\0';
    } else {
        snprintf(bus, 8, "%.7s", gpu);
    }
    return 0;
}

int ns_place_devices(struct ns_ctx *c, char *err, size_t errlen)
{
    static char gpus[NS_MAX_GPUS][16];
    int ngpus = find_gpus(gpus, NS_MAX_GPUS);
    if (c->placement == NS_PLACE_NEAR_GPU && ngpus == 0) {
        ns_err(err, errlen, "--near-gpu: no GPU (vendor %s, class 0x03xxxx) in %s",
               NVIDIA_VENDOR, PCI_DEVICES);
        return -1;
    }
    int near = c->placement == NS_PLACE_NEAR_GPU || (c->placement == NS_PLACE_AUTO && ngpus > 0);
    char root[PATH_MAX], root_bus[8];
    if (!near && first_root(root, sizeof(root), root_bus, err, errlen))
        return -1;
    for (int i = 0; i < c->ndevs; i++) {
        struct ns_dev *v = &c->dev[i];
        char bus[8], link[PATH_MAX];
        if (ns_path(link, sizeof(link), err, errlen, "/sys/class/infiniband/%s", v->name))
            return -1;
        if (ns_exists(link)) {
            ns_err(err, errlen, "%s exists already: a host device has softnic's device name %s",
                   link, v->name);
            return -1;
        }
        if (c->dual_port && i % 2 == 1) {
            /* the second port of device i-1's NIC: its function 1, behind
             * the same bridge on the same bus, as a ConnectX shows the
             * ports of a dual-port card (NCCL fuses them by that path) */
            const struct ns_dev *p = &c->dev[i - 1];
            snprintf(v->parent, sizeof(v->parent), "%s", p->parent);
            snprintf(v->near, sizeof(v->near), "%s", p->near);
            snprintf(v->port, sizeof(v->port), "%s", p->port);
            snprintf(v->bdf, sizeof(v->bdf), "%.10s.1", p->bdf);
            v->fn = 1;
            continue;
        }
        v->fn = 0;
        int nic = c->dual_port ? i / 2 : i;
        if (near) {
            if (beside_gpu(v, gpus[nic % ngpus], bus, err, errlen))
                return -1;
        } else {
            snprintf(v->parent, sizeof(v->parent), "%s", root);
            v->near[0] = '\0';
            snprintf(bus, sizeof(bus), "%s", root_bus);
        }
        if (strncmp(v->parent, "/sys/devices/", 13)) {
            ns_err(err, errlen, "%s: its PCI parent %s is not under /sys/devices", v->name,
                   v->parent);
            return -1;
        }
        if (free_slot(c, v, bus, err, errlen) || free_bus(c, v, err, errlen))
            return -1;
    }
    return 0;
}
