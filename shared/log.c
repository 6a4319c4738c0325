/* log.c — logfmt lines for the programs (cni/, agent/); the library never
 * logs. One line per call, written with a single fwrite+fflush so that
 * concurrent plugin processes appending to one log file do not interleave:
 * ts=2026-11-29T18:00:00.123Z level=info program=aiqos msg="..." key=value */
#include <stdarg.h>
#include <strings.h>
#include <time.h>

#include "failpoint.h"
#include "log.h"

#define LOG_LINE_MAX 4096

static struct {
	char program[32];
	enum log_level level;
	FILE *out; /* NULL = stderr */
} log_cfg = {.program = "aiqos", .level = LOG_LVL_INFO, .out = NULL};

static const char *const level_names[_LOG_LVL_MAX] = {
        [LOG_LVL_ERROR] = "error",
        [LOG_LVL_WARN] = "warn",
        [LOG_LVL_INFO] = "info",
        [LOG_LVL_DEBUG] = "debug",
};

enum log_level log_level_from_name(const char *s)
{
	if (!s)
		return _LOG_LVL_INVALID;
	for (int i = 0; i < _LOG_LVL_MAX; i++)
		if (strcasecmp(s, level_names[i]) == 0)
			return (enum log_level)i;
	if (strcasecmp(s, "warning") == 0)
		return LOG_LVL_WARN;
	return _LOG_LVL_INVALID;
}

void log_setup(const char *program, enum log_level level, FILE *out)
{
	if (program && *program)
		str_copy(log_cfg.program, sizeof(log_cfg.program), program);
	if (level >= 0 && level < _LOG_LVL_MAX)
		log_cfg.level = level;
	log_cfg.out = out;
}

bool log_enabled(enum log_level level)
{
	return level >= 0 && level < _LOG_LVL_MAX && level <= log_cfg.level;
}

/* A bounded line buffer; once full, further appends are dropped and the
 * line is marked truncated. */
struct line {
	char buf[LOG_LINE_MAX];
	size_t len;
	bool truncated;
};

static void put_char(struct line *l, char c)
{
	/* keep room for a closing quote, the truncation mark and the newline */
	if (l->truncated || l->len + 16 >= sizeof(l->buf)) {
		l->truncated = true;
		return;
	}
	l->buf[l->len++] = c;
}

static void put_str(struct line *l, const char *s)
{
	while (*s)
		put_char(l, *s++);
}

static bool needs_quotes(const char *v)
{
	if (!*v)
		return true;
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		if (*p <= ' ' || *p == '"' || *p == '=' || *p == '\\' || *p == 0x7f)
			return true;
	return false;
}

static void put_quoted(struct line *l, const char *v)
{
	static const char hex[] = "0123456789abcdef";
	size_t start = l->len;
	bool opened;

	put_char(l, '"');
	opened = l->len > start;
	for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
		switch (*p) {
		case '"':
			put_str(l, "\\\"");
			break;
		case '\\':
			put_str(l, "\\\\");
			break;
		case '\n':
			put_str(l, "\\n");
			break;
		case '\r':
			put_str(l, "\\r");
			break;
		case '\t':
			put_str(l, "\\t");
			break;
		default:
			if (*p < ' ' || *p == 0x7f) {
				put_str(l, "\\u00");
				put_char(l, hex[*p >> 4]);
				put_char(l, hex[*p & 0xf]);
			} else {
				put_char(l, (char)*p);
			}
		}
	}
	if (opened && l->truncated)
		l->buf[l->len++] = '"'; /* in the reserved room: keep the quoting balanced */
	else
		put_char(l, '"');
}

static void put_value(struct line *l, const char *v)
{
	if (needs_quotes(v))
		put_quoted(l, v);
	else
		put_str(l, v);
}

/* Keys are identifiers: anything that would break the format becomes '_'. */
static void put_key(struct line *l, const char *k)
{
	if (!*k) {
		put_char(l, '_');
		return;
	}
	for (const unsigned char *p = (const unsigned char *)k; *p; p++)
		put_char(l, (*p <= ' ' || *p == '"' || *p == '=' || *p == '\\' || *p >= 0x7f) ? '_' : (char)*p);
}

static void put_timestamp(struct line *l)
{
	struct timespec ts;
	struct tm tm;
	char buf[96];

	clock_gettime(CLOCK_REALTIME, &ts);
	if (!gmtime_r(&ts.tv_sec, &tm)) {
		put_str(l, "ts=?");
		return;
	}
	snprintf(buf, sizeof(buf), "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
	         tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)((unsigned long)ts.tv_nsec / 1000000 % 1000));
	put_str(l, buf);
}

const char *log_fmt(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;

	if (!buf || size == 0)
		return "";
	va_start(ap, fmt);
	if (vsnprintf(buf, size, fmt, ap) < 0)
		buf[0] = '\0';
	va_end(ap);
	return buf;
}

void log_msg(enum log_level level, const char *msg, ...)
{
	struct line l = {.len = 0, .truncated = false};
	FILE *out = log_cfg.out ? log_cfg.out : stderr;
	va_list ap;

	if (!log_enabled(level))
		return;
	put_timestamp(&l);
	put_str(&l, " level=");
	put_str(&l, level_names[level]);
	put_str(&l, " program=");
	put_value(&l, log_cfg.program);
	put_str(&l, " msg=");
	put_quoted(&l, msg ? msg : ""); /* always quoted, so lines look alike */
	va_start(ap, msg);
	for (;;) {
		const char *k = va_arg(ap, const char *);
		const char *v;
		if (!k || l.truncated)
			break;
		v = va_arg(ap, const char *);
		put_char(&l, ' ');
		put_key(&l, k);
		put_char(&l, '=');
		/* a NULL value ends the list: we cannot tell it from the sentinel */
		if (!v) {
			put_str(&l, "\"\"");
			break;
		}
		put_value(&l, v);
	}
	va_end(ap);
	if (l.truncated) {
		memcpy(l.buf + l.len, " truncated=1", 12);
		l.len += 12;
	}
	l.buf[l.len++] = '\n';
	fwrite(l.buf, 1, l.len, out);
	fflush(out);
}

void failpoint(const char *name)
{
	char action[32];

	if (!failpoint_armed(name, action, sizeof(action)))
		return;
	log_msg(LOG_LVL_WARN, "test failpoint reached", "failpoint", name, "action", action, (char *)NULL);
	failpoint_act(action);
}

void log_failpoints_armed(void)
{
	const char *spec = getenv(FAILPOINT_ENV);

	if (spec && *spec)
		log_msg(LOG_LVL_WARN, "test failpoints armed", "failpoints", spec, (char *)NULL);
}
