/* mq_order.c — who leaves a queue first, for the multi-queue check of the
 * full-kernel VM (test_apply's node_mq_mixed_backlog, on the VM's virtio-net
 * NIC whose emulated tx drains slower than the guest sends, so its qdisc
 * backlogs).
 *
 *   mq_order IFNAME TRAIN_SRC INF_SRC DST
 *
 * A bulk UDP flow from TRAIN_SRC to DST:9, as fast as its socket takes;
 * once it has had time to build a backlog, a second bulk flow from INF_SRC
 * joins it for a while; then both stop and the queue drains. Both senders
 * run on CPU 0, so both use the tx queue XPS maps to CPU 0. Every packet
 * carries its flow and sequence number. An AF_PACKET socket on IFNAME sees
 * outgoing packets as the qdisc hands them to the driver: the dequeue
 * order. From it: the run of consecutive INF_SRC dequeues the median
 * INF_SRC packet left in (inf_run_median: long when INF_SRC's class is
 * served first whenever it has packets, 1-2 when a fair queue alternates
 * the flows); how many TRAIN_SRC packets sent before the first INF_SRC packet left
 * after it (first_jumped: the training backlog it passed); in the span from
 * the first to the last dequeued INF_SRC packet, each flow's share. Prints
 * key=value lines. Functional only: no timing is reported or judged. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAGIC        0x61717165u /* "aqqe" */
#define PORT         9
#define PAYLOAD      1400
#define SNDBUF       (8 << 20) /* the qdisc limits the backlog, not the socket */
#define RECORDS_MAX  (1u << 20)
#define WARMUP_MS    800
#define OVERLAP_MS   1000
#define IDLE_MS      800 /* drained: nothing left the queue for this long */
#define DRAIN_MAX_MS 60000

enum { TRAIN, INF };

struct tag {
	uint32_t magic;
	uint32_t flow;
	uint32_t seq;
	uint32_t ref; /* INF: TRAIN packets sent before it */
};

struct sender {
	int fd, flow;
	pthread_t thread;
	atomic_bool stop;
};

static atomic_uint sent[2];
static atomic_bool stop_capture;
static struct tag *recs;
static _Atomic unsigned n_recs;
static struct in_addr dst_addr;
static int cap_fd = -1;

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void pin_cpu0(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	(void)sched_setaffinity(0, sizeof(set), &set);
}

static int udp_from(const char *src)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), sz = SNDBUF;

	if (fd < 0 || inet_pton(AF_INET, src, &a.sin_addr) != 1 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		fprintf(stderr, "mq_order: socket bound to %s: %s\n", src, strerror(errno));
		exit(2);
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)); /* past wmem_max */
	return fd;
}

static void *send_main(void *arg)
{
	struct sender *s = arg;
	struct sockaddr_in d = {.sin_family = AF_INET, .sin_port = htons(PORT), .sin_addr = dst_addr};
	char buf[PAYLOAD] = {0};

	pin_cpu0();
	while (!atomic_load(&s->stop)) {
		struct tag t = {MAGIC, (uint32_t)s->flow, atomic_load(&sent[s->flow]), atomic_load(&sent[TRAIN])};

		memcpy(buf, &t, sizeof(t));
		if (sendto(s->fd, buf, sizeof(buf), 0, (struct sockaddr *)&d, sizeof(d)) == (ssize_t)sizeof(buf))
			atomic_store(&sent[s->flow], t.seq + 1);
	}
	return NULL;
}

static void *capture_main(void *arg)
{
	unsigned char frame[2048];

	(void)arg;
	while (!atomic_load(&stop_capture)) {
		struct sockaddr_ll from = {0};
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(cap_fd, frame, sizeof(frame), 0, (struct sockaddr *)&from, &fl);
		const struct iphdr *ip = (const struct iphdr *)frame;
		const struct udphdr *udp;
		struct tag t;

		if (n < 0)
			continue; /* the receive timeout: look at the stop flag */
		if (from.sll_pkttype != PACKET_OUTGOING || from.sll_protocol != htons(ETH_P_IP) ||
		    n < (ssize_t)(sizeof(*ip) + sizeof(*udp) + sizeof(t)))
			continue;
		if (ip->protocol != IPPROTO_UDP || ip->daddr != dst_addr.s_addr ||
		    (size_t)n < ip->ihl * 4u + sizeof(*udp) + sizeof(t))
			continue;
		udp = (const struct udphdr *)(frame + ip->ihl * 4);
		if (ntohs(udp->dest) != PORT)
			continue;
		memcpy(&t, (const unsigned char *)udp + sizeof(*udp), sizeof(t));
		if (t.magic == MAGIC && t.flow <= INF && n_recs < RECORDS_MAX)
			recs[n_recs++] = t;
	}
	return NULL;
}

static int cmp_uint(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return x < y ? -1 : x > y;
}

static void start(struct sender *s, const char *src, int flow)
{
	s->fd = udp_from(src);
	s->flow = flow;
	atomic_store(&s->stop, false);
	if (pthread_create(&s->thread, NULL, send_main, s) != 0) {
		fprintf(stderr, "mq_order: pthread_create failed\n");
		exit(2);
	}
}

static void stop(struct sender *s)
{
	atomic_store(&s->stop, true);
	pthread_join(s->thread, NULL);
}

int main(int argc, char **argv)
{
	struct sockaddr_ll ll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL)};
	struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
	struct tpacket_stats st = {0};
	socklen_t sl = sizeof(st);
	unsigned seen[2] = {0, 0}, span[2] = {0, 0}, first = 0, last = 0, jumped = 0;
	bool any_inf = false;
	struct sender train, inf;
	pthread_t cap;
	int rcvbuf = 32 << 20;

	if (argc != 5 || inet_pton(AF_INET, argv[4], &dst_addr) != 1) {
		fprintf(stderr, "usage: mq_order IFNAME TRAIN_SRC INF_SRC DST\n");
		return 2;
	}
	ll.sll_ifindex = (int)if_nametoindex(argv[1]);
	recs = calloc(RECORDS_MAX, sizeof(*recs));
	/* ETH_P_ALL: only those taps see outgoing packets */
	cap_fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_ALL));
	if (!recs || ll.sll_ifindex == 0 || cap_fd < 0 || bind(cap_fd, (struct sockaddr *)&ll, sizeof(ll)) < 0) {
		fprintf(stderr, "mq_order: capture on %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	(void)setsockopt(cap_fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf));
	(void)setsockopt(cap_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (pthread_create(&cap, NULL, capture_main, NULL) != 0)
		return 2;
	start(&train, argv[2], TRAIN);
	sleep_ms(WARMUP_MS);
	start(&inf, argv[3], INF);
	sleep_ms(OVERLAP_MS);
	stop(&inf);
	stop(&train);
	for (unsigned waited = 0, idle = 0, before = n_recs; idle < IDLE_MS && waited < DRAIN_MAX_MS; waited += 100) {
		sleep_ms(100);
		idle = n_recs == before ? idle + 100 : 0;
		before = n_recs;
	}
	atomic_store(&stop_capture, true);
	pthread_join(cap, NULL);
	(void)getsockopt(cap_fd, SOL_PACKET, PACKET_STATISTICS, &st, &sl);

	for (unsigned i = 0; i < n_recs; i++) {
		seen[recs[i].flow]++;
		if (recs[i].flow == INF) {
			if (!any_inf)
				first = i;
			any_inf = true;
			last = i;
		}
	}
	if (any_inf) {
		for (unsigned i = first; i <= last; i++)
			span[recs[i].flow]++;
		for (unsigned i = first + 1; i < n_recs; i++)
			jumped += recs[i].flow == TRAIN && recs[i].seq < recs[first].ref;
	}
	/* runs: per INF packet, the length of its run of consecutive INF
	 * dequeues; the median packet's run is long when INF is served as long
	 * as it has packets, 1-2 when a fair queue alternates */
	unsigned *run = calloc(seen[INF] + 1, sizeof(*run)), n_run = 0;

	if (!run)
		return 2;
	for (unsigned i = 0; i < n_recs;) {
		unsigned j = i;

		while (j < n_recs && recs[j].flow == recs[i].flow)
			j++;
		for (unsigned k = i; k < j && recs[i].flow == INF; k++)
			run[n_run++] = j - i;
		i = j;
	}
	if (n_run) /* runs are listed in order, not sorted: sort for the median */
		qsort(run, n_run, sizeof(*run), cmp_uint);
	printf("inf_run_median=%u\n", n_run ? run[n_run / 2] : 0);
	free(run);
	/* the dequeue order as runs of one flow ("T120 I45 T3 ..."), for the log */
	printf("runs=");
	for (unsigned i = 0, runs = 0; i < n_recs && runs < 80; runs++) {
		unsigned j = i;

		while (j < n_recs && recs[j].flow == recs[i].flow)
			j++;
		printf("%s%c%u", runs ? " " : "", recs[i].flow == INF ? 'I' : 'T', j - i);
		i = j;
	}
	printf("\n");
	printf("train_sent=%u\ninf_sent=%u\ntrain_seen=%u\ninf_seen=%u\ncapture_drops=%u\n", atomic_load(&sent[TRAIN]),
	       atomic_load(&sent[INF]), seen[TRAIN], seen[INF], st.tp_drops);
	printf("span_inf=%u\nspan_train=%u\ninf_share_pct=%u\nfirst_jumped=%u\n", span[INF], span[TRAIN],
	       span[INF] + span[TRAIN] ? span[INF] * 100 / (span[INF] + span[TRAIN]) : 0, jumped);
	free(recs);
	return 0;
}
