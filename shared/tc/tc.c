/* tc.c — the kind registry (id <-> vtable <-> kernel name), handle and
 * whole-object formatting in tc(8) syntax, and object identity/match rules
 * shared by every kind. Per-kind options live in q_*.c and f_*.c. */
#include <linux/if_ether.h>

#include "tc_int.h"

static const struct tc_kind *const kinds[_TC_KIND_MAX] = {
        [TC_KIND_HTB] = &tc_kind_htb,
        [TC_KIND_HTB_CLASS] = &tc_kind_htb_class,
        [TC_KIND_TBF] = &tc_kind_tbf,
        [TC_KIND_FQ] = &tc_kind_fq,
        [TC_KIND_FQ_CODEL] = &tc_kind_fq_codel,
        [TC_KIND_BFIFO] = &tc_kind_bfifo,
        [TC_KIND_PFIFO] = &tc_kind_pfifo,
        [TC_KIND_PRIO] = &tc_kind_prio,
        [TC_KIND_CLSACT] = &tc_kind_clsact,
        [TC_KIND_U32] = &tc_kind_u32,
        [TC_KIND_MQ] = &tc_kind_mq,
        [TC_KIND_PFIFO_FAST] = &tc_kind_pfifo_fast,
        [TC_KIND_BPF] = &tc_kind_bpf,
};

int tc_none_fill(struct nl_msg *msg, const struct tc_spec *s)
{
	return 0;
}

int tc_none_parse(const struct nlattr *opts, struct tc_spec *s)
{
	return 0;
}

int tc_none_format(const struct tc_spec *s, char *buf, size_t size)
{
	if (size == 0)
		return -ENOBUFS;
	buf[0] = '\0';
	return 0;
}

bool tc_none_match(const struct tc_spec *desired, const struct tc_spec *observed)
{
	return true;
}

const struct tc_kind *tc_kind_get(enum tc_kind_id id)
{
	if ((int)id < 0 || id >= _TC_KIND_MAX)
		return NULL;
	return kinds[id];
}

enum tc_kind_id tc_kind_from_name(const char *name, enum tc_type type)
{
	if (!name)
		return _TC_KIND_INVALID;
	for (int i = 0; i < _TC_KIND_MAX; i++)
		if (kinds[i]->type == type && streq(kinds[i]->name, name))
			return (enum tc_kind_id)i;
	return _TC_KIND_INVALID;
}

const char *tc_type_name(enum tc_type t)
{
	static const char *const names[_TC_TYPE_MAX] = {
	        [TC_QDISC] = "qdisc",
	        [TC_CLASS] = "class",
	        [TC_FILTER] = "filter",
	};
	if ((int)t < 0 || t >= _TC_TYPE_MAX)
		return "unknown";
	return names[t];
}

void tc_handle_format(uint32_t h, char *buf, size_t size)
{
	if (size == 0)
		return;
	if (h == TC_H_ROOT)
		snprintf(buf, size, "root");
	else if (h == TC_H_UNSPEC)
		snprintf(buf, size, "none");
	else if (TC_H_MAJ(h) == 0)
		snprintf(buf, size, ":%x", TC_H_MIN(h));
	else if (TC_H_MIN(h) == 0)
		snprintf(buf, size, "%x:", TC_H_MAJ(h) >> 16);
	else
		snprintf(buf, size, "%x:%x", TC_H_MAJ(h) >> 16, TC_H_MIN(h));
}

void tc_proto_format(uint16_t proto, char *buf, size_t size)
{
	switch (proto) {
	case ETH_P_IP:
		snprintf(buf, size, "ip");
		break;
	case ETH_P_IPV6:
		snprintf(buf, size, "ipv6");
		break;
	case ETH_P_ALL:
		snprintf(buf, size, "all");
		break;
	case ETH_P_8021Q:
		snprintf(buf, size, "802.1q");
		break;
	default:
		snprintf(buf, size, "0x%04x", proto);
		break;
	}
}

/* u32 filter handles print as htid:hash:node ("800::800"), like tc. */
void tc_u32_handle_format(uint32_t h, char *buf, size_t size)
{
	struct sbuf sb = sbuf_init(buf, size);

	if (TC_U32_HTID(h))
		sbuf_printf(&sb, "%x:", TC_U32_USERHTID(h));
	else
		sbuf_printf(&sb, ":");
	if (TC_U32_HASH(h))
		sbuf_printf(&sb, "%x", TC_U32_HASH(h));
	if (TC_U32_NODE(h))
		sbuf_printf(&sb, ":%x", TC_U32_NODE(h));
}

static bool verb_is_delete(const char *verb)
{
	return streq(verb, "del") || streq(verb, "delete");
}

void sbuf_handle(struct sbuf *sb, const char *name, uint32_t handle)
{
	char h[32];

	tc_handle_format(handle, h, sizeof(h));
	sbuf_word(sb, "%s %s", name, h);
}

/* Where the object sits, in tc(8) words: "root handle 1:", "parent 1:
 * classid 1:10", "parent 1: protocol ip prio 10 handle ::123". -EINVAL for
 * an unknown type. */
static int spec_where(struct sbuf *sb, const struct tc_spec *s)
{
	char h[32];

	switch (s->type) {
	case TC_QDISC:
		if (s->parent == TC_H_ROOT)
			sbuf_word(sb, "root");
		else if (s->parent)
			sbuf_handle(sb, "parent", s->parent);
		if (s->handle)
			sbuf_handle(sb, "handle", s->handle);
		return 0;
	case TC_CLASS:
		sbuf_handle(sb, "parent", s->parent);
		sbuf_handle(sb, "classid", s->handle);
		return 0;
	case TC_FILTER:
		sbuf_handle(sb, "parent", s->parent);
		tc_proto_format(s->protocol, h, sizeof(h));
		sbuf_word(sb, "protocol %s", h);
		if (s->prio)
			sbuf_word(sb, "prio %u", s->prio);
		if (s->handle) {
			if (s->kind == TC_KIND_U32)
				tc_u32_handle_format(s->handle, h, sizeof(h));
			else
				snprintf(h, sizeof(h), "0x%x", s->handle);
			sbuf_word(sb, "handle %s", h);
		}
		return 0;
	default:
		return -EINVAL;
	}
}

/* "<type> <verb>[ dev <dev>] <where> <kind>[ <options>]", the one rendering
 * of an object. As a command (tc_spec_format) every part must print, and a
 * delete names only the object: tc parses a kind's options even on delete,
 * and some kinds refuse an empty option list (htb class, tbf); filters keep
 * the kind, which tc requires together with a handle. As a description
 * (tc_spec_describe) it never fails: the kind is always named (what the
 * kernel refused may be the kind), a kind that does not fit the type is
 * named without options, options that do not print are left out. */
static int spec_words(struct sbuf *sb, const struct tc_spec *s, const char *dev, const char *verb, bool command)
{
	const struct tc_kind *k = tc_kind_get(s->kind);
	bool fits = k && k->type == s->type, del = verb_is_delete(verb);
	char params[TC_FORMAT_MAX];
	int r;

	if (command && (!fits || !dev))
		return -EINVAL;
	sbuf_printf(sb, "%s %s", tc_type_name(s->type), verb);
	if (dev)
		sbuf_word(sb, "dev %s", dev);
	if (s->type == TC_QDISC && s->kind == TC_KIND_CLSACT && (s->parent == TC_H_CLSACT || s->parent == 0)) {
		/* "clsact" is both the parent and the kind in tc syntax */
		sbuf_word(sb, "clsact");
		return 0;
	}
	r = spec_where(sb, s);
	if (r < 0 && command)
		return r;
	if (command && del) {
		if (s->type == TC_FILTER && s->handle)
			sbuf_word(sb, "%s", k->name);
		return 0;
	}
	if (k)
		sbuf_word(sb, "%s", k->name);
	if (!fits || del)
		return 0;
	r = k->format(s, params, sizeof(params));
	if (r < 0)
		return command ? r : 0;
	if (params[0])
		sbuf_word(sb, "%s", params);
	return 0;
}

int tc_spec_format(const struct tc_spec *s, const char *dev, const char *verb, char *buf, size_t size)
{
	struct sbuf sb = sbuf_init(buf, size);
	int r;

	if (!verb)
		return -EINVAL;
	r = spec_words(&sb, s, dev, verb, true);
	return r < 0 ? r : sbuf_result(&sb);
}

void tc_spec_describe(const struct tc_spec *s, const char *verb, char *buf, size_t size)
{
	struct sbuf sb = sbuf_init(buf, size);

	(void)spec_words(&sb, s, NULL, verb ? verb : "", false);
}

/* clsact has one place; a spec may leave its parent unset. */
static uint32_t qdisc_parent_norm(const struct tc_spec *s)
{
	if (s->kind == TC_KIND_CLSACT && s->parent == 0)
		return TC_H_CLSACT;
	return s->parent;
}

/* A class made with "parent 1:" is reported by the kernel with parent root. */
static uint32_t class_parent_norm(const struct tc_spec *s)
{
	if (s->parent == TC_H_ROOT)
		return TC_H_MAJ(s->handle);
	return s->parent;
}

static bool handles_compatible(uint32_t a, uint32_t b)
{
	return a == 0 || b == 0 || a == b;
}

/* u32 handles are htid:hash:node. The kernel picks the htid of a prio's root
 * table, so a planner may give only hash:node (htid 0): compare what both set. */
static bool filter_handles_compatible(const struct tc_spec *a, const struct tc_spec *b)
{
	if (a->kind == TC_KIND_U32 && b->kind == TC_KIND_U32 && a->handle && b->handle &&
	    (TC_U32_HTID(a->handle) == 0 || TC_U32_HTID(b->handle) == 0))
		return TC_U32_KEY(a->handle) == TC_U32_KEY(b->handle);
	return handles_compatible(a->handle, b->handle);
}

bool tc_spec_same_object(const struct tc_spec *a, const struct tc_spec *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case TC_QDISC:
		/* one qdisc per parent slot; handle 0 means "kernel picks / default qdisc" */
		return qdisc_parent_norm(a) == qdisc_parent_norm(b) && handles_compatible(a->handle, b->handle);
	case TC_CLASS:
		return a->handle == b->handle && class_parent_norm(a) == class_parent_norm(b);
	case TC_FILTER:
		return a->parent == b->parent && a->prio == b->prio && a->protocol == b->protocol &&
		       filter_handles_compatible(a, b);
	default:
		return false;
	}
}

bool tc_spec_match(const struct tc_spec *desired, const struct tc_spec *observed)
{
	const struct tc_kind *k = tc_kind_get(desired->kind);

	if (!k || desired->kind != observed->kind || !tc_spec_same_object(desired, observed))
		return false;
	/* a desired handle must be there (same_object lets an unset one pass) */
	if (desired->handle && !observed->handle)
		return false;
	if (desired->handle && desired->type != TC_FILTER && desired->handle != observed->handle)
		return false;
	return k->match(desired, observed);
}

int tc_spec_encode_options(const struct tc_spec *s, uint8_t *buf, size_t max, size_t *ret_len)
{
	const struct tc_kind *k = tc_kind_get(s->kind);
	struct nl_msg *msg;
	struct nlattr *opts;
	int r, len;

	if (!k || k->type != s->type)
		return -EINVAL;
	msg = nlmsg_alloc();
	if (!msg)
		return -ENOMEM;
	r = k->fill(msg, s);
	if (r < 0) {
		nlmsg_free(msg);
		return r;
	}
	opts = nlmsg_find_attr(nlmsg_hdr(msg), 0, TCA_OPTIONS);
	len = opts ? nla_len(opts) : 0;
	if (len < 0 || (size_t)len > max) {
		nlmsg_free(msg);
		return -EOVERFLOW;
	}
	if (len)
		memcpy(buf, nla_data(opts), (size_t)len);
	*ret_len = (size_t)len;
	nlmsg_free(msg);
	return 0;
}
