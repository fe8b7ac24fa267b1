/* plugin/ib/comm_setup.h: listen, connect and accept (docs/design.md, "A
 * connection", steps 1-2): the handshake that builds a comm.
 *
 * Layer: comms (over comm.h, errors.h, oob.h, handshake.h, devices.h).
 *
 * Connect and accept are one state machine with two step lists (one per
 * side of the exchange HELLO -> REPLY -> READY); each step is written once.
 *
 * Contract:
 *  - comm_listen fills the 128-byte handle and never blocks.
 *  - comm_connect / comm_accept never block: they advance the state machine
 *    and return ncclSuccess with *comm == NULL until the connection is ready,
 *    or an error (with one WARN saying why) when the handshake fails:
 *    corrupted bytes, another protocol version, a handle of another device,
 *    a peer that went away, or a handshake that did not finish within
 *    RAILNET_HANDSHAKE_TIMEOUT (a silent peer must not hold a listener or a
 *    connect forever). A failed connect/accept frees what it had built.
 *  - A listener carries up to 8 handshakes at once; a peer that breaks the
 *    protocol is dropped with a WARN and the listener goes on (a stranger on
 *    the port must not fail the job, nor keep the expected peers out).
 *  - comm_close_listen frees the listener and its handshakes in progress;
 *    NULL is accepted. */
#ifndef RAILNET_IB_COMM_SETUP_H
#define RAILNET_IB_COMM_SETUP_H

#include "nccl_net_v8.h"

struct comm_opts;
/* opts (NULL: defaults) apply to every comm the listener accepts / to the
 * connection (the first call of a connect decides). */
ncclResult_t comm_listen(int dev, const struct comm_opts *opts, void *handle, void **listen_comm);
ncclResult_t comm_connect(int dev, const struct comm_opts *opts, void *handle, void **send_comm);
ncclResult_t comm_accept(void *listen_comm, void **recv_comm);
ncclResult_t comm_close_listen(void *listen_comm);

#endif
