/* q_htb.c — the htb qdisc (TCA_HTB_INIT: default class, r2q) and the htb
 * class kind (TCA_HTB_PARMS: rate/ceil in bytes/s with 64-bit overflow
 * attributes, buckets as psched ticks, quantum, prio). No rate tables: the
 * link layer is given explicitly, which modern kernels accept. */
#include <inttypes.h>

#include "tc_int.h"

#define HTB_VERSION     3
#define HTB_R2Q_DEFAULT 10
#define HTB_PRIO_MAX    (TC_HTB_NUMPRIO - 1)

/* --- qdisc --- */

static int htb_fill(struct nl_msg *msg, const struct tc_spec *s)
{
	struct tc_htb_glob g = {
	        .version = HTB_VERSION,
	        .rate2quantum = s->u.htb.r2q ? s->u.htb.r2q : HTB_R2Q_DEFAULT,
	        .defcls = s->u.htb.defcls,
	};
	struct nlattr *opts = tc_nest_start(msg, TCA_OPTIONS);

	if (!opts)
		return -EMSGSIZE;
	TC_PUT(nla_put(msg, TCA_HTB_INIT, sizeof(g), &g));
	nla_nest_end(msg, opts);
	return 0;
}

static int htb_parse(const struct nlattr *opts, struct tc_spec *s)
{
	struct nlattr *tb[TCA_HTB_MAX + 1];
	const struct tc_htb_glob *g;
	int r;

	s->u.htb = (struct tc_htb){0};
	r = tc_nla_parse_options(tb, TCA_HTB_MAX, opts);
	if (r <= 0)
		return r;
	g = tc_nla_data_min(tb[TCA_HTB_INIT], sizeof(*g));
	if (g) {
		s->u.htb.defcls = g->defcls;
		s->u.htb.r2q = g->rate2quantum;
	}
	return 0;
}

static int htb_format(const struct tc_spec *s, char *buf, size_t size)
{
	struct sbuf sb = sbuf_init(buf, size);

	/* tc reads "default" as a hex minor, like class ids */
	if (s->u.htb.defcls)
		sbuf_word(&sb, "default %x", s->u.htb.defcls);
	if (s->u.htb.r2q)
		sbuf_word(&sb, "r2q %" PRIu32, s->u.htb.r2q);
	return sbuf_result(&sb);
}

static bool htb_match(const struct tc_spec *d, const struct tc_spec *o)
{
	return tc_match_value(d->u.htb.defcls, o->u.htb.defcls) && tc_match_value(d->u.htb.r2q, o->u.htb.r2q);
}

const struct tc_kind tc_kind_htb = {
        .name = "htb",
        .type = TC_QDISC,
        .fill = htb_fill,
        .parse = htb_parse,
        .format = htb_format,
        .match = htb_match,
};

/* --- class --- */

static void htb_ratespec(struct tc_ratespec *r, uint64_t rate_bytes, uint32_t overhead)
{
	*r = (struct tc_ratespec){
	        .linklayer = TC_LINKLAYER_ETHERNET,
	        .overhead = (unsigned short)overhead,
	        .rate = tc_rate32(rate_bytes),
	};
}

static int htb_class_fill(struct nl_msg *msg, const struct tc_spec *s)
{
	const struct tc_htb_class *c = &s->u.htb_class;
	uint64_t rate = c->rate_bps, ceil = c->ceil_bps ? c->ceil_bps : c->rate_bps;
	uint64_t rate_bytes = tc_rate_bytes(rate), ceil_bytes = tc_rate_bytes(ceil);
	struct tc_htb_opt opt = {0};
	struct nlattr *opts;

	/* the kernel refuses a class without rate or ceil */
	if (rate_bytes == 0 || ceil_bytes == 0)
		return -EINVAL;
	if (c->prio > HTB_PRIO_MAX || c->overhead_bytes > UINT16_MAX)
		return -ERANGE;

	htb_ratespec(&opt.rate, rate_bytes, c->overhead_bytes);
	htb_ratespec(&opt.ceil, ceil_bytes, c->overhead_bytes);
	opt.buffer = tc_xmit_ticks(rate, c->burst_bytes ? c->burst_bytes : tc_default_burst(rate));
	opt.cbuffer = tc_xmit_ticks(ceil, c->cburst_bytes ? c->cburst_bytes : tc_default_burst(ceil));
	opt.quantum = c->quantum_bytes;
	opt.prio = c->prio;

	opts = tc_nest_start(msg, TCA_OPTIONS);
	if (!opts)
		return -EMSGSIZE;
	TC_PUT_RATE64(msg, TCA_HTB_RATE64, rate_bytes);
	TC_PUT_RATE64(msg, TCA_HTB_CEIL64, ceil_bytes);
	TC_PUT(nla_put(msg, TCA_HTB_PARMS, sizeof(opt), &opt));
	nla_nest_end(msg, opts);
	return 0;
}

static int htb_class_parse(const struct nlattr *opts, struct tc_spec *s)
{
	struct nlattr *tb[TCA_HTB_MAX + 1];
	struct tc_htb_class *c = &s->u.htb_class;
	const struct tc_htb_opt *opt;
	int r;

	*c = (struct tc_htb_class){0};
	r = tc_nla_parse_options(tb, TCA_HTB_MAX, opts);
	if (r <= 0)
		return r;
	opt = tc_nla_data_min(tb[TCA_HTB_PARMS], sizeof(*opt));
	if (!opt)
		return 0;
	c->rate_bps = tc_rate_parse(&opt->rate, tb[TCA_HTB_RATE64]) * 8;
	c->ceil_bps = tc_rate_parse(&opt->ceil, tb[TCA_HTB_CEIL64]) * 8;
	c->burst_bytes = tc_ticks_to_bytes(c->rate_bps, opt->buffer);
	c->cburst_bytes = tc_ticks_to_bytes(c->ceil_bps, opt->cbuffer);
	c->quantum_bytes = opt->quantum;
	c->prio = opt->prio;
	c->overhead_bytes = opt->rate.overhead;
	return 0;
}

static int htb_class_format(const struct tc_spec *s, char *buf, size_t size)
{
	const struct tc_htb_class *c = &s->u.htb_class;
	struct sbuf sb = sbuf_init(buf, size);

	sbuf_rate(&sb, "rate", c->rate_bps);
	if (c->ceil_bps)
		sbuf_rate(&sb, "ceil", c->ceil_bps);
	if (c->burst_bytes)
		sbuf_size(&sb, "burst", c->burst_bytes);
	if (c->cburst_bytes)
		sbuf_size(&sb, "cburst", c->cburst_bytes);
	if (c->quantum_bytes)
		sbuf_word(&sb, "quantum %" PRIu32, c->quantum_bytes);
	sbuf_word(&sb, "prio %" PRIu32, c->prio);
	if (c->overhead_bytes)
		sbuf_word(&sb, "overhead %" PRIu32, c->overhead_bytes);
	return sbuf_result(&sb);
}

static bool htb_class_match(const struct tc_spec *d, const struct tc_spec *o)
{
	const struct tc_htb_class *dc = &d->u.htb_class, *oc = &o->u.htb_class;

	/* the kernel keeps rates in bytes per second */
	if (dc->rate_bps && tc_rate_bytes(dc->rate_bps) != tc_rate_bytes(oc->rate_bps))
		return false;
	if (dc->ceil_bps && tc_rate_bytes(dc->ceil_bps) != tc_rate_bytes(oc->ceil_bps))
		return false;
	if (dc->burst_bytes &&
	    !tc_burst_close(oc->rate_bps, tc_burst_read_back(dc->rate_bps, dc->burst_bytes), oc->burst_bytes))
		return false;
	if (dc->cburst_bytes &&
	    !tc_burst_close(oc->ceil_bps, tc_burst_read_back(dc->ceil_bps, dc->cburst_bytes), oc->cburst_bytes))
		return false;
	return tc_match_value(dc->quantum_bytes, oc->quantum_bytes) &&
	       tc_match_value(dc->overhead_bytes, oc->overhead_bytes) && dc->prio == oc->prio;
}

const struct tc_kind tc_kind_htb_class = {
        .name = "htb",
        .type = TC_CLASS,
        .fill = htb_class_fill,
        .parse = htb_class_parse,
        .format = htb_class_format,
        .match = htb_class_match,
};
