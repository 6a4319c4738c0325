/* config.c — loading and validation of the agent config file (see config.h).
 * One parser per key, driven by a table; the first error wins and names the
 * key and value as the operator wrote them. */
#include <ctype.h>
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <strings.h>
#include <sys/stat.h>

#include "config.h"
#include "file.h"
#include "kube/decode.h"
#include "ifname.h"

/* ---- describing values in messages ---- */

/* Shortest %g form that reads back as the same double. */
static const char *num_str(double v, char *buf, size_t size)
{
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, size, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	return buf;
}

static const char *describe(const cJSON *v, char *buf, size_t size)
{
	char tmp[96];

	if (cJSON_IsNull(v))
		snprintf(buf, size, "null");
	else if (cJSON_IsBool(v))
		snprintf(buf, size, "%s", cJSON_IsTrue(v) ? "true" : "false");
	else if (cJSON_IsNumber(v))
		snprintf(buf, size, "a number (%s)", num_str(v->valuedouble, tmp, sizeof(tmp)));
	else if (cJSON_IsString(v))
		snprintf(buf, size, "a string (%s)",
		         kube_quote(tmp, sizeof(tmp), v->valuestring, strlen(v->valuestring), 48));
	else if (cJSON_IsArray(v))
		snprintf(buf, size, "an array");
	else if (cJSON_IsObject(v))
		snprintf(buf, size, "an object");
	else
		snprintf(buf, size, "an invalid value");
	return buf;
}

static int type_error(struct error *err, const char *key, const char *want, const cJSON *v)
{
	char d[160];
	return error_set(err, EINVAL, "%s: expected %s, got %s", key, want, describe(v, d, sizeof(d)));
}

static char *quote(char *buf, size_t size, const char *s)
{
	return kube_quote(buf, size, s, strlen(s), 48);
}

/* ---- rates ---- */

int agent_rate_parse_bps(const char *s, uint64_t *ret_bps, struct error *err)
{
	static const struct {
		const char *unit;
		uint64_t mult; /* bits per second per unit */
	} units[] = {
	        {"bit", 1ULL},           {"kbit", 1000ULL},          {"mbit", 1000000ULL},
	        {"gbit", 1000000000ULL}, {"tbit", 1000000000000ULL}, {"kibit", 1ULL << 10},
	        {"mibit", 1ULL << 20},   {"gibit", 1ULL << 30},      {"tibit", 1ULL << 40},
	        {"bps", 8ULL},           {"kbps", 8000ULL},          {"mbps", 8000000ULL},
	        {"gbps", 8000000000ULL}, {"tbps", 8000000000000ULL}, {"kibps", 8ULL << 10},
	        {"mibps", 8ULL << 20},   {"gibps", 8ULL << 30},      {"tibps", 8ULL << 40},
	};
	char q[96], qu[64];
	const char *p = s, *frac = "";
	size_t int_len, frac_len = 0;
	unsigned __int128 num = 0, div = 1;
	uint64_t mult = 1;
	unsigned sig = 0;

	int_len = strspn(p, "0123456789");
	p += int_len;
	if (*p == '.') {
		frac = ++p;
		frac_len = strspn(p, "0123456789");
		p += frac_len;
	}
	if (int_len + frac_len == 0 || strlen(s) > 64)
		return error_set(err, EINVAL,
		                 "%s is not a rate (a number and a unit: bit, kbit, mbit, gbit, tbit, bps, kbps, mbps, "
		                 "gbps, tbps, kibit..tibit, kibps..tibps; a bare integer is bit/s)",
		                 quote(q, sizeof(q), s));
	if (*p) {
		size_t i;
		for (i = 0; i < ARRAY_SIZE(units); i++)
			if (strcasecmp(p, units[i].unit) == 0)
				break;
		if (i == ARRAY_SIZE(units))
			return error_set(
			        err, EINVAL,
			        "%s: unknown unit %s (bit, kbit, mbit, gbit, tbit, bps, kbps, mbps, gbps, tbps, "
			        "kibit..tibit, kibps..tibps)",
			        quote(q, sizeof(q), s), quote(qu, sizeof(qu), p));
		mult = units[i].mult;
	} else if (frac_len) {
		return error_set(err, EINVAL, "%s: a number without a unit must be an integer (bit/s)",
		                 quote(q, sizeof(q), s));
	}
	while (frac_len > 0 && frac[frac_len - 1] == '0')
		frac_len--;
	for (size_t i = 0; i < int_len + frac_len; i++) {
		unsigned d = (unsigned)((i < int_len ? s[i] : frac[i - int_len]) - '0');
		if (num == 0 && d == 0)
			continue;
		num = num * 10 + d;
		if (++sig > 20)
			goto range;
	}
	for (size_t i = 0; i < frac_len; i++)
		div *= 10;
	num *= mult;
	if (num % div)
		return error_set(err, EINVAL, "%s is not a whole number of bit/s", quote(q, sizeof(q), s));
	num /= div;
	if (num < BW_MIN_BPS || num > BW_MAX_BPS)
		goto range;
	*ret_bps = (uint64_t)num;
	return 0;
range:
	return error_set(err, ERANGE, "%s is out of range [1kbit, 1tbit]", quote(q, sizeof(q), s));
}

/* ---- keys ---- */

static int parse_uplink(const char *key, const cJSON *v, struct agent_config *c, struct error *err)
{
	char q[96];
	if (!cJSON_IsString(v))
		return type_error(err, key, "an interface name or \"auto\"", v);
	if (!streq(v->valuestring, NODE_UPLINK_AUTO) && !ifname_valid(v->valuestring))
		return error_set(err, EINVAL,
		                 "%s: %s is not an interface name (1-15 bytes, no '/', ':' or whitespace) or \"auto\"",
		                 key, quote(q, sizeof(q), v->valuestring));
	str_copy(c->node.uplink, sizeof(c->node.uplink), v->valuestring);
	return 0;
}

static int parse_rate(const char *key, const cJSON *v, uint64_t *ret_bps, struct error *err)
{
	uint64_t bps = 0;
	int r;

	if (cJSON_IsNumber(v)) {
		/* a bare number is bit/s */
		char d[64];
		double x = v->valuedouble;
		if (!(x >= (double)BW_MIN_BPS && x <= (double)BW_MAX_BPS))
			return error_set(err, ERANGE, "%s: %s is out of range [1kbit, 1tbit]", key,
			                 num_str(x, d, sizeof(d)));
		if ((double)(uint64_t)x != x)
			return error_set(err, EINVAL, "%s: %s is not a whole number of bit/s", key,
			                 num_str(x, d, sizeof(d)));
		*ret_bps = (uint64_t)x;
		return 0;
	}
	if (!cJSON_IsString(v))
		return type_error(err, key, "a rate like \"500mbit\"", v);
	if (v->valuestring[0] == '\0') {
		*ret_bps = 0; /* uplink: link speed; downlink: the uplink's rate */
		return 0;
	}
	r = agent_rate_parse_bps(v->valuestring, &bps, err);
	if (r < 0) {
		error_prefix(err, "%s", key);
		return r;
	}
	*ret_bps = bps;
	return 0;
}

static int parse_uplink_rate(const char *key, const cJSON *v, struct agent_config *c, struct error *err)
{
	return parse_rate(key, v, &c->node.uplink_rate_bps, err);
}

static int parse_downlink_rate(const char *key, const cJSON *v, struct agent_config *c, struct error *err)
{
	return parse_rate(key, v, &c->node.downlink_rate_bps, err);
}

static int parse_downlink(const char *key, const cJSON *v, struct agent_config *c, struct error *err)
{
	if (!cJSON_IsBool(v))
		return type_error(err, key, "true or false", v);
	c->node.downlink = cJSON_IsTrue(v);
	return 0;
}

static int parse_inference_share(const char *key, const cJSON *v, struct agent_config *c, struct error *err)
{
	char d[64];
	if (!cJSON_IsNumber(v))
		return type_error(err, key, "a number between 0 and 1", v);
	if (!(v->valuedouble > 0.0 && v->valuedouble < 1.0))
		return error_set(err, ERANGE, "%s: %s is out of range (0, 1)", key,
		                 num_str(v->valuedouble, d, sizeof(d)));
	c->node.inference_share = v->valuedouble;
	return 0;
}

static int parse_training_floor(const char *key, const cJSON *v, struct agent_config *c, struct error *err)
{
	char d[64];
	if (!cJSON_IsNumber(v))
		return type_error(err, key, "a number between 0 and 1", v);
	if (!(v->valuedouble >= 0.0 && v->valuedouble <= 1.0))
		return error_set(err, ERANGE, "%s: %s is out of range [0, 1]", key,
		                 num_str(v->valuedouble, d, sizeof(d)));
	c->node.training_floor = v->valuedouble;
	return 0;
}

static int parse_uint(const char *key, const cJSON *v, uint32_t max, uint32_t *ret, struct error *err)
{
	char d[64];
	if (!cJSON_IsNumber(v))
		return type_error(err, key, "an integer", v);
	/* integer first: "1.5" is not an integer even when in range */
	if (v->valuedouble > -1e15 && v->valuedouble < 1e15 && (double)(int64_t)v->valuedouble != v->valuedouble)
		return error_set(err, EINVAL, "%s: %s is not an integer", key, num_str(v->valuedouble, d, sizeof(d)));
	if (!(v->valuedouble >= 0 && v->valuedouble <= (double)max))
		return error_set(err, ERANGE, "%s: %s is out of range [0, %u]", key,
		                 num_str(v->valuedouble, d, sizeof(d)), max);
	*ret = (uint32_t)v->valuedouble;
	return 0;
}

static int parse_mixed_hold(const char *key, const cJSON *v, struct agent_config *c, struct error *err)
{
	return parse_uint(key, v, AGENT_MIXED_HOLD_S_MAX, &c->node.mixed_hold_s, err);
}

static int parse_debounce(const char *key, const cJSON *v, struct agent_config *c, struct error *err)
{
	return parse_uint(key, v, AGENT_DEBOUNCE_MS_MAX, &c->node.debounce_ms, err);
}

static int parse_drift_repair(const char *key, const cJSON *v, struct agent_config *c, struct error *err)
{
	return parse_uint(key, v, AGENT_DRIFT_REPAIR_S_MAX, &c->drift_repair_s, err);
}

static int parse_overhead(const char *key, const cJSON *v, struct agent_config *c, struct error *err)
{
	c->overhead_set = true;
	return parse_uint(key, v, NODE_OVERHEAD_MAX, &c->node.overhead_bytes, err);
}

static int parse_down_rtt(const char *key, const cJSON *v, struct agent_config *c, struct error *err)
{
	return parse_uint(key, v, NODE_DOWN_RTT_US_MAX, &c->node.down_rtt_us, err);
}

/* "auto" (the default: from the downlink rate and downlinkRttUs), "off", or bytes */
static int parse_rcv_window(const char *key, const cJSON *v, struct agent_config *c, struct error *err)
{
	uint32_t n = 0;
	int r;

	if (cJSON_IsString(v) && streq(v->valuestring, "auto")) {
		c->node.training_rcv_window = NODE_DOWN_RCV_WINDOW_AUTO;
		return 0;
	}
	if (cJSON_IsString(v) && streq(v->valuestring, "off")) {
		c->node.training_rcv_window = NODE_DOWN_RCV_WINDOW_OFF;
		return 0;
	}
	if (!cJSON_IsNumber(v))
		return type_error(err, key, "\"auto\", \"off\" or a number of bytes", v);
	r = parse_uint(key, v, NODE_DOWN_RCV_WINDOW_MAX, &n, err);
	if (r < 0)
		return r;
	if (n < NODE_DOWN_RCV_WINDOW_MIN)
		return error_set(err, ERANGE, "%s: %u is out of range [%u, %u]", key, n, NODE_DOWN_RCV_WINDOW_MIN,
		                 NODE_DOWN_RCV_WINDOW_MAX);
	c->node.training_rcv_window = n;
	return 0;
}

/* BANDS (node.h): bytes, or "off" */
static int parse_bulk_threshold(const char *key, const cJSON *v, struct agent_config *c, struct error *err)
{
	uint32_t n = 0;
	int r;

	if (cJSON_IsString(v) && streq(v->valuestring, "off")) {
		c->node.bulk_threshold_bytes = 0;
		return 0;
	}
	if (!cJSON_IsNumber(v))
		return type_error(err, key, "a number of bytes or \"off\"", v);
	r = parse_uint(key, v, NODE_BULK_THRESHOLD_MAX, &n, err);
	if (r < 0)
		return r;
	if (n < NODE_BULK_THRESHOLD_MIN)
		return error_set(err, ERANGE, "%s: %u is out of range [%u, %u]", key, n, NODE_BULK_THRESHOLD_MIN,
		                 NODE_BULK_THRESHOLD_MAX);
	c->node.bulk_threshold_bytes = n;
	return 0;
}

static int parse_bulk_idle(const char *key, const cJSON *v, struct agent_config *c, struct error *err)
{
	uint32_t n = 0;
	int r = parse_uint(key, v, UINT32_MAX, &n, err);

	if (r < 0)
		return r;
	if (n < 1 || n > NODE_BULK_IDLE_MS_MAX)
		return error_set(err, ERANGE, "%s: %u is out of range [1, %u]", key, n, NODE_BULK_IDLE_MS_MAX);
	c->node.bulk_idle_ms = n;
	return 0;
}

static int parse_bulk_weight(const char *key, const cJSON *v, struct agent_config *c, struct error *err)
{
	if (!cJSON_IsNumber(v))
		return type_error(err, key, "a number between 0.1 and 10", v);
	if (!(v->valuedouble >= NODE_BULK_WEIGHT_MIN && v->valuedouble <= NODE_BULK_WEIGHT_MAX))
		return error_set(err, ERANGE, "%s: %g is out of range [%g, %g]", key, v->valuedouble,
		                 NODE_BULK_WEIGHT_MIN, NODE_BULK_WEIGHT_MAX);
	c->node.bulk_weight = v->valuedouble;
	return 0;
}

static int parse_classify(const char *key, const cJSON *v, struct agent_config *c, struct error *err)
{
	char q[96];
	enum node_classify k;

	if (!cJSON_IsString(v))
		return type_error(err, key, "\"src-ip\" or \"dscp\"", v);
	k = node_classify_from_name(v->valuestring);
	if (k == _CLASSIFY_INVALID)
		return error_set(err, EINVAL, "%s: %s is not one of \"src-ip\", \"dscp\"", key,
		                 quote(q, sizeof(q), v->valuestring));
	c->node.classify = k;
	return 0;
}

static int parse_profiles(const char *key, const cJSON *v, struct agent_config *c, struct error *err)
{
	int r;

	if (!cJSON_IsObject(v))
		return type_error(err, key, "an object of named profiles", v);
	/* the merge validates every profile, key and value; its messages start
	 * with "profiles" */
	r = profile_set_merge_json(&c->profiles, v, err);
	if (r < 0)
		return r;
	c->profiles_json = cJSON_Duplicate(v, true);
	if (!c->profiles_json)
		return error_set(err, ENOMEM, "%s: out of memory", key);
	return 0;
}

static const struct config_key {
	const char *name;
	int (*parse)(const char *key, const cJSON *v, struct agent_config *c, struct error *err);
} config_keys[] = {
        {"uplink", parse_uplink},
        {"uplinkRate", parse_uplink_rate},
        {"downlinkRate", parse_downlink_rate},
        {"downlink", parse_downlink},
        {"downlinkRttUs", parse_down_rtt},
        {"trainingRcvWindow", parse_rcv_window},
        {"inferenceShare", parse_inference_share},
        {"trainingFloor", parse_training_floor},
        {"bulkThreshold", parse_bulk_threshold},
        {"bulkIdleMs", parse_bulk_idle},
        {"bulkWeight", parse_bulk_weight},
        {"mixedHoldSeconds", parse_mixed_hold},
        {"debounceMs", parse_debounce},
        {"classify", parse_classify},
        {"driftRepairSeconds", parse_drift_repair},
        {"profiles", parse_profiles},
        {"uplinkOverhead", parse_overhead},
};

/* ---- the file ---- */

/* Edit distance of a and b, ignoring case (small strings: keys). */
static size_t key_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), prev[40], cur[40];

	if (la >= ARRAY_SIZE(prev) || lb >= ARRAY_SIZE(prev))
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		prev[j] = j;
	for (size_t i = 1; i <= la; i++) {
		cur[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t sub =
			        prev[j - 1] + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
			size_t del = prev[j] + 1, ins = cur[j - 1] + 1;

			cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
		}
		memcpy(prev, cur, (lb + 1) * sizeof(*prev));
	}
	return prev[lb];
}

/* The config key an unknown one is a typo of (at most 2 edits, case
 * ignored), or NULL. */
static const char *key_guess(const char *key)
{
	const char *best = NULL;
	size_t best_d = 3;

	for (size_t i = 0; key[0] && i < ARRAY_SIZE(config_keys); i++) {
		size_t d = key_distance(key, config_keys[i].name);

		if (d < best_d) {
			best_d = d;
			best = config_keys[i].name;
		}
	}
	return best;
}

void agent_config_defaults(struct agent_config *ret)
{
	memset(ret, 0, sizeof(*ret));
	node_config_defaults(&ret->node);
	ret->drift_repair_s = AGENT_DRIFT_REPAIR_S_DEFAULT;
	profile_set_builtin(&ret->profiles);
}

void agent_config_done(struct agent_config *c)
{
	if (!c)
		return;
	cJSON_Delete(c->profiles_json);
	c->profiles_json = NULL;
}

const cJSON *agent_config_profiles_json(const struct agent_config *c)
{
	return c->profiles_json;
}

/* The DSCP the uplink classifier matches (classify "dscp") is the one the
 * inference and training profiles mark; the other profiles of each class
 * must agree. */
static int config_finish(struct agent_config *c, struct error *err)
{
	const struct profile *inf = profile_find(&c->profiles, "inference");
	const struct profile *train = profile_find(&c->profiles, "training");
	int r;

	if (inf && inf->dscp >= 0)
		c->node.dscp_inference = inf->dscp;
	if (train && train->dscp >= 0)
		c->node.dscp_training = train->dscp;
	if (c->node.classify == CLASSIFY_DSCP && (!inf || inf->dscp < 0 || !train || train->dscp < 0))
		return error_set(err, EINVAL,
		                 "classify: \"dscp\" needs the inference and training profiles to set dscp");
	r = node_config_check(&c->node, err);
	if (r < 0)
		return r;
	/* The uplink matches one DSCP per class: every profile of the class
	 * must mark it (else its pods land in the default class), and no
	 * other profile may (else they would get the class). */
	for (unsigned i = 0; c->node.classify == CLASSIFY_DSCP && i < c->profiles.n; i++) {
		const struct profile *p = &c->profiles.p[i];
		int want = p->class == CLASS_INFERENCE  ? c->node.dscp_inference
		           : p->class == CLASS_TRAINING ? c->node.dscp_training
		                                        : -1;

		if (want >= 0 && p->dscp != want)
			return error_set(err, EINVAL,
			                 "profiles.%s.dscp = %d: with classify \"dscp\" every %s profile must mark %d "
			                 "(profiles.%s.dscp)",
			                 p->name, p->dscp, workload_class_name(p->class), want,
			                 workload_class_name(p->class));
		if (want < 0 && p->dscp >= 0 && (p->dscp == c->node.dscp_inference || p->dscp == c->node.dscp_training))
			return error_set(err, EINVAL,
			                 "profiles.%s.dscp = %d: with classify \"dscp\" that is the uplink's %s DSCP",
			                 p->name, p->dscp,
			                 p->dscp == c->node.dscp_inference ? "inference" : "training");
	}
	/* Only aiqos's marks may count: every pod it sees is re-marked, the
	 * default class to 0 (a pod setting IP_TOS 0xb8 itself would get the
	 * inference class otherwise). The plugin gets these profiles through the
	 * chain (loop.c); reconcile/node.c's trust check falls back to src-ip where
	 * the kernel cannot re-mark. */
	for (unsigned i = 0; c->node.classify == CLASSIFY_DSCP && i < c->profiles.n; i++)
		if (c->profiles.p[i].class == CLASS_DEFAULT && c->profiles.p[i].dscp < 0)
			c->profiles.p[i].dscp = 0;
	return 0;
}

static void offset_to_line_col(const char *text, size_t at, unsigned *line, unsigned *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < at; i++) {
		if (text[i] == '\n') {
			(*line)++;
			*col = 1;
		} else {
			(*col)++;
		}
	}
}

static int config_parse(const char *text, size_t len, struct agent_config *c, struct error *err)
{
	const char *end = NULL;
	cJSON *root;
	const cJSON *v;
	size_t i;
	int r = 0;

	for (i = 0; i < len && strchr(" \t\r\n", text[i]); i++)
		;
	if (i == len)
		return error_set(err, EINVAL, "empty file (expected a JSON object, e.g. {})");
	if (memchr(text, '\0', len))
		return error_set(err, EINVAL, "NUL byte at offset %zu",
		                 (size_t)((const char *)memchr(text, '\0', len) - text));
	root = cJSON_ParseWithLengthOpts(text, len, &end, false);
	if (!root) {
		unsigned line, col;
		size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
		offset_to_line_col(text, at, &line, &col);
		return error_set(err, EINVAL, "invalid JSON at line %u, column %u", line, col);
	}
	for (i = (size_t)(end - text); i < len; i++) {
		if (!strchr(" \t\r\n", text[i])) {
			unsigned line, col;
			offset_to_line_col(text, i, &line, &col);
			r = error_set(err, EINVAL, "trailing data after the JSON object at line %u, column %u", line,
			              col);
			goto out;
		}
	}
	if (!cJSON_IsObject(root)) {
		char d[160];
		r = error_set(err, EINVAL, "expected a JSON object, got %s", describe(root, d, sizeof(d)));
		goto out;
	}
	cJSON_ArrayForEach(v, root)
	{
		const char *key = v->string ? v->string : "";
		char q[96];
		size_t k;

		for (const cJSON *u = root->child; u != v; u = u->next)
			if (u->string && streq(u->string, key)) {
				r = error_set(err, EINVAL, "duplicate key %s", quote(q, sizeof(q), key));
				goto out;
			}
		for (k = 0; k < ARRAY_SIZE(config_keys); k++)
			if (streq(key, config_keys[k].name))
				break;
		if (k == ARRAY_SIZE(config_keys)) {
			char accepted[256] = "", near[64] = "";
			const char *guess = key_guess(key);

			for (size_t n = 0; n < ARRAY_SIZE(config_keys); n++)
				str_append_sep(accepted, sizeof(accepted), ',', "%s%s", n ? " " : "",
				               config_keys[n].name);
			if (guess)
				snprintf(near, sizeof(near), ": did you mean \"%s\"?", guess);
			r = error_set(err, EINVAL, "unknown key %s%s (accepted: %s)", quote(q, sizeof(q), key), near,
			              accepted);
			goto out;
		}
		if (cJSON_IsNull(v))
			continue; /* null = the default */
		r = config_keys[k].parse(key, v, c, err);
		if (r < 0)
			goto out;
	}
	r = config_finish(c, err);
out:
	cJSON_Delete(root);
	return r;
}

int agent_config_parse(const char *text, size_t len, const char *origin, struct agent_config *ret, struct error *err)
{
	struct agent_config *c = malloc(sizeof(*c));
	int r;

	if (!c)
		return error_set(err, ENOMEM, "config %s: out of memory", origin);
	agent_config_defaults(c);
	c->from_file = true;
	r = config_parse(text, len, c, err);
	if (r < 0) {
		error_prefix(err, "config %s", origin);
		agent_config_done(c);
		free(c);
		return r;
	}
	*ret = *c;
	free(c);
	return 0;
}

int agent_config_load(const char *path, struct agent_config *ret, struct error *err)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int r;

	r = file_read_bounded(path, AGENT_CONFIG_MAX_BYTES, 0, &buf, &len, NULL, err);
	if (r == -ENOENT) {
		error_clear(err);
		agent_config_defaults(ret);
		return 0;
	}
	if (r < 0) {
		error_prefix(err, "config %s", path);
		return r;
	}
	return agent_config_parse(buf, len, path, ret, err);
}
