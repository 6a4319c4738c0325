/* q_fifo.c — bfifo (limit in bytes) and pfifo (limit in packets). Their
 * TCA_OPTIONS is a bare struct tc_fifo_qopt, not a nest; with no limit the
 * attribute is left out and the kernel derives one from txqueuelen. */
#include <inttypes.h>

#include "tc_int.h"

static int fifo_fill(struct nl_msg *msg, const struct tc_spec *s)
{
	struct tc_fifo_qopt opt = {.limit = s->u.fifo.limit};

	if (opt.limit)
		TC_PUT(nla_put(msg, TCA_OPTIONS, sizeof(opt), &opt));
	return 0;
}

static int fifo_parse(const struct nlattr *opts, struct tc_spec *s)
{
	const struct tc_fifo_qopt *opt;

	s->u.fifo = (struct tc_fifo){0};
	if (!opts)
		return 0;
	opt = tc_nla_data_min(opts, sizeof(*opt));
	if (!opt)
		return -EBADMSG;
	s->u.fifo.limit = opt->limit;
	return 0;
}

static int bfifo_format(const struct tc_spec *s, char *buf, size_t size)
{
	struct sbuf sb = sbuf_init(buf, size);

	if (s->u.fifo.limit)
		sbuf_size(&sb, "limit", s->u.fifo.limit);
	return sbuf_result(&sb);
}

static int pfifo_format(const struct tc_spec *s, char *buf, size_t size)
{
	struct sbuf sb = sbuf_init(buf, size);

	if (s->u.fifo.limit)
		sbuf_word(&sb, "limit %" PRIu32, s->u.fifo.limit);
	return sbuf_result(&sb);
}

static bool fifo_match(const struct tc_spec *d, const struct tc_spec *o)
{
	return tc_match_value(d->u.fifo.limit, o->u.fifo.limit);
}

const struct tc_kind tc_kind_bfifo = {
        .name = "bfifo",
        .type = TC_QDISC,
        .fill = fifo_fill,
        .parse = fifo_parse,
        .format = bfifo_format,
        .match = fifo_match,
};

const struct tc_kind tc_kind_pfifo = {
        .name = "pfifo",
        .type = TC_QDISC,
        .fill = fifo_fill,
        .parse = fifo_parse,
        .format = pfifo_format,
        .match = fifo_match,
};
