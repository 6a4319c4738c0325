/* kube.h — the agent's Kubernetes API client: LIST then WATCH of the pods on
 * this node (bookmarks, 410 -> relist, reconnect with backoff + jitter,
 * Retry-After, stall detection) and Events on pods, all on one sd-event loop
 * through libcurl multi. TLS is always verified; the bearer token is re-read
 * from its file before every request and never appears in logs or errors. */
#ifndef AIQOS_AGENT_KUBE_H
#define AIQOS_AGENT_KUBE_H

#include <systemd/sd-event.h>

#include "error.h"
#include "kube/decode.h"
#include "kube/kubeconfig.h"
#include "metrics/metrics.h"

struct kube_client;

/* All callbacks run on the loop. They may call kube_post_pod_event() and the
 * getters, but must not free the client. */
struct kube_client_ops {
	/* initial LIST and every relist: begin -> pods... -> end. The consumer
	 * replaces its API view of the node's pods with exactly the pods delivered
	 * between begin and end. All pages are fetched before begin is called, so
	 * a failed page never leaves a half-delivered list. */
	void (*list_begin)(void *ud);
	void (*list_pod)(void *ud, const struct kube_pod *pod);
	void (*list_end)(void *ud);
	/* WATCH events after that: ADDED/MODIFIED/DELETED (BOOKMARK/ERROR handled inside) */
	void (*watch_event)(void *ud, enum kube_event_type type, const struct kube_pod *pod);
	/* connection state for health/readiness/metrics: connected = a watch
	 * stream is open (HTTP 200 received). why is human-readable, token-free. */
	void (*state)(void *ud, bool connected, const char *why);
};

struct kube_client_stats {
	uint64_t lists;            /* complete LISTs delivered (first + relists) */
	uint64_t relists;          /* LISTs after the first (410, lost position, skipped event) */
	uint64_t watches;          /* WATCH requests started */
	uint64_t reconnects;       /* WATCH requests that resumed from a kept resourceVersion */
	uint64_t events_in;        /* ADDED/MODIFIED/DELETED delivered */
	uint64_t events_bad;       /* skipped: malformed line or undecodable event */
	uint64_t events_oversized; /* skipped: over the per-event cap */
	uint64_t bookmarks;
	uint64_t http_errors;         /* non-2xx answers (list, watch, event) */
	uint64_t retry_after_waits;   /* waits taken from a Retry-After header */
	uint64_t events_posted;       /* Kubernetes Events created (POST) */
	uint64_t events_post_failed;  /* Events given up (non-retryable, or retries exhausted) */
	uint64_t events_post_dropped; /* Events dropped because the queue was full (oldest first) */
	/* additions */
	uint64_t events_patched;      /* repeated Events folded into an existing object (PATCH count) */
	uint64_t events_post_deduped; /* repeats coalesced into a still-queued Event */
	uint64_t resyncs;             /* relists forced by a skipped (oversized, undecodable) watch event */
	uint64_t list_pages;          /* LIST requests answered 200 */
	uint64_t list_items_bad;      /* LIST items that failed to decode (skipped) */
	uint64_t failures;            /* attempts that ended in a backoff wait */
	uint64_t stalls;              /* watch streams aborted for silence */
	uint64_t unauthorized;        /* 401 answers */
	uint64_t watch_ends;          /* watch streams the server ended cleanly (timeoutSeconds) */
	uint64_t expired;             /* 410 on a watch (in-stream ERROR or HTTP) */
	uint64_t token_reloads;       /* token file re-read with a changed token */
	/* request durations (metrics_buckets_api) by verb: [0] LIST pages,
	 * [1] WATCH (to the first response byte), [2] Event POST/PATCH */
	struct metrics_histogram request_seconds[3];
};

/* Tunables; kube_client_options_default() fills the production values. */
struct kube_client_options {
	/* act on insecure-skip-tls-verify (warned about loudly) instead of refusing it */
	bool allow_insecure;
	uint32_t page_limit;    /* LIST page size: 500 */
	size_t max_event_bytes; /* watch framer cap: WATCH_EVENT_MAX_DEFAULT (1 MiB) */
	size_t max_page_bytes;  /* LIST response cap: 16 MiB (an over-cap page is refetched with half the limit) */
	uint32_t watch_timeout_min_s; /* timeoutSeconds drawn from [min, max]: 300..600 */
	uint32_t watch_timeout_max_s;
	uint32_t backoff_base_ms;    /* full-jitter exponential backoff: 200 */
	uint32_t backoff_cap_ms;     /* 30000 */
	uint32_t retry_after_max_s;  /* Retry-After is honoured up to this: 120 */
	uint32_t relist_jitter_ms;   /* a relist after 410 waits uniform [0, this]: 2000 */
	uint32_t stall_timeout_ms;   /* no byte (not even a bookmark) for this long -> reconnect: 180000; 0 = off */
	uint32_t healthy_stream_ms;  /* a stream open this long resets the backoff: 10000 */
	uint32_t connect_timeout_ms; /* TCP + TLS: 10000 */
	uint32_t request_timeout_ms; /* LIST page and Event requests: 60000 */
	uint32_t event_queue_max;    /* queued Events: 256 (overflow drops the oldest) */
	uint32_t event_dedupe_s;     /* same (uid, reason, message) within this -> PATCH count: 600 */
	uint32_t event_attempts_max; /* tries per Event before it is given up: 6 */
};

void kube_client_options_default(struct kube_client_options *ret);

/* cfg is copied (secrets included); the caller may free it afterwards.
 * node_name: the node whose pods are watched (a DNS subdomain). Fails with
 * -EPERM if cfg says insecure-skip-tls-verify and allow_insecure is off, and
 * -EINVAL on bad input, err naming it. */
int kube_client_new(sd_event *loop, const struct kube_client_config *cfg, const char *node_name,
                    const struct kube_client_ops *ops, void *ud, struct kube_client **ret, struct error *err);
int kube_client_new_with_options(sd_event *loop, const struct kube_client_config *cfg, const char *node_name,
                                 const struct kube_client_options *opts, const struct kube_client_ops *ops, void *ud,
                                 struct kube_client **ret, struct error *err);
/* LIST then WATCH, forever, with backoff. Returns 0 or a negative errno
 * (already started: -EALREADY). Never blocks. */
int kube_client_start(struct kube_client *c);
/* Aborts whatever is in flight (queued Events are dropped), releases all. */
void kube_client_free(struct kube_client *c);
static inline void kube_client_freep(struct kube_client **c)
{
	if (*c)
		kube_client_free(*c);
}
#define _cleanup_kube_client_ _cleanup_(kube_client_freep)

void kube_client_get_stats(const struct kube_client *c, struct kube_client_stats *ret);
/* The resourceVersion the next WATCH resumes from ("" before the first LIST). */
const char *kube_client_resource_version(const struct kube_client *c);
bool kube_client_connected(const struct kube_client *c);

/* Kubernetes Event on a pod (core/v1 Event POST, async, bounded queue,
 * deduplicated: the same (pod uid, reason, message) within event_dedupe_s
 * increments count on the existing Event (PATCH) instead of a new object;
 * repeats while it is still queued are coalesced). message is truncated to
 * 1 KiB on a UTF-8 boundary. Returns 0 when queued, -EINVAL on bad input. */
enum kube_event_kind { KUBE_EV_NORMAL, KUBE_EV_WARNING };
#define KUBE_EVENT_MESSAGE_MAX 1024
#define KUBE_EVENT_REASON_MAX  128
int kube_post_pod_event(struct kube_client *c, const char *ns, const char *pod, const char *uid,
                        enum kube_event_kind kind, const char *reason, const char *message);
/* Events queued or in flight. */
unsigned kube_client_events_pending(const struct kube_client *c);

/* Full-jitter backoff: uniform in [0, min(cap, base * 2^attempt)] from rnd. */
uint64_t kube_backoff_ms(unsigned attempt, uint32_t base_ms, uint32_t cap_ms, uint64_t rnd);

#endif
