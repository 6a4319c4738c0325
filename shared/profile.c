/* profile.c — the built-in tuning profiles (docs/design.md §2), the operator's
 * "profiles" overrides from the agent/plugin config (strictly validated,
 * applied atomically) and the choice of a profile for a workload. Pure. */
#include <math.h>

#include <cjson/cJSON.h>

#include "json.h"
#include "k8s.h"
#include "profile.h"

#define MiB (1024u * 1024u)

static const struct profile builtin[] = {
        {
                .name = "inference",
                .class = CLASS_INFERENCE,
                .n_cc = 2,
                .cc = {"bbr", "cubic"},
                .tcp_ecn = 1,
                .notsent_lowat = 16384,
                .dscp = 46, /* EF */
                .target_us = 1000,
                .interval_us = 10000,
                .limit_pkts = 1024,
                .queue_ms = 2,
                .pod_qdisc = true,
        },
        {
                .name = "inference-strict",
                .class = CLASS_INFERENCE,
                .n_cc = 2,
                .cc = {"bbr", "cubic"},
                .tcp_ecn = 1,
                .notsent_lowat = 8192,
                .dscp = 46,
                .target_us = 500,
                .interval_us = 5000,
                .limit_pkts = 256,
                .queue_ms = 1,
                .pod_qdisc = true,
        },
        {
                /* No tcp_rmem/tcp_wmem raise: the kernel's autotuning maxima
                 * (6 MiB / 4 MiB by default) cover a flow's BDP inside a data centre
                 * (64 MiB: no gain at line rate, docs/benchmarks.md P6). rmemMax/
                 * wmemMax set them. bbr only where the pod got fq (apply.c,
                 * cc_needs_fq). */
                .name = "training",
                .class = CLASS_TRAINING,
                .n_cc = 2,
                .cc = {"bbr", "cubic"},
                .tcp_ecn = 1,
                .dscp = 10,          /* AF11 */
                .limit_pkts = 10000, /* fq's default; target/interval: kernel defaults */
                .queue_ms = 20,
                .pod_qdisc = true,
        },
        {
                /* Only for fabrics that mark ECN end to end (RFC 8257): never a
                 * default, a pod must name it. */
                .name = "training-dctcp",
                .class = CLASS_TRAINING,
                .n_cc = 2,
                .cc = {"dctcp", "cubic"},
                .tcp_ecn = 1,
                .dscp = 10,
                .limit_pkts = 10000,
                .ce_threshold_us = 1000,
                .queue_ms = 20,
                .pod_qdisc = true,
        },
        {
                /* Untouched per pod; only the leaf under a bandwidth shaper uses
                 * it (fq_codel kernel defaults, or a 5 ms FIFO). */
                .name = "default",
                .class = CLASS_DEFAULT,
                .tcp_ecn = -1,
                .dscp = -1,
                .queue_ms = 5,
        },
};

/* The built-in profile each class falls back to. */
static const struct profile *builtin_for_class(enum workload_class c)
{
	const char *name = workload_class_name(c);

	for (size_t i = 0; name && i < ARRAY_SIZE(builtin); i++)
		if (streq(builtin[i].name, name))
			return &builtin[i];
	return &builtin[ARRAY_SIZE(builtin) - 1]; /* "default" */
}

void profile_set_builtin(struct profile_set *ret)
{
	memset(ret, 0, sizeof(*ret));
	for (size_t i = 0; i < ARRAY_SIZE(builtin); i++)
		ret->p[ret->n++] = builtin[i];
}

const struct profile *profile_find(const struct profile_set *set, const char *name)
{
	if (!set || !name)
		return NULL;
	for (unsigned i = 0; i < set->n && i < PROFILES_MAX; i++)
		if (streq(set->p[i].name, name))
			return &set->p[i];
	return NULL;
}

const struct profile *profile_resolve(const struct profile_set *set, const struct workload *w, char *ret_warn,
                                      size_t warn_size)
{
	enum workload_class c = w && w->class >= 0 && w->class < _CLASS_MAX ? w->class : CLASS_DEFAULT;
	const char *class_name = workload_class_name(c);
	const struct profile *p;

	if (ret_warn && warn_size)
		ret_warn[0] = '\0';
	if (w && w->profile[0]) {
		p = profile_find(set, w->profile);
		if (p && p->class == c)
			return p;
		if (ret_warn && warn_size) {
			if (!p)
				snprintf(ret_warn, warn_size, "profile \"%s\" not found; using \"%s\"", w->profile,
				         class_name);
			else
				snprintf(ret_warn, warn_size, "profile \"%s\" is for class %s, not %s; using \"%s\"",
				         w->profile, workload_class_name(p->class), class_name, class_name);
		}
	}
	p = profile_find(set, class_name);
	if (p && p->class == c)
		return p;
	return builtin_for_class(c);
}

/* ---- merging the operator's "profiles" object ---- */

static bool is_cc_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= PROFILE_CC_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return true;
}

/* Printable and bounded rendering of a key or name taken from the config. */
static const char *clip(const char *s, char *buf, size_t size)
{
	size_t o = 0;

	for (; *s && o + 4 < size; s++)
		buf[o++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
	if (*s && o + 4 >= size) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o] = '\0';
	return buf;
}
#define CLIP_BUF 72

enum int_field_unset { UNSET_NONE, UNSET_ZERO, UNSET_MINUS_ONE };

/* Integer fields: JSON name, offset in struct profile, signedness, range,
 * and the value meaning "leave it alone" (accepted outside the range and
 * for JSON null). */
struct int_field {
	const char *key;
	size_t offset;
	long long min, max;
	const char *unset_note;
	enum int_field_unset unset;
	bool is_signed;
};

static const struct int_field int_fields[] = {
        {"tcpEcn", offsetof(struct profile, tcp_ecn), 0, 2, "", UNSET_MINUS_ONE, true},
        {"notsentLowat", offsetof(struct profile, notsent_lowat), 1, 1LL << 30, " (0 = unchanged)", UNSET_ZERO, false},
        /* from 32 KiB: the download tree's training receive window (node.h NODE_DOWN_RCV_WINDOW_MIN) */
        {"rmemMax", offsetof(struct profile, rmem_max), 32768, 2147483647, " (0 = unchanged)", UNSET_ZERO, false},
        {"wmemMax", offsetof(struct profile, wmem_max), 16384, 2147483647, " (0 = unchanged)", UNSET_ZERO, false},
        {"dscp", offsetof(struct profile, dscp), 0, 63, "", UNSET_MINUS_ONE, true},
        {"targetUs", offsetof(struct profile, target_us), 1, 10000000, " (0 = kernel default)", UNSET_ZERO, false},
        {"intervalUs", offsetof(struct profile, interval_us), 1, 100000000, " (0 = kernel default)", UNSET_ZERO, false},
        {"limitPkts", offsetof(struct profile, limit_pkts), 1, 1000000, " (0 = kernel default)", UNSET_ZERO, false},
        {"ceThresholdUs", offsetof(struct profile, ce_threshold_us), 1, 10000000, " (0 = off)", UNSET_ZERO, false},
        {"queueMs", offsetof(struct profile, queue_ms), 1, 1000, "", UNSET_NONE, false},
};

static void format_number(double d, char *buf, size_t size)
{
	if (d == floor(d) && fabs(d) < 1e18)
		snprintf(buf, size, "%.0f", d);
	else
		snprintf(buf, size, "%g", d);
}

static int merge_int(struct profile *p, const struct int_field *f, const cJSON *v, const char *path, struct error *err)
{
	long long x;
	char num[64];

	if (cJSON_IsNull(v) && f->unset != UNSET_NONE) {
		x = f->unset == UNSET_ZERO ? 0 : -1;
	} else {
		double d;

		if (!cJSON_IsNumber(v))
			return error_set(err, EINVAL, "%s: expected an integer, got %s", path, json_type_name(v));
		d = v->valuedouble;
		format_number(d, num, sizeof(num));
		if (!isfinite(d) || d != floor(d))
			return error_set(err, EINVAL, "%s: %s is not an integer", path, num);
		if ((f->unset == UNSET_ZERO && d == 0) || (f->unset == UNSET_MINUS_ONE && d == -1)) {
			x = (long long)d;
		} else if (d < (double)f->min || d > (double)f->max) {
			return error_set(err, ERANGE, "%s: %s is out of range %lld..%lld%s", path, num, f->min, f->max,
			                 f->unset_note);
		} else {
			x = (long long)d;
		}
	}
	if (f->is_signed)
		*(int *)((char *)p + f->offset) = (int)x;
	else
		*(uint32_t *)((char *)p + f->offset) = (uint32_t)x;
	return 0;
}

static int merge_cc(struct profile *p, const cJSON *v, const char *path, struct error *err)
{
	char cc[PROFILE_CC_MAX][PROFILE_CC_NAME_MAX] = {{0}};
	unsigned n = 0;
	const cJSON *e;

	if (cJSON_IsNull(v)) {
		p->n_cc = 0;
		return 0;
	}
	if (!cJSON_IsArray(v))
		return error_set(err, EINVAL, "%s: expected an array of names, got %s", path, json_type_name(v));
	cJSON_ArrayForEach(e, v)
	{
		char b[CLIP_BUF];

		if (n >= PROFILE_CC_MAX)
			return error_set(err, E2BIG, "%s: at most %d names", path, PROFILE_CC_MAX);
		if (!cJSON_IsString(e) || !e->valuestring)
			return error_set(err, EINVAL, "%s[%u]: expected a string, got %s", path, n, json_type_name(e));
		if (!is_cc_name(e->valuestring))
			return error_set(
			        err, EINVAL,
			        "%s[%u]: invalid name \"%s\" (lowercase letters, digits and '_', 1..%d characters)",
			        path, n, clip(e->valuestring, b, sizeof(b)), PROFILE_CC_NAME_MAX - 1);
		for (unsigned i = 0; i < n; i++)
			if (streq(cc[i], e->valuestring))
				return error_set(err, EINVAL, "%s[%u]: \"%s\" is listed twice", path, n,
				                 e->valuestring);
		str_copy(cc[n++], PROFILE_CC_NAME_MAX, e->valuestring);
	}
	p->n_cc = n;
	memcpy(p->cc, cc, sizeof(cc));
	return 0;
}

static int merge_one(struct profile_set *set, const char *name, const cJSON *obj, struct error *err)
{
	char path[ERROR_MSG_MAX / 4];
	char kpath[ERROR_MSG_MAX / 2];
	char b[CLIP_BUF];
	struct profile *p = NULL;
	const cJSON *cls, *v;
	int r;

	snprintf(path, sizeof(path), "profiles.%s", name);
	if (!cJSON_IsObject(obj))
		return error_set(err, EINVAL, "%s: expected an object, got %s", path, json_type_name(obj));

	/* Duplicate keys: cJSON keeps both; refuse rather than guess. */
	cJSON_ArrayForEach(v, obj)
	{
		for (const cJSON *u = obj->child; u && u != v; u = u->next)
			if (v->string && u->string && streq(u->string, v->string))
				return error_set(err, EINVAL, "%s: duplicate key \"%s\"", path,
				                 clip(v->string, b, sizeof(b)));
	}

	cls = cJSON_GetObjectItemCaseSensitive(obj, "class");
	if (cls) {
		enum workload_class c =
		        cJSON_IsString(cls) ? workload_class_from_name(cls->valuestring) : _CLASS_INVALID;
		if (c == _CLASS_INVALID) {
			if (cJSON_IsString(cls))
				return error_set(
				        err, EINVAL,
				        "%s.class: invalid value \"%s\" (accepted: inference, training, default)", path,
				        clip(cls->valuestring, b, sizeof(b)));
			return error_set(err, EINVAL,
			                 "%s.class: expected a string (inference, training, default), got %s", path,
			                 json_type_name(cls));
		}
		for (unsigned i = 0; i < set->n; i++)
			if (streq(set->p[i].name, name))
				p = &set->p[i];
		if (p && p->class != c)
			return error_set(err, EINVAL,
			                 "%s.class: cannot change the class of an existing profile (it is %s)", path,
			                 workload_class_name(p->class));
		if (!p) {
			if (set->n >= PROFILES_MAX)
				return error_set(err, E2BIG, "%s: too many profiles (at most %d)", path, PROFILES_MAX);
			p = &set->p[set->n++];
			*p = *builtin_for_class(c);
			str_copy(p->name, sizeof(p->name), name);
		}
	} else {
		for (unsigned i = 0; i < set->n; i++)
			if (streq(set->p[i].name, name))
				p = &set->p[i];
		if (!p)
			return error_set(err, EINVAL,
			                 "%s: a new profile needs \"class\" (inference, training or default)", path);
	}

	cJSON_ArrayForEach(v, obj)
	{
		const char *key = v->string ? v->string : "";
		bool known = false;

		snprintf(kpath, sizeof(kpath), "%s.%s", path, clip(key, b, sizeof(b)));
		if (streq(key, "class")) {
			continue;
		} else if (streq(key, "congestionControl")) {
			r = merge_cc(p, v, kpath, err);
			if (r < 0)
				return r;
			continue;
		} else if (streq(key, "podQdisc")) {
			if (!cJSON_IsBool(v))
				return error_set(err, EINVAL, "%s: expected true or false, got %s", kpath,
				                 json_type_name(v));
			p->pod_qdisc = cJSON_IsTrue(v);
			continue;
		}
		for (size_t i = 0; i < ARRAY_SIZE(int_fields); i++) {
			if (!streq(key, int_fields[i].key))
				continue;
			r = merge_int(p, &int_fields[i], v, kpath, err);
			if (r < 0)
				return r;
			known = true;
			break;
		}
		if (!known)
			return error_set(err, EINVAL,
			                 "%s: unknown key \"%s\" (accepted: class, congestionControl, tcpEcn, "
			                 "notsentLowat, rmemMax, wmemMax, dscp, targetUs, intervalUs, limitPkts, "
			                 "ceThresholdUs, queueMs, podQdisc)",
			                 path, clip(key, b, sizeof(b)));
	}

	/* Consistency of the merged result. */
	if (p->target_us && p->interval_us && p->interval_us < p->target_us)
		return error_set(err, EINVAL, "%s: intervalUs %u is below targetUs %u", path, p->interval_us,
		                 p->target_us);
	return 0;
}

int profile_set_merge_json(struct profile_set *set, const struct cJSON *profiles, struct error *err)
{
	struct profile_set work; /* ~6 KiB: merged here, copied back only on success */
	const cJSON *v;
	char b[CLIP_BUF];
	int r;

	if (!profiles || cJSON_IsNull(profiles))
		return 0;
	if (!cJSON_IsObject(profiles))
		return error_set(err, EINVAL, "profiles: expected an object, got %s", json_type_name(profiles));
	work = *set;

	cJSON_ArrayForEach(v, profiles)
	{
		const char *name = v->string ? v->string : "";

		if (!k8s_dns_label_valid(name))
			return error_set(err, EINVAL,
			                 "profiles: invalid profile name \"%s\" (lowercase letters, digits and '-', "
			                 "at most 63 characters)",
			                 clip(name, b, sizeof(b)));
		for (const cJSON *u = profiles->child; u && u != v; u = u->next)
			if (u->string && streq(u->string, name))
				return error_set(err, EINVAL, "profiles: duplicate profile \"%s\"", name);
		r = merge_one(&work, name, v, err);
		if (r < 0)
			return r;
	}
	*set = work;
	return 0;
}

/* ---- one profile as JSON (attachment records) ---- */

cJSON *profile_to_json(const struct profile *p)
{
	_cleanup_json_ cJSON *o = cJSON_CreateObject();
	cJSON *cc;

	if (!o || !p)
		return NULL;
	if (!cJSON_AddStringToObject(o, "class", workload_class_name(p->class) ?: "default"))
		return NULL;
	cc = cJSON_AddArrayToObject(o, "congestionControl");
	if (!cc)
		return NULL;
	for (unsigned i = 0; i < p->n_cc && i < PROFILE_CC_MAX; i++)
		if (!cJSON_AddItemToArray(cc, cJSON_CreateString(p->cc[i])))
			return NULL;
	for (size_t i = 0; i < ARRAY_SIZE(int_fields); i++) {
		const struct int_field *f = &int_fields[i];
		double v = f->is_signed ? (double)*(const int *)((const char *)p + f->offset)
		                        : (double)*(const uint32_t *)((const char *)p + f->offset);

		if (!cJSON_AddNumberToObject(o, f->key, v))
			return NULL;
	}
	if (!cJSON_AddBoolToObject(o, "podQdisc", p->pod_qdisc))
		return NULL;
	return TAKE_PTR(o);
}

int profile_from_json(const char *name, const cJSON *obj, struct profile *ret, struct error *err)
{
	_cleanup_free_ struct profile_set *work = calloc(1, sizeof(*work));
	int r;

	if (!work)
		return error_set(err, ENOMEM, "out of memory");
	if (!name || !k8s_dns_label_valid(name))
		return error_set(err, EINVAL, "invalid profile name");
	if (!cJSON_IsObject(obj) || !cJSON_GetObjectItemCaseSensitive(obj, "class"))
		return error_set(err, EINVAL, "profiles.%s: expected an object with \"class\"", name);
	r = merge_one(work, name, obj, err);
	if (r < 0)
		return r;
	*ret = work->p[0];
	return 0;
}

bool profile_content_equal(const struct profile *a, const struct profile *b)
{
	if (a->class != b->class || a->n_cc != b->n_cc || a->pod_qdisc != b->pod_qdisc)
		return false;
	for (unsigned i = 0; i < a->n_cc && i < PROFILE_CC_MAX; i++)
		if (!streq(a->cc[i], b->cc[i]))
			return false;
	for (size_t i = 0; i < ARRAY_SIZE(int_fields); i++) {
		const struct int_field *f = &int_fields[i];

		if (f->is_signed
		            ? *(const int *)((const char *)a + f->offset) != *(const int *)((const char *)b + f->offset)
		            : *(const uint32_t *)((const char *)a + f->offset) !=
		                      *(const uint32_t *)((const char *)b + f->offset))
			return false;
	}
	return true;
}

static uint64_t fnv_mix(uint64_t h, const void *data, size_t n)
{
	const unsigned char *b = data;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

uint64_t profile_content_hash(const struct profile *p)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	int32_t cls = (int32_t)p->class;
	uint8_t pq = p->pod_qdisc;

	h = fnv_mix(h, &cls, sizeof(cls));
	for (unsigned i = 0; i < p->n_cc && i < PROFILE_CC_MAX; i++)
		h = fnv_mix(h, p->cc[i], strlen(p->cc[i]) + 1);
	h = fnv_mix(h, "|", 1);
	for (size_t i = 0; i < ARRAY_SIZE(int_fields); i++) {
		const struct int_field *f = &int_fields[i];
		int64_t v = f->is_signed ? (int64_t) * (const int *)((const char *)p + f->offset)
		                         : (int64_t) * (const uint32_t *)((const char *)p + f->offset);

		h = fnv_mix(h, &v, sizeof(v));
	}
	h = fnv_mix(h, &pq, sizeof(pq));
	return h ? h : 1;
}

unsigned profile_set_bound_rmem(struct profile_set *set, enum workload_class c, uint32_t bound, uint32_t unset_max)
{
	unsigned n = 0;

	for (unsigned i = 0; bound > 0 && i < set->n && i < PROFILES_MAX; i++) {
		struct profile *p = &set->p[i];
		uint32_t have = p->rmem_max ? p->rmem_max : unset_max;

		if (p->class != c || (have != 0 && have <= bound))
			continue;
		p->rmem_max = bound;
		n++;
	}
	return n;
}
