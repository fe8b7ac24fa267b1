/* tools/writebw/output.c: the table, its header and the JSON document (see
 * output.h). The column layout follows perftest's ib_write_bw so that
 * scripts and eyes used to it read this one too. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "../common/json.h"
#include "output.h"

#define RULE "---------------------------------------------------------------------------------------\n"

double out_bw_unit(const struct out_report *r, double bps)
{
    return r->o->report_gbits ? bps * 8 / 1e9 : bps / 1e9;
}

static const char *unit(const struct out_report *r)
{
    return r->o->report_gbits ? "Gb/sec" : "GB/sec";
}

static const char *mode_name(const struct wb_opts *o)
{
    return o->gpu_initiated ? "gpu-initiated" : o->mode == WB_MODE_PLUGIN ? "plugin"
           : o->rdma_cm ? "verbs, QPs connected through the RDMA CM (-R)" : "verbs";
}

void out_header(struct out_report *r)
{
    const struct wb_opts *o = r->o;
    if (o->json)
        return;
    printf(RULE);
    printf("                    RDMA_Write %sBW Test (railnet-write-bw, %s)\n",
           o->bidir ? "Bidirectional " : "", r->role);
    printf(" Mode             : %s\n", mode_name(o));
    if (r->plugin[0])
        printf(" Plugin           : %s\n", r->plugin);
    printf(" Device           : %s\n", r->local.device);
    for (int i = 0; i < r->nports; i++) {
        const struct out_port *p = &r->port[i];
        if (p->gid_index < 0)
            printf(" Port %-3d         : %s\n", p->port, p->gid);
        else
            printf(" Port %-3d         : %s %s, GID index %d, GID %s, MTU %d\n", p->port,
                   p->link_layer, p->rate, p->gid_index, p->gid, p->mtu);
    }
    if (r->path_mtu)
        printf(" Path MTU         : %d\n", r->path_mtu);
    if (r->gpu_posting[0])
        printf(" GPU posting      : %s\n", r->gpu_posting);
    else if (o->mode == WB_MODE_VERBS)
        printf(" QPs              : %d per port, %d total, TX depth %d\n", o->qps,
               o->qps * o->nports, o->tx_depth);
    printf(" Memory           : %s\n", r->local.memory);
    printf(" Registration     : %s\n", r->local.registration);
    printf(" Relaxed ordering : %s\n", r->relaxed_note);
    if (r->have_remote)
        printf(" Peer             : %s: %s, %s memory via %s, relaxed ordering %s\n", r->peer,
               r->remote.device, r->remote.memory, r->remote.registration,
               r->remote.relaxed ? "on" : "off");
    if (o->duration > 0)
        printf(" Duration         : %g s per size\n", o->duration);
    printf(RULE);
    /* --gpu-initiated times the whole kernel on the GPU: the peak is the
     * average; its extra column is the median latency of one put + quiet. */
    printf(" #bytes     #iterations    BW peak[%s]    BW average[%s]   MsgRate[Mpps]%s\n",
           unit(r), unit(r), o->gpu_initiated ? "   Lat[usec]" : "");
    fflush(stdout);
}

void out_row(struct out_report *r, const struct wb_result *res)
{
    if (r->nrows < WB_MAX_SIZES)
        r->rows[r->nrows++] = *res;
    if (r->o->json)
        return;
    printf(" %-10llu %-14llu %-18.2f %-20.2f ", (unsigned long long)res->size,
           (unsigned long long)res->iters, out_bw_unit(r, res->peak_bps),
           out_bw_unit(r, res->avg_bps));
    if (r->o->gpu_initiated)
        printf("%-16.6f%.2f\n", res->msg_rate / 1e6, res->lat_us);
    else
        printf("%.6f\n", res->msg_rate / 1e6);
    fflush(stdout);
}

static void json_side(const struct wb_side *s)
{
    printf("{\"device\": ");
    json_str(stdout, s->device);
    printf(", \"memory\": ");
    json_str(stdout, s->memory);
    printf(", \"registration\": ");
    json_str(stdout, s->registration);
    printf(", \"relaxed_ordering\": %s}", s->relaxed ? "true" : "false");
}

void out_finish(struct out_report *r)
{
    const struct wb_opts *o = r->o;
    if (!o->json) {
        printf(RULE);
        fflush(stdout);
        return;
    }
    printf("{\n  \"tool\": \"railnet-write-bw\",\n  \"version\": ");
    json_str(stdout, PACKAGE_VERSION);
    printf(",\n  \"role\": \"%s\",\n  \"mode\": \"%s\",\n  \"bidir\": %s,\n", r->role,
           mode_name(o), o->bidir ? "true" : "false");
    if (r->plugin[0]) {
        printf("  \"plugin\": ");
        json_str(stdout, r->plugin);
        printf(",\n");
    }
    printf("  \"local\": ");
    json_side(&r->local);
    printf(",\n  \"remote\": ");
    if (r->have_remote)
        json_side(&r->remote);
    else
        printf("null");
    printf(",\n  \"peer\": ");
    json_str(stdout, r->peer);
    printf(",\n  \"relaxed_ordering\": ");
    json_str(stdout, r->relaxed_note);
    printf(",\n  \"ports\": [");
    for (int i = 0; i < r->nports; i++) {
        const struct out_port *p = &r->port[i];
        printf("%s{\"port\": %d, \"link_layer\": ", i ? ", " : "", p->port);
        json_str(stdout, p->link_layer);
        printf(", \"gid_index\": %d, \"gid\": ", p->gid_index);
        json_str(stdout, p->gid);
        printf(", \"mtu\": %d, \"rate\": ", p->mtu);
        json_str(stdout, p->rate);
        printf("}");
    }
    printf("],\n  \"path_mtu\": %d,\n", r->path_mtu);
    if (r->gpu_posting[0]) {
        printf("  \"gpu_posting\": ");
        json_str(stdout, r->gpu_posting);
        printf(",\n");
    } else if (o->mode == WB_MODE_VERBS)
        printf("  \"qps_per_port\": %d,\n  \"qps\": %d,\n  \"tx_depth\": %d,\n", o->qps,
               o->qps * o->nports, o->tx_depth);
    printf("  \"units\": {\"bw\": \"%s\", \"msg_rate\": \"Mpps\"},\n", unit(r));
    printf("  \"results\": [");
    for (int i = 0; i < r->nrows; i++) {
        const struct wb_result *x = &r->rows[i];
        printf("%s\n    {\"bytes\": %llu, \"iterations\": %llu, \"bytes_total\": %llu, "
               "\"seconds\": ", i ? "," : "", (unsigned long long)x->size,
               (unsigned long long)x->iters, (unsigned long long)(x->size * x->iters));
        json_num(stdout, x->seconds);
        printf(", \"bw_peak\": ");
        json_num(stdout, out_bw_unit(r, x->peak_bps));
        printf(", \"bw_average\": ");
        json_num(stdout, out_bw_unit(r, x->avg_bps));
        printf(", \"msg_rate_mpps\": ");
        json_num(stdout, x->msg_rate / 1e6);
        if (o->gpu_initiated) {
            printf(", \"latency_us\": ");
            json_num(stdout, x->lat_us);
        }
        printf("}");
    }
    printf("\n  ]\n}\n");
    fflush(stdout);
}
