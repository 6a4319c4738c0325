/* cni_kernel_floor.c — the kernel's own share of an aiqos ADD/DEL, measured
 * in-process (no exec, no libnl, no JSON): the netlink requests and sysctl
 * writes the plugin ends up making for an inference pod with 10 Mbit/s both
 * ways, built once from the real planner and kind vtables, then timed one by
 * one over N rounds on a raw rtnetlink socket. Prints p50 per step and the
 * sum per verb, i.e. what no user-space change can remove.
 *
 * usage: cni_kernel_floor NETNS_PATH POD_IFNAME HOST_IFNAME [N]
 * (root; the interfaces must exist and carry no aiqos qdiscs) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/rtnetlink.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <netlink/msg.h>

#include "plan.h"
#include "profile.h"
#include "tc/tc_int.h"

#define STEPS_MAX 32

struct step {
	char name[64];
	double *ns; /* one sample per round */
};

static struct step steps[STEPS_MAX];
static unsigned n_steps;
static unsigned n_rounds;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static struct step *step_get(const char *name)
{
	for (unsigned i = 0; i < n_steps; i++)
		if (streq(steps[i].name, name))
			return &steps[i];
	if (n_steps >= STEPS_MAX) {
		fprintf(stderr, "too many steps\n");
		exit(2);
	}
	snprintf(steps[n_steps].name, sizeof(steps[0].name), "%s", name);
	steps[n_steps].ns = calloc(n_rounds, sizeof(double));
	if (!steps[n_steps].ns)
		exit(2);
	return &steps[n_steps++];
}

static void record(const char *name, unsigned round, uint64_t t0)
{
	step_get(name)->ns[round] = (double)(now_ns() - t0);
}

static int nl_socket_raw(void)
{
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
	int one = 1;
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);

	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("netlink socket");
		exit(2);
	}
	(void)setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
	return fd;
}

/* One request, its ack (or data + ack). Returns the kernel's errno (0 ok). */
static int nl_roundtrip(int fd, struct nlmsghdr *h)
{
	static uint32_t seq = 1;
	char buf[16384];

	h->nlmsg_seq = seq++;
	h->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	if (send(fd, h, h->nlmsg_len, 0) < 0) {
		perror("send");
		exit(2);
	}
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0) {
			perror("recv");
			exit(2);
		}
		for (struct nlmsghdr *r = (struct nlmsghdr *)buf; NLMSG_OK(r, (size_t)n); r = NLMSG_NEXT(r, n))
			if (r->nlmsg_type == NLMSG_ERROR)
				return -((struct nlmsgerr *)NLMSG_DATA(r))->error;
	}
}

/* The request for s as nl_tc_replace/nl_tc_delete would send it. */
static struct nl_msg *tc_msg(int type, int flags, int ifindex, const struct tc_spec *s, bool options)
{
	const struct tc_kind *k = tc_kind_get(s->kind);
	struct tcmsg t = {
	        .tcm_family = AF_UNSPEC, .tcm_ifindex = ifindex, .tcm_handle = s->handle, .tcm_parent = s->parent};
	struct nl_msg *m;

	if (s->kind == TC_KIND_CLSACT) {
		t.tcm_parent = TC_H_CLSACT;
		t.tcm_handle = TC_H_MAKE(TC_H_CLSACT, 0);
	}
	m = nlmsg_alloc_simple(type, flags);
	if (!m || nlmsg_append(m, &t, sizeof(t), NLMSG_ALIGNTO) < 0 || nla_put_string(m, TCA_KIND, k->name) < 0 ||
	    (options && k->fill(m, s) < 0)) {
		fprintf(stderr, "cannot build the request\n");
		exit(2);
	}
	return m;
}

static struct nl_msg *link_msg(const char *ifname)
{
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
	struct nl_msg *m = nlmsg_alloc_simple(RTM_GETLINK, 0);

	if (!m || nlmsg_append(m, &ifi, sizeof(ifi), NLMSG_ALIGNTO) < 0 ||
	    nla_put_u32(m, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS) < 0 || nla_put_string(m, IFLA_IFNAME, ifname) < 0)
		exit(2);
	return m;
}

static int ifindex_of(int fd, const char *ifname)
{
	struct nl_msg *m = link_msg(ifname);
	char buf[16384];
	struct nlmsghdr *h = nlmsg_hdr(m);
	ssize_t n;

	h->nlmsg_flags |= NLM_F_REQUEST;
	h->nlmsg_seq = 0;
	if (send(fd, h, h->nlmsg_len, 0) < 0 || (n = recv(fd, buf, sizeof(buf), 0)) <= 0)
		exit(2);
	nlmsg_free(m);
	h = (struct nlmsghdr *)buf;
	if (h->nlmsg_type != RTM_NEWLINK) {
		fprintf(stderr, "no interface %s\n", ifname);
		exit(2);
	}
	return ((struct ifinfomsg *)NLMSG_DATA(h))->ifi_index;
}

static void sysctl_put(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, val, strlen(val)) < 0) {
		perror(path);
		exit(2);
	}
	close(fd);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double p50_us(double *v)
{
	qsort(v, n_rounds, sizeof(double), cmp_double);
	return v[n_rounds / 2] / 1000.0;
}

#define BENCH_ITEMS_MAX 64 /* a pod plan has at most 14 */

int main(int argc, char **argv)
{
	struct profile_set ps;
	struct workload w = {0};
	struct attach_ifaces ifs = {.mtu = 1500};
	_cleanup_plan_ struct plan plan = {0};
	struct plan *p = &plan;
	struct nl_msg *add_msg[BENCH_ITEMS_MAX], *del_msg[BENCH_ITEMS_MAX];
	int add_fd[BENCH_ITEMS_MAX], del_fd[BENCH_ITEMS_MAX];
	const char *add_name[BENCH_ITEMS_MAX], *del_name[BENCH_ITEMS_MAX];
	unsigned n_add = 0, n_del = 0;
	int self, pod_ns, pod_fd, host_fd, pod_ifindex, host_ifindex;

	if (argc < 4) {
		fprintf(stderr, "usage: %s NETNS_PATH POD_IFNAME HOST_IFNAME [N]\n", argv[0]);
		return 2;
	}
	n_rounds = argc > 4 ? (unsigned)strtoul(argv[4], NULL, 10) : 300;
	if (n_rounds < 1)
		return 2;
	self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	pod_ns = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (self < 0 || pod_ns < 0 || setns(pod_ns, CLONE_NEWNET) < 0) {
		perror("netns");
		return 2;
	}
	pod_fd = nl_socket_raw();
	if (setns(self, CLONE_NEWNET) < 0)
		return 2;
	host_fd = nl_socket_raw();
	pod_ifindex = ifindex_of(pod_fd, argv[2]);
	host_ifindex = ifindex_of(host_fd, argv[3]);

	/* the plan ADD makes for the bench's pod, and what this kernel keeps of it */
	profile_set_builtin(&ps);
	w.class = CLASS_INFERENCE;
	w.egress_bps = w.ingress_bps = 10000000;
	str_copy(ifs.pod_ifname, sizeof(ifs.pod_ifname), argv[2]);
	str_copy(ifs.host_ifname, sizeof(ifs.host_ifname), argv[3]);
	if (plan_pod(&w, profile_resolve(&ps, &w, NULL, 0), &ifs, NULL, p) < 0 || p->n > BENCH_ITEMS_MAX)
		return 2;
	for (unsigned i = 0; i < p->n; i++) {
		const struct plan_item *it = &p->items[i];
		int fd = it->dev == DEV_POD ? pod_fd : host_fd;
		int ifindex = it->dev == DEV_POD ? pod_ifindex : host_ifindex;
		static const int new_type[] = {[TC_QDISC] = RTM_NEWQDISC, [TC_CLASS] = RTM_NEWTCLASS};
		const struct tc_spec *s = NULL;

		if (it->type != ITEM_TC)
			continue;
		/* the first alternative this kernel accepts (fq_codel, pedit: none) */
		for (unsigned a = 0; a < it->n_alt && !s; a++) {
			struct nl_msg *m;
			if (it->tc[a].type == TC_FILTER)
				break;
			m = tc_msg(new_type[it->tc[a].type], NLM_F_CREATE | NLM_F_REPLACE, ifindex, &it->tc[a], true);
			if (nl_roundtrip(fd, nlmsg_hdr(m)) == 0) {
				s = &it->tc[a];
				add_msg[n_add] = m;
				add_fd[n_add] = fd;
				add_name[n_add++] = it->id;
				if (s->type == TC_QDISC && (s->parent == TC_H_ROOT || s->parent == TC_H_CLSACT)) {
					del_msg[n_del] = tc_msg(RTM_DELQDISC, 0, ifindex, s, false);
					del_fd[n_del] = fd;
					del_name[n_del++] = it->id;
				}
			} else {
				nlmsg_free(m);
			}
		}
	}
	for (unsigned i = 0; i < n_del; i++)
		nl_roundtrip(del_fd[i], nlmsg_hdr(del_msg[i]));

	for (unsigned r = 0; r < n_rounds; r++) {
		char name[96];
		uint64_t t0, t_all;
		int fd;

		/* per-process set-up: netns fd, a socket in it, one in the host */
		t_all = t0 = now_ns();
		fd = open(argv[1], O_RDONLY | O_CLOEXEC);
		record("open netns", r, t0);
		t0 = now_ns();
		if (setns(fd, CLONE_NEWNET) < 0)
			return 2;
		int s1 = nl_socket_raw();
		if (setns(self, CLONE_NEWNET) < 0)
			return 2;
		record("socket in pod netns (2 setns)", r, t0);
		t0 = now_ns();
		int s2 = nl_socket_raw();
		record("socket in host netns", r, t0);
		t0 = now_ns();
		struct nl_msg *lm = link_msg(argv[2]);
		nl_roundtrip(s1, nlmsg_hdr(lm));
		record("RTM_GETLINK pod", r, t0);
		nlmsg_free(lm);
		t0 = now_ns();
		lm = link_msg(argv[3]);
		nl_roundtrip(s2, nlmsg_hdr(lm));
		record("RTM_GETLINK host", r, t0);
		nlmsg_free(lm);
		t0 = now_ns();
		if (setns(fd, CLONE_NEWNET) < 0)
			return 2;
		sysctl_put("/proc/sys/net/ipv4/tcp_ecn", "1\n");
		sysctl_put("/proc/sys/net/ipv4/tcp_congestion_control", "bbr\n");
		sysctl_put("/proc/sys/net/ipv4/tcp_notsent_lowat", "16384\n");
		if (setns(self, CLONE_NEWNET) < 0)
			return 2;
		record("3 sysctl writes (2 setns)", r, t0);
		close(s1);
		close(s2);
		close(fd);
		for (unsigned i = 0; i < n_add; i++) {
			t0 = now_ns();
			int e = nl_roundtrip(add_fd[i], nlmsg_hdr(add_msg[i]));
			snprintf(name, sizeof(name), "ADD %s", add_name[i]);
			record(name, r, t0);
			if (e) {
				fprintf(stderr, "%s: %s\n", name, strerror(e));
				return 1;
			}
		}
		record("ADD kernel total", r, t_all);
		t_all = now_ns();
		for (unsigned i = 0; i < n_del; i++) {
			t0 = now_ns();
			int e = nl_roundtrip(del_fd[i], nlmsg_hdr(del_msg[i]));
			snprintf(name, sizeof(name), "DEL %s (root qdisc)", del_name[i]);
			record(name, r, t0);
			if (e) {
				fprintf(stderr, "%s: %s\n", name, strerror(e));
				return 1;
			}
		}
		record("DEL kernel total", r, t_all);
	}
	printf("# kernel floor, in-process, raw rtnetlink, p50 of %u rounds (us)\n", n_rounds);
	for (unsigned i = 0; i < n_steps; i++)
		printf("%-40s %8.1f\n", steps[i].name, p50_us(steps[i].ns));
	return 0;
}
