/* plugin/ib/rail_topo.c: a NIC's rail from the host's PCI topology
 * (rail_topo.h). */
#include "rail_topo.h"

#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sysfs_attr.h"

#define CLASS_IB "/class/infiniband/"

struct gpu {
    char *path;   /* resolved */
    uint64_t key; /* domain, bus, device, function: bus order */
};

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* 1 when name is a PCI function's, domain:bus:device.function in hex
 * ("0000:17:00.0", as sysfs writes it), with *key its place in bus order;
 * a root complex's "pci0000:00" is not one. */
static int bdf_key(const char *name, uint64_t *key)
{
    static const char shape[] = ":xx:xx.x";
    const char *s = name;
    size_t nd = strspn(s, "0123456789abcdef");
    if (nd < 4 || nd > 8)
        return 0;
    s += nd;
    for (const char *p = shape; *p; p++, s++)
        if (*p == 'x' ? !isxdigit((unsigned char)*s) : *s != *p)
            return 0;
    if (*s)
        return 0;
    unsigned dom, bus, dev, fn;
    if (sscanf(name, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4)
        return 0;
    *key = (uint64_t)dom << 16 | bus << 8 | dev << 3 | fn;
    return 1;
}

/* The first word of dir/name into buf; 0, or -1 when it cannot be read. */
static int read_word(const char *dir, const char *name, char *buf, size_t len)
{
    if (sysfs_attr_read(dir, name, buf, len))
        return -1;
    buf[strcspn(buf, " \t")] = '\0';
    return 0;
}

/* 1 when the PCI function at fn is an NVIDIA GPU: vendor 0x10de, class
 * 3D (0x0302xx) or VGA (0x0300xx) controller. */
static int is_nvidia_gpu(const char *fn)
{
    char vendor[32], class[32];
    if (read_word(fn, "vendor", vendor, sizeof(vendor)) || read_word(fn, "class", class, sizeof(class)))
        return 0;
    return !strcasecmp(vendor, "0x10de") && (!strncasecmp(class, "0x0302", 6) || !strncasecmp(class, "0x0300", 6));
}

static int by_key(const void *a, const void *b)
{
    uint64_t x = ((const struct gpu *)a)->key, y = ((const struct gpu *)b)->key;
    return x < y ? -1 : x > y;
}

/* The NVIDIA GPUs among root/bus/pci/devices, resolved, in bus order, into
 * *out (*n of them; free with gpus_free); -1 when the directory cannot be
 * read or memory runs out. */
static int gpus_list(const char *root, struct gpu **out, int *n)
{
    char dir[PATH_MAX];
    *out = NULL;
    *n = 0;
    if (snprintf(dir, sizeof(dir), "%s/bus/pci/devices", root) >= (int)sizeof(dir))
        return -1;
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int cap = 0, err = 0;
    struct dirent *e;
    while (!err && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char link[PATH_MAX + 256];
        snprintf(link, sizeof(link), "%s/%s", dir, e->d_name);
        char *real = realpath(link, NULL);
        uint64_t key;
        if (!real || !bdf_key(base_name(real), &key) || !is_nvidia_gpu(real)) {
            free(real);
            continue;
        }
        if (*n == cap) {
            struct gpu *g = realloc(*out, (size_t)(cap ? 2 * cap : 16) * sizeof(*g));
            if (!g) {
                free(real);
                err = -1;
                break;
            }
            *out = g;
            cap = cap ? 2 * cap : 16;
        }
        (*out)[(*n)++] = (struct gpu){ real, key };
    }
    closedir(d);
    if (*n > 1)
        qsort(*out, (size_t)*n, sizeof(**out), by_key);
    return err;
}

static void gpus_free(struct gpu *g, int n)
{
    for (int i = 0; i < n; i++)
        free(g[i].path);
    free(g);
}

/* The sysfs root of ibdev_path ("<root>/class/infiniband/<name>") into
 * root; 0, or -1 when it has not that form. */
static int sysfs_root(const char *ibdev_path, char *root, size_t len)
{
    const char *at = NULL;
    for (const char *s = ibdev_path; (s = strstr(s, CLASS_IB)); s++)
        at = s;
    if (!at)
        return -1;
    const char *name = at + strlen(CLASS_IB);
    if (!*name || strchr(name, '/') || (size_t)(at - ibdev_path) >= len)
        return -1;
    memcpy(root, ibdev_path, (size_t)(at - ibdev_path));
    root[at - ibdev_path] = '\0';
    return 0;
}

int rail_topo_rail(const char *ibdev_path, const char *pci_path, int max, char *why, size_t whylen)
{
    char root[PATH_MAX], sw[PATH_MAX];
    uint64_t key;
    if (!ibdev_path || sysfs_root(ibdev_path, root, sizeof(root))) {
        snprintf(why, whylen, "its sysfs path %s is not <root>" CLASS_IB "<name>", ibdev_path ? ibdev_path : "(none)");
        return -1;
    }
    if (!pci_path) {
        snprintf(why, whylen, "%s/device names no PCI function", ibdev_path);
        return -1;
    }
    if (!bdf_key(base_name(pci_path), &key)) {
        snprintf(why, whylen, "its device %s is not a PCI function", pci_path);
        return -1;
    }
    /* function -> downstream port -> the switch's upstream port */
    snprintf(sw, sizeof(sw), "%s", pci_path);
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(sw, '/');
        if (!slash || slash == sw) {
            sw[0] = '\0';
            break;
        }
        *slash = '\0';
    }
    if (!bdf_key(base_name(sw), &key)) {
        snprintf(why, whylen, "its PCI function %s is behind no PCIe switch (its bridge is on the root complex)",
                 base_name(pci_path));
        return -1;
    }
    struct gpu *g;
    int n;
    if (gpus_list(root, &g, &n)) {
        gpus_free(g, n);
        snprintf(why, whylen, "the PCI functions of %s/bus/pci/devices cannot be listed", root);
        return -1;
    }
    size_t swlen = strlen(sw);
    int near = 0, first = -1, second = -1;
    for (int i = 0; i < n; i++) {
        if (strncmp(g[i].path, sw, swlen) || g[i].path[swlen] != '/')
            continue;
        if (near++ == 0)
            first = i;
        else if (near == 2)
            second = i;
    }
    int rail = -1;
    if (near == 0)
        snprintf(why, whylen, "no GPU shares its PCIe switch %s (%d GPU(s) on the host)", base_name(sw), n);
    else if (near > 1)
        snprintf(why, whylen, "%d GPUs share its PCIe switch %s: %s, %s%s", near, base_name(sw),
                 base_name(g[first].path), base_name(g[second].path), near > 2 ? ", ..." : "");
    else if (first > max)
        snprintf(why, whylen, "the GPU on its PCIe switch, %s, is number %d, above %d", base_name(g[first].path),
                 first, max);
    else {
        rail = first;
        snprintf(why, whylen, "GPU %d of %d, %s, shares its PCIe switch %s", first, n, base_name(g[first].path),
                 base_name(sw));
    }
    gpus_free(g, n);
    return rail;
}
