/* test_cni_conf.c — the plugin's request handling without root: network
 * config and prevResult of every supported spec version (incl. kindnet's
 * 0.3.1 ptp result), runtimeConfig, invalid configs with their exact codes
 * and messages, result/error/VERSION printing, version negotiation, CNI_ARGS
 * (incl. hostile values), CNI_* env checks, and cni_run() end to end for the
 * paths that touch no network namespace (errors, STATUS, DEL and GC on a
 * temporary state directory). */
#include <dirent.h>
#include <sys/stat.h>

#include "../../cni/cni.h"
#include "t.h"

/* ---- helpers ---- */

static int conf_parse_str(const char *json, struct cni_conf *c, struct error *err)
{
	error_clear(err);
	return cni_conf_parse(json, strlen(json), c, err);
}

/* Run cni_run with env and stdin; returns the exit code, *out the stdout. */
static int run(const struct cni_env *env, const char *in, char **out)
{
	_cleanup_free_ char *copy = in && in[0] ? strdup(in) : NULL;
	FILE *fin, *fout;
	size_t n = 0;
	int rc;

	*out = NULL;
	fin = copy ? fmemopen(copy, strlen(copy), "r") : fopen("/dev/null", "re");
	fout = open_memstream(out, &n);
	if (!fin || !fout) {
		if (fin)
			fclose(fin);
		if (fout)
			fclose(fout);
		return -1;
	}
	rc = cni_run(env, fin, fout);
	fclose(fin);
	fclose(fout);
	return rc;
}

/* Parse an error result; returns its code (-1 if not an error object). */
static int error_code_of(const char *out, char *msg, size_t msg_size, char *ver, size_t ver_size)
{
	_cleanup_json_ cJSON *j = out ? cJSON_Parse(out) : NULL;
	const cJSON *code, *m, *v;

	if (!j)
		return -1;
	code = cJSON_GetObjectItemCaseSensitive(j, "code");
	m = cJSON_GetObjectItemCaseSensitive(j, "msg");
	v = cJSON_GetObjectItemCaseSensitive(j, "cniVersion");
	if (!cJSON_IsNumber(code) || !cJSON_IsString(m) || !cJSON_IsString(v))
		return -1;
	snprintf(msg, msg_size, "%s", m->valuestring);
	snprintf(ver, ver_size, "%s", v->valuestring);
	return code->valueint;
}

static char *make_tmpdir(void)
{
	char tmpl[] = "/tmp/aiqos-test-cni-XXXXXX";
	char *d = mkdtemp(tmpl);
	return d ? strdup(d) : NULL;
}

static void rm_rf_flat(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char p[1024];

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		unlink(p);
	}
	closedir(d);
	rmdir(dir);
}

static bool file_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* ---- prevResults of each spec version ---- */

/* kindnet: ptp + portmap conflist at 0.3.1; ptp's result. */
#define PREV_KINDNET_031                                                                                          \
	"{\"cniVersion\":\"0.3.1\",\"interfaces\":[{\"name\":\"veth5f3c2b1a\",\"mac\":\"3a:1f:8e:02:6b:11\"},"    \
	"{\"name\":\"eth0\",\"mac\":\"a6:4d:2c:9e:01:77\",\"sandbox\":\"/var/run/netns/cni-8a5b1c2d\"}],"         \
	"\"ips\":[{\"version\":\"4\",\"interface\":1,\"address\":\"10.244.1.5/24\",\"gateway\":\"10.244.1.1\"}]," \
	"\"routes\":[{\"dst\":\"0.0.0.0/0\"}],\"dns\":{}}"

struct version_case {
	const char *version;
	const char *prev;
	unsigned n_ifaces, n_ips;
	const char *ip0;
	int ip0_iface;
	const char *host_iface; /* "" = none */
	const char *pod_sandbox;
};

static const struct version_case version_cases[] = {
        {"0.3.0",
         "{\"cniVersion\":\"0.3.0\",\"interfaces\":[{\"name\":\"vethab12cd34\",\"mac\":\"aa:bb:cc:dd:ee:01\"},"
         "{\"name\":\"eth0\",\"mac\":\"aa:bb:cc:dd:ee:02\",\"sandbox\":\"/var/run/netns/t030\"}],"
         "\"ips\":[{\"version\":\"4\",\"interface\":1,\"address\":\"10.1.0.5/24\",\"gateway\":\"10.1.0.1\"}],"
         "\"routes\":[{\"dst\":\"0.0.0.0/0\",\"gw\":\"10.1.0.1\"}],\"dns\":{\"nameservers\":[\"10.96.0.10\"]}}",
         2, 1, "10.1.0.5/24", 1, "vethab12cd34", "/var/run/netns/t030"},
        {"0.3.1", PREV_KINDNET_031, 2, 1, "10.244.1.5/24", 1, "veth5f3c2b1a", "/var/run/netns/cni-8a5b1c2d"},
        /* bridge plugin: the bridge, the host veth, the pod side; dual stack */
        {"0.4.0",
         "{\"cniVersion\":\"0.4.0\",\"interfaces\":[{\"name\":\"cni0\",\"mac\":\"aa:00:00:00:00:01\"},"
         "{\"name\":\"veth77aa\",\"mac\":\"aa:00:00:00:00:02\"},"
         "{\"name\":\"eth0\",\"mac\":\"aa:00:00:00:00:03\",\"sandbox\":\"/proc/4242/ns/net\"}],"
         "\"ips\":[{\"version\":\"4\",\"interface\":2,\"address\":\"10.22.0.7/16\",\"gateway\":\"10.22.0.1\"},"
         "{\"version\":\"6\",\"interface\":2,\"address\":\"fd00:22::7/64\",\"gateway\":\"fd00:22::1\"}],"
         "\"routes\":[{\"dst\":\"0.0.0.0/0\"},{\"dst\":\"::/0\"}],\"dns\":{}}",
         3, 2, "10.22.0.7/16", 2, "veth77aa", "/proc/4242/ns/net"},
        /* 1.0.0: no "version" in ips */
        {"1.0.0",
         "{\"cniVersion\":\"1.0.0\",\"interfaces\":[{\"name\":\"veth0001\",\"mac\":\"02:00:00:00:00:01\"},"
         "{\"name\":\"net1\",\"mac\":\"02:00:00:00:00:02\",\"sandbox\":\"/var/run/netns/t100\"}],"
         "\"ips\":[{\"interface\":1,\"address\":\"fd00:10:244::5/64\",\"gateway\":\"fd00:10:244::1\"}],"
         "\"routes\":[{\"dst\":\"::/0\"}],\"dns\":{}}",
         2, 1, "fd00:10:244::5/64", 1, "veth0001", "/var/run/netns/t100"},
        /* 1.1.0: interface mtu/socketPath, route table/scope; macvlan (no host side) */
        {"1.1.0",
         "{\"cniVersion\":\"1.1.0\",\"interfaces\":[{\"name\":\"eth0\",\"mac\":\"02:00:00:00:01:01\",\"mtu\":9000,"
         "\"sandbox\":\"/var/run/netns/t110\",\"socketPath\":\"/run/x.sock\"}],"
         "\"ips\":[{\"interface\":0,\"address\":\"192.168.7.9/24\"}],"
         "\"routes\":[{\"dst\":\"0.0.0.0/0\",\"table\":100,\"scope\":0}],\"dns\":{}}",
         1, 1, "192.168.7.9/24", 0, "", "/var/run/netns/t110"},
};

static char *conf_with_prev(const char *version, const char *prev)
{
	size_t size = strlen(prev) + 128;
	char *s = malloc(size);
	if (s)
		snprintf(s, size, "{\"cniVersion\":\"%s\",\"name\":\"kindnet\",\"type\":\"aiqos\",\"prevResult\":%s}",
		         version, prev);
	return s;
}

TEST(conf_prev_result_every_version)
{
	for (size_t i = 0; i < ARRAY_SIZE(version_cases); i++) {
		const struct version_case *vc = &version_cases[i];
		_cleanup_free_ char *json = conf_with_prev(vc->version, vc->prev);
		struct cni_conf c;
		struct error err;
		int r = conf_parse_str(json, &c, &err);

		CHECK_INT(r, 0);
		if (r < 0) {
			fprintf(stderr, "  %s: %s\n", vc->version, err.msg);
			cni_conf_free(&c);
			continue;
		}
		CHECK_STR(c.cni_version, vc->version);
		CHECK_INT(c.version, cni_version_from_name(vc->version));
		CHECK(c.prev_result != NULL);
		CHECK_INT(c.prev.n_ifaces, vc->n_ifaces);
		CHECK_INT(c.prev.n_ips, vc->n_ips);
		CHECK_STR(c.prev.ips[0].address, vc->ip0);
		CHECK_INT(c.prev.ips[0].interface, vc->ip0_iface);
		CHECK_STR(c.prev.ifaces[vc->ip0_iface].sandbox, vc->pod_sandbox);
		if (vc->host_iface[0]) {
			CHECK(cni_prev_has_host_iface(&c.prev, vc->host_iface));
		} else {
			CHECK_INT(cni_prev_count_host_ifaces(&c.prev), 0);
		}
		/* the pod side is never a host interface */
		CHECK(!cni_prev_has_host_iface(&c.prev, c.prev.ifaces[vc->ip0_iface].name));
		cni_conf_free(&c);
	}
}

TEST(conf_prev_result_kindnet_031)
{
	_cleanup_free_ char *json = conf_with_prev("0.3.1", PREV_KINDNET_031);
	struct cni_conf c;
	struct error err;

	CHECK_INT(conf_parse_str(json, &c, &err), 0);
	CHECK_INT(c.version, CNI_V_0_3_1);
	CHECK_STR(c.prev.ifaces[0].name, "veth5f3c2b1a");
	CHECK_STR(c.prev.ifaces[0].mac, "3a:1f:8e:02:6b:11");
	CHECK_STR(c.prev.ifaces[0].sandbox, "");
	CHECK_STR(c.prev.ifaces[1].name, "eth0");
	CHECK_INT(cni_prev_count_host_ifaces(&c.prev), 1);
	cni_conf_free(&c);
}

TEST(conf_prev_result_bounds)
{
	/* more interfaces/IPs than kept: all type-checked, the first kept */
	char json[8192];
	size_t o = 0;

	o += (size_t)snprintf(
	        json + o, sizeof(json) - o,
	        "{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"type\":\"aiqos\",\"prevResult\":{\"interfaces\":[");
	for (int i = 0; i < 20; i++)
		o += (size_t)snprintf(json + o, sizeof(json) - o, "%s{\"name\":\"if%d\"}", i ? "," : "", i);
	o += (size_t)snprintf(json + o, sizeof(json) - o, "],\"ips\":[");
	for (int i = 0; i < 6; i++)
		o += (size_t)snprintf(json + o, sizeof(json) - o, "%s{\"address\":\"10.0.0.%d/24\"}", i ? "," : "", i);
	snprintf(json + o, sizeof(json) - o, "]}}");

	struct cni_conf c;
	struct error err;
	CHECK_INT(conf_parse_str(json, &c, &err), 0);
	CHECK_INT(c.prev.n_ifaces, CNI_PREV_IFACES_MAX);
	CHECK_INT(c.prev.n_ips, CNI_PREV_IPS_MAX);
	CHECK_STR(c.prev.ips[3].address, "10.0.0.3/24");
	CHECK_INT(c.prev.ips[0].interface, -1);
	cni_conf_free(&c);
}

/* ---- config keys ---- */

TEST(conf_defaults)
{
	struct cni_conf c;
	struct error err;

	CHECK_INT(conf_parse_str("{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"aiqos\"}", &c, &err), 0);
	CHECK_STR(c.name, "n");
	CHECK_STR(c.type, "aiqos");
	CHECK_STR(c.agent_socket, PROTO_DEFAULT_SOCKET);
	CHECK_STR(c.agent_socket, "/run/aiqos/agent.sock");
	CHECK(!c.agent_required);
	CHECK_INT(c.agent_timeout_ms, 200);
	CHECK_STR(c.state_dir, "/var/lib/aiqos");
	CHECK_INT(c.failure_policy, CNI_POLICY_OPEN);
	CHECK_STR(c.log_file, "");
	CHECK_INT(c.log_level, LOG_LVL_WARN);
	CHECK(c.runtime_annotations == NULL);
	CHECK(c.runtime_bandwidth == NULL);
	CHECK(c.prev_result == NULL);
	CHECK(!c.has_valid_attachments);
	CHECK(profile_find(&c.profiles, "inference") != NULL);
	CHECK(profile_find(&c.profiles, "training") != NULL);
	cni_conf_free(&c);
}

TEST(conf_all_keys)
{
	const char *json = "{\"cniVersion\":\"1.0.0\",\"name\":\"kindnet\",\"type\":\"aiqos\","
	                   "\"capabilities\":{\"io.kubernetes.cri.pod-annotations\":true,\"bandwidth\":true},"
	                   "\"agentSocket\":\"/run/t/agent.sock\",\"agentRequired\":true,\"agentTimeoutMs\":50,"
	                   "\"stateDir\":\"/tmp/aiqos-state\",\"failurePolicy\":\"closed\","
	                   "\"logFile\":\"/var/log/aiqos.log\",\"logLevel\":\"debug\","
	                   "\"profiles\":{\"inference-fast\":{\"class\":\"inference\",\"targetUs\":300}},"
	                   "\"someOtherPluginsKey\":{\"x\":[1,2]},\"ipam\":{}}";
	struct cni_conf c;
	struct error err;
	const struct profile *p;

	CHECK_INT(conf_parse_str(json, &c, &err), 0);
	CHECK_STR(err.msg, "");
	CHECK_STR(c.agent_socket, "/run/t/agent.sock");
	CHECK(c.agent_required);
	CHECK_INT(c.agent_timeout_ms, 50);
	CHECK_STR(c.state_dir, "/tmp/aiqos-state");
	CHECK_INT(c.failure_policy, CNI_POLICY_CLOSED);
	CHECK_STR(cni_failure_policy_name(c.failure_policy), "closed");
	CHECK_STR(c.log_file, "/var/log/aiqos.log");
	CHECK_INT(c.log_level, LOG_LVL_DEBUG);
	p = profile_find(&c.profiles, "inference-fast");
	CHECK(p != NULL);
	if (p) {
		CHECK_INT(p->class, CLASS_INFERENCE);
		CHECK_INT(p->target_us, 300);
	}
	cni_conf_free(&c);
}

TEST(conf_null_is_absent)
{
	struct cni_conf c;
	struct error err;

	CHECK_INT(conf_parse_str("{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"aiqos\",\"agentSocket\":null,"
	                         "\"runtimeConfig\":null,\"prevResult\":null,\"profiles\":null}",
	                         &c, &err),
	          0);
	CHECK_STR(c.agent_socket, PROTO_DEFAULT_SOCKET);
	CHECK(c.prev_result == NULL);
	cni_conf_free(&c);
}

TEST(conf_runtime_config)
{
	const char *json = "{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"aiqos\",\"runtimeConfig\":{"
	                   "\"io.kubernetes.cri.pod-annotations\":{\"ai.workload\":\"inference\","
	                   "\"ai.workload/profile\":\"inference-strict\",\"kubernetes.io/egress-bandwidth\":\"10M\","
	                   "\"other\":\"x\"},"
	                   "\"bandwidth\":{\"ingressRate\":20000000,\"ingressBurst\":4294967295,"
	                   "\"egressRate\":5000000,\"egressBurst\":4294967295},\"portMappings\":[]}}";
	struct cni_conf c;
	struct error err;
	struct workload w;

	CHECK_INT(conf_parse_str(json, &c, &err), 0);
	CHECK(c.runtime_annotations != NULL);
	CHECK(c.runtime_bandwidth != NULL);
	CHECK_INT(workload_from_annotations(c.runtime_annotations, &w, &err), 0);
	CHECK_INT(w.class, CLASS_INFERENCE);
	CHECK_STR(w.profile, "inference-strict");
	CHECK_INT(w.egress_bps, 10000000);
	CHECK_INT(workload_apply_runtime_bandwidth(c.runtime_bandwidth, &w, &err), 0);
	CHECK_INT(w.egress_bps, 5000000);
	CHECK_INT(w.ingress_bps, 20000000);
	cni_conf_free(&c);

	/* annotations only / bandwidth only */
	CHECK_INT(conf_parse_str("{\"cniVersion\":\"0.3.1\",\"name\":\"n\",\"type\":\"aiqos\",\"runtimeConfig\":{"
	                         "\"bandwidth\":{\"egressRate\":1000000}}}",
	                         &c, &err),
	          0);
	CHECK(c.runtime_annotations == NULL);
	CHECK(c.runtime_bandwidth != NULL);
	cni_conf_free(&c);
}

TEST(conf_valid_attachments)
{
	struct cni_conf c;
	struct error err;

	CHECK_INT(conf_parse_str("{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"aiqos\","
	                         "\"cni.dev/valid-attachments\":[{\"containerID\":\"abc\",\"ifname\":\"eth0\"}]}",
	                         &c, &err),
	          0);
	CHECK(c.has_valid_attachments);
	CHECK_INT(cJSON_GetArraySize(c.valid_attachments), 1);
	cni_conf_free(&c);
	/* null: present, no valid attachment at all */
	CHECK_INT(conf_parse_str("{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"aiqos\","
	                         "\"cni.dev/valid-attachments\":null}",
	                         &c, &err),
	          0);
	CHECK(c.has_valid_attachments);
	CHECK(c.valid_attachments == NULL);
	cni_conf_free(&c);
}

struct invalid_case {
	const char *json;
	int code;
	const char *msg; /* exact */
};

#define BASE "\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"type\":\"aiqos\""

static const struct invalid_case invalid_cases[] = {
        {"", 6, "cannot decode network configuration: invalid JSON at offset 0"},
        {"   ", 6, "cannot decode network configuration: invalid JSON at offset 3"},
        {"{" BASE "} trailing", 6, "cannot decode network configuration: invalid JSON at offset 49"},
        {"[]", 7, "network configuration must be a JSON object"},
        {"\"x\"", 7, "network configuration must be a JSON object"},
        {"{\"name\":\"n\",\"type\":\"aiqos\"}", 7, "cniVersion: required key missing"},
        {"{\"cniVersion\":\"0.2.0\",\"name\":\"n\"}", 1,
         "unsupported cniVersion \"0.2.0\" (supported: 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0)"},
        {"{\"cniVersion\":\"2.0.0\",\"name\":\"n\"}", 1,
         "unsupported cniVersion \"2.0.0\" (supported: 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0)"},
        {"{\"cniVersion\":\"1.0\",\"name\":\"n\"}", 1,
         "unsupported cniVersion \"1.0\" (supported: 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0)"},
        {"{\"cniVersion\":\"1.0.0\\n\",\"name\":\"n\"}", 1,
         "unsupported cniVersion \"1.0.0?\" (supported: 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0)"},
        {"{\"cniVersion\":1.0,\"name\":\"n\"}", 7, "cniVersion: expected a string"},
        {"{\"cniVersion\":\"1.0.0\",\"type\":\"aiqos\"}", 7, "name: required key missing"},
        {"{\"cniVersion\":\"1.0.0\",\"name\":5}", 7, "name: expected a string"},
        {"{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"type\":[]}", 7, "type: expected a string"},
        {"{" BASE ",\"capabilities\":\"x\"}", 7, "capabilities: expected an object"},
        {"{" BASE ",\"agentSocket\":\"run/x.sock\"}", 7, "agentSocket: \"run/x.sock\" is not an absolute path"},
        {"{" BASE ",\"agentSocket\":7}", 7, "agentSocket: expected a string"},
        {"{" BASE ",\"agentRequired\":\"yes\"}", 7, "agentRequired: expected a boolean"},
        {"{" BASE ",\"agentTimeoutMs\":0}", 7, "agentTimeoutMs: 0 is not an integer in 1..5000"},
        {"{" BASE ",\"agentTimeoutMs\":1.5}", 7, "agentTimeoutMs: 1.5 is not an integer in 1..5000"},
        {"{" BASE ",\"agentTimeoutMs\":\"200\"}", 7, "agentTimeoutMs: expected an integer"},
        {"{" BASE ",\"stateDir\":\"var/lib/aiqos\"}", 7, "stateDir: \"var/lib/aiqos\" is not an absolute path"},
        {"{" BASE ",\"failurePolicy\":\"maybe\"}", 7,
         "failurePolicy: invalid value \"maybe\" (want \"open\" or \"closed\")"},
        {"{" BASE ",\"failurePolicy\":\"Open\"}", 7,
         "failurePolicy: invalid value \"Open\" (want \"open\" or \"closed\")"},
        {"{" BASE ",\"failurePolicy\":true}", 7, "failurePolicy: expected a string"},
        {"{" BASE ",\"logFile\":\"aiqos.log\"}", 7, "logFile: \"aiqos.log\" is not an absolute path"},
        {"{" BASE ",\"logLevel\":\"verbose\"}", 7,
         "logLevel: invalid value \"verbose\" (want error, warn, info or debug)"},
        {"{" BASE ",\"logLevel\":3}", 7, "logLevel: expected a string"},
        {"{" BASE ",\"profiles\":[]}", 7, "profiles: expected an object"},
        {"{" BASE ",\"runtimeConfig\":[]}", 7, "runtimeConfig: expected an object"},
        {"{" BASE ",\"runtimeConfig\":{\"io.kubernetes.cri.pod-annotations\":\"ai.workload=x\"}}", 7,
         "runtimeConfig.io.kubernetes.cri.pod-annotations: expected an object"},
        {"{" BASE ",\"runtimeConfig\":{\"bandwidth\":5}}", 7, "runtimeConfig.bandwidth: expected an object"},
        {"{" BASE ",\"prevResult\":\"x\"}", 7, "prevResult: expected an object"},
        {"{" BASE ",\"prevResult\":{\"interfaces\":{}}}", 7, "prevResult.interfaces: expected an array"},
        {"{" BASE ",\"prevResult\":{\"interfaces\":[5]}}", 7, "prevResult.interfaces[0]: expected an object"},
        {"{" BASE ",\"prevResult\":{\"interfaces\":[{\"mac\":\"x\"}]}}", 7,
         "prevResult.interfaces[0].name: required key missing"},
        {"{" BASE ",\"prevResult\":{\"interfaces\":[{\"name\":\"a\"},{\"name\":7}]}}", 7,
         "prevResult.interfaces[1].name: expected a string"},
        {"{" BASE ",\"prevResult\":{\"interfaces\":[{\"name\":\"abcdefghijklmnop\"}]}}", 7,
         "prevResult.interfaces[0].name: \"abcdefghijklmnop\" is longer than 15 characters"},
        {"{" BASE ",\"prevResult\":{\"interfaces\":[{\"name\":\"a\",\"sandbox\":[]}]}}", 7,
         "prevResult.interfaces[0].sandbox: expected a string"},
        {"{" BASE ",\"prevResult\":{\"ips\":\"10.0.0.1\"}}", 7, "prevResult.ips: expected an array"},
        {"{" BASE ",\"prevResult\":{\"ips\":[{\"address\":5}]}}", 7, "prevResult.ips[0].address: expected a string"},
        {"{" BASE ",\"prevResult\":{\"ips\":[{\"gateway\":\"10.0.0.1\"}]}}", 7,
         "prevResult.ips[0].address: required key missing"},
        {"{" BASE ",\"prevResult\":{\"ips\":[{\"address\":\"10.0.0.2/24\",\"interface\":-1}]}}", 7,
         "prevResult.ips[0].interface: -1 is not an integer in 0..65535"},
        {"{" BASE ",\"prevResult\":{\"ips\":[{\"address\":\"10.0.0.2/24\",\"interface\":\"1\"}]}}", 7,
         "prevResult.ips[0].interface: expected an integer"},
        {"{" BASE ",\"cni.dev/valid-attachments\":{}}", 7, "cni.dev/valid-attachments: expected an array"},
        {"{" BASE ",\"cni.dev/valid-attachments\":[1]}", 7, "cni.dev/valid-attachments[0]: expected an object"},
        {"{" BASE ",\"cni.dev/valid-attachments\":[{\"containerID\":\"a\"}]}", 7,
         "cni.dev/valid-attachments[0].ifname: required key missing"},
        {"{" BASE ",\"cni.dev/valid-attachments\":[{\"containerID\":1,\"ifname\":\"eth0\"}]}", 7,
         "cni.dev/valid-attachments[0].containerID: expected a string"},
};

TEST(conf_invalid)
{
	for (size_t i = 0; i < ARRAY_SIZE(invalid_cases); i++) {
		const struct invalid_case *ic = &invalid_cases[i];
		struct cni_conf c;
		struct error err;
		int r = conf_parse_str(ic->json, &c, &err);

		CHECK(r < 0);
		CHECK_INT(err.code, ic->code);
		CHECK_STR(err.msg, ic->msg);
		if (r >= 0 || err.code != ic->code || strcmp(err.msg, ic->msg) != 0)
			fprintf(stderr, "  case %zu: %s\n", i, ic->json);
		cni_conf_free(&c);
	}
}

TEST(conf_invalid_profiles_named)
{
	struct cni_conf c;
	struct error err;

	CHECK(conf_parse_str("{" BASE ",\"profiles\":{\"fast\":{\"class\":\"bogus\"}}}", &c, &err) < 0);
	CHECK_INT(err.code, 7);
	CHECK_CONTAINS(err.msg, "profiles.fast.class");
	CHECK_CONTAINS(err.msg, "bogus");
	cni_conf_free(&c);
}

TEST(conf_invalid_long_and_binary)
{
	struct cni_conf c;
	struct error err;
	char json[512];
	char *big;

	/* a socket path longer than sun_path */
	snprintf(json, sizeof(json), "{" BASE ",\"agentSocket\":\"/%0120d\"}", 0);
	CHECK(conf_parse_str(json, &c, &err) < 0);
	CHECK_INT(err.code, 7);
	CHECK_CONTAINS(err.msg, "agentSocket: \"/000");
	CHECK_CONTAINS(err.msg, "...\" is longer than 107 characters");
	CHECK(strlen(err.msg) < 200);
	cni_conf_free(&c);

	/* embedded NUL */
	static const char nul[] = "{\"cniVersion\":\"1.0.0\"}\0{}";
	CHECK(cni_conf_parse(nul, sizeof(nul) - 1, &c, &err) < 0);
	CHECK_INT(err.code, 6);
	CHECK_STR(err.msg, "cannot decode network configuration: NUL byte at offset 22");
	cni_conf_free(&c);

	/* larger than 1 MiB */
	big = malloc(CNI_STDIN_MAX + 2);
	CHECK(big != NULL);
	if (big) {
		memset(big, ' ', CNI_STDIN_MAX + 1);
		big[0] = '{';
		big[CNI_STDIN_MAX] = '}';
		big[CNI_STDIN_MAX + 1] = '\0';
		CHECK(cni_conf_parse(big, CNI_STDIN_MAX + 1, &c, &err) < 0);
		CHECK_INT(err.code, 6);
		CHECK_STR(err.msg, "cannot decode network configuration: larger than 1048576 bytes");
		cni_conf_free(&c);
		free(big);
	}

	/* deep nesting is refused by the decoder, not by the stack */
	big = malloc(20001);
	if (big) {
		memset(big, '[', 20000);
		big[20000] = '\0';
		CHECK(cni_conf_parse(big, 20000, &c, &err) < 0);
		CHECK_INT(err.code, 6);
		cni_conf_free(&c);
		free(big);
	}
}

TEST(conf_duplicate_keys_first_wins)
{
	struct cni_conf c;
	struct error err;

	CHECK_INT(conf_parse_str("{\"cniVersion\":\"0.4.0\",\"cniVersion\":\"9.9.9\",\"name\":\"n\"}", &c, &err), 0);
	CHECK_STR(c.cni_version, "0.4.0");
	cni_conf_free(&c);
}

/* ---- versions ---- */

TEST(version_names)
{
	static const struct {
		const char *s;
		int v;
	} cases[] = {
	        {"0.3.0", CNI_V_0_3_0}, {"0.3.1", CNI_V_0_3_1},     {"0.4.0", CNI_V_0_4_0},     {"1.0.0", CNI_V_1_0_0},
	        {"1.1.0", CNI_V_1_1_0}, {"0.2.0", _CNI_V_INVALID},  {"0.1.0", _CNI_V_INVALID},  {"1.1", _CNI_V_INVALID},
	        {"", _CNI_V_INVALID},   {"1.1.0 ", _CNI_V_INVALID}, {"v1.1.0", _CNI_V_INVALID}, {NULL, _CNI_V_INVALID},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		CHECK_INT(cni_version_from_name(cases[i].s), cases[i].v);
		if (cases[i].v >= 0)
			CHECK_STR(cni_version_name((enum cni_version)cases[i].v), cases[i].s);
	}
	CHECK(cni_version_name(_CNI_V_MAX) == NULL);
}

TEST(version_command_negotiation)
{
	static const struct {
		enum cni_version v;
		enum cni_command c;
		int ok;
		const char *msg;
	} cases[] = {
	        {CNI_V_0_3_0, CNI_CMD_ADD, 1, ""},
	        {CNI_V_0_3_1, CNI_CMD_DEL, 1, ""},
	        {CNI_V_0_3_1, CNI_CMD_CHECK, 0, "CHECK is not supported with cniVersion 0.3.1 (needs 0.4.0 or later)"},
	        {CNI_V_0_3_0, CNI_CMD_CHECK, 0, "CHECK is not supported with cniVersion 0.3.0 (needs 0.4.0 or later)"},
	        {CNI_V_0_4_0, CNI_CMD_CHECK, 1, ""},
	        {CNI_V_1_0_0, CNI_CMD_CHECK, 1, ""},
	        {CNI_V_1_0_0, CNI_CMD_STATUS, 0,
	         "STATUS is not supported with cniVersion 1.0.0 (needs 1.1.0 or later)"},
	        {CNI_V_0_4_0, CNI_CMD_GC, 0, "GC is not supported with cniVersion 0.4.0 (needs 1.1.0 or later)"},
	        {CNI_V_1_1_0, CNI_CMD_STATUS, 1, ""},
	        {CNI_V_1_1_0, CNI_CMD_GC, 1, ""},
	        {CNI_V_0_3_0, CNI_CMD_VERSION, 1, ""},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct error err = {0};
		int r = cni_version_check_command(cases[i].v, cases[i].c, &err);
		CHECK_INT(r == 0, cases[i].ok);
		if (!cases[i].ok) {
			CHECK_INT(err.code, CNI_ERR_VERSION);
			CHECK_STR(err.msg, cases[i].msg);
		}
	}
}

TEST(command_names)
{
	static const char *const names[] = {"ADD", "DEL", "CHECK", "STATUS", "GC", "VERSION"};
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		CHECK_INT(cni_command_from_name(names[i]), (int)i);
		CHECK_STR(cni_command_name((enum cni_command)i), names[i]);
	}
	CHECK_INT(cni_command_from_name("add"), _CNI_CMD_INVALID);
	CHECK_INT(cni_command_from_name(""), _CNI_CMD_INVALID);
	CHECK_INT(cni_command_from_name(NULL), _CNI_CMD_INVALID);
}

/* ---- printing ---- */

static char *print_to_string(int (*fn)(FILE *, const cJSON *, const char *, struct error *), const cJSON *j,
                             const char *v)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	if (!f)
		return NULL;
	fn(f, j, v, NULL);
	fclose(f);
	return buf;
}

TEST(result_round_trip)
{
	static const char *const to[] = {"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"};

	for (size_t i = 0; i < ARRAY_SIZE(version_cases); i++) {
		for (size_t k = 0; k < ARRAY_SIZE(to); k++) {
			_cleanup_json_ cJSON *prev = cJSON_Parse(version_cases[i].prev);
			_cleanup_json_ cJSON *want = cJSON_Duplicate(prev, 1);
			_cleanup_free_ char *out = print_to_string(cni_result_print, prev, to[k]);
			_cleanup_json_ cJSON *got = out ? cJSON_Parse(out) : NULL;

			CHECK(got != NULL);
			if (!got || !want)
				continue;
			/* stdout is exactly one JSON document and a newline */
			CHECK_INT(out[strlen(out) - 1], '\n');
			CHECK_STR(cJSON_GetObjectItemCaseSensitive(got, "cniVersion")->valuestring, to[k]);
			/* cniVersion comes first */
			CHECK_STR(got->child->string, "cniVersion");
			cJSON_ReplaceItemInObjectCaseSensitive(want, "cniVersion", cJSON_CreateString(to[k]));
			CHECK(cJSON_Compare(want, got, 1));
			/* the input is untouched */
			CHECK_STR(cJSON_GetObjectItemCaseSensitive(prev, "cniVersion")->valuestring,
			          version_cases[i].version);
		}
	}
}

TEST(result_without_cni_version)
{
	_cleanup_json_ cJSON *prev = cJSON_Parse("{\"ips\":[],\"dns\":{}}");
	_cleanup_free_ char *out = print_to_string(cni_result_print, prev, "1.0.0");
	CHECK_STR(out, "{\"cniVersion\":\"1.0.0\",\"ips\":[],\"dns\":{}}\n");
}

TEST(error_print)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	cni_error_print(f, "0.3.1", 7, "bad \"thing\"\n", NULL);
	cni_error_print(f, NULL, 101, "drift", "line 1\nline 2");
	cni_error_print(f, "1.0.0", 4, "x", "");
	fclose(f);
	CHECK_STR(buf, "{\"cniVersion\":\"0.3.1\",\"code\":7,\"msg\":\"bad \\\"thing\\\"\\n\"}\n"
	               "{\"cniVersion\":\"1.1.0\",\"code\":101,\"msg\":\"drift\",\"details\":\"line 1\\nline 2\"}\n"
	               "{\"cniVersion\":\"1.0.0\",\"code\":4,\"msg\":\"x\"}\n");
	free(buf);
}

TEST(version_print)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	cni_version_print(f);
	fclose(f);
	CHECK_STR(buf, "{\"cniVersion\":\"1.1.0\",\"supportedVersions\":[\"0.3.0\",\"0.3.1\",\"0.4.0\",\"1.0.0\","
	               "\"1.1.0\"]}\n");
	free(buf);
}

/* ---- CNI_ARGS ---- */

struct args_case {
	const char *in;
	int ok;
	const char *ns, *name, *uid, *infra;
	const char *msg; /* when !ok: exact */
};

#define LONG300                                                                                                      \
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

static const struct args_case args_cases[] = {
        {"", 1, "", "", "", "", NULL},
        {NULL, 1, "", "", "", "", NULL},
        /* containerd */
        {"IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-7d4b9c-x2x9z;"
         "K8S_POD_INFRA_CONTAINER_ID=4f1c2b7e9a0d;K8S_POD_UID=0b9e4a1c-3f2d-4e5b-8a7c-1d2e3f4a5b6c",
         1, "default", "web-7d4b9c-x2x9z", "0b9e4a1c-3f2d-4e5b-8a7c-1d2e3f4a5b6c", "4f1c2b7e9a0d", NULL},
        /* IgnoreUnknown last still applies; unknown keys skipped */
        {"K8S_POD_NAMESPACE=kube-system;FOO=bar;K8S_POD_NAME=coredns.abc;IgnoreUnknown=true", 1, "kube-system",
         "coredns.abc", "", "", NULL},
        {"K8S_POD_NAMESPACE=ns;;K8S_POD_NAME=p;", 1, "ns", "p", "", "", NULL},
        /* a pod name's labels may exceed 63 characters (DNS subdomain); a
         * static pod's UID may be the kubelet's hash or its own */
        {"K8S_POD_NAMESPACE=ci;K8S_POD_NAME=tttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttt.run-"
         "1;K8S_POD_UID=my_static.pod-1",
         1, "ci", "tttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttt.run-1", "my_static.pod-1", "",
         NULL},
        {"K8S_POD_NAMESPACE=;K8S_POD_NAME=p", 1, "", "p", "", "", NULL},
        {"FOO=bar", 0, "", "", "", "", "CNI_ARGS: unknown key \"FOO\" (set IgnoreUnknown=1 to ignore it)"},
        {"IgnoreUnknown=0;FOO=bar", 0, "", "", "", "",
         "CNI_ARGS: unknown key \"FOO\" (set IgnoreUnknown=1 to ignore it)"},
        {"IgnoreUnknown=maybe", 0, "", "", "", "",
         "CNI_ARGS: IgnoreUnknown: invalid value \"maybe\" (want 1, 0, true or false)"},
        {"IgnoreUnknown=1;IgnoreUnknown=1", 0, "", "", "", "", "CNI_ARGS: IgnoreUnknown given twice"},
        {"K8S_POD_NAME", 0, "", "", "", "", "CNI_ARGS: invalid pair \"K8S_POD_NAME\" (want KEY=VALUE)"},
        {"=x", 0, "", "", "", "", "CNI_ARGS: invalid pair \"=x\" (want KEY=VALUE)"},
        {"K8S_POD_NAME=a=b", 0, "", "", "", "", "CNI_ARGS: invalid pair \"K8S_POD_NAME=a=b\" (want KEY=VALUE)"},
        {"K8S POD=x", 0, "", "", "", "", "CNI_ARGS: invalid key \"K8S POD\""},
        {"K8S_POD_NAME=a;K8S_POD_NAME=b", 0, "", "", "", "", "CNI_ARGS: K8S_POD_NAME given twice"},
        /* hostile values */
        {"K8S_POD_NAME=web\nlevel", 0, "", "", "", "",
         "CNI_ARGS: K8S_POD_NAME: invalid value \"web?level\" (want a DNS subdomain of at most 253 characters)"},
        /* a second '=' smuggled into a value */
        {"K8S_POD_NAME=web\nlevel=error", 0, "", "", "", "",
         "CNI_ARGS: invalid pair \"K8S_POD_NAME=web?level=error\" (want KEY=VALUE)"},
        {"K8S_POD_NAMESPACE=../../etc", 0, "", "", "", "",
         "CNI_ARGS: K8S_POD_NAMESPACE: invalid value \"../../etc\" (want a DNS label of at most 63 characters)"},
        {"K8S_POD_NAMESPACE=Default", 0, "", "", "", "",
         "CNI_ARGS: K8S_POD_NAMESPACE: invalid value \"Default\" (want a DNS label of at most 63 characters)"},
        {"K8S_POD_NAMESPACE=a.b", 0, "", "", "", "",
         "CNI_ARGS: K8S_POD_NAMESPACE: invalid value \"a.b\" (want a DNS label of at most 63 characters)"},
        {"K8S_POD_NAME=a..b", 0, "", "", "", "",
         "CNI_ARGS: K8S_POD_NAME: invalid value \"a..b\" (want a DNS subdomain of at most 253 characters)"},
        {"K8S_POD_NAME=-a", 0, "", "", "", "",
         "CNI_ARGS: K8S_POD_NAME: invalid value \"-a\" (want a DNS subdomain of at most 253 characters)"},
        {"K8S_POD_NAME=a\"b", 0, "", "", "", "",
         "CNI_ARGS: K8S_POD_NAME: invalid value \"a\"b\" (want a DNS subdomain of at most 253 characters)"},
        {"K8S_POD_UID=$(reboot)", 0, "", "", "", "",
         "CNI_ARGS: K8S_POD_UID: invalid value \"$(reboot)\" (want letters, digits, '-', '.', '_', at most 63 "
         "characters)"},
        {"K8S_POD_INFRA_CONTAINER_ID=../x", 0, "", "", "", "",
         "CNI_ARGS: K8S_POD_INFRA_CONTAINER_ID: invalid value \"../x\" (want a container ID of at most 127 "
         "characters)"},
        {"K8S_POD_NAME=" LONG300, 0, "", "", "", "",
         "CNI_ARGS: K8S_POD_NAME: invalid value "
         "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\" "
         "(want a DNS subdomain of at most 253 characters)"},
};

TEST(args_parse)
{
	for (size_t i = 0; i < ARRAY_SIZE(args_cases); i++) {
		const struct args_case *ac = &args_cases[i];
		struct cni_args a;
		struct error err = {0};
		int r = cni_args_parse(ac->in, &a, &err);

		CHECK_INT(r == 0, ac->ok);
		if (ac->ok) {
			CHECK_STR(a.pod_namespace, ac->ns);
			CHECK_STR(a.pod_name, ac->name);
			CHECK_STR(a.pod_uid, ac->uid);
			CHECK_STR(a.infra_container_id, ac->infra);
		} else {
			CHECK_INT(err.code, CNI_ERR_ENV);
			CHECK_STR(err.msg, ac->msg);
			/* nothing half-parsed is left behind */
			CHECK_STR(a.pod_name, "");
		}
		if ((r == 0) != ac->ok)
			fprintf(stderr, "  case %zu: %s -> %s\n", i, ac->in ? ac->in : "(null)", err.msg);
	}
}

TEST(args_too_long)
{
	char *s = malloc(CNI_ARGS_MAX + 10);
	struct cni_args a;
	struct error err;

	CHECK(s != NULL);
	if (!s)
		return;
	memset(s, 'a', CNI_ARGS_MAX + 9);
	s[CNI_ARGS_MAX + 9] = '\0';
	CHECK(cni_args_parse(s, &a, &err) < 0);
	CHECK_INT(err.code, 4);
	CHECK_STR(err.msg, "CNI_ARGS: longer than 8192 bytes");
	free(s);
}

/* ---- env ---- */

TEST(env_check)
{
	static const struct {
		enum cni_command cmd;
		struct cni_env env;
		const char *msg; /* NULL = ok */
	} cases[] = {
	        {CNI_CMD_ADD, {"ADD", "c1", "/var/run/netns/x", "eth0", NULL, NULL}, NULL},
	        {CNI_CMD_ADD,
	         {"ADD", NULL, "/var/run/netns/x", "eth0", NULL, NULL},
	         "required environment variable CNI_CONTAINERID is not set"},
	        {CNI_CMD_ADD,
	         {"ADD", "c1", "", "eth0", NULL, NULL},
	         "required environment variable CNI_NETNS is not set"},
	        {CNI_CMD_ADD,
	         {"ADD", "c1", "/var/run/netns/x", NULL, NULL, NULL},
	         "required environment variable CNI_IFNAME is not set"},
	        {CNI_CMD_CHECK,
	         {"CHECK", "c1", NULL, "eth0", NULL, NULL},
	         "required environment variable CNI_NETNS is not set"},
	        {CNI_CMD_DEL, {"DEL", "c1", NULL, "eth0", NULL, NULL}, NULL},
	        {CNI_CMD_DEL, {"DEL", "c1", "", "eth0", NULL, NULL}, NULL},
	        {CNI_CMD_DEL,
	         {"DEL", NULL, NULL, "eth0", NULL, NULL},
	         "required environment variable CNI_CONTAINERID is not set"},
	        {CNI_CMD_DEL,
	         {"DEL", "c1", NULL, NULL, NULL, NULL},
	         "required environment variable CNI_IFNAME is not set"},
	        {CNI_CMD_GC, {"GC", NULL, NULL, NULL, NULL, NULL}, NULL},
	        {CNI_CMD_STATUS, {"STATUS", NULL, NULL, NULL, NULL, NULL}, NULL},
	        {CNI_CMD_VERSION, {"VERSION", NULL, NULL, NULL, NULL, NULL}, NULL},
	        {CNI_CMD_ADD,
	         {"ADD", "../../etc/passwd", "/var/run/netns/x", "eth0", NULL, NULL},
	         "CNI_CONTAINERID: invalid value \"../../etc/passwd\" (want letters, digits, '_', '.', '-', starting "
	         "with "
	         "a letter or digit, at most 127 characters)"},
	        {CNI_CMD_ADD,
	         {"ADD", "-c1", "/var/run/netns/x", "eth0", NULL, NULL},
	         "CNI_CONTAINERID: invalid value \"-c1\" (want letters, digits, '_', '.', '-', starting with a letter "
	         "or "
	         "digit, at most 127 characters)"},
	        {CNI_CMD_ADD,
	         {"ADD", "c1", "/var/run/netns/x", "eth0/../x", NULL, NULL},
	         "CNI_IFNAME: invalid interface name \"eth0/../x\" (want 1-15 bytes, no '/', ':' or "
	         "whitespace, not '.' or '..')"},
	        /* Linux's and libcni's rules, not a subset: Multus lets pod authors choose */
	        {CNI_CMD_ADD, {"ADD", "c1", "/var/run/netns/x", "net+1", NULL, NULL}, NULL},
	        {CNI_CMD_DEL, {"DEL", "c1", NULL, "x@y", NULL, NULL}, NULL},
	        {CNI_CMD_ADD,
	         {"ADD", "c1", "/var/run/netns/x", "eth0:1", NULL, NULL},
	         "CNI_IFNAME: invalid interface name \"eth0:1\" (want 1-15 bytes, no '/', ':' or "
	         "whitespace, not '.' or '..')"},
	        {CNI_CMD_DEL,
	         {"DEL", "c1", NULL, "..", NULL, NULL},
	         "CNI_IFNAME: invalid interface name \"..\" (want 1-15 bytes, no '/', ':' or "
	         "whitespace, not '.' or '..')"},
	        {CNI_CMD_ADD,
	         {"ADD", "c1", "/var/run/netns/x", "averyverylongname", NULL, NULL},
	         "CNI_IFNAME: invalid interface name \"averyverylongname\" (want 1-15 bytes, no '/', ':' or "
	         "whitespace, not '.' or '..')"},
	        {CNI_CMD_ADD,
	         {"ADD", "c1", "/var/run/netns/x", "eth 0", NULL, NULL},
	         "CNI_IFNAME: invalid interface name \"eth 0\" (want 1-15 bytes, no '/', ':' or "
	         "whitespace, not '.' or '..')"},
	        {CNI_CMD_ADD,
	         {"ADD", "c1", "netns/x", "eth0", NULL, NULL},
	         "CNI_NETNS: \"netns/x\" is not an absolute path of at most 511 characters"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct error err = {0};
		int r = cni_env_check(cases[i].cmd, &cases[i].env, &err);
		if (!cases[i].msg) {
			CHECK_INT(r, 0);
		} else {
			CHECK(r < 0);
			CHECK_INT(err.code, CNI_ERR_ENV);
			CHECK_STR(err.msg, cases[i].msg);
		}
	}
}

TEST(sanitize)
{
	char b[8];
	CHECK_STR(cni_sanitize("abc", b, sizeof(b)), "abc");
	CHECK_STR(cni_sanitize("a\nb\x7f", b, sizeof(b)), "a?b?");
	CHECK_STR(cni_sanitize("abcdefghij", b, sizeof(b)), "abcd...");
	CHECK_STR(cni_sanitize(NULL, b, sizeof(b)), "");
	CHECK_STR(cni_sanitize("\xc3\xa9", b, sizeof(b)), "??");
}

/* ---- cni_run end to end (no netns touched) ---- */

TEST(run_version)
{
	struct cni_env env = {.command = "VERSION"};
	char *out;

	CHECK_INT(run(&env, "{\"cniVersion\":\"0.3.1\"}", &out), 0);
	CHECK_STR(out, "{\"cniVersion\":\"1.1.0\",\"supportedVersions\":[\"0.3.0\",\"0.3.1\",\"0.4.0\",\"1.0.0\","
	               "\"1.1.0\"]}\n");
	free(out);
	/* VERSION does not depend on stdin */
	CHECK_INT(run(&env, "", &out), 0);
	CHECK_CONTAINS(out, "supportedVersions");
	free(out);
	CHECK_INT(run(&env, "garbage", &out), 0);
	CHECK_CONTAINS(out, "supportedVersions");
	free(out);
}

#define NS             "/var/run/netns/aqt-unit-does-not-exist"
#define CONF(v, extra) "{\"cniVersion\":\"" v "\",\"name\":\"n\",\"type\":\"aiqos\",\"logLevel\":\"error\"" extra "}"

struct run_case {
	struct cni_env env;
	const char *in;
	int code;
	const char *version;
	const char *msg; /* exact */
};

static const struct run_case run_cases[] = {
        {{0}, CONF("1.0.0", ""), 4, "1.1.0", "required environment variable CNI_COMMAND is not set"},
        {{.command = "FROB"},
         CONF("1.0.0", ""),
         4,
         "1.1.0",
         "unknown CNI_COMMAND \"FROB\" (want ADD, DEL, CHECK, STATUS, GC or VERSION)"},
        {{.command = "ADD", .container_id = "c1", .netns = NS, .ifname = "eth0"},
         "{nope",
         6,
         "1.1.0",
         "cannot decode network configuration: invalid JSON at offset 2"},
        {{.command = "ADD", .container_id = "c1", .netns = NS, .ifname = "eth0"},
         "",
         6,
         "1.1.0",
         "cannot decode network configuration: invalid JSON at offset 0"},
        {{.command = "ADD", .container_id = "c1", .netns = NS, .ifname = "eth0"},
         "{\"cniVersion\":\"0.2.0\",\"name\":\"n\"}",
         1,
         "1.1.0",
         "unsupported cniVersion \"0.2.0\" (supported: 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0)"},
        {{.command = "ADD", .container_id = "c1", .netns = NS, .ifname = "eth0"},
         CONF("0.3.1", ",\"failurePolicy\":\"sometimes\""),
         7,
         "0.3.1",
         "failurePolicy: invalid value \"sometimes\" (want \"open\" or \"closed\")"},
        {{.command = "ADD", .container_id = "c1", .netns = NS, .ifname = "eth0"},
         CONF("0.3.1", ""),
         7,
         "0.3.1",
         CNI_MSG_NO_PREV_RESULT},
        {{.command = "ADD", .container_id = "c1", .ifname = "eth0"},
         CONF("1.0.0", ",\"prevResult\":" PREV_KINDNET_031),
         4,
         "1.0.0",
         "required environment variable CNI_NETNS is not set"},
        {{.command = "ADD", .container_id = "c1", .netns = NS, .ifname = "eth0", .args = "K8S_POD_NAME=x;evil=1"},
         CONF("1.0.0", ",\"prevResult\":" PREV_KINDNET_031),
         4,
         "1.0.0",
         "CNI_ARGS: unknown key \"evil\" (set IgnoreUnknown=1 to ignore it)"},
        {{.command = "CHECK", .container_id = "c1", .netns = NS, .ifname = "eth0"},
         CONF("0.3.1", ",\"prevResult\":" PREV_KINDNET_031),
         1,
         "0.3.1",
         "CHECK is not supported with cniVersion 0.3.1 (needs 0.4.0 or later)"},
        {{.command = "CHECK", .container_id = "c1", .netns = NS, .ifname = "eth0"},
         CONF("1.0.0", ""),
         7,
         "1.0.0",
         CNI_MSG_NO_PREV_RESULT},
        {{.command = "STATUS"},
         CONF("1.0.0", ""),
         1,
         "1.0.0",
         "STATUS is not supported with cniVersion 1.0.0 (needs 1.1.0 or later)"},
        {{.command = "GC"},
         CONF("0.4.0", ",\"cni.dev/valid-attachments\":[]"),
         1,
         "0.4.0",
         "GC is not supported with cniVersion 0.4.0 (needs 1.1.0 or later)"},
        {{.command = "GC"},
         CONF("1.1.0", ",\"stateDir\":\"/nonexistent/aiqos-unit\""),
         7,
         "1.1.0",
         "GC needs cni.dev/valid-attachments (a missing list is not taken as empty)"},
        {{.command = "STATUS"},
         CONF("1.1.0", ",\"agentRequired\":true,\"agentSocket\":\"/nonexistent/aiqos-unit.sock\""),
         50,
         "1.1.0",
         "agent not reachable at /nonexistent/aiqos-unit.sock: No such file or directory"},
};

TEST(run_errors)
{
	for (size_t i = 0; i < ARRAY_SIZE(run_cases); i++) {
		const struct run_case *rc = &run_cases[i];
		char msg[ERROR_MSG_MAX] = "", ver[32] = "";
		char *out;
		int r = run(&rc->env, rc->in, &out);

		CHECK_INT(r, 1);
		CHECK_INT(error_code_of(out, msg, sizeof(msg), ver, sizeof(ver)), rc->code);
		CHECK_STR(msg, rc->msg);
		CHECK_STR(ver, rc->version);
		/* exactly one line on stdout */
		CHECK(out && strchr(out, '\n') == out + strlen(out) - 1);
		if (r != 1 || !out || strcmp(msg, rc->msg) != 0)
			fprintf(stderr, "  case %zu: %s\n", i, out ? out : "(null)");
		free(out);
	}
}

TEST(run_status_ok)
{
	struct cni_env env = {.command = "STATUS"};
	char *out;

	/* agent not required: ready even without an agent */
	CHECK_INT(run(&env, CONF("1.1.0", ",\"agentSocket\":\"/nonexistent/aiqos-unit.sock\""), &out), 0);
	CHECK_STR(out, "");
	free(out);
}

TEST(run_del_idempotent_without_state_or_netns)
{
	_cleanup_free_ char *dir = make_tmpdir();
	struct cni_env env = {.command = "DEL",
	                      .container_id = "c0ffee",
	                      .ifname = "eth0",
	                      .args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=p"};
	char conf[1024];
	char *out;

	CHECK(dir != NULL);
	if (!dir)
		return;
	snprintf(conf, sizeof(conf),
	         "{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"type\":\"aiqos\",\"logLevel\":\"error\","
	         "\"stateDir\":\"%s\",\"agentSocket\":\"/nonexistent/aiqos-unit.sock\",\"prevResult\":" PREV_KINDNET_031
	         "}",
	         dir);
	for (int i = 0; i < 2; i++) {
		CHECK_INT(run(&env, conf, &out), 0);
		CHECK_STR(out, "");
		free(out);
	}
	/* a bad CNI_ARGS does not block DEL */
	env.args = "K8S_POD_NAME=Bad Name";
	CHECK_INT(run(&env, conf, &out), 0);
	CHECK_STR(out, "");
	free(out);
	/* the state dir does not even exist */
	snprintf(conf, sizeof(conf), "%s", CONF("0.3.1", ",\"stateDir\":\"/nonexistent/aiqos-unit\""));
	CHECK_INT(run(&env, conf, &out), 0);
	CHECK_STR(out, "");
	free(out);
	rm_rf_flat(dir);
}

static void state_make(struct attach_state *s, const char *cid, const char *ifname, const char *network)
{
	memset(s, 0, sizeof(*s));
	str_copy(s->container_id, sizeof(s->container_id), cid);
	str_copy(s->ifname, sizeof(s->ifname), ifname);
	str_copy(s->netns, sizeof(s->netns), "/var/run/netns/gone");
	str_copy(s->network, sizeof(s->network), network);
	s->workload.class = CLASS_DEFAULT;
	str_copy(s->profile, sizeof(s->profile), "default");
	str_copy(s->annotations_source, sizeof(s->annotations_source), "none");
	str_copy(s->ifs.pod_ifname, sizeof(s->ifs.pod_ifname), ifname);
	s->pod_ifindex = 2;
}

TEST(run_del_removes_state_and_corrupt_state)
{
	_cleanup_free_ char *dir = make_tmpdir();
	_cleanup_attach_state_ struct attach_state *s = calloc(1, sizeof(*s));
	struct cni_env env = {.command = "DEL", .container_id = "c1", .ifname = "eth0"};
	char conf[1024], path[STATE_PATH_MAX];
	struct error err = {0};
	FILE *f;
	char *out;

	CHECK(dir && s);
	if (!dir || !s)
		return;
	snprintf(conf, sizeof(conf),
	         "{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"aiqos\",\"logLevel\":\"error\","
	         "\"stateDir\":\"%s\",\"agentSocket\":\"/nonexistent/aiqos-unit.sock\"}",
	         dir);
	state_make(s, "c1", "eth0", "n");
	CHECK_INT(state_save(dir, s, &err), 0);
	CHECK_INT(state_path(dir, "c1", "eth0", path, sizeof(path)), 0);
	CHECK(file_exists(path));
	CHECK_INT(run(&env, conf, &out), 0);
	CHECK_STR(out, "");
	free(out);
	CHECK(!file_exists(path));

	/* a corrupt record does not block DEL either */
	f = fopen(path, "we");
	CHECK(f != NULL);
	if (f) {
		fputs("{not json", f);
		fclose(f);
	}
	CHECK_INT(run(&env, conf, &out), 0);
	CHECK_STR(out, "");
	free(out);
	CHECK(!file_exists(path));
	rm_rf_flat(dir);
}

TEST(run_check_without_state)
{
	_cleanup_free_ char *dir = make_tmpdir();
	struct cni_env env = {.command = "CHECK", .container_id = "c9", .netns = NS, .ifname = "eth0"};
	char conf[2048], msg[ERROR_MSG_MAX] = "", ver[32] = "";
	char *out;

	CHECK(dir != NULL);
	if (!dir)
		return;
	snprintf(conf, sizeof(conf),
	         "{\"cniVersion\":\"0.4.0\",\"name\":\"n\",\"type\":\"aiqos\",\"logLevel\":\"error\","
	         "\"stateDir\":\"%s\",\"prevResult\":" PREV_KINDNET_031 "}",
	         dir);
	CHECK_INT(run(&env, conf, &out), 1);
	CHECK_INT(error_code_of(out, msg, sizeof(msg), ver, sizeof(ver)), CNI_ERR_STATE);
	CHECK_STR(msg, "no aiqos state for container c9 ifname eth0");
	CHECK_STR(ver, "0.4.0");
	free(out);
	rm_rf_flat(dir);
}

/* Which library call failed decides the code (cni/errors.h): an unreadable
 * record at CHECK and a state directory GC cannot list are state failures
 * (102), the library's message kept. */
TEST(run_state_failures_are_code_102)
{
	_cleanup_free_ char *dir = make_tmpdir();
	struct cni_env check = {.command = "CHECK", .container_id = "c7", .netns = NS, .ifname = "eth0"};
	struct cni_env gc = {.command = "GC"};
	char conf[2048], path[STATE_PATH_MAX], msg[ERROR_MSG_MAX] = "", ver[32] = "";
	char *out;
	FILE *f;

	CHECK(dir != NULL);
	if (!dir)
		return;
	CHECK_INT(state_path(dir, "c7", "eth0", path, sizeof(path)), 0);
	f = fopen(path, "we");
	CHECK(f != NULL);
	if (f) {
		fputs("{not json", f);
		fclose(f);
	}
	snprintf(conf, sizeof(conf),
	         "{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"aiqos\",\"logLevel\":\"error\","
	         "\"stateDir\":\"%s\",\"prevResult\":" PREV_KINDNET_031 "}",
	         dir);
	CHECK_INT(run(&check, conf, &out), 1);
	CHECK_INT(error_code_of(out, msg, sizeof(msg), ver, sizeof(ver)), CNI_ERR_STATE);
	CHECK_CONTAINS(msg, path);
	CHECK_CONTAINS(msg, "JSON");
	free(out);

	/* GC: the state directory is a regular file */
	snprintf(conf, sizeof(conf),
	         "{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"aiqos\",\"logLevel\":\"error\","
	         "\"stateDir\":\"%s\",\"agentSocket\":\"/nonexistent/aiqos-unit.sock\","
	         "\"cni.dev/valid-attachments\":[]}",
	         path);
	CHECK_INT(run(&gc, conf, &out), 1);
	CHECK_INT(error_code_of(out, msg, sizeof(msg), ver, sizeof(ver)), CNI_ERR_STATE);
	CHECK_CONTAINS(msg, path);
	free(out);
	rm_rf_flat(dir);
}

TEST(run_gc)
{
	_cleanup_free_ char *dir = make_tmpdir();
	_cleanup_attach_state_ struct attach_state *s = calloc(1, sizeof(*s));
	struct cni_env env = {.command = "GC"};
	char conf[2048], p_valid[STATE_PATH_MAX], p_stale[STATE_PATH_MAX], p_other[STATE_PATH_MAX],
	        p_stale2[STATE_PATH_MAX];
	struct error err = {0};
	char *out;

	CHECK(dir && s);
	if (!dir || !s)
		return;
	state_make(s, "valid1", "eth0", "kindnet");
	CHECK_INT(state_save(dir, s, &err), 0);
	state_make(s, "valid1", "net1", "kindnet"); /* same container, other ifname: stale */
	CHECK_INT(state_save(dir, s, &err), 0);
	state_make(s, "stale1", "eth0", "kindnet");
	CHECK_INT(state_save(dir, s, &err), 0);
	state_make(s, "other1", "eth0", "othernet"); /* another network's: not ours to collect */
	CHECK_INT(state_save(dir, s, &err), 0);
	state_path(dir, "valid1", "eth0", p_valid, sizeof(p_valid));
	state_path(dir, "valid1", "net1", p_stale2, sizeof(p_stale2));
	state_path(dir, "stale1", "eth0", p_stale, sizeof(p_stale));
	state_path(dir, "other1", "eth0", p_other, sizeof(p_other));

	snprintf(conf, sizeof(conf),
	         "{\"cniVersion\":\"1.1.0\",\"name\":\"kindnet\",\"type\":\"aiqos\",\"logLevel\":\"error\","
	         "\"stateDir\":\"%s\",\"agentSocket\":\"/nonexistent/aiqos-unit.sock\","
	         "\"cni.dev/valid-attachments\":[{\"containerID\":\"valid1\",\"ifname\":\"eth0\"},"
	         "{\"containerID\":\"unknown\",\"ifname\":\"eth0\"}]}",
	         dir);
	CHECK_INT(run(&env, conf, &out), 0);
	CHECK_STR(out, "");
	free(out);
	CHECK(file_exists(p_valid));
	CHECK(!file_exists(p_stale));
	CHECK(!file_exists(p_stale2));
	CHECK(file_exists(p_other));

	/* idempotent */
	CHECK_INT(run(&env, conf, &out), 0);
	CHECK_STR(out, "");
	free(out);
	CHECK(file_exists(p_valid));

	/* null list: nothing of this network is valid any more */
	snprintf(conf, sizeof(conf),
	         "{\"cniVersion\":\"1.1.0\",\"name\":\"kindnet\",\"type\":\"aiqos\",\"logLevel\":\"error\","
	         "\"stateDir\":\"%s\",\"agentSocket\":\"/nonexistent/aiqos-unit.sock\","
	         "\"cni.dev/valid-attachments\":null}",
	         dir);
	CHECK_INT(run(&env, conf, &out), 0);
	free(out);
	CHECK(!file_exists(p_valid));
	CHECK(file_exists(p_other));
	rm_rf_flat(dir);
}

TEST(run_log_file)
{
	_cleanup_free_ char *dir = make_tmpdir();
	struct cni_env env = {.command = "ADD", .container_id = "c1", .netns = NS, .ifname = "eth0"};
	char conf[1024], logp[512], buf[4096] = "";
	char *out;
	FILE *f;

	CHECK(dir != NULL);
	if (!dir)
		return;
	snprintf(logp, sizeof(logp), "%s/aiqos.log", dir);
	/* an error after the config is parsed is logged to logFile */
	snprintf(
	        conf, sizeof(conf),
	        "{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"type\":\"aiqos\",\"logFile\":\"%s\",\"logLevel\":\"info\"}",
	        logp);
	CHECK_INT(run(&env, conf, &out), 1);
	CHECK_CONTAINS(out, "prevResult missing");
	free(out);
	f = fopen(logp, "re");
	CHECK(f != NULL);
	if (f) {
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		buf[n] = '\0';
		fclose(f);
	}
	CHECK_CONTAINS(buf, "prevResult missing");
	CHECK_CONTAINS(buf, "container=c1");
	rm_rf_flat(dir);
}

TEST(run_log_file_unopenable_falls_back)
{
	struct cni_env env = {.command = "STATUS"};
	char *out;

	/* logFile in a directory that does not exist: stderr, and the request still works */
	CHECK_INT(run(&env,
	              "{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"aiqos\","
	              "\"logFile\":\"/nonexistent/aiqos-unit/aiqos.log\"}",
	              &out),
	          0);
	CHECK_STR(out, "");
	free(out);
}
