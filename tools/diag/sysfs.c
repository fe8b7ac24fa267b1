/* tools/diag/sysfs.c: file access under the sysfs/proc roots (see sysfs.h). */
#include "config.h"

#include "../common/strfmt.h"
#include "sysfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int path_read(const char *path, char *buf, size_t len)
{
    if (len == 0)
        return EINVAL;
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    ssize_t n;
    do
        n = read(fd, buf, len - 1);
    while (n < 0 && errno == EINTR);
    int err = n < 0 ? errno : 0;
    close(fd);
    if (err)
        return err;
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    return 0;
}

char *path_join(char *buf, size_t len, const char *a, const char *b)
{
    if (strlen(a) + 1 + strlen(b) >= len) {
        buf[0] = '\0'; /* an empty path opens nothing: the caller sees ENOENT */
        return buf;
    }
    str_fmt(buf, len, "%s/%s", a, b);
    return buf;
}

int sys_read(const struct diag_roots *roots, const char *rel, char *buf, size_t len)
{
    char p[PATH_MAX];
    return path_read(path_join(p, sizeof(p), roots->sys, rel), buf, len);
}

int proc_read(const struct diag_roots *roots, const char *rel, char *buf, size_t len)
{
    char p[PATH_MAX];
    return path_read(path_join(p, sizeof(p), roots->proc, rel), buf, len);
}

int path_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static int is_bdf(const char *s)
{
    unsigned dom, bus, dev, fn;
    char tail;
    return strlen(s) == 12 && sscanf(s, "%4x:%2x:%2x.%1x%c", &dom, &bus, &dev, &fn, &tail) == 4;
}

static unsigned read_hex(const char *dir, const char *name)
{
    char p[PATH_MAX], buf[64];
    if (path_read(path_join(p, sizeof(p), dir, name), buf, sizeof(buf)))
        return 0;
    return (unsigned)strtoul(buf, NULL, 16);
}

int pci_fn_load(const char *dir, struct pci_fn *fn)
{
    memset(fn, 0, sizeof(*fn));
    fn->numa_node = -1;
    if (!realpath(dir, fn->dir))
        return errno;
    const char *base = strrchr(fn->dir, '/');
    base = base ? base + 1 : fn->dir;
    if (!is_bdf(base))
        return ENODEV;
    str_fmt(fn->bdf, sizeof(fn->bdf), "%s", base);

    /* The host bridge is the last "pciDDDD:BB" component; the PCI functions
     * below it form the chain. Components in between that are not PCI
     * functions (a VMBus or ACPI node in some guests) end the chain. */
    char tmp[PATH_MAX];
    str_fmt(tmp, sizeof(tmp), "%s", fn->dir);
    size_t len = strlen(tmp);
    size_t hb_end = 0;
    for (size_t i = 0; i < len; i++) {
        if (tmp[i] == '/' && !strncmp(tmp + i + 1, "pci", 3) && strchr(tmp + i + 1, ':')) {
            const char *end = strchr(tmp + i + 1, '/');
            size_t clen = end ? (size_t)(end - (tmp + i + 1)) : strlen(tmp + i + 1);
            if (clen >= 9 && clen <= 12 && tmp[i + 1 + 7] == ':')
                hb_end = end ? (size_t)(end - tmp) : len;
        }
    }
    if (hb_end) {
        str_fmt(fn->host_bridge, sizeof(fn->host_bridge), "%.*s", (int)hb_end, tmp);
        size_t pos = hb_end;
        while (pos < len && fn->nchain < PCI_CHAIN_MAX) {
            const char *comp = tmp + pos + 1;
            const char *end = strchr(comp, '/');
            size_t clen = end ? (size_t)(end - comp) : strlen(comp);
            char name[64];
            str_fmt(name, sizeof(name), "%.*s", (int)(clen < 63 ? clen : 63), comp);
            if (!is_bdf(name)) {
                fn->nchain = 0; /* not a plain PCI path: keep only self */
                break;
            }
            str_fmt(fn->chain[fn->nchain], sizeof(fn->chain[0]), "%s", name);
            str_fmt(fn->chain_dir[fn->nchain], sizeof(fn->chain_dir[0]), "%.*s",
                     (int)(pos + 1 + clen), tmp);
            fn->nchain++;
            pos += 1 + clen;
        }
    }
    if (fn->nchain == 0) {
        str_fmt(fn->chain[0], sizeof(fn->chain[0]), "%s", fn->bdf);
        str_fmt(fn->chain_dir[0], sizeof(fn->chain_dir[0]), "%s", fn->dir);
        fn->nchain = 1;
    }
    fn->vendor = read_hex(fn->dir, "vendor");
    fn->device = read_hex(fn->dir, "device");
    fn->class_code = read_hex(fn->dir, "class");
    char p[PATH_MAX], buf[32];
    if (!path_read(path_join(p, sizeof(p), fn->dir, "numa_node"), buf, sizeof(buf)))
        fn->numa_node = atoi(buf);
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int pci_find_gpus(const struct diag_roots *roots, struct pci_fn *out, int max)
{
    char dirpath[PATH_MAX];
    DIR *d = opendir(path_join(dirpath, sizeof(dirpath), roots->sys, "bus/pci/devices"));
    if (!d)
        return 0;
    char *names[256];
    int nn = 0;
    struct dirent *de;
    while ((de = readdir(d)) && nn < 256)
        if (de->d_name[0] != '.' && (names[nn] = strdup(de->d_name)))
            nn++;
    closedir(d);
    qsort(names, (size_t)nn, sizeof(names[0]), cmp_str);
    int n = 0;
    for (int i = 0; i < nn; i++) {
        char p[PATH_MAX];
        if (n < max && !pci_fn_load(path_join(p, sizeof(p), dirpath, names[i]), &out[n]) &&
            out[n].vendor == 0x10de && (out[n].class_code >> 16) == 0x03)
            n++;
        free(names[i]);
    }
    return n;
}
