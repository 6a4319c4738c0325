/* tcx.h — the uplink's egress classifier (cls.bpf.c) as a tcx link on
 * kernels that have tcx (>= 6.6; tcx.c), first on the hook (BPF_F_BEFORE):
 * tcx programs run before every legacy clsact filter and any verdict but
 * TCX_NEXT ends the hook, so an eBPF CNI's program there (Cilium's
 * cil_to_netdev returns TC_ACT_OK) would keep a clsact classifier from ever
 * running. The classifier returns TC_ACT_UNSPEC (= TCX_NEXT): the CNI's
 * programs still see every packet. The link is pinned in
 * <bpffs>/aiqos/cls-egress-<uplink> ($AIQOS_BPFFS, default /sys/fs/bpf;
 * not pinned when that is no bpffs: it lives as long as the agent) so a
 * restart adopts it and give-back removes it. Kernels without tcx keep the
 * clsact filter (uplink.classifier).
 *
 * The download direction stays on clsact: its redirect to the ifb can only
 * be the legacy mirred action (ifb drops what bpf_redirect sends it: no
 * skb->redirected), and ahead of a CNI's ingress program it would hide the
 * packets from it (the ifb re-injects them with tc_skip_classify, past
 * every ingress hook). Behind a CNI's tcx program that ends the hook the
 * download tree gets nothing: status and doctor say so. */
#ifndef AIQOS_AGENT_NODE_TCX_H
#define AIQOS_AGENT_NODE_TCX_H

#include <stdbool.h>

#include "error.h"

#define TCX_BPFFS_DEFAULT "/sys/fs/bpf"

struct agent;

/* Does the kernel have tcx (the hook's query answers)? */
bool tcx_available(int ifindex);
/* The classifier's tcx link as wanted: attached first (adopting a pinned
 * one of this version; re-attached when detached behind our back or not
 * first), or removed. Returns 1 when it attached, 0, or negative errno. */
int tcx_cls_sync(struct agent *ag, bool want, struct error *err);
/* Close our link; detach: remove it from the hook and its pin (give-back). */
void tcx_cls_release(struct agent *ag, bool detach);

#endif
