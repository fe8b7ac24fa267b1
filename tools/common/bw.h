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
 * bandwidth seen over any window of at least a tenth of the completions
 * and a tenth of the run's time (so average <= peak <= 10 x average).
 * When `tick` is set it is called from the loop about every `tick_interval`
 * seconds (default 0.5) with the writes completed so far, so a caller can
 * show progress or tell its peer it is alive; a non-zero return stops the
 * run as a failure (err says "stopped by the caller"). */
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
    int (*tick)(void *arg, long done);
    void *tick_arg;
    double tick_interval;  /* seconds; <= 0: 0.5 */
    /* ibv_wc_status_str, to name a failed completion (NULL: number only). */
    const char *(*status_str)(enum ibv_wc_status st);
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

/* One sample per polled completion: when, and how many operations were
 * done by then. bw_peak_bps() is the peak rule above applied to samples of
 * operations of `size` bytes that started at t0 (0 without samples). */
struct bw_sample {
    double t;
    long done;
};
double bw_peak_bps(const struct bw_sample *samples, size_t ns, double t0, size_t size);

#endif
