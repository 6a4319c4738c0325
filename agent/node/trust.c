/* trust.c — whether the uplink may classify by DSCP (classify "dscp"): only
 * when every pod that sends through it was re-marked by aiqos (the default
 * class to 0), so a pod setting IP_TOS itself cannot take the inference
 * class. Where the kernel cannot re-mark (no act_pedit/act_csum: the marking
 * filters were skipped) or a pod's record shows no marking, the node plan
 * classifies by source address instead, with a warning in the log, the
 * reason in `aiqosctl status` (uplink.classifyEffective/classifyWhy) and a
 * Warning Event DSCPNotTrusted on the pods whose marks cannot be guaranteed.
 * Pure bookkeeping over the pod cache; reconcile/node.c asks it per node pass. */
#include <cjson/cJSON.h>

#include "agent.h"
#include "node/trust.h"
#include "reconcile/reconcile.h"

static bool status_effective(const char *s)
{
	return s && (streq(s, "applied") || streq(s, "degraded"));
}

bool agent_plan_marks(const struct plan *p)
{
	const struct plan_item *v4 = plan_find_const(p, "dscp.v4"), *v6 = plan_find_const(p, "dscp.v6");

	return v4 && v6 && plan_item_effective_tc(v4) && plan_item_effective_tc(v6);
}

bool agent_choices_mark(const cJSON *choices)
{
	bool v4 = false, v6 = false;
	const cJSON *c;

	cJSON_ArrayForEach(c, choices)
	{
		const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "id"));
		const char *st = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "status"));

		if (id && streq(id, "dscp.v4"))
			v4 = status_effective(st);
		else if (id && streq(id, "dscp.v6"))
			v6 = status_effective(st);
	}
	return v4 && v6;
}

/* Why pod p's traffic is not re-marked by aiqos ("" = it is). */
static void pod_unmarked_why(const struct agent *ag, const struct agent_pod *p, char *why, size_t size)
{
	why[0] = '\0';
	if (!pod_counts_for_node(p, ag->api_listed))
		return;
	if (p->n_att == 0 && p->in_api && p->n_ips > 0) {
		snprintf(why, size, "pod %s/%s has addresses but no aiqos attachment: its traffic is not re-marked",
		         p->namespace_, p->name);
		return;
	}
	for (unsigned k = 0; k < p->n_att; k++)
		if (!p->att[k].marks) {
			snprintf(why, size, "pod %s/%s (%s) is not re-marked: its marking filters %s", p->namespace_,
			         p->name, p->att[k].ifname,
			         p->att[k].failed ? "failed" : "were skipped or are not in its plan yet");
			return;
		}
}

bool agent_dscp_trusted(struct agent *ag)
{
	char why[sizeof(ag->classify_why)] = "", pod_why[sizeof(ag->classify_why)];

	if (ag->cfg.node.classify != CLASSIFY_DSCP) {
		ag->classify_why[0] = '\0';
		return true;
	}
	if (ag->pod_caps.missing_pedit)
		snprintf(
		        why, sizeof(why), "the kernel cannot rewrite the DS field (act_pedit/act_csum: %s)",
		        strerror(ag->pod_caps.missing_pedit_errno > 0 ? ag->pod_caps.missing_pedit_errno : EOPNOTSUPP));
	for (unsigned i = 0; i < ag->pods.n; i++) {
		struct agent_pod *p = ag->pods.v[i];

		pod_unmarked_why(ag, p, pod_why, sizeof(pod_why));
		if (!pod_why[0])
			continue;
		if (!why[0])
			str_copy(why, sizeof(why), pod_why);
		if (!p->dscp_warned) {
			agent_pod_event(ag, p, true, "DSCPNotTrusted",
			                "classify \"dscp\": %s; the uplink classifies by source address instead",
			                pod_why);
			p->dscp_warned = true;
		}
	}
	if (!streq(why, ag->classify_why)) {
		if (!why[0])
			log_msg(LOG_LVL_INFO, "classify dscp: every pod is re-marked, the uplink classifies by DSCP",
			        (char *)NULL);
		else
			log_msg(LOG_LVL_WARN,
			        "classify dscp: marks not trusted, the uplink classifies by source address", "reason",
			        why, (char *)NULL);
		str_copy(ag->classify_why, sizeof(ag->classify_why), why);
	}
	return !why[0];
}
