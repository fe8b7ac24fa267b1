/* plugin/ib/hostlink.c: a device's PCIe link from sysfs (hostlink.h). */
#include "hostlink.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "railnet_pcie.h"
#include "sysfs_attr.h"

uint64_t hostlink_parse_mbps(const char *speed, const char *width)
{
    if (!speed || !width)
        return 0;
    const char *end;
    unsigned long long tenths;
    if (parse_tenths_prefix(speed, 10000, &tenths, &end))
        return 0;
    while (*end == ' ')
        end++;
    if (tenths == 0 || strncmp(end, "GT/s", 4) != 0)
        return 0;
    char *wend;
    long w = strtol(width, &wend, 10);
    while (*wend == ' ' || *wend == '\n')
        wend++;
    if (wend == width || *wend || w < 1 || w > 32)
        return 0;
    return railnet_pcie_mbps((unsigned)tenths, (unsigned)w);
}

uint64_t hostlink_mbps(const char *pci_path, char *desc, size_t desclen)
{
    char speed[64], width[16];
    if (!pci_path || sysfs_attr_read(pci_path, "current_link_speed", speed, sizeof(speed)) ||
        sysfs_attr_read(pci_path, "current_link_width", width, sizeof(width)))
        return 0;
    uint64_t m = hostlink_parse_mbps(speed, width);
    if (m && desc) {
        size_t n = strcspn(speed, "P"); /* "16.0 GT/s PCIe": the rate alone */
        while (n > 0 && speed[n - 1] == ' ')
            n--;
        snprintf(desc, desclen, "%.*s x%s", (int)n, speed, width);
    }
    return m;
}
