/* del.c — DEL: idempotent teardown. Removes what ADD put on the host veth
 * (if it still exists with the recorded ifindex) and on the pod interface
 * (if the netns is still there), the state file, and tells the agent.
 * Anything already gone is success, and so is a state file that cannot be
 * removed (read-only or broken disk: logged, left to GC or the next DEL).
 * The steps are attach_teardown()'s (the crash protocol of attach.h): an
 * intent record of a killed ADD or re-tune also removes every alternative of
 * its target by our handles; temp files of killed writers of this attachment
 * go too. All under the attachment's lock (busy: code 11). */
#include "cni.h"

static void log_del(const struct cni_ctx *ctx, const struct attach_state *s, const char *outcome, const char *detail)
{
	char pod[512], dur[32], phases[256];

	snprintf(dur, sizeof(dur), "%llu", (unsigned long long)((cni_now_ns() - ctx->start_ns) / 1000));
	log_msg(LOG_LVL_INFO, outcome, "command", "DEL", "container", ctx->env->container_id, "ifname",
	        ctx->env->ifname, "pod", cni_pod_display(&ctx->args, pod, sizeof(pod)), "class",
	        s ? workload_class_name(s->workload.class) ?: "?" : "", "profile", s ? s->profile : "", "host",
	        s ? s->ifs.host_ifname : "", "removed", detail, "duration_us", dur, "phases_us",
	        cni_phases_format(ctx, phases, sizeof(phases)), (char *)NULL);
}

/* Tear a recorded attachment down (attach_teardown: intent, kernel, record
 * removed once the kernel is clean), logging what could not be done. */
static void del_teardown(struct cni_ctx *ctx, struct attach_state *s, const cJSON *choices, char *done, size_t size)
{
	struct attach_teardown_res td;
	int r;

	r = attach_teardown(ctx->conf.state_dir, &ctx->conf.profiles, s, choices, ctx->env->netns, &td);
	cni_phase(ctx, "remove");
	if (td.plan_err.msg[0])
		log_msg(LOG_LVL_WARN, "cannot rebuild the plan; tc objects left to the kernel", "container",
		        s->container_id, "error", td.plan_err.msg, (char *)NULL);
	if (td.intent_err.msg[0])
		log_msg(LOG_LVL_DEBUG, "teardown intent not recorded", "container", s->container_id, "error",
		        td.intent_err.msg, (char *)NULL);
	if (td.open_err.msg[0])
		log_msg(LOG_LVL_WARN, "attachment not cleaned on every side", "container", s->container_id, "error",
		        td.open_err.msg, (char *)NULL);
	if (td.remove_err.msg[0])
		log_msg(LOG_LVL_WARN, "tc objects not removed; the record stays for the next DEL or GC", "container",
		        s->container_id, "error", td.remove_err.msg, (char *)NULL);
	snprintf(done, size, "%s%s%s", td.host ? "host" : "", td.host && td.pod ? "," : "", td.pod ? "pod" : "");
	if (r < 0 && td.record_err.msg[0])
		/* Our bookkeeping never fails a DEL: libcni stops a chain's
		 * DEL at the first error, so the primary plugin's DEL (the IP,
		 * the veth) would never run. The kernel side is done; the
		 * record stays for GC (valid-attachments) or the next DEL, and
		 * the agent, told below, drops the attachment. */
		log_msg(LOG_LVL_ERROR, "state file not removed; left to GC", "container", s->container_id, "ifname",
		        s->ifname, "error", td.record_err.msg, (char *)NULL);
	if (td.record_kept)
		snprintf(done + strlen(done), size - strlen(done), "%sstate-kept", done[0] ? "," : "");
}

int cni_cmd_del(struct cni_ctx *ctx, struct error *err)
{
	const struct cni_conf *c = &ctx->conf;
	const struct cni_env *env = ctx->env;
	_cleanup_attach_state_ struct attach_state *s = NULL;
	_cleanup_cjson_ cJSON *choices = NULL;
	struct error e = {0};
	char done[32] = "";
	_cleanup_cni_lock_ struct cni_lock lock = {.fd = -1};
	bool loaded;
	int r;

	cni_phase(ctx, "config");
	r = cni_attach_lock(ctx, env->container_id, env->ifname, CNI_DEL_LOCK_TIMEOUT_MS, &lock, err);
	if (r < 0)
		return r; /* code 11: busy (an ADD or the agent's re-tune of it); the runtime retries */
	s = calloc(1, sizeof(*s));
	if (!s)
		return cni_error_set(err, CNI_ERR_IO, ENOMEM, "out of memory");
	if (lock.fd >= 0 && state_sweep_tmp(c->state_dir, env->container_id, env->ifname) > 0)
		log_msg(LOG_LVL_INFO, "removed the temp file of a killed writer", "dir", c->state_dir, "container",
		        env->container_id, "ifname", env->ifname, (char *)NULL);
	r = state_load(c->state_dir, env->container_id, env->ifname, s, &choices, &e);
	loaded = r >= 0;
	cni_phase(ctx, "load");
	if (r == -ENOENT) {
		/* never added, already deleted, or ADD failed closed */
		cni_lock_release(&lock);
		cni_agent_notify(c, PROTO_OP_DETACHED, env->container_id, env->ifname, &ctx->args, NULL);
		log_del(ctx, NULL, "nothing to delete", "");
		return 0;
	}
	if (r < 0) {
		/* Unreadable state cannot tell what to remove; the tc objects go
		 * with the veth when the netns goes. Drop the record. */
		log_msg(LOG_LVL_WARN, "state unreadable, removing it", "container", env->container_id, "error", e.msg,
		        (char *)NULL);
		error_clear(&e);
		r = state_remove(c->state_dir, env->container_id, env->ifname, &e);
		if (r < 0 && r != -ENOENT) {
			log_msg(LOG_LVL_ERROR, "state file not removed; left to GC", "container", env->container_id,
			        "ifname", env->ifname, "error", e.msg, (char *)NULL);
			snprintf(done, sizeof(done), "state-kept");
		}
	} else {
		del_teardown(ctx, s, choices, done, sizeof(done));
	}
	cni_lock_release(&lock);
	cni_phase(ctx, "state");
	cni_agent_notify(c, PROTO_OP_DETACHED, env->container_id, env->ifname, &ctx->args, NULL);
	cni_phase(ctx, "agent");
	log_del(ctx, loaded ? s : NULL, "deleted", done);
	return 0;
}
