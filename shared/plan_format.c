/* plan_format.c — rendering plans for humans and scripts (text, a runnable
 * tc/sysctl shell script body, JSON) and the effective choices of a plan as
 * JSON for the state file, and back. Pure: formats strings, no I/O. */
#include <stdarg.h>

#include <cjson/cJSON.h>

#include "apply.h"
#include "plan.h"
#include "reason.h"

static void cjson_deletep(cJSON **j)
{
	cJSON_Delete(*j);
}

/* ---- a growing string ---- */

struct sbuf {
	char *s;
	size_t len, cap;
	int err; /* first failure (-ENOMEM), sticky */
};

_printf_(2, 3) static void sbuf_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->err)
		return;
	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->err = -EINVAL;
		return;
	}
	if (b->len + (size_t)n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		char *t;

		while (cap < b->len + (size_t)n + 1)
			cap *= 2;
		t = realloc(b->s, cap);
		if (!t) {
			b->err = -ENOMEM;
			return;
		}
		b->s = t;
		b->cap = cap;
	}
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

/* ---- pieces shared by the formats ---- */

static bool shell_safe_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("_./:=@%+,-", c);
}

/* Append s to b, single-quoted for sh when it holds anything outside a
 * safe set. */
static void sbuf_quote(struct sbuf *b, const char *s)
{
	bool safe = *s != '\0';

	for (const char *c = s; *c; c++)
		safe = safe && shell_safe_char(*c);
	if (safe) {
		sbuf_printf(b, "%s", s);
		return;
	}
	sbuf_printf(b, "'");
	for (; *s; s++) {
		if (*s == '\'')
			sbuf_printf(b, "'\\''");
		else
			sbuf_printf(b, "%c", *s);
	}
	sbuf_printf(b, "'");
}

/* An interface name quoted for sh into buf (names are < IFNAME_LEN bytes,
 * so the quoted form always fits DEV_QUOTED_MAX). */
#define DEV_QUOTED_MAX (IFNAME_LEN * 4 + 8)
static void dev_quote(const char *dev, char *buf, size_t size)
{
	struct sbuf q = {0};

	sbuf_quote(&q, dev);
	str_copy(buf, size, q.err || !q.s ? "?" : q.s);
	free(q.s);
}

static const char *tc_verb(const struct tc_spec *s)
{
	/* Filters have no stable handle to replace (u32 picks one): add them. */
	return s->type == TC_FILTER ? "add" : "replace";
}

/* "qdisc replace dev eth0 root handle 1: htb default 10 r2q 10" */
static void format_tc(const struct tc_spec *s, const char *dev, char *buf, size_t size)
{
	if (tc_spec_format(s, dev, tc_verb(s), buf, size) < 0)
		snprintf(buf, size, "<%s %d: cannot format>", tc_type_name(s->type) ? tc_type_name(s->type) : "object",
		         (int)s->kind);
}

static const char *kind_name(enum tc_kind_id k)
{
	const struct tc_kind *kind = tc_kind_get(k);

	return kind && kind->name ? kind->name : "?";
}

/* "net/ipv4/tcp_ecn" -> "net.ipv4.tcp_ecn" */
static void sysctl_dotted(const char *key, char *buf, size_t size)
{
	str_copy(buf, size, key);
	for (char *c = buf; *c; c++)
		if (*c == '/')
			*c = '.';
}

/* Rendering of alternative i: "tc qdisc ..." or "net.ipv4.tcp_ecn=1". */
static void format_alt(const struct plan_item *it, unsigned i, const char *dev, char *buf, size_t size)
{
	if (it->type == ITEM_TC) {
		char t[TC_FORMAT_MAX];
		format_tc(&it->tc[i], dev, t, sizeof(t));
		snprintf(buf, size, "tc %s", t);
	} else {
		char k[SYSCTL_KEY_MAX];
		sysctl_dotted(it->key, k, sizeof(k));
		snprintf(buf, size, "%s=%s", k, it->val[i]);
	}
}

/* What alternative i is, in one word: its kind, or the sysctl value. */
static const char *alt_label(const struct plan_item *it, unsigned i)
{
	if (i >= it->n_alt || i >= PLAN_ALT_MAX)
		return "?";
	return it->type == ITEM_TC ? kind_name(it->tc[i].kind) : it->val[i];
}

/* Length of the prefix a and b share, cut back to just after a space or
 * '=', so alternatives print as "tc qdisc ... handle 10: fq_codel ... |
 * bfifo ..." and "net.ipv4.tcp_congestion_control=bbr | cubic". */
static size_t common_word_prefix(const char *a, const char *b)
{
	size_t n = 0, cut = 0;

	while (a[n] && a[n] == b[n]) {
		if (a[n] == ' ' || a[n] == '=')
			cut = n + 1;
		n++;
	}
	return cut;
}

static unsigned n_alt_of(const struct plan_item *it)
{
	return it->n_alt < PLAN_ALT_MAX ? it->n_alt : PLAN_ALT_MAX;
}

/* " (wanted fq_codel: No such file or directory)" for degraded/skipped items. */
static void wanted_note(const struct plan_item *it, char *buf, size_t size)
{
	buf[0] = '\0';
	if (it->status != ITEM_DEGRADED && it->status != ITEM_SKIPPED)
		return;
	if (it->err) {
		char why[REASON_MAX];
		snprintf(buf, size, " (wanted %s: %s)", alt_label(it, 0), reason_item(it, why, sizeof(why)));
	} else
		snprintf(buf, size, " (wanted %s)", alt_label(it, 0));
}

/* ---- text ---- */

static void render_text_item(struct sbuf *b, const struct plan_item *it, const struct plan_names *names,
                             bool effective_only)
{
	const char *dev = plan_dev_ifname(names, it->dev);
	bool eff = it->chosen >= 0 && (unsigned)it->chosen < n_alt_of(it) &&
	           (it->status == ITEM_APPLIED || it->status == ITEM_DEGRADED);
	char note[256], first[TC_FORMAT_MAX + 64];

	wanted_note(it, note, sizeof(note));
	sbuf_printf(b, "%s [%s] %s: ", it->id, plan_dev_name(it->dev) ? plan_dev_name(it->dev) : "?",
	            item_status_name(it->status) ? item_status_name(it->status) : "?");
	if (effective_only) {
		if (eff) {
			format_alt(it, (unsigned)it->chosen, dev, first, sizeof(first));
			sbuf_printf(b, "%s%s\n", first, note);
		} else {
			sbuf_printf(b, "-%s\n", note);
		}
		return;
	}
	if (n_alt_of(it) == 0) {
		sbuf_printf(b, "-%s\n", note);
		return;
	}
	format_alt(it, 0, dev, first, sizeof(first));
	sbuf_printf(b, "%s", first);
	for (unsigned i = 1; i < n_alt_of(it); i++) {
		char alt[TC_FORMAT_MAX + 64];
		format_alt(it, i, dev, alt, sizeof(alt));
		sbuf_printf(b, " | %s", alt + common_word_prefix(first, alt));
	}
	if (it->status == ITEM_DEGRADED && eff)
		sbuf_printf(b, " (using %s; %s\n", alt_label(it, (unsigned)it->chosen), note + 2);
	else
		sbuf_printf(b, "%s\n", note);
}

/* ---- shell script ---- */

static void render_prefix(struct sbuf *b, const struct plan_item *it, const char *netns)
{
	if (!netns || !netns[0] || it->dev != DEV_POD)
		return;
	sbuf_printf(b, "%s", strchr(netns, '/') ? "nsenter --net=" : "ip netns exec ");
	sbuf_quote(b, netns);
	sbuf_printf(b, " ");
}

static void render_tc_item(struct sbuf *b, const struct plan_item *it, const struct plan_names *names,
                           const char *netns, bool effective_only)
{
	char dev[DEV_QUOTED_MAX], note[256];
	unsigned from = 0, to = n_alt_of(it);
	bool eff = it->chosen >= 0 && (unsigned)it->chosen < n_alt_of(it) &&
	           (it->status == ITEM_APPLIED || it->status == ITEM_DEGRADED);

	if (effective_only && it->status == ITEM_PENDING)
		return;
	wanted_note(it, note, sizeof(note));
	sbuf_printf(b, "# %s [%s] %s%s\n", it->id, plan_dev_name(it->dev) ? plan_dev_name(it->dev) : "?",
	            item_status_name(it->status) ? item_status_name(it->status) : "?", note);
	if (effective_only) {
		if (!eff)
			return;
		from = (unsigned)it->chosen;
		to = from + 1;
	}
	dev_quote(plan_dev_ifname(names, it->dev), dev, sizeof(dev));
	for (unsigned i = from; i < to; i++) {
		if (i > from)
			sbuf_printf(b, " || ");
		render_prefix(b, it, netns);
		if (it->type == ITEM_TC) {
			char t[TC_FORMAT_MAX];
			format_tc(&it->tc[i], dev, t, sizeof(t));
			sbuf_printf(b, "tc %s", t);
		} else {
			char k[SYSCTL_KEY_MAX], kv[SYSCTL_KEY_MAX + SYSCTL_VAL_MAX + 2];
			sysctl_dotted(it->key, k, sizeof(k));
			snprintf(kv, sizeof(kv), "%s=%s", k, it->val[i]);
			sbuf_printf(b, "sysctl -w ");
			sbuf_quote(b, kv);
		}
	}
	if (to > from)
		sbuf_printf(b, "\n");
}

/* ---- JSON ---- */

cJSON *plan_to_json(const struct plan *p, const struct plan_names *names, bool effective_only)
{
	_cleanup_(cjson_deletep) cJSON *arr = cJSON_CreateArray();

	if (!arr || !p)
		return NULL;
	for (unsigned i = 0; i < p->n; i++) {
		const struct plan_item *it = &p->items[i];
		const char *dev = plan_dev_ifname(names, it->dev);
		bool eff = it->chosen >= 0 && (unsigned)it->chosen < n_alt_of(it) &&
		           (it->status == ITEM_APPLIED || it->status == ITEM_DEGRADED);
		char alt[TC_FORMAT_MAX + 64];
		cJSON *o;

		if (effective_only && it->status == ITEM_PENDING)
			continue;
		o = cJSON_CreateObject();
		if (!o || !cJSON_AddItemToArray(arr, o))
			return NULL;
		if (!cJSON_AddStringToObject(o, "id", it->id) ||
		    !cJSON_AddStringToObject(o, "dev", plan_dev_name(it->dev) ? plan_dev_name(it->dev) : "?") ||
		    !cJSON_AddStringToObject(o, "ifname", dev) ||
		    !cJSON_AddStringToObject(o, "type", it->type == ITEM_TC ? "tc" : "sysctl") ||
		    !cJSON_AddStringToObject(o, "status",
		                             item_status_name(it->status) ? item_status_name(it->status) : "?") ||
		    !cJSON_AddNumberToObject(o, "chosen", it->chosen))
			return NULL;
		if (it->depends[0] && !cJSON_AddStringToObject(o, "depends", it->depends))
			return NULL;
		if (!effective_only) {
			cJSON *alts = cJSON_AddArrayToObject(o, "alternatives");
			if (!alts)
				return NULL;
			for (unsigned a = 0; a < n_alt_of(it); a++) {
				cJSON *s;
				format_alt(it, a, dev, alt, sizeof(alt));
				s = cJSON_CreateString(alt);
				if (!s || !cJSON_AddItemToArray(alts, s))
					return NULL;
			}
		}
		if (eff) {
			format_alt(it, (unsigned)it->chosen, dev, alt, sizeof(alt));
			if (!cJSON_AddStringToObject(o, "effective", alt))
				return NULL;
		} else if (!cJSON_AddNullToObject(o, "effective")) {
			return NULL;
		}
		if (!cJSON_AddNumberToObject(o, "errno", it->err))
			return NULL;
		if (it->err ? !cJSON_AddStringToObject(o, "err", strerror(it->err)) : !cJSON_AddNullToObject(o, "err"))
			return NULL;
		if (it->status == ITEM_DEGRADED || it->status == ITEM_SKIPPED) {
			char why[REASON_MAX];
			if (!cJSON_AddStringToObject(o, "reason", reason_item(it, why, sizeof(why))))
				return NULL;
		}
	}
	return TAKE_PTR(arr);
}

int plan_render(const struct plan *p, const struct plan_names *names, const char *netns, enum plan_format fmt,
                bool effective_only, char **ret)
{
	struct sbuf b = {0};

	if (!p || !ret)
		return -EINVAL;
	switch (fmt) {
	case PLAN_FMT_TEXT:
		for (unsigned i = 0; i < p->n; i++) {
			if (effective_only && p->items[i].status == ITEM_PENDING)
				continue;
			render_text_item(&b, &p->items[i], names, effective_only);
		}
		break;
	case PLAN_FMT_TC:
		for (unsigned i = 0; i < p->n; i++)
			render_tc_item(&b, &p->items[i], names, netns, effective_only);
		break;
	case PLAN_FMT_JSON: {
		_cleanup_(cjson_deletep) cJSON *j = plan_to_json(p, names, effective_only);
		_cleanup_free_ char *s = NULL;

		if (!j)
			return -ENOMEM;
		s = cJSON_Print(j);
		if (!s)
			return -ENOMEM;
		sbuf_printf(&b, "%s\n", s);
		break;
	}
	default:
		return -EINVAL;
	}
	if (!b.err && !b.s)
		sbuf_printf(&b, "%s", "");
	if (b.err) {
		free(b.s);
		return b.err;
	}
	*ret = b.s;
	return 0;
}

/* ---- effective choices (state file) ---- */

cJSON *plan_choices_to_json(const struct plan *p)
{
	_cleanup_(cjson_deletep) cJSON *arr = cJSON_CreateArray();

	if (!arr || !p)
		return NULL;
	for (unsigned i = 0; i < p->n; i++) {
		const struct plan_item *it = &p->items[i];
		bool eff = it->chosen >= 0 && (unsigned)it->chosen < n_alt_of(it);
		cJSON *o = cJSON_CreateObject();

		if (!o || !cJSON_AddItemToArray(arr, o))
			return NULL;
		if (!cJSON_AddStringToObject(o, "id", it->id) ||
		    !cJSON_AddStringToObject(o, "status",
		                             item_status_name(it->status) ? item_status_name(it->status) : "pending") ||
		    !cJSON_AddNumberToObject(o, "chosen", eff ? it->chosen : -1))
			return NULL;
		/* What was chosen, so a plan whose alternatives moved (other
		 * capabilities known) still finds it. */
		if (eff && !cJSON_AddStringToObject(o, it->type == ITEM_TC ? "kind" : "value",
		                                    alt_label(it, (unsigned)it->chosen)))
			return NULL;
		if (!cJSON_AddNumberToObject(o, "err", it->err))
			return NULL;
		if (it->err && !cJSON_AddStringToObject(o, "errText", strerror(it->err)))
			return NULL;
		if (it->err && !cJSON_AddBoolToObject(o, "unknown", it->unknown))
			return NULL;
		if (it->type == ITEM_SYSCTL && it->prev[0] && !cJSON_AddStringToObject(o, "prev", it->prev))
			return NULL;
	}
	return TAKE_PTR(arr);
}

static enum item_status status_from_name(const char *s)
{
	for (int i = 0; i < _ITEM_STATUS_MAX; i++)
		if (streq(s, item_status_name((enum item_status)i)))
			return (enum item_status)i;
	return _ITEM_STATUS_MAX;
}

static bool json_whole(const cJSON *v, double min, double max, int *ret)
{
	/* range first: converting a double out of long long's range (1e309 in
	 * a corrupt state file) is undefined */
	if (!cJSON_IsNumber(v) || !(v->valuedouble >= min && v->valuedouble <= max) ||
	    v->valuedouble != (double)(long long)v->valuedouble)
		return false;
	*ret = (int)v->valuedouble;
	return true;
}

#define ERRNO_MAX 4095

int plan_choices_from_json(struct plan *p, const struct cJSON *choices, struct error *err)
{
	struct choice {
		enum item_status status;
		int chosen, err;
		bool unknown;
		bool set;
		char prev[SYSCTL_VAL_MAX];
	};
	_cleanup_free_ struct choice *next = NULL;
	const cJSON *c;
	unsigned idx = 0;

	if (!p)
		return -EINVAL;
	if (!choices || cJSON_IsNull(choices))
		return 0;
	if (!cJSON_IsArray(choices))
		return error_set(err, EINVAL, "choices: expected an array");
	next = calloc(p->n ? p->n : 1, sizeof(*next));
	if (!next)
		return error_set(err, ENOMEM, "choices: out of memory for %u items", p->n);

	cJSON_ArrayForEach(c, choices)
	{
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id");
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(c, "status");
		const cJSON *ch = cJSON_GetObjectItemCaseSensitive(c, "chosen");
		const cJSON *er = cJSON_GetObjectItemCaseSensitive(c, "err");
		const cJSON *pv = cJSON_GetObjectItemCaseSensitive(c, "prev");
		const cJSON *label = NULL;
		const struct plan_item *it = NULL;
		unsigned k = 0;
		enum item_status s;
		int chosen, e = 0;

		if (!cJSON_IsObject(c) || !cJSON_IsString(id) || !id->valuestring)
			return error_set(err, EINVAL, "choices[%u]: expected an object with a string \"id\"", idx);
		for (k = 0; k < p->n; k++)
			if (streq(p->items[k].id, id->valuestring)) {
				it = &p->items[k];
				break;
			}
		if (!it)
			return error_set(
			        err, ENOENT,
			        "choices: item \"%.*s\" is not in the plan (the plan changed since it was applied)",
			        PLAN_ID_MAX, id->valuestring);
		if (next[k].set)
			return error_set(err, EINVAL, "choices: item \"%s\" is listed twice", it->id);
		if (!cJSON_IsString(st) || !st->valuestring ||
		    (s = status_from_name(st->valuestring)) == _ITEM_STATUS_MAX)
			return error_set(
			        err, EINVAL,
			        "choices: item \"%s\": \"status\" must be pending, applied, degraded or skipped",
			        it->id);
		if (!json_whole(ch, -1, PLAN_ALT_MAX, &chosen))
			return error_set(err, EINVAL, "choices: item \"%s\": \"chosen\" must be an integer", it->id);
		if (er && !cJSON_IsNull(er) && !json_whole(er, 0, ERRNO_MAX, &e))
			return error_set(err, EINVAL, "choices: item \"%s\": \"err\" must be an errno (0..%d)", it->id,
			                 ERRNO_MAX);
		if (s == ITEM_APPLIED || s == ITEM_DEGRADED) {
			label = cJSON_GetObjectItemCaseSensitive(c, it->type == ITEM_TC ? "kind" : "value");
			if (label && (!cJSON_IsString(label) || !label->valuestring))
				return error_set(err, EINVAL, "choices: item \"%s\": \"%s\" must be a string", it->id,
				                 it->type == ITEM_TC ? "kind" : "value");
			/* Prefer what was chosen over where it was: the
			 * alternatives may have moved. */
			if (label && !(chosen >= 0 && (unsigned)chosen < n_alt_of(it) &&
			               streq(alt_label(it, (unsigned)chosen), label->valuestring))) {
				chosen = -1;
				for (unsigned a = 0; a < n_alt_of(it); a++)
					if (streq(alt_label(it, a), label->valuestring))
						chosen = (int)a;
				if (chosen < 0)
					return error_set(
					        err, ENOENT,
					        "choices: item \"%s\" chose %.*s, which the plan no longer offers "
					        "(the plan changed since it was applied)",
					        it->id, 64, label->valuestring);
			}
			if (chosen < 0 || (unsigned)chosen >= n_alt_of(it))
				return error_set(err, ERANGE,
				                 "choices: item \"%s\" chose alternative %d of %u "
				                 "(the plan changed since it was applied)",
				                 it->id, chosen, n_alt_of(it));
		} else if (chosen != -1) {
			return error_set(err, EINVAL, "choices: item \"%s\" is %s but chose alternative %d", it->id,
			                 item_status_name(s), chosen);
		}
		next[k].status = s;
		next[k].chosen = chosen;
		next[k].err = e;
		/* records from before "unknown" was written: the errno alone, as
		 * then */
		{
			const cJSON *un = cJSON_GetObjectItemCaseSensitive(c, "unknown");
			next[k].unknown = un ? cJSON_IsTrue(un) : apply_errno_is_missing_feature(e);
		}
		next[k].set = true;
		if (pv && (!cJSON_IsString(pv) || !pv->valuestring ||
		           str_copy(next[k].prev, sizeof(next[k].prev), pv->valuestring) < 0))
			return error_set(err, EINVAL,
			                 "choices: item \"%s\": \"prev\" must be a string of at most %d bytes", it->id,
			                 SYSCTL_VAL_MAX - 1);
		idx++;
	}

	for (unsigned k = 0; k < p->n; k++) {
		if (!next[k].set)
			continue;
		p->items[k].status = next[k].status;
		p->items[k].chosen = next[k].chosen;
		p->items[k].err = next[k].err;
		p->items[k].unknown = next[k].unknown;
		memcpy(p->items[k].prev, next[k].prev, sizeof(p->items[k].prev));
	}
	return 0;
}
