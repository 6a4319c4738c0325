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
	char kind[16];     /* "veth", "bridge", "" */
	int peer_ifindex;  /* IFLA_LINK (veth peer in the other netns), 0 if none */
	int link_netnsid;  /* IFLA_LINK_NETNSID, -1 if none */
	uint32_t mtu;
	uint32_t tx_queues;
	uint32_t speed_mbps; /* 0 unknown (filled only by link_speed via ethtool ioctl, not here) */
};

/* By name (ifname != NULL) or by index. -ENODEV when absent. */
int nl_link_get(struct nl_sock *sk, const char *ifname, int ifindex, struct link_info *ret, struct error *err);

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

#endif
