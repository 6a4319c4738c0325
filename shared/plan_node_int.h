/* plan_node_int.h — private to the node planner's files (plan_node.c: mode,
 * shares, the HTB / prio / root-AQM trees and the u32 filters;
 * plan_node_mq.c: the multi-queue layout and its classifier): the building
 * context and the item helpers. Not part of the library API. */
#ifndef AIQOS_PLAN_NODE_INT_H
#define AIQOS_PLAN_NODE_INT_H

#include "node.h"

/* Building context: one tree (the uplink's, or the download tree on the
 * ifb) with its device, id prefix and the address its filters match. */
struct builder {
	struct plan *p;
	const struct plan_caps *caps;
	uint32_t frame; /* MTU + Ethernet header */
	enum plan_dev dev;
	const char *pfx;           /* "uplink" | "down" */
	enum u32_match addr_match; /* pod address filters: SRC (egress) | DST (download) */
	char id_root[PLAN_ID_MAX], id_parent[PLAN_ID_MAX];
};

/* A new tc item on the builder's device (NULL when out of memory). */
struct plan_item *item_add(struct builder *b, const char *id, const char *depends);
/* The AQM alternatives of a class queue, best first (byte FIFO last when
 * fifo_rate_bps is not 0). */
void alts_queue(struct plan_item *it, enum workload_class c, uint32_t ce_us, uint64_t fifo_rate_bps, bool ingress);

/* plan_node_mq.c */
/* Can the mode be served by mq with per-queue children on this kernel? */
bool node_mq_usable(enum node_mode mode, const struct uplink_facts *up, const struct plan_caps *caps);
/* Items of the mq layout (root, per-queue children, their leaves, the
 * classifier in mixed mode), for capacity. */
unsigned node_mq_items(enum node_mode mode, const struct uplink_facts *up, const struct plan_caps *caps);
int node_tree_mq(struct builder *b, enum node_mode mode, const struct uplink_facts *up, uint32_t ce_us,
                 uint64_t fifo_rate_bps);
/* EDT (node.h): usable on this uplink and kernel; its tree (mq, fq per
 * queue, the classifier), and its item count. */
bool node_edt_usable(const struct uplink_facts *up, const struct plan_caps *caps);
int node_tree_edt(struct builder *b, const struct uplink_facts *up, uint32_t ce_us);
unsigned node_edt_items(const struct uplink_facts *up);
/* The clsact egress hook and the BPF classifier on it (uplink.clsact,
 * uplink.classifier): 2 items. */
int node_classifier_add(struct builder *b);

#endif
