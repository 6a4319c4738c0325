/* agent.h — the state of aiqos-agent (struct agent), owned by one thread
 * (the loop thread). The modules that work on it have their own headers:
 * pods.h (the pod cache), schedule.h (the scheduler), node/uplink.h,
 * node/downlink.h, node/trust.h (the node's queues), reconcile/reconcile.h
 * (re-tuning), status.h (status/explain), metrics/agent_metrics.h, loop.h
 * (the sd-event loop). */
#ifndef AIQOS_AGENT_H
#define AIQOS_AGENT_H

#include <stdint.h>

#include "config.h"
#include "error.h"
#include "log.h"
#include "metrics/metrics.h"
#include "node.h"
#include "node/datapath.h"
#include "node/downlink.h"
#include "node/reach.h"
#include "node/shaper.h"
#include "node/uplink.h"
#include "pods.h"
#include "records.h"
#include "schedule.h"
#include "version.h"

struct sd_event;
struct kube_client;
struct agent_server;
struct metrics_server;

#define AGENT_PROGRAM           "aiqos-agent"
#define AGENT_STATE_DIR_DEFAULT "/var/lib/aiqos"
#define AGENT_METRICS_DEFAULT   "127.0.0.1:9464"
#define AGENT_UPLINK_RECORD     "uplink.json" /* in the state dir */
/* how long a re-tune waits for the attachment lock (the plugin holds it for
 * about a millisecond per ADD/DEL) before it fails and backs off */
#define AGENT_LOCK_TIMEOUT_MS 200
/* A warning Event repeated for the same pod with the same text is logged at
 * warn once per this long, at debug in between (the Event itself is
 * counted by the API server); the table is direct-mapped by a hash. */
#define AGENT_EVENT_REPEAT_MS (10 * 60 * 1000)
#define AGENT_EVENT_SEEN_MAX  256
#define AGENT_PATH_MAX        4096

#define AGENT_FAILURE_MAX      (ERROR_MSG_MAX + 128)
#define AGENT_RELOAD_SETTLE_MS 100 /* config/CNI dir writes settle before reading */
#define AGENT_STATUS_ITEMS_MAX 1024

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

enum { AGENT_HOOK_CLSACT, AGENT_HOOK_QDISC, AGENT_HOOK_IFB, AGENT_HOOK_KINDS };
#define AGENT_HOOK_FOREIGN_MAX 8
#define AGENT_PODSIDE_MAX      1024 /* pods' interfaces whose clsact the agent made (podside.h) */
#define AGENT_HOOK_FOREIGN_LEN (TC_FORMAT_MAX + 16)

struct agent_counters {
	uint64_t retunes[2][3];                     /* [pod|node][ok|degraded|failed] */
	struct metrics_histogram retune_seconds[2]; /* [pod|node], metrics_buckets_retune */
	uint64_t config_reloads[2];                 /* [ok|failed] */
	uint64_t mode_changes;
	uint64_t drift_repairs; /* objects re-applied or removed by drift repair */
	/* aiqos's tc objects deleted by another process, noticed by the
	 * rtnetlink monitor: [egress|ingress][AGENT_HOOK_*] */
	uint64_t hook_deletions[2][AGENT_HOOK_KINDS];
	uint64_t events_posted;
	uint64_t chain_runs[2]; /* [ok|failed] */
	uint64_t watch_events[_KUBE_EVENT_MAX];
};

enum { RETUNE_POD, RETUNE_NODE };
enum { RESULT_OK, RESULT_DEGRADED, RESULT_FAILED };

/* The uplink's BPF programs (reconcile/node.c). */
enum { AGENT_PROG_CLS, AGENT_PROG_DOWN_GATE, AGENT_PROG_UP_GATE, AGENT_PROG_DOWN_CLS, AGENT_PROG_MAX };

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
	struct agent_records records; /* records the plugin could not write (records.h) */
	struct {
		uint64_t hash; /* of the pod's key, the reason and the message; 0 = free */
		int64_t at_ms; /* when it was last logged at warn */
	} event_seen[AGENT_EVENT_SEEN_MAX];

	/* the uplink */
	struct nl_sock *sk; /* rtnetlink in the agent's netns */
	struct uplink up;
	struct datapath dp;    /* tunnels, pod CIDRs, CNI (node/datapath.h), with each uplink discovery */
	struct downlink down;  /* the download direction's ifb and hook (downlink.h) */
	struct shaper shaper;  /* the gated upload tree's ifb (shaper.h) */
	bool up_adopted;       /* the kernel state has been read since the uplink was found */
	bool up_need_observe;  /* re-read the kernel (drift repair, after errors) */
	bool up_need_discover; /* links or routes changed */
	struct plan in_force;
	struct node_plan_info info;
	bool have_info;
	/* the profiles pods get: the config's, training's rmemMax lowered to
	 * the download tree's receive window (node/rcv_window.h) */
	struct profile_set profiles;
	uint32_t rcv_window; /* that window in force, bytes; 0 = none */
	struct node_mode_state mode;
	int64_t mode_since_unix;
	struct plan_caps up_caps;
	bool up_fq_probed; /* fq asked of a scratch netns (kind_probe.h) */
	struct plan_caps pod_caps;
	unsigned up_retries;
	int64_t up_retry_at_ms; /* -1 = none */
	char up_failure[AGENT_FAILURE_MAX];
	char classify_why[AGENT_FAILURE_MAX]; /* classify dscp not trusted: why ("" = trusted) */
	char up_warn[NODE_WARN_MAX][NODE_WARN_LEN];
	unsigned up_n_warn;
	char up_foreign[AGENT_FAILURE_MAX]; /* the uplink holds a tree aiqos leaves alone ("" = none) */
	/* other tools' filters on the uplink's clsact hooks, as last read
	 * (status, doctor): never replaced nor deleted */
	char up_hook_foreign[AGENT_HOOK_FOREIGN_MAX][AGENT_HOOK_FOREIGN_LEN];
	unsigned up_n_hook_foreign;
	/* the last deletion of aiqos's objects by another process (status) */
	char up_hook_deleted[AGENT_FAILURE_MAX];
	int64_t up_hook_deleted_unix;
	bool up_egress_foreign_after; /* one of them at egress after our gate and redirect (uplink_facts) */
	/* the classifier as a tcx link (node/tcx.h): the kernel has tcx on the
	 * uplink (probed per uplink; AIQOS_TCX=0 keeps clsact), our link */
	bool up_tcx;
	int up_tcx_probed_ifindex;
	int tcx_cls_link_fd; /* -1 = none */
	uint32_t tcx_cls_prog_id;
	/* other programs on the uplink's tcx hooks ("ingress NAME (id N)"): they
	 * run before every clsact filter (status, doctor) */
	char up_tcx_foreign[AGENT_HOOK_FOREIGN_MAX][64];
	unsigned up_n_tcx_foreign;
	uint64_t tcx_cls_drift; /* re-attached: detached behind our back, or another program put first */
	int up_cls_map_fd;      /* the uplink classifier's BPF map, -1 = none */
	int up_edt_map_fd;      /* its EDT map (bpf_cls.h), -1 = none */
	int down_gate_map_fd;   /* the download gate's BPF map (bpf_gate.h), -1 = none */
	int down_cls_map_fd;    /* the download classifier's (bpf_cls.h, dcls), -1 = none */
	int down_seen_map_fd;   /* its count of the packets it saw (node/reach.h), -1 = none */
	struct down_reach down_reach;
	/* the download tree fed at the pods' interfaces (node/podside.h) */
	bool podside_on;
	bool podside_swept;      /* an earlier run's hooks looked for */
	unsigned podside_hooked; /* interfaces with the hooks */
	int podside_prog_fd;     /* the classifier there, -1 = none */
	int podside_seen_fd;     /* its count, -1 = none */
	uint32_t podside_prog_id;
	int podside_made[AGENT_PODSIDE_MAX]; /* interfaces whose clsact we made */
	unsigned podside_n_made;
	int up_gate_map_fd; /* the upload gate's (GATED HTB), -1 = none */
	/* this version's BPF programs (reconcile/node.c, AGENT_PROG_*): their
	 * tags, learnt by loading each once (a program attached under our name
	 * with another tag is another version's, and is replaced), and which
	 * must be loaded again because their maps could not be adopted */
	uint8_t prog_tag[AGENT_PROG_MAX][TC_BPF_TAG_LEN];
	bool prog_tag_known;
	bool prog_reload[AGENT_PROG_MAX];

	struct agent_sched sched;
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

#endif
