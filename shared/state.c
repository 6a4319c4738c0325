/* state.c — the per-attachment state store: one JSON file per attachment
 * (<dir>/<containerId>@<ifname>.json), written atomically (O_EXCL temp file,
 * rename; not fsynced, see state_save) and validated strictly when read
 * back: every error names the file and the field. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <limits.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include "json.h"
#include "caps.h"
#include "reason.h"
#include "failpoint.h"
#include "file.h"
#include "ifname.h"
#include "reason.h"
#include "state.h"

#define STATE_VERSION 1

static void closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

static int check_name(const char *what, const char *s, size_t max, struct error *err)
{
	size_t n;

	if (!s || !*s)
		return error_set(err, EINVAL, "%s is empty", what);
	n = strnlen(s, max + 1);
	if (n > max)
		return error_set(err, ENAMETOOLONG, "%s is longer than %zu characters", what, max);
	if (!cni_id_valid(s, max))
		return error_set(err, EINVAL, "%s '%.*s' is not [A-Za-z0-9][A-Za-z0-9_.-]* (libcni's rule)", what,
		                 (int)n, s);
	return 0;
}

int state_check_id(const char *container_id, const char *ifname, struct error *err)
{
	int r = check_name("container ID", container_id, STATE_ID_MAX - 1, err);
	if (r < 0)
		return r;
	if (ifname && strnlen(ifname, IFNAME_LEN) >= IFNAME_LEN)
		return error_set(err, ENAMETOOLONG, "interface name is longer than %d bytes", IFNAME_LEN - 1);
	if (!ifname_valid(ifname))
		return error_set(err, EINVAL,
		                 "interface name is not valid (1-%d bytes, no '/', ':' or whitespace, not '.' or '..')",
		                 IFNAME_LEN - 1);
	return 0;
}

/* "<containerID>@<encoded ifname>": the file name of an attachment without
 * its suffix. Container IDs have no '@' and the encoding escapes it, so the
 * first '@' splits. */
static int state_stem(const char *container_id, const char *ifname, char *buf, size_t size)
{
	char enc[IFNAME_ENC_MAX];
	int n;

	if (state_check_id(container_id, ifname, NULL) < 0 || ifname_encode(ifname, enc, sizeof(enc)) < 0)
		return -EINVAL;
	n = snprintf(buf, size, "%s@%s", container_id, enc);
	if (n < 0 || (size_t)n >= size)
		return -ENAMETOOLONG;
	return 0;
}

/* The inverse of state_stem for len bytes at stem. */
static bool stem_parse(const char *stem, size_t len, char *cid, size_t cid_size, char *ifn, size_t ifn_size)
{
	const char *at = memchr(stem, '@', len);

	if (!at || (size_t)(at - stem) >= cid_size)
		return false;
	memcpy(cid, stem, (size_t)(at - stem));
	cid[at - stem] = '\0';
	if (ifname_decode(at + 1, len - (size_t)(at - stem) - 1, ifn, ifn_size) < 0)
		return false;
	return state_check_id(cid, ifn, NULL) == 0;
}

bool state_file_parse(const char *name, char *cid, size_t cid_size, char *ifn, size_t ifn_size)
{
	size_t n = strlen(name);

	if (n <= 5 || !streq(name + n - 5, ".json"))
		return false;
	return stem_parse(name, n - 5, cid, cid_size, ifn, ifn_size);
}

int state_path(const char *dir, const char *container_id, const char *ifname, char *buf, size_t size)
{
	char stem[STATE_ID_MAX + IFNAME_ENC_MAX + 1];
	int n, r;

	if (!dir || !*dir)
		return -EINVAL;
	r = state_stem(container_id, ifname, stem, sizeof(stem));
	if (r < 0)
		return r;
	n = snprintf(buf, size, "%s/%s.json", dir, stem);
	if (n < 0 || (size_t)n >= size)
		return -ENAMETOOLONG;
	return 0;
}

static int path_for(const char *dir, const char *container_id, const char *ifname, char *buf, size_t size,
                    struct error *err)
{
	int r = state_check_id(container_id, ifname, err);
	if (r < 0)
		return r;
	if (!dir || !*dir)
		return error_set(err, EINVAL, "state directory is empty");
	r = state_path(dir, container_id, ifname, buf, size);
	if (r < 0)
		return error_set(err, -r, "state path for %s/%s under '%s' is too long", container_id, ifname, dir);
	return 0;
}

/* mkdir -p with mode 0700 for what is created; existing directories stay as they are. */
static int mkdir_p(const char *dir, struct error *err)
{
	char path[STATE_PATH_MAX];
	struct stat st;
	size_t n;

	if (str_copy(path, sizeof(path), dir) < 0)
		return error_set(err, ENAMETOOLONG, "state directory '%s' is too long", dir);
	n = strlen(path);
	for (size_t i = 1; i <= n; i++) {
		if (path[i] != '/' && path[i] != '\0')
			continue;
		char saved = path[i];
		path[i] = '\0';
		if (mkdir(path, 0700) < 0 && errno != EEXIST)
			return error_set(err, errno, "create state directory '%s': %s", path, strerror(errno));
		path[i] = saved;
	}
	if (stat(dir, &st) < 0)
		return error_set(err, errno, "state directory '%s': %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return error_set(err, ENOTDIR, "state directory '%s' is not a directory", dir);
	return 0;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t k = write(fd, buf, len);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (k == 0)
			return -EIO;
		buf += k;
		len -= (size_t)k;
	}
	return 0;
}

/* Human-readable description of alternative i of an item. */
static void describe_alt(const struct plan_item *it, int i, char *buf, size_t size)
{
	if (i < 0 || (unsigned)i >= it->n_alt || i >= PLAN_ALT_MAX) {
		snprintf(buf, size, "nothing");
		return;
	}
	if (it->type == ITEM_SYSCTL) {
		snprintf(buf, size, "%s=%s", it->key, it->val[i]);
		return;
	}
	const struct tc_spec *s = &it->tc[i];
	const struct tc_kind *k = tc_kind_get(s->kind);
	char params[TC_FORMAT_MAX] = "";
	if (k && k->format)
		k->format(s, params, sizeof(params));
	snprintf(buf, size, "%s%s%s", k ? k->name : "?", params[0] ? " " : "", params);
}

static void describe_reason(const struct plan_item *it, char *buf, size_t size)
{
	if (it->err == ESRCH) {
		snprintf(buf, size, "depends on %s, which was not applied", it->depends);
		return;
	}
	if (it->err == ENODEV && it->dev == DEV_HOST) {
		snprintf(buf, size,
		         "no host-side veth to shape on (a macvlan/ipvlan primary): the limit is not enforced");
		return;
	}
	if (it->err == EPERM && it->type == ITEM_SYSCTL) {
		snprintf(buf, size, "not allowed in the pod's network namespace");
		return;
	}
	reason_item(it, buf, size); /* the missing kernel feature in words (reason.h) */
	if (!buf[0])
		snprintf(buf, size, "unknown");
}

static cJSON *degraded_to_json(const struct plan *p)
{
	cJSON *arr = cJSON_CreateArray();

	if (!arr)
		return NULL;
	for (unsigned i = 0; i < p->n; i++) {
		const struct plan_item *it = &p->items[i];
		char wanted[TC_FORMAT_MAX + 32], got[TC_FORMAT_MAX + 32], reason[REASON_MAX];
		cJSON *o;

		if (it->status != ITEM_DEGRADED && it->status != ITEM_SKIPPED)
			continue;
		describe_alt(it, 0, wanted, sizeof(wanted));
		describe_reason(it, reason, sizeof(reason));
		o = cJSON_CreateObject();
		if (!o || !cJSON_AddItemToArray(arr, o)) {
			cJSON_Delete(o);
			cJSON_Delete(arr);
			return NULL;
		}
		bool ok = cJSON_AddStringToObject(o, "id", it->id) && cJSON_AddStringToObject(o, "wanted", wanted);
		if (it->status == ITEM_DEGRADED) {
			describe_alt(it, it->chosen, got, sizeof(got));
			ok = ok && cJSON_AddStringToObject(o, "got", got);
		} else {
			ok = ok && cJSON_AddNullToObject(o, "got");
		}
		ok = ok && cJSON_AddStringToObject(o, "reason", reason);
		if (!ok) {
			cJSON_Delete(arr);
			return NULL;
		}
	}
	return arr;
}

/* The rendered effective plan as an array of lines (without empty ones). */
static cJSON *effective_to_json(const struct attach_state *s)
{
	_cleanup_free_ char *text = NULL;
	cJSON *arr;
	char *line, *save = NULL;

	const struct plan_names names = plan_names_attach(&s->ifs);

	if (plan_render(&s->plan, &names, s->netns, PLAN_FMT_TEXT, true, &text) < 0 || !text)
		text = NULL;
	arr = cJSON_CreateArray();
	if (!arr || !text)
		return arr;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!cJSON_AddItemToArray(arr, cJSON_CreateString(line))) {
			cJSON_Delete(arr);
			return NULL;
		}
	}
	return arr;
}

static const char *const attach_op_names[_ATTACH_OP_MAX] = {
        [ATTACH_OP_NONE] = "none",
        [ATTACH_OP_ADD] = "add",
        [ATTACH_OP_RETUNE] = "retune",
        [ATTACH_OP_TEARDOWN] = "teardown",
};

const char *attach_op_name(enum attach_op op)
{
	return op >= 0 && op < _ATTACH_OP_MAX ? attach_op_names[op] : NULL;
}

enum attach_op attach_op_from_name(const char *s)
{
	for (int i = 0; s && i < _ATTACH_OP_MAX; i++)
		if (streq(s, attach_op_names[i]))
			return (enum attach_op)i;
	return _ATTACH_OP_INVALID;
}

/* {"op"} and, when it has one (a re-tune), its target: class, profile, profileSpec,
 * workload {egressBps,ingressBps,profileRequested}, ifaces {host,mtu}. */
static cJSON *intent_to_json(const struct attach_intent *in)
{
	_cleanup_json_ cJSON *j = cJSON_CreateObject();
	const char *cls = workload_class_name(in->workload.class);
	cJSON *o;
	bool ok;

	/* pending without an op: an ADD's (the only intent older writers had) */
	if (!j || !cJSON_AddStringToObject(j, "op", in->op > ATTACH_OP_NONE ? attach_op_name(in->op) ?: "add" : "add"))
		return NULL;
	if (!in->has_target)
		return TAKE_PTR(j);
	ok = cJSON_AddStringToObject(j, "class", cls ? cls : "default") &&
	     cJSON_AddStringToObject(j, "profile", in->profile) &&
	     cJSON_AddItemToObject(j, "profileSpec", profile_to_json(&in->profile_spec));
	o = ok ? cJSON_AddObjectToObject(j, "workload") : NULL;
	ok = o && cJSON_AddNumberToObject(o, "egressBps", (double)in->workload.egress_bps) &&
	     cJSON_AddNumberToObject(o, "ingressBps", (double)in->workload.ingress_bps) &&
	     cJSON_AddStringToObject(o, "profileRequested", in->workload.profile);
	o = ok ? cJSON_AddObjectToObject(j, "ifaces") : NULL;
	ok = o && cJSON_AddStringToObject(o, "host", in->ifs.host_ifname) &&
	     cJSON_AddNumberToObject(o, "mtu", in->ifs.mtu);
	return ok ? TAKE_PTR(j) : NULL;
}

struct cJSON *state_to_json(const struct attach_state *s)
{
	_cleanup_json_ cJSON *j = cJSON_CreateObject();
	cJSON *o, *a;
	const char *cls;
	bool ok;

	if (!j)
		return NULL;
	cls = workload_class_name(s->workload.class);
	ok = cJSON_AddNumberToObject(j, "version", STATE_VERSION) &&
	     cJSON_AddStringToObject(j, "containerId", s->container_id) &&
	     cJSON_AddStringToObject(j, "ifname", s->ifname) && cJSON_AddStringToObject(j, "netns", s->netns);
	if (!ok)
		return NULL;

	o = cJSON_AddObjectToObject(j, "pod");
	ok = o && cJSON_AddStringToObject(o, "namespace", s->pod_namespace) &&
	     cJSON_AddStringToObject(o, "name", s->pod_name) && cJSON_AddStringToObject(o, "uid", s->pod_uid);
	ok = ok && cJSON_AddStringToObject(j, "network", s->network) &&
	     cJSON_AddStringToObject(j, "class", cls ? cls : "default") &&
	     cJSON_AddStringToObject(j, "profile", s->profile);
	if (!ok || (s->has_profile_spec && !cJSON_AddItemToObject(j, "profileSpec", profile_to_json(&s->profile_spec))))
		return NULL;

	o = cJSON_AddObjectToObject(j, "workload");
	ok = o && cJSON_AddNumberToObject(o, "egressBps", (double)s->workload.egress_bps) &&
	     cJSON_AddNumberToObject(o, "ingressBps", (double)s->workload.ingress_bps) &&
	     cJSON_AddStringToObject(o, "profileRequested", s->workload.profile);
	ok = ok && cJSON_AddStringToObject(j, "annotationsSource", s->annotations_source);
	if (!ok)
		return NULL;

	o = cJSON_AddObjectToObject(j, "ifaces");
	ok = o && cJSON_AddStringToObject(o, "pod", s->ifs.pod_ifname) &&
	     cJSON_AddStringToObject(o, "host", s->ifs.host_ifname) &&
	     cJSON_AddNumberToObject(o, "podIfindex", s->pod_ifindex) &&
	     cJSON_AddNumberToObject(o, "hostIfindex", s->host_ifindex) &&
	     cJSON_AddNumberToObject(o, "mtu", s->ifs.mtu);
	if (!ok)
		return NULL;

	a = cJSON_AddArrayToObject(j, "ips");
	if (!a)
		return NULL;
	for (unsigned i = 0; i < s->n_ips && i < ARRAY_SIZE(s->ips); i++)
		if (!cJSON_AddItemToArray(a, cJSON_CreateString(s->ips[i])))
			return NULL;

	if (!cJSON_AddItemToObject(j, "choices", plan_choices_to_json(&s->plan)))
		return NULL;
	if (!cJSON_AddItemToObject(j, "effective", effective_to_json(s)))
		return NULL;
	if (!cJSON_AddItemToObject(j, "degraded", degraded_to_json(&s->plan)))
		return NULL;
	ok = cJSON_AddStringToObject(j, "failure", s->failure) &&
	     cJSON_AddNumberToObject(j, "updated", (double)s->updated_unix);
	if (!ok || (s->pending && !cJSON_AddTrueToObject(j, "pending")))
		return NULL;
	if (s->pending && !cJSON_AddItemToObject(j, "intent", intent_to_json(&s->intent)))
		return NULL;
	return TAKE_PTR(j);
}

/* ---- reading ---- */

/* obj[name] as a string copied into buf. Absent: "" unless required. */
static int get_str(const cJSON *obj, const char *ctx, const char *name, bool required, char *buf, size_t size,
                   struct error *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

	buf[0] = '\0';
	if (!v || cJSON_IsNull(v)) {
		if (required)
			return error_set(err, EINVAL, "field '%s%s' is missing", ctx, name);
		return 0;
	}
	if (!cJSON_IsString(v) || !v->valuestring)
		return error_set(err, EINVAL, "field '%s%s' is not a string", ctx, name);
	if (str_copy(buf, size, v->valuestring) < 0)
		return error_set(err, EINVAL, "field '%s%s' is longer than %zu characters", ctx, name, size - 1);
	return 0;
}

/* obj[name] as an integer in [min, max]. Absent: 0 unless required. */
static int get_int(const cJSON *obj, const char *ctx, const char *name, bool required, double min, double max,
                   int64_t *ret, struct error *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
	double d;

	*ret = 0;
	if (!v || cJSON_IsNull(v)) {
		if (required)
			return error_set(err, EINVAL, "field '%s%s' is missing", ctx, name);
		return 0;
	}
	if (!cJSON_IsNumber(v))
		return error_set(err, EINVAL, "field '%s%s' is not a number", ctx, name);
	d = v->valuedouble;
	if (!isfinite(d) || d != floor(d) || d < min || d > max)
		return error_set(err, ERANGE, "field '%s%s' = %g is not an integer in [%.0f, %.0f]", ctx, name, d, min,
		                 max);
	*ret = (int64_t)d;
	return 0;
}

static int get_obj(const cJSON *obj, const char *name, const cJSON **ret, struct error *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

	*ret = NULL;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsObject(v))
		return error_set(err, EINVAL, "field '%s' is not an object", name);
	*ret = v;
	return 0;
}

/* j["workload"] of a record or of its intent (ctx "" or "intent."): the
 * limits and the requested profile; absent: w unchanged. */
static int workload_from_json(const cJSON *j, const char *ctx, struct workload *w, struct error *err)
{
	const cJSON *o;
	char path[32];
	int64_t v;
	int r;

	if ((r = get_obj(j, "workload", &o, err)) < 0 || !o)
		return r;
	snprintf(path, sizeof(path), "%sworkload.", ctx);
	if ((r = get_int(o, path, "egressBps", false, 0, (double)BW_MAX_BPS, &v, err)) < 0)
		return r;
	w->egress_bps = (uint64_t)v;
	if ((r = get_int(o, path, "ingressBps", false, 0, (double)BW_MAX_BPS, &v, err)) < 0)
		return r;
	w->ingress_bps = (uint64_t)v;
	return get_str(o, path, "profileRequested", false, w->profile, sizeof(w->profile), err);
}

void attach_state_free(struct attach_state *s)
{
	if (!s)
		return;
	plan_free(&s->plan);
	free(s);
}

/* "intent" of a pending record; absent (older writers: only ADD wrote
 * intent records) is an ADD's. Errors name the field. */
static int intent_from_json(const cJSON *j, struct attach_state *s, struct error *err)
{
	struct attach_intent *in = &s->intent;
	const cJSON *o;
	char name[32], cls[32];
	int64_t v;
	int r;

	memset(in, 0, sizeof(*in));
	in->op = ATTACH_OP_ADD;
	if (!j || cJSON_IsNull(j))
		return 0;
	if (!cJSON_IsObject(j))
		return error_set(err, EINVAL, "field 'intent' is not an object");
	if ((r = get_str(j, "intent.", "op", true, name, sizeof(name), err)) < 0)
		return r;
	in->op = attach_op_from_name(name);
	if (in->op == _ATTACH_OP_INVALID || in->op == ATTACH_OP_NONE)
		return error_set(err, EINVAL, "field 'intent.op' = '%s' is not one of add, retune, teardown", name);
	if (in->op != ATTACH_OP_RETUNE && !cJSON_GetObjectItemCaseSensitive(j, "class"))
		return 0;
	in->has_target = true;
	if ((r = get_str(j, "intent.", "class", true, cls, sizeof(cls), err)) < 0 ||
	    (r = get_str(j, "intent.", "profile", false, in->profile, sizeof(in->profile), err)) < 0)
		return r;
	in->workload.class = workload_class_from_name(cls);
	if (in->workload.class == _CLASS_INVALID)
		return error_set(err, EINVAL, "field 'intent.class' = '%s' is not a workload class", cls);
	o = cJSON_GetObjectItemCaseSensitive(j, "profileSpec");
	if (!cJSON_IsObject(o))
		return error_set(err, EINVAL, "field 'intent.profileSpec' is missing");
	r = profile_from_json(in->profile[0] ? in->profile : "unnamed", o, &in->profile_spec, err);
	if (r < 0) {
		error_prefix(err, "field 'intent.profileSpec'");
		return r;
	}
	if ((r = workload_from_json(j, "intent.", &in->workload, err)) < 0)
		return r;
	if ((r = get_obj(j, "ifaces", &o, err)) < 0)
		return r;
	in->ifs = s->ifs;
	if (o) {
		if ((r = get_str(o, "intent.ifaces.", "host", false, in->ifs.host_ifname, sizeof(in->ifs.host_ifname),
		                 err)) < 0)
			return r;
		if ((r = get_int(o, "intent.ifaces.", "mtu", false, 0, 65535 * 4, &v, err)) < 0)
			return r;
		in->ifs.mtu = (uint32_t)v;
	}
	return 0;
}

int state_from_json(const struct cJSON *j, struct attach_state *ret, struct cJSON **ret_choices, struct error *err)
{
	_cleanup_attach_state_ struct attach_state *s = NULL;
	const cJSON *o, *a, *choices;
	char cls[32];
	int64_t v;
	int r;

	if (ret_choices)
		*ret_choices = NULL;
	if (!cJSON_IsObject(j))
		return error_set(err, EINVAL, "not a JSON object");
	s = calloc(1, sizeof(*s));
	if (!s)
		return error_set(err, ENOMEM, "out of memory");

	r = get_int(j, "", "version", true, 0, 1e6, &v, err);
	if (r < 0)
		return r;
	if (v != STATE_VERSION)
		return error_set(err, EPROTO, "field 'version' = %lld is not supported (want %d)", (long long)v,
		                 STATE_VERSION);
	if ((r = get_str(j, "", "containerId", true, s->container_id, sizeof(s->container_id), err)) < 0 ||
	    (r = get_str(j, "", "ifname", true, s->ifname, sizeof(s->ifname), err)) < 0)
		return r;
	r = state_check_id(s->container_id, s->ifname, err);
	if (r < 0) {
		error_prefix(err, "field 'containerId'/'ifname'");
		return r;
	}
	if ((r = get_str(j, "", "netns", false, s->netns, sizeof(s->netns), err)) < 0 ||
	    (r = get_str(j, "", "network", false, s->network, sizeof(s->network), err)) < 0 ||
	    (r = get_str(j, "", "profile", false, s->profile, sizeof(s->profile), err)) < 0 ||
	    (r = get_str(j, "", "annotationsSource", false, s->annotations_source, sizeof(s->annotations_source),
	                 err)) < 0 ||
	    (r = get_str(j, "", "failure", false, s->failure, sizeof(s->failure), err)) < 0 ||
	    (r = get_str(j, "", "class", true, cls, sizeof(cls), err)) < 0)
		return r;
	s->workload.class = workload_class_from_name(cls);
	if (s->workload.class == _CLASS_INVALID)
		return error_set(err, EINVAL, "field 'class' = '%s' is not a workload class", cls);
	r = get_int(j, "", "updated", true, 0, 1e15, &s->updated_unix, err);
	if (r < 0)
		return r;
	o = cJSON_GetObjectItemCaseSensitive(j, "pending");
	if (o && !cJSON_IsBool(o))
		return error_set(err, EINVAL, "field 'pending' is not a boolean");
	s->pending = cJSON_IsTrue(o);

	if ((r = get_obj(j, "pod", &o, err)) < 0)
		return r;
	if (o && ((r = get_str(o, "pod.", "namespace", false, s->pod_namespace, sizeof(s->pod_namespace), err)) < 0 ||
	          (r = get_str(o, "pod.", "name", false, s->pod_name, sizeof(s->pod_name), err)) < 0 ||
	          (r = get_str(o, "pod.", "uid", false, s->pod_uid, sizeof(s->pod_uid), err)) < 0))
		return r;

	o = cJSON_GetObjectItemCaseSensitive(j, "profileSpec");
	if (o && !cJSON_IsNull(o)) {
		r = profile_from_json(s->profile[0] ? s->profile : "unnamed", o, &s->profile_spec, err);
		if (r < 0) {
			error_prefix(err, "field 'profileSpec'");
			return r;
		}
		s->has_profile_spec = true;
	}

	if ((r = workload_from_json(j, "", &s->workload, err)) < 0)
		return r;

	if ((r = get_obj(j, "ifaces", &o, err)) < 0)
		return r;
	if (o) {
		if ((r = get_str(o, "ifaces.", "pod", false, s->ifs.pod_ifname, sizeof(s->ifs.pod_ifname), err)) < 0 ||
		    (r = get_str(o, "ifaces.", "host", false, s->ifs.host_ifname, sizeof(s->ifs.host_ifname), err)) < 0)
			return r;
		if ((r = get_int(o, "ifaces.", "podIfindex", false, 0, INT32_MAX, &v, err)) < 0)
			return r;
		s->pod_ifindex = (int)v;
		if ((r = get_int(o, "ifaces.", "hostIfindex", false, 0, INT32_MAX, &v, err)) < 0)
			return r;
		s->host_ifindex = (int)v;
		if ((r = get_int(o, "ifaces.", "mtu", false, 0, 65535 * 4, &v, err)) < 0)
			return r;
		s->ifs.mtu = (uint32_t)v;
	}

	a = cJSON_GetObjectItemCaseSensitive(j, "ips");
	if (a && !cJSON_IsNull(a)) {
		const cJSON *ip;
		if (!cJSON_IsArray(a))
			return error_set(err, EINVAL, "field 'ips' is not an array");
		if (cJSON_GetArraySize(a) > (int)ARRAY_SIZE(s->ips))
			return error_set(err, E2BIG, "field 'ips' has more than %zu entries", ARRAY_SIZE(s->ips));
		cJSON_ArrayForEach(ip, a)
		{
			if (!cJSON_IsString(ip) || str_copy(s->ips[s->n_ips], sizeof(s->ips[0]), ip->valuestring) < 0)
				return error_set(err, EINVAL,
				                 "field 'ips[%u]' is not an address string of at most %zu characters",
				                 s->n_ips, sizeof(s->ips[0]) - 1);
			s->n_ips++;
		}
	}

	choices = cJSON_GetObjectItemCaseSensitive(j, "choices");
	if (!choices)
		return error_set(err, EINVAL, "field 'choices' is missing");
	if (!cJSON_IsArray(choices) && !cJSON_IsObject(choices))
		return error_set(err, EINVAL, "field 'choices' is not an array or object");
	/* last: a re-tune's target defaults to the interfaces read above */
	if (s->pending && (r = intent_from_json(cJSON_GetObjectItemCaseSensitive(j, "intent"), s, err)) < 0)
		return r;
	if (ret_choices) {
		*ret_choices = cJSON_Duplicate(choices, true);
		if (!*ret_choices)
			return error_set(err, ENOMEM, "copy field 'choices': out of memory");
	}
	plan_free(&ret->plan); /* ret's earlier plan, if any */
	*ret = *s;
	s->plan = (struct plan){0}; /* empty: nothing moves with the copy */
	return 0;
}

int state_write_atomic(const char *dir, const char *path, const char *what, const char *text, bool durable,
                       struct error *err)
{
	char tmp[PATH_MAX];
	_cleanup_close_ int fd = -1;
	int r, n;

	n = snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return error_set(err, ENAMETOOLONG, "%s path '%s' is too long", what, path);
	/* The directory is there but for the first save: only then create it
	 * (mkdir_p also says what is wrong with a path that cannot be one). */
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 && dir && (errno == ENOENT || errno == ENOTDIR)) {
		r = mkdir_p(dir, err);
		if (r < 0)
			return r;
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	}
	if (fd < 0 && errno == EEXIST) {
		/* left behind by a crashed process that had our pid */
		unlink(tmp);
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	}
	if (fd < 0)
		return error_set(err, errno, "create %s '%s': %s", what, tmp, strerror(errno));

	r = write_all(fd, text, strlen(text));
	if (r == 0)
		r = write_all(fd, "\n", 1);
	if (r < 0) {
		error_set(err, -r, "write %s '%s': %s", what, tmp, strerror(-r));
		goto fail;
	}
	/* No fsync unless durable: rename() makes the update atomic for every
	 * reader and against a crash of the writer, which is what matters.
	 * State describes attachments that do not survive a reboot (their
	 * netns die with it; GC and the agent drop stale records), and two
	 * fsyncs cost milliseconds on every pod start under I/O load. */
	if (durable && fsync(fd) < 0) {
		r = error_set(err, errno, "sync %s '%s': %s", what, tmp, strerror(errno));
		goto fail;
	}
	if (close(TAKE_FD(fd)) < 0) {
		r = error_set(err, errno, "close %s '%s': %s", what, tmp, strerror(errno));
		goto fail;
	}
	failpoint_quiet("state-before-rename");
	if (rename(tmp, path) < 0) {
		r = error_set(err, errno, "rename '%s' to '%s': %s", tmp, path, strerror(errno));
		goto fail;
	}
	return 0;
fail:
	unlink(tmp);
	return r;
}

int state_save(const char *dir, const struct attach_state *s, struct error *err)
{
	char path[STATE_PATH_MAX];
	_cleanup_json_ cJSON *j = NULL;
	_cleanup_free_ char *text = NULL;
	int r;

	r = path_for(dir, s->container_id, s->ifname, path, sizeof(path), err);
	if (r < 0)
		return r;
	j = state_to_json(s);
	if (!j)
		return error_set(err, ENOMEM, "encode state for '%s': out of memory", path);
	text = cJSON_Print(j);
	if (!text)
		return error_set(err, ENOMEM, "encode state for '%s': out of memory", path);
	return state_write_atomic(dir, path, "state file", text, false, err);
}

int state_load(const char *dir, const char *container_id, const char *ifname, struct attach_state *ret,
               struct cJSON **ret_choices, struct error *err)
{
	char path[STATE_PATH_MAX];
	_cleanup_free_ char *buf = NULL;
	_cleanup_json_ cJSON *j = NULL;
	size_t len = 0;
	int r;

	if (ret_choices)
		*ret_choices = NULL;
	r = path_for(dir, container_id, ifname, path, sizeof(path), err);
	if (r < 0)
		return r;
	r = file_read_bounded(path, STATE_FILE_MAX, FILE_READ_NOFOLLOW, &buf, &len, NULL, err);
	if (r < 0) {
		error_prefix(err, "state file '%s'", path);
		return r;
	}
	if (len == 0)
		return error_set(err, EINVAL, "state file '%s' is empty", path);
	buf[len] = '\0';
	if (memchr(buf, '\0', len))
		return error_set(err, EINVAL, "state file '%s' contains a NUL byte", path);
	{
		const char *end = NULL;
		/* len + 1: cJSON checks for the terminating NUL inside the length */
		j = cJSON_ParseWithLengthOpts(buf, len + 1, &end, true);
		if (!j) {
			size_t off = end && end >= buf && end <= buf + len ? (size_t)(end - buf) : len;
			return error_set(err, EINVAL, "state file '%s': invalid or truncated JSON at byte %zu of %zu",
			                 path, off, len);
		}
	}
	r = state_from_json(j, ret, ret_choices, err);
	if (r < 0) {
		error_prefix(err, "state file '%s'", path);
		return r;
	}
	if (!streq(ret->container_id, container_id) || !streq(ret->ifname, ifname)) {
		if (ret_choices) {
			cJSON_Delete(*ret_choices);
			*ret_choices = NULL;
		}
		return error_set(err, EINVAL, "state file '%s' belongs to %s/%s", path, ret->container_id, ret->ifname);
	}
	return 0;
}

int state_remove(const char *dir, const char *container_id, const char *ifname, struct error *err)
{
	char path[STATE_PATH_MAX];
	int r;

	r = path_for(dir, container_id, ifname, path, sizeof(path), err);
	if (r < 0)
		return r;
	if (unlink(path) < 0 && errno != ENOENT)
		return error_set(err, errno, "remove state file '%s': %s", path, strerror(errno));
	return 0;
}

/* ---- the state lock and temp-file sweeping ---- */

/* flock path, polled to bound the wait: 0.5 ms steps growing to 2 ms
 * (holders keep it for about a millisecond: a waiter is late by at most one
 * step); timeout_ms 0 tries once. With verify, the lock is taken only on the
 * file the path still names (a lock file is unlinked by its last user while
 * held: a waiter that got the old inode tries again). */
static int lock_path(const char *dir, const char *path, const char *what, unsigned timeout_ms, bool verify,
                     struct error *err)
{
	struct timespec pause = {.tv_sec = 0, .tv_nsec = 500000L};
	unsigned waited_us = 0;
	int fd, r;

	for (;;) {
		struct stat a, b;

		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0 && errno == ENOENT) {
			r = mkdir_p(dir, err);
			if (r < 0)
				return r;
			fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		}
		if (fd < 0 && (errno == EROFS || errno == EACCES))
			fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW); /* flock needs no write access */
		if (fd < 0)
			return error_set(err, errno, "open %s '%s': %s", what, path, strerror(errno));
		while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			int saved = errno;

			if (saved != EWOULDBLOCK && saved != EINTR) {
				close(fd);
				return error_set(err, saved, "lock '%s': %s", path, strerror(saved));
			}
			if (waited_us >= timeout_ms * 1000u) {
				close(fd);
				return error_set(err, ETIMEDOUT, "%s '%s' still held by another process after %u ms",
				                 what, path, timeout_ms);
			}
			nanosleep(&pause, NULL);
			waited_us += (unsigned)(pause.tv_nsec / 1000);
			if (pause.tv_nsec < 2000000L)
				pause.tv_nsec *= 2;
		}
		if (!verify ||
		    (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev))
			return fd;
		close(fd); /* unlinked meanwhile by its last holder: take the new one */
	}
}

int state_lock(const char *dir, unsigned timeout_ms, struct error *err)
{
	char path[STATE_PATH_MAX];
	int n;

	if (!dir || !*dir)
		return error_set(err, EINVAL, "state directory is empty");
	n = snprintf(path, sizeof(path), "%s/lock", dir);
	if (n < 0 || (size_t)n >= sizeof(path))
		return error_set(err, ENAMETOOLONG, "state directory '%s' is too long", dir);
	return lock_path(dir, path, "state lock", timeout_ms, false, err);
}

static int attachment_lock_path(const char *dir, const char *container_id, const char *ifname, char *buf, size_t size,
                                struct error *err)
{
	char stem[STATE_ID_MAX + IFNAME_ENC_MAX + 1];
	int n, r;

	if (!dir || !*dir)
		return error_set(err, EINVAL, "state directory is empty");
	r = state_check_id(container_id, ifname, err);
	if (r < 0)
		return r;
	r = state_stem(container_id, ifname, stem, sizeof(stem));
	n = r < 0 ? -1 : snprintf(buf, size, "%s/%s.lock", dir, stem);
	if (n < 0 || (size_t)n >= size)
		return error_set(err, ENAMETOOLONG, "lock path for %s/%s under '%s' is too long", container_id, ifname,
		                 dir);
	return 0;
}

int state_lock_attachment(const char *dir, const char *container_id, const char *ifname, unsigned timeout_ms,
                          struct error *err)
{
	char path[STATE_PATH_MAX];
	int r = attachment_lock_path(dir, container_id, ifname, path, sizeof(path), err);

	if (r < 0)
		return r;
	return lock_path(dir, path, "attachment lock", timeout_ms, true, err);
}

void state_unlock_attachment(int fd, const char *dir, const char *container_id, const char *ifname)
{
	char path[STATE_PATH_MAX], rec[STATE_PATH_MAX];

	if (fd < 0)
		return;
	/* the last user of an attachment (no record left) removes its lock
	 * file, still holding it: a waiter on the old file sees it gone */
	if (attachment_lock_path(dir, container_id, ifname, path, sizeof(path), NULL) == 0 &&
	    state_path(dir, container_id, ifname, rec, sizeof(rec)) == 0 && access(rec, F_OK) < 0 && errno == ENOENT)
		(void)unlink(path);
	close(fd);
}

void state_unlock(int fd)
{
	if (fd >= 0)
		close(fd); /* releases the flock */
}

/* A temp file of the plugin's ("<containerID>@<ifname>.json.tmp.<pid>",
 * of that attachment if prefix is given, or "kernel-caps.tmp.<pid>") whose
 * pid no longer runs. (Not the agent's uplink record: the agent writes it
 * without the lock, from another pid namespace. Its attachment records it
 * writes under the lock, so under the lock any of their temp files is
 * garbage, whatever its pid means here.) */
static bool tmp_is_stale(const char *name, const char *prefix, char cid[STATE_ID_MAX], char ifn[IFNAME_LEN])
{
	const char *t = NULL, *num;
	char *end;
	long pid;

	cid[0] = ifn[0] = '\0';
	if (!strncmp(name, CAPS_FILE ".tmp.", strlen(CAPS_FILE ".tmp."))) {
		num = name + strlen(CAPS_FILE ".tmp.");
	} else {
		/* the last ".json.tmp.": an interface name may hold the text */
		for (const char *p = strstr(name, ".json.tmp."); p; p = strstr(p + 1, ".json.tmp."))
			t = p;
		if (!t)
			return false;
		if (prefix && (strlen(prefix) != (size_t)(t - name) || strncmp(name, prefix, (size_t)(t - name)) != 0))
			return false;
		if (!stem_parse(name, (size_t)(t - name), cid, STATE_ID_MAX, ifn, IFNAME_LEN))
			return false;
		num = t + strlen(".json.tmp.");
	}
	errno = 0;
	pid = strtol(num, &end, 10);
	if (errno || *end || pid <= 0 || pid > INT_MAX)
		return false;
	return kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

int state_sweep_tmp(const char *dir, const char *container_id, const char *ifname)
{
	_cleanup_(closedirp) DIR *d = NULL;
	char prefix[STATE_ID_MAX + IFNAME_ENC_MAX + 1];
	struct dirent *de;
	int removed = 0;

	if (container_id && state_stem(container_id, ifname, prefix, sizeof(prefix)) < 0)
		return 0;
	d = dir && *dir ? opendir(dir) : NULL;
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char cid[STATE_ID_MAX], ifn[IFNAME_LEN];
		int lock = -1;

		if (!tmp_is_stale(de->d_name, container_id ? prefix : NULL, cid, ifn))
			continue;
		/* another attachment's: only under its lock (the agent writes
		 * records from another pid namespace); busy = not now */
		if (!container_id && cid[0]) {
			lock = state_lock_attachment(dir, cid, ifn, 0, NULL);
			if (lock < 0)
				continue;
		}
		if (unlinkat(dirfd(d), de->d_name, 0) == 0)
			removed++;
		state_unlock_attachment(lock, dir, cid, ifn);
	}
	return removed;
}

int state_list(const char *dir, int (*cb)(const char *container_id, const char *ifname, void *userdata), void *userdata,
               struct error *err)
{
	_cleanup_(closedirp) DIR *d = NULL;
	struct dirent *de;

	if (!dir || !*dir)
		return error_set(err, EINVAL, "state directory is empty");
	d = opendir(dir);
	if (!d) {
		if (errno == ENOENT)
			return 0; /* nothing was ever saved */
		return error_set(err, errno, "open state directory '%s': %s", dir, strerror(errno));
	}
	for (;;) {
		char cid[STATE_ID_MAX], ifn[IFNAME_LEN];
		int r;

		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno)
				return error_set(err, errno, "read state directory '%s': %s", dir, strerror(errno));
			break;
		}
		if (de->d_type != DT_REG && de->d_type != DT_UNKNOWN)
			continue;
		/* temp files end in .tmp.<pid>; other names are not ours */
		if (!state_file_parse(de->d_name, cid, sizeof(cid), ifn, sizeof(ifn)))
			continue;
		r = cb(cid, ifn, userdata);
		if (r < 0)
			return r;
	}
	return 0;
}
