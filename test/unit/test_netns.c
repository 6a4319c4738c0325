/* test_netns.c — the sysctl root (sysctl_set_root): keys resolve below it for
 * reads, writes and exchanges; invalid roots are refused with an error naming
 * them and leave the root unchanged; "/proc/sys" again afterwards reads the
 * kernel's values. A fake tree in a temp dir stands in for a bind mount of the
 * host's /proc/sys/net; no root needed. */
#include <fcntl.h>
#include <sys/stat.h>

#include "netns.h"
#include "t.h"

/* t_tmpdir()/rel with text, parent dirs created */
static void put(const char *rel, const char *text)
{
	char path[256];
	size_t i;
	int fd;

	t_tmppath(path, sizeof(path), rel);
	for (i = strlen(t_tmpdir()) + 1; path[i]; i++) {
		if (path[i] != '/')
			continue;
		path[i] = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			abort();
		path[i] = '/';
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		abort();
	close(fd);
}

static const char *get(const char *rel)
{
	static char buf[256];
	char path[256];
	ssize_t n;
	int fd;

	t_tmppath(path, sizeof(path), rel);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return "(missing)";
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}

static void reset_root(void)
{
	CHECK_INT(sysctl_set_root("/proc/sys", NULL), 0);
	CHECK_STR(sysctl_get_root(), "/proc/sys/");
}

TEST(default_root_is_proc_sys)
{
	char buf[64];

	CHECK_STR(sysctl_get_root(), "/proc/sys/");
	CHECK_INT(sysctl_read("net.ipv4.tcp_ecn", buf, sizeof(buf), NULL), 0);
	CHECK(buf[0] >= '0' && buf[0] <= '9');
}

TEST(keys_resolve_below_the_root)
{
	char root[128], buf[64], prev[64];
	struct error e = {0};
	int rd = -1;

	snprintf(root, sizeof(root), "%s/host/proc/sys", t_tmpdir());
	put("host/proc/sys/net/ipv4/tcp_ecn", "5\n");
	put("host/proc/sys/net/ipv4/tcp_rmem", "4096\t131072\t6291456\n");
	put("host/proc/sys/net/ipv4/conf/eth0.100/rp_filter", "7\n");
	CHECK_INT(sysctl_set_root(root, &e), 0);
	{
		char want[160];
		snprintf(want, sizeof(want), "%s/", root);
		CHECK_STR(sysctl_get_root(), want);
	}
	CHECK_INT(sysctl_read("net.ipv4.tcp_ecn", buf, sizeof(buf), &e), 0);
	CHECK_STR(buf, "5");
	CHECK_INT(sysctl_tcp_rmem_max(), 6291456);
	CHECK_INT(sysctl_read("net/ipv4/conf/eth0.100/rp_filter", buf, sizeof(buf), &e), 0);
	CHECK_STR(buf, "7");
	CHECK_INT(sysctl_write("net.ipv4.tcp_ecn", "1", &e), 0);
	CHECK_STR(get("host/proc/sys/net/ipv4/tcp_ecn"), "1\n");
	CHECK_INT(sysctl_exchange("net.ipv4.tcp_rmem", "4096 131072 67108864", prev, sizeof(prev), &rd, &e), 0);
	CHECK_INT(rd, 0);
	CHECK(sysctl_value_equal(prev, "4096 131072 6291456"));
	CHECK_STR(get("host/proc/sys/net/ipv4/tcp_rmem"), "4096 131072 67108864\n");
	/* a key the tree does not have: ENOENT naming the key, as for the kernel */
	CHECK_INT(sysctl_read("net.core.somaxconn", buf, sizeof(buf), &e), -ENOENT);
	CHECK_CONTAINS(e.msg, "net.core.somaxconn");
	/* key validation is unchanged */
	CHECK_INT(sysctl_read("../../../etc/passwd", buf, sizeof(buf), NULL), -EINVAL);
	reset_root();
}

TEST(trailing_slashes_are_one)
{
	char root[128], want[160];

	put("slash/net/ipv4/tcp_ecn", "6\n");
	snprintf(root, sizeof(root), "%s/slash///", t_tmpdir());
	snprintf(want, sizeof(want), "%s/slash/", t_tmpdir());
	CHECK_INT(sysctl_set_root(root, NULL), 0);
	CHECK_STR(sysctl_get_root(), want);
	{
		char buf[16];
		CHECK_INT(sysctl_read("net/ipv4/tcp_ecn", buf, sizeof(buf), NULL), 0);
		CHECK_STR(buf, "6");
	}
	reset_root();
}

TEST(invalid_roots_are_refused_and_change_nothing)
{
	static char long_root[SYSCTL_ROOT_MAX + 8];
	char file_root[128], missing[128];
	struct {
		const char *dir;
		int want;
		const char *msg;
	} cases[] = {
	        {NULL, -EINVAL, "not an absolute path"},
	        {"", -EINVAL, "not an absolute path"},
	        {"proc/sys", -EINVAL, "'proc/sys' is not an absolute path"},
	        {"/proc/../etc", -EINVAL, "contains '..'"},
	        {"/proc/sys/..", -EINVAL, "contains '..'"},
	        {long_root, -ENAMETOOLONG, "longer than"},
	        {missing, -ENOENT, "No such file"},
	        {file_root, -ENOTDIR, "not a directory"},
	};
	size_t i;

	memset(long_root, 'a', sizeof(long_root) - 1);
	long_root[0] = '/';
	snprintf(missing, sizeof(missing), "%s/nope", t_tmpdir());
	put("a-file", "x");
	snprintf(file_root, sizeof(file_root), "%s/a-file", t_tmpdir());
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct error e = {0};
		CHECK_INT(sysctl_set_root(cases[i].dir, &e), cases[i].want);
		CHECK_CONTAINS(e.msg, cases[i].msg);
		CHECK_STR(sysctl_get_root(), "/proc/sys/");
	}
}
