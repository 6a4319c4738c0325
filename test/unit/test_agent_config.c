/* test_agent_config.c — the agent config file: every key, every invalid
 * value with its exact message, rates in tc units, absent file = defaults,
 * unreadable/empty/non-object files are errors, failed loads leave the
 * previous config untouched. */
#include <cjson/cJSON.h>
#include <sys/stat.h>

#include "../../agent/config.h"
#include "t.h"

static const char *put(const char *name, const char *content, size_t len)
{
	static char path[512];
	FILE *f;

	t_tmppath(path, sizeof(path), name);
	if (content) {
		f = fopen(path, "we");
		if (!f) {
			perror(path);
			exit(1);
		}
		fwrite(content, 1, len, f);
		fclose(f);
	}
	return path;
}

static const char *put_str(const char *name, const char *content)
{
	return put(name, content, strlen(content));
}

TEST(defaults_when_absent)
{
	struct agent_config c;
	struct node_config n;
	struct error e = {0};

	memset(&c, 0x5a, sizeof(c));
	CHECK_INT(agent_config_load(put("absent.json", NULL, 0), &c, &e), 0);
	CHECK_STR(e.msg, "");
	CHECK(!c.from_file);
	node_config_defaults(&n);
	CHECK_STR(c.node.uplink, "auto");
	CHECK_INT(c.node.uplink_rate_bps, 0);
	CHECK(c.node.inference_share == n.inference_share);
	CHECK(c.node.training_floor == 0.05);
	CHECK_INT(c.node.downlink_rate_bps, 0);
	CHECK(c.node.downlink);
	CHECK_INT(c.node.mixed_hold_s, n.mixed_hold_s);
	CHECK_INT(c.node.debounce_ms, n.debounce_ms);
	CHECK_INT(c.node.classify, CLASSIFY_SRC_IP);
	CHECK_INT(c.drift_repair_s, 60);
	CHECK(profile_find(&c.profiles, "inference") != NULL);
	CHECK(agent_config_profiles_json(&c) == NULL);
	agent_config_done(&c);
}

TEST(all_keys)
{
	static const char text[] = "{\n"
	                           "  \"uplink\": \"bond0.100\",\n"
	                           "  \"uplinkRate\": \"500mbit\",\n"
	                           "  \"inferenceShare\": 0.25,\n"
	                           "  \"trainingFloor\": 0.2,\n"
	                           "  \"bulkThreshold\": 2097152,\n"
	                           "  \"bulkIdleMs\": 50,\n"
	                           "  \"bulkWeight\": 2.5,\n"
	                           "  \"downlinkRate\": \"1gbit\",\n"
	                           "  \"downlink\": false,\n"
	                           "  \"mixedHoldSeconds\": 120,\n"
	                           "  \"debounceMs\": 50,\n"
	                           "  \"classify\": \"dscp\",\n"
	                           "  \"driftRepairSeconds\": 0,\n"
	                           "  \"uplinkOverhead\": 38,\n"
	                           "  \"profiles\": {\n"
	                           "    \"inference-strict\": {\"targetUs\": 400, \"dscp\": 34},\n"
	                           "    \"inference\": {\"dscp\": 34},\n"
	                           "    \"batch\": {\"class\": \"training\", \"queueMs\": 50}\n"
	                           "  }\n"
	                           "}\n";
	struct agent_config c;
	struct error e = {0};
	const struct profile *p;

	CHECK_INT(agent_config_load(put_str("all.json", text), &c, &e), 0);
	CHECK_STR(e.msg, "");
	CHECK(c.from_file);
	CHECK_STR(c.node.uplink, "bond0.100");
	CHECK_INT(c.node.uplink_rate_bps, 500000000);
	CHECK(c.node.inference_share == 0.25);
	CHECK(c.node.training_floor == 0.2);
	CHECK_INT(c.node.bulk_threshold_bytes, 2097152);
	CHECK_INT(c.node.bulk_idle_ms, 50);
	CHECK(c.node.bulk_weight == 2.5);
	CHECK_INT(c.node.downlink_rate_bps, 1000000000);
	CHECK(!c.node.downlink);
	CHECK_INT(c.node.mixed_hold_s, 120);
	CHECK_INT(c.node.debounce_ms, 50);
	CHECK_INT(c.node.classify, CLASSIFY_DSCP);
	CHECK_INT(c.drift_repair_s, 0);
	CHECK_INT(c.node.overhead_bytes, 38);
	/* the uplink DSCP classifier follows the profiles */
	CHECK_INT(c.node.dscp_inference, 34);
	CHECK_INT(c.node.dscp_training, 10);
	p = profile_find(&c.profiles, "inference-strict");
	CHECK(p && p->target_us == 400);
	p = profile_find(&c.profiles, "batch");
	CHECK(p && p->class == CLASS_TRAINING && p->queue_ms == 50);
	CHECK(agent_config_profiles_json(&c) != NULL);
	CHECK(cJSON_GetObjectItem(agent_config_profiles_json(&c), "batch") != NULL);
	agent_config_done(&c);
}

TEST(null_means_default_and_empty_rate)
{
	struct agent_config c;
	struct error e = {0};
	const char *text = "{\"uplink\": null, \"uplinkRate\": \"\", \"debounceMs\": null, \"profiles\": null}";

	CHECK_INT(agent_config_parse(text, strlen(text), "t", &c, &e), 0);
	CHECK_STR(c.node.uplink, "auto");
	CHECK_INT(c.node.uplink_rate_bps, 0);
	CHECK_INT(c.node.debounce_ms, NODE_DEBOUNCE_MS_DEFAULT);
	CHECK(agent_config_profiles_json(&c) == NULL);
	agent_config_done(&c);
}

TEST(unmarked_profile_without_dscp_classify)
{
	/* a profile that marks no DSCP is fine when classifying by source IP;
	 * the uplink keeps the default DSCP for that class */
	const char *text = "{\"classify\": \"src-ip\", \"profiles\": {\"inference\": {\"dscp\": -1}}}";
	struct agent_config c;
	struct error e = {0};

	CHECK_INT(agent_config_parse(text, strlen(text), "t", &c, &e), 0);
	CHECK_STR(e.msg, "");
	CHECK_INT(profile_find(&c.profiles, "inference")->dscp, -1);
	CHECK_INT(c.node.dscp_inference, NODE_DSCP_INFERENCE_DEFAULT);
	agent_config_done(&c);
}

TEST(rates)
{
	static const struct {
		const char *s;
		int ret;
		uint64_t bps;
		const char *msg;
	} cases[] = {
	        {"500mbit", 0, 500000000ULL, ""},
	        {"10gbit", 0, 10000000000ULL, ""},
	        {"1000000bit", 0, 1000000ULL, ""},
	        {"1000000", 0, 1000000ULL, ""},
	        {"100mbps", 0, 800000000ULL, ""}, /* bytes per second, as tc */
	        {"1Gbit", 0, 1000000000ULL, ""},
	        {"1GBIT", 0, 1000000000ULL, ""},
	        {"1.5gbit", 0, 1500000000ULL, ""},
	        {"1.5kbit", 0, 1500ULL, ""},
	        {"0.5kbit", -ERANGE, 0, "\"0.5kbit\" is out of range [1kbit, 1tbit]"},
	        {"1kbit", 0, 1000ULL, ""},
	        {"1tbit", 0, 1000000000000ULL, ""},
	        {"1kibit", 0, 1024ULL, ""},
	        {"2mibps", 0, 16777216ULL, ""},
	        {"125kbps", 0, 1000000ULL, ""},
	        {"1000bps", 0, 8000ULL, ""},
	        {"007mbit", 0, 7000000ULL, ""},
	        {"1.000gbit", 0, 1000000000ULL, ""},
	        {"500mbits", -EINVAL, 0,
	         "\"500mbits\": unknown unit \"mbits\" (bit, kbit, mbit, gbit, tbit, bps, kbps, mbps, gbps, tbps, "
	         "kibit..tibit, kibps..tibps)"},
	        {"5 mbit", -EINVAL, 0,
	         "\"5 mbit\": unknown unit \" mbit\" (bit, kbit, mbit, gbit, tbit, bps, kbps, mbps, gbps, tbps, "
	         "kibit..tibit, kibps..tibps)"},
	        {"5e3bit", -EINVAL, 0,
	         "\"5e3bit\": unknown unit \"e3bit\" (bit, kbit, mbit, gbit, tbit, bps, kbps, mbps, gbps, tbps, "
	         "kibit..tibit, kibps..tibps)"},
	        {"mbit", -EINVAL, 0,
	         "\"mbit\" is not a rate (a number and a unit: bit, kbit, mbit, gbit, tbit, bps, kbps, mbps, gbps, "
	         "tbps, "
	         "kibit..tibit, kibps..tibps; a bare integer is bit/s)"},
	        {"-5mbit", -EINVAL, 0,
	         "\"-5mbit\" is not a rate (a number and a unit: bit, kbit, mbit, gbit, tbit, bps, kbps, mbps, gbps, "
	         "tbps, "
	         "kibit..tibit, kibps..tibps; a bare integer is bit/s)"},
	        {"1500.5", -EINVAL, 0, "\"1500.5\": a number without a unit must be an integer (bit/s)"},
	        {"1.0001kbit", -EINVAL, 0, "\"1.0001kbit\" is not a whole number of bit/s"},
	        {"999bit", -ERANGE, 0, "\"999bit\" is out of range [1kbit, 1tbit]"},
	        {"0", -ERANGE, 0, "\"0\" is out of range [1kbit, 1tbit]"},
	        {"2tbit", -ERANGE, 0, "\"2tbit\" is out of range [1kbit, 1tbit]"},
	        {"1tbps", -ERANGE, 0, "\"1tbps\" is out of range [1kbit, 1tbit]"},
	        {"999999999999999999999999999gbit", -ERANGE, 0,
	         "\"999999999999999999999999999gbit\" is out of range [1kbit, 1tbit]"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		uint64_t bps = 42;
		struct error e = {0};
		int r = agent_rate_parse_bps(cases[i].s, &bps, &e);
		CHECK_INT(r, cases[i].ret);
		CHECK_STR(e.msg, cases[i].msg);
		CHECK_INT(bps, r == 0 ? cases[i].bps : 42);
	}
}

/* Every invalid value: the exact message, and the target config untouched. */
TEST(invalid_values)
{
	static const struct {
		const char *json;
		const char *msg; /* after "config /etc/aiqos/config.json: " */
	} cases[] = {
	        {"{\"inferenceShare\": 1.5}", "inferenceShare: 1.5 is out of range (0, 1)"},
	        {"{\"inferenceShare\": 0}", "inferenceShare: 0 is out of range (0, 1)"},
	        {"{\"inferenceShare\": 1}", "inferenceShare: 1 is out of range (0, 1)"},
	        {"{\"inferenceShare\": -0.1}", "inferenceShare: -0.1 is out of range (0, 1)"},
	        {"{\"inferenceShare\": \"0.5\"}",
	         "inferenceShare: expected a number between 0 and 1, got a string (\"0.5\")"},
	        {"{\"mixedHoldSeconds\": 86401}", "mixedHoldSeconds: 86401 is out of range [0, 86400]"},
	        {"{\"mixedHoldSeconds\": -1}", "mixedHoldSeconds: -1 is out of range [0, 86400]"},
	        {"{\"mixedHoldSeconds\": 1.5}", "mixedHoldSeconds: 1.5 is not an integer"},
	        {"{\"mixedHoldSeconds\": 1e300}", "mixedHoldSeconds: 1e+300 is out of range [0, 86400]"},
	        {"{\"mixedHoldSeconds\": \"30\"}", "mixedHoldSeconds: expected an integer, got a string (\"30\")"},
	        {"{\"mixedHoldSeconds\": true}", "mixedHoldSeconds: expected an integer, got true"},
	        {"{\"debounceMs\": 60001}", "debounceMs: 60001 is out of range [0, 60000]"},
	        {"{\"debounceMs\": [100]}", "debounceMs: expected an integer, got an array"},
	        {"{\"driftRepairSeconds\": 86401}", "driftRepairSeconds: 86401 is out of range [0, 86400]"},
	        {"{\"driftRepairSeconds\": 0.25}", "driftRepairSeconds: 0.25 is not an integer"},
	        {"{\"uplink\": \"eth 0\"}",
	         "uplink: \"eth 0\" is not an interface name (1-15 bytes, no '/', ':' or whitespace) or \"auto\""},
	        {"{\"uplink\": \"averyveryverylong\"}", "uplink: \"averyveryverylong\" is not an interface name (1-15 "
	                                                "bytes, no '/', ':' or whitespace) or \"auto\""},
	        {"{\"uplink\": \"\"}",
	         "uplink: \"\" is not an interface name (1-15 bytes, no '/', ':' or whitespace) or \"auto\""},
	        {"{\"uplink\": \"..\"}",
	         "uplink: \"..\" is not an interface name (1-15 bytes, no '/', ':' or whitespace) or \"auto\""},
	        {"{\"uplink\": \"eth0/x\"}",
	         "uplink: \"eth0/x\" is not an interface name (1-15 bytes, no '/', ':' or whitespace) or \"auto\""},
	        {"{\"uplink\": 5}", "uplink: expected an interface name or \"auto\", got a number (5)"},
	        {"{\"uplinkRate\": \"fast\"}", "uplinkRate: \"fast\" is not a rate (a number and a unit: bit, kbit, "
	                                       "mbit, gbit, tbit, bps, kbps, mbps, "
	                                       "gbps, tbps, kibit..tibit, kibps..tibps; a bare integer is bit/s)"},
	        {"{\"uplinkRate\": \"500mbits\"}", "uplinkRate: \"500mbits\": unknown unit \"mbits\" (bit, kbit, mbit, "
	                                           "gbit, tbit, bps, kbps, mbps, gbps, "
	                                           "tbps, kibit..tibit, kibps..tibps)"},
	        {"{\"uplinkRate\": 5}", "uplinkRate: 5 is out of range [1kbit, 1tbit]"},
	        {"{\"uplinkRate\": 1000.5}", "uplinkRate: 1000.5 is not a whole number of bit/s"},
	        {"{\"uplinkRate\": {}}", "uplinkRate: expected a rate like \"500mbit\", got an object"},
	        {"{\"uplinkOverhead\": 257}", "uplinkOverhead: 257 is out of range [0, 256]"},
	        {"{\"uplinkOverhead\": -1}", "uplinkOverhead: -1 is out of range [0, 256]"},
	        {"{\"classify\": \"foo\"}", "classify: \"foo\" is not one of \"src-ip\", \"dscp\""},
	        {"{\"classify\": \"SRC-IP\"}", "classify: \"SRC-IP\" is not one of \"src-ip\", \"dscp\""},
	        {"{\"classify\": 1}", "classify: expected \"src-ip\" or \"dscp\", got a number (1)"},
	        {"{\"profiles\": []}", "profiles: expected an object of named profiles, got an array"},
	        {"{\"profiles\": {\"inference\": {\"targetUs\": \"fast\"}}}",
	         "profiles.inference.targetUs: expected an integer, got a string"},
	        {"{\"profiles\": {\"gold\": {\"targetUs\": 100}}}",
	         "profiles.gold: a new profile needs \"class\" (inference, training or default)"},
	        {"{\"classify\": \"dscp\", \"profiles\": {\"inference\": {\"dscp\": 10}}}",
	         "classify dscp: inference and training use the same DSCP 10"},
	        {"{\"classify\": \"dscp\", \"profiles\": {\"inference\": {\"dscp\": -1}}}",
	         "classify: \"dscp\" needs the inference and training profiles to set dscp"},
	        /* every profile of a class marks the DSCP the uplink matches for it */
	        {"{\"classify\": \"dscp\", \"profiles\": {\"inference\": {\"dscp\": 34}}}",
	         "profiles.inference-strict.dscp = 46: with classify \"dscp\" every inference profile must mark 34 "
	         "(profiles.inference.dscp)"},
	        {"{\"classify\": \"dscp\", \"profiles\": {\"gold\": {\"class\": \"default\", \"dscp\": 10}}}",
	         "profiles.gold.dscp = 10: with classify \"dscp\" that is the uplink's training DSCP"},
	        {"{\"uplinkRat\": \"1gbit\"}",
	         "unknown key \"uplinkRat\": did you mean \"uplinkRate\"? (accepted: uplink, uplinkRate, downlinkRate, "
	         "downlink, downlinkRttUs, trainingRcvWindow, inferenceShare, trainingFloor, bulkThreshold, "
	         "bulkIdleMs, bulkWeight, "
	         "mixedHoldSeconds, debounceMs, classify, driftRepairSeconds, profiles, "
	         "uplinkOverhead)"},
	        {"{\"uplinkrate\": \"1gbit\"}",
	         "unknown key \"uplinkrate\": did you mean \"uplinkRate\"? (accepted: uplink, uplinkRate, "
	         "downlinkRate, downlink, downlinkRttUs, trainingRcvWindow, "
	         "inferenceShare, trainingFloor, bulkThreshold, bulkIdleMs, bulkWeight, "
	         "mixedHoldSeconds, debounceMs, "
	         "classify, driftRepairSeconds, profiles, uplinkOverhead)"},
	        {"{\"\": 1}",
	         "unknown key \"\" (accepted: uplink, uplinkRate, downlinkRate, downlink, downlinkRttUs, "
	         "trainingRcvWindow, inferenceShare, "
	         "trainingFloor, bulkThreshold, bulkIdleMs, bulkWeight, mixedHoldSeconds, debounceMs, classify, "
	         "driftRepairSeconds, profiles, uplinkOverhead)"},
	        {"{\"trainingRcvWindow\": 1000}", "trainingRcvWindow: 1000 is out of range [32768, 2147483647]"},
	        {"{\"trainingRcvWindow\": \"small\"}",
	         "trainingRcvWindow: expected \"auto\", \"off\" or a number of bytes, got a string (\"small\")"},
	        {"{\"downlinkRttUs\": 2000000}", "downlinkRttUs: 2e+06 is out of range [0, 1000000]"},
	        {"{\"bulkThreshold\": 1000}", "bulkThreshold: 1000 is out of range [65536, 1073741824]"},
	        {"{\"bulkThreshold\": \"big\"}",
	         "bulkThreshold: expected a number of bytes or \"off\", got a string (\"big\")"},
	        {"{\"bulkIdleMs\": 0}", "bulkIdleMs: 0 is out of range [1, 1000]"},
	        {"{\"bulkIdleMs\": 5000}", "bulkIdleMs: 5000 is out of range [1, 1000]"},
	        {"{\"bulkWeight\": 20}", "bulkWeight: 20 is out of range [0.1, 10]"},
	        {"{\"trainingFloor\": 1.5}", "trainingFloor: 1.5 is out of range [0, 1]"},
	        {"{\"trainingFloor\": -0.1}", "trainingFloor: -0.1 is out of range [0, 1]"},
	        {"{\"trainingFloor\": \"0.2\"}",
	         "trainingFloor: expected a number between 0 and 1, got a string (\"0.2\")"},
	        {"{\"downlinkRate\": \"fast\"}",
	         "downlinkRate: \"fast\" is not a rate (a number and a unit: bit, kbit, mbit, gbit, tbit, bps, kbps, "
	         "mbps, gbps, tbps, kibit..tibit, kibps..tibps; a bare integer is bit/s)"},
	        {"{\"downlinkRate\": 12.5}", "downlinkRate: 12.5 is out of range [1kbit, 1tbit]"},
	        {"{\"downlink\": 1}", "downlink: expected true or false, got a number (1)"},
	        {"{\"debounceMs\": 10, \"debounceMs\": 20}", "duplicate key \"debounceMs\""},
	        /* the first error in file order wins */
	        {"{\"debounceMs\": -5, \"bogus\": 1}", "debounceMs: -5 is out of range [0, 60000]"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct agent_config c;
		struct error e = {0};
		char want[1024];

		memset(&c, 0x5a, sizeof(c));
		CHECK(agent_config_parse(cases[i].json, strlen(cases[i].json), "/etc/aiqos/config.json", &c, &e) < 0);
		snprintf(want, sizeof(want), "config /etc/aiqos/config.json: %s", cases[i].msg);
		CHECK_STR(e.msg, want);
		CHECK(e.errnum > 0); /* a CNI code is the plugin's to assign (cni/), not the agent's */
		CHECK_INT((unsigned char)c.node.uplink[0], 0x5a);
	}
}

TEST(file_errors)
{
	static const struct {
		const char *name;
		const char *content;
		size_t len;
		int ret;
		const char *msg; /* after "config <path>: " */
	} cases[] = {
	        {"empty.json", "", 0, -EINVAL, "empty file (expected a JSON object, e.g. {})"},
	        {"blank.json", " \n\t\n", 4, -EINVAL, "empty file (expected a JSON object, e.g. {})"},
	        {"array.json", "[]", 2, -EINVAL, "expected a JSON object, got an array"},
	        {"null.json", "null\n", 5, -EINVAL, "expected a JSON object, got null"},
	        {"string.json", "\"x\"", 3, -EINVAL, "expected a JSON object, got a string (\"x\")"},
	        {"broken.json", "{\n  \"debounceMs\": 10,\n  \"uplink\": eth0\n}\n", 39, -EINVAL,
	         "invalid JSON at line 3, column 13"},
	        {"trailing.json", "{}\n{}\n", 6, -EINVAL, "trailing data after the JSON object at line 2, column 1"},
	        {"nul.json", "{\"uplink\":\"a\0\"}", 15, -EINVAL, "NUL byte at offset 12"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct agent_config c;
		struct error e = {0};
		char want[1024];
		const char *path = put(cases[i].name, cases[i].content, cases[i].len);

		CHECK_INT(agent_config_load(path, &c, &e), cases[i].ret);
		snprintf(want, sizeof(want), "config %s: %s", path, cases[i].msg);
		CHECK_STR(e.msg, want);
	}
}

TEST(unreadable)
{
	struct agent_config c;
	struct error e = {0};
	char path[600], want[700];
	FILE *f;

	/* a directory */
	snprintf(path, sizeof(path), "%s", put("dir.json", NULL, 0));
	CHECK_INT(mkdir(path, 0700), 0);
	CHECK_INT(agent_config_load(path, &c, &e), -EINVAL);
	snprintf(want, sizeof(want), "config %s: not a regular file", path);
	CHECK_STR(e.msg, want);

	/* a FIFO: refused without blocking */
	snprintf(path, sizeof(path), "%s", put("fifo.json", NULL, 0));
	CHECK_INT(mkfifo(path, 0600), 0);
	CHECK_INT(agent_config_load(path, &c, &e), -EINVAL);
	snprintf(want, sizeof(want), "config %s: not a regular file", path);
	CHECK_STR(e.msg, want);

	/* a path through a regular file: ENOTDIR is not "absent" */
	snprintf(path, sizeof(path), "%s/config.json", put_str("plain", "{}"));
	CHECK_INT(agent_config_load(path, &c, &e), -ENOTDIR);
	snprintf(want, sizeof(want), "config %s: Not a directory", path);
	CHECK_STR(e.msg, want);

	/* permissions (only meaningful without CAP_DAC_OVERRIDE) */
	if (geteuid() != 0) {
		snprintf(path, sizeof(path), "%s", put_str("secret.json", "{}"));
		CHECK_INT(chmod(path, 0), 0);
		CHECK_INT(agent_config_load(path, &c, &e), -EACCES);
		snprintf(want, sizeof(want), "config %s: Permission denied", path);
		CHECK_STR(e.msg, want);
	}

	/* too large */
	snprintf(path, sizeof(path), "%s", put("big.json", NULL, 0));
	f = fopen(path, "we");
	fputs("{\"uplink\": \"eth0\"", f);
	for (int i = 0; i < AGENT_CONFIG_MAX_BYTES / 8; i++)
		fputs("        ", f);
	fputs("}", f);
	fclose(f);
	CHECK_INT(agent_config_load(path, &c, &e), -EFBIG);
	snprintf(want, sizeof(want), "config %s: larger than 1048576 bytes", path);
	CHECK_STR(e.msg, want);
}

TEST(failed_reload_keeps_previous)
{
	struct agent_config c;
	struct error e = {0};
	const char *good = "{\"debounceMs\": 77, \"profiles\": {\"inference\": {\"targetUs\": 700}}}";
	const char *bad = "{\"debounceMs\": 77, \"profiles\": {\"inference\": {\"targetUs\": 700}}, \"x\": 1}";

	CHECK_INT(agent_config_parse(good, strlen(good), "a", &c, &e), 0);
	CHECK_INT(agent_config_parse(bad, strlen(bad), "b", &c, &e), -EINVAL);
	CHECK_INT(c.node.debounce_ms, 77);
	CHECK(profile_find(&c.profiles, "inference")->target_us == 700);
	CHECK(agent_config_profiles_json(&c) != NULL);
	agent_config_done(&c);
}
