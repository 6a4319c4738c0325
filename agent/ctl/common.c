/* common.c — what the commands of aiqosctl share (ctl.h): errors and usage,
 * the call to the agent, the lenient readers and printers of its JSON. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
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
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {0},
};

struct ctl_global ctl_global;

int ctl_output_set(struct ctl_cmd *cmd, const char *what, const char *value)
{
	static const char *const names[] = {"text", "json", "yaml", "tc", NULL};
	static const char *const names_no_tc[] = {"text", "json", "yaml", NULL};
	int k = ctl_choice(cmd, what, value, cmd->tc_output ? names : names_no_tc);

	if (k < 0)
		return cmd->exit;
	cmd->out = (enum ctl_output)k;
	return EXIT_OK;
}

/* "--socket" "X", "--socket=X", "-o" "X", "-oX", "--output" "X", "--output=X" */
static int global_match(char **argv, int i, int argc, const char *long_name, char short_name, const char **ret,
                        int *ret_used, const char *usage)
{
	const char *a = argv[i];
	size_t n = strlen(long_name);

	if (strncmp(a, "--", 2) == 0 && strncmp(a + 2, long_name, n) == 0 && (a[2 + n] == '\0' || a[2 + n] == '=')) {
		if (a[2 + n] == '=') {
			*ret = a + 3 + n;
			*ret_used = 1;
			return 1;
		}
	} else if (short_name && a[0] == '-' && a[1] == short_name) {
		if (a[2]) {
			*ret = a + 2;
			*ret_used = 1;
			return 1;
		}
	} else {
		return 0;
	}
	if (i + 1 >= argc)
		return -usage_error(usage, "option '%s' needs a value", a);
	*ret = argv[i + 1];
	*ret_used = 2;
	return 1;
}

int ctl_global_take(int *argc, char **argv, const char *usage)
{
	int i = 1, out = 1;

	while (i < *argc) {
		const char *v = NULL;
		int used = 0, m;

		if (streq(argv[i], "--"))
			break;
		m = global_match(argv, i, *argc, "socket", 0, &v, &used, usage);
		if (m == 1) {
			if (!v || !v[0])
				return usage_error(usage, "--socket: empty path");
			ctl_global.socket = v;
		} else if (m == 0) {
			m = global_match(argv, i, *argc, "output", 'o', &v, &used, usage);
			if (m == 1)
				ctl_global.output = v;
		}
		if (m < 0)
			return -m;
		if (m == 0)
			argv[out++] = argv[i++];
		else
			i += used;
	}
	while (i < *argc)
		argv[out++] = argv[i++];
	argv[out] = NULL;
	*argc = out;
	return EXIT_OK;
}

int ctl_getopt(struct ctl_cmd *cmd, int argc, char **argv)
{
	const char *pre = cmd->name ? cmd->name : "", *sep = cmd->name ? ": " : "";
	int c;

	if (!cmd->started) {
		optind = 0; /* glibc: re-initialise (the top level parsed with "+") */
		opterr = 0; /* the messages are ours */
		cmd->started = true;
		/* -o given anywhere on the line (ctl_global_take) */
		if (cmd->name && ctl_global.output && ctl_output_set(cmd, "-o", ctl_global.output) != EXIT_OK)
			return CTL_OPT_EXIT;
	}
	c = getopt_long(argc, argv,
	                !cmd->name        ? "+:h"
	                : cmd->verbose_ok ? ":ho:v"
	                                  : ":ho:",
	                cmd->opts ? cmd->opts : ctl_common_options, NULL);
	switch (c) {
	case 'h':
		fputs(cmd->usage, stdout);
		cmd->exit = EXIT_OK;
		return CTL_OPT_EXIT;
	case 'j':
		cmd->out = CTL_OUT_JSON;
		return ctl_getopt(cmd, argc, argv);
	case 'o':
		if (ctl_output_set(cmd, "-o", optarg) != EXIT_OK)
			return CTL_OPT_EXIT;
		return ctl_getopt(cmd, argc, argv);
	case 'v':
		cmd->verbose = true;
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
	switch (cmd->out) {
	case CTL_OUT_JSON:
		return print_json(resp);
	case CTL_OUT_YAML:
		cJSON_DeleteItemFromObjectCaseSensitive(resp, "ok");
		return print_yaml(resp);
	default:
		return print(resp);
	}
}

/* ---- YAML output ---- */

/* A key printed plain when YAML reads it back as the same string. */
static bool yaml_key_plain(const char *k)
{
	if (!k[0] || strchr("-?:,[]{}#&*!|>'\"%@` ", k[0]))
		return false;
	for (const char *p = k; *p; p++)
		if (!(isalnum((unsigned char)*p) || strchr("_-./", *p)))
			return false;
	return !streq(k, "true") && !streq(k, "false") && !streq(k, "null") && !streq(k, "yes") && !streq(k, "no") &&
	       !streq(k, "on") && !streq(k, "off") && !strchr("0123456789.", k[0]);
}

static int yaml_key(const char *k)
{
	_cleanup_free_ char *q = NULL;
	cJSON *s;

	if (yaml_key_plain(k))
		return fputs(k, stdout);
	s = cJSON_CreateString(k);
	q = s ? cJSON_PrintUnformatted(s) : NULL;
	cJSON_Delete(s);
	return q ? fputs(q, stdout) : -1;
}

static bool yaml_is_block(const cJSON *v)
{
	return (cJSON_IsObject(v) || cJSON_IsArray(v)) && v->child;
}

/* Scalars and empty containers as JSON (valid YAML flow); -1 when out of
 * memory. */
static int yaml_scalar(const cJSON *v)
{
	_cleanup_free_ char *s = cJSON_PrintUnformatted(v);

	return s ? printf("%s\n", s) : -1;
}

static int yaml_node(const cJSON *v, int indent);

/* The members of an object or the items of an array, each line at indent
 * (the first one's indent already printed when first_done). */
static int yaml_block(const cJSON *v, int indent, bool first_done)
{
	const cJSON *c;
	bool first = true;

	json_for_each(c, v)
	{
		if (!(first && first_done))
			printf("%*s", indent, "");
		first = false;
		if (cJSON_IsArray(v)) {
			printf("- ");
			if (yaml_is_block(c)) {
				if (cJSON_IsArray(c)) {
					printf("\n%*s", indent + 2, "");
				}
				if (yaml_block(c, indent + 2, true) < 0)
					return -1;
			} else if (yaml_scalar(c) < 0) {
				return -1;
			}
			continue;
		}
		if (yaml_key(c->string) < 0)
			return -1;
		if (yaml_is_block(c)) {
			printf(":\n");
			if (yaml_node(c, cJSON_IsArray(c) ? indent : indent + 2) < 0)
				return -1;
		} else {
			printf(": ");
			if (yaml_scalar(c) < 0)
				return -1;
		}
	}
	return 0;
}

static int yaml_node(const cJSON *v, int indent)
{
	return yaml_is_block(v) ? yaml_block(v, indent, false) : yaml_scalar(v);
}

int print_yaml(const cJSON *j)
{
	if (yaml_node(j, 0) < 0)
		return fail("out of memory");
	return EXIT_OK;
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
