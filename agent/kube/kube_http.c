/* kube_http.c — libcurl multi driven by the sd-event loop (the pattern of
 * systemd's src/import/curl-util.c, written for aiqos): curl tells us which
 * sockets to poll (CURLMOPT_SOCKETFUNCTION) and when to wake it up
 * (CURLMOPT_TIMERFUNCTION); the loop calls curl_multi_socket_action() and
 * hands each finished transfer to its request's done callback. Nothing here
 * blocks. */
#include <sys/epoll.h>

#include "kube/kube_internal.h"

struct kube_io {
	curl_socket_t fd;
	sd_event_source *src;
	struct kube_io *next;
};

struct kube_http {
	sd_event *loop;
	CURLM *multi;
	sd_event_source *timer;
	struct kube_io *ios;
	bool in_free;
	struct metrics_histogram seconds[_KUBE_REQ_KIND_MAX];
};

_Static_assert(_KUBE_REQ_KIND_MAX ==
                       sizeof(((struct kube_client_stats *)0)->request_seconds) / sizeof(struct metrics_histogram),
               "one histogram per request kind");

/* A finished request's duration: the whole transfer, but for a WATCH the
 * time to its first response byte (a stream lasts minutes by design). */
static void observe_duration(struct kube_http *h, struct kube_req *r)
{
	curl_off_t total = 0, first = 0;

	if (!h || r->timed || r->kind < 0 || r->kind >= _KUBE_REQ_KIND_MAX ||
	    curl_easy_getinfo(r->easy, CURLINFO_TOTAL_TIME_T, &total) != CURLE_OK)
		return;
	if (r->kind == KUBE_REQ_WATCH &&
	    curl_easy_getinfo(r->easy, CURLINFO_STARTTRANSFER_TIME_T, &first) == CURLE_OK && first > 0)
		total = first;
	metrics_histogram_observe(&h->seconds[r->kind], &metrics_buckets_api, (double)total / 1e6);
	r->timed = true;
}

void kube_http_observe(struct kube_req *r)
{
	observe_duration(r->http, r);
}

void kube_http_get_durations(const struct kube_http *h, struct metrics_histogram ret[_KUBE_REQ_KIND_MAX])
{
	if (h)
		memcpy(ret, h->seconds, sizeof(h->seconds));
	else
		memset(ret, 0, sizeof(h->seconds));
}

static void check_finished(struct kube_http *h)
{
	CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(h->multi, &left))) {
		CURL *easy;
		CURLcode result;
		struct kube_req *r = NULL;

		if (msg->msg != CURLMSG_DONE)
			continue;
		easy = msg->easy_handle;
		result = msg->data.result;
		/* msg is invalid once the handle is removed */
		if (curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&r) != CURLE_OK || !r) {
			curl_multi_remove_handle(h->multi, easy);
			continue;
		}
		curl_multi_remove_handle(h->multi, easy);
		r->active = false;
		observe_duration(h, r);
		if (r->done)
			r->done(r, result);
	}
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct kube_http *h = userdata;
	int action = 0, running = 0;

	if (revents & EPOLLIN)
		action |= CURL_CSELECT_IN;
	if (revents & EPOLLOUT)
		action |= CURL_CSELECT_OUT;
	/* let curl read what is left and find the error itself */
	if (revents & (EPOLLERR | EPOLLHUP))
		action |= CURL_CSELECT_IN | CURL_CSELECT_ERR;
	curl_multi_socket_action(h->multi, fd, action, &running);
	check_finished(h);
	return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct kube_http *h = userdata;
	int running = 0;

	curl_multi_socket_action(h->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_finished(h);
	return 0;
}

static void io_unlink(struct kube_http *h, struct kube_io *io)
{
	for (struct kube_io **p = &h->ios; *p; p = &(*p)->next) {
		if (*p == io) {
			*p = io->next;
			break;
		}
	}
	sd_event_source_disable_unref(io->src);
	free(io);
}

static int socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
	struct kube_http *h = userp;
	struct kube_io *io = socketp;
	uint32_t events = 0;

	if (what == CURL_POLL_REMOVE) {
		if (io)
			io_unlink(h, io);
		return 0;
	}
	if (h->in_free)
		return 0;
	if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
		events |= EPOLLIN;
	if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
		events |= EPOLLOUT;

	if (io) {
		if (sd_event_source_set_io_events(io->src, events) < 0 ||
		    sd_event_source_set_enabled(io->src, SD_EVENT_ON) < 0)
			return -1;
		return 0;
	}
	io = calloc(1, sizeof(*io));
	if (!io)
		return -1;
	io->fd = fd;
	if (sd_event_add_io(h->loop, &io->src, fd, events, on_io, h) < 0) {
		free(io);
		return -1;
	}
	(void)sd_event_source_set_description(io->src, "kube-curl-io");
	if (curl_multi_assign(h->multi, fd, io) != CURLM_OK) {
		sd_event_source_disable_unref(io->src);
		free(io);
		return -1;
	}
	io->next = h->ios;
	h->ios = io;
	return 0;
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
	struct kube_http *h = userp;
	uint64_t now;

	if (h->in_free)
		return 0;
	if (timeout_ms < 0)
		return sd_event_source_set_enabled(h->timer, SD_EVENT_OFF) < 0 ? -1 : 0;
	if (sd_event_now(h->loop, CLOCK_MONOTONIC, &now) < 0)
		return -1;
	/* 0 means "as soon as possible": never call curl from inside curl */
	if (sd_event_source_set_time(h->timer, now + (uint64_t)timeout_ms * 1000) < 0 ||
	    sd_event_source_set_enabled(h->timer, SD_EVENT_ONESHOT) < 0)
		return -1;
	return 0;
}

int kube_http_new(sd_event *loop, struct kube_http **ret, struct error *err)
{
	struct kube_http *h;
	int r;

	h = calloc(1, sizeof(*h));
	if (!h)
		return error_set(err, ENOMEM, "kube http: out of memory");
	h->loop = sd_event_ref(loop);
	h->multi = curl_multi_init();
	if (!h->multi) {
		kube_http_free(h);
		return error_set(err, ENOMEM, "kube http: curl_multi_init failed");
	}
	r = sd_event_add_time(loop, &h->timer, CLOCK_MONOTONIC, UINT64_MAX, 1000, on_timer, h);
	if (r < 0) {
		kube_http_free(h);
		return error_set(err, -r, "kube http: add timer: %s", strerror(-r));
	}
	(void)sd_event_source_set_enabled(h->timer, SD_EVENT_OFF);
	(void)sd_event_source_set_description(h->timer, "kube-curl-timer");
	if (curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, socket_cb) != CURLM_OK ||
	    curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h) != CURLM_OK ||
	    curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, timer_cb) != CURLM_OK ||
	    curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h) != CURLM_OK) {
		kube_http_free(h);
		return error_set(err, EIO, "kube http: curl_multi_setopt failed");
	}
	*ret = h;
	return 0;
}

void kube_http_free(struct kube_http *h)
{
	if (!h)
		return;
	/* requests still registered belong to their owners, who free them
	 * first; curl_multi_cleanup closes cached connections and may report
	 * their sockets gone through socket_cb */
	h->in_free = true;
	if (h->multi) {
		curl_multi_cleanup(h->multi);
		h->multi = NULL;
	}
	while (h->ios)
		io_unlink(h, h->ios);
	sd_event_source_disable_unref(h->timer);
	sd_event_unref(h->loop);
	free(h);
}

int kube_http_add(struct kube_http *h, struct kube_req *r, struct error *err)
{
	CURLMcode m;

	r->http = h;
	r->timed = false;
	m = curl_multi_add_handle(h->multi, r->easy);
	if (m != CURLM_OK)
		return error_set(err, EIO, "curl_multi_add_handle: %s", curl_multi_strerror(m));
	r->active = true;
	return 0;
}

void kube_http_remove(struct kube_req *r)
{
	if (r->active && r->http) {
		curl_multi_remove_handle(r->http->multi, r->easy);
		r->active = false;
	}
}

struct kube_req *kube_req_new(enum kube_req_kind kind, size_t body_max)
{
	struct kube_req *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->kind = kind;
	r->body_max = body_max;
	r->easy = curl_easy_init();
	if (!r->easy) {
		free(r);
		return NULL;
	}
	return r;
}

static void slist_wipe_free(struct curl_slist *l)
{
	for (struct curl_slist *i = l; i; i = i->next)
		if (i->data)
			explicit_bzero(i->data, strlen(i->data));
	curl_slist_free_all(l);
}

void kube_req_free(struct kube_req *r)
{
	if (!r)
		return;
	kube_http_remove(r);
	if (r->easy)
		curl_easy_cleanup(r->easy);
	slist_wipe_free(r->headers);
	free(r->body);
	free(r->upload);
	free(r);
}

bool kube_req_body_append(struct kube_req *r, const void *data, size_t len)
{
	if (len > r->body_max - r->body_len) {
		r->body_over = true;
		return false;
	}
	if (r->body_len + len + 1 > r->body_cap) {
		size_t cap = r->body_cap ? r->body_cap : 4096;
		char *n;
		while (cap < r->body_len + len + 1)
			cap *= 2;
		if (cap > r->body_max + 1)
			cap = r->body_max + 1;
		n = realloc(r->body, cap);
		if (!n) {
			r->body_over = true;
			return false;
		}
		r->body = n;
		r->body_cap = cap;
	}
	memcpy(r->body + r->body_len, data, len);
	r->body_len += len;
	r->body[r->body_len] = '\0';
	return true;
}
