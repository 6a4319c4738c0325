/* podside.h — the download tree fed at the pods' side. Where another
 * tool's program ends the uplink's ingress hook before aiqos's filters
 * (reach.h: most received packets never reach the download classifier;
 * Cilium's cil_from_netdev returns TC_ACT_OK), the download tree is fed
 * from the other end: at the egress hook of each pod's host-side
 * interface (what the node forwards into the pod) the download classifier
 * (the same program on the same classes, a count of its own; pref
 * NODE_FILTER_PRIO_DOWN_CLS) and a match-all redirect to the ifb (pref
 * NODE_FILTER_PRIO_UP_REDIRECT), which sends each packet back to that
 * interface when the tree lets it go (the classifier passes it then:
 * BPF_CLS_KEY_PASS). Nothing is hidden from the other tool's program at
 * the uplink: it has run. Fed: the pods aiqos attached to (their records
 * name the host-side interface); not fed: packets a CNI puts straight into
 * a pod (bpf_redirect_peer: Calico's eBPF dataplane, Cilium's BPF host
 * routing, netkit), which skip that hook too. */
#ifndef AIQOS_AGENT_PODSIDE_H
#define AIQOS_AGENT_PODSIDE_H

#include <stdbool.h>

struct agent;
struct error;

/* want > 0: the hooks on every attached pod's host-side interface (a
 * clsact made where there is none); 0: none anywhere (what an earlier run
 * left too); < 0 (not known yet: a restart before the reach is measured):
 * as they are. Returns how many interfaces changed. */
int podside_sync(struct agent *ag, int want, struct error *err);
/* Our filters off every interface of the netns (and the clsacts we made
 * there): before the ifb goes, and at --cleanup. */
void podside_release_all(struct agent *ag);

#endif
