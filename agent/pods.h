/* pods.h — the pod cache (pods.c): the API view of this node's pods joined
 * with the plugin's attachment records, what each pod asks for, and the
 * node planner's input built from them. */
#ifndef AIQOS_AGENT_PODS_H
#define AIQOS_AGENT_PODS_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "kube/decode.h"
#include "node.h"
#include "pod_want.h"
#include "state.h"

struct cJSON;

#define AGENT_POD_FAILURE_MAX 256
#define AGENT_POD_KEY_MAX     (8 + KUBE_NAMESPACE_MAX + KUBE_NAME_MAX + STATE_ID_MAX)

enum pod_status {
	POD_UNTUNED,  /* no attachment known, or nothing to tune (class default, no limits) */
	POD_TUNED,    /* every attachment tuned as wanted */
	POD_DEGRADED, /* tuned, with fallbacks */
	POD_FAILED,   /* a re-tune (or the plugin's ADD) failed; retried with backoff */
	_POD_STATUS_MAX,
};

/* One plugin attachment (a state file), compact: the file is re-read when
 * the attachment is re-tuned or shown. */
struct agent_attach {
	char container_id[STATE_ID_MAX];
	char ifname[IFNAME_LEN];
	char host_ifname[IFNAME_LEN];
	int host_ifindex;
	char netns[STATE_PATH_MAX];
	char pod_namespace[KUBE_NAMESPACE_MAX];
	char pod_name[KUBE_NAME_MAX];
	char pod_uid[KUBE_UID_MAX];
	/* what it is tuned with (the record) */
	enum workload_class class;
	char profile[PROFILE_NAME_MAX];
	uint64_t profile_hash; /* profile_content_hash of the record's profileSpec, 0 = none recorded */
	uint64_t egress_bps;
	uint64_t ingress_bps;
	unsigned n_ips;
	struct node_ip ips[NODE_POD_IPS_MAX];
	bool marks;    /* its DSCP re-marking (dscp.v4 and dscp.v6) is in effect (trust.c) */
	bool failed;   /* the record carries a failure */
	bool degraded; /* some item fell back or was skipped */
	bool seen;     /* mark for a state dir rescan */
};

struct agent_pod {
	char key[AGENT_POD_KEY_MAX]; /* the UID, or "plugin:<ns>/<name>" for a plugin-only pod without one */
	char uid[KUBE_UID_MAX];
	char namespace_[KUBE_NAMESPACE_MAX];
	char name[KUBE_NAME_MAX];
	/* the API view */
	bool in_api;
	bool list_seen; /* mark during a relist */
	enum kube_pod_phase phase;
	bool deleting;
	bool host_network;
	struct cJSON *annotations; /* owned, NULL = none */
	unsigned n_ips;
	struct node_ip ips[NODE_POD_IPS_MAX];
	uint32_t gpus;
	struct pod_want want;
	char invalid_warned[WORKLOAD_WARN_LEN]; /* last InvalidWorkload posted */
	bool dscp_warned;                       /* DSCPNotTrusted posted (trust.c) */
	/* the plugin's attachments */
	unsigned n_att;
	unsigned cap_att;
	struct agent_attach *att;
	/* tuning */
	enum pod_status status;
	char failure[AGENT_POD_FAILURE_MAX]; /* the last re-tune failure, cut (the Event and log have it all) */
	bool dirty;                          /* re-check its attachments in the next pass */
	bool announce;                       /* post the outcome of the plugin's ADD as Events */
	unsigned retries;                    /* consecutive failures */
	int64_t retry_at_ms;                 /* -1 = none */
	bool netns_unreachable;              /* running, but its netns path cannot be opened here */
};

struct pod_cache {
	unsigned n;
	unsigned cap;
	struct agent_pod **v; /* sorted by key */
};

/* What an API update changed (pod_cache_api_upsert). */
enum {
	POD_CHANGED_TUNING = 1 << 0, /* class, profile or bandwidth: re-tune its attachments */
	POD_CHANGED_NODE = 1 << 1,   /* anything the node plan reads (class, IPs, GPUs, presence) */
	POD_CHANGED_NEW = 1 << 2,    /* first seen */
	POD_CHANGED_INVALID = 1 << 3 /* a new invalid ai.workload value to report */
};

void pod_cache_init(struct pod_cache *c);
void pod_cache_done(struct pod_cache *c);
struct agent_pod *pod_cache_find(const struct pod_cache *c, const char *key);
/* By UID when given, else (and as a fallback) by namespace/name. */
struct agent_pod *pod_cache_lookup(const struct pod_cache *c, const char *ns, const char *name, const char *uid);

/* The API view. A relist is begin, upserts, end; end drops the API view of
 * pods not delivered and returns how many. Upsert returns the entry (NULL
 * on ENOMEM) and the POD_CHANGED_* flags in *ret_changed. */
void pod_cache_list_begin(struct pod_cache *c);
struct agent_pod *pod_cache_api_upsert(struct pod_cache *c, const struct kube_pod *kp, const struct profile_set *set,
                                       unsigned *ret_changed);
unsigned pod_cache_list_end(struct pod_cache *c);
/* DELETED: the API view goes; the entry stays while attachments remain.
 * Returns true when the pod was known. */
bool pod_cache_api_delete(struct pod_cache *c, const char *uid);
/* Recompute every pod's want (config reload); returns how many changed. */
unsigned pod_cache_rewant(struct pod_cache *c, const struct profile_set *set);

/* Attachments, joined to their pod by UID, else namespace/name. */
void agent_attach_from_state(const struct attach_state *s, struct agent_attach *ret);
/* A record's choices (plan_choices_to_json) hold a degraded or skipped item. */
bool agent_choices_degraded(const struct cJSON *choices);
/* Insert or update; *ret_new says whether it was unknown. NULL on ENOMEM. */
struct agent_pod *pod_cache_attach_upsert(struct pod_cache *c, const struct agent_attach *a, bool *ret_new);
/* Returns the pod it belonged to (may have been freed when it was its last
 * reference: then NULL), *ret_found whether it existed. */
struct agent_pod *pod_cache_attach_remove(struct pod_cache *c, const char *container_id, const char *ifname,
                                          bool *ret_found);
/* Rescan of the state dir: mark, upsert what is there, sweep what is not
 * (returns the number removed). */
void pod_cache_attach_mark(struct pod_cache *c);
unsigned pod_cache_attach_sweep(struct pod_cache *c);
/* Free entries that have neither an API view nor attachments. */
void pod_cache_gc(struct pod_cache *c);

/* Does this attachment need a re-tune to match the pod's want? Only pods in
 * the API are re-tuned (the API is the truth; a plugin-only pod keeps what
 * the plugin found). */
bool pod_attach_needs_retune(const struct agent_pod *p, const struct agent_attach *a);
/* Class, profile (name and content), limits of the record are the pod's want. */
bool pod_attach_tuned_as_wanted(const struct agent_pod *p, const struct agent_attach *a);
/* Does the pod take part in the node plan? In the API (not finished, not
 * host-network), or plugin-only while the API view is not synced yet. */
bool pod_counts_for_node(const struct agent_pod *p, bool api_synced);
/* The class / IPs the node plan uses for a pod (API first, else attachments). */
enum workload_class pod_node_class(const struct agent_pod *p);
/* A pod as the node planner sees it (status shows the same view). */
void pod_node_pod(const struct agent_pod *p, struct node_pod *np);
/* Build the node planner's input: *ret (heap, caller frees) of *ret_n pods. */
int pod_cache_node_pods(const struct pod_cache *c, bool api_synced, struct node_pod **ret, unsigned *ret_n);
const char *pod_status_name(enum pod_status s);
/* The pod's status from its attachments' records and a pending retry. */
void pod_status_refresh(struct agent_pod *p);

#endif
