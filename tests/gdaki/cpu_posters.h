/* tests/gdaki/cpu_posters.h: CPU threads that post to one GPU-initiated
 * queue exactly as kernel threads do (slot reservation, in-order doorbell),
 * shared by the softnic tests of the host-memory and the DEVX queue. */
#ifndef RAILNET_TESTS_CPU_POSTERS_H
#define RAILNET_TESTS_CPU_POSTERS_H

#include "railnet_gdaki.h"

#define CPU_POSTERS_MAX 8

/* nthreads (<= CPU_POSTERS_MAX) threads each write count messages of
 * 1..4096 bytes through p's QP, then quiet; checks every byte (and that
 * nothing lands past a message) and the queue's counters.  p stays open. */
void cpu_posters_run(struct gdaki_pair *p, int nthreads, int count);

/* The same with a GDAKI_SIGNAL_ADD after each message (gdaki_q_post_signal:
 * WRITE, then ATOMIC_FA on one 8-byte signal word shared by all threads;
 * thread t adds t + 1): checks every byte and that the word holds exactly
 * the sum of all adds (needs a device with RDMA atomics). */
void cpu_posters_signal_add_run(struct gdaki_pair *p, int nthreads, int count);

#endif
