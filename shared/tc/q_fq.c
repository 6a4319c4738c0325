/* q_fq.c — the fq qdisc (per-flow fair queueing with pacing): packet limits,
 * quantum, CE-marking threshold (us), per-flow max rate (bytes/s, u32) and
 * pacing on/off. Unset fields send no attribute (kernel defaults). */
#include <inttypes.h>

#include "tc_int.h"

/* The kernel reports "disabled"/"unlimited" as ~0U. */
#define FQ_U32_NONE UINT32_MAX

static uint32_t fq_maxrate_bytes(uint64_t bps)
{
	uint64_t b = tc_rate_bytes(bps);
	return b >= FQ_U32_NONE ? FQ_U32_NONE : (uint32_t)b;
}

static int fq_fill(struct nl_msg *msg, const struct tc_spec *s)
{
	const struct tc_fq *f = &s->u.fq;
	struct nlattr *opts = tc_nest_start(msg, TCA_OPTIONS);

	if (!opts)
		return -EMSGSIZE;
	TC_PUT_U32_SET(msg, TCA_FQ_PLIMIT, f->limit_pkts);
	TC_PUT_U32_SET(msg, TCA_FQ_FLOW_PLIMIT, f->flow_limit_pkts);
	TC_PUT_U32_SET(msg, TCA_FQ_QUANTUM, f->quantum_bytes);
	if (f->pacing != TRI_UNSET)
		TC_PUT(nla_put_u32(msg, TCA_FQ_RATE_ENABLE, f->pacing == TRI_ON));
	if (f->maxrate_bps)
		TC_PUT(nla_put_u32(msg, TCA_FQ_FLOW_MAX_RATE, fq_maxrate_bytes(f->maxrate_bps)));
	TC_PUT_U32_SET(msg, TCA_FQ_CE_THRESHOLD, f->ce_threshold_us);
	nla_nest_end(msg, opts);
	return 0;
}

static int fq_parse(const struct nlattr *opts, struct tc_spec *s)
{
	struct nlattr *tb[TCA_FQ_MAX + 1];
	struct tc_fq *f = &s->u.fq;
	uint32_t v;
	int r;

	*f = (struct tc_fq){0};
	r = tc_nla_parse_options(tb, TCA_FQ_MAX, opts);
	if (r <= 0)
		return r;
	tc_nla_u32(tb[TCA_FQ_PLIMIT], &f->limit_pkts);
	tc_nla_u32(tb[TCA_FQ_FLOW_PLIMIT], &f->flow_limit_pkts);
	tc_nla_u32(tb[TCA_FQ_QUANTUM], &f->quantum_bytes);
	if (tc_nla_u32(tb[TCA_FQ_RATE_ENABLE], &v))
		f->pacing = v ? TRI_ON : TRI_OFF;
	if (tc_nla_u32(tb[TCA_FQ_FLOW_MAX_RATE], &v) && v != FQ_U32_NONE)
		f->maxrate_bps = (uint64_t)v * 8;
	if (tc_nla_u32(tb[TCA_FQ_CE_THRESHOLD], &v) && v != FQ_U32_NONE)
		f->ce_threshold_us = v;
	return 0;
}

static int fq_format(const struct tc_spec *s, char *buf, size_t size)
{
	const struct tc_fq *f = &s->u.fq;
	struct sbuf sb = sbuf_init(buf, size);

	if (f->limit_pkts)
		sbuf_word(&sb, "limit %" PRIu32, f->limit_pkts);
	if (f->flow_limit_pkts)
		sbuf_word(&sb, "flow_limit %" PRIu32, f->flow_limit_pkts);
	if (f->quantum_bytes)
		sbuf_word(&sb, "quantum %" PRIu32, f->quantum_bytes);
	if (f->maxrate_bps)
		sbuf_rate(&sb, "maxrate", f->maxrate_bps);
	if (f->ce_threshold_us)
		sbuf_time(&sb, "ce_threshold", f->ce_threshold_us);
	if (f->pacing != TRI_UNSET)
		sbuf_word(&sb, "%s", f->pacing == TRI_ON ? "pacing" : "nopacing");
	return sbuf_result(&sb);
}

static bool fq_match(const struct tc_spec *d, const struct tc_spec *o)
{
	const struct tc_fq *df = &d->u.fq, *of = &o->u.fq;
	/* observed 0 = unlimited (~0U bytes/s) */
	uint32_t of_maxrate = of->maxrate_bps ? fq_maxrate_bytes(of->maxrate_bps) : FQ_U32_NONE;

	return tc_match_value(df->limit_pkts, of->limit_pkts) &&
	       tc_match_value(df->flow_limit_pkts, of->flow_limit_pkts) &&
	       tc_match_value(df->quantum_bytes, of->quantum_bytes) && tc_match_value(df->pacing, of->pacing) &&
	       (!df->maxrate_bps || fq_maxrate_bytes(df->maxrate_bps) == of_maxrate) &&
	       tc_match_value(df->ce_threshold_us, of->ce_threshold_us);
}

const struct tc_kind tc_kind_fq = {
        .name = "fq",
        .type = TC_QDISC,
        .fill = fq_fill,
        .parse = fq_parse,
        .format = fq_format,
        .match = fq_match,
};
