/* railnet_pcie.h: the data rate of a PCIe link, shared by the plugin (which
 * reads a NIC's link from sysfs, plugin/ib/hostlink.c) and softnic (which
 * describes the link its device stands for, tests/softnic/hostlink.c).
 *
 * A link is a transfer rate per lane, in tenths of GT/s as sysfs's
 * current_link_speed names it (25 = 2.5 GT/s ... 640 = 64 GT/s), times a
 * width in lanes.  Its data rate is that less the line encoding: 8b/10b up
 * to 5 GT/s (PCIe 1-2), 128b/130b at 8-32 GT/s (PCIe 3-5), and the 242/256
 * of a FLIT at 64 GT/s (PCIe 6).  Packet headers are not counted: this is
 * the ceiling a NIC's DMA cannot pass, not what it reaches. */
#ifndef RAILNET_PCIE_H
#define RAILNET_PCIE_H

#include <stdint.h>

/* Mb/s of data a link of gts_x10 tenths of GT/s per lane and `width` lanes
 * carries; 0 for a transfer rate PCIe does not define. */
static inline uint64_t railnet_pcie_mbps(unsigned gts_x10, unsigned width)
{
    uint64_t raw = (uint64_t)gts_x10 * 100 * width; /* Mb/s on the wire */
    switch (gts_x10) {
    case 25:
    case 50:
        return raw * 8 / 10;
    case 80:
    case 160:
    case 320:
        return raw * 128 / 130;
    case 640:
        return raw * 242 / 256;
    default:
        return 0;
    }
}

#endif
