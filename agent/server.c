/* server.c — the agent's plugin socket (see server.h): a non-blocking unix
 * stream listener on sd-event, one connection = one request line and one
 * response line under a deadline, peers checked with SO_PEERCRED, answers
 * from the agent's ops, counters for metrics. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <libgen.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "json.h"
#include "metrics/metrics.h"
#include "server.h"

#define CONN_BUF_INITIAL 4096
#define ACCEPT_BURST     64 /* accept() calls per wakeup, so one busy listener cannot starve the loop */

struct conn {
	struct agent_server *s;
	struct conn *prev, *next;
	int fd;
	sd_event_source *io, *timer;
	bool denied;  /* peer is not uid 0: the answer is "permission denied" whatever it asks */
	bool writing; /* request read, response being sent */
	char *in;
	size_t in_len, in_cap;
	char *out;
	size_t out_len, out_off;
};

struct agent_server {
	sd_event *loop;
	char *path;
	int fd;
	dev_t dev;
	ino_t ino;
	sd_event_source *listen_src;
	struct agent_server_ops ops;
	void *ud;
	uint64_t timeout_us;
	struct conn *conns;
	unsigned n_conns;
	struct agent_server_stats stats;
};

static const char *const result_names[_SERVER_RESULT_MAX] = {
        [SERVER_RESULT_OK] = "ok",
        [SERVER_RESULT_NOT_FOUND] = "not_found",
        [SERVER_RESULT_ERROR] = "error",
};

const char *agent_server_result_name(enum agent_server_result r)
{
	return r >= 0 && r < _SERVER_RESULT_MAX ? result_names[r] : NULL;
}

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* ---- connections ---- */

static void listener_update(struct agent_server *s)
{
	if (s->listen_src)
		(void)sd_event_source_set_enabled(s->listen_src,
		                                  s->n_conns < AGENT_SERVER_CONN_MAX ? SD_EVENT_ON : SD_EVENT_OFF);
}

static void conn_free(struct conn *c)
{
	struct agent_server *s = c->s;

	c->io = sd_event_source_disable_unref(c->io);
	c->timer = sd_event_source_disable_unref(c->timer);
	if (c->fd >= 0)
		close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->n_conns--;
	s->stats.active = s->n_conns;
	free(c->in);
	free(c->out);
	free(c);
	listener_update(s);
}

/* Send what is left of the response; close when done or on error. */
static void conn_write(struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t k = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return; /* EPOLLOUT will call again */
			c->s->stats.io_errors++;
			conn_free(c);
			return;
		}
		c->out_off += (size_t)k;
	}
	conn_free(c);
}

/* Queue the response line (owned) and start writing it. */
static void conn_respond(struct conn *c, char *line)
{
	if (!line) { /* ENOMEM: nothing sensible to say */
		c->s->stats.io_errors++;
		conn_free(c);
		return;
	}
	c->out = line;
	c->out_len = strlen(line);
	c->out_off = 0;
	c->writing = true;
	if (sd_event_source_set_io_events(c->io, EPOLLOUT) < 0) {
		c->s->stats.io_errors++;
		conn_free(c);
		return;
	}
	conn_write(c);
}

static void conn_respond_error(struct conn *c, const char *msg)
{
	conn_respond(c, proto_response_error_line(msg));
}

/* A new object {"ok":true, <extra>, ...the members of body}. body is consumed. */
static cJSON *response_wrap(cJSON *body, const char *extra_key, bool extra_val)
{
	_cleanup_json_ cJSON *in = body;
	_cleanup_json_ cJSON *out = cJSON_CreateObject();

	if (!out || !cJSON_AddTrueToObject(out, "ok"))
		return NULL;
	if (extra_key && !cJSON_AddBoolToObject(out, extra_key, extra_val))
		return NULL;
	if (!in)
		return TAKE_PTR(out);
	if (!cJSON_IsObject(in))
		return NULL;
	while (in->child) {
		cJSON *m = cJSON_DetachItemViaPointer(in, in->child);
		/* the wrapper's own keys win: the agent cannot forge "ok" */
		if (!m->string || streq(m->string, "ok") || (extra_key && streq(m->string, extra_key))) {
			cJSON_Delete(m);
			continue;
		}
		if (!cJSON_AddItemToObject(out, m->string, m)) {
			cJSON_Delete(m);
			return NULL;
		}
	}
	return TAKE_PTR(out);
}

/* Answer one decoded request through the ops. Returns the response object
 * (NULL = internal error, *ret_result set). */
static cJSON *dispatch(struct agent_server *s, const struct proto_request *r, enum agent_server_result *ret_result,
                       const char **ret_errmsg)
{
	const struct agent_server_ops *o = &s->ops;
	cJSON *resp;

	*ret_result = SERVER_RESULT_ERROR;
	*ret_errmsg = "out of memory";
	switch (r->op) {
	case PROTO_OP_POD: {
		_cleanup_json_ cJSON *ann = NULL;
		bool found = false;
		int q;

		if (!o->pod_annotations)
			break;
		q = o->pod_annotations(s->ud, r->namespace_, r->name, r->uid, &ann, &found);
		if (q < 0) {
			*ret_errmsg = "the agent could not look the pod up";
			return NULL;
		}
		resp = response_wrap(NULL, "found", found);
		if (!resp)
			return NULL;
		if (found) {
			cJSON *a = ann && cJSON_IsObject(ann) ? TAKE_PTR(ann) : cJSON_CreateObject();
			if (!a || !cJSON_AddItemToObject(resp, "annotations", a)) {
				cJSON_Delete(a);
				cJSON_Delete(resp);
				return NULL;
			}
		}
		*ret_result = found ? SERVER_RESULT_OK : SERVER_RESULT_NOT_FOUND;
		return resp;
	}
	case PROTO_OP_ATTACHED:
	case PROTO_OP_DETACHED:
		if (!o->attachment)
			break;
		o->attachment(s->ud, r->op == PROTO_OP_ATTACHED, r);
		resp = response_wrap(NULL, NULL, false);
		if (resp)
			*ret_result = SERVER_RESULT_OK;
		return resp;
	case PROTO_OP_STATUS:
		if (!o->status)
			break;
		resp = o->status(s->ud);
		if (!resp)
			return NULL;
		resp = response_wrap(resp, NULL, false);
		if (resp)
			*ret_result = SERVER_RESULT_OK;
		return resp;
	case PROTO_OP_EXPLAIN: {
		bool found = false;
		cJSON *e;

		if (!o->explain)
			break;
		e = o->explain(s->ud, r->namespace_, r->name, &found);
		if (found && !e)
			return NULL;
		resp = response_wrap(found ? e : NULL, "found", found);
		if (!found)
			cJSON_Delete(e);
		if (resp)
			*ret_result = found ? SERVER_RESULT_OK : SERVER_RESULT_NOT_FOUND;
		return resp;
	}
	default:
		break;
	}
	*ret_errmsg = "operation not supported by this agent";
	return NULL;
}

static void conn_handle(struct conn *c, size_t line_len)
{
	struct agent_server *s = c->s;
	struct proto_request r;
	struct error e = {0};
	enum agent_server_result result;
	const char *errmsg = NULL;
	_cleanup_json_ cJSON *resp = NULL;
	char *line = NULL;
	size_t n;
	uint64_t t0 = now_us();

	if (c->denied) {
		conn_respond_error(c, "permission denied");
		return;
	}
	if (proto_request_decode(c->in, line_len, &r, &e) < 0) {
		s->stats.invalid++;
		conn_respond_error(c, e.msg);
		return;
	}
	resp = dispatch(s, &r, &result, &errmsg);
	proto_request_done(&r);
	if (resp && proto_response_encode(resp, proto_response_max(r.op), &line, &n, &e) < 0) {
		result = SERVER_RESULT_ERROR;
		errmsg = e.msg;
	}
	s->stats.requests[r.op][result]++;
	metrics_histogram_observe(&s->stats.latency[r.op], &metrics_buckets_plugin, (double)(now_us() - t0) / 1e6);
	conn_respond(c, line ? line : proto_response_error_line(errmsg ? errmsg : "internal error"));
}

/* Read until a full line (or EOF); then answer. */
static void conn_read(struct conn *c)
{
	for (;;) {
		char *nl;
		ssize_t k;

		if (c->in_len == c->in_cap) {
			size_t cap = c->in_cap ? c->in_cap * 2 : CONN_BUF_INITIAL;
			char *t;

			if (c->in_cap >= PROTO_MSG_MAX) {
				c->s->stats.oversized++;
				conn_respond_error(c, "request exceeds 65536 bytes");
				return;
			}
			if (cap > PROTO_MSG_MAX)
				cap = PROTO_MSG_MAX;
			t = realloc(c->in, cap);
			if (!t) {
				c->s->stats.io_errors++;
				conn_free(c);
				return;
			}
			c->in = t;
			c->in_cap = cap;
		}
		k = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			c->s->stats.io_errors++;
			conn_free(c);
			return;
		}
		if (k == 0) {
			/* EOF: a request without its newline is still a request (shutdown(SHUT_WR)) */
			if (c->in_len == 0) {
				conn_free(c);
				return;
			}
			conn_handle(c, c->in_len);
			return;
		}
		nl = memchr(c->in + c->in_len, '\n', (size_t)k);
		c->in_len += (size_t)k;
		if (nl) {
			conn_handle(c, (size_t)(nl - c->in) + 1);
			return;
		}
	}
}

static int on_conn_io(sd_event_source *src, int fd, uint32_t revents, void *ud)
{
	struct conn *c = ud;

	if (c->writing)
		conn_write(c);
	else
		conn_read(c);
	return 0;
}

static int on_conn_timeout(sd_event_source *src, uint64_t usec, void *ud)
{
	struct conn *c = ud;

	c->s->stats.timeouts++;
	conn_free(c);
	return 0;
}

static void conn_new(struct agent_server *s, int fd)
{
	struct conn *c = calloc(1, sizeof(*c));
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int r;

	if (!c) {
		s->stats.io_errors++;
		close(fd);
		return;
	}
	c->s = s;
	c->fd = fd;
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->n_conns++;
	s->stats.active = s->n_conns;
	s->stats.connections++;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || len != sizeof(cred) || cred.uid != 0) {
		c->denied = true;
		s->stats.denied++;
	}
	r = sd_event_add_io(s->loop, &c->io, fd, EPOLLIN, on_conn_io, c);
	if (r >= 0)
		r = sd_event_add_time_relative(s->loop, &c->timer, CLOCK_MONOTONIC, s->timeout_us, 1000,
		                               on_conn_timeout, c);
	if (r < 0) {
		s->stats.io_errors++;
		conn_free(c);
		return;
	}
	listener_update(s);
	/* the request is often there already */
	conn_read(c);
}

static int on_accept(sd_event_source *src, int fd, uint32_t revents, void *ud)
{
	struct agent_server *s = ud;

	for (int i = 0; i < ACCEPT_BURST && s->n_conns < AGENT_SERVER_CONN_MAX; i++) {
		int cfd = accept4(s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				s->stats.io_errors++; /* EMFILE etc.: the next wakeup retries */
			break;
		}
		conn_new(s, cfd);
	}
	return 0;
}

/* ---- setup ---- */

/* The socket's directory: create it 0700, or check an existing one. */
static int socket_dir_prepare(const char *path, struct error *err)
{
	_cleanup_free_ char *copy = strdup(path);
	const char *dir;
	struct stat st;

	if (!copy)
		return error_set(err, ENOMEM, "agent socket: out of memory");
	dir = dirname(copy);
	if (mkdir(dir, 0700) == 0) {
		if (chmod(dir, 0700) < 0)
			return error_set(err, errno, "agent socket directory '%s': chmod: %s", dir, strerror(errno));
		return 0;
	}
	if (errno != EEXIST)
		return error_set(err, errno, "agent socket directory '%s': %s", dir, strerror(errno));
	if (stat(dir, &st) < 0)
		return error_set(err, errno, "agent socket directory '%s': %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return error_set(err, ENOTDIR, "agent socket directory '%s' is not a directory", dir);
	if (st.st_uid != geteuid())
		return error_set(err, EPERM,
		                 "agent socket directory '%s' is owned by uid %u, not by us (uid %u): refusing it", dir,
		                 (unsigned)st.st_uid, (unsigned)geteuid());
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return error_set(err, EPERM,
		                 "agent socket directory '%s' is writable by group or others (mode %04o): refusing it",
		                 dir, (unsigned)(st.st_mode & 07777));
	return 0;
}

/* Remove a socket left by a previous run; refuse to touch anything else. */
static int stale_socket_remove(const char *path, const struct sockaddr_un *sa, struct error *err)
{
	_cleanup_close_ int probe = -1;
	struct stat st;

	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		return error_set(err, errno, "agent socket '%s': %s", path, strerror(errno));
	}
	if (!S_ISSOCK(st.st_mode))
		return error_set(err, EEXIST,
		                 "agent socket '%s' exists and is not a socket: refusing to "
		                 "replace it",
		                 path);
	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (probe >= 0 && connect(probe, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
		return error_set(err, EADDRINUSE,
		                 "agent socket '%s': another process is listening on it (another agent running?)",
		                 path);
	if (unlink(path) < 0 && errno != ENOENT)
		return error_set(err, errno, "agent socket '%s': remove the stale socket: %s", path, strerror(errno));
	return 0;
}

int agent_server_new(sd_event *loop, const char *socket_path, const struct agent_server_ops *ops, void *ud,
                     struct agent_server **ret, struct error *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct agent_server *s;
	struct stat st;
	int r;

	*ret = NULL;
	if (!socket_path || !*socket_path)
		return error_set(err, EINVAL, "agent socket path is empty");
	if (strlen(socket_path) >= sizeof(sa.sun_path))
		return error_set(err, ENAMETOOLONG, "agent socket path '%s' is too long (at most %zu bytes)",
		                 socket_path, sizeof(sa.sun_path) - 1);
	memcpy(sa.sun_path, socket_path, strlen(socket_path) + 1);
	r = socket_dir_prepare(socket_path, err);
	if (r < 0)
		return r;
	r = stale_socket_remove(socket_path, &sa, err);
	if (r < 0)
		return r;

	s = calloc(1, sizeof(*s));
	if (!s)
		return error_set(err, ENOMEM, "agent socket: out of memory");
	s->fd = -1;
	s->loop = sd_event_ref(loop);
	s->timeout_us = (uint64_t)AGENT_SERVER_TIMEOUT_MS_DEFAULT * 1000;
	if (ops)
		s->ops = *ops;
	s->ud = ud;
	s->path = strdup(socket_path);
	if (!s->path) {
		agent_server_free(s);
		return error_set(err, ENOMEM, "agent socket: out of memory");
	}
	s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->fd < 0) {
		r = error_set(err, errno, "agent socket '%s': socket: %s", socket_path, strerror(errno));
		goto fail;
	}
	if (bind(s->fd, (const struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = error_set(err, errno, "agent socket '%s': bind: %s", socket_path, strerror(errno));
		goto fail;
	}
	if (lstat(socket_path, &st) < 0) {
		r = error_set(err, errno, "agent socket '%s': %s", socket_path, strerror(errno));
		goto fail;
	}
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	if (chmod(socket_path, 0600) < 0) {
		r = error_set(err, errno, "agent socket '%s': chmod 0600: %s", socket_path, strerror(errno));
		goto fail;
	}
	if (listen(s->fd, SOMAXCONN) < 0) {
		r = error_set(err, errno, "agent socket '%s': listen: %s", socket_path, strerror(errno));
		goto fail;
	}
	r = sd_event_add_io(loop, &s->listen_src, s->fd, EPOLLIN, on_accept, s);
	if (r < 0) {
		r = error_set(err, -r, "agent socket '%s': event source: %s", socket_path, strerror(-r));
		goto fail;
	}
	(void)sd_event_source_set_description(s->listen_src, "agent-socket");
	*ret = s;
	return 0;
fail:
	agent_server_free(s);
	return r;
}

void agent_server_free(struct agent_server *s)
{
	struct stat st;

	if (!s)
		return;
	while (s->conns)
		conn_free(s->conns);
	s->listen_src = sd_event_source_disable_unref(s->listen_src);
	if (s->fd >= 0) {
		close(s->fd);
		/* unlink only our own socket (a new agent may have replaced it) */
		if (s->ino && lstat(s->path, &st) == 0 && st.st_dev == s->dev && st.st_ino == s->ino)
			(void)unlink(s->path);
	}
	free(s->path);
	sd_event_unref(s->loop);
	free(s);
}

void agent_server_set_timeout_ms(struct agent_server *s, unsigned timeout_ms)
{
	if (s && timeout_ms > 0)
		s->timeout_us = (uint64_t)timeout_ms * 1000;
}

void agent_server_get_stats(const struct agent_server *s, struct agent_server_stats *ret)
{
	if (s)
		*ret = s->stats;
	else
		memset(ret, 0, sizeof(*ret));
}

void agent_server_write_metrics(const struct agent_server *s, struct metrics_writer *w)
{
	static const char *const req_help = "Requests of the CNI plugin on the agent socket, by op and result.";
	static const char *const lat_help = "Time the agent took to answer plugin requests, by op.";
	static const char *const rej_help = "Plugin socket connections refused or dropped, by reason.";
	const struct agent_server_stats *st;
	struct {
		const char *reason;
		uint64_t n;
	} rejected[5];

	if (!s || !w)
		return;
	st = &s->stats;
	for (int op = 0; op < _PROTO_OP_MAX; op++) {
		for (int r = 0; r < _SERVER_RESULT_MAX; r++)
			metrics_write(w, "aiqos_plugin_requests_total", req_help, "counter",
			              (double)st->requests[op][r], "op", proto_op_name((enum proto_op)op), "result",
			              agent_server_result_name((enum agent_server_result)r), NULL);
		metrics_write_hist(w, "aiqos_plugin_request_duration_seconds", lat_help, &metrics_buckets_plugin,
		                   &st->latency[op], "op", proto_op_name((enum proto_op)op), NULL);
	}
	rejected[0].reason = "denied";
	rejected[0].n = st->denied;
	rejected[1].reason = "invalid";
	rejected[1].n = st->invalid;
	rejected[2].reason = "oversized";
	rejected[2].n = st->oversized;
	rejected[3].reason = "timeout";
	rejected[3].n = st->timeouts;
	rejected[4].reason = "io_error";
	rejected[4].n = st->io_errors;
	for (size_t i = 0; i < ARRAY_SIZE(rejected); i++)
		metrics_write(w, "aiqos_plugin_rejected_total", rej_help, "counter", (double)rejected[i].n, "reason",
		              rejected[i].reason, NULL);
	metrics_write(w, "aiqos_plugin_connections_total", "Connections accepted on the plugin socket.", "counter",
	              (double)st->connections, NULL);
	metrics_write(w, "aiqos_plugin_connections_active", "Connections open on the plugin socket now.", "gauge",
	              (double)st->active, NULL);
}
