/* attach.c — the attachment plumbing the plugin's verbs and the agent share
 * (see attach.h): single link lookups (no dumps) to find and verify the pod
 * interface and its host-side veth, the plan of a stored attachment rebuilt
 * with the one planner, its removal, and its one-line summary. */
#include <stdarg.h>
#include <time.h>

#include "attach.h"
#include "netns.h"
#include "failpoint.h"
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
		return error_set(err, -r, "re-plan container %s ifname %s: %s", s->container_id, s->ifname,
		                 strerror(-r));
	/* an ADD's intent record: the plan is its target, none of it recorded */
	s->plan.choices_unknown = s->pending && s->intent.op == ATTACH_OP_ADD;
	if (choices) {
		r = plan_choices_from_json(&s->plan, choices, err);
		if (r < 0) {
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
			error_propagate(err, &e);
		}
	}
	if (a->target.pod_sk && a->target.pod_ifindex > 0) {
		error_clear(&e);
		r = apply_remove(p, DEV_POD, &a->target, &e);
		if (r < 0 && !first) {
			first = r;
			error_propagate(err, &e);
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

/* ---- tune and teardown: the crash protocol (attach.h) ---- */

/* A step's first failure is the one its result reports. */
static void error_keep(struct error *dst, const struct error *src)
{
	if (!dst->msg[0])
		error_propagate(dst, src);
}

int attach_intent_plan(const struct attach_state *s, struct plan *ret, struct error *err)
{
	const struct attach_intent *in = &s->intent;
	struct plan_caps caps = {0};
	int r;

	plan_free(ret);
	if (!s->pending || !in->has_target)
		return 0;
	r = plan_pod(&in->workload, &in->profile_spec, &in->ifs, &caps, ret);
	if (r < 0)
		return error_set(err, -r, "re-plan the intent of container %s ifname %s: %s", s->container_id,
		                 s->ifname, strerror(-r));
	ret->choices_unknown = true; /* killed before it recorded them */
	return 0;
}

enum attach_recovery attach_recover_action(const struct attach_state *s)
{
	if (!s->pending)
		return ATTACH_RECOVER_NONE;
	return s->intent.op == ATTACH_OP_RETUNE ? ATTACH_RECOVER_RETUNE : ATTACH_RECOVER_TEARDOWN;
}

/* new_ holds o's object (at alternative so of o) on the same device. */
static bool plan_holds_tc(const struct plan *new_, const struct plan_item *o, const struct tc_spec *so)
{
	for (unsigned k = 0; k < new_->n; k++) {
		const struct tc_spec *sn = plan_item_effective_tc(&new_->items[k]);

		if (sn && new_->items[k].dev == o->dev && tc_spec_same_object(so, sn))
			return true;
	}
	return false;
}

static bool plan_holds_sysctl(const struct plan *new_, const char *key)
{
	for (unsigned k = 0; k < new_->n; k++)
		if (new_->items[k].type == ITEM_SYSCTL && streq(new_->items[k].key, key) &&
		    plan_item_effective_val(&new_->items[k]))
			return true;
	return false;
}

/* What old put in the kernel and new_ does not hold: sysctls back to their
 * value before aiqos, tc objects deleted (parents first; children of a
 * deleted qdisc are gone already). With old's choices unknown (a crashed
 * intent), every alternative not held is deleted by our handle. */
static int remove_leftovers(const struct plan *old, const struct plan *new_, const struct apply_target *t,
                            struct error *err)
{
	int first = 0;

	for (unsigned i = 0; i < old->n; i++) {
		const struct plan_item *o = &old->items[i];
		unsigned n_try = old->choices_unknown && o->type == ITEM_TC ? o->n_alt : 1;

		for (unsigned k = 0; k < n_try && k < PLAN_ALT_MAX; k++) {
			struct plan_item one = *o;
			struct error e = {0};
			int r;

			if (old->choices_unknown) {
				one.status = ITEM_APPLIED;
				one.chosen = (int)k;
				if (o->type == ITEM_SYSCTL)
					continue; /* the value before it is not known */
			}
			if (o->type == ITEM_SYSCTL) {
				if (!plan_item_effective_val(&one) || plan_holds_sysctl(new_, one.key))
					continue;
			} else {
				const struct tc_spec *so = plan_item_effective_tc(&one);

				if (!so || plan_holds_tc(new_, &one, so))
					continue;
			}
			r = apply_remove_item(&one, t, &e);
			if (r < 0 && !first) {
				first = r;
				error_propagate(err, &e);
			}
		}
	}
	return first;
}

/* The value before aiqos of a sysctl both plans set stays the one the old
 * plan recorded (the applier just read aiqos's own value). */
static void carry_prev(const struct plan *old, struct plan *new_)
{
	for (unsigned k = 0; k < new_->n; k++) {
		struct plan_item *n = &new_->items[k];

		if (n->type != ITEM_SYSCTL)
			continue;
		for (unsigned i = 0; i < old->n; i++) {
			const struct plan_item *o = &old->items[i];

			if (o->type == ITEM_SYSCTL && streq(o->key, n->key) && plan_item_effective_val(o) &&
			    o->prev[0]) {
				str_copy(n->prev, sizeof(n->prev), o->prev);
				break;
			}
		}
	}
}

/* undo_on_failure: what the target plan put in the kernel, and its record. */
static void tune_undo(const char *dir, const struct attach_state *s, const struct attach *a,
                      struct attach_tune_res *res)
{
	struct error e = {0};

	if (attach_plan_remove(&s->plan, a, &e) < 0)
		error_keep(&res->undo_err, &e);
	error_clear(&e);
	if (a->target.pod_nsfd >= 0 && apply_restore_sysctls(&s->plan, &a->target, &e) < 0)
		error_keep(&res->undo_err, &e);
	error_clear(&e);
	if (state_remove(dir, s->container_id, s->ifname, &e) < 0)
		error_keep(&res->undo_err, &e);
	res->undone = true;
}

/* dst becomes a copy of src (ADD's plan is the record's own: nothing to do) */
static int plan_set(struct plan *dst, const struct plan *src)
{
	return dst == src ? 0 : plan_copy(src, dst);
}

static int tune_steps(const char *dir, struct attach_state *s, struct attach *a, struct plan_caps *caps,
                      const struct attach_tune_req *req, struct attach_tune_res *res, struct attach_state *before,
                      struct plan *crashed)
{
	bool retune = req->op == ATTACH_OP_RETUNE;
	int r, rc;

	*before = *s; /* the committed tuning (re-tune), its own copy of the plan */
	before->plan = (struct plan){0};
	if (plan_copy(&s->plan, &before->plan) < 0)
		return error_set(&res->intent_err, ENOMEM, "out of memory");
	/* what a crashed operation of this record may have left besides its
	 * committed plan: the target of its intent, or (an ADD's) all of it */
	if (s->pending && s->intent.has_target) {
		r = attach_intent_plan(s, crashed, &res->leftover_err);
		if (r < 0)
			plan_free(crashed);
	} else if (s->pending) {
		plan_free(crashed);
		*crashed = before->plan; /* moved: nothing committed before it */
		crashed->choices_unknown = true;
		before->plan = (struct plan){0};
	}

	/* 1. intent */
	memset(&s->intent, 0, sizeof(s->intent));
	s->intent.op = req->op;
	if (retune) {
		s->intent.has_target = true;
		s->intent.workload = *req->workload;
		str_copy(s->intent.profile, sizeof(s->intent.profile), req->profile->name);
		s->intent.profile_spec = *req->profile;
		s->intent.ifs = *req->ifs;
	} else {
		s->workload = *req->workload;
		str_copy(s->profile, sizeof(s->profile), req->profile->name);
		s->profile_spec = *req->profile;
		s->has_profile_spec = true;
		s->ifs = *req->ifs;
		if (plan_set(&s->plan, req->plan) < 0)
			return error_set(&res->intent_err, ENOMEM, "out of memory");
	}
	s->pending = true;
	snprintf(s->failure, sizeof(s->failure), "%s did not finish: interrupted before it recorded what it applied",
	         retune ? "re-tune" : "ADD");
	s->updated_unix = (int64_t)time(NULL);
	r = state_save(dir, s, &res->intent_err);
	res->intent_saved = r == 0;
	if (r < 0 && req->intent_required) {
		plan_free(&s->plan);
		*s = *before; /* nothing changed */
		before->plan = (struct plan){0};
		return r;
	}

	/* 2. kernel */
	if (req->failpoint_before)
		(req->failpoint ?: failpoint_quiet)(req->failpoint_before);
	r = apply_plan(req->plan, NULL, &a->target, caps, &res->apply_err);
	if (retune)
		carry_prev(&before->plan, req->plan);
	if (r >= 0) {
		struct error e = {0};

		if (retune && remove_leftovers(&before->plan, req->plan, &a->target, &e) < 0)
			error_keep(&res->leftover_err, &e);
		error_clear(&e);
		if (crashed->n && remove_leftovers(crashed, req->plan, &a->target, &e) < 0)
			error_keep(&res->leftover_err, &e);
	} else if (!res->apply_err.msg[0]) {
		error_set(&res->apply_err, -r, "%s", strerror(-r));
	}
	if (req->failpoint_after)
		(req->failpoint ?: failpoint_quiet)(req->failpoint_after);

	/* 3. commit */
	s->pending = false;
	memset(&s->intent, 0, sizeof(s->intent));
	s->workload = *req->workload;
	str_copy(s->profile, sizeof(s->profile), req->profile->name);
	s->profile_spec = *req->profile;
	s->has_profile_spec = true;
	if (retune)
		s->ifs.mtu = req->ifs->mtu; /* the host side stays recorded while it is out of reach */
	/* on failure: what got applied before it */
	if (plan_set(&s->plan, req->plan) < 0 && r >= 0)
		r = error_set(&res->apply_err, ENOMEM, "out of memory");
	str_copy(s->failure, sizeof(s->failure), r < 0 ? res->apply_err.msg : "");
	if (r < 0 && req->undo_on_failure) {
		tune_undo(dir, s, a, res);
		return r;
	}
	s->updated_unix = (int64_t)time(NULL);
	rc = state_save(dir, s, &res->commit_err);
	res->committed = rc == 0;
	if (rc < 0 && req->undo_on_failure) {
		tune_undo(dir, s, a, res);
		return rc;
	}
	if (rc < 0 && !retune && res->intent_saved) {
		/* the pod runs (fail-open) but its ADD's intent would read as a
		 * crash: take it back (no space needed); ADD hands the record on */
		struct error e = {0};

		if (state_remove(dir, s->container_id, s->ifname, &e) < 0)
			error_keep(&res->undo_err, &e);
	}
	return r < 0 ? r : rc;
}

int attach_tune(const char *dir, struct attach_state *s, struct attach *a, struct plan_caps *caps,
                const struct attach_tune_req *req, struct attach_tune_res *res)
{
	struct attach_state *before = calloc(1, sizeof(*before));
	_cleanup_plan_ struct plan crashed = {0};
	int r;

	memset(res, 0, sizeof(*res));
	if (before)
		r = tune_steps(dir, s, a, caps, req, res, before, &crashed);
	else
		r = error_set(&res->intent_err, ENOMEM, "out of memory");
	attach_state_free(before);
	return r;
}

/* Remove p's objects from the reachable sides; p's choices may be unknown. */
static int teardown_plan(const struct plan *p, const struct attach *a, struct error *err)
{
	return p->n ? attach_plan_remove(p, a, err) : 0;
}

int attach_teardown(const char *dir, const struct profile_set *set, struct attach_state *s, const struct cJSON *choices,
                    const char *netns, struct attach_teardown_res *res)
{
	_cleanup_plan_ struct plan target_plan = {0};
	struct plan *target = &target_plan;
	struct attach a;
	struct error e = {0};
	bool plan_ok;
	int r, first = 0;

	memset(res, 0, sizeof(*res));
	plan_ok = attach_plan_restore(set, s, choices, NULL, &res->plan_err) == 0;
	if (plan_ok && attach_intent_plan(s, target, &res->plan_err) < 0)
		plan_ok = false;

	/* 1. intent: a crashed ADD's record says already what to remove */
	if (plan_ok && !(s->pending && s->intent.op == ATTACH_OP_ADD)) {
		s->intent.op = ATTACH_OP_TEARDOWN;
		s->pending = true;
		s->updated_unix = (int64_t)time(NULL);
		snprintf(s->failure, sizeof(s->failure), "%s",
		         "teardown did not finish: interrupted before it removed the record");
		r = state_save(dir, s, &res->intent_err); /* best effort: removing is idempotent */
		(void)r;
	}

	/* 2. kernel */
	if (plan_ok) {
		attach_init(&a);
		r = attach_open_host(&a, s, &e);
		if (r < 0) {
			error_keep(&res->open_err, &e);
			first = first ?: r;
		}
		error_clear(&e);
		r = netns ? attach_open_pod(&a, netns, s, &e) : 0;
		if (r < 0) {
			error_keep(&res->open_err, &e);
			first = first ?: r;
		}
		failpoint_quiet("teardown-before-remove");
		error_clear(&e);
		r = teardown_plan(&s->plan, &a, &e);
		if (r == 0) {
			error_clear(&e);
			r = teardown_plan(target, &a, &e);
		}
		if (r < 0) {
			error_keep(&res->remove_err, &e);
			first = first ?: r;
		}
		res->host = a.target.host_ifindex > 0;
		res->pod = a.target.pod_ifindex > 0;
		attach_close(&a);
		failpoint_quiet("teardown-after-remove");
	}

	/* 3. the record goes once the kernel is clean (an unusable plan
	 * cannot say what to remove: it goes too) */
	if (first < 0) {
		res->record_kept = true;
		return first;
	}
	r = state_remove(dir, s->container_id, s->ifname, &res->record_err);
	if (r < 0 && r != -ENOENT) {
		res->record_kept = true;
		return r;
	}
	error_clear(&res->record_err);
	return 0;
}
