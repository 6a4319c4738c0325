/* pod_want.h — what a pod asks of the node, from the API's view of it
 * (pure: the agent's pod cache and `aiqosctl plan` share it): its tuning
 * resolved against the profiles (struct pod_want), its addresses and the
 * node planner's view of it (struct node_pod). */
#ifndef AIQOS_AGENT_POD_WANT_H
#define AIQOS_AGENT_POD_WANT_H

#include <stdbool.h>
#include <stdint.h>

#include "kube/decode.h"
#include "node.h"
#include "profile.h"
#include "workload.h"

/* What the pod's annotations ask for (resolved against the config's profiles). */
struct pod_want {
	enum workload_class class;
	char profile_requested[PROFILE_NAME_MAX]; /* ai.workload/profile, "" = none */
	char profile[PROFILE_NAME_MAX];           /* resolved */
	uint64_t profile_hash;                    /* profile_content_hash of the resolved profile */
	uint64_t egress_bps;
	uint64_t ingress_bps;
	bool ce_marking;                 /* the profile sets a CE threshold (training-dctcp) */
	bool bulk;                       /* ai.workload/bulk: "true" (node.h BANDS) */
	char invalid[WORKLOAD_WARN_LEN]; /* first annotation warning ("" = none) */
};

/* The want of a pod whose annotations read as w, with w's profile resolved to pr. */
void pod_want_from(const struct workload *w, const struct profile *pr, struct pod_want *ret);

/* The node planner's view of a pod (np cleared first): who it is, what it
 * wants, its GPUs. The caller sets its addresses. */
void pod_want_node_pod(const struct pod_want *want, const char *namespace_, const char *name, const char *uid,
                       uint32_t gpus, struct node_pod *np);

/* The bands inside inference (node.h BANDS) of a plan, as the "bands"
 * object of the agent's status (its uplink's) and of `aiqosctl plan --json`
 * (its node's): thresholds,
 * weight, each direction's band (its HTB rate, or training's priority) and
 * a sentence for people ("text"). Nothing is added when the plan has none.
 * Returns -ENOMEM or 0. */
int node_bands_json(const struct node_plan_info *info, struct cJSON *parent);

/* The pod's IPv4 and IPv6 addresses (status.podIPs) as the planner's, at
 * most NODE_POD_IPS_MAX; how many. */
unsigned pod_ips_from_kube(const struct kube_pod *kp, struct node_ip ret[NODE_POD_IPS_MAX]);

#endif
