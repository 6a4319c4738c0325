/* check.c — CHECK (spec >= 0.4.0): rebuild the attachment's plan with the
 * same planner from its recorded workload and profile, merge the recorded
 * choices, observe the kernel and diff (plan_diff). Any difference, a
 * workload that no longer matches the runtime's annotations, or interfaces
 * that changed is error 101 with one line per difference in "details". */
#include "cni.h"

/* The workload the runtime's annotations ask for now vs the recorded one. */
static int workload_drift(const struct cni_ctx *ctx, const struct attach_state *s, char *det, size_t size)
{
	const struct cni_conf *c = &ctx->conf;
	const struct workload *old = &s->workload;
	bool cmp_eg = true, cmp_in = true;
	struct workload w;
	int n = 0;

	if (!c->runtime_annotations && !c->runtime_bandwidth)
		return 0;
	if (workload_from_annotations(c->runtime_annotations, &w, NULL) < 0)
		return 0;
	if (c->runtime_bandwidth)
		workload_apply_runtime_bandwidth(c->runtime_bandwidth, &w, NULL);
	if (c->runtime_annotations) {
		if (w.class != old->class) {
			str_append_sep(det, size, '\n', "workload: runtime annotations ask for class %s, state has %s",
			               workload_class_name(w.class) ?: "?", workload_class_name(old->class) ?: "?");
			n++;
		}
		if (!streq(w.profile, old->profile)) {
			str_append_sep(det, size, '\n',
			               "workload: runtime annotations ask for profile \"%s\", state has \"%s\"",
			               w.profile, old->profile);
			n++;
		}
	} else {
		/* bandwidth alone: compare only the limits it sets */
		cmp_eg = cJSON_GetObjectItemCaseSensitive(c->runtime_bandwidth, "egressRate") != NULL;
		cmp_in = cJSON_GetObjectItemCaseSensitive(c->runtime_bandwidth, "ingressRate") != NULL;
	}
	if (cmp_eg && w.egress_bps != old->egress_bps) {
		str_append_sep(det, size, '\n', "workload: egress limit is %llu bit/s, state has %llu bit/s",
		               (unsigned long long)w.egress_bps, (unsigned long long)old->egress_bps);
		n++;
	}
	if (cmp_in && w.ingress_bps != old->ingress_bps) {
		str_append_sep(det, size, '\n', "workload: ingress limit is %llu bit/s, state has %llu bit/s",
		               (unsigned long long)w.ingress_bps, (unsigned long long)old->ingress_bps);
		n++;
	}
	return n;
}

/* Interfaces found now vs recorded at ADD. */
static int iface_drift(const struct attach *a, const struct attach_state *s, char *det, size_t size)
{
	int n = 0;

	if (a->pod.ifindex != s->pod_ifindex) {
		str_append_sep(det, size, '\n', "pod interface %s: ifindex %d, state has %d", s->ifname, a->pod.ifindex,
		               s->pod_ifindex);
		n++;
	}
	if (!streq(a->ifs.host_ifname, s->ifs.host_ifname) || a->host.ifindex != s->host_ifindex) {
		str_append_sep(det, size, '\n', "host veth: \"%s\" (ifindex %d), state has \"%s\" (ifindex %d)",
		               a->ifs.host_ifname, a->host.ifindex, s->ifs.host_ifname, s->host_ifindex);
		n++;
	}
	return n;
}

static void log_check(const struct cni_ctx *ctx, const struct attach_state *s, int n)
{
	char pod[512], eff[1024], deg[1024], dur[32], nb[16];

	attach_plan_summary(&s->plan, eff, sizeof(eff), deg, sizeof(deg));
	snprintf(dur, sizeof(dur), "%llu", (unsigned long long)((cni_now_ns() - ctx->start_ns) / 1000));
	snprintf(nb, sizeof(nb), "%d", n);
	log_msg(n ? LOG_LVL_WARN : LOG_LVL_INFO, n ? "drift" : "checked", "command", "CHECK", "container",
	        s->container_id, "ifname", s->ifname, "pod", cni_pod_display(&ctx->args, pod, sizeof(pod)), "class",
	        workload_class_name(s->workload.class) ?: "?", "profile", s->profile, "effective", eff, "degraded", deg,
	        "differences", nb, "duration_us", dur, (char *)NULL);
}

struct check_buf {
	struct observed obs;
	char diff[CNI_DETAILS_MAX];
};

static int check_run(struct cni_ctx *ctx, struct attach_state *s, const cJSON *choices, struct attach *a,
                     struct error *err)
{
	const struct cni_conf *c = &ctx->conf;
	char *det = ctx->details;
	const size_t size = sizeof(ctx->details);
	_cleanup_free_ struct check_buf *b = NULL;
	bool profile_changed = false;
	struct error e = {0};
	int n = 0, r;

	n += workload_drift(ctx, s, det, size);
	if (s->failure[0]) {
		str_append_sep(det, size, '\n', "tuning failed at ADD: %s", s->failure);
		n++;
	}

	r = cni_attach_discover(a, ctx->env->netns, ctx->env->ifname, &c->prev, &e);
	if (r < 0)
		return cni_error_set(err, CNI_ERR_CHECK_DRIFT, -r, "container %s ifname %s: %s", s->container_id,
		                     s->ifname, e.msg);
	r = attach_plan_restore(&c->profiles, s, choices, &profile_changed, &e);
	if (r < 0) {
		error_propagate(err, &e);
		return cni_error_code(err, CNI_ERR_STATE, r);
	}
	if (profile_changed) {
		str_append_sep(det, size, '\n', "profile \"%s\" recorded at ADD is not in the config any more",
		               s->profile);
		n++;
	}

	if (iface_drift(a, s, det, size) > 0) {
		str_append_sep(det, size, '\n', "tc objects not compared: the interfaces changed");
		n++;
	} else {
		b = calloc(1, sizeof(*b));
		if (!b)
			return cni_error_set(err, CNI_ERR_IO, ENOMEM, "out of memory");
		r = observe_plan(&s->plan, &a->target, &b->obs, &e);
		if (r < 0) {
			error_propagate(err, &e);
			error_prefix(err, "container %s ifname %s", s->container_id, s->ifname);
			return cni_error_code(err, CNI_ERR_TUNE_FAILED, r);
		}
		int nd = plan_diff(&s->plan, &s->ifs, &b->obs, b->diff, sizeof(b->diff));
		if (nd > 0) {
			size_t l = strlen(b->diff);
			if (l && b->diff[l - 1] == '\n')
				b->diff[l - 1] = '\0';
			str_append_sep(det, size, '\n', "%s", b->diff);
			n += nd;
		}
	}

	log_check(ctx, s, n);
	if (n > 0)
		return cni_error_set(err, CNI_ERR_CHECK_DRIFT, EEXIST,
		                     "container %s ifname %s: %d difference%s between aiqos's plan and the kernel",
		                     s->container_id, s->ifname, n, n == 1 ? "" : "s");
	return 0;
}

int cni_cmd_check(struct cni_ctx *ctx, struct error *err)
{
	const struct cni_conf *c = &ctx->conf;
	const struct cni_env *env = ctx->env;
	_cleanup_attach_state_ struct attach_state *s = NULL;
	_cleanup_cjson_ cJSON *choices = NULL;
	_cleanup_cni_lock_ struct cni_lock lock = {.fd = -1};
	struct attach a;
	struct error e = {0};
	int r;

	if (!c->prev_result)
		return cni_error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL, CNI_MSG_NO_PREV_RESULT);
	/* not in the middle of an agent's re-tune */
	r = cni_attach_lock(ctx, env->container_id, env->ifname, CNI_DEL_LOCK_TIMEOUT_MS, &lock, err);
	if (r < 0)
		return r;
	s = calloc(1, sizeof(*s));
	if (!s)
		return cni_error_set(err, CNI_ERR_IO, ENOMEM, "out of memory");
	r = state_load(c->state_dir, env->container_id, env->ifname, s, &choices, &e);
	if (r == -ENOENT) {
		cni_lock_release(&lock);
		return cni_error_set(err, CNI_ERR_STATE, ENOENT, "no aiqos state for container %s ifname %s",
		                     env->container_id, env->ifname);
	}
	if (r < 0) {
		error_propagate(err, &e);
		return cni_error_code(err, CNI_ERR_STATE, r);
	}
	if (s->pending)
		return cni_error_set(err, CNI_ERR_STATE, EINPROGRESS, "container %s ifname %s: %s", env->container_id,
		                     env->ifname, s->failure);
	attach_init(&a);
	r = check_run(ctx, s, choices, &a, err);
	attach_close(&a);
	cni_lock_release(&lock);
	return r;
}
