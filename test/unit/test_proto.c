/* test_proto.c — the plugin <-> agent line protocol: encode/decode round
 * trips, hostile request lines, and proto_call against a real listening unix
 * socket served by a thread of the test (normal reply, silence -> timeout, no
 * socket, early close, oversized and refused replies). */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "proto.h"
#include "t.h"

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

TEST(op_names)
{
	CHECK_STR(proto_op_name(PROTO_OP_POD), "pod");
	CHECK_STR(proto_op_name(PROTO_OP_ATTACHED), "attached");
	CHECK_STR(proto_op_name(PROTO_OP_DETACHED), "detached");
	CHECK_STR(proto_op_name(PROTO_OP_STATUS), "status");
	CHECK(proto_op_name(_PROTO_OP_MAX) == NULL);
	CHECK(proto_op_name(_PROTO_OP_INVALID) == NULL);
}

TEST(round_trip)
{
	static const struct proto_request cases[] = {
	        {.op = PROTO_OP_POD, .namespace_ = "default", .name = "web-0", .uid = "0b7e-11"},
	        {.op = PROTO_OP_POD, .namespace_ = "ns", .name = "no-uid"},
	        {.op = PROTO_OP_ATTACHED,
	         .namespace_ = "kube-system",
	         .name = "x",
	         .uid = "u",
	         .container_id = "c0ffee-1",
	         .ifname = "eth0"},
	        {.op = PROTO_OP_DETACHED, .container_id = "abc", .ifname = "net-1"},
	        {.op = PROTO_OP_STATUS},
	        /* hostile content in values stays inside one line */
	        {.op = PROTO_OP_POD, .namespace_ = "a\"b\\c", .name = "line1\nline2\r\t", .uid = "{\"op\":\"x\"}"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct error e = {0};
		struct proto_request out;
		char *line = NULL;
		int r = proto_request_encode(&cases[i], &line, &e);

		CHECK_INT(r, 0);
		if (r < 0)
			continue;
		size_t n = strlen(line);
		CHECK(n > 0 && line[n - 1] == '\n');
		CHECK(memchr(line, '\n', n - 1) == NULL); /* exactly one line */
		memset(&out, 0x55, sizeof(out));
		CHECK_INT(proto_request_decode(line, n, &out, &e), 0);
		CHECK_INT(out.op, cases[i].op);
		CHECK_STR(out.namespace_, cases[i].namespace_);
		CHECK_STR(out.name, cases[i].name);
		CHECK_STR(out.uid, cases[i].uid);
		CHECK_STR(out.container_id, cases[i].container_id);
		CHECK_STR(out.ifname, cases[i].ifname);
		/* the '\n' is optional */
		CHECK_INT(proto_request_decode(line, n - 1, &out, &e), 0);
		free(line);
	}
}

TEST(encode_refuses_incomplete)
{
	struct proto_request pod = {.op = PROTO_OP_POD, .namespace_ = "ns"};       /* no name */
	struct proto_request att = {.op = PROTO_OP_ATTACHED, .container_id = "c"}; /* no ifname */
	struct proto_request bad = {.op = (enum proto_op)42};
	struct error e = {0};
	char *line = NULL;

	CHECK_INT(proto_request_encode(&pod, &line, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "'name'");
	CHECK_INT(proto_request_encode(&att, &line, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "'ifname'");
	CHECK_INT(proto_request_encode(&bad, &line, &e), -EINVAL);
	CHECK(line == NULL);
}

static char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

TEST(hostile_lines)
{
	char *long_name = repeat('n', 300);
	char *long_if = repeat('i', 16);
	char *huge = repeat(' ', PROTO_MSG_MAX + 1);
	char buf_name[512], buf_if[128];
	static const char nul_line[] = "{\"op\":\"status\"}\0{\"op\":\"pod\"}";

	snprintf(buf_name, sizeof(buf_name), "{\"op\":\"pod\",\"namespace\":\"ns\",\"name\":\"%s\"}", long_name);
	snprintf(buf_if, sizeof(buf_if), "{\"op\":\"attached\",\"containerId\":\"c\",\"ifname\":\"%s\"}", long_if);
	memcpy(huge, "{\"op\":\"status\"}", 15); /* valid JSON, padded past the limit */

	const struct {
		const char *line;
		size_t len; /* 0 = strlen */
		int want;
		const char *msg;
	} cases[] = {
	        {huge, PROTO_MSG_MAX + 1, -EMSGSIZE, "exceeds"},
	        {"hello", 0, -EINVAL, "not one valid JSON"},
	        {"{\"op\":\"status\"", 0, -EINVAL, "not one valid JSON"},
	        {"{\"op\":\"status\"} trailing", 0, -EINVAL, "not one valid JSON"},
	        {"{\"op\":\"status\"}{\"op\":\"status\"}", 0, -EINVAL, "not one valid JSON"},
	        {"[1,2]", 0, -EINVAL, "not a JSON object"},
	        {"\"pod\"", 0, -EINVAL, "not a JSON object"},
	        {"{}", 0, -EINVAL, "no 'op'"},
	        {"{\"namespace\":\"a\",\"name\":\"b\"}", 0, -EINVAL, "no 'op'"},
	        {"{\"op\":5}", 0, -EINVAL, "'op' is not a string"},
	        {"{\"op\":\"nuke\"}", 0, -EOPNOTSUPP, "unknown op 'nuke'"},
	        {"{\"op\":\"POD\",\"namespace\":\"a\",\"name\":\"b\"}", 0, -EOPNOTSUPP, "unknown op"},
	        {"{\"op\":\"pod\",\"namespace\":\"a\"}", 0, -EINVAL, "no 'name'"},
	        {"{\"op\":\"pod\",\"namespace\":\"\",\"name\":\"b\"}", 0, -EINVAL, "'namespace' is empty"},
	        {"{\"op\":\"pod\",\"namespace\":7,\"name\":\"b\"}", 0, -EINVAL, "'namespace' is not a string"},
	        {"{\"op\":\"pod\",\"namespace\":\"a\",\"name\":{\"x\":1}}", 0, -EINVAL, "'name' is not a string"},
	        {buf_name, 0, -ENAMETOOLONG, "'name' is longer than 253"},
	        {buf_if, 0, -ENAMETOOLONG, "'ifname' is longer than 15"},
	        {"{\"op\":\"detached\",\"containerId\":\"c\"}", 0, -EINVAL, "no 'ifname'"},
	        {"{\"op\":\"status\"}\n{\"op\":\"status\"}\n", 0, -EINVAL, "newline"},
	        {nul_line, sizeof(nul_line) - 1, -EINVAL, "NUL"},
	        {"", 0, -EINVAL, "empty"},
	        {"\n", 0, -EINVAL, "empty"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct proto_request out = {.op = PROTO_OP_STATUS, .name = "untouched"};
		struct error e = {0};
		size_t len = cases[i].len ? cases[i].len : strlen(cases[i].line);
		int r = proto_request_decode(cases[i].line, len, &out, &e);
		if (r != cases[i].want)
			fprintf(stderr, "  case %zu: %.60s\n", i, cases[i].line);
		CHECK_INT(r, cases[i].want);
		CHECK_CONTAINS(e.msg, cases[i].msg);
		CHECK_STR(out.name, "untouched"); /* ret not written on failure */
	}
	/* unknown fields are ignored; a JSON null counts as absent */
	{
		struct proto_request out;
		const char *ok = "{\"op\":\"pod\",\"namespace\":\"a\",\"name\":\"b\",\"uid\":null,\"future\":[1]}";
		CHECK_INT(proto_request_decode(ok, strlen(ok), &out, NULL), 0);
		CHECK_STR(out.uid, "");
	}
	free(long_name);
	free(long_if);
	free(huge);
}

/* ---- proto_call against a server thread ---- */

enum server_mode {
	SRV_REPLY,      /* read the request, answer it */
	SRV_SILENT,     /* accept, never answer (until the test is done) */
	SRV_CLOSE,      /* accept, close without a byte */
	SRV_PARTIAL,    /* half a line then close */
	SRV_OVERSIZE,   /* a response line longer than PROTO_MSG_MAX */
	SRV_REFUSE,     /* {"ok":false,"error":...} */
	SRV_NOT_JSON,   /* garbage line */
	SRV_SLOW_BYTES, /* the reply one byte at a time */
};

struct server {
	char path[108];
	int lfd;
	enum server_mode mode;
	pthread_t th;
	int release[2]; /* SRV_SILENT waits on this */
	char got[1024]; /* the request line received */
};

static int read_line(int fd, char *buf, size_t size)
{
	size_t len = 0;
	while (len + 1 < size) {
		ssize_t k = read(fd, buf + len, 1);
		if (k <= 0)
			break;
		if (buf[len] == '\n')
			break;
		len++;
	}
	buf[len] = '\0';
	return (int)len;
}

static void write_str(int fd, const char *s)
{
	size_t n = strlen(s);
	while (n > 0) {
		ssize_t k = write(fd, s, n);
		if (k <= 0)
			return;
		s += k;
		n -= (size_t)k;
	}
}

static void *server_main(void *arg)
{
	struct server *s = arg;
	int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
	char c;

	if (fd < 0)
		return NULL;
	switch (s->mode) {
	case SRV_REPLY:
		read_line(fd, s->got, sizeof(s->got));
		write_str(fd, "{\"ok\":true,\"found\":true,\"annotations\":{\"ai.workload\":\"inference\"}}\n");
		break;
	case SRV_SILENT:
		read_line(fd, s->got, sizeof(s->got));
		if (read(s->release[0], &c, 1) < 0)
			break;
		break;
	case SRV_CLOSE:
		break;
	case SRV_PARTIAL:
		read_line(fd, s->got, sizeof(s->got));
		write_str(fd, "{\"ok\":tr");
		break;
	case SRV_OVERSIZE: {
		char *big = repeat('x', PROTO_MSG_MAX + 10);
		read_line(fd, s->got, sizeof(s->got));
		memcpy(big, "{\"ok\":true,\"pad\":\"", 18);
		write_str(fd, big); /* the client stops reading: a write error ends this */
		free(big);
		break;
	}
	case SRV_REFUSE:
		read_line(fd, s->got, sizeof(s->got));
		write_str(fd, "{\"ok\":false,\"error\":\"pod cache not synced\"}\n");
		break;
	case SRV_NOT_JSON:
		read_line(fd, s->got, sizeof(s->got));
		write_str(fd, "HTTP/1.1 400 Bad Request\n");
		break;
	case SRV_SLOW_BYTES: {
		const char *reply = "{\"ok\":true}\n";
		read_line(fd, s->got, sizeof(s->got));
		for (const char *p = reply; *p; p++) {
			struct timespec ts = {.tv_sec = 0, .tv_nsec = 2 * 1000 * 1000};
			if (write(fd, p, 1) != 1)
				break;
			nanosleep(&ts, NULL);
		}
		break;
	}
	}
	close(fd);
	return NULL;
}

static char test_dir[64];

static void server_start(struct server *s, enum server_mode mode)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	memset(s, 0, sizeof(*s));
	s->mode = mode;
	if (!test_dir[0]) {
		snprintf(test_dir, sizeof(test_dir), "/tmp/aiqos-test-proto.XXXXXX");
		if (!mkdtemp(test_dir))
			abort();
	}
	snprintf(s->path, sizeof(s->path), "%s/agent.sock", test_dir);
	unlink(s->path);
	memcpy(sa.sun_path, s->path, strlen(s->path) + 1);
	s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s->lfd, 4) < 0 ||
	    pipe2(s->release, O_CLOEXEC) < 0)
		abort();
	pthread_create(&s->th, NULL, server_main, s);
}

static void server_stop(struct server *s)
{
	if (write(s->release[1], "x", 1) < 0) {
		/* the thread may already be gone */
	}
	pthread_join(s->th, NULL);
	close(s->lfd);
	close(s->release[0]);
	close(s->release[1]);
	unlink(s->path);
}

static const struct proto_request pod_req = {.op = PROTO_OP_POD, .namespace_ = "ns", .name = "p", .uid = "u"};

TEST(call_normal_reply)
{
	struct server s;
	struct error e = {0};
	cJSON *resp = NULL;

	server_start(&s, SRV_REPLY);
	CHECK_INT(proto_call(s.path, &pod_req, 1000, &resp, &e), 0);
	server_stop(&s);
	CHECK(resp != NULL);
	if (resp) {
		const cJSON *a = cJSON_GetObjectItemCaseSensitive(resp, "annotations");
		const cJSON *w = cJSON_GetObjectItemCaseSensitive(a, "ai.workload");
		CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "found")));
		CHECK(cJSON_IsString(w) && streq(w->valuestring, "inference"));
		cJSON_Delete(resp);
	}
	/* the server saw exactly our request */
	{
		struct proto_request got;
		CHECK_INT(proto_request_decode(s.got, strlen(s.got), &got, NULL), 0);
		CHECK_INT(got.op, PROTO_OP_POD);
		CHECK_STR(got.namespace_, "ns");
		CHECK_STR(got.uid, "u");
	}
}

TEST(call_slow_bytes)
{
	struct server s;
	cJSON *resp = NULL;

	server_start(&s, SRV_SLOW_BYTES);
	CHECK_INT(proto_call(s.path, &pod_req, 2000, &resp, NULL), 0);
	server_stop(&s);
	cJSON_Delete(resp);
}

TEST(call_timeout)
{
	struct server s;
	struct error e = {0};
	cJSON *resp = NULL;
	int64_t t0, dt;

	server_start(&s, SRV_SILENT);
	t0 = mono_ms();
	CHECK_INT(proto_call(s.path, &pod_req, 200, &resp, &e), -ETIMEDOUT);
	dt = mono_ms() - t0;
	server_stop(&s);
	CHECK(dt >= 190);
	CHECK(dt < 700);
	CHECK(resp == NULL);
	CHECK_CONTAINS(e.msg, "did not answer in time");
	CHECK_CONTAINS(e.msg, s.path);
	CHECK_INT(e.errnum, ETIMEDOUT); /* the errno, unclassified: CNI codes are cni/'s */
	CHECK_INT(e.code, 0);
}

TEST(call_no_socket)
{
	struct error e = {0};
	cJSON *resp = NULL;
	int64_t t0 = mono_ms();

	CHECK_INT(proto_call("/tmp/aiqos-test-proto-does-not-exist.sock", &pod_req, 5000, &resp, &e), -ENOENT);
	CHECK(mono_ms() - t0 < 100);
	CHECK_CONTAINS(e.msg, "aiqos-test-proto-does-not-exist.sock");
}

TEST(call_refused)
{
	/* a socket file nobody listens on */
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char path[128];
	int fd;
	int64_t t0;

	if (!test_dir[0]) {
		snprintf(test_dir, sizeof(test_dir), "/tmp/aiqos-test-proto.XXXXXX");
		if (!mkdtemp(test_dir))
			abort();
	}
	snprintf(path, sizeof(path), "%s/dead.sock", test_dir);
	unlink(path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	close(fd);
	t0 = mono_ms();
	CHECK_INT(proto_call(path, &pod_req, 5000, NULL, NULL), -ECONNREFUSED);
	CHECK(mono_ms() - t0 < 100);
	unlink(path);
}

TEST(call_bad_servers)
{
	static const struct {
		enum server_mode mode;
		int want;
		const char *msg;
	} cases[] = {
	        {SRV_CLOSE, -ECONNRESET, "without answering"}, {SRV_PARTIAL, -EPROTO, "in the middle"},
	        {SRV_OVERSIZE, -EMSGSIZE, "exceeds"},          {SRV_REFUSE, -EREMOTEIO, "pod cache not synced"},
	        {SRV_NOT_JSON, -EPROTO, "not a JSON object"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct server s;
		struct error e = {0};
		cJSON *resp = NULL;
		int64_t t0;
		int r;

		server_start(&s, cases[i].mode);
		t0 = mono_ms();
		r = proto_call(s.path, &pod_req, 3000, &resp, &e);
		CHECK(mono_ms() - t0 < 1000); /* none of these waits for the deadline */
		server_stop(&s);
		if (r != cases[i].want)
			fprintf(stderr, "  mode %d: %s\n", cases[i].mode, e.msg);
		CHECK_INT(r, cases[i].want);
		CHECK_CONTAINS(e.msg, cases[i].msg);
		CHECK(resp == NULL);
	}
}

TEST(call_bad_args)
{
	char longpath[200];

	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[sizeof(longpath) - 1] = '\0';
	CHECK_INT(proto_call(longpath, &pod_req, 100, NULL, NULL), -ENAMETOOLONG);
	CHECK_INT(proto_call("", &pod_req, 100, NULL, NULL), -EINVAL);
	CHECK_INT(proto_call("/tmp/x.sock", &pod_req, 0, NULL, NULL), -EINVAL);
}

__attribute__((destructor)) static void cleanup_test_dir(void)
{
	if (test_dir[0])
		rmdir(test_dir);
}

/* "attached" carries the record the plugin could not write; other ops never
 * send it, a non-object is refused naming the field. */
TEST(attachment_round_trip)
{
	struct proto_request r = {.op = PROTO_OP_ATTACHED, .container_id = "c1", .ifname = "eth0"}, d = {0};
	struct error err = {0};
	char *line = NULL;
	cJSON *rec = cJSON_Parse("{\"version\":1,\"containerId\":\"c1\",\"choices\":[{\"id\":\"x\"}]}");

	r.attachment = rec;
	CHECK_INT(proto_request_encode(&r, &line, &err), 0);
	CHECK_INT(proto_request_decode(line, strlen(line), &d, &err), 0);
	CHECK(d.attachment != NULL && cJSON_Compare(d.attachment, rec, true));
	proto_request_done(&d);
	CHECK(d.attachment == NULL);
	proto_request_done(&d); /* idempotent */
	free(line);
	/* detached: not sent */
	r.op = PROTO_OP_DETACHED;
	CHECK_INT(proto_request_encode(&r, &line, &err), 0);
	CHECK(strstr(line, "attachment") == NULL);
	free(line);
	static const char bad[] = "{\"op\":\"attached\",\"containerId\":\"c1\",\"ifname\":\"eth0\",\"attachment\":[1]}";
	CHECK_INT(proto_request_decode(bad, strlen(bad), &d, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "attachment");
	/* a record too large for one line is refused by the encoder */
	{
		static char big[PROTO_MSG_MAX];
		cJSON *o = cJSON_CreateObject();

		memset(big, 'a', sizeof(big) - 1);
		cJSON_AddStringToObject(o, "pad", big);
		r.op = PROTO_OP_ATTACHED;
		r.attachment = o;
		line = NULL;
		CHECK_INT(proto_request_encode(&r, &line, &err), -EMSGSIZE);
		cJSON_Delete(o);
	}
	cJSON_Delete(rec);
}
