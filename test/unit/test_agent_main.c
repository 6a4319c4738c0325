/* test_agent_main.c — aiqos-agent's command line, through the real binary
 * (build/bin/aiqos-agent, or $AIQOS_AGENT): `uninstall --wait` holds until
 * SIGTERM/SIGINT — also as PID 1 of a PID namespace, as in the uninstall
 * DaemonSet's container, where unhandled signals are dropped — and exits at
 * once when the uninstall failed; --sysctl-dir is validated at start. No root
 * needed: uninstall with --keep-qdiscs on temp dirs; the PID namespace comes
 * with a user namespace when not root. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "t.h"
#include "util.h"

static const char *agent_path(void)
{
	static char path[512];

	if (!path[0]) /* build/test/test_agent_main -> build/bin/aiqos-agent */
		t_program(path, sizeof(path), "AIQOS_AGENT", "aiqos-agent");
	return path;
}

static const char *dir(const char *name)
{
	static char path[4][128];
	static unsigned i;
	char *p = path[i++ % 4];

	snprintf(p, sizeof(path[0]), "%s/%s", t_tmpdir(), name);
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		abort();
	return p;
}

struct proc {
	pid_t pid;   /* the process to wait for (the intermediate one with pid1) */
	pid_t agent; /* the agent itself, as seen from here */
	int err_fd;
	char err[8192];
	size_t err_len;
};

static void read_err(struct proc *p)
{
	ssize_t k;

	while (p->err_fd >= 0 && p->err_len + 1 < sizeof(p->err)) {
		k = read(p->err_fd, p->err + p->err_len, sizeof(p->err) - 1 - p->err_len);
		if (k <= 0)
			break;
		p->err_len += (size_t)k;
	}
	p->err[p->err_len] = '\0';
}

static void exec_agent(const char *const *args)
{
	char *av[24];
	unsigned n = 0;

	av[n++] = (char *)(uintptr_t) "aiqos-agent";
	for (; *args && n < ARRAY_SIZE(av) - 1; args++)
		av[n++] = (char *)(uintptr_t)*args;
	av[n] = NULL;
	execv(agent_path(), av);
	fprintf(stderr, "exec %s: %s\n", agent_path(), strerror(errno));
	_exit(127);
}

/* Start the agent with args; with pid1, as PID 1 of a new PID namespace (an
 * intermediate child unshares, forks the agent, reports its pid, waits for it
 * and exits with its status). Returns false if that cannot be set up. */
static bool start(struct proc *p, bool pid1, const char *const *args)
{
	int err[2], pidp[2];

	memset(p, 0, sizeof(*p));
	p->err_fd = -1;
	if (pipe2(err, O_CLOEXEC) < 0 || pipe2(pidp, O_CLOEXEC) < 0)
		return false;
	p->pid = fork();
	if (p->pid < 0)
		return false;
	if (p->pid == 0) {
		pid_t child;
		int st = 0;

		dup2(err[1], 2);
		if (!pid1)
			exec_agent(args);
		if (unshare(CLONE_NEWPID) < 0 && unshare(CLONE_NEWUSER | CLONE_NEWPID) < 0)
			_exit(126);
		child = fork();
		if (child == 0)
			exec_agent(args);
		if (child < 0 || write(pidp[1], &child, sizeof(child)) != (ssize_t)sizeof(child))
			_exit(126);
		while (waitpid(child, &st, 0) < 0 && errno == EINTR)
			;
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	}
	close(err[1]);
	close(pidp[1]);
	p->err_fd = err[0];
	fcntl(p->err_fd, F_SETFL, O_NONBLOCK);
	p->agent = p->pid;
	if (pid1 && read(pidp[0], &p->agent, sizeof(p->agent)) != (ssize_t)sizeof(p->agent))
		p->agent = -1;
	close(pidp[0]);
	return p->agent > 0;
}

/* Exit status within ms, -1 if still running then, 1000 + signal if killed. */
static int wait_exit(struct proc *p, int ms)
{
	int st = 0;

	for (int i = 0; i < ms / 10; i++) {
		pid_t r = waitpid(p->pid, &st, WNOHANG);
		read_err(p);
		if (r == p->pid) {
			read_err(p);
			close(p->err_fd);
			p->err_fd = -1;
			return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
		}
		poll(NULL, 0, 10);
	}
	return -1;
}

static void stop(struct proc *p)
{
	if (wait_exit(p, 10) == -1) {
		kill(p->pid, SIGKILL);
		if (p->agent != p->pid)
			kill(p->agent, SIGKILL);
		wait_exit(p, 2000);
	}
	if (p->err_fd >= 0)
		close(p->err_fd);
}

/* uninstall --wait: done, then holds until the signal; exit 0 quickly after it */
static void check_wait(bool pid1, int sig)
{
	const char *args[] = {"uninstall",   "--wait",     "--keep-qdiscs", "--cni-conf-dir", dir("conf"),
	                      "--state-dir", dir("state"), "--cni-bin-dir", dir("bin"),       NULL};
	struct proc p;
	struct timespec t0, t1;
	int rc;

	if (!start(&p, pid1, args)) {
		CHECK(!"cannot start aiqos-agent (in a PID namespace)");
		stop(&p);
		return;
	}
	CHECK_INT(wait_exit(&p, 400), -1); /* still there */
	CHECK_CONTAINS(p.err, "uninstalled");
	CHECK(strstr(p.err, "stopping") == NULL);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK_INT(kill(p.agent, sig), 0);
	rc = wait_exit(&p, 3000);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK_INT(rc, 0);
	CHECK(t1.tv_sec - t0.tv_sec < 2);
	CHECK_CONTAINS(p.err, sig == SIGTERM ? "signal=SIGTERM" : "signal=SIGINT");
	stop(&p);
}

TEST(uninstall_wait_until_sigterm)
{
	check_wait(false, SIGTERM);
}

TEST(uninstall_wait_until_sigint)
{
	check_wait(false, SIGINT);
}

TEST(uninstall_wait_as_pid1_of_a_pid_namespace)
{
	check_wait(true, SIGTERM);
}

TEST(uninstall_wait_exits_at_once_when_uninstall_failed)
{
	char file[128];
	int fd;
	struct proc p;

	snprintf(file, sizeof(file), "%s/not-a-dir", t_tmpdir());
	fd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	{
		const char *args[] = {"uninstall", "--wait", "--keep-qdiscs", "--cni-conf-dir", file, NULL};
		CHECK(start(&p, false, args));
		CHECK_INT(wait_exit(&p, 3000), 1);
		CHECK_CONTAINS(p.err, "Not a directory");
		stop(&p);
	}
}

TEST(usage_errors)
{
	struct {
		const char *args[8];
		const char *msg;
	} cases[] = {
	        {{"--wait", NULL}, "--wait is an option of uninstall"},
	        {{"install", "--wait", "--cni-conf-dir", "/tmp", NULL}, "--wait is an option of uninstall"},
	        {{"uninstall", "--keep-qdiscs", "--cni-conf-dir", "/tmp", "--sysctl-dir", "host/proc/sys", NULL},
	         "sysctl root 'host/proc/sys' is not an absolute path"},
	        {{"uninstall", "--keep-qdiscs", "--cni-conf-dir", "/tmp", "--sysctl-dir", "/aiqos-no-such-dir", NULL},
	         "sysctl root '/aiqos-no-such-dir': No such file or directory"},
	        {{"--cleanup", "--sysctl-dir", "/dev/null", NULL}, "sysctl root '/dev/null' is not a directory"},
	        {{"uninstall", "--cni-conf-dir", "/tmp", "--cni-bin-dir", "/tmp", "--remove-binary", "--keep-binary",
	          NULL},
	         "--remove-binary and --keep-binary exclude each other"},
	        {{"install", "--cni-conf-dir", "/tmp", "--keep-binary", NULL}, "are options of uninstall"},
	        {{"--cleanup", "--cni-cache-dir", "/tmp", NULL}, "are options of uninstall"},
	        {{"uninstall", "--cni-conf-dir", "/tmp", "--remove-binary", NULL},
	         "--remove-binary needs --cni-bin-dir"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct proc p;
		CHECK(start(&p, false, cases[i].args));
		CHECK_INT(wait_exit(&p, 3000), 2);
		CHECK_CONTAINS(p.err, cases[i].msg);
		stop(&p);
	}
}

/* A conf dir that does not exist is an error, not "already installed". */
TEST(install_into_a_missing_conf_dir_fails)
{
	const char *args[] = {"install", "--cni-conf-dir", "/nonexistent-aqt/net.d", "--cni-bin-dir", "/tmp", NULL};
	struct proc p;

	CHECK(start(&p, false, args));
	CHECK_INT(wait_exit(&p, 3000), 1);
	CHECK_CONTAINS(p.err, "install failed");
	CHECK_CONTAINS(p.err, "the CNI config dir does not exist");
	CHECK(strstr(p.err, "already installed") == NULL);
	stop(&p);
}

TEST(sysctl_dir_accepted)
{
	const char *args[] = {
	        "uninstall", "--keep-qdiscs", "--cni-conf-dir", dir("conf2"), "--sysctl-dir", "/proc/sys/", NULL};
	struct proc p;

	CHECK(start(&p, false, args));
	CHECK_INT(wait_exit(&p, 3000), 0);
	CHECK_CONTAINS(p.err, "uninstalled");
	stop(&p);
}

/* ---- the plugin binary at uninstall ---- */

/* libcni's cache entry (Go []byte: base64) of a pod created with kindnet's
 * list: with aiqos chained after ptp, or without it. */
#define CACHED_WITH_AIQOS                                                                          \
	"eyJjbmlWZXJzaW9uIjoiMC4zLjEiLCJuYW1lIjoia2luZG5ldCIsInBsdWdpbnMiOlt7InR5cGUiOiJwdHAifSx7" \
	"InR5cGUiOiJhaXFvcyJ9XX0="
#define CACHED_WITHOUT                                                                             \
	"eyJjbmlWZXJzaW9uIjoiMC4zLjEiLCJuYW1lIjoia2luZG5ldCIsInBsdWdpbnMiOlt7InR5cGUiOiJwdHAifSx7" \
	"InR5cGUiOiJwb3J0bWFwIn1dfQ=="

static void put_file(const char *d, const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", d, name);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void put_cache_entry(const char *results, const char *id, const char *config_b64)
{
	char name[128], text[512];

	snprintf(name, sizeof(name), "kindnet-%s-eth0", id);
	snprintf(text, sizeof(text),
	         "{\"kind\":\"cniCacheV1\",\"containerId\":\"%s\",\"config\":\"%s\",\"ifName\":\"eth0\","
	         "\"networkName\":\"kindnet\",\"result\":{\"cniVersion\":\"0.3.1\"}}",
	         id, config_b64);
	put_file(results, name, text);
}

static bool plugin_present(const char *bin)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/aiqos", bin);
	return access(path, F_OK) == 0;
}

/* uninstall with the binary in bin and extra args: exit status, stderr in p */
static int uninstall_with(struct proc *p, const char *bin, const char *const *extra)
{
	const char *args[16] = {"uninstall", "--keep-qdiscs", "--cni-conf-dir", dir("bconf"), "--cni-bin-dir", bin};
	unsigned n = 6;
	int rc;

	for (; *extra && n < ARRAY_SIZE(args) - 1; extra++)
		args[n++] = *extra;
	args[n] = NULL;
	put_file(bin, "aiqos", "#!/bin/sh\n");
	if (!start(p, false, args))
		return -2;
	rc = wait_exit(p, 3000);
	stop(p);
	return rc;
}

/* Default: kept while a cached config names aiqos (pods counted, the way
 * out said), removed once none does; other networks' entries do not count. */
TEST(uninstall_binary_auto_follows_the_cni_cache)
{
	const char *cache = dir("cache1"), *bin = dir("bin1");
	char results[256];
	const char *extra[] = {"--cni-cache-dir", cache, NULL};
	struct proc p;

	snprintf(results, sizeof(results), "%s/results", cache);
	CHECK(mkdir(results, 0755) == 0);
	put_cache_entry(results, "pod1", CACHED_WITH_AIQOS);
	put_cache_entry(results, "pod2", CACHED_WITH_AIQOS);
	put_cache_entry(results, "pod3", CACHED_WITHOUT);
	put_file(results, "garbage", "not json");
	CHECK_INT(uninstall_with(&p, bin, extra), 0);
	CHECK(plugin_present(bin));
	CHECK_CONTAINS(p.err, "plugin binary kept");
	CHECK_CONTAINS(p.err, " pods=2 ");
	CHECK_CONTAINS(p.err, "run uninstall again");

	/* the two pods are gone (their DEL removed the entries) */
	CHECK(t_sh("rm -f '%s/kindnet-pod1-eth0' '%s/kindnet-pod2-eth0'", results, results) == 0);
	CHECK_INT(uninstall_with(&p, bin, extra), 0);
	CHECK(!plugin_present(bin));
	CHECK_CONTAINS(p.err, "plugin binary removed");

	/* no results dir at all: no pod was ever created through libcni */
	CHECK(t_sh("rm -rf '%s'", results) == 0);
	CHECK_INT(uninstall_with(&p, bin, extra), 0);
	CHECK(!plugin_present(bin));
}

/* A cache dir that is not there (not mounted): nothing can be told, kept. */
TEST(uninstall_binary_auto_keeps_it_without_the_cache_dir)
{
	const char *bin = dir("bin2");
	const char *extra[] = {"--cni-cache-dir", "/nonexistent-aqt/cni", NULL};
	struct proc p;

	CHECK_INT(uninstall_with(&p, bin, extra), 0);
	CHECK(plugin_present(bin));
	CHECK_CONTAINS(p.err, "cannot tell whether pods still need it");
	CHECK_CONTAINS(p.err, "/nonexistent-aqt/cni: No such file or directory");
}

/* --remove-binary and --keep-binary decide whatever the cache says. */
TEST(uninstall_binary_forced)
{
	const char *cache = dir("cache3"), *bin = dir("bin3");
	char results[256];
	const char *remove[] = {"--cni-cache-dir", cache, "--remove-binary", NULL};
	const char *keep[] = {"--cni-cache-dir", cache, "--keep-binary", NULL};
	struct proc p;

	snprintf(results, sizeof(results), "%s/results", cache);
	CHECK(mkdir(results, 0755) == 0);
	put_cache_entry(results, "pod1", CACHED_WITH_AIQOS);
	CHECK_INT(uninstall_with(&p, bin, remove), 0);
	CHECK(!plugin_present(bin));
	CHECK_CONTAINS(p.err, "policy=remove");
	CHECK(t_sh("rm -rf '%s'", results) == 0);
	CHECK_INT(uninstall_with(&p, bin, keep), 0);
	CHECK(plugin_present(bin));
	CHECK(strstr(p.err, "plugin binary") == NULL);
}
