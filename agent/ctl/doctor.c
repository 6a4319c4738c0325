/* doctor.c — `aiqosctl doctor`: the preflight of doctor.h for this node,
 * printed for people or as JSON, with an exit code scripts can use. */
#include <getopt.h>
#include <unistd.h>

#include "agent.h"
#include "config.h"
#include "ctl/ctl.h"
#include "doctor.h"
#include "netns.h"

static const char usage[] = "Usage: aiqosctl doctor [--cni-conf-dir DIR] [--config FILE] [--uplink IFNAME]\n"
                            "                       [--state-dir DIR] [--sysctl-dir DIR] [--no-kernel-probe]\n"
                            "                       [-o text|json|yaml]\n"
                            "\n"
                            "Preflight of this node: per profile what the kernel applies and what falls back\n"
                            "(each profile's plan applied to the loopback device of a throwaway network\n"
                            "namespace, root), the primary CNI and its chain, shapers that would fight aiqos\n"
                            "(Cilium's bandwidth manager, the bandwidth plugin in the chain) and foreign\n"
                            "qdisc trees on the uplink. Each missing kernel feature is listed once, in the\n"
                            "kernel section, with its module and CONFIG_ option; every finding has a stable\n"
                            "id and every warning and error its fix.\n"
                            "\n"
                            "  --cni-conf-dir DIR  the CNI config dir (default /etc/cni/net.d)\n"
                            "  --config FILE       agent config: uplink and profiles (default /etc/aiqos/config.json\n"
                            "                      when it exists, else the built-ins)\n"
                            "  --uplink IFNAME     the uplink (default: the config's, \"auto\" = default route)\n"
                            "  --state-dir DIR     the agent's state dir (default /var/lib/aiqos)\n"
                            "  --sysctl-dir DIR    where net.* sysctls are written (default /proc/sys; in the agent\n"
                            "                      container /host/proc/sys, as the agent's own flag)\n"
                            "  --no-kernel-probe   skip the kernel probe (no root needed)\n"
                            "  -o, --output F      text (default), json or yaml: {\"findings\": [{id, level, section,\n"
                            "                      text, fix}], \"exitCode\": N}; --json = -o json\n"
                            "\n"
                            "Exit status: 0 ok, 1 errors (or the config cannot be read), 2 usage error,\n"
                            "3 warnings only.\n";

int ctl_doctor(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"cni-conf-dir", required_argument, NULL, 'c'},
	        {"config", required_argument, NULL, 'f'},
	        {"uplink", required_argument, NULL, 'u'},
	        {"state-dir", required_argument, NULL, 's'},
	        {"sysctl-dir", required_argument, NULL, 'y'},
	        {"no-kernel-probe", no_argument, NULL, 'n'},
	        {"json", no_argument, NULL, 'j'},
	        {"output", required_argument, NULL, 'o'},
	        {"help", no_argument, NULL, 'h'},
	        {0},
	};
	struct doctor_options o = {
	        .cni_conf_dir = "/etc/cni/net.d", .state_dir = AGENT_STATE_DIR_DEFAULT, .probe_kernel = true};
	const char *config = NULL, *uplink = NULL;
	struct agent_config cfg;
	struct doctor_report *r;
	struct error e = {0};
	struct ctl_cmd cmd = {.name = "doctor", .usage = usage, .opts = opts};
	int c, code;

	while ((c = ctl_getopt(&cmd, argc, argv)) != -1) {
		switch (c) {
		case 'c':
			o.cni_conf_dir = optarg;
			break;
		case 'f':
			config = optarg;
			break;
		case 'u':
			uplink = optarg;
			break;
		case 's':
			o.state_dir = optarg;
			break;
		case 'y':
			if (sysctl_set_root(optarg, &e) < 0) {
				return usage_error(usage, "doctor: --sysctl-dir: %s", e.msg);
			}
			break;
		case 'n':
			o.probe_kernel = false;
			break;
		default:
			return cmd.exit; /* CTL_OPT_EXIT */
		}
	}
	code = ctl_args_max(&cmd, argc, argv, 0);
	if (code != EXIT_OK)
		return code;
	if (!config && access(AGENT_CONFIG_DEFAULT_PATH, F_OK) == 0)
		config = AGENT_CONFIG_DEFAULT_PATH;
	if (config) {
		if (agent_config_load(config, &cfg, &e) < 0)
			return fail("doctor: %s", e.msg);
	} else {
		agent_config_defaults(&cfg);
	}
	o.uplink = uplink ? uplink : (cfg.node.uplink[0] ? cfg.node.uplink : "auto");
	o.profiles = &cfg.profiles;
	r = calloc(1, sizeof(*r));
	if (!r) {
		agent_config_done(&cfg);
		return fail("doctor: out of memory");
	}
	doctor_run(&o, r);
	code = doctor_exit_code(r);
	if (cmd.out != CTL_OUT_TEXT) {
		char *s = doctor_json(r);
		_cleanup_json_ cJSON *j = s ? cJSON_Parse(s) : NULL;

		free(s);
		if (!j) {
			code = EXIT_ERR;
			fprintf(stderr, "aiqosctl doctor: out of memory\n");
		} else if (cmd.out == CTL_OUT_YAML) {
			print_yaml(j);
		} else {
			print_json(j);
		}
	} else {
		doctor_print_text(r, stdout);
	}
	free(r);
	agent_config_done(&cfg);
	return code;
}
