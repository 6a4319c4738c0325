/* rcv_window.c — see rcv_window.h. */
#include <inttypes.h>
#include <stdlib.h>

#include "agent.h"
#include "netns.h"
#include "node/rcv_window.h"

static bool profile_sets_equal(const struct profile_set *a, const struct profile_set *b)
{
	if (a->n != b->n)
		return false;
	for (unsigned i = 0; i < a->n && i < PROFILES_MAX; i++)
		if (!streq(a->p[i].name, b->p[i].name) ||
		    profile_content_hash(&a->p[i]) != profile_content_hash(&b->p[i]))
			return false;
	return true;
}

/* The download tree in force (its root on the ifb applied): a pass that
 * stopped at "uplink left alone" planned one but has none. */
static bool down_in_force(const struct agent *ag)
{
	const struct plan_item *it = plan_find_const(&ag->in_force, "down.root");

	return it && (it->status == ITEM_APPLIED || it->status == ITEM_DEGRADED);
}

bool agent_profiles_refresh(struct agent *ag, bool rewant)
{
	uint32_t w = ag->have_info && ag->info.down.planned && down_in_force(ag) ? ag->info.down.rcv_window_bytes : 0;
	uint32_t kmax = w ? sysctl_tcp_rmem_max() : 0;
	struct profile_set eff = ag->cfg.profiles;
	bool changed;

	/* a bound over the kernel's maximum lowers nothing it did not set */
	for (int c = 0; w && c < _CLASS_MAX; c++)
		profile_set_bound_rmem(&eff, (enum workload_class)c,
		                       node_down_rcv_bound(&ag->info, (enum workload_class)c), kmax);
	if (kmax && w > kmax)
		w = kmax;
	changed = !profile_sets_equal(&eff, &ag->profiles);
	ag->profiles = eff;
	if (w != ag->rcv_window) {
		char v[24];

		snprintf(v, sizeof(v), "%" PRIu32, w);
		log_msg(LOG_LVL_INFO,
		        w ? "download tree: the receive window of training pods (and, twice it, inference pods with "
		            "the bands) "
		            "bounded"
		          : "pods' receive window unbounded",
		        "rmemMax", v, (char *)NULL);
		ag->rcv_window = w;
	}
	if (changed && rewant) {
		/* a pod waiting for a retry keeps its backoff: the window follows
		 * the node, not the pod, and a failing re-tune must not be retried
		 * at every change of it */
		unsigned n_pods = ag->pods.n;
		_cleanup_free_ unsigned *retries = calloc(n_pods ? n_pods : 1, sizeof(*retries));
		_cleanup_free_ int64_t *retry_at = calloc(n_pods ? n_pods : 1, sizeof(*retry_at));
		unsigned n;

		for (unsigned i = 0; retries && retry_at && i < n_pods; i++) {
			retries[i] = ag->pods.v[i]->retries;
			retry_at[i] = ag->pods.v[i]->retry_at_ms;
		}
		n = pod_cache_rewant(&ag->pods, &ag->profiles);
		for (unsigned i = 0; retries && retry_at && i < n_pods && i < ag->pods.n; i++)
			if (retry_at[i] >= 0) {
				ag->pods.v[i]->retries = retries[i];
				ag->pods.v[i]->retry_at_ms = retry_at[i];
			}
		if (n > 0)
			sched_kick(&ag->sched, agent_now_ms());
	}
	return changed;
}
