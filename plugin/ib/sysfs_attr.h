/* plugin/ib/sysfs_attr.h: one attribute file of sysfs (or of a tree laid
 * out like it, such as softnic's SOFTNIC_SYSFS view), read as text.
 * Layer: base (files only, logs nothing). */
#ifndef RAILNET_IB_SYSFS_ATTR_H
#define RAILNET_IB_SYSFS_ATTR_H

#include <stddef.h>

/* The first line of <dir>/<name> into buf (len bytes), its newline cut;
 * 0, or -1 when the path is too long or the file cannot be read. */
int sysfs_attr_read(const char *dir, const char *name, char *buf, size_t len);

#endif
