/* plan_node.c — the pure node planner (node.h): mode decision with
 * hysteresis, class shares, and the uplink plan (HTB / prio / root AQM tree
 * plus u32 classifiers) with stable item ids and filter handles. No I/O. */
#include <inttypes.h>
#include <limits.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <stdarg.h>
#include <sys/socket.h>

#include "node.h"
#include "plan_node_int.h"

#define H_ROOT            0x10000u  /* 1: */
#define H_PARENT          0x10001u  /* 1:1 (HTB parent class) */
#define MINOR_INFERENCE   0x10u     /* 1:10 */
#define MINOR_DEFAULT     0x20u     /* 1:20 (HTB default class) */
#define MINOR_TRAINING    0x30u     /* 1:30 */
#define MINOR_BULK        0x11u     /* 1:11 (BANDS: inference-bulk) */
#define H_LEAF_BULK       0x110000u /* 11: */
#define BAND_BULK_NAME    "inference-bulk"
#define H_LEAF_INFERENCE  0x100000u /* 10: */
#define H_LEAF_DEFAULT    0x200000u /* 20: */
#define H_LEAF_TRAINING   0x300000u /* 30: */
#define PRIO_BANDS        3u
#define PRIO_BAND_DEFAULT 1u /* band index of class 1:2 */
#define QUEUE_MS_DEFAULT  5u
#define QUEUE_MS_TRAINING 20u
#define ETH_HLEN_BYTES    14u
#define MTU_DEFAULT       1500u
#define TREE_ITEMS_MAX    16u

#define PFX_UPLINK "uplink"
#define PFX_DOWN   "down"
#define PFX_SHAPER "shaper" /* GATED HTB: the tree on PLAN_IFB_UP_NAME */

/* ---- names ---- */

static const char *const mode_names[_MODE_MAX] = {
        [MODE_IDLE] = "idle",
        [MODE_TRAINING] = "training",
        [MODE_INFERENCE] = "inference",
        [MODE_MIXED] = "mixed",
};
DEFINE_STRING_TABLE_NAME(node_mode_name, enum node_mode, mode_names)
DEFINE_STRING_TABLE_FROM_NAME(node_mode_from_name, enum node_mode, mode_names, _MODE_INVALID)

static const char *const classify_names[_CLASSIFY_MAX] = {
        [CLASSIFY_SRC_IP] = "src-ip",
        [CLASSIFY_DSCP] = "dscp",
};
DEFINE_STRING_TABLE_NAME(node_classify_name, enum node_classify, classify_names)
DEFINE_STRING_TABLE_FROM_NAME(node_classify_from_name, enum node_classify, classify_names, _CLASSIFY_INVALID)

static const char *const shape_names[_SHAPE_MAX] = {
        [SHAPE_NONE] = "none", [SHAPE_ROOT_AQM] = "root-aqm", [SHAPE_PRIO] = "prio",       [SHAPE_HTB] = "htb",
        [SHAPE_MQ] = "mq",     [SHAPE_EDT] = "edt",           [SHAPE_HTB_IFB] = "htb-ifb",
};
DEFINE_STRING_TABLE_NAME(node_shape_name, enum node_shape, shape_names)

static const char *const weight_basis_names[_WEIGHT_MAX] = {
        [WEIGHT_PODS] = "pods",
        [WEIGHT_GPUS] = "gpus",
        [WEIGHT_BANDWIDTH] = "bandwidth",
};
DEFINE_STRING_TABLE_NAME(node_weight_basis_name, enum node_weight_basis, weight_basis_names)

/* ---- config ---- */

void node_config_defaults(struct node_config *ret)
{
	memset(ret, 0, sizeof(*ret));
	str_copy(ret->uplink, sizeof(ret->uplink), NODE_UPLINK_AUTO);
	ret->uplink_rate_bps = 0;
	ret->inference_share = NODE_INFERENCE_SHARE_DEFAULT;
	ret->training_floor = NODE_TRAINING_FLOOR_DEFAULT;
	ret->downlink = true;
	ret->mixed_hold_s = NODE_MIXED_HOLD_S_DEFAULT;
	ret->debounce_ms = NODE_DEBOUNCE_MS_DEFAULT;
	ret->classify = CLASSIFY_SRC_IP;
	ret->dscp_inference = NODE_DSCP_INFERENCE_DEFAULT;
	ret->dscp_training = NODE_DSCP_TRAINING_DEFAULT;
	ret->overhead_bytes = NODE_OVERHEAD_DEFAULT;
	ret->down_rtt_us = NODE_DOWN_RTT_US_DEFAULT;
	ret->training_rcv_window = NODE_DOWN_RCV_WINDOW_AUTO;
	ret->bulk_threshold_bytes = NODE_BULK_THRESHOLD_DEFAULT;
	ret->bulk_idle_ms = NODE_BULK_IDLE_MS_DEFAULT;
	ret->bulk_weight = NODE_BULK_WEIGHT_DEFAULT;
}

int node_config_check(const struct node_config *cfg, struct error *err)
{
	if (!cfg)
		return error_set(err, EINVAL, "no node config");
	if (!memchr(cfg->uplink, '\0', sizeof(cfg->uplink)) || cfg->uplink[0] == '\0')
		return error_set(err, EINVAL, "uplink: must be an interface name (at most %d characters) or \"auto\"",
		                 IFNAME_LEN - 1);
	if (!(cfg->inference_share >= 0.0 && cfg->inference_share <= 1.0))
		return error_set(err, EINVAL, "inferenceShare: %g is out of range 0..1", cfg->inference_share);
	if (!(cfg->training_floor >= 0.0 && cfg->training_floor <= 1.0))
		return error_set(err, EINVAL, "trainingFloor: %g is out of range 0..1", cfg->training_floor);
	if (cfg->uplink_rate_bps != 0 && (cfg->uplink_rate_bps < BW_MIN_BPS || cfg->uplink_rate_bps > BW_MAX_BPS))
		return error_set(err, EINVAL, "uplinkRate: %" PRIu64 " bit/s is out of range %llu..%llu",
		                 cfg->uplink_rate_bps, BW_MIN_BPS, BW_MAX_BPS);
	if (cfg->downlink_rate_bps != 0 && (cfg->downlink_rate_bps < BW_MIN_BPS || cfg->downlink_rate_bps > BW_MAX_BPS))
		return error_set(err, EINVAL, "downlinkRate: %" PRIu64 " bit/s is out of range %llu..%llu",
		                 cfg->downlink_rate_bps, BW_MIN_BPS, BW_MAX_BPS);
	if (cfg->down_rtt_us > NODE_DOWN_RTT_US_MAX)
		return error_set(err, EINVAL, "downlinkRttUs: %u is out of range 0..%d", cfg->down_rtt_us,
		                 NODE_DOWN_RTT_US_MAX);
	if (cfg->training_rcv_window != NODE_DOWN_RCV_WINDOW_AUTO &&
	    cfg->training_rcv_window != NODE_DOWN_RCV_WINDOW_OFF &&
	    (cfg->training_rcv_window < NODE_DOWN_RCV_WINDOW_MIN ||
	     cfg->training_rcv_window > NODE_DOWN_RCV_WINDOW_MAX))
		return error_set(err, EINVAL,
		                 "trainingRcvWindow: %u bytes is out of range %u..%u (or \"auto\", \"off\")",
		                 cfg->training_rcv_window, NODE_DOWN_RCV_WINDOW_MIN, NODE_DOWN_RCV_WINDOW_MAX);
	if (cfg->bulk_threshold_bytes && (cfg->bulk_threshold_bytes < NODE_BULK_THRESHOLD_MIN ||
	                                  cfg->bulk_threshold_bytes > NODE_BULK_THRESHOLD_MAX))
		return error_set(err, EINVAL, "bulkThreshold: %u bytes is out of range %u..%u (or \"off\")",
		                 cfg->bulk_threshold_bytes, NODE_BULK_THRESHOLD_MIN, NODE_BULK_THRESHOLD_MAX);
	if (cfg->bulk_idle_ms < 1 || cfg->bulk_idle_ms > NODE_BULK_IDLE_MS_MAX)
		return error_set(err, EINVAL, "bulkIdleMs: %u is out of range 1..%d", cfg->bulk_idle_ms,
		                 NODE_BULK_IDLE_MS_MAX);
	if (!(cfg->bulk_weight >= NODE_BULK_WEIGHT_MIN && cfg->bulk_weight <= NODE_BULK_WEIGHT_MAX))
		return error_set(err, EINVAL, "bulkWeight: %g is out of range %g..%g", cfg->bulk_weight,
		                 NODE_BULK_WEIGHT_MIN, NODE_BULK_WEIGHT_MAX);
	if (!node_classify_name(cfg->classify))
		return error_set(err, EINVAL, "classify: invalid value %d (src-ip, dscp)", (int)cfg->classify);
	if (cfg->overhead_bytes > NODE_OVERHEAD_MAX)
		return error_set(err, EINVAL, "uplinkOverhead: %u bytes is out of range 0..%d", cfg->overhead_bytes,
		                 NODE_OVERHEAD_MAX);
	if (cfg->dscp_inference < 0 || cfg->dscp_inference > 63)
		return error_set(err, EINVAL, "inference DSCP: %d is out of range 0..63", cfg->dscp_inference);
	if (cfg->dscp_training < 0 || cfg->dscp_training > 63)
		return error_set(err, EINVAL, "training DSCP: %d is out of range 0..63", cfg->dscp_training);
	if (cfg->classify == CLASSIFY_DSCP) {
		if (cfg->dscp_inference == cfg->dscp_training)
			return error_set(err, EINVAL, "classify dscp: inference and training use the same DSCP %d",
			                 cfg->dscp_inference);
		if (cfg->dscp_inference == 0 || cfg->dscp_training == 0)
			return error_set(err, EINVAL,
			                 "classify dscp: DSCP 0 is unmarked traffic and cannot select a class");
	}
	return 0;
}

/* ---- counting, mode, shares ---- */

static bool class_valid(enum workload_class c)
{
	return c >= 0 && c < _CLASS_MAX;
}

void node_pods_count(const struct node_pod *pods, unsigned n, struct node_counts *ret)
{
	memset(ret, 0, sizeof(*ret));
	for (unsigned i = 0; pods && i < n; i++) {
		const struct node_pod *p = &pods[i];
		enum workload_class c = class_valid(p->class) ? p->class : CLASS_DEFAULT;

		ret->n_pods++;
		ret->n[c]++;
		ret->gpus[c] += p->gpus;
		if (p->egress_bps > 0) {
			ret->egress_bps[c] += p->egress_bps;
			ret->n_egress[c]++;
		}
		if (c == CLASS_TRAINING && p->ce_marking)
			ret->n_dctcp_training++;
	}
}

enum node_mode node_mode_desired(const struct node_counts *c)
{
	bool inf = c->n[CLASS_INFERENCE] > 0, train = c->n[CLASS_TRAINING] > 0;

	if (inf && train)
		return MODE_MIXED;
	if (train)
		return MODE_TRAINING;
	if (inf)
		return MODE_INFERENCE;
	return MODE_IDLE;
}

int64_t node_mode_decide(const struct node_mode_state *prev, const struct node_counts *c, int64_t now_ms,
                         uint32_t hold_s, struct node_mode_state *ret)
{
	enum node_mode desired = node_mode_desired(c);
	struct node_mode_state s = prev ? *prev : NODE_MODE_STATE_INIT;
	int64_t hold_ms = (int64_t)hold_s * 1000;

	if (desired == MODE_MIXED) {
		s.mode = MODE_MIXED;
		s.mixed_last_needed_ms = now_ms;
		*ret = s;
		return -1;
	}
	if (s.mode == MODE_MIXED) {
		/* now < last (a clock that went back) counts as "within the hold" */
		bool held = now_ms < s.mixed_last_needed_ms || now_ms - s.mixed_last_needed_ms < hold_ms;

		if (held) {
			*ret = s;
			return s.mixed_last_needed_ms > INT64_MAX - hold_ms ? INT64_MAX
			                                                    : s.mixed_last_needed_ms + hold_ms;
		}
	}
	s.mode = desired;
	*ret = s;
	return -1;
}

static double clamp01(double v)
{
	return v >= 0.0 ? (v <= 1.0 ? v : 1.0) : 0.0; /* NaN -> 0 */
}

void node_shares_compute(const struct node_counts *c, double training_floor, double inference_share,
                         enum node_mode mode, struct node_shares *ret)
{
	double w_inf, w_train, t, floor_share;
	long pm, max_pm;

	memset(ret, 0, sizeof(*ret));
	ret->basis = WEIGHT_PODS;
	switch (mode) {
	case MODE_TRAINING:
		ret->share_pm[CLASS_DEFAULT] = NODE_SHARE_DEFAULT_PM;
		ret->share_pm[CLASS_TRAINING] = 1000 - NODE_SHARE_DEFAULT_PM;
		return;
	case MODE_INFERENCE:
		ret->share_pm[CLASS_INFERENCE] = 1000 - NODE_SHARE_DEFAULT_PM;
		ret->share_pm[CLASS_DEFAULT] = NODE_SHARE_DEFAULT_PM;
		return;
	case MODE_MIXED:
		break;
	default:
		return;
	}

	if (c->gpus[CLASS_INFERENCE] + c->gpus[CLASS_TRAINING] > 0) {
		ret->basis = WEIGHT_GPUS;
		w_inf = (double)c->gpus[CLASS_INFERENCE];
		w_train = (double)c->gpus[CLASS_TRAINING];
	} else if (c->n[CLASS_INFERENCE] > 0 && c->n[CLASS_TRAINING] > 0 &&
	           c->n_egress[CLASS_INFERENCE] == c->n[CLASS_INFERENCE] &&
	           c->n_egress[CLASS_TRAINING] == c->n[CLASS_TRAINING]) {
		ret->basis = WEIGHT_BANDWIDTH;
		w_inf = (double)c->egress_bps[CLASS_INFERENCE];
		w_train = (double)c->egress_bps[CLASS_TRAINING];
	} else {
		w_inf = c->n[CLASS_INFERENCE];
		w_train = c->n[CLASS_TRAINING];
	}
	ret->weight[CLASS_INFERENCE] = w_inf;
	ret->weight[CLASS_TRAINING] = w_train;
	t = w_inf + w_train > 0 ? w_train / (w_inf + w_train) : 0.5;
	floor_share = clamp01(training_floor) * (0.5 + t);
	pm = (long)(floor_share * 1000.0 + 0.5); /* >= 0; no libm */
	/* inferenceShare: the minimum guarantee of inference lowers the floor */
	max_pm = 1000 - NODE_SHARE_DEFAULT_PM - (long)(clamp01(inference_share) * 1000.0 + 0.5);
	if (pm > max_pm)
		pm = max_pm;
	if (pm < NODE_FLOOR_MIN_PM)
		pm = NODE_FLOOR_MIN_PM;
	if (pm > NODE_FLOOR_MAX_PM)
		pm = NODE_FLOOR_MAX_PM;
	ret->share_pm[CLASS_TRAINING] = (unsigned)pm;
	ret->share_pm[CLASS_DEFAULT] = NODE_SHARE_DEFAULT_PM;
	ret->share_pm[CLASS_INFERENCE] = 1000 - (unsigned)pm - NODE_SHARE_DEFAULT_PM;
}

/* ---- ids and handles ---- */

static uint64_t fnv1a64(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++) {
		h ^= (uint8_t)*s;
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* u32 node id 1..0xfff for (uid, n) */
static uint32_t handle_hash(const char *uid, unsigned n)
{
	uint32_t h = 0x811c9dc5u;

	for (const char *s = uid; *s; s++) {
		h ^= (uint8_t)*s;
		h *= 0x01000193u;
	}
	h ^= 0xffu; /* separator between the UID and the index */
	h *= 0x01000193u;
	h ^= n & 0xffu;
	h *= 0x01000193u;
	h ^= h >> 16;
	return h % NODE_FILTERS_MAX + 1;
}

static int pod_item_id(const char *pfx, const char *uid, unsigned n, char *buf, size_t size)
{
	int r;

	if (!uid || !buf)
		return -EINVAL;
	r = snprintf(buf, size, "%s.pod.%016" PRIx64 ".%u", pfx, fnv1a64(uid), n);
	if (r < 0 || (size_t)r >= size)
		return -ENOBUFS;
	return 0;
}

int node_pod_item_id(const char *uid, unsigned n, char *buf, size_t size)
{
	return pod_item_id(PFX_UPLINK, uid, n, buf, size);
}

int node_down_pod_item_id(const char *uid, unsigned n, char *buf, size_t size)
{
	return pod_item_id(PFX_DOWN, uid, n, buf, size);
}

/* ---- the plan ---- */

static void builder_tree(struct builder *b, enum plan_dev dev, const char *pfx, enum u32_match m)
{
	b->dev = dev;
	b->pfx = pfx;
	b->addr_match = m;
	snprintf(b->id_root, sizeof(b->id_root), "%s.root", pfx);
	snprintf(b->id_parent, sizeof(b->id_parent), "%s.class.parent", pfx);
}

struct plan_item *item_add(struct builder *b, const char *id, const char *depends)
{
	return plan_item_add(b->p, ITEM_TC, b->dev, id, depends);
}

static uint64_t clamp_u64(uint64_t v, uint64_t lo, uint64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static uint32_t fifo_bytes(uint64_t rate_bps, unsigned ms, uint32_t min_bytes)
{
	return (uint32_t)clamp_u64(rate_bps / 8 * ms / 1000, min_bytes, NODE_FIFO_MAX_BYTES);
}

static void spec_fq_codel_inference(struct tc_spec *s)
{
	s->u.fq_codel.target_us = NODE_INF_TARGET_US;
	s->u.fq_codel.interval_us = NODE_INF_INTERVAL_US;
	s->u.fq_codel.limit_pkts = NODE_INF_LIMIT_PKTS;
	s->u.fq_codel.ecn = TRI_ON;
}

/* The byte FIFO a class's leaf falls back to (alts_queue), sized at the
 * rate that drains it. */
static uint32_t leaf_fifo_bytes(enum workload_class c, uint64_t fifo_rate_bps, bool ingress)
{
	switch (c) {
	case CLASS_INFERENCE:
		return fifo_bytes(fifo_rate_bps, NODE_INF_QUEUE_MS, NODE_FIFO_MIN_INFERENCE_BYTES);
	case CLASS_TRAINING:
		return fifo_bytes(fifo_rate_bps, ingress ? NODE_DOWN_TRAINING_QUEUE_MS : QUEUE_MS_TRAINING,
		                  NODE_FIFO_MIN_TRAINING_BYTES);
	default:
		return fifo_bytes(fifo_rate_bps, QUEUE_MS_DEFAULT, NODE_FIFO_MIN_BYTES);
	}
}

/* A gate's hold (node.h, NODE_GATE_HOLD_MS): twice the time the tree's
 * leaves take to drain their byte FIFOs at rp, at least the fixed hold, so
 * that packets passing the gate again never overtake a backlog still in
 * the tree. */
static uint64_t gate_hold_ns(uint64_t rp, const uint64_t class_rate[_CLASS_MAX], bool ingress)
{
	uint64_t sum = 0, hold = (uint64_t)NODE_GATE_HOLD_MS * 1000000;

	if (!rp)
		return hold;
	for (int c = 0; c < _CLASS_MAX; c++)
		if (class_rate[c])
			sum += leaf_fifo_bytes((enum workload_class)c, rp, ingress);
	/* sum <= 3 x 16 MiB: the product stays under 2^64 */
	sum = 2 * sum * 8 * 1000000000ull / rp;
	return sum > hold ? sum : hold;
}

/* Alternatives of a class queue, best first. fifo_rate_bps: the rate that
 * drains it (for the byte FIFO), 0 = no FIFO fallback. ingress: a queue of
 * the download tree (node.h DOWNLOAD): no fq for training (its pacing is for
 * local senders; forwarded traffic has none) and a shorter training FIFO. */
void alts_queue(struct plan_item *it, enum workload_class c, uint32_t ce_us, uint64_t fifo_rate_bps, bool ingress)
{
	struct tc_spec *s;

	switch (c) {
	case CLASS_INFERENCE:
		if ((s = plan_alt_add(it, TC_KIND_FQ_CODEL)))
			spec_fq_codel_inference(s);
		if (fifo_rate_bps && (s = plan_alt_add(it, TC_KIND_BFIFO)))
			s->u.fifo.limit = leaf_fifo_bytes(c, fifo_rate_bps, ingress);
		break;
	case CLASS_TRAINING:
		if (!ingress && (s = plan_alt_add(it, TC_KIND_FQ)))
			s->u.fq.ce_threshold_us = ce_us;
		if ((s = plan_alt_add(it, TC_KIND_FQ_CODEL))) {
			s->u.fq_codel.ce_threshold_us = ce_us;
			s->u.fq_codel.ecn = TRI_ON;
		}
		if (fifo_rate_bps && (s = plan_alt_add(it, TC_KIND_BFIFO)))
			s->u.fifo.limit = leaf_fifo_bytes(c, fifo_rate_bps, ingress);
		break;
	default:
		if ((s = plan_alt_add(it, TC_KIND_FQ_CODEL)))
			s->u.fq_codel.ecn = TRI_ON;
		if (fifo_rate_bps && (s = plan_alt_add(it, TC_KIND_BFIFO)))
			s->u.fifo.limit = leaf_fifo_bytes(c, fifo_rate_bps, ingress);
		break;
	}
}

static int leaf_add(struct builder *b, enum workload_class c, const char *depends, uint32_t parent, uint32_t handle,
                    uint32_t ce_us, uint64_t fifo_rate_bps)
{
	char id[PLAN_ID_MAX];
	struct plan_item *it;

	snprintf(id, sizeof(id), "%s.leaf.%s", b->pfx, workload_class_name(c));
	it = item_add(b, id, depends);
	if (!it)
		return -ENOMEM;
	it->tc[0].type = TC_QDISC;
	it->tc[0].parent = parent;
	it->tc[0].handle = handle;
	alts_queue(it, c, ce_us, fifo_rate_bps, b->dev == DEV_IFB);
	return 0;
}

static uint32_t class_minor(enum workload_class c)
{
	return c == CLASS_INFERENCE ? MINOR_INFERENCE : c == CLASS_TRAINING ? MINOR_TRAINING : MINOR_DEFAULT;
}

/* A BPF classifier's skb->priority for each class of an HTB tree with
 * these rates: its classid; a class without one goes to the default's. */
static void htb_cls_priority(const uint64_t rate[_CLASS_MAX], uint32_t ret[_CLASS_MAX])
{
	for (int c = 0; c < _CLASS_MAX; c++)
		ret[c] = rate[c]               ? TC_H_MAKE(H_ROOT, class_minor(c))
		         : rate[CLASS_DEFAULT] ? TC_H_MAKE(H_ROOT, MINOR_DEFAULT)
		                               : 0;
}

static uint32_t leaf_handle(enum workload_class c)
{
	return c == CLASS_INFERENCE ? H_LEAF_INFERENCE : c == CLASS_TRAINING ? H_LEAF_TRAINING : H_LEAF_DEFAULT;
}

/* HTB prio of a class: inference first, default between, training last. */
static uint32_t class_htb_prio(enum workload_class c)
{
	return c == CLASS_INFERENCE ? 0 : c == CLASS_DEFAULT ? 1 : 2;
}

/* Order in which classes appear in the plan (and in tc -s class show). */
static const enum workload_class class_order[] = {CLASS_INFERENCE, CLASS_DEFAULT, CLASS_TRAINING};

/* A class's HTB burst floor. Inference's holds a cluster of responses (its
 * leaf's floor): within it the class is green and sends without the parent,
 * whose tokens training's borrowing keeps negative; past it an inference
 * burst would wait for the parent's refill. Training's borrowing repays it. */
static uint32_t class_burst_min(enum workload_class c)
{
	return c == CLASS_INFERENCE ? NODE_FIFO_MIN_INFERENCE_BYTES : NODE_FIFO_MIN_BYTES;
}

/* The inference-bulk band's HTB class and leaf (node.h BANDS): training's
 * prio, rate bulk_rate, quantum training's x weight (both at least
 * NODE_BAND_QUANTUM_MIN_BYTES: training's raised where the band's would be
 * below it). */
static int band_htb_add(struct builder *b, uint64_t rp, const uint64_t class_rate[_CLASS_MAX], uint64_t bulk_rate,
                        double weight, unsigned training)
{
	uint32_t qt = plan_htb_quantum_bytes(class_rate[CLASS_TRAINING], NODE_BAND_QUANTUM_MIN_BYTES), qb;
	char id[PLAN_ID_MAX];
	struct plan_item *it;
	struct tc_spec *s;

	if ((double)qt * weight < NODE_BAND_QUANTUM_MIN_BYTES)
		qt = (uint32_t)((double)NODE_BAND_QUANTUM_MIN_BYTES / weight + 0.5);
	qb = (uint32_t)((double)qt * weight + 0.5);
	if (training < b->p->n)
		b->p->items[training].tc[0].u.htb_class.quantum_bytes = qt;
	snprintf(id, sizeof(id), "%s.class.%s", b->pfx, BAND_BULK_NAME);
	it = item_add(b, id, b->id_parent);
	if (!it)
		return -ENOMEM;
	s = plan_alt_first(it, TC_CLASS, TC_KIND_HTB_CLASS, H_PARENT, TC_H_MAKE(H_ROOT, MINOR_BULK));
	s->u.htb_class.rate_bps = bulk_rate;
	s->u.htb_class.ceil_bps = rp;
	s->u.htb_class.burst_bytes = plan_htb_burst_bytes(bulk_rate, class_burst_min(CLASS_TRAINING));
	s->u.htb_class.cburst_bytes = plan_htb_burst_bytes(rp, class_burst_min(CLASS_TRAINING));
	s->u.htb_class.quantum_bytes = qb;
	s->u.htb_class.prio = class_htb_prio(CLASS_TRAINING);
	return 0;
}

static int band_leaf_add(struct builder *b, uint64_t rp)
{
	char id[PLAN_ID_MAX], dep[PLAN_ID_MAX];
	struct plan_item *it;

	snprintf(dep, sizeof(dep), "%s.class.%s", b->pfx, BAND_BULK_NAME);
	snprintf(id, sizeof(id), "%s.leaf.%s", b->pfx, BAND_BULK_NAME);
	it = item_add(b, id, dep);
	if (!it)
		return -ENOMEM;
	it->tc[0].type = TC_QDISC;
	it->tc[0].parent = TC_H_MAKE(H_ROOT, MINOR_BULK);
	it->tc[0].handle = H_LEAF_BULK;
	/* the flows of inference pods: no CE threshold (not DCTCP's) */
	alts_queue(it, CLASS_TRAINING, 0, rp, b->dev == DEV_IFB);
	/* on the download ifb the FIFO holds what the windows of many bulk
	 * connections let in flight (node.h DOWNLOAD): inference's size, not
	 * training's shorter one */
	for (unsigned i = 0; b->dev == DEV_IFB && i < it->n_alt; i++)
		if (it->tc[i].kind == TC_KIND_BFIFO)
			it->tc[i].u.fifo.limit = leaf_fifo_bytes(CLASS_INFERENCE, rp, true);
	return 0;
}

/* bulk_rate: the inference-bulk band's rate (0 = no band), weight its
 * bulkWeight. */
static int tree_htb(struct builder *b, uint64_t rp, const uint64_t class_rate[_CLASS_MAX], uint32_t ce_us,
                    uint64_t bulk_rate, double weight)
{
	struct plan_item *it;
	struct tc_spec *s;
	unsigned training = UINT_MAX;
	int r;

	it = item_add(b, b->id_root, NULL);
	if (!it)
		return -ENOMEM;
	s = plan_alt_first(it, TC_QDISC, TC_KIND_HTB, TC_H_ROOT, H_ROOT);
	s->u.htb.defcls = MINOR_DEFAULT;
	s->u.htb.r2q = NODE_HTB_R2Q;

	it = item_add(b, b->id_parent, b->id_root);
	if (!it)
		return -ENOMEM;
	s = plan_alt_first(it, TC_CLASS, TC_KIND_HTB_CLASS, H_ROOT, H_PARENT);
	s->u.htb_class.rate_bps = rp;
	s->u.htb_class.ceil_bps = rp;
	s->u.htb_class.burst_bytes = plan_htb_burst_bytes(rp, NODE_FIFO_MIN_BYTES);
	s->u.htb_class.cburst_bytes = plan_htb_burst_bytes(rp, NODE_FIFO_MIN_BYTES);
	s->u.htb_class.quantum_bytes = plan_htb_quantum_bytes(rp, b->frame);
	s->u.htb_class.prio = 0;

	for (size_t i = 0; i < ARRAY_SIZE(class_order); i++) {
		enum workload_class c = class_order[i];
		char id[PLAN_ID_MAX];

		if (class_rate[c] == 0)
			continue;
		snprintf(id, sizeof(id), "%s.class.%s", b->pfx, workload_class_name(c));
		it = item_add(b, id, b->id_parent);
		if (!it)
			return -ENOMEM;
		s = plan_alt_first(it, TC_CLASS, TC_KIND_HTB_CLASS, H_PARENT, TC_H_MAKE(H_ROOT, class_minor(c)));
		s->u.htb_class.rate_bps = class_rate[c];
		s->u.htb_class.ceil_bps = rp;
		s->u.htb_class.burst_bytes = plan_htb_burst_bytes(class_rate[c], class_burst_min(c));
		s->u.htb_class.cburst_bytes = plan_htb_burst_bytes(rp, class_burst_min(c));
		s->u.htb_class.quantum_bytes = plan_htb_quantum_bytes(class_rate[c], b->frame);
		s->u.htb_class.prio = class_htb_prio(c);
		if (c == CLASS_TRAINING)
			training = b->p->n - 1; /* an index: items move when the array grows */
	}
	if (bulk_rate && (r = band_htb_add(b, rp, class_rate, bulk_rate, weight, training)) < 0)
		return r;
	for (size_t i = 0; i < ARRAY_SIZE(class_order); i++) {
		enum workload_class c = class_order[i];
		char dep[PLAN_ID_MAX];

		if (class_rate[c] == 0)
			continue;
		snprintf(dep, sizeof(dep), "%s.class.%s", b->pfx, workload_class_name(c));
		r = leaf_add(b, c, dep, TC_H_MAKE(H_ROOT, class_minor(c)), leaf_handle(c), ce_us, rp);
		if (r < 0)
			return r;
	}
	return bulk_rate ? band_leaf_add(b, rp) : 0;
}

/* prio band (1-based minor) of a class: inference 1, default 2, training 3 */
static uint32_t prio_minor(enum workload_class c)
{
	return c == CLASS_INFERENCE ? 1 : c == CLASS_DEFAULT ? 2 : 3;
}

static int tree_prio(struct builder *b, uint64_t fifo_rate_bps, uint32_t ce_us)
{
	struct plan_item *it;
	struct tc_spec *s;

	it = item_add(b, b->id_root, NULL);
	if (!it)
		return -ENOMEM;
	s = plan_alt_first(it, TC_QDISC, TC_KIND_PRIO, TC_H_ROOT, H_ROOT);
	s->u.prio.bands = PRIO_BANDS;
	for (size_t i = 0; i < ARRAY_SIZE(s->u.prio.priomap); i++)
		s->u.prio.priomap[i] = PRIO_BAND_DEFAULT;

	for (size_t i = 0; i < ARRAY_SIZE(class_order); i++) {
		enum workload_class c = class_order[i];
		int r = leaf_add(b, c, b->id_root, TC_H_MAKE(H_ROOT, prio_minor(c)), leaf_handle(c), ce_us,
		                 fifo_rate_bps);
		if (r < 0)
			return r;
	}
	return 0;
}

/* A classless root: the AQM of the class that sets the mode. */
static int tree_root_aqm(struct builder *b, enum workload_class c, uint32_t ce_us)
{
	struct plan_item *it = item_add(b, b->id_root, NULL);

	if (!it)
		return -ENOMEM;
	it->tc[0].type = TC_QDISC;
	it->tc[0].parent = TC_H_ROOT;
	it->tc[0].handle = H_ROOT;
	alts_queue(it, c, ce_us, 0, false);
	return 0;
}

/* One address filter to place */
struct filter_req {
	const struct node_pod *pod;
	unsigned ip; /* index in pod->ips */
	uint32_t classid;
	char id[PLAN_ID_MAX];
	uint32_t handle; /* node id, 0 = not assigned yet */
};

struct prev_ref {
	const char *id;
	uint32_t handle;
};

static int prev_ref_cmp(const void *a, const void *b)
{
	return strcmp(((const struct prev_ref *)a)->id, ((const struct prev_ref *)b)->id);
}

static bool bit_test(const uint64_t *bits, uint32_t i)
{
	return bits[i / 64] & (1ULL << (i % 64));
}
static void bit_set(uint64_t *bits, uint32_t i)
{
	bits[i / 64] |= 1ULL << (i % 64);
}

/* Node ids: from prev first (same id, still free), then hash + linear probe,
 * both in request order (pods sorted by UID, addresses in order). */
static int handles_assign(struct filter_req *reqs, unsigned n_reqs, const struct plan *prev)
{
	uint64_t taken[(NODE_FILTERS_MAX + 1 + 63) / 64] = {0};
	_cleanup_free_ struct prev_ref *refs = NULL;
	unsigned n_refs = 0;

	if (prev && prev->n > 0) {
		refs = calloc(prev->n, sizeof(*refs));
		if (!refs)
			return -ENOMEM;
		for (unsigned i = 0; i < prev->n; i++) {
			const struct plan_item *it = &prev->items[i];
			const struct tc_spec *s = &it->tc[0];

			if (it->type != ITEM_TC || it->n_alt < 1 || s->type != TC_FILTER || s->kind != TC_KIND_U32 ||
			    (s->u.u32.match != U32_MATCH_SRC && s->u.u32.match != U32_MATCH_DST) || s->handle < 1 ||
			    s->handle > NODE_FILTERS_MAX)
				continue;
			refs[n_refs++] = (struct prev_ref){.id = it->id, .handle = s->handle};
		}
		qsort(refs, n_refs, sizeof(*refs), prev_ref_cmp);
	}

	for (unsigned i = 0; i < n_reqs && n_refs > 0; i++) {
		struct prev_ref key = {.id = reqs[i].id};
		const struct prev_ref *ref = bsearch(&key, refs, n_refs, sizeof(*refs), prev_ref_cmp);

		if (ref && !bit_test(taken, ref->handle)) {
			reqs[i].handle = ref->handle;
			bit_set(taken, ref->handle);
		}
	}
	for (unsigned i = 0; i < n_reqs; i++) {
		uint32_t h;

		if (reqs[i].handle)
			continue;
		h = handle_hash(reqs[i].pod->uid, reqs[i].ip);
		for (unsigned probe = 0; bit_test(taken, h); probe++) {
			if (probe >= NODE_FILTERS_MAX)
				return -E2BIG; /* not reached: n_reqs <= NODE_FILTERS_MAX is checked */
			h = h % NODE_FILTERS_MAX + 1;
		}
		reqs[i].handle = h;
		bit_set(taken, h);
	}
	return 0;
}

static int pod_ptr_cmp(const void *a, const void *b)
{
	return strcmp((*(const struct node_pod *const *)a)->uid, (*(const struct node_pod *const *)b)->uid);
}

struct uid_hash {
	uint64_t h;
	const char *uid;
};

static int uid_hash_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct uid_hash *)a)->h, y = ((const struct uid_hash *)b)->h;
	return x < y ? -1 : x > y;
}

static int pods_check(const struct node_pod *pods, unsigned n, struct error *err)
{
	for (unsigned i = 0; i < n; i++) {
		const struct node_pod *p = &pods[i];
		const char *ns = memchr(p->namespace_, '\0', sizeof(p->namespace_)) ? p->namespace_ : "?";
		const char *name = memchr(p->name, '\0', sizeof(p->name)) ? p->name : "?";

		if (!memchr(p->uid, '\0', sizeof(p->uid)) || p->uid[0] == '\0')
			return error_set(err, EINVAL, "pod %s/%s: missing or overlong UID", ns, name);
		if (!class_valid(p->class))
			return error_set(err, EINVAL, "pod %s/%s: invalid class %d", ns, name, (int)p->class);
		if (p->n_ips > NODE_POD_IPS_MAX)
			return error_set(err, EINVAL, "pod %s/%s: %u addresses, at most %d", ns, name, p->n_ips,
			                 NODE_POD_IPS_MAX);
		for (unsigned k = 0; k < p->n_ips; k++)
			if (p->ips[k].family != AF_INET && p->ips[k].family != AF_INET6)
				return error_set(err, EINVAL, "pod %s/%s: address %u has family %d", ns, name, k,
				                 p->ips[k].family);
	}
	return 0;
}

/* Sorted pod pointers; refuses duplicate UIDs and UID hash collisions. */
static int pods_sort(const struct node_pod *pods, unsigned n, const struct node_pod ***ret, struct error *err)
{
	_cleanup_free_ const struct node_pod **sorted = NULL;
	_cleanup_free_ struct uid_hash *hashes = NULL;

	sorted = calloc(n ? n : 1, sizeof(*sorted)); // NOLINT(bugprone-sizeof-expression): an array of pointers
	hashes = calloc(n ? n : 1, sizeof(*hashes));
	if (!sorted || !hashes)
		return error_set(err, ENOMEM, "out of memory sorting %u pods", n);
	for (unsigned i = 0; i < n; i++) {
		sorted[i] = &pods[i];
		hashes[i] = (struct uid_hash){.h = fnv1a64(pods[i].uid), .uid = pods[i].uid};
	}
	qsort(sorted, n, sizeof(*sorted), pod_ptr_cmp); // NOLINT(bugprone-sizeof-expression)
	for (unsigned i = 1; i < n; i++)
		if (streq(sorted[i - 1]->uid, sorted[i]->uid))
			return error_set(err, EINVAL, "pods %s/%s and %s/%s have the same UID %s",
			                 sorted[i - 1]->namespace_, sorted[i - 1]->name, sorted[i]->namespace_,
			                 sorted[i]->name, sorted[i]->uid);
	qsort(hashes, n, sizeof(*hashes), uid_hash_cmp);
	for (unsigned i = 1; i < n; i++)
		if (hashes[i - 1].h == hashes[i].h)
			return error_set(err, ENOTUNIQ, "pod UIDs %s and %s have the same item hash %016" PRIx64,
			                 hashes[i - 1].uid, hashes[i].uid, hashes[i].h);
	*ret = TAKE_PTR(sorted);
	return 0;
}

static void filter_spec(struct tc_spec *s, int family, uint16_t prio_v4, uint16_t prio_v6, uint32_t handle,
                        uint32_t classid)
{
	s->type = TC_FILTER;
	s->kind = TC_KIND_U32;
	s->parent = H_ROOT;
	s->handle = handle;
	s->prio = family == AF_INET ? prio_v4 : prio_v6;
	s->protocol = family == AF_INET ? ETH_P_IP : ETH_P_IPV6;
	s->u.u32.family = family;
	s->u.u32.classid = classid;
	s->u.u32.dscp = -1;
}

static int filters_dscp(struct builder *b, const struct node_config *cfg, const uint32_t classid[_CLASS_MAX])
{
	static const struct {
		enum workload_class c;
		int family;
		const char *fam;
		uint32_t handle;
	} fs[] = {
	        {CLASS_INFERENCE, AF_INET, "v4", 1},
	        {CLASS_INFERENCE, AF_INET6, "v6", 2},
	        {CLASS_TRAINING, AF_INET, "v4", 3},
	        {CLASS_TRAINING, AF_INET6, "v6", 4},
	};

	for (size_t i = 0; i < ARRAY_SIZE(fs); i++) {
		int dscp = fs[i].c == CLASS_INFERENCE ? cfg->dscp_inference : cfg->dscp_training;
		char id[PLAN_ID_MAX];
		struct plan_item *it;
		struct tc_spec *s;

		if (!classid[fs[i].c])
			continue;
		snprintf(id, sizeof(id), "%s.dscp.%s.%s", b->pfx, workload_class_name(fs[i].c), fs[i].fam);
		it = item_add(b, id, b->id_root);
		if (!it)
			return -ENOMEM;
		s = plan_alt_add(it, TC_KIND_U32);
		filter_spec(s, fs[i].family, NODE_FILTER_PRIO_DSCP_V4, NODE_FILTER_PRIO_DSCP_V6, fs[i].handle,
		            classid[fs[i].c]);
		s->u.u32.match = U32_MATCH_DSFIELD;
		s->u.u32.tos = (uint8_t)(dscp << 2);
	}
	return 0;
}

/* Addresses to classify (classid NULL: every pod's) */
static unsigned filters_count(const struct node_pod *pods, unsigned n, const uint32_t classid[_CLASS_MAX])
{
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++)
		if (!classid || classid[pods[i].class])
			k += pods[i].n_ips;
	return k;
}

static unsigned filters_count_sorted(const struct node_pod *const *sorted, unsigned n,
                                     const uint32_t classid[_CLASS_MAX])
{
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++)
		if (classid[sorted[i]->class])
			k += sorted[i]->n_ips;
	return k;
}

static int filters_src(struct builder *b, const struct node_pod *const *sorted, unsigned n,
                       const uint32_t classid[_CLASS_MAX], unsigned n_reqs, const struct plan *prev)
{
	_cleanup_free_ struct filter_req *reqs = NULL;
	unsigned k = 0;
	int r;

	if (n_reqs == 0)
		return 0;
	reqs = calloc(n_reqs, sizeof(*reqs));
	if (!reqs)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		const struct node_pod *p = sorted[i];

		if (!classid[p->class])
			continue;
		for (unsigned ip = 0; ip < p->n_ips && k < n_reqs; ip++, k++) {
			reqs[k] = (struct filter_req){.pod = p, .ip = ip, .classid = classid[p->class]};
			r = pod_item_id(b->pfx, p->uid, ip, reqs[k].id, sizeof(reqs[k].id));
			if (r < 0)
				return r;
		}
	}
	r = handles_assign(reqs, k, prev);
	if (r < 0)
		return r;
	for (unsigned i = 0; i < k; i++) {
		const struct node_ip *ip = &reqs[i].pod->ips[reqs[i].ip];
		struct plan_item *it = item_add(b, reqs[i].id, b->id_root);
		struct tc_spec *s;

		if (!it)
			return -ENOMEM;
		s = plan_alt_add(it, TC_KIND_U32);
		filter_spec(s, ip->family, NODE_FILTER_PRIO_SRC_V4, NODE_FILTER_PRIO_SRC_V6, reqs[i].handle,
		            reqs[i].classid);
		s->u.u32.match = b->addr_match;
		if (ip->family == AF_INET) {
			memcpy(s->u.u32.addr, ip->addr, 4);
			s->u.u32.prefix_len = 32;
		} else {
			memcpy(s->u.u32.addr, ip->addr, 16);
			s->u.u32.prefix_len = 128;
		}
	}
	return 0;
}

_printf_(2, 3) static void info_warn(struct node_plan_info *info, const char *fmt, ...)
{
	va_list ap;

	if (info->n_warn >= NODE_WARN_MAX)
		return;
	va_start(ap, fmt);
	vsnprintf(info->warn[info->n_warn++], NODE_WARN_LEN, fmt, ap);
	va_end(ap);
}

/* R * percent %, exact in integers */
static uint64_t shaped_rate(uint64_t r, unsigned percent)
{
	return r / 100 * percent + r % 100 * percent / 100;
}

/* HTB class rates and ceilings from the shares: the floor and default are
 * exact, the rest goes to inference (to training in training mode). */
static void htb_class_rates(uint64_t rp, const struct node_shares *sh, uint64_t rate[_CLASS_MAX],
                            uint64_t ceil[_CLASS_MAX], uint32_t classid[_CLASS_MAX])
{
	int rest = sh->share_pm[CLASS_INFERENCE] ? CLASS_INFERENCE : CLASS_TRAINING;
	uint64_t used = 0;

	for (int c = 0; c < _CLASS_MAX; c++)
		if (c != rest && sh->share_pm[c]) {
			rate[c] = rp * sh->share_pm[c] / 1000;
			if (rate[c] == 0)
				rate[c] = 1;
			used += rate[c];
		}
	if (sh->share_pm[rest])
		rate[rest] = rp > used + 1 ? rp - used : 1;
	for (int c = 0; c < _CLASS_MAX; c++) {
		if (rate[c])
			ceil[c] = rp;
		if (c != CLASS_DEFAULT && rate[c])
			classid[c] = TC_H_MAKE(H_ROOT, class_minor(c));
	}
}

/* BANDS (node.h): the inference-bulk band's rate, training's floor, taken
 * from inference's rate; 0 (no band) without a training class. */
static uint64_t band_rates(uint64_t rate[_CLASS_MAX])
{
	uint64_t bulk = rate[CLASS_TRAINING];

	if (!bulk || !rate[CLASS_INFERENCE])
		return 0;
	rate[CLASS_INFERENCE] = rate[CLASS_INFERENCE] > bulk + 1 ? rate[CLASS_INFERENCE] - bulk : 1;
	return bulk;
}

bool node_downlink_wanted(const struct node_config *cfg, const struct plan_caps *caps, enum node_mode mode,
                          uint64_t *ret_rate_bps)
{
	uint64_t rd = cfg->downlink_rate_bps ? cfg->downlink_rate_bps : cfg->uplink_rate_bps;

	if (ret_rate_bps)
		*ret_rate_bps = rd;
	return mode != MODE_IDLE && cfg->downlink && rd > 0 && plan_caps_has(caps, TC_KIND_HTB) &&
	       plan_caps_has(caps, TC_KIND_HTB_CLASS) && plan_caps_has(caps, TC_KIND_CLSACT) &&
	       plan_caps_has(caps, TC_KIND_U32);
}

uint32_t node_down_rcv_bound(const struct node_plan_info *info, enum workload_class c)
{
	uint64_t w = info->down.planned ? info->down.rcv_window_bytes : 0;

	if (!w)
		return 0;
	if (c == CLASS_TRAINING)
		return (uint32_t)w;
	if (c == CLASS_INFERENCE && info->down.bulk_priority)
		return (uint32_t)clamp_u64(w * NODE_DOWN_INF_RCV_FACTOR, 0, NODE_DOWN_RCV_WINDOW_MAX);
	return 0;
}

uint32_t node_down_rcv_window(uint64_t shaped_bps, uint32_t rtt_us, uint32_t configured)
{
	uint64_t w;

	if (configured == NODE_DOWN_RCV_WINDOW_OFF || shaped_bps == 0)
		return 0;
	if (configured != NODE_DOWN_RCV_WINDOW_AUTO)
		return configured;
	/* bytes in flight per socket: a BDP at the path's base RTT plus the queue budget */
	w = shaped_bps / 8 * rtt_us / 1000000 + NODE_DOWN_QUEUE_BUDGET_BYTES;
	return (uint32_t)clamp_u64(w, NODE_DOWN_RCV_WINDOW_MIN, NODE_DOWN_RCV_WINDOW_MAX);
}

/* On a clsact hook of the uplink (hook: its item; which: ingress or
 * egress): the gate program gate (NULL = none) and the match-all redirect
 * to the ifb (<pfx>.gate, <pfx>.redirect; bpf_gate.h). */
static int gate_redirect_add(struct builder *b, const char *hook, uint16_t which, const char *gate, const char *ifb,
                             int ifb_ifindex)
{
	uint32_t parent = TC_H_MAKE(TC_H_CLSACT, which);
	bool egress = which == TC_H_MIN_EGRESS;
	char id[PLAN_ID_MAX];
	struct plan_item *it;
	struct tc_spec *s;

	if (gate) {
		snprintf(id, sizeof(id), "%s.gate", b->pfx);
		it = item_add(b, id, hook);
		if (!it)
			return -ENOMEM;
		s = plan_alt_first(it, TC_FILTER, TC_KIND_BPF, parent, 1);
		s->prio = egress ? NODE_FILTER_PRIO_UP_GATE : NODE_FILTER_PRIO_GATE;
		s->protocol = ETH_P_ALL;
		str_copy(s->u.bpf.name, sizeof(s->u.bpf.name), gate);
		s->u.bpf.flags = TCA_BPF_FLAG_ACT_DIRECT;
		s->u.bpf.prog_fd = -1;
	}
	snprintf(id, sizeof(id), "%s.redirect", b->pfx);
	it = item_add(b, id, hook);
	if (!it)
		return -ENOMEM;
	s = plan_alt_first(it, TC_FILTER, TC_KIND_U32, parent, NODE_REDIRECT_HANDLE);
	s->prio = egress ? NODE_FILTER_PRIO_UP_REDIRECT : NODE_FILTER_PRIO_REDIRECT;
	s->protocol = ETH_P_ALL;
	s->u.u32.match = U32_MATCH_ALL;
	s->u.u32.dscp = -1;
	s->u.u32.redirect_ifindex = ifb_ifindex;
	str_copy(s->u.u32.redirect_dev, sizeof(s->u.u32.redirect_dev), ifb);
	return 0;
}

/* GATED HTB (node.h): the classifier, the upload gate and the redirect on
 * the uplink's egress hook; the HTB tree on the ifb. */
static int tree_htb_ifb(struct builder *b, const struct uplink_facts *up, const struct node_plan_info *info)
{
	int r = node_classifier_add(b);

	if (r >= 0)
		r = gate_redirect_add(b, "uplink.clsact", TC_H_MIN_EGRESS, BPF_GATE_UP_NAME, PLAN_IFB_UP_NAME,
		                      up->ifb_up_ifindex);
	if (r < 0)
		return r;
	builder_tree(b, DEV_IFB_UP, PFX_SHAPER, U32_MATCH_SRC);
	r = tree_htb(b, info->shaped_bps, info->class_rate_bps, info->ce_threshold_us, info->bulk_rate_bps,
	             info->bulk_weight);
	builder_tree(b, DEV_UPLINK, PFX_UPLINK, U32_MATCH_SRC);
	return r;
}

/* The download direction (node.h "DOWNLOAD"): the ingress hook and redirect
 * on the uplink, then the same HTB tree on the ifb, filters on destination. */
static int downlink_build(struct builder *b, const struct node_pod *const *sorted, unsigned n,
                          const struct node_config *cfg, const struct uplink_facts *up, const struct plan *prev,
                          struct node_plan_info *info)
{
	struct node_down_info *d = &info->down;
	uint32_t classid[_CLASS_MAX] = {0};
	struct plan_item *it;
	const char *hook;
	int r;

	d->shaped_bps = shaped_rate(d->rate_bps, NODE_DOWN_SHAPE_PERCENT);
	d->rcv_window_bytes = node_down_rcv_window(d->shaped_bps, cfg->down_rtt_us, cfg->training_rcv_window);
	htb_class_rates(d->shaped_bps, &info->shares, d->class_rate_bps, d->class_ceil_bps, classid);
	/* BANDS: with the classifier, which alone knows flows */
	if (info->mode == MODE_MIXED && cfg->bulk_threshold_bytes && plan_caps_has(b->caps, TC_KIND_BPF)) {
		d->bulk_rate_bps = band_rates(d->class_rate_bps);
		d->bulk_priority = d->bulk_rate_bps ? TC_H_MAKE(H_ROOT, MINOR_BULK) : 0;
	}

	builder_tree(b, DEV_UPLINK, PFX_DOWN, U32_MATCH_DST);
	/* one clsact on the uplink: the mq layout's classifier may have planned it */
	hook = plan_find_const(b->p, "uplink.clsact") ? "uplink.clsact" : "down.hook";
	if (streq(hook, "down.hook")) {
		it = item_add(b, "down.hook", NULL);
		if (!it)
			return -ENOMEM;
		plan_alt_first(it, TC_QDISC, TC_KIND_CLSACT, TC_H_CLSACT, TC_H_MAKE(TC_H_CLSACT, 0));
	}
	/* the classifier in front of the gate (dcls.bpf.c): the class named
	 * before the ifb's lock, inside an overlay's encapsulation too */
	if (plan_caps_has(b->caps, TC_KIND_BPF)) {
		struct tc_spec *s;

		it = item_add(b, "down.classifier", hook);
		if (!it)
			return -ENOMEM;
		s = plan_alt_first(it, TC_FILTER, TC_KIND_BPF, TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS), 1);
		s->prio = NODE_FILTER_PRIO_DOWN_CLS;
		s->protocol = ETH_P_ALL;
		str_copy(s->u.bpf.name, sizeof(s->u.bpf.name), BPF_DCLS_NAME);
		s->u.bpf.flags = TCA_BPF_FLAG_ACT_DIRECT;
		s->u.bpf.prog_fd = -1;
		d->classifier = true;
		htb_cls_priority(d->class_rate_bps, d->cls_priority);
	}
	/* the gate in front of the redirect (bpf_gate.h) */
	d->gate_bps = plan_caps_has(b->caps, TC_KIND_BPF) ? d->shaped_bps / 100 * NODE_GATE_PERCENT : 0;
	d->gate_hold_ns = d->gate_bps ? gate_hold_ns(d->shaped_bps, d->class_rate_bps, true) : 0;
	r = gate_redirect_add(b, hook, TC_H_MIN_INGRESS, d->gate_bps ? BPF_GATE_NAME : NULL, PLAN_IFB_NAME,
	                      up->ifb_ifindex);
	if (r < 0)
		return r;

	builder_tree(b, DEV_IFB, PFX_DOWN, U32_MATCH_DST);
	r = tree_htb(b, d->shaped_bps, d->class_rate_bps, info->ce_threshold_us, d->bulk_rate_bps, info->bulk_weight);
	if (r < 0)
		return r;
	/* by destination pod address whatever `classify` says: DS marks that
	 * arrive were set by senders beyond the node, which trust.c cannot vet */
	d->n_filters = filters_count_sorted(sorted, n, classid);
	return filters_src(b, sorted, n, classid, d->n_filters, prev);
}

void node_gate_config(const struct node_plan_info *info, struct bpf_gate *ret)
{
	uint64_t bps, win_ns;

	memset(ret, 0, sizeof(*ret));
	if (!info || !info->down.planned || !info->down.gate_bps)
		return;
	bps = info->down.gate_bps;
	/* the window: at least 1 ms, and long enough for 4 x 64 KiB at the threshold */
	win_ns = (uint64_t)NODE_GATE_WINDOW_BYTES * 8 * 1000000000ull / bps;
	if (win_ns < (uint64_t)NODE_GATE_WINDOW_MIN_US * 1000)
		win_ns = (uint64_t)NODE_GATE_WINDOW_MIN_US * 1000;
	ret->win_ns = win_ns;
	ret->threshold_bytes = bps / 8 * win_ns / 1000000000ull;
	if (!ret->threshold_bytes)
		ret->threshold_bytes = 1;
	ret->hold_ns = info->down.gate_hold_ns ? info->down.gate_hold_ns : (uint64_t)NODE_GATE_HOLD_MS * 1000000;
}

void node_up_gate_config(const struct node_plan_info *info, int ifb_ifindex, struct bpf_gate *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (!info || info->shape != SHAPE_HTB_IFB || !info->up_gate_bps)
		return;
	/* The node sends at memory speed: what passes the gate reaches the
	 * link unpaced. Two windows' worth, back to back, is the parent
	 * class's cburst: no burst HTB itself would not let out at once. */
	ret->threshold_bytes = plan_htb_burst_bytes(info->shaped_bps, NODE_FIFO_MIN_BYTES) / 2;
	ret->win_ns = ret->threshold_bytes * 8 * 1000000000ull / info->up_gate_bps;
	ret->hold_ns = info->up_gate_hold_ns ? info->up_gate_hold_ns : (uint64_t)NODE_GATE_HOLD_MS * 1000000;
	if (ifb_ifindex > 0)
		ret->pass_ifindex = (uint64_t)ifb_ifindex;
}

static enum workload_class mode_class(enum node_mode m)
{
	return m == MODE_TRAINING ? CLASS_TRAINING : CLASS_INFERENCE; /* mixed falls back to inference-style */
}

int node_plan(const struct node_pod *pods, unsigned n, const struct node_config *cfg, const struct uplink_facts *up,
              const struct plan_caps *caps, enum node_mode mode, const struct plan *prev, struct plan *ret,
              struct node_plan_info *ret_info, struct error *err)
{
	_cleanup_free_ const struct node_pod **sorted = NULL;
	struct plan np = {0};
	struct node_plan_info info = {0};
	uint32_t classid[_CLASS_MAX] = {0};
	const char *ifname;
	unsigned n_filters = 0, cap;
	bool has_htb;
	int r;

	if (!ret)
		return error_set(err, EINVAL, "node plan: no output");
	if (!pods && n > 0)
		return error_set(err, EINVAL, "node plan: %u pods but no pod array", n);
	if (!up)
		return error_set(err, EINVAL, "node plan: no uplink facts");
	if (!node_mode_name(mode))
		return error_set(err, EINVAL, "node plan: invalid mode %d", (int)mode);
	r = node_config_check(cfg, err);
	if (r < 0)
		return r;
	r = pods_check(pods, n, err);
	if (r < 0)
		return r;
	r = pods_sort(pods, n, &sorted, err);
	if (r < 0)
		return r;
	ifname = up->ifname[0] && memchr(up->ifname, '\0', sizeof(up->ifname)) ? up->ifname : "uplink";

	info.mode = mode;
	node_pods_count(pods, n, &info.counts);
	node_shares_compute(&info.counts, cfg->training_floor, cfg->inference_share, mode, &info.shares);
	info.rate_configured = cfg->uplink_rate_bps > 0;
	info.rate_bps = info.rate_configured ? cfg->uplink_rate_bps : up->speed_bps;
	info.ce_threshold_us = info.counts.n_dctcp_training > 0 ? NODE_CE_THRESHOLD_US : 0;
	has_htb = plan_caps_has(caps, TC_KIND_HTB) && plan_caps_has(caps, TC_KIND_HTB_CLASS);

	/* A virtual link's reported speed is fiction: never a rate (node.h). */
	if (!info.rate_configured && up->is_virtual && info.rate_bps > 0) {
		info.rate_bps = 0;
		info.speed_untrusted = true;
	}

	/* The structure (see node.h) */
	if (mode == MODE_IDLE)
		info.shape = SHAPE_NONE;
	else if (info.rate_configured && node_edt_usable(up, caps))
		info.shape = SHAPE_EDT;
	else if (node_htb_ifb_wanted(cfg, up, caps, mode))
		info.shape = SHAPE_HTB_IFB;
	else if (info.rate_configured && has_htb)
		info.shape = SHAPE_HTB;
	else if (up->no_queue)
		info.shape = SHAPE_NONE; /* nothing queues there to order (node.h) */
	else if (node_mq_usable(mode, up, caps))
		info.shape = SHAPE_MQ;
	else if (mode != MODE_MIXED)
		info.shape = SHAPE_ROOT_AQM;
	else if (plan_caps_has(caps, TC_KIND_PRIO))
		info.shape = SHAPE_PRIO;
	else if (info.rate_bps > 0 && has_htb)
		info.shape = SHAPE_HTB;
	else
		info.shape = SHAPE_ROOT_AQM;

	if (info.shape != SHAPE_HTB_IFB && up->egress_foreign_after) {
		struct uplink_facts f = *up;

		f.egress_foreign_after = false;
		if (node_htb_ifb_wanted(cfg, &f, caps, mode))
			info_warn(&info,
			          "%s: another tool's program at the egress hook (a tcx program, or a clsact filter "
			          "after pref %d): the gated upload tree's gate and redirect would end the hook before "
			          "it or never run, so HTB shapes at the root instead",
			          ifname, NODE_FILTER_PRIO_UP_REDIRECT);
	}
	/* nothing the kernel has for a classless root: the original stays */
	if (info.shape == SHAPE_ROOT_AQM && !plan_caps_has(caps, TC_KIND_FQ_CODEL) &&
	    (mode_class(mode) != CLASS_TRAINING || !plan_caps_has(caps, TC_KIND_FQ))) {
		info.shape = SHAPE_NONE;
		info_warn(&info, "no queue for %s mode on %s is available in this kernel: the original qdisc stays",
		          node_mode_name(mode), ifname);
	}

	if (mode != MODE_IDLE) {
		if (up->no_queue && !info.rate_configured)
			info_warn(&info,
			          "uplink %s holds no queue (noqueue: a veth, bond or VLAN hands packets straight on): "
			          "left as it is; to prioritise and shape here, set uplinkRate in the agent config to "
			          "the rate of the link behind it, e.g. \"uplinkRate\": \"9500mbit\"",
			          ifname);
		else if (up->is_virtual && !info.rate_configured)
			info_warn(&info,
			          "uplink %s is virtual: its reported speed is not the bottleneck, so it is not "
			          "shaped; to shape below a slower link behind it, set uplinkRate in the agent "
			          "config, e.g. \"uplinkRate\": \"9500mbit\"",
			          ifname);
		if (!has_htb && info.rate_configured && info.shape != SHAPE_EDT)
			info_warn(&info, "htb is unavailable: uplink %s is not shaped", ifname);
		if (mode == MODE_MIXED && info.shape == SHAPE_ROOT_AQM)
			info_warn(&info,
			          "mixed mode on %s without prio and without a known rate: root fq_codel flow "
			          "isolation instead of class priorities",
			          ifname);
	}

	if (info.shape == SHAPE_EDT) {
		/* HTB's shares, for inference's ceiling (node_edt_config); the
		 * classifier's priorities as in the mq layout (fq bands) */
		info.shaped_bps = shaped_rate(info.rate_bps, NODE_SHAPE_PERCENT);
		htb_class_rates(info.shaped_bps, &info.shares, info.class_rate_bps, info.class_ceil_bps, classid);
		memset(classid, 0, sizeof(classid));
		info.n_queues = up->tx_queues > NODE_MQ_QUEUES_MAX ? NODE_MQ_QUEUES_MAX : up->tx_queues;
		info.classifier = true;
		info.cls_priority[CLASS_INFERENCE] = NODE_CLS_PRIO_INFERENCE;
		info.cls_priority[CLASS_DEFAULT] = NODE_CLS_PRIO_DEFAULT;
		info.cls_priority[CLASS_TRAINING] = NODE_CLS_PRIO_TRAINING;
	} else if (info.shape == SHAPE_HTB || info.shape == SHAPE_HTB_IFB) {
		info.shaped_bps = shaped_rate(info.rate_bps, NODE_SHAPE_PERCENT);
		htb_class_rates(info.shaped_bps, &info.shares, info.class_rate_bps, info.class_ceil_bps, classid);
		/* the class picked before HTB's lock (node.h, "CLASSIFIER"): skb->priority = its classid */
		info.classifier =
		        plan_caps_has(caps, TC_KIND_CLSACT) && plan_caps_has(caps, TC_KIND_BPF) && !up->ingress_held;
		if (info.shape == SHAPE_HTB_IFB) {
			/* the classifier names every packet's class: no filters (node.h, GATED HTB) */
			memset(classid, 0, sizeof(classid));
			info.up_gate_bps = info.shaped_bps / 100 * NODE_GATE_PERCENT;
			info.up_gate_hold_ns = gate_hold_ns(info.shaped_bps, info.class_rate_bps, false);
		}
		htb_cls_priority(info.class_rate_bps, info.cls_priority);
	} else if (info.shape == SHAPE_MQ) {
		info.n_queues = up->tx_queues > NODE_MQ_QUEUES_MAX ? NODE_MQ_QUEUES_MAX : up->tx_queues;
		info.classifier = mode == MODE_MIXED;
		info.cls_priority[CLASS_INFERENCE] = NODE_CLS_PRIO_INFERENCE;
		info.cls_priority[CLASS_DEFAULT] = NODE_CLS_PRIO_DEFAULT;
		info.cls_priority[CLASS_TRAINING] = NODE_CLS_PRIO_TRAINING;
	} else if (info.shape == SHAPE_PRIO) {
		classid[CLASS_INFERENCE] = TC_H_MAKE(H_ROOT, prio_minor(CLASS_INFERENCE));
		classid[CLASS_TRAINING] = TC_H_MAKE(H_ROOT, prio_minor(CLASS_TRAINING));
	}
	/* classid[CLASS_DEFAULT] stays 0: default traffic is unclassified */

	/* BANDS (node.h): where a classifier names the class */
	info.bulk_weight = cfg->bulk_weight;
	if (mode == MODE_MIXED && cfg->bulk_threshold_bytes && info.classifier) {
		if (info.shape == SHAPE_HTB || info.shape == SHAPE_HTB_IFB) {
			info.bulk_rate_bps = band_rates(info.class_rate_bps);
			info.bulk_priority = info.bulk_rate_bps ? TC_H_MAKE(H_ROOT, MINOR_BULK) : 0;
		} else if (info.shape == SHAPE_EDT || info.shape == SHAPE_MQ) {
			info.bulk_priority = NODE_CLS_PRIO_TRAINING;
		}
	}

	if (cfg->classify == CLASSIFY_SRC_IP) {
		n_filters = filters_count(pods, n, classid);
		if (n_filters > NODE_FILTERS_MAX)
			return error_set(err, E2BIG, "uplink %s: %u pod addresses to classify, at most %u", ifname,
			                 n_filters, NODE_FILTERS_MAX);
	} else {
		for (int c = 0; c < _CLASS_MAX; c++)
			if (classid[c])
				n_filters += 2;
	}

	/* download: planned when wanted, its rate known, the ingress hook free */
	if (node_downlink_wanted(cfg, caps, mode, &info.down.rate_bps)) {
		if (up->ingress_foreign)
			info_warn(&info,
			          "download direction not shaped: uplink %s has an ingress qdisc aiqos did not create "
			          "(left alone; remove it, or set \"downlink\": false)",
			          ifname);
		else
			info.down.planned = true;
	} else if (mode != MODE_IDLE && cfg->downlink && info.down.rate_bps == 0) {
		if (up->speed_bps) {
			char sp[32];

			tc_rate_format(up->speed_bps, sp, sizeof(sp));
			info_warn(&info,
			          "download direction not shaped: the downlink rate is unknown (%s reports %s%s); set "
			          "\"downlinkRate\" to the rate of the link toward this node, e.g. \"downlinkRate\": "
			          "\"%s\" (or \"downlink\": false)",
			          ifname, sp, up->is_virtual ? ", fiction on a virtual link" : "", sp);
		} else {
			info_warn(
			        &info,
			        "download direction not shaped: the downlink rate is unknown; set \"downlinkRate\" to "
			        "the rate of the link toward this node, e.g. \"downlinkRate\": \"10gbit\" (or "
			        "\"downlink\": false)");
		}
	}

	cap = TREE_ITEMS_MAX + n_filters + (info.down.planned ? TREE_ITEMS_MAX + 3 + filters_count(pods, n, NULL) : 0) +
	      (info.shape == SHAPE_MQ        ? node_mq_items(mode, up, caps)
	       : info.shape == SHAPE_EDT     ? node_edt_items(up)
	       : info.shape == SHAPE_HTB_IFB ? TREE_ITEMS_MAX + 4
	       : info.classifier             ? 2
	                                     : 0);
	if (plan_reserve(&np, cap) < 0)
		return error_set(err, ENOMEM, "uplink %s: out of memory for %u plan items", ifname, cap);

	struct builder b = {
	        .p = &np,
	        .caps = caps,
	        .frame = (up->mtu ? up->mtu : MTU_DEFAULT) + ETH_HLEN_BYTES,
	};
	builder_tree(&b, DEV_UPLINK, PFX_UPLINK, U32_MATCH_SRC);
	switch (info.shape) {
	case SHAPE_HTB:
		r = tree_htb(&b, info.shaped_bps, info.class_rate_bps, info.ce_threshold_us, info.bulk_rate_bps,
		             info.bulk_weight);
		break;
	case SHAPE_PRIO:
		r = tree_prio(&b, info.rate_bps ? info.rate_bps : NODE_NOMINAL_RATE_BPS, info.ce_threshold_us);
		break;
	case SHAPE_ROOT_AQM:
		r = tree_root_aqm(&b, mode_class(mode), info.ce_threshold_us);
		break;
	case SHAPE_MQ:
		r = node_tree_mq(&b, mode, up, info.ce_threshold_us,
		                 info.rate_bps ? info.rate_bps : NODE_NOMINAL_RATE_BPS);
		break;
	case SHAPE_EDT:
		r = node_tree_edt(&b, up, info.ce_threshold_us);
		break;
	case SHAPE_HTB_IFB:
		r = tree_htb_ifb(&b, up, &info);
		break;
	default:
		r = 0;
		break;
	}
	if (r >= 0 && n_filters > 0) {
		if (cfg->classify == CLASSIFY_SRC_IP)
			r = filters_src(&b, sorted, n, classid, n_filters, prev);
		else
			r = filters_dscp(&b, cfg, classid);
	}
	/* HTB's classifier: after its fallback, the u32 filters HTB consults for
	 * what it left unclassified (no program) */
	if (r >= 0 && info.shape == SHAPE_HTB && info.classifier)
		r = node_classifier_add(&b);
	if (r >= 0 && info.down.planned)
		r = downlink_build(&b, sorted, n, cfg, up, prev, &info);
	if (r < 0) {
		plan_free(&np);
		return error_set(err, -r, "uplink %s: building the %s plan failed", ifname, node_mode_name(mode));
	}
	info.n_filters = n_filters;
	if (info.bulk_priority || info.down.bulk_priority) {
		info.bulk_threshold_bytes = cfg->bulk_threshold_bytes;
		info.bulk_idle_ms = cfg->bulk_idle_ms;
	}
	/* link-layer overhead on every shaped class */
	for (unsigned i = 0; i < np.n; i++)
		for (unsigned a = 0; a < np.items[i].n_alt; a++)
			if (np.items[i].tc[a].kind == TC_KIND_HTB_CLASS)
				np.items[i].tc[a].u.htb_class.overhead_bytes = cfg->overhead_bytes;

	plan_free(ret);
	*ret = np;
	if (ret_info)
		*ret_info = info;
	return 0;
}

/* ---- comparing plans ---- */

/* Plans are built from zeroed memory (calloc/memset, then field stores), so
 * specs compare bytewise, padding included. */
bool node_item_same_desired(const struct plan_item *a, const struct plan_item *b)
{
	if (a->type != b->type || a->dev != b->dev || a->n_alt != b->n_alt || !streq(a->id, b->id) ||
	    !streq(a->depends, b->depends) || a->n_alt > PLAN_ALT_MAX)
		return false;
	if (a->type == ITEM_SYSCTL) {
		if (!streq(a->key, b->key))
			return false;
		for (unsigned i = 0; i < a->n_alt; i++)
			if (!streq(a->val[i], b->val[i]))
				return false;
		return true;
	}
	/* field by field (padding bytes may differ): the same object, and each
	 * side's set fields satisfied by the other */
	for (unsigned i = 0; i < a->n_alt; i++)
		if (a->tc[i].kind != b->tc[i].kind || a->tc[i].handle != b->tc[i].handle ||
		    !tc_spec_match(&a->tc[i], &b->tc[i]) || !tc_spec_match(&b->tc[i], &a->tc[i]))
			return false;
	return true;
}

struct id_ref {
	const char *id;
	unsigned idx;
};

static int id_ref_cmp(const void *a, const void *b)
{
	return strcmp(((const struct id_ref *)a)->id, ((const struct id_ref *)b)->id);
}

static struct id_ref *id_index(const struct plan *p)
{
	struct id_ref *refs = calloc(p && p->n ? p->n : 1, sizeof(*refs));

	if (!refs)
		return NULL;
	for (unsigned i = 0; p && i < p->n; i++)
		refs[i] = (struct id_ref){.id = p->items[i].id, .idx = i};
	if (p && p->n > 1)
		qsort(refs, p->n, sizeof(*refs), id_ref_cmp);
	return refs;
}

void node_plan_delta_free(struct node_plan_delta *d)
{
	if (!d)
		return;
	free(d->removed);
	free(d->added);
	free(d->changed);
	memset(d, 0, sizeof(*d));
}

static int uint_cmp(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
	return x < y ? -1 : x > y;
}

/* Does replacing old by new destroy the object and everything under it?
 * A qdisc replaced by another kind (or handle) is grafted anew: its
 * classes, child qdiscs and filters go with the old one. A class or a
 * qdisc of the same kind changes in place. */
static bool item_recreates(const struct plan_item *o, const struct plan_item *n)
{
	if (o->type != ITEM_TC || n->type != ITEM_TC || o->n_alt == 0 || n->n_alt == 0)
		return false;
	if (o->tc[0].type != n->tc[0].type || o->tc[0].handle != n->tc[0].handle || o->tc[0].parent != n->tc[0].parent)
		return true;
	if (n->tc[0].type != TC_QDISC)
		return false;
	if (o->n_alt != n->n_alt)
		return true;
	for (unsigned i = 0; i < n->n_alt && i < PLAN_ALT_MAX; i++)
		if (o->tc[i].kind != n->tc[i].kind)
			return true;
	return false;
}

int node_plan_delta(const struct plan *old, const struct plan *new_, struct node_plan_delta *ret)
{
	_cleanup_free_ struct id_ref *io = NULL, *in = NULL;
	_cleanup_free_ int *old_of = NULL;    /* per new item: index in old, -1 = added */
	_cleanup_free_ uint8_t *state = NULL; /* per new item: 0 same, 1 changed, 2 recreated */
	unsigned no = old ? old->n : 0, nn = new_ ? new_->n : 0, i = 0, j = 0;
	struct node_plan_delta d = {0};

	memset(ret, 0, sizeof(*ret));
	io = id_index(old);
	in = id_index(new_);
	old_of = calloc(nn ? nn : 1, sizeof(*old_of));
	state = calloc(nn ? nn : 1, sizeof(*state));
	d.removed = calloc(no ? no : 1, sizeof(unsigned));
	d.added = calloc(nn ? nn : 1, sizeof(unsigned));
	d.changed = calloc(nn ? nn : 1, sizeof(unsigned));
	if (!io || !in || !old_of || !state || !d.removed || !d.added || !d.changed) {
		node_plan_delta_free(&d);
		return -ENOMEM;
	}
	for (unsigned k = 0; k < nn; k++)
		old_of[k] = -1;
	while (i < no || j < nn) {
		int c = i >= no ? 1 : j >= nn ? -1 : strcmp(io[i].id, in[j].id);

		if (c < 0) {
			d.removed[d.n_removed++] = io[i++].idx;
		} else if (c > 0) {
			j++;
		} else {
			old_of[in[j].idx] = (int)io[i].idx;
			i++;
			j++;
		}
	}
	/* In plan order (dependencies come first): an item is re-applied when
	 * it differs, and recreated (with everything depending on it) when
	 * its object is replaced or what it depends on is recreated. */
	for (unsigned k = 0; k < nn; k++) {
		const struct plan_item *it = &new_->items[k];
		bool parent_recreated = false;

		if (it->depends[0]) {
			struct id_ref key = {.id = it->depends};
			const struct id_ref *dep = bsearch(&key, in, nn, sizeof(*in), id_ref_cmp);

			parent_recreated = dep && dep->idx < k && (state[dep->idx] == 2 || old_of[dep->idx] < 0);
		}
		if (old_of[k] < 0) {
			d.added[d.n_added++] = k;
			state[k] = 2;
			continue;
		}
		if (parent_recreated || item_recreates(&old->items[old_of[k]], it))
			state[k] = 2;
		else if (!node_item_same_desired(&old->items[old_of[k]], it))
			state[k] = 1;
		if (state[k])
			d.changed[d.n_changed++] = k;
		else
			d.n_same++;
	}
	qsort(d.removed, d.n_removed, sizeof(unsigned), uint_cmp);
	*ret = d;
	return 0;
}

int node_plan_carry_effective(struct plan *new_, const struct plan *old)
{
	struct node_plan_delta d;
	_cleanup_free_ bool *redo = NULL;
	_cleanup_free_ struct id_ref *io = NULL;
	int carried = 0, r;

	if (!new_ || !old || old->n == 0 || new_->n == 0)
		return 0;
	r = node_plan_delta(old, new_, &d);
	if (r < 0)
		return r;
	redo = calloc(new_->n, sizeof(*redo));
	io = id_index(old);
	if (!redo || !io) {
		node_plan_delta_free(&d);
		return -ENOMEM;
	}
	for (unsigned k = 0; k < d.n_added; k++)
		redo[d.added[k]] = true;
	for (unsigned k = 0; k < d.n_changed; k++)
		redo[d.changed[k]] = true;
	node_plan_delta_free(&d);
	for (unsigned k = 0; k < new_->n; k++) {
		struct plan_item *it = &new_->items[k];
		struct id_ref key = {.id = it->id};
		const struct id_ref *ref;
		const struct plan_item *o;

		if (redo[k])
			continue;
		ref = bsearch(&key, io, old->n, sizeof(*io), id_ref_cmp);
		if (!ref)
			continue;
		o = &old->items[ref->idx];
		it->status = o->status;
		it->chosen = o->chosen;
		it->err = o->err;
		it->unknown = o->unknown;
		carried++;
	}
	return carried;
}
