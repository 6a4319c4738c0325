/* plan.h — the pods `aiqosctl plan` plans for (plan_pods.c reads them from a
 * file: the simple {"pods": [...]} form, a Pod or a PodList). */
#ifndef AIQOS_AGENT_CTL_PLAN_H
#define AIQOS_AGENT_CTL_PLAN_H

#include <arpa/inet.h>
#include <cjson/cJSON.h>

#include "kube/decode.h"
#include "node.h"
#include "pod_want.h"

struct ctl_pod {
	char namespace_[KUBE_NAMESPACE_MAX];
	char name[KUBE_NAME_MAX];
	char uid[KUBE_UID_MAX];
	const cJSON *annotations; /* borrowed from the document or the decoded list; NULL = none */
	unsigned n_ips;
	struct node_ip ips[NODE_POD_IPS_MAX];
	char ip_text[NODE_POD_IPS_MAX][INET6_ADDRSTRLEN];
	uint32_t gpus;
	const char *skip; /* why the pod is left out ("hostNetwork", "phase Succeeded"), NULL = planned */
};

struct ctl_pods {
	size_t n;
	struct ctl_pod *v;
	struct kube_pod_list list; /* when the file is a PodList: owns the annotations */
	struct kube_pod single;    /* when the file is one Pod */
	bool have_single;
};

void ctl_pods_done(struct ctl_pods *p);
/* Read and check the pods of path ('-' = stdin); *ret_doc owns what *ret
 * borrows. EXIT_OK, or the exit status after the error is printed. */
int pods_load(const char *path, cJSON **ret_doc, struct ctl_pods *ret);

#endif
