/* plan.h — the pure planner: (workload, profile, interface facts, kernel
 * capabilities) -> an ordered plan of tc objects and sysctls. Each plan item
 * has ordered alternatives, best first; the applier (apply.h) picks the first
 * the kernel accepts and records the choice in the item (effective vs
 * desired). ADD, CHECK, the agent and `aiqosctl plan` all use this planner,
 * and plan_diff() is the one comparison. No I/O here. */
#ifndef AIQOS_PLAN_H
#define AIQOS_PLAN_H

#include "profile.h"
#include "tc/tc.h"

struct cJSON;

#define PLAN_ALT_MAX     4
#define PLAN_ID_MAX      32
#define SYSCTL_KEY_MAX   64
#define SYSCTL_VAL_MAX   64
#define IFNAME_LEN       16           /* IFNAMSIZ */
#define PLAN_IFB_NAME    "aiqos-ifb0" /* DEV_IFB: created, recorded and removed by the agent */
#define PLAN_IFB_UP_NAME "aiqos-ifb1" /* DEV_IFB_UP: likewise */

/* Which device an item applies to. */
enum plan_dev {
	DEV_POD,    /* the pod's interface, inside the pod netns (sysctls: the pod netns) */
	DEV_HOST,   /* the host-side peer of the pod's veth, in the host netns */
	DEV_UPLINK, /* the node's uplink (agent) */
	DEV_IFB,    /* the node's download shaper: the ifb the uplink's ingress is redirected to (agent) */
	DEV_IFB_UP, /* the node's gated upload shaper: the ifb the uplink's egress is redirected to (agent) */
	_DEV_MAX,
	_DEV_INVALID = -1,
};

enum plan_item_type {
	ITEM_TC,
	ITEM_SYSCTL,
	_ITEM_TYPE_MAX,
	_ITEM_TYPE_INVALID = -1,
};

/* Capabilities of a kernel: what is known to be missing. Unknown = try.
 * The applier learns missing kinds as it goes (plan_caps_mark_missing), with
 * the errno the kernel refused them with; caps.h keeps them across runs. */
#define PLAN_CAPS_CC_MAX 128
struct plan_caps {
	uint32_t missing_kinds;              /* bit (1 << tc_kind_id) */
	bool missing_pedit;                  /* act_pedit/act_csum unavailable (DSCP rewrite) */
	char cc_available[PLAN_CAPS_CC_MAX]; /* tcp_available_congestion_control, "" = unknown */
	/* the kernel's refusal of a missing kind / of pedit (0 = not recorded):
	 * an alternative skipped as known-missing is recorded with it */
	int missing_errno[_TC_KIND_MAX];
	int missing_pedit_errno;
	/* congestion controls the kernel refused as unknown (ENOENT on
	 * tcp_congestion_control while the key exists), space-separated */
	char cc_missing[PLAN_CAPS_CC_MAX];
};

enum item_status {
	ITEM_PENDING,  /* not applied yet */
	ITEM_APPLIED,  /* alternative `chosen` is in the kernel */
	ITEM_DEGRADED, /* applied, but not the first alternative (chosen > 0) */
	ITEM_SKIPPED,  /* no alternative could be applied (reason in err/reason) */
	_ITEM_STATUS_MAX,
};

struct plan_item {
	enum plan_item_type type;
	enum plan_dev dev;
	char id[PLAN_ID_MAX];      /* stable role, e.g. "egress.root", "sysctl.cc" */
	char depends[PLAN_ID_MAX]; /* id of an item that must be applied first ("" = none) */
	unsigned n_alt;
	struct tc_spec tc[PLAN_ALT_MAX];        /* ITEM_TC */
	char key[SYSCTL_KEY_MAX];               /* ITEM_SYSCTL: "net/ipv4/tcp_ecn" */
	char val[PLAN_ALT_MAX][SYSCTL_VAL_MAX]; /* ITEM_SYSCTL alternatives */
	/* effective (filled by the applier, or from state) */
	enum item_status status;
	int chosen; /* index of the applied alternative, -1 = none */
	int err;    /* errno of the last refused alternative (why degraded/skipped) */
	/* the kernel said the first alternative's kind, classifier or action is
	 * unknown (its extack; or the capability was learnt missing so): only
	 * then is err reported as a missing feature (reason.h) */
	bool unknown;
	char prev[SYSCTL_VAL_MAX]; /* ITEM_SYSCTL: the value before aiqos wrote it ("" = unknown) */
};

/* A plan: the pod's (a dozen items) or the node's (one filter per pod
 * address: 250 dual-stack pods need ~510 items; struct plan_item is ~660
 * bytes), items on the heap. Zero-initialise it ({0}); plan_free() (or
 * _cleanup_plan_) frees the items and leaves it empty and reusable. */
struct plan {
	unsigned n;   /* items in use */
	unsigned cap; /* allocated */
	/* what is in the kernel is not known (an ADD killed before it recorded
	 * its choices): removal tries every alternative (apply_remove) */
	bool choices_unknown;
	struct plan_item *items; /* in plan order: an item's dependency comes before it */
};

/* The container (plan_items.c) */
void plan_free(struct plan *p); /* frees the items; p becomes empty */
static inline void plan_freep(struct plan *p)
{
	plan_free(p);
}
#define _cleanup_plan_ _cleanup_(plan_freep)
/* Room for n items in all (a planner that knows its size up front):
 * -ENOMEM. */
int plan_reserve(struct plan *p, unsigned n);
/* A new item at the end (PENDING, chosen -1, no alternative): NULL when out
 * of memory. It may move the items: pointers into p->items from before are
 * stale. */
struct plan_item *plan_item_add(struct plan *p, enum plan_item_type type, enum plan_dev dev, const char *id,
                                const char *depends);
/* dst becomes a copy of src (dst's items freed first; dst zero-initialised
 * or a plan); -ENOMEM leaves dst empty. */
int plan_copy(const struct plan *src, struct plan *dst);

/* Facts about the interfaces of one attachment. */
struct attach_ifaces {
	char pod_ifname[IFNAME_LEN];  /* e.g. "eth0" (inside the netns) */
	char host_ifname[IFNAME_LEN]; /* host-side veth, "" if not a veth */
	uint32_t mtu;                 /* 0 = unknown (1500 assumed) */
};

/* Build the per-pod plan into ret (zero-initialised or a plan: its items
 * are replaced). Deterministic; never fails for any valid input but with
 * -ENOMEM (ret empty then). */
int plan_pod(const struct workload *w, const struct profile *p, const struct attach_ifaces *ifs,
             const struct plan_caps *caps, struct plan *ret);

/* Items and their status */
const char *plan_dev_name(enum plan_dev d);
const char *item_status_name(enum item_status s);
/* The interface name printed for each device: dev[d] NULL or "" is the
 * default, "pod" / "host" / "uplink" / PLAN_IFB_NAME. */
struct plan_names {
	const char *dev[_DEV_MAX];
};
/* The names of an attachment's devices (pointing into ifs; ifs may be NULL) */
struct plan_names plan_names_attach(const struct attach_ifaces *ifs);
/* names may be NULL (the defaults) */
const char *plan_dev_ifname(const struct plan_names *names, enum plan_dev d);
struct plan_item *plan_find(struct plan *p, const char *id);
const struct plan_item *plan_find_const(const struct plan *p, const char *id);
/* The spec in force for an item: chosen alternative, or NULL when skipped/pending. */
const struct tc_spec *plan_item_effective_tc(const struct plan_item *it);
const char *plan_item_effective_val(const struct plan_item *it);
/* Counts of items by status */
unsigned plan_count(const struct plan *p, enum item_status s);

/* Building (plan_items.c), for every planner. An item's alternatives are
 * one kernel object of different kinds: set the identity (type, parent,
 * handle, prio, protocol) on tc[0] first; plan_alt_add() appends a zeroed
 * alternative of `kind` with that identity (NULL when PLAN_ALT_MAX are
 * there), plan_alt_first() sets the identity and adds the first. */
struct tc_spec *plan_alt_add(struct plan_item *it, enum tc_kind_id kind);
struct tc_spec *plan_alt_first(struct plan_item *it, enum tc_type type, enum tc_kind_id kind, uint32_t parent,
                               uint32_t handle);
/* An HTB class's burst: 2 ms at its rate (HTB's timer slack and a few
 * packets of jitter are absorbed without falling below the rate, and a class
 * never exceeds its limit for long, unlike a 2^32-1 bit burst), at least
 * min_bytes, at most 16 MiB. The floor is the caller's: a pod's shaper uses
 * two full frames, the node's classes NODE_FIFO_MIN_BYTES (two 64 KiB GSO
 * packets). */
uint32_t plan_htb_burst_bytes(uint64_t rate_bps, uint32_t min_bytes);
/* An HTB class's quantum: 1 ms worth of bytes at its rate, clamped to
 * [frame, 200000] (HTB warns above 200000). */
uint32_t plan_htb_quantum_bytes(uint64_t rate_bps, uint32_t frame);

void plan_caps_mark_missing(struct plan_caps *caps, enum tc_kind_id k);
bool plan_caps_has(const struct plan_caps *caps, enum tc_kind_id k);

/* Rendering (plan_format.c). Text: one line per item with status, as tc(8)
 * commands; names (may be NULL) says what to print for each device. */
enum plan_format { PLAN_FMT_TEXT, PLAN_FMT_TC, PLAN_FMT_JSON };
/* Append the rendering of p to a malloc'd string in *ret (caller frees).
 * `effective_only`: print only what is in force (chosen alternatives). */
int plan_render(const struct plan *p, const struct plan_names *names, const char *netns, enum plan_format fmt,
                bool effective_only, char **ret);
/* The items as PLAN_FMT_JSON renders them, a cJSON array (NULL on
 * ENOMEM), for a caller that embeds them in its own document. */
struct cJSON *plan_to_json(const struct plan *p, const struct plan_names *names, bool effective_only);
/* Effective choices as JSON (for the state file) and back. The desired plan
 * is recomputed by the planner; only choices (id, chosen, status, err) are stored. */
struct cJSON *plan_choices_to_json(const struct plan *p);
int plan_choices_from_json(struct plan *p, const struct cJSON *choices, struct error *err);

/* Observed kernel state (observe.h fills it) */
#define OBSERVED_MAX        128
#define OBSERVED_SYSCTL_MAX 64
struct observed {
	unsigned n;
	enum plan_dev dev[OBSERVED_MAX];
	struct tc_spec tc[OBSERVED_MAX];
	unsigned n_sysctl;
	char sysctl_key[OBSERVED_SYSCTL_MAX][SYSCTL_KEY_MAX];
	char sysctl_val[OBSERVED_SYSCTL_MAX][SYSCTL_VAL_MAX];
};

/* Compare the effective plan with what the kernel has. Pure. Writes one line
 * per difference into buf ("egress.root on eth0: want fq_codel target 1ms, have
 * pfifo_fast") and returns the number of differences. Skipped items are not
 * differences. */
int plan_diff(const struct plan *p, const struct attach_ifaces *ifs, const struct observed *obs, char *buf,
              size_t size);

#endif
