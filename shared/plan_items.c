/* plan_items.c — what every planner builds plans with (the pod planner
 * plan.c, the node planner plan_node*.c): alternatives that share their
 * item's object identity, the HTB class sizing rule, and the lookups and
 * counts on a plan's items. Pure. */
#include "plan.h"

#define HTB_BURST_US    2000u /* the burst: 2 ms at the rate */
#define HTB_BURST_MAX   (16u << 20)
#define HTB_QUANTUM_MAX 200000u /* HTB warns above it */

static uint64_t clamp_u64(uint64_t v, uint64_t lo, uint64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* ---- alternatives ---- */

struct tc_spec *plan_alt_add(struct plan_item *it, enum tc_kind_id kind)
{
	struct tc_spec ident = it->tc[0];
	struct tc_spec *s;

	if (it->n_alt >= PLAN_ALT_MAX)
		return NULL;
	s = &it->tc[it->n_alt++];
	memset(s, 0, sizeof(*s));
	s->type = ident.type;
	s->parent = ident.parent;
	s->handle = ident.handle;
	s->prio = ident.prio;
	s->protocol = ident.protocol;
	s->kind = kind;
	return s;
}

struct tc_spec *plan_alt_first(struct plan_item *it, enum tc_type type, enum tc_kind_id kind, uint32_t parent,
                               uint32_t handle)
{
	struct tc_spec *s = plan_alt_add(it, kind);

	if (!s)
		s = &it->tc[0]; /* not reached: a new item has no alternative yet */
	s->type = type;
	s->parent = parent;
	s->handle = handle;
	return s;
}

/* ---- HTB classes ---- */

uint32_t plan_htb_burst_bytes(uint64_t rate_bps, uint32_t min_bytes)
{
	return (uint32_t)clamp_u64(rate_bps / 8 * HTB_BURST_US / 1000000, min_bytes, HTB_BURST_MAX);
}

uint32_t plan_htb_quantum_bytes(uint64_t rate_bps, uint32_t frame)
{
	return (uint32_t)clamp_u64(rate_bps / 8 / 1000, frame, HTB_QUANTUM_MAX);
}
