/* dcls.bpf.c — the download classifier (bpf_cls.h), a tc program at the
 * uplink's clsact ingress hook, before the download gate and the redirect
 * to the ifb: skb->priority = the class, on the ifb's HTB tree, of the pod
 * a packet is for (its destination address, inside an overlay's
 * encapsulation too), else the default class — or, for a flow of a class
 * with a bulk band that keeps sending, the band's (bands.h). HTB on the ifb takes the
 * class it names (the priority survives the redirect) without walking a
 * filter under its lock; marks set by senders elsewhere are never read.
 * Returns TC_ACT_UNSPEC: the gate and the redirect still run. Every packet
 * that reaches the hook is counted (aiqos_dseen): the agent compares the
 * count with the uplink's received packets to tell whether another tool's
 * program ends the hook before it (agent/node/reach.c). Where another
 * tool's program ends the uplink's ingress hook, the same program (on the
 * same classes, with a count of its own) runs at the egress hook of each
 * pod's host-side interface, before the redirect there
 * (agent/node/podside.h). */
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
} aiqos_dcls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, BPF_FLOW_MAP_MAX);
	__type(key, struct bpf_flow_key);
	__type(value, struct bpf_flow);
} aiqos_dflows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} aiqos_dseen SEC(".maps");

SEC("tc")
int aiqos_dcls_prog(struct __sk_buff *skb)
{
	struct parsed_ip p = {}, flow;
	struct bpf_cls_key pass = {.kind = BPF_CLS_KEY_PASS};
	__u32 *prio, *pass_ifindex, zero = 0;
	__u64 *seen;

	/* at a pod's interface (agent/node/podside.h) the ifb sends each
	 * packet back through this hook: classified and counted once */
	pass_ifindex = bpf_map_lookup_elem(&aiqos_dcls, &pass);
	if (pass_ifindex && *pass_ifindex && skb->ingress_ifindex == *pass_ifindex)
		return TC_ACT_UNSPEC;
	seen = bpf_map_lookup_elem(&aiqos_dseen, &zero);
	if (seen)
		*seen += 1; /* this CPU's own slot */
	parse_ip(skb, &p);
	prio = classify(skb, &aiqos_dcls, &p, CLASSIFY_BY_DST, &flow);
	if (prio)
		skb->priority = band_pick(skb, &aiqos_dcls, &aiqos_dflows, &flow, *prio);
	return TC_ACT_UNSPEC;
}

char LICENSE[] SEC("license") = "GPL";
