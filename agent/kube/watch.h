/* watch.h — incremental framing of a Kubernetes watch stream: the API client
 * feeds byte chunks as they arrive (boundaries anywhere), the framer yields
 * each complete newline-delimited JSON object, parsed. Memory is bounded by a
 * per-event cap: an oversized event is skipped without being buffered and
 * reported, as are malformed lines; later events are not lost. */
#ifndef AIQOS_AGENT_WATCH_H
#define AIQOS_AGENT_WATCH_H

#include "error.h"

struct cJSON;

#define WATCH_EVENT_MAX_DEFAULT (1024 * 1024) /* bytes per event, newline excluded */
#define WATCH_EVENT_MAX_LIMIT   (64 * 1024 * 1024)
#define WATCH_EVENT_MIN_LIMIT   64

/* One complete event: obj is the parsed JSON object, line/len its text
 * (trailing "\r" removed, not NUL-terminated). Both are valid only during the
 * call. Return 0 to go on; a negative value stops watch_framer_feed(), which
 * returns it (the rest of that chunk is dropped: reset the framer or discard
 * it, e.g. to relist). The callback must not feed the same framer. */
typedef int (*watch_event_fn)(const struct cJSON *obj, const char *line, size_t len, void *userdata);
/* A skipped event: err->errnum is EMSGSIZE (over the cap) or EBADMSG
 * (not a JSON object, or truncated at end of stream) or ENOMEM (could not
 * buffer it; counted as oversized); err->msg says which
 * event (1-based line number in the stream), its size, and where it broke. */
typedef void (*watch_error_fn)(const struct error *err, void *userdata);

struct watch_stats {
	uint64_t bytes;     /* fed */
	uint64_t events;    /* yielded */
	uint64_t malformed; /* skipped: not a single JSON object */
	uint64_t oversized; /* skipped: over the cap */
	uint64_t blank;     /* empty/whitespace-only lines, ignored silently */
	size_t max_event;   /* largest event yielded, bytes */
};

struct watch_framer;

/* max_event_bytes: 0 = WATCH_EVENT_MAX_DEFAULT; else within
 * [WATCH_EVENT_MIN_LIMIT, WATCH_EVENT_MAX_LIMIT] or -EINVAL. on_error may be NULL. */
int watch_framer_new(size_t max_event_bytes, watch_event_fn on_event, watch_error_fn on_error, void *userdata,
                     struct watch_framer **ret, struct error *err);
void watch_framer_free(struct watch_framer *f);
static inline void watch_framer_freep(struct watch_framer **f)
{
	if (*f)
		watch_framer_free(*f);
}
#define _cleanup_watch_framer_ _cleanup_(watch_framer_freep)

/* Feed the next len bytes of the stream. Returns 0, or the first negative
 * value returned by on_event. Never fails on bad input (that is reported
 * through on_error). */
int watch_framer_feed(struct watch_framer *f, const void *data, size_t len);
/* End of stream: a last event without a trailing newline is still yielded if
 * it is a complete JSON object, else reported as truncated. The framer is
 * then reset for a new stream. Returns like watch_framer_feed(). */
int watch_framer_finish(struct watch_framer *f);
/* Drop any partial event (e.g. after a reconnect); stats are kept. */
void watch_framer_reset(struct watch_framer *f);
/* Bytes currently buffered (a partial event); at most the cap + 1. */
size_t watch_framer_buffered(const struct watch_framer *f);
const struct watch_stats *watch_framer_stats(const struct watch_framer *f);

#endif
