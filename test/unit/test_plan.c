/* test_plan.c — the per-pod planner, plan rendering, the effective-choices
 * JSON round trip and plan_diff. Plans are compared with golden text in
 * test/unit/golden/ (run from the repository root; AIQOS_UPDATE_GOLDEN=1
 * rewrites them — review the diff before committing). */
#include <linux/if_ether.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "json.h"
#include "plan.h"
#include "t.h"

/* ---- fixtures ---- */

static const struct attach_ifaces ifs_veth = {
        .pod_ifname = "eth0",
        .host_ifname = "veth1a2b3c4d",
        .mtu = 1500,
};

static struct plan_caps caps_full(void)
{
	struct plan_caps c = {0};
	str_copy(c.cc_available, sizeof(c.cc_available), "reno cubic bbr dctcp");
	return c;
}

/* The CI kernel: no fq, fq_codel, prio, pedit/csum, no dctcp. */
static struct plan_caps caps_ci(void)
{
	struct plan_caps c = {0};
	plan_caps_mark_missing(&c, TC_KIND_FQ);
	plan_caps_mark_missing(&c, TC_KIND_FQ_CODEL);
	plan_caps_mark_missing(&c, TC_KIND_PRIO);
	c.missing_pedit = true;
	str_copy(c.cc_available, sizeof(c.cc_available), "reno cubic bbr");
	return c;
}

static void builtin_profile(const char *name, struct profile *ret)
{
	struct profile_set set;
	const struct profile *p;

	profile_set_builtin(&set);
	p = profile_find(&set, name);
	if (!p) {
		fprintf(stderr, "  no built-in profile %s\n", name);
		t_failed_now = 1;
		memset(ret, 0, sizeof(*ret));
		return;
	}
	*ret = *p;
}

static void make_plan(const char *profile, uint64_t egress_bps, uint64_t ingress_bps, const struct plan_caps *caps,
                      struct plan *ret)
{
	struct profile p;
	struct workload w = {0};

	builtin_profile(profile, &p);
	w.class = p.class;
	str_copy(w.profile, sizeof(w.profile), profile);
	w.egress_bps = egress_bps;
	w.ingress_bps = ingress_bps;
	CHECK_INT(plan_pod(&w, &p, &ifs_veth, caps, ret), 0);
}

/* A built-in profile with the operator's rmemMax/wmemMax override. */
static void make_plan_buffers(const char *profile, uint32_t rmem_max, uint32_t wmem_max, const struct plan_caps *caps,
                              struct plan *ret)
{
	struct profile p;
	struct workload w = {0};

	builtin_profile(profile, &p);
	p.rmem_max = rmem_max;
	p.wmem_max = wmem_max;
	w.class = p.class;
	str_copy(w.profile, sizeof(w.profile), profile);
	CHECK_INT(plan_pod(&w, &p, &ifs_veth, caps, ret), 0);
}

static char *render(const struct plan *p, const char *netns, enum plan_format fmt, bool effective_only)
{
	char *s = NULL;
	const struct plan_names names = plan_names_attach(&ifs_veth);
	int r = plan_render(p, &names, netns, fmt, effective_only, &s);

	CHECK_INT(r, 0);
	return s;
}

/* ---- golden plans: every built-in profile x bandwidth x kernel ---- */

static const struct {
	const char *label;
	uint64_t egress_bps, ingress_bps;
} shapes[] = {
        {"unshaped", 0, 0},
        {"egress-limited 100M", 100000000, 0},
        {"ingress-limited 5M", 0, 5000000},
        {"both: egress 2M, ingress 10G", 2000000, 10000000000ULL},
};

static void golden_profile(const char *profile)
{
	static const char *const kernels[] = {"full", "ci"};

	for (size_t k = 0; k < ARRAY_SIZE(kernels); k++) {
		struct plan_caps caps = k == 0 ? caps_full() : caps_ci();
		char name[128];
		struct sbuf_like {
			char *s;
			size_t len;
		} out = {0};
		FILE *f = open_memstream(&out.s, &out.len);

		CHECK(f != NULL);
		if (!f)
			return;
		fprintf(f, "# profile %s, %s kernel (cc available: %s; missing: %s)\n", profile, kernels[k],
		        caps.cc_available, k == 0 ? "nothing" : "fq, fq_codel, prio, pedit");
		for (size_t i = 0; i < ARRAY_SIZE(shapes); i++) {
			_cleanup_plan_ struct plan p = {0};
			_cleanup_free_ char *txt = NULL;

			make_plan(profile, shapes[i].egress_bps, shapes[i].ingress_bps, &caps, &p);
			txt = render(&p, NULL, PLAN_FMT_TEXT, false);
			fprintf(f, "\n## %s\n%s", shapes[i].label, txt ? txt : "(render failed)\n");
		}
		fclose(f);
		snprintf(name, sizeof(name), "plan_%s_%s.txt", profile, kernels[k]);
		t_golden_check(name, out.s ? out.s : "");
		free(out.s);
	}
}

TEST(golden_inference)
{
	golden_profile("inference");
}
TEST(golden_inference_strict)
{
	golden_profile("inference-strict");
}
TEST(golden_training)
{
	golden_profile("training");
}
TEST(golden_training_dctcp)
{
	golden_profile("training-dctcp");
}
TEST(golden_default)
{
	golden_profile("default");
}

/* ---- structural properties (independent of the text rendering) ---- */

static void check_ids(const struct plan *p, const char *const *ids, unsigned n)
{
	CHECK_INT(p->n, n);
	for (unsigned i = 0; i < n && i < p->n; i++) {
		CHECK_STR(p->items[i].id, ids[i]);
		CHECK_INT(p->items[i].status, ITEM_PENDING);
		CHECK_INT(p->items[i].chosen, -1);
		CHECK_INT(p->items[i].err, 0);
		CHECK(p->items[i].n_alt >= 1 && p->items[i].n_alt <= PLAN_ALT_MAX);
	}
}

TEST(plan_inference_shaped_both_ways)
{
	static const char *const ids[] = {
	        "egress.root",  "egress.class",  "egress.leaf",  "dscp.clsact",    "dscp.v4",   "dscp.v6",
	        "ingress.root", "ingress.class", "ingress.leaf", "sysctl.tcp_ecn", "sysctl.cc", "sysctl.notsent_lowat",
	};
	struct plan_caps caps = caps_full();
	_cleanup_plan_ struct plan p = {0};
	const struct plan_item *it;

	make_plan("inference", 100000000, 20000000, &caps, &p);
	check_ids(&p, ids, ARRAY_SIZE(ids));

	it = plan_find_const(&p, "sysctl.tcp_ecn");
	CHECK_INT(it->type, ITEM_SYSCTL);
	CHECK_INT(it->dev, DEV_POD);
	CHECK_STR(it->key, "net/ipv4/tcp_ecn");
	CHECK_STR(it->val[0], "1");
	it = plan_find_const(&p, "sysctl.cc");
	CHECK_STR(it->key, "net/ipv4/tcp_congestion_control");
	CHECK_INT(it->n_alt, 2);
	CHECK_STR(it->val[0], "bbr");
	CHECK_STR(it->val[1], "cubic");
	it = plan_find_const(&p, "sysctl.notsent_lowat");
	CHECK_STR(it->key, "net/ipv4/tcp_notsent_lowat");
	CHECK_STR(it->val[0], "16384");

	it = plan_find_const(&p, "egress.root");
	CHECK_INT(it->type, ITEM_TC);
	CHECK_INT(it->dev, DEV_POD);
	CHECK_INT(it->n_alt, 1);
	CHECK_INT(it->tc[0].type, TC_QDISC);
	CHECK_INT(it->tc[0].kind, TC_KIND_HTB);
	CHECK_INT(it->tc[0].parent, TC_H_ROOT);
	CHECK_INT(it->tc[0].handle, 0x10000);
	CHECK_INT(it->tc[0].u.htb.defcls, 0x10);
	CHECK_INT(it->tc[0].u.htb.r2q, 10);
	CHECK_STR(it->depends, "");

	it = plan_find_const(&p, "egress.class");
	CHECK_INT(it->tc[0].type, TC_CLASS);
	CHECK_INT(it->tc[0].kind, TC_KIND_HTB_CLASS);
	CHECK_INT(it->tc[0].parent, 0x10000);
	CHECK_INT(it->tc[0].handle, 0x10010);
	CHECK_INT(it->tc[0].u.htb_class.rate_bps, 100000000);
	CHECK_INT(it->tc[0].u.htb_class.ceil_bps, 100000000);
	CHECK_INT(it->tc[0].u.htb_class.burst_bytes, 25000); /* 2 ms at 12.5 MB/s */
	CHECK_INT(it->tc[0].u.htb_class.cburst_bytes, 25000);
	CHECK_INT(it->tc[0].u.htb_class.quantum_bytes, 12500);
	CHECK_INT(it->tc[0].u.htb_class.prio, 0);
	CHECK_STR(it->depends, "egress.root");

	it = plan_find_const(&p, "egress.leaf");
	CHECK_STR(it->depends, "egress.class");
	CHECK_INT(it->n_alt, 2);
	CHECK_INT(it->tc[0].kind, TC_KIND_FQ_CODEL);
	CHECK_INT(it->tc[1].kind, TC_KIND_BFIFO);
	for (unsigned i = 0; i < it->n_alt; i++) {
		CHECK_INT(it->tc[i].type, TC_QDISC);
		CHECK_INT(it->tc[i].parent, 0x10010);
		CHECK_INT(it->tc[i].handle, 0x100000);
	}
	CHECK_INT(it->tc[0].u.fq_codel.target_us, 1000); /* 100M: 182 us per 1.5 frames, no raise */
	CHECK_INT(it->tc[0].u.fq_codel.interval_us, 10000);
	CHECK_INT(it->tc[0].u.fq_codel.limit_pkts, 1024);
	CHECK_INT(it->tc[0].u.fq_codel.ecn, TRI_ON);
	CHECK_INT(it->tc[0].u.fq_codel.ce_threshold_us, 0);
	CHECK_INT(it->tc[1].u.fifo.limit, 25000); /* 2 ms at 12.5 MB/s */

	it = plan_find_const(&p, "dscp.clsact");
	CHECK_INT(it->tc[0].kind, TC_KIND_CLSACT);
	CHECK_INT(it->tc[0].parent, TC_H_CLSACT);
	CHECK_INT(it->tc[0].handle, TC_H_MAKE(TC_H_CLSACT, 0));
	it = plan_find_const(&p, "dscp.v4");
	CHECK_INT(it->tc[0].type, TC_FILTER);
	CHECK_INT(it->tc[0].kind, TC_KIND_U32);
	CHECK_INT(it->tc[0].parent, TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS));
	CHECK_INT(it->tc[0].prio, 1);
	CHECK_INT(it->tc[0].protocol, ETH_P_IP);
	CHECK_INT(it->tc[0].u.u32.match, U32_MATCH_ALL);
	CHECK_INT(it->tc[0].u.u32.family, AF_INET);
	CHECK_INT(it->tc[0].u.u32.dscp, 46);
	CHECK_STR(it->depends, "dscp.clsact");
	it = plan_find_const(&p, "dscp.v6");
	CHECK_INT(it->tc[0].prio, 2);
	CHECK_INT(it->tc[0].protocol, ETH_P_IPV6);
	CHECK_INT(it->tc[0].u.u32.family, AF_INET6);
	CHECK_INT(it->tc[0].u.u32.dscp, 46);

	it = plan_find_const(&p, "ingress.class");
	CHECK_INT(it->dev, DEV_HOST);
	CHECK_INT(it->tc[0].u.htb_class.rate_bps, 20000000);
	CHECK_INT(it->tc[0].u.htb_class.burst_bytes, 5000);
	CHECK_INT(it->tc[0].u.htb_class.quantum_bytes, 2500);
	it = plan_find_const(&p, "ingress.leaf");
	CHECK_INT(it->dev, DEV_HOST);
	CHECK_STR(it->depends, "ingress.class");
	CHECK_INT(it->tc[0].u.fq_codel.target_us, 1000); /* 20M: 909 us, no raise */
}

TEST(plan_training_unshaped_and_dctcp)
{
	static const char *const ids[] = {
	        "egress.root", "dscp.clsact", "dscp.v4", "dscp.v6", "sysctl.tcp_ecn", "sysctl.cc",
	};
	struct plan_caps caps = caps_full();
	_cleanup_plan_ struct plan p = {0};
	_cleanup_plan_ struct plan big = {0};
	const struct plan_item *it;

	make_plan("training-dctcp", 0, 0, &caps, &p);
	check_ids(&p, ids, ARRAY_SIZE(ids));
	/* the buffers stay the kernel's unless the operator sets rmemMax/wmemMax */
	CHECK(plan_find_const(&p, "sysctl.rmem") == NULL);
	CHECK(plan_find_const(&p, "sysctl.wmem") == NULL);
	make_plan_buffers("training-dctcp", 64u << 20, 32u << 20, &caps, &big);
	CHECK_STR(plan_find_const(&big, "sysctl.rmem")->val[0], "4096 131072 67108864");
	CHECK_STR(plan_find_const(&big, "sysctl.wmem")->val[0], "4096 16384 33554432");
	it = plan_find_const(&p, "sysctl.cc");
	CHECK_INT(it->n_alt, 2);
	CHECK_STR(it->val[0], "dctcp");
	CHECK_STR(it->val[1], "cubic");
	it = plan_find_const(&p, "egress.root");
	CHECK_INT(it->n_alt, 2); /* fq, fq_codel: no FIFO without a shaper */
	CHECK_INT(it->tc[0].kind, TC_KIND_FQ);
	CHECK_INT(it->tc[0].parent, TC_H_ROOT);
	CHECK_INT(it->tc[0].handle, 0x10000);
	CHECK_INT(it->tc[0].u.fq.limit_pkts, 10000);
	CHECK_INT(it->tc[0].u.fq.ce_threshold_us, 1000);
	CHECK_INT(it->tc[1].kind, TC_KIND_FQ_CODEL);
	CHECK_INT(it->tc[1].parent, TC_H_ROOT);
	CHECK_INT(it->tc[1].handle, 0x10000);
	CHECK_INT(it->tc[1].u.fq_codel.target_us, 0); /* kernel default */
	CHECK_INT(it->tc[1].u.fq_codel.interval_us, 0);
	CHECK_INT(it->tc[1].u.fq_codel.ce_threshold_us, 1000);
	CHECK_INT(it->tc[1].u.fq_codel.limit_pkts, 10000);
	CHECK_INT(it->tc[1].u.fq_codel.ecn, TRI_ON);
	CHECK_INT(plan_find_const(&p, "dscp.v4")->tc[0].u.u32.dscp, 10);
	CHECK(plan_find_const(&p, "ingress.root") == NULL);

	/* CI kernel: the plan still lists dctcp first, so the applier's fallback
	 * to cubic is recorded as degraded (the planner never hides it) */
	caps = caps_ci();
	make_plan("training-dctcp", 0, 0, &caps, &p);
	it = plan_find_const(&p, "sysctl.cc");
	CHECK_INT(it->n_alt, 2);
	CHECK_STR(it->val[0], "dctcp");
	CHECK_STR(it->val[1], "cubic");
	/* fq and fq_codel both missing: both kept, the applier records the failure */
	it = plan_find_const(&p, "egress.root");
	CHECK_INT(it->n_alt, 2);
}

TEST(plan_training_shaped_leaf)
{
	struct plan_caps caps = caps_full();
	_cleanup_plan_ struct plan p = {0};
	const struct plan_item *it;

	make_plan("training", 1000000000, 0, &caps, &p);
	it = plan_find_const(&p, "egress.leaf");
	CHECK_INT(it->n_alt, 3);
	CHECK_INT(it->tc[0].kind, TC_KIND_FQ);
	CHECK_INT(it->tc[1].kind, TC_KIND_FQ_CODEL);
	CHECK_INT(it->tc[2].kind, TC_KIND_BFIFO);
	CHECK_INT(it->tc[2].u.fifo.limit, 2500000);   /* 20 ms at 125 MB/s */
	CHECK_INT(it->tc[1].u.fq_codel.target_us, 0); /* 1G: 18 us per 1.5 frames < 5 ms default */
	CHECK_INT(it->tc[1].u.fq_codel.interval_us, 0);
	it = plan_find_const(&p, "egress.class");
	CHECK_INT(it->tc[0].u.htb_class.burst_bytes, 250000);
	CHECK_INT(it->tc[0].u.htb_class.quantum_bytes, 125000);

	/* CI kernel: same alternatives (the applier skips the missing ones and
	 * records the FIFO as degraded), same identity for every alternative */
	caps = caps_ci();
	make_plan("training", 1000000000, 0, &caps, &p);
	it = plan_find_const(&p, "egress.leaf");
	CHECK_INT(it->n_alt, 3);
	CHECK_INT(it->tc[2].kind, TC_KIND_BFIFO);
	CHECK_INT(it->tc[2].parent, 0x10010);
	CHECK_INT(it->tc[2].handle, 0x100000);
}

TEST(plan_shaper_limits)
{
	struct plan_caps caps = caps_full();
	_cleanup_plan_ struct plan p = {0};
	const struct plan_item *it;

	/* 1 kbit/s: one 1.5-frame takes 18.168 s -> codel target raised,
	 * interval 10 x; burst two frames; quantum one frame; FIFO four frames */
	make_plan("inference", 1000, 0, &caps, &p);
	it = plan_find_const(&p, "egress.class");
	CHECK_INT(it->tc[0].u.htb_class.burst_bytes, 3028);
	CHECK_INT(it->tc[0].u.htb_class.quantum_bytes, 1514);
	it = plan_find_const(&p, "egress.leaf");
	CHECK_INT(it->tc[0].u.fq_codel.target_us, 18168000);
	CHECK_INT(it->tc[0].u.fq_codel.interval_us, 181680000);
	CHECK_INT(it->tc[1].u.fifo.limit, 6056);

	/* 2 Mbit/s: 9084 us */
	make_plan("inference", 2000000, 0, &caps, &p);
	it = plan_find_const(&p, "egress.leaf");
	CHECK_INT(it->tc[0].u.fq_codel.target_us, 9084);
	CHECK_INT(it->tc[0].u.fq_codel.interval_us, 90840);

	/* default profile at 1 Mbit/s: kernel default 5 ms is too low, 18.168 ms */
	make_plan("default", 1000000, 0, &caps, &p);
	it = plan_find_const(&p, "egress.leaf");
	CHECK_INT(it->tc[0].u.fq_codel.target_us, 18168);
	CHECK_INT(it->tc[0].u.fq_codel.interval_us, 181680);
	/* default at 10M: 1817 us < 5 ms default: left to the kernel */
	make_plan("default", 10000000, 0, &caps, &p);
	it = plan_find_const(&p, "egress.leaf");
	CHECK_INT(it->tc[0].u.fq_codel.target_us, 0);
	CHECK_INT(it->tc[0].u.fq_codel.interval_us, 0);
	CHECK_INT(it->tc[0].u.fq_codel.limit_pkts, 0);
	CHECK_INT(it->tc[0].u.fq_codel.ecn, TRI_ON);
	CHECK_INT(it->tc[1].u.fifo.limit, 6250); /* 5 ms at 1.25 MB/s */

	/* 1 Tbit/s: burst and FIFO capped, quantum capped */
	make_plan("training", 1000000000000ULL, 0, &caps, &p);
	it = plan_find_const(&p, "egress.class");
	CHECK_INT(it->tc[0].u.htb_class.burst_bytes, 16 * 1024 * 1024);
	CHECK_INT(it->tc[0].u.htb_class.quantum_bytes, 200000);
	it = plan_find_const(&p, "egress.leaf");
	CHECK_INT(it->tc[2].u.fifo.limit, 64 * 1024 * 1024);
}

/* The HTB burst and quantum rule is one function for the pod's shaper and
 * the node's classes; each caller keeps its floor. Checked against the two
 * formulas it replaced (a pod: clamp(rate/8*2/1000, 2 frames, 16 MiB); the
 * node: clamp(rate/8*2000/1e6, 128 KiB, 16 MiB); quantum for both
 * clamp(rate/8/1000, frame, 200000)) over rates from 1 kbit/s to 1 Tbit/s
 * and frames from 1280 to 9000 bytes MTU. */
static uint32_t clamp_ref(uint64_t v, uint64_t lo, uint64_t hi)
{
	return (uint32_t)(v < lo ? lo : v > hi ? hi : v);
}

TEST(htb_burst_one_rule_both_floors)
{
	static const uint64_t rates[] = {
	        1000,           64000,          1000000,         2000000,         10000000,
	        33333333,       100000000,      523999999,       1000000000,      9700000000ULL,
	        67108864000ULL, 67108872000ULL, 100000000000ULL, 1000000000000ULL};
	static const uint32_t frames[] = {1294, 1514, 9014};
	unsigned n = 0;

	for (size_t i = 0; i < ARRAY_SIZE(rates); i++) {
		uint64_t r = rates[i];

		for (size_t f = 0; f < ARRAY_SIZE(frames); f++) {
			uint32_t fr = frames[f];

			CHECK_INT(plan_htb_burst_bytes(r, 2 * fr), clamp_ref(r / 8 * 2 / 1000, 2ull * fr, 16u << 20));
			CHECK_INT(plan_htb_quantum_bytes(r, fr), clamp_ref(r / 8 / 1000, fr, 200000));
			n++;
		}
		CHECK_INT(plan_htb_burst_bytes(r, 2U * 65536),
		          clamp_ref(r / 8 * 2000 / 1000000, 2U * 65536, 16u << 20));
	}
	CHECK_INT(n, ARRAY_SIZE(rates) * ARRAY_SIZE(frames));
	/* the floors bind at low rates, differently: 2 frames vs 128 KiB */
	CHECK_INT(plan_htb_burst_bytes(10000000, 2 * 1514), 3028);
	CHECK_INT(plan_htb_burst_bytes(10000000, 2U * 65536), 131072);
	/* above them both give 2 ms at the rate */
	CHECK_INT(plan_htb_burst_bytes(1000000000, 2 * 1514), 250000);
	CHECK_INT(plan_htb_burst_bytes(1000000000, 2U * 65536), 250000);
}

/* Issue 13 item 11: the FIFO of last resort is sized by time at the shaped
 * rate, never deeper than the 25 ms token-bucket queue aiqos replaces (a
 * 128 KiB floor was 52 ms at 20 Mbit/s), on both the egress and the ingress
 * shaper of every built-in profile. */
TEST(plan_fifo_sized_by_time)
{
	static const char *const profiles[] = {"inference", "inference-strict", "training", "training-dctcp",
	                                       "default"};
	static const uint64_t rates[] = {20000000ull, 10000000ull, 100000000ull, 1000000000ull};
	struct plan_caps caps = caps_full();
	_cleanup_plan_ struct plan p = {0};

	for (size_t i = 0; i < ARRAY_SIZE(profiles); i++) {
		struct profile pr;

		builtin_profile(profiles[i], &pr);
		for (size_t j = 0; j < ARRAY_SIZE(rates); j++) {
			static const char *const ids[] = {"egress.leaf", "ingress.leaf"};

			make_plan(profiles[i], rates[j], rates[j], &caps, &p);
			for (size_t k = 0; k < ARRAY_SIZE(ids); k++) {
				const struct plan_item *it = plan_find_const(&p, ids[k]);
				const struct tc_spec *fifo;
				uint64_t want = rates[j] / 8 * pr.queue_ms / 1000, us;

				CHECK(it && it->n_alt >= 2);
				if (!it)
					continue;
				fifo = &it->tc[it->n_alt - 1];
				CHECK_INT(fifo->kind, TC_KIND_BFIFO);
				if (want < 4 * 1514)
					want = 4 * 1514;
				CHECK_INT(fifo->u.fifo.limit, want);
				us = (uint64_t)fifo->u.fifo.limit * 8 * 1000000 / rates[j];
				if (us > 25000)
					fprintf(stderr, "  %s %s at %llu bit/s: %llu us\n", profiles[i], ids[k],
					        (unsigned long long)rates[j], (unsigned long long)us);
				CHECK(us <= 25000);
			}
		}
	}
}

TEST(plan_mtu)
{
	struct profile pr;
	struct workload w = {.class = CLASS_INFERENCE, .egress_bps = 1000000};
	struct attach_ifaces ifs = {.pod_ifname = "eth0", .mtu = 9000};
	_cleanup_plan_ struct plan p = {0};

	builtin_profile("inference", &pr);
	CHECK_INT(plan_pod(&w, &pr, &ifs, NULL, &p), 0);
	/* jumbo frames: 9014 bytes per frame */
	CHECK_INT(plan_find_const(&p, "egress.class")->tc[0].u.htb_class.burst_bytes, 18028);
	CHECK_INT(plan_find_const(&p, "egress.class")->tc[0].u.htb_class.quantum_bytes, 9014);
	CHECK_INT(plan_find_const(&p, "egress.leaf")->tc[0].u.fq_codel.target_us, 108168);
	/* mtu 0 = 1500 */
	ifs.mtu = 0;
	CHECK_INT(plan_pod(&w, &pr, &ifs, NULL, &p), 0);
	CHECK_INT(plan_find_const(&p, "egress.class")->tc[0].u.htb_class.burst_bytes, 3028);
}

TEST(plan_default_class)
{
	struct plan_caps caps = caps_full();
	_cleanup_plan_ struct plan p = {0};

	/* nothing per pod without a limit */
	make_plan("default", 0, 0, &caps, &p);
	CHECK_INT(p.n, 0);
	/* a limit brings only the shaper: no sysctls, no DSCP */
	make_plan("default", 0, 5000000, &caps, &p);
	{
		static const char *const ids[] = {"ingress.root", "ingress.class", "ingress.leaf"};
		check_ids(&p, ids, ARRAY_SIZE(ids));
	}
}

/* No host-side veth (macvlan/ipvlan): the ingress shaper is still planned,
 * so the applier records it skipped with its reason instead of the limit
 * vanishing from the record. */
TEST(plan_ingress_without_host_side_is_planned)
{
	static const char *const ids[] = {"ingress.root", "ingress.class", "ingress.leaf"};
	struct profile pr;
	struct workload w = {.class = CLASS_DEFAULT, .ingress_bps = 5000000};
	struct attach_ifaces ifs = {.pod_ifname = "eth0"};
	_cleanup_plan_ struct plan p = {0};

	builtin_profile("default", &pr);
	CHECK_INT(plan_pod(&w, &pr, &ifs, NULL, &p), 0);
	check_ids(&p, ids, ARRAY_SIZE(ids));
	CHECK_INT(p.items[0].dev, DEV_HOST);
	CHECK_INT(plan_pod(&w, &pr, NULL, NULL, &p), 0);
	check_ids(&p, ids, ARRAY_SIZE(ids));
	CHECK_INT(plan_pod(NULL, &pr, NULL, NULL, &p), -EINVAL);
}

TEST(plan_deterministic)
{
	struct plan_caps caps = caps_ci();
	_cleanup_plan_ struct plan a = {0}, b = {0};

	/* items built over memory of other content are equal bytewise
	 * (padding included): the heap chunk b's garbage items were in is
	 * the one the planner is likely to get back */
	CHECK_INT(plan_reserve(&a, 32), 0);
	CHECK_INT(plan_reserve(&b, 32), 0);
	memset(a.items, 0x55, 32 * sizeof(*a.items));
	memset(b.items, 0xaa, 32 * sizeof(*b.items));
	make_plan("training-dctcp", 3000000, 7000000, &caps, &a);
	make_plan("training-dctcp", 3000000, 7000000, &caps, &b);
	CHECK(a.n > 0 && a.n == b.n && a.choices_unknown == b.choices_unknown);
	CHECK(memcmp(a.items, b.items, a.n * sizeof(*a.items)) == 0);
}

TEST(plan_cc_filter)
{
	struct profile pr;
	struct workload w = {.class = CLASS_TRAINING};
	struct plan_caps caps = {0};
	_cleanup_plan_ struct plan p = {0};
	const struct plan_item *it;

	builtin_profile("training", &pr);
	pr.n_cc = 3;
	str_copy(pr.cc[2], sizeof(pr.cc[2]), "reno");

	/* unknown availability: all candidates */
	CHECK_INT(plan_pod(&w, &pr, &ifs_veth, &caps, &p), 0);
	it = plan_find_const(&p, "sysctl.cc");
	CHECK_INT(it->n_alt, 3);

	/* known availability does not shorten the list: the applier skips
	 * what is missing and records the fallback as degraded */
	str_copy(caps.cc_available, sizeof(caps.cc_available), "bbr2\treno\ncubicx");
	CHECK_INT(plan_pod(&w, &pr, &ifs_veth, &caps, &p), 0);
	it = plan_find_const(&p, "sysctl.cc");
	CHECK_INT(it->n_alt, 3);
	CHECK_STR(it->val[0], "bbr");

	/* none available: the full list too */
	str_copy(caps.cc_available, sizeof(caps.cc_available), "vegas");
	CHECK_INT(plan_pod(&w, &pr, &ifs_veth, &caps, &p), 0);
	it = plan_find_const(&p, "sysctl.cc");
	CHECK_INT(it->n_alt, 3);
	CHECK_STR(it->val[0], "bbr");
}

TEST(caps_helpers)
{
	struct plan_caps c = {0};

	CHECK(plan_caps_has(&c, TC_KIND_FQ));
	CHECK(plan_caps_has(NULL, TC_KIND_FQ));
	plan_caps_mark_missing(&c, TC_KIND_FQ);
	CHECK(!plan_caps_has(&c, TC_KIND_FQ));
	CHECK(plan_caps_has(&c, TC_KIND_FQ_CODEL));
	plan_caps_mark_missing(&c, _TC_KIND_INVALID);
	plan_caps_mark_missing(&c, _TC_KIND_MAX);
	plan_caps_mark_missing(NULL, TC_KIND_FQ);
	CHECK_INT(c.missing_kinds, 1u << TC_KIND_FQ);
	CHECK(!plan_caps_has(&c, _TC_KIND_INVALID));
	CHECK(!plan_caps_has(&c, _TC_KIND_MAX));
}

TEST(item_helpers)
{
	struct plan_caps caps = caps_full();
	_cleanup_plan_ struct plan p = {0};
	struct plan_item *it;

	CHECK_STR(plan_dev_name(DEV_POD), "pod");
	CHECK_STR(plan_dev_name(DEV_HOST), "host");
	CHECK_STR(plan_dev_name(DEV_UPLINK), "uplink");
	CHECK(plan_dev_name(_DEV_MAX) == NULL);
	CHECK(plan_dev_name(_DEV_INVALID) == NULL);
	CHECK_STR(item_status_name(ITEM_PENDING), "pending");
	CHECK_STR(item_status_name(ITEM_APPLIED), "applied");
	CHECK_STR(item_status_name(ITEM_DEGRADED), "degraded");
	CHECK_STR(item_status_name(ITEM_SKIPPED), "skipped");
	CHECK(item_status_name(_ITEM_STATUS_MAX) == NULL);

	make_plan("inference", 10000000, 0, &caps, &p);
	CHECK(plan_find(&p, "nope") == NULL);
	CHECK(plan_find(NULL, "egress.leaf") == NULL);
	it = plan_find(&p, "egress.leaf");
	CHECK(it != NULL);
	CHECK(plan_item_effective_tc(it) == NULL); /* pending */
	it->status = ITEM_DEGRADED;
	it->chosen = 1;
	CHECK(plan_item_effective_tc(it) == &it->tc[1]);
	CHECK(plan_item_effective_val(it) == NULL); /* not a sysctl */
	it->chosen = 2;                             /* out of range */
	CHECK(plan_item_effective_tc(it) == NULL);
	it->status = ITEM_SKIPPED;
	it->chosen = -1;
	CHECK(plan_item_effective_tc(it) == NULL);
	it = plan_find(&p, "sysctl.cc");
	it->status = ITEM_APPLIED;
	it->chosen = 0;
	CHECK_STR(plan_item_effective_val(it), "bbr");
	CHECK(plan_item_effective_tc(it) == NULL);
	CHECK_INT(plan_count(&p, ITEM_APPLIED), 1);
	CHECK_INT(plan_count(&p, ITEM_SKIPPED), 1);
	CHECK_INT(plan_count(&p, ITEM_PENDING), p.n - 2);
	CHECK_INT(plan_count(NULL, ITEM_PENDING), 0);
}

/* ---- rendering ---- */

/* A plan as the applier leaves it on the CI kernel, with a full plan's
 * alternatives: fallbacks taken, the DSCP filters skipped. */
static void applied_plan(struct plan *p)
{
	struct plan_caps caps = caps_full();
	struct plan_item *it;

	make_plan("inference", 100000000, 5000000, &caps, p);
	for (unsigned i = 0; i < p->n; i++) {
		p->items[i].status = ITEM_APPLIED;
		p->items[i].chosen = 0;
	}
	it = plan_find(p, "sysctl.cc");
	it->status = ITEM_APPLIED;
	it = plan_find(p, "egress.leaf");
	it->status = ITEM_DEGRADED;
	it->chosen = 1;
	it->err = ENOENT;
	it->unknown = true; /* the kernel said the kind is unknown */
	it = plan_find(p, "ingress.leaf");
	it->status = ITEM_DEGRADED;
	it->chosen = 1;
	it->err = EOPNOTSUPP;
	it->unknown = true; /* the kernel said the kind is unknown */
	it = plan_find(p, "dscp.v4");
	it->status = ITEM_SKIPPED;
	it->chosen = -1;
	it->err = EOPNOTSUPP;
	it->unknown = true; /* the kernel said the kind is unknown */
	it = plan_find(p, "dscp.v6");
	it->status = ITEM_SKIPPED;
	it->chosen = -1;
	it->err = 0;
	it = plan_find(p, "sysctl.notsent_lowat");
	it->status = ITEM_PENDING;
	it->chosen = -1;
}

TEST(golden_render_formats)
{
	_cleanup_plan_ struct plan p = {0};
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	static const struct {
		const char *label;
		const char *netns;
		enum plan_format fmt;
		bool effective_only;
	} cases[] = {
	        {"text, desired and effective", NULL, PLAN_FMT_TEXT, false},
	        {"text, effective only", NULL, PLAN_FMT_TEXT, true},
	        {"tc script, named netns", "cni-1234", PLAN_FMT_TC, false},
	        {"tc script, netns path, effective only", "/var/run/netns/cni-12 34's", PLAN_FMT_TC, true},
	        {"tc script, no netns", NULL, PLAN_FMT_TC, false},
	        {"json", NULL, PLAN_FMT_JSON, false},
	        {"json, effective only", NULL, PLAN_FMT_JSON, true},
	};

	CHECK(f != NULL);
	if (!f)
		return;
	applied_plan(&p);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		_cleanup_free_ char *s = render(&p, cases[i].netns, cases[i].fmt, cases[i].effective_only);
		fprintf(f, "%s## %s\n%s", i ? "\n" : "", cases[i].label, s ? s : "(render failed)\n");
	}
	fclose(f);
	t_golden_check("render_formats.txt", out ? out : "");
	free(out);
}

/* the element of a rendered plan (a JSON array) with this id */
static const cJSON *json_item(const cJSON *arr, const char *id)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, arr)
	{
		const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(e, "id"));

		if (v && streq(v, id))
			return e;
	}
	return NULL;
}

TEST(render_json_is_valid)
{
	_cleanup_plan_ struct plan p = {0};
	_cleanup_free_ char *s = NULL;
	_cleanup_json_ cJSON *j = NULL;
	const cJSON *e;

	applied_plan(&p);
	s = render(&p, NULL, PLAN_FMT_JSON, false);
	j = cJSON_Parse(s);
	CHECK(cJSON_IsArray(j));
	CHECK_INT(cJSON_GetArraySize(j), p.n);
	e = json_item(j, "egress.leaf");
	CHECK(e != NULL);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(e, "status")), "degraded");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(e, "err")), strerror(ENOENT));
	CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(e, "alternatives")), 2);
	CHECK_CONTAINS(cJSON_GetStringValue(cJSON_GetObjectItem(e, "effective")), "bfifo");
}

TEST(render_empty_and_errors)
{
	struct plan p = {0};
	char *s = NULL;

	CHECK_INT(plan_render(&p, NULL, NULL, PLAN_FMT_TEXT, false, &s), 0);
	CHECK_STR(s, "");
	free(s);
	s = NULL;
	CHECK_INT(plan_render(&p, NULL, NULL, PLAN_FMT_JSON, false, &s), 0);
	CHECK_STR(s, "[]\n");
	free(s);
	s = NULL;
	CHECK_INT(plan_render(&p, NULL, NULL, (enum plan_format)9, false, &s), -EINVAL);
	CHECK(s == NULL);
	CHECK_INT(plan_render(NULL, NULL, NULL, PLAN_FMT_TEXT, false, &s), -EINVAL);
}

/* ---- effective choices ---- */

/* "unknown" (the kernel said the kind is unknown) round-trips; a record
 * written before it existed keeps the errno-based reading. */
TEST(choices_unknown_flag)
{
	_cleanup_plan_ struct plan a = {0};
	_cleanup_json_ cJSON *j = NULL, *legacy = NULL;
	struct error e = {0};
	struct plan_item *it;

	applied_plan(&a);
	it = plan_find(&a, "egress.leaf");
	it->unknown = false; /* a transient ENOENT */
	j = plan_choices_to_json(&a);
	it->unknown = true;
	CHECK_INT(plan_choices_from_json(&a, j, &e), 0);
	CHECK(!plan_find(&a, "egress.leaf")->unknown);
	legacy = t_json("[{\"id\":\"egress.leaf\",\"status\":\"degraded\",\"chosen\":1,\"kind\":\"bfifo\","
	                "\"err\":2}]");
	CHECK_INT(plan_choices_from_json(&a, legacy, &e), 0);
	CHECK(plan_find(&a, "egress.leaf")->unknown);
}

TEST(choices_round_trip)
{
	_cleanup_plan_ struct plan a = {0}, b = {0};
	_cleanup_json_ cJSON *j = NULL;
	_cleanup_free_ char *s = NULL;
	struct error e = {0};
	struct plan_caps caps = caps_full();

	applied_plan(&a);
	j = plan_choices_to_json(&a);
	CHECK(cJSON_IsArray(j));
	s = cJSON_PrintUnformatted(json_item(j, "egress.leaf"));
	CHECK_STR(s, "{\"id\":\"egress.leaf\",\"status\":\"degraded\",\"chosen\":1,\"kind\":\"bfifo\",\"err\":2,"
	             "\"errText\":\"No such file or directory\",\"unknown\":true}");
	free(s);
	s = cJSON_PrintUnformatted(json_item(j, "sysctl.cc"));
	CHECK_STR(s, "{\"id\":\"sysctl.cc\",\"status\":\"applied\",\"chosen\":0,\"value\":\"bbr\",\"err\":0}");

	make_plan("inference", 100000000, 5000000, &caps, &b);
	CHECK_INT(plan_choices_from_json(&b, j, &e), 0);
	CHECK_STR(e.msg, "");
	CHECK(a.n == b.n && a.choices_unknown == b.choices_unknown);
	CHECK(memcmp(a.items, b.items, a.n * sizeof(*a.items)) == 0);
}

TEST(choices_follow_moved_alternatives)
{
	/* Applied on a kernel whose caps were unknown (fq_codel tried, bfifo
	 * chosen at index 1); reloaded by a process that knows fq_codel is
	 * missing: the plan is the same, the choice is found by kind. */
	_cleanup_plan_ struct plan a = {0}, b = {0};
	_cleanup_json_ cJSON *j = NULL;
	struct error e = {0};
	struct plan_caps caps = caps_ci();

	applied_plan(&a);
	j = plan_choices_to_json(&a);
	make_plan("inference", 100000000, 5000000, &caps, &b);
	CHECK_INT(plan_find(&b, "egress.leaf")->n_alt, 2);
	CHECK_INT(plan_choices_from_json(&b, j, &e), 0);
	CHECK_STR(e.msg, "");
	CHECK_INT(plan_find(&b, "egress.leaf")->chosen, 1);
	CHECK_INT(plan_find(&b, "egress.leaf")->status, ITEM_DEGRADED);
	CHECK_INT(plan_find(&b, "egress.leaf")->err, ENOENT);
	CHECK_INT(plan_item_effective_tc(plan_find(&b, "egress.leaf"))->kind, TC_KIND_BFIFO);
}

static const struct {
	const char *json;
	int r;
	const char *msg;
} bad_choices[] = {
        {"{}", -EINVAL, "choices: expected an array"},
        {"[1]", -EINVAL, "choices[0]: expected an object with a string \"id\""},
        {"[{\"id\":\"sysctl.cc\",\"status\":\"applied\",\"chosen\":0},{\"status\":\"applied\"}]", -EINVAL,
         "choices[1]: expected an object with a string \"id\""},
        {"[{\"id\":\"uplink.root\",\"status\":\"applied\",\"chosen\":0}]", -ENOENT,
         "choices: item \"uplink.root\" is not in the plan (the plan changed since it was applied)"},
        {"[{\"id\":\"egress.leaf\",\"status\":\"applied\",\"chosen\":2}]", -ERANGE,
         "choices: item \"egress.leaf\" chose alternative 2 of 2 (the plan changed since it was applied)"},
        {"[{\"id\":\"egress.leaf\",\"status\":\"applied\",\"chosen\":5}]", -EINVAL,
         "choices: item \"egress.leaf\": \"chosen\" must be an integer"},
        {"[{\"id\":\"egress.leaf\",\"status\":\"applied\",\"chosen\":-1}]", -ERANGE,
         "choices: item \"egress.leaf\" chose alternative -1 of 2 (the plan changed since it was applied)"},
        {"[{\"id\":\"egress.leaf\",\"status\":\"applied\",\"chosen\":0.5}]", -EINVAL,
         "choices: item \"egress.leaf\": \"chosen\" must be an integer"},
        {"[{\"id\":\"egress.leaf\",\"status\":\"applied\",\"chosen\":\"0\"}]", -EINVAL,
         "choices: item \"egress.leaf\": \"chosen\" must be an integer"},
        {"[{\"id\":\"egress.leaf\",\"status\":\"done\",\"chosen\":0}]", -EINVAL,
         "choices: item \"egress.leaf\": \"status\" must be pending, applied, degraded or skipped"},
        {"[{\"id\":\"egress.leaf\",\"status\":\"skipped\",\"chosen\":1}]", -EINVAL,
         "choices: item \"egress.leaf\" is skipped but chose alternative 1"},
        {"[{\"id\":\"egress.leaf\",\"status\":\"applied\",\"chosen\":0,\"kind\":\"fq\"}]", -ENOENT,
         "choices: item \"egress.leaf\" chose fq, which the plan no longer offers (the plan changed since it was "
         "applied)"},
        {"[{\"id\":\"sysctl.cc\",\"status\":\"applied\",\"chosen\":0,\"value\":\"dctcp\"}]", -ENOENT,
         "choices: item \"sysctl.cc\" chose dctcp, which the plan no longer offers (the plan changed since it was "
         "applied)"},
        {"[{\"id\":\"egress.leaf\",\"status\":\"applied\",\"chosen\":0,\"kind\":7}]", -EINVAL,
         "choices: item \"egress.leaf\": \"kind\" must be a string"},
        {"[{\"id\":\"egress.leaf\",\"status\":\"skipped\",\"chosen\":-1,\"err\":-3}]", -EINVAL,
         "choices: item \"egress.leaf\": \"err\" must be an errno (0..4095)"},
        {"[{\"id\":\"egress.leaf\",\"status\":\"skipped\",\"chosen\":-1},"
         "{\"id\":\"egress.leaf\",\"status\":\"skipped\",\"chosen\":-1}]",
         -EINVAL, "choices: item \"egress.leaf\" is listed twice"},
};

TEST(choices_invalid_exact_and_atomic)
{
	struct plan_caps caps = caps_full();

	for (size_t i = 0; i < ARRAY_SIZE(bad_choices); i++) {
		_cleanup_json_ cJSON *j = cJSON_Parse(bad_choices[i].json);
		_cleanup_plan_ struct plan p = {0}, before = {0};
		struct error e = {0};
		int r;

		CHECK(j != NULL);
		make_plan("inference", 100000000, 0, &caps, &p);
		CHECK_INT(plan_copy(&p, &before), 0);
		r = plan_choices_from_json(&p, j, &e);
		if (r != bad_choices[i].r)
			fprintf(stderr, "  case %zu: %s -> %s\n", i, bad_choices[i].json, e.msg);
		CHECK_INT(r, bad_choices[i].r);
		CHECK_STR(e.msg, bad_choices[i].msg);
		CHECK_INT(e.errnum, -r); /* the errno, unclassified: CNI codes are cni/'s */
		CHECK_INT(e.code, 0);
		CHECK(p.n == before.n && memcmp(p.items, before.items, p.n * sizeof(*p.items)) == 0);
	}
}

TEST(choices_partial_and_null)
{
	struct plan_caps caps = caps_full();
	_cleanup_plan_ struct plan p = {0};
	_cleanup_json_ cJSON *j =
	        cJSON_Parse("[{\"id\":\"egress.root\",\"status\":\"applied\",\"chosen\":0,\"err\":null}]");
	struct error e = {0};

	make_plan("inference", 100000000, 0, &caps, &p);
	CHECK_INT(plan_choices_from_json(&p, NULL, &e), 0);
	CHECK_INT(plan_count(&p, ITEM_PENDING), p.n);
	CHECK_INT(plan_choices_from_json(&p, j, &e), 0);
	CHECK_INT(plan_find(&p, "egress.root")->status, ITEM_APPLIED);
	CHECK_INT(plan_count(&p, ITEM_PENDING), p.n - 1);
}

/* ---- diff ---- */

/* What the kernel would report for an applied plan: the effective specs. */
static void observe_effective(const struct plan *p, struct observed *obs)
{
	memset(obs, 0, sizeof(*obs));
	for (unsigned i = 0; i < p->n; i++) {
		const struct plan_item *it = &p->items[i];
		const struct tc_spec *s = plan_item_effective_tc(it);
		const char *v = plan_item_effective_val(it);

		if (s) {
			obs->dev[obs->n] = it->dev;
			obs->tc[obs->n++] = *s;
		} else if (v) {
			str_copy(obs->sysctl_key[obs->n_sysctl], SYSCTL_KEY_MAX, it->key);
			str_copy(obs->sysctl_val[obs->n_sysctl++], SYSCTL_VAL_MAX, v);
		}
	}
}

TEST(diff_clean)
{
	_cleanup_plan_ struct plan p = {0};
	struct observed obs;
	char buf[4096] = "junk";

	applied_plan(&p);
	observe_effective(&p, &obs);
	CHECK_INT(plan_diff(&p, &ifs_veth, &obs, buf, sizeof(buf)), 0);
	CHECK_STR(buf, "");

	/* the kernel prints tcp_rmem with tabs and a newline */
	{
		struct plan_caps caps = caps_full();
		_cleanup_plan_ struct plan t = {0};
		unsigned seen = 0;
		make_plan_buffers("training", 64u << 20, 64u << 20, &caps, &t);
		for (unsigned i = 0; i < t.n; i++) {
			t.items[i].status = ITEM_APPLIED;
			t.items[i].chosen = 0;
		}
		observe_effective(&t, &obs);
		for (unsigned i = 0; i < obs.n_sysctl; i++)
			if (streq(obs.sysctl_key[i], "net/ipv4/tcp_rmem")) {
				str_copy(obs.sysctl_val[i], SYSCTL_VAL_MAX, "4096\t131072\t67108864\n");
				seen++;
			}
		CHECK_INT(seen, 1);
		CHECK_INT(plan_diff(&t, &ifs_veth, &obs, buf, sizeof(buf)), 0);
		CHECK_STR(buf, "");
	}
	/* pending plans have nothing in force: nothing to compare */
	{
		struct plan_caps caps = caps_full();
		_cleanup_plan_ struct plan t = {0};
		make_plan("training", 0, 0, &caps, &t);
		memset(&obs, 0, sizeof(obs));
		CHECK_INT(plan_diff(&t, &ifs_veth, &obs, buf, sizeof(buf)), 0);
	}
}

TEST(diff_differences)
{
	_cleanup_plan_ struct plan p = {0};
	struct observed obs;
	char buf[4096];
	unsigned i;

	applied_plan(&p);
	observe_effective(&p, &obs);
	/* the pod's root qdisc (our htb) is gone */
	for (i = 0; i < obs.n; i++)
		if (obs.dev[i] == DEV_POD && obs.tc[i].type == TC_QDISC && obs.tc[i].parent == TC_H_ROOT)
			break;
	CHECK(i < obs.n);
	obs.tc[i] = obs.tc[--obs.n];
	obs.dev[i] = obs.dev[obs.n];
	/* the ingress leaf became a different FIFO size */
	for (i = 0; i < obs.n; i++)
		if (obs.dev[i] == DEV_HOST && obs.tc[i].kind == TC_KIND_BFIFO)
			obs.tc[i].u.fifo.limit = 1000;
	/* the congestion control was changed behind our back */
	for (i = 0; i < obs.n_sysctl; i++)
		if (streq(obs.sysctl_key[i], "net/ipv4/tcp_congestion_control"))
			str_copy(obs.sysctl_val[i], SYSCTL_VAL_MAX, "cubic\n");
	/* tcp_ecn was not readable */
	for (i = 0; i < obs.n_sysctl; i++)
		if (streq(obs.sysctl_key[i], "net/ipv4/tcp_ecn"))
			str_copy(obs.sysctl_key[i], SYSCTL_KEY_MAX, "net/ipv4/other");

	CHECK_INT(plan_diff(&p, &ifs_veth, &obs, buf, sizeof(buf)), 4);
	CHECK_STR(buf, "egress.root on eth0: want \"htb default 10 r2q 10\", have nothing\n"
	               "ingress.leaf on veth1a2b3c4d: want \"bfifo limit 6056b\", have \"bfifo limit 1000b\"\n"
	               "sysctl.tcp_ecn (net.ipv4.tcp_ecn): want \"1\", have nothing\n"
	               "sysctl.cc (net.ipv4.tcp_congestion_control): want \"bbr\", have \"cubic\"\n");

	/* counting without a buffer, and a small buffer is cut, terminated */
	CHECK_INT(plan_diff(&p, &ifs_veth, &obs, NULL, 0), 4);
	CHECK_INT(plan_diff(&p, &ifs_veth, &obs, buf, 20), 4);
	CHECK_INT(strlen(buf), 19);
	CHECK_STR(buf, "egress.root on eth0");
	CHECK_INT(plan_diff(&p, &ifs_veth, NULL, buf, sizeof(buf)), 9); /* every item in force */
}

TEST(diff_kind_and_dev)
{
	_cleanup_plan_ struct plan p = {0};
	struct observed obs;
	char buf[4096];

	applied_plan(&p);
	observe_effective(&p, &obs);
	/* the pod's egress leaf is an fq_codel with other parameters than ours
	 * (we chose bfifo) -> want bfifo, have fq_codel ...; and the same
	 * object on the host side does not satisfy the pod side */
	for (unsigned i = 0; i < obs.n; i++) {
		if (obs.dev[i] == DEV_POD && obs.tc[i].kind == TC_KIND_BFIFO) {
			memset(&obs.tc[i].u, 0, sizeof(obs.tc[i].u));
			obs.tc[i].kind = TC_KIND_FQ_CODEL;
			obs.tc[i].u.fq_codel.limit_pkts = 10240;
			obs.tc[i].u.fq_codel.target_us = 5000;
			obs.tc[i].u.fq_codel.interval_us = 100000;
		}
		if (obs.dev[i] == DEV_POD && obs.tc[i].type == TC_CLASS)
			obs.dev[i] = DEV_UPLINK; /* the pod's 1:10 class now only exists elsewhere */
	}
	CHECK_INT(plan_diff(&p, &ifs_veth, &obs, buf, sizeof(buf)), 2);
	CHECK_CONTAINS(buf, "egress.class on eth0: want \"htb rate 100mbit");
	CHECK_CONTAINS(buf, "\", have nothing\n");
	CHECK_CONTAINS(buf, "egress.leaf on eth0: want \"bfifo limit 25000b\", have \"fq_codel limit 10240 target 5ms "
	                    "interval 100ms\"\n");
}

TEST(diff_unknown_kind)
{
	_cleanup_plan_ struct plan p = {0};
	struct observed obs;
	char buf[4096];

	applied_plan(&p);
	observe_effective(&p, &obs);
	/* the host veth's root is a qdisc aiqos has no kind for (pfifo_fast) */
	for (unsigned i = 0; i < obs.n; i++)
		if (obs.dev[i] == DEV_HOST && obs.tc[i].parent == TC_H_ROOT) {
			memset(&obs.tc[i].u, 0, sizeof(obs.tc[i].u));
			obs.tc[i].kind = _TC_KIND_INVALID;
			obs.tc[i].handle = 0;
		}
	CHECK_INT(plan_diff(&p, &ifs_veth, &obs, buf, sizeof(buf)), 1);
	CHECK_STR(buf, "ingress.root on veth1a2b3c4d: want \"htb default 10 r2q 10\", have a qdisc of another kind\n");
}
