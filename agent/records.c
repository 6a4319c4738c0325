/* records.c — attachment records the plugin could not write, written by
 * the agent once the stateDir takes them (see records.h). */
#include <cjson/cJSON.h>

#include "attach.h"
#include "records.h"

/* The agent's lock wait for a deferred write: the plugin keeps it for
 * milliseconds; a busy one is retried with the backoff. */
#define RECORDS_LOCK_TIMEOUT_MS 50
#define RECORDS_BACKOFF_MIN_MS  200
#define RECORDS_BACKOFF_MAX_MS  30000

static struct agent_record *find(struct agent_records *rs, const char *cid, const char *ifname)
{
	for (unsigned i = 0; i < rs->n; i++)
		if (streq(rs->v[i].s->container_id, cid) && streq(rs->v[i].s->ifname, ifname))
			return &rs->v[i];
	return NULL;
}

static void drop(struct agent_records *rs, struct agent_record *r)
{
	free(r->s);
	free(r->text);
	*r = rs->v[--rs->n];
}

int agent_records_offer(struct agent_records *rs, const cJSON *attachment, const char *cid, const char *ifname,
                        int64_t now_ms, struct error *err)
{
	_cleanup_attach_state_ struct attach_state *s = calloc(1, sizeof(*s));
	_cleanup_free_ char *text = NULL;
	struct agent_record *r;
	int q;

	if (!s)
		return error_set(err, ENOMEM, "out of memory");
	q = state_from_json(attachment, s, NULL, err);
	if (q < 0) {
		error_prefix(err, "unsaved record of container %s ifname %s", cid, ifname);
		return q;
	}
	if (!streq(s->container_id, cid) || !streq(s->ifname, ifname))
		return error_set(err, EINVAL, "unsaved record of container %s ifname %s names another attachment", cid,
		                 ifname);
	if (s->pending)
		return error_set(err, EINVAL, "unsaved record of container %s ifname %s is an intent record", cid,
		                 ifname);
	text = cJSON_Print(attachment);
	if (!text)
		return error_set(err, ENOMEM, "out of memory");
	r = find(rs, cid, ifname);
	if (!r) {
		if (rs->n >= AGENT_RECORDS_MAX)
			return error_set(err, ENOBUFS, "more than %d unsaved records: container %s not kept",
			                 AGENT_RECORDS_MAX, cid);
		if (rs->n == rs->cap) {
			unsigned ncap = rs->cap ? rs->cap * 2 : 8;
			struct agent_record *nv = reallocarray(rs->v, ncap, sizeof(*nv));

			if (!nv)
				return error_set(err, ENOMEM, "out of memory");
			rs->v = nv;
			rs->cap = ncap;
		}
		r = &rs->v[rs->n++];
		memset(r, 0, sizeof(*r));
		r->since_ms = now_ms;
	} else {
		free(r->s);
		free(r->text);
	}
	r->s = TAKE_PTR(s);
	r->text = TAKE_PTR(text);
	r->retry_at_ms = now_ms;
	return 0;
}

void agent_records_forget(struct agent_records *rs, const char *cid, const char *ifname)
{
	struct agent_record *r = find(rs, cid, ifname);

	if (r) {
		drop(rs, r);
		rs->dropped++;
	}
}

/* 1 written, 0 dropped (not needed any more), <0 retry later (r->error says why). */
static int write_one(struct agent_record *r, const char *state_dir)
{
	_cleanup_attach_state_ struct attach_state *on_disk = calloc(1, sizeof(*on_disk));
	char path[STATE_PATH_MAX];
	struct attach a;
	struct error e = {0};
	int fd, q, alive;

	if (!on_disk)
		return -ENOMEM;
	fd = state_lock_attachment(state_dir, r->s->container_id, r->s->ifname, RECORDS_LOCK_TIMEOUT_MS, &e);
	if (fd < 0 && fd != -ENOENT && fd != -ENOSPC && fd != -EROFS) {
		snprintf(r->error, sizeof(r->error), "%s", e.msg);
		return fd;
	}
	/* (a lock file that cannot be created: nobody else holds it either) */
	error_clear(&e);
	q = state_load(state_dir, r->s->container_id, r->s->ifname, on_disk, NULL, &e);
	if (q != -ENOENT) {
		state_unlock_attachment(fd, state_dir, r->s->container_id, r->s->ifname);
		return 0; /* a record is there (DEL and a new ADD, or a retry): never overwritten */
	}
	/* the pod may be gone meanwhile (a lost "detached") */
	attach_init(&a);
	alive = attach_open_pod(&a, r->s->netns, r->s, NULL);
	attach_close(&a);
	if (alive == 0) {
		state_unlock_attachment(fd, state_dir, r->s->container_id, r->s->ifname);
		return 0;
	}
	error_clear(&e);
	q = state_path(state_dir, r->s->container_id, r->s->ifname, path, sizeof(path));
	if (q == 0)
		q = state_write_atomic(state_dir, path, "state file", r->text, false, &e);
	else
		error_set(&e, -q, "state path for container %s: %s", r->s->container_id, strerror(-q));
	state_unlock_attachment(fd, state_dir, r->s->container_id, r->s->ifname);
	if (q < 0) {
		snprintf(r->error, sizeof(r->error), "%s", e.msg);
		return q;
	}
	return 1;
}

void agent_records_flush(struct agent_records *rs, const char *state_dir, int64_t now_ms,
                         void (*written)(void *ud, const char *cid, const char *ifname), void *ud)
{
	for (unsigned i = 0; i < rs->n;) {
		struct agent_record *r = &rs->v[i];
		char cid[STATE_ID_MAX], ifname[IFNAME_LEN];
		int64_t backoff;
		int q;

		if (r->retry_at_ms > now_ms) {
			i++;
			continue;
		}
		q = write_one(r, state_dir);
		if (q < 0) {
			r->retries++;
			backoff = RECORDS_BACKOFF_MIN_MS << (r->retries < 8 ? r->retries - 1 : 7);
			r->retry_at_ms = now_ms + (backoff > RECORDS_BACKOFF_MAX_MS ? RECORDS_BACKOFF_MAX_MS : backoff);
			i++;
			continue;
		}
		str_copy(cid, sizeof(cid), r->s->container_id);
		str_copy(ifname, sizeof(ifname), r->s->ifname);
		if (q > 0)
			rs->written++;
		else
			rs->dropped++;
		drop(rs, r); /* v[i] is another one now */
		if (q > 0 && written)
			written(ud, cid, ifname);
	}
}

int64_t agent_records_next_ms(const struct agent_records *rs)
{
	int64_t next = -1;

	for (unsigned i = 0; i < rs->n; i++)
		if (next < 0 || rs->v[i].retry_at_ms < next)
			next = rs->v[i].retry_at_ms;
	return next;
}

cJSON *agent_records_json(const struct agent_records *rs, int64_t now_ms)
{
	cJSON *a = cJSON_CreateArray();

	for (unsigned i = 0; a && i < rs->n; i++) {
		const struct agent_record *r = &rs->v[i];
		cJSON *o = cJSON_CreateObject();

		if (!o || !cJSON_AddItemToArray(a, o)) {
			cJSON_Delete(o);
			cJSON_Delete(a);
			return NULL;
		}
		cJSON_AddStringToObject(o, "containerId", r->s->container_id);
		cJSON_AddStringToObject(o, "ifname", r->s->ifname);
		cJSON_AddStringToObject(o, "namespace", r->s->pod_namespace);
		cJSON_AddStringToObject(o, "name", r->s->pod_name);
		cJSON_AddNumberToObject(o, "waitingSeconds", (double)(now_ms - r->since_ms) / 1000.0);
		cJSON_AddNumberToObject(o, "retries", r->retries);
		cJSON_AddStringToObject(o, "error", r->error);
	}
	return a;
}

void agent_records_free(struct agent_records *rs)
{
	for (unsigned i = 0; i < rs->n; i++) {
		free(rs->v[i].s);
		free(rs->v[i].text);
	}
	free(rs->v);
	memset(rs, 0, sizeof(*rs));
}
