/* f_u32.c — the u32 classifier as aiqos uses it: match-all, an address prefix
 * or the DS field; a flowid; a DSCP rewrite as pedit(+csum) actions, encoded
 * byte for byte like tc's `action pedit ex munge ip dsfield set X retain 0xfc`;
 * or a redirect to another device (`action mirred egress redirect dev D`).
 *
 * parse() returns -EOPNOTSUPP for selectors/actions outside that set (not a
 * filter aiqos made) and -ENODATA for dump entries that are not key nodes
 * (hash tables, "divisor"). */
#include <arpa/inet.h>
#include <inttypes.h>
#include <linux/if_ether.h>
#include <linux/tc_act/tc_csum.h>
#include <linux/tc_act/tc_mirred.h>
#include <linux/tc_act/tc_pedit.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "tc_int.h"

#define U32_KEYS_MAX   4 /* an IPv6 prefix: four 32-bit words */
#define U32_OFF_V4_SRC 12
#define U32_OFF_V4_DST 16
#define U32_OFF_V6_SRC 8
#define U32_OFF_V6_DST 24
#define DSFIELD_MASK   0xfcU /* the DSCP bits of the DS field (ECN bits untouched) */
#define DSCP_MAX       63
/* Bit position of the DS field in the first 32-bit word of the header. */
#define DSFIELD_SHIFT_V4 16
#define DSFIELD_SHIFT_V6 20

/* The family a filter's addresses/DS field belong to: explicit, or from the
 * filter protocol. 0 when neither says. */
static int u32_family(const struct tc_spec *s)
{
	if (s->u.u32.family == AF_INET || s->u.u32.family == AF_INET6)
		return s->u.u32.family;
	if (s->protocol == ETH_P_IP)
		return AF_INET;
	if (s->protocol == ETH_P_IPV6)
		return AF_INET6;
	return 0;
}

/* A /0 address match is a match-all. */
static enum u32_match u32_match_norm(const struct tc_u32 *u)
{
	if ((u->match == U32_MATCH_SRC || u->match == U32_MATCH_DST) && u->prefix_len == 0)
		return U32_MATCH_ALL;
	return u->match;
}

static uint32_t prefix_mask(unsigned bits)
{
	return bits == 0 ? 0 : bits >= 32 ? UINT32_MAX : UINT32_MAX << (32 - bits);
}

static unsigned addr_len(int family)
{
	return family == AF_INET6 ? 16 : 4;
}

/* Copy of addr with the host bits cleared. */
static void addr_masked(const uint8_t *addr, unsigned prefix_len, int family, uint8_t *ret)
{
	unsigned len = addr_len(family);

	memset(ret, 0, 16);
	for (unsigned i = 0; i < len; i++) {
		unsigned bits = prefix_len > i * 8 ? prefix_len - i * 8 : 0;
		uint8_t m = bits >= 8 ? 0xff : (uint8_t)(0xff00 >> bits);
		ret[i] = addr[i] & m;
	}
}

static int dsfield_shift(int family)
{
	return family == AF_INET6 ? DSFIELD_SHIFT_V6 : DSFIELD_SHIFT_V4;
}

/* Validate the spec and compute its selector keys. */
static int u32_keys(const struct tc_spec *s, struct tc_u32_key *keys, unsigned *ret_n)
{
	const struct tc_u32 *u = &s->u.u32;
	enum u32_match m = u32_match_norm(u);
	int family = u32_family(s);
	uint8_t addr[16];
	unsigned n = 0;

	if (m != U32_MATCH_ALL || u->dscp >= 0) {
		/* header offsets are per family: the protocol must say which */
		if (family == AF_INET && s->protocol != ETH_P_IP)
			return -EINVAL;
		if (family == AF_INET6 && s->protocol != ETH_P_IPV6)
			return -EINVAL;
		if (family == 0)
			return -EAFNOSUPPORT;
	}
	if (u->dscp > DSCP_MAX)
		return -ERANGE;

	switch (m) {
	case U32_MATCH_ALL:
		keys[n++] = (struct tc_u32_key){0};
		break;
	case U32_MATCH_SRC:
	case U32_MATCH_DST: {
		unsigned len = addr_len(family);
		int base = family == AF_INET6 ? (m == U32_MATCH_SRC ? U32_OFF_V6_SRC : U32_OFF_V6_DST)
		                              : (m == U32_MATCH_SRC ? U32_OFF_V4_SRC : U32_OFF_V4_DST);

		if (u->prefix_len > len * 8)
			return -ERANGE;
		addr_masked(u->addr, u->prefix_len, family, addr);
		for (unsigned w = 0; w * 32 < u->prefix_len; w++) {
			uint32_t val;
			memcpy(&val, addr + w * 4, 4);
			keys[n++] = (struct tc_u32_key){
			        .mask = htonl(prefix_mask(u->prefix_len - w * 32)),
			        .val = val,
			        .off = base + (int)w * 4,
			};
		}
		break;
	}
	case U32_MATCH_DSFIELD: {
		int shift = dsfield_shift(family);
		keys[n++] = (struct tc_u32_key){
		        .mask = htonl(DSFIELD_MASK << shift),
		        .val = htonl((uint32_t)(u->tos & DSFIELD_MASK) << shift),
		        .off = 0,
		};
		break;
	}
	default:
		return -EINVAL;
	}
	*ret_n = n;
	return 0;
}

/* Open action `order` of kind, and its TCA_ACT_OPTIONS nest in *ret_opts. */
static struct nlattr *action_start(struct nl_msg *msg, int order, const char *kind, struct nlattr **ret_opts)
{
	struct nlattr *act = tc_nest_start(msg, order);

	if (!act || nla_put_string(msg, TCA_ACT_KIND, kind) < 0)
		return NULL;
	*ret_opts = tc_nest_start(msg, TCA_ACT_OPTIONS | NLA_F_NESTED);
	return *ret_opts ? act : NULL;
}

static void action_end(struct nl_msg *msg, struct nlattr *act, struct nlattr *opts)
{
	nla_nest_end(msg, opts);
	nla_nest_end(msg, act);
}

/* An action whose options are one parameter struct (csum, mirred). */
static int put_action_parms(struct nl_msg *msg, int order, const char *kind, int type, const void *parms, int len)
{
	struct nlattr *opts, *act = action_start(msg, order, kind, &opts);

	if (!act)
		return -EMSGSIZE;
	TC_PUT(nla_put(msg, type, len, parms));
	action_end(msg, act, opts);
	return 0;
}

static int put_pedit(struct nl_msg *msg, int order, int family, int dscp, int action)
{
	union {
		uint8_t b[sizeof(struct tc_pedit_sel) + sizeof(struct tc_pedit_key)];
		uint32_t align;
	} parms = {0};
	struct tc_pedit_sel sel = {.action = action, .nkeys = 1};
	int shift = dsfield_shift(family);
	struct tc_pedit_key key = {
	        /* the kernel does word = (word & mask) ^ val */
	        .mask = htonl(~(DSFIELD_MASK << shift)),
	        .val = htonl((uint32_t)dscp << 2 << shift),
	        .off = 0,
	};
	struct nlattr *act, *opts, *keys_ex, *key_ex;

	memcpy(parms.b, &sel, sizeof(sel));
	memcpy(parms.b + sizeof(sel), &key, sizeof(key));

	if (!(act = action_start(msg, order, "pedit", &opts)))
		return -EMSGSIZE;
	TC_PUT(nla_put(msg, TCA_PEDIT_PARMS_EX, sizeof(parms.b), parms.b));
	if (!(keys_ex = tc_nest_start(msg, TCA_PEDIT_KEYS_EX | NLA_F_NESTED)))
		return -EMSGSIZE;
	if (!(key_ex = tc_nest_start(msg, TCA_PEDIT_KEY_EX | NLA_F_NESTED)))
		return -EMSGSIZE;
	TC_PUT(nla_put_u16(msg, TCA_PEDIT_KEY_EX_HTYPE,
	                   family == AF_INET6 ? TCA_PEDIT_KEY_EX_HDR_TYPE_IP6 : TCA_PEDIT_KEY_EX_HDR_TYPE_IP4));
	TC_PUT(nla_put_u16(msg, TCA_PEDIT_KEY_EX_CMD, TCA_PEDIT_KEY_EX_CMD_SET));
	nla_nest_end(msg, key_ex);
	nla_nest_end(msg, keys_ex);
	action_end(msg, act, opts);
	return 0;
}

static int put_csum_ip(struct nl_msg *msg, int order, int action)
{
	struct tc_csum parms = {.action = action, .update_flags = TCA_CSUM_UPDATE_FLAG_IPV4HDR};

	return put_action_parms(msg, order, "csum", TCA_CSUM_PARMS, &parms, sizeof(parms));
}

static int put_mirred_redirect(struct nl_msg *msg, int order, int ifindex)
{
	struct tc_mirred parms = {.action = TC_ACT_STOLEN, .eaction = TCA_EGRESS_REDIR, .ifindex = (uint32_t)ifindex};

	return put_action_parms(msg, order, "mirred", TCA_MIRRED_PARMS, &parms, sizeof(parms));
}

static int u32_fill(struct nl_msg *msg, const struct tc_spec *s)
{
	const struct tc_u32 *u = &s->u.u32;
	struct tc_u32_key keys[U32_KEYS_MAX];
	union {
		uint8_t b[sizeof(struct tc_u32_sel) + sizeof(keys)];
		uint32_t align;
	} sel_buf = {0};
	struct tc_u32_sel sel = {0};
	struct nlattr *opts;
	unsigned n;
	int r;

	r = u32_keys(s, keys, &n);
	if (r < 0)
		return r;
	if (u->redirect_ifindex < 0 || (u->redirect_ifindex > 0 && u->dscp >= 0))
		return -EINVAL; /* one action kind per filter */
	sel.nkeys = (unsigned char)n;
	if (u->classid || u->dscp >= 0 || u->redirect_ifindex)
		sel.flags |= TC_U32_TERMINAL;
	memcpy(sel_buf.b, &sel, sizeof(sel));
	memcpy(sel_buf.b + sizeof(sel), keys, n * sizeof(keys[0]));

	if (!(opts = tc_nest_start(msg, TCA_OPTIONS)))
		return -EMSGSIZE;
	if (u->classid)
		TC_PUT(nla_put_u32(msg, TCA_U32_CLASSID, u->classid));
	if (u->dscp >= 0) {
		int family = u32_family(s);
		struct nlattr *acts = tc_nest_start(msg, TCA_U32_ACT);

		if (!acts)
			return -EMSGSIZE;
		if (family == AF_INET) {
			r = put_pedit(msg, 1, family, u->dscp, TC_ACT_PIPE);
			if (r >= 0)
				r = put_csum_ip(msg, 2, TC_ACT_OK);
		} else {
			r = put_pedit(msg, 1, family, u->dscp, TC_ACT_OK);
		}
		if (r < 0)
			return r;
		nla_nest_end(msg, acts);
	}
	if (u->redirect_ifindex > 0) {
		struct nlattr *acts = tc_nest_start(msg, TCA_U32_ACT);

		if (!acts)
			return -EMSGSIZE;
		r = put_mirred_redirect(msg, 1, u->redirect_ifindex);
		if (r < 0)
			return r;
		nla_nest_end(msg, acts);
	}
	TC_PUT(nla_put(msg, TCA_U32_SEL, (int)(sizeof(sel) + n * sizeof(keys[0])), sel_buf.b));
	nla_nest_end(msg, opts);
	return 0;
}

/* --- parse --- */

static bool mask_to_prefix(uint32_t mask_be, unsigned *ret)
{
	uint32_t m = ntohl(mask_be);
	unsigned bits = (unsigned)__builtin_popcount(m);

	if (m != prefix_mask(bits))
		return false;
	*ret = bits;
	return true;
}

/* Decode the selector keys into s->u.u32 (match, family, addr, prefix, tos). */
static int u32_parse_keys(const struct tc_u32_key *keys, unsigned n, struct tc_spec *s)
{
	struct tc_u32 *u = &s->u.u32;
	int family = s->protocol == ETH_P_IPV6 ? AF_INET6 : AF_INET;
	const struct tc_u32_key *by_word[U32_KEYS_MAX] = {NULL};
	const struct tc_u32_key *k;
	unsigned prefix = 0;
	uint32_t v;
	int base;

	for (unsigned i = 0; i < n; i++)
		if (keys[i].offmask)
			return -EOPNOTSUPP;

	if (n == 0 || (n == 1 && keys[0].mask == 0)) {
		u->match = U32_MATCH_ALL;
		return 0;
	}

	if (n == 1 && keys[0].off == 0) {
		k = &keys[0];
		if (k->mask == htonl(DSFIELD_MASK << DSFIELD_SHIFT_V4))
			family = AF_INET;
		else if (k->mask == htonl(DSFIELD_MASK << DSFIELD_SHIFT_V6))
			family = AF_INET6;
		else
			return -EOPNOTSUPP;
		u->match = U32_MATCH_DSFIELD;
		u->family = family;
		u->tos = (uint8_t)((ntohl(k->val) >> dsfield_shift(family)) & DSFIELD_MASK);
		return 0;
	}

	if (family == AF_INET) {
		k = &keys[0];
		if (n != 1 || (k->off != U32_OFF_V4_SRC && k->off != U32_OFF_V4_DST))
			return -EOPNOTSUPP;
		if (!mask_to_prefix(k->mask, &prefix))
			return -EOPNOTSUPP;
		u->match = k->off == U32_OFF_V4_SRC ? U32_MATCH_SRC : U32_MATCH_DST;
		u->prefix_len = (uint8_t)prefix;
		v = k->val & k->mask;
		memcpy(u->addr, &v, 4);
		return 0;
	}

	/* IPv6: consecutive words from the address start, all but the last full */
	if (n > U32_KEYS_MAX)
		return -EOPNOTSUPP;
	base = keys[0].off;
	for (unsigned i = 1; i < n; i++)
		if (keys[i].off < base)
			base = keys[i].off;
	if (base != U32_OFF_V6_SRC && base != U32_OFF_V6_DST)
		return -EOPNOTSUPP;
	for (unsigned i = 0; i < n; i++) {
		int rel = keys[i].off - base;
		unsigned w = (unsigned)rel / 4;

		if (rel % 4 || w >= n || by_word[w])
			return -EOPNOTSUPP;
		by_word[w] = &keys[i];
	}
	for (unsigned w = 0; w < n; w++) {
		unsigned bits;

		v = by_word[w]->val & by_word[w]->mask;
		if (!mask_to_prefix(by_word[w]->mask, &bits) || (w + 1 < n && bits != 32))
			return -EOPNOTSUPP;
		memcpy(u->addr + w * 4, &v, 4);
		prefix += bits;
	}
	u->match = base == U32_OFF_V6_SRC ? U32_MATCH_SRC : U32_MATCH_DST;
	u->family = AF_INET6;
	u->prefix_len = (uint8_t)prefix;
	return 0;
}

/* Decode a pedit action that rewrites the DS field; -EOPNOTSUPP otherwise. */
static int parse_pedit(const struct nlattr *opts, int family, int *ret_dscp)
{
	struct nlattr *tb[TCA_PEDIT_MAX + 1];
	const struct nlattr *parms;
	const struct tc_pedit_sel *sel;
	struct tc_pedit_key key;
	int htype = -1, shift;

	if (!opts || tc_nla_parse_nested(tb, TCA_PEDIT_MAX, opts) < 0)
		return -EOPNOTSUPP;
	parms = tb[TCA_PEDIT_PARMS_EX] ? tb[TCA_PEDIT_PARMS_EX] : tb[TCA_PEDIT_PARMS];
	sel = tc_nla_data_min(parms, sizeof(*sel) + sizeof(key));
	if (!sel || sel->nkeys != 1)
		return -EOPNOTSUPP;
	memcpy(&key, (const uint8_t *)sel + sizeof(*sel), sizeof(key));

	if (tb[TCA_PEDIT_KEYS_EX]) {
		struct nlattr *k;
		int rem, n = 0;

		nla_for_each_nested(k, tb[TCA_PEDIT_KEYS_EX], rem)
		{
			struct nlattr *kt[TCA_PEDIT_KEY_EX_MAX + 1];
			uint16_t v;

			if (nla_type(k) != TCA_PEDIT_KEY_EX || ++n > 1)
				return -EOPNOTSUPP;
			if (tc_nla_parse_nested(kt, TCA_PEDIT_KEY_EX_MAX, k) < 0)
				return -EOPNOTSUPP;
			if (kt[TCA_PEDIT_KEY_EX_CMD] &&
			    nla_get_u16(kt[TCA_PEDIT_KEY_EX_CMD]) != TCA_PEDIT_KEY_EX_CMD_SET)
				return -EOPNOTSUPP;
			if (kt[TCA_PEDIT_KEY_EX_HTYPE]) {
				v = nla_get_u16(kt[TCA_PEDIT_KEY_EX_HTYPE]);
				htype = v;
			}
		}
	}
	if (htype == TCA_PEDIT_KEY_EX_HDR_TYPE_IP4)
		family = AF_INET;
	else if (htype == TCA_PEDIT_KEY_EX_HDR_TYPE_IP6)
		family = AF_INET6;
	else if (htype != -1 && htype != TCA_PEDIT_KEY_EX_HDR_TYPE_NETWORK)
		return -EOPNOTSUPP;

	shift = dsfield_shift(family);
	if (key.off != 0 || key.at || key.offmask || key.shift || key.mask != htonl(~(DSFIELD_MASK << shift)))
		return -EOPNOTSUPP;
	*ret_dscp = (int)((ntohl(key.val) >> shift) & DSFIELD_MASK) >> 2;
	return 0;
}

static int u32_parse_actions(const struct nlattr *acts, struct tc_spec *s)
{
	struct nlattr *a;
	int rem;

	nla_for_each_nested(a, acts, rem)
	{
		struct nlattr *tb[TCA_ACT_MAX + 1];
		char kind[16];

		if (tc_nla_parse_nested(tb, TCA_ACT_MAX, a) < 0 || !tb[TCA_ACT_KIND])
			return -EOPNOTSUPP;
		nla_strlcpy(kind, tb[TCA_ACT_KIND], sizeof(kind));
		if (streq(kind, "pedit")) {
			int r = parse_pedit(tb[TCA_ACT_OPTIONS], u32_family(s), &s->u.u32.dscp);
			if (r < 0)
				return r;
		} else if (streq(kind, "mirred")) {
			struct nlattr *mb[TCA_MIRRED_MAX + 1];
			const struct tc_mirred *m;

			if (!tb[TCA_ACT_OPTIONS] || tc_nla_parse_nested(mb, TCA_MIRRED_MAX, tb[TCA_ACT_OPTIONS]) < 0 ||
			    !(m = tc_nla_data_min(mb[TCA_MIRRED_PARMS], sizeof(*m))) || m->eaction != TCA_EGRESS_REDIR)
				return -EOPNOTSUPP;
			s->u.u32.redirect_ifindex = (int)m->ifindex;
		} else if (!streq(kind, "csum")) {
			return -EOPNOTSUPP; /* some other action: not a filter aiqos made */
		}
	}
	return 0;
}

static int u32_parse(const struct nlattr *opts, struct tc_spec *s)
{
	struct nlattr *tb[TCA_U32_MAX + 1];
	struct tc_u32 *u = &s->u.u32;
	const struct tc_u32_sel *sel;
	struct tc_u32_key keys[U32_KEYS_MAX];
	int r;

	*u = (struct tc_u32){.dscp = -1};
	u->family = s->protocol == ETH_P_IPV6 ? AF_INET6 : s->protocol == ETH_P_IP ? AF_INET : 0;
	if (!opts)
		return -ENODATA;
	if (tc_nla_parse_nested(tb, TCA_U32_MAX, opts) < 0)
		return -EBADMSG;
	/* hash tables ("divisor") and chain heads have no selector */
	if (!tb[TCA_U32_SEL])
		return -ENODATA;
	sel = tc_nla_data_min(tb[TCA_U32_SEL], sizeof(*sel));
	if (!sel || (size_t)nla_len(tb[TCA_U32_SEL]) < sizeof(*sel) + sel->nkeys * sizeof(keys[0]))
		return -EBADMSG;
	if ((sel->flags & ~TC_U32_TERMINAL) || sel->offshift || sel->offmask || sel->off || sel->offoff || sel->hoff ||
	    sel->hmask || sel->nkeys > U32_KEYS_MAX)
		return -EOPNOTSUPP;
	if (tb[TCA_U32_LINK] || tb[TCA_U32_INDEV] || tb[TCA_U32_MARK] || tb[TCA_U32_POLICE])
		return -EOPNOTSUPP;
	memcpy(keys, (const uint8_t *)sel + sizeof(*sel), sel->nkeys * sizeof(keys[0]));
	r = u32_parse_keys(keys, sel->nkeys, s);
	if (r < 0)
		return r;
	tc_nla_u32(tb[TCA_U32_CLASSID], &u->classid);
	if (tb[TCA_U32_ACT]) {
		r = u32_parse_actions(tb[TCA_U32_ACT], s);
		if (r < 0)
			return r;
	}
	return 0;
}

/* --- format / match --- */

static int u32_format(const struct tc_spec *s, char *buf, size_t size)
{
	const struct tc_u32 *u = &s->u.u32;
	struct sbuf sb = sbuf_init(buf, size);
	int family = u32_family(s);
	const char *ip = family == AF_INET6 ? "ip6" : "ip";
	char a[INET6_ADDRSTRLEN];
	uint8_t addr[16];

	switch (u32_match_norm(u)) {
	case U32_MATCH_ALL:
		sbuf_word(&sb, "match u32 0 0");
		break;
	case U32_MATCH_SRC:
	case U32_MATCH_DST:
		if (family == 0 || u->prefix_len > addr_len(family) * 8)
			return -EINVAL;
		addr_masked(u->addr, u->prefix_len, family, addr);
		if (!inet_ntop(family, addr, a, sizeof(a)))
			return -EINVAL;
		sbuf_word(&sb, "match %s %s %s/%u", ip, u->match == U32_MATCH_SRC ? "src" : "dst", a, u->prefix_len);
		break;
	case U32_MATCH_DSFIELD:
		if (family == 0)
			return -EINVAL;
		sbuf_word(&sb, "match %s %s 0x%02x 0x%02x", ip, family == AF_INET6 ? "priority" : "dsfield",
		          u->tos & DSFIELD_MASK, DSFIELD_MASK);
		break;
	default:
		return -EINVAL;
	}
	if (u->classid)
		sbuf_handle(&sb, "flowid", u->classid);
	if (u->dscp >= 0) {
		if (family == AF_INET6)
			sbuf_word(&sb, "action pedit ex munge ip6 traffic_class set 0x%02x retain 0x%02x",
			          (unsigned)u->dscp << 2, DSFIELD_MASK);
		else
			sbuf_word(&sb, "action pedit ex munge ip dsfield set 0x%02x retain 0x%02x pipe action csum ip",
			          (unsigned)u->dscp << 2, DSFIELD_MASK);
	}
	if (u->redirect_ifindex || u->redirect_dev[0]) {
		if (u->redirect_dev[0])
			sbuf_word(&sb, "action mirred egress redirect dev %s", u->redirect_dev);
		else
			sbuf_word(&sb, "action mirred egress redirect ifindex %d", u->redirect_ifindex);
	}
	return sbuf_result(&sb);
}

static bool u32_match(const struct tc_spec *d, const struct tc_spec *o)
{
	const struct tc_u32 *du = &d->u.u32, *ou = &o->u.u32;
	enum u32_match m = u32_match_norm(du);
	int family = u32_family(d);

	if (m != u32_match_norm(ou))
		return false;
	switch (m) {
	case U32_MATCH_SRC:
	case U32_MATCH_DST: {
		uint8_t a[16], b[16];

		if (family != u32_family(o) || du->prefix_len != ou->prefix_len)
			return false;
		addr_masked(du->addr, du->prefix_len, family, a);
		addr_masked(ou->addr, ou->prefix_len, family, b);
		if (memcmp(a, b, sizeof(a)) != 0)
			return false;
		break;
	}
	case U32_MATCH_DSFIELD:
		if (family != u32_family(o) || (du->tos & DSFIELD_MASK) != (ou->tos & DSFIELD_MASK))
			return false;
		break;
	default:
		break;
	}
	if (du->classid && du->classid != ou->classid)
		return false;
	if (du->dscp >= 0 && du->dscp != ou->dscp)
		return false;
	if (du->redirect_ifindex && du->redirect_ifindex != ou->redirect_ifindex)
		return false;
	return true;
}

const struct tc_kind tc_kind_u32 = {
        .name = "u32",
        .type = TC_FILTER,
        .fill = u32_fill,
        .parse = u32_parse,
        .format = u32_format,
        .match = u32_match,
};
