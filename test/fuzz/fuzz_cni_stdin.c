/* fuzz_cni_stdin.c — the plugin's stdin as the runtime hands it over: the
 * network config with runtimeConfig (pod annotations, bandwidth), prevResult
 * of any spec version and cni.dev/valid-attachments, parsed and validated by
 * the same functions ADD/DEL/CHECK/GC use; then whole runs of cni_run() for
 * every verb with an environment that ends each one before any side effect
 * (no CNI_CONTAINERID; GC and STATUS only where they cannot reach out).
 * Properties: no crash or leak; stdout is one valid JSON result or error
 * (or nothing, for a successful DEL/CHECK/GC/STATUS). */
#include <fcntl.h>

#include "../../cni/cni.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* The plugin logs to stderr; libFuzzer keeps its own output (and the
	 * sanitizers' reports) when started with -close_fd_mask=2. */
	return 0;
}

/* stdout of one cni_run() must be a JSON object: a result or an error. */
static void check_output(const char *verb, const char *out, size_t len, int rc)
{
	_cleanup_json_ cJSON *j = NULL;
	const cJSON *code;

	/* DEL, CHECK, GC and STATUS print nothing on success (CNI spec) */
	if (rc == 0 && !streq(verb, "ADD") && !streq(verb, "VERSION")) {
		FUZZ_ASSERT(len == 0, "%s: output on success: %.200s", verb, out);
		return;
	}
	FUZZ_ASSERT(len > 0 && out[len - 1] == '\n', "%s: stdout not one terminated line (%zu bytes)", verb, len);
	j = cJSON_ParseWithLengthOpts(out, len + 1, NULL, 1);
	FUZZ_ASSERT(cJSON_IsObject(j), "%s: stdout is not a JSON object: %.200s", verb, out);
	FUZZ_ASSERT(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "cniVersion")), "%s: no cniVersion: %.200s",
	            verb, out);
	code = cJSON_GetObjectItemCaseSensitive(j, "code");
	if (rc != 0) {
		FUZZ_ASSERT(cJSON_IsNumber(code) && code->valueint > 0, "%s: exit %d without an error code: %.200s",
		            verb, rc, out);
		FUZZ_ASSERT(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "msg")), "%s: error without msg", verb);
	} else {
		FUZZ_ASSERT(!code, "%s: exit 0 with an error result: %.200s", verb, out);
	}
}

static void run_verb(const char *verb, const uint8_t *data, size_t size)
{
	/* No CNI_CONTAINERID: ADD/DEL/CHECK stop at the environment check,
	 * which comes after the config is parsed and validated. */
	const struct cni_env env = {.command = verb, .ifname = "eth0", .netns = "/nonexistent/aiqos-fuzz"};
	_cleanup_free_ char *out = NULL;
	size_t out_len = 0;
	FILE *in, *outf;
	int rc;

	in = size ? fmemopen((void *)(uintptr_t)data, size, "r") : fopen("/dev/null", "re");
	if (!in)
		return;
	outf = open_memstream(&out, &out_len);
	if (!outf) {
		fclose(in);
		return;
	}
	rc = cni_run(&env, in, outf);
	fclose(in);
	fclose(outf);
	check_output(verb, out, out_len, rc);
}

/* The result ADD prints: prevResult with cniVersion replaced. */
static void check_result_print(const struct cni_conf *c)
{
	_cleanup_free_ char *out = NULL;
	_cleanup_json_ cJSON *j = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	int r;

	if (!f)
		return;
	r = cni_result_print(f, c->prev_result, c->cni_version, NULL);
	fclose(f);
	if (r < 0)
		return;
	j = cJSON_ParseWithLengthOpts(out, len + 1, NULL, 1);
	FUZZ_ASSERT(cJSON_IsObject(j), "result is not a JSON object: %.200s", out);
}

static void parse_paths(const uint8_t *data, size_t size)
{
	struct cni_conf c;
	struct error err = {0};
	int r;

	r = cni_conf_parse((const char *)data, size, &c, &err);
	if (r < 0) {
		FUZZ_ASSERT(err.msg[0] && err.code > 0, "parse failed (%d) without a message or code", r);
		cni_conf_free(&c);
		return;
	}
	FUZZ_ASSERT(c.version >= 0 && c.version < _CNI_V_MAX, "version %d", c.version);
	for (int cmd = 0; cmd < _CNI_CMD_MAX; cmd++)
		(void)cni_version_check_command(c.version, (enum cni_command)cmd, NULL);

	/* What ADD does with the request before touching anything. */
	struct workload w;
	error_clear(&err);
	if (c.runtime_annotations) {
		r = workload_from_annotations(c.runtime_annotations, &w, &err);
		FUZZ_ASSERT(r == 0, "annotations object refused: %s", err.msg);
	} else {
		r = workload_from_annotations(NULL, &w, &err);
		FUZZ_ASSERT(r == 0, "no annotations refused: %s", err.msg);
	}
	if (c.runtime_bandwidth)
		(void)workload_apply_runtime_bandwidth(c.runtime_bandwidth, &w, NULL);
	char warn[256];
	const struct profile *p = profile_resolve(&c.profiles, &w, warn, sizeof(warn));
	FUZZ_ASSERT(p != NULL, "no profile");

	if (c.prev_result) {
		for (unsigned i = 0; i < c.prev.n_ifaces; i++)
			(void)cni_prev_has_host_iface(&c.prev, c.prev.ifaces[i].name);
		(void)cni_prev_count_host_ifaces(&c.prev);
		check_result_print(&c);
	}
	cni_conf_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const verbs[] = {"ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION"};
	struct cni_conf c;

	if (size > CNI_STDIN_MAX + 1)
		return 0;
	parse_paths(data, size);

	/* CNI_ARGS from the same bytes (the runtime's other input). */
	{
		_cleanup_free_ char *s = fuzz_strndup(data, size);
		struct cni_args a;
		if (s)
			(void)cni_args_parse(s, &a, NULL);
	}

	/* Whole runs. A config that parses could name a logFile (opened for
	 * append), a state dir GC would collect, or an agent socket STATUS
	 * would call: outside this process. So with a valid config only VERSION
	 * and the verbs that stop at the environment check run, and nothing
	 * when it names a logFile; every invalid config runs every verb (it
	 * must fail before any of that, with a JSON error on stdout). */
	bool valid = cni_conf_parse((const char *)data, size, &c, NULL) == 0;
	bool log_file = valid && c.log_file[0];
	bool agent = valid && c.agent_required;
	cni_conf_free(&c);
	if (log_file)
		return 0;
	for (size_t i = 0; i < ARRAY_SIZE(verbs); i++) {
		if (valid && (streq(verbs[i], "GC") || (streq(verbs[i], "STATUS") && agent)))
			continue;
		run_verb(verbs[i], data, size);
	}
	return 0;
}
