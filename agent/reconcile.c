/* reconcile.c — the agent's re-tuning: per pod, an attachment whose pod now
 * asks for another class/profile/limits is re-planned with the one planner,
 * applied, what the old plan had and the new one lacks is removed (sysctls
 * put back, qdiscs deleted), and its record rewritten so the plugin's
 * CHECK/DEL see the truth; per node, the mode is decided (with the mixed
 * hold), the uplink plan built against the plan in force and only the delta
 * applied (one pod -> its filters). The kernel is read at start (adoption)
 * and by drift repair. Problems are logged, counted, surfaced as Events and
 * retried with backoff; nothing here exits. */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdarg.h>
#include <time.h>

#include "agent.h"
#include "bpf_cls.h"
#include "attach.h"
#include "failpoint.h"
#include "nl.h"

#define ID_UPLINK_ROOT "uplink.root"

int64_t agent_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t agent_now_unix(void)
{
	return (int64_t)time(NULL);
}

void agent_count_retune(struct agent *ag, int scope, int result, double seconds)
{
	ag->ctr.retunes[scope][result]++;
	metrics_histogram_observe(&ag->ctr.retune_seconds[scope], &metrics_buckets_retune, seconds);
}

void agent_event(struct agent *ag, const struct agent_pod *p, bool warning, const char *reason, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_msg(warning ? LOG_LVL_WARN : LOG_LVL_INFO, "event", "reason", reason, "pod", p->namespace_, "name", p->name,
	        "message", msg, (char *)NULL);
	if (!p->in_api || !p->uid[0] || !ag->event_hook)
		return; /* an Event needs the pod object */
	ag->event_hook(ag, p, warning, reason, msg);
	ag->ctr.events_posted++;
}

static double seconds_since(int64_t t0_ms)
{
	return (double)(agent_now_ms() - t0_ms) / 1000.0;
}

/* ---- attachments: loading records ---- */

int agent_attach_load(struct agent *ag, const char *container_id, const char *ifname, struct error *err)
{
	_cleanup_free_ struct attach_state *s = calloc(1, sizeof(*s));
	struct agent_attach at;
	struct agent_pod *p;
	cJSON *choices = NULL;
	bool is_new = false, found;
	int r;

	if (!s)
		return error_set(err, 0, ENOMEM, "out of memory");
	r = state_load(ag->state_dir, container_id, ifname, s, &choices, err);
	if (r == -ENOENT) {
		error_clear(err);
		pod_cache_attach_remove(&ag->pods, container_id, ifname, &found);
		return 0;
	}
	if (r < 0)
		return r;
	if (s->pending) {
		cJSON_Delete(choices);
		return 0; /* its ADD is running, or died and DEL will come */
	}
	agent_attach_from_state(s, &at);
	at.marks = agent_choices_mark(choices);
	/* not re-planned here: what fell back is in the record's choices
	 * (without this such a pod was shown "tuned") */
	at.degraded = at.degraded || agent_choices_degraded(choices);
	cJSON_Delete(choices);
	p = pod_cache_attach_upsert(&ag->pods, &at, &is_new);
	if (!p)
		return error_set(err, 0, ENOMEM, "out of memory");
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

	ag->ctr.state_rescans++;
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

static bool items_same_dev_object(const struct plan_item *a, const struct tc_spec *sa, const struct plan_item *b,
                                  const struct tc_spec *sb)
{
	return a->dev == b->dev && tc_spec_same_object(sa, sb);
}

/* What the old plan put in the kernel and the new one does not hold:
 * sysctls back to their value before aiqos, tc objects deleted (parents
 * first; children of a deleted qdisc are gone already). */
static int remove_leftovers(const struct plan *old, const struct plan *new_, const struct apply_target *t,
                            struct error *err)
{
	int first = 0;

	for (unsigned i = 0; i < old->n && i < PLAN_ITEMS_MAX; i++) {
		const struct plan_item *o = &old->items[i];
		bool held = false;
		struct error e = {0};
		int r;

		if (o->type == ITEM_SYSCTL) {
			if (!plan_item_effective_val(o))
				continue;
			for (unsigned k = 0; k < new_->n && !held; k++)
				held = new_->items[k].type == ITEM_SYSCTL && streq(new_->items[k].key, o->key) &&
				       plan_item_effective_val(&new_->items[k]);
		} else {
			const struct tc_spec *so = plan_item_effective_tc(o);

			if (!so)
				continue;
			for (unsigned k = 0; k < new_->n && !held; k++) {
				const struct tc_spec *sn = plan_item_effective_tc(&new_->items[k]);
				held = sn && items_same_dev_object(o, so, &new_->items[k], sn);
			}
		}
		if (held)
			continue;
		r = apply_remove_item(o, t, &e);
		if (r < 0 && !first) {
			first = r;
			if (err)
				*err = e;
		}
	}
	return first;
}

/* The value before aiqos of a sysctl both plans set stays the one the old
 * plan recorded (the applier just read aiqos's own value). */
static void carry_prev(const struct plan *old, struct plan *new_)
{
	for (unsigned k = 0; k < new_->n && k < PLAN_ITEMS_MAX; k++) {
		struct plan_item *n = &new_->items[k];

		if (n->type != ITEM_SYSCTL)
			continue;
		for (unsigned i = 0; i < old->n && i < PLAN_ITEMS_MAX; i++) {
			const struct plan_item *o = &old->items[i];

			if (o->type == ITEM_SYSCTL && streq(o->key, n->key) && plan_item_effective_val(o) &&
			    o->prev[0]) {
				str_copy(n->prev, sizeof(n->prev), o->prev);
				break;
			}
		}
	}
}

static void out_summary(const struct plan *p, struct retune_out *out)
{
	attach_plan_summary(p, out->effective, sizeof(out->effective), out->degraded_txt, sizeof(out->degraded_txt));
	out->degraded = out->degraded_txt[0] != '\0';
}

/* Describe an attachment from its record (the plugin's ADD). */
static int attach_describe(struct agent *ag, struct agent_attach *at, struct retune_out *out)
{
	_cleanup_free_ struct attach_state *s = calloc(1, sizeof(*s));
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
	r = attach_plan_restore(&ag->cfg.profiles, s, choices, NULL, &e);
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
	_cleanup_free_ struct attach_state *s = calloc(1, sizeof(*s));
	_cleanup_free_ struct plan *np = calloc(1, sizeof(*np));
	const struct profile *prof;
	struct agent_attach updated;
	struct attach a;
	struct workload w;
	struct attach_ifaces ifs;
	cJSON *choices = NULL;
	struct error e = {0}, fail = {0};
	char pwarn[256] = "";
	_cleanup_(retune_lock_release) struct retune_lock lock = {.fd = -1, .dir = ag->state_dir};
	int r, applied;

	memset(out, 0, sizeof(*out));
	if (!s || !np)
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
	if (r == -ENOENT || (r == 0 && s->pending)) {
		cJSON_Delete(choices);
		out->stale = true; /* DEL ran meanwhile, or an ADD died (DEL will come) */
		return 0;
	}
	if (r < 0) {
		out->failed = true;
		snprintf(out->failure, sizeof(out->failure), "%s", e.msg);
		return r;
	}
	r = attach_plan_restore(&ag->cfg.profiles, s, choices, NULL, &e);
	cJSON_Delete(choices);
	if (r < 0) {
		/* what is in the kernel is unknown: plan anew, replace what we can */
		log_msg(LOG_LVL_WARN, "attachment record without a usable plan", "container", s->container_id, "error",
		        e.msg, (char *)NULL);
		memset(&s->plan, 0, sizeof(s->plan));
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
	prof = profile_resolve(&ag->cfg.profiles, &w, pwarn, sizeof(pwarn));
	ifs = s->ifs;
	ifs.mtu = a.pod.mtu ? a.pod.mtu : s->ifs.mtu;
	if (!a.host.ifindex)
		ifs.host_ifname[0] = '\0'; /* no host side now: nothing planned there */

	r = plan_pod(&w, prof, &ifs, &ag->pod_caps, np);
	if (r < 0) {
		error_set(&fail, CNI_ERR_TUNE_FAILED, -r, "plan for %s: %s", s->ifname, strerror(-r));
	} else {
		applied = apply_plan(np, &a.target, &ag->pod_caps, &fail);
		carry_prev(&s->plan, np);
		if (applied < 0) {
			r = applied;
		} else {
			error_clear(&e);
			if (remove_leftovers(&s->plan, np, &a.target, &e) < 0)
				log_msg(LOG_LVL_WARN, "leftovers of the previous tuning not removed", "container",
				        s->container_id, "error", e.msg, (char *)NULL);
		}
	}
	attach_close(&a);
	failpoint("agent-retune-applied");

	s->workload = w;
	str_copy(s->profile, sizeof(s->profile), prof->name);
	s->ifs.mtu = ifs.mtu;
	if (r >= 0 || np->n) {
		s->plan = *np; /* on failure: what got applied before it */
		s->profile_spec = *prof;
		s->has_profile_spec = true;
	}
	str_copy(s->annotations_source, sizeof(s->annotations_source), "agent");
	if (r < 0)
		str_copy(s->failure, sizeof(s->failure), fail.msg[0] ? fail.msg : strerror(-r));
	else
		s->failure[0] = '\0';
	s->updated_unix = agent_now_unix();
	error_clear(&e);
	if (state_save(ag->state_dir, s, &e) < 0) {
		log_msg(LOG_LVL_ERROR, "cannot rewrite the attachment record", "container", s->container_id, "error",
		        e.msg, (char *)NULL);
		if (r >= 0) {
			r = -EIO;
			str_copy(s->failure, sizeof(s->failure), e.msg);
		}
	}
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
		agent_event(ag, p, true, "InvalidWorkload", "%s", p->want.invalid);
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
		agent_event(ag, p, true, any_unreachable ? "NetnsUnreachable" : "TuneFailed",
		            "class %s, profile %s: %s (retry %u in %llds)", workload_class_name(p->want.class) ?: "?",
		            p->want.profile, failure, p->retries, (long long)((p->retry_at_ms - now_ms + 999) / 1000));
	} else {
		p->retries = 0;
		p->retry_at_ms = -1;
		p->failure[0] = '\0';
		if (any_retuned || described) {
			enum workload_class c = p->in_api ? p->want.class : pod_node_class(p);
			const char *prof = p->in_api ? p->want.profile : p->att[0].profile;

			agent_event(ag, p, false, "Tuned", "class %s, profile %s%s%s", workload_class_name(c) ?: "?",
			            prof, eff[0] ? ", effective: " : "", eff);
			if (any_degraded)
				agent_event(ag, p, true, "TuneDegraded", "fell back: %s", deg);
		}
	}
	pod_status_refresh(p);
}

static void pods_reconcile(struct agent *ag, int64_t now_ms, bool retry_due)
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

static void retry_rearm(struct agent *ag)
{
	int64_t next = ag->up_retry_at_ms, rec = agent_records_next_ms(&ag->records);

	if (rec >= 0 && (next < 0 || rec < next))
		next = rec;
	for (unsigned i = 0; i < ag->pods.n; i++) {
		int64_t t = ag->pods.v[i]->retry_at_ms;
		if (t >= 0 && (next < 0 || t < next))
			next = t;
	}
	sched_set_retry(&ag->sched, next);
}

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
	const struct plan_item *it = node_plan_find_const(&ag->in_force, ID_UPLINK_ROOT);
	return it ? plan_item_effective_tc(it) : NULL;
}

/* Put the recorded original root back and forget the record. */
static int uplink_give_back(struct agent *ag, struct error *err)
{
	char path[AGENT_PATH_MAX];
	int r;

	record_path(ag, path, sizeof(path));
	if (!ag->up.have_record) {
		node_plan_free(&ag->in_force);
		return 0;
	}
	r = uplink_restore(ag->sk, ag->up.ifindex, &ag->up.record, in_force_root(ag), err);
	if (r == -ENODEV)
		r = 0; /* the device is gone, and everything on it */
	if (r < 0)
		return r;
	log_msg(LOG_LVL_INFO, "uplink restored", "uplink", ag->up.ifname, "qdisc", ag->up.record.rendered,
	        (char *)NULL);
	node_plan_free(&ag->in_force);
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
			node_plan_free(&ag->in_force);
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
	node_plan_free(&ag->in_force);
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
			agent_event(ag, p, true, reason, "%s", msg);
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
static int classifier_prepare(struct agent *ag, struct node_plan *np, const unsigned *idx, unsigned n_idx,
                              int *ret_prog_fd, struct error *err)
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
static void in_force_prune(struct node_plan *p)
{
	unsigned k = 0;

	for (unsigned i = 0; i < p->n; i++)
		if (p->items[i].status != ITEM_PENDING)
			p->items[k++] = p->items[i];
	p->n = k;
}

static int plan_copy(const struct node_plan *src, struct node_plan *dst)
{
	struct plan_item *items = calloc(src->n ? src->n : 1, sizeof(*items));

	if (!items)
		return -ENOMEM;
	if (src->n)
		memcpy(items, src->items, src->n * sizeof(*items));
	node_plan_free(dst);
	dst->items = items;
	dst->n = src->n;
	dst->cap = src->n ? src->n : 1;
	return 0;
}

/* Read the uplink: which planned items are already there (in force), and
 * delete our duplicates and orphans. Returns the number of objects deleted
 * or a negative errno. */
static int uplink_observe(struct agent *ag, struct node_plan *plan, const struct tc_dump_list *dump, struct error *err)
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

static void node_reconcile(struct agent *ag, int64_t now_ms, bool observe)
{
	_cleanup_free_ struct node_pod *pods = NULL;
	_cleanup_node_plan_ struct node_plan np = {0};
	_cleanup_node_plan_ struct node_plan prev = {0};
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
			node_plan_free(&ag->in_force);
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
			int q = apply_items_absent(np.items, np.n, &idx[k], &absent[k], 1, &t, &ag->up_caps, NULL, NULL,
			                           &ek);
			if (q < 0 && r == 0) {
				r = q;
				e = ek;
			}
			usleep(ag->test_slow_apply_us);
		}
	} else {
		r = n_idx ? apply_items_absent(np.items, np.n, idx, absent, n_idx, &t, &ag->up_caps, NULL, NULL, &e)
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
	node_plan_free(&ag->in_force);
	ag->in_force = np;
	np = (struct node_plan){0};
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

void agent_init(struct agent *ag)
{
	memset(ag, 0, sizeof(*ag));
	agent_config_defaults(&ag->cfg);
	pod_cache_init(&ag->pods);
	ag->mode = NODE_MODE_STATE_INIT;
	ag->mode_since_unix = agent_now_unix();
	ag->up_retry_at_ms = -1;
	ag->up_cls_map_fd = -1;
	sched_init(&ag->sched, ag->cfg.node.debounce_ms, ag->cfg.drift_repair_s, agent_now_ms());
}

void agent_done(struct agent *ag)
{
	agent_records_free(&ag->records);
	pod_cache_done(&ag->pods);
	node_plan_free(&ag->in_force);
	if (ag->up_cls_map_fd >= 0)
		close(ag->up_cls_map_fd);
	ag->up_cls_map_fd = -1;
	agent_config_done(&ag->cfg);
	if (ag->sk)
		nl_close(ag->sk);
	ag->sk = NULL;
}

static void record_written(void *ud, const char *cid, const char *ifname)
{
	struct agent *ag = ud;
	struct error e = {0};

	log_msg(LOG_LVL_INFO, "attachment record written for the plugin", "container", cid, "ifname", ifname,
	        (char *)NULL);
	if (agent_attach_load(ag, cid, ifname, &e) < 0)
		log_msg(LOG_LVL_WARN, "attachment record unreadable", "container", cid, "ifname", ifname, "error",
		        e.msg, (char *)NULL);
}

void agent_pass(struct agent *ag, int64_t now_ms, unsigned due)
{
	bool up_retry = (due & SCHED_RETRY) && ag->up_retry_at_ms >= 0 && ag->up_retry_at_ms <= now_ms;

	/* records the plugin could not write: once on disk, like any other */
	agent_records_flush(&ag->records, ag->state_dir, now_ms, record_written, ag);
	if (due & (SCHED_PASS | SCHED_RETRY))
		pods_reconcile(ag, now_ms, due & SCHED_RETRY);
	if (due & SCHED_DRIFT)
		agent_repair_pods(ag);
	if ((due & (SCHED_PASS | SCHED_HOLD | SCHED_DRIFT)) || up_retry) {
		if (up_retry)
			ag->up_retry_at_ms = -1;
		node_reconcile(ag, now_ms, due & SCHED_DRIFT);
	}
	pod_cache_gc(&ag->pods);
	retry_rearm(ag);
}

/* ---- drift repair of the pods ---- */

/* Does the kernel differ from the attachment's record? */
static int attach_drifted(struct agent *ag, const struct agent_attach *at)
{
	_cleanup_free_ struct attach_state *s = calloc(1, sizeof(*s));
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
	r = attach_plan_restore(&ag->cfg.profiles, s, choices, NULL, &e);
	cJSON_Delete(choices);
	if (r < 0) {
		/* what the kernel should hold is unknown: never skip it silently,
		 * re-tune it (attach_retune plans anew and replaces what it can) */
		log_msg(LOG_LVL_WARN, "pod drift: the record's plan cannot be rebuilt; re-tuning", "container",
		        s->container_id, "pod", s->pod_name, "error", e.msg, (char *)NULL);
		return 1;
	}
	attach_init(&a);
	attach_open_host(&a, s, NULL);
	if (attach_open_pod(&a, s->netns, s, NULL) == 1 &&
	    (a.host.ifindex || !s->ifs.host_ifname[0] || s->workload.ingress_bps == 0)) {
		if (observe_plan(&s->plan, &a.target, obs, NULL) == 0)
			n = plan_diff(&s->plan, &s->ifs, obs, diff, sizeof(diff));
		if (n > 0)
			log_msg(LOG_LVL_INFO, "pod drift", "container", s->container_id, "pod", s->pod_name, "diff",
			        diff, (char *)NULL);
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
				agent_event(ag, p, true, "TuneFailed", "drift repair of %s: %s", at->ifname,
				            out.failure);
			}
		}
		pod_status_refresh(p);
	}
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
