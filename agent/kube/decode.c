/* decode.c — decoding of watch events, Pods and PodLists from the API server
 * (see decode.h). The input is untrusted: types are checked, strings bounded
 * and validated, values quoted when they appear in messages. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdarg.h>

#include "kube/decode.h"
#include "k8s.h"
#include "workload.h"

static const char *const event_type_names[_KUBE_EVENT_MAX] = {
        [KUBE_EVENT_ADDED] = "ADDED",       [KUBE_EVENT_MODIFIED] = "MODIFIED", [KUBE_EVENT_DELETED] = "DELETED",
        [KUBE_EVENT_BOOKMARK] = "BOOKMARK", [KUBE_EVENT_ERROR] = "ERROR",       [KUBE_EVENT_EXPIRED] = "EXPIRED",
};

static const char *const phase_names[_KUBE_POD_PHASE_MAX] = {
        [KUBE_POD_PHASE_UNSET] = "",          [KUBE_POD_PHASE_PENDING] = "Pending",
        [KUBE_POD_PHASE_RUNNING] = "Running", [KUBE_POD_PHASE_SUCCEEDED] = "Succeeded",
        [KUBE_POD_PHASE_FAILED] = "Failed",   [KUBE_POD_PHASE_UNKNOWN] = "Unknown",
};

/* The annotations kept verbatim (workload.h). */
static const char *const kept_annotations[] = {ANNOT_WORKLOAD, ANNOT_PROFILE, ANNOT_INGRESS_BW, ANNOT_EGRESS_BW,
                                               ANNOT_BULK};

static const char *const gpu_resources[] = {"nvidia.com/gpu", "amd.com/gpu"};

const char *kube_event_type_name(enum kube_event_type t)
{
	if (t < 0 || t >= _KUBE_EVENT_MAX)
		return "invalid";
	return event_type_names[t];
}

enum kube_event_type kube_event_type_from_name(const char *s)
{
	if (!s)
		return _KUBE_EVENT_INVALID;
	/* EXPIRED is ours, not a wire name */
	for (int t = 0; t < KUBE_EVENT_EXPIRED; t++)
		if (streq(s, event_type_names[t]))
			return (enum kube_event_type)t;
	return _KUBE_EVENT_INVALID;
}

const char *kube_pod_phase_name(enum kube_pod_phase p)
{
	if (p < 0 || p >= _KUBE_POD_PHASE_MAX)
		return "invalid";
	return phase_names[p];
}

char *kube_quote(char *dst, size_t size, const char *src, size_t len, size_t max_chars)
{
	size_t o = 0, i;

	if (size == 0)
		return dst;
	if (size < 8) { /* too small to say anything useful */
		dst[0] = '\0';
		return dst;
	}
	dst[o++] = '"';
	for (i = 0; i < len && i < max_chars; i++) {
		unsigned char c = (unsigned char)src[i];
		char tmp[8];
		size_t n;

		if (c == '"' || c == '\\') {
			tmp[0] = '\\';
			tmp[1] = (char)c;
			n = 2;
		} else if (c >= 0x20 && c < 0x7f) {
			tmp[0] = (char)c;
			n = 1;
		} else {
			snprintf(tmp, sizeof(tmp), "\\x%02x", c);
			n = 4;
		}
		/* keep room for '...', the closing quote and NUL */
		if (o + n + 5 > size)
			break;
		memcpy(dst + o, tmp, n);
		o += n;
	}
	if (i < len) {
		memcpy(dst + o, "...", 3);
		o += 3;
	}
	dst[o++] = '"';
	dst[o] = '\0';
	return dst;
}

static char *quote_str(char *dst, size_t size, const char *s)
{
	return kube_quote(dst, size, s, strlen(s), 64);
}

/* "a string", "a number (42)", ... for wrong-type messages */
static const char *describe_json(const cJSON *v, char *buf, size_t size)
{
	if (!v)
		snprintf(buf, size, "nothing");
	else if (cJSON_IsNull(v))
		snprintf(buf, size, "null");
	else if (cJSON_IsBool(v))
		snprintf(buf, size, "a boolean (%s)", cJSON_IsTrue(v) ? "true" : "false");
	else if (cJSON_IsNumber(v))
		snprintf(buf, size, "a number (%g)", v->valuedouble);
	else if (cJSON_IsString(v)) {
		char q[96];
		snprintf(buf, size, "a string (%s)", quote_str(q, sizeof(q), v->valuestring));
	} else if (cJSON_IsArray(v))
		snprintf(buf, size, "an array");
	else if (cJSON_IsObject(v))
		snprintf(buf, size, "an object");
	else
		snprintf(buf, size, "an unknown JSON value");
	return buf;
}

static int type_error(struct error *err, const char *path, const char *want, const cJSON *got)
{
	char d[128];
	return error_set(err, EINVAL, "%s: expected %s, got %s", path, want, describe_json(got, d, sizeof(d)));
}

static const cJSON *field(const cJSON *obj, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(obj, key);
}

/* A field that must be an object when present (null counts as absent). */
static int get_object(const cJSON *obj, const char *key, const char *path, const cJSON **ret, struct error *err)
{
	const cJSON *v = field(obj, key);
	*ret = NULL;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsObject(v))
		return type_error(err, path, "an object", v);
	*ret = v;
	return 0;
}

static bool charset_valid(const char *s, size_t max, const char *extra)
{
	size_t len = strlen(s);
	if (len == 0 || len > max)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr(extra, c)))
			return false;
	}
	return true;
}

/* resourceVersion is opaque; every API server uses decimal integers. Accept
 * URL-unreserved characters only, so it can never smuggle query syntax. */
static bool rv_valid(const char *s)
{
	return charset_valid(s, KUBE_RV_MAX - 1, "-._~");
}

/* A required identity string: present, a string, valid, fits. */
static int get_id(const cJSON *obj, const char *key, const char *path, bool (*valid)(const char *), const char *what,
                  char *dst, size_t size, struct error *err)
{
	const cJSON *v = field(obj, key);
	char q[96];

	if (!v || cJSON_IsNull(v))
		return error_set(err, EINVAL, "%s: missing", path);
	if (!cJSON_IsString(v))
		return type_error(err, path, "a string", v);
	if (!valid(v->valuestring) || strlen(v->valuestring) >= size)
		return error_set(err, EINVAL, "%s: %s is not a valid %s", path, quote_str(q, sizeof(q), v->valuestring),
		                 what);
	str_copy(dst, size, v->valuestring);
	return 0;
}

static void pod_warn(struct kube_pod *pod, const char *fmt, ...) _printf_(2, 3);
static void pod_warn(struct kube_pod *pod, const char *fmt, ...)
{
	if (pod->n_warn < KUBE_POD_WARN_MAX) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(pod->warn[pod->n_warn], KUBE_POD_WARN_LEN, fmt, ap);
		va_end(ap);
	}
	pod->n_warn++;
}

static void pod_warn_type(struct kube_pod *pod, const char *path, const char *want, const cJSON *got)
{
	char d[128];
	pod_warn(pod, "%s: expected %s, got %s; ignored", path, want, describe_json(got, d, sizeof(d)));
}

/* An optional object of the pod's JSON (key of obj, path for the warning):
 * NULL when absent or null, and when of another type (a warning on the
 * pod: its other fields still count). */
static const cJSON *pod_optional_object(struct kube_pod *pod, const cJSON *obj, const char *key, const char *path)
{
	const cJSON *v = field(obj, key);

	if (!v || cJSON_IsNull(v))
		return NULL;
	if (!cJSON_IsObject(v)) {
		pod_warn_type(pod, path, "an object", v);
		return NULL;
	}
	return v;
}

/* Copy a string for a message: control bytes become '?', truncated to fit on
 * a UTF-8 character boundary. */
static void copy_sanitized(char *dst, size_t size, const char *src)
{
	size_t n = strlen(src);
	if (n >= size) {
		n = size - 1;
		while (n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80)
			n--;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)src[i];
		dst[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
	}
	dst[n] = '\0';
}

/* ---- quantities ---- */

int kube_quantity_parse_count(const char *s, uint64_t max, uint64_t *ret, struct error *err)
{
	struct k8s_quantity kq;
	char q[96];
	uint64_t v;
	int r;

	r = k8s_quantity_parse(s, &kq, err);
	if (r < 0)
		return r;
	quote_str(q, sizeof(q), s);
	if (kq.negative && kq.mant != 0)
		return error_set(err, ERANGE, "%s is negative", q);
	r = k8s_quantity_to_u64(&kq, max, &v);
	if (r == -EDOM)
		return error_set(err, EINVAL, "%s is not a whole number", q);
	if (r < 0)
		return error_set(err, ERANGE, "%s exceeds %" PRIu64, q, max);
	*ret = v;
	return 0;
}

/* ---- IPs ---- */

const char *kube_ip_format(const struct kube_ip *ip, char *buf, size_t size)
{
	if (!inet_ntop(ip->family, &ip->addr, buf, (socklen_t)size))
		snprintf(buf, size, "?");
	return buf;
}

static int ip_parse(const char *s, struct kube_ip *ret)
{
	struct kube_ip ip = {0};
	if (strlen(s) >= INET6_ADDRSTRLEN)
		return -EINVAL;
	if (inet_pton(AF_INET, s, &ip.addr.v4) == 1)
		ip.family = AF_INET;
	else if (inet_pton(AF_INET6, s, &ip.addr.v6) == 1)
		ip.family = AF_INET6;
	else
		return -EINVAL;
	*ret = ip;
	return 0;
}

static bool ip_equal(const struct kube_ip *a, const struct kube_ip *b)
{
	if (a->family != b->family)
		return false;
	if (a->family == AF_INET)
		return a->addr.v4.s_addr == b->addr.v4.s_addr;
	return memcmp(&a->addr.v6, &b->addr.v6, sizeof(a->addr.v6)) == 0;
}

/* Add one address (a JSON string) unless already there; n_seen counts distinct ones. */
static void pod_add_ip(struct kube_pod *pod, const cJSON *v, const char *path, unsigned *n_seen)
{
	struct kube_ip ip;
	char q[96];

	if (!cJSON_IsString(v)) {
		pod_warn_type(pod, path, "an IP address string", v);
		return;
	}
	if (ip_parse(v->valuestring, &ip) < 0) {
		pod_warn(pod, "%s: %s is not an IPv4 or IPv6 address; ignored", path,
		         quote_str(q, sizeof(q), v->valuestring));
		return;
	}
	for (unsigned i = 0; i < pod->n_ips; i++)
		if (ip_equal(&pod->ips[i], &ip))
			return;
	(*n_seen)++;
	if (pod->n_ips < KUBE_POD_IPS_MAX)
		pod->ips[pod->n_ips++] = ip;
}

static void pod_decode_ips(struct kube_pod *pod, const cJSON *status)
{
	const cJSON *ips = field(status, "podIPs"), *ip = field(status, "podIP");
	unsigned n_seen = 0;

	if (ips && !cJSON_IsNull(ips)) {
		if (!cJSON_IsArray(ips)) {
			pod_warn_type(pod, "status.podIPs", "an array", ips);
		} else {
			int i = 0;
			const cJSON *it;
			cJSON_ArrayForEach(it, ips)
			{
				char path[64];
				snprintf(path, sizeof(path), "status.podIPs[%d].ip", i++);
				if (!cJSON_IsObject(it)) {
					pod_warn_type(pod, path, "an object", it);
					continue;
				}
				pod_add_ip(pod, field(it, "ip"), path, &n_seen);
			}
		}
	}
	if (ip && !cJSON_IsNull(ip) && !(cJSON_IsString(ip) && ip->valuestring[0] == '\0'))
		pod_add_ip(pod, ip, "status.podIP", &n_seen);
	if (n_seen > KUBE_POD_IPS_MAX)
		pod_warn(pod, "status.podIPs: %u addresses, kept the first %d", n_seen, KUBE_POD_IPS_MAX);
}

/* ---- annotations ---- */

static int pod_decode_annotations(struct kube_pod *pod, const cJSON *annotations)
{
	const cJSON *it;

	cJSON_ArrayForEach(it, annotations)
	{
		const char *key = it->string;
		size_t k;
		char q[96];

		if (!key)
			continue;
		for (k = 0; k < ARRAY_SIZE(kept_annotations); k++)
			if (streq(key, kept_annotations[k]))
				break;
		if (k == ARRAY_SIZE(kept_annotations)) {
			pod->n_annotations_other++;
			continue;
		}
		if (!cJSON_IsString(it)) {
			pod_warn_type(pod, key, "a string", it);
			continue;
		}
		if (strlen(it->valuestring) > KUBE_ANNOT_VALUE_MAX) {
			pod_warn(pod, "annotation %s: value of %zu bytes exceeds %d (%s); ignored", key,
			         strlen(it->valuestring), KUBE_ANNOT_VALUE_MAX,
			         kube_quote(q, sizeof(q), it->valuestring, strlen(it->valuestring), 24));
			continue;
		}
		if (!pod->annotations) {
			pod->annotations = cJSON_CreateObject();
			if (!pod->annotations)
				return -ENOMEM;
		}
		if (cJSON_GetObjectItemCaseSensitive(pod->annotations, key)) {
			/* JSON with a duplicate key: last wins, as in Go */
			pod_warn(pod, "annotation %s: duplicate key, the last value wins", key);
			cJSON_DeleteItemFromObjectCaseSensitive(pod->annotations, key);
		}
		if (!cJSON_AddStringToObject(pod->annotations, key, it->valuestring))
			return -ENOMEM;
	}
	return 0;
}

/* ---- GPUs ---- */

static void pod_decode_gpus(struct kube_pod *pod, const cJSON *spec)
{
	const cJSON *containers = field(spec, "containers"), *c;
	uint64_t total = 0;
	int ci = 0;

	if (!containers || cJSON_IsNull(containers))
		return;
	if (!cJSON_IsArray(containers)) {
		pod_warn_type(pod, "spec.containers", "an array", containers);
		return;
	}
	cJSON_ArrayForEach(c, containers)
	{
		const cJSON *resources, *requests, *limits;
		int i = ci++;

		if (!cJSON_IsObject(c))
			continue;
		resources = field(c, "resources");
		if (!resources || cJSON_IsNull(resources))
			continue;
		if (!cJSON_IsObject(resources)) {
			char path[64];
			snprintf(path, sizeof(path), "spec.containers[%d].resources", i);
			pod_warn_type(pod, path, "an object", resources);
			continue;
		}
		requests = field(resources, "requests");
		limits = field(resources, "limits");
		for (size_t g = 0; g < ARRAY_SIZE(gpu_resources); g++) {
			const char *which = "requests";
			const cJSON *v = cJSON_IsObject(requests) ? field(requests, gpu_resources[g]) : NULL;
			uint64_t n;
			struct error e;
			char path[128];

			/* extended resources: requests default to limits */
			if (!v && cJSON_IsObject(limits)) {
				v = field(limits, gpu_resources[g]);
				which = "limits";
			}
			if (!v)
				continue;
			snprintf(path, sizeof(path), "spec.containers[%d].resources.%s[%s]", i, which,
			         gpu_resources[g]);
			if (!cJSON_IsString(v)) {
				pod_warn_type(pod, path, "a quantity string", v);
				continue;
			}
			if (kube_quantity_parse_count(v->valuestring, KUBE_POD_GPU_MAX, &n, &e) < 0) {
				pod_warn(pod, "%s: %s; ignored", path, e.msg);
				continue;
			}
			if (total + n > KUBE_POD_GPU_MAX) {
				pod_warn(pod, "%s: the pod's total exceeds %d GPUs; ignored", path, KUBE_POD_GPU_MAX);
				continue;
			}
			total += n;
		}
	}
	pod->gpus = (uint32_t)total;
}

/* ---- pods ---- */

void kube_pod_done(struct kube_pod *pod)
{
	if (!pod)
		return;
	cJSON_Delete(pod->annotations);
	pod->annotations = NULL;
}

void kube_pod_move(struct kube_pod *dst, struct kube_pod *src)
{
	*dst = *src;
	src->annotations = NULL;
}

static int check_kind(const cJSON *obj, const char *want, struct error *err)
{
	const cJSON *kind = field(obj, "kind");
	char q[96];

	if (!kind || cJSON_IsNull(kind))
		return 0;
	if (!cJSON_IsString(kind))
		return type_error(err, "kind", "a string", kind);
	if (!streq(kind->valuestring, want))
		return error_set(err, EINVAL, "kind: expected \"%s\", got %s", want,
		                 quote_str(q, sizeof(q), kind->valuestring));
	return 0;
}

/* ctx: "" or an event type to start messages with ("MODIFIED pod ns/name: ...") */
static int pod_decode_into(const cJSON *obj, const char *ctx, struct kube_pod *pod, struct error *err)
{
	const cJSON *meta = NULL, *spec = NULL, *status = NULL, *annotations = NULL, *v;
	int r;

	if (!cJSON_IsObject(obj)) {
		r = type_error(err, "object", "an object", obj);
		goto unnamed;
	}
	r = check_kind(obj, "Pod", err);
	if (r >= 0)
		r = get_object(obj, "metadata", "metadata", &meta, err);
	if (r >= 0 && !meta)
		r = error_set(err, EINVAL, "metadata: missing");
	if (r < 0)
		goto unnamed;
	r = get_id(meta, "namespace", "metadata.namespace", k8s_namespace_valid, "namespace (DNS-1123 label)",
	           pod->namespace_, sizeof(pod->namespace_), err);
	if (r < 0)
		goto unnamed;
	r = get_id(meta, "name", "metadata.name", k8s_pod_name_valid, "pod name (DNS-1123 subdomain)", pod->name,
	           sizeof(pod->name), err);
	if (r < 0)
		goto unnamed;
	r = get_id(meta, "uid", "metadata.uid", k8s_uid_valid, "uid", pod->uid, sizeof(pod->uid), err);
	if (r < 0)
		goto named;
	r = get_id(meta, "resourceVersion", "metadata.resourceVersion", rv_valid, "resourceVersion",
	           pod->resource_version, sizeof(pod->resource_version), err);
	if (r < 0)
		goto named;

	v = field(meta, "deletionTimestamp");
	if (v && !cJSON_IsNull(v)) {
		if (cJSON_IsString(v))
			pod->deleting = true;
		else
			pod_warn_type(pod, "metadata.deletionTimestamp", "a timestamp string", v);
	}
	annotations = pod_optional_object(pod, meta, "annotations", "metadata.annotations");
	if (annotations) {
		r = pod_decode_annotations(pod, annotations);
		if (r < 0) {
			r = error_set(err, -r, "metadata.annotations: out of memory");
			goto named;
		}
	}

	spec = pod_optional_object(pod, obj, "spec", "spec");
	if (spec) {
		char q[96];
		v = field(spec, "nodeName");
		if (v && !cJSON_IsNull(v)) {
			if (!cJSON_IsString(v))
				pod_warn_type(pod, "spec.nodeName", "a string", v);
			else if (v->valuestring[0] && (!k8s_node_name_valid(v->valuestring) ||
			                               strlen(v->valuestring) >= sizeof(pod->node_name)))
				pod_warn(pod, "spec.nodeName: %s is not a valid node name; ignored",
				         quote_str(q, sizeof(q), v->valuestring));
			else
				str_copy(pod->node_name, sizeof(pod->node_name), v->valuestring);
		}
		v = field(spec, "hostNetwork");
		if (v && !cJSON_IsNull(v)) {
			if (cJSON_IsBool(v))
				pod->host_network = cJSON_IsTrue(v);
			else
				pod_warn_type(pod, "spec.hostNetwork", "a boolean", v);
		}
		pod_decode_gpus(pod, spec);
	}

	status = pod_optional_object(pod, obj, "status", "status");
	if (status) {
		char q[96];
		v = field(status, "phase");
		if (v && !cJSON_IsNull(v)) {
			if (!cJSON_IsString(v)) {
				pod_warn_type(pod, "status.phase", "a string", v);
			} else {
				int p;
				for (p = KUBE_POD_PHASE_PENDING; p < _KUBE_POD_PHASE_MAX; p++)
					if (streq(v->valuestring, phase_names[p]))
						break;
				if (p == _KUBE_POD_PHASE_MAX) {
					pod_warn(pod, "status.phase: unknown value %s, taken as Unknown",
					         quote_str(q, sizeof(q), v->valuestring));
					p = KUBE_POD_PHASE_UNKNOWN;
				}
				pod->phase = (enum kube_pod_phase)p;
			}
		}
		pod_decode_ips(pod, status);
	}
	return 0;

named:
	error_prefix(err, "%s%spod %s/%s", ctx, *ctx ? " " : "", pod->namespace_, pod->name);
	return r;
unnamed:
	error_prefix(err, "%s%spod", ctx, *ctx ? " " : "");
	return r;
}

static int pod_decode(const cJSON *obj, const char *ctx, struct kube_pod *ret, struct error *err)
{
	struct kube_pod pod;
	int r;

	memset(&pod, 0, sizeof(pod));
	r = pod_decode_into(obj, ctx, &pod, err);
	if (r < 0) {
		kube_pod_done(&pod);
		return r;
	}
	*ret = pod;
	return 0;
}

int kube_pod_decode(const cJSON *obj, struct kube_pod *ret, struct error *err)
{
	return pod_decode(obj, "", ret, err);
}

/* ---- events ---- */

void kube_event_done(struct kube_event *ev)
{
	if (ev)
		kube_pod_done(&ev->pod);
}

static int status_decode(const cJSON *obj, struct kube_status *st, struct error *err)
{
	const cJSON *v;
	int r;

	r = check_kind(obj, "Status", err);
	if (r < 0)
		return r;
	v = field(obj, "code");
	if (v && !cJSON_IsNull(v)) {
		if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 999 ||
		    v->valuedouble != (double)(int)v->valuedouble)
			return type_error(err, "code", "an integer status code (0-999)", v);
		st->code = (int)v->valuedouble;
	}
	v = field(obj, "reason");
	if (v && !cJSON_IsNull(v)) {
		if (!cJSON_IsString(v))
			return type_error(err, "reason", "a string", v);
		copy_sanitized(st->reason, sizeof(st->reason), v->valuestring);
	}
	v = field(obj, "message");
	if (v && !cJSON_IsNull(v)) {
		if (!cJSON_IsString(v))
			return type_error(err, "message", "a string", v);
		copy_sanitized(st->message, sizeof(st->message), v->valuestring);
	}
	return 0;
}

int kube_event_decode(const cJSON *obj, struct kube_event *ret, struct error *err)
{
	struct kube_event ev;
	const cJSON *type, *object;
	char q[96];
	int r;

	memset(&ev, 0, sizeof(ev));
	if (!cJSON_IsObject(obj))
		return type_error(err, "watch event", "an object", obj);
	type = field(obj, "type");
	if (!type || cJSON_IsNull(type))
		return error_set(err, EINVAL, "watch event: type: missing");
	if (!cJSON_IsString(type)) {
		r = type_error(err, "type", "a string", type);
		error_prefix(err, "watch event");
		return r;
	}
	ev.type = kube_event_type_from_name(type->valuestring);
	if (ev.type == _KUBE_EVENT_INVALID)
		return error_set(err, EINVAL,
		                 "watch event: type: unknown value %s (expected ADDED, MODIFIED, DELETED, BOOKMARK or "
		                 "ERROR)",
		                 quote_str(q, sizeof(q), type->valuestring));
	object = field(obj, "object");
	if (!cJSON_IsObject(object)) {
		r = object ? type_error(err, "object", "an object", object) : error_set(err, EINVAL, "object: missing");
		error_prefix(err, "%s event", type->valuestring);
		return r;
	}

	switch (ev.type) {
	case KUBE_EVENT_ADDED:
	case KUBE_EVENT_MODIFIED:
	case KUBE_EVENT_DELETED:
		r = pod_decode(object, type->valuestring, &ev.pod, err);
		if (r < 0)
			return r;
		str_copy(ev.resource_version, sizeof(ev.resource_version), ev.pod.resource_version);
		break;
	case KUBE_EVENT_BOOKMARK: {
		const cJSON *meta;
		r = get_object(object, "metadata", "metadata", &meta, err);
		if (r >= 0 && !meta)
			r = error_set(err, EINVAL, "metadata: missing");
		if (r >= 0)
			r = get_id(meta, "resourceVersion", "metadata.resourceVersion", rv_valid, "resourceVersion",
			           ev.resource_version, sizeof(ev.resource_version), err);
		if (r < 0) {
			error_prefix(err, "BOOKMARK event");
			return r;
		}
		break;
	}
	case KUBE_EVENT_ERROR:
		r = status_decode(object, &ev.status, err);
		if (r < 0) {
			error_prefix(err, "ERROR event");
			return r;
		}
		/* 410 Gone (reason Expired or Gone): our resourceVersion is too old */
		if (ev.status.code == 410)
			ev.type = KUBE_EVENT_EXPIRED;
		break;
	default:
		return error_set(err, EINVAL, "watch event: unexpected type %d", ev.type);
	}
	*ret = ev;
	return 0;
}

static cJSON *parse_json(const char *data, size_t len, const char *what, struct error *err)
{
	const char *end = NULL;
	cJSON *obj;
	char q[96];

	if (memchr(data, '\0', len)) {
		error_set(err, EBADMSG, "%s: NUL byte in JSON", what);
		return NULL;
	}
	obj = cJSON_ParseWithLengthOpts(data, len, &end, false);
	if (!obj) {
		size_t at = end && end >= data && end <= data + len ? (size_t)(end - data) : 0;
		error_set(err, EBADMSG, "%s: invalid JSON at byte %zu near %s", what, at,
		          kube_quote(q, sizeof(q), data + at, len - at, 32));
		return NULL;
	}
	for (size_t at = (size_t)(end - data); at < len; at++) {
		if (!strchr(" \t\r\n", data[at])) {
			cJSON_Delete(obj);
			error_set(err, EBADMSG, "%s: trailing data after JSON at byte %zu: %s", what, at,
			          kube_quote(q, sizeof(q), data + at, len - at, 32));
			return NULL;
		}
	}
	return obj;
}

int kube_event_decode_json(const char *data, size_t len, struct kube_event *ret, struct error *err)
{
	cJSON *obj = parse_json(data, len, "watch event", err);
	int r;

	if (!obj)
		return -EBADMSG;
	r = kube_event_decode(obj, ret, err);
	cJSON_Delete(obj);
	return r;
}

/* ---- lists ---- */

void kube_pod_list_done(struct kube_pod_list *list)
{
	if (!list)
		return;
	for (size_t i = 0; i < list->n; i++)
		kube_pod_done(&list->items[i]);
	free(list->items);
	list->items = NULL;
	list->n = 0;
}

int kube_pod_list_decode(const cJSON *obj, struct kube_pod_list *ret, struct error *err)
{
	_cleanup_free_ struct kube_pod_list *list = NULL;
	const cJSON *meta, *items, *v, *it;
	int r, n, i = 0;

	if (!cJSON_IsObject(obj))
		return type_error(err, "PodList", "an object", obj);
	list = calloc(1, sizeof(*list));
	if (!list)
		return error_set(err, ENOMEM, "PodList: out of memory");
	r = check_kind(obj, "PodList", err);
	if (r >= 0)
		r = get_object(obj, "metadata", "metadata", &meta, err);
	if (r >= 0 && !meta)
		r = error_set(err, EINVAL, "metadata: missing");
	if (r >= 0)
		r = get_id(meta, "resourceVersion", "metadata.resourceVersion", rv_valid, "resourceVersion",
		           list->resource_version, sizeof(list->resource_version), err);
	if (r < 0)
		goto fail;
	v = field(meta, "continue");
	if (v && !cJSON_IsNull(v)) {
		char q[96];
		if (!cJSON_IsString(v)) {
			r = type_error(err, "metadata.continue", "a string", v);
			goto fail;
		}
		/* an opaque base64url token; it goes back into a URL */
		if (v->valuestring[0] && !charset_valid(v->valuestring, KUBE_CONTINUE_MAX - 1, "-_=.~+/")) {
			r = error_set(err, EINVAL, "metadata.continue: %s is not a valid continue token",
			              quote_str(q, sizeof(q), v->valuestring));
			goto fail;
		}
		str_copy(list->continue_token, sizeof(list->continue_token), v->valuestring);
	}
	items = field(obj, "items");
	if (items && !cJSON_IsNull(items) && !cJSON_IsArray(items)) {
		r = type_error(err, "items", "an array", items);
		goto fail;
	}
	n = items && cJSON_IsArray(items) ? cJSON_GetArraySize(items) : 0;
	if (n > KUBE_POD_LIST_ITEMS_MAX) {
		r = error_set(err, E2BIG, "items: %d pods exceed the limit of %d", n, KUBE_POD_LIST_ITEMS_MAX);
		goto fail;
	}
	if (n > 0) {
		list->items = calloc((size_t)n, sizeof(*list->items));
		if (!list->items) {
			r = error_set(err, ENOMEM, "items: out of memory for %d pods", n);
			goto fail;
		}
		cJSON_ArrayForEach(it, items)
		{
			struct error e = {0};
			if (kube_pod_decode(it, &list->items[list->n], &e) < 0) {
				if (list->n_invalid++ == 0)
					snprintf(list->first_invalid, sizeof(list->first_invalid), "items[%d]: %.990s",
					         i, e.msg);
			} else {
				list->n++;
			}
			i++;
		}
	}
	*ret = *list;
	return 0;
fail:
	kube_pod_list_done(list);
	error_prefix(err, "PodList");
	return r;
}

int kube_pod_list_decode_json(const char *data, size_t len, struct kube_pod_list *ret, struct error *err)
{
	cJSON *obj = parse_json(data, len, "PodList", err);
	int r;

	if (!obj)
		return -EBADMSG;
	r = kube_pod_list_decode(obj, ret, err);
	cJSON_Delete(obj);
	return r;
}
