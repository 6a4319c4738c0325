/* test_agent_server.c — the agent's plugin socket: every op through fake
 * agent ops with the real client (proto_call) in a second thread while the
 * test drives the sd-event loop; socket/directory permissions, stale
 * sockets, non-root peers (forked, setuid), oversized and slow requests,
 * many concurrent connections, and the counters. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "../../agent/metrics/metrics.h"
#include "../../agent/server.h"
#include "t.h"

/* ---- fake agent ---- */

struct fake {
	unsigned attached, detached, status_calls;
	struct proto_request last;
};

static int fake_pod(void *ud, const char *ns, const char *name, const char *uid, cJSON **ret, bool *found)
{
	if (streq(ns, "fail"))
		return -EIO;
	*found = false;
	if (streq(ns, "default") && streq(name, "web")) {
		*ret = cJSON_Parse("{\"ai.workload\":\"inference\",\"kubernetes.io/egress-bandwidth\":\"10M\"}");
		*found = true;
	} else if (streq(ns, "default") && streq(name, "plain")) {
		*found = true; /* known, no annotations */
	}
	return 0;
}

static void fake_attachment(void *ud, bool attached, const struct proto_request *r)
{
	struct fake *f = ud;

	if (attached)
		f->attached++;
	else
		f->detached++;
	f->last = *r;
}

static cJSON *fake_status(void *ud)
{
	struct fake *f = ud;

	f->status_calls++;
	/* "ok": false inside must not leak into the response */
	return cJSON_Parse("{\"ok\":false,\"node\":\"n1\",\"mode\":\"mixed\",\"pods\":[{\"namespace\":\"default\","
	                   "\"name\":\"web\",\"class\":\"inference\"}]}");
}

static cJSON *fake_explain(void *ud, const char *ns, const char *name, bool *found)
{
	*found = streq(ns, "default") && streq(name, "web");
	if (!*found)
		return NULL;
	return cJSON_Parse(
	        "{\"namespace\":\"default\",\"name\":\"web\",\"found\":false,\"why\":[\"class inference\"]}");
}

static const struct agent_server_ops fake_ops = {
        .pod_annotations = fake_pod,
        .attachment = fake_attachment,
        .status = fake_status,
        .explain = fake_explain,
};

/* ---- harness: a temp dir, the loop, a client thread ---- */

struct env {
	char dir[64];
	char sockdir[96];
	char path[128];
	sd_event *loop;
	struct agent_server *s;
	struct fake fake;
};

static bool env_setup(struct env *e)
{
	struct error err = {0};
	int r;

	memset(e, 0, sizeof(*e));
	snprintf(e->dir, sizeof(e->dir), "/tmp/aqt-srv-XXXXXX");
	if (!mkdtemp(e->dir))
		return false;
	snprintf(e->sockdir, sizeof(e->sockdir), "%s/run", e->dir);
	snprintf(e->path, sizeof(e->path), "%s/agent.sock", e->sockdir);
	if (sd_event_new(&e->loop) < 0)
		return false;
	r = agent_server_new(e->loop, e->path, &fake_ops, &e->fake, &e->s, &err);
	if (r < 0)
		fprintf(stderr, "  agent_server_new: %s\n", err.msg);
	return r == 0;
}

static void env_teardown(struct env *e)
{
	char cmd[128];

	agent_server_free(e->s);
	e->s = NULL;
	sd_event_unref(e->loop);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "  cleanup of %s failed\n", e->dir);
}

struct job {
	void (*fn)(struct env *e, void *arg);
	struct env *e;
	void *arg;
	atomic_int done;
};

static void *job_main(void *p)
{
	struct job *j = p;

	j->fn(j->e, j->arg);
	atomic_store(&j->done, 1);
	return NULL;
}

/* Run fn in a thread while this thread runs the loop; bounded by 20 s. */
static void run_client(struct env *e, void (*fn)(struct env *e, void *arg), void *arg)
{
	struct job j = {.fn = fn, .e = e, .arg = arg};
	pthread_t t;
	int i;

	if (pthread_create(&t, NULL, job_main, &j) != 0) {
		CHECK(!"pthread_create");
		return;
	}
	for (i = 0; i < 2000 && !atomic_load(&j.done); i++)
		sd_event_run(e->loop, 10 * 1000);
	CHECK(atomic_load(&j.done));
	pthread_join(t, NULL);
}

/* A raw client: connect, send data (len bytes), shut down writing if asked,
 * read the answer until EOF (at most size-1 bytes, 5 s). Returns the bytes
 * read, or -errno. */
static int raw_exchange(const char *path, const char *data, size_t len, bool shut, char *out, size_t size)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t got = 0;
	int fd, r;

	str_copy(sa.sun_path, sizeof(sa.sun_path), path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	if (len && send(fd, data, len, MSG_NOSIGNAL) != (ssize_t)len) {
		r = -errno;
		close(fd);
		return r;
	}
	if (shut)
		shutdown(fd, SHUT_WR);
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t k;

		if (poll(&pfd, 1, 5000) <= 0) {
			close(fd);
			return -ETIMEDOUT;
		}
		k = recv(fd, out + got, size - 1 - got, 0);
		if (k < 0 && errno == ECONNRESET)
			k = 0;
		if (k < 0) {
			r = -errno;
			close(fd);
			return r;
		}
		if (k == 0 || got + (size_t)k >= size - 1) {
			got += (size_t)(k > 0 ? k : 0);
			break;
		}
		got += (size_t)k;
	}
	out[got] = '\0';
	close(fd);
	return (int)got;
}

static int call(struct env *e, const struct proto_request *r, cJSON **resp, struct error *err)
{
	return proto_call_max(e->path, r, 2000, PROTO_LARGE_MSG_MAX, resp, err);
}

/* ---- ops ---- */

struct ops_results {
	int pod_r, missing_r, plain_r, fail_r, att_r, det_r, status_r, explain_r, explain_missing_r;
	cJSON *pod, *missing, *plain, *status, *explain, *explain_missing;
	struct error fail_err;
	char unknown[512], noname[512], garbage[512], nonl[512];
};

static void ops_client(struct env *e, void *arg)
{
	struct ops_results *o = arg;
	struct error err = {0};
	struct proto_request r;
	static const char unknown_op[] = "{\"op\":\"reboot\"}\n";
	static const char explain_noname[] = "{\"op\":\"explain\",\"namespace\":\"default\"}\n";
	static const char garbage[] = "{not json\n";
	static const char nonl[] = "{\"op\":\"status\"}";

	r = (struct proto_request){.op = PROTO_OP_POD, .namespace_ = "default", .name = "web", .uid = "u1"};
	o->pod_r = call(e, &r, &o->pod, &err);
	r = (struct proto_request){.op = PROTO_OP_POD, .namespace_ = "default", .name = "nope"};
	o->missing_r = call(e, &r, &o->missing, &err);
	r = (struct proto_request){.op = PROTO_OP_POD, .namespace_ = "default", .name = "plain"};
	o->plain_r = call(e, &r, &o->plain, &err);
	r = (struct proto_request){.op = PROTO_OP_POD, .namespace_ = "fail", .name = "x"};
	o->fail_r = call(e, &r, NULL, &o->fail_err);
	r = (struct proto_request){.op = PROTO_OP_ATTACHED,
	                           .namespace_ = "default",
	                           .name = "web",
	                           .uid = "u1",
	                           .container_id = "c0ffee",
	                           .ifname = "eth0"};
	o->att_r = call(e, &r, NULL, &err);
	r.op = PROTO_OP_DETACHED;
	str_copy(r.container_id, sizeof(r.container_id), "dead");
	o->det_r = call(e, &r, NULL, &err);
	r = (struct proto_request){.op = PROTO_OP_STATUS};
	o->status_r = call(e, &r, &o->status, &err);
	r = (struct proto_request){.op = PROTO_OP_EXPLAIN, .namespace_ = "default", .name = "web"};
	o->explain_r = call(e, &r, &o->explain, &err);
	r = (struct proto_request){.op = PROTO_OP_EXPLAIN, .namespace_ = "default", .name = "gone"};
	o->explain_missing_r = call(e, &r, &o->explain_missing, &err);
	raw_exchange(e->path, unknown_op, strlen(unknown_op), false, o->unknown, sizeof(o->unknown));
	raw_exchange(e->path, explain_noname, strlen(explain_noname), false, o->noname, sizeof(o->noname));
	raw_exchange(e->path, garbage, strlen(garbage), false, o->garbage, sizeof(o->garbage));
	raw_exchange(e->path, nonl, strlen(nonl), true, o->nonl, sizeof(o->nonl));
}

static const char *jstr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

TEST(server_ops)
{
	struct env e;
	struct ops_results o = {0};
	struct agent_server_stats st;
	const cJSON *ann;

	CHECK(env_setup(&e));
	if (!e.s)
		return;
	run_client(&e, ops_client, &o);

	CHECK_INT(o.pod_r, 0);
	CHECK(cJSON_IsTrue(cJSON_GetObjectItem(o.pod, "found")));
	ann = cJSON_GetObjectItem(o.pod, "annotations");
	CHECK_STR(jstr(ann, "ai.workload"), "inference");
	CHECK_STR(jstr(ann, "kubernetes.io/egress-bandwidth"), "10M");

	CHECK_INT(o.missing_r, 0);
	CHECK(cJSON_IsFalse(cJSON_GetObjectItem(o.missing, "found")));
	CHECK(cJSON_GetObjectItem(o.missing, "annotations") == NULL);

	CHECK_INT(o.plain_r, 0);
	CHECK(cJSON_IsTrue(cJSON_GetObjectItem(o.plain, "found")));
	ann = cJSON_GetObjectItem(o.plain, "annotations");
	CHECK(cJSON_IsObject(ann) && ann->child == NULL);

	CHECK_INT(o.fail_r, -EREMOTEIO);
	CHECK_CONTAINS(o.fail_err.msg, "could not look the pod up");

	CHECK_INT(o.att_r, 0);
	CHECK_INT(o.det_r, 0);
	CHECK_INT(e.fake.attached, 1);
	CHECK_INT(e.fake.detached, 1);
	CHECK_STR(e.fake.last.container_id, "dead");
	CHECK_STR(e.fake.last.ifname, "eth0");
	CHECK_STR(e.fake.last.uid, "u1");

	CHECK_INT(o.status_r, 0);
	CHECK(cJSON_IsTrue(cJSON_GetObjectItem(o.status, "ok")));
	CHECK_STR(jstr(o.status, "mode"), "mixed");
	CHECK_STR(jstr(o.status, "node"), "n1");
	CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(o.status, "pods")), 1);
	/* "ok" comes first and only once */
	CHECK(o.status && o.status->child && streq(o.status->child->string, "ok"));
	CHECK(o.status && o.status->child && o.status->child->next && !streq(o.status->child->next->string, "ok"));

	CHECK_INT(o.explain_r, 0);
	CHECK(cJSON_IsTrue(cJSON_GetObjectItem(o.explain, "found")));
	CHECK_STR(jstr(o.explain, "name"), "web");
	CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(o.explain, "why")), 1);
	CHECK_INT(o.explain_missing_r, 0);
	CHECK(cJSON_IsFalse(cJSON_GetObjectItem(o.explain_missing, "found")));

	CHECK_CONTAINS(o.unknown, "\"ok\":false");
	CHECK_CONTAINS(o.unknown, "unknown op 'reboot'");
	CHECK_CONTAINS(o.noname, "explain request has no 'name'");
	CHECK_CONTAINS(o.garbage, "not one valid JSON value");
	CHECK_CONTAINS(o.nonl, "\"mode\":\"mixed\"");
	/* one line each */
	CHECK(strchr(o.unknown, '\n') == o.unknown + strlen(o.unknown) - 1);

	agent_server_get_stats(e.s, &st);
	CHECK_INT(st.requests[PROTO_OP_POD][SERVER_RESULT_OK], 2);
	CHECK_INT(st.requests[PROTO_OP_POD][SERVER_RESULT_NOT_FOUND], 1);
	CHECK_INT(st.requests[PROTO_OP_POD][SERVER_RESULT_ERROR], 1);
	CHECK_INT(st.requests[PROTO_OP_ATTACHED][SERVER_RESULT_OK], 1);
	CHECK_INT(st.requests[PROTO_OP_DETACHED][SERVER_RESULT_OK], 1);
	CHECK_INT(st.requests[PROTO_OP_STATUS][SERVER_RESULT_OK], 2);
	CHECK_INT(st.requests[PROTO_OP_EXPLAIN][SERVER_RESULT_OK], 1);
	CHECK_INT(st.requests[PROTO_OP_EXPLAIN][SERVER_RESULT_NOT_FOUND], 1);
	CHECK_INT(st.invalid, 3);
	CHECK_INT(st.denied, 0);
	CHECK_INT(st.connections, 13);
	CHECK_INT(st.active, 0);

	{
		struct metrics_writer *w = metrics_writer_new();
		char *text;

		agent_server_write_metrics(e.s, w);
		text = metrics_writer_text(w, NULL);
		CHECK_CONTAINS(text, "aiqos_plugin_requests_total{op=\"pod\",result=\"ok\"} 2\n");
		CHECK_CONTAINS(text, "aiqos_plugin_requests_total{op=\"explain\",result=\"not_found\"} 1\n");
		CHECK_CONTAINS(text, "aiqos_plugin_request_duration_seconds_count{op=\"pod\"} 4\n");
		CHECK_CONTAINS(text, "aiqos_plugin_rejected_total{reason=\"invalid\"} 3\n");
		CHECK_CONTAINS(text, "aiqos_plugin_connections_total 13\n");
		CHECK_INT(metrics_writer_dropped(w), 0);
		free(text);
		metrics_writer_free(w);
	}

	cJSON_Delete(o.pod);
	cJSON_Delete(o.missing);
	cJSON_Delete(o.plain);
	cJSON_Delete(o.status);
	cJSON_Delete(o.explain);
	cJSON_Delete(o.explain_missing);
	env_teardown(&e);
}

/* An agent without some ops answers "not supported" instead of crashing. */
static void partial_client(struct env *e, void *arg)
{
	struct error *err = arg;
	struct proto_request r = {.op = PROTO_OP_EXPLAIN, .namespace_ = "a", .name = "b"};

	CHECK_INT(call(e, &r, NULL, err), -EREMOTEIO);
}

TEST(server_missing_ops)
{
	static const struct agent_server_ops none = {0};
	struct env e;
	struct error err = {0}, cerr = {0};

	memset(&e, 0, sizeof(e));
	snprintf(e.dir, sizeof(e.dir), "/tmp/aqt-srv-XXXXXX");
	CHECK(mkdtemp(e.dir) != NULL);
	snprintf(e.path, sizeof(e.path), "%s/agent.sock", e.dir);
	CHECK(sd_event_new(&e.loop) >= 0);
	CHECK_INT(agent_server_new(e.loop, e.path, &none, NULL, &e.s, &err), 0);
	if (e.s)
		run_client(&e, partial_client, &cerr);
	CHECK_CONTAINS(cerr.msg, "operation not supported by this agent");
	env_teardown(&e);
}

/* ---- files and permissions ---- */

TEST(server_socket_files)
{
	struct env e;
	struct stat st;
	struct error err = {0};
	struct agent_server *s2 = NULL;
	char path[192], dir[128];
	int fd;

	CHECK(env_setup(&e));
	if (!e.s)
		return;
	/* the directory was created 0700, the socket is 0600 */
	CHECK(stat(e.sockdir, &st) == 0);
	CHECK_INT(st.st_mode & 07777, 0700);
	CHECK(lstat(e.path, &st) == 0);
	CHECK(S_ISSOCK(st.st_mode));
	CHECK_INT(st.st_mode & 07777, 0600);

	/* a second server on the same path: someone listens there */
	CHECK_INT(agent_server_new(e.loop, e.path, &fake_ops, NULL, &s2, &err), -EADDRINUSE);
	CHECK_CONTAINS(err.msg, "another process is listening");
	CHECK(s2 == NULL);

	/* freeing removes the socket */
	agent_server_free(e.s);
	e.s = NULL;
	CHECK(lstat(e.path, &st) < 0 && errno == ENOENT);

	/* a stale socket (nobody listening) is replaced */
	{
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		str_copy(sa.sun_path, sizeof(sa.sun_path), e.path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
		close(fd);
	}
	CHECK(lstat(e.path, &st) == 0 && S_ISSOCK(st.st_mode));
	err = (struct error){0};
	CHECK_INT(agent_server_new(e.loop, e.path, &fake_ops, NULL, &e.s, &err), 0);
	agent_server_free(e.s);
	e.s = NULL;

	/* a regular file is never removed */
	fd = open(e.path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	close(fd);
	err = (struct error){0};
	CHECK_INT(agent_server_new(e.loop, e.path, &fake_ops, NULL, &e.s, &err), -EEXIST);
	CHECK_CONTAINS(err.msg, "is not a socket");
	CHECK(lstat(e.path, &st) == 0 && S_ISREG(st.st_mode));
	unlink(e.path);

	/* a group- or world-writable directory is refused */
	snprintf(dir, sizeof(dir), "%s/open", e.dir);
	snprintf(path, sizeof(path), "%s/agent.sock", dir);
	CHECK(mkdir(dir, 0700) == 0 && chmod(dir, 0777) == 0);
	err = (struct error){0};
	CHECK_INT(agent_server_new(e.loop, path, &fake_ops, NULL, &s2, &err), -EPERM);
	CHECK_CONTAINS(err.msg, "writable by group or others");
	CHECK(chmod(dir, 0750) == 0);
	err = (struct error){0};
	CHECK_INT(agent_server_new(e.loop, path, &fake_ops, NULL, &s2, &err), 0);
	agent_server_free(s2);
	s2 = NULL;

	/* a directory owned by someone else is refused */
	if (geteuid() == 0) {
		CHECK(chown(dir, 65534, 65534) == 0);
		err = (struct error){0};
		CHECK_INT(agent_server_new(e.loop, path, &fake_ops, NULL, &s2, &err), -EPERM);
		CHECK_CONTAINS(err.msg, "owned by uid 65534");
	}

	/* a path that is not a directory */
	snprintf(path, sizeof(path), "%s/file/agent.sock", e.dir);
	snprintf(dir, sizeof(dir), "%s/file", e.dir);
	fd = open(dir, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	close(fd);
	err = (struct error){0};
	CHECK_INT(agent_server_new(e.loop, path, &fake_ops, NULL, &s2, &err), -ENOTDIR);

	/* bad paths */
	err = (struct error){0};
	CHECK_INT(agent_server_new(e.loop, "", &fake_ops, NULL, &s2, &err), -EINVAL);
	{
		char longp[200];
		memset(longp, 'a', sizeof(longp) - 1);
		longp[0] = '/';
		longp[sizeof(longp) - 1] = '\0';
		CHECK_INT(agent_server_new(e.loop, longp, &fake_ops, NULL, &s2, &err), -ENAMETOOLONG);
	}
	env_teardown(&e);
}

/* ---- peers that are not root ---- */

TEST(server_rejects_non_root)
{
	struct env e;
	struct agent_server_stats st;
	pid_t pid;
	int status = -1, i;

	if (geteuid() != 0) {
		fprintf(stderr, "  (not root: the non-root peer cannot be simulated; covered in CI as root)\n");
		return;
	}
	CHECK(env_setup(&e));
	if (!e.s)
		return;
	pid = fork();
	if (pid == 0) {
		/* child: first with the real permissions (0700 dir, 0600 socket), then
		 * with them opened up, so SO_PEERCRED is what refuses */
		struct proto_request r = {.op = PROTO_OP_STATUS};
		struct error err = {0};
		int q;

		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(10);
		q = proto_call(e.path, &r, 2000, NULL, &err);
		if (q != -EACCES)
			_exit(11);
		/* wait for the parent to open the permissions */
		for (i = 0; i < 500; i++) {
			struct stat s;
			if (stat(e.path, &s) == 0 && (s.st_mode & 0777) == 0666)
				break;
			usleep(10000);
		}
		err = (struct error){0};
		q = proto_call(e.path, &r, 2000, NULL, &err);
		if (q != -EREMOTEIO)
			_exit(12);
		if (!strstr(err.msg, "permission denied"))
			_exit(13);
		_exit(0);
	}
	CHECK(pid > 0);
	for (i = 0; i < 1000; i++) {
		if (i == 20) {
			CHECK(chmod(e.dir, 0755) == 0);
			CHECK(chmod(e.sockdir, 0755) == 0);
			CHECK(chmod(e.path, 0666) == 0);
		}
		sd_event_run(e.loop, 10 * 1000);
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
	}
	CHECK(WIFEXITED(status));
	CHECK_INT(WEXITSTATUS(status), 0);
	agent_server_get_stats(e.s, &st);
	CHECK_INT(st.denied, 1);
	CHECK_INT(e.fake.status_calls, 0);
	env_teardown(&e);
}

/* ---- bounds ---- */

struct size_results {
	int big_r, exact_r, over_r;
	char big[512], exact[512], over[512];
};

static void size_client(struct env *e, void *arg)
{
	struct size_results *o = arg;
	size_t n = PROTO_MSG_MAX + 4000;
	char *buf = malloc(n + 1);
	static const char req[] = "{\"op\":\"status\"}";

	if (!buf)
		return;
	/* no newline within the limit */
	memset(buf, ' ', n);
	o->big_r = raw_exchange(e->path, buf, n, false, o->big, sizeof(o->big));
	/* exactly PROTO_MSG_MAX bytes with the newline: accepted */
	memcpy(buf, req, strlen(req));
	buf[PROTO_MSG_MAX - 1] = '\n';
	o->exact_r = raw_exchange(e->path, buf, PROTO_MSG_MAX, false, o->exact, sizeof(o->exact));
	/* one more byte: refused */
	memset(buf, ' ', n);
	memcpy(buf, req, strlen(req));
	buf[PROTO_MSG_MAX] = '\n';
	o->over_r = raw_exchange(e->path, buf, PROTO_MSG_MAX + 1, false, o->over, sizeof(o->over));
	free(buf);
}

TEST(server_request_size)
{
	struct env e;
	struct size_results o = {0};
	struct agent_server_stats st;

	CHECK(env_setup(&e));
	if (!e.s)
		return;
	run_client(&e, size_client, &o);
	CHECK(o.big_r > 0);
	CHECK_CONTAINS(o.big, "\"ok\":false");
	CHECK_CONTAINS(o.big, "request exceeds 65536 bytes");
	CHECK(o.exact_r > 0);
	CHECK_CONTAINS(o.exact, "\"ok\":true");
	CHECK_CONTAINS(o.over, "request exceeds 65536 bytes");
	agent_server_get_stats(e.s, &st);
	CHECK_INT(st.oversized, 2);
	CHECK_INT(st.requests[PROTO_OP_STATUS][SERVER_RESULT_OK], 1);
	env_teardown(&e);
}

/* A response over its bound becomes an error, not a truncated line. */
static cJSON *huge_status(void *ud)
{
	cJSON *o = cJSON_CreateObject();
	size_t n = PROTO_LARGE_MSG_MAX;
	char *s = malloc(n + 1);

	memset(s, 'x', n);
	s[n] = '\0';
	cJSON_AddStringToObject(o, "blob", s);
	free(s);
	return o;
}

static int big_annotations(void *ud, const char *ns, const char *name, const char *uid, cJSON **ret, bool *found)
{
	char *s = malloc(PROTO_MSG_MAX + 1);

	memset(s, 'y', PROTO_MSG_MAX);
	s[PROTO_MSG_MAX] = '\0';
	*ret = cJSON_CreateObject();
	cJSON_AddStringToObject(*ret, "ai.workload", s);
	free(s);
	*found = true;
	return 0;
}

static void huge_client(struct env *e, void *arg)
{
	struct error *errs = arg;
	struct proto_request r = {.op = PROTO_OP_STATUS};

	CHECK_INT(call(e, &r, NULL, &errs[0]), -EREMOTEIO);
	r = (struct proto_request){.op = PROTO_OP_POD, .namespace_ = "a", .name = "b"};
	CHECK_INT(call(e, &r, NULL, &errs[1]), -EREMOTEIO);
}

TEST(server_response_size)
{
	static const struct agent_server_ops ops = {.status = huge_status, .pod_annotations = big_annotations};
	struct env e;
	struct error err = {0}, errs[2] = {{0}};
	struct agent_server_stats st;

	memset(&e, 0, sizeof(e));
	snprintf(e.dir, sizeof(e.dir), "/tmp/aqt-srv-XXXXXX");
	CHECK(mkdtemp(e.dir) != NULL);
	snprintf(e.path, sizeof(e.path), "%s/agent.sock", e.dir);
	CHECK(sd_event_new(&e.loop) >= 0);
	CHECK_INT(agent_server_new(e.loop, e.path, &ops, NULL, &e.s, &err), 0);
	if (e.s)
		run_client(&e, huge_client, errs);
	CHECK_CONTAINS(errs[0].msg, "exceed 16777216");
	CHECK_CONTAINS(errs[1].msg, "exceed 65536");
	agent_server_get_stats(e.s, &st);
	CHECK_INT(st.requests[PROTO_OP_STATUS][SERVER_RESULT_ERROR], 1);
	CHECK_INT(st.requests[PROTO_OP_POD][SERVER_RESULT_ERROR], 1);
	env_teardown(&e);
}

/* ---- slow clients ---- */

struct slow_results {
	int idle_r, partial_r, fast_r;
	char idle[256], partial[256];
	int64_t fast_ms;
};

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int connect_to(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	str_copy(sa.sun_path, sizeof(sa.sun_path), path);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Read until EOF (bounded); returns bytes or -1. */
static int read_all(int fd, char *buf, size_t size, int timeout_ms)
{
	size_t got = 0;

	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t k;

		if (poll(&pfd, 1, timeout_ms) <= 0)
			return -1;
		k = recv(fd, buf + got, size - 1 - got, 0);
		if (k <= 0 || got + (size_t)k >= size - 1)
			break;
		got += (size_t)k;
	}
	buf[got] = '\0';
	return (int)got;
}

static void slow_client(struct env *e, void *arg)
{
	struct slow_results *o = arg;
	struct proto_request r = {.op = PROTO_OP_STATUS};
	struct error err = {0};
	int idle = connect_to(e->path), partial = connect_to(e->path);
	int64_t t0;

	/* one connects and says nothing, one sends half a line */
	if (partial >= 0)
		send(partial, "{\"op\":", 6, MSG_NOSIGNAL);
	/* meanwhile a normal request is answered at once */
	t0 = mono_ms();
	o->fast_r = call(e, &r, NULL, &err);
	o->fast_ms = mono_ms() - t0;
	/* the slow ones are dropped at the deadline with no answer */
	o->idle_r = idle >= 0 ? read_all(idle, o->idle, sizeof(o->idle), 3000) : -2;
	o->partial_r = partial >= 0 ? read_all(partial, o->partial, sizeof(o->partial), 3000) : -2;
	if (idle >= 0)
		close(idle);
	if (partial >= 0)
		close(partial);
}

TEST(server_slow_clients_time_out)
{
	struct env e;
	struct slow_results o = {0};
	struct agent_server_stats st;

	CHECK(env_setup(&e));
	if (!e.s)
		return;
	agent_server_set_timeout_ms(e.s, 300);
	run_client(&e, slow_client, &o);
	CHECK_INT(o.fast_r, 0);
	CHECK(o.fast_ms < 250);
	CHECK_INT(o.idle_r, 0); /* closed without a byte */
	CHECK_INT(o.partial_r, 0);
	agent_server_get_stats(e.s, &st);
	CHECK_INT(st.timeouts, 2);
	CHECK_INT(st.active, 0);
	env_teardown(&e);
}

/* ---- many connections at once ---- */

struct many {
	int n;
	atomic_int phase; /* 1: every client sent half its request; 2: go on */
	int ok;
	int max_active;
};

static void many_client(struct env *e, void *arg)
{
	struct many *m = arg;
	int *fds = calloc((size_t)m->n, sizeof(int));
	char req[128], buf[512];

	if (!fds)
		return;
	for (int i = 0; i < m->n; i++) {
		fds[i] = connect_to(e->path);
		if (fds[i] >= 0)
			send(fds[i], "{\"op\":\"pod\",", 12, MSG_NOSIGNAL);
	}
	atomic_store(&m->phase, 1);
	while (atomic_load(&m->phase) != 2)
		usleep(1000);
	for (int i = 0; i < m->n; i++) {
		int k = snprintf(req, sizeof(req), "\"namespace\":\"default\",\"name\":\"%s\"}\n", i % 2 ? "web" : "x");
		if (fds[i] >= 0)
			send(fds[i], req, (size_t)k, MSG_NOSIGNAL);
	}
	for (int i = 0; i < m->n; i++) {
		if (fds[i] < 0)
			continue;
		if (read_all(fds[i], buf, sizeof(buf), 5000) > 0 && strstr(buf, "\"ok\":true") &&
		    strstr(buf, i % 2 ? "\"found\":true" : "\"found\":false"))
			m->ok++;
		close(fds[i]);
	}
	free(fds);
}

static void run_many(struct env *e, struct many *m)
{
	struct job j = {.fn = many_client, .e = e, .arg = m};
	struct agent_server_stats st;
	pthread_t t;
	int i;

	CHECK(pthread_create(&t, NULL, job_main, &j) == 0);
	for (i = 0; i < 3000 && !atomic_load(&j.done); i++) {
		sd_event_run(e->loop, 5 * 1000);
		agent_server_get_stats(e->s, &st);
		if ((int)st.active > m->max_active)
			m->max_active = (int)st.active;
		/* let the clients finish once the server holds all it may */
		if (atomic_load(&m->phase) == 1 &&
		    (int)st.active >= (m->n < AGENT_SERVER_CONN_MAX ? m->n : AGENT_SERVER_CONN_MAX))
			atomic_store(&m->phase, 2);
	}
	CHECK(atomic_load(&j.done));
	pthread_join(t, NULL);
}

TEST(server_concurrent_connections)
{
	struct env e;
	struct many m = {.n = 100};
	struct agent_server_stats st;

	CHECK(env_setup(&e));
	if (!e.s)
		return;
	run_many(&e, &m);
	CHECK_INT(m.ok, 100);
	CHECK_INT(m.max_active, 100);
	agent_server_get_stats(e.s, &st);
	CHECK_INT(st.connections, 100);
	CHECK_INT(st.requests[PROTO_OP_POD][SERVER_RESULT_OK], 50);
	CHECK_INT(st.requests[PROTO_OP_POD][SERVER_RESULT_NOT_FOUND], 50);
	CHECK_INT(st.timeouts, 0);
	env_teardown(&e);
}

/* More clients than AGENT_SERVER_CONN_MAX: the rest wait in the backlog and
 * are served as slots free up. */
TEST(server_connection_limit)
{
	struct env e;
	struct many m = {.n = AGENT_SERVER_CONN_MAX + 44};
	struct agent_server_stats st;

	CHECK(env_setup(&e));
	if (!e.s)
		return;
	run_many(&e, &m);
	CHECK_INT(m.ok, m.n);
	CHECK_INT(m.max_active, AGENT_SERVER_CONN_MAX);
	agent_server_get_stats(e.s, &st);
	CHECK_INT(st.connections, m.n);
	CHECK_INT(st.timeouts, 0);
	env_teardown(&e);
}

/* A client that connects and closes at once is harmless. */
static void hangup_client(struct env *e, void *arg)
{
	struct proto_request r = {.op = PROTO_OP_STATUS};
	struct error err = {0};

	for (int i = 0; i < 10; i++) {
		int fd = connect_to(e->path);
		if (fd >= 0)
			close(fd);
	}
	CHECK_INT(call(e, &r, NULL, &err), 0);
}

TEST(server_hangups)
{
	struct env e;
	struct agent_server_stats st;

	CHECK(env_setup(&e));
	if (!e.s)
		return;
	run_client(&e, hangup_client, NULL);
	agent_server_get_stats(e.s, &st);
	CHECK_INT(st.connections, 11);
	CHECK_INT(st.invalid, 0);
	CHECK_INT(st.requests[PROTO_OP_STATUS][SERVER_RESULT_OK], 1);
	CHECK_INT(st.active, 0);
	env_teardown(&e);
}

TEST(server_result_names)
{
	CHECK_STR(agent_server_result_name(SERVER_RESULT_OK), "ok");
	CHECK_STR(agent_server_result_name(SERVER_RESULT_NOT_FOUND), "not_found");
	CHECK_STR(agent_server_result_name(SERVER_RESULT_ERROR), "error");
	CHECK(agent_server_result_name(_SERVER_RESULT_MAX) == NULL);
	CHECK_STR(proto_op_name(PROTO_OP_EXPLAIN), "explain");
	CHECK_INT(proto_response_max(PROTO_OP_POD), PROTO_MSG_MAX);
	CHECK_INT(proto_response_max(PROTO_OP_STATUS), PROTO_LARGE_MSG_MAX);
	CHECK_INT(proto_response_max(PROTO_OP_EXPLAIN), PROTO_LARGE_MSG_MAX);
}

/* explain requests: encode/decode round trip and required fields. */
TEST(proto_explain_request)
{
	struct proto_request r = {.op = PROTO_OP_EXPLAIN, .namespace_ = "default", .name = "web", .uid = "ignored"}, d;
	struct error err = {0};
	char *line = NULL;

	CHECK_INT(proto_request_encode(&r, &line, &err), 0);
	CHECK_STR(line, "{\"op\":\"explain\",\"namespace\":\"default\",\"name\":\"web\"}\n");
	CHECK_INT(proto_request_decode(line, strlen(line), &d, &err), 0);
	CHECK_INT(d.op, PROTO_OP_EXPLAIN);
	CHECK_STR(d.namespace_, "default");
	CHECK_STR(d.name, "web");
	free(line);
	r.name[0] = '\0';
	CHECK_INT(proto_request_encode(&r, &line, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "'name' is empty");
	CHECK_INT(proto_request_decode("{\"op\":\"explain\",\"name\":\"x\"}", 27, &d, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "explain request has no 'namespace'");
}

TEST(proto_response_encode_bounds)
{
	cJSON *j = cJSON_Parse("{\"ok\":true,\"s\":\"a\\nb\"}");
	struct error err = {0};
	char *line = NULL, *e;
	size_t n = 0;

	CHECK_INT(proto_response_encode(j, PROTO_MSG_MAX, &line, &n, &err), 0);
	CHECK_STR(line, "{\"ok\":true,\"s\":\"a\\nb\"}\n");
	CHECK_INT(n, strlen(line));
	free(line);
	CHECK_INT(proto_response_encode(j, 10, &line, &n, &err), -EMSGSIZE);
	cJSON_Delete(j);
	j = cJSON_Parse("{\"s\":1}");
	CHECK_INT(proto_response_encode(j, PROTO_MSG_MAX, &line, &n, &err), -EINVAL);
	cJSON_Delete(j);
	e = proto_response_error_line("bad \"thing\"\n");
	CHECK_STR(e, "{\"ok\":false,\"error\":\"bad \\\"thing\\\"\\n\"}\n");
	free(e);
}
