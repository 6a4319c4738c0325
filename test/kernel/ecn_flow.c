/* ecn_flow.c — a bulk TCP flow for the functional ECN check in the
 * full-kernel VM (test/kernel/ecn.sh). "recv PORT" accepts one connection
 * and drains it; "send ADDR PORT SECONDS" writes as fast as the socket takes
 * for SECONDS and prints what the sender's TCP stack saw as key=value lines:
 * the congestion control in use, ECN negotiated, CE deliveries echoed back,
 * the lowest ssthresh and cwnd sampled while sending, DCTCP's own state.
 * Functional only: timing under emulation means nothing. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHUNK_BYTES     (64 * 1024)
#define CONNECT_WAIT_MS 5000
#define SEND_TIMEOUT_MS 200
#define SECONDS_MAX     600

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int parse_uint(const char *s, unsigned max, unsigned *ret)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > max)
		return -EINVAL;
	*ret = (unsigned)v;
	return 0;
}

static int do_recv(unsigned port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	static char buf[CHUNK_BYTES];
	unsigned long long total = 0;
	int one = 1, ls, c;

	ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 1) < 0) {
		fprintf(stderr, "ecn_flow recv: listen on port %u: %s\n", port, strerror(errno));
		return 1;
	}
	printf("listening=%u\n", port);
	fflush(stdout);
	c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
	if (c < 0) {
		fprintf(stderr, "ecn_flow recv: accept: %s\n", strerror(errno));
		close(ls);
		return 1;
	}
	for (;;) {
		ssize_t n = read(c, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		total += (unsigned long long)n;
	}
	printf("recv_bytes=%llu\n", total);
	close(c);
	close(ls);
	return 0;
}

static int connect_retry(const char *addr, unsigned port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	uint64_t deadline = now_ms() + CONNECT_WAIT_MS;

	if (inet_pton(AF_INET, addr, &a.sin_addr) != 1) {
		fprintf(stderr, "ecn_flow send: bad IPv4 address '%s'\n", addr);
		return -1;
	}
	for (;;) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -1;
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
			return fd;
		close(fd);
		if (errno != ECONNREFUSED || now_ms() > deadline) {
			fprintf(stderr, "ecn_flow send: connect %s:%u: %s\n", addr, port, strerror(errno));
			return -1;
		}
		usleep(50 * 1000);
	}
}

static int do_send(const char *addr, unsigned port, unsigned seconds)
{
	static char buf[CHUNK_BYTES];
	struct timeval tv = {.tv_sec = 0, .tv_usec = SEND_TIMEOUT_MS * 1000};
	struct tcp_info ti;
	union tcp_cc_info cc_info;
	char cc[32] = "";
	socklen_t len;
	unsigned long long sent = 0;
	uint32_t cwnd_max = 0, cwnd_min = UINT32_MAX, ssthresh_min = UINT32_MAX;
	uint64_t deadline;
	int fd;

	fd = connect_retry(addr, port);
	if (fd < 0)
		return 1;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	memset(buf, 'x', sizeof(buf));
	deadline = now_ms() + (uint64_t)seconds * 1000;
	while (now_ms() < deadline) {
		ssize_t n = write(fd, buf, sizeof(buf));
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			fprintf(stderr, "ecn_flow send: write: %s\n", strerror(errno));
			close(fd);
			return 1;
		}
		if (n > 0)
			sent += (unsigned long long)n;
		len = sizeof(ti);
		if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0) {
			if (ti.tcpi_snd_cwnd > cwnd_max)
				cwnd_max = ti.tcpi_snd_cwnd;
			/* after the first reduction only: slow start begins at 10 */
			if (cwnd_max > 0 && ti.tcpi_snd_cwnd < cwnd_min)
				cwnd_min = ti.tcpi_snd_cwnd;
			if (ti.tcpi_snd_ssthresh < ssthresh_min)
				ssthresh_min = ti.tcpi_snd_ssthresh;
		}
	}

	len = sizeof(cc);
	if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, &len) < 0)
		snprintf(cc, sizeof(cc), "?");
	cc[sizeof(cc) - 1] = '\0';
	len = sizeof(ti);
	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0) {
		fprintf(stderr, "ecn_flow send: TCP_INFO: %s\n", strerror(errno));
		close(fd);
		return 1;
	}
	printf("cc=%s\n", cc);
	printf("sent_bytes=%llu\n", sent);
	printf("ecn_negotiated=%d\n", (ti.tcpi_options & TCPI_OPT_ECN) ? 1 : 0);
	printf("delivered=%u\n", ti.tcpi_delivered);
	printf("delivered_ce=%u\n", ti.tcpi_delivered_ce);
	printf("total_retrans=%u\n", ti.tcpi_total_retrans);
	printf("snd_cwnd=%u\n", ti.tcpi_snd_cwnd);
	printf("snd_ssthresh=%u\n", ti.tcpi_snd_ssthresh);
	printf("cwnd_max=%u\n", cwnd_max);
	printf("cwnd_min_after_max=%u\n", cwnd_min == UINT32_MAX ? 0 : cwnd_min);
	printf("ssthresh_min=%u\n", ssthresh_min);
	len = sizeof(cc_info);
	memset(&cc_info, 0, sizeof(cc_info));
	if (strcmp(cc, "dctcp") == 0 && getsockopt(fd, IPPROTO_TCP, TCP_CC_INFO, &cc_info, &len) == 0) {
		printf("dctcp_enabled=%u\n", cc_info.dctcp.dctcp_enabled);
		printf("dctcp_alpha=%u\n", cc_info.dctcp.dctcp_alpha);
		printf("dctcp_ab_ecn=%u\n", cc_info.dctcp.dctcp_ab_ecn);
		printf("dctcp_ab_tot=%u\n", cc_info.dctcp.dctcp_ab_tot);
	}
	fflush(stdout);
	shutdown(fd, SHUT_WR);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned port, seconds;

	if (argc == 3 && strcmp(argv[1], "recv") == 0 && parse_uint(argv[2], 65535, &port) == 0)
		return do_recv(port);
	if (argc == 5 && strcmp(argv[1], "send") == 0 && parse_uint(argv[3], 65535, &port) == 0 &&
	    parse_uint(argv[4], SECONDS_MAX, &seconds) == 0)
		return do_send(argv[2], port, seconds);
	fprintf(stderr, "usage: ecn_flow recv PORT | ecn_flow send IPV4 PORT SECONDS\n");
	return 2;
}
