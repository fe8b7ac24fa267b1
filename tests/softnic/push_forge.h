/* push_forge.h: for the tests, this process's push region (push.c) as a
 * peer writes it: mapped through softnic's own fd of it, a receive the
 * region shows found by its buffer, and a record written in it as a
 * pusher writes one.  Layout: push_region.h. */
#ifndef SOFTNIC_PUSH_FORGE_H
#define SOFTNIC_PUSH_FORGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "push_region.h"

/* The region mapped again (*len its size), or NULL when this process has
 * none (SOFTNIC_PUSH=0, no pidfd_open) or of another layout version. */
struct push_region *push_forge_map(size_t *len);

/* The shown receive of buffer addr and lkey: its QP's slot and its place
 * k in the window; false when no slot among the first few shows it. */
bool push_forge_find_shown(struct push_region *r, uint64_t addr, uint32_t lkey, struct push_qp **slot, uint32_t *k);

/* The receive index of the receive shown at k (its seq's count, less 1). */
uint64_t push_forge_index(const struct push_qp *s, uint32_t k);

/* Writes record k of slot s for the receive shown there, as a pusher of
 * op does: 8 bytes of 0x5a to go to addr of key, waiting to land. */
void push_forge_record(struct push_qp *s, uint32_t k, uint32_t op, uint32_t key, uint64_t addr);

#endif
