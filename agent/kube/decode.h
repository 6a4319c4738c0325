/* decode.h — decoding of Kubernetes API objects the agent reads: one watch
 * event ({"type","object"}) into a struct kube_event, a Pod into a compact
 * struct kube_pod (only what aiqos needs), and a PodList for the initial LIST.
 * Pure and strict: input is hostile, every error names the field and value. */
#ifndef AIQOS_AGENT_KUBE_DECODE_H
#define AIQOS_AGENT_KUBE_DECODE_H

#include <netinet/in.h>

#include "error.h"
#include "k8s.h"

struct cJSON;

/* buffers for Kubernetes' identifiers (shared/k8s.h), NUL included */
#define KUBE_NAMESPACE_MAX      (K8S_DNS_LABEL_MAX + 1)     /* 64 */
#define KUBE_NAME_MAX           (K8S_DNS_SUBDOMAIN_MAX + 1) /* 254 */
#define KUBE_UID_MAX            (K8S_UID_MAX + 1)           /* 64 */
#define KUBE_RV_MAX             64                          /* resourceVersion; opaque, URL-safe characters only */
#define KUBE_CONTINUE_MAX       2048
#define KUBE_REASON_MAX         64
#define KUBE_STATUS_MSG_MAX     512
#define KUBE_POD_IPS_MAX        4
#define KUBE_POD_WARN_MAX       4
#define KUBE_POD_WARN_LEN       192
#define KUBE_ANNOT_KEY_MAX      256  /* longer keys cannot be ours; they are only counted */
#define KUBE_ANNOT_VALUE_MAX    4096 /* a kept annotation with a longer value is dropped + warning */
#define KUBE_POD_GPU_MAX        1024 /* per pod; larger requests are rejected as nonsense */
#define KUBE_POD_LIST_ITEMS_MAX 4096

enum kube_event_type {
	KUBE_EVENT_ADDED,
	KUBE_EVENT_MODIFIED,
	KUBE_EVENT_DELETED,
	KUBE_EVENT_BOOKMARK,
	KUBE_EVENT_ERROR,   /* a Status other than 410: log, reconnect with backoff */
	KUBE_EVENT_EXPIRED, /* an ERROR event with Status code 410 (Expired/Gone): relist */
	_KUBE_EVENT_MAX,
	_KUBE_EVENT_INVALID = -1,
};

enum kube_pod_phase {
	KUBE_POD_PHASE_UNSET, /* status.phase absent */
	KUBE_POD_PHASE_PENDING,
	KUBE_POD_PHASE_RUNNING,
	KUBE_POD_PHASE_SUCCEEDED,
	KUBE_POD_PHASE_FAILED,
	KUBE_POD_PHASE_UNKNOWN, /* "Unknown", or a value this version does not know (+ warning) */
	_KUBE_POD_PHASE_MAX,
	_KUBE_POD_PHASE_INVALID = -1,
};

struct kube_ip {
	int family; /* AF_INET or AF_INET6 */
	union {
		struct in_addr v4;
		struct in6_addr v6;
	} addr;
};

/* Identity fields (namespace, name, uid, resourceVersion) are required and
 * validated: a pod without them fails to decode. Everything else is best
 * effort: a wrong type or bad value leaves the field at its default and adds a
 * warning (bounded; n_warn counts all, at most KUBE_POD_WARN_MAX are kept). */
struct kube_pod {
	char namespace_[KUBE_NAMESPACE_MAX];
	char name[KUBE_NAME_MAX];
	char uid[KUBE_UID_MAX];
	char resource_version[KUBE_RV_MAX];
	char node_name[KUBE_NAME_MAX]; /* "" = not scheduled */
	enum kube_pod_phase phase;
	bool deleting;     /* metadata.deletionTimestamp is set */
	bool host_network; /* spec.hostNetwork */
	/* Owned; only the annotations aiqos reads (ai.workload, ai.workload/profile,
	 * kubernetes.io/{ingress,egress}-bandwidth), values verbatim; NULL if none.
	 * Suitable for workload_from_annotations(). */
	struct cJSON *annotations;
	unsigned n_annotations_other; /* annotations present but not kept */
	/* status.podIPs (then status.podIP), deduplicated, in API order */
	unsigned n_ips;
	struct kube_ip ips[KUBE_POD_IPS_MAX];
	/* sum over spec.containers of nvidia.com/gpu + amd.com/gpu (requests, else limits) */
	uint32_t gpus;
	unsigned n_warn;
	char warn[KUBE_POD_WARN_MAX][KUBE_POD_WARN_LEN];
};

struct kube_status {
	int code;                          /* HTTP-like code, 0 if absent */
	char reason[KUBE_REASON_MAX];      /* e.g. "Expired"; control bytes replaced by '?' */
	char message[KUBE_STATUS_MSG_MAX]; /* truncated (on a UTF-8 boundary), control bytes replaced */
};

struct kube_event {
	enum kube_event_type type;
	struct kube_pod pod;                /* ADDED, MODIFIED, DELETED */
	char resource_version[KUBE_RV_MAX]; /* ADDED/MODIFIED/DELETED/BOOKMARK: the object's */
	struct kube_status status;          /* ERROR, EXPIRED */
};

struct kube_pod_list {
	char resource_version[KUBE_RV_MAX];     /* metadata.resourceVersion: start the WATCH here */
	char continue_token[KUBE_CONTINUE_MAX]; /* metadata.continue ("" = last page) */
	size_t n;
	struct kube_pod *items;
	/* items that failed to decode are skipped and counted; the first reason is kept */
	unsigned n_invalid;
	char first_invalid[ERROR_MSG_MAX];
};

const char *kube_event_type_name(enum kube_event_type t);
enum kube_event_type kube_event_type_from_name(const char *s); /* wire names only; _INVALID else */
const char *kube_pod_phase_name(enum kube_pod_phase p);

/* Decode one watch event object. On success *ret owns memory (kube_event_done);
 * on failure *ret is untouched and err says what and where, e.g.
 * "MODIFIED pod default/web: metadata.uid: missing". */
int kube_event_decode(const struct cJSON *obj, struct kube_event *ret, struct error *err);
/* The same from JSON text (len bytes, need not be NUL-terminated). */
int kube_event_decode_json(const char *data, size_t len, struct kube_event *ret, struct error *err);
void kube_event_done(struct kube_event *ev);

int kube_pod_decode(const struct cJSON *obj, struct kube_pod *ret, struct error *err);
void kube_pod_done(struct kube_pod *pod);
/* Move src into dst (dst must be done or fresh); src is left empty. */
void kube_pod_move(struct kube_pod *dst, struct kube_pod *src);

/* Decode a PodList (the LIST response). Invalid items are skipped (counted in
 * n_invalid); a missing metadata.resourceVersion or a non-list is an error. */
int kube_pod_list_decode(const struct cJSON *obj, struct kube_pod_list *ret, struct error *err);
int kube_pod_list_decode_json(const char *data, size_t len, struct kube_pod_list *ret, struct error *err);
void kube_pod_list_done(struct kube_pod_list *list);

/* Parse an integer count Kubernetes quantity ("2", "1k", "4e0", "2000m"):
 * must be a whole, non-negative number <= max. "2.5", "500m", "-1" are errors. */
int kube_quantity_parse_count(const char *s, uint64_t max, uint64_t *ret, struct error *err);

/* Format an address (inet_ntop) into buf (INET6_ADDRSTRLEN is enough). */
const char *kube_ip_format(const struct kube_ip *ip, char *buf, size_t size);

/* Render untrusted bytes for an error message: printable ASCII kept, '"' and
 * '\\' escaped, other bytes as \xNN; at most ~max_chars of input shown, then
 * "...". Always NUL-terminates dst (size > 0). Returns dst. */
char *kube_quote(char *dst, size_t size, const char *src, size_t len, size_t max_chars);

#endif
