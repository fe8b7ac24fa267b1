/* tests/softnic/sysfs_ns.h: softnic-sysfs-ns runs a command in a private
 * mount namespace whose /sys shows each softnic device as a PCI function
 * (a ConnectX-like NIC behind a port of its own beside a GPU, or on the
 * first PCI root), so that programs that find a NIC's place in the PCI
 * tree from realpath(/sys/class/infiniband/<dev>/device) -- NCCL's own IB
 * transport, NVIDIA's SHARP plugin -- place softnic's devices as they
 * place a real one.
 *
 * Contract: every function returns 0, or -1 with err filled (a sentence
 * without the program's name, which main() adds). ns_place_* only read
 * /sys and the view; ns_enter and ns_build mount, and run only in the
 * child that has entered its own namespace, so that no mount is ever seen
 * by another process. */
#ifndef RAILNET_SOFTNIC_SYSFS_NS_H
#define RAILNET_SOFTNIC_SYSFS_NS_H

#include <limits.h>
#include <stddef.h>

#define NS_PROG "softnic-sysfs-ns"
#define NS_MAX_DEVS 16
#define NS_NAME_MAX 64
/* sysfs directories overlaid: the ports' parents, /sys/class and three classes */
#define NS_MAX_OVERLAYS (NS_MAX_DEVS + 4)
#define NS_MAX_GPUS 64

enum ns_placement { NS_PLACE_AUTO, NS_PLACE_NEAR_GPU, NS_PLACE_ROOT };

/* Device i's place: a PCI bridge (a root or downstream port) in parent,
 * on parent's bus, and the NIC function behind it on a bus of its own, as
 * a NIC sits in a server. The NIC's device number is 00: NCCL's IB
 * transport merges a NIC's virtual functions by zeroing the device number
 * of its path (NCCL_IB_MERGE_VFS), and takes a function's grandparent for
 * its switch, so a sibling function of the GPU would be merged with
 * 00:00.0 of its bus, while a port beside the GPU's port shares its switch. */
struct ns_dev {
    char name[NS_NAME_MAX];  /* the RDMA device name softnic reports */
    int uverbs;              /* its index in the view's infiniband_verbs, -1 if none */
    char parent[PATH_MAX];   /* the sysfs directory its port goes into */
    char port[16];           /* the bridge, "DDDD:BB:SS.0" on parent's bus */
    char bdf[16];            /* the NIC behind it, "DDDD:NB:00.0" (".1": fn 1) */
    char near[PATH_MAX];     /* the GPU function it sits beside, "" on a root */
    int fn;                  /* bdf's function: 1 for the second port of a --dual-port NIC */
};

struct ns_ctx {
    enum ns_placement placement;
    int keep_going;
    int dual_port;              /* devices 2k and 2k+1 as functions .0 and .1 of one NIC */
    char **cmd;                 /* argv of the command, NULL-terminated */
    char tmp[PATH_MAX];         /* the mkdtemp directory */
    char view[PATH_MAX];        /* tmp/view: softnic's SOFTNIC_SYSFS view */
    char stage[PATH_MAX];       /* tmp/stage: the real directories, inside the namespace */
    int ndevs;
    struct ns_dev dev[NS_MAX_DEVS];
    int nstage;                 /* staging directories made so far */
    int nmounts;                /* top-level mounts made, for ns_undo */
    char mounts[NS_MAX_OVERLAYS + 1][PATH_MAX]; /* the overlays and the staging tmpfs */
};

/* sysfs_ns_fs.c: messages, paths and files */
/* err as vsnprintf writes it; a message too long is cut. */
void ns_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* out as vsnprintf writes it; -1 (err filled) when it does not fit. */
int ns_path(char *out, size_t len, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* The first line of a small file without its newline; -1 (err filled) if unreadable. */
int ns_read_line(const char *path, char *buf, size_t len, char *err, size_t errlen);
int ns_write_file(const char *path, const char *text, char *err, size_t errlen);
/* src's content (an unreadable file gives an empty one) into a new file
 * dst with mode. */
int ns_copy_file(const char *src, const char *dst, unsigned mode, char *err, size_t errlen);
/* The symlink src as a new symlink dst with the same text. */
int ns_copy_link(const char *src, const char *dst, char *err, size_t errlen);
/* The tree under src (directories, files, symlinks as their text) into
 * the new directory dst, leaving out the top-level entry named skip. */
int ns_copy_tree(const char *src, const char *dst, const char *skip, char *err, size_t errlen);
int ns_exists(const char *path);
/* A name that may become one path component: no '/', not "." or "..",
 * no leading '.', printable, shorter than NS_NAME_MAX. */
int ns_name_ok(const char *name);
/* "DDDD:BB:SS.F" in lower-case hex. */
int ns_bdf_ok(const char *name);

/* sysfs_ns_place.c: the view's devices, and where each function goes */
int ns_place_read_view(struct ns_ctx *c, char *err, size_t errlen);
int ns_place_devices(struct ns_ctx *c, char *err, size_t errlen);

/* sysfs_ns_mount.c: inside the child */
int ns_enter(char *err, size_t errlen);
int ns_build(struct ns_ctx *c, char *err, size_t errlen);
/* Removes what ns_build mounted (after it failed). */
void ns_undo(struct ns_ctx *c);

#endif
