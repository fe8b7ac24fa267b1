/* tests/softnic/sntest_cm.c: helpers for the tests of softnic's librdmacm
 * (sntest_cm.h). */
#include "sntest_cm.h"

#include <poll.h>
#include <string.h>

#include "../tap.h"

struct rdma_cm_event *st_cm_next_event(struct rdma_event_channel *ch, int ms)
{
    /* poll first: rdma_get_cm_event blocks, and a case that waits for an
     * event that never comes must fail, not hang */
    struct pollfd p = { .fd = ch->fd, .events = POLLIN };
    struct rdma_cm_event *e = NULL;
    if (poll(&p, 1, ms) != 1 || rdma_get_cm_event(ch, &e))
        return NULL;
    return e;
}

bool st_cm_expect_event(struct rdma_event_channel *ch, enum rdma_cm_event_type type, int status, int ms)
{
    struct rdma_cm_event *e = st_cm_next_event(ch, ms);
    EXPECT_TRUE(e != NULL);
    if (!e)
        return false;
    EXPECT_STREQ(rdma_event_str(type), rdma_event_str(e->event));
    EXPECT_EQ_INT(status, e->status);
    rdma_ack_cm_event(e);
    return true;
}
