/* explain.c — `aiqosctl explain NAMESPACE/POD`: the running agent's account
 * of why a pod is tuned the way it is, for people or as JSON. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <time.h>

#include "ctl/ctl.h"
#include "proto.h"

static const char usage_explain[] = "Usage: aiqosctl [--socket PATH] explain [-o text|json|yaml] NAMESPACE/POD\n"
                                    "\n"
                                    "Ask the running agent why a pod is tuned the way it is: class and profile and\n"
                                    "where they come from, the pod's plan, what is in effect, what fell back and\n"
                                    "why, and its share of the node's uplink. POD alone means namespace default.\n"
                                    "\n"
                                    "  -o, --output F  text (default), json or yaml (the agent's document);\n"
                                    "                  --json = -o json\n"
                                    "  -h, --help      this help\n";

/* ---- explain ---- */

static int explain_print(const cJSON *e)
{
	const cJSON *att, *plan = jobj(e, "plan"), *ips = jarr(e, "ips"), *s;
	const char *uid = jstr(e, "uid");
	bool first = true;

	printf("pod %s/%s%s%s%s\n", jstr_or(e, "namespace", "?"), jstr_or(e, "name", "?"), uid ? " (uid " : "",
	       uid ? uid : "", uid ? ")" : "");
	printf("class: %s  profile: %s  status: %s  source: %s\n", jstr_or(e, "class", "-"), jstr_or(e, "profile", "-"),
	       jstr_or(e, "status", "-"), jstr_or(e, "source", "-"));
	printf("ips:");
	json_for_each(s, ips)
	{
		if (cJSON_IsString(s)) {
			printf("%s %s", first ? "" : ",", s->valuestring);
			first = false;
		}
	}
	printf("%s\n", first ? " -" : "");
	if (jarr(e, "why")) {
		printf("\nwhy:\n");
		json_for_each(s, jarr(e, "why"))
		{
			if (cJSON_IsString(s))
				printf("  - %s\n", s->valuestring);
		}
	}
	printf("\nattachments:");
	if (!jarr(e, "attachments") || cJSON_GetArraySize(jarr(e, "attachments")) == 0)
		printf(" none (the plugin has not tuned this pod on this node)");
	printf("\n");
	json_for_each(att, jarr(e, "attachments"))
	{
		const char *failure = jstr(att, "failure");

		printf("  %s (host %s, container %.12s)\n", jstr_or(att, "ifname", "?"),
		       jstr_or(att, "hostIfname", "-"), jstr_or(att, "containerId", "-"));
		print_effective_degraded(att, "    ");
		if (failure)
			printf("    failure: %s\n", failure);
	}
	if (plan && jstr(plan, "text")) {
		printf("\nplan:\n");
		print_indented(jstr(plan, "text"), "  ");
	}
	if (jarr(e, "uplinkItems")) {
		printf("\nuplink items:");
		if (cJSON_GetArraySize(jarr(e, "uplinkItems")) == 0)
			printf(" none");
		printf("\n");
		print_strings(jarr(e, "uplinkItems"), "  ");
	}
	if (jarr(e, "downloadItems") && cJSON_GetArraySize(jarr(e, "downloadItems")) > 0) {
		printf("\ndownload items:\n");
		print_strings(jarr(e, "downloadItems"), "  ");
	}
	return EXIT_OK;
}

int cmd_explain(int argc, char **argv, const char *sock)
{
	struct ctl_cmd cmd = {.name = "explain", .usage = usage_explain};
	struct proto_request r = {.op = PROTO_OP_EXPLAIN};
	_cleanup_json_ cJSON *resp = NULL;
	const char *arg, *slash;
	int q;

	q = ctl_parse_common(&cmd, argc, argv);
	if (q >= 0)
		return q;
	if (optind >= argc)
		return usage_error(usage_explain, "explain: which pod? (NAMESPACE/POD)");
	q = ctl_args_max(&cmd, argc, argv, 1);
	if (q != EXIT_OK)
		return q;
	arg = argv[optind];
	slash = strchr(arg, '/');
	if (slash) {
		if (slash == arg || !slash[1] || strchr(slash + 1, '/') ||
		    (size_t)(slash - arg) >= sizeof(r.namespace_))
			return usage_error(usage_explain, "explain: '%s' is not NAMESPACE/POD", arg);
		memcpy(r.namespace_, arg, (size_t)(slash - arg));
		r.namespace_[slash - arg] = '\0';
		arg = slash + 1;
	} else {
		str_copy(r.namespace_, sizeof(r.namespace_), "default");
	}
	if (str_copy(r.name, sizeof(r.name), arg) < 0)
		return usage_error(usage_explain, "explain: pod name '%.64s...' is too long", arg);
	q = agent_call(sock, &r, &resp);
	if (q != EXIT_OK)
		return q;
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "found")))
		return fail("pod %s/%s is not known to the agent (not on this node, or not seen yet)", r.namespace_,
		            r.name);
	cJSON_DeleteItemFromObjectCaseSensitive(resp, "found");
	return ctl_output(&cmd, resp, explain_print);
}
