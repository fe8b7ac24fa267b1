/* plugin/ib/area.h: memory a connection's peer writes into by RDMA (its CTS
 * ring, its sizes area) or the NIC reads (staging).
 *
 * area_alloc returns len bytes (rounded up to whole pages), zeroed and
 * page-aligned, or NULL; *fd is an fd of the memory while it has one (-1
 * otherwise), which the caller closes once the memory is registered.
 * Memory a peer writes into (shared != 0) is a MAP_SHARED mapping of a
 * memfd sealed against resizing, not heap memory: a NIC sees the same pages
 * either way, and a software NIC on the same host (softnic) can map them and
 * place the peer's small writes with a store instead of a system call, as
 * a NIC places them without a CPU.  Kept out of forked children either way.
 * area_release unmaps it. */
#ifndef RAILNET_IB_AREA_H
#define RAILNET_IB_AREA_H

#include <stddef.h>

void *area_alloc(size_t len, int shared, int *fd);
void area_release(void *p, size_t len);

#endif
