/* tc_int.h — private helpers shared by the tc kind files (q_*.c, f_*.c,
 * tc.c, rate.c): the kind vtables, a bounded string builder for format(),
 * attribute helpers for fill()/parse() and the tolerances match() uses for
 * values the kernel stores in coarser units. Not part of the library API. */
#ifndef AIQOS_TC_INT_H
#define AIQOS_TC_INT_H

#include <linux/pkt_cls.h>
#include <stdarg.h>

#include <netlink/attr.h>
#include <netlink/msg.h>

#include "tc.h"
#include "util.h"

extern const struct tc_kind tc_kind_htb;
extern const struct tc_kind tc_kind_htb_class;
extern const struct tc_kind tc_kind_tbf;
extern const struct tc_kind tc_kind_fq;
extern const struct tc_kind tc_kind_fq_codel;
extern const struct tc_kind tc_kind_bfifo;
extern const struct tc_kind tc_kind_pfifo;
extern const struct tc_kind tc_kind_prio;
extern const struct tc_kind tc_kind_clsact;
extern const struct tc_kind tc_kind_u32;
extern const struct tc_kind tc_kind_mq;
extern const struct tc_kind tc_kind_pfifo_fast;
extern const struct tc_kind tc_kind_bpf;

/* The vtable of a kind without options (clsact, mq, pfifo_fast): fill sends
 * no TCA_OPTIONS, parse keeps none, format prints none, match is identity
 * alone. In tc.c. */
int tc_none_fill(struct nl_msg *msg, const struct tc_spec *s);
int tc_none_parse(const struct nlattr *opts, struct tc_spec *s);
int tc_none_format(const struct tc_spec *s, char *buf, size_t size);
bool tc_none_match(const struct tc_spec *desired, const struct tc_spec *observed);
#define TC_KIND_NO_OPTIONS \
	.fill = tc_none_fill, .parse = tc_none_parse, .format = tc_none_format, .match = tc_none_match

/* Bounded append-only string: every write is truncated to the buffer and
 * remembered, so callers check once at the end (-ENOBUFS). */
struct sbuf {
	char *buf;
	size_t size;
	size_t len;
	bool truncated;
};

static inline struct sbuf sbuf_init(char *buf, size_t size)
{
	if (size > 0)
		buf[0] = '\0';
	return (struct sbuf){.buf = buf, .size = size, .len = 0, .truncated = size == 0};
}

_printf_(2, 3) static inline void sbuf_printf(struct sbuf *sb, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (sb->truncated)
		return;
	va_start(ap, fmt);
	n = vsnprintf(sb->buf + sb->len, sb->size - sb->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sb->size - sb->len) {
		sb->truncated = true;
		sb->len = sb->size - 1;
		return;
	}
	sb->len += (size_t)n;
}

/* Append " word" (a space first unless the buffer is empty). */
_printf_(2, 3) static inline void sbuf_word(struct sbuf *sb, const char *fmt, ...)
{
	char tmp[TC_FORMAT_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		sb->truncated = true;
		return;
	}
	sbuf_printf(sb, "%s%s", sb->len ? " " : "", tmp);
}

static inline int sbuf_result(const struct sbuf *sb)
{
	return sb->truncated ? -ENOBUFS : 0;
}

/* Append "<name> <value>" in tc(8) units: rates "500mbit", sizes "64kb",
 * times (microseconds) "1ms" (rate.c). */
void sbuf_rate(struct sbuf *sb, const char *name, uint64_t bps);
void sbuf_size(struct sbuf *sb, const char *name, uint32_t bytes);
void sbuf_time(struct sbuf *sb, const char *name, uint32_t us);
/* ... and a handle in tc syntax, "parent 1:10" (tc.c). */
void sbuf_handle(struct sbuf *sb, const char *name, uint32_t handle);

/* libnl returns negative NLE_* codes from nla_put*; fill() functions return
 * -EMSGSIZE for all of them (the only way they fail is a full message). */
#define TC_PUT(expr)                      \
	do {                              \
		if ((expr) < 0)           \
			return -EMSGSIZE; \
	} while (0)

/* Start a nest. libnl always sets NLA_F_NESTED; iproute2 sets it only on
 * some nests (TCA_ACT_OPTIONS, pedit keys) and aiqos encodes exactly like
 * tc: the flag is kept only when type asks for it. */
static inline struct nlattr *tc_nest_start(struct nl_msg *msg, int type)
{
	struct nlattr *nest = nla_nest_start(msg, type & ~NLA_F_NESTED);

	if (nest && !(type & NLA_F_NESTED))
		nest->nla_type &= (uint16_t)~NLA_F_NESTED;
	return nest;
}

/* Payload of a fixed-size attribute, or NULL when it is shorter than size. */
static inline const void *tc_nla_data_min(const struct nlattr *a, size_t size)
{
	if (!a || nla_len(a) < 0 || (size_t)nla_len(a) < size)
		return NULL;
	return nla_data(a);
}

/* Copy a fixed-size attribute's payload to ret; false when absent or short. */
static inline bool tc_nla_get(const struct nlattr *a, void *ret, size_t size)
{
	const void *p = tc_nla_data_min(a, size);
	if (!p)
		return false;
	memcpy(ret, p, size);
	return true;
}

static inline bool tc_nla_u32(const struct nlattr *a, uint32_t *ret)
{
	return tc_nla_get(a, ret, sizeof(*ret));
}

static inline bool tc_nla_u64(const struct nlattr *a, uint64_t *ret)
{
	return tc_nla_get(a, ret, sizeof(*ret));
}

/* Parse a nested attribute into tb[0..max]; opts may carry NLA_F_NESTED. */
static inline int tc_nla_parse_nested(struct nlattr **tb, int max, const struct nlattr *nest)
{
	int r = nla_parse_nested(tb, max, (struct nlattr *)(uintptr_t)nest, NULL);
	return r < 0 ? -EBADMSG : 0;
}

/* parse() of a kind whose TCA_OPTIONS is a nest: 1 with tb[0..max] filled,
 * 0 when the kernel sent no options (the caller's reset spec stands: kernel
 * defaults), -EBADMSG. */
static inline int tc_nla_parse_options(struct nlattr **tb, int max, const struct nlattr *opts)
{
	if (!opts)
		return 0;
	return tc_nla_parse_nested(tb, max, opts) < 0 ? -EBADMSG : 1;
}

/* fill(): a u32 option only when set (unset: no attribute, the kernel's
 * default). */
#define TC_PUT_U32_SET(msg, attr, v)                             \
	do {                                                     \
		if (v)                                           \
			TC_PUT(nla_put_u32((msg), (attr), (v))); \
	} while (0)

/* The default HTB/TBF bucket when none is given: like tc, one timer tick
 * (HZ=1000) of traffic at the rate plus an MTU-sized safeguard (1600). */
static inline uint32_t tc_default_burst(uint64_t rate_bps)
{
	uint64_t b = rate_bps / 8 / 1000 + 1600;
	return b > UINT32_MAX ? UINT32_MAX : (uint32_t)b;
}

/* Rate in the kernel's byte granularity. */
static inline uint64_t tc_rate_bytes(uint64_t rate_bps)
{
	return rate_bps / 8;
}

/* Rates of 2^32 bytes/s and more (htb, tbf): the 32-bit field of struct
 * tc_ratespec saturates and a 64-bit attribute (TCA_HTB_RATE64, ...) carries
 * the rate; parse takes the attribute when the kernel sends it. */
#define TC_RATE32_MAX (1ULL << 32)
static inline uint32_t tc_rate32(uint64_t rate_bytes)
{
	return rate_bytes >= TC_RATE32_MAX ? ~0U : (uint32_t)rate_bytes;
}
#define TC_PUT_RATE64(msg, attr, rate_bytes)                              \
	do {                                                              \
		if ((rate_bytes) >= TC_RATE32_MAX)                        \
			TC_PUT(nla_put_u64((msg), (attr), (rate_bytes))); \
	} while (0)
static inline uint64_t tc_rate_parse(const struct tc_ratespec *r, const struct nlattr *rate64)
{
	uint64_t rate = r->rate;

	tc_nla_u64(rate64, &rate);
	return rate;
}

/* Bytes that fit in `ticks` psched ticks at rate_bps (rounded to nearest;
 * the rate in the kernel's bytes per second). */
uint32_t tc_ticks_to_bytes(uint64_t rate_bps, uint32_t ticks);

/* The burst a dump reads back for `bytes` sent at rate_bps: the ticks the
 * kernel keeps (u32: a bucket longer than 2^32 ticks, 512 KiB below about
 * 15 kbit/s, is clamped) converted back at the rate it keeps (bytes per
 * second). match() compares the observed burst with this, not with the
 * desired bytes, so adoption holds at every rate. */
uint32_t tc_burst_read_back(uint64_t rate_bps, uint32_t bytes);

/* match(): a desired value left unset (0, TRI_UNSET) matches any observed
 * value; a set one only the same. */
static inline bool tc_match_value(uint64_t want, uint64_t have)
{
	return !want || want == have;
}

/* Is a burst the kernel reports (derived from its buffer time) the same as
 * the desired one? The kernel keeps buckets as time; a round trip through
 * ticks (64 ns) or through tc's microsecond arithmetic moves the byte value
 * by up to about one microsecond of traffic at the rate. */
bool tc_burst_close(uint64_t rate_bps, uint32_t want_bytes, uint32_t have_bytes);

/* A u32 filter handle as tc writes it: htid:hash:node, "800::123", "::123". */
void tc_u32_handle_format(uint32_t h, char *buf, size_t size);

/* Name of an ETH_P_* protocol in tc syntax ("ip", "ipv6", "all", "0x88cc"). */
void tc_proto_format(uint16_t proto, char *buf, size_t size);

#endif
