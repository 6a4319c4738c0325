/* aiqosctl.c — the command line of aiqos: `status` and `explain` ask the
 * running agent over its socket (proto.h) and print its answer for people
 * or as JSON; `plan` is a dry run of the planners (per pod and node uplink)
 * over a pods file, without the agent and without touching the kernel. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <time.h>

#include "config.h"
#include "ctl/ctl_doctor.h"
#include "kube/event.h"
#include "node.h"
#include "plan.h"
#include "proto.h"

#ifndef AIQOS_VERSION
#define AIQOS_VERSION "0.1.0"
#endif

#define PROG               "aiqosctl"
#define EXIT_OK            0
#define EXIT_ERR           1
#define EXIT_USAGE         2
#define CALL_TIMEOUT_MS    5000
#define PODS_FILE_MAX      (64 * 1024 * 1024)
#define CTL_PODS_MAX       KUBE_POD_LIST_ITEMS_MAX
#define DEGRADED_SHORT_MAX 48

static void cjson_deletep(cJSON **j)
{
	if (*j)
		cJSON_Delete(*j);
}
#define _cleanup_json_ _cleanup_(cjson_deletep)

/* cJSON_ArrayForEach evaluates its array twice (gcc sees a NULL dereference
 * when that is a call): iterate from the first child once. */
static cJSON *json_first(const cJSON *a)
{
	return a ? a->child : NULL;
}
#define json_for_each(el, arr) for ((el) = json_first(arr); (el); (el) = (el)->next)

_printf_(1, 2) static int fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", PROG);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return EXIT_ERR;
}

/* ---- usage ---- */

static const char usage_main[] =
        "Usage: aiqosctl [--socket PATH] COMMAND [OPTIONS]\n"
        "\n"
        "Commands:\n"
        "  status [--json]          the node: mode, uplink, pods and their effective tuning\n"
        "  explain NAMESPACE/POD    why a pod is tuned the way it is\n"
        "  plan --pods FILE         dry run: the plan for a set of pods (no agent, no kernel)\n"
        "  doctor [--json]          preflight of this node: kernel fallbacks per profile, CNI chain,\n"
        "                           coexisting shapers (exit 0 ok, 1 warnings, 2 errors)\n"
        "\n"
        "Options:\n"
        "  --socket PATH            the agent's socket (default " PROTO_DEFAULT_SOCKET ")\n"
        "  -h, --help               this help; COMMAND --help for a command's options\n"
        "  --version                print the version\n"
        "\n"
        "Exit status: 0 ok, 1 error, 2 usage.\n";

static const char usage_status[] = "Usage: aiqosctl [--socket PATH] status [--json]\n"
                                   "\n"
                                   "Ask the running agent for the node's state: node mode, uplink tuning and\n"
                                   "every pod with its class, profile, status and effective tuning.\n"
                                   "\n"
                                   "  --json      print the agent's JSON document\n"
                                   "  -h, --help  this help\n";

static const char usage_explain[] = "Usage: aiqosctl [--socket PATH] explain [--json] NAMESPACE/POD\n"
                                    "\n"
                                    "Ask the running agent why a pod is tuned the way it is: class and profile and\n"
                                    "where they come from, the pod's plan, what is in effect, what fell back and\n"
                                    "why, and its share of the node's uplink. POD alone means namespace default.\n"
                                    "\n"
                                    "  --json      print the agent's JSON document\n"
                                    "  -h, --help  this help\n";

static const char usage_plan[] =
        "Usage: aiqosctl plan --pods FILE [--config FILE] [--format text|tc|json]\n"
        "                     [--uplink-rate RATE] [--uplink IFNAME] [--link virtual|nic]\n"
        "                     [--kernel full|ci]\n"
        "\n"
        "Dry run: print the exact per-pod plans (qdiscs, classes, filters, sysctls with\n"
        "their fallbacks) and the node mode and uplink plan for a set of pods, without\n"
        "the agent and without touching the kernel.\n"
        "\n"
        "  --pods FILE      pods as JSON ('-' = stdin): {\"pods\": [{\"namespace\", \"name\",\n"
        "                   \"uid\", \"annotations\": {..}, \"ips\": [..], \"gpus\": N,\n"
        "                   \"hostNetwork\": false}]}, or a Pod or a PodList as printed by\n"
        "                   `kubectl get pods -o json`\n"
        "  --config FILE    agent config (default: the built-in defaults; /etc is not read)\n"
        "  --format F       text (default), tc (shell commands) or json\n"
        "  --uplink-rate R  the uplink's speed, tc syntax (e.g. 500mbit, 10gbit)\n"
        "  --uplink IFNAME  the uplink's name (default: the config's, else eth0)\n"
        "  --link KIND      virtual (default: veth/bridge; its speed is never a rate: shaped only\n"
        "                   at a configured uplinkRate)\n"
        "                   or nic (a physical NIC)\n"
        "  --kernel K       full (default: every qdisc kind) or ci (no fq, fq_codel, prio,\n"
        "                   pedit: the fallbacks of a minimal kernel)\n"
        "  -h, --help       this help\n";

static int usage_error(const char *usage, const char *fmt, ...) _printf_(2, 3);
static int usage_error(const char *usage, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", PROG);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n\n%s", usage);
	return EXIT_USAGE;
}

/* getopt returned '?' (unknown) or ':' (missing value) for arg. */
static int bad_option(const char *usage, const char *cmd, int c, const char *arg)
{
	if (c == ':')
		return usage_error(usage, "%soption '%s' needs a value", cmd, arg);
	return usage_error(usage, "%sunknown option '%s'", cmd, arg);
}

/* ---- talking to the agent ---- */

/* One exchange; prints the error and returns EXIT_ERR on failure. */
static int agent_call(const char *sock, const struct proto_request *r, cJSON **ret)
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

/* Print a JSON document (the agent's answer without the protocol's keys). */
static int print_json(cJSON *j)
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

static const char *jstr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) && v->valuestring && v->valuestring[0] ? v->valuestring : NULL;
}

static const char *jstr_or(const cJSON *o, const char *k, const char *dflt)
{
	const char *s = jstr(o, k);
	return s ? s : dflt;
}

static const cJSON *jarr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsArray(v) ? v : NULL;
}

static const cJSON *jobj(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsObject(v) ? v : NULL;
}

static bool jnum(const cJSON *o, const char *k, double *ret)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	if (!cJSON_IsNumber(v))
		return false;
	*ret = v->valuedouble;
	return true;
}

/* "yes"/"no"/"-" for an optional boolean */
static const char *jbool_word(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsBool(v) ? (cJSON_IsTrue(v) ? "yes" : "no") : "-";
}

static void time_format(double unix_s, char *buf, size_t size)
{
	time_t t = (time_t)unix_s;
	struct tm tm;

	if (unix_s <= 0 || !gmtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
		snprintf(buf, size, "-");
}

static void rate_format(double bps, char *buf, size_t size)
{
	if (bps <= 0 || tc_rate_format((uint64_t)bps, buf, size) < 0)
		snprintf(buf, size, "-");
}

/* "id: wanted X, got Y (reason)" */
static void print_degraded(const cJSON *arr, const char *indent)
{
	const cJSON *d;

	json_for_each(d, arr)
	{
		const char *reason = jstr(d, "reason");

		printf("%s%s: wanted %s, got %s%s%s%s\n", indent, jstr_or(d, "id", "?"), jstr_or(d, "wanted", "?"),
		       jstr_or(d, "got", "nothing"), reason ? " (" : "", reason ? reason : "", reason ? ")" : "");
	}
}

static void print_strings(const cJSON *arr, const char *indent)
{
	const cJSON *s;

	json_for_each(s, arr)
	{
		if (cJSON_IsString(s) && s->valuestring)
			printf("%s%s\n", indent, s->valuestring);
	}
}

/* Print multi-line text with every line indented. */
static void print_indented(const char *text, const char *indent)
{
	while (text && *text) {
		const char *nl = strchr(text, '\n');
		int n = nl ? (int)(nl - text) : (int)strlen(text);

		printf("%s%.*s\n", indent, n, text);
		text += n + (nl ? 1 : 0);
	}
}

/* ---- short forms for the status table ---- */

struct sbuf {
	char s[256];
	size_t len;
};

static void sbuf_add(struct sbuf *b, const char *sep, const char *word)
{
	int n;

	if (!word || !*word)
		return;
	/* unique words only */
	for (const char *p = b->s; (p = strstr(p, word)); p++) {
		size_t wl = strlen(word);
		if ((p == b->s || p[-1] == ',' || p[-1] == ' ') && (p[wl] == '\0' || p[wl] == ',' || p[wl] == ' '))
			return;
	}
	n = snprintf(b->s + b->len, sizeof(b->s) - b->len, "%s%s", b->len ? sep : "", word);
	if (n > 0 && b->len + (size_t)n < sizeof(b->s))
		b->len += (size_t)n;
	else
		b->s[b->len] = '\0';
}

/* The short label of one effective line: the qdisc kind of a tc qdisc
 * command ("tc qdisc replace dev eth0 root handle 1: fq_codel ..." ->
 * "fq_codel"), "cc=bbr" for the congestion control sysctl, NULL otherwise. */
static bool effective_short(const char *line, char *buf, size_t size)
{
	const char *p = strstr(line, "qdisc ");
	char tok[64];
	int n = 0, skip = 0;

	if (!p) {
		const char *cc = strstr(line, "tcp_congestion_control=");
		if (!cc)
			return false;
		snprintf(buf, size, "cc=%.32s", cc + strlen("tcp_congestion_control="));
		buf[strcspn(buf, " \t'")] = '\0';
		return true;
	}
	p += strlen("qdisc ");
	/* verb, then "dev X", "root" | "parent X", "handle X", then the kind */
	for (bool verb = true; sscanf(p, "%63s%n", tok, &n) == 1; p += n) {
		if (verb) {
			verb = false;
			continue;
		}
		if (skip) {
			skip--;
			continue;
		}
		if (streq(tok, "dev") || streq(tok, "parent") || streq(tok, "handle") || streq(tok, "estimator")) {
			skip = 1;
			continue;
		}
		if (streq(tok, "root") || streq(tok, "ingress") || streq(tok, "clsact"))
			continue;
		snprintf(buf, size, "%s", tok);
		return true;
	}
	return false;
}

static void pod_short(const cJSON *pod, struct sbuf *eff, struct sbuf *deg)
{
	const cJSON *att, *l;
	unsigned n_deg = 0;

	json_for_each(att, jarr(pod, "attachments"))
	{
		json_for_each(l, jarr(att, "effective"))
		{
			char w[64];
			if (cJSON_IsString(l) && effective_short(l->valuestring, w, sizeof(w)))
				sbuf_add(eff, ",", w);
		}
		json_for_each(l, jarr(att, "degraded"))
		{
			const char *id = jstr(l, "id");
			n_deg++;
			if (id && deg->len + strlen(id) + 1 < DEGRADED_SHORT_MAX)
				sbuf_add(deg, ",", id);
		}
		if (jstr(att, "failure"))
			sbuf_add(deg, ",", "failure");
	}
	if (n_deg && (deg->len == 0 || deg->len + 4 >= DEGRADED_SHORT_MAX))
		sbuf_add(deg, ",", "...");
}

/* ---- status ---- */

static void print_uplink(const cJSON *up)
{
	const cJSON *shares = jobj(up, "shares"), *s;
	char rate[32];
	double v = 0;

	rate_format(jnum(up, "rateBps", &v) ? v : 0, rate, sizeof(rate));
	printf("uplink: %s  rate %s  shape %s", jstr_or(up, "ifname", "-"), rate, jstr_or(up, "shape", "-"));
	if (shares && shares->child) {
		bool first = true;
		printf("  shares");
		json_for_each(s, shares)
		{
			if (cJSON_IsNumber(s)) {
				printf("%s %s %.1f%%", first ? "" : ",", s->string, s->valuedouble * 100);
				first = false;
			}
		}
	}
	if (jnum(up, "trainingFloor", &v) && v > 0)
		printf("  training floor %.1f%%", v * 100);
	printf("\n");
	if (jobj(up, "classes") && jobj(up, "classes")->child) {
		const cJSON *k;

		printf("  guarantees:");
		json_for_each(k, jobj(up, "classes"))
		{
			char r1[32], r2[32];
			double rb = 0, cb = 0;

			jnum(k, "rateBps", &rb);
			jnum(k, "ceilBps", &cb);
			rate_format(rb, r1, sizeof(r1));
			rate_format(cb, r2, sizeof(r2));
			printf(" %s rate %s ceil %s;", k->string, r1, r2);
		}
		printf("\n");
	}
	if (jobj(up, "downlink") && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(jobj(up, "downlink"), "shaped"))) {
		const cJSON *dl = jobj(up, "downlink");
		char r1[32], r2[32];
		double rb = 0, sb = 0;

		jnum(dl, "rateBps", &rb);
		jnum(dl, "shapedBps", &sb);
		rate_format(rb, r1, sizeof(r1));
		rate_format(sb, r2, sizeof(r2));
		printf("download: %s ingress -> %s  rate %s  shaped %s\n", jstr_or(up, "ifname", "-"),
		       jstr_or(dl, "ifb", "-"), r1, r2);
	}
	if (jarr(up, "effective") && cJSON_GetArraySize(jarr(up, "effective")) > 0) {
		printf("  effective:\n");
		print_strings(jarr(up, "effective"), "    ");
	}
	if (jarr(up, "degraded") && cJSON_GetArraySize(jarr(up, "degraded")) > 0) {
		printf("  degraded:\n");
		print_degraded(jarr(up, "degraded"), "    ");
	}
	if (jstr(up, "classifyWhy"))
		printf("  classify: %s, in effect %s: %s\n", jstr_or(up, "classify", "-"),
		       jstr_or(up, "classifyEffective", "-"), jstr(up, "classifyWhy"));
}

struct row {
	const char *c[6];
	char buf[3][256];
};

static int status_print(const cJSON *st)
{
	static const char *const head[6] = {"NAMESPACE/NAME", "CLASS", "PROFILE", "STATUS", "EFFECTIVE", "DEGRADED"};
	const cJSON *pods = jarr(st, "pods"), *p, *cfg = jobj(st, "config");
	_cleanup_free_ struct row *rows = NULL;
	size_t width[6], n = 0;
	char when[64];
	double v = 0;

	printf("node: %s\n", jstr_or(st, "node", "-"));
	time_format(jnum(st, "modeSince", &v) ? v : 0, when, sizeof(when));
	printf("mode: %s (since %s)\n", jstr_or(st, "mode", "-"), when);
	printf("api: connected %s, ready %s\n", jbool_word(st, "apiConnected"), jbool_word(st, "ready"));
	if (cfg) {
		const char *e = jstr(cfg, "error");
		time_format(jnum(cfg, "loadedAt", &v) ? v : 0, when, sizeof(when));
		printf("config: %s (loaded %s)%s%s\n", jstr_or(cfg, "path", "defaults"), when, e ? "; error: " : "",
		       e ? e : "");
	}
	if (jobj(st, "uplink"))
		print_uplink(jobj(st, "uplink"));
	printf("\n");

	if (pods && cJSON_GetArraySize(pods) > 0) {
		rows = calloc((size_t)cJSON_GetArraySize(pods), sizeof(*rows));
		if (!rows)
			return fail("out of memory");
	}
	for (int i = 0; i < 6; i++)
		width[i] = strlen(head[i]);
	json_for_each(p, pods)
	{
		struct row *r = &rows[n++];
		struct sbuf eff = {{0}, 0}, deg = {{0}, 0};

		snprintf(r->buf[0], sizeof(r->buf[0]), "%s/%s", jstr_or(p, "namespace", "?"), jstr_or(p, "name", "?"));
		pod_short(p, &eff, &deg);
		snprintf(r->buf[1], sizeof(r->buf[1]), "%s", eff.len ? eff.s : "-");
		snprintf(r->buf[2], sizeof(r->buf[2]), "%s", deg.len ? deg.s : "-");
		r->c[0] = r->buf[0];
		r->c[1] = jstr_or(p, "class", "-");
		r->c[2] = jstr_or(p, "profile", "-");
		r->c[3] = jstr_or(p, "status", "-");
		r->c[4] = r->buf[1];
		r->c[5] = r->buf[2];
		for (int c = 0; c < 6; c++)
			if (strlen(r->c[c]) > width[c])
				width[c] = strlen(r->c[c]);
	}
	for (int c = 0; c < 6; c++)
		printf("%-*s%s", c < 5 ? (int)width[c] : 0, head[c], c < 5 ? "  " : "\n");
	for (size_t i = 0; i < n; i++)
		for (int c = 0; c < 6; c++)
			printf("%-*s%s", c < 5 ? (int)width[c] : 0, rows[i].c[c], c < 5 ? "  " : "\n");
	if (n == 0)
		printf("(no pods)\n");
	return EXIT_OK;
}

static int cmd_status(int argc, char **argv, const char *sock)
{
	static const struct option opts[] = {
	        {"json", no_argument, NULL, 'j'},
	        {"help", no_argument, NULL, 'h'},
	        {0},
	};
	struct proto_request r = {.op = PROTO_OP_STATUS};
	_cleanup_json_ cJSON *resp = NULL;
	bool json = false;
	int c, q;

	optind = 0; /* glibc: re-initialise (main parsed with "+") */
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			fputs(usage_status, stdout);
			return EXIT_OK;
		default:
			return bad_option(usage_status, "status: ", c, argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error(usage_status, "status: unexpected argument '%s'", argv[optind]);
	q = agent_call(sock, &r, &resp);
	if (q != EXIT_OK)
		return q;
	return json ? print_json(resp) : status_print(resp);
}

/* ---- explain ---- */

static int explain_print(const cJSON *e)
{
	const cJSON *att, *plan = jobj(e, "plan"), *ips = jarr(e, "ips"), *s;
	const char *uid = jstr(e, "uid");
	bool first = true;

	printf("pod %s/%s%s%s%s\n", jstr_or(e, "namespace", "?"), jstr_or(e, "name", "?"), uid ? " (uid " : "",
	       uid ? uid : "", uid ? ")" : "");
	printf("class: %s  profile: %s  status: %s  source: %s\n", jstr_or(e, "class", "-"), jstr_or(e, "profile", "-"),
	       jstr_or(e, "status", "-"), jstr_or(e, "source", "-"));
	printf("ips:");
	json_for_each(s, ips)
	{
		if (cJSON_IsString(s)) {
			printf("%s %s", first ? "" : ",", s->valuestring);
			first = false;
		}
	}
	printf("%s\n", first ? " -" : "");
	if (jarr(e, "why")) {
		printf("\nwhy:\n");
		json_for_each(s, jarr(e, "why"))
		{
			if (cJSON_IsString(s))
				printf("  - %s\n", s->valuestring);
		}
	}
	printf("\nattachments:");
	if (!jarr(e, "attachments") || cJSON_GetArraySize(jarr(e, "attachments")) == 0)
		printf(" none (the plugin has not tuned this pod on this node)");
	printf("\n");
	json_for_each(att, jarr(e, "attachments"))
	{
		const char *failure = jstr(att, "failure");

		printf("  %s (host %s, container %.12s)\n", jstr_or(att, "ifname", "?"),
		       jstr_or(att, "hostIfname", "-"), jstr_or(att, "containerId", "-"));
		if (jarr(att, "effective") && cJSON_GetArraySize(jarr(att, "effective")) > 0) {
			printf("    effective:\n");
			print_strings(jarr(att, "effective"), "      ");
		}
		if (jarr(att, "degraded") && cJSON_GetArraySize(jarr(att, "degraded")) > 0) {
			printf("    degraded:\n");
			print_degraded(jarr(att, "degraded"), "      ");
		}
		if (failure)
			printf("    failure: %s\n", failure);
	}
	if (plan && jstr(plan, "text")) {
		printf("\nplan:\n");
		print_indented(jstr(plan, "text"), "  ");
	}
	if (jarr(e, "uplinkItems")) {
		printf("\nuplink items:");
		if (cJSON_GetArraySize(jarr(e, "uplinkItems")) == 0)
			printf(" none");
		printf("\n");
		print_strings(jarr(e, "uplinkItems"), "  ");
	}
	if (jarr(e, "downloadItems") && cJSON_GetArraySize(jarr(e, "downloadItems")) > 0) {
		printf("\ndownload items:\n");
		print_strings(jarr(e, "downloadItems"), "  ");
	}
	return EXIT_OK;
}

static int cmd_explain(int argc, char **argv, const char *sock)
{
	static const struct option opts[] = {
	        {"json", no_argument, NULL, 'j'},
	        {"help", no_argument, NULL, 'h'},
	        {0},
	};
	struct proto_request r = {.op = PROTO_OP_EXPLAIN};
	_cleanup_json_ cJSON *resp = NULL;
	const char *arg, *slash;
	bool json = false;
	int c, q;

	optind = 0; /* glibc: re-initialise (main parsed with "+") */
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			fputs(usage_explain, stdout);
			return EXIT_OK;
		default:
			return bad_option(usage_explain, "explain: ", c, argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return usage_error(usage_explain, "explain: which pod? (NAMESPACE/POD)");
	if (optind + 1 < argc)
		return usage_error(usage_explain, "explain: unexpected argument '%s'", argv[optind + 1]);
	arg = argv[optind];
	slash = strchr(arg, '/');
	if (slash) {
		if (slash == arg || !slash[1] || strchr(slash + 1, '/') ||
		    (size_t)(slash - arg) >= sizeof(r.namespace_))
			return usage_error(usage_explain, "explain: '%s' is not NAMESPACE/POD", arg);
		memcpy(r.namespace_, arg, (size_t)(slash - arg));
		r.namespace_[slash - arg] = '\0';
		arg = slash + 1;
	} else {
		str_copy(r.namespace_, sizeof(r.namespace_), "default");
	}
	if (str_copy(r.name, sizeof(r.name), arg) < 0)
		return usage_error(usage_explain, "explain: pod name '%.64s...' is too long", arg);
	q = agent_call(sock, &r, &resp);
	if (q != EXIT_OK)
		return q;
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "found")))
		return fail("pod %s/%s is not known to the agent (not on this node, or not seen yet)", r.namespace_,
		            r.name);
	cJSON_DeleteItemFromObjectCaseSensitive(resp, "found");
	return json ? print_json(resp) : explain_print(resp);
}

/* ---- plan: reading pods ---- */

struct ctl_pod {
	char namespace_[KUBE_NAMESPACE_MAX];
	char name[KUBE_NAME_MAX];
	char uid[KUBE_UID_MAX];
	const cJSON *annotations; /* borrowed from the document or the decoded list; NULL = none */
	unsigned n_ips;
	struct node_ip ips[NODE_POD_IPS_MAX];
	char ip_text[NODE_POD_IPS_MAX][INET6_ADDRSTRLEN];
	uint32_t gpus;
	const char *skip; /* why the pod is left out ("hostNetwork", "phase Succeeded"), NULL = planned */
};

struct ctl_pods {
	size_t n;
	struct ctl_pod *v;
	struct kube_pod_list list; /* when the file is a PodList: owns the annotations */
	struct kube_pod single;    /* when the file is one Pod */
	bool have_single;
};

static void ctl_pods_done(struct ctl_pods *p)
{
	free(p->v);
	kube_pod_list_done(&p->list);
	if (p->have_single)
		kube_pod_done(&p->single);
	memset(p, 0, sizeof(*p));
}

static int read_file(const char *path, char **ret, size_t *ret_len)
{
	_cleanup_fclose_ FILE *f = streq(path, "-") ? NULL : fopen(path, "re");
	FILE *in = streq(path, "-") ? stdin : f;
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 0;

	if (!in)
		return fail("cannot read pods file %s: %s", path, strerror(errno));
	for (;;) {
		size_t k;

		if (len + 1 >= cap) {
			char *t;
			cap = cap ? cap * 2 : 65536;
			if (cap > PODS_FILE_MAX + 1)
				cap = PODS_FILE_MAX + 1;
			if (len + 1 >= cap)
				return fail("pods file %s is larger than %d bytes", path, PODS_FILE_MAX);
			t = realloc(buf, cap);
			if (!t)
				return fail("out of memory");
			buf = t;
		}
		k = fread(buf + len, 1, cap - 1 - len, in);
		len += k;
		if (k == 0) {
			if (ferror(in))
				return fail("cannot read pods file %s: %s", path, strerror(errno));
			break;
		}
	}
	buf[len] = '\0';
	*ret = TAKE_PTR(buf);
	*ret_len = len;
	return EXIT_OK;
}

static bool ip_parse(const char *s, struct node_ip *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (inet_pton(AF_INET, s, ret->addr) == 1) {
		ret->family = AF_INET;
		return true;
	}
	if (inet_pton(AF_INET6, s, ret->addr) == 1) {
		ret->family = AF_INET6;
		return true;
	}
	return false;
}

static void ip_text(struct ctl_pod *p, unsigned i)
{
	inet_ntop(p->ips[i].family, p->ips[i].addr, p->ip_text[i], sizeof(p->ip_text[i]));
}

static bool dns_name_ok(const char *s)
{
	if (!*s)
		return false;
	for (const char *c = s; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '.'))
			return false;
	return true;
}

/* The simple format: {"pods": [{"namespace", "name", "uid", "annotations", "ips", "gpus", "hostNetwork"}]} */
static int pods_from_simple(const char *path, const cJSON *arr, struct ctl_pods *ret)
{
	static const char *const keys[] = {"namespace", "name", "uid", "annotations", "ips", "gpus", "hostNetwork"};
	const cJSON *it;
	int i = 0, n = cJSON_GetArraySize(arr);

	if (n > CTL_PODS_MAX)
		return fail("%s: pods: %d pods exceed the limit of %d", path, n, CTL_PODS_MAX);
	ret->v = calloc(n > 0 ? (size_t)n : 1, sizeof(*ret->v));
	if (!ret->v)
		return fail("out of memory");
	json_for_each(it, arr)
	{
		struct ctl_pod *p = &ret->v[ret->n];
		const cJSON *v, *a;

		if (!cJSON_IsObject(it))
			return fail("%s: pods[%d]: expected an object", path, i);
		for (const cJSON *k = it->child; k; k = k->next) {
			bool known = false;
			for (size_t j = 0; j < ARRAY_SIZE(keys); j++)
				known = known || streq(k->string, keys[j]);
			if (!known)
				return fail(
				        "%s: pods[%d]: unknown key '%s' (expected namespace, name, uid, annotations, "
				        "ips, gpus, hostNetwork)",
				        path, i, k->string);
		}
		v = cJSON_GetObjectItemCaseSensitive(it, "name");
		if (!cJSON_IsString(v) || !dns_name_ok(v->valuestring) ||
		    str_copy(p->name, sizeof(p->name), v->valuestring) < 0)
			return fail("%s: pods[%d].name: expected a pod name (lower-case letters, digits, '-', '.')",
			            path, i);
		v = cJSON_GetObjectItemCaseSensitive(it, "namespace");
		if (v && (!cJSON_IsString(v) || !dns_name_ok(v->valuestring) ||
		          str_copy(p->namespace_, sizeof(p->namespace_), v->valuestring) < 0))
			return fail("%s: pods[%d].namespace: expected a namespace name of at most %d characters", path,
			            i, KUBE_NAMESPACE_MAX - 1);
		if (!v)
			str_copy(p->namespace_, sizeof(p->namespace_), "default");
		v = cJSON_GetObjectItemCaseSensitive(it, "uid");
		if (v) {
			if (!cJSON_IsString(v) || !v->valuestring[0] ||
			    str_copy(p->uid, sizeof(p->uid), v->valuestring) < 0)
				return fail("%s: pods[%d].uid: expected a string of 1 to %d characters", path, i,
				            KUBE_UID_MAX - 1);
		} else if (snprintf(p->uid, sizeof(p->uid), "%s/%s", p->namespace_, p->name) >= (int)sizeof(p->uid)) {
			return fail(
			        "%s: pods[%d] (%s/%s): give it a \"uid\" (namespace/name is longer than %d characters)",
			        path, i, p->namespace_, p->name, KUBE_UID_MAX - 1);
		}
		a = cJSON_GetObjectItemCaseSensitive(it, "annotations");
		if (a && !cJSON_IsNull(a)) {
			if (!cJSON_IsObject(a))
				return fail("%s: pods[%d].annotations: expected an object of strings", path, i);
			for (const cJSON *k = a->child; k; k = k->next)
				if (!cJSON_IsString(k))
					return fail("%s: pods[%d].annotations.%s: expected a string", path, i,
					            k->string);
			p->annotations = a;
		}
		v = cJSON_GetObjectItemCaseSensitive(it, "ips");
		if (v && !cJSON_IsArray(v))
			return fail("%s: pods[%d].ips: expected an array of IP addresses", path, i);
		json_for_each(a, v)
		{
			if (p->n_ips == NODE_POD_IPS_MAX)
				return fail("%s: pods[%d].ips: more than %d addresses", path, i, NODE_POD_IPS_MAX);
			if (!cJSON_IsString(a) || !ip_parse(a->valuestring, &p->ips[p->n_ips]))
				return fail("%s: pods[%d].ips: %s%s%s is not an IPv4 or IPv6 address", path, i,
				            cJSON_IsString(a) ? "'" : "",
				            cJSON_IsString(a) ? a->valuestring : "a non-string",
				            cJSON_IsString(a) ? "'" : "");
			ip_text(p, p->n_ips++);
		}
		v = cJSON_GetObjectItemCaseSensitive(it, "gpus");
		if (v) {
			if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > KUBE_POD_GPU_MAX ||
			    v->valuedouble != (double)(int)v->valuedouble)
				return fail("%s: pods[%d].gpus: expected a whole number 0..%d", path, i,
				            KUBE_POD_GPU_MAX);
			p->gpus = (uint32_t)v->valuedouble;
		}
		v = cJSON_GetObjectItemCaseSensitive(it, "hostNetwork");
		if (v && !cJSON_IsBool(v))
			return fail("%s: pods[%d].hostNetwork: expected true or false", path, i);
		if (cJSON_IsTrue(v))
			p->skip = "hostNetwork";
		ret->n++;
		i++;
	}
	return EXIT_OK;
}

static void pod_from_kube(const struct kube_pod *k, struct ctl_pod *p)
{
	str_copy(p->namespace_, sizeof(p->namespace_), k->namespace_);
	str_copy(p->name, sizeof(p->name), k->name);
	str_copy(p->uid, sizeof(p->uid), k->uid);
	p->annotations = k->annotations;
	for (unsigned i = 0; i < k->n_ips && p->n_ips < NODE_POD_IPS_MAX; i++) {
		struct node_ip *ip = &p->ips[p->n_ips];

		memset(ip, 0, sizeof(*ip));
		ip->family = k->ips[i].family;
		if (ip->family == AF_INET)
			memcpy(ip->addr, &k->ips[i].addr.v4, 4);
		else
			memcpy(ip->addr, &k->ips[i].addr.v6, 16);
		ip_text(p, p->n_ips++);
	}
	p->gpus = k->gpus;
	if (k->host_network)
		p->skip = "hostNetwork";
	else if (k->phase == KUBE_POD_PHASE_SUCCEEDED)
		p->skip = "phase Succeeded";
	else if (k->phase == KUBE_POD_PHASE_FAILED)
		p->skip = "phase Failed";
}

/* Fill what a manifest or `kubectl` output may lack for the strict API
 * decoder (a dry run of pods not created yet): namespace, uid, resourceVersion. */
static bool kube_pod_fill_identity(cJSON *pod, int i)
{
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	const cJSON *v;
	char uid[32];

	if (!cJSON_IsObject(meta))
		return true; /* the decoder names the problem */
	v = cJSON_GetObjectItemCaseSensitive(meta, "namespace");
	if ((!v || cJSON_IsNull(v)) && (cJSON_DeleteItemFromObjectCaseSensitive(meta, "namespace"), true) &&
	    !cJSON_AddStringToObject(meta, "namespace", "default"))
		return false;
	v = cJSON_GetObjectItemCaseSensitive(meta, "uid");
	snprintf(uid, sizeof(uid), "dry-run-%d", i);
	if ((!v || cJSON_IsNull(v)) && (cJSON_DeleteItemFromObjectCaseSensitive(meta, "uid"), true) &&
	    !cJSON_AddStringToObject(meta, "uid", uid))
		return false;
	v = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
	if ((!v || cJSON_IsNull(v) || (cJSON_IsString(v) && !v->valuestring[0])) &&
	    (cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion"), true) &&
	    !cJSON_AddStringToObject(meta, "resourceVersion", "0"))
		return false;
	return true;
}

/* A PodList (or kubectl's "List") or a single Pod. */
static int pods_from_kube(const char *path, cJSON *doc, struct ctl_pods *ret)
{
	const cJSON *kind = cJSON_GetObjectItemCaseSensitive(doc, "kind");
	struct error err = {0};
	cJSON *items, *it, *meta;
	int i = 0;

	if (cJSON_IsString(kind) && streq(kind->valuestring, "Pod")) {
		if (!kube_pod_fill_identity(doc, 0))
			return fail("out of memory");
		if (kube_pod_decode(doc, &ret->single, &err) < 0)
			return fail("%s: %s", path, err.msg);
		ret->have_single = true;
		ret->v = calloc(1, sizeof(*ret->v));
		if (!ret->v)
			return fail("out of memory");
		pod_from_kube(&ret->single, &ret->v[0]);
		ret->n = 1;
		return EXIT_OK;
	}
	/* kubectl prints {"kind": "List", "metadata": {"resourceVersion": ""}} */
	if (cJSON_IsString(kind) && streq(kind->valuestring, "List"))
		cJSON_ReplaceItemInObjectCaseSensitive(doc, "kind", cJSON_CreateString("PodList"));
	meta = cJSON_GetObjectItemCaseSensitive(doc, "metadata");
	if (!meta || cJSON_IsNull(meta)) {
		cJSON_DeleteItemFromObjectCaseSensitive(doc, "metadata");
		meta = cJSON_AddObjectToObject(doc, "metadata");
		if (!meta)
			return fail("out of memory");
	}
	if (cJSON_IsObject(meta)) {
		const cJSON *rv = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
		if ((!rv || cJSON_IsNull(rv) || (cJSON_IsString(rv) && !rv->valuestring[0])) &&
		    (cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion"), true) &&
		    !cJSON_AddStringToObject(meta, "resourceVersion", "0"))
			return fail("out of memory");
	}
	items = cJSON_GetObjectItemCaseSensitive(doc, "items");
	json_for_each(it, cJSON_IsArray(items) ? items : NULL)
	{
		if (cJSON_IsObject(it) && !kube_pod_fill_identity(it, i))
			return fail("out of memory");
		i++;
	}
	if (kube_pod_list_decode(doc, &ret->list, &err) < 0)
		return fail("%s: %s", path, err.msg);
	if (ret->list.n_invalid)
		return fail("%s: %s", path, ret->list.first_invalid);
	ret->v = calloc(ret->list.n ? ret->list.n : 1, sizeof(*ret->v));
	if (!ret->v)
		return fail("out of memory");
	for (size_t k = 0; k < ret->list.n; k++)
		pod_from_kube(&ret->list.items[k], &ret->v[ret->n++]);
	return EXIT_OK;
}

static int pods_load(const char *path, cJSON **ret_doc, struct ctl_pods *ret)
{
	_cleanup_free_ char *text = NULL;
	_cleanup_json_ cJSON *doc = NULL;
	const char *end = NULL;
	const cJSON *pods;
	size_t len = 0;
	int q;

	q = read_file(path, &text, &len);
	if (q != EXIT_OK)
		return q;
	doc = cJSON_ParseWithLengthOpts(text, len, &end, false);
	if (!doc) {
		size_t off = end && end >= text ? (size_t)(end - text) : 0;
		unsigned line = 1;
		for (size_t i = 0; i < off && i < len; i++)
			line += text[i] == '\n';
		return fail("%s: not valid JSON (line %u, byte %zu)", path, line, off);
	}
	for (; end && end < text + len; end++)
		if (!strchr(" \t\r\n", *end))
			return fail("%s: trailing data after the JSON document", path);
	if (!cJSON_IsObject(doc))
		return fail("%s: expected a JSON object ({\"pods\": [...]}, a Pod or a PodList)", path);
	pods = cJSON_GetObjectItemCaseSensitive(doc, "pods");
	if (pods) {
		if (!cJSON_IsArray(pods))
			return fail("%s: pods: expected an array", path);
		q = pods_from_simple(path, pods, ret);
	} else if (cJSON_GetObjectItemCaseSensitive(doc, "items") || cJSON_GetObjectItemCaseSensitive(doc, "kind")) {
		q = pods_from_kube(path, doc, ret);
	} else {
		return fail("%s: expected {\"pods\": [...]}, a Pod or a PodList", path);
	}
	if (q != EXIT_OK)
		return q;
	/* the node planner keys pods by UID */
	for (size_t i = 0; i < ret->n; i++)
		for (size_t j = 0; j < i; j++)
			if (streq(ret->v[i].uid, ret->v[j].uid))
				return fail("%s: pods %s/%s and %s/%s have the same uid '%s'", path,
				            ret->v[j].namespace_, ret->v[j].name, ret->v[i].namespace_, ret->v[i].name,
				            ret->v[i].uid);
	*ret_doc = TAKE_PTR(doc);
	return EXIT_OK;
}

/* ---- plan: computing ---- */

enum link_kind { LINK_VIRTUAL, LINK_NIC };

struct plan_opts {
	const char *pods_path;
	const char *config_path; /* NULL = defaults */
	enum plan_format fmt;
	uint64_t uplink_rate_bps; /* 0 = unknown */
	const char *uplink;       /* NULL = config's, else eth0 */
	enum link_kind link;
	bool kernel_ci;
};

struct pod_result {
	struct ctl_pod *pod;
	struct workload w;
	const struct profile *profile;
	char profile_warn[WORKLOAD_WARN_LEN];
	struct attach_ifaces ifs;
	struct plan plan;
};

struct plan_run {
	struct plan_opts o;
	cJSON *doc; /* the pods file (the simple format's annotations point into it) */
	struct agent_config cfg;
	struct plan_caps caps;
	struct uplink_facts up;
	struct ctl_pods pods;
	struct pod_result *res; /* one per planned pod */
	size_t n_res;
	struct node_pod *node_pods;
	struct node_plan np;
	struct node_plan_info info;
};

static void plan_run_done(struct plan_run *r)
{
	node_plan_free(&r->np);
	free(r->node_pods);
	free(r->res);
	ctl_pods_done(&r->pods);
	cJSON_Delete(r->doc);
	agent_config_done(&r->cfg);
}

static void caps_for(bool ci, struct plan_caps *caps)
{
	memset(caps, 0, sizeof(*caps));
	if (!ci)
		return;
	plan_caps_mark_missing(caps, TC_KIND_FQ);
	plan_caps_mark_missing(caps, TC_KIND_FQ_CODEL);
	plan_caps_mark_missing(caps, TC_KIND_PRIO);
	caps->missing_pedit = true;
}

/* "veth-<name>", cut to an interface name */
static void host_ifname(const char *pod, char *buf, size_t size)
{
	snprintf(buf, size, "veth-%.*s", IFNAME_LEN - 6, pod);
	/* never end an interface name on '.' or '-' (cut names) */
	for (size_t n = strlen(buf); n > 5 && (buf[n - 1] == '.' || buf[n - 1] == '-'); n--)
		buf[n - 1] = '\0';
}

static int plan_compute(struct plan_run *r)
{
	struct error err = {0};
	unsigned n_node = 0;
	int q;

	if (r->o.config_path) {
		q = agent_config_load(r->o.config_path, &r->cfg, &err);
		if (q < 0)
			return fail("%s", err.msg);
		if (!r->cfg.from_file)
			return fail("config %s: %s", r->o.config_path, strerror(ENOENT));
	} else {
		agent_config_defaults(&r->cfg);
	}
	caps_for(r->o.kernel_ci, &r->caps);

	q = pods_load(r->o.pods_path, &r->doc, &r->pods);
	if (q != EXIT_OK)
		return q;
	r->res = calloc(r->pods.n ? r->pods.n : 1, sizeof(*r->res));
	r->node_pods = calloc(r->pods.n ? r->pods.n : 1, sizeof(*r->node_pods));
	if (!r->res || !r->node_pods) {
		return fail("out of memory");
	}
	for (size_t i = 0; i < r->pods.n; i++) {
		struct ctl_pod *p = &r->pods.v[i];
		struct pod_result *pr;
		struct node_pod *np;

		if (p->skip)
			continue;
		pr = &r->res[r->n_res++];
		pr->pod = p;
		err = (struct error){0};
		if (workload_from_annotations(p->annotations, &pr->w, &err) < 0) {
			return fail("pod %s/%s: %s", p->namespace_, p->name, err.msg);
		}
		pr->profile = profile_resolve(&r->cfg.profiles, &pr->w, pr->profile_warn, sizeof(pr->profile_warn));
		str_copy(pr->ifs.pod_ifname, sizeof(pr->ifs.pod_ifname), "eth0");
		host_ifname(p->name, pr->ifs.host_ifname, sizeof(pr->ifs.host_ifname));
		q = plan_pod(&pr->w, pr->profile, &pr->ifs, &r->caps, &pr->plan);
		if (q < 0) {
			return fail("pod %s/%s: cannot plan: %s", p->namespace_, p->name, strerror(-q));
		}
		np = &r->node_pods[n_node++];
		str_copy(np->namespace_, sizeof(np->namespace_), p->namespace_);
		str_copy(np->name, sizeof(np->name), p->name);
		str_copy(np->uid, sizeof(np->uid), p->uid);
		np->class = pr->w.class;
		str_copy(np->profile, sizeof(np->profile), pr->profile->name);
		np->ce_marking = pr->profile->ce_threshold_us > 0;
		np->n_ips = p->n_ips;
		memcpy(np->ips, p->ips, sizeof(np->ips));
		np->gpus = p->gpus;
		np->egress_bps = pr->w.egress_bps;
	}

	/* the uplink */
	if (r->o.uplink)
		str_copy(r->up.ifname, sizeof(r->up.ifname), r->o.uplink);
	else if (r->cfg.node.uplink[0] && !streq(r->cfg.node.uplink, NODE_UPLINK_AUTO))
		str_copy(r->up.ifname, sizeof(r->up.ifname), r->cfg.node.uplink);
	else
		str_copy(r->up.ifname, sizeof(r->up.ifname), "eth0");
	r->up.speed_bps = r->o.uplink_rate_bps;
	r->up.is_virtual = r->o.link == LINK_VIRTUAL || r->o.uplink_rate_bps == 0;
	r->up.tx_queues = 1;
	r->up.mtu = 1500;
	{
		struct node_counts counts;
		enum node_mode mode;

		node_pods_count(r->node_pods, n_node, &counts);
		mode = node_mode_desired(&counts);
		err = (struct error){0};
		q = node_plan(r->node_pods, n_node, &r->cfg.node, &r->up, &r->caps, mode, NULL, &r->np, &r->info, &err);
		if (q < 0)
			return fail("node plan: %s", err.msg);
	}
	return EXIT_OK;
}

/* ---- plan: output ---- */

/* The renderer names the uplink "uplink"; print the interface's name instead.
 * Replaces every "dev uplink" word in text (malloc'd result, NULL on ENOMEM). */
static char *uplink_dev_rename(const char *text, const char *ifname)
{
	static const char pat[] = "dev uplink";
	size_t n = 0, plen = strlen(pat), ilen = strlen(ifname);
	const char *p;
	char *out, *o;

	for (p = text; (p = strstr(p, pat)); p += plen)
		n++;
	out = malloc(strlen(text) + n * (ilen + 4) + 1);
	if (!out)
		return NULL;
	for (o = out, p = text; *p;) {
		const char *m = strstr(p, pat);
		bool word = m && (m[plen] == ' ' || m[plen] == '\n' || m[plen] == '\0' || m[plen] == '"');

		if (!m) {
			size_t rest = strlen(p);
			memcpy(o, p, rest);
			o += rest;
			break;
		}
		memcpy(o, p, (size_t)(m - p));
		o += m - p;
		if (word) {
			memcpy(o, "dev ", 4);
			memcpy(o + 4, ifname, ilen);
			o += 4 + ilen;
		} else {
			memcpy(o, pat, plen);
			o += plen;
		}
		p = m + plen;
	}
	*o = '\0';
	return out;
}

/* Render the node plan in fmt, in PLAN_ITEMS_MAX windows. Text and tc:
 * appended to stdout; JSON: items appended to arr. */
static int node_render(const struct plan_run *r, enum plan_format fmt, const char *indent, cJSON *arr)
{
	_cleanup_free_ struct plan *win = malloc(sizeof(*win));
	unsigned start = 0, k;

	if (!win)
		return -ENOMEM;
	while ((k = node_plan_slice(&r->np, start, win)) > 0) {
		_cleanup_free_ char *text = NULL, *renamed = NULL;
		int q = plan_render(win, NULL, NULL, fmt, false, &text);

		if (q < 0)
			return q;
		renamed = uplink_dev_rename(text, r->up.ifname);
		if (!renamed)
			return -ENOMEM;
		if (fmt == PLAN_FMT_JSON) {
			_cleanup_json_ cJSON *items = cJSON_Parse(renamed);
			cJSON *it;

			if (!items)
				return -ENOMEM;
			while ((it = cJSON_DetachItemFromArray(items, 0))) {
				const cJSON *dev = cJSON_GetObjectItemCaseSensitive(it, "dev");

				if (!cJSON_IsString(dev) || !streq(dev->valuestring, "ifb"))
					cJSON_ReplaceItemInObjectCaseSensitive(it, "ifname",
					                                       cJSON_CreateString(r->up.ifname));
				if (!cJSON_AddItemToArray(arr, it)) {
					cJSON_Delete(it);
					return -ENOMEM;
				}
			}
		} else {
			print_indented(renamed, indent);
		}
		start += k;
	}
	return 0;
}

static const char *rate_source(const struct plan_run *r)
{
	if (r->info.rate_configured)
		return "uplinkRate in the config";
	if (r->info.speed_untrusted)
		return "--uplink-rate is a virtual link's speed, not a rate";
	if (r->o.uplink_rate_bps)
		return "--uplink-rate";
	return "unknown";
}

static void share_text(const struct plan_run *r, char *buf, size_t size)
{
	static const enum workload_class order[] = {CLASS_INFERENCE, CLASS_DEFAULT, CLASS_TRAINING};
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(order); i++) {
		enum workload_class c = order[i];
		unsigned pm = r->info.shares.share_pm[c];
		char rate[32] = "", ceil[32] = "";
		int n;

		if (!pm)
			continue;
		if (r->info.class_rate_bps[c])
			tc_rate_format(r->info.class_rate_bps[c], rate, sizeof(rate));
		if (r->info.class_ceil_bps[c])
			tc_rate_format(r->info.class_ceil_bps[c], ceil, sizeof(ceil));
		n = snprintf(buf + len, size - len, "%s%s %u.%u%%%s%s%s%s%s", len ? ", " : "", workload_class_name(c),
		             pm / 10, pm % 10, rate[0] ? " (rate " : "", rate, ceil[0] ? " ceil " : "", ceil,
		             rate[0] ? ")" : "");
		if (n < 0 || (size_t)n >= size - len)
			break;
		len += (size_t)n;
	}
}

static void plan_header_text(const struct plan_run *r)
{
	printf("# aiqosctl plan: dry run, nothing is applied\n");
	printf("# pods: %s; config: %s; kernel: %s\n", r->o.pods_path, r->o.config_path ? r->o.config_path : "defaults",
	       r->o.kernel_ci ? "ci (no fq, fq_codel, prio, pedit)" : "full");
}

static int plan_print_text(const struct plan_run *r)
{
	const struct node_plan_info *in = &r->info;
	char rate[32], shaped[32], shares[384];

	plan_header_text(r);
	for (size_t i = 0; i < r->n_res; i++) {
		const struct pod_result *pr = &r->res[i];
		const struct ctl_pod *p = pr->pod;
		_cleanup_free_ char *text = NULL;

		printf("\npod %s/%s (uid %s)\n", p->namespace_, p->name, p->uid);
		printf("  class %s, profile %s\n", workload_class_name(pr->w.class), pr->profile->name);
		printf("  ips:");
		for (unsigned k = 0; k < p->n_ips; k++)
			printf("%s %s", k ? "," : "", p->ip_text[k]);
		printf("%s\n", p->n_ips ? "" : " none");
		if (pr->w.egress_bps || pr->w.ingress_bps) {
			char e[32] = "-", g[32] = "-";
			if (pr->w.egress_bps)
				tc_rate_format(pr->w.egress_bps, e, sizeof(e));
			if (pr->w.ingress_bps)
				tc_rate_format(pr->w.ingress_bps, g, sizeof(g));
			printf("  bandwidth: egress %s, ingress %s\n", e, g);
		}
		for (unsigned k = 0; k < pr->w.n_warn && k < WORKLOAD_WARN_MAX; k++)
			printf("  warning: %s\n", pr->w.warn[k]);
		if (pr->profile_warn[0])
			printf("  warning: %s\n", pr->profile_warn);
		printf("  interfaces: %s in the pod, %s on the host\n", pr->ifs.pod_ifname, pr->ifs.host_ifname);
		if (plan_render(&pr->plan, &pr->ifs, NULL, PLAN_FMT_TEXT, false, &text) < 0)
			return fail("out of memory");
		if (pr->plan.n == 0)
			printf("  plan: nothing to do (class default, no limits)\n");
		print_indented(text, "  ");
	}
	for (size_t i = 0; i < r->pods.n; i++)
		if (r->pods.v[i].skip)
			printf("\nskipped %s/%s: %s\n", r->pods.v[i].namespace_, r->pods.v[i].name, r->pods.v[i].skip);

	printf("\nnode\n");
	printf("  pods: %u (inference %u, training %u, default %u)\n", in->counts.n_pods, in->counts.n[CLASS_INFERENCE],
	       in->counts.n[CLASS_TRAINING], in->counts.n[CLASS_DEFAULT]);
	printf("  mode: %s\n", node_mode_name(in->mode));
	rate_format((double)in->rate_bps, rate, sizeof(rate));
	printf("  uplink: %s, %s, rate %s (%s)\n", r->up.ifname, r->up.is_virtual ? "virtual link" : "NIC", rate,
	       rate_source(r));
	rate_format((double)in->shaped_bps, shaped, sizeof(shaped));
	if (in->shape == SHAPE_HTB)
		printf("  shape: htb at %s\n", shaped);
	else
		printf("  shape: %s\n", node_shape_name(in->shape));
	share_text(r, shares, sizeof(shares));
	if (shares[0])
		printf("  shares (weights by %s): %s\n", node_weight_basis_name(in->shares.basis), shares);
	if (in->mode == MODE_MIXED && in->shares.share_pm[CLASS_TRAINING]) {
		unsigned pm = in->shares.share_pm[CLASS_TRAINING];

		printf("  training floor: %u.%u%% (trainingFloor %g moved by the %s); inference first (prio 0), "
		       "training borrows what it leaves\n",
		       pm / 10, pm % 10, r->cfg.node.training_floor, node_weight_basis_name(in->shares.basis));
	}
	if (in->down.planned) {
		char dr[32], ds[32];

		rate_format((double)in->down.rate_bps, dr, sizeof(dr));
		rate_format((double)in->down.shaped_bps, ds, sizeof(ds));
		printf("  download: %s ingress redirected to %s, htb at %s (downlinkRate %s), filters on the "
		       "destination: %u\n",
		       r->up.ifname, PLAN_IFB_NAME, ds, dr, in->down.n_filters);
	}
	if (in->ce_threshold_us) {
		char t[32];
		tc_time_format(in->ce_threshold_us, t, sizeof(t));
		printf("  ce threshold on training queues: %s\n", t);
	}
	printf("  classify: %s, filters: %u\n", node_classify_name(r->cfg.node.classify), in->n_filters);
	for (unsigned k = 0; k < in->n_warn && k < NODE_WARN_MAX; k++)
		printf("  warning: %s\n", in->warn[k]);
	if (r->np.n == 0)
		printf("  plan: nothing on the uplink (the original qdisc stays)\n");
	else if (node_render(r, PLAN_FMT_TEXT, "  ", NULL) < 0)
		return fail("out of memory");
	return EXIT_OK;
}

static int plan_print_tc(const struct plan_run *r)
{
	const struct node_plan_info *in = &r->info;

	printf("#!/bin/sh\n");
	printf("# aiqosctl plan: dry run (pods: %s; config: %s; kernel: %s)\n", r->o.pods_path,
	       r->o.config_path ? r->o.config_path : "defaults", r->o.kernel_ci ? "ci" : "full");
	printf("# Each command line tries the best alternative first ('||' falls back).\n");
	printf("# Pod-side commands run in the pod's network namespace, here named after the pod.\n");
	for (size_t i = 0; i < r->n_res; i++) {
		const struct pod_result *pr = &r->res[i];
		_cleanup_free_ char *text = NULL;

		printf("\n# pod %s/%s: class %s, profile %s\n", pr->pod->namespace_, pr->pod->name,
		       workload_class_name(pr->w.class), pr->profile->name);
		if (plan_render(&pr->plan, &pr->ifs, pr->pod->name, PLAN_FMT_TC, false, &text) < 0)
			return fail("out of memory");
		fputs(text, stdout);
	}
	for (size_t i = 0; i < r->pods.n; i++)
		if (r->pods.v[i].skip)
			printf("\n# skipped %s/%s: %s\n", r->pods.v[i].namespace_, r->pods.v[i].name,
			       r->pods.v[i].skip);
	printf("\n# node: mode %s, uplink %s, shape %s\n", node_mode_name(in->mode), r->up.ifname,
	       node_shape_name(in->shape));
	for (unsigned k = 0; k < in->n_warn && k < NODE_WARN_MAX; k++)
		printf("# warning: %s\n", in->warn[k]);
	if (r->np.n == 0)
		printf("# nothing on the uplink (the original qdisc stays)\n");
	else if (node_render(r, PLAN_FMT_TC, "", NULL) < 0)
		return fail("out of memory");
	return EXIT_OK;
}

static cJSON *json_strings(const char *const *v, unsigned n)
{
	cJSON *a = cJSON_CreateArray();

	for (unsigned i = 0; a && i < n; i++)
		if (!cJSON_AddItemToArray(a, cJSON_CreateString(v[i]))) {
			cJSON_Delete(a);
			return NULL;
		}
	return a;
}

static int plan_print_json(const struct plan_run *r)
{
	const struct node_plan_info *in = &r->info;
	_cleanup_json_ cJSON *root = cJSON_CreateObject();
	_cleanup_free_ char *out = NULL;
	cJSON *pods, *skipped, *node, *up, *shares, *items, *o;
	bool ok = root != NULL;

	ok = ok && cJSON_AddTrueToObject(root, "dryRun") && cJSON_AddStringToObject(root, "podsFile", r->o.pods_path) &&
	     (r->o.config_path ? cJSON_AddStringToObject(root, "config", r->o.config_path) != NULL
	                       : cJSON_AddNullToObject(root, "config") != NULL) &&
	     cJSON_AddStringToObject(root, "kernel", r->o.kernel_ci ? "ci" : "full");
	pods = ok ? cJSON_AddArrayToObject(root, "pods") : NULL;
	ok = ok && pods;
	for (size_t i = 0; ok && i < r->n_res; i++) {
		const struct pod_result *pr = &r->res[i];
		const struct ctl_pod *p = pr->pod;
		const char *ips[NODE_POD_IPS_MAX], *warn[WORKLOAD_WARN_MAX + 1];
		_cleanup_free_ char *text = NULL;
		unsigned n_warn = 0;
		cJSON *ifs, *plan;

		for (unsigned k = 0; k < p->n_ips; k++)
			ips[k] = p->ip_text[k];
		for (unsigned k = 0; k < pr->w.n_warn && k < WORKLOAD_WARN_MAX; k++)
			warn[n_warn++] = pr->w.warn[k];
		if (pr->profile_warn[0])
			warn[n_warn++] = pr->profile_warn;
		o = cJSON_CreateObject();
		ok = o && cJSON_AddItemToArray(pods, o);
		if (!ok) {
			cJSON_Delete(o);
			break;
		}
		ok = cJSON_AddStringToObject(o, "namespace", p->namespace_) &&
		     cJSON_AddStringToObject(o, "name", p->name) && cJSON_AddStringToObject(o, "uid", p->uid) &&
		     cJSON_AddStringToObject(o, "class", workload_class_name(pr->w.class)) &&
		     cJSON_AddStringToObject(o, "profile", pr->profile->name) &&
		     cJSON_AddItemToObject(o, "ips", json_strings(ips, p->n_ips)) &&
		     cJSON_AddNumberToObject(o, "egressBps", (double)pr->w.egress_bps) &&
		     cJSON_AddNumberToObject(o, "ingressBps", (double)pr->w.ingress_bps) &&
		     cJSON_AddNumberToObject(o, "gpus", p->gpus) &&
		     cJSON_AddItemToObject(o, "warnings", json_strings(warn, n_warn));
		ifs = ok ? cJSON_AddObjectToObject(o, "interfaces") : NULL;
		ok = ifs && cJSON_AddStringToObject(ifs, "pod", pr->ifs.pod_ifname) &&
		     cJSON_AddStringToObject(ifs, "host", pr->ifs.host_ifname);
		ok = ok && plan_render(&pr->plan, &pr->ifs, NULL, PLAN_FMT_JSON, false, &text) >= 0;
		plan = ok ? cJSON_Parse(text) : NULL;
		ok = plan && cJSON_AddItemToObject(o, "plan", plan);
		if (!ok && plan)
			cJSON_Delete(plan);
	}
	skipped = ok ? cJSON_AddArrayToObject(root, "skipped") : NULL;
	ok = ok && skipped;
	for (size_t i = 0; ok && i < r->pods.n; i++) {
		const struct ctl_pod *p = &r->pods.v[i];

		if (!p->skip)
			continue;
		o = cJSON_CreateObject();
		ok = o && cJSON_AddItemToArray(skipped, o);
		if (!ok) {
			cJSON_Delete(o);
			break;
		}
		ok = cJSON_AddStringToObject(o, "namespace", p->namespace_) &&
		     cJSON_AddStringToObject(o, "name", p->name) && cJSON_AddStringToObject(o, "reason", p->skip);
	}
	node = ok ? cJSON_AddObjectToObject(root, "node") : NULL;
	ok = ok && node && cJSON_AddStringToObject(node, "mode", node_mode_name(in->mode));
	o = ok ? cJSON_AddObjectToObject(node, "pods") : NULL;
	ok = ok && o && cJSON_AddNumberToObject(o, "total", in->counts.n_pods) &&
	     cJSON_AddNumberToObject(o, "inference", in->counts.n[CLASS_INFERENCE]) &&
	     cJSON_AddNumberToObject(o, "training", in->counts.n[CLASS_TRAINING]) &&
	     cJSON_AddNumberToObject(o, "default", in->counts.n[CLASS_DEFAULT]);
	up = ok ? cJSON_AddObjectToObject(node, "uplink") : NULL;
	ok = ok && up && cJSON_AddStringToObject(up, "ifname", r->up.ifname) &&
	     cJSON_AddStringToObject(up, "link", r->up.is_virtual ? "virtual" : "nic") &&
	     cJSON_AddNumberToObject(up, "rateBps", (double)in->rate_bps) &&
	     cJSON_AddStringToObject(up, "rateSource", rate_source(r)) &&
	     cJSON_AddStringToObject(up, "shape", node_shape_name(in->shape)) &&
	     cJSON_AddNumberToObject(up, "shapedBps", (double)in->shaped_bps) &&
	     cJSON_AddStringToObject(up, "classify", node_classify_name(r->cfg.node.classify)) &&
	     cJSON_AddStringToObject(up, "weights", node_weight_basis_name(in->shares.basis)) &&
	     cJSON_AddNumberToObject(up, "ceThresholdUs", in->ce_threshold_us) &&
	     cJSON_AddNumberToObject(up, "filters", in->n_filters);
	shares = ok ? cJSON_AddObjectToObject(up, "shares") : NULL;
	ok = ok && shares;
	for (int c = 0; ok && c < _CLASS_MAX; c++)
		if (in->shares.share_pm[c])
			ok = cJSON_AddNumberToObject(shares, workload_class_name((enum workload_class)c),
			                             in->shares.share_pm[c] / 1000.0) != NULL;
	o = ok ? cJSON_AddObjectToObject(up, "classes") : NULL;
	ok = ok && o;
	for (int c = 0; ok && c < _CLASS_MAX; c++)
		if (in->class_rate_bps[c]) {
			cJSON *k = cJSON_AddObjectToObject(o, workload_class_name((enum workload_class)c));

			ok = k && cJSON_AddNumberToObject(k, "rateBps", (double)in->class_rate_bps[c]) &&
			     cJSON_AddNumberToObject(k, "ceilBps", (double)in->class_ceil_bps[c]);
		}
	if (ok && in->down.planned) {
		cJSON *dl = cJSON_AddObjectToObject(node, "downlink");

		ok = dl && cJSON_AddStringToObject(dl, "ifb", PLAN_IFB_NAME) &&
		     cJSON_AddNumberToObject(dl, "rateBps", (double)in->down.rate_bps) &&
		     cJSON_AddNumberToObject(dl, "shapedBps", (double)in->down.shaped_bps) &&
		     cJSON_AddNumberToObject(dl, "filters", in->down.n_filters);
	}
	ok = ok && cJSON_AddNumberToObject(up, "trainingFloor",
	                                   in->mode == MODE_MIXED ? in->shares.share_pm[CLASS_TRAINING] / 1000.0 : 0);
	if (ok) {
		const char *warn[NODE_WARN_MAX];
		unsigned n = 0;

		for (unsigned k = 0; k < in->n_warn && k < NODE_WARN_MAX; k++)
			warn[n++] = in->warn[k];
		ok = cJSON_AddItemToObject(up, "warnings", json_strings(warn, n));
	}
	items = ok ? cJSON_AddArrayToObject(node, "plan") : NULL;
	ok = ok && items && node_render(r, PLAN_FMT_JSON, NULL, items) >= 0;
	out = ok ? cJSON_Print(root) : NULL;
	if (!out)
		return fail("out of memory");
	printf("%s\n", out);
	return EXIT_OK;
}

static int cmd_plan(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"pods", required_argument, NULL, 'p'},
	        {"config", required_argument, NULL, 'c'},
	        {"format", required_argument, NULL, 'f'},
	        {"uplink-rate", required_argument, NULL, 'r'},
	        {"uplink", required_argument, NULL, 'u'},
	        {"link", required_argument, NULL, 'l'},
	        {"kernel", required_argument, NULL, 'k'},
	        {"help", no_argument, NULL, 'h'},
	        {0},
	};
	struct plan_run r;
	struct error err = {0};
	int c, q;

	memset(&r, 0, sizeof(r));
	r.o.fmt = PLAN_FMT_TEXT;
	optind = 0; /* glibc: re-initialise (main parsed with "+") */
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			r.o.pods_path = optarg;
			break;
		case 'c':
			r.o.config_path = optarg;
			break;
		case 'f':
			if (streq(optarg, "text"))
				r.o.fmt = PLAN_FMT_TEXT;
			else if (streq(optarg, "tc"))
				r.o.fmt = PLAN_FMT_TC;
			else if (streq(optarg, "json"))
				r.o.fmt = PLAN_FMT_JSON;
			else
				return usage_error(usage_plan, "plan: --format '%s': expected text, tc or json",
				                   optarg);
			break;
		case 'r':
			if (agent_rate_parse_bps(optarg, &r.o.uplink_rate_bps, &err) < 0)
				return usage_error(usage_plan, "plan: --uplink-rate: %s", err.msg);
			break;
		case 'u': {
			bool ok =
			        optarg[0] && strlen(optarg) < IFNAME_LEN && !streq(optarg, ".") && !streq(optarg, "..");
			for (const char *p = optarg; ok && *p; p++)
				ok = *p > ' ' && *p < 0x7f && *p != '/' && *p != ':';
			if (!ok)
				return usage_error(usage_plan, "plan: --uplink '%s' is not an interface name", optarg);
			r.o.uplink = optarg;
			break;
		}
		case 'l':
			if (streq(optarg, "virtual"))
				r.o.link = LINK_VIRTUAL;
			else if (streq(optarg, "nic"))
				r.o.link = LINK_NIC;
			else
				return usage_error(usage_plan, "plan: --link '%s': expected virtual or nic", optarg);
			break;
		case 'k':
			if (streq(optarg, "full"))
				r.o.kernel_ci = false;
			else if (streq(optarg, "ci"))
				r.o.kernel_ci = true;
			else
				return usage_error(usage_plan, "plan: --kernel '%s': expected full or ci", optarg);
			break;
		case 'h':
			fputs(usage_plan, stdout);
			return EXIT_OK;
		default:
			return bad_option(usage_plan, "plan: ", c, argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error(usage_plan, "plan: unexpected argument '%s'", argv[optind]);
	if (!r.o.pods_path)
		return usage_error(usage_plan, "plan: --pods FILE is required");
	q = plan_compute(&r);
	if (q == EXIT_OK) {
		switch (r.o.fmt) {
		case PLAN_FMT_TC:
			q = plan_print_tc(&r);
			break;
		case PLAN_FMT_JSON:
			q = plan_print_json(&r);
			break;
		default:
			q = plan_print_text(&r);
		}
	}
	plan_run_done(&r);
	return q;
}

/* ---- main ---- */

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"socket", required_argument, NULL, 's'},
	        {"help", no_argument, NULL, 'h'},
	        {"version", no_argument, NULL, 'V'},
	        {0},
	};
	const char *sock = PROTO_DEFAULT_SOCKET, *cmd;
	int c, q;

	opterr = 0; /* bad_option() says it */
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (!optarg[0])
				return usage_error(usage_main, "--socket: empty path");
			sock = optarg;
			break;
		case 'h':
			fputs(usage_main, stdout);
			return EXIT_OK;
		case 'V':
			printf("%s %s\n", PROG, AIQOS_VERSION);
			return EXIT_OK;
		default:
			return bad_option(usage_main, "", c, argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return usage_error(usage_main, "which command? (status, explain, plan, doctor)");
	cmd = argv[optind];
	argc -= optind;
	argv += optind;
	if (streq(cmd, "status"))
		q = cmd_status(argc, argv, sock);
	else if (streq(cmd, "explain"))
		q = cmd_explain(argc, argv, sock);
	else if (streq(cmd, "plan"))
		q = cmd_plan(argc, argv);
	else if (streq(cmd, "doctor"))
		q = ctl_doctor(argc, argv);
	else if (streq(cmd, "help"))
		q = (fputs(usage_main, stdout), EXIT_OK);
	else
		return usage_error(usage_main, "unknown command '%s'", cmd);
	if (fflush(stdout) != 0 || ferror(stdout))
		return fail("cannot write the output: %s", strerror(errno));
	return q;
}
