/* reach.h — do the uplink's received packets reach aiqos's download hook?
 * The download classifier (dcls.bpf.c, the first of aiqos's filters at the
 * uplink's ingress hook) counts every packet it sees; the device counts
 * every packet it received. Another tool's program that ends the hook
 * before it (a tcx program returning anything but TCX_NEXT: Cilium's
 * TC_ACT_OK; a redirect straight into a pod: Calico's eBPF dataplane,
 * Cilium's BPF host routing) keeps those packets from the classifier, the
 * gate and the redirect to the ifb: the download tree shapes only what
 * reached it. Sampled at each node pass, over intervals of at least
 * DOWN_REACH_INTERVAL_MS and DOWN_REACH_MIN_PACKETS received packets. */
#ifndef AIQOS_AGENT_REACH_H
#define AIQOS_AGENT_REACH_H

#include <stdbool.h>
#include <stdint.h>

struct agent;

#define DOWN_REACH_INTERVAL_MS  1000
#define DOWN_REACH_MIN_PACKETS  1000
#define DOWN_REACH_BYPASSED_PCT 50 /* fewer of the received packets reached it: bypassed */
/* fed at the pods' interfaces (podside.h), fewer of the received packets
 * reached the classifier there: a CNI puts them straight into the pods
 * (bpf_redirect_peer: Cilium's BPF host routing, netkit, Calico's eBPF
 * peer redirect). Low: the node's own traffic counts in what it received. */
#define DOWN_REACH_PODS_PCT 10

struct down_reach {
	int64_t at_ms;      /* the interval's start (0 = no sample) */
	uint64_t seen, rx;  /* the counts then */
	bool known;         /* an interval with enough packets was measured */
	uint64_t last_seen; /* that interval: packets the classifier saw */
	uint64_t last_rx;   /* packets the uplink received */
	bool bypassed;      /* under DOWN_REACH_BYPASSED_PCT of them reached it */
	uint64_t pods_seen; /* the pods' classifier's count at the interval's start */
	uint64_t last_pods; /* that interval: packets it saw */
	bool pods_bypassed; /* fed at the pods, under DOWN_REACH_PODS_PCT reached them */
};

/* Sample (ag->down_seen_map_fd, the uplink's rx counter) at now_ms; no
 * classifier: forgotten. Returns 1 when the verdict turned to bypassed, -1
 * when it turned back, else 0. */
int down_reach_sample(struct agent *ag, int64_t now_ms);
/* "N of M packets received reached it" for status and the Event. */
void down_reach_describe(const struct down_reach *r, char *buf, unsigned size);

#endif
