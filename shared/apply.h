/* apply.h — plan -> kernel (the applier) and kernel -> observed (the
 * observer). The applier tries each item's alternatives in order, falls back
 * on "unknown kind"/EOPNOTSUPP/ENOENT-for-kind, records the choice and errno
 * in the item, and marks learned capabilities. It never decides policy. */
#ifndef AIQOS_APPLY_H
#define AIQOS_APPLY_H

#include "plan.h"

struct nl_sock;

/* Where each plan_dev lives. Unused devices: ifindex 0. */
struct apply_target {
	int pod_nsfd;           /* pod netns (for DEV_POD tc and all sysctls), -1 none */
	struct nl_sock *pod_sk; /* rtnetlink socket opened in the pod netns */
	int pod_ifindex;
	struct nl_sock *host_sk; /* rtnetlink socket in the host netns */
	int host_ifindex;        /* host-side veth, 0 if none */
	int uplink_ifindex;      /* DEV_UPLINK, 0 if none */
	int ifb_ifindex;         /* DEV_IFB (host netns), 0 if none */
	int ifb_up_ifindex;      /* DEV_IFB_UP (host netns), 0 if none */
};

/* Apply the items of p, filling each one's status/chosen/err and learning
 * capabilities. An item's `depends` is satisfied when the item with that id
 * is APPLIED or DEGRADED; otherwise it is SKIPPED (err: the missing feature
 * when known, else ESRCH).
 *
 * only NULL: every item in plan order, as one whole (a pod's ADD, re-tune,
 * probe). The first hard failure (netns gone, device gone, EPERM, a
 * parameter refused) stops it and is returned with err; the item that
 * failed and the ones after it stay PENDING, items already applied keep
 * their status so callers can record/undo. Returns 0 when every item
 * reached APPLIED, or DEGRADED/SKIPPED for capability reasons.
 *
 * only: the items only->idx[k] (k < only->n) in that order, each on its
 * own (the node plan's delta: the other items keep their status). A
 * failing item stays PENDING with its errno in err and the others are still
 * tried, unless the target itself is gone (ENODEV, EBADF, EPERM, ...).
 * absent[k] (parallel to idx; absent may be NULL) says the caller knows
 * that item's object is not in the kernel (it read the device): such a
 * filter is created without the lookups a replace needs, which makes adding
 * n filters O(n) instead of O(n^2); if it is there after all, the normal
 * path runs. Returns 0 or the first failure (with err). */
struct apply_only {
	const unsigned *idx;
	const bool *absent;
	unsigned n;
};
int apply_plan(struct plan *p, const struct apply_only *only, const struct apply_target *t, struct plan_caps *caps,
               struct error *err);

/* Remove what the plan's effective items put on dev (root qdiscs and clsact;
 * deleting a root qdisc removes its children). Missing objects are not errors. */
int apply_remove(const struct plan *p, enum plan_dev dev, const struct apply_target *t, struct error *err);

/* Put back the previous value of every sysctl item the plan changed (the
 * `prev` the applier recorded), e.g. when failurePolicy closed undoes an ADD
 * or a pod leaves its class. Best effort over all items; returns the first
 * error. */
int apply_restore_sysctls(const struct plan *p, const struct apply_target *t, struct error *err);

/* Read what the kernel has for every device and sysctl the plan mentions. */
int observe_plan(const struct plan *p, const struct apply_target *t, struct observed *ret, struct error *err);

/* true when errno means "this kernel lacks the feature" (fall back) rather
 * than a real failure. */
bool apply_errno_is_missing_feature(int errnum);
/* Does the kernel's extack say the kind, classifier or action is unknown
 * ("Specified qdisc kind is unknown", "TC classifier not found", "Failed to
 * load TC action module")? Only that answer is a missing feature for sure. */
bool apply_extack_says_unknown(const char *msg);

/* Undo one item: delete the object its effective alternative put in the
 * kernel (u32 filters are found by their hash:node), or put a sysctl's
 * recorded previous value back. Absent objects and devices are not errors;
 * pending/skipped items have nothing to undo. */
int apply_remove_item(const struct plan_item *it, const struct apply_target *t, struct error *err);

#endif
