/* watch.c — newline framing of a watch stream with a bounded buffer (see
 * watch.h). Complete lines inside a chunk are parsed in place; only a partial
 * line is copied, and never more than the cap: past it the framer switches to
 * skipping until the event's newline. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdarg.h>

#include "kube/decode.h"
#include "json.h"
#include "kube/watch.h"

#define WATCH_BUF_INITIAL (16 * 1024)
/* After a big event, give the memory back instead of keeping the high-water mark. */
#define WATCH_BUF_KEEP (64 * 1024)

struct watch_framer {
	size_t max; /* cap per event, bytes without "\n" (a trailing "\r" may add one) */
	watch_event_fn on_event;
	watch_error_fn on_error;
	void *userdata;
	char *buf; /* partial event */
	size_t len, alloc;
	bool skipping;     /* inside an oversized event: drop bytes until '\n' */
	uint64_t skip_len; /* bytes of that event so far */
	bool skip_nomem;   /* skipping because the buffer could not grow */
	bool skip_cr;      /* the last byte skipped was '\r' (not counted, as in emit()) */
	uint64_t line_no;  /* lines completed in this stream */
	struct watch_stats stats;
};

int watch_framer_new(size_t max_event_bytes, watch_event_fn on_event, watch_error_fn on_error, void *userdata,
                     struct watch_framer **ret, struct error *err)
{
	struct watch_framer *f;

	if (max_event_bytes == 0)
		max_event_bytes = WATCH_EVENT_MAX_DEFAULT;
	if (max_event_bytes < WATCH_EVENT_MIN_LIMIT || max_event_bytes > WATCH_EVENT_MAX_LIMIT)
		return error_set(err, EINVAL, "watch event size limit %zu is out of range [%d, %d]", max_event_bytes,
		                 WATCH_EVENT_MIN_LIMIT, WATCH_EVENT_MAX_LIMIT);
	if (!on_event)
		return error_set(err, EINVAL, "watch framer needs an event callback");
	f = calloc(1, sizeof(*f));
	if (!f)
		return error_set(err, ENOMEM, "watch framer: out of memory");
	f->max = max_event_bytes;
	f->on_event = on_event;
	f->on_error = on_error;
	f->userdata = userdata;
	*ret = f;
	return 0;
}

void watch_framer_free(struct watch_framer *f)
{
	if (!f)
		return;
	free(f->buf);
	free(f);
}

static void buf_release_if_big(struct watch_framer *f)
{
	if (f->alloc > WATCH_BUF_KEEP) {
		free(f->buf);
		f->buf = NULL;
		f->alloc = 0;
	}
}

void watch_framer_reset(struct watch_framer *f)
{
	f->len = 0;
	f->skipping = false;
	f->skip_nomem = false;
	f->skip_cr = false;
	f->skip_len = 0;
	f->line_no = 0;
	buf_release_if_big(f);
}

size_t watch_framer_buffered(const struct watch_framer *f)
{
	return f->len;
}

const struct watch_stats *watch_framer_stats(const struct watch_framer *f)
{
	return &f->stats;
}

static int buf_reserve(struct watch_framer *f, size_t need)
{
	size_t n;
	char *p;

	if (need <= f->alloc)
		return 0;
	n = f->alloc ? f->alloc : WATCH_BUF_INITIAL;
	while (n < need)
		n *= 2;
	if (n > f->max + 1)
		n = f->max + 1;
	p = realloc(f->buf, n);
	if (!p)
		return -ENOMEM;
	f->buf = p;
	f->alloc = n;
	return 0;
}

static void report(struct watch_framer *f, int errnum, const char *fmt, ...) _printf_(3, 4);
static void report(struct watch_framer *f, int errnum, const char *fmt, ...)
{
	struct error e = {.errnum = errnum};
	int n;
	va_list ap;

	if (errnum == EMSGSIZE || errnum == ENOMEM)
		f->stats.oversized++;
	else
		f->stats.malformed++;
	if (!f->on_error)
		return;
	n = snprintf(e.msg, sizeof(e.msg), "watch event %" PRIu64 ": ", f->line_no);
	if (n < 0 || (size_t)n >= sizeof(e.msg))
		n = 0;
	va_start(ap, fmt);
	vsnprintf(e.msg + n, sizeof(e.msg) - (size_t)n, fmt, ap);
	va_end(ap);
	f->on_error(&e, f->userdata);
}

/* One complete line (without '\n'). at_eof: it had no newline. */
static int emit(struct watch_framer *f, const char *line, size_t len, bool at_eof)
{
	const char *end = NULL, *eof_note = at_eof ? " (at end of stream, no newline)" : "";
	char q[128];
	cJSON *obj;
	size_t i;
	int r;

	f->line_no++;
	if (len > 0 && line[len - 1] == '\r')
		len--;
	/* the size first, as for a line that arrives in pieces (skipped
	 * unread): the same stream gives the same reports however it is cut */
	if (len > f->max) {
		report(f, EMSGSIZE, "%zu bytes exceed the limit of %zu bytes; skipped", len, f->max);
		return 0;
	}
	for (i = 0; i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'); i++)
		;
	if (i == len) {
		f->stats.blank++;
		return 0;
	}
	if (memchr(line, '\0', len)) {
		size_t at = (size_t)((const char *)memchr(line, '\0', len) - line);
		report(f, EBADMSG, "NUL byte at byte %zu of %zu%s; skipped", at, len, eof_note);
		return 0;
	}
	obj = cJSON_ParseWithLengthOpts(line, len, &end, false);
	if (!obj) {
		size_t at = end && end >= line && end <= line + len ? (size_t)(end - line) : 0;
		report(f, EBADMSG, "invalid JSON at byte %zu of %zu near %s%s; skipped", at, len,
		       kube_quote(q, sizeof(q), line + at, len - at, 24), eof_note);
		return 0;
	}
	for (i = (size_t)(end - line); i < len; i++) {
		if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r') {
			report(f, EBADMSG, "trailing data at byte %zu of %zu: %s%s; skipped", i, len,
			       kube_quote(q, sizeof(q), line + i, len - i, 24), eof_note);
			cJSON_Delete(obj);
			return 0;
		}
	}
	if (!cJSON_IsObject(obj)) {
		report(f, EBADMSG, "expected a JSON object, got %s%s; skipped", json_type_name(obj), eof_note);
		cJSON_Delete(obj);
		return 0;
	}
	f->stats.events++;
	if (len > f->stats.max_event)
		f->stats.max_event = len;
	r = f->on_event(obj, line, len, f->userdata);
	cJSON_Delete(obj);
	return r < 0 ? r : 0;
}

static void end_skip(struct watch_framer *f, bool at_eof)
{
	f->line_no++;
	if (f->skip_cr && !at_eof)
		f->skip_len--;
	if (f->skip_nomem)
		report(f, ENOMEM, "out of memory buffering an event of %" PRIu64 "+ bytes; skipped", f->skip_len);
	else if (at_eof)
		report(f, EMSGSIZE,
		       "stream ended inside an event of %" PRIu64 "+ bytes, over the limit of %zu bytes; skipped",
		       f->skip_len, f->max);
	else
		report(f, EMSGSIZE, "%" PRIu64 " bytes exceed the limit of %zu bytes; skipped", f->skip_len, f->max);
	f->skipping = false;
	f->skip_nomem = false;
	f->skip_cr = false;
	f->skip_len = 0;
}

int watch_framer_feed(struct watch_framer *f, const void *data, size_t len)
{
	const char *p = data, *end = p + len;
	int r;

	f->stats.bytes += len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t seg = (size_t)((nl ? nl : end) - p);

		if (f->skipping) {
			f->skip_len += seg;
			if (seg > 0)
				f->skip_cr = p[seg - 1] == '\r';
			if (!nl)
				return 0;
			end_skip(f, false);
			p = nl + 1;
			continue;
		}
		if (f->len == 0 && nl) {
			/* a whole line inside this chunk: no copy */
			r = emit(f, p, seg, false);
			p = nl + 1;
			if (r < 0)
				return r;
			continue;
		}
		if (f->len + seg > f->max + 1 || buf_reserve(f, f->len + seg) < 0) {
			/* over the cap (or no memory for it): drop what we have and
			 * skip to the newline; end_skip() reports it */
			f->skip_nomem = f->len + seg <= f->max + 1;
			// NOLINTNEXTLINE(clang-analyzer-core.NullDereference): f->len > 0 only with f->buf allocated
			f->skip_cr = seg > 0 ? p[seg - 1] == '\r' : (f->len > 0 && f->buf[f->len - 1] == '\r');
			f->skipping = true;
			f->skip_len = f->len + seg;
			f->len = 0;
			buf_release_if_big(f);
			p += seg;
			continue;
		}
		memcpy(f->buf + f->len, p, seg);
		f->len += seg;
		p += seg;
		if (nl) {
			size_t n = f->len;
			f->len = 0;
			r = emit(f, f->buf, n, false);
			buf_release_if_big(f);
			p = nl + 1;
			if (r < 0)
				return r;
		}
	}
	return 0;
}

int watch_framer_finish(struct watch_framer *f)
{
	int r = 0;

	if (f->skipping) {
		end_skip(f, true);
	} else if (f->len > 0) {
		size_t n = f->len;
		f->len = 0;
		r = emit(f, f->buf, n, true);
	}
	watch_framer_reset(f);
	return r;
}
