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
	int pod_nsfd;               /* pod netns (for DEV_POD tc and all sysctls), -1 none */
	struct nl_sock *pod_sk;     /* rtnetlink socket opened in the pod netns */
	int pod_ifindex;
	struct nl_sock *host_sk;    /* rtnetlink socket in the host netns */
	int host_ifindex;           /* host-side veth, 0 if none */
	int uplink_ifindex;         /* DEV_UPLINK, 0 if none */
};

/* Apply p, filling each item's status/chosen/err. Returns 0 when every item
 * reached APPLIED or DEGRADED/SKIPPED for capability reasons; a negative
 * errno (with err) on a hard failure (netns gone, device gone, EPERM) —
 * items already applied keep their status so callers can record/undo. */
int apply_plan(struct plan *p, const struct apply_target *t, struct plan_caps *caps, struct error *err);

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

#endif
