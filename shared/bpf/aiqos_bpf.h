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
#define BPF_CLS_KEY_PASS    5 /* the download classifier: packets the ifb (this ifindex) sent back pass */
#define BPF_CLS_KEY_SRC4    4
#define BPF_CLS_KEY_SRC6    6
#define BPF_CLS_MAP_MAX     8192 /* entries: pod addresses (NODE_FILTERS_MAX) + 64 DSCPs + 1, with room */
/* Bands inside a class (bands.h): entries of the same map. */
#define BPF_CLS_KEY_BAND         2    /* addr[0..3]: a class's priority (host order) -> its bulk band's priority */
#define BPF_CLS_KEY_BAND_CFG     3    /* addr[0]: BPF_BAND_CFG_* -> that setting */
#define BPF_BAND_CFG_BYTES       0    /* a flow's recent bytes beyond which it is demoted */
#define BPF_BAND_CFG_IDLE_US     1    /* silence (us) after which a flow's count restarts */
#define BPF_BAND_PROMOTE_IDLE_MS 1000 /* silence after which a demoted flow is interactive again */
#define BPF_BAND_MSG_MIN_BYTES   64   /* a TCP flow's ACK advancing by this much: the peer sent a request */
/* flows tracked per program (an LRU: the least recently seen is forgotten,
 * and starts again as interactive); 65536 x ~80 bytes = ~5 MiB per program */
#define BPF_FLOW_MAP_MAX 65536

struct bpf_cls_key {
	aq_u8 kind;
	aq_u8 pad[3];
	aq_u8 addr[16]; /* source address (network order, v4 in the first 4 bytes) or addr[0] = DSCP */
};

/* A flow (bands.h): the packet's outer 5-tuple (an overlay's outer
 * source port is a hash of the inner flow's); ports 0 for protocols
 * without them. */
struct bpf_flow_key {
	aq_u8 family;
	aq_u8 proto;
	aq_u8 pad[2];
	aq_u8 port[4]; /* source, destination (network order) */
	aq_u8 saddr[16];
	aq_u8 daddr[16];
};

struct bpf_flow {
	aq_u64 last_ns; /* its last packet */
	aq_u64 bytes;   /* recent bytes (drained, restarted after a silence) */
	aq_u32 bulk;    /* 1 while demoted */
	aq_u32 ack;     /* TCP: the flow's last acknowledgment number (the peer's bytes) */
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
