/* fuzz_event.c — Kubernetes objects as the API server returns them: one
 * watch event ({"type","object"}) and a PodList page, decoded as the agent
 * does (the same input is tried as both). Properties: no crash or leak;
 * a decoded pod has its identity, bounded warnings and annotations that the
 * workload parser accepts; a refusal says why. */
#include "../../agent/kube/decode.h"
#include "fuzz.h"
#include "workload.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	return 0;
}

static void check_pod(const struct kube_pod *p)
{
	char ip[INET6_ADDRSTRLEN + 8];
	struct workload w;

	FUZZ_ASSERT(p->namespace_[0] && p->name[0] && p->uid[0] && p->resource_version[0],
	            "decoded pod without identity");
	FUZZ_ASSERT(p->phase >= 0 && p->phase < _KUBE_POD_PHASE_MAX, "phase %d", p->phase);
	FUZZ_ASSERT(p->n_ips <= KUBE_POD_IPS_MAX, "%u ips", p->n_ips);
	FUZZ_ASSERT(p->gpus <= KUBE_POD_GPU_MAX, "%u gpus", p->gpus);
	for (unsigned i = 0; i < p->n_ips; i++) {
		FUZZ_ASSERT(p->ips[i].family == AF_INET || p->ips[i].family == AF_INET6, "ip family %d",
		            p->ips[i].family);
		FUZZ_ASSERT(kube_ip_format(&p->ips[i], ip, sizeof(ip))[0], "ip %u formats empty", i);
	}
	for (unsigned i = 0; i < p->n_warn && i < KUBE_POD_WARN_MAX; i++)
		FUZZ_ASSERT(memchr(p->warn[i], '\0', sizeof(p->warn[i])), "warning %u unterminated", i);
	FUZZ_ASSERT(!p->annotations || cJSON_IsObject(p->annotations), "annotations not an object");
	FUZZ_ASSERT(workload_from_annotations(p->annotations, &w, NULL) == 0, "pod annotations refused");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kube_event ev;
	struct kube_pod_list list;
	struct error err = {0};

	if (size > 1024 * 1024)
		return 0;

	if (kube_event_decode_json((const char *)data, size, &ev, &err) == 0) {
		FUZZ_ASSERT(ev.type >= 0 && ev.type < _KUBE_EVENT_MAX, "event type %d", ev.type);
		if (ev.type == KUBE_EVENT_ADDED || ev.type == KUBE_EVENT_MODIFIED || ev.type == KUBE_EVENT_DELETED) {
			struct kube_pod moved = {0};
			check_pod(&ev.pod);
			/* the pod cache takes pods over with kube_pod_move */
			kube_pod_move(&moved, &ev.pod);
			check_pod(&moved);
			kube_pod_done(&moved);
		}
		kube_event_done(&ev);
	} else {
		FUZZ_ASSERT(err.msg[0], "event refused without a message");
	}

	error_clear(&err);
	if (kube_pod_list_decode_json((const char *)data, size, &list, &err) == 0) {
		FUZZ_ASSERT(list.n <= KUBE_POD_LIST_ITEMS_MAX, "%zu items", list.n);
		for (size_t i = 0; i < list.n; i++)
			check_pod(&list.items[i]);
		kube_pod_list_done(&list);
	} else {
		FUZZ_ASSERT(err.msg[0], "list refused without a message");
	}
	return 0;
}
