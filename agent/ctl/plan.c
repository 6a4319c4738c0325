/* plan.c — `aiqosctl plan`: a dry run of the planners (per pod and the node's
 * uplink) over a pods file (plan_pods.c), without the agent and without
 * touching the kernel, as text, tc commands or JSON. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <time.h>

#include "config.h"
#include "ctl/ctl.h"
#include "ctl/plan.h"
#include "ifname.h"
#include "netns.h"
#include "node.h"
#include "pod_want.h"
#include "plan.h"

static const char usage_plan[] =
        "Usage: aiqosctl plan --pods FILE [--config FILE] [-o text|tc|json|yaml]\n"
        "                     [--uplink-rate RATE] [--uplink IFNAME] [--link virtual|nic]\n"
        "                     [--link-speed RATE] [--uplink-root queue|noqueue|mq] [--queues N]\n"
        "                     [--kernel full|ci]\n"
        "\n"
        "Dry run: print the exact per-pod plans (qdiscs, classes, filters, sysctls with\n"
        "their fallbacks) and the node mode and uplink plan for a set of pods, without\n"
        "the agent and without touching the kernel.\n"
        "\n"
        "  --pods FILE       pods as YAML or JSON ('-' = stdin; a directory: the Pods of its\n"
        "                    .yaml/.yml/.json files): one or more Pod manifests\n"
        "                    (`kubectl kustomize manifests/examples | aiqosctl plan --pods -`),\n"
        "                    a PodList as printed by `kubectl get pods -o yaml|json`, or\n"
        "                    {\"pods\": [{\"namespace\", \"name\", \"uid\", \"annotations\": {..},\n"
        "                    \"ips\": [..], \"gpus\": N, \"hostNetwork\": false}]}\n"
        "  --config FILE     agent config (default: the built-in defaults; /etc is not read)\n"
        "  -o, --output F    text (default), tc (shell commands), json or yaml\n"
        "                    (--format F and --json are the same)\n"
        "  --uplink-rate R   the config's uplinkRate (what the agent shapes the uplink at),\n"
        "                    tc syntax (500mbit, 10gbit); overrides the --config file's\n"
        "  --uplink IFNAME   the uplink's name (default: the config's, else eth0)\n"
        "  --link KIND       virtual (default: veth/bridge; its speed is never a rate: shaped\n"
        "                    only at a configured uplinkRate) or nic (a physical NIC)\n"
        "  --link-speed R    the speed the link reports (/sys/class/net/IF/speed), used as\n"
        "                    the rate of a nic without uplinkRate\n"
        "  --uplink-root K   the uplink's root qdisc before aiqos: queue (default: a queueing\n"
        "                    root such as pfifo_fast or fq_codel), noqueue (veth, bond, VLAN:\n"
        "                    kind's nodes; no tree without uplinkRate) or mq (a multi-queue\n"
        "                    NIC, --queues N tx queues, default 4)\n"
        "  --kernel K        full (default: every qdisc kind) or ci (no fq, fq_codel, prio,\n"
        "                    pedit: the fallbacks of a minimal kernel)\n"
        "  -h, --help        this help\n";

/* ---- plan: computing ---- */

enum link_kind { LINK_VIRTUAL, LINK_NIC };
enum uplink_root { ROOT_QUEUE, ROOT_NOQUEUE, ROOT_MQ };

#define PLAN_MQ_QUEUES_DEFAULT 4
#define PLAN_MQ_QUEUES_MAX     4096

struct plan_opts {
	const char *pods_path;
	const char *config_path;  /* NULL = defaults */
	uint64_t uplink_rate_bps; /* --uplink-rate: the config's uplinkRate, 0 = the config's */
	uint64_t link_speed_bps;  /* --link-speed, 0 = unknown */
	const char *uplink;       /* NULL = config's, else eth0 */
	enum link_kind link;
	enum uplink_root root;
	unsigned queues; /* --queues with --uplink-root mq */
	bool kernel_ci;
};

struct pod_result {
	struct ctl_pod *pod;
	struct workload w;
	const struct profile *profile;
	char profile_warn[WORKLOAD_WARN_LEN];
	struct attach_ifaces ifs;
	struct plan plan;
};

struct plan_run {
	struct plan_opts o;
	cJSON *doc; /* the pods file (the simple format's annotations point into it) */
	struct agent_config cfg;
	struct plan_caps caps;
	struct uplink_facts up;
	struct ctl_pods pods;
	struct pod_result *res; /* one per planned pod */
	size_t n_res;
	struct node_pod *node_pods;
	struct plan np;
	struct node_plan_info info;
};

static void plan_run_done(struct plan_run *r)
{
	plan_free(&r->np);
	for (size_t i = 0; r->res && i < r->n_res; i++)
		plan_free(&r->res[i].plan);
	free(r->node_pods);
	free(r->res);
	ctl_pods_done(&r->pods);
	cJSON_Delete(r->doc);
	agent_config_done(&r->cfg);
}

static void caps_for(bool ci, struct plan_caps *caps)
{
	memset(caps, 0, sizeof(*caps));
	if (!ci)
		return;
	plan_caps_mark_missing(caps, TC_KIND_FQ);
	plan_caps_mark_missing(caps, TC_KIND_FQ_CODEL);
	plan_caps_mark_missing(caps, TC_KIND_PRIO);
	caps->missing_pedit = true;
}

/* "veth-<name>", cut to an interface name */
static void host_ifname(const char *pod, char *buf, size_t size)
{
	snprintf(buf, size, "veth-%.*s", IFNAME_LEN - 6, pod);
	/* never end an interface name on '.' or '-' (cut names) */
	for (size_t n = strlen(buf); n > 5 && (buf[n - 1] == '.' || buf[n - 1] == '-'); n--)
		buf[n - 1] = '\0';
}

static int plan_compute(struct plan_run *r)
{
	struct error err = {0};
	unsigned n_node = 0;
	int q;

	if (r->o.config_path) {
		q = agent_config_load(r->o.config_path, &r->cfg, &err);
		if (q < 0)
			return fail("%s", err.msg);
		if (!r->cfg.from_file)
			return fail("config %s: %s", r->o.config_path, strerror(ENOENT));
	} else {
		agent_config_defaults(&r->cfg);
	}
	if (r->o.uplink_rate_bps) /* --uplink-rate is the config's key */
		r->cfg.node.uplink_rate_bps = r->o.uplink_rate_bps;
	caps_for(r->o.kernel_ci, &r->caps);

	q = pods_load(r->o.pods_path, &r->doc, &r->pods);
	if (q != EXIT_OK)
		return q;
	r->res = calloc(r->pods.n ? r->pods.n : 1, sizeof(*r->res));
	r->node_pods = calloc(r->pods.n ? r->pods.n : 1, sizeof(*r->node_pods));
	if (!r->res || !r->node_pods) {
		return fail("out of memory");
	}
	for (size_t i = 0; i < r->pods.n; i++) {
		struct ctl_pod *p = &r->pods.v[i];
		struct pod_result *pr;
		struct node_pod *np;
		struct pod_want want;

		if (p->skip)
			continue;
		pr = &r->res[r->n_res++];
		pr->pod = p;
		err = (struct error){0};
		if (workload_from_annotations(p->annotations, &pr->w, &err) < 0) {
			return fail("pod %s/%s: %s", p->namespace_, p->name, err.msg);
		}
		pr->profile = profile_resolve(&r->cfg.profiles, &pr->w, pr->profile_warn, sizeof(pr->profile_warn));
		str_copy(pr->ifs.pod_ifname, sizeof(pr->ifs.pod_ifname), "eth0");
		host_ifname(p->name, pr->ifs.host_ifname, sizeof(pr->ifs.host_ifname));
		q = plan_pod(&pr->w, pr->profile, &pr->ifs, &r->caps, &pr->plan);
		if (q < 0) {
			return fail("pod %s/%s: cannot plan: %s", p->namespace_, p->name, strerror(-q));
		}
		/* the node plan's view of it: the agent's mapping (pod_want.h) */
		pod_want_from(&pr->w, pr->profile, &want);
		np = &r->node_pods[n_node++];
		pod_want_node_pod(&want, p->namespace_, p->name, p->uid, p->gpus, np);
		np->n_ips = p->n_ips;
		memcpy(np->ips, p->ips, sizeof(np->ips));
	}

	/* the uplink */
	if (r->o.uplink)
		str_copy(r->up.ifname, sizeof(r->up.ifname), r->o.uplink);
	else if (r->cfg.node.uplink[0] && !streq(r->cfg.node.uplink, NODE_UPLINK_AUTO))
		str_copy(r->up.ifname, sizeof(r->up.ifname), r->cfg.node.uplink);
	else
		str_copy(r->up.ifname, sizeof(r->up.ifname), "eth0");
	r->up.speed_bps = r->o.link_speed_bps;
	r->up.is_virtual = r->o.link == LINK_VIRTUAL || r->o.link_speed_bps == 0;
	r->up.no_queue = r->o.root == ROOT_NOQUEUE;
	r->up.tx_queues = r->o.root == ROOT_MQ ? r->o.queues : 1;
	r->up.mtu = 1500;
	{
		struct node_counts counts;
		enum node_mode mode;

		node_pods_count(r->node_pods, n_node, &counts);
		mode = node_mode_desired(&counts);
		err = (struct error){0};
		q = node_plan(r->node_pods, n_node, &r->cfg.node, &r->up, &r->caps, mode, NULL, &r->np, &r->info, &err);
		if (q < 0)
			return fail("node plan: %s", err.msg);
	}
	/* the download tree bounds training pods' receive window, and inference
	 * pods' with the bands (as the agent's effective profiles do,
	 * node/rcv_window.h): plan them again */
	bool bounded[_CLASS_MAX] = {false}, any = false;

	for (int c = 0; c < _CLASS_MAX; c++)
		any |= bounded[c] = profile_set_bound_rmem(&r->cfg.profiles, (enum workload_class)c,
		                                           node_down_rcv_bound(&r->info, (enum workload_class)c),
		                                           sysctl_tcp_rmem_max()) > 0;
	for (size_t i = 0; any && i < r->n_res; i++) {
		struct pod_result *pr = &r->res[i];

		if (!bounded[pr->profile->class])
			continue;
		q = plan_pod(&pr->w, pr->profile, &pr->ifs, &r->caps, &pr->plan);
		if (q < 0)
			return fail("pod %s/%s: cannot plan: %s", pr->pod->namespace_, pr->pod->name, strerror(-q));
	}
	return EXIT_OK;
}

/* ---- plan: output ---- */

/* The node plan prints the uplink's interface name. */
static struct plan_names node_names(const struct plan_run *r)
{
	return (struct plan_names){.dev = {[DEV_UPLINK] = r->up.ifname}};
}

/* Render the node plan (text or tc) to stdout. */
static int node_render(const struct plan_run *r, enum plan_format fmt, const char *indent)
{
	const struct plan_names dev_names = node_names(r);
	_cleanup_free_ char *text = NULL;
	int q = plan_render(&r->np, &dev_names, NULL, fmt, false, &text);

	if (q < 0)
		return q;
	print_indented(text, indent);
	return 0;
}

/* The node's warnings and plan, ending the text (indented) or the tc script
 * (as comments and commands). */
static int node_print_plan(const struct plan_run *r, enum plan_format fmt)
{
	bool tc = fmt == PLAN_FMT_TC;

	for (unsigned k = 0; k < r->info.n_warn && k < NODE_WARN_MAX; k++)
		printf("%swarning: %s\n", tc ? "# " : "  ", r->info.warn[k]);
	if (r->np.n == 0)
		printf("%snothing on the uplink (the original qdisc stays)\n", tc ? "# " : "  plan: ");
	else if (node_render(r, fmt, tc ? "" : "  ") < 0)
		return fail("out of memory");
	return EXIT_OK;
}

/* Only a shaper at a rate (HTB, EDT, the gated HTB) gives training its
 * floor; strict priority or no tree gives none. */
static bool plan_floor_given(const struct node_plan_info *in)
{
	return in->shape == SHAPE_HTB || in->shape == SHAPE_EDT || in->shape == SHAPE_HTB_IFB;
}

static const char *rate_source(const struct plan_run *r)
{
	if (r->info.rate_configured)
		return "uplinkRate in the config";
	if (r->info.speed_untrusted)
		return "--link-speed: a virtual link's speed is not a rate; --uplink-rate sets uplinkRate";
	if (r->o.link_speed_bps)
		return "--link-speed";
	return "unknown";
}

static void share_text(const struct plan_run *r, char *buf, size_t size)
{
	static const enum workload_class order[] = {CLASS_INFERENCE, CLASS_DEFAULT, CLASS_TRAINING};
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(order); i++) {
		enum workload_class c = order[i];
		unsigned pm = r->info.shares.share_pm[c];
		char rate[32] = "", ceil[32] = "";
		int n;

		if (!pm)
			continue;
		if (r->info.class_rate_bps[c])
			tc_rate_format(r->info.class_rate_bps[c], rate, sizeof(rate));
		if (r->info.class_ceil_bps[c])
			tc_rate_format(r->info.class_ceil_bps[c], ceil, sizeof(ceil));
		n = snprintf(buf + len, size - len, "%s%s %u.%u%%%s%s%s%s%s", len ? ", " : "", workload_class_name(c),
		             pm / 10, pm % 10, rate[0] ? " (rate " : "", rate, ceil[0] ? " ceil " : "", ceil,
		             rate[0] ? ")" : "");
		if (n < 0 || (size_t)n >= size - len)
			break;
		len += (size_t)n;
	}
}

static void plan_header_text(const struct plan_run *r)
{
	printf("# aiqosctl plan: dry run, nothing is applied\n");
	printf("# pods: %s; config: %s; kernel: %s\n", r->o.pods_path, r->o.config_path ? r->o.config_path : "defaults",
	       r->o.kernel_ci ? "ci (no fq, fq_codel, prio, pedit)" : "full");
}

static int plan_print_text(const struct plan_run *r)
{
	const struct node_plan_info *in = &r->info;
	char rate[32], shaped[32], shares[384];

	plan_header_text(r);
	for (size_t i = 0; i < r->n_res; i++) {
		const struct pod_result *pr = &r->res[i];
		const struct plan_names dev_names = plan_names_attach(&pr->ifs);
		const struct ctl_pod *p = pr->pod;
		_cleanup_free_ char *text = NULL;

		printf("\npod %s/%s (uid %s)\n", p->namespace_, p->name, p->uid);
		printf("  class %s, profile %s\n", workload_class_name(pr->w.class), pr->profile->name);
		printf("  ips:");
		// NOLINTNEXTLINE(clang-analyzer-core.NullDereference): plan_compute gives res[0..n_res) a pod each
		for (unsigned k = 0; k < p->n_ips; k++)
			printf("%s %s", k ? "," : "", p->ip_text[k]);
		printf("%s\n", p->n_ips ? "" : " none");
		if (pr->w.egress_bps || pr->w.ingress_bps) {
			char e[32] = "-", g[32] = "-";
			if (pr->w.egress_bps)
				tc_rate_format(pr->w.egress_bps, e, sizeof(e));
			if (pr->w.ingress_bps)
				tc_rate_format(pr->w.ingress_bps, g, sizeof(g));
			printf("  bandwidth: egress %s, ingress %s\n", e, g);
		}
		for (unsigned k = 0; k < pr->w.n_warn && k < WORKLOAD_WARN_MAX; k++)
			printf("  warning: %s\n", pr->w.warn[k]);
		if (pr->profile_warn[0])
			printf("  warning: %s\n", pr->profile_warn);
		printf("  interfaces: %s in the pod, %s on the host\n", pr->ifs.pod_ifname, pr->ifs.host_ifname);
		if (plan_render(&pr->plan, &dev_names, NULL, PLAN_FMT_TEXT, false, &text) < 0)
			return fail("out of memory");
		if (pr->plan.n == 0)
			printf("  plan: nothing to do (class default, no limits)\n");
		print_indented(text, "  ");
	}
	for (size_t i = 0; i < r->pods.n; i++)
		if (r->pods.v[i].skip)
			printf("\nskipped %s/%s: %s\n", r->pods.v[i].namespace_, r->pods.v[i].name, r->pods.v[i].skip);

	printf("\nnode\n");
	printf("  pods: %u (inference %u, training %u, default %u)\n", in->counts.n_pods, in->counts.n[CLASS_INFERENCE],
	       in->counts.n[CLASS_TRAINING], in->counts.n[CLASS_DEFAULT]);
	printf("  mode: %s\n", node_mode_name(in->mode));
	rate_format((double)in->rate_bps, rate, sizeof(rate));
	printf("  uplink: %s, %s, rate %s (%s)\n", r->up.ifname, r->up.is_virtual ? "virtual link" : "NIC", rate,
	       rate_source(r));
	rate_format((double)in->shaped_bps, shaped, sizeof(shaped));
	if (in->shape == SHAPE_HTB || in->shape == SHAPE_EDT || in->shape == SHAPE_HTB_IFB)
		printf("  shape: %s at %s\n", node_shape_name(in->shape), shaped);
	else
		printf("  shape: %s\n", node_shape_name(in->shape));
	share_text(r, shares, sizeof(shares));
	if (shares[0])
		printf("  shares (weights by %s): %s\n", node_weight_basis_name(in->shares.basis), shares);
	if (in->mode == MODE_MIXED && in->shares.share_pm[CLASS_TRAINING] && plan_floor_given(in)) {
		unsigned pm = in->shares.share_pm[CLASS_TRAINING];

		printf("  training floor: %u.%u%% (trainingFloor %g moved by the %s); inference first (prio 0), "
		       "training borrows what it leaves\n",
		       pm / 10, pm % 10, r->cfg.node.training_floor, node_weight_basis_name(in->shares.basis));
	} else if (in->mode == MODE_MIXED) {
		printf("  training floor: none (%s; set uplinkRate for a floor)\n",
		       in->shape == SHAPE_PRIO ? "strict priority: inference first, training gets what it leaves"
		                               : "the uplink is not shaped");
	}
	{
		_cleanup_json_ cJSON *b = cJSON_CreateObject();

		if (b && node_bands_json(in, b) == 0 && jobj(b, "bands"))
			printf("  bands: %s\n", jstr_or(jobj(b, "bands"), "text", "-"));
	}
	if (in->down.planned) {
		char dr[32], ds[32];

		rate_format((double)in->down.rate_bps, dr, sizeof(dr));
		rate_format((double)in->down.shaped_bps, ds, sizeof(ds));
		printf("  download: %s ingress redirected to %s, htb at %s (downlinkRate %s), filters on the "
		       "destination: %u\n",
		       r->up.ifname, PLAN_IFB_NAME, ds, dr, in->down.n_filters);
		if (in->down.rcv_window_bytes)
			printf("  download: training pods' receive window (tcp_rmem max) %u bytes (%s at %s x "
			       "downlinkRttUs %u us + %u bytes)\n",
			       in->down.rcv_window_bytes,
			       r->cfg.node.training_rcv_window == NODE_DOWN_RCV_WINDOW_AUTO ? "auto"
			                                                                    : "trainingRcvWindow",
			       ds, r->cfg.node.down_rtt_us, NODE_DOWN_QUEUE_BUDGET_BYTES);
		if (node_down_rcv_bound(in, CLASS_INFERENCE))
			printf("  download: inference pods' receive window %u bytes (%u x training's: the bands are "
			       "on)\n",
			       node_down_rcv_bound(in, CLASS_INFERENCE), NODE_DOWN_INF_RCV_FACTOR);
	}
	if (in->ce_threshold_us) {
		char t[32];
		tc_time_format(in->ce_threshold_us, t, sizeof(t));
		printf("  ce threshold on training queues: %s\n", t);
	}
	printf("  classify: %s, filters: %u\n", node_classify_name(r->cfg.node.classify), in->n_filters);
	return node_print_plan(r, PLAN_FMT_TEXT);
}

static int plan_print_tc(const struct plan_run *r)
{
	const struct node_plan_info *in = &r->info;

	printf("#!/bin/sh\n");
	printf("# aiqosctl plan: dry run (pods: %s; config: %s; kernel: %s)\n", r->o.pods_path,
	       r->o.config_path ? r->o.config_path : "defaults", r->o.kernel_ci ? "ci" : "full");
	printf("# Each command line tries the best alternative first ('||' falls back).\n");
	printf("# Pod-side commands run in the pod's network namespace, here named after the pod.\n");
	for (size_t i = 0; i < r->n_res; i++) {
		const struct pod_result *pr = &r->res[i];
		const struct plan_names dev_names = plan_names_attach(&pr->ifs);
		_cleanup_free_ char *text = NULL;

		printf("\n# pod %s/%s: class %s, profile %s\n", pr->pod->namespace_, pr->pod->name,
		       workload_class_name(pr->w.class), pr->profile->name);
		if (plan_render(&pr->plan, &dev_names, pr->pod->name, PLAN_FMT_TC, false, &text) < 0)
			return fail("out of memory");
		fputs(text, stdout);
	}
	for (size_t i = 0; i < r->pods.n; i++)
		if (r->pods.v[i].skip)
			printf("\n# skipped %s/%s: %s\n", r->pods.v[i].namespace_, r->pods.v[i].name,
			       r->pods.v[i].skip);
	printf("\n# node: mode %s, uplink %s, shape %s\n", node_mode_name(in->mode), r->up.ifname,
	       node_shape_name(in->shape));
	return node_print_plan(r, PLAN_FMT_TC);
}

static cJSON *json_strings(const char *const *v, unsigned n)
{
	cJSON *a = cJSON_CreateArray();

	for (unsigned i = 0; a && i < n; i++)
		if (!cJSON_AddItemToArray(a, cJSON_CreateString(v[i]))) {
			cJSON_Delete(a);
			return NULL;
		}
	return a;
}

/* A new object {"namespace", "name"} for pod p at the end of arr; NULL when
 * out of memory. */
static cJSON *json_pod_add(cJSON *arr, const struct ctl_pod *p)
{
	cJSON *o = cJSON_CreateObject();

	if (!o || !cJSON_AddItemToArray(arr, o)) {
		cJSON_Delete(o);
		return NULL;
	}
	if (!cJSON_AddStringToObject(o, "namespace", p->namespace_) || !cJSON_AddStringToObject(o, "name", p->name))
		return NULL; /* o is arr's */
	return o;
}

static int plan_print_json(const struct plan_run *r, enum ctl_output out)
{
	const struct node_plan_info *in = &r->info;
	_cleanup_json_ cJSON *root = cJSON_CreateObject();
	cJSON *pods, *skipped, *node, *up, *shares, *items, *o;
	bool ok = root != NULL;

	ok = ok && cJSON_AddTrueToObject(root, "dryRun") && cJSON_AddStringToObject(root, "podsFile", r->o.pods_path) &&
	     (r->o.config_path ? cJSON_AddStringToObject(root, "config", r->o.config_path) != NULL
	                       : cJSON_AddNullToObject(root, "config") != NULL) &&
	     cJSON_AddStringToObject(root, "kernel", r->o.kernel_ci ? "ci" : "full");
	pods = ok ? cJSON_AddArrayToObject(root, "pods") : NULL;
	ok = ok && pods;
	for (size_t i = 0; ok && i < r->n_res; i++) {
		const struct pod_result *pr = &r->res[i];
		const struct plan_names dev_names = plan_names_attach(&pr->ifs);
		const struct ctl_pod *p = pr->pod;
		const char *ips[NODE_POD_IPS_MAX], *warn[WORKLOAD_WARN_MAX + 1];
		_cleanup_free_ char *text = NULL;
		unsigned n_warn = 0;
		cJSON *ifs, *plan;

		for (unsigned k = 0; k < p->n_ips; k++)
			ips[k] = p->ip_text[k];
		for (unsigned k = 0; k < pr->w.n_warn && k < WORKLOAD_WARN_MAX; k++)
			warn[n_warn++] = pr->w.warn[k];
		if (pr->profile_warn[0])
			warn[n_warn++] = pr->profile_warn;
		o = json_pod_add(pods, p);
		ok = o && cJSON_AddStringToObject(o, "uid", p->uid) &&
		     cJSON_AddStringToObject(o, "class", workload_class_name(pr->w.class)) &&
		     cJSON_AddStringToObject(o, "profile", pr->profile->name) &&
		     cJSON_AddItemToObject(o, "ips", json_strings(ips, p->n_ips)) &&
		     cJSON_AddNumberToObject(o, "egressBps", (double)pr->w.egress_bps) &&
		     cJSON_AddNumberToObject(o, "ingressBps", (double)pr->w.ingress_bps) &&
		     cJSON_AddNumberToObject(o, "gpus", p->gpus) &&
		     cJSON_AddItemToObject(o, "warnings", json_strings(warn, n_warn));
		ifs = ok ? cJSON_AddObjectToObject(o, "interfaces") : NULL;
		ok = ifs && cJSON_AddStringToObject(ifs, "pod", pr->ifs.pod_ifname) &&
		     cJSON_AddStringToObject(ifs, "host", pr->ifs.host_ifname);
		plan = ok ? plan_to_json(&pr->plan, &dev_names, false) : NULL;
		ok = plan && cJSON_AddItemToObject(o, "plan", plan);
		if (!ok && plan)
			cJSON_Delete(plan);
	}
	skipped = ok ? cJSON_AddArrayToObject(root, "skipped") : NULL;
	ok = ok && skipped;
	for (size_t i = 0; ok && i < r->pods.n; i++) {
		const struct ctl_pod *p = &r->pods.v[i];

		if (!p->skip)
			continue;
		o = json_pod_add(skipped, p);
		ok = o && cJSON_AddStringToObject(o, "reason", p->skip);
	}
	node = ok ? cJSON_AddObjectToObject(root, "node") : NULL;
	ok = ok && node && cJSON_AddStringToObject(node, "mode", node_mode_name(in->mode));
	o = ok ? cJSON_AddObjectToObject(node, "pods") : NULL;
	ok = ok && o && cJSON_AddNumberToObject(o, "total", in->counts.n_pods) &&
	     cJSON_AddNumberToObject(o, "inference", in->counts.n[CLASS_INFERENCE]) &&
	     cJSON_AddNumberToObject(o, "training", in->counts.n[CLASS_TRAINING]) &&
	     cJSON_AddNumberToObject(o, "default", in->counts.n[CLASS_DEFAULT]);
	up = ok ? cJSON_AddObjectToObject(node, "uplink") : NULL;
	ok = ok && up && cJSON_AddStringToObject(up, "ifname", r->up.ifname) &&
	     cJSON_AddStringToObject(up, "link", r->up.is_virtual ? "virtual" : "nic") &&
	     cJSON_AddStringToObject(up, "root",
	                             r->o.root == ROOT_NOQUEUE ? "noqueue"
	                             : r->o.root == ROOT_MQ    ? "mq"
	                                                       : "queue") &&
	     cJSON_AddNumberToObject(up, "rateBps", (double)in->rate_bps) &&
	     cJSON_AddStringToObject(up, "rateSource", rate_source(r)) &&
	     cJSON_AddStringToObject(up, "shape", node_shape_name(in->shape)) &&
	     cJSON_AddNumberToObject(up, "shapedBps", (double)in->shaped_bps) &&
	     cJSON_AddStringToObject(up, "classify", node_classify_name(r->cfg.node.classify)) &&
	     cJSON_AddStringToObject(up, "weights", node_weight_basis_name(in->shares.basis)) &&
	     cJSON_AddNumberToObject(up, "ceThresholdUs", in->ce_threshold_us) &&
	     cJSON_AddNumberToObject(up, "filters", in->n_filters);
	shares = ok ? cJSON_AddObjectToObject(up, "shares") : NULL;
	ok = ok && shares;
	for (int c = 0; ok && c < _CLASS_MAX; c++)
		if (in->shares.share_pm[c])
			ok = cJSON_AddNumberToObject(shares, workload_class_name((enum workload_class)c),
			                             in->shares.share_pm[c] / 1000.0) != NULL;
	o = ok ? cJSON_AddObjectToObject(up, "classes") : NULL;
	ok = ok && o;
	for (int c = 0; ok && c < _CLASS_MAX; c++)
		if (in->class_rate_bps[c]) {
			cJSON *k = cJSON_AddObjectToObject(o, workload_class_name((enum workload_class)c));

			ok = k && cJSON_AddNumberToObject(k, "rateBps", (double)in->class_rate_bps[c]) &&
			     cJSON_AddNumberToObject(k, "ceilBps", (double)in->class_ceil_bps[c]);
		}
	if (ok && in->down.planned) {
		cJSON *dl = cJSON_AddObjectToObject(node, "downlink");

		ok = dl && cJSON_AddStringToObject(dl, "ifb", PLAN_IFB_NAME) &&
		     cJSON_AddNumberToObject(dl, "rateBps", (double)in->down.rate_bps) &&
		     cJSON_AddNumberToObject(dl, "shapedBps", (double)in->down.shaped_bps) &&
		     cJSON_AddNumberToObject(dl, "filters", in->down.n_filters) &&
		     cJSON_AddNumberToObject(dl, "trainingRcvWindowBytes", in->down.rcv_window_bytes) &&
		     cJSON_AddNumberToObject(dl, "inferenceRcvWindowBytes", node_down_rcv_bound(in, CLASS_INFERENCE));
	}
	ok = ok && cJSON_AddNumberToObject(up, "trainingFloor",
	                                   in->mode == MODE_MIXED && plan_floor_given(in)
	                                           ? in->shares.share_pm[CLASS_TRAINING] / 1000.0
	                                           : 0);
	ok = ok && node_bands_json(in, node) == 0; /* both directions: beside uplink and downlink */
	if (ok) {
		const char *warn[NODE_WARN_MAX];
		unsigned n = 0;

		for (unsigned k = 0; k < in->n_warn && k < NODE_WARN_MAX; k++)
			warn[n++] = in->warn[k];
		ok = cJSON_AddItemToObject(up, "warnings", json_strings(warn, n));
	}
	if (ok) {
		const struct plan_names dev_names = node_names(r);

		items = plan_to_json(&r->np, &dev_names, false);
		ok = items && cJSON_AddItemToObject(node, "plan", items);
		if (!ok)
			cJSON_Delete(items);
	}
	if (!ok)
		return fail("out of memory");
	return out == CTL_OUT_YAML ? print_yaml(root) : print_json(root);
}

int cmd_plan(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"pods", required_argument, NULL, 'p'},
	        {"config", required_argument, NULL, 'c'},
	        {"format", required_argument, NULL, 'f'},
	        {"output", required_argument, NULL, 'o'},
	        {"json", no_argument, NULL, 'j'},
	        {"uplink-rate", required_argument, NULL, 'r'},
	        {"link-speed", required_argument, NULL, 'S'},
	        {"uplink", required_argument, NULL, 'u'},
	        {"link", required_argument, NULL, 'l'},
	        {"uplink-root", required_argument, NULL, 'R'},
	        {"queues", required_argument, NULL, 'Q'},
	        {"kernel", required_argument, NULL, 'k'},
	        {"help", no_argument, NULL, 'h'},
	        {0},
	};
	struct ctl_cmd cmd = {.name = "plan", .usage = usage_plan, .opts = opts, .tc_output = true};
	const char *queues = NULL;
	struct plan_run r;
	struct error err = {0};
	int c, k, q;

	memset(&r, 0, sizeof(r));
	r.o.queues = PLAN_MQ_QUEUES_DEFAULT;
	while ((c = ctl_getopt(&cmd, argc, argv)) != -1) {
		switch (c) {
		case 'p':
			r.o.pods_path = optarg;
			break;
		case 'c':
			r.o.config_path = optarg;
			break;
		case 'f':
			if (ctl_output_set(&cmd, "--format", optarg) != EXIT_OK)
				return cmd.exit;
			break;
		case 'r':
			if (agent_rate_parse_bps(optarg, &r.o.uplink_rate_bps, &err) < 0)
				return usage_error(usage_plan, "plan: --uplink-rate: %s", err.msg);
			break;
		case 'S':
			if (agent_rate_parse_bps(optarg, &r.o.link_speed_bps, &err) < 0)
				return usage_error(usage_plan, "plan: --link-speed: %s", err.msg);
			break;
		case 'R': /* in enum uplink_root's order */
			k = ctl_choice(&cmd, "--uplink-root", optarg,
			               (const char *const[]){"queue", "noqueue", "mq", NULL});
			if (k < 0)
				return cmd.exit;
			r.o.root = (enum uplink_root)k;
			break;
		case 'Q': {
			char *end = NULL;
			unsigned long n;

			errno = 0;
			n = strtoul(optarg, &end, 10);
			if (errno || !end || *end || optarg[0] < '1' || optarg[0] > '9' || n > PLAN_MQ_QUEUES_MAX)
				return usage_error(usage_plan, "plan: --queues '%s': expected a number from 1 to %d",
				                   optarg, PLAN_MQ_QUEUES_MAX);
			r.o.queues = (unsigned)n;
			queues = optarg;
			break;
		}
		case 'u': {
			if (!ifname_valid(optarg))
				return usage_error(usage_plan, "plan: --uplink '%s' is not an interface name", optarg);
			r.o.uplink = optarg;
			break;
		}
		case 'l': /* in enum link_kind's order */
			k = ctl_choice(&cmd, "--link", optarg, (const char *const[]){"virtual", "nic", NULL});
			if (k < 0)
				return cmd.exit;
			r.o.link = (enum link_kind)k;
			break;
		case 'k':
			k = ctl_choice(&cmd, "--kernel", optarg, (const char *const[]){"full", "ci", NULL});
			if (k < 0)
				return cmd.exit;
			r.o.kernel_ci = k == 1;
			break;
		default:
			return cmd.exit; /* CTL_OPT_EXIT */
		}
	}
	q = ctl_args_max(&cmd, argc, argv, 0);
	if (q != EXIT_OK)
		return q;
	if (!r.o.pods_path)
		return usage_error(usage_plan, "plan: --pods FILE is required");
	if (queues && r.o.root != ROOT_MQ)
		return usage_error(usage_plan, "plan: --queues %s: only with --uplink-root mq", queues);
	q = plan_compute(&r);
	if (q == EXIT_OK) {
		switch (cmd.out) {
		case CTL_OUT_TC:
			q = plan_print_tc(&r);
			break;
		case CTL_OUT_JSON:
		case CTL_OUT_YAML:
			q = plan_print_json(&r, cmd.out);
			break;
		default:
			q = plan_print_text(&r);
		}
	}
	plan_run_done(&r);
	return q;
}
