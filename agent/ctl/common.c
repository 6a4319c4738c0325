/* common.c — what the commands of aiqosctl share (ctl.h): errors and usage,
 * the call to the agent, the lenient readers and printers of its JSON. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <time.h>

#include "ctl/ctl.h"
#include "proto.h"
#include "tc/tc.h"

/* "aiqosctl: <message>" on stderr, without the newline */
_printf_(1, 0) static void say(const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", PROG);
	vfprintf(stderr, fmt, ap);
}

_printf_(1, 2) int fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say(fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return EXIT_ERR;
}

int usage_error(const char *usage, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say(fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n\n%s", usage);
	return EXIT_USAGE;
}

/* ---- the command line ---- */

const struct option ctl_common_options[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {0},
};

int ctl_getopt(struct ctl_cmd *cmd, int argc, char **argv)
{
	const char *pre = cmd->name ? cmd->name : "", *sep = cmd->name ? ": " : "";
	int c;

	if (!cmd->started) {
		optind = 0; /* glibc: re-initialise (the top level parsed with "+") */
		opterr = 0; /* the messages are ours */
		cmd->started = true;
	}
	c = getopt_long(argc, argv, cmd->name ? ":h" : "+:h", cmd->opts ? cmd->opts : ctl_common_options, NULL);
	switch (c) {
	case 'h':
		fputs(cmd->usage, stdout);
		cmd->exit = EXIT_OK;
		return CTL_OPT_EXIT;
	case 'j':
		cmd->json = true;
		return ctl_getopt(cmd, argc, argv);
	case ':':
		cmd->exit = usage_error(cmd->usage, "%s%soption '%s' needs a value", pre, sep, argv[optind - 1]);
		return CTL_OPT_EXIT;
	case '?':
		cmd->exit = usage_error(cmd->usage, "%s%sunknown option '%s'", pre, sep, argv[optind - 1]);
		return CTL_OPT_EXIT;
	default:
		return c;
	}
}

int ctl_parse_common(struct ctl_cmd *cmd, int argc, char **argv)
{
	int c = ctl_getopt(cmd, argc, argv); /* takes every --json itself: anything else ends the parse */

	if (c == -1)
		return -1;
	if (c != CTL_OPT_EXIT) /* an option of cmd->opts nobody handles */
		cmd->exit = usage_error(cmd->usage, "%s: unknown option '%s'", cmd->name, argv[optind - 1]);
	return cmd->exit;
}

int ctl_args_max(const struct ctl_cmd *cmd, int argc, char **argv, int max)
{
	if (argc - optind <= max)
		return EXIT_OK;
	return usage_error(cmd->usage, "%s: unexpected argument '%s'", cmd->name, argv[optind + max]);
}

int ctl_choice(struct ctl_cmd *cmd, const char *opt, const char *value, const char *const *names)
{
	char expected[128] = "";
	int n = 0;

	for (; names[n]; n++)
		if (streq(value, names[n]))
			return n;
	for (int i = 0; i < n; i++) {
		size_t len = strlen(expected);

		snprintf(expected + len, sizeof(expected) - len, "%s%s",
		         i == 0      ? ""
		         : i + 1 < n ? ", "
		                     : " or ",
		         names[i]);
	}
	cmd->exit = usage_error(cmd->usage, "%s: %s '%s': expected %s", cmd->name, opt, value, expected);
	return -1;
}

int ctl_output(const struct ctl_cmd *cmd, cJSON *resp, int (*print)(const cJSON *resp))
{
	return cmd->json ? print_json(resp) : print(resp);
}

/* ---- talking to the agent ---- */

int agent_call(const char *sock, const struct proto_request *r, cJSON **ret)
{
	struct error err = {0};
	int q = proto_call_max(sock, r, CALL_TIMEOUT_MS, PROTO_LARGE_MSG_MAX, ret, &err);

	if (q >= 0)
		return EXIT_OK;
	switch (-q) {
	case ENOENT:
	case ECONNREFUSED:
	case ENOTSOCK:
		return fail("cannot reach the agent at %s: %s (is aiqos-agent running?)", sock, strerror(-q));
	case EACCES:
	case EPERM:
		return fail("cannot reach the agent at %s: %s (the socket is for root only)", sock, strerror(-q));
	case ETIMEDOUT:
		return fail("the agent at %s did not answer within %d s", sock, CALL_TIMEOUT_MS / 1000);
	default:
		return fail("%s", err.msg);
	}
}

int print_json(cJSON *j)
{
	_cleanup_free_ char *s = NULL;

	cJSON_DeleteItemFromObjectCaseSensitive(j, "ok");
	s = cJSON_Print(j);
	if (!s)
		return fail("out of memory");
	printf("%s\n", s);
	return EXIT_OK;
}

/* ---- reading the agent's JSON leniently (missing fields print as "-") ---- */

const char *jstr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) && v->valuestring && v->valuestring[0] ? v->valuestring : NULL;
}

const char *jstr_or(const cJSON *o, const char *k, const char *dflt)
{
	const char *s = jstr(o, k);
	return s ? s : dflt;
}

const cJSON *jarr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsArray(v) ? v : NULL;
}

const cJSON *jobj(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsObject(v) ? v : NULL;
}

bool jnum(const cJSON *o, const char *k, double *ret)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	if (!cJSON_IsNumber(v))
		return false;
	*ret = v->valuedouble;
	return true;
}

/* "yes"/"no"/"-" for an optional boolean */
const char *jbool_word(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsBool(v) ? (cJSON_IsTrue(v) ? "yes" : "no") : "-";
}

void time_format(double unix_s, char *buf, size_t size)
{
	time_t t = (time_t)unix_s;
	struct tm tm;

	if (unix_s <= 0 || !gmtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
		snprintf(buf, size, "-");
}

void rate_format(double bps, char *buf, size_t size)
{
	if (bps <= 0 || tc_rate_format((uint64_t)bps, buf, size) < 0)
		snprintf(buf, size, "-");
}

/* "id: wanted X, got Y (reason)" */
void print_degraded(const cJSON *arr, const char *indent)
{
	const cJSON *d;

	json_for_each(d, arr)
	{
		const char *reason = jstr(d, "reason");

		printf("%s%s: wanted %s, got %s%s%s%s\n", indent, jstr_or(d, "id", "?"), jstr_or(d, "wanted", "?"),
		       jstr_or(d, "got", "nothing"), reason ? " (" : "", reason ? reason : "", reason ? ")" : "");
	}
}

void print_strings(const cJSON *arr, const char *indent)
{
	const cJSON *s;

	json_for_each(s, arr)
	{
		if (cJSON_IsString(s) && s->valuestring)
			printf("%s%s\n", indent, s->valuestring);
	}
}

void print_effective_degraded(const cJSON *o, const char *indent)
{
	char deeper[32];

	snprintf(deeper, sizeof(deeper), "%s  ", indent);
	if (jarr(o, "effective") && cJSON_GetArraySize(jarr(o, "effective")) > 0) {
		printf("%seffective:\n", indent);
		print_strings(jarr(o, "effective"), deeper);
	}
	if (jarr(o, "degraded") && cJSON_GetArraySize(jarr(o, "degraded")) > 0) {
		printf("%sdegraded:\n", indent);
		print_degraded(jarr(o, "degraded"), deeper);
	}
}

void jrate(const cJSON *o, const char *k, char *buf, size_t size)
{
	double v = 0;

	rate_format(jnum(o, k, &v) ? v : 0, buf, size);
}

/* Print multi-line text with every line indented. */
void print_indented(const char *text, const char *indent)
{
	while (text && *text) {
		const char *nl = strchr(text, '\n');
		int n = nl ? (int)(nl - text) : (int)strlen(text);

		printf("%s%.*s\n", indent, n, text);
		text += n + (nl ? 1 : 0);
	}
}
