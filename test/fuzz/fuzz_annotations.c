/* fuzz_annotations.c — what a pod's author controls: annotation values
 * (ai.workload, ai.workload/profile, kubernetes.io/{ingress,egress}-bandwidth)
 * and Kubernetes quantities. The input is tried as a JSON annotations object,
 * as runtimeConfig.bandwidth, and raw as every annotation value and as a
 * quantity. Properties: bad values never fail (they become warnings),
 * accepted limits are within [BW_MIN_BPS, BW_MAX_BPS], and the resolved
 * profile is of the pod's class or its fallback. */
#include "../../agent/config.h"
#include "../../agent/kube/decode.h"
#include "fuzz.h"
#include "profile.h"
#include "workload.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	return 0;
}

static void check_workload(const struct workload *w, const char *what)
{
	struct profile_set set;
	const struct profile *p;
	char warn[256];

	FUZZ_ASSERT(w->class >= 0 && w->class < _CLASS_MAX, "%s: class %d", what, w->class);
	FUZZ_ASSERT(w->egress_bps == 0 || (w->egress_bps >= BW_MIN_BPS && w->egress_bps <= BW_MAX_BPS),
	            "%s: egress %llu bit/s out of bounds", what, (unsigned long long)w->egress_bps);
	FUZZ_ASSERT(w->ingress_bps == 0 || (w->ingress_bps >= BW_MIN_BPS && w->ingress_bps <= BW_MAX_BPS),
	            "%s: ingress %llu bit/s out of bounds", what, (unsigned long long)w->ingress_bps);
	FUZZ_ASSERT(w->n_warn <= WORKLOAD_WARN_MAX, "%s: %u warnings", what, w->n_warn);
	FUZZ_ASSERT(memchr(w->profile, '\0', sizeof(w->profile)), "%s: profile unterminated", what);
	for (unsigned i = 0; i < w->n_warn; i++)
		FUZZ_ASSERT(memchr(w->warn[i], '\0', sizeof(w->warn[i])), "%s: warning %u unterminated", what, i);

	/* A pod cannot borrow another class's profile. */
	profile_set_builtin(&set);
	p = profile_resolve(&set, w, warn, sizeof(warn));
	FUZZ_ASSERT(p && p->class == w->class, "%s: class %s resolved to profile %s", what,
	            workload_class_name(w->class), p ? p->name : "(null)");
}

static void annotations_object(const uint8_t *data, size_t size)
{
	_cleanup_json_ cJSON *j = fuzz_json_parse(data, size);
	struct workload w;
	struct error err = {0};
	int r;

	if (!j)
		return;
	r = workload_from_annotations(j, &w, &err);
	if (cJSON_IsObject(j))
		FUZZ_ASSERT(r == 0, "an annotations object was refused: %s", err.msg);
	if (r == 0) {
		check_workload(&w, "annotations");
		/* The same JSON as runtimeConfig.bandwidth on top. */
		if (workload_apply_runtime_bandwidth(j, &w, NULL) == 0)
			check_workload(&w, "runtime bandwidth");
	}
}

static void raw_values(const char *s)
{
	static const char *const keys[] = {ANNOT_WORKLOAD, ANNOT_PROFILE, ANNOT_EGRESS_BW, ANNOT_INGRESS_BW};
	_cleanup_json_ cJSON *obj = cJSON_CreateObject();
	struct workload w;
	struct error err = {0};
	uint64_t v;
	int r;

	/* The quantity parsers on their own. */
	r = quantity_parse_bps(s, &v, &err);
	if (r == 0)
		FUZZ_ASSERT(v >= BW_MIN_BPS && v <= BW_MAX_BPS, "quantity \"%.80s\" = %llu bit/s", s,
		            (unsigned long long)v);
	else
		FUZZ_ASSERT(err.msg[0], "quantity refused without a message");
	error_clear(&err);
	if (kube_quantity_parse_count(s, 1024, &v, &err) == 0)
		FUZZ_ASSERT(v <= 1024, "count \"%.80s\" = %llu over its max", s, (unsigned long long)v);
	if (agent_rate_parse_bps(s, &v, NULL) == 0)
		FUZZ_ASSERT(v >= BW_MIN_BPS && v <= BW_MAX_BPS, "rate \"%.80s\" = %llu bit/s", s,
		            (unsigned long long)v);

	/* Every annotation at once with the raw value. */
	if (!obj)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
		if (!cJSON_AddStringToObject(obj, keys[i], s))
			return;
	error_clear(&err);
	r = workload_from_annotations(obj, &w, &err);
	FUZZ_ASSERT(r == 0, "annotations refused: %s", err.msg);
	check_workload(&w, "raw annotations");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *s = NULL;

	if (size > 65536)
		return 0;
	annotations_object(data, size);
	s = fuzz_strndup(data, size);
	if (s)
		raw_values(s);
	return 0;
}
