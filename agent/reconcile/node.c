/* node.c — the node half of re-tuning: the mode is decided (with the mixed
 * hold), the uplink plan built against the plan in force and only the delta
 * applied (one pod -> its filters); the kernel is read at start (adoption)
 * and by drift repair; --cleanup gives the uplink back. */
#include <cjson/cJSON.h>
#include <linux/rtnetlink.h>

#include "agent.h"
#include "node/rcv_window.h"
#include "bpf_cls.h"
#include "bpf_gate.h"
#include "bpf_load.h"
#include "failpoint.h"
#include "attach.h"
#include "node/kind_probe.h"
#include "node/podside.h"
#include "node/tcx.h"
#include "node/trust.h"
#include "nl.h"
#include "reconcile/delta.h"
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
	        .ifb_up_ifindex = ag->shaper.ifb_ifindex,
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

void classifier_forget(struct agent *ag)
{
	if (ag->up_cls_map_fd >= 0)
		close(ag->up_cls_map_fd);
	if (ag->up_edt_map_fd >= 0)
		close(ag->up_edt_map_fd);
	ag->up_cls_map_fd = -1;
	ag->up_edt_map_fd = -1;
}

static void map_fd_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void gate_forget(struct agent *ag)
{
	map_fd_close(&ag->down_gate_map_fd);
	map_fd_close(&ag->up_gate_map_fd);
	map_fd_close(&ag->down_cls_map_fd);
	map_fd_close(&ag->down_seen_map_fd);
	map_fd_close(&ag->podside_prog_fd);
	map_fd_close(&ag->podside_seen_fd);
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
	tcx_cls_release(ag, true);
	classifier_forget(ag);
	gate_forget(ag);
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
	datapath_refresh(ag->sk, up.ifindex, ag->opt.cni_conf_dir, &ag->dp);
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
	log_msg(LOG_LVL_INFO, "uplink found", "uplink", up.ifname, "kind", up.kind[0] ? up.kind : "physical",
	        "speed_bps", LOG_FMT("%llu", (unsigned long long)up.facts.speed_bps), "virtual",
	        up.facts.is_virtual ? "true" : "false", "tx_queues", LOG_FMT("%u", up.facts.tx_queues), "recorded",
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

/* The other tools' programs on the ingress hook (tcx, then clsact
 * filters), ", "-separated; the setting that lets packets reach aiqos's
 * hook for the CNIs known to end it. */
static void ingress_foreign_describe(const struct agent *ag, char *who, size_t who_size, const char **fix)
{
	size_t n = 0;
	bool cilium = false, calico = false;

	who[0] = '\0';
	for (unsigned i = 0; i < ag->up_n_tcx_foreign + ag->up_n_hook_foreign; i++) {
		const char *f = i < ag->up_n_tcx_foreign ? ag->up_tcx_foreign[i]
		                                         : ag->up_hook_foreign[i - ag->up_n_tcx_foreign];

		if (i < ag->up_n_tcx_foreign ? strncmp(f, "ingress ", 8) != 0 : strstr(f, "ingress") == NULL)
			continue;
		cilium |= strstr(f, "cil_") != NULL;
		calico |= strstr(f, "cali") != NULL;
		if (n + 3 < who_size) {
			int k = snprintf(who + n, who_size - n, "%s%s%s", n ? ", " : "",
			                 i < ag->up_n_tcx_foreign ? "tcx " : "", f);
			n += k > 0 ? (size_t)k : 0;
			if (n >= who_size)
				n = who_size - 1;
		}
	}
	if (!who[0])
		str_copy(who, who_size, "no other program is listed on the hook (a redirect elsewhere?)");
	*fix = calico   ? "Calico's eBPF dataplane redirects established flows straight into the pods "
	                  "(bpf_redirect_peer), past those hooks too: felixconfiguration bpfRedirectToPeer: Disabled "
	                  "keeps them on the stack's path"
	       : cilium ? "Cilium's cil_from_netdev ends the hook (TC_ACT_OK; an ifb redirect ahead of it would hide "
	                  "packets from Cilium, so aiqos does not go first there); with BPF host routing or netkit "
	                  "Cilium puts packets straight into the pods, past those hooks too: "
	                  "bpf.hostLegacyRouting=true (Helm) and veth devices keep them on the stack's path"
	                : "a CNI that redirects straight into pods (bpf_redirect_peer) skips those hooks too";
}

void agent_down_reach_tick(struct agent *ag, int64_t now_ms)
{
	char what[160], who[512], msg[1024];
	const char *fix;
	bool pods_was = ag->down_reach.pods_bypassed;
	int t = down_reach_sample(ag, now_ms);

	if (ag->down_reach.pods_bypassed && !pods_was) {
		/* fed at the pods too, and still not reached: redirected into them */
		down_reach_describe(&ag->down_reach, what, sizeof(what));
		ingress_foreign_describe(ag, who, sizeof(who), &fix);
		snprintf(msg, sizeof(msg),
		         "downloads on %s are not shaped: %s; they reach neither the uplink's ingress hook nor the "
		         "pods' "
		         "host-side interfaces (a CNI redirects them straight into the pods). %s",
		         ag->up.ifname, what, fix);
		log_msg(LOG_LVL_WARN, "downloads are not shaped: redirected straight into the pods", "uplink",
		        ag->up.ifname, "reach", what, (char *)NULL);
		uplink_event(ag, "DownloadNotShaped", msg);
	}
	if (t == 0)
		return;
	sched_kick(&ag->sched, now_ms); /* a pass feeds the tree at the pods' interfaces, or stops */
	down_reach_describe(&ag->down_reach, what, sizeof(what));
	if (t < 0) {
		log_msg(LOG_LVL_INFO, "downloads reach the download tree again", "uplink", ag->up.ifname, "reach", what,
		        (char *)NULL);
		return;
	}
	ingress_foreign_describe(ag, who, sizeof(who), &fix);
	snprintf(msg, sizeof(msg),
	         "downloads on %s do not reach aiqos's filters at its ingress hook: %s; before them: %s. The "
	         "download tree is fed at the egress hooks of the pods' host-side interfaces instead. %s",
	         ag->up.ifname, what, who, fix);
	log_msg(LOG_LVL_WARN, "downloads do not reach the uplink's ingress hook", "uplink", ag->up.ifname, "reach",
	        what, "before", who, (char *)NULL);
	uplink_event(ag, "DownloadBypassed", msg);
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

/* The BPF programs of the items about to be applied: the classifier
 * (bpf_cls.h), the download gate and the upload gate (bpf_gate.h), each
 * loaded on its maps (kept, adopted from the attached program, or new):
 * prog_fd[AGENT_PROG_*], closed by the caller. */
static unsigned prog_of(const char *name)
{
	return streq(name, BPF_GATE_NAME)      ? AGENT_PROG_DOWN_GATE
	       : streq(name, BPF_GATE_UP_NAME) ? AGENT_PROG_UP_GATE
	       : streq(name, BPF_DCLS_NAME)    ? AGENT_PROG_DOWN_CLS
	                                       : AGENT_PROG_CLS;
}

static int *gate_map_fd(struct agent *ag, unsigned prog)
{
	return prog == AGENT_PROG_DOWN_GATE ? &ag->down_gate_map_fd : &ag->up_gate_map_fd;
}

static int prog_load(struct agent *ag, unsigned prog, const char *name, int *ret_fd, struct error *err)
{
	char act[32];

	if (failpoint_armed("agent-classifier-load", act, sizeof(act))) {
		if (streq(act, "refuse"))
			return error_set(err, EINVAL,
			                 "the kernel refused the program (failpoint agent-classifier-load)");
		if (streq(act, "eperm"))
			return bpf_load_error(err, -EPERM, "classifier (failpoint agent-classifier-load)", NULL);
	}
	if (prog == AGENT_PROG_CLS)
		return bpf_cls_load(&ag->up_cls_map_fd, &ag->up_edt_map_fd, ret_fd, err);
	if (prog == AGENT_PROG_DOWN_CLS)
		return bpf_dcls_load(&ag->down_cls_map_fd, &ag->down_seen_map_fd, ret_fd, err);
	return bpf_gate_load(gate_map_fd(ag, prog), name, ret_fd, err);
}

static int classifier_prepare(struct agent *ag, struct plan *np, const unsigned *idx, unsigned n_idx,
                              int prog_fd[AGENT_PROG_MAX], struct error *err)
{
	int r;

	for (unsigned k = 0; k < AGENT_PROG_MAX; k++)
		prog_fd[k] = -1;
	for (unsigned k = 0; k < n_idx; k++) {
		struct plan_item *it = &np->items[idx[k]];
		const char *name;
		unsigned prog;

		if (it->type != ITEM_TC || it->n_alt == 0 || it->tc[0].kind != TC_KIND_BPF)
			continue;
		name = it->tc[0].u.bpf.name;
		prog = prog_of(name);
		if (prog_fd[prog] < 0) {
			r = prog_load(ag, prog, name, &prog_fd[prog], err);
			if (r < 0)
				return r;
			ag->prog_reload[prog] = false;
		}
		for (unsigned a = 0; a < it->n_alt; a++)
			it->tc[a].u.bpf.prog_fd = prog_fd[prog];
	}
	return 0;
}

/* This version's programs' tags, learnt once by loading each on scratch
 * maps. Unknown (a load failed: classifier_prepare reports why when a
 * plan needs the program), programs match by name alone. */
static void prog_tags_learn(struct agent *ag)
{
	_cleanup_close_ int cls = -1, edt = -1, gate = -1, dcls = -1, dseen = -1, pc = -1, pg = -1, pd = -1;
	uint8_t tag[3][TC_BPF_TAG_LEN];
	struct error e = {0};

	if (ag->prog_tag_known)
		return;
	if (bpf_cls_load(&cls, &edt, &pc, &e) < 0 || bpf_gate_load(&gate, BPF_GATE_NAME, &pg, &e) < 0 ||
	    bpf_dcls_load(&dcls, &dseen, &pd, &e) < 0 || bpf_prog_tag_get(pc, tag[0], &e) < 0 ||
	    bpf_prog_tag_get(pg, tag[1], &e) < 0 || bpf_prog_tag_get(pd, tag[2], &e) < 0) {
		log_msg(LOG_LVL_DEBUG, "BPF program tags unknown", "error", e.msg, (char *)NULL);
		return;
	}
	memcpy(ag->prog_tag[AGENT_PROG_CLS], tag[0], TC_BPF_TAG_LEN);
	memcpy(ag->prog_tag[AGENT_PROG_DOWN_GATE], tag[1], TC_BPF_TAG_LEN);
	memcpy(ag->prog_tag[AGENT_PROG_UP_GATE], tag[1], TC_BPF_TAG_LEN);
	memcpy(ag->prog_tag[AGENT_PROG_DOWN_CLS], tag[2], TC_BPF_TAG_LEN);
	ag->prog_tag_known = true;
}

/* The plan's programs want this version's tags. */
static void prog_tags_fill(struct agent *ag, struct plan *np)
{
	prog_tags_learn(ag);
	if (!ag->prog_tag_known)
		return;
	for (unsigned k = 0; k < np->n; k++) {
		struct plan_item *it = &np->items[k];

		if (it->type != ITEM_TC || it->n_alt == 0 || it->tc[0].kind != TC_KIND_BPF)
			continue;
		for (unsigned a = 0; a < it->n_alt; a++) {
			memcpy(it->tc[a].u.bpf.tag, ag->prog_tag[prog_of(it->tc[a].u.bpf.name)], TC_BPF_TAG_LEN);
			it->tc[a].u.bpf.tag_set = true;
		}
	}
}

/* After a restart: the maps of our attached classifier and gates, when
 * the attached program is this version's (its tag; an older one is
 * replaced by a program on new maps, never read with this version's
 * layout). A program whose maps cannot be adopted is loaded again
 * (prog_reload: its item is not in force). */
static void classifier_adopt(struct agent *ag, const struct tc_dump_list *dump)
{
	for (unsigned i = 0; i < dump->n; i++) {
		const struct tc_spec *o = &dump->tc[i];
		struct error e = {0};
		unsigned prog;
		int r;

		if (o->type != TC_FILTER || o->kind != TC_KIND_BPF || !o->u.bpf.prog_id ||
		    !(streq(o->u.bpf.name, BPF_CLS_NAME) || streq(o->u.bpf.name, BPF_GATE_NAME) ||
		      streq(o->u.bpf.name, BPF_GATE_UP_NAME) || streq(o->u.bpf.name, BPF_DCLS_NAME)))
			continue;
		prog = prog_of(o->u.bpf.name);
		if (ag->prog_tag_known && o->u.bpf.tag_set &&
		    memcmp(o->u.bpf.tag, ag->prog_tag[prog], TC_BPF_TAG_LEN) != 0) {
			log_msg(LOG_LVL_INFO, "BPF program of another version attached: it will be replaced", "program",
			        o->u.bpf.name, (char *)NULL);
			continue;
		}
		if (prog == AGENT_PROG_CLS) {
			if (ag->up_cls_map_fd >= 0 && ag->up_edt_map_fd >= 0)
				continue;
			classifier_forget(ag);
			r = bpf_cls_map_from_prog(o->u.bpf.prog_id, &ag->up_cls_map_fd, &ag->up_edt_map_fd, &e);
		} else if (prog == AGENT_PROG_DOWN_CLS) {
			if (ag->down_cls_map_fd >= 0)
				continue;
			map_fd_close(&ag->down_seen_map_fd);
			r = bpf_dcls_map_from_prog(o->u.bpf.prog_id, &ag->down_cls_map_fd, &ag->down_seen_map_fd, &e);
		} else {
			if (*gate_map_fd(ag, prog) >= 0)
				continue;
			r = bpf_gate_map_from_prog(o->u.bpf.prog_id, gate_map_fd(ag, prog), &e);
		}
		if (r < 0) {
			ag->prog_reload[prog] = true;
			log_msg(LOG_LVL_WARN, "BPF program's maps not adopted: loading it again", "program",
			        o->u.bpf.name, "error", e.msg, (char *)NULL);
		}
	}
}

/* Programs whose maps were not adopted are not in force: the delta loads
 * and attaches them again. */
static void prog_reload_pending(const struct agent *ag, struct plan *np)
{
	for (unsigned k = 0; k < np->n; k++) {
		struct plan_item *it = &np->items[k];

		if (it->type == ITEM_TC && it->n_alt && it->tc[0].kind == TC_KIND_BPF &&
		    ag->prog_reload[prog_of(it->tc[0].u.bpf.name)]) {
			it->status = ITEM_PENDING;
			it->chosen = -1;
		}
	}
}

/* The gates' configuration for the plan (bpf_gate.h); a gate's map let go
 * of when the plan has no such gate. Returns how many were written. */
static int gate_sync(struct agent *ag, const struct node_plan_info *info, struct error *err)
{
	struct bpf_gate g[2];
	int *fd[2] = {&ag->down_gate_map_fd, &ag->up_gate_map_fd}, changed = 0;

	node_gate_config(info, &g[0]);
	node_up_gate_config(info, ag->shaper.ifb_ifindex, &g[1]);
	for (unsigned k = 0; k < 2; k++) {
		bool ch = false;
		int r;

		if (!g[k].threshold_bytes) {
			map_fd_close(fd[k]);
			continue;
		}
		if (*fd[k] < 0)
			continue; /* not attached (skipped): nothing to configure */
		r = bpf_gate_sync(*fd[k], &g[k], &ch, err);
		if (r < 0)
			return r;
		changed += ch;
	}
	return changed;
}

/* Make the classifier's map match the pods (O(entries) syscalls), under
 * the config the plan was made with (its effective classify). */
static int classifier_sync(struct agent *ag, const struct node_pod *pods, unsigned n, const struct node_config *cfg,
                           const struct node_plan_info *info, struct error *err)
{
	_cleanup_free_ struct bpf_cls_entry *ents = NULL;
	unsigned n_ents = 0, changed = 0;
	struct bpf_edt edt;
	bool edt_changed = false;
	int r;

	if (!info->classifier) {
		classifier_forget(ag);
		return 0;
	}
	if (ag->up_cls_map_fd < 0 || ag->up_edt_map_fd < 0)
		return 0; /* not attached (skipped): nothing to fill */
	r = node_cls_entries(pods, n, cfg, info, &ents, &n_ents);
	if (r < 0)
		return error_set(err, -r, "classifier entries: %s", strerror(-r));
	r = bpf_cls_map_sync(ag->up_cls_map_fd, ents, n_ents, &changed, err);
	if (r < 0)
		return r;
	node_edt_config(cfg, info, &edt);
	r = bpf_edt_sync(ag->up_edt_map_fd, &edt, &edt_changed, err);
	if (r < 0)
		return r;
	changed += edt_changed;
	if (changed)
		log_msg(LOG_LVL_DEBUG, "uplink classifier synced", "entries", LOG_FMT("%u", n_ents), "written",
		        LOG_FMT("%u", changed), (char *)NULL);
	return (int)changed;
}

/* Make the download classifier's map match the pods; its map let go of
 * when the plan has no such classifier. */
static int down_classifier_sync(struct agent *ag, const struct node_pod *pods, unsigned n,
                                const struct node_plan_info *info, struct error *err)
{
	_cleanup_free_ struct bpf_cls_entry *ents = NULL;
	unsigned n_ents = 0, changed = 0;
	int r;

	if (!info->down.planned || !info->down.classifier) {
		map_fd_close(&ag->down_cls_map_fd);
		map_fd_close(&ag->down_seen_map_fd);
		return 0;
	}
	if (ag->down_cls_map_fd < 0)
		return 0; /* not attached (skipped): nothing to fill */
	r = node_down_cls_entries(pods, n, info, &ents, &n_ents);
	if (r < 0)
		return error_set(err, -r, "download classifier entries: %s", strerror(-r));
	if (ag->down.ifb_ifindex > 0) {
		/* what the ifb sends back through a pod's hook passes (podside.h) */
		struct bpf_cls_entry *more = realloc(ents, (n_ents + 1) * sizeof(*ents));

		if (!more)
			return error_set(err, ENOMEM, "out of memory");
		ents = more;
		ents[n_ents++] = (struct bpf_cls_entry){.key = {.kind = BPF_CLS_KEY_PASS},
		                                        .priority = (uint32_t)ag->down.ifb_ifindex};
	}
	r = bpf_cls_map_sync(ag->down_cls_map_fd, ents, n_ents, &changed, err);
	if (r < 0)
		return r;
	if (changed)
		log_msg(LOG_LVL_DEBUG, "download classifier synced", "entries", LOG_FMT("%u", n_ents), "written",
		        LOG_FMT("%u", changed), (char *)NULL);
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

/* The classifier's slot (egress pref NODE_FILTER_PRIO_CLS): ours at
 * another handle (an older version's) is stale; ours behind another tool's
 * program in the slot (it joined later, at the head of the list) would
 * never run when that program ends the chain: deleted, so the delta adds
 * it again at the head. Indexes in ret; the other tools' filters on both
 * hooks noted for status. */
static unsigned hook_scan(struct agent *ag, const struct tc_dump_list *dump, unsigned *ret)
{
	const uint32_t egress = TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS);
	bool foreign_first = false, seen_first = false;
	unsigned n = 0;

	ag->up_n_hook_foreign = 0;
	for (unsigned i = 0; i < dump->n; i++) {
		const struct tc_spec *o = &dump->tc[i];
		bool ours, in_slot;

		if (o->type != TC_FILTER || TC_H_MAJ(o->parent) != TC_H_MAJ(TC_H_CLSACT))
			continue;
		ours = uplink_filter_ours(ag->sk, o);
		in_slot = o->parent == egress && o->prio == NODE_FILTER_PRIO_CLS;
		if (!ours && ag->up_n_hook_foreign < AGENT_HOOK_FOREIGN_MAX)
			uplink_filter_describe(o, dump->kind_name[i], ag->up_hook_foreign[ag->up_n_hook_foreign++],
			                       AGENT_HOOK_FOREIGN_LEN);
		if (!in_slot)
			continue;
		if (!seen_first)
			foreign_first = !ours;
		seen_first = true;
		if (ours && o->kind == TC_KIND_BPF && (o->handle != NODE_CLS_HANDLE || foreign_first || ag->up_tcx)) {
			if (foreign_first)
				log_msg(LOG_LVL_WARN, "another tool's program runs before the classifier: moved ahead",
				        "uplink", ag->up.ifname, (char *)NULL);
			ret[n++] = i;
		}
	}
	return n;
}

/* Read the uplink: which planned items are already there (in force), and
 * delete our duplicates and orphans. Returns the number of objects deleted
 * or a negative errno. */
static int uplink_observe(struct agent *ag, struct plan *plan, const struct tc_dump_list *dump, struct error *err)
{
	_cleanup_free_ unsigned *orph = NULL;
	unsigned n_orph = 0;
	bool root_ours = false;
	int r;

	/* our root has classes and filters of ours to clean up (not mq: its
	 * per-queue classes are the kernel's) */
	for (unsigned i = 0; i < dump->n; i++)
		if (dump->tc[i].type == TC_QDISC && dump->tc[i].parent == TC_H_ROOT && dump->tc[i].handle == 0x10000u)
			root_ours = ag->up.have_record && dump->tc[i].kind != TC_KIND_MQ;
	classifier_adopt(ag, dump);
	r = downlink_adopt_match_dev(plan, DEV_UPLINK, dump, root_ours, &orph, &n_orph);
	if (r < 0)
		return error_set(err, -r, "match the uplink: %s", strerror(-r));
	r = downlink_delete_orphans(ag->sk, dump, orph, n_orph, ag->up.ifname, ag->up.ifindex, "uplink");
	{
		_cleanup_free_ unsigned *cls = calloc(dump->n ? dump->n : 1, sizeof(*cls));
		unsigned n_cls = cls ? hook_scan(ag, dump, cls) : 0;

		for (unsigned k = 0; k < n_cls; k++) {
			struct plan_item *it = plan_find(plan, "uplink.classifier");

			if (it && dump->tc[cls[k]].handle == NODE_CLS_HANDLE) {
				it->status = ITEM_PENDING; /* deleted below: added again, first */
				it->chosen = -1;
			}
		}
		r += downlink_delete_orphans(ag->sk, dump, cls, n_cls, ag->up.ifname, ag->up.ifindex, "uplink");
	}
	/* an upload gate and redirect of an earlier plan (GATED HTB) */
	if (!plan_find_const(plan, "uplink.redirect")) {
		_cleanup_free_ unsigned *hook = calloc(dump->n ? dump->n : 1, sizeof(*hook));
		unsigned n_hook = hook ? uplink_gate_objects(ag->sk, dump, hook) : 0;

		r += downlink_delete_orphans(ag->sk, dump, hook, n_hook, ag->up.ifname, ag->up.ifindex, "uplink");
	}
	return r;
}

/* One node pass, as named steps: decide (the mode; idle gives the uplink
 * back) -> plan -> observe/adopt (read the kernel when due) -> record (the
 * original tree, before the first change) -> apply the delta. Each step
 * returns NODE_STEP_NEXT, or NODE_STEP_DONE when the pass ends there
 * (settled, left alone, or failed: up_fail retries it later). */
enum { NODE_STEP_NEXT, NODE_STEP_DONE };

struct node_pass {
	int64_t now_ms, t0;
	bool observe;          /* drift repair: read the kernel */
	struct node_pod *pods; /* the node planner's input */
	unsigned n_pods;
	struct node_mode_state next; /* the mode decided */
	struct node_config ncfg;     /* the config, as this pass may plan it */
	bool need_observe;           /* the kernel is read this pass */
	struct tc_dump_list dump;    /* what the kernel has on the uplink */
	struct plan prev;            /* at adoption: the ids and handles of the kernel's filters */
	struct plan np;              /* the plan */
	struct node_plan_info info;
	bool changed_kernel;
};

static void node_pass_done(struct node_pass *ps)
{
	free(ps->pods);
	tc_dump_list_free(&ps->dump);
	plan_free(&ps->prev);
	plan_free(&ps->np);
}

/* The mode decided is the mode in force from now. */
static void node_mode_settle(struct agent *ag, const struct node_pass *ps)
{
	if (ps->next.mode != ag->mode.mode)
		mode_changed(ag, ag->mode.mode, ps->next.mode);
	ag->mode = ps->next;
}

/* Nothing of aiqos on the uplink (idle, or nothing to plan on this kernel). */
static void node_untuned(struct agent *ag, const struct node_pass *ps, const struct node_plan_info *info)
{
	up_ok(ag);
	ag->info = *info;
	ag->have_info = true;
	ag->up_adopted = true;
	node_mode_settle(ag, ps);
}

static int node_decide(struct agent *ag, struct node_pass *ps)
{
	struct node_counts counts;
	int64_t hold_due;

	if (!ag->api_listed)
		return NODE_STEP_DONE; /* until the first LIST the kernel keeps what it has (restart adoption) */
	if (!ag->up.ifname[0] || ag->up_need_discover) {
		if (uplink_refresh(ag) < 0) {
			ag->up_retries++;
			ag->up_retry_at_ms = ps->now_ms + sched_backoff_ms(ag->up_retries, 0);
			return NODE_STEP_DONE;
		}
	}
	if (pod_cache_node_pods(&ag->pods, ag->api_listed, &ps->pods, &ps->n_pods) < 0) {
		up_fail(ag, ps->now_ms, "node pods", NULL);
		return NODE_STEP_DONE;
	}
	node_pods_count(ps->pods, ps->n_pods, &counts);
	if (!ag->up_adopted && ag->up.have_record && ag->mode.mode == MODE_IDLE && ag->up.record.mode != MODE_IDLE) {
		/* a restart: continue the recorded mode, with the hold from now */
		ag->mode.mode = ag->up.record.mode;
		ag->mode.mixed_last_needed_ms = ag->mode.mode == MODE_MIXED ? ps->now_ms : 0;
		ag->mode_since_unix = ag->up.record.mode_since_unix;
	}
	hold_due = node_mode_decide(&ag->mode, &counts, ps->now_ms, ag->cfg.node.mixed_hold_s, &ps->next);
	sched_set_hold(&ag->sched, hold_due);
	return NODE_STEP_NEXT;
}

/* Idle: no download shaping, the uplink's original tree back. */
static int node_idle(struct agent *ag, struct node_pass *ps)
{
	struct error e = {0};

	if (downlink_prepare(ag, false, &e) < 0) {
		up_fail(ag, ps->now_ms, "remove the download shaping", &e);
		return NODE_STEP_DONE;
	}
	shaper_prepare(ag, false, NULL); /* its ifb goes once the uplink's redirect has gone (shaper_settle) */
	if (ag->up.have_record || ag->in_force.n) {
		if (uplink_give_back(ag, &e) < 0) {
			up_fail(ag, ps->now_ms, "restore the original root qdisc", &e);
			return NODE_STEP_DONE;
		}
		agent_count_retune(ag, RETUNE_NODE, RESULT_OK, seconds_since(ps->t0));
	}
	node_untuned(ag, ps, &(struct node_plan_info){.mode = MODE_IDLE, .shape = SHAPE_NONE});
	ag->up_need_observe = true; /* the first pass out of idle reads the uplink (other tools' filters) */
	return NODE_STEP_DONE;
}

/* A configured rate on several tx queues plans EDT where fq is (node.h,
 * "EDT"): fq is asked of a scratch netns first, once, so a kernel without
 * it never gets the EDT tree on its uplink only to have it replaced. Where
 * the probe cannot run, fq is learnt by trying, as every kind is. */
static void edt_fq_probe(struct agent *ag, const struct node_config *cfg)
{
	struct error e = {0};
	int kerr = 0, r;

	if (ag->up_fq_probed || !cfg->uplink_rate_bps || ag->up.facts.tx_queues < 2 ||
	    !plan_caps_has(&ag->up_caps, TC_KIND_FQ))
		return;
	ag->up_fq_probed = true;
	r = kind_probe_qdisc(TC_KIND_FQ, &kerr, &e);
	if (r == 0) {
		plan_caps_mark_missing(&ag->up_caps, TC_KIND_FQ);
		ag->up_caps.missing_errno[TC_KIND_FQ] = kerr;
		log_msg(LOG_LVL_INFO, "the kernel has no fq: a configured rate is shaped with HTB", "uplink",
		        ag->up.ifname, (char *)NULL);
	} else if (r < 0) {
		log_msg(LOG_LVL_WARN, "fq not probed: it is tried on the uplink", "uplink", ag->up.ifname, "error",
		        e.msg, (char *)NULL);
	}
}

/* Does the uplink's kernel have tcx, and which other programs sit on its
 * tcx hooks (status, and the facts the plan is made with)? */
static void tcx_probe(struct agent *ag)
{
	const char *env = getenv("AIQOS_TCX");

	if (ag->up_tcx_probed_ifindex != ag->up.ifindex) {
		ag->up_tcx = !(env && streq(env, "0")) && tcx_available(ag->up.ifindex);
		ag->up_tcx_probed_ifindex = ag->up.ifindex;
		log_msg(LOG_LVL_INFO,
		        ag->up_tcx ? "the kernel has tcx: the classifier is a tcx link" : "no tcx: clsact", "uplink",
		        ag->up.ifname, (char *)NULL);
	}
	ag->up_n_tcx_foreign = 0;
	for (int h = 0; ag->up_tcx && h < 2; h++) {
		struct bpf_tcx_prog p[AGENT_HOOK_FOREIGN_MAX];
		unsigned n = 0;

		if (bpf_tcx_query(ag->up.ifindex, h, p, ARRAY_SIZE(p), &n, NULL) < 0)
			continue;
		for (unsigned i = 0; i < n && i < ARRAY_SIZE(p) && ag->up_n_tcx_foreign < AGENT_HOOK_FOREIGN_MAX; i++)
			if (strncmp(p[i].name, UPLINK_PROG_PREFIX, strlen(UPLINK_PROG_PREFIX)) != 0)
				snprintf(ag->up_tcx_foreign[ag->up_n_tcx_foreign++], sizeof(ag->up_tcx_foreign[0]),
				         "%s %s (id %u)", h ? "egress" : "ingress", p[i].name[0] ? p[i].name : "?",
				         p[i].id);
	}
}

/* On a kernel with tcx the classifier is a tcx link (node/tcx.h), not the
 * plan's clsact filter: the item goes, and the clsact with it when nothing
 * else of the plan sits on it. */
static void tcx_plan(struct agent *ag, struct plan *np)
{
	bool hook_used = false;
	unsigned k = 0;

	if (!ag->up_tcx || !plan_find_const(np, "uplink.classifier"))
		return;
	for (unsigned i = 0; i < np->n; i++)
		hook_used |=
		        streq(np->items[i].depends, "uplink.clsact") && !streq(np->items[i].id, "uplink.classifier");
	for (unsigned i = 0; i < np->n; i++) {
		if (streq(np->items[i].id, "uplink.classifier") ||
		    (!hook_used && streq(np->items[i].id, "uplink.clsact"))) {
			continue;
		}
		np->items[k++] = np->items[i];
	}
	np->n = k;
}

/* The download direction's ifb, the kernel read when due, the plan. */
static int node_plan_build(struct agent *ag, struct node_pass *ps)
{
	struct error e = {0};
	bool down_wanted;
	int r;

	/* the download direction: its ifb before the plan (the redirect names it) */
	ps->ncfg = ag->cfg.node;
	ps->ncfg.overhead_bytes = datapath_overhead(ag->cfg.overhead_set, ag->cfg.node.overhead_bytes, &ag->dp);
	down_wanted = node_downlink_wanted(&ps->ncfg, &ag->up_caps, ps->next.mode, NULL);
	if (down_wanted && ag->up_foreign[0] && !ag->up.have_record) {
		/* the uplink was left alone: no ifb for a tree this pass will not
		 * apply (the pass that records the uplink brings it) */
		down_wanted = false;
		ps->ncfg.downlink = false;
	}
	if (downlink_prepare(ag, down_wanted, &e) < 0) {
		log_msg(LOG_LVL_WARN, "download direction not shaped", "uplink", ag->up.ifname, "error", e.msg,
		        (char *)NULL);
		error_clear(&e);
	}
	if (down_wanted && !ag->up.facts.ifb_ifindex && !ag->up.facts.ingress_foreign)
		ps->ncfg.downlink = false; /* no ifb: plan without the download tree this pass */

	ps->need_observe = ps->observe || !ag->up_adopted || ag->up_need_observe;
	if (ps->need_observe) {
		r = nl_tc_dump_alloc(ag->sk, ag->up.ifindex, 0, &ps->dump, &e);
		if (r < 0) {
			if (r == -ENODEV)
				ag->up_need_discover = true;
			up_fail(ag, ps->now_ms, "read the uplink", &e);
			return NODE_STEP_DONE;
		}
		if (!ag->up_adopted && uplink_prev_from_dump(&ps->dump, ps->pods, ps->n_pods, &ps->prev) < 0) {
			up_fail(ag, ps->now_ms, "out of memory", NULL);
			return NODE_STEP_DONE;
		}
	}
	if (ps->need_observe) {
		/* another tool's egress filter after the upload gate's prefs */
		ag->up_egress_foreign_after = false;
		for (unsigned i = 0; i < ps->dump.n; i++) {
			const struct tc_spec *o = &ps->dump.tc[i];

			if (o->type == TC_FILTER && o->parent == TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS) &&
			    o->prio > NODE_FILTER_PRIO_UP_REDIRECT && !uplink_filter_ours(ag->sk, o))
				ag->up_egress_foreign_after = true;
		}
	}
	tcx_probe(ag);
	/* another tool's tcx egress program runs before our gate and redirect too */
	ag->up.facts.egress_foreign_after = ag->up_egress_foreign_after;
	for (unsigned i = 0; i < ag->up_n_tcx_foreign; i++)
		ag->up.facts.egress_foreign_after |= !strncmp(ag->up_tcx_foreign[i], "egress ", 7);
	ag->up.facts.no_queue = uplink_no_queue(ag->sk, &ag->up);
	ag->up.facts.ingress_held = uplink_ingress_held(ag->sk, ag->up.ifindex);
	edt_fq_probe(ag, &ps->ncfg);
	/* the gated upload tree's ifb before the plan (its redirect names it) */
	ag->up.facts.ifb_up_failed = false;
	if (shaper_prepare(ag, node_htb_ifb_wanted(&ps->ncfg, &ag->up.facts, &ag->up_caps, ps->next.mode), &e) < 0) {
		log_msg(LOG_LVL_WARN, "upload shaper ifb not available: HTB at the root instead", "uplink",
		        ag->up.ifname, "error", e.msg, (char *)NULL);
		error_clear(&e);
	}
	/* classify "dscp" only where every pod's mark is aiqos's own (trust.c) */
	if (!agent_dscp_trusted(ag))
		ps->ncfg.classify = CLASSIFY_SRC_IP;
	r = node_plan(ps->pods, ps->n_pods, &ps->ncfg, &ag->up.facts, &ag->up_caps, ps->next.mode,
	              ps->need_observe && !ag->up_adopted ? &ps->prev : &ag->in_force, &ps->np, &ps->info, &e);
	if (r < 0) {
		up_fail(ag, ps->now_ms, "plan", &e);
		return NODE_STEP_DONE;
	}
	warnings_update(ag, &ps->info);
	tcx_plan(ag, &ps->np);
	prog_tags_fill(ag, &ps->np);

	if (ps->info.shape == SHAPE_NONE && !ps->info.down.planned) {
		/* nothing to plan on this kernel or this device: the original stays (as at idle) */
		tc_dump_list_free(&ps->dump);
		if (ag->up.have_record || ag->in_force.n) {
			if (uplink_give_back(ag, &e) < 0) {
				up_fail(ag, ps->now_ms, "restore the original root qdisc", &e);
				return NODE_STEP_DONE;
			}
		}
		node_untuned(ag, ps, &ps->info);
		return NODE_STEP_DONE;
	}
	return NODE_STEP_NEXT;
}

/* Items in force that the kernel no longer has as planned (deleted or
 * changed behind our back): the delta re-applies them, a drift repair. */
static unsigned drifted_items(const struct plan *in_force, const struct plan *observed)
{
	unsigned n = 0;

	for (unsigned i = 0; i < observed->n; i++) {
		const struct plan_item *it = &observed->items[i], *was;

		if (it->status != ITEM_PENDING)
			continue;
		was = plan_find_const(in_force, it->id);
		n += was && (was->status == ITEM_APPLIED || was->status == ITEM_DEGRADED);
	}
	return n;
}

/* When the kernel was read: adopt what it has of the plan (that is the plan
 * in force), delete what is ours but not planned. */
static int node_adopt(struct agent *ag, struct node_pass *ps)
{
	struct error e = {0};
	int deleted;

	if (!ps->need_observe) {
		in_force_prune(&ag->in_force);
		return NODE_STEP_NEXT;
	}
	deleted = uplink_observe(ag, &ps->np, &ps->dump, &e);
	tc_dump_list_free(&ps->dump);
	if (deleted >= 0) {
		int dd = downlink_observe(ag, &ps->np, &e);

		deleted = dd < 0 ? dd : deleted + dd;
	}
	if (deleted >= 0) {
		int ds = shaper_observe(ag, &ps->np, &e);

		deleted = ds < 0 ? ds : deleted + ds;
	}
	if (deleted < 0) {
		up_fail(ag, ps->now_ms, "adopt", &e);
		return NODE_STEP_DONE;
	}
	prog_reload_pending(ag, &ps->np);
	if (ag->up_adopted) {
		/* what the delta puts back and what was deleted: both reported */
		unsigned missing = drifted_items(&ag->in_force, &ps->np);

		ag->ctr.drift_repairs += (unsigned)deleted + missing;
		if (missing)
			log_msg(LOG_LVL_WARN, "uplink objects changed behind our back: put back", "uplink",
			        ag->up.ifname, "objects", LOG_FMT("%u", missing), (char *)NULL);
	}
	ps->changed_kernel |= deleted > 0;
	/* in force = what the kernel has of the plan */
	if (plan_copy(&ps->np, &ag->in_force) < 0) {
		up_fail(ag, ps->now_ms, "out of memory", NULL);
		return NODE_STEP_DONE;
	}
	in_force_prune(&ag->in_force);
	ag->up_adopted = true;
	ag->up_need_observe = false;
	return NODE_STEP_NEXT;
}

/* Record what was there before the first change; a tree aiqos did not make
 * is left alone. */
static int node_record(struct agent *ag, struct node_pass *ps)
{
	char path[AGENT_PATH_MAX];
	struct error e = {0};
	int r;

	if (ag->up.have_record)
		return NODE_STEP_NEXT;
	record_path(ag, path, sizeof(path));
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
		error_clear(&e);
		if (ag->down.have_record && downlink_give_back(ag, &e) < 0) {
			/* the ifb this pass prepared for a tree it will not apply */
			log_msg(LOG_LVL_WARN, "cannot remove the download ifb", "ifb", PLAN_IFB_NAME, "error", e.msg,
			        (char *)NULL);
			error_clear(&e);
		}
		up_ok(ag);
		ag->info = ps->info;
		ag->info.down = (struct node_down_info){0}; /* planned, never applied */
		ag->have_info = true;
		node_mode_settle(ag, ps);
		return NODE_STEP_DONE;
	}
	if (r == 0) {
		ag->up.record.mode = ag->mode.mode;
		ag->up.record.mode_since_unix = ag->mode_since_unix;
		r = uplink_record_save(path, &ag->up.record, &e);
	}
	if (r < 0) {
		/* never change what we could not record */
		up_fail(ag, ps->now_ms, "record the original root qdisc", &e);
		return NODE_STEP_DONE;
	}
	ag->up.have_record = true;
	if (ag->up_foreign[0]) {
		log_msg(LOG_LVL_INFO, "uplink no longer holds a foreign tree", "uplink", ag->up.ifname, (char *)NULL);
		sched_kick_now(&ag->sched, ps->now_ms); /* the download tree this pass planned without */
	}
	ag->up_foreign[0] = '\0';
	log_msg(LOG_LVL_INFO, "uplink original recorded", "uplink", ag->up.ifname, "qdisc", ag->up.record.rendered,
	        "file", path, (char *)NULL);
	return NODE_STEP_NEXT;
}

/* Only the delta between the plan in force and the new plan goes to the
 * kernel: removals first, then what is added or changed; the plan reached is
 * in force. */
static int node_apply_delta(struct agent *ag, struct node_pass *ps)
{
	struct node_plan_delta d = {0};
	struct apply_target t;
	struct error e = {0};
	_cleanup_free_ unsigned *idx = NULL;
	_cleanup_free_ bool *absent = NULL;
	unsigned n_idx = 0, n_removed = 0;
	uint32_t caps_before;
	int r, prog_fd[AGENT_PROG_MAX];

	r = node_plan_delta(&ag->in_force, &ps->np, &d);
	if (r < 0) {
		up_fail(ag, ps->now_ms, "out of memory", NULL);
		return NODE_STEP_DONE;
	}
	if (node_plan_carry_effective(&ps->np, &ag->in_force) < 0) {
		node_plan_delta_free(&d);
		up_fail(ag, ps->now_ms, "out of memory", NULL);
		return NODE_STEP_DONE;
	}
	t = uplink_target(ag);

	/* removals first, children before parents (filters, leaves, classes) */
	n_removed = d.n_removed;
	for (unsigned k = d.n_removed; k-- > 0;) {
		const struct plan_item *it = &ag->in_force.items[d.removed[k]];

		if (it->type == ITEM_TC && it->tc[0].kind == TC_KIND_CLSACT &&
		    (ag->up.record.clsact_before || uplink_clsact_in_use(ag->sk, ag->up.ifindex)))
			continue; /* not ours (there before aiqos), or other filters are on it */
		error_clear(&e);
		r = apply_remove_item(it, &t, &e);
		if (r < 0)
			log_msg(LOG_LVL_WARN, "cannot remove an uplink object", "item", it->id, "error", e.msg,
			        (char *)NULL);
		ps->changed_kernel = true;
	}
	idx = calloc(d.n_added + d.n_changed + 1, sizeof(*idx));
	absent = calloc(d.n_added + d.n_changed + 1, sizeof(*absent));
	if (!idx || !absent) {
		node_plan_delta_free(&d);
		up_fail(ag, ps->now_ms, "out of memory", NULL);
		return NODE_STEP_DONE;
	}
	/* added and changed, in plan order (parents first) */
	n_idx = node_delta_apply_order(&d, idx, absent);
	node_plan_delta_free(&d);
	error_clear(&e);
	caps_before = ag->up_caps.missing_kinds;
	r = classifier_prepare(ag, &ps->np, idx, n_idx, prog_fd, &e);
	if (r < 0 && bpf_denied(r)) {
		/* bpf(2) refused: the agent's configuration (seccomp, capabilities,
		 * memlock), not the kernel. Planning without BPF would put a
		 * multi-queue uplink behind one lock, worse than without aiqos:
		 * nothing changes until the configuration does (retried). */
		char msg[AGENT_FAILURE_MAX];

		for (unsigned k = 0; k < AGENT_PROG_MAX; k++)
			if (prog_fd[k] >= 0)
				close(prog_fd[k]);
		snprintf(msg, sizeof(msg), "BPF not permitted: %s", e.msg);
		if (!streq(msg, ag->up_failure))
			uplink_event(ag, "BPFNotPermitted", e.msg);
		up_fail(ag, ps->now_ms, "BPF not permitted", &e);
		return NODE_STEP_DONE;
	}
	if (r < 0) {
		/* learnt missing like a refused kind: its item is skipped now and
		 * the next plan goes without it (HTB: its u32 filters classify) */
		log_msg(LOG_LVL_WARN, "uplink classifier not loaded: planning without it", "uplink", ag->up.ifname,
		        "error", e.msg, (char *)NULL);
		plan_caps_mark_missing(&ag->up_caps, TC_KIND_BPF);
		ag->up_caps.missing_errno[TC_KIND_BPF] = -r;
	}
	error_clear(&e);
	r = n_idx ? apply_plan(&ps->np, &(struct apply_only){.idx = idx, .absent = absent, .n = n_idx}, &t,
	                       &ag->up_caps, &e)
	          : 0;
	ps->changed_kernel |= n_idx > 0;
	for (unsigned k = 0; k < AGENT_PROG_MAX; k++)
		if (prog_fd[k] >= 0)
			close(prog_fd[k]); /* the filter holds the program now */
	for (unsigned k = 0; k < ps->np.n; k++)
		if (ps->np.items[k].type == ITEM_TC && ps->np.items[k].tc[0].kind == TC_KIND_BPF)
			for (unsigned a = 0; a < ps->np.items[k].n_alt; a++)
				ps->np.items[k].tc[a].u.bpf.prog_fd = -1;
	{
		struct error ec = {0};
		int q = 0;

		if (ag->up_tcx) {
			q = tcx_cls_sync(ag, ps->info.classifier, &ec);
			if (q < 0)
				log_msg(LOG_LVL_WARN, "uplink classifier not attached (tcx)", "uplink", ag->up.ifname,
				        "error", ec.msg, (char *)NULL);
			ps->changed_kernel |= q > 0;
			error_clear(&ec);
		}
		q = classifier_sync(ag, ps->pods, ps->n_pods, &ps->ncfg, &ps->info, &ec);

		if (q < 0)
			log_msg(LOG_LVL_WARN, "uplink classifier not synced", "uplink", ag->up.ifname, "error", ec.msg,
			        (char *)NULL);
		ps->changed_kernel |= q > 0;
		error_clear(&ec);
		q = down_classifier_sync(ag, ps->pods, ps->n_pods, &ps->info, &ec);
		if (q < 0)
			log_msg(LOG_LVL_WARN, "download classifier not synced", "uplink", ag->up.ifname, "error",
			        ec.msg, (char *)NULL);
		ps->changed_kernel |= q > 0;
		error_clear(&ec);
		/* downloads that never reach the uplink's hook: fed at the pods' (podside.h) */
		q = podside_sync(ag,
		                 !ps->info.down.planned || !ps->info.down.classifier ? 0
		                 : !ag->down_reach.known                             ? -1
		                                                                     : ag->down_reach.bypassed,
		                 &ec);
		if (q < 0)
			log_msg(LOG_LVL_WARN, "download tree not fed at the pods' interfaces", "uplink", ag->up.ifname,
			        "error", ec.msg, (char *)NULL);
		ps->changed_kernel |= q > 0;
		error_clear(&ec);
		q = gate_sync(ag, &ps->info, &ec);
		if (q < 0)
			log_msg(LOG_LVL_WARN, "gate not configured", "uplink", ag->up.ifname, "error", ec.msg,
			        (char *)NULL);
		ps->changed_kernel |= q > 0;
	}

	/* the plan in force is what we just reached */
	plan_free(&ag->in_force);
	ag->in_force = ps->np;
	ps->np = (struct plan){0};
	ag->info = ps->info;
	ag->have_info = true;

	if (r < 0) {
		up_fail(ag, ps->now_ms, "apply", &e);
		if (r == -ENODEV)
			ag->up_need_discover = true;
	} else {
		up_ok(ag);
	}
	if (ag->up_caps.missing_kinds != caps_before)
		sched_kick_now(&ag->sched, ps->now_ms); /* the structure may change (prio -> htb): plan again */
	if (ps->changed_kernel) {
		bool degraded = false;

		for (unsigned i = 0; i < ag->in_force.n; i++)
			degraded |= ag->in_force.items[i].status == ITEM_DEGRADED ||
			            ag->in_force.items[i].status == ITEM_SKIPPED;
		agent_count_retune(ag, RETUNE_NODE,
		                   r < 0      ? RESULT_FAILED
		                   : degraded ? RESULT_DEGRADED
		                              : RESULT_OK,
		                   seconds_since(ps->t0));
		char nb[3][16], dur[24];

		snprintf(nb[0], sizeof(nb[0]), "%u", n_removed);
		snprintf(nb[1], sizeof(nb[1]), "%u", n_idx);
		snprintf(nb[2], sizeof(nb[2]), "%u", ag->in_force.n);
		snprintf(dur, sizeof(dur), "%lld", (long long)(agent_now_ms() - ps->t0));
		log_msg(LOG_LVL_DEBUG, "uplink re-tuned", "uplink", ag->up.ifname, "mode",
		        node_mode_name(ps->next.mode), "shape", node_shape_name(ps->info.shape), "removed", nb[0],
		        "applied", nb[1], "objects", nb[2], "duration_ms", dur, (char *)NULL);
	}
	node_mode_settle(ag, ps);
	return NODE_STEP_DONE;
}

void node_reconcile(struct agent *ag, int64_t now_ms, bool observe)
{
	struct node_pass ps = {.now_ms = now_ms, .t0 = agent_now_ms(), .observe = observe};

	if (node_decide(ag, &ps) == NODE_STEP_NEXT) {
		if (ps.next.mode == MODE_IDLE)
			node_idle(ag, &ps);
		else if (node_plan_build(ag, &ps) == NODE_STEP_NEXT && node_adopt(ag, &ps) == NODE_STEP_NEXT &&
		         node_record(ag, &ps) == NODE_STEP_NEXT)
			node_apply_delta(ag, &ps);
	}
	node_pass_done(&ps);
	{
		struct error e = {0};

		/* the gated upload tree's ifb, once nothing in force sends to it */
		if (shaper_settle(ag, &e) < 0)
			log_msg(LOG_LVL_WARN, "cannot remove the upload shaper ifb", "ifb", PLAN_IFB_UP_NAME, "error",
			        e.msg, (char *)NULL);
	}
	/* the download tree's training receive window follows the plan in force */
	agent_profiles_refresh(ag, true);
}

/* The uplink's recorded original back (its clsact hook with it). */
static int uplink_cleanup(struct agent *ag, struct error *err)
{
	char path[AGENT_PATH_MAX];
	struct uplink_record rec;
	struct link_info li;
	int r;

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
	/* the classifier's pinned tcx link, if any */
	str_copy(ag->up.ifname, sizeof(ag->up.ifname), rec.ifname);
	tcx_cls_release(ag, true);
	log_msg(LOG_LVL_INFO, "uplink restored", "uplink", rec.ifname, "qdisc", rec.rendered, (char *)NULL);
	return uplink_record_remove(path, err);
}

int agent_cleanup_uplink(struct agent *ag, struct error *err)
{
	int r;

	podside_release_all(ag); /* nothing redirects to the ifb once it goes */
	r = downlink_cleanup(ag->sk, ag->state_dir, err);

	if (r >= 0)
		r = uplink_cleanup(ag, err);
	/* the upload shaper's ifb once nothing redirects to it */
	return r < 0 ? r : shaper_cleanup(ag->sk, ag->state_dir, err);
}

/* ---- tc changes by others (the rtnetlink monitor) ---- */

/* Is (parent, prio) of a filter, or handle of a qdisc, an uplink object in force? */
static bool uplink_in_force(const struct agent *ag, bool filter, uint32_t parent, uint32_t handle, uint16_t prio)
{
	for (unsigned i = 0; i < ag->in_force.n; i++) {
		const struct plan_item *it = &ag->in_force.items[i];
		const struct tc_spec *s = it->n_alt ? &it->tc[0] : NULL;

		if (it->type != ITEM_TC || it->dev != DEV_UPLINK || !s)
			continue;
		if (filter && s->type == TC_FILTER && s->parent == parent && s->prio == prio)
			return true;
		if (!filter && s->type == TC_QDISC && TC_H_MAJ(s->handle) == TC_H_MAJ(handle))
			return true;
	}
	return false;
}

/* "comm (pid N)" of a netlink port that is a process id, else "port N" */
static void port_owner(uint32_t pid, char *buf, size_t size)
{
	char path[64], comm[64] = "";
	FILE *f;

	if (!pid) {
		snprintf(buf, size, "the kernel");
		return;
	}
	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	f = fopen(path, "re");
	if (f) {
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(f);
	}
	if (comm[0])
		snprintf(buf, size, "%s (pid %u)", comm, pid);
	else
		snprintf(buf, size, "netlink port %u (no such process now)", pid);
}

void agent_tc_event(struct agent *ag, int type, int ifindex, uint32_t parent, uint32_t handle, uint16_t prio,
                    const char *kind, uint32_t pid)
{
	static const char *const hook_name[AGENT_HOOK_KINDS] = {"clsact", "qdisc", "ifb"};
	bool filter = type == RTM_DELTFILTER || type == RTM_NEWTFILTER;
	bool hook = TC_H_MAJ(parent) == TC_H_MAJ(TC_H_CLSACT) && filter;
	bool ingress = false, ours = false;
	unsigned kind_ix = AGENT_HOOK_QDISC;
	char who[128], msg[AGENT_FAILURE_MAX], what[96];

	if (ifindex <= 0)
		return;
	if (ifindex == ag->up.ifindex) {
		if (type == RTM_NEWTFILTER) {
			if (hook) {
				ag->up_need_observe = true; /* another tool's filter: where it runs, what to list */
				sched_kick(&ag->sched, agent_now_ms());
			}
			return;
		}
		if (type != RTM_DELTFILTER && type != RTM_DELQDISC)
			return;
		if (filter) {
			ours = uplink_in_force(ag, true, parent, handle, prio);
			ingress = hook && TC_H_MIN(parent) == TC_H_MIN_INGRESS;
			kind_ix = hook ? AGENT_HOOK_CLSACT : AGENT_HOOK_QDISC;
		} else {
			ours = uplink_in_force(ag, false, parent, handle, prio);
			kind_ix = TC_H_MAJ(handle) == TC_H_MAJ(TC_H_CLSACT) ? AGENT_HOOK_CLSACT : AGENT_HOOK_QDISC;
		}
	} else if (ifindex == ag->down.ifb_ifindex || ifindex == ag->shaper.ifb_ifindex) {
		if (type != RTM_DELTFILTER && type != RTM_DELQDISC)
			return;
		ours = true;
		ingress = ifindex == ag->down.ifb_ifindex;
		kind_ix = AGENT_HOOK_IFB;
	} else if (ag->podside_on && type == RTM_DELTFILTER && hook && TC_H_MIN(parent) == TC_H_MIN_EGRESS &&
	           (prio == NODE_FILTER_PRIO_DOWN_CLS || prio == NODE_FILTER_PRIO_UP_REDIRECT)) {
		/* a pod's download hook (podside.h): the download direction's */
		ours = true;
		ingress = true;
		kind_ix = AGENT_HOOK_CLSACT;
	}
	if (!ours)
		return;
	ag->ctr.hook_deletions[ingress][kind_ix]++;
	port_owner(pid, who, sizeof(who));
	if (filter)
		snprintf(what, sizeof(what), "filter %s pref %u handle 0x%x (%s)", kind && kind[0] ? kind : "?", prio,
		         handle, ingress ? "ingress" : "egress");
	else
		snprintf(what, sizeof(what), "qdisc %s %x:", kind && kind[0] ? kind : "?", TC_H_MAJ(handle) >> 16);
	snprintf(msg, sizeof(msg), "aiqos's %s on %s deleted by %s: put back", what,
	         ifindex == ag->up.ifindex           ? ag->up.ifname
	         : ifindex == ag->down.ifb_ifindex   ? PLAN_IFB_NAME
	         : ifindex == ag->shaper.ifb_ifindex ? PLAN_IFB_UP_NAME
	                                             : "a pod's interface",
	         who);
	log_msg(LOG_LVL_WARN, "tc object deleted behind our back", "object", what, "by", who, "hook",
	        hook_name[kind_ix], (char *)NULL);
	/* one Event per burst (another tool deleting every filter) */
	if (agent_now_unix() - ag->up_hook_deleted_unix >= 10)
		uplink_event(ag, "UplinkHookDeleted", msg);
	str_copy(ag->up_hook_deleted, sizeof(ag->up_hook_deleted), msg);
	ag->up_hook_deleted_unix = agent_now_unix();
	ag->up_need_observe = true;
	sched_kick(&ag->sched, agent_now_ms());
}
