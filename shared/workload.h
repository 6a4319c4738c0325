/* workload.h — workload classes and the pod annotations that select them
 * (ai.workload, ai.workload/profile, ai.workload/bulk,
 * kubernetes.io/{ingress,egress}-bandwidth).
 * Pure parsing with strict validation; bad values never fail a pod, they fall
 * back to class default and are reported as warnings. */
#ifndef AIQOS_WORKLOAD_H
#define AIQOS_WORKLOAD_H

#include <stdbool.h>

#include "error.h"

struct cJSON;

#define ANNOT_WORKLOAD   "ai.workload"
#define ANNOT_PROFILE    "ai.workload/profile"
#define ANNOT_EGRESS_BW  "kubernetes.io/egress-bandwidth"
#define ANNOT_INGRESS_BW "kubernetes.io/ingress-bandwidth"
/* "true": the pod's flows skip the interactive band of their class (a
 * model loader, a KV-cache transfer pod: bulk by nature; node.h BANDS) */
#define ANNOT_BULK "ai.workload/bulk"

enum workload_class {
	CLASS_DEFAULT,
	CLASS_INFERENCE,
	CLASS_TRAINING,
	_CLASS_MAX,
	_CLASS_INVALID = -1,
};

#define PROFILE_NAME_MAX  64
#define WORKLOAD_WARN_MAX 4
#define WORKLOAD_WARN_LEN 256

/* Bandwidth limits accepted: 1 kbit/s .. 1 Tbit/s (the reference plugin's
 * bounds are similar; anything outside is a typo or an attack). */
#define BW_MIN_BPS 1000ULL
#define BW_MAX_BPS 1000000000000ULL

struct workload {
	enum workload_class class;
	char profile[PROFILE_NAME_MAX]; /* "" = the class's default profile */
	uint64_t egress_bps;            /* 0 = unlimited */
	uint64_t ingress_bps;           /* 0 = unlimited */
	bool bulk;                      /* ai.workload/bulk: "true" */
	unsigned n_warn;
	char warn[WORKLOAD_WARN_MAX][WORKLOAD_WARN_LEN]; /* e.g. bad ai.workload value */
};

const char *workload_class_name(enum workload_class c);
enum workload_class workload_class_from_name(const char *s); /* _CLASS_INVALID if unknown */

/* Parse a Kubernetes quantity ("10M", "1G", "500Mi", "1e9", "100k") as bits
 * per second. Strict: no spaces, no negative values, no fractions of a bit,
 * bounded. Returns 0 or a negative errno with err naming the value. */
int quantity_parse_bps(const char *s, uint64_t *ret_bps, struct error *err);

/* Fill w from a JSON object of annotations (string values; NULL = none).
 * Unknown/invalid ai.workload -> class default + warning; invalid bandwidth
 * quantity -> that limit ignored + warning. Never fails for bad values;
 * returns negative errno only for non-object input. */
int workload_from_annotations(const struct cJSON *annotations, struct workload *ret, struct error *err);

/* runtimeConfig.bandwidth {"ingressRate": bps, "egressRate": bps, ...} as the
 * runtime passes it (bits/s, integers). Overrides annotation limits when set. */
int workload_apply_runtime_bandwidth(const struct cJSON *bandwidth, struct workload *w, struct error *err);

void workload_add_warning(struct workload *w, const char *fmt, ...) _printf_(2, 3);

#endif
