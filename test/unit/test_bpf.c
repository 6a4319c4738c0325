/* test_bpf.c — the BPF programs (shared/bpf/NAME.bpf.c) run on crafted
 * packets through BPF_PROG_TEST_RUN, without a device: the class each
 * packet gets (IPv4, IPv6, a VLAN tag, DSCP, truncated, not IP), EDT's
 * stamps and clocks, the gates on both sides of their threshold, and the
 * loaders' map adoption and program tags. Root (bpf(2)); without it the
 * cases skip, which a strict (CI=true) run counts as failed. */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <errno.h>
#include <linux/pkt_cls.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "bpf_cls.h"
#include "bpf_gate.h"
#include "bpf_load.h"
#include "node.h"
#include "t.h"
#include "tc/tc.h"
#include "util.h"

#define ETH_LEN 14

static void need_root(void)
{
	if (geteuid() != 0) {
		printf("test_bpf: skipped: needs root for bpf(2) (euid %u)\n", (unsigned)geteuid());
		printf("0 passed, 0 failed, %u skipped\n", t_n_cases);
		exit(0);
	}
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- crafted packets ---- */

struct pkt {
	uint8_t b[1600];
	uint32_t len;
};

enum pkt_opt {
	PKT_VLAN = 1,
	PKT_ICMP6 = 2,
};

/* An Ethernet frame of len bytes carrying IPv4 (or IPv6, by the source's
 * form) from src with DSCP dscp; opt: a VLAN tag, ICMPv6. */
static struct pkt pkt_ip(const char *src, uint8_t dscp, uint32_t len, unsigned opt)
{
	struct pkt p = {.len = len};
	uint8_t *ip = p.b + ETH_LEN;
	bool v6 = strchr(src, ':') != NULL;
	uint16_t type = v6 ? 0x86dd : 0x0800;

	if (opt & PKT_VLAN) {
		p.b[12] = 0x81;
		p.b[13] = 0x00;
		p.b[14] = 0x00;
		p.b[15] = 0x07; /* VLAN 7 */
		p.b[16] = (uint8_t)(type >> 8);
		p.b[17] = (uint8_t)type;
		ip += 4;
	} else {
		p.b[12] = (uint8_t)(type >> 8);
		p.b[13] = (uint8_t)type;
	}
	if (v6) {
		ip[0] = (uint8_t)(0x60 | (dscp >> 2));
		ip[1] = (uint8_t)((dscp & 3) << 6);
		ip[6] = (opt & PKT_ICMP6) ? 58 : 17;
		ip[7] = 64;
		inet_pton(AF_INET6, src, ip + 8);
		inet_pton(AF_INET6, "fd00:75::2", ip + 24);
	} else {
		ip[0] = 0x45;
		ip[1] = (uint8_t)(dscp << 2);
		ip[8] = 64;
		ip[9] = 17;
		inet_pton(AF_INET, src, ip + 12);
		inet_pton(AF_INET, "10.75.0.2", ip + 16);
	}
	return p;
}

struct run {
	int err; /* BPF_PROG_TEST_RUN's own error (0 = it ran) */
	int retval;
	uint32_t priority;
	uint64_t tstamp;
};

/* One packet through the program, with the context's priority, tstamp and
 * ingress ifindex as given. */
static struct run run_ctx(int prog_fd, const struct pkt *p, uint32_t prio_in, uint64_t tstamp_in, uint32_t iif)
{
	struct __sk_buff in = {.priority = prio_in, .tstamp = tstamp_in, .ingress_ifindex = iif}, out = {0};
	struct bpf_test_run_opts o = {.sz = sizeof(o),
	                              .data_in = p->b,
	                              .data_size_in = p->len,
	                              .ctx_in = &in,
	                              .ctx_size_in = sizeof(in),
	                              .ctx_out = &out,
	                              .ctx_size_out = sizeof(out),
	                              .repeat = 1};
	struct run r = {0};

	r.err = bpf_prog_test_run_opts(prog_fd, &o);
	if (r.err)
		fprintf(stderr, "  BPF_PROG_TEST_RUN: %s\n", strerror(-r.err));
	r.retval = (int)o.retval;
	r.priority = out.priority;
	r.tstamp = out.tstamp;
	return r;
}

static struct run run1(int prog_fd, const struct pkt *p)
{
	return run_ctx(prog_fd, p, 0, 0, 0);
}

/* ---- the classifier ---- */

#define PRIO_INF   NODE_CLS_PRIO_INFERENCE
#define PRIO_TRAIN NODE_CLS_PRIO_TRAINING
#define PRIO_DEF   NODE_CLS_PRIO_DEFAULT

struct cls {
	int map, edt, prog;
};

static void cls_close(struct cls *c)
{
	if (c->prog >= 0)
		close(c->prog);
	if (c->map >= 0)
		close(c->map);
	if (c->edt >= 0)
		close(c->edt);
}

static bool cls_up(struct cls *c, const struct bpf_cls_entry *ents, unsigned n)
{
	struct error e = {0};

	*c = (struct cls){-1, -1, -1};
	if (bpf_cls_load(&c->map, &c->edt, &c->prog, &e) < 0) {
		fprintf(stderr, "  %s\n", e.msg);
		CHECK(!"the classifier loads");
		return false;
	}
	CHECK_INT(bpf_cls_map_sync(c->map, ents, n, NULL, &e), 0);
	return true;
}

static const struct bpf_cls_entry pods[] = {
        {.key = {.kind = BPF_CLS_KEY_DEFAULT}, .priority = PRIO_DEF},
        {.key = {.kind = BPF_CLS_KEY_SRC4, .addr = {10, 75, 0, 10}}, .priority = PRIO_INF},
        {.key = {.kind = BPF_CLS_KEY_SRC4, .addr = {10, 75, 0, 20}}, .priority = PRIO_TRAIN},
        {.key = {.kind = BPF_CLS_KEY_SRC6, .addr = {0xfd, 0, 0, 0x75, [15] = 0x10}}, .priority = PRIO_INF},
        {.key = {.kind = BPF_CLS_KEY_SRC6, .addr = {0xfd, 0, 0, 0x75, [15] = 0x20}}, .priority = PRIO_TRAIN},
        {.key = {.kind = BPF_CLS_KEY_DSCP, .addr = {46}}, .priority = PRIO_INF},
        {.key = {.kind = BPF_CLS_KEY_DSCP, .addr = {10}}, .priority = PRIO_TRAIN},
};

/* Each class by source address in both families, with and without a
 * VLAN tag; by DSCP where the source is no pod's; the default class for
 * the rest and for a truncated header; non-IP untouched. */
TEST(classifier_classes)
{
	static const struct {
		const char *src;
		uint8_t dscp;
		unsigned opt;
		uint32_t len;
		uint32_t want;
	} cases[] = {
	        {"10.75.0.10", 0, 0, 200, PRIO_INF},
	        {"10.75.0.20", 0, 0, 200, PRIO_TRAIN},
	        {"10.75.0.10", 10, 0, 200, PRIO_INF}, /* the address wins over a mark */
	        {"10.75.0.99", 0, 0, 200, PRIO_DEF},
	        {"10.75.0.99", 46, 0, 200, PRIO_INF},
	        {"10.75.0.99", 10, 0, 200, PRIO_TRAIN},
	        {"10.75.0.99", 12, 0, 200, PRIO_DEF},
	        {"10.75.0.10", 0, PKT_VLAN, 200, PRIO_INF},
	        {"10.75.0.20", 0, PKT_VLAN, 200, PRIO_TRAIN},
	        {"10.75.0.99", 46, PKT_VLAN, 200, PRIO_INF},
	        {"fd00:75::10", 0, 0, 200, PRIO_INF},
	        {"fd00:75::20", 0, 0, 200, PRIO_TRAIN},
	        {"fd00:75::99", 46, 0, 200, PRIO_INF},
	        {"fd00:75::99", 10, 0, 200, PRIO_TRAIN},
	        {"fd00:75::99", 0, 0, 200, PRIO_DEF},
	        {"fd00:75::20", 0, PKT_VLAN, 200, PRIO_TRAIN},
	        /* truncated behind a VLAN tag (the kernel's test run refuses an
	         * untagged truncated IP header) */
	        {"10.75.0.10", 0, PKT_VLAN, ETH_LEN + 4 + 16, PRIO_DEF},
	        {"fd00:75::10", 0, PKT_VLAN, ETH_LEN + 4 + 30, PRIO_DEF},
	};
	struct cls c;

	if (!cls_up(&c, pods, ARRAY_SIZE(pods)))
		return;
	for (unsigned i = 0; i < ARRAY_SIZE(cases); i++) {
		struct pkt p = pkt_ip(cases[i].src, cases[i].dscp, cases[i].len, cases[i].opt);
		struct run r = run_ctx(c.prog, &p, 4242, 0, 0);

		if (r.priority != cases[i].want || r.retval != TC_ACT_UNSPEC)
			fprintf(stderr, "  case %u: %s dscp %u opt %u len %u\n", i, cases[i].src, cases[i].dscp,
			        cases[i].opt, cases[i].len);
		CHECK_INT(r.err, 0);
		CHECK_INT(r.retval, TC_ACT_UNSPEC);
		CHECK_INT(r.priority, cases[i].want);
		CHECK_INT(r.tstamp, 0); /* stamping off */
	}
	/* not IP (ARP): left alone */
	{
		struct pkt arp = {.len = 60};
		struct run r;

		arp.b[12] = 0x08;
		arp.b[13] = 0x06;
		r = run_ctx(c.prog, &arp, 4242, 0, 0);
		CHECK_INT(r.retval, TC_ACT_UNSPEC);
		CHECK_INT(r.priority, 4242);
	}
	/* no default entry: a packet of no pod keeps its priority */
	{
		struct error e = {0};
		struct pkt p = pkt_ip("10.75.0.99", 0, 200, 0);

		CHECK_INT(bpf_cls_map_sync(c.map, pods + 1, ARRAY_SIZE(pods) - 1, NULL, &e), 0);
		CHECK_INT(run_ctx(c.prog, &p, 4242, 0, 0).priority, 4242);
	}
	cls_close(&c);
}

/* ---- overlays: the pod inside the encapsulation ---- */

/* A frame built header by header. */
struct frame {
	struct pkt p;
	uint32_t at;
};

static void put(struct frame *f, const void *b, uint32_t n)
{
	memcpy(f->p.b + f->at, b, n);
	f->at += n;
	f->p.len = f->at;
}

static void put_eth(struct frame *f, uint16_t type)
{
	uint8_t h[ETH_LEN] = {[12] = (uint8_t)(type >> 8), [13] = (uint8_t)type};

	put(f, h, sizeof(h));
}

static void put_ip_to(struct frame *f, const char *src, const char *dst, uint8_t proto, uint8_t dscp)
{
	uint8_t h[40] = {0};

	if (strchr(src, ':')) {
		h[0] = (uint8_t)(0x60 | (dscp >> 2));
		h[1] = (uint8_t)((dscp & 3) << 6);
		h[6] = proto;
		h[7] = 64;
		inet_pton(AF_INET6, src, h + 8);
		inet_pton(AF_INET6, dst ? dst : "fd00:99::1", h + 24);
		put(f, h, 40);
	} else {
		h[0] = 0x45;
		h[1] = (uint8_t)(dscp << 2);
		h[8] = 64;
		h[9] = proto;
		inet_pton(AF_INET, src, h + 12);
		inet_pton(AF_INET, dst ? dst : "192.168.99.1", h + 16);
		put(f, h, 20);
	}
}

static void put_ip(struct frame *f, const char *src, uint8_t proto, uint8_t dscp)
{
	put_ip_to(f, src, NULL, proto, dscp);
}

static void put_udp(struct frame *f, uint16_t dport)
{
	uint8_t h[8] = {0x9c, 0x40, (uint8_t)(dport >> 8), (uint8_t)dport};

	put(f, h, sizeof(h));
}

static void pad(struct frame *f, uint32_t n)
{
	memset(f->p.b + f->at, 0, n);
	f->at += n;
	f->p.len = f->at;
}

/* An overlay packet from the node 192.168.1.1 (or fd00:1::1) carrying a
 * pod's IP packet (from inner, to inner_dst or a remote address, dscp). kind: "vxlan", "vxlan4789", "geneve"
 * (with 8 bytes of options, an inner Ethernet frame), "geneve-ip" (the
 * IP packet straight after the header), "ipip", "ip6ip". */
static struct pkt overlay_to(const char *kind, bool outer6, const char *inner, const char *inner_dst, uint8_t dscp)
{
	struct frame f = {0};
	bool inner6 = strchr(inner, ':') != NULL;
	const char *node = outer6 ? "fd00:1::1" : "192.168.1.1";

	put_eth(&f, outer6 ? 0x86dd : 0x0800);
	if (!strcmp(kind, "ipip") || !strcmp(kind, "ip6ip")) {
		put_ip(&f, node, inner6 ? 41 : 4, 0);
	} else {
		put_ip(&f, node, 17, 0);
		if (!strncmp(kind, "vxlan", 5)) {
			static const uint8_t vx[8] = {0x08, 0, 0, 0, 0, 0, 42, 0};

			put_udp(&f, !strcmp(kind, "vxlan") ? 8472 : 4789);
			put(&f, vx, sizeof(vx));
			put_eth(&f, inner6 ? 0x86dd : 0x0800);
		} else {
			bool ip = !strcmp(kind, "geneve-ip");
			uint16_t proto = ip ? (inner6 ? 0x86dd : 0x0800) : 0x6558;
			uint8_t gen[8] = {ip ? 0 : 2, 0, (uint8_t)(proto >> 8), (uint8_t)proto, 0, 0, 42, 0};

			put_udp(&f, 6081);
			put(&f, gen, sizeof(gen));
			if (!ip) {
				pad(&f, 8); /* two words of options */
				put_eth(&f, inner6 ? 0x86dd : 0x0800);
			}
		}
	}
	put_ip_to(&f, inner, inner_dst, 6, dscp);
	pad(&f, 100);
	return f.p;
}

static struct pkt overlay(const char *kind, bool outer6, const char *inner, uint8_t dscp)
{
	return overlay_to(kind, outer6, inner, NULL, dscp);
}

/* On a VXLAN (either port), Geneve (options, an inner frame or IP) or IPIP
 * overlay, in either outer family, the pod is found in the inner header:
 * its address, else the mark aiqos set on it; an unmarked inner packet of
 * no pod is the default class (never the outer header's mark). UDP to the
 * same ports that is no tunnel is classified by its outer header; a
 * tunnel packet cut short inside is the default class. */
TEST(classifier_sees_the_pod_inside_overlays)
{
	static const char *const kinds[] = {"vxlan", "vxlan4789", "geneve", "geneve-ip", "ipip", "ip6ip"};
	struct cls c;

	if (!cls_up(&c, pods, ARRAY_SIZE(pods)))
		return;
	for (unsigned k = 0; k < ARRAY_SIZE(kinds); k++)
		for (int outer6 = 0; outer6 < 2; outer6++) {
			static const struct {
				const char *inner;
				uint8_t dscp;
				uint32_t want;
			} cases[] = {
			        {"10.75.0.10", 0, PRIO_INF},     {"10.75.0.20", 0, PRIO_TRAIN},
			        {"10.75.0.99", 46, PRIO_INF},    {"10.75.0.99", 0, PRIO_DEF},
			        {"fd00:75::10", 0, PRIO_INF},    {"fd00:75::20", 10, PRIO_TRAIN},
			        {"fd00:75::99", 10, PRIO_TRAIN}, {"fd00:75::99", 0, PRIO_DEF},
			};

			if (!strcmp(kinds[k], "ipip") && outer6)
				continue; /* IPv4-in-IPv6 is "ip6ip" below with an IPv4 inner: covered by proto 4 */
			for (unsigned i = 0; i < ARRAY_SIZE(cases); i++) {
				bool inner6 = strchr(cases[i].inner, ':') != NULL;
				struct pkt p;
				struct run r;

				if ((!strcmp(kinds[k], "ipip") && inner6) || (!strcmp(kinds[k], "ip6ip") && !inner6))
					continue;
				p = overlay(kinds[k], outer6, cases[i].inner, cases[i].dscp);
				r = run_ctx(c.prog, &p, 4242, 0, 0);
				if (r.priority != cases[i].want)
					fprintf(stderr, "  %s outer v%d inner %s dscp %u\n", kinds[k], outer6 ? 6 : 4,
					        cases[i].inner, cases[i].dscp);
				CHECK_INT(r.retval, TC_ACT_UNSPEC);
				CHECK_INT(r.priority, cases[i].want);
			}
		}
	/* not a tunnel: UDP to 8472 whose header is not VXLAN's, from a marked
	 * sender: its own mark decides */
	{
		struct frame f = {0};
		static const uint8_t junk[8] = {0xff, 1, 2, 3, 4, 5, 6, 7};
		struct pkt p;

		put_eth(&f, 0x0800);
		put_ip(&f, "192.168.1.1", 17, 10);
		put_udp(&f, 8472);
		put(&f, junk, sizeof(junk));
		put_eth(&f, 0x0800);
		put_ip(&f, "10.75.0.10", 6, 0);
		p = f.p;
		CHECK_INT(run1(c.prog, &p).priority, PRIO_TRAIN);
	}
	/* a VXLAN packet cut inside its inner IP header (behind a VLAN tag: the
	 * test run refuses a truncated untagged IP header) */
	{
		struct pkt full = overlay("vxlan", false, "10.75.0.10", 0), p = {.len = 0};

		p.b[12] = 0x81;
		p.b[15] = 7;
		p.b[16] = 0x08;
		memcpy(p.b + 18, full.b + ETH_LEN, 20 + 8 + 8 + ETH_LEN + 10);
		p.len = 18 + 20 + 8 + 8 + ETH_LEN + 10;
		CHECK_INT(run1(c.prog, &p).priority, PRIO_DEF);
	}
	cls_close(&c);
}

/* The download classifier with the pods' entries without DSCP ones, as
 * node_down_cls_entries makes them. */
static bool dcls_up(int *map, int *prog)
{
	struct error e = {0};
	_cleanup_close_ int seen = -1;

	if (bpf_dcls_load(map, &seen, prog, &e) < 0) {
		fprintf(stderr, "  %s\n", e.msg);
		CHECK(!"the download classifier loads");
		return false;
	}
	CHECK_INT(bpf_cls_map_sync(*map, pods, 5, NULL, &e), 0);
	return true;
}

/* ---- overlay edge cases: where the parser's decision is made ---- */

/* Offsets of a tunnel packet's header boundaries (from the frame's start). */
struct bounds {
	uint32_t l4;    /* the outer transport header (UDP), or the inner IP for IPIP */
	uint32_t tun;   /* the tunnel header (VXLAN/Geneve) */
	uint32_t frame; /* the inner Ethernet frame (or inner IP for geneve-ip) */
	uint32_t ip;    /* the inner IP header */
	uint32_t end;   /* past the inner IP header */
};

/* A tunnel packet whose OUTER header carries the training mark (DSCP 10)
 * and whose inner packet is the inference pod's (10.75.0.10 or
 * fd00:75::10, unmarked): the class says what the parser decided —
 * PRIO_INF: a tunnel, the inner header read; PRIO_DEF: a tunnel cut short
 * inside; PRIO_TRAIN: no tunnel, the outer header decided. kind: "vxlan",
 * "vxlan4789", "geneve" (opt_words words of options, an Ethernet frame),
 * "geneve-ip", "ipip". */
static struct pkt edge_pkt(const char *kind, bool outer6, bool inner6, unsigned opt_words, struct bounds *b)
{
	struct frame f = {0};
	const char *node = outer6 ? "fd00:1::1" : "192.168.1.1";
	const char *pod = inner6 ? "fd00:75::10" : "10.75.0.10";
	bool ipip = !strcmp(kind, "ipip");

	put_eth(&f, outer6 ? 0x86dd : 0x0800);
	put_ip(&f, node, ipip ? (inner6 ? 41 : 4) : 17, 10);
	b->l4 = b->tun = b->frame = f.at;
	if (!ipip) {
		bool vx = !strncmp(kind, "vxlan", 5), gip = !strcmp(kind, "geneve-ip");
		uint16_t proto = gip ? (inner6 ? 0x86dd : 0x0800) : 0x6558;
		uint8_t vxh[8] = {0x08, 0, 0, 0, 0, 0, 42, 0};
		uint8_t gen[8] = {(uint8_t)opt_words, 0, (uint8_t)(proto >> 8), (uint8_t)proto, 0, 0, 42, 0};

		put_udp(&f, vx ? (!strcmp(kind, "vxlan") ? 8472 : 4789) : 6081);
		b->tun = f.at;
		put(&f, vx ? vxh : gen, 8);
		if (!vx) {
			/* options: class 0x0102, type 3, length opt_words - 1, then data */
			for (unsigned w = 0; w < opt_words; w++) {
				uint8_t o[4] = {0xaa, 0xbb, 0xcc, 0xdd};

				if (w == 0) {
					o[0] = 0x01;
					o[1] = 0x02;
					o[2] = 0x03;
					o[3] = (uint8_t)(opt_words - 1);
				}
				put(&f, o, 4);
			}
		}
		b->frame = f.at;
		if (!gip)
			put_eth(&f, inner6 ? 0x86dd : 0x0800);
	}
	b->ip = f.at;
	put_ip(&f, pod, 6, 0);
	b->end = f.at;
	pad(&f, 64);
	return f.p;
}

static uint32_t class_of(int prog, const struct pkt *p)
{
	struct run r = run_ctx(prog, p, 4242, 0, 0);

	CHECK_INT(r.err, 0);
	CHECK_INT(r.retval, TC_ACT_UNSPEC);
	return r.priority;
}

/* Cut at every header boundary of every tunnel kind, both outer and inner
 * families: up to the end of the UDP + tunnel header the packet is no
 * tunnel (its outer mark decides); past it, a tunnel whose inner packet is
 * cut short (the default class: never the node's outer mark); whole, the
 * pod's class. */
TEST(overlay_truncated_at_each_boundary)
{
	static const char *const kinds[] = {"vxlan", "vxlan4789", "geneve", "geneve-ip", "ipip"};
	struct cls c;

	if (!cls_up(&c, pods, ARRAY_SIZE(pods)))
		return;
	for (unsigned k = 0; k < ARRAY_SIZE(kinds); k++)
		for (int o6 = 0; o6 < 2; o6++)
			for (int i6 = 0; i6 < 2; i6++) {
				struct bounds b;
				struct pkt full = edge_pkt(kinds[k], o6, i6, 2, &b);
				bool ipip = !strcmp(kinds[k], "ipip");
				const struct {
					uint32_t len;
					uint32_t want;
				} cuts[] = {
				        {b.l4 + 4, ipip ? PRIO_DEF : PRIO_TRAIN},  /* inside UDP / the inner IP */
				        {b.tun, ipip ? PRIO_DEF : PRIO_TRAIN},     /* UDP alone */
				        {b.tun + 7, ipip ? PRIO_DEF : PRIO_TRAIN}, /* inside the tunnel header */
				        {b.frame, PRIO_DEF},                       /* the header, nothing inside */
				        {b.frame + 13, PRIO_DEF}, /* inside the inner Ethernet header */
				        {b.ip, PRIO_DEF},         /* the inner frame's header alone */
				        {b.end - 1, PRIO_DEF},    /* one byte short of the inner IP */
				        {b.end, PRIO_INF},        /* the inner IP header whole */
				        {full.len, PRIO_INF},
				};

				for (unsigned i = 0; i < ARRAY_SIZE(cuts); i++) {
					struct pkt p = full;
					uint32_t got;

					if (cuts[i].len < b.l4 + 1 || cuts[i].len > full.len)
						continue;
					p.len = cuts[i].len;
					got = class_of(c.prog, &p);
					if (got != cuts[i].want)
						fprintf(stderr, "  %s outer v%d inner v%d cut at %u (of %u)\n",
						        kinds[k], o6 ? 6 : 4, i6 ? 6 : 4, cuts[i].len, full.len);
					CHECK_INT(got, cuts[i].want);
				}
			}
	cls_close(&c);
}

/* Geneve's options are skipped by their length, 0 to 63 words (252
 * bytes): a parser that ignored or misread the length would read option
 * bytes as the inner frame (0xaa.. is no IP: the default class). */
TEST(geneve_options_of_any_length)
{
	static const unsigned words[] = {0, 1, 2, 5, 17, 63};
	struct cls c;

	if (!cls_up(&c, pods, ARRAY_SIZE(pods)))
		return;
	for (unsigned w = 0; w < ARRAY_SIZE(words); w++)
		for (int o6 = 0; o6 < 2; o6++)
			for (int i6 = 0; i6 < 2; i6++)
				for (int gip = 0; gip < 2; gip++) {
					struct bounds b;
					struct pkt p = edge_pkt(gip ? "geneve-ip" : "geneve", o6, i6, words[w], &b);
					uint32_t got = class_of(c.prog, &p);

					if (got != PRIO_INF)
						fprintf(stderr, "  %u option words, outer v%d inner v%d %s\n", words[w],
						        o6 ? 6 : 4, i6 ? 6 : 4, gip ? "IP" : "frame");
					CHECK_INT(got, PRIO_INF);
					/* the options one word shorter than the header says: the
					 * inner frame is misplaced by 4 bytes and is no IP */
					if (words[w]) {
						p.b[b.tun] = (uint8_t)(words[w] - 1);
						got = class_of(c.prog, &p);
						if (got == PRIO_INF)
							fprintf(stderr,
							        "  %u option words read as %u: outer v%d inner v%d "
							        "%s\n",
							        words[w], words[w] - 1, o6 ? 6 : 4, i6 ? 6 : 4,
							        gip ? "IP" : "frame");
						CHECK(got != PRIO_INF);
					}
				}
	cls_close(&c);
}

/* UDP to the tunnel ports that is no tunnel: the rule of parse.h (the
 * kernel's receivers'), each field that decides it flipped alone; the
 * packet's own (outer) mark then decides, never the bytes behind. */
TEST(udp_on_tunnel_ports_that_is_no_tunnel)
{
	static const struct {
		const char *kind;
		uint32_t at; /* offset in the tunnel header */
		uint8_t value;
		uint32_t want;
		const char *what;
	} cases[] = {
	        {"vxlan", 0, 0x08, PRIO_INF, "VXLAN as sent"},
	        {"vxlan", 0, 0x00, PRIO_TRAIN, "VXLAN without the I flag"},
	        {"vxlan", 0, 0x0c, PRIO_TRAIN, "VXLAN with a reserved flag"},
	        {"vxlan", 0, 0x88, PRIO_TRAIN, "VXLAN group policy (G flag)"},
	        {"vxlan", 1, 0x01, PRIO_TRAIN, "VXLAN reserved byte 1"},
	        {"vxlan", 3, 0x80, PRIO_TRAIN, "VXLAN reserved byte 3"},
	        {"vxlan", 7, 0x01, PRIO_TRAIN, "VXLAN reserved byte 7"},
	        {"vxlan", 6, 0xff, PRIO_INF, "VXLAN another VNI"},
	        {"vxlan4789", 0, 0x48, PRIO_TRAIN, "VXLAN 4789 with a reserved flag"},
	        {"geneve", 0, 0x42, PRIO_TRAIN, "Geneve version 1"},
	        {"geneve", 0, 0x82, PRIO_TRAIN, "Geneve version 2"},
	        {"geneve", 1, 0xc0, PRIO_INF, "Geneve O and C bits"},
	        {"geneve", 2, 0x88, PRIO_TRAIN, "Geneve protocol 0x8847 (MPLS)"},
	        {"geneve", 3, 0x00, PRIO_TRAIN, "Geneve protocol 0x6500"},
	        {"geneve-ip", 2, 0x81, PRIO_TRAIN, "Geneve protocol 0x8100"},
	};
	struct cls c;

	if (!cls_up(&c, pods, ARRAY_SIZE(pods)))
		return;
	for (unsigned i = 0; i < ARRAY_SIZE(cases); i++)
		for (int o6 = 0; o6 < 2; o6++) {
			struct bounds b;
			struct pkt p = edge_pkt(cases[i].kind, o6, false, 2, &b);
			uint32_t got;

			p.b[b.tun + cases[i].at] = cases[i].value;
			got = class_of(c.prog, &p);
			if (got != cases[i].want)
				fprintf(stderr, "  %s, outer v%d\n", cases[i].what, o6 ? 6 : 4);
			CHECK_INT(got, cases[i].want);
		}
	/* another UDP port (8473) with a perfect VXLAN header: no tunnel */
	{
		struct bounds b;
		struct pkt p = edge_pkt("vxlan", false, false, 0, &b);

		p.b[b.l4 + 3] = 0x29; /* 8472 = 0x2118 -> 0x2129 */
		CHECK_INT(class_of(c.prog, &p), PRIO_TRAIN);
	}
	/* a later IPv4 fragment of a datagram to 8472: its bytes are no header */
	{
		struct bounds b;
		struct pkt p = edge_pkt("vxlan", false, false, 0, &b);

		p.b[ETH_LEN + 6] = 0x00;
		p.b[ETH_LEN + 7] = 0xb9; /* fragment offset 185 (1480 bytes) */
		CHECK_INT(class_of(c.prog, &p), PRIO_TRAIN);
		p.b[ETH_LEN + 6] = 0x20; /* the first fragment (MF, offset 0): a tunnel */
		p.b[ETH_LEN + 7] = 0x00;
		CHECK_INT(class_of(c.prog, &p), PRIO_INF);
	}
	/* a tunnel carrying no IP (ARP inside VXLAN, Geneve's frame): the
	 * tunnel's, the default class, never the outer mark */
	{
		struct bounds b;
		struct pkt p = edge_pkt("vxlan", false, false, 0, &b);

		p.b[b.frame + 12] = 0x08;
		p.b[b.frame + 13] = 0x06;
		CHECK_INT(class_of(c.prog, &p), PRIO_DEF);
		p = edge_pkt("geneve", true, false, 3, &b);
		p.b[b.frame + 12] = 0x08;
		p.b[b.frame + 13] = 0x06;
		CHECK_INT(class_of(c.prog, &p), PRIO_DEF);
	}
	/* an IPv4 header length below 5 words: not parsed (the default class) */
	{
		struct bounds b;
		struct pkt p = edge_pkt("vxlan", false, false, 0, &b);

		p.b[ETH_LEN] = 0x44;
		CHECK_INT(class_of(c.prog, &p), PRIO_DEF);
	}
	cls_close(&c);
}

/* The download classifier makes the same decisions by destination: the
 * pod behind the tunnel header at every boundary, options skipped, no
 * tunnel on a wrong header (no mark is read coming in: default). */
TEST(download_overlay_edges)
{
	static const char *const kinds[] = {"vxlan", "geneve", "geneve-ip", "ipip"};
	int map = -1, prog = -1;

	if (!dcls_up(&map, &prog))
		return;
	for (unsigned k = 0; k < ARRAY_SIZE(kinds); k++)
		for (int o6 = 0; o6 < 2; o6++)
			for (int i6 = 0; i6 < 2; i6++) {
				struct bounds b;
				struct pkt p = edge_pkt(kinds[k], o6, i6, 7, &b);
				uint8_t *dst;

				/* the pod is the destination: swap the inner addresses */
				dst = p.b + b.ip + (i6 ? 24 : 16);
				memcpy(dst, p.b + b.ip + (i6 ? 8 : 12), i6 ? 16 : 4);
				CHECK_INT(class_of(prog, &p), PRIO_INF);
				p.len = b.end - 1;
				CHECK_INT(class_of(prog, &p), PRIO_DEF);
			}
	close(prog);
	close(map);
}

/* The download classifier: the class of the pod a packet is for, by its
 * destination, inside an overlay too; a sender's mark picks nothing (the
 * map has no DSCP entries, and none would be read); others: default. */
TEST(download_classifier_by_destination)
{
	static const struct {
		const char *kind; /* NULL: not encapsulated */
		const char *dst;
		uint8_t dscp;
		uint32_t want;
	} cases[] = {
	        {NULL, "10.75.0.10", 0, PRIO_INF},       {NULL, "10.75.0.20", 46, PRIO_TRAIN},
	        {NULL, "10.75.0.99", 46, PRIO_DEF},      {NULL, "fd00:75::10", 0, PRIO_INF},
	        {NULL, "fd00:75::20", 0, PRIO_TRAIN},    {"vxlan", "10.75.0.10", 0, PRIO_INF},
	        {"geneve", "10.75.0.20", 0, PRIO_TRAIN}, {"ipip", "10.75.0.10", 0, PRIO_INF},
	        {"vxlan", "fd00:75::20", 0, PRIO_TRAIN}, {"vxlan", "10.75.0.99", 46, PRIO_DEF},
	};
	int map = -1, prog = -1;
	struct error e = {0};

	if (!dcls_up(&map, &prog))
		return;
	for (unsigned i = 0; i < ARRAY_SIZE(cases); i++) {
		bool v6 = strchr(cases[i].dst, ':') != NULL;
		struct pkt p;
		struct run r;

		if (cases[i].kind) {
			p = overlay_to(cases[i].kind, false, v6 ? "fd00:99::7" : "192.168.99.7", cases[i].dst,
			               cases[i].dscp);
		} else {
			struct frame f = {0};

			put_eth(&f, v6 ? 0x86dd : 0x0800);
			put_ip_to(&f, v6 ? "fd00:99::7" : "192.168.99.7", cases[i].dst, 6, cases[i].dscp);
			pad(&f, 100);
			p = f.p;
		}
		r = run_ctx(prog, &p, 4242, 0, 0);
		if (r.priority != cases[i].want)
			fprintf(stderr, "  case %u: %s to %s\n", i, cases[i].kind ? cases[i].kind : "plain",
			        cases[i].dst);
		CHECK_INT(r.retval, TC_ACT_UNSPEC);
		CHECK_INT(r.priority, cases[i].want);
	}
	/* a DSCP entry in the map is not read coming in */
	CHECK_INT(bpf_cls_map_sync(map, pods, ARRAY_SIZE(pods), NULL, &e), 0);
	{
		struct frame f = {0};

		put_eth(&f, 0x0800);
		put_ip_to(&f, "192.168.99.7", "10.75.0.99", 6, 46);
		CHECK_INT(run1(prog, &f.p).priority, PRIO_DEF);
	}
	close(prog);
	close(map);
}

/* ---- bands inside a class (bands.h) ---- */

#define BAND_BYTES   10000u
#define BAND_IDLE_US 2000000u /* 2 s: longer than the first case's pause */

/* A UDP packet of len bytes (frame) from src:sport to dst:dport. */
static struct pkt pkt_flow(const char *src, const char *dst, uint16_t sport, uint16_t dport, uint32_t len)
{
	struct frame f = {0};
	uint8_t udp[8] = {(uint8_t)(sport >> 8), (uint8_t)sport, (uint8_t)(dport >> 8), (uint8_t)dport};

	put_eth(&f, strchr(src, ':') ? 0x86dd : 0x0800);
	put_ip_to(&f, src, dst, 17, 0);
	put(&f, udp, sizeof(udp));
	pad(&f, len - f.at);
	return f.p;
}

/* A TCP segment of len bytes (frame) from src:sport to dst:dport whose
 * acknowledgment number is ack (the ACK flag set); vxlan: inside a VXLAN
 * packet between two nodes (one outer 5-tuple for every inner flow). */
static struct pkt pkt_tcp_in(bool vxlan, const char *src, const char *dst, uint16_t sport, uint16_t dport, uint32_t ack,
                             uint32_t len)
{
	static const uint8_t vx[8] = {0x08, 0, 0, 0, 0, 0, 42, 0};
	struct frame f = {0};
	uint8_t tcp[20] = {(uint8_t)(sport >> 8), (uint8_t)sport, (uint8_t)(dport >> 8), (uint8_t)dport};

	tcp[8] = (uint8_t)(ack >> 24);
	tcp[9] = (uint8_t)(ack >> 16);
	tcp[10] = (uint8_t)(ack >> 8);
	tcp[11] = (uint8_t)ack;
	tcp[12] = 5 << 4; /* 20 bytes of header */
	tcp[13] = 0x10;   /* ACK */
	if (vxlan) {
		put_eth(&f, 0x0800);
		put_ip(&f, "192.168.1.1", 17, 0);
		put_udp(&f, 8472);
		put(&f, vx, sizeof(vx));
	}
	put_eth(&f, strchr(src, ':') ? 0x86dd : 0x0800);
	put_ip_to(&f, src, dst, 6, 0);
	put(&f, tcp, sizeof(tcp));
	pad(&f, len - f.at);
	return f.p;
}

static struct pkt pkt_tcp(const char *src, const char *dst, uint16_t sport, uint16_t dport, uint32_t ack, uint32_t len)
{
	return pkt_tcp_in(false, src, dst, sport, dport, ack, len);
}

/* The pods' entries, inference's band (to training's priority, as the
 * mq/EDT layouts name it) and the thresholds. */
static unsigned band_entries(struct bpf_cls_entry *v, unsigned n_pods, uint32_t idle_us)
{
	uint32_t inf = PRIO_INF;
	unsigned k = n_pods;

	memcpy(v, pods, n_pods * sizeof(*v));
	v[k] = (struct bpf_cls_entry){.key = {.kind = BPF_CLS_KEY_BAND}, .priority = PRIO_TRAIN};
	memcpy(v[k++].key.addr, &inf, sizeof(inf));
	v[k++] = (struct bpf_cls_entry){.key = {.kind = BPF_CLS_KEY_BAND_CFG, .addr = {BPF_BAND_CFG_BYTES}},
	                                .priority = BAND_BYTES};
	v[k++] = (struct bpf_cls_entry){.key = {.kind = BPF_CLS_KEY_BAND_CFG, .addr = {BPF_BAND_CFG_IDLE_US}},
	                                .priority = idle_us};
	return k;
}

/* The priority n packets of len bytes of one flow get, the last one's. */
static uint32_t flow_send(int prog, const struct pkt *p, unsigned n)
{
	uint32_t prio = 0;

	for (unsigned i = 0; i < n; i++)
		prio = run_ctx(prog, p, 4242, 0, 0).priority;
	return prio;
}

/* Upload: an inference flow stays interactive up to the threshold (10 x
 * 1000 bytes), its next packet is demoted (the band's priority), a short
 * flow of the same pod stays interactive meanwhile, training's flows have
 * no band; a demoted flow stays demoted while it sends, a sparse one's
 * count drains (threshold bytes per second). With a short idle gap, a
 * silence restarts the count and promotes. Without the band's entry
 * nothing is demoted. */
TEST(bands_demote_and_promote_upload)
{
	struct bpf_cls_entry ents[ARRAY_SIZE(pods) + 3];
	struct pkt bulk = pkt_flow("10.75.0.10", "10.75.0.2", 40000, 80, 1000);
	struct pkt chat = pkt_flow("10.75.0.10", "10.75.0.2", 40001, 80, 1000);
	struct pkt train = pkt_flow("10.75.0.20", "10.75.0.2", 40000, 80, 1000);
	struct pkt bulk6 = pkt_flow("fd00:75::10", "fd00:75::2", 40000, 80, 1000);
	struct pkt fresh = pkt_flow("10.75.0.10", "10.75.0.2", 40002, 80, 1000);
	struct error e = {0};
	struct cls c;

	if (!cls_up(&c, ents, band_entries(ents, ARRAY_SIZE(pods), BAND_IDLE_US)))
		return;
	CHECK_INT(flow_send(c.prog, &bulk, 10), PRIO_INF); /* 10000 bytes: at the threshold */
	CHECK_INT(flow_send(c.prog, &chat, 3), PRIO_INF);
	CHECK_INT(flow_send(c.prog, &bulk, 1), PRIO_TRAIN); /* beyond it */
	CHECK_INT(flow_send(c.prog, &bulk, 2), PRIO_TRAIN);
	CHECK_INT(flow_send(c.prog, &chat, 1), PRIO_INF);
	CHECK_INT(flow_send(c.prog, &train, 30), PRIO_TRAIN);
	CHECK_INT(flow_send(c.prog, &bulk6, 10), PRIO_INF);
	CHECK_INT(flow_send(c.prog, &bulk6, 1), PRIO_TRAIN);
	/* a second later (less than the idle gap): the demoted flow stays in
	 * the band while it keeps sending; the sparse one's 4000 bytes drained
	 * (9000 more would pass the threshold without the drain) */
	usleep(1000000);
	CHECK_INT(flow_send(c.prog, &bulk, 1), PRIO_TRAIN);
	CHECK_INT(flow_send(c.prog, &chat, 9), PRIO_INF);
	/* a silence of the idle gap restarts a flow's count (without it the
	 * second 9000 bytes would pass the threshold); a demoted flow stays
	 * demoted until BPF_BAND_PROMOTE_IDLE_MS of silence */
	CHECK_INT(bpf_cls_map_sync(c.map, ents, band_entries(ents, ARRAY_SIZE(pods), 20000), NULL, &e), 0);
	CHECK_INT(flow_send(c.prog, &fresh, 9), PRIO_INF);
	CHECK_INT(flow_send(c.prog, &chat, 11), PRIO_TRAIN);
	usleep(30000);
	CHECK_INT(flow_send(c.prog, &fresh, 9), PRIO_INF);
	CHECK_INT(flow_send(c.prog, &chat, 1), PRIO_TRAIN);
	usleep(BPF_BAND_PROMOTE_IDLE_MS * 1000 + 50000);
	CHECK_INT(flow_send(c.prog, &chat, 1), PRIO_INF);
	/* the band's entry gone (the planner's bands off): nothing is demoted */
	CHECK_INT(bpf_cls_map_sync(c.map, pods, ARRAY_SIZE(pods), NULL, &e), 0);
	CHECK_INT(flow_send(c.prog, &chat, 20), PRIO_INF);
	cls_close(&c);
}

/* A TCP flow's messages: its count restarts, and a demoted flow is
 * interactive again, when its acknowledgment number moves on by at least
 * BPF_BAND_MSG_MIN_BYTES (the peer sent a request: a keep-alive connection
 * serving responses one after another). A smaller step (a window update, a
 * ping), none (one long transfer) or a step back changes nothing. Upload
 * and download. */
TEST(bands_restart_at_each_request)
{
	struct bpf_cls_entry ents[ARRAY_SIZE(pods) + 3];
	const uint32_t a0 = 0xfffffff0u; /* the first request wraps the sequence space */
	struct pkt r0 = pkt_tcp("10.75.0.10", "10.75.0.2", 80, 40000, a0, 1000);
	struct pkt r1 = pkt_tcp("10.75.0.10", "10.75.0.2", 80, 40000, a0 + BPF_BAND_MSG_MIN_BYTES, 1000);
	struct pkt small = pkt_tcp("10.75.0.10", "10.75.0.2", 80, 40000, a0 + BPF_BAND_MSG_MIN_BYTES + 13, 1000);
	struct pkt back = pkt_tcp("10.75.0.10", "10.75.0.2", 80, 40000, a0, 1000);
	struct pkt d0 = pkt_tcp("192.168.99.7", "10.75.0.10", 443, 50000, 7, 1000);
	struct pkt d1 = pkt_tcp("192.168.99.7", "10.75.0.10", 443, 50000, 7 + 200, 1000);
	int map = -1, prog = -1;
	_cleanup_close_ int seen = -1;
	struct error e = {0};
	struct cls c;

	if (!cls_up(&c, ents, band_entries(ents, ARRAY_SIZE(pods), BAND_IDLE_US)))
		return;
	CHECK_INT(flow_send(c.prog, &r0, 10), PRIO_INF);  /* one response: at the threshold */
	CHECK_INT(flow_send(c.prog, &r0, 1), PRIO_TRAIN); /* the same message goes on: beyond it */
	CHECK_INT(flow_send(c.prog, &r1, 1), PRIO_INF);   /* the next request's response */
	CHECK_INT(flow_send(c.prog, &r1, 9), PRIO_INF);
	CHECK_INT(flow_send(c.prog, &small, 1), PRIO_TRAIN); /* 13 bytes in: not a request */
	CHECK_INT(flow_send(c.prog, &back, 1), PRIO_TRAIN);  /* an old acknowledgment */
	cls_close(&c);

	if (bpf_dcls_load(&map, &seen, &prog, &e) < 0) {
		fprintf(stderr, "  %s\n", e.msg);
		CHECK(!"the download classifier loads");
		return;
	}
	CHECK_INT(bpf_cls_map_sync(map, ents, band_entries(ents, 5, BAND_IDLE_US), NULL, &e), 0);
	CHECK_INT(flow_send(prog, &d0, 11), PRIO_TRAIN);
	CHECK_INT(flow_send(prog, &d1, 10), PRIO_INF);
	CHECK_INT(flow_send(prog, &d1, 1), PRIO_TRAIN);
	close(prog);
	close(map);
}

/* Behind a VXLAN overlay the flows are the inner ones: two pod flows in
 * one tunnel are counted apart, and the inner TCP header's requests
 * restart a flow's count. */
TEST(bands_count_the_flows_inside_an_overlay)
{
	struct bpf_cls_entry ents[ARRAY_SIZE(pods) + 3];
	struct pkt a0 = pkt_tcp_in(true, "10.75.0.10", "10.75.0.2", 80, 40000, 1, 1000);
	struct pkt a1 = pkt_tcp_in(true, "10.75.0.10", "10.75.0.2", 80, 40000, 1 + 300, 1000);
	struct pkt b = pkt_tcp_in(true, "10.75.0.10", "10.75.0.2", 80, 40001, 1, 1000);
	struct cls c;

	if (!cls_up(&c, ents, band_entries(ents, ARRAY_SIZE(pods), BAND_IDLE_US)))
		return;
	CHECK_INT(flow_send(c.prog, &a0, 11), PRIO_TRAIN); /* one long message: beyond the threshold */
	CHECK_INT(flow_send(c.prog, &b, 1), PRIO_INF);     /* another flow in the same tunnel */
	CHECK_INT(flow_send(c.prog, &a1, 1), PRIO_INF);    /* the next request's response */
	cls_close(&c);
}

/* Download: the same by the pod as the destination. */
TEST(bands_demote_and_promote_download)
{
	struct bpf_cls_entry ents[ARRAY_SIZE(pods) + 3];
	struct pkt bulk = pkt_flow("192.168.99.7", "10.75.0.10", 443, 50000, 1000);
	struct pkt chat = pkt_flow("192.168.99.7", "10.75.0.10", 443, 50001, 1000);
	int map = -1, prog = -1;
	_cleanup_close_ int seen = -1;
	struct error e = {0};

	if (bpf_dcls_load(&map, &seen, &prog, &e) < 0) {
		fprintf(stderr, "  %s\n", e.msg);
		CHECK(!"the download classifier loads");
		return;
	}
	CHECK_INT(bpf_cls_map_sync(map, ents, band_entries(ents, 5, 20000), NULL, &e), 0);
	CHECK_INT(flow_send(prog, &bulk, 10), PRIO_INF);
	CHECK_INT(flow_send(prog, &bulk, 1), PRIO_TRAIN);
	CHECK_INT(flow_send(prog, &chat, 5), PRIO_INF);
	usleep(30000);
	CHECK_INT(flow_send(prog, &bulk, 1), PRIO_TRAIN);
	usleep(BPF_BAND_PROMOTE_IDLE_MS * 1000 + 50000);
	CHECK_INT(flow_send(prog, &bulk, 1), PRIO_INF);
	close(prog);
	close(map);
}

/* The flow table is an LRU of BPF_FLOW_MAP_MAX: more flows than that keep
 * it at its bound (the least recently seen forgotten). */
TEST(bands_flow_table_is_bounded)
{
	struct bpf_cls_entry ents[ARRAY_SIZE(pods) + 3];
	struct pkt first = pkt_flow("10.75.0.10", "10.75.0.2", 1, 1, 1000);
	struct bpf_prog_info info;
	uint32_t len = sizeof(info), ids[4] = {0}, n = 0;
	int flows = -1;
	unsigned count = 0;
	struct error e = {0};
	struct cls c;

	if (!cls_up(&c, ents, band_entries(ents, ARRAY_SIZE(pods), BAND_IDLE_US)))
		return;
	memset(&info, 0, sizeof(info));
	CHECK_INT(bpf_obj_get_info_by_fd(c.prog, &info, &len), 0);
	CHECK_INT(bpf_prog_map_ids(info.id, ids, ARRAY_SIZE(ids), &n, "classifier", &e), 0);
	for (unsigned i = 0; i < n && flows < 0; i++) {
		const struct bpf_map_want want = {BPF_MAP_TYPE_LRU_HASH, sizeof(struct bpf_flow_key),
		                                  sizeof(struct bpf_flow), BPF_FLOW_MAP_MAX};

		(void)bpf_map_adopt(ids[i], &want, &flows, "flows", &e);
	}
	CHECK(flows >= 0);
	if (flows < 0) {
		cls_close(&c);
		return;
	}
	CHECK_INT(flow_send(c.prog, &first, 11), PRIO_TRAIN);
	for (uint32_t i = 0; i < BPF_FLOW_MAP_MAX + BPF_FLOW_MAP_MAX / 4; i++) {
		struct pkt p = pkt_flow("10.75.0.10", "10.75.0.2", (uint16_t)(i >> 16) + 2, (uint16_t)i, 100);

		run_ctx(c.prog, &p, 0, 0, 0);
	}
	{
		struct bpf_flow_key cur = {.family = 0xff}, next;

		while (bpf_map_get_next_key(flows, &cur, &next) == 0) {
			count++;
			cur = next;
		}
	}
	CHECK(count <= BPF_FLOW_MAP_MAX);
	CHECK(count > BPF_FLOW_MAP_MAX / 2);
	close(flows);
	cls_close(&c);
}

static const struct bpf_edt edt_1mbit = {.link_q20 = 8000ull << 20, /* bpf_edt_q20(1000000) */
                                         .inf_q20 = 16000ull << 20,
                                         .horizon_ns = 200000000,
                                         .overhead = 24,
                                         .inf_priority = PRIO_INF};

/* At 1 Mbit/s (8 us per byte) a 1000-byte packet plus 24 bytes of framing
 * takes 8192 us: bulk packets are stamped 8192 us apart on the link clock;
 * inference leaves on its own clock (now), ahead of the bulk already
 * stamped, and pushes the link clock on; past the horizon (200 ms) bulk is
 * dropped, inference not; rate 0 stamps nothing. */
TEST(edt_inference_and_bulk_clocks)
{
	struct pkt bulk = pkt_ip("10.75.0.20", 0, 1000, 0), inf = pkt_ip("10.75.0.10", 0, 1000, 0),
	           def = pkt_ip("10.75.0.99", 0, 1000, 0);
	struct run t1, t2, t3, i1, x;
	struct error e = {0};
	unsigned passed = 0;
	bool changed = false;
	struct cls c;

	CHECK_INT(bpf_edt_q20(1000000), 8000ull << 20);
	CHECK_INT(bpf_edt_q20(8000000), 1000u << 20);
	if (!cls_up(&c, pods, ARRAY_SIZE(pods)))
		return;
	CHECK_INT(bpf_edt_sync(c.edt, &edt_1mbit, &changed, &e), 0);
	CHECK(changed);
	CHECK_INT(bpf_edt_sync(c.edt, &edt_1mbit, &changed, &e), 0);
	CHECK(!changed);

	t1 = run1(c.prog, &bulk);
	t2 = run1(c.prog, &bulk);
	t3 = run1(c.prog, &bulk);
	CHECK_INT(t1.retval, TC_ACT_UNSPEC);
	CHECK(t1.tstamp > 0);
	CHECK_INT(t2.tstamp - t1.tstamp, 8192000);
	CHECK_INT(t3.tstamp - t2.tstamp, 8192000);
	i1 = run1(c.prog, &inf);
	CHECK_INT(i1.priority, PRIO_INF);
	CHECK(i1.tstamp >= t1.tstamp && i1.tstamp < t2.tstamp);
	/* the bulk after it waits for the inference packet's 8192 us too */
	x = run1(c.prog, &bulk);
	CHECK_INT(x.tstamp - t3.tstamp, 2 * 8192000);
	/* a default pod's packet is bulk */
	x = run1(c.prog, &def);
	CHECK_INT(x.priority, PRIO_DEF);
	CHECK_INT(x.tstamp - t3.tstamp, 3 * 8192000);
	/* the horizon: (200 ms - the 41 ms already ahead) / 8.2 ms of bulk, then drops */
	for (unsigned i = 0; i < 40; i++) {
		x = run1(c.prog, &bulk);
		if (x.retval != TC_ACT_UNSPEC)
			break;
		passed++;
	}
	CHECK_INT(x.retval, TC_ACT_SHOT);
	CHECK(passed >= 17 && passed <= 24);
	CHECK_INT(run1(c.prog, &inf).retval, TC_ACT_UNSPEC);

	/* clocks restarted: inference alone goes at the link's rate, not its
	 * ceiling (half of it here); bulk behind it; then inference on its own
	 * clock, which the bulk packet's link clock has reached too */
	CHECK_INT(bpf_edt_sync(c.edt, &(struct bpf_edt){0}, NULL, &e), 0);
	x = run1(c.prog, &bulk);
	CHECK_INT(x.tstamp, 0); /* rate 0: not stamped */
	CHECK_INT(bpf_edt_sync(c.edt, &edt_1mbit, NULL, &e), 0);
	t1 = run1(c.prog, &inf);
	t2 = run1(c.prog, &inf);
	CHECK_INT(t2.tstamp - t1.tstamp, 8192000);
	t3 = run1(c.prog, &bulk);
	CHECK_INT(t3.tstamp - t1.tstamp, 2 * 8192000);
	i1 = run1(c.prog, &inf);
	CHECK_INT(i1.tstamp - t1.tstamp, 3 * 8192000);
	cls_close(&c);
}

/* A pacing stamp the packet already carries (a host socket's, in
 * CLOCK_MONOTONIC) is the earliest start; one beyond the horizon is not a
 * pacing stamp and is ignored; ICMPv6 is never stamped nor dropped. */
TEST(edt_respects_stamps_and_icmpv6)
{
	struct pkt bulk = pkt_ip("10.75.0.20", 0, 1000, 0), nd = pkt_ip("fd00:75::20", 0, 90, PKT_ICMP6);
	struct error e = {0};
	uint64_t now, want;
	struct run r;
	struct cls c;

	if (!cls_up(&c, pods, ARRAY_SIZE(pods)))
		return;
	CHECK_INT(bpf_edt_sync(c.edt, &edt_1mbit, NULL, &e), 0);
	now = mono_ns();
	want = now + 50000000; /* 50 ms ahead */
	r = run_ctx(c.prog, &bulk, 0, want, 0);
	CHECK_INT(r.retval, TC_ACT_UNSPEC);
	CHECK(r.tstamp >= want);
	CHECK(r.tstamp < want + 1000000);
	/* the link clock is now past that stamp: the next packet follows it */
	r = run1(c.prog, &bulk);
	CHECK(r.tstamp >= want + 8192000);
	/* a stamp from another clock (far beyond the horizon) is not kept */
	r = run_ctx(c.prog, &bulk, 0, now + 3600ull * 1000000000ull, 0);
	CHECK(r.tstamp < now + 1000000000ull);
	/* fill the clock to the horizon: bulk drops, ICMPv6 neither waits nor drops */
	for (unsigned i = 0; i < 40 && run1(c.prog, &bulk).retval == TC_ACT_UNSPEC; i++)
		;
	CHECK_INT(run1(c.prog, &bulk).retval, TC_ACT_SHOT);
	r = run_ctx(c.prog, &nd, 0, 0, 0);
	CHECK_INT(r.retval, TC_ACT_UNSPEC);
	CHECK_INT(r.priority, PRIO_TRAIN);
	CHECK_INT(r.tstamp, 0);
	cls_close(&c);
}

/* The link clock advances by each packet's exact cost (to 4 ps), not a
 * cost floored to whole ns: 1000-byte packets at 396 Gbit/s cost 20.69 ns,
 * which whole ns made 20 (3.4 % over the rate). The clock is set 1 s ahead
 * so every packet is backlogged; 20000 packets in one run. */
TEST(edt_costs_keep_fractions_of_ns)
{
	static const uint64_t rates[] = {396000000000ull, 1000000000000ull, 100000000000ull};
	struct pkt p = pkt_ip("10.75.0.20", 0, 1000, 0);
	struct error e = {0};
	struct cls c;

	if (!cls_up(&c, pods, ARRAY_SIZE(pods)))
		return;
	for (unsigned k = 0; k < ARRAY_SIZE(rates); k++) {
		struct bpf_edt cfg = {.link_q20 = bpf_edt_q20(rates[k]),
		                      .inf_q20 = bpf_edt_q20(rates[k]),
		                      .horizon_ns = 10000000000ull,
		                      .overhead = 24,
		                      .inf_priority = PRIO_INF},
		               st;
		const unsigned n = 20000;
		struct bpf_test_run_opts o = {.sz = sizeof(o), .data_in = p.b, .data_size_in = p.len, .repeat = n};
		uint64_t before;
		double advance_ps, exact_ps = 1024.0 * 8 * 1e12 / (double)rates[k] * n;

		CHECK_INT(bpf_edt_sync(c.edt, &cfg, NULL, &e), 0);
		CHECK_INT(bpf_array0_read(c.edt, &st, "edt", &e), 0);
		st.link_q8 = (mono_ns() + 1000000000ull) << BPF_EDT_CLOCK_SHIFT;
		before = st.link_q8;
		CHECK_INT(bpf_array0_write(c.edt, &st, "edt", &e), 0);
		CHECK_INT(bpf_prog_test_run_opts(c.prog, &o), 0);
		CHECK_INT((int)o.retval, TC_ACT_UNSPEC);
		CHECK_INT(bpf_array0_read(c.edt, &st, "edt", &e), 0);
		advance_ps = (double)(st.link_q8 - before) * 1000.0 / (1 << BPF_EDT_CLOCK_SHIFT);
		fprintf(stderr, "  %" PRIu64 " bit/s: clock advanced %.0f ps for %u packets, exact %.0f ps\n", rates[k],
		        advance_ps, n, exact_ps);
		CHECK(advance_ps >= exact_ps * 0.999 && advance_ps <= exact_ps * 1.001);
	}
	cls_close(&c);
}

/* ---- the gate ---- */

struct gate_run_arg {
	int prog;
	unsigned n;
	int err;
};

static void *gate_run_thread(void *p)
{
	struct gate_run_arg *a = p;
	struct pkt pk = pkt_ip("10.75.0.20", 0, 1000, 0);
	struct bpf_test_run_opts o = {.sz = sizeof(o), .data_in = pk.b, .data_size_in = pk.len, .repeat = a->n};

	a->err = bpf_prog_test_run_opts(a->prog, &o);
	return NULL;
}

/* Off, every packet goes on to the redirect; on, packets skip it while a
 * window's bytes stay under the threshold, and from the packet that
 * crosses it the redirect takes everything until the hold has passed; what
 * the ifb sends back (its ingress ifindex) is not counted and goes on to
 * the redirect filter (whose action clears the ifb's mark and passes it). */
TEST(gate_both_sides_of_the_threshold)
{
	struct bpf_gate cfg = {.win_ns = 20000000, .threshold_bytes = 4500, .hold_ns = 200000000, .pass_ifindex = 77},
	                st;
	struct pkt p = pkt_ip("10.75.0.20", 0, 1000, 0);
	int map = -1, prog = -1;
	struct error e = {0};
	bool changed = false;

	if (bpf_gate_load(&map, BPF_GATE_UP_NAME, &prog, &e) < 0) {
		fprintf(stderr, "  %s\n", e.msg);
		CHECK(!"the gate loads");
		return;
	}
	CHECK_INT(run1(prog, &p).retval, TC_ACT_UNSPEC); /* off */
	CHECK_INT(bpf_gate_sync(map, &cfg, &changed, &e), 0);
	CHECK(changed);
	CHECK_INT(bpf_gate_sync(map, &cfg, &changed, &e), 0);
	CHECK(!changed);
	for (unsigned i = 0; i < 4; i++)
		CHECK_INT(run1(prog, &p).retval, TC_ACT_OK);
	CHECK_INT(run1(prog, &p).retval, TC_ACT_UNSPEC); /* the fifth crosses 4500 */
	CHECK_INT(run_ctx(prog, &p, 0, 0, 77).retval, TC_ACT_UNSPEC);
	CHECK_INT(bpf_gate_read(map, &st, &e), 0);
	CHECK_INT(st.win_bytes, 5000); /* the ifb's packet not counted */
	usleep(30 * 1000);             /* a new window, light: still redirected (the hold) */
	CHECK_INT(run1(prog, &p).retval, TC_ACT_UNSPEC);
	CHECK_INT(bpf_gate_read(map, &st, &e), 0);
	CHECK_INT(st.win_bytes, 1000);
	CHECK(st.redirect_until_ns > st.win_start_ns);
	usleep(250 * 1000); /* the hold over */
	CHECK_INT(run1(prog, &p).retval, TC_ACT_OK);
	/* the ifb's packets pass uncounted while under the threshold too */
	CHECK_INT(run_ctx(prog, &p, 0, 0, 77).retval, TC_ACT_UNSPEC);
	CHECK_INT(bpf_gate_sync(map, &(struct bpf_gate){0}, NULL, &e), 0);
	CHECK_INT(run1(prog, &p).retval, TC_ACT_UNSPEC);
	close(prog);
	close(map);
}

/* Two CPUs counting at once lose none of each other's bytes (a huge
 * window and threshold: every packet is counted, none redirected). */
TEST(gate_counts_every_byte_across_cpus)
{
	struct bpf_gate cfg = {.win_ns = 3600ull * 1000000000ull, .threshold_bytes = 1ull << 62, .hold_ns = 1}, st;
	struct gate_run_arg a[2];
	pthread_t th[2];
	int map = -1, prog = -1;
	struct error e = {0};

	if (bpf_gate_load(&map, BPF_GATE_NAME, &prog, &e) < 0) {
		fprintf(stderr, "  %s\n", e.msg);
		CHECK(!"the gate loads");
		return;
	}
	CHECK_INT(bpf_gate_sync(map, &cfg, NULL, &e), 0);
	{ /* open the window */
		struct pkt p = pkt_ip("10.75.0.20", 0, 1000, 0);
		CHECK_INT(run1(prog, &p).retval, TC_ACT_OK);
	}
	for (unsigned i = 0; i < 2; i++) {
		a[i] = (struct gate_run_arg){.prog = prog, .n = 500000};
		CHECK_INT(pthread_create(&th[i], NULL, gate_run_thread, &a[i]), 0);
	}
	for (unsigned i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		CHECK_INT(a[i].err, 0);
	}
	CHECK_INT(bpf_gate_read(map, &st, &e), 0);
	fprintf(stderr, "  counted %" PRIu64 " of %u bytes\n", (uint64_t)st.win_bytes, 1000u * 1000001u);
	CHECK_INT(st.win_bytes, 1000ull * 1000001ull);
	close(prog);
	close(map);
}

/* ---- loaders: adoption and tags ---- */

/* The maps of an attached program are found again from its id; a map of
 * another layout is never adopted (another version's value would overrun
 * this one's struct); the program's tag is the same at every load, and
 * differs between programs; a filter's desired tag must match the
 * attached one. */
TEST(loaders_adopt_and_tag)
{
	struct bpf_prog_info info;
	uint32_t len = sizeof(info);
	uint8_t tag1[BPF_TAG_LEN], tag2[BPF_TAG_LEN], tagg[BPF_TAG_LEN];
	int map = -1, edt = -1, prog = -1, map2 = -1, edt2 = -1, prog2 = -1, gmap = -1, gprog = -1, other;
	struct error e = {0};
	const struct bpf_map_want edt_want = {BPF_MAP_TYPE_ARRAY, 4, sizeof(struct bpf_edt), 1};
	struct tc_spec d = {.type = TC_FILTER, .kind = TC_KIND_BPF}, o;

	CHECK_INT(bpf_cls_load(&map, &edt, &prog, &e), 0);
	CHECK_INT(bpf_gate_load(&gmap, BPF_GATE_NAME, &gprog, &e), 0);
	if (prog < 0 || gprog < 0)
		return;
	memset(&info, 0, sizeof(info));
	CHECK_INT(bpf_obj_get_info_by_fd(prog, &info, &len), 0);
	CHECK_INT(bpf_cls_map_from_prog(info.id, &map2, &edt2, &e), 0);
	if (e.msg[0])
		fprintf(stderr, "  %s\n", e.msg);
	CHECK(map2 >= 0 && edt2 >= 0);
	/* a program loaded on the adopted maps shares them */
	CHECK_INT(bpf_cls_load(&map2, &edt2, &prog2, &e), 0);
	{
		struct bpf_cls_entry one = {.key = {.kind = BPF_CLS_KEY_DEFAULT}, .priority = 7};
		struct pkt p = pkt_ip("10.75.0.99", 0, 200, 0);

		CHECK_INT(bpf_cls_map_sync(map, &one, 1, NULL, &e), 0);
		CHECK_INT(run1(prog2, &p).priority, 7);
	}
	/* the download classifier's maps, found again beside its flows
	 * (bands.h): the classes, and the count of the packets it saw */
	{
		int dmap = -1, dseen = -1, dprog = -1, dmap2 = -1, dseen2 = -1;
		struct bpf_cls_entry one = {.key = {.kind = BPF_CLS_KEY_DEFAULT}, .priority = 9};
		struct pkt q = pkt_flow("192.168.99.7", "10.75.0.10", 443, 50000, 100);
		uint64_t seen = 0;
		uint32_t v = 0;

		CHECK_INT(bpf_dcls_load(&dmap, &dseen, &dprog, &e), 0);
		memset(&info, 0, sizeof(info));
		len = sizeof(info);
		CHECK_INT(bpf_obj_get_info_by_fd(dprog, &info, &len), 0);
		CHECK_INT(bpf_dcls_map_from_prog(info.id, &dmap2, &dseen2, &e), 0);
		CHECK_INT(bpf_cls_map_sync(dmap, &one, 1, NULL, &e), 0);
		CHECK_INT(bpf_map_lookup_elem(dmap2, &one.key, &v), 0);
		CHECK_INT(v, 9);
		CHECK_INT(bpf_dcls_seen(dseen2, &seen, &e), 0);
		CHECK_INT((int)seen, 0);
		CHECK_INT(run1(dprog, &q).priority, 9);
		CHECK_INT(run1(dprog, &q).priority, 9);
		CHECK_INT(bpf_dcls_seen(dseen2, &seen, &e), 0);
		CHECK_INT((int)seen, 2);
		close(dprog);
		close(dmap);
		close(dseen);
		if (dmap2 >= 0)
			close(dmap2);
		if (dseen2 >= 0)
			close(dseen2);
	}
	CHECK_INT(bpf_prog_tag_get(prog, tag1, &e), 0);
	CHECK_INT(bpf_prog_tag_get(prog2, tag2, &e), 0);
	CHECK_INT(bpf_prog_tag_get(gprog, tagg, &e), 0);
	CHECK(memcmp(tag1, tag2, BPF_TAG_LEN) == 0);
	CHECK(memcmp(tag1, tagg, BPF_TAG_LEN) != 0);
	/* another layout: refused */
	other = bpf_map_create(BPF_MAP_TYPE_ARRAY, "aiqos_edt", 4, sizeof(struct bpf_edt) - 8, 1, NULL);
	CHECK(other >= 0);
	memset(&info, 0, sizeof(info));
	len = sizeof(info);
	CHECK_INT(bpf_obj_get_info_by_fd(other, &info, &len), 0);
	{
		int fd = -1;

		CHECK_INT(bpf_map_adopt(info.id, &edt_want, &fd, "EDT", &e), -ENOENT);
		CHECK_CONTAINS(e.msg, "not this version's");
		CHECK_INT(fd, -1);
	}
	/* the filter's match: the name, and the tag where both sides know it */
	strcpy(d.u.bpf.name, BPF_CLS_NAME);
	o = d;
	memcpy(d.u.bpf.tag, tag1, BPF_TAG_LEN);
	d.u.bpf.tag_set = true;
	CHECK(tc_spec_match(&d, &o)); /* the kernel did not say */
	memcpy(o.u.bpf.tag, tag1, BPF_TAG_LEN);
	o.u.bpf.tag_set = true;
	CHECK(tc_spec_match(&d, &o));
	memcpy(o.u.bpf.tag, tagg, BPF_TAG_LEN);
	CHECK(!tc_spec_match(&d, &o));
	close(other);
	close(prog);
	close(prog2);
	close(map);
	close(edt);
	close(map2);
	close(edt2);
	close(gprog);
	close(gmap);
}

/* bpf(2) refused is said as a configuration error, not a missing feature;
 * a verifier refusal carries the verifier's last words. */
TEST(load_errors_say_why)
{
	struct error e = {0};

	CHECK(bpf_denied(-EPERM));
	CHECK(!bpf_denied(-EINVAL));
	CHECK_INT(bpf_load_error(&e, -EPERM, "classifier", NULL), -EPERM);
	CHECK_CONTAINS(e.msg, "a configuration error");
	CHECK_CONTAINS(e.msg, "seccomp");
	error_clear(&e);
	CHECK_INT(bpf_load_error(&e, -EACCES, "classifier", "0: (b7) r0 = 0\nR0 !read_ok\nprocessed 1 insns\n"),
	          -EACCES);
	CHECK_CONTAINS(e.msg, "processed 1 insns");
}

static void setup(void) __attribute__((constructor(200)));
static void setup(void)
{
	need_root();
}
