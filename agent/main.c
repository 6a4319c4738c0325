/* main.c — aiqos-agent's command line: run the node agent, or
 * --cleanup (give the uplink its original qdisc back), or the install /
 * uninstall subcommands that chain the plugin into the node's CNI config.
 * Parses flags, loads the config, sets up logging and hands over to the
 * loop; the only place that exits. */
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <bpf/libbpf.h>

#include "agent.h"
#include "node/rcv_window.h"
#include "doctor.h"
#include "install/chain.h"
#include "loop.h"
#include "netns.h"
#include "install/cni_cache.h"
#include "nl.h"
#include "proto.h"
#include "reconcile/reconcile.h"

#define EXIT_USAGE 2

static void usage(FILE *out)
{
	fprintf(out,
	        "Usage: %s [OPTIONS]            run the node agent\n"
	        "       %s --cleanup [OPTIONS]  restore the uplink's original qdisc and exit\n"
	        "       %s install --cni-conf-dir DIR --cni-bin-dir DIR [--plugin-src PATH] [--plugin-conf JSON]\n"
	        "                  [--dropin] [--in-place]\n"
	        "       %s uninstall --cni-conf-dir DIR [--cni-bin-dir DIR] [--remove-binary | --keep-binary]\n"
	        "                  [--cni-cache-dir DIR] [--state-dir DIR] [--keep-qdiscs] [--wait]\n"
	        "\n"
	        "Options:\n"
	        "  --node-name NAME      this node (default $NODE_NAME)\n"
	        "  --kubeconfig PATH     API server access (default: in-cluster service account)\n"
	        "  --config PATH         agent config (default %s; a missing file means defaults)\n"
	        "  --socket PATH         plugin socket (default %s)\n"
	        "  --state-dir PATH      the plugin's stateDir (default %s)\n"
	        "  --metrics-addr ADDR   /metrics, /healthz, /readyz (default %s; \"\" or 0 = off)\n"
	        "  --log-level LEVEL     error, warn, info, debug (default info)\n"
	        "  --sysctl-dir DIR      where net.* sysctls are read and written (default /proc/sys); in a\n"
	        "                        container with a read-only /proc/sys, a bind mount of the host's\n"
	        "                        /proc/sys/net at DIR/net (per-netns values follow the netns entered)\n"
	        "  --cni-conf-dir DIR    keep aiqos chained in this CNI config dir (watched)\n"
	        "  --cni-bin-dir DIR     CNI plugin dir to install the aiqos binary into\n"
	        "  --plugin-src PATH     the aiqos binary to copy into --cni-bin-dir\n"
	        "  --plugin-conf JSON    the aiqos entry of the chain (default: capabilities, failurePolicy open)\n"
	        "  --dropin              prefer the libcni drop-in dir (containerd 2.x)\n"
	        "  --in-place            edit the primary config instead of an owned copy\n"
	        "  --cleanup             restore the uplink's recorded qdisc, remove aiqos's uplink objects, exit\n"
	        "  --once                one list and reconcile, then exit\n"
	        "  --remove-binary       uninstall: remove the plugin binary even if pods still reference it\n"
	        "  --keep-binary         uninstall: leave the plugin binary. Default (with --cni-bin-dir): removed\n"
	        "                        when no config in the runtime's CNI cache names it (no pod created\n"
	        "                        while it was chained is left), else kept and the pods counted\n"
	        "  --cni-cache-dir DIR   uninstall: libcni's cache dir (default %s)\n"
	        "  --keep-qdiscs         uninstall: leave the uplink as it is\n"
	        "  --wait                uninstall: once done, stay until SIGTERM or SIGINT (a DaemonSet's\n"
	        "                        container that holds the pod); exit at once if it failed\n"
	        "  -h, --help            this help\n"
	        "  --version             print the version\n",
	        AGENT_PROGRAM, AGENT_PROGRAM, AGENT_PROGRAM, AGENT_PROGRAM, AGENT_CONFIG_DEFAULT_PATH,
	        PROTO_DEFAULT_SOCKET, AGENT_STATE_DIR_DEFAULT, AGENT_METRICS_DEFAULT, CNI_CACHE_DIR_DEFAULT);
}

enum {
	OPT_NODE_NAME = 256,
	OPT_KUBECONFIG,
	OPT_CONFIG,
	OPT_SOCKET,
	OPT_STATE_DIR,
	OPT_METRICS_ADDR,
	OPT_LOG_LEVEL,
	OPT_CNI_CONF_DIR,
	OPT_CNI_BIN_DIR,
	OPT_PLUGIN_SRC,
	OPT_PLUGIN_CONF,
	OPT_DROPIN,
	OPT_IN_PLACE,
	OPT_CLEANUP,
	OPT_ONCE,
	OPT_REMOVE_BINARY,
	OPT_KEEP_BINARY,
	OPT_CNI_CACHE_DIR,
	OPT_KEEP_QDISCS,
	OPT_SYSCTL_DIR,
	OPT_WAIT,
	OPT_VERSION,
};

static const struct option long_options[] = {
        {"node-name", required_argument, NULL, OPT_NODE_NAME},
        {"kubeconfig", required_argument, NULL, OPT_KUBECONFIG},
        {"config", required_argument, NULL, OPT_CONFIG},
        {"socket", required_argument, NULL, OPT_SOCKET},
        {"state-dir", required_argument, NULL, OPT_STATE_DIR},
        {"metrics-addr", required_argument, NULL, OPT_METRICS_ADDR},
        {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
        {"cni-conf-dir", required_argument, NULL, OPT_CNI_CONF_DIR},
        {"cni-bin-dir", required_argument, NULL, OPT_CNI_BIN_DIR},
        {"plugin-src", required_argument, NULL, OPT_PLUGIN_SRC},
        {"plugin-conf", required_argument, NULL, OPT_PLUGIN_CONF},
        {"dropin", no_argument, NULL, OPT_DROPIN},
        {"in-place", no_argument, NULL, OPT_IN_PLACE},
        {"cleanup", no_argument, NULL, OPT_CLEANUP},
        {"once", no_argument, NULL, OPT_ONCE},
        {"remove-binary", no_argument, NULL, OPT_REMOVE_BINARY},
        {"keep-binary", no_argument, NULL, OPT_KEEP_BINARY},
        {"cni-cache-dir", required_argument, NULL, OPT_CNI_CACHE_DIR},
        {"keep-qdiscs", no_argument, NULL, OPT_KEEP_QDISCS},
        {"sysctl-dir", required_argument, NULL, OPT_SYSCTL_DIR},
        {"wait", no_argument, NULL, OPT_WAIT},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
};

enum binary_policy {
	BINARY_AUTO, /* removed unless a cached CNI config still names it */
	BINARY_REMOVE,
	BINARY_KEEP,
};

struct cmdline {
	struct agent_options o;
	bool cleanup;
	enum binary_policy binary;
	const char *cni_cache_dir; /* NULL: CNI_CACHE_DIR_DEFAULT */
	bool keep_qdiscs;
	bool wait;
	const char *sysctl_dir; /* NULL: /proc/sys */
	const char *subcommand; /* NULL, "install", "uninstall" */
};

static int usage_error(const char *fmt, ...) _printf_(1, 2);
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", AGENT_PROGRAM);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help'.\n", AGENT_PROGRAM);
	return EXIT_USAGE;
}

/* Returns -1 to go on, else an exit code. */
static int parse(int argc, char **argv, struct cmdline *c)
{
	int opt;

	c->o.config_path = AGENT_CONFIG_DEFAULT_PATH;
	c->o.socket_path = PROTO_DEFAULT_SOCKET;
	c->o.state_dir = AGENT_STATE_DIR_DEFAULT;
	c->o.metrics_addr = AGENT_METRICS_DEFAULT;
	c->o.log_level = LOG_LVL_INFO;
	c->o.node_name = getenv("NODE_NAME");
	if (argc > 1 && (streq(argv[1], "install") || streq(argv[1], "uninstall"))) {
		c->subcommand = argv[1];
		argv++;
		argc--;
	}
	while ((opt = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
		switch (opt) {
		case OPT_NODE_NAME:
			c->o.node_name = optarg;
			break;
		case OPT_KUBECONFIG:
			c->o.kubeconfig = optarg;
			break;
		case OPT_CONFIG:
			c->o.config_path = optarg;
			break;
		case OPT_SOCKET:
			c->o.socket_path = optarg;
			break;
		case OPT_STATE_DIR:
			c->o.state_dir = optarg;
			break;
		case OPT_METRICS_ADDR:
			c->o.metrics_addr = optarg;
			break;
		case OPT_LOG_LEVEL:
			c->o.log_level = log_level_from_name(optarg);
			if (c->o.log_level == _LOG_LVL_INVALID)
				return usage_error("--log-level: '%s' is not one of error, warn, info, debug", optarg);
			break;
		case OPT_CNI_CONF_DIR:
			c->o.cni_conf_dir = optarg;
			break;
		case OPT_CNI_BIN_DIR:
			c->o.cni_bin_dir = optarg;
			break;
		case OPT_PLUGIN_SRC:
			c->o.plugin_src = optarg;
			break;
		case OPT_PLUGIN_CONF:
			c->o.plugin_conf = optarg;
			break;
		case OPT_DROPIN:
			c->o.chain_dropin = true;
			break;
		case OPT_IN_PLACE:
			c->o.chain_in_place = true;
			break;
		case OPT_CLEANUP:
			c->cleanup = true;
			break;
		case OPT_ONCE:
			c->o.once = true;
			break;
		case OPT_REMOVE_BINARY:
		case OPT_KEEP_BINARY:
			if (c->binary != BINARY_AUTO)
				return usage_error("%s", "--remove-binary and --keep-binary exclude each other");
			c->binary = opt == OPT_REMOVE_BINARY ? BINARY_REMOVE : BINARY_KEEP;
			break;
		case OPT_CNI_CACHE_DIR:
			c->cni_cache_dir = optarg;
			break;
		case OPT_KEEP_QDISCS:
			c->keep_qdiscs = true;
			break;
		case OPT_SYSCTL_DIR:
			c->sysctl_dir = optarg;
			break;
		case OPT_WAIT:
			c->wait = true;
			break;
		case 'h':
			usage(stdout);
			return EXIT_SUCCESS;
		case OPT_VERSION:
			printf("%s %s\n", AGENT_PROGRAM, aiqos_version());
			return EXIT_SUCCESS;
		default:
			fprintf(stderr, "Try '%s --help'.\n", AGENT_PROGRAM);
			return EXIT_USAGE;
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (c->subcommand && !c->o.cni_conf_dir)
		return usage_error("%s needs --cni-conf-dir", c->subcommand);
	if (c->wait && !(c->subcommand && streq(c->subcommand, "uninstall")))
		return usage_error("%s", "--wait is an option of uninstall");
	if (c->subcommand && streq(c->subcommand, "install") && c->o.plugin_src && !c->o.cni_bin_dir)
		return usage_error("%s", "install --plugin-src needs --cni-bin-dir");
	if (c->binary == BINARY_REMOVE && !c->o.cni_bin_dir)
		return usage_error("%s", "--remove-binary needs --cni-bin-dir");
	if ((c->binary != BINARY_AUTO || c->cni_cache_dir) && !(c->subcommand && streq(c->subcommand, "uninstall")))
		return usage_error("%s", "--remove-binary, --keep-binary and --cni-cache-dir are options of uninstall");
	if (!c->subcommand && !c->cleanup) {
		if (!c->o.node_name || !c->o.node_name[0])
			return usage_error("%s", "no node name: pass --node-name or set NODE_NAME");
		if (strlen(c->o.node_name) >= KUBE_NAME_MAX)
			return usage_error("--node-name '%s' is too long", c->o.node_name);
		if (c->o.cni_bin_dir && !c->o.cni_conf_dir)
			return usage_error("%s", "--cni-bin-dir needs --cni-conf-dir");
	}
	if (strlen(c->o.state_dir) >= AGENT_PATH_MAX - 64 || strlen(c->o.config_path) >= AGENT_PATH_MAX)
		return usage_error("%s", "--state-dir or --config path too long");
	return -1;
}

/* The preflight's findings, one log line each (aiqosctl doctor prints the
 * same). The install container has no capability: the kernel is probed
 * only where unshare(CLONE_NEWNET) is allowed (root, the systemd unit's
 * ExecStartPre); it never fails the install. */
static void install_doctor(const struct cmdline *c)
{
	static const enum log_level lvl[_DOCTOR_LEVEL_MAX] = {LOG_LVL_INFO, LOG_LVL_INFO, LOG_LVL_WARN, LOG_LVL_ERROR};
	struct doctor_options d = {.cni_conf_dir = c->o.cni_conf_dir, .uplink = "auto", .probe_kernel = true};
	struct doctor_report *r = calloc(1, sizeof(*r));

	if (!r)
		return;
	doctor_run(&d, r);
	for (unsigned i = 0; i < r->n; i++)
		log_msg(lvl[r->f[i].level], "doctor", "id", r->f[i].id, "severity", doctor_level_name(r->f[i].level),
		        "section", r->f[i].section, "finding", r->f[i].text, "fix", r->f[i].fix, (char *)NULL);
	log_msg(LOG_LVL_INFO, "doctor done", "exit",
	        doctor_exit_code(r) == DOCTOR_EXIT_OK       ? "0"
	        : doctor_exit_code(r) == DOCTOR_EXIT_ERRORS ? "1"
	                                                    : "3",
	        (char *)NULL);
	free(r);
}

static int cmd_install(const struct cmdline *c)
{
	struct chain_options o = {
	        .conf_dir = c->o.cni_conf_dir,
	        .bin_dir = c->o.cni_bin_dir,
	        .plugin_src = c->o.plugin_src,
	        .plugin_conf = c->o.plugin_conf,
	        .dropin = c->o.chain_dropin,
	        .edit_in_place = c->o.chain_in_place,
	};
	struct error e = {0};
	struct chain_report rep;
	struct stat st;

	/* the runtime's conf dir must be there: a typo or a missing host
	 * mount is not "already installed" */
	// NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): parse() refuses a subcommand without it
	if (stat(o.conf_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		log_msg(LOG_LVL_ERROR, "install failed", "dir", o.conf_dir, "error",
		        "the CNI config dir does not exist (is --cni-conf-dir the host's /etc/cni/net.d?)",
		        (char *)NULL);
		return EXIT_FAILURE;
	}
	if (!o.bin_dir)
		log_msg(LOG_LVL_WARN, "no --cni-bin-dir: the plugin binary the chain names is not checked", "dir",
		        o.conf_dir, (char *)NULL);
	if (chain_ensure_report(&o, &rep, &e) < 0) {
		log_msg(LOG_LVL_ERROR, "install failed", "dir", o.conf_dir, "error", e.msg, (char *)NULL);
		return EXIT_FAILURE;
	}
	if (rep.no_primary)
		log_msg(LOG_LVL_WARN,
		        "installed, not chained: no primary network config yet (the agent chains aiqos "
		        "when one appears)",
		        "dir", o.conf_dir, "what", rep.what, (char *)NULL);
	else
		log_msg(rep.two_shapers ? LOG_LVL_WARN : LOG_LVL_INFO,
		        rep.conf_changed || rep.binary_changed ? "installed" : "already installed", "dir", o.conf_dir,
		        "what", rep.what, (char *)NULL);
	install_doctor(c);
	return EXIT_SUCCESS;
}

static int restore_uplink(const char *state_dir)
{
	struct agent ag;
	struct error e = {0};
	int r;

	agent_init(&ag);
	str_copy(ag.state_dir, sizeof(ag.state_dir), state_dir);
	r = nl_open(&ag.sk, &e);
	if (r == 0)
		r = agent_cleanup_uplink(&ag, &e);
	agent_done(&ag);
	if (r < 0) {
		log_msg(LOG_LVL_ERROR, "cleanup failed", "state_dir", state_dir, "error", e.msg, (char *)NULL);
		return EXIT_FAILURE;
	}
	return EXIT_SUCCESS;
}

/* uninstall --wait: hold until SIGTERM or SIGINT. Blocked signals stay
 * pending even for a PID 1 (a container's), which ignores unhandled ones. */
static int wait_for_termination(void)
{
	sigset_t set;
	int sig = 0, r;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	r = sigprocmask(SIG_BLOCK, &set, NULL) < 0 ? errno : sigwait(&set, &sig);
	if (r != 0) {
		log_msg(LOG_LVL_ERROR, "uninstall --wait: cannot wait for a signal", "error", strerror(r),
		        (char *)NULL);
		return EXIT_FAILURE;
	}
	log_msg(LOG_LVL_INFO, "uninstall --wait: stopping", "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT",
	        (char *)NULL);
	return EXIT_SUCCESS;
}

/* The plugin binary at uninstall (the chain entry is already out, so no new
 * pod names it): removed when forced, or when no config in libcni's cache
 * names it — a pod created while aiqos was chained may be torn down by its
 * runtime with that cached config, which runs the binary, and a missing one
 * fails the DEL. Kept otherwise, with the count and the way to remove it
 * later. */
static int uninstall_binary(const struct cmdline *c, const struct chain_options *o)
{
	const char *cache = c->cni_cache_dir ? c->cni_cache_dir : CNI_CACHE_DIR_DEFAULT;
	struct cni_cache_count n;
	struct chain_report rep;
	struct error e = {0};
	char type[64], bin[PATH_MAX];

	if (!o->bin_dir || c->binary == BINARY_KEEP)
		return EXIT_SUCCESS;
	if (chain_plugin_type(o, type, sizeof(type), &e) < 0) {
		log_msg(LOG_LVL_ERROR, "uninstall failed", "error", e.msg, (char *)NULL);
		return EXIT_FAILURE;
	}
	snprintf(bin, sizeof(bin), "%s/%s", o->bin_dir, type);
	if (c->binary == BINARY_AUTO) {
		if (cni_cache_count_type(cache, type, &n, &e) < 0) {
			log_msg(LOG_LVL_WARN,
			        "plugin binary kept: cannot tell whether pods still need it (mount the runtime's CNI "
			        "cache dir, or pass --remove-binary or --keep-binary)",
			        "binary", bin, "error", e.msg, (char *)NULL);
			return EXIT_SUCCESS;
		}
		if (n.naming > 0) {
			log_msg(LOG_LVL_WARN,
			        "plugin binary kept: pods created while it was chained still exist, and their runtime "
			        "may tear them down with the cached config that runs it; once they are gone, run "
			        "uninstall again (or delete the file)",
			        "binary", bin, "pods", LOG_FMT("%u", n.naming), "cache_dir", cache, (char *)NULL);
			return EXIT_SUCCESS;
		}
	}
	if (chain_remove_report(o, true, &rep, &e) < 0) {
		log_msg(LOG_LVL_ERROR, "uninstall failed", "binary", bin, "error", e.msg, (char *)NULL);
		return EXIT_FAILURE;
	}
	log_msg(LOG_LVL_INFO, rep.binary_changed ? "plugin binary removed" : "plugin binary already gone", "binary",
	        bin, "policy", c->binary == BINARY_REMOVE ? "remove" : "auto", (char *)NULL);
	return EXIT_SUCCESS;
}

static int cmd_uninstall(const struct cmdline *c)
{
	struct chain_options o = {
	        .conf_dir = c->o.cni_conf_dir,
	        .bin_dir = c->o.cni_bin_dir,
	        .plugin_conf = c->o.plugin_conf,
	};
	struct error e = {0};
	struct chain_report rep;
	int rc = EXIT_SUCCESS;

	if (chain_remove_report(&o, false, &rep, &e) < 0) {
		log_msg(LOG_LVL_ERROR, "uninstall failed", "dir", o.conf_dir, "error", e.msg, (char *)NULL);
		rc = EXIT_FAILURE;
	} else {
		log_msg(LOG_LVL_INFO, "uninstalled", "dir", o.conf_dir, "what", rep.what, (char *)NULL);
		rc = uninstall_binary(c, &o);
	}
	if (!c->keep_qdiscs && restore_uplink(c->o.state_dir) != EXIT_SUCCESS)
		rc = EXIT_FAILURE;
	if (rc == EXIT_SUCCESS && c->wait)
		rc = wait_for_termination();
	return rc;
}

/* libbpf's messages (a refused program's verifier log among them) at
 * debug; the reason of a failure reaches status and Events through the
 * loaders' errors (bpf_load.h). */
static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char buf[1024];
	size_t n;

	if (level == LIBBPF_DEBUG)
		return 0;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	n = strlen(buf);
	while (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
	log_msg(LOG_LVL_DEBUG, "libbpf", "message", buf, (char *)NULL);
	return 0;
}

/* Before kernel 5.11 BPF maps are charged to RLIMIT_MEMLOCK (64 KiB under
 * many runtimes): lift it, as libbpf and Cilium do. */
static void bpf_setup(void)
{
	const struct rlimit unlimited = {RLIM_INFINITY, RLIM_INFINITY};

	libbpf_set_print(libbpf_log);
	if (setrlimit(RLIMIT_MEMLOCK, &unlimited) < 0)
		log_msg(LOG_LVL_DEBUG, "RLIMIT_MEMLOCK not raised", "error", strerror(errno), (char *)NULL);
}

int main(int argc, char **argv)
{
	struct cmdline c = {0};
	struct agent *ag;
	struct error e = {0};
	int rc, r;

	rc = parse(argc, argv, &c);
	if (rc >= 0)
		return rc;
	log_setup(AGENT_PROGRAM, c.o.log_level, NULL);
	log_failpoints_armed();
	umask(077);
	if (c.sysctl_dir && sysctl_set_root(c.sysctl_dir, &e) < 0) {
		log_msg(LOG_LVL_ERROR, "invalid --sysctl-dir", "error", e.msg, (char *)NULL);
		return EXIT_USAGE;
	}
	if (c.subcommand && streq(c.subcommand, "install"))
		return cmd_install(&c);
	if (c.subcommand)
		return cmd_uninstall(&c);
	if (c.cleanup)
		return restore_uplink(c.o.state_dir);

	bpf_setup();
	ag = calloc(1, sizeof(*ag));
	if (!ag) {
		fprintf(stderr, "%s: out of memory\n", AGENT_PROGRAM);
		return EXIT_FAILURE;
	}
	agent_init(ag);
	ag->opt = c.o;
	str_copy(ag->config_path, sizeof(ag->config_path), c.o.config_path);
	str_copy(ag->state_dir, sizeof(ag->state_dir), c.o.state_dir);
	str_copy(ag->node_name, sizeof(ag->node_name), c.o.node_name);
	agent_config_done(&ag->cfg);
	r = agent_config_load(ag->config_path, &ag->cfg, &e);
	if (r < 0) {
		/* at start a bad config is fatal (at a reload the old one stays) */
		log_msg(LOG_LVL_ERROR, "invalid config", "error", e.msg, (char *)NULL);
		agent_config_defaults(&ag->cfg);
		agent_done(ag);
		free(ag);
		return EXIT_FAILURE;
	}
	ag->config_loaded_unix = agent_now_unix();
	agent_profiles_refresh(ag, false);
	sched_configure(&ag->sched, ag->cfg.node.debounce_ms, ag->cfg.drift_repair_s, agent_now_ms());
	r = agent_run(ag);
	agent_done(ag);
	free(ag);
	return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
