/* test_agent_metrics.c — the Prometheus writer (grouping, HELP/TYPE once,
 * escaping, number formats, invalid input dropped) checked by a small
 * exposition-format parser, listen-address parsing, and the HTTP endpoint on
 * an ephemeral loopback port: libcurl in a second thread while the test
 * drives the sd-event loop (/metrics, /healthz, /readyz, 404, 405, HEAD,
 * keep-alive, render on the loop thread); histograms with fixed buckets, the
 * process_* families read from a /proc fixture and /proc/self, and the
 * agent's own families rendered from an agent (one label set per family,
 * rates by direction, a pod whose record holds degraded items counted
 * "degraded"). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <curl/curl.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "../../agent/agent.h"
#include "../../agent/metrics/agent_metrics.h"
#include "../../agent/metrics/metrics.h"
#include "../../agent/metrics/process_metrics.h"
#include "../../agent/reconcile/reconcile.h"
#include "../../agent/status.h"
#include "t.h"

/* ---- an exposition format checker (text format 0.0.4) ---- */

#define CHK_FAMILIES 160
#define CHK_LABELS   256

struct expo {
	unsigned n_fam;
	char fam[CHK_FAMILIES][96];
	char type[CHK_FAMILIES][16];
	bool help[CHK_FAMILIES], typed[CHK_FAMILIES], closed[CHK_FAMILIES];
	char labels[CHK_FAMILIES][CHK_LABELS]; /* the family's label names ("le" aside), in order */
	bool labelled[CHK_FAMILIES];
	unsigned samples;
	int current; /* family whose samples are being read, -1 none */
	char why[256];
};

static bool is_name_char(char c, bool first, bool colon)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':') ||
	       (!first && c >= '0' && c <= '9');
}

static const char *parse_name(const char *p, bool colon, char *out, size_t size)
{
	size_t n = 0;

	if (!is_name_char(*p, true, colon))
		return NULL;
	while (is_name_char(*p, n == 0, colon)) {
		if (n + 1 < size)
			out[n++] = *p;
		p++;
	}
	out[n] = '\0';
	return p;
}

static int fam_find(struct expo *x, const char *name)
{
	for (unsigned i = 0; i < x->n_fam; i++)
		if (streq(x->fam[i], name))
			return (int)i;
	return -1;
}

static int fam_add(struct expo *x, const char *name)
{
	int i = fam_find(x, name);

	if (i >= 0 || x->n_fam == CHK_FAMILIES)
		return i;
	str_copy(x->fam[x->n_fam], sizeof(x->fam[0]), name);
	return (int)x->n_fam++;
}

/* The family a sample belongs to (summary/histogram suffixes). */
static int sample_family(struct expo *x, const char *name)
{
	static const char *const suffixes[] = {"_sum", "_count", "_bucket"};
	int i = fam_find(x, name);

	if (i >= 0)
		return i;
	for (size_t s = 0; s < ARRAY_SIZE(suffixes); s++) {
		size_t n = strlen(name), k = strlen(suffixes[s]);
		char base[96];

		if (n > k && streq(name + n - k, suffixes[s]) && n - k < sizeof(base)) {
			memcpy(base, name, n - k);
			base[n - k] = '\0';
			i = fam_find(x, base);
			if (i >= 0 && (streq(x->type[i], "summary") || streq(x->type[i], "histogram")))
				return i;
		}
	}
	return -1;
}

static bool fail(struct expo *x, const char *line, const char *what)
{
	snprintf(x->why, sizeof(x->why), "%s: %.200s", what, line);
	return false;
}

static bool check_line(struct expo *x, const char *line)
{
	char name[96], label[96], names[CHK_LABELS] = "";
	const char *p = line;
	char *end;
	int f;

	if (!*line)
		return fail(x, line, "empty line");
	if (line[0] == '#') {
		bool is_help = strncmp(line, "# HELP ", 7) == 0, is_type = strncmp(line, "# TYPE ", 7) == 0;

		if (!is_help && !is_type)
			return true; /* a comment */
		p = parse_name(line + 7, true, name, sizeof(name));
		if (!p || *p != ' ')
			return fail(x, line, "bad HELP/TYPE name");
		f = fam_add(x, name);
		if (f < 0)
			return fail(x, line, "too many families");
		if (x->closed[f])
			return fail(x, line, "family reopened");
		if (is_help) {
			if (x->help[f])
				return fail(x, line, "second HELP");
			for (const char *c = p + 1; *c; c++)
				if (*c == '\\' && c[1] != '\\' && c[1] != 'n')
					return fail(x, line, "bad escape in HELP");
				else if (*c == '\\')
					c++;
			x->help[f] = true;
		} else {
			static const char *const types[] = {"counter", "gauge", "summary", "histogram", "untyped"};
			bool ok = false;

			if (x->typed[f])
				return fail(x, line, "second TYPE");
			for (size_t i = 0; i < ARRAY_SIZE(types); i++)
				ok = ok || streq(p + 1, types[i]);
			if (!ok)
				return fail(x, line, "unknown type");
			str_copy(x->type[f], sizeof(x->type[0]), p + 1);
			x->typed[f] = true;
		}
		if (x->current >= 0 && x->current != f)
			x->closed[x->current] = true;
		x->current = f;
		return true;
	}
	p = parse_name(line, true, name, sizeof(name));
	if (!p)
		return fail(x, line, "bad metric name");
	f = sample_family(x, name);
	if (f < 0 || !x->typed[f])
		return fail(x, line, "sample before its TYPE");
	if (x->closed[f])
		return fail(x, line, "samples of a family not together");
	if (x->current >= 0 && x->current != f)
		x->closed[x->current] = true;
	x->current = f;
	if (*p == '{') {
		p++;
		while (*p != '}') {
			p = parse_name(p, false, label, sizeof(label));
			if (!p || p[0] != '=' || p[1] != '"')
				return fail(x, line, "bad label");
			if (!streq(label, "le") && !streq(label, "quantile")) {
				size_t n = strlen(names);
				snprintf(names + n, sizeof(names) - n, "%s,", label);
			}
			for (p += 2; *p != '"'; p++) {
				if (!*p || *p == '\n')
					return fail(x, line, "unterminated label value");
				if (*p == '\\') {
					if (p[1] != '\\' && p[1] != '"' && p[1] != 'n')
						return fail(x, line, "bad escape in label value");
					p++;
				}
			}
			p++;
			if (*p == ',')
				p++;
			else if (*p != '}')
				return fail(x, line, "bad label separator");
		}
		p++;
	}
	/* one label set per family (Prometheus' conventions; a PodMonitor's
	 * relabelling and every query assume it) */
	if (!x->labelled[f]) {
		str_copy(x->labels[f], sizeof(x->labels[0]), names);
		x->labelled[f] = true;
	} else if (!streq(x->labels[f], names)) {
		return fail(x, line, "a second label set in one family");
	}
	if (*p != ' ')
		return fail(x, line, "no space before the value");
	p++;
	if (!streq(p, "NaN") && !streq(p, "+Inf") && !streq(p, "-Inf")) {
		errno = 0;
		(void)strtod(p, &end);
		if (end == p || *end || errno)
			return fail(x, line, "bad value");
		if (strchr(p, 'x') || strchr(p, 'X') || strchr(p, 'n') || strchr(p, 'N') || strchr(p, 'i'))
			return fail(x, line, "value not in Prometheus syntax");
	}
	x->samples++;
	return true;
}

/* Check a whole exposition; returns the number of samples or -1 (x->why). */
static int expo_check(const char *text, struct expo *x)
{
	const char *p = text;

	memset(x, 0, sizeof(*x));
	x->current = -1;
	if (!text)
		return fail(x, "", "no text"), -1;
	if (*text && text[strlen(text) - 1] != '\n')
		return fail(x, "", "does not end with a newline"), -1;
	while (*p) {
		const char *nl = strchr(p, '\n');
		char line[1024];
		size_t n = (size_t)(nl - p);

		if (n >= sizeof(line))
			return fail(x, p, "line too long"), -1;
		memcpy(line, p, n);
		line[n] = '\0';
		if (!check_line(x, line))
			return -1;
		p = nl + 1;
	}
	return (int)x->samples;
}

#define CHECK_EXPO(text)                                                                                  \
	do {                                                                                              \
		struct expo _x;                                                                           \
		if (expo_check((text), &_x) < 0) {                                                        \
			fprintf(stderr, "  %s:%d: exposition invalid: %s\n", __FILE__, __LINE__, _x.why); \
			t_failed_now = 1;                                                                 \
		}                                                                                         \
	} while (0)

/* ---- the writer ---- */

TEST(metrics_checker_catches_errors)
{
	static const char *const bad[] = {
	        "x 1\n",                                        /* no TYPE */
	        "# TYPE x gauge\n# TYPE x gauge\nx 1\n",        /* TYPE twice */
	        "# TYPE x gauge\nx{a=\"b} 1\n",                 /* unterminated */
	        "# TYPE x gauge\nx{a=\"\\t\"} 1\n",             /* bad escape */
	        "# TYPE x gauge\nx 0x10\n",                     /* hex */
	        "# TYPE x gauge\nx inf\n",                      /* not +Inf */
	        "# TYPE x gauge\n# TYPE y gauge\ny 1\nx 1\n",   /* family split */
	        "# TYPE x gauge\nx 1",                          /* no final newline */
	        "# TYPE x gauge\nx{1a=\"b\"} 1\n",              /* label name */
	        "# TYPE x gauge\nx{a=\"1\"} 1\nx{b=\"1\"} 1\n", /* two label sets */
	        "# TYPE x gauge\nx{a=\"1\"} 1\nx 1\n",          /* labels and none */
	};
	struct expo x;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		if (expo_check(bad[i], &x) >= 0) {
			fprintf(stderr, "  accepted bad exposition %zu\n", i);
			t_failed_now = 1;
		}
	}
	CHECK_INT(expo_check("# HELP x h\\\\ \\n\n# TYPE x gauge\nx{a=\"\\\"\\\\\\n\",b=\"\"} "
	                     "-1.5e-07\nx{a=\"\",b=\"1\"} NaN\n",
	                     &x),
	          2);
}

TEST(metrics_writer_format)
{
	struct metrics_writer *w = metrics_writer_new();
	char *text;
	size_t len = 0;
	struct expo x;

	metrics_write(w, "aiqos_pods", "Pods on the node by class.", "gauge", 3, "class", "inference", NULL);
	metrics_write(w, "aiqos_node_mode", "Current node mode (1) among all modes.", "gauge", 1, "mode", "mixed",
	              NULL);
	/* interleaved: still grouped under one HELP/TYPE */
	metrics_write(w, "aiqos_pods", "Pods on the node by class.", "gauge", 2, "class", "training", NULL);
	metrics_write(w, "aiqos_node_mode", "Current node mode (1) among all modes.", "gauge", 0, "mode", "idle", NULL);
	/* escaping of label values and help */
	metrics_write(w, "aiqos_qdisc_drops_total", "Drops.\nSecond line \\ backslash.", "counter", 12345678901.0,
	              "dev", "veth\"1\\x\ny", "pod", "default/web", NULL);
	metrics_write(w, "aiqos_no_labels", "", "untyped", 0.25, NULL);
	metrics_write(w, "aiqos_special", "Special values.", "gauge", NAN, "v", "nan", NULL);
	metrics_write(w, "aiqos_special", "Special values.", "gauge", INFINITY, "v", "inf", NULL);
	metrics_write(w, "aiqos_special", "Special values.", "gauge", -INFINITY, "v", "-inf", NULL);
	metrics_write(w, "aiqos_special", "Special values.", "gauge", 1e300, "v", "big", NULL);
	metrics_write(w, "aiqos_special", "Special values.", "gauge", -0.1, "v", "neg", NULL);
	metrics_write_summary(w, "aiqos_retune_duration_seconds", "Re-tune latency.", 0.125, 7, "scope", "pod", NULL);
	{
		static const double le[] = {0.001, 0.01, 0.1};
		static const uint64_t counts[] = {1, 2, 3};
		metrics_write_histogram(w, "aiqos_lat_seconds", "Latency.", le, counts, 3, 0.5, 8, "op", "x", NULL);
	}
	CHECK_INT(metrics_writer_dropped(w), 0);

	/* dropped: bad metric name, bad label name, reserved label, type conflict, NULL value */
	metrics_write(w, "9bad", "x", "gauge", 1, NULL);
	metrics_write(w, "aiqos_pods", "Pods on the node by class.", "gauge", 1, "bad-label", "x", NULL);
	metrics_write(w, "aiqos_pods", "Pods on the node by class.", "gauge", 1, "__name__", "x", NULL);
	metrics_write(w, "aiqos_pods", "Pods on the node by class.", "counter", 1, "class", "x", NULL);
	metrics_write(w, "aiqos_pods", "Pods on the node by class.", "gauge", 1, "class", NULL, NULL);
	metrics_write(w, "aiqos_x", "x", "summary", 1, NULL);
	metrics_write(w, "aiqos_y", "x", "nonsense", 1, NULL);
	CHECK_INT(metrics_writer_dropped(w), 7);
	/* another help text for a known family: kept, under the first help */
	metrics_write(w, "aiqos_pods", "Other help.", "gauge", 1, "class", "default", NULL);
	CHECK_INT(metrics_writer_dropped(w), 7);

	text = metrics_writer_text(w, &len);
	CHECK(text != NULL);
	if (!text) {
		metrics_writer_free(w);
		return;
	}
	CHECK_INT(len, strlen(text));
	CHECK_EXPO(text);
	CHECK_INT(expo_check(text, &x), 20);
	CHECK(strstr(text, "Other help.") == NULL);
	CHECK_CONTAINS(text, "# HELP aiqos_pods Pods on the node by class.\n# TYPE aiqos_pods gauge\n"
	                     "aiqos_pods{class=\"inference\"} 3\naiqos_pods{class=\"training\"} 2\n"
	                     "aiqos_pods{class=\"default\"} 1\n# HELP aiqos_node_mode");
	CHECK_CONTAINS(text, "aiqos_node_mode{mode=\"mixed\"} 1\naiqos_node_mode{mode=\"idle\"} 0\n");
	CHECK_CONTAINS(text, "# HELP aiqos_qdisc_drops_total Drops.\\nSecond line \\\\ backslash.\n");
	CHECK_CONTAINS(text, "aiqos_qdisc_drops_total{dev=\"veth\\\"1\\\\x\\ny\",pod=\"default/web\"} 12345678901\n");
	CHECK_CONTAINS(text, "# TYPE aiqos_no_labels untyped\naiqos_no_labels 0.25\n");
	CHECK(strstr(text, "# HELP aiqos_no_labels") == NULL);
	CHECK_CONTAINS(text, "aiqos_special{v=\"nan\"} NaN\n");
	CHECK_CONTAINS(text, "aiqos_special{v=\"inf\"} +Inf\n");
	CHECK_CONTAINS(text, "aiqos_special{v=\"-inf\"} -Inf\n");
	CHECK_CONTAINS(text, "aiqos_special{v=\"big\"} 1e+300\n");
	CHECK_CONTAINS(text, "aiqos_special{v=\"neg\"} -0.1\n");
	CHECK_CONTAINS(text, "# TYPE aiqos_retune_duration_seconds summary\n"
	                     "aiqos_retune_duration_seconds_sum{scope=\"pod\"} 0.125\n"
	                     "aiqos_retune_duration_seconds_count{scope=\"pod\"} 7\n");
	CHECK_CONTAINS(text, "# TYPE aiqos_lat_seconds histogram\n"
	                     "aiqos_lat_seconds_bucket{op=\"x\",le=\"0.001\"} 1\n"
	                     "aiqos_lat_seconds_bucket{op=\"x\",le=\"0.01\"} 3\n"
	                     "aiqos_lat_seconds_bucket{op=\"x\",le=\"0.1\"} 6\n"
	                     "aiqos_lat_seconds_bucket{op=\"x\",le=\"+Inf\"} 8\n"
	                     "aiqos_lat_seconds_sum{op=\"x\"} 0.5\naiqos_lat_seconds_count{op=\"x\"} 8\n");
	CHECK(strstr(text, "aiqos_x") == NULL && strstr(text, "aiqos_y") == NULL && strstr(text, "9bad") == NULL);
	free(text);
	metrics_writer_free(w);

	/* an empty writer renders as nothing; NULL writers are ignored */
	w = metrics_writer_new();
	text = metrics_writer_text(w, &len);
	CHECK_STR(text, "");
	free(text);
	metrics_writer_free(w);
	metrics_write(NULL, "a", "b", "gauge", 1, NULL);
	metrics_writer_free(NULL);
}

TEST(metrics_label_value_cut)
{
	struct metrics_writer *w = metrics_writer_new();
	char v[METRICS_LABEL_VALUE_MAX + 40], *text, *start, *end;

	/* 'a' then 2-byte UTF-8 characters across the cut */
	v[0] = 'a';
	for (size_t i = 1; i + 2 < sizeof(v); i += 2) {
		v[i] = (char)0xc3;
		v[i + 1] = (char)0xa9;
	}
	v[sizeof(v) - 2] = 'z';
	v[sizeof(v) - 1] = '\0';
	metrics_write(w, "m", "h", "gauge", 1, "l", v, NULL);
	text = metrics_writer_text(w, NULL);
	start = text ? strstr(text, "l=\"") : NULL;
	end = start ? strstr(start + 3, "\"}") : NULL;
	CHECK(start && end);
	if (start && end) {
		size_t n = (size_t)(end - start - 3);
		CHECK(n <= METRICS_LABEL_VALUE_MAX);
		CHECK(n >= METRICS_LABEL_VALUE_MAX - 1);
		CHECK(((unsigned char)start[3 + n - 1] & 0xc0) != 0xc0); /* not cut inside a character */
	}
	CHECK_EXPO(text);
	free(text);
	metrics_writer_free(w);
}

TEST(metrics_format_value)
{
	static const struct {
		double v;
		const char *want;
	} cases[] = {
	        {0, "0"},
	        {1, "1"},
	        {-7, "-7"},
	        {0.1, "0.1"},
	        {1.5e-9, "1.5e-09"},
	        {123456789012.0, "123456789012"},
	        {9007199254740992.0, "9007199254740992"},
	        {1e17, "1e+17"},
	        {1.0 / 3, "0.3333333333333333"},
	};
	char buf[64];

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		CHECK_STR(metrics_format_value(cases[i].v, buf, sizeof(buf)), cases[i].want);
		if (strtod(buf, NULL) != cases[i].v) {
			fprintf(stderr, "  %s does not read back\n", buf);
			t_failed_now = 1;
		}
	}
	CHECK_STR(metrics_format_value(NAN, buf, sizeof(buf)), "NaN");
	CHECK_STR(metrics_format_value(-INFINITY, buf, sizeof(buf)), "-Inf");
}

/* ---- addresses ---- */

TEST(metrics_addr_parse)
{
	static const struct {
		const char *in;
		int r;
		bool disabled;
		int family;
		const char *ip;
		unsigned port;
		const char *err;
	} cases[] = {
	        {"127.0.0.1:9464", 0, false, AF_INET, "127.0.0.1", 9464, NULL},
	        {"0.0.0.0:1", 0, false, AF_INET, "0.0.0.0", 1, NULL},
	        {":9464", 0, false, AF_INET6, "::", 9464, NULL},
	        {"[::1]:9464", 0, false, AF_INET6, "::1", 9464, NULL},
	        {"[fd00::5]:0", 0, false, AF_INET6, "fd00::5", 0, NULL},
	        {"127.0.0.1:65535", 0, false, AF_INET, "127.0.0.1", 65535, NULL},
	        {"", 0, true, 0, NULL, 0, NULL},
	        {"0", 0, true, 0, NULL, 0, NULL},
	        {"127.0.0.1:65536", -EINVAL, false, 0, NULL, 0, "port '65536' is not a number"},
	        {"127.0.0.1:", -EINVAL, false, 0, NULL, 0, "missing port"},
	        {"127.0.0.1:9x", -EINVAL, false, 0, NULL, 0, "port '9x'"},
	        {"127.0.0.1:-1", -EINVAL, false, 0, NULL, 0, "port '-1'"},
	        {"9464", -EINVAL, false, 0, NULL, 0, "expected HOST:PORT"},
	        {"localhost:9464", -EINVAL, false, 0, NULL, 0, "'localhost' is not an IP address"},
	        {"::1:9464", -EINVAL, false, 0, NULL, 0, "in brackets"},
	        {"[::1]9464", -EINVAL, false, 0, NULL, 0, "expected [IPv6]:PORT"},
	        {"[::1:9464", -EINVAL, false, 0, NULL, 0, "expected [IPv6]:PORT"},
	        {"[1.2.3.4]:80", -EINVAL, false, 0, NULL, 0, "not an IPv6 address"},
	        {"300.1.1.1:80", -EINVAL, false, 0, NULL, 0, "not an IP address"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct sockaddr_storage sa;
		socklen_t len = 0;
		bool disabled = false;
		struct error err = {0};
		char ip[64] = "";
		unsigned port = 0;
		int r = metrics_addr_parse(cases[i].in, &sa, &len, &disabled, &err);

		if (r != cases[i].r || disabled != cases[i].disabled) {
			fprintf(stderr, "  case %zu '%s': r=%d disabled=%d (%s)\n", i, cases[i].in, r, disabled,
			        err.msg);
			t_failed_now = 1;
			continue;
		}
		if (cases[i].err)
			CHECK_CONTAINS(err.msg, cases[i].err);
		if (r < 0 || disabled)
			continue;
		CHECK_INT(sa.ss_family, cases[i].family);
		if (sa.ss_family == AF_INET) {
			inet_ntop(AF_INET, &((struct sockaddr_in *)&sa)->sin_addr, ip, sizeof(ip));
			port = ntohs(((struct sockaddr_in *)&sa)->sin_port);
			CHECK_INT(len, sizeof(struct sockaddr_in));
		} else {
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&sa)->sin6_addr, ip, sizeof(ip));
			port = ntohs(((struct sockaddr_in6 *)&sa)->sin6_port);
			CHECK_INT(len, sizeof(struct sockaddr_in6));
		}
		CHECK_STR(ip, cases[i].ip);
		CHECK_INT(port, cases[i].port);
	}
}

/* ---- the HTTP server ---- */

struct fake {
	atomic_bool healthy, ready;
	atomic_int renders;
	bool render_on_loop_thread;
	pthread_t loop_thread;
};

static void fake_render(void *ud, struct metrics_writer *w)
{
	struct fake *f = ud;

	atomic_fetch_add(&f->renders, 1);
	f->render_on_loop_thread = pthread_equal(pthread_self(), f->loop_thread);
	metrics_write(w, "aiqos_node_mode", "Node mode.", "gauge", 1, "mode", "mixed", NULL);
	metrics_write(w, "aiqos_node_mode", "Node mode.", "gauge", 0, "mode", "idle", NULL);
	metrics_write(w, "aiqos_pods", "Pods by class.", "gauge", 2, "class", "inference", NULL);
	metrics_write(w, "aiqos_qdisc_backlog_bytes", "Backlog.", "gauge", 1500, "dev", "veth\"a\\b\nc", "pod",
	              "default/web", NULL);
	metrics_write_summary(w, "aiqos_retune_duration_seconds", "Re-tune latency.", 0.003, 2, NULL);
}

static bool fake_healthy(void *ud)
{
	return atomic_load(&((struct fake *)ud)->healthy);
}

static bool fake_ready(void *ud)
{
	return atomic_load(&((struct fake *)ud)->ready);
}

static const struct metrics_ops fake_ops = {.render = fake_render, .healthy = fake_healthy, .ready = fake_ready};

struct http_result {
	long code;
	char ctype[128];
	char body[8192];
	size_t len;
	CURLcode cc;
};

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
	struct http_result *r = ud;
	size_t k = sz * n;

	if (r->len + k >= sizeof(r->body))
		k = sizeof(r->body) - 1 - r->len;
	memcpy(r->body + r->len, p, k);
	r->len += k;
	r->body[r->len] = '\0';
	return sz * n;
}

static void http(CURL *c, const char *url, const char *method, struct http_result *r)
{
	char *ct = NULL;

	memset(r, 0, sizeof(*r));
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_NOBODY, method && streq(method, "HEAD") ? 1L : 0L);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method && !streq(method, "HEAD") ? method : NULL);
	r->cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->code);
	if (curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
		str_copy(r->ctype, sizeof(r->ctype), ct);
}

struct job {
	void (*fn)(void *arg);
	void *arg;
	atomic_int done;
};

static void *job_main(void *p)
{
	struct job *j = p;

	j->fn(j->arg);
	atomic_store(&j->done, 1);
	return NULL;
}

static void run_client(sd_event *loop, void (*fn)(void *arg), void *arg)
{
	struct job j = {.fn = fn, .arg = arg};
	pthread_t t;

	CHECK(pthread_create(&t, NULL, job_main, &j) == 0);
	for (int i = 0; i < 2000 && !atomic_load(&j.done); i++)
		sd_event_run(loop, 10 * 1000);
	CHECK(atomic_load(&j.done));
	pthread_join(t, NULL);
}

struct scrape {
	char base[64];
	struct fake *f;
	struct http_result metrics, head, health, ready_no, ready_yes, missing, post, query, health_bad;
	unsigned keepalive_ok;
	long reused_connections;
};

static void scrape_client(void *arg)
{
	struct scrape *s = arg;
	CURL *c = curl_easy_init();
	char url[128];

	if (!c)
		return;
	snprintf(url, sizeof(url), "%s/metrics", s->base);
	http(c, url, "GET", &s->metrics);
	http(c, url, "HEAD", &s->head);
	snprintf(url, sizeof(url), "%s/healthz", s->base);
	http(c, url, "GET", &s->health);
	snprintf(url, sizeof(url), "%s/readyz", s->base);
	http(c, url, "GET", &s->ready_no);
	atomic_store(&s->f->ready, true);
	http(c, url, "GET", &s->ready_yes);
	atomic_store(&s->f->healthy, false);
	snprintf(url, sizeof(url), "%s/healthz", s->base);
	http(c, url, "GET", &s->health_bad);
	snprintf(url, sizeof(url), "%s/nope", s->base);
	http(c, url, "GET", &s->missing);
	snprintf(url, sizeof(url), "%s/metrics", s->base);
	http(c, url, "POST", &s->post);
	snprintf(url, sizeof(url), "%s/metrics?x=1", s->base);
	http(c, url, "GET", &s->query);
	/* keep-alive: the same connection serves many requests */
	for (int i = 0; i < 20; i++) {
		struct http_result r;
		long n = 0;

		http(c, url, "GET", &r);
		if (r.code == 200)
			s->keepalive_ok++;
		curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &n);
		s->reused_connections += n == 0;
	}
	curl_easy_cleanup(c);
}

TEST(metrics_server_http)
{
	sd_event *loop = NULL;
	struct metrics_server *m = NULL;
	struct error err = {0};
	struct fake f = {.healthy = true, .ready = false};
	struct scrape s = {.f = &f};

	f.loop_thread = pthread_self();
	CHECK(sd_event_new(&loop) >= 0);
	CHECK_INT(metrics_server_new(loop, "127.0.0.1:0", &fake_ops, &f, &m, &err), 0);
	if (!m) {
		fprintf(stderr, "  %s\n", err.msg);
		sd_event_unref(loop);
		return;
	}
	CHECK(metrics_server_port(m) > 0);
	snprintf(s.base, sizeof(s.base), "http://127.0.0.1:%u", metrics_server_port(m));
	run_client(loop, scrape_client, &s);

	CHECK_INT(s.metrics.cc, CURLE_OK);
	CHECK_INT(s.metrics.code, 200);
	CHECK_STR(s.metrics.ctype, "text/plain; version=0.0.4; charset=utf-8");
	CHECK_EXPO(s.metrics.body);
	CHECK_CONTAINS(s.metrics.body, "# TYPE aiqos_node_mode gauge\naiqos_node_mode{mode=\"mixed\"} 1\n");
	CHECK_CONTAINS(s.metrics.body,
	               "aiqos_qdisc_backlog_bytes{dev=\"veth\\\"a\\\\b\\nc\",pod=\"default/web\"} 1500\n");
	CHECK_CONTAINS(s.metrics.body, "aiqos_retune_duration_seconds_count 2\n");
	CHECK(f.render_on_loop_thread);

	CHECK_INT(s.head.code, 200);
	CHECK_INT(s.head.len, 0);
	CHECK_INT(s.health.code, 200);
	CHECK_STR(s.health.body, "ok\n");
	CHECK_INT(s.ready_no.code, 503);
	CHECK_STR(s.ready_no.body, "not ready\n");
	CHECK_INT(s.ready_yes.code, 200);
	CHECK_INT(s.health_bad.code, 503);
	CHECK_INT(s.missing.code, 404);
	CHECK_INT(s.post.code, 405);
	CHECK_INT(s.query.code, 200);
	CHECK_CONTAINS(s.query.body, "aiqos_pods{class=\"inference\"} 2\n");
	CHECK_INT(s.keepalive_ok, 20);
	CHECK_INT(s.reused_connections, 20);
	/* GET, HEAD, query and the 20 keep-alive scrapes rendered; nothing else did */
	CHECK_INT(atomic_load(&f.renders), 23);

	metrics_server_free(m);
	/* the port is closed */
	{
		struct scrape again = {.f = &f};
		CURL *c = curl_easy_init();
		char url[128];
		snprintf(url, sizeof(url), "%s/healthz", s.base);
		http(c, url, "GET", &again.health);
		CHECK(again.health.cc == CURLE_COULDNT_CONNECT);
		curl_easy_cleanup(c);
	}
	sd_event_unref(loop);
}

struct simple_get {
	char url[96];
	struct http_result r;
};

static void get_client(void *arg)
{
	struct simple_get *g = arg;
	CURL *c = curl_easy_init();

	if (!c)
		return;
	http(c, g->url, "GET", &g->r);
	curl_easy_cleanup(c);
}

/* ":PORT" listens on IPv6 and IPv4; "[::1]:0" on IPv6 loopback. No ops = healthy and ready. */
TEST(metrics_server_families)
{
	sd_event *loop = NULL;
	struct metrics_server *m = NULL;
	struct error err = {0};
	struct simple_get g4, g6, gm;

	memset(&g4, 0, sizeof(g4));
	memset(&g6, 0, sizeof(g6));
	memset(&gm, 0, sizeof(gm));

	CHECK(sd_event_new(&loop) >= 0);
	CHECK_INT(metrics_server_new(loop, ":0", NULL, NULL, &m, &err), 0);
	if (m) {
		snprintf(g4.url, sizeof(g4.url), "http://127.0.0.1:%u/readyz", metrics_server_port(m));
		snprintf(g6.url, sizeof(g6.url), "http://[::1]:%u/healthz", metrics_server_port(m));
		snprintf(gm.url, sizeof(gm.url), "http://[::1]:%u/metrics", metrics_server_port(m));
		run_client(loop, get_client, &g4);
		run_client(loop, get_client, &g6);
		run_client(loop, get_client, &gm);
		CHECK_INT(g4.r.code, 200);
		CHECK_INT(g6.r.code, 200);
		CHECK_INT(gm.r.code, 200);
		CHECK_STR(gm.r.body, "");
		metrics_server_free(m);
		m = NULL;
	}
	CHECK_INT(metrics_server_new(loop, "[::1]:0", NULL, NULL, &m, &err), 0);
	if (m) {
		memset(&g6, 0, sizeof(g6));
		snprintf(g6.url, sizeof(g6.url), "http://[::1]:%u/healthz", metrics_server_port(m));
		run_client(loop, get_client, &g6);
		CHECK_INT(g6.r.code, 200);
		metrics_server_free(m);
	}
	sd_event_unref(loop);
}

TEST(metrics_server_errors)
{
	sd_event *loop = NULL;
	struct metrics_server *m = (struct metrics_server *)1, *m2 = NULL;
	struct error err = {0};
	char addr[64];

	CHECK(sd_event_new(&loop) >= 0);
	/* disabled */
	CHECK_INT(metrics_server_new(loop, "", &fake_ops, NULL, &m, &err), 0);
	CHECK(m == NULL);
	CHECK_INT(metrics_server_new(loop, "0", &fake_ops, NULL, &m, &err), 0);
	CHECK(m == NULL);
	CHECK_INT(metrics_server_port(NULL), 0);
	metrics_server_free(NULL);
	/* bad address */
	CHECK_INT(metrics_server_new(loop, "localhost:1", &fake_ops, NULL, &m, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "metrics address 'localhost:1'");
	/* port in use */
	CHECK_INT(metrics_server_new(loop, "127.0.0.1:0", NULL, NULL, &m, &err), 0);
	if (m) {
		snprintf(addr, sizeof(addr), "127.0.0.1:%u", metrics_server_port(m));
		err = (struct error){0};
		CHECK_INT(metrics_server_new(loop, addr, NULL, NULL, &m2, &err), -EADDRINUSE);
		CHECK_CONTAINS(err.msg, addr);
		CHECK_CONTAINS(err.msg, "bind");
		CHECK(m2 == NULL);
		metrics_server_free(m);
	}
	/* an address this host does not have */
	err = (struct error){0};
	CHECK_INT(metrics_server_new(loop, "192.0.2.1:0", NULL, NULL, &m, &err), -EADDRNOTAVAIL);
	sd_event_unref(loop);
}

/* ---- histograms ---- */

TEST(metrics_histogram_buckets)
{
	static const struct metrics_buckets b = {.n = 3, .le = {0.001, 0.01, 0.1}};
	struct metrics_histogram h = {0};
	struct metrics_writer *w = metrics_writer_new();
	char *text;

	/* on a bound: that bucket (le is "less or equal"); above the last: +Inf only */
	metrics_histogram_observe(&h, &b, 0.0005);
	metrics_histogram_observe(&h, &b, 0.001);
	metrics_histogram_observe(&h, &b, 0.05);
	metrics_histogram_observe(&h, &b, 3);
	metrics_histogram_observe(&h, &b, NAN); /* ignored */
	CHECK_INT(h.count, 4);
	CHECK_INT(h.counts[0], 2);
	CHECK_INT(h.counts[1], 0);
	CHECK_INT(h.counts[2], 1);
	CHECK_INT(h.counts[3], 1);
	metrics_write_hist(w, "aiqos_x_seconds", "X.", &b, &h, "op", "a", NULL);
	/* a zeroed histogram is an empty one */
	metrics_write_hist(w, "aiqos_x_seconds", "X.", &b, &(struct metrics_histogram){0}, "op", "b", NULL);
	text = metrics_writer_text(w, NULL);
	CHECK_EXPO(text);
	CHECK_CONTAINS(text, "# TYPE aiqos_x_seconds histogram\n"
	                     "aiqos_x_seconds_bucket{op=\"a\",le=\"0.001\"} 2\n"
	                     "aiqos_x_seconds_bucket{op=\"a\",le=\"0.01\"} 2\n"
	                     "aiqos_x_seconds_bucket{op=\"a\",le=\"0.1\"} 3\n"
	                     "aiqos_x_seconds_bucket{op=\"a\",le=\"+Inf\"} 4\n"
	                     "aiqos_x_seconds_sum{op=\"a\"} 3.0515\n"
	                     "aiqos_x_seconds_count{op=\"a\"} 4\n");
	CHECK_CONTAINS(text, "aiqos_x_seconds_bucket{op=\"b\",le=\"+Inf\"} 0\naiqos_x_seconds_sum{op=\"b\"} 0\n");
	free(text);
	metrics_writer_free(w);
	/* the shipped bucket sets ascend and fit */
	for (const struct metrics_buckets *const *bs =
	             (const struct metrics_buckets *const[]){&metrics_buckets_plugin, &metrics_buckets_retune,
	                                                     &metrics_buckets_api, NULL};
	     *bs; bs++) {
		CHECK((*bs)->n >= 10 && (*bs)->n <= METRICS_BUCKETS_MAX);
		for (unsigned i = 1; i < (*bs)->n; i++)
			CHECK((*bs)->le[i] > (*bs)->le[i - 1]);
	}
}

/* ---- process_* ---- */

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	CHECK(fd >= 0);
	if (fd >= 0) {
		CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
		close(fd);
	}
}

TEST(process_stats_fixture_and_self)
{
	char dir[] = "/tmp/aqm-proc-XXXXXX", path[128], stat_path[128];
	long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	struct process_stats st;
	struct metrics_writer *w;
	char *text;
	time_t now = time(NULL);

	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/fd", dir);
	CHECK(mkdir(path, 0700) == 0);
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/fd/%d", dir, i);
		write_file(path, "");
	}
	/* a comm with spaces and parentheses; utime 250 + stime 150 ticks,
	 * starttime 1000 ticks, vsize 123456789, rss 2000 pages */
	snprintf(path, sizeof(path), "%s/stat", dir);
	write_file(path, "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 3 0 1000 123456789 "
	                 "2000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n");
	snprintf(stat_path, sizeof(stat_path), "%s/procstat", dir);
	write_file(stat_path, "cpu  1 2 3 4\nintr 5\nbtime 1700000000\nprocesses 9\n");
	CHECK_INT(process_stats_read(dir, stat_path, &st), 0);
	CHECK(fabs(st.cpu_seconds - 400.0 / (double)tick) < 1e-9);
	CHECK_INT(st.rss_bytes, 2000 * page);
	CHECK_INT(st.vsize_bytes, 123456789);
	CHECK(fabs(st.start_time_unix - (1700000000.0 + 1000.0 / (double)tick)) < 1e-6);
	CHECK_INT(st.open_fds, 3);
	CHECK(st.max_fds > 0);
	/* malformed */
	snprintf(path, sizeof(path), "%s/stat", dir);
	write_file(path, "4242 (x) S 1 2\n");
	CHECK_INT(process_stats_read(dir, stat_path, &st), -EINVAL);
	CHECK(process_stats_read("/nonexistent-aiqos", stat_path, &st) < 0);

	/* this process */
	CHECK_INT(process_stats_read("/proc/self", "/proc/stat", &st), 0);
	CHECK(st.rss_bytes > 100 * 1024 && st.rss_bytes < 1024ull * 1024 * 1024);
	CHECK(st.open_fds >= 3 && st.open_fds < 1000);
	CHECK(st.start_time_unix > (double)now - 3600 && st.start_time_unix <= (double)now + 2);
	{
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		struct process_stats st2;

		CHECK_INT(process_stats_read("/proc/self", "/proc/stat", &st2), 0);
		CHECK_INT(st2.open_fds, st.open_fds + 1); /* the directory's own fd is not counted */
		close(fd);
	}
	w = metrics_writer_new();
	process_metrics_write(w);
	text = metrics_writer_text(w, NULL);
	CHECK_EXPO(text);
	CHECK_CONTAINS(text, "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes ");
	CHECK_CONTAINS(text, "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total ");
	CHECK_CONTAINS(text, "\nprocess_open_fds ");
	CHECK_CONTAINS(text, "\nprocess_max_fds ");
	CHECK_CONTAINS(text, "\nprocess_start_time_seconds ");
	free(text);
	metrics_writer_free(w);
	snprintf(path, sizeof(path), "rm -rf '%s'", dir);
	CHECK(system(path) == 0);
}

/* ---- the agent's families ---- */

static char *render(struct agent *ag)
{
	struct metrics_writer *w = metrics_writer_new();
	char *text;

	agent_metrics_render(ag, w);
	CHECK_INT(metrics_writer_dropped(w), 0);
	text = metrics_writer_text(w, NULL);
	metrics_writer_free(w);
	return text;
}

TEST(agent_metrics_families)
{
	struct agent *ag = calloc(1, sizeof(*ag));
	char *text;

	if (!ag)
		return;
	agent_init(ag);
	ag->mode.mode = MODE_MIXED;
	str_copy(ag->up.ifname, sizeof(ag->up.ifname), "up0"); /* ifindex 0: no kernel reads */
	ag->have_info = true;
	ag->info.mode = MODE_MIXED;
	ag->info.rate_bps = 500000000;
	ag->info.shaped_bps = 485000000;
	ag->info.class_rate_bps[CLASS_INFERENCE] = 145500000;
	ag->info.class_rate_bps[CLASS_TRAINING] = 339500000;
	ag->info.shares.share_pm[CLASS_INFERENCE] = 300;
	ag->info.shares.share_pm[CLASS_TRAINING] = 700;
	ag->info.bulk_rate_bps = 24000000; /* BANDS */
	ag->info.down.planned = true;
	ag->info.down.bulk_rate_bps = 16000000;
	ag->rcv_window = 61250;
	agent_count_retune(ag, RETUNE_POD, RESULT_OK, 0.004);
	agent_count_retune(ag, RETUNE_NODE, RESULT_DEGRADED, 0.2);
	text = render(ag);
	CHECK_EXPO(text);
	{
		char want[128];
		snprintf(want, sizeof(want), "aiqos_build_info{version=\"%s\",compiler=\"", aiqos_version());
		CHECK_CONTAINS(text, want);
	}
	CHECK_CONTAINS(text, "\nprocess_resident_memory_bytes ");
	CHECK_CONTAINS(text, "aiqos_node_mode{mode=\"mixed\"} 1\n");
	CHECK_CONTAINS(text, "aiqos_uplink_rate_bytes_per_second{dev=\"up0\",direction=\"egress\"} 62500000\n");
	CHECK_CONTAINS(text, "aiqos_uplink_shaped_rate_bytes_per_second{dev=\"up0\",direction=\"egress\"} 60625000\n");
	CHECK_CONTAINS(text, "aiqos_download_training_rcv_window_bytes{dev=\"aiqos-ifb0\"} 61250\n");
	CHECK_CONTAINS(text, "aiqos_class_guaranteed_rate_bytes_per_second{dev=\"up0\",direction=\"egress\","
	                     "class=\"inference\"} 18187500\n");
	CHECK_CONTAINS(text, "aiqos_class_guaranteed_share_ratio{dev=\"up0\",direction=\"egress\",class=\"training\"} "
	                     "0.7\n");
	/* the inference-bulk band, both directions */
	CHECK_CONTAINS(text, "aiqos_class_guaranteed_rate_bytes_per_second{dev=\"up0\",direction=\"egress\","
	                     "class=\"inference-bulk\"} 3000000\n");
	CHECK_CONTAINS(text, "aiqos_class_guaranteed_rate_bytes_per_second{dev=\"aiqos-ifb0\",direction=\"ingress\","
	                     "class=\"inference-bulk\"} 2000000\n");
	/* and the status: the bands beside the shares */
	{
		cJSON *st, *b;

		ag->info.bulk_priority = 0x10011;
		ag->info.down.bulk_priority = 0x10011;
		ag->info.bulk_threshold_bytes = 1048576;
		ag->info.bulk_idle_ms = 20;
		ag->info.bulk_weight = 1;
		st = agent_status_json(ag);
		b = st ? cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(st, "uplink"), "bands")
		       : NULL;
		CHECK(b != NULL);
		CHECK_INT((int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(b, "thresholdBytes")), 1048576);
		CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(b, "uplink")),
		          "inference-bulk 1:11 rate 24mbit");
		CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(b, "download")),
		          "inference-bulk 1:11 rate 16mbit");
		cJSON_Delete(st);
	}
	/* classes without a guarantee are not listed */
	CHECK(strstr(text, "guaranteed_share_ratio{dev=\"up0\",direction=\"egress\",class=\"default\"}") == NULL);
	CHECK_CONTAINS(text, "aiqos_retune_duration_seconds_bucket{scope=\"pod\",le=\"0.005\"} 1\n");
	CHECK_CONTAINS(text, "aiqos_retune_duration_seconds_bucket{scope=\"node\",le=\"0.1\"} 0\n");
	CHECK_CONTAINS(text, "aiqos_retune_duration_seconds_bucket{scope=\"node\",le=\"0.25\"} 1\n");
	CHECK_CONTAINS(text, "aiqos_retunes_total{scope=\"node\",result=\"degraded\"} 1\n");
	CHECK_CONTAINS(text, "aiqos_pods_tuning{status=\"degraded\"} 0\n");
	/* the old mixed family and the clashing pod labels are gone */
	CHECK(strstr(text, "aiqos_qdisc_") == NULL);
	CHECK(strstr(text, "namespace=") == NULL);
	CHECK(strstr(text, " summary\n") == NULL);
	free(text);
	agent_done(ag);
	free(ag);
}

/* A record written by the plugin with items that fell back: the agent
 * loads it (no re-plan) and must count the pod degraded, in the metric and
 * in the status. */
TEST(agent_degraded_record_counts_degraded)
{
	struct agent *ag = calloc(1, sizeof(*ag));
	struct attach_state *s = calloc(1, sizeof(*s));
	char dir[] = "/tmp/aqm-state-XXXXXX", cmd[128];
	static const char cid[] = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00";
	struct plan_caps caps = {0};
	struct error err = {0};
	struct agent_pod *p;
	cJSON *st = NULL, *pods, *pod;
	char *text;

	if (!ag || !s) {
		free(ag);
		free(s);
		return;
	}
	CHECK(mkdtemp(dir) != NULL);
	agent_init(ag);
	str_copy(ag->state_dir, sizeof(ag->state_dir), dir);
	str_copy(s->container_id, sizeof(s->container_id), cid);
	str_copy(s->ifname, sizeof(s->ifname), "eth0");
	str_copy(s->netns, sizeof(s->netns), "/var/run/netns/aqm-none");
	str_copy(s->pod_namespace, sizeof(s->pod_namespace), "ml");
	str_copy(s->pod_name, sizeof(s->pod_name), "infer-0");
	str_copy(s->pod_uid, sizeof(s->pod_uid), "uid-1");
	s->workload.class = CLASS_INFERENCE;
	str_copy(s->ifs.pod_ifname, sizeof(s->ifs.pod_ifname), "eth0");
	str_copy(s->ifs.host_ifname, sizeof(s->ifs.host_ifname), "veth1234");
	{
		const struct profile *prof = profile_resolve(&ag->cfg.profiles, &s->workload, NULL, 0);

		CHECK(prof != NULL);
		if (prof)
			str_copy(s->profile, sizeof(s->profile), prof->name);
		CHECK_INT(plan_pod(&s->workload, prof, &s->ifs, &caps, &s->plan), 0);
	}
	CHECK(s->plan.n >= 2);
	for (unsigned i = 0; i < s->plan.n; i++) {
		s->plan.items[i].status = ITEM_APPLIED;
		s->plan.items[i].chosen = 0;
	}
	s->plan.items[s->plan.n - 1].status = ITEM_SKIPPED;
	s->plan.items[s->plan.n - 1].chosen = -1;
	s->plan.items[s->plan.n - 1].err = EOPNOTSUPP;
	CHECK_INT(state_save(dir, s, &err), 0);

	CHECK_INT(agent_attach_load(ag, cid, "eth0", &err), 0);
	p = pod_cache_lookup(&ag->pods, "ml", "infer-0", NULL);
	CHECK(p != NULL);
	if (p)
		CHECK_STR(pod_status_name(p->status), "degraded");
	text = render(ag);
	CHECK_EXPO(text);
	CHECK_CONTAINS(text, "aiqos_pods_tuning{status=\"degraded\"} 1\n");
	CHECK_CONTAINS(text, "aiqos_pods_tuning{status=\"tuned\"} 0\n");
	free(text);
	st = agent_status_json(ag);
	pods = st ? cJSON_GetObjectItemCaseSensitive(st, "pods") : NULL;
	pod = pods ? cJSON_GetArrayItem(pods, 0) : NULL;
	CHECK(pod != NULL);
	if (pod)
		CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pod, "status")), "degraded");
	cJSON_Delete(st);

	/* all applied: tuned */
	s->plan.items[s->plan.n - 1].status = ITEM_APPLIED;
	s->plan.items[s->plan.n - 1].chosen = 0;
	s->plan.items[s->plan.n - 1].err = 0;
	CHECK_INT(state_save(dir, s, &err), 0);
	CHECK_INT(agent_attach_load(ag, cid, "eth0", &err), 0);
	p = pod_cache_lookup(&ag->pods, "ml", "infer-0", NULL);
	if (p)
		CHECK_STR(pod_status_name(p->status), "tuned");

	agent_done(ag);
	free(ag);
	attach_state_free(s);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0);
}

/* gate.redirecting as status shows it, from a real gate map. */
static int status_redirecting(struct agent *ag)
{
	cJSON *st = agent_status_json(ag), *g;
	int r = -1;

	g = st ? cJSON_GetObjectItemCaseSensitive(st, "uplink") : NULL;
	g = g ? cJSON_GetObjectItemCaseSensitive(g, "downlink") : NULL;
	g = g ? cJSON_GetObjectItemCaseSensitive(g, "gate") : NULL;
	g = g ? cJSON_GetObjectItemCaseSensitive(g, "redirecting") : NULL;
	if (cJSON_IsBool(g))
		r = cJSON_IsTrue(g);
	cJSON_Delete(st);
	return r;
}

/* L10: a gate whose map has threshold 0 (attached, not yet synced, or
 * configured off) sends every packet through the ifb: status says
 * redirecting; once synced and idle, not. */
TEST(status_gate_unsynced_is_redirecting)
{
	struct agent *ag = calloc(1, sizeof(*ag));
	struct bpf_gate cfg;
	struct error e = {0};
	bool changed = false;
	int fd = -1, prog = -1;

	if (!ag)
		return;
	agent_init(ag);
	if (bpf_gate_load(&fd, BPF_GATE_NAME, &prog, &e) < 0) {
		printf("  skipped: no BPF map here (%s)\n", e.msg);
		agent_done(ag);
		free(ag);
		return;
	}
	close(prog);
	ag->down_gate_map_fd = fd;
	ag->have_info = true;
	ag->info.down.planned = true;
	ag->info.down.rate_bps = 400000000;
	ag->info.down.shaped_bps = 392000000;
	ag->info.down.gate_bps = 196000000;
	CHECK_INT(status_redirecting(ag), 1); /* threshold 0: everything redirected */
	node_gate_config(&ag->info, &cfg);
	CHECK(cfg.threshold_bytes > 0);
	CHECK_INT(bpf_gate_sync(fd, &cfg, &changed, &e), 0);
	CHECK(changed);
	CHECK_INT(status_redirecting(ag), 0); /* synced, no window over it yet */
	agent_done(ag);                       /* closes the map */
	free(ag);
}
