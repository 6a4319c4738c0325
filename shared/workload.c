/* workload.c — workload classes, the Kubernetes quantity parser for the
 * bandwidth annotations, and the annotation/runtimeConfig readers that turn
 * pod metadata into a struct workload. Pure: no I/O; bad values become
 * warnings (annotations) or errors naming the field (runtimeConfig). */
#include <math.h>
#include <stdarg.h>

#include <cjson/cJSON.h>

#include "k8s.h"
#include "workload.h"

static const char *const class_names[_CLASS_MAX] = {
        [CLASS_DEFAULT] = "default",
        [CLASS_INFERENCE] = "inference",
        [CLASS_TRAINING] = "training",
};

DEFINE_STRING_TABLE_NAME(workload_class_name, enum workload_class, class_names)
DEFINE_STRING_TABLE_FROM_NAME(workload_class_from_name, enum workload_class, class_names, _CLASS_INVALID)

int quantity_parse_bps(const char *s, uint64_t *ret_bps, struct error *err)
{
	struct k8s_quantity kq;
	char q[QUOTE_BUF];
	uint64_t v;
	int r;

	r = k8s_quantity_parse(s, &kq, err);
	if (r < 0)
		return r;
	quote_value(s, q, sizeof(q));
	if (kq.negative)
		return error_set(err, EINVAL, "invalid quantity %s: negative values are not allowed", q);
	r = k8s_quantity_to_u64(&kq, BW_MAX_BPS, &v);
	if (r == -EDOM)
		return error_set(err, ERANGE, "bandwidth %s is not a whole number of bit/s", q);
	if (r == -ERANGE)
		return error_set(err, ERANGE, "bandwidth %s is above the maximum %llu bit/s", q,
		                 (unsigned long long)BW_MAX_BPS);
	if (v < BW_MIN_BPS)
		return error_set(err, ERANGE, "bandwidth %s is below the minimum %llu bit/s", q,
		                 (unsigned long long)BW_MIN_BPS);
	*ret_bps = v;
	return 0;
}

void workload_add_warning(struct workload *w, const char *fmt, ...)
{
	va_list ap;

	/* Bounded: further warnings are dropped (the first ones explain the
	 * pod; an attacker cannot grow them). */
	if (!w || w->n_warn >= WORKLOAD_WARN_MAX)
		return;
	va_start(ap, fmt);
	vsnprintf(w->warn[w->n_warn], WORKLOAD_WARN_LEN, fmt, ap);
	va_end(ap);
	w->n_warn++;
}

static void parse_bandwidth_annotation(const cJSON *a, const char *key, uint64_t *ret_bps, struct workload *w)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, key);
	struct error e = {0};
	uint64_t bps = 0;

	if (!v)
		return;
	if (!cJSON_IsString(v) || !v->valuestring) {
		workload_add_warning(w, "%s: value is not a string; limit ignored", key);
		return;
	}
	if (quantity_parse_bps(v->valuestring, &bps, &e) < 0) {
		workload_add_warning(w, "%s: %s; limit ignored", key, e.msg);
		return;
	}
	*ret_bps = bps;
}

int workload_from_annotations(const struct cJSON *annotations, struct workload *ret, struct error *err)
{
	const cJSON *v;
	struct workload w = {.class = CLASS_DEFAULT};
	char q[QUOTE_BUF];

	if (annotations && !cJSON_IsObject(annotations))
		return error_set(err, EINVAL, "annotations: expected a JSON object");
	if (!annotations) {
		*ret = w;
		return 0;
	}

	v = cJSON_GetObjectItemCaseSensitive(annotations, ANNOT_WORKLOAD);
	if (v) {
		enum workload_class c = _CLASS_INVALID;

		if (!cJSON_IsString(v) || !v->valuestring)
			workload_add_warning(
			        &w, "%s: value is not a string (accepted: inference, training); using class default",
			        ANNOT_WORKLOAD);
		else if ((c = workload_class_from_name(v->valuestring)) == CLASS_INFERENCE || c == CLASS_TRAINING)
			w.class = c;
		else
			/* "default" is not a value a pod may ask for: absence is. */
			workload_add_warning(
			        &w, "%s: invalid value %s (accepted: inference, training); using class default",
			        ANNOT_WORKLOAD, quote_value(v->valuestring, q, sizeof(q)));
	}

	v = cJSON_GetObjectItemCaseSensitive(annotations, ANNOT_PROFILE);
	if (v) {
		if (!cJSON_IsString(v) || !v->valuestring)
			workload_add_warning(&w, "%s: value is not a string; ignored", ANNOT_PROFILE);
		else if (!k8s_dns_label_valid(v->valuestring))
			workload_add_warning(&w,
			                     "%s: invalid profile name %s (lowercase letters, digits and '-', "
			                     "at most 63 characters); ignored",
			                     ANNOT_PROFILE, quote_value(v->valuestring, q, sizeof(q)));
		else
			str_copy(w.profile, sizeof(w.profile), v->valuestring);
	}

	v = cJSON_GetObjectItemCaseSensitive(annotations, ANNOT_BULK);
	if (v) {
		if (cJSON_IsString(v) && v->valuestring &&
		    (streq(v->valuestring, "true") || streq(v->valuestring, "false")))
			w.bulk = streq(v->valuestring, "true");
		else
			workload_add_warning(
			        &w, "%s: invalid value %s (accepted: \"true\", \"false\"); ignored", ANNOT_BULK,
			        cJSON_IsString(v) && v->valuestring ? quote_value(v->valuestring, q, sizeof(q))
			                                            : "(not a string)");
	}

	parse_bandwidth_annotation(annotations, ANNOT_EGRESS_BW, &w.egress_bps, &w);
	parse_bandwidth_annotation(annotations, ANNOT_INGRESS_BW, &w.ingress_bps, &w);
	*ret = w;
	return 0;
}

/* A runtimeConfig number: absent, null or 0 means "not set" (*ret_set false);
 * otherwise a whole number in [min, max]. */
static int runtime_number(const cJSON *bw, const char *key, uint64_t min, uint64_t max, bool *ret_set, uint64_t *ret,
                          struct error *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(bw, key);
	char num[64];
	double d;

	*ret_set = false;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsNumber(v))
		return error_set(err, EINVAL, "runtimeConfig.bandwidth.%s: expected a number", key);
	d = v->valuedouble;
	if (d == floor(d) && fabs(d) < 1e18)
		snprintf(num, sizeof(num), "%.0f", d);
	else
		snprintf(num, sizeof(num), "%g", d);
	if (!isfinite(d) || d != floor(d))
		return error_set(err, EINVAL, "runtimeConfig.bandwidth.%s: %s is not a whole number", key, num);
	if (d < 0)
		return error_set(err, ERANGE, "runtimeConfig.bandwidth.%s: %s is negative", key, num);
	if (d == 0)
		return 0;
	if (d < (double)min)
		return error_set(err, ERANGE, "runtimeConfig.bandwidth.%s: %s is below the minimum %llu", key, num,
		                 (unsigned long long)min);
	if (d > (double)max)
		return error_set(err, ERANGE, "runtimeConfig.bandwidth.%s: %s is above the maximum %llu", key, num,
		                 (unsigned long long)max);
	*ret_set = true;
	*ret = (uint64_t)d;
	return 0;
}

/* Bursts are validated but not used: aiqos sizes the shaper's burst itself
 * (a few ms at the rate) instead of the runtime's 2^32-1 bits, which would
 * let a pod exceed its limit for seconds. 2^53 keeps them exact in a double. */
#define RUNTIME_BURST_MAX (1ULL << 53)

int workload_apply_runtime_bandwidth(const struct cJSON *bandwidth, struct workload *w, struct error *err)
{
	uint64_t in_bps = 0, eg_bps = 0, burst;
	bool in_set, eg_set, burst_set;
	int r;

	if (!bandwidth || cJSON_IsNull(bandwidth))
		return 0;
	if (!cJSON_IsObject(bandwidth))
		return error_set(err, EINVAL, "runtimeConfig.bandwidth: expected a JSON object");
	r = runtime_number(bandwidth, "ingressRate", BW_MIN_BPS, BW_MAX_BPS, &in_set, &in_bps, err);
	if (r < 0)
		return r;
	r = runtime_number(bandwidth, "egressRate", BW_MIN_BPS, BW_MAX_BPS, &eg_set, &eg_bps, err);
	if (r < 0)
		return r;
	r = runtime_number(bandwidth, "ingressBurst", 0, RUNTIME_BURST_MAX, &burst_set, &burst, err);
	if (r < 0)
		return r;
	r = runtime_number(bandwidth, "egressBurst", 0, RUNTIME_BURST_MAX, &burst_set, &burst, err);
	if (r < 0)
		return r;
	if (in_set)
		w->ingress_bps = in_bps;
	if (eg_set)
		w->egress_bps = eg_bps;
	return 0;
}
