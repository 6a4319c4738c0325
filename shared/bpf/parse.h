/* parse.h — packet parsing for aiqos's tc programs: headers read relative
 * to the network header (bpf_skb_load_bytes_relative), so the device's
 * link layer (Ethernet, none on tun/WireGuard/IPIP, 20 bytes of IPoIB) does
 * not move them; one software-tagged VLAN header is skipped. */
#ifndef AIQOS_BPF_PARSE_H
#define AIQOS_BPF_PARSE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define PARSE_NOT_IP 0
#define PARSE_V4     4
#define PARSE_V6     6

struct parsed_ip {
	__u8 family; /* PARSE_V4, PARSE_V6, or PARSE_NOT_IP */
	__u8 dscp;
	__u8 proto;    /* IPv4 protocol, IPv6 next header */
	__u8 complete; /* the whole fixed header was readable */
	__u8 saddr[16];
};

static __always_inline int load_net(struct __sk_buff *skb, __u32 off, void *to, __u32 len)
{
	return bpf_skb_load_bytes_relative(skb, off, to, len, BPF_HDR_START_NET);
}

/* The packet's IP header: family, source, DSCP. A truncated header leaves
 * complete 0 (the family known, the source maybe not). */
static __always_inline void parse_ip(struct __sk_buff *skb, struct parsed_ip *p)
{
	__u16 proto = (__u16)skb->protocol;
	__u32 off = 0;

	p->family = PARSE_NOT_IP;
	p->complete = 0;
	if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD)) {
		__u16 vlan[2];

		if (load_net(skb, 0, vlan, sizeof(vlan)) < 0)
			return;
		proto = vlan[1];
		off = sizeof(vlan);
	}
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr ip;

		p->family = PARSE_V4;
		if (load_net(skb, off, &ip, sizeof(ip)) < 0)
			return;
		__builtin_memcpy(p->saddr, &ip.saddr, 4);
		p->dscp = ip.tos >> 2;
		p->proto = ip.protocol;
		p->complete = 1;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr ip6;
		__u8 *b = (__u8 *)&ip6;

		p->family = PARSE_V6;
		if (load_net(skb, off, &ip6, sizeof(ip6)) < 0)
			return;
		__builtin_memcpy(p->saddr, &ip6.saddr, 16);
		/* version | traffic class | flow label: dscp = the class's top 6 bits */
		p->dscp = (__u8)(((b[0] & 0x0f) << 2) | (b[1] >> 6));
		p->proto = ip6.nexthdr;
		p->complete = 1;
	}
}

#endif
