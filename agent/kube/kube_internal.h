/* kube_internal.h — shared between the API client's files (kube.c: list/watch,
 * events.c: Event POST, kube_http.c: libcurl multi on sd-event). Not for
 * other modules: they use kube.h. */
#ifndef AIQOS_AGENT_KUBE_INTERNAL_H
#define AIQOS_AGENT_KUBE_INTERNAL_H

#include <curl/curl.h>
#include <sys/queue.h>

#include "kube/kube.h"
#include "kube/watch.h"

/* ---- kube_http.c: libcurl multi driven by sd-event ---- */

struct kube_http;
struct kube_req;

typedef void (*kube_req_done_fn)(struct kube_req *r, CURLcode result);

enum kube_req_kind { KUBE_REQ_LIST, KUBE_REQ_WATCH, KUBE_REQ_EVENT, _KUBE_REQ_KIND_MAX };

/* One HTTP request. The body of a non-streaming answer (and the error body of
 * a streaming one) is collected in body, bounded by body_max. */
struct kube_req {
	enum kube_req_kind kind;
	CURL *easy;
	struct curl_slist *headers; /* may hold the token: wiped when freed */
	struct kube_http *http;
	bool active; /* in the multi handle */
	bool timed;  /* its duration is in the histogram (a WATCH: at its headers) */
	kube_req_done_fn done;
	void *owner;
	char *body;
	size_t body_len, body_cap, body_max;
	bool body_over;           /* body_max exceeded: the transfer was aborted */
	long status;              /* HTTP status, 0 until headers */
	char *upload;             /* request body (POST/PATCH), owned */
	const char *content_type; /* of upload; NULL = application/json */
	char errbuf[CURL_ERROR_SIZE];
};

int kube_http_new(sd_event *loop, struct kube_http **ret, struct error *err);
/* Every request still active is removed (not completed) first. */
void kube_http_free(struct kube_http *h);
/* Start r (its easy handle fully set up). done runs once, from the loop. */
int kube_http_add(struct kube_http *h, struct kube_req *r, struct error *err);
/* Record r's duration now (a WATCH whose headers came; the stream goes on). */
void kube_http_observe(struct kube_req *r);
/* Durations of the finished requests by kind (kube_client_stats.request_seconds). */
void kube_http_get_durations(const struct kube_http *h, struct metrics_histogram ret[_KUBE_REQ_KIND_MAX]);
/* Abort r if active (no done call). */
void kube_http_remove(struct kube_req *r);

/* Allocate a request with an easy handle; free with kube_req_free (removes it first). */
struct kube_req *kube_req_new(enum kube_req_kind kind, size_t body_max);
void kube_req_free(struct kube_req *r);
/* Append to r->body (bounded); false when over body_max. */
bool kube_req_body_append(struct kube_req *r, const void *data, size_t len);
/* CURLOPT_WRITEFUNCTION collecting into r->body (userdata r); aborts over body_max. */
size_t kube_req_body_cb(char *data, size_t size, size_t n, void *userdata);
/* Why the transfer of r failed with res: curl's message for it. */
const char *kube_req_error_text(const struct kube_req *r, CURLcode res);

/* ---- kube.c internals used by events.c ---- */

struct kube_evq_item;
TAILQ_HEAD(kube_evq_head, kube_evq_item);
struct kube_evrec;

struct kube_client {
	sd_event *loop;
	struct kube_http *http;
	struct kube_client_ops ops;
	void *ud;
	struct kube_client_options opts;
	char node[KUBE_NAME_MAX];

	/* connection */
	char base_url[KUBE_SERVER_MAX + KUBE_CONFIG_NAME_MAX + 16]; /* no trailing '/' */
	struct curl_slist *connect_to;                              /* tls-server-name: connect here instead */
	/* the caller's config, copied: TLS trust and client certificate, proxy,
	 * the bearer token (secret, NULL = none; replaced when its file rotates) */
	struct kube_client_config cfg;

	struct kube_client_stats stats;
	uint64_t rng;
	bool started;

	/* list/watch */
	struct kube_req *stream; /* the LIST page or WATCH in flight */
	sd_event_source *retry_timer;
	sd_event_source *stall_timer;
	char rv[KUBE_RV_MAX]; /* resume point; "" = LIST needed */
	bool need_list;
	bool list_consistent; /* next LIST without resourceVersion=0 (quorum read) */
	bool listed_once;
	char list_continue[KUBE_CONTINUE_MAX];
	char list_rv[KUBE_RV_MAX];
	struct kube_pod *list_items;
	size_t list_n, list_cap;
	uint32_t page_limit; /* current, halved when a page is over max_page_bytes */
	unsigned attempt;    /* consecutive failures */
	bool connected;
	char why[ERROR_MSG_MAX];
	/* the watch stream in flight */
	struct watch_framer *framer;
	uint64_t stream_start_usec, last_byte_usec;
	uint64_t stream_items;  /* events + bookmarks in this stream */
	unsigned stream_bad;    /* skipped events in this stream (for log rate limiting) */
	bool stream_after_list; /* this stream started right after a LIST */
	bool stream_open;       /* 200 seen */
	/* STREAM_RESYNC: an event was skipped (over the cap, undecodable): the
	 * cache may be stale for an object we cannot name, so relist */
	enum { STREAM_GO, STREAM_EXPIRED, STREAM_ERROR, STREAM_RESYNC } stream_stop;
	struct kube_status stream_status;
	char resync_why[ERROR_MSG_MAX]; /* the skipped event, for the log */
	bool watch_after_list;          /* the watch in flight follows a LIST (not a reconnect) */

	/* events (events.c): the queue is set up by the first Event posted,
	 * which also sets events_free; kube.c knows nothing else of Events */
	void (*events_free)(struct kube_client *c);
	struct kube_evq_head evq;
	unsigned evq_len;
	struct kube_evq_item *ev_inflight;
	struct kube_req *ev_req;
	sd_event_source *ev_timer;
	unsigned ev_backoff_attempt;
	struct kube_evrec *ev_recs;
	unsigned ev_n_recs;
};

/* Set up the common easy options (TLS, auth, timeouts) for url. */
int kube_req_setup(struct kube_client *c, struct kube_req *r, const char *url, struct error *err);
/* Arm the one-shot timer *s (created on first use, on the client's loop,
 * cb called with c) for when (CLOCK_MONOTONIC, usec). */
int kube_timer_arm(struct kube_client *c, sd_event_source **s, uint64_t when, uint64_t accuracy_usec,
                   sd_event_time_handler_t cb, const char *description);
/* Re-read the token file if there is one (before each request). */
int kube_token_refresh(struct kube_client *c, struct error *err);
/* Replace the token (and other secrets) in s (NUL-terminated, size bytes) by "<redacted>". */
void kube_scrub(const struct kube_client *c, char *s, size_t size);
uint64_t kube_rand(struct kube_client *c);
/* "HTTP 503 ServiceUnavailable: message" from a Status body, token-free */
void kube_describe_http_error(struct kube_client *c, const struct kube_req *r, const char *what, char *buf,
                              size_t size);
/* What an HTTP error answer asks of the next attempt: a 401 is counted
 * (stats.unauthorized); a 429 or 5xx returns its Retry-After in seconds
 * (0 = none: back off). */
long kube_req_error_wait_s(struct kube_client *c, const struct kube_req *r);
/* Percent-encode src (RFC 3986 unreserved kept). false if it does not fit. */
bool kube_url_escape(char *dst, size_t size, const char *src);

#endif
