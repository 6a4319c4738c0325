/* datapath.h — what the node's pod network looks like (datapath.c): the
 * tunnel devices (their kind from rtnetlink's IFLA_INFO_KIND, UDP port,
 * underlying device, outer family), whether pod packets leave by the uplink
 * encapsulated, the node's pod CIDRs and the primary CNI. Shown by
 * `aiqosctl status`, `doctor` and /metrics; the tunnel header it finds is
 * what `uplinkOverhead` counts when the config does not set it. */
#ifndef AIQOS_AGENT_NODE_DATAPATH_H
#define AIQOS_AGENT_NODE_DATAPATH_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "plan.h"

struct cJSON;
struct nl_sock;

#define DP_TUNNELS_MAX 8
#define DP_CIDRS_MAX   4
#define DP_CIDR_LEN    48

struct dp_tunnel {
	char ifname[IFNAME_LEN];
	char kind[16];         /* "vxlan", "geneve", "ipip", "ip6tnl", "sit", "gre", "wireguard", ... */
	uint32_t port;         /* UDP destination port (vxlan, geneve, wireguard); 0 = none or unknown */
	char link[IFNAME_LEN]; /* the underlying device it is bound to; "" = none (routed: any) */
	bool outer6;           /* the outer header is IPv6 (a local/remote IPv6 address) */
	bool up;
	bool via_uplink;       /* up, and bound to the uplink or to no device (its packets leave by it) */
	uint32_t header_bytes; /* what its encapsulation adds to each packet on the wire */
};

struct datapath {
	unsigned n_tunnels;
	struct dp_tunnel tunnels[DP_TUNNELS_MAX];
	unsigned n_more; /* tunnels beyond DP_TUNNELS_MAX, not listed */
	char cni[48];    /* the primary CNI's name ("Flannel"); "" = unknown */
	unsigned n_cidrs;
	char pod_cidrs[DP_CIDRS_MAX][DP_CIDR_LEN];
	char cidrs_from[128]; /* where they were read ("" = nowhere) */
	bool known;           /* discovered at least once (datapath_refresh) */
};

/* The bytes a tunnel kind adds to each packet (outer IP + UDP + tunnel
 * header + the inner Ethernet header for vxlan/geneve; options of Geneve
 * not counted: per packet, unknown to the device); 0 for a kind that is no
 * known encapsulation. */
uint32_t datapath_header_bytes(const char *kind, bool outer6);

/* The tunnel devices of the current netns (rtnetlink link dump) against the
 * uplink's ifindex (0 = unknown). */
int datapath_tunnels(struct nl_sock *sk, int uplink_ifindex, struct datapath *dp, struct error *err);

/* The primary CNI (doctor's names) and the node's pod CIDRs: the primary
 * conflist's host-local ranges, else Flannel's subnet file (flannel_env,
 * NULL = /run/flannel/subnet.env). cni_conf_dir NULL: only Flannel's file. */
void datapath_cni(const char *cni_conf_dir, const char *flannel_env, struct datapath *dp);

/* Both of the above (the CNI's part never fails). */
int datapath_discover(struct nl_sock *sk, int uplink_ifindex, const char *cni_conf_dir, struct datapath *dp,
                      struct error *err);

/* The agent's: discover again into *dp, logging what changed (a failed
 * link dump keeps the tunnels known). */
void datapath_refresh(struct nl_sock *sk, int uplink_ifindex, const char *cni_conf_dir, struct datapath *dp);

/* The encapsulation pod packets get on the way to the uplink: the kind of
 * the via-uplink tunnel with the largest header, or "none". */
const char *datapath_encap(const struct datapath *dp);
/* That tunnel's header bytes (0 = none). */
uint32_t datapath_tunnel_bytes(const struct datapath *dp);

/* uplinkOverhead in force: the config's when it sets one (configured),
 * else the Ethernet framing (NODE_OVERHEAD_DEFAULT) plus the tunnel header
 * of datapath_tunnel_bytes. */
uint32_t datapath_overhead(bool configured, uint32_t config_bytes, const struct datapath *dp);

/* {"encapsulation","tunnels":[...],"podCIDRs":[...],"podCIDRsFrom","cni"} */
struct cJSON *datapath_json(const struct datapath *dp);

#endif
