/* plugin/ib/hostlink.h: the PCIe link between an RDMA device and host
 * memory, from sysfs.
 *
 * The ports of one NIC share that link: railnet's device (its ports merged
 * or not) advertises to NCCL no more than the link carries (devices.c).
 * NCCL caps a NIC by its PCIe link only where its topology can place the
 * NIC on a PCI path; a merged device's summed speed, or a NIC without such
 * a path (softnic), would otherwise promise more than the host moves and
 * steer NCCL to plans for that speed (issue 16). */
#ifndef RAILNET_HOSTLINK_H
#define RAILNET_HOSTLINK_H

#include <stddef.h>
#include <stdint.h>

/* Mb/s of data a link carries, from the texts of sysfs's
 * current_link_speed ("16.0 GT/s PCIe", "8 GT/s", "2.5 GT/s") and
 * current_link_width ("16"); 0 when either does not name a PCIe link
 * ("Unknown", "0", a rate PCIe does not define: a VF, an emulated device). */
uint64_t hostlink_parse_mbps(const char *speed, const char *width);

/* The same read from <pci_path>/current_link_{speed,width}; 0 when
 * pci_path is NULL or the files are missing or unknown.  `desc` (may be
 * NULL) receives "16.0 GT/s x16" for the log. */
uint64_t hostlink_mbps(const char *pci_path, char *desc, size_t desclen);

#endif
