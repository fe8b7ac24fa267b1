/* sysfs.c: with SOFTNIC_SYSFS=<dir>, a /sys-like view of the devices is
 * written at start under <dir>/class/infiniband/<dev>/ (node_guid,
 * node_type, fw_ver, hca_type, device/{vendor,device,current_link_speed,
 * current_link_width,max_link_*} -- the PCIe link of hostlink.c --,
 * ports/<n>/{state,phys_state,rate,
 * link_layer,lid,gids/0,gid_attrs/types/0,gid_attrs/ndevs/0,pkeys/0}) and
 * <dir>/class/infiniband_verbs/uverbs<i>/{ibdev,abi_version}, so that
 * device discovery that reads sysfs can be tested.  The port state files
 * are the state at start. */
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
        put(dir, "device/vendor", "0x1de5\n");
        put(dir, "device/device", "0x5001\n");
        struct sn_host_link hl;
        char gts[32];
        hostlink_of_device(&s->conf, d, &hl);
        hostlink_speed_string(&hl, gts, sizeof(gts));
        put(dir, "device/current_link_speed", "%s\n", gts);
        put(dir, "device/current_link_width", "%u\n", hl.width);
        put(dir, "device/max_link_speed", "%s\n", gts);
        put(dir, "device/max_link_width", "%u\n", hl.width);
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
