/* attach.c — the attachment plumbing the plugin's verbs and the agent share
 * (see attach.h): single link lookups (no dumps) to find and verify the pod
 * interface and its host-side veth, the plan of a stored attachment rebuilt
 * with the one planner, its removal, and its one-line summary. */
#include <stdarg.h>

#include "attach.h"
#include "netns.h"
#include "reason.h"

void attach_init(struct attach *a)
{
	memset(a, 0, sizeof(*a));
	a->pod_nsfd = -1;
	a->target.pod_nsfd = -1;
}

void attach_close(struct attach *a)
{
	if (a->pod_sk)
		nl_close(a->pod_sk);
	if (a->host_sk)
		nl_close(a->host_sk);
	if (a->pod_nsfd >= 0)
		close(a->pod_nsfd);
	attach_init(a);
}

void attach_target_fill(struct attach *a)
{
	a->target = (struct apply_target){
	        .pod_nsfd = a->pod_nsfd,
	        .pod_sk = a->pod_sk,
	        .pod_ifindex = a->pod.ifindex,
	        .host_sk = a->host.ifindex ? a->host_sk : NULL,
	        .host_ifindex = a->host.ifindex,
	        .uplink_ifindex = 0,
	};
}

bool attach_host_link_is_peer(const struct link_info *h, const struct link_info *pod)
{
	return streq(h->kind, "veth") && (h->peer_ifindex == 0 || h->peer_ifindex == pod->ifindex);
}

int attach_open_host(struct attach *a, const struct attach_state *s, struct error *err)
{
	struct link_info li = {0};
	int r;

	if (!s->ifs.host_ifname[0] || s->host_ifindex <= 0)
		return 0;
	if (!a->host_sk) {
		r = nl_open(&a->host_sk, err);
		if (r < 0) {
			error_prefix(err, "open rtnetlink in the host netns");
			return r;
		}
	}
	r = nl_link_get(a->host_sk, s->ifs.host_ifname, 0, &li, err);
	if (r == -ENODEV) {
		error_clear(err);
		return 0; /* gone with the pod netns */
	}
	if (r < 0) {
		error_prefix(err, "look up host veth %s", s->ifs.host_ifname);
		return r;
	}
	if (li.ifindex != s->host_ifindex || !streq(li.kind, "veth"))
		return 0; /* the name was reused by another device: not ours */
	a->host = li;
	str_copy(a->ifs.host_ifname, sizeof(a->ifs.host_ifname), li.ifname);
	attach_target_fill(a);
	return 1;
}

int attach_open_pod(struct attach *a, const char *netns, const struct attach_state *s, struct error *err)
{
	struct link_info li = {0};
	int r;

	if (!netns || !netns[0])
		return 0;
	r = netns_open(netns, &a->pod_nsfd, err);
	if (r == -ENOENT) {
		error_clear(err);
		return 0;
	}
	if (r < 0)
		return r;
	r = nl_open_in_netns(a->pod_nsfd, &a->pod_sk, err);
	if (r < 0) {
		error_prefix(err, "open rtnetlink in netns %s", netns);
		return r;
	}
	r = nl_link_get(a->pod_sk, s->ifname, 0, &li, err);
	if (r == -ENODEV) {
		error_clear(err);
		return 0;
	}
	if (r < 0) {
		error_prefix(err, "pod interface %s in netns %s", s->ifname, netns);
		return r;
	}
	if (s->pod_ifindex > 0 && li.ifindex != s->pod_ifindex)
		return 0;
	a->pod = li;
	str_copy(a->ifs.pod_ifname, sizeof(a->ifs.pod_ifname), li.ifname);
	a->ifs.mtu = li.mtu;
	attach_target_fill(a);
	return 1;
}

const struct profile *attach_profile_for_state(const struct profile_set *set, const struct attach_state *s,
                                               bool *ret_changed)
{
	const struct profile *p;

	if (ret_changed)
		*ret_changed = false;
	/* the profile the record was applied with, whatever the config says now */
	if (s->has_profile_spec && s->profile_spec.class == s->workload.class)
		return &s->profile_spec;
	p = s->profile[0] ? profile_find(set, s->profile) : NULL;
	if (p && p->class == s->workload.class)
		return p;
	if (ret_changed)
		*ret_changed = true;
	return profile_resolve(set, &s->workload, NULL, 0);
}

int attach_plan_restore(const struct profile_set *set, struct attach_state *s, const struct cJSON *choices,
                        bool *ret_profile_changed, struct error *err)
{
	const struct profile *p = attach_profile_for_state(set, s, ret_profile_changed);
	struct plan_caps caps = {0};
	int r;

	r = plan_pod(&s->workload, p, &s->ifs, &caps, &s->plan);
	if (r < 0)
		return error_set(err, CNI_ERR_STATE, -r, "re-plan container %s ifname %s: %s", s->container_id,
		                 s->ifname, strerror(-r));
	s->plan.choices_unknown = s->pending;
	if (choices) {
		r = plan_choices_from_json(&s->plan, choices, err);
		if (r < 0) {
			if (err && !err->code)
				err->code = CNI_ERR_STATE;
			error_prefix(err, "state of container %s ifname %s", s->container_id, s->ifname);
			return r;
		}
	}
	return 0;
}

int attach_plan_remove(const struct plan *p, const struct attach *a, struct error *err)
{
	struct error e = {0};
	int first = 0, r;

	if (a->target.host_sk && a->target.host_ifindex > 0) {
		r = apply_remove(p, DEV_HOST, &a->target, &e);
		if (r < 0 && !first) {
			first = r;
			if (err)
				*err = e;
		}
	}
	if (a->target.pod_sk && a->target.pod_ifindex > 0) {
		error_clear(&e);
		r = apply_remove(p, DEV_POD, &a->target, &e);
		if (r < 0 && !first) {
			first = r;
			if (err)
				*err = e;
		}
	}
	return first;
}

static const char *item_effective_name(const struct plan_item *it, int alt)
{
	if (alt < 0 || (unsigned)alt >= it->n_alt || alt >= PLAN_ALT_MAX)
		return "none";
	if (it->type == ITEM_TC) {
		const struct tc_kind *k = tc_kind_get(it->tc[alt].kind);
		return k && k->name ? k->name : "?";
	}
	return it->val[alt];
}

void attach_plan_summary(const struct plan *p, char *effective, size_t eff_size, char *degraded, size_t deg_size)
{
	if (eff_size)
		effective[0] = '\0';
	if (deg_size)
		degraded[0] = '\0';
	for (unsigned i = 0; i < p->n; i++) {
		const struct plan_item *it = &p->items[i];
		char why[REASON_MAX];

		switch (it->status) {
		case ITEM_APPLIED:
			str_append_sep(effective, eff_size, ',', "%s=%s", it->id, item_effective_name(it, it->chosen));
			break;
		case ITEM_DEGRADED:
			str_append_sep(effective, eff_size, ',', "%s=%s", it->id, item_effective_name(it, it->chosen));
			str_append_sep(degraded, deg_size, ',', "%s=%s(wanted %s: %s)", it->id,
			               item_effective_name(it, it->chosen), item_effective_name(it, 0),
			               reason_item(it, why, sizeof(why)));
			break;
		case ITEM_SKIPPED:
			str_append_sep(degraded, deg_size, ',', "%s=skipped(%s)", it->id,
			               reason_item(it, why, sizeof(why)));
			break;
		default:
			break;
		}
	}
}
