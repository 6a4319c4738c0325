/* test_agent_metrics.c — the Prometheus writer (grouping, HELP/TYPE once,
 * escaping, number formats, invalid input dropped) checked by a small
 * exposition-format parser, listen-address parsing, and the HTTP endpoint on
 * an ephemeral loopback port: libcurl in a second thread while the test
 * drives the sd-event loop (/metrics, /healthz, /readyz, 404, 405, HEAD,
 * keep-alive, render on the loop thread). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <curl/curl.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>

#include "../../agent/metrics.h"
#include "t.h"

/* ---- an exposition format checker (text format 0.0.4) ---- */

#define CHK_FAMILIES 64

struct expo {
	unsigned n_fam;
	char fam[CHK_FAMILIES][96];
	char type[CHK_FAMILIES][16];
	bool help[CHK_FAMILIES], typed[CHK_FAMILIES], closed[CHK_FAMILIES];
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
	char name[96], label[96];
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
	        "x 1\n",                                      /* no TYPE */
	        "# TYPE x gauge\n# TYPE x gauge\nx 1\n",      /* TYPE twice */
	        "# TYPE x gauge\nx{a=\"b} 1\n",               /* unterminated */
	        "# TYPE x gauge\nx{a=\"\\t\"} 1\n",           /* bad escape */
	        "# TYPE x gauge\nx 0x10\n",                   /* hex */
	        "# TYPE x gauge\nx inf\n",                    /* not +Inf */
	        "# TYPE x gauge\n# TYPE y gauge\ny 1\nx 1\n", /* family split */
	        "# TYPE x gauge\nx 1",                        /* no final newline */
	        "# TYPE x gauge\nx{1a=\"b\"} 1\n",            /* label name */
	};
	struct expo x;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		if (expo_check(bad[i], &x) >= 0) {
			fprintf(stderr, "  accepted bad exposition %zu\n", i);
			t_failed_now = 1;
		}
	}
	CHECK_INT(expo_check("# HELP x h\\\\ \\n\n# TYPE x gauge\nx{a=\"\\\"\\\\\\n\",b=\"\"} -1.5e-07\nx NaN\n", &x),
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
