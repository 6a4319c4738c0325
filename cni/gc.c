/* gc.c — GC (spec 1.1.0): every attachment of this network that has state
 * but is not in cni.dev/valid-attachments is stale: remove what it left on
 * its host veth (if that veth still exists with the recorded ifindex) and its
 * state file (an intent record of a killed ADD included), one at a time under
 * its attachment lock (one try: a busy one is left to the next GC); and the
 * temp files of killed writers. Errors are reported after trying every
 * attachment. */
#include "cni.h"

#define GC_ENTRIES_MAX 65536

struct gc_entry {
	char container_id[STATE_ID_MAX];
	char ifname[IFNAME_LEN];
};

struct gc_list {
	struct gc_entry *v;
	size_t n, cap;
};

static int gc_collect(const char *container_id, const char *ifname, void *userdata)
{
	struct gc_list *l = userdata;

	if (l->n == l->cap) {
		size_t ncap = l->cap ? l->cap * 2 : 64;
		struct gc_entry *nv;
		if (ncap > GC_ENTRIES_MAX)
			return -E2BIG;
		nv = reallocarray(l->v, ncap, sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		l->v = nv;
		l->cap = ncap;
	}
	str_copy(l->v[l->n].container_id, sizeof(l->v[0].container_id), container_id);
	str_copy(l->v[l->n].ifname, sizeof(l->v[0].ifname), ifname);
	l->n++;
	return 0;
}

static bool gc_is_valid(const cJSON *valid, const struct gc_entry *e)
{
	const cJSON *a;

	cJSON_ArrayForEach(a, valid)
	{
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(a, "containerID");
		const cJSON *ifn = cJSON_GetObjectItemCaseSensitive(a, "ifname");
		/* types were checked when the config was parsed */
		if (cJSON_IsString(id) && cJSON_IsString(ifn) && streq(id->valuestring, e->container_id) &&
		    streq(ifn->valuestring, e->ifname))
			return true;
	}
	return false;
}

/* Clean one stale attachment: 1 removed, 0 not ours / already gone, <0 error (state kept). */
static int gc_one(const struct cni_ctx *ctx, const struct gc_entry *g, struct attach_state *s, struct error *err)
{
	const struct cni_conf *c = &ctx->conf;
	_cleanup_cjson_ cJSON *choices = NULL;
	_cleanup_cni_lock_ struct cni_lock lock = {.fd = -1};
	struct attach_teardown_res td;
	struct error e = {0};
	int r;

	plan_free(&s->plan); /* the previous entry's */
	memset(s, 0, sizeof(*s));
	/* one try: an attachment busy now is being worked on (not stale
	 * now); GC never waits on it, the next GC sees it again */
	if (cni_attach_lock(ctx, g->container_id, g->ifname, CNI_GC_LOCK_TIMEOUT_MS, &lock, &e) < 0) {
		log_msg(LOG_LVL_INFO, "gc: attachment busy, left to the next GC", "container", g->container_id,
		        "ifname", g->ifname, (char *)NULL);
		return 0;
	}
	r = state_load(c->state_dir, g->container_id, g->ifname, s, &choices, &e);
	if (r == -ENOENT) {
		cni_lock_release(&lock);
		return 0; /* deleted meanwhile */
	}
	if (r < 0) {
		/* Whose is it? Unknown: leave it to an operator rather than guess. */
		log_msg(LOG_LVL_WARN, "gc: state unreadable, left in place", "container", g->container_id, "ifname",
		        g->ifname, "error", e.msg, (char *)NULL);
		return 0;
	}
	if (s->network[0] && !streq(s->network, c->name))
		return 0; /* another network's attachment: its own GC decides */

	/* the host side and the record (attach_teardown: the crash protocol of
	 * attach.h); the pod side is the runtime's netns */
	r = attach_teardown(c->state_dir, &c->profiles, s, choices, NULL, &td);
	if (td.plan_err.msg[0])
		log_msg(LOG_LVL_WARN, "gc: cannot rebuild the plan; tc objects left to the kernel", "container",
		        g->container_id, "error", td.plan_err.msg, (char *)NULL);
	if (r < 0) {
		error_propagate(err, td.open_err.msg[0]     ? &td.open_err
		                     : td.remove_err.msg[0] ? &td.remove_err
		                                            : &td.record_err);
		error_prefix(err, "gc container %s ifname %s", g->container_id, g->ifname);
		return r;
	}
	/* never held while waiting for the agent */
	cni_lock_release(&lock);
	cni_agent_notify(c, PROTO_OP_DETACHED, g->container_id, g->ifname, NULL, NULL);
	return 1;
}

int cni_cmd_gc(struct cni_ctx *ctx, struct error *err)
{
	const struct cni_conf *c = &ctx->conf;
	_cleanup_attach_state_ struct attach_state *s = NULL;
	struct gc_list l = {0};
	struct error first = {0};
	unsigned removed = 0, failed = 0, kept = 0;
	char nb[3][16], dur[32];
	int r, first_r = 0;

	if (!c->has_valid_attachments)
		return cni_error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL,
		                     "GC needs " CNI_KEY_VALID_ATTACHMENTS " (a missing list is not taken as empty)");
	s = calloc(1, sizeof(*s));
	if (!s)
		return cni_error_set(err, CNI_ERR_IO, ENOMEM, "out of memory");
	/* temp files of writers killed while saving (each under its attachment's lock) */
	if ((r = state_sweep_tmp(c->state_dir, NULL, NULL)) > 0) {
		char n[16];
		snprintf(n, sizeof(n), "%d", r);
		log_msg(LOG_LVL_INFO, "removed the temp files of killed writers", "dir", c->state_dir, "count", n,
		        (char *)NULL);
	}
	/* Collect first: the directory changes while we clean. */
	r = state_list(c->state_dir, gc_collect, &l, err);
	if (r < 0) {
		free(l.v);
		if (err && !err->msg[0])
			error_set(err, -r, "gc: list state directory %s: %s", c->state_dir, strerror(-r));
		return cni_error_code(err, CNI_ERR_STATE, r);
	}
	for (size_t i = 0; i < l.n; i++) {
		struct error e = {0};

		if (gc_is_valid(c->valid_attachments, &l.v[i])) {
			kept++;
			continue;
		}
		r = gc_one(ctx, &l.v[i], s, &e);
		if (r > 0) {
			removed++;
		} else if (r < 0) {
			failed++;
			log_msg(LOG_LVL_ERROR, "gc: stale attachment not cleaned", "error", e.msg, (char *)NULL);
			str_append_sep(ctx->details, sizeof(ctx->details), '\n', "%s", e.msg);
			if (!first_r) {
				first_r = r;
				first = e;
			}
		}
	}
	free(l.v);

	snprintf(nb[0], sizeof(nb[0]), "%u", removed);
	snprintf(nb[1], sizeof(nb[1]), "%u", kept);
	snprintf(nb[2], sizeof(nb[2]), "%u", failed);
	snprintf(dur, sizeof(dur), "%llu", (unsigned long long)((cni_now_ns() - ctx->start_ns) / 1000));
	log_msg(failed ? LOG_LVL_WARN : LOG_LVL_INFO, "gc", "command", "GC", "network", c->name, "removed", nb[0],
	        "valid", nb[1], "failed", nb[2], "duration_us", dur, (char *)NULL);
	if (failed)
		return cni_error_set(err, CNI_ERR_STATE, first.errnum ? first.errnum : -first_r,
		                     "gc: %u stale attachment%s could not be cleaned up (first: %s)", failed,
		                     failed == 1 ? "" : "s", first.msg);
	return 0;
}
