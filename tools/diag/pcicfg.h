/* tools/diag/pcicfg.h: decoding of a PCI function's configuration space as
 * sysfs exposes it (the binary `config` file).
 *
 * Contract: every function works on a byte copy (struct pcicfg) and never
 * reads past `len`; a malformed capability chain (loop, pointer out of range)
 * ends the walk instead of being followed. Unprivileged readers get only the
 * 64-byte header from sysfs: then no capability is found and `len` tells why. */
#ifndef RAILNET_TOOLS_PCICFG_H
#define RAILNET_TOOLS_PCICFG_H

#include <stddef.h>
#include <stdint.h>

#define PCICFG_MAX 4096

/* Capability IDs (PCI Local Bus / PCIe Base specification). */
#define PCI_CAP_ID_EXP 0x10
#define PCI_ECAP_ID_ACS 0x000d
#define PCI_ECAP_ID_ATS 0x000f
#define PCI_ECAP_ID_SRIOV 0x0010

/* PCI Express capability: port types (Capabilities register bits 7:4). */
enum pcie_port_type {
    PCIE_TYPE_ENDPOINT = 0x0,
    PCIE_TYPE_LEGACY_ENDPOINT = 0x1,
    PCIE_TYPE_ROOT_PORT = 0x4,
    PCIE_TYPE_SWITCH_UP = 0x5,
    PCIE_TYPE_SWITCH_DOWN = 0x6,
    PCIE_TYPE_PCIE_TO_PCI = 0x7,
    PCIE_TYPE_RC_ENDPOINT = 0x9,
};

/* Device Control register bits. */
#define PCIE_DEVCTL_RELAXED_ORDERING 0x0010u
#define PCIE_DEVCTL_NO_SNOOP 0x0800u

/* ACS Control register bits. */
#define ACS_CTL_SOURCE_VALIDATION 0x0001u
#define ACS_CTL_TRANSLATION_BLOCKING 0x0002u
#define ACS_CTL_P2P_REQ_REDIRECT 0x0004u
#define ACS_CTL_P2P_CPL_REDIRECT 0x0008u
#define ACS_CTL_UPSTREAM_FORWARDING 0x0010u
#define ACS_CTL_P2P_EGRESS_CONTROL 0x0020u
#define ACS_CTL_DIRECT_TRANSLATED_P2P 0x0040u

struct pcicfg {
    uint8_t b[PCICFG_MAX];
    size_t len;
};

struct pcie_info {
    int offset;           /* of the PCI Express capability, -1 when absent */
    int port_type;        /* enum pcie_port_type */
    int mps_supported;    /* bytes, from Device Capabilities */
    int mps;              /* bytes, Device Control Max_Payload_Size */
    int mrrs;             /* bytes, Device Control Max_Read_Request_Size */
    int relaxed_ordering; /* Device Control Enable Relaxed Ordering */
    int no_snoop;         /* Device Control Enable No Snoop */
    uint16_t devctl;      /* raw Device Control */
    /* Link Capabilities (what the function can train to) and Link Status
     * (what it trained to): speed codes 1-6 = 2.5-64 GT/s, width in lanes */
    int link_speed_max, link_width_max;
    int link_speed, link_width;
};

struct acs_info {
    int offset; /* of the ACS extended capability, -1 when absent */
    uint16_t cap, ctl;
};

struct ats_info {
    int offset; /* -1 when absent */
    int enabled;
};

/* Reads a sysfs config file (at most PCICFG_MAX bytes). 0 or an errno. */
int pcicfg_load(const char *path, struct pcicfg *cfg);

/* Little-endian reads; out-of-range reads return all ones, like a bus that
 * has nothing there. */
uint8_t pcicfg_r8(const struct pcicfg *cfg, size_t off);
uint16_t pcicfg_r16(const struct pcicfg *cfg, size_t off);
uint32_t pcicfg_r32(const struct pcicfg *cfg, size_t off);

uint16_t pcicfg_vendor(const struct pcicfg *cfg);
uint16_t pcicfg_device(const struct pcicfg *cfg);

/* Offset of the standard capability `id`, or -1. */
int pcicfg_find_cap(const struct pcicfg *cfg, uint8_t id);
/* Offset of the extended capability `id` (chain from 0x100), or -1. */
int pcicfg_find_ecap(const struct pcicfg *cfg, uint16_t id);

/* Each fills its struct; offset -1 when the capability is absent. */
void pcicfg_pcie(const struct pcicfg *cfg, struct pcie_info *out);
/* Tenths of GT/s per lane of a Link Capabilities / Status speed code
 * (1 -> 25 ... 6 -> 640); 0 for a code PCIe does not define. */
unsigned pcicfg_link_gts_x10(int code);
void pcicfg_acs(const struct pcicfg *cfg, struct acs_info *out);
void pcicfg_ats(const struct pcicfg *cfg, struct ats_info *out);

/* "P2P Request Redirect, P2P Completion Redirect" for the set ACS control
 * bits that divert peer-to-peer traffic; "" when none. */
const char *pcicfg_acs_redirect_names(uint16_t ctl, char *buf, size_t len);

#endif
