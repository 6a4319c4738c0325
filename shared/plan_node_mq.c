/* plan_node_mq.c — the node planner's multi-queue layout (node.h,
 * "MULTI-QUEUE"): mq kept at the root with one child per tx queue, and in
 * mixed mode the clsact BPF classifier that sets skb->priority before the
 * queue is picked; plus the classifier's map content. Pure. */
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <sys/socket.h>

#include "plan_node_int.h"

#define H_ROOT         0x10000u /* 1: */
#define H_CLSACT       0xffff0000u
#define MQ_CHILD_MAJOR 0x100u  /* queue i: <0x100 + i>: */
#define MQ_LEAF_MAJOR  0x1000u /* queue i band b: <0x1000 + 4i + b>: */
#define MQ_BANDS       3u

static const uint8_t pfifo_fast_priomap[TC_PRIO_MAX + 1] = {1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};

/* band (0-based) of each class under the priomap above */
static const struct {
	enum workload_class c;
	const char *tag;
} bands[MQ_BANDS] = {
        {CLASS_INFERENCE, "inference"},
        {CLASS_DEFAULT, "default"},
        {CLASS_TRAINING, "training"},
};

static unsigned queues_of(const struct uplink_facts *up)
{
	unsigned q = up->tx_queues;

	return q > NODE_MQ_QUEUES_MAX ? NODE_MQ_QUEUES_MAX : q;
}

bool node_mq_usable(enum node_mode mode, const struct uplink_facts *up, const struct plan_caps *caps)
{
	if (queues_of(up) < 2 || !plan_caps_has(caps, TC_KIND_MQ))
		return false;
	switch (mode) {
	case MODE_TRAINING:
		return plan_caps_has(caps, TC_KIND_FQ) || plan_caps_has(caps, TC_KIND_FQ_CODEL);
	case MODE_INFERENCE:
		return plan_caps_has(caps, TC_KIND_FQ_CODEL);
	case MODE_MIXED:
		return (plan_caps_has(caps, TC_KIND_PRIO) || plan_caps_has(caps, TC_KIND_PFIFO_FAST)) &&
		       plan_caps_has(caps, TC_KIND_CLSACT) && plan_caps_has(caps, TC_KIND_BPF) && !up->ingress_held;
	default:
		return false;
	}
}

/* mixed: per-queue prio with leaves while prio is not known to be missing */
static bool mq_prio_leaves(enum node_mode mode, const struct plan_caps *caps)
{
	return mode == MODE_MIXED && plan_caps_has(caps, TC_KIND_PRIO);
}

unsigned node_mq_items(enum node_mode mode, const struct uplink_facts *up, const struct plan_caps *caps)
{
	unsigned per_queue = 1 + (mq_prio_leaves(mode, caps) ? MQ_BANDS : 0);

	return 1 + queues_of(up) * per_queue + (mode == MODE_MIXED ? 2 : 0);
}

static int child_add(struct builder *b, enum node_mode mode, unsigned q, uint32_t ce_us)
{
	uint32_t parent = TC_H_MAKE(H_ROOT, q + 1), handle = (MQ_CHILD_MAJOR + q) << 16;
	char id[PLAN_ID_MAX];
	struct plan_item *it;
	struct tc_spec *s;

	snprintf(id, sizeof(id), "uplink.q.%u", q);
	it = item_add(b, id, "uplink.root");
	if (!it)
		return -ENOMEM;
	it->tc[0].type = TC_QDISC;
	it->tc[0].parent = parent;
	it->tc[0].handle = handle;
	switch (mode) {
	case MODE_TRAINING:
		alts_queue(it, CLASS_TRAINING, ce_us, 0, false);
		break;
	case MODE_INFERENCE:
		alts_queue(it, CLASS_INFERENCE, ce_us, 0, false);
		break;
	default:
		if (plan_caps_has(b->caps, TC_KIND_PRIO) && (s = plan_alt_add(it, TC_KIND_PRIO))) {
			s->u.prio.bands = MQ_BANDS;
			memcpy(s->u.prio.priomap, pfifo_fast_priomap, sizeof(s->u.prio.priomap));
		}
		plan_alt_add(it, TC_KIND_PFIFO_FAST);
		break;
	}
	return 0;
}

static int leaves_add(struct builder *b, unsigned q, uint32_t ce_us, uint64_t fifo_rate_bps)
{
	char dep[PLAN_ID_MAX];

	snprintf(dep, sizeof(dep), "uplink.q.%u", q);
	for (unsigned band = 0; band < MQ_BANDS; band++) {
		char id[PLAN_ID_MAX];
		struct plan_item *it;

		snprintf(id, sizeof(id), "uplink.q.%u.%s", q, bands[band].tag);
		it = item_add(b, id, dep);
		if (!it)
			return -ENOMEM;
		it->tc[0].type = TC_QDISC;
		it->tc[0].parent = TC_H_MAKE((MQ_CHILD_MAJOR + q) << 16, band + 1);
		it->tc[0].handle = (MQ_LEAF_MAJOR + 4 * q + band + 1) << 16;
		alts_queue(it, bands[band].c, ce_us, fifo_rate_bps, false);
	}
	return 0;
}

int node_classifier_add(struct builder *b)
{
	struct plan_item *it;
	struct tc_spec *s;

	it = item_add(b, "uplink.clsact", NULL);
	if (!it)
		return -ENOMEM;
	plan_alt_first(it, TC_QDISC, TC_KIND_CLSACT, TC_H_CLSACT, H_CLSACT);
	it = item_add(b, "uplink.classifier", "uplink.clsact");
	if (!it)
		return -ENOMEM;
	s = plan_alt_first(it, TC_FILTER, TC_KIND_BPF, TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS), NODE_CLS_HANDLE);
	s->prio = NODE_FILTER_PRIO_CLS;
	s->protocol = ETH_P_ALL;
	str_copy(s->u.bpf.name, sizeof(s->u.bpf.name), BPF_CLS_NAME);
	s->u.bpf.flags = TCA_BPF_FLAG_ACT_DIRECT;
	s->u.bpf.prog_fd = -1;
	return 0;
}

int node_tree_mq(struct builder *b, enum node_mode mode, const struct uplink_facts *up, uint32_t ce_us,
                 uint64_t fifo_rate_bps)
{
	unsigned queues = queues_of(up);
	bool leaves = mq_prio_leaves(mode, b->caps);
	struct plan_item *it;
	int r;

	it = item_add(b, "uplink.root", NULL);
	if (!it)
		return -ENOMEM;
	plan_alt_first(it, TC_QDISC, TC_KIND_MQ, TC_H_ROOT, H_ROOT);
	for (unsigned q = 0; q < queues; q++) {
		r = child_add(b, mode, q, ce_us);
		if (r < 0)
			return r;
	}
	for (unsigned q = 0; leaves && q < queues; q++) {
		r = leaves_add(b, q, ce_us, fifo_rate_bps);
		if (r < 0)
			return r;
	}
	if (mode == MODE_MIXED)
		return node_classifier_add(b);
	return 0;
}

bool node_edt_usable(const struct uplink_facts *up, const struct plan_caps *caps)
{
	return queues_of(up) >= 2 && plan_caps_has(caps, TC_KIND_MQ) && plan_caps_has(caps, TC_KIND_FQ) &&
	       plan_caps_has(caps, TC_KIND_CLSACT) && plan_caps_has(caps, TC_KIND_BPF) && !up->ingress_held;
}

bool node_htb_ifb_wanted(const struct node_config *cfg, const struct uplink_facts *up, const struct plan_caps *caps,
                         enum node_mode mode)
{
	return mode != MODE_IDLE && cfg->uplink_rate_bps > 0 && queues_of(up) >= 2 && !node_edt_usable(up, caps) &&
	       plan_caps_has(caps, TC_KIND_HTB) && plan_caps_has(caps, TC_KIND_HTB_CLASS) &&
	       plan_caps_has(caps, TC_KIND_CLSACT) && plan_caps_has(caps, TC_KIND_BPF) &&
	       plan_caps_has(caps, TC_KIND_U32) && !up->ingress_held && !up->ifb_up_failed && !up->egress_foreign_after;
}

unsigned node_edt_items(const struct uplink_facts *up)
{
	return 1 + queues_of(up) + 2;
}

/* fq only: without it the stamps mean nothing (a refusal is learnt, and the
 * next plan is HTB) */
int node_tree_edt(struct builder *b, const struct uplink_facts *up, uint32_t ce_us)
{
	struct plan_item *it;

	it = item_add(b, "uplink.root", NULL);
	if (!it)
		return -ENOMEM;
	plan_alt_first(it, TC_QDISC, TC_KIND_MQ, TC_H_ROOT, H_ROOT);
	for (unsigned q = 0; q < queues_of(up); q++) {
		char id[PLAN_ID_MAX];
		struct tc_spec *s;

		snprintf(id, sizeof(id), "uplink.q.%u", q);
		it = item_add(b, id, "uplink.root");
		if (!it)
			return -ENOMEM;
		s = plan_alt_first(it, TC_QDISC, TC_KIND_FQ, TC_H_MAKE(H_ROOT, q + 1), (MQ_CHILD_MAJOR + q) << 16);
		s->u.fq.ce_threshold_us = ce_us;
	}
	return node_classifier_add(b);
}

void node_edt_config(const struct node_config *cfg, const struct node_plan_info *info, struct bpf_edt *ret)
{
	uint64_t inf;

	memset(ret, 0, sizeof(*ret));
	if (!info || info->shape != SHAPE_EDT || !info->shaped_bps)
		return;
	inf = info->class_rate_bps[CLASS_INFERENCE];
	ret->link_q20 = bpf_edt_q20(info->shaped_bps);
	ret->inf_q20 = bpf_edt_q20(inf && inf < info->shaped_bps ? inf : info->shaped_bps);
	ret->horizon_ns = (uint64_t)NODE_EDT_HORIZON_US * 1000;
	ret->overhead = cfg->overhead_bytes;
	ret->inf_priority = info->cls_priority[CLASS_INFERENCE];
}

/* The entries of a map of pods: the default class's (when it has a
 * priority), each non-default pod address's, and with by_dscp the marks'
 * of inference and training (aiqos's own marks, on the way out only).
 * bulk (BANDS, 0 = none): inference's band, its thresholds, and the
 * addresses of pods annotated bulk in it. */
static int cls_entries(const struct node_pod *pods, unsigned n, const uint32_t prio[_CLASS_MAX],
                       const struct node_config *cfg, bool by_dscp, uint32_t bulk, const struct node_plan_info *info,
                       struct bpf_cls_entry **ret, unsigned *ret_n)
{
	struct bpf_cls_entry *v;
	unsigned k = 0, cap = 1 + 3;

	if (!by_dscp)
		for (unsigned i = 0; i < n; i++)
			cap += pods[i].class != CLASS_DEFAULT ? pods[i].n_ips : 0;
	else
		cap += 2;
	if (cap > BPF_CLS_MAP_MAX)
		return -E2BIG;
	v = calloc(cap, sizeof(*v));
	if (!v)
		return -ENOMEM;
	v[k++] = (struct bpf_cls_entry){.key = {.kind = BPF_CLS_KEY_DEFAULT}, .priority = prio[CLASS_DEFAULT]};
	if (!by_dscp) {
		for (unsigned i = 0; i < n; i++) {
			const struct node_pod *p = &pods[i];

			if (p->class == CLASS_DEFAULT)
				continue;
			for (unsigned a = 0; a < p->n_ips && a < NODE_POD_IPS_MAX; a++) {
				struct bpf_cls_entry *e = &v[k++];

				e->key.kind = p->ips[a].family == AF_INET6 ? BPF_CLS_KEY_SRC6 : BPF_CLS_KEY_SRC4;
				memcpy(e->key.addr, p->ips[a].addr, p->ips[a].family == AF_INET6 ? 16 : 4);
				e->priority = bulk && p->bulk && p->class == CLASS_INFERENCE ? bulk : prio[p->class];
			}
		}
	} else {
		v[k].key.kind = BPF_CLS_KEY_DSCP;
		v[k].key.addr[0] = (uint8_t)cfg->dscp_inference;
		v[k++].priority = prio[CLASS_INFERENCE];
		v[k].key.kind = BPF_CLS_KEY_DSCP;
		v[k].key.addr[0] = (uint8_t)cfg->dscp_training;
		v[k++].priority = prio[CLASS_TRAINING];
	}
	if (bulk) {
		uint32_t inf = prio[CLASS_INFERENCE];

		v[k].key.kind = BPF_CLS_KEY_BAND;
		memcpy(v[k].key.addr, &inf, sizeof(inf));
		v[k++].priority = bulk;
		v[k].key.kind = BPF_CLS_KEY_BAND_CFG;
		v[k].key.addr[0] = BPF_BAND_CFG_BYTES;
		v[k++].priority = info->bulk_threshold_bytes;
		v[k].key.kind = BPF_CLS_KEY_BAND_CFG;
		v[k].key.addr[0] = BPF_BAND_CFG_IDLE_US;
		v[k++].priority = info->bulk_idle_ms * 1000;
	}
	*ret = v;
	*ret_n = k;
	return 0;
}

int node_cls_entries(const struct node_pod *pods, unsigned n, const struct node_config *cfg,
                     const struct node_plan_info *info, struct bpf_cls_entry **ret, unsigned *ret_n)
{
	*ret = NULL;
	*ret_n = 0;
	if (!info || !info->classifier)
		return 0;
	return cls_entries(pods, n, info->cls_priority, cfg, cfg->classify != CLASSIFY_SRC_IP, info->bulk_priority,
	                   info, ret, ret_n);
}

int node_down_cls_entries(const struct node_pod *pods, unsigned n, const struct node_plan_info *info,
                          struct bpf_cls_entry **ret, unsigned *ret_n)
{
	*ret = NULL;
	*ret_n = 0;
	if (!info || !info->down.planned || !info->down.classifier)
		return 0;
	return cls_entries(pods, n, info->down.cls_priority, NULL, false, info->down.bulk_priority, info, ret, ret_n);
}
