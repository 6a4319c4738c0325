/* attach.h — one pod attachment's interfaces as the plugin and the agent
 * reach them: the pod netns and interface, the host-side veth, one rtnetlink
 * socket per netns and the apply_target over them; plus rebuilding an
 * attachment's plan from its state record with the one planner, undoing it
 * and summarising it. Shared by cni/ (ADD, CHECK, DEL, GC) and the agent
 * (re-tuning running pods). */
#ifndef AIQOS_ATTACH_H
#define AIQOS_ATTACH_H

#include "apply.h"
#include "nl.h"
#include "state.h"

struct cJSON;

struct attach {
	int pod_nsfd;            /* -1 = none */
	struct nl_sock *pod_sk;  /* in the pod netns, NULL = none */
	struct nl_sock *host_sk; /* in the host netns, NULL = none */
	struct link_info pod;    /* ifindex 0 = not found */
	struct link_info host;   /* ifindex 0 = no host side */
	struct attach_ifaces ifs;
	struct apply_target target;
	char note[256]; /* how the host side was found, or why there is none */
};

void attach_init(struct attach *a);
void attach_close(struct attach *a);
/* Point a->target at the sockets and interfaces found so far. */
void attach_target_fill(struct attach *a);
/* A host link is the pod's peer when it is a veth whose own peer is the pod
 * interface (the peer index is not always reported; then trust the kind). */
bool attach_host_link_is_peer(const struct link_info *host, const struct link_info *pod);

/* The recorded host veth, if it still exists with the recorded name,
 * ifindex and kind veth (returns 1; 0 = gone or not ours any more). Opens
 * a->host_sk in the caller's netns if needed. */
int attach_open_host(struct attach *a, const struct attach_state *s, struct error *err);
/* The pod interface s->ifname in netns, if the netns and an interface with
 * the recorded name and ifindex still exist (1), else 0. */
int attach_open_pod(struct attach *a, const char *netns, const struct attach_state *s, struct error *err);

/* The profile a stored attachment was tuned with: the content it recorded
 * (profileSpec), else by its recorded name, or
 * re-resolved from the workload when set no longer has it (then
 * *ret_changed is set). Never NULL. */
const struct profile *attach_profile_for_state(const struct profile_set *set, const struct attach_state *s,
                                               bool *ret_changed);
/* Recompute s->plan with the planner from s's workload/profile/interfaces
 * and merge the stored effective choices (may be NULL). */
int attach_plan_restore(const struct profile_set *set, struct attach_state *s, const struct cJSON *choices,
                        bool *ret_profile_changed, struct error *err);
/* Undo what the plan put on the available devices (root qdiscs; best
 * effort: the first error is returned, every device is tried). */
int attach_plan_remove(const struct plan *p, const struct attach *a, struct error *err);
/* One line each: effective objects ("egress.root=htb,sysctl.tcp_ecn=1") and
 * degraded/skipped items with their reason. */
void attach_plan_summary(const struct plan *p, char *effective, size_t eff_size, char *degraded, size_t deg_size);

/* ---- tune and teardown: the one crash protocol ----
 * Every change an attachment's kernel objects go through — the plugin's ADD,
 * the agent's re-tune, DEL, GC and the recovery of a crashed one — is
 * attach_tune() or attach_teardown(), called with the attachment's lock held
 * (state_lock_attachment) from reading the record to writing it, in three
 * steps:
 *   1. intent: the record is written with "pending": true and what is about
 *      to happen (s->intent: an ADD, a re-tune and its target, a teardown)
 *      before the kernel is touched;
 *   2. kernel: the target plan is applied and what the committed plan had and
 *      the target lacks is removed (tune), or the committed and the intended
 *      plans' objects are removed (teardown);
 *   3. commit: the record is rewritten without the intent (tune), or removed
 *      (teardown: only once the kernel is clean; else it stays, pending, for
 *      the next DEL, GC or the agent).
 * A process killed between 1 and 3 releases the lock and leaves a pending
 * record. Whoever next takes the lock and finds it pending knows it is a
 * crash, and what may be in the kernel: the committed plan (its recorded
 * choices) and the intent's target plan (any alternative, by our handles).
 * DEL and GC tear both down. The agent (attach_recover_action) undoes a
 * crashed ADD (the runtime saw it fail; its DEL will come), finishes a
 * teardown, and rolls a re-tune forward: its next attach_tune removes what
 * the crashed target left that the new target lacks.
 * A crash between the intent's temp file and its rename leaves only a temp
 * file (state_sweep_tmp); one after the commit, nothing to recover.
 * Known limit: a sysctl that only a crashed re-tune's target set, and the
 * next target does not, keeps aiqos's value (the value before it was not
 * recorded yet); tc objects are always found by our handles. */

struct attach_tune_req {
	enum attach_op op; /* ATTACH_OP_ADD (no committed tuning) or ATTACH_OP_RETUNE */
	/* the target: recorded as the intent, then as the committed tuning */
	const struct workload *workload;
	const struct profile *profile;
	const struct attach_ifaces *ifs;
	struct plan *plan; /* planned by the caller for the target; the applier fills its choices */
	/* refuse (-errno, nothing changed) when the intent cannot be recorded;
	 * else go on without it (failurePolicy open: the pod starts anyway) */
	bool intent_required;
	/* a failed apply or commit is taken back with its record (failurePolicy closed) */
	bool undo_on_failure;
	const char *failpoint_before, *failpoint_after; /* around step 2, NULL = none */
	/* how those points act: a program passes its logging failpoint() (log.h);
	 * NULL = failpoint_quiet() (the library never logs) */
	void (*failpoint)(const char *name);
};

struct attach_tune_res {
	bool intent_saved, committed, undone;
	struct error intent_err;   /* step 1 failed (EROFS, ENOSPC, ...) */
	struct error apply_err;    /* step 2: the applier's hard failure */
	struct error leftover_err; /* step 2: what the committed plan had was not all removed */
	struct error commit_err;   /* step 3 failed: the record is the intent (or absent) */
	struct error undo_err;     /* undo_on_failure: what could not be taken back */
};

/* Steps 1-3 for s (the record as loaded: committed, pending after a crash,
 * or — ADD — identity only) on the opened attachment a. On return s is what
 * was (or should have been) committed: the target's workload, profile and
 * plan, s->failure the apply failure ("" = none). An ADD whose commit fails
 * (and is not undone) removes its intent record: the pod runs, nothing
 * crashed; the caller hands the record on (the agent writes it later). Returns 0, or the
 * negative errno of the failed step (the res error says which). */
int attach_tune(const char *dir, struct attach_state *s, struct attach *a, struct plan_caps *caps,
                const struct attach_tune_req *req, struct attach_tune_res *res);

struct attach_teardown_res {
	bool host, pod;          /* the sides reached (and cleaned) */
	bool record_kept;        /* the record stays (pending teardown, or unremovable) */
	struct error plan_err;   /* the record's plan could not be rebuilt: its objects are left to the kernel */
	struct error intent_err; /* step 1 failed (went on: removing is idempotent) */
	struct error open_err;   /* a side could not be opened */
	struct error remove_err; /* step 2 failed */
	struct error record_err; /* step 3: the record could not be removed */
};

/* Steps 1-3 of a teardown of the record s (as loaded, with its choices):
 * the host side when its veth still exists with the recorded ifindex, the
 * pod side when netns is not NULL and still holds the recorded interface
 * (GC passes NULL: the runtime owns the netns). Returns 0 when the kernel
 * is clean and the record gone, else the first failure's negative errno
 * (res says which; the record stays but for an unusable plan). */
int attach_teardown(const char *dir, const struct profile_set *set, struct attach_state *s, const struct cJSON *choices,
                    const char *netns, struct attach_teardown_res *res);

/* What the lock holder does with a record found pending (the writer died). */
enum attach_recovery {
	ATTACH_RECOVER_NONE,     /* not pending */
	ATTACH_RECOVER_TEARDOWN, /* a crashed ADD (undo) or teardown (finish): attach_teardown */
	ATTACH_RECOVER_RETUNE,   /* a crashed re-tune: tune again, to what is wanted now */
};
enum attach_recovery attach_recover_action(const struct attach_state *s);

/* The target plan of a pending record's intent (choices unknown), for
 * removal; an empty plan when the intent has no target of its own. */
int attach_intent_plan(const struct attach_state *s, struct plan *ret, struct error *err);

#endif
