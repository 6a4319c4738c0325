/* bands.h — interactive first, bulk shares, inside a class (node.h
 * "BANDS"): a packet whose class has a bulk band (an entry
 * {BPF_CLS_KEY_BAND, the class's priority} -> the band's priority in the
 * classifier's map) counts its flow's recent bytes in an LRU hash of flows
 * (BPF_FLOW_MAP_MAX, keyed by its 5-tuple: an overlay packet's inner one):
 *   silence >= idle (BPF_BAND_CFG_IDLE_US): the count restarts at 0; a
 *        demoted flow is promoted back after BPF_BAND_PROMOTE_IDLE_MS of
 *        silence (longer than TCP's minimum retransmission timeout: a
 *        transfer starved in the band, or stalled by a loss, is not quiet)
 *   else the count drains at threshold bytes per second of the time since
 *        the flow's last packet (a sparse flow — token events, a request
 *        now and then — never accumulates)
 *   a TCP packet whose acknowledgment number advanced by at least
 *        BPF_BAND_MSG_MIN_BYTES since the flow's last: the peer sent a
 *        message (a request) and this is its response: the count restarts
 *        and a demoted flow is interactive again (PIAS counts a message's
 *        bytes; a keep-alive connection serving 256 KiB responses at a high
 *        rate is many short messages, a model load or a KV-cache transfer
 *        one long one; the peer's window updates and pings are smaller)
 *   count += the packet's bytes
 *   count > threshold (BPF_BAND_CFG_BYTES): the flow is demoted to the band,
 *        where it stays while it keeps sending. (Promoting a demoted flow
 *        whose count drained would not hold: the band shares, so a demoted
 *        flow slows, drains, comes back to the head and starves the band's
 *        other flows until it is demoted again — a model load over many
 *        connections kept most of them at the head that way.)
 * The counts of a flow's packets on two CPUs at once may race: approximate
 * counts, never a wrong class. A flow the LRU forgot starts interactive. */
#ifndef AIQOS_BPF_BANDS_H
#define AIQOS_BPF_BANDS_H

#include <linux/in.h>

#include "aiqos_bpf.h"
#include "parse.h"

static __always_inline __u32 *band_cfg(void *map, __u8 which)
{
	struct bpf_cls_key key = {.kind = BPF_CLS_KEY_BAND_CFG};

	key.addr[0] = which;
	return bpf_map_lookup_elem(map, &key);
}

/* The priority of the packet of class priority prio: prio, or its bulk
 * band's while its flow is demoted. */
static __always_inline __u32 band_pick(struct __sk_buff *skb, void *map, void *flows, const struct parsed_ip *p,
                                       __u32 prio)
{
	struct bpf_cls_key key = {.kind = BPF_CLS_KEY_BAND};
	struct bpf_flow_key fk = {};
	struct bpf_flow *f;
	__u32 *bulk, *thr, *idle_us, ack = 0;
	__u64 now, elapsed, drain, len = skb->len;
	__u8 has_ack = 0;

	if (!p->complete)
		return prio;
	__builtin_memcpy(key.addr, &prio, sizeof(prio));
	bulk = bpf_map_lookup_elem(map, &key);
	if (!bulk)
		return prio;
	thr = band_cfg(map, BPF_BAND_CFG_BYTES);
	idle_us = band_cfg(map, BPF_BAND_CFG_IDLE_US);
	if (!thr || !idle_us || !*thr)
		return prio;

	fk.family = p->family;
	fk.proto = p->proto;
	__builtin_memcpy(fk.saddr, p->saddr, 16);
	__builtin_memcpy(fk.daddr, p->daddr, 16);
	if (p->proto == IPPROTO_TCP) {
		__u8 tcp[14]; /* up to the flags: ports, sequence, acknowledgment, offset */

		if (load_net(skb, p->l4_off, tcp, sizeof(tcp)) == 0) {
			__builtin_memcpy(fk.port, tcp, sizeof(fk.port));
			if (tcp[13] & 0x10) {
				ack = (__u32)tcp[8] << 24 | (__u32)tcp[9] << 16 | (__u32)tcp[10] << 8 | tcp[11];
				has_ack = 1;
			}
		}
	} else if (p->proto == IPPROTO_UDP) {
		if (load_net(skb, p->l4_off, fk.port, sizeof(fk.port)) < 0)
			__builtin_memset(fk.port, 0, sizeof(fk.port));
	}
	now = bpf_ktime_get_ns();
	f = bpf_map_lookup_elem(flows, &fk);
	if (!f) {
		struct bpf_flow nf = {.last_ns = now, .bytes = len, .bulk = len > *thr, .ack = ack};

		bpf_map_update_elem(flows, &fk, &nf, BPF_ANY);
		return nf.bulk ? *bulk : prio;
	}
	elapsed = now - f->last_ns;
	if (elapsed >= (__u64)*idle_us * 1000) {
		f->bytes = 0;
		if (elapsed >= (__u64)BPF_BAND_PROMOTE_IDLE_MS * 1000000)
			f->bulk = 0;
	} else {
		/* elapsed < idle (at most NODE_BULK_IDLE_MS_MAX) x threshold < 2^32: no overflow */
		drain = elapsed * *thr / 1000000000ull;
		f->bytes = f->bytes > drain ? f->bytes - drain : 0;
	}
	if (has_ack) {
		/* serial-number arithmetic: a forward step of less than 2^31 */
		__u32 step = ack - f->ack;

		if (step >= BPF_BAND_MSG_MIN_BYTES && step < 0x80000000u) {
			f->bytes = 0;
			f->bulk = 0;
		}
		f->ack = ack;
	}
	f->bytes += len;
	f->last_ns = now;
	if (f->bytes > *thr)
		f->bulk = 1;
	return f->bulk ? *bulk : prio;
}

#endif
