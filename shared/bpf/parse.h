/* parse.h — packet parsing for aiqos's tc programs: headers read relative
 * to the network header (bpf_skb_load_bytes_relative), so the device's
 * link layer (Ethernet, none on tun/WireGuard/IPIP, 20 bytes of IPoIB) does
 * not move them; one software-tagged VLAN header is skipped. A packet of
 * an overlay (VXLAN on UDP 8472 or 4789, Geneve on 6081 with its options,
 * IPIP and IPv6-in-IP) also yields its inner IP header: the pod's address
 * and mark are there, the outer ones are the node's. */
#ifndef AIQOS_BPF_PARSE_H
#define AIQOS_BPF_PARSE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define PARSE_NOT_IP 0
#define PARSE_V4     4
#define PARSE_V6     6

#define PORT_VXLAN_LINUX 8472 /* the kernel's default, Flannel's and Cilium's */
#define PORT_VXLAN_IANA  4789
#define PORT_GENEVE      6081
#define ETH_P_TEB        0x6558 /* transparent Ethernet bridging: Geneve's inner frame */

struct parsed_ip {
	__u8 family; /* PARSE_V4, PARSE_V6, or PARSE_NOT_IP */
	__u8 dscp;
	__u8 proto;      /* IPv4 protocol, IPv6 next header */
	__u8 complete;   /* the whole fixed header was readable */
	__u8 later_frag; /* an IPv4 fragment other than the first: no transport header */
	__u8 saddr[16];
	__u8 daddr[16];
	__u32 l4_off; /* the transport header, from the network header */
};

static __always_inline int load_net(struct __sk_buff *skb, __u32 off, void *to, __u32 len)
{
	return bpf_skb_load_bytes_relative(skb, off, to, len, BPF_HDR_START_NET);
}

/* The IP header of protocol proto (network order) at off; one whose
 * version is not proto's, or an IPv4 header length below 5 words, is left
 * incomplete (bytes that are no IP header: a misplaced inner packet). */
static __always_inline void parse_ip_at(struct __sk_buff *skb, __u32 off, __u16 proto, struct parsed_ip *p)
{
	p->family = PARSE_NOT_IP;
	p->complete = 0;
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr ip;

		p->family = PARSE_V4;
		if (load_net(skb, off, &ip, sizeof(ip)) < 0 || ip.version != 4 || ip.ihl < 5)
			return;
		__builtin_memcpy(p->saddr, &ip.saddr, 4);
		__builtin_memcpy(p->daddr, &ip.daddr, 4);
		p->dscp = ip.tos >> 2;
		p->proto = ip.protocol;
		p->l4_off = off + ip.ihl * 4;
		p->later_frag = (ip.frag_off & bpf_htons(0x1fff)) != 0;
		p->complete = 1;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr ip6;
		__u8 *b = (__u8 *)&ip6;

		p->family = PARSE_V6;
		if (load_net(skb, off, &ip6, sizeof(ip6)) < 0 || ip6.version != 6)
			return;
		__builtin_memcpy(p->saddr, &ip6.saddr, 16);
		__builtin_memcpy(p->daddr, &ip6.daddr, 16);
		/* version | traffic class | flow label: dscp = the class's top 6 bits */
		p->dscp = (__u8)(((b[0] & 0x0f) << 2) | (b[1] >> 6));
		p->proto = ip6.nexthdr;
		p->l4_off = off + sizeof(ip6);
		p->complete = 1;
	}
}

/* The packet's own IP header: family, addresses, DSCP. A truncated header
 * leaves complete 0 (the family known, the source not). */
static __always_inline void parse_ip(struct __sk_buff *skb, struct parsed_ip *p)
{
	__u16 proto = (__u16)skb->protocol;
	__u32 off = 0;

	if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD)) {
		__u16 vlan[2];

		p->family = PARSE_NOT_IP;
		p->complete = 0;
		if (load_net(skb, 0, vlan, sizeof(vlan)) < 0)
			return;
		proto = vlan[1];
		off = sizeof(vlan);
	}
	parse_ip_at(skb, off, proto, p);
}

/* The inner IP header of an overlay packet whose outer header is outer;
 * returns 0 when it is one (inner filled, complete or not), -1 when the
 * packet is not a tunnel's, so that its outer header decides. The rule,
 * what the kernel's own receivers accept (drivers/net/vxlan, geneve.c):
 * - IPIP / IPv6-in-IP (protocol 4 / 41): always a tunnel;
 * - UDP to 8472 or 4789 is VXLAN when its 8-byte header has the flags of
 *   the I bit alone (0x08) and its reserved bytes (1-3, 7) are zero (the
 *   kernel drops VXLAN with unknown flags or reserved bits);
 * - UDP to 6081 is Geneve when its version is 0 and its protocol is an
 *   Ethernet frame (0x6558), IPv4 or IPv6; options (0-252 bytes) skipped;
 * - anything else, a UDP or tunnel header cut short, and a later IPv4
 *   fragment (its bytes are no header) is no tunnel.
 * Once the tunnel header is recognized the packet is the tunnel's: an inner
 * frame cut short or not IP (ARP inside) leaves inner incomplete (the
 * default class), never the node's outer mark. */
static __always_inline int parse_inner(struct __sk_buff *skb, const struct parsed_ip *outer, struct parsed_ip *inner)
{
	__u32 off = outer->l4_off;
	__u16 eth_proto;

	inner->family = PARSE_NOT_IP;
	inner->complete = 0;
	if (!outer->complete || outer->later_frag)
		return -1;
	if (outer->proto == IPPROTO_IPIP || outer->proto == IPPROTO_IPV6) {
		parse_ip_at(skb, off, outer->proto == IPPROTO_IPIP ? bpf_htons(ETH_P_IP) : bpf_htons(ETH_P_IPV6),
		            inner);
		return 0;
	}
	if (outer->proto == IPPROTO_UDP) {
		struct udphdr udp;
		__u8 tun[8];
		__u16 dport;

		if (load_net(skb, off, &udp, sizeof(udp)) < 0 || load_net(skb, off + sizeof(udp), tun, sizeof(tun)) < 0)
			return -1;
		dport = bpf_ntohs(udp.dest);
		off += sizeof(udp) + sizeof(tun);
		if (dport == PORT_VXLAN_LINUX || dport == PORT_VXLAN_IANA) {
			/* flags: the I bit alone; reserved bytes zero */
			if (tun[0] != 0x08 || tun[1] || tun[2] || tun[3] || tun[7])
				return -1;
		} else if (dport == PORT_GENEVE) {
			/* version 0, options of tun[0] & 0x3f words, then the frame */
			if (tun[0] >> 6)
				return -1;
			off += (tun[0] & 0x3f) * 4;
			eth_proto = (__u16)((tun[2] << 8) | tun[3]);
			if (eth_proto == ETH_P_IP || eth_proto == ETH_P_IPV6) {
				parse_ip_at(skb, off, bpf_htons(eth_proto), inner);
				return 0;
			}
			if (eth_proto != ETH_P_TEB)
				return -1;
		} else {
			return -1;
		}
		/* the inner Ethernet frame */
		if (load_net(skb, off + 12, &eth_proto, sizeof(eth_proto)) == 0)
			parse_ip_at(skb, off + ETH_HLEN, eth_proto, inner);
		return 0;
	}
	return -1;
}

#endif
