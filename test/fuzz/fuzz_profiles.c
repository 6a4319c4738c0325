/* fuzz_profiles.c — the "profiles" object of the plugin's network config and
 * of the agent's config, merged over the built-in profiles; then every
 * profile planned for a pod of its class (the one planner), rendered, and its
 * choices stored and read back as the state file does. Properties: no crash
 * or leak; a failed merge leaves the set unchanged; accepted profiles always
 * plan. */
#include "fuzz.h"
#include "plan.h"
#include "profile.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	return 0;
}

static void plan_profile(const struct profile *p, uint64_t egress_bps)
{
	const struct workload w = {.class = p->class, .egress_bps = egress_bps, .ingress_bps = egress_bps};
	const struct attach_ifaces ifs = {.pod_ifname = "eth0", .host_ifname = "veth1234abcd", .mtu = 1500};
	struct plan_caps caps = {0};
	_cleanup_plan_ struct plan plan = {0}, back = {0};
	const struct plan_names names = plan_names_attach(&ifs);
	struct error err = {0};
	char *text = NULL;
	cJSON *choices;
	int r;

	r = plan_pod(&w, p, &ifs, &caps, &plan);
	FUZZ_ASSERT(r == 0, "plan_pod(profile %s) = %d", p->name, r);
	FUZZ_ASSERT(plan.n <= 14, "%u items (at most 5 sysctls + 3 egress + 3 DSCP + 3 ingress)", plan.n);
	for (int fmt = PLAN_FMT_TEXT; fmt <= PLAN_FMT_JSON; fmt++) {
		r = plan_render(&plan, &names, "/var/run/netns/x", (enum plan_format)fmt, false, &text);
		FUZZ_ASSERT(r == 0, "render(profile %s, format %d) = %d", p->name, fmt, r);
		free(text);
		text = NULL;
	}
	/* Pretend everything applied, store the choices and read them back. */
	for (unsigned i = 0; i < plan.n; i++) {
		plan.items[i].status = plan.items[i].n_alt ? ITEM_APPLIED : ITEM_SKIPPED;
		plan.items[i].chosen = plan.items[i].n_alt ? 0 : -1;
	}
	choices = plan_choices_to_json(&plan);
	FUZZ_ASSERT(choices, "plan_choices_to_json");
	r = plan_pod(&w, p, &ifs, &caps, &back);
	FUZZ_ASSERT(r == 0, "replan");
	r = plan_choices_from_json(&back, choices, &err);
	FUZZ_ASSERT(r == 0, "choices of profile %s do not read back: %s", p->name, err.msg);
	cJSON_Delete(choices);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_json_ cJSON *j = NULL;
	struct profile_set set, before;
	struct error err = {0};

	if (size > 256 * 1024)
		return 0;
	j = fuzz_json_parse(data, size);
	if (!j)
		return 0;
	profile_set_builtin(&set);
	before = set;
	if (profile_set_merge_json(&set, j, &err) < 0) {
		FUZZ_ASSERT(err.msg[0], "merge refused without a message");
		FUZZ_ASSERT(memcmp(&set, &before, sizeof(set)) == 0, "a failed merge changed the set");
		return 0;
	}
	FUZZ_ASSERT(set.n >= before.n && set.n <= PROFILES_MAX, "%u profiles", set.n);
	for (unsigned i = 0; i < set.n; i++) {
		const struct profile *p = &set.p[i];
		FUZZ_ASSERT(profile_find(&set, p->name) == p, "profile %s not found by name", p->name);
		plan_profile(p, 0);
		plan_profile(p, 100000000);
	}
	return 0;
}
