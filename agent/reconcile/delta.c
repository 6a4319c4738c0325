/* delta.c — see delta.h. */
#include "node.h"
#include "reconcile/delta.h"

unsigned node_delta_apply_order(const struct node_plan_delta *d, unsigned *idx, bool *absent)
{
	unsigned i = 0, j = 0, n = 0;

	while (i < d->n_added || j < d->n_changed) {
		if (j >= d->n_changed || (i < d->n_added && d->added[i] < d->changed[j])) {
			absent[n] = true;
			idx[n++] = d->added[i++];
		} else {
			absent[n] = false;
			idx[n++] = d->changed[j++];
		}
	}
	return n;
}
