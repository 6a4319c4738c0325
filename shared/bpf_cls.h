/* bpf_cls.h — the uplink's classifier: a small BPF_PROG_TYPE_SCHED_CLS
 * program, attached direct-action at the clsact egress hook, that sets
 * skb->priority once per packet, lock-free and before the tx queue is
 * picked, so every per-queue child of mq (pfifo_fast, prio) serves the class
 * without a filter copy per queue, and HTB takes the class it names without
 * walking a filter under its lock. It looks up one hash
 * map, in this order:
 *   {kind 4|6, source address}  -> priority   (classify "src-ip", one per pod address)
 *   {kind 1, DSCP}              -> priority   (classify "dscp")
 *   {kind 0}                    -> priority   (any other IP packet: the default class)
 * Non-IP packets are left alone. The program returns TC_ACT_UNSPEC, so
 * filters after it still run. The program is assembled here (no compiler at
 * run time, no libbpf) and loaded with bpf(2); the map outlives programs
 * (a reload reuses it) and is found again from the attached program's id
 * after a restart. Entries are computed by the planner (node.h,
 * node_cls_entries) and synced here in O(entries) syscalls.
 *
 * EDT (earliest departure time; node.h, "EDT"): a second map, an array of
 * one struct bpf_edt, turns the same program into the shaper of the
 * aggregate. With a rate in it, each IP packet the map classified is
 * stamped with the time it may leave (skb->tstamp), from shared clocks:
 *   bulk (any class but inference): start = max(now, link clock),
 *       link clock = start + bytes / rate
 *   inference: start = max(now, min(inference clock, link clock)),
 *       inference clock = start + bytes / inference's ceiling, and the link
 *       clock advances by its bytes too (bulk waits behind it): while no
 *       bulk waits inference goes at the link rate (the link clock is the
 *       earlier), behind waiting bulk at its ceiling (its clock is)
 * bytes = len + overhead per segment; a start beyond the horizon drops the
 * packet (TC_ACT_SHOT: the queue's limit). fq per tx queue releases each
 * packet at its stamp, lock-free across queues; without fq the stamp is
 * ignored, so the planner uses EDT only where fq is. The clocks are
 * updated without a lock (as Cilium's bandwidth manager does): concurrent
 * CPUs may both take the same start, a few packets' worth of error. Rate 0
 * = stamping off (the program only classifies). */
#ifndef AIQOS_BPF_CLS_H
#define AIQOS_BPF_CLS_H

#include "error.h"

#define BPF_CLS_NAME        "aiqos_cls_edt" /* program and filter; 15 characters at most */
#define BPF_CLS_NAME_OLD    "aiqos_cls"     /* before EDT (one map): recognised, replaced */
#define BPF_CLS_KEY_DEFAULT 0
#define BPF_CLS_KEY_DSCP    1
#define BPF_CLS_KEY_SRC4    4
#define BPF_CLS_KEY_SRC6    6
#define BPF_CLS_MAP_MAX     8192 /* entries: pod addresses (NODE_FILTERS_MAX) + 64 DSCPs + 1, with room */

struct bpf_cls_key {
	uint8_t kind;
	uint8_t pad[3];
	uint8_t addr[16]; /* source address (network order, v4 in the first 4 bytes) or addr[0] = DSCP */
};

struct bpf_cls_entry {
	struct bpf_cls_key key;
	uint32_t priority; /* the skb->priority to set */
};

/* The EDT map's one value. The clocks are the program's; the rest is
 * configuration (bpf_edt_sync). */
struct bpf_edt {
	uint64_t link_ns;      /* link clock: when the aggregate's next packet may start */
	uint64_t inf_ns;       /* inference clock */
	uint64_t link_q20;     /* per byte at the aggregate rate, in 2^-20 ns; 0 = stamping off */
	uint64_t inf_q20;      /* per byte at inference's ceiling, in 2^-20 ns */
	uint64_t horizon_ns;   /* a later start drops the packet */
	uint32_t overhead;     /* link-layer bytes per segment */
	uint32_t inf_priority; /* the skb->priority the map gives inference */
};

/* 2^-20 ns per byte at rate_bps (0 for 0). */
uint64_t bpf_edt_q20(uint64_t rate_bps);

/* Create the classifier's map (hash, BPF_CLS_MAP_MAX entries), and the
 * EDT map (an array of one struct bpf_edt, stamping off). */
int bpf_cls_map_create(int *ret_fd, struct error *err);
int bpf_edt_map_create(int *ret_fd, struct error *err);
/* Load the program bound to both maps; ret_fd is the program's fd. The
 * verifier's log is in err on failure. */
int bpf_cls_prog_load(int map_fd, int edt_fd, int *ret_fd, struct error *err);
/* The maps of an attached program (by its id, from the filter dump);
 * ENOENT when it is not this program (e.g. BPF_CLS_NAME_OLD's, one map). */
int bpf_cls_map_from_prog(uint32_t prog_id, int *ret_fd, int *ret_edt_fd, struct error *err);
/* Make the EDT map's configuration want's (the clocks restart when it
 * changes). ret_changed (may be NULL): whether it was written. */
int bpf_edt_sync(int edt_fd, const struct bpf_edt *want, bool *ret_changed, struct error *err);
/* Make the map hold exactly want[0..n) (deletes, adds, updates what
 * differs). ret_changed (may be NULL): how many entries were written or
 * deleted. */
int bpf_cls_map_sync(int map_fd, const struct bpf_cls_entry *want, unsigned n, unsigned *ret_changed,
                     struct error *err);

#endif
