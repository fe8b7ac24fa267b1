/* tests/minimpi/minimpi_shm.h: the file a job of minimpi shares, as
 * minimpirun creates it and libmpi.so maps it.
 *
 * minimpirun creates the file (in $MINIMPI_SHM_DIR, default /dev/shm), sized
 * for the job, zeroed, with the header below, and hands its path to each rank
 * in MINIMPI_SHM, with MINIMPI_RANK and MINIMPI_SIZE. Each communicator owns
 * one channel: a barrier in the header and one slot of MINIMPI_SLOT_BYTES per
 * rank of the job in the data area, which the collectives fill and read
 * between barriers (larger payloads go in chunks). Channel 0 is
 * MPI_COMM_WORLD; MPI_Comm_split takes new channel numbers from next_chan.
 * When the job is aborted, `abort` says why (MINIMPI_ABORT_*): the launcher
 * or a rank that gives up sets it once, and waiting ranks stop waiting. */
#ifndef MINIMPI_SHM_H
#define MINIMPI_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "mpi.h"

#define MINIMPI_MAGIC 0x3149504d494e494dULL /* "MINIMPI1" */
#define MINIMPI_SLOT_BYTES ((size_t)64 * 1024)
#define MINIMPI_MAX_RANKS 1024
#define MINIMPI_CHANNELS MINIMPI_MAX_COMMS

enum minimpi_abort_reason {
    MINIMPI_ABORT_EXIT = 1,        /* a rank exited with a non-zero status */
    MINIMPI_ABORT_SIGNALED = 2,    /* a rank was killed by a signal */
    MINIMPI_ABORT_TIMEOUT = 3,     /* minimpirun --timeout passed */
    MINIMPI_ABORT_INTERRUPTED = 4, /* minimpirun got a signal (status: its number) */
    MINIMPI_ABORT_GAVE_UP = 5,     /* a rank's MPI call failed */
};

/* abort: reason << 56 | rank << 32 | status, set once from 0. */
static inline uint64_t minimpi_abort_word(int reason, int rank, int status)
{
    return (uint64_t)(reason & 0xff) << 56 | (uint64_t)(rank & 0xffffff) << 32 | (uint32_t)status;
}
static inline int minimpi_abort_reason(uint64_t w) { return (int)(w >> 56); }
static inline int minimpi_abort_rank(uint64_t w) { return (int)((w >> 32) & 0xffffff); }
static inline int minimpi_abort_status(uint64_t w) { return (int)(uint32_t)w; }

struct minimpi_channel {
    uint32_t arrived;   /* ranks in the barrier now */
    uint32_t gen;       /* barriers completed */
    int64_t aux;        /* MPI_Comm_split: the channels it took (or -1) */
    char pad[48];
};

struct minimpi_shm {
    uint64_t magic;
    uint32_t size;          /* ranks in the job */
    int32_t launcher_pid;
    uint32_t next_chan;     /* channels handed out (starts at 1: MPI_COMM_WORLD) */
    uint32_t pad0;
    uint64_t abort;
    char pad1[32];
    struct minimpi_channel chan[MINIMPI_CHANNELS];
};

/* The data area starts at a page boundary after the header. */
static inline size_t minimpi_data_offset(void)
{
    return (sizeof(struct minimpi_shm) + 4095) & ~(size_t)4095;
}

static inline size_t minimpi_file_bytes(uint32_t size)
{
    return minimpi_data_offset() + (size_t)MINIMPI_CHANNELS * size * MINIMPI_SLOT_BYTES;
}

#endif
