/* q_tbf.c — the tbf token-bucket shaper: TCA_TBF_PARMS (rate, limit, bucket
 * as psched ticks), TCA_TBF_RATE64 above 2^32 bytes/s and TCA_TBF_BURST (the
 * bucket in bytes, which the kernel prefers). The kernel needs rate, burst and
 * a non-zero limit (limit 0 leaves tbf without a queue: every packet drops),
 * so unset burst/limit get defaults here and format() prints them. */
#include "tc_int.h"

static uint32_t tbf_burst(const struct tc_tbf *t)
{
	return t->burst_bytes ? t->burst_bytes : tc_default_burst(t->rate_bps);
}

/* Default queue: the bucket plus one millisecond of traffic at the rate —
 * shallow on purpose (the 25 ms of the reference bandwidth plugin is the
 * bufferbloat this project avoids). */
static uint32_t tbf_limit(const struct tc_tbf *t)
{
	uint64_t l;

	if (t->limit_bytes)
		return t->limit_bytes;
	l = (uint64_t)tbf_burst(t) + tc_rate_bytes(t->rate_bps) / 1000;
	return l > UINT32_MAX ? UINT32_MAX : (uint32_t)l;
}

static int tbf_fill(struct nl_msg *msg, const struct tc_spec *s)
{
	const struct tc_tbf *t = &s->u.tbf;
	uint64_t rate_bytes = tc_rate_bytes(t->rate_bps);
	uint32_t burst = tbf_burst(t);
	struct tc_tbf_qopt opt = {0};
	struct nlattr *opts;

	if (rate_bytes == 0)
		return -EINVAL;
	opt.rate.linklayer = TC_LINKLAYER_ETHERNET;
	opt.rate.rate = tc_rate32(rate_bytes);
	opt.limit = tbf_limit(t);
	opt.buffer = tc_xmit_ticks(t->rate_bps, burst);

	opts = tc_nest_start(msg, TCA_OPTIONS);
	if (!opts)
		return -EMSGSIZE;
	TC_PUT(nla_put(msg, TCA_TBF_PARMS, sizeof(opt), &opt));
	TC_PUT(nla_put_u32(msg, TCA_TBF_BURST, burst));
	TC_PUT_RATE64(msg, TCA_TBF_RATE64, rate_bytes);
	nla_nest_end(msg, opts);
	return 0;
}

static int tbf_parse(const struct nlattr *opts, struct tc_spec *s)
{
	struct nlattr *tb[TCA_TBF_MAX + 1];
	const struct tc_tbf_qopt *opt;
	int r;

	s->u.tbf = (struct tc_tbf){0};
	r = tc_nla_parse_options(tb, TCA_TBF_MAX, opts);
	if (r <= 0)
		return r;
	opt = tc_nla_data_min(tb[TCA_TBF_PARMS], sizeof(*opt));
	if (!opt)
		return 0;
	s->u.tbf.rate_bps = tc_rate_parse(&opt->rate, tb[TCA_TBF_RATE64]) * 8;
	s->u.tbf.limit_bytes = opt->limit;
	s->u.tbf.burst_bytes = tc_ticks_to_bytes(s->u.tbf.rate_bps, opt->buffer);
	return 0;
}

static int tbf_format(const struct tc_spec *s, char *buf, size_t size)
{
	const struct tc_tbf *t = &s->u.tbf;
	struct sbuf sb = sbuf_init(buf, size);

	sbuf_rate(&sb, "rate", t->rate_bps);
	sbuf_size(&sb, "burst", tbf_burst(t));
	sbuf_size(&sb, "limit", tbf_limit(t));
	return sbuf_result(&sb);
}

static bool tbf_match(const struct tc_spec *d, const struct tc_spec *o)
{
	const struct tc_tbf *dt = &d->u.tbf, *ot = &o->u.tbf;

	if (dt->rate_bps && tc_rate_bytes(dt->rate_bps) != tc_rate_bytes(ot->rate_bps))
		return false;
	if (dt->burst_bytes &&
	    !tc_burst_close(ot->rate_bps, tc_burst_read_back(dt->rate_bps, dt->burst_bytes), ot->burst_bytes))
		return false;
	return tc_match_value(dt->limit_bytes, ot->limit_bytes);
}

const struct tc_kind tc_kind_tbf = {
        .name = "tbf",
        .type = TC_QDISC,
        .fill = tbf_fill,
        .parse = tbf_parse,
        .format = tbf_format,
        .match = tbf_match,
};
