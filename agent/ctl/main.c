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
        "Usage: aiqosctl [--socket PATH] COMMAND [OPTIONS]\n"
        "\n"
        "Commands:\n"
        "  status [--json]          the node: mode, uplink, pods and their effective tuning\n"
        "  explain NAMESPACE/POD    why a pod is tuned the way it is\n"
        "  plan --pods FILE         dry run: the plan for a set of pods (no agent, no kernel)\n"
        "  doctor [--json]          preflight of this node: kernel fallbacks per profile, CNI chain,\n"
        "                           coexisting shapers (exit 0 ok, 1 warnings, 2 errors)\n"
        "\n"
        "Options:\n"
        "  --socket PATH            the agent's socket (default " PROTO_DEFAULT_SOCKET ")\n"
        "  -h, --help               this help; COMMAND --help for a command's options\n"
        "  --version                print the version\n"
        "\n"
        "Exit status: 0 ok, 1 error, 2 usage.\n";

/* ---- main ---- */

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"socket", required_argument, NULL, 's'},
	        {"help", no_argument, NULL, 'h'},
	        {"version", no_argument, NULL, 'V'},
	        {0},
	};
	struct ctl_cmd top = {.usage = usage_main, .opts = opts};
	const char *sock = PROTO_DEFAULT_SOCKET, *cmd;
	int c, q;

	while ((c = ctl_getopt(&top, argc, argv)) != -1) {
		switch (c) {
		case 's':
			if (!optarg[0])
				return usage_error(usage_main, "--socket: empty path");
			sock = optarg;
			break;
		case 'V':
			printf("%s %s\n", PROG, AIQOS_VERSION);
			return EXIT_OK;
		default:
			return top.exit; /* CTL_OPT_EXIT */
		}
	}
	if (optind >= argc)
		return usage_error(usage_main, "which command? (status, explain, plan, doctor)");
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
	else if (streq(cmd, "help"))
		q = (fputs(usage_main, stdout), EXIT_OK);
	else
		return usage_error(usage_main, "unknown command '%s'", cmd);
	if (fflush(stdout) != 0 || ferror(stdout))
		return fail("cannot write the output: %s", strerror(errno));
	return q;
}
