/* plan_items.c — the plan container (struct plan: items on the heap) and
 * what every planner builds plans with (the pod planner plan.c, the node
 * planner plan_node*.c): items, alternatives that share their item's object
 * identity, the HTB class sizing rule; and the lookups and counts on a
 * plan's items. Pure. */
#include <limits.h>

#include "plan.h"

#define HTB_BURST_US    2000u /* the burst: 2 ms at the rate */
#define HTB_BURST_MAX   (16u << 20)
#define HTB_QUANTUM_MAX 200000u /* HTB warns above it */

static uint64_t clamp_u64(uint64_t v, uint64_t lo, uint64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* ---- the container ---- */

void plan_free(struct plan *p)
{
	if (!p)
		return;
	free(p->items);
	*p = (struct plan){0};
}

int plan_reserve(struct plan *p, unsigned n)
{
	struct plan_item *items;

	if (n <= p->cap)
		return 0;
	items = reallocarray(p->items, n, sizeof(*items));
	if (!items)
		return -ENOMEM;
	p->items = items;
	p->cap = n;
	return 0;
}

struct plan_item *plan_item_add(struct plan *p, enum plan_item_type type, enum plan_dev dev, const char *id,
                                const char *depends)
{
	struct plan_item *it;

	if (p->n >= p->cap && (p->n >= UINT_MAX / 2 || plan_reserve(p, p->cap ? 2 * p->cap : 16) < 0))
		return NULL;
	it = &p->items[p->n++];
	memset(it, 0, sizeof(*it));
	it->type = type;
	it->dev = dev;
	str_copy(it->id, sizeof(it->id), id);
	str_copy(it->depends, sizeof(it->depends), depends ? depends : "");
	it->status = ITEM_PENDING;
	it->chosen = -1;
	it->err = 0;
	return it;
}

int plan_copy(const struct plan *src, struct plan *dst)
{
	plan_free(dst);
	if (!src || src->n == 0) {
		dst->choices_unknown = src && src->choices_unknown;
		return 0;
	}
	dst->items = calloc(src->n, sizeof(*dst->items));
	if (!dst->items)
		return -ENOMEM;
	memcpy(dst->items, src->items, src->n * sizeof(*dst->items));
	dst->n = dst->cap = src->n;
	dst->choices_unknown = src->choices_unknown;
	return 0;
}

/* ---- lookups and counts ---- */

const struct plan_item *plan_find_const(const struct plan *p, const char *id)
{
	if (!p || !id)
		return NULL;
	for (unsigned i = 0; i < p->n; i++)
		if (streq(p->items[i].id, id))
			return &p->items[i];
	return NULL;
}

struct plan_item *plan_find(struct plan *p, const char *id)
{
	/* the item is p's, which the caller may change */
	return (struct plan_item *)(uintptr_t)plan_find_const(p, id);
}

static bool item_has_effective(const struct plan_item *it)
{
	return (it->status == ITEM_APPLIED || it->status == ITEM_DEGRADED) && it->chosen >= 0 &&
	       (unsigned)it->chosen < it->n_alt && it->n_alt <= PLAN_ALT_MAX;
}

const struct tc_spec *plan_item_effective_tc(const struct plan_item *it)
{
	if (!it || it->type != ITEM_TC || !item_has_effective(it))
		return NULL;
	return &it->tc[it->chosen];
}

const char *plan_item_effective_val(const struct plan_item *it)
{
	if (!it || it->type != ITEM_SYSCTL || !item_has_effective(it))
		return NULL;
	return it->val[it->chosen];
}

unsigned plan_count(const struct plan *p, enum item_status s)
{
	unsigned n = 0;

	for (unsigned i = 0; p && i < p->n; i++)
		if (p->items[i].status == s)
			n++;
	return n;
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
