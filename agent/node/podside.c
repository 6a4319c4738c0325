/* podside.c — see podside.h. */
#include <bpf/bpf.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <unistd.h>

#include <netlink/route/link.h>

#include "agent.h"
#include "bpf_cls.h"
#include "nl.h"
#include "node/podside.h"

#define PARENT_EGRESS TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS)

static struct tc_spec spec_clsact(void)
{
	return (struct tc_spec){
	        .type = TC_QDISC, .kind = TC_KIND_CLSACT, .parent = TC_H_CLSACT, .handle = TC_H_MAKE(TC_H_CLSACT, 0)};
}

static struct tc_spec spec_classifier(int prog_fd)
{
	struct tc_spec s = {.type = TC_FILTER,
	                    .kind = TC_KIND_BPF,
	                    .parent = PARENT_EGRESS,
	                    .handle = 1,
	                    .prio = NODE_FILTER_PRIO_DOWN_CLS,
	                    .protocol = ETH_P_ALL};

	str_copy(s.u.bpf.name, sizeof(s.u.bpf.name), BPF_DCLS_NAME);
	s.u.bpf.flags = TCA_BPF_FLAG_ACT_DIRECT;
	s.u.bpf.prog_fd = prog_fd;
	return s;
}

static struct tc_spec spec_redirect(int ifb_ifindex)
{
	struct tc_spec s = {.type = TC_FILTER,
	                    .kind = TC_KIND_U32,
	                    .parent = PARENT_EGRESS,
	                    .handle = NODE_REDIRECT_HANDLE,
	                    .prio = NODE_FILTER_PRIO_UP_REDIRECT,
	                    .protocol = ETH_P_ALL};

	s.u.u32.match = U32_MATCH_ALL;
	s.u.u32.dscp = -1;
	s.u.u32.redirect_ifindex = ifb_ifindex;
	str_copy(s.u.u32.redirect_dev, sizeof(s.u.u32.redirect_dev), PLAN_IFB_NAME);
	return s;
}

/* What an interface's egress hook has of ours. */
struct hook_state {
	bool clsact, classifier, redirect, other_filters;
	uint32_t cls_prog_id;
	int redirect_ifindex;
};

static int hook_read(struct agent *ag, int ifindex, struct hook_state *h, struct error *err)
{
	struct tc_dump_list d = {0};
	int r = nl_tc_dump_alloc(ag->sk, ifindex, 0, &d, err);

	memset(h, 0, sizeof(*h));
	if (r < 0)
		return r;
	for (unsigned i = 0; i < d.n; i++) {
		const struct tc_spec *o = &d.tc[i];

		if (o->type == TC_QDISC && o->kind == TC_KIND_CLSACT)
			h->clsact = true;
		if (o->type != TC_FILTER || TC_H_MAJ(o->parent) != TC_H_MAJ(TC_H_CLSACT))
			continue;
		if (o->parent == PARENT_EGRESS && o->kind == TC_KIND_BPF && o->prio == NODE_FILTER_PRIO_DOWN_CLS &&
		    streq(o->u.bpf.name, BPF_DCLS_NAME)) {
			h->classifier = true;
			h->cls_prog_id = o->u.bpf.prog_id;
		} else if (o->parent == PARENT_EGRESS && o->prio == NODE_FILTER_PRIO_UP_REDIRECT &&
		           uplink_filter_ours(ag->sk, o)) {
			h->redirect = true;
			h->redirect_ifindex = o->u.u32.redirect_ifindex;
		} else {
			h->other_filters = true;
		}
	}
	tc_dump_list_free(&d);
	return 0;
}

static bool made_clsact(const struct agent *ag, int ifindex)
{
	for (unsigned i = 0; i < ag->podside_n_made; i++)
		if (ag->podside_made[i] == ifindex)
			return true;
	return false;
}

/* Our filters off one interface (and the clsact, when we made it and
 * nothing else is on it). Returns whether something was removed. */
static bool hook_release(struct agent *ag, int ifindex)
{
	struct hook_state h;
	struct tc_spec s;
	bool changed = false;

	if (hook_read(ag, ifindex, &h, NULL) < 0 || !h.clsact)
		return false;
	if (h.redirect) {
		/* the redirect first: a packet must never meet it without the tree */
		s = spec_redirect(h.redirect_ifindex);
		changed |= nl_tc_delete(ag->sk, ifindex, &s, NULL) == 0;
	}
	if (h.classifier) {
		s = spec_classifier(-1);
		changed |= nl_tc_delete(ag->sk, ifindex, &s, NULL) == 0;
	}
	if (made_clsact(ag, ifindex) && !h.other_filters) {
		s = spec_clsact();
		changed |= nl_tc_delete(ag->sk, ifindex, &s, NULL) == 0;
	}
	for (unsigned i = 0; i < ag->podside_n_made; i++)
		if (ag->podside_made[i] == ifindex)
			ag->podside_made[i--] = ag->podside_made[--ag->podside_n_made];
	return changed;
}

/* Our classifier, then the redirect, on one interface's egress hook. */
static int hook_ensure(struct agent *ag, int ifindex, uint32_t prog_id, struct error *err)
{
	struct hook_state h;
	struct tc_spec s;
	int r = hook_read(ag, ifindex, &h, err);

	if (r < 0)
		return r;
	if (h.classifier && h.cls_prog_id == prog_id && h.redirect && h.redirect_ifindex == ag->down.ifb_ifindex)
		return 0;
	if (!h.clsact) {
		s = spec_clsact();
		r = nl_tc_replace(ag->sk, ifindex, &s, err);
		if (r < 0)
			return r;
		if (ag->podside_n_made < AGENT_PODSIDE_MAX)
			ag->podside_made[ag->podside_n_made++] = ifindex;
	}
	if (!h.classifier || h.cls_prog_id != prog_id) {
		s = spec_classifier(ag->podside_prog_fd);
		r = nl_tc_replace(ag->sk, ifindex, &s, err);
		if (r < 0)
			return r;
	}
	if (!h.redirect || h.redirect_ifindex != ag->down.ifb_ifindex) {
		s = spec_redirect(ag->down.ifb_ifindex);
		r = nl_tc_replace(ag->sk, ifindex, &s, err);
		if (r < 0)
			return r;
	}
	return 1;
}

static void prog_forget(struct agent *ag)
{
	if (ag->podside_prog_fd >= 0)
		close(ag->podside_prog_fd);
	if (ag->podside_seen_fd >= 0)
		close(ag->podside_seen_fd);
	ag->podside_prog_fd = ag->podside_seen_fd = -1;
	ag->podside_prog_id = 0;
}

int podside_sync(struct agent *ag, int want, struct error *err)
{
	int changed = 0, r;

	if (want < 0)
		return 0;
	if (!want || ag->down.ifb_ifindex <= 0 || ag->down_cls_map_fd < 0) {
		if (ag->podside_on || !ag->podside_swept) {
			/* ours, or an earlier run's */
			podside_release_all(ag);
			if (ag->podside_on)
				log_msg(LOG_LVL_INFO,
				        "download tree fed at the uplink again, not at the pods' interfaces", "uplink",
				        ag->up.ifname, (char *)NULL);
			changed = ag->podside_on;
			ag->podside_swept = true;
		}
		prog_forget(ag);
		ag->podside_on = false;
		ag->podside_hooked = 0;
		return changed;
	}
	if (ag->podside_prog_fd < 0) {
		struct bpf_prog_info info;
		uint32_t len = sizeof(info);

		/* the classes' map shared with the uplink's classifier, a count of its own */
		r = bpf_dcls_load(&ag->down_cls_map_fd, &ag->podside_seen_fd, &ag->podside_prog_fd, err);
		if (r < 0)
			return r;
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(ag->podside_prog_fd, &info, &len) == 0)
			ag->podside_prog_id = info.id;
	}
	if (!ag->podside_on)
		log_msg(LOG_LVL_WARN,
		        "downloads do not reach the uplink's ingress hook: the download tree is fed at the pods' "
		        "interfaces",
		        "uplink", ag->up.ifname, (char *)NULL);
	ag->podside_on = true;
	ag->podside_hooked = 0;
	for (unsigned i = 0; i < ag->pods.n; i++)
		for (unsigned k = 0; k < ag->pods.v[i]->n_att; k++) {
			const struct agent_attach *at = &ag->pods.v[i]->att[k];
			struct error e = {0};

			if (at->host_ifindex <= 0)
				continue;
			r = hook_ensure(ag, at->host_ifindex, ag->podside_prog_id, &e);
			if (r < 0 && r != -ENODEV) {
				log_msg(LOG_LVL_WARN, "download hook not placed on a pod's interface", "interface",
				        at->host_ifname, "error", e.msg, (char *)NULL);
				error_clear(&e);
				continue;
			}
			ag->podside_hooked += r >= 0;
			changed += r > 0;
		}
	return changed;
}

void podside_release_all(struct agent *ag)
{
	struct nl_cache *cache = NULL;
	struct nl_object *o;

	/* every interface, not only today's pods': a pod gone, a restart */
	if (rtnl_link_alloc_cache(ag->sk, AF_UNSPEC, &cache) < 0) {
		log_msg(LOG_LVL_WARN, "links not listed: the pods' download hooks stay", (char *)NULL);
		return;
	}
	for (o = nl_cache_get_first(cache); o; o = nl_cache_get_next(o)) {
		int ifindex = rtnl_link_get_ifindex((struct rtnl_link *)o);

		if (ifindex > 0 && ifindex != ag->up.ifindex && ifindex != ag->down.ifb_ifindex)
			(void)hook_release(ag, ifindex);
	}
	nl_cache_free(cache);
	ag->podside_n_made = 0;
}
