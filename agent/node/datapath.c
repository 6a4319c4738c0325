/* datapath.c — the node's pod network as the kernel and the CNI config show
 * it (datapath.h). */
#include "datapath.h"

#include <cjson/cJSON.h>
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <linux/if.h>
#include <netlink/route/link.h>
#include <netlink/route/link/geneve.h>
#include <netlink/route/link/ip6tnl.h>
#include <netlink/route/link/ipip.h>
#include <netlink/route/link/vxlan.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "doctor.h"
#include "file.h"
#include "install/chain.h"
#include "json.h"
#include "log.h"
#include "nl.h"
#include "node.h"
#include "util.h"

#define IPV4_HDR 20
#define IPV6_HDR 40
#define UDP_HDR  8
#define ETH_HDR  14

uint32_t datapath_header_bytes(const char *kind, bool outer6)
{
	uint32_t ip = outer6 ? IPV6_HDR : IPV4_HDR;

	if (streq(kind, "vxlan") || streq(kind, "geneve"))
		return ip + UDP_HDR + 8 + ETH_HDR; /* 50 over IPv4, 70 over IPv6 */
	if (streq(kind, "ipip") || streq(kind, "sit"))
		return IPV4_HDR;
	if (streq(kind, "ip6tnl"))
		return IPV6_HDR;
	if (streq(kind, "gre"))
		return IPV4_HDR + 4;
	if (streq(kind, "ip6gre"))
		return IPV6_HDR + 4;
	if (streq(kind, "gretap"))
		return IPV4_HDR + 4 + ETH_HDR;
	if (streq(kind, "wireguard"))
		return ip + UDP_HDR + 16 + 16; /* message header, authentication tag */
	return 0;
}

static bool addr_is6(struct nl_addr *a)
{
	return a && nl_addr_get_family(a) == AF_INET6;
}

/* One link of the dump: a tunnel's facts into t (false: no tunnel). */
static bool tunnel_of(struct rtnl_link *l, int uplink_ifindex, struct nl_cache *cache, struct dp_tunnel *t)
{
	const char *kind = rtnl_link_get_type(l);
	uint32_t link = 0, port = 0;
	struct nl_addr *a = NULL;

	if (!kind || !datapath_header_bytes(kind, false))
		return false;
	memset(t, 0, sizeof(*t));
	str_copy(t->ifname, sizeof(t->ifname), rtnl_link_get_name(l));
	str_copy(t->kind, sizeof(t->kind), kind);
	if (streq(kind, "vxlan")) {
		if (rtnl_link_vxlan_get_port(l, &port) == 0)
			t->port = port;
		if (rtnl_link_vxlan_get_link(l, &link) < 0)
			link = 0;
		if (rtnl_link_vxlan_get_local(l, &a) == 0 || rtnl_link_vxlan_get_group(l, &a) == 0)
			t->outer6 = addr_is6(a);
	} else if (streq(kind, "geneve")) {
		if (rtnl_link_geneve_get_port(l, &port) == 0)
			t->port = port;
		if (rtnl_link_geneve_get_remote(l, &a) == 0)
			t->outer6 = addr_is6(a);
	} else if (streq(kind, "ipip")) {
		link = rtnl_link_ipip_get_link(l);
	} else if (streq(kind, "ip6tnl")) {
		link = rtnl_link_ip6_tnl_get_link(l);
		t->outer6 = true;
	} else if (streq(kind, "ip6gre")) {
		t->outer6 = true;
	} else if (streq(kind, "wireguard")) {
		t->port = 0; /* the listen port is wireguard's genetlink, not rtnetlink */
	}
	nl_addr_put(a);
	if (link) {
		char name[IFNAME_LEN] = "";

		if (rtnl_link_i2name(cache, (int)link, name, sizeof(name)))
			str_copy(t->link, sizeof(t->link), name);
		else
			snprintf(t->link, sizeof(t->link), "if%u", link);
	}
	t->up = (rtnl_link_get_flags(l) & IFF_UP) != 0;
	t->via_uplink = t->up && (!link || (uplink_ifindex > 0 && (int)link == uplink_ifindex));
	t->header_bytes = datapath_header_bytes(kind, t->outer6);
	return true;
}

int datapath_tunnels(struct nl_sock *sk, int uplink_ifindex, struct datapath *dp, struct error *err)
{
	struct nl_cache *cache = NULL;
	struct nl_object *o;
	int r;

	dp->n_tunnels = dp->n_more = 0;
	r = rtnl_link_alloc_cache(sk, AF_UNSPEC, &cache);
	if (r < 0) {
		r = nl_to_errno(r);
		return error_set(err, -r, "dump links: %s", strerror(-r));
	}
	for (o = nl_cache_get_first(cache); o; o = nl_cache_get_next(o)) {
		struct dp_tunnel t;

		if (!tunnel_of((struct rtnl_link *)o, uplink_ifindex, cache, &t))
			continue;
		if (dp->n_tunnels < DP_TUNNELS_MAX)
			dp->tunnels[dp->n_tunnels++] = t;
		else
			dp->n_more++;
	}
	nl_cache_free(cache);
	return 0;
}

static void add_cidr(struct datapath *dp, const char *cidr)
{
	if (!cidr || !cidr[0] || dp->n_cidrs >= DP_CIDRS_MAX)
		return;
	for (unsigned i = 0; i < dp->n_cidrs; i++)
		if (streq(dp->pod_cidrs[i], cidr))
			return;
	str_copy(dp->pod_cidrs[dp->n_cidrs++], DP_CIDR_LEN, cidr);
}

/* host-local's ranges ([[{"subnet"}]]) or its older single "subnet". */
static void ipam_cidrs(const cJSON *ipam, struct datapath *dp)
{
	const cJSON *set, *r;

	cJSON_ArrayForEach(set, cJSON_GetObjectItemCaseSensitive(ipam, "ranges"))
	{
		cJSON_ArrayForEach(r, set)
		{
			add_cidr(dp, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "subnet")));
		}
	}
	add_cidr(dp, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ipam, "subnet")));
}

static void conflist_cidrs(const char *path, struct datapath *dp)
{
	_cleanup_free_ char *text = NULL;
	_cleanup_json_ cJSON *j = NULL;
	const cJSON *p;

	if (file_read_bounded(path, 1 << 20, 0, &text, NULL, NULL, NULL) < 0 || !(j = cJSON_Parse(text)))
		return;
	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(j, "plugins"))
	{
		ipam_cidrs(cJSON_GetObjectItemCaseSensitive(p, "ipam"), dp);
	}
	ipam_cidrs(cJSON_GetObjectItemCaseSensitive(j, "ipam"), dp); /* a single .conf */
	if (dp->n_cidrs)
		snprintf(dp->cidrs_from, sizeof(dp->cidrs_from), "%.100s (host-local ranges)", path);
}

/* "10.244.1.1/24" -> "10.244.1.0/24" (left as it is when not a prefix) */
static void cidr_network(char *v)
{
	unsigned char a[16];
	char *slash = strchr(v, '/'), out[INET6_ADDRSTRLEN];
	int fam, bits, len;

	if (!slash)
		return;
	*slash = '\0';
	fam = strchr(v, ':') ? AF_INET6 : AF_INET;
	len = fam == AF_INET6 ? 16 : 4;
	bits = (int)strtol(slash + 1, NULL, 10);
	if (inet_pton(fam, v, a) == 1 && bits >= 0 && bits <= len * 8) {
		for (int i = 0; i < len; i++) {
			int keep = bits - i * 8;
			a[i] &= keep >= 8 ? 0xff : keep <= 0 ? 0 : (unsigned char)(0xff << (8 - keep));
		}
		if (inet_ntop(fam, a, out, sizeof(out)))
			memmove(v, out, strlen(out) + 1);
	}
	snprintf(v + strlen(v), DP_CIDR_LEN - strlen(v), "/%d", bits);
}

/* FLANNEL_SUBNET=10.244.1.1/24 (the node's gateway address in its CIDR) */
static void flannel_cidrs(const char *path, struct datapath *dp)
{
	_cleanup_free_ char *text = NULL;
	static const char *const keys[] = {"FLANNEL_SUBNET=", "FLANNEL_IPV6_SUBNET="};

	if (file_read_bounded(path, 1 << 16, 0, &text, NULL, NULL, NULL) < 0)
		return;
	for (size_t k = 0; k < ARRAY_SIZE(keys); k++)
		for (const char *p = text; (p = strstr(p, keys[k])); p++) {
			char v[DP_CIDR_LEN];
			size_t n;

			if (p != text && p[-1] != '\n')
				continue;
			p += strlen(keys[k]);
			n = strcspn(p, "\r\n");
			if (n == 0 || n >= sizeof(v))
				continue;
			memcpy(v, p, n);
			v[n] = '\0';
			cidr_network(v);
			add_cidr(dp, v);
		}
	if (dp->n_cidrs)
		snprintf(dp->cidrs_from, sizeof(dp->cidrs_from), "%s", path);
}

void datapath_cni(const char *cni_conf_dir, const char *flannel_env, struct datapath *dp)
{
	struct chain_view v;

	dp->cni[0] = '\0';
	dp->n_cidrs = 0;
	dp->cidrs_from[0] = '\0';
	if (cni_conf_dir && chain_inspect(cni_conf_dir, &v, NULL) == 0 && v.primary[0]) {
		char path[1024];

		str_copy(dp->cni, sizeof(dp->cni), doctor_cni_name(v.primary_types));
		if (snprintf(path, sizeof(path), "%s/%s", cni_conf_dir, v.primary) < (int)sizeof(path))
			conflist_cidrs(path, dp);
	}
	if (!dp->n_cidrs)
		flannel_cidrs(flannel_env ? flannel_env : "/run/flannel/subnet.env", dp);
}

int datapath_discover(struct nl_sock *sk, int uplink_ifindex, const char *cni_conf_dir, struct datapath *dp,
                      struct error *err)
{
	datapath_cni(cni_conf_dir, NULL, dp);
	return datapath_tunnels(sk, uplink_ifindex, dp, err);
}

static bool datapath_same(const struct datapath *a, const struct datapath *b)
{
	if (a->n_tunnels != b->n_tunnels || a->n_cidrs != b->n_cidrs || !streq(a->cni, b->cni))
		return false;
	for (unsigned i = 0; i < a->n_tunnels; i++) {
		const struct dp_tunnel *x = &a->tunnels[i], *y = &b->tunnels[i];

		if (!streq(x->ifname, y->ifname) || !streq(x->kind, y->kind) || x->port != y->port ||
		    !streq(x->link, y->link) || x->outer6 != y->outer6 || x->up != y->up ||
		    x->via_uplink != y->via_uplink || x->header_bytes != y->header_bytes)
			return false;
	}
	for (unsigned i = 0; i < a->n_cidrs; i++)
		if (!streq(a->pod_cidrs[i], b->pod_cidrs[i]))
			return false;
	return true;
}

void datapath_refresh(struct nl_sock *sk, int uplink_ifindex, const char *cni_conf_dir, struct datapath *dp)
{
	struct datapath now = {0};
	struct error e = {0};
	char tunnels[256] = "", cidrs[DP_CIDRS_MAX * DP_CIDR_LEN] = "", bytes[16];

	if (datapath_discover(sk, uplink_ifindex, cni_conf_dir, &now, &e) < 0) {
		log_msg(LOG_LVL_WARN, "datapath: tunnels not read", "error", e.msg, (char *)NULL);
		now.n_tunnels = dp->n_tunnels; /* keep what was known */
		memcpy(now.tunnels, dp->tunnels, sizeof(now.tunnels));
	}
	if (datapath_same(&now, dp) && dp->known)
		return;
	now.known = true;
	for (unsigned i = 0; i < now.n_tunnels; i++) {
		size_t n = strlen(tunnels);
		snprintf(tunnels + n, sizeof(tunnels) - n, "%s%s %s%s", i ? ", " : "", now.tunnels[i].ifname,
		         now.tunnels[i].kind, now.tunnels[i].via_uplink ? " (via the uplink)" : "");
	}
	for (unsigned i = 0; i < now.n_cidrs; i++) {
		size_t n = strlen(cidrs);
		snprintf(cidrs + n, sizeof(cidrs) - n, "%s%s", i ? " " : "", now.pod_cidrs[i]);
	}
	snprintf(bytes, sizeof(bytes), "%u", datapath_tunnel_bytes(&now));
	log_msg(LOG_LVL_INFO, "datapath", "encapsulation", datapath_encap(&now), "tunnel_header_bytes", bytes,
	        "tunnels", tunnels[0] ? tunnels : "none", "pod_cidrs", cidrs[0] ? cidrs : "unknown", "cni",
	        now.cni[0] ? now.cni : "unknown", (char *)NULL);
	*dp = now;
}

static const struct dp_tunnel *encap_tunnel(const struct datapath *dp)
{
	const struct dp_tunnel *best = NULL;

	for (unsigned i = 0; i < dp->n_tunnels; i++)
		if (dp->tunnels[i].via_uplink && (!best || dp->tunnels[i].header_bytes > best->header_bytes))
			best = &dp->tunnels[i];
	return best;
}

const char *datapath_encap(const struct datapath *dp)
{
	const struct dp_tunnel *t = encap_tunnel(dp);

	return t ? t->kind : "none";
}

uint32_t datapath_tunnel_bytes(const struct datapath *dp)
{
	const struct dp_tunnel *t = encap_tunnel(dp);

	return t ? t->header_bytes : 0;
}

uint32_t datapath_overhead(bool configured, uint32_t config_bytes, const struct datapath *dp)
{
	uint32_t v;

	if (configured)
		return config_bytes;
	v = NODE_OVERHEAD_DEFAULT + (dp ? datapath_tunnel_bytes(dp) : 0);
	return v > NODE_OVERHEAD_MAX ? NODE_OVERHEAD_MAX : v;
}

cJSON *datapath_json(const struct datapath *dp)
{
	_cleanup_json_ cJSON *j = cJSON_CreateObject();
	cJSON *tun, *cidrs;

	if (!j || !cJSON_AddStringToObject(j, "encapsulation", datapath_encap(dp)) ||
	    !cJSON_AddNumberToObject(j, "tunnelHeaderBytes", datapath_tunnel_bytes(dp)) ||
	    !(tun = cJSON_AddArrayToObject(j, "tunnels")) || !(cidrs = cJSON_AddArrayToObject(j, "podCIDRs")) ||
	    !cJSON_AddStringToObject(j, "podCIDRsFrom", dp->cidrs_from) || !cJSON_AddStringToObject(j, "cni", dp->cni))
		return NULL;
	for (unsigned i = 0; i < dp->n_tunnels; i++) {
		const struct dp_tunnel *t = &dp->tunnels[i];
		cJSON *o = cJSON_CreateObject();

		if (!o || !cJSON_AddItemToArray(tun, o) || !cJSON_AddStringToObject(o, "device", t->ifname) ||
		    !cJSON_AddStringToObject(o, "kind", t->kind) || !cJSON_AddNumberToObject(o, "port", t->port) ||
		    !cJSON_AddStringToObject(o, "link", t->link) ||
		    !cJSON_AddStringToObject(o, "outer", t->outer6 ? "ipv6" : "ipv4") ||
		    !cJSON_AddBoolToObject(o, "up", t->up) || !cJSON_AddBoolToObject(o, "viaUplink", t->via_uplink) ||
		    !cJSON_AddNumberToObject(o, "headerBytes", t->header_bytes))
			return NULL;
	}
	for (unsigned i = 0; i < dp->n_cidrs; i++)
		if (!cJSON_AddItemToArray(cidrs, cJSON_CreateString(dp->pod_cidrs[i])))
			return NULL;
	return TAKE_PTR(j);
}
