/* tests/gindriver/gd_tests.h: the driver's subcommands.
 *   mesh   - full mesh of iput with random sizes and offsets, every byte of
 *            every window checked (the written ranges and the guard around
 *            them), with windows registered and deregistered on a second
 *            thread meanwhile (as NCCL's user thread does), then an iput
 *            naming a deregistered window is refused;
 *   signal - puts and iputSignal (INC, ADD) streaming in while receivers check
 *            that every put a signal counts (its own and earlier plain puts)
 *            has landed; then signal-only adds from
 *            every rank into one word of every rank, summed exactly;
 *   spread - one put below RAILNET_SPLIT_MIN to every peer a round, as an
 *            alltoall: a rank's puts of one round take both ports of the
 *            merged device (softnic's port counters), every byte checked;
 *   rogue  - bad handles (not the caller's, wrong magic/version, stale nonce,
 *            wrong rank count) refused, and the job still connects;
 *   kill   - the last rank is SIGKILLed; the others' test/iput report
 *            ncclRemoteError and queryLastError agrees, with no hang;
 *   deep   - per round, `puts` puts to every peer posted at once (NCCL's
 *            256 in flight per peer and more), random sizes, one in sixteen
 *            with an ADD signal; every byte checked, every signal word's sum
 *            exact; then (RAILNET_STATS=1) the plugin's counters: far fewer
 *            work requests signaled than posted, and exactly as many
 *            completions polled as signaled;
 *   flush  - rank 1 deregisters a window rank 0 still names; rank 0 posts
 *            a run of puts with the bad one in the middle (most of them
 *            unsignaled): the bad put and what its error flushes fail, no
 *            request reports done unless its bytes landed, nothing hangs;
 *   cq-overrun - rank 0's collComm CQ shrunk to one entry (ibv_resize_cq)
 *            overruns under puts to rank 1 (RAILNET_GIN_SIGNAL_EVERY=1):
 *            test returns ncclSystemError, no hang;
 *   port-down - (gd_async.c) rank 0 takes port 2 down while puts to rank 1
 *            are in flight: a call returns ncclSystemError well inside the
 *            QP retry budget (runs set it to 60 s), every later call too;
 *   device-fatal - port-down's case with the whole device failing
 *            (IBV_EVENT_DEVICE_FATAL, softnic_ctl_device_fatal);
 *   port-flap - rank 0's port 2 goes down and up before connect: the
 *            collComm works; the same flap after creation fails it;
 *   qp-fatal - rank 0 puts into a window rank 1 deregistered: rank 1's QP
 *            gets IBV_EVENT_QP_ACCESS_ERR and its idle collComm fails;
 *   rail   - (gd_rail.c) the job connected FULL, then per rail (--rails
 *            ranks a node) as NCCL's RAIL connection type does: QPs only
 *            towards the rail, puts with signals by rail rank; a foreign
 *            rail's handle in a connect refused without a hang;
 *   rate   - (bench) each rank streams `puts` puts of --size bytes to the
 *            next rank, `queue` in flight; rank 0 prints the put rate. */
#ifndef RAILNET_GINDRIVER_GD_TESTS_H
#define RAILNET_GINDRIVER_GD_TESTS_H

#include <stddef.h>
#include <stdint.h>

struct gd_opts {
    int ranks;
    int rounds;
    int puts;      /* per peer per round */
    int adds;      /* signal-only adds per peer */
    int queue;     /* mesh: puts in flight per peer (NCCL 2.28.9: 32 * maxRecvs = 256) */
    size_t slot;   /* bytes each rank owns in every window */
    uint64_t seed;
    size_t size;   /* rate: bytes per put */
    int go_pipe[2];
    void *shared;  /* flush: MAP_SHARED page, rank 0 -> rank 1 */
    int forge;     /* gdaki-forged-KIND: which forgery (gd_forge.c) */
    int release;   /* gdaki-release: gdaki-a2a with the last rank killed */
    int sets;      /* gdaki-a2a, gdaki-release: GDAKI contexts (createContext calls) on the collComm */
    int rails;     /* rail: ranks a node (rank r: node r / rails, local index r % rails) */
};

/* Returns the number of failed ranks (0: pass), -1 for an unknown name. */
int gd_test_run(const char *plugin, const char *name, struct gd_opts *o);
/* The GDAKI type's subcommands (gd_gdaki.c): gdaki, gdaki-error, gdaki-kill,
 * and gdaki-forged-KIND (gd_forge.c: a forged GW_GDAKI message refused). */
int gd_gdaki_run(const char *plugin, const char *name, struct gd_opts *o);
int gd_forge_run(const char *plugin, const char *kind, struct gd_opts *o);
/* rma, rma-bad, rma-kill (gd_rma.c): an RMA table (--rma-version). */
int gd_rma_run(const char *plugin, const char *name, struct gd_opts *o);
/* rail (gd_rail.c): NCCL's RAIL connection type. */
int gd_rail_run(const char *plugin, struct gd_opts *o);
/* port-down, port-flap, qp-fatal (gd_async.c): async events of the device. */
int gd_async_run(const char *plugin, const char *name, struct gd_opts *o);
/* softnic_ctl_port_set_state of the libibverbs the plugin loaded (NULL,
 * said on stdout, when it is not softnic's). */
struct ibv_context;
typedef int (*set_state_fn)(struct ibv_context *, uint8_t, int);
set_state_fn gd_find_set_state(void);
/* A context of this process's own on the first device of the libibverbs
 * the plugin loaded (for softnic's control calls; the plugin's contexts are
 * not reachable from here): gd_own_dev_open returns it or NULL, and
 * gd_own_dev_close closes it and frees the device list. */
struct gd_own_dev {
    struct ibv_device **list;
    struct ibv_context *ctx;
    void (*free_list)(struct ibv_device **);
    int (*close_dev)(struct ibv_context *);
};
struct ibv_context *gd_own_dev_open(struct gd_own_dev *d);
void gd_own_dev_close(struct gd_own_dev *d);
/* The request payload bytes this process sent on ports 1 and 2 of the
 * first device so far (softnic's port counters): 0, or 1 off softnic. */
int gd_port_tx(unsigned long long tx[2]);
/* softnic_ctl_objects (tests/softnic/softnic_ctl.h) of the libibverbs the
 * plugin loaded: the verbs objects alive in this process; NULL when it is
 * not softnic's (gd_rail.c). */
struct gd_objs {
    int64_t qps, cqs, mrs;
};
typedef int (*objects_fn)(struct gd_objs *);
objects_fn gd_find_objects(void);

#endif
