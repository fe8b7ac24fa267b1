/* plugin/ib/hostlink.h: the PCIe link between an RDMA device and host
 * memory, from sysfs.
 *
 * The ports of one verbs device share that link (a ConnectX-3's two ports,
 * softnic's; a ConnectX-4 or later shows each port as its own device):
 * railnet's device advertises to NCCL no more than the link carries
 * (devices.c). NCCL's topology weighs a NIC's PCI path by max_link_*,
 * but a merged device's summed speed, or a NIC on no PCI path (softnic),
 * escapes it and would promise more than the host moves, steering NCCL to
 * plans (protocol, channels) for that speed. current_link_* is read on purpose: it
 * is the rate the link trained to, lower than max_link_* on a slot that
 * is narrower or slower than the card. */
#ifndef RAILNET_HOSTLINK_H
#define RAILNET_HOSTLINK_H

#include <stddef.h>
#include <stdint.h>

/* Mb/s of data a link carries, from the texts of sysfs's
 * current_link_speed ("16.0 GT/s PCIe", "8 GT/s", "2.5 GT/s") and
 * current_link_width ("16"); 0 when either does not name a PCIe link
 * ("Unknown", "0", a rate PCIe does not define: a VF, an emulated device).
 * Independent of the locale. */
uint64_t hostlink_parse_mbps(const char *speed, const char *width);

/* The same read from <pci_path>/current_link_{speed,width}; 0 when
 * pci_path is NULL or the files are missing or unknown.  `desc` (may be
 * NULL) receives "16.0 GT/s x16" for the log. */
uint64_t hostlink_mbps(const char *pci_path, char *desc, size_t desclen);

#endif
