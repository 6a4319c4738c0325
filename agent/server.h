/* server.h — the agent's plugin socket (proto.h): a root-only unix stream
 * socket on the sd-event loop. One request line per connection, one response
 * line, then close; bounded reads, a deadline per connection, SO_PEERCRED
 * uid 0 only. The agent answers through the ops below, on the loop thread. */
#ifndef AIQOS_AGENT_SERVER_H
#define AIQOS_AGENT_SERVER_H

#include <systemd/sd-event.h>

#include "metrics/metrics.h"
#include "proto.h"

struct cJSON;
struct metrics_writer;

#define AGENT_SERVER_TIMEOUT_MS_DEFAULT 1000 /* whole connection: request in, response out */
#define AGENT_SERVER_CONN_MAX           256  /* concurrent connections; beyond, accept() waits */

struct agent_server;

struct agent_server_ops {
	/* op "pod": annotations of a pod from the watch cache (*ret_found false if
	 * unknown). *ret_annotations (owned by the caller) may stay NULL = none.
	 * Negative errno = internal error (answered {"ok":false}). */
	int (*pod_annotations)(void *ud, const char *ns, const char *name, const char *uid,
	                       struct cJSON **ret_annotations, bool *ret_found);
	/* op "attached"/"detached": the plugin tuned / removed an attachment (re-read state files) */
	void (*attachment)(void *ud, bool attached, const struct proto_request *r);
	/* op "status": the JSON object `aiqosctl status --json` prints (owned by the caller; NULL = ENOMEM) */
	struct cJSON *(*status)(void *ud);
	/* op "explain": one pod, NULL + *ret_found=false if unknown (NULL + found = ENOMEM) */
	struct cJSON *(*explain)(void *ud, const char *ns, const char *name, bool *ret_found);
};

/* How a request ended, per op (aiqos_plugin_requests_total{op,result}). */
enum agent_server_result {
	SERVER_RESULT_OK,        /* answered ok (found or not) */
	SERVER_RESULT_NOT_FOUND, /* "pod"/"explain" for a pod the agent does not know */
	SERVER_RESULT_ERROR,     /* the agent failed to answer (ENOMEM, response too large) */
	_SERVER_RESULT_MAX,
};

struct agent_server_stats {
	uint64_t requests[_PROTO_OP_MAX][_SERVER_RESULT_MAX];
	/* request complete -> response queued, seconds (metrics_buckets_plugin) */
	struct metrics_histogram latency[_PROTO_OP_MAX];
	uint64_t connections; /* accepted */
	uint64_t denied;      /* peer not uid 0 */
	uint64_t invalid;     /* undecodable request or unknown op */
	uint64_t oversized;   /* request over PROTO_MSG_MAX */
	uint64_t timeouts;    /* deadline passed before the response was out */
	uint64_t io_errors;   /* recv/send/accept failures */
	uint64_t active;      /* connections open now */
};

/* Create the parent directory of socket_path (0700) if missing — an existing
 * one must be a directory owned by us and not writable by group or others —,
 * remove a stale socket there (refusing a non-socket or a socket another
 * process still listens on), bind, chmod 0600, listen, and serve on loop.
 * Errors name the path. */
int agent_server_new(sd_event *loop, const char *socket_path, const struct agent_server_ops *ops, void *ud,
                     struct agent_server **ret, struct error *err);
/* Close every connection and the listener, unlink the socket if it is still ours. */
void agent_server_free(struct agent_server *s);

/* Per-connection deadline (default AGENT_SERVER_TIMEOUT_MS_DEFAULT); applies to new connections. */
void agent_server_set_timeout_ms(struct agent_server *s, unsigned timeout_ms);

void agent_server_get_stats(const struct agent_server *s, struct agent_server_stats *ret);
const char *agent_server_result_name(enum agent_server_result r); /* "ok" "not_found" "error" */

/* Write aiqos_plugin_requests_total{op,result}, aiqos_plugin_request_duration_seconds
 * (histogram per op), aiqos_plugin_rejected_total{reason="denied|invalid|oversized|
 * timeout|io_error"}, aiqos_plugin_connections_total and aiqos_plugin_connections_active. */
void agent_server_write_metrics(const struct agent_server *s, struct metrics_writer *w);

#endif
