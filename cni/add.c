/* add.c — ADD: resolve the pod's workload (runtime annotations, else the
 * agent, else class default), plan with the one planner, apply, record the
 * attachment, and pass prevResult through. Tuning failures follow
 * failurePolicy: open logs and records them, closed undoes and fails. */
#include <time.h>

#include "caps.h"
#include "cni.h"

/* Annotations: runtimeConfig (no network call), else the agent's cache,
 * else none. Bad values never fail the pod: they become warnings. */
static void workload_resolve(struct cni_ctx *ctx, struct workload *w, char *source, size_t size)
{
	const struct cni_conf *c = &ctx->conf;
	struct error e = {0};

	workload_from_annotations(NULL, w, NULL);
	if (c->runtime_annotations) {
		if (workload_from_annotations(c->runtime_annotations, w, &e) < 0) {
			workload_from_annotations(NULL, w, NULL);
			workload_add_warning(w, "runtime annotations ignored: %s", e.msg);
		}
		snprintf(source, size, "runtime");
	} else {
		_cleanup_cjson_ cJSON *ann = NULL;
		int r = cni_agent_pod_annotations(c, &ctx->args, &ann, &e);

		snprintf(source, size, "none");
		ctx->agent_failed = r < 0;
		if (r < 0)
			log_msg(LOG_LVL_INFO, "no annotations from the agent; class default until it re-tunes", "agent",
			        c->agent_socket, "error", e.msg, (char *)NULL);
		else if (r > 0 && workload_from_annotations(ann, w, &e) == 0)
			snprintf(source, size, "agent");
	}
	if (c->runtime_bandwidth) {
		error_clear(&e);
		if (workload_apply_runtime_bandwidth(c->runtime_bandwidth, w, &e) < 0)
			workload_add_warning(w, "runtimeConfig.bandwidth ignored: %s", e.msg);
	}
}

static void state_identity_fill(struct attach_state *s, const struct cni_ctx *ctx)
{
	const struct cni_conf *c = &ctx->conf;

	str_copy(s->container_id, sizeof(s->container_id), ctx->env->container_id);
	str_copy(s->ifname, sizeof(s->ifname), ctx->env->ifname);
	str_copy(s->netns, sizeof(s->netns), ctx->env->netns);
	str_copy(s->pod_namespace, sizeof(s->pod_namespace), ctx->args.pod_namespace);
	str_copy(s->pod_name, sizeof(s->pod_name), ctx->args.pod_name);
	str_copy(s->pod_uid, sizeof(s->pod_uid), ctx->args.pod_uid);
	str_copy(s->network, sizeof(s->network), c->name);
	s->n_ips = 0;
	for (unsigned i = 0; i < c->prev.n_ips && s->n_ips < ARRAY_SIZE(s->ips); i++)
		str_copy(s->ips[s->n_ips++], sizeof(s->ips[0]), c->prev.ips[i].address);
	s->pod_ifindex = 0;
	s->host_ifindex = 0;
}

static void log_add(const struct cni_ctx *ctx, const struct attach_state *s, const char *outcome)
{
	char pod[512], eff[1024], deg[1024], dur[32], phases[256];
	enum log_level level = LOG_LVL_INFO;

	attach_plan_summary(&s->plan, eff, sizeof(eff), deg, sizeof(deg));
	if (s->failure[0])
		level = LOG_LVL_ERROR;
	else if (deg[0])
		level = LOG_LVL_WARN;
	snprintf(dur, sizeof(dur), "%llu", (unsigned long long)((cni_now_ns() - ctx->start_ns) / 1000));
	log_msg(level, outcome, "command", "ADD", "container", s->container_id, "ifname", s->ifname, "pod",
	        cni_pod_display(&ctx->args, pod, sizeof(pod)), "class", workload_class_name(s->workload.class) ?: "?",
	        "profile", s->profile, "source", s->annotations_source, "host", s->ifs.host_ifname, "effective", eff,
	        "degraded", deg, "failure", s->failure, "policy", cni_failure_policy_name(ctx->conf.failure_policy),
	        "duration_us", dur, "phases_us", cni_phases_format(ctx, phases, sizeof(phases)), (char *)NULL);
}

int cni_cmd_add(struct cni_ctx *ctx, struct error *err)
{
	struct cni_conf *c = &ctx->conf;
	const struct cni_env *env = ctx->env;
	_cleanup_attach_state_ struct attach_state *s = NULL;
	const struct profile *p;
	struct attach a;
	struct plan_caps known = {0}, caps = {0};
	struct error fail = {0}, e = {0};
	char pwarn[256] = "", pod[512];
	_cleanup_cni_lock_ struct cni_lock lock = {.fd = -1};
	struct attach_tune_res res = {0};
	bool closed = c->failure_policy == CNI_POLICY_CLOSED, tuned = false, recorded;
	int r;

	cni_phase(ctx, "config");
	if (!c->prev_result)
		return cni_error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL, CNI_MSG_NO_PREV_RESULT);
	s = calloc(1, sizeof(*s));
	if (!s)
		return cni_error_set(err, CNI_ERR_IO, ENOMEM, "out of memory");
	state_identity_fill(s, ctx);

	workload_resolve(ctx, &s->workload, s->annotations_source, sizeof(s->annotations_source));
	cni_pod_display(&ctx->args, pod, sizeof(pod));
	for (unsigned i = 0; i < s->workload.n_warn && i < WORKLOAD_WARN_MAX; i++)
		log_msg(LOG_LVL_WARN, "annotation ignored", "container", s->container_id, "pod", pod, "warning",
		        s->workload.warn[i], (char *)NULL);
	p = profile_resolve(&c->profiles, &s->workload, pwarn, sizeof(pwarn));
	if (pwarn[0])
		log_msg(LOG_LVL_WARN, "profile fallback", "container", s->container_id, "pod", pod, "warning", pwarn,
		        (char *)NULL);
	str_copy(s->profile, sizeof(s->profile), p->name);
	s->profile_spec = *p; /* what the plan is built from, kept in the record */
	s->has_profile_spec = true;

	attach_init(&a);
	r = cni_attach_discover(&a, env->netns, env->ifname, &c->prev, &fail);
	if (r >= 0) {
		/* what earlier ADDs on this boot learned the kernel lacks */
		error_clear(&e);
		if (caps_load(c->state_dir, &known, &e) == 0 && e.msg[0])
			log_msg(LOG_LVL_DEBUG, "learning kernel capabilities afresh", "error", e.msg, (char *)NULL);
		caps = known;
		cni_phase(ctx, "discover");
		s->ifs = a.ifs;
		s->pod_ifindex = a.pod.ifindex;
		s->host_ifindex = a.host.ifindex;
		log_msg(LOG_LVL_DEBUG, "interfaces", "container", s->container_id, "pod_if", a.ifs.pod_ifname, "host",
		        a.note, (char *)NULL);
		r = cni_attach_lock(ctx, s->container_id, s->ifname, CNI_LOCK_TIMEOUT_MS, &lock, &e);
		if (r < 0) {
			/* nothing applied, nothing recorded: the runtime retries */
			attach_close(&a);
			log_add(ctx, s, "ADD refused: attachment busy");
			error_propagate(err, &e);
			return r;
		}
		r = plan_pod(&s->workload, p, &s->ifs, &caps, &s->plan);
		if (r < 0) {
			cni_error_set(&fail, CNI_ERR_TUNE_FAILED, -r, "plan for %s: %s", s->ifname, strerror(-r));
		} else {
			/* intent, apply, commit (attach.h); closed: nothing is
			 * touched without the intent on disk, a failure is undone */
			const struct attach_tune_req req = {
			        .op = ATTACH_OP_ADD,
			        .workload = &s->workload,
			        .profile = p,
			        .ifs = &s->ifs,
			        .plan = &s->plan,
			        .intent_required = closed,
			        .undo_on_failure = closed,
			        .failpoint_before = "add-before-apply",
			        .failpoint_after = "add-after-apply",
			        .failpoint = failpoint,
			};
			r = attach_tune(c->state_dir, s, &a, &caps, &req, &res);
			tuned = true;
			if (!res.intent_saved && !closed)
				log_msg(LOG_LVL_ERROR, "cannot save state", "container", s->container_id, "error",
				        res.intent_err.msg, (char *)NULL);
			if (r < 0)
				fail = !res.intent_saved && closed ? res.intent_err
				       : res.apply_err.msg[0]      ? res.apply_err
				                                   : res.commit_err;
			if (res.undo_err.msg[0])
				log_msg(LOG_LVL_WARN, "undo after a failed ADD incomplete", "container",
				        s->container_id, "error", res.undo_err.msg, (char *)NULL);
		}
		cni_phase(ctx, "apply");
	}
	if (r < 0 && fail.code == CNI_ERR_ENV) {
		attach_close(&a);
		str_copy(s->failure, sizeof(s->failure), fail.msg);
		log_add(ctx, s, "ADD refused: broken precondition");
		error_propagate(err, &fail);
		return r;
	}
	if (r < 0 && closed) {
		/* undone by attach_tune, or nothing was changed */
		attach_close(&a);
		if (!fail.msg[0])
			snprintf(fail.msg, sizeof(fail.msg), "%s", strerror(-r));
		str_copy(s->failure, sizeof(s->failure), fail.msg);
		if (tuned && !res.apply_err.msg[0]) {
			/* the record could not be written */
			log_add(ctx, s, "state not saved, ADD refused (failurePolicy closed)");
			error_propagate(err, &fail);
			return cni_error_code(err, CNI_ERR_STATE, fail.errnum ? -fail.errnum : -EIO);
		}
		log_add(ctx, s, "tuning failed, ADD refused (failurePolicy closed)");
		return cni_error_set(err, CNI_ERR_TUNE_FAILED, fail.errnum ? fail.errnum : -r, "%s", fail.msg);
	}
	if (tuned && r < 0 && !res.apply_err.msg[0])
		r = 0; /* open: a record not written is logged below, not a tuning failure */
	/* Always recorded, also after a failure: the agent retries from it.
	 * A record that could not be written (full or read-only stateDir)
	 * goes to the agent with the notification below: it writes it once it
	 * can (fail-open: our bookkeeping never fails the pod). */
	if (!tuned) {
		/* nothing was applied: the record of the failure only */
		if (r < 0)
			str_copy(s->failure, sizeof(s->failure), fail.msg[0] ? fail.msg : strerror(-r));
		s->updated_unix = (int64_t)time(NULL);
		res.committed = state_save(c->state_dir, s, &res.commit_err) == 0;
	}
	recorded = res.committed;
	if (!recorded)
		log_msg(LOG_LVL_ERROR, "cannot save state", "container", s->container_id, "error", res.commit_err.msg,
		        (char *)NULL);
	attach_close(&a);
	/* The stateDir exists now (state_save); what this ADD learned is kept
	 * for the next ones. */
	if (caps_learned_more(&known, &caps)) {
		error_clear(&e);
		if (caps_save(c->state_dir, &caps, &e) < 0)
			log_msg(LOG_LVL_DEBUG, "learned kernel capabilities not saved", "error", e.msg, (char *)NULL);
	}
	cni_lock_release(&lock);
	failpoint("add-after-save");
	cni_phase(ctx, "state");

	/* best effort; not again when the agent just failed to answer (ADD
	 * stays within one timeout) */
	if (!ctx->agent_failed)
		cni_agent_notify(c, PROTO_OP_ATTACHED, s->container_id, s->ifname, &ctx->args, recorded ? NULL : s);
	cni_phase(ctx, "agent");
	log_add(ctx, s, r < 0 ? "tuning failed, pod started anyway (failurePolicy open)" : "tuned");
	return cni_result_print(ctx->out, c->prev_result, c->cni_version, err);
}
