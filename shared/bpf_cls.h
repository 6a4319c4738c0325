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
 * node_cls_entries) and synced here in O(entries) syscalls. */
#ifndef AIQOS_BPF_CLS_H
#define AIQOS_BPF_CLS_H

#include "error.h"

#define BPF_CLS_NAME        "aiqos_cls"
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

/* Create the classifier's map (hash, BPF_CLS_MAP_MAX entries). */
int bpf_cls_map_create(int *ret_fd, struct error *err);
/* Load the program bound to map_fd; ret_fd is the program's fd. The
 * verifier's log is in err on failure. */
int bpf_cls_prog_load(int map_fd, int *ret_fd, struct error *err);
/* The map of an attached program (by its id, from the filter dump). */
int bpf_cls_map_from_prog(uint32_t prog_id, int *ret_fd, struct error *err);
/* Make the map hold exactly want[0..n) (deletes, adds, updates what
 * differs). ret_changed (may be NULL): how many entries were written or
 * deleted. */
int bpf_cls_map_sync(int map_fd, const struct bpf_cls_entry *want, unsigned n, unsigned *ret_changed,
                     struct error *err);

#endif
