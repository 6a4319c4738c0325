/* test_log.c — the programs' logfmt logger: line shape, quoting and escaping
 * of hostile values, NULL safety, level filtering and bounded lines. */
#define _GNU_SOURCE
#include <stdlib.h>

#include "log.h"
#include "t.h"

/* Log into a temp file; capture_end returns the text (malloc'd) and puts
 * the logger back to its defaults. */
static void capture_begin(FILE **f)
{
	*f = tmpfile();
	if (!*f)
		abort();
}

static char *capture_end(FILE *f)
{
	long n;
	char *buf;

	fflush(f);
	n = ftell(f);
	buf = calloc(1, (size_t)n + 1);
	rewind(f);
	if (fread(buf, 1, (size_t)n, f) != (size_t)n)
		buf[0] = '\0';
	fclose(f);
	log_setup("aiqos", LOG_LVL_INFO, NULL);
	return buf;
}

TEST(level_names)
{
	CHECK_INT(log_level_from_name("error"), LOG_LVL_ERROR);
	CHECK_INT(log_level_from_name("WARN"), LOG_LVL_WARN);
	CHECK_INT(log_level_from_name("warning"), LOG_LVL_WARN);
	CHECK_INT(log_level_from_name("info"), LOG_LVL_INFO);
	CHECK_INT(log_level_from_name("debug"), LOG_LVL_DEBUG);
	CHECK_INT(log_level_from_name("trace"), _LOG_LVL_INVALID);
	CHECK_INT(log_level_from_name(""), _LOG_LVL_INVALID);
	CHECK_INT(log_level_from_name(NULL), _LOG_LVL_INVALID);
}

TEST(line_shape)
{
	FILE *f;
	char *out;

	capture_begin(&f);
	log_setup("aiqos-agent", LOG_LVL_INFO, f);
	log_msg(LOG_LVL_INFO, "tuned", "pod", "ns/name", "class", "inference", NULL);
	out = capture_end(f);
	/* ts=2026-11-29T18:00:00.123Z */
	CHECK(strncmp(out, "ts=", 3) == 0);
	CHECK(strlen(out) > 27 && out[7] == '-' && out[10] == '-' && out[13] == 'T' && out[16] == ':' &&
	      out[22] == '.' && out[26] == 'Z');
	CHECK_CONTAINS(out, "Z level=info program=aiqos-agent msg=\"tuned\" pod=ns/name class=inference\n");
	CHECK(strchr(out, '\n') == out + strlen(out) - 1); /* exactly one line */
	free(out);
}

TEST(quoting)
{
	static const struct {
		const char *value;
		const char *want;
	} cases[] = {
	        {"plain", " k=plain"},
	        {"two words", " k=\"two words\""},
	        {"a=b", " k=\"a=b\""},
	        {"say \"hi\"", " k=\"say \\\"hi\\\"\""},
	        {"line1\nline2", " k=\"line1\\nline2\""},
	        {"back\\slash", " k=\"back\\\\slash\""},
	        {"tab\there", " k=\"tab\\there\""},
	        {"bell\a", " k=\"bell\\u0007\""},
	        {"", " k=\"\""},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		FILE *f;
		char *out;
		capture_begin(&f);
		log_setup(NULL, LOG_LVL_DEBUG, f);
		log_msg(LOG_LVL_WARN, "m", "k", cases[i].value, NULL);
		out = capture_end(f);
		CHECK_CONTAINS(out, cases[i].want);
		CHECK_INT(strchr(out, '\n') - out, (long)strlen(out) - 1);
		free(out);
	}
}

TEST(hostile_keys_and_nulls)
{
	FILE *f;
	char *out;

	capture_begin(&f);
	log_setup(NULL, LOG_LVL_INFO, f);
	log_msg(LOG_LVL_ERROR, NULL, "bad key=\"x\n", "v", "", "w", "after-null", NULL, "never", "read", NULL);
	out = capture_end(f);
	CHECK_CONTAINS(out, "level=error");
	CHECK_CONTAINS(out, "msg=\"\"");
	CHECK_CONTAINS(out, " bad_key__x_=v");
	CHECK_CONTAINS(out, " _=w");
	CHECK_CONTAINS(out, " after-null=\"\"\n"); /* a NULL value ends the list */
	CHECK(strstr(out, "never") == NULL);
	free(out);
}

TEST(levels_filter)
{
	FILE *f;
	char *out;

	capture_begin(&f);
	log_setup(NULL, LOG_LVL_WARN, f);
	CHECK(log_enabled(LOG_LVL_ERROR));
	CHECK(log_enabled(LOG_LVL_WARN));
	CHECK(!log_enabled(LOG_LVL_INFO));
	CHECK(!log_enabled(_LOG_LVL_INVALID));
	log_msg(LOG_LVL_INFO, "hidden", NULL);
	log_msg(LOG_LVL_DEBUG, "hidden", NULL);
	log_msg(LOG_LVL_WARN, "shown", NULL);
	out = capture_end(f);
	CHECK(strstr(out, "hidden") == NULL);
	CHECK_CONTAINS(out, "msg=\"shown\"");
	free(out);
}

TEST(long_line_is_bounded)
{
	FILE *f;
	char *out, *big = malloc(20000);
	size_t quotes = 0;

	memset(big, 'x', 19999);
	big[19999] = '\0';
	big[100] = ' '; /* forces quoting */
	capture_begin(&f);
	log_setup(NULL, LOG_LVL_INFO, f);
	log_msg(LOG_LVL_INFO, "big", "a", big, "b", "lost", NULL);
	out = capture_end(f);
	CHECK(strlen(out) <= 4096);
	CHECK_CONTAINS(out, " truncated=1\n");
	CHECK(strstr(out, "lost") == NULL);
	for (const char *p = out; *p; p++)
		quotes += *p == '"';
	CHECK_INT(quotes % 2, 0); /* quoting stays balanced */
	free(out);
	free(big);
}

/* LOG_FMT: numbers logged as numbers, each value its own buffer (several in
 * one call), quoted like any value, cut at LOG_VALUE_MAX. */
TEST(formatted_values)
{
	FILE *f;
	char *out, big[LOG_VALUE_MAX * 2];

	capture_begin(&f);
	log_setup("aiqos-agent", LOG_LVL_INFO, f);
	log_msg(LOG_LVL_INFO, "ready", "pods", LOG_FMT("%u", 3u), "speed_bps", LOG_FMT("%llu", 10000000000ULL), "ratio",
	        LOG_FMT("%.2f", 0.5), "pod", LOG_FMT("%s/%s", "default", "web 1"), NULL);
	out = capture_end(f);
	CHECK_CONTAINS(out, "msg=\"ready\" pods=3 speed_bps=10000000000 ratio=0.50 pod=\"default/web 1\"\n");
	free(out);

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	capture_begin(&f);
	log_setup("aiqos-agent", LOG_LVL_INFO, f);
	log_msg(LOG_LVL_INFO, "long", "v", LOG_FMT("%s", big), NULL);
	out = capture_end(f);
	CHECK(strstr(out, "v=") && strlen(strstr(out, "v=")) == 2 + (LOG_VALUE_MAX - 1) + 1);
	free(out);
}
