/* classify.h — a packet's class from a map of pods (aiqos_bpf.h, struct
 * bpf_cls_key): by the pod's address (the source on the way out, the
 * destination on the way in), inside an overlay's encapsulation too
 * (parse.h); else, on the way out, by the DSCP aiqos marked (a mark coming
 * in was set by someone else: never trusted); else the default entry. */
#ifndef AIQOS_BPF_CLASSIFY_H
#define AIQOS_BPF_CLASSIFY_H

#include "aiqos_bpf.h"
#include "parse.h"

#define CLASSIFY_BY_SRC 0 /* the uplink's egress: the pod sends */
#define CLASSIFY_BY_DST 1 /* the uplink's ingress: the pod receives */

static __always_inline __u32 *lookup(void *map, __u8 kind, const __u8 *addr, __u32 len)
{
	struct bpf_cls_key key = {.kind = kind};

	if (len)
		__builtin_memcpy(key.addr, addr, len < sizeof(key.addr) ? len : sizeof(key.addr));
	return bpf_map_lookup_elem(map, &key);
}

static __always_inline __u32 *lookup_pod(void *map, const struct parsed_ip *p, int dir)
{
	return lookup(map, p->family == PARSE_V4 ? BPF_CLS_KEY_SRC4 : BPF_CLS_KEY_SRC6,
	              dir == CLASSIFY_BY_DST ? p->daddr : p->saddr, 16);
}

/* NULL leaves the packet alone (not IP, or no default entry). *flow: the
 * headers the packet's flow is known by (bands.h): the inner ones of an
 * overlay's packet (the outer are the node's, one tunnel), else p's. */
static __always_inline __u32 *classify(struct __sk_buff *skb, void *map, const struct parsed_ip *p, int dir,
                                       struct parsed_ip *flow)
{
	struct parsed_ip inner = {};
	__u32 *prio;

	*flow = *p;
	if (p->family == PARSE_NOT_IP)
		return NULL;
	if (p->complete) {
		prio = lookup_pod(map, p, dir);
		if (prio)
			return prio;
		if (parse_inner(skb, p, &inner) == 0) {
			if (inner.complete)
				*flow = inner;
			/* the pod and its mark are inside; the outer ones are the node's */
			prio = inner.complete ? lookup_pod(map, &inner, dir) : NULL;
			if (!prio && inner.complete && dir == CLASSIFY_BY_SRC)
				prio = lookup(map, BPF_CLS_KEY_DSCP, &inner.dscp, 1);
			return prio ? prio : lookup(map, BPF_CLS_KEY_DEFAULT, NULL, 0);
		}
		prio = dir == CLASSIFY_BY_SRC ? lookup(map, BPF_CLS_KEY_DSCP, &p->dscp, 1) : NULL;
		if (prio)
			return prio;
	}
	return lookup(map, BPF_CLS_KEY_DEFAULT, NULL, 0);
}

#endif
