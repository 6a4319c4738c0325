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

#endif
