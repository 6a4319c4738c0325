/* conf.c — the request as the runtime hands it over: the network config on
 * stdin (with runtimeConfig and prevResult), the CNI_* environment and
 * CNI_ARGS. Everything is validated up front; errors carry the CNI code
 * (errors.h) and name the key or variable and its value. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stddef.h>
#include <strings.h>

#include "cni.h"
#include "ifname.h"
#include "k8s.h"

static const char *const command_names[_CNI_CMD_MAX] = {
        [CNI_CMD_ADD] = "ADD",       [CNI_CMD_DEL] = "DEL", [CNI_CMD_CHECK] = "CHECK",
        [CNI_CMD_STATUS] = "STATUS", [CNI_CMD_GC] = "GC",   [CNI_CMD_VERSION] = "VERSION",
};

static const char *const version_names[_CNI_V_MAX] = {
        [CNI_V_0_3_0] = "0.3.0", [CNI_V_0_3_1] = "0.3.1", [CNI_V_0_4_0] = "0.4.0",
        [CNI_V_1_0_0] = "1.0.0", [CNI_V_1_1_0] = "1.1.0",
};

static const char *const policy_names[_CNI_POLICY_MAX] = {
        [CNI_POLICY_OPEN] = "open",
        [CNI_POLICY_CLOSED] = "closed",
};

#define SUPPORTED_VERSIONS "0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0"
#define MSG_VALUE_MAX      80 /* how much of a bad value a message quotes */

const char *cni_command_name(enum cni_command c)
{
	return c >= 0 && c < _CNI_CMD_MAX ? command_names[c] : NULL;
}

enum cni_command cni_command_from_name(const char *s)
{
	for (int i = 0; s && i < _CNI_CMD_MAX; i++)
		if (streq(s, command_names[i]))
			return (enum cni_command)i;
	return _CNI_CMD_INVALID;
}

const char *cni_version_name(enum cni_version v)
{
	return v >= 0 && v < _CNI_V_MAX ? version_names[v] : NULL;
}

enum cni_version cni_version_from_name(const char *s)
{
	for (int i = 0; s && i < _CNI_V_MAX; i++)
		if (streq(s, version_names[i]))
			return (enum cni_version)i;
	return _CNI_V_INVALID;
}

const char *cni_failure_policy_name(enum cni_failure_policy p)
{
	return p >= 0 && p < _CNI_POLICY_MAX ? policy_names[p] : NULL;
}

int cni_version_check_command(enum cni_version v, enum cni_command c, struct error *err)
{
	enum cni_version min = CNI_V_0_3_0;

	if (c == CNI_CMD_CHECK)
		min = CNI_V_0_4_0;
	else if (c == CNI_CMD_STATUS || c == CNI_CMD_GC)
		min = CNI_V_1_1_0;
	if (v >= min)
		return 0;
	return cni_error_set(err, CNI_ERR_VERSION, ENOTSUP,
	                     "%s is not supported with cniVersion %s (needs %s or later)", cni_command_name(c),
	                     cni_version_name(v), cni_version_name(min));
}

const char *cni_sanitize(const char *s, char *buf, size_t size)
{
	size_t n = 0;

	if (size == 0)
		return "";
	if (!s)
		s = "";
	for (; *s && n + 1 < size; s++)
		buf[n++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
	buf[n] = '\0';
	if (*s && size >= 4)
		memcpy(buf + size - 4, "...", 4);
	return buf;
}

/* ---- JSON helpers: absent and null are the same for optional keys ---- */

static const cJSON *obj_get(const cJSON *obj, const char *key)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsNull(j) ? NULL : j;
}

/* path: the key as the message shows it ("prevResult.ips[0].address"). */
static int json_string(const cJSON *j, const char *path, size_t max, const char **ret, struct error *err)
{
	char v[MSG_VALUE_MAX];

	*ret = NULL;
	if (!j)
		return 0;
	if (!cJSON_IsString(j) || !j->valuestring)
		return cni_error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL, "%s: expected a string", path);
	if (max && strlen(j->valuestring) >= max)
		return cni_error_set(err, CNI_ERR_INVALID_CONFIG, ENAMETOOLONG,
		                     "%s: \"%s\" is longer than %zu characters", path,
		                     cni_sanitize(j->valuestring, v, sizeof(v)), max - 1);
	*ret = j->valuestring;
	return 0;
}

static int copy_string(const cJSON *j, const char *path, char *buf, size_t size, struct error *err)
{
	const char *s;
	int r = json_string(j, path, size, &s, err);
	if (r < 0)
		return r;
	if (s)
		str_copy(buf, size, s);
	return 0;
}

static int json_bool(const cJSON *j, const char *path, bool *ret, struct error *err)
{
	if (!j)
		return 0;
	if (!cJSON_IsBool(j))
		return cni_error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL, "%s: expected a boolean", path);
	*ret = cJSON_IsTrue(j);
	return 0;
}

static int json_object(const cJSON *j, const char *path, const cJSON **ret, struct error *err)
{
	*ret = NULL;
	if (!j)
		return 0;
	if (!cJSON_IsObject(j))
		return cni_error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL, "%s: expected an object", path);
	*ret = j;
	return 0;
}

static int json_array(const cJSON *j, const char *path, const cJSON **ret, struct error *err)
{
	*ret = NULL;
	if (!j)
		return 0;
	if (!cJSON_IsArray(j))
		return cni_error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL, "%s: expected an array", path);
	*ret = j;
	return 0;
}

static int json_int(const cJSON *j, const char *path, long lo, long hi, long *ret, struct error *err)
{
	double d;

	if (!j)
		return 0;
	if (!cJSON_IsNumber(j))
		return cni_error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL, "%s: expected an integer", path);
	d = j->valuedouble;
	if (!isfinite(d) || d != floor(d) || d < (double)lo || d > (double)hi)
		return cni_error_set(err, CNI_ERR_INVALID_CONFIG, ERANGE, "%s: %g is not an integer in %ld..%ld", path,
		                     d, lo, hi);
	*ret = (long)d;
	return 0;
}

static int absolute_path(const cJSON *j, const char *path, char *buf, size_t size, struct error *err)
{
	char v[MSG_VALUE_MAX];
	const char *s;
	int r = json_string(j, path, size, &s, err);

	if (r < 0 || !s)
		return r;
	if (s[0] != '/')
		return cni_error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL, "%s: \"%s\" is not an absolute path", path,
		                     cni_sanitize(s, v, sizeof(v)));
	str_copy(buf, size, s);
	return 0;
}

/* ---- prevResult ---- */

static int prev_iface_parse(const cJSON *j, unsigned i, struct cni_prev_iface *ret, struct error *err)
{
	char path[96];
	int r;

	snprintf(path, sizeof(path), "prevResult.interfaces[%u]", i);
	if (!cJSON_IsObject(j))
		return cni_error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL, "%s: expected an object", path);
	snprintf(path, sizeof(path), "prevResult.interfaces[%u].name", i);
	if (!obj_get(j, "name"))
		return cni_error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL, "%s: required key missing", path);
	r = copy_string(obj_get(j, "name"), path, ret->name, sizeof(ret->name), err);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "prevResult.interfaces[%u].mac", i);
	r = copy_string(obj_get(j, "mac"), path, ret->mac, sizeof(ret->mac), err);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "prevResult.interfaces[%u].sandbox", i);
	return copy_string(obj_get(j, "sandbox"), path, ret->sandbox, sizeof(ret->sandbox), err);
}

static int prev_ip_parse(const cJSON *j, unsigned i, struct cni_prev_ip *ret, struct error *err)
{
	char path[96];
	long idx = -1;
	int r;

	snprintf(path, sizeof(path), "prevResult.ips[%u]", i);
	if (!cJSON_IsObject(j))
		return cni_error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL, "%s: expected an object", path);
	snprintf(path, sizeof(path), "prevResult.ips[%u].address", i);
	if (!obj_get(j, "address"))
		return cni_error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL, "%s: required key missing", path);
	r = copy_string(obj_get(j, "address"), path, ret->address, sizeof(ret->address), err);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "prevResult.ips[%u].interface", i);
	r = json_int(obj_get(j, "interface"), path, 0, 65535, &idx, err);
	if (r < 0)
		return r;
	ret->interface = (int)idx;
	return 0;
}

int cni_prev_result_parse(const cJSON *j, struct cni_prev_result *ret, struct error *err)
{
	const cJSON *ifaces, *ips, *e;
	unsigned i;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (!cJSON_IsObject(j))
		return cni_error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL, "prevResult: expected an object");
	r = json_array(obj_get(j, "interfaces"), "prevResult.interfaces", &ifaces, err);
	if (r < 0)
		return r;
	r = json_array(obj_get(j, "ips"), "prevResult.ips", &ips, err);
	if (r < 0)
		return r;

	/* Every entry is type-checked; only the first ones are kept. */
	i = 0;
	cJSON_ArrayForEach(e, ifaces)
	{
		struct cni_prev_iface tmp = {0};
		r = prev_iface_parse(e, i, &tmp, err);
		if (r < 0)
			return r;
		if (ret->n_ifaces < CNI_PREV_IFACES_MAX)
			ret->ifaces[ret->n_ifaces++] = tmp;
		i++;
	}
	i = 0;
	cJSON_ArrayForEach(e, ips)
	{
		struct cni_prev_ip tmp = {0};
		r = prev_ip_parse(e, i, &tmp, err);
		if (r < 0)
			return r;
		if (ret->n_ips < CNI_PREV_IPS_MAX)
			ret->ips[ret->n_ips++] = tmp;
		i++;
	}
	return 0;
}

bool cni_prev_has_host_iface(const struct cni_prev_result *p, const char *name)
{
	for (unsigned i = 0; i < p->n_ifaces; i++)
		if (p->ifaces[i].sandbox[0] == '\0' && streq(p->ifaces[i].name, name))
			return true;
	return false;
}

unsigned cni_prev_count_host_ifaces(const struct cni_prev_result *p)
{
	unsigned n = 0;
	for (unsigned i = 0; i < p->n_ifaces; i++)
		if (p->ifaces[i].sandbox[0] == '\0')
			n++;
	return n;
}

/* ---- the network config ---- */

static int valid_attachments_check(const cJSON *list, struct error *err)
{
	const cJSON *e;
	unsigned i = 0;

	cJSON_ArrayForEach(e, list)
	{
		char path[96];
		const char *s;
		int r;

		if (!cJSON_IsObject(e))
			return cni_error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL,
			                     CNI_KEY_VALID_ATTACHMENTS "[%u]: expected an object", i);
		snprintf(path, sizeof(path), CNI_KEY_VALID_ATTACHMENTS "[%u].containerID", i);
		r = json_string(obj_get(e, "containerID"), path, 0, &s, err);
		if (r < 0)
			return r;
		if (!s)
			return cni_error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL, "%s: required key missing", path);
		snprintf(path, sizeof(path), CNI_KEY_VALID_ATTACHMENTS "[%u].ifname", i);
		r = json_string(obj_get(e, "ifname"), path, 0, &s, err);
		if (r < 0)
			return r;
		if (!s)
			return cni_error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL, "%s: required key missing", path);
		i++;
	}
	return 0;
}

static int runtime_config_parse(const cJSON *root, struct cni_conf *c, struct error *err)
{
	const cJSON *rc;
	int r;

	r = json_object(obj_get(root, "runtimeConfig"), "runtimeConfig", &rc, err);
	if (r < 0 || !rc)
		return r;
	r = json_object(obj_get(rc, CNI_KEY_POD_ANNOTATIONS), "runtimeConfig." CNI_KEY_POD_ANNOTATIONS,
	                &c->runtime_annotations, err);
	if (r < 0)
		return r;
	return json_object(obj_get(rc, CNI_KEY_BANDWIDTH), "runtimeConfig." CNI_KEY_BANDWIDTH, &c->runtime_bandwidth,
	                   err);
}

static int conf_fill(const cJSON *root, struct cni_conf *c, struct error *err)
{
	char v[MSG_VALUE_MAX];
	const cJSON *j;
	const char *s;
	long ms;
	int r;

	if (!cJSON_IsObject(root))
		return cni_error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL,
		                     "network configuration must be a JSON object");

	/* cniVersion first: it decides how everything else is read. */
	j = obj_get(root, "cniVersion");
	if (!j)
		return cni_error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL, "cniVersion: required key missing");
	r = json_string(j, "cniVersion", 0, &s, err);
	if (r < 0)
		return r;
	c->version = cni_version_from_name(s);
	if (c->version == _CNI_V_INVALID)
		return cni_error_set(err, CNI_ERR_VERSION, ENOTSUP, "unsupported cniVersion \"%s\" (supported: %s)",
		                     cni_sanitize(s, v, sizeof(v)), SUPPORTED_VERSIONS);
	str_copy(c->cni_version, sizeof(c->cni_version), s);

	j = obj_get(root, "name");
	if (!j)
		return cni_error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL, "name: required key missing");
	r = copy_string(j, "name", c->name, sizeof(c->name), err);
	if (r < 0)
		return r;
	r = copy_string(obj_get(root, "type"), "type", c->type, sizeof(c->type), err);
	if (r < 0)
		return r;
	r = json_object(obj_get(root, "capabilities"), "capabilities", &j, err);
	if (r < 0)
		return r;

	r = absolute_path(obj_get(root, "agentSocket"), "agentSocket", c->agent_socket, sizeof(c->agent_socket), err);
	if (r < 0)
		return r;
	r = json_bool(obj_get(root, "agentRequired"), "agentRequired", &c->agent_required, err);
	if (r < 0)
		return r;
	ms = c->agent_timeout_ms;
	r = json_int(obj_get(root, "agentTimeoutMs"), "agentTimeoutMs", 1, CNI_AGENT_TIMEOUT_MS_MAX, &ms, err);
	if (r < 0)
		return r;
	c->agent_timeout_ms = (int)ms;
	r = absolute_path(obj_get(root, "stateDir"), "stateDir", c->state_dir, sizeof(c->state_dir), err);
	if (r < 0)
		return r;

	r = json_string(obj_get(root, "failurePolicy"), "failurePolicy", 0, &s, err);
	if (r < 0)
		return r;
	if (s) {
		if (streq(s, "open"))
			c->failure_policy = CNI_POLICY_OPEN;
		else if (streq(s, "closed"))
			c->failure_policy = CNI_POLICY_CLOSED;
		else
			return cni_error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL,
			                     "failurePolicy: invalid value \"%s\" (want \"open\" or \"closed\")",
			                     cni_sanitize(s, v, sizeof(v)));
	}

	r = absolute_path(obj_get(root, "logFile"), "logFile", c->log_file, sizeof(c->log_file), err);
	if (r < 0)
		return r;
	r = json_string(obj_get(root, "logLevel"), "logLevel", 0, &s, err);
	if (r < 0)
		return r;
	if (s) {
		enum log_level l = log_level_from_name(s);
		if (l == _LOG_LVL_INVALID)
			return cni_error_set(err, CNI_ERR_INVALID_CONFIG, EINVAL,
			                     "logLevel: invalid value \"%s\" (want error, warn, info or debug)",
			                     cni_sanitize(s, v, sizeof(v)));
		c->log_level = l;
	}

	r = json_object(obj_get(root, "profiles"), "profiles", &j, err);
	if (r < 0)
		return r;
	if (j) {
		r = profile_set_merge_json(&c->profiles, j, err);
		if (r < 0) /* its messages already name "profiles.<name>.<key>" */
			return cni_error_code(err, CNI_ERR_INVALID_CONFIG, r);
	}

	r = runtime_config_parse(root, c, err);
	if (r < 0)
		return r;

	r = json_object(obj_get(root, "prevResult"), "prevResult", &c->prev_result, err);
	if (r < 0)
		return r;
	if (c->prev_result) {
		r = cni_prev_result_parse(c->prev_result, &c->prev, err);
		if (r < 0)
			return r;
	}

	j = cJSON_GetObjectItemCaseSensitive(root, CNI_KEY_VALID_ATTACHMENTS);
	if (j) {
		c->has_valid_attachments = true;
		r = json_array(obj_get(root, CNI_KEY_VALID_ATTACHMENTS), CNI_KEY_VALID_ATTACHMENTS,
		               &c->valid_attachments, err);
		if (r < 0)
			return r;
		r = valid_attachments_check(c->valid_attachments, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int cni_conf_parse(const char *data, size_t len, struct cni_conf *ret, struct error *err)
{
	_cleanup_free_ char *buf = NULL;
	const char *end = NULL;
	int r;

	memset(ret, 0, sizeof(*ret));
	ret->version = _CNI_V_INVALID;
	str_copy(ret->agent_socket, sizeof(ret->agent_socket), PROTO_DEFAULT_SOCKET);
	ret->agent_timeout_ms = CNI_AGENT_TIMEOUT_MS_DEFAULT;
	str_copy(ret->state_dir, sizeof(ret->state_dir), CNI_STATE_DIR_DEFAULT);
	ret->failure_policy = CNI_POLICY_OPEN;
	ret->log_level = LOG_LVL_WARN;
	profile_set_builtin(&ret->profiles);

	if (len > CNI_STDIN_MAX)
		return cni_error_set(err, CNI_ERR_DECODE, EFBIG,
		                     "cannot decode network configuration: larger than %d bytes", CNI_STDIN_MAX);
	if (memchr(data, '\0', len))
		return cni_error_set(err, CNI_ERR_DECODE, EINVAL,
		                     "cannot decode network configuration: NUL byte at offset %zu",
		                     (size_t)((const char *)memchr(data, '\0', len) - data));
	/* cJSON wants the terminator inside the length to refuse trailing garbage. */
	buf = malloc(len + 1);
	if (!buf)
		return cni_error_set(err, CNI_ERR_IO, ENOMEM, "cannot decode network configuration: out of memory");
	memcpy(buf, data, len);
	buf[len] = '\0';
	ret->root = cJSON_ParseWithLengthOpts(buf, len + 1, &end, 1);
	if (!ret->root) {
		size_t off = end && end >= buf && end <= buf + len ? (size_t)(end - buf) : 0;
		return cni_error_set(err, CNI_ERR_DECODE, EINVAL,
		                     "cannot decode network configuration: invalid JSON at offset %zu", off);
	}
	r = conf_fill(ret->root, ret, err);
	if (r < 0)
		return r;
	return 0;
}

void cni_conf_free(struct cni_conf *c)
{
	if (!c)
		return;
	cJSON_Delete(c->root);
	c->root = NULL;
	c->runtime_annotations = NULL;
	c->runtime_bandwidth = NULL;
	c->prev_result = NULL;
	c->valid_attachments = NULL;
}

/* ---- environment ---- */

/* CNI spec: container IDs are [A-Za-z0-9][A-Za-z0-9_.-]*; also bounded here. */
static bool container_id_valid(const char *s)
{
	return cni_id_valid(s, STATE_ID_MAX - 1);
}

static bool set(const char *s)
{
	return s && s[0];
}

int cni_env_check(enum cni_command cmd, const struct cni_env *env, struct error *err)
{
	bool need_id = cmd == CNI_CMD_ADD || cmd == CNI_CMD_DEL || cmd == CNI_CMD_CHECK;
	bool need_netns = cmd == CNI_CMD_ADD || cmd == CNI_CMD_CHECK;
	char v[MSG_VALUE_MAX];

	if (!need_id)
		return 0;
	if (!set(env->container_id))
		return cni_error_set(err, CNI_ERR_ENV, EINVAL,
		                     "required environment variable CNI_CONTAINERID is not set");
	if (need_netns && !set(env->netns))
		return cni_error_set(err, CNI_ERR_ENV, EINVAL, "required environment variable CNI_NETNS is not set");
	if (!set(env->ifname))
		return cni_error_set(err, CNI_ERR_ENV, EINVAL, "required environment variable CNI_IFNAME is not set");

	if (!container_id_valid(env->container_id))
		return cni_error_set(
		        err, CNI_ERR_ENV, EINVAL,
		        "CNI_CONTAINERID: invalid value \"%s\" (want letters, digits, '_', '.', '-', starting "
		        "with a letter or digit, at most %d characters)",
		        cni_sanitize(env->container_id, v, sizeof(v)), STATE_ID_MAX - 1);
	if (!ifname_valid(env->ifname))
		return cni_error_set(
		        err, CNI_ERR_ENV, EINVAL,
		        "CNI_IFNAME: invalid interface name \"%s\" (want 1-%d bytes, no '/', ':' or whitespace, "
		        "not '.' or '..')",
		        cni_sanitize(env->ifname, v, sizeof(v)), IFNAME_LEN - 1);
	if (set(env->netns) && (env->netns[0] != '/' || strlen(env->netns) >= STATE_PATH_MAX))
		return cni_error_set(err, CNI_ERR_ENV, EINVAL,
		                     "CNI_NETNS: \"%s\" is not an absolute path of at most %d characters",
		                     cni_sanitize(env->netns, v, sizeof(v)), STATE_PATH_MAX - 1);
	return 0;
}

/* ---- CNI_ARGS ---- */

struct args_key {
	const char *key;
	size_t off;  /* offset of the buffer in struct cni_args */
	size_t size; /* buffer size */
	const char *want;
};

static const struct args_key args_keys[] = {
        {"K8S_POD_NAMESPACE", offsetof(struct cni_args, pod_namespace), 64, "a DNS label of at most 63 characters"},
        {"K8S_POD_NAME", offsetof(struct cni_args, pod_name), 254, "a DNS subdomain of at most 253 characters"},
        {"K8S_POD_UID", offsetof(struct cni_args, pod_uid), 64,
         "letters, digits, '-', '.', '_', at most 63 characters"},
        {"K8S_POD_INFRA_CONTAINER_ID", offsetof(struct cni_args, infra_container_id), STATE_ID_MAX,
         "a container ID of at most 127 characters"},
};

static bool args_value_valid(size_t k, const char *v)
{
	switch (k) {
	case 0:
		return k8s_namespace_valid(v);
	case 1:
		return k8s_pod_name_valid(v);
	case 2:
		return k8s_uid_valid(v);
	default:
		return container_id_valid(v);
	}
}

static bool key_char_valid(char ch)
{
	return isalnum((unsigned char)ch) || ch == '_' || ch == '-' || ch == '.';
}

/* Split s at ';' and each pair at its one '='; cb(key, value) per pair. */
static int args_foreach(char *s, int (*cb)(const char *key, const char *val, void *ud), void *ud, struct error *err)
{
	char v[MSG_VALUE_MAX];

	for (char *pair = s, *next; pair; pair = next) {
		char *eq;
		next = strchr(pair, ';');
		if (next)
			*next++ = '\0';
		if (pair[0] == '\0')
			continue; /* tolerate ";;" and a trailing ';' */
		eq = strchr(pair, '=');
		if (!eq || eq == pair || strchr(eq + 1, '='))
			return cni_error_set(err, CNI_ERR_ENV, EINVAL, "CNI_ARGS: invalid pair \"%s\" (want KEY=VALUE)",
			                     cni_sanitize(pair, v, sizeof(v)));
		*eq = '\0';
		for (const char *k = pair; *k; k++)
			if (!key_char_valid(*k))
				return cni_error_set(err, CNI_ERR_ENV, EINVAL, "CNI_ARGS: invalid key \"%s\"",
				                     cni_sanitize(pair, v, sizeof(v)));
		int r = cb(pair, eq + 1, ud);
		if (r < 0)
			return r;
	}
	return 0;
}

struct args_pass {
	struct cni_args *a;
	struct error *err;
	bool seen[ARRAY_SIZE(args_keys)];
	bool seen_ignore;
};

static int args_parse_bool(const char *val, bool *ret)
{
	if (streq(val, "1") || strcasecmp(val, "true") == 0)
		*ret = true;
	else if (streq(val, "0") || strcasecmp(val, "false") == 0)
		*ret = false;
	else
		return -EINVAL;
	return 0;
}

static int args_cb_ignore(const char *key, const char *val, void *ud)
{
	struct args_pass *p = ud;
	char v[MSG_VALUE_MAX];

	if (!streq(key, "IgnoreUnknown"))
		return 0;
	if (p->seen_ignore)
		return cni_error_set(p->err, CNI_ERR_ENV, EINVAL, "CNI_ARGS: IgnoreUnknown given twice");
	p->seen_ignore = true;
	if (args_parse_bool(val, &p->a->ignore_unknown) < 0)
		return cni_error_set(p->err, CNI_ERR_ENV, EINVAL,
		                     "CNI_ARGS: IgnoreUnknown: invalid value \"%s\" (want 1, 0, true or false)",
		                     cni_sanitize(val, v, sizeof(v)));
	return 0;
}

static int args_cb_keys(const char *key, const char *val, void *ud)
{
	struct args_pass *p = ud;
	char v[MSG_VALUE_MAX];

	if (streq(key, "IgnoreUnknown"))
		return 0;
	for (size_t k = 0; k < ARRAY_SIZE(args_keys); k++) {
		if (!streq(key, args_keys[k].key))
			continue;
		if (p->seen[k])
			return cni_error_set(p->err, CNI_ERR_ENV, EINVAL, "CNI_ARGS: %s given twice", key);
		p->seen[k] = true;
		if (val[0] == '\0')
			return 0; /* empty = not given */
		if (!args_value_valid(k, val))
			return cni_error_set(p->err, CNI_ERR_ENV, EINVAL,
			                     "CNI_ARGS: %s: invalid value \"%s\" (want %s)", key,
			                     cni_sanitize(val, v, sizeof(v)), args_keys[k].want);
		str_copy((char *)p->a + args_keys[k].off, args_keys[k].size, val);
		return 0;
	}
	if (!p->a->ignore_unknown)
		return cni_error_set(p->err, CNI_ERR_ENV, EINVAL,
		                     "CNI_ARGS: unknown key \"%s\" (set IgnoreUnknown=1 to ignore it)",
		                     cni_sanitize(key, v, sizeof(v)));
	return 0;
}

int cni_args_parse(const char *s, struct cni_args *ret, struct error *err)
{
	char buf[CNI_ARGS_MAX + 1];
	struct args_pass p = {.a = ret, .err = err};
	int r;

	memset(ret, 0, sizeof(*ret));
	if (!s || !s[0])
		return 0;
	if (strlen(s) > CNI_ARGS_MAX)
		return cni_error_set(err, CNI_ERR_ENV, E2BIG, "CNI_ARGS: longer than %d bytes", CNI_ARGS_MAX);
	/* IgnoreUnknown applies wherever it appears: find it first. */
	str_copy(buf, sizeof(buf), s);
	r = args_foreach(buf, args_cb_ignore, &p, err);
	if (r < 0)
		goto fail;
	str_copy(buf, sizeof(buf), s);
	r = args_foreach(buf, args_cb_keys, &p, err);
	if (r < 0)
		goto fail;
	return 0;
fail:
	memset(ret, 0, sizeof(*ret));
	return r;
}
