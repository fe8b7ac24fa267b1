/* tests/netdriver/nd.h: shared pieces of the NCCL-like driver's traffic
 * subcommands (traffic, bw, lat): rank orchestration, handle exchange,
 * non-blocking connection set-up, data patterns, deadlines.
 *
 * Orchestration: the parent forks `nranks` children; each child loads the
 * plugin itself (verbs state never crosses fork), listens once per peer and
 * device, and sends its handles to the parent over a socketpair; the parent
 * forwards to every rank the handles its peers made for it. No TCP port is
 * fixed anywhere: the plugin binds port 0 and the handle carries the port.
 *
 * Rank wrappers (--rank-wrap): the child for rank i execs this program again
 * behind the i-th command prefix, e.g. `ip netns exec A env VAR=...`, so that
 * each rank is a process of its own in its own network namespace with its own
 * environment (two "hosts"). The socketpair end survives the exec and the
 * re-executed program runs only that rank (--rank-of FD:I). */
#ifndef RAILNET_NETDRIVER_ND_H
#define RAILNET_NETDRIVER_ND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nccl_net_v8.h"

#define ND_MAX_RANKS 8
#define ND_MAX_DEVS 4
#define ND_HANDLE 128

struct nd_world {
    int rank, nranks, ndevs;
    int fd;                      /* socketpair end to the parent */
    const ncclNet_v8_t *net;
    /* [peer][dev] */
    void *send[ND_MAX_RANKS][ND_MAX_DEVS];
    void *recv[ND_MAX_RANKS][ND_MAX_DEVS];
    double deadline;             /* nd_now() value after which the rank gives up */
};

/* The body of one rank; returns its exit status (0 ok). */
typedef int (*nd_rank_fn)(struct nd_world *w, void *arg);

/* Forks nranks ranks running fn, exchanges handles, waits for all of them
 * with a timeout (kills them all past it). kill_rank >= 0: SIGKILLs that rank
 * kill_after_ms after the connections are up (fault test). Returns 0 when
 * every rank (except the killed one) exited 0, else 1; prints one line per
 * failed rank. In a --rank-of process it runs that one rank and exits with
 * the rank's status instead. */
int nd_run_ranks(int nranks, int ndevs, double timeout_s, int kill_rank, int kill_after_ms, nd_rank_fn fn,
                 void *arg);

/* Port faults while ranks run (softnic's SOFTNIC_CTL_FILE, which the
 * parent exports to the ranks): the listed ports go down down_ms after the
 * connections are up (with at_start: once every rank has listened, so
 * during the handshakes), come back up_ms later
 * (0: stay down), `cycles` times; with random_seed != 0 each delay is drawn
 * in [1, ms] from that seed instead. Each change is printed on stderr with
 * its time and whether ranks were still running. */
struct nd_flap {
    const char *ctl_file;          /* NULL: no faults */
    int nports;
    char port[2][80];              /* "softnic0 2" */
    int down_ms, up_ms, cycles, at_start;
    uint64_t random_seed;
};
void nd_set_flap(const struct nd_flap *f);

/* Set by main before a subcommand runs. nd_set_argv: the program's own
 * argv, re-executed behind a wrapper. nd_add_rank_wrap: the prefix of the
 * next rank, split on blanks (no quoting); -1 when there are too many.
 * nd_set_rank_of: "FD:I", this process is rank I of a parent that forked it
 * (internal); -1 when it does not parse. */
void nd_set_argv(int argc, char **argv);
int nd_add_rank_wrap(const char *prefix);
int nd_set_rank_of(const char *spec);
/* 1 in a process started by --rank-of: subcommands print their headers and
 * verdicts only in the parent. */
int nd_rank_process(void);

/* Inside a rank: listen/connect/accept to every peer on every device,
 * non-blocking until all comms exist or the deadline passes. 0 on success. */
int nd_connect_all(struct nd_world *w);
/* Closes every comm of the rank. */
void nd_close_all(struct nd_world *w);
/* Tells the parent that the connections are up (for kill timing). */
void nd_signal_ready(struct nd_world *w);

double nd_now(void);

/* Deterministic content: byte i of the message identified by id. */
void nd_fill(void *buf, size_t len, uint64_t id);
/* Index of the first wrong byte, or -1. */
long nd_check(const void *buf, size_t len, uint64_t id);

/* splitmix64 step: the driver's one random generator. */
uint64_t nd_rand(uint64_t *state);

/* Loads and initialises the plugin in the calling process (child ranks). */
const ncclNet_v8_t *nd_plugin_open(void);

/* An option's value, whole and within [lo, hi] (plugin/ib/parse.h): 0, or
 * -1 after a message on stderr naming the option, the value and the range.
 * *out is left alone on error. Sizes take a K/M/G suffix (binary units);
 * seconds are a decimal over 0 (fractions allowed). */
int nd_opt_int(const char *opt, const char *s, long long lo, long long hi, int *out);
int nd_opt_size(const char *opt, const char *s, long long lo, long long hi, long long *out);
int nd_opt_seconds(const char *opt, const char *s, double *out);

#endif
