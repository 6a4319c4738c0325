/* test_agent_watch.c — the watch stream framer: any chunking of a stream gives
 * the same events and errors; oversized, malformed and truncated events are
 * skipped and reported without losing the next ones; memory stays bounded;
 * and a throughput measure of framing + decoding (printed, not asserted). */
#include <cjson/cJSON.h>
#include <time.h>

#include "../../agent/kube/decode.h"
#include "../../agent/kube/watch.h"
#include "t.h"

/* ---- a transcript of what the framer reports, one line per callback ---- */

struct rec {
	FILE *out;
	char *buf;
	size_t size;
	int stop_after; /* return -ECANCELED after this many events (0 = never) */
	int n_events;
};

static void rec_open(struct rec *r)
{
	memset(r, 0, sizeof(*r));
	r->out = open_memstream(&r->buf, &r->size);
}

static char *rec_close(struct rec *r)
{
	fclose(r->out);
	return r->buf;
}

static int on_event(const cJSON *obj, const char *line, size_t len, void *userdata)
{
	struct rec *r = userdata;
	struct kube_event ev;
	struct error e = {0};

	if (kube_event_decode(obj, &ev, &e) == 0) {
		fprintf(r->out, "%s %s/%s rv=%s code=%d len=%zu\n", kube_event_type_name(ev.type), ev.pod.namespace_,
		        ev.pod.name, ev.resource_version, ev.status.code, len);
		kube_event_done(&ev);
	} else {
		fprintf(r->out, "undecodable: %s\n", e.msg);
	}
	/* the line is the object's text */
	if (len == 0 || line[0] != '{' || line[len - 1] != '}')
		fprintf(r->out, "bad line bounds\n");
	r->n_events++;
	if (r->stop_after && r->n_events >= r->stop_after)
		return -ECANCELED;
	return 0;
}

static void on_error(const struct error *e, void *userdata)
{
	struct rec *r = userdata;
	fprintf(r->out, "error %s: %s\n",
	        e->errnum == EMSGSIZE  ? "EMSGSIZE"
	        : e->errnum == EBADMSG ? "EBADMSG"
	                               : "?",
	        e->msg);
}

/* Feed s cut at the given offsets (ascending), then finish. Returns the
 * transcript (malloc'd). */
static char *run_cuts(const char *s, size_t len, size_t cap, const size_t *cuts, size_t n_cuts)
{
	struct watch_framer *f = NULL;
	struct rec r;
	size_t at = 0;

	rec_open(&r);
	if (watch_framer_new(cap, on_event, on_error, &r, &f, NULL) < 0) {
		fprintf(r.out, "framer_new failed\n");
		return rec_close(&r);
	}
	for (size_t i = 0; i <= n_cuts; i++) {
		size_t next = i < n_cuts ? cuts[i] : len;
		/* an exactly sized heap copy: ASan catches any read past the chunk */
		char *chunk = malloc(next - at ? next - at : 1);
		memcpy(chunk, s + at, next - at);
		if (watch_framer_feed(f, chunk, next - at) < 0)
			fprintf(r.out, "feed failed\n");
		free(chunk);
		if (watch_framer_buffered(f) > (cap ? cap : WATCH_EVENT_MAX_DEFAULT) + 1)
			fprintf(r.out, "buffer over the cap: %zu\n", watch_framer_buffered(f));
		at = next;
	}
	if (watch_framer_finish(f) < 0)
		fprintf(r.out, "finish failed\n");
	watch_framer_free(f);
	return rec_close(&r);
}

static char *run_whole(const char *s, size_t cap)
{
	return run_cuts(s, strlen(s), cap, NULL, 0);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Every single split point, byte by byte, and random chunk sizes (fixed
 * seed): all must reproduce the reference transcript. Returns failures. */
static int check_all_chunkings(const char *s, size_t cap, const char *want)
{
	size_t len = strlen(s);
	size_t *cuts = calloc(len + 1, sizeof(*cuts));
	int bad = 0;

	for (size_t i = 0; i <= len; i++) {
		char *got = run_cuts(s, len, cap, &i, 1);
		if (strcmp(got, want) != 0) {
			if (!bad)
				fprintf(stderr, "  split at %zu:\n%s  want:\n%s", i, got, want);
			bad++;
		}
		free(got);
	}
	for (size_t i = 0; i < len; i++)
		cuts[i] = i + 1;
	{
		char *got = run_cuts(s, len, cap, cuts, len ? len - 1 : 0);
		if (strcmp(got, want) != 0) {
			fprintf(stderr, "  byte by byte:\n%s  want:\n%s", got, want);
			bad++;
		}
		free(got);
	}
	rng_state = 0x9e3779b97f4a7c15ULL;
	for (int round = 0; round < 500; round++) {
		size_t n = 0, at = 0, maxchunk = 1 + rng() % (round % 2 ? 7 : 97);
		while (1) {
			at += 1 + rng() % maxchunk;
			if (at >= len)
				break;
			cuts[n++] = at;
		}
		char *got = run_cuts(s, len, cap, cuts, n);
		if (strcmp(got, want) != 0) {
			if (!bad)
				fprintf(stderr, "  random round %d:\n%s  want:\n%s", round, got, want);
			bad++;
		}
		free(got);
	}
	free(cuts);
	return bad;
}

#define POD_EVENT(type, ns, name, rv)                                                                              \
	"{\"type\":\"" type "\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"" name \
	"\",\"namespace\":\"" ns "\",\"uid\":\"0b0c-" name "\",\"resourceVersion\":\"" rv                          \
	"\",\"annotations\":{\"ai.workload\":\"inference\"}},\"spec\":{\"nodeName\":\"node-1\"},"                  \
	"\"status\":{\"phase\":\"Running\",\"podIP\":\"10.0.0.7\"}}}"

static const char stream_main[] = POD_EVENT("ADDED", "default", "web-0", "101") "\n" POD_EVENT(
        "MODIFIED", "default", "web-0",
        "102") "\n"
               "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":\"150\"}}}"
               "\n" POD_EVENT("ADDED", "ml", "train-7", "151") "\n" POD_EVENT(
                       "DELETED", "default", "web-0", "160") "\n"
                                                             "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\","
                                                             "\"apiVersion\":\"v1\",\"status\":\"Failure\","
                                                             "\"message\":\"too old resource version: 1 "
                                                             "(200)\",\"reason\":\"Expired\",\"code\":410}}\n";

TEST(whole_stream_decodes_in_order)
{
	char *got = run_whole(stream_main, 0);
	CHECK_STR(got, "ADDED default/web-0 rv=101 code=0 len=270\n"
	               "MODIFIED default/web-0 rv=102 code=0 len=273\n"
	               "BOOKMARK / rv=150 code=0 len=80\n"
	               "ADDED ml/train-7 rv=151 code=0 len=269\n"
	               "DELETED default/web-0 rv=160 code=0 len=272\n"
	               "EXPIRED / rv= code=410 len=156\n");
	free(got);
}

TEST(every_split_point_same_sequence)
{
	char *want = run_whole(stream_main, 0);
	CHECK_INT(check_all_chunkings(stream_main, 0, want), 0);
	free(want);
}

TEST(crlf_same_as_lf)
{
	/* the same stream with CRLF line ends, plus blank keep-alive lines */
	char crlf[sizeof(stream_main) * 2 + 16], *o = crlf;
	const char *lf_expected;
	char *want, *got;

	o += snprintf(o, 8, "\r\n");
	for (const char *p = stream_main; *p; p++) {
		if (*p == '\n')
			*o++ = '\r';
		*o++ = *p;
	}
	o += snprintf(o, 8, "  \n\n");
	*o = '\0';
	want = run_whole(stream_main, 0);
	lf_expected = want;
	got = run_whole(crlf, 0);
	CHECK_STR(got, lf_expected);
	CHECK_INT(check_all_chunkings(crlf, 0, lf_expected), 0);
	free(got);
	free(want);
}

/* A stream with a 3000-byte event between two good ones, cap 512. */
static char *make_oversized_stream(bool crlf)
{
	char *big = malloc(4096), *s = malloc(8192);
	size_t n = (size_t)snprintf(big, 4096, "{\"type\":\"MODIFIED\",\"object\":{\"pad\":\"");
	while (n < 2990)
		big[n++] = 'x';
	snprintf(big + n, 4096 - n, "\"}}");
	snprintf(s, 8192, "%s%s%s%s%s%s", POD_EVENT("ADDED", "a", "p1", "1"), crlf ? "\r\n" : "\n", big,
	         crlf ? "\r\n" : "\n", POD_EVENT("ADDED", "a", "p2", "2"), crlf ? "\r\n" : "\n");
	free(big);
	return s;
}

TEST(oversized_event_skipped_next_intact)
{
	for (int crlf = 0; crlf <= 1; crlf++) {
		char *s = make_oversized_stream(crlf);
		char *want = run_whole(s, 512);
		CHECK_STR(want, "ADDED a/p1 rv=1 code=0 len=256\n"
		                "error EMSGSIZE: watch event 2: 2993 bytes exceed the limit of 512 bytes; skipped\n"
		                "ADDED a/p2 rv=2 code=0 len=256\n");
		/* same result whether the big event arrives whole or is skipped piecewise */
		CHECK_INT(check_all_chunkings(s, 512, want), 0);
		free(want);
		free(s);
	}
}

TEST(cap_boundaries)
{
	/* events of exactly cap-1, cap, cap+1, cap+2 bytes, with and without CR */
	const size_t cap = 100;
	for (size_t extra = 0; extra < 4; extra++) {
		for (int cr = 0; cr <= 1; cr++) {
			static const char prefix[] =
			        "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"9\"},\"p\":\"";
			char ev[256], s[1024], want[512];
			size_t n = cap - 1 + extra, k = strlen(prefix);
			char *got;

			memcpy(ev, prefix, k);
			while (k < n - 3)
				ev[k++] = 'y';
			memcpy(ev + k, "\"}}", 4);
			CHECK_INT(strlen(ev), n);
			snprintf(s, sizeof(s),
			         "%s%s\n{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"10\"}}}"
			         "\n",
			         ev, cr ? "\r" : "");
			if (n <= cap)
				snprintf(want, sizeof(want),
				         "BOOKMARK / rv=9 code=0 len=%zu\n"
				         "BOOKMARK / rv=10 code=0 len=66\n",
				         n);
			else
				snprintf(want, sizeof(want),
				         "error EMSGSIZE: watch event 1: %zu bytes exceed the limit of 100 bytes; "
				         "skipped\n"
				         "BOOKMARK / rv=10 code=0 len=66\n",
				         n);
			got = run_whole(s, cap);
			CHECK_STR(got, want);
			free(got);
			CHECK_INT(check_all_chunkings(s, cap, want), 0);
		}
	}
}

TEST(malformed_lines_skipped)
{
	static const struct {
		const char *line;
		const char *error; /* expected transcript line */
	} cases[] = {
	        {"{bad json", "error EBADMSG: watch event 2: invalid JSON at byte 2 of 9 near \"ad json\"; skipped"},
	        {"[1,2]", "error EBADMSG: watch event 2: expected a JSON object, got an array; skipped"},
	        {"\"str\"", "error EBADMSG: watch event 2: expected a JSON object, got a string; skipped"},
	        {"42", "error EBADMSG: watch event 2: expected a JSON object, got a number; skipped"},
	        {"null", "error EBADMSG: watch event 2: expected a JSON object, got null; skipped"},
	        {"{} trailing", "error EBADMSG: watch event 2: trailing data at byte 3 of 11: \"trailing\"; skipped"},
	        {"{\"a\":1}{\"b\":2}",
	         "error EBADMSG: watch event 2: trailing data at byte 7 of 14: \"{\\\"b\\\":2}\"; skipped"},
	        {"{\"a\":\"\x01\xff\"",
	         "error EBADMSG: watch event 2: invalid JSON at byte 8 of 9 near \"\\\"\"; skipped"},
	        {"{\"type\":\"ADDED\",\"object\":",
	         "error EBADMSG: watch event 2: invalid JSON at byte 24 of 25 near \":\"; skipped"},
	        /* deep nesting: cJSON's nesting limit refuses it instead of recursing away */
	        {NULL, "error EBADMSG: watch event 2: invalid JSON at byte 1000 of 3000 near "
	               "\"[[[[[[[[[[[[[[[[[[[[[[[[...\"; skipped"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char s[8192], want[1024], *got;
		char deep[3001];
		const char *line = cases[i].line;

		if (!line) {
			memset(deep, '[', 3000);
			deep[3000] = '\0';
			line = deep;
		}
		snprintf(s, sizeof(s), "%s\n%s\n%s\n", POD_EVENT("ADDED", "a", "p1", "1"), line,
		         POD_EVENT("ADDED", "a", "p2", "2"));
		snprintf(want, sizeof(want), "ADDED a/p1 rv=1 code=0 len=256\n%s\nADDED a/p2 rv=2 code=0 len=256\n",
		         cases[i].error);
		got = run_whole(s, 0);
		CHECK_STR(got, want);
		free(got);
	}
}

TEST(nul_byte_in_line)
{
	char s[1024];
	size_t n = (size_t)snprintf(s, sizeof(s), "{\"type\":\"ADDED\"X}\n%s\n", POD_EVENT("ADDED", "a", "p2", "2"));
	char *got;

	s[15] = '\0';
	got = run_cuts(s, n, 0, NULL, 0);
	CHECK_STR(got, "error EBADMSG: watch event 1: NUL byte at byte 15 of 17; skipped\n"
	               "ADDED a/p2 rv=2 code=0 len=256\n");
	free(got);
}

TEST(no_newline_at_end)
{
	static const struct {
		const char *tail;
		size_t cap;
		const char *want;
	} cases[] = {
	        /* a complete last object without newline is still delivered */
	        {"{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"7\"}}}", 0,
	         "BOOKMARK / rv=7 code=0 len=65\n"},
	        /* the connection dropped mid-event */
	        {"{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"na", 0,
	         "error EBADMSG: watch event 2: invalid JSON at byte 42 of 44 near \"na\" (at end of stream, no "
	         "newline); "
	         "skipped\n"},
	        /* whitespace only */
	        {"  \r", 0, ""},
	        /* dropped inside an oversized event */
	        {"{\"type\":\"MODIFIED\",\"object\":{\"pad\":"
	         "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	         128,
	         "error EMSGSIZE: watch event 2: stream ended inside an event of 205+ bytes, over the limit of 128 "
	         "bytes; "
	         "skipped\n"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char s[1024], want[1024], *got;
		snprintf(s, sizeof(s),
		         "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"6\"}}}\n%s",
		         cases[i].tail);
		snprintf(want, sizeof(want), "BOOKMARK / rv=6 code=0 len=65\n%s", cases[i].want);
		got = run_whole(s, cases[i].cap);
		CHECK_STR(got, want);
		free(got);
		if (strlen(s) < 400)
			CHECK_INT(check_all_chunkings(s, cases[i].cap, want), 0);
	}
}

TEST(callback_stop_and_reset)
{
	struct watch_framer *f = NULL;
	struct rec r;
	char *got;

	rec_open(&r);
	r.stop_after = 2;
	CHECK_INT(watch_framer_new(0, on_event, on_error, &r, &f, NULL), 0);
	CHECK_INT(watch_framer_feed(f, stream_main, strlen(stream_main)), -ECANCELED);
	/* reset (a new connection), stream again from the start: no stale bytes */
	r.stop_after = 0;
	watch_framer_reset(f);
	CHECK_INT(watch_framer_feed(f, stream_main, 30), 0);
	CHECK_INT(watch_framer_buffered(f), 30);
	watch_framer_reset(f);
	CHECK_INT(watch_framer_buffered(f), 0);
	CHECK_INT(watch_framer_feed(f, stream_main, strlen(stream_main)), 0);
	CHECK_INT(watch_framer_finish(f), 0);
	CHECK_INT(watch_framer_stats(f)->events, 2 + 6);
	CHECK_INT(watch_framer_stats(f)->malformed, 0);
	watch_framer_free(f);
	got = rec_close(&r);
	CHECK_CONTAINS(got, "MODIFIED default/web-0 rv=102 code=0 len=273\nADDED default/web-0 rv=101");
	CHECK_CONTAINS(got, "EXPIRED / rv= code=410");
	free(got);
}

TEST(new_validates_cap)
{
	static const struct {
		size_t cap;
		int ret;
		const char *msg;
	} cases[] = {
	        {0, 0, ""},
	        {64, 0, ""},
	        {WATCH_EVENT_MAX_LIMIT, 0, ""},
	        {10, -EINVAL, "watch event size limit 10 is out of range [64, 67108864]"},
	        {(size_t)WATCH_EVENT_MAX_LIMIT + 1, -EINVAL,
	         "watch event size limit 67108865 is out of range [64, 67108864]"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct watch_framer *f = NULL;
		struct error e = {0};
		CHECK_INT(watch_framer_new(cases[i].cap, on_event, NULL, NULL, &f, &e), cases[i].ret);
		CHECK_STR(e.msg, cases[i].msg);
		watch_framer_free(f);
	}
	{
		struct watch_framer *f = NULL;
		struct error e = {0};
		CHECK_INT(watch_framer_new(0, NULL, NULL, NULL, &f, &e), -EINVAL);
		CHECK(f == NULL);
	}
}

TEST(memory_bounded_by_cap)
{
	/* a 16 MiB event with no newline for a long time, cap 64 KiB: the buffer
	 * never exceeds the cap, the event is reported once, the next is intact */
	const size_t cap = 64 * 1024;
	_cleanup_watch_framer_ struct watch_framer *f = NULL;
	struct rec r;
	char chunk[4096], *got;
	const char *next = "\n" POD_EVENT("ADDED", "a", "after", "5") "\n";
	size_t max_buffered = 0;

	rec_open(&r);
	CHECK_INT(watch_framer_new(cap, on_event, on_error, &r, &f, NULL), 0);
	memset(chunk, 'z', sizeof(chunk));
	CHECK_INT(watch_framer_feed(f, "{\"type\":\"ADDED\",\"object\":{\"x\":\"", 31), 0);
	for (int i = 0; i < 4096; i++) {
		CHECK_INT(watch_framer_feed(f, chunk, sizeof(chunk)), 0);
		if (watch_framer_buffered(f) > max_buffered)
			max_buffered = watch_framer_buffered(f);
	}
	CHECK(max_buffered <= cap + 1);
	CHECK_INT(watch_framer_buffered(f), 0);
	CHECK_INT(watch_framer_feed(f, next, strlen(next)), 0);
	CHECK_INT(watch_framer_finish(f), 0);
	got = rec_close(&r);
	CHECK_STR(got, "error EMSGSIZE: watch event 1: 16777247 bytes exceed the limit of 65536 bytes; skipped\n"
	               "ADDED a/after rv=5 code=0 len=262\n");
	CHECK_INT(watch_framer_stats(f)->oversized, 1);
	CHECK_INT(watch_framer_stats(f)->events, 1);
	free(got);
}

/* ---- throughput: framing + JSON parse + decode of realistic pod events ---- */

static int bench_event(const cJSON *obj, const char *line, size_t len, void *userdata)
{
	uint64_t *n = userdata;
	struct kube_event ev;

	if (kube_event_decode(obj, &ev, NULL) == 0) {
		if (ev.pod.n_ips == 2 && ev.pod.gpus == 2 && ev.pod.annotations)
			(*n)++;
		kube_event_done(&ev);
	}
	return 0;
}

/* A pod as the API server sends it (managedFields and all), ~4.5 KB. */
static int bench_pod(char *buf, size_t size, unsigned i)
{
	return snprintf(
	        buf, size,
	        "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":"
	        "\"trainer-%u-7d9f8c6b5-x2k4q\",\"generateName\":\"trainer-%u-7d9f8c6b5-\",\"namespace\":\"ml-team-a\","
	        "\"uid\":\"4f0c2a1e-9b7d-4e8a-a1c3-%012u\",\"resourceVersion\":\"%u\",\"creationTimestamp\":"
	        "\"2024-05-01T10:00:00Z\",\"labels\":{\"app\":\"trainer\",\"pod-template-hash\":\"7d9f8c6b5\","
	        "\"team\":\"a\"},\"annotations\":{\"ai.workload\":\"training\",\"ai.workload/profile\":"
	        "\"training-dctcp\",\"kubernetes.io/egress-bandwidth\":\"10G\",\"prometheus.io/scrape\":\"true\","
	        "\"kubectl.kubernetes.io/restartedAt\":\"2024-05-01T09:59:00Z\"},\"ownerReferences\":[{\"apiVersion\":"
	        "\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"trainer-7d9f8c6b5\",\"uid\":"
	        "\"a3b1c2d4-0000-4e8a-a1c3-1234567890ab\",\"controller\":true,\"blockOwnerDeletion\":true}],"
	        "\"managedFields\":[{\"manager\":\"kube-controller-manager\",\"operation\":\"Update\",\"apiVersion\":"
	        "\"v1\",\"time\":\"2024-05-01T10:00:00Z\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:metadata\":{"
	        "\"f:generateName\":{},\"f:labels\":{\".\":{},\"f:app\":{},\"f:pod-template-hash\":{}},"
	        "\"f:ownerReferences\":{\".\":{},\"k:{\\\"uid\\\":\\\"a3b1c2d4\\\"}\":{}}},\"f:spec\":{\"f:"
	        "containers\":{"
	        "\"k:{\\\"name\\\":\\\"trainer\\\"}\":{\".\":{},\"f:image\":{},\"f:imagePullPolicy\":{},\"f:name\":{},"
	        "\"f:resources\":{\".\":{},\"f:limits\":{\".\":{},\"f:nvidia.com/gpu\":{}}}}}}}},{\"manager\":"
	        "\"kubelet\",\"operation\":\"Update\",\"apiVersion\":\"v1\",\"time\":\"2024-05-01T10:00:05Z\","
	        "\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:status\":{\"f:conditions\":{},\"f:containerStatuses\":{}"
	        ","
	        "\"f:hostIP\":{},\"f:phase\":{},\"f:podIP\":{},\"f:podIPs\":{},\"f:startTime\":{}}},\"subresource\":"
	        "\"status\"}]},\"spec\":{\"volumes\":[{\"name\":\"kube-api-access-abcde\",\"projected\":{\"sources\":[{"
	        "\"serviceAccountToken\":{\"expirationSeconds\":3607,\"path\":\"token\"}},{\"configMap\":{\"name\":"
	        "\"kube-root-ca.crt\",\"items\":[{\"key\":\"ca.crt\",\"path\":\"ca.crt\"}]}}],\"defaultMode\":420}},{"
	        "\"name\":\"data\",\"persistentVolumeClaim\":{\"claimName\":\"dataset\"}}],\"containers\":[{\"name\":"
	        "\"trainer\",\"image\":\"registry.local/ml/trainer:2.3.1\",\"args\":[\"--epochs=90\",\"--batch=512\"],"
	        "\"env\":[{\"name\":\"NCCL_DEBUG\",\"value\":\"WARN\"},{\"name\":\"WORLD_SIZE\",\"value\":\"16\"}],"
	        "\"resources\":{\"limits\":{\"cpu\":\"16\",\"memory\":\"128Gi\",\"nvidia.com/gpu\":\"2\"},\"requests\":"
	        "{\"cpu\":\"8\",\"memory\":\"64Gi\",\"nvidia.com/gpu\":\"2\"}},\"volumeMounts\":[{\"name\":\"data\","
	        "\"mountPath\":\"/data\"},{\"name\":\"kube-api-access-abcde\",\"readOnly\":true,\"mountPath\":"
	        "\"/var/run/secrets/kubernetes.io/serviceaccount\"}],\"terminationMessagePath\":\"/dev/"
	        "termination-log\","
	        "\"terminationMessagePolicy\":\"File\",\"imagePullPolicy\":\"IfNotPresent\"},{\"name\":\"sidecar\","
	        "\"image\":\"registry.local/ml/metrics:1.0\",\"resources\":{\"requests\":{\"cpu\":\"100m\"}}}],"
	        "\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\":30,\"dnsPolicy\":\"ClusterFirst\","
	        "\"serviceAccountName\":\"default\",\"nodeName\":\"gpu-node-17\",\"securityContext\":{},"
	        "\"schedulerName\":"
	        "\"default-scheduler\",\"tolerations\":[{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":"
	        "\"Exists\",\"effect\":\"NoExecute\",\"tolerationSeconds\":300}],\"priority\":0,\"enableServiceLinks\":"
	        "true,\"preemptionPolicy\":\"PreemptLowerPriority\"},\"status\":{\"phase\":\"Running\",\"conditions\":["
	        "{"
	        "\"type\":\"Initialized\",\"status\":\"True\",\"lastTransitionTime\":\"2024-05-01T10:00:01Z\"},{"
	        "\"type\":\"Ready\",\"status\":\"True\",\"lastTransitionTime\":\"2024-05-01T10:00:05Z\"},{\"type\":"
	        "\"ContainersReady\",\"status\":\"True\",\"lastTransitionTime\":\"2024-05-01T10:00:05Z\"},{\"type\":"
	        "\"PodScheduled\",\"status\":\"True\",\"lastTransitionTime\":\"2024-05-01T10:00:00Z\"}],\"hostIP\":"
	        "\"192.168.10.17\",\"podIP\":\"10.244.%u.%u\",\"podIPs\":[{\"ip\":\"10.244.%u.%u\"},{\"ip\":"
	        "\"fd00:10:244::%x\"}],\"startTime\":\"2024-05-01T10:00:00Z\",\"containerStatuses\":[{\"name\":"
	        "\"trainer\",\"state\":{\"running\":{\"startedAt\":\"2024-05-01T10:00:04Z\"}},\"lastState\":{},"
	        "\"ready\":"
	        "true,\"restartCount\":0,\"image\":\"registry.local/ml/trainer:2.3.1\",\"imageID\":"
	        "\"registry.local/ml/trainer@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\","
	        "\"containerID\":\"containerd://89abcdef0123456789abcdef0123456789abcdef0123456789abcdef01234567\","
	        "\"started\":true}],\"qosClass\":\"Burstable\"}}}\n",
	        i, i, i, 1000 + i, i / 250 % 250, i % 250 + 1, i / 250 % 250, i % 250 + 1, i + 1);
}

TEST(throughput_events_per_second)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
	const unsigned total = 20000; /* sanitizers are ~10x slower; keep the run short */
#else
	const unsigned total = 1000000;
#endif
	const unsigned distinct = 1000;
	_cleanup_watch_framer_ struct watch_framer *f = NULL;
	char *stream = malloc((size_t)distinct * 8192);
	size_t len = 0;
	uint64_t ok = 0;
	struct timespec t0, t1;
	double cpu_s;

	for (unsigned i = 0; i < distinct; i++)
		len += (size_t)bench_pod(stream + len, 8192, i);
	CHECK_INT(watch_framer_new(0, bench_event, NULL, &ok, &f, NULL), 0);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
	for (unsigned round = 0; round < total / distinct; round++) {
		/* 16 KiB reads, as libcurl delivers them */
		for (size_t at = 0; at < len; at += 16384)
			watch_framer_feed(f, stream + at, len - at < 16384 ? len - at : 16384);
	}
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
	cpu_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	CHECK_INT(ok, total);
	CHECK_INT(watch_framer_stats(f)->malformed + watch_framer_stats(f)->oversized, 0);
	printf("  throughput: %u pod events of ~%zu bytes framed+parsed+decoded in %.2f s CPU = %.0f events/s "
	       "(%.0f MB/s); target >= 50000 events/s per core\n",
	       total, len / distinct, cpu_s, total / cpu_s, (double)len * ((double)total / distinct) / cpu_s / 1e6);
	free(stream);
}
