/* internal.h — between the files of reconcile/: the pod and node halves of
 * a pass (pod.c, node.c) that reconcile.c's agent_pass runs. */
#ifndef AIQOS_AGENT_RECONCILE_INTERNAL_H
#define AIQOS_AGENT_RECONCILE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

struct agent;

/* Re-tune the pods that are dirty, to announce, or (retry_due) whose retry
 * is due. */
void pods_reconcile(struct agent *ag, int64_t now_ms, bool retry_due);
/* The node: mode, uplink plan, the delta applied; observe = read the kernel
 * first (adoption, drift repair). */
void node_reconcile(struct agent *ag, int64_t now_ms, bool observe);
/* Let go of the uplink classifier's maps (node.c; the attached program
 * keeps them). */
void classifier_forget(struct agent *ag);
void gate_forget(struct agent *ag);
/* Seconds since t0_ms (agent_now_ms). */
double seconds_since(int64_t t0_ms);

#endif
