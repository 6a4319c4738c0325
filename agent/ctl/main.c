/* main.c — aiqosctl, the command line of aiqos: `status` and `explain` ask
 * the running agent over its socket (proto.h) and print its answer for
 * people or as JSON; `plan` is a dry run of the planners (per pod and node
 * uplink) over a pods file, without the agent and without touching the
 * kernel; `doctor` is the node's preflight. One file per command (ctl.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "ctl/ctl.h"
#include "proto.h"
#include "version.h"

/* ---- usage ---- */

static const char usage_main[] =
        "Usage: aiqosctl [--socket PATH] [-o text|json|yaml] COMMAND [OPTIONS]\n"
        "\n"
        "Commands:\n"
        "  status [-v]              the agent and the node: mode, uplink, pods (-v: the tc objects)\n"
        "  explain NAMESPACE/POD    why a pod is tuned the way it is\n"
        "  plan --pods FILE         dry run: the plan for a set of pods (no agent, no kernel)\n"
        "  doctor                   preflight of this node: missing kernel features, CNI chain,\n"
        "                           coexisting shapers\n"
        "  version                  the version of aiqosctl and of the running agent\n"
        "\n"
        "Options (anywhere on the line):\n"
        "  --socket PATH            the agent's socket (default " PROTO_DEFAULT_SOCKET ")\n"
        "  -o, --output FORMAT      text (default), json or yaml (plan: also tc); --json = -o json\n"
        "  -h, --help               this help; COMMAND --help for a command's options\n"
        "  --version                print the version\n"
        "\n"
        "Exit status: 0 ok; 1 failure (agent unreachable, not connected or not ready, node\n"
        "errors, bad input); 2 usage error; 3 warnings only (doctor).\n";

static const char usage_version[] = "Usage: aiqosctl [--socket PATH] version [-o text|json|yaml]\n"
                                    "\n"
                                    "The version and commit of aiqosctl, and of the agent when it answers on\n"
                                    "its socket (exit 0 either way: an unreachable agent is reported).\n"
                                    "\n"
                                    "  -o, --output F  text (default), json or yaml\n"
                                    "  -h, --help      this help\n";

/* ---- version ---- */

int cmd_version(int argc, char **argv, const char *sock)
{
	struct ctl_cmd cmd = {.name = "version", .usage = usage_version};
	struct proto_request r = {.op = PROTO_OP_STATUS};
	_cleanup_json_ cJSON *out = cJSON_CreateObject(), *resp = NULL;
	struct error err = {0};
	cJSON *client, *agent;
	int q;

	q = ctl_parse_common(&cmd, argc, argv);
	if (q >= 0)
		return q;
	q = ctl_args_max(&cmd, argc, argv, 0);
	if (q != EXIT_OK)
		return q;
	client = out ? cJSON_AddObjectToObject(out, "client") : NULL;
	agent = out ? cJSON_AddObjectToObject(out, "agent") : NULL;
	if (!client || !agent || !cJSON_AddStringToObject(client, "version", aiqos_version()) ||
	    !cJSON_AddStringToObject(client, "commit", aiqos_commit()) ||
	    !cJSON_AddStringToObject(agent, "socket", sock))
		return fail("out of memory");
	if (proto_call_max(sock, &r, CALL_TIMEOUT_MS, PROTO_LARGE_MSG_MAX, &resp, &err) >= 0) {
		if (!cJSON_AddStringToObject(agent, "version", jstr_or(resp, "version", "unknown")) ||
		    !cJSON_AddStringToObject(agent, "commit", jstr_or(resp, "commit", "")))
			return fail("out of memory");
	} else if (!cJSON_AddStringToObject(agent, "error", err.msg[0] ? err.msg : "no answer")) {
		return fail("out of memory");
	}
	if (cmd.out != CTL_OUT_TEXT)
		return ctl_output(&cmd, out, NULL);
	printf("client: %s %s\n", PROG, aiqos_version());
	if (jstr(agent, "version"))
		printf("agent:  aiqos-agent %s (%s)\n", jstr(agent, "version"), sock);
	else
		printf("agent:  not reachable at %s: %s\n", sock, jstr_or(agent, "error", "no answer"));
	return EXIT_OK;
}

/* ---- main ---- */

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"help", no_argument, NULL, 'h'},
	        {"version", no_argument, NULL, 'V'},
	        {0},
	};
	struct ctl_cmd top = {.usage = usage_main, .opts = opts};
	const char *sock, *cmd;
	int c, q;

	q = ctl_global_take(&argc, argv, usage_main);
	if (q != EXIT_OK)
		return q;
	sock = ctl_global.socket ? ctl_global.socket : PROTO_DEFAULT_SOCKET;
	while ((c = ctl_getopt(&top, argc, argv)) != -1) {
		switch (c) {
		case 'V':
			printf("%s %s\n", PROG, aiqos_version());
			return EXIT_OK;
		default:
			return top.exit; /* CTL_OPT_EXIT */
		}
	}
	if (optind >= argc)
		return usage_error(usage_main, "which command? (status, explain, plan, doctor, version)");
	cmd = argv[optind];
	argc -= optind;
	argv += optind;
	if (streq(cmd, "status"))
		q = cmd_status(argc, argv, sock);
	else if (streq(cmd, "explain"))
		q = cmd_explain(argc, argv, sock);
	else if (streq(cmd, "plan"))
		q = cmd_plan(argc, argv);
	else if (streq(cmd, "doctor"))
		q = ctl_doctor(argc, argv);
	else if (streq(cmd, "version"))
		q = cmd_version(argc, argv, sock);
	else if (streq(cmd, "help"))
		q = (fputs(usage_main, stdout), EXIT_OK);
	else
		return usage_error(usage_main, "unknown command '%s'", cmd);
	if (fflush(stdout) != 0 || ferror(stdout))
		return fail("cannot write the output: %s", strerror(errno));
	return q;
}
