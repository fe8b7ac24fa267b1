/* plugin/ib/rail_topo.h: a NIC's rail from the host's PCI topology.
 *
 * On a rail-optimized node (DGX-like) each NIC shares a PCIe switch with one
 * GPU, and NIC k is cabled to rail k, k being that GPU's index in PCI bus
 * order among the host's NVIDIA GPUs. rail_topo_rail() reads that from
 * sysfs:
 *  - the sysfs root is the verbs device's ibdev_path less its trailing
 *    "/class/infiniband/<name>" (/sys on a host, softnic's SOFTNIC_SYSFS
 *    tree in the tests);
 *  - the GPUs are the functions <root>/bus/pci/devices/<bdf> (links
 *    resolved) of vendor 0x10de and class 0x0300xx or 0x0302xx, numbered in
 *    the order of their BDF (the resolved path's last component);
 *  - the NIC's switch is the parent of the parent of its resolved PCI
 *    function (function -> downstream port -> the switch's upstream port),
 *    and must itself be a PCI function: a NIC on a root port hangs off the
 *    root complex, and no rail is guessed across one;
 *  - the GPUs whose resolved path lies under the switch are near the NIC.
 * Exactly one near GPU: its number is the rail. No near GPU, several, or a
 * tree that does not say: no rail.
 *
 * Layer: devices (reads files only, logs nothing: the caller logs `why`). */
#ifndef RAILNET_IB_RAIL_TOPO_H
#define RAILNET_IB_RAIL_TOPO_H

#include <stddef.h>

/* A why buffer that holds every text but one naming a very long path
 * (which is cut). */
#define RAIL_TOPO_WHY_LEN 256

/* The rail, 0..max, of the verbs device at ibdev_path whose PCI function
 * resolves to pci_path (NULL: it does not); -1 when there is none. why
 * (whylen bytes, always written) says which GPU gave the rail, or why there
 * is none, in words for the device's INFO line. */
int rail_topo_rail(const char *ibdev_path, const char *pci_path, int max, char *why, size_t whylen);

#endif
