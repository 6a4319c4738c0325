/* q_fq_codel.c — the fq_codel qdisc: CoDel target/interval/CE threshold in
 * microseconds, packet limit, flow count, quantum, memory limit, ECN. The
 * kernel keeps CoDel times in 1.024 us units, so a dump reads 1ms back as
 * 999us: match() allows that rounding. Note that the kernel refuses to change
 * `flows` on an existing fq_codel (EINVAL): replace it with flows unset. */
#include <inttypes.h>

#include "tc_int.h"

/* Two truncations through 1024 ns units lose at most ~2 us. */
#define CODEL_TIME_TOLERANCE_US 3
/* The kernel reports a disabled CE threshold this way (CODEL_DISABLED_THRESHOLD). */
#define CODEL_DISABLED_US UINT32_MAX

static bool codel_time_close(uint32_t want, uint32_t have)
{
	uint32_t diff = want > have ? want - have : have - want;
	return diff <= CODEL_TIME_TOLERANCE_US;
}

static int fq_codel_fill(struct nl_msg *msg, const struct tc_spec *s)
{
	const struct tc_fq_codel *f = &s->u.fq_codel;
	struct nlattr *opts = tc_nest_start(msg, TCA_OPTIONS);

	if (!opts)
		return -EMSGSIZE;
	TC_PUT_U32_SET(msg, TCA_FQ_CODEL_LIMIT, f->limit_pkts);
	TC_PUT_U32_SET(msg, TCA_FQ_CODEL_FLOWS, f->flows);
	TC_PUT_U32_SET(msg, TCA_FQ_CODEL_QUANTUM, f->quantum_bytes);
	TC_PUT_U32_SET(msg, TCA_FQ_CODEL_INTERVAL, f->interval_us);
	TC_PUT_U32_SET(msg, TCA_FQ_CODEL_TARGET, f->target_us);
	if (f->ecn != TRI_UNSET)
		TC_PUT(nla_put_u32(msg, TCA_FQ_CODEL_ECN, f->ecn == TRI_ON));
	TC_PUT_U32_SET(msg, TCA_FQ_CODEL_CE_THRESHOLD, f->ce_threshold_us);
	TC_PUT_U32_SET(msg, TCA_FQ_CODEL_MEMORY_LIMIT, f->memory_limit_bytes);
	nla_nest_end(msg, opts);
	return 0;
}

static int fq_codel_parse(const struct nlattr *opts, struct tc_spec *s)
{
	struct nlattr *tb[TCA_FQ_CODEL_MAX + 1];
	struct tc_fq_codel *f = &s->u.fq_codel;
	uint32_t v;
	int r;

	*f = (struct tc_fq_codel){0};
	r = tc_nla_parse_options(tb, TCA_FQ_CODEL_MAX, opts);
	if (r <= 0)
		return r;
	tc_nla_u32(tb[TCA_FQ_CODEL_TARGET], &f->target_us);
	tc_nla_u32(tb[TCA_FQ_CODEL_INTERVAL], &f->interval_us);
	tc_nla_u32(tb[TCA_FQ_CODEL_LIMIT], &f->limit_pkts);
	tc_nla_u32(tb[TCA_FQ_CODEL_FLOWS], &f->flows);
	tc_nla_u32(tb[TCA_FQ_CODEL_QUANTUM], &f->quantum_bytes);
	tc_nla_u32(tb[TCA_FQ_CODEL_MEMORY_LIMIT], &f->memory_limit_bytes);
	if (tc_nla_u32(tb[TCA_FQ_CODEL_CE_THRESHOLD], &v) && v != CODEL_DISABLED_US)
		f->ce_threshold_us = v;
	if (tc_nla_u32(tb[TCA_FQ_CODEL_ECN], &v))
		f->ecn = v ? TRI_ON : TRI_OFF;
	return 0;
}

static int fq_codel_format(const struct tc_spec *s, char *buf, size_t size)
{
	const struct tc_fq_codel *f = &s->u.fq_codel;
	struct sbuf sb = sbuf_init(buf, size);

	if (f->limit_pkts)
		sbuf_word(&sb, "limit %" PRIu32, f->limit_pkts);
	if (f->flows)
		sbuf_word(&sb, "flows %" PRIu32, f->flows);
	if (f->quantum_bytes)
		sbuf_word(&sb, "quantum %" PRIu32, f->quantum_bytes);
	if (f->target_us)
		sbuf_time(&sb, "target", f->target_us);
	if (f->interval_us)
		sbuf_time(&sb, "interval", f->interval_us);
	if (f->memory_limit_bytes)
		sbuf_size(&sb, "memory_limit", f->memory_limit_bytes);
	if (f->ecn != TRI_UNSET)
		sbuf_word(&sb, "%s", f->ecn == TRI_ON ? "ecn" : "noecn");
	if (f->ce_threshold_us)
		sbuf_time(&sb, "ce_threshold", f->ce_threshold_us);
	return sbuf_result(&sb);
}

static bool fq_codel_match(const struct tc_spec *d, const struct tc_spec *o)
{
	const struct tc_fq_codel *df = &d->u.fq_codel, *of = &o->u.fq_codel;

	if (df->target_us && !codel_time_close(df->target_us, of->target_us))
		return false;
	if (df->interval_us && !codel_time_close(df->interval_us, of->interval_us))
		return false;
	if (df->ce_threshold_us && !codel_time_close(df->ce_threshold_us, of->ce_threshold_us))
		return false;
	return tc_match_value(df->limit_pkts, of->limit_pkts) && tc_match_value(df->flows, of->flows) &&
	       tc_match_value(df->quantum_bytes, of->quantum_bytes) &&
	       tc_match_value(df->memory_limit_bytes, of->memory_limit_bytes) && tc_match_value(df->ecn, of->ecn);
}

const struct tc_kind tc_kind_fq_codel = {
        .name = "fq_codel",
        .type = TC_QDISC,
        .fill = fq_codel_fill,
        .parse = fq_codel_parse,
        .format = fq_codel_format,
        .match = fq_codel_match,
};
