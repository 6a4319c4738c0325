/* test_agent_kube.c — the agent's API client (agent/kube/kube.c) against the
 * fault-injecting fake API server (test/apiserver/fakeapi.py, run as a
 * subprocess per test over TLS): list + watch, bookmarks, 410 (in stream and
 * HTTP), resets mid-event, chunk-split streams, garbage and oversized events,
 * Retry-After, token rotation, TLS refusal, Events, stalls, restarts, teardown
 * with requests in flight, and the watch throughput. Run from the repo root. */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-event.h>
#include <time.h>

#include "../../agent/kube/kube.h"
#include "log.h"
#include "t.h"
#include "../../agent/kube/watch.h"

#define FAKEAPI      "test/apiserver/fakeapi.py"
#define GENCERTS     "test/apiserver/gencerts.sh"
#define PYTHON       "/usr/bin/python3"
#define NODE         "n1"
#define TEST_ALARM_S 60

/* ---- global fixture: a temp dir and the test PKI ---- */

static char g_tmp[128];
static char g_pki[192];
static int g_setup = 0; /* 0 = not yet, 1 = ok, -1 = failed */
static unsigned g_seq;

static void global_cleanup(void)
{
	char cmd[256];

	if (g_tmp[0] && !getenv("AIQOS_TEST_KEEP")) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_tmp);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", g_tmp);
	}
}

static bool global_setup(void)
{
	char cmd[512];
	const char *lvl;

	if (g_setup)
		return g_setup > 0;
	g_setup = -1;
	lvl = getenv("AIQOS_TEST_LOG");
	log_setup("test_agent_kube", lvl ? log_level_from_name(lvl) : LOG_LVL_ERROR, NULL);
	/* the client honours proxy variables; tests talk to loopback only */
	unsetenv("https_proxy");
	unsetenv("HTTPS_PROXY");
	unsetenv("all_proxy");
	unsetenv("ALL_PROXY");
	if (access(FAKEAPI, R_OK) != 0 || access(GENCERTS, R_OK) != 0 || access(PYTHON, X_OK) != 0) {
		fprintf(stderr, "  %s, %s or %s missing (run from the repository root)\n", FAKEAPI, GENCERTS, PYTHON);
		return false;
	}
	snprintf(g_tmp, sizeof(g_tmp), "/tmp/aqt-kube-XXXXXX");
	if (!mkdtemp(g_tmp)) {
		g_tmp[0] = '\0';
		return false;
	}
	atexit(global_cleanup);
	snprintf(g_pki, sizeof(g_pki), "%s/pki", g_tmp);
	snprintf(cmd, sizeof(cmd), "bash %s %s >/dev/null 2>&1", GENCERTS, g_pki);
	if (system(cmd) != 0) {
		fprintf(stderr, "  %s failed\n", GENCERTS);
		return false;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	g_setup = 1;
	return true;
}

static void write_file(const char *path, const char *text)
{
	char tmp[600];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "we");
	if (!f)
		return;
	fputs(text, f);
	fclose(f);
	rename(tmp, path);
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = calloc(1, (size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	if (len && buf)
		*len = (size_t)n;
	return buf;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the fake API server ---- */

struct fake {
	pid_t pid;
	int port, cport;
	char dir[256];
	char token_file[300];
	char log[300];
};

static bool fake_start_opts(struct fake *f, const char *token, const char *const *extra)
{
	char ready[300], certs_arg[200], ca[300];
	const char *argv[40];
	unsigned n = 0;
	uint64_t deadline;
	pid_t pid;

	memset(f, 0, sizeof(*f));
	f->pid = -1;
	if (!global_setup())
		return false;
	snprintf(f->dir, sizeof(f->dir), "%s/f%u", g_tmp, ++g_seq);
	if (mkdir(f->dir, 0700) < 0)
		return false;
	snprintf(f->token_file, sizeof(f->token_file), "%s/token", f->dir);
	snprintf(f->log, sizeof(f->log), "%s/fakeapi.log", f->dir);
	snprintf(ready, sizeof(ready), "%s/ready.json", f->dir);
	snprintf(certs_arg, sizeof(certs_arg), "%s", g_pki);
	snprintf(ca, sizeof(ca), "%s/ca.crt", g_pki);
	argv[n++] = PYTHON;
	argv[n++] = FAKEAPI;
	argv[n++] = "--certs";
	argv[n++] = certs_arg;
	argv[n++] = "--client-ca";
	argv[n++] = ca;
	argv[n++] = "--token-file";
	argv[n++] = f->token_file;
	argv[n++] = "--token";
	argv[n++] = token;
	argv[n++] = "--ready-file";
	argv[n++] = ready;
	argv[n++] = "--bookmark-interval";
	argv[n++] = "0";
	for (unsigned i = 0; extra && extra[i] && n < 38; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;

	pid = fork();
	if (pid < 0)
		return false;
	if (pid == 0) {
		int out = open("/dev/null", O_WRONLY | O_CLOEXEC);
		int err = open(f->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (out >= 0)
			dup2(out, 1);
		if (err >= 0)
			dup2(err, 2);
		execv(PYTHON, (char *const *)(uintptr_t)argv);
		_exit(127);
	}
	f->pid = pid;
	deadline = mono_ms() + 15000;
	while (mono_ms() < deadline) {
		char *txt = read_file(ready, NULL);
		if (txt) {
			cJSON *o = cJSON_Parse(txt);
			free(txt);
			if (o) {
				f->port = cJSON_GetObjectItem(o, "port")->valueint;
				f->cport = cJSON_GetObjectItem(o, "control_port")->valueint;
				cJSON_Delete(o);
				return true;
			}
		}
		if (waitpid(pid, NULL, WNOHANG) == pid) {
			f->pid = -1;
			fprintf(stderr, "  fakeapi exited early; log %s\n", f->log);
			return false;
		}
		usleep(20000);
	}
	fprintf(stderr, "  fakeapi did not get ready\n");
	return false;
}

static void fake_stop(struct fake *f)
{
	uint64_t deadline;

	if (f->pid <= 0)
		return;
	kill(f->pid, SIGTERM);
	deadline = mono_ms() + 5000;
	while (mono_ms() < deadline) {
		if (waitpid(f->pid, NULL, WNOHANG) == f->pid) {
			f->pid = -1;
			break;
		}
		usleep(10000);
	}
	if (f->pid > 0) {
		kill(f->pid, SIGKILL);
		waitpid(f->pid, NULL, 0);
		f->pid = -1;
	}
	if (t_failed_now) {
		char cmd[400];
		fprintf(stderr, "  --- tail of %s\n", f->log);
		snprintf(cmd, sizeof(cmd), "tail -n 25 '%s' >&2", f->log);
		if (system(cmd) != 0)
			fprintf(stderr, "  (no log)\n");
	}
}

static size_t ctl_write(char *data, size_t size, size_t n, void *ud)
{
	char **buf = ud;
	size_t old = *buf ? strlen(*buf) : 0, len = size * n;
	char *nb = realloc(*buf, old + len + 1);
	if (!nb)
		return 0;
	memcpy(nb + old, data, len);
	nb[old + len] = '\0';
	*buf = nb;
	return len;
}

/* A control API call; returns the HTTP status, *ret the parsed answer. */
static long ctl(const struct fake *f, const char *method, const char *path, const char *body, cJSON **ret)
{
	CURL *e = curl_easy_init();
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	char url[512], *resp = NULL;
	long code = 0;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", f->cport, path);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(e, CURLOPT_TIMEOUT, 20L);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, ctl_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, &resp);
	if (body)
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	if (curl_easy_perform(e) == CURLE_OK)
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(e);
	curl_slist_free_all(h);
	if (ret)
		*ret = resp ? cJSON_Parse(resp) : NULL;
	if (code < 200 || code >= 300)
		fprintf(stderr, "  control %s %s -> %ld %s\n", method, path, code, resp ? resp : "");
	free(resp);
	return code;
}

static long ctlf(const struct fake *f, const char *method, const char *path, const char *body)
{
	return ctl(f, method, path, body, NULL);
}

/* PUT n pods named prefixNN on node (one control call, so one batch of events). */
static long put_pods(const struct fake *f, const char *prefix, unsigned first, unsigned n, const char *node)
{
	size_t cap = 256 + (size_t)n * 160, len = 0;
	char *body = malloc(cap);
	long code;

	len += (size_t)snprintf(body + len, cap - len, "{\"items\":[");
	for (unsigned i = 0; i < n; i++)
		len += (size_t)snprintf(body + len, cap - len,
		                        "%s{\"namespace\":\"default\",\"name\":\"%s%05u\",\"node\":\"%s\","
		                        "\"annotations\":{\"ai.workload\":\"inference\"},\"podIP\":\"10.1.%u.%u\"}",
		                        i ? "," : "", prefix, first + i, node, ((first + i) / 250) % 250,
		                        (first + i) % 250 + 1);
	snprintf(body + len, cap - len, "]}");
	code = ctlf(f, "PUT", "/pods", body);
	free(body);
	return code;
}

static long add_fault(const struct fake *f, const char *json)
{
	return ctlf(f, "POST", "/faults", json);
}

/* The API requests the server saw, of one kind ("list", "watch", "event_create"...). */
static cJSON *server_requests(const struct fake *f, const char *kind)
{
	char path[128];
	cJSON *o = NULL, *reqs;

	snprintf(path, sizeof(path), "/stats?kind=%s", kind);
	ctl(f, "GET", path, NULL, &o);
	reqs = cJSON_DetachItemFromObject(o, "requests");
	cJSON_Delete(o);
	return reqs ? reqs : cJSON_CreateArray();
}

static double jnum(const cJSON *o, const char *key);

static int server_count(const struct fake *f, const char *kind)
{
	cJSON *o = NULL;
	int n;

	ctl(f, "GET", "/stats?since=999999999", NULL, &o);
	n = (int)jnum(cJSON_GetObjectItem(o, "counts"), kind);
	cJSON_Delete(o);
	return n;
}

static const char *req_param(const cJSON *req, const char *key)
{
	const cJSON *v;

	if (!req)
		return "(no such request)";
	v = cJSON_GetObjectItem(cJSON_GetObjectItem(req, "params"), key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const char *jstr(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItem(o, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double jnum(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItem(o, key);
	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static long server_rv(const struct fake *f)
{
	cJSON *o = NULL;
	long rv = -1;

	ctl(f, "GET", "/state", NULL, &o);
	if (jstr(o, "resourceVersion"))
		rv = atol(jstr(o, "resourceVersion"));
	cJSON_Delete(o);
	return rv;
}

/* ---- the consumer ---- */

#define SINK_MAX 65536

struct sink_ev {
	enum kube_event_type type;
	char key[96]; /* ns/name */
	char workload[32];
};

struct sink {
	unsigned list_begins, list_ends, list_pods_total;
	bool in_list;
	unsigned n_list;
	char list[64][96];
	unsigned n_ev;
	struct sink_ev *ev;
	bool connected;
	unsigned connects, disconnects;
	char why[1024];
	uint64_t first_ev_ms, last_ev_ms;
	bool list_order_ok;
};

static void s_list_begin(void *ud)
{
	struct sink *s = ud;
	if (s->in_list)
		s->list_order_ok = false;
	s->in_list = true;
	s->list_begins++;
	s->n_list = 0;
}

static void s_list_pod(void *ud, const struct kube_pod *p)
{
	struct sink *s = ud;
	if (!s->in_list)
		s->list_order_ok = false;
	s->list_pods_total++;
	if (s->n_list < 64)
		snprintf(s->list[s->n_list++], sizeof(s->list[0]), "%.30s/%.60s", p->namespace_, p->name);
}

static void s_list_end(void *ud)
{
	struct sink *s = ud;
	if (!s->in_list)
		s->list_order_ok = false;
	s->in_list = false;
	s->list_ends++;
}

static void s_watch_event(void *ud, enum kube_event_type type, const struct kube_pod *p)
{
	struct sink *s = ud;
	const cJSON *w;

	if (s->n_ev >= SINK_MAX)
		return;
	s->last_ev_ms = mono_ms();
	if (s->n_ev == 0)
		s->first_ev_ms = s->last_ev_ms;
	s->ev[s->n_ev].type = type;
	snprintf(s->ev[s->n_ev].key, sizeof(s->ev[0].key), "%.30s/%.60s", p->namespace_, p->name);
	w = cJSON_GetObjectItem(p->annotations, "ai.workload");
	snprintf(s->ev[s->n_ev].workload, sizeof(s->ev[0].workload), "%s", cJSON_IsString(w) ? w->valuestring : "");
	s->n_ev++;
}

static void s_state(void *ud, bool connected, const char *why)
{
	struct sink *s = ud;
	if (connected && !s->connected)
		s->connects++;
	if (!connected && s->connected)
		s->disconnects++;
	s->connected = connected;
	snprintf(s->why, sizeof(s->why), "%s", why);
}

static const struct kube_client_ops sink_ops = {
        .list_begin = s_list_begin,
        .list_pod = s_list_pod,
        .list_end = s_list_end,
        .watch_event = s_watch_event,
        .state = s_state,
};

static void sink_init(struct sink *s)
{
	memset(s, 0, sizeof(*s));
	s->ev = calloc(SINK_MAX, sizeof(*s->ev));
	s->list_order_ok = true;
}

static void sink_done(struct sink *s)
{
	free(s->ev);
	s->ev = NULL;
}

static bool sink_has(const struct sink *s, const char *key)
{
	for (unsigned i = 0; i < s->n_list && i < 64; i++)
		if (streq(s->list[i], key))
			return true;
	return false;
}

/* Delivered events equal exactly ADDED prefix[first..first+n) in order. */
static bool sink_seq_ok(const struct sink *s, unsigned from, const char *prefix, unsigned first, unsigned n)
{
	char key[96];

	if (s->n_ev - from != n) {
		fprintf(stderr, "  delivered %u events, expected %u\n", s->n_ev - from, n);
		return false;
	}
	for (unsigned i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "default/%s%05u", prefix, first + i);
		if (s->ev[from + i].type != KUBE_EVENT_ADDED || !streq(s->ev[from + i].key, key)) {
			fprintf(stderr, "  event %u is %s %s, expected ADDED %s\n", i,
			        kube_event_type_name(s->ev[from + i].type), s->ev[from + i].key, key);
			return false;
		}
	}
	return true;
}

/* ---- the client under test ---- */

struct env {
	struct fake f;
	sd_event *loop;
	struct sink s;
	struct kube_client *c;
	struct kube_client_config cfg;
	struct kube_client_options o;
	bool fake_ok;
};

static void cfg_for(struct kube_client_config *cfg, const struct fake *f, const char *token_file)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->server, sizeof(cfg->server), "https://127.0.0.1:%d", f->port);
	snprintf(cfg->ca_file, sizeof(cfg->ca_file), "%s/ca.crt", g_pki);
	if (token_file)
		snprintf(cfg->token_file, sizeof(cfg->token_file), "%s", token_file);
}

static void opts_for_tests(struct kube_client_options *o)
{
	kube_client_options_default(o);
	o->backoff_base_ms = 50;
	o->backoff_cap_ms = 1000;
	o->relist_jitter_ms = 100;
	o->connect_timeout_ms = 3000;
	o->request_timeout_ms = 10000;
}

/* Start a fake (token "tok-0") and prepare (not start) a client on it. */
static bool env_init(struct env *e, const char *const *fake_args)
{
	memset(e, 0, sizeof(*e));
	alarm(TEST_ALARM_S);
	sink_init(&e->s);
	if (sd_event_new(&e->loop) < 0)
		return false;
	e->fake_ok = fake_start_opts(&e->f, "tok-0", fake_args);
	if (!e->fake_ok)
		return false;
	cfg_for(&e->cfg, &e->f, e->f.token_file);
	opts_for_tests(&e->o);
	return true;
}

static bool env_client(struct env *e)
{
	struct error err = {0};
	int r = kube_client_new_with_options(e->loop, &e->cfg, NODE, &e->o, &sink_ops, &e->s, &e->c, &err);
	if (r < 0) {
		fprintf(stderr, "  kube_client_new: %s\n", err.msg);
		return false;
	}
	return true;
}

static bool env_start(struct env *e)
{
	return env_client(e) && kube_client_start(e->c) == 0;
}

static void env_done(struct env *e)
{
	kube_client_free(e->c);
	e->c = NULL;
	fake_stop(&e->f);
	sd_event_unref(e->loop);
	sink_done(&e->s);
	alarm(0);
}

#define RUN_UNTIL(e, cond, ms)                                                                                 \
	({                                                                                                     \
		uint64_t _end = mono_ms() + (ms);                                                              \
		bool _ok;                                                                                      \
		while (!(_ok = (cond)) && mono_ms() < _end)                                                    \
			sd_event_run((e)->loop, 20000);                                                        \
		if (!_ok)                                                                                      \
			fprintf(stderr, "  %s:%d: timed out after %d ms waiting for %s\n", __FILE__, __LINE__, \
			        (int)(ms), #cond);                                                             \
		_ok;                                                                                           \
	})

static void run_for(struct env *e, unsigned ms)
{
	uint64_t end = mono_ms() + ms;
	while (mono_ms() < end)
		sd_event_run(e->loop, 20000);
}

static struct kube_client_stats stats(const struct env *e)
{
	struct kube_client_stats st;
	kube_client_get_stats(e->c, &st);
	return st;
}

/* ---- tests ---- */

TEST(kube_backoff_full_jitter_bounds)
{
	static const struct {
		unsigned attempt;
		uint64_t rnd;
		uint64_t want;
	} cases[] = {
	        {0, 0, 0},         {0, 200, 200},   {0, 201, 0},         {0, UINT64_MAX, UINT64_MAX % 201},
	        {1, 400, 400},     {3, 1600, 1600}, {3, 1601, 0},        {7, 25600, 25600},
	        {8, 30000, 30000}, {8, 30001, 0},   {200, 30000, 30000}, {200, 12345, 12345},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		CHECK_INT(kube_backoff_ms(cases[i].attempt, 200, 30000, cases[i].rnd), cases[i].want);
}

TEST(kube_new_rejects_bad_input)
{
	struct kube_client_config cfg = {0};
	struct kube_client_options o;
	struct kube_client *c = NULL;
	struct error err = {0};
	sd_event *loop = NULL;

	CHECK(global_setup());
	CHECK(sd_event_new(&loop) >= 0);
	kube_client_options_default(&o);
	snprintf(cfg.server, sizeof(cfg.server), "https://127.0.0.1:1");
	snprintf(cfg.ca_file, sizeof(cfg.ca_file), "%s/ca.crt", g_pki);

	CHECK_INT(kube_client_new(loop, &cfg, "Bad_Node", &sink_ops, NULL, &c, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "Bad_Node");
	CHECK_INT(kube_client_new(loop, &cfg, "", &sink_ops, NULL, &c, &err), -EINVAL);

	snprintf(cfg.server, sizeof(cfg.server), "http://127.0.0.1:1");
	CHECK_INT(kube_client_new(loop, &cfg, NODE, &sink_ops, NULL, &c, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "https");
	snprintf(cfg.server, sizeof(cfg.server), "https://127.0.0.1:1");

	/* insecure-skip-tls-verify is refused unless explicitly allowed */
	cfg.insecure_skip_tls_verify = true;
	CHECK_INT(kube_client_new(loop, &cfg, NODE, &sink_ops, NULL, &c, &err), -EPERM);
	CHECK_CONTAINS(err.msg, "insecure-skip-tls-verify");
	CHECK(c == NULL);
	o.allow_insecure = true;
	CHECK_INT(kube_client_new_with_options(loop, &cfg, NODE, &o, &sink_ops, NULL, &c, &err), 0);
	kube_client_free(c);
	c = NULL;

	kube_client_options_default(&o);
	o.watch_timeout_min_s = 700;
	cfg.insecure_skip_tls_verify = false;
	CHECK_INT(kube_client_new_with_options(loop, &cfg, NODE, &o, &sink_ops, NULL, &c, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "watch timeout");

	/* events: bad arguments */
	kube_client_options_default(&o);
	CHECK_INT(kube_client_new_with_options(loop, &cfg, NODE, &o, &sink_ops, NULL, &c, &err), 0);
	CHECK_INT(kube_post_pod_event(c, "", "p", "u", KUBE_EV_NORMAL, "Tuned", "m"), -EINVAL);
	CHECK_INT(kube_post_pod_event(c, "ns", "a/b", "u", KUBE_EV_NORMAL, "Tuned", "m"), -EINVAL);
	CHECK_INT(kube_post_pod_event(c, "ns", "p", "u", KUBE_EV_NORMAL, "", "m"), -EINVAL);
	CHECK_INT(kube_post_pod_event(c, "ns", "p", "u", (enum kube_event_kind)7, "Tuned", "m"), -EINVAL);
	CHECK_INT(kube_client_events_pending(c), 0);
	CHECK_INT(kube_client_start(c), 0);
	CHECK_INT(kube_client_start(c), -EALREADY);
	kube_client_free(c);
	sd_event_unref(loop);
}

TEST(kube_list_then_watch)
{
	struct env e;
	cJSON *reqs, *r;
	struct kube_client_stats st;

	if (!env_init(&e, NULL))
		goto out;
	/* 3 pods here, 1 elsewhere; pages of 2 -> 2 LIST requests */
	CHECK_INT(put_pods(&e.f, "a", 0, 3, NODE), 200);
	CHECK_INT(put_pods(&e.f, "b", 0, 1, "n2"), 200);
	e.o.page_limit = 2;
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, e.s.list_ends == 1 && e.s.connected, 10000));
	CHECK(e.s.list_order_ok);
	CHECK_INT(e.s.list_begins, 1);
	CHECK_INT(e.s.n_list, 3);
	CHECK(sink_has(&e.s, "default/a00000") && sink_has(&e.s, "default/a00001") && sink_has(&e.s, "default/a00002"));
	st = stats(&e);
	CHECK_INT(st.lists, 1);
	CHECK_INT(st.relists, 0);
	CHECK_INT(st.list_pages, 2);
	CHECK_INT(st.watches, 1);
	CHECK_INT(st.reconnects, 0);
	/* aiqos_api_request_duration_seconds: both pages; the watch once its
	 * headers came (it is still open); no Event */
	CHECK_INT(st.request_seconds[0].count, 2);
	CHECK(st.request_seconds[0].sum > 0 && st.request_seconds[0].sum < 10);
	CHECK_INT(st.request_seconds[1].count, 1);
	CHECK_INT(st.request_seconds[2].count, 0);

	reqs = server_requests(&e.f, "list");
	CHECK_INT(cJSON_GetArraySize(reqs), 2);
	r = cJSON_GetArrayItem(reqs, 0);
	CHECK_STR(req_param(r, "fieldSelector"), "spec.nodeName=n1");
	CHECK_STR(req_param(r, "limit"), "2");
	CHECK_STR(req_param(r, "resourceVersion"), "0"); /* from the watch cache */
	CHECK_STR(jstr(r, "auth"), "token");
	r = cJSON_GetArrayItem(reqs, 1);
	CHECK(req_param(r, "continue") != NULL);
	CHECK(req_param(r, "resourceVersion") == NULL);
	cJSON_Delete(reqs);

	reqs = server_requests(&e.f, "watch");
	r = cJSON_GetArrayItem(reqs, 0);
	CHECK_STR(req_param(r, "watch"), "1");
	CHECK_STR(req_param(r, "allowWatchBookmarks"), "true");
	CHECK_STR(req_param(r, "fieldSelector"), "spec.nodeName=n1");
	CHECK_STR(req_param(r, "resourceVersion"), kube_client_resource_version(e.c));
	{
		const char *t = req_param(r, "timeoutSeconds");
		CHECK(t && atoi(t) >= 300 && atoi(t) <= 600);
	}
	cJSON_Delete(reqs);

	/* ADDED, MODIFIED, DELETED; another node's pod is not seen */
	CHECK_INT(put_pods(&e.f, "a", 3, 1, NODE), 200);
	CHECK_INT(ctlf(&e.f, "PATCH", "/pods/default/a00000", "{\"annotations\":{\"ai.workload\":\"training\"}}"), 200);
	CHECK_INT(put_pods(&e.f, "b", 1, 1, "n2"), 200);
	CHECK_INT(ctlf(&e.f, "DELETE", "/pods/default/a00001", NULL), 200);
	CHECK(RUN_UNTIL(&e, e.s.n_ev >= 3, 10000));
	run_for(&e, 200);
	CHECK_INT(e.s.n_ev, 3);
	if (e.s.n_ev >= 3) {
		CHECK(e.s.ev[0].type == KUBE_EVENT_ADDED);
		CHECK_STR(e.s.ev[0].key, "default/a00003");
		CHECK(e.s.ev[1].type == KUBE_EVENT_MODIFIED);
		CHECK_STR(e.s.ev[1].key, "default/a00000");
		CHECK_STR(e.s.ev[1].workload, "training");
		CHECK(e.s.ev[2].type == KUBE_EVENT_DELETED);
		CHECK_STR(e.s.ev[2].key, "default/a00001");
	}
	CHECK_INT(atol(kube_client_resource_version(e.c)), server_rv(&e.f));
	st = stats(&e);
	CHECK_INT(st.events_in, 3);
	CHECK_INT(st.failures, 0);
	CHECK(kube_client_connected(e.c));
out:
	env_done(&e);
}

TEST(kube_bookmark_advances_rv_and_clean_end_rewatches_at_once)
{
	struct env e;
	struct kube_client_stats st;
	cJSON *reqs;
	long rv;
	uint64_t t0;

	if (!env_init(&e, NULL))
		goto out;
	e.o.backoff_base_ms = 5000; /* a backoff would show */
	e.o.backoff_cap_ms = 5000;
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, e.s.connected, 10000));
	/* changes elsewhere move the rv; only a bookmark tells us */
	CHECK_INT(put_pods(&e.f, "b", 0, 5, "n2"), 200);
	rv = server_rv(&e.f);
	CHECK(atol(kube_client_resource_version(e.c)) < rv);
	CHECK_INT(ctlf(&e.f, "POST", "/bookmark", "{}"), 200);
	CHECK(RUN_UNTIL(&e, stats(&e).bookmarks >= 1, 5000));
	CHECK_INT(atol(kube_client_resource_version(e.c)), rv);
	CHECK_INT(e.s.n_ev, 0);

	/* the server ends the stream (timeoutSeconds): re-watch at once from the bookmark */
	t0 = mono_ms();
	CHECK_INT(ctlf(&e.f, "POST", "/watches/close", "{\"how\":\"end\"}"), 200);
	CHECK(RUN_UNTIL(&e, server_count(&e.f, "watch") == 2, 5000));
	CHECK(mono_ms() - t0 < 2000);
	st = stats(&e);
	CHECK_INT(st.watch_ends, 1);
	CHECK_INT(st.reconnects, 1);
	CHECK_INT(st.failures, 0);
	CHECK_INT(st.lists, 1);
	reqs = server_requests(&e.f, "watch");
	CHECK_INT(cJSON_GetArraySize(reqs), 2);
	CHECK_INT(atol(req_param(cJSON_GetArrayItem(reqs, 1), "resourceVersion")), rv);
	cJSON_Delete(reqs);
	CHECK(RUN_UNTIL(&e, e.s.connected, 5000));
out:
	env_done(&e);
}

TEST(kube_expired_in_stream_relists)
{
	struct env e;
	struct kube_client_stats st;

	if (!env_init(&e, NULL))
		goto out;
	CHECK_INT(put_pods(&e.f, "a", 0, 2, NODE), 200);
	CHECK_INT(add_fault(&e.f, "{\"type\":\"gone\",\"mode\":\"event\",\"after_events\":1}"), 201);
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, e.s.connected, 10000));
	CHECK_INT(put_pods(&e.f, "x", 0, 1, NODE), 200);
	CHECK(RUN_UNTIL(&e, e.s.list_ends == 2 && e.s.connected, 10000));
	CHECK(e.s.list_order_ok);
	CHECK_INT(e.s.list_begins, 2);
	CHECK_INT(e.s.n_list, 3);
	CHECK(sink_has(&e.s, "default/x00000"));
	CHECK_INT(e.s.n_ev, 1); /* x00000 came before the ERROR */
	st = stats(&e);
	CHECK_INT(st.relists, 1);
	CHECK_INT(st.expired, 1);
	CHECK_INT(st.watches, 2);
	CHECK_CONTAINS(e.s.why, "watching");
out:
	env_done(&e);
}

TEST(kube_compaction_below_rv_relists)
{
	struct env e;
	struct kube_client_stats st;

	if (!env_init(&e, NULL))
		goto out;
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, e.s.connected, 10000));
	/* the rv moves on elsewhere, the history is compacted, the stream ends:
	 * the re-watch from our (now too old) rv gets ERROR 410 */
	CHECK_INT(put_pods(&e.f, "b", 0, 3, "n2"), 200);
	CHECK_INT(put_pods(&e.f, "a", 0, 1, NODE), 200);
	CHECK(RUN_UNTIL(&e, e.s.n_ev == 1, 5000));
	CHECK_INT(put_pods(&e.f, "b", 3, 3, "n2"), 200);
	CHECK_INT(ctlf(&e.f, "POST", "/compact", "{}"), 200);
	CHECK_INT(ctlf(&e.f, "POST", "/watches/close", "{\"how\":\"end\"}"), 200);
	CHECK(RUN_UNTIL(&e, e.s.list_ends == 2, 10000));
	CHECK_INT(e.s.n_list, 1);
	st = stats(&e);
	CHECK_INT(st.relists, 1);
	CHECK_INT(st.expired, 1);
	CHECK(RUN_UNTIL(&e, e.s.connected, 5000));
out:
	env_done(&e);
}

TEST(kube_expired_http_relists_consistently)
{
	struct env e;
	struct kube_client_stats st;
	cJSON *reqs;

	if (!env_init(&e, NULL))
		goto out;
	CHECK_INT(put_pods(&e.f, "a", 0, 2, NODE), 200);
	CHECK_INT(add_fault(&e.f, "{\"type\":\"gone\",\"mode\":\"http\",\"match\":\"watch\"}"), 201);
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, e.s.list_ends == 2 && e.s.connected, 10000));
	CHECK(e.s.list_order_ok);
	CHECK_INT(e.s.n_list, 2);
	st = stats(&e);
	CHECK_INT(st.relists, 1);
	CHECK_INT(st.expired, 1);
	CHECK_INT(st.http_errors, 1);
	CHECK_INT(st.failures, 0);
	/* the cached list was too old for its own watch: the relist reads from etcd */
	reqs = server_requests(&e.f, "list");
	CHECK_INT(cJSON_GetArraySize(reqs), 2);
	CHECK_STR(req_param(cJSON_GetArrayItem(reqs, 0), "resourceVersion"), "0");
	CHECK(req_param(cJSON_GetArrayItem(reqs, 1), "resourceVersion") == NULL);
	cJSON_Delete(reqs);
out:
	env_done(&e);
}

TEST(kube_reset_mid_event_resumes_without_loss_or_duplicate)
{
	static const char *const faults[] = {
	        "{\"type\":\"reset\",\"after_events\":3,\"how\":\"fin\"}",
	        "{\"type\":\"reset\",\"after_events\":3,\"how\":\"rst\"}",
	        "{\"type\":\"reset\",\"after_events\":3,\"how\":\"fin\",\"in_chunk\":true}",
	        "{\"type\":\"reset\",\"after_events\":0,\"how\":\"rst\",\"in_chunk\":true}",
	};
	for (size_t i = 0; i < ARRAY_SIZE(faults); i++) {
		struct env e;
		struct kube_client_stats st;
		cJSON *reqs;

		if (!env_init(&e, NULL)) {
			CHECK(false);
			env_done(&e);
			continue;
		}
		CHECK_INT(add_fault(&e.f, faults[i]), 201);
		CHECK(env_start(&e));
		CHECK(RUN_UNTIL(&e, e.s.connected, 10000));
		CHECK_INT(put_pods(&e.f, "p", 0, 10, NODE), 200);
		CHECK(RUN_UNTIL(&e, e.s.n_ev >= 10, 10000));
		run_for(&e, 300);
		if (!sink_seq_ok(&e.s, 0, "p", 0, 10)) {
			fprintf(stderr, "  fault %s\n", faults[i]);
			CHECK(false);
		}
		st = stats(&e);
		CHECK_INT(st.watches, 2);
		CHECK_INT(st.reconnects, 1);
		CHECK_INT(st.failures, 1);
		CHECK_INT(st.lists, 1);
		CHECK_INT(st.events_bad, 0);
		/* the resume point is the last complete event */
		reqs = server_requests(&e.f, "watch");
		if (cJSON_GetArraySize(reqs) == 2) {
			const char *end = jstr(cJSON_GetArrayItem(reqs, 0), "end");
			CHECK(end && strncmp(end, "reset", 5) == 0);
		}
		cJSON_Delete(reqs);
		env_done(&e);
	}
}

TEST(kube_slow_and_split_streams)
{
	static const struct {
		const char *fault;
		unsigned pods;
	} cases[] = {
	        {"{\"type\":\"slow\",\"mode\":\"bytes\",\"delay_ms\":0}", 4},
	        {"{\"type\":\"slow\",\"mode\":\"split\",\"pieces\":7,\"delay_ms\":2}", 10},
	        {"{\"type\":\"slow\",\"mode\":\"coalesce\",\"events\":0}", 30},
	        {"{\"type\":\"slow\",\"mode\":\"coalesce\",\"events\":4}", 30},
	        {"{\"type\":\"slow\",\"mode\":\"pattern\",\"chunk_sizes\":[1,2,3,500,7,4096,13]}", 30},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct env e;
		struct kube_client_stats st;

		if (!env_init(&e, NULL)) {
			CHECK(false);
			env_done(&e);
			continue;
		}
		CHECK_INT(add_fault(&e.f, cases[i].fault), 201);
		CHECK(env_start(&e));
		CHECK(RUN_UNTIL(&e, e.s.connected, 10000));
		CHECK_INT(put_pods(&e.f, "s", 0, cases[i].pods, NODE), 200);
		CHECK(RUN_UNTIL(&e, e.s.n_ev >= cases[i].pods, 15000));
		if (!sink_seq_ok(&e.s, 0, "s", 0, cases[i].pods)) {
			fprintf(stderr, "  fault %s\n", cases[i].fault);
			CHECK(false);
		}
		st = stats(&e);
		CHECK_INT(st.watches, 1);
		CHECK_INT(st.failures, 0);
		CHECK_INT(st.events_bad, 0);
		env_done(&e);
	}
}

/* A skipped event (garbage, over the cap, undecodable) is about an object we
 * may now hold stale: the stream stops and a consistent relist (no
 * resourceVersion=0) replaces the cache, never a silently stale pod. */
TEST(kube_skipped_events_force_a_consistent_relist)
{
	struct env e;
	struct kube_client_stats st;
	cJSON *reqs;

	if (!env_init(&e, NULL))
		goto out;
	CHECK_INT(put_pods(&e.f, "g", 0, 2, NODE), 200);
	/* an event for a pod the server no longer has, too large to read */
	CHECK_INT(add_fault(&e.f, "{\"type\":\"oversized\",\"after_events\":1,\"bytes\":2097152,\"name\":\"big\","
	                          "\"event_type\":\"ADDED\"}"),
	          201);
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, e.s.connected, 10000));
	CHECK_INT(put_pods(&e.f, "g", 2, 3, NODE), 200);
	CHECK(RUN_UNTIL(&e, e.s.list_ends == 2 && e.s.connected, 10000));
	CHECK(e.s.list_order_ok);
	CHECK_INT(e.s.n_list, 5); /* g00000..g00004, the server's truth */
	CHECK(sink_has(&e.s, "default/g00004"));
	CHECK(!sink_has(&e.s, "default/big"));
	st = stats(&e);
	CHECK_INT(st.events_oversized, 1);
	CHECK_INT(st.resyncs, 1);
	CHECK_INT(st.relists, 1);
	reqs = server_requests(&e.f, "list");
	CHECK_INT(cJSON_GetArraySize(reqs), 2);
	CHECK(req_param(cJSON_GetArrayItem(reqs, 1), "resourceVersion") == NULL); /* quorum read */
	cJSON_Delete(reqs);

	/* a line that is not JSON, then a JSON line that is not a valid event:
	 * each forces its relist too */
	CHECK_INT(add_fault(&e.f, "{\"type\":\"garbage\",\"line\":\"{not json\"}"), 201);
	CHECK_INT(ctlf(&e.f, "POST", "/watches/close", "{\"how\":\"end\"}"), 200);
	CHECK(RUN_UNTIL(&e, e.s.list_ends == 3 && e.s.connected, 10000));
	CHECK_INT(add_fault(&e.f, "{\"type\":\"garbage\",\"line\":\"{\\\"type\\\":\\\"ADDED\\\",\\\"object\\\":{"
	                          "\\\"kind\\\":\\\"Pod\\\"}}\"}"),
	          201);
	CHECK_INT(ctlf(&e.f, "POST", "/watches/close", "{\"how\":\"end\"}"), 200);
	CHECK(RUN_UNTIL(&e, e.s.list_ends == 4 && e.s.connected, 10000));
	st = stats(&e);
	CHECK_INT(st.events_bad, 2);
	CHECK_INT(st.resyncs, 3);
	CHECK_INT(e.s.n_list, 5);
	/* and the watch goes on from the relist */
	CHECK_INT(put_pods(&e.f, "g", 5, 1, NODE), 200);
	CHECK(RUN_UNTIL(&e, e.s.n_ev >= 1 && streq(e.s.ev[e.s.n_ev - 1].key, "default/g00005"), 10000));
out:
	env_done(&e);
}

/* The case: a pod grows past the per-event cap (MODIFIED skipped),
 * then is deleted (DELETED skipped too): after the relists it is gone from
 * the cache, not kept forever with its filter. */
TEST(kube_pod_deleted_after_oversized_events_leaves_the_cache)
{
	struct env e;
	char *body;
	size_t pad = 100 * 1024;

	if (!env_init(&e, NULL))
		goto out;
	e.o.max_event_bytes = 64 * 1024;
	e.o.relist_jitter_ms = 0;
	CHECK_INT(put_pods(&e.f, "h", 0, 2, NODE), 200);
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, e.s.connected && e.s.list_ends == 1, 10000));
	CHECK(sink_has(&e.s, "default/h00001"));
	body = malloc(pad + 64);
	CHECK(body != NULL);
	if (!body)
		goto out;
	memcpy(body, "{\"annotations\":{\"aiqos.test/padding\":\"", 38);
	memset(body + 38, 'x', pad);
	strcpy(body + 38 + pad, "\"}}");
	CHECK_INT(ctlf(&e.f, "PATCH", "/pods/default/h00001", body), 200);
	free(body);
	CHECK(RUN_UNTIL(&e, e.s.list_ends == 2 && e.s.connected, 10000));
	CHECK(sink_has(&e.s, "default/h00001")); /* the LIST has no per-event cap */
	CHECK_INT(ctlf(&e.f, "DELETE", "/pods/default/h00001", NULL), 200);
	CHECK(RUN_UNTIL(&e, e.s.list_ends == 3 && e.s.connected, 10000));
	CHECK(!sink_has(&e.s, "default/h00001"));
	CHECK(sink_has(&e.s, "default/h00000"));
	CHECK_INT(stats(&e).events_oversized, 2);
out:
	env_done(&e);
}

TEST(kube_in_stream_error_reconnects_without_relist)
{
	struct env e;
	struct kube_client_stats st;

	if (!env_init(&e, NULL))
		goto out;
	CHECK_INT(
	        add_fault(
	                &e.f,
	                "{\"type\":\"garbage\",\"after_events\":2,\"line\":"
	                "\"{\\\"type\\\":\\\"ERROR\\\",\\\"object\\\":{\\\"kind\\\":\\\"Status\\\",\\\"apiVersion\\\":"
	                "\\\"v1\\\",\\\"status\\\":\\\"Failure\\\",\\\"code\\\":500,\\\"reason\\\":"
	                "\\\"InternalError\\\",\\\"message\\\":\\\"etcd is sad\\\"}}\"}"),
	        201);
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, e.s.connected, 10000));
	CHECK_INT(put_pods(&e.f, "q", 0, 5, NODE), 200);
	CHECK(RUN_UNTIL(&e, e.s.n_ev >= 5, 10000));
	run_for(&e, 200);
	CHECK(sink_seq_ok(&e.s, 0, "q", 0, 5));
	st = stats(&e);
	CHECK_INT(st.lists, 1);
	CHECK_INT(st.relists, 0);
	CHECK_INT(st.failures, 1);
	CHECK_INT(st.watches, 2);
	CHECK_INT(e.s.disconnects, 1);
out:
	env_done(&e);
}

static double request_gap_s(const struct fake *f, const char *kind)
{
	cJSON *reqs = server_requests(f, kind);
	double gap = -1;

	if (cJSON_GetArraySize(reqs) >= 2)
		gap = jnum(cJSON_GetArrayItem(reqs, 1), "t") - jnum(cJSON_GetArrayItem(reqs, 0), "t");
	cJSON_Delete(reqs);
	return gap;
}

TEST(kube_retry_after_is_respected)
{
	static const struct {
		const char *fault;
		const char *kind;
		double wait_s;
	} cases[] = {
	        {"{\"type\":\"status\",\"code\":429,\"retry_after\":2,\"match\":\"list\"}", "list", 2},
	        {"{\"type\":\"status\",\"code\":503,\"retry_after\":1,\"match\":\"watch\"}", "watch", 1},
	        {"{\"type\":\"status\",\"code\":500,\"retry_after\":1,\"match\":\"list\"}", "list", 1},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct env e;
		struct kube_client_stats st;
		double gap;

		if (!env_init(&e, NULL)) {
			CHECK(false);
			env_done(&e);
			continue;
		}
		CHECK_INT(add_fault(&e.f, cases[i].fault), 201);
		CHECK(env_start(&e));
		CHECK(RUN_UNTIL(&e, e.s.connected, 10000));
		gap = request_gap_s(&e.f, cases[i].kind);
		if (gap < cases[i].wait_s || gap > cases[i].wait_s + 2.5) {
			fprintf(stderr, "  %s: gap %.3f s, Retry-After %.0f s\n", cases[i].fault, gap, cases[i].wait_s);
			CHECK(false);
		}
		st = stats(&e);
		CHECK_INT(st.retry_after_waits, 1);
		CHECK_INT(st.http_errors, 1);
		CHECK_INT(st.lists, 1);
		env_done(&e);
	}
}

TEST(kube_no_retry_after_means_backoff)
{
	struct env e;
	struct kube_client_stats st;

	if (!env_init(&e, NULL))
		goto out;
	CHECK_INT(add_fault(&e.f,
	                    "{\"type\":\"status\",\"code\":503,\"retry_after\":null,\"match\":\"list\",\"count\":4}"),
	          201);
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, e.s.connected, 10000));
	st = stats(&e);
	CHECK_INT(st.failures, 4);
	CHECK_INT(st.retry_after_waits, 0);
	CHECK_INT(st.lists, 1);
	CHECK_CONTAINS(e.s.why, "watching");
out:
	env_done(&e);
}

TEST(kube_token_rotation_is_picked_up)
{
	struct env e;
	struct kube_client_stats st;
	cJSON *o = NULL, *reqs;
	char newtok[128] = "";

	if (!env_init(&e, NULL))
		goto out;
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, e.s.connected, 10000));
	/* the kubelet rotates the projected token: the old one stops working */
	CHECK_INT(ctl(&e.f, "POST", "/token/rotate", "{\"keep_old\":false}", &o), 200);
	if (jstr(o, "token"))
		snprintf(newtok, sizeof(newtok), "%s", jstr(o, "token"));
	cJSON_Delete(o);
	/* (a stream that ends at once without any event counts as a failure) */
	CHECK_INT(ctlf(&e.f, "POST", "/bookmark", "{}"), 200);
	CHECK(RUN_UNTIL(&e, stats(&e).bookmarks == 1, 5000));
	CHECK_INT(ctlf(&e.f, "POST", "/watches/close", "{\"how\":\"end\"}"), 200);
	CHECK(RUN_UNTIL(&e, server_count(&e.f, "watch") == 2, 5000));
	st = stats(&e);
	CHECK_INT(st.token_reloads, 1);
	CHECK_INT(st.unauthorized, 0);
	CHECK_INT(st.failures, 0);
	reqs = server_requests(&e.f, "watch");
	CHECK_STR(jstr(cJSON_GetArrayItem(reqs, 1), "token"), newtok);
	CHECK_STR(jstr(cJSON_GetArrayItem(reqs, 1), "auth"), "token");
	cJSON_Delete(reqs);
out:
	env_done(&e);
}

TEST(kube_unauthorized_rereads_token_and_recovers)
{
	struct env e;
	struct kube_client_stats st;
	char client_tok[400];
	cJSON *reqs;
	int n;

	if (!env_init(&e, NULL))
		goto out;
	/* the client has its own token file (the server's moves on first) */
	snprintf(client_tok, sizeof(client_tok), "%s/client-token", e.f.dir);
	write_file(client_tok, "tok-0\n");
	snprintf(e.cfg.token_file, sizeof(e.cfg.token_file), "%s", client_tok);
	e.o.backoff_base_ms = 200;
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, e.s.connected, 10000));
	CHECK_INT(ctlf(&e.f, "PUT", "/token", "{\"token\":\"sekrit-tok-1\"}"), 200);
	CHECK_INT(ctlf(&e.f, "POST", "/watches/close", "{\"how\":\"end\"}"), 200);
	CHECK(RUN_UNTIL(&e, stats(&e).unauthorized >= 1, 5000));
	CHECK(!e.s.connected);
	CHECK_CONTAINS(e.s.why, "401");
	CHECK(!strstr(e.s.why, "tok-0"));
	write_file(client_tok, "sekrit-tok-1\n");
	CHECK(RUN_UNTIL(&e, e.s.connected, 5000));
	st = stats(&e);
	CHECK_INT(st.lists, 1); /* resumed the watch, no relist */
	CHECK(st.token_reloads >= 1);
	reqs = server_requests(&e.f, "watch");
	n = cJSON_GetArraySize(reqs);
	CHECK(n >= 3);
	CHECK_STR(jstr(cJSON_GetArrayItem(reqs, n - 1), "token"), "sekrit-tok-1");
	CHECK_STR(jstr(cJSON_GetArrayItem(reqs, n - 1), "auth"), "token");
	cJSON_Delete(reqs);

	/* a server echoing the token: it never reaches the state callback */
	CHECK_INT(add_fault(&e.f, "{\"type\":\"status\",\"code\":500,\"retry_after\":null,\"match\":\"watch\","
	                          "\"message\":\"token sekrit-tok-1 is bad\"}"),
	          201);
	CHECK_INT(ctlf(&e.f, "POST", "/watches/close", "{\"how\":\"end\"}"), 200);
	CHECK(RUN_UNTIL(&e, strstr(e.s.why, "is bad") != NULL, 5000));
	CHECK_CONTAINS(e.s.why, "<redacted>");
	CHECK(!strstr(e.s.why, "sekrit"));
	CHECK(RUN_UNTIL(&e, e.s.connected, 5000));
out:
	env_done(&e);
}

TEST(kube_tls_wrong_ca_is_refused)
{
	struct env e;
	struct kube_client_stats st;
	cJSON *o = NULL;

	if (!env_init(&e, NULL))
		goto out;
	snprintf(e.cfg.ca_file, sizeof(e.cfg.ca_file), "%s/other-ca.crt", g_pki);
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, stats(&e).failures >= 2, 5000));
	st = stats(&e);
	CHECK_INT(e.s.list_begins, 0);
	CHECK_INT(st.lists, 0);
	CHECK_INT(st.watches, 0);
	CHECK(!e.s.connected);
	CHECK_CONTAINS(e.s.why, "certificate");
	/* the server never saw an HTTP request */
	ctl(&e.f, "GET", "/stats", NULL, &o);
	CHECK(jnum(cJSON_GetObjectItem(o, "counts"), "list") <= 0); /* absent = 0 */
	CHECK(jnum(cJSON_GetObjectItem(o, "counts"), "tls_failure") >= 1);
	cJSON_Delete(o);
out:
	env_done(&e);
}

TEST(kube_tls_wrong_host_refused_and_tls_server_name)
{
	static const char *const args[] = {"--cert", NULL, "--key", NULL, NULL};
	char cert[256], key[256];
	const char *a[5];
	struct env e;

	memcpy(a, args, sizeof(a));
	CHECK(global_setup());
	snprintf(cert, sizeof(cert), "%s/wronghost.crt", g_pki);
	snprintf(key, sizeof(key), "%s/wronghost.key", g_pki);
	a[1] = cert;
	a[3] = key;
	if (!env_init(&e, a))
		goto out;
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, stats(&e).failures >= 1, 5000));
	CHECK_INT(e.s.list_begins, 0);
	CHECK_CONTAINS(e.s.why, "certificate");
	kube_client_free(e.c);
	e.c = NULL;
	/* tls-server-name: verify against the certificate's name, connect to 127.0.0.1 */
	snprintf(e.cfg.tls_server_name, sizeof(e.cfg.tls_server_name), "wrong.invalid");
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, e.s.list_ends == 1 && e.s.connected, 10000));
out:
	env_done(&e);
}

TEST(kube_tls_blobs_client_cert_and_allowed_insecure)
{
	struct env e;
	cJSON *reqs;
	char path[300];

	if (!env_init(&e, NULL))
		goto out;
	/* CA, client certificate and key as data; no token: certificate auth */
	snprintf(path, sizeof(path), "%s/ca.crt", g_pki);
	e.cfg.ca_file[0] = '\0';
	e.cfg.ca_pem = read_file(path, &e.cfg.ca_pem_len);
	snprintf(path, sizeof(path), "%s/client.crt", g_pki);
	e.cfg.cert_pem = read_file(path, &e.cfg.cert_pem_len);
	snprintf(path, sizeof(path), "%s/client.key", g_pki);
	e.cfg.key_pem = read_file(path, &e.cfg.key_pem_len);
	e.cfg.token_file[0] = '\0';
	CHECK(e.cfg.ca_pem && e.cfg.cert_pem && e.cfg.key_pem);
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, e.s.list_ends == 1 && e.s.connected, 10000));
	reqs = server_requests(&e.f, "list");
	CHECK_STR(jstr(cJSON_GetArrayItem(reqs, 0), "auth"), "cert");
	CHECK_STR(jstr(cJSON_GetArrayItem(reqs, 0), "user"), "aiqos-test-client");
	cJSON_Delete(reqs);
	kube_client_free(e.c);
	e.c = NULL;

	/* the wrong CA as data is refused like the wrong CA file */
	free(e.cfg.ca_pem);
	snprintf(path, sizeof(path), "%s/other-ca.crt", g_pki);
	e.cfg.ca_pem = read_file(path, &e.cfg.ca_pem_len);
	e.s.list_ends = 0;
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, stats(&e).failures >= 1, 5000));
	CHECK_INT(e.s.list_ends, 0);
	CHECK_CONTAINS(e.s.why, "certificate");
	kube_client_free(e.c);
	e.c = NULL;

	/* insecure, explicitly allowed: connects without verification */
	free(e.cfg.ca_pem);
	e.cfg.ca_pem = NULL;
	e.cfg.ca_pem_len = 0;
	e.cfg.insecure_skip_tls_verify = true;
	e.o.allow_insecure = true;
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, e.s.list_ends == 1 && e.s.connected, 10000));
out:
	free(e.cfg.ca_pem);
	free(e.cfg.cert_pem);
	free(e.cfg.key_pem);
	env_done(&e);
}

static cJSON *server_events(const struct fake *f)
{
	cJSON *o = NULL, *items;

	ctl(f, "GET", "/events", NULL, &o);
	items = cJSON_DetachItemFromObject(o, "items");
	cJSON_Delete(o);
	return items ? items : cJSON_CreateArray();
}

TEST(kube_event_post_dedupe_and_fields)
{
	struct env e;
	struct kube_client_stats st;
	cJSON *items, *ev;
	char big[3100];

	if (!env_init(&e, NULL))
		goto out;
	CHECK(env_client(&e)); /* Events work without list/watch */
	CHECK_INT(kube_post_pod_event(e.c, "default", "web-1", "uid-1", KUBE_EV_NORMAL, "Tuned", "class inference"), 0);
	CHECK(RUN_UNTIL(&e, stats(&e).events_posted == 1, 5000));
	items = server_events(&e.f);
	CHECK_INT(cJSON_GetArraySize(items), 1);
	ev = cJSON_GetArrayItem(items, 0);
	CHECK_STR(jstr(ev, "reason"), "Tuned");
	CHECK_STR(jstr(ev, "message"), "class inference");
	CHECK_STR(jstr(ev, "type"), "Normal");
	CHECK_INT(jnum(ev, "count"), 1);
	CHECK(jstr(ev, "firstTimestamp") && jstr(ev, "lastTimestamp"));
	CHECK_STR(jstr(cJSON_GetObjectItem(ev, "involvedObject"), "kind"), "Pod");
	CHECK_STR(jstr(cJSON_GetObjectItem(ev, "involvedObject"), "name"), "web-1");
	CHECK_STR(jstr(cJSON_GetObjectItem(ev, "involvedObject"), "namespace"), "default");
	CHECK_STR(jstr(cJSON_GetObjectItem(ev, "involvedObject"), "uid"), "uid-1");
	CHECK_STR(jstr(cJSON_GetObjectItem(ev, "source"), "component"), "aiqos-agent");
	CHECK_STR(jstr(cJSON_GetObjectItem(ev, "source"), "host"), NODE);
	CHECK(jstr(cJSON_GetObjectItem(ev, "metadata"), "name") &&
	      strncmp(jstr(cJSON_GetObjectItem(ev, "metadata"), "name"), "web-1.aiqos-", 12) == 0);
	cJSON_Delete(items);

	/* two repeats: coalesced into one PATCH of the same Event, count 3 */
	CHECK_INT(kube_post_pod_event(e.c, "default", "web-1", "uid-1", KUBE_EV_NORMAL, "Tuned", "class inference"), 0);
	CHECK_INT(kube_post_pod_event(e.c, "default", "web-1", "uid-1", KUBE_EV_NORMAL, "Tuned", "class inference"), 0);
	CHECK(RUN_UNTIL(&e, kube_client_events_pending(e.c) == 0, 5000));
	st = stats(&e);
	CHECK_INT(st.events_posted, 1);
	CHECK_INT(st.events_patched, 1);
	CHECK_INT(st.events_post_deduped, 1);
	CHECK_INT(st.request_seconds[2].count, 2); /* the POST and the PATCH */
	items = server_events(&e.f);
	CHECK_INT(cJSON_GetArraySize(items), 1);
	CHECK_INT(jnum(cJSON_GetArrayItem(items, 0), "count"), 3);
	cJSON_Delete(items);

	/* another message: a new Event; a Warning; a long message is cut to 1 KiB on a UTF-8 boundary */
	memset(big, 'x', 1023);
	snprintf(big + 1023, sizeof(big) - 1023, "\xc3\xa9tail");
	CHECK_INT(kube_post_pod_event(e.c, "default", "web-1", "uid-1", KUBE_EV_WARNING, "InvalidWorkload", big), 0);
	CHECK(RUN_UNTIL(&e, kube_client_events_pending(e.c) == 0, 5000));
	items = server_events(&e.f);
	CHECK_INT(cJSON_GetArraySize(items), 2);
	ev = cJSON_GetArrayItem(items, 1);
	CHECK_STR(jstr(ev, "type"), "Warning");
	CHECK_INT(strlen(jstr(ev, "message") ? jstr(ev, "message") : ""), 1023);
	cJSON_Delete(items);

	/* the Event was deleted on the server: the repeat creates a new one */
	CHECK_INT(ctlf(&e.f, "DELETE", "/events", NULL), 200);
	CHECK_INT(kube_post_pod_event(e.c, "default", "web-1", "uid-1", KUBE_EV_NORMAL, "Tuned", "class inference"), 0);
	CHECK(RUN_UNTIL(&e, kube_client_events_pending(e.c) == 0, 5000));
	items = server_events(&e.f);
	CHECK_INT(cJSON_GetArraySize(items), 1);
	CHECK_INT(jnum(cJSON_GetArrayItem(items, 0), "count"), 1);
	cJSON_Delete(items);
	st = stats(&e);
	CHECK_INT(st.events_posted, 3);
	CHECK_INT(st.events_post_failed, 0);
out:
	env_done(&e);
}

/* Messages the same once cut to the Event's limit are the same Event: the
 * queued repeat coalesces (client-go's key is the message as sent). */
TEST(kube_event_dedupe_compares_the_cut_message)
{
	struct env e;
	struct kube_client_stats st;
	cJSON *items;
	char a[1100], b[1100];

	if (!env_init(&e, NULL))
		goto out;
	CHECK(env_client(&e));
	memset(a, 'x', 1030);
	a[1030] = '\0';
	memcpy(b, a, sizeof(a));
	b[1029] = 'y'; /* differs past the cut (1023 bytes) only */
	CHECK_INT(kube_post_pod_event(e.c, "default", "web-1", "uid-1", KUBE_EV_WARNING, "InvalidWorkload", a), 0);
	CHECK_INT(kube_post_pod_event(e.c, "default", "web-1", "uid-1", KUBE_EV_WARNING, "InvalidWorkload", b), 0);
	/* a different reason is another Event */
	CHECK_INT(kube_post_pod_event(e.c, "default", "web-1", "uid-1", KUBE_EV_WARNING, "Other", b), 0);
	CHECK(RUN_UNTIL(&e, kube_client_events_pending(e.c) == 0, 5000));
	st = stats(&e);
	CHECK_INT(st.events_post_deduped, 1);
	CHECK_INT(st.events_posted, 2);
	items = server_events(&e.f);
	CHECK_INT(cJSON_GetArraySize(items), 2);
	CHECK_INT(jnum(cJSON_GetArrayItem(items, 0), "count"), 2);
	CHECK_INT(jnum(cJSON_GetArrayItem(items, 1), "count"), 1);
	cJSON_Delete(items);
out:
	env_done(&e);
}

TEST(kube_event_retry_reject_and_overflow)
{
	struct env e;
	struct kube_client_stats st;
	cJSON *items;
	uint64_t t0;
	char msg[32];

	if (!env_init(&e, NULL))
		goto out;
	e.o.event_queue_max = 4;
	CHECK(env_client(&e));
	/* 503 + Retry-After: sent again after the wait */
	CHECK_INT(add_fault(&e.f, "{\"type\":\"status\",\"code\":503,\"retry_after\":1,\"match\":\"event_create\"}"),
	          201);
	t0 = mono_ms();
	CHECK_INT(kube_post_pod_event(e.c, "default", "p", "u", KUBE_EV_NORMAL, "Tuned", "retry me"), 0);
	CHECK(RUN_UNTIL(&e, stats(&e).events_posted == 1, 5000));
	CHECK(mono_ms() - t0 >= 1000);
	st = stats(&e);
	CHECK_INT(st.retry_after_waits, 1);
	CHECK_INT(st.events_post_failed, 0);

	/* network failure (connection cut before an answer) is retried with backoff */
	CHECK_INT(
	        add_fault(&e.f, "{\"type\":\"hang\",\"stage\":\"request\",\"seconds\":0.2,\"match\":\"event_create\"}"),
	        201);
	CHECK_INT(kube_post_pod_event(e.c, "default", "p", "u", KUBE_EV_NORMAL, "Tuned", "after a cut"), 0);
	CHECK(RUN_UNTIL(&e, stats(&e).events_posted == 2, 5000));

	/* 422: the request is wrong, not retried */
	CHECK_INT(add_fault(&e.f, "{\"type\":\"status\",\"code\":422,\"retry_after\":null,\"match\":\"event_create\"}"),
	          201);
	CHECK_INT(kube_post_pod_event(e.c, "default", "p", "u", KUBE_EV_NORMAL, "Tuned", "rejected"), 0);
	CHECK(RUN_UNTIL(&e, stats(&e).events_post_failed == 1, 5000));
	CHECK_INT(stats(&e).events_posted, 2);

	/* 10 distinct Events at once into a queue of 4: the 6 oldest are dropped */
	CHECK_INT(ctlf(&e.f, "DELETE", "/events", NULL), 200);
	for (int i = 0; i < 10; i++) {
		snprintf(msg, sizeof(msg), "m%d", i);
		CHECK_INT(kube_post_pod_event(e.c, "default", "p", "u", KUBE_EV_NORMAL, "Tuned", msg), 0);
	}
	CHECK_INT(stats(&e).events_post_dropped, 6);
	CHECK_INT(kube_client_events_pending(e.c), 4);
	CHECK(RUN_UNTIL(&e, kube_client_events_pending(e.c) == 0, 5000));
	items = server_events(&e.f);
	CHECK_INT(cJSON_GetArraySize(items), 4);
	for (int i = 0; i < 4 && i < cJSON_GetArraySize(items); i++) {
		snprintf(msg, sizeof(msg), "m%d", 6 + i);
		CHECK_STR(jstr(cJSON_GetArrayItem(items, i), "message"), msg);
	}
	cJSON_Delete(items);
out:
	env_done(&e);
}

TEST(kube_stall_is_detected_and_bookmarks_keep_alive)
{
	struct env e;
	struct kube_client_stats st;

	if (!env_init(&e, NULL))
		goto out;
	e.o.stall_timeout_ms = 800;
	/* the first watch gets its 200 headers, then silence */
	CHECK_INT(add_fault(&e.f, "{\"type\":\"hang\",\"stage\":\"headers\",\"match\":\"watch\",\"seconds\":20}"), 201);
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, e.s.connected, 10000));
	CHECK(RUN_UNTIL(&e, stats(&e).stalls == 1, 5000));
	CHECK_CONTAINS(e.s.why, "stalled");
	CHECK(RUN_UNTIL(&e, stats(&e).watches == 2 && e.s.connected, 5000));
	st = stats(&e);
	CHECK_INT(st.lists, 1);
	CHECK_INT(st.reconnects, 1);
	/* periodic bookmarks are data: no stall while they flow */
	CHECK_INT(ctlf(&e.f, "PUT", "/config", "{\"bookmark_interval\":0.25}"), 200);
	CHECK_INT(ctlf(&e.f, "POST", "/watches/close", "{\"how\":\"end\"}"), 200);
	CHECK(RUN_UNTIL(&e, stats(&e).watches == 3, 5000));
	run_for(&e, 2500);
	st = stats(&e);
	CHECK_INT(st.stalls, 1);
	CHECK(st.bookmarks >= 4);
	CHECK_INT(st.watches, 3);
out:
	env_done(&e);
}

TEST(kube_list_faults_are_retried_and_pages_shrink)
{
	struct env e;
	struct kube_client_stats st;
	cJSON *reqs;
	int n;

	if (!env_init(&e, NULL))
		goto out;
	CHECK_INT(put_pods(&e.f, "l", 0, 30, NODE), 200);
	/* a broken body, a cut connection (each retried), then a split body with an oversized item */
	for (int i = 0; i < 2; i++) {
		CHECK_INT(add_fault(&e.f, i == 0 ? "{\"type\":\"garbage\",\"match\":\"list\"}"
		                                 : "{\"type\":\"reset\",\"match\":\"list\"}"),
		          201);
		memset(&e.s.list_begins, 0, offsetof(struct sink, n_ev) - offsetof(struct sink, list_begins));
		CHECK(env_start(&e));
		CHECK(RUN_UNTIL(&e, e.s.list_ends == 1 && e.s.connected, 10000));
		CHECK_INT(e.s.list_pods_total, 30);
		st = stats(&e);
		CHECK_INT(st.failures, 1);
		CHECK_INT(st.lists, 1);
		CHECK_INT(st.list_pages, 1);
		kube_client_free(e.c);
		e.c = NULL;
	}

	CHECK_INT(
	        add_fault(&e.f, "{\"type\":\"slow\",\"mode\":\"pattern\",\"chunk_sizes\":[3,1000],\"match\":\"list\"}"),
	        201);
	CHECK_INT(add_fault(&e.f, "{\"type\":\"oversized\",\"match\":\"list\",\"bytes\":2097152,\"name\":\"big\"}"),
	          201);
	memset(&e.s.list_begins, 0, offsetof(struct sink, n_ev) - offsetof(struct sink, list_begins));
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, e.s.list_ends == 1 && e.s.connected, 10000));
	CHECK_INT(e.s.list_pods_total, 31); /* big pods are fine in a LIST; its padding is not kept */
	CHECK_INT(stats(&e).failures, 0);
	kube_client_free(e.c);
	e.c = NULL;

	/* pages over max_page_bytes: refetched with half the limit, from etcd */
	CHECK_INT(ctlf(&e.f, "DELETE", "/stats", NULL), 200);
	memset(&e.s.list_begins, 0, offsetof(struct sink, n_ev) - offsetof(struct sink, list_begins));
	e.o.max_page_bytes = 8192;
	e.o.page_limit = 50;
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, e.s.list_ends == 1 && e.s.connected, 10000));
	CHECK_INT(e.s.list_pods_total, 30);
	st = stats(&e);
	CHECK_INT(st.lists, 1);
	CHECK_INT(st.failures, 0);
	reqs = server_requests(&e.f, "list");
	n = cJSON_GetArraySize(reqs);
	CHECK(n >= 4);
	CHECK_STR(req_param(cJSON_GetArrayItem(reqs, 0), "limit"), "50");
	CHECK_STR(req_param(cJSON_GetArrayItem(reqs, 0), "resourceVersion"), "0");
	CHECK(atoi(req_param(cJSON_GetArrayItem(reqs, n - 1), "limit")) < 25);
	CHECK(req_param(cJSON_GetArrayItem(reqs, 1), "resourceVersion") == NULL);
	cJSON_Delete(reqs);
out:
	env_done(&e);
}

TEST(kube_request_timeout_on_hung_list)
{
	struct env e;
	struct kube_client_stats st;

	if (!env_init(&e, NULL))
		goto out;
	e.o.request_timeout_ms = 700;
	CHECK_INT(add_fault(&e.f, "{\"type\":\"hang\",\"stage\":\"request\",\"match\":\"list\",\"seconds\":20}"), 201);
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, e.s.list_ends == 1 && e.s.connected, 10000));
	st = stats(&e);
	CHECK_INT(st.failures, 1);
	CHECK_INT(st.lists, 1);
out:
	env_done(&e);
}

TEST(kube_api_server_restart_resumes_watch_first)
{
	struct env e;
	struct fake f2;
	struct kube_client_stats st;
	char port[16], start_rv[32];
	const char *args[] = {"--port", port, "--start-rv", start_rv, NULL};
	cJSON *o = NULL, *reqs;
	long rv;

	memset(&f2, 0, sizeof(f2));
	f2.pid = -1;
	if (!env_init(&e, NULL))
		goto out;
	CHECK_INT(put_pods(&e.f, "a", 0, 2, NODE), 200);
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, e.s.connected, 10000));
	rv = atol(kube_client_resource_version(e.c));
	snprintf(port, sizeof(port), "%d", e.f.port);
	fake_stop(&e.f);
	/* down for a while: reconnects back off (no tight loop) */
	CHECK(RUN_UNTIL(&e, !e.s.connected, 5000));
	run_for(&e, 1000);
	st = stats(&e);
	CHECK(st.failures >= 1 && st.failures < 20);
	CHECK_INT(st.lists, 1);
	/* a new API server with a fresh watch cache at a later rv */
	snprintf(start_rv, sizeof(start_rv), "%ld", rv + 100);
	CHECK(fake_start_opts(&f2, "tok-0", args));
	write_file(e.f.token_file, "tok-0\n");
	CHECK(RUN_UNTIL(&e, e.s.list_ends == 2 && e.s.connected, 10000));
	/* it first tried to WATCH from the old rv, and relisted only on the 410 */
	ctl(&f2, "GET", "/stats", NULL, &o);
	reqs = cJSON_GetObjectItem(o, "requests");
	CHECK(cJSON_GetArraySize(reqs) >= 3);
	if (cJSON_GetArraySize(reqs) >= 3) {
		CHECK_STR(jstr(cJSON_GetArrayItem(reqs, 0), "kind"), "watch");
		CHECK_INT(atol(req_param(cJSON_GetArrayItem(reqs, 0), "resourceVersion")), rv);
		CHECK_STR(jstr(cJSON_GetArrayItem(reqs, 1), "kind"), "list");
		CHECK_STR(jstr(cJSON_GetArrayItem(reqs, 2), "kind"), "watch");
	}
	CHECK_INT(jnum(cJSON_GetObjectItem(o, "counts"), "list"), 1);
	cJSON_Delete(o);
	st = stats(&e);
	CHECK_INT(st.relists, 1);
	CHECK_INT(e.s.n_list, 0); /* the new server has no pods */
out:
	env_done(&e);
	fake_stop(&f2);
}

TEST(kube_free_with_requests_in_flight)
{
	struct env e;

	if (!env_init(&e, NULL))
		goto out;
	/* before start */
	CHECK(env_client(&e));
	CHECK_INT(kube_post_pod_event(e.c, "default", "p", "u", KUBE_EV_NORMAL, "Tuned", "queued"), 0);
	kube_client_free(e.c);
	e.c = NULL;
	/* right after start: the LIST is in flight */
	CHECK(env_start(&e));
	sd_event_run(e.loop, 0);
	kube_client_free(e.c);
	e.c = NULL;
	/* a hung watch and a hung Event POST */
	CHECK_INT(add_fault(&e.f, "{\"type\":\"hang\",\"stage\":\"headers\",\"match\":\"watch\",\"seconds\":10}"), 201);
	CHECK_INT(
	        add_fault(&e.f, "{\"type\":\"hang\",\"stage\":\"request\",\"match\":\"event_create\",\"seconds\":10}"),
	        201);
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, e.s.connected, 10000));
	for (int i = 0; i < 5; i++)
		CHECK_INT(
		        kube_post_pod_event(e.c, "default", "p", "u", KUBE_EV_WARNING, "TuneFailed", i % 2 ? "a" : "b"),
		        0);
	run_for(&e, 300);
	CHECK(kube_client_events_pending(e.c) >= 1);
	kube_client_free(e.c);
	e.c = NULL;
	/* while waiting out a backoff */
	CHECK_INT(ctlf(&e.f, "DELETE", "/faults", NULL), 200);
	CHECK_INT(add_fault(&e.f, "{\"type\":\"status\",\"code\":503,\"retry_after\":30,\"match\":\"list\"}"), 201);
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, stats(&e).retry_after_waits == 1, 5000));
	kube_client_free(e.c);
	e.c = NULL;
	/* the loop has nothing of ours left */
	run_for(&e, 100);
out:
	env_done(&e);
}

/* ---- throughput ---- */

struct bench_ctx {
	unsigned n;
};

static int bench_on_event(const cJSON *obj, const char *line, size_t len, void *ud)
{
	struct bench_ctx *b = ud;
	struct kube_event ev;

	if (kube_event_decode(obj, &ev, NULL) == 0) {
		b->n++;
		kube_event_done(&ev);
	}
	return 0;
}

TEST(kube_watch_throughput)
{
	struct env e;
	const unsigned total = 20000, batch = 5000;
	struct kube_client_stats st;
	double secs, cpu, cpu0;

	if (!env_init(&e, NULL))
		goto out;
	CHECK_INT(ctlf(&e.f, "PUT", "/config", "{\"max_log\":50000}"), 200);
	CHECK(env_start(&e));
	CHECK(RUN_UNTIL(&e, e.s.connected, 10000));
	cpu0 = cpu_s();
	for (unsigned i = 0; i < total; i += batch) {
		CHECK_INT(put_pods(&e.f, "t", i, batch, NODE), 200);
		sd_event_run(e.loop, 0);
	}
	CHECK(RUN_UNTIL(&e, e.s.n_ev >= total, 40000));
	CHECK(sink_seq_ok(&e.s, 0, "t", 0, total));
	st = stats(&e);
	CHECK_INT(st.watches, 1);
	cpu = cpu_s() - cpu0;
	secs = (double)(e.s.last_ev_ms - e.s.first_ev_ms) / 1000.0;
	printf("  watch end-to-end (fakeapi -> TLS -> curl -> framer -> decode -> callback): %u events in %.2f s = "
	       "%.0f "
	       "events/s; client CPU %.2f s (%.1f us/event, test's control calls included): the Python server is the "
	       "bound\n",
	       e.s.n_ev, secs, secs > 0 ? e.s.n_ev / secs : 0.0, cpu, cpu * 1e6 / (e.s.n_ev ? e.s.n_ev : 1));

	/* the client side alone: the same stream shape through the framer and decoder */
	{
		struct watch_framer *fr = NULL;
		struct bench_ctx b = {0};
		size_t cap = (size_t)total * 1200, len = 0;
		char *buf = malloc(cap);
		double t0, t1;
		cJSON *pods = NULL;

		ctl(&e.f, "GET", "/pods", NULL, &pods);
		{
			cJSON *it;
			cJSON_ArrayForEach(it, cJSON_GetObjectItem(pods, "items"))
			{
				char *p = cJSON_PrintUnformatted(it);
				int n = snprintf(buf + len, cap - len, "{\"type\":\"MODIFIED\",\"object\":%s}\n", p);
				free(p);
				if (n < 0 || (size_t)n >= cap - len)
					break;
				len += (size_t)n;
			}
		}
		cJSON_Delete(pods);
		CHECK_INT(watch_framer_new(0, bench_on_event, NULL, &b, &fr, NULL), 0);
		t0 = cpu_s();
		for (size_t off = 0; off < len; off += 16384)
			watch_framer_feed(fr, buf + off, len - off < 16384 ? len - off : 16384);
		t1 = cpu_s();
		CHECK_INT(b.n, total);
		printf("  framer + decode alone: %u events (%zu bytes) in %.3f s CPU = %.0f events/s\n", b.n, len,
		       t1 - t0, t1 > t0 ? b.n / (t1 - t0) : 0.0);
		watch_framer_free(fr);
		free(buf);
	}
out:
	env_done(&e);
}
