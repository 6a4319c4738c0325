/* q_mq.c — the mq qdisc: the multi-queue root that gives every tx queue of a
 * device its own child qdisc (and lock). It has no options; its classes
 * 1:1 .. 1:N (one per tx queue) exist by themselves and are not modelled as
 * objects: children are grafted with "parent <mq handle>:<queue + 1>". */
#include "tc_int.h"

static int mq_fill(struct nl_msg *msg, const struct tc_spec *s)
{
	return 0;
}

static int mq_parse(const struct nlattr *opts, struct tc_spec *s)
{
	return 0;
}

static int mq_format(const struct tc_spec *s, char *buf, size_t size)
{
	struct sbuf sb = sbuf_init(buf, size);
	return sbuf_result(&sb);
}

static bool mq_match(const struct tc_spec *d, const struct tc_spec *o)
{
	return true;
}

const struct tc_kind tc_kind_mq = {
        .name = "mq",
        .type = TC_QDISC,
        .fill = mq_fill,
        .parse = mq_parse,
        .format = mq_format,
        .match = mq_match,
};
