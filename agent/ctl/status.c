/* status.c — `aiqosctl status`: the running agent's view of the node (mode,
 * uplink, every pod with its effective tuning), as a table or as JSON. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <time.h>

#include "ctl/ctl.h"
#include "proto.h"

#define DEGRADED_SHORT_MAX 48

static const char usage_status[] = "Usage: aiqosctl [--socket PATH] status [-v] [-o text|json|yaml]\n"
                                   "\n"
                                   "Ask the running agent for the node's state: the API connection, node mode,\n"
                                   "uplink tuning and every pod with its class, profile, status and effective\n"
                                   "tuning. Brief by default; -v adds the uplink's tc objects and fallbacks.\n"
                                   "\n"
                                   "  -v, --verbose      the uplink's effective tc objects and each fallback\n"
                                   "  -o, --output F     text (default), json or yaml (the agent's document);\n"
                                   "                     --json = -o json\n"
                                   "  -h, --help         this help\n"
                                   "\n"
                                   "Exit status: 0 the agent is connected to the API and ready; 1 it is not (or\n"
                                   "cannot be reached); 2 usage error.\n";

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

static bool verbose;

static void print_uplink(const cJSON *up)
{
	const cJSON *shares = jobj(up, "shares"), *s;
	char rate[32];
	double v = 0;

	jrate(up, "rateBps", rate, sizeof(rate));
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
	if (jobj(up, "bands"))
		printf("  bands: %s\n", jstr_or(jobj(up, "bands"), "text", "-"));
	if (jobj(up, "classes") && jobj(up, "classes")->child) {
		const cJSON *k;

		printf("  guarantees:");
		json_for_each(k, jobj(up, "classes"))
		{
			char r1[32], r2[32];

			jrate(k, "rateBps", r1, sizeof(r1));
			jrate(k, "ceilBps", r2, sizeof(r2));
			printf(" %s rate %s ceil %s;", k->string, r1, r2);
		}
		printf("\n");
	}
	if (jstr(up, "shaperIfb") && jobj(up, "gate")) {
		/* the gated HTB (README "Line rate") */
		const cJSON *g = jobj(up, "gate");
		char r1[32];

		jrate(g, "thresholdBps", r1, sizeof(r1));
		printf("  upload: HTB on %s behind a gate at %s, %s\n", jstr_or(up, "shaperIfb", "-"), r1,
		       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(g, "redirecting")) ? "redirecting now"
		                                                                        : "not redirecting now");
	}
	if (jobj(up, "downlink") && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(jobj(up, "downlink"), "shaped"))) {
		const cJSON *dl = jobj(up, "downlink");
		char r1[32], r2[32];
		double win = 0;

		jrate(dl, "rateBps", r1, sizeof(r1));
		jrate(dl, "shapedBps", r2, sizeof(r2));
		printf("download: %s ingress -> %s  rate %s  shaped %s\n", jstr_or(up, "ifname", "-"),
		       jstr_or(dl, "ifb", "-"), r1, r2);
		if (jnum(dl, "trainingRcvWindowBytes", &win) && win > 0)
			printf("  training receive window (tcp_rmem max): %.0f bytes\n", win);
		if (jnum(dl, "inferenceRcvWindowBytes", &win) && win > 0)
			printf("  inference receive window (tcp_rmem max, the bands are on): %.0f bytes\n", win);
		if (streq(jstr_or(dl, "fedAt", "uplink"), "pods"))
			printf("  fed at the pods' interfaces (%.0f): received packets do not reach the uplink's "
			       "ingress "
			       "hook (the DownloadBypassed Event says why)\n",
			       jnum(dl, "podInterfaces", &win) ? win : 0);
	} else if (jobj(jobj(up, "downlink"), "reach")) {
		/* planned, but the received packets do not reach it (node/reach.h) */
		const cJSON *re = jobj(jobj(up, "downlink"), "reach");
		double seen = 0, rx = 0;

		jnum(re, "reachedPackets", &seen);
		jnum(re, "receivedPackets", &rx);
		printf("download: NOT SHAPED: %.0f of the %.0f packets %s received reached aiqos's download classifier "
		       "(another program ends the ingress hook first; aiqos doctor, and the DownloadBypassed Event)\n",
		       seen, rx, jstr_or(up, "ifname", "-"));
	}
	if (verbose) {
		print_effective_degraded(up, "  ");
	} else {
		int n_eff = jarr(up, "effective") ? cJSON_GetArraySize(jarr(up, "effective")) : 0;
		int n_deg = jarr(up, "degraded") ? cJSON_GetArraySize(jarr(up, "degraded")) : 0;

		if (n_eff || n_deg)
			printf("  tc objects: %d in effect, %d fell back (-v lists them)\n", n_eff, n_deg);
	}
	if (jstr(up, "classifyWhy"))
		printf("  classify: %s, in effect %s: %s\n", jstr_or(up, "classify", "-"),
		       jstr_or(up, "classifyEffective", "-"), jstr(up, "classifyWhy"));
}

/* datapath: vxlan (flannel.1 vxlan port 8472 on eth0, 50 bytes), pod CIDRs ..., CNI Flannel; uplinkOverhead 74 (auto)
 */
static void print_datapath(const cJSON *dp)
{
	const cJSON *t, *c;
	double v = 0;
	int n = 0;

	printf("datapath: encapsulation %s", jstr_or(dp, "encapsulation", "-"));
	json_for_each(t, jarr(dp, "tunnels"))
	{
		double port = 0, bytes = 0;

		jnum(t, "port", &port);
		jnum(t, "headerBytes", &bytes);
		printf("%s%s %s", n++ ? ", " : " (", jstr_or(t, "device", "?"), jstr_or(t, "kind", "?"));
		if (port > 0)
			printf(" port %.0f", port);
		if (jstr(t, "link") && jstr(t, "link")[0])
			printf(" on %s", jstr(t, "link"));
		printf(" over %s, %.0f bytes%s%s", jstr_or(t, "outer", "ipv4"), bytes,
		       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "viaUplink")) ? ", via the uplink" : "",
		       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "up")) ? "" : ", down");
	}
	printf("%s\n", n ? ")" : "");
	n = 0;
	printf("  pod CIDRs:");
	json_for_each(c, jarr(dp, "podCIDRs"))
	{
		printf(" %s", cJSON_GetStringValue(c) ? cJSON_GetStringValue(c) : "?");
		n++;
	}
	if (n && jstr(dp, "podCIDRsFrom") && jstr(dp, "podCIDRsFrom")[0])
		printf(" (from %s)", jstr(dp, "podCIDRsFrom"));
	printf("%s  CNI: %s  uplinkOverhead: %.0f bytes (%s)\n", n ? "" : " unknown",
	       jstr(dp, "cni") && jstr(dp, "cni")[0] ? jstr(dp, "cni") : "unknown",
	       jnum(dp, "uplinkOverhead", &v) ? v : 0, jstr_or(dp, "uplinkOverheadFrom", "-"));
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
	printf("api: connected %s, ready %s%s%s\n", jbool_word(st, "apiConnected"), jbool_word(st, "ready"),
	       jstr(st, "apiError") ? "; error: " : "", jstr_or(st, "apiError", ""));
	if (cfg) {
		const char *e = jstr(cfg, "error");
		time_format(jnum(cfg, "loadedAt", &v) ? v : 0, when, sizeof(when));
		printf("config: %s (loaded %s)%s%s\n", jstr_or(cfg, "path", "defaults"), when, e ? "; error: " : "",
		       e ? e : "");
	}
	if (jobj(st, "uplink"))
		print_uplink(jobj(st, "uplink"));
	if (jobj(st, "datapath"))
		print_datapath(jobj(st, "datapath"));
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

int cmd_status(int argc, char **argv, const char *sock)
{
	struct ctl_cmd cmd = {.name = "status", .usage = usage_status, .verbose_ok = true};
	struct proto_request r = {.op = PROTO_OP_STATUS};
	static const struct option opts[] = {
	        {"json", no_argument, NULL, 'j'},
	        {"output", required_argument, NULL, 'o'},
	        {"verbose", no_argument, NULL, 'v'},
	        {"help", no_argument, NULL, 'h'},
	        {0},
	};
	_cleanup_json_ cJSON *resp = NULL;
	_cleanup_free_ char *error = NULL;
	bool connected, ready;
	int q;

	cmd.opts = opts;

	q = ctl_parse_common(&cmd, argc, argv);
	if (q >= 0)
		return q;
	q = ctl_args_max(&cmd, argc, argv, 0);
	if (q == EXIT_OK)
		q = agent_call(sock, &r, &resp);
	if (q != EXIT_OK)
		return q;
	verbose = cmd.verbose;
	connected = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "apiConnected"));
	ready = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "ready"));
	error = jstr(resp, "apiError") ? strdup(jstr(resp, "apiError")) : NULL;
	q = ctl_output(&cmd, resp, status_print);
	if (q == EXIT_OK && !connected)
		q = fail("the agent is not connected to the Kubernetes API%s%s", error ? ": " : "", error ? error : "");
	else if (q == EXIT_OK && !ready)
		q = fail("the agent is not ready (it has no complete list of this node's pods yet)");
	return q;
}
