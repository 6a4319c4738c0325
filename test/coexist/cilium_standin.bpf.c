/* cilium_standin.bpf.c — test tooling, not product code: a stand-in for
 * Cilium's programs on a native device with tcx (enable-tcx, kernel >= 6.6):
 * cil_from_netdev / cil_to_netdev attached at the tail of the ingress and
 * egress hooks, returning TC_ACT_OK, which ends the hook (net/core/dev.c
 * tcx_run: any verdict but TCX_NEXT skips the legacy clsact filters).
 * Counts every packet each program sees: counts[0] ingress, [1] egress.
 * The "calico" set instead stands in for Calico's eBPF dataplane (tcx by
 * default): programs named like its tc programs (cali_*) that hand on
 * (TC_ACT_UNSPEC = TCX_NEXT) as Calico does for stack-bound packets;
 * counts[2] ingress, [3] egress. With entries in standin_peer (an IPv4
 * destination -> the ifindex of a pod's host-side veth), cil_from_netdev
 * puts those packets straight into the pod as Cilium's BPF host routing
 * does (bpf_redirect_peer: past the host's stack and the veth's hooks). */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} standin_counts SEC(".maps");

static __always_inline int count(__u32 k, int verdict)
{
	__u64 *v = bpf_map_lookup_elem(&standin_counts, &k);

	if (v)
		__sync_fetch_and_add(v, 1);
	return verdict;
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);   /* IPv4 destination, network order */
	__type(value, __u32); /* host-side veth ifindex */
} standin_peer SEC(".maps");

SEC("tc")
int cil_from_netdev(struct __sk_buff *skb)
{
	__u16 proto = 0;
	__u32 dst = 0, *ifindex;

	count(0, TC_ACT_OK);
	if (bpf_skb_load_bytes(skb, 12, &proto, 2) == 0 && proto == __builtin_bswap16(0x0800) &&
	    bpf_skb_load_bytes(skb, 14 + 16, &dst, 4) == 0 && (ifindex = bpf_map_lookup_elem(&standin_peer, &dst)))
		return bpf_redirect_peer(*ifindex, 0);
	return TC_ACT_OK;
}

SEC("tc")
int cil_to_netdev(struct __sk_buff *skb)
{
	return count(1, TC_ACT_OK);
}

SEC("tc")
int cali_tc_ingress(struct __sk_buff *skb)
{
	return count(2, TC_ACT_UNSPEC);
}

SEC("tc")
int cali_tc_egress(struct __sk_buff *skb)
{
	return count(3, TC_ACT_UNSPEC);
}

char LICENSE[] SEC("license") = "GPL";
