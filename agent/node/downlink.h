/* downlink.h — the node's download direction as the agent keeps it (docs/design.md
 * §4): the ifb PLAN_IFB_NAME the uplink's ingress is
 * redirected to, recorded as ours in <stateDir>/downlink.json before it or
 * the ingress hook is created, and removed (ifb, and the clsact hook on the
 * uplink) on idle, when the download tree is turned off, on --cleanup and
 * uninstall. The tc objects themselves are items of the node plan (down.*,
 * node.h), applied, adopted and repaired with the uplink's. */
#ifndef AIQOS_AGENT_DOWNLINK_H
#define AIQOS_AGENT_DOWNLINK_H

#include <stdbool.h>

#include "error.h"
#include "plan.h"

struct agent;
struct nl_sock;
struct plan;
struct tc_dump_list;

#define AGENT_DOWNLINK_RECORD "downlink.json" /* in the state dir */

struct downlink {
	bool have_record;        /* downlink.json: the ifb and the hook on `uplink` are ours */
	char uplink[IFNAME_LEN]; /* the device whose ingress is redirected (record) */
	int ifb_ifindex;         /* 0 = no ifb */
	bool foreign_hook;       /* the uplink has an ingress qdisc aiqos did not create */
};

/* Before planning the node: when the download tree is wanted (mode, config,
 * caps), make sure the ifb exists and is up (recording it first) and say
 * whether the uplink's ingress hook is free; when it is not wanted, give
 * everything back. Fills ag->up.facts.ifb_ifindex / ingress_foreign.
 * Returns 0, or a negative errno with err (the download tree is then not
 * planned this pass). */
int downlink_prepare(struct agent *ag, bool wanted, struct error *err);

/* Remove the ingress hook (ours) from the recorded uplink, the ifb and the
 * record; drop the down.* items from the plan in force. Missing objects are
 * not errors. */
int downlink_give_back(struct agent *ag, struct error *err);

/* aiqos-agent --cleanup / uninstall: the same from the record alone. */
int downlink_cleanup(struct nl_sock *sk, const char *state_dir, struct error *err);

/* Adoption of one device's items of the node plan: uplink_adopt_match() on
 * the items of `dev` only (the node plan holds the uplink's and the ifb's
 * items; their tc handles overlap). Same outputs. */
int downlink_adopt_match_dev(struct plan *plan, enum plan_dev dev, const struct tc_dump_list *dump, bool root_is_ours,
                             unsigned **ret_orphans, unsigned *ret_n_orphans);

/* Delete the objects orph[0..n) of dump from the device ifindex (named
 * ifname in the log; what: "uplink", "download"): a failure is logged and
 * the rest go on. Returns how many were deleted (or already gone). */
int downlink_delete_orphans(struct nl_sock *sk, const struct tc_dump_list *dump, const unsigned *orph, unsigned n,
                            const char *ifname, int ifindex, const char *what);

/* Read the ifb (restart, drift repair): which down.* items on it are in
 * force; delete our orphans there. Returns objects deleted or -errno. */
int downlink_observe(struct agent *ag, struct plan *plan, struct error *err);
/* The same for any ifb of ours (dev: its items; ifname, what: for the log);
 * ifindex 0 or gone: nothing read, 0. */
int downlink_observe_ifb(struct agent *ag, struct plan *plan, enum plan_dev dev, const char *ifname, int ifindex,
                         const char *what, struct error *err);

#endif
