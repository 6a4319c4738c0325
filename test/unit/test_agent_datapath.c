/* test_agent_datapath.c — agent/node/datapath.c without a kernel: the bytes
 * each tunnel kind adds, the uplinkOverhead rule (the config's when set,
 * else the Ethernet framing plus the tunnel header of the encapsulation
 * that sends by the uplink), which tunnel that is, and the pod CIDRs read
 * from a primary CNI config's host-local ranges and from Flannel's subnet
 * file. The rtnetlink side is test/integration (test_agent_overlay.py,
 * test_doctor.py). */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node.h"
#include "node/datapath.h"
#include "t.h"
#include "util.h"

TEST(header_bytes_per_kind)
{
	CHECK_INT(datapath_header_bytes("vxlan", false), 50);
	CHECK_INT(datapath_header_bytes("vxlan", true), 70);
	CHECK_INT(datapath_header_bytes("geneve", false), 50);
	CHECK_INT(datapath_header_bytes("geneve", true), 70);
	CHECK_INT(datapath_header_bytes("ipip", false), 20);
	CHECK_INT(datapath_header_bytes("ip6tnl", true), 40);
	CHECK_INT(datapath_header_bytes("wireguard", false), 60);
	CHECK_INT(datapath_header_bytes("veth", false), 0);
	CHECK_INT(datapath_header_bytes("bridge", false), 0);
	CHECK_INT(datapath_header_bytes("", false), 0);
}

static struct dp_tunnel tun(const char *name, const char *kind, bool outer6, bool via)
{
	struct dp_tunnel t = {.outer6 = outer6, .up = true, .via_uplink = via};

	str_copy(t.ifname, sizeof(t.ifname), name);
	str_copy(t.kind, sizeof(t.kind), kind);
	t.header_bytes = datapath_header_bytes(kind, outer6);
	return t;
}

TEST(overhead_rule)
{
	struct datapath dp = {0};

	/* routed: the Ethernet framing alone */
	CHECK_STR(datapath_encap(&dp), "none");
	CHECK_INT(datapath_overhead(false, NODE_OVERHEAD_DEFAULT, &dp), 24);
	/* a tunnel that does not send by the uplink (bound elsewhere, down) adds nothing */
	dp.tunnels[dp.n_tunnels++] = tun("vxlan.other", "vxlan", false, false);
	CHECK_STR(datapath_encap(&dp), "none");
	CHECK_INT(datapath_overhead(false, NODE_OVERHEAD_DEFAULT, &dp), 24);
	/* IPIP by the uplink: 20; a VXLAN over IPv6 too: the larger counts */
	dp.tunnels[dp.n_tunnels++] = tun("tunl0", "ipip", false, true);
	CHECK_STR(datapath_encap(&dp), "ipip");
	CHECK_INT(datapath_overhead(false, 0, &dp), 44);
	dp.tunnels[dp.n_tunnels++] = tun("vxlan-v6.calico", "vxlan", true, true);
	CHECK_STR(datapath_encap(&dp), "vxlan");
	CHECK_INT(datapath_tunnel_bytes(&dp), 70);
	CHECK_INT(datapath_overhead(false, 0, &dp), 94);
	/* set in the config: kept, also 0 */
	CHECK_INT(datapath_overhead(true, 38, &dp), 38);
	CHECK_INT(datapath_overhead(true, 0, &dp), 0);
	CHECK_INT(datapath_overhead(false, 0, NULL), 24);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	CHECK(f != NULL);
	if (!f)
		return;
	fputs(text, f);
	fclose(f);
}

TEST(pod_cidrs_from_the_cni_config_or_flannel)
{
	char dir[] = "/tmp/aiqos-dp-XXXXXX", path[256], env[256];
	struct datapath dp = {0};

	CHECK(mkdtemp(dir) != NULL);
	snprintf(env, sizeof(env), "%s/subnet.env", dir);
	/* no CNI config, no Flannel file: unknown */
	datapath_cni(NULL, env, &dp);
	CHECK_INT(dp.n_cidrs, 0);
	CHECK_STR(dp.cidrs_from, "");
	/* Flannel's file: the gateway address's network, both families */
	write_file(env, "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.3.1/24\nFLANNEL_MTU=1450\n"
	                "FLANNEL_IPV6_SUBNET=fd00:10:244:3::1/64\n");
	datapath_cni(NULL, env, &dp);
	CHECK_INT(dp.n_cidrs, 2);
	CHECK_STR(dp.pod_cidrs[0], "10.244.3.0/24");
	CHECK_STR(dp.pod_cidrs[1], "fd00:10:244:3::/64");
	CHECK_STR(dp.cidrs_from, env);
	/* a primary conflist with host-local ranges wins (kindnet's) */
	snprintf(path, sizeof(path), "%s/net.d", dir);
	CHECK_INT(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/net.d/10-kindnet.conflist", dir);
	write_file(path, "{\"cniVersion\":\"1.0.0\",\"name\":\"kindnet\",\"plugins\":[{\"type\":\"ptp\",\"ipam\":"
	                 "{\"type\":\"host-local\",\"ranges\":[[{\"subnet\":\"10.244.7.0/24\"}],"
	                 "[{\"subnet\":\"fd00:10:244:7::/64\"}]]}},{\"type\":\"portmap\"}]}");
	snprintf(path, sizeof(path), "%s/net.d", dir);
	datapath_cni(path, env, &dp);
	CHECK_INT(dp.n_cidrs, 2);
	CHECK_STR(dp.pod_cidrs[0], "10.244.7.0/24");
	CHECK_STR(dp.pod_cidrs[1], "fd00:10:244:7::/64");
	CHECK_CONTAINS(dp.cidrs_from, "10-kindnet.conflist (host-local ranges)");
	CHECK_STR(dp.cni, "ptp (kindnet or plain CNI plugins)");
	/* Flannel's conflist (a delegate, no ranges): its subnet file */
	snprintf(path, sizeof(path), "%s/net.d/10-kindnet.conflist", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/net.d/10-flannel.conflist", dir);
	write_file(path, "{\"cniVersion\":\"0.3.1\",\"name\":\"cbr0\",\"plugins\":[{\"type\":\"flannel\",\"delegate\":"
	                 "{\"hairpinMode\":true,\"isDefaultGateway\":true}},{\"type\":\"portmap\"}]}");
	snprintf(path, sizeof(path), "%s/net.d", dir);
	datapath_cni(path, env, &dp);
	CHECK_STR(dp.cni, "Flannel");
	CHECK_INT(dp.n_cidrs, 2);
	CHECK_STR(dp.pod_cidrs[0], "10.244.3.0/24");
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	CHECK_INT(system(path), 0);
}
