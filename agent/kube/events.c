/* events.c — Kubernetes Events on pods (core/v1, POST to
 * /api/v1/namespaces/NS/events): a bounded queue (overflow drops the oldest),
 * one request at a time on the loop, retries with backoff or Retry-After on
 * 5xx/429/network errors, and deduplication like client-go's correlator: a
 * repeat of (uid, reason, message) within event_dedupe_s PATCHes the count of
 * the Event already created; repeats still queued are coalesced. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <time.h>

#include "k8s.h"
#include "kube/kube_internal.h"
#include "log.h"

#define KUBE_EVREC_MAX       128 /* Events remembered for deduplication */
#define KUBE_EVENT_RESP_MAX  (64 * 1024)
#define KUBE_EVENT_NAME_BASE 200 /* generateName base: pod name cut so the generated name stays valid */
#define KUBE_COMPONENT       "aiqos-agent"

/* What makes two Events the same (client-go's correlator key): the pod,
 * the kind, the reason and the message (owned). */
struct kube_evkey {
	char ns[KUBE_NAMESPACE_MAX];
	char pod[KUBE_NAME_MAX];
	char uid[KUBE_UID_MAX];
	char reason[KUBE_EVENT_REASON_MAX + 1];
	char *message;
	enum kube_event_kind kind;
};

struct kube_evq_item {
	TAILQ_ENTRY(kube_evq_item) link;
	struct kube_evkey key;
	uint32_t count; /* occurrences carried by this item */
	time_t first_ts, last_ts;
	unsigned attempts;
	char patch_name[KUBE_NAME_MAX]; /* set while a PATCH of that Event is in flight */
};

struct kube_evrec {
	bool used;
	struct kube_evkey key;
	char name[KUBE_NAME_MAX]; /* the Event object created */
	uint32_t count;           /* its count on the server */
	uint64_t last_usec;       /* last occurrence (monotonic) */
};

static void ev_send_next(struct kube_client *c);

static uint64_t mono_usec(const struct kube_client *c)
{
	uint64_t t = 0;
	(void)sd_event_now(c->loop, CLOCK_MONOTONIC, &t);
	return t;
}

static void item_free(struct kube_evq_item *it)
{
	if (!it)
		return;
	free(it->key.message);
	free(it);
}

static void item_remove(struct kube_client *c, struct kube_evq_item *it)
{
	TAILQ_REMOVE(&c->evq, it, link);
	c->evq_len--;
	item_free(it);
}

static bool key_same(const struct kube_evkey *a, const struct kube_evkey *b)
{
	return a->kind == b->kind && streq(a->uid, b->uid) && streq(a->ns, b->ns) && streq(a->pod, b->pod) &&
	       streq(a->reason, b->reason) && streq(a->message, b->message);
}

static struct kube_evrec *rec_find(struct kube_client *c, const struct kube_evq_item *it, bool live_only)
{
	uint64_t now = mono_usec(c), window = (uint64_t)c->opts.event_dedupe_s * 1000000ULL;

	if (!c->ev_recs)
		return NULL;
	for (unsigned i = 0; i < KUBE_EVREC_MAX; i++) {
		struct kube_evrec *r = &c->ev_recs[i];
		if (!r->used || !key_same(&r->key, &it->key))
			continue;
		if (live_only && now - r->last_usec > window)
			return NULL;
		return r;
	}
	return NULL;
}

static void rec_drop(struct kube_evrec *r)
{
	free(r->key.message);
	memset(r, 0, sizeof(*r));
}

static void rec_put(struct kube_client *c, const struct kube_evq_item *it, const char *name)
{
	struct kube_evrec *r = rec_find(c, it, false), *victim = NULL;
	char *msg;

	if (!c->ev_recs) {
		c->ev_recs = calloc(KUBE_EVREC_MAX, sizeof(*c->ev_recs));
		if (!c->ev_recs)
			return;
	}
	if (!r) {
		for (unsigned i = 0; i < KUBE_EVREC_MAX; i++) {
			struct kube_evrec *x = &c->ev_recs[i];
			if (!x->used) {
				victim = x;
				break;
			}
			if (!victim || x->last_usec < victim->last_usec)
				victim = x; /* least recently seen */
		}
		r = victim;
		msg = strdup(it->key.message);
		if (!msg)
			return;
		rec_drop(r);
		r->used = true;
		r->key = it->key;
		r->key.message = msg;
		r->count = 0;
	}
	str_copy(r->name, sizeof(r->name), name);
	r->count = it->count;
	r->last_usec = mono_usec(c);
}

static void events_free(struct kube_client *c)
{
	struct kube_evq_item *it;

	kube_req_free(c->ev_req);
	c->ev_req = NULL;
	c->ev_inflight = NULL;
	while ((it = TAILQ_FIRST(&c->evq)))
		item_remove(c, it);
	sd_event_source_disable_unref(c->ev_timer);
	c->ev_timer = NULL;
	if (c->ev_recs) {
		for (unsigned i = 0; i < KUBE_EVREC_MAX; i++)
			rec_drop(&c->ev_recs[i]);
		free(c->ev_recs);
		c->ev_recs = NULL;
	}
}

unsigned kube_client_events_pending(const struct kube_client *c)
{
	return c->evq_len;
}

static int on_ev_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct kube_client *c = userdata;

	if (!c->ev_req)
		ev_send_next(c);
	return 0;
}

static void ev_arm(struct kube_client *c, uint64_t delay_ms)
{
	if (kube_timer_arm(c, &c->ev_timer, mono_usec(c) + delay_ms * 1000, 1000, on_ev_timer, "kube-events") < 0)
		log_msg(LOG_LVL_ERROR, "kube: cannot arm the event timer", NULL);
}

/* Send from the loop, never from inside a caller (which may be a curl callback). */
static void ev_kick(struct kube_client *c)
{
	int enabled = SD_EVENT_OFF;

	if (c->ev_req || TAILQ_EMPTY(&c->evq))
		return;
	if (c->ev_timer && sd_event_source_get_enabled(c->ev_timer, &enabled) >= 0 && enabled != SD_EVENT_OFF)
		return; /* a send or a backoff wait is already scheduled */
	ev_arm(c, 0);
}

int kube_post_pod_event(struct kube_client *c, const char *ns, const char *pod, const char *uid,
                        enum kube_event_kind kind, const char *reason, const char *message)
{
	struct kube_evkey key = {.kind = kind};
	struct kube_evq_item *it;
	size_t mlen;
	time_t now = time(NULL);

	if (!c || !ns || !pod || !reason || (kind != KUBE_EV_NORMAL && kind != KUBE_EV_WARNING))
		return -EINVAL;
	if (!uid)
		uid = "";
	if (!message)
		message = "";
	/* the names go into the Event's URL path and involvedObject: Kubernetes' rules */
	if (!k8s_namespace_valid(ns) || !k8s_pod_name_valid(pod) || (uid[0] && !k8s_uid_valid(uid)) || !reason[0] ||
	    strlen(reason) > KUBE_EVENT_REASON_MAX)
		return -EINVAL;
	mlen = str_utf8_cut(message, KUBE_EVENT_MESSAGE_MAX);
	str_copy(key.ns, sizeof(key.ns), ns);
	str_copy(key.pod, sizeof(key.pod), pod);
	str_copy(key.uid, sizeof(key.uid), uid);
	str_copy(key.reason, sizeof(key.reason), reason);
	key.message = strndup(message, mlen);
	if (!key.message)
		return -ENOMEM;
	if (!c->events_free) {
		/* the first Event: the queue, and its cleanup for kube_client_free */
		TAILQ_INIT(&c->evq);
		c->events_free = events_free;
	}

	TAILQ_FOREACH(it, &c->evq, link)
	{
		if (it == c->ev_inflight)
			continue;
		if (key_same(&it->key, &key)) {
			free(key.message);
			it->count++;
			it->last_ts = now;
			c->stats.events_post_deduped++;
			return 0;
		}
	}
	while (c->evq_len >= c->opts.event_queue_max) {
		struct kube_evq_item *old = TAILQ_FIRST(&c->evq);
		if (old == c->ev_inflight)
			old = TAILQ_NEXT(old, link);
		if (!old)
			break;
		item_remove(c, old);
		c->stats.events_post_dropped++;
	}
	it = calloc(1, sizeof(*it));
	if (!it) {
		free(key.message);
		return -ENOMEM;
	}
	it->key = key;
	it->count = 1;
	it->first_ts = it->last_ts = now;
	TAILQ_INSERT_TAIL(&c->evq, it, link);
	c->evq_len++;
	ev_kick(c);
	return 0;
}

static void fmt_time(char *buf, size_t size, time_t t)
{
	struct tm tm;

	if (!gmtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		str_copy(buf, size, "1970-01-01T00:00:00Z");
}

static char *event_body(const struct kube_client *c, const struct kube_evq_item *it)
{
	cJSON *o = cJSON_CreateObject(), *md, *inv, *src;
	char gen[KUBE_EVENT_NAME_BASE + 16], first[32], last[32];
	char *out = NULL;

	if (!o)
		return NULL;
	snprintf(gen, sizeof(gen), "%.*s.aiqos-", KUBE_EVENT_NAME_BASE, it->key.pod);
	fmt_time(first, sizeof(first), it->first_ts);
	fmt_time(last, sizeof(last), it->last_ts);
	if (!cJSON_AddStringToObject(o, "apiVersion", "v1") || !cJSON_AddStringToObject(o, "kind", "Event") ||
	    !(md = cJSON_AddObjectToObject(o, "metadata")) || !cJSON_AddStringToObject(md, "generateName", gen) ||
	    !cJSON_AddStringToObject(md, "namespace", it->key.ns) ||
	    !(inv = cJSON_AddObjectToObject(o, "involvedObject")) ||
	    !cJSON_AddStringToObject(inv, "apiVersion", "v1") || !cJSON_AddStringToObject(inv, "kind", "Pod") ||
	    !cJSON_AddStringToObject(inv, "name", it->key.pod) ||
	    !cJSON_AddStringToObject(inv, "namespace", it->key.ns) ||
	    (it->key.uid[0] && !cJSON_AddStringToObject(inv, "uid", it->key.uid)) ||
	    !cJSON_AddStringToObject(o, "reason", it->key.reason) ||
	    !cJSON_AddStringToObject(o, "message", it->key.message) ||
	    !cJSON_AddStringToObject(o, "type", it->key.kind == KUBE_EV_WARNING ? "Warning" : "Normal") ||
	    !(src = cJSON_AddObjectToObject(o, "source")) ||
	    !cJSON_AddStringToObject(src, "component", KUBE_COMPONENT) ||
	    !cJSON_AddStringToObject(src, "host", c->node) || !cJSON_AddStringToObject(o, "firstTimestamp", first) ||
	    !cJSON_AddStringToObject(o, "lastTimestamp", last) || !cJSON_AddNumberToObject(o, "count", it->count) ||
	    !cJSON_AddStringToObject(o, "reportingComponent", KUBE_COMPONENT) ||
	    !cJSON_AddStringToObject(o, "reportingInstance", c->node))
		goto out;
	out = cJSON_PrintUnformatted(o);
out:
	cJSON_Delete(o);
	return out;
}

static char *patch_body(const struct kube_evq_item *it, uint32_t count)
{
	cJSON *o = cJSON_CreateObject();
	char last[32];
	char *out = NULL;

	if (!o)
		return NULL;
	fmt_time(last, sizeof(last), it->last_ts);
	if (cJSON_AddNumberToObject(o, "count", count) && cJSON_AddStringToObject(o, "lastTimestamp", last))
		out = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return out;
}

static void ev_done(struct kube_req *r, CURLcode res);

static void ev_retry(struct kube_client *c, struct kube_evq_item *it, const char *why, long retry_after_s)
{
	uint64_t delay;
	char ms[32];

	it->attempts++;
	it->patch_name[0] = '\0';
	if (it->attempts >= c->opts.event_attempts_max) {
		c->stats.events_post_failed++;
		log_msg(LOG_LVL_WARN, "kube: giving up on an Event", "pod", LOG_FMT("%s/%s", it->key.ns, it->key.pod),
		        "reason", it->key.reason, "error", why, NULL);
		item_remove(c, it);
		c->ev_backoff_attempt = 0;
		ev_kick(c);
		return;
	}
	if (retry_after_s > 0) {
		uint64_t ra = (uint64_t)retry_after_s;
		if (ra > c->opts.retry_after_max_s)
			ra = c->opts.retry_after_max_s;
		delay = ra * 1000 + kube_rand(c) % 1001;
		c->stats.retry_after_waits++;
	} else {
		delay = kube_backoff_ms(c->ev_backoff_attempt, c->opts.backoff_base_ms, c->opts.backoff_cap_ms,
		                        kube_rand(c));
	}
	if (c->ev_backoff_attempt < 64)
		c->ev_backoff_attempt++;
	snprintf(ms, sizeof(ms), "%" PRIu64, delay);
	log_msg(LOG_LVL_INFO, "kube: Event not sent; retrying", "pod", LOG_FMT("%s/%s", it->key.ns, it->key.pod),
	        "reason", it->key.reason, "error", why, "retry_in_ms", ms, NULL);
	ev_arm(c, delay);
}

static void ev_send_next(struct kube_client *c)
{
	struct kube_evq_item *it = TAILQ_FIRST(&c->evq);
	char url[KUBE_SERVER_MAX + 1024], ns[KUBE_NAMESPACE_MAX * 3], name[KUBE_NAME_MAX * 3];
	struct kube_evrec *rec;
	struct error e = {0};
	struct kube_req *r;
	char *body;
	int n;

	if (!it || c->ev_req)
		return;
	if (kube_token_refresh(c, &e) < 0) {
		ev_retry(c, it, e.msg, 0);
		return;
	}
	rec = rec_find(c, it, true);
	if (!kube_url_escape(ns, sizeof(ns), it->key.ns) || (rec && !kube_url_escape(name, sizeof(name), rec->name))) {
		ev_retry(c, it, "name too long", 0);
		return;
	}
	if (rec) {
		body = patch_body(it, rec->count + it->count);
		n = snprintf(url, sizeof(url), "%s/api/v1/namespaces/%s/events/%s", c->base_url, ns, name);
	} else {
		body = event_body(c, it);
		n = snprintf(url, sizeof(url), "%s/api/v1/namespaces/%s/events", c->base_url, ns);
	}
	r = body && n > 0 && (size_t)n < sizeof(url) ? kube_req_new(KUBE_REQ_EVENT, KUBE_EVENT_RESP_MAX) : NULL;
	if (!r) {
		free(body);
		ev_retry(c, it, "out of memory", 0);
		return;
	}
	r->upload = body;
	r->content_type = rec ? "application/merge-patch+json" : "application/json";
	r->owner = c;
	r->done = ev_done;
	if (kube_req_setup(c, r, url, &e) < 0 ||
	    curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, kube_req_body_cb) != CURLE_OK ||
	    curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r) != CURLE_OK ||
	    curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, r->upload) != CURLE_OK ||
	    curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE, (long)strlen(r->upload)) != CURLE_OK ||
	    (rec && curl_easy_setopt(r->easy, CURLOPT_CUSTOMREQUEST, "PATCH") != CURLE_OK) ||
	    curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, (long)c->opts.request_timeout_ms) != CURLE_OK ||
	    kube_http_add(c->http, r, &e) < 0) {
		kube_req_free(r);
		ev_retry(c, it, e.msg[0] ? e.msg : "request setup failed", 0);
		return;
	}
	if (rec)
		str_copy(it->patch_name, sizeof(it->patch_name), rec->name);
	c->ev_req = r;
	c->ev_inflight = it;
}

static void ev_done(struct kube_req *r, CURLcode res)
{
	struct kube_client *c = r->owner;
	struct kube_evq_item *it = c->ev_inflight;
	bool patch = it && it->patch_name[0];
	char why[ERROR_MSG_MAX];
	long status = 0, ra;

	c->ev_req = NULL;
	c->ev_inflight = NULL;
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
	r->status = status;
	if (!it) {
		kube_req_free(r);
		ev_kick(c);
		return;
	}
	if (status >= 200 && status < 300 && (res == CURLE_OK || r->body_over)) {
		if (patch) {
			struct kube_evrec *rec = rec_find(c, it, false);
			if (rec && streq(rec->name, it->patch_name)) {
				rec->count += it->count;
				rec->last_usec = mono_usec(c);
			}
			c->stats.events_patched++;
		} else {
			char name[KUBE_NAME_MAX] = "";
			cJSON *obj = r->body ? cJSON_ParseWithLength(r->body, r->body_len) : NULL;
			const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
			const cJSON *nm = cJSON_GetObjectItemCaseSensitive(md, "name");
			if (cJSON_IsString(nm) && k8s_dns_subdomain_valid(nm->valuestring))
				str_copy(name, sizeof(name), nm->valuestring);
			cJSON_Delete(obj);
			if (name[0])
				rec_put(c, it, name);
			c->stats.events_posted++;
		}
		kube_req_free(r);
		item_remove(c, it);
		c->ev_backoff_attempt = 0;
		ev_kick(c);
		return;
	}
	if (res != CURLE_OK && status == 0) {
		snprintf(why, sizeof(why), "%s", kube_req_error_text(r, res));
		kube_scrub(c, why, sizeof(why));
		kube_req_free(r);
		ev_retry(c, it, why, 0);
		return;
	}
	c->stats.http_errors++;
	kube_describe_http_error(c, r, patch ? "patch event" : "post event", why, sizeof(why));
	if (patch && status == 404) {
		/* the Event expired or was deleted: create a new one */
		struct kube_evrec *rec = rec_find(c, it, false);
		if (rec)
			rec_drop(rec);
		it->patch_name[0] = '\0';
		kube_req_free(r);
		ev_kick(c);
		return;
	}
	ra = kube_req_error_wait_s(c, r);
	if (status == 401 || status == 408 || status == 409 || status == 429 || status >= 500 || res != CURLE_OK) {
		kube_req_free(r);
		ev_retry(c, it, why, ra);
		return;
	}
	/* 400, 403, 422...: the request itself is wrong; retrying will not help */
	c->stats.events_post_failed++;
	log_msg(LOG_LVL_WARN, "kube: Event rejected", "pod", LOG_FMT("%s/%s", it->key.ns, it->key.pod), "reason",
	        it->key.reason, "error", why, NULL);
	kube_req_free(r);
	item_remove(c, it);
	ev_kick(c);
}
