/* test_node.c — unit tests of the node planner (node.h): mode decision with
 * hysteresis on a fake clock, the shares formula, uplink plans per mode x
 * link x kernel x classification (golden files test/unit/golden/node-*.txt,
 * rewritten with AIQOS_UPDATE_GOLDEN=1), filters, handles and incrementality. */
#define _GNU_SOURCE /* asprintf */
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <sys/socket.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "node.h"
#include "t.h"

static void cjson_deletep(cJSON **j)
{
	cJSON_Delete(*j);
}
#define _cleanup_json_ _cleanup_(cjson_deletep)

/* ---- fixtures ---- */

static void ip_parse(struct node_ip *ip, const char *s)
{
	memset(ip, 0, sizeof(*ip));
	if (strchr(s, ':')) {
		ip->family = AF_INET6;
		CHECK_INT(inet_pton(AF_INET6, s, ip->addr), 1);
	} else {
		ip->family = AF_INET;
		CHECK_INT(inet_pton(AF_INET, s, ip->addr), 1);
	}
}

/* The tests of the uplink tree plan without the download tree (config
 * "downlink": false); the download tree has its own tests below. */
static void test_config_defaults(struct node_config *cfg)
{
	node_config_defaults(cfg);
	/* The tests plan with the bands inside inference on (bulkThreshold
	 * 1 MiB; "off" by default, NODE_BULK_THRESHOLD_DEFAULT), so that every
	 * tree is checked with its band; node_config_bands_checked and the
	 * aiqosctl goldens check the default. */
	cfg->bulk_threshold_bytes = 1U << 20;
}

static void uplink_only_config(struct node_config *cfg)
{
	test_config_defaults(cfg);
	cfg->downlink = false;
}

static struct node_pod mkpod(const char *name, const char *uid, enum workload_class c, const char *ip1, const char *ip2)
{
	struct node_pod p;

	memset(&p, 0, sizeof(p));
	str_copy(p.namespace_, sizeof(p.namespace_), "ml");
	str_copy(p.name, sizeof(p.name), name);
	str_copy(p.uid, sizeof(p.uid), uid);
	p.class = c;
	if (ip1)
		ip_parse(&p.ips[p.n_ips++], ip1);
	if (ip2)
		ip_parse(&p.ips[p.n_ips++], ip2);
	return p;
}

/* The golden pod set: two inference pods (one dual-stack), two training
 * pods (one dual-stack, one running training-dctcp), one default pod. */
static unsigned fixture_pods(enum node_mode mode, struct node_pod *pods)
{
	unsigned n = 0;

	if (mode == MODE_INFERENCE || mode == MODE_MIXED) {
		pods[n++] =
		        mkpod("infer-a", "1b4e28ba-2fa1-11d2-883f-0016d3cca427", CLASS_INFERENCE, "10.244.1.10", NULL);
		pods[n++] = mkpod("infer-b", "6fa459ea-ee8a-3ca4-894e-db77e160355e", CLASS_INFERENCE, "10.244.1.11",
		                  "fd00:10:244:1::11");
	}
	if (mode == MODE_TRAINING || mode == MODE_MIXED) {
		pods[n] = mkpod("train-a", "886313e1-3b8a-5372-9b90-0c9aee199e5d", CLASS_TRAINING, "10.244.1.20", NULL);
		pods[n++].ce_marking = true;
		pods[n++] = mkpod("train-b", "0f8fad5b-d9cb-469f-a165-70867728950e", CLASS_TRAINING, "10.244.1.21",
		                  "fd00:10:244:1::21");
	}
	pods[n++] = mkpod("web", "7c9e6679-7425-40de-944b-e07fc1f90ae7", CLASS_DEFAULT, "10.244.1.30", NULL);
	return n;
}

/* Many pods: every third inference, the rest training, every tenth default;
 * even ones dual-stack. UIDs look like UUIDs. */
static void many_pods(struct node_pod *pods, unsigned n, unsigned seed)
{
	for (unsigned i = 0; i < n; i++) {
		char uid[64], name[64], v4[32], v6[64];
		unsigned k = i + seed;
		enum workload_class c = k % 10 == 9 ? CLASS_DEFAULT : k % 3 == 0 ? CLASS_INFERENCE : CLASS_TRAINING;

		snprintf(uid, sizeof(uid), "%08x-%04x-4%03x-8%03x-%012x", k * 2654435761u, k & 0xffff, k & 0xfff,
		         (k * 7) & 0xfff, k);
		snprintf(name, sizeof(name), "pod-%u", k);
		snprintf(v4, sizeof(v4), "10.%u.%u.%u", 100 + k / 65536, (k / 256) % 256, k % 256);
		snprintf(v6, sizeof(v6), "fd00:10:244::%x", k + 1);
		pods[i] = mkpod(name, uid, c, v4, k % 2 == 0 ? v6 : NULL);
	}
}

/* single-queue links keep the single-root structures; multi-queue ones get mq */
static const struct uplink_facts NIC_10G = {.ifname = "ens5", .speed_bps = 10000000000ULL, .tx_queues = 1, .mtu = 1500};
static const struct uplink_facts VETH = {
        .ifname = "eth0", .speed_bps = 0, .is_virtual = true, .tx_queues = 1, .mtu = 1500};
static const struct uplink_facts NIC_MQ = {.ifname = "ens5", .speed_bps = 100000000000ULL, .tx_queues = 4, .mtu = 1500};
/* a veth says 10000 Mb/s whatever it carries */
static const struct uplink_facts VETH_SPEED = {
        .ifname = "eth0", .speed_bps = 10000000000ULL, .is_virtual = true, .tx_queues = 1, .mtu = 1500};
static const struct uplink_facts VETH_MQ = {
        .ifname = "eth0", .speed_bps = 10000000000ULL, .is_virtual = true, .tx_queues = 4, .mtu = 1500};
/* the same veth as the kernel makes it: root noqueue (nothing ever waits there) */
static const struct uplink_facts VETH_MQ_NOQ = {.ifname = "eth0",
                                                .speed_bps = 10000000000ULL,
                                                .is_virtual = true,
                                                .tx_queues = 4,
                                                .mtu = 1500,
                                                .no_queue = true};
/* a 4-queue veth whose ifb the agent could not create: HTB at the root */
static const struct uplink_facts VETH_MQ_NOIFB = {
        .ifname = "eth0", .is_virtual = true, .tx_queues = 4, .mtu = 1500, .ifb_up_failed = true};

static struct plan_caps caps_full(void)
{
	return (struct plan_caps){0};
}

/* The CI kernel: no fq, fq_codel, prio */
static struct plan_caps caps_ci(void)
{
	struct plan_caps c = {0};

	plan_caps_mark_missing(&c, TC_KIND_FQ);
	plan_caps_mark_missing(&c, TC_KIND_FQ_CODEL);
	plan_caps_mark_missing(&c, TC_KIND_PRIO);
	return c;
}

struct scenario {
	const char *name;
	uint64_t rate_bps;
	const struct uplink_facts *up;
	bool ci;
	enum node_shape shape[_MODE_MAX];
};

static const struct scenario scenarios[] = {
        /* uplinkRate on a real NIC, full kernel */
        {"shaped", 500000000ULL, &NIC_10G, false, {SHAPE_NONE, SHAPE_HTB, SHAPE_HTB, SHAPE_HTB}},
        /* veth of unknown rate, no uplinkRate, full kernel */
        {"virtual", 0, &VETH, false, {SHAPE_NONE, SHAPE_ROOT_AQM, SHAPE_ROOT_AQM, SHAPE_PRIO}},
        /* real 10G NIC, link speed, full kernel: work-conserving */
        {"nic", 0, &NIC_10G, false, {SHAPE_NONE, SHAPE_ROOT_AQM, SHAPE_ROOT_AQM, SHAPE_PRIO}},
        /* real 10G NIC on the CI kernel: mixed falls back to HTB at link speed */
        {"ci", 0, &NIC_10G, true, {SHAPE_NONE, SHAPE_NONE, SHAPE_NONE, SHAPE_HTB}},
        /* the P4 lab: veth + uplinkRate 500mbit on the CI kernel */
        {"lab", 500000000ULL, &VETH, true, {SHAPE_NONE, SHAPE_HTB, SHAPE_HTB, SHAPE_HTB}},
        /* a veth's reported 10000 Mb/s is not a rate: not shaped (no HTB at 9.7 Gbit/s) */
        {"veth-speed", 0, &VETH_SPEED, true, {SHAPE_NONE, SHAPE_NONE, SHAPE_NONE, SHAPE_NONE}},
        /* multi-queue NIC, full kernel: mq with per-queue children in every mode */
        {"nic-mq", 0, &NIC_MQ, false, {SHAPE_NONE, SHAPE_MQ, SHAPE_MQ, SHAPE_MQ}},
        /* multi-queue NIC, CI kernel: no fq/fq_codel for the children; mixed gets pfifo_fast + classifier */
        {"ci-mq", 0, &NIC_MQ, true, {SHAPE_NONE, SHAPE_NONE, SHAPE_NONE, SHAPE_MQ}},
        /* the line-rate bench's uplink: a 4-queue veth, not shaped */
        {"veth-mq", 0, &VETH_MQ, false, {SHAPE_NONE, SHAPE_MQ, SHAPE_MQ, SHAPE_MQ}},
        {"veth-mq-ci", 0, &VETH_MQ, true, {SHAPE_NONE, SHAPE_NONE, SHAPE_NONE, SHAPE_MQ}},
        /* the operator asked for a shaper, no fq: the gated HTB on its ifb, the root left as it is */
        {"veth-mq-100g", 100000000000ULL, &VETH_MQ, true, {SHAPE_NONE, SHAPE_HTB_IFB, SHAPE_HTB_IFB, SHAPE_HTB_IFB}},
        /* ... and HTB at the root where the agent has no ifb for it */
        {"veth-mq-100g-noifb", 100000000000ULL, &VETH_MQ_NOIFB, true, {SHAPE_NONE, SHAPE_HTB, SHAPE_HTB, SHAPE_HTB}},
        /* a noqueue root (veth, bond, VLAN): no unshaped tree in any mode, on any kernel */
        {"noqueue", 0, &VETH_MQ_NOQ, false, {SHAPE_NONE, SHAPE_NONE, SHAPE_NONE, SHAPE_NONE}},
        {"noqueue-ci", 0, &VETH_MQ_NOQ, true, {SHAPE_NONE, SHAPE_NONE, SHAPE_NONE, SHAPE_NONE}},
        {"noqueue-100g",
         100000000000ULL,
         &VETH_MQ_NOQ,
         true,
         {SHAPE_NONE, SHAPE_HTB_IFB, SHAPE_HTB_IFB, SHAPE_HTB_IFB}},
        /* a shaper on several queues where fq is: EDT (mq + fq per queue, the stamping classifier) */
        {"veth-mq-100g-full", 100000000000ULL, &VETH_MQ, false, {SHAPE_NONE, SHAPE_EDT, SHAPE_EDT, SHAPE_EDT}},
        {"noqueue-100g-full", 100000000000ULL, &VETH_MQ_NOQ, false, {SHAPE_NONE, SHAPE_EDT, SHAPE_EDT, SHAPE_EDT}},
        {"nic-mq-shaped", 10000000000ULL, &NIC_MQ, false, {SHAPE_NONE, SHAPE_EDT, SHAPE_EDT, SHAPE_EDT}},
};

static int plan_for(const struct scenario *sc, enum node_classify cl, enum node_mode mode, const struct node_pod *pods,
                    unsigned n, struct plan *np, struct node_plan_info *info)
{
	struct plan_caps caps = sc->ci ? caps_ci() : caps_full();
	struct node_config cfg;
	struct error e = {0};
	int r;

	uplink_only_config(&cfg);
	cfg.uplink_rate_bps = sc->rate_bps;
	cfg.classify = cl;
	r = node_plan(pods, n, &cfg, sc->up, &caps, mode, NULL, np, info, &e);
	if (r < 0)
		fprintf(stderr, "  node_plan(%s, %s): %s\n", sc->name, node_mode_name(mode), e.msg);
	return r;
}

/* Rendering: an info header, then the plan through plan_render(). */
static char *render(const struct plan *np, const struct node_plan_info *info)
{
	_cleanup_free_ char *txt = NULL;
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	if (!f) {
		free(out);
		return NULL;
	}
	fprintf(f, "# mode %s, shape %s, rate %" PRIu64 " bit/s (%s), shaped %" PRIu64 " bit/s\n",
	        node_mode_name(info->mode), node_shape_name(info->shape), info->rate_bps,
	        info->rate_configured ? "uplinkRate" : "link", info->shaped_bps);
	fprintf(f, "# pods %u: inference %u, training %u (ce-marking %u), default %u; weights by %s %.0f:%.0f\n",
	        info->counts.n_pods, info->counts.n[CLASS_INFERENCE], info->counts.n[CLASS_TRAINING],
	        info->counts.n_dctcp_training, info->counts.n[CLASS_DEFAULT],
	        node_weight_basis_name(info->shares.basis), info->shares.weight[CLASS_INFERENCE],
	        info->shares.weight[CLASS_TRAINING]);
	fprintf(f,
	        "# shares per mille: inference %u, default %u, training %u; rates: %" PRIu64 " %" PRIu64 " %" PRIu64
	        "\n",
	        info->shares.share_pm[CLASS_INFERENCE], info->shares.share_pm[CLASS_DEFAULT],
	        info->shares.share_pm[CLASS_TRAINING], info->class_rate_bps[CLASS_INFERENCE],
	        info->class_rate_bps[CLASS_DEFAULT], info->class_rate_bps[CLASS_TRAINING]);
	fprintf(f, "# ceilings: %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", info->class_ceil_bps[CLASS_INFERENCE],
	        info->class_ceil_bps[CLASS_DEFAULT], info->class_ceil_bps[CLASS_TRAINING]);
	fprintf(f, "# ce_threshold %uus, filters %u\n", info->ce_threshold_us, info->n_filters);
	if (info->bulk_priority || info->down.bulk_priority)
		fprintf(f,
		        "# bands: threshold %u B, idle %u ms; uplink inference-bulk rate %" PRIu64
		        " priority %#x; download rate %" PRIu64 " priority %#x\n",
		        info->bulk_threshold_bytes, info->bulk_idle_ms, info->bulk_rate_bps, info->bulk_priority,
		        info->down.bulk_rate_bps, info->down.bulk_priority);
	if (info->shape == SHAPE_MQ)
		fprintf(f, "# queues %u, classifier %s\n", info->n_queues, info->classifier ? "bpf" : "none");
	if (info->down.planned)
		fprintf(f,
		        "# download: rate %" PRIu64 " shaped %" PRIu64 "; rates %" PRIu64 " %" PRIu64 " %" PRIu64
		        ", ceilings %" PRIu64 " %" PRIu64 " %" PRIu64 ", filters %u, training rcv window %u\n",
		        info->down.rate_bps, info->down.shaped_bps, info->down.class_rate_bps[CLASS_INFERENCE],
		        info->down.class_rate_bps[CLASS_DEFAULT], info->down.class_rate_bps[CLASS_TRAINING],
		        info->down.class_ceil_bps[CLASS_INFERENCE], info->down.class_ceil_bps[CLASS_DEFAULT],
		        info->down.class_ceil_bps[CLASS_TRAINING], info->down.n_filters, info->down.rcv_window_bytes);
	if (info->down.planned) {
		struct bpf_gate g;

		node_gate_config(info, &g);
		fprintf(f, "# download gate: window %" PRIu64 " ns, threshold %" PRIu64 " B, hold %" PRIu64 " ns\n",
		        g.win_ns, g.threshold_bytes, g.hold_ns);
	}
	if (info->shape == SHAPE_HTB_IFB) {
		struct bpf_gate g;

		node_up_gate_config(info, 7, &g);
		fprintf(f,
		        "# upload gate: window %" PRIu64 " ns, threshold %" PRIu64 " B, hold %" PRIu64
		        " ns, ifb ifindex %" PRIu64 " passes\n",
		        g.win_ns, g.threshold_bytes, g.hold_ns, g.pass_ifindex);
	}
	for (unsigned i = 0; i < info->n_warn; i++)
		fprintf(f, "# warning: %s\n", info->warn[i]);
	CHECK_INT(plan_render(np, NULL, NULL, PLAN_FMT_TEXT, false, &txt), 0);
	if (txt)
		fputs(txt, f);
	fclose(f);
	return out;
}

static const struct plan_item *find(const struct plan *np, const char *id)
{
	return plan_find_const(np, id);
}

static unsigned count_filters(const struct plan *np)
{
	unsigned k = 0;

	for (unsigned i = 0; i < np->n; i++)
		if (np->items[i].n_alt > 0 && np->items[i].tc[0].type == TC_FILTER &&
		    np->items[i].tc[0].kind == TC_KIND_U32)
			k++;
	return k;
}

static unsigned plan_count_pending(const struct plan *np)
{
	unsigned k = 0;

	for (unsigned i = 0; i < np->n; i++)
		k += np->items[i].status == ITEM_PENDING;
	return k;
}

/* ---- names and config ---- */

TEST(node_names)
{
	for (int m = 0; m < _MODE_MAX; m++)
		CHECK_INT(node_mode_from_name(node_mode_name(m)), m);
	CHECK_STR(node_mode_name(MODE_IDLE), "idle");
	CHECK_STR(node_mode_name(MODE_TRAINING), "training");
	CHECK_STR(node_mode_name(MODE_INFERENCE), "inference");
	CHECK_STR(node_mode_name(MODE_MIXED), "mixed");
	CHECK(node_mode_name(_MODE_MAX) == NULL);
	CHECK(node_mode_name(_MODE_INVALID) == NULL);
	CHECK_INT(node_mode_from_name("Mixed"), _MODE_INVALID);
	CHECK_INT(node_mode_from_name(NULL), _MODE_INVALID);
	CHECK_INT(node_classify_from_name("src-ip"), CLASSIFY_SRC_IP);
	CHECK_INT(node_classify_from_name("dscp"), CLASSIFY_DSCP);
	CHECK_INT(node_classify_from_name("srcip"), _CLASSIFY_INVALID);
	CHECK_STR(node_shape_name(SHAPE_ROOT_AQM), "root-aqm");
	CHECK_STR(node_weight_basis_name(WEIGHT_BANDWIDTH), "bandwidth");
}

TEST(node_config_defaults_and_check)
{
	static const struct {
		const char *what;
		double share;
		uint64_t rate;
		int classify, dscp_inf, dscp_train;
		const char *uplink;
		int want;
		const char *msg;
	} cases[] = {
	        {"defaults", 0.3, 0, CLASSIFY_SRC_IP, 46, 10, "auto", 0, NULL},
	        {"share 0", 0.0, 0, CLASSIFY_SRC_IP, 46, 10, "auto", 0, NULL},
	        {"share 1", 1.0, 0, CLASSIFY_SRC_IP, 46, 10, "auto", 0, NULL},
	        {"share > 1", 1.5, 0, CLASSIFY_SRC_IP, 46, 10, "auto", -EINVAL, "inferenceShare: 1.5"},
	        {"share < 0", -0.1, 0, CLASSIFY_SRC_IP, 46, 10, "auto", -EINVAL, "inferenceShare"},
	        {"rate ok", 0.3, 500000000ULL, CLASSIFY_SRC_IP, 46, 10, "eth0", 0, NULL},
	        {"rate tiny", 0.3, 10, CLASSIFY_SRC_IP, 46, 10, "auto", -EINVAL, "uplinkRate: 10 bit/s"},
	        {"classify bad", 0.3, 0, 7, 46, 10, "auto", -EINVAL, "classify"},
	        {"dscp range", 0.3, 0, CLASSIFY_SRC_IP, 64, 10, "auto", -EINVAL, "inference DSCP: 64"},
	        {"dscp same (src-ip ok)", 0.3, 0, CLASSIFY_SRC_IP, 10, 10, "auto", 0, NULL},
	        {"dscp same", 0.3, 0, CLASSIFY_DSCP, 10, 10, "auto", -EINVAL, "same DSCP 10"},
	        {"dscp zero", 0.3, 0, CLASSIFY_DSCP, 46, 0, "auto", -EINVAL, "DSCP 0"},
	        {"uplink empty", 0.3, 0, CLASSIFY_SRC_IP, 46, 10, "", -EINVAL, "uplink"},
	};
	struct node_config cfg;

	node_config_defaults(&cfg);
	CHECK_STR(cfg.uplink, "auto");
	CHECK_INT(cfg.uplink_rate_bps, 0);
	CHECK(cfg.inference_share == 0.3);
	CHECK_INT(cfg.mixed_hold_s, 30);
	CHECK_INT(cfg.debounce_ms, 200);
	CHECK_INT(cfg.classify, CLASSIFY_SRC_IP);
	CHECK_INT(cfg.dscp_inference, 46);
	CHECK_INT(cfg.dscp_training, 10);

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct error e = {0};

		node_config_defaults(&cfg);
		cfg.inference_share = cases[i].share;
		cfg.uplink_rate_bps = cases[i].rate;
		cfg.classify = (enum node_classify)cases[i].classify;
		cfg.dscp_inference = cases[i].dscp_inf;
		cfg.dscp_training = cases[i].dscp_train;
		str_copy(cfg.uplink, sizeof(cfg.uplink), cases[i].uplink);
		if (node_config_check(&cfg, &e) != cases[i].want)
			fprintf(stderr, "  case %s\n", cases[i].what);
		CHECK_INT(node_config_check(&cfg, &e), cases[i].want);
		if (cases[i].msg)
			CHECK_CONTAINS(e.msg, cases[i].msg);
	}
	CHECK_INT(node_config_check(NULL, NULL), -EINVAL);
}

/* ---- mode ---- */

TEST(node_mode_desired_table)
{
	static const struct {
		unsigned inf, train, def;
		enum node_mode want;
	} cases[] = {
	        {0, 0, 0, MODE_IDLE},     {0, 0, 5, MODE_IDLE},      {0, 3, 0, MODE_TRAINING},
	        {0, 3, 5, MODE_TRAINING}, {2, 0, 0, MODE_INFERENCE}, {2, 0, 1, MODE_INFERENCE},
	        {1, 1, 0, MODE_MIXED},    {10, 1, 4, MODE_MIXED},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct node_counts c = {0};

		c.n[CLASS_INFERENCE] = cases[i].inf;
		c.n[CLASS_TRAINING] = cases[i].train;
		c.n[CLASS_DEFAULT] = cases[i].def;
		CHECK_INT(node_mode_desired(&c), cases[i].want);
	}
}

TEST(node_pods_count_basic)
{
	struct node_pod pods[8];
	struct node_counts c;
	unsigned n = fixture_pods(MODE_MIXED, pods);

	pods[0].gpus = 1;
	pods[2].gpus = 4;
	pods[3].egress_bps = 1000000;
	node_pods_count(pods, n, &c);
	CHECK_INT(c.n_pods, 5);
	CHECK_INT(c.n[CLASS_INFERENCE], 2);
	CHECK_INT(c.n[CLASS_TRAINING], 2);
	CHECK_INT(c.n[CLASS_DEFAULT], 1);
	CHECK_INT(c.n_dctcp_training, 1);
	CHECK_INT(c.gpus[CLASS_INFERENCE], 1);
	CHECK_INT(c.gpus[CLASS_TRAINING], 4);
	CHECK_INT(c.n_egress[CLASS_TRAINING], 1);
	CHECK_INT(c.egress_bps[CLASS_TRAINING], 1000000);
	node_pods_count(NULL, 0, &c);
	CHECK_INT(c.n_pods, 0);
}

/* A fake clock walks through transitions; hold 30 s. */
TEST(node_mode_hysteresis)
{
	static const struct {
		int64_t now_ms;
		unsigned inf, train;
		enum node_mode want;
		int64_t want_recheck;
	} steps[] = {
	        {0, 0, 0, MODE_IDLE, -1},
	        {100, 1, 0, MODE_INFERENCE, -1},  /* immediate */
	        {200, 0, 2, MODE_TRAINING, -1},   /* immediate (not mixed) */
	        {1000, 1, 1, MODE_MIXED, -1},     /* entering mixed: immediate */
	        {2000, 1, 0, MODE_MIXED, 31000},  /* held: mixed last needed at 1000 */
	        {10000, 1, 1, MODE_MIXED, -1},    /* needed again: hold restarts */
	        {20000, 0, 1, MODE_MIXED, 40000}, /* flapping within the hold stays mixed */
	        {25000, 1, 0, MODE_MIXED, 40000},
	        {39999, 0, 1, MODE_MIXED, 40000}, /* 1 ms before the end of the hold */
	        {40000, 0, 1, MODE_TRAINING, -1}, /* hold elapsed: leave */
	        {41000, 1, 1, MODE_MIXED, -1},
	        {41001, 0, 0, MODE_MIXED, 71000}, /* all pods gone: still held */
	        {71000, 0, 0, MODE_IDLE, -1},
	        {71001, 0, 0, MODE_IDLE, -1},
	};
	struct node_mode_state s = NODE_MODE_STATE_INIT;

	for (size_t i = 0; i < ARRAY_SIZE(steps); i++) {
		struct node_counts c = {0};
		struct node_mode_state next;
		int64_t recheck;

		c.n[CLASS_INFERENCE] = steps[i].inf;
		c.n[CLASS_TRAINING] = steps[i].train;
		recheck = node_mode_decide(&s, &c, steps[i].now_ms, 30, &next);
		if (next.mode != steps[i].want || recheck != steps[i].want_recheck)
			fprintf(stderr, "  step %zu at %" PRId64 " ms\n", i, steps[i].now_ms);
		CHECK_INT(next.mode, steps[i].want);
		CHECK_INT(recheck, steps[i].want_recheck);
		s = next;
	}
}

TEST(node_mode_hysteresis_edges)
{
	struct node_counts mixed = {0}, train = {0};
	struct node_mode_state s = NODE_MODE_STATE_INIT, next;

	mixed.n[CLASS_INFERENCE] = mixed.n[CLASS_TRAINING] = 1;
	train.n[CLASS_TRAINING] = 1;

	/* hold 0: leave at once */
	node_mode_decide(&s, &mixed, 5000, 0, &s);
	CHECK_INT(s.mode, MODE_MIXED);
	CHECK_INT(node_mode_decide(&s, &train, 5000, 0, &next), -1);
	CHECK_INT(next.mode, MODE_TRAINING);

	/* a clock that went back stays within the hold */
	s = (struct node_mode_state){.mode = MODE_MIXED, .mixed_last_needed_ms = 50000};
	node_mode_decide(&s, &train, 40000, 30, &next);
	CHECK_INT(next.mode, MODE_MIXED);

	/* NULL prev = idle start */
	node_mode_decide(NULL, &train, 0, 30, &next);
	CHECK_INT(next.mode, MODE_TRAINING);

	/* huge hold does not overflow */
	s = (struct node_mode_state){.mode = MODE_MIXED, .mixed_last_needed_ms = INT64_MAX - 10};
	CHECK_INT(node_mode_decide(&s, &train, INT64_MAX - 5, UINT32_MAX, &next), INT64_MAX);
	CHECK_INT(next.mode, MODE_MIXED);
}

/* ---- shares ---- */

TEST(node_shares_table)
{
	/* trainingFloor F, inferenceShare S: floor = F * (0.5 + t), t = the
	 * training weight fraction; floor <= 95% - S; 1..90 %; inference takes
	 * the rest (old policy: inference = max(S, ratio), the rest training) */
	static const struct {
		const char *what;
		enum node_mode mode;
		unsigned n_inf, n_train;
		uint64_t gpu_inf, gpu_train;
		unsigned bw_inf_pods, bw_train_pods; /* pods declaring egress bandwidth */
		uint64_t bw_inf, bw_train;
		double floor, share;
		unsigned inf, def, train;
		enum node_weight_basis basis;
	} cases[] = {
	        {"training dominant 1:9", MODE_MIXED, 1, 9, 0, 0, 0, 0, 0, 0, 0.3, 0.3, 530, 50, 420, WEIGHT_PODS},
	        {"equal counts", MODE_MIXED, 5, 5, 0, 0, 0, 0, 0, 0, 0.3, 0.3, 650, 50, 300, WEIGHT_PODS},
	        {"inference dominant", MODE_MIXED, 9, 1, 0, 0, 0, 0, 0, 0, 0.3, 0.3, 770, 50, 180, WEIGHT_PODS},
	        {"99:1", MODE_MIXED, 99, 1, 0, 0, 0, 0, 0, 0, 0.3, 0.3, 797, 50, 153, WEIGHT_PODS},
	        {"1:99", MODE_MIXED, 1, 99, 0, 0, 0, 0, 0, 0, 0.3, 0.0, 503, 50, 447, WEIGHT_PODS},
	        /* the lab: 1 inference vs 2 training pods (old: inference 333) */
	        {"1 vs 2 pods", MODE_MIXED, 1, 2, 0, 0, 0, 0, 0, 0, 0.3, 0.0, 600, 50, 350, WEIGHT_PODS},
	        {"inferenceShare 1", MODE_MIXED, 1, 1, 0, 0, 0, 0, 0, 0, 0.3, 1.0, 940, 50, 10, WEIGHT_PODS},
	        {"gpus", MODE_MIXED, 1, 1, 1, 3, 0, 0, 0, 0, 0.3, 0.1, 575, 50, 375, WEIGHT_GPUS},
	        {"inferenceShare lowers the floor", MODE_MIXED, 1, 1, 1, 3, 0, 0, 0, 0, 0.3, 0.7, 700, 50, 250,
	         WEIGHT_GPUS},
	        {"gpus beat counts", MODE_MIXED, 3, 1, 0, 8, 0, 0, 0, 0, 0.3, 0.0, 500, 50, 450, WEIGHT_GPUS},
	        {"gpus inference", MODE_MIXED, 1, 3, 6, 2, 0, 0, 0, 0, 0.3, 0.3, 725, 50, 225, WEIGHT_GPUS},
	        {"bandwidth", MODE_MIXED, 2, 1, 0, 0, 2, 1, 200000000, 600000000, 0.3, 0.0, 575, 50, 375,
	         WEIGHT_BANDWIDTH},
	        {"bandwidth partial", MODE_MIXED, 2, 2, 0, 0, 2, 1, 200000000, 600000000, 0.3, 0.0, 650, 50, 300,
	         WEIGHT_PODS},
	        {"held mixed, no inference", MODE_MIXED, 0, 3, 0, 0, 0, 0, 0, 0, 0.3, 0.3, 500, 50, 450, WEIGHT_PODS},
	        {"held mixed, no pods", MODE_MIXED, 0, 0, 0, 0, 0, 0, 0, 0, 0.3, 0.0, 650, 50, 300, WEIGHT_PODS},
	        {"share out of range", MODE_MIXED, 1, 9, 0, 0, 0, 0, 0, 0, 0.3, 7.0, 940, 50, 10, WEIGHT_PODS},
	        {"floor 0", MODE_MIXED, 1, 1, 0, 0, 0, 0, 0, 0, 0.0, 0.0, 940, 50, 10, WEIGHT_PODS},
	        {"floor 1, share 0.3", MODE_MIXED, 1, 1, 0, 0, 0, 0, 0, 0, 1.0, 0.3, 300, 50, 650, WEIGHT_PODS},
	        {"floor 1, clamp 90%", MODE_MIXED, 0, 1, 0, 0, 0, 0, 0, 0, 1.0, 0.0, 50, 50, 900, WEIGHT_PODS},
	        {"floor out of range", MODE_MIXED, 1, 1, 0, 0, 0, 0, 0, 0, -3.0, 0.0, 940, 50, 10, WEIGHT_PODS},
	        {"training mode", MODE_TRAINING, 0, 4, 0, 0, 0, 0, 0, 0, 0.3, 0.3, 0, 50, 950, WEIGHT_PODS},
	        {"inference mode", MODE_INFERENCE, 4, 0, 0, 0, 0, 0, 0, 0, 0.3, 0.3, 950, 50, 0, WEIGHT_PODS},
	        {"idle", MODE_IDLE, 0, 0, 0, 0, 0, 0, 0, 0, 0.3, 0.3, 0, 0, 0, WEIGHT_PODS},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct node_counts c = {0};
		struct node_shares s;

		c.n[CLASS_INFERENCE] = cases[i].n_inf;
		c.n[CLASS_TRAINING] = cases[i].n_train;
		c.gpus[CLASS_INFERENCE] = cases[i].gpu_inf;
		c.gpus[CLASS_TRAINING] = cases[i].gpu_train;
		c.n_egress[CLASS_INFERENCE] = cases[i].bw_inf_pods;
		c.n_egress[CLASS_TRAINING] = cases[i].bw_train_pods;
		c.egress_bps[CLASS_INFERENCE] = cases[i].bw_inf;
		c.egress_bps[CLASS_TRAINING] = cases[i].bw_train;
		node_shares_compute(&c, cases[i].floor, cases[i].share, cases[i].mode, &s);
		if (s.share_pm[CLASS_INFERENCE] != cases[i].inf || s.share_pm[CLASS_TRAINING] != cases[i].train ||
		    s.basis != cases[i].basis)
			fprintf(stderr, "  case %s\n", cases[i].what);
		CHECK_INT(s.share_pm[CLASS_INFERENCE], cases[i].inf);
		CHECK_INT(s.share_pm[CLASS_DEFAULT], cases[i].def);
		CHECK_INT(s.share_pm[CLASS_TRAINING], cases[i].train);
		CHECK_INT(s.basis, cases[i].basis);
		if (cases[i].mode != MODE_IDLE)
			CHECK_INT(s.share_pm[CLASS_INFERENCE] + s.share_pm[CLASS_DEFAULT] + s.share_pm[CLASS_TRAINING],
			          1000);
	}
}

/* ---- plan structure ---- */

TEST(node_plan_shape_per_scenario)
{
	for (size_t k = 0; k < ARRAY_SIZE(scenarios); k++)
		for (int m = 0; m < _MODE_MAX; m++) {
			_cleanup_plan_ struct plan np = {0};
			struct node_plan_info info;
			struct node_pod pods[8];
			unsigned n = m == MODE_IDLE ? 0 : fixture_pods((enum node_mode)m, pods);

			CHECK_INT(plan_for(&scenarios[k], CLASSIFY_SRC_IP, (enum node_mode)m, pods, n, &np, &info), 0);
			if (info.shape != scenarios[k].shape[m])
				fprintf(stderr, "  %s/%s: shape %s\n", scenarios[k].name, node_mode_name(m),
				        node_shape_name(info.shape));
			CHECK_INT(info.shape, scenarios[k].shape[m]);
			CHECK_INT(info.mode, m);
			if (m == MODE_IDLE || info.shape == SHAPE_NONE) {
				CHECK_INT(np.n, 0);
				continue;
			}
			CHECK(np.n > 0);
			if (info.shape == SHAPE_HTB_IFB) {
				/* the uplink's root stays: its egress hook (classifier, gate, redirect),
				 * then the HTB tree on the ifb */
				static const char *const hook[] = {"uplink.clsact", "uplink.classifier", "uplink.gate",
				                                   "uplink.redirect", "shaper.root"};

				for (unsigned i = 0; i < ARRAY_SIZE(hook) && i < np.n; i++) {
					CHECK_STR(np.items[i].id, hook[i]);
					CHECK_INT(np.items[i].dev, i < 4 ? DEV_UPLINK : DEV_IFB_UP);
				}
				CHECK_INT(np.items[4].tc[0].kind, TC_KIND_HTB);
				CHECK_INT(np.items[4].tc[0].parent, TC_H_ROOT);
				CHECK_STR(np.items[2].tc[0].u.bpf.name, BPF_GATE_UP_NAME);
				CHECK_STR(np.items[3].tc[0].u.u32.redirect_dev, PLAN_IFB_UP_NAME);
				CHECK_INT(np.items[3].tc[0].parent, TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS));
				CHECK(info.classifier);
				CHECK_INT(info.n_filters, 0);
				CHECK_INT(info.up_gate_bps, info.shaped_bps / 2);
			} else {
				/* the first item is the root qdisc, on the uplink */
				CHECK_STR(np.items[0].id, "uplink.root");
				CHECK_INT(np.items[0].tc[0].parent, TC_H_ROOT);
				CHECK_INT(np.items[0].tc[0].handle, 0x10000);
				CHECK_INT(info.up_gate_bps, 0);
			}
			for (unsigned i = 0; i < np.n; i++) {
				const struct plan_item *it = &np.items[i];

				CHECK_INT(it->dev, strncmp(it->id, "shaper.", 7) == 0 ? DEV_IFB_UP : DEV_UPLINK);
				CHECK_INT(it->type, ITEM_TC);
				CHECK_INT(it->status, ITEM_PENDING);
				CHECK_INT(it->chosen, -1);
				CHECK(it->n_alt >= 1 && it->n_alt <= PLAN_ALT_MAX);
				/* a dependency is an earlier item */
				if (it->depends[0]) {
					const struct plan_item *d = find(&np, it->depends);
					CHECK(d != NULL && d < it);
				}
				/* every alternative is the same object */
				for (unsigned a = 1; a < it->n_alt; a++) {
					CHECK_INT(it->tc[a].type, it->tc[0].type);
					CHECK_INT(it->tc[a].parent, it->tc[0].parent);
					CHECK_INT(it->tc[a].handle, it->tc[0].handle);
				}
				/* ids are unique */
				for (unsigned j = 0; j < i; j++)
					CHECK(!streq(np.items[j].id, it->id));
			}
		}
}

/* The P4 lab numbers: uplinkRate 500mbit -> HTB at 495 Mbit/s (99 %). */
TEST(node_plan_htb_numbers)
{
	_cleanup_plan_ struct plan np = {0};
	struct node_plan_info info;
	struct node_pod pods[8];
	unsigned n = fixture_pods(MODE_MIXED, pods);
	const struct plan_item *it;

	CHECK_INT(plan_for(&scenarios[4], CLASSIFY_SRC_IP, MODE_MIXED, pods, n, &np, &info), 0);
	CHECK_INT(info.shape, SHAPE_HTB);
	CHECK_INT(info.rate_bps, 500000000);
	CHECK_INT(info.shaped_bps, 495000000);
	/* 2 vs 2 pods: training floor 5 % (trainingFloor 0.05 x 1), inference the rest (old: 50 %) */
	CHECK_INT(info.shares.share_pm[CLASS_TRAINING], 50);
	CHECK_INT(info.shares.share_pm[CLASS_INFERENCE], 900);
	/* 900 per mille, less the inference-bulk band's training floor (BANDS) */
	CHECK_INT(info.class_rate_bps[CLASS_INFERENCE], 445500000 - 24750000);
	CHECK_INT(info.bulk_rate_bps, 24750000);
	CHECK_INT(info.bulk_priority, 0x10011);
	CHECK_INT(info.bulk_threshold_bytes, 1048576);
	CHECK_INT(info.bulk_idle_ms, 20);
	CHECK_INT(info.class_rate_bps[CLASS_DEFAULT], 24750000);
	CHECK_INT(info.class_rate_bps[CLASS_TRAINING], 24750000);
	for (int c = 0; c < _CLASS_MAX; c++)
		CHECK_INT(info.class_ceil_bps[c], 495000000);
	CHECK_INT(info.ce_threshold_us, 1000);
	CHECK_INT(info.n_warn, 0);

	it = find(&np, "uplink.root");
	CHECK(it && it->tc[0].kind == TC_KIND_HTB);
	if (it) {
		CHECK_INT(it->tc[0].u.htb.defcls, 0x20);
		CHECK_INT(it->tc[0].u.htb.r2q, 10);
	}
	it = find(&np, "uplink.class.parent");
	CHECK(it != NULL);
	if (it) {
		CHECK_INT(it->tc[0].handle, 0x10001);
		CHECK_INT(it->tc[0].parent, 0x10000);
		CHECK_INT(it->tc[0].u.htb_class.rate_bps, 495000000);
		CHECK_INT(it->tc[0].u.htb_class.ceil_bps, 495000000);
		CHECK_INT(it->tc[0].u.htb_class.burst_bytes, 131072); /* 2 ms = 123750 < 2 GSO */
		CHECK_INT(it->tc[0].u.htb_class.quantum_bytes, 61875);
	}
	it = find(&np, "uplink.class.inference");
	CHECK(it != NULL);
	if (it) {
		CHECK_INT(it->tc[0].handle, 0x10010);
		CHECK_INT(it->tc[0].parent, 0x10001);
		CHECK_INT(it->tc[0].u.htb_class.prio, 0);
		CHECK_INT(it->tc[0].u.htb_class.rate_bps, 420750000);
		CHECK_INT(it->tc[0].u.htb_class.ceil_bps, 495000000);
		CHECK_INT(it->tc[0].u.htb_class.quantum_bytes, 52593);
		/* a cluster of responses stays green, without the parent's tokens:
		 * the inference leaf's floor (512 KiB), not 2 ms of the rate */
		CHECK_INT(it->tc[0].u.htb_class.burst_bytes, 524288);
		CHECK_INT(it->tc[0].u.htb_class.cburst_bytes, 524288);
	}
	it = find(&np, "uplink.class.default");
	CHECK(it && it->tc[0].handle == 0x10020 && it->tc[0].u.htb_class.prio == 1);
	if (it) {
		CHECK_INT(it->tc[0].u.htb_class.quantum_bytes, 3093);
		CHECK_INT(it->tc[0].u.htb_class.burst_bytes, 131072);
	}
	it = find(&np, "uplink.class.training");
	CHECK(it && it->tc[0].handle == 0x10030 && it->tc[0].u.htb_class.prio == 2);
	if (it) {
		CHECK_INT(it->tc[0].u.htb_class.rate_bps, 24750000);
		CHECK_INT(it->tc[0].u.htb_class.ceil_bps, 495000000);
		CHECK_INT(it->tc[0].u.htb_class.burst_bytes, 131072);
		CHECK_INT(it->tc[0].u.htb_class.cburst_bytes, 131072);
		/* its quantum against the band's (below) */
		CHECK_INT(it->tc[0].u.htb_class.quantum_bytes, 4 * NODE_BAND_QUANTUM_MIN_BYTES);
	}
	/* BANDS: training's prio (the excess shared by quantum, bulkWeight 0.25:
	 * a quarter of training's), training's floor as its rate, training's
	 * leaf kinds */
	it = find(&np, "uplink.class.inference-bulk");
	CHECK(it && it->tc[0].handle == 0x10011 && it->tc[0].parent == 0x10001 && it->tc[0].u.htb_class.prio == 2);
	if (it) {
		CHECK_INT(it->tc[0].u.htb_class.rate_bps, 24750000);
		CHECK_INT(it->tc[0].u.htb_class.ceil_bps, 495000000);
		CHECK_INT(it->tc[0].u.htb_class.quantum_bytes, NODE_BAND_QUANTUM_MIN_BYTES);
	}
	it = find(&np, "uplink.leaf.inference-bulk");
	CHECK(it && it->n_alt == 3 && it->tc[0].kind == TC_KIND_FQ && it->tc[0].u.fq.ce_threshold_us == 0 &&
	      it->tc[2].handle == 0x110000 && it->tc[2].parent == 0x10011);
	/* CI kernel: the AQM alternatives stay listed first (the applier skips
	 * them and records the byte FIFO as degraded); the FIFO is last */
	it = find(&np, "uplink.leaf.inference");
	CHECK(it && it->n_alt == 2 && it->tc[1].kind == TC_KIND_BFIFO);
	if (it) {
		CHECK_INT(it->tc[1].parent, 0x10010);
		CHECK_INT(it->tc[1].handle, 0x100000);
		/* 20 ms at the link's shaped rate (old: 128 KiB, less than one 256 KiB response) */
		CHECK_INT(it->tc[1].u.fifo.limit, 1237500);
		CHECK_STR(it->depends, "uplink.class.inference");
	}
	it = find(&np, "uplink.leaf.default");
	CHECK(it && it->n_alt == 2 && it->tc[1].u.fifo.limit == 309375);
	it = find(&np, "uplink.leaf.training");
	CHECK(it && it->n_alt == 3 && it->tc[2].u.fifo.limit == 1237500 && it->tc[2].handle == 0x300000);
}

/* Issue 11: 1 inference pod next to 2 training pods, 256 KiB responses at
 * ~40 % of a 500 Mbit/s link. The old policy guaranteed inference 33 % and
 * HTB made that its limit under load; its byte FIFO was 128 KiB. */
TEST(node_plan_inference_not_capped_by_its_share)
{
	_cleanup_plan_ struct plan np = {0};
	struct node_plan_info info;
	struct node_pod pods[3];
	const struct plan_item *it;
	uint64_t load = 500000000ULL * 4 / 10;

	pods[0] = mkpod("inf", "0b9a36b4-0000-4000-8000-000000000001", CLASS_INFERENCE, "10.88.0.10", NULL);
	pods[1] = mkpod("t0", "0b9a36b4-0000-4000-8000-000000000002", CLASS_TRAINING, "10.88.0.11", NULL);
	pods[2] = mkpod("t1", "0b9a36b4-0000-4000-8000-000000000003", CLASS_TRAINING, "10.88.0.12", NULL);
	CHECK_INT(plan_for(&scenarios[4], CLASSIFY_SRC_IP, MODE_MIXED, pods, 3, &np, &info), 0);
	CHECK_INT(info.shape, SHAPE_HTB);
	/* inference is guaranteed more than its load; training its floor */
	CHECK(info.class_rate_bps[CLASS_INFERENCE] > load);
	CHECK_INT(info.shares.share_pm[CLASS_TRAINING], 58); /* trainingFloor 0.05 x (0.5 + 2/3) */
	CHECK_INT(info.class_rate_bps[CLASS_TRAINING], 495000000ULL * 58 / 1000);
	CHECK(info.class_rate_bps[CLASS_INFERENCE] + info.bulk_rate_bps + info.class_rate_bps[CLASS_DEFAULT] +
	              info.class_rate_bps[CLASS_TRAINING] ==
	      info.shaped_bps);
	/* work conserving: every class may borrow the whole shaped rate */
	for (int c = 0; c < _CLASS_MAX; c++)
		CHECK_INT(info.class_ceil_bps[c], info.shaped_bps);
	it = find(&np, "uplink.class.inference");
	CHECK(it && it->tc[0].u.htb_class.prio == 0 && it->tc[0].u.htb_class.ceil_bps == info.shaped_bps);
	it = find(&np, "uplink.class.training");
	CHECK(it && it->tc[0].u.htb_class.prio == 2 && it->tc[0].u.htb_class.rate_bps == 28710000);
	/* the CI kernel's FIFO holds at least two 256 KiB responses */
	it = find(&np, "uplink.leaf.inference");
	CHECK(it && it->n_alt == 2 && it->tc[1].kind == TC_KIND_BFIFO && it->tc[1].u.fifo.limit >= 2 * 262144);
}

TEST(node_plan_leaves_full_kernel)
{
	_cleanup_plan_ struct plan np = {0};
	struct node_plan_info info;
	struct node_pod pods[8];
	unsigned n = fixture_pods(MODE_MIXED, pods);
	const struct plan_item *it;

	CHECK_INT(plan_for(&scenarios[0], CLASSIFY_SRC_IP, MODE_MIXED, pods, n, &np, &info), 0);
	it = find(&np, "uplink.leaf.inference");
	CHECK(it && it->n_alt == 2 && it->tc[0].kind == TC_KIND_FQ_CODEL && it->tc[1].kind == TC_KIND_BFIFO);
	if (it) {
		CHECK_INT(it->tc[0].u.fq_codel.target_us, 1000);
		CHECK_INT(it->tc[0].u.fq_codel.interval_us, 10000);
		CHECK_INT(it->tc[0].u.fq_codel.limit_pkts, 1024);
		CHECK_INT(it->tc[0].u.fq_codel.ecn, TRI_ON);
		CHECK_INT(it->tc[0].u.fq_codel.ce_threshold_us, 0);
	}
	it = find(&np, "uplink.leaf.training");
	CHECK(it && it->n_alt == 3 && it->tc[0].kind == TC_KIND_FQ && it->tc[1].kind == TC_KIND_FQ_CODEL &&
	      it->tc[2].kind == TC_KIND_BFIFO);
	if (it) {
		CHECK_INT(it->tc[0].u.fq.ce_threshold_us, 1000);
		CHECK_INT(it->tc[1].u.fq_codel.ce_threshold_us, 1000);
	}

	/* without a CE-marking training pod: no threshold */
	pods[2].ce_marking = false;
	CHECK_INT(plan_for(&scenarios[0], CLASSIFY_SRC_IP, MODE_MIXED, pods, n, &np, &info), 0);
	CHECK_INT(info.ce_threshold_us, 0);
	it = find(&np, "uplink.leaf.training");
	CHECK(it && it->tc[0].u.fq.ce_threshold_us == 0 && it->tc[1].u.fq_codel.ce_threshold_us == 0);
}

TEST(node_plan_unshaped_roots)
{
	struct node_pod pods[8];
	unsigned n;
	const struct plan_item *it;

	/* training on a real NIC: root fq | fq_codel, no FIFO, no classes */
	{
		_cleanup_plan_ struct plan np = {0};
		struct node_plan_info info;

		n = fixture_pods(MODE_TRAINING, pods);
		CHECK_INT(plan_for(&scenarios[2], CLASSIFY_SRC_IP, MODE_TRAINING, pods, n, &np, &info), 0);
		CHECK_INT(np.n, 1);
		it = find(&np, "uplink.root");
		CHECK(it && it->n_alt == 2 && it->tc[0].kind == TC_KIND_FQ && it->tc[1].kind == TC_KIND_FQ_CODEL);
		CHECK_INT(info.n_filters, 0);
	}
	/* training on the CI kernel: both known missing -> nothing planned, the
	 * original qdisc stays (shape none, a warning) */
	{
		_cleanup_plan_ struct plan np = {0};
		struct node_plan_info info;

		n = fixture_pods(MODE_TRAINING, pods);
		CHECK_INT(plan_for(&scenarios[3], CLASSIFY_SRC_IP, MODE_TRAINING, pods, n, &np, &info), 0);
		CHECK_INT(np.n, 0);
		CHECK_INT(info.shape, SHAPE_NONE);
		CHECK(info.n_warn >= 1 && strstr(info.warn[0], "the original qdisc stays"));
	}
	/* inference on a veth of unknown rate: root fq_codel, warning */
	{
		_cleanup_plan_ struct plan np = {0};
		struct node_plan_info info;

		n = fixture_pods(MODE_INFERENCE, pods);
		CHECK_INT(plan_for(&scenarios[1], CLASSIFY_SRC_IP, MODE_INFERENCE, pods, n, &np, &info), 0);
		CHECK_INT(np.n, 1);
		it = find(&np, "uplink.root");
		CHECK(it && it->n_alt == 1 && it->tc[0].kind == TC_KIND_FQ_CODEL &&
		      it->tc[0].u.fq_codel.target_us == 1000);
		CHECK_INT(info.n_warn, 1);
		CHECK_CONTAINS(info.warn[0], "set uplinkRate");
	}
	/* mixed on a single-queue veth of unknown rate on the CI kernel: no
	 * prio, no rate, no fq_codel -> nothing planned, the original stays,
	 * two warnings */
	{
		static const struct scenario virt_ci = {"virtual-ci", 0, &VETH, true, {0}};
		_cleanup_plan_ struct plan np = {0};
		struct node_plan_info info;

		n = fixture_pods(MODE_MIXED, pods);
		CHECK_INT(plan_for(&virt_ci, CLASSIFY_SRC_IP, MODE_MIXED, pods, n, &np, &info), 0);
		CHECK_INT(info.shape, SHAPE_NONE);
		CHECK_INT(np.n, 0);
		CHECK_INT(info.n_warn, 2);
		CHECK_CONTAINS(info.warn[0], "the original qdisc stays");
		CHECK_CONTAINS(info.warn[1], "set uplinkRate");
	}
	/* mixed on a 4-queue veth of the CI kernel: mq kept, pfifo_fast per
	 * queue, the BPF classifier; no shaping although the veth says 10gbit */
	{
		static const struct scenario vmq = {"veth-mq-ci", 0, &VETH_MQ, true, {0}};
		_cleanup_plan_ struct plan np = {0};
		struct node_plan_info info;

		n = fixture_pods(MODE_MIXED, pods);
		CHECK_INT(plan_for(&vmq, CLASSIFY_SRC_IP, MODE_MIXED, pods, n, &np, &info), 0);
		CHECK_INT(info.shape, SHAPE_MQ);
		CHECK(info.speed_untrusted && info.rate_bps == 0 && info.shaped_bps == 0);
		CHECK_INT(info.n_queues, 4);
		CHECK(info.classifier);
		CHECK_INT(info.n_filters, 0);
		CHECK_INT(np.n, 1 + 4 + 2);
		it = find(&np, "uplink.root");
		CHECK(it && it->tc[0].kind == TC_KIND_MQ && it->tc[0].handle == 0x10000);
		it = find(&np, "uplink.q.3");
		CHECK(it && it->n_alt == 1 && it->tc[0].kind == TC_KIND_PFIFO_FAST && it->tc[0].parent == 0x10004);
		it = find(&np, "uplink.classifier");
		CHECK(it && it->tc[0].kind == TC_KIND_BPF &&
		      it->tc[0].parent == TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS));
		for (unsigned i = 0; i < np.n; i++)
			CHECK(np.items[i].tc[0].kind != TC_KIND_HTB && np.items[i].tc[0].kind != TC_KIND_U32);
	}
	/* htb known missing with uplinkRate: unshaped layout + warning */
	{
		_cleanup_plan_ struct plan np = {0};
		struct node_plan_info info;
		struct plan_caps caps = {0};
		struct node_config cfg;

		uplink_only_config(&cfg);
		cfg.uplink_rate_bps = 500000000ULL;
		plan_caps_mark_missing(&caps, TC_KIND_HTB);
		n = fixture_pods(MODE_MIXED, pods);
		CHECK_INT(node_plan(pods, n, &cfg, &NIC_10G, &caps, MODE_MIXED, NULL, &np, &info, NULL), 0);
		CHECK_INT(info.shape, SHAPE_PRIO);
		CHECK_CONTAINS(info.warn[0], "htb is unavailable");
	}
}

TEST(node_plan_prio)
{
	_cleanup_plan_ struct plan np = {0};
	struct node_plan_info info;
	struct node_pod pods[8];
	unsigned n = fixture_pods(MODE_MIXED, pods);
	const struct plan_item *it;

	CHECK_INT(plan_for(&scenarios[2], CLASSIFY_SRC_IP, MODE_MIXED, pods, n, &np, &info), 0);
	it = find(&np, "uplink.root");
	CHECK(it && it->n_alt == 1 && it->tc[0].kind == TC_KIND_PRIO);
	if (it) {
		CHECK_INT(it->tc[0].u.prio.bands, 3);
		for (unsigned i = 0; i <= TC_PRIO_MAX; i++)
			CHECK_INT(it->tc[0].u.prio.priomap[i], 1);
	}
	CHECK(find(&np, "uplink.class.parent") == NULL);
	it = find(&np, "uplink.leaf.inference");
	CHECK(it && it->tc[0].parent == 0x10001 && it->tc[0].handle == 0x100000);
	/* FIFO fallback sized at the link speed: 10 Gbit/s * 20 ms, at most 16 MiB */
	CHECK(it && it->n_alt == 2 && it->tc[1].u.fifo.limit == 16u << 20);
	it = find(&np, "uplink.leaf.default");
	CHECK(it && it->tc[0].parent == 0x10002);
	it = find(&np, "uplink.leaf.training");
	CHECK(it && it->tc[0].parent == 0x10003);
	/* a 10G FIFO of 20 ms is capped at 16 MiB */
	CHECK(it && it->n_alt == 3 && it->tc[2].u.fifo.limit == 16u << 20);
	CHECK_INT(info.n_filters, 6);
	for (unsigned i = 0; i < np.n; i++) {
		const struct tc_spec *s = &np.items[i].tc[0];

		if (s->type != TC_FILTER)
			continue;
		CHECK(s->u.u32.classid == 0x10001 || s->u.u32.classid == 0x10003);
	}
}

/* ---- filters ---- */

TEST(node_plan_src_filters_dual_stack)
{
	_cleanup_plan_ struct plan np = {0};
	struct node_plan_info info;
	struct node_pod pods[8];
	unsigned n = fixture_pods(MODE_MIXED, pods), v4 = 0, v6 = 0;

	CHECK_INT(plan_for(&scenarios[0], CLASSIFY_SRC_IP, MODE_MIXED, pods, n, &np, &info), 0);
	CHECK_INT(info.n_filters, 6);
	CHECK_INT(count_filters(&np), 6);
	for (unsigned i = 0; i < n; i++) {
		uint32_t want_class = pods[i].class == CLASS_INFERENCE ? 0x10010 : 0x10030;

		for (unsigned k = 0; k < pods[i].n_ips; k++) {
			char id[PLAN_ID_MAX];
			const struct plan_item *it;
			const struct tc_spec *s;

			CHECK_INT(node_pod_item_id(pods[i].uid, k, id, sizeof(id)), 0);
			it = find(&np, id);
			if (pods[i].class == CLASS_DEFAULT) {
				CHECK(it == NULL); /* default pods ride the default class */
				continue;
			}
			CHECK(it != NULL);
			if (!it)
				continue;
			s = &it->tc[0];
			CHECK_INT(it->n_alt, 1);
			CHECK_STR(it->depends, "uplink.root");
			CHECK_INT(s->type, TC_FILTER);
			CHECK_INT(s->kind, TC_KIND_U32);
			CHECK_INT(s->parent, 0x10000);
			CHECK_INT(s->u.u32.match, U32_MATCH_SRC);
			CHECK_INT(s->u.u32.classid, want_class);
			CHECK_INT(s->u.u32.dscp, -1);
			CHECK(s->handle >= 1 && s->handle <= 0xfff);
			CHECK_INT(s->u.u32.family, pods[i].ips[k].family);
			if (pods[i].ips[k].family == AF_INET) {
				v4++;
				CHECK_INT(s->prio, 10);
				CHECK_INT(s->protocol, ETH_P_IP);
				CHECK_INT(s->u.u32.prefix_len, 32);
				CHECK(memcmp(s->u.u32.addr, pods[i].ips[k].addr, 4) == 0);
			} else {
				v6++;
				CHECK_INT(s->prio, 11);
				CHECK_INT(s->protocol, ETH_P_IPV6);
				CHECK_INT(s->u.u32.prefix_len, 128);
				CHECK(memcmp(s->u.u32.addr, pods[i].ips[k].addr, 16) == 0);
			}
		}
	}
	CHECK_INT(v4, 4);
	CHECK_INT(v6, 2);
	/* handles are unique */
	for (unsigned i = 0; i < np.n; i++)
		for (unsigned j = 0; j < i; j++)
			if (np.items[i].tc[0].type == TC_FILTER && np.items[j].tc[0].type == TC_FILTER)
				CHECK(np.items[i].tc[0].handle != np.items[j].tc[0].handle);
}

TEST(node_plan_filters_only_for_existing_classes)
{
	struct node_pod pods[8];
	unsigned n = fixture_pods(MODE_MIXED, pods);

	/* mode training (e.g. decided before the inference pods arrived):
	 * inference pods have no class and get no filter */
	{
		_cleanup_plan_ struct plan np = {0};
		struct node_plan_info info;

		CHECK_INT(plan_for(&scenarios[0], CLASSIFY_SRC_IP, MODE_TRAINING, pods, n, &np, &info), 0);
		CHECK_INT(info.n_filters, 3);
		CHECK(find(&np, "uplink.class.inference") == NULL);
		for (unsigned i = 0; i < np.n; i++)
			if (np.items[i].tc[0].kind == TC_KIND_U32)
				CHECK_INT(np.items[i].tc[0].u.u32.classid, 0x10030);
	}
	{
		_cleanup_plan_ struct plan np = {0};
		struct node_plan_info info;

		CHECK_INT(plan_for(&scenarios[0], CLASSIFY_SRC_IP, MODE_INFERENCE, pods, n, &np, &info), 0);
		CHECK_INT(info.n_filters, 3);
		CHECK(find(&np, "uplink.class.training") == NULL);
		for (unsigned i = 0; i < np.n; i++)
			if (np.items[i].tc[0].kind == TC_KIND_U32)
				CHECK_INT(np.items[i].tc[0].u.u32.classid, 0x10010);
	}
}

TEST(node_plan_dscp_filters)
{
	static const struct {
		enum node_mode mode;
		unsigned n;
		const char *ids[4];
	} cases[] = {
	        {MODE_MIXED,
	         4,
	         {"uplink.dscp.inference.v4", "uplink.dscp.inference.v6", "uplink.dscp.training.v4",
	          "uplink.dscp.training.v6"}},
	        {MODE_TRAINING, 2, {"uplink.dscp.training.v4", "uplink.dscp.training.v6"}},
	        {MODE_INFERENCE, 2, {"uplink.dscp.inference.v4", "uplink.dscp.inference.v6"}},
	};

	for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
		_cleanup_plan_ struct plan np = {0};
		struct node_plan_info info;
		struct node_pod pods[8];
		unsigned n = fixture_pods(cases[c].mode, pods);

		CHECK_INT(plan_for(&scenarios[0], CLASSIFY_DSCP, cases[c].mode, pods, n, &np, &info), 0);
		CHECK_INT(info.n_filters, cases[c].n);
		CHECK_INT(count_filters(&np), cases[c].n);
		for (unsigned i = 0; i < cases[c].n; i++) {
			const struct plan_item *it = find(&np, cases[c].ids[i]);
			const struct tc_spec *s;
			bool inf = strstr(cases[c].ids[i], "inference") != NULL;
			bool v6 = strstr(cases[c].ids[i], ".v6") != NULL;

			CHECK(it != NULL);
			if (!it)
				continue;
			s = &it->tc[0];
			CHECK_INT(s->u.u32.match, U32_MATCH_DSFIELD);
			CHECK_INT(s->u.u32.tos, inf ? 46 << 2 : 10 << 2);
			CHECK_INT(s->u.u32.classid, inf ? 0x10010 : 0x10030);
			CHECK_INT(s->u.u32.family, v6 ? AF_INET6 : AF_INET);
			CHECK_INT(s->protocol, v6 ? ETH_P_IPV6 : ETH_P_IP);
			CHECK_INT(s->prio, v6 ? 21 : 20);
			CHECK_INT(s->u.u32.dscp, -1);
		}
	}
}

TEST(node_plan_errors)
{
	struct node_pod pods[8];
	struct node_config cfg;
	struct plan np = {0};
	struct error e = {0};
	unsigned n = fixture_pods(MODE_MIXED, pods);

	uplink_only_config(&cfg);

	pods[1] = pods[0];
	str_copy(pods[1].name, sizeof(pods[1].name), "infer-dup");
	CHECK_INT(node_plan(pods, n, &cfg, &NIC_10G, NULL, MODE_MIXED, NULL, &np, NULL, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "same UID 1b4e28ba-2fa1-11d2-883f-0016d3cca427");
	CHECK_INT(np.n, 0);
	CHECK(np.items == NULL);

	n = fixture_pods(MODE_MIXED, pods);
	pods[3].ips[1].family = AF_UNIX;
	CHECK_INT(node_plan(pods, n, &cfg, &NIC_10G, NULL, MODE_MIXED, NULL, &np, NULL, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "pod ml/train-b: address 1 has family");

	n = fixture_pods(MODE_MIXED, pods);
	pods[0].n_ips = 5;
	CHECK_INT(node_plan(pods, n, &cfg, &NIC_10G, NULL, MODE_MIXED, NULL, &np, NULL, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "5 addresses");

	n = fixture_pods(MODE_MIXED, pods);
	pods[0].class = _CLASS_MAX;
	CHECK_INT(node_plan(pods, n, &cfg, &NIC_10G, NULL, MODE_MIXED, NULL, &np, NULL, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "invalid class");

	n = fixture_pods(MODE_MIXED, pods);
	pods[0].uid[0] = '\0';
	CHECK_INT(node_plan(pods, n, &cfg, &NIC_10G, NULL, MODE_MIXED, NULL, &np, NULL, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "UID");

	n = fixture_pods(MODE_MIXED, pods);
	CHECK_INT(node_plan(pods, n, &cfg, &NIC_10G, NULL, _MODE_MAX, NULL, &np, NULL, &e), -EINVAL);
	CHECK_INT(node_plan(pods, n, &cfg, NULL, NULL, MODE_MIXED, NULL, &np, NULL, &e), -EINVAL);
	CHECK_INT(node_plan(NULL, 3, &cfg, &NIC_10G, NULL, MODE_MIXED, NULL, &np, NULL, &e), -EINVAL);
	cfg.inference_share = 2;
	CHECK_INT(node_plan(pods, n, &cfg, &NIC_10G, NULL, MODE_MIXED, NULL, &np, NULL, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "inferenceShare");
	CHECK_INT(np.n, 0);

	/* a failed plan leaves the previous one in place */
	uplink_only_config(&cfg);
	CHECK_INT(node_plan(pods, n, &cfg, &NIC_10G, NULL, MODE_MIXED, NULL, &np, NULL, &e), 0);
	CHECK(np.n > 0);
	cfg.inference_share = -1;
	CHECK_INT(node_plan(pods, n, &cfg, &NIC_10G, NULL, MODE_MIXED, NULL, &np, NULL, &e), -EINVAL);
	CHECK(np.n > 0);
	plan_free(&np);
	CHECK(np.items == NULL && np.n == 0);
	plan_free(&np); /* twice is fine */
}

TEST(node_plan_too_many_filters)
{
	unsigned n = 1024;
	struct node_pod *pods = calloc(n, sizeof(*pods));
	struct node_config cfg;
	struct plan np = {0};
	struct error e = {0};

	CHECK(pods != NULL);
	if (!pods)
		return;
	many_pods(pods, n, 0);
	for (unsigned i = 0; i < n; i++) {
		pods[i].class = i % 2 ? CLASS_INFERENCE : CLASS_TRAINING;
		pods[i].n_ips = 4; /* 4096 addresses > 4095 node ids */
		for (unsigned k = 0; k < 4; k++) {
			pods[i].ips[k].family = AF_INET6;
			pods[i].ips[k].addr[0] = 0xfd;
			pods[i].ips[k].addr[14] = (uint8_t)(i >> 8);
			pods[i].ips[k].addr[15] = (uint8_t)k;
		}
	}
	uplink_only_config(&cfg);
	CHECK_INT(node_plan(pods, n, &cfg, &NIC_10G, NULL, MODE_MIXED, NULL, &np, NULL, &e), -E2BIG);
	CHECK_CONTAINS(e.msg, "4096 pod addresses to classify, at most 4095");
	/* one fewer address fits exactly: every node id is used once */
	pods[0].n_ips = 3;
	CHECK_INT(node_plan(pods, n, &cfg, &NIC_10G, NULL, MODE_MIXED, NULL, &np, NULL, &e), 0);
	CHECK_INT(count_filters(&np), 4095);
	{
		static bool seen[4096];

		memset(seen, 0, sizeof(seen));
		for (unsigned i = 0; i < np.n; i++) {
			const struct tc_spec *s = &np.items[i].tc[0];

			if (s->type != TC_FILTER)
				continue;
			CHECK(s->handle >= 1 && s->handle <= 0xfff && !seen[s->handle]);
			if (s->handle <= 0xfff)
				seen[s->handle] = true;
		}
	}
	/* with dscp classification the pod count does not matter */
	pods[0].n_ips = 4;
	cfg.classify = CLASSIFY_DSCP;
	CHECK_INT(node_plan(pods, n, &cfg, &NIC_10G, NULL, MODE_MIXED, NULL, &np, NULL, &e), 0);
	CHECK_INT(count_filters(&np), 4);
	plan_free(&np);
	free(pods);
}

TEST(node_pod_item_id_format)
{
	char id[PLAN_ID_MAX], uid[64];

	memset(uid, 'f', 63);
	uid[63] = '\0';
	CHECK_INT(node_pod_item_id(uid, 3, id, sizeof(id)), 0);
	CHECK_INT(strlen(id), 29);
	CHECK(strncmp(id, "uplink.pod.", 11) == 0);
	CHECK_STR(id + 27, ".3");
	CHECK_INT(node_pod_item_id("a", 0, id, 8), -ENOBUFS);
	/* stable across runs and builds (FNV-1a 64 of the UID) */
	CHECK_INT(node_pod_item_id("1b4e28ba-2fa1-11d2-883f-0016d3cca427", 0, id, sizeof(id)), 0);
	{
		char again[PLAN_ID_MAX];
		CHECK_INT(node_pod_item_id("1b4e28ba-2fa1-11d2-883f-0016d3cca427", 0, again, sizeof(again)), 0);
		CHECK_STR(id, again);
		CHECK_INT(node_pod_item_id("1b4e28ba-2fa1-11d2-883f-0016d3cca428", 0, again, sizeof(again)), 0);
		CHECK(!streq(id, again));
	}
}

/* ---- determinism, handles, incrementality ---- */

static bool plans_identical(const struct plan *a, const struct plan *b)
{
	if (a->n != b->n)
		return false;
	for (unsigned i = 0; i < a->n; i++)
		if (!node_item_same_desired(&a->items[i], &b->items[i]))
			return false;
	return true;
}

TEST(node_plan_order_independent)
{
	unsigned n = 60;
	struct node_pod *pods = calloc(n, sizeof(*pods)), *rev = calloc(n, sizeof(*rev));
	_cleanup_plan_ struct plan a = {0}, b = {0};
	struct node_plan_info info;

	CHECK(pods && rev);
	if (!pods || !rev) {
		free(pods);
		free(rev);
		return;
	}
	many_pods(pods, n, 7);
	for (unsigned i = 0; i < n; i++)
		rev[i] = pods[n - 1 - i];
	CHECK_INT(plan_for(&scenarios[4], CLASSIFY_SRC_IP, MODE_MIXED, pods, n, &a, &info), 0);
	CHECK_INT(plan_for(&scenarios[4], CLASSIFY_SRC_IP, MODE_MIXED, rev, n, &b, &info), 0);
	CHECK(plans_identical(&a, &b));
	/* filters come in pod-UID order, addresses in order */
	{
		unsigned f = 0;

		while (f < a.n && a.items[f].tc[0].type != TC_FILTER)
			f++;
		for (unsigned i = 0; i < n; i++) {
			const struct node_pod *min = NULL;

			/* selection of the i-th smallest UID */
			for (unsigned j = 0; j < n; j++) {
				unsigned smaller = 0;
				for (unsigned q = 0; q < n; q++)
					smaller += strcmp(pods[q].uid, pods[j].uid) < 0;
				if (smaller == i)
					min = &pods[j];
			}
			CHECK(min != NULL);
			if (!min || min->class == CLASS_DEFAULT)
				continue;
			for (unsigned k = 0; k < min->n_ips; k++, f++) {
				char id[PLAN_ID_MAX];

				node_pod_item_id(min->uid, k, id, sizeof(id));
				CHECK(f < a.n);
				if (f < a.n)
					CHECK_STR(a.items[f].id, id);
			}
		}
		/* then the classifier: clsact and its program */
		CHECK_INT(f + 2, a.n);
		CHECK_STR(a.items[a.n - 1].id, "uplink.classifier");
	}
	free(pods);
	free(rev);
}

/* Find a UID whose first filter takes the same node id as `uid`'s. */
/* The plan's last u32 filter (a pod's, in these one-pod plans) */
static const struct plan_item *last_filter(const struct plan *np)
{
	for (unsigned i = np->n; i-- > 0;)
		if (np->items[i].tc[0].kind == TC_KIND_U32)
			return &np->items[i];
	return &np->items[0];
}

static bool find_colliding_uid(const char *uid, char *ret, size_t size)
{
	struct node_config cfg;
	struct node_pod a = mkpod("a", uid, CLASS_TRAINING, "10.0.0.1", NULL);
	_cleanup_plan_ struct plan pa = {0}, pb = {0};
	uint32_t ha;

	uplink_only_config(&cfg);
	cfg.uplink_rate_bps = 1000000000ULL;
	if (node_plan(&a, 1, &cfg, &NIC_10G, NULL, MODE_TRAINING, NULL, &pa, NULL, NULL) < 0)
		return false;
	ha = last_filter(&pa)->tc[0].handle;
	for (unsigned i = 0; i < 200000; i++) {
		char cand[64];
		struct node_pod b;

		/* "0..." sorts before the UIDs used below ("a...") */
		snprintf(cand, sizeof(cand), "0-candidate-%u", i);
		b = mkpod("b", cand, CLASS_TRAINING, "10.0.0.2", NULL);
		if (node_plan(&b, 1, &cfg, &NIC_10G, NULL, MODE_TRAINING, NULL, &pb, NULL, NULL) < 0)
			return false;
		if (last_filter(&pb)->tc[0].handle == ha) {
			str_copy(ret, size, cand);
			return true;
		}
	}
	return false;
}

TEST(node_plan_handle_collisions)
{
	const char *uid_a = "a1b2c3d4-0000-4000-8000-000000000001";
	char uid_b[64];
	struct node_config cfg;
	struct node_pod pods[2];
	_cleanup_plan_ struct plan p1 = {0}, p2 = {0}, p3 = {0}, p4 = {0};
	char id_a[PLAN_ID_MAX], id_b[PLAN_ID_MAX];
	const struct plan_item *ia, *ib;
	uint32_t ha;

	CHECK(find_colliding_uid(uid_a, uid_b, sizeof(uid_b)));
	uplink_only_config(&cfg);
	cfg.uplink_rate_bps = 1000000000ULL;
	node_pod_item_id(uid_a, 0, id_a, sizeof(id_a));
	node_pod_item_id(uid_b, 0, id_b, sizeof(id_b));

	pods[0] = mkpod("a", uid_a, CLASS_TRAINING, "10.0.0.1", NULL);
	CHECK_INT(node_plan(pods, 1, &cfg, &NIC_10G, NULL, MODE_TRAINING, NULL, &p1, NULL, NULL), 0);
	ia = find(&p1, id_a);
	CHECK(ia != NULL);
	if (!ia)
		return;
	ha = ia->tc[0].handle;

	/* B (sorting first) collides with A. Without the plan in force, the
	 * pure function of the set lets B take the slot and A probes on... */
	pods[1] = mkpod("b", uid_b, CLASS_TRAINING, "10.0.0.2", NULL);
	CHECK_INT(node_plan(pods, 2, &cfg, &NIC_10G, NULL, MODE_TRAINING, NULL, &p2, NULL, NULL), 0);
	ia = find(&p2, id_a);
	ib = find(&p2, id_b);
	CHECK(ia && ib);
	if (ia && ib) {
		CHECK_INT(ib->tc[0].handle, ha);
		CHECK_INT(ia->tc[0].handle, ha % 0xfff + 1);
	}
	/* ... with prev, A keeps its handle and B probes instead */
	CHECK_INT(node_plan(pods, 2, &cfg, &NIC_10G, NULL, MODE_TRAINING, &p1, &p3, NULL, NULL), 0);
	ia = find(&p3, id_a);
	ib = find(&p3, id_b);
	CHECK(ia && ib);
	if (ia && ib) {
		CHECK_INT(ia->tc[0].handle, ha);
		CHECK_INT(ib->tc[0].handle, ha % 0xfff + 1);
	}
	/* deterministic: the same inputs give the same handles, also with
	 * the plan itself as prev and as output (in place) */
	CHECK_INT(node_plan(pods, 2, &cfg, &NIC_10G, NULL, MODE_TRAINING, &p1, &p4, NULL, NULL), 0);
	CHECK(plans_identical(&p3, &p4));
	CHECK_INT(node_plan(pods, 2, &cfg, &NIC_10G, NULL, MODE_TRAINING, &p4, &p4, NULL, NULL), 0);
	CHECK(plans_identical(&p3, &p4));
}

static void check_only(const struct plan *old, const struct plan *new_, unsigned n_added, unsigned n_removed,
                       const char *added_uid, const char *removed_uid)
{
	struct node_plan_delta d;

	CHECK_INT(node_plan_delta(old, new_, &d), 0);
	CHECK_INT(d.n_added, n_added);
	CHECK_INT(d.n_removed, n_removed);
	CHECK_INT(d.n_changed, 0);
	CHECK_INT(d.n_same + d.n_added, new_->n);
	CHECK_INT(d.n_same + d.n_removed, old->n);
	for (unsigned i = 0; i < d.n_added; i++) {
		char id[PLAN_ID_MAX];
		node_pod_item_id(added_uid, 0, id, sizeof(id));
		/* "uplink.pod.<H>." prefix of the added pod */
		CHECK(strncmp(new_->items[d.added[i]].id, id, 28) == 0);
	}
	for (unsigned i = 0; i < d.n_removed; i++) {
		char id[PLAN_ID_MAX];
		node_pod_item_id(removed_uid, 0, id, sizeof(id));
		CHECK(strncmp(old->items[d.removed[i]].id, id, 28) == 0);
	}
	/* every other item, handle included, is identical */
	for (unsigned i = 0; i < old->n; i++) {
		const struct plan_item *o = &old->items[i], *nw = plan_find_const(new_, o->id);

		if (!nw)
			continue;
		CHECK(node_item_same_desired(o, nw));
		CHECK_INT(nw->tc[0].handle, o->tc[0].handle);
	}
	node_plan_delta_free(&d);
}

TEST(node_plan_incremental)
{
	unsigned n = 50;
	struct node_pod *pods = calloc(n + 1, sizeof(*pods));
	struct node_config cfg;
	struct node_plan_info info;
	_cleanup_plan_ struct plan p0 = {0}, p1 = {0}, p2 = {0}, p3 = {0};
	struct plan_caps caps = caps_ci();

	CHECK(pods != NULL);
	if (!pods)
		return;
	/* 10 inference, 35 training, 5 default: inferenceShare 0.8 caps a
	 * trainingFloor of 0.2 (25 % for these weights) at 15 %, so one pod more
	 * or less does not move the class rates */
	many_pods(pods, n, 0);
	for (unsigned i = 0; i < n; i++)
		pods[i].class = i < 10 ? CLASS_INFERENCE : i < 45 ? CLASS_TRAINING : CLASS_DEFAULT;
	uplink_only_config(&cfg);
	cfg.uplink_rate_bps = 500000000ULL;
	cfg.training_floor = 0.2;
	cfg.inference_share = 0.8;
	CHECK_INT(node_plan(pods, n, &cfg, &VETH, &caps, MODE_MIXED, NULL, &p0, &info, NULL), 0);
	CHECK_INT(info.shares.share_pm[CLASS_INFERENCE], 800);

	/* add one dual-stack training pod */
	pods[n] = mkpod("new", "5e1f0c7a-1111-4222-8333-944455556666", CLASS_TRAINING, "10.200.0.1", "fd00:200::1");
	CHECK_INT(node_plan(pods, n + 1, &cfg, &VETH, &caps, MODE_MIXED, &p0, &p1, &info, NULL), 0);
	CHECK_INT(info.shares.share_pm[CLASS_INFERENCE], 800);
	check_only(&p0, &p1, 2, 0, pods[n].uid, NULL);

	/* remove a dual-stack inference pod (index 0 is dual-stack) */
	CHECK_INT(pods[0].n_ips, 2);
	CHECK_INT(node_plan(pods + 1, n, &cfg, &VETH, &caps, MODE_MIXED, &p1, &p2, &info, NULL), 0);
	check_only(&p1, &p2, 0, 2, NULL, pods[0].uid);

	/* a pod that changes class from training to default loses exactly its filters */
	pods[20].class = CLASS_DEFAULT;
	CHECK_INT(node_plan(pods + 1, n, &cfg, &VETH, &caps, MODE_MIXED, &p2, &p3, &info, NULL), 0);
	check_only(&p2, &p3, 0, pods[20].n_ips, NULL, pods[20].uid);
	free(pods);
}

/* When the weights move the shares, only class rates change (the
 * inference-bulk band's is training's floor: BANDS). */
TEST(node_plan_incremental_shares)
{
	struct node_pod pods[12];
	struct node_config cfg;
	struct node_plan_delta d;
	_cleanup_plan_ struct plan p0 = {0}, p1 = {0};

	many_pods(pods, 12, 0);
	for (unsigned i = 0; i < 11; i++)
		pods[i].class = i < 5 ? CLASS_INFERENCE : CLASS_TRAINING;
	pods[11].class = CLASS_INFERENCE;
	uplink_only_config(&cfg);
	cfg.uplink_rate_bps = 500000000ULL;
	CHECK_INT(node_plan(pods, 11, &cfg, &NIC_10G, NULL, MODE_MIXED, NULL, &p0, NULL, NULL), 0);
	CHECK_INT(node_plan(pods, 12, &cfg, &NIC_10G, NULL, MODE_MIXED, &p0, &p1, NULL, NULL), 0);
	CHECK_INT(node_plan_delta(&p0, &p1, &d), 0);
	CHECK_INT(d.n_added, pods[11].n_ips);
	CHECK_INT(d.n_removed, 0);
	CHECK_INT(d.n_changed, 3);
	for (unsigned i = 0; i < d.n_changed; i++) {
		const char *id = p1.items[d.changed[i]].id;
		CHECK(streq(id, "uplink.class.inference") || streq(id, "uplink.class.training") ||
		      streq(id, "uplink.class.inference-bulk"));
	}
	/* plan order: parents first */
	for (unsigned i = 1; i < d.n_changed; i++)
		CHECK(d.changed[i - 1] < d.changed[i]);
	node_plan_delta_free(&d);
}

/* Replacing a qdisc by another kind destroys what hangs under it: the
 * delta lists every dependent as changed; same-kind changes stay local. */
TEST(node_plan_delta_recreate)
{
	struct node_pod pods[8];
	unsigned n = fixture_pods(MODE_MIXED, pods);
	_cleanup_plan_ struct plan full = {0}, ci = {0}, old = {0};
	struct node_plan_info info;
	struct node_plan_delta d;

	/* lab link, full kernel vs CI kernel: the same items (capabilities only
	 * change structure, e.g. prio vs HTB, never the alternatives listed) */
	{
		struct scenario full_sc = scenarios[4];

		full_sc.ci = false;
		CHECK_INT(plan_for(&full_sc, CLASSIFY_SRC_IP, MODE_MIXED, pods, n, &full, &info), 0);
		CHECK_INT(plan_for(&scenarios[4], CLASSIFY_SRC_IP, MODE_MIXED, pods, n, &ci, &info), 0);
	}
	CHECK_INT(node_plan_delta(&full, &ci, &d), 0);
	CHECK_INT(d.n_added, 0);
	CHECK_INT(d.n_removed, 0);
	CHECK_INT(d.n_changed, 0);
	CHECK_INT(d.n_same, ci.n);
	node_plan_delta_free(&d);

	/* the same plan over a root of another kind: everything under it is
	 * redone (the clsact hook and its classifier, last, do not hang there) */
	CHECK_INT(plan_for(&scenarios[4], CLASSIFY_SRC_IP, MODE_MIXED, pods, n, &old, &info), 0);
	CHECK_STR(ci.items[ci.n - 1].id, "uplink.classifier");
	old.items[0].tc[0].kind = TC_KIND_PRIO;
	CHECK_INT(node_plan_delta(&old, &ci, &d), 0);
	CHECK_INT(d.n_changed, ci.n - 2);
	CHECK_INT(d.n_same, 2);
	for (unsigned i = 0; i < d.n_changed; i++)
		CHECK_INT(d.changed[i], i);
	node_plan_delta_free(&d);
	for (unsigned i = 0; i < old.n; i++) {
		old.items[i].status = ITEM_APPLIED;
		old.items[i].chosen = 0;
	}
	/* what the kernel said travels with the outcome: a fallback carried
	 * over keeps "the kind is unknown" (its reason stays "kernel lacks") */
	old.items[ci.n - 1].err = ENOENT;
	old.items[ci.n - 1].unknown = true;
	CHECK_INT(node_plan_carry_effective(&ci, &old), 2);
	CHECK_INT(plan_count_pending(&ci), ci.n - 2);
	CHECK(ci.items[ci.n - 1].unknown && ci.items[ci.n - 1].err == ENOENT);

	/* prio (full kernel NIC) -> HTB (prio learned missing): all redone,
	 * the old leaves' and filters' ids survive but not their objects */
	{
		_cleanup_plan_ struct plan prio = {0}, htb = {0};
		struct plan_caps caps = {0};
		struct node_config cfg;

		uplink_only_config(&cfg);
		CHECK_INT(node_plan(pods, n, &cfg, &NIC_10G, &caps, MODE_MIXED, NULL, &prio, NULL, NULL), 0);
		plan_caps_mark_missing(&caps, TC_KIND_PRIO);
		CHECK_INT(node_plan(pods, n, &cfg, &NIC_10G, &caps, MODE_MIXED, &prio, &htb, NULL, NULL), 0);
		CHECK_INT(node_plan_delta(&prio, &htb, &d), 0);
		CHECK_INT(d.n_same, 0);
		CHECK_INT(d.n_removed, 0);
		CHECK_INT(d.n_added, 8); /* parent + 4 classes (BANDS), the band's leaf, clsact + the classifier */
		CHECK_INT(d.n_changed + d.n_added, htb.n);
		node_plan_delta_free(&d);
	}
}

TEST(node_plan_carry_and_render)
{
	unsigned n = 120;
	struct node_pod *pods = calloc(n, sizeof(*pods));
	struct node_config cfg;
	_cleanup_plan_ struct plan p0 = {0}, p1 = {0};
	_cleanup_free_ char *txt = NULL;
	_cleanup_json_ cJSON *j = NULL;
	unsigned total = 0;

	CHECK(pods != NULL);
	if (!pods)
		return;
	many_pods(pods, n, 3);
	uplink_only_config(&cfg);
	cfg.uplink_rate_bps = 1000000000ULL;
	cfg.training_floor = 0.3; /* a floor the new pod moves by at least 0.1 % */
	CHECK_INT(node_plan(pods, n - 1, &cfg, &NIC_10G, NULL, MODE_MIXED, NULL, &p0, NULL, NULL), 0);
	for (unsigned i = 0; i < p0.n; i++) {
		p0.items[i].status = ITEM_APPLIED;
		p0.items[i].chosen = 0;
	}
	CHECK_INT(node_plan(pods, n, &cfg, &NIC_10G, NULL, MODE_MIXED, &p0, &p1, NULL, NULL), 0);
	/* the new pod moves the pod-count shares: the three class items
	 * (inference-bulk's rate is training's floor) changed and must be
	 * re-applied, everything else carries over */
	{
		struct node_plan_delta d;

		CHECK_INT(node_plan_delta(&p0, &p1, &d), 0);
		CHECK_INT(d.n_changed, 3);
		CHECK_INT(d.n_removed, 0);
		CHECK_INT(node_plan_carry_effective(&p1, &p0), (int)d.n_same);
		CHECK_INT(d.n_same, p0.n - 3);
		node_plan_delta_free(&d);
	}
	for (unsigned i = 0; i < p1.n; i++) {
		const struct plan_item *o = plan_find_const(&p0, p1.items[i].id);
		bool same = o && node_item_same_desired(o, &p1.items[i]);

		CHECK_INT(p1.items[i].status, same ? ITEM_APPLIED : ITEM_PENDING);
		CHECK_INT(p1.items[i].chosen, same ? 0 : -1);
		if (o && !same)
			CHECK(strncmp(p1.items[i].id, "uplink.class.", 13) == 0);
	}
	/* a plan of more than a hundred items renders whole, one line per item in
	 * plan order, and as one JSON array */
	CHECK(p1.n > 100);
	CHECK_INT(plan_render(&p1, NULL, NULL, PLAN_FMT_TEXT, false, &txt), 0);
	for (const char *l = txt; l && *l; total++) {
		const char *nl = strchr(l, '\n');

		if (total < p1.n)
			CHECK(strncmp(l, p1.items[total].id, strlen(p1.items[total].id)) == 0 &&
			      l[strlen(p1.items[total].id)] == ' ');
		l = nl ? nl + 1 : l + strlen(l);
	}
	CHECK_INT(total, p1.n);
	j = plan_to_json(&p1, NULL, false);
	CHECK_INT(cJSON_GetArraySize(j), p1.n);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(j, (int)p1.n - 1), "id")),
	          p1.items[p1.n - 1].id);
	free(pods);
}

/* Shaped classes count the Ethernet framing the kernel does not see
 * (uplinkOverhead, default 24 bytes); 0 turns it off. */
/* HTB's classifier: planned last (after the u32 fallback) where clsact
 * and bpf are available and no `ingress` qdisc holds the hook; each class's
 * skb->priority is its HTB handle (a class the mode lacks: the default). */
TEST(node_plan_htb_classifier)
{
	struct node_pod pods[8];
	unsigned n = fixture_pods(MODE_MIXED, pods);
	struct node_config cfg;
	struct uplink_facts held = NIC_10G;

	uplink_only_config(&cfg);
	cfg.uplink_rate_bps = 1000000000ULL;
	held.ingress_held = true;
	for (int k = 0; k < 4; k++) {
		_cleanup_plan_ struct plan np = {0};
		struct plan_caps caps = {0};
		struct node_plan_info info;
		enum node_mode mode = k == 3 ? MODE_TRAINING : MODE_MIXED;
		bool want = k == 0 || k == 3;

		if (k == 1)
			plan_caps_mark_missing(&caps, TC_KIND_BPF);
		CHECK_INT(node_plan(pods, n, &cfg, k == 2 ? &held : &NIC_10G, &caps, mode, NULL, &np, &info, NULL), 0);
		CHECK_INT(info.shape, SHAPE_HTB);
		CHECK(info.classifier == want);
		CHECK((find(&np, "uplink.classifier") != NULL) == want);
		CHECK((find(&np, "uplink.clsact") != NULL) == want);
		CHECK_INT(count_filters(&np), info.n_filters); /* the u32 filters in every case */
		if (!want || np.n < 2)
			continue;
		CHECK_STR(np.items[np.n - 1].id, "uplink.classifier");
		CHECK_INT(info.cls_priority[CLASS_DEFAULT], 0x10020);
		CHECK_INT(info.cls_priority[CLASS_TRAINING], 0x10030);
		CHECK_INT(info.cls_priority[CLASS_INFERENCE], mode == MODE_MIXED ? 0x10010 : 0x10020);
	}
	/* an `ingress` qdisc on a multi-queue uplink: no mq layout in mixed (it needs the classifier) */
	{
		_cleanup_plan_ struct plan np = {0};
		struct uplink_facts mq = NIC_MQ;
		struct node_plan_info info;

		uplink_only_config(&cfg);
		mq.ingress_held = true;
		CHECK_INT(node_plan(pods, n, &cfg, &mq, NULL, MODE_MIXED, NULL, &np, &info, NULL), 0);
		CHECK(info.shape != SHAPE_MQ && !info.classifier);
	}
}

TEST(node_plan_htb_link_overhead)
{
	struct plan_caps caps = caps_ci();
	struct node_pod pods[8];
	unsigned n = fixture_pods(MODE_MIXED, pods), classes = 0;
	struct node_config cfg;

	test_config_defaults(&cfg);
	CHECK_INT(cfg.overhead_bytes, 24);
	cfg.uplink_rate_bps = 500000000ULL;
	for (int k = 0; k < 2; k++) {
		_cleanup_plan_ struct plan np = {0};

		if (k == 1)
			cfg.overhead_bytes = 0;
		CHECK_INT(node_plan(pods, n, &cfg, &VETH, &caps, MODE_MIXED, NULL, &np, NULL, NULL), 0);
		for (unsigned i = 0; i < np.n; i++)
			if (np.items[i].tc[0].kind == TC_KIND_HTB_CLASS) {
				CHECK_INT(np.items[i].tc[0].u.htb_class.overhead_bytes, k == 0 ? 24 : 0);
				classes++;
			}
	}
	CHECK_INT(classes, 20); /* the uplink tree and the download tree (with the bulk band), twice */
	cfg.overhead_bytes = NODE_OVERHEAD_MAX + 1;
	CHECK_INT(node_config_check(&cfg, NULL), -EINVAL);
}

/* ---- golden plans ---- */

TEST(node_plan_golden)
{
	static const enum node_mode modes[] = {MODE_TRAINING, MODE_INFERENCE, MODE_MIXED};

	for (size_t k = 0; k < ARRAY_SIZE(scenarios); k++)
		for (size_t m = 0; m < ARRAY_SIZE(modes); m++)
			for (int cl = 0; cl < _CLASSIFY_MAX; cl++) {
				_cleanup_plan_ struct plan np = {0};
				struct node_plan_info info;
				struct node_pod pods[8];
				unsigned n = fixture_pods(modes[m], pods);
				char name[128];
				char *text;

				CHECK_INT(
				        plan_for(&scenarios[k], (enum node_classify)cl, modes[m], pods, n, &np, &info),
				        0);
				text = render(&np, &info);
				CHECK(text != NULL);
				if (!text)
					continue;
				if (info.classifier) {
					struct node_config cfg;
					_cleanup_free_ struct bpf_cls_entry *ents = NULL;
					unsigned n_ents = 0;
					char *more = NULL;

					test_config_defaults(&cfg);
					cfg.classify = (enum node_classify)cl;
					CHECK_INT(node_cls_entries(pods, n, &cfg, &info, &ents, &n_ents), 0);
					for (unsigned e = 0; e < n_ents; e++) {
						char addr[64] = "";
						const struct bpf_cls_key *key = &ents[e].key;

						if (key->kind == BPF_CLS_KEY_SRC4 || key->kind == BPF_CLS_KEY_SRC6)
							inet_ntop(key->kind == BPF_CLS_KEY_SRC4 ? AF_INET : AF_INET6,
							          key->addr, addr, sizeof(addr));
						else if (key->kind == BPF_CLS_KEY_DSCP)
							snprintf(addr, sizeof(addr), "dscp %u", key->addr[0]);
						else if (key->kind == BPF_CLS_KEY_BAND)
							snprintf(addr, sizeof(addr), "bulk band of priority %u",
							         key->addr[0] | key->addr[1] << 8 |
							                 (unsigned)key->addr[2] << 16 |
							                 (unsigned)key->addr[3] << 24);
						else if (key->kind == BPF_CLS_KEY_BAND_CFG)
							snprintf(addr, sizeof(addr), "band %s",
							         key->addr[0] == BPF_BAND_CFG_BYTES
							                 ? "threshold (bytes)"
							                 : "idle (us)");
						else
							snprintf(addr, sizeof(addr), "default");
						if (asprintf(&more, "%s# classifier: %s -> priority %u\n", text, addr,
						             ents[e].priority) < 0)
							more = NULL;
						CHECK(more != NULL);
						if (more) {
							free(text);
							text = more;
						}
					}
				}
				if (info.shape == SHAPE_EDT) {
					struct node_config cfg;
					struct bpf_edt edt;
					char *more = NULL;

					test_config_defaults(&cfg);
					node_edt_config(&cfg, &info, &edt);
					if (asprintf(&more,
					             "%s# edt: link %" PRIu64 " (2^-20 ns/B), inference %" PRIu64
					             ", horizon %" PRIu64 " ns, overhead %u B, inference priority %u\n",
					             text, edt.link_q20, edt.inf_q20, edt.horizon_ns, edt.overhead,
					             edt.inf_priority) < 0)
						more = NULL;
					CHECK(more != NULL);
					if (more) {
						free(text);
						text = more;
					}
				}
				snprintf(name, sizeof(name), "node-%s-%s-%s.txt", node_mode_name(modes[m]),
				         scenarios[k].name, node_classify_name((enum node_classify)cl));
				t_golden_check(name, text);
				free(text);
			}
	{
		_cleanup_plan_ struct plan np = {0};
		struct node_plan_info info;
		struct node_pod pods[8];
		unsigned n = fixture_pods(MODE_IDLE, pods); /* only a default pod */
		char *text;

		CHECK_INT(plan_for(&scenarios[0], CLASSIFY_SRC_IP, MODE_IDLE, pods, n, &np, &info), 0);
		CHECK_INT(np.n, 0);
		text = render(&np, &info);
		CHECK(text != NULL);
		if (text)
			t_golden_check("node-idle.txt", text);
		free(text);
	}
}

/* ---- the download direction ---- */

static int plan_down(const struct node_config *cfg, const struct uplink_facts *up, bool ci, enum node_mode mode,
                     const struct node_pod *pods, unsigned n, const struct plan *prev, struct plan *np,
                     struct node_plan_info *info)
{
	struct plan_caps caps = ci ? caps_ci() : caps_full();
	struct error e = {0};
	int r = node_plan(pods, n, cfg, up, &caps, mode, prev, np, info, &e);

	if (r < 0)
		fprintf(stderr, "  node_plan: %s\n", e.msg);
	return r;
}

static unsigned count_prefix(const struct plan *np, const char *pfx, enum plan_dev dev)
{
	unsigned k = 0;

	for (unsigned i = 0; i < np->n; i++)
		if (strncmp(np->items[i].id, pfx, strlen(pfx)) == 0 && np->items[i].dev == dev)
			k++;
	return k;
}

/* The lab's uplink: a veth with uplinkRate 500mbit, the ifb created (ifindex 42) */
static const struct uplink_facts VETH_IFB = {.ifname = "uplink",
                                             .speed_bps = 10000000000ULL,
                                             .is_virtual = true,
                                             .tx_queues = 1,
                                             .mtu = 1500,
                                             .ifb_ifindex = 42};

TEST(node_plan_downlink_items)
{
	_cleanup_plan_ struct plan np = {0};
	struct node_plan_info info;
	struct node_config cfg;
	struct node_pod pods[8];
	unsigned n = fixture_pods(MODE_MIXED, pods);
	const struct plan_item *it;

	test_config_defaults(&cfg);
	cfg.uplink_rate_bps = 500000000ULL;
	cfg.downlink_rate_bps = 400000000ULL; /* downlinkRate wins over uplinkRate */
	CHECK_INT(plan_down(&cfg, &VETH_IFB, true, MODE_MIXED, pods, n, NULL, &np, &info), 0);
	CHECK(info.down.planned);
	CHECK_INT(info.down.rate_bps, 400000000);
	CHECK_INT(info.down.shaped_bps, 392000000);
	/* the same guarantees as the uplink, at the download rate */
	CHECK_INT(info.down.class_rate_bps[CLASS_TRAINING], 392000000ULL * 50 / 1000);
	CHECK_INT(info.down.class_rate_bps[CLASS_DEFAULT], 392000000ULL * 50 / 1000);
	/* less the inference-bulk band's (training's floor: BANDS) */
	CHECK_INT(info.down.class_rate_bps[CLASS_INFERENCE], 392000000ULL - 3 * 19600000);
	CHECK_INT(info.down.bulk_rate_bps, 19600000);
	CHECK_INT(info.down.bulk_priority, 0x10011);
	it = find(&np, "down.class.inference-bulk");
	CHECK(it && it->dev == DEV_IFB && it->tc[0].u.htb_class.prio == 2 &&
	      it->tc[0].u.htb_class.rate_bps == 19600000);
	it = find(&np, "down.leaf.inference-bulk");
	CHECK(it && it->dev == DEV_IFB && it->tc[0].kind == TC_KIND_FQ_CODEL); /* the ifb's training leaf: no fq */
	CHECK_INT(info.down.class_ceil_bps[CLASS_TRAINING], 392000000);
	/* the hook on the uplink's ingress: clsact (the one the egress
	 * classifier uses too) + match-all redirect to the ifb */
	CHECK(find(&np, "down.hook") == NULL);
	it = find(&np, "uplink.clsact");
	CHECK(it && it->dev == DEV_UPLINK && it->tc[0].kind == TC_KIND_CLSACT && it->tc[0].parent == TC_H_CLSACT);
	it = find(&np, "down.redirect");
	CHECK(it && it->dev == DEV_UPLINK && it->n_alt == 1);
	if (it) {
		CHECK_STR(it->depends, "uplink.clsact");
		CHECK_INT(it->tc[0].kind, TC_KIND_U32);
		CHECK_INT(it->tc[0].parent, TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS));
		CHECK_INT(it->tc[0].protocol, ETH_P_ALL);
		CHECK_INT(it->tc[0].u.u32.match, U32_MATCH_ALL);
		CHECK_INT(it->tc[0].u.u32.redirect_ifindex, 42);
		CHECK_STR(it->tc[0].u.u32.redirect_dev, PLAN_IFB_NAME);
	}
	/* the tree on the ifb: htb, classes, AQM leaves with ECN first */
	it = find(&np, "down.root");
	CHECK(it && it->dev == DEV_IFB && it->tc[0].kind == TC_KIND_HTB && it->tc[0].parent == TC_H_ROOT);
	it = find(&np, "down.class.inference");
	CHECK(it && it->dev == DEV_IFB && it->tc[0].u.htb_class.prio == 0 &&
	      it->tc[0].u.htb_class.ceil_bps == 392000000);
	it = find(&np, "down.leaf.inference");
	CHECK(it && it->dev == DEV_IFB && it->tc[0].kind == TC_KIND_FQ_CODEL && it->tc[0].u.fq_codel.ecn == TRI_ON);
	/* training on the ifb: fq_codel ecn (no fq: nothing to pace), a 7 ms FIFO at 392 Mbit/s */
	it = find(&np, "down.leaf.training");
	CHECK(it && it->n_alt == 2 && it->tc[0].kind == TC_KIND_FQ_CODEL && it->tc[0].u.fq_codel.ecn == TRI_ON);
	CHECK(it && it->tc[1].kind == TC_KIND_BFIFO && it->tc[1].u.fifo.limit == 343000);
	/* one filter per pod address, on the DESTINATION, same handles scheme */
	CHECK_INT(count_prefix(&np, "down.pod.", DEV_IFB), 6);
	CHECK_INT(info.down.n_filters, 6);
	for (unsigned i = 0; i < n; i++)
		for (unsigned a = 0; a < pods[i].n_ips; a++) {
			char id[PLAN_ID_MAX];

			CHECK_INT(node_down_pod_item_id(pods[i].uid, a, id, sizeof(id)), 0);
			it = find(&np, id);
			if (pods[i].class == CLASS_DEFAULT) {
				CHECK(it == NULL);
				continue;
			}
			CHECK(it && it->tc[0].u.u32.match == U32_MATCH_DST && it->tc[0].parent == 0x10000);
			if (it)
				CHECK_INT(it->tc[0].u.u32.classid,
				          pods[i].class == CLASS_INFERENCE ? 0x10010 : 0x10030);
		}
	/* uplink items are untouched by the download tree */
	CHECK_INT(count_prefix(&np, "uplink.", DEV_UPLINK),
	          np.n - count_prefix(&np, "down.", DEV_UPLINK) - count_prefix(&np, "down.", DEV_IFB));
}

/* L9: classify "dscp" trusts local pods' marks (trust.c) on the uplink; the
 * download tree classifies by destination pod address all the same, as a
 * mark that arrives was set beyond the node. */
TEST(node_plan_downlink_dscp_classifies_by_destination)
{
	_cleanup_plan_ struct plan np = {0};
	struct node_plan_info info;
	struct node_config cfg;
	struct node_pod pods[8];
	unsigned n = fixture_pods(MODE_MIXED, pods);

	test_config_defaults(&cfg);
	cfg.uplink_rate_bps = 500000000ULL;
	cfg.classify = CLASSIFY_DSCP;
	CHECK_INT(plan_down(&cfg, &VETH_IFB, true, MODE_MIXED, pods, n, NULL, &np, &info), 0);
	CHECK(info.down.planned);
	CHECK(find(&np, "uplink.dscp.inference.v4") != NULL); /* the uplink: by DS field */
	CHECK_INT(count_prefix(&np, "down.dscp.", DEV_IFB), 0);
	CHECK_INT(count_prefix(&np, "down.pod.", DEV_IFB), 6);
	CHECK_INT(info.down.n_filters, 6);
	for (unsigned i = 0; i < np.n; i++)
		if (np.items[i].dev == DEV_IFB && np.items[i].tc[0].kind == TC_KIND_U32)
			CHECK_INT(np.items[i].tc[0].u.u32.match, U32_MATCH_DST);
}

/* L1: the gates' hold covers twice the time the tree's byte FIFOs take to
 * drain at the shaped rate (below ~40 Mbit/s their floors: 512 + 256 + 128
 * KiB), never under NODE_GATE_HOLD_MS, so packets that pass the gate again
 * never overtake the backlog still in the tree. */
TEST(node_gate_hold_covers_the_tree)
{
	static const struct uplink_facts up = {.ifname = "eth0",
	                                       .speed_bps = 10000000000ULL,
	                                       .is_virtual = true,
	                                       .tx_queues = 4,
	                                       .mtu = 1500,
	                                       .ifb_ifindex = 42,
	                                       .ifb_up_ifindex = 43};
	static const struct {
		uint64_t rate_bps;
		uint64_t down_hold_ns, up_hold_ns;
	} cases[] = {
	        /* 2 Mbit/s: the floors, 917504 B, twice at 1.96 (down, 98 %) and 1.98 Mbit/s (up, 99 %) */
	        {2000000, 2ULL * 917504 * 8 * 1000000000 / 1960000, 2ULL * 917504 * 8 * 1000000000 / 1980000},
	        /* 500 Mbit/s: 64 ms and 90 ms of FIFOs twice: the fixed 100 ms */
	        {500000000, 100000000, 100000000},
	        /* 20 Mbit/s: still the floors (917504 B twice at 19.6 / 19.8 Mbit/s) */
	        {20000000, 2ULL * 917504 * 8 * 1000000000 / 19600000, 2ULL * 917504 * 8 * 1000000000 / 19800000},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		_cleanup_plan_ struct plan np = {0};
		struct node_plan_info info;
		struct node_config cfg;
		struct node_pod pods[8];
		unsigned n = fixture_pods(MODE_MIXED, pods);
		struct bpf_gate down, upg;
		uint64_t fifo_sum[2] = {0, 0};
		static const char *const leaves[2][3] = {
		        {"down.leaf.inference", "down.leaf.default", "down.leaf.training"},
		        {"shaper.leaf.inference", "shaper.leaf.default", "shaper.leaf.training"}};

		test_config_defaults(&cfg);
		cfg.uplink_rate_bps = cases[i].rate_bps;
		cfg.downlink_rate_bps = cases[i].rate_bps;
		CHECK_INT(plan_down(&cfg, &up, true, MODE_MIXED, pods, n, NULL, &np, &info), 0);
		CHECK_INT(info.shape, SHAPE_HTB_IFB);
		CHECK(info.down.planned && info.down.gate_bps);
		node_gate_config(&info, &down);
		node_up_gate_config(&info, 43, &upg);
		CHECK_INT(down.hold_ns, cases[i].down_hold_ns);
		CHECK_INT(upg.hold_ns, cases[i].up_hold_ns);
		/* the bound itself, from the plan's own byte FIFOs (each leaf's last alternative) */
		for (int d = 0; d < 2; d++)
			for (int k = 0; k < 3; k++) {
				const struct plan_item *it = find(&np, leaves[d][k]);

				CHECK(it && it->n_alt > 0 && it->tc[it->n_alt - 1].kind == TC_KIND_BFIFO);
				if (it && it->n_alt > 0)
					fifo_sum[d] += it->tc[it->n_alt - 1].u.fifo.limit;
			}
		CHECK(down.hold_ns >= 2 * fifo_sum[0] * 8 * 1000000000ULL / info.down.shaped_bps);
		CHECK(upg.hold_ns >= 2 * fifo_sum[1] * 8 * 1000000000ULL / info.shaped_bps);
		CHECK(down.hold_ns >= 100000000 && upg.hold_ns >= 100000000);
	}
}

/* The training receive window (node.h DOWNLOAD): Rd * 98 % x (RTT + budget),
 * scaled with the rate and the RTT, floored, "off", explicit, and only while
 * the download tree is planned. */
TEST(node_plan_downlink_rcv_window)
{
	struct node_config cfg;
	struct node_pod pods[8];
	unsigned n = fixture_pods(MODE_MIXED, pods);

	/* the lab: 500 Mbit/s, default RTT 150 us: 485 Mbit/s x 150 us + 64 KiB */
	CHECK_INT(node_down_rcv_window(485000000ULL, NODE_DOWN_RTT_US_DEFAULT, NODE_DOWN_RCV_WINDOW_AUTO),
	          9093 + 65536);
	/* 10 Gbit/s: 9.8 Gbit/s x 150 us + 64 KiB (the budget no longer grows with the rate) */
	CHECK_INT(node_down_rcv_window(9800000000ULL, NODE_DOWN_RTT_US_DEFAULT, NODE_DOWN_RCV_WINDOW_AUTO),
	          183750 + 65536);
	/* 100 Gbit/s, 50 us: 97 Gbit/s x 50 us + 64 KiB */
	CHECK_INT(node_down_rcv_window(97000000000ULL, 50, NODE_DOWN_RCV_WINDOW_AUTO), 606250 + 65536);
	/* a WAN-ish 10 ms path at 1 Gbit/s */
	CHECK_INT(node_down_rcv_window(970000000ULL, 10000, NODE_DOWN_RCV_WINDOW_AUTO), 1212500 + 65536);
	/* 10 Mbit/s: the budget */
	CHECK_INT(node_down_rcv_window(9700000ULL, 500, NODE_DOWN_RCV_WINDOW_AUTO), 606 + 65536);
	/* 400 Gbit/s over a 1 s path: the most a u32 holds */
	CHECK_INT(node_down_rcv_window(392000000000ULL, 1000000, NODE_DOWN_RCV_WINDOW_AUTO), NODE_DOWN_RCV_WINDOW_MAX);
	CHECK_INT(node_down_rcv_window(485000000ULL, 500, NODE_DOWN_RCV_WINDOW_OFF), 0);
	CHECK_INT(node_down_rcv_window(485000000ULL, 500, 262144), 262144);
	CHECK_INT(node_down_rcv_window(0, 500, NODE_DOWN_RCV_WINDOW_AUTO), 0);

	test_config_defaults(&cfg);
	cfg.uplink_rate_bps = 500000000ULL;
	{
		_cleanup_plan_ struct plan np = {0};
		struct node_plan_info info;

		CHECK_INT(plan_down(&cfg, &VETH_IFB, true, MODE_MIXED, pods, n, NULL, &np, &info), 0);
		CHECK(info.down.planned);
		CHECK_INT(info.down.rcv_window_bytes, 9187 + 65536); /* 490 Mbit/s x 150 us + 64 KiB */
		/* training gets it; inference twice it while the bands are on; default pods never */
		CHECK_INT(node_down_rcv_bound(&info, CLASS_TRAINING), 9187 + 65536);
		CHECK(info.down.bulk_priority);
		CHECK_INT(node_down_rcv_bound(&info, CLASS_INFERENCE), 2 * (9187 + 65536));
		CHECK_INT(node_down_rcv_bound(&info, CLASS_DEFAULT), 0);
	}
	{
		/* bands off: inference pods are not bounded */
		_cleanup_plan_ struct plan np = {0};
		struct node_plan_info info;
		struct node_config c = cfg;

		c.bulk_threshold_bytes = 0;
		CHECK_INT(plan_down(&c, &VETH_IFB, true, MODE_MIXED, pods, n, NULL, &np, &info), 0);
		CHECK_INT(node_down_rcv_bound(&info, CLASS_TRAINING), 9187 + 65536);
		CHECK_INT(node_down_rcv_bound(&info, CLASS_INFERENCE), 0);
	}
	{
		_cleanup_plan_ struct plan np = {0};
		struct node_plan_info info;
		struct node_config c = cfg;

		c.down_rtt_us = 2000;
		CHECK_INT(plan_down(&c, &VETH_IFB, true, MODE_MIXED, pods, n, NULL, &np, &info), 0);
		CHECK_INT(info.down.rcv_window_bytes, 490000000ULL / 8 * 2000 / 1000000 + 65536);
		c.training_rcv_window = NODE_DOWN_RCV_WINDOW_OFF;
		CHECK_INT(plan_down(&c, &VETH_IFB, true, MODE_MIXED, pods, n, NULL, &np, &info), 0);
		CHECK(info.down.planned);
		CHECK_INT(info.down.rcv_window_bytes, 0);
	}
	{
		/* no download tree, no window */
		_cleanup_plan_ struct plan np = {0};
		struct node_plan_info info;
		struct node_config off = cfg;

		off.downlink = false;
		CHECK_INT(plan_down(&off, &VETH_IFB, true, MODE_MIXED, pods, n, NULL, &np, &info), 0);
		CHECK_INT(info.down.rcv_window_bytes, 0);
	}
	{
		struct error e = {0};
		struct node_config bad = cfg;

		bad.training_rcv_window = 1000;
		CHECK_INT(node_config_check(&bad, &e), -EINVAL);
		CHECK_CONTAINS(e.msg, "trainingRcvWindow");
		bad = cfg;
		bad.down_rtt_us = NODE_DOWN_RTT_US_MAX + 1;
		CHECK_INT(node_config_check(&bad, &e), -EINVAL);
		CHECK_CONTAINS(e.msg, "downlinkRttUs");
	}
}

TEST(node_plan_downlink_when_not)
{
	struct node_config cfg;
	struct node_pod pods[8];
	unsigned n = fixture_pods(MODE_MIXED, pods);
	struct uplink_facts foreign = VETH_IFB;

	foreign.ingress_foreign = true;
	test_config_defaults(&cfg);
	cfg.uplink_rate_bps = 500000000ULL;
	{
		/* "downlink": false */
		_cleanup_plan_ struct plan np = {0};
		struct node_plan_info info;
		struct node_config off = cfg;

		off.downlink = false;
		CHECK_INT(plan_down(&off, &VETH_IFB, true, MODE_MIXED, pods, n, NULL, &np, &info), 0);
		CHECK(!info.down.planned);
		CHECK_INT(count_prefix(&np, "down.", DEV_UPLINK) + count_prefix(&np, "down.", DEV_IFB), 0);
		CHECK_INT(info.n_warn, 0);
	}
	{
		/* no rate configured: a veth's 10000 Mb/s is fiction: warn with the key to set */
		_cleanup_plan_ struct plan np = {0};
		struct node_plan_info info;
		struct node_config norate = cfg;

		norate.uplink_rate_bps = 0;
		CHECK_INT(plan_down(&norate, &VETH_IFB, false, MODE_MIXED, pods, n, NULL, &np, &info), 0);
		CHECK(!info.down.planned);
		CHECK_INT(count_prefix(&np, "down.", DEV_IFB), 0);
		CHECK(info.n_warn >= 1);
		CHECK_CONTAINS(info.warn[info.n_warn - 1], "set \"downlinkRate\"");
		CHECK_CONTAINS(info.warn[info.n_warn - 1], "10gbit");
		CHECK(!node_downlink_wanted(&norate, NULL, MODE_MIXED, NULL));
	}
	{
		/* a foreign ingress qdisc on the uplink: left alone, not shaped */
		_cleanup_plan_ struct plan np = {0};
		struct node_plan_info info;

		CHECK_INT(plan_down(&cfg, &foreign, true, MODE_MIXED, pods, n, NULL, &np, &info), 0);
		CHECK(!info.down.planned);
		CHECK_INT(count_prefix(&np, "down.", DEV_UPLINK), 0);
		CHECK(info.n_warn >= 1);
		CHECK_CONTAINS(info.warn[info.n_warn - 1], "ingress qdisc aiqos did not create");
	}
	{
		/* idle: nothing at all; htb known missing: not wanted */
		_cleanup_plan_ struct plan np = {0};
		struct node_plan_info info;
		struct plan_caps nohtb = caps_ci();

		CHECK_INT(plan_down(&cfg, &VETH_IFB, true, MODE_IDLE, pods, 0, NULL, &np, &info), 0);
		CHECK_INT(np.n, 0);
		CHECK(!node_downlink_wanted(&cfg, NULL, MODE_IDLE, NULL));
		CHECK(node_downlink_wanted(&cfg, NULL, MODE_TRAINING, NULL));
		plan_caps_mark_missing(&nohtb, TC_KIND_HTB);
		CHECK(!node_downlink_wanted(&cfg, &nohtb, MODE_MIXED, NULL));
	}
}

/* A noqueue uplink: no uplink tree without uplinkRate, one warning naming
 * the key; the download tree does not depend on it. */
TEST(node_plan_noqueue_uplink)
{
	struct node_config cfg;
	struct node_pod pods[8];
	unsigned n = fixture_pods(MODE_MIXED, pods);
	struct uplink_facts up = VETH_IFB;

	up.no_queue = true;
	up.tx_queues = 4;
	test_config_defaults(&cfg);
	for (int ci = 0; ci < 2; ci++) {
		_cleanup_plan_ struct plan np = {0};
		struct node_plan_info info;

		CHECK_INT(plan_down(&cfg, &up, ci, MODE_MIXED, pods, n, NULL, &np, &info), 0);
		CHECK_INT(info.shape, SHAPE_NONE);
		CHECK_INT(np.n, 0);
		CHECK_INT(info.n_warn, 2); /* this one, and the download rate unknown */
		CHECK_CONTAINS(info.warn[0], "uplink uplink holds no queue");
		CHECK_CONTAINS(info.warn[0], "set uplinkRate");
		CHECK(strstr(info.warn[0], "is virtual") == NULL);
	}
	{
		/* downlinkRate alone: the download tree, nothing on the uplink's root */
		_cleanup_plan_ struct plan np = {0};
		struct node_plan_info info;

		cfg.downlink_rate_bps = 500000000ULL;
		CHECK_INT(plan_down(&cfg, &up, true, MODE_MIXED, pods, n, NULL, &np, &info), 0);
		CHECK_INT(info.shape, SHAPE_NONE);
		CHECK(info.down.planned);
		CHECK(np.n > 0);
		CHECK_INT(count_prefix(&np, "uplink.", DEV_UPLINK), 0);
		CHECK(count_prefix(&np, "down.", DEV_IFB) > 0);
	}
	{
		/* the operator asked for a shaper: the gated HTB (no fq), no such warning */
		_cleanup_plan_ struct plan np = {0};
		struct node_plan_info info;

		cfg.uplink_rate_bps = 500000000ULL;
		CHECK_INT(plan_down(&cfg, &up, true, MODE_MIXED, pods, n, NULL, &np, &info), 0);
		CHECK_INT(info.shape, SHAPE_HTB_IFB);
		/* one clsact on the uplink: the download's hook is the classifier's */
		CHECK(find(&np, "down.hook") == NULL);
		CHECK_STR(find(&np, "down.redirect")->depends, "uplink.clsact");
		for (unsigned i = 0; i < info.n_warn; i++)
			CHECK(strstr(info.warn[i], "holds no queue") == NULL);
	}
}

/* One pod more adds exactly its uplink and download filters. */
TEST(node_plan_downlink_incremental)
{
	_cleanup_plan_ struct plan p0 = {0}, p1 = {0};
	struct node_plan_info info;
	struct node_config cfg;
	struct node_pod pods[9];
	unsigned n = fixture_pods(MODE_MIXED, pods);
	struct node_plan_delta d;

	test_config_defaults(&cfg);
	cfg.uplink_rate_bps = 500000000ULL;
	cfg.training_floor = 0.2;
	cfg.inference_share = 0.8; /* caps the floor: the new pod does not move the class rates */
	CHECK_INT(plan_down(&cfg, &VETH_IFB, true, MODE_MIXED, pods, n, NULL, &p0, &info), 0);
	pods[n] = mkpod("infer-c", "a1b2c3d4-0000-4000-8000-00000000000c", CLASS_INFERENCE, "10.244.1.12",
	                "fd00:10:244:1::12");
	CHECK_INT(plan_down(&cfg, &VETH_IFB, true, MODE_MIXED, pods, n + 1, &p0, &p1, &info), 0);
	CHECK_INT(node_plan_delta(&p0, &p1, &d), 0);
	CHECK_INT(d.n_removed, 0);
	CHECK_INT(d.n_changed, 0);
	CHECK_INT(d.n_added, 4); /* 2 addresses x (uplink src + download dst) */
	for (unsigned i = 0; i < d.n_added; i++) {
		const struct plan_item *it = &p1.items[d.added[i]];

		CHECK(strstr(it->id, ".pod.") != NULL);
		CHECK(it->dev == (strncmp(it->id, "down.", 5) == 0 ? DEV_IFB : DEV_UPLINK));
	}
	node_plan_delta_free(&d);
}

TEST(node_plan_downlink_golden)
{
	static const enum node_mode modes[] = {MODE_TRAINING, MODE_MIXED};

	for (size_t m = 0; m < ARRAY_SIZE(modes); m++)
		for (int cl = 0; cl < _CLASSIFY_MAX; cl++) {
			_cleanup_plan_ struct plan np = {0};
			struct node_plan_info info;
			struct node_config cfg;
			struct node_pod pods[8];
			unsigned n = fixture_pods(modes[m], pods);
			char name[128];
			char *text;

			test_config_defaults(&cfg);
			cfg.uplink_rate_bps = 500000000ULL;
			cfg.classify = (enum node_classify)cl;
			CHECK_INT(plan_down(&cfg, &VETH_IFB, true, modes[m], pods, n, NULL, &np, &info), 0);
			text = render(&np, &info);
			CHECK(text != NULL);
			if (!text)
				continue;
			snprintf(name, sizeof(name), "node-down-%s-lab-%s.txt", node_mode_name(modes[m]),
			         node_classify_name((enum node_classify)cl));
			t_golden_check(name, text);
			free(text);
		}
}

/* ---- scale ---- */

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

TEST(node_plan_250_pods)
{
	unsigned n = 250, rounds = 20;
	struct node_pod *pods = calloc(n, sizeof(*pods));
	struct node_config cfg;
	struct plan_caps caps = caps_ci();
	struct node_plan_info info;
	_cleanup_plan_ struct plan np = {0}, prev = {0};
	struct node_plan_delta d;
	int64_t t0, t_fresh, t_prev, t_delta;

	CHECK(pods != NULL);
	if (!pods)
		return;
	many_pods(pods, n, 11);
	for (unsigned i = 0; i < n; i++) /* worst case: every pod dual-stack */
		if (pods[i].n_ips == 1) {
			pods[i].ips[1].family = AF_INET6;
			pods[i].ips[1].addr[0] = 0xfd;
			pods[i].ips[1].addr[14] = (uint8_t)(i >> 8);
			pods[i].ips[1].addr[15] = (uint8_t)i;
			pods[i].n_ips = 2;
		}
	uplink_only_config(&cfg);
	cfg.uplink_rate_bps = 500000000ULL;

	t0 = mono_ns();
	for (unsigned r = 0; r < rounds; r++)
		CHECK_INT(node_plan(pods, n, &cfg, &VETH, &caps, MODE_MIXED, NULL, &prev, &info, NULL), 0);
	t_fresh = (mono_ns() - t0) / rounds;
	t0 = mono_ns();
	for (unsigned r = 0; r < rounds; r++)
		CHECK_INT(node_plan(pods, n, &cfg, &VETH, &caps, MODE_MIXED, &prev, &np, &info, NULL), 0);
	t_prev = (mono_ns() - t0) / rounds;
	t0 = mono_ns();
	CHECK_INT(node_plan_delta(&prev, &np, &d), 0);
	t_delta = mono_ns() - t0;
	CHECK_INT(d.n_same, np.n);
	node_plan_delta_free(&d);

	CHECK_INT(info.counts.n_pods, 250);
	CHECK_INT(np.n, 12 + info.n_filters); /* the tree (with the bulk band), the filters, clsact + the classifier */
	printf("  250 pods: %u items (%u filters, %zu KiB), plan %.1f us fresh, %.1f us with prev, delta %.1f us\n",
	       np.n, info.n_filters, np.n * sizeof(struct plan_item) / 1024, t_fresh / 1000.0, t_prev / 1000.0,
	       t_delta / 1000.0);
	free(pods);
}

/* ---- bands inside a class (node.h BANDS) ---- */

/* The band's map entries and the bulk pods' addresses; off with
 * bulkThreshold 0 (no objects, no entries), off outside mixed; bulkWeight
 * scales the band's quantum against training's (both at least a 64 KiB
 * GSO aggregate: HTB serves a class a packet per turn, so quanta under the
 * packets would share per packet whatever the weight). */
TEST(node_plan_bands)
{
	struct node_pod pods[3];
	struct node_config cfg;
	struct plan_caps caps = caps_ci();

	pods[0] = mkpod("inf", "0b9a36b4-0000-4000-8000-000000000001", CLASS_INFERENCE, "10.88.0.10", NULL);
	pods[1] = mkpod("loader", "0b9a36b4-0000-4000-8000-000000000002", CLASS_INFERENCE, "10.88.0.11", NULL);
	pods[2] = mkpod("t0", "0b9a36b4-0000-4000-8000-000000000003", CLASS_TRAINING, "10.88.0.12", NULL);
	pods[1].bulk = true;
	test_config_defaults(&cfg);
	cfg.uplink_rate_bps = 500000000ULL;
	for (int k = 0; k < 5; k++) {
		_cleanup_plan_ struct plan np = {0};
		_cleanup_free_ struct bpf_cls_entry *ents = NULL, *dents = NULL;
		struct node_plan_info info;
		unsigned n_ents = 0, n_dents = 0, bands = 0, loader = 0;
		enum node_mode mode = k == 2 ? MODE_INFERENCE : MODE_MIXED;
		const struct plan_item *t, *bk;

		cfg.bulk_threshold_bytes = k == 1 ? 0 : 262144 * 2;
		cfg.bulk_weight = k == 3 ? 2.0 : k == 4 ? 0.1 : NODE_BULK_WEIGHT_DEFAULT;
		CHECK_INT(node_plan(pods, 3, &cfg, &VETH_IFB, &caps, mode, NULL, &np, &info, NULL), 0);
		CHECK_INT(node_cls_entries(pods, 3, &cfg, &info, &ents, &n_ents), 0);
		CHECK_INT(node_down_cls_entries(pods, 3, &info, &dents, &n_dents), 0);
		for (unsigned i = 0; i < n_ents; i++) {
			if (ents[i].key.kind == BPF_CLS_KEY_BAND) {
				uint32_t from;

				memcpy(&from, ents[i].key.addr, sizeof(from));
				CHECK_INT(from, info.cls_priority[CLASS_INFERENCE]);
				CHECK_INT(ents[i].priority, info.bulk_priority);
				bands++;
			}
			if (ents[i].key.kind == BPF_CLS_KEY_BAND_CFG)
				CHECK_INT(ents[i].priority, ents[i].key.addr[0] == BPF_BAND_CFG_BYTES
				                                    ? 524288
				                                    : NODE_BULK_IDLE_MS_DEFAULT * 1000);
			if (ents[i].key.kind == BPF_CLS_KEY_SRC4 && ents[i].key.addr[3] == 11)
				loader = ents[i].priority;
		}
		for (unsigned i = 0; i < n_dents; i++)
			bands += dents[i].key.kind == BPF_CLS_KEY_BAND;
		t = find(&np, "uplink.class.training");
		bk = find(&np, "uplink.class.inference-bulk");
		if (k == 1 || k == 2) {
			/* off: no band, no entries; the loader is an inference pod */
			CHECK(bk == NULL && find(&np, "down.class.inference-bulk") == NULL);
			CHECK_INT(info.bulk_priority, 0);
			CHECK_INT(info.down.bulk_priority, 0);
			CHECK_INT(bands, 0);
			CHECK_INT(loader, info.cls_priority[CLASS_INFERENCE]);
			continue;
		}
		CHECK_INT(bands, 2); /* the uplink's map and the download's */
		CHECK_INT(info.bulk_priority, 0x10011);
		CHECK_INT(info.down.bulk_priority, 0x10011);
		CHECK_INT(loader, 0x10011); /* ai.workload/bulk: in the band from its first byte */
		CHECK(t != NULL && bk != NULL && find(&np, "down.class.inference-bulk") != NULL);
		if (!t || !bk)
			continue;
		if (k == 0) {
			/* the default, 0.25: training four fifths of what the two share */
			CHECK_INT(bk->tc[0].u.htb_class.quantum_bytes, NODE_BAND_QUANTUM_MIN_BYTES);
			CHECK_INT(t->tc[0].u.htb_class.quantum_bytes, 4 * NODE_BAND_QUANTUM_MIN_BYTES);
		}
		if (k == 3) {
			/* training's at an aggregate, the band's twice that */
			CHECK_INT(t->tc[0].u.htb_class.quantum_bytes, NODE_BAND_QUANTUM_MIN_BYTES);
			CHECK_INT(bk->tc[0].u.htb_class.quantum_bytes, 2 * NODE_BAND_QUANTUM_MIN_BYTES);
		}
		if (k == 4) {
			/* 0.1 x training's would be below an aggregate: training's raised */
			CHECK_INT(bk->tc[0].u.htb_class.quantum_bytes, NODE_BAND_QUANTUM_MIN_BYTES);
			CHECK_INT(t->tc[0].u.htb_class.quantum_bytes, 10 * NODE_BAND_QUANTUM_MIN_BYTES);
		}
	}
}

/* The layouts without HTB classes name training's priority for the band. */
TEST(node_plan_bands_mq_edt)
{
	struct node_pod pods[8];
	unsigned n = fixture_pods(MODE_MIXED, pods);
	struct node_config cfg;
	struct uplink_facts mq = NIC_10G;
	_cleanup_plan_ struct plan np = {0};
	struct node_plan_info info;

	uplink_only_config(&cfg);
	mq.tx_queues = 4;
	CHECK_INT(node_plan(pods, n, &cfg, &mq, NULL, MODE_MIXED, NULL, &np, &info, NULL), 0);
	CHECK_INT(info.shape, SHAPE_MQ);
	CHECK_INT(info.bulk_priority, NODE_CLS_PRIO_TRAINING);
	CHECK_INT(info.bulk_rate_bps, 0);
	CHECK(find(&np, "uplink.class.inference-bulk") == NULL);
	cfg.uplink_rate_bps = 5000000000ULL;
	CHECK_INT(node_plan(pods, n, &cfg, &mq, NULL, MODE_MIXED, NULL, &np, &info, NULL), 0);
	CHECK_INT(info.shape, SHAPE_EDT);
	CHECK_INT(info.bulk_priority, NODE_CLS_PRIO_TRAINING);
}

/* Bad band settings are refused, naming the key and the value. */
TEST(node_config_bands_checked)
{
	struct node_config cfg;
	struct error e = {0};

	node_config_defaults(&cfg);
	CHECK_INT(cfg.bulk_threshold_bytes, 1U << 20); /* on by default: docs/concepts.md, "Inside a class" */
	CHECK_INT(cfg.bulk_idle_ms, 20);
	CHECK_INT(node_config_check(&cfg, &e), 0);
	cfg.bulk_threshold_bytes = 1000;
	CHECK_INT(node_config_check(&cfg, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "bulkThreshold: 1000 bytes");
	cfg.bulk_threshold_bytes = 0; /* off */
	CHECK_INT(node_config_check(&cfg, &e), 0);
	cfg.bulk_idle_ms = 0;
	CHECK_INT(node_config_check(&cfg, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "bulkIdleMs: 0");
	cfg.bulk_idle_ms = 20;
	cfg.bulk_weight = 11;
	CHECK_INT(node_config_check(&cfg, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "bulkWeight: 11");
}
