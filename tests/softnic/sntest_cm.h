/* tests/softnic/sntest_cm.h: helpers for the tests of softnic's librdmacm.
 *
 * Apart from sntest.h because libsntest.la goes into every softnic test,
 * and only the CM tests link -lrdmacm (and are built only where
 * librdmacm-dev's headers are there). */
#ifndef SNTEST_CM_H
#define SNTEST_CM_H

#include <rdma/rdma_cma.h>
#include <stdbool.h>

/* The next event on ch within ms (NULL on timeout or a failed read). */
struct rdma_cm_event *st_cm_next_event(struct rdma_event_channel *ch, int ms);
/* The next event on ch within ms must be type with status (the case fails
 * otherwise); it is acked. False when none came. */
bool st_cm_expect_event(struct rdma_event_channel *ch, enum rdma_cm_event_type type, int status, int ms);

#endif
