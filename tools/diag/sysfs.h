/* tools/diag/sysfs.h: reading the host through a sysfs root and a proc root.
 *
 * Contract: every path a check reads is relative to the roots given on the
 * command line (default /sys and /proc), so that a fixture tree stands in for
 * a real host. Symlinks inside a fixture are relative, as in sysfs, and are
 * resolved with realpath(). A PCI function is described by struct pci_fn:
 * its BDF, its directory, and the chain of PCI functions from the host bridge
 * down to it (the bridges first, the function itself last). */
#ifndef RAILNET_TOOLS_DIAG_SYSFS_H
#define RAILNET_TOOLS_DIAG_SYSFS_H

#include <limits.h>
#include <stddef.h>

#define PCI_CHAIN_MAX 16

struct diag_roots {
    char sys[PATH_MAX];
    char proc[PATH_MAX];
};

struct pci_fn {
    char bdf[32];            /* "0000:3b:00.0" */
    char dir[PATH_MAX];      /* resolved sysfs directory */
    char host_bridge[PATH_MAX]; /* resolved ".../pci0000:3a" directory, "" if none */
    int nchain;              /* PCI functions from below the host bridge, self last */
    char chain[PCI_CHAIN_MAX][32]; /* their BDFs */
    char chain_dir[PCI_CHAIN_MAX][PATH_MAX];
    unsigned vendor, device, class_code;
    int numa_node;           /* -1 when unknown */
};

/* Reads a small text file; trailing newlines are removed. 0 or an errno. */
int path_read(const char *path, char *buf, size_t len);
/* Same, for a path relative to the sysfs or proc root. */
int sys_read(const struct diag_roots *roots, const char *rel, char *buf, size_t len);
int proc_read(const struct diag_roots *roots, const char *rel, char *buf, size_t len);
int path_exists(const char *path);
/* snprintf into buf, returning buf ("" on truncation). */
char *path_join(char *buf, size_t len, const char *a, const char *b);

/* Fills fn from a PCI function's sysfs directory (any path that resolves to
 * it). 0 or an errno. */
int pci_fn_load(const char *dir, struct pci_fn *fn);

/* Lists NVIDIA GPUs under <sys>/bus/pci/devices; returns how many were
 * stored (at most max). */
int pci_find_gpus(const struct diag_roots *roots, struct pci_fn *out, int max);

#endif
