/* tc.h — the tc object model: one struct tc_spec describes a qdisc, class or
 * filter (with its actions) independent of netlink. Each kind lives in its own
 * file (q_fq_codel.c, f_u32.c, ...) and provides a struct tc_kind vtable:
 * fill (spec -> netlink TCA_OPTIONS), parse (TCA_OPTIONS -> spec), format (spec
 * -> tc(8) argument syntax) and match (does an observed spec satisfy a desired
 * one). Numeric fields set to 0 and tristates set to TRI_UNSET are "unset":
 * no attribute is emitted, the kernel default applies, match ignores them. */
#ifndef AIQOS_TC_H
#define AIQOS_TC_H

#include <linux/pkt_sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

struct nl_msg;
struct nlattr;

enum tc_type {
	TC_QDISC,
	TC_CLASS,
	TC_FILTER,
	_TC_TYPE_MAX,
	_TC_TYPE_INVALID = -1,
};

enum tc_kind_id {
	TC_KIND_HTB,       /* qdisc */
	TC_KIND_HTB_CLASS, /* class "htb" */
	TC_KIND_TBF,
	TC_KIND_FQ,
	TC_KIND_FQ_CODEL,
	TC_KIND_BFIFO,
	TC_KIND_PFIFO,
	TC_KIND_PRIO,
	TC_KIND_CLSACT,
	TC_KIND_U32, /* filter */
	TC_KIND_MQ,
	TC_KIND_PFIFO_FAST,
	TC_KIND_BPF, /* filter (cls_bpf, direct-action) */
	_TC_KIND_MAX,
	_TC_KIND_INVALID = -1,
};

enum tristate { TRI_UNSET = 0, TRI_OFF, TRI_ON };

struct tc_htb {
	uint32_t defcls; /* minor of the default class; 0 = unclassified goes direct */
	uint32_t r2q;
};

struct tc_htb_class {
	uint64_t rate_bps; /* bits per second */
	uint64_t ceil_bps;
	uint32_t burst_bytes;
	uint32_t cburst_bytes;
	uint32_t quantum_bytes;
	uint32_t prio;           /* 0 = highest; note: 0 is a real value here, always emitted */
	uint32_t overhead_bytes; /* link-layer bytes added per packet on the wire (rate and ceil), 0 = none */
};

struct tc_tbf {
	uint64_t rate_bps;
	uint32_t burst_bytes;
	uint32_t limit_bytes;
};

struct tc_fq {
	uint32_t limit_pkts;
	uint32_t flow_limit_pkts;
	uint32_t quantum_bytes;
	uint32_t ce_threshold_us;
	uint64_t maxrate_bps;
	enum tristate pacing;
};

struct tc_fq_codel {
	uint32_t target_us;
	uint32_t interval_us;
	uint32_t limit_pkts;
	uint32_t flows;
	uint32_t quantum_bytes;
	uint32_t ce_threshold_us;
	uint32_t memory_limit_bytes;
	enum tristate ecn;
};

struct tc_fifo {
	uint32_t limit; /* bytes for bfifo, packets for pfifo */
};

#define TC_PRIO_BANDS_MAX 16
struct tc_prio {
	uint32_t bands;
	uint8_t priomap[TC_PRIO_MAX + 1];
};

/* A u32 filter: either match-all, or a source (or destination) address
 * prefix of one family; optionally a DSCP rewrite (pedit + csum actions) and
 * a target class (flowid). */
enum u32_match {
	U32_MATCH_ALL,
	U32_MATCH_SRC,
	U32_MATCH_DST,
	U32_MATCH_DSFIELD, /* DS field: v4 TOS byte / v6 traffic class, under mask 0xfc, == tos */
};

struct tc_u32 {
	enum u32_match match;
	int family;       /* AF_INET or AF_INET6 (for SRC/DST and DSCP) */
	uint8_t addr[16]; /* network byte order */
	uint8_t prefix_len;
	uint32_t classid; /* flowid; 0 = none */
	int dscp;         /* -1 = no rewrite; 0..63 = pedit DSCP + csum (v4) */
	uint8_t tos;      /* U32_MATCH_DSFIELD: DS field value (DSCP << 2) to match under mask 0xfc */
	/* mirred egress redirect of what matches to another device (the
	 * download direction: uplink ingress -> ifb); 0 = none. The name is
	 * for tc(8) text only (parse leaves it empty, match ignores it). */
	int redirect_ifindex;
	char redirect_dev[16];
};

/* A cls_bpf filter: the program by name; prog_fd is set by whoever loaded
 * it, just before the filter is sent (-1 = none); prog_id is observed. The
 * tag (the kernel's hash of the program's instructions) is observed, and
 * desired where the loader knows it: a program of another version under
 * the same name then does not match, and is replaced. */
#define TC_BPF_NAME_MAX 32
/* aiqos's BPF filters' names begin so; nl_tc_replace never replaces a bpf
 * filter whose name does not (another tool's program) */
#define TC_BPF_OURS_PREFIX "aiqos_"
#define TC_BPF_TAG_LEN     8
struct tc_bpf {
	char name[TC_BPF_NAME_MAX];
	uint32_t flags; /* TCA_BPF_FLAG_ACT_DIRECT */
	int prog_fd;
	uint32_t prog_id;
	bool tag_set;
	uint8_t tag[TC_BPF_TAG_LEN];
};

struct tc_spec {
	enum tc_type type;
	enum tc_kind_id kind;
	uint32_t parent;   /* TC_H_ROOT, TC_H_CLSACT, a class handle, or for filters the qdisc/class handle or
	                      TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS) */
	uint32_t handle;   /* qdisc major:0, class major:minor, filter handle (u32: 0 = kernel picks) */
	uint16_t prio;     /* filters: priority (also the key for delete/match) */
	uint16_t protocol; /* filters: ETH_P_* in host order (ETH_P_IP, ETH_P_IPV6, ETH_P_ALL) */
	union {
		struct tc_htb htb;
		struct tc_htb_class htb_class;
		struct tc_tbf tbf;
		struct tc_fq fq;
		struct tc_fq_codel fq_codel;
		struct tc_fifo fifo;
		struct tc_prio prio;
		struct tc_u32 u32;
		struct tc_bpf bpf;
	} u;
};

#define TC_FORMAT_MAX 512

struct tc_kind {
	const char *name; /* kernel TCA_KIND ("htb" for both htb qdisc and class) */
	enum tc_type type;
	/* Append the kind's options (TCA_OPTIONS and, for filters, actions) to msg. */
	int (*fill)(struct nl_msg *msg, const struct tc_spec *s);
	/* Fill s->u from the kernel's TCA_OPTIONS (opts may be NULL). */
	int (*parse)(const struct nlattr *opts, struct tc_spec *s);
	/* Write the kind's parameters in tc(8) syntax, e.g. "target 1ms interval 10ms ecn". */
	int (*format)(const struct tc_spec *s, char *buf, size_t size);
	/* true when observed satisfies every field that desired sets. */
	bool (*match)(const struct tc_spec *desired, const struct tc_spec *observed);
};

const struct tc_kind *tc_kind_get(enum tc_kind_id id);
/* Look a kind up by kernel name and object type ("htb" + TC_CLASS -> HTB_CLASS). */
enum tc_kind_id tc_kind_from_name(const char *name, enum tc_type type);
const char *tc_type_name(enum tc_type t);

/* "1:10", "root", "ffff:fff3" (tc syntax) */
void tc_handle_format(uint32_t h, char *buf, size_t size);

/* Full tc(8) command for one object, without the leading "tc":
 * "qdisc replace dev eth0 root handle 1: fq_codel target 1ms ..." */
int tc_spec_format(const struct tc_spec *s, const char *dev, const char *verb, char *buf, size_t size);
/* The same words without "dev", for messages that name an object: "qdisc
 * replace root handle 1: htb default 10", "filter delete parent 1: protocol
 * ip prio 10 handle ::123 u32". Never fails: names the kind also on delete
 * and for a spec tc_spec_format refuses (options left out then); truncated
 * to size. */
void tc_spec_describe(const struct tc_spec *s, const char *verb, char *buf, size_t size);

/* The TCA_OPTIONS payload the kind's own encoder (fill) makes for s: what
 * the kernel accepts on create (a dump's options may not be: HTB dumps
 * version 0x30011 where init wants 3). *ret_len = 0 for kinds without
 * options. -EOVERFLOW beyond max. */
int tc_spec_encode_options(const struct tc_spec *s, uint8_t *buf, size_t max, size_t *ret_len);

/* Same identity (type, parent, handle; for filters parent+prio+protocol) */
bool tc_spec_same_object(const struct tc_spec *a, const struct tc_spec *b);
/* Identity equal and kind's match() true */
bool tc_spec_match(const struct tc_spec *desired, const struct tc_spec *observed);

/* Rate/time helpers (tc_core-like), in rate.c */
uint32_t tc_time_to_ticks(uint64_t ns); /* psched ticks (64 ns units), saturating */
uint32_t tc_xmit_ticks(uint64_t rate_bps,
                       uint32_t bytes); /* time to send bytes at rate (in bytes/s, as the kernel keeps it), in ticks */
int tc_rate_format(uint64_t bps, char *buf, size_t size);   /* "500mbit" / "1gbit" / "123456bit" */
int tc_size_format(uint32_t bytes, char *buf, size_t size); /* "64kb" / "1500b" */
int tc_time_format(uint32_t us, char *buf, size_t size);    /* "1ms" / "500us" */

#endif
