/* plan.c — the pure per-pod planner: (workload, profile, interfaces, kernel
 * capabilities) -> ordered plan items (sysctls, pod egress qdiscs or shaper,
 * DSCP marking, host-side ingress shaper), each with ordered alternatives.
 * Also the names of devices and statuses and the capability helpers; the
 * container and the builders are plan_items.c. No I/O. */
#include <linux/if_ether.h>
#include <sys/socket.h>

#include "plan.h"

#define ETH_HLEN_BYTES 14
#define MTU_DEFAULT    1500
#define KiB            1024ull
#define MiB            (1024ull * 1024ull)

/* Handles of the shaper tree, the same on the pod and the host side:
 * 1: htb (default class 10) -> 1:10 -> 10: leaf. */
#define H_SHAPER_ROOT  0x10000u  /* 1: */
#define H_SHAPER_CLASS 0x10010u  /* 1:10 */
#define H_SHAPER_LEAF  0x100000u /* 10: */
#define SHAPER_DEFCLS  0x10u
#define SHAPER_R2Q     10u

/* fq_codel's kernel defaults, for raising them under a slow shaper. */
#define CODEL_DEFAULT_TARGET_US   5000u
#define CODEL_DEFAULT_INTERVAL_US 100000u

static const char *const dev_names[_DEV_MAX] = {
        [DEV_POD] = "pod", [DEV_HOST] = "host", [DEV_UPLINK] = "uplink", [DEV_IFB] = "ifb", [DEV_IFB_UP] = "ifb-up"};
DEFINE_STRING_TABLE_NAME(plan_dev_name, enum plan_dev, dev_names)

struct plan_names plan_names_attach(const struct attach_ifaces *ifs)
{
	struct plan_names n = {0};

	if (ifs) {
		n.dev[DEV_POD] = ifs->pod_ifname;
		n.dev[DEV_HOST] = ifs->host_ifname;
	}
	return n;
}

const char *plan_dev_ifname(const struct plan_names *names, enum plan_dev d)
{
	static const char *const defaults[_DEV_MAX] = {[DEV_POD] = "pod",
	                                               [DEV_HOST] = "host",
	                                               [DEV_UPLINK] = "uplink",
	                                               [DEV_IFB] = PLAN_IFB_NAME,
	                                               [DEV_IFB_UP] = PLAN_IFB_UP_NAME};

	if (d < 0 || d >= _DEV_MAX)
		return "?";
	return names && names->dev[d] && names->dev[d][0] ? names->dev[d] : defaults[d];
}

static const char *const item_status_names[_ITEM_STATUS_MAX] = {
        [ITEM_PENDING] = "pending",
        [ITEM_APPLIED] = "applied",
        [ITEM_DEGRADED] = "degraded",
        [ITEM_SKIPPED] = "skipped",
};
DEFINE_STRING_TABLE_NAME(item_status_name, enum item_status, item_status_names)

void plan_caps_mark_missing(struct plan_caps *caps, enum tc_kind_id k)
{
	if (caps && k >= 0 && k < _TC_KIND_MAX)
		caps->missing_kinds |= 1u << k;
}

bool plan_caps_has(const struct plan_caps *caps, enum tc_kind_id k)
{
	if (k < 0 || k >= _TC_KIND_MAX)
		return false;
	return !caps || !(caps->missing_kinds & (1u << k));
}

/* ---- building ---- */

static int sysctl_add(struct plan *p, const char *id, const char *key, const char *val)
{
	struct plan_item *it = plan_item_add(p, ITEM_SYSCTL, DEV_POD, id, NULL);

	if (!it)
		return -ENOMEM;
	str_copy(it->key, sizeof(it->key), key);
	str_copy(it->val[0], sizeof(it->val[0]), val);
	it->n_alt = 1;
	return 0;
}

static int plan_sysctls(struct plan *p, const struct profile *pr, const struct plan_caps *caps)
{
	char v[SYSCTL_VAL_MAX];
	int r;

	if (pr->tcp_ecn >= 0) {
		snprintf(v, sizeof(v), "%d", pr->tcp_ecn);
		r = sysctl_add(p, "sysctl.tcp_ecn", "net/ipv4/tcp_ecn", v);
		if (r < 0)
			return r;
	}
	if (pr->n_cc > 0) {
		struct plan_item *it = plan_item_add(p, ITEM_SYSCTL, DEV_POD, "sysctl.cc", NULL);
		unsigned n_cc = pr->n_cc < PROFILE_CC_MAX ? pr->n_cc : PROFILE_CC_MAX;

		if (!it)
			return -ENOMEM;
		str_copy(it->key, sizeof(it->key), "net/ipv4/tcp_congestion_control");
		for (unsigned i = 0; i < n_cc && it->n_alt < PLAN_ALT_MAX; i++)
			str_copy(it->val[it->n_alt++], SYSCTL_VAL_MAX, pr->cc[i]);
	}
	if (pr->notsent_lowat > 0) {
		snprintf(v, sizeof(v), "%u", pr->notsent_lowat);
		r = sysctl_add(p, "sysctl.notsent_lowat", "net/ipv4/tcp_notsent_lowat", v);
		if (r < 0)
			return r;
	}
	/* min and default as the kernel ships them; the maximum as the profile
	 * says (a default above a lower maximum would start every socket
	 * above it: the download tree's training window, node.h DOWNLOAD) */
	if (pr->rmem_max > 0) {
		snprintf(v, sizeof(v), "4096 %u %u", pr->rmem_max < 131072 ? pr->rmem_max : 131072, pr->rmem_max);
		r = sysctl_add(p, "sysctl.rmem", "net/ipv4/tcp_rmem", v);
		if (r < 0)
			return r;
	}
	if (pr->wmem_max > 0) {
		snprintf(v, sizeof(v), "4096 16384 %u", pr->wmem_max);
		r = sysctl_add(p, "sysctl.wmem", "net/ipv4/tcp_wmem", v);
		if (r < 0)
			return r;
	}
	return 0;
}

static uint64_t clamp_u64(uint64_t v, uint64_t lo, uint64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* fq_codel's target and interval under a shaper of rate_bps: the target must
 * cover the serialisation of 1.5 full frames at the shaped rate (else codel
 * drops at low rates where one packet already takes longer than the
 * target), and the interval must stay >= 10 x target. 0 keeps the kernel
 * default when the default is already enough. */
static void codel_times(const struct profile *pr, uint64_t rate_bps, uint32_t frame, uint32_t *ret_target_us,
                        uint32_t *ret_interval_us)
{
	uint64_t target = pr->target_us, interval = pr->interval_us;

	if (rate_bps > 0) {
		/* 1.5 * frame * 8 bits * 1e6 us/s / rate, rounded up */
		uint64_t min_us = ((uint64_t)frame * 12000000ull + rate_bps - 1) / rate_bps;
		uint64_t eff_target = target ? target : CODEL_DEFAULT_TARGET_US;
		uint64_t eff_interval = interval ? interval : CODEL_DEFAULT_INTERVAL_US;

		if (eff_target < min_us) {
			eff_target = min_us;
			target = min_us;
		}
		if (eff_interval < 10 * eff_target)
			interval = 10 * eff_target;
	}
	*ret_target_us = (uint32_t)(target > UINT32_MAX ? UINT32_MAX : target);
	*ret_interval_us = (uint32_t)(interval > UINT32_MAX ? UINT32_MAX : interval);
}

static void alt_fq(struct plan_item *it, const struct profile *pr)
{
	struct tc_spec *s = plan_alt_add(it, TC_KIND_FQ);

	if (!s)
		return;
	s->u.fq.limit_pkts = pr->limit_pkts;
	s->u.fq.ce_threshold_us = pr->ce_threshold_us;
}

static void alt_fq_codel(struct plan_item *it, const struct profile *pr, uint64_t rate_bps, uint32_t frame)
{
	struct tc_spec *s = plan_alt_add(it, TC_KIND_FQ_CODEL);

	if (!s)
		return;
	codel_times(pr, rate_bps, frame, &s->u.fq_codel.target_us, &s->u.fq_codel.interval_us);
	s->u.fq_codel.limit_pkts = pr->limit_pkts;
	s->u.fq_codel.ce_threshold_us = pr->ce_threshold_us;
	s->u.fq_codel.ecn = TRI_ON;
}

/* The byte FIFO of last resort under a shaper, sized by time: queue_ms
 * worth of the shaped rate (the profile's queue, a few ms: never deeper than
 * the 25 ms token-bucket queue aiqos replaces), at least FIFO_MIN_FRAMES full
 * frames, at most 64 MiB. No GSO-sized floor: under a shaper TCP's TSO
 * autosizing keeps a GSO packet near 1 ms of its pacing rate (at least
 * tcp_min_tso_segs = 2 segments), so at low rates the packets are small, and
 * a 64 KiB floor would be 26-52 ms at 10-20 Mbit/s. */
#define FIFO_MIN_FRAMES 4u

static uint32_t fifo_limit_bytes(uint64_t rate_bps, uint32_t queue_ms, uint32_t frame)
{
	uint64_t bytes = rate_bps / 8 * (queue_ms ? queue_ms : 1) / 1000;

	return (uint32_t)clamp_u64(bytes, (uint64_t)FIFO_MIN_FRAMES * frame, 64 * MiB);
}

static void alt_bfifo(struct plan_item *it, const struct profile *pr, uint64_t rate_bps, uint32_t frame)
{
	struct tc_spec *s = plan_alt_add(it, TC_KIND_BFIFO);

	if (!s)
		return;
	s->u.fifo.limit = fifo_limit_bytes(rate_bps, pr->queue_ms, frame);
}

/* The AQM alternatives of a class, best first, for the root qdisc `handle`
 * under `parent`: training prefers fq (pacing, per-flow fairness for bulk
 * flows), everything else fq_codel (low delay). Under a shaper (rate_bps >
 * 0) a byte FIFO is the last resort; without one there is no FIFO fallback:
 * an unshaped veth is noqueue, a FIFO would only add a queue. */
static void alts_aqm(struct plan_item *it, uint32_t parent, uint32_t handle, const struct profile *pr,
                     uint64_t rate_bps, uint32_t frame)
{
	it->tc[0].type = TC_QDISC;
	it->tc[0].parent = parent;
	it->tc[0].handle = handle;
	if (pr->class == CLASS_TRAINING)
		alt_fq(it, pr);
	alt_fq_codel(it, pr, rate_bps, frame);
	if (rate_bps > 0)
		alt_bfifo(it, pr, rate_bps, frame);
}

static int plan_shaper(struct plan *p, enum plan_dev dev, const char *prefix, uint64_t rate_bps,
                       const struct profile *pr, uint32_t frame, const struct plan_caps *caps)
{
	char id_root[PLAN_ID_MAX], id_class[PLAN_ID_MAX], id_leaf[PLAN_ID_MAX];
	struct plan_item *it;
	struct tc_spec *s;

	snprintf(id_root, sizeof(id_root), "%s.root", prefix);
	snprintf(id_class, sizeof(id_class), "%s.class", prefix);
	snprintf(id_leaf, sizeof(id_leaf), "%s.leaf", prefix);

	it = plan_item_add(p, ITEM_TC, dev, id_root, NULL);
	if (!it)
		return -ENOMEM;
	s = plan_alt_first(it, TC_QDISC, TC_KIND_HTB, TC_H_ROOT, H_SHAPER_ROOT);
	s->u.htb.defcls = SHAPER_DEFCLS;
	s->u.htb.r2q = SHAPER_R2Q;

	it = plan_item_add(p, ITEM_TC, dev, id_class, id_root);
	if (!it)
		return -ENOMEM;
	s = plan_alt_first(it, TC_CLASS, TC_KIND_HTB_CLASS, H_SHAPER_ROOT, H_SHAPER_CLASS);
	s->u.htb_class.rate_bps = rate_bps;
	s->u.htb_class.ceil_bps = rate_bps;
	/* the floor: two full frames (plan_htb_burst_bytes) */
	s->u.htb_class.burst_bytes = plan_htb_burst_bytes(rate_bps, 2 * frame);
	s->u.htb_class.cburst_bytes = s->u.htb_class.burst_bytes;
	s->u.htb_class.quantum_bytes = plan_htb_quantum_bytes(rate_bps, frame);
	s->u.htb_class.prio = 0;

	it = plan_item_add(p, ITEM_TC, dev, id_leaf, id_class);
	if (!it)
		return -ENOMEM;
	alts_aqm(it, H_SHAPER_CLASS, H_SHAPER_LEAF, pr, rate_bps, frame);
	return 0;
}

static int plan_dscp(struct plan *p, const struct profile *pr)
{
	static const struct {
		const char *id;
		uint16_t prio, protocol;
		int family;
	} fams[] = {
	        {"dscp.v4", 1, ETH_P_IP, AF_INET},
	        {"dscp.v6", 2, ETH_P_IPV6, AF_INET6},
	};
	struct plan_item *it;
	struct tc_spec *s;

	it = plan_item_add(p, ITEM_TC, DEV_POD, "dscp.clsact", NULL);
	if (!it)
		return -ENOMEM;
	plan_alt_first(it, TC_QDISC, TC_KIND_CLSACT, TC_H_CLSACT, TC_H_MAKE(TC_H_CLSACT, 0));

	for (size_t i = 0; i < ARRAY_SIZE(fams); i++) {
		it = plan_item_add(p, ITEM_TC, DEV_POD, fams[i].id, "dscp.clsact");
		if (!it)
			return -ENOMEM;
		s = plan_alt_first(it, TC_FILTER, TC_KIND_U32, TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS), 0);
		s->prio = fams[i].prio;
		s->protocol = fams[i].protocol;
		s->u.u32.match = U32_MATCH_ALL;
		s->u.u32.family = fams[i].family;
		s->u.u32.classid = 0;
		s->u.u32.dscp = pr->dscp;
	}
	return 0;
}

/* The most items a pod plan has: 5 sysctls, the egress shaper (3), DSCP
 * marking (3), the ingress shaper (3). Reserved up front: one allocation. */
#define POD_ITEMS_MAX 14u

static int plan_pod_build(const struct workload *w, const struct profile *pr, uint32_t frame,
                          const struct plan_caps *caps, struct plan *p)
{
	int r;

	r = plan_reserve(p, POD_ITEMS_MAX);
	if (r < 0)
		return r;
	if (w->egress_bps > 0) {
		r = plan_shaper(p, DEV_POD, "egress", w->egress_bps, pr, frame, caps);
		if (r < 0)
			return r;
	} else if (pr->pod_qdisc) {
		struct plan_item *it = plan_item_add(p, ITEM_TC, DEV_POD, "egress.root", NULL);

		if (!it)
			return -ENOMEM;
		alts_aqm(it, TC_H_ROOT, H_SHAPER_ROOT, pr, 0, frame);
	}

	if (pr->dscp >= 0 && pr->dscp <= 63) {
		r = plan_dscp(p, pr);
		if (r < 0)
			return r;
	}

	/* Also without a host-side veth (macvlan/ipvlan primaries): the
	 * applier then records the shaper as skipped with its reason, never
	 * drops the limit silently. */
	if (w->ingress_bps > 0) {
		r = plan_shaper(p, DEV_HOST, "ingress", w->ingress_bps, pr, frame, caps);
		if (r < 0)
			return r;
	}
	/* last: the congestion control depends on whether fq made it onto the
	 * pod (apply.c, cc_needs_fq) */
	return plan_sysctls(p, pr, caps);
}

int plan_pod(const struct workload *w, const struct profile *pr, const struct attach_ifaces *ifs,
             const struct plan_caps *caps, struct plan *ret)
{
	uint32_t mtu = ifs && ifs->mtu ? ifs->mtu : MTU_DEFAULT;
	int r;

	plan_free(ret);
	if (!w || !pr)
		return -EINVAL;
	r = plan_pod_build(w, pr, mtu + ETH_HLEN_BYTES, caps, ret);
	if (r < 0)
		plan_free(ret);
	return r;
}
