/* tests/softnic/sysfs_ns_mount.c: the namespace's /sys (sysfs_ns.h).
 *
 * sysfs cannot take new entries, so each directory that needs one (the
 * directory of each new port, /sys/class/pci_bus, infiniband and
 * infiniband_verbs, or /sys/class where one of them is missing) is
 * overlaid: a tmpfs goes on it and every entry it had comes back --
 * directories as bind mounts of the real ones (the devices below keep
 * working: their attributes stay live), symlinks with their text (sysfs's
 * links are relative, so they resolve as before), attributes as copies.
 * The real directory stays reachable for that only through a bind mount on
 * a staging tmpfs, which is itself only in this namespace and is taken
 * away before the command runs. */
#include "sysfs_ns.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* The NIC: a ConnectX-like identity, which programs that place NICs by
 * vendor and class (NCCL's topology) take for an InfiniBand controller
 * (class 0x0207). Its port: a PCI bridge (class 0x0604) of the same
 * vendor; no program here tells bridges apart by more than their class. */
static const struct {
    const char *name, *nic, *port;
} fn_ident[] = {
    { "vendor", "0x15b3\n", "0x15b3\n" },
    { "device", "0x101b\n", "0x101b\n" },
    { "class", "0x020700\n", "0x060400\n" },
    { "subsystem_vendor", "0x15b3\n", "0x15b3\n" },
    { "subsystem_device", "0x0007\n", "0x0007\n" },
};
/* The PCIe link softnic's view states for the device (hostlink.c), on the
 * NIC and on its port: NCCL takes the slower of a function's and its
 * parent's. */
static const char *const fn_link[] = {
    "current_link_speed", "current_link_width", "max_link_speed", "max_link_width",
};
/* Where the process scheduler and NCCL look for the CPUs near a function:
 * the neighbouring GPU's. */
static const char *const fn_cpus[] = { "local_cpulist", "local_cpus" };
/* The class directories that gain entries: the NIC's bus, its RDMA device
 * and (where softnic's view names one) its verbs device. */
static const char *const classes[] = { "pci_bus", "infiniband", "infiniband_verbs" };

int ns_enter(char *err, size_t errlen)
{
    if (unshare(CLONE_NEWNS)) {
        ns_err(err, errlen, "cannot make a mount namespace (unshare: %s): it needs root "
               "(CAP_SYS_ADMIN)", strerror(errno));
        return -1;
    }
    /* nothing mounted from here on may propagate to the host's namespace */
    if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
        ns_err(err, errlen, "cannot make the mounts private (mount /: %s)", strerror(errno));
        return -1;
    }
    return 0;
}

static void mounted(struct ns_ctx *c, const char *at)
{
    snprintf(c->mounts[c->nmounts++], PATH_MAX, "%s", at);
}

void ns_undo(struct ns_ctx *c)
{
    while (c->nmounts > 0)
        umount2(c->mounts[--c->nmounts], MNT_DETACH);
}

/* One entry of the real directory (at its staging path src) as it was,
 * at dst on the tmpfs. */
static int restore_entry(const char *src, const char *dst, char *err, size_t errlen)
{
    struct stat st;
    if (lstat(src, &st)) {
        ns_err(err, errlen, "cannot read %s: %s", src, strerror(errno));
        return -1;
    }
    if (S_ISLNK(st.st_mode))
        return ns_copy_link(src, dst, err, errlen);
    if (S_ISREG(st.st_mode))
        return ns_copy_file(src, dst, st.st_mode, err, errlen);
    if (!S_ISDIR(st.st_mode))
        return 0; /* sysfs holds nothing else */
    if (mkdir(dst, st.st_mode & 07777)) {
        ns_err(err, errlen, "cannot make %s: %s", dst, strerror(errno));
        return -1;
    }
    if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL)) {
        ns_err(err, errlen, "cannot bind %s onto %s: %s", src, dst, strerror(errno));
        return -1;
    }
    return 0;
}

/* dir as a tmpfs holding what it held. */
static int overlay(struct ns_ctx *c, const char *dir, char *err, size_t errlen)
{
    char stage[PATH_MAX], opts[32];
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
        ns_err(err, errlen, "%s is not a directory", dir);
        return -1;
    }
    if (c->nmounts == (int)(sizeof(c->mounts) / sizeof(c->mounts[0]))) {
        ns_err(err, errlen, "more than %d directories to overlay", NS_MAX_OVERLAYS);
        return -1;
    }
    if (ns_path(stage, sizeof(stage), err, errlen, "%s/%d", c->stage, c->nstage++))
        return -1;
    if (mkdir(stage, 0700) || mount(dir, stage, NULL, MS_BIND | MS_REC, NULL)) {
        ns_err(err, errlen, "cannot bind %s onto %s: %s", dir, stage, strerror(errno));
        return -1;
    }
    snprintf(opts, sizeof(opts), "mode=%04o", (unsigned)(st.st_mode & 07777));
    if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts)) {
        ns_err(err, errlen, "cannot mount a tmpfs on %s: %s", dir, strerror(errno));
        return -1;
    }
    mounted(c, dir);
    DIR *d = opendir(stage);
    if (!d) {
        ns_err(err, errlen, "cannot list %s (the real %s): %s", stage, dir, strerror(errno));
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        char src[PATH_MAX], dst[PATH_MAX];
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        rc = ns_path(src, sizeof(src), err, errlen, "%s/%s", stage, e->d_name) ||
             ns_path(dst, sizeof(dst), err, errlen, "%s/%s", dir, e->d_name) ||
             restore_entry(src, dst, err, errlen) ? -1 : 0;
    }
    closedir(d);
    return rc;
}

/* A copy of the view's class/<cls>/<name> at <fn>/<cls>/<name>, its
 * `device` a link to the function, as the kernel makes them. */
static int class_dir(struct ns_ctx *c, const char *fn, const char *cls, const char *name,
                     char *err, size_t errlen)
{
    char src[PATH_MAX], dst[PATH_MAX], link[PATH_MAX];
    if (ns_path(src, sizeof(src), err, errlen, "%s/class/%s/%s", c->view, cls, name) ||
        ns_path(dst, sizeof(dst), err, errlen, "%s/%s", fn, cls) ||
        ns_path(link, sizeof(link), err, errlen, "%s/%s/%s/device", fn, cls, name))
        return -1;
    if (mkdir(dst, 0755) && errno != EEXIST) {
        ns_err(err, errlen, "cannot make %s: %s", dst, strerror(errno));
        return -1;
    }
    if (ns_path(dst, sizeof(dst), err, errlen, "%s/%s/%s", fn, cls, name) ||
        ns_copy_tree(src, dst, "device", err, errlen))
        return -1;
    if (symlink("../../", link)) {
        ns_err(err, errlen, "cannot make the link %s: %s", link, strerror(errno));
        return -1;
    }
    return 0;
}

static int make_dir(const char *dir, char *err, size_t errlen)
{
    if (mkdir(dir, 0755)) {
        ns_err(err, errlen, "cannot make %s: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* path -> the relative text of a link at a depth of `up` directories
 * below /sys: "../" up times, then path without "/sys/". */
static int sys_link(const char *at, int up, const char *path, char *err, size_t errlen)
{
    char target[PATH_MAX];
    size_t n = 0;
    for (int i = 0; i < up && n + 3 < sizeof(target); i++, n += 3)
        memcpy(target + n, "../", 3);
    if (ns_path(target + n, sizeof(target) - n, err, errlen, "%s", path + strlen("/sys/")))
        return -1;
    if (symlink(target, at)) {
        ns_err(err, errlen, "cannot make the link %s: %s", at, strerror(errno));
        return -1;
    }
    return 0;
}

/* A function directory dir under /sys/devices: its identity, the view's
 * link of device v, its NUMA node and CPUs (the neighbouring GPU's), and
 * its `subsystem` link to /sys/bus/pci, by which NCCL tells a PCI device
 * from a virtual one. */
static int make_fn(struct ns_ctx *c, const struct ns_dev *v, const char *dir, int nic,
                   char *err, size_t errlen)
{
    char path[PATH_MAX], src[PATH_MAX], line[256];
    if (make_dir(dir, err, errlen))
        return -1;
    for (size_t i = 0; i < sizeof(fn_ident) / sizeof(fn_ident[0]); i++)
        if (ns_path(path, sizeof(path), err, errlen, "%s/%s", dir, fn_ident[i].name) ||
            ns_write_file(path, nic ? fn_ident[i].nic : fn_ident[i].port, err, errlen))
            return -1;
    for (size_t i = 0; i < sizeof(fn_link) / sizeof(fn_link[0]); i++) {
        if (ns_path(src, sizeof(src), err, errlen, "%s/class/infiniband/%s/device/%s", c->view,
                    v->name, fn_link[i]) ||
            ns_read_line(src, line, sizeof(line) - 1, err, errlen) ||
            ns_path(path, sizeof(path), err, errlen, "%s/%s", dir, fn_link[i]))
            return -1;
        strcat(line, "\n");
        if (ns_write_file(path, line, err, errlen))
            return -1;
    }
    snprintf(line, sizeof(line), "-1");
    if (v->near[0] && (ns_path(src, sizeof(src), err, errlen, "%s/numa_node", v->near) ||
                       ns_read_line(src, line, sizeof(line) - 1, err, errlen)))
        return -1;
    strcat(line, "\n");
    if (ns_path(path, sizeof(path), err, errlen, "%s/numa_node", dir) ||
        ns_write_file(path, line, err, errlen))
        return -1;
    for (size_t i = 0; v->near[0] && i < sizeof(fn_cpus) / sizeof(fn_cpus[0]); i++) {
        if (ns_path(src, sizeof(src), err, errlen, "%s/%s", v->near, fn_cpus[i]) ||
            ns_path(path, sizeof(path), err, errlen, "%s/%s", dir, fn_cpus[i]))
            return -1;
        if (ns_exists(src) && ns_copy_file(src, path, 0444, err, errlen))
            return -1;
    }
    int depth = 0;
    for (const char *p = dir + strlen("/sys"); *p; p++)
        depth += *p == '/';
    if (ns_path(path, sizeof(path), err, errlen, "%s/subsystem", dir))
        return -1;
    return sys_link(path, depth, "/sys/bus/pci", err, errlen);
}

/* v's port, with the directory of its secondary bus, and the NIC behind
 * it with its class directories; the second function of a dual-port NIC
 * only the function, beside the first. */
static int make_device(struct ns_ctx *c, const struct ns_dev *v, char *err, size_t errlen)
{
    char port[PATH_MAX], nic[PATH_MAX], pci_bus[PATH_MAX], bus[PATH_MAX], uv[32];
    if (ns_path(port, sizeof(port), err, errlen, "%s/%s", v->parent, v->port) ||
        ns_path(nic, sizeof(nic), err, errlen, "%s/%s", port, v->bdf) ||
        ns_path(pci_bus, sizeof(pci_bus), err, errlen, "%s/pci_bus", port) ||
        ns_path(bus, sizeof(bus), err, errlen, "%s/%.7s", pci_bus, v->bdf))
        return -1;
    if (v->fn == 0 && (make_fn(c, v, port, 0, err, errlen) || make_dir(pci_bus, err, errlen) ||
                       make_dir(bus, err, errlen)))
        return -1;
    if (make_fn(c, v, nic, 1, err, errlen) || class_dir(c, nic, "infiniband", v->name, err, errlen))
        return -1;
    snprintf(uv, sizeof(uv), "uverbs%d", v->uverbs);
    return v->uverbs >= 0 ? class_dir(c, nic, "infiniband_verbs", uv, err, errlen) : 0;
}

/* /sys/class/<cls>/<name> -> ../../devices/.../<cls>/<name> under dir */
static int class_link(const char *cls, const char *name, const char *dir, char *err,
                      size_t errlen)
{
    char link[PATH_MAX], target[PATH_MAX];
    if (ns_path(link, sizeof(link), err, errlen, "/sys/class/%s/%s", cls, name) ||
        ns_path(target, sizeof(target), err, errlen, "%s/%s/%s", dir, cls, name))
        return -1;
    return sys_link(link, 2, target, err, errlen);
}

/* The links of v's bus and devices in /sys/class. */
static int class_links(const struct ns_dev *v, char *err, size_t errlen)
{
    char port[PATH_MAX], nic[PATH_MAX], bus[8], uv[32], link[PATH_MAX];
    snprintf(bus, sizeof(bus), "%.7s", v->bdf);
    if (ns_path(port, sizeof(port), err, errlen, "%s/%s", v->parent, v->port) ||
        ns_path(nic, sizeof(nic), err, errlen, "%s/%s", port, v->bdf) ||
        (v->fn == 0 && class_link("pci_bus", bus, port, err, errlen)) ||
        class_link("infiniband", v->name, nic, err, errlen))
        return -1;
    if (v->uverbs < 0)
        return 0;
    snprintf(uv, sizeof(uv), "uverbs%d", v->uverbs);
    snprintf(link, sizeof(link), "/sys/class/infiniband_verbs/%s", uv);
    /* the host's own uverbs<i> keeps its name; softnic's is left out */
    return ns_exists(link) ? 0 : class_link("infiniband_verbs", uv, nic, err, errlen);
}

static int by_length(const void *a, const void *b)
{
    size_t x = strlen(*(const char *const *)a), y = strlen(*(const char *const *)b);
    return x < y ? -1 : x > y;
}

/* The class directories, overlaid; those the host lacks are made in an
 * overlay of /sys/class, where the others are then bind mounts, overlaid
 * in turn. */
static int overlay_classes(struct ns_ctx *c, char *err, size_t errlen)
{
    enum { NCLASSES = sizeof(classes) / sizeof(classes[0]) };
    char dir[NCLASSES][64];
    int had[NCLASSES], all = 1;
    for (int k = 0; k < NCLASSES; k++) {
        snprintf(dir[k], sizeof(dir[k]), "/sys/class/%s", classes[k]);
        all &= had[k] = ns_exists(dir[k]);
    }
    if (!all && overlay(c, "/sys/class", err, errlen))
        return -1;
    for (int k = 0; k < NCLASSES; k++)
        if (had[k] ? overlay(c, dir[k], err, errlen) : make_dir(dir[k], err, errlen))
            return -1;
    return 0;
}

int ns_build(struct ns_ctx *c, char *err, size_t errlen)
{
    if (mount("tmpfs", c->stage, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700")) {
        ns_err(err, errlen, "cannot mount a tmpfs on %s: %s", c->stage, strerror(errno));
        return -1;
    }
    mounted(c, c->stage);
    /* each parent once; a parent above another first, so that the lower
     * one is overlaid in the directory the upper overlay bound back */
    const char *parents[NS_MAX_DEVS];
    int np = 0;
    for (int i = 0; i < c->ndevs; i++) {
        int seen = 0;
        for (int k = 0; k < np; k++)
            seen |= !strcmp(parents[k], c->dev[i].parent);
        if (!seen)
            parents[np++] = c->dev[i].parent;
    }
    qsort(parents, (size_t)np, sizeof(parents[0]), by_length);
    for (int k = 0; k < np; k++)
        if (overlay(c, parents[k], err, errlen))
            return -1;
    if (overlay_classes(c, err, errlen))
        return -1;
    for (int i = 0; i < c->ndevs; i++)
        if (make_device(c, &c->dev[i], err, errlen) || class_links(&c->dev[i], err, errlen))
            return -1;
    /* the real directories were needed only to copy from */
    if (umount2(c->stage, MNT_DETACH)) {
        ns_err(err, errlen, "cannot unmount %s: %s", c->stage, strerror(errno));
        return -1;
    }
    return 0;
}
