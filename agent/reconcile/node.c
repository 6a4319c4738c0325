/* node.c — the node half of re-tuning: the mode is decided (with the mixed
 * hold), the uplink plan built against the plan in force and only the delta
 * applied (one pod -> its filters); the kernel is read at start (adoption)
 * and by drift repair; --cleanup gives the uplink back. */
#include <cjson/cJSON.h>

#include "agent.h"
#include "bpf_cls.h"
#include "attach.h"
#include "node/trust.h"
#include "nl.h"
#include "reconcile/internal.h"
#include "reconcile/reconcile.h"

#define ID_UPLINK_ROOT "uplink.root"

/* ---- the node ---- */

static struct apply_target uplink_target(const struct agent *ag)
{
	return (struct apply_target){
	        .pod_nsfd = -1,
	        .host_sk = ag->sk,
	        .uplink_ifindex = ag->up.ifindex,
	        .ifb_ifindex = ag->down.ifb_ifindex,
	};
}

static void record_path(const struct agent *ag, char *buf, size_t size)
{
	if (uplink_record_path(ag->state_dir, buf, size) < 0)
		buf[0] = '\0';
}

static void up_fail(struct agent *ag, int64_t now_ms, const char *what, const struct error *e)
{
	unsigned jitter = (unsigned)(((uint64_t)now_ms * 2654435761u) % 1000);
	char msg[AGENT_FAILURE_MAX];

	snprintf(msg, sizeof(msg), "%s: %s", what, e && e->msg[0] ? e->msg : "failed");
	if (!streq(msg, ag->up_failure))
		log_msg(LOG_LVL_ERROR, "uplink tuning failed", "uplink", ag->up.ifname, "error", msg, (char *)NULL);
	str_copy(ag->up_failure, sizeof(ag->up_failure), msg);
	ag->up_retries++;
	ag->up_need_observe = true;
	ag->up_retry_at_ms = now_ms + sched_backoff_ms(ag->up_retries, jitter);
}

static void up_ok(struct agent *ag)
{
	if (ag->up_failure[0])
		log_msg(LOG_LVL_INFO, "uplink tuning recovered", "uplink", ag->up.ifname, (char *)NULL);
	ag->up_failure[0] = '\0';
	ag->up_retries = 0;
	ag->up_retry_at_ms = -1;
}

static const struct tc_spec *in_force_root(const struct agent *ag)
{
	const struct plan_item *it = plan_find_const(&ag->in_force, ID_UPLINK_ROOT);
	return it ? plan_item_effective_tc(it) : NULL;
}

/* Put the recorded original root back and forget the record. */
static int uplink_give_back(struct agent *ag, struct error *err)
{
	char path[AGENT_PATH_MAX];
	int r;

	record_path(ag, path, sizeof(path));
	if (!ag->up.have_record) {
		plan_free(&ag->in_force);
		return 0;
	}
	r = uplink_restore(ag->sk, ag->up.ifindex, &ag->up.record, in_force_root(ag), err);
	if (r == -ENODEV)
		r = 0; /* the device is gone, and everything on it */
	if (r < 0)
		return r;
	log_msg(LOG_LVL_INFO, "uplink restored", "uplink", ag->up.ifname, "qdisc", ag->up.record.rendered,
	        (char *)NULL);
	plan_free(&ag->in_force);
	if (ag->up_cls_map_fd >= 0)
		close(ag->up_cls_map_fd);
	ag->up_cls_map_fd = -1;
	ag->up.have_record = false;
	return uplink_record_remove(path, err);
}

/* Find the uplink (again); a move to another device gives the old one back. */
static int uplink_refresh(struct agent *ag)
{
	struct uplink up;
	struct uplink_record rec;
	struct error e = {0};
	char path[AGENT_PATH_MAX];
	int r;

	ag->up_need_discover = false;
	r = uplink_discover(ag->sk, ag->cfg.node.uplink, &up, &e);
	if (r < 0) {
		if (ag->up.ifname[0] || !ag->up_failure[0])
			log_msg(LOG_LVL_WARN, "no uplink", "uplink", ag->cfg.node.uplink, "error", e.msg, (char *)NULL);
		snprintf(ag->up_failure, sizeof(ag->up_failure), "%s", e.msg);
		if (ag->up.ifname[0]) {
			/* the device went away with everything on it */
			plan_free(&ag->in_force);
			ag->up.ifname[0] = '\0';
			ag->up.ifindex = 0;
			ag->up_adopted = false;
		}
		return r;
	}
	if (ag->up.ifindex == up.ifindex && streq(ag->up.ifname, up.ifname)) {
		bool have = ag->up.have_record;
		struct uplink_record keep = ag->up.record;

		ag->up = up;
		ag->up.have_record = have;
		ag->up.record = keep;
		return 0;
	}
	if (ag->up.ifname[0]) {
		log_msg(LOG_LVL_INFO, "uplink moved", "from", ag->up.ifname, "to", up.ifname, (char *)NULL);
		if (uplink_give_back(ag, &e) < 0)
			log_msg(LOG_LVL_WARN, "previous uplink not restored", "uplink", ag->up.ifname, "error", e.msg,
			        (char *)NULL);
	}
	ag->up = up;
	ag->up_adopted = false;
	ag->up_failure[0] = '\0';
	plan_free(&ag->in_force);
	record_path(ag, path, sizeof(path));
	error_clear(&e);
	r = uplink_record_load(path, &rec, &e);
	if (r == 0 && streq(rec.ifname, up.ifname)) {
		ag->up.have_record = true;
		ag->up.record = rec;
		ag->up.record.ifindex = up.ifindex;
	} else if (r == 0) {
		/* a record of another device (the default route moved while we were down) */
		struct link_info li;
		if (nl_link_get(ag->sk, rec.ifname, 0, &li, NULL) == 0) {
			error_clear(&e);
			if (uplink_restore(ag->sk, li.ifindex, &rec, NULL, &e) < 0)
				log_msg(LOG_LVL_WARN, "previous uplink not restored", "uplink", rec.ifname, "error",
				        e.msg, (char *)NULL);
		}
		uplink_record_remove(path, NULL);
	} else if (r != -ENOENT) {
		log_msg(LOG_LVL_WARN, "uplink record unreadable; the current root qdisc will be recorded anew", "file",
		        path, "error", e.msg, (char *)NULL);
	}
	log_msg(LOG_LVL_INFO, "uplink", "uplink", up.ifname, "kind", up.kind[0] ? up.kind : "physical", "speed_bps",
	        up.facts.speed_bps ? "known" : "unknown", "virtual", up.facts.is_virtual ? "true" : "false", "recorded",
	        ag->up.have_record ? ag->up.record.rendered : "", (char *)NULL);
	return 0;
}

static void mode_changed(struct agent *ag, enum node_mode from, enum node_mode to)
{
	char status[128], path[AGENT_PATH_MAX];

	ag->ctr.mode_changes++;
	ag->mode_since_unix = agent_now_unix();
	log_msg(LOG_LVL_INFO, "node mode", "from", node_mode_name(from), "to", node_mode_name(to), "uplink",
	        ag->up.ifname, (char *)NULL);
	snprintf(status, sizeof(status), "mode %s on %s", node_mode_name(to), ag->up.ifname[0] ? ag->up.ifname : "-");
	if (ag->notify_hook)
		ag->notify_hook(ag, status);
	if (ag->up.have_record) {
		ag->up.record.mode = to;
		ag->up.record.mode_since_unix = ag->mode_since_unix;
		record_path(ag, path, sizeof(path));
		uplink_record_save(path, &ag->up.record, NULL);
	}
}

/* Uplink conditions are the node's, but Events need an object: they go on
 * an annotated pod of the node (the ones the uplink is tuned for). */
static void uplink_event(struct agent *ag, const char *reason, const char *msg)
{
	for (unsigned i = 0; i < ag->pods.n; i++) {
		const struct agent_pod *p = ag->pods.v[i];

		if (p->in_api && p->uid[0] && p->want.class != CLASS_DEFAULT) {
			agent_pod_event(ag, p, true, reason, "%s", msg);
			return;
		}
	}
}

static void warnings_update(struct agent *ag, const struct node_plan_info *info)
{
	bool same = info->n_warn == ag->up_n_warn;

	for (unsigned i = 0; same && i < info->n_warn; i++)
		same = streq(info->warn[i], ag->up_warn[i]);
	if (same)
		return;
	for (unsigned i = 0; i < info->n_warn && i < NODE_WARN_MAX; i++) {
		bool known = false;

		for (unsigned k = 0; k < ag->up_n_warn; k++)
			known |= streq(info->warn[i], ag->up_warn[k]);
		log_msg(LOG_LVL_WARN, "uplink", "uplink", ag->up.ifname, "warning", info->warn[i], (char *)NULL);
		if (!known)
			uplink_event(ag, "UplinkWarning", info->warn[i]);
	}
	for (unsigned i = 0; i < info->n_warn && i < NODE_WARN_MAX; i++)
		str_copy(ag->up_warn[i], sizeof(ag->up_warn[i]), info->warn[i]);
	ag->up_n_warn = info->n_warn;
}

/* The classifier of the mq layout: its map (created, or found again from
 * the attached program), and a freshly loaded program for the items about
 * to be applied (prog fds returned in *fds, closed by the caller). */
static int classifier_prepare(struct agent *ag, struct plan *np, const unsigned *idx, unsigned n_idx, int *ret_prog_fd,
                              struct error *err)
{
	int r;

	*ret_prog_fd = -1;
	for (unsigned k = 0; k < n_idx; k++) {
		struct plan_item *it = &np->items[idx[k]];

		if (it->type != ITEM_TC || it->n_alt == 0 || it->tc[0].kind != TC_KIND_BPF)
			continue;
		if (ag->up_cls_map_fd < 0) {
			r = bpf_cls_map_create(&ag->up_cls_map_fd, err);
			if (r < 0)
				return r;
		}
		if (*ret_prog_fd < 0) {
			r = bpf_cls_prog_load(ag->up_cls_map_fd, ret_prog_fd, err);
			if (r < 0)
				return r;
		}
		for (unsigned a = 0; a < it->n_alt; a++)
			it->tc[a].u.bpf.prog_fd = *ret_prog_fd;
	}
	return 0;
}

/* After a restart: the map of our attached classifier. */
static void classifier_adopt(struct agent *ag, const struct tc_dump_list *dump)
{
	for (unsigned i = 0; ag->up_cls_map_fd < 0 && i < dump->n; i++) {
		const struct tc_spec *o = &dump->tc[i];
		struct error e = {0};

		if (o->type != TC_FILTER || o->kind != TC_KIND_BPF || !streq(o->u.bpf.name, BPF_CLS_NAME) ||
		    !o->u.bpf.prog_id)
			continue;
		if (bpf_cls_map_from_prog(o->u.bpf.prog_id, &ag->up_cls_map_fd, &e) < 0)
			log_msg(LOG_LVL_WARN, "uplink classifier map not found; it will be reloaded", "error", e.msg,
			        (char *)NULL);
	}
}

/* Make the classifier's map match the pods (O(entries) syscalls). */
static int classifier_sync(struct agent *ag, const struct node_pod *pods, unsigned n, const struct node_plan_info *info,
                           struct error *err)
{
	_cleanup_free_ struct bpf_cls_entry *ents = NULL;
	unsigned n_ents = 0, changed = 0;
	int r;

	if (!info->classifier) {
		if (ag->up_cls_map_fd >= 0)
			close(ag->up_cls_map_fd);
		ag->up_cls_map_fd = -1;
		return 0;
	}
	if (ag->up_cls_map_fd < 0)
		return 0; /* not attached (skipped): nothing to fill */
	r = node_cls_entries(pods, n, &ag->cfg.node, info, &ents, &n_ents);
	if (r < 0)
		return error_set(err, 0, -r, "classifier entries: %s", strerror(-r));
	r = bpf_cls_map_sync(ag->up_cls_map_fd, ents, n_ents, &changed, err);
	if (r < 0)
		return r;
	if (changed)
		log_msg(LOG_LVL_DEBUG, "uplink classifier synced", "entries", n_ents ? "some" : "none", (char *)NULL);
	return (int)changed;
}

/* Drop the items that are not in the kernel (failed, never applied): the
 * delta then lists them as added and they are tried again. */
static void in_force_prune(struct plan *p)
{
	unsigned k = 0;

	for (unsigned i = 0; i < p->n; i++)
		if (p->items[i].status != ITEM_PENDING)
			p->items[k++] = p->items[i];
	p->n = k;
}

/* Read the uplink: which planned items are already there (in force), and
 * delete our duplicates and orphans. Returns the number of objects deleted
 * or a negative errno. */
static int uplink_observe(struct agent *ag, struct plan *plan, const struct tc_dump_list *dump, struct error *err)
{
	_cleanup_free_ unsigned *orph = NULL;
	unsigned n_orph = 0;
	bool root_ours = false;
	int r, deleted = 0;

	/* our root has classes and filters of ours to clean up (not mq: its
	 * per-queue classes are the kernel's) */
	for (unsigned i = 0; i < dump->n; i++)
		if (dump->tc[i].type == TC_QDISC && dump->tc[i].parent == TC_H_ROOT && dump->tc[i].handle == 0x10000u)
			root_ours = ag->up.have_record && dump->tc[i].kind != TC_KIND_MQ;
	classifier_adopt(ag, dump);
	r = downlink_adopt_match_dev(plan, DEV_UPLINK, dump, root_ours, &orph, &n_orph);
	if (r < 0)
		return error_set(err, 0, -r, "match the uplink: %s", strerror(-r));
	for (unsigned i = 0; i < n_orph; i++) {
		struct error e = {0};
		char line[TC_FORMAT_MAX];

		tc_spec_format(&dump->tc[orph[i]], ag->up.ifname, "delete", line, sizeof(line));
		r = nl_tc_delete(ag->sk, ag->up.ifindex, &dump->tc[orph[i]], &e);
		if (r < 0 && r != -ENOENT) {
			log_msg(LOG_LVL_WARN, "cannot delete a stale uplink object", "object", line, "error", e.msg,
			        (char *)NULL);
			continue;
		}
		log_msg(LOG_LVL_INFO, "stale uplink object deleted", "object", line, (char *)NULL);
		deleted++;
	}
	return deleted;
}

void node_reconcile(struct agent *ag, int64_t now_ms, bool observe)
{
	_cleanup_free_ struct node_pod *pods = NULL;
	_cleanup_plan_ struct plan np = {0};
	_cleanup_plan_ struct plan prev = {0};
	struct tc_dump_list dump = {0};
	struct node_counts counts;
	struct node_mode_state next;
	struct node_plan_info info;
	struct node_plan_delta d = {0};
	struct apply_target t;
	struct error e = {0};
	_cleanup_free_ unsigned *idx = NULL;
	_cleanup_free_ bool *absent = NULL;
	unsigned n_pods = 0, n_idx = 0, n_removed = 0;
	int64_t hold_due, t0 = agent_now_ms();
	bool need_observe, changed_kernel = false, down_wanted;
	struct node_config ncfg;
	uint32_t caps_before;
	int r, prog_fd = -1;

	if (!ag->api_listed)
		return; /* until the first LIST the kernel keeps what it has (restart adoption) */
	if (!ag->up.ifname[0] || ag->up_need_discover) {
		if (uplink_refresh(ag) < 0) {
			ag->up_retries++;
			ag->up_retry_at_ms = now_ms + sched_backoff_ms(ag->up_retries, 0);
			return;
		}
	}
	if (pod_cache_node_pods(&ag->pods, ag->api_listed, &pods, &n_pods) < 0) {
		up_fail(ag, now_ms, "node pods", NULL);
		return;
	}
	node_pods_count(pods, n_pods, &counts);
	if (!ag->up_adopted && ag->up.have_record && ag->mode.mode == MODE_IDLE && ag->up.record.mode != MODE_IDLE) {
		/* a restart: continue the recorded mode, with the hold from now */
		ag->mode.mode = ag->up.record.mode;
		ag->mode.mixed_last_needed_ms = ag->mode.mode == MODE_MIXED ? now_ms : 0;
		ag->mode_since_unix = ag->up.record.mode_since_unix;
	}
	hold_due = node_mode_decide(&ag->mode, &counts, now_ms, ag->cfg.node.mixed_hold_s, &next);
	sched_set_hold(&ag->sched, hold_due);

	if (next.mode == MODE_IDLE) {
		if (downlink_prepare(ag, false, &e) < 0) {
			up_fail(ag, now_ms, "remove the download shaping", &e);
			return;
		}
		if (ag->up.have_record || ag->in_force.n) {
			r = uplink_give_back(ag, &e);
			if (r < 0) {
				up_fail(ag, now_ms, "restore the original root qdisc", &e);
				return;
			}
			agent_count_retune(ag, RETUNE_NODE, RESULT_OK, seconds_since(t0));
		}
		up_ok(ag);
		ag->info = (struct node_plan_info){.mode = MODE_IDLE, .shape = SHAPE_NONE};
		ag->have_info = true;
		ag->up_adopted = true;
		if (next.mode != ag->mode.mode)
			mode_changed(ag, ag->mode.mode, next.mode);
		ag->mode = next;
		return;
	}

	/* the download direction: its ifb before the plan (the redirect names it) */
	ncfg = ag->cfg.node;
	down_wanted = node_downlink_wanted(&ncfg, &ag->up_caps, next.mode, NULL);
	error_clear(&e);
	if (downlink_prepare(ag, down_wanted, &e) < 0) {
		log_msg(LOG_LVL_WARN, "download direction not shaped", "uplink", ag->up.ifname, "error", e.msg,
		        (char *)NULL);
		error_clear(&e);
	}
	if (down_wanted && !ag->up.facts.ifb_ifindex && !ag->up.facts.ingress_foreign)
		ncfg.downlink = false; /* no ifb: plan without the download tree this pass */

	need_observe = observe || !ag->up_adopted || ag->up_need_observe;
	if (need_observe) {
		r = nl_tc_dump_alloc(ag->sk, ag->up.ifindex, 0, &dump, &e);
		if (r < 0) {
			if (r == -ENODEV)
				ag->up_need_discover = true;
			up_fail(ag, now_ms, "read the uplink", &e);
			return;
		}
		if (!ag->up_adopted && uplink_prev_from_dump(&dump, pods, n_pods, &prev) < 0) {
			tc_dump_list_free(&dump);
			up_fail(ag, now_ms, "out of memory", NULL);
			return;
		}
	}
	/* classify "dscp" only where every pod's mark is aiqos's own (trust.c) */
	if (!agent_dscp_trusted(ag))
		ncfg.classify = CLASSIFY_SRC_IP;
	r = node_plan(pods, n_pods, &ncfg, &ag->up.facts, &ag->up_caps, next.mode,
	              need_observe && !ag->up_adopted ? &prev : &ag->in_force, &np, &info, &e);
	if (r < 0) {
		tc_dump_list_free(&dump);
		up_fail(ag, now_ms, "plan", &e);
		return;
	}
	warnings_update(ag, &info);

	if (info.shape == SHAPE_NONE) {
		/* nothing to plan on this kernel: the original stays (as at idle) */
		tc_dump_list_free(&dump);
		if (ag->up.have_record || ag->in_force.n) {
			r = uplink_give_back(ag, &e);
			if (r < 0) {
				up_fail(ag, now_ms, "restore the original root qdisc", &e);
				return;
			}
		}
		up_ok(ag);
		ag->info = info;
		ag->have_info = true;
		ag->up_adopted = true;
		if (next.mode != ag->mode.mode)
			mode_changed(ag, ag->mode.mode, next.mode);
		ag->mode = next;
		return;
	}

	if (need_observe) {
		int deleted = uplink_observe(ag, &np, &dump, &e);

		tc_dump_list_free(&dump);
		if (deleted >= 0) {
			int dd = downlink_observe(ag, &np, &e);

			deleted = dd < 0 ? dd : deleted + dd;
		}
		if (deleted < 0) {
			up_fail(ag, now_ms, "adopt", &e);
			return;
		}
		if (ag->up_adopted && deleted)
			ag->ctr.drift_repairs += (unsigned)deleted;
		changed_kernel |= deleted > 0;
		/* in force = what the kernel has of the plan */
		if (plan_copy(&np, &ag->in_force) < 0) {
			up_fail(ag, now_ms, "out of memory", NULL);
			return;
		}
		in_force_prune(&ag->in_force);
		ag->up_adopted = true;
		ag->up_need_observe = false;
	} else {
		in_force_prune(&ag->in_force);
	}

	/* Record what was there before the first change. */
	if (!ag->up.have_record) {
		char path[AGENT_PATH_MAX];

		record_path(ag, path, sizeof(path));
		error_clear(&e);
		r = uplink_record_capture(ag->sk, ag->up.ifindex, ag->up.ifname, &ag->up.record, &e);
		if (r == -EEXIST) {
			/* an operator's tree: never destroyed, left alone (status, log, Event) */
			if (!streq(ag->up_foreign, e.msg)) {
				log_msg(LOG_LVL_WARN, "uplink left alone: it holds a tree aiqos did not make", "uplink",
				        ag->up.ifname, "tree", e.msg, (char *)NULL);
				uplink_event(ag, "UplinkForeignTree", e.msg);
				str_copy(ag->up_foreign, sizeof(ag->up_foreign), e.msg);
			}
			plan_free(&ag->in_force);
			up_ok(ag);
			ag->info = info;
			ag->have_info = true;
			if (next.mode != ag->mode.mode)
				mode_changed(ag, ag->mode.mode, next.mode);
			ag->mode = next;
			return;
		}
		if (r == 0) {
			ag->up.record.mode = ag->mode.mode;
			ag->up.record.mode_since_unix = ag->mode_since_unix;
			r = uplink_record_save(path, &ag->up.record, &e);
		}
		if (r < 0) {
			/* never change what we could not record */
			up_fail(ag, now_ms, "record the original root qdisc", &e);
			return;
		}
		ag->up.have_record = true;
		if (ag->up_foreign[0])
			log_msg(LOG_LVL_INFO, "uplink no longer holds a foreign tree", "uplink", ag->up.ifname,
			        (char *)NULL);
		ag->up_foreign[0] = '\0';
		log_msg(LOG_LVL_INFO, "uplink original recorded", "uplink", ag->up.ifname, "qdisc",
		        ag->up.record.rendered, "file", path, (char *)NULL);
	}

	r = node_plan_delta(&ag->in_force, &np, &d);
	if (r < 0) {
		up_fail(ag, now_ms, "out of memory", NULL);
		return;
	}
	if (node_plan_carry_effective(&np, &ag->in_force) < 0) {
		node_plan_delta_free(&d);
		up_fail(ag, now_ms, "out of memory", NULL);
		return;
	}
	t = uplink_target(ag);

	/* removals first, children before parents (filters, leaves, classes) */
	n_removed = d.n_removed;
	for (unsigned k = d.n_removed; k-- > 0;) {
		const struct plan_item *it = &ag->in_force.items[d.removed[k]];

		if (it->type == ITEM_TC && it->tc[0].kind == TC_KIND_CLSACT && ag->up.record.clsact_before)
			continue; /* not ours: it was there before aiqos */
		error_clear(&e);
		r = apply_remove_item(it, &t, &e);
		if (r < 0)
			log_msg(LOG_LVL_WARN, "cannot remove an uplink object", "item", it->id, "error", e.msg,
			        (char *)NULL);
		changed_kernel = true;
	}
	idx = calloc(d.n_added + d.n_changed + 1, sizeof(*idx));
	absent = calloc(d.n_added + d.n_changed + 1, sizeof(*absent));
	if (!idx || !absent) {
		node_plan_delta_free(&d);
		up_fail(ag, now_ms, "out of memory", NULL);
		return;
	}
	/* added and changed, in plan order (parents first) */
	{
		unsigned i = 0, j = 0;
		/* added items are not in the kernel (in force = what it has) */
		while (i < d.n_added || j < d.n_changed) {
			if (j >= d.n_changed || (i < d.n_added && d.added[i] < d.changed[j])) {
				absent[n_idx] = true;
				idx[n_idx++] = d.added[i++];
			} else {
				idx[n_idx++] = d.changed[j++];
			}
		}
	}
	node_plan_delta_free(&d);
	error_clear(&e);
	if (classifier_prepare(ag, &np, idx, n_idx, &prog_fd, &e) < 0)
		log_msg(LOG_LVL_WARN, "uplink classifier not loaded", "uplink", ag->up.ifname, "error", e.msg,
		        (char *)NULL);
	caps_before = ag->up_caps.missing_kinds;
	error_clear(&e);
	if (ag->test_slow_apply_us && n_idx) {
		/* failpoint (lab tests): one item at a time, slowly, to be killed in the middle */
		r = 0;
		for (unsigned k = 0; k < n_idx; k++) {
			struct error ek = {0};
			int q = apply_plan(&np, &(struct apply_only){.idx = &idx[k], .absent = &absent[k], .n = 1}, &t,
			                   &ag->up_caps, &ek);
			if (q < 0 && r == 0) {
				r = q;
				e = ek;
			}
			usleep(ag->test_slow_apply_us);
		}
	} else {
		r = n_idx ? apply_plan(&np, &(struct apply_only){.idx = idx, .absent = absent, .n = n_idx}, &t,
		                       &ag->up_caps, &e)
		          : 0;
	}
	changed_kernel |= n_idx > 0;
	if (prog_fd >= 0)
		close(prog_fd); /* the filter holds the program now */
	for (unsigned k = 0; k < np.n; k++)
		if (np.items[k].type == ITEM_TC && np.items[k].tc[0].kind == TC_KIND_BPF)
			for (unsigned a = 0; a < np.items[k].n_alt; a++)
				np.items[k].tc[a].u.bpf.prog_fd = -1;
	{
		struct error ec = {0};
		int q = classifier_sync(ag, pods, n_pods, &info, &ec);

		if (q < 0)
			log_msg(LOG_LVL_WARN, "uplink classifier not synced", "uplink", ag->up.ifname, "error", ec.msg,
			        (char *)NULL);
		changed_kernel |= q > 0;
	}

	/* the plan in force is what we just reached */
	plan_free(&ag->in_force);
	ag->in_force = np;
	np = (struct plan){0};
	ag->info = info;
	ag->have_info = true;

	if (r < 0) {
		up_fail(ag, now_ms, "apply", &e);
		if (r == -ENODEV)
			ag->up_need_discover = true;
	} else {
		up_ok(ag);
	}
	if (ag->up_caps.missing_kinds != caps_before)
		sched_kick_now(&ag->sched, now_ms); /* the structure may change (prio -> htb): plan again */
	if (changed_kernel) {
		bool degraded = false;

		for (unsigned i = 0; i < ag->in_force.n; i++)
			degraded |= ag->in_force.items[i].status == ITEM_DEGRADED ||
			            ag->in_force.items[i].status == ITEM_SKIPPED;
		agent_count_retune(ag, RETUNE_NODE,
		                   r < 0      ? RESULT_FAILED
		                   : degraded ? RESULT_DEGRADED
		                              : RESULT_OK,
		                   seconds_since(t0));
		char nb[3][16], dur[24];

		snprintf(nb[0], sizeof(nb[0]), "%u", n_removed);
		snprintf(nb[1], sizeof(nb[1]), "%u", n_idx);
		snprintf(nb[2], sizeof(nb[2]), "%u", ag->in_force.n);
		snprintf(dur, sizeof(dur), "%lld", (long long)(agent_now_ms() - t0));
		log_msg(LOG_LVL_DEBUG, "uplink re-tuned", "uplink", ag->up.ifname, "mode", node_mode_name(next.mode),
		        "shape", node_shape_name(info.shape), "removed", nb[0], "applied", nb[1], "objects", nb[2],
		        "duration_ms", dur, (char *)NULL);
	}
	if (next.mode != ag->mode.mode)
		mode_changed(ag, ag->mode.mode, next.mode);
	ag->mode = next;
}

int agent_cleanup_uplink(struct agent *ag, struct error *err)
{
	char path[AGENT_PATH_MAX];
	struct uplink_record rec;
	struct link_info li;
	int r;

	r = downlink_cleanup(ag->sk, ag->state_dir, err);
	if (r < 0)
		return r;
	record_path(ag, path, sizeof(path));
	r = uplink_record_load(path, &rec, err);
	if (r == -ENOENT) {
		log_msg(LOG_LVL_INFO, "no uplink record: nothing to restore", "file", path, (char *)NULL);
		return 0;
	}
	if (r < 0)
		return r;
	r = nl_link_get(ag->sk, rec.ifname, 0, &li, err);
	if (r == -ENODEV) {
		log_msg(LOG_LVL_INFO, "the recorded uplink is gone", "uplink", rec.ifname, (char *)NULL);
		return uplink_record_remove(path, err);
	}
	if (r < 0)
		return r;
	r = uplink_restore(ag->sk, li.ifindex, &rec, NULL, err);
	if (r < 0)
		return r;
	log_msg(LOG_LVL_INFO, "uplink restored", "uplink", rec.ifname, "qdisc", rec.rendered, (char *)NULL);
	return uplink_record_remove(path, err);
}
