/* kube.c — the pods LIST/WATCH state machine of the agent's API client:
 * paginated LIST (all pages before delivery), WATCH from its resourceVersion
 * with bookmarks, 410 or a skipped event -> relist, reconnect from the last resourceVersion with
 * full-jitter backoff, Retry-After, stall detection; plus what every request
 * shares (TLS, token, URL, error text). Runs on the sd-event loop only. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <sys/random.h>

#include "kube/kube_internal.h"
#include "k8s.h"
#include "log.h"

#define KUBE_LIST_PODS_MAX         16384       /* pods accumulated over all pages */
#define KUBE_ERROR_BODY_MAX        (64 * 1024) /* error answers (Status) we keep */
#define KUBE_URL_MAX               8192
#define KUBE_BAD_LOG_PER_STREAM    5             /* bad events logged per stream, then only counted */
#define KUBE_SHORT_STREAM_USEC     (1000 * 1000) /* a clean end sooner than this, with no event, is a failure */
#define KUBE_RETRY_AFTER_JITTER_MS 1000
#define USEC_PER_MSEC              1000ULL

static const char user_agent[] = "aiqos-agent";

/* ---- small helpers ---- */

void kube_client_options_default(struct kube_client_options *o)
{
	*o = (struct kube_client_options){
	        .allow_insecure = false,
	        .page_limit = 500,
	        .max_event_bytes = WATCH_EVENT_MAX_DEFAULT,
	        .max_page_bytes = 16 * 1024 * 1024,
	        .watch_timeout_min_s = 300,
	        .watch_timeout_max_s = 600,
	        .backoff_base_ms = 200,
	        .backoff_cap_ms = 30000,
	        .retry_after_max_s = 120,
	        .relist_jitter_ms = 2000,
	        .stall_timeout_ms = 180000,
	        .healthy_stream_ms = 10000,
	        .connect_timeout_ms = 10000,
	        .request_timeout_ms = 60000,
	        .event_queue_max = 256,
	        .event_dedupe_s = 600,
	        .event_attempts_max = 6,
	};
}

uint64_t kube_backoff_ms(unsigned attempt, uint32_t base_ms, uint32_t cap_ms, uint64_t rnd)
{
	uint64_t ceiling = base_ms;

	for (unsigned i = 0; i < attempt && ceiling < cap_ms; i++)
		ceiling *= 2;
	if (ceiling > cap_ms)
		ceiling = cap_ms;
	return rnd % (ceiling + 1);
}

uint64_t kube_rand(struct kube_client *c)
{
	/* xorshift64*: jitter only, not a secret */
	uint64_t x = c->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	c->rng = x;
	return x * 0x2545F4914F6CDD1DULL;
}

static uint64_t now_usec(const struct kube_client *c)
{
	uint64_t t = 0;
	(void)sd_event_now(c->loop, CLOCK_MONOTONIC, &t);
	return t;
}

bool kube_url_escape(char *dst, size_t size, const char *src)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;

	for (const unsigned char *p = (const unsigned char *)src; *p; p++) {
		bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		             *p == '-' || *p == '.' || *p == '_' || *p == '~';
		if (n + (plain ? 1 : 3) >= size)
			return false;
		if (plain) {
			dst[n++] = (char)*p;
		} else {
			dst[n++] = '%';
			dst[n++] = hex[*p >> 4];
			dst[n++] = hex[*p & 15];
		}
	}
	if (size == 0)
		return false;
	dst[n] = '\0';
	return true;
}

static void replace_all(char *s, size_t size, const char *needle, const char *with)
{
	size_t nlen = strlen(needle), wlen = strlen(with);
	char *p = s;

	if (nlen == 0)
		return;
	while ((p = strstr(p, needle))) {
		size_t tail = strlen(p + nlen);
		size_t off = (size_t)(p - s);
		if (off + wlen + tail + 1 > size) {
			/* no room to expand: cut the string here */
			*p = '\0';
			return;
		}
		memmove(p + wlen, p + nlen, tail + 1);
		memcpy(p, with, wlen);
		p += wlen;
	}
}

void kube_scrub(const struct kube_client *c, char *s, size_t size)
{
	if (c->token && c->token[0])
		replace_all(s, size, c->token, "<redacted>");
}

static void sanitize(char *s)
{
	for (unsigned char *p = (unsigned char *)s; *p; p++)
		if (*p < ' ' || *p == 0x7f)
			*p = ' ';
}

long kube_req_retry_after_s(const struct kube_req *r)
{
	curl_off_t ra = 0;

	if (curl_easy_getinfo(r->easy, CURLINFO_RETRY_AFTER, &ra) != CURLE_OK || ra <= 0)
		return 0;
	return ra > 86400 ? 86400 : (long)ra;
}

void kube_describe_http_error(struct kube_client *c, const struct kube_req *r, const char *what, char *buf, size_t size)
{
	char reason[KUBE_REASON_MAX] = "", message[KUBE_STATUS_MSG_MAX] = "";
	cJSON *obj = NULL;

	if (r->body && r->body_len)
		obj = cJSON_ParseWithLength(r->body, r->body_len);
	if (cJSON_IsObject(obj)) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "reason");
		if (cJSON_IsString(v))
			snprintf(reason, sizeof(reason), "%s", v->valuestring);
		v = cJSON_GetObjectItemCaseSensitive(obj, "message");
		if (cJSON_IsString(v))
			snprintf(message, sizeof(message), "%s", v->valuestring);
	} else if (r->body && r->body_len) {
		snprintf(message, sizeof(message), "%.200s", r->body);
	}
	cJSON_Delete(obj);
	sanitize(reason);
	sanitize(message);
	snprintf(buf, size, "%s: HTTP %ld%s%s%s%s", what, r->status, reason[0] ? " " : "", reason,
	         message[0] ? ": " : "", message);
	kube_scrub(c, buf, size);
}

/* ---- requests: TLS, auth ---- */

int kube_token_refresh(struct kube_client *c, struct error *err)
{
	char *t = NULL;
	int r;

	if (!c->token_file[0])
		return 0;
	r = kube_token_read(c->token_file, &t, err);
	if (r < 0) {
		if (c->token) {
			/* a rotation in progress or a transient error: the cached
			 * token may still be valid (as client-go does) */
			log_msg(LOG_LVL_WARN, "kube: cannot re-read the token file; using the cached token", "error",
			        err ? err->msg : "", NULL);
			return 0;
		}
		return r;
	}
	if (c->token && streq(c->token, t)) {
		explicit_bzero(t, strlen(t));
		free(t);
		return 0;
	}
	if (c->token) {
		c->stats.token_reloads++;
		log_msg(LOG_LVL_INFO, "kube: bearer token rotated (token file re-read)", "file", c->token_file, NULL);
		explicit_bzero(c->token, strlen(c->token));
		free(c->token);
	}
	c->token = t;
	return 0;
}

static size_t header_cb(char *data, size_t size, size_t n, void *userdata);

int kube_req_setup(struct kube_client *c, struct kube_req *r, const char *url, struct error *err)
{
	CURL *e = r->easy;
	CURLcode cc = CURLE_OK;

#define SET(opt, val)                                       \
	do {                                                \
		if (cc == CURLE_OK)                         \
			cc = curl_easy_setopt(e, opt, val); \
	} while (0)

	SET(CURLOPT_URL, url);
	SET(CURLOPT_PRIVATE, r);
	SET(CURLOPT_ERRORBUFFER, r->errbuf);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_PROTOCOLS_STR, "https");
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	/* one connection per watch: a dead or stalled stream is torn down on
	 * its own (no HTTP/2 multiplexing onto a dead connection) */
	SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	SET(CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	SET(CURLOPT_SSL_VERIFYPEER, c->insecure ? 0L : 1L);
	SET(CURLOPT_SSL_VERIFYHOST, c->insecure ? 0L : 2L);
	if (c->ca_file[0]) {
		/* trust exactly this CA, as client-go does */
		SET(CURLOPT_CAINFO, c->ca_file);
		SET(CURLOPT_CAPATH, NULL);
	} else if (c->ca_pem) {
		struct curl_blob blob = {.data = c->ca_pem, .len = c->ca_pem_len, .flags = CURL_BLOB_COPY};
		SET(CURLOPT_CAINFO, NULL);
		SET(CURLOPT_CAPATH, NULL);
		SET(CURLOPT_CAINFO_BLOB, &blob);
	}
	if (c->cert_file[0]) {
		SET(CURLOPT_SSLCERT, c->cert_file);
		SET(CURLOPT_SSLCERTTYPE, "PEM");
	} else if (c->cert_pem) {
		struct curl_blob blob = {.data = c->cert_pem, .len = c->cert_pem_len, .flags = CURL_BLOB_COPY};
		SET(CURLOPT_SSLCERT_BLOB, &blob);
		SET(CURLOPT_SSLCERTTYPE, "PEM");
	}
	if (c->key_file[0]) {
		SET(CURLOPT_SSLKEY, c->key_file);
		SET(CURLOPT_SSLKEYTYPE, "PEM");
	} else if (c->key_pem) {
		struct curl_blob blob = {.data = c->key_pem, .len = c->key_pem_len, .flags = CURL_BLOB_COPY};
		SET(CURLOPT_SSLKEY_BLOB, &blob);
		SET(CURLOPT_SSLKEYTYPE, "PEM");
	}
	if (c->connect_to)
		SET(CURLOPT_CONNECT_TO, c->connect_to);
	if (c->proxy_url[0])
		SET(CURLOPT_PROXY, c->proxy_url);
	SET(CURLOPT_CONNECTTIMEOUT_MS, (long)c->opts.connect_timeout_ms);
	SET(CURLOPT_TCP_KEEPALIVE, 1L);
	SET(CURLOPT_TCP_KEEPIDLE, 30L);
	SET(CURLOPT_TCP_KEEPINTVL, 10L);
	SET(CURLOPT_USERAGENT, user_agent);
	SET(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
	SET(CURLOPT_HEADERFUNCTION, header_cb);
	SET(CURLOPT_HEADERDATA, r);
#undef SET
	if (cc != CURLE_OK)
		return error_set(err, EINVAL, "curl_easy_setopt: %s", curl_easy_strerror(cc));

	r->headers = curl_slist_append(NULL, "Accept: application/json");
	if (!r->headers)
		return error_set(err, ENOMEM, "out of memory");
	if (c->token && c->token[0]) {
		size_t len = strlen(c->token) + sizeof("Authorization: Bearer ");
		char *h = malloc(len);
		struct curl_slist *n;
		if (!h)
			return error_set(err, ENOMEM, "out of memory");
		snprintf(h, len, "Authorization: Bearer %s", c->token);
		n = curl_slist_append(r->headers, h);
		explicit_bzero(h, len);
		free(h);
		if (!n)
			return error_set(err, ENOMEM, "out of memory");
		r->headers = n;
	}
	if (r->upload) {
		char ct[128];
		struct curl_slist *n;
		snprintf(ct, sizeof(ct), "Content-Type: %s", r->content_type ? r->content_type : "application/json");
		n = curl_slist_append(r->headers, ct);
		if (!n)
			return error_set(err, ENOMEM, "out of memory");
		r->headers = n;
	}
	if (curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers) != CURLE_OK)
		return error_set(err, EINVAL, "curl_easy_setopt(CURLOPT_HTTPHEADER) failed");
	return 0;
}

/* ---- the list/watch state machine ---- */

static void list_start(struct kube_client *c);
static void watch_start(struct kube_client *c);
static int on_retry(sd_event_source *s, uint64_t usec, void *userdata);

static void set_state(struct kube_client *c, bool connected, const char *why)
{
	char buf[ERROR_MSG_MAX];

	snprintf(buf, sizeof(buf), "%s", why);
	kube_scrub(c, buf, sizeof(buf));
	c->connected = connected;
	str_copy(c->why, sizeof(c->why), buf);
	if (c->ops.state)
		c->ops.state(c->ud, connected, buf);
}

static void retry_in(struct kube_client *c, uint64_t delay_ms)
{
	uint64_t when = now_usec(c) + delay_ms * USEC_PER_MSEC;
	int r;

	if (!c->retry_timer) {
		r = sd_event_add_time(c->loop, &c->retry_timer, CLOCK_MONOTONIC, when, 1000, on_retry, c);
		if (r < 0) {
			log_msg(LOG_LVL_ERROR, "kube: cannot arm the retry timer", "error", strerror(-r), NULL);
			return;
		}
		(void)sd_event_source_set_description(c->retry_timer, "kube-retry");
	} else {
		(void)sd_event_source_set_time(c->retry_timer, when);
	}
	(void)sd_event_source_set_enabled(c->retry_timer, SD_EVENT_ONESHOT);
}

/* An attempt failed: wait (Retry-After or backoff), then resume (WATCH from
 * the kept resourceVersion, or LIST if there is none). */
static void fail(struct kube_client *c, const char *why, long retry_after_s)
{
	char buf[ERROR_MSG_MAX], ms[32];
	uint64_t delay;

	c->stats.failures++;
	if (retry_after_s > 0) {
		uint64_t ra = (uint64_t)retry_after_s;
		if (ra > c->opts.retry_after_max_s)
			ra = c->opts.retry_after_max_s;
		delay = ra * 1000 + kube_rand(c) % (KUBE_RETRY_AFTER_JITTER_MS + 1);
		c->stats.retry_after_waits++;
	} else {
		delay = kube_backoff_ms(c->attempt, c->opts.backoff_base_ms, c->opts.backoff_cap_ms, kube_rand(c));
	}
	if (c->attempt < 64)
		c->attempt++;
	snprintf(buf, sizeof(buf), "%s", why);
	kube_scrub(c, buf, sizeof(buf));
	snprintf(ms, sizeof(ms), "%" PRIu64, delay);
	log_msg(LOG_LVL_WARN, "kube: API request failed; retrying", "error", buf, "retry_in_ms", ms, NULL);
	set_state(c, false, buf);
	retry_in(c, delay);
}

static void relist_soon(struct kube_client *c, const char *why)
{
	uint64_t delay = c->opts.relist_jitter_ms ? kube_rand(c) % (c->opts.relist_jitter_ms + 1ULL) : 0;
	char ms[32];

	c->need_list = true;
	c->list_continue[0] = '\0';
	snprintf(ms, sizeof(ms), "%" PRIu64, delay);
	log_msg(LOG_LVL_INFO, "kube: relisting", "reason", why, "in_ms", ms, NULL);
	set_state(c, false, why);
	retry_in(c, delay);
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct kube_client *c = userdata;

	if (c->stream)
		return 0;
	if (c->need_list || !c->rv[0])
		list_start(c);
	else
		watch_start(c);
	return 0;
}

static void stall_disarm(struct kube_client *c)
{
	if (c->stall_timer)
		(void)sd_event_source_set_enabled(c->stall_timer, SD_EVENT_OFF);
}

static size_t header_cb(char *data, size_t size, size_t n, void *userdata)
{
	struct kube_req *r = userdata;
	size_t len = size * n;

	/* the blank line that ends the headers */
	if (len <= 2 && (len == 0 || data[0] == '\r' || data[0] == '\n')) {
		long code = 0;
		curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
		r->status = code;
		if (r->kind == KUBE_REQ_WATCH && code == 200 && r->owner) {
			struct kube_client *c = r->owner;
			if (c->stream == r && !c->stream_open) {
				c->stream_open = true;
				kube_http_observe(r);
				c->last_byte_usec = now_usec(c);
				set_state(c, true, "watching pods");
			}
		}
	}
	return len;
}

size_t kube_req_body_cb(char *data, size_t size, size_t n, void *userdata)
{
	struct kube_req *r = userdata;
	size_t len = size * n;

	if (!kube_req_body_append(r, data, len))
		return 0; /* over the cap: abort */
	return len;
}

/* ---- LIST ---- */

static void list_items_clear(struct kube_client *c)
{
	for (size_t i = 0; i < c->list_n; i++)
		kube_pod_done(&c->list_items[i]);
	free(c->list_items);
	c->list_items = NULL;
	c->list_n = c->list_cap = 0;
}

static void list_deliver(struct kube_client *c)
{
	char n[32];

	if (c->ops.list_begin)
		c->ops.list_begin(c->ud);
	for (size_t i = 0; i < c->list_n; i++)
		if (c->ops.list_pod)
			c->ops.list_pod(c->ud, &c->list_items[i]);
	if (c->ops.list_end)
		c->ops.list_end(c->ud);
	snprintf(n, sizeof(n), "%zu", c->list_n);
	log_msg(LOG_LVL_INFO, "kube: pods listed", "pods", n, "resourceVersion", c->list_rv, NULL);
	list_items_clear(c);
	str_copy(c->rv, sizeof(c->rv), c->list_rv);
	c->need_list = false;
	c->list_continue[0] = '\0';
	c->stats.lists++;
	if (c->listed_once)
		c->stats.relists++;
	c->listed_once = true;
	c->page_limit = c->opts.page_limit;
	c->watch_after_list = true;
}

static int list_add_page(struct kube_client *c, struct kube_pod_list *page, struct error *err)
{
	if (page->n > KUBE_LIST_PODS_MAX - c->list_n)
		return error_set(err, E2BIG, "more than %d pods on node %s", KUBE_LIST_PODS_MAX, c->node);
	if (c->list_n + page->n > c->list_cap) {
		size_t cap = c->list_cap ? c->list_cap : 64;
		struct kube_pod *items;
		while (cap < c->list_n + page->n)
			cap *= 2;
		items = realloc(c->list_items, cap * sizeof(*items));
		if (!items)
			return error_set(err, ENOMEM, "out of memory for %zu pods", cap);
		c->list_items = items;
		c->list_cap = cap;
	}
	for (size_t i = 0; i < page->n; i++) {
		memset(&c->list_items[c->list_n], 0, sizeof(c->list_items[c->list_n]));
		kube_pod_move(&c->list_items[c->list_n++], &page->items[i]);
	}
	return 0;
}

static void list_done(struct kube_req *r, CURLcode res)
{
	struct kube_client *c = r->owner;
	char why[ERROR_MSG_MAX];
	struct error e = {0};

	c->stream = NULL;
	if (res != CURLE_OK && r->body_over) {
		/* a page over max_page_bytes: fewer pods per page (from the start,
		 * consistently), and served by etcd, which honours limit */
		kube_req_free(r);
		c->list_continue[0] = '\0';
		list_items_clear(c);
		c->list_consistent = true;
		if (c->page_limit > 1) {
			c->page_limit /= 2;
			log_msg(LOG_LVL_WARN, "kube: LIST page over the size cap; retrying with a smaller page", NULL);
			retry_in(c, 0);
			return;
		}
		fail(c, "list pods: one pod exceeds the LIST page cap", 0);
		return;
	}
	if (res != CURLE_OK) {
		snprintf(why, sizeof(why), "list pods: %s", r->errbuf[0] ? r->errbuf : curl_easy_strerror(res));
		kube_req_free(r);
		list_items_clear(c);
		c->list_continue[0] = '\0';
		fail(c, why, 0);
		return;
	}
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);
	if (r->status == 200) {
		struct kube_pod_list page = {0};
		int k = kube_pod_list_decode_json(r->body ? r->body : "", r->body_len, &page, &e);
		kube_req_free(r);
		if (k >= 0) {
			c->stats.list_pages++;
			if (page.n_invalid) {
				char n[16];
				c->stats.list_items_bad += page.n_invalid;
				snprintf(n, sizeof(n), "%u", page.n_invalid);
				log_msg(LOG_LVL_WARN, "kube: LIST items skipped", "count", n, "first",
				        page.first_invalid, NULL);
			}
			if (!c->list_continue[0])
				str_copy(c->list_rv, sizeof(c->list_rv), page.resource_version);
			k = list_add_page(c, &page, &e);
			str_copy(c->list_continue, sizeof(c->list_continue), page.continue_token);
		}
		kube_pod_list_done(&page);
		if (k < 0) {
			snprintf(why, sizeof(why), "list pods: %.960s", e.msg);
			list_items_clear(c);
			c->list_continue[0] = '\0';
			fail(c, why, 0);
			return;
		}
		if (c->list_continue[0]) {
			list_start(c);
			return;
		}
		c->list_consistent = false;
		list_deliver(c);
		watch_start(c);
		return;
	}
	c->stats.http_errors++;
	kube_describe_http_error(c, r, "list pods", why, sizeof(why));
	list_items_clear(c);
	c->list_continue[0] = '\0';
	if (r->status == 410) {
		/* the continue token's snapshot was compacted: start over from etcd */
		kube_req_free(r);
		c->list_consistent = true;
		relist_soon(c, why);
		return;
	}
	if (r->status == 401)
		c->stats.unauthorized++;
	{
		long ra = (r->status == 429 || r->status >= 500) ? kube_req_retry_after_s(r) : 0;
		kube_req_free(r);
		fail(c, why, ra);
	}
}

static void list_start(struct kube_client *c)
{
	char url[KUBE_URL_MAX], node[KUBE_NAME_MAX * 3], cont[KUBE_CONTINUE_MAX * 3], why[ERROR_MSG_MAX];
	struct error e = {0};
	struct kube_req *r;
	int n;

	c->need_list = true;
	if (!c->list_continue[0])
		list_items_clear(c);
	if (kube_token_refresh(c, &e) < 0) {
		snprintf(why, sizeof(why), "list pods: %.960s", e.msg);
		fail(c, why, 0);
		return;
	}
	if (!kube_url_escape(node, sizeof(node), c->node)) {
		fail(c, "list pods: node name too long", 0);
		return;
	}
	if (c->list_continue[0]) {
		if (!kube_url_escape(cont, sizeof(cont), c->list_continue)) {
			fail(c, "list pods: continue token too long", 0);
			return;
		}
		n = snprintf(url, sizeof(url), "%s/api/v1/pods?fieldSelector=spec.nodeName%%3D%s&limit=%u&continue=%s",
		             c->base_url, node, c->page_limit, cont);
	} else {
		/* resourceVersion=0: served from the API server's watch cache, not
		 * etcd (what thousands of agents relisting at once need); a
		 * quorum read only when the cache could not serve us */
		n = snprintf(url, sizeof(url), "%s/api/v1/pods?fieldSelector=spec.nodeName%%3D%s&limit=%u%s",
		             c->base_url, node, c->page_limit, c->list_consistent ? "" : "&resourceVersion=0");
	}
	if (n < 0 || (size_t)n >= sizeof(url)) {
		fail(c, "list pods: URL too long", 0);
		return;
	}
	r = kube_req_new(KUBE_REQ_LIST, c->opts.max_page_bytes);
	if (!r) {
		fail(c, "list pods: out of memory", 0);
		return;
	}
	r->owner = c;
	r->done = list_done;
	if (kube_req_setup(c, r, url, &e) < 0 ||
	    curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, kube_req_body_cb) != CURLE_OK ||
	    curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r) != CURLE_OK ||
	    curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, (long)c->opts.request_timeout_ms) != CURLE_OK ||
	    curl_easy_setopt(r->easy, CURLOPT_ACCEPT_ENCODING, "gzip") != CURLE_OK ||
	    kube_http_add(c->http, r, &e) < 0) {
		snprintf(why, sizeof(why), "list pods: %.960s", e.msg[0] ? e.msg : "request setup failed");
		kube_req_free(r);
		fail(c, why, 0);
		return;
	}
	c->stream = r;
}

/* ---- WATCH ---- */

static int on_watch_event(const cJSON *obj, const char *line, size_t len, void *userdata)
{
	struct kube_client *c = userdata;
	struct kube_event ev;
	struct error e = {0};

	if (kube_event_decode(obj, &ev, &e) < 0) {
		c->stats.events_bad++;
		kube_scrub(c, e.msg, sizeof(e.msg));
		if (c->stream_bad++ < KUBE_BAD_LOG_PER_STREAM)
			log_msg(LOG_LVL_WARN, "kube: watch event skipped; relisting", "error", e.msg, NULL);
		/* the object it was about may now be stale in the cache: the
		 * events after it are covered by the relist */
		c->stream_stop = STREAM_RESYNC;
		str_copy(c->resync_why, sizeof(c->resync_why), e.msg);
		return -ECANCELED;
	}
	switch (ev.type) {
	case KUBE_EVENT_ADDED:
	case KUBE_EVENT_MODIFIED:
	case KUBE_EVENT_DELETED:
		str_copy(c->rv, sizeof(c->rv), ev.resource_version);
		c->stats.events_in++;
		c->stream_items++;
		if (c->ops.watch_event)
			c->ops.watch_event(c->ud, ev.type, &ev.pod);
		break;
	case KUBE_EVENT_BOOKMARK:
		str_copy(c->rv, sizeof(c->rv), ev.resource_version);
		c->stats.bookmarks++;
		c->stream_items++;
		break;
	case KUBE_EVENT_EXPIRED:
	case KUBE_EVENT_ERROR:
		c->stream_stop = ev.type == KUBE_EVENT_EXPIRED ? STREAM_EXPIRED : STREAM_ERROR;
		c->stream_status = ev.status;
		kube_event_done(&ev);
		return -ECANCELED;
	default:
		break;
	}
	kube_event_done(&ev);
	return 0;
}

static void on_watch_error(const struct error *err, void *userdata)
{
	struct kube_client *c = userdata;
	char msg[ERROR_MSG_MAX];

	if (err->errnum == EMSGSIZE || err->errnum == ENOMEM)
		c->stats.events_oversized++;
	else
		c->stats.events_bad++;
	snprintf(msg, sizeof(msg), "%s", err->msg);
	kube_scrub(c, msg, sizeof(msg));
	if (c->stream_bad++ < KUBE_BAD_LOG_PER_STREAM)
		log_msg(LOG_LVL_WARN, "kube: watch event skipped; relisting", "error", msg, NULL);
	/* A live stream lost an event we cannot name (an object near the API
	 * server's size limit, say): relist rather than keep a stale cache.
	 * A partial event at the end of a stream (c->stream already NULL) is
	 * not lost: the watch resumes before it. */
	if (c->stream && c->stream_stop == STREAM_GO) {
		c->stream_stop = STREAM_RESYNC;
		str_copy(c->resync_why, sizeof(c->resync_why), msg);
	}
}

static size_t watch_body_cb(char *data, size_t size, size_t n, void *userdata)
{
	struct kube_req *r = userdata;
	struct kube_client *c = r->owner;
	size_t len = size * n;

	if (r->status != 200) {
		/* an error answer: keep (bounded) for its Status */
		if (!kube_req_body_append(r, data, len))
			return 0;
		return len;
	}
	c->last_byte_usec = now_usec(c);
	if (c->stream_stop != STREAM_GO)
		return 0;
	if (watch_framer_feed(c->framer, data, len) < 0 || c->stream_stop != STREAM_GO)
		return 0; /* stop the transfer (CURLE_WRITE_ERROR); stream_stop says why */
	return len;
}

static void stream_status_text(struct kube_client *c, const char *what, char *buf, size_t size)
{
	snprintf(buf, size, "%s: ERROR event: %d %s: %s", what, c->stream_status.code, c->stream_status.reason,
	         c->stream_status.message);
	kube_scrub(c, buf, size);
}

static void watch_done(struct kube_req *r, CURLcode res)
{
	struct kube_client *c = r->owner;
	uint64_t now = now_usec(c), lived = now - c->stream_start_usec;
	bool healthy;
	char why[ERROR_MSG_MAX];

	c->stream = NULL;
	stall_disarm(c);
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);
	if (r->status == 200) {
		if (res == CURLE_OK && c->stream_stop == STREAM_GO)
			(void)watch_framer_finish(c->framer); /* a last event without newline */
		else
			watch_framer_reset(c->framer); /* a partial event is dropped: the rv is before it */
		healthy = c->stream_items > 0 || lived >= (uint64_t)c->opts.healthy_stream_ms * USEC_PER_MSEC;
		if (healthy)
			c->attempt = 0;
		if (c->stream_stop == STREAM_EXPIRED) {
			stream_status_text(c, "watch pods", why, sizeof(why));
			kube_req_free(r);
			c->stats.expired++;
			/* the cache behind resourceVersion=0 was too old for
			 * its own list: the next one reads from etcd */
			if (c->stream_after_list && c->stream_items == 0)
				c->list_consistent = true;
			relist_soon(c, why);
			return;
		}
		if (c->stream_stop == STREAM_RESYNC) {
			snprintf(why, sizeof(why), "watch pods: event skipped: %.900s", c->resync_why);
			kube_req_free(r);
			c->stats.resyncs++;
			/* only a quorum read is sure to be newer than the lost event */
			c->list_consistent = true;
			relist_soon(c, why);
			return;
		}
		if (c->stream_stop == STREAM_ERROR) {
			stream_status_text(c, "watch pods", why, sizeof(why));
			kube_req_free(r);
			fail(c, why, 0);
			return;
		}
		if (res == CURLE_OK) {
			kube_req_free(r);
			c->stats.watch_ends++;
			if (c->stream_items == 0 && lived < KUBE_SHORT_STREAM_USEC) {
				fail(c, "watch pods: the server ended the stream at once", 0);
				return;
			}
			/* timeoutSeconds: resume at once, not a failure */
			c->watch_after_list = false;
			watch_start(c);
			return;
		}
		snprintf(why, sizeof(why), "watch pods: stream broken: %s",
		         r->errbuf[0] ? r->errbuf : curl_easy_strerror(res));
		kube_req_free(r);
		fail(c, why, 0);
		return;
	}
	if (res != CURLE_OK && r->status == 0) {
		snprintf(why, sizeof(why), "watch pods: %s", r->errbuf[0] ? r->errbuf : curl_easy_strerror(res));
		kube_req_free(r);
		fail(c, why, 0);
		return;
	}
	c->stats.http_errors++;
	kube_describe_http_error(c, r, "watch pods", why, sizeof(why));
	if (r->status == 410) {
		kube_req_free(r);
		c->stats.expired++;
		if (c->stream_after_list)
			c->list_consistent = true;
		relist_soon(c, why);
		return;
	}
	if (r->status == 401)
		c->stats.unauthorized++;
	{
		long ra = (r->status == 429 || r->status >= 500) ? kube_req_retry_after_s(r) : 0;
		kube_req_free(r);
		fail(c, why, ra);
	}
}

static int on_stall(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct kube_client *c = userdata;
	uint64_t limit = (uint64_t)c->opts.stall_timeout_ms * USEC_PER_MSEC, now = now_usec(c);
	char why[128];

	if (!c->stream || c->stream->kind != KUBE_REQ_WATCH)
		return 0;
	if (now - c->last_byte_usec < limit) {
		(void)sd_event_source_set_time(s, c->last_byte_usec + limit);
		(void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
		return 0;
	}
	kube_req_free(c->stream);
	c->stream = NULL;
	watch_framer_reset(c->framer);
	c->stats.stalls++;
	snprintf(why, sizeof(why), "watch pods: stalled: no data for %u ms", c->opts.stall_timeout_ms);
	fail(c, why, 0);
	return 0;
}

static void stall_arm(struct kube_client *c)
{
	uint64_t when;

	if (!c->opts.stall_timeout_ms)
		return;
	when = c->last_byte_usec + (uint64_t)c->opts.stall_timeout_ms * USEC_PER_MSEC;
	if (!c->stall_timer) {
		if (sd_event_add_time(c->loop, &c->stall_timer, CLOCK_MONOTONIC, when, 10000, on_stall, c) < 0)
			return;
		(void)sd_event_source_set_description(c->stall_timer, "kube-stall");
	} else {
		(void)sd_event_source_set_time(c->stall_timer, when);
	}
	(void)sd_event_source_set_enabled(c->stall_timer, SD_EVENT_ONESHOT);
}

static void watch_start(struct kube_client *c)
{
	char url[KUBE_URL_MAX], node[KUBE_NAME_MAX * 3], why[ERROR_MSG_MAX];
	uint32_t span = c->opts.watch_timeout_max_s - c->opts.watch_timeout_min_s;
	uint32_t timeout_s = c->opts.watch_timeout_min_s + (uint32_t)(kube_rand(c) % ((uint64_t)span + 1));
	struct error e = {0};
	struct kube_req *r;
	int n;

	if (kube_token_refresh(c, &e) < 0) {
		snprintf(why, sizeof(why), "watch pods: %.960s", e.msg);
		fail(c, why, 0);
		return;
	}
	if (!kube_url_escape(node, sizeof(node), c->node)) {
		fail(c, "watch pods: node name too long", 0);
		return;
	}
	/* c->rv comes from the decoder, which accepts URL-safe characters only */
	n = snprintf(url, sizeof(url),
	             "%s/api/v1/pods?watch=1&fieldSelector=spec.nodeName%%3D%s&resourceVersion=%s"
	             "&allowWatchBookmarks=true&timeoutSeconds=%u",
	             c->base_url, node, c->rv, timeout_s);
	if (n < 0 || (size_t)n >= sizeof(url)) {
		fail(c, "watch pods: URL too long", 0);
		return;
	}
	r = kube_req_new(KUBE_REQ_WATCH, KUBE_ERROR_BODY_MAX);
	if (!r) {
		fail(c, "watch pods: out of memory", 0);
		return;
	}
	r->owner = c;
	r->done = watch_done;
	watch_framer_reset(c->framer);
	c->stream_items = 0;
	c->stream_bad = 0;
	c->stream_open = false;
	c->stream_stop = STREAM_GO;
	memset(&c->stream_status, 0, sizeof(c->stream_status));
	c->stream_start_usec = c->last_byte_usec = now_usec(c);
	if (kube_req_setup(c, r, url, &e) < 0 ||
	    curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, watch_body_cb) != CURLE_OK ||
	    curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r) != CURLE_OK ||
	    /* a belt to the server's timeoutSeconds */
	    curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, (long)(timeout_s + 60) * 1000L) != CURLE_OK ||
	    kube_http_add(c->http, r, &e) < 0) {
		snprintf(why, sizeof(why), "watch pods: %.960s", e.msg[0] ? e.msg : "request setup failed");
		kube_req_free(r);
		fail(c, why, 0);
		return;
	}
	c->stream = r;
	c->stats.watches++;
	if (!c->watch_after_list)
		c->stats.reconnects++;
	c->stream_after_list = c->watch_after_list;
	c->watch_after_list = false;
	stall_arm(c);
}

/* ---- public API ---- */

static char *memdup_secret(const char *p, size_t len)
{
	char *d;

	if (!p)
		return NULL;
	d = malloc(len + 1);
	if (!d)
		return NULL;
	memcpy(d, p, len);
	d[len] = '\0';
	return d;
}

static void wipe_free(char *p, size_t len)
{
	if (!p)
		return;
	explicit_bzero(p, len);
	free(p);
}

/* "https://host[:port][/path]" with tls-server-name: connect to host:port,
 * but ask for (SNI) and verify the certificate against name. */
static int setup_server(struct kube_client *c, const struct kube_client_config *cfg, struct error *err)
{
	const char *s = cfg->server, *host, *host_end, *p;
	char hostbuf[KUBE_SERVER_MAX], portbuf[16] = "443", connect_to[KUBE_SERVER_MAX + KUBE_CONFIG_NAME_MAX + 32];
	size_t len = strlen(s);
	int n;

	if (strncmp(s, "https://", 8) != 0)
		return error_set(err, EINVAL, "kube client: server %s: only https:// is supported", s);
	while (len > 8 && s[len - 1] == '/')
		len--;
	if (!cfg->tls_server_name[0]) {
		if (len >= sizeof(c->base_url))
			return error_set(err, ENAMETOOLONG, "kube client: server URL too long");
		memcpy(c->base_url, s, len);
		c->base_url[len] = '\0';
		return 0;
	}
	host = s + 8;
	if (*host == '[') {
		host_end = strchr(host, ']');
		if (!host_end)
			return error_set(err, EINVAL, "kube client: server %s: unterminated IPv6 address", s);
		host_end++;
	} else {
		host_end = host + strcspn(host, ":/");
	}
	if ((size_t)(host_end - host) >= sizeof(hostbuf) || host_end == host)
		return error_set(err, EINVAL, "kube client: server %s: bad host", s);
	memcpy(hostbuf, host, (size_t)(host_end - host));
	hostbuf[host_end - host] = '\0';
	p = host_end;
	if (*p == ':') {
		size_t pl = strcspn(p + 1, "/");
		if (pl == 0 || pl >= sizeof(portbuf))
			return error_set(err, EINVAL, "kube client: server %s: bad port", s);
		memcpy(portbuf, p + 1, pl);
		portbuf[pl] = '\0';
		p += 1 + pl;
	}
	n = snprintf(c->base_url, sizeof(c->base_url), "https://%s:%s%.*s", cfg->tls_server_name, portbuf,
	             (int)(s + len - p), p);
	if (n < 0 || (size_t)n >= sizeof(c->base_url))
		return error_set(err, ENAMETOOLONG, "kube client: server URL too long");
	snprintf(connect_to, sizeof(connect_to), "%s:%s:%s:%s", cfg->tls_server_name, portbuf, hostbuf, portbuf);
	c->connect_to = curl_slist_append(NULL, connect_to);
	if (!c->connect_to)
		return error_set(err, ENOMEM, "kube client: out of memory");
	return 0;
}

static int options_check(const struct kube_client_options *o, struct error *err)
{
	if (o->page_limit == 0)
		return error_set(err, EINVAL, "kube client: page_limit must be > 0");
	if (o->watch_timeout_min_s == 0 || o->watch_timeout_min_s > o->watch_timeout_max_s)
		return error_set(err, EINVAL, "kube client: watch timeout range %u..%u is invalid",
		                 o->watch_timeout_min_s, o->watch_timeout_max_s);
	if (o->backoff_base_ms == 0 || o->backoff_cap_ms < o->backoff_base_ms)
		return error_set(err, EINVAL, "kube client: backoff %u..%u ms is invalid", o->backoff_base_ms,
		                 o->backoff_cap_ms);
	if (o->max_page_bytes < 4096)
		return error_set(err, EINVAL, "kube client: max_page_bytes %zu is too small", o->max_page_bytes);
	if (o->event_queue_max == 0 || o->event_attempts_max == 0)
		return error_set(err, EINVAL, "kube client: event_queue_max and event_attempts_max must be > 0");
	return 0;
}

int kube_client_new(sd_event *loop, const struct kube_client_config *cfg, const char *node_name,
                    const struct kube_client_ops *ops, void *ud, struct kube_client **ret, struct error *err)
{
	struct kube_client_options o;

	kube_client_options_default(&o);
	return kube_client_new_with_options(loop, cfg, node_name, &o, ops, ud, ret, err);
}

int kube_client_new_with_options(sd_event *loop, const struct kube_client_config *cfg, const char *node_name,
                                 const struct kube_client_options *opts, const struct kube_client_ops *ops, void *ud,
                                 struct kube_client **ret, struct error *err)
{
	static bool curl_ready;
	struct kube_client *c;
	int r;

	if (!loop || !cfg || !node_name || !ops || !opts || !ret)
		return error_set(err, EINVAL, "kube client: missing argument");
	if (!k8s_node_name_valid(node_name))
		return error_set(err, EINVAL, "kube client: node name \"%.64s\" is not a DNS subdomain", node_name);
	r = options_check(opts, err);
	if (r < 0)
		return r;
	if (cfg->insecure_skip_tls_verify && !opts->allow_insecure)
		return error_set(err, EPERM,
		                 "kube client: %s: insecure-skip-tls-verify is set; refusing to talk to the API server "
		                 "without verifying its certificate (give it a CA)",
		                 cfg->server);
	if (!curl_ready) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			return error_set(err, EIO, "kube client: curl_global_init failed");
		curl_ready = true;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return error_set(err, ENOMEM, "kube client: out of memory");
	c->loop = sd_event_ref(loop);
	c->ops = *ops;
	c->ud = ud;
	c->opts = *opts;
	c->page_limit = opts->page_limit;
	str_copy(c->node, sizeof(c->node), node_name);
	if (getrandom(&c->rng, sizeof(c->rng), GRND_NONBLOCK) != (ssize_t)sizeof(c->rng) || !c->rng)
		c->rng = 0x9E3779B97F4A7C15ULL ^ (uint64_t)getpid() ^ (uint64_t)(uintptr_t)c;

	r = setup_server(c, cfg, err);
	if (r < 0)
		goto fail;
	str_copy(c->ca_file, sizeof(c->ca_file), cfg->ca_file);
	str_copy(c->cert_file, sizeof(c->cert_file), cfg->cert_file);
	str_copy(c->key_file, sizeof(c->key_file), cfg->key_file);
	str_copy(c->proxy_url, sizeof(c->proxy_url), cfg->proxy_url);
	str_copy(c->token_file, sizeof(c->token_file), cfg->token_file);
	c->insecure = cfg->insecure_skip_tls_verify;
	if ((cfg->ca_pem && !(c->ca_pem = memdup_secret(cfg->ca_pem, cfg->ca_pem_len))) ||
	    (cfg->cert_pem && !(c->cert_pem = memdup_secret(cfg->cert_pem, cfg->cert_pem_len))) ||
	    (cfg->key_pem && !(c->key_pem = memdup_secret(cfg->key_pem, cfg->key_pem_len))) ||
	    (cfg->token && !(c->token = strdup(cfg->token)))) {
		r = error_set(err, ENOMEM, "kube client: out of memory");
		goto fail;
	}
	c->ca_pem_len = cfg->ca_pem_len;
	c->cert_pem_len = cfg->cert_pem_len;
	c->key_pem_len = cfg->key_pem_len;
	if (c->insecure)
		log_msg(LOG_LVL_WARN,
		        "kube: INSECURE: the API server's certificate is NOT verified (insecure-skip-tls-verify, "
		        "allowed by configuration); anyone on the path can impersonate it",
		        "server", cfg->server, NULL);

	r = kube_http_new(loop, &c->http, err);
	if (r < 0)
		goto fail;
	r = watch_framer_new(opts->max_event_bytes, on_watch_event, on_watch_error, c, &c->framer, err);
	if (r < 0)
		goto fail;
	*ret = c;
	return 0;
fail:
	kube_client_free(c);
	return r;
}

int kube_client_start(struct kube_client *c)
{
	int r;

	if (!c)
		return -EINVAL;
	if (c->started)
		return -EALREADY;
	r = sd_event_add_time(c->loop, &c->retry_timer, CLOCK_MONOTONIC, UINT64_MAX, 1000, on_retry, c);
	if (r < 0)
		return r;
	(void)sd_event_source_set_enabled(c->retry_timer, SD_EVENT_OFF);
	(void)sd_event_source_set_description(c->retry_timer, "kube-retry");
	c->started = true;
	c->need_list = true;
	list_start(c);
	return 0;
}

void kube_client_free(struct kube_client *c)
{
	if (!c)
		return;
	kube_req_free(c->stream);
	c->stream = NULL;
	if (c->events_free)
		c->events_free(c);
	sd_event_source_disable_unref(c->retry_timer);
	sd_event_source_disable_unref(c->stall_timer);
	kube_http_free(c->http);
	if (c->framer)
		watch_framer_free(c->framer);
	list_items_clear(c);
	curl_slist_free_all(c->connect_to);
	wipe_free(c->ca_pem, c->ca_pem_len);
	wipe_free(c->cert_pem, c->cert_pem_len);
	wipe_free(c->key_pem, c->key_pem_len);
	if (c->token)
		wipe_free(c->token, strlen(c->token));
	sd_event_unref(c->loop);
	free(c);
}

void kube_client_get_stats(const struct kube_client *c, struct kube_client_stats *ret)
{
	*ret = c->stats;
	kube_http_get_durations(c->http, ret->request_seconds);
}

const char *kube_client_resource_version(const struct kube_client *c)
{
	return c->rv;
}

bool kube_client_connected(const struct kube_client *c)
{
	return c->connected;
}
