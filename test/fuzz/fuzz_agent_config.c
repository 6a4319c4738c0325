/* fuzz_agent_config.c — the agent's config file (agent/config.h, from the
 * ConfigMap): parsed strictly, then the node planner run with it for every
 * mode over a small fixed set of pods. Properties: no crash or leak; a
 * config the parser accepts passes node_config_check and never makes the
 * planner refuse it; a refusal names the origin. */
#include <netinet/in.h>

#include "../../agent/config.h"
#include "fuzz.h"
#include "node.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	return 0;
}

static void plan_with(const struct agent_config *c)
{
	struct node_pod pods[3] = {
	        {.namespace_ = "ml",
	         .name = "infer",
	         .uid = "u-1",
	         .class = CLASS_INFERENCE,
	         .n_ips = 1,
	         .ips = {{.family = AF_INET, .addr = {10, 0, 0, 5}}},
	         .gpus = 1},
	        {.namespace_ = "ml",
	         .name = "train",
	         .uid = "u-2",
	         .class = CLASS_TRAINING,
	         .n_ips = 1,
	         .ips = {{.family = AF_INET6, .addr = {0xfd, 0, [15] = 7}}},
	         .gpus = 8,
	         .egress_bps = 1000000000},
	        {.namespace_ = "ml",
	         .name = "dctcp",
	         .uid = "u-3",
	         .class = CLASS_TRAINING,
	         .ce_marking = true,
	         .n_ips = 1,
	         .ips = {{.family = AF_INET, .addr = {10, 0, 0, 9}}}},
	};
	const struct uplink_facts up = {.ifname = "eth0", .speed_bps = 25000000000ULL, .tx_queues = 4, .mtu = 9000};
	struct error err = {0};

	for (int mode = 0; mode < _MODE_MAX; mode++) {
		_cleanup_plan_ struct plan plan = {0};
		struct node_plan_info info;
		int r = node_plan(pods, ARRAY_SIZE(pods), &c->node, &up, NULL, (enum node_mode)mode, NULL, &plan, &info,
		                  &err);
		FUZZ_ASSERT(r == 0, "node_plan(%s) refused an accepted config: %s",
		            node_mode_name((enum node_mode)mode), err.msg);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct agent_config c;
	struct error err = {0};

	if (size > AGENT_CONFIG_MAX_BYTES + 1)
		return 0;
	if (agent_config_parse((const char *)data, size, "fuzz", &c, &err) < 0) {
		FUZZ_ASSERT(strstr(err.msg, "fuzz"), "error does not name the origin: %s", err.msg);
		return 0;
	}
	FUZZ_ASSERT(node_config_check(&c.node, &err) == 0, "accepted config fails the check: %s", err.msg);
	FUZZ_ASSERT(c.profiles.n >= 1 && c.profiles.n <= PROFILES_MAX, "%u profiles", c.profiles.n);
	plan_with(&c);
	agent_config_done(&c);
	return 0;
}
