/* diff.c — the one comparison of a plan's effective choices with what the
 * kernel has (struct observed): used by CNI CHECK, the agent's drift repair
 * and `aiqosctl status`. Pure: reports differences as lines of text. */
#include <stdarg.h>

#include "plan.h"

/* Bounded appends into a caller's buffer; output is cut, never overrun. */
struct out {
	char *buf;
	size_t size, len;
};

_printf_(2, 3) static void out_line(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!o->buf || o->size == 0 || o->len >= o->size - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->len, o->size - o->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	o->len += (size_t)n;
	if (o->len >= o->size - 1) {
		o->len = o->size - 1;
		return;
	}
	o->buf[o->len++] = '\n';
	o->buf[o->len] = '\0';
}

/* "\"fq_codel target 1ms interval 10ms limit 1024 ecn\"" — kind and
 * parameters in quotes, without the object's place (the line names it); an
 * object of a kind aiqos cannot describe is named as such, unquoted. */
static void describe(const struct tc_spec *s, char *buf, size_t size)
{
	const struct tc_kind *k = tc_kind_get(s->kind);
	char params[TC_FORMAT_MAX];

	if (!k || !k->name || k->type != s->type) {
		snprintf(buf, size, "a %s of another kind", tc_type_name(s->type));
		return;
	}
	params[0] = '\0';
	if (k->format && k->format(s, params, sizeof(params)) < 0)
		params[0] = '\0';
	snprintf(buf, size, "\"%s%s%s\"", k->name, params[0] ? " " : "", params);
}

/* Sysctl keys match with '/' or '.' as separator. */
static bool sysctl_key_equal(const char *a, const char *b)
{
	for (; *a && *b; a++, b++) {
		char x = *a == '.' ? '/' : *a, y = *b == '.' ? '/' : *b;
		if (x != y)
			return false;
	}
	return *a == *b;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Equal as sequences of whitespace-separated words ("4096 87380" ==
 * "4096\t87380\n"): the kernel prints tcp_rmem with tabs. */
static bool value_equal(const char *a, const char *b)
{
	for (;;) {
		size_t la, lb;

		while (is_space(*a))
			a++;
		while (is_space(*b))
			b++;
		if (!*a || !*b)
			return !*a && !*b;
		for (la = 0; a[la] && !is_space(a[la]); la++)
			;
		for (lb = 0; b[lb] && !is_space(b[lb]); lb++)
			;
		if (la != lb || memcmp(a, b, la) != 0)
			return false;
		a += la;
		b += lb;
	}
}

/* A kernel value for printing: whitespace runs as one space, trimmed. */
static void squeeze(const char *s, char *buf, size_t size)
{
	size_t o = 0;

	while (is_space(*s))
		s++;
	for (; *s && o + 1 < size; s++) {
		if (is_space(*s)) {
			while (is_space(s[1]))
				s++;
			if (!s[1])
				break;
			buf[o++] = ' ';
		} else {
			buf[o++] = *s;
		}
	}
	buf[o] = '\0';
}

static void dotted(const char *key, char *buf, size_t size)
{
	str_copy(buf, size, key);
	for (char *c = buf; *c; c++)
		if (*c == '/')
			*c = '.';
}

int plan_diff(const struct plan *p, const struct attach_ifaces *ifs, const struct observed *obs, char *buf, size_t size)
{
	const struct plan_names names = plan_names_attach(ifs);
	struct out o = {buf, size, 0};
	unsigned n_obs = obs ? (obs->n < OBSERVED_MAX ? obs->n : OBSERVED_MAX) : 0;
	unsigned n_sys = obs ? (obs->n_sysctl < OBSERVED_SYSCTL_MAX ? obs->n_sysctl : OBSERVED_SYSCTL_MAX) : 0;
	int diffs = 0;

	if (buf && size)
		buf[0] = '\0';
	if (!p)
		return 0;
	for (unsigned i = 0; i < p->n; i++) {
		const struct plan_item *it = &p->items[i];
		const struct tc_spec *want = plan_item_effective_tc(it);
		const char *want_val = plan_item_effective_val(it);

		if (want) {
			const struct tc_spec *have = NULL;
			char w[TC_FORMAT_MAX + 64], h[TC_FORMAT_MAX + 64];

			for (unsigned j = 0; j < n_obs && !have; j++)
				if (obs->dev[j] == it->dev && tc_spec_same_object(want, &obs->tc[j]))
					have = &obs->tc[j];
			if (have && tc_spec_match(want, have))
				continue;
			describe(want, w, sizeof(w));
			if (have)
				describe(have, h, sizeof(h));
			out_line(&o, "%s on %s: want %s, have %s", it->id, plan_dev_ifname(&names, it->dev), w,
			         have ? h : "nothing");
			diffs++;
		} else if (want_val) {
			const char *have = NULL;
			char k[SYSCTL_KEY_MAX], hv[SYSCTL_VAL_MAX];

			for (unsigned j = 0; j < n_sys && !have; j++)
				if (sysctl_key_equal(obs->sysctl_key[j], it->key))
					have = obs->sysctl_val[j];
			if (have && value_equal(want_val, have))
				continue;
			dotted(it->key, k, sizeof(k));
			if (have)
				squeeze(have, hv, sizeof(hv));
			out_line(&o, "%s (%s): want \"%s\", have %s%s%s", it->id, k, want_val, have ? "\"" : "nothing",
			         have ? hv : "", have ? "\"" : "");
			diffs++;
		}
	}
	return diffs;
}
