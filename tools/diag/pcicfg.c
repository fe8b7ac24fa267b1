/* tools/diag/pcicfg.c: PCI configuration space decoding (see pcicfg.h). */
#include "config.h"

#include "../common/strfmt.h"
#include "pcicfg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define PCI_STATUS 0x06
#define PCI_STATUS_CAP_LIST 0x10
#define PCI_CAP_PTR 0x34
#define PCI_EXT_CAP_START 0x100
/* A capability is at least 4 bytes (legacy) or 4 bytes (extended): a chain
 * longer than the space divided by that must contain a loop. */
#define PCI_CAP_WALK_MAX 48
#define PCI_ECAP_WALK_MAX ((PCICFG_MAX - PCI_EXT_CAP_START) / 4)

int pcicfg_load(const char *path, struct pcicfg *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    size_t got = 0;
    while (got < sizeof(cfg->b)) {
        ssize_t n = read(fd, cfg->b + got, sizeof(cfg->b) - got);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int err = errno;
            close(fd);
            return err;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    cfg->len = got;
    return got >= 64 ? 0 : EIO;
}

uint8_t pcicfg_r8(const struct pcicfg *cfg, size_t off)
{
    return off < cfg->len ? cfg->b[off] : 0xff;
}

uint16_t pcicfg_r16(const struct pcicfg *cfg, size_t off)
{
    return (uint16_t)(pcicfg_r8(cfg, off) | pcicfg_r8(cfg, off + 1) << 8);
}

uint32_t pcicfg_r32(const struct pcicfg *cfg, size_t off)
{
    return (uint32_t)pcicfg_r16(cfg, off) | (uint32_t)pcicfg_r16(cfg, off + 2) << 16;
}

uint16_t pcicfg_vendor(const struct pcicfg *cfg) { return pcicfg_r16(cfg, 0); }
uint16_t pcicfg_device(const struct pcicfg *cfg) { return pcicfg_r16(cfg, 2); }

int pcicfg_find_cap(const struct pcicfg *cfg, uint8_t id)
{
    if (cfg->len < 64 || !(pcicfg_r16(cfg, PCI_STATUS) & PCI_STATUS_CAP_LIST))
        return -1;
    size_t pos = pcicfg_r8(cfg, PCI_CAP_PTR) & ~3u;
    for (int i = 0; i < PCI_CAP_WALK_MAX && pos >= 0x40 && pos + 2 <= cfg->len; i++) {
        if (pcicfg_r8(cfg, pos) == id)
            return (int)pos;
        pos = pcicfg_r8(cfg, pos + 1) & ~3u;
    }
    return -1;
}

int pcicfg_find_ecap(const struct pcicfg *cfg, uint16_t id)
{
    size_t pos = PCI_EXT_CAP_START;
    for (int i = 0; i < PCI_ECAP_WALK_MAX && pos >= PCI_EXT_CAP_START && pos + 4 <= cfg->len; i++) {
        uint32_t hdr = pcicfg_r32(cfg, pos);
        if (hdr == 0 || hdr == 0xffffffffu)
            return -1;
        if ((hdr & 0xffff) == id)
            return (int)pos;
        pos = (hdr >> 20) & ~3u;
    }
    return -1;
}

void pcicfg_pcie(const struct pcicfg *cfg, struct pcie_info *out)
{
    memset(out, 0, sizeof(*out));
    out->offset = pcicfg_find_cap(cfg, PCI_CAP_ID_EXP);
    if (out->offset < 0)
        return;
    size_t base = (size_t)out->offset;
    out->port_type = (pcicfg_r16(cfg, base + 2) >> 4) & 0xf;
    uint32_t devcap = pcicfg_r32(cfg, base + 4);
    uint16_t devctl = pcicfg_r16(cfg, base + 8);
    out->devctl = devctl;
    out->mps_supported = 128 << (devcap & 0x7);
    out->mps = 128 << ((devctl >> 5) & 0x7);
    out->mrrs = 128 << ((devctl >> 12) & 0x7);
    out->relaxed_ordering = !!(devctl & PCIE_DEVCTL_RELAXED_ORDERING);
    out->no_snoop = !!(devctl & PCIE_DEVCTL_NO_SNOOP);
    uint32_t lnkcap = pcicfg_r32(cfg, base + 0x0c);
    uint16_t lnksta = pcicfg_r16(cfg, base + 0x12);
    out->link_speed_max = (int)(lnkcap & 0xf);
    out->link_width_max = (int)((lnkcap >> 4) & 0x3f);
    out->link_speed = lnksta & 0xf;
    out->link_width = (lnksta >> 4) & 0x3f;
}

unsigned pcicfg_link_gts_x10(int code)
{
    static const unsigned gts[] = { 0, 25, 50, 80, 160, 320, 640 };
    return code > 0 && code < (int)(sizeof(gts) / sizeof(gts[0])) ? gts[code] : 0;
}

void pcicfg_acs(const struct pcicfg *cfg, struct acs_info *out)
{
    memset(out, 0, sizeof(*out));
    out->offset = pcicfg_find_ecap(cfg, PCI_ECAP_ID_ACS);
    if (out->offset < 0)
        return;
    out->cap = pcicfg_r16(cfg, (size_t)out->offset + 4);
    out->ctl = pcicfg_r16(cfg, (size_t)out->offset + 6);
}

void pcicfg_ats(const struct pcicfg *cfg, struct ats_info *out)
{
    memset(out, 0, sizeof(*out));
    out->offset = pcicfg_find_ecap(cfg, PCI_ECAP_ID_ATS);
    if (out->offset < 0)
        return;
    out->enabled = !!(pcicfg_r16(cfg, (size_t)out->offset + 6) & 0x8000);
}

const char *pcicfg_acs_redirect_names(uint16_t ctl, char *buf, size_t len)
{
    static const struct { uint16_t bit; const char *name; } bits[] = {
        { ACS_CTL_P2P_REQ_REDIRECT, "P2P Request Redirect" },
        { ACS_CTL_P2P_CPL_REDIRECT, "P2P Completion Redirect" },
        { ACS_CTL_UPSTREAM_FORWARDING, "Upstream Forwarding" },
        { ACS_CTL_P2P_EGRESS_CONTROL, "P2P Egress Control" },
    };
    size_t off = 0;
    if (len)
        buf[0] = '\0';
    for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++) {
        if (!(ctl & bits[i].bit))
            continue;
        int n = str_fmt(buf + off, len - off, "%s%s", off ? ", " : "", bits[i].name);
        if (n < 0 || (size_t)n >= len - off)
            break;
        off += (size_t)n;
    }
    return buf;
}
