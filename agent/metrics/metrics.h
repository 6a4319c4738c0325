/* metrics.h — the agent's HTTP endpoint: Prometheus /metrics (text
 * exposition format 0.0.4), /healthz and /readyz, served by libmicrohttpd in
 * external-poll mode driven from the sd-event loop, so every callback below
 * runs on the loop thread and may read agent state without locks. */
#ifndef AIQOS_AGENT_METRICS_H
#define AIQOS_AGENT_METRICS_H

#include <stdarg.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>

#include "error.h"

#define METRICS_ADDR_MAX        64
#define METRICS_CONN_MAX        32  /* concurrent HTTP connections */
#define METRICS_CONN_TIMEOUT_S  10  /* idle HTTP connection timeout */
#define METRICS_LABEL_VALUE_MAX 256 /* longer label values are cut (on a UTF-8 boundary) */

struct metrics_server;
struct metrics_writer; /* appends Prometheus text exposition format 0.0.4 */

/* One sample: name, help, type ("gauge"|"counter"|"untyped"), the value, then
 * label name/value pairs and a NULL. HELP and TYPE are written once per
 * metric family and the samples of a family are kept together whatever the
 * order of the calls (the first sample's help text is the family's). An
 * invalid metric or label name, a type differing from the family's first
 * sample, or a label without a value drops the sample (counted, see
 * metrics_writer_dropped). Label values are escaped. */
void metrics_write(struct metrics_writer *w, const char *name, const char *help, const char *type, double value, ...)
        __attribute__((sentinel));
/* metrics_write() with the labels as a va_list. */
void metrics_writev(struct metrics_writer *w, const char *name, const char *help, const char *type, double value,
                    va_list labels);
/* A summary without quantiles: name_sum and name_count (family type "summary"). */
void metrics_write_summary(struct metrics_writer *w, const char *name, const char *help, double sum, uint64_t count,
                           ...) __attribute__((sentinel));
/* A histogram (family type "histogram"): n buckets with ascending upper bounds
 * le[i] and per-bucket (not cumulative) counts[i] (observations in
 * (le[i-1], le[i]]); the +Inf bucket is count. Writes name_bucket (cumulative),
 * name_sum, name_count. */
void metrics_write_histogram(struct metrics_writer *w, const char *name, const char *help, const double *le,
                             const uint64_t *counts, unsigned n, double sum, uint64_t count, ...)
        __attribute__((sentinel));

/* Histograms with fixed bucket bounds. The bounds are the family's, kept
 * apart from the counts so a zeroed struct metrics_histogram is an empty
 * histogram (counters structs stay memset-initialised). */
#define METRICS_BUCKETS_MAX 16
struct metrics_buckets {
	unsigned n;
	double le[METRICS_BUCKETS_MAX]; /* ascending upper bounds (seconds for durations) */
};
struct metrics_histogram {
	uint64_t counts[METRICS_BUCKETS_MAX + 1]; /* per bucket; [n] = above the last bound */
	double sum;
	uint64_t count;
};
/* Plugin socket requests (50 µs .. 1 s), re-tunes (1 ms .. 10 s), API
 * server requests (5 ms .. 60 s). */
extern const struct metrics_buckets metrics_buckets_plugin, metrics_buckets_retune, metrics_buckets_api;
void metrics_histogram_observe(struct metrics_histogram *h, const struct metrics_buckets *b, double v);
/* metrics_write_histogram() of h with b's bounds. */
void metrics_write_hist(struct metrics_writer *w, const char *name, const char *help, const struct metrics_buckets *b,
                        const struct metrics_histogram *h, ...) __attribute__((sentinel));

/* Standalone writers (the server makes one per scrape; tests and tools may too). */
struct metrics_writer *metrics_writer_new(void);
/* The exposition text so far (malloc'd, NUL-terminated, *ret_len bytes), or
 * NULL on ENOMEM. The writer stays valid. */
char *metrics_writer_text(const struct metrics_writer *w, size_t *ret_len);
unsigned metrics_writer_dropped(const struct metrics_writer *w);
void metrics_writer_free(struct metrics_writer *w);

/* A sample value as Prometheus parses it: integers exactly ("42"), others in
 * the shortest form that reads back equal, "NaN", "+Inf", "-Inf". */
const char *metrics_format_value(double v, char *buf, size_t size);

struct metrics_ops {
	void (*render)(void *ud, struct metrics_writer *w); /* called on the loop thread */
	bool (*healthy)(void *ud);                          /* /healthz: loop alive (NULL = yes) */
	bool (*ready)(void *ud);                            /* /readyz: first list + reconcile done (NULL = yes) */
};

/* Parse a listen address: "127.0.0.1:9464", "[::1]:9464", ":9464" (every
 * address, IPv6 and IPv4), port 0 = any free port; "" or "0" = disabled
 * (*ret_disabled true). Host names are refused (IP literals only). */
int metrics_addr_parse(const char *addr, struct sockaddr_storage *ret, socklen_t *ret_len, bool *ret_disabled,
                       struct error *err);

/* Listen on addr and serve on loop. A disabled address ("" or "0") returns
 * 0 with *ret = NULL. Errors name the address. */
int metrics_server_new(sd_event *loop, const char *addr, const struct metrics_ops *ops, void *ud,
                       struct metrics_server **ret, struct error *err);
void metrics_server_free(struct metrics_server *m);
/* The TCP port actually bound (for addresses with port 0). */
uint16_t metrics_server_port(const struct metrics_server *m);

#endif
