/* f_bpf.c — the bpf classifier (cls_bpf) in direct-action mode: a loaded
 * BPF_PROG_TYPE_SCHED_CLS program attached by fd (TCA_BPF_FD) under a name
 * (TCA_BPF_NAME). The program itself is not a tc object: the caller loads it
 * (bpf_cls.h) and puts its fd in u.bpf.prog_fd just before the object is
 * sent; the planner leaves it -1 and a missing fd is -EBADF. Identity and
 * match are the name, the flags and, where both sides know it, the
 * program's tag (TCA_BPF_TAG: another version of the program does not
 * match); the kernel reports the program's id (TCA_BPF_ID), which parse
 * keeps for finding the program (and its maps) again after a restart. */
#include <inttypes.h>

#include "tc_int.h"

static int bpf_fill(struct nl_msg *msg, const struct tc_spec *s)
{
	const struct tc_bpf *b = &s->u.bpf;
	struct nlattr *opts;

	if (b->prog_fd < 0)
		return -EBADF;
	if (!memchr(b->name, '\0', sizeof(b->name)))
		return -EINVAL;
	opts = tc_nest_start(msg, TCA_OPTIONS);
	if (!opts)
		return -EMSGSIZE;
	TC_PUT(nla_put_u32(msg, TCA_BPF_FD, (uint32_t)b->prog_fd));
	TC_PUT(nla_put_string(msg, TCA_BPF_NAME, b->name));
	TC_PUT(nla_put_u32(msg, TCA_BPF_FLAGS, b->flags));
	nla_nest_end(msg, opts);
	return 0;
}

static int bpf_parse(const struct nlattr *opts, struct tc_spec *s)
{
	struct nlattr *tb[TCA_BPF_MAX + 1];
	struct tc_bpf *b = &s->u.bpf;
	int r;

	memset(b, 0, sizeof(*b));
	b->prog_fd = -1;
	r = tc_nla_parse_options(tb, TCA_BPF_MAX, opts);
	if (r <= 0)
		return r;
	if (tb[TCA_BPF_NAME])
		nla_strlcpy(b->name, tb[TCA_BPF_NAME], sizeof(b->name));
	tc_nla_u32(tb[TCA_BPF_FLAGS], &b->flags);
	tc_nla_u32(tb[TCA_BPF_ID], &b->prog_id);
	if (tb[TCA_BPF_TAG] && nla_len(tb[TCA_BPF_TAG]) == TC_BPF_TAG_LEN) {
		memcpy(b->tag, nla_data(tb[TCA_BPF_TAG]), TC_BPF_TAG_LEN);
		b->tag_set = true;
	}
	return 0;
}

static int bpf_format(const struct tc_spec *s, char *buf, size_t size)
{
	struct sbuf sb = sbuf_init(buf, size);

	/* tc loads programs from object files; the name stands for it here */
	sbuf_word(&sb, "%s %s", s->u.bpf.name[0] ? "name" : "", s->u.bpf.name);
	if (s->u.bpf.flags & TCA_BPF_FLAG_ACT_DIRECT)
		sbuf_word(&sb, "direct-action");
	return sbuf_result(&sb);
}

static bool bpf_match(const struct tc_spec *d, const struct tc_spec *o)
{
	if (d->u.bpf.tag_set && o->u.bpf.tag_set && memcmp(d->u.bpf.tag, o->u.bpf.tag, TC_BPF_TAG_LEN) != 0)
		return false;
	return streq(d->u.bpf.name, o->u.bpf.name) && d->u.bpf.flags == o->u.bpf.flags;
}

const struct tc_kind tc_kind_bpf = {
        .name = "bpf",
        .type = TC_FILTER,
        .fill = bpf_fill,
        .parse = bpf_parse,
        .format = bpf_format,
        .match = bpf_match,
};
