/* pod_want.c — what a pod asks of the node (pod_want.h). */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pod_want.h"
#include "tc/tc.h"
#include "util.h"

void pod_want_from(const struct workload *w, const struct profile *pr, struct pod_want *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->class = w->class;
	str_copy(ret->profile_requested, sizeof(ret->profile_requested), w->profile);
	ret->egress_bps = w->egress_bps;
	ret->ingress_bps = w->ingress_bps;
	str_copy(ret->profile, sizeof(ret->profile), pr->name);
	ret->profile_hash = profile_content_hash(pr);
	ret->ce_marking = pr->ce_threshold_us > 0;
	ret->bulk = w->bulk;
	if (w->n_warn > 0)
		str_copy(ret->invalid, sizeof(ret->invalid), w->warn[0]);
}

void pod_want_node_pod(const struct pod_want *want, const char *namespace_, const char *name, const char *uid,
                       uint32_t gpus, struct node_pod *np)
{
	memset(np, 0, sizeof(*np));
	str_copy(np->uid, sizeof(np->uid), uid);
	str_copy(np->namespace_, sizeof(np->namespace_), namespace_);
	str_copy(np->name, sizeof(np->name), name);
	np->class = want->class;
	str_copy(np->profile, sizeof(np->profile), want->profile);
	np->ce_marking = want->ce_marking;
	np->gpus = gpus;
	np->egress_bps = want->egress_bps;
	np->bulk = want->bulk;
}

unsigned pod_ips_from_kube(const struct kube_pod *kp, struct node_ip ret[NODE_POD_IPS_MAX])
{
	unsigned n = 0;

	for (unsigned i = 0; i < kp->n_ips && n < NODE_POD_IPS_MAX; i++) {
		struct node_ip *ip = &ret[n];

		memset(ip, 0, sizeof(*ip));
		ip->family = kp->ips[i].family;
		if (ip->family == AF_INET)
			memcpy(ip->addr, &kp->ips[i].addr.v4, 4);
		else if (ip->family == AF_INET6)
			memcpy(ip->addr, &kp->ips[i].addr.v6, 16);
		else
			continue;
		n++;
	}
	return n;
}

/* "inference-bulk 1:11 rate 24750kbit", "training's priority", "none" */
static void band_text(uint32_t priority, uint64_t rate_bps, char *buf, size_t size)
{
	char rate[32];

	if (!priority) {
		snprintf(buf, size, "none");
	} else if (rate_bps) {
		tc_rate_format(rate_bps, rate, sizeof(rate));
		snprintf(buf, size, "inference-bulk %x:%x rate %s", priority >> 16, priority & 0xffff, rate);
	} else {
		snprintf(buf, size, "training's priority %u", priority);
	}
}

int node_bands_json(const struct node_plan_info *info, struct cJSON *parent)
{
	char up[96], down[96], text[384];
	cJSON *o;

	if (!info || (!info->bulk_priority && !info->down.bulk_priority))
		return 0;
	band_text(info->bulk_priority, info->bulk_rate_bps, up, sizeof(up));
	band_text(info->down.bulk_priority, info->down.bulk_rate_bps, down, sizeof(down));
	snprintf(text, sizeof(text),
	         "inference flows beyond %u bytes in a message (restarted at each request and after %u ms idle) share "
	         "with training at weight %g; uplink: %s; download: %s",
	         info->bulk_threshold_bytes, info->bulk_idle_ms, info->bulk_weight, up, down);
	o = cJSON_AddObjectToObject(parent, "bands");
	if (!o || !cJSON_AddNumberToObject(o, "thresholdBytes", info->bulk_threshold_bytes) ||
	    !cJSON_AddNumberToObject(o, "idleMs", info->bulk_idle_ms) ||
	    !cJSON_AddNumberToObject(o, "weight", info->bulk_weight) || !cJSON_AddStringToObject(o, "uplink", up) ||
	    !cJSON_AddStringToObject(o, "download", down) || !cJSON_AddStringToObject(o, "text", text))
		return -ENOMEM;
	return 0;
}
