/* q_clsact.c — the clsact pseudo-qdisc: the ingress/egress filter hooks
 * (parent TC_H_CLSACT, handle ffff:). It has no options; fill sends none so a
 * replace of an existing clsact is a no-op rather than a refused change. */
#include "tc_int.h"

static int clsact_fill(struct nl_msg *msg, const struct tc_spec *s)
{
	return 0;
}

static int clsact_parse(const struct nlattr *opts, struct tc_spec *s)
{
	return 0;
}

static int clsact_format(const struct tc_spec *s, char *buf, size_t size)
{
	struct sbuf sb = sbuf_init(buf, size);
	return sbuf_result(&sb);
}

static bool clsact_match(const struct tc_spec *d, const struct tc_spec *o)
{
	return true;
}

const struct tc_kind tc_kind_clsact = {
        .name = "clsact",
        .type = TC_QDISC,
        .fill = clsact_fill,
        .parse = clsact_parse,
        .format = clsact_format,
        .match = clsact_match,
};
