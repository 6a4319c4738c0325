/* uplink.h — the uplink (uplink.c): discovery, the record of its original
 * qdisc tree (restored on idle and --cleanup), and adoption / drift repair
 * of the node plan against what the kernel holds. */
#ifndef AIQOS_AGENT_NODE_UPLINK_H
#define AIQOS_AGENT_NODE_UPLINK_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "node.h"

struct cJSON;
struct nl_sock;
struct tc_dump_list;

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

/* The uplink's original root is `noqueue` (node.h NO QUEUE): the recorded
 * original, else the kernel's root now. False when it cannot be read. */
bool uplink_no_queue(struct nl_sock *sk, const struct uplink *up);
/* Is the uplink's ingress hook (ffff:) held by a qdisc that is not a clsact
 * (an `ingress` qdisc: no clsact can be added, so no classifier either)? */
bool uplink_ingress_held(struct nl_sock *sk, int ifindex);

int uplink_record_path(const char *state_dir, char *buf, size_t size);
/* -ENOENT when there is no record. */
int uplink_record_load(const char *path, struct uplink_record *ret, struct error *err);
int uplink_record_save(const char *path, const struct uplink_record *r, struct error *err);
/* Write the record j (consumed; NULL = out of memory) to path, durably
 * (it outlives crashes and reboots of the agent); what names it in errors
 * ("uplink record", "downlink record"). */
int uplink_record_write_json(const char *path, const char *what, struct cJSON *j, struct error *err);
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
/* Indices into dump (the uplink's objects) of an upload gate, or of a
 * redirect to PLAN_IFB_UP_NAME (or to no device), at the clsact egress hook
 * (GATED HTB): ours, deleted when not planned. Returns how many were
 * written to ret (room for dump->n). */
/* The filters aiqos makes at the uplink's clsact hooks: BPF programs named
 * UPLINK_PROG_PREFIX..., the match-all u32 redirects to aiqos's ifbs (prefs
 * NODE_FILTER_PRIO_UP_REDIRECT / NODE_FILTER_PRIO_REDIRECT). Anything else on
 * a hook is another tool's: never replaced nor deleted. */
#define UPLINK_PROG_PREFIX  TC_BPF_OURS_PREFIX
#define UPLINK_HOOK_INGRESS 1u
#define UPLINK_HOOK_EGRESS  2u
bool uplink_filter_ours(struct nl_sock *sk, const struct tc_spec *o);
/* "egress pref 1 handle 0x1 bpf cil_to_netdev direct-action" */
void uplink_filter_describe(const struct tc_spec *o, const char *kind, char *buf, size_t size);
/* How many filters at the hooks (UPLINK_HOOK_*) of a dump are not ours;
 * ret_clsact (optional): a clsact is there. */
unsigned uplink_hook_filters(struct nl_sock *sk, const struct tc_dump_list *d, unsigned hooks, bool *ret_clsact);
/* Delete our filters at the hooks; then the clsact, unless keep_clsact or
 * a filter (another tool's, or ours at a hook not released) is left on it. */
int uplink_hooks_release(struct nl_sock *sk, int ifindex, unsigned hooks, bool keep_clsact, struct error *err);
/* Any filter on the clsact (unreadable: true, it is kept). */
bool uplink_clsact_in_use(struct nl_sock *sk, int ifindex);
unsigned uplink_gate_objects(struct nl_sock *sk, const struct tc_dump_list *dump, unsigned *ret);
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
int uplink_adopt_match(struct plan *plan, const struct tc_dump_list *dump, bool root_is_ours, unsigned **ret_orphans,
                       unsigned *ret_n_orphans);
/* From the kernel's src-ip filters, a plan holding the ids and node ids
 * they have for the current pods (node_plan's prev: an adopted filter keeps
 * its handle). */
int uplink_prev_from_dump(const struct tc_dump_list *dump, const struct node_pod *pods, unsigned n, struct plan *ret);

#endif
