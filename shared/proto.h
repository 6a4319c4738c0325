/* proto.h — the plugin <-> agent protocol on the agent's unix socket: one JSON
 * object per line each way, request then response, connection closed after.
 * Requests: {"op":"pod","namespace","name","uid"} -> {"ok":true,"found":bool,
 * "annotations":{...}}; {"op":"attached"|"detached","containerId","ifname",
 * "namespace","name","uid"} -> {"ok":true}; {"op":"status"} -> {"ok":true,...}
 * (the status object with "ok" added); {"op":"explain","namespace","name"} ->
 * {"ok":true,"found":bool,...} (the pod's explain object with "ok" and
 * "found" added). Errors: {"ok":false,"error":"..."}.
 * Bounded: a request, and the response to "pod", "attached", "detached", is
 * at most PROTO_MSG_MAX bytes including its '\n'; the responses to "status"
 * and "explain" (every pod of the node) at most PROTO_LARGE_MSG_MAX.
 * "attached" may carry "attachment": the record the plugin could not write
 * (an object; the line's bound applies).
 * Required fields: "pod" and "explain" need namespace and name;
 * "attached"/"detached" need containerId and ifname; the others are
 * optional. Unknown fields are ignored (forward compatibility); known fields
 * must be strings that fit. */
#ifndef AIQOS_PROTO_H
#define AIQOS_PROTO_H

#include "error.h"

struct cJSON;

#define PROTO_MSG_MAX        65536
#define PROTO_LARGE_MSG_MAX  (16 * 1024 * 1024)
#define PROTO_DEFAULT_SOCKET "/run/aiqos/agent.sock"

enum proto_op {
	PROTO_OP_POD,
	PROTO_OP_ATTACHED,
	PROTO_OP_DETACHED,
	PROTO_OP_STATUS,
	PROTO_OP_EXPLAIN,
	_PROTO_OP_MAX,
	_PROTO_OP_INVALID = -1,
};

struct proto_request {
	enum proto_op op;
	char namespace_[254];
	char name[254];
	char uid[64];
	char container_id[128];
	char ifname[16];
	/* "attached" only, optional: the attachment's record (state_to_json)
	 * when the plugin could not write it (full or read-only stateDir): the
	 * agent writes it once it can. Owned: freed by proto_request_done(). */
	struct cJSON *attachment;
};

/* Free what a decoded request owns (idempotent). */
void proto_request_done(struct proto_request *r);

const char *proto_op_name(enum proto_op op);
/* Encode as one line (terminated by '\n') into a malloc'd string. */
int proto_request_encode(const struct proto_request *r, char **ret, struct error *err);
/* Decode one line (the trailing '\n' is optional). -EMSGSIZE over
 * PROTO_MSG_MAX, -EOPNOTSUPP for an unknown op, -ENAMETOOLONG for a field
 * that does not fit, -EINVAL otherwise; err names the field. */
int proto_request_decode(const char *line, size_t len, struct proto_request *ret, struct error *err);

/* Client side: connect to path, send r, read one response line, parse as JSON.
 * The whole exchange is bounded by timeout_ms (connect, send, receive).
 * -ENOENT/-ECONNREFUSED (at once) when no agent listens, -ETIMEDOUT on
 * timeout, -ECONNRESET/-EPROTO when the agent closes before a full line,
 * -EMSGSIZE for a response over PROTO_MSG_MAX, -EPROTO when the response is
 * not an object with a boolean "ok", -EREMOTEIO (err carries the agent's
 * "error") when "ok" is false. On success *ret_response (if non-NULL) gets the
 * response object (caller frees with cJSON_Delete). */
int proto_call(const char *path, const struct proto_request *r, int timeout_ms, struct cJSON **ret_response,
               struct error *err);
/* The same with another bound on the response (PROTO_MSG_MAX..PROTO_LARGE_MSG_MAX):
 * "status" and "explain" responses may exceed PROTO_MSG_MAX. */
int proto_call_max(const char *path, const struct proto_request *r, int timeout_ms, size_t max_response,
                   struct cJSON **ret_response, struct error *err);

/* Server side: the largest response allowed for op (PROTO_MSG_MAX, or
 * PROTO_LARGE_MSG_MAX for status and explain). */
size_t proto_response_max(enum proto_op op);
/* Encode a response object as one line ('\n'-terminated, malloc'd, *ret_len
 * bytes without the NUL). -EMSGSIZE (err says how large) when it exceeds
 * max bytes, -EINVAL when resp is not an object with a boolean "ok". */
int proto_response_encode(const struct cJSON *resp, size_t max, char **ret, size_t *ret_len, struct error *err);
/* A {"ok":false,"error":msg} line ('\n'-terminated, malloc'd); NULL on ENOMEM. */
char *proto_response_error_line(const char *msg);

#endif
