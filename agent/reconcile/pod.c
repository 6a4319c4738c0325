/* pod.c — the pod half of re-tuning: an attachment whose pod now asks for
 * another class/profile/limits is re-planned with the one planner, applied,
 * what the old plan had and the new one lacks is removed (sysctls put back,
 * qdiscs deleted), and its record rewritten so the plugin's CHECK/DEL see
 * the truth — all through attach_tune(), the crash protocol of attach.h
 * (intent, kernel, commit); records are (re)loaded from the state dir (a
 * pending one whose writer died is recovered: a crashed ADD or teardown torn
 * down, a crashed re-tune rolled forward), and drift repair re-applies
 * attachments whose kernel state differs from their record. */
#include <cjson/cJSON.h>
#include <fcntl.h>

#include "agent.h"
#include "attach.h"
#include "node/trust.h"
#include "reconcile/internal.h"
#include "reconcile/reconcile.h"

/* ---- attachments: loading records ---- */

int agent_attach_load(struct agent *ag, const char *container_id, const char *ifname, struct error *err)
{
	_cleanup_attach_state_ struct attach_state *s = calloc(1, sizeof(*s));
	struct agent_attach at;
	struct agent_pod *p;
	cJSON *choices = NULL;
	bool is_new = false, found;
	int r;

	if (!s)
		return error_set(err, ENOMEM, "out of memory");
	r = state_load(ag->state_dir, container_id, ifname, s, &choices, err);
	if (r == -ENOENT) {
		error_clear(err);
		pod_cache_attach_remove(&ag->pods, container_id, ifname, &found);
		return 0;
	}
	if (r < 0)
		return r;
	if (s->pending) {
		/* its writer holds the lock (its commit rescans), or died: then
		 * recover (attach.h): a crashed ADD or teardown is torn down, a
		 * crashed re-tune rolled forward by the next re-tune (its record
		 * says it failed). Judged on the record as it is under the lock:
		 * the one read before may be an intent its writer has committed
		 * (and unlocked) since — undoing that would tear down a live
		 * pod's tuning and record. */
		int fd;

		failpoint("agent-recover-before-lock");
		fd = state_lock_attachment(ag->state_dir, container_id, ifname, 0, NULL);
		if (fd < 0) {
			cJSON_Delete(choices);
			return 0;
		}
		cJSON_Delete(choices);
		choices = NULL;
		r = state_load(ag->state_dir, container_id, ifname, s, &choices, err);
		if (r < 0) {
			state_unlock_attachment(fd, ag->state_dir, container_id, ifname);
			if (r != -ENOENT)
				return r;
			error_clear(err); /* removed meanwhile (DEL) */
			pod_cache_attach_remove(&ag->pods, container_id, ifname, &found);
			return 0;
		}
		if (attach_recover_action(s) == ATTACH_RECOVER_TEARDOWN) {
			struct attach_teardown_res td;

			r = attach_teardown(ag->state_dir, &ag->profiles, s, choices, s->netns, &td);
			state_unlock_attachment(fd, ag->state_dir, container_id, ifname);
			cJSON_Delete(choices);
			log_msg(r < 0 ? LOG_LVL_WARN : LOG_LVL_INFO,
			        r < 0 ? "crashed attachment not cleaned; retried" : "crashed attachment cleaned",
			        "container", container_id, "ifname", ifname, "intent", attach_op_name(s->intent.op),
			        "error",
			        td.open_err.msg[0]     ? td.open_err.msg
			        : td.remove_err.msg[0] ? td.remove_err.msg
			                               : td.record_err.msg,
			        (char *)NULL);
			if (r == 0)
				pod_cache_attach_remove(&ag->pods, container_id, ifname, &found);
			return 0;
		}
		state_unlock_attachment(fd, ag->state_dir, container_id, ifname);
	}
	agent_attach_from_state(s, &at);
	at.marks = agent_choices_mark(choices);
	/* not re-planned here: what fell back is in the record's choices
	 * (without this such a pod was shown "tuned") */
	at.degraded = at.degraded || agent_choices_degraded(choices);
	cJSON_Delete(choices);
	p = pod_cache_attach_upsert(&ag->pods, &at, &is_new);
	if (!p)
		return error_set(err, ENOMEM, "out of memory");
	if (is_new) {
		p->announce = true;
		p->dirty = true;
	} else if (pod_attach_needs_retune(p, &at)) {
		/* A record that failed is retried by its backoff timer, not by
		 * every rescan of the state dir (our own state_save after the
		 * failure triggers one): that was a retry and an Event every
		 * debounce. A change of what the pod wants still goes at once. */
		bool only_failed = at.failed && pod_attach_tuned_as_wanted(p, &at);

		if (!(only_failed && p->retry_at_ms >= 0))
			p->dirty = true;
	}
	return 0;
}

static int rescan_one(const char *container_id, const char *ifname, void *ud)
{
	struct agent *ag = ud;
	struct error e = {0};

	if (agent_attach_load(ag, container_id, ifname, &e) < 0)
		log_msg(LOG_LVL_WARN, "attachment record unreadable", "container", container_id, "ifname", ifname,
		        "error", e.msg, (char *)NULL);
	return 0;
}

void agent_attach_rescan(struct agent *ag)
{
	struct error e = {0};

	pod_cache_attach_mark(&ag->pods);
	if (state_list(ag->state_dir, rescan_one, ag, &e) < 0) {
		/* keep what we know: an unreadable dir must not look like "no pods" */
		log_msg(LOG_LVL_WARN, "state dir unreadable", "dir", ag->state_dir, "error", e.msg, (char *)NULL);
		for (unsigned i = 0; i < ag->pods.n; i++)
			for (unsigned k = 0; k < ag->pods.v[i]->n_att; k++)
				ag->pods.v[i]->att[k].seen = true;
		return;
	}
	pod_cache_attach_sweep(&ag->pods);
}

/* ---- per-pod re-tuning ---- */

struct retune_out {
	bool stale; /* the pod's netns or interface is gone */
	bool failed;
	bool netns_unreachable; /* failed: the pod runs, its netns path cannot be opened here */
	bool degraded;
	char effective[512];
	char degraded_txt[512];
	char failure[AGENT_FAILURE_MAX];
};

static void out_summary(const struct plan *p, struct retune_out *out)
{
	attach_plan_summary(p, out->effective, sizeof(out->effective), out->degraded_txt, sizeof(out->degraded_txt));
	out->degraded = out->degraded_txt[0] != '\0';
}

/* Describe an attachment from its record (the plugin's ADD). */
static int attach_describe(struct agent *ag, struct agent_attach *at, struct retune_out *out)
{
	_cleanup_attach_state_ struct attach_state *s = calloc(1, sizeof(*s));
	cJSON *choices = NULL;
	struct error e = {0};
	int r;

	memset(out, 0, sizeof(*out));
	if (!s)
		return -ENOMEM;
	r = state_load(ag->state_dir, at->container_id, at->ifname, s, &choices, &e);
	if (r < 0) {
		snprintf(out->failure, sizeof(out->failure), "%s", e.msg);
		out->failed = true;
		return r;
	}
	r = attach_plan_restore(&ag->profiles, s, choices, NULL, &e);
	cJSON_Delete(choices);
	if (r == 0)
		out_summary(&s->plan, out);
	if (s->failure[0]) {
		out->failed = true;
		snprintf(out->failure, sizeof(out->failure), "%s", s->failure);
	}
	return 0;
}

/* The netns path cannot be opened, yet the API says the pod runs: not a pod
 * that is gone (DEL will come) but a path the agent cannot see, e.g.
 * /proc/<pid>/ns/net from cri-dockerd and an agent without hostPID. A
 * failure (Event, metric, retried), never a silently stale pod. */
static bool netns_unreachable(const struct agent_pod *p, const char *netns, struct retune_out *out)
{
	int fd, saved;

	if (!netns || !netns[0] || !p->in_api || p->deleting || p->phase == KUBE_POD_PHASE_SUCCEEDED ||
	    p->phase == KUBE_POD_PHASE_FAILED)
		return false;
	fd = open(netns, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		close(fd); /* the netns is there: its interface is what is gone */
		return false;
	}
	saved = errno;
	out->failed = true;
	out->netns_unreachable = true;
	snprintf(out->failure, sizeof(out->failure),
	         "netns %s cannot be opened by the agent (%s) while the pod runs: %s", netns, strerror(saved),
	         strncmp(netns, "/proc/", 6) == 0
	                 ? "a /proc/<pid> path of another pid namespace (run the agent with hostPID: true)"
	                 : "is the runtime's netns directory mounted into the agent?");
	return true;
}

/* The attachment lock held by a re-tune, released (and its file removed when
 * the attachment has no record any more) on every return. */
struct retune_lock {
	int fd;
	const char *dir;
	char cid[STATE_ID_MAX], ifname[IFNAME_LEN];
};

static void retune_lock_release(struct retune_lock *l)
{
	state_unlock_attachment(l->fd, l->dir, l->cid, l->ifname);
}

/* Re-tune one attachment to the pod's want (force: also when its record
 * already says so — drift repair). */
static int attach_retune(struct agent *ag, struct agent_pod *p, struct agent_attach *at, struct retune_out *out)
{
	_cleanup_attach_state_ struct attach_state *s = calloc(1, sizeof(*s));
	_cleanup_plan_ struct plan new_plan = {0};
	struct plan *np = &new_plan;
	const struct profile *prof;
	struct agent_attach updated;
	struct attach a;
	struct workload w;
	struct attach_ifaces ifs;
	cJSON *choices = NULL;
	struct error e = {0}, fail = {0};
	char pwarn[256] = "";
	_cleanup_(retune_lock_release) struct retune_lock lock = {.fd = -1, .dir = ag->state_dir};
	int r;

	memset(out, 0, sizeof(*out));
	if (!s)
		return -ENOMEM;
	/* the plugin's ADD/DEL/CHECK of this attachment waits until the record
	 * is written again (and we for them): no interleaving on its
	 * interfaces; other attachments never wait. Busy: retried later. */
	str_copy(lock.cid, sizeof(lock.cid), at->container_id);
	str_copy(lock.ifname, sizeof(lock.ifname), at->ifname);
	lock.fd = state_lock_attachment(ag->state_dir, lock.cid, lock.ifname, AGENT_LOCK_TIMEOUT_MS, &e);
	if (lock.fd < 0) {
		r = lock.fd;
		out->failed = true;
		snprintf(out->failure, sizeof(out->failure), "%s", e.msg);
		return r;
	}
	r = state_load(ag->state_dir, at->container_id, at->ifname, s, &choices, &e);
	if (r == -ENOENT) {
		out->stale = true; /* DEL ran meanwhile */
		return 0;
	}
	if (r == 0 && attach_recover_action(s) == ATTACH_RECOVER_TEARDOWN) {
		/* an ADD or a teardown died (the lock is ours): undo or finish it */
		struct attach_teardown_res td;

		attach_teardown(ag->state_dir, &ag->profiles, s, choices, s->netns, &td);
		cJSON_Delete(choices);
		out->stale = true;
		return 0;
	}
	if (r < 0) {
		out->failed = true;
		snprintf(out->failure, sizeof(out->failure), "%s", e.msg);
		return r;
	}
	r = attach_plan_restore(&ag->profiles, s, choices, NULL, &e);
	cJSON_Delete(choices);
	if (r < 0) {
		/* what is in the kernel is unknown: plan anew, replace what we can */
		log_msg(LOG_LVL_WARN, "attachment record without a usable plan", "container", s->container_id, "error",
		        e.msg, (char *)NULL);
		plan_free(&s->plan);
	}

	attach_init(&a);
	error_clear(&e);
	if (attach_open_host(&a, s, &e) < 0)
		log_msg(LOG_LVL_WARN, "host veth not reachable", "container", s->container_id, "error", e.msg,
		        (char *)NULL);
	error_clear(&e);
	r = attach_open_pod(&a, s->netns, s, &e);
	if (r <= 0) {
		attach_close(&a);
		if (r == 0 && netns_unreachable(p, s->netns, out))
			return -ENOENT;
		if (r == 0) {
			out->stale = true; /* the pod's netns or interface is gone: DEL will come */
			return 0;
		}
		out->failed = true;
		snprintf(out->failure, sizeof(out->failure), "%s", e.msg);
		return r;
	}

	memset(&w, 0, sizeof(w));
	w.class = p->want.class;
	str_copy(w.profile, sizeof(w.profile), p->want.profile_requested);
	w.egress_bps = p->want.egress_bps;
	w.ingress_bps = p->want.ingress_bps;
	prof = profile_resolve(&ag->profiles, &w, pwarn, sizeof(pwarn));
	ifs = s->ifs;
	ifs.mtu = a.pod.mtu ? a.pod.mtu : s->ifs.mtu;
	if (!a.host.ifindex)
		ifs.host_ifname[0] = '\0'; /* no host side now: nothing planned there */

	r = plan_pod(&w, prof, &ifs, &ag->pod_caps, np);
	if (r < 0) {
		error_set(&fail, -r, "plan for %s: %s", s->ifname, strerror(-r));
		str_copy(s->failure, sizeof(s->failure), fail.msg);
	} else {
		/* intent, apply (and what the old plan had, or a crashed
		 * re-tune left, removed), commit: attach.h's protocol; nothing
		 * is changed while the intent cannot be recorded */
		const struct attach_tune_req req = {
		        .op = ATTACH_OP_RETUNE,
		        .workload = &w,
		        .profile = prof,
		        .ifs = &ifs,
		        .plan = np,
		        .intent_required = true,
		        .failpoint_after = "agent-retune-applied",
		        .failpoint = failpoint,
		};
		struct attach_tune_res res;

		str_copy(s->annotations_source, sizeof(s->annotations_source), "agent");
		r = attach_tune(ag->state_dir, s, &a, &ag->pod_caps, &req, &res);
		if (res.leftover_err.msg[0])
			log_msg(LOG_LVL_WARN, "leftovers of the previous tuning not removed", "container",
			        s->container_id, "error", res.leftover_err.msg, (char *)NULL);
		if (!res.intent_saved) {
			log_msg(LOG_LVL_ERROR, "cannot record the re-tune's intent; nothing changed", "container",
			        s->container_id, "error", res.intent_err.msg, (char *)NULL);
			str_copy(s->failure, sizeof(s->failure), res.intent_err.msg);
		} else if (!res.committed) {
			log_msg(LOG_LVL_ERROR, "cannot rewrite the attachment record", "container", s->container_id,
			        "error", res.commit_err.msg, (char *)NULL);
			if (!res.apply_err.msg[0])
				str_copy(s->failure, sizeof(s->failure), res.commit_err.msg);
		}
		if (r < 0 && !s->failure[0])
			str_copy(s->failure, sizeof(s->failure), strerror(-r));
	}
	attach_close(&a);
	agent_attach_from_state(s, &updated);
	*at = updated;
	out_summary(&s->plan, out);
	if (r < 0) {
		out->failed = true;
		snprintf(out->failure, sizeof(out->failure), "%s", s->failure);
	}
	return r;
}

static void pod_retry_schedule(struct agent *ag, struct agent_pod *p, int64_t now_ms)
{
	unsigned jitter = (unsigned)(((uint64_t)now_ms * 2654435761u) % 1000);

	p->retries++;
	p->retry_at_ms = now_ms + sched_backoff_ms(p->retries, jitter);
}

/* Re-tune what differs of one pod, post its Events. */
static void pod_reconcile(struct agent *ag, struct agent_pod *p, int64_t now_ms)
{
	char eff[1024] = "", deg[1024] = "", failure[AGENT_FAILURE_MAX + IFNAME_LEN + 4] = "";
	bool any_retuned = false, any_failed = false, any_degraded = false, described = false, any_unreachable = false;
	int64_t t0 = agent_now_ms();

	if (p->in_api && p->want.invalid[0] && !streq(p->want.invalid, p->invalid_warned)) {
		agent_pod_event(ag, p, true, "InvalidWorkload", "%s", p->want.invalid);
		str_copy(p->invalid_warned, sizeof(p->invalid_warned), p->want.invalid);
	}
	for (unsigned k = 0; k < p->n_att; k++) {
		struct agent_attach *at = &p->att[k];
		struct retune_out out;

		if (pod_attach_needs_retune(p, at)) {
			attach_retune(ag, p, at, &out);
			if (out.stale)
				continue;
			any_retuned = true;
		} else if (p->announce) {
			if (attach_describe(ag, at, &out) < 0 && !out.failed)
				continue;
			described = true;
		} else {
			continue;
		}
		any_failed |= out.failed;
		any_degraded |= out.degraded;
		any_unreachable |= out.netns_unreachable;
		if (out.failed && !failure[0])
			snprintf(failure, sizeof(failure), "%s: %s", at->ifname, out.failure);
		if (out.effective[0])
			snprintf(eff + strlen(eff), sizeof(eff) - strlen(eff), "%s%s: %s", eff[0] ? "; " : "",
			         at->ifname, out.effective);
		if (out.degraded_txt[0])
			snprintf(deg + strlen(deg), sizeof(deg) - strlen(deg), "%s%s: %s", deg[0] ? "; " : "",
			         at->ifname, out.degraded_txt);
	}
	p->dirty = false;
	p->announce = false;
	if (any_retuned)
		agent_count_retune(ag, RETUNE_POD,
		                   any_failed     ? RESULT_FAILED
		                   : any_degraded ? RESULT_DEGRADED
		                                  : RESULT_OK,
		                   seconds_since(t0));
	if (any_retuned)
		p->netns_unreachable = any_unreachable;
	if (any_failed) {
		pod_retry_schedule(ag, p, now_ms);
		str_copy(p->failure, sizeof(p->failure), failure);
		agent_pod_event(ag, p, true, any_unreachable ? "NetnsUnreachable" : "TuneFailed",
		                "class %s, profile %s: %s (retry %u in %llds)",
		                workload_class_name(p->want.class) ?: "?", p->want.profile, failure, p->retries,
		                (long long)((p->retry_at_ms - now_ms + 999) / 1000));
	} else {
		p->retries = 0;
		p->retry_at_ms = -1;
		p->failure[0] = '\0';
		if (any_retuned || described) {
			enum workload_class c = p->in_api ? p->want.class : pod_node_class(p);
			const char *prof = p->in_api ? p->want.profile : p->att[0].profile;

			agent_pod_event(ag, p, false, "Tuned", "class %s, profile %s%s%s",
			                workload_class_name(c) ?: "?", prof, eff[0] ? ", effective: " : "", eff);
			if (any_degraded)
				agent_pod_event(ag, p, true, "TuneDegraded", "fell back: %s", deg);
		}
	}
	pod_status_refresh(p);
}

void pods_reconcile(struct agent *ag, int64_t now_ms, bool retry_due)
{
	for (unsigned i = 0; i < ag->pods.n; i++) {
		struct agent_pod *p = ag->pods.v[i];

		/* a failed record is tried again even if nothing else changed */
		if (retry_due && p->retry_at_ms >= 0 && p->retry_at_ms <= now_ms)
			p->dirty = true;
		if (p->dirty || p->announce)
			pod_reconcile(ag, p, now_ms);
	}
}

/* ---- drift repair of the pods ---- */

/* Does the kernel differ from the attachment's record? */
static int attach_drifted(struct agent *ag, const struct agent_attach *at)
{
	_cleanup_attach_state_ struct attach_state *s = calloc(1, sizeof(*s));
	_cleanup_free_ struct observed *obs = calloc(1, sizeof(*obs));
	cJSON *choices = NULL;
	struct attach a;
	struct error e = {0};
	char diff[1024];
	int r, n = 0;

	if (!s || !obs)
		return -ENOMEM;
	r = state_load(ag->state_dir, at->container_id, at->ifname, s, &choices, NULL);
	if (r < 0)
		return r;
	r = attach_plan_restore(&ag->profiles, s, choices, NULL, &e);
	cJSON_Delete(choices);
	if (r < 0) {
		/* what the kernel should hold is unknown: never skip it silently,
		 * re-tune it (attach_retune plans anew and replaces what it can) */
		log_msg(LOG_LVL_WARN, "pod drift: the record's plan cannot be rebuilt; re-tuning", "container",
		        s->container_id, "pod", LOG_FMT("%s/%s", s->pod_namespace, s->pod_name), "error", e.msg,
		        (char *)NULL);
		return 1;
	}
	attach_init(&a);
	attach_open_host(&a, s, NULL);
	if (attach_open_pod(&a, s->netns, s, NULL) == 1 &&
	    (a.host.ifindex || !s->ifs.host_ifname[0] || s->workload.ingress_bps == 0)) {
		if (observe_plan(&s->plan, &a.target, obs, NULL) == 0)
			n = plan_diff(&s->plan, &s->ifs, obs, diff, sizeof(diff));
		if (n > 0)
			log_msg(LOG_LVL_INFO, "pod drift", "container", s->container_id, "pod",
			        LOG_FMT("%s/%s", s->pod_namespace, s->pod_name), "diff", diff, (char *)NULL);
	}
	attach_close(&a);
	return n;
}

void agent_repair_pods(struct agent *ag)
{
	int64_t now_ms = agent_now_ms();

	for (unsigned i = 0; i < ag->pods.n; i++) {
		struct agent_pod *p = ag->pods.v[i];

		if (!p->in_api || p->dirty || p->retry_at_ms >= 0)
			continue;
		for (unsigned k = 0; k < p->n_att; k++) {
			struct agent_attach *at = &p->att[k];
			struct retune_out out;

			if (attach_drifted(ag, at) <= 0)
				continue;
			ag->ctr.drift_repairs++;
			attach_retune(ag, p, at, &out);
			if (out.failed) {
				pod_retry_schedule(ag, p, now_ms);
				str_copy(p->failure, sizeof(p->failure), out.failure);
				agent_pod_event(ag, p, true, "TuneFailed", "drift repair of %s: %s", at->ifname,
				                out.failure);
			}
		}
		pod_status_refresh(p);
	}
}
