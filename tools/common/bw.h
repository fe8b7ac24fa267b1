/* tools/common/bw.h: the RDMA WRITE bandwidth loop shared by
 * railnet-write-bw and railnet-diag --probe.
 *
 * Contract: bw_run_writes() posts `iters` RDMA WRITEs of `size` bytes (or
 * as many as fit in `duration` seconds when duration > 0) from the local MR
 * to the remote buffer, spread round-robin over the connected QPs, keeping
 * up to `tx_depth` outstanding per QP and asking for a completion every
 * `cq_mod` writes (and on the last). It returns when every write completed,
 * or -1 on the first failed completion or when no completion arrives for
 * `stall_timeout` seconds (so a dead peer cannot hang a tool).
 * Result: the average is bytes over the whole run; the peak is the best
 * bandwidth seen over any window of at least a tenth of the completions. */
#ifndef RAILNET_TOOLS_BW_H
#define RAILNET_TOOLS_BW_H

#include <stddef.h>
#include <stdint.h>

#include "rc.h"

struct bw_params {
    size_t size;
    long iters;            /* used when duration <= 0 */
    double duration;       /* seconds; > 0 selects duration mode */
    int tx_depth;          /* outstanding writes per QP */
    int cq_mod;            /* a signalled write every cq_mod writes */
    double stall_timeout;  /* seconds without progress before giving up */
};

struct bw_result {
    size_t size;
    long iters;            /* writes completed */
    double seconds;
    double avg_bps;        /* bytes per second */
    double peak_bps;
    double msg_rate;       /* writes per second */
};

int bw_run_writes(struct rc_qp *qps, int nqp, void *local, uint32_t lkey, uint64_t remote_addr,
                  uint32_t rkey, const struct bw_params *p, struct bw_result *res, char *err,
                  size_t errlen);

double bw_now(void);

#endif
