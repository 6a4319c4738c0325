/* q_prio.c — the prio qdisc: a bare struct tc_prio_qopt (bands + priomap) as
 * TCA_OPTIONS. The kernel requires the struct, so bands = 0 sends tc's
 * defaults (3 bands, priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1). */
#include <inttypes.h>

#include "tc_int.h"

#define PRIO_BANDS_MIN     2
#define PRIO_BANDS_DEFAULT 3

static const uint8_t prio_default_map[TC_PRIO_MAX + 1] = {1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};

/* The effective options: defaults when bands is unset. */
static void prio_effective(const struct tc_prio *p, struct tc_prio_qopt *ret)
{
	*ret = (struct tc_prio_qopt){0};
	if (p->bands == 0) {
		ret->bands = PRIO_BANDS_DEFAULT;
		memcpy(ret->priomap, prio_default_map, sizeof(ret->priomap));
	} else {
		ret->bands = (int)p->bands;
		memcpy(ret->priomap, p->priomap, sizeof(ret->priomap));
	}
}

static int prio_fill(struct nl_msg *msg, const struct tc_spec *s)
{
	struct tc_prio_qopt opt;

	prio_effective(&s->u.prio, &opt);
	if (opt.bands < PRIO_BANDS_MIN || opt.bands > TC_PRIO_BANDS_MAX)
		return -ERANGE;
	for (size_t i = 0; i < ARRAY_SIZE(opt.priomap); i++)
		if (opt.priomap[i] >= opt.bands)
			return -ERANGE;
	TC_PUT(nla_put(msg, TCA_OPTIONS, sizeof(opt), &opt));
	return 0;
}

static int prio_parse(const struct nlattr *opts, struct tc_spec *s)
{
	const struct tc_prio_qopt *opt;

	s->u.prio = (struct tc_prio){0};
	if (!opts)
		return 0;
	opt = tc_nla_data_min(opts, sizeof(*opt));
	if (!opt || opt->bands < 0)
		return -EBADMSG;
	s->u.prio.bands = (uint32_t)opt->bands;
	memcpy(s->u.prio.priomap, opt->priomap, sizeof(s->u.prio.priomap));
	return 0;
}

static int prio_format(const struct tc_spec *s, char *buf, size_t size)
{
	struct sbuf sb = sbuf_init(buf, size);
	struct tc_prio_qopt opt;

	prio_effective(&s->u.prio, &opt);
	sbuf_word(&sb, "bands %d priomap", opt.bands);
	for (size_t i = 0; i < ARRAY_SIZE(opt.priomap); i++)
		sbuf_word(&sb, "%u", opt.priomap[i]);
	return sbuf_result(&sb);
}

static bool prio_match(const struct tc_spec *d, const struct tc_spec *o)
{
	/* bands set: bands and the priomap given with them must both agree */
	if (!d->u.prio.bands)
		return true;
	return d->u.prio.bands == o->u.prio.bands &&
	       memcmp(d->u.prio.priomap, o->u.prio.priomap, sizeof(d->u.prio.priomap)) == 0;
}

const struct tc_kind tc_kind_prio = {
        .name = "prio",
        .type = TC_QDISC,
        .fill = prio_fill,
        .parse = prio_parse,
        .format = prio_format,
        .match = prio_match,
};
