/* nl.h — the thin netlink mechanism: rtnetlink sockets (optionally opened
 * inside another netns), tc object create/replace/delete with the kernel's
 * ack, tc dumps retried on NLM_F_DUMP_INTR, and the few link queries the
 * plugin needs (ifindex by name, veth peer). libnl NLE_* codes are translated
 * to negative errno here, once. Tc options come from the kind vtables. */
#ifndef AIQOS_NL_H
#define AIQOS_NL_H

#include "error.h"
#include "tc/tc.h"

struct nl_sock;

/* Open a connected NETLINK_ROUTE socket in the current netns. */
int nl_open(struct nl_sock **ret, struct error *err);
/* Open it in the netns referred to by nsfd (the caller's netns is restored). */
int nl_open_in_netns(int nsfd, struct nl_sock **ret, struct error *err);
/* Close and free a socket of nl_open. libnl exports an nl_close of its own
 * (close only): the link-level name differs so that neither replaces the
 * other (and libnl can be linked statically). */
#define nl_close aiqos_nl_close
void nl_close(struct nl_sock *sk);
static inline void nl_closep(struct nl_sock **sk)
{
	if (*sk)
		nl_close(*sk);
}
#define _cleanup_nl_ _cleanup_(nl_closep)

/* Translate a libnl NLE_* code (negative) to a negative errno. */
int nl_to_errno(int nle);

struct link_info {
	int ifindex;
	char ifname[16];
	char kind[16];    /* "veth", "bridge", "" */
	int peer_ifindex; /* IFLA_LINK (veth peer in the other netns), 0 if none */
	int link_netnsid; /* IFLA_LINK_NETNSID, -1 if none */
	uint32_t mtu;
	uint32_t tx_queues;
	uint32_t speed_mbps; /* 0 unknown (filled only by link_speed via ethtool ioctl, not here) */
	uint64_t rx_packets; /* nl_link_get_stats only */
};

/* By name (ifname != NULL) or by index. -ENODEV when absent. */
int nl_link_get(struct nl_sock *sk, const char *ifname, int ifindex, struct link_info *ret, struct error *err);
/* The same with the device's counters (rx_packets). */
int nl_link_get_stats(struct nl_sock *sk, int ifindex, struct link_info *ret, struct error *err);

/* NLM_F_CREATE|NLM_F_REPLACE for qdiscs/classes ("replace"), NLM_F_CREATE|NLM_F_EXCL
 * for filters when excl is true. Errors keep the kernel's errno (-EOPNOTSUPP,
 * -ENOENT for an unknown kind, -EINVAL, ...) and err says which object. */
int nl_tc_replace(struct nl_sock *sk, int ifindex, const struct tc_spec *s, struct error *err);
int nl_tc_delete(struct nl_sock *sk, int ifindex, const struct tc_spec *s, struct error *err);

/* Dump qdiscs, classes and filters of one interface into out[] (up to max).
 * Filters are dumped for every qdisc and class parent found (and the clsact
 * ingress/egress hooks). Kinds that aiqos does not know are returned with
 * kind = _TC_KIND_INVALID and their kernel name in unknown_kind[i] (so diffs
 * can say "have pfifo_fast"). */
struct tc_dump {
	unsigned n;
	struct tc_spec tc[128];
	char kind_name[128][16];
};
int nl_tc_dump(struct nl_sock *sk, int ifindex, struct tc_dump *ret, struct error *err);

/* A dump of any size (the agent's uplink holds one filter per pod address,
 * beyond struct tc_dump's 128): heap arrays grown as needed, at most
 * max_objects (0 = TC_DUMP_LIST_MAX_DEFAULT; more -> -E2BIG). Same content
 * and order as nl_tc_dump. Free with tc_dump_list_free (also after errors:
 * ret is untouched then). */
#define TC_DUMP_KIND_NAME_MAX    16
#define TC_DUMP_LIST_MAX_DEFAULT 65536
struct tc_dump_list {
	unsigned n;
	unsigned cap;
	struct tc_spec *tc;
	char (*kind_name)[TC_DUMP_KIND_NAME_MAX];
};
int nl_tc_dump_alloc(struct nl_sock *sk, int ifindex, unsigned max_objects, struct tc_dump_list *ret,
                     struct error *err);
void tc_dump_list_free(struct tc_dump_list *d);

/* Queue statistics of the qdiscs or classes of one interface (TCA_STATS2;
 * ECN/CE marks from the fq_codel and fq xstats). cb is called per object; a
 * negative return is passed back after the dump has been read. */
struct tc_obj_stats {
	enum tc_type type;
	uint32_t parent;
	uint32_t handle;
	char kind[TC_DUMP_KIND_NAME_MAX];
	uint64_t bytes;
	uint64_t packets;
	uint32_t qlen;
	uint32_t backlog_bytes;
	uint32_t drops;
	uint32_t requeues;
	uint32_t overlimits;
	uint64_t ecn_marks; /* fq_codel ecn_mark + ce_mark, fq ce_mark; 0 for other kinds */
};
int nl_tc_stats_dump(struct nl_sock *sk, int ifindex, enum tc_type type,
                     int (*cb)(const struct tc_obj_stats *st, void *ud), void *ud, struct error *err);

/* The root qdisc of an interface as the kernel reports it, options raw: the
 * agent records the uplink's original qdisc (any kind, also ones aiqos does
 * not model) and re-creates it. -ENOENT when the kernel reports none. */
#define TC_RAW_OPTIONS_MAX 1024
struct tc_qdisc_raw {
	char kind[TC_DUMP_KIND_NAME_MAX];
	uint32_t handle; /* 0 (major 0) = a default qdisc the kernel attached itself */
	uint32_t parent; /* TC_H_ROOT */
	bool options_truncated;
	size_t options_len;
	uint8_t options[TC_RAW_OPTIONS_MAX]; /* TCA_OPTIONS payload */
};
int nl_qdisc_root_get(struct nl_sock *sk, int ifindex, struct tc_qdisc_raw *ret, struct error *err);
/* Create (replace) the root qdisc q->kind with q's handle and raw options. */
int nl_qdisc_create_raw(struct nl_sock *sk, int ifindex, const struct tc_qdisc_raw *q, struct error *err);

/* Create s (NLM_F_CREATE|NLM_F_EXCL), without the lookups nl_tc_replace
 * makes: for callers that know the slot is free (the agent's node plan after
 * reading the uplink). u32 with an htid-0 handle goes into the prio's root
 * table. -EEXIST when the object (or the u32 node id) is already there: use
 * nl_tc_replace then. */
int nl_tc_create(struct nl_sock *sk, int ifindex, const struct tc_spec *s, struct error *err);

#endif
