/* hostlink.c: the PCIe link a softnic device stands for, which sysfs shows
 * as a NIC's device/current_link_speed and current_link_width (sysfs.c).
 *
 * The ports of one verbs device share one PCIe link to host memory (a
 * ConnectX-3's two FDR ports on PCIe 3.0 x8 move 63 Gb/s together, not
 * 112).  softnic's ports share the host in the same way: on unlimited
 * ports what its device moves is bounded by what the host copies, the
 * figure link.c calibrates (or SOFTNIC_LINK_RATE names), whichever port
 * carries it (NCCL's IB transport through one port and railnet through
 * both moved the same at 256 MiB on a GPU host).  The host link
 * is therefore the fastest PCIe link within that figure, but never below
 * the fastest port's own link, which that port alone must be able to
 * carry; on equal data rates the wider link of the older generation, as
 * NICs of those speeds were built.  A plugin that merges the ports of a
 * device into one (railnet) caps their summed speed by this link. */
#include "softnic.h"

#include <stdio.h>

#include "railnet_pcie.h"

/* PCIe 1.0-5.0, the generations of ConnectX-3 to -7 */
static const unsigned gens[] = { 25, 50, 80, 160, 320 };
static const unsigned widths[] = { 1, 2, 4, 8, 16 };

/* below: the fastest link of at most `bound` Mb/s; else the slowest of
 * at least `bound`.  0 when there is none. */
static int pick(uint64_t bound, int below, struct sn_host_link *out)
{
    int found = 0;
    for (size_t g = 0; g < sizeof(gens) / sizeof(gens[0]); g++)
        for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++) {
            uint64_t m = railnet_pcie_mbps(gens[g], widths[w]);
            if (below ? m > bound : m < bound)
                continue;
            int better = !found || (below ? m > out->mbps : m < out->mbps) ||
                         (m == out->mbps && widths[w] > out->width);
            if (better) {
                out->gts_x10 = gens[g];
                out->width = widths[w];
                out->mbps = m;
                found = 1;
            }
        }
    return found;
}

void hostlink_of_device(const struct sn_config *c, const struct sn_device *d, struct sn_host_link *out)
{
    uint64_t host_mbps = link_calibrated_rate(c) * 8 / 1000000;
    uint64_t port_mbps = 0;
    for (int p = 0; p < d->nports; p++) {
        uint8_t width, speed;
        link_of_port(c, &d->port[p], &width, &speed);
        uint64_t m = link_mbps(width, speed);
        if (m > port_mbps)
            port_mbps = m;
    }
    if (pick(host_mbps, 1, out) && out->mbps >= port_mbps)
        return;
    if (pick(port_mbps, 0, out))
        return;
    pick(UINT64_MAX, 1, out);   /* a port faster than any link: the fastest */
}

void hostlink_speed_string(const struct sn_host_link *l, char *buf, size_t len)
{
    snprintf(buf, len, "%u.%u GT/s PCIe", l->gts_x10 / 10, l->gts_x10 % 10);
}
