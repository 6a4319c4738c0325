/* reach.c — see reach.h. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "bpf_cls.h"
#include "nl.h"
#include "node/reach.h"

int down_reach_sample(struct agent *ag, int64_t now_ms)
{
	struct down_reach *r = &ag->down_reach;
	struct error e = {0};
	struct link_info li;
	uint64_t seen = 0, pods = 0, d_seen, d_rx;
	bool was = r->known && r->bypassed;

	if (ag->down_seen_map_fd < 0 || bpf_dcls_seen(ag->down_seen_map_fd, &seen, &e) < 0 ||
	    nl_link_get_stats(ag->sk, ag->up.ifindex, &li, NULL) < 0) {
		error_clear(&e);
		memset(r, 0, sizeof(*r));
		return was ? -1 : 0;
	}
	if (ag->podside_seen_fd < 0 || bpf_dcls_seen(ag->podside_seen_fd, &pods, NULL) < 0)
		pods = 0;
	if (!r->at_ms || seen < r->seen || li.rx_packets < r->rx) {
		/* the first sample, or a new program or device: start over */
		r->at_ms = now_ms;
		r->seen = seen;
		r->rx = li.rx_packets;
		r->pods_seen = pods;
		return 0;
	}
	if (pods < r->pods_seen)
		r->pods_seen = 0; /* the pods' classifier loaded again since */
	d_seen = seen - r->seen;
	d_rx = li.rx_packets - r->rx;
	if (now_ms - r->at_ms < DOWN_REACH_INTERVAL_MS || d_rx < DOWN_REACH_MIN_PACKETS)
		return 0; /* too short, or too little traffic to say */
	r->known = true;
	r->last_seen = d_seen;
	r->last_rx = d_rx;
	r->bypassed = d_seen * 100 < d_rx * DOWN_REACH_BYPASSED_PCT;
	r->last_pods = pods - r->pods_seen;
	r->pods_bypassed = ag->podside_on && r->last_pods * 100 < d_rx * DOWN_REACH_PODS_PCT;
	r->at_ms = now_ms;
	r->seen = seen;
	r->rx = li.rx_packets;
	r->pods_seen = pods;
	return r->bypassed == was ? 0 : r->bypassed ? 1 : -1;
}

void down_reach_describe(const struct down_reach *r, char *buf, unsigned size)
{
	if (!r->known)
		snprintf(buf, size, "not measured yet");
	else
		snprintf(buf, size,
		         "%" PRIu64 " of the %" PRIu64 " packets the uplink received reached it (%" PRIu64
		         " reached the pods' interfaces)",
		         r->last_seen, r->last_rx, r->last_pods);
}
