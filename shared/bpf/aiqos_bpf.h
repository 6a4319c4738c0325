/* aiqos_bpf.h — what the BPF programs (shared/bpf/NAME.bpf.c) and user space
 * (bpf_cls.c, bpf_gate.c, the agent, the tests) share: the maps' keys and
 * values, and the key kinds. Included by clang -target bpf (UAPI types)
 * and by user space (stdint's, so PRIu64 fits): the same sizes. */
#ifndef AIQOS_BPF_H
#define AIQOS_BPF_H

#ifdef __bpf__
#include <linux/types.h>
typedef __u8 aq_u8;
typedef __u32 aq_u32;
typedef __u64 aq_u64;
#else
#include <stdint.h>
typedef uint8_t aq_u8;
typedef uint32_t aq_u32;
typedef uint64_t aq_u64;
#endif

/* ---- the classifier (cls.bpf.c) ---- */
#define BPF_CLS_KEY_DEFAULT 0
#define BPF_CLS_KEY_DSCP    1
#define BPF_CLS_KEY_SRC4    4
#define BPF_CLS_KEY_SRC6    6
#define BPF_CLS_MAP_MAX     8192 /* entries: pod addresses (NODE_FILTERS_MAX) + 64 DSCPs + 1, with room */

struct bpf_cls_key {
	aq_u8 kind;
	aq_u8 pad[3];
	aq_u8 addr[16]; /* source address (network order, v4 in the first 4 bytes) or addr[0] = DSCP */
};

/* EDT: the map's one value. The clocks are the program's, in 2^-8 ns
 * (a packet's cost is kept to 4 ps, so small packets at hundreds of Gbit/s
 * do not leave faster than the rate) and compared by their difference with
 * now (they wrap after 834 days, harmlessly); the rest is configuration
 * (bpf_edt_sync). */
#define BPF_EDT_CLOCK_SHIFT 8
struct bpf_edt {
	aq_u64 link_q8;      /* link clock: when the aggregate's next packet may start */
	aq_u64 inf_q8;       /* inference clock */
	aq_u64 link_q20;     /* per byte at the aggregate rate, in 2^-20 ns; 0 = stamping off */
	aq_u64 inf_q20;      /* per byte at inference's ceiling, in 2^-20 ns */
	aq_u64 horizon_ns;   /* a later start drops the packet */
	aq_u32 overhead;     /* link-layer bytes per segment */
	aq_u32 inf_priority; /* the skb->priority the map gives inference */
};

/* ---- the gates (gate.bpf.c) ---- */
struct bpf_gate {
	aq_u64 win_start_ns; /* the program's state */
	aq_u64 win_bytes;
	aq_u64 redirect_until_ns;
	aq_u64 win_ns; /* configuration (bpf_gate_sync) */
	aq_u64 threshold_bytes;
	aq_u64 hold_ns;
	aq_u64 pass_ifindex; /* packets re-injected by this ifb are not counted (0 = none) */
};

#endif
