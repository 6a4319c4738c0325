/* pod_want.c — what a pod asks of the node (pod_want.h). */
#include <arpa/inet.h>
#include <string.h>

#include "pod_want.h"
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
