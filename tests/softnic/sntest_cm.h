/* tests/softnic/sntest_cm.h: helpers for the tests of softnic's librdmacm.
 *
 * Apart from sntest.h because libsntest.la goes into every softnic test,
 * and only the CM tests link -lrdmacm (and are built only where
 * librdmacm-dev's headers are there). */
#ifndef SNTEST_CM_H
#define SNTEST_CM_H

#include <rdma/rdma_cma.h>

/* The next event on ch within ms (NULL on timeout or a failed read). */
struct rdma_cm_event *st_cm_next_event(struct rdma_event_channel *ch, int ms);

#endif
