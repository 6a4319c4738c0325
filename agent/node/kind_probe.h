/* kind_probe.h — does this kernel have a qdisc kind? Asked of the lo of a
 * scratch network namespace, in a child process, so nothing on the node is
 * touched. The planner's EDT layout needs fq (node.h, "EDT"): trying it on
 * the uplink would replace the uplink's tree only to learn fq is missing
 * and put HTB back, after every agent restart. */
#ifndef AIQOS_AGENT_NODE_KIND_PROBE_H
#define AIQOS_AGENT_NODE_KIND_PROBE_H

#include "error.h"
#include "tc/tc.h"

/* 1: the kernel created the qdisc; 0: the kernel refused the kind as
 * missing (its errno in *ret_errno); < 0: the probe itself failed (no
 * CAP_SYS_ADMIN for a network namespace, fork): nothing was learnt. */
int kind_probe_qdisc(enum tc_kind_id k, int *ret_errno, struct error *err);

#endif
