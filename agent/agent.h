/* agent.h — the state of aiqos-agent and the internal API between its files:
 * the pod cache (pods.c: the API view of this node's pods joined with the
 * plugin's attachment records), the scheduler (sched.c: debounce, mixed hold,
 * retries, drift repair — pure, fake clock in tests), the uplink (uplink.c:
 * discovery, the original qdisc record, adoption), re-tuning (reconcile.c),
 * status/explain/metrics (status.c) and the sd-event loop (loop.c). One
 * thread owns all of it (the loop thread). */
#ifndef AIQOS_AGENT_H
#define AIQOS_AGENT_H

#include <stdint.h>

#include "config.h"
#include "node/downlink.h"
#include "records.h"
#include "error.h"
#include "kube/event.h"
#include "log.h"
#include "metrics/metrics.h"
#include "node.h"
#include "state.h"

struct cJSON;
struct nl_sock;
struct sd_event;
struct kube_client;
struct agent_server;
struct metrics_server;
struct metrics_writer;

#ifndef AIQOS_VERSION
#define AIQOS_VERSION "0.1.0"
#endif

#define AGENT_PROGRAM           "aiqos-agent"
#define AGENT_STATE_DIR_DEFAULT "/var/lib/aiqos"
#define AGENT_METRICS_DEFAULT   "127.0.0.1:9464"
#define AGENT_UPLINK_RECORD     "uplink.json" /* in the state dir */
/* how long a re-tune waits for the attachment lock (the plugin holds it for
 * about a millisecond per ADD/DEL) before it fails and backs off */
#define AGENT_LOCK_TIMEOUT_MS 200
#define AGENT_PATH_MAX        4096

#define AGENT_RETRY_MIN_MS     1000
#define AGENT_RETRY_MAX_MS     300000 /* 5 min */
#define AGENT_FAILURE_MAX      (ERROR_MSG_MAX + 128)
#define AGENT_RELOAD_SETTLE_MS 100 /* config/CNI dir writes settle before reading */
#define AGENT_STATUS_ITEMS_MAX 1024
#define AGENT_POD_FAILURE_MAX  256
#define AGENT_POD_KEY_MAX      (8 + KUBE_NAMESPACE_MAX + KUBE_NAME_MAX + STATE_ID_MAX)

/* ---- the pod cache (pods.c) ---- */

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

/* What the pod's annotations ask for (resolved against the config's profiles). */
struct pod_want {
	enum workload_class class;
	char profile_requested[PROFILE_NAME_MAX]; /* ai.workload/profile, "" = none */
	char profile[PROFILE_NAME_MAX];           /* resolved */
	uint64_t profile_hash;                    /* profile_content_hash of the resolved profile */
	uint64_t egress_bps;
	uint64_t ingress_bps;
	bool ce_marking;                 /* the profile sets a CE threshold (training-dctcp) */
	char invalid[WORKLOAD_WARN_LEN]; /* first annotation warning ("" = none) */
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
/* Build the node planner's input: *ret (heap, caller frees) of *ret_n pods. */
int pod_cache_node_pods(const struct pod_cache *c, bool api_synced, struct node_pod **ret, unsigned *ret_n);
const char *pod_status_name(enum pod_status s);
/* The pod's status from its attachments' records and a pending retry. */
void pod_status_refresh(struct agent_pod *p);

/* ---- the scheduler (sched.c): when the loop has work to do ---- */

enum {
	SCHED_PASS = 1 << 0,  /* debounced pod/node work */
	SCHED_HOLD = 1 << 1,  /* the mixed hold may have ended: node pass */
	SCHED_RETRY = 1 << 2, /* a failed re-tune is due again */
	SCHED_DRIFT = 1 << 3, /* periodic drift repair */
};

struct agent_sched {
	uint32_t debounce_ms;
	uint32_t drift_ms;    /* 0 = off */
	int64_t pass_due_ms;  /* -1 = nothing pending */
	int64_t hold_due_ms;  /* -1 = none */
	int64_t retry_due_ms; /* -1 = none */
	int64_t drift_due_ms; /* -1 = off */
};

void sched_init(struct agent_sched *s, uint32_t debounce_ms, uint32_t drift_s, int64_t now_ms);
/* Something changed: run a pass debounce_ms after the first event of a
 * burst (later events of the burst do not push it back, so churn cannot
 * starve the pass). now = at once (debounce 0 or urgent). */
void sched_kick(struct agent_sched *s, int64_t now_ms);
void sched_kick_now(struct agent_sched *s, int64_t now_ms);
void sched_set_hold(struct agent_sched *s, int64_t due_ms); /* -1 = none */
void sched_set_retry(struct agent_sched *s, int64_t due_ms);
/* New debounce/drift settings (config reload). */
void sched_configure(struct agent_sched *s, uint32_t debounce_ms, uint32_t drift_s, int64_t now_ms);
/* The earliest deadline, -1 when idle. */
int64_t sched_next(const struct agent_sched *s);
/* What is due at now (SCHED_* bits); clears those deadlines (drift is
 * re-armed one period later). */
unsigned sched_take_due(struct agent_sched *s, int64_t now_ms);
/* Exponential backoff for the n-th consecutive failure (1-based):
 * AGENT_RETRY_MIN_MS * 2^(n-1), at most AGENT_RETRY_MAX_MS, jitter_pm
 * (0..1000) of up to +25 % added. */
int64_t sched_backoff_ms(unsigned n, unsigned jitter_pm);

/* ---- the uplink (uplink.c) ---- */

/* The uplink's root qdisc before aiqos, recorded in <stateDir>/uplink.json
 * before the first change and restored on idle and --cleanup. */
/* A child qdisc of a recorded mq root (a queue's qdisc someone grafted),
 * options as the kind's own encoder makes them. */
#define UPLINK_CHILDREN_MAX      256
#define UPLINK_CHILD_OPTIONS_MAX 256
struct uplink_child {
	char kind[16];
	uint32_t parent;
	uint32_t handle;
	size_t options_len;
	uint8_t options[UPLINK_CHILD_OPTIONS_MAX];
};

struct uplink_record {
	char ifname[IFNAME_LEN];
	int ifindex;
	char kind[16];
	uint32_t handle;
	bool is_default; /* handle 0:, attached by the kernel: deleting ours brings it back */
	size_t options_len;
	uint8_t options[1024];
	char rendered[TC_FORMAT_MAX];
	int64_t recorded_unix;
	/* the mode in force, for the hold after a restart */
	enum node_mode mode;
	int64_t mode_since_unix;
	/* the rest of the original tree (an mq root's grafted children) and
	 * whether a clsact/ingress qdisc was there (then it is never deleted) */
	unsigned n_children;
	struct uplink_child children[UPLINK_CHILDREN_MAX];
	bool clsact_before;
};

struct uplink {
	char ifname[IFNAME_LEN]; /* "" = not found */
	int ifindex;
	char kind[16];
	struct uplink_facts facts;
	bool have_record;
	struct uplink_record record;
};

/* Find the uplink: a name, or "auto" = the device of the default route
 * (IPv4, else IPv6; the lowest metric). Speed from
 * /sys/class/net/<if>/speed (checked against the ifindex, so a sysfs of
 * another netns is not believed), virtual from the link kind or an unknown
 * speed. -ENODEV (err says why) when there is none. */
int uplink_discover(struct nl_sock *sk, const char *want, struct uplink *ret, struct error *err);
/* The default route's device of a family: ifindex or -ENOENT. */
int uplink_default_route(struct nl_sock *sk, int family, int *ret_ifindex, struct error *err);

int uplink_record_path(const char *state_dir, char *buf, size_t size);
/* -ENOENT when there is no record. */
int uplink_record_load(const char *path, struct uplink_record *ret, struct error *err);
int uplink_record_save(const char *path, const struct uplink_record *r, struct error *err);
int uplink_record_remove(const char *path, struct error *err);
struct cJSON *uplink_record_to_json(const struct uplink_record *r);
int uplink_record_from_json(const struct cJSON *j, struct uplink_record *ret, struct error *err);
/* Read the uplink's original tree into a record: the root qdisc, an mq
 * root's grafted children and whether a clsact was there; options of kinds
 * aiqos knows are re-encoded by the kind's encoder (what the kernel accepts
 * on create). A tree aiqos cannot re-create whole — classes, filters or
 * qdiscs under a classful root (an operator's HTB tree), or a child of a kind
 * aiqos does not know — is foreign: -EEXIST, err says what is there, and
 * nothing is recorded (the agent then leaves the uplink alone). */
int uplink_record_capture(struct nl_sock *sk, int ifindex, const char *ifname, struct uplink_record *ret,
                          struct error *err);
/* Put the recorded tree back: delete our classifier filter (and the clsact
 * unless one was there before), delete our root (ours_root: the qdisc item
 * in force; NULL = delete whatever root has handle 1:), then, unless it was
 * the kernel's default, re-create the recorded root and its children. */
int uplink_restore(struct nl_sock *sk, int ifindex, const struct uplink_record *r, const struct tc_spec *ours_root,
                   struct error *err);

/* Adoption and drift repair (pure): compare a node plan with what the
 * kernel has on the uplink. Items whose object is there and satisfies an
 * alternative get status APPLIED/DEGRADED and chosen (in place in plan);
 * others stay PENDING. *ret_orphans (heap, caller frees) lists indices into
 * dump of objects that are ours (filters at aiqos's prios on the root
 * qdisc, classes of the HTB tree under our root handle) but not in the plan,
 * or duplicates of a planned filter. Only when the root is ours
 * (root_is_ours) are classes and filters considered. Returns the number of
 * items found in force, or -ENOMEM. */
struct tc_dump_list;
int uplink_adopt_match(struct node_plan *plan, const struct tc_dump_list *dump, bool root_is_ours,
                       unsigned **ret_orphans, unsigned *ret_n_orphans);
/* From the kernel's src-ip filters, a plan holding the ids and node ids
 * they have for the current pods (node_plan's prev: an adopted filter keeps
 * its handle). */
int uplink_prev_from_dump(const struct tc_dump_list *dump, const struct node_pod *pods, unsigned n,
                          struct node_plan *ret);

/* ---- the agent ---- */

struct agent_options {
	const char *node_name;
	const char *kubeconfig;
	const char *config_path;
	const char *socket_path;
	const char *state_dir;
	const char *metrics_addr;
	const char *cni_conf_dir; /* NULL: no chaining/watch */
	const char *cni_bin_dir;
	const char *plugin_src;
	const char *plugin_conf;
	bool chain_dropin;
	bool chain_in_place;
	enum log_level log_level;
	bool once; /* one list + reconcile, then exit */
};

struct agent_counters {
	uint64_t retunes[2][3];                     /* [pod|node][ok|degraded|failed] */
	struct metrics_histogram retune_seconds[2]; /* [pod|node], metrics_buckets_retune */
	uint64_t config_reloads[2];                 /* [ok|failed] */
	uint64_t mode_changes;
	uint64_t drift_repairs; /* objects re-applied or removed by drift repair */
	uint64_t events_posted;
	uint64_t chain_runs[2]; /* [ok|failed] */
	uint64_t link_events;
	uint64_t state_rescans;
	uint64_t watch_events[_KUBE_EVENT_MAX];
	uint64_t api_lists;
};

enum { RETUNE_POD, RETUNE_NODE };
enum { RESULT_OK, RESULT_DEGRADED, RESULT_FAILED };

struct agent {
	struct agent_options opt;
	char config_path[AGENT_PATH_MAX];
	char state_dir[AGENT_PATH_MAX];
	char node_name[KUBE_NAME_MAX];

	/* config */
	struct agent_config cfg;
	int64_t config_loaded_unix;
	char config_error[ERROR_MSG_MAX]; /* last failed reload ("" = none) */

	/* pods */
	struct pod_cache pods;
	bool api_listed;    /* a LIST has completed since start */
	bool api_connected; /* a watch stream is open */
	char api_why[256];
	bool listing;
	struct agent_records records; /* records the plugin could not write (records.h) */

	/* the uplink */
	struct nl_sock *sk; /* rtnetlink in the agent's netns */
	struct uplink up;
	struct downlink down;  /* the download direction's ifb and hook (downlink.h) */
	bool up_adopted;       /* the kernel state has been read since the uplink was found */
	bool up_need_observe;  /* re-read the kernel (drift repair, after errors) */
	bool up_need_discover; /* links or routes changed */
	struct node_plan in_force;
	struct node_plan_info info;
	bool have_info;
	struct node_mode_state mode;
	int64_t mode_since_unix;
	struct plan_caps up_caps;
	struct plan_caps pod_caps;
	unsigned up_retries;
	int64_t up_retry_at_ms; /* -1 = none */
	char up_failure[AGENT_FAILURE_MAX];
	char classify_why[AGENT_FAILURE_MAX]; /* classify dscp not trusted: why ("" = trusted) */
	char up_warn[NODE_WARN_MAX][NODE_WARN_LEN];
	unsigned up_n_warn;
	char up_foreign[AGENT_FAILURE_MAX]; /* the uplink holds a tree aiqos leaves alone ("" = none) */
	int up_cls_map_fd;                  /* the uplink classifier's BPF map, -1 = none */

	struct agent_sched sched;
	/* failpoint for the lab tests ($AIQOS_AGENT_TEST_SLOW_APPLY_US): apply
	 * uplink items one by one with this pause, so a test can kill the agent
	 * in the middle of an update. 0 = off. */
	unsigned test_slow_apply_us;
	bool ready; /* first list + reconcile done */
	bool stopping;
	struct agent_counters ctr;

	/* set by the loop (NULL in unit tests): post a Kubernetes Event, tell
	 * systemd a new STATUS= */
	void (*event_hook)(struct agent *ag, const struct agent_pod *p, bool warning, const char *reason,
	                   const char *msg);
	void (*notify_hook)(struct agent *ag, const char *status);

	/* loop wiring (loop.c); NULL in unit tests */
	struct sd_event *loop;
	struct kube_client *kube;
	struct agent_server *server;
	struct metrics_server *metrics;
	void *loop_priv;
};

/* Monotonic and wall clocks (ms / s). */
int64_t agent_now_ms(void);
int64_t agent_now_unix(void);

/* reconcile.c */
/* Initialise/free the agent's state (not the loop). */
void agent_init(struct agent *ag);
void agent_done(struct agent *ag);
/* One pass for what is due (SCHED_* bits): PASS re-tunes dirty pods and the
 * node (mode, uplink plan delta), HOLD the node, RETRY the failed re-tunes
 * that are due, DRIFT reads the kernel (uplink adoption/repair, pods whose
 * kernel state differs from their record). Re-arms the retry deadline.
 * Never fails: problems are logged, counted, surfaced and retried. */
void agent_pass(struct agent *ag, int64_t now_ms, unsigned due);
/* Drift repair of the pods' attachments: re-apply those whose kernel state
 * differs from their record. */
void agent_repair_pods(struct agent *ag);

/* trust.c: may the uplink classify by DSCP? (true unless classify "dscp"
 * and some pod's marks cannot be guaranteed: then logged, an Event, and
 * ag->classify_why says why). The record's/plan's marking in effect. */
bool agent_dscp_trusted(struct agent *ag);
bool agent_plan_marks(const struct plan *p);
bool agent_choices_mark(const struct cJSON *choices);
/* Load or re-load one attachment record and join it (the plugin said
 * "attached", or the state dir changed). */
int agent_attach_load(struct agent *ag, const char *container_id, const char *ifname, struct error *err);
/* Re-read the whole state dir. */
void agent_attach_rescan(struct agent *ag);
/* --cleanup: restore the uplink's recorded qdisc. 0, or negative errno. */
int agent_cleanup_uplink(struct agent *ag, struct error *err);
/* Post a Kubernetes Event on a pod (no-op without an API client). */
void agent_event(struct agent *ag, const struct agent_pod *p, bool warning, const char *reason, const char *fmt, ...)
        _printf_(5, 6);
void agent_count_retune(struct agent *ag, int scope, int result, double seconds);

/* status.c */
struct cJSON *agent_status_json(struct agent *ag);
struct cJSON *agent_explain_json(struct agent *ag, const char *ns, const char *name, bool *ret_found);
void agent_metrics_render(struct agent *ag, struct metrics_writer *w);

/* loop.c */
int agent_run(struct agent *ag);

#endif
