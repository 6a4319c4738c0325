/* features.c — prints the kernel features aiqos can use, straight from the
 * code: every tc kind of the registry (shared/tc/tc.c), the tc actions the
 * planner's filters render to, the congestion controls and sysctls of the
 * built-in profiles (and the buffer sysctls a profile override sets). One
 * "<type> <name>" line each, sorted; the "Kernel support" table of docs/concepts.md is
 * checked against this list (check-readme.sh). */
#include <stdio.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>

#include "node.h"
#include "plan.h"
#include "profile.h"
#include "tc/tc.h"
#include "util.h"

#define FEATURES_MAX 128
#define FEATURE_LEN  96

struct features {
	unsigned n;
	char line[FEATURES_MAX][FEATURE_LEN];
};

static int feature_add(struct features *f, const char *type, const char *name)
{
	char buf[FEATURE_LEN];

	if (snprintf(buf, sizeof(buf), "%s %s", type, name) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (unsigned i = 0; i < f->n; i++)
		if (streq(f->line[i], buf))
			return 0;
	if (f->n >= FEATURES_MAX)
		return -E2BIG;
	str_copy(f->line[f->n++], FEATURE_LEN, buf);
	return 0;
}

/* "... action pedit ex munge ... pipe action csum ip" -> "pedit", "csum" */
static int actions_add(struct features *f, const char *rendered)
{
	const char *p = rendered;

	while ((p = strstr(p, "action ")) != NULL) {
		char name[32];
		size_t n = 0;

		p += strlen("action ");
		while (p[n] && p[n] != ' ' && n + 1 < sizeof(name)) {
			name[n] = p[n];
			n++;
		}
		name[n] = '\0';
		if (n > 0) {
			int r = feature_add(f, "action", name);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

/* Everything one plan mentions: kinds of every alternative, actions of
 * rendered filters, sysctl keys (dotted) and congestion control values. */
static int plan_features(struct features *f, const struct plan *p)
{
	for (unsigned i = 0; i < p->n; i++) {
		const struct plan_item *it = &p->items[i];

		for (unsigned a = 0; a < it->n_alt; a++) {
			int r = 0;

			if (it->type == ITEM_TC) {
				const struct tc_kind *k = tc_kind_get(it->tc[a].kind);
				char cmd[TC_FORMAT_MAX];

				if (!k)
					return -EINVAL;
				r = feature_add(f, tc_type_name(k->type), k->name);
				if (r == 0 && tc_spec_format(&it->tc[a], "eth0", "add", cmd, sizeof(cmd)) == 0)
					r = actions_add(f, cmd);
			} else if (streq(it->key, "net/ipv4/tcp_congestion_control")) {
				r = feature_add(f, "cc", it->val[a]);
			}
			if (r < 0)
				return r;
		}
		if (it->type == ITEM_SYSCTL) {
			char key[SYSCTL_KEY_MAX];
			int r;

			str_copy(key, sizeof(key), it->key);
			for (char *c = key; *c; c++)
				if (*c == '/')
					*c = '.';
			r = feature_add(f, "sysctl", key);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

/* what the per-pod planner asks of the kernel for one profile at these rates */
static int pod_features(struct features *f, struct plan *p, const struct profile *pr, uint64_t egress_bps,
                        uint64_t ingress_bps)
{
	struct workload w = {.class = pr->class, .egress_bps = egress_bps, .ingress_bps = ingress_bps};
	struct attach_ifaces ifs = {.pod_ifname = "eth0", .host_ifname = "veth0", .mtu = 1500};
	struct plan_caps caps = {0};
	int r;

	str_copy(w.profile, sizeof(w.profile), pr->name);
	r = plan_pod(&w, pr, &ifs, &caps, p);
	return r == 0 ? plan_features(f, p) : r;
}

static int cmp_line(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

int main(void)
{
	static const uint64_t rates_bps[][2] = {{0, 0}, {100000000, 0}, {0, 5000000}, {2000000, 10000000000ULL}};
	struct profile_set set;
	struct features f = {0};
	_cleanup_plan_ struct plan pod_plan = {0};
	struct plan *p = &pod_plan;
	int r = 0;

	/* the registry: every kind aiqos can create, plan or observe */
	for (int k = 0; k < _TC_KIND_MAX && r == 0; k++) {
		const struct tc_kind *kind = tc_kind_get((enum tc_kind_id)k);
		r = kind ? feature_add(&f, tc_type_name(kind->type), kind->name) : -EINVAL;
	}
	/* what the per-pod planner asks of the kernel, for every profile */
	profile_set_builtin(&set);
	for (unsigned i = 0; i < set.n && r == 0; i++) {
		struct profile buffers = set.p[i];

		for (size_t j = 0; j < ARRAY_SIZE(rates_bps) && r == 0; j++)
			r = pod_features(&f, p, &set.p[i], rates_bps[j][0], rates_bps[j][1]);
		/* ... and the buffer sysctls, set when a profile asks for them: the
		 * operator's rmemMax/wmemMax, the download direction's receive window */
		buffers.rmem_max = 1u << 24;
		buffers.wmem_max = 1u << 24;
		if (r == 0)
			r = pod_features(&f, p, &buffers, 0, 0);
	}
	/* what the node planner asks of it: mixed mode with both directions
	 * shaped (the download hook's mirred redirect), both classifiers */
	for (int cl = 0; cl < _CLASSIFY_MAX && r == 0; cl++) {
		struct node_pod pod = {.class = CLASS_INFERENCE, .n_ips = 1};
		struct uplink_facts up = {.ifname = "eth0", .is_virtual = true, .mtu = 1500, .ifb_ifindex = 2};
		_cleanup_plan_ struct plan np = {0};
		struct node_config cfg;

		str_copy(pod.uid, sizeof(pod.uid), "features");
		pod.ips[0].family = AF_INET;
		node_config_defaults(&cfg);
		cfg.uplink_rate_bps = 100000000;
		cfg.classify = (enum node_classify)cl;
		r = node_plan(&pod, 1, &cfg, &up, NULL, MODE_MIXED, NULL, &np, NULL, NULL);
		if (r == 0)
			r = plan_features(&f, &np);
	}
	if (r < 0) {
		fprintf(stderr, "features: %s\n", strerror(-r));
		return 1;
	}
	qsort(f.line, f.n, sizeof(f.line[0]), cmp_line);
	for (unsigned i = 0; i < f.n; i++)
		printf("%s\n", f.line[i]);
	return 0;
}
