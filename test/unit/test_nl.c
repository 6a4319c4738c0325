/* test_nl.c — the netlink mechanism against the running kernel. Needs root:
 * the whole binary moves into a private network namespace (unshare) before
 * any test runs, so every veth it creates vanishes with the process. Each
 * kind this kernel supports is created with nl_tc_replace, read back with
 * nl_tc_dump, matched against the desired spec and cross-checked with
 * `tc -j qdisc show` / `tc -d class show` / `tc filter show`; tc_spec_format()
 * output is run through the real tc(8). Kinds the kernel lacks must fail
 * with an errno that allows a fallback, and the test prints which one.
 * Without root: "0 passed, 0 failed, N skipped", exit 0. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cjson/cJSON.h>
#include <netlink/socket.h>

#include "nl.h"
#include "t.h"
#include "tc/tc.h"

#define H(maj, min) TC_H_MAKE((uint32_t)(maj) << 16, (min))
#define EGRESS      TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS)
#define INGRESS     TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS)
#define CMD_MAX     1024
#define OUT_MAX     65536

static struct nl_sock *sk;

/* --- shell helpers (tc/ip run in this process's private netns) --- */

/* Run a command and capture stdout (stderr dropped). Returns exit status. */
_printf_(3, 4) static int sh_out(char *out, size_t size, const char *fmt, ...)
{
	char cmd[CMD_MAX];
	va_list ap;
	size_t n = 0;
	FILE *f;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	out[0] = '\0';
	f = popen(cmd, "re");
	if (!f)
		return -1;
	while (n + 1 < size) {
		size_t k = fread(out + n, 1, size - 1 - n, f);
		if (k == 0)
			break;
		n += k;
	}
	out[n] = '\0';
	st = pclose(f);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* A fresh veth pair "aqt-nl-<n>" / "aqt-nl-<n>p", up. Returns the ifindex. */
static int dev_new(char *name, size_t size, unsigned txq)
{
	static unsigned n;
	struct link_info li;
	struct error e = {0};
	int r;

	snprintf(name, size, "aqt-nl-%u", n++);
	if (t_sh("ip link add %s numtxqueues %u type veth peer name %sp && ip link set %s up && ip link set %sp up",
	         name, txq ? txq : 1, name, name, name) != 0) {
		fprintf(stderr, "  cannot create veth %s\n", name);
		t_failed_now = 1;
		return -1;
	}
	r = nl_link_get(sk, name, 0, &li, &e);
	if (r < 0) {
		fprintf(stderr, "  nl_link_get %s: %s\n", name, e.msg);
		t_failed_now = 1;
		return -1;
	}
	return li.ifindex;
}

/* --- spec builders --- */

static struct tc_spec q(enum tc_kind_id kind, uint32_t parent, uint32_t handle)
{
	return (struct tc_spec){.type = TC_QDISC, .kind = kind, .parent = parent, .handle = handle};
}

static struct tc_spec htb_class(uint32_t parent, uint32_t classid, uint64_t rate, uint64_t ceil, uint32_t prio)
{
	struct tc_spec s = {.type = TC_CLASS, .kind = TC_KIND_HTB_CLASS, .parent = parent, .handle = classid};
	s.u.htb_class = (struct tc_htb_class){.rate_bps = rate, .ceil_bps = ceil, .prio = prio};
	return s;
}

static struct tc_spec u32(uint32_t parent, uint16_t prio, uint16_t protocol, uint32_t handle, uint32_t classid)
{
	struct tc_spec s = {.type = TC_FILTER,
	                    .kind = TC_KIND_U32,
	                    .parent = parent,
	                    .prio = prio,
	                    .protocol = protocol,
	                    .handle = handle};
	s.u.u32.family = protocol == ETH_P_IPV6 ? AF_INET6 : protocol == ETH_P_IP ? AF_INET : 0;
	s.u.u32.classid = classid;
	s.u.u32.dscp = -1;
	return s;
}

static struct tc_spec u32_addr(struct tc_spec s, enum u32_match m, const char *addr, uint8_t prefix)
{
	s.u.u32.match = m;
	s.u.u32.prefix_len = prefix;
	if (inet_pton(s.u.u32.family, addr, s.u.u32.addr) != 1)
		t_failed_now = 1;
	return s;
}

/* --- kernel access with error reporting --- */

static int replace(int ifindex, const struct tc_spec *s)
{
	struct error e = {0};
	int r = nl_tc_replace(sk, ifindex, s, &e);

	if (r < 0)
		fprintf(stderr, "  %s\n", e.msg);
	return r;
}

static bool dump(int ifindex, struct tc_dump *d)
{
	struct error e = {0};
	int r = nl_tc_dump(sk, ifindex, d, &e);

	if (r < 0) {
		fprintf(stderr, "  nl_tc_dump: %s\n", e.msg);
		t_failed_now = 1;
		return false;
	}
	return true;
}

static const struct tc_spec *find_match(const struct tc_dump *d, const struct tc_spec *want)
{
	for (unsigned i = 0; i < d->n; i++)
		if (tc_spec_match(want, &d->tc[i]))
			return &d->tc[i];
	return NULL;
}

static unsigned count_type(const struct tc_dump *d, enum tc_type t)
{
	unsigned n = 0;
	for (unsigned i = 0; i < d->n; i++)
		n += d->tc[i].type == t;
	return n;
}

/* CHECK that every desired spec has a matching object in the dump. */
static void check_all_match(const struct tc_dump *d, const struct tc_spec *want, size_t n)
{
	char buf[TC_FORMAT_MAX];

	for (size_t i = 0; i < n; i++) {
		if (find_match(d, &want[i]))
			continue;
		tc_spec_format(&want[i], "DEV", "replace", buf, sizeof(buf));
		fprintf(stderr, "  no object matches: %s\n  dump has:\n", buf);
		for (unsigned j = 0; j < d->n; j++) {
			if (tc_spec_format(&d->tc[j], "DEV", "show", buf, sizeof(buf)) < 0)
				snprintf(buf, sizeof(buf), "(%s, kind not known to aiqos)", d->kind_name[j]);
			fprintf(stderr, "    %s\n", buf);
		}
		t_failed_now = 1;
	}
}

/* AIQOS_EXPECT_FULL_KERNEL=1: the test runs on a kernel with every kind and
 * action (the VM of hack/test-kernel.sh), so no fallback may happen. */
static bool expect_full_kernel(void)
{
	const char *v = getenv("AIQOS_EXPECT_FULL_KERNEL");
	return v && streq(v, "1");
}

static bool errno_allows_fallback(int r)
{
	return r == -ENOENT || r == -EOPNOTSUPP || r == -EINVAL;
}

/* --- parsing tc(8) text output --- */

/* "500Mbit" / "1.5Gbit" / "12Kbit" / "800bit" -> bit/s */
static double tc_text_rate(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (strncmp(end, "Tbit", 4) == 0)
		return v * 1e12;
	if (strncmp(end, "Gbit", 4) == 0)
		return v * 1e9;
	if (strncmp(end, "Mbit", 4) == 0)
		return v * 1e6;
	if (strncmp(end, "Kbit", 4) == 0)
		return v * 1e3;
	return v;
}

/* "65500b" / "128Kb" / "1Mb" -> bytes (tc's binary units) */
static double tc_text_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (*end == 'K')
		return v * 1024;
	if (*end == 'M')
		return v * 1024 * 1024;
	if (*end == 'G')
		return v * 1024 * 1024 * 1024;
	return v;
}

/* Value of the word after `key` in line (bounded to the line). */
static bool word_after(const char *line, const char *key, char *ret, size_t size)
{
	char pat[64];
	const char *p;
	size_t n = 0;

	snprintf(pat, sizeof(pat), " %s ", key);
	p = strstr(line, pat);
	if (!p)
		return false;
	p += strlen(pat);
	while (p[n] && p[n] != ' ' && p[n] != '\n' && n + 1 < size) {
		ret[n] = p[n];
		n++;
	}
	ret[n] = '\0';
	return n > 0;
}

static bool close_rel(double a, double b, double rel)
{
	double d = a > b ? a - b : b - a;
	return d <= rel * (a > b ? a : b) + 1e-9;
}

/* The `tc -d class show` line of classid, copied into line. */
static bool tc_class_line(const char *out, const char *classid, char *line, size_t size)
{
	char pat[64];
	const char *p, *e;

	snprintf(pat, sizeof(pat), "class htb %s ", classid);
	p = strstr(out, pat);
	if (!p)
		return false;
	e = strchr(p, '\n');
	snprintf(line, size, "%.*s ", (int)(e ? e - p : (long)strlen(p)), p);
	return true;
}

/* --- tests --- */

TEST(socket_is_cloexec)
{
	int fd = nl_socket_get_fd(sk);
	CHECK(fd >= 0);
	CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
}

TEST(link_get)
{
	char a[32], b[40];
	struct link_info la, lb;
	struct error e = {0};
	int ia = dev_new(a, sizeof(a), 1);

	snprintf(b, sizeof(b), "%sp", a);
	CHECK_INT(nl_link_get(sk, a, 0, &la, &e), 0);
	CHECK_INT(la.ifindex, ia);
	CHECK_STR(la.ifname, a);
	CHECK_STR(la.kind, "veth");
	CHECK_INT(la.mtu, 1500);
	CHECK(la.tx_queues >= 1);
	CHECK_INT(la.link_netnsid, -1); /* peer in the same netns */
	CHECK_INT(nl_link_get(sk, NULL, la.peer_ifindex, &lb, &e), 0);
	CHECK_STR(lb.ifname, b);
	CHECK_INT(lb.peer_ifindex, ia);

	CHECK_INT(nl_link_get(sk, "aqt-nl-none", 0, &la, &e), -ENODEV);
	CHECK_CONTAINS(e.msg, "aqt-nl-none");
	CHECK_INT(nl_link_get(sk, NULL, 999999, &la, &e), -ENODEV);
	CHECK_INT(nl_link_get(sk, "aqt-nl-0123456789abcdef", 0, &la, &e), -EINVAL);
	CHECK_INT(nl_link_get(sk, NULL, 0, &la, &e), -EINVAL);
}

/* A veth whose peer lives in another netns (a child process's), and a socket
 * opened inside that netns. */
TEST(link_peer_in_other_netns)
{
	int pipefd[2], nsfd;
	char c, path[64], ours_before[64] = "", ours_after[64] = "";
	struct link_info lx, ly;
	struct nl_sock *sk2 = NULL;
	struct error e = {0};
	struct stat st;
	pid_t pid;

	CHECK(pipe2(pipefd, O_CLOEXEC) == 0);
	pid = fork();
	if (pid == 0) {
		if (unshare(CLONE_NEWNET) < 0)
			_exit(1);
		if (write(pipefd[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	CHECK(pid > 0);
	CHECK(read(pipefd[0], &c, 1) == 1);
	close(pipefd[0]);
	close(pipefd[1]);

	CHECK_INT(t_sh("ip link add aqt-nl-x type veth peer name aqt-nl-y netns %d", (int)pid), 0);
	CHECK_INT(nl_link_get(sk, "aqt-nl-x", 0, &lx, &e), 0);
	CHECK_STR(lx.kind, "veth");
	CHECK(lx.peer_ifindex > 0);
	CHECK(lx.link_netnsid >= 0);
	CHECK_INT(nl_link_get(sk, "aqt-nl-y", 0, &ly, &e), -ENODEV); /* not here */

	if (stat("/proc/thread-self/ns/net", &st) == 0)
		snprintf(ours_before, sizeof(ours_before), "%lu", (unsigned long)st.st_ino);
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	nsfd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(nsfd >= 0);
	CHECK_INT(nl_open_in_netns(nsfd, &sk2, &e), 0);
	if (stat("/proc/thread-self/ns/net", &st) == 0)
		snprintf(ours_after, sizeof(ours_after), "%lu", (unsigned long)st.st_ino);
	CHECK_STR(ours_after, ours_before); /* back in our netns */
	if (sk2) {
		CHECK_INT(nl_link_get(sk2, "aqt-nl-y", 0, &ly, &e), 0);
		CHECK_INT(ly.ifindex, lx.peer_ifindex);
		CHECK_STR(ly.kind, "veth");
		CHECK(ly.link_netnsid >= 0);
		nl_close(sk2);
	}
	/* a closed fd is an error, and we stay where we are */
	CHECK(nl_open_in_netns(-1, &sk2, &e) == -EBADF);
	if (nsfd >= 0)
		close(nsfd);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	t_sh("ip link del aqt-nl-x 2>/dev/null");
}

/* htb qdisc, classes (incl. a 64-bit rate), fifo leaves: create, read back,
 * cross-check with tc, replace again (idempotent). */
TEST(htb_tree)
{
	char dev[32], out[OUT_MAX], line[512], v[64];
	struct tc_dump d, d2;
	int ifx = dev_new(dev, sizeof(dev), 1);
	struct tc_spec want[8];
	size_t n = 0;
	cJSON *j = NULL;

	want[n] = q(TC_KIND_HTB, TC_H_ROOT, H(1, 0));
	want[n++].u.htb = (struct tc_htb){.defcls = 0x20, .r2q = 10};
	want[n] = htb_class(H(1, 0), H(1, 1), 500000000, 500000000, 0);
	want[n].u.htb_class.burst_bytes = 131072;
	want[n].u.htb_class.cburst_bytes = 131072;
	want[n++].u.htb_class.quantum_bytes = 62500;
	want[n] = htb_class(H(1, 1), H(1, 0x10), 150000000, 500000000, 0);
	want[n++].u.htb_class.quantum_bytes = 18750;
	want[n++] = htb_class(H(1, 1), H(1, 0x20), 350000000, 500000000, 1);
	want[n] = htb_class(H(1, 0), H(1, 0x30), 40000000000ULL, 100000000000ULL, 2); /* RATE64/CEIL64 */
	want[n++].u.htb_class.quantum_bytes = 200000;
	want[n] = q(TC_KIND_BFIFO, H(1, 0x10), H(0x10, 0));
	want[n++].u.fifo.limit = 256 * 1024;
	want[n] = q(TC_KIND_PFIFO, H(1, 0x20), H(0x20, 0));
	want[n++].u.fifo.limit = 100;

	for (size_t i = 0; i < n; i++)
		CHECK_INT(replace(ifx, &want[i]), 0);
	if (!dump(ifx, &d))
		return;
	check_all_match(&d, want, n);
	CHECK_INT(count_type(&d, TC_CLASS), 4);

	/* idempotent: the same replace again changes nothing */
	for (size_t i = 0; i < n; i++)
		CHECK_INT(replace(ifx, &want[i]), 0);
	if (!dump(ifx, &d2))
		return;
	CHECK_INT(d2.n, d.n);
	check_all_match(&d2, want, n);
	/* htb has no change operation: another default class needs a new tree */
	{
		struct tc_spec other = want[0];
		struct error e = {0};

		other.u.htb.defcls = 0x30;
		CHECK_INT(nl_tc_replace(sk, ifx, &other, &e), -EINVAL);
		CHECK_CONTAINS(e.msg, "qdisc replace root handle 1: htb default 30 r2q 10 on ifindex");
		printf("    changing an existing htb root: %s\n", e.msg);
	}

	/* tc's view of the qdiscs */
	CHECK_INT(sh_out(out, sizeof(out), "tc -j qdisc show dev %s", dev), 0);
	j = cJSON_Parse(out);
	CHECK(cJSON_IsArray(j));
	{
		int seen = 0;
		const cJSON *it;
		cJSON_ArrayForEach(it, j)
		{
			const char *kind = cJSON_GetStringValue(cJSON_GetObjectItem(it, "kind"));
			const char *handle = cJSON_GetStringValue(cJSON_GetObjectItem(it, "handle"));
			const char *parent = cJSON_GetStringValue(cJSON_GetObjectItem(it, "parent"));
			const cJSON *opt = cJSON_GetObjectItem(it, "options");

			if (!kind || !handle)
				continue;
			if (streq(kind, "htb")) {
				seen++;
				CHECK_STR(handle, "1:");
				CHECK(cJSON_IsTrue(cJSON_GetObjectItem(it, "root")));
				CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(opt, "default")), "0x20");
				CHECK_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(opt, "r2q")), 10);
			} else if (streq(kind, "bfifo")) {
				seen++;
				CHECK_STR(handle, "10:");
				CHECK_STR(parent, "1:10");
				CHECK_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(opt, "limit")), 256 * 1024);
			} else if (streq(kind, "pfifo")) {
				seen++;
				CHECK_STR(handle, "20:");
				CHECK_STR(parent, "1:20");
				CHECK_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(opt, "limit")), 100);
			}
		}
		CHECK_INT(seen, 3);
	}
	cJSON_Delete(j);

	/* tc's view of the classes (iproute2 6.1 prints htb classes as text even with -j) */
	CHECK_INT(sh_out(out, sizeof(out), "tc -d class show dev %s", dev), 0);
	for (size_t i = 1; i <= 4; i++) {
		const struct tc_htb_class *c = &want[i].u.htb_class;
		char cid[16];

		tc_handle_format(want[i].handle, cid, sizeof(cid));
		if (!tc_class_line(out, cid, line, sizeof(line))) {
			fprintf(stderr, "  tc does not show class %s:\n%s\n", cid, out);
			t_failed_now = 1;
			continue;
		}
		CHECK(word_after(line, "rate", v, sizeof(v)) && close_rel(tc_text_rate(v), (double)c->rate_bps, 0.001));
		CHECK(word_after(line, "ceil", v, sizeof(v)) && close_rel(tc_text_rate(v), (double)c->ceil_bps, 0.001));
		if (!strstr(line, " leaf "))
			continue; /* tc prints prio/quantum/burst of leaf classes only */
		CHECK(word_after(line, "prio", v, sizeof(v)) && strtoul(v, NULL, 10) == c->prio);
		if (c->quantum_bytes)
			CHECK(word_after(line, "quantum", v, sizeof(v)) && strtoul(v, NULL, 10) == c->quantum_bytes);
		if (c->burst_bytes)
			CHECK(word_after(line, "burst", v, sizeof(v)) &&
			      close_rel(tc_text_size(v), (double)c->burst_bytes, 0.01));
	}
	CHECK(strstr(out, "class htb 1:10 parent 1:1 leaf 10:") != NULL);
}

TEST(tbf)
{
	char dev[32], out[OUT_MAX];
	struct tc_dump d;
	int ifx = dev_new(dev, sizeof(dev), 1);
	struct tc_spec t = q(TC_KIND_TBF, TC_H_ROOT, H(2, 0)), t64 = t, tdef = t;
	const struct tc_spec *o;
	cJSON *j, *opt;

	t.u.tbf = (struct tc_tbf){.rate_bps = 100000000, .burst_bytes = 32768, .limit_bytes = 65536};
	CHECK_INT(replace(ifx, &t), 0);
	CHECK_INT(replace(ifx, &t), 0); /* idempotent */
	if (!dump(ifx, &d))
		return;
	check_all_match(&d, &t, 1);
	CHECK_INT(count_type(&d, TC_QDISC), 1);

	CHECK_INT(sh_out(out, sizeof(out), "tc -j qdisc show dev %s", dev), 0);
	j = cJSON_Parse(out);
	opt = cJSON_GetObjectItem(cJSON_GetArrayItem(j, 0), "options");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 0), "kind")), "tbf");
	CHECK_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(opt, "rate")), 12500000); /* bytes/s */
	CHECK(close_rel(cJSON_GetNumberValue(cJSON_GetObjectItem(opt, "burst")), 32768, 0.01));
	cJSON_Delete(j);

	/* 64-bit rate (TCA_TBF_RATE64) */
	t64.u.tbf = (struct tc_tbf){.rate_bps = 50000000000ULL, .burst_bytes = 1 << 20, .limit_bytes = 4 << 20};
	CHECK_INT(replace(ifx, &t64), 0);
	if (!dump(ifx, &d))
		return;
	check_all_match(&d, &t64, 1);

	/* rate only: burst and limit defaults, and the kernel got a queue */
	tdef.u.tbf.rate_bps = 20000000;
	CHECK_INT(replace(ifx, &tdef), 0);
	if (!dump(ifx, &d))
		return;
	check_all_match(&d, &tdef, 1);
	o = find_match(&d, &tdef);
	CHECK(o && o->u.tbf.limit_bytes > 0 && o->u.tbf.burst_bytes >= 1600);
}

TEST(fifo_root)
{
	char dev[32], out[OUT_MAX];
	struct tc_dump d;
	int ifx = dev_new(dev, sizeof(dev), 1);
	struct tc_spec b = q(TC_KIND_BFIFO, TC_H_ROOT, H(3, 0)), p = q(TC_KIND_PFIFO, TC_H_ROOT, H(4, 0));

	b.u.fifo.limit = 150 * 1024;
	p.u.fifo.limit = 1000;
	CHECK_INT(replace(ifx, &b), 0);
	CHECK_INT(replace(ifx, &b), 0);
	if (!dump(ifx, &d))
		return;
	check_all_match(&d, &b, 1);
	/* another kind under another handle takes the root slot */
	CHECK_INT(replace(ifx, &p), 0);
	if (!dump(ifx, &d))
		return;
	check_all_match(&d, &p, 1);
	CHECK(find_match(&d, &b) == NULL);
	CHECK_INT(count_type(&d, TC_QDISC), 1);
	CHECK_INT(sh_out(out, sizeof(out), "tc qdisc show dev %s", dev), 0);
	CHECK_CONTAINS(out, "qdisc pfifo 4: root");
	CHECK_CONTAINS(out, "limit 1000p");
	/* limit unset: no options, the kernel derives one */
	p.u.fifo.limit = 0;
	p.handle = H(5, 0);
	CHECK_INT(replace(ifx, &p), 0);
	if (!dump(ifx, &d))
		return;
	check_all_match(&d, &p, 1);
}

TEST(clsact_and_u32)
{
	char dev[32], out[OUT_MAX];
	struct tc_dump d, d2;
	int ifx = dev_new(dev, sizeof(dev), 1);
	struct tc_spec setup[] = {
	        q(TC_KIND_HTB, TC_H_ROOT, H(1, 0)),
	        htb_class(H(1, 0), H(1, 0x10), 100000000, 1000000000, 0),
	        htb_class(H(1, 0), H(1, 0x20), 100000000, 1000000000, 1),
	        q(TC_KIND_CLSACT, TC_H_CLSACT, 0),
	};
	struct tc_spec f[7];
	const struct tc_spec *o;
	size_t n = 0;

	f[n++] = u32(H(1, 0), 1, ETH_P_IP, 0, H(1, 0x20)); /* match-all, kernel-chosen handle */
	f[n++] = u32_addr(u32(H(1, 0), 10, ETH_P_IP, 0x123, H(1, 0x10)), U32_MATCH_SRC, "10.1.0.5", 32);
	f[n++] = u32_addr(u32(H(1, 0), 11, ETH_P_IPV6, 0x124, H(1, 0x10)), U32_MATCH_SRC, "fd00::5", 128);
	f[n] = u32(H(1, 0), 20, ETH_P_IP, 0, H(1, 0x10));
	f[n].u.u32.match = U32_MATCH_DSFIELD;
	f[n++].u.u32.tos = 46 << 2;
	f[n] = u32(H(1, 0), 21, ETH_P_IPV6, 0, H(1, 0x20));
	f[n].u.u32.match = U32_MATCH_DSFIELD;
	f[n++].u.u32.tos = 10 << 2;
	f[n++] = u32_addr(u32(EGRESS, 1, ETH_P_IP, 0, H(1, 0x10)), U32_MATCH_SRC, "10.0.0.0", 8);
	f[n++] = u32(INGRESS, 2, ETH_P_ALL, 0, 0);

	for (size_t i = 0; i < ARRAY_SIZE(setup); i++)
		CHECK_INT(replace(ifx, &setup[i]), 0);
	CHECK_INT(replace(ifx, &setup[3]), 0); /* clsact again: no-op */
	for (size_t i = 0; i < n; i++)
		CHECK_INT(replace(ifx, &f[i]), 0);
	if (!dump(ifx, &d))
		return;
	check_all_match(&d, setup, ARRAY_SIZE(setup));
	check_all_match(&d, f, n);
	/* hash tables and chain heads are not objects */
	CHECK_INT(count_type(&d, TC_FILTER), n);
	o = find_match(&d, &f[1]);
	CHECK(o && TC_U32_NODE(o->handle) == 0x123 && TC_U32_HTID(o->handle) != 0);

	/* filters with a handle: replace is idempotent */
	CHECK_INT(replace(ifx, &f[1]), 0);
	CHECK_INT(replace(ifx, &f[2]), 0);
	if (!dump(ifx, &d2))
		return;
	CHECK_INT(count_type(&d2, TC_FILTER), n);
	/* without a handle the create is exclusive and the kernel picks a new one */
	CHECK_INT(replace(ifx, &f[0]), 0);
	if (!dump(ifx, &d2))
		return;
	CHECK_INT(count_type(&d2, TC_FILTER), n + 1);

	/* a changed selector under the same handle really changes (delete + create) */
	f[1] = u32_addr(f[1], U32_MATCH_SRC, "10.1.0.6", 32);
	CHECK_INT(replace(ifx, &f[1]), 0);
	/* a changed flowid is a plain replace */
	f[2].u.u32.classid = H(1, 0x20);
	CHECK_INT(replace(ifx, &f[2]), 0);
	if (!dump(ifx, &d2))
		return;
	check_all_match(&d2, &f[1], 2);
	CHECK_INT(count_type(&d2, TC_FILTER), n + 1);
	CHECK_INT(sh_out(out, sizeof(out), "tc filter show dev %s parent 1:", dev), 0);
	CHECK_CONTAINS(out, "::123 ");
	CHECK_CONTAINS(out, "match 0a010006/ffffffff at 12");
	CHECK(strstr(out, "match 0a010005/ffffffff at 12") == NULL);
	CHECK_CONTAINS(out, "match 00b80000/00fc0000 at 0");
	CHECK_CONTAINS(out, "match 02800000/0fc00000 at 0");
	CHECK_INT(sh_out(out, sizeof(out), "tc filter show dev %s egress", dev), 0);
	CHECK_CONTAINS(out, "match 0a000000/ff000000 at 12");

	/* delete by node id, then it is gone */
	{
		struct error e = {0};
		struct tc_spec none = u32(H(1, 0), 99, ETH_P_IP, 0, 0);

		CHECK_INT(nl_tc_delete(sk, ifx, &f[1], &e), 0);
		CHECK_INT(nl_tc_delete(sk, ifx, &f[1], &e), -ENOENT);
		CHECK_CONTAINS(e.msg, "filter delete parent 1: protocol ip prio 10 handle ::123 u32 on ifindex");
		CHECK_INT(nl_tc_delete(sk, ifx, &none, &e), -ENOENT);
		/* a whole prio/protocol (handle 0) */
		CHECK_INT(nl_tc_delete(sk, ifx, &f[6], &e), 0);
		if (dump(ifx, &d2)) {
			CHECK(find_match(&d2, &f[1]) == NULL);
			CHECK(find_match(&d2, &f[6]) == NULL);
			CHECK(find_match(&d2, &f[5]) != NULL);
		}
	}
}

/* Kinds and actions this kernel may lack: the error must allow a fallback,
 * name the object and carry the kernel's message; prints what it saw. On a
 * kernel that has them (the full-kernel VM) the object must read back as
 * desired instead. */
TEST(missing_kinds_errno)
{
	struct tc_spec fq = q(TC_KIND_FQ, TC_H_ROOT, H(1, 0)), fqc = q(TC_KIND_FQ_CODEL, TC_H_ROOT, H(1, 0));
	struct tc_spec prio = q(TC_KIND_PRIO, TC_H_ROOT, H(1, 0)), clsact = q(TC_KIND_CLSACT, TC_H_CLSACT, 0);
	struct tc_spec p4 = u32(EGRESS, 1, ETH_P_IP, 0, 0), p6 = u32(EGRESS, 2, ETH_P_IPV6, 0, 0);
	struct tc_spec p4src = u32_addr(u32(EGRESS, 3, ETH_P_IP, 0x42, 0), U32_MATCH_SRC, "10.1.0.5", 32);
	/* the object as the error names it: tc(8) words (tc_spec_describe) */
	const struct {
		struct tc_spec *s;
		const char *name;
		const char *what;
	} cases[] = {
	        {&fq, "fq", "qdisc replace root handle 1: fq limit 10000 ce_threshold 1ms pacing"},
	        {&fqc, "fq_codel", "qdisc replace root handle 1: fq_codel limit 1024 target 1ms interval 10ms ecn"},
	        {&prio, "prio", "qdisc replace root handle 1: prio bands 3 priomap 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1"},
	        {&p4, "u32+pedit+csum (v4)",
	         "filter replace parent ffff:fff3 protocol ip prio 1 u32 match u32 0 0 action pedit ex munge ip "
	         "dsfield "
	         "set 0xb8 retain 0xfc pipe action csum ip"},
	        {&p6, "u32+pedit (v6)",
	         "filter replace parent ffff:fff3 protocol ipv6 prio 2 u32 match u32 0 0 action pedit ex munge ip6 "
	         "traffic_class set 0x28 retain 0xfc"},
	        {&p4src, "u32 src+pedit+csum (v4)",
	         "filter replace parent ffff:fff3 protocol ip prio 3 handle ::42 u32 match ip src 10.1.0.5/32 flowid "
	         "1:10 "
	         "action pedit ex munge ip dsfield set 0x28 retain 0xfc pipe action csum ip"},
	};

	fq.u.fq = (struct tc_fq){.limit_pkts = 10000, .ce_threshold_us = 1000, .pacing = TRI_ON};
	fqc.u.fq_codel =
	        (struct tc_fq_codel){.target_us = 1000, .interval_us = 10000, .limit_pkts = 1024, .ecn = TRI_ON};
	prio.u.prio.bands = 3;
	memset(prio.u.prio.priomap, 1, sizeof(prio.u.prio.priomap));
	p4.u.u32.dscp = 46;
	p6.u.u32.dscp = 10;
	p4src.u.u32.dscp = 10;
	p4src.u.u32.classid = H(1, 0x10);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char dev[32];
		struct tc_dump d;
		struct error e = {0};
		int ifx = dev_new(dev, sizeof(dev), 1), r;

		if (cases[i].s->type == TC_FILTER)
			CHECK_INT(replace(ifx, &clsact), 0);
		r = nl_tc_replace(sk, ifx, cases[i].s, &e);
		printf("    kernel answer for %s: %d (%s)%s%s\n", cases[i].name, r, r < 0 ? strerror(-r) : "ok",
		       r < 0 ? ": " : "", r < 0 ? e.msg : "");
		/* in the full-kernel VM (hack/test-kernel.sh) a refusal is a failure */
		if (expect_full_kernel())
			CHECK_INT(r, 0);
		if (!dump(ifx, &d))
			continue;
		if (r == 0) {
			/* a kernel that has it: the kernel's dump must read back as desired */
			check_all_match(&d, cases[i].s, 1);
			continue;
		}
		CHECK(errno_allows_fallback(r));
		CHECK_INT(e.errnum, -r);
		CHECK_CONTAINS(e.msg, strerror(-r));
		{
			char want[512];
			/* the object is named, with its options */
			snprintf(want, sizeof(want), "%s on ifindex %d: ", cases[i].what, ifx);
			CHECK_CONTAINS(e.msg, want);
		}
		/* and for qdiscs the kernel's extended ack is appended */
		if (cases[i].s->type == TC_QDISC)
			CHECK_CONTAINS(e.msg, "(");
		/* nothing half-made is left behind */
		CHECK_INT(count_type(&d, TC_FILTER), 0);
		CHECK_INT(count_type(&d, TC_QDISC), cases[i].s->type == TC_FILTER ? 2 : 1);
	}
}

TEST(delete_missing_is_enoent)
{
	char dev[32];
	struct tc_dump d;
	struct error e = {0};
	int ifx = dev_new(dev, sizeof(dev), 1);
	struct tc_spec htb = q(TC_KIND_HTB, TC_H_ROOT, H(1, 0)), tbf = q(TC_KIND_TBF, TC_H_ROOT, H(1, 0));
	struct tc_spec htb2 = q(TC_KIND_HTB, TC_H_ROOT, H(2, 0)), clsact = q(TC_KIND_CLSACT, TC_H_CLSACT, 0);
	struct tc_spec cls = htb_class(H(1, 0), H(1, 0x10), 1000000, 0, 0);
	struct tc_spec flt = u32(H(1, 0), 5, ETH_P_IP, 0, 0);
	struct tc_spec fh = u32(H(1, 0), 5, ETH_P_IP, 0x777, 0);

	/* nothing there (default root qdisc) */
	CHECK_INT(nl_tc_delete(sk, ifx, &htb, &e), -ENOENT);
	CHECK_CONTAINS(e.msg, "qdisc delete root handle 1: htb on ifindex");
	CHECK_INT(nl_tc_delete(sk, ifx, &cls, &e), -ENOENT);
	CHECK_INT(nl_tc_delete(sk, ifx, &flt, &e), -ENOENT);
	CHECK_INT(nl_tc_delete(sk, ifx, &fh, &e), -ENOENT);
	CHECK_INT(nl_tc_delete(sk, ifx, &clsact, &e), -ENOENT);

	/* another kind or another handle in the slot: ours is absent, theirs stays */
	CHECK_INT(replace(ifx, &htb), 0);
	CHECK_INT(nl_tc_delete(sk, ifx, &tbf, &e), -ENOENT);
	CHECK_INT(nl_tc_delete(sk, ifx, &htb2, &e), -ENOENT);
	CHECK_INT(nl_tc_delete(sk, ifx, &cls, &e), -ENOENT);
	CHECK_INT(nl_tc_delete(sk, ifx, &flt, &e), -ENOENT);
	if (dump(ifx, &d))
		check_all_match(&d, &htb, 1);

	/* and a real delete works */
	CHECK_INT(replace(ifx, &clsact), 0);
	CHECK_INT(nl_tc_delete(sk, ifx, &clsact, &e), 0);
	CHECK_INT(nl_tc_delete(sk, ifx, &htb, &e), 0);
	if (dump(ifx, &d)) {
		CHECK(find_match(&d, &htb) == NULL);
		CHECK(find_match(&d, &clsact) == NULL);
		CHECK_INT(count_type(&d, TC_QDISC), 1); /* the default root qdisc */
		CHECK_STR(d.kind_name[0], "noqueue");
		CHECK_INT(d.tc[0].kind, _TC_KIND_INVALID);
	}
}

/* tc_spec_format() output is valid tc(8) syntax: tc creates the object and
 * nl_tc_dump finds exactly what the spec asked for; "del" removes it. */
TEST(format_is_tc_syntax)
{
	char dev[32], cmd[TC_FORMAT_MAX], out[OUT_MAX];
	struct tc_dump d;
	int ifx = dev_new(dev, sizeof(dev), 1);
	struct tc_spec s[12];
	size_t n = 0;

	s[n] = q(TC_KIND_HTB, TC_H_ROOT, H(1, 0));
	s[n++].u.htb = (struct tc_htb){.defcls = 0x20, .r2q = 20};
	s[n] = htb_class(H(1, 0), H(1, 1), 500000000, 500000000, 0);
	s[n].u.htb_class.burst_bytes = 64 * 1024;
	s[n].u.htb_class.cburst_bytes = 64 * 1024;
	s[n++].u.htb_class.quantum_bytes = 60000;
	s[n++] = htb_class(H(1, 1), H(1, 0x10), 50000000, 500000000, 0);
	s[n++] = htb_class(H(1, 1), H(1, 0x20), 450000000, 500000000, 1);
	s[n] = q(TC_KIND_BFIFO, H(1, 0x10), H(0x10, 0));
	s[n++].u.fifo.limit = 150 * 1024;
	s[n] = q(TC_KIND_PFIFO, H(1, 0x20), H(0x20, 0));
	s[n++].u.fifo.limit = 100;
	s[n++] = q(TC_KIND_CLSACT, TC_H_CLSACT, 0);
	s[n++] = u32_addr(u32(H(1, 0), 10, ETH_P_IP, 0x123, H(1, 0x10)), U32_MATCH_SRC, "10.1.0.5", 32);
	s[n++] = u32_addr(u32(H(1, 0), 11, ETH_P_IPV6, 0, H(1, 0x10)), U32_MATCH_DST, "2001:db8::", 40);
	s[n] = u32(H(1, 0), 20, ETH_P_IP, 0, H(1, 0x10));
	s[n].u.u32.match = U32_MATCH_DSFIELD;
	s[n++].u.u32.tos = 0xb8;
	s[n++] = u32_addr(u32(EGRESS, 1, ETH_P_IP, 0, H(1, 0x20)), U32_MATCH_SRC, "10.1.0.0", 16);

	for (size_t i = 0; i < n; i++) {
		int st;

		CHECK_INT(tc_spec_format(&s[i], dev, "replace", cmd, sizeof(cmd)), 0);
		st = sh_out(out, sizeof(out), "tc %s 2>&1", cmd);
		if (st != 0) {
			fprintf(stderr, "  tc %s: exit %d: %s\n", cmd, st, out);
			t_failed_now = 1;
		}
	}
	if (dump(ifx, &d)) {
		check_all_match(&d, s, n);
		CHECK_INT(count_type(&d, TC_FILTER), 4);
	}

	/* tbf needs the root slot: its own device */
	{
		char dev2[32];
		int ifx2 = dev_new(dev2, sizeof(dev2), 1);
		struct tc_spec t = q(TC_KIND_TBF, TC_H_ROOT, H(2, 0));
		struct tc_dump d2;

		t.u.tbf.rate_bps = 100000000;
		CHECK_INT(tc_spec_format(&t, dev2, "replace", cmd, sizeof(cmd)), 0);
		CHECK_INT(t_sh("tc %s", cmd), 0);
		if (dump(ifx2, &d2))
			check_all_match(&d2, &t, 1);
		CHECK_INT(tc_spec_format(&t, dev2, "del", cmd, sizeof(cmd)), 0);
		CHECK_INT(t_sh("tc %s", cmd), 0);
	}

	/* delete commands, children first */
	for (size_t i = n; i-- > 0;) {
		if (s[i].type == TC_FILTER && !s[i].handle)
			continue; /* deleted with the whole prio below */
		CHECK_INT(tc_spec_format(&s[i], dev, "del", cmd, sizeof(cmd)), 0);
		if (s[i].type == TC_FILTER && s[i].handle) {
			/* tc needs the full handle: the one the kernel chose */
			const struct tc_spec *o = find_match(&d, &s[i]);
			struct tc_spec full = s[i];
			if (o)
				full.handle = o->handle;
			CHECK_INT(tc_spec_format(&full, dev, "del", cmd, sizeof(cmd)), 0);
		}
		if (s[i].type == TC_CLASS ||
		    (s[i].type == TC_QDISC && s[i].kind != TC_KIND_CLSACT && s[i].parent != TC_H_ROOT))
			continue; /* go with the root */
		if (t_sh("tc %s", cmd) != 0) {
			fprintf(stderr, "  tc %s failed\n", cmd);
			t_failed_now = 1;
		}
	}
	if (dump(ifx, &d)) {
		CHECK_INT(count_type(&d, TC_QDISC), 1);
		CHECK_INT(count_type(&d, TC_CLASS), 0);
	}
}

/* A bpf filter aiqos did not make (its name does not begin aiqos_) is
 * never replaced: the slot it holds is refused with a clear error and it
 * stays (review H2). */
TEST(bpf_foreign_slot_not_replaced)
{
	char dev[32], out[OUT_MAX];
	int ifx = dev_new(dev, sizeof(dev), 1);
	struct tc_spec c = q(TC_KIND_CLSACT, TC_H_CLSACT, 0);
	struct tc_spec f = {.type = TC_FILTER,
	                    .kind = TC_KIND_BPF,
	                    .parent = EGRESS,
	                    .handle = 1,
	                    .prio = 27,
	                    .protocol = ETH_P_ALL,
	                    .u.bpf = {.name = "aiqos_ugate", .flags = TCA_BPF_FLAG_ACT_DIRECT, .prog_fd = -1}};
	struct error e = {0};

	CHECK_INT(replace(ifx, &c), 0);
	CHECK_INT(t_sh("tc filter add dev %s egress pref 27 handle 1 protocol all bpf bytecode '1,6 0 0 0' "
	               "classid 1:1",
	               dev),
	          0);
	CHECK_INT(nl_tc_replace(sk, ifx, &f, &e), -EEXIST);
	CHECK(strstr(e.msg, "another tool's filter") != NULL);
	CHECK_INT(sh_out(out, sizeof(out), "tc filter show dev %s egress", dev), 0);
	CHECK(strstr(out, "bytecode") != NULL);
}

TEST(dump_unknown_kinds)
{
	char dev[32];
	struct tc_dump d;
	int ifx = dev_new(dev, sizeof(dev), 4);
	unsigned mq = 0, children = 0, noqueue = 0;

	/* veth defaults to noqueue, a kind aiqos does not model */
	if (!dump(ifx, &d))
		return;
	for (unsigned i = 0; i < d.n; i++)
		if (d.tc[i].type == TC_QDISC && streq(d.kind_name[i], "noqueue")) {
			noqueue++;
			CHECK_INT(d.tc[i].kind, _TC_KIND_INVALID);
		}
	CHECK_INT(noqueue, 1);
	/* mq on a 4-queue veth gets one default child per queue */
	CHECK_INT(t_sh("tc qdisc add dev %s root handle 1: mq", dev), 0);
	if (!dump(ifx, &d))
		return;
	for (unsigned i = 0; i < d.n; i++) {
		if (d.tc[i].type != TC_QDISC)
			continue;
		CHECK(d.kind_name[i][0] != '\0');
		if (streq(d.kind_name[i], "mq")) {
			mq++;
			CHECK_INT(d.tc[i].kind, TC_KIND_MQ);
			CHECK_INT(d.tc[i].parent, TC_H_ROOT);
			CHECK_INT(d.tc[i].handle, H(1, 0));
		} else if (TC_H_MAJ(d.tc[i].parent) == H(1, 0)) {
			/* net.core.default_qdisc: pfifo_fast on the CI kernel,
			 * fq_codel on Debian's (both known) */
			children++;
			CHECK_INT(d.tc[i].kind, tc_kind_from_name(d.kind_name[i], TC_QDISC));
		}
	}
	CHECK_INT(mq, 1);
	CHECK_INT(children, 4);
}

TEST(dump_bounds_and_nodev)
{
	char dev[32];
	struct tc_dump *d = calloc(1, sizeof(*d));
	struct error e = {0};
	int ifx = dev_new(dev, sizeof(dev), 1);
	struct tc_spec root = q(TC_KIND_HTB, TC_H_ROOT, H(1, 0));

	CHECK(d != NULL);
	if (!d)
		return;
	CHECK_INT(nl_tc_dump(sk, 999999, d, &e), -ENODEV);
	CHECK_INT(replace(ifx, &root), 0);
	for (unsigned i = 0; i < ARRAY_SIZE(d->tc) + 2; i++) {
		struct tc_spec c = htb_class(H(1, 0), H(1, 0x100 + i), 1000000, 0, 0);
		if (replace(ifx, &c) < 0) {
			t_failed_now = 1;
			break;
		}
	}
	d->n = 7;
	CHECK_INT(nl_tc_dump(sk, ifx, d, &e), -E2BIG);
	CHECK_CONTAINS(e.msg, "more than 128 objects");
	CHECK_INT(d->n, 7); /* not written on failure */
	free(d);
}

/* Skip or set up, after every TEST above registered (GCC runs constructors of
 * one file in definition order): root moves the process into a private netns. */
__attribute__((constructor)) static void nl_test_setup(void)
{
	const char *why = NULL;
	struct error e = {0};

	if (geteuid() != 0)
		why = "needs root (creates network namespaces and veth devices)";
	else if (unshare(CLONE_NEWNET) < 0)
		why = "unshare(CLONE_NEWNET) failed";
	else if (t_sh("command -v ip >/dev/null && command -v tc >/dev/null") != 0)
		why = "ip/tc (iproute2) not installed";
	else if (nl_open(&sk, &e) < 0)
		why = "cannot open an rtnetlink socket";
	if (why) {
		printf("test_nl: skipped: %s\n", why);
		printf("0 passed, 0 failed, %u skipped\n", t_n_cases ? t_n_cases : 1);
		fflush(stdout);
		exit(0);
	}
	t_sh("ip link set lo up");
}
