/* cilium_standin.c — test tooling, not product code: a stand-in for an
 * eBPF CNI on a native device (Cilium with tcx, the default on kernels >=
 * 6.6), for the coexistence tests and benchmarks (issue 29).
 *
 *   cilium-standin attach DEV PINDIR [calico]   tcx programs at the tail of DEV's
 *       ingress and egress hooks (cilium_standin.bpf.c: TC_ACT_OK, counting
 *       every packet), their links and counter map pinned in PINDIR (a bpffs
 *       directory): they outlive the tool; "calico": Calico's eBPF
 *       dataplane's stand-in instead (cali_tc_*: TC_ACT_UNSPEC, hands on)
 *   cilium-standin count PINDIR        "ingress N" and "egress N" (the
 *       calico set: "calico-ingress N", "calico-egress N")
 *   cilium-standin peer PINDIR IPV4 DEV   packets for IPV4 go straight into
 *       the pod behind the host-side veth DEV (bpf_redirect_peer), as with
 *       Cilium's BPF host routing
 *   cilium-standin detach PINDIR       unpin (the links go with the pins)
 *   cilium-standin query DEV           the programs on DEV's tcx hooks, in
 *       the order they run: "ingress NAME" / "egress NAME" lines
 *   cilium-standin flush-legacy DEV    delete every legacy tc filter on DEV's
 *       clsact hooks, both directions, once (Cilium's loader: removeTCFilters
 *       after attaching, pkg/datapath/loader/tc.go); prints how many
 *
 * libbpf 1.1 has no tcx helpers: bpf_link_create with BPF_TCX_INGRESS /
 * BPF_TCX_EGRESS (46 / 47, defined here where the UAPI headers lack them)
 * and no BPF_F_BEFORE/AFTER appends at the tail, as Cilium attaches. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/pkt_sched.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf_load.h"
#include "cilium_standin.skel.h"
#include "nl.h"

#ifndef BPF_TCX_INGRESS
#define BPF_TCX_INGRESS 46
#define BPF_TCX_EGRESS  47
#endif

static int usage(void)
{
	fprintf(stderr, "usage: cilium-standin attach DEV PINDIR [calico] | count PINDIR | peer PINDIR IPV4 DEV | "
	                "detach PINDIR | query DEV | flush-legacy DEV\n");
	return 2;
}

static int pin_path(char *buf, size_t size, const char *dir, const char *name)
{
	int n = snprintf(buf, size, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static int attach(const char *dev, const char *dir, bool calico)
{
	static const char *const names[2] = {"ingress", "egress"};
	struct cilium_standin_bpf *skel;
	unsigned ifindex = if_nametoindex(dev);
	char path[4096];
	int r = 0;

	if (!ifindex) {
		fprintf(stderr, "cilium-standin: device %s: %s\n", dev, strerror(errno));
		return 1;
	}
	skel = cilium_standin_bpf__open_and_load();
	if (!skel) {
		fprintf(stderr, "cilium-standin: load the programs: %s\n", strerror(errno));
		return 1;
	}
	for (int k = 0; k < 2 && !r; k++) {
		const struct bpf_program *p = calico ? (k ? skel->progs.cali_tc_egress : skel->progs.cali_tc_ingress)
		                                     : (k ? skel->progs.cil_to_netdev : skel->progs.cil_from_netdev);
		int fd = bpf_link_create(bpf_program__fd(p), (int)ifindex, k ? BPF_TCX_EGRESS : BPF_TCX_INGRESS, NULL);

		if (fd < 0) {
			fprintf(stderr, "cilium-standin: tcx %s link on %s: %s\n", names[k], dev, strerror(-fd));
			r = 1;
			break;
		}
		if (pin_path(path, sizeof(path), dir, names[k]) < 0 || bpf_obj_pin(fd, path) < 0) {
			fprintf(stderr, "cilium-standin: pin %s/%s: %s\n", dir, names[k], strerror(errno));
			r = 1;
		}
		close(fd);
	}
	if (!r && (pin_path(path, sizeof(path), dir, "counts") < 0 ||
	           bpf_obj_pin(bpf_map__fd(skel->maps.standin_counts), path) < 0)) {
		fprintf(stderr, "cilium-standin: pin %s/counts: %s\n", dir, strerror(errno));
		r = 1;
	}
	if (!r && (pin_path(path, sizeof(path), dir, "peer") < 0 ||
	           bpf_obj_pin(bpf_map__fd(skel->maps.standin_peer), path) < 0)) {
		fprintf(stderr, "cilium-standin: pin %s/peer: %s\n", dir, strerror(errno));
		r = 1;
	}
	cilium_standin_bpf__destroy(skel);
	return r;
}

static int count(const char *dir)
{
	char path[4096];
	int fd;

	if (pin_path(path, sizeof(path), dir, "counts") < 0 || (fd = bpf_obj_get(path)) < 0) {
		fprintf(stderr, "cilium-standin: %s/counts: %s\n", dir, strerror(errno));
		return 1;
	}
	static const char *const names[4] = {"ingress", "egress", "calico-ingress", "calico-egress"};

	for (__u32 k = 0; k < 4; k++) {
		__u64 v = 0;

		if (bpf_map_lookup_elem(fd, &k, &v) < 0) {
			fprintf(stderr, "cilium-standin: read the counters: %s\n", strerror(errno));
			close(fd);
			return 1;
		}
		printf("%s %llu\n", names[k], (unsigned long long)v);
	}
	close(fd);
	return 0;
}

static int peer(const char *dir, const char *ip, const char *dev)
{
	char path[4096];
	__u32 dst, ifindex = if_nametoindex(dev);
	int fd;

	if (inet_pton(AF_INET, ip, &dst) != 1 || !ifindex) {
		fprintf(stderr, "cilium-standin: peer %s %s: not an IPv4 address and a device\n", ip, dev);
		return 1;
	}
	if (pin_path(path, sizeof(path), dir, "peer") < 0 || (fd = bpf_obj_get(path)) < 0) {
		fprintf(stderr, "cilium-standin: %s/peer: %s\n", dir, strerror(errno));
		return 1;
	}
	if (bpf_map_update_elem(fd, &dst, &ifindex, BPF_ANY) < 0) {
		fprintf(stderr, "cilium-standin: peer %s: %s\n", ip, strerror(errno));
		close(fd);
		return 1;
	}
	close(fd);
	return 0;
}

static int detach(const char *dir)
{
	static const char *const names[4] = {"ingress", "egress", "counts", "peer"};
	char path[4096];
	int r = 0;

	for (int k = 0; k < 4; k++)
		if (pin_path(path, sizeof(path), dir, names[k]) < 0 || (unlink(path) < 0 && errno != ENOENT)) {
			fprintf(stderr, "cilium-standin: unpin %s/%s: %s\n", dir, names[k], strerror(errno));
			r = 1;
		}
	return r;
}

static int query(const char *dev)
{
	unsigned ifindex = if_nametoindex(dev);

	if (!ifindex) {
		fprintf(stderr, "cilium-standin: device %s: %s\n", dev, strerror(errno));
		return 1;
	}
	for (int k = 0; k < 2; k++) {
		struct bpf_tcx_prog p[16];
		struct error e = {0};
		unsigned n = 0;

		if (bpf_tcx_query((int)ifindex, k, p, ARRAY_SIZE(p), &n, &e) < 0) {
			fprintf(stderr, "cilium-standin: %s\n", e.msg);
			return 1;
		}
		for (unsigned i = 0; i < n && i < ARRAY_SIZE(p); i++)
			printf("%s %s\n", k ? "egress" : "ingress", p[i].name);
	}
	return 0;
}

static int flush_legacy(const char *dev)
{
	_cleanup_nl_ struct nl_sock *sk = NULL;
	struct tc_dump_list d = {0};
	struct link_info li;
	struct error e = {0};
	unsigned n = 0;

	if (nl_open(&sk, &e) < 0 || nl_link_get(sk, dev, 0, &li, &e) < 0 ||
	    nl_tc_dump_alloc(sk, li.ifindex, 0, &d, &e) < 0) {
		fprintf(stderr, "cilium-standin: %s: %s\n", dev, e.msg);
		return 1;
	}
	for (unsigned i = 0; i < d.n; i++) {
		const struct tc_spec *o = &d.tc[i];

		if (o->type != TC_FILTER || TC_H_MAJ(o->parent) != TC_H_MAJ(TC_H_CLSACT))
			continue;
		if (nl_tc_delete(sk, li.ifindex, o, &e) < 0 && e.errnum != ENOENT) {
			fprintf(stderr, "cilium-standin: delete a filter on %s: %s\n", dev, e.msg);
			error_clear(&e);
			continue;
		}
		n++;
	}
	tc_dump_list_free(&d);
	printf("%u\n", n);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && streq(argv[1], "attach"))
		return attach(argv[2], argv[3], false);
	if (argc == 5 && streq(argv[1], "attach") && streq(argv[4], "calico"))
		return attach(argv[2], argv[3], true);
	if (argc == 3 && streq(argv[1], "count"))
		return count(argv[2]);
	if (argc == 5 && streq(argv[1], "peer"))
		return peer(argv[2], argv[3], argv[4]);
	if (argc == 3 && streq(argv[1], "detach"))
		return detach(argv[2]);
	if (argc == 3 && streq(argv[1], "query"))
		return query(argv[2]);
	if (argc == 3 && streq(argv[1], "flush-legacy"))
		return flush_legacy(argv[2]);
	return usage();
}
