/* tests/softnic/sysfs_ns_fs.c: bounded paths and the file copies
 * softnic-sysfs-ns makes (sysfs_ns.h). */
#include "sysfs_ns.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* sysfs attributes fit in a page; binary ones (config, vpd) in a few: a
 * file larger than this is not an attribute anything here needs. */
#define NS_COPY_MAX (1 << 20)
/* softnic's view is a few levels deep (ports/1/gid_attrs/types) */
#define NS_TREE_DEPTH 8

void ns_err(char *err, size_t errlen, const char *fmt, ...)
            {
            va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int ns_path(char *out, size_t len, char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= len) {
        ns_err(err, errlen, "path too long (%d bytes, at most %zu): %.80s...", n, len - 1, out);
        return -1;
    }
    return 0;
}

int ns_read_line(const char *path, char *buf, size_t len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        ns_err(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    buf[0] = '\0';
    if (!fgets(buf, (int)len, f) && ferror(f)) {
        ns_err(err, errlen, "cannot read %s: %s", path, strerror(errno));
        fclose(f);
        return -1;
    }
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

static int write_fd_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int write_new(const char *path, const char *data, size_t n, unsigned mode, char *err,
                     size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        ns_err(err, errlen, "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    /* the mode as given, whatever the umask */
    if (write_fd_all(fd, data, n) || fchmod(fd, mode & 07777) || close(fd)) {
        ns_err(err, errlen, "cannot write %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return 0;
}

int ns_write_file(const char *path, const char *text, char *err, size_t errlen)
{
    return write_new(path, text, strlen(text), 0444, err, errlen);
}

int ns_copy_file(const char *src, const char *dst, unsigned mode, char *err, size_t errlen)
{
    char *buf = malloc(NS_COPY_MAX);
    if (!buf) {
        ns_err(err, errlen, "out of memory copying %s", src);
        return -1;
    }
    size_t n = 0;
    /* write-only attributes (remove, rescan) and those the device refuses
     * to read (a memory BAR's resourceN) become empty files of their mode:
     * their name and mode is what a reader of the directory sees */
    int fd = open(src, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) {
        while (n < NS_COPY_MAX) {
            ssize_t r = read(fd, buf + n, NS_COPY_MAX - n);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                if (r < 0)
                    n = 0;
                break;
            }
            n += (size_t)r;
        }
        close(fd);
    }
    int rc = write_new(dst, buf, n, mode, err, errlen);
    free(buf);
    return rc;
}

int ns_copy_link(const char *src, const char *dst, char *err, size_t errlen)
{
    char text[PATH_MAX];
    ssize_t n = readlink(src, text, sizeof(text) - 1);
    if (n < 0) {
        ns_err(err, errlen, "cannot read the link %s: %s", src, strerror(errno));
        return -1;
    }
    text[n] = '\0';
    if (symlink(text, dst)) {
        ns_err(err, errlen, "cannot make the link %s: %s", dst, strerror(errno));
        return -1;
    }
    return 0;
}

static int copy_tree_at(const char *src, const char *dst, const char *skip, int depth, char *err,
                        size_t errlen)
{
    if (depth > NS_TREE_DEPTH) {
        ns_err(err, errlen, "%s is deeper than %d levels", src, NS_TREE_DEPTH);
        return -1;
    }
    struct stat st;
    if (stat(src, &st) || !S_ISDIR(st.st_mode)) {
        ns_err(err, errlen, "%s is not a directory", src);
        return -1;
    }
    if (mkdir(dst, st.st_mode & 07777) && errno != EEXIST) {
        ns_err(err, errlen, "cannot make %s: %s", dst, strerror(errno));
        return -1;
    }
    DIR *d = opendir(src);
    if (!d) {
        ns_err(err, errlen, "cannot list %s: %s", src, strerror(errno));
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
            (skip && !strcmp(e->d_name, skip)))
            continue;
        char s[PATH_MAX], t[PATH_MAX];
        if (ns_path(s, sizeof(s), err, errlen, "%s/%s", src, e->d_name) ||
            ns_path(t, sizeof(t), err, errlen, "%s/%s", dst, e->d_name)) {
            rc = -1;
        } else if (lstat(s, &st)) {
            ns_err(err, errlen, "cannot read %s: %s", s, strerror(errno));
            rc = -1;
        } else if (S_ISDIR(st.st_mode)) {
            rc = copy_tree_at(s, t, NULL, depth + 1, err, errlen);
        } else if (S_ISLNK(st.st_mode)) {
            rc = ns_copy_link(s, t, err, errlen);
        } else if (S_ISREG(st.st_mode)) {
            rc = ns_copy_file(s, t, st.st_mode, err, errlen);
        }
    }
    closedir(d);
    return rc;
}

int ns_copy_tree(const char *src, const char *dst, const char *skip, char *err, size_t errlen)
{
    return copy_tree_at(src, dst, skip, 0, err, errlen);
}

int ns_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

int ns_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= NS_NAME_MAX || name[0] == '.')
        return 0;
    for (const char *p = name; *p; p++)
        if (*p == '/' || !isgraph((unsigned char)*p))
            return 0;
    return 1;
}

int ns_bdf_ok(const char *name)
{
    static const char form[] = "hhhh:hh:hh.h";
    if (strlen(name) != sizeof(form) - 1)
        return 0;
    for (size_t i = 0; form[i]; i++) {
        char ch = name[i];
        if (form[i] == 'h' ? !(isdigit((unsigned char)ch) || (ch >= 'a' && ch <= 'f'))
                           : ch != form[i])
            return 0;
    }
    return 1;
}
