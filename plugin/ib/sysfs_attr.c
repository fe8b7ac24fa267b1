/* plugin/ib/sysfs_attr.c: reading one sysfs attribute (sysfs_attr.h). */
#include "sysfs_attr.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

int sysfs_attr_read(const char *dir, const char *name, char *buf, size_t len)
{
    char path[PATH_MAX + 16];
    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
        return -1;
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}
