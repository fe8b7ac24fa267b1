/* tests/gindriver/gd.h: a driver of railnet's ncclGinPlugin_v11 shaped like
 * NCCL 2.28.9's GIN proxy: it dlopens the plugin, calls init/listen, passes
 * every rank's handle to connect (NCCL all-gathers them), registers windows
 * in the same order on every rank, issues iput/iputSignal and polls test and
 * ginProgress, as NCCL's progress thread does.
 *
 * Ranks are processes forked by the parent; each has a socketpair to it.
 * The parent relays handles (all-gather) and runs barriers; it can SIGKILL
 * one rank once that rank said it is ready (fault test). */
#ifndef RAILNET_GINDRIVER_GD_H
#define RAILNET_GINDRIVER_GD_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_gin_v11.h"
#include "nccl_rma_v14.h"

#define GD_MAX_RANKS 8
#define GD_HANDLE 128

struct gd_rank {
    int rank, nranks;
    int fd;                       /* socketpair end to the parent */
    const ncclGin_v11_t *gin;
    void *ctx, *listen, *coll;
    uint8_t handles[GD_MAX_RANKS][GD_HANDLE];
    uint64_t seed;
    struct plugin_tables *lib;    /* the loaded plugin */
    int unloaded;                 /* gd_unload ran: the plugin is gone */
};

typedef int (*gd_rank_fn)(struct gd_rank *r, void *arg);

/* Forks nranks ranks; each loads the plugin, inits, listens, exchanges
 * handles through the parent and runs fn (which calls connect itself, so
 * that tests can pass other arguments). kill_rank >= 0: that rank is
 * SIGKILLed once it calls gd_ready. Returns the number of ranks (other than
 * the killed one) that exited non-zero or did not finish within timeout_s. */
int gd_run(const char *plugin, int nranks, double timeout_s, int kill_rank, uint64_t seed, gd_rank_fn fn, void *arg);
/* A variable gd_run sets in rank k's environment before that rank loads the
 * plugin (name NULL: none), for jobs whose ranks are configured apart. */
struct gd_env {
    const char *name, *value;
};
extern struct gd_env gd_rank_env[GD_MAX_RANKS];

/* Another listen of this rank's communicator (as NCCL makes one per GIN
 * context), its handles exchanged through the parent into r->handles: every
 * rank calls it the same number of times. 0 ok. */
int gd_listen_again(struct gd_rank *r, void **listen_comm);

/* All ranks wait for each other (through the parent). 0 ok. */
int gd_barrier(struct gd_rank *r);
/* Tells the parent this rank is ready to be killed (then a barrier-free
 * wait is the rank's own business). */
void gd_ready(struct gd_rank *r);
/* gd_ready, then waits for the parent's SIGKILL (the victim of a kill case). */
_Noreturn void gd_await_kill(struct gd_rank *r);
/* What NCCL does once a process's last communicator is gone: closeColl,
 * closeListen, finalize, then dlclose of the plugin; then this rank lives
 * on for linger_s seconds (a thread the plugin left running must not run
 * in unmapped code). */
void gd_unload(struct gd_rank *r, double linger_s);
/* connect with every rank's handle as given by the exchange (NCCL's FULL
 * connection type). */
ncclResult_t gd_connect(struct gd_rank *r);
/* gd_connect; 0, or 1 after saying on stdout that it failed. */
int gd_connect_said(struct gd_rank *r);
/* connect as NCCL's RAIL connection type does (no cross-NIC support): with
 * `rails` ranks a node, rank r is on node r / rails with local index
 * r % rails; its rail is the ranks of the same local index, one a node. Only
 * their handles are passed, in node order: nGinRanks = nranks / rails,
 * myGinRank = rank / rails, and puts address peers by that rail rank.
 * rails 1 is gd_connect. Uses r->listen, sets r->coll. */
ncclResult_t gd_connect_rail(struct gd_rank *r, int rails);

double gd_now(void);
uint64_t gd_rand(uint64_t *state);
/* Content byte j of the put identified by id. */
static inline uint8_t gd_byte(uint64_t id, uint64_t j)
{
    uint64_t x = id * 0x9e3779b97f4a7c15ull + j * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    return (uint8_t)(x ^ (x >> 17) ^ (x >> 40));
}

/* Waits for a request: test() until done, ginProgress() between tries.
 * Returns the first error or ncclSuccess; gives up (ncclInternalError) at
 * deadline. */
ncclResult_t gd_wait(struct gd_rank *r, void *req, double deadline);

/* The log lines the plugin writes go to stderr with a level prefix. */
void gd_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...);

/* The plugin's GIN counters, as its RAILNET_STATS=1 line at closeColl
 * reported them to gd_logger (seen 0 until then). */
struct gd_gin_stats {
    int seen;
    unsigned long long wrs, markers, signaled, cqes;
};
extern struct gd_gin_stats gd_stats;
/* --gin-version: the table the ranks load (gd_tables.c), 11 unless told. */
extern int gd_gin_version;
/* --rma-version 13 or 14 (0: none): the ranks load an RMA table instead
 * (gd_tables.c; with --gin-version 13, ncclGinPlugin_v13 as NCCL 2.30.4's
 * GIN proxy drives it), which the RMA cases (gd_rma.c) call as gd_rma. */
extern int gd_rma_version;
extern const ncclRma_v14_t *gd_rma;
struct plugin_tables;
/* The table of version gd_gin_version, as a v11 table (calls converted);
 * NULL with err on failure. */
/* --gin-version 14: getGinProperties on stdout (nothing for others). */
void gd_print_gin_properties(void);
const ncclGin_v11_t *gd_load_gin(struct plugin_tables *lib, const char *plugin, char *err, size_t errlen);

#endif
