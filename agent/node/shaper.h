/* shaper.h — the gated upload tree's ifb as the agent keeps it (node.h,
 * GATED HTB): PLAN_IFB_UP_NAME, recorded as ours in <stateDir>/shaper.json
 * before it is created, created before the plan that redirects to it,
 * removed once nothing in force sends to it (another shape, idle), and on
 * --cleanup and uninstall. Its tc objects are items of the node plan
 * (shaper.*, on DEV_IFB_UP), applied, adopted and repaired with the
 * uplink's. */
#ifndef AIQOS_AGENT_SHAPER_H
#define AIQOS_AGENT_SHAPER_H

#include <stdbool.h>

#include "error.h"

struct agent;
struct nl_sock;
struct plan;
struct tc_dump_list;

#define AGENT_SHAPER_RECORD "shaper.json" /* in the state dir */

struct shaper {
	bool have_record; /* shaper.json: the ifb is ours */
	bool wanted;      /* this pass plans the gated tree */
	int ifb_ifindex;  /* 0 = no ifb */
};

/* Before planning the node: when the gated tree is wanted, make sure the
 * ifb exists and is up (recording it first). Fills
 * ag->up.facts.ifb_up_ifindex, and ifb_up_failed when it cannot (the plan
 * then shapes with HTB at the root; err says why). */
int shaper_prepare(struct agent *ag, bool wanted, struct error *err);

/* After the pass: when the gated tree is not wanted and nothing in force
 * sends to the ifb, delete it and its record. Missing objects are fine. */
int shaper_settle(struct agent *ag, struct error *err);

/* aiqos-agent --cleanup / uninstall: the same from the record alone. */
int shaper_cleanup(struct nl_sock *sk, const char *state_dir, struct error *err);

/* Read the ifb (restart, drift repair): which shaper.* items on it are in
 * force; delete our orphans there. Returns objects deleted or -errno. */
int shaper_observe(struct agent *ag, struct plan *plan, struct error *err);

#endif
