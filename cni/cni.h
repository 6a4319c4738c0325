/* cni.h — internal API of the `aiqos` chained CNI plugin: the request (env,
 * network config, CNI_ARGS, prevResult), result/error printing, one function
 * per verb, the attachment plumbing shared by the verbs and the agent client.
 * main.c only builds a struct cni_env and calls cni_run(). */
#ifndef AIQOS_CNI_H
#define AIQOS_CNI_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "apply.h"
#include "attach.h"
#include "error.h"
#include "errors.h"
#include "failpoint.h"
#include "json.h"
#include "log.h"
#include "nl.h"
#include "plan.h"
#include "profile.h"
#include "proto.h"
#include "state.h"

/* the verbs' files (add.c, del.c, check.c, gc.c, agent.c) still say _cleanup_cjson_ */
#define _cleanup_cjson_ _cleanup_json_

#define CNI_PROGRAM                  "aiqos"
#define CNI_STDIN_MAX                (1024 * 1024) /* network config on stdin, bytes */
#define CNI_VERSION_LATEST           "1.1.0"
#define CNI_STATE_DIR_DEFAULT        "/var/lib/aiqos"
#define CNI_AGENT_TIMEOUT_MS_DEFAULT 200 /* pod annotations / STATUS */
#define CNI_AGENT_TIMEOUT_MS_MAX     5000
#define CNI_AGENT_NOTIFY_TIMEOUT_MS  50   /* attached/detached, best effort */
#define CNI_ARGS_MAX                 8192 /* CNI_ARGS length, bytes */
#define CNI_DETAILS_MAX              8192
#define CNI_SOCKET_PATH_MAX          108 /* sizeof(sockaddr_un.sun_path) */
#define CNI_NAME_MAX                 128 /* network name (attach_state.network) */
#define CNI_TYPE_MAX                 64
#define CNI_PREV_IFACES_MAX          16 /* further prevResult interfaces are ignored */
#define CNI_PREV_IPS_MAX             4  /* == ARRAY_SIZE(attach_state.ips) */
#define CNI_ADDR_MAX                 64 /* "fd00::1/64" */
#define CNI_MAC_MAX                  32
#define CNI_PHASES_MAX               8

#define CNI_KEY_POD_ANNOTATIONS   "io.kubernetes.cri.pod-annotations"
#define CNI_KEY_BANDWIDTH         "bandwidth"
#define CNI_KEY_VALID_ATTACHMENTS "cni.dev/valid-attachments"

#define CNI_MSG_NO_PREV_RESULT \
	"aiqos is a chained plugin: prevResult missing (put aiqos after the main plugin in a conflist)"

enum cni_command {
	CNI_CMD_ADD,
	CNI_CMD_DEL,
	CNI_CMD_CHECK,
	CNI_CMD_STATUS,
	CNI_CMD_GC,
	CNI_CMD_VERSION,
	_CNI_CMD_MAX,
	_CNI_CMD_INVALID = -1,
};

/* Spec versions the plugin speaks, oldest first (comparable with <). */
enum cni_version {
	CNI_V_0_3_0,
	CNI_V_0_3_1,
	CNI_V_0_4_0,
	CNI_V_1_0_0,
	CNI_V_1_1_0,
	_CNI_V_MAX,
	_CNI_V_INVALID = -1,
};

enum cni_failure_policy {
	CNI_POLICY_OPEN,   /* tuning failure: log, record, pass prevResult through */
	CNI_POLICY_CLOSED, /* tuning failure: undo and fail ADD (code 100) */
	_CNI_POLICY_MAX,
	_CNI_POLICY_INVALID = -1,
};

/* The CNI_* environment as given (NULL = unset). Injectable for tests. */
struct cni_env {
	const char *command;
	const char *container_id;
	const char *netns;
	const char *ifname;
	const char *args;
	const char *path;
};

/* CNI_ARGS as containerd/CRI-O set them. "" = not given. */
struct cni_args {
	char pod_namespace[254];
	char pod_name[254];
	char pod_uid[64];
	char infra_container_id[STATE_ID_MAX];
	bool ignore_unknown;
};

struct cni_prev_iface {
	char name[IFNAME_LEN];
	char mac[CNI_MAC_MAX];
	char sandbox[STATE_PATH_MAX]; /* "" = host side */
};

struct cni_prev_ip {
	char address[CNI_ADDR_MAX]; /* CIDR as given ("10.244.1.5/24") */
	int interface;              /* index into interfaces, -1 = not given */
};

/* The parts of prevResult the plugin uses (the raw JSON is passed through). */
struct cni_prev_result {
	unsigned n_ifaces;
	struct cni_prev_iface ifaces[CNI_PREV_IFACES_MAX];
	unsigned n_ips;
	struct cni_prev_ip ips[CNI_PREV_IPS_MAX];
};

/* The parsed network config. Pointers into `root` are borrowed from it. */
struct cni_conf {
	struct cJSON *root; /* owns the document */
	enum cni_version version;
	char cni_version[16];
	char name[CNI_NAME_MAX];
	char type[CNI_TYPE_MAX];
	char agent_socket[CNI_SOCKET_PATH_MAX];
	bool agent_required;
	int agent_timeout_ms;
	char state_dir[STATE_PATH_MAX];
	enum cni_failure_policy failure_policy;
	char log_file[STATE_PATH_MAX]; /* "" = stderr */
	enum log_level log_level;
	struct profile_set profiles;             /* built-in + config "profiles" */
	const struct cJSON *runtime_annotations; /* runtimeConfig pod-annotations object, NULL = none */
	const struct cJSON *runtime_bandwidth;   /* runtimeConfig.bandwidth object, NULL = none */
	const struct cJSON *prev_result;         /* NULL = none */
	struct cni_prev_result prev;
	bool has_valid_attachments;            /* key present (GC) */
	const struct cJSON *valid_attachments; /* array, or NULL when the key is null/absent */
};

/* Everything one invocation works with. */
struct cni_ctx {
	const struct cni_env *env;
	enum cni_command cmd;
	struct cni_conf conf;
	struct cni_args args;
	FILE *out;
	uint64_t start_ns;             /* CLOCK_MONOTONIC once the request is read */
	bool agent_failed;             /* the agent did not answer once: skip further calls */
	char details[CNI_DETAILS_MAX]; /* "details" of an error result ("" = none) */
	/* Where the time of ADD/DEL went, for the log's "phases_us": phase i
	 * ended at phase_ns[i] (CLOCK_MONOTONIC), the first began at start_ns. */
	unsigned n_phases;
	const char *phase_name[CNI_PHASES_MAX];
	uint64_t phase_ns[CNI_PHASES_MAX];
};

/* run.c: the dispatcher. Reads the config from `in` (at most CNI_STDIN_MAX
 * bytes), prints the result or error JSON on `out`, logs to stderr or
 * logFile. Returns the process exit code (0, or 1 after an error result). */
int cni_run(const struct cni_env *env, FILE *in, FILE *out);

/* conf.c */
const char *cni_command_name(enum cni_command c);
enum cni_command cni_command_from_name(const char *s);
const char *cni_version_name(enum cni_version v);
enum cni_version cni_version_from_name(const char *s);
/* Which versions define a verb: CHECK >= 0.4.0, STATUS/GC >= 1.1.0. Error
 * code 1 naming both when not. */
int cni_version_check_command(enum cni_version v, enum cni_command c, struct error *err);
const char *cni_failure_policy_name(enum cni_failure_policy p);

/* Parse and validate the network config (len bytes, need not be terminated).
 * Codes: 6 undecodable, 1 unsupported cniVersion, 7 anything else invalid
 * (the message names the key). ret is zeroed first; free with cni_conf_free
 * (also after a failure). */
int cni_conf_parse(const char *data, size_t len, struct cni_conf *ret, struct error *err);
void cni_conf_free(struct cni_conf *c);
/* prevResult (any supported version's result format). Code 7 naming the key. */
int cni_prev_result_parse(const struct cJSON *j, struct cni_prev_result *ret, struct error *err);
/* Whether name is one of prevResult's host-side (no sandbox) interfaces,
 * and how many of those there are. */
bool cni_prev_has_host_iface(const struct cni_prev_result *p, const char *name);
unsigned cni_prev_count_host_ifaces(const struct cni_prev_result *p);

/* CNI_ARGS ("IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;..."). NULL/"" is empty.
 * Code 4 naming the pair or key. Values are validated (DNS names, UID,
 * container ID); unknown keys are refused unless IgnoreUnknown is true. */
int cni_args_parse(const char *s, struct cni_args *ret, struct error *err);
/* Required CNI_* variables for the command, and their syntax. Code 4. */
int cni_env_check(enum cni_command cmd, const struct cni_env *env, struct error *err);
/* Copy at most size-1 bytes of s into buf for a message: non-printable
 * bytes become '?', a cut is marked with "...". */
const char *cni_sanitize(const char *s, char *buf, size_t size);

/* result.c */
/* prevResult unchanged except "cniVersion" := cni_version, then "\n". */
int cni_result_print(FILE *out, const struct cJSON *prev_result, const char *cni_version, struct error *err);
/* {"cniVersion","code","msg"[,"details"]}; details NULL/"" = omitted. */
int cni_error_print(FILE *out, const char *cni_version, int code, const char *msg, const char *details);
/* {"cniVersion":"1.1.0","supportedVersions":[...]} */
int cni_version_print(FILE *out);

/* One function per verb (add.c, del.c, ...). 0 on success (the verb printed
 * its result, if any); negative errno with err (and ctx->details) on error. */
int cni_cmd_add(struct cni_ctx *ctx, struct error *err);
int cni_cmd_del(struct cni_ctx *ctx, struct error *err);
int cni_cmd_check(struct cni_ctx *ctx, struct error *err);
int cni_cmd_status(struct cni_ctx *ctx, struct error *err);
int cni_cmd_gc(struct cni_ctx *ctx, struct error *err);
int cni_cmd_version(struct cni_ctx *ctx, struct error *err);

/* attach.c: the pod/host interfaces of one attachment (struct attach and
 * the rest of the plumbing are in shared/attach.h). */
/* ADD/CHECK: open netns, find ifname in it (nl_link_get), and for a veth
 * its host-side peer (by the peer ifindex, verified; prevResult's host
 * interface names as fallback and cross-check). One socket per netns, no
 * dumps. Errors: netns or pod interface missing, socket failures. */
int cni_attach_discover(struct attach *a, const char *netns, const char *ifname, const struct cni_prev_result *prev,
                        struct error *err);
/* "ns/name", or "" when CNI_ARGS did not say. */
const char *cni_pod_display(const struct cni_args *a, char *buf, size_t size);
uint64_t cni_now_ns(void);
/* End the current phase of the verb (name: a literal). */
void cni_phase(struct cni_ctx *ctx, const char *name);
/* "config=12,discover=40,..." (microseconds per phase) into buf. */
const char *cni_phases_format(const struct cni_ctx *ctx, char *buf, size_t size);
/* The attachment's lock (state_lock_attachment) for a verb that reads or
 * changes it, waited for at most timeout_ms (well under a second: holders
 * keep it for milliseconds). 0 with *ret_fd the lock (or -1 when the state
 * directory cannot hold a lock file: nobody else can take it then either);
 * a busy lock is an error with code 11 (try again later): a verb never goes
 * on without it. */
#define CNI_LOCK_TIMEOUT_MS     250 /* ADD: on the pod's start path */
#define CNI_DEL_LOCK_TIMEOUT_MS 800 /* DEL, CHECK: an agent's re-tune of the pod may be under way */
#define CNI_GC_LOCK_TIMEOUT_MS  0   /* GC: a busy attachment is not stale now; the next GC */
struct cni_lock {
	int fd; /* -1: not held */
	const char *dir, *container_id, *ifname;
};
int cni_attach_lock(const struct cni_ctx *ctx, const char *container_id, const char *ifname, unsigned timeout_ms,
                    struct cni_lock *ret, struct error *err);
/* Release (idempotent); removes the lock file once the attachment has no record. */
void cni_lock_release(struct cni_lock *l);
#define _cleanup_cni_lock_ _cleanup_(cni_lock_release)

/* agent.c: the node agent over its unix socket (bounded, best effort). */
/* Pod annotations from the agent's cache: 1 (found, *ret owned object), 0
 * not known to the agent, negative errno when the agent did not answer. */
int cni_agent_pod_annotations(const struct cni_conf *c, const struct cni_args *a, struct cJSON **ret,
                              struct error *err);
/* attached/detached notification; errors are logged at debug and ignored.
 * unsaved (attached only, NULL = none): the attachment's record that ADD
 * could not write, handed to the agent to write once it can. */
void cni_agent_notify(const struct cni_conf *c, enum proto_op op, const char *container_id, const char *ifname,
                      const struct cni_args *a, const struct attach_state *unsaved);
/* STATUS: 0 when the agent answers {"ok":true}. */
int cni_agent_status(const struct cni_conf *c, struct error *err);

#endif
