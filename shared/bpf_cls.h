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
 * Headers are read relative to the network header (any link layer), past
 * one VLAN tag; non-IP packets are left alone. The program returns
 * TC_ACT_UNSPEC, so filters after it still run. The program is
 * shared/bpf/cls.bpf.c, loaded with libbpf from its embedded skeleton; the
 * maps outlive programs (a reload reuses them) and are found again from
 * the attached program's id after a restart, when its tag is this
 * version's. Entries are computed by the planner (node.h,
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
 * bytes = len + overhead per segment, costed in 2^-8 ns (rounded); now is
 * the later of the time and a pacing stamp the packet carries within the
 * horizon (a host socket's); a start beyond the horizon drops the
 * packet (TC_ACT_SHOT: the queue's limit); ICMPv6 is never stamped. fq per tx queue releases each
 * packet at its stamp, lock-free across queues; without fq the stamp is
 * ignored, so the planner uses EDT only where fq is. The link clock
 * advances by atomic adds (no CPU loses another's bytes; two may share a
 * start). Rate 0 = stamping off (the program only classifies). */
#ifndef AIQOS_BPF_CLS_H
#define AIQOS_BPF_CLS_H

#include <stdint.h>

#include "bpf/aiqos_bpf.h"
#include "error.h"

#define BPF_CLS_NAME     "aiqos_cls_edt" /* the filter (and the program); 15 characters at most */
#define BPF_CLS_NAME_OLD "aiqos_cls"     /* before EDT (one map): recognised, replaced */
#define BPF_DCLS_NAME    "aiqos_dcls"    /* the download classifier's filter (dcls.bpf.c) */

struct bpf_cls_entry {
	struct bpf_cls_key key;
	uint32_t priority; /* the skb->priority to set */
};

/* 2^-20 ns per byte at rate_bps (0 for 0): 8e9 ns per bit-per-second per
 * byte, << 20: 8.4e15 fits in 64 bits. */
static inline uint64_t bpf_edt_q20(uint64_t rate_bps)
{
	return rate_bps ? (8000000000ull << 20) / rate_bps : 0;
}

/* Load the program: on the maps *cls_fd and *edt_fd when both are >= 0
 * (adopted, or kept from an earlier load), else on new maps whose fds are
 * returned there (the classifier's empty, EDT's stamping off). ret_prog_fd:
 * the program. On failure, err says why (bpf_load_error). */
int bpf_cls_load(int *cls_fd, int *edt_fd, int *ret_prog_fd, struct error *err);
/* The download classifier (shared/bpf/dcls.bpf.c, node.h DOWNLOAD): the
 * same map layout, keyed by the pods' addresses (as destinations), valued
 * with the classes of the ifb's tree; loaded on *map_fd when >= 0, else on
 * a new map returned there. Its map is synced with bpf_cls_map_sync. Its
 * second map, *seen_fd (the same rule), counts the packets it saw
 * (bpf_dcls_seen: the sum over the CPUs). */
int bpf_dcls_load(int *map_fd, int *seen_fd, int *ret_prog_fd, struct error *err);
int bpf_dcls_map_from_prog(uint32_t prog_id, int *ret_fd, int *ret_seen_fd, struct error *err);
int bpf_dcls_seen(int seen_fd, uint64_t *ret, struct error *err);
/* The maps of an attached program (by its id, from the filter dump);
 * ENOENT when they are not this version's (BPF_CLS_NAME_OLD's one map,
 * another layout). */
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
