/* plugin/ib/comm_setup_cm.h: listen, connect and accept through the RDMA CM
 * (RAILNET_CM=rdmacm), beside the TCP bootstrap of comm_setup.c, which calls
 * these: comm_listen when RAILNET_CM=rdmacm, comm_connect when the handle
 * says the listener uses the CM, comm_accept/comm_close_listen for a
 * listener made here (its first int is 1).
 *
 * Layer: comms (over comm.h, errors.h, handshake.h, devices.h, rdmacmwrap.h).
 *
 * Contract: as comm_setup.h's (never block; NULL comm until ready; one WARN
 * on failure; RAILNET_HANDSHAKE_TIMEOUT; a peer that breaks the protocol is
 * rejected and the listener goes on), and the comms made are the same: QPs
 * in RTS, the CTS ring and sizes area exchanged (as CM private data,
 * validated like the TCP HELLO/REPLY: handshake.h's CM encodings). The comm
 * has no TCP socket (fd -1) and keeps its CM ids (comm->cm). */
#ifndef RAILNET_IB_COMM_SETUP_CM_H
#define RAILNET_IB_COMM_SETUP_CM_H

#include "handshake.h"
#include "nccl_net_v8.h"

struct comm_opts;
ncclResult_t cmsetup_listen(int dev, const struct comm_opts *opts, void *handle, void **listen_comm);
ncclResult_t cmsetup_connect(int dev, const struct comm_opts *opts, void *handle, const struct hs_handle *h,
                             void **send_comm);
ncclResult_t cmsetup_accept(void *listen_comm, void **recv_comm);
ncclResult_t cmsetup_close_listen(void *listen_comm);

#endif
