/* metrics.c — Prometheus text exposition (a writer that groups samples by
 * family and escapes labels) and the HTTP endpoint: libmicrohttpd in epoll
 * mode without threads, its epoll fd and timeout driven by sd-event sources,
 * so the render/health/ready callbacks run on the loop thread. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <sys/epoll.h>

#include "log.h"
#include "metrics/metrics.h"

/* ---- a growing string ---- */

struct buf {
	char *s;
	size_t len, cap;
	bool oom;
};

static void buf_add(struct buf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *t;

		while (cap < b->len + n + 1)
			cap *= 2;
		t = realloc(b->s, cap);
		if (!t) {
			b->oom = true;
			return;
		}
		b->s = t;
		b->cap = cap;
	}
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
}

static void buf_str(struct buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

/* ---- the writer ---- */

struct family {
	char *name;
	char *help;
	const char *type; /* static string */
	struct buf samples;
};

struct metrics_writer {
	struct family *f;
	unsigned n, cap;
	unsigned last; /* index of the family used last (fast path) */
	unsigned dropped;
	bool oom;
};

struct metrics_writer *metrics_writer_new(void)
{
	return calloc(1, sizeof(struct metrics_writer));
}

void metrics_writer_free(struct metrics_writer *w)
{
	if (!w)
		return;
	for (unsigned i = 0; i < w->n; i++) {
		free(w->f[i].name);
		free(w->f[i].help);
		free(w->f[i].samples.s);
	}
	free(w->f);
	free(w);
}

unsigned metrics_writer_dropped(const struct metrics_writer *w)
{
	return w ? w->dropped : 0;
}

static bool name_valid(const char *s, bool colon)
{
	if (!s || !*s)
		return false;
	for (const char *c = s; *c; c++) {
		bool alpha = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '_' || (colon && *c == ':');
		if (!alpha && !(c > s && *c >= '0' && *c <= '9'))
			return false;
	}
	return true;
}

static const char *type_canonical(const char *type)
{
	static const char *const types[] = {"counter", "gauge", "untyped", "summary", "histogram"};

	for (size_t i = 0; type && i < ARRAY_SIZE(types); i++)
		if (streq(type, types[i]))
			return types[i];
	return NULL;
}

/* The family for name, created on first use; NULL (sample dropped) when the
 * type differs from the first use, or on ENOMEM. */
static struct family *family_get(struct metrics_writer *w, const char *name, const char *help, const char *type)
{
	struct family *f = NULL;

	if (w->last < w->n && streq(w->f[w->last].name, name))
		f = &w->f[w->last];
	for (unsigned i = 0; !f && i < w->n; i++)
		if (streq(w->f[i].name, name)) {
			f = &w->f[i];
			w->last = i;
		}
	if (f)
		return f->type == type ? f : NULL; /* the first help text wins */
	if (w->n == w->cap) {
		unsigned cap = w->cap ? w->cap * 2 : 16;
		struct family *t = realloc(w->f, cap * sizeof(*t));
		if (!t) {
			w->oom = true;
			return NULL;
		}
		w->f = t;
		w->cap = cap;
	}
	f = &w->f[w->n];
	*f = (struct family){.name = strdup(name), .help = strdup(help ? help : ""), .type = type};
	if (!f->name || !f->help) {
		free(f->name);
		free(f->help);
		w->oom = true;
		return NULL;
	}
	w->last = w->n++;
	return f;
}

const char *metrics_format_value(double v, char *buf, size_t size)
{
	if (isnan(v))
		snprintf(buf, size, "NaN");
	else if (isinf(v))
		snprintf(buf, size, "%s", v > 0 ? "+Inf" : "-Inf");
	else if (v == floor(v) && fabs(v) < 9007199254740992.0) /* 2^53: exact integers */
		snprintf(buf, size, "%.0f", v);
	else
		for (int prec = 1; prec <= 17; prec++) {
			snprintf(buf, size, "%.*g", prec, v);
			if (strtod(buf, NULL) == v)
				break;
		}
	return buf;
}

/* Length of at most max bytes of s, cut back to a UTF-8 character boundary. */
static size_t utf8_cut(const char *s, size_t max)
{
	size_t n = strnlen(s, max + 1);

	if (n <= max)
		return n;
	n = max;
	while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	return n;
}

static void label_value_escape(struct buf *b, const char *v)
{
	size_t n = utf8_cut(v, METRICS_LABEL_VALUE_MAX);

	for (size_t i = 0; i < n; i++) {
		switch (v[i]) {
		case '\\':
			buf_str(b, "\\\\");
			break;
		case '"':
			buf_str(b, "\\\"");
			break;
		case '\n':
			buf_str(b, "\\n");
			break;
		default:
			buf_add(b, &v[i], 1);
		}
	}
}

/* Append one sample line: name[suffix]{labels[,extra_key="extra_val"]} value.
 * Returns false when the labels are invalid (nothing appended). */
static bool sample_append(struct buf *b, const char *name, const char *suffix, va_list labels, const char *extra_key,
                          const char *extra_val, double value)
{
	struct buf line = {0};
	va_list ap;
	char num[64];
	bool any = false, ok = true;

	buf_str(&line, name);
	buf_str(&line, suffix);
	va_copy(ap, labels);
	for (;;) {
		const char *k = va_arg(ap, const char *), *v;

		if (!k)
			break;
		v = va_arg(ap, const char *);
		if (!v || !name_valid(k, false) || (k[0] == '_' && k[1] == '_')) {
			ok = false;
			break;
		}
		buf_str(&line, any ? "," : "{");
		buf_str(&line, k);
		buf_str(&line, "=\"");
		label_value_escape(&line, v);
		buf_str(&line, "\"");
		any = true;
	}
	va_end(ap);
	if (ok && extra_key) {
		buf_str(&line, any ? "," : "{");
		buf_str(&line, extra_key);
		buf_str(&line, "=\"");
		label_value_escape(&line, extra_val);
		buf_str(&line, "\"");
		any = true;
	}
	if (any)
		buf_str(&line, "}");
	buf_str(&line, " ");
	buf_str(&line, metrics_format_value(value, num, sizeof(num)));
	buf_str(&line, "\n");
	if (ok && !line.oom)
		buf_add(b, line.s, line.len);
	else if (line.oom)
		b->oom = true;
	free(line.s);
	return ok;
}

static struct family *family_for(struct metrics_writer *w, const char *name, const char *help, const char *type)
{
	const char *t = type_canonical(type);
	struct family *f;

	if (!w)
		return NULL;
	if (!t || !name_valid(name, true)) {
		w->dropped++;
		return NULL;
	}
	f = family_get(w, name, help, t);
	if (!f)
		w->dropped++;
	return f;
}

static void sample(struct metrics_writer *w, struct family *f, const char *suffix, va_list labels,
                   const char *extra_key, const char *extra_val, double value)
{
	if (!sample_append(&f->samples, f->name, suffix, labels, extra_key, extra_val, value))
		w->dropped++;
	if (f->samples.oom)
		w->oom = true;
}

void metrics_write(struct metrics_writer *w, const char *name, const char *help, const char *type, double value, ...)
{
	struct family *f;
	va_list ap;

	if (type && (streq(type, "summary") || streq(type, "histogram"))) {
		if (w)
			w->dropped++; /* those have their own writers */
		return;
	}
	f = family_for(w, name, help, type);
	if (!f)
		return;
	va_start(ap, value);
	sample(w, f, "", ap, NULL, NULL, value);
	va_end(ap);
}

void metrics_write_summary(struct metrics_writer *w, const char *name, const char *help, double sum, uint64_t count,
                           ...)
{
	struct family *f = family_for(w, name, help, "summary");
	va_list ap;

	if (!f)
		return;
	va_start(ap, count);
	sample(w, f, "_sum", ap, NULL, NULL, sum);
	va_end(ap);
	va_start(ap, count);
	sample(w, f, "_count", ap, NULL, NULL, (double)count);
	va_end(ap);
}

static void histogram_v(struct metrics_writer *w, const char *name, const char *help, const double *le,
                        const uint64_t *counts, unsigned n, double sum, uint64_t count, va_list labels)
{
	struct family *f = family_for(w, name, help, "histogram");
	uint64_t cum = 0;
	char num[64];

	if (!f)
		return;
	for (unsigned i = 0; i < n; i++) {
		if (isnan(le[i]) || (i > 0 && !(le[i] > le[i - 1]))) {
			w->dropped++;
			return;
		}
	}
	for (unsigned i = 0; i < n; i++) {
		cum += counts[i];
		sample(w, f, "_bucket", labels, "le", metrics_format_value(le[i], num, sizeof(num)), (double)cum);
	}
	sample(w, f, "_bucket", labels, "le", "+Inf", (double)count);
	sample(w, f, "_sum", labels, NULL, NULL, sum);
	sample(w, f, "_count", labels, NULL, NULL, (double)count);
}

void metrics_write_histogram(struct metrics_writer *w, const char *name, const char *help, const double *le,
                             const uint64_t *counts, unsigned n, double sum, uint64_t count, ...)
{
	va_list ap;

	va_start(ap, count);
	histogram_v(w, name, help, le, counts, n, sum, count, ap);
	va_end(ap);
}

const struct metrics_buckets metrics_buckets_plugin = {
        .n = 14,
        .le = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1},
};
const struct metrics_buckets metrics_buckets_retune = {
        .n = 13,
        .le = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
};
const struct metrics_buckets metrics_buckets_api = {
        .n = 13,
        .le = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
};

void metrics_histogram_observe(struct metrics_histogram *h, const struct metrics_buckets *b, double v)
{
	unsigned i = 0;

	if (isnan(v))
		return;
	while (i < b->n && i < METRICS_BUCKETS_MAX && v > b->le[i])
		i++;
	h->counts[i]++;
	h->sum += v;
	h->count++;
}

void metrics_write_hist(struct metrics_writer *w, const char *name, const char *help, const struct metrics_buckets *b,
                        const struct metrics_histogram *h, ...)
{
	va_list ap;

	va_start(ap, h);
	histogram_v(w, name, help, b->le, h->counts, b->n < METRICS_BUCKETS_MAX ? b->n : METRICS_BUCKETS_MAX, h->sum,
	            h->count, ap);
	va_end(ap);
}

static void help_escape(struct buf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			buf_str(b, "\\\\");
		else if (*s == '\n')
			buf_str(b, "\\n");
		else
			buf_add(b, s, 1);
	}
}

char *metrics_writer_text(const struct metrics_writer *w, size_t *ret_len)
{
	struct buf b = {0};

	if (!w || w->oom)
		return NULL;
	buf_add(&b, "", 0);
	for (unsigned i = 0; i < w->n; i++) {
		const struct family *f = &w->f[i];

		if (f->help[0]) {
			buf_str(&b, "# HELP ");
			buf_str(&b, f->name);
			buf_str(&b, " ");
			help_escape(&b, f->help);
			buf_str(&b, "\n");
		}
		buf_str(&b, "# TYPE ");
		buf_str(&b, f->name);
		buf_str(&b, " ");
		buf_str(&b, f->type);
		buf_str(&b, "\n");
		if (f->samples.len)
			buf_add(&b, f->samples.s, f->samples.len);
	}
	if (b.oom) {
		free(b.s);
		return NULL;
	}
	if (ret_len)
		*ret_len = b.len;
	return b.s;
}

/* ---- listen address ---- */

static int parse_port(const char *s, const char *addr, uint16_t *ret, struct error *err)
{
	unsigned long v = 0;

	if (!*s)
		return error_set(err, EINVAL, "metrics address '%s': missing port", addr);
	for (const char *c = s; *c; c++) {
		if (*c < '0' || *c > '9' || v > 65535)
			return error_set(err, EINVAL, "metrics address '%s': port '%s' is not a number in 0..65535",
			                 addr, s);
		v = v * 10 + (unsigned long)(*c - '0');
	}
	if (v > 65535)
		return error_set(err, EINVAL, "metrics address '%s': port '%s' is not a number in 0..65535", addr, s);
	*ret = (uint16_t)v;
	return 0;
}

int metrics_addr_parse(const char *addr, struct sockaddr_storage *ret, socklen_t *ret_len, bool *ret_disabled,
                       struct error *err)
{
	char host[METRICS_ADDR_MAX];
	const char *port;
	uint16_t p = 0;
	int r;

	*ret_disabled = false;
	if (!addr || !*addr || streq(addr, "0")) {
		*ret_disabled = true;
		return 0;
	}
	if (strlen(addr) >= sizeof(host))
		return error_set(err, ENAMETOOLONG, "metrics address '%.64s...' is too long", addr);
	memset(ret, 0, sizeof(*ret));
	if (addr[0] == '[') {
		const char *end = strchr(addr, ']');
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ret;

		if (!end || end[1] != ':')
			return error_set(err, EINVAL, "metrics address '%s': expected [IPv6]:PORT", addr);
		memcpy(host, addr + 1, (size_t)(end - addr - 1));
		host[end - addr - 1] = '\0';
		r = parse_port(end + 2, addr, &p, err);
		if (r < 0)
			return r;
		if (inet_pton(AF_INET6, host, &a6->sin6_addr) != 1)
			return error_set(err, EINVAL, "metrics address '%s': '%s' is not an IPv6 address", addr, host);
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(p);
		*ret_len = sizeof(*a6);
		return 0;
	}
	port = strrchr(addr, ':');
	if (!port)
		return error_set(err, EINVAL,
		                 "metrics address '%s': expected HOST:PORT, :PORT or [IPv6]:PORT (e.g. ':%s')", addr,
		                 addr);
	r = parse_port(port + 1, addr, &p, err);
	if (r < 0)
		return r;
	memcpy(host, addr, (size_t)(port - addr));
	host[port - addr] = '\0';
	if (!host[0]) {
		/* every address: IPv6 any, dual-stack (IPv4 if the host has no IPv6) */
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ret;
		a6->sin6_family = AF_INET6;
		a6->sin6_addr = in6addr_any;
		a6->sin6_port = htons(p);
		*ret_len = sizeof(*a6);
		return 0;
	}
	if (strchr(host, ':'))
		return error_set(err, EINVAL,
		                 "metrics address '%s': write an IPv6 address in brackets, e.g. '[::1]:%u'", addr, p);
	{
		struct sockaddr_in *a4 = (struct sockaddr_in *)ret;
		if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
			return error_set(err, EINVAL,
			                 "metrics address '%s': '%s' is not an IP address (host names are not "
			                 "resolved)",
			                 addr, host);
		a4->sin_family = AF_INET;
		a4->sin_port = htons(p);
		*ret_len = sizeof(*a4);
	}
	return 0;
}

/* ---- the HTTP server ---- */

struct metrics_server {
	sd_event *loop;
	struct MHD_Daemon *d;
	sd_event_source *io, *timer;
	struct metrics_ops ops;
	void *ud;
	uint16_t port;
	char addr[METRICS_ADDR_MAX];
};

_printf_(2, 0) static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct metrics_server *m = cls;
	char msg[512];
	size_t n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		msg[--n] = '\0';
	log_msg(LOG_LVL_WARN, "metrics http server", "addr", m->addr, "error", msg, NULL);
}

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned status, const char *content_type, char *body,
                               size_t len)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result r;

	if (!resp) {
		free(body);
		return MHD_NO;
	}
	if (MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type) != MHD_YES ||
	    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store") != MHD_YES ||
	    (status == MHD_HTTP_METHOD_NOT_ALLOWED &&
	     MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD") != MHD_YES)) {
		MHD_destroy_response(resp);
		return MHD_NO;
	}
	r = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return r;
}

static enum MHD_Result respond_text(struct MHD_Connection *conn, unsigned status, const char *text)
{
	char *body = strdup(text);

	if (!body)
		return MHD_NO;
	return respond(conn, status, "text/plain; charset=utf-8", body, strlen(body));
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
	static int request_seen;
	struct metrics_server *m = cls;

	if (!streq(method, MHD_HTTP_METHOD_GET) && !streq(method, MHD_HTTP_METHOD_HEAD))
		/* answered before any body is read: MHD then closes the connection */
		return respond_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
	if (!*con_cls) {
		/* first call, headers only: answering now would make MHD close the
		 * connection (no keep-alive); wait for the end of the request */
		*con_cls = &request_seen;
		return MHD_YES;
	}
	if (*upload_data_size) {
		*upload_data_size = 0; /* a body on GET: ignored */
		return MHD_YES;
	}
	if (streq(url, "/metrics")) {
		struct metrics_writer *w = metrics_writer_new();
		char *text;
		size_t len = 0;

		if (!w)
			return MHD_NO;
		if (m->ops.render)
			m->ops.render(m->ud, w);
		text = metrics_writer_text(w, &len);
		metrics_writer_free(w);
		if (!text)
			return respond_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
		return respond(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", text, len);
	}
	if (streq(url, "/healthz")) {
		bool ok = !m->ops.healthy || m->ops.healthy(m->ud);
		return respond_text(conn, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, ok ? "ok\n" : "unhealthy\n");
	}
	if (streq(url, "/readyz")) {
		bool ok = !m->ops.ready || m->ops.ready(m->ud);
		return respond_text(conn, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, ok ? "ok\n" : "not ready\n");
	}
	return respond_text(conn, MHD_HTTP_NOT_FOUND, "not found\n");
}

/* Run MHD, then arm the timer for its next deadline (0 = more work now). */
static void metrics_run(struct metrics_server *m)
{
	MHD_UNSIGNED_LONG_LONG to = 0;

	(void)MHD_run(m->d);
	if (MHD_get_timeout(m->d, &to) == MHD_YES) {
		uint64_t usec = to > UINT64_MAX / 1000 ? UINT64_MAX : (uint64_t)to * 1000;
		(void)sd_event_source_set_time_relative(m->timer, usec);
		(void)sd_event_source_set_enabled(m->timer, SD_EVENT_ONESHOT);
	} else {
		(void)sd_event_source_set_enabled(m->timer, SD_EVENT_OFF);
	}
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *ud)
{
	metrics_run(ud);
	return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *ud)
{
	metrics_run(ud);
	return 0;
}

static int listen_socket(const struct sockaddr_storage *sa, socklen_t salen, const char *addr, struct error *err)
{
	_cleanup_close_ int fd = -1;
	int one = 1, zero = 0;

	fd = socket(sa->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return error_set(err, errno, "metrics address '%s': socket: %s", addr, strerror(errno));
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		return error_set(err, errno, "metrics address '%s': SO_REUSEADDR: %s", addr, strerror(errno));
	if (sa->ss_family == AF_INET6 && IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)sa)->sin6_addr) &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) < 0)
		return error_set(err, errno, "metrics address '%s': IPV6_V6ONLY: %s", addr, strerror(errno));
	if (bind(fd, (const struct sockaddr *)sa, salen) < 0)
		return error_set(err, errno, "metrics address '%s': bind: %s", addr, strerror(errno));
	if (listen(fd, 64) < 0)
		return error_set(err, errno, "metrics address '%s': listen: %s", addr, strerror(errno));
	return TAKE_FD(fd);
}

int metrics_server_new(sd_event *loop, const char *addr, const struct metrics_ops *ops, void *ud,
                       struct metrics_server **ret, struct error *err)
{
	struct sockaddr_storage sa = {0}, bound = {0};
	socklen_t salen = 0, blen = sizeof(bound);
	struct metrics_server *m;
	const union MHD_DaemonInfo *info;
	bool disabled;
	int fd, r;

	*ret = NULL;
	r = metrics_addr_parse(addr, &sa, &salen, &disabled, err);
	if (r < 0)
		return r;
	if (disabled)
		return 0;
	fd = listen_socket(&sa, salen, addr, err);
	if (fd == -EAFNOSUPPORT && sa.ss_family == AF_INET6 && addr[0] == ':') {
		/* ":PORT" on a host without IPv6: every IPv4 address */
		struct sockaddr_in *a4 = (struct sockaddr_in *)&sa;
		uint16_t port = ((struct sockaddr_in6 *)&sa)->sin6_port;

		memset(&sa, 0, sizeof(sa));
		a4->sin_family = AF_INET;
		a4->sin_addr.s_addr = htonl(INADDR_ANY);
		a4->sin_port = port;
		salen = sizeof(*a4);
		error_clear(err);
		fd = listen_socket(&sa, salen, addr, err);
	}
	if (fd < 0)
		return fd;
	if (getsockname(fd, (struct sockaddr *)&bound, &blen) < 0) {
		r = -errno;
		close(fd);
		return error_set(err, -r, "metrics address '%s': getsockname: %s", addr, strerror(-r));
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		close(fd);
		return error_set(err, ENOMEM, "metrics server: out of memory");
	}
	m->loop = sd_event_ref(loop);
	if (ops)
		m->ops = *ops;
	m->ud = ud;
	// NOLINTNEXTLINE(clang-analyzer-core.CallAndMessage): getsockname filled bound (lost through the cast)
	m->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
	                                            : ((struct sockaddr_in *)&bound)->sin_port);
	str_copy(m->addr, sizeof(m->addr), addr);
	/* MHD owns fd from here (it closes it in MHD_stop_daemon) */
	m->d = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request, m,
	                        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, m, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
	                        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)METRICS_CONN_MAX,
	                        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)METRICS_CONN_TIMEOUT_S,
	                        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(32 * 1024), MHD_OPTION_END);
	if (!m->d) {
		close(fd);
		metrics_server_free(m);
		return error_set(err, EIO, "metrics address '%s': cannot start the HTTP server", addr);
	}
	info = MHD_get_daemon_info(m->d, MHD_DAEMON_INFO_EPOLL_FD);
	if (!info || info->epoll_fd < 0) {
		metrics_server_free(m);
		return error_set(err, EIO, "metrics address '%s': HTTP server has no epoll fd", addr);
	}
	r = sd_event_add_io(loop, &m->io, info->epoll_fd, EPOLLIN, on_io, m);
	if (r >= 0)
		r = sd_event_add_time_relative(loop, &m->timer, CLOCK_MONOTONIC, 0, 1000, on_timer, m);
	if (r < 0) {
		metrics_server_free(m);
		return error_set(err, -r, "metrics address '%s': event sources: %s", addr, strerror(-r));
	}
	(void)sd_event_source_set_description(m->io, "metrics-http");
	(void)sd_event_source_set_description(m->timer, "metrics-http-timer");
	metrics_run(m);
	*ret = m;
	return 0;
}

void metrics_server_free(struct metrics_server *m)
{
	if (!m)
		return;
	/* sd-event drops its watch on the epoll fd before MHD closes it */
	m->io = sd_event_source_disable_unref(m->io);
	m->timer = sd_event_source_disable_unref(m->timer);
	if (m->d)
		MHD_stop_daemon(m->d);
	sd_event_unref(m->loop);
	free(m);
}

uint16_t metrics_server_port(const struct metrics_server *m)
{
	return m ? m->port : 0;
}
