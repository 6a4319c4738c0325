/* fuzz_watch.c — a Kubernetes watch stream as the API server (or anything
 * between it and the agent) sends it: the framer fed in chunks cut at
 * points the fuzzer chooses, every complete event decoded as the agent does.
 * Input: byte 0 picks the per-event cap, bytes 1..8 seed the cut points, the
 * rest is the stream. Properties: no crash or leak; the transcript (events,
 * decode results, reported errors) is the same for the whole stream in one
 * chunk and for the chunked one; the buffer stays within the cap. */
#include "../../agent/kube/decode.h"
#include "../../agent/kube/watch.h"
#include "fuzz.h"
#include "workload.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	return 0;
}

struct transcript {
	FILE *out;
	char *buf;
	size_t size;
};

static int on_event(const cJSON *obj, const char *line, size_t len, void *userdata)
{
	struct transcript *t = userdata;
	struct kube_event ev;
	struct error e = {0};

	FUZZ_ASSERT(cJSON_IsObject(obj), "a yielded event is not an object");
	/* the line is the object's text (JSON whitespace around it allowed) */
	size_t a = 0, b = len;
	while (a < b && (unsigned char)line[a] <= ' ')
		a++;
	while (b > a && (unsigned char)line[b - 1] <= ' ')
		b--;
	FUZZ_ASSERT(b > a && line[a] == '{' && line[b - 1] == '}', "event line bounds (%zu bytes)", len);
	fprintf(t->out, "event %zu %08x: ", len, (unsigned)cJSON_GetArraySize(obj));
	fwrite(line, 1, len, t->out);
	if (kube_event_decode(obj, &ev, &e) == 0) {
		struct workload w;
		fprintf(t->out, " -> %s %s/%s rv=%s code=%d\n", kube_event_type_name(ev.type), ev.pod.namespace_,
		        ev.pod.name, ev.resource_version, ev.status.code);
		/* what the agent does with a pod's annotations */
		FUZZ_ASSERT(workload_from_annotations(ev.pod.annotations, &w, NULL) == 0, "pod annotations refused");
		kube_event_done(&ev);
	} else {
		FUZZ_ASSERT(e.msg[0], "undecodable event without a message");
		fprintf(t->out, " -> undecodable: %s\n", e.msg);
	}
	return 0;
}

static void on_error(const struct error *e, void *userdata)
{
	struct transcript *t = userdata;

	FUZZ_ASSERT(e->errnum == EMSGSIZE || e->errnum == EBADMSG || e->errnum == ENOMEM, "errnum %d", e->errnum);
	fprintf(t->out, "error %d: %s\n", e->errnum, e->msg);
}

static uint64_t next_rand(uint64_t *s)
{
	/* xorshift64*: deterministic cut points from the input's seed */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

/* Feed the stream in chunks (seed 0 = one chunk); returns the transcript. */
static char *run(const uint8_t *data, size_t size, size_t cap, uint64_t seed, unsigned max_chunk, size_t *ret_len)
{
	struct watch_framer *f = NULL;
	struct transcript t = {0};
	size_t at = 0;

	t.out = open_memstream(&t.buf, &t.size);
	if (!t.out)
		abort();
	FUZZ_ASSERT(watch_framer_new(cap, on_event, on_error, &t, &f, NULL) == 0, "framer_new(cap %zu)", cap);
	while (at < size) {
		size_t n = size - at;
		if (seed) {
			size_t c = 1 + (size_t)(next_rand(&seed) % max_chunk);
			if (c < n)
				n = c;
		}
		FUZZ_ASSERT(watch_framer_feed(f, data + at, n) == 0, "feed failed");
		FUZZ_ASSERT(watch_framer_buffered(f) <= cap + 1, "buffered %zu over the cap %zu",
		            watch_framer_buffered(f), cap);
		at += n;
	}
	FUZZ_ASSERT(watch_framer_finish(f) == 0, "finish failed");
	FUZZ_ASSERT(watch_framer_buffered(f) == 0, "finish left %zu bytes", watch_framer_buffered(f));
	const struct watch_stats *st = watch_framer_stats(f);
	FUZZ_ASSERT(st->bytes == size, "stats: %llu bytes fed, want %zu", (unsigned long long)st->bytes, size);
	fprintf(t.out, "stats events=%llu malformed=%llu oversized=%llu blank=%llu max=%zu\n",
	        (unsigned long long)st->events, (unsigned long long)st->malformed, (unsigned long long)st->oversized,
	        (unsigned long long)st->blank, st->max_event);
	watch_framer_free(f);
	fclose(t.out);
	*ret_len = t.size;
	return t.buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t caps[] = {0, WATCH_EVENT_MIN_LIMIT, 100, 256, 1000, 4096};
	size_t cap;
	uint64_t seed = 0;
	unsigned max_chunk;

	if (size < 9 || size > 1024 * 1024)
		return 0;
	cap = caps[data[0] % ARRAY_SIZE(caps)];
	max_chunk = 1u << (data[0] >> 5); /* 1..128 bytes per chunk */
	memcpy(&seed, data + 1, sizeof(seed));
	seed |= 1; /* never 0: that is "one chunk" */
	data += 9;
	size -= 9;

	size_t n_whole, n_chunked;
	_cleanup_free_ char *whole = run(data, size, cap ? cap : WATCH_EVENT_MAX_DEFAULT, 0, 0, &n_whole);
	_cleanup_free_ char *chunked =
	        run(data, size, cap ? cap : WATCH_EVENT_MAX_DEFAULT, seed, max_chunk, &n_chunked);
	FUZZ_ASSERT(n_whole == n_chunked && memcmp(whole, chunked, n_whole) == 0,
	            "chunking changed the transcript:\n--- one chunk\n%s--- chunked\n%s", whole, chunked);
	return 0;
}
