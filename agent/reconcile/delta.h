/* delta.h — the order in which the node's delta is applied (delta.c, pure):
 * what node_plan_delta found added or changed, merged into plan order
 * (parents before children), added items flagged absent (the plan in force
 * is what the kernel has, so an added item is not there: created without a
 * probe). Removals go first, children before parents, in node.c. */
#ifndef AIQOS_AGENT_RECONCILE_DELTA_H
#define AIQOS_AGENT_RECONCILE_DELTA_H

#include <stdbool.h>

struct node_plan_delta;

/* idx and absent have room for d->n_added + d->n_changed entries (each of
 * d->added and d->changed ascending); returns how many were written. */
unsigned node_delta_apply_order(const struct node_plan_delta *d, unsigned *idx, bool *absent);

#endif
