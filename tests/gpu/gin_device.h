/* tests/gpu/gin_device.h: NCCL device-API GIN cases (tests/gpu/gin_device.cu),
 * driven by tests/gpu/gin_driver.c, one process per rank.
 *
 * gin_env_open() makes, on an initialized communicator, what every case
 * uses: two symmetric windows (ncclMemAlloc + ncclCommWindowRegister with
 * NCCL_WIN_COLL_SYMMETRIC) of win_bytes each, and one device communicator
 * with GIN (signals, counters, a GIN barrier over the world team). It is
 * collective: every rank calls it with the same win_bytes.
 *
 * Every case is collective too: all ranks run the same case with the same
 * arguments, in the same order. A case returns 0 when this rank's bytes,
 * signals and counters are all as expected, 1 when something differs (why
 * says what, with expected and actual), and -1 when it could not run
 * (an NCCL or CUDA error, or the kernel did not finish within the timeout
 * given to gin_env_open: a peer that never signals would otherwise hang).
 * After -1 the environment is unusable: close it with gin_env_abort().
 *
 * Data: every byte a rank sends is a function of (source rank, destination
 * rank, case tag, index), so the receiver checks each byte it got, and that
 * the bytes around each destination range were left alone. */
#ifndef RAILNET_TESTS_GPU_GIN_DEVICE_H
#define RAILNET_TESTS_GPU_GIN_DEVICE_H

#include <nccl.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct gin_env;

int gin_env_open(ncclComm_t comm, size_t win_bytes, int timeout_s, struct gin_env **out,
                 char *why, size_t whylen);
/* Orderly teardown (device communicator, windows, memory); after a case
 * returned -1 use gin_env_abort, which frees nothing the GPU may still use. */
void gin_env_close(struct gin_env *env);
void gin_env_abort(struct gin_env *env);

/* put of `bytes` from the send window into the next rank's receive window
 * (source and destination offsets deliberately unaligned), no signal; a GIN
 * barrier then makes it visible (puts settle before the barrier's signal). */
int gin_case_put(struct gin_env *env, size_t bytes, char *why, size_t whylen);
/* nput puts of `bytes` to every peer, each with ncclGin_SignalInc on a signal
 * per source rank; the receiver waits for 1, 2, ... nput and checks slot k on
 * the GPU as soon as the signal says k+1 (the signal never overtakes its data);
 * the signal ends at exactly nput. */
int gin_case_put_signal_inc(struct gin_env *env, size_t bytes, int nput, char *why, size_t whylen);
/* Same with ncclGin_SignalAdd of distinct values, the last above 2^32: the
 * signal ends at exactly their sum. */
int gin_case_put_signal_add(struct gin_env *env, size_t bytes, int nput, char *why, size_t whylen);
/* nput puts with ncclGin_CounterInc: waitCounter(nput) returns, the counter
 * ends at exactly nput, and the data arrived. */
int gin_case_counter(struct gin_env *env, size_t bytes, int nput, char *why, size_t whylen);
/* nput puts, flush, then the kernel overwrites its source: the receiver must
 * see the data as it was before the overwrite (flush = sources consumed). */
int gin_case_flush(struct gin_env *env, size_t bytes, int nput, char *why, size_t whylen);
/* rounds x (an 8-byte put of the round number to every peer, GIN barrier,
 * read every peer's value): a value from the round before is a barrier that
 * did not wait, or a put that was not settled by it. */
int gin_case_barrier(struct gin_env *env, int rounds, char *why, size_t whylen);
/* The same with putValue (the value travels inline in NCCL's descriptor). */
int gin_case_put_value(struct gin_env *env, int rounds, char *why, size_t whylen);
/* alltoall over the symmetric windows: chunk bytes to and from every rank
 * (own chunk copied locally), nblocks CTAs each with its own GIN context,
 * signal and barrier; every received byte checked. */
int gin_case_alltoall(struct gin_env *env, size_t chunk, char *why, size_t whylen);

/* Benchmarks (rank 0's numbers are the job's). alltoall of `bytes` per rank
 * (bytes / nranks to each rank), iters launches timed after 2 warm-ups:
 * *seconds per launch. Ping-pong between ranks 0 and 1: an 8-byte put with
 * SignalInc, the peer answers when its signal moves; *seconds per round trip. */
int gin_bench_alltoall(struct gin_env *env, size_t bytes, int iters, double *seconds, char *why,
                       size_t whylen);
int gin_bench_pingpong(struct gin_env *env, int iters, double *seconds, char *why, size_t whylen);

/* Kill mode (gin_driver.c's --mode kill; ranks 0 and 1 of a 2-rank job).
 * gin_kill_launch starts, on every rank, a kernel that begins with a GIN
 * barrier and then plays `rounds` ping-pong rounds between ranks 0 and 1 (an
 * 8-byte put with SignalInc each way). Then rank 1 stops answering and spins
 * (its host kills the process while it runs), and rank 0 goes on: one put
 * with SignalInc to rank 1 every 100 ms, `puts` of them at most, waiting
 * for an answer that never comes. Both caps keep every put far below the
 * queues' depth (NCCL's proxy queue, a GDAKI send queue), so that NCCL's
 * device code never waits for room. The kernel ends when the host asks
 * (gin_kill_stop) or deadline_s after it started: it can never hang the
 * test by itself. Progress is in host memory mapped for the GPU, read
 * without touching the stream. */
struct gin_kill_status {
    unsigned int puts;   /* puts this rank's kernel has issued */
    unsigned int seen;   /* signals from the peer it has seen */
    unsigned int ended;  /* GIN_KILL_RUNNING, _STOPPED or _DEADLINE */
};
enum { GIN_KILL_RUNNING = 0, GIN_KILL_STOPPED = 1, GIN_KILL_DEADLINE = 2 };
int gin_kill_launch(struct gin_env *env, int rounds, int puts, int deadline_s, char *why, size_t whylen);
void gin_kill_read(struct gin_env *env, struct gin_kill_status *st);
void gin_kill_stop(struct gin_env *env);
/* 1 when the kernel has ended, 0 while it runs, -1 on a CUDA error (why). */
int gin_kill_done(struct gin_env *env, char *why, size_t whylen);

#ifdef __cplusplus
}
#endif
#endif
