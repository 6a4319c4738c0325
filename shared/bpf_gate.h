/* bpf_gate.h — the gate in front of an ifb's shaper: a
 * BPF_PROG_TYPE_SCHED_CLS program attached direct-action at one of the
 * uplink's clsact hooks, in front of the match-all redirect to the ifb:
 * ingress for the download tree (node.h, DOWNLOAD; BPF_GATE_NAME), egress
 * for the gated upload tree (node.h, GATED HTB; BPF_GATE_UP_NAME, after the
 * classifier). While the traffic stays well below the shaped rate no queue
 * can form in the ifb's tree, so the gate passes packets straight on
 * (TC_ACT_OK: no mirred, no ifb, no HTB lock); from the first window whose
 * bytes exceed the threshold until the hold time has passed without one,
 * it returns TC_ACT_UNSPEC and the redirect takes every packet through the
 * tree, as without the gate. Per packet:
 *   now - window start >= window: a new window (start = now, bytes = 0)
 *   bytes += len; bytes > threshold: redirect until now + hold
 *   now < redirect until: to the ifb, else straight on
 * The hold is longer than the ifb's deepest queue takes to drain, so what
 * the tree still holds has left before the flow bypasses it again (no
 * reordering). Bytes are counted with an atomic add (no CPU loses
 * another's). Threshold 0 = the gate off: everything to the ifb. A packet
 * the ifb sends back (its ingress_ifindex is pass_ifindex: the egress ifb
 * re-injects onto the uplink, through this hook) is not counted and goes
 * on to the redirect filter, whose action clears the ifb's skip-classify
 * mark and passes it. One array map of one struct bpf_gate per program;
 * the program is shared/bpf/gate.bpf.c, loaded with libbpf from its
 * embedded skeleton. */
#ifndef AIQOS_BPF_GATE_H
#define AIQOS_BPF_GATE_H

#include <stdint.h>

#include "bpf/aiqos_bpf.h"
#include "error.h"

#define BPF_GATE_NAME    "aiqos_gate"  /* the filter: the download gate */
#define BPF_GATE_UP_NAME "aiqos_ugate" /* the filter: the upload gate (the same program) */

/* Load the program: on the map *map_fd when >= 0 (adopted, or kept), else
 * on a new map (the gate off) returned there. name (BPF_GATE_NAME or
 * BPF_GATE_UP_NAME) says which gate in errors. */
int bpf_gate_load(int *map_fd, const char *name, int *ret_prog_fd, struct error *err);
/* The map of an attached gate program (by its id, from the filter dump);
 * ENOENT when it is not this version's. */
int bpf_gate_map_from_prog(uint32_t prog_id, int *ret_fd, struct error *err);
/* Make the map's configuration want's (the state restarts when it
 * changes); ret_changed (may be NULL): whether it was written. */
int bpf_gate_sync(int map_fd, const struct bpf_gate *want, bool *ret_changed, struct error *err);
/* The map's whole value (state and configuration). */
int bpf_gate_read(int map_fd, struct bpf_gate *ret, struct error *err);

#endif
