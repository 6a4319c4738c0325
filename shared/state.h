/* state.h — the per-attachment state store under stateDir. One JSON file per
 * attachment, "<dir>/<containerID>@<ifname>.json" (container IDs have no '@';
 * the interface name is encoded, ifname_encode(): bytes outside
 * [A-Za-z0-9_.-] as %XX, so the name splits unambiguously), written atomically (O_EXCL temp
 * file "<name>.tmp.<pid>" 0600, then rename (no fsync: see state.c); the temp file is
 * unlinked on any failure), read by the plugin (DEL/CHECK/GC) and the agent. */
#ifndef AIQOS_STATE_H
#define AIQOS_STATE_H

#include "plan.h"

struct cJSON;

#define STATE_ID_MAX   128
#define STATE_PATH_MAX 512
#define STATE_FILE_MAX (1024 * 1024) /* larger state files are refused when read */

/* What an unfinished operation on an attachment was doing (the write-ahead
 * intent of shared/attach.h's protocol). */
enum attach_op {
	ATTACH_OP_NONE,     /* committed: the record describes the kernel */
	ATTACH_OP_ADD,      /* ADD: the record's fields are its target, nothing was committed */
	ATTACH_OP_RETUNE,   /* re-tune: the record's fields are the committed tuning, intent.* the target */
	ATTACH_OP_TEARDOWN, /* DEL/GC: removing what the record says */
	_ATTACH_OP_MAX,
	_ATTACH_OP_INVALID = -1,
};

struct attach_intent {
	enum attach_op op;
	/* the target plan is built from these (always for ATTACH_OP_RETUNE; a
	 * teardown of a crashed re-tune's record keeps its target: both go) */
	bool has_target;
	struct workload workload;
	char profile[PROFILE_NAME_MAX];
	struct profile profile_spec;
	struct attach_ifaces ifs;
};

const char *attach_op_name(enum attach_op op);
enum attach_op attach_op_from_name(const char *s);

struct attach_state {
	char container_id[STATE_ID_MAX];
	char ifname[IFNAME_LEN];
	char netns[STATE_PATH_MAX];
	char pod_namespace[254];
	char pod_name[254];
	char pod_uid[64];
	char network[128];              /* network name from the config */
	struct workload workload;       /* class, profile name, limits (warnings not stored) */
	char profile[PROFILE_NAME_MAX]; /* the resolved profile name */
	/* the content of that profile when it was applied ("profileSpec"):
	 * the plan of the record is re-built from it, not from today's config,
	 * so a changed config neither hides what is in the kernel nor breaks
	 * the choices; records without it (older writers) use the config's */
	struct profile profile_spec;
	bool has_profile_spec;
	char annotations_source[16]; /* "runtime", "agent", "none" */
	struct attach_ifaces ifs;
	int host_ifindex;
	int pod_ifindex;
	char ips[4][64]; /* from prevResult, "10.1.0.5/24" */
	unsigned n_ips;
	struct plan plan;            /* desired + effective choices */
	char failure[ERROR_MSG_MAX]; /* last tuning failure ("" = none) */
	int64_t updated_unix;
	/* An intent record (see attach.h, "crash protocol"): every operation
	 * that changes the kernel writes it before it starts and replaces (or
	 * removes) it when done, so a process killed in between leaves a record
	 * DEL, GC and the agent can finish or undo from (choices of the target
	 * unknown: every alternative of every root qdisc is removed by our
	 * handle). Everyone leaves such a record alone while its writer holds the attachment lock; a record
	 * pending with the lock free is a crash, finished or undone by
	 * attach_recover(). Stored as "pending": true plus "intent". */
	bool pending;
	struct attach_intent intent; /* op ATTACH_OP_NONE unless pending */
};

/* A record on the heap: frees its plan's items and the record (NULL: nothing). */
void attach_state_free(struct attach_state *s);
static inline void attach_state_freep(struct attach_state **s)
{
	attach_state_free(*s);
}
#define _cleanup_attach_state_ _cleanup_(attach_state_freep)

/* Validate a container ID and an interface name: the ID non-empty, at most
 * STATE_ID_MAX-1 characters of [A-Za-z0-9_.-], not starting with '.' or '-';
 * the name by Linux's and libcni's rules (ifname_valid()).
 * -EINVAL/-ENAMETOOLONG. */
int state_check_id(const char *container_id, const char *ifname, struct error *err);
/* "<dir>/<containerID>@<encoded ifname>.json"; -EINVAL for bad ids, -ENAMETOOLONG. */
int state_path(const char *dir, const char *container_id, const char *ifname, char *buf, size_t size);
/* A directory entry "<containerID>@<encoded ifname>.json" -> its two parts
 * (decoded); false for any other name. */
bool state_file_parse(const char *name, char *cid, size_t cid_size, char *ifn, size_t ifn_size);

/* Write atomically (creates missing directories of dir with mode 0700;
 * existing ones are left as they are). The JSON holds version 1,
 * containerId, ifname, netns, pod {namespace,name,uid}, network, class,
 * profile, profileSpec (profile_to_json, when has_profile_spec),
 * workload {egressBps,ingressBps,profileRequested},
 * annotationsSource, ifaces {pod,host,podIfindex,hostIfindex,mtu}, ips[],
 * choices (plan_choices_to_json), effective (plan_render text, effective
 * only, one array entry per line), degraded [{id,wanted,got,reason}] for
 * DEGRADED/SKIPPED items, failure, updated (unix seconds). Errors name the
 * file and the errno (EROFS, ENOSPC, ...). */
int state_save(const char *dir, const struct attach_state *s, struct error *err);
/* Write text (plus a newline) to path atomically: a 0600 temp file
 * "<path>.tmp.<pid>" next to it, then rename; dir (path's directory) is
 * created (0700) if missing, unless dir is NULL. `what` names the file in
 * errors ("state file"). durable: fsync the data before the rename (for a
 * file that must survive a reboot: the agent's uplink record). Every file
 * aiqos keeps under stateDir is written this way. */
int state_write_atomic(const char *dir, const char *path, const char *what, const char *text, bool durable,
                       struct error *err);
/* The attachment lock, "<dir>/<containerID>@<encoded ifname>.lock" (flock,
 * created 0600 with dir if missing): every process that changes an
 * attachment's tc objects, sysctls or record (plugin ADD/DEL/CHECK/GC, the
 * agent re-tuning a pod) holds it from reading the record to writing it, so
 * the plugin and the agent never interleave on one interface (EBUSY/EEXIST
 * races, a DEL undone by a late agent write); other attachments never wait.
 * Held for milliseconds; a holder that dies releases it. Waits at most
 * timeout_ms (0: one try), then -ETIMEDOUT;
 * errors name the lock file. On a read-only directory an existing lock file
 * is still locked; one that is absent and cannot be created gives -ENOENT or
 * the directory's errno (nobody else can hold it then either). Returns the fd
 * holding the lock; release with state_unlock_attachment(), which also
 * removes the lock file once the attachment has no record. */
int state_lock_attachment(const char *dir, const char *container_id, const char *ifname, unsigned timeout_ms,
                          struct error *err);
void state_unlock_attachment(int fd, const char *dir, const char *container_id, const char *ifname);
/* A directory-wide lock "<dir>/lock", same rules (no longer taken by the
 * verbs; kept for callers that need the whole directory). */
int state_lock(const char *dir, unsigned timeout_ms, struct error *err);
void state_unlock(int fd);
/* Remove temp files ("<containerID>@<ifname>.json.tmp.<pid>",
 * "kernel-caps.tmp.<pid>") of writers that are gone (their pid no longer
 * runs): what a plugin killed while saving leaves. container_id NULL: of
 * every attachment (GC: each under its attachment lock, skipped when busy),
 * else of that one (DEL: call with its lock held); the kernel-caps one
 * always. Returns how many were removed (the caller logs them: the
 * library never does). */
int state_sweep_tmp(const char *dir, const char *container_id, const char *ifname);
/* -ENOENT when there is no state for the attachment. The desired plan is not
 * stored (the planner recomputes it from workload + profile + ifaces): load
 * leaves ret->plan empty (ret: zeroed or a record; a plan it held is freed)
 * and hands the stored effective choices back as JSON in *ret_choices
 * (caller frees; may be NULL) for plan_choices_from_json().
 * The file also carries a rendered effective plan and a "degraded" list for
 * humans; those are not read back. Errors (unreadable, larger than
 * STATE_FILE_MAX, invalid or truncated JSON, a field of the wrong type/size,
 * a file of another attachment) name the file and the field. */
int state_load(const char *dir, const char *container_id, const char *ifname, struct attach_state *ret,
               struct cJSON **ret_choices, struct error *err);
/* Idempotent: 0 when there is nothing to remove. */
int state_remove(const char *dir, const char *container_id, const char *ifname, struct error *err);

/* Enumerate attachments: calls cb for every state file (container_id, ifname).
 * Temp files and names that are not "<valid id>@<valid ifname>.json" are
 * skipped; a missing dir lists nothing. A negative return of cb stops the
 * walk and is returned. */
int state_list(const char *dir, int (*cb)(const char *container_id, const char *ifname, void *userdata), void *userdata,
               struct error *err);

/* NULL on out-of-memory. */
struct cJSON *state_to_json(const struct attach_state *s);
/* Validates like state_load (errors name the field); ret untouched on failure
 * (ret: zeroed or a record, as for state_load). */
int state_from_json(const struct cJSON *j, struct attach_state *ret, struct cJSON **ret_choices, struct error *err);

#endif
