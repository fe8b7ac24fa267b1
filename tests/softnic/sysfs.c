/* sysfs.c: with SOFTNIC_SYSFS=<dir>, a /sys-like view of the devices is
 * written at start under <dir>/class/infiniband/<dev>/ (node_guid,
 * node_type, fw_ver, hca_type, device/{vendor,device,current_link_speed,
 * current_link_width,max_link_*} -- the PCIe link of hostlink.c --,
 * ports/<n>/{state,phys_state,rate,
 * link_layer,lid,gids/0,gid_attrs/types/0,gid_attrs/ndevs/0,pkeys/0}) and
 * <dir>/class/infiniband_verbs/uverbs<i>/{ibdev,abi_version}, so that
 * device discovery that reads sysfs can be tested.  The port state files
 * are the state at start.
 *
 * With SOFTNIC_PCI_LAYOUT=rail or shared, device i of n sits on a PCIe
 * switch of its own, as on a rail-optimized node, under
 * <dir>/devices/pci0000:00/ (R = n - i, B = 0x10 * R, bus numbers in hex):
 *
 *   0000:00:0R.0                      root port
 *     0000:B:00.0                     the switch's upstream port
 *       0000:B+1:00.0/0000:B+2:00.0   a downstream port, the NIC's function
 *       0000:B+1:01.0/0000:B+3:00.0   a downstream port, a GPU
 *       0000:B+1:02.0/0000:B+4:00.0   "shared" only: a second GPU
 *
 * each function with its vendor, device and class files (a GPU: 0x10de,
 * 0x2335, 0x030200), and <dir>/bus/pci/devices/<bdf> a link to each, as
 * sysfs's.  class/infiniband/<dev>/device is then a link to the NIC's
 * function, which holds the files the directory holds without a layout.
 * The devices are placed from the last one down, so that the GPUs' bus
 * order is not the devices' order: with "rail", device i's GPU is the
 * host's GPU n-1-i in bus order. */
#include "softnic.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void mkdirs(const char *path)
{
    char tmp[1024];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(tmp, 0755);
            *p = '/';
        }
    mkdir(tmp, 0755);
}

static void put(const char *dir, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void put(const char *dir, const char *name, const char *fmt, ...)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    /* the ranks of a job write one view at once: each file appears whole
     * (rename), so a reader never sees one truncated by another writer;
     * a hidden, unique name until then */
    char tmp[1100];
    char *slash = strrchr(path, '/');
    *slash = '\0';
    mkdirs(path);
    snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", path, slash + 1);
    *slash = '/';
    int fd = mkstemp(tmp);
    FILE *f = fd >= 0 && fchmod(fd, 0644) == 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        SN_LOG("sysfs: cannot write %s: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    if (fclose(f) || rename(tmp, path)) {
        SN_LOG("sysfs: cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
    }
}

/* dir/name as a symbolic link to target, made whole as put() makes a file:
 * under a hidden, unique name, then renamed over what is there (the same
 * link, made by another rank). */
static void put_link(const char *dir, const char *name, const char *target)
{
    char path[1024], tmp[1100];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    mkdirs(dir);
    int made = 0;
    for (int tries = 0; !made && tries < 16; tries++) {
        snprintf(tmp, sizeof(tmp), "%s/.%s.%d.%llx", dir, name, (int)getpid(),
                 (unsigned long long)sn_now_ns() + (unsigned)tries);
        made = symlink(target, tmp) == 0;
        if (!made && errno != EEXIST)
            break;
    }
    if (!made) {
        SN_LOG("sysfs: cannot link %s: %s", path, strerror(errno));
        return;
    }
    if (rename(tmp, path)) {
        SN_LOG("sysfs: cannot link %s: %s", path, strerror(errno));
        unlink(tmp);
    }
}

/* The identity and PCIe link of device d's NIC function, into dir. */
static void nic_function_files(struct softnic *s, struct sn_device *d, const char *dir)
{
    put(dir, "vendor", "0x1de5\n");
    put(dir, "device", "0x5001\n");
    struct sn_host_link hl;
    char gts[32];
    hostlink_of_device(&s->conf, d, &hl);
    hostlink_speed_string(&hl, gts, sizeof(gts));
    put(dir, "current_link_speed", "%s\n", gts);
    put(dir, "current_link_width", "%u\n", hl.width);
    put(dir, "max_link_speed", "%s\n", gts);
    put(dir, "max_link_width", "%u\n", hl.width);
}

/* A PCI function at <root>/devices/<path>: its vendor, device and class
 * files, and its link <root>/bus/pci/devices/<bdf>. */
static void pci_function(const char *root, const char *path, const char *vendor, const char *device,
                         const char *class)
{
    char dir[1024], links[1024], target[1024];
    snprintf(dir, sizeof(dir), "%s/devices/%s", root, path);
    put(dir, "vendor", "%s\n", vendor);
    put(dir, "device", "%s\n", device);
    put(dir, "class", "%s\n", class);
    snprintf(links, sizeof(links), "%s/bus/pci/devices", root);
    snprintf(target, sizeof(target), "../../../devices/%s", path);
    put_link(links, strrchr(path, '/') + 1, target);
}

/* Device i's switch, its NIC and GPUs (the layout above). */
static void pci_switch(struct softnic *s, int i)
{
    const char *root = s->conf.sysfs_dir;
    struct sn_device *d = &s->dev[i];
    int r = s->ndevs - i, b = 0x10 * r;
    int gpus = s->conf.pci_layout == SN_PCI_SHARED ? 2 : 1;
    char rp[64], up[96], down[128], fn[160];
    snprintf(rp, sizeof(rp), "pci0000:00/0000:00:%02x.0", r);
    pci_function(root, rp, "0x8086", "0x347a", "0x060400");
    snprintf(up, sizeof(up), "%s/0000:%02x:00.0", rp, b);
    pci_function(root, up, "0x1000", "0xc030", "0x060400");
    for (int k = 0; k <= gpus; k++) {
        snprintf(down, sizeof(down), "%s/0000:%02x:%02x.0", up, b + 1, k);
        pci_function(root, down, "0x1000", "0xc030", "0x060400");
        snprintf(fn, sizeof(fn), "%s/0000:%02x:00.0", down, b + 2 + k);
        if (k > 0) {
            pci_function(root, fn, "0x10de", "0x2335", "0x030200");
            continue;
        }
        pci_function(root, fn, "0x1de5", "0x5001", "0x020000");
        char dir[1024], target[1024];
        snprintf(dir, sizeof(dir), "%s/devices/%s", root, fn);
        nic_function_files(s, d, dir);
        snprintf(target, sizeof(target), "../../../devices/%s", fn);
        put_link(d->ibdev.ibdev_path, "device", target);
    }
}

void sysfs_write_tree(struct softnic *s)
{
    for (int i = 0; i < s->ndevs; i++) {
        struct sn_device *d = &s->dev[i];
        const char *dir = d->ibdev.ibdev_path;
        uint64_t g = be64toh(d->guid);
        char guid[32];
        snprintf(guid, sizeof(guid), "%04x:%04x:%04x:%04x", (unsigned)(g >> 48) & 0xffff,
                 (unsigned)(g >> 32) & 0xffff, (unsigned)(g >> 16) & 0xffff, (unsigned)g & 0xffff);
        put(dir, "node_guid", "%s\n", guid);
        put(dir, "sys_image_guid", "%s\n", guid);
        put(dir, "node_type", "1: CA\n");
        put(dir, "fw_ver", "1.0.0\n");
        put(dir, "hca_type", "softnic\n");
        put(dir, "board_id", "SOFTNIC\n");
        if (s->conf.pci_layout == SN_PCI_NONE) {
            char fn[1024];
            snprintf(fn, sizeof(fn), "%s/device", dir);
            nic_function_files(s, d, fn);
        } else {
            pci_switch(s, i);
        }
        for (int p = 0; p < d->nports; p++) {
            struct sn_port *port = &d->port[p];
            char pdir[1024];
            snprintf(pdir, sizeof(pdir), "%s/ports/%d", dir, port->num);
            bool up = atomic_load(&port->state) == IBV_PORT_ACTIVE;
            put(pdir, "state", up ? "4: ACTIVE\n" : "1: DOWN\n");
            put(pdir, "phys_state", up ? "5: LinkUp\n" : "3: Disabled\n");
            uint8_t width, speed;
            char rate[64];
            link_of_port(&s->conf, port, &width, &speed);
            link_rate_string(width, speed, rate, sizeof(rate));
            put(pdir, "rate", "%s\n", rate);
            put(pdir, "link_layer", "Ethernet\n");
            put(pdir, "lid", "0x0\n");
            put(pdir, "sm_lid", "0x0\n");
            put(pdir, "cap_mask", "0x04010000\n");
            char gid[64];
            const uint8_t *r = port->gid.raw;
            snprintf(gid, sizeof(gid),
                     "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
                     r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11],
                     r[12], r[13], r[14], r[15]);
            put(pdir, "gids/0", "%s\n", gid);
            put(pdir, "gid_attrs/types/0", "RoCE v2\n");
            put(pdir, "gid_attrs/ndevs/0", "lo\n");
            put(pdir, "pkeys/0", "0xffff\n");
        }
        char vdir[1024];
        snprintf(vdir, sizeof(vdir), "%s", d->ibdev.dev_path);
        put(vdir, "ibdev", "%s\n", d->ibdev.name);
        put(vdir, "abi_version", "1\n");
    }
}
