/* loadgen.c — open-loop request/response load generator for the aiqos lab
 * (P4 of docs/benchmarks.md): Poisson arrivals over several TCP connections, latency
 * measured from each request's *intended* send time (no coordinated omission)
 * into a log-linear histogram; `loadgen server` is the tiny responder.
 *
 *   loadgen server [--listen ADDR:PORT] [--cc NAME]
 *   loadgen client --connect ADDR:PORT --rate RPS --duration S [options]
 *
 * On/off bursts (--burst-factor F --burst-ms B --burst-period-ms P): the
 * Poisson rate is F x RPS during the first B ms of every P ms since the start
 * and lower in between, so that the mean stays RPS (F x B <= P).
 *
 * Wire format (little endian): request = 24-byte header {magic "AQLQ",
 * req_len, resp_len, flags, id u64} padded with zeros to req_len bytes;
 * response = 16-byte header {magic "AQLR", resp_len, id u64} padded to
 * resp_len bytes. A server answers the requests of a connection in order. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define REQ_MAGIC        0x514c5141U /* "AQLQ" */
#define RESP_MAGIC       0x524c5141U /* "AQLR" */
#define REQ_HDR_BYTES    24U
#define RESP_HDR_BYTES   16U
#define REQ_MAX_BYTES    65536U
#define RESP_MAX_BYTES   (16U << 20)
#define CONNS_MAX        256U
#define SERVER_CONNS_MAX 4096U
#define DURATION_MAX_S   600.0
#define RATE_MAX         1000000.0
#define PENDING_MAX      65536U /* outstanding requests per client connection */
#define OUTBUF_BYTES     (1U << 20)
#define IO_CHUNK_BYTES   65536U
#define CC_NAME_MAX      16U
#define NSEC_PER_SEC     1000000000LL
#define NSEC_PER_MSEC    1000000LL

/* ---------------------------------------------------------------- histogram
 * Values in ns. 0..127 linear; above, 64 sub-buckets per power of two (1.6 %
 * relative width) up to HIST_MAX_NS (10 s); larger values are clamped into
 * the top bucket (the exact maximum is kept separately). Window histograms
 * use the same layout with 4 sub-buckets merged (16 per octave, 6 %). */
#define HIST_LINEAR   128U
#define HIST_SUB_BITS 6U
#define HIST_SUB      (1U << HIST_SUB_BITS)
#define HIST_MAX_NS   10000000000ULL
#define HIST_BUCKETS  1856U /* > hist_index(HIST_MAX_NS) = 1802 */
#define WIN_SHIFT     2U
#define WIN_BUCKETS   (HIST_BUCKETS >> WIN_SHIFT)

struct hist {
	uint64_t count;
	uint64_t sum_ns;
	uint64_t min_ns, max_ns;
	uint32_t *buckets; /* n_buckets */
	unsigned n_buckets;
	unsigned shift; /* 0 full resolution, WIN_SHIFT for windows */
};

static unsigned hist_index(uint64_t v)
{
	if (v > HIST_MAX_NS)
		v = HIST_MAX_NS;
	if (v < HIST_LINEAR)
		return (unsigned)v;
	unsigned e = 63U - (unsigned)__builtin_clzll(v); /* msb position, >= 7 */
	unsigned shift = e - HIST_SUB_BITS;
	unsigned sub = (unsigned)(v >> shift); /* [64, 127] */
	return HIST_LINEAR + (e - 7U) * HIST_SUB + (sub - HIST_SUB);
}

/* Highest value that maps to full-resolution bucket i. */
static uint64_t hist_upper(unsigned i)
{
	if (i < HIST_LINEAR)
		return i;
	unsigned k = (i - HIST_LINEAR) / HIST_SUB;
	uint64_t s = (i - HIST_LINEAR) % HIST_SUB + HIST_SUB;
	unsigned shift = k + 1U;
	return ((s + 1U) << shift) - 1U;
}

static int hist_init(struct hist *h, unsigned shift)
{
	memset(h, 0, sizeof(*h));
	h->shift = shift;
	h->n_buckets = (HIST_BUCKETS >> shift) + 1U;
	h->buckets = calloc(h->n_buckets, sizeof(uint32_t));
	h->min_ns = UINT64_MAX;
	return h->buckets ? 0 : -ENOMEM;
}

static void hist_free(struct hist *h)
{
	free(h->buckets);
	h->buckets = NULL;
}

static void hist_record(struct hist *h, uint64_t v_ns)
{
	unsigned i = hist_index(v_ns) >> h->shift;
	if (h->buckets[i] < UINT32_MAX)
		h->buckets[i]++;
	h->count++;
	h->sum_ns += v_ns;
	if (v_ns < h->min_ns)
		h->min_ns = v_ns;
	if (v_ns > h->max_ns)
		h->max_ns = v_ns;
}

/* Upper bound of the (merged) bucket b, clamped to the observed maximum. */
static uint64_t hist_bucket_upper(const struct hist *h, unsigned b)
{
	unsigned last = ((b + 1U) << h->shift) - 1U;
	if (last >= HIST_BUCKETS)
		last = HIST_BUCKETS - 1U;
	uint64_t u = hist_upper(last);
	return u > h->max_ns ? h->max_ns : u;
}

/* The value below which a fraction q of the samples lie (bucket upper bound). */
static uint64_t hist_quantile(const struct hist *h, double q)
{
	if (h->count == 0)
		return 0;
	uint64_t rank = (uint64_t)ceil(q * (double)h->count);
	if (rank < 1)
		rank = 1;
	uint64_t cum = 0;
	for (unsigned b = 0; b < h->n_buckets; b++) {
		cum += h->buckets[b];
		if (cum >= rank)
			return hist_bucket_upper(h, b);
	}
	return h->max_ns;
}

/* ------------------------------------------------------------------ helpers */

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

/* SIGINT and SIGTERM stop the run; a peer gone is a write error, not a signal. */
static void signals_setup(void)
{
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static int64_t now_ns(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (int64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

static void put_u32(uint8_t *p, uint32_t v)
{
	for (unsigned i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
	for (unsigned i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
	uint32_t v = 0;
	for (unsigned i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* splitmix64: seeds a deterministic stream of uniform doubles. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static double rng_uniform_open(uint64_t *s)
{
	/* (0, 1]: never 0, so log() is finite */
	return ((double)(rng_next(s) >> 11) + 1.0) / 9007199254740992.0;
}

static int parse_double(const char *s, double lo, double hi, double *ret)
{
	char *end = NULL;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= lo && v <= hi))
		return -EINVAL;
	*ret = v;
	return 0;
}

static int parse_uint(const char *s, unsigned long lo, unsigned long hi, unsigned long *ret)
{
	char *end = NULL;
	errno = 0;
	if (*s == '-')
		return -EINVAL;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -EINVAL;
	*ret = v;
	return 0;
}

/* "ADDR:PORT", "[v6]:PORT" -> getaddrinfo result. */
static int resolve(const char *spec, bool passive, struct addrinfo **ret)
{
	char host[256];
	const char *port;
	if (spec[0] == '[') {
		const char *close = strchr(spec, ']');
		if (!close || close[1] != ':' || (size_t)(close - spec - 1) >= sizeof(host))
			return -EINVAL;
		memcpy(host, spec + 1, (size_t)(close - spec - 1));
		host[close - spec - 1] = '\0';
		port = close + 2;
	} else {
		const char *colon = strrchr(spec, ':');
		if (!colon || (size_t)(colon - spec) >= sizeof(host))
			return -EINVAL;
		memcpy(host, spec, (size_t)(colon - spec));
		host[colon - spec] = '\0';
		port = colon + 1;
	}
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = passive ? AI_PASSIVE : 0};
	int r = getaddrinfo(host[0] ? host : NULL, port, &hints, ret);
	if (r != 0) {
		fprintf(stderr, "loadgen: cannot resolve %s: %s\n", spec, gai_strerror(r));
		return -EINVAL;
	}
	return 0;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static int tune_socket(int fd, const char *cc)
{
	int one = 1;
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		return -errno;
	if (cc && cc[0] && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc)) < 0) {
		int e = errno;
		fprintf(stderr, "loadgen: TCP_CONGESTION %s: %s\n", cc, strerror(e));
		return -e;
	}
	return 0;
}

static int epoll_mod(int ep, int op, int fd, uint32_t events, uint64_t data)
{
	struct epoll_event ev = {.events = events, .data.u64 = data};
	return epoll_ctl(ep, op, fd, &ev) < 0 ? -errno : 0;
}

static uint8_t g_zeros[IO_CHUNK_BYTES];

/* ------------------------------------------------------------------- server */

struct srv_resp {
	uint64_t id;
	uint32_t len;
};

struct srv_conn {
	int fd;
	unsigned slot; /* index in the server's connection table */
	bool want_out;
	/* input: partial request */
	uint8_t hdr[REQ_HDR_BYTES];
	uint32_t hdr_have;
	uint32_t skip; /* request padding still to read */
	/* output: queue of responses, the head partially sent */
	struct srv_resp *q;
	uint32_t q_cap, q_head, q_len;
	uint32_t head_sent;
};

struct srv_table {
	struct srv_conn *conn[SERVER_CONNS_MAX];
	unsigned n;
};

static void srv_conn_close(int ep, struct srv_table *t, struct srv_conn *c)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	t->n--;
	t->conn[c->slot] = t->conn[t->n];
	t->conn[c->slot]->slot = c->slot;
	t->conn[t->n] = NULL;
	free(c->q);
	free(c);
}

static int srv_queue(struct srv_conn *c, uint64_t id, uint32_t len)
{
	if (c->q_len == c->q_cap) {
		uint32_t ncap = c->q_cap ? c->q_cap * 2U : 64U;
		if (ncap > PENDING_MAX)
			return -ENOBUFS;
		struct srv_resp *nq = calloc(ncap, sizeof(*nq));
		if (!nq)
			return -ENOMEM;
		for (uint32_t i = 0; i < c->q_len; i++)
			nq[i] = c->q[(c->q_head + i) % c->q_cap];
		free(c->q);
		c->q = nq;
		c->q_cap = ncap;
		c->q_head = 0;
	}
	c->q[(c->q_head + c->q_len) % c->q_cap] = (struct srv_resp){.id = id, .len = len};
	c->q_len++;
	return 0;
}

/* Write as much of the queued responses as the socket takes. 0, or -errno. */
static int srv_flush(struct srv_conn *c)
{
	while (c->q_len > 0) {
		struct srv_resp *r = &c->q[c->q_head];
		uint8_t hdr[RESP_HDR_BYTES];
		struct iovec iov[2];
		int n = 0;
		if (c->head_sent < RESP_HDR_BYTES) {
			put_u32(hdr, RESP_MAGIC);
			put_u32(hdr + 4, r->len);
			put_u64(hdr + 8, r->id);
			iov[n++] = (struct iovec){hdr + c->head_sent, RESP_HDR_BYTES - c->head_sent};
		}
		uint32_t body_done = c->head_sent > RESP_HDR_BYTES ? c->head_sent - RESP_HDR_BYTES : 0;
		uint32_t body_left = r->len - RESP_HDR_BYTES - body_done;
		if (body_left > 0)
			iov[n++] = (struct iovec){g_zeros, body_left < IO_CHUNK_BYTES ? body_left : IO_CHUNK_BYTES};
		ssize_t w = writev(c->fd, iov, n);
		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			return -errno;
		}
		c->head_sent += (uint32_t)w;
		if (c->head_sent >= r->len) {
			c->head_sent = 0;
			c->q_head = (c->q_head + 1U) % c->q_cap;
			c->q_len--;
		}
	}
	return 0;
}

/* Parse what arrived; queue one response per complete request header. */
static int srv_input(struct srv_conn *c, const uint8_t *buf, size_t n)
{
	size_t off = 0;
	while (off < n) {
		if (c->skip > 0) {
			size_t take = n - off < c->skip ? n - off : c->skip;
			c->skip -= (uint32_t)take;
			off += take;
			continue;
		}
		size_t take = REQ_HDR_BYTES - c->hdr_have;
		if (take > n - off)
			take = n - off;
		memcpy(c->hdr + c->hdr_have, buf + off, take);
		c->hdr_have += (uint32_t)take;
		off += take;
		if (c->hdr_have < REQ_HDR_BYTES)
			break;
		c->hdr_have = 0;
		uint32_t req_len = get_u32(c->hdr + 4), resp_len = get_u32(c->hdr + 8);
		if (get_u32(c->hdr) != REQ_MAGIC || req_len < REQ_HDR_BYTES || req_len > REQ_MAX_BYTES ||
		    resp_len < RESP_HDR_BYTES || resp_len > RESP_MAX_BYTES)
			return -EBADMSG;
		c->skip = req_len - REQ_HDR_BYTES;
		int r = srv_queue(c, get_u64(c->hdr + 16), resp_len);
		if (r < 0)
			return r;
	}
	return 0;
}

/* A nonblocking listening socket on spec (who: for messages); -1 on error. */
static int listen_on(const char *spec, const char *who)
{
	struct addrinfo *ai = NULL;
	if (resolve(spec, true, &ai) < 0)
		return -1;
	int lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1;
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(lfd, 1024) < 0) {
		fprintf(stderr, "loadgen %s: listen on %s: %s\n", who, spec, strerror(errno));
		if (lfd >= 0)
			close(lfd);
		freeaddrinfo(ai);
		return -1;
	}
	freeaddrinfo(ai);
	return lfd;
}

static int run_server(const char *listen_spec, const char *cc)
{
	int lfd = listen_on(listen_spec, "server");
	if (lfd < 0)
		return 2;
	if (cc && cc[0] && setsockopt(lfd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc)) < 0) {
		fprintf(stderr, "loadgen server: TCP_CONGESTION %s: %s\n", cc, strerror(errno));
		return 2;
	}
	struct sockaddr_storage sa;
	socklen_t salen = sizeof(sa);
	char host[NI_MAXHOST], port[NI_MAXSERV];
	if (getsockname(lfd, (struct sockaddr *)&sa, &salen) == 0 &&
	    getnameinfo((struct sockaddr *)&sa, salen, host, sizeof(host), port, sizeof(port),
	                NI_NUMERICHOST | NI_NUMERICSERV) == 0)
		printf("listening %s %s\n", host, port);
	fflush(stdout);

	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0 || epoll_mod(ep, EPOLL_CTL_ADD, lfd, EPOLLIN, 0) < 0) {
		fprintf(stderr, "loadgen server: epoll: %s\n", strerror(errno));
		return 2;
	}
	static struct srv_table table;
	static uint8_t buf[IO_CHUNK_BYTES];
	struct epoll_event evs[64];
	while (!g_stop) {
		int n = epoll_wait(ep, evs, 64, 500);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "loadgen server: epoll_wait: %s\n", strerror(errno));
			return 2;
		}
		for (int i = 0; i < n; i++) {
			if (evs[i].data.u64 == 0) {
				for (;;) {
					int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
					if (fd < 0)
						break;
					struct srv_conn *c = calloc(1, sizeof(*c));
					if (!c || table.n >= SERVER_CONNS_MAX || tune_socket(fd, cc) < 0) {
						free(c);
						close(fd);
						continue;
					}
					c->fd = fd;
					if (epoll_mod(ep, EPOLL_CTL_ADD, fd, EPOLLIN, (uint64_t)(uintptr_t)c) < 0) {
						close(fd);
						free(c);
						continue;
					}
					c->slot = table.n;
					table.conn[table.n++] = c;
				}
				continue;
			}
			struct srv_conn *c = (struct srv_conn *)(uintptr_t)evs[i].data.u64;
			bool dead = (evs[i].events & (EPOLLERR | EPOLLHUP)) != 0;
			if (!dead && (evs[i].events & EPOLLIN)) {
				ssize_t r = read(c->fd, buf, sizeof(buf));
				if (r == 0)
					dead = true;
				else if (r < 0 && errno != EAGAIN && errno != EINTR)
					dead = true;
				else if (r > 0 && srv_input(c, buf, (size_t)r) < 0)
					dead = true;
			}
			if (!dead && srv_flush(c) < 0)
				dead = true;
			if (dead) {
				srv_conn_close(ep, &table, c);
				continue;
			}
			bool want = c->q_len > 0;
			if (want != c->want_out) {
				c->want_out = want;
				if (epoll_mod(ep, EPOLL_CTL_MOD, c->fd, EPOLLIN | (want ? EPOLLOUT : 0U),
				              (uint64_t)(uintptr_t)c) < 0)
					srv_conn_close(ep, &table, c);
			}
		}
	}
	while (table.n > 0)
		srv_conn_close(ep, &table, table.conn[0]);
	close(ep);
	close(lfd);
	return 0;
}

/* ------------------------------------------------------------------- client */

struct pending {
	uint64_t id;
	int64_t intended_ns; /* CLOCK_MONOTONIC */
};

struct cli_conn {
	int fd;
	unsigned index;
	bool dead, want_out;
	/* outgoing request bytes */
	uint8_t *out;
	uint32_t out_len, out_off;
	/* outstanding requests, in send order */
	struct pending *pend;
	uint32_t p_head, p_len;
	/* response being read */
	uint8_t hdr[RESP_HDR_BYTES];
	uint32_t hdr_have;
	uint32_t body_left;
};

struct client {
	const char *connect_spec, *cc, *label, *out_path;
	double rate, duration_s, warmup_s, drain_s;
	double burst_factor;                     /* 1 = no bursts */
	unsigned long burst_ms, burst_period_ms; /* on time of every period */
	unsigned long conns, req_bytes, resp_bytes, window_ms;
	uint64_t seed;

	struct cli_conn *c;
	int ep, tfd;
	int64_t t0_ns, t0_real_ns, end_send_ns, warm_ns;
	uint64_t next_id;
	unsigned rr;

	uint64_t sent, completed, errors, overflow, incomplete, conn_failures;
	struct hist all, lag;
	struct hist *win;
	unsigned n_win;
};

static void cli_conn_fail(struct client *cl, struct cli_conn *c, const char *why)
{
	if (c->dead)
		return;
	fprintf(stderr, "loadgen client: connection %u: %s (%u requests outstanding)\n", c->index, why, c->p_len);
	c->dead = true;
	cl->errors += c->p_len;
	cl->conn_failures++;
	c->p_len = 0;
	epoll_ctl(cl->ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
}

static void cli_update_out(struct client *cl, struct cli_conn *c)
{
	bool want = c->out_off < c->out_len;
	if (c->dead || want == c->want_out)
		return;
	c->want_out = want;
	if (epoll_mod(cl->ep, EPOLL_CTL_MOD, c->fd, EPOLLIN | (want ? EPOLLOUT : 0U), c->index + 1ULL) < 0)
		cli_conn_fail(cl, c, "epoll_ctl failed");
}

static void cli_flush(struct client *cl, struct cli_conn *c)
{
	while (!c->dead && c->out_off < c->out_len) {
		ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			cli_conn_fail(cl, c, strerror(errno));
			return;
		}
		c->out_off += (uint32_t)w;
	}
	if (c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	cli_update_out(cl, c);
}

/* The live connection with the fewest outstanding requests (round robin on ties). */
static struct cli_conn *cli_pick(struct client *cl)
{
	struct cli_conn *best = NULL;
	for (unsigned k = 0; k < cl->conns; k++) {
		struct cli_conn *c = &cl->c[(cl->rr + k) % cl->conns];
		if (c->dead || c->p_len >= PENDING_MAX || OUTBUF_BYTES - (c->out_len - c->out_off) < cl->req_bytes)
			continue;
		if (!best || c->p_len < best->p_len)
			best = c;
	}
	cl->rr = (cl->rr + 1U) % (unsigned)cl->conns;
	return best;
}

static void cli_send_one(struct client *cl, int64_t intended_ns)
{
	struct cli_conn *c = cli_pick(cl);
	cl->sent++;
	if (!c) {
		cl->overflow++;
		return;
	}
	if (OUTBUF_BYTES - c->out_len < cl->req_bytes) { /* compact: cli_pick saw room */
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
	}
	uint8_t *p = c->out + c->out_len;
	// NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): client setup fails unless every c->out is allocated
	memset(p, 0, cl->req_bytes);
	put_u32(p, REQ_MAGIC);
	put_u32(p + 4, (uint32_t)cl->req_bytes);
	put_u32(p + 8, (uint32_t)cl->resp_bytes);
	put_u32(p + 12, 0);
	put_u64(p + 16, cl->next_id);
	c->out_len += (uint32_t)cl->req_bytes;
	c->pend[(c->p_head + c->p_len) % PENDING_MAX] = (struct pending){.id = cl->next_id, .intended_ns = intended_ns};
	c->p_len++;
	cl->next_id++;
	int64_t lag = now_ns(CLOCK_MONOTONIC) - intended_ns;
	hist_record(&cl->lag, lag > 0 ? (uint64_t)lag : 0);
	cli_flush(cl, c);
}

static void cli_complete(struct client *cl, struct cli_conn *c, uint64_t id)
{
	if (c->p_len == 0 || c->pend[c->p_head].id != id) {
		cli_conn_fail(cl, c, "response id does not match the oldest outstanding request");
		return;
	}
	struct pending pd = c->pend[c->p_head];
	c->p_head = (c->p_head + 1U) % PENDING_MAX;
	c->p_len--;
	int64_t now = now_ns(CLOCK_MONOTONIC);
	uint64_t lat = now > pd.intended_ns ? (uint64_t)(now - pd.intended_ns) : 0;
	cl->completed++;
	if (pd.intended_ns >= cl->warm_ns)
		hist_record(&cl->all, lat);
	int64_t rel = pd.intended_ns - cl->t0_ns;
	if (rel >= 0) {
		uint64_t w = (uint64_t)rel / ((uint64_t)cl->window_ms * NSEC_PER_MSEC);
		if (w < cl->n_win)
			hist_record(&cl->win[w], lat);
	}
}

static void cli_input(struct client *cl, struct cli_conn *c, const uint8_t *buf, size_t n)
{
	size_t off = 0;
	while (off < n && !c->dead) {
		if (c->body_left > 0) {
			size_t take = n - off < c->body_left ? n - off : c->body_left;
			c->body_left -= (uint32_t)take;
			off += take;
			if (c->body_left == 0)
				cli_complete(cl, c, get_u64(c->hdr + 8));
			continue;
		}
		size_t take = RESP_HDR_BYTES - c->hdr_have;
		if (take > n - off)
			take = n - off;
		memcpy(c->hdr + c->hdr_have, buf + off, take);
		c->hdr_have += (uint32_t)take;
		off += take;
		if (c->hdr_have < RESP_HDR_BYTES)
			break;
		c->hdr_have = 0;
		uint32_t len = get_u32(c->hdr + 4);
		if (get_u32(c->hdr) != RESP_MAGIC || len != cl->resp_bytes) {
			cli_conn_fail(cl, c, "malformed response header");
			return;
		}
		c->body_left = len - RESP_HDR_BYTES;
		if (c->body_left == 0)
			cli_complete(cl, c, get_u64(c->hdr + 8));
	}
}

static int cli_connect_all(struct client *cl)
{
	struct addrinfo *ai = NULL;
	if (resolve(cl->connect_spec, false, &ai) < 0)
		return -EINVAL;
	int r = 0;
	for (unsigned i = 0; i < cl->conns; i++) {
		struct cli_conn *c = &cl->c[i];
		c->index = i;
		c->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (c->fd < 0) {
			r = -errno;
			break;
		}
		/* congestion control and NODELAY before connect: the SYN already uses them */
		r = tune_socket(c->fd, cl->cc);
		if (r < 0)
			break;
		struct timeval tv = {.tv_sec = 5};
		setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (connect(c->fd, ai->ai_addr, ai->ai_addrlen) < 0) {
			r = -errno;
			fprintf(stderr, "loadgen client: connect %s: %s\n", cl->connect_spec, strerror(errno));
			break;
		}
		r = set_nonblock(c->fd);
		if (r < 0)
			break;
		c->out = malloc(OUTBUF_BYTES);
		c->pend = calloc(PENDING_MAX, sizeof(*c->pend));
		if (!c->out || !c->pend) {
			r = -ENOMEM;
			break;
		}
		r = epoll_mod(cl->ep, EPOLL_CTL_ADD, c->fd, EPOLLIN, i + 1ULL);
		if (r < 0)
			break;
	}
	freeaddrinfo(ai);
	return r;
}

static void json_hist_summary(FILE *f, const struct hist *h)
{
	double us = 1e3;
	fprintf(f,
	        "{\"count\": %" PRIu64 ", \"min\": %.1f, \"mean\": %.1f, \"p50\": %.1f, \"p90\": %.1f, "
	        "\"p99\": %.1f, \"p999\": %.1f, \"max\": %.1f}",
	        h->count, h->count ? (double)h->min_ns / us : 0.0,
	        h->count ? (double)h->sum_ns / (double)h->count / us : 0.0, (double)hist_quantile(h, 0.50) / us,
	        (double)hist_quantile(h, 0.90) / us, (double)hist_quantile(h, 0.99) / us,
	        (double)hist_quantile(h, 0.999) / us, (double)h->max_ns / us);
}

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static int cli_report(const struct client *cl, double elapsed_s)
{
	FILE *f = stdout;
	if (cl->out_path) {
		f = fopen(cl->out_path, "we");
		if (!f) {
			fprintf(stderr, "loadgen client: open %s: %s\n", cl->out_path, strerror(errno));
			return -errno;
		}
	}
	fprintf(f, "{\"label\": ");
	json_string(f, cl->label ? cl->label : "");
	fprintf(f, ", \"connect\": ");
	json_string(f, cl->connect_spec);
	fprintf(f, ", \"cc\": ");
	json_string(f, cl->cc ? cl->cc : "");
	fprintf(f,
	        ",\n \"rate\": %.3f, \"burst_factor\": %.3f, \"burst_ms\": %lu, \"burst_period_ms\": %lu, "
	        "\"duration_s\": %.3f, \"warmup_s\": %.3f, \"conns\": %lu, \"req_bytes\": %lu, "
	        "\"resp_bytes\": %lu,\n \"sent\": %" PRIu64 ", \"completed\": %" PRIu64 ", \"errors\": %" PRIu64
	        ", \"overflow\": %" PRIu64 ", \"incomplete\": %" PRIu64 ", \"conn_failures\": %" PRIu64
	        ", \"achieved_rate\": %.3f,\n \"t0_unix_ns\": %" PRId64 ",\n \"latency_us\": ",
	        cl->rate, cl->burst_factor, cl->burst_ms, cl->burst_period_ms, cl->duration_s, cl->warmup_s, cl->conns,
	        cl->req_bytes, cl->resp_bytes, cl->sent, cl->completed, cl->errors, cl->overflow, cl->incomplete,
	        cl->conn_failures, elapsed_s > 0 ? (double)cl->completed / elapsed_s : 0.0, cl->t0_real_ns);
	json_hist_summary(f, &cl->all);
	fprintf(f, ",\n \"send_lag_us\": ");
	json_hist_summary(f, &cl->lag);
	/* the distribution: (bucket upper bound in us, cumulative fraction) */
	fprintf(f, ",\n \"cdf\": [");
	uint64_t cum = 0;
	bool first = true;
	for (unsigned b = 0; b < cl->all.n_buckets && cl->all.count; b++) {
		if (!cl->all.buckets[b])
			continue;
		cum += cl->all.buckets[b];
		fprintf(f, "%s[%.1f, %.6f]", first ? "" : ", ", (double)hist_bucket_upper(&cl->all, b) / 1e3,
		        (double)cum / (double)cl->all.count);
		first = false;
	}
	fprintf(f, "],\n \"windows\": {\"ms\": %lu, \"count\": [", cl->window_ms);
	for (unsigned w = 0; w < cl->n_win; w++)
		fprintf(f, "%s%" PRIu64, w ? ", " : "", cl->win[w].count);
	const double qs[] = {0.5, 0.99};
	const char *names[] = {"p50_us", "p99_us"};
	for (unsigned k = 0; k < 2; k++) {
		fprintf(f, "], \"%s\": [", names[k]);
		for (unsigned w = 0; w < cl->n_win; w++) {
			if (cl->win[w].count)
				fprintf(f, "%s%.1f", w ? ", " : "", (double)hist_quantile(&cl->win[w], qs[k]) / 1e3);
			else
				fprintf(f, "%snull", w ? ", " : "");
		}
	}
	fprintf(f, "]}}\n");
	int r = 0;
	if (fflush(f) != 0 || ferror(f))
		r = -EIO;
	if (f != stdout && fclose(f) != 0)
		r = -EIO;
	return r;
}

/* The next send time after t (ns since t0) for an exponential draw e of
 * unit mean: advance until the integral of the rate from t reaches e (the
 * rate is piecewise constant with on/off bursts, constant without). */
static int64_t cli_next_send(const struct client *cl, int64_t t, double e)
{
	if (cl->burst_factor <= 1.0 || cl->burst_ms == 0)
		return t + (int64_t)(e / cl->rate * 1e9);
	const int64_t period = (int64_t)cl->burst_period_ms * NSEC_PER_MSEC;
	const int64_t on = (int64_t)cl->burst_ms * NSEC_PER_MSEC;
	const double duty = (double)on / (double)period;
	const double hi = cl->rate * cl->burst_factor;
	const double lo = cl->rate * (1.0 - cl->burst_factor * duty) / (1.0 - duty);
	for (;;) {
		int64_t phase = t % period, seg_end;
		double r;
		if (phase < on) {
			r = hi;
			seg_end = t - phase + on;
		} else {
			r = lo;
			seg_end = t - phase + period;
		}
		double cap = (double)(seg_end - t) / 1e9 * r;
		if (r > 0 && e <= cap)
			return t + (int64_t)(e / r * 1e9);
		e -= cap;
		t = seg_end;
	}
}

static int run_client(struct client *cl)
{
	int rc = 2;
	cl->ep = epoll_create1(EPOLL_CLOEXEC);
	cl->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	cl->c = calloc(cl->conns, sizeof(*cl->c));
	cl->n_win = (unsigned)ceil((cl->duration_s * 1e3) / (double)cl->window_ms);
	cl->win = calloc(cl->n_win ? cl->n_win : 1U, sizeof(*cl->win));
	if (cl->ep < 0 || cl->tfd < 0 || !cl->c || !cl->win || hist_init(&cl->all, 0) < 0 ||
	    hist_init(&cl->lag, 0) < 0) {
		fprintf(stderr, "loadgen client: setup: %s\n", strerror(errno ? errno : ENOMEM));
		goto out;
	}
	for (unsigned w = 0; w < cl->n_win; w++)
		if (hist_init(&cl->win[w], WIN_SHIFT) < 0)
			goto out;
	for (unsigned i = 0; i < cl->conns; i++)
		cl->c[i].fd = -1;
	if (cli_connect_all(cl) < 0)
		goto out;
	if (epoll_mod(cl->ep, EPOLL_CTL_ADD, cl->tfd, EPOLLIN, 0) < 0)
		goto out;

	uint64_t rng = cl->seed;
	cl->t0_ns = now_ns(CLOCK_MONOTONIC);
	cl->t0_real_ns = now_ns(CLOCK_REALTIME);
	cl->end_send_ns = cl->t0_ns + (int64_t)(cl->duration_s * 1e9);
	cl->warm_ns = cl->t0_ns + (int64_t)(cl->warmup_s * 1e9);
	int64_t drain_end = cl->end_send_ns + (int64_t)(cl->drain_s * 1e9);
	int64_t next = cl->t0_ns + cli_next_send(cl, 0, -log(rng_uniform_open(&rng)));
	static uint8_t buf[IO_CHUNK_BYTES];
	struct epoll_event evs[64];
	int64_t armed_at = -1;

	while (!g_stop) {
		int64_t now = now_ns(CLOCK_MONOTONIC);
		while (next <= now && next < cl->end_send_ns) {
			cli_send_one(cl, next);
			next = cl->t0_ns + cli_next_send(cl, next - cl->t0_ns, -log(rng_uniform_open(&rng)));
		}
		uint64_t outstanding = 0;
		unsigned alive = 0;
		for (unsigned i = 0; i < cl->conns; i++) {
			outstanding += cl->c[i].p_len;
			alive += !cl->c[i].dead;
		}
		if (alive == 0) {
			fprintf(stderr, "loadgen client: every connection failed\n");
			break;
		}
		if (next >= cl->end_send_ns && (outstanding == 0 || now >= drain_end)) {
			cl->incomplete = outstanding;
			break;
		}
		/* one absolute timer: the next send time, or the drain deadline */
		int64_t wake = next < cl->end_send_ns ? next : drain_end;
		if (wake != armed_at) {
			struct itimerspec its = {
			        .it_value = {.tv_sec = wake / NSEC_PER_SEC, .tv_nsec = wake % NSEC_PER_SEC}};
			if (timerfd_settime(cl->tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0) {
				fprintf(stderr, "loadgen client: timerfd: %s\n", strerror(errno));
				goto out;
			}
			armed_at = wake;
		}
		int n = epoll_wait(cl->ep, evs, 64, 1000);
		if (n < 0 && errno != EINTR) {
			fprintf(stderr, "loadgen client: epoll_wait: %s\n", strerror(errno));
			goto out;
		}
		for (int i = 0; i < n; i++) {
			if (evs[i].data.u64 == 0) {
				uint64_t exp;
				if (read(cl->tfd, &exp, sizeof(exp)) < 0 && errno != EAGAIN)
					goto out;
				continue;
			}
			struct cli_conn *c = &cl->c[evs[i].data.u64 - 1];
			if (c->dead)
				continue;
			if (evs[i].events & EPOLLIN) {
				for (;;) {
					ssize_t r = recv(c->fd, buf, sizeof(buf), 0);
					if (r > 0) {
						cli_input(cl, c, buf, (size_t)r);
						if (c->dead || (size_t)r < sizeof(buf))
							break;
						continue;
					}
					if (r == 0)
						cli_conn_fail(cl, c, "server closed the connection");
					else if (errno != EAGAIN && errno != EINTR)
						cli_conn_fail(cl, c, strerror(errno));
					break;
				}
			} else if (evs[i].events & (EPOLLERR | EPOLLHUP)) {
				cli_conn_fail(cl, c, "socket error");
			}
			if (!c->dead && (evs[i].events & EPOLLOUT))
				cli_flush(cl, c);
		}
	}
	if (g_stop) {
		uint64_t outstanding = 0;
		for (unsigned i = 0; i < cl->conns; i++)
			outstanding += cl->c[i].p_len;
		cl->incomplete = outstanding;
	}
	{
		double elapsed = (double)(now_ns(CLOCK_MONOTONIC) - cl->t0_ns) / 1e9;
		if (elapsed > cl->duration_s)
			elapsed = cl->duration_s;
		if (cli_report(cl, elapsed) < 0)
			goto out;
	}
	rc = (cl->errors || cl->conn_failures) ? 1 : 0;
out:
	if (cl->c) {
		for (unsigned i = 0; i < cl->conns; i++) {
			if (cl->c[i].fd >= 0)
				close(cl->c[i].fd);
			free(cl->c[i].out);
			free(cl->c[i].pend);
		}
		free(cl->c);
	}
	if (cl->win) {
		for (unsigned w = 0; w < cl->n_win; w++)
			hist_free(&cl->win[w]);
		free(cl->win);
	}
	hist_free(&cl->all);
	hist_free(&cl->lag);
	if (cl->tfd >= 0)
		close(cl->tfd);
	if (cl->ep >= 0)
		close(cl->ep);
	return rc;
}

/* --------------------------------------------------------------------- main */

/* ------------------------------------------------------------ token streams
 * LLM token streams (issue 30): `loadgen tokens-server` (in the inference
 * pod) writes one event of --event bytes to every connected stream in
 * lock-step every --period-ms (vLLM's SSE: one ~300-byte event per token,
 * every running stream in the same engine step); `loadgen tokens-client`
 * opens --streams connections and measures each event's one-way delay,
 * write -> read, on CLOCK_MONOTONIC (the lab's namespaces share it), and
 * the events missing: a gap in a stream's sequence, or an event stamped
 * before the end that had not arrived when the drain ended.
 * Event: {magic "AQLT" u32, seq u64, send_ns u64} padded with 'x' to the
 * event size, ending "\n\n". A partial write keeps its rest for the next
 * tick (per stream, TOK_PENDING_MAX); an event that does not fit is
 * skipped (the client sees the gap). */
static void usage(FILE *f);

#define TOK_MAGIC       0x544c5141U /* "AQLT" */
#define TOK_HDR_BYTES   20U
#define TOK_EVENT_MIN   32U
#define TOK_EVENT_MAX   16384U
#define TOK_STREAMS_MAX 4096U
#define TOK_PENDING_MAX 65536U

struct tok_conn {
	int fd;
	uint32_t n_pending;
	uint8_t pending[TOK_PENDING_MAX];
};

static void tok_event(uint8_t *ev, unsigned size, uint64_t seq, int64_t send_ns)
{
	memset(ev, 'x', size);
	put_u32(ev, TOK_MAGIC);
	put_u64(ev + 4, seq);
	put_u64(ev + 12, (uint64_t)send_ns);
	ev[size - 2] = '\n';
	ev[size - 1] = '\n';
}

/* Write what is pending, then this event; false when the stream is gone. */
static bool tok_write(struct tok_conn *c, const uint8_t *ev, unsigned size, uint64_t *skipped)
{
	if (c->n_pending) {
		ssize_t w = send(c->fd, c->pending, c->n_pending, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return false;
		if (w > 0) {
			memmove(c->pending, c->pending + w, c->n_pending - (size_t)w);
			c->n_pending -= (uint32_t)w;
		}
	}
	if (c->n_pending) {
		if (c->n_pending + size > TOK_PENDING_MAX) {
			(*skipped)++;
			return true;
		}
		memcpy(c->pending + c->n_pending, ev, size);
		c->n_pending += size;
		return true;
	}
	ssize_t w = send(c->fd, ev, size, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
		return false;
	if (w < 0)
		w = 0;
	if ((size_t)w < size) {
		memcpy(c->pending, ev + w, size - (size_t)w);
		c->n_pending = size - (uint32_t)w;
	}
	return true;
}

static int run_tokens_server(const char *listen_spec, const char *cc, unsigned event_bytes, unsigned period_ms)
{
	int lfd = listen_on(listen_spec, "tokens-server");
	if (lfd < 0)
		return 2;
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	struct itimerspec its = {
	        .it_interval = {.tv_sec = period_ms / 1000, .tv_nsec = (long)(period_ms % 1000) * NSEC_PER_MSEC}};
	its.it_value = its.it_interval;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (tfd < 0 || timerfd_settime(tfd, 0, &its, NULL) < 0 || ep < 0 ||
	    epoll_mod(ep, EPOLL_CTL_ADD, lfd, EPOLLIN, 0) < 0 || epoll_mod(ep, EPOLL_CTL_ADD, tfd, EPOLLIN, 1) < 0) {
		fprintf(stderr, "loadgen tokens-server: timer/epoll: %s\n", strerror(errno));
		return 2;
	}
	printf("listening %s\n", listen_spec);
	fflush(stdout);
	static struct tok_conn *conns[TOK_STREAMS_MAX];
	unsigned n = 0;
	uint64_t seq = 0, skipped = 0;
	uint8_t ev[TOK_EVENT_MAX];
	struct epoll_event evs[16];
	while (!g_stop) {
		int k = epoll_wait(ep, evs, 16, 500);
		if (k < 0 && errno != EINTR) {
			fprintf(stderr, "loadgen tokens-server: epoll_wait: %s\n", strerror(errno));
			return 2;
		}
		for (int i = 0; i < k; i++) {
			if (evs[i].data.u64 == 0) {
				int fd;
				while ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
					struct tok_conn *c = n < TOK_STREAMS_MAX ? malloc(sizeof(*c)) : NULL;
					if (!c || tune_socket(fd, cc) < 0) {
						free(c);
						close(fd);
						continue;
					}
					c->fd = fd;
					c->n_pending = 0;
					conns[n++] = c;
				}
				continue;
			}
			uint64_t ticks;
			if (read(tfd, &ticks, sizeof(ticks)) != sizeof(ticks))
				continue;
			seq++;
			/* one engine step: every stream's event, each stamped as it is written */
			for (unsigned j = 0; j < n;) {
				tok_event(ev, event_bytes, seq, now_ns(CLOCK_MONOTONIC));
				if (tok_write(conns[j], ev, event_bytes, &skipped)) {
					j++;
					continue;
				}
				close(conns[j]->fd);
				free(conns[j]);
				conns[j] = conns[--n];
			}
		}
	}
	fprintf(stderr, "loadgen tokens-server: %" PRIu64 " steps, %" PRIu64 " events skipped (stream backlog)\n", seq,
	        skipped);
	return 0;
}

struct tok_stream {
	int fd;
	uint32_t have;
	uint64_t last_seq; /* 0 = none yet */
	uint8_t buf[TOK_EVENT_MAX];
};

static int run_tokens_client(const char *connect_spec, const char *cc, unsigned streams, unsigned event_bytes,
                             double duration_s, double warmup_s, double drain_s, const char *label,
                             const char *out_path)
{
	struct addrinfo *ai = NULL;
	struct hist h = {0};
	if (resolve(connect_spec, false, &ai) < 0 || hist_init(&h, 0) < 0)
		return 2;
	struct tok_stream *st = calloc(streams, sizeof(*st));
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (!st || ep < 0)
		return 2;
	for (unsigned i = 0; i < streams; i++) {
		int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || tune_socket(fd, cc) < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 ||
		    set_nonblock(fd) < 0 || epoll_mod(ep, EPOLL_CTL_ADD, fd, EPOLLIN, i) < 0) {
			fprintf(stderr, "loadgen tokens-client: stream %u to %s: %s\n", i, connect_spec,
			        strerror(errno));
			return 2;
		}
		st[i].fd = fd;
	}
	freeaddrinfo(ai);
	int64_t t0 = now_ns(CLOCK_MONOTONIC), t0_real = now_ns(CLOCK_REALTIME);
	int64_t a = t0 + (int64_t)(warmup_s * 1e9), b = t0 + (int64_t)(duration_s * 1e9);
	int64_t stop = b + (int64_t)(drain_s * 1e9);
	uint64_t events = 0, missing = 0, bad = 0, closed = 0, last_in_window = 0;
	struct epoll_event evs[64];
	for (;;) {
		int64_t now = now_ns(CLOCK_MONOTONIC);
		if (now >= stop || g_stop || closed == streams)
			break;
		int k = epoll_wait(ep, evs, 64, (int)((stop - now) / NSEC_PER_MSEC) + 1);
		for (int i = 0; i < k; i++) {
			struct tok_stream *s = &st[evs[i].data.u64];
			ssize_t r = read(s->fd, s->buf + s->have, event_bytes - s->have);
			if (r <= 0) {
				if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
					epoll_ctl(ep, EPOLL_CTL_DEL, s->fd, NULL);
					closed++;
				}
				continue;
			}
			s->have += (uint32_t)r;
			if (s->have < event_bytes)
				continue;
			s->have = 0;
			now = now_ns(CLOCK_MONOTONIC);
			if (get_u32(s->buf) != TOK_MAGIC) {
				bad++;
				continue;
			}
			uint64_t seq = get_u64(s->buf + 4);
			int64_t sent = (int64_t)get_u64(s->buf + 12);
			if (sent >= a && sent < b) {
				hist_record(&h, (uint64_t)(now > sent ? now - sent : 0));
				events++;
				if (s->last_seq && seq > s->last_seq + 1)
					missing += seq - s->last_seq - 1;
				if (seq > last_in_window)
					last_in_window = seq;
			}
			s->last_seq = seq;
		}
	}
	/* the tail: every stream had each step up to the last one stamped in the window */
	for (unsigned i = 0; i < streams; i++)
		if (st[i].last_seq < last_in_window)
			missing += last_in_window - st[i].last_seq;
	FILE *f = out_path ? fopen(out_path, "we") : stdout;
	if (!f) {
		fprintf(stderr, "loadgen tokens-client: open %s: %s\n", out_path, strerror(errno));
		return 2;
	}
	fprintf(f, "{\"label\": ");
	json_string(f, label ? label : "");
	fprintf(f,
	        ", \"streams\": %u, \"event_bytes\": %u, \"duration_s\": %.3f, \"warmup_s\": %.3f, \"events\": %" PRIu64
	        ", \"missing\": %" PRIu64 ", \"bad\": %" PRIu64 ", \"closed\": %" PRIu64 ", \"t0_unix_ns\": %" PRId64
	        ",\n \"delay_us\": ",
	        streams, event_bytes, duration_s, warmup_s, events, missing, bad, closed, t0_real);
	json_hist_summary(f, &h);
	fprintf(f, "}\n");
	if (f != stdout)
		fclose(f);
	for (unsigned i = 0; i < streams; i++)
		close(st[i].fd);
	free(st);
	hist_free(&h);
	return missing || bad || events == 0 ? 1 : 0;
}

static int tokens_main(int argc, char **argv)
{
	bool server = !strcmp(argv[1], "tokens-server");
	const char *listen_spec = "0.0.0.0:7100", *connect_spec = NULL, *cc = NULL, *label = NULL, *out = NULL;
	unsigned long streams = 64, event_bytes = 300, period_ms = 25;
	double duration_s = 0, warmup_s = 0.5, drain_s = 1.0;
	static const struct option opts[] = {
	        {"listen", required_argument, NULL, 'l'},    {"connect", required_argument, NULL, 'c'},
	        {"streams", required_argument, NULL, 'n'},   {"event", required_argument, NULL, 'e'},
	        {"period-ms", required_argument, NULL, 'p'}, {"duration", required_argument, NULL, 'd'},
	        {"warmup", required_argument, NULL, 'w'},    {"drain", required_argument, NULL, 'D'},
	        {"cc", required_argument, NULL, 'C'},        {"label", required_argument, NULL, 'L'},
	        {"out", required_argument, NULL, 'o'},       {NULL, 0, NULL, 0},
	};
	int o, li = 0;
	optind = 2;
	while ((o = getopt_long(argc, argv, "", opts, &li)) != -1) {
		int bad = 0;
		switch (o) {
		case 'l':
			listen_spec = optarg;
			break;
		case 'c':
			connect_spec = optarg;
			break;
		case 'n':
			bad = parse_uint(optarg, 1, TOK_STREAMS_MAX, &streams);
			break;
		case 'e':
			bad = parse_uint(optarg, TOK_EVENT_MIN, TOK_EVENT_MAX, &event_bytes);
			break;
		case 'p':
			bad = parse_uint(optarg, 1, 10000, &period_ms);
			break;
		case 'd':
			bad = parse_double(optarg, 0.001, DURATION_MAX_S, &duration_s);
			break;
		case 'w':
			bad = parse_double(optarg, 0, DURATION_MAX_S, &warmup_s);
			break;
		case 'D':
			bad = parse_double(optarg, 0, 60, &drain_s);
			break;
		case 'C':
			cc = optarg;
			bad = strlen(optarg) >= CC_NAME_MAX ? -EINVAL : 0;
			break;
		case 'L':
			label = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		default:
			usage(stderr);
			return 2;
		}
		if (bad) {
			fprintf(stderr, "loadgen: invalid value '%s' for --%s\n", optarg, opts[li].name);
			return 2;
		}
	}
	signals_setup();
	if (server)
		return run_tokens_server(listen_spec, cc, (unsigned)event_bytes, (unsigned)period_ms);
	if (!connect_spec || duration_s <= 0 || warmup_s >= duration_s) {
		fprintf(stderr,
		        "loadgen tokens-client: --connect and --duration (longer than --warmup) are required\n");
		return 2;
	}
	return run_tokens_client(connect_spec, cc, (unsigned)streams, (unsigned)event_bytes, duration_s, warmup_s,
	                         drain_s, label, out);
}

static void usage(FILE *f)
{
	fprintf(f, "usage:\n"
	           "  loadgen server [--listen ADDR:PORT] [--cc NAME]\n"
	           "  loadgen client --connect ADDR:PORT --rate RPS --duration S [--conns N] [--req BYTES]\n"
	           "                 [--resp BYTES] [--warmup S] [--drain S] [--window-ms MS] [--cc NAME]\n"
	           "                 [--seed N] [--label TEXT] [--out FILE]\n"
	           "                 [--burst-factor F --burst-ms MS --burst-period-ms MS]\n"
	           "Open loop: Poisson arrivals at RPS; latency from each request's intended send time to the\n"
	           "last byte of its response. With --burst-factor F the rate is F x RPS during the first\n"
	           "--burst-ms of every --burst-period-ms (default 1000), lower in between (mean RPS).\n"
	           "The client prints one JSON object (stdout or --out): counts,\n"
	           "latency_us {p50,p90,p99,p999,max}, cdf, and per-window p50/p99 (windows by send time).\n"
	           "Exit: 0 ok, 1 requests failed (errors > 0), 2 usage or setup error.\n"
	           "  loadgen tokens-server [--listen ADDR:PORT] [--event BYTES] [--period-ms MS] [--cc NAME]\n"
	           "  loadgen tokens-client --connect ADDR:PORT --duration S [--streams N] [--event BYTES]\n"
	           "                 [--warmup S] [--drain S] [--cc NAME] [--label TEXT] [--out FILE]\n"
	           "Token streams: the server writes one event to every stream in lock-step every period\n"
	           "(default 300 bytes every 25 ms); the client reports each event's one-way delay\n"
	           "delay_us {p50,p99,p999,max} and the events missing (exit 1 when any is).\n");
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	const char *mode = argv[1];
	if (!strcmp(mode, "tokens-server") || !strcmp(mode, "tokens-client"))
		return tokens_main(argc, argv);
	bool server = !strcmp(mode, "server");
	if (!server && strcmp(mode, "client") != 0) {
		fprintf(stderr, "loadgen: unknown mode '%s' (server or client)\n", mode);
		usage(stderr);
		return 2;
	}
	struct client cl = {
	        .conns = 8,
	        .req_bytes = 64,
	        .resp_bytes = 8192,
	        .window_ms = 100,
	        .drain_s = 2.0,
	        .seed = 1,
	        .burst_factor = 1.0,
	        .burst_period_ms = 1000,
	        .ep = -1,
	        .tfd = -1,
	};
	const char *listen_spec = "0.0.0.0:7000";
	static const struct option opts[] = {
	        {"listen", required_argument, NULL, 'l'},
	        {"connect", required_argument, NULL, 'c'},
	        {"rate", required_argument, NULL, 'r'},
	        {"duration", required_argument, NULL, 'd'},
	        {"conns", required_argument, NULL, 'n'},
	        {"req", required_argument, NULL, 'q'},
	        {"resp", required_argument, NULL, 'p'},
	        {"warmup", required_argument, NULL, 'w'},
	        {"drain", required_argument, NULL, 'D'},
	        {"window-ms", required_argument, NULL, 'W'},
	        {"cc", required_argument, NULL, 'C'},
	        {"seed", required_argument, NULL, 's'},
	        {"label", required_argument, NULL, 'L'},
	        {"out", required_argument, NULL, 'o'},
	        {"burst-factor", required_argument, NULL, 'F'},
	        {"burst-ms", required_argument, NULL, 'B'},
	        {"burst-period-ms", required_argument, NULL, 'P'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	int o, longindex = 0;
	unsigned long ul = 0;
	optind = 2;
	while ((o = getopt_long(argc, argv, "h", opts, &longindex)) != -1) {
		int bad = 0;
		switch (o) {
		case 'l':
			listen_spec = optarg;
			break;
		case 'c':
			cl.connect_spec = optarg;
			break;
		case 'r':
			bad = parse_double(optarg, 0.001, RATE_MAX, &cl.rate);
			break;
		case 'd':
			bad = parse_double(optarg, 0.001, DURATION_MAX_S, &cl.duration_s);
			break;
		case 'n':
			bad = parse_uint(optarg, 1, CONNS_MAX, &cl.conns);
			break;
		case 'q':
			bad = parse_uint(optarg, REQ_HDR_BYTES, REQ_MAX_BYTES, &cl.req_bytes);
			break;
		case 'p':
			bad = parse_uint(optarg, RESP_HDR_BYTES, RESP_MAX_BYTES, &cl.resp_bytes);
			break;
		case 'w':
			bad = parse_double(optarg, 0, DURATION_MAX_S, &cl.warmup_s);
			break;
		case 'D':
			bad = parse_double(optarg, 0, 60, &cl.drain_s);
			break;
		case 'W':
			bad = parse_uint(optarg, 1, 60000, &cl.window_ms);
			break;
		case 'C':
			if (strlen(optarg) >= CC_NAME_MAX)
				bad = -EINVAL;
			cl.cc = optarg;
			break;
		case 's':
			bad = parse_uint(optarg, 0, ULONG_MAX, &ul);
			cl.seed = ul;
			break;
		case 'F':
			bad = parse_double(optarg, 1.0, 1000.0, &cl.burst_factor);
			break;
		case 'B':
			bad = parse_uint(optarg, 0, 60000, &cl.burst_ms);
			break;
		case 'P':
			bad = parse_uint(optarg, 1, 60000, &cl.burst_period_ms);
			break;
		case 'L':
			cl.label = optarg;
			break;
		case 'o':
			cl.out_path = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
		if (bad) {
			fprintf(stderr, "loadgen: invalid value '%s' for --%s\n", optarg, opts[longindex].name);
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "loadgen: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	signals_setup();

	if (server)
		return run_server(listen_spec, cl.cc);
	if (!cl.connect_spec || cl.rate <= 0 || cl.duration_s <= 0) {
		fprintf(stderr, "loadgen client: --connect, --rate and --duration are required\n");
		usage(stderr);
		return 2;
	}
	if (cl.warmup_s >= cl.duration_s) {
		fprintf(stderr, "loadgen client: --warmup %.3f must be shorter than --duration %.3f\n", cl.warmup_s,
		        cl.duration_s);
		return 2;
	}
	if (cl.burst_factor > 1.0 && cl.burst_ms > 0 &&
	    (cl.burst_ms >= cl.burst_period_ms || cl.burst_factor * (double)cl.burst_ms > (double)cl.burst_period_ms)) {
		fprintf(stderr,
		        "loadgen client: --burst-factor %.3f x --burst-ms %lu must not exceed --burst-period-ms %lu "
		        "(the mean rate would be above --rate)\n",
		        cl.burst_factor, cl.burst_ms, cl.burst_period_ms);
		return 2;
	}
	return run_client(&cl);
}
