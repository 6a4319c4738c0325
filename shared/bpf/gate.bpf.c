/* gate.bpf.c — the gate in front of an ifb's shaper (bpf_gate.h), a tc
 * program at one of the uplink's clsact hooks, before the match-all
 * redirect to the ifb: TC_ACT_OK (straight on, past the redirect) while a
 * window's bytes stay under the threshold; from the first window over it
 * until the hold has passed without one, TC_ACT_UNSPEC (the redirect takes
 * the packet through the tree). Per packet:
 *   now - window start >= window: a new window (start = now, bytes = 0)
 *   bytes += len (atomic); bytes > threshold: redirect until now + hold
 *   now < redirect until: to the ifb, else straight on
 * Threshold 0 = the gate off: everything to the ifb. A packet the ifb sends
 * back (ingress_ifindex = pass_ifindex) is not counted and goes on to the
 * redirect filter, whose action sees the ifb's skip-classify mark, clears
 * it and passes the packet (the kernel's loop guard): taps and tc on the
 * next device see it again. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#include "aiqos_bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bpf_gate);
} aiqos_gate SEC(".maps");

SEC("tc")
int aiqos_gate_prog(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct bpf_gate *g = bpf_map_lookup_elem(&aiqos_gate, &zero);
	__u64 now;

	if (!g || !g->threshold_bytes)
		return TC_ACT_UNSPEC;
	if (g->pass_ifindex && skb->ingress_ifindex == g->pass_ifindex)
		return TC_ACT_UNSPEC;
	now = bpf_ktime_get_ns();
	if (now - g->win_start_ns >= g->win_ns) {
		g->win_start_ns = now;
		g->win_bytes = 0;
	}
	__sync_fetch_and_add(&g->win_bytes, skb->len);
	if (g->win_bytes > g->threshold_bytes)
		g->redirect_until_ns = now + g->hold_ns;
	return g->redirect_until_ns > now ? TC_ACT_UNSPEC : TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
