/* cls.bpf.c — the uplink's classifier (bpf_cls.h), a tc program at the
 * clsact egress hook: skb->priority from the pod's source address (inside
 * an overlay's encapsulation too: parse.h), else from the DSCP aiqos
 * marked, else the default class — or, for a flow of a class with a bulk
 * band that keeps sending, the band's (bands.h); and with a rate in
 * the EDT map, each classified packet's departure time (skb->tstamp) on
 * shared clocks, for fq to release. Returns TC_ACT_UNSPEC (the next filter
 * runs), or TC_ACT_SHOT past the EDT horizon. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#include "aiqos_bpf.h"
#include "bands.h"
#include "classify.h"
#include "parse.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, BPF_CLS_MAP_MAX);
	__type(key, struct bpf_cls_key);
	__type(value, __u32);
} aiqos_cls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bpf_edt);
} aiqos_edt SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, BPF_FLOW_MAP_MAX);
	__type(key, struct bpf_flow_key);
	__type(value, struct bpf_flow);
} aiqos_flows SEC(".maps");

/* a is later than b, on clocks that wrap */
static __always_inline int later(__u64 a, __u64 b)
{
	return (__s64)(a - b) > 0;
}

/* bytes at 2^-20 ns per byte, in 2^-8 ns, rounded to nearest */
static __always_inline __u64 cost_q8(__u64 q20, __u64 bytes)
{
	return (q20 * bytes + (1ull << 11)) >> 12;
}

/* The link clock from its start (at least now): advanced by the packet's
 * cost with an atomic add, so concurrent CPUs lose none of each other's
 * bytes (two of them may share a start). */
static __always_inline void link_advance(struct bpf_edt *e, __u64 now_q8, __u64 cost)
{
	if (!later(e->link_q8, now_q8))
		e->link_q8 = now_q8; /* idle: the clock restarts from now */
	__sync_fetch_and_add(&e->link_q8, cost);
}

/* Stamp the packet (bpf_cls.h, EDT):
 *   bulk (any class but inference): start = max(now, link clock),
 *       link clock = start + bytes / rate
 *   inference: start = max(now, min(inference clock, link clock)),
 *       inference clock = start + bytes / inference's ceiling, and the link
 *       clock advances by its bytes too (bulk waits behind it)
 * now is the later of the time and a pacing stamp the packet already has
 * (a host socket's, within the horizon). A start beyond the horizon drops. */
static __always_inline int edt_stamp(struct __sk_buff *skb, __u32 prio, const struct parsed_ip *p)
{
	__u32 zero = 0;
	struct bpf_edt *e = bpf_map_lookup_elem(&aiqos_edt, &zero);
	__u64 now, now_q8, start_q8, horizon_q8, bytes, segs, link_cost;

	if (!e || !e->link_q20)
		return TC_ACT_UNSPEC;
	/* ICMPv6 (neighbour discovery, PMTU) is never delayed or dropped, like ARP */
	if (p->family == PARSE_V6 && p->proto == IPPROTO_ICMPV6)
		return TC_ACT_UNSPEC;
	now = bpf_ktime_get_ns();
	if (skb->tstamp > now && skb->tstamp - now < e->horizon_ns)
		now = skb->tstamp;
	now_q8 = now << BPF_EDT_CLOCK_SHIFT;
	horizon_q8 = e->horizon_ns << BPF_EDT_CLOCK_SHIFT;
	segs = skb->gso_segs ? skb->gso_segs : 1;
	bytes = skb->len + (__u64)e->overhead * segs;
	link_cost = cost_q8(e->link_q20, bytes);

	if (prio == e->inf_priority) {
		__u64 clock = later(e->inf_q8, e->link_q8) ? e->link_q8 : e->inf_q8;

		start_q8 = later(clock, now_q8) ? clock : now_q8;
		if (start_q8 - now_q8 > horizon_q8)
			return TC_ACT_SHOT;
		e->inf_q8 = start_q8 + cost_q8(e->inf_q20, bytes);
	} else {
		start_q8 = later(e->link_q8, now_q8) ? e->link_q8 : now_q8;
		if (start_q8 - now_q8 > horizon_q8)
			return TC_ACT_SHOT;
	}
	link_advance(e, now_q8, link_cost);
	skb->tstamp = now + ((start_q8 - now_q8) >> BPF_EDT_CLOCK_SHIFT);
	return TC_ACT_UNSPEC;
}

SEC("tc")
int aiqos_cls_edt(struct __sk_buff *skb)
{
	struct parsed_ip p = {}, flow;
	__u32 *prio, band;

	parse_ip(skb, &p);
	prio = classify(skb, &aiqos_cls, &p, CLASSIFY_BY_SRC, &flow);
	if (!prio)
		return TC_ACT_UNSPEC;
	band = band_pick(skb, &aiqos_cls, &aiqos_flows, &flow, *prio);
	skb->priority = band;
	return edt_stamp(skb, band, &p);
}

char LICENSE[] SEC("license") = "GPL";
