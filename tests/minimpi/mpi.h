/* tests/minimpi/mpi.h: the part of MPI that NVIDIA's nccl-tests use, for
 * running them with several processes on one host that has no MPI.
 *
 * Contract
 * - Processes: minimpirun -n N starts the N ranks of one job on this host
 *   (see minimpirun --help). A program started without it is a job of one
 *   rank (a singleton, as with real MPI).
 * - Supported: MPI_Init, MPI_Finalize, MPI_Comm_size, MPI_Comm_rank,
 *   MPI_Barrier, MPI_Bcast, MPI_Gather, MPI_Allgather, MPI_Allreduce,
 *   MPI_Comm_split, MPI_Comm_free, with the signatures of MPI-3.
 *   MPI_IN_PLACE: as the send buffer of MPI_Allreduce, of MPI_Allgather (the
 *   send count and type are then ignored, MPI_DATATYPE_NULL included) and of
 *   MPI_Gather at the root.
 *   Datatypes: MPI_BYTE, MPI_INT, MPI_LONG, MPI_LONG_LONG (= MPI_LONG_LONG_INT),
 *   MPI_INT64_T, MPI_DOUBLE. Reductions: MPI_SUM, MPI_MIN, MPI_MAX on every
 *   type but MPI_BYTE; every rank gets the same result (the values are
 *   combined in rank order; integer sums wrap around).
 *   MPI_Comm_split: colours >= 0 or MPI_UNDEFINED (which gives MPI_COMM_NULL),
 *   new ranks ordered by (key, rank in the parent).
 * - Not supported: point-to-point, requests, derived datatypes, other
 *   operations, intercommunicators, MPI_Comm_dup and everything else. A job
 *   creates at most MINIMPI_MAX_COMMS communicators in all (MPI_COMM_WORLD
 *   included; a freed one is not reused) and has at most 1024 ranks.
 * - Threads: calls from one thread at a time (MPI_THREAD_SERIALIZED).
 * - Collectives: every rank of the communicator calls the same ones in the
 *   same order with matching sizes (as MPI requires; a mismatch is not
 *   detected and ends in the wait timeout below).
 * - Errors are fatal by default (as MPI_ERRORS_ARE_FATAL): the call prints
 *   why on stderr ("minimpi: rank R: MPI_Xxx: ..."), marks the job aborted
 *   (so the other ranks give up too) and the process exits with status 1.
 *   With MINIMPI_ERRORS=return the call returns an MPI_ERR_* code instead;
 *   after a failed wait every later collective fails the same way.
 * - Waits never hang for ever: a rank waiting for the others gives up when
 *   the job is aborted (a rank failed, minimpirun's --timeout, a signal),
 *   when minimpirun is gone, or after MINIMPI_WAIT_TIMEOUT seconds without
 *   the others arriving (default 600; 0: no limit of its own).
 */
#ifndef MINIMPI_MPI_H
#define MINIMPI_MPI_H

#ifdef __cplusplus
extern "C" {
#endif

typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;

/* Communicators. */
#define MPI_COMM_NULL ((MPI_Comm)0)
#define MPI_COMM_WORLD ((MPI_Comm)1)
#define MINIMPI_MAX_COMMS 128

/* Datatypes (MPI_Datatype() in C++ is MPI_DATATYPE_NULL). */
#define MPI_DATATYPE_NULL ((MPI_Datatype)0)
#define MPI_BYTE ((MPI_Datatype)1)
#define MPI_INT ((MPI_Datatype)2)
#define MPI_LONG ((MPI_Datatype)3)
#define MPI_LONG_LONG ((MPI_Datatype)4)
#define MPI_LONG_LONG_INT MPI_LONG_LONG
#define MPI_INT64_T ((MPI_Datatype)5)
#define MPI_DOUBLE ((MPI_Datatype)6)

/* Reduction operations (MPI_Op() in C++ is MPI_OP_NULL). */
#define MPI_OP_NULL ((MPI_Op)0)
#define MPI_SUM ((MPI_Op)1)
#define MPI_MIN ((MPI_Op)2)
#define MPI_MAX ((MPI_Op)3)

#define MPI_IN_PLACE ((void *)1)
#define MPI_UNDEFINED (-32766)

/* Return codes. */
#define MPI_SUCCESS 0
#define MPI_ERR_BUFFER 1   /* a NULL buffer where data goes */
#define MPI_ERR_COUNT 2    /* a negative count, or send and receive sizes differ */
#define MPI_ERR_TYPE 3     /* an unknown datatype */
#define MPI_ERR_COMM 4     /* an unknown or freed communicator */
#define MPI_ERR_ROOT 5     /* a root outside the communicator */
#define MPI_ERR_OP 6       /* an unknown operation, or one the type has not */
#define MPI_ERR_ARG 7      /* another bad argument */
#define MPI_ERR_INTERN 8   /* out of communicators */
#define MPI_ERR_OTHER 9    /* not initialised, job aborted, wait timed out */
#define MPI_ERR_LASTCODE 9

int MPI_Init(int *argc, char ***argv);
int MPI_Finalize(void);
int MPI_Comm_size(MPI_Comm comm, int *size);
int MPI_Comm_rank(MPI_Comm comm, int *rank);
int MPI_Barrier(MPI_Comm comm);
int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
               void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                  void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                  MPI_Op op, MPI_Comm comm);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm);
int MPI_Comm_free(MPI_Comm *comm);

#ifdef __cplusplus
}
#endif

#endif
