/* connect.h: setting up a QP's outgoing connection without waiting
 * (connect.c), for the requester's task (requester.c). */
#ifndef SOFTNIC_CONNECT_H
#define SOFTNIC_CONNECT_H

#include "softnic.h"

struct sn_conn_setup {
    int fd;                        /* -1: none under way */
    enum { CONN_TCP, CONN_HELLO, CONN_ANSWER, CONN_OFFER } state;
    struct sn_wire_hello hello;
    size_t hello_sent;
    struct sn_wire_resp answer;
    size_t answer_got;
    struct sn_wire_push_offer offer;   /* valid when the answer offered the push */
    size_t offer_got;
};

/* Starts a connection from qp's port to its remote (GID, QPN): 0 (cs->fd
 * set), or an errno.  qp->lock held. */
int conn_start(struct sn_conn_setup *cs, struct sn_qp *qp);
/* Takes the set-up as far as it goes now: 0 once the connection carries
 * requests (*cma: its responder pulls payloads, cma.c; cs->offer holds the
 * push offer when cs->answer.syndrome has SN_ANSWER_PUSH); EINPROGRESS with
 * *io the SN_ENG_IN/OUT to wait for; or why it failed (the caller stops
 * watching cs->fd, then conn_abort closes it). */
int conn_advance(struct sn_conn_setup *cs, bool *cma, unsigned *io);
/* Gives up a set-up under way (the QP stops or failed). */
void conn_abort(struct sn_conn_setup *cs);

#endif
