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

const char *workload_class_name(enum workload_class c)
{
	if (c < 0 || c >= _CLASS_MAX)
		return NULL;
	return class_names[c];
}

enum workload_class workload_class_from_name(const char *s)
{
	if (!s)
		return _CLASS_INVALID;
	for (int c = 0; c < _CLASS_MAX; c++)
		if (streq(s, class_names[c]))
			return (enum workload_class)c;
	return _CLASS_INVALID;
}

/* Quote a value from untrusted input for a message: printable ASCII kept,
 * '"' and '\\' escaped, anything else as \xNN, at most QUOTE_MAX characters
 * of output before "...". */
#define QUOTE_MAX 72
static const char *quote(const char *s, char *buf, size_t size)
{
	size_t o = 0;

	if (size < 8)
		return "";
	buf[o++] = '"';
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char tmp[8];
		size_t n;

		if (c == '"' || c == '\\')
			n = (size_t)snprintf(tmp, sizeof(tmp), "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			n = (size_t)snprintf(tmp, sizeof(tmp), "\\x%02x", c);
		else
			n = (size_t)snprintf(tmp, sizeof(tmp), "%c", c);
		if (o + n > QUOTE_MAX || o + n + 5 > size) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		memcpy(buf + o, tmp, n);
		o += n;
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}
#define QUOTE_BUF (QUOTE_MAX + 8)

/* Significant digits kept exactly (after dropping leading and trailing
 * zeros): 10^20 * 2^60 (Ei) still fits in 128 bits. Longer mantissas could
 * only name a whole number of bit/s through absurd spellings
 * ("0.000...931322574615478515625Ei") and are refused. */
#define QUANTITY_DIGITS_MAX 20
/* Exponents beyond this saturate: the value is then far out of range. */
#define QUANTITY_EXP_CLAMP 100000

typedef unsigned __int128 u128;

/* A suffix: decimal power of ten and binary power of two. Longest first
 * where one is a prefix of another ("Ei" before "E"). */
static const struct {
	const char *s;
	int pow10;
	int pow2;
} suffixes[] = {
        {"Ki", 0, 10}, {"Mi", 0, 20}, {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50}, {"Ei", 0, 60}, {"m", -3, 0},
        {"k", 3, 0},   {"M", 6, 0},   {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},
};

/* Parse a decimal exponent "[+-]digits" at s; returns chars consumed (0 if
 * none), saturating the value at +-QUANTITY_EXP_CLAMP. */
static size_t parse_exponent(const char *s, long *ret)
{
	size_t i = 0;
	bool neg = false;
	long v = 0;

	if (s[i] == '+' || s[i] == '-')
		neg = s[i++] == '-';
	if (s[i] < '0' || s[i] > '9')
		return 0;
	for (; s[i] >= '0' && s[i] <= '9'; i++)
		if (v < QUANTITY_EXP_CLAMP)
			v = v * 10 + (s[i] - '0');
	if (v > QUANTITY_EXP_CLAMP)
		v = QUANTITY_EXP_CLAMP;
	*ret = neg ? -v : v;
	return i;
}

int quantity_parse_bps(const char *s, uint64_t *ret_bps, struct error *err)
{
	char q[QUOTE_BUF];
	const char *p, *int_start, *frac_start = NULL;
	size_t int_len, frac_len = 0;
	u128 mant = 0;
	unsigned sig = 0;
	long exp10 = 0;
	int pow2 = 0;
	u128 val;

	if (!s)
		return error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL, "invalid quantity: missing value");
	quote(s, q, sizeof(q));
	if (!*s)
		return error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL, "invalid quantity \"\": empty value");
	for (p = s; *p; p++)
		if (*p == ' ' || (*p >= '\t' && *p <= '\r'))
			return error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL,
			                 "invalid quantity %s: whitespace is not allowed", q);

	p = s;
	if (*p == '-')
		return error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL,
		                 "invalid quantity %s: negative values are not allowed", q);
	if (*p == '+')
		p++;

	/* <digits> | <digits>. | <digits>.<digits> | .<digits> */
	int_start = p;
	while (*p >= '0' && *p <= '9')
		p++;
	int_len = (size_t)(p - int_start);
	if (*p == '.') {
		frac_start = ++p;
		while (*p >= '0' && *p <= '9')
			p++;
		frac_len = (size_t)(p - frac_start);
	}
	if (int_len == 0 && frac_len == 0)
		return error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL,
		                 "invalid quantity %s: expected a number (digits, optionally with a fraction)", q);

	/* Suffix: exactly one of the SI suffixes, an exponent, or nothing. */
	if (*p) {
		size_t used = 0;

		if ((*p == 'e' || *p == 'E') && (used = parse_exponent(p + 1, &exp10)) > 0) {
			used++;
		} else {
			for (size_t i = 0; i < ARRAY_SIZE(suffixes); i++) {
				size_t n = strlen(suffixes[i].s);
				if (strncmp(p, suffixes[i].s, n) == 0) {
					exp10 = suffixes[i].pow10;
					pow2 = suffixes[i].pow2;
					used = n;
					break;
				}
			}
		}
		if (p[used]) {
			char suf[QUOTE_BUF];
			return error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL, "invalid quantity %s: unknown suffix %s",
			                 q, quote(p + used, suf, sizeof(suf)));
		}
	}

	/* Mantissa digits as one integer, dropping leading zeros; every
	 * fraction digit lowers the decimal exponent. Trailing zeros are
	 * folded into the exponent so only significant digits count. */
	{
		const char *runs[2] = {int_start, frac_start};
		size_t lens[2] = {int_len, frac_len};
		unsigned pending_zeros = 0;

		for (int r = 0; r < 2; r++) {
			for (size_t i = 0; i < lens[r]; i++) {
				int d = runs[r][i] - '0';
				if (r == 1)
					exp10--;
				if (d == 0) {
					if (sig > 0)
						pending_zeros++;
					continue;
				}
				if (sig + pending_zeros + 1 > QUANTITY_DIGITS_MAX)
					return error_set(
					        err, CNI_ERR_INVALID_CONFIG, EINVAL,
					        "invalid quantity %s: too many significant digits (at most %d)", q,
					        QUANTITY_DIGITS_MAX);
				for (; pending_zeros > 0; pending_zeros--, sig++)
					mant *= 10;
				mant = mant * 10 + (unsigned)d;
				sig++;
			}
		}
		exp10 += pending_zeros;
	}

	if (mant == 0)
		return error_set(err, CNI_ERR_INVALID_CONFIG, ERANGE, "bandwidth %s is below the minimum %llu bit/s", q,
		                 (unsigned long long)BW_MIN_BPS);

	/* value = mant * 2^pow2 * 10^exp10; mant < 10^20 and 2^pow2 <= 2^60,
	 * so the product fits in 128 bits. */
	val = mant << pow2;
	if (exp10 >= 0) {
		for (long i = 0; i < exp10 && val <= BW_MAX_BPS; i++)
			val *= 10;
	} else {
		u128 div = 1;
		/* 10^38 < 2^128; a larger divisor leaves less than one bit/s. */
		if (-exp10 > 38)
			return error_set(err, CNI_ERR_INVALID_CONFIG, ERANGE,
			                 "bandwidth %s is not a whole number of bit/s", q);
		for (long i = 0; i < -exp10; i++)
			div *= 10;
		if (val % div != 0)
			return error_set(err, CNI_ERR_INVALID_CONFIG, ERANGE,
			                 "bandwidth %s is not a whole number of bit/s", q);
		val /= div;
	}
	if (val < BW_MIN_BPS)
		return error_set(err, CNI_ERR_INVALID_CONFIG, ERANGE, "bandwidth %s is below the minimum %llu bit/s", q,
		                 (unsigned long long)BW_MIN_BPS);
	if (val > BW_MAX_BPS)
		return error_set(err, CNI_ERR_INVALID_CONFIG, ERANGE, "bandwidth %s is above the maximum %llu bit/s", q,
		                 (unsigned long long)BW_MAX_BPS);
	*ret_bps = (uint64_t)val;
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
		return error_set(err, CNI_ERR_DECODE, EINVAL, "annotations: expected a JSON object");
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
			        ANNOT_WORKLOAD, quote(v->valuestring, q, sizeof(q)));
	}

	v = cJSON_GetObjectItemCaseSensitive(annotations, ANNOT_PROFILE);
	if (v) {
		if (!cJSON_IsString(v) || !v->valuestring)
			workload_add_warning(&w, "%s: value is not a string; ignored", ANNOT_PROFILE);
		else if (!k8s_dns_label_valid(v->valuestring))
			workload_add_warning(&w,
			                     "%s: invalid profile name %s (lowercase letters, digits and '-', "
			                     "at most 63 characters); ignored",
			                     ANNOT_PROFILE, quote(v->valuestring, q, sizeof(q)));
		else
			str_copy(w.profile, sizeof(w.profile), v->valuestring);
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
		return error_set(err, CNI_ERR_DECODE, EINVAL, "runtimeConfig.bandwidth.%s: expected a number", key);
	d = v->valuedouble;
	if (d == floor(d) && fabs(d) < 1e18)
		snprintf(num, sizeof(num), "%.0f", d);
	else
		snprintf(num, sizeof(num), "%g", d);
	if (!isfinite(d) || d != floor(d))
		return error_set(err, CNI_ERR_DECODE, EINVAL, "runtimeConfig.bandwidth.%s: %s is not a whole number",
		                 key, num);
	if (d < 0)
		return error_set(err, CNI_ERR_DECODE, ERANGE, "runtimeConfig.bandwidth.%s: %s is negative", key, num);
	if (d == 0)
		return 0;
	if (d < (double)min)
		return error_set(err, CNI_ERR_DECODE, ERANGE,
		                 "runtimeConfig.bandwidth.%s: %s is below the minimum %llu", key, num,
		                 (unsigned long long)min);
	if (d > (double)max)
		return error_set(err, CNI_ERR_DECODE, ERANGE,
		                 "runtimeConfig.bandwidth.%s: %s is above the maximum %llu", key, num,
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
		return error_set(err, CNI_ERR_DECODE, EINVAL, "runtimeConfig.bandwidth: expected a JSON object");
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
