/* proto.c — the plugin <-> agent line protocol (see proto.h): strict,
 * bounded encoding and decoding of requests, and the client side of one
 * exchange over a unix stream socket under a single deadline. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include "json.h"
#include "proto.h"

static const char *const op_names[_PROTO_OP_MAX] = {
        [PROTO_OP_POD] = "pod",       [PROTO_OP_ATTACHED] = "attached", [PROTO_OP_DETACHED] = "detached",
        [PROTO_OP_STATUS] = "status", [PROTO_OP_EXPLAIN] = "explain",
};

DEFINE_STRING_TABLE_NAME(proto_op_name, enum proto_op, op_names)
static DEFINE_STRING_TABLE_FROM_NAME(proto_op_from_name, enum proto_op, op_names, _PROTO_OP_INVALID)

        /* Parse exactly one JSON value filling buf[0..len) (whitespace around it
         * allowed): cJSON alone would accept trailing garbage. */
        static cJSON *parse_whole(const char *buf, size_t len)
{
	const char *end = NULL;
	cJSON *j = cJSON_ParseWithLengthOpts(buf, len, &end, false);

	if (!j)
		return NULL;
	for (; end && end < buf + len; end++)
		if (*end != ' ' && *end != '\t' && *end != '\r') {
			cJSON_Delete(j);
			return NULL;
		}
	return j;
}

/* The string fields of a request, with their JSON names and which ops need them. */
struct field {
	const char *name;
	size_t offset;
	size_t size;
	unsigned required_for; /* bit (1 << op) */
	unsigned sent_for;
};

#define OPBIT(op) (1u << (op))
#define POD_OPS   (OPBIT(PROTO_OP_POD) | OPBIT(PROTO_OP_ATTACHED) | OPBIT(PROTO_OP_DETACHED))
#define ATT_OPS   (OPBIT(PROTO_OP_ATTACHED) | OPBIT(PROTO_OP_DETACHED))
#define NAME_OPS  (OPBIT(PROTO_OP_POD) | OPBIT(PROTO_OP_EXPLAIN)) /* requests that need namespace and name */
#define NAMED_OPS (POD_OPS | OPBIT(PROTO_OP_EXPLAIN))             /* requests that carry namespace and name */

static const struct field fields[] = {
        {"namespace", offsetof(struct proto_request, namespace_), sizeof(((struct proto_request *)0)->namespace_),
         NAME_OPS, NAMED_OPS},
        {"name", offsetof(struct proto_request, name), sizeof(((struct proto_request *)0)->name), NAME_OPS, NAMED_OPS},
        {"uid", offsetof(struct proto_request, uid), sizeof(((struct proto_request *)0)->uid), 0, POD_OPS},
        {"containerId", offsetof(struct proto_request, container_id), sizeof(((struct proto_request *)0)->container_id),
         ATT_OPS, ATT_OPS},
        {"ifname", offsetof(struct proto_request, ifname), sizeof(((struct proto_request *)0)->ifname), ATT_OPS,
         ATT_OPS},
};

static const char *field_get(const struct proto_request *r, const struct field *f)
{
	return (const char *)r + f->offset;
}

static char *field_buf(struct proto_request *r, const struct field *f)
{
	return (char *)r + f->offset;
}

int proto_request_encode(const struct proto_request *r, char **ret, struct error *err)
{
	_cleanup_json_ cJSON *j = NULL;
	_cleanup_free_ char *text = NULL;
	const char *op = proto_op_name(r->op);
	char *line;
	size_t n;

	if (!op)
		return error_set(err, EINVAL, "encode request: invalid op %d", (int)r->op);
	j = cJSON_CreateObject();
	if (!j || !cJSON_AddStringToObject(j, "op", op))
		return error_set(err, ENOMEM, "encode request: out of memory");
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
		const struct field *f = &fields[i];
		const char *v;

		if (!(f->sent_for & OPBIT(r->op)))
			continue;
		v = field_get(r, f);
		if (strnlen(v, f->size) >= f->size)
			return error_set(err, EINVAL, "encode %s request: field '%s' is not terminated", op, f->name);
		if ((f->required_for & OPBIT(r->op)) && !v[0])
			return error_set(err, EINVAL, "encode %s request: field '%s' is empty", op, f->name);
		if (!cJSON_AddStringToObject(j, f->name, v))
			return error_set(err, ENOMEM, "encode request: out of memory");
	}
	if (r->op == PROTO_OP_ATTACHED && r->attachment) {
		cJSON *a = cJSON_IsObject(r->attachment) ? cJSON_Duplicate(r->attachment, true) : NULL;

		if (!a || !cJSON_AddItemToObject(j, "attachment", a)) {
			cJSON_Delete(a);
			return error_set(err, cJSON_IsObject(r->attachment) ? ENOMEM : EINVAL,
			                 "encode %s request: field 'attachment' is not an object", op);
		}
	}
	text = cJSON_PrintUnformatted(j);
	if (!text)
		return error_set(err, ENOMEM, "encode request: out of memory");
	n = strlen(text);
	if (n + 1 > PROTO_MSG_MAX)
		return error_set(err, EMSGSIZE, "encode %s request: %zu bytes exceed %d", op, n + 1, PROTO_MSG_MAX);
	line = malloc(n + 2);
	if (!line)
		return error_set(err, ENOMEM, "encode request: out of memory");
	memcpy(line, text, n);
	line[n] = '\n';
	line[n + 1] = '\0';
	*ret = line;
	return 0;
}

int proto_request_decode(const char *line, size_t len, struct proto_request *ret, struct error *err)
{
	_cleanup_json_ cJSON *j = NULL;
	struct proto_request r = {.op = _PROTO_OP_INVALID};
	const cJSON *v;

	if (len > PROTO_MSG_MAX)
		return error_set(err, EMSGSIZE, "request of %zu bytes exceeds %d", len, PROTO_MSG_MAX);
	if (len > 0 && line[len - 1] == '\n')
		len--;
	if (len > 0 && line[len - 1] == '\r')
		len--;
	if (len == 0)
		return error_set(err, EINVAL, "empty request");
	if (memchr(line, '\n', len) || memchr(line, '\0', len))
		return error_set(err, EINVAL, "request contains a newline or NUL byte");
	j = parse_whole(line, len);
	if (!j)
		return error_set(err, EINVAL, "request is not one valid JSON value");
	if (!cJSON_IsObject(j))
		return error_set(err, EINVAL, "request is not a JSON object");
	v = cJSON_GetObjectItemCaseSensitive(j, "op");
	if (!v)
		return error_set(err, EINVAL, "request has no 'op'");
	if (!cJSON_IsString(v) || !v->valuestring)
		return error_set(err, EINVAL, "request field 'op' is not a string");
	r.op = proto_op_from_name(v->valuestring);
	if (r.op == _PROTO_OP_INVALID)
		return error_set(err, EOPNOTSUPP, "unknown op '%.32s'", v->valuestring);
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
		const struct field *f = &fields[i];

		v = cJSON_GetObjectItemCaseSensitive(j, f->name);
		if (!v || cJSON_IsNull(v)) {
			if (f->required_for & OPBIT(r.op))
				return error_set(err, EINVAL, "%s request has no '%s'", op_names[r.op], f->name);
			continue;
		}
		if (!cJSON_IsString(v) || !v->valuestring)
			return error_set(err, EINVAL, "%s request field '%s' is not a string", op_names[r.op], f->name);
		if ((f->required_for & OPBIT(r.op)) && !v->valuestring[0])
			return error_set(err, EINVAL, "%s request field '%s' is empty", op_names[r.op], f->name);
		if (str_copy(field_buf(&r, f), f->size, v->valuestring) < 0)
			return error_set(err, ENAMETOOLONG, "%s request field '%s' is longer than %zu bytes",
			                 op_names[r.op], f->name, f->size - 1);
	}
	v = cJSON_GetObjectItemCaseSensitive(j, "attachment");
	if (r.op == PROTO_OP_ATTACHED && v && !cJSON_IsNull(v)) {
		if (!cJSON_IsObject(v))
			return error_set(err, EINVAL, "%s request field 'attachment' is not an object", op_names[r.op]);
		r.attachment = cJSON_DetachItemFromObjectCaseSensitive(j, "attachment");
	}
	*ret = r;
	return 0;
}

void proto_request_done(struct proto_request *r)
{
	if (r && r->attachment) {
		cJSON_Delete(r->attachment);
		r->attachment = NULL;
	}
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for events on fd until the deadline. 0 ready, -ETIMEDOUT, -errno. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = events};
		int64_t left = deadline - now_ms();
		int k;

		if (left <= 0)
			return -ETIMEDOUT;
		k = poll(&pfd, 1, left > INT32_MAX ? INT32_MAX : (int)left);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (k == 0)
			return -ETIMEDOUT;
		return 0; /* ready, or an error/hangup the next syscall reports */
	}
}

static int connect_until(int fd, const struct sockaddr_un *sa, socklen_t salen, int64_t deadline)
{
	for (;;) {
		if (connect(fd, (const struct sockaddr *)sa, salen) == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			/* the listener's backlog is full: retry briefly, bounded by the deadline */
			struct timespec ts = {.tv_sec = 0, .tv_nsec = 5 * 1000 * 1000};
			if (now_ms() + 5 > deadline)
				return -ETIMEDOUT;
			nanosleep(&ts, NULL);
			continue;
		}
		if (errno == EINPROGRESS) {
			int soerr = 0;
			socklen_t l = sizeof(soerr);
			int r = wait_fd(fd, POLLOUT, deadline);
			if (r < 0)
				return r;
			if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &l) < 0)
				return -errno;
			return soerr ? -soerr : 0;
		}
		return -errno;
	}
}

static int send_all(int fd, const char *buf, size_t len, int64_t deadline)
{
	while (len > 0) {
		ssize_t k = send(fd, buf, len, MSG_NOSIGNAL);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				int r = wait_fd(fd, POLLOUT, deadline);
				if (r < 0)
					return r;
				continue;
			}
			return -errno;
		}
		buf += k;
		len -= (size_t)k;
	}
	return 0;
}

/* Read up to and including the first '\n' into a malloc'd, NUL-terminated
 * buffer (newline stripped). */
static int recv_line(int fd, int64_t deadline, size_t max, char **ret, size_t *ret_len, struct error *err,
                     const char *path)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 0;

	for (;;) {
		char *nl;
		ssize_t k;

		if (len == cap) {
			size_t ncap = cap ? cap * 2 : 4096;
			char *nb;
			if (ncap > max + 1)
				ncap = max + 1;
			if (ncap <= len)
				return error_set(err, EMSGSIZE, "agent at '%s': response exceeds %zu bytes", path, max);
			nb = realloc(buf, ncap);
			if (!nb)
				return error_set(err, ENOMEM, "agent at '%s': out of memory", path);
			buf = nb;
			cap = ncap;
		}
		k = recv(fd, buf + len, cap - len, 0);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				int r = wait_fd(fd, POLLIN, deadline);
				if (r == -ETIMEDOUT)
					return error_set(err, ETIMEDOUT, "agent at '%s' did not answer in time", path);
				if (r < 0)
					return error_set(err, -r, "agent at '%s': %s", path, strerror(-r));
				continue;
			}
			if (errno != ECONNRESET)
				return error_set(err, errno, "receive from agent at '%s': %s", path, strerror(errno));
			k = 0; /* closed without reading our request: same as EOF */
		}
		if (k == 0) {
			if (len == 0)
				return error_set(err, ECONNRESET,
				                 "agent at '%s' closed the connection without answering", path);
			return error_set(err, EPROTO, "agent at '%s' closed the connection in the middle of a response",
			                 path);
		}
		nl = memchr(buf + len, '\n', (size_t)k);
		len += (size_t)k;
		if (nl) {
			size_t line_len = (size_t)(nl - buf);
			if (line_len + 1 > max)
				break;
			*nl = '\0';
			*ret_len = line_len;
			*ret = TAKE_PTR(buf);
			return 0;
		}
		if (len >= max)
			break;
	}
	return error_set(err, EMSGSIZE, "agent at '%s': response exceeds %zu bytes", path, max);
}

int proto_call(const char *path, const struct proto_request *r, int timeout_ms, struct cJSON **ret_response,
               struct error *err)
{
	return proto_call_max(path, r, timeout_ms, PROTO_MSG_MAX, ret_response, err);
}

int proto_call_max(const char *path, const struct proto_request *r, int timeout_ms, size_t max_response,
                   struct cJSON **ret_response, struct error *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *req = NULL, *line = NULL;
	_cleanup_json_ cJSON *resp = NULL;
	const cJSON *ok;
	int64_t deadline;
	size_t len = 0;
	int q;

	if (!path || !*path)
		return error_set(err, EINVAL, "agent socket path is empty");
	if (strlen(path) >= sizeof(sa.sun_path))
		return error_set(err, ENAMETOOLONG, "agent socket path '%s' is too long", path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (timeout_ms <= 0)
		return error_set(err, EINVAL, "timeout %d ms is not positive", timeout_ms);
	if (max_response < PROTO_MSG_MAX || max_response > PROTO_LARGE_MSG_MAX)
		return error_set(err, EINVAL, "response bound %zu is outside %d..%d", max_response, PROTO_MSG_MAX,
		                 PROTO_LARGE_MSG_MAX);
	deadline = now_ms() + timeout_ms;

	q = proto_request_encode(r, &req, err);
	if (q < 0)
		return q;
	if (!req)
		return error_set(err, ENOMEM, "encode request: out of memory");
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return error_set(err, errno, "create socket: %s", strerror(errno));
	q = connect_until(fd, &sa, (socklen_t)sizeof(sa), deadline);
	if (q < 0)
		return error_set(err, -q, "connect to agent at '%s': %s", path, strerror(-q));
	q = send_all(fd, req, strlen(req), deadline);
	if (q < 0)
		return error_set(err, -q, "send to agent at '%s': %s", path, strerror(-q));
	q = recv_line(fd, deadline, max_response, &line, &len, err, path);
	if (q < 0)
		return q;
	resp = parse_whole(line, len);
	if (!resp || !cJSON_IsObject(resp))
		return error_set(err, EPROTO, "agent at '%s' answered with something not a JSON object", path);
	ok = cJSON_GetObjectItemCaseSensitive(resp, "ok");
	if (!cJSON_IsBool(ok))
		return error_set(err, EPROTO, "agent at '%s': response has no boolean 'ok'", path);
	if (cJSON_IsFalse(ok)) {
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(resp, "error");
		return error_set(err, EREMOTEIO, "agent at '%s' refused %s: %.512s", path, proto_op_name(r->op),
		                 cJSON_IsString(e) && e->valuestring ? e->valuestring : "(no reason)");
	}
	if (ret_response)
		*ret_response = TAKE_PTR(resp);
	return 0;
}

/* ---- server side ---- */

size_t proto_response_max(enum proto_op op)
{
	return op == PROTO_OP_STATUS || op == PROTO_OP_EXPLAIN ? PROTO_LARGE_MSG_MAX : PROTO_MSG_MAX;
}

int proto_response_encode(const cJSON *resp, size_t max, char **ret, size_t *ret_len, struct error *err)
{
	_cleanup_free_ char *text = NULL;
	char *line;
	size_t n;

	if (!cJSON_IsObject(resp) || !cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(resp, "ok")))
		return error_set(err, EINVAL, "encode response: not an object with a boolean 'ok'");
	text = cJSON_PrintUnformatted(resp);
	if (!text)
		return error_set(err, ENOMEM, "encode response: out of memory");
	/* cJSON escapes control characters in strings: the text has no newline */
	n = strlen(text);
	if (n + 1 > max)
		return error_set(err, EMSGSIZE, "encode response: %zu bytes exceed %zu", n + 1, max);
	line = realloc(text, n + 2);
	if (!line)
		return error_set(err, ENOMEM, "encode response: out of memory");
	text = NULL;
	line[n] = '\n';
	line[n + 1] = '\0';
	*ret = line;
	*ret_len = n + 1;
	return 0;
}

char *proto_response_error_line(const char *msg)
{
	_cleanup_json_ cJSON *j = cJSON_CreateObject();
	char *line = NULL;
	size_t n;

	if (!j || !cJSON_AddFalseToObject(j, "ok") || !cJSON_AddStringToObject(j, "error", msg ? msg : "error"))
		return NULL;
	if (proto_response_encode(j, PROTO_LARGE_MSG_MAX, &line, &n, NULL) < 0)
		return NULL;
	return line;
}
