/* test_agent_aiqosctl.c — runs the real build/bin/aiqosctl: `plan` outputs
 * against golden files (test/unit/golden/aiqosctl-*.txt; inputs in
 * test/unit/aiqosctl/), usage and input errors with their exit codes and
 * messages, and `status`/`explain` against an in-process agent socket
 * (agent_server with fake ops) driven on this thread's sd-event loop. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "../../agent/server.h"
#include "t.h"

/* ---- running the binary ---- */

static const char *ctl_path(void)
{
	static char path[512];

	if (!path[0]) /* build/test/test_agent_aiqosctl -> build/bin/aiqosctl */
		t_program(path, sizeof(path), "AIQOS_CTL", "aiqosctl");
	return path;
}

struct run {
	int code; /* exit status, or -1 when it did not exit normally */
	char *out, *err;
	size_t out_len, err_len;
};

static void run_done(struct run *r)
{
	free(r->out);
	free(r->err);
	memset(r, 0, sizeof(*r));
}

static void drain(int *fd, char **buf, size_t *len)
{
	char tmp[4096];
	ssize_t k;

	if (*fd < 0)
		return;
	while ((k = read(*fd, tmp, sizeof(tmp))) > 0) {
		char *t = realloc(*buf, *len + (size_t)k + 1);
		if (!t)
			break;
		*buf = t;
		memcpy(*buf + *len, tmp, (size_t)k);
		*len += (size_t)k;
		(*buf)[*len] = '\0';
	}
	if (k == 0) {
		close(*fd);
		*fd = -1;
	}
}

/* Run aiqosctl with args (NULL-terminated), optional stdin text; when loop is
 * given, run it while waiting (the agent socket lives on it). */
static void run_ctl(sd_event *loop, const char *stdin_text, struct run *r, const char *const *args)
{
	int out[2], err[2], in[2];
	const char *argv[32];
	unsigned n = 0;
	pid_t pid;
	int status = 0;

	memset(r, 0, sizeof(*r));
	r->code = -1;
	argv[n++] = "aiqosctl";
	for (; args && *args && n < ARRAY_SIZE(argv) - 1; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || pipe2(in, O_CLOEXEC) < 0) {
		CHECK(!"pipe");
		return;
	}
	pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(err[1], 2);
		char *av[ARRAY_SIZE(argv)];
		memcpy(av, argv, sizeof(av)); /* execv's prototype is not const-correct */
		execv(ctl_path(), av);
		fprintf(stderr, "exec %s: %s\n", ctl_path(), strerror(errno));
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	close(in[0]);
	if (stdin_text && write(in[1], stdin_text, strlen(stdin_text)) < 0)
		CHECK(!"write stdin");
	close(in[1]);
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(err[0], F_SETFL, O_NONBLOCK);
	for (int i = 0; i < 4000; i++) {
		struct pollfd p[2] = {{.fd = out[0], .events = POLLIN}, {.fd = err[0], .events = POLLIN}};

		if (loop)
			sd_event_run(loop, 1000);
		poll(p, 2, loop ? 1 : 5);
		drain(&out[0], &r->out, &r->out_len);
		drain(&err[0], &r->err, &r->err_len);
		if (out[0] < 0 && err[0] < 0)
			break;
	}
	if (out[0] >= 0)
		close(out[0]);
	if (err[0] >= 0)
		close(err[0]);
	waitpid(pid, &status, 0);
	r->code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	if (!r->out)
		r->out = strdup("");
	if (!r->err)
		r->err = strdup("");
}

#define RUN(loop, stdin_text, r, ...)                                   \
	do {                                                            \
		static const char *const _args[] = {__VA_ARGS__, NULL}; \
		run_ctl((loop), (stdin_text), (r), _args);              \
	} while (0)

static bool ctl_present(void)
{
	if (access(ctl_path(), X_OK) == 0)
		return true;
	fprintf(stderr, "  %s is missing: build it first (make)\n", ctl_path());
	t_failed_now = 1;
	return false;
}

/* ---- plan ---- */

#define PODS "test/unit/aiqosctl/"

TEST(ctl_plan_golden)
{
	static const struct {
		const char *golden;
		const char *args[14];
	} cases[] = {
	        {"aiqosctl-plan-mixed.txt", {"plan", "--pods", PODS "pods-mixed.json", "--link-speed", "10gbit"}},
	        {"aiqosctl-plan-mixed-tc-ci.txt",
	         {"plan", "--pods", PODS "pods-mixed.json", "--format", "tc", "--kernel", "ci"}},
	        {"aiqosctl-plan-mixed-nic.txt",
	         {"plan", "--pods", PODS "pods-mixed.json", "--link-speed", "25gbit", "--link", "nic", "--uplink",
	          "ens1f0"}},
	        {"aiqosctl-plan-kubectl-dscp.txt",
	         {"plan", "--pods", PODS "podlist-kubectl.json", "--config", PODS "config-dscp.json"}},
	        {"aiqosctl-plan-kubectl-json.txt",
	         {"plan", "--format", "json", "--pods", PODS "podlist-kubectl.json", "--kernel", "ci"}},
	        {"aiqosctl-plan-idle.txt", {"plan", "--pods", PODS "pods-default-only.json"}},
	        {"aiqosctl-plan-manifest-tc.txt",
	         {"plan", "--pods", PODS "pod-manifest.json", "--format", "tc", "--link-speed", "1gbit"}},
	};

	if (!ctl_present())
		return;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct run r;

		run_ctl(NULL, NULL, &r, cases[i].args);
		if (r.code != 0)
			fprintf(stderr, "  %s: exit %d: %s\n", cases[i].golden, r.code, r.err);
		CHECK_INT(r.code, 0);
		CHECK_STR(r.err, "");
		t_golden_check(cases[i].golden, r.out);
		run_done(&r);
	}
}

/* The tc format is a shell script; the JSON format is one JSON document. */
TEST(ctl_plan_formats_parse)
{
	struct run r;
	cJSON *j;
	const cJSON *node, *pods, *it;
	FILE *sh;
	int rc;

	if (!ctl_present())
		return;
	/* a virtual link is shaped only at a configured uplinkRate */
	RUN(NULL, NULL, &r, "plan", "--pods", PODS "pods-mixed.json", "--format", "tc", "--uplink-rate", "1gbit",
	    "--config", PODS "config-rate-1gbit.json");
	CHECK_INT(r.code, 0);
	sh = popen("sh -n", "w");
	CHECK(sh != NULL);
	if (sh) {
		fputs(r.out, sh);
		rc = pclose(sh);
		CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
	}
	CHECK_CONTAINS(r.out, "ip netns exec llm-frontend tc qdisc replace dev eth0 root handle 1: htb");
	CHECK_CONTAINS(r.out, "\ntc filter add dev eth0 parent 1: protocol ip prio 10 handle ::1bd u32 match ip src "
	                      "10.244.1.5/32 flowid 1:10\n");
	CHECK_CONTAINS(r.out, "\ntc qdisc replace dev eth0 root handle 1: htb default 20 r2q 10\n");
	CHECK(strstr(r.out, "dev uplink") == NULL);
	run_done(&r);

	/* the bands on (bulkThreshold; off by default, as the golden plans show) */
	RUN(NULL, NULL, &r, "plan", "--pods", PODS "pods-mixed.json", "--format", "json", "--uplink-rate", "1gbit",
	    "--config", PODS "config-rate-1gbit-bands.json");
	CHECK_INT(r.code, 0);
	j = cJSON_Parse(r.out);
	CHECK(j != NULL);
	node = cJSON_GetObjectItem(j, "node");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(node, "mode")), "mixed");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(node, "uplink"), "shape")), "htb");
	pods = cJSON_GetObjectItem(j, "pods");
	CHECK_INT(cJSON_GetArraySize(pods), 4);
	CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(j, "skipped")), 1);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(pods, 0), "class")), "inference");
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(node, "plan"))
	{
		CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(it, "ifname")), "eth0");
		char *alts = cJSON_PrintUnformatted(cJSON_GetObjectItem(it, "alternatives"));
		CHECK(alts && strstr(alts, "dev uplink") == NULL);
		free(alts);
	}
	/* with clsact + the classifier, and the inference-bulk band's class and leaf */
	CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(node, "plan")), 15);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(node, "bands"), "uplink")),
	          "inference-bulk 1:11 rate 74250kbit");
	cJSON_Delete(j);
	run_done(&r);
}

/* --pods - reads stdin; the output equals the file's but for the path. */
TEST(ctl_plan_stdin)
{
	struct run a, b;
	char *text = t_read_file(PODS "pods-mixed.json");

	if (!ctl_present() || !text) {
		CHECK(text != NULL);
		free(text);
		return;
	}
	RUN(NULL, text, &a, "plan", "--pods", "-", "--format", "json");
	RUN(NULL, NULL, &b, "plan", "--pods", PODS "pods-mixed.json", "--format", "json");
	CHECK_INT(a.code, 0);
	CHECK_CONTAINS(a.out, "\"podsFile\":\t\"-\"");
	CHECK(strlen(a.out) + strlen(PODS "pods-mixed.json") - 1 == strlen(b.out));
	run_done(&a);
	run_done(&b);
	free(text);
}

/* ---- errors and usage ---- */

struct tmpdir {
	char path[64];
};

static void tmp_write(const struct tmpdir *d, const char *name, const char *text, char *ret, size_t size)
{
	FILE *f;

	snprintf(ret, size, "%s/%s", d->path, name);
	f = fopen(ret, "we");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

TEST(ctl_errors)
{
	static const struct {
		const char *file; /* written to the temp dir and passed as --pods (NULL = none) */
		const char *args[8];
		int code;
		const char *err;
	} cases[] = {
	        {NULL,
	         {NULL},
	         2,
	         "aiqosctl: which command? (status, explain, plan, doctor, version)\n\nUsage: aiqosctl"},
	        {NULL, {"bogus"}, 2, "aiqosctl: unknown command 'bogus'"},
	        {NULL, {"--nope"}, 2, "aiqosctl: unknown option '--nope'\n"},
	        {NULL, {"--socket"}, 2, "aiqosctl: option '--socket' needs a value\n"},
	        {NULL, {"status", "--bogus"}, 2, "aiqosctl: status: unknown option '--bogus'\n"},
	        {NULL, {"explain", "a/b", "-x"}, 2, "aiqosctl: explain: unknown option '-x'\n"},
	        {NULL, {"plan", "--pods"}, 2, "aiqosctl: plan: option '--pods' needs a value\n"},
	        {NULL, {"--socket", "", "status"}, 2, "--socket: empty path"},
	        {NULL, {"plan"}, 2, "plan: --pods FILE is required"},
	        {NULL,
	         {"plan", "--pods", "x", "--format", "xml"},
	         2,
	         "--format 'xml': expected text, json, yaml or tc"},
	        {NULL, {"plan", "--pods", "x", "-o", "xml"}, 2, "plan: -o 'xml': expected text, json, yaml or tc"},
	        {NULL, {"status", "-o", "tc"}, 2, "status: -o 'tc': expected text, json or yaml"},
	        {NULL, {"-o", "xml", "status"}, 2, "status: -o 'xml': expected text, json or yaml"},
	        {NULL, {"status", "-o"}, 2, "aiqosctl: option '-o' needs a value\n"},
	        {NULL, {"plan", "-v", "--pods", "x"}, 2, "plan: unknown option '-v'"},
	        {NULL, {"plan", "--pods", "x", "--link-speed", "fast"}, 2, "plan: --link-speed: "},
	        {NULL,
	         {"plan", "--pods", "x", "--uplink-root", "htb"},
	         2,
	         "--uplink-root 'htb': expected queue, noqueue or mq"},
	        {NULL, {"plan", "--pods", "x", "--queues", "8"}, 2, "plan: --queues 8: only with --uplink-root mq"},
	        {NULL,
	         {"plan", "--pods", "x", "--uplink-root", "mq", "--queues", "0"},
	         2,
	         "plan: --queues '0': expected a number"},
	        {NULL, {"version", "extra"}, 2, "version: unexpected argument 'extra'"},
	        {"a: [b", {NULL}, 1, "not valid YAML (line"},
	        {"kind: Pod\nmetadata: {}\n", {NULL}, 1, "metadata.name"},
	        {"---\n---\n", {NULL}, 1, "no YAML document"},
	        {NULL, {"plan", "--pods", "x", "--kernel", "old"}, 2, "--kernel 'old': expected full or ci"},
	        {NULL, {"plan", "--pods", "x", "--link", "wifi"}, 2, "--link 'wifi': expected virtual or nic"},
	        {NULL, {"plan", "--pods", "x", "--uplink", "a/b"}, 2, "--uplink 'a/b' is not an interface name"},
	        {NULL, {"plan", "--pods", "x", "--uplink-rate", "fast"}, 2, "plan: --uplink-rate: "},
	        {NULL, {"plan", "--pods", "x", "extra"}, 2, "plan: unexpected argument 'extra'"},
	        {NULL,
	         {"plan", "--pods", "/nonexistent/pods.json"},
	         1,
	         "aiqosctl: cannot read pods file /nonexistent/pods.json: No such file or directory\n"},
	        {NULL,
	         {"plan", "--pods", PODS "pods-mixed.json", "--config", "/nonexistent/c.json"},
	         1,
	         "aiqosctl: config /nonexistent/c.json: No such file or directory\n"},
	        {NULL, {"status", "extra"}, 2, "status: unexpected argument 'extra'"},
	        {NULL, {"explain"}, 2, "explain: which pod? (NAMESPACE/POD)"},
	        {NULL, {"explain", "a/b/c"}, 2, "explain: 'a/b/c' is not NAMESPACE/POD"},
	        {NULL, {"explain", "/b"}, 2, "explain: '/b' is not NAMESPACE/POD"},
	        {NULL, {"explain", "a/b", "c"}, 2, "explain: unexpected argument 'c'"},
	        {"{\"pods\": [", {NULL}, 1, "not valid JSON (line 1, byte"},
	        {"[]", {NULL}, 1, "expected a JSON object"},
	        {"{\"pods\": {}}", {NULL}, 1, "pods: expected an array"},
	        {"{\"hello\": 1}", {NULL}, 1, "expected {\"pods\": [...]}, a Pod or a PodList"},
	        {"{\"pods\": [{\"name\": \"a\"}]} x", {NULL}, 1, "trailing data after the JSON document"},
	        {"{\"pods\": [{\"name\": \"a\", \"ips\": [\"10.0.0.300\"]}]}",
	         {NULL},
	         1,
	         "pods[0].ips: '10.0.0.300' is not an IPv4 or IPv6 address"},
	        {"{\"pods\": [{\"name\": \"a\", \"annotation\": {}}]}", {NULL}, 1, "pods[0]: unknown key 'annotation'"},
	        {"{\"pods\": [{\"namespace\": \"x\"}]}", {NULL}, 1, "pods[0].name: expected a pod name"},
	        {"{\"pods\": [{\"name\": \"Bad_Name\"}]}", {NULL}, 1, "pods[0].name: expected a pod name"},
	        {"{\"pods\": [{\"name\": \"a\", \"gpus\": 1.5}]}", {NULL}, 1, "pods[0].gpus: expected a whole number"},
	        {"{\"pods\": [{\"name\": \"a\", \"annotations\": {\"ai.workload\": 1}}]}",
	         {NULL},
	         1,
	         "pods[0].annotations.ai.workload: expected a string"},
	        {"{\"pods\": [{\"name\": \"a\", \"ips\": [\"1.1.1.1\", \"1.1.1.2\", \"1.1.1.3\", \"1.1.1.4\", "
	         "\"1.1.1.5\"]}]}",
	         {NULL},
	         1,
	         "pods[0].ips: more than 4 addresses"},
	        {"{\"pods\": [{\"name\": \"a\", \"uid\": \"u\"}, {\"name\": \"b\", \"uid\": \"u\"}]}",
	         {NULL},
	         1,
	         "pods default/a and default/b have the same uid 'u'"},
	        {"{\"kind\": \"PodList\", \"items\": [{\"metadata\": {\"name\": \"a\", \"uid\": \"u 1\"}}]}",
	         {NULL},
	         1,
	         "items[0]"},
	        {"{\"kind\": \"Pod\", \"metadata\": {}}", {NULL}, 1, "metadata.name"},
	};
	struct tmpdir d;
	char cmd[128];

	if (!ctl_present())
		return;
	snprintf(d.path, sizeof(d.path), "/tmp/aqt-ctl-XXXXXX");
	CHECK(mkdtemp(d.path) != NULL);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const char *args[12];
		char pods[128];
		unsigned n = 0;
		struct run r;

		if (cases[i].file) {
			tmp_write(&d, "pods.json", cases[i].file, pods, sizeof(pods));
			args[n++] = "plan";
			args[n++] = "--pods";
			args[n++] = pods;
		}
		for (const char *const *a = cases[i].args; *a; a++)
			args[n++] = *a;
		args[n] = NULL;
		run_ctl(NULL, NULL, &r, args);
		if (r.code != cases[i].code || !strstr(r.err, cases[i].err)) {
			fprintf(stderr, "  case %zu: exit %d (want %d), stderr:\n%s  want: %s\n", i, r.code,
			        cases[i].code, r.err, cases[i].err);
			t_failed_now = 1;
		}
		CHECK_STR(r.out, "");
		run_done(&r);
	}
	/* a config the agent would refuse is refused with the same message */
	{
		char cfg[128];
		struct run r;
		const char *args[] = {"plan", "--pods", PODS "pods-mixed.json", "--config", cfg, NULL};

		tmp_write(&d, "config.json", "{\"inferenceShare\": 1.5}", cfg, sizeof(cfg));
		run_ctl(NULL, NULL, &r, args);
		CHECK_INT(r.code, 1);
		CHECK_CONTAINS(r.err, "inferenceShare");
		CHECK_CONTAINS(r.err, "1.5");
		run_done(&r);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d.path);
	CHECK(system(cmd) == 0);
}

/* doctor's usage errors go through the commands' one option parser:
 * the message names the option, then the usage; exit 2. */
TEST(ctl_doctor_usage_errors)
{
	static const struct {
		const char *args[6]; /* NULL-terminated */
		const char *err;
	} cases[] = {
	        {{"doctor", "--bogus"}, "aiqosctl: doctor: unknown option '--bogus'\n\nUsage: aiqosctl doctor"},
	        {{"doctor", "--sysctl-dir"}, "aiqosctl: doctor: option '--sysctl-dir' needs a value\n\nUsage:"},
	        {{"doctor", "extra"}, "aiqosctl: doctor: unexpected argument 'extra'\n\nUsage: aiqosctl doctor"},
	        {{"doctor", "--no-kernel-probe", "extra", "--json"}, "doctor: unexpected argument 'extra'"},
	};

	if (!ctl_present())
		return;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct run r;

		run_ctl(NULL, NULL, &r, cases[i].args);
		CHECK_INT(r.code, 2);
		CHECK_CONTAINS(r.err, cases[i].err);
		CHECK_STR(r.out, "");
		run_done(&r);
	}
}

TEST(ctl_help_version)
{
	static const struct {
		const char *args[3];
		const char *out;
	} cases[] = {
	        {{"--help"}, "Usage: aiqosctl [--socket PATH] [-o text|json|yaml] COMMAND"},
	        {{"-h"}, "Exit status: 0 ok; 1 failure"},
	        {{"help"}, "Commands:"},
	        {{"status", "--help"}, "Usage: aiqosctl [--socket PATH] status [-v] [-o text|json|yaml]"},
	        {{"explain", "--help"}, "Usage: aiqosctl [--socket PATH] explain [-o text|json|yaml] NAMESPACE/POD"},
	        {{"plan", "--help"}, "Usage: aiqosctl plan --pods FILE"},
	        {{"doctor", "--help"},
	         "Exit status: 0 ok, 1 errors (or the config cannot be read), 2 usage error,\n3 "
	         "warnings only."},
	        {{"version", "--help"}, "Usage: aiqosctl [--socket PATH] version"},
	        {{"--version"}, "aiqosctl 0.2.0-dev"},
	};

	if (!ctl_present())
		return;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct run r;

		run_ctl(NULL, NULL, &r, cases[i].args);
		CHECK_INT(r.code, 0);
		CHECK_CONTAINS(r.out, cases[i].out);
		CHECK_STR(r.err, "");
		run_done(&r);
	}
}

/* ---- status and explain against an agent socket ---- */

static const char status_json[] =
        "{\"node\":\"gpu-node-1\",\"version\":\"0.2.0-dev+0123abc\",\"commit\":\"0123abc\",\"mode\":\"mixed\","
        "\"modeSince\":1795000000,"
        "\"uplink\":{\"ifname\":\"eth0\",\"rateBps\":10000000000,\"shape\":\"htb\","
        "\"shares\":{\"inference\":0.3,\"default\":0.05,\"training\":0.65},"
        "\"effective\":[\"tc qdisc replace dev eth0 root handle 1: htb default 20 r2q 10\"],"
        "\"degraded\":[{\"id\":\"uplink.leaf.training\",\"wanted\":\"fq\",\"got\":\"bfifo\","
        "\"reason\":\"Operation not supported\"}]},"
        "\"apiConnected\":true,\"ready\":true,"
        "\"config\":{\"path\":\"/etc/aiqos/config.json\",\"loadedAt\":1795000000,\"error\":\"\"},"
        "\"pods\":["
        "{\"namespace\":\"serving\",\"name\":\"llm-0\",\"uid\":\"u1\",\"class\":\"inference\",\"profile\":"
        "\"inference\",\"source\":\"api\",\"ips\":[\"10.244.1.21\"],\"status\":\"degraded\",\"attachments\":["
        "{\"containerId\":\"c0ffee0123456789\",\"ifname\":\"eth0\",\"hostIfname\":\"veth1234\",\"effective\":["
        "\"tc qdisc replace dev eth0 root handle 1: bfifo limit 128kb\","
        "\"net.ipv4.tcp_congestion_control=cubic\",\"net.ipv4.tcp_ecn=1\"],"
        "\"degraded\":[{\"id\":\"egress.root\",\"wanted\":\"fq_codel\",\"got\":\"bfifo\",\"reason\":"
        "\"No such file or directory\"},{\"id\":\"sysctl.cc\",\"wanted\":\"bbr\",\"got\":\"cubic\"}],"
        "\"failure\":\"\"}]},"
        "{\"namespace\":\"ml\",\"name\":\"trainer-0\",\"uid\":\"u2\",\"class\":\"training\",\"profile\":"
        "\"training\",\"source\":\"api\",\"ips\":[\"10.244.1.20\"],\"status\":\"tuned\",\"attachments\":["
        "{\"containerId\":\"abc\",\"ifname\":\"eth0\",\"hostIfname\":\"veth5678\",\"effective\":["
        "\"tc qdisc replace dev eth0 root handle 1: fq limit 10000\"],\"degraded\":[],\"failure\":\"\"}]},"
        "{\"namespace\":\"default\",\"name\":\"web\",\"uid\":\"u3\",\"class\":\"default\",\"profile\":\"default\","
        "\"source\":\"plugin\",\"ips\":[],\"status\":\"untuned\",\"attachments\":[]}"
        "]}";

static const char explain_json[] =
        "{\"namespace\":\"serving\",\"name\":\"llm-0\",\"uid\":\"u1\",\"class\":\"inference\",\"profile\":"
        "\"inference\",\"source\":\"api\",\"ips\":[\"10.244.1.21\",\"fd00::21\"],\"status\":\"degraded\","
        "\"attachments\":[{\"containerId\":\"c0ffee0123456789\",\"ifname\":\"eth0\",\"hostIfname\":\"veth1234\","
        "\"effective\":[\"tc qdisc replace dev eth0 root handle 1: bfifo limit 128kb\"],"
        "\"degraded\":[{\"id\":\"egress.root\",\"wanted\":\"fq_codel\",\"got\":\"bfifo\",\"reason\":"
        "\"No such file or directory\"}],\"failure\":\"\"}],"
        "\"plan\":{\"text\":\"sysctl.tcp_ecn [pod] pending: net.ipv4.tcp_ecn=1\\negress.root [pod] pending: tc "
        "qdisc replace dev eth0 root handle 1: fq_codel limit 1024 target 1ms interval 10ms ecn\\n\","
        "\"tc\":\"# egress.root\\n\"},"
        "\"uplinkItems\":[\"uplink.pod.be5966e759dd21b3.0: tc filter add dev eth0 parent 1: protocol ip prio 10 "
        "u32 match ip src 10.244.1.21/32 flowid 1:10\"],"
        "\"why\":[\"class inference from annotation ai.workload=inference\",\"profile inference (default)\"]}";

/* what the fake agent answers to status (status_json, or a variant) */
static const char *fake_status_text = status_json;

static cJSON *fake_status(void *ud)
{
	return cJSON_Parse(fake_status_text);
}

static cJSON *fake_explain(void *ud, const char *ns, const char *name, bool *found)
{
	*found = streq(ns, "serving") && streq(name, "llm-0");
	return *found ? cJSON_Parse(explain_json) : NULL;
}

static const struct agent_server_ops fake_ops = {.status = fake_status, .explain = fake_explain};

struct agent {
	char dir[64];
	char path[128];
	sd_event *loop;
	struct agent_server *s;
};

static bool agent_start(struct agent *a)
{
	struct error err = {0};

	memset(a, 0, sizeof(*a));
	snprintf(a->dir, sizeof(a->dir), "/tmp/aqt-ctl-XXXXXX");
	if (!mkdtemp(a->dir))
		return false;
	snprintf(a->path, sizeof(a->path), "%s/agent.sock", a->dir);
	if (sd_event_new(&a->loop) < 0)
		return false;
	if (agent_server_new(a->loop, a->path, &fake_ops, NULL, &a->s, &err) < 0) {
		fprintf(stderr, "  %s\n", err.msg);
		return false;
	}
	return true;
}

static void agent_stop(struct agent *a)
{
	char cmd[128];

	agent_server_free(a->s);
	sd_event_unref(a->loop);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", a->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "  cleanup of %s failed\n", a->dir);
}

static void run_agent(struct agent *a, struct run *r, const char *const *args)
{
	const char *argv[12];
	unsigned n = 0;

	argv[n++] = "--socket";
	argv[n++] = a->path;
	for (; *args && n < ARRAY_SIZE(argv) - 1; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	run_ctl(a->loop, NULL, r, argv);
}

/* aiqosctl built and the fake agent listening; false (checked) otherwise. */
static bool agent_up(struct agent *a)
{
	if (!ctl_present())
		return false;
	CHECK(agent_start(a));
	if (!a->s) {
		agent_stop(a);
		return false;
	}
	return true;
}

TEST(ctl_status_explain)
{
	struct agent a;
	struct run r;
	cJSON *got, *want;

	if (!agent_up(&a))
		return;
	{
		static const char *const args[] = {"status", NULL};
		run_agent(&a, &r, args);
		CHECK_INT(r.code, 0);
		CHECK_STR(r.err, "");
		t_golden_check("aiqosctl-status.txt", r.out);
		run_done(&r);
	}
	{
		/* --json: the agent's document as is (without the protocol's "ok") */
		static const char *const args[] = {"status", "--json", NULL};
		run_agent(&a, &r, args);
		CHECK_INT(r.code, 0);
		got = cJSON_Parse(r.out);
		want = cJSON_Parse(status_json);
		CHECK(got && want && cJSON_Compare(got, want, true));
		CHECK(r.out[0] == '{' && strchr(r.out, '\n') < r.out + r.out_len - 1); /* pretty: several lines */
		cJSON_Delete(got);
		cJSON_Delete(want);
		run_done(&r);
	}
	{
		static const char *const args[] = {"explain", "serving/llm-0", NULL};
		run_agent(&a, &r, args);
		CHECK_INT(r.code, 0);
		CHECK_STR(r.err, "");
		t_golden_check("aiqosctl-explain.txt", r.out);
		run_done(&r);
	}
	{
		static const char *const args[] = {"explain", "serving/llm-0", "--json", NULL};
		run_agent(&a, &r, args);
		CHECK_INT(r.code, 0);
		got = cJSON_Parse(r.out);
		want = cJSON_Parse(explain_json);
		CHECK(got && want && cJSON_Compare(got, want, true));
		cJSON_Delete(got);
		cJSON_Delete(want);
		run_done(&r);
	}
	{
		static const char *const args[] = {"explain", "--json", "ghost", NULL};
		run_agent(&a, &r, args);
		CHECK_INT(r.code, 1);
		CHECK_STR(r.out, "");
		CHECK_STR(r.err, "aiqosctl: pod default/ghost is not known to the agent (not on this node, or not seen "
		                 "yet)\n");
		run_done(&r);
	}
	agent_stop(&a);
}

/* An agent that is not there: the socket path names the problem. */
TEST(ctl_agent_unreachable)
{
	struct run r;
	char dir[64], path[128], want[256];
	int fd;

	if (!ctl_present())
		return;
	snprintf(dir, sizeof(dir), "/tmp/aqt-ctl-XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/agent.sock", dir);
	{
		const char *args[] = {"--socket", path, "status", NULL};
		run_ctl(NULL, NULL, &r, args);
	}
	snprintf(want, sizeof(want),
	         "aiqosctl: cannot reach the agent at %s: No such file or directory (is aiqos-agent running?)\n", path);
	CHECK_INT(r.code, 1);
	CHECK_STR(r.err, want);
	CHECK_STR(r.out, "");
	run_done(&r);

	/* a socket nobody listens on */
	{
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		str_copy(sa.sun_path, sizeof(sa.sun_path), path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
		close(fd);
	}
	{
		const char *args[] = {"--socket", path, "explain", "a/b", NULL};
		run_ctl(NULL, NULL, &r, args);
	}
	snprintf(want, sizeof(want),
	         "aiqosctl: cannot reach the agent at %s: Connection refused (is aiqos-agent running?)\n", path);
	CHECK_INT(r.code, 1);
	CHECK_STR(r.err, want);
	run_done(&r);
	unlink(path);
	rmdir(dir);

	/* the default path is the documented one */
	if (access(PROTO_DEFAULT_SOCKET, F_OK) != 0) {
		static const char *const args[] = {"status", NULL};
		run_ctl(NULL, NULL, &r, args);
		CHECK_INT(r.code, 1);
		CHECK_CONTAINS(r.err, "aiqosctl: cannot reach the agent at /run/aiqos/agent.sock: ");
		CHECK_CONTAINS(r.err, "(is aiqos-agent running?)");
		run_done(&r);
	}
}

/* ---- the conventions: -o everywhere, global flags anywhere, version,
 * exit codes ---- */

/* YAML text -> JSON text through PyYAML (an independent reader): NULL when
 * python3 or PyYAML is missing. */
static cJSON *yaml_read(const char *yaml)
{
	char path[] = "/tmp/aqt-ctl-yaml-XXXXXX", cmd[256];
	int fd = mkstemp(path);
	FILE *p;
	char *out = NULL;
	size_t len = 0;
	cJSON *j = NULL;

	if (fd < 0 || write(fd, yaml, strlen(yaml)) != (ssize_t)strlen(yaml)) {
		if (fd >= 0)
			close(fd);
		unlink(path);
		return NULL;
	}
	close(fd);
	snprintf(cmd, sizeof(cmd),
	         "python3 -c 'import json,sys,yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))' %s", path);
	p = popen(cmd, "r");
	if (p) {
		char buf[4096];
		size_t n;
		while ((n = fread(buf, 1, sizeof(buf), p)) > 0) {
			char *t = realloc(out, len + n + 1);
			if (!t)
				break;
			out = t;
			memcpy(out + len, buf, n);
			len += n;
			out[len] = '\0';
		}
		if (pclose(p) == 0 && out)
			j = cJSON_Parse(out);
	}
	free(out);
	unlink(path);
	return j;
}

/* -o json, --json and --format json print the same document; -o yaml is
 * that document in YAML; -o before the command works as after it. */
TEST(ctl_output_flag)
{
	static const char *const forms[][8] = {
	        {"plan", "--pods", PODS "pods-mixed.json", "--json", NULL},
	        {"plan", "--pods", PODS "pods-mixed.json", "--format", "json", NULL},
	        {"-o", "json", "plan", "--pods", PODS "pods-mixed.json", NULL},
	        {"plan", "--pods", PODS "pods-mixed.json", "--output=json", NULL},
	};
	struct run ref, r;
	cJSON *want, *got;

	if (!ctl_present())
		return;
	RUN(NULL, NULL, &ref, "plan", "--pods", PODS "pods-mixed.json", "-o", "json");
	CHECK_INT(ref.code, 0);
	want = cJSON_Parse(ref.out);
	CHECK(want != NULL);
	for (size_t i = 0; i < ARRAY_SIZE(forms); i++) {
		run_ctl(NULL, NULL, &r, forms[i]);
		CHECK_INT(r.code, 0);
		CHECK_STR(r.out, ref.out);
		run_done(&r);
	}
	RUN(NULL, NULL, &r, "plan", "--pods", PODS "pods-mixed.json", "-o", "yaml");
	CHECK_INT(r.code, 0);
	got = yaml_read(r.out);
	CHECK(got != NULL);
	CHECK(got && want && cJSON_Compare(got, want, true));
	CHECK(r.out[0] != '{');
	cJSON_Delete(got);
	run_done(&r);
	cJSON_Delete(want);
	run_done(&ref);

	/* doctor without the probe (no root needed): yaml = json */
	RUN(NULL, NULL, &ref, "doctor", "--no-kernel-probe", "--cni-conf-dir", "/nonexistent", "-o", "json");
	RUN(NULL, NULL, &r, "doctor", "--no-kernel-probe", "--cni-conf-dir", "/nonexistent", "-o", "yaml");
	CHECK_INT(ref.code, r.code);
	want = cJSON_Parse(ref.out);
	got = yaml_read(r.out);
	CHECK(got && want && cJSON_Compare(got, want, true));
	cJSON_Delete(got);
	cJSON_Delete(want);
	run_done(&r);
	run_done(&ref);
}

TEST(ctl_conventions_against_agent)
{
	struct agent a;
	struct run r;
	cJSON *got, *want;

	if (!agent_up(&a))
		return;
	fake_status_text = status_json;
	{
		/* --socket after the command, in both spellings */
		const char *args1[] = {"status", "--socket", a.path, NULL};
		char eq[160];
		const char *args2[] = {"status", "-o", "json", eq, NULL};

		snprintf(eq, sizeof(eq), "--socket=%s", a.path);
		run_ctl(a.loop, NULL, &r, args1);
		CHECK_INT(r.code, 0);
		t_golden_check("aiqosctl-status.txt", r.out);
		run_done(&r);
		run_ctl(a.loop, NULL, &r, args2);
		CHECK_INT(r.code, 0);
		got = cJSON_Parse(r.out);
		want = cJSON_Parse(status_json);
		CHECK(got && want && cJSON_Compare(got, want, true));
		cJSON_Delete(got);
		cJSON_Delete(want);
		run_done(&r);
	}
	{
		/* -v: the uplink's tc objects and fallbacks */
		static const char *const args[] = {"status", "-v", NULL};
		run_agent(&a, &r, args);
		CHECK_INT(r.code, 0);
		t_golden_check("aiqosctl-status-verbose.txt", r.out);
		run_done(&r);
	}
	{
		static const char *const args[] = {"explain", "serving/llm-0", "-o", "yaml", NULL};
		run_agent(&a, &r, args);
		CHECK_INT(r.code, 0);
		got = yaml_read(r.out);
		want = cJSON_Parse(explain_json);
		cJSON_DeleteItemFromObjectCaseSensitive(want, "found");
		CHECK(got && want && cJSON_Compare(got, want, true));
		cJSON_Delete(got);
		cJSON_Delete(want);
		run_done(&r);
	}
	{
		/* version: the client's, and the agent's from its status */
		static const char *const args[] = {"version", NULL};
		static const char *const args_json[] = {"version", "-o", "json", NULL};
		run_agent(&a, &r, args);
		CHECK_INT(r.code, 0);
		CHECK_CONTAINS(r.out, "client: aiqosctl 0.2.0-dev");
		CHECK_CONTAINS(r.out, "agent:  aiqos-agent 0.2.0-dev+0123abc (");
		run_done(&r);
		run_agent(&a, &r, args_json);
		CHECK_INT(r.code, 0);
		got = cJSON_Parse(r.out);
		CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(got, "agent"), "commit")),
		          "0123abc");
		{
			const char *v = cJSON_GetStringValue(
			        cJSON_GetObjectItem(cJSON_GetObjectItem(got, "client"), "version"));
			CHECK(v && strncmp(v, "0.2.0-dev", 9) == 0);
		}
		cJSON_Delete(got);
		run_done(&r);
	}
	{
		/* not connected: the API's error in the text, exit 1 */
		static const char *const args[] = {"status", NULL};
		static const char not_connected[] =
		        "{\"node\":\"n1\",\"mode\":\"idle\",\"apiConnected\":false,\"ready\":false,"
		        "\"apiError\":\"list pods: Failed to connect to 127.0.0.1 port 1\",\"pods\":[]}";
		static const char not_ready[] =
		        "{\"node\":\"n1\",\"mode\":\"idle\",\"apiConnected\":true,\"ready\":false,"
		        "\"pods\":[]}";

		fake_status_text = not_connected;
		run_agent(&a, &r, args);
		CHECK_INT(r.code, 1);
		CHECK_CONTAINS(
		        r.out,
		        "api: connected no, ready no; error: list pods: Failed to connect to 127.0.0.1 port 1\n");
		CHECK_STR(r.err, "aiqosctl: the agent is not connected to the Kubernetes API: list pods: Failed to "
		                 "connect to 127.0.0.1 port 1\n");
		run_done(&r);
		fake_status_text = not_ready;
		run_agent(&a, &r, args);
		CHECK_INT(r.code, 1);
		CHECK_CONTAINS(r.err, "the agent is not ready");
		run_done(&r);
		fake_status_text = status_json;
	}
	agent_stop(&a);

	/* no agent: version still answers for the client, exit 0 */
	{
		static const char *const args[] = {"--socket", "/nonexistent/agent.sock", "version", NULL};
		run_ctl(NULL, NULL, &r, args);
		CHECK_INT(r.code, 0);
		CHECK_CONTAINS(r.out, "agent:  not reachable at /nonexistent/agent.sock: ");
		run_done(&r);
	}
}

/* --version: the version and the commit baked in by the Makefile (git's
 * short hash of the tree it was built from). */
TEST(ctl_version_commit)
{
	struct run r;
	FILE *p;
	char sha[64] = "";

	if (!ctl_present())
		return;
	RUN(NULL, NULL, &r, "--version");
	CHECK_INT(r.code, 0);
	CHECK(strncmp(r.out, "aiqosctl 0.2.0-dev", 18) == 0);
	p = popen("git rev-parse --is-inside-work-tree >/dev/null 2>&1 && echo yes", "r");
	if (p && fgets(sha, sizeof(sha), p) && strncmp(sha, "yes", 3) == 0) {
		/* a build in a git checkout: "+<hex>" */
		const char *plus = strchr(r.out, '+');
		CHECK(plus != NULL);
		if (plus) {
			size_t n = strspn(plus + 1, "0123456789abcdef");
			CHECK(n >= 7 && plus[1 + n] == '\n');
		}
	}
	if (p)
		pclose(p);
	run_done(&r);
}

/* plan: YAML pods (the repository's examples), --uplink-rate as the config
 * key, the uplink's root, and no floor claimed without a shaper. */
TEST(ctl_plan_conventions)
{
	struct run r, c;
	cJSON *j, *up, *pods;
	char *a = t_read_file("manifests/examples/inference-pod.yaml"),
	     *b = t_read_file("manifests/examples/training-pod.yaml"), *both;

	if (!ctl_present() || !a || !b) {
		CHECK(a && b);
		free(a);
		free(b);
		return;
	}
	RUN(NULL, NULL, &r, "plan", "--pods", "manifests/examples/inference-pod.yaml", "-o", "json");
	CHECK_INT(r.code, 0);
	CHECK_STR(r.err, "");
	j = cJSON_Parse(r.out);
	pods = cJSON_GetObjectItem(j, "pods");
	CHECK_INT(cJSON_GetArraySize(pods), 1);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(pods, 0), "name")),
	          "aiqos-example-inference");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(pods, 0), "class")), "inference");
	cJSON_Delete(j);
	run_done(&r);

	/* the examples directory: its Pods, the Kustomization left out */
	RUN(NULL, NULL, &r, "plan", "--pods", "manifests/examples/", "-o", "json");
	CHECK_INT(r.code, 0);
	j = cJSON_Parse(r.out);
	pods = cJSON_GetObjectItem(j, "pods");
	CHECK_INT(cJSON_GetArraySize(pods), 2);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "node"), "mode")), "mixed");
	cJSON_Delete(j);
	run_done(&r);
	RUN(NULL, NULL, &r, "plan", "--pods", "manifests/uninstall");
	CHECK_INT(r.code, 1);
	CHECK_CONTAINS(r.err, "manifests/uninstall: no Pod in its .yaml, .yml or .json files");
	run_done(&r);

	/* several documents (kubectl kustomize's output) on stdin */
	both = malloc(strlen(a) + strlen(b) + 8);
	CHECK(both != NULL);
	if (both) {
		sprintf(both, "%s---\n%s", a, b); /* NOLINT: sized above */
		RUN(NULL, both, &r, "plan", "--pods", "-", "-o", "json", "--uplink-rate", "1gbit");
		CHECK_INT(r.code, 0);
		j = cJSON_Parse(r.out);
		pods = cJSON_GetObjectItem(j, "pods");
		CHECK_INT(cJSON_GetArraySize(pods), 2);
		CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(pods, 1), "class")), "training");
		CHECK_INT((int)cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetArrayItem(pods, 1), "egressBps")),
		          1000000000);
		cJSON_Delete(j);
		run_done(&r);
	}
	free(both);
	free(a);
	free(b);

	/* --uplink-rate is the config's uplinkRate: the same uplink as the file's
	 * (which also turns the download direction off) */
	RUN(NULL, NULL, &r, "plan", "--pods", PODS "pods-mixed.json", "-o", "json", "--uplink-rate", "1gbit");
	RUN(NULL, NULL, &c, "plan", "--pods", PODS "pods-mixed.json", "-o", "json", "--config",
	    PODS "config-rate-1gbit.json");
	CHECK_INT(r.code, 0);
	j = cJSON_Parse(r.out);
	up = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "node"), "uplink");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(up, "shape")), "htb");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(up, "rateSource")), "uplinkRate in the config");
	CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(up, "trainingFloor")) > 0);
	{
		cJSON *k = cJSON_Parse(c.out);
		CHECK(k && cJSON_Compare(up, cJSON_GetObjectItem(cJSON_GetObjectItem(k, "node"), "uplink"), true));
		cJSON_Delete(k);
	}
	cJSON_Delete(j);
	run_done(&r);
	run_done(&c);

	/* strict priority gives no floor: none in the text, 0 in JSON */
	RUN(NULL, NULL, &r, "plan", "--pods", PODS "pods-mixed.json", "--link", "nic", "--link-speed", "25gbit");
	CHECK_INT(r.code, 0);
	CHECK_CONTAINS(r.out, "  shape: prio\n");
	CHECK_CONTAINS(r.out, "  training floor: none (strict priority");
	CHECK(strstr(r.out, "training floor: 7.5%") == NULL);
	run_done(&r);
	RUN(NULL, NULL, &r, "plan", "--pods", PODS "pods-mixed.json", "--link", "nic", "--link-speed", "25gbit", "-o",
	    "json");
	j = cJSON_Parse(r.out);
	up = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "node"), "uplink");
	CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(up, "trainingFloor")) == 0);
	cJSON_Delete(j);
	run_done(&r);

	/* a noqueue uplink (kind's veth) without uplinkRate: no tree at all */
	RUN(NULL, NULL, &r, "plan", "--pods", PODS "pods-mixed.json", "--uplink-root", "noqueue");
	CHECK_INT(r.code, 0);
	CHECK_CONTAINS(r.out, "  plan: nothing on the uplink (the original qdisc stays)\n");
	CHECK(strstr(r.out, "uplink.root") == NULL);
	run_done(&r);
	/* with uplinkRate it is shaped */
	RUN(NULL, NULL, &r, "plan", "--pods", PODS "pods-mixed.json", "--uplink-root", "noqueue", "--uplink-rate",
	    "1gbit");
	CHECK_INT(r.code, 0);
	CHECK(strstr(r.out, "nothing on the uplink") == NULL);
	CHECK_CONTAINS(r.out, "uplink.root [uplink]");
	run_done(&r);
	/* a multi-queue NIC with uplinkRate: one fq per queue (EDT) */
	RUN(NULL, NULL, &r, "plan", "--pods", PODS "pods-mixed.json", "--link", "nic", "--link-speed", "25gbit",
	    "--uplink-root", "mq", "--queues", "8", "--uplink-rate", "20gbit", "-o", "json");
	CHECK_INT(r.code, 0);
	j = cJSON_Parse(r.out);
	up = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "node"), "uplink");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(up, "root")), "mq");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(up, "shape")), "edt");
	cJSON_Delete(j);
	run_done(&r);
}
